"""What every figure shares: tick formats, line styles that read in greyscale, panel layouts with fixed
margins, titles that name the options a figure holds fixed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import cycle
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogFormatter, LogLocator, NullFormatter, NullLocator

from ..errors import InputError, warn
from ..inputs.table import NAMED_BY, SWEEP_AXES
from ..inputs.words import count

STYLES = ["-", "--", "-.", ":"]
#: The same styles for a colour bar's budget marks, in short dashes: at least two periods across the bar (the
#: named ones, scaled by the marks' width, left a dash-dot looking solid, like the solid line).
_BAR_STYLES = ["-", (0, (1.5, 1.0)), (0, (1.5, 0.7, 0.4, 0.7)), (0, (0.4, 0.8))]


_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


AXIS_LABELS = {
    "num_input_tokens": "prompt length (tokens)",
    "kv_transfer_bandwidth": "bandwidth (GB/s)",
    "handoff_delay_ms": "handoff delay (ms)",
    "kv_bytes_per_token": "KV bytes per token",
    "cache_hit_ratio": "destination cache hit ratio",
    "latency_ms": "latency (ms)",
}


def si(value: float, _pos: Any = None) -> str:
    """Compact tick labels: 512, 1k, 32k, 1M; infinite values as ``inf``.

    >>> si(32768), si(float("inf"))
    ('32.8k', 'inf')
    """
    if not np.isfinite(value):
        return f"{value:g}"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def tokens(value: float, _pos: Any = None) -> str:
    """Token-count tick labels in binary units, as prompt lengths are quoted: 512, 1k, 32k, 1M."""
    for scale, suffix in ((2**20, "M"), (2**10, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:g}"


class _PlainLogFormatter(LogFormatter):
    """The log ticks matplotlib would label (decades; minor ticks too when few decades show), written as
    plain numbers (0.01, 2, 10, 1k) rather than mathtext powers, which also cost ~10 ms each to render."""

    def __call__(self, x: float, pos: Any = None) -> str:
        return si(x) if super().__call__(x, pos) else ""


def plain_log_axis(axis: Any) -> None:
    """Plain-number labels on a decimal log axis (set after its scale: setting a scale resets them)."""
    axis.set_major_formatter(_PlainLogFormatter(10))
    axis.set_minor_formatter(_PlainLogFormatter(10))


def add_colorbar(fig: Any, mesh: Any, **kwargs: Any) -> Any:
    """A colour bar; on a log scale with plain-number labels, its minor ticks only when under two decades show."""
    bar = fig.colorbar(mesh, **kwargs)
    norm = mesh.norm
    if isinstance(norm, LogNorm):
        plain_log_axis(bar.ax.yaxis)
        if norm.vmax is not None and norm.vmin is not None and norm.vmax / norm.vmin >= 100:
            bar.minorticks_off()
    return bar


def tokens_axis(axis: Any) -> None:
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_major_formatter(FuncFormatter(tokens))
    axis.set_minor_formatter(NullFormatter())


def log_log(ax: Axes, x: str, ylabel: str, *, legend_title: str | None = None, legend: bool = True) -> None:
    """Log-log axes with token ticks on x (when x is prompt length), labels, grid and legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    if x == "num_input_tokens":
        tokens_axis(ax.xaxis)
    ax.set_xlabel(AXIS_LABELS.get(x, x))
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        ax.legend(title=legend_title, fontsize="small")


def axes_or_current(ax: Axes | None) -> Axes:
    return plt.gca() if ax is None else ax


def line_styles() -> Iterator[dict[str, Any]]:
    for i in cycle(range(len(STYLES) * len(_MARKERS))):
        yield {"linestyle": STYLES[i % len(STYLES)], "marker": _MARKERS[i % len(_MARKERS)], "markersize": 4}


def require(df: pd.DataFrame, columns: Sequence[str], where: str = "plot", source: str = "perfmodel.sweep") -> None:
    """Refuse a frame without the ``columns`` the figure ``where`` reads, naming ``source``, the function whose
    frames have them.

    >>> require(pd.DataFrame({"x": [1]}), ["ttft_ms"], "ttft_breakdown", "perfmodel.replay_ttft")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: ttft_breakdown: needs columns ['ttft_ms']; the frame has ['x']. Fix: pass a frame from perfmodel.replay_ttft(...), or name the columns.
    """
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(
            where,
            f"needs columns {missing}; the frame has {list(df.columns)}",
            f"pass a frame from {source}(...), or name the columns",
        )


def has_rows(df: pd.DataFrame, where: str) -> None:
    """Refuse a frame without rows: a figure of nothing is never drawn."""
    if len(df) == 0:
        raise InputError(where, "the frame has no rows, so there is nothing to draw", "pass a sweep with rows")


def check_budget(where: str, budget: Any) -> float:
    """A latency budget as a float: a real number, finite and > 0, or :class:`InputError` (the one check of
    every figure's budgets).

    >>> check_budget("grid_budget", 50)
    50.0
    >>> check_budget("grid_budget", 0)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: grid_budget: budget_ms 0 is not a finite number > 0. Fix: pass budgets in ms, e.g. 50.
    """
    fix = "pass budgets in ms, e.g. 50"
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, float, np.integer, np.floating)):
        raise InputError(where, f"budget_ms {budget!r} is not a number", fix)
    if not (np.isfinite(budget) and budget > 0):
        raise InputError(where, f"budget_ms {float(budget):g} is not a finite number > 0", fix)
    return float(budget)


def check_budgets(where: str, budgets: Any) -> list[float]:
    """Latency budgets as floats: one number (one budget) or a sequence of them, each as :func:`check_budget`
    takes it.

    >>> check_budgets("heatmap", 50), check_budgets("heatmap", (10, 50))
    ([50.0], [10.0, 50.0])
    """
    if isinstance(budgets, str) or not np.iterable(budgets):
        return [check_budget(where, budgets)]
    return [check_budget(where, budget) for budget in budgets]


def line_label(where: str, kwargs: dict[str, Any], hue: str | None) -> str | None:
    """The ``label`` keyword of a one-line plot (taken out of ``kwargs``); refused when ``hue`` names the lines."""
    label = kwargs.pop("label", None)
    if label is not None and hue is not None:
        raise InputError(
            where,
            f"label={label!r} cannot name the lines, which are named by the values of {hue!r}",
            f"drop label=, or rename the values of {hue!r}",
        )
    return None if label is None else str(label)


#: How a delay that a log axis cannot show is named (the ``why`` of :func:`log_line` for delays).
UNDRAWN_DELAYS = {"nan": "missing delays (NaN)", "inf": "infinite delays", "low": "0 ms delays"}


def log_line(
    ax: Axes, xs: np.ndarray, ys: np.ndarray, label: str | None, style: dict[str, Any], why: dict[str, str]
) -> tuple[Any, str]:
    """A line of the points a log-log plot can show (both values finite and > 0; the others leave gaps, never
    clipped to a made-up value): the line (None when no point can be shown, and nothing is drawn, so the legend
    never names it) and what was left out, in words (``why`` names NaN, inf and "low", i.e. <= 0, values of ys)."""
    ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    bad = ys[~ok]
    kinds = [why[k] for k, mask in (("nan", np.isnan(bad)), ("inf", np.isinf(bad)), ("low", bad <= 0)) if mask.any()]
    reason = " and ".join(kinds or ["x not > 0"])
    name = repr(label) if label else "the line"
    if not ok.any():
        return None, f"{name} ({reason})"
    (line,) = ax.plot(xs, np.where(ok, ys, np.nan), label=label, **style)
    return (
        line,
        "" if ok.all() else f"{name} at {np.count_nonzero(~ok)} of {count(ok.size, 'point')} ({reason})",
    )


def say_not_drawn(where: str, skipped: Sequence[str], partly: Sequence[str], drawn: int) -> None:
    """Refuse a figure with nothing drawn (InputError); else warn of the curves and points left out."""
    notes = ([f"not drawn: {', '.join(skipped)}"] if skipped else []) + (
        [f"points left out: {', '.join(partly)}"] if partly else []
    )
    if not drawn:
        raise InputError(
            where,
            "nothing to draw: a log axis shows finite values > 0 only" + (f"; {notes[0]}" if notes else ""),
            "pass data with finite values > 0",
        )
    if notes:
        warn(f"{where}: a log axis shows finite values > 0 only; " + "; ".join(notes))


def one_row_per(df: pd.DataFrame, keys: Sequence[str], what: str) -> None:
    if df.duplicated(list(keys)).any():
        varying = [c for c in _varying(df) if c not in keys]
        raise ValueError(
            f"{what}: several rows per {list(keys)} (the columns {varying} vary too). "
            f"Fix: select one value of each, e.g. df[df['{(varying or ['...'])[0]}'] == ...]"
        )


#: Columns a sweep computes (never an axis to tell lines apart by, unless swept directly).
_OUTPUTS = ("handoff_delay_ms", "transfer_bytes")


#: Columns a sweep derives from another axis (bytes per token from the model, bandwidth from the link).


def _varying(df: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """The axes with more than one value, in the frame's order (a sweep's axis order); a column
    derived from an axis of the frame (bytes per token of ``model``) is not an axis of its own."""
    derived = [c for c, names in NAMED_BY.items() if any(name in df.columns for name in names)]
    return [c for c in df.columns if c not in (*_OUTPUTS, *exclude, *derived) and df[c].nunique(dropna=False) > 1]


def default_hue(df: pd.DataFrame, x: str) -> str | None:
    """The one column that tells the lines apart when ``hue`` is not given (None: one line).

    A column that is a function of another (``kv_bytes_per_token`` of ``model``,
    ``kv_transfer_bandwidth`` of ``link`` or ``cluster``) does not count as a second varying axis.
    """
    varying = _varying(df, exclude=[x])
    if not varying:
        return None
    candidates = [c for c in varying if not df.duplicated([x, c]).any()]
    if candidates:
        return candidates[0]
    keys = [x, *varying]
    if df.duplicated(keys).any():  # (rows repeated, not axes mixed: said as such)
        raise ValueError(
            f"delay_vs_tokens: rows repeat the same {keys}. Fix: drop the repeated rows, e.g. df.drop_duplicates({keys})"
        )
    raise ValueError(
        f"delay_vs_tokens: several columns vary ({varying}), so one line per value of one of them "
        f"would mix the others. Fix: pass hue= one of them and select one value of the rest, e.g. "
        f"delay_vs_tokens(df[df[{varying[-1]!r}] == ...], hue={varying[0]!r})"
    )


def label_of(hue: str | None, key: Any) -> str | None:
    if key is None:
        return None
    return si(key) + " GB/s" if hue == "kv_transfer_bandwidth" else str(key)


def budget_colorbar(bar: Any, budgets_ms: Sequence[float]) -> None:
    """Mark latency budgets on a delay colour bar: each a line in its contour's style, labelled in ms."""
    for budget, style in zip(budgets_ms, cycle(_BAR_STYLES)):
        bar.ax.axhline(budget, color="white", linewidth=2.0, linestyle=style)
    if budgets_ms:  # named on the bar's free side (its own ticks are on the other)
        left = bar.ax.secondary_yaxis("left")
        left.set_yticks(list(budgets_ms), [f"{b:g} ms" for b in budgets_ms])
        left.yaxis.set_minor_locator(NullLocator())
        left.tick_params(labelsize="small", length=4)


#: The sweep axes that are options of a what-if (the panels of a figure), in sweep order.
_PANEL_AXES = tuple(name for name in SWEEP_AXES if name not in ("kv_transfer_bandwidth", "num_input_tokens"))


#: How a panel title names one option's value.
_DESCRIPTIONS: dict[str, Any] = {
    "model": str,
    "kv_bytes_per_token": lambda v: f"{si(v)} B/token",
    "tp": lambda v: f"TP{v}",
    "decode_tp": lambda v: f"to decode TP{v}",
    "link": lambda v: f"over {v}",
    "per_message_ms": lambda v: f"+{v * 1000:g} us/message",
    "kv_layout": lambda v: f"{v} messages",
    "kv_cache_dtype": lambda v: f"KV {v}",
    "latency_ms": lambda v: f"+{v:g} ms latency",
    "cache_hit_ratio": lambda v: f"{v:.0%} cached",
    "block_size": lambda v: f"block {v}",
    "state_bytes": lambda v: f"+{si(v)} B state",
    "scope": lambda v: "TP group bytes" if v == "group" else "one rank's bytes",
    "per_block_ms": lambda v: f"+{v:g} ms/block",
    "overlap": lambda v: "layer-wise" if v == "layerwise" else "after prefill",
    "prefill_ms": lambda v: f"prefill {v:g} ms",
    "prefill_tokens_per_s": lambda v: f"prefill {si(v)} tok/s",
    "layer_group": lambda v: f"{v} layers/group",
    "layerwise_min_tokens": lambda v: f"layer-wise from {tokens(v)}",
}


def describe_value(key: Any, value: Any) -> str:
    describe = _DESCRIPTIONS.get(key)
    return describe(value) if describe else f"{key}={value}"


def panels(df: pd.DataFrame, exclude: Sequence[str], max_panels: int) -> tuple[list[str], list[tuple], str]:
    """The axes that vary (one panel per combination), the combinations, and a title for the fixed ones."""
    present = [c for c in _PANEL_AXES if c in df.columns and c not in exclude]
    panel_axes = [c for c in present if df[c].nunique() > 1 and not (c == "kv_bytes_per_token" and "model" in df)]
    fixed = [c for c in present if c not in panel_axes and not (c == "kv_bytes_per_token" and "model" in df)]
    keys = list(df[panel_axes].drop_duplicates().itertuples(index=False, name=None)) if panel_axes else [()]
    if len(keys) > max_panels:
        raise ValueError(
            f"{len(keys)} panels ({' x '.join(panel_axes)}) are too many for one figure. Fix: give "
            f"fewer values of {', '.join(panel_axes)} (at most {max_panels} combinations)"
        )
    title = ", ".join([*(describe_value(c, df[c].iloc[0]) for c in fixed), *_defaults(df)])
    return panel_axes, keys, title


def _defaults(df: pd.DataFrame) -> list[str]:
    """What a sweep of models assumed where it has no column: the models' own KV dtype, TP 1, one rank."""
    if "model" not in df:
        return []
    return [
        text
        for column, text in (
            ("kv_cache_dtype", "KV in the model's dtype"),
            ("tp", "TP1"),
            ("scope", "one rank's bytes"),
        )
        if column not in df
    ]


#: Margins of the figure-level layouts, in inches: fixed, so no layout engine has to measure every
#: tick label at save time (constrained layout cost 0.6-0.7 s per figure of the main job).
MARGINS = dict(left=0.8, bottom=0.6, top=0.75, wspace=0.15, hspace=0.5)


def grid(n: int, width: float, height: float, right: float, gap: float | None = None) -> tuple[Any, np.ndarray]:
    """``n`` panels of ``width`` x ``height`` inches on a grid, ``gap`` inches apart side by side (default: the
    margins'), with ``right`` inches kept for a legend or colour bar."""
    columns = min(n, 2 if n <= 4 else 3)
    rows = -(-n // columns)
    m = {**MARGINS, **({} if gap is None else {"wspace": gap})}
    fig_width = m["left"] + columns * width + (columns - 1) * m["wspace"] + right
    fig_height = m["bottom"] + rows * height + (rows - 1) * m["hspace"] + m["top"]
    fig, axs = plt.subplots(rows, columns, figsize=(fig_width, fig_height), squeeze=False, sharex=True, sharey=True)
    fig.subplots_adjust(
        left=m["left"] / fig_width,
        right=1 - right / fig_width,
        bottom=m["bottom"] / fig_height,
        top=1 - m["top"] / fig_height,
        wspace=m["wspace"] / width,
        hspace=m["hspace"] / height,
    )
    for ax in axs.flat[n:]:
        ax.set_visible(False)
    return fig, axs


def fixed_positions(axs: np.ndarray) -> None:
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
            if not (axis.get_scale() == "log" and low > 0 and high < 100 * low):  # few decades: minor labels
                axis.set_minor_locator(NullLocator())


def side(fig: Any, right: float) -> tuple[float, float]:
    """The left edge and width (figure fractions) of the space kept on the right of a :func:`grid`."""
    width = fig.get_figwidth()
    return 1 - right / width, right / width


def text_width_in(text: str, size: str = "small") -> float:
    """How wide ``text`` is drawn at font ``size``, in inches (from the font's metrics, nothing drawn), with a
    margin of a tenth for the renderer's own rounding and padding."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    font = FontProperties(size=size)
    widths = [text_to_path.get_text_width_height_descent(line, font, ismath=False)[0] for line in text.splitlines()]
    return 1.1 * max(widths, default=0.0) / 72


def suptitle(fig: Any, text: str) -> None:
    """The figure's title, in the top margin above the panels' titles, on two lines where one is wider
    than the figure (broken at the comma nearest the middle)."""
    if text_width_in(text, "medium") > fig.get_figwidth() - 0.3 and ", " in text:
        middle = len(text) // 2
        cut = min((i for i in range(len(text)) if text.startswith(", ", i)), key=lambda i: abs(i - middle))
        text = text[: cut + 1] + "\n" + text[cut + 2 :]
    fig.suptitle(text, fontsize="medium", y=1 - 0.12 / fig.get_figheight(), va="top")
