"""Numba kernel for TTFT under load: prefill queues, KV memory held during the handoff, decode admission.

The serving around the handoff as more kinds of event on the replay's own network
(:mod:`perfmodel.kernels.replay`): the handoffs are routed, charged, started, shared and delivered by the
replay's helpers (:func:`~perfmodel.kernels.replay.route_and_charge`,
:func:`~perfmodel.kernels.replay.start_transfer`, the fair sharing and the pending heap of known ends),
and this loop adds arrivals (open or closed loop), prefill workers serving their queues first come first
served with bounded memory, and decode workers admitting what fits. No pandas, no validation:
:mod:`perfmodel.replay.ttft` prepares the arrays.

Events at one instant, in this order: handoff ends (by end, then start order), dones (by request),
fair sharing's own events (fixed costs ending, bytes finishing; as the replay orders them), prefill ends
(by request), arrivals (in arrival order). After each event the queues it touches move.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..inputs.codes import PrefillRouting
from .handoff import loop_helper
from .replay import FAIR, _advance_fair, _next_end, deliver, heap_pop, heap_push, route_and_charge, start_transfer

ROUND_ROBIN, LEAST_LOADED = int(PrefillRouting.ROUND_ROBIN), int(PrefillRouting.LEAST_LOADED)  # (plain ints)
GIVEN = 2  # prefill routing from a trace column
_NIL = -1
# counters (one int64 array, so that the loop can stop for a grown heap and resume where it was)
_ARRIVED, _ISSUED, _PREFILL_ENDS, _DONES, _STARTED, _LAST_CHOSEN, _DECODE_RR, _FINISHED, _ARRIVALS_SEEN = range(9)
FINISHED, GROW, STUCK = 0, 1, 2  # what a pass returns


class Serving(NamedTuple):
    """Per-request inputs and outputs of the serving loop (arrays of the trace's length, in trace order unless
    said), and its scalars."""

    arrival_order: np.ndarray  # int64: requests in the order they arrive (closed loop: the order they are issued)
    arrival_ms: np.ndarray  # float64, in arrival order: when each arrives (closed loop: written when issued)
    service_ms: np.ndarray  # float64: each prefill's time
    step_ms: np.ndarray  # float64: each request's decode step
    outputs: np.ndarray  # int64: tokens each request generates
    prefill_worker: np.ndarray  # int64: each request's prefill worker (given, or written at arrival)
    prefill_start: np.ndarray  # float64 outputs: when each prefill starts and ends, the first token, the last
    prefill_end: np.ndarray
    first_token: np.ndarray
    done: np.ndarray
    setup: np.ndarray  # float64: each handoff's fixed costs besides the latency (from its charge)
    prefill_workers: int
    prefill_routing: int  # ROUND_ROBIN, LEAST_LOADED or GIVEN
    prefill_capacity: int  # tokens each prefill worker holds at most; < 0: unbounded
    decode_capacity: int  # tokens each decode worker holds at most; < 0: unbounded
    concurrency: int  # closed loop: clients issuing requests; 0: open loop


class Queues(NamedTuple):
    """The loop's working state (made by :func:`new_queues`, kept between passes)."""

    prefill_next: np.ndarray  # per request: the next in its prefill worker's queue (-1: none)
    prefill_head: np.ndarray  # per prefill worker: its queue's first and last request (-1: empty)
    prefill_tail: np.ndarray
    busy: np.ndarray  # per prefill worker: 1 while a prefill runs
    held: np.ndarray  # per prefill worker: tokens held (prefill started, handoff not ended)
    load: np.ndarray  # per prefill worker: requests queued or in prefill
    decode_next: np.ndarray  # per request: the next in its decode worker's admission queue
    decode_head: np.ndarray
    decode_tail: np.ndarray
    used: np.ndarray  # per decode worker: tokens held (admitted, not done)
    prefill_time: np.ndarray  # heap of prefill ends: (time, request, request)
    prefill_seq: np.ndarray
    prefill_item: np.ndarray
    done_time: np.ndarray  # heap of dones: (time, request, request)
    done_seq: np.ndarray
    done_item: np.ndarray
    counters: np.ndarray  # int64 (9,): see the module's constants


def new_queues(n: int, prefill_workers: int, decode_workers: int) -> Queues:
    """Empty queues for ``n`` requests on ``prefill_workers`` and ``decode_workers`` workers (numpy, in Python).

    >>> new_queues(3, 2, 1).prefill_head.tolist()
    [-1, -1]
    """
    ints = lambda size, fill=0: np.full(size, fill, dtype=np.int64)  # noqa: E731
    counters = ints(9)
    counters[_LAST_CHOSEN] = prefill_workers - 1  # (least loaded: ties go to the first after the last chosen)
    return Queues(
        ints(n, _NIL),
        ints(prefill_workers, _NIL),
        ints(prefill_workers, _NIL),
        ints(prefill_workers),
        ints(prefill_workers),
        ints(prefill_workers),
        ints(n, _NIL),
        ints(decode_workers, _NIL),
        ints(decode_workers, _NIL),
        ints(decode_workers),
        np.empty(n),
        ints(n),
        ints(n),
        np.empty(n),
        ints(n),
        ints(n),
        counters,
    )


@loop_helper(python=False)
def _start_prefill(w, t, requests, sv, q):
    """Worker ``w``'s queue moves at ``t``: its head starts when the worker is idle and its tokens fit."""
    r = q.prefill_head[w]
    if r == _NIL or q.busy[w] != 0:
        return
    tokens = requests.tokens[r]
    if sv.prefill_capacity >= 0 and q.held[w] + tokens > sv.prefill_capacity:
        return
    q.prefill_head[w] = q.prefill_next[r]
    if q.prefill_head[w] == _NIL:
        q.prefill_tail[w] = _NIL
    q.busy[w] = 1
    q.held[w] += tokens
    sv.prefill_start[r] = t
    ends = q.counters[_PREFILL_ENDS]
    q.counters[_PREFILL_ENDS] = heap_push(
        q.prefill_time, q.prefill_seq, q.prefill_item, ends, t + sv.service_ms[r], r, r
    )


@loop_helper(python=False)
def _admit(d, t, requests, cluster, results, state, sv, q):
    """Decode worker ``d``'s admission queue moves at ``t``: its head is admitted, and its handoff starts,
    while its tokens (prompt and output) fit."""
    while True:
        r = q.decode_head[d]
        if r == _NIL:
            return
        need = requests.tokens[r] + sv.outputs[r]
        if sv.decode_capacity >= 0 and q.used[d] + need > sv.decode_capacity:
            return
        q.decode_head[d] = q.decode_next[r]
        if q.decode_head[d] == _NIL:
            q.decode_tail[d] = _NIL
        q.used[d] += need
        requests.ready_ms[r] = t  # (the replay's ready time: when the handoff may start; = prefill_end_ms)
        seq = q.counters[_STARTED]
        q.counters[_STARTED] = seq + 1
        state.counts[0] = start_transfer(
            seq,
            r,
            t,
            results.bytes[r],
            sv.setup[r],
            results.transfer[r],
            cluster,
            requests,
            results,
            state,
            state.counts[0],
        )


@loop_helper(python=False)
def _choose_prefill(sv, q):
    """The prefill worker of the next arrival: round robin, or the least loaded (ties: the first of the tied
    after the worker chosen last)."""
    workers = sv.prefill_workers
    if sv.prefill_routing == ROUND_ROBIN:
        k = q.counters[_ARRIVALS_SEEN]
        return k - (k // workers) * workers
    best = q.counters[_LAST_CHOSEN] + 1
    best = 0 if best == workers else best
    for j in range(1, workers):
        w = best + j
        w = w - workers if w >= workers else w
        if q.load[w] < q.load[best]:  # (strictly: of the tied, the first in the scan's order stays)
            best = w
    return best


@loop_helper(python=False)
def _arrive(t, requests, sv, q):
    """The next request arrives at ``t`` and joins its prefill worker's queue."""
    k = q.counters[_ARRIVED]
    q.counters[_ARRIVED] = k + 1
    r = sv.arrival_order[k]
    if sv.prefill_routing == GIVEN:
        w = sv.prefill_worker[r]
    else:
        w = _choose_prefill(sv, q)
        sv.prefill_worker[r] = w
        q.counters[_LAST_CHOSEN] = w
    q.counters[_ARRIVALS_SEEN] += 1
    q.load[w] += 1
    if q.prefill_tail[w] == _NIL:
        q.prefill_head[w] = r
    else:
        q.prefill_next[q.prefill_tail[w]] = r
    q.prefill_tail[w] = r
    _start_prefill(w, t, requests, sv, q)


@loop_helper(python=False)
def _prefill_ends(t, requests, cluster, results, state, sv, q):
    """The earliest prefill end (at ``t``): its worker is free; the request is routed, charged and queues
    for admission at its decode worker."""
    q.counters[_PREFILL_ENDS] = heap_pop(q.prefill_time, q.prefill_seq, q.prefill_item, q.counters[_PREFILL_ENDS])
    r = q.prefill_item[q.counters[_PREFILL_ENDS]]
    w = sv.prefill_worker[r]
    q.busy[w] = 0
    q.load[w] -= 1
    sv.prefill_end[r] = t
    _, setup, _, rr = route_and_charge(r, requests, cluster, results, state, q.counters[_DECODE_RR])
    q.counters[_DECODE_RR] = rr
    sv.setup[r] = setup
    d = results.worker[r]
    if q.decode_tail[d] == _NIL:
        q.decode_head[d] = r
    else:
        q.decode_next[q.decode_tail[d]] = r
    q.decode_tail[d] = r
    _admit(d, t, requests, cluster, results, state, sv, q)
    _start_prefill(w, t, requests, sv, q)


@loop_helper(python=False)
def _handoff_ends(requests, cluster, results, state, sv, q):
    """The earliest known handoff end: its blocks enter the decode cache, its prefill memory is freed, its
    first and last tokens are scheduled."""
    pending = heap_pop(state.pend_time, state.pend_seq, state.pend_item, state.counts[0])
    state.counts[0] = pending
    r = state.pend_item[pending]
    t = results.end[r]
    deliver(r, requests, cluster, results, state)
    w = sv.prefill_worker[r]
    q.held[w] -= requests.tokens[r]
    step = sv.step_ms[r]
    sv.first_token[r] = t + step
    done = t + sv.outputs[r] * step
    sv.done[r] = done
    q.counters[_DONES] = heap_push(q.done_time, q.done_seq, q.done_item, q.counters[_DONES], done, r, r)
    _start_prefill(w, t, requests, sv, q)


@loop_helper(python=False)
def _request_done(t, requests, sv, q, decode_worker):
    """The earliest done (at ``t``): its decode memory is freed; in a closed loop the next request is issued.
    Returns its decode worker."""
    q.counters[_DONES] = heap_pop(q.done_time, q.done_seq, q.done_item, q.counters[_DONES])
    r = q.done_item[q.counters[_DONES]]
    d = decode_worker[r]
    q.used[d] -= requests.tokens[r] + sv.outputs[r]
    q.counters[_FINISHED] += 1
    issued = q.counters[_ISSUED]
    if sv.concurrency > 0 and issued < sv.arrival_order.shape[0]:
        sv.arrival_ms[issued] = t
        q.counters[_ISSUED] = issued + 1
    return d


@loop_helper
def serve_pass(requests, cluster, results, state, sv, q):
    """Run the serving loop until every request is done (returns FINISHED), a fair-sharing heap needs room
    (GROW: grow it and call again; the loop resumes where it stopped) or no event is left while requests are
    unfinished (STUCK; the edge refuses what could cause it). No allocation (see :func:`loop_helper`)."""
    contention, fair, counts = cluster.contention, state.fair, state.counts
    rate = cluster.bandwidth_gb_s * 1e6  # bytes per ms
    n = sv.arrival_order.shape[0]
    while True:
        t_end = state.pend_time[0] if counts[0] > 0 else np.inf
        t_done = q.done_time[0] if q.counters[_DONES] > 0 else np.inf
        t_fair = np.inf
        if contention == FAIR:
            t_fair = _next_end(fair, rate)[0]
            if counts[1] > 0 and fair.start_time[0] < t_fair:
                t_fair = fair.start_time[0]
        t_prefill = q.prefill_time[0] if q.counters[_PREFILL_ENDS] > 0 else np.inf
        arrived = q.counters[_ARRIVED]
        t_arrival = sv.arrival_ms[arrived] if arrived < q.counters[_ISSUED] else np.inf
        t = min(t_end, t_done, t_fair, t_prefill, t_arrival)
        if t == np.inf:
            return FINISHED if q.counters[_FINISHED] == n else STUCK
        if t_end == t:
            _handoff_ends(requests, cluster, results, state, sv, q)
        elif t_done == t:
            d = _request_done(t, requests, sv, q, results.worker)
            _admit(d, t, requests, cluster, results, state, sv, q)
        elif t_fair == t:
            if _advance_fair(
                fair, counts, t, rate, requests, results, state.pend_time, state.pend_seq, state.pend_item
            ):
                return GROW
        elif t_prefill == t:
            _prefill_ends(t, requests, cluster, results, state, sv, q)
        else:
            _arrive(t, requests, sv, q)
