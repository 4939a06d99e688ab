"""The figure of a handoff on a cluster: each resource's load, and the bottleneck."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes

from ._style import _ax


def resource_loads(flows: Any, ax: Axes | None = None) -> Axes:
    """Each resource's busy time at capacity (its bytes over its capacity, ms) as a horizontal bar, the
    handoff's bottleneck hatched and named, and the handoff's delay as a line; from a table of
    :func:`perfmodel.handoff_flows` (which computes everything drawn here).

    Parameters
    ----------
    flows
        The result of :func:`perfmodel.handoff_flows`.
    ax
        The Axes to draw on (default: the current one).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel
    >>> from perfmodel.plotting.flows import resource_loads
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8)
    >>> ax = resource_loads(perfmodel.handoff_flows(32_768, c, "llama-3.1-70b", tp=8, decode_tp=2))
    >>> ax.get_title()
    'handoff of 8 flows: 214.7 ms, bottleneck node1/nic0/in'
    """
    from ..flows import resource_loads as loads_of

    ax = _ax(ax)
    loads = loads_of(flows).sort_values("busy_ms")
    positions = np.arange(len(loads))
    bars = ax.barh(positions, loads["busy_ms"], color=["0.35" if b else "0.7" for b in loads["bottleneck"]],
                   hatch=None)
    for bar, neck in zip(bars, loads["bottleneck"]):
        if neck:
            bar.set_hatch("//")
    ax.set_yticks(positions, [f"{name} ({int(n)} flow{'s' if n != 1 else ''}, {cap:g} GB/s)"
                              for name, n, cap in zip(loads.index, loads["flows"], loads["capacity_gb_s"])],
                  fontsize="small")
    delay = flows.attrs["delay_ms"]
    ax.axvline(delay, color="0.2", linestyle="--", linewidth=0.8)
    ax.annotate("handoff ends", (delay, len(loads) - 0.5), fontsize="small", ha="right", va="bottom")
    ax.set_xlabel("busy time at capacity (ms): bytes carried / capacity")
    ax.set_title(f"handoff of {len(flows)} flows: {delay:.1f} ms, bottleneck {flows.attrs['bottleneck'] or 'none'}")
    ax.grid(True, axis="x", alpha=0.3)
    return ax
