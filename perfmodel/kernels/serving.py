"""The one event loop (:func:`serve_pass`): every replay, of handoffs alone or of TTFT under load, on links or a
cluster.

The handoffs run on a network, links or a cluster (:mod:`perfmodel.kernels.network`: routed, charged, started,
shared and delivered by that network's own code); this loop adds arrivals (open or closed loop), prefill
workers serving their queues first come first served with bounded memory, and decode workers admitting what
fits. The replay of handoffs alone (:func:`replay`) is the same loop with no prefill stage (each request goes
to decode at its ready time), no decode step and no bound on decode memory. No pandas, no validation:
:mod:`perfmodel.replay` and :mod:`perfmodel.replay.ttft` prepare the arrays.

Events at one instant, in this order: handoff ends (by end, then start order), dones (by request),
the network's own events (fixed costs ending, bytes finishing; as the replay orders them), prefill ends
(by request), arrivals (in arrival order). After each event the queues it touches move: its prefill worker's,
then its decode worker's admissions (at the loop's top, the one place that starts handoffs).

Each time KV memory is taken or given back (a prefill's start, a handoff's end, an admission, a done) the loop
numbers it, one count over the run: at one instant, that order is the one thing that tells what a worker held
together (:func:`held_tokens` reads it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._compat import no_reference_counting
from ..inputs.codes import PrefillRouting
from .handoff import jit, loop_helper
from .network import advance, grown, next_end, next_event, room, route_request, start_request, take_end
from .replay import heap_pop, heap_push, new_heap

ROUND_ROBIN, LEAST_LOADED = int(PrefillRouting.ROUND_ROBIN), int(PrefillRouting.LEAST_LOADED)  # (plain ints)
GIVEN = 2  # prefill routing from a trace column
_NIL = -1
# counters (one int64 array, so that the loop can stop for a grown heap and resume where it was)
_ARRIVED, _ISSUED, _PREFILL_ENDS, _DONES, _STARTED, _LAST_CHOSEN, _TO_ADMIT, _FINISHED, _ARRIVALS_SEEN = range(9)
_MEMORY_EVENTS = 9  # memory taken or given back so far (each such event's number)
# (_TO_ADMIT: the decode worker whose admission queue moves next, at ``clock[0]``: an event queued a request or
# freed memory there, or its admissions waited for the network's room; -1: none)
FINISHED, GROW, STUCK = 0, 1, 2  # what a pass returns


class Serving(NamedTuple):
    """Per-request inputs and outputs of the serving loop (arrays of the trace's length, in trace order unless
    said), and its scalars."""

    arrival_order: np.ndarray  # int64: requests in the order they arrive (closed loop: the order they are issued)
    arrival_ms: np.ndarray  # float64, in arrival order: when each arrives (closed loop: written when issued)
    tokens: np.ndarray  # int64: prompt tokens (the KV tokens a request holds)
    service_ms: np.ndarray  # float64: each prefill's time
    step_ms: np.ndarray  # float64: each request's decode step
    outputs: np.ndarray  # int64: tokens each request generates
    prefill_worker: np.ndarray  # int64: each request's prefill worker (given, or written at arrival)
    decode_worker: np.ndarray  # int64 output: each request's decode worker (as its network routed it)
    admitted: np.ndarray  # float64 output: when each is admitted (its handoff starts)
    prefill_start: np.ndarray  # float64 outputs: when each prefill starts and ends, the first token, the last
    prefill_end: np.ndarray
    first_token: np.ndarray
    done: np.ndarray
    prefill_start_seq: np.ndarray  # int64 outputs: each memory event's number (the loop's order): a prefill's start
    transfer_end_seq: np.ndarray  # (its prefill memory given back at its handoff's end)
    admitted_seq: np.ndarray  # (its decode memory taken)
    done_seq: np.ndarray  # (and given back)
    prefill_workers: int  # 0: no prefill stage (the replay of handoffs alone: each request goes to decode on arrival)
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
    prefill_ends: np.ndarray  # a HEAP of prefill ends: (time, request, request)
    dones: np.ndarray  # a HEAP of dones: (time, request, request)
    counters: np.ndarray  # int64 (10,): see the module's constants
    clock: np.ndarray  # float64 (1,): when the deferred admissions are due


def new_queues(n: int, prefill_workers: int, decode_workers: int, dones: bool = True) -> Queues:
    """Empty queues for ``n`` requests on ``prefill_workers`` (0: no prefill stage) and ``decode_workers``
    workers, with a heap of dones unless ``dones`` is False (the replay of handoffs alone, whose dones nothing
    waits for and no memory is held to: each is counted at its handoff's end). The heap of prefill ends holds one
    entry per prefill worker at most (numpy, in Python).

    >>> new_queues(3, 2, 1).prefill_head.tolist()
    [-1, -1]
    """
    ints = lambda size, fill=0: np.full(size, fill, dtype=np.int64)  # noqa: E731
    counters = ints(10)
    counters[_LAST_CHOSEN] = prefill_workers - 1  # (least loaded: ties go to the first after the last chosen)
    counters[_TO_ADMIT] = _NIL
    done_heap = n if dones else 0
    return Queues(
        ints(n if prefill_workers else 0, _NIL),
        ints(prefill_workers, _NIL),
        ints(prefill_workers, _NIL),
        ints(prefill_workers),
        ints(prefill_workers),
        ints(prefill_workers),
        ints(n, _NIL),
        ints(decode_workers, _NIL),
        ints(decode_workers, _NIL),
        ints(decode_workers),
        new_heap(prefill_workers),
        new_heap(done_heap),
        counters,
        np.zeros(1),
    )


class Unfinished(RuntimeError):
    """The loop ran out of events with requests unfinished: a handoff that never ends (its time overflowed to
    inf: the replay's edge names it), else a bug."""


def run(net: Any, sv: Serving, q: Queues) -> Any:
    """Run the loop (:func:`serve_pass`) on the network ``net`` to its end, growing the network where it asks;
    returns the network as it ended (grown). Raises :class:`Unfinished` when events run out first."""
    while True:
        code = serve_pass(net, sv, q)
        if code == FINISHED:
            return net
        if code == STUCK:
            raise Unfinished(
                "the serving loop ran out of events with requests unfinished "
                "(a bug: please report it with the trace and the call)"
            )
        net = grown(net)


def replay(order: np.ndarray, ready: np.ndarray, net: Any, decode_workers: int) -> Any:
    """The replay of handoffs alone, as this loop with no prefill stage, no decode step and no bound on decode
    memory: the requests in ``order`` (int64, ready order) each routed, charged and started at its ready time
    ``ready[r]`` (ms) on the network ``net`` (links or a cluster, :mod:`perfmodel.kernels.network`) of
    ``decode_workers`` decode workers. Returns the network as it ended; its own records hold the results.

    The serving's timestamps are not kept: one scratch array takes them all (and one their memory events' numbers)."""
    n = order.shape[0]
    scratch, zeros, none, tokens = np.empty(n), np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64)
    numbers = np.empty(n, np.int64)
    tokens.setflags(write=False)  # (read-only, as a TTFT replay's tokens: one compiled loop for both)
    sv = Serving(
        arrival_order=order,
        arrival_ms=np.ascontiguousarray(ready[order], np.float64),
        tokens=tokens,
        service_ms=zeros,
        step_ms=zeros,
        outputs=none,
        prefill_worker=none,
        decode_worker=np.empty(n, np.int64),
        admitted=scratch,
        prefill_start=scratch,
        prefill_end=scratch,
        first_token=scratch,
        done=scratch,
        prefill_start_seq=numbers,
        transfer_end_seq=numbers,
        admitted_seq=numbers,
        done_seq=numbers,
        prefill_workers=0,
        prefill_routing=GIVEN,
        prefill_capacity=-1,
        decode_capacity=-1,
        concurrency=0,
    )
    q = new_queues(n, 0, decode_workers, dones=False)
    q.counters[_ISSUED] = n
    return run(net, sv, q)


def held_tokens(
    worker: np.ndarray, taken: np.ndarray, given: np.ndarray, tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokens each worker holds after each time its memory is taken or given back, in the loop's order:
    holdings of ``tokens`` on ``worker``, ``taken`` and ``given`` the loop's numbers of the two events of each (its
    memory events, the module's docstring). At one instant that order alone tells what a worker held together.

    Returns (each event as a position in ``[takes, gives]``; its worker; the tokens its worker holds after it),
    worker by worker, each worker's events in the loop's order: never a negative count where each holding is given
    back after it is taken.

    >>> events, workers, held = held_tokens(np.array([0, 0]), np.array([0, 1]), np.array([2, 3]), np.array([400, 500]))
    >>> events.tolist(), held.tolist()   # (the first given back after the second is taken: 900 held together)
    ([0, 1, 2, 3], [400, 900, 500, 0])
    """
    owners = np.concatenate([worker, worker])
    events = np.lexsort((np.concatenate([taken, given]), owners))
    owners = owners[events]
    running = np.cumsum(np.concatenate([tokens, -tokens])[events])
    first = np.r_[True, owners[1:] != owners[:-1]]  # (the running sum restarts at each worker's first event)
    before = np.r_[0, running][np.maximum.accumulate(np.where(first, np.arange(first.size), 0))]
    return events, owners, running - before


@loop_helper(python=False)
def _memory_event(q):
    """The number of a memory event happening now (taken or given back): the loop's order of them."""
    k = q.counters[_MEMORY_EVENTS]
    q.counters[_MEMORY_EVENTS] = k + 1
    return k


@loop_helper(python=False)
def _start_prefill(w, t, sv, q):
    """Worker ``w``'s queue moves at ``t``: its head starts when the worker is idle and its tokens fit."""
    r = q.prefill_head[w]
    if r == _NIL or q.busy[w] != 0:
        return
    tokens = sv.tokens[r]
    if sv.prefill_capacity >= 0 and q.held[w] + tokens > sv.prefill_capacity:
        return
    q.prefill_head[w] = q.prefill_next[r]
    if q.prefill_head[w] == _NIL:
        q.prefill_tail[w] = _NIL
    q.busy[w] = 1
    q.held[w] += tokens
    sv.prefill_start[r] = t
    sv.prefill_start_seq[r] = _memory_event(q)
    ends = q.counters[_PREFILL_ENDS]
    q.counters[_PREFILL_ENDS] = heap_push(q.prefill_ends, ends, t + sv.service_ms[r], r, r)


@loop_helper(python=False)
def _admit_next(d, t, q):
    """Decode worker ``d``'s admission queue moves next, at ``t`` (the loop's top: :func:`_admit`)."""
    q.counters[_TO_ADMIT] = d
    q.clock[0] = t


@jit(inline="always", **no_reference_counting())
def _admit(d, t, net, sv, q):
    """Decode worker ``d``'s admission queue moves at ``t``: its head is admitted, and its handoff starts,
    while its tokens (prompt and output) fit. Where the network has no room for a handoff to start, the rest
    waits (``_TO_ADMIT``) for the loop to grow it and resume here. Called in one place, the loop's top (inlined
    there: each call site compiles the network's ``start_request`` again, and passes it the network's record)."""
    while True:
        r = q.decode_head[d]
        if r == _NIL:
            return
        need = sv.tokens[r] + sv.outputs[r]
        if sv.decode_capacity >= 0 and q.used[d] + need > sv.decode_capacity:
            return
        if not room(net):
            _admit_next(d, t, q)
            return
        q.decode_head[d] = q.decode_next[r]
        if q.decode_head[d] == _NIL:
            q.decode_tail[d] = _NIL
        q.used[d] += need
        sv.admitted[r] = t
        sv.admitted_seq[r] = _memory_event(q)
        seq = q.counters[_STARTED]
        q.counters[_STARTED] = seq + 1
        start_request(seq, r, t, net)


@loop_helper(python=False)
def _choose_prefill(sv, q):
    """The prefill worker of the next arrival: round robin, or the least loaded (ties: the first of the tied
    after the worker chosen last)."""
    workers = sv.prefill_workers
    if sv.prefill_routing == ROUND_ROBIN:
        k = q.counters[_ARRIVALS_SEEN]
        return k - (k // workers) * workers
    first = q.counters[_LAST_CHOSEN] + 1
    first = 0 if first == workers else first
    best = first
    for j in range(1, workers):  # (the scan from the first after the worker chosen last, around once)
        w = first + j
        w = w - workers if w >= workers else w
        if q.load[w] < q.load[best]:  # (strictly: of the tied, the first in the scan's order stays)
            best = w
    return best


@jit(inline="always", **no_reference_counting())
def _arrive(t, net, sv, q):
    """The next request arrives at ``t`` and joins its prefill worker's queue (with no prefill stage, its
    decode worker's admission queue at once)."""
    k = q.counters[_ARRIVED]
    q.counters[_ARRIVED] = k + 1
    r = sv.arrival_order[k]
    if sv.prefill_workers == 0:
        _to_decode(r, t, net, sv, q)
        return
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
    _start_prefill(w, t, sv, q)


@jit(inline="always", **no_reference_counting())
def _to_decode(r, t, net, sv, q):
    """Request ``r``'s prefill ended at ``t``: it is routed and queues for admission at its decode worker (which
    moves next)."""
    sv.prefill_end[r] = t
    d = route_request(r, t, net)
    sv.decode_worker[r] = d
    if q.decode_tail[d] == _NIL:
        q.decode_head[d] = r
    else:
        q.decode_next[q.decode_tail[d]] = r
    q.decode_tail[d] = r
    _admit_next(d, t, q)


@jit(inline="always", **no_reference_counting())
def _prefill_ends(t, net, sv, q):
    """The earliest prefill end (at ``t``): its worker is free, and the request goes on to decode. (Inlined, as
    every helper of the loop that calls the network's operations: compiled on its own, it compiled them a second
    time, ~4 s of a first cluster replay.)"""
    q.counters[_PREFILL_ENDS] = heap_pop(q.prefill_ends, q.counters[_PREFILL_ENDS])
    r = q.prefill_ends.value[q.counters[_PREFILL_ENDS]]
    w = sv.prefill_worker[r]
    q.busy[w] = 0
    q.load[w] -= 1
    _to_decode(r, t, net, sv, q)
    _start_prefill(w, t, sv, q)


@jit(inline="always", **no_reference_counting())
def _handoff_ends(net, sv, q):
    """The earliest known handoff end: its blocks enter the decode cache, its prefill memory is freed, its
    first and last tokens are scheduled (in the replay of handoffs alone, which has no heap of dones, it is done
    at once)."""
    r, t = take_end(net)
    step = sv.step_ms[r]
    sv.first_token[r] = t + step
    done = t + max(sv.outputs[r], 1) * step  # (no earlier than its first token: 0 output tokens, or none given)
    sv.done[r] = done
    if q.dones.shape[0] == 0:  # (the replay of handoffs alone: no memory held, nothing waits for a done)
        q.counters[_FINISHED] += 1
    else:
        q.counters[_DONES] = heap_push(q.dones, q.counters[_DONES], done, r, r)
    if sv.prefill_workers > 0:
        w = sv.prefill_worker[r]
        q.held[w] -= sv.tokens[r]
        sv.transfer_end_seq[r] = _memory_event(q)
        _start_prefill(w, t, sv, q)


@loop_helper(python=False)
def _request_done(t, sv, q):
    """The earliest done (at ``t``): its decode memory is freed (its decode worker's admissions move next); in a
    closed loop the next request is issued."""
    q.counters[_DONES] = heap_pop(q.dones, q.counters[_DONES])
    r = q.dones.value[q.counters[_DONES]]
    d = sv.decode_worker[r]
    q.used[d] -= sv.tokens[r] + sv.outputs[r]
    sv.done_seq[r] = _memory_event(q)
    q.counters[_FINISHED] += 1
    issued = q.counters[_ISSUED]
    if sv.concurrency > 0 and issued < sv.arrival_order.shape[0]:
        sv.arrival_ms[issued] = t
        q.counters[_ISSUED] = issued + 1
    _admit_next(d, t, q)


@loop_helper
def serve_pass(net, sv, q):
    """Run the serving loop on the network ``net`` (:mod:`perfmodel.kernels.network`) until every request is
    done (returns FINISHED), the network needs room (GROW: grow it, :func:`perfmodel.kernels.network.grown`, and
    call again; the loop resumes where it stopped) or no event is left while requests are unfinished (STUCK;
    the edge refuses what could cause it). No allocation (see :func:`loop_helper`)."""
    n = sv.arrival_order.shape[0]
    t_net, moved = np.inf, True  # (the network's next event, looked up again only after what may move a flow)
    while True:
        d = q.counters[_TO_ADMIT]
        if d != _NIL:  # the admissions the last event let move (or that waited for room), at the moment due
            q.counters[_TO_ADMIT] = _NIL
            started = q.counters[_STARTED]
            _admit(d, q.clock[0], net, sv, q)
            moved |= q.counters[_STARTED] != started  # (what starts no handoff moves no flow)
            if q.counters[_TO_ADMIT] != _NIL:
                return GROW
        t_end = next_end(net)
        t_done = q.dones.time[0] if q.counters[_DONES] > 0 else np.inf
        if moved:
            t_net = next_event(net)
        moved = True
        t_prefill = q.prefill_ends.time[0] if q.counters[_PREFILL_ENDS] > 0 else np.inf
        arrived = q.counters[_ARRIVED]
        t_arrival = sv.arrival_ms[arrived] if arrived < q.counters[_ISSUED] else np.inf
        t = min(t_end, t_done, t_net, t_prefill, t_arrival)
        if t == np.inf:
            return FINISHED if q.counters[_FINISHED] == n else STUCK
        if t_end == t:
            _handoff_ends(net, sv, q)
            moved = False  # (an end delivers blocks and frees memory: no flow starts, moves or ends)
        elif t_done == t:
            _request_done(t, sv, q)
            moved = False  # (a done moves no flow but by the handoffs it admits, at the loop's top)
        elif t_net == t:
            if advance(t, net):
                return GROW
        elif t_prefill == t:
            _prefill_ends(t, net, sv, q)
        else:
            _arrive(t, net, sv, q)
