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
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .links import LINKS, Link

__all__ = ["compare", "delay_cdf", "delay_vs_tokens", "heatmap", "link_timeline", "required_bandwidth"]

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


def _tokens_axis(axis: Any) -> None:
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_major_formatter(FuncFormatter(_tokens))
    axis.set_minor_formatter(NullFormatter())


def _log_log(ax: Axes, x: str, ylabel: str, *, legend_title: str | None = None, legend: bool = True) -> None:
    """Log-log axes with token ticks on x (when x is prompt length), labels, grid and legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
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
        varying = [c for c in df.columns if c not in keys and c not in
                   ("handoff_delay_ms", "kv_bytes_per_token", "kv_transfer_bandwidth") and df[c].nunique() > 1]
        raise ValueError(f"{what}: several rows per {list(keys)} (the columns {varying} vary too). "
                         f"Fix: select one value of each, e.g. df[df['{(varying or ['...'])[0]}'] == ...]")


def delay_vs_tokens(
    df: pd.DataFrame, hue: str | None = None, *, x: str = "num_input_tokens", budgets_ms: Sequence[float] = (),
    ax: Axes | None = None,
) -> Axes:
    """Handoff delay against prompt length, log-log, one line per value of ``hue``.

    Parameters
    ----------
    df
        A sweep frame (``num_input_tokens`` and ``handoff_delay_ms`` columns).
    hue
        The column that tells the lines apart (e.g. ``"link"``, ``"model"``,
        ``"kv_transfer_bandwidth"``); None draws one line.
    x
        The x column (default prompt length in tokens).
    budgets_ms
        Horizontal reference lines (latency budgets, ms).
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
    >>> import perfmodel, perfmodel.plotting as pp
    >>> df = perfmodel.sweep(link=["nvlink4", "ib-ndr"], model="llama-3.1-70b",
    ...                      num_input_tokens=[1024, 8192, 32768])
    >>> ax = pp.delay_vs_tokens(df, hue="link", budgets_ms=[50], ax=ax)
    >>> [line.get_label() for line in ax.get_lines()][:2]
    ['nvlink4', 'ib-ndr']
    """
    ax = _ax(ax)
    _require(df, [x, "handoff_delay_ms"] + ([hue] if hue else []))
    _one_row_per(df, [x] + ([hue] if hue else []), "delay_vs_tokens")
    groups = df.groupby(hue, sort=False, observed=True) if hue else [(None, df)]
    for (key, part), style in zip(groups, _styles()):
        part = part.sort_values(x)
        label = _si(key) + " GB/s" if hue == "kv_transfer_bandwidth" else (None if key is None else str(key))
        ax.plot(part[x], part["handoff_delay_ms"], label=label, **style)
    for budget in budgets_ms:
        ax.axhline(budget, color="0.4", linewidth=0.8, linestyle=":")
        ax.annotate(f"{budget:g} ms", (1.0, budget), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    fontsize="small", color="0.3")
    _log_log(ax, x, _AXIS_LABELS["handoff_delay_ms"], legend_title=hue, legend=bool(hue))
    return ax


def heatmap(
    df: pd.DataFrame, x: str = "num_input_tokens", y: str = "kv_transfer_bandwidth", *,
    budgets_ms: Sequence[float] = (10, 50, 100), ax: Axes | None = None,
) -> Axes:
    """Handoff delay over a 2-D grid, log colour scale, with contour lines at budgets.

    Parameters
    ----------
    df
        A sweep frame with exactly one row per (``x``, ``y``) pair.
    x, y
        The grid's columns (default prompt length and bandwidth, both drawn log-scaled).
    budgets_ms
        Delays (ms) at which contour lines are drawn and labelled.
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
    for axis_name, column in (("x", x), ("y", y)):  # scales first: clabel places labels in display space
        values = xs if axis_name == "x" else ys
        if values.min() > 0 and values.max() / values.min() > 20:
            getattr(ax, f"set_{axis_name}scale")("log", base=2 if column == "num_input_tokens" else 10)
        if column == "num_input_tokens":
            _tokens_axis(getattr(ax, f"{axis_name}axis"))
    mesh = ax.pcolormesh(xs, ys, z, norm=norm, shading="nearest", cmap="viridis")
    ax.figure.colorbar(mesh, ax=ax, label=_AXIS_LABELS["handoff_delay_ms"])
    levels = [b for b in sorted(budgets_ms) if positive.size and positive.min() < b < positive.max()]
    if levels:
        contours = ax.contour(xs, ys, z, levels=levels, colors="white", linewidths=1.2,
                              linestyles=_STYLES[:len(levels)])
        ax.clabel(contours, fmt=lambda v: f"{v:g} ms", fontsize="small")
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
    from .links import get_link

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
