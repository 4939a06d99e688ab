"""Trace replay on a :class:`perfmodel.Cluster`: every handoff's flows share every resource max-min fairly.

An exact event simulation (the documentation's "Clusters as they are", "Replaying a trace on a cluster"): requests in
ready order (ties in trace order) go to a prefill worker (round robin, or the trace's
``prefill_worker`` column) and a decode worker (``routing``); each of the handoff's flows pays its
fixed costs, then moves its bytes. Whenever flows start or end, the max-min rates
(:func:`perfmodel._maxmin.maxmin_rates`, progressive filling) are recomputed for the flows
connected to them through shared resources (transitively), and only those: max-min rates of one
connected set do not depend on any other. A flow's bytes left are carried from the last moment its
rate changed, in the operation order of :func:`perfmodel._maxmin.simulate`. Decode-side prefix
caches are today's (:mod:`perfmodel._replay`): LRU per decode worker, a request's blocks enter when
its handoff ends, prefix routing by the longest cached prefix (ties round robin).

Plain Python: a handoff has few flows and the connected sets are small. No pandas arithmetic: the
frame is built from this module's arrays by :func:`perfmodel.replay`.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from . import _maxmin
from .clusters import Cluster, Flow, HeadTerms, Resources, bottleneck_of, flow_bytes, flow_terms, handoff_flow_list
from .errors import InputError

__all__ = ["ROUTINGS", "Pair", "pairs_of", "simulate_replay"]

#: Decode routing policies on a cluster (docs: "Replaying a trace on a cluster").
ROUTINGS = ("prefix", "round_robin", "least_loaded", "topology")
_SATURATED = 1e-9  # a resource is full when its flows' rates reach its capacity within this (relative)


class Pair(NamedTuple):
    """The flows of a handoff from one prefill worker to one decode worker, resolved once."""

    flows: tuple[Flow, ...]
    vectors: tuple[tuple[float, float, float, float], ...]  # each flow's byte terms (clusters.flow_terms)
    own_ms: tuple[float, ...]  # each flow's own fixed cost: link latency, hops, transport setup
    per_message_ms: tuple[float, ...]  # each flow's link's cost per message
    per_block_ms: tuple[float, ...]
    hops: int  # summed over the flows (routing="topology")


def pairs_of(cluster: Cluster, terms: HeadTerms, tp: int, decode_tp: int, prefill_workers: int,
             decode_workers: int) -> tuple[Resources, list[list[Pair]]]:
    """Every (prefill worker, decode worker) pair's flows on one resource registry.

    >>> from perfmodel import Cluster
    >>> from perfmodel.clusters import head_terms
    >>> r, pairs = pairs_of(Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, fabric="rail"),
    ...                     head_terms("llama-3.1-70b"), 8, 2, 1, 2)
    >>> len(pairs[0][0].flows), pairs[0][0].hops, pairs[0][1].hops
    (8, 22, 22)
    """
    prefill, decode = cluster.placement(tp, decode_tp, prefill_workers, decode_workers)
    g = cluster.gpus_per_node
    nodes = cluster.nodes or len({x // g for w in (*prefill, *decode) for x in w})
    resources = Resources()
    setup = cluster.transport.setup_ms
    table = []
    for a in range(prefill_workers):
        row = []
        for b in range(decode_workers):
            flows = tuple(handoff_flow_list(cluster, terms.heads, prefill[a], decode[b], resources,
                                            nodes_on_leaf=nodes, state=terms.state > 0))
            row.append(Pair(flows, tuple(flow_terms(f, terms) for f in flows),
                            tuple(setup + f.own_latency_ms(cluster) for f in flows),
                            tuple(f.link.per_message_ms for f in flows), tuple(f.link.per_block_ms for f in flows),
                            sum(f.hops for f in flows)))
        table.append(row)
    return resources, table


class _Caches:
    """Today's decode-side prefix caches (perfmodel._replay): per worker an LRU of dense block ids
    (``capacity`` blocks; None: unbounded), and prefix lookups."""

    def __init__(self, workers: int, capacity: int | None) -> None:
        self.capacity = capacity
        self.held: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(workers)]

    def depth(self, w: int, blocks: Any) -> int:
        held, count = self.held[w], 0
        for b in blocks:
            if b not in held:
                break
            count += 1
        return count

    def insert(self, w: int, blocks: Any) -> None:
        held, capacity = self.held[w], self.capacity
        if capacity == 0:
            return
        for b in blocks:
            if b in held:
                held.move_to_end(b)
                continue
            if capacity is not None and len(held) == capacity:
                held.popitem(last=False)
            held[b] = None


class _Flows:
    """The moving flows of a replay on a cluster: rates, bytes left, ends, and resource loads."""

    def __init__(self, resources: Resources) -> None:
        self.capacities = resources.capacities
        self.users: list[dict[int, None]] = [{} for _ in resources.capacities]  # resource -> its active flows
        self.path: dict[int, tuple[int, ...]] = {}
        self.rate: dict[int, float] = {}
        self.anchor: dict[int, float] = {}
        self.left: dict[int, float] = {}
        self.version: dict[int, int] = {}
        n = len(resources.capacities)
        self.load = [0.0] * n
        self.since = [0.0] * n
        self.busy = [0.0] * n  # integral of load (GB/s x ms)
        self.peak = [0.0] * n
        self.bin_ms = math.inf  # the load's integral per resource per time bin (set by the caller)
        self.origin = 0.0
        self.binned: dict[tuple[int, int], float] = {}

    def _spread(self, r: int, load: float, t0: float, t1: float) -> None:
        """Add ``load`` over [t0, t1) to resource ``r``'s time bins."""
        if not load or self.bin_ms == math.inf:
            return
        w, o = self.bin_ms, self.origin
        k = int((t0 - o) // w)
        while t0 < t1:
            edge = min(o + (k + 1) * w, t1)
            self.binned[(r, k)] = self.binned.get((r, k), 0.0) + load * (edge - t0)
            t0, k = edge, k + 1

    def add(self, f: int, path: tuple[int, ...], nbytes: float, t: float) -> None:
        self.path[f] = path
        self.anchor[f], self.left[f], self.rate[f], self.version[f] = t, nbytes, math.nan, 0
        for r in path:
            self.users[r][f] = None

    def remove(self, f: int) -> None:
        for r in self.path.pop(f):
            del self.users[r][f]
        del self.rate[f], self.anchor[f], self.left[f], self.version[f]

    def bottleneck(self, f: int) -> int:
        """Precise rule 9 at the moment flow ``f`` ends (its final rate interval): the first saturated
        resource on its path on which no other flow moves faster; -1 if none."""
        mine = self.rate[f]
        for r in self.path[f]:
            if self.load[r] >= self.capacities[r] * (1 - _SATURATED) and all(
                    self.rate[o] <= mine * (1 + 1e-12) for o in self.users[r]):
                return r
        return -1

    def recompute(self, seeds: set[int], t: float, push: Callable[[float, int, int], None]) -> None:
        """New max-min rates at ``t`` of the flows connected to resources ``seeds``; reschedule the ends
        of those whose rate changed; account every touched resource's load."""
        seen_r, stack, comp = set(seeds), list(seeds), {}
        while stack:
            r = stack.pop()
            for f in self.users[r]:
                if f not in comp:
                    comp[f] = None
                    for s in self.path[f]:
                        if s not in seen_r:
                            seen_r.add(s)
                            stack.append(s)
        flows = sorted(comp)  # in start order: the filling's order does not depend on dict history
        rates = _maxmin.maxmin_rates([self.path[f] for f in flows], self.capacities) if flows else []
        for r in seen_r:  # the load that held since the last change (peaks: over intervals of positive length)
            if t > self.since[r]:
                self.busy[r] += self.load[r] * (t - self.since[r])
                self._spread(r, self.load[r], self.since[r], t)
                if self.load[r] > self.peak[r]:
                    self.peak[r] = self.load[r]
            self.since[r] = t
            self.load[r] = 0.0
        for f, new in zip(flows, rates):
            old = self.rate[f]
            for r in self.path[f]:
                self.load[r] += new
            if new == old:
                continue
            if old == old:  # it was moving: its bytes so far at the old rate
                self.left[f] -= old * 1e9 * (t - self.anchor[f]) / 1000.0
                self.anchor[f] = t
            self.rate[f] = new
            self.version[f] += 1
            push(self.anchor[f] + max(self.left[f], 0.0) / (new * 1e9) * 1000.0, f, self.version[f])

    def left_at(self, f: int, t: float) -> float:
        """Bytes flow ``f`` has not delivered by ``t``."""
        rate = self.rate.get(f, math.nan)
        if f not in self.rate:
            return 0.0
        if rate != rate:
            return self.left[f]
        return max(self.left[f] - rate * 1e9 * (t - self.anchor[f]) / 1000.0, 0.0)


class Outputs(NamedTuple):
    """Per-request arrays of a replay on a cluster, and per-resource figures."""

    prefill_worker: np.ndarray
    decode_worker: np.ndarray
    cached: np.ndarray
    charged: np.ndarray
    bytes: np.ndarray
    saved: np.ndarray
    alone_ms: np.ndarray
    start: np.ndarray
    end: np.ndarray
    flows: np.ndarray
    bottleneck: np.ndarray  # resource index, -1: none saturated (or no flow)
    busy: list[float]  # per resource, integral of load (GB/s x ms)
    peak: list[float]  # per resource, the largest load (GB/s)
    bin_ms: float = math.inf  # the width of the time bins of ``binned``
    origin_ms: float = 0.0  # where bin 0 starts
    binned: dict[tuple[int, int], float] | None = None  # (resource, bin) -> integral of load (GB/s x ms)


def choose(routing: str, rr: int, depths: list[int] | None, hops: list[int], load: Callable[[int], float]) -> int:
    """The decode worker of a request: ``depths`` each worker's cached prefix (blocks), ``hops`` each pair's
    summed hops, ``load(w)`` the bytes routed to ``w`` and not yet delivered, ``rr`` the round-robin turn.

    >>> choose("topology", 0, [0, 3, 3], [12, 10, 10], lambda w: [0.0, 5.0, 1.0][w])
    2
    """
    D = len(hops)
    if routing == "prefix":
        best = max(depths)
        return next((rr + j) % D for j in range(D) if depths[(rr + j) % D] == best)
    if routing == "round_robin":
        return rr
    loads = [load(x) for x in range(D)]
    if routing == "least_loaded":
        return min(range(D), key=lambda x: (loads[x], x))
    # topology: the fewest hops, then the longest cached prefix, then least loaded, then the lowest index
    return min(range(D), key=lambda x: (hops[x], -depths[x], loads[x], x))


def _alone(pair: Pair, nbytes: list[float], starts: list[float], capacities: list[float], resources: Resources,
           ) -> tuple[float, int, list[float]]:
    """(delay ms, bottleneck resource, each kept flow's end) of one handoff alone (fixed costs in ``starts``)."""
    kept = [k for k, b in enumerate(nbytes) if b > 0]
    if not kept:
        return 0.0, -1, []
    outcome = _maxmin.simulate([starts[k] for k in kept], [nbytes[k] for k in kept],
                               [pair.flows[k].path for k in kept], capacities)
    last = max(range(len(kept)), key=lambda q: (outcome.ends_ms[q], -q))
    neck = bottleneck_of([pair.flows[k] for k in kept], resources, outcome, last)
    return max(outcome.ends_ms), -1 if neck is None else neck, outcome.ends_ms


def simulate_replay(*, order: np.ndarray, ready: np.ndarray, tokens: np.ndarray, blocks: np.ndarray,
                    offsets: np.ndarray, prefill_of: np.ndarray, resources: Resources, pairs: list[list[Pair]],
                    terms: HeadTerms, charge: Callable[[int, int], tuple[int, int, float]],
                    costs: Callable[[int, int, int], tuple[float, float]], routing: str, fair: bool,
                    decode_workers: int, capacity: int | None) -> Outputs:
    """Replay requests in ``order`` on the cluster's resources (see the module's docstring).

    ``charge(r, hit_blocks)``: (cached tokens, charged tokens, cold-destination charged tokens) of
    request ``r``; ``costs(r, charged, cold)``: (messages a rank posts, blocks moved, the fixed cost in ms
    every flow pays beyond its link's: the caller's latency and its per-message and per-block costs
    with the transport's) for its charged tokens. ``prefill_of[r]``: its prefill worker. Requests' blocks are ``blocks[offsets[r]:offsets[r+1]]``.
    """
    replay = _Replay(order, ready, tokens, blocks, offsets, prefill_of, resources, pairs, terms, charge, costs,
                     routing, fair, decode_workers, capacity)
    n = len(order)
    for i in range(n + 1):
        now = float(ready[order[i]]) if i < n else math.inf
        if fair:
            replay.advance(now)
        replay.fill_caches(now)
        if i < n:
            replay.request(i, now)
    flows, out = replay.flows, replay.out
    return out._replace(busy=flows.busy, peak=flows.peak, bin_ms=flows.bin_ms, origin_ms=flows.origin,
                        binned=flows.binned)


class _Replay:
    """The state of one replay on a cluster: the flows moving, the events to come, the caches, and what is
    known of each request so far (:func:`simulate_replay` runs it)."""

    def __init__(self, order: np.ndarray, ready: np.ndarray, tokens: np.ndarray, blocks: np.ndarray,
                 offsets: np.ndarray, prefill_of: np.ndarray, resources: Resources, pairs: list[list[Pair]],
                 terms: HeadTerms, charge: Callable[[int, int], tuple[int, int, float]],
                 costs: Callable[[int, int, int], tuple[float, float]], routing: str, fair: bool,
                 decode_workers: int, capacity: int | None) -> None:
        n = len(order)
        self.order, self.ready, self.tokens, self.blocks, self.offsets = order, ready, tokens, blocks, offsets
        self.prefill_of, self.resources, self.pairs, self.terms = prefill_of, resources, pairs, terms
        self.charge, self.costs, self.routing, self.fair, self.D = charge, costs, routing, fair, decode_workers
        self.out = Outputs(prefill_of.astype(np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
                           np.zeros(n, np.int64), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n),
                           np.zeros(n, np.int64), np.full(n, -1, np.int64), [], [])
        self.caches = _Caches(decode_workers, capacity)
        self.flows = _Flows(resources)
        if n:  # 200 bins over the ready times, of 1 ms at least (later ends fill further bins)
            first, last = float(ready[order[0]]), float(ready[order[-1]])
            self.flows.origin, self.flows.bin_ms = first, max((last - first) / 200, 1.0)
        self.caps = resources.capacities
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind 0 start / 1 end, flow, version)
        self.pending: list[tuple[float, int, int]] = []  # (end, sequence, request): blocks enter its worker's cache
        self.owner: dict[int, int] = {}  # flow -> request
        self.size: dict[int, float] = {}  # flow -> bytes
        self.flow_path: dict[int, tuple[int, ...]] = {}
        self.remaining = [0] * n  # flows of a request not yet ended
        self.last_end = [(-math.inf, 0)] * n  # (end, -flow position) of its last-ending flow so far
        self.position: dict[int, int] = {}
        self.undelivered: list[dict[int, float]] = [{} for _ in range(decode_workers)]  # its flows not ended: bytes
        self.alone_ends: list[list[tuple[float, int]]] = [[] for _ in range(decode_workers)]  # none: (end, flow)
        self.seq_of = np.zeros(n, np.int64)
        self.next_flow = 0
        self.rr = 0

    def push(self, t: float, f: int, version: int) -> None:
        heapq.heappush(self.events, (t, 1, f, version))

    def handoff_ends(self, r: int, end: float, i: int) -> None:
        self.out.end[r] = end
        heapq.heappush(self.pending, (end, i, r))

    def fill_caches(self, now: float) -> None:
        """The blocks of every handoff ended by ``now`` enter its worker's cache."""
        while self.pending and self.pending[0][0] <= now:
            _, _, r = heapq.heappop(self.pending)
            self.caches.insert(int(self.out.decode_worker[r]), self.blocks[self.offsets[r]:self.offsets[r + 1]])

    def advance(self, now: float) -> None:
        """Every event up to ``now``: flows that end (their bottleneck first) and flows that start, then the
        rates of the flows connected to them."""
        events, flows, out = self.events, self.flows, self.out
        while events and events[0][0] <= now:
            t = events[0][0]
            started, ended, seeds = [], [], set()
            while events and events[0][0] == t:
                _, kind, f, version = heapq.heappop(events)
                if kind == 0:
                    started.append(f)
                elif f in flows.version and flows.version[f] == version:
                    ended.append(f)
            necks = [flows.bottleneck(f) for f in ended]  # all in the final interval, before any leaves
            for f, neck in zip(ended, necks):
                r = self.owner.pop(f)
                key = (t, -self.position[f])
                if key > self.last_end[r]:
                    self.last_end[r] = key
                    out.bottleneck[r] = neck
                seeds.update(flows.path[f])
                flows.remove(f)
                self.undelivered[out.decode_worker[r]].pop(f, None)
                self.remaining[r] -= 1
                if self.remaining[r] == 0:
                    self.handoff_ends(r, t, int(self.seq_of[r]))
            for f in started:
                flows.add(f, self.flow_path.pop(f), self.size.pop(f), t)
                seeds.update(flows.path[f])
            flows.recompute(seeds, t, self.push)

    def load_of(self, w: int, now: float) -> float:
        """The bytes routed to decode worker ``w`` and not yet delivered at ``now``."""
        if self.fair:
            return sum(self.flows.left_at(f, now) if f in self.flows.rate else b
                       for f, b in self.undelivered[w].items())
        heap = self.alone_ends[w]
        while heap and heap[0][0] <= now:
            self.undelivered[w].pop(heapq.heappop(heap)[1], None)
        return sum(self.undelivered[w].values())

    def request(self, i: int, now: float) -> None:
        """The ``i``-th request in ready order at ``now``: routed, charged, and its flows started."""
        out, r = self.out, int(self.order[i])
        a = int(self.prefill_of[r])
        mine = self.blocks[self.offsets[r]:self.offsets[r + 1]]
        depths = [self.caches.depth(w, mine) for w in range(self.D)] if self.routing in ("prefix", "topology") else None
        w = choose(self.routing, self.rr, depths, [pair.hops for pair in self.pairs[a]], lambda x: self.load_of(x, now))
        self.rr = w + 1 if w + 1 < self.D else 0
        out.decode_worker[r] = w
        hit = depths[w] if depths is not None else self.caches.depth(w, mine)
        cached, charged, cold = self.charge(r, hit)
        out.cached[r], out.charged[r] = cached, charged
        self.seq_of[r] = i
        pair = self.pairs[a][w]
        n_tokens = float(self.tokens[r])
        nbytes = [flow_bytes(v, self.terms, float(charged), n_tokens) for v in pair.vectors]
        cold_bytes = sum(flow_bytes(v, self.terms, float(cold), n_tokens) for v in pair.vectors)
        out.bytes[r] = math.fsum(nbytes)
        out.saved[r] = cold_bytes - out.bytes[r] if cold != charged else 0.0
        messages, moved_blocks, common = self.costs(r, charged, cold)
        fixed = [common + pair.own_ms[k] + messages * pair.per_message_ms[k] + moved_blocks * pair.per_block_ms[k]
                 for k in range(len(pair.flows))]
        alone, neck, ends = _alone(pair, nbytes, fixed, self.caps, self.resources)
        out.alone_ms[r] = alone
        out.start[r] = now
        kept = [k for k, b in enumerate(nbytes) if b > 0]
        out.flows[r] = len(kept)
        if not kept:
            self.handoff_ends(r, now, i)
        elif not self.fair:
            out.bottleneck[r] = neck
            for k, end in zip(kept, ends):
                self.undelivered[w][self.next_flow] = nbytes[k]
                heapq.heappush(self.alone_ends[w], (now + end, self.next_flow))
                self.next_flow += 1
            self.handoff_ends(r, now + alone, i)
        else:
            self.start_flows(r, w, pair, kept, nbytes, fixed, now)

    def start_flows(self, r: int, w: int, pair: Pair, kept: list[int], nbytes: list[float], fixed: list[float],
                    now: float) -> None:
        """Under fair sharing: the handoff's flows start moving once each has paid its fixed cost."""
        self.remaining[r] = len(kept)
        for k in kept:
            f = self.next_flow
            self.next_flow += 1
            self.owner[f], self.size[f], self.flow_path[f], self.position[f] = r, nbytes[k], pair.flows[k].path, k
            self.undelivered[w][f] = nbytes[k]
            heapq.heappush(self.events, (now + fixed[k], 0, f, 0))


def refuse_on_cluster(c: Any) -> None:
    """One clear line for each option a cluster decides (docs: "Replaying a trace on a cluster")."""
    if c.contention not in ("none", "fair"):
        raise InputError("contention", f"{c.contention!r} queues transfers for identical links, but a cluster decides "
                         "which NICs and switches each flow shares", "pass contention='fair' (flows share max-min "
                         "fairly) or 'none' (each handoff alone in the cluster)")
    if c.links != 1:
        raise InputError("links", f"{c.links} links, but a cluster decides which resources each flow crosses",
                         "drop links (set the cluster's nics_per_node instead)")
    if c.scope != "rank":
        raise InputError("scope", "a cluster decides which GPUs' bytes cross which NICs, so scope does not apply",
                         "drop scope (the cluster's flows carry each rank's bytes)")
    if c.overlap != "none":
        raise InputError("overlap", "layer-wise streaming is not modeled on a cluster",
                         "pass a link (a bandwidth or a link name) for overlap='layerwise', or drop it")
    if c.routing not in ROUTINGS:
        raise InputError("routing", f"{c.routing!r} is not a routing policy", f"pass one of {', '.join(ROUTINGS)}")
