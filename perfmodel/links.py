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
import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["LINKS", "Link", "fit_link", "get_link"]


@dataclass(frozen=True)
class Link:
    """An interconnect: a fixed setup latency plus bytes over an effective bandwidth.

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
    max_relative_error
        For links made by :func:`fit_link`: the largest relative error of the fit
        over its measurements (None for presets).

    Examples
    --------
    >>> from perfmodel import Link
    >>> ib = Link("ib-ndr", 50.0, latency_ms=0.5, efficiency=0.8)
    >>> ib.effective_bandwidth_gb_s
    40.0
    >>> ib.transfer_ms([0, 4e9])
    array([  0. , 100.5])
    """

    name: str
    bandwidth_gb_s: float
    latency_ms: float = 0.0
    efficiency: float = 1.0
    max_relative_error: float | None = None

    def __post_init__(self) -> None:
        if not self.bandwidth_gb_s > 0:
            raise ValueError(f"link {self.name!r}: bandwidth_gb_s must be > 0 GB/s, got {self.bandwidth_gb_s!r}")
        if not 0 <= self.latency_ms < np.inf:
            raise ValueError(f"link {self.name!r}: latency_ms must be a finite number >= 0, got {self.latency_ms!r}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"link {self.name!r}: efficiency must be in (0, 1], got {self.efficiency!r}")

    @property
    def effective_bandwidth_gb_s(self) -> float:
        """The bandwidth a transfer achieves: ``bandwidth_gb_s * efficiency`` (GB/s)."""
        return self.bandwidth_gb_s * self.efficiency

    def transfer_ms(self, nbytes: ArrayLike) -> np.float64 | NDArray[np.float64]:
        """Time in ms to move ``nbytes`` (scalar or array): latency plus bytes over bandwidth; 0 bytes take 0 ms.

        >>> from perfmodel import LINKS
        >>> LINKS["nvlink4"].transfer_ms(450e6)
        np.float64(1.0)
        """
        from .handoff import InputError, handoff_delay_ms

        try:  # the handoff kernel computes exactly this for one "token" of nbytes bytes
            return handoff_delay_ms(1, self.effective_bandwidth_gb_s, nbytes, latency_ms=self.latency_ms)
        except InputError as error:
            raise error.relocated("nbytes", error.row) from None

    def times(self, count: int) -> Link:
        """``count`` of these links in parallel (several NICs): ``count`` times the bandwidth.

        >>> LINKS["ib-ndr"].times(8).bandwidth_gb_s
        400.0
        """
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
            raise ValueError(f"link count must be a whole number >= 1, got {count!r}")
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
    Link(name='8x ib-ndr', bandwidth_gb_s=400.0, latency_ms=0.0, efficiency=1.0, max_relative_error=None)
    """
    if isinstance(link, Link):
        return link
    if not isinstance(link, str):
        raise TypeError(f"a link is a Link or a preset name, got {type(link).__name__}")
    key = link.strip().lower()
    if key in LINKS:
        return LINKS[key]
    match = _MULTIPLE.match(key)
    if match and match.group(2) in LINKS:
        return LINKS[match.group(2)].times(int(match.group(1)))
    close = difflib.get_close_matches(key, list(LINKS), n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ValueError(f"unknown link {link!r}. Fix: {hint}use a preset ({', '.join(LINKS)}), "
                     "a multiple such as '8x ib-ndr', or a perfmodel.Link")


def fit_link(nbytes: ArrayLike, time_ms: ArrayLike, name: str | None = None) -> Link:
    """Fit latency and bandwidth to measured transfers (bytes, milliseconds).

    The model is ``time_ms = latency_ms + nbytes / (bandwidth_gb_s * 1e9) * 1000``,
    fitted by weighted least squares on the *relative* error (sizes span orders of
    magnitude, so absolute error would fit only the largest transfers). The returned
    link carries the fit's largest relative error in ``max_relative_error``.

    Parameters
    ----------
    nbytes
        Bytes moved by each measured transfer (> 0).
    time_ms
        Measured time of each transfer in ms (> 0).
    name
        The link's name (default ``"fitted"``).

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel import fit_link
    >>> nbytes = np.array([1e5, 1e6, 1e7, 1e8, 1e9])
    >>> link = fit_link(nbytes, 0.2 + nbytes / 40e9 * 1000, name="rdma")
    >>> round(link.latency_ms, 6), round(link.bandwidth_gb_s, 6)
    (0.2, 40.0)
    """
    x = np.asarray(nbytes, dtype=np.float64).ravel()
    t = np.asarray(time_ms, dtype=np.float64).ravel()
    if x.shape != t.shape:
        raise ValueError(f"fit_link: {x.size} sizes but {t.size} times. Fix: pass one time per measured size")
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError(f"fit_link: needs at least two measurements of different sizes, got {x.size}. "
                         "Fix: measure transfers of several sizes (e.g. 1 MB to 1 GB)")
    for label, values in (("nbytes", x), ("time_ms", t)):
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"fit_link: {label} must be finite and > 0; {int(bad.sum())} are not, first at "
                             f"position {i}: {values[i]!r}. Fix: drop failed or empty measurements")
    # minimise sum(((latency + x * ms_per_byte) - t) / t)^2: least squares on rows divided by t
    design = np.column_stack([1.0 / t, x / t])
    (latency_ms, ms_per_byte), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if ms_per_byte <= 0:
        raise ValueError("fit_link: the measurements imply a non-positive bandwidth (time does not grow with size). "
                         "Fix: check the units (bytes, milliseconds) and the measurements")
    if latency_ms < 0:
        raise ValueError(f"fit_link: the measurements imply a negative latency ({latency_ms:.4g} ms). "
                         "Fix: check the units (bytes, milliseconds); include small transfers, which pin the latency")
    predicted = latency_ms + x * ms_per_byte
    worst = float(np.max(np.abs(predicted - t) / t))
    return Link(name or "fitted", bandwidth_gb_s=float(1e-6 / ms_per_byte), latency_ms=float(latency_ms),
                max_relative_error=worst)
