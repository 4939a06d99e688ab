"""Figures of sweeps: delay against prompt length, delay over bandwidth and prompt length with budget
contours, and the bandwidth a budget requires.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import cycle
from typing import Any, cast

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import FuncFormatter, NullFormatter

from ..errors import InputError
from ..network.links import DEFAULT_LINKS, LINKS, Link, get_link
from ._style import (
    AXIS_LABELS,
    MARGINS,
    STYLES,
    UNDRAWN_DELAYS,
    add_colorbar,
    axes_or_current,
    budget_colorbar,
    check_budgets,
    default_hue,
    describe_value,
    fixed_positions,
    grid,
    has_rows,
    label_of,
    line_label,
    line_styles,
    log_line,
    log_log,
    one_row_per,
    panels,
    plain_log_axis,
    require,
    say_not_drawn,
    si,
    side,
    suptitle,
    text_width_in,
    tokens,
    tokens_axis,
)


def delay_vs_tokens(
    df: pd.DataFrame,
    hue: str | None = None,
    *,
    x: str = "num_input_tokens",
    budgets_ms: float | Sequence[float] = (),
    legend: bool = True,
    ax: Axes | None = None,
    **kwargs: Any,
) -> Axes:
    """Handoff delay against prompt length, log-log, one line per value of ``hue``.

    Series that coincide (e.g. two links of the same bandwidth) are drawn once, with
    both names in the legend ("ib-ndr = roce-400g"), so no line hides another.
    A line whose delays a log axis cannot show (NaN, infinite, 0 ms) is not drawn and not in the
    legend, and a warning names it (as it names lines drawn with such points left out); a frame with
    no line to draw is an error.

    Parameters
    ----------
    df
        A sweep frame (``num_input_tokens`` and ``handoff_delay_ms`` columns).
    hue
        The column that tells the lines apart (e.g. ``"link"``, ``"model"``,
        ``"kv_transfer_bandwidth"``). Default: the one column that varies besides ``x``
        (an error names them when several do); one line when none does.
    x
        The x column (default prompt length in tokens).
    budgets_ms
        Horizontal reference lines (latency budgets, ms): one number or several, each finite and > 0.
    legend
        Draw a legend (figure-level layouts draw one for all panels instead).
    ax
        Axes to draw on (default: the current Axes).
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot` (e.g. ``linewidth``, ``alpha``); ``label`` names the
        line when there is one (no ``hue``).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> import perfmodel, perfmodel.plotting as pp
    >>> df = perfmodel.sweep(num_input_tokens=[1024, 8192, 32768], kv_transfer_bandwidth=[12.5, 50, 450],
    ...                      kv_bytes_per_token=131072)
    >>> ax = pp.delay_vs_tokens(df, budgets_ms=[50], ax=ax)   # hue: the one varying axis
    >>> [line.get_label() for line in ax.get_lines()][:3]
    ['12.5 GB/s', '50 GB/s', '450 GB/s']
    """
    ax = axes_or_current(ax)
    budgets = check_budgets("delay_vs_tokens", budgets_ms)
    hue, drawn, skipped, partly = _delay_lines(df, hue, x, ax, dict(kwargs), "delay_vs_tokens")
    say_not_drawn("delay_vs_tokens", skipped, partly, drawn)
    _budget_lines(ax, budgets)
    log_log(ax, x, AXIS_LABELS["handoff_delay_ms"], legend_title=hue, legend=legend and bool(hue))
    return ax


def _delay_lines(
    df: pd.DataFrame, hue: str | None, x: str, ax: Axes, kwargs: dict[str, Any], where: str
) -> tuple[str | None, int, list[str], list[str]]:
    """Draw one line per value of ``hue``: the hue used, how many lines were drawn, the lines not drawn and
    those drawn with points left out (each named, with why)."""
    has_rows(df, where)
    require(df, [x, "handoff_delay_ms"] + ([hue] if hue else []), where)
    if hue is None:
        hue = default_hue(df, x)
    one_line = line_label(where, kwargs, hue)
    one_row_per(df, [x] + ([hue] if hue else []), where)
    groups = df.groupby(hue, sort=False, observed=True) if hue else [(None, df)]
    drawn: list[tuple[Any, np.ndarray, np.ndarray]] = []  # (line, x, y) of the series drawn so far
    skipped, partly = [], []
    styles = line_styles()
    for key, part in groups:
        part = part.sort_values(x)
        xs, ys = part[x].to_numpy(float), part["handoff_delay_ms"].to_numpy(float, na_value=np.nan)
        label = label_of(hue, key) if hue else one_line
        same = next(
            (line for line, x0, y0 in drawn if np.array_equal(x0, xs) and np.array_equal(y0, ys, equal_nan=True)), None
        )
        if same is not None:  # coincides with a line already drawn: one line, both names (a line each)
            same.set_label(f"{same.get_label()}\n= {label}")
            continue
        line, left_out = log_line(ax, xs, ys, label, {**next(styles), **kwargs}, UNDRAWN_DELAYS)
        if line is None:
            skipped.append(left_out)
            continue
        partly += [left_out] if left_out else []
        drawn.append((line, xs, ys))
    return hue, len(drawn), skipped, partly


def _budget_lines(ax: Axes, budgets: Sequence[float]) -> None:
    """Budgets as dotted lines across, each labelled at the left, above its line (delays grow with x, so no
    data is there)."""
    for budget in budgets:
        ax.axhline(budget, color="0.4", linewidth=0.8, linestyle=":")
        ax.annotate(
            f"{budget:g} ms budget",
            (0.01, budget),
            xycoords=("axes fraction", "data"),
            ha="left",
            va="bottom",
            fontsize="small",
            color="0.3",
        )


def _mark_links(ax: Axes, links: Sequence[Link | str], *, names: bool) -> None:
    """Links at their bandwidth on a bandwidth y axis: a dotted line across, the names (those at one
    bandwidth together) on the right-hand axis when ``names``."""
    low, high = sorted(ax.get_ylim())
    at = {bandwidth: name for bandwidth, name in _link_names(links).items() if low <= bandwidth <= high}
    for bandwidth in at:
        ax.axhline(bandwidth, color="white", linewidth=0.7, linestyle=(0, (1, 2)), alpha=0.9)
    if names and at:  # beside the axes, at the lines' heights, moved apart where they would touch
        heights = sorted((ax.transAxes.inverted().transform(ax.transData.transform((1.0, b)))[1], b) for b in at)
        size = FontProperties(size="small").get_size_in_points()
        height_pt = max(ax.get_position().height * cast(Figure, ax.figure).get_figheight() * 72, 1.0)
        placed = _apart([y for y, _ in heights], 1.2 * size / height_pt)  # (the gap in axes fraction)
        for (y, bandwidth), where in zip(heights, placed):  # (a text each: a secondary axis costs 25 ms a panel)
            ax.annotate(
                at[bandwidth],
                (1, bandwidth),
                xycoords=ax.get_yaxis_transform(),
                xytext=(4, (where - y) * height_pt),
                textcoords="offset points",
                va="center",
                fontsize="small",
                annotation_clip=False,
            )


def _apart(positions: Sequence[float], gap: float) -> list[float]:
    """Increasing ``positions`` moved as little as needed to be ``gap`` apart, within [0, 1] where they fit.

    >>> [round(v, 2) for v in _apart([0.5, 0.52, 0.53, 0.9], 0.05)]
    [0.5, 0.55, 0.6, 0.9]
    >>> [round(v, 2) for v in _apart([0.9, 0.97, 1.0], 0.05)]
    [0.9, 0.95, 1.0]
    """
    placed = list(positions)
    for _ in range(len(placed)):  # push up, then down from the top, until nothing moves
        before = list(placed)
        for k in range(1, len(placed)):
            placed[k] = max(placed[k], placed[k - 1] + gap)
        placed[-1] = min(placed[-1], max(1.0, positions[-1]))
        for k in range(len(placed) - 2, -1, -1):
            placed[k] = min(placed[k], placed[k + 1] - gap)
        if placed == before:
            break
    return placed


def _link_names(links: Sequence[Link | str]) -> dict[float, str]:
    """Each bandwidth among ``links`` and the names of the links at it (``"ib-ndr = roce-400g"``)."""
    at: dict[float, list[str]] = {}
    for link in map(get_link, links):
        at.setdefault(link.effective_bandwidth_gb_s, []).append(link.name)
    return {bandwidth: " = ".join(names) for bandwidth, names in at.items()}


def _edges(values: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around sorted cell centres: midpoints, geometric on a log axis (cells look even)."""
    if values.size == 1:
        return values * np.array([0.5, 2.0]) if log else values + np.array([-0.5, 0.5])
    inner = np.sqrt(values[:-1] * values[1:]) if log else (values[:-1] + values[1:]) / 2
    first = values[0] ** 2 / inner[0] if log else 2 * values[0] - inner[0]
    last = values[-1] ** 2 / inner[-1] if log else 2 * values[-1] - inner[-1]
    return np.concatenate([[first], inner, [last]])


#: Columns of a sweep that are its answers or follow from another column (never an input of the question).
_ANSWERS = ("transfer_bytes", "handoff_delay_ms")


def _question(df: pd.DataFrame, x: str, y: str) -> tuple[Any, dict[str, Any]] | None:
    """The bytes per token (a model or a number) and every other input the frame's rows share, for
    :func:`perfmodel.required_bandwidth`: None unless the grid is prompt length x bandwidth and every other
    column holds one value (a column varying with the cells, e.g. a link's latency, leaves no one question)."""
    if (x, y) != ("num_input_tokens", "kv_transfer_bandwidth"):
        return None
    inputs: dict[str, Any] = {}
    for column in df.columns:
        if column in (x, y, *_ANSWERS) or (column == "kv_bytes_per_token" and "model" in df):
            continue
        if df[column].nunique(dropna=False) != 1:
            return None
        inputs[column] = df[column].iloc[0]
    if inputs.get("mode") == "full_prompt":  # (the inverse question's only mode, not one of its inputs)
        del inputs["mode"]
    per_token = inputs.pop("model", inputs.pop("kv_bytes_per_token", None))
    return None if per_token is None or "link" in inputs or "cluster" in inputs else (per_token, inputs)


def _exact_budget_curve(
    df: pd.DataFrame, x: str, y: str, budget: float, xs: np.ndarray, ys: np.ndarray, z: np.ndarray
) -> tuple | None:
    """The budget's contour from the model itself: :func:`perfmodel.required_bandwidth` over prompt length,
    asked with every input the frame's rows hold (model, connector, latency, per-block and per-message
    costs...), and only if it agrees with every cell; None where the frame holds no one such question (or
    one the inverse does not answer, e.g. a destination-missing sweep). Its points are whole prompt lengths,
    the swept ones among them, each answer settled on the forward model (where streaming layer by layer,
    say, the bandwidth needed does not grow with the prompt, the line drawn between them is theirs)."""
    from ..sweeps import required_bandwidth

    question = _question(df, x, y)
    if question is None:
        return None
    per_token, inputs = question
    dense = np.unique(np.concatenate([np.round(np.geomspace(max(xs.min(), 1), xs.max(), 400)), xs[xs >= 1]]))
    try:
        needed = required_bandwidth(xs, per_token, budget_ms=budget, **inputs)
        curve = required_bandwidth(dense, per_token, budget_ms=budget, **inputs)
    except InputError:
        return None
    known = np.isfinite(z)
    if ((z <= budget) != (ys[:, None] >= needed[None, :]))[known].any():  # (a frame edited by hand, say)
        return None
    return dense, curve


def _grid_values(df: pd.DataFrame, x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The heatmap's cell centres on x and y and its delays (rows: y), or InputError where they cannot be drawn."""
    has_rows(df, "heatmap")
    for column in (x, y):
        values = df[column]
        if not pd.api.types.is_numeric_dtype(values) or not np.isfinite(values.to_numpy(float)).all():
            raise InputError(
                "heatmap",
                f"the {column!r} values are not finite numbers (first: {values.iloc[0]!r}), so no cell can sit at them",
                f"pass a grid of finite numbers, e.g. df[np.isfinite(df[{column!r}])]",
            )
    grid = df.pivot_table(index=y, columns=x, values="handoff_delay_ms", aggfunc="first", observed=True, dropna=False)
    z = grid.to_numpy(float)
    if not (np.isfinite(z) & (z > 0)).any():
        raise InputError(
            "heatmap", "no delay is a finite number > 0, so there is nothing to colour", "pass a sweep with delays"
        )
    return grid.columns.to_numpy(float), grid.index.to_numpy(float), z


#: What a heatmap's colour bar says when a budget's contour is interpolated between cells.
_INTERPOLATED = "; budget contours interpolated"


def heatmap(
    df: pd.DataFrame,
    x: str = "num_input_tokens",
    y: str = "kv_transfer_bandwidth",
    *,
    budgets_ms: float | Sequence[float] = (10, 50, 100),
    links: Sequence[Link | str] = (),
    colorbar: bool = True,
    ax: Axes | None = None,
    **kwargs: Any,
) -> Axes:
    """Handoff delay over a 2-D grid, log colour scale, with the budgets' contours and the links marked.

    Each cell is centred on a swept value (cell edges halfway between neighbours,
    geometrically on a log axis); with a dozen values or fewer, the ticks are the swept
    values themselves. On a prompt length x bandwidth grid of a full-prompt sweep, the
    budget contours are the model's own answer (:func:`perfmodel.required_bandwidth`, asked
    with every input the frame's rows hold: model, connector, latency, per-block and
    per-message costs..., at whole prompt lengths between and at the swept ones, exact, not
    interpolated between cells), each a line labelled ``"50 ms budget"``. Where the frame holds no such one question (other grids, a
    destination-missing sweep, a link or cluster column, a column varying with the cells)
    they are interpolated between cells: each contour is labelled ``"50 ms budget
    (interpolated between cells)"`` and the colour bar's label says so.

    Parameters
    ----------
    df
        A sweep frame with exactly one row per (``x``, ``y``) pair.
    x, y
        The grid's columns (default prompt length and bandwidth, log-scaled when they
        span more than 20x).
    budgets_ms
        Delays (ms) at which contour lines are drawn, one number or several, each finite and > 0;
        the colour bar marks each with its line style (labels beside the data, never on it).
    links
        Links (names or :class:`perfmodel.Link`) marked at their bandwidth on a bandwidth
        ``y`` axis: a dotted line across, the name on the right-hand axis.
    colorbar
        Draw a colour bar (figure-level layouts draw one shared bar instead).
    ax
        Axes to draw on (default: the current Axes).
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.pcolormesh` (e.g. ``cmap``, ``norm``).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> import numpy as np, perfmodel, perfmodel.plotting as pp
    >>> df = perfmodel.sweep(model="llama-3.1-8b", kv_transfer_bandwidth=np.geomspace(10, 900, 20),
    ...                      num_input_tokens=2 ** np.arange(7, 18))
    >>> ax = pp.heatmap(df, ax=ax)
    >>> ax.get_xlabel()
    'prompt length (tokens)'
    """
    ax = axes_or_current(ax)
    budgets = check_budgets("heatmap", budgets_ms)
    require(df, [x, y, "handoff_delay_ms"], "heatmap")
    one_row_per(df, [x, y], "heatmap")
    xs, ys, z = _grid_values(df, x, y)
    positive = z[np.isfinite(z) & (z > 0)]
    norm = LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size else None
    logs = {}
    for axis_name, column, values in (("x", x, xs), ("y", y, ys)):  # scales first: labels are placed in display space
        logs[axis_name] = bool(values.min() > 0 and values.max() / values.min() > 20)
        if logs[axis_name]:
            getattr(ax, f"set_{axis_name}scale")("log", base=2 if column == "num_input_tokens" else 10)
            if column != "num_input_tokens":
                plain_log_axis(getattr(ax, f"{axis_name}axis"))
        if column == "num_input_tokens":
            tokens_axis(getattr(ax, f"{axis_name}axis"))
        if values.size <= 12:  # the swept values are the ticks
            getattr(ax, f"set_{axis_name}ticks")(values)
            getattr(ax, f"{axis_name}axis").set_minor_formatter(NullFormatter())
            getattr(ax, f"{axis_name}axis").set_major_formatter(
                FuncFormatter(tokens if column == "num_input_tokens" else si)
            )
    mesh = ax.pcolormesh(_edges(xs, logs["x"]), _edges(ys, logs["y"]), z, **{"norm": norm, "cmap": "viridis", **kwargs})
    levels = [b for b in sorted(budgets) if positive.min() < b < positive.max()]
    interpolated = False
    for budget, style in zip(levels, cycle(STYLES)):
        curve = _exact_budget_curve(df, x, y, budget, xs, ys, z)
        if curve is not None:
            ax.plot(*curve, color="white", linewidth=1.3, linestyle=style, label=f"{budget:g} ms budget")
        elif len(xs) > 1 and len(ys) > 1:
            contour = ax.contour(
                xs, ys, np.ma.masked_invalid(z), levels=[budget], colors="white", linewidths=1.2, linestyles=style
            )
            contour.set_label(f"{budget:g} ms budget (interpolated between cells)")
            interpolated = True
    ax.set_xlim(*_edges(xs, logs["x"])[[0, -1]])
    ax.set_ylim(*_edges(ys, logs["y"])[[0, -1]])
    if links and y == "kv_transfer_bandwidth":
        _mark_links(ax, links, names=True)
    if colorbar:
        label = AXIS_LABELS["handoff_delay_ms"] + (_INTERPOLATED if interpolated else "")
        budget_colorbar(add_colorbar(ax.figure, mesh, ax=ax, label=label), levels)
    ax.set_xlabel(AXIS_LABELS.get(x, x))
    ax.set_ylabel(AXIS_LABELS.get(y, y))
    return ax


#: How a required bandwidth that a log axis cannot show is named.
_NEEDED = {"nan": "unknown (NaN)", "inf": "no bandwidth meets it", "low": "0 GB/s needed"}


def required_bandwidth(
    num_input_tokens: Sequence[int],
    kv_bytes_per_token: Any,
    budgets_ms: float | Sequence[float] = (10, 50, 100),
    *,
    latency_ms: float = 0.0,
    links: Iterable[Link | str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Bandwidth needed to stay within each budget, against prompt length, with link presets marked.

    Parameters
    ----------
    num_input_tokens
        Prompt lengths to draw (tokens).
    kv_bytes_per_token
        Bytes per token, or a model preset name or config; or a list of these: one line per model
        and budget, each labelled ``"<model>: <budget> ms budget"``.
    budgets_ms
        One line per latency budget (ms): one number or several, each finite and > 0. A budget no
        bandwidth meets (within the latency) is not drawn and not in the legend; a warning names it.
    latency_ms
        Per-transfer latency included in the requirement (ms).
    links
        Links drawn as horizontal reference lines (default: the sweep's, :data:`perfmodel.network.links.DEFAULT_LINKS`).
    ax
        Axes to draw on (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> import perfmodel.plotting as pp
    >>> ax = pp.required_bandwidth([1024, 8192, 131072], "llama-3.1-70b", budgets_ms=[50], ax=ax)
    >>> ax.get_lines()[0].get_label()
    '50 ms budget'
    """
    from ..sweeps import required_bandwidth as needed

    ax = axes_or_current(ax)
    budgets = check_budgets("required_bandwidth", budgets_ms)
    tokens = np.sort(np.asarray(num_input_tokens, dtype=float).reshape(-1))
    if not tokens.size:
        raise InputError("required_bandwidth", "num_input_tokens is empty", "pass prompt lengths, e.g. [1024, 8192]")
    several = isinstance(kv_bytes_per_token, (list, tuple, np.ndarray, pd.Series, pd.Index))
    models = list(kv_bytes_per_token) if several else [kv_bytes_per_token]
    if not models:
        raise InputError("required_bandwidth", "kv_bytes_per_token is empty", "pass a model or bytes per token")
    skipped: list[str] = []
    partly: list[str] = []
    drawn, styles = 0, line_styles()
    for model in models:
        name = (f"{si(float(model))} B/token" if isinstance(model, (int, float, np.number)) else str(model)) + ": "
        for budget in budgets:
            label = f"{name if several else ''}{budget:g} ms budget"
            bandwidth = needed(tokens, model, budget_ms=budget, latency_ms=latency_ms)
            line, left_out = log_line(ax, tokens, np.asarray(bandwidth, float), label, next(styles), _NEEDED)
            drawn += line is not None
            (partly if line is not None else skipped).extend([left_out] if left_out else [])
    say_not_drawn("required_bandwidth", skipped, partly, drawn)
    shown = [
        LINKS[k] if isinstance(k, str) and k in LINKS else k for k in (links if links is not None else DEFAULT_LINKS)
    ]
    for link in map(get_link, shown):
        ax.axhline(link.effective_bandwidth_gb_s, color="0.5", linewidth=0.7, linestyle=":")
        ax.annotate(
            link.name,
            (0.01, link.effective_bandwidth_gb_s),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize="x-small",
            color="0.3",
        )
    log_log(ax, "num_input_tokens", "required bandwidth (GB/s)")
    return ax


def delay_vs_tokens_figure(
    df: pd.DataFrame,
    *,
    hue: str | None = None,
    budgets_ms: float | Sequence[float] = (50,),
    max_panels: int = 16,
) -> Any:
    """Delay against prompt length for a whole sweep: one panel per combination of the options that
    vary (model, KV dtype, TP, latency, mode...), one line per ``hue`` value, one shared legend,
    and the options that do not vary in the title.

    Parameters
    ----------
    df
        A sweep frame.
    hue
        The column that tells the lines apart (default ``link``, else ``cluster``, else
        ``kv_transfer_bandwidth``, the first that varies).
    budgets_ms
        Horizontal reference lines (ms): one number or several, each finite and > 0.
    max_panels
        More combinations than this is an error (name fewer values).

    Returns
    -------
    matplotlib.figure.Figure
        A new figure (close it with ``matplotlib.pyplot.close`` when done).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> df = perfmodel.sweep(model=["llama-3.1-8b", "deepseek-v3"], kv_cache_dtype=["bf16", "fp8"],
    ...                      link=["ib-ndr", "nvlink4"], num_input_tokens=[1024, 8192, 32768])
    >>> fig = pp.delay_vs_tokens_figure(df)
    >>> [ax.get_title() for ax in fig.axes]
    ['llama-3.1-8b, KV bf16', 'llama-3.1-8b, KV fp8', 'deepseek-v3, KV bf16', 'deepseek-v3, KV fp8']
    """
    budgets = check_budgets("delay_vs_tokens_figure", budgets_ms)
    has_rows(df, "delay_vs_tokens_figure")
    if hue is None:
        hue = next((c for c in ("link", "cluster", "kv_transfer_bandwidth") if c in df and df[c].nunique() > 1), None)
    panel_axes, keys, title = panels(df, [hue] if hue else [], max_panels)
    # the legend's room, in inches: its longest entry (small type) or its title (medium type)
    labels_width = (
        max(
            [text_width_in("= " + cast(str, label_of(hue, v))) for v in df[hue].unique()]
            + [text_width_in(hue, "medium")]
            if hue
            else [0]
        )
        + 0.9
    )
    fig, axs = grid(len(keys), 4.6, 3.3, right=labels_width if hue else 0.2)
    drawn, skipped, partly = 0, list[str](), list[str]()
    for ax, key in zip(axs.flat, keys):
        part = df.loc[np.logical_and.reduce([df[c] == v for c, v in zip(panel_axes, key)])] if panel_axes else df
        name = ", ".join(describe_value(c, v) for c, v in zip(panel_axes, key))
        _, lines, not_drawn, some = _delay_lines(part, hue, "num_input_tokens", ax, {}, "delay_vs_tokens_figure")
        drawn, skipped, partly = drawn + lines, skipped + _in(name, not_drawn), partly + _in(name, some)
        if not lines:  # (the other panels set the shared scales)
            ax.text(0.5, 0.5, "nothing to draw", transform=ax.transAxes, ha="center", va="center", color="0.4")
        _budget_lines(ax, budgets)
        log_log(ax, "num_input_tokens", AXIS_LABELS["handoff_delay_ms"], legend=False)
        ax.set_title(name, fontsize="medium")
        ax.label_outer()
    try:
        say_not_drawn("delay_vs_tokens_figure", skipped, partly, drawn)
    except InputError:
        plt.close(fig)
        raise
    fixed_positions(axs)
    handles, labels = max((ax.get_legend_handles_labels() for ax in axs.flat[: len(keys)]), key=lambda hl: len(hl[1]))
    if labels:
        left, _ = side(fig, labels_width)
        fig.legend(handles, labels, title=hue, loc="center left", bbox_to_anchor=(left + 0.005, 0.5), fontsize="small")
    suptitle(fig, "handoff delay" + (f" ({title})" if title else ""))
    return fig


def _in(panel: str, notes: list[str]) -> list[str]:
    """Notes of one panel, each naming it (when the figure has panels)."""
    return [f"{note} in panel {panel!r}" if panel else note for note in notes]


#: Inches kept right of a heatmap figure's panels (and their link names) for the colour bar.
_BAR_ROOM = 1.7


def heatmap_figure(
    df: pd.DataFrame,
    *,
    budgets_ms: float | Sequence[float] = (10, 50, 100),
    links: Sequence[Link | str] = (),
    max_panels: int = 16,
) -> Any:
    """Delay over prompt length x bandwidth for a sweep: one heatmap per combination of the options
    that vary, on one shared colour scale, with the budgets' contours (marked on the colour bar),
    ``links`` marked at their bandwidths (named beside the right-hand panels) and the fixed options
    in the title.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep over ``num_input_tokens`` and ``kv_transfer_bandwidth``.
    budgets_ms : float or sequence of float
        The budgets drawn as contours: one number or several, each finite and > 0.
    links : sequence of Link or str
        Links marked at their bandwidths.
    max_panels : int
        The most panels drawn.

    Returns
    -------
    matplotlib.figure.Figure
        A new figure (close it with ``matplotlib.pyplot.close`` when done).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import numpy as np, perfmodel, perfmodel.plotting as pp
    >>> df = perfmodel.sweep(model=["llama-3.1-8b", "qwen3-32b"], kv_transfer_bandwidth=np.geomspace(1, 1000, 31),
    ...                      num_input_tokens=2 ** np.arange(7, 18))
    >>> [ax.get_title() for ax in pp.heatmap_figure(df).axes[:2]]
    ['llama-3.1-8b', 'qwen3-32b']
    """
    budgets = check_budgets("heatmap_figure", budgets_ms)
    has_rows(df, "heatmap_figure")
    require(df, ["num_input_tokens", "kv_transfer_bandwidth", "handoff_delay_ms"], "heatmap_figure")
    delays = df["handoff_delay_ms"].to_numpy(float, na_value=np.nan)
    positive = delays[np.isfinite(delays) & (delays > 0)]
    if not positive.size:
        raise InputError(
            "heatmap_figure",
            "no delay is a finite number > 0, so there is nothing to colour",
            "pass a sweep with delays",
        )
    panel_axes, keys, title = panels(df, ["kv_transfer_bandwidth", "link"], max_panels)
    names = max(map(text_width_in, _link_names(links).values()), default=0) + 0.2 if links else 0.0
    fig, axs = grid(len(keys), 4.4, 3.2, right=_BAR_ROOM + names, gap=MARGINS["wspace"] + names)
    norm = LogNorm(vmin=positive.min(), vmax=positive.max())
    mesh, interpolated = None, False
    for ax, key in zip(axs.flat, keys):
        part = df.loc[np.logical_and.reduce([df[c] == v for c, v in zip(panel_axes, key)])] if panel_axes else df
        try:
            heatmap(part, budgets_ms=budgets, colorbar=False, norm=norm, ax=ax)
        except InputError:
            plt.close(fig)
            raise
        if links:
            _mark_links(ax, links, names=True)
        mesh = ax.collections[0]
        interpolated |= any("interpolated" in str(c.get_label()) for c in ax.collections[1:])
        ax.set_title(", ".join(describe_value(c, v) for c, v in zip(panel_axes, key)), fontsize="medium")
        ax.label_outer()
    fixed_positions(axs)
    if mesh is not None:
        left, _ = side(fig, _BAR_ROOM)  # the budgets' names (0.6 in), the bar (0.2 in), its ticks and label
        bottom, top, inch = fig.subplotpars.bottom, fig.subplotpars.top, 1 / fig.get_figwidth()
        bar = add_colorbar(
            fig,
            mesh,
            cax=fig.add_axes((left + 0.6 * inch, bottom, 0.2 * inch, top - bottom)),
            label=AXIS_LABELS["handoff_delay_ms"] + (_INTERPOLATED if interpolated else ""),
        )
        budget_colorbar(bar, [b for b in sorted(budgets) if cast(float, norm.vmin) < b < cast(float, norm.vmax)])
    suptitle(fig, "handoff delay over bandwidth and prompt length" + (f" ({title})" if title else ""))
    return fig
