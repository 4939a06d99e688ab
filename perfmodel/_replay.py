"""Numba kernel for trace replay: decode-side prefix caches, routing and link contention.

One pass over the requests in ready order, with an event loop for what happens between
two ready times (transfers finishing, their blocks entering caches, shared links
progressing). No pandas, no validation: :mod:`perfmodel.replay` prepares the arrays.

Caches: block hashes are remapped to dense ids ``0..U-1`` beforehand, so each decode
worker's LRU is an intrusive doubly-linked list over arrays (O(1) per block, no hashing).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._kernels import capped_bytes, jit, transfer_ms

NONE, FIFO, FAIR = 0, 1, 2
_NIL = -1


# One int32 pair per (block, worker), block-major: ``node[b, w] = (prev + 2, next)``, all zero when ``b`` is
# not in ``w``'s cache. Membership and LRU links share one cache line, so the routing probe's read of a
# block brings in what the insertion of that block will touch (one miss per block, not two); zero for
# "absent" lets the array start as untouched zero pages.
_ABSENT = 0
_OFFSET = 2  # stored prev = prev + 2: NIL (-1) -> 1, block 0 -> 2; 0 stays "absent"


@jit
def dense_ids(values, lowest, out):
    """``out[i]``: the dense id (0, 1, ... in order of first appearance, like ``pandas.factorize``) of
    ``values[i]``, through a direct table over ``lowest..max(values)``; returns the number of ids. For
    block hashes that are small integers already (Mooncake's), this is one sequential pass."""
    table = np.full(values.max() - lowest + 1 if values.size else 0, _NIL, dtype=np.int64)
    count = 0
    for i in range(values.shape[0]):
        v = values[i] - lowest
        d = table[v]
        if d == _NIL:
            d = count
            table[v] = d
            count += 1
        out[i] = d
    return count


@jit(inline="always")
def _heap_less(times, seqs, i, j):
    return times[i] < times[j] or (times[i] == times[j] and seqs[i] < seqs[j])


@jit(inline="always")
def _heap_swap(times, seqs, items, i, j):
    times[i], times[j] = times[j], times[i]
    seqs[i], seqs[j] = seqs[j], seqs[i]
    items[i], items[j] = items[j], items[i]


@jit(inline="always")
def heap_push(times, seqs, items, size, time, seq, item):
    """Push (time, seq, item) onto the array heap of ``size`` entries ordered by (time, seq); return the new size."""
    i = size
    times[i], seqs[i], items[i] = time, seq, item
    while i > 0:
        parent = (i - 1) // 2
        if not _heap_less(times, seqs, i, parent):
            break
        _heap_swap(times, seqs, items, i, parent)
        i = parent
    return size + 1


@jit(inline="always")
def heap_pop(times, seqs, items, size):
    """Remove the smallest entry (kept at index ``size - 1`` for the caller to read); return the new size."""
    last = size - 1
    _heap_swap(times, seqs, items, 0, last)
    i = 0
    while True:
        left, smallest = 2 * i + 1, i
        if left < last and _heap_less(times, seqs, left, smallest):
            smallest = left
        if left + 1 < last and _heap_less(times, seqs, left + 1, smallest):
            smallest = left + 1
        if smallest == i:
            return last
        _heap_swap(times, seqs, items, i, smallest)
        i = smallest


@jit(inline="always")
def _request_bytes(kv_terms, model, tokens, charged):
    """Bytes moved for ``charged`` tokens of a ``tokens``-token prompt of model row ``model`` (the handoff
    kernel's formula: tokens times bytes per token, the capped layers, and the state when tokens move)."""
    m, n = np.float64(charged), np.float64(tokens)
    nbytes = m * kv_terms[model, 0] + capped_bytes(kv_terms[model, 1], kv_terms[model, 2], kv_terms[model, 3],
                                                   kv_terms[model, 4], m, n)
    return nbytes + (kv_terms[model, 5] if m > 0 else 0.0)


@jit(inline="always")
def _insert_blocks(r, w, blocks, offsets, node, head, tail, size, capacity):
    """Request ``r``'s blocks enter worker ``w``'s cache, in order, each becoming the most recent (LRU:
    beyond ``capacity`` blocks the least recent leaves). One loop per kind of cache, and the list
    operations written out in the loop: numba compiles a short loop body much better than one that
    branches on the kind at every block, and helper calls inside it cost reference counting per block."""
    first, last, count = head[w], tail[w], size[w]
    if capacity < 0:  # unbounded: membership is all there is to keep
        for k in range(offsets[r], offsets[r + 1]):
            b = blocks[k]
            if node[b, w, 0] == _ABSENT:
                node[b, w, 0] = _NIL + _OFFSET  # a member, never linked
                count += 1
    else:
        for k in range(offsets[r], offsets[r + 1]):
            b = blocks[k]
            if b == first:
                continue  # already the most recent
            prev = node[b, w, 0] - _OFFSET
            if prev != _ABSENT - _OFFSET:  # a member: unlink it (it is not the head, so it has a prev)
                nxt = node[b, w, 1]
                node[prev, w, 1] = nxt
                if nxt != _NIL:
                    node[nxt, w, 0] = prev + _OFFSET
                else:
                    last = prev
            else:
                count += 1
            # link at the head
            node[b, w, 0] = _NIL + _OFFSET
            node[b, w, 1] = first
            if first != _NIL:
                node[first, w, 0] = b + _OFFSET
            else:
                last = b
            first = b
            if count > capacity:  # evict the least recent
                victim = last
                last = node[victim, w, 0] - _OFFSET
                if last != _NIL:
                    node[last, w, 1] = _NIL
                else:
                    first = _NIL
                node[victim, w, 0] = _ABSENT
                node[victim, w, 1] = 0
                count -= 1
    head[w], tail[w], size[w] = first, last, count


@jit(inline="always")
def _cached_prefix(r, w, blocks, offsets, node):
    """Leading blocks of request ``r`` present in worker ``w``'s cache."""
    count = 0
    for k in range(offsets[r], offsets[r + 1]):
        if node[blocks[k], w, 0] == _ABSENT:
            break
        count += 1
    return count


class Requests(NamedTuple):
    """Per-request inputs of :func:`replay` (arrays of one length, except ``blocks``/``offsets``)."""

    order: np.ndarray  # int64: requests in ready order (ties by trace order)
    ready_ms: np.ndarray  # float64: when each handoff may start (layer-wise: when its first layer group is computed)
    tokens: np.ndarray  # int64: prompt tokens
    blocks: np.ndarray  # int64: dense block ids, request r's at blocks[offsets[r]:offsets[r + 1]]
    offsets: np.ndarray  # int64, length n + 1
    model_of: np.ndarray  # int64: each request's row of kv_terms (mixed fleets: several models)
    kv_terms: np.ndarray  # float64 (models, 6): bytes per token of full-attention layers, of window layers,
    #                       window tokens, bytes per token of chunked layers, chunk tokens, state bytes
    prefill_end_ms: np.ndarray  # float64: when each prefill ends (= ready_ms unless streamed layer-wise)
    last_fraction: np.ndarray  # float64: the share of the transfer that waits for the last layer group (1: all)


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


class Results(NamedTuple):
    """Per-request outputs of :func:`replay`, filled in place."""

    worker: np.ndarray
    cached: np.ndarray
    charged: np.ndarray
    bytes: np.ndarray
    transfer: np.ndarray
    start: np.ndarray
    end: np.ndarray
    link: np.ndarray
    queue: np.ndarray
    saved: np.ndarray  # destination_missing: bytes a cold destination would have needed, minus those sent

    @classmethod
    def empty(cls, n: int) -> Results:
        ints, floats = ("worker", "cached", "charged", "link"), ("bytes", "transfer", "start", "end", "queue", "saved")
        arrays = {**{k: np.zeros(n, np.int64) for k in ints}, **{k: np.zeros(n, np.float64) for k in floats}}
        return cls(**arrays)


@jit
def replay(requests, cluster, results):
    """Replay ``requests`` (a :class:`Requests`) on ``cluster`` (a :class:`Cluster`); fill ``results``.

    ``blocks[offsets[r]:offsets[r+1]]`` are request ``r``'s dense block ids (one per
    ``hash_block_tokens`` tokens). ``capacity < 0`` means unbounded caches.
    """
    order, ready_ms, tokens, blocks, offsets, model_of, kv_terms, prefill_end_ms, last_fraction = requests
    (n_unique, hash_block_tokens, block_size, destination_missing, workers, capacity, prefix_routing,
     contention, n_links, bandwidth_gb_s, latency_ms, per_block_ms) = cluster
    (out_worker, out_cached, out_charged, out_bytes, out_transfer, out_start, out_end, out_link, out_queue,
     out_saved) = results
    n = order.shape[0]
    # block-major: everything about one block (membership and LRU links in every worker) shares a cache line
    node = np.zeros((max(n_unique, 1), workers, 2 if capacity >= 0 else 1), dtype=np.int32)
    head = np.full(workers, _NIL, dtype=np.int32)
    tail = np.full(workers, _NIL, dtype=np.int32)
    size = np.zeros(workers, dtype=np.int64)
    # pending cache insertions, a heap ordered by (end time, processing sequence) holding requests
    pend_time, pend_seq, pend_item = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    pending = 0
    link_free = np.zeros(n_links)  # fifo: when each link is next free
    # fair sharing, per link: virtual time (bytes served to each active transfer), the active count, and a
    # heap of the active transfers ordered by (virtual finish tag, sequence), grown when full
    virtual = np.zeros(n_links)
    active = np.zeros(n_links, dtype=np.int64)
    last_update = np.zeros(n_links)
    fair_cap = 64
    fair_tag = np.empty((n_links, fair_cap))
    fair_seq = np.empty((n_links, fair_cap), dtype=np.int64)
    fair_item = np.empty((n_links, fair_cap), dtype=np.int64)
    data_start = np.empty(n)  # fair: when a transfer's bytes start flowing (after its setup latency)
    waiting = 0  # fair: index in processing order of the next transfer whose data phase has not begun
    rate = bandwidth_gb_s * 1e6  # bytes per ms
    rr = 0

    for i in range(n + 1):
        now = ready_ms[order[i]] if i < n else np.inf
        if contention == FAIR:
            # advance every link's processor sharing to `now`: starts of data phases and completions in time order
            while True:
                next_time, next_link = np.inf, -1
                for link in range(n_links):
                    if active[link] > 0:
                        tag = fair_tag[link, 0]
                        t = last_update[link] + (tag - virtual[link]) * active[link] / rate
                        if t < next_time:
                            next_time, next_link = t, link
                start_time = data_start[order[waiting]] if waiting < i else np.inf
                if start_time <= next_time and start_time <= now and waiting < i:
                    r = order[waiting]
                    waiting += 1
                    if out_bytes[r] <= 0:
                        continue
                    best = 0
                    for link in range(1, n_links):
                        if active[link] < active[best]:
                            best = link
                    if active[best] > 0:
                        virtual[best] += (start_time - last_update[best]) * rate / active[best]
                    last_update[best] = start_time
                    if active[best] == fair_cap:  # grow every link's heap
                        fair_cap *= 2
                        grown_tag = np.empty((n_links, fair_cap))
                        grown_seq = np.empty((n_links, fair_cap), dtype=np.int64)
                        grown_item = np.empty((n_links, fair_cap), dtype=np.int64)
                        grown_tag[:, :fair_cap // 2] = fair_tag
                        grown_seq[:, :fair_cap // 2] = fair_seq
                        grown_item[:, :fair_cap // 2] = fair_item
                        fair_tag, fair_seq, fair_item = grown_tag, grown_seq, grown_item
                    active[best] = heap_push(fair_tag[best], fair_seq[best], fair_item[best], active[best],
                                             virtual[best] + out_bytes[r], waiting - 1, r)
                    out_link[r] = best
                elif next_link >= 0 and next_time <= now:
                    link = next_link
                    active[link] = heap_pop(fair_tag[link], fair_seq[link], fair_item[link], active[link])
                    tag, seq, r = fair_tag[link, active[link]], fair_seq[link, active[link]], fair_item[link, active[link]]
                    virtual[link] = tag
                    last_update[link] = next_time
                    end = max(next_time, prefill_end_ms[r] + out_transfer[r] * last_fraction[r])
                    out_end[r] = end
                    out_queue[r] = max(end - ready_ms[r] - out_transfer[r], 0.0)
                    pending = heap_push(pend_time, pend_seq, pend_item, pending, end, seq, r)
                else:
                    break
        # blocks of transfers finished by `now` enter their workers' caches, in finishing order
        while pending > 0 and pend_time[0] <= now:
            pending = heap_pop(pend_time, pend_seq, pend_item, pending)
            r = pend_item[pending]
            _insert_blocks(r, out_worker[r], blocks, offsets, node, head, tail, size, capacity)
        if i == n:
            break
        r = order[i]
        # route
        if prefix_routing:
            w, hit_blocks = -1, -1
            for j in range(workers):
                candidate = (rr + j) % workers
                hit = _cached_prefix(r, candidate, blocks, offsets, node)
                if hit > hit_blocks:
                    w, hit_blocks = candidate, hit
        else:
            w = rr % workers
            hit_blocks = _cached_prefix(r, w, blocks, offsets, node)
        rr = (w + 1) % workers
        out_worker[r] = w
        # charge
        n_tokens = tokens[r]
        hit_tokens = hit_blocks * hash_block_tokens
        n_blocks = (n_tokens + block_size - 1) // block_size
        cached_blocks = min(hit_tokens // block_size, n_blocks)
        out_cached[r] = cached_blocks * block_size
        out_charged[r] = (n_blocks - cached_blocks) * block_size if destination_missing else n_tokens
        nbytes = _request_bytes(kv_terms, model_of[r], n_tokens, out_charged[r])
        out_bytes[r] = nbytes
        if destination_missing:  # against a cold destination, which is charged every block
            out_saved[r] = _request_bytes(kv_terms, model_of[r], n_tokens, n_blocks * block_size) - nbytes
        moved_blocks = (n_blocks - cached_blocks) if destination_missing else n_blocks
        alone = transfer_ms(nbytes, bandwidth_gb_s, latency_ms, np.float64(moved_blocks), per_block_ms)
        out_transfer[r] = alone
        # layer-wise streaming: however fast the link, the last layer group is sent after the prefill ends
        earliest_end = prefill_end_ms[r] + alone * last_fraction[r]
        # schedule
        if contention == FIFO and nbytes > 0:
            link = 0
            for k in range(1, n_links):
                if link_free[k] < link_free[link]:
                    link = k
            start = max(now, link_free[link])
            end = max(start + alone, earliest_end)
            link_free[link] = start + alone  # the link is busy for the transfer's own time, not while layers compute
            out_link[r] = link
            out_start[r] = start
            out_end[r] = end
            out_queue[r] = start - now
            pending = heap_push(pend_time, pend_seq, pend_item, pending, end, i, r)
        elif contention == FAIR and nbytes > 0:
            out_start[r] = now
            # setup (latency and per-block work) first, then the bytes share the link
            data_start[r] = now + latency_ms + moved_blocks * per_block_ms
            out_end[r] = np.nan  # set when its last byte arrives
        else:
            end = max(now + alone, earliest_end)
            out_link[r] = -1
            out_start[r] = now
            out_end[r] = end
            out_queue[r] = 0.0
            data_start[r] = now
            pending = heap_push(pend_time, pend_seq, pend_item, pending, end, i, r)
