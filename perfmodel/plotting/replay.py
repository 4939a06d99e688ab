"""Figures of trace replays: delay distributions, comparisons of replays, and transfers in flight over time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..errors import InputError, check_whole, warn
from ._style import (
    AXIS_LABELS,
    UNDRAWN_DELAYS,
    axes_or_current,
    line_styles,
    log_line,
    log_log,
    one_row_per,
    plain_log_axis,
    require,
    say_not_drawn,
    si,
    tokens,
)


def _series(data: Any) -> dict[str, np.ndarray]:
    """Delays by label, from a Series/array, a replay/facade frame, or a mapping of those."""
    if isinstance(data, Mapping):
        return {str(k): next(iter(_series(v).values())) for k, v in data.items()}
    if isinstance(data, pd.DataFrame):
        require(data, ["handoff_delay_ms"], "delay figures", "perfmodel.replay_handoffs")
        data = data["handoff_delay_ms"]
    label = getattr(data, "name", None) or "handoff_delay_ms"
    return {str(label): pd.Series(data).to_numpy(dtype=float, na_value=np.nan)}


def _delays(data: Any, percentiles: Sequence[float]) -> dict[str, np.ndarray]:
    """The delays to draw by label, missing ones (NaN: no handoff) left out: InputError for negative delays,
    percentiles outside [0, 100] or no delay at all; a warning names a series with none."""
    marks = np.asarray(percentiles, dtype=float).reshape(-1)
    if not (np.isfinite(marks) & (marks >= 0) & (marks <= 100)).all():
        raise InputError(
            "delay_cdf", f"percentiles {list(percentiles)} are not all in [0, 100]", "pass e.g. [50, 90, 99]"
        )
    series = _series(data)
    curves = {label: values[~np.isnan(values)] for label, values in series.items()}
    for label, values in curves.items():
        if (values < 0).any():
            raise InputError(
                "delay_cdf",
                f"{label!r} holds negative delays (first: {values[values < 0][0]:g} ms), which no handoff takes",
                "pass delays >= 0 ms",
            )
    empty = [label for label, values in curves.items() if not values.size]
    if len(empty) == len(curves):
        raise InputError("delay_cdf", "no delays to draw (none given, or all missing)", "pass delays in ms")
    unshown = [label for label, values in curves.items() if values.size and not _shown(values)]
    if len(empty) + len(unshown) == len(curves):  # (a legend of lines a log axis cannot show: none drawn)
        raise InputError(
            "delay_cdf",
            "no delay is a finite number > 0 (every one 0 ms or infinite), so a log axis shows none",
            "pass delays with some > 0 ms",
        )
    if empty:
        warn(f"delay_cdf: not drawn: {', '.join(map(repr, empty))} (no delays: none given, or all missing)")
    if unshown:
        warn(
            f"delay_cdf: not drawn: {', '.join(map(repr, unshown))} (every delay 0 ms or infinite: a log axis shows none)"
        )
    return {label: values for label, values in curves.items() if values.size and _shown(values)}


def _shown(values: np.ndarray) -> bool:
    """Whether a log axis shows some of ``values`` (one is finite and > 0)."""
    return bool((np.isfinite(values) & (values > 0)).any())


def _percentiles(ordered: np.ndarray, percentiles: Sequence[float]) -> np.ndarray:
    """Percentiles of sorted delays, infinite ones included: inf where a percentile falls among them."""
    finite = ordered[np.isfinite(ordered)]
    big = np.finfo(float).max  # (interpolating towards inf gives NaN at a whole rank: towards the largest float)
    marks = np.percentile(np.where(np.isinf(ordered), big, ordered), percentiles)
    return np.where(marks > (finite.max() if finite.size else -1.0), np.inf, marks)


def delay_cdf(
    data: Any,
    *,
    percentiles: Sequence[float] = (50, 90, 99),
    ax: Axes | None = None,
) -> Axes:
    """Distribution (empirical CDF) of handoff delays, with percentiles marked.

    Parameters
    ----------
    data
        Delays in ms: a Series or array, a frame with a ``handoff_delay_ms`` column
        (a replay, the facade's output assigned), or a mapping label -> either.
        Missing delays (NaN: no handoff) are left out; a series with none, or with none a log axis shows
        (every one 0 ms or infinite), is not drawn nor in the legend, and a warning names it; no series to
        draw is an error, as is a negative delay. Infinite
        delays (no bandwidth) count in the fractions, so a curve stops below 1 by their share
        (which its label gives, as it gives the share at 0 ms, which a log axis cannot show), and a
        percentile among them reads ``inf``.
    percentiles
        Percentiles in [0, 100] marked on each line (default p50, p90, p99); their values are written beside
        the marks of one line, and in the legend when there are several.
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
    >>> import numpy as np, perfmodel.plotting as pp
    >>> ax = pp.delay_cdf({"ib-ndr": np.linspace(1, 100, 50), "nvlink4": np.linspace(0.1, 10, 50)}, ax=ax)
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['ib-ndr: p50 50.5, p90 90.1, p99 99 ms', 'nvlink4: p50 5.05, p90 9.01, p99 9.9 ms']
    """
    ax = axes_or_current(ax)
    curves = _delays(data, percentiles)
    for (label, values), style in zip(curves.items(), line_styles()):
        ordered = np.sort(values)
        fraction = np.arange(1, ordered.size + 1) / ordered.size
        finite = np.isfinite(ordered)
        zero, infinite = float(np.mean(ordered == 0)), float(np.mean(~finite))
        notes = [f"{zero:.1%} at 0 ms"] * bool(zero) + [f"{infinite:.1%} infinite"] * bool(infinite)
        if notes:  # a log axis cannot show 0 ms (e.g. full prefix-cache hits) nor inf: say how many there are
            label = f"{label} ({', '.join(notes)})"
        marks = _percentiles(ordered, percentiles)
        values_ms = ", ".join(f"p{p:g} {value:.3g}" for p, value in zip(percentiles, marks))
        if len(curves) > 1 and len(percentiles):  # values in the legend: on the plot, curves' labels collide
            label = f"{label}: {values_ms} ms"
        (line,) = ax.step(ordered[finite], fraction[finite], where="post", label=label, linestyle=style["linestyle"])
        shown = np.isfinite(marks)
        ax.plot(
            marks[shown],
            np.asarray(percentiles)[shown] / 100,
            linestyle="none",
            marker=style["marker"],
            color=line.get_color(),
        )
        for p, value in zip(percentiles, marks) if len(curves) == 1 else ():
            ax.annotate(  # (an infinite one at the right edge)
                f"p{p:g} {value:.3g} ms",
                (value, p / 100) if np.isfinite(value) else (1.0, p / 100),
                xycoords="data" if np.isfinite(value) else ("axes fraction", "data"),
                textcoords="offset points",
                xytext=(4, -10) if np.isfinite(value) else (-4, -10),
                ha="left" if np.isfinite(value) else "right",
                fontsize="x-small",
                color=line.get_color(),
            )
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_ylim(0, 1.02)  # fraction axis stays linear
    ax.set_xlabel(AXIS_LABELS["handoff_delay_ms"])
    ax.set_ylabel("fraction of handoffs")
    ax.grid(True, alpha=0.3)
    if len(curves) > 1 and len(percentiles):  # long entries: below the axes, where they hide no curve
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    else:
        ax.legend(fontsize="small")
    return ax


def compare(
    before: Any,
    after: Any,
    *,
    labels: tuple[str, str] = ("before", "after"),
    x: str = "num_input_tokens",
    ax: Axes | None = None,
) -> Axes:
    """One what-if against another.

    Two sweep frames (one row per ``x``): both delay curves, the gap shaded, and the
    speed-up at the largest ``x`` written on the plot. A curve a log axis cannot show (delays
    NaN, infinite or 0 ms) is not drawn nor in the legend, and a warning names it; neither
    drawable is an error. Anything else (per-request delays:
    Series, arrays, replay frames): their two CDFs, as :func:`delay_cdf` draws them.

    Parameters
    ----------
    before, after : pandas.DataFrame
        Two results of :func:`perfmodel.sweep` or two replays.
    labels : tuple of str
        Their names in the legend.
    x : str
        The column on the x axis.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: the current Axes).

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
    >>> tokens = [1024, 8192, 65536]
    >>> ib = perfmodel.sweep(link="ib-ndr", model="llama-3.1-70b", num_input_tokens=tokens)
    >>> nv = perfmodel.sweep(link="nvlink4", model="llama-3.1-70b", num_input_tokens=tokens)
    >>> ax = pp.compare(ib, nv, labels=("400G InfiniBand", "NVLink 4"), ax=ax)
    >>> [line.get_label() for line in ax.get_lines()]
    ['400G InfiniBand', 'NVLink 4']
    """
    ax = axes_or_current(ax)
    if not (isinstance(before, pd.DataFrame) and isinstance(after, pd.DataFrame) and x in before and x in after):
        return delay_cdf({labels[0]: before, labels[1]: after}, ax=ax)
    for frame, what in ((before, labels[0]), (after, labels[1])):
        require(frame, [x, "handoff_delay_ms"], "compare")
        one_row_per(frame, [x], f"compare ({what})")
    merged = pd.merge(before[[x, "handoff_delay_ms"]], after[[x, "handoff_delay_ms"]], on=x, suffixes=("_0", "_1"))
    if merged.empty:
        raise ValueError(f"compare: the two frames share no {x} values. Fix: sweep the same {x} grid for both")
    merged = merged.sort_values(x)
    xs = merged[x].to_numpy(float)
    ys = [merged[c].to_numpy(float, na_value=np.nan) for c in ("handoff_delay_ms_0", "handoff_delay_ms_1")]
    drawn, skipped, partly = 0, list[str](), list[str]()
    for y, label, style in zip(ys, labels, line_styles()):
        line, left_out = log_line(ax, xs, y, label, style, UNDRAWN_DELAYS)
        drawn += line is not None
        (partly if line is not None else skipped).extend([left_out] if left_out else [])
    say_not_drawn("compare", skipped, partly, drawn)
    both = np.isfinite(xs) & (xs > 0) & np.logical_and.reduce([np.isfinite(y) & (y > 0) for y in ys])
    ax.fill_between(xs, ys[0], ys[1], where=both, color="0.6", alpha=0.25)
    if both[-1]:
        ratio = ys[0][-1] / ys[1][-1]
        where = tokens(xs[-1]) if x == "num_input_tokens" else si(xs[-1])
        ax.annotate(
            f"{ratio:.3g}x at {where}",
            (xs[-1], ys[1][-1]),
            textcoords="offset points",
            xytext=(-6, 8),
            ha="right",
            fontsize="small",
        )
    log_log(ax, x, AXIS_LABELS["handoff_delay_ms"])
    return ax


def link_timeline(replay: pd.DataFrame, *, bins: int | None = None, ax: Axes | None = None) -> Axes:
    """Transfers in flight over time, from a trace replay (``start_ms``/``end_ms`` per transfer).

    Few transfers are drawn exactly (a step each time one starts or ends); many (or
    ``bins`` given) as the mean number in flight per time bin, computed exactly from the
    step function's integral, so a long replay stays readable.

    Parameters
    ----------
    replay : pandas.DataFrame
        From :func:`perfmodel.replay_handoffs`.
    bins : int, optional
        Time bins (default: from the replay's length).
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

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
    ax = axes_or_current(ax)
    require(replay, ["start_ms", "end_ms"], "link_timeline", "perfmodel.replay_handoffs")
    done = replay[["start_ms", "end_ms"]].dropna()
    done = done[done["end_ms"] > done["start_ms"]]
    times = np.concatenate([done["start_ms"].to_numpy(), done["end_ms"].to_numpy()]) / 1000.0
    steps = np.concatenate([np.ones(len(done)), -np.ones(len(done))])
    order = np.lexsort((steps, times))  # at equal times, ends before starts
    times, busy = times[order], np.cumsum(steps[order])
    bins = check_whole("bins", (0 if len(done) <= 250 else 300) if bins is None else bins)  # (0: no bins)
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


def replay_figure(replay: pd.DataFrame, *, label: str | None = None) -> Any:
    """A trace replay at a glance: the delay CDF (percentiles marked) and the transfers in flight; a replay with
    no delay a log axis shows (every one 0 ms, infinite or missing) is an error (:class:`perfmodel.InputError`),
    not a figure of empty panels.

    Parameters
    ----------
    replay : pandas.DataFrame
        From :func:`perfmodel.replay_handoffs`.
    label : str, optional
        The replay's name in the title.

    Returns
    -------
    matplotlib.figure.Figure
        A new figure (close it with ``matplotlib.pyplot.close`` when done).

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
    label = label or ", ".join(
        str(v) for v in (f"{attrs['contention']} contention" if "contention" in attrs else None, attrs.get("mode")) if v
    )
    try:
        delay_cdf({label or "handoff_delay_ms": replay}, ax=axes[0])
    except InputError:  # (no delay a log axis shows: no figure, rather than empty panels)
        plt.close(fig)
        raise
    link_timeline(replay, ax=axes[1])
    return fig
