"""matplotlib helpers for sweeps and replays: ``ax=None`` in, the Axes out, never ``plt.show()``.

No modelling here: the figures draw what :func:`perfmodel.sweep`,
:func:`perfmodel.required_bandwidth` and trace replays computed. Lines differ in style
and marker as well as colour, so the figures stay legible in greyscale. The figures of
sweeps are in :mod:`.sweep`, of replays in :mod:`.replay`, of replay grids in :mod:`.grid`,
of calibrations in :mod:`.calibration`, of a handoff's flows on a cluster in :mod:`.flows`, of replays on a cluster in :mod:`.cluster`, of TTFT under load in :mod:`.ttft`; what they share (ticks, styles, layouts) in :mod:`._style`.
"""

from .calibration import calibration
from .cluster import resource_utilisation, routing_cdf
from .flows import resource_loads
from .grid import grid_budget, grid_percentiles, replay_grid_figure
from .replay import compare, delay_cdf, link_timeline, replay_figure
from .sweep import delay_vs_tokens, delay_vs_tokens_figure, heatmap, heatmap_figure, required_bandwidth
from .ttft import memory_held, ttft_breakdown, ttft_vs_rate

__all__ = [
    "calibration",
    "compare",
    "delay_cdf",
    "delay_vs_tokens",
    "delay_vs_tokens_figure",
    "grid_budget",
    "grid_percentiles",
    "heatmap",
    "heatmap_figure",
    "link_timeline",
    "memory_held",
    "replay_figure",
    "replay_grid_figure",
    "required_bandwidth",
    "resource_loads",
    "resource_utilisation",
    "routing_cdf",
    "ttft_breakdown",
    "ttft_vs_rate",
]
