"""A slow, plain-Python statement of SEMANTICS.md "Replay on a cluster".

Independent of perfmodel (no numpy, no perfmodel imports): flows and paths from
tests/reference_cluster.py (the contract's words), and one global event loop: at every moment
something happens (a request is ready, a flow starts or ends), every moving flow is advanced to it and
ALL rates are recomputed by textbook water-filling (no connected sets). Caches are OrderedDict LRUs.
A model is given by its KV heads, one head's bytes per token and each decode rank's state bytes.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from . import reference_cluster as rc


def _pair_flows(c, H, p, d, a, b, prefill, decode, nodes):
    """The flows' structure of prefill worker a -> decode worker b (bytes of one head per token, state marks)."""
    return rc.flows(
        c, H, 1.0, p, d, state_bytes=0.0, prefill_gpus=prefill[a], decode_gpus=decode[b], nodes_on_leaf=nodes
    )


def replay_reference(
    c,
    H,
    head_bpt,
    state,
    ready,
    tokens,
    hash_ids,
    *,
    tp,
    decode_tp,
    prefill_workers,
    decode_workers,
    prefill_of=None,
    routing="prefix",
    contention="fair",
    mode="full_prompt",
    block_size=16,
    hash_block_tokens=16,
    capacity=None,
    latency_ms=0.0,
    per_block_ms=0.0,
    streamed=None,
):
    """Per request: dict(decode_worker, cached_tokens, charged_tokens, transfer_bytes, delay_ms, flows).

    ``streamed`` (layer-wise streaming): each request's prefill end and the share of its time alone sent after it;
    ``ready`` is then when its first layer group may go, it ends no earlier than its prefill's end plus that share
    of its time alone, and its delay counts from its prefill's end."""
    n = len(ready)
    P, D = prefill_workers, decode_workers
    prefill, decode = rc.place(c, tp, decode_tp, P, D)
    nodes = c.get("nodes") or len({rc.node_of(x, c) for w in prefill + decode for x in w})
    structure = {
        (a, b): _pair_flows(c, H, tp, decode_tp, a, b, prefill, decode, nodes) for a in range(P) for b in range(D)
    }
    hops = {key: sum(f["hops"] for f in fl) for key, fl in structure.items()}
    order = sorted(range(n), key=lambda r: (ready[r], r))
    prefill_of = prefill_of or [r % P for r in range(n)]
    caches = [OrderedDict() for _ in range(D)]
    out = [None] * n
    moving = []  # dicts: request, bytes, left, path, caps, start, end
    pending = []  # (end, seq, request)
    remaining = [0] * n
    earliest = [-math.inf] * n  # (streamed: its prefill's end plus its last group's share of its time alone)
    rr = 0
    t = -math.inf

    def depth(w, r):
        count = 0
        for block in hash_ids[r]:
            if block not in caches[w]:
                break
            count += 1
        return count

    def insert(w, r):
        if capacity == 0:
            return
        for block in hash_ids[r]:
            if block in caches[w]:
                caches[w].move_to_end(block)
                continue
            if capacity is not None and len(caches[w]) >= capacity:
                caches[w].popitem(last=False)
            caches[w][block] = None

    def state_for(f, fl):
        """Each decode rank's state rides with the flow (its first sub-flow's share 1/k) of its first head."""
        heads = rc.heads_of(f["j"], decode_tp, H)
        first_source = _source_of(heads[0], f["j"])
        return state / len([g for g in fl if g["i"] == f["i"] and g["j"] == f["j"]]) if f["i"] == first_source else 0

    def _source_of(h, j):
        holders = [i for i in range(tp) if h in rc.heads_of(i, tp, H)]
        m = sum(1 for jj in range(j) if h in rc.heads_of(jj, decode_tp, H))
        return holders[m % len(holders)]

    def flow_bytes_of(f, charged):
        per_head = f["bytes"]  # rc.flows with head_bytes 1: heads carried / k
        return per_head * charged * head_bpt + state_for(f, fl_now[0])  # (a state moves with every handoff)

    fl_now = [None]

    def rates_now():
        live = [m for m in moving if m["start"] <= t and m["end"] is None]
        return live, rc.water_fill(live) if live else {}

    def undelivered(w):
        """Bytes routed to w not yet delivered: a moving flow's bytes left, a waiting one's in full (alone,
        contention none: a flow's bytes count in full until it ends)."""
        return sum(
            m["left"]
            for m in moving
            if (m["end"] is None or m["end"] > now) and out[m["request"]]["decode_worker"] == w
        )

    def step_to(t_next):
        nonlocal t
        live, rates = rates_now()
        for m in live:
            m["left"] -= rates[id(m)] * 1e9 * (t_next - t) / 1000
        t = t_next

    def finish_due():
        live, _ = rates_now()
        for m in live:
            due = m["left"] <= 1e-9 * m["bytes"]
            if due:
                m["end"] = t
                r = m["request"]
                remaining[r] -= 1
                if remaining[r] == 0:
                    out[r]["end"] = max(t, earliest[r])
                    pending.append((out[r]["end"], out[r]["seq"], r))

    for i, r in enumerate(order + [None]):
        now = math.inf if r is None else ready[r]
        if contention == "fair":
            while True:  # the flows' events up to now, in time order
                if t == -math.inf:
                    t = min([now] + [m["start"] for m in moving])
                live, rates = rates_now()
                starts = [m["start"] for m in moving if m["start"] > t and m["end"] is None]
                ends = [t + m["left"] / (rates[id(m)] * 1e9) * 1000 for m in live]
                t_next = min(starts + ends + [math.inf])
                if t_next > now or t_next == math.inf:
                    if now != math.inf:
                        step_to(now)
                        finish_due()
                    break
                step_to(t_next)
                finish_due()
        for end, _seq, q in sorted(pending):
            if end <= now:
                insert(out[q]["decode_worker"], q)
        pending[:] = [x for x in pending if x[0] > now]
        if r is None:
            break
        a = prefill_of[r]
        depths = [depth(w, r) for w in range(D)]
        if routing == "prefix":
            best = max(depths)
            w = next((rr + j) % D for j in range(D) if depths[(rr + j) % D] == best)
        elif routing == "round_robin":
            w = rr
        elif routing == "least_loaded":  # (the last tie: the first tied worker after the one chosen last)
            w = min(range(D), key=lambda x: (undelivered(x), (x - rr) % D))
        else:
            w = min(range(D), key=lambda x: (hops[(a, x)], -depths[x], undelivered(x), (x - rr) % D))
        rr = (w + 1) % D
        tokens_r = tokens[r]
        n_blocks = -(-tokens_r // block_size)
        cached_blocks = min(depths[w] * hash_block_tokens // block_size, tokens_r // block_size)
        charged = (n_blocks - cached_blocks) * block_size if mode == "destination_missing" else tokens_r
        moved_blocks = -(-charged // block_size) if mode == "destination_missing" else n_blocks
        fl = structure[(a, w)]
        fl_now[0] = fl
        sizes = [flow_bytes_of(f, charged) for f in fl]
        out[r] = dict(
            decode_worker=w,
            cached_tokens=cached_blocks * block_size,
            charged_tokens=charged,
            transfer_bytes=sum(sizes),
            seq=i,
            start=now,
            end=now,
            flows=sum(1 for s in sizes if s > 0),
        )
        fixed = latency_ms + moved_blocks * per_block_ms + c.get("setup_ms", 0.0)
        mine = []
        for f, size in zip(fl, sizes):
            if size <= 0:
                continue
            start = now + fixed + f["latency"] + f["hops"] * c.get("hop_latency_ms", 0.0)
            mine.append(dict(request=r, bytes=size, left=size, path=f["path"], caps=f["caps"], start=start, end=None))
        alone = max(rc.simulate([dict(m) for m in mine], [m["start"] for m in mine]), default=now) - now
        earliest[r] = -math.inf if streamed is None else streamed[0][r] + alone * streamed[1][r]
        if not mine:
            out[r]["end"] = max(now, earliest[r])
            pending.append((out[r]["end"], i, r))
            continue
        if contention == "none":  # alone: its own flows only
            ends = rc.simulate(mine, [m["start"] for m in mine])
            for m, e in zip(mine, ends):
                m["end"], m["left"] = e, m["bytes"]
            out[r]["end"] = max(*ends, earliest[r])
            moving.extend(mine)
            pending.append((out[r]["end"], i, r))
            continue
        remaining[r] = len(mine)
        moving.extend(mine)
    for r in range(n):
        out[r]["delay_ms"] = out[r]["end"] - (ready[r] if streamed is None else streamed[0][r])
    return out
