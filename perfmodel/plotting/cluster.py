"""Figures of replays on a cluster: each resource's utilisation over time, and delay CDFs by routing policy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..errors import InputError, check_whole
from ._style import axes_or_current, line_styles
from .replay import delay_cdf


def resource_utilisation(replay: pd.DataFrame, *, top: int = 6, ax: Axes | None = None) -> Axes:
    """Utilisation over time of the busiest resources of a replay on a cluster.

    Each line is a resource's mean utilisation (its flows' rates over its capacity) in each of the
    replay's time bins (200 over the ready times, of 1 ms at least; more where handoffs end later);
    1 is saturated.

    Parameters
    ----------
    replay
        A result of :func:`perfmodel.replay_handoffs` on a cluster with ``contention="fair"``.
    top
        How many resources to draw (a whole number >= 1): those of the highest mean utilisation.
    ax
        Axes to draw on (default: the current ones).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import perfmodel
    >>> from perfmodel.plotting.cluster import resource_utilisation
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    >>> r = perfmodel.replay_handoffs(perfmodel.synthetic_trace(200, 20, seed=0), c, 1000.0, contention="fair")
    >>> resource_utilisation(r).get_ylabel()
    'utilisation (load / capacity)'
    """
    top = check_whole("top", top, smallest=1)
    found = replay.attrs.get("utilisation")
    if not found and replay.attrs.get("cluster") is not None and replay.attrs.get("contention") == "fair":
        raise InputError("resource_utilisation", "the replay has no handoffs to draw", "replay a trace of requests")
    if not found:
        raise ValueError(
            "plot needs a replay on a cluster with contention='fair' (attrs['utilisation']). "
            "Fix: replay with a perfmodel.Cluster as the link and contention='fair'"
        )
    ax = axes_or_current(ax)
    series = found["series"]
    ranked = sorted(series, key=lambda name: -float(np.mean(series[name])))[:top]
    for name, style in zip(ranked, line_styles()):
        values = np.asarray(series[name])
        times = found["start_ms"] + (np.arange(values.size) + 0.5) * found["bin_ms"]
        ax.plot(times / 1000.0, values, label=name, **{**style, "markersize": 0})
    ax.axhline(1.0, color="0.5", linewidth=0.8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("utilisation (load / capacity)")
    ax.set_title(f"busiest resources of {replay.attrs.get('cluster', 'the cluster')}")
    ax.legend(fontsize="small")
    return ax


def routing_cdf(data: Any, *, by: str = "routing", ax: Axes | None = None) -> Axes:
    """Delay CDFs, one per routing policy (or another column ``by``).

    Parameters
    ----------
    data
        The requests of :func:`perfmodel.replay_grid` (``keep="requests"``) with a ``routing``
        column, or a mapping policy -> replay.
    by
        The column whose values each get a curve.
    ax
        Axes to draw on (default: the current ones).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import perfmodel
    >>> from perfmodel.plotting.cluster import routing_cdf
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)
    >>> t = perfmodel.synthetic_trace(100, 20, seed=0)
    >>> runs = {r: perfmodel.replay_handoffs(t, c, "llama-3.1-8b", decode_workers=2, routing=r, contention="fair")
    ...         for r in ("round_robin", "least_loaded")}
    >>> len(routing_cdf(runs).get_lines()) >= 2
    True
    """
    if isinstance(data, pd.DataFrame):
        if by not in data.columns:
            raise ValueError(
                f"plot needs a column {by!r}; the frame has {list(data.columns)}. "
                "Fix: pass replay_grid(..., routing=[...], keep='requests')[1]"
            )
        data = {str(k): part for k, part in data.groupby(by, observed=True, sort=False)}
    ax = delay_cdf(data, ax=ax)
    ax.set_title(f"handoff delay by {by}")
    return ax
