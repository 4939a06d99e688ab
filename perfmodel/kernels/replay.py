"""Numba kernel for trace replay: decode-side prefix caches, routing and link contention.

The links as a network of the one event loop (:mod:`perfmodel.kernels.serving`, through
:mod:`perfmodel.kernels.network`'s operations): each request routed and charged, its transfer started
alone, queued first come first served or sharing a link, its blocks entering its decode worker's cache
when it ends. No pandas, no validation: :mod:`perfmodel.replay` prepares the arrays.

Caches: block hashes are remapped to dense ids ``0..U-1`` beforehand (no hashing here). Which
workers hold a block is one bitmask per block, so routing reads one word per block for all
workers. A bounded cache (LRU) keeps its recency order as a log per worker, read and written
in order, of at most twice ``capacity`` entries: small enough for the CPU's caches whatever the
number of distinct blocks.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._compat import no_reference_counting
from ..inputs.codes import Contention
from .handoff import fixed_ms, jit, kv_bytes, loop_helper, messages_of, transfer_ms

NONE, FIFO, FAIR = int(Contention.NONE), int(Contention.FIFO), int(Contention.FAIR)  # (plain ints: constants)
_NIL = -1


@jit(inline="always")
def _popcount(x):
    """Set bits of a uint64 (the classic bit-slicing sum)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    x = x + (x >> np.uint64(8))  # byte sums by shifts, not a wrapping multiply (plain Python warns of that)
    x = x + (x >> np.uint64(16))
    x = x + (x >> np.uint64(32))
    return np.int64(x & np.uint64(0x7F))


# Block ids in a bounded integer range (Mooncake's 0, 1, 2...; a synthetic trace's, with gaps) are ranked
# through one small table over the range instead of a hash table: per 64 values of the range, a bitmap of
# those present and the count of values present before them, side by side so that each lookup reads one
# cache line (a quarter of a byte per value of the range). perfmodel.replay shares the two passes over
# the ids between threads, each marking its share in a bitmap of its own.


@jit
def mark_ids(values, lowest, marks):
    """Mark each of ``values`` (less ``lowest``) in the bitmap ``marks`` (64 values a word)."""
    one = np.uint64(1)
    for i in range(values.shape[0]):
        v = values[i] - lowest
        marks[v >> 6] |= one << np.uint64(v & 63)


@jit
def rank_table(marks):
    """The rank table of the bitmaps ``marks`` (one row each, merged): per word, its bits and how many
    values are present before it; and how many values are present in all (U)."""
    table = np.empty((marks.shape[1], 2), dtype=np.uint64)
    count = 0
    for q in range(marks.shape[1]):
        word = marks[0, q]
        for p in range(1, marks.shape[0]):
            word |= marks[p, q]
        table[q, 0] = word
        table[q, 1] = count
        count += _popcount(word)
    return table, count


@jit
def rank_ids(values, lowest, table, out):
    """``out[i]``: the rank of ``values[i]`` among the distinct values (dense ids ``0..U-1`` in
    increasing value order), from the :func:`rank_table` of their bitmap."""
    one = np.uint64(1)
    for i in range(values.shape[0]):
        v = values[i] - lowest
        q = v >> 6
        out[i] = np.int64(table[q, 1]) + _popcount(table[q, 0] & ((one << np.uint64(v & 63)) - one))


#: A binary heap's entries (a structured array, one row per entry): ordered by (time, seq), each holding a
#: value. Every queue with a time in the replays is one (:func:`heap_push`, :func:`heap_pop`).
HEAP = np.dtype([("time", np.float64), ("seq", np.int64), ("value", np.int64)], align=True)


def new_heap(n: int, *shape: int) -> np.ndarray:
    """An empty :data:`HEAP` with room for ``n`` entries (``new_heap(k, n)``: ``k`` heaps of ``n``).

    >>> heap = new_heap(4); size = heap_push(heap, 0, 2.0, 0, 7); size = heap_push(heap, size, 1.0, 1, 8)
    >>> size = heap_pop(heap, size); int(heap["value"][size]), size
    (8, 1)
    """
    return np.zeros((n, *shape), HEAP).view(np.recarray)


# The heap's comparisons and swaps are written out rather than called: as nested ``inline="always"``
# helpers taking the arrays, the same operations took ~4x the time (measured).


@loop_helper
def heap_push(heap, size, time, seq, item):
    """Push (time, seq, item) onto ``heap`` (a :data:`HEAP`) of ``size`` entries ordered by (time, seq); return
    the new size."""
    times, seqs, items = heap.time, heap.seq, heap.value
    i = size
    while i > 0:  # move parents down until the new entry's place is found
        parent = (i - 1) // 2
        if times[parent] < time or (times[parent] == time and seqs[parent] < seq):
            break
        times[i], seqs[i], items[i] = times[parent], seqs[parent], items[parent]
        i = parent
    times[i], seqs[i], items[i] = time, seq, item
    return size + 1


@loop_helper
def heap_pop(heap, size):
    """Remove the smallest entry of ``heap`` (a :data:`HEAP`; kept at index ``size - 1`` for the caller to
    read); return the new size."""
    times, seqs, items = heap.time, heap.seq, heap.value
    last = size - 1
    time, seq, item = times[last], seqs[last], items[last]  # the entry to sift down from the root
    smallest_time, smallest_seq, smallest_item = times[0], seqs[0], items[0]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= last:
            break
        if child + 1 < last and (
            times[child + 1] < times[child] or (times[child + 1] == times[child] and seqs[child + 1] < seqs[child])
        ):
            child += 1
        if time < times[child] or (time == times[child] and seq < seqs[child]):
            break
        times[i], seqs[i], items[i] = times[child], seqs[child], items[child]
        i = child
    times[i], seqs[i], items[i] = time, seq, item
    times[last], seqs[last], items[last] = smallest_time, smallest_seq, smallest_item
    return last


@loop_helper(python=False)
def _request_bytes(kv_terms, model, tokens, charged):
    """Bytes moved for ``charged`` tokens of a ``tokens``-token prompt of model row ``model`` (the handoff
    kernel's formula, :func:`perfmodel.kernels.handoff.kv_bytes`: tokens times bytes per token, the capped layers, and the
    state, which always moves)."""
    return kv_bytes(
        kv_terms[model, 0],
        kv_terms[model, 1],
        kv_terms[model, 3],
        kv_terms[model, 5],
        kv_terms[model, 2],
        kv_terms[model, 4],
        np.float64(charged),
        np.float64(tokens),
    )


@loop_helper(python=False)
def insert_blocks(r, w, blocks, offsets, holders, slot_of, log, first, end, size, capacity):
    """Request ``r``'s blocks enter worker ``w``'s cache, in order, each becoming the most recent (LRU:
    beyond ``capacity`` blocks the least recent leaves; ``capacity < 0``: unbounded).

    ``holders[b, w // 64]`` has bit ``w % 64`` set when worker ``w`` holds block ``b``. A bounded
    cache keeps its recency order as a log: ``log[w, first[w]:end[w]]`` lists its blocks from the least
    to the most recent, with -1 where a block was used again later (its entry moved to the end), and
    ``slot_of[w, b]`` is the position of held block ``b``'s entry (read only while ``holders`` says
    it is held: a block that leaves keeps a stale value, one write fewer). Every step reads or writes
    the log in order (a linked list in recency order took 1.1-1.5x the time, measured side by side);
    when the log reaches its end its live entries move to the front, at most once per ``capacity``
    insertions. ``size[w]``: blocks held.
    """
    word, bit = w >> 6, np.uint64(1) << np.uint64(w & 63)
    if capacity < 0:  # unbounded: membership is all there is to keep
        for k in range(offsets[r], offsets[r + 1]):
            holders[blocks[k], word] |= bit
        return
    if capacity == 0:  # every block leaves as it enters
        return
    length = log.shape[1]
    oldest, stop, held = first[w], end[w], size[w]
    for k in range(offsets[r], offsets[r + 1]):
        b = blocks[k]
        held_by = holders[b, word]
        if held_by & bit:  # held: its entry moves to the end
            at = slot_of[w, b]
            if at == stop - 1:
                continue  # already the most recent
            log[w, at] = _NIL
        else:
            if held == capacity:  # full: the least recent block leaves
                victim = log[w, oldest]
                oldest += 1
                while victim == _NIL:
                    victim = log[w, oldest]
                    oldest += 1
                holders[victim, word] &= ~bit
            else:
                held += 1
            holders[b, word] = held_by | bit
        if stop == length:  # the log is full: its live entries move to the front, in order
            kept = 0
            for q in range(oldest, stop):
                v = log[w, q]
                if v != _NIL:
                    log[w, kept] = v
                    slot_of[w, v] = kept
                    kept += 1
            oldest, stop = 0, kept
        log[w, stop] = b
        slot_of[w, b] = stop
        stop += 1
    first[w], end[w], size[w] = oldest, stop, held


@loop_helper(python=False)
def route(r, blocks, offsets, holders, alive, workers, start, prefix_routing):
    """(worker, cached prefix in blocks) for request ``r``: with prefix routing the worker holding
    the longest prefix (ties: the first from ``start`` on, round-robin order), else worker ``start``.
    One pass over the blocks with the set of workers still matching (``alive``, bit words)."""
    words = alive.shape[0]
    if words == 1:  # up to 64 workers: the set is one word
        one = np.uint64(1)
        matching = (~np.uint64(0) >> np.uint64(64 - workers)) if prefix_routing else one << np.uint64(start)
        depth = 0
        for k in range(offsets[r], offsets[r + 1]):
            held = holders[blocks[k], 0]
            if matching & held == 0:
                break
            matching &= held
            depth += 1
        later = matching >> np.uint64(start)  # the first match from `start` on, else from 0
        c, bits = (start, later) if later != 0 else (0, matching)
        while bits & one == 0:
            bits >>= one
            c += 1
        return c, depth
    for q in range(words):
        alive[q] = 0
    if prefix_routing:
        for c in range(workers):
            alive[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    else:
        alive[start >> 6] = np.uint64(1) << np.uint64(start & 63)
    depth = 0
    for k in range(offsets[r], offsets[r + 1]):
        b = blocks[k]
        remaining = np.uint64(0)
        for q in range(words):
            remaining |= alive[q] & holders[b, q]
        if remaining == 0:
            break  # `alive` keeps the workers that matched longest
        for q in range(words):
            alive[q] &= holders[b, q]
        depth += 1
    for j in range(workers):
        c = (start + j) % workers
        if (alive[c >> 6] >> np.uint64(c & 63)) & np.uint64(1):
            return c, depth
    return start, depth


@loop_helper(python=False)
def cached_blocks(r, w, blocks, offsets, holders):
    """How many of request ``r``'s first block ids worker ``w``'s cache holds: its cached prefix there, in blocks."""
    word, bit = w >> 6, np.uint64(1) << np.uint64(w & 63)
    depth = 0
    for k in range(offsets[r], offsets[r + 1]):
        if holders[blocks[k], word] & bit == 0:
            break
        depth += 1
    return depth


class Requests(NamedTuple):
    """Per-request inputs of a replay on links (:func:`perfmodel.kernels.serving.replay`) (arrays of one length, except ``blocks``/``offsets``)."""

    order: np.ndarray  # int64: requests in ready order (ties by trace order)
    ready_ms: np.ndarray  # float64: when each handoff may start (layer-wise: when its first layer group is computed)
    tokens: np.ndarray  # int64: prompt tokens
    blocks: np.ndarray  # int64: dense block ids, request r's at blocks[offsets[r]:offsets[r + 1]]
    offsets: np.ndarray  # int64, length n + 1
    model_of: np.ndarray  # int64: each request's row of kv_terms (mixed fleets: several models)
    kv_terms: np.ndarray  # float64 (models, 10): bytes per token of full-attention layers, of window layers,
    #                       window tokens, bytes per token of chunked layers, chunk tokens, state bytes; the
    #                       message terms (perfmodel.inputs.resolve.MessageTerms: 0 when messages cost nothing)
    prefill_end_ms: np.ndarray  # float64: when each prefill ends (= ready_ms unless streamed layer-wise)
    last_fraction: np.ndarray  # float64: the share of the transfer that waits for the last layer group (1: all)
    blocks_per_message: np.ndarray  # float64: each request's consecutive blocks merged into one message (inf: one
    #                                 per layer); read only where messages cost


class Cluster(NamedTuple):
    """The configuration of one replay (scalars)."""

    n_unique: int  # distinct block ids
    hash_block_tokens: int  # prompt tokens per block id
    block_size: int  # KV block size charged in destination_missing mode
    destination_missing: bool
    workers: int  # decode workers
    capacity: int  # LRU blocks per decode worker; < 0: unbounded
    prefix_routing: bool
    contention: int  # NONE, FIFO or FAIR
    n_links: int
    bandwidth_gb_s: float
    latency_ms: float
    per_block_ms: float  # cost per KV block moved
    per_message_ms: float  # cost per message posted
    fallback_delay_ms: float  # every transfer's time when the bandwidth is 0 (upstream's replay)


#: Per-request outputs of a replay on links (:func:`perfmodel.kernels.serving.replay`), one row per request,
#: filled in place: a structured array (numba passes it as one array, where a record of ten arrays costs ten
#: arrays' words in every call, :mod:`perfmodel.kernels.network`), read in Python as a ``numpy.recarray``.
RESULTS = np.dtype(
    [
        ("worker", np.int64),
        ("cached", np.int64),
        ("charged", np.int64),
        ("bytes", np.float64),
        ("transfer", np.float64),
        ("start", np.float64),
        ("end", np.float64),
        ("link", np.int64),
        ("queue", np.float64),
        ("saved", np.float64),  # destination_missing: bytes a cold destination would have needed, minus those sent
    ],
    align=True,
)


class Results:
    """The per-request outputs (:data:`RESULTS`) of a replay on links."""

    @staticmethod
    def empty(n: int) -> np.recarray:
        """The outputs of ``n`` requests, before the replay (zeros).

        >>> Results.empty(2).link.tolist()
        [0, 0]
        """
        return np.zeros(n, RESULTS).view(np.recarray)


def new_caches(n_unique: int, workers: int, capacity: int) -> tuple:
    """The decode workers' caches, empty (see :func:`insert_blocks`): (holders, alive, slot_of, log, first,
    end, size, capacity; ``capacity`` -1 when no cache can ever be full). Made by numpy, in Python: compiled,
    the allocations were a second of the replay's first compile.

    >>> [a.shape for a in new_caches(10, 2, 4)[:4]], new_caches(10, 2, 20)[-1]
    ([(10, 1), (1,), (2, 10), (2, 8)], -1)
    """
    words = (workers + 63) // 64
    holders = np.zeros((max(n_unique, 1), words), dtype=np.uint64)  # zero pages until touched
    alive = np.empty(words, dtype=np.uint64)
    if capacity >= n_unique:  # never full, so nothing ever leaves: membership is all there is to keep
        capacity = -1
    slots = capacity if capacity > 0 else 0
    # worker-major: a request's consecutive block ids share cache lines (14% faster than block-major at 8 workers)
    slot_of = np.zeros((workers, max(n_unique, 1) if slots else 1), dtype=np.int32)
    # each log has room for its live entries and as many more (positions stay within int32)
    log = np.empty((workers, min(2 * slots, 2**31 - 1) if slots else 1), dtype=np.int32)
    ints = [np.zeros(workers, dtype=np.int64) for _ in range(3)]
    return (holders, alive, slot_of, log, *ints, capacity)


@jit(inline="always")
def charged_tokens(n_tokens, hit_blocks, hash_block_tokens, block_size, destination_missing):
    """(cached tokens, charged tokens, the prompt's blocks, its cached blocks) of a ``n_tokens``-token prompt
    whose first ``hit_blocks`` block ids (of ``hash_block_tokens`` tokens each) the destination holds: only
    full KV blocks hit (upstream); destination_missing charges the blocks not cached, else the prompt."""
    n_blocks = (n_tokens + block_size - 1) // block_size
    cached_blocks = min(hit_blocks * hash_block_tokens // block_size, n_tokens // block_size)
    charged = (n_blocks - cached_blocks) * block_size if destination_missing else n_tokens
    return cached_blocks * block_size, charged, n_blocks, cached_blocks


@loop_helper(python=False)
def _charge(r, hit_blocks, requests, cluster, results):
    """Request ``r``'s charged tokens, bytes and time alone on a link (fixed costs included), written to
    ``results``; returns (bytes, fixed costs in ms (:func:`perfmodel.kernels.handoff.fixed_ms`), time alone in ms)."""
    tokens, kv_terms, model_of = requests.tokens, requests.kv_terms, requests.model_of
    block_size, destination_missing = cluster.block_size, cluster.destination_missing
    n_tokens = tokens[r]
    cached, charged, n_blocks, cached_blocks = charged_tokens(
        n_tokens, hit_blocks, cluster.hash_block_tokens, block_size, destination_missing
    )
    results.cached[r] = cached
    results.charged[r] = charged
    k = model_of[r]
    nbytes = _request_bytes(kv_terms, k, n_tokens, charged)
    results.bytes[r] = nbytes
    if destination_missing:  # against a cold destination, which is charged every block
        results.saved[r] = _request_bytes(kv_terms, k, n_tokens, n_blocks * block_size) - nbytes
    moved_blocks = (n_blocks - cached_blocks) if destination_missing else n_blocks
    message_ms = 0.0
    if cluster.per_message_ms > 0:
        message_ms = cluster.per_message_ms * messages_of(
            np.float64(charged),
            np.float64(n_tokens),
            np.float64(block_size),
            kv_terms[k, 6],
            kv_terms[k, 7],
            kv_terms[k, 8],
            kv_terms[k, 9],
            kv_terms[k, 2],
            kv_terms[k, 4],
            requests.blocks_per_message[r],
        )
    fixed = fixed_ms(cluster.latency_ms, moved_blocks * cluster.per_block_ms, message_ms)
    alone = (
        transfer_ms(nbytes, cluster.bandwidth_gb_s, fixed) if cluster.bandwidth_gb_s > 0 else cluster.fallback_delay_ms
    )  # (0: no delay is modeled)
    results.transfer[r] = alone
    return nbytes, fixed, alone


@loop_helper(python=False)
def _fifo_start(now, alone, link_free):
    """(link, start): the link free soonest (ties: the lowest), and when the transfer starts on it; the
    link is then busy for the transfer's own time (not while layers compute)."""
    link = 0
    for k in range(1, link_free.shape[0]):
        if link_free[k] < link_free[link]:
            link = k
    start = max(now, link_free[link])
    link_free[link] = start + alone
    return link, start


# Fair sharing, per link: virtual time (bytes served to each transfer moving on it), how many move, when
# it was last brought up to date, and a heap of them by (virtual finish tag, sequence) (`Fair`). Transfers
# paying their fixed costs wait in a heap by (the time those end, sequence): they hold no share meanwhile.


class Fair(NamedTuple):
    """The state of fair sharing (see above); ``moving`` grows when a link's heap is full."""

    virtual: np.ndarray
    active: np.ndarray
    last_update: np.ndarray
    moving: np.ndarray  # HEAP (links, room): each link's transfers moving, by (virtual finish tag, sequence)
    starting: np.ndarray  # HEAP: transfers paying their fixed costs, by when their bytes may start to move


def _new_fair(n_links: int, n: int, origin: float, capacity: int = 64) -> Fair:
    """The state of fair sharing on ``n_links`` links for ``n`` requests, none moving yet (links up to date
    at ``origin``, ms), with room for ``capacity`` transfers moving on each link (numpy, in Python).

    >>> _new_fair(2, 3, 0.0).moving.shape
    (2, 64)
    """
    return Fair(
        np.zeros(n_links),
        np.zeros(n_links, dtype=np.int64),
        np.full(n_links, origin),
        new_heap(n_links, capacity),
        new_heap(n),
    )


def _grown(fair: Fair) -> Fair:
    """``fair`` with room for twice as many transfers moving on each link (numpy, in Python).

    >>> _grown(_new_fair(2, 3, 0.0)).moving.shape
    (2, 128)
    """
    n_links, capacity = fair.moving.shape
    moving = new_heap(n_links, 2 * capacity)
    moving[:, :capacity] = fair.moving
    return fair._replace(moving=moving)


@loop_helper(python=False)
def _next_end(fair, rate):
    """(time, link) at which the next transfer finishes moving its bytes ((inf, -1): none is moving)."""
    next_time, next_link = np.inf, -1
    for link in range(fair.active.shape[0]):
        count = fair.active[link]
        if count > 0:
            t = fair.last_update[link] + (fair.moving.time[link, 0] - fair.virtual[link]) * count / rate
            if t < next_time:
                next_time, next_link = t, link
    return next_time, next_link


@loop_helper(python=False)
def _fewest_moving(active):
    """The link with the fewest transfers moving (ties: the lowest)."""
    best = 0
    for link in range(1, active.shape[0]):
        if active[link] < active[best]:
            best = link
    return best


@loop_helper(python=False)
def _begin_moving(fair, starting, t, rate, out_bytes, out_link):
    """The transfer whose fixed costs end first (at ``t``) starts moving its bytes on the link with the
    fewest moving; returns the number still paying fixed costs, or -1 (nothing done) when that link's heap
    is full (grow it and call again)."""
    best = _fewest_moving(fair.active)
    count = fair.active[best]
    if count == fair.moving.shape[1]:
        return -1
    starting = heap_pop(fair.starting, starting)
    seq, r = fair.starting.seq[starting], fair.starting.value[starting]
    if count > 0:
        fair.virtual[best] += (t - fair.last_update[best]) * rate / count
    fair.last_update[best] = t
    fair.active[best] = heap_push(fair.moving[best], count, fair.virtual[best] + out_bytes[r], seq, r)
    out_link[r] = best
    return starting


@loop_helper(python=False)
def _finish_moving(fair, link, t, requests, results, pend, pending):
    """The transfer on ``link`` with the smallest finish tag ends at ``t`` (no earlier than layer-wise
    streaming allows); its blocks are then pending for the cache. Returns the pending count."""
    fair.active[link] = heap_pop(fair.moving[link], fair.active[link])
    at = fair.active[link]
    tag, seq, r = fair.moving.time[link, at], fair.moving.seq[link, at], fair.moving.value[link, at]
    fair.virtual[link] = tag
    fair.last_update[link] = t
    earliest = requests.prefill_end_ms[r] + results.transfer[r] * requests.last_fraction[r]
    end = max(t, earliest)
    results.end[r] = end
    # (waiting or slowed: beyond what it takes alone, streamed layer by layer no earlier than its last group)
    results.queue[r] = max(end - max(requests.ready_ms[r] + results.transfer[r], earliest), 0.0)
    return heap_push(pend, pending, end, seq, r)


@jit(inline="always", **no_reference_counting())
def _advance_fair(fair, counts, now, rate, requests, results, pend):
    """Fair sharing up to ``now``: data phases starting (when their fixed costs end) and transfers
    finishing, in time order (on ties a finish first: its link is free for the start). ``counts``: [pending insertions, transfers paying
    fixed costs], updated. Returns False when done, True when a link's heap must grow first. (Inlined in
    :func:`advance`, its one caller: compiled apart, each call copied ~240 words of records,
    :mod:`perfmodel.kernels.network`; fair sharing with a latency took 1.5x fifo's time, 1.24x inlined.)"""
    while True:
        next_time, next_link = _next_end(fair, rate)
        start_time = fair.starting.time[0] if counts[1] > 0 else np.inf
        if counts[1] > 0 and start_time < next_time and start_time <= now:
            starting = _begin_moving(fair, counts[1], start_time, rate, results.bytes, results.link)
            if starting < 0:
                return True
            counts[1] = starting
        elif next_link >= 0 and next_time <= now:
            counts[0] = _finish_moving(fair, next_link, next_time, requests, results, pend, counts[0])
        else:
            return False


class State(NamedTuple):
    """A replay's working state (:func:`_new_state`), made in Python and kept between the kernel's passes
    (:func:`perfmodel.kernels.serving.serve_pass`): the caches (:func:`new_caches`), the pending cache insertions (a heap ordered by
    (end time, processing sequence) holding requests), counters, when each link is next free (fifo) and the
    fair sharing's state (:class:`Fair`, of 0 links unless fair)."""

    holders: np.ndarray
    alive: np.ndarray
    slot_of: np.ndarray
    log: np.ndarray
    log_first: np.ndarray
    log_end: np.ndarray
    size: np.ndarray
    capacity: np.int64
    pending: np.ndarray  # HEAP
    counts: np.ndarray  # int64 (3,): pending insertions, fair: transfers paying their fixed costs, next worker
    link_free: np.ndarray
    fair: Fair


def _new_state(requests: Requests, cluster: Cluster) -> State:
    """The working state of a replay of ``requests`` on ``cluster``, before the first request."""
    order, ready_ms = requests.order, requests.ready_ms
    n = order.shape[0]
    holders, alive, slot_of, log, first, end, size, capacity = new_caches(
        cluster.n_unique, cluster.workers, cluster.capacity
    )
    # the links are free from the first transfer's earliest start on (before the trace's first arrival, when
    # layer-wise streaming starts a transfer while its prefill still runs)
    origin = min(ready_ms[order[0]], 0.0) if n else 0.0
    fair = cluster.contention == FAIR
    return State(
        holders,
        alive,
        slot_of,
        log,
        first,
        end,
        size,
        np.int64(capacity),
        new_heap(n),
        np.zeros(3, dtype=np.int64),
        np.full(cluster.n_links, origin),
        _new_fair(cluster.n_links if fair else 0, n if fair else 0, origin),
    )


@loop_helper(python=False)
def deliver(r, requests, cluster, results, state):
    """Request ``r``'s handoff has ended: its blocks enter its decode worker's cache."""
    insert_blocks(
        r,
        results.worker[r],
        requests.blocks,
        requests.offsets,
        state.holders,
        state.slot_of,
        state.log,
        state.log_first,
        state.log_end,
        state.size,
        state.capacity,
    )


@loop_helper(python=False)
def charge_now(r, requests, cluster, results, state):
    """Request ``r``'s charge (see :func:`_charge`) against its decode worker's cache as it is now, when its handoff
    starts: it may have waited for admission since it was routed, while blocks entered or left that cache.
    Returns (bytes, fixed costs, time alone)."""
    hit_blocks = cached_blocks(r, results.worker[r], requests.blocks, requests.offsets, state.holders)
    return _charge(r, hit_blocks, requests, cluster, results)


@loop_helper(python=False)
def start_transfer(seq, r, now, nbytes, fixed, alone, cluster, requests, results, state, pending):
    """Request ``r``'s handoff starts at ``now``, the ``seq``-th to start: alone (``none``), on the link free
    soonest (``fifo``) or, once its fixed costs are paid, sharing one (``fair``). Returns the count of handoffs
    whose end is known (the pending heap, ordered by (end, seq))."""
    # layer-wise streaming: however fast the link, the last layer group is sent after the prefill ends
    earliest_end = requests.prefill_end_ms[r] + alone * requests.last_fraction[r]
    results.start[r] = now
    contention, fair = cluster.contention, state.fair
    if contention == FAIR and nbytes > 0:  # fixed costs first, then the bytes share a link
        state.counts[1] = heap_push(fair.starting, state.counts[1], now + fixed, seq, r)
        results.end[r] = np.nan  # set when its last byte arrives
        return pending
    link, start_ms = _fifo_start(now, alone, state.link_free) if contention == FIFO and nbytes > 0 else (-1, now)
    end = max(start_ms + alone, earliest_end)
    results.link[r], results.start[r], results.end[r], results.queue[r] = link, start_ms, end, start_ms - now
    return heap_push(state.pending, pending, end, seq, r)


class OnLinks(NamedTuple):
    """A replay in progress on links, as the serving loop (:mod:`perfmodel.kernels.serving`) drives it: the
    replay's records."""

    requests: Requests
    cluster: Cluster
    results: np.ndarray  # RESULTS, one row per request
    state: State


@loop_helper(python=False)
def route_request(r, now, net):
    """Request ``r`` is routed at ``now`` (from the round-robin position); returns its decode worker. It is charged
    when its handoff starts (:func:`start_request`)."""
    requests, cluster, state = net.requests, net.cluster, net.state
    w = route(
        r, requests.blocks, requests.offsets, state.holders, state.alive, cluster.workers, state.counts[2],
        cluster.prefix_routing,
    )[0]  # fmt: skip
    net.results.worker[r] = w
    state.counts[2] = w + 1 if w + 1 < cluster.workers else 0  # (no integer division: once per request)
    return w


@loop_helper(python=False)
def start_request(i, r, now, net):
    """Request ``r``'s handoff starts at ``now``, the ``i``-th to start (ties of ends go by it), charged against its
    decode worker's cache as it is now (:func:`charge_now`)."""
    requests, cluster, results, state = net.requests, net.cluster, net.results, net.state
    requests.ready_ms[r] = now  # (the replay's ready time: a link's queue is counted from it)
    nbytes, fixed, alone = charge_now(r, requests, cluster, results, state)
    state.counts[0] = start_transfer(
        i, r, now, nbytes, fixed, alone, cluster, requests, results, state, state.counts[0]
    )


@loop_helper(python=False)
def room(net):
    """Always: a handoff on links needs no room (fair sharing's heaps grow in :func:`advance`)."""
    return True


@loop_helper(python=False)
def next_event(net):
    """Fair sharing's next event (a fixed cost ending, bytes finishing; inf: none, or no fair sharing)."""
    state = net.state
    if net.cluster.contention != FAIR:
        return np.inf
    t = _next_end(state.fair, net.cluster.bandwidth_gb_s * 1e6)[0]
    if state.counts[1] > 0 and state.fair.starting.time[0] < t:
        t = state.fair.starting.time[0]
    return t


@loop_helper(python=False)
def advance(t, net):
    """Fair sharing's events up to ``t`` (its next event, :func:`next_event`), in one pass; True when a link's
    heap must grow first (:func:`grown`)."""
    state = net.state
    if net.cluster.contention != FAIR:
        return False
    return _advance_fair(
        state.fair,
        state.counts,
        t,
        net.cluster.bandwidth_gb_s * 1e6,
        net.requests,
        net.results,
        state.pending,
    )


@loop_helper(python=False)
def next_end(net):
    """The earliest known end of a handoff whose blocks have yet to enter its cache (inf: none)."""
    return net.state.pending.time[0] if net.state.counts[0] > 0 else np.inf


@loop_helper(python=False)
def take_end(net):
    """The earliest ended handoff (:func:`next_end`) leaves the pending heap and its blocks enter its decode
    worker's cache; returns (its request, its end)."""
    state = net.state
    pending = heap_pop(state.pending, state.counts[0])
    state.counts[0] = pending
    r = state.pending.value[pending]
    deliver(r, net.requests, net.cluster, net.results, state)
    return r, net.results.end[r]


def new_run(requests: Requests, cluster: Cluster, results: np.ndarray) -> OnLinks:
    """A replay of ``requests`` (a :class:`Requests`) on the links of ``cluster`` (a :class:`Cluster`), before its
    first request, filling ``results``; :func:`perfmodel.kernels.serving.replay` runs it.

    >>> Results.empty(2).link.tolist()  # (filled as the replay runs)
    [0, 0]
    """
    return OnLinks(requests, cluster, results, _new_state(requests, cluster))


def grown(net: OnLinks) -> OnLinks:
    """``net`` with room for twice as many transfers moving on each link (:func:`advance` stopped for it)."""
    return net._replace(state=net.state._replace(fair=_grown(net.state.fair)))
