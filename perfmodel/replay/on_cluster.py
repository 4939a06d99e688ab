"""Trace replay on a :class:`perfmodel.Cluster`: every handoff's flows share every resource max-min fairly.

An exact event simulation (the documentation's "Clusters as they are", "Replaying a trace on a cluster"): requests in
ready order (ties in trace order) go to a prefill worker (round robin, or the trace's
``prefill_worker`` column) and a decode worker (``routing``); each of the handoff's flows pays its
fixed costs, then moves its bytes. Whenever flows start or end, the max-min rates (progressive
filling) are recomputed for the flows connected to them through shared resources (transitively), and
only those: max-min rates of one connected set do not depend on any other. Decode-side prefix caches
are today's (:mod:`perfmodel.kernels.replay`): LRU per decode worker, a request's blocks enter when its
handoff ends, prefix routing by the longest cached prefix (ties round robin).

This module resolves the cluster once into arrays (every pair of workers' flows, paths and fixed
costs); the event loop is the numba kernel :func:`perfmodel.kernels.serving.serve_pass` on the cluster's operations. No pandas
arithmetic: the frame is built from the kernel's arrays by :mod:`perfmodel.replay.cluster`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..inputs.codes import Contention, choice_code, choice_names
from ..inputs.words import count
from ..kernels import cluster as kernel
from ..network.clusters import (
    Cluster,
    Flow,
    HeadTerms,
    Resources,
    flow_terms,
    handoff_flow_list,
    refuse_what_it_decides,
)
from ..options import deprecated_constant, option

__all__ = ["ROUTINGS", "Pair", "Replayed", "pairs_of", "structure_of"]

#: The most (prefill worker, decode worker) pairs a replay on a cluster resolves the flows of (each in Python,
#: before the replay): 2**18, a thousand workers by 256, or 512 of each.
#: The most flows those pairs hold together: the option ``max_pair_flows`` (perfmodel.set_options).
# (the old constant, MAX_PAIR_FLOWS, reads the option with a warning)
__getattr__ = deprecated_constant("perfmodel.replay.on_cluster", {"MAX_PAIR_FLOWS": "max_pair_flows"})

#: Decode routing policies on a cluster (docs: "Replaying a trace on a cluster").
ROUTINGS = choice_names("routing")


class Pair(NamedTuple):
    """The flows of a handoff from one prefill worker to one decode worker, resolved once."""

    flows: tuple[Flow, ...]
    vectors: tuple[tuple[float, float, float, float], ...]  # each flow's byte terms (clusters.flow_terms)
    latency_ms: tuple[float, ...]  # each flow's fixed costs (Flow.fixed_terms): the caller's, transport's and its own
    per_message_ms: tuple[float, ...]
    per_block_ms: tuple[float, ...]
    hops: int  # summed over the flows (routing="topology")


def _workers(prefill_workers: int, decode_workers: int) -> tuple[str, str]:
    """(the worker counts above one, as their parameters' names; the pairs they make, in words).

    >>> _workers(1, 300_000)
    ('decode_workers', '1 prefill and 300,000 decode workers make 300,000 pairs')
    >>> _workers(1, 1)[1]
    '1 prefill and 1 decode worker make 1 pair'
    """
    names = [name for name, k in (("prefill_workers", prefill_workers), ("decode_workers", decode_workers)) if k > 1]
    decode = count(decode_workers, "decode worker")
    return " and ".join(
        names
    ), f"{prefill_workers:,} prefill and {decode} make {count(prefill_workers * decode_workers, 'pair')}"


def pairs_of(
    cluster: Cluster,
    terms: HeadTerms,
    tp: int,
    decode_tp: int,
    prefill_workers: int,
    decode_workers: int,
    costs: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> tuple[Resources, list[list[Pair]]]:
    """Every (prefill worker, decode worker) pair's flows on one resource registry, each with its fixed costs
    (:meth:`perfmodel.network.paths.Flow.fixed_terms`) over the caller's ``costs``: latency, cost per message and
    per block (ms).

    >>> from perfmodel import Cluster
    >>> from perfmodel.network.clusters import head_terms
    >>> r, pairs = pairs_of(Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, fabric="rail"),
    ...                     head_terms("llama-3.1-70b"), 8, 2, 1, 2)
    >>> len(pairs[0][0].flows), pairs[0][0].hops, pairs[0][1].hops
    (8, 22, 22)
    """
    prefill, decode = cluster.placement(tp, decode_tp, prefill_workers, decode_workers)
    most = option("max_worker_pairs")
    workers, pairs = _workers(prefill_workers, decode_workers)
    if prefill_workers * decode_workers > most:  # (resolved one by one, in Python: refused before the first)
        raise InputError(
            workers or "prefill_workers",
            f"{pairs}, each with flows of its own, more than the {most:,} a replay on a cluster resolves",
            "pass fewer workers (a replay of a few hundred "
            "of each shows how they share the cluster), or raise perfmodel.set_options(max_worker_pairs=)",
        )
    g = cluster.gpus_per_node
    nodes = cluster.nodes or len({x // g for w in (*prefill, *decode) for x in w})
    first = handoff_flow_list(cluster, terms.heads, prefill[0], decode[0], Resources(), nodes_on_leaf=nodes)
    each = len({(f.src_rank, f.dst_rank) for f in first}) * max(1, cluster.nics_per_node // g)  # (NIC sub-flows)
    most = option("max_pair_flows")
    if each * prefill_workers * decode_workers > most:  # (every pair has as many rank pairs as the first)
        raise InputError(
            workers or "tp",
            f"{pairs} of up to {count(each, 'flow')} each, more than the {most:,} flows a replay on a cluster resolves",
            ("pass fewer workers, or " if workers else "pass ")
            + "a smaller tp/decode_tp or fewer NICs per GPU, or raise perfmodel.set_options(max_pair_flows=)",
        )
    resources = Resources()
    table = []
    for a in range(prefill_workers):
        row = []
        for b in range(decode_workers):
            flows = tuple(
                handoff_flow_list(
                    cluster, terms.heads, prefill[a], decode[b], resources, nodes_on_leaf=nodes, state=terms.state > 0
                )
            )
            fixed = [f.fixed_terms(cluster, *costs) for f in flows]
            row.append(
                Pair(
                    flows,
                    tuple(flow_terms(f, terms) for f in flows),
                    tuple(x[0] for x in fixed),
                    tuple(x[1] for x in fixed),
                    tuple(x[2] for x in fixed),
                    sum(f.hops for f in flows),
                )
            )
        table.append(row)
    return resources, table


def _components(paths: list[tuple[int, ...]], n: int) -> list[int]:
    """The connected component (its lowest resource) of each path over ``n`` resources: paths sharing a
    resource are connected, transitively."""
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for path in paths:
        for r in path[1:]:
            a, b = root(path[0]), root(r)
            parent[max(a, b)] = min(a, b)
    return [root(path[0]) for path in paths]


def _mirrors(keys: list, flows: list[list[tuple]], capacities: list[float]) -> tuple[dict, dict]:
    """Components of the cluster that are copies of one another: the same flows of every pair (bytes per
    token and fixed costs) on classes and resources of the same capacities, in the same order. Returns
    (each copied component's first copy, with each of its classes and resources in order of first use)."""
    component = _components([path for path, _ in keys], len(capacities))
    used: dict[int, tuple[dict, dict, list]] = {}  # component -> (class order, resource order, flows per pair)
    for q, pair in enumerate(flows):
        for k, (c, vector, cost) in enumerate(pair):
            if component[c] not in used:  # (a default built at every call cost a list per pair each time)
                used[component[c]] = ({}, {}, [[] for _ in flows])
            classes, resources, rows = used[component[c]]
            if c not in classes:
                classes[c] = len(classes)
                for r in keys[c][0]:
                    resources.setdefault(r, len(resources))
            rows[q].append((vector, cost, classes[c], k))
    first: dict[tuple, int] = {}
    copies: dict[int, int] = {}
    for x, (classes, resources, rows) in used.items():
        signature = (
            tuple(tuple(row[:3] for row in pair) for pair in rows),
            tuple((tuple(resources[r] for r in keys[c][0]), keys[c][1]) for c in classes),
            tuple(capacities[r] for r in resources),
        )
        copies[x] = first.setdefault(signature, x)
    return copies, used


def _copy_views(copies: dict, used: dict, flows: list[list[tuple]], R: int) -> tuple:
    """(each resource's copy in its component's first copy; per copy, the first copy's resources -> its own;
    per pair's flow, the lowest position among its copies and that copy's view)."""
    mirror, views = np.arange(R), [np.arange(R)]
    position = [list(range(len(pair))) for pair in flows]
    view = [[0] * len(pair) for pair in flows]
    for x, (_, order, rows) in used.items():
        if copies[x] == x:
            continue
        _, origin, origin_rows = used[copies[x]]
        back = {i: r for r, i in origin.items()}
        views.append(np.arange(R))
        for r, i in order.items():
            mirror[r] = back[i]
            views[-1][back[i]] = r
        for q, (mine, theirs) in enumerate(zip(rows, origin_rows)):
            for (*_, k), (*_, k0) in zip(mine, theirs):
                if k < position[q][k0]:
                    position[q][k0], view[q][k0] = k, len(views) - 1
    return mirror, views, position, view


def structure_of(resources: Resources, pairs: list[list[Pair]]) -> kernel.Structure:
    """The kernel's arrays of a cluster's pairs of workers: flows of one path to one decode worker form a
    class (they always get the same max-min rate); each resource lists the classes crossing it. Components
    of the cluster that are copies of one another (every pair's flows the same in each: the rails of a
    rail-optimised handoff) move alike, so only the first copy is simulated, each of its classes counting for
    all its copies; a flow of another copy has no class (-1), and names the copy of the lowest position.

    >>> from perfmodel import Cluster
    >>> from perfmodel.network.clusters import head_terms
    >>> r, pairs = pairs_of(Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8), head_terms("llama-3.1-70b"),
    ...                     8, 8, 1, 2)
    >>> s = structure_of(r, pairs)  # 2 flows share each NIC; the 4 NICs of a node are copies
    >>> len(s.flow_class), len(s.class_worker), s.flow_class[:4].tolist(), s.class_copies.tolist()
    (16, 2, [0, 0, -1, -1], [4.0, 4.0])
    """
    classes: dict[tuple[tuple[int, ...], int], int] = {}
    flows = [
        [
            (
                classes.setdefault((f.path, b), len(classes)),
                pair.vectors[k],
                (pair.latency_ms[k], pair.per_message_ms[k], pair.per_block_ms[k]),
            )
            for k, f in enumerate(pair.flows)
        ]
        for row in pairs
        for b, pair in enumerate(row)
    ]
    keys = list(classes)
    R = len(resources.capacities)
    copies, used = _mirrors(keys, flows, resources.capacities)
    component = {c: x for x, (order, _, _) in used.items() for c in order}
    simulated = {c: i for i, c in enumerate(c for c in range(len(keys)) if copies[component[c]] == component[c])}
    mirror, views, position, view = _copy_views(copies, used, flows, R)
    n_copies = {x: sum(1 for y in copies.values() if y == x) for x in copies}
    on: list[list[int]] = [[] for _ in range(R)]
    workers: list[list[int]] = [[] for _ in range(len(pairs[0]) if pairs else 0)]
    for c, i in simulated.items():
        for r in keys[c][0]:
            on[r].append(i)
        workers[keys[c][1]].append(i)
    ints: dict[str, Any] = dict(dtype=np.int64)
    floats: dict[str, Any] = dict(dtype=np.float64)
    flat = [
        (simulated.get(c, -1), vector, cost, position[q][k], view[q][k])
        for q, pair in enumerate(flows)
        for k, (c, vector, cost) in enumerate(pair)
    ]
    return kernel.Structure(
        np.array(resources.capacities, **floats),
        *_csr([keys[c][0] for c in simulated]),
        np.array([keys[c][1] for c in simulated], **ints),
        np.array([n_copies[component[c]] for c in simulated], **floats),
        *_csr(on),
        *_csr(workers),
        np.cumsum([0] + [len(pair) for pair in flows]).astype(np.int64),
        np.array([f[0] for f in flat], **ints),
        np.array([f[1] for f in flat], **floats).reshape(-1, 4),
        np.array([f[2] for f in flat], **floats).reshape(-1, 3),
        np.array([f[3] for f in flat], **ints),
        np.array([f[4] for f in flat], **ints),
        np.array([pair.hops for row in pairs for pair in row], **ints),
        np.array(views, **ints).reshape(-1, R),
        mirror.astype(np.int64),
        *_simulated_components(used, copies, simulated, R),
    )


def _simulated_components(used: dict, copies: dict, simulated: dict, R: int) -> tuple:
    """Each resource's simulated component (-1: none), and each component's resources and classes."""
    firsts = [x for x in used if copies[x] == x]
    of = np.full(R, -1, np.int64)
    for k, x in enumerate(firsts):
        of[list(used[x][1])] = k
    return (of, *_csr([list(used[x][1]) for x in firsts]), *_csr([[simulated[c] for c in used[x][0]] for x in firsts]))


def _csr(lists: list) -> tuple[np.ndarray, np.ndarray]:
    """Lists as (offsets, values): list ``i`` is ``values[offsets[i]:offsets[i + 1]]``."""
    offsets = np.zeros(len(lists) + 1, np.int64)
    offsets[1:] = np.cumsum([len(x) for x in lists])
    return offsets, np.array([v for x in lists for v in x], dtype=np.int64)


class Replayed(NamedTuple):
    """Per-request arrays of a replay on a cluster (:class:`perfmodel.kernels.cluster.Outputs`), and
    per-resource figures."""

    out: np.recarray  # kernel.OUTPUTS, one row per request
    prefill_worker: np.ndarray
    busy: np.ndarray  # per resource, integral of load (GB/s x ms)
    peak: np.ndarray  # per resource, the largest load (GB/s)
    bins: np.ndarray  # (resource, bin): integral of load (GB/s x ms); only where ``touched``
    touched: np.ndarray  # per resource: a bin was written
    bin_ms: float = math.inf  # the width of the time bins
    origin_ms: float = 0.0  # where bin 0 starts


def kernel_inputs(
    *,
    ready_sorted: np.ndarray,
    n_unique: int,
    resources: Resources,
    pairs: list[list[Pair]],
    terms: HeadTerms,
    config: dict,
) -> tuple[kernel.Structure, kernel.Config]:
    """The kernel's structure and configuration of a replay on a cluster (:class:`perfmodel.replay.cluster.ClusterHandoffs` makes its network); time bins
    over ``ready_sorted`` (the ready times in order; empty: none)."""
    origin, width = 0.0, math.inf
    if len(ready_sorted) and config["fair"]:  # 200 bins over the ready times, of 1 ms at least (later ends fill more)
        first, last = float(ready_sorted[0]), float(ready_sorted[-1])
        origin, width = first, max((last - first) / 200, 1.0)
    capacity = config["capacity"]
    cfg = kernel.Config(
        **{
            **config,
            "routing": choice_code("routing", config["routing"]),
            "capacity": -1 if capacity is None else capacity,
        },
        workers=len(pairs[0]),
        n_unique=n_unique,
        window_tokens=float(terms.window_tokens),
        chunk_tokens=float(terms.chunk_tokens),
        origin_ms=origin,
        bin_ms=width,
    )
    return structure_of(resources, pairs), cfg


def replayed(
    out: np.recarray, prefill_of: np.ndarray, st: kernel.Structure, cfg: kernel.Config, loads: tuple
) -> Replayed:
    """The result of a replay on a cluster from the kernel's outputs and its resources' loads (busy, peak, bins,
    touched): a copied component's resources carry what their first copy's do."""
    busy, peak, bins, touched = loads
    mirror = st.mirror
    return Replayed(
        out,
        prefill_of.astype(np.int64),
        busy[mirror],
        peak[mirror],
        bins[mirror],
        touched[mirror],
        cfg.bin_ms,
        cfg.origin_ms,
    )


def refuse_on_cluster(c: Any) -> None:
    """One clear line for each option a cluster decides (docs: "Replaying a trace on a cluster"); the options
    themselves are checked at the replays' edge (:func:`perfmodel.replay.edge.handoffs_on`)."""
    if choice_code("contention", c.contention) == Contention.FIFO:
        raise InputError(
            "contention",
            f"{c.contention!r} queues transfers for identical links, but a cluster decides "
            "which NICs and switches each flow shares",
            "pass contention='fair' (flows share max-min fairly) or 'none' (each handoff alone in the cluster)",
        )
    if c.links != 1:
        raise InputError(
            "links",
            f"{c.links} links, but a cluster decides which resources each flow crosses",
            "drop links (set the cluster's nics_per_node instead)",
        )
    refuse_what_it_decides(c)
