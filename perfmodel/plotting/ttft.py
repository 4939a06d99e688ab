"""Figures of TTFT under load: percentiles against request rate (the knee), the breakdown of the p50 and
p99 requests, and the KV memory held over time. They draw what :func:`perfmodel.ttft_grid` and
:func:`perfmodel.replay_ttft` computed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..errors import InputError
from ..inputs.words import count
from ._style import axes_or_current, line_styles, require
from .grid import refuse_other_axes

#: The parts of a request's TTFT, in the order they happen, with their legend labels.
PARTS = {
    "queue_ms": "prefill queue",
    "prefill_ms": "prefill",
    "admission_wait_ms": "decode admission",
    "link_wait_ms": "link wait",
    "transfer_ms": "transfer",
    "decode_step_ms": "first decode step",
}


def ttft_vs_rate(grid: pd.DataFrame, *, by: str | None = None, ax: Axes | None = None) -> Axes:
    """TTFT percentiles against request rate, one pair of curves per value of ``by``: the knee where the
    handoff's milliseconds become seconds of queue.

    The p99 TTFT is drawn solid, the p50 dashed, and the handoff's own p99 (``handoff_delay_p99_ms``) thin and
    dotted, so that the handoff's share stays visible beside the queue. The y axis is logarithmic: a value of
    0 ms (say, a handoff that carries no bytes) lies below it: the curve leaves a gap there (with markers on its
    other points) and its legend label says at how many rates (``"p99 handoff (0 ms at 2 of 3 rates: below the
    axis)"``).

    A grid that varies a column besides the rate and ``by`` (say ``prefill_workers``) is refused, naming the
    columns, as :func:`perfmodel.plotting.grid_percentiles` and :func:`perfmodel.plotting.grid_budget` refuse
    it: a curve through its rows would zig-zag between configurations, and a curve per remaining combination
    would triple the lines (p99, p50 and handoff) for every value of every column, past reading. Select one
    value of each first, or pass ``by=`` the one that varies.

    Parameters
    ----------
    grid
        A :func:`perfmodel.ttft_grid` result with a ``request_rate_per_s`` axis, and no other varying
        column than ``by``.
    by
        A column of the grid whose values get a curve each (e.g. ``"link"``, ``"links"``,
        ``"prefill_workers"``); default: one curve (so no other column may vary).
    ax
        Axes to draw on (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> grid = perfmodel.ttft_grid(perfmodel.synthetic_trace(500, 10, seed=0), link=["ib-ndr", 5.0],
    ...                            model="llama-3.1-8b", prefill_tokens_per_s=60_000,
    ...                            request_rate_per_s=[5, 10, 12], progress=False)
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> len(pp.ttft_vs_rate(grid, by="link", ax=ax).get_lines())   # p99, p50 and the handoff's p99 per link
    6
    """
    needed = ["request_rate_per_s", "p50_ms", "p99_ms", "handoff_delay_p99_ms"] + ([by] if by else [])
    missing = [c for c in needed if c not in grid.columns]
    fix = "pass a perfmodel.ttft_grid(...) result with a list of request_rate_per_s"
    if missing:
        fix = "pass by= one of the grid's columns" if missing[0] == by else fix
        raise InputError("ttft_vs_rate", f"the frame has no column {missing[0]!r}; its columns: {list(grid)}", fix)
    if not len(grid):
        raise InputError("ttft_vs_rate", "the frame has no rows, so there is nothing to draw", fix)
    refuse_other_axes(grid, ["request_rate_per_s"] + ([by] if by else []), "ttft_vs_rate", "" if by else "by")
    ax = axes_or_current(ax)
    groups = [(None, grid)] if by is None else list(grid.groupby(by, sort=False, observed=True))
    for (key, rows), style in zip(groups, line_styles()):
        rows = rows.sort_values("request_rate_per_s")
        name = "" if key is None else f"{by}={key}: "
        curves: list[tuple[str, str, dict[str, Any]]] = [
            ("p99_ms", "p99 TTFT", style),
            ("p50_ms", "p50 TTFT", {"linestyle": "--"}),
            ("handoff_delay_p99_ms", "p99 handoff", {"linestyle": ":", "linewidth": 1}),
        ]
        color = None
        for column, what, look in curves:
            values, label, marker = _on_log_axis(rows[column], f"{name}{what}")
            (line,) = ax.plot(rows["request_rate_per_s"], values, label=label, color=color, **{**marker, **look})
            color = line.get_color()
    ax.set_yscale("log")
    ax.set(xlabel="request rate (requests/s)", ylabel="time (ms)")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def _on_log_axis(values: pd.Series, label: str) -> tuple[np.ndarray, str, dict[str, Any]]:
    """A curve's values on a log axis, 0 ms left as gaps (never clipped to a made-up value), its legend label
    saying at how many rates it is 0 ms, and a marker where it has gaps (so a lone point between them shows)."""
    ys = values.to_numpy(dtype=float)
    zeros = int((ys == 0).sum())
    if not zeros:
        return ys, label, {}
    note = f" (0 ms at {zeros} of {count(ys.size, 'rate')}: below the axis)"
    return np.where(ys == 0, np.nan, ys), label + note, {"marker": ".", "markersize": 5}


def ttft_breakdown(ttft: pd.DataFrame, *, percentiles: tuple[float, ...] = (50, 99), ax: Axes | None = None) -> Axes:
    """The TTFT of the requests near each percentile, as stacked bars of its parts (ms).

    Each bar is the mean of each part over the requests whose TTFT lies between the ``q - 1`` and ``q + 1``
    percentiles (clipped to 0 and 100), so that it adds up to about the percentile itself: where the p99's
    time goes (queue, prefill, decode admission, link wait, transfer, first decode step).

    A frame with requests whose TTFT or a part of it is missing or infinite (never a
    :func:`perfmodel.replay_ttft` result) is refused, naming how many and the column, rather than drawn as
    percentiles of some of its requests.

    Parameters
    ----------
    ttft
        A :func:`perfmodel.replay_ttft` result.
    percentiles
        The percentiles to break down, each in [0, 100] (default p50 and p99).
    ax
        Axes to draw on (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> ttft = perfmodel.replay_ttft(perfmodel.synthetic_trace(500, 10, seed=0), "ib-ndr", "llama-3.1-8b",
    ...                              prefill_tokens_per_s=60_000, decode_step_ms=20.0)
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> len(pp.ttft_breakdown(ttft, ax=ax).patches)   # 2 bars of 6 parts
    12
    """
    try:
        marks = np.asarray(percentiles, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        marks = np.array([np.nan])
    if not (np.isfinite(marks) & (marks >= 0) & (marks <= 100)).all() or not marks.size:
        problem = "are not all in [0, 100]" if marks.size else "are none, so there is no bar to draw"
        raise InputError(
            "ttft_breakdown", f"percentiles {list(np.atleast_1d(percentiles))} {problem}", "pass e.g. (50, 99)"
        )
    require(ttft, ["ttft_ms", *PARTS], "ttft_breakdown", "perfmodel.replay_ttft")
    if not len(ttft):
        raise InputError("ttft", "has no requests", "replay a trace with requests")
    for column in ["ttft_ms", *PARTS]:
        bad = ~np.isfinite(ttft[column].to_numpy(dtype=float, na_value=np.nan))
        if bad.any():
            raise InputError(
                "ttft_breakdown",
                f"{bad.sum():,} of {count(bad.size, 'request')} have no {column} (NaN or infinite; first at row "
                f"{ttft.index[np.argmax(bad)]!r}), so the bars would not add up to their percentiles",
                f"pass a perfmodel.replay_ttft(...) result, or leave those rows out first, e.g. ttft.dropna(subset=[{column!r}])",
            )
    ax = axes_or_current(ax)
    values = ttft["ttft_ms"].to_numpy(dtype=float)
    means = {}
    for q in marks:
        low, high = np.percentile(values, [max(q - 1, 0), min(q + 1, 100)])
        near = ttft[(values >= low) & (values <= high)]
        means[f"p{q:g}"] = near[list(PARTS)].mean()
    labels = list(means)
    bottom = np.zeros(len(labels))
    for column, label in PARTS.items():
        heights = np.array([means[k][column] for k in labels])
        ax.bar(labels, heights, bottom=bottom, label=label)
        bottom += heights
    for x, total in enumerate(bottom):
        ax.annotate(f"{total:,.0f} ms", (x, total), ha="center", va="bottom", fontsize="small")
    ax.set(ylabel="time to first token (ms)", xlabel="requests near the percentile")
    ax.legend(fontsize="small")
    return ax


def memory_held(ttft: pd.DataFrame, *, side: str = "prefill", ax: Axes | None = None) -> Axes:
    """KV tokens held over time on each worker (a step line each), with the capacity.

    The prefill side holds a request's prompt from its prefill's start until its handoff ends; the decode
    side its prompt and output tokens from its admission until it is done (which needs
    ``num_output_tokens`` in the trace).

    Parameters
    ----------
    ttft
        A :func:`perfmodel.replay_ttft` result.
    side
        ``"prefill"`` or ``"decode"``.
    ax
        Axes to draw on (default: the current Axes).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import perfmodel, perfmodel.plotting as pp
    >>> trace = perfmodel.synthetic_trace(300, 10, seed=0)
    >>> ttft = perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-8b", prefill_workers=2,
    ...                              prefill_tokens_per_s=60_000, prefill_kv_tokens=200_000)
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> len(pp.memory_held(ttft, ax=ax).get_lines())   # two workers and the capacity
    3
    """
    if side not in ("prefill", "decode"):
        raise InputError("side", f"must be 'prefill' or 'decode', got {side!r}", "pass side='prefill' or 'decode'")
    if side == "prefill":
        columns = ["prefill_worker", "prefill_start_ms", "transfer_end_ms", "num_input_tokens"]
        require(ttft, columns, "memory_held", "perfmodel.replay_ttft")
        worker, start, end, held = (ttft[c].to_numpy() for c in columns)
    else:
        if "done_ms" not in ttft or "num_output_tokens" not in ttft:
            raise InputError(
                "ttft",
                "has no done_ms or num_output_tokens, so decode memory is not known",
                "replay a trace with a num_output_tokens column",
            )
        worker, start, end = (ttft[c].to_numpy() for c in ("decode_worker", "admitted_ms", "done_ms"))
        held = (ttft["num_input_tokens"] + ttft["num_output_tokens"]).to_numpy()
    ax = axes_or_current(ax)
    for w, style in zip(np.unique(worker), line_styles()):
        mine = worker == w
        times = np.concatenate([start[mine], end[mine]])
        deltas = np.concatenate([held[mine], -held[mine]]).astype(float)
        order = np.lexsort((deltas, times))  # (a release before an acquisition at one instant)
        ax.step(
            times[order],
            np.cumsum(deltas[order]),
            where="post",
            label=f"{side} worker {w}",
            **{k: v for k, v in style.items() if k != "marker"},
        )
    capacity: Any = ttft.attrs.get(f"{side}_kv_tokens")
    if capacity is not None:
        ax.axhline(capacity, color="0.3", linestyle=":", label="capacity")
    ax.set(xlabel="time (ms)", ylabel="KV tokens held")
    ax.legend(fontsize="small")
    return ax
