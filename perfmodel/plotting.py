"""matplotlib helpers for sweeps and replays: ``ax=None`` in, the Axes out, never ``plt.show()``.

No modelling here: the figures draw what :func:`perfmodel.sweep`,
:func:`perfmodel.required_bandwidth` and trace replays computed. Lines differ in style
and marker as well as colour, so the figures stay legible in greyscale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import cycle
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogFormatter, LogLocator, NullFormatter, NullLocator

from .links import LINKS, Link, get_link

__all__ = ["calibration", "compare", "delay_cdf", "delay_vs_tokens", "delay_vs_tokens_figure", "grid_budget",
           "grid_percentiles", "heatmap", "heatmap_figure", "link_timeline", "replay_figure", "replay_grid_figure",
           "required_bandwidth"]

_STYLES = ["-", "--", "-.", ":"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
_AXIS_LABELS = {
    "num_input_tokens": "prompt length (tokens)",
    "kv_transfer_bandwidth": "bandwidth (GB/s)",
    "handoff_delay_ms": "handoff delay (ms)",
    "kv_bytes_per_token": "KV bytes per token",
    "cache_hit_ratio": "destination cache hit ratio",
    "latency_ms": "latency (ms)",
}


def _si(value: float, _pos: Any = None) -> str:
    """Compact tick labels: 512, 1k, 32k, 1M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _tokens(value: float, _pos: Any = None) -> str:
    """Token-count tick labels in binary units, as prompt lengths are quoted: 512, 1k, 32k, 1M."""
    for scale, suffix in ((2**20, "M"), (2**10, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:g}"


class _PlainLogFormatter(LogFormatter):
    """The log ticks matplotlib would label (decades; minor ticks too when few decades show), written as
    plain numbers (0.01, 2, 10, 1k) rather than mathtext powers, which also cost ~10 ms each to render."""

    def __call__(self, x: float, pos: Any = None) -> str:
        return _si(x) if super().__call__(x, pos) else ""


def _plain_log_axis(axis: Any) -> None:
    """Plain-number labels on a decimal log axis (set after its scale: setting a scale resets them)."""
    axis.set_major_formatter(_PlainLogFormatter(10))
    axis.set_minor_formatter(_PlainLogFormatter(10))


def _colorbar(fig: Any, mesh: Any, **kwargs: Any) -> Any:
    """A colour bar; on a log scale with plain-number labels, its minor ticks only when under two decades show."""
    bar = fig.colorbar(mesh, **kwargs)
    norm = mesh.norm
    if isinstance(norm, LogNorm):
        _plain_log_axis(bar.ax.yaxis)
        if norm.vmax / norm.vmin >= 100:
            bar.minorticks_off()
    return bar


def _tokens_axis(axis: Any) -> None:
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_major_formatter(FuncFormatter(_tokens))
    axis.set_minor_formatter(NullFormatter())


def _log_log(ax: Axes, x: str, ylabel: str, *, legend_title: str | None = None, legend: bool = True) -> None:
    """Log-log axes with token ticks on x (when x is prompt length), labels, grid and legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_axis(ax.yaxis)
    if x == "num_input_tokens":
        _tokens_axis(ax.xaxis)
    ax.set_xlabel(_AXIS_LABELS.get(x, x))
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        ax.legend(title=legend_title, fontsize="small")


def _ax(ax: Axes | None) -> Axes:
    return plt.gca() if ax is None else ax


def _styles() -> Iterable[dict[str, Any]]:
    for i in cycle(range(len(_STYLES) * len(_MARKERS))):
        yield {"linestyle": _STYLES[i % len(_STYLES)], "marker": _MARKERS[i % len(_MARKERS)], "markersize": 4}


def _require(df: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"plot needs columns {missing}; the frame has {list(df.columns)}. "
                         "Fix: pass a frame from perfmodel.sweep(...) or name the columns")


def _one_row_per(df: pd.DataFrame, keys: Sequence[str], what: str) -> None:
    if df.duplicated(list(keys)).any():
        varying = [c for c in _varying(df) if c not in keys]
        raise ValueError(f"{what}: several rows per {list(keys)} (the columns {varying} vary too). "
                         f"Fix: select one value of each, e.g. df[df['{(varying or ['...'])[0]}'] == ...]")


#: Columns a sweep computes (never an axis to tell lines apart by, unless swept directly).
_OUTPUTS = ("handoff_delay_ms", "transfer_bytes")


#: Columns a sweep derives from another axis (bytes per token from the model, bandwidth from the link).
_DERIVED = {"kv_bytes_per_token": "model", "kv_transfer_bandwidth": "link"}


def _varying(df: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """The axes with more than one value, in the frame's order (a sweep's axis order); a column
    derived from an axis of the frame (bytes per token of ``model``) is not an axis of its own."""
    derived = [c for c, source in _DERIVED.items() if source in df.columns]
    return [c for c in df.columns if c not in (*_OUTPUTS, *exclude, *derived) and df[c].nunique(dropna=False) > 1]


def _default_hue(df: pd.DataFrame, x: str) -> str | None:
    """The one column that tells the lines apart when ``hue`` is not given (None: one line).

    A column that is a function of another (``kv_bytes_per_token`` of ``model``,
    ``kv_transfer_bandwidth`` of ``link``) does not count as a second varying axis.
    """
    varying = _varying(df, exclude=[x])
    if not varying:
        return None
    candidates = [c for c in varying if not df.duplicated([x, c]).any()]
    if candidates:
        return candidates[0]
    raise ValueError(f"delay_vs_tokens: several columns vary ({varying}), so one line per value of one of them "
                     f"would mix the others. Fix: pass hue= one of them and select one value of the rest, e.g. "
                     f"delay_vs_tokens(df[df[{varying[-1]!r}] == ...], hue={varying[0]!r})")


def _label_of(hue: str | None, key: Any) -> str | None:
    if key is None:
        return None
    return _si(key) + " GB/s" if hue == "kv_transfer_bandwidth" else str(key)


def delay_vs_tokens(
    df: pd.DataFrame, hue: str | None = None, *, x: str = "num_input_tokens", budgets_ms: Sequence[float] = (),
    legend: bool = True, ax: Axes | None = None, **kwargs: Any,
) -> Axes:
    """Handoff delay against prompt length, log-log, one line per value of ``hue``.

    Series that coincide (e.g. two links of the same bandwidth) are drawn once, with
    both names in the legend ("ib-ndr = roce-400g"), so no line hides another.

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
        Horizontal reference lines (latency budgets, ms).
    legend
        Draw a legend (figure-level layouts draw one for all panels instead).
    ax
        Axes to draw on (default: the current Axes).
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot` (e.g. ``linewidth``, ``alpha``).

    Returns
    -------
    matplotlib.axes.Axes

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
    ax = _ax(ax)
    _require(df, [x, "handoff_delay_ms"] + ([hue] if hue else []))
    if hue is None:
        hue = _default_hue(df, x)
    _one_row_per(df, [x] + ([hue] if hue else []), "delay_vs_tokens")
    groups = df.groupby(hue, sort=False, observed=True) if hue else [(None, df)]
    drawn: list[tuple[Any, np.ndarray, np.ndarray]] = []  # (line, x, y) of the series drawn so far
    styles = _styles()
    for key, part in groups:
        part = part.sort_values(x)
        xs, ys = part[x].to_numpy(float), part["handoff_delay_ms"].to_numpy(float, na_value=np.nan)
        label = _label_of(hue, key)
        same = next((line for line, x0, y0 in drawn if np.array_equal(x0, xs) and np.array_equal(y0, ys,
                                                                                                 equal_nan=True)), None)
        if same is not None:  # coincides with a line already drawn: one line, both names
            same.set_label(f"{same.get_label()} = {label}")
            continue
        line, = ax.plot(xs, ys, label=label, **{**next(styles), **kwargs})
        drawn.append((line, xs, ys))
    for budget in budgets_ms:  # labelled at the left, above the line: delays grow with x, so no data is there
        ax.axhline(budget, color="0.4", linewidth=0.8, linestyle=":")
        ax.annotate(f"{budget:g} ms budget", (0.01, budget), xycoords=("axes fraction", "data"), ha="left",
                    va="bottom", fontsize="small", color="0.3")
    _log_log(ax, x, _AXIS_LABELS["handoff_delay_ms"], legend_title=hue, legend=legend and bool(hue))
    return ax


def _budget_colorbar(bar: Any, budgets_ms: Sequence[float]) -> None:
    """Mark latency budgets on a delay colour bar: each a line in its contour's style, labelled in ms."""
    for budget, style in zip(budgets_ms, cycle(_STYLES)):
        bar.ax.axhline(budget, color="white", linewidth=2.0, linestyle=style)
    if budgets_ms:  # named on the bar's free side (its own ticks are on the other)
        left = bar.ax.secondary_yaxis("left")
        left.set_yticks(list(budgets_ms), [f"{b:g} ms" for b in budgets_ms])
        left.yaxis.set_minor_locator(NullLocator())
        left.tick_params(labelsize="small", length=4)


def _mark_links(ax: Axes, links: Sequence[Link | str], *, names: bool) -> None:
    """Links at their bandwidth on a bandwidth y axis: a dotted line across, the names (those at one
    bandwidth together) on the right-hand axis when ``names``."""
    low, high = sorted(ax.get_ylim())
    at = {bandwidth: name for bandwidth, name in _link_names(links).items() if low <= bandwidth <= high}
    for bandwidth, name in at.items():
        ax.axhline(bandwidth, color="white", linewidth=0.7, linestyle=(0, (1, 2)), alpha=0.9)
        if names:  # beside the axes, at the line's height (a text each: a secondary axis costs 25 ms a panel)
            ax.annotate(name, (1, bandwidth), xycoords=ax.get_yaxis_transform(), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize="small", annotation_clip=False)


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


def _analytic_budget_curve(df: pd.DataFrame, x: str, y: str, budget: float, xs: np.ndarray, ys: np.ndarray,
                           z: np.ndarray) -> tuple | None:
    """The budget's contour from the model itself (bandwidth needed over prompt length), where it applies:
    a full-prompt grid of prompt length x bandwidth with one bytes-per-token and latency, and only if it
    agrees with every cell (any other option, e.g. layer-wise streaming, makes the cells disagree: None)."""
    from .sweeps import required_bandwidth

    if (x, y) != ("num_input_tokens", "kv_transfer_bandwidth") or "transfer_bytes" not in df:
        return None
    if "mode" in df and (df["mode"] != "full_prompt").any():
        return None
    tokens = df["num_input_tokens"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = df["transfer_bytes"].to_numpy(float) / tokens
    ratio = ratio[tokens > 0]
    if ratio.size == 0 or not np.all(ratio == ratio[0]):  # bytes not one constant per token (several models,
        return None                                       # windows, states): no single curve
    latency = df["latency_ms"].iloc[0] if "latency_ms" in df and df["latency_ms"].nunique() == 1 else \
        (None if "latency_ms" in df else 0.0)
    if latency is None:
        return None
    per_token, latency = float(ratio[0]), float(latency)
    needed = required_bandwidth(xs, per_token, budget_ms=budget, latency_ms=latency)
    known = np.isfinite(z)
    if ((z <= budget) != (ys[:, None] >= needed[None, :] * (1 - 1e-9)))[known].any():
        return None
    dense = np.geomspace(max(xs.min(), 1), xs.max(), 400)
    return dense, required_bandwidth(dense, per_token, budget_ms=budget, latency_ms=latency)


def heatmap(
    df: pd.DataFrame, x: str = "num_input_tokens", y: str = "kv_transfer_bandwidth", *,
    budgets_ms: Sequence[float] = (10, 50, 100), links: Sequence[Link | str] = (), colorbar: bool = True,
    ax: Axes | None = None, **kwargs: Any,
) -> Axes:
    """Handoff delay over a 2-D grid, log colour scale, with the budgets' contours and the links marked.

    Each cell is centred on a swept value (cell edges halfway between neighbours,
    geometrically on a log axis); with a dozen values or fewer, the ticks are the swept
    values themselves. On a prompt length x bandwidth grid of a full-prompt sweep, the
    budget contours are the model's own answer (:func:`perfmodel.required_bandwidth`,
    exact, not interpolated between cells); on other grids they are interpolated.

    Parameters
    ----------
    df
        A sweep frame with exactly one row per (``x``, ``y``) pair.
    x, y
        The grid's columns (default prompt length and bandwidth, log-scaled when they
        span more than 20x).
    budgets_ms
        Delays (ms) at which contour lines are drawn; the colour bar marks each with its line
        style (labels beside the data, never on it).
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
    ax = _ax(ax)
    _require(df, [x, y, "handoff_delay_ms"])
    _one_row_per(df, [x, y], "heatmap")
    grid = df.pivot_table(index=y, columns=x, values="handoff_delay_ms", aggfunc="first", observed=True)
    xs, ys, z = grid.columns.to_numpy(float), grid.index.to_numpy(float), grid.to_numpy(float)
    positive = z[np.isfinite(z) & (z > 0)]
    norm = LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size else None
    logs = {}
    for axis_name, column, values in (("x", x, xs), ("y", y, ys)):  # scales first: labels are placed in display space
        logs[axis_name] = bool(values.min() > 0 and values.max() / values.min() > 20)
        if logs[axis_name]:
            getattr(ax, f"set_{axis_name}scale")("log", base=2 if column == "num_input_tokens" else 10)
            if column != "num_input_tokens":
                _plain_log_axis(getattr(ax, f"{axis_name}axis"))
        if column == "num_input_tokens":
            _tokens_axis(getattr(ax, f"{axis_name}axis"))
        if values.size <= 12:  # the swept values are the ticks
            getattr(ax, f"set_{axis_name}ticks")(values)
            getattr(ax, f"{axis_name}axis").set_minor_formatter(NullFormatter())
            getattr(ax, f"{axis_name}axis").set_major_formatter(FuncFormatter(
                _tokens if column == "num_input_tokens" else _si))
    mesh = ax.pcolormesh(_edges(xs, logs["x"]), _edges(ys, logs["y"]), z,
                         **{"norm": norm, "cmap": "viridis", **kwargs})
    levels = [b for b in sorted(budgets_ms) if positive.size and positive.min() < b < positive.max()]
    for budget, style in zip(levels, cycle(_STYLES)):
        curve = _analytic_budget_curve(df, x, y, budget, xs, ys, z)
        if curve is not None:
            ax.plot(*curve, color="white", linewidth=1.3, linestyle=style)
        elif len(xs) > 1 and len(ys) > 1:
            ax.contour(xs, ys, z, levels=[budget], colors="white", linewidths=1.2, linestyles=style)
    ax.set_xlim(*_edges(xs, logs["x"])[[0, -1]])
    ax.set_ylim(*_edges(ys, logs["y"])[[0, -1]])
    if links and y == "kv_transfer_bandwidth":
        _mark_links(ax, links, names=True)
    if colorbar:
        _budget_colorbar(_colorbar(ax.figure, mesh, ax=ax, label=_AXIS_LABELS["handoff_delay_ms"]), levels)
    ax.set_xlabel(_AXIS_LABELS.get(x, x))
    ax.set_ylabel(_AXIS_LABELS.get(y, y))
    return ax


def required_bandwidth(
    num_input_tokens: Sequence[int], kv_bytes_per_token: Any, budgets_ms: Sequence[float] = (10, 50, 100), *,
    latency_ms: float = 0.0, links: Iterable[Link | str] | None = None, ax: Axes | None = None,
) -> Axes:
    """Bandwidth needed to stay within each budget, against prompt length, with link presets marked.

    Parameters
    ----------
    num_input_tokens
        Prompt lengths to draw (tokens).
    kv_bytes_per_token
        Bytes per token, or a model preset name or config.
    budgets_ms
        One line per latency budget (ms).
    latency_ms
        Per-transfer latency included in the requirement (ms).
    links
        Links drawn as horizontal reference lines (default: every preset).
    ax
        Axes to draw on (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes

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
    from .sweeps import required_bandwidth as needed

    ax = _ax(ax)
    tokens = np.sort(np.asarray(num_input_tokens, dtype=float))
    for budget, style in zip(budgets_ms, _styles()):
        ax.plot(tokens, needed(tokens, kv_bytes_per_token, budget_ms=budget, latency_ms=latency_ms), label=f"{budget:g} ms budget",
                **style)
    shown = [LINKS[k] if isinstance(k, str) and k in LINKS else k for k in (links if links is not None else LINKS)]
    for link in map(get_link, shown):
        ax.axhline(link.effective_bandwidth_gb_s, color="0.5", linewidth=0.7, linestyle=":")
        ax.annotate(link.name, (0.01, link.effective_bandwidth_gb_s), xycoords=("axes fraction", "data"),
                    va="bottom", fontsize="x-small", color="0.3")
    _log_log(ax, "num_input_tokens", "required bandwidth (GB/s)")
    return ax


def _series(data: Any) -> dict[str, np.ndarray]:
    """Delays by label, from a Series/array, a replay/facade frame, or a mapping of those."""
    if isinstance(data, Mapping):
        return {str(k): next(iter(_series(v).values())) for k, v in data.items()}
    if isinstance(data, pd.DataFrame):
        _require(data, ["handoff_delay_ms"])
        data = data["handoff_delay_ms"]
    label = getattr(data, "name", None) or "handoff_delay_ms"
    values = pd.Series(data).to_numpy(dtype=float, na_value=np.nan)
    return {str(label): values[np.isfinite(values)]}


def delay_cdf(
    data: Any, *, percentiles: Sequence[float] = (50, 90, 99), ax: Axes | None = None,
) -> Axes:
    """Distribution (empirical CDF) of handoff delays, with percentiles marked.

    Parameters
    ----------
    data
        Delays in ms: a Series or array, a frame with a ``handoff_delay_ms`` column
        (a replay, the facade's output assigned), or a mapping label -> either.
        Missing delays (no handoff) are left out.
    percentiles
        Percentiles marked on each line (default p50, p90, p99).
    ax
        Axes to draw on (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> import numpy as np, perfmodel.plotting as pp
    >>> ax = pp.delay_cdf({"ib-ndr": np.linspace(1, 100, 50), "nvlink4": np.linspace(0.1, 10, 50)}, ax=ax)
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['ib-ndr', 'nvlink4']
    """
    ax = _ax(ax)
    for (label, values), style in zip(_series(data).items(), _styles()):
        if values.size == 0:
            continue
        ordered = np.sort(values)
        fraction = np.arange(1, ordered.size + 1) / ordered.size
        zero = float(np.mean(ordered <= 0))
        if zero:  # a log axis cannot show 0 ms (e.g. full prefix-cache hits): say how many there are
            label = f"{label} ({zero:.1%} at 0 ms)"
        line, = ax.step(ordered, fraction, where="post", label=label, linestyle=style["linestyle"])
        marks = np.percentile(ordered, percentiles)
        ax.plot(marks, np.asarray(percentiles) / 100, linestyle="none", marker=style["marker"],
                color=line.get_color())
        for p, value in zip(percentiles, marks):
            ax.annotate(f"p{p:g} {value:.3g} ms", (value, p / 100), textcoords="offset points", xytext=(4, -10),
                        fontsize="x-small", color=line.get_color())
    ax.set_xscale("log")
    _plain_log_axis(ax.xaxis)
    ax.set_ylim(0, 1.02)  # fraction axis stays linear
    ax.set_xlabel(_AXIS_LABELS["handoff_delay_ms"])
    ax.set_ylabel("fraction of handoffs")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def compare(
    before: Any, after: Any, *, labels: tuple[str, str] = ("before", "after"), x: str = "num_input_tokens",
    ax: Axes | None = None,
) -> Axes:
    """One what-if against another.

    Two sweep frames (one row per ``x``): both delay curves, the gap shaded, and the
    speed-up at the largest ``x`` written on the plot. Anything else (per-request delays:
    Series, arrays, replay frames): their two CDFs, as :func:`delay_cdf` draws them.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> import perfmodel, perfmodel.plotting as pp
    >>> tokens = [1024, 8192, 65536]
    >>> ib = perfmodel.sweep(link="ib-ndr", model="llama-3.1-70b", num_input_tokens=tokens)
    >>> nv = perfmodel.sweep(link="nvlink4", model="llama-3.1-70b", num_input_tokens=tokens)
    >>> ax = pp.compare(ib, nv, labels=("400G InfiniBand", "NVLink 4"), ax=ax)
    >>> [line.get_label() for line in ax.get_lines()]
    ['400G InfiniBand', 'NVLink 4']
    """
    ax = _ax(ax)
    if not (isinstance(before, pd.DataFrame) and isinstance(after, pd.DataFrame) and x in before and x in after):
        return delay_cdf({labels[0]: before, labels[1]: after}, ax=ax)
    for frame, what in ((before, labels[0]), (after, labels[1])):
        _require(frame, [x, "handoff_delay_ms"])
        _one_row_per(frame, [x], f"compare ({what})")
    merged = pd.merge(before[[x, "handoff_delay_ms"]], after[[x, "handoff_delay_ms"]], on=x, suffixes=("_0", "_1"))
    if merged.empty:
        raise ValueError(f"compare: the two frames share no {x} values. Fix: sweep the same {x} grid for both")
    merged = merged.sort_values(x)
    for column, label, style in zip(("handoff_delay_ms_0", "handoff_delay_ms_1"), labels, _styles()):
        ax.plot(merged[x], merged[column], label=label, **style)
    ax.fill_between(merged[x], merged["handoff_delay_ms_0"], merged["handoff_delay_ms_1"], color="0.6", alpha=0.25)
    last = merged.iloc[-1]
    if last["handoff_delay_ms_1"] > 0:
        ratio = last["handoff_delay_ms_0"] / last["handoff_delay_ms_1"]
        where = _tokens(last[x]) if x == "num_input_tokens" else _si(last[x])
        ax.annotate(f"{ratio:.3g}x at {where}", (last[x], last["handoff_delay_ms_1"]),
                    textcoords="offset points", xytext=(-6, 8), ha="right", fontsize="small")
    _log_log(ax, x, _AXIS_LABELS["handoff_delay_ms"])
    return ax


def link_timeline(replay: pd.DataFrame, *, bins: int | None = None, ax: Axes | None = None) -> Axes:
    """Transfers in flight over time, from a trace replay (``start_ms``/``end_ms`` per transfer).

    Few transfers are drawn exactly (a step each time one starts or ends); many (or
    ``bins`` given) as the mean number in flight per time bin, computed exactly from the
    step function's integral, so a long replay stays readable.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> import pandas as pd, perfmodel.plotting as pp
    >>> replay = pd.DataFrame({"start_ms": [0.0, 1.0, 5.0], "end_ms": [2.0, 3.0, 6.0]})
    >>> pp.link_timeline(replay, ax=ax).get_ylabel()
    'transfers in flight'
    """
    ax = _ax(ax)
    _require(replay, ["start_ms", "end_ms"])
    done = replay[["start_ms", "end_ms"]].dropna()
    done = done[done["end_ms"] > done["start_ms"]]
    times = np.concatenate([done["start_ms"].to_numpy(), done["end_ms"].to_numpy()]) / 1000.0
    steps = np.concatenate([np.ones(len(done)), -np.ones(len(done))])
    order = np.lexsort((steps, times))  # at equal times, ends before starts
    times, busy = times[order], np.cumsum(steps[order])
    if bins is None:
        bins = 0 if len(done) <= 250 else 300
    if bins and times.size:
        # integral of the step function at each event, then linear between events: exact bin means
        integral = np.concatenate([[0.0], np.cumsum(busy[:-1] * np.diff(times))])
        edges = np.linspace(times[0], times[-1], bins + 1)
        mean = np.diff(np.interp(edges, times, integral)) / np.diff(edges)
        ax.stairs(mean, edges, fill=True, color="0.6", alpha=0.5)
        ax.stairs(mean, edges, color="0.2", linewidth=0.8, label=f"mean per {np.diff(edges)[0]:.3g} s")
        ax.legend(fontsize="small")
    else:
        ax.step(times, busy, where="post", color="0.2", linewidth=0.8)
        ax.fill_between(times, busy, step="post", color="0.6", alpha=0.4)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("transfers in flight")
    ax.grid(True, alpha=0.3)
    return ax


# --- figure-level layouts (what the command line draws) ------------------------------------

#: The sweep axes that are options of a what-if (the panels of a figure), in sweep order.
_PANEL_AXES = ("model", "kv_cache_dtype", "tp", "decode_tp", "scope", "kv_bytes_per_token", "link", "latency_ms",
               "per_block_ms", "per_message_ms", "kv_layout", "mode", "cache_hit_ratio", "block_size", "state_bytes",
               "overlap", "prefill_ms", "prefill_tokens_per_s", "num_layers", "layer_group", "layerwise_min_tokens")


#: How a panel title names one option's value.
_DESCRIPTIONS: dict[str, Any] = {
    "model": str,
    "kv_bytes_per_token": lambda v: f"{_si(v)} B/token",
    "tp": lambda v: f"TP{v}",
    "decode_tp": lambda v: f"to decode TP{v}",
    "link": lambda v: f"over {v}",
    "per_message_ms": lambda v: f"+{v * 1000:g} us/message",
    "kv_layout": lambda v: f"{v} messages",
    "kv_cache_dtype": lambda v: f"KV {v}",
    "latency_ms": lambda v: f"+{v:g} ms latency",
    "cache_hit_ratio": lambda v: f"{v:.0%} cached",
    "block_size": lambda v: f"block {v}",
    "state_bytes": lambda v: f"+{_si(v)} B state",
    "scope": lambda v: "TP group bytes" if v == "group" else "one rank's bytes",
    "per_block_ms": lambda v: f"+{v:g} ms/block",
    "overlap": lambda v: "layer-wise" if v == "layerwise" else "after prefill",
    "prefill_ms": lambda v: f"prefill {v:g} ms",
    "prefill_tokens_per_s": lambda v: f"prefill {_si(v)} tok/s",
    "layer_group": lambda v: f"{v} layers/group",
    "layerwise_min_tokens": lambda v: f"layer-wise from {_tokens(v)}",
}


def _describe(key: Any, value: Any) -> str:
    describe = _DESCRIPTIONS.get(key)
    return describe(value) if describe else f"{key}={value}"


def _panels(df: pd.DataFrame, exclude: Sequence[str], max_panels: int) -> tuple[list[str], list[tuple], str]:
    """The axes that vary (one panel per combination), the combinations, and a title for the fixed ones."""
    present = [c for c in _PANEL_AXES if c in df.columns and c not in exclude]
    panel_axes = [c for c in present if df[c].nunique() > 1 and not (c == "kv_bytes_per_token" and "model" in df)]
    fixed = [c for c in present if c not in panel_axes and not (c == "kv_bytes_per_token" and "model" in df)]
    keys = list(df[panel_axes].drop_duplicates().itertuples(index=False, name=None)) if panel_axes else [()]
    if len(keys) > max_panels:
        raise ValueError(f"{len(keys)} panels ({' x '.join(panel_axes)}) are too many for one figure. Fix: give "
                         f"fewer values of {', '.join(panel_axes)} (at most {max_panels} combinations)")
    title = ", ".join([*(_describe(c, df[c].iloc[0]) for c in fixed), *_defaults(df)])
    return panel_axes, keys, title


def _defaults(df: pd.DataFrame) -> list[str]:
    """What a sweep of models assumed where it has no column: the models' own KV dtype, TP 1, one rank."""
    if "model" not in df:
        return []
    return [text for column, text in (("kv_cache_dtype", "KV in the model's dtype"), ("tp", "TP1"),
                                      ("scope", "one rank's bytes")) if column not in df]


#: Margins of the figure-level layouts, in inches: fixed, so no layout engine has to measure every
#: tick label at save time (constrained layout cost 0.6-0.7 s per figure of the main job).
_MARGINS = dict(left=0.8, bottom=0.6, top=0.75, wspace=0.15, hspace=0.5)


def _grid(n: int, width: float, height: float, right: float) -> tuple[Any, np.ndarray]:
    """``n`` panels of ``width`` x ``height`` inches on a grid, with ``right`` inches kept for a legend or colour bar."""
    columns = min(n, 2 if n <= 4 else 3)
    rows = -(-n // columns)
    m = _MARGINS
    fig_width = m["left"] + columns * width + (columns - 1) * m["wspace"] + right
    fig_height = m["bottom"] + rows * height + (rows - 1) * m["hspace"] + m["top"]
    fig, axs = plt.subplots(rows, columns, figsize=(fig_width, fig_height), squeeze=False, sharex=True, sharey=True)
    fig.subplots_adjust(left=m["left"] / fig_width, right=1 - right / fig_width, bottom=m["bottom"] / fig_height,
                        top=1 - m["top"] / fig_height, wspace=m["wspace"] / width, hspace=m["hspace"] / height)
    for ax in axs.flat[n:]:
        ax.set_visible(False)
    return fig, axs


def _fixed_positions(axs: np.ndarray) -> None:
    """Titles and axis labels at fixed offsets from their panels, and no minor ticks. matplotlib otherwise
    measures every tick label of every shared panel at each draw to place them, and builds every minor
    tick of every panel (together most of a figure's drawing time); the grid's margins leave the labels
    room, and each panel keeps its major ticks and grid (decades, powers of two, swept values). A log
    axis showing under two decades keeps its minor ticks, which then carry the labels."""
    from matplotlib.transforms import ScaledTranslation

    for ax in axs.flat:
        if not ax.get_visible():
            continue
        ax.set_title(ax.get_title(), fontsize="medium", y=1.0)  # an explicit y turns the automatic placement off
        below = ScaledTranslation(0, -24 / 72, ax.figure.dpi_scale_trans)
        left = ScaledTranslation(-40 / 72, 0, ax.figure.dpi_scale_trans)
        ax.xaxis.set_label_coords(0.5, 0.0, transform=ax.transAxes + below)
        ax.yaxis.set_label_coords(0.0, 0.5, transform=ax.transAxes + left)
        for axis in (ax.xaxis, ax.yaxis):
            low, high = axis.get_view_interval()
            if not (axis.get_scale() == "log" and 0 < low and high < 100 * low):  # few decades: minor labels
                axis.set_minor_locator(NullLocator())


def _side(fig: Any, right: float) -> tuple[float, float]:
    """The left edge and width (figure fractions) of the space kept on the right of a :func:`_grid`."""
    width = fig.get_figwidth()
    return 1 - right / width, right / width


def delay_vs_tokens_figure(
    df: pd.DataFrame, *, hue: str | None = None, budgets_ms: Sequence[float] = (50,), max_panels: int = 16,
) -> Any:
    """Delay against prompt length for a whole sweep: one panel per combination of the options that
    vary (model, KV dtype, TP, latency, mode...), one line per ``hue`` value, one shared legend,
    and the options that do not vary in the title.

    Parameters
    ----------
    df
        A sweep frame.
    hue
        The column that tells the lines apart (default ``link``, else ``kv_transfer_bandwidth``,
        when it varies).
    budgets_ms
        Horizontal reference lines (ms).
    max_panels
        More combinations than this is an error (name fewer values).

    Returns
    -------
    matplotlib.figure.Figure

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
    if hue is None:
        hue = next((c for c in ("link", "kv_transfer_bandwidth") if c in df and df[c].nunique() > 1), None)
    panel_axes, keys, title = _panels(df, [hue] if hue else [], max_panels)
    # the legend's room, in inches: its longest entry (small type) or its title (medium type)
    labels_width = max([len(_label_of(hue, v)) for v in df[hue].unique()] + [1.25 * len(hue)] if hue else [0]) \
        * 0.09 + 1.0
    fig, axs = _grid(len(keys), 4.6, 3.3, right=labels_width if hue else 0.2)
    for ax, key in zip(axs.flat, keys):
        part = df.loc[np.logical_and.reduce([df[c] == v for c, v in zip(panel_axes, key)])] if panel_axes else df
        delay_vs_tokens(part, hue=hue, budgets_ms=budgets_ms, legend=False, ax=ax)
        ax.set_title(", ".join(_describe(c, v) for c, v in zip(panel_axes, key)), fontsize="medium")
        ax.label_outer()
    _fixed_positions(axs)
    handles, labels = max((ax.get_legend_handles_labels() for ax in axs.flat[:len(keys)]), key=lambda hl: len(hl[1]))
    if labels:
        left, _ = _side(fig, labels_width)
        fig.legend(handles, labels, title=hue, loc="center left", bbox_to_anchor=(left + 0.005, 0.5),
                   fontsize="small")
    _suptitle(fig, "handoff delay" + (f" ({title})" if title else ""))
    return fig


def _suptitle(fig: Any, text: str) -> None:
    """The figure's title, in the top margin above the panels' titles."""
    fig.suptitle(text, fontsize="medium", y=1 - 0.12 / fig.get_figheight(), va="top")


def heatmap_figure(df: pd.DataFrame, *, budgets_ms: Sequence[float] = (10, 50, 100), links: Sequence[Link | str] = (),
                   max_panels: int = 16) -> Any:
    """Delay over prompt length x bandwidth for a sweep: one heatmap per combination of the options
    that vary, on one shared colour scale, with the budgets' contours (marked on the colour bar),
    ``links`` marked at their bandwidths (named beside the right-hand panels) and the fixed options
    in the title.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import numpy as np, perfmodel, perfmodel.plotting as pp
    >>> df = perfmodel.sweep(model=["llama-3.1-8b", "qwen3-32b"], kv_transfer_bandwidth=np.geomspace(1, 1000, 31),
    ...                      num_input_tokens=2 ** np.arange(7, 18))
    >>> [ax.get_title() for ax in pp.heatmap_figure(df).axes[:2]]
    ['llama-3.1-8b', 'qwen3-32b']
    """
    _require(df, ["num_input_tokens", "kv_transfer_bandwidth", "handoff_delay_ms"])
    panel_axes, keys, title = _panels(df, ["kv_transfer_bandwidth", "link"], max_panels)
    names = max(map(len, _link_names(links).values()), default=0) * 0.075 + 0.15 if links else 0.0
    fig, axs = _grid(len(keys), 4.4, 3.2, right=1.3 + names)
    fig.subplots_adjust(wspace=(_MARGINS["wspace"] + names) / 4.4)
    delays = df["handoff_delay_ms"].to_numpy(float)
    positive = delays[np.isfinite(delays) & (delays > 0)]
    norm = LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size else None
    mesh = None
    for ax, key in zip(axs.flat, keys):
        part = df.loc[np.logical_and.reduce([df[c] == v for c, v in zip(panel_axes, key)])] if panel_axes else df
        heatmap(part, budgets_ms=budgets_ms, colorbar=False, norm=norm, ax=ax)
        if links:
            _mark_links(ax, links, names=True)
        mesh = ax.collections[0]
        ax.set_title(", ".join(_describe(c, v) for c, v in zip(panel_axes, key)), fontsize="medium")
        ax.label_outer()
    _fixed_positions(axs)
    if mesh is not None:
        left, width = _side(fig, 1.3)
        bottom, top = fig.subplotpars.bottom, fig.subplotpars.top
        bar = _colorbar(fig, mesh, cax=fig.add_axes((left + 0.2 * width, bottom, 0.15 * width, top - bottom)),
                        label=_AXIS_LABELS["handoff_delay_ms"])
        _budget_colorbar(bar, [b for b in sorted(budgets_ms) if norm is not None and norm.vmin < b < norm.vmax])
    _suptitle(fig, "handoff delay over bandwidth and prompt length" + (f" ({title})" if title else ""))
    return fig


def replay_figure(replay: pd.DataFrame, *, label: str | None = None) -> Any:
    """A trace replay at a glance: the delay CDF (percentiles marked) and the transfers in flight.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> replay = perfmodel.replay_handoffs(perfmodel.synthetic_trace(300, 10, seed=0), "ib-ndr", "llama-3.1-8b")
    >>> len(pp.replay_figure(replay).axes)
    2
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    attrs = replay.attrs
    label = label or ", ".join(str(v) for v in (f"{attrs['contention']} contention" if "contention" in attrs else None,
                                                 attrs.get("mode")) if v)
    delay_cdf({label or "handoff_delay_ms": replay}, ax=axes[0])
    link_timeline(replay, ax=axes[1])
    return fig


def calibration(
    nbytes: Any, measured_ms: Any, link: Link, *, n_blocks: Any = None, n_messages: Any = None,
    compare: Sequence[Link | str] = (), legend: bool = True, ax: Axes | None = None, **kwargs: Any,
) -> Axes:
    """Measured transfer times against a fitted link's predictions (and other links', e.g. line rate).

    Log-log over transfer size: the measurements as points, each link's prediction as a
    line through the same sizes (and block counts), its largest relative error in the legend.

    Parameters
    ----------
    nbytes, measured_ms
        The measurements (bytes, ms), as given to :func:`perfmodel.fit_link`.
    link
        The fitted link.
    n_blocks, n_messages
        Blocks and messages of each measurement (for links with per-block and per-message costs).
    compare
        Other links (or preset names) drawn for comparison.
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot` for the measurements.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np, perfmodel, perfmodel.plotting as pp
    >>> nbytes = np.geomspace(1e4, 1e9, 8)
    >>> measured = 0.05 + nbytes / 40e9 * 1000
    >>> ax = pp.calibration(nbytes, measured, perfmodel.fit_link(nbytes, measured, name="fit"), compare=["ib-ndr"],
    ...                     ax=plt.subplots()[1])
    >>> [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()]
    ['measured', 'fit', 'ib-ndr']
    """
    ax = _ax(ax)
    x = np.asarray(nbytes, dtype=float)
    t = np.asarray(measured_ms, dtype=float)
    blocks, messages = (np.zeros_like(x) if n is None else np.broadcast_to(np.asarray(n, dtype=float), x.shape)
                        for n in (n_blocks, n_messages))
    order = np.argsort(x, kind="stable")
    ax.plot(x[order], t[order], linestyle="none", **{"marker": "o", "color": "0.1", "label": "measured", **kwargs})
    for candidate, style in zip([link, *map(get_link, compare)], _styles()):
        predicted = np.asarray(candidate.transfer_ms(x, blocks, messages), dtype=float)
        worst = float(np.max(np.abs(predicted - t) / t))
        ax.plot(x[order], predicted[order], label=f"{candidate.name}: max error {worst:.0%}",
                **{**style, "marker": None})
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_axis(ax.yaxis)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _si(v) + "B"))
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("transfer time (ms)")
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        ax.legend(fontsize="small")
    return ax


# --- replay grids ------------------------------------------------------------------------------

_STATS = ("handoffs", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms", "mean_queue_ms", "link_utilisation",
          "bytes_moved", "bytes_saved_by_prefix_reuse", "zero_delay_share")


def _grid_axes(df: pd.DataFrame) -> list[str]:
    """The configuration columns of a replay grid that vary: numeric ones (sizes: the natural x axis)
    first, then labels, each in the grid's order."""
    varying = [c for c in df.columns if c not in _STATS and df[c].nunique(dropna=False) > 1]
    numeric = [c for c in varying if pd.api.types.is_numeric_dtype(df[c])]
    return numeric + [c for c in varying if c not in numeric]


def grid_percentiles(
    df: pd.DataFrame, x: str | None = None, hue: str | None = None, *, stat: str = "p99_ms",
    budget_ms: float | None = None, legend: bool = True, ax: Axes | None = None, **kwargs: Any,
) -> Axes:
    """A replay grid's statistic (default the p99 handoff delay) against one configuration axis,
    one line per value of another, with the budget marked.

    Parameters
    ----------
    df
        From :func:`perfmodel.replay_grid`.
    x, hue
        Configuration columns (default: the first two that vary); every other varying
        column must be narrowed to one value first (the error names them).
    stat
        A summary column (``p50_ms``, ``p90_ms``, ``p99_ms``, ``mean_ms``, ...).
    budget_ms
        A horizontal line at the budget.
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot`.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.replay_grid(perfmodel.synthetic_trace(800, 30, seed=0), model="llama-3.1-70b",
    ...                              link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 2, 4], contention="fifo")
    >>> ax = pp.grid_percentiles(grid, budget_ms=100, ax=plt.subplots()[1])
    >>> ax.get_xlabel(), [line.get_label() for line in ax.get_lines()][:2]
    ('decode_workers', ['ib-ndr', '8x ib-ndr'])
    """
    ax = _ax(ax)
    varying = _grid_axes(df)
    x = x or (varying[0] if varying else None)
    if x is None:
        raise ValueError("grid_percentiles: no configuration axis varies. Fix: pass a grid with a list on some axis")
    if hue is None:
        others = [c for c in varying if c != x]
        hue = others[0] if others else None
    _require(df, [x, stat] + ([hue] if hue else []))
    rest = [c for c in varying if c not in (x, hue)]
    if rest:
        raise ValueError(f"grid_percentiles: the columns {rest} vary too. Fix: select one value of each, e.g. "
                         f"df[df[{rest[0]!r}] == ...]")
    groups = df.groupby(hue, sort=False, observed=True) if hue else [(None, df)]
    for (key, part), style in zip(groups, _styles()):
        part = part.sort_values(x)
        ax.plot(part[x].astype(str) if not pd.api.types.is_numeric_dtype(part[x]) else part[x], part[stat],
                label=None if key is None else str(key), **{**style, **kwargs})
    if budget_ms is not None:
        ax.axhline(budget_ms, color="0.4", linewidth=0.8, linestyle=":")
        ax.annotate(f"{budget_ms:g} ms\nbudget", (1.0, budget_ms), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", ha="left", va="center", fontsize="small", color="0.3",
                    annotation_clip=False)  # beside the axes, never on the data
    if pd.api.types.is_numeric_dtype(df[x]) and df[x].min() > 0 and df[x].max() / df[x].min() >= 4:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xticks(sorted(df[x].unique()))
    if stat.endswith("_ms"):
        ax.set_yscale("log")
        _plain_log_axis(ax.yaxis)
    ax.set_xlabel(x)
    ax.set_ylabel(stat.replace("_ms", " handoff delay (ms)") if stat.endswith("_ms") else stat)
    ax.grid(True, alpha=0.3)
    if legend and hue:
        ax.legend(title=hue, fontsize="small")
    return ax


def grid_budget(
    df: pd.DataFrame, x: str | None = None, y: str | None = None, *, stat: str = "p99_ms", budget_ms: float,
    ax: Axes | None = None, **kwargs: Any,
) -> Axes:
    """Which configurations meet the budget: a replay grid's statistic over two configuration axes,
    each cell labelled with its value, the cells within budget outlined and ticked.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.replay_grid(perfmodel.synthetic_trace(800, 30, seed=0), model="llama-3.1-70b",
    ...                              link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 2, 4], contention="fifo")
    >>> ax = pp.grid_budget(grid, budget_ms=100, ax=plt.subplots()[1])
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('decode_workers', 'link')
    """
    ax = _ax(ax)
    varying = _grid_axes(df)
    x = x or (varying[0] if varying else None)
    y = y or next((c for c in varying if c != x), None)
    if x is None or y is None:
        raise ValueError("grid_budget: needs two configuration axes that vary. Fix: pass x= and y=")
    _require(df, [x, y, stat])
    rest = [c for c in varying if c not in (x, y)]
    if rest:
        raise ValueError(f"grid_budget: the columns {rest} vary too. Fix: select one value of each, e.g. "
                         f"df[df[{rest[0]!r}] == ...]")
    table = df.pivot_table(index=y, columns=x, values=stat, aggfunc="first", observed=True, sort=False)
    values = table.to_numpy(float)
    positive = values[np.isfinite(values) & (values > 0)]
    norm = LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size and positive.max() > positive.min() \
        else None
    mesh = ax.imshow(values, norm=norm, **{"cmap": "viridis", "aspect": "auto", **kwargs})
    _colorbar(ax.figure, mesh, ax=ax, label=stat)
    for (row, column), value in np.ndenumerate(values):
        met = value <= budget_ms
        ax.text(column, row, f"{value:.3g}" + (" ✓" if met else ""), ha="center", va="center", fontsize="small",
                color="white" if norm is None or norm(value) < 0.6 else "black",
                fontweight="bold" if met else "normal")
        if met:
            ax.add_patch(plt.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=2))
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns])
    ax.set_yticks(range(len(table.index)), [str(i) for i in table.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    what = stat.replace("_ms", " handoff delay (ms)") if stat.endswith("_ms") else stat
    ax.set_title(f"{what}; ✓ within {budget_ms:g} ms", fontsize="medium")
    return ax


def replay_grid_figure(df: pd.DataFrame, *, budget_ms: float, stat: str = "p99_ms") -> Any:
    """A replay grid at a glance: the statistic against the first varying axis (a line per value of
    the second), and which configurations meet the budget. Other varying axes: one row of panels each.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.replay_grid(perfmodel.synthetic_trace(500, 30, seed=0), model="llama-3.1-70b",
    ...                              link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 2], contention="fifo")
    >>> len(pp.replay_grid_figure(grid, budget_ms=100).axes)  # two panels and a colour bar
    3
    """
    varying = _grid_axes(df)
    if not varying:
        raise ValueError("replay_grid_figure: no configuration axis varies. Fix: give a list on some axis")
    x, hue = varying[0], (varying[1] if len(varying) > 1 else None)
    rest = varying[2:]
    keys = list(df[rest].drop_duplicates().itertuples(index=False, name=None)) if rest else [()]
    if len(keys) > 8:
        raise ValueError(f"{len(keys)} rows of panels ({' x '.join(rest)}) are too many for one figure. Fix: give "
                         "fewer values, or plot parts of the grid with grid_percentiles and grid_budget")
    fig, axs = plt.subplots(len(keys), 2 if hue else 1, figsize=(12 if hue else 6, 4.2 * len(keys)), squeeze=False,
                            layout="constrained")
    for row, key in zip(axs, keys):
        part = df.loc[np.logical_and.reduce([df[c] == v for c, v in zip(rest, key)])] if rest else df
        grid_percentiles(part, x, hue, stat=stat, budget_ms=budget_ms, ax=row[0])
        if key:
            row[0].set_title(", ".join(f"{c}={v}" for c, v in zip(rest, key)), fontsize="medium")
        if hue:
            grid_budget(part, x, hue, stat=stat, budget_ms=budget_ms, ax=row[1])
    return fig
