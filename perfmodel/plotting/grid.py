"""Figures of replay grids: percentiles across configurations, and which configurations meet a budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..errors import InputError
from ._style import add_colorbar, axes_or_current, check_budget, line_styles, plain_log_axis

_STATS = (
    "handoffs",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "mean_ms",
    "max_ms",
    "mean_queue_ms",
    "link_utilisation",
    "bytes_moved",
    "bytes_saved_by_prefix_reuse",
    "zero_delay_share",
    "busiest_resource",
    "busiest_utilisation",
)

#: The statistics of a TTFT grid (:func:`perfmodel.ttft_grid`: :func:`perfmodel.summarize_ttft`'s figures).
_TTFT_STATS = (
    "requests",
    *(
        f"{part}{figure}"
        for part in (
            "",
            "queue_",
            "prefill_",
            "admission_wait_",
            "link_wait_",
            "transfer_",
            "handoff_delay_",
            "decode_step_",
        )
        for figure in ("p50_ms", "p90_ms", "p99_ms", "mean_ms")
    ),
    "span_ms",
    "throughput_per_s",
    "prefill_busy",
    "prefill_memory_mean",
    "prefill_memory_peak",
    "decode_memory_mean",
    "decode_memory_peak",
    "dominant_p99_stage",
)


#: How a figure names a replay grid's columns (others: their name with spaces).
_LABELS = {
    "decode_workers": "decode workers",
    "decode_cache_blocks": "cache blocks per decode worker",
    "links": "links",
    "kv_transfer_bandwidth": "bandwidth (GB/s)",
    "kv_bytes_per_token": "KV bytes per token",
    "block_size": "block size (tokens)",
    "latency_ms": "latency (ms)",
    "per_block_ms": "per-block cost (ms)",
    "per_message_ms": "per-message cost (ms)",
    "kv_cache_dtype": "KV dtype",
    "tp": "TP",
}


def _label(column: str, ttft: bool = False) -> str:
    """A readable name of a grid column or statistic: of a replay grid ('p99_ms' -> 'p99 handoff delay (ms)'),
    or with ``ttft`` of a TTFT grid ('p99_ms' -> 'p99 TTFT (ms)', 'queue_p99_ms' -> 'queue p99 (ms)')."""
    if ttft and column in _TTFT_STATS:
        if column in ("p50_ms", "p90_ms", "p99_ms", "mean_ms"):  # (of the TTFT itself)
            return column.replace("_ms", " TTFT (ms)")
        return column.replace("_ms", " (ms)").replace("_", " ")
    if column in _STATS:
        return column.replace("_ms", " handoff delay (ms)") if column.endswith("_ms") else column.replace("_", " ")
    return _LABELS.get(column, column.replace("_", " "))


def made_by(df: pd.DataFrame) -> str | None:
    """The perfmodel function whose frame ``df`` looks like, by its columns: ``"ttft_grid"``,
    ``"replay_grid"``, ``"sweep"``, or None (a frame made by hand).

    >>> import pandas as pd
    >>> made_by(pd.DataFrame(columns=["link", "handoffs", "p99_ms"])), made_by(pd.DataFrame(columns=["p99_ms"]))
    ('replay_grid', None)
    """
    if "dominant_p99_stage" in df or {"requests", "handoff_delay_p99_ms"} <= set(df.columns):
        return "ttft_grid"
    if "handoffs" in df:
        return "replay_grid"
    return "sweep" if "handoff_delay_ms" in df and "p99_ms" not in df else None


def check_grid(df: pd.DataFrame, where: str, stat: str, axes: Sequence[str] = ()) -> None:
    """Refuse (:class:`InputError`) a frame a grid figure cannot draw, naming the function that made it:
    a sweep's (one delay per row, no percentiles), one without rows, or one without the column ``stat``
    or the configuration columns ``axes``."""
    origin = made_by(df)
    if origin == "sweep":
        raise InputError(
            where,
            "the frame is from perfmodel.sweep (one handoff delay per configuration, no percentiles)",
            "draw it with perfmodel.plotting.delay_vs_tokens or heatmap, or pass a perfmodel.replay_grid(...) result",
        )
    made = f"perfmodel.{origin or 'replay_grid'}(...)"
    if not len(df):
        raise InputError(where, "the frame has no rows, so there is nothing to draw", f"pass a {made} result with rows")
    if stat not in df.columns:
        stats = [c for c in df.columns if c in (_TTFT_STATS if origin == "ttft_grid" else _STATS)]
        raise InputError(
            where,
            f"the frame has no column {stat!r}"
            + (f" ({made} gives {', '.join(stats)})" if origin else f"; its columns: {list(df.columns)}"),
            "pass stat= one of them" if origin else f"pass a {made} result",
        )
    missing = [c for c in axes if c not in df.columns]
    if missing:
        raise InputError(
            where,
            f"the frame has no column {missing[0]!r}; its configuration columns: {_grid_axes(df, every=True)}",
            "name one of them",
        )


def refuse_other_axes(df: pd.DataFrame, drawn: list[str], where: str, choose: str = "") -> None:
    """Refuse (:class:`InputError`) a grid whose configuration columns other than ``drawn`` vary: a line
    through its rows would join configurations that differ in a column the figure does not show. ``choose``
    names the argument that could draw one of them instead (e.g. ``"by"``), when it is not given."""
    rest = [c for c in _grid_axes(df) if c not in drawn]
    if not rest:
        return
    pick = rest[1] if choose and len(rest) > 1 else rest[0]
    select = f"one value of each, e.g. df[df[{pick!r}] == {df[pick].iloc[0]!r}]"
    if choose:
        also = f", and select {select.replace('each', 'the others')}" if len(rest) > 1 else f", or select {select}"
        fix = f"pass {choose}={rest[0]!r} for a line per value" + also
    else:
        fix = f"select {select}"
    raise InputError(
        where, f"the columns {rest} vary too, so one line would join configurations that differ in them", fix
    )


def shared_norm(values: np.ndarray) -> Normalize | None:
    """One colour scale for ``values`` (of one panel, or of every panel of a figure): log from the least to
    the largest when the finite ones are all > 0 and not all equal; else linear over them (None: none finite).

    >>> norm = shared_norm(np.array([82.0, 443.0, np.nan]))
    >>> type(norm).__name__, norm.vmin, norm.vmax
    ('LogNorm', 82.0, 443.0)
    >>> type(shared_norm(np.array([0.0, 80.0]))).__name__
    'Normalize'
    """
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    low, high = float(finite.min()), float(finite.max())
    return LogNorm(vmin=low, vmax=high) if 0 < low < high else Normalize(vmin=low, vmax=high)


def _configuration(df: pd.DataFrame) -> str:
    """What every configuration of a replay grid shares (its one-value columns), in words.

    >>> import pandas as pd
    >>> _configuration(pd.DataFrame({"model": ["llama-3.1-70b"] * 2, "contention": ["fair"] * 2,
    ...                             "decode_workers": [4, 8], "p99_ms": [1.0, 2.0]}))
    'llama-3.1-70b, contention fair'
    """
    fixed = [c for c in df.columns if c not in (*_STATS, *_TTFT_STATS) and df[c].nunique(dropna=False) == 1]
    return ", ".join(
        str(df[c].iloc[0]) if c in ("model", "link", "mode") else f"{_label(c)} {df[c].iloc[0]}" for c in fixed
    )


def _grid_axes(df: pd.DataFrame, every: bool = False) -> list[str]:
    """The configuration columns of a replay or TTFT grid that vary (with ``every``: all of them): numeric
    ones (sizes: the natural x axis) first, then labels, each in the grid's order."""
    varying = [c for c in df.columns if c not in (*_STATS, *_TTFT_STATS) and (every or df[c].nunique(dropna=False) > 1)]
    numeric = [c for c in varying if pd.api.types.is_numeric_dtype(df[c])]
    return numeric + [c for c in varying if c not in numeric]


def grid_percentiles(
    df: pd.DataFrame,
    x: str | None = None,
    hue: str | None = None,
    *,
    stat: str = "p99_ms",
    budget_ms: float | None = None,
    legend: bool = True,
    ax: Axes | None = None,
    **kwargs: Any,
) -> Axes:
    """A replay grid's statistic (default the p99 handoff delay) against one configuration axis,
    one line per value of another, with the budget marked.

    Parameters
    ----------
    df
        From :func:`perfmodel.replay_grid` (or :func:`perfmodel.ttft_grid`: its ``p99_ms`` is the p99 TTFT).
    x, hue
        Configuration columns (default: the first two that vary); every other varying
        column must be narrowed to one value first (the error names them).
    stat
        A summary column (``p50_ms``, ``p90_ms``, ``p99_ms``, ``mean_ms``, ...).
    budget_ms
        A horizontal line at the budget (a finite number > 0).
    legend
        Whether to draw the legend.
    ax
        Where to draw (default: the current Axes).
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot`.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.replay_grid(perfmodel.synthetic_trace(800, 30, seed=0), model="llama-3.1-70b",
    ...                              link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 2, 4], contention="fifo")
    >>> ax = pp.grid_percentiles(grid, budget_ms=100, ax=plt.subplots()[1])
    >>> ax.get_xlabel(), [line.get_label() for line in ax.get_lines()][:2]
    ('decode workers', ['ib-ndr', '8x ib-ndr'])
    """
    ax = axes_or_current(ax)
    budget_ms = None if budget_ms is None else check_budget("grid_percentiles", budget_ms)
    check_grid(df, "grid_percentiles", stat)
    varying = _grid_axes(df)
    x = x or (varying[0] if varying else None)
    if x is None:
        raise InputError("grid_percentiles", "no configuration axis varies", "pass a grid with a list on some axis")
    if hue is None:
        others = [c for c in varying if c != x]
        hue = others[0] if others else None
    check_grid(df, "grid_percentiles", stat, [x] + ([hue] if hue else []))
    refuse_other_axes(df, [x] + ([hue] if hue else []), "grid_percentiles")
    ttft = made_by(df) == "ttft_grid"
    groups = df.groupby(hue, sort=False, observed=True) if hue else [(None, df)]
    # (numbers on a numeric axis where every value is finite: blocks_per_message's inf is a label, in order)
    numeric = pd.api.types.is_numeric_dtype(df[x]) and bool(np.isfinite(df[x].to_numpy(dtype=float)).all())
    for (key, part), style in zip(groups, line_styles()):
        part = part.sort_values(x)
        ax.plot(
            part[x] if numeric else part[x].map(lambda v: f"{v:g}" if isinstance(v, float) else str(v)),
            part[stat],
            label=None if key is None else str(key),
            **{**style, **kwargs},
        )
    if budget_ms is not None:
        ax.axhline(budget_ms, color="0.4", linewidth=0.8, linestyle=":")
        ax.annotate(
            f"{budget_ms:g} ms\nbudget",
            (1.0, budget_ms),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize="small",
            color="0.3",
            annotation_clip=False,
        )  # beside the axes, never on the data
    if numeric and df[x].min() > 0 and df[x].max() / df[x].min() >= 4:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xticks(sorted(df[x].unique()))
    elif numeric and pd.api.types.is_integer_dtype(df[x]) and df[x].nunique() <= 12:  # whole values: the ticks
        ax.set_xticks(sorted(df[x].unique()))
    elif numeric and pd.api.types.is_integer_dtype(df[x]):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if stat.endswith("_ms"):
        ax.set_yscale("log")
        plain_log_axis(ax.yaxis)
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(stat, ttft))
    ax.grid(True, alpha=0.3)
    if legend and hue:
        ax.legend(title=_label(hue), fontsize="small")
    return ax


def grid_budget(
    df: pd.DataFrame,
    x: str | None = None,
    y: str | None = None,
    *,
    stat: str = "p99_ms",
    budget_ms: float,
    norm: Normalize | None = None,
    colorbar: bool = True,
    ax: Axes | None = None,
    **kwargs: Any,
) -> Axes:
    """Which configurations meet the budget: a replay grid's statistic over two configuration axes,
    each cell labelled with its value, the cells within budget outlined and ticked.

    Every other varying column must be narrowed to one value first (the error names them).

    Parameters
    ----------
    df : pandas.DataFrame
        From :func:`perfmodel.replay_grid` (or :func:`perfmodel.ttft_grid`).
    x, y : str, optional
        Configuration columns (default: the first two that vary).
    stat : str
        A summary column.
    budget_ms : float
        The budget the cells are checked against (a finite number > 0).
    norm : matplotlib.colors.Normalize, optional
        The colour scale, e.g. one shared by several panels so that a colour means one value in all of
        them (default: log over this grid's values when they are all > 0 and differ, else linear).
    colorbar : bool
        Whether to draw a colour bar beside the axes (False when one bar serves several panels).
    ax : matplotlib.axes.Axes, optional
        Where to draw.
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.imshow`.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.replay_grid(perfmodel.synthetic_trace(800, 30, seed=0), model="llama-3.1-70b",
    ...                              link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 2, 4], contention="fifo")
    >>> ax = pp.grid_budget(grid, budget_ms=100, ax=plt.subplots()[1])
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('decode workers', 'link')
    """
    ax = axes_or_current(ax)
    budget_ms = check_budget("grid_budget", budget_ms)
    check_grid(df, "grid_budget", stat)
    varying = _grid_axes(df)
    x = x or (varying[0] if varying else None)
    y = y or next((c for c in varying if c != x), None)
    if x is None or y is None:
        raise InputError(
            "grid_budget",
            f"needs two configuration columns that vary, and only {varying} vary",
            "pass a grid with a list on two axes, or draw this one with grid_percentiles",
        )
    check_grid(df, "grid_budget", stat, [x, y])
    refuse_other_axes(df, [x, y], "grid_budget")
    table = df.pivot_table(index=y, columns=x, values=stat, aggfunc="first", observed=True, sort=False)
    values = table.to_numpy(float)
    norm = norm if norm is not None else shared_norm(values)
    mesh = ax.imshow(values, norm=norm, **{"cmap": "viridis", "aspect": "auto", **kwargs})
    if colorbar:
        add_colorbar(ax.figure, mesh, ax=ax, label=_label(stat, made_by(df) == "ttft_grid"))
    for (row, column), value in np.ndenumerate(values):
        met = value <= budget_ms
        ax.text(
            column,
            row,
            f"{value:.3g}" + (" ✓" if met else ""),
            ha="center",
            va="center",
            fontsize="small",
            color="white" if norm is None or norm(value) < 0.6 else "black",
            fontweight="bold" if met else "normal",
        )
        if met:
            ax.add_patch(plt.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=2))
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns])
    ax.set_yticks(range(len(table.index)), [str(i) for i in table.index])
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    met = int(np.count_nonzero(values <= budget_ms))
    ax.set_title(
        f"✓ within {budget_ms:g} ms: {met} of {values.size}" if met else f"none within {budget_ms:g} ms",
        fontsize="medium",
    )
    return ax


def replay_grid_figure(df: pd.DataFrame, *, budget_ms: float, stat: str = "p99_ms") -> Any:
    """A replay grid at a glance: the statistic against the first varying axis (a line per value of
    the second), and which configurations meet the budget. Other varying axes: one row of panels each.

    Every budget panel shares one colour scale (log over the figure's values when they are all > 0 and
    differ, else linear) and one colour bar, so that a colour means the same value in each row.

    Parameters
    ----------
    df : pandas.DataFrame
        From :func:`perfmodel.replay_grid`.
    budget_ms : float
        The budget (a finite number > 0).
    stat : str
        A summary column (default the p99 handoff delay).

    Returns
    -------
    matplotlib.figure.Figure
        A new figure (close it with ``matplotlib.pyplot.close`` when done).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.replay_grid(perfmodel.synthetic_trace(500, 30, seed=0), model="llama-3.1-70b",
    ...                              link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 2], contention="fifo")
    >>> len(pp.replay_grid_figure(grid, budget_ms=100).axes)  # two panels and a colour bar
    3
    """
    budget_ms = check_budget("replay_grid_figure", budget_ms)
    check_grid(df, "replay_grid_figure", stat)
    varying = _grid_axes(df)
    if not varying:
        raise InputError("replay_grid_figure", "no configuration axis varies", "give a list on some axis")
    x, hue = varying[0], (varying[1] if len(varying) > 1 else None)
    rest = varying[2:]
    keys = list(df[rest].drop_duplicates().itertuples(index=False, name=None)) if rest else [()]
    if len(keys) > 8:
        raise InputError(
            "replay_grid_figure",
            f"{len(keys)} rows of panels ({' x '.join(rest)}) are too many for one figure",  # (never one)
            "give fewer values, or plot parts of the grid with grid_percentiles and grid_budget",
        )
    fig, axs = plt.subplots(
        len(keys), 2 if hue else 1, figsize=(12 if hue else 6, 4.2 * len(keys)), squeeze=False, layout="constrained"
    )
    ttft = made_by(df) == "ttft_grid"
    norm = shared_norm(df[stat].to_numpy(float))  # (one scale for every budget panel)
    for row, key in zip(axs, keys):
        part = df.loc[np.logical_and.reduce([df[c] == v for c, v in zip(rest, key)])] if rest else df
        grid_percentiles(part, x, hue, stat=stat, budget_ms=budget_ms, ax=row[0])
        if key:
            row[0].set_title(", ".join(f"{c}={v}" for c, v in zip(rest, key)), fontsize="medium")
        if hue:
            grid_budget(part, x, hue, stat=stat, budget_ms=budget_ms, norm=norm, colorbar=False, ax=row[1])
    if hue:
        label = _label(stat, ttft) + (", one scale for every panel" if len(keys) > 1 else "")
        add_colorbar(fig, axs[0, 1].images[0], ax=list(axs[:, 1]), label=label)
    shared = _configuration(df)
    fig.suptitle(f"{_label(stat)} over the replay grid" + (f": {shared}" if shared else ""), fontsize="medium")
    return fig
