"""Numba helpers of flows sharing resources max-min fairly (:mod:`perfmodel._cluster_kernel`'s parts).

Progressive filling over items that stand for ``count`` equal flows each (a class of flows of one
path; or one flow of a handoff alone), in the operation order of :func:`perfmodel._maxmin.maxmin_rates`
(repeatedly, the resources of the smallest fair share fix the rate of every unfrozen item on them);
a handoff alone in the cluster (:func:`perfmodel._maxmin.simulate`); the heaps of each class's flows
(in chunks) and the indexed heap of the classes by next end.
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
def _fill(m, q, lc):
    """Max-min rates (``lc.rates``) of ``q`` items over ``m`` local resources: repeatedly the resources of the
    smallest fair share (capacity left over unfrozen flows) fix the rate of every unfrozen item on them
    (:func:`perfmodel._maxmin.maxmin_rates` with an item of ``count`` equal flows). No resource: ``inf``."""
    left, free, frozen, rates = lc.left, lc.free, lc.frozen, lc.rates
    for j in range(m):
        left[j] = lc.caps[j]
        free[j] = 0
    for k in range(q):
        frozen[k] = False
        rates[k] = np.inf
        for x in range(lc.path_off[k], lc.path_off[k + 1]):
            free[lc.path[x]] += lc.counts[k]
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
                lc.ties[ties] = j
                ties += 1
        for t in range(ties):
            j = lc.ties[t]
            for x in range(lc.res_off[j], lc.res_off[j + 1]):
                k = lc.res_items[x]
                if frozen[k]:
                    continue
                frozen[k] = True
                rates[k] = share
                for y in range(lc.path_off[k], lc.path_off[k + 1]):
                    s = lc.path[y]
                    if free[s] > 0:
                        left[s] = max(left[s] - share * lc.counts[k], 0.0)
                        free[s] -= lc.counts[k]


@loop_helper
def _local_paths(q, paths, lc, stamp, m):
    """Local paths of the items ``lc.items[:q]`` (classes) and each local resource's items; resources not yet
    collected under ``stamp`` are added after the first ``m``. Returns the number of local resources."""
    lc.path_off[0] = 0
    x = 0
    for k in range(q):
        c = lc.items[k]
        for y in range(paths.class_off[c], paths.class_off[c + 1]):
            r = paths.class_res[y]
            if lc.stamp[r] != stamp:
                lc.stamp[r] = stamp
                lc.local[r] = m
                lc.members[m] = r
                m += 1
            lc.path[x] = lc.local[r]
            x += 1
        lc.path_off[k + 1] = x
    for j in range(m + 1):
        lc.res_off[j] = 0
    for y in range(x):
        lc.res_off[lc.path[y] + 1] += 1
    for j in range(m):
        lc.res_off[j + 1] += lc.res_off[j]
        lc.caps[j] = paths.capacities[lc.members[j]]
        lc.free[j] = lc.res_off[j]  # (a cursor while the lists are written)
    for k in range(q):
        for y in range(lc.path_off[k], lc.path_off[k + 1]):
            j = lc.path[y]
            lc.res_items[lc.free[j]] = k
            lc.free[j] += 1
    return m


@loop_helper
def _neck_of(k, lc):
    """Precise rule 9 for item ``k`` in the interval of rates ``lc.rates``: the first resource on its path
    that its items fill (within ``_SATURATED``) and on which no item moves faster; -1 if none."""
    mine = lc.rates[k]
    for y in range(lc.path_off[k], lc.path_off[k + 1]):
        j = lc.path[y]
        used = 0.0
        faster = False
        for x in range(lc.res_off[j], lc.res_off[j + 1]):
            o = lc.res_items[x]
            used += lc.rates[o] * lc.counts[o]
            faster |= lc.rates[o] > mine * (1 + 1e-12)
        if used >= lc.caps[j] * (1 - _SATURATED) and not faster:
            return lc.members[j]
    return -1


# --- a handoff alone in the cluster ------------------------------------------------------------------


class Local(NamedTuple):
    """Work arrays of a filling over local indices (a handoff's flows alone): each resource's stamp (the
    filling that last collected it) and local index; the local resources' global indices; per item its
    class, flows, rate and state, and its local path; per local resource its items, capacity, capacity
    left, unfrozen flows; the resources of the smallest share in a step; the fillings so far."""

    stamp: np.ndarray
    local: np.ndarray
    members: np.ndarray
    items: np.ndarray
    counts: np.ndarray
    rates: np.ndarray
    frozen: np.ndarray
    path_off: np.ndarray
    path: np.ndarray
    res_off: np.ndarray
    res_items: np.ndarray
    caps: np.ndarray
    left: np.ndarray
    free: np.ndarray
    ties: np.ndarray
    counter: np.ndarray


class Paths(NamedTuple):
    """The cluster's resources and classes (:class:`perfmodel._cluster_kernel.Structure`'s first arrays)."""

    capacities: np.ndarray
    class_off: np.ndarray
    class_res: np.ndarray
    res_off: np.ndarray
    res_classes: np.ndarray


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
def _alone_rates(na, t, al, paths, lc, classes):
    """New rates at ``t`` of the ``na`` active flows (``al.active``): bytes so far carried at the old rate."""
    stamp = lc.counter[0] + 1
    lc.counter[0] = stamp
    for x in range(na):
        lc.items[x] = classes[al.active[x]]
        lc.counts[x] = 1
    m = _local_paths(na, paths, lc, stamp, 0)
    _fill(m, na, lc)
    for x in range(na):
        f = al.active[x]
        new = lc.rates[x]
        if new != al.rate[f]:
            if al.rate[f] == al.rate[f]:  # it was moving: its bytes so far at the old rate
                al.left[f] -= al.rate[f] * 1e9 * (t - al.anchor[f]) / 1000.0
                al.anchor[f] = t
            al.rate[f] = new
        al.finish[f] = al.anchor[f] + max(al.left[f], 0.0) / (al.rate[f] * 1e9) * 1000.0


@loop_helper
def _alone(q, al, paths, lc, classes, positions):
    """:func:`perfmodel._maxmin.simulate` of ``q`` flows (starts ``al.start``, bytes ``al.nbytes``, classes
    ``classes``): each flow's end (``al.ends``) and its bottleneck when it ended (``al.neck``); returns
    the index of the last-ending flow (ties: the lowest of ``positions``)."""
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
        _alone_rates(na, t, al, paths, lc, classes)
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
                    al.neck[f] = _neck_of(x, lc)
                else:
                    al.active[still] = f
                    still += 1
            na = still
        t = t_next
    last = 0
    for f in range(1, q):
        if al.ends[f] > al.ends[last] or (al.ends[f] == al.ends[last] and positions[f] < positions[last]):
            last = f
    return last


# --- the heaps of the classes and of their flows ----------------------------------------------------


class Heaps(NamedTuple):
    """Each class's flows as a binary heap by target, in chunks of ``_CHUNK`` entries: position ``p`` of class
    ``c``'s heap is entry ``p % _CHUNK`` of chunk ``table[c, p // _CHUNK]`` (a heap's top levels share one
    chunk, and its entries are apart from the flows' other fields: few cache lines a push or a pop)."""

    table: np.ndarray  # int64 (C, T): each class's chunks
    keys: np.ndarray  # float64 (chunks, _CHUNK): targets
    slots: np.ndarray  # int64 (chunks, _CHUNK): the flows' pool slots
    free: np.ndarray  # int64 (chunks,): the free chunks, ``counter[0]`` of them
    counter: np.ndarray


_CHUNK = 256


@loop_helper
def _push_flow(c, n, key, slot, heaps):
    """Add (``key``, ``slot``) to class ``c``'s heap of ``n`` flows (a new chunk when its last is full)."""
    table, keys, slots = heaps.table, heaps.keys, heaps.slots
    if n % _CHUNK == 0:
        heaps.counter[0] -= 1
        table[c, n // _CHUNK] = heaps.free[heaps.counter[0]]
    p = n
    while p > 0:
        parent = (p - 1) // 2
        up, at = table[c, parent // _CHUNK], parent % _CHUNK
        if keys[up, at] <= key:
            break
        here, there = table[c, p // _CHUNK], p % _CHUNK
        keys[here, there], slots[here, there] = keys[up, at], slots[up, at]
        p = parent
    here, there = table[c, p // _CHUNK], p % _CHUNK
    keys[here, there], slots[here, there] = key, slot


@loop_helper
def _pop_flow(c, n, heaps):
    """Remove the smallest of class ``c``'s heap of ``n`` flows (its chunk freed when the last empties)."""
    table, keys, slots = heaps.table, heaps.keys, heaps.slots
    size = n - 1
    last, at = table[c, size // _CHUNK], size % _CHUNK
    key, slot = keys[last, at], slots[last, at]
    if at == 0:
        heaps.free[heaps.counter[0]] = last
        heaps.counter[0] += 1
    if size == 0:
        return
    p = 0
    while True:
        child = 2 * p + 1
        if child >= size:
            break
        down, off = table[c, child // _CHUNK], child % _CHUNK
        if child + 1 < size:
            right, r_off = table[c, (child + 1) // _CHUNK], (child + 1) % _CHUNK
            if keys[right, r_off] < keys[down, off]:
                child, down, off = child + 1, right, r_off
        if key <= keys[down, off]:
            break
        here, there = table[c, p // _CHUNK], p % _CHUNK
        keys[here, there], slots[here, there] = keys[down, off], slots[down, off]
        p = child
    here, there = table[c, p // _CHUNK], p % _CHUNK
    keys[here, there], slots[here, there] = key, slot


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
def _label(first, last, members, paths, counts, sc, stamp):
    """The connected sets of classes with flows among resources ``members[first:last]`` (a component of the
    cluster): ``sc.group_res[first:last]`` lists them set by set (``sc.group_cls`` their classes, from the
    component's first class position ``sc.group[first]``); each resource's set starts at ``sc.group[r]``,
    the set starting at position ``g`` ends at ``sc.group_end[g]`` and its classes span
    ``sc.group_cls_span[g, 0]:sc.group_cls_span[g, 1]``."""
    pos_r, pos_c = first, sc.group_cls_span[first, 0]
    for x in range(first, last):
        r0 = members[x]
        if sc.res_stamp[r0] == stamp:
            continue
        g, head = pos_r, pos_r
        sc.res_stamp[r0] = stamp
        sc.group_res[pos_r] = r0
        pos_r += 1
        sc.group_cls_span[g, 0] = pos_c
        while head < pos_r:
            r = sc.group_res[head]
            head += 1
            sc.group[r] = g
            for y in range(paths.res_off[r], paths.res_off[r + 1]):
                c = paths.res_classes[y]
                if counts[c] == 0 or sc.cls_stamp[c] == stamp:
                    continue
                sc.cls_stamp[c] = stamp
                sc.group_cls[pos_c] = c
                pos_c += 1
                for z in range(paths.class_off[c], paths.class_off[c + 1]):
                    s = paths.class_res[z]
                    if sc.res_stamp[s] != stamp:
                        sc.res_stamp[s] = stamp
                        sc.group_res[pos_r] = s
                        pos_r += 1
        sc.group_end[g] = pos_r
        sc.group_cls_span[g, 1] = pos_c


@loop_helper
def _fill_classes(m, q, paths, counts, sc):
    """:func:`_fill` over a connected set (``sc.members[:m]``, classes ``sc.items[:q]``, capacities in
    ``sc.left`` and flows in ``sc.free``) in the cluster's own indices: ``sc.rates[c]`` for each class
    ``c``. A resource's share is recomputed only when a step changed it, and only resources with flows not
    yet frozen are scanned (the same numbers as recomputing them all)."""
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
        step = sc.counters[1] + 1
        sc.counters[1] = step
        for x in range(ties):
            sc.tie_step[sc.ties[x]] = step
        for x in range(ties):
            r = sc.ties[x]
            for y in range(paths.res_off[r], paths.res_off[r + 1]):
                c = paths.res_classes[y]
                if counts[c] == 0 or frozen[c]:
                    continue
                frozen[c] = True
                rates[c] = share
                for z in range(paths.class_off[c], paths.class_off[c + 1]):
                    s = paths.class_res[z]
                    if free[s] > 0 and sc.tie_step[s] != step:  # (a tie's own flows all freeze in this step)
                        left[s] = max(left[s] - share * counts[c], 0.0)
                        free[s] -= counts[c]
                        stale[s] = True
        for x in range(ties):
            free[sc.ties[x]] = 0
