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
ib-ndr        50         NVIDIA ConnectX-7 / Quantum-2: InfiniBand NDR, 400 Gb/s per port
ib-xdr        100        NVIDIA ConnectX-8 / Quantum-X800: InfiniBand XDR, 800 Gb/s per port
roce-400g     50         IEEE 802.3bs 400 Gigabit Ethernet, RDMA over Converged Ethernet v2
eth-100g      12.5       IEEE 802.3ba 100 Gigabit Ethernet
============  =========  ==================================================================

Real transfers reach less than line rate, the more so the smaller they are: measure yours
and use :func:`fit_link`, or set ``efficiency`` and ``latency_ms``.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _presets
from ._inputs import nonnegative
from .errors import InputError, check_whole

__all__ = ["LINKS", "FitReport", "Link", "fit_link", "get_link", "save_link", "user_links"]


@dataclass(frozen=True)
class FitReport:
    """How well a :func:`fit_link` result describes its measurements (relative errors, fractions)."""

    points: int
    max_relative_error: float
    mean_relative_error: float
    note: str = ""


@dataclass(frozen=True)
class Link:
    """An interconnect: a fixed setup latency, a cost per KV block, and bytes over an effective bandwidth.

    A transfer of ``nbytes`` in ``blocks`` KV blocks takes
    ``latency_ms + blocks * per_block_ms + nbytes / (bandwidth_gb_s * efficiency * 1e9) * 1000``
    ms (latency and blocks only when bytes move). The presets are line rate: no latency,
    no per-block cost, as upstream models them.

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
    fit
        For links made by :func:`fit_link`: the :class:`FitReport`.

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

    def __post_init__(self) -> None:
        where = f"link {self.name!r}"
        if not self.bandwidth_gb_s > 0:
            raise InputError(where, f"bandwidth_gb_s {self.bandwidth_gb_s!r} is not > 0", "pass a bandwidth in GB/s > 0")
        if not 0 <= self.latency_ms < np.inf:
            raise InputError(where, f"latency_ms {self.latency_ms!r} is not a finite number >= 0",
                             "pass a latency in ms >= 0")
        if not 0 < self.efficiency <= 1:
            raise InputError(where, f"efficiency {self.efficiency!r} is not in (0, 1]", "pass a fraction of line rate")
        if not 0 <= self.per_block_ms < np.inf:
            raise InputError(where, f"per_block_ms {self.per_block_ms!r} is not a finite number >= 0",
                             "pass a cost per KV block in ms >= 0")

    @property
    def effective_bandwidth_gb_s(self) -> float:
        """The bandwidth a transfer achieves: ``bandwidth_gb_s * efficiency`` (GB/s)."""
        return self.bandwidth_gb_s * self.efficiency

    def transfer_ms(self, nbytes: ArrayLike, blocks: ArrayLike = 0) -> np.float64 | NDArray[np.float64]:
        """Time in ms to move ``nbytes`` in ``blocks`` KV blocks (scalars or arrays); 0 bytes take 0 ms.

        >>> from perfmodel import LINKS
        >>> LINKS["nvlink4"].transfer_ms(450e6)
        np.float64(1.0)
        """
        sizes, counts = nonnegative("nbytes", nbytes), nonnegative("blocks", blocks, whole=True)
        with np.errstate(invalid="ignore"):
            moved = sizes / (self.effective_bandwidth_gb_s * 1e9) * 1000.0  # the kernel's operation order
            delay = moved + np.where(sizes > 0, self.latency_ms + counts * self.per_block_ms, 0.0)
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
}

_MULTIPLE = re.compile(r"^\s*(\d+)\s*[x*×]\s*(.+?)\s*$", re.IGNORECASE)


def get_link(link: Link | str) -> Link:
    """A :class:`Link` from itself, a preset name, or ``"<count>x <preset>"`` (several NICs).

    >>> from perfmodel import get_link
    >>> get_link("8x ib-ndr")
    Link(name='8x ib-ndr', bandwidth_gb_s=400.0, latency_ms=0.0, efficiency=1.0, max_relative_error=None, per_block_ms=0.0, fit=None)
    """
    if isinstance(link, Link):
        return link
    if not isinstance(link, str):
        raise InputError("link", f"got {type(link).__name__} {link!r}", "pass a Link or a preset name such as 'ib-ndr'")
    key = link.strip().lower()
    match = _MULTIPLE.match(key)
    for known in (LINKS, None):  # built-ins first: the user presets file is read only for other names
        known = known if known is not None else _known_links(match.group(2) if match else key)
        if key in known:
            return known[key]
        if match and match.group(2) in known:
            return known[match.group(2)].times(int(match.group(1)))
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise InputError("link", f"unknown link {link!r}", f"{hint}use a preset ({', '.join(LINKS)}), "
                     "a multiple such as '8x ib-ndr', or a perfmodel.Link")


def user_links() -> dict[str, Link]:
    """The links saved with :func:`save_link` (or ``perfmodel calibrate``), by name.

    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> user_links()
    {}
    """
    return _user_links()[0]


def _user_links() -> tuple[dict[str, Link], dict[str, InputError]]:
    """The well-formed user links, and the error of each malformed one (by name)."""
    entries, bad = _presets.load("links")
    links = {}
    for name, entry in entries.items():
        try:
            fields = {k: float(entry[k]) for k in ("bandwidth_gb_s", "latency_ms", "efficiency", "per_block_ms")
                      if k in entry}
            report = entry.get("fit")
            links[name] = Link(name, **fields, max_relative_error=(report or {}).get("max_relative_error"),
                               fit=FitReport(**report) if report else None)
        except (TypeError, ValueError, KeyError) as error:
            bad[name] = _presets.entry_error(name, "links", f"is not a valid link ({error})")
    return links, bad


def _known_links(key: str = "") -> dict[str, Link]:
    links, bad = _user_links()
    if key in bad:
        raise bad[key]
    return {**links, **LINKS}


def save_link(link: Link, *, source: str = "") -> Path:
    """Save ``link`` as a user preset under its name: every entry point then accepts the name
    (``kv_transfer_bandwidth="our-rdma"``, ``--link our-rdma``). Returns the presets file.

    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_link(Link("our-rdma", 48.0, latency_ms=0.1), source="measured in the lab")
    >>> get_link("2x our-rdma").bandwidth_gb_s
    96.0
    """
    entry = {"bandwidth_gb_s": link.bandwidth_gb_s, "latency_ms": link.latency_ms, "efficiency": link.efficiency,
             "per_block_ms": link.per_block_ms, "source": source}
    if link.fit is not None:
        entry["fit"] = dataclasses.asdict(link.fit)
    check_link_name(link.name)
    return _presets.save("links", link.name, entry, builtin=set(LINKS))


def check_link_name(name: str) -> None:
    """Refuse a name a user link cannot take (a built-in's, one that reads as a multiple such as
    ``"8x ib-ndr"``), or a presets file it could not be saved to, before anything is computed or written.

    >>> check_link_name("ib-ndr")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: link name: 'ib-ndr' is a built-in preset. Fix: choose another name.
    """
    key = name.strip().lower() if isinstance(name, str) else ""
    if key in LINKS or not key:
        raise InputError("link name", f"{name!r} is {'a built-in preset' if key else 'empty'}", "choose another name")
    if _MULTIPLE.match(key):
        raise InputError("link name", f"{name!r} reads as a multiple of a link ('8x ib-ndr': eight of them)",
                         "choose a name that does not start with a count and 'x'")
    _presets.load("links")  # a presets file it could not be saved to: said now


def link_source(name: str) -> str:
    """Where a link preset comes from: "built-in", or a user preset's recorded source."""
    if name in LINKS:
        return "built-in"
    return "user: " + (_presets.load("links")[0].get(name, {}).get("source") or "saved")


def _nonnegative_least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """argmin ||design @ x - target|| over x >= 0, for a few columns: the best of the unconstrained
    fits on every subset of the columns (exact, and cheap for up to three parameters)."""
    best, best_residual = np.zeros(design.shape[1]), float(np.sum(target**2))
    columns = range(design.shape[1])
    for size in range(1, design.shape[1] + 1):
        for subset in itertools.combinations(columns, size):
            solution, *_ = np.linalg.lstsq(design[:, subset], target, rcond=None)
            if np.all(solution >= 0):
                x = np.zeros(design.shape[1])
                x[list(subset)] = solution
                residual = float(np.sum((design @ x - target) ** 2))
                if residual < best_residual - 1e-15 * max(best_residual, 1.0):
                    best, best_residual = x, residual
    return best


def fit_link(
    nbytes: ArrayLike, measured_ms: ArrayLike, *, n_blocks: ArrayLike | None = None, name: str | None = None,
) -> Link:
    """Fit a link to measured transfers: latency, bandwidth and (with ``n_blocks``) a cost per block.

    The model is ``measured_ms = latency_ms + n_blocks * per_block_ms + nbytes /
    (bandwidth_gb_s * 1e9) * 1000``, fitted on the *relative* error (sizes span orders of
    magnitude, so absolute error would fit only the largest transfers), every parameter
    >= 0 (a constrained least-squares fit). The link carries a :class:`FitReport` in
    ``fit`` (points, largest and mean relative error) and the largest error in
    ``max_relative_error``.

    A term the measurements cannot tell from the simpler ones is held at 0 and the report
    says so: blocks proportional to bytes (a fixed block size) fit the bandwidth alone; every
    measurement moving the same number of blocks holds the latency at 0 (the fixed cost is
    per block); a time that does not grow with size gives an unlimited bandwidth. A
    throughput-vs-message-size table (GB/s per block size, as RDMA benchmarks publish)
    fits as ``nbytes = count * size``, ``measured_ms = nbytes / (gb_s * 1e9) * 1000``,
    ``n_blocks = count``.

    Parameters
    ----------
    nbytes
        Bytes moved by each measured transfer (> 0).
    measured_ms
        Measured time of each transfer in ms (> 0).
    n_blocks
        KV blocks (messages, descriptors) of each transfer (>= 1), to fit ``per_block_ms``.
    name
        The link's name (default ``"fitted"``).

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel import fit_link
    >>> nbytes = np.array([1e5, 1e6, 1e7, 1e8, 1e9])
    >>> link = fit_link(nbytes, 0.2 + nbytes / 40e9 * 1000, name="rdma")
    >>> round(link.latency_ms, 6), round(link.bandwidth_gb_s, 6), link.fit.max_relative_error < 1e-9
    (0.2, 40.0, True)
    >>> sizes = np.array([1024, 4096, 16384, 65536, 262144]) * 1538.0     # 1,538 blocks per batch
    >>> paged = fit_link(sizes, 1538 * 0.002 + sizes / 45e9 * 1000, n_blocks=1538)
    >>> round(paged.per_block_ms, 6), round(paged.bandwidth_gb_s, 3), paged.latency_ms
    (0.002, 45.0, 0.0)
    """
    x = np.asarray(nbytes, dtype=np.float64).ravel()
    t = np.asarray(measured_ms, dtype=np.float64).ravel()
    blocks = None if n_blocks is None else np.broadcast_to(np.asarray(n_blocks, dtype=np.float64), x.shape).ravel()
    if x.shape != t.shape:
        raise InputError("fit_link", f"{x.size} sizes but {t.size} times", "pass one time per measured size")
    if x.size < 2:
        raise InputError("fit_link", f"needs at least two measurements, got {x.size}",
                         "measure transfers of several sizes (e.g. 1 MB to 1 GB)")
    for label, values in (("nbytes", x), ("measured_ms", t), ("n_blocks", blocks)):
        if values is None:
            continue
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"fit_link: {label}", f"{int(bad.sum())} value(s) not finite and > 0, first at "
                             f"position {i}: {float(values[i])!r}", "drop failed or empty measurements")
    # the terms, simplest first; a term the data cannot tell from those already kept is held at 0 (and said)
    terms = {"bandwidth": x, "per-block cost": blocks, "latency": np.ones_like(t)}
    kept: dict[str, np.ndarray] = {}
    notes = []
    for term, column in terms.items():
        if column is None:
            continue
        scaled = np.column_stack([*kept.values(), column]) / t[:, None]
        if np.linalg.matrix_rank(scaled / np.abs(scaled).max(axis=0), tol=1e-9) > len(kept):
            kept[term] = column
        else:
            notes.append(f"the {term} cannot be told apart from the {' and '.join(kept)} on these measurements: "
                         "held at 0")
    columns = list(kept.values())
    # rows divided by t: least squares on the relative error, every parameter >= 0
    solution = dict(zip(kept, _nonnegative_least_squares(np.column_stack(columns) / t[:, None], np.ones_like(t))))
    ms_per_byte = solution.get("bandwidth", 0.0)
    if ms_per_byte <= 0:
        notes.append("the time does not grow with the bytes on these measurements: the bandwidth is unlimited")
    latency, per_block = float(solution.get("latency", 0.0)), float(solution.get("per-block cost", 0.0))
    note = "; ".join(notes)
    solution = np.array(list(solution.values()))
    predicted = np.column_stack(columns) @ solution
    errors = np.abs(predicted - t) / t
    report = FitReport(points=int(x.size), max_relative_error=float(errors.max()),
                       mean_relative_error=float(errors.mean()), note=note)
    bandwidth = float(1e-6 / ms_per_byte) if ms_per_byte > 0 else np.inf
    return Link(name or "fitted", bandwidth_gb_s=bandwidth, latency_ms=latency, per_block_ms=per_block,
                max_relative_error=report.max_relative_error, fit=report)
