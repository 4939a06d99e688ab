"""The figure of a handoff on a cluster: each resource's load, and the bottleneck."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..inputs.words import count
from ._style import axes_or_current

#: Bars drawn at most (the heaviest loads; the bottleneck always among them).
MAX_BARS = 12


def _bars(loads: pd.DataFrame) -> tuple[list[tuple[str, float, bool]], int]:
    """The bars of a :func:`perfmodel.resource_loads` table, heaviest last: resources of one kind, direction,
    capacity and load as one bar with their count (the bottleneck alone on its own), the ``MAX_BARS``
    heaviest kept with the bottleneck; and how many resources are left out."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, row in loads.iterrows():
        key = (
            ("bottleneck", name)
            if row["bottleneck"]
            else (row["kind"], str(name).rsplit("/", 1)[-1], row["capacity_gb_s"], row["flows"], row["busy_ms"])
        )
        groups.setdefault(key, []).append(str(name))
    bars = []
    for key, names in groups.items():
        row = loads.loc[names[0]]
        n, cap = int(row["flows"]), row["capacity_gb_s"]
        flows = f"{n} flow{'s' if n != 1 else ''}{' each' if len(names) > 1 else ''}, {cap:g} GB/s"
        label = (
            f"{names[0]} ({flows})"
            if len(names) == 1
            else f"{len(names)} x {key[0]} {key[1]} like {names[0]} ({flows})"
        )
        bars.append((label, float(row["busy_ms"]), bool(row["bottleneck"]), len(names)))
    bars.sort(key=lambda bar: (bar[2], bar[1]), reverse=True)  # the bottleneck first, then by load
    kept = sorted(bars[:MAX_BARS], key=lambda bar: (bar[1], bar[2]))
    return [bar[:3] for bar in kept], sum(bar[3] for bar in bars[MAX_BARS:])


def resource_loads(flows: Any, ax: Axes | None = None) -> Axes:
    """Each resource's busy time at capacity (its bytes over its capacity, ms) as a horizontal bar, the
    handoff's bottleneck hatched and named, and the handoff's delay as a dashed line; from a table of
    :func:`perfmodel.handoff_flows` (which computes everything drawn here).

    Resources of one kind, direction, capacity and load share one bar, labelled with their count and
    one of their names (a TP8 handoff on 4 NICs per GPU crosses 64 alike); at most ``MAX_BARS`` bars
    are drawn, the heaviest, the bottleneck always among them, and the x label says how many
    resources were left out.

    Parameters
    ----------
    flows
        The result of :func:`perfmodel.handoff_flows`.
    ax
        The Axes to draw on (default: the current one).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt, perfmodel
    >>> from perfmodel.plotting.flows import resource_loads
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8)
    >>> ax = resource_loads(perfmodel.handoff_flows(32_768, c, "llama-3.1-70b", tp=8, decode_tp=2),
    ...                     ax=plt.subplots()[1])
    >>> ax.get_title()
    'handoff of 8 flows: 214.7 ms, bottleneck node1/nic0/in'
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['4 x nic out like node0/nic0/out (2 flows each, 50 GB/s)', 'node1/nic0/in (8 flows, 50 GB/s)']
    """
    from ..flows import resource_loads as loads_of

    ax = axes_or_current(ax)
    bars, left_out = _bars(loads_of(flows))
    positions = np.arange(len(bars))
    drawn = ax.barh(positions, [bar[1] for bar in bars], color=["0.35" if bar[2] else "0.7" for bar in bars])
    for patch, bar in zip(drawn, bars):
        if bar[2]:
            patch.set_hatch("//")
    ax.set_yticks(positions, [bar[0] for bar in bars], fontsize="small")
    delay = flows.attrs["delay_ms"]
    ax.axvline(delay, color="0.2", linestyle="--", linewidth=0.8)
    more = f"; {left_out} resource{'s' if left_out != 1 else ''} of lighter load not shown" if left_out else ""
    ax.set_xlabel(f"busy time at capacity (ms): bytes carried / capacity\n(dashed: the handoff ends{more})")
    ax.set_title(
        f"handoff of {count(len(flows), 'flow')}: {delay:.1f} ms, bottleneck {flows.attrs['bottleneck'] or 'none'}"
    )
    ax.grid(True, axis="x", alpha=0.3)
    return ax
