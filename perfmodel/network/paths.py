"""A handoff's flows on a cluster: which KV heads each rank holds (:func:`split_heads`), which prefill rank sends
which decode rank what (:func:`handoff_flow_list`), and what each (sub-)flow crosses: its NICs, its node's PCIe
switches and host bridge, the fabric's leaves, or NVLink ports, as indices into a :class:`Resources` registry.
Which NIC a GPU uses is the cluster's (:meth:`perfmodel.Cluster.nics_of`); a ``cluster`` here is a
:class:`perfmodel.Cluster` (whose module builds on this one)."""

from __future__ import annotations

from typing import Any, NamedTuple, cast

from ..errors import InputError
from .links import Link

__all__ = ["Flow", "Resources", "handoff_flow_list", "split_heads"]


def split_heads(t: int, heads: int, side: str = "tensor-parallel group") -> tuple[tuple[int, ...], ...]:
    """The KV heads each of ``t`` ranks holds (precise rule 1): contiguous ranges when ``t`` divides
    ``heads``, one replicated head (rank ``i``: ``floor(i * heads / t)``) when ``heads`` divides ``t``.

    Parameters
    ----------
    t
        The tensor-parallel degree (ranks).
    heads
        The model's KV heads (:func:`perfmodel.kv_heads`).
    side
        Which group the ranks are, for the error when neither divides the other.

    Returns
    -------
    tuple of tuple of int
        Per rank, the indices of the heads it holds.

    Examples
    --------
    >>> split_heads(4, 8), split_heads(4, 2)
    (((0, 1), (2, 3), (4, 5), (6, 7)), ((0,), (0,), (1,), (1,)))
    """
    if heads % t == 0:
        per = heads // t
        return tuple(tuple(range(i * per, i * per + per)) for i in range(t))
    if t % heads == 0:
        return tuple((i * heads // t,) for i in range(t))
    raise InputError(
        side,
        f"{t} ranks cannot split the model's {heads} KV heads on a cluster (neither divides the other)",
        f"pass a tensor-parallel degree that divides {heads} or is a multiple of it",
    )


class Resources:
    """A registry of resources (NIC ports, PCIe switches, leaf uplinks, NVLink ports): each one's name,
    kind and capacity (GB/s) by index, so that flows' paths are tuples of indices."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.capacities: list[float] = []
        self._index: dict[str, int] = {}

    def index(self, name: str, kind: str, capacity_gb_s: float) -> int:
        """The index of resource ``name`` (registered on first use)."""
        found = self._index.get(name)
        if found is None:
            found = self._index[name] = len(self.names)
            self.names.append(name)
            self.kinds.append(kind)
            self.capacities.append(capacity_gb_s)
        return found


class Flow(NamedTuple):
    """One (sub-)flow of a handoff: prefill rank ``src_rank`` on global GPU ``src_gpu`` sends decode rank
    ``dst_rank`` on ``dst_gpu`` the KV heads ``heads`` (and, with ``state``, its decode rank's share of
    the model's state), ``fraction`` of them (``1/k`` over ``k`` NICs: sub-flow ``sub``), over ``path``
    (resource indices) with ``hops`` fabric switches; ``link`` is the NIC or NVLink Link it pays."""

    src_rank: int
    dst_rank: int
    sub: int
    src_gpu: int
    dst_gpu: int
    heads: tuple[int, ...]
    state: bool
    fraction: float
    path: tuple[int, ...]
    hops: int
    link: Link
    nvlink: bool

    def own_latency_ms(self, cluster: Any) -> float:
        """The fixed cost this flow pays beyond the transport's and the caller's: its link's latency
        and its hops' (ms)."""
        return self.link.latency_ms + self.hops * cluster.hop_latency_ms

    def fixed_terms(
        self, cluster: Any, latency_ms: float = 0.0, per_message_ms: float = 0.0, per_block_ms: float = 0.0
    ) -> tuple[float, float, float]:
        """(latency, cost per message, cost per block), ms, that this flow pays on ``cluster``: the caller's
        (``latency_ms``, ...), then the transport's and its own link's (its latency and hops'), added in this
        order wherever a cluster's flow pays them, as the numpy API adds a cluster's to the caller's. With
        :func:`perfmodel.kernels.handoff.fixed_ms` they give the flow's fixed costs for its blocks and messages.

        >>> from perfmodel import Cluster
        >>> from perfmodel.network.paths import Resources, handoff_flow_list
        >>> c = Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
        >>> flow = handoff_flow_list(c, 8, (0,), (1,), Resources())[0]
        >>> flow.fixed_terms(c, latency_ms=0.5)
        (0.5, 0.0, 0.0)
        """
        t = cluster.flow_transport
        return (
            latency_ms + (t.setup_ms + self.own_latency_ms(cluster)),
            per_message_ms + (t.per_message_ms + self.link.per_message_ms),
            per_block_ms + (t.per_block_ms + self.link.per_block_ms),
        )


def _paths(
    cluster: Any,
    src: int,
    dst: int,
    resources: Resources,
    nodes_on_leaf: int,
) -> list[tuple[tuple[int, ...], int, Link, bool]]:
    """(path, hops, link, nvlink) of each sub-flow from global GPU ``src`` to ``dst``."""
    c = cluster
    if c.nvlinked(src, dst):
        nvlink = cast(Link, c.nvlink)  # (GPUs NVLinked: the cluster has its NVLink)
        cap = nvlink.effective_bandwidth_gb_s
        return [
            (
                (
                    resources.index(f"gpu{src}/nvlink/out", "nvlink", cap),
                    resources.index(f"gpu{dst}/nvlink/in", "nvlink", cap),
                ),
                0,
                nvlink,
                True,
            )
        ]
    g = c.gpus_per_node
    src_node, dst_node = src // g, dst // g
    nic_cap = c.nic_capacity_gb_s
    leaf_cap = nodes_on_leaf * cast(Link, c.nic).bandwidth_gb_s / c.oversubscription
    result: list[tuple[tuple[int, ...], int, Link, bool]] = []
    for a, b in zip(c.nics_of(src), c.nics_of(dst)):
        path = [resources.index(f"node{src_node}/nic{a}/out", "nic", nic_cap)]
        path += _through_pcie(c, src, a, "out", resources)
        hops = 1
        if c.fabric == "rail" and a != b:
            hops = 3
            path += [
                resources.index(f"leaf{a}/up", "leaf", leaf_cap),
                resources.index(f"leaf{b}/down", "leaf", leaf_cap),
            ]
        path.append(resources.index(f"node{dst_node}/nic{b}/in", "nic", nic_cap))
        path += _through_pcie(c, dst, b, "in", resources)
        stack = c.transport.node_gb_s  # (a transport's node-wide limit, as a TCP stack's: both ends)
        if stack is not None:
            path += [
                resources.index(f"node{src_node}/stack/out", "stack", stack),
                resources.index(f"node{dst_node}/stack/in", "stack", stack),
            ]
        result.append((tuple(path), hops, cast(Link, c.nic), False))
    return result


def _through_pcie(c: Any, gpu: int, nic: int, direction: str, resources: Resources) -> list[int]:
    """What a flow of global GPU ``gpu`` through NIC ``nic`` (within the node) crosses of its node's PCIe, that
    ``direction`` (``"out"``, ``"in"``): its GPU's switch, and where its NIC sits behind another, the host bridge
    and that switch (none without PCIe switches)."""
    if not c.gpus_per_pcie_switch:
        return []
    node, rate = gpu // c.gpus_per_node, cast(float, c.pcie_switch_gb_s)  # (given with gpus_per_pcie_switch)
    mine, theirs = c.switch_of_gpu(gpu), c.switch_of_nic(nic)
    crossed = [resources.index(f"node{node}/pcie{mine}/{direction}", "pcie", rate)]
    if theirs != mine:
        crossed += [
            resources.index(f"node{node}/host/{direction}", "host", cast(float, c.host_bridge_gb_s)),
            resources.index(f"node{node}/pcie{theirs}/{direction}", "pcie", rate),
        ]
    return crossed


def handoff_flow_list(
    cluster: Any,
    heads: int,
    prefill_gpus: tuple[int, ...],
    decode_gpus: tuple[int, ...],
    resources: Resources,
    *,
    nodes_on_leaf: int | None = None,
    state: bool = False,
) -> list[Flow]:
    """The flows of one handoff from a prefill worker on ``prefill_gpus`` to a decode worker on
    ``decode_gpus`` (a model of ``heads`` KV heads; 1 for an MLA latent), in order of (source rank,
    destination rank, sub-flow): prefill rank ``i`` sends decode rank ``j`` the heads ``i`` holds and
    ``j`` serves; a replicated head reaches the ``m``-th decode rank needing it from the ``(m mod r)``-th
    of its ``r`` holders; with ``state``, each decode rank's state share rides with its first head.

    >>> from perfmodel import Cluster
    >>> from perfmodel.network.clusters import Resources, handoff_flow_list
    >>> c = Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8)
    >>> r = Resources()
    >>> [(f.src_rank, f.dst_rank, f.heads, [r.names[x] for x in f.path])
    ...  for f in handoff_flow_list(c, 8, (0, 1), (8, 9), r)]  # doctest: +NORMALIZE_WHITESPACE
    [(0, 0, (0, 1, 2, 3), ['node0/nic0/out', 'node1/nic0/in']), (1, 1, (4, 5, 6, 7), ['node0/nic0/out', 'node1/nic0/in'])]
    """
    p, d = len(prefill_gpus), len(decode_gpus)
    held = split_heads(p, heads, "tp")
    served = split_heads(d, heads, "decode_tp")
    if nodes_on_leaf is None:
        g = cluster.gpus_per_node
        nodes_on_leaf = cluster.nodes or len({x // g for x in (*prefill_gpus, *decode_gpus)})
    holders: dict[int, list[int]] = {}
    for i, hs in enumerate(held):
        for h in hs:
            holders.setdefault(h, []).append(i)
    needed: dict[int, int] = {}
    carried: dict[tuple[int, int], list[int]] = {}
    first: set[tuple[int, int]] = set()
    for j, hs in enumerate(served):
        for h in hs:
            m = needed.get(h, 0)
            needed[h] = m + 1
            i = holders[h][m % len(holders[h])]
            carried.setdefault((i, j), []).append(h)
            if h == hs[0]:
                first.add((i, j))
    flows = []
    for i, j in sorted(carried):
        subs = _paths(cluster, prefill_gpus[i], decode_gpus[j], resources, nodes_on_leaf)
        for m, (path, hops, link, nvlink) in enumerate(subs):
            flows.append(
                Flow(
                    i,
                    j,
                    m,
                    prefill_gpus[i],
                    decode_gpus[j],
                    tuple(carried[(i, j)]),
                    state and (i, j) in first,
                    1.0 / len(subs),
                    path,
                    hops,
                    link,
                    nvlink,
                )
            )
    return flows
