"""A slow, plain-Python statement of trace replay (perfmodel.replay_handoffs' semantics).

Independent of perfmodel: OrderedDict LRU caches, a list of pending cache insertions,
and fair sharing simulated directly on each transfer's remaining bytes.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict


def replay_reference(
    ready,
    tokens,
    hash_ids,
    *,
    bytes_per_token,
    bandwidth_gb_s,
    latency_ms=0.0,
    mode="full_prompt",
    block_size=512,
    hash_block_tokens=512,
    workers=1,
    capacity=None,
    routing="prefix",
    contention="none",
    links=1,
    per_block_ms=0.0,
    lead=None,
    last_fraction=None,
):
    """``lead[r]``: how long before its prefill ends request r's transfer may start (layer-wise
    streaming); ``last_fraction[r]``: the share of its transfer that cannot start before then."""
    n = len(ready)
    lead = lead or [0.0] * n
    last_fraction = last_fraction or [1.0] * n
    available = [ready[r] - lead[r] for r in range(n)]
    order = sorted(range(n), key=lambda r: (available[r], r))
    caches = [OrderedDict() for _ in range(workers)]
    rate = bandwidth_gb_s * 1e6  # bytes per ms
    out = [
        dict(
            decode_worker=0,
            link=None,
            cached_tokens=0,
            charged_tokens=0,
            transfer_bytes=0.0,
            transfer_ms=0.0,
            start_ms=0.0,
            end_ms=0.0,
        )
        for _ in range(n)
    ]
    pending = []  # (end, seq, request): blocks enter the cache when the transfer ends
    link_free = [-math.inf] * links  # free from the start, even a layer-wise start before the first arrival
    active = [[] for _ in range(links)]  # fair: [remaining bytes, seq, request] per link
    waiting = []  # fair: (data start time, seq, request), in the order their fixed costs end
    clock = [0.0]
    rr = 0

    def cached_prefix(r, w):
        count = 0
        for block in hash_ids[r]:
            if block not in caches[w]:
                break
            count += 1
        return count

    def insert(r):
        cache = caches[out[r]["decode_worker"]]
        for block in hash_ids[r]:
            if block in cache:
                cache.move_to_end(block)
            else:
                cache[block] = True
                if capacity is not None and len(cache) > capacity:
                    cache.popitem(last=False)

    def advance(now):
        """Fair sharing up to `now`: data phases starting and transfers finishing, in time order."""
        while True:
            finish, finish_link = math.inf, -1
            for k in range(links):
                if active[k]:
                    smallest = min(active[k], key=lambda a: (a[0], a[1]))
                    t = clock[0] + smallest[0] * len(active[k]) / rate
                    if t < finish:
                        finish, finish_link = t, k
            start = waiting[0][0] if waiting else math.inf
            t = min(start, finish)
            if t > now or t == math.inf:
                return
            for k in range(links):  # everyone progresses until t
                for a in active[k]:
                    a[0] -= (t - clock[0]) * rate / len(active[k])
            clock[0] = t
            if start < finish:  # (a transfer finishing at that instant first: its link is free)
                _, seq, r = waiting.pop(0)
                k = min(range(links), key=lambda j: (len(active[j]), j))
                active[k].append([out[r]["transfer_bytes"], seq, r])
                out[r]["link"] = k
            else:
                done = min(active[finish_link], key=lambda a: (a[0], a[1]))
                active[finish_link].remove(done)
                r = done[2]
                end = max(t, ready[r] + out[r]["transfer_ms"] * last_fraction[r])
                out[r]["end_ms"] = end
                pending.append((end, done[1], r))

    for seq, r in enumerate(order + [None]):
        now = available[r] if r is not None else math.inf
        if contention == "fair":
            advance(now)
        for item in sorted(p for p in pending if p[0] <= now):
            pending.remove(item)
            insert(item[2])
        if r is None:
            break
        if routing == "prefix":
            candidates = [(rr + j) % workers for j in range(workers)]
            w = max(candidates, key=lambda c: (cached_prefix(r, c), -candidates.index(c)))
        else:
            w = rr % workers
        rr = (w + 1) % workers
        out[r]["decode_worker"] = w
        n_blocks = -(-tokens[r] // block_size)
        cached_blocks = min(cached_prefix(r, w) * hash_block_tokens // block_size, tokens[r] // block_size)
        out[r]["cached_tokens"] = cached_blocks * block_size
        charged = (n_blocks - cached_blocks) * block_size if mode == "destination_missing" else tokens[r]
        out[r]["charged_tokens"] = charged
        nbytes = float(charged) * bytes_per_token
        out[r]["transfer_bytes"] = nbytes
        moved = (n_blocks - cached_blocks) if mode == "destination_missing" else n_blocks
        setup = latency_ms + moved * per_block_ms
        alone = nbytes / (bandwidth_gb_s * 1e9) * 1000.0 + (setup if nbytes > 0 else 0.0)
        out[r]["transfer_ms"] = alone
        out[r]["start_ms"] = now
        earliest_end = ready[r] + alone * last_fraction[r]  # the last layer group goes after the prefill ends
        if nbytes > 0 and contention == "fifo":
            k = min(range(links), key=lambda j: (link_free[j], j))
            start = max(now, link_free[k])
            end = max(start + alone, earliest_end)
            link_free[k] = start + alone
            out[r].update(link=k, start_ms=start, end_ms=end)
            pending.append((end, seq, r))
        elif nbytes > 0 and contention == "fair":
            bisect.insort(waiting, (now + setup, seq, r))  # bytes move once the fixed costs are paid
        else:
            out[r]["end_ms"] = max(now + alone, earliest_end)
            pending.append((out[r]["end_ms"], seq, r))
    for r in range(n):
        out[r]["handoff_delay_ms"] = out[r]["end_ms"] - ready[r]
        out[r]["queue_ms"] = max(out[r]["handoff_delay_ms"] - out[r]["transfer_ms"], 0.0)
    return out


def contention_reference(
    ready,
    tokens,
    *,
    bytes_per_token,
    bandwidth_gb_s,
    contention,
    links=1,
    latency_ms=0.0,
    per_block_ms=0.0,
    per_message_ms=0.0,
    block_size=512,
    num_layers=1,
    kv_layout="layer_kv",
):
    """Each request's handoff delay (ms) on shared links, simulated in global time: no caches (full_prompt), a
    uniform full-attention model of ``num_layers`` layers, bytes given per token.

    Written apart from :func:`replay_reference` and from the kernel: every request's fixed cost
    (``latency + blocks * per_block + messages * per_message``) is known up front; under ``"fair"`` a
    transfer pays it first, holding no share of any link, and at the instant it ends (ties: trace order
    among equal ready times, i.e. processing order) takes the link with the fewest transfers then moving
    (ties: the lowest index) and moves its bytes at ``rate / (transfers moving on that link)``, recomputed
    at every start and end. Under ``"fifo"`` a transfer takes, at its ready time, the link free soonest
    and holds it for its whole time alone. Returns ``(delays, ambiguous)``: ``ambiguous`` is True when a
    data phase began within rounding of a transfer's end on a simulation with several links (there the
    order of the two, and so the link taken, rests on the last bit of two differently computed times).
    """
    n = len(ready)
    rate = bandwidth_gb_s * 1e9 / 1000.0  # bytes per ms
    per_block_message = {"layer_kv": 2 * num_layers, "layer": num_layers, "block": 1}[kv_layout]
    nbytes, fixed, alone = [], [], []
    for r in range(n):
        blocks = -(-tokens[r] // block_size)
        b = float(tokens[r]) * bytes_per_token
        f = latency_ms + blocks * per_block_ms + blocks * per_block_message * per_message_ms if b > 0 else 0.0
        nbytes.append(b)
        fixed.append(f)
        alone.append(b / (bandwidth_gb_s * 1e9) * 1000.0 + f)
    order = sorted(range(n), key=lambda r: (ready[r], r))
    end = [None] * n
    ambiguous = False
    if contention == "none":
        end = [ready[r] + alone[r] for r in range(n)]
    elif contention == "fifo":
        free = [-math.inf] * links
        for r in order:
            if nbytes[r] <= 0:
                end[r] = ready[r]
                continue
            k = min(range(links), key=lambda j: (free[j], j))
            start = max(ready[r], free[k])
            free[k] = start + alone[r]
            end[r] = start + alone[r]
    else:
        rank = {r: position for position, r in enumerate(order)}
        starts = sorted((ready[r] + fixed[r], rank[r], r) for r in range(n) if nbytes[r] > 0)
        for r in range(n):
            if nbytes[r] <= 0:
                end[r] = ready[r]
        moving = [dict() for _ in range(links)]  # per link: request -> bytes still to move
        clock = -math.inf
        while starts or any(moving):
            # the next end: on each link, the transfer with the fewest bytes left, at the link's shared rate
            finish, finish_link, finish_request = math.inf, -1, -1
            for k in range(links):
                if moving[k]:
                    r = min(moving[k], key=lambda q: (moving[k][q], rank[q]))
                    t = clock + moving[k][r] * len(moving[k]) / rate
                    if t < finish:
                        finish, finish_link, finish_request = t, k, r
            start = starts[0][0] if starts else math.inf
            if (
                links > 1
                and finish < math.inf
                and start < math.inf
                and abs(start - finish) <= 1e-9 * max(1.0, abs(start))
            ):
                ambiguous = True
            t = min(start, finish)
            for k in range(links):
                for q in moving[k]:
                    moving[k][q] -= (t - clock) * rate / len(moving[k])
            clock = t
            if start < finish:  # (a transfer finishing at that instant first: its link is free)
                _, _, r = starts.pop(0)
                k = min(range(links), key=lambda j: (len(moving[j]), j))
                moving[k][r] = nbytes[r]
            else:
                del moving[finish_link][finish_request]
                end[finish_request] = t
    return [end[r] - ready[r] for r in range(n)], ambiguous
