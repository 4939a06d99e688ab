"""Clusters as they are: NICs, transports, NVLink domains, fabrics, placement, and a handoff's flows.

The domain layer of clusters (docs/clusters.rst; no numba, no pandas): a :class:`Cluster`
validated once; where workers sit (:meth:`Cluster.placement`) and which NIC each GPU uses
(:meth:`Cluster.nics_of`); a handoff's flows and their paths (:mod:`perfmodel.network.paths`: :func:`split_heads`,
:class:`Flow`, :class:`Resources`); and a handoff alone in the cluster (:func:`alone`), resolved once per configuration
into the kernel's terms where that is exact. A handoff's flows move max-min fairly in the jitted
simulation of :mod:`perfmodel.kernels.sharing` (:func:`simulate`), which the replay on a cluster shares.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from ..errors import InputError, check_choice, check_number, finite_at_least
from ..inputs.codes import choice_names
from ..inputs.table import CLUSTER_FIELD, MAX_CLUSTER_TP, MAX_COUNT, MAX_NICS_PER_GPU
from ..inputs.words import count
from ..kernels import sharing as _sharing
from ..kernels.handoff import fixed_ms as _fixed_ms
from .links import MULTIPLE, PROFILES, Link, Transport, get_link, get_transport
from .paths import Flow, Resources, handoff_flow_list, split_heads

# (the rest is the machinery of flows, paths and placement that handoff_flows, the cluster route and the
# replay on a cluster share: importable, not the API)
__all__ = ["FABRICS", "Cluster", "kv_heads", "split_heads"]

FABRICS = choice_names("fabric")
_DEFAULT: dict[str, Any] = {f.name: f.default for f in CLUSTER_FIELD.values()}
_IDEAL = Transport()


def _number(value: Any) -> Any:
    """A real number (numpy's too) as a Python one; anything else (bools, Python's and numpy's, included) as it
    is, for the check that refuses it."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # (numpy's bool is no numbers.Real)
        return int(value) if isinstance(value, numbers.Integral) else float(value)
    return value


def _whole(where: str, name: str, value: Any, smallest: int = 1) -> int:
    """A count of the cluster's, whole and >= ``smallest``; a count of the input table (``nodes``, ``tp``...) also
    within its bound there (:data:`perfmodel.inputs.table.MAX_COUNT`, or the field's own), refused with the table's rule."""
    from ..inputs.table import INPUTS

    value = check_number(where, name, value, lambda v: math.isfinite(v) and v == int(v) and v >= smallest,
                         f"is not a whole number >= {smallest}", f"pass {name} >= {smallest}")
    entry = INPUTS.get(name)
    largest = int(entry.valid.high) if entry is not None and entry.valid is not None else MAX_COUNT
    if value > largest:
        raise InputError(where, f"{name} {int(value):,} is above {largest:,}",
                         entry.rule if entry is not None else f"pass {name} <= {largest:,}")
    return int(value)


def _real(where: str, name: str, value: Any, smallest: float = 0.0, open_low: bool = False) -> float:
    rule = f"> {smallest:g}" if open_low else f">= {smallest:g}"
    return float(check_number(where, name, value, finite_at_least(smallest, open_low),
                              f"is not a finite number {rule}", f"pass {name} {rule}"))


def _field(where: str, name: str, value: Any) -> Any:
    """A field of the cluster checked as its record of the table says (:data:`perfmodel.inputs.table.CLUSTER_TABLE`):
    a count whole and within its bounds, a real finite within its range, a choice one of its names."""
    entry = CLUSTER_FIELD[name]
    if entry.type == "choice":
        return check_choice(name, value, choice_names(name))
    assert entry.valid is not None, name  # (counts and reals have a range)
    if entry.type == "count":
        return _whole(where, name, value, int(entry.valid.low))
    return _real(where, name, value, entry.valid.low, entry.valid.open_low)


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """The hardware a handoff crosses: nodes of GPUs and NICs, NVLink domains, a fabric.

    Accepted wherever a link is (``kv_transfer_bandwidth``): the cluster decides which NICs,
    PCIe switches, fabric links or NVLink ports each of a handoff's flows crosses, and flows
    share them max-min fairly (see the documentation page on clusters).

    Parameters
    ----------
    nic
        The NIC: a :class:`perfmodel.Link` or a link name (its line rate, latency and efficiency).
    nics_per_node
        NICs per node; divides ``gpus_per_node`` (GPUs share a NIC) or is a multiple of it
        (a GPU's traffic split evenly over its NICs).
    gpus_per_node
        GPUs per node.
    nodes
        The cluster's size in nodes (default: the nodes a placement uses); a larger placement is refused.
    transport
        The engine's data path (a :class:`perfmodel.Transport` or a profile's name such as
        ``"mooncake-te-rdma"``; default: ideal, no costs, efficiency 1).
    nvlink_domain
        Consecutive GPUs joined by NVLink, counted from GPU 0 (1: none; 8: an HGX node; 72: a
        GB200 NVL72 rack); a multiple of ``gpus_per_node`` or a divisor of it.
    nvlink
        The NVLink port of each GPU, each way (a Link or a link name); required when ``nvlink_domain > 1``.
    fabric
        ``"flat"`` (non-blocking: one switch) or ``"rail"`` (NIC ``k`` of every node on leaf ``k``;
        across rails leaf, spine, leaf).
    oversubscription
        ``r >= 1`` of a rail fabric: each leaf's uplink carries ``(NICs on the leaf) * line rate / r``
        each way (a flat fabric takes only 1).
    hop_latency_ms
        Latency per switch crossed, in ms (published: about 0.002-0.003 per switch layer).
    gpus_per_pcie_switch
        Consecutive GPUs (and their NICs) behind one PCIe switch (default: none modeled).
    pcie_switch_gb_s
        Each PCIe switch's bandwidth each way (GB/s), with ``gpus_per_pcie_switch``.
    nic_map
        The NIC (its index within the node) each GPU of a node uses, one per GPU (default: GPU ``i`` uses NIC
        ``floor(i * nics_per_node / gpus_per_node)``): a mis-pinned GPU uses another's. One NIC per GPU or fewer.
    nics_down
        NICs (indices within the node) down on every node (on a rail fabric: rails down): a GPU whose NIC is down
        uses the next NIC up, in index order, around. One NIC per GPU or fewer.
    host_bridge_gb_s
        GB/s each way through the host (root complex, CPU sockets) between a node's PCIe switches: a flow of a
        GPU whose NIC sits behind another switch crosses both switches and this bridge. No public figure gives
        it, so it has no default: required where ``nic_map`` or ``nics_down`` send a GPU across switches.
    name
        A label for tables and plots.

    Examples
    --------
    >>> from perfmodel import Cluster
    >>> hgx = Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, name="hgx")
    >>> hgx.nic_capacity_gb_s, hgx.placement(8)
    (50.0, (((0, 1, 2, 3, 4, 5, 6, 7),), ((8, 9, 10, 11, 12, 13, 14, 15),)))
    >>> Cluster(nic="roce-400g", nics_per_node=3, gpus_per_node=8)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: cluster 'cluster': nics_per_node 3 neither divides nor is a multiple of the 8 GPUs per node. Fix: pass a NIC count such as 1, 2, 4, 8 or 16.
    """

    # (the fields, their defaults and checks: the input table's CLUSTER_TABLE, in its order; tests/test_declared.py)
    nic: Link | str
    nics_per_node: int
    gpus_per_node: int
    nodes: int | None = _DEFAULT["nodes"]
    transport: Transport | None = _DEFAULT["transport"]
    nvlink_domain: int = _DEFAULT["nvlink_domain"]
    nvlink: Link | str | None = _DEFAULT["nvlink"]
    fabric: str = _DEFAULT["fabric"]
    oversubscription: float = _DEFAULT["oversubscription"]
    hop_latency_ms: float = _DEFAULT["hop_latency_ms"]
    gpus_per_pcie_switch: int | None = _DEFAULT["gpus_per_pcie_switch"]
    pcie_switch_gb_s: float | None = _DEFAULT["pcie_switch_gb_s"]
    nic_map: tuple[int, ...] | None = _DEFAULT["nic_map"]
    nics_down: tuple[int, ...] = _DEFAULT["nics_down"]
    host_bridge_gb_s: float | None = _DEFAULT["host_bridge_gb_s"]
    name: str = field(default=_DEFAULT["name"], compare=True)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError("cluster name", f"{self.name!r} is {'empty' if isinstance(self.name, str) else 'not text'}",
                             "pass name='our-cluster' (text), or leave it out")
        where = f"cluster {self.name!r}"
        put = object.__setattr__
        if not isinstance(self.nic, (Link, str)):
            raise InputError(where, f"nic {self.nic!r} is not a Link or a link name", "pass nic='ib-ndr' or a Link")
        several = MULTIPLE.match(self.nic) if isinstance(self.nic, str) else None
        if several:
            raise InputError(where, f"nic {self.nic!r} is {several.group(1)} NICs, and a cluster's nic is one NIC",
                             f"pass nic={several.group(2)!r} and the count as nics_per_node (NICs per node)")
        put(self, "nic", _link("nic", self.nic))
        g = _field(where, "gpus_per_node", self.gpus_per_node)
        n = _field(where, "nics_per_node", self.nics_per_node)
        put(self, "gpus_per_node", g)
        put(self, "nics_per_node", n)
        if n > MAX_NICS_PER_GPU * g:
            raise InputError(where, f"nics_per_node {n} gives each of the {g} GPUs per node {n // g} NICs, more than "
                             f"the {MAX_NICS_PER_GPU} a cluster takes (AWS p5, the most shipping, gives each GPU 4; "
                             "each NIC of a GPU is a sub-flow of each of its flows)",
                             f"pass nics_per_node <= {MAX_NICS_PER_GPU * g:,} ({MAX_NICS_PER_GPU} per GPU)")
        if g % n and n % g:
            counts = sorted({d for d in range(1, g + 1) if g % d == 0} | {2 * g})
            raise InputError(where, f"nics_per_node {n} neither divides nor is a multiple of the {g} GPUs per node",
                             f"pass a NIC count such as {', '.join(map(str, counts[:-1]))} or {counts[-1]}")
        if self.nodes is not None:
            put(self, "nodes", _field(where, "nodes", self.nodes))
        if self.transport is None:
            put(self, "transport", _IDEAL)
        elif isinstance(self.transport, str):
            put(self, "transport", get_transport(self.transport))
        elif not isinstance(self.transport, Transport):
            raise InputError(where, f"transport {self.transport!r} is not a perfmodel.Transport",
                             "pass a Transport (perfmodel.Transport(...)) or None")
        nic = cast(Link, self.nic)
        if nic.name in PROFILES and self.transport != _IDEAL:  # (its efficiency and costs would be paid twice)
            raise InputError(where, f"nic {nic.name!r} is a transport profile (a NIC with its transport's efficiency "
                             f"and costs), and transport {cast(Transport, self.transport).name!r} applies a "
                             "transport again", "pass the NIC itself as nic (a link preset such as 'roce-400g', at the "
                             f"profile's {nic.bandwidth_gb_s:g} GB/s line rate) with the transport, or nic={nic.name!r} "
                             "without one")
        domain = _field(where, "nvlink_domain", self.nvlink_domain)
        put(self, "nvlink_domain", domain)
        if domain % g and g % domain:
            raise InputError(where, f"nvlink_domain {domain} is neither a multiple nor a divisor of the {g} GPUs "
                             "per node", f"pass an NVLink domain such as {g} (one node) or a multiple of {g}")
        if domain > 1 and self.nvlink is None:
            raise InputError(where, f"nvlink_domain {domain} joins GPUs by NVLink, but no nvlink is given",
                             "pass nvlink='nvlink4' (or a Link), or nvlink_domain=1")
        if self.nvlink is not None:
            if not isinstance(self.nvlink, (Link, str)):
                raise InputError(where, f"nvlink {self.nvlink!r} is not a Link or a link name", "pass nvlink='nvlink5'")
            put(self, "nvlink", _link("nvlink", self.nvlink))
            if domain == 1:
                raise InputError(where, f"nvlink {cast(Link, self.nvlink).name!r} is given, but nvlink_domain is 1 "
                                 "(no GPUs joined "
                                 "by NVLink), so it would never be used", "pass nvlink_domain, the GPUs one NVLink "
                                 f"domain joins (e.g. {g}: one node), or leave nvlink out")
        _field(where, "fabric", self.fabric)
        r = _field(where, "oversubscription", self.oversubscription)
        put(self, "oversubscription", r)
        if self.fabric == "flat" and r != 1:
            raise InputError(where, f"a flat fabric is non-blocking, but oversubscription is {r:g}",
                             "pass fabric='rail' for an oversubscribed leaf/spine fabric, or oversubscription=1")
        put(self, "hop_latency_ms", _field(where, "hop_latency_ms", self.hop_latency_ms))
        self._check_pcie(where, g, n)
        self._check_degraded(where, g, n)

    def _check_pcie(self, where: str, g: int, n: int) -> None:
        per_switch, rate = self.gpus_per_pcie_switch, self.pcie_switch_gb_s
        if per_switch is None and rate is None:
            return
        if per_switch is None or rate is None:
            raise InputError(where, "gpus_per_pcie_switch and pcie_switch_gb_s go together",
                             "give both (e.g. 2 GPUs per PCIe switch of 64 GB/s) or neither")
        per_switch = _field(where, "gpus_per_pcie_switch", per_switch)
        object.__setattr__(self, "gpus_per_pcie_switch", per_switch)
        object.__setattr__(self, "pcie_switch_gb_s", _field(where, "pcie_switch_gb_s", rate))
        if g % per_switch:
            raise InputError(where, f"gpus_per_pcie_switch {per_switch} does not divide the {g} GPUs per node",
                             "pass a divisor of gpus_per_node")
        sharing = g // n if n <= g else 1
        if per_switch % sharing:
            raise InputError(where, f"{sharing} GPUs share each NIC, but only {per_switch} sit behind each PCIe "
                             "switch (GPUs that share a NIC sit behind one switch)",
                             f"pass gpus_per_pcie_switch as a multiple of {sharing}")

    def _check_degraded(self, where: str, g: int, n: int) -> None:
        """The NIC map and the NICs down (each GPU's NIC an up one), and the host bridge where a GPU needs it."""
        put = object.__setattr__
        mapped = None if self.nic_map is None else _nic_indices(where, "nic_map", self.nic_map, n)
        down = _nic_indices(where, "nics_down", self.nics_down, n)
        put(self, "nic_map", mapped)
        put(self, "nics_down", tuple(sorted(down)))
        if (mapped is not None or down) and n > g:
            raise InputError(where, f"{'nic_map' if mapped is not None else 'nics_down'} with {n} NICs for {g} GPUs "
                             "per node: a GPU's flows split over its own NICs, and a map or NICs down are modeled for "
                             "one NIC per GPU or fewer", "pass nics_per_node <= gpus_per_node (the NICs in use)")
        if len(set(down)) < len(down):
            raise InputError(where, f"nics_down {down} names a NIC twice", "name each NIC down once")
        if len(down) == n:
            raise InputError(where, f"nics_down {down} takes every one of the {n} NICs of a node down",
                             "leave at least one NIC up")
        if mapped is not None and len(mapped) != g:
            raise InputError(where, f"nic_map holds {count(len(mapped), 'NIC')} for {g} GPUs per node",
                             "pass one NIC index per GPU of a node")
        for i, nic in enumerate(mapped or ()):
            if nic in down:
                raise InputError(where, f"nic_map maps GPU {i} to NIC {nic}, which nics_down says is down",
                                 "map it to a NIC that is up, or drop that NIC from nics_down")
        host = self.host_bridge_gb_s
        if host is not None:
            put(self, "host_bridge_gb_s", host := _field(where, "host_bridge_gb_s", host))
        across = [(i, self.nics_of(i)[0]) for i in range(g)
                  if self.gpus_per_pcie_switch and self.switch_of_nic(self.nics_of(i)[0]) != self.switch_of_gpu(i)]
        if across and host is None:
            i, nic = across[0]
            raise InputError(where, f"GPU {i} uses NIC {nic}, behind another PCIe switch, through the host, and "
                             "host_bridge_gb_s is not given", "pass host_bridge_gb_s, the GB/s each way through the "
                             "host between the switches (no public figure: measure a GPU-to-NIC transfer across them)")
        if host is not None and not across:
            raise InputError(where, f"host_bridge_gb_s {host:g} is given, but no GPU uses a NIC behind another PCIe "
                             "switch, so it would never be used", "drop it (or pin a GPU across switches: nic_map)")

    # --- the node -------------------------------------------------------------------------------

    def switch_of_gpu(self, gpu: int) -> int:
        """The PCIe switch (its index within the node) GPU ``gpu`` (within its node, or global) sits behind."""
        return gpu % self.gpus_per_node // cast(int, self.gpus_per_pcie_switch)

    def switch_of_nic(self, nic: int) -> int:
        """The PCIe switch (its index within the node) NIC ``nic`` sits behind: the switch of the GPUs that use it
        when nothing is mapped or down."""
        return nic * self.gpus_per_node // self.nics_per_node // cast(int, self.gpus_per_pcie_switch)

    @property
    def nic_capacity_gb_s(self) -> float:
        """A NIC's capacity: line rate x the transport's efficiency x the NIC Link's own (GB/s)."""
        nic, transport = cast(Link, self.nic), cast(Transport, self.transport)  # (resolved by __post_init__)
        return nic.bandwidth_gb_s * transport.efficiency * nic.efficiency

    @property
    def flow_transport(self) -> Transport:
        """The transport's figures as each flow of a handoff pays them (:meth:`perfmodel.Transport.per_flow`:
        a node's benchmark's costs per message and per block shared out to its GPUs)."""
        return cast(Transport, self.transport).per_flow()  # (resolved by __post_init__)

    def nics_of(self, gpu: int) -> tuple[int, ...]:
        """The NICs (indices within the node) GPU ``gpu`` (its index within its node, or global) uses."""
        n, g = self.nics_per_node, self.gpus_per_node
        i = gpu % g
        if n > g:
            k = n // g
            return tuple(range(i * k, i * k + k))
        nic = i * n // g if self.nic_map is None else self.nic_map[i]
        if nic in self.nics_down:  # (the next one up, around: one is, __post_init__ says)
            nic = next((nic + m) % n for m in range(1, n) if (nic + m) % n not in self.nics_down)
        return (nic,)

    def nvlinked(self, a: int, b: int) -> bool:
        """Whether global GPUs ``a`` and ``b`` sit in one NVLink domain."""
        return self.nvlink_domain > 1 and a // self.nvlink_domain == b // self.nvlink_domain

    def placement(self, tp: int, decode_tp: int | None = None, prefill_workers: int = 1, decode_workers: int = 1,
                  ) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        """The global GPUs of each prefill worker (``tp`` GPUs) and each decode worker (``decode_tp``).

        Prefill workers first, packed on consecutive GPUs; decode workers from the next whole
        node; a worker never straddles a node unless it is larger than one (then it starts on a
        node boundary). A placement beyond ``nodes`` is refused.

        >>> from perfmodel import Cluster
        >>> Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8).placement(4, 2, prefill_workers=3)
        (((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)), ((16, 17),))
        """
        where = f"cluster {self.name!r}"
        p = _whole(where, "tp", tp)
        d = p if decode_tp is None else _whole(where, "decode_tp", decode_tp)
        for name, degree in (("tp", p), ("decode_tp", d)):
            if degree > MAX_CLUSTER_TP:
                raise InputError(name, f"{degree:,} GPUs per worker on cluster {self.name!r} is above {MAX_CLUSTER_TP:,} "
                                 "(a handoff is a flow per rank pair and NIC: a tensor-parallel group spans at most an "
                                 "NVLink domain in practice: 72 GPUs shipping, 576 announced)",
                                 f"pass {name} <= {MAX_CLUSTER_TP:,}")
        g = self.gpus_per_node
        counts = _whole(where, "prefill_workers", prefill_workers), _whole(where, "decode_workers", decode_workers)
        need = counts[0] * p + counts[1] * d
        if need > MAX_COUNT:  # (before a GPU is placed: the counts may be absurd; within the cap, nodes below)
            raise InputError(where, f"{count(counts[0], 'prefill worker')} of {p} GPUs and "
                             f"{count(counts[1], 'decode worker')} "
                             f"of {d} GPUs need {need:,} GPUs or more, more than the {MAX_COUNT:,} (2**20) a cluster "
                             "may have (ten times the largest built)", "pass a smaller tensor-parallel degree or "
                             "fewer workers")
        cursor = 0
        sides: list[list[tuple[int, ...]]] = [[], []]
        for side, size, many in ((0, p, counts[0]), (1, d, counts[1])):
            if side == 1:
                cursor = -(-cursor // g) * g
            for _ in range(many):
                if (size <= g and cursor % g + size > g) or (size > g and cursor % g):
                    cursor = -(-cursor // g) * g
                sides[side].append(tuple(range(cursor, cursor + size)))
                cursor += size
        used = -(-cursor // g)
        if self.nodes is not None and used > self.nodes:
            raise InputError(where, f"{count(prefill_workers, 'prefill worker')} of {p} GPUs and "
                             f"{count(decode_workers, 'decode worker')} of {d} GPUs need {used} nodes of {g} GPUs, "
                             f"the cluster has {self.nodes}",
                             f"pass a smaller tensor-parallel degree or fewer workers, or nodes >= {used}")
        return tuple(sides[0]), tuple(sides[1])

    def describe(self) -> str:
        """The cluster in one line."""
        parts = [f"{self.gpus_per_node} GPUs and {self.nics_per_node} x {cast(Link, self.nic).name} per node",
                 f"{self.fabric} fabric"]
        if self.nvlink_domain > 1:
            parts.append(f"NVLink domains of {self.nvlink_domain} ({cast(Link, self.nvlink).name})")
        if self.gpus_per_pcie_switch:
            parts.append(f"{self.gpus_per_pcie_switch} GPUs per PCIe switch of {self.pcie_switch_gb_s:g} GB/s")
        if self.nic_map is not None:
            parts.append(f"GPUs on NICs {', '.join(map(str, self.nic_map))}")
        if self.nics_down:
            parts.append(f"{'NIC' if len(self.nics_down) == 1 else 'NICs'} {', '.join(map(str, self.nics_down))} down")
        if self.host_bridge_gb_s is not None:
            parts.append(f"{self.host_bridge_gb_s:g} GB/s through the host between PCIe switches")
        if self.transport is not _IDEAL and self.transport != _IDEAL:
            t = cast(Transport, self.transport)
            parts.append(f"transport {t.name}" + (f" (a node's figures over {t.measured_gpus} GPUs, each GPU's flow "
                                                  f"charged {t.measured_gpus}x its cost per message)"
                                                  if t.per_flow() is not t else "")
                         + (f" (a node's traffic through it at most {t.node_gb_s:g} GB/s each way)"
                            if t.node_gb_s is not None else ""))
        return f"{self.name}: " + ", ".join(parts)


def _link(field_name: str, link: Link | str) -> Link:
    """The NIC or NVLink Link a field names; an unknown name's error names the field."""
    try:
        return get_link(link)
    except InputError as error:
        raise InputError(field_name, error.problem, error.fix) from None


def with_fields(cluster: Cluster, changes: dict[str, Any]) -> Cluster:
    """``cluster`` with some fields changed (a sweep's, a replay grid's or the command line's axes), named after
    them; an ``nvlink_domain`` of 1 (no NVLink domain) leaves its ``nvlink`` out.

    >>> from perfmodel import CLUSTERS
    >>> c = with_fields(CLUSTERS["hgx-h100-8x400g"], {"nvlink_domain": 1, "nics_per_node": 4})
    >>> c.name, c.nvlink
    ('hgx-h100-8x400g (nvlink_domain=1, nics_per_node=4)', None)
    """
    if not changes:
        return cluster
    from ..inputs.resolve import label_of

    label = ", ".join(f"{k}={label_of(v)}" for k, v in changes.items())
    unlinked: dict[str, Any] = {"nvlink": None} if _number(changes.get("nvlink_domain")) == 1 else {}
    return dataclasses.replace(cluster, **changes, **unlinked, name=f"{cluster.name} ({label})")


def _nic_indices(where: str, name: str, value: Any, n: int) -> tuple[int, ...]:
    """NIC indices within a node (whole numbers from 0 to ``n - 1``, in a list, tuple or array), or one clear line."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise InputError(where, f"{name} {value!r} is not a list of NIC indices", f"pass {name} as a tuple, e.g. (0, 1)")
    indices = tuple(_whole(where, f"{name} entry", _number(v), 0) for v in value)
    for nic in indices:
        if nic >= n:
            raise InputError(where, f"{name} names NIC {nic}, but a node has {n} (0 to {n - 1})",
                             f"pass NIC indices from 0 to {n - 1}")
    return indices


def kv_heads(config: Any) -> int:
    """The KV heads a tensor-parallel group splits (1 for an MLA latent or a multi-query model).

    Parameters
    ----------
    config
        A model preset name, config dict, or path to ``config.json`` or its folder.

    Returns
    -------
    int
        The model's KV heads.

    Examples
    --------
    >>> kv_heads("llama-3.1-70b"), kv_heads("deepseek-v3")
    (8, 1)
    """
    from ..model.layers import attention_heads
    from ..model.models import model_config

    cfg = model_config(config)
    if cfg.get("kv_lora_rank") is not None:
        return 1
    return attention_heads(cfg)[1]  # (the reading of kv_bytes_per_token: Falcon's fields, the same refusals)


class HeadTerms(NamedTuple):
    """A model's bytes by KV head: ``heads`` heads (1: an MLA latent or numbers of bytes), one head's
    bytes per token of its full-attention, sliding-window and chunked layers, the window and chunk
    lengths, and the state bytes each decode rank receives."""

    heads: int
    full: float
    window: float = 0.0
    window_tokens: float = 0.0
    chunk: float = 0.0
    chunk_tokens: float = 0.0
    state: float = 0.0

    @property
    def byte_terms(self) -> Any:
        """One head's terms as the kernel's :class:`perfmodel.kernels.handoff.ByteTerms` (its field order)."""
        from ..kernels.handoff import ByteTerms

        return ByteTerms(self.full, self.window, self.chunk, self.state, self.window_tokens, self.chunk_tokens)


def head_terms(model: Any, *, kv_cache_dtype: str | None = None, decode_tp: int = 1,
               state_bytes: float | None = None) -> HeadTerms:
    """The :class:`HeadTerms` of a model (name, config or path): one head's terms are the model's at a
    tensor-parallel degree of its KV head count; each decode rank receives the state of one rank at
    ``decode_tp`` (or ``state_bytes``, when given: what each decode rank receives).

    >>> head_terms("llama-3.1-70b")
    HeadTerms(heads=8, full=40960.0, window=0.0, window_tokens=0.0, chunk=0.0, chunk_tokens=0.0, state=0.0)
    """
    from ..model.models import kv_terms

    heads = kv_heads(model)
    one = kv_terms(model, kv_cache_dtype=kv_cache_dtype, tp=heads)
    state = kv_terms(model, kv_cache_dtype=kv_cache_dtype, tp=decode_tp).state_bytes if state_bytes is None \
        else state_bytes
    return HeadTerms(heads, float(one.full_bytes_per_token), float(one.window_bytes_per_token),
                     float(one.window_tokens), float(one.chunk_bytes_per_token), float(one.chunk_tokens), float(state))


def flow_terms(flow: Flow, terms: HeadTerms) -> tuple[float, float, float, float]:
    """A flow's bytes per token of full, window and chunked layers, and its state bytes."""
    h = len(flow.heads)
    k = flow.fraction
    full, window, chunk = h * terms.full, h * terms.window, h * terms.chunk
    state = terms.state if flow.state else 0.0
    if k == 1.0:
        return full, window, chunk, state
    return full * k, window * k, chunk * k, state * k


def flow_bytes(vector: tuple[float, float, float, float], terms: HeadTerms, charged: float, tokens: float) -> float:
    """Bytes of a flow (its :func:`flow_terms`) for ``charged`` tokens of a ``tokens``-token prompt: the one bytes
    formula, :func:`perfmodel.kernels.handoff.kv_bytes`, on the flow's terms and the model's window and chunk."""
    from ..kernels.handoff import ByteTerms

    full, window, chunk, state = vector
    return ByteTerms(full, window, chunk, state, terms.window_tokens, terms.chunk_tokens).bytes(charged, tokens)


class Alone(NamedTuple):
    """A handoff alone in a cluster, resolved once per configuration.

    ``linear``: its delay is ``latency_ms + (the caller's and transport's fixed costs) + bytes /
    (bandwidth_gb_s * 1e9) * 1000`` with ``bytes`` from the last flow's terms (``full``, ``window``,
    ``chunk``, ``state``), for every prompt: the kernel computes it. Otherwise every prompt is
    simulated (:func:`alone_ms`)."""

    linear: bool
    bandwidth_gb_s: float
    full: float
    window: float
    chunk: float
    state: float
    latency_ms: float  # the last flow's own fixed cost: its link's latency and hops (+ the transport's setup)
    per_message_ms: float  # its link's (the transport's and caller's are added by the caller)
    per_block_ms: float
    flows: tuple[Flow, ...]
    resources: Resources
    terms: HeadTerms
    last: int  # index of the last-ending flow
    bottleneck: int | None  # resource index


def _proportional(vectors: Sequence[tuple[float, ...]]) -> bool:
    """Whether every vector is a multiple of one (so all flows' bytes grow in one ratio)."""
    ref = max(vectors, key=sum)
    return all(v[x] * ref[y] == v[y] * ref[x] for v in vectors for x in range(len(v)) for y in range(len(v)))


def alone(cluster: Cluster, terms: HeadTerms, tp: int, decode_tp: int | None = None) -> Alone:
    """Prefill worker 0's handoff to decode worker 0, alone in the cluster: its flows and, where the
    delay is linear in the bytes (every flow's byte terms in one ratio, every flow's own fixed cost
    equal), the terms that let the kernel compute it exactly.

    >>> from perfmodel import Cluster
    >>> from perfmodel.network.clusters import alone, head_terms
    >>> a = alone(Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8), head_terms("llama-3.1-70b"), 8)
    >>> a.linear, a.bandwidth_gb_s, a.full, a.resources.names[a.bottleneck]
    (True, 25.0, 40960.0, 'node0/nic0/out')
    """
    (prefill,), (decode,) = cluster.placement(tp, decode_tp)
    resources = Resources()
    flows = tuple(handoff_flow_list(cluster, terms.heads, prefill, decode, resources, state=terms.state > 0))
    vectors = [flow_terms(f, terms) for f in flows]
    own = [(f.own_latency_ms(cluster), f.link.per_message_ms, f.link.per_block_ms) for f in flows]
    linear = len(set(own)) == 1 and _proportional(vectors)
    scale = [sum(v) for v in vectors]
    outcome = simulate([0.0] * len(flows), scale, [f.path for f in flows], resources.capacities)
    last = max(range(len(flows)), key=lambda f: (outcome.ends_ms[f], -f))
    if outcome.rate_changed[last]:
        bandwidth = scale[last] / (outcome.ends_ms[last] / 1000.0) / 1e9
    else:
        bandwidth = outcome.final_rates[last]
    latency, per_message, per_block = own[last]
    return Alone(linear, bandwidth, *vectors[last], latency + cluster.flow_transport.setup_ms, per_message, per_block,
                 flows, resources, terms, last, bottleneck_of(outcome, last))


class Outcome(NamedTuple):
    """Flows' simulation (:func:`simulate`), per flow: its end (ms; its start for a flow of 0 bytes, which does
    not move), its rate in its final rate interval (GB/s; NaN: it did not move), whether its rate changed
    after it started (a change at its own start, before it moved a byte, is not one) and its bottleneck
    in its final rate interval (precise rule 9: a resource index; None where none is saturated)."""

    ends_ms: list[float]
    final_rates: list[float]
    rate_changed: list[bool]
    bottlenecks: list[int | None]


def simulate(starts_ms: Sequence[float], nbytes: Sequence[float], paths: Sequence[Sequence[int]],
             capacities: Sequence[float]) -> Outcome:
    """Flows that start at ``starts_ms`` and move ``nbytes`` each over ``paths`` (indices into ``capacities``,
    GB/s), sharing resources max-min fairly, rates recomputed whenever a flow starts or ends (one key of
    :func:`perfmodel.kernels.sharing.simulate_flows`, the jitted simulation).

    >>> simulate([0.0, 0.0], [1e9, 3e9], [[0], [0]], [2.0]).ends_ms  # both at 1 GB/s, then 2 GB/s
    [1000.0, 2000.0]
    """
    b = _sharing.simulate_flows(list(starts_ms), list(nbytes), paths, capacities)
    moved = [not math.isnan(rate) for rate in b.rates[0].tolist()]
    return Outcome(b.ends[0].tolist(), b.rates[0].tolist(),
                   [m and a != s for m, a, s in zip(moved, b.anchors[0].tolist(), starts_ms)],
                   [None if n < 0 else n for n in b.necks[0].tolist()])


def bottleneck_of(outcome: Outcome, last: int) -> int | None:
    """Precise rule 9 for flow ``last`` of ``outcome``: a saturated resource on its path, in its final rate
    interval, on which no other flow has a larger rate (first in path order on ties); None if none is
    saturated (the simulation finds it as each flow ends)."""
    return outcome.bottlenecks[last]


def _flow_start(flow: Flow, cluster: Cluster, common_ms: float, messages: float, blocks: float) -> float:
    """When ``flow`` starts moving its bytes (ms): ``common_ms`` (the caller's and the transport's costs), then
    the transport's setup and the flow's own latency, its link's costs for ``blocks`` and ``messages``
    (:func:`perfmodel.kernels.handoff.fixed_ms`)."""
    latency = common_ms + (cluster.flow_transport.setup_ms + flow.own_latency_ms(cluster))
    return float(_fixed_ms(latency, blocks * flow.link.per_block_ms, messages * flow.link.per_message_ms))


def alone_ms(resolved: Alone, cluster: Cluster, charged: float, tokens: float, common_ms: float = 0.0,
             messages: float = 0.0, blocks: float = 0.0) -> tuple[float, Outcome | None, list[float]]:
    """(delay ms, the simulation, each flow's bytes) of the resolved handoff for ``charged`` tokens of a
    ``tokens``-token prompt: every flow of more than 0 bytes pays ``common_ms`` (the transport's and the
    caller's fixed costs for its messages and blocks) plus its own, then moves its bytes; the handoff
    ends with its last flow (0 with no flow)."""
    flows = resolved.flows
    nbytes = [flow_bytes(flow_terms(f, resolved.terms), resolved.terms, charged, tokens) for f in flows]
    kept = [k for k, b in enumerate(nbytes) if b > 0]
    if not kept:
        return 0.0, None, nbytes
    starts = [_flow_start(flows[k], cluster, common_ms, messages, blocks) for k in kept]
    outcome = simulate(starts, [nbytes[k] for k in kept], [flows[k].path for k in kept], resolved.resources.capacities)
    return max(outcome.ends_ms), outcome, nbytes


def handoffs_at_once(cluster: Cluster, terms: HeadTerms, tp: int, decode_tp: int | None,
                     pairs: list[tuple[int, int]], charged: float, tokens: float | None = None,
                     *, prefill_workers: int | None = None, decode_workers: int | None = None,
                     common_ms: float = 0.0, messages: float = 0.0, blocks: float = 0.0) -> list[float]:
    """Each handoff's delay (ms) when the handoffs ``pairs`` ((prefill worker, decode worker) each) all
    start at one instant and share the cluster max-min fairly (the same simulation as a handoff alone: each
    flow pays ``common_ms`` and its own fixed costs, its link's per-message and per-block costs among them for
    ``messages`` and ``blocks``).

    >>> from perfmodel import Cluster
    >>> from perfmodel.network.clusters import handoffs_at_once, head_terms
    >>> c = Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)
    >>> [round(ms, 7) for ms in handoffs_at_once(c, head_terms("llama-3.1-70b"), 8, 8, [(0, 0), (1, 0)], 32_768)]
    [53.6870912, 53.6870912]
    """
    tokens = charged if tokens is None else tokens
    prefill_workers = prefill_workers or 1 + max(a for a, _ in pairs)
    decode_workers = decode_workers or 1 + max(b for _, b in pairs)
    prefill, decode = cluster.placement(tp, decode_tp, prefill_workers, decode_workers)
    g = cluster.gpus_per_node
    nodes = cluster.nodes or len({x // g for w in (*prefill, *decode) for x in w})
    resources = Resources()
    flows, owner, nbytes = [], [], []
    for number, (a, b) in enumerate(pairs):
        for f in handoff_flow_list(cluster, terms.heads, prefill[a], decode[b], resources, nodes_on_leaf=nodes,
                                   state=terms.state > 0):
            size = flow_bytes(flow_terms(f, terms), terms, charged, tokens)
            if size > 0:
                flows.append(f)
                owner.append(number)
                nbytes.append(size)
    starts = [_flow_start(f, cluster, common_ms, messages, blocks) for f in flows]
    outcome = simulate(starts, nbytes, [f.path for f in flows], resources.capacities)
    return [max((e for e, o in zip(outcome.ends_ms, owner) if o == number), default=0.0)
            for number in range(len(pairs))]


def refuse_what_it_decides(options: Any) -> None:
    """Refuse the options a cluster decides: ``scope="group"`` (its flows carry each rank's bytes; ``options``:
    anything with ``scope``). A handoff streams layer by layer on a cluster as on a link: its layer groups are its
    flows at a group's share of their bytes and costs, one group at a time (in a replay: it starts when its first
    group is computed, and ends no earlier than its prefill's end plus its last group's share of its time alone)."""
    if options.scope != "rank":
        raise InputError("scope", "a cluster decides which GPUs' bytes cross which NICs, so scope does not apply",
                         "drop scope (the cluster's flows carry each rank's bytes)")
