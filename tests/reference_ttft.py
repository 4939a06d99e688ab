"""A slow, plain-Python statement of TTFT under load (SEMANTICS.md, "TTFT under load").

Independent of perfmodel: prefill queues with held KV memory, decode admission with held KV memory,
the handoff as in ``tests/reference_replay.py`` (contention none / fifo / fair, LRU prefix caches,
prefix or round-robin decode routing) and decode steps, all as one discrete-event simulation in global
time. At one instant the events go: handoff ends, dones, the fair network's own events, prefill ends,
arrivals; after each single event every queue that can move moves. Given a list as ``memory_log``, it appends
each time KV memory is taken or given back, in the order the simulation does it: ``(side, worker, request,
"take" or "give", the tokens the worker holds after it)``.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import OrderedDict, deque

INF = math.inf


def _per_request(value, n, name, default):
    if value is None:
        return [default] * n
    if isinstance(value, (int, float)):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{name}: {len(value)} values for {n} requests")
    return value


def _per_worker(value, workers, name):
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return [value] * workers
    value = list(value)
    if len(value) != workers:
        raise ValueError(f"{name}: {len(value)} values for {workers} workers")
    return value


def prefill_service(tokens, own=None, for_all=None, rate=None):
    """Each request's prefill time as SEMANTICS.md orders them: the request's own (``own``, None where it has
    none), else ``for_all`` (one value or one per request), else ``tokens / rate``, else 0 where none is given at
    all; a request without one of its own and nothing given for all is an error (never made up)."""
    n = len(tokens)
    times = []
    for r in range(n):
        mine = None if own is None else own[r]
        if mine is not None and not math.isnan(mine):  # (NaN: none of its own)
            times.append(float(mine))
        elif for_all is not None:
            times.append(float(for_all if isinstance(for_all, (int, float)) else for_all[r]))
        elif rate is not None:
            times.append(tokens[r] / rate * 1000.0)
        elif own is None:
            times.append(0.0)
        else:
            raise ValueError(f"request {r} has no prefill time of its own, and none is given for all")
    return times


def ttft_reference(
    arrival,
    tokens,
    outputs=None,
    *,
    bytes_per_token,
    bandwidth_gb_s,
    latency_ms=0.0,
    per_block_ms=0.0,
    mode="full_prompt",
    block_size=512,
    hash_ids=None,
    hash_block_tokens=512,
    decode_workers=1,
    capacity=None,
    routing="round_robin",
    contention="none",
    links=1,
    prefill_workers=1,
    service_ms=None,
    prefill_routing="round_robin",
    prefill_worker=None,
    prefill_kv_tokens=None,
    decode_kv_tokens=None,
    decode_step_ms=0.0,
    concurrency=None,
    memory_log=None,
):
    n = len(tokens)
    tokens = list(tokens)
    closed = concurrency is not None
    if not closed:
        arrival = list(arrival)
        if len(arrival) != n:
            raise ValueError("arrival and tokens differ in length")
    if outputs is None and (decode_kv_tokens is not None or closed):
        raise ValueError("num_output_tokens is needed when decode memory is bounded or the loop is closed")
    if outputs is not None:
        outputs = list(outputs)
        if len(outputs) != n:
            raise ValueError("outputs and tokens differ in length")
    if contention not in ("none", "fifo", "fair"):
        raise ValueError(f"unknown contention {contention!r}")
    if routing not in ("prefix", "round_robin"):
        raise ValueError(f"unknown routing {routing!r}")
    if prefill_routing not in ("round_robin", "least_loaded", "column"):
        raise ValueError(f"unknown prefill_routing {prefill_routing!r}")
    if closed and concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    P, D = prefill_workers, decode_workers
    service = _per_request(service_ms, n, "service_ms", 0.0)
    step = _per_request(decode_step_ms, n, "decode_step_ms", 0.0)
    hashes = [[] for _ in range(n)] if hash_ids is None else [list(h) for h in hash_ids]
    if len(hashes) != n:
        raise ValueError("hash_ids and tokens differ in length")
    if prefill_routing == "column":
        prefill_worker = list(prefill_worker)
        if len(prefill_worker) != n or any(not 0 <= p < P for p in prefill_worker):
            raise ValueError("prefill_worker column missing or out of range")
    pcap = _per_worker(prefill_kv_tokens, P, "prefill_kv_tokens")
    dcap = _per_worker(decode_kv_tokens, D, "decode_kv_tokens")
    for r in range(n):
        if pcap is not None:
            where = [prefill_worker[r]] if prefill_routing == "column" else range(P)
            if any(tokens[r] > pcap[p] for p in where):
                raise ValueError(f"request {r}: {tokens[r]} tokens can never fit in prefill memory")
        if dcap is not None and any(tokens[r] + outputs[r] > dcap[w] for w in range(D)):
            raise ValueError(f"request {r}: {tokens[r] + outputs[r]} tokens can never fit in decode memory")

    rate = bandwidth_gb_s * 1e6  # bytes per ms
    out = [
        dict(
            prefill_worker=None,
            decode_worker=None,
            link=None,
            cached_tokens=0,
            charged_tokens=0,
            transfer_bytes=0.0,
            transfer_ms=0.0,
            arrival_ms=None,
            prefill_start_ms=None,
            prefill_end_ms=None,
            admitted_ms=None,
            transfer_start_ms=None,
            transfer_end_ms=None,
            first_token_ms=None,
            done_ms=None,
        )
        for _ in range(n)
    ]
    setup_of = [0.0] * n

    def logged(side, worker, r, kind, held):
        if memory_log is not None:
            memory_log.append((side, worker, r, kind, held))

    # --- event lists -----------------------------------------------------------------------------
    arrivals = []  # heap of (time, key, r): key = request index (open loop) or issue number (closed)
    prefill_ends = []  # heap of (time, r)
    handoff_ends = []  # heap of (end, s, r)
    dones = []  # heap of (time, r)
    issued = 0
    if closed:
        for r in range(min(concurrency, n)):
            heapq.heappush(arrivals, (0.0, r, r))
        issued = min(concurrency, n)
    else:
        for r in range(n):
            heapq.heappush(arrivals, (arrival[r], r, r))

    # --- prefill state -----------------------------------------------------------------------------
    pqueue = [deque() for _ in range(P)]
    pbusy = [False] * P
    pheld = [0] * P
    pload = [0] * P  # requests queued or in prefill
    k_arrival = 0
    last_ll = -1

    # --- decode state ------------------------------------------------------------------------------
    caches = [OrderedDict() for _ in range(D)]
    dqueue = [deque() for _ in range(D)]
    dused = [0] * D
    rr = 0
    seq = 0  # handoff start sequence number

    # --- network state (as replay_reference) -------------------------------------------------------
    link_free = [-INF] * links
    active = [[] for _ in range(links)]  # fair: [remaining bytes, s, r]
    waiting = []  # fair: (data start time, s, r)
    clock = [0.0]

    def cached_prefix(r, w):
        count = 0
        for block in hashes[r]:
            if block not in caches[w]:
                break
            count += 1
        return count

    def insert(r):
        cache = caches[out[r]["decode_worker"]]
        for block in hashes[r]:
            if block in cache:
                cache.move_to_end(block)
            else:
                cache[block] = True
                if capacity is not None and len(cache) > capacity:
                    cache.popitem(last=False)

    def net_next():
        finish = INF
        for k in range(links):
            if active[k]:
                smallest = min(active[k], key=lambda a: (a[0], a[1]))
                # (a flow left a rounding residue below 0 ends now: time never runs back by an ulp)
                t = clock[0] + max(smallest[0], 0.0) * len(active[k]) / rate
                finish = min(finish, t)
        start = waiting[0][0] if waiting else INF
        return min(start, finish)

    def advance(now):
        while True:
            finish, finish_link = INF, -1
            for k in range(links):
                if active[k]:
                    smallest = min(active[k], key=lambda a: (a[0], a[1]))
                    t = clock[0] + max(smallest[0], 0.0) * len(active[k]) / rate
                    if t < finish:
                        finish, finish_link = t, k
            start = waiting[0][0] if waiting else INF
            t = min(start, finish)
            if t > now or t == INF:
                return
            for k in range(links):
                for a in active[k]:
                    a[0] -= (t - clock[0]) * rate / len(active[k])
            clock[0] = t
            if start < finish:  # (a transfer finishing at that instant first: its link is free)
                _, s, r = waiting.pop(0)
                k = min(range(links), key=lambda j: (len(active[j]), j))
                active[k].append([out[r]["transfer_bytes"], s, r])
                out[r]["link"] = k
            else:
                done = min(active[finish_link], key=lambda a: (a[0], a[1]))
                active[finish_link].remove(done)
                r = done[2]
                end = max(t, out[r]["admitted_ms"] + out[r]["transfer_ms"])
                out[r]["transfer_end_ms"] = end
                heapq.heappush(handoff_ends, (end, done[1], r))

    def route(r, now):
        """At r's prefill end: the decode worker (as the replay); r joins its admission queue."""
        nonlocal rr
        if routing == "prefix":
            candidates = [(rr + j) % D for j in range(D)]
            w = max(candidates, key=lambda c: (cached_prefix(r, c), -candidates.index(c)))
        else:
            w = rr % D
        rr = (w + 1) % D
        out[r]["decode_worker"] = w
        dqueue[w].append(r)

    def charge(r):
        """At r's admission (its handoff's start): the cached prefix its worker holds then, bytes and time alone."""
        o = out[r]
        w = o["decode_worker"]
        n_blocks = -(-tokens[r] // block_size)
        cached_blocks = min(cached_prefix(r, w) * hash_block_tokens // block_size, tokens[r] // block_size)
        o["cached_tokens"] = cached_blocks * block_size
        charged = (n_blocks - cached_blocks) * block_size if mode == "destination_missing" else tokens[r]
        o["charged_tokens"] = charged
        nbytes = float(charged) * bytes_per_token
        o["transfer_bytes"] = nbytes
        moved = (n_blocks - cached_blocks) if mode == "destination_missing" else n_blocks
        setup = latency_ms + moved * per_block_ms
        setup_of[r] = setup
        o["transfer_ms"] = nbytes / (bandwidth_gb_s * 1e9) * 1000.0 + (setup if nbytes > 0 else 0.0)

    def start_handoff(r, now):
        nonlocal seq
        s = seq
        seq += 1
        charge(r)
        o = out[r]
        o["admitted_ms"] = now
        o["transfer_start_ms"] = now
        alone, nbytes = o["transfer_ms"], o["transfer_bytes"]
        if nbytes > 0 and contention == "fifo":
            k = min(range(links), key=lambda j: (link_free[j], j))
            start = max(now, link_free[k])
            link_free[k] = start + alone
            o.update(link=k, transfer_start_ms=start, transfer_end_ms=start + alone)
            heapq.heappush(handoff_ends, (start + alone, s, r))
        elif nbytes > 0 and contention == "fair":
            bisect.insort(waiting, (now + setup_of[r], s, r))
        else:
            o["transfer_end_ms"] = now + alone
            heapq.heappush(handoff_ends, (now + alone, s, r))

    def move_queues(now):
        moved = True
        while moved:
            moved = False
            for p in range(P):
                if pqueue[p] and not pbusy[p]:
                    r = pqueue[p][0]
                    if pcap is None or pheld[p] + tokens[r] <= pcap[p]:
                        pqueue[p].popleft()
                        pbusy[p] = True
                        pheld[p] += tokens[r]
                        logged("prefill", p, r, "take", pheld[p])
                        out[r]["prefill_start_ms"] = now
                        out[r]["prefill_end_ms"] = now + service[r]
                        heapq.heappush(prefill_ends, (now + service[r], r))
                        moved = True
            for w in range(D):
                while dqueue[w]:
                    r = dqueue[w][0]
                    need = tokens[r] + (outputs[r] if outputs is not None else 0)
                    if dcap is not None and dused[w] + need > dcap[w]:
                        break
                    dqueue[w].popleft()
                    dused[w] += need
                    logged("decode", w, r, "take", dused[w])
                    start_handoff(r, now)
                    moved = True

    # --- the loop ----------------------------------------------------------------------------------
    while True:
        times = [
            handoff_ends[0][0] if handoff_ends else INF,
            dones[0][0] if dones else INF,
            net_next() if contention == "fair" else INF,
            prefill_ends[0][0] if prefill_ends else INF,
            arrivals[0][0] if arrivals else INF,
        ]
        t = min(times)
        if t == INF:
            break
        kind = next(i for i in range(5) if times[i] <= t)
        if kind == 0:  # handoff end
            end, _, r = heapq.heappop(handoff_ends)
            insert(r)
            p = out[r]["prefill_worker"]
            pheld[p] -= tokens[r]
            logged("prefill", p, r, "give", pheld[p])
            out[r]["first_token_ms"] = end + step[r]
            out[r]["done_ms"] = (
                end + max(outputs[r] if outputs is not None else 1, 1) * step[r]
            )  # (its first token at least)
            heapq.heappush(dones, (out[r]["done_ms"], r))
        elif kind == 1:  # done
            _, r = heapq.heappop(dones)
            if outputs is not None:
                dused[out[r]["decode_worker"]] -= tokens[r] + outputs[r]
                logged("decode", out[r]["decode_worker"], r, "give", dused[out[r]["decode_worker"]])
            if closed and issued < n:
                heapq.heappush(arrivals, (t, issued, issued))
                issued += 1
        elif kind == 2:  # fair network events
            advance(t)
        elif kind == 3:  # prefill end
            _, r = heapq.heappop(prefill_ends)
            p = out[r]["prefill_worker"]
            pbusy[p] = False
            pload[p] -= 1
            route(r, t)
        else:  # arrival
            _, _, r = heapq.heappop(arrivals)
            out[r]["arrival_ms"] = t if closed else arrival[r]
            if prefill_routing == "round_robin":
                p = k_arrival % P
            elif prefill_routing == "column":
                p = prefill_worker[r]
            else:
                first = (last_ll + 1) % P
                cyclic = [(first + j) % P for j in range(P)]
                fewest = min(pload)
                p = next(c for c in cyclic if pload[c] == fewest)
                last_ll = p
            k_arrival += 1
            out[r]["prefill_worker"] = p
            pload[p] += 1
            pqueue[p].append(r)
        move_queues(t)

    for r in range(n):
        o = out[r]
        if o["first_token_ms"] is None:
            raise RuntimeError(f"request {r} never finished (a simulation bug)")
        o["queue_ms"] = o["prefill_start_ms"] - o["arrival_ms"]
        o["prefill_ms"] = o["prefill_end_ms"] - o["prefill_start_ms"]
        o["admission_wait_ms"] = o["admitted_ms"] - o["prefill_end_ms"]
        if contention == "fifo":
            o["link_wait_ms"] = o["transfer_start_ms"] - o["admitted_ms"]
        elif contention == "fair":
            o["link_wait_ms"] = max(o["transfer_end_ms"] - o["admitted_ms"] - o["transfer_ms"], 0.0)
        else:
            o["link_wait_ms"] = 0.0
        o["handoff_delay_ms"] = o["admission_wait_ms"] + o["link_wait_ms"] + o["transfer_ms"]
        o["ttft_ms"] = o["queue_ms"] + o["prefill_ms"] + o["handoff_delay_ms"] + step[r]
    return out


# --- self-checks ---------------------------------------------------------------------------------------

_EXAMPLE = dict(bytes_per_token=1e6, bandwidth_gb_s=1.0, decode_step_ms=10.0)


def worked_examples():
    """The worked examples of SEMANTICS.md; returns their TTFTs (asserting them on the way)."""

    def close(a, b):
        return abs(a - b) <= 1e-9 * max(1.0, abs(b))

    results = {}
    tok = [500, 600]
    svc = [t / 10_000 * 1000 for t in tok]
    out = ttft_reference(
        [0.0, 0.0], tok, [1, 1], service_ms=svc, prefill_kv_tokens=1000, contention="fifo", links=1, **_EXAMPLE
    )
    results["prefill_memory"] = [o["ttft_ms"] for o in out]
    assert all(map(close, results["prefill_memory"], [560, 1220])), results
    assert close(out[1]["queue_ms"], 550) and close(out[1]["prefill_ms"], 60)
    assert close(out[1]["handoff_delay_ms"], 600)
    out = ttft_reference([0.0, 0.0], tok, [1, 1], service_ms=svc, contention="fifo", links=1, **_EXAMPLE)
    results["unbounded"] = [o["ttft_ms"] for o in out]
    assert all(map(close, results["unbounded"], [560, 1160])), results
    assert close(out[1]["queue_ms"], 50) and close(out[1]["handoff_delay_ms"], 1040)

    tok = [500, 300]
    svc = [t / 10_000 * 1000 for t in tok]
    out = ttft_reference(
        [0.0, 0.0], tok, [100, 200], service_ms=svc, decode_kv_tokens=1000, contention="none", **_EXAMPLE
    )
    results["decode_memory"] = [o["ttft_ms"] for o in out]
    assert all(map(close, results["decode_memory"], [560, 1860])), results
    assert close(out[0]["done_ms"], 1550) and close(out[1]["prefill_end_ms"], 80)
    assert close(out[1]["admission_wait_ms"], 1470) and close(out[1]["handoff_delay_ms"], 1770)

    out = ttft_reference(
        None,
        [100] * 4,
        [3] * 4,
        bytes_per_token=1e6,
        bandwidth_gb_s=1.0,
        decode_step_ms=5.0,
        service_ms=[10.0] * 4,
        prefill_workers=2,
        decode_workers=2,
        concurrency=2,
    )
    results["closed_loop"] = [o["ttft_ms"] for o in out]
    assert all(close(x, 115) for x in results["closed_loop"]), results
    assert [o["arrival_ms"] for o in out] == [0.0, 0.0, 125.0, 125.0], out
    assert [o["done_ms"] for o in out] == [125.0, 125.0, 250.0, 250.0], out
    return results


def _random_trace(rng, n):
    arrival = sorted(float(rng.randrange(0, 40)) for _ in range(n))
    rng.shuffle(arrival)  # not in order, with ties
    tokens = [rng.choice([0, 1, 100, 511, 512, 513, 1024, 1500, 2048, 3000]) for _ in range(n)]
    prefixes = [[rng.randrange(1000) for _ in range(6)] for _ in range(3)]
    hash_ids = []
    for r in range(n):
        blocks = -(-tokens[r] // 512)
        base = rng.choice(prefixes)
        share = rng.randrange(0, blocks + 1)
        hash_ids.append(base[:share] + [10_000 + r * 10 + j for j in range(blocks - share)][: max(0, blocks - share)])
    return arrival, tokens, hash_ids


def check_degenerate(trials=60, seed=1):
    """No prefill service, unbounded memory, step 0: equal to replay_reference (ready = arrival); and with
    service times, equal to replay_reference given ready = prefill end."""
    import random

    try:
        from tests.reference_replay import replay_reference
    except ImportError:
        import importlib.util
        import os

        spec = importlib.util.spec_from_file_location(
            "reference_replay", os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_replay.py")
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        replay_reference = module.replay_reference

    rng = random.Random(seed)
    checked = 0
    for trial in range(trials):
        n = rng.randrange(1, 30)
        arrival, tokens, hash_ids = _random_trace(rng, n)
        for contention in ("none", "fifo", "fair"):
            kw = dict(
                bytes_per_token=rng.choice([1e5, 3.3e5, 1e6]),
                bandwidth_gb_s=rng.choice([1.0, 12.5, 50.0]),
                latency_ms=rng.choice([0.0, 0.0, 0.7]),
                per_block_ms=rng.choice([0.0, 0.05]),
                mode=rng.choice(["full_prompt", "destination_missing"]),
                block_size=rng.choice([256, 512]),
                hash_block_tokens=512,
                capacity=rng.choice([None, 3, 8]),
                routing=rng.choice(["prefix", "round_robin"]),
                contention=contention,
                links=rng.choice([1, 2, 3]),
            )
            workers = rng.choice([1, 2, 3])
            use_hashes = rng.random() < 0.8
            hashes = hash_ids if use_hashes else None
            ref = replay_reference(
                arrival, tokens, hashes if use_hashes else [[] for _ in range(n)], workers=workers, **kw
            )
            got = ttft_reference(arrival, tokens, hash_ids=hashes, decode_workers=workers, **kw)
            _compare(ref, got, arrival, f"trial {trial} {contention}")
            # with service times (one prefill worker per request: no queueing), ready = prefill end
            service = [rng.choice([1.5, 7.0, 20.0]) for _ in range(n)]
            got = ttft_reference(
                arrival,
                tokens,
                hash_ids=hashes,
                decode_workers=workers,
                service_ms=service,
                prefill_workers=n,
                prefill_routing="column",
                prefill_worker=list(range(n)),
                **kw,
            )
            ready = [arrival[r] + service[r] for r in range(n)]
            assert all(got[r]["prefill_end_ms"] == ready[r] for r in range(n))
            ref = replay_reference(
                ready, tokens, hashes if use_hashes else [[] for _ in range(n)], workers=workers, **kw
            )
            _compare(ref, got, ready, f"trial {trial} {contention} with service")
            checked += 2
    return checked


def _compare(ref, got, ready, label):
    for r, (a, b) in enumerate(zip(ref, got)):
        for key in ("decode_worker", "link", "cached_tokens", "charged_tokens", "transfer_bytes", "transfer_ms"):
            assert a[key] == b[key], (label, r, key, a[key], b[key])
        x, y = a["handoff_delay_ms"], b["handoff_delay_ms"]
        assert abs(x - y) <= 1e-12 * max(abs(x), abs(y), 1.0), (label, r, x, y)
        assert abs(a["end_ms"] - b["transfer_end_ms"]) <= 1e-12 * max(abs(a["end_ms"]), 1.0), (label, r)
        assert b["ttft_ms"] == b["queue_ms"] + b["prefill_ms"] + b["handoff_delay_ms"]


if __name__ == "__main__":
    print(worked_examples())
    print("degenerate cases equal to replay_reference:", check_degenerate())
