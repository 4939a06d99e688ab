"""Interconnects: the :class:`Link` (latency + bytes / bandwidth), presets, and fits to measurements.

Bandwidths are decimal GB/s (1 GB = 1e9 bytes) per direction, per GPU or NIC: what
one handoff from one prefill GPU can use. The presets in :data:`LINKS` are nominal line
rates (latency 0, efficiency 1, as upstream models them), from these sources:

============  =========  ==================================================================
preset        GB/s       source
============  =========  ==================================================================
nvlink4       450        NVIDIA H100 datasheet: NVLink 900 GB/s per GPU, both directions
nvlink5       900        NVIDIA B200 / GB200 datasheet: NVLink 1.8 TB/s per GPU, both directions
pcie4         32         PCI-SIG PCIe 4.0: 16 GT/s x 16 lanes, 128b/130b (31.5 GB/s, rounded)
pcie5         64         PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b (63 GB/s, rounded)
ib-hdr        25         NVIDIA ConnectX-6 / Quantum: InfiniBand HDR, 200 Gb/s per port
ib-ndr        50         NVIDIA ConnectX-7 / Quantum-2: InfiniBand NDR, 400 Gb/s per port
ib-xdr        100        NVIDIA ConnectX-8 / Quantum-X800: InfiniBand XDR, 800 Gb/s per port
eth-100g      12.5       IEEE 802.3ba 100 Gigabit Ethernet
eth-200g      25         IEEE 802.3bs 200 Gigabit Ethernet
eth-400g      50         IEEE 802.3bs 400 Gigabit Ethernet
eth-800g      100        IEEE 802.3df-2024 800 Gb/s Ethernet
roce-100g     12.5       RDMA over Converged Ethernet v2 on IEEE 802.3ba 100 Gigabit Ethernet
roce-200g     25         RoCE v2 on IEEE 802.3bs 200 Gigabit Ethernet
roce-400g     50         RoCE v2 on IEEE 802.3bs 400 Gigabit Ethernet
roce-800g     100        RoCE v2 on IEEE 802.3df-2024 800 Gb/s Ethernet
efa-100g      12.5       AWS Elastic Fabric Adapter, 100 Gb/s per network card (p5: 32 of them, 3,200 Gb/s;
                         AWS EC2 user guide, "Maximize network bandwidth ... with EFA")
efa-200g      25         AWS Elastic Fabric Adapter, 200 Gb/s per adapter (p5en: 16 of them; kvcache-ai/Mooncake
                         docs, "EFA transport")
============  =========  ==================================================================

Real transfers reach less than line rate, the more so the smaller they are: measure yours
and use :func:`fit_link`, or set ``efficiency`` and ``latency_ms``. The transport profiles
(:func:`transport_profiles`) are such fits, to the published microbenchmarks shipped in
:mod:`perfmodel.datasets`: a bandwidth and a cost per message (transfer descriptor) each,
with the source and the fit's error, by name wherever a link goes (``"2x uccl-rdma"``).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError, check_number, check_whole, finite_at_least, shown, warn
from ..inputs import user_presets as _presets
from ..inputs.table import nonnegative
from .fits import FitReport, fit_measured, fit_warnings
from .specs import SPECS as _CLUSTERS
from .transport import DECLARED, Transport

__all__ = ["LINKS", "FitReport", "Link", "Transport", "fit_link", "get_link", "get_transport", "remove_link", "save_link",
           "transport_profiles", "transports", "user_links"]


@dataclass(frozen=True)
class Link:
    """An interconnect: a fixed setup latency, costs per KV block and per message, and bytes over an
    effective bandwidth.

    A transfer of ``nbytes`` in ``blocks`` KV blocks and ``messages`` messages takes
    ``latency_ms + blocks * per_block_ms + messages * per_message_ms + nbytes / (bandwidth_gb_s *
    efficiency * 1e9) * 1000`` ms (the fixed costs only when bytes move). The line-rate presets
    have no latency and no per-block or per-message cost, as upstream models them; the
    transport profiles (``source`` given) are fitted to published microbenchmarks.

    Parameters
    ----------
    name
        A label for plots and tables.
    bandwidth_gb_s
        Nominal line rate, decimal GB/s per direction.
    latency_ms
        Fixed per-transfer setup latency in ms (the alpha of an alpha-beta model).
    efficiency
        Fraction of the line rate a transfer achieves (0 < efficiency <= 1).
    per_block_ms
        Cost of each KV block (page) moved, in ms: descriptor and page overhead, which
        makes small pages measurably slower. Needs a ``block_size`` wherever it is used.
    max_relative_error
        For links made by :func:`fit_link`: the largest relative error of the fit
        over its measurements (None for presets).
    per_message_ms
        Cost of each message (transfer descriptor) one rank posts, in ms; how many a
        handoff posts depends on the KV layout (:func:`perfmodel.kv_messages`).
    fit
        For links made by :func:`fit_link`: the :class:`FitReport`.
    source
        Where the link's figures come from (a transport profile's measurements).

    Examples
    --------
    >>> from perfmodel import Link
    >>> ib = Link("ib-ndr", 50.0, latency_ms=0.5, efficiency=0.8)
    >>> ib.effective_bandwidth_gb_s
    40.0
    >>> ib.transfer_ms([0, 4e9])
    array([  0. , 100.5])
    >>> Link("paged", 50.0, per_block_ms=0.001).transfer_ms(4e9, blocks=2000)
    np.float64(82.0)
    """

    name: str
    bandwidth_gb_s: float
    latency_ms: float = 0.0
    efficiency: float = 1.0
    max_relative_error: float | None = None
    per_block_ms: float = 0.0
    fit: FitReport | None = None
    per_message_ms: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        where = f"link {self.name!r}"
        put = object.__setattr__
        put(self, "bandwidth_gb_s", check_number(where, "bandwidth_gb_s", self.bandwidth_gb_s, lambda v: v > 0,
                                                 "is not > 0", "pass a bandwidth in GB/s > 0"))
        put(self, "latency_ms", check_number(where, "latency_ms", self.latency_ms, finite_at_least(0.0),
                                             "is not a finite number >= 0", "pass a latency in ms >= 0"))
        put(self, "efficiency", check_number(where, "efficiency", self.efficiency, lambda v: 0 < v <= 1,
                                             "is not in (0, 1]", "pass a fraction of line rate"))
        for term in ("per_block_ms", "per_message_ms"):
            put(self, term, check_number(where, term, getattr(self, term), finite_at_least(0.0),
                                         "is not a finite number >= 0",
                                         f"pass a cost per {term[4:-3].replace('_', ' ')} in ms >= 0"))
        if self.max_relative_error is not None:
            put(self, "max_relative_error", check_number(where, "max_relative_error", self.max_relative_error,
                                                         lambda v: not v < 0, "is negative",
                                                         "pass the fit's largest relative error (>= 0), or None"))

    @property
    def effective_bandwidth_gb_s(self) -> float:
        """The bandwidth a transfer achieves: ``bandwidth_gb_s * efficiency`` (GB/s)."""
        return self.bandwidth_gb_s * self.efficiency

    def transfer_ms(self, nbytes: ArrayLike, blocks: ArrayLike = 0, messages: ArrayLike = 0,
                    ) -> np.float64 | NDArray[np.float64]:
        """Time in ms to move ``nbytes`` in ``blocks`` KV blocks and ``messages`` messages (scalars or
        arrays); 0 bytes take 0 ms.

        >>> from perfmodel import LINKS
        >>> LINKS["nvlink4"].transfer_ms(450e6)
        np.float64(1.0)
        """
        from ..kernels.handoff import fixed_ms  # (here: the command line's --help imports no numba)

        sizes, counts = nonnegative("nbytes", nbytes), nonnegative("blocks", blocks, whole=True)
        posted = nonnegative("messages", messages, whole=True)
        with np.errstate(invalid="ignore"):
            moved = sizes / (self.effective_bandwidth_gb_s * 1e9) * 1000.0  # the kernel's operation order
            fixed = fixed_ms.py_func(self.latency_ms, counts * self.per_block_ms, posted * self.per_message_ms)
            delay = moved + np.where(sizes > 0, fixed, 0.0)
        return delay[()] if delay.ndim == 0 else delay

    def times(self, count: int) -> Link:
        """``count`` of these links in parallel (several NICs): ``count`` times the bandwidth.

        >>> LINKS["ib-ndr"].times(8).bandwidth_gb_s
        400.0
        """
        count = check_whole("count", count, smallest=1)
        return dataclasses.replace(self, name=f"{count}x {self.name}", bandwidth_gb_s=self.bandwidth_gb_s * count)




#: Interconnect presets at nominal line rate per direction, per GPU or NIC (sources: module docstring).
LINKS: dict[str, Link] = {
    # NVIDIA H100 (NVLink 4): 900 GB/s total bidirectional per GPU -> 450 GB/s each way.
    "nvlink4": Link("nvlink4", 450.0),
    # NVIDIA B200 (NVLink 5): 1.8 TB/s total bidirectional per GPU -> 900 GB/s each way.
    "nvlink5": Link("nvlink5", 900.0),
    # PCI Express 4.0 x16: 16 GT/s x 16 lanes, 128b/130b -> ~31.5 GB/s each way (rounded to 32).
    "pcie4": Link("pcie4", 32.0),
    # PCI Express 5.0 x16: 32 GT/s x 16 lanes -> ~63 GB/s each way (rounded to 64).
    "pcie5": Link("pcie5", 64.0),
    # InfiniBand NDR (ConnectX-7): 400 Gb/s per port = 50 GB/s.
    "ib-ndr": Link("ib-ndr", 50.0),
    # InfiniBand XDR (ConnectX-8): 800 Gb/s per port = 100 GB/s.
    "ib-xdr": Link("ib-xdr", 100.0),
    # RoCE v2 over 400 GbE: 400 Gb/s = 50 GB/s.
    "roce-400g": Link("roce-400g", 50.0),
    # 100 Gigabit Ethernet: 12.5 GB/s.
    "eth-100g": Link("eth-100g", 12.5),
    # InfiniBand HDR (ConnectX-6): 200 Gb/s per port = 25 GB/s.
    "ib-hdr": Link("ib-hdr", 25.0),
    # 200/400 Gigabit Ethernet (IEEE 802.3bs), 800 Gb/s Ethernet (IEEE 802.3df-2024).
    "eth-200g": Link("eth-200g", 25.0),
    "eth-400g": Link("eth-400g", 50.0),
    "eth-800g": Link("eth-800g", 100.0),
    # RoCE v2 over 100/200/800 GbE.
    "roce-100g": Link("roce-100g", 12.5),
    "roce-200g": Link("roce-200g", 25.0),
    "roce-800g": Link("roce-800g", 100.0),
    # AWS EFA: p5 has 32 network cards of 100 Gb/s (3,200 Gb/s, AWS EC2 user guide), p5en 16 of 200 Gb/s.
    "efa-100g": Link("efa-100g", 12.5),
    "efa-200g": Link("efa-200g", 25.0),
}

#: The links a sweep draws when none is named (the presets of before the NIC presets were added).
DEFAULT_LINKS: tuple[str, ...] = ("nvlink4", "nvlink5", "pcie4", "pcie5", "ib-ndr", "ib-xdr", "roce-400g", "eth-100g")


class _Profile(NamedTuple):
    """Where a transport profile comes from: a shipped table's rows of one engine, and its messages."""

    dataset: str
    engine: str  # the rows whose notes start with this
    messages: int  # messages (descriptors) per measured transfer
    per_message_rows: bool  # the table's nbytes is one message's (a transfer moves messages times that)
    source: str
    line_rate_gb_s: float | None = None  # the benchmark hardware's line rate (None: not published)
    measured_over: str = "thread"  # what the figures were measured over (Transport.measured_over)
    measured_gpus: int = 1  # with measured_over "node": the GPUs that moved data together


PROFILES = {
    "fastdeploy-rdma": _Profile(
        "fastdeploy-rdma-blocksize", "KVTransferManager", 1538, True,
        "FastDeploy KVTransferManager, one ConnectX-7 400G RoCE port, one thread, 1,538-block batches "
        "(PaddlePaddle/FastDeploy KVTransferManager README)", 50.0),
    "mooncake-te-rdma": _Profile(
        "fastdeploy-rdma-blocksize", "Mooncake transfer_engine_bench", 1538, True,
        "Mooncake transfer engine, one ConnectX-7 400G RoCE port, one thread, 1,538-block batches "
        "(PaddlePaddle/FastDeploy KVTransferManager README)", 50.0),
    "uccl-rdma": _Profile(
        "lmcache-nixl-iov", "Direct UCCL single-rail", 256, False,
        "UCCL, one rail, RDMA READ of host buffers in 256 descriptors (LMCache pull request 4161)", None, "nic"),
    "nixl-uccl-rdma": _Profile(
        "lmcache-nixl-iov", "NIXL/UCCL single-rail", 256, False,
        "NIXL over UCCL, one rail, RDMA READ of host buffers in 256 descriptors (LMCache pull request 4161)", None, "nic"),
    "nixl-ucx-rdma": _Profile(
        "lmcache-nixl-iov", "NIXL/UCX single-rail", 256, False,
        "NIXL over UCX, one rail, RDMA READ of host buffers in 256 descriptors (LMCache pull request 4161)", None, "nic"),
    "mooncake-te-efa-p5en": _Profile(
        "mooncake-te-efa", "write", 1, False,
        "Mooncake transfer engine GPU-to-GPU writes between two p5en.48xlarge over 16x200 Gb/s EFA, the "
        "node's 8 GPUs together (16 threads, batches of 128; kvcache-ai/Mooncake 'EFA transport')", 400.0, "node", 8),
}


@functools.cache
def _measured() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each profile's measured transfers: (bytes, ms)."""
    import pandas as pd

    from ..ground.data import path

    found = {}
    for name, profile in PROFILES.items():
        table = pd.read_csv(path(profile.dataset))
        if profile.dataset == "mooncake-te-efa":
            table = table[table["citation"].str.contains("block_size sweep")]
        rows = table[table["notes"].str.startswith(profile.engine)]
        nbytes = rows["nbytes"].to_numpy(dtype=np.float64) * (profile.messages if profile.per_message_rows else 1)
        found[name] = nbytes, nbytes / (rows["measured_gb_s"].to_numpy(dtype=np.float64) * 1e9) * 1000.0
    return found


def _held_fit(name: str) -> tuple[float, float, FitReport]:
    """(efficiency, per-message cost in ms, fit) of a profile whose hardware's line rate is published: the
    efficiency is the best measured throughput over the line rate, the per-message cost fitted (least
    relative error, >= 0) with the bandwidth held at efficiency x line rate."""
    profile = PROFILES[name]
    nbytes, measured = _measured()[name]
    efficiency = float(np.max(nbytes / (measured / 1000.0) / 1e9)) / cast(float, profile.line_rate_gb_s)  # (published)
    moving = nbytes / (efficiency * cast(float, profile.line_rate_gb_s) * 1e9) * 1000.0
    m = float(profile.messages)
    weights = 1.0 / measured**2
    per_message = max(float(np.sum(weights * m * (measured - moving)) / np.sum(weights * m * m)), 0.0)
    errors = np.abs(moving + m * per_message - measured) / measured
    report = FitReport(points=int(nbytes.size), max_relative_error=float(errors.max()),
                       mean_relative_error=float(errors.mean()),
                       note=f"bandwidth held at {efficiency:.3f} x the {profile.line_rate_gb_s:g} GB/s line rate",
                       parameters={"bandwidth_gb_s": efficiency * cast(float, profile.line_rate_gb_s), "latency_ms": 0.0,
                                   "per_block_ms": 0.0, "per_message_ms": per_message})
    return efficiency, per_message, report


@functools.cache
def transport_profiles() -> dict[str, Link]:
    """Links fitted to published KV-transfer microbenchmarks (shipped in :mod:`perfmodel.datasets`), by
    name wherever a link goes, multiples too (``"2x uccl-rdma"``: two rails); the source in ``source``
    and the fit in ``fit``. Where the benchmark's hardware line rate is published, the link is that line
    rate at the transport's efficiency (its best measured throughput over the line rate) with a cost per
    message fitted at that bandwidth (see :func:`transports`); elsewhere a bandwidth and a cost per
    message are fitted together (:func:`fit_link`, the latency held at 0: every measurement of a table
    posts the same number of messages). A link is what one GPU's handoff uses: a profile measured over a
    node's GPUs together (``measured_over="node"``) is one GPU's share of it, the node's line rate over its
    ``measured_gpus`` and its cost per message times them (the figures a cluster charges each flow).

    Examples
    --------
    >>> from perfmodel.network.links import transport_profiles
    >>> uccl = transport_profiles()["uccl-rdma"]
    >>> round(uccl.bandwidth_gb_s, 2), round(uccl.per_message_ms * 1000, 3), uccl.fit.max_relative_error < 0.02
    (12.31, 0.186, True)
    >>> te = transport_profiles()["mooncake-te-rdma"]
    >>> te.bandwidth_gb_s, round(te.efficiency, 4), round(te.effective_bandwidth_gb_s, 2)
    (50.0, 0.8142, 40.71)
    >>> efa = transport_profiles()["mooncake-te-efa-p5en"]     # a p5en node's 8 GPUs: one GPU's share
    >>> efa.bandwidth_gb_s, round(efa.per_message_ms * 1000, 2)
    (50.0, 2.43)
    """
    profiles = {}
    for name, profile in PROFILES.items():
        if profile.line_rate_gb_s is None:
            fitted = fitted_link(*_measured()[name], n_messages=profile.messages, name=name)
            profiles[name] = dataclasses.replace(fitted, source=profile.source)
            continue
        efficiency, per_message, report = _held_fit(name)
        line_rate, source, g = profile.line_rate_gb_s, profile.source, profile.measured_gpus
        fitted_terms = report.parameters or {}
        if profile.measured_over == "node" and g > 1:  # a link is one GPU's: its share of the node's figures
            line_rate, per_message, source = line_rate / g, per_message * g, f"{source}; one GPU's share of the {g}"
            report = dataclasses.replace(report, note=f"{report.note}, one GPU's share of the {g} GPUs measured",
                                         parameters={**fitted_terms, "per_message_ms": per_message,
                                                     "bandwidth_gb_s": fitted_terms["bandwidth_gb_s"] / g})
        profiles[name] = Link(name, line_rate, efficiency=efficiency, per_message_ms=per_message,
                              max_relative_error=report.max_relative_error, fit=report, source=source)
    return profiles


@functools.cache
def transports() -> dict[str, Transport]:
    """The transport profiles as :class:`Transport` s, usable on any NIC (a :class:`perfmodel.Cluster`'s
    ``transport``): each one's efficiency (its benchmark's best throughput over that hardware's line
    rate; 1, i.e. off, where the line rate is not published), its per-message cost, and ``setup_ms`` 0
    (no microbenchmark shows an engine's per-transfer cost: calibrate it from an end-to-end table); and the
    transports declared from a published figure (:data:`perfmodel.network.transport.DECLARED`: the TCP fallback of
    Mooncake's transfer engine, a node-wide limit, usable on a cluster only).

    Returns
    -------
    dict of str to Transport
        The profiles, by name.

    Examples
    --------
    >>> from perfmodel.network.links import transports
    >>> te = transports()["mooncake-te-rdma"]
    >>> round(te.efficiency, 4), te.line_rate_gb_s, te.setup_ms
    (0.8142, 50.0, 0.0)
    """
    found = {}
    for name, profile in PROFILES.items():
        if profile.line_rate_gb_s is None:
            efficiency, per_message = transport_profiles()[name].efficiency, transport_profiles()[name].per_message_ms
        else:  # (the profile's own figures: a node's, not the link's one GPU's share)
            efficiency, per_message = _held_fit(name)[:2]
        found[name] = Transport(name, per_message_ms=per_message, efficiency=efficiency,
                                line_rate_gb_s=profile.line_rate_gb_s, source=profile.source, measured_over=profile.measured_over,
                                measured_gpus=profile.measured_gpus)
    return {**found, **DECLARED}  # (and the transports declared from a published figure: a node's TCP limit)


def get_transport(transport: Transport | str) -> Transport:
    """A :class:`Transport` from itself or a profile's name (see :func:`transports`).

    Parameters
    ----------
    transport : Transport or str
        A transport, the name of a shipped profile (``"mooncake-te-rdma"``; any case), or ``"ideal"``
        (``Transport()``: no costs, line rate; a cluster's default).

    Returns
    -------
    Transport
        Its efficiency, per-message, per-block and setup costs (ms), the line rate (GB/s) of the hardware
        its benchmark ran on, and the source.

    Examples
    --------
    >>> get_transport("fastdeploy-rdma").line_rate_gb_s
    50.0
    >>> get_transport("ideal") == Transport()
    True
    """
    if isinstance(transport, Transport):
        return transport
    key = transport.strip().lower() if isinstance(transport, str) else None
    if key == "ideal":
        return Transport()
    if key not in transports():
        raise InputError("transport", f"unknown transport {transport!r}",
                         f"use 'ideal' (no costs, line rate), one of {', '.join(transports())}, or a perfmodel.Transport")
    return transports()[key]


def _builtin(key: str) -> Link | None:
    """A built-in link by name: a line-rate preset, or a transport profile."""
    return LINKS.get(key) or (transport_profiles().get(key) if key in PROFILES else None)


MULTIPLE = re.compile(r"^\s*(\d+)\s*[x*×]\s*(.+?)\s*$", re.IGNORECASE)


def get_link(link: Link | str) -> Link:
    """A :class:`Link` from itself, a preset name, or ``"<count>x <preset>"`` (several NICs).

    Parameters
    ----------
    link
        A :class:`Link`, a preset name (built-in, a transport profile or saved with
        :func:`save_link`), or ``"8x ib-ndr"`` for eight of a preset side by side.

    Returns
    -------
    Link
        The link (``"8x ib-ndr"``: one link eight times as fast as ``"ib-ndr"``).

    Examples
    --------
    >>> from perfmodel import get_link
    >>> get_link("8x ib-ndr")
    Link(name='8x ib-ndr', bandwidth_gb_s=400.0, latency_ms=0.0, efficiency=1.0, max_relative_error=None, per_block_ms=0.0, fit=None, per_message_ms=0.0, source='')
    """
    if isinstance(link, Link):
        return link
    if not isinstance(link, str):
        got = shown(link) if hasattr(link, "__len__") else f"{type(link).__name__} {link!r}"
        raise InputError("link", f"got {got}", "pass a Link or a preset name such as 'ib-ndr'")
    key = _presets.key_of(link)  # (as the presets are keyed: NFKC, stripped, lower case)
    match = MULTIPLE.match(key)
    base = match.group(2) if match else key
    found = _builtin(base)  # built-ins first: the user presets file is read only for other names
    if found is not None:  # (an entry of the file under its name is never used: said once)
        _presets.warn_hidden(base, ("links", "clusters"), "link")
    else:
        users, bad = user_links_and_errors()
        if base in bad:
            raise bad[base]
        found = users.get(base)
        if found is None and base in DECLARED:
            raise InputError("link", f"{link!r} is a transport whose limit is a node's traffic together, so it is no "
                             "link", f"use it as a cluster's transport: perfmodel.Cluster(..., transport={base!r})")
        if found is None and (base in _CLUSTERS or base in _presets.load("clusters")[0]):  # (a cluster, not a link)
            raise InputError("link", f"{link!r} is a cluster, where one link is asked for", "give it where a "
                             "cluster goes: cluster= in a sweep or grid, or the link of handoff_delay_ms and the replays")
        if found is None:
            raise InputError("link", f"unknown link {link!r}", f"{_suggest(base, users, bad)}use a preset "
                             f"({', '.join(LINKS)}), a transport profile ({', '.join(PROFILES)}), a multiple such "
                             "as '8x ib-ndr', or a perfmodel.Link; where a link goes, a cluster too (perfmodel "
                             "clusters lists them)")
    if match and int(match.group(1)) < 1:
        raise InputError("link", f"{link!r} is {match.group(1)} links", f"give 1 or more, e.g. '1x {base}'")
    return found.times(int(match.group(1))) if match else found


def _suggest(key: str, users: dict[str, Link], bad: dict[str, InputError]) -> str:
    """"did you mean ...? " for an unknown link name, each with its kind: link presets, transport profiles,
    clusters (which go where a link goes), and user presets with their file (and, for one that cannot be used,
    what is wrong with it)."""
    file = _presets.presets_path()
    user_clusters = _presets.load("clusters")[0]
    kinds = {**dict.fromkeys(LINKS, "a link preset"), **dict.fromkeys(PROFILES, "a transport profile"),
             **dict.fromkeys(_CLUSTERS, "a cluster preset"), **dict.fromkeys(user_clusters, f"a user cluster in {file}"),
             **dict.fromkeys(users, f"a user link in {file}"),
             **{n: f"a user link in {file}, which cannot be used: {bad[n].problem}" for n in bad}}
    close = difflib.get_close_matches(key, list(kinds), n=3, cutoff=0.4)
    return f"did you mean {', '.join(f'{n} ({kinds[n]})' for n in close)}? " if close else ""


def user_links() -> dict[str, Link]:
    """The links saved with :func:`save_link` (or ``perfmodel calibrate --save``), by name.

    A user preset that cannot be used (or a presets file that cannot be read) is left out with a
    ``UserWarning`` naming the file, the entry and what is wrong.

    Returns
    -------
    dict of str to Link
        The usable user links, by name (empty when none is saved).

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> user_links()
    {}
    """
    try:
        links, bad = user_links_and_errors()
    except InputError as error:
        warn(str(error))
        return {}
    _presets.warn_unusable(bad)
    return links


#: The fields of a saved link, and whether each is required.
_LINK_FIELDS = {"bandwidth_gb_s": True, "latency_ms": False, "efficiency": False, "per_block_ms": False,
                "per_message_ms": False}
_FIT_FIELDS = {"points": True, "max_relative_error": True, "mean_relative_error": True, "note": False,
               "parameters": False}


def _number(name: str, where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _presets.entry_error(name, "links", f"{where} is {_presets.json_type(value)}, not a number")
    return float(value)


def _fit_entry(name: str, report: object) -> FitReport | None:
    """A saved fit's :class:`FitReport`, every field checked."""
    if report is None:
        return None
    if not isinstance(report, dict):
        raise _presets.entry_error(name, "links", f"'fit' is {_presets.json_type(report)}, not an object of the "
                                   "fit's report")
    for field, required in _FIT_FIELDS.items():
        if required and field not in report:
            raise _presets.entry_error(name, "links", f"'fit' has no {field!r}")
    _presets.unknown_fields(name, "links", report, set(_FIT_FIELDS))
    values = {f: _number(name, f"'fit' field {f!r}", report[f]) for f in ("max_relative_error", "mean_relative_error")}
    points = _number(name, "'fit' field 'points'", report["points"])
    if not (math.isfinite(points) and points == int(points) and points >= 0):
        raise _presets.entry_error(name, "links", f"'fit' field 'points' is {points!r}, not a count")
    parameters = report.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise _presets.entry_error(name, "links", f"'fit' field 'parameters' is {_presets.json_type(parameters)}, "
                                   "not an object of numbers")
    parameters = None if parameters is None else {
        str(p): _number(name, f"'fit' parameter {p!r}", v) for p, v in parameters.items()}
    note = _presets.text_field(name, "links", report, "note") if "note" in report else ""
    return FitReport(points=int(points), **values, note=note, parameters=parameters)


def _link_entry(name: str, entry: dict) -> Link:
    """A saved link from its entry, every field checked: the error names the file, the entry and the field."""
    if name in LINKS or name in PROFILES:
        raise _presets.entry_error(name, "links", "is a built-in link's name: rename it")
    if name in _CLUSTERS:
        raise _presets.entry_error(name, "links", "is a built-in cluster's name (a link and a cluster go where one "
                                   "another go): rename it")
    if MULTIPLE.match(name):
        raise _presets.entry_error(name, "links", "reads as a multiple of a link ('8x ib-ndr'): this entry is "
                                   "never used (rename it)")
    if _taken_by_other(name):
        raise _presets.entry_error(name, "links", f"takes {_taken_by_other(name).split(' (')[0]}: rename it")
    _presets.unknown_fields(name, "links", entry, {*_LINK_FIELDS, "fit", "source", _presets.SAVED_BY})
    fields = {}
    for field, required in _LINK_FIELDS.items():
        if field in entry:
            fields[field] = _number(name, repr(field), entry[field])
        elif required:
            raise _presets.entry_error(name, "links", f"has no {field!r}")
    report = _fit_entry(name, entry.get("fit"))
    source = _presets.text_field(name, "links", entry, "source")
    _presets.text_field(name, "links", entry, _presets.SAVED_BY)
    try:
        return Link(name, **fields, max_relative_error=None if report is None else report.max_relative_error,
                    fit=report, source=source)
    except InputError as error:
        raise _presets.entry_error(name, "links", error.problem) from None


def user_links_and_errors() -> tuple[dict[str, Link], dict[str, InputError]]:
    """The well-formed user links, and the error of each malformed one (by name); a file that cannot be
    read as presets raises its error."""
    return _presets.parse_each("links", _link_entry)


def save_link(link: Link, *, source: str = "", replace: bool = False) -> Path:
    """Save ``link`` as a user preset under its name: every entry point then accepts the name
    (``kv_transfer_bandwidth="our-rdma"``, ``--link our-rdma``). Returns the presets file.

    A name already saved (names ignore case) is refused unless ``replace=True``.

    Parameters
    ----------
    link : Link
        The link (its name is the preset's).
    source : str
        Where it comes from, shown by ``perfmodel links``.
    replace : bool
        Replace a preset of that name.

    Returns
    -------
    pathlib.Path
        The presets file written.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_link(Link("our-rdma", 48.0, latency_ms=0.1), source="measured in the lab")
    >>> get_link("2x our-rdma").bandwidth_gb_s
    96.0
    """
    entry = {"bandwidth_gb_s": link.bandwidth_gb_s, "latency_ms": link.latency_ms, "efficiency": link.efficiency,
             "per_block_ms": link.per_block_ms, "per_message_ms": link.per_message_ms, "source": source or link.source}
    if link.fit is not None:
        entry["fit"] = dataclasses.asdict(link.fit)
    check_link_name(link.name, replace=replace)
    return _presets.save("links", link.name, entry, builtin={*LINKS, *PROFILES}, replace=replace)


def remove_link(name: str) -> Path:
    """Remove a user link that perfmodel saved (:func:`save_link`, ``perfmodel calibrate --save``); returns
    the presets file. An entry perfmodel did not save (written by hand) is refused and left as it is.

    Parameters
    ----------
    name : str
        The user link's name.

    Returns
    -------
    pathlib.Path
        The presets file the entry was removed from.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_link(Link("our-rdma", 48.0))
    >>> _ = remove_link("our-rdma"); user_links()
    {}
    """
    return _presets.remove("links", name)


def check_link_name(name: str, *, replace: bool = False) -> None:
    """Refuse a name a user link cannot take (a built-in link's or cluster's, ``"cluster"`` (every unnamed
    cluster's), a transport's, one that reads as a multiple such as ``"8x ib-ndr"`` or as a number (``"50"``), a user
    cluster's, one already saved unless ``replace``), or a presets file it could not be saved to, before anything is
    computed or written.

    >>> check_link_name("ib-ndr")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: link name: 'ib-ndr' is a built-in preset. Fix: choose another name.
    """
    key = _presets.key_of(name)
    if key in LINKS or key in PROFILES or not key:
        raise InputError("link name", f"{name!r} is {'a built-in preset' if key else 'empty'}", "choose another name")
    if _taken_by_other(key):
        raise InputError("link name", f"{name!r} is {_taken_by_other(key)}", "choose another name")
    if key in _CLUSTERS:
        raise InputError("link name", f"{name!r} is a built-in cluster preset (a cluster goes where a link goes)",
                         "choose another name")
    if MULTIPLE.match(key):
        raise InputError("link name", f"{name!r} reads as a multiple of a link ('8x ib-ndr': eight of them)",
                         "choose a name that does not start with a count and 'x'")
    _presets.check_free("links", name, builtin={*LINKS, *PROFILES}, replace=replace)


def _taken_by_other(key: str) -> str:
    """What else a link's name ``key`` already is: the name of every unnamed cluster, or a transport's ("" if
    neither)."""
    if key == "cluster":
        return "the name of every Cluster given none (a cluster goes where a link goes)"
    if key in DECLARED or key == "ideal":
        return "a transport's name (--transport takes it; as a link it would hide that transport)"
    return ""


def link_source(name: str) -> str:
    """Where a link preset comes from: "line rate", "profile: <source>", or "user: <source> (<file>)"."""
    if name in LINKS:
        return "line rate"
    if name in PROFILES:
        return "profile: " + PROFILES[name].source
    link = user_links_and_errors()[0].get(_presets.key_of(name))
    return f"user: {(link.source if link else '') or 'saved'} ({_presets.presets_path()})"


def fit_link(
    nbytes: ArrayLike, measured_ms: ArrayLike, *, n_blocks: ArrayLike | None = None,
    n_messages: ArrayLike | None = None, name: str | None = None, line_rate_gb_s: float | None = None,
) -> Link:
    """Fit a link to measured transfers: latency, bandwidth and (with ``n_blocks`` and ``n_messages``)
    costs per block and per message.

    The model is ``measured_ms = latency_ms + n_blocks * per_block_ms + n_messages *
    per_message_ms + nbytes / (bandwidth_gb_s * 1e9) * 1000``, fitted on the *relative*
    error (sizes span orders of magnitude, so absolute error would fit only the largest
    transfers), every parameter >= 0 (a constrained least-squares fit). The link carries a
    :class:`FitReport` in ``fit`` (points, largest and mean relative error, each parameter's
    value) and the largest error in ``max_relative_error``.

    A term the measurements cannot tell from the simpler ones is held at 0 and the report
    says so: blocks proportional to bytes (a fixed block size) fit the bandwidth alone; every
    measurement moving the same number of blocks or messages holds the latency at 0 (the
    fixed cost is per block or message); the same bytes at two message counts (a page-size
    experiment) fit a bandwidth and a per-message cost; a time that does not grow with size
    gives an unlimited bandwidth. Sizes (and counts) less than 10% apart are one point, and a fit needs
    two (:func:`perfmodel.network.fits.distinct_points`). A throughput-vs-message-size table (GB/s per message
    size, as RDMA benchmarks publish) fits as ``nbytes = count * size``,
    ``measured_ms = nbytes / (gb_s * 1e9) * 1000``, ``n_messages = count``.

    Warns (``UserWarning``, as :func:`perfmodel.calibrate` does) of a measured throughput above
    ``line_rate_gb_s`` (the units or the NIC are wrong) and of a fit far from its measurements (its largest
    relative error above 10%).

    Parameters
    ----------
    nbytes
        Bytes moved by each measured transfer over one NIC (> 0): a link's bandwidth is one NIC's (one GPU's
        path), so a transfer striped over several NICs gives each NIC's share (its bytes / the NICs).
    measured_ms
        Measured time of each transfer in ms (> 0).
    n_blocks
        KV blocks of each transfer (>= 1), to fit ``per_block_ms``.
    n_messages
        Messages (transfer descriptors) of each transfer (>= 1), to fit ``per_message_ms``
        (see :func:`perfmodel.kv_messages` for a handoff's count).
    name
        The link's name (default ``"fitted"``).
    line_rate_gb_s
        The line rate of the hardware measured (decimal GB/s): the fitted bandwidth never exceeds
        it (the fit is constrained, and the report says when the bound holds it). Default: no bound.

    Returns
    -------
    Link
        The fitted link, its :class:`FitReport` in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel import fit_link
    >>> nbytes = np.array([1e5, 1e6, 1e7, 1e8, 1e9])
    >>> link = fit_link(nbytes, 0.2 + nbytes / 40e9 * 1000, name="rdma")
    >>> round(link.latency_ms, 6), round(link.bandwidth_gb_s, 6), link.fit.max_relative_error < 1e-9
    (0.2, 40.0, True)
    >>> sizes = np.array([1024, 4096, 16384, 65536, 262144]) * 1538.0     # 1,538 messages per batch
    >>> rdma = fit_link(sizes, 1538 * 0.0005 + sizes / 45e9 * 1000, n_messages=1538)
    >>> round(rdma.per_message_ms * 1000, 6), round(rdma.bandwidth_gb_s, 3), rdma.latency_ms
    (0.5, 45.0, 0.0)
    >>> pages = fit_link([983e6, 983e6], [20.0, 8.0], n_messages=[30_016, 3_776])  # 16- and 128-token pages
    >>> round(pages.per_message_ms * 1000, 3)  # microseconds per message
    0.457
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as said:   # 55 GB/s measured on a 50 GB/s NIC?
    ...     capped = fit_link(nbytes, 0.2 + nbytes / 55e9 * 1000, line_rate_gb_s=50.0)
    >>> str(said[0].message)
    'the best measured throughput, 54.4 GB/s, is above the line rate given, 50 GB/s: check the units (bytes and ms) and the NIC'
    >>> capped.bandwidth_gb_s, capped.fit.note
    (50.0, 'the bandwidth is held at the line rate, 50 GB/s')
    """
    parameters, report, best_gb_s = fit_measured(nbytes, measured_ms, n_blocks, n_messages, line_rate_gb_s)
    for text in fit_warnings(report, best_gb_s, line_rate_gb_s):
        warn(text)
    return Link(name or "fitted", **parameters, max_relative_error=report.max_relative_error, fit=report)


def fitted_link(
    nbytes: ArrayLike, measured_ms: ArrayLike, *, n_blocks: ArrayLike | None = None,
    n_messages: ArrayLike | None = None, name: str | None = None, line_rate_gb_s: float | None = None,
) -> Link:
    """:func:`fit_link` without its warnings, for the package's own fits: of shipped tables, and of
    :func:`perfmodel.calibrate`, which says its own (in the table's words)."""
    parameters, report, _ = fit_measured(nbytes, measured_ms, n_blocks, n_messages, line_rate_gb_s)
    return Link(name or "fitted", **parameters, max_relative_error=report.max_relative_error, fit=report)
