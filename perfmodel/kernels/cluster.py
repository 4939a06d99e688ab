"""Numba kernel of the replay on a cluster: flows sharing resources max-min fairly, in one event loop.

:mod:`perfmodel.replay.on_cluster` resolves the cluster into arrays (:class:`Structure`); this module
replays the requests on them. Flows of one path (and one decode worker) always get the same max-min
rate, so they move as one *class*: progressive filling runs over classes with counts, never over
the flows piled on them, and each class keeps processor-sharing virtual time: ``served`` (the bytes
every flow of the class has received since the class was last empty), the moment it was brought up
to date, and a heap of its flows by target (``served`` at its start plus its bytes), so that a start,
an end or a change of rate touches the class, not every flow in it. The class's next end is
``since + (smallest target - served) / (rate * 1e9) * 1000`` (ms; rates in decimal GB/s, bytes),
in the operation order of the plain-Python reference simulation (``tests/reference_maxmin.py``).

Each class's flows form a binary heap by target, in chunks of a shared store (:class:`perfmodel.kernels.sharing.Heaps`):
no per-class array to grow however the flows pile up. The classes with flows wait in one indexed
heap by next end; flows paying their fixed costs in another, by the moment their bytes may move.
Whenever flows start or end, the classes connected to them through shared resources (transitively,
and only those) get new rates. Prefix caches, routing depths and the charged tokens are
:mod:`perfmodel.kernels.replay`'s. No pandas, no validation. :func:`new_run` makes the arrays; the one event
loop (:func:`perfmodel.kernels.serving.serve_pass`) runs on this module's
operations, allocate nothing (no reference counting) and stop where the flow pool, the heaps' chunks or the time
bins need room (:func:`grown`), to resume once they have it.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

from .._compat import no_reference_counting
from ..inputs.codes import Routing
from ..options import option
from .cluster_records import KEPT, POOL, WAITING, AloneWork, Caches, Ends, Loads, Sim, Trace, new_classes, new_scratch
from .handoff import fixed_ms, jit, loop_helper, messages_of
from .replay import cached_blocks, charged_tokens, heap_pop, heap_push, insert_blocks, new_caches, new_heap, route
from .sharing import (
    CHUNK,
    NIL,
    SATURATED,
    Heaps,
    Paths,
    alone,
    fill_classes,
    flow_bytes,
    heap_remove,
    label,
    new_alone,
    new_local,
    new_memo,
    pop_flow,
    push_flow,
    schedule,
)

PREFIX, ROUND_ROBIN, LEAST_LOADED, TOPOLOGY = (int(m) for m in Routing)  # (plain ints: constants)
# the replay's counters (one int64 array): classes in the heap, flows in the heap of those not yet moving,
# requests pending for a cache, free pool slots, flows started, batches, the round-robin turn
# (and what needs room: time bins, chunks of the flows' heaps; the most flows a class has had)
_HEAP, _WAITING, _PENDING, _FREE, _FLOW, _BATCH, _RR, _BINS, _CHUNKS, _MOST = range(10)


class Structure(NamedTuple):
    """A cluster resolved into arrays: resources, classes (a path and a decode worker) and each
    (prefill worker, decode worker) pair's flows (in the order of :func:`perfmodel.network.clusters.handoff_flow_list`)."""

    capacities: np.ndarray  # float64 (R,): GB/s
    class_off: np.ndarray  # int64 (C + 1,): class c's path is class_res[class_off[c]:class_off[c + 1]]
    class_res: np.ndarray
    class_worker: np.ndarray  # int64 (C,): its decode worker
    class_copies: np.ndarray  # float64 (C,): the copies of its component it stands for (1: none but itself)
    res_off: np.ndarray  # int64 (R + 1,): the classes crossing resource r: res_classes[res_off[r]:res_off[r + 1]]
    res_classes: np.ndarray
    worker_off: np.ndarray  # int64 (D + 1,): decode worker w's classes: worker_classes[worker_off[w]:...]
    worker_classes: np.ndarray
    pair_off: np.ndarray  # int64 (P * D + 1,): pair (a, b)'s flows are pair_off[a * D + b]:pair_off[a * D + b + 1]
    flow_class: np.ndarray  # int64 (F,)
    flow_terms: np.ndarray  # float64 (F, 4): bytes per token of full, window and chunked layers; state bytes
    flow_costs: np.ndarray  # float64 (F, 3): its latency, cost per message and per block, ms (Flow.fixed_terms)
    flow_position: np.ndarray  # int64 (F,): its position in the pair's flows (of its copies: the lowest)
    flow_view: np.ndarray  # int64 (F,): the copy of that position (a row of ``views``)
    pair_hops: np.ndarray  # int64 (P * D,): hops summed over the pair's flows
    views: np.ndarray  # int64 (V, R): per copy, each resource of the simulated copy -> its own (row 0: itself)
    mirror: np.ndarray  # int64 (R,): each resource's copy in the simulated copy of its component
    res_component: np.ndarray  # int64 (R,): the component (of the simulated classes, connected) of each (-1: none)
    component_off: np.ndarray  # int64 (K + 1,): component k's resources: component_res[component_off[k]:...]
    component_res: np.ndarray
    component_cls_off: np.ndarray  # its classes: component_classes[component_cls_off[k]:...]
    component_classes: np.ndarray


class Config(NamedTuple):
    """The scalars of one replay on a cluster."""

    workers: int  # decode workers
    n_unique: int  # distinct block ids
    hash_block_tokens: int
    block_size: int
    destination_missing: bool
    capacity: int  # LRU blocks per decode worker; < 0: unbounded
    routing: int  # PREFIX, ROUND_ROBIN, LEAST_LOADED or TOPOLOGY
    fair: bool  # contention "fair"; else "none" (each handoff alone)
    message_terms: np.ndarray  # float64 (6,): messages_of's full, window, chunk, state, window and chunk tokens
    window_tokens: float
    chunk_tokens: float
    origin_ms: float  # where time bin 0 starts
    bin_ms: float  # the width of the time bins (inf: none)


#: Per-request outputs, one row per request (``prefill_worker`` is the caller's), filled in place: a structured
#: array (as :data:`perfmodel.kernels.cluster_records.CLASSES`), read in Python as a ``numpy.recarray``
#: (``out.end``: a view of that field).
OUTPUTS = np.dtype(
    [
        ("decode_worker", np.int64),
        ("cached", np.int64),
        ("charged", np.int64),
        ("bytes", np.float64),
        ("saved", np.float64),
        ("alone_ms", np.float64),
        ("start", np.float64),
        ("end", np.float64),
        ("flows", np.int64),
        ("bottleneck", np.int64),  # resource index, -1: none saturated (or no flow)
    ],
    align=True,
)


class Outputs:
    """The per-request outputs (:data:`OUTPUTS`) of a replay on a cluster."""

    @staticmethod
    def empty(n: int) -> np.recarray:
        """The outputs of ``n`` requests, before the replay.

        >>> out = Outputs.empty(2); out.bottleneck.tolist(), out.end.tolist()
        ([-1, -1], [0.0, 0.0])
        """
        out = np.zeros(n, OUTPUTS).view(np.recarray)
        out.bottleneck = -1
        return out


# --- classes: virtual time, flows joining and ending -----------------------------------------------------

@loop_helper(python=False)
def _advance_class(cl, c, t):
    """Bring class ``c``'s virtual time to ``t`` at its rate."""
    if t > cl.since[c]:
        d = cl.rate[c] * 1e9 * (t - cl.since[c]) / 1000.0
        cl.served[c] += d
        cl.delivered[c] += cl.count[c] * d
        cl.since[c] = t


@loop_helper(python=False)
def _join(slot, t, cl, pool, heaps):
    """The flow in ``slot`` starts moving its bytes at ``t`` in its class; returns its class."""
    c = np.int64(pool.cls[slot])
    if cl.count[c] == 0:
        cl.served[c], cl.delivered[c], cl.bytes[c], cl.since[c], cl.rate[c] = 0.0, 0.0, 0.0, t, np.nan
    else:
        _advance_class(cl, c, t)
    push_flow(c, cl.count[c], cl.served[c] + pool.bytes[slot], slot, heaps)
    cl.first[c] = heaps.keys[heaps.table[c, 0], 0]
    cl.count[c] += 1
    cl.bytes[c] += pool.bytes[slot]
    return c


@loop_helper(python=False)
def _class_neck(c, st, cl, loads):
    """Precise rule 9 for class ``c``'s flows ending now (their final rate interval): the first resource on
    their path that is saturated and on which no flow moves faster; -1 if none."""
    mine = cl.rate[c]
    for y in range(st.class_off[c], st.class_off[c + 1]):
        r = st.class_res[y]
        if loads.load[r] >= st.capacities[r] * (1 - SATURATED):
            faster = False
            for x in range(st.res_off[r], st.res_off[r + 1]):
                o = st.res_classes[x]
                faster |= cl.count[o] > 0 and cl.rate[o] > mine * (1 + 1e-12)
            if not faster:
                return r
    return -1


@loop_helper(python=False)
def _flow_ends(slot, t, neck, st, pool, out, ends, state):
    """The flow in ``slot`` ends at ``t``: its request's last end and bottleneck so far (ties: the first flow),
    and the request's end when it was its last flow (then pending for its decode worker's cache). A request's
    only flow ends it without reading the request's row (an old row: a cache miss)."""
    i, r = pool.request_seq[slot], pool.req[slot]
    remaining, last_pos, pd = ends.remaining, ends.last_pos, ends.pending
    item = r * (st.worker_off.shape[0] - 1) + st.class_worker[pool.cls[slot]]  # (its decode worker too)
    if pool.sole[slot]:
        out.end[r] = max(t, ends.earliest[r])
        out.bottleneck[r] = st.views[pool.copy_id[slot], neck] if neck >= 0 else NIL
        state[_PENDING] = heap_push(pd, state[_PENDING], out.end[r], i, item)
        return
    position = np.int64(pool.position[slot])
    if t > out.end[r] or (t == out.end[r] and position < last_pos[r]):
        out.end[r] = t
        last_pos[r] = position
        out.bottleneck[r] = st.views[pool.copy_id[slot], neck] if neck >= 0 else NIL
    remaining[r] -= 1
    if remaining[r] == 0:  # (its last flow: it ends now, or streamed, no earlier than its last group is computed)
        out.end[r] = max(t, ends.earliest[r])
        state[_PENDING] = heap_push(pd, state[_PENDING], out.end[r], i, item)


@loop_helper(python=False)
def _finish_class(c, t, st, cl, pool, heaps, out, ends, state):
    """Class ``c``'s flows of the smallest target end at ``t`` (its virtual time reaches that target)."""
    target = cl.first[c]
    cl.delivered[c] += cl.count[c] * (target - cl.served[c])
    cl.served[c] = target
    cl.since[c] = t
    while cl.count[c] > 0 and heaps.keys[heaps.table[c, 0], 0] == target:
        slot = heaps.slots[heaps.table[c, 0], 0]
        pop_flow(c, cl.count[c], heaps)
        _flow_ends(slot, t, cl.neck[c], st, pool, out, ends, state)
        cl.count[c] -= 1
        cl.bytes[c] -= pool.bytes[slot]
        cl.delivered[c] -= pool.bytes[slot]
        pool.free[state[_FREE]] = slot
        state[_FREE] += 1
    if cl.count[c] > 0:
        cl.first[c] = heaps.keys[heaps.table[c, 0], 0]
    else:
        cl.served[c], cl.delivered[c], cl.bytes[c], cl.rate[c] = 0.0, 0.0, 0.0, np.nan


# --- one moment at which flows start or end ------------------------------------------------------------

@loop_helper(python=False)
def _account(loads, r, t, origin, width):
    """Resource ``r``'s load since its last change, up to ``t``: its integral, time bins and peak (over
    intervals of positive length); the load then starts again from 0."""
    since, load = loads.since[r], loads.load[r]
    if t > since:
        loads.busy[r] += load * (t - since)
        if load != 0 and width != np.inf:
            k = loads.bin_of[r]
            while origin + (k + 1) * width <= since:
                k += 1
            t0 = since
            while t0 < t:
                edge = min(origin + (k + 1) * width, t)
                loads.bins[r, k] += load * (edge - t0)
                loads.touched[r] = True
                t0 = edge
                k += 1
            loads.bin_of[r] = k - 1
        loads.peak[r] = max(loads.peak[r], load)
    loads.since[r] = t
    loads.load[r] = 0.0


@loop_helper(python=False)
def _connected(seed, st, paths, counts, sc, stamp):
    """The connected set of resource ``seed`` (its resources in ``sc.members``, classes with flows in
    ``sc.items``, capacities and flows ready for the filling): from its component's sets, labelled again only
    when a class there started or stopped having flows. Returns (resources, classes)."""
    k = st.res_component[seed]
    if not sc.labelled[k]:
        first = st.component_off[k]
        sc.group_cls_span[first, 0] = st.component_cls_off[k]
        label(first, st.component_off[k + 1], st.component_res, paths, counts, sc, stamp)
        sc.labelled[k] = True
    g = sc.group[seed]
    m = 0
    for x in range(g, sc.group_end[g]):
        r = sc.group_res[x]
        sc.members[m] = r
        sc.left[r] = st.capacities[r]
        sc.free[r] = sc.flows_on[r]
        m += 1
    q = 0
    for x in range(sc.group_cls_span[g, 0], sc.group_cls_span[g, 1]):
        c = sc.group_cls[x]
        sc.items[q] = c
        sc.frozen[c] = False
        sc.rates[c] = np.inf
        q += 1
    return m, q


@jit(inline="always", **no_reference_counting())
def _recompute(seed, t, batch, st, paths, cl, loads, sc, state, origin, width):
    """New max-min rates at ``t`` of the classes connected to resource ``seed``; each touched resource's load
    accounted; the classes whose rate or flows changed rescheduled. (Inlined in :func:`_batch`, its one caller:
    compiled apart, each call copied its ~530 words of records, see :mod:`perfmodel.kernels.network`.)"""
    stamp = sc.counters[0] + 1
    sc.counters[0] = stamp
    m, q = _connected(seed, st, paths, cl.count, sc, stamp)
    for j in range(m):
        r = sc.members[j]
        sc.covered[r] = batch
        _account(loads, r, t, origin, width)
    fill_classes(m, q, paths, cl.count, sc)
    for j in range(m):  # each resource's new load, summed where it is (not scattered from each class)
        r = sc.members[j]
        load = 0.0
        for x in range(st.res_off[r], st.res_off[r + 1]):
            c = st.res_classes[x]
            if cl.count[c] > 0:
                load += sc.rates[c] * cl.count[c]
        loads.load[r] = load
    size = state[_HEAP]
    for k in range(q):
        c = sc.items[k]
        new = sc.rates[c]
        old = cl.rate[c]
        if new != old:
            if old == old:  # noqa: PLR0124 (numba) it was moving: its flows' bytes so far at the old rate
                _advance_class(cl, c, t)
            cl.rate[c] = new
            size = schedule(cl, c, size)
        elif cl.touched[c] == batch:
            size = schedule(cl, c, size)
    state[_HEAP] = size


@loop_helper(python=False)
def _moving(c, change, st, cl, sc):
    """Class ``c``'s flows changed by ``change``: its resources' flows (and its component's connected sets,
    when it started or stopped having flows)."""
    for y in range(st.class_off[c], st.class_off[c + 1]):
        sc.flows_on[st.class_res[y]] += change
    if cl.count[c] == 0 or cl.count[c] == change:  # it stopped or started having flows: its sets change
        sc.labelled[st.res_component[st.class_res[st.class_off[c]]]] = False


@loop_helper(python=False)
def _seed(c, st, sc, count, batch):
    """Class ``c``'s resources among the batch's ``count`` seeds (once each); returns the new count."""
    for y in range(st.class_off[c], st.class_off[c + 1]):
        r = st.class_res[y]
        if sc.seeded[r] != batch:
            sc.seeded[r] = batch
            sc.seeds[count] = r
            count += 1
    return count


@loop_helper(python=False)
def _batch(t, st, sim, out, ends, state, waiting, origin, width):
    """Everything at ``t``: flows that end (their bottleneck first, all in their final interval), flows that
    start moving, then the rates of the classes connected to them."""
    cl, pool, heaps, loads, sc = sim.cl, sim.pool, sim.heaps, sim.loads, sim.sc
    paths = Paths(st.capacities, st.class_off, st.class_res, st.res_off, st.res_classes)  # (st's: not passed twice)
    batch = state[_BATCH] + 1
    state[_BATCH] = batch
    ending = 0
    while state[_HEAP] > 0 and cl.end[cl.heap[0]] <= t:
        c = cl.heap[0]
        state[_HEAP] = heap_remove(cl, c, state[_HEAP])
        sc.ending[ending] = c
        ending += 1
    for e in range(ending):
        cl.neck[sc.ending[e]] = _class_neck(sc.ending[e], st, cl, loads)
    seeds = 0
    for e in range(ending):
        c = sc.ending[e]
        before = cl.count[c]
        _finish_class(c, t, st, cl, pool, heaps, out, ends, state)
        _moving(c, cl.count[c] - before, st, cl, sc)
        cl.touched[c] = batch
        seeds = _seed(c, st, sc, seeds, batch)
    while state[_WAITING] > 0 and pool.time[0] <= t:
        state[_WAITING] = heap_pop(pool, state[_WAITING])
        slot = pool.value[state[_WAITING]]
        c = _join(slot, t, cl, pool, heaps)
        state[_MOST] = max(state[_MOST], cl.count[c])
        _moving(c, np.int64(1), st, cl, sc)
        w = st.class_worker[c]
        waiting.bytes[w] -= pool.bytes[slot] * st.class_copies[c]
        waiting.flows[w] -= 1
        if waiting.flows[w] == 0:
            waiting.bytes[w] = 0.0
        cl.touched[c] = batch
        seeds = _seed(c, st, sc, seeds, batch)
    for s in range(seeds):
        if sc.covered[sc.seeds[s]] != batch:
            _recompute(sc.seeds[s], t, batch, st, paths, cl, loads, sc, state, origin, width)


@loop_helper(python=False)
def _next_time(cl, pool, state):
    """When the next flow ends or starts moving (inf: none)."""
    t = cl.end[cl.heap[0]] if state[_HEAP] > 0 else np.inf
    if state[_WAITING] > 0 and pool.time[0] < t:
        t = pool.time[0]
    return t


# --- a request: routed, charged, alone, its flows started -------------------------------------------------

@loop_helper(python=False)
def _worker_load(w, now, st, cl, waiting):
    """The bytes routed to decode worker ``w`` and not yet delivered at ``now``."""
    total = waiting.bytes[w]
    for x in range(st.worker_off[w], st.worker_off[w + 1]):
        c = st.worker_classes[x]
        if cl.count[c] > 0:
            d = cl.rate[c] * 1e9 * (now - cl.since[c]) / 1000.0 if now > cl.since[c] else 0.0
            total += (cl.bytes[c] - cl.delivered[c] - cl.count[c] * d) * st.class_copies[c]
    return total


@loop_helper(python=False)
def _delivered_alone(now, st, pool, state, waiting):
    """Under contention "none": the flows that ended (alone) by ``now`` leave their workers' loads."""
    while state[_WAITING] > 0 and pool.time[0] <= now:
        state[_WAITING] = heap_pop(pool, state[_WAITING])
        slot = pool.value[state[_WAITING]]
        w = st.class_worker[pool.cls[slot]]
        waiting.bytes[w] -= pool.bytes[slot] * st.class_copies[pool.cls[slot]]
        waiting.flows[w] -= 1
        if waiting.flows[w] == 0:
            waiting.bytes[w] = 0.0
        pool.free[state[_FREE]] = slot
        state[_FREE] += 1


@loop_helper(python=False)
def _choose(r, a, now, routing, rr, st, cl, waiting, blocks, offsets, holders, alive):
    """(decode worker, its cached prefix in blocks) of request ``r`` from prefill worker ``a`` by the workers' loads
    (routing least_loaded or topology; :func:`route_request` routes by prefix or round robin itself, without
    this call's ~300 words of records)."""
    loads = waiting.loads
    workers = loads.shape[0]
    for x in range(workers):
        loads[x] = _worker_load(x, now, st, cl, waiting)
    # the last tie goes round robin: the workers are tried from ``rr`` (the one after the worker chosen last) on,
    # and only a strictly better one replaces the best so far
    best = rr
    if routing == LEAST_LOADED:
        for j in range(1, workers):
            x = rr + j if rr + j < workers else rr + j - workers
            if loads[x] < loads[best]:
                best = x
        return route(r, blocks, offsets, holders, alive, workers, best, False)
    # topology: the fewest hops, then the longest cached prefix, then least loaded, then round robin
    _, depth = route(r, blocks, offsets, holders, alive, workers, rr, False)
    for j in range(1, workers):
        x = rr + j if rr + j < workers else rr + j - workers
        _, d = route(r, blocks, offsets, holders, alive, workers, x, False)
        h, hb = st.pair_hops[a * workers + x], st.pair_hops[a * workers + best]
        if h < hb or (h == hb and (d > depth or (d == depth and loads[x] < loads[best]))):
            best, depth = x, d
    return best, depth


@loop_helper(python=False)
def _charge(r, pair, hit, trace, st, cfg, out, al, kept):
    """Request ``r``'s charged tokens and each flow's bytes and fixed cost (ms) on ``pair``; the simulated flows
    of more than 0 bytes go to ``al`` (bytes, start) and ``kept`` (class, position, view); returns how many."""
    n_tokens = trace.tokens[r]
    cached, charged, n_blocks, cached_blocks = charged_tokens(n_tokens, hit, cfg.hash_block_tokens, cfg.block_size,
                                                              cfg.destination_missing)
    out.cached[r], out.charged[r] = cached, charged
    cold = n_blocks * cfg.block_size if cfg.destination_missing else n_tokens
    moved = np.float64(n_blocks - cached_blocks if cfg.destination_missing else n_blocks)
    messages = 0.0
    mt = cfg.message_terms
    if mt.shape[0] > 0:
        messages = messages_of(np.float64(charged), np.float64(n_tokens), np.float64(cfg.block_size), mt[0], mt[1],
                               mt[2], mt[3], mt[4], mt[5], trace.blocks_per_message[r])
    total, cold_total, moving, simulated = 0.0, 0.0, 0, 0
    for f in range(st.pair_off[pair], st.pair_off[pair + 1]):
        b = flow_bytes(st.flow_terms, f, np.float64(charged), np.float64(n_tokens), cfg.window_tokens,
                        cfg.chunk_tokens)
        total += b
        if cold != charged:
            cold_total += flow_bytes(st.flow_terms, f, np.float64(cold), np.float64(n_tokens), cfg.window_tokens,
                                      cfg.chunk_tokens)
        moving += b > 0
        if b > 0 and st.flow_class[f] >= 0:
            x = simulated
            al.bytes[x] = b
            al.start[x] = fixed_ms(st.flow_costs[f, 0], moved * st.flow_costs[f, 2], messages * st.flow_costs[f, 1])
            kept.cls[x], kept.position[x], kept.copy_id[x] = st.flow_class[f], st.flow_position[f], st.flow_view[f]
            simulated += 1
    out.bytes[r] = total
    out.saved[r] = cold_total - total if cold != charged else 0.0
    out.flows[r] = moving
    return simulated


@loop_helper(python=False)
def _start_flows(i, r, w, now, simulated, fair, st, al, kept, pool, state, waiting, remaining, out):
    """The kept flows of request ``r`` (the ``i``-th in ready order) take pool slots: under fair sharing they
    wait for their fixed costs; alone, until their end (for the workers' loads)."""
    if fair:
        remaining[r] = simulated
        out.end[r] = -np.inf  # its last flow's end so far
    for x in range(simulated):
        state[_FREE] -= 1
        slot = pool.free[state[_FREE]]
        pool.request_seq[slot], pool.cls[slot], pool.position[slot], pool.copy_id[slot] = i, kept.cls[x], kept.position[x], kept.copy_id[x]
        pool.req[slot], pool.sole[slot] = r, simulated == 1
        pool.bytes[slot] = al.bytes[x]
        at = now + (al.start[x] if fair else al.ends[x])
        state[_WAITING] = heap_push(pool, state[_WAITING], at, state[_FLOW], slot)
        state[_FLOW] += 1
        waiting.bytes[w] += al.bytes[x] * st.class_copies[kept.cls[x]]
        waiting.flows[w] += 1


class OnCluster(NamedTuple):
    """A replay in progress on a cluster: everything the event loop (:mod:`perfmodel.kernels.serving`) reads
    and writes, as one record (made by :func:`new_run`, grown by
    :func:`grown`)."""

    trace: Trace
    st: Structure
    paths: Paths
    cfg: Config
    out: np.ndarray  # OUTPUTS
    sim: Sim
    alone_work: AloneWork
    caches: Caches
    waiting: np.ndarray  # WAITING, one row per decode worker
    ends: Ends
    state: np.ndarray  # int64 (10,): the counters (see the module's constants)
    kmax: np.int64  # the most flows of one handoff


@loop_helper(python=False)
def route_request(r, now, net):
    """Request ``r`` is routed at ``now`` from its prefill worker (``trace.prefill_of``) to a decode worker
    (returned); it is charged when its handoff starts (:func:`start_request`)."""
    st, cfg, state, waiting, caches, trace = net.st, net.cfg, net.state, net.waiting, net.caches, net.trace
    pool, cl, out = net.sim.pool, net.sim.cl, net.out
    if not cfg.fair and (cfg.routing == LEAST_LOADED or cfg.routing == TOPOLOGY):
        _delivered_alone(now, st, pool, state, waiting)
    if cfg.routing == PREFIX or cfg.routing == ROUND_ROBIN:
        w = route(r, trace.blocks, trace.offsets, caches.holders, caches.alive, cfg.workers, state[_RR],
                  cfg.routing == PREFIX)[0]
    else:
        w = _choose(r, trace.prefill_of[r], now, cfg.routing, state[_RR], st, cl, waiting, trace.blocks,
                    trace.offsets, caches.holders, caches.alive)[0]
    state[_RR] = w + 1 if w + 1 < cfg.workers else 0
    out.decode_worker[r] = w
    return w


@loop_helper(python=False)
def start_request(i, r, now, net):
    """Request ``r``'s handoff starts at ``now``, the ``i``-th to start (ties of ends go by it): charged against its
    decode worker's cache as it is now (it may have waited for admission since it was routed), alone in the
    cluster, its flows started. Needs ``kmax`` free pool slots (:func:`room`)."""
    st, cfg, out, sim, state, ends = net.st, net.cfg, net.out, net.sim, net.state, net.ends
    trace, paths, waiting, caches = net.trace, net.paths, net.waiting, net.caches
    solo, pd = net.alone_work, ends.pending
    al, kept = solo.al, solo.kept
    w = out.decode_worker[r]
    out.start[r] = now
    hit = cached_blocks(r, w, trace.blocks, trace.offsets, caches.holders)  # (its worker's cache now)
    simulated = _charge(r, trace.prefill_of[r] * cfg.workers + w, hit, trace, st, cfg, out, al, kept)
    last = alone(simulated, al, paths, solo.lc, kept.cls, kept.position, solo.memo) if simulated > 0 else -1
    out.alone_ms[r] = al.ends[last] if simulated > 0 else 0.0
    if trace.last_fraction.shape[0] > 0:  # streamed: its last layer group is sent once its prefill ends
        ends.earliest[r] = trace.prefill_end[r] + out.alone_ms[r] * trace.last_fraction[r]
    if simulated == 0:
        out.end[r] = max(now, ends.earliest[r])
        state[_PENDING] = heap_push(pd, state[_PENDING], out.end[r], i, r * cfg.workers + w)
        return
    if cfg.fair:
        _start_flows(i, r, w, now, simulated, cfg.fair, st, al, kept, sim.pool, state, waiting, ends.remaining,
                     out)
        return
    out.bottleneck[r] = st.views[kept.copy_id[last], al.neck[last]] if al.neck[last] >= 0 else NIL
    out.end[r] = max(now + al.ends[last], ends.earliest[r])
    state[_PENDING] = heap_push(pd, state[_PENDING], out.end[r], i, r * cfg.workers + w)
    if cfg.routing == LEAST_LOADED or cfg.routing == TOPOLOGY:
        _start_flows(i, r, w, now, simulated, cfg.fair, st, al, kept, sim.pool, state, waiting, ends.remaining,
                     out)


@loop_helper(python=False)
def room(net):
    """Whether a handoff can start now (the pool has a free slot for each of its flows); else grow it
    (:func:`grown`) first."""
    return net.state[_FREE] >= net.kmax


@loop_helper(python=False)
def next_event(net):
    """When the next flow ends or starts moving (inf: none; under contention "none", never: each handoff's end
    is known when it starts)."""
    return _next_time(net.sim.cl, net.sim.pool, net.state) if net.cfg.fair else np.inf


@loop_helper(python=False)
def advance(t, net):
    """The flows that end or start moving at ``t`` (:func:`next_event`), and the rates they change. Returns
    True, having done nothing, when the time bins or the heaps' chunks need room first (:func:`grown`)."""
    sim, state, cfg, st = net.sim, net.state, net.cfg, net.st
    out, ends, waiting = net.out, net.ends, net.waiting
    width, origin = cfg.bin_ms, cfg.origin_ms
    limit = origin + (sim.loads.bins.shape[1] - 1) * width if width != np.inf else np.inf  # the last bin's start
    if t >= limit:  # (bins merge in grown: an end ages away)
        need = (t - origin) // width + 2.0
        if need <= sim.loads.bins.shape[1]:  # times too coarse for the width (origin + k * width == origin): twice
            need = 2.0 * sim.loads.bins.shape[1]  # as many asked for, until the bins widen to hold t
        state[_BINS] = int(min(need, 2.0**62))
        return True
    heaps = sim.heaps
    if heaps.counter[0] <= state[_WAITING] or state[_MOST] + state[_WAITING] > heaps.table.shape[1] * CHUNK:
        state[_CHUNKS] = 1  # (every flow waiting may start moving now, each in a new chunk)
        return True
    _batch(t, st, sim, out, ends, state, waiting, origin, width)
    return False


@loop_helper(python=False)
def next_end(net):
    """The earliest end of a handoff whose blocks have yet to enter its decode worker's cache (inf: none)."""
    return net.ends.pending.time[0] if net.state[_PENDING] > 0 else np.inf


@loop_helper(python=False)
def take_end(net):
    """The earliest ended handoff (:func:`next_end`) leaves the pending heap and its blocks enter its decode
    worker's cache; returns (its request, its end)."""
    pd, caches, trace, state, workers = net.ends.pending, net.caches, net.trace, net.state, net.cfg.workers
    state[_PENDING] = heap_pop(pd, state[_PENDING])
    item = pd.value[state[_PENDING]]  # (request, decode worker), as one number
    r = item // workers
    insert_blocks(r, item - r * workers, trace.blocks, trace.offsets, caches.holders, caches.slot_of, caches.log,
                  caches.first, caches.end, caches.size, caches.capacity)
    return r, pd.time[state[_PENDING]]


# --- the replay ---------------------------------------------------------------------------------------

def _new_state(st: Structure, slots: int, bins: int, kmax: int) -> tuple:
    """Empty classes, a pool of ``slots`` flows, resources without load (``bins`` time bins), work arrays
    (for handoffs of at most ``kmax`` flows)."""
    R, C = len(st.capacities), len(st.class_worker)
    longest = int(np.diff(st.class_off).max(initial=0))
    cl = new_classes(C)
    loads = Loads(np.zeros(R), np.zeros(R), np.zeros(R), np.zeros(R), np.zeros((R, bins)), np.zeros(R, np.bool_),
                  np.zeros(R, np.int64))
    sc = new_scratch(R, C, len(st.component_off) - 1)
    lc = new_local(R, kmax, longest)
    return cl, _grown_pool(None, slots, None), _grown_heaps(None, C, 2 * C + 64, 4), loads, sc, lc


def _grown_heaps(heaps: Heaps | None, C: int, chunks: int, width: int) -> Heaps:
    """Room for ``chunks`` chunks of the ``C`` classes' heaps of flows, ``width`` chunks per class, holding
    ``heaps``'s."""
    if heaps is not None:
        chunks, width = max(chunks, len(heaps.keys)), max(width, heaps.table.shape[1])
    new = Heaps(np.zeros((C, width), np.int64), np.zeros((chunks, CHUNK)), np.zeros((chunks, CHUNK), np.int64),
                np.zeros(chunks, np.int64), np.zeros(1, np.int64))
    old, free = 0, 0
    if heaps is not None:
        old, free = len(heaps.keys), int(heaps.counter[0])
        new.table[:, :heaps.table.shape[1]] = heaps.table
        new.keys[:old], new.slots[:old], new.free[:free] = heaps.keys, heaps.slots, heaps.free[:free]
    new.free[free:free + chunks - old] = np.arange(chunks - 1, old - 1, -1)
    new.counter[0] = free + chunks - old
    return new


def _grown_pool(pool: np.ndarray | None, slots: int, state: np.ndarray | None) -> np.ndarray:
    """A pool (:data:`POOL`) of ``slots`` slots holding ``pool``'s (its free slots and the new ones free, the lowest
    first)."""
    new = np.zeros(slots, POOL).view(np.recarray)
    old, free = (0, 0) if pool is None else (len(pool), int(cast(np.ndarray, state)[_FREE]))  # (with its state)
    if pool is not None:
        new[:old] = pool
        new["free"][free:] = 0
    new["free"][free:free + slots - old] = np.arange(slots - 1, old - 1, -1)
    if state is not None:
        state[_FREE] = free + slots - old
    return new


def _grown_bins(loads: Loads, bins: int, most: int) -> tuple[Loads, int]:
    """(``loads`` with room for ``bins`` time bins (twice as many as before at least), at most ``most``; the
    factor, a power of 2, by which the bins widen to fit): where more are needed, each ``factor`` neighbours merge
    into one (their sums; the same origin, so the same edges, as ``width * factor`` is exact).

    >>> loads = Loads(*(np.zeros(1) for _ in range(4)), np.arange(6.0).reshape(1, 6), np.ones(1, np.bool_),
    ...               np.full(1, 5))
    >>> grown, factor = _grown_bins(loads, 40, 16)
    >>> factor, grown.bins[0, :4].tolist(), int(grown.bin_of[0])
    (4, [6.0, 9.0, 0.0, 0.0], 1)
    """
    R, old = loads.bins.shape
    factor = 1
    while -(-bins // factor) > most:
        factor *= 2
    size = min(max(-(-bins // factor), 2 * -(-old // factor)), most)
    grown = np.zeros((R, size))
    merged = np.add.reduceat(loads.bins, np.arange(0, old, factor), axis=1)
    grown[:, : merged.shape[1]] = merged
    return loads._replace(bins=grown, bin_of=loads.bin_of // factor), factor


def new_run(tokens: np.ndarray, blocks: np.ndarray, offsets: np.ndarray, prefill_of: np.ndarray, st: Structure,
            cfg: Config, out: np.ndarray, blocks_per_message: np.ndarray,
            streamed: tuple[np.ndarray, np.ndarray] | None = None) -> OnCluster:
    """A replay on the cluster ``st`` (a :class:`Structure`) with the configuration ``cfg`` (a :class:`Config`),
    before its first request: requests with their prompt tokens, dense block ids
    (``blocks[offsets[r]:offsets[r+1]]``), prefill workers and consecutive blocks merged into a message; outputs
    to ``out``. Streamed layer by layer (``streamed``: each request's prefill end and the share of
    its time alone sent after it), a handoff ends no earlier than its prefill's end plus that share."""
    n, D = len(tokens), cfg.workers
    holders, alive, slot_of, log, log_first, log_end, size, capacity = new_caches(cfg.n_unique, D, cfg.capacity)
    pending = new_heap(n)  # cache insertions to come
    kmax = max(int(np.diff(st.pair_off).max(initial=1)), 1)
    cl, pool, heaps, loads, sc, lc = _new_state(st, max(64, 4 * kmax), 256 if cfg.fair and cfg.bin_ms != np.inf else 1,
                                                kmax)
    paths = Paths(st.capacities, st.class_off, st.class_res, st.res_off, st.res_classes)
    al = new_alone(kmax)
    kept = np.zeros(kmax, KEPT).view(np.recarray)
    state = np.zeros(10, np.int64)
    state[_FREE] = len(pool)
    if streamed is None:  # (read-only, as the streamed arrays the replay passes: one compiled loop for both)
        streamed = (np.zeros(0), np.zeros(0))
        for empty in streamed:
            empty.setflags(write=False)
    return OnCluster(
        trace=Trace(tokens, blocks, offsets, prefill_of, blocks_per_message,
                    *streamed),
        st=st,
        paths=paths,
        cfg=cfg,
        out=out,
        sim=Sim(cl, pool, heaps, loads, sc),
        alone_work=AloneWork(lc, al, kept, new_memo(kmax, len(st.pair_off) - 1)),  # (memo: a key a pair)
        caches=Caches(holders, alive, slot_of, log, log_first, log_end, size, np.int64(capacity)),
        waiting=np.zeros(D, WAITING).view(np.recarray),  # bytes (and flows) not yet moving or ended
        ends=Ends(np.zeros(n, np.int32), np.zeros(n, np.int32), np.full(n, -np.inf), pending),
        state=state,
        kmax=np.int64(kmax),
    )


def grown(net: OnCluster) -> OnCluster:
    """``net`` with the room its kernel stopped for: time bins (:func:`advance`), chunks of the flows' heaps,
    else pool slots (:func:`room`)."""
    state, sim, cfg = net.state, net.sim, net.cfg
    if state[_BINS] > 0:
        loads, factor = _grown_bins(sim.loads, int(state[_BINS]), option("max_time_bins"))
        sim, cfg = sim._replace(loads=loads), cfg._replace(bin_ms=cfg.bin_ms * factor)
        state[_BINS] = 0
    elif state[_CHUNKS] > 0:
        need = int(state[_MOST] + state[_WAITING]) // CHUNK + 1
        heaps = sim.heaps
        sim = sim._replace(heaps=_grown_heaps(heaps, len(sim.cl), 2 * len(heaps.keys),
                                              max(need, 2 * heaps.table.shape[1])))
        state[_CHUNKS] = 0
    else:
        sim = sim._replace(pool=_grown_pool(sim.pool, 2 * len(sim.pool), state))
    return net._replace(sim=sim, cfg=cfg)
