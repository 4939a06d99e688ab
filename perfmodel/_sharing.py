"""Numba helpers of flows sharing resources max-min fairly (:mod:`perfmodel._cluster_kernel`'s parts).

Progressive filling over items that stand for ``count`` equal flows each (a class of flows of one
path; or one flow of a handoff alone), in the operation order of :func:`perfmodel._maxmin.maxmin_rates`
(repeatedly, the resources of the smallest fair share fix the rate of every unfrozen item on them);
a handoff alone in the cluster (:func:`perfmodel._maxmin.simulate`); the pairing heap of a class's
flows (threaded through the flow pool's slots) and the indexed heap of the classes by next end.
Helpers read their arguments' fields by name (the records are :mod:`perfmodel._cluster_kernel`'s).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._kernels import loop_helper

_SATURATED = 1e-9  # a resource is full when its flows' rates reach its capacity within this (relative)
_NIL = -1


# --- max-min fair rates by progressive filling ----------------------------------------------------------

@loop_helper
def _fill(m, q, sc):
    """Max-min rates (``sc.rates``) of ``q`` items over ``m`` local resources: repeatedly the resources of the
    smallest fair share (capacity left over unfrozen flows) fix the rate of every unfrozen item on them
    (:func:`perfmodel._maxmin.maxmin_rates` with an item of ``count`` equal flows). No resource: ``inf``."""
    left, free, frozen, rates = sc.left, sc.free, sc.frozen, sc.rates
    for j in range(m):
        left[j] = sc.caps[j]
        free[j] = 0
    for k in range(q):
        frozen[k] = False
        rates[k] = np.inf
        for x in range(sc.path_off[k], sc.path_off[k + 1]):
            free[sc.path[x]] += sc.counts[k]
    while True:
        share = np.inf
        for j in range(m):
            if free[j] > 0 and left[j] / free[j] < share:
                share = left[j] / free[j]
        if share == np.inf:  # no resource left, or of unlimited capacity: the flows left are unlimited too
            return
        ties = 0
        for j in range(m):
            if free[j] > 0 and left[j] / free[j] == share:
                sc.ties[ties] = j
                ties += 1
        for t in range(ties):
            j = sc.ties[t]
            for x in range(sc.res_off[j], sc.res_off[j + 1]):
                k = sc.res_items[x]
                if frozen[k]:
                    continue
                frozen[k] = True
                rates[k] = share
                for y in range(sc.path_off[k], sc.path_off[k + 1]):
                    s = sc.path[y]
                    if free[s] > 0:
                        left[s] = max(left[s] - share * sc.counts[k], 0.0)
                        free[s] -= sc.counts[k]


@loop_helper
def _local_paths(q, st, sc, stamp, m):
    """Local paths of the items ``sc.items[:q]`` (classes) and each local resource's items; resources not yet
    collected under ``stamp`` are added after the first ``m``. Returns the number of local resources."""
    sc.path_off[0] = 0
    x = 0
    for k in range(q):
        c = sc.items[k]
        for y in range(st.class_off[c], st.class_off[c + 1]):
            r = st.class_res[y]
            if sc.res_stamp[r] != stamp:
                sc.res_stamp[r] = stamp
                sc.local[r] = m
                sc.members[m] = r
                m += 1
            sc.path[x] = sc.local[r]
            x += 1
        sc.path_off[k + 1] = x
    for j in range(m + 1):
        sc.res_off[j] = 0
    for y in range(x):
        sc.res_off[sc.path[y] + 1] += 1
    for j in range(m):
        sc.res_off[j + 1] += sc.res_off[j]
        sc.caps[j] = st.capacities[sc.members[j]]
        sc.free[j] = sc.res_off[j]  # (a cursor while the lists are written)
    for k in range(q):
        for y in range(sc.path_off[k], sc.path_off[k + 1]):
            j = sc.path[y]
            sc.res_items[sc.free[j]] = k
            sc.free[j] += 1
    return m


@loop_helper
def _neck_of(k, m, sc, st):
    """Precise rule 9 for item ``k`` in the interval of rates ``sc.rates``: the first resource on its path
    that its items fill (within ``_SATURATED``) and on which no item moves faster; -1 if none."""
    mine = sc.rates[k]
    for y in range(sc.path_off[k], sc.path_off[k + 1]):
        j = sc.path[y]
        used = 0.0
        faster = False
        for x in range(sc.res_off[j], sc.res_off[j + 1]):
            o = sc.res_items[x]
            used += sc.rates[o] * sc.counts[o]
            faster |= sc.rates[o] > mine * (1 + 1e-12)
        if used >= sc.caps[j] * (1 - _SATURATED) and not faster:
            return sc.members[j]
    return -1


# --- a handoff alone in the cluster ------------------------------------------------------------------

class Alone(NamedTuple):
    """Work arrays of one handoff's flows alone (:func:`_alone`), by kept flow."""

    start: np.ndarray
    nbytes: np.ndarray
    left: np.ndarray
    anchor: np.ndarray
    rate: np.ndarray
    ends: np.ndarray
    neck: np.ndarray
    order: np.ndarray
    active: np.ndarray
    finish: np.ndarray


@loop_helper
def _alone_rates(na, t, al, st, sc, kept):
    """New rates at ``t`` of the ``na`` active flows (``al.active``): bytes so far carried at the old rate."""
    stamp = sc.counters[0] + 1
    sc.counters[0] = stamp
    for x in range(na):
        sc.items[x] = kept[0][al.active[x]]
        sc.counts[x] = 1
    m = _local_paths(na, st, sc, stamp, 0)
    _fill(m, na, sc)
    for x in range(na):
        f = al.active[x]
        new = sc.rates[x]
        if new != al.rate[f]:
            if al.rate[f] == al.rate[f]:  # it was moving: its bytes so far at the old rate
                al.left[f] -= al.rate[f] * 1e9 * (t - al.anchor[f]) / 1000.0
                al.anchor[f] = t
            al.rate[f] = new
        al.finish[f] = al.anchor[f] + max(al.left[f], 0.0) / (al.rate[f] * 1e9) * 1000.0
    return m


@loop_helper
def _alone(q, al, st, sc, kept):
    """:func:`perfmodel._maxmin.simulate` of ``q`` flows (starts ``al.start``, bytes ``al.nbytes``, classes
    ``kept[0]``): each flow's end (``al.ends``) and its bottleneck when it ended (``al.neck``); returns
    the index of the last-ending flow (ties: the lowest position, ``kept[1]``)."""
    for f in range(q):  # by start, ties in index order (insertion sort: a handful of flows)
        al.order[f] = f
        x = f
        while x > 0 and al.start[al.order[x - 1]] > al.start[f]:
            al.order[x] = al.order[x - 1]
            x -= 1
        al.order[x] = f
        al.left[f], al.anchor[f], al.rate[f] = al.nbytes[f], al.start[f], np.nan
    pending, na = 0, 0
    t = al.start[al.order[0]]
    while pending < q or na > 0:
        while pending < q and al.start[al.order[pending]] <= t:
            al.active[na] = al.order[pending]
            na += 1
            pending += 1
        if na == 0:
            t = al.start[al.order[pending]]
            continue
        m = _alone_rates(na, t, al, st, sc, kept)
        t_end = np.inf
        for x in range(na):
            t_end = min(t_end, al.finish[al.active[x]])
        t_next = min(t_end, al.start[al.order[pending]]) if pending < q else t_end
        if t_next == t_end:
            still = 0
            for x in range(na):
                f = al.active[x]
                if al.finish[f] == t_end:
                    al.ends[f] = t_end
                    al.neck[f] = _neck_of(x, m, sc, st)
                else:
                    al.active[still] = f
                    still += 1
            na = still
        t = t_next
    last = 0
    for f in range(1, q):
        if al.ends[f] > al.ends[last] or (al.ends[f] == al.ends[last] and kept[1][f] < kept[1][last]):
            last = f
    return last


# --- the heaps of the classes and of their flows ----------------------------------------------------

@loop_helper
def _meld(a, b, node):
    """The pairing heap of roots ``a`` and ``b`` (either -1: none) by target (ties: the lower slot). ``node[x]``:
    slot ``x``'s target, first child and next sibling (links as floats, -1: none: a node is one cache line)."""
    if a < 0:
        return b
    if b < 0:
        return a
    if node[b, 0] < node[a, 0] or (node[b, 0] == node[a, 0] and b < a):
        a, b = b, a
    node[b, 2] = node[a, 1]
    node[a, 1] = b
    return a


@loop_helper
def _pop_root(root, node):
    """The pairing heap of ``root`` without ``root`` (two passes: pairs left to right, then melded back)."""
    pairs = _NIL  # the melded pairs, listed in reverse through their sibling links
    x = np.int64(node[root, 1])
    while x >= 0:
        y = np.int64(node[x, 2])
        after = _NIL
        if y >= 0:
            after = np.int64(node[y, 2])
            node[y, 2] = _NIL
        node[x, 2] = _NIL
        m = _meld(x, y, node)
        node[m, 2] = pairs
        pairs = m
        x = after
    result = _NIL
    while pairs >= 0:
        after = np.int64(node[pairs, 2])
        node[pairs, 2] = _NIL
        result = _meld(result, pairs, node)
        pairs = after
    node[root, 1] = _NIL
    return result


@loop_helper
def _sift(cl, at, size):
    """Move the class at heap position ``at`` up or down to its place (by (end, class))."""
    heap, end, where = cl.heap, cl.end, cl.where
    c = heap[at]
    while at > 0:
        parent = (at - 1) // 2
        p = heap[parent]
        if end[p] < end[c] or (end[p] == end[c] and p < c):
            break
        heap[at] = p
        where[p] = at
        at = parent
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        o = heap[child]
        if child + 1 < size:
            o2 = heap[child + 1]
            if end[o2] < end[o] or (end[o2] == end[o] and o2 < o):
                child, o = child + 1, o2
        if end[c] < end[o] or (end[c] == end[o] and c < o):
            break
        heap[at] = o
        where[o] = at
        at = child
    heap[at] = c
    where[c] = at


@loop_helper
def _heap_remove(cl, c, size):
    """Remove class ``c`` from the heap of ``size`` classes; returns the new size."""
    at = cl.where[c]
    cl.where[c] = _NIL
    size -= 1
    if at != size:
        cl.heap[at] = cl.heap[size]
        cl.where[cl.heap[at]] = at
        _sift(cl, at, size)
    return size


@loop_helper
def _schedule(cl, c, size):
    """Class ``c``'s next end from its virtual time, placed in the heap (or taken out of it when it has no
    flow); returns the heap's new size."""
    if cl.count[c] == 0:
        return _heap_remove(cl, c, size) if cl.where[c] >= 0 else size
    cl.end[c] = cl.since[c] + max(cl.first[c] - cl.served[c], 0.0) / (cl.rate[c] * 1e9) * 1000.0
    if cl.where[c] < 0:
        cl.heap[size] = c
        cl.where[c] = size
        size += 1
    _sift(cl, cl.where[c], size)
    return size


@loop_helper
def _collect(seed, st, cl, sc, stamp):
    """The resources and classes with flows connected to resource ``seed`` (transitively): (resources, classes);
    each resource's capacity and flows are ready for the filling (``sc.left``, ``sc.free``)."""
    sc.res_stamp[seed] = stamp
    sc.members[0] = seed
    sc.left[seed] = st.capacities[seed]
    sc.free[seed] = 0
    m, q, head = 1, 0, 0
    while head < m:
        r = sc.members[head]
        head += 1
        for x in range(st.res_off[r], st.res_off[r + 1]):
            c = st.res_classes[x]
            if cl.count[c] == 0 or sc.cls_stamp[c] == stamp:
                continue
            sc.cls_stamp[c] = stamp
            sc.items[q] = c
            sc.frozen[c] = False
            sc.rates[c] = np.inf
            q += 1
            count = cl.count[c]
            for y in range(st.class_off[c], st.class_off[c + 1]):
                s = st.class_res[y]
                if sc.res_stamp[s] != stamp:
                    sc.res_stamp[s] = stamp
                    sc.members[m] = s
                    sc.left[s] = st.capacities[s]
                    sc.free[s] = 0
                    m += 1
                sc.free[s] += count
    return m, q


@loop_helper
def _fill_classes(m, q, st, cl, sc):
    """:func:`_fill` over a connected set (``sc.members[:m]``, classes ``sc.items[:q]``, as :func:`_collect`
    left them) in the cluster's own indices: ``sc.rates[c]`` for each class ``c``. A resource's share is recomputed only when a step changed
    it, and only resources with flows not yet frozen are scanned (the same numbers as recomputing them all)."""
    left, free, frozen, rates, ratio, live, stale = sc.left, sc.free, sc.frozen, sc.rates, sc.ratio, sc.live, sc.stale
    n = 0
    for j in range(m):
        r = sc.members[j]
        if free[r] > 0:
            ratio[r] = left[r] / free[r]
            stale[r] = False
            live[n] = r
            n += 1
    while n > 0:
        share, ties, kept = np.inf, 0, 0
        for j in range(n):  # the resources with flows not yet frozen: the smallest share, and each of it
            r = live[j]
            if free[r] == 0:
                continue
            live[kept] = r
            kept += 1
            if stale[r]:  # (its share is recomputed once after a step changed it, however often)
                ratio[r] = left[r] / free[r]
                stale[r] = False
            if ratio[r] < share:
                share, ties = ratio[r], 0
            if ratio[r] == share:
                sc.ties[ties] = r
                ties += 1
        n = kept
        if share == np.inf:  # none left, or of unlimited capacity: the flows left are unlimited too
            return
        for x in range(ties):
            r = sc.ties[x]
            for y in range(st.res_off[r], st.res_off[r + 1]):
                c = st.res_classes[y]
                if cl.count[c] == 0 or frozen[c]:
                    continue
                frozen[c] = True
                rates[c] = share
                for z in range(st.class_off[c], st.class_off[c + 1]):
                    s = st.class_res[z]
                    if free[s] > 0:
                        left[s] = max(left[s] - share * cl.count[c], 0.0)
                        free[s] -= cl.count[c]
                        stale[s] = True
