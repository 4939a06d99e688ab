"""Figures of TTFT under load: percentiles against request rate (the knee), the breakdown of the p50 and
p99 requests, and the KV memory held over time. They draw what :func:`perfmodel.ttft_grid` and
:func:`perfmodel.replay_ttft` computed."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..errors import InputError, check_choice, not_a_number, shown
from ..inputs.coerce import non_numeric_kind
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


class _Reader(NamedTuple):
    """A figure as its messages name it: the figure, its frame's argument, the function whose frames it draws,
    what a row of them is, and what bad rows would make wrong."""

    where: str
    name: str
    source: str
    rows: str
    wrong: str


_BREAKDOWN = _Reader(
    "ttft_breakdown", "ttft", "perfmodel.replay_ttft", "request", "the bars would not add up to their percentiles"
)
_MEMORY = _Reader("memory_held", "ttft", "perfmodel.replay_ttft", "request", "the memory held would be wrong")
_KNEE = _Reader("ttft_vs_rate", "grid", "perfmodel.ttft_grid", "row", "the curves would be wrong")

#: The columns :func:`ttft_vs_rate` draws, with their rules (:func:`_columns`).
_KNEE_COLUMNS = {"request_rate_per_s": "rate", "p50_ms": "ms", "p99_ms": "ms", "handoff_delay_p99_ms": "ms"}

#: The columns :func:`memory_held` reads on each side: the worker, when its memory is taken and given back (ms,
#: and the replay's numbers of those two events, its order at one instant), and the tokens held.
_HELD = {
    "prefill": (
        "prefill_worker",
        "prefill_start_ms",
        "transfer_end_ms",
        ("prefill_start_seq", "transfer_end_seq"),
        ("num_input_tokens",),
    ),
    "decode": (
        "decode_worker",
        "admitted_ms",
        "done_ms",
        ("admitted_seq", "done_seq"),
        ("num_input_tokens", "num_output_tokens"),
    ),
}


def _columns(frame: Any, rules: dict[str, str], reader: _Reader) -> dict[str, np.ndarray]:
    """The columns of ``frame`` a figure reads, each as float64 by its rule: ``"ms"`` (a time a request took,
    ms >= 0), ``"time"`` (a moment, ms), ``"whole"`` (a count or a worker, a whole number >= 0) or ``"rate"``
    (requests/s >= 0); every one finite. A frame that is no DataFrame, lacks a column or has no rows is refused,
    as is a column any of whose values breaks its rule (:class:`InputError` naming the column, how many rows, the
    first and how to fix it): the one check of every TTFT figure's input."""
    if not isinstance(frame, pd.DataFrame):
        raise InputError(
            reader.where,
            f"{reader.name} is a {type(frame).__name__}, not a DataFrame",
            f"pass a {reader.source}(...) result",
        )
    require(frame, list(rules), reader.where, reader.source)
    if not len(frame):
        raise InputError(
            reader.where,
            f"the frame {reader.name} has no rows, so there is nothing to draw",
            f"pass a {reader.source}(...) result with rows",
        )
    return {column: _checked(frame, column, rule, reader) for column, rule in rules.items()}


def _checked(frame: pd.DataFrame, column: str, rule: str, reader: _Reader) -> np.ndarray:
    """One column of :func:`_columns`, checked by its ``rule``."""
    values = _floats(frame, column, reader)
    name, index = reader.name, frame.index
    missing = ~np.isfinite(values)
    if missing.any():
        leave_out = (
            f"{name}[np.isfinite({name}[{column!r}])]"
            if np.isinf(values).any()
            else f"{name}.dropna(subset=[{column!r}])"
        )
        fix = f"pass a {reader.source}(...) result, or leave those rows out first, e.g. {leave_out}"
        _refuse_rows(reader, index, missing, f"no {column}", fix, note="NaN or infinite; ")
    if rule == "whole":
        fix = f"pass a {reader.source}(...) result, whose {column} holds whole numbers >= 0"
        broken = (values < 0) | (values != np.floor(values))
        _refuse_rows(reader, index, broken, f"a {column} that is not a whole number >= 0", fix, values.__getitem__)
    if rule in ("ms", "rate"):
        fix = f"pass a {reader.source}(...) result, or leave those rows out first, e.g. {name}[{name}[{column!r}] >= 0]"
        _refuse_rows(reader, index, values < 0, f"a negative {column}", fix, values.__getitem__)
    return values


def _floats(frame: pd.DataFrame, column: str, reader: _Reader) -> np.ndarray:
    """``frame[column]`` as float64, missing values NaN: numbers of any dtype (nullable, categorical, objects) are
    read; booleans, durations and dates refused (never read as 0 and 1, in their raw unit or from an epoch), as is
    a value that is no number (text, a list), named by its row."""
    cells = frame[column]
    kind = non_numeric_kind(cells)
    if kind is None and getattr(cells.dtype, "kind", "O") in "iuf":
        return cells.to_numpy(dtype=np.float64, na_value=np.nan)
    objects = cells.to_numpy(dtype=object)
    ms = column.endswith("_ms")
    if kind is not None:
        first = next((i for i, value in enumerate(objects) if non_numeric_kind([value]) is not None), 0)
        fixes = {
            "durations": f"divide durations by pd.Timedelta(1, 'ms'): {reader.name}[{column!r}] / pd.Timedelta(1, 'ms')",
            "dates": "give ms from one origin, the same for every time: (times - origin) / pd.Timedelta(1, 'ms')",
        }
        raise InputError(
            reader.where,
            f"column {column!r} holds {kind}, not {'ms as ' if ms else ''}plain numbers "
            f"(first at row {frame.index[first]!r}: {objects[first]!r})",
            (fixes.get(kind) if ms else None)
            or f"pass a {reader.source}(...) result, whose {column} holds plain numbers",
        )
    taken = np.frompyfunc(_a_number, 1, 1)(objects).astype(bool)
    fix = f"convert the column first, e.g. {reader.name}[{column!r}] = pd.to_numeric({reader.name}[{column!r}])"
    what = f"no number in column {column!r}"
    _refuse_rows(reader, frame.index, ~taken, what, fix, lambda i: _no_number(objects[i]))
    return np.where(pd.isna(objects), np.nan, objects).astype(np.float64)


def _a_number(value: Any) -> bool:
    """Whether a cell of an object column reads as a float: a real number within float64's range, or missing."""
    if value is None or value is pd.NA:
        return True
    try:
        return isinstance(value, numbers.Real) and isinstance(float(value), float)
    except OverflowError:  # (an int beyond float64's range)
        return False


def _no_number(value: Any) -> str:
    """A cell that is no number as a message shows it: text as text (with the number to write for one with
    thousands separators), anything else as what it is.

    >>> _no_number("3,180"), _no_number([1.0])
    ("'3,180', text; it has a thousands separator: write 3180", 'a list of 1 value, not a number')
    """
    if isinstance(value, str):
        return f"{value!r}, text{not_a_number(value).removeprefix('not a number')}"
    if isinstance(value, numbers.Real):
        return f"{shown(value)}, beyond the range of float64 numbers (about 1.8e308)"
    return f"{shown(value)}, not a number"


def _refuse_rows(
    reader: _Reader,
    index: pd.Index,
    bad: np.ndarray,
    what: str,
    fix: str,
    said: Callable[[int], Any] | None = None,
    note: str = "",
) -> None:
    """Refuse the rows ``bad`` (when there are any) in one line of :class:`InputError` with ``fix``: how many of
    how many have ``what``, the first (and its value, as ``said`` gives it from its position) and why the figure
    cannot draw them."""
    if not bad.any():
        return
    first = int(np.argmax(bad))
    value = "" if said is None else f": {said(first)}"
    raise InputError(
        reader.where,
        f"{int(bad.sum()):,} of {count(bad.size, reader.rows)} have {what} ({note}first at row {index[first]!r}{value}), "
        f"so {reader.wrong}",
        fix,
    )


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
    value of each first, or pass ``by=`` the one that varies. So is a grid with two rows at one rate (and value
    of ``by``), or whose rates (requests/s) or percentiles (ms) are missing, infinite, negative, text,
    booleans, durations or dates: naming the column, how many rows and the first.

    Parameters
    ----------
    grid
        A :func:`perfmodel.ttft_grid` result with a ``request_rate_per_s`` axis (requests/s), its percentiles in
        ms, and no other varying column than ``by``.
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
    times = _columns(grid, _KNEE_COLUMNS, _KNEE)
    if by is not None and by not in list(grid.columns):
        raise InputError(
            "ttft_vs_rate",
            f"the frame has no column {by!r}; its columns: {list(grid)}",
            "pass by= one of the grid's columns",
        )
    drawn = ["request_rate_per_s"] + ([by] if by else [])
    refuse_other_axes(grid, drawn, "ttft_vs_rate", "" if by else "by")
    twice = grid.duplicated(drawn, keep=False).to_numpy()
    fix = f"keep one row per rate, e.g. grid.drop_duplicates({drawn!r})"
    shared = f"the {' and '.join(drawn)} of another row"
    _refuse_rows(_KNEE, grid.index, twice, shared, fix, lambda i: ", ".join(f"{c} {grid[c].iloc[i]!r}" for c in drawn))
    grid = grid.assign(**times)  # (the values checked, as floats)
    ax = axes_or_current(ax)
    groups = [(None, grid)] if by is None else list(grid.groupby(by, sort=False, observed=True, dropna=False))
    for (key, rows), style in zip(groups, line_styles()):
        rows = rows.sort_values("request_rate_per_s")
        name = "" if by is None else f"{by}={_value_text(key, by)}: "
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


def _value_text(value: Any, column: str | None = None) -> str:
    """A grid value of ``column`` as a legend says it: a whole number without its ``.0`` and with thousands
    separators (a column with a missing value is float), where it was not given (NaN) what that means for the
    column (:data:`_NOT_GIVEN`: ``unbounded`` memory) or else ``none``, any other as it is.

    >>> _value_text(200000.0), _value_text(float("nan")), _value_text(2.5), _value_text("ib-ndr")
    ('200,000', 'none', '2.5', 'ib-ndr')
    >>> _value_text(float("nan"), "prefill_kv_tokens"), _value_text(None, "decode_kv_tokens")
    ('unbounded', 'unbounded')
    """
    missing = _NOT_GIVEN.get(column or "", "none")
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        if value != value:  # noqa: PLR0124 (NaN)
            return missing
        return f"{int(value):,}" if float(value).is_integer() else f"{float(value):g}"
    return missing if value is None else str(value)


#: What a grid column's missing value (the input not given) means, where ``none`` would mislead: no bound.
_NOT_GIVEN = {"prefill_kv_tokens": "unbounded", "decode_kv_tokens": "unbounded", "decode_cache_blocks": "unbounded"}


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
    time goes (queue, prefill, decode admission, link wait, transfer, first decode step). Where no TTFT lies
    between them (a few requests), the bar is of the nearest TTFTs on either side of them.

    A frame whose ``ttft_ms`` or a part (ms) is missing, infinite or negative (but ``link_wait_ms``, which max-min
    sharing on a cluster can make negative) in some request (never a
    :func:`perfmodel.replay_ttft` result), or holds text, booleans, durations or dates, is refused, naming the
    column, how many requests and the first, rather than drawn as percentiles of some of its requests (or of
    durations' nanoseconds).

    Parameters
    ----------
    ttft
        A :func:`perfmodel.replay_ttft` result (its ``ttft_ms`` and parts, ms).
    percentiles
        The percentiles to break down: numbers in [0, 100], each once (default p50 and p99).
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
    marks = _percentiles(percentiles)
    # (on a cluster a handoff can end sooner than alone, max-min sharing speeding it: a negative link wait)
    rules = {**dict.fromkeys(["ttft_ms", *PARTS], "ms"), "link_wait_ms": "time"}
    times = _columns(ttft, rules, _BREAKDOWN)
    ax = axes_or_current(ax)
    values, parts = times["ttft_ms"], np.column_stack([times[column] for column in PARTS])
    means = {f"p{q:g}": parts[_near(values, q)].mean(axis=0) for q in marks}
    labels = list(means)
    bottom = np.zeros(len(labels))
    for part, label in enumerate(PARTS.values()):
        heights = np.array([means[k][part] for k in labels])
        ax.bar(labels, heights, bottom=bottom, label=label)
        bottom += heights
    for x, total in enumerate(bottom):
        ax.annotate(f"{total:,.0f} ms", (x, total), ha="center", va="bottom", fontsize="small")
    ax.set(ylabel="time to first token (ms)", xlabel="requests near the percentile")
    ax.legend(fontsize="small")
    return ax


def _percentiles(percentiles: Any) -> np.ndarray:
    """The percentiles of :func:`ttft_breakdown` as floats, or :class:`InputError`: each a number (never a
    boolean, never text) in [0, 100], at least one, none twice (its bar's label, ``p50``, names it)."""
    given = list(np.ravel(np.asarray(percentiles, dtype=object)))
    fix = "pass numbers in [0, 100], e.g. percentiles=(50, 99)"
    for mark in given:
        if isinstance(mark, (bool, np.bool_)) or not isinstance(mark, numbers.Real):
            what = "a boolean, not a number" if isinstance(mark, (bool, np.bool_)) else "not a number"
            raise InputError("ttft_breakdown", f"percentiles {given!r}: {shown(mark)} is {what}", fix)
    marks = np.asarray(given, dtype=float)
    if not (np.isfinite(marks) & (marks >= 0) & (marks <= 100)).all() or not marks.size:
        problem = "are not all in [0, 100]" if marks.size else "are none, so there is no bar to draw"
        raise InputError("ttft_breakdown", f"percentiles {given!r} {problem}", "pass e.g. (50, 99)")
    labels = [f"p{q:g}" for q in marks]
    repeated = [label for i, label in enumerate(labels) if label in labels[:i]]
    if repeated:
        raise InputError(
            "ttft_breakdown",
            f"percentiles {given!r} repeat {', '.join(dict.fromkeys(repeated))}",
            "pass each percentile once",
        )
    return marks


def _near(values: np.ndarray, q: float) -> np.ndarray:
    """Which TTFTs (ms) the bar of the ``q``-th percentile averages: those between the ``q - 1`` and ``q + 1``
    percentiles (clipped to 0 and 100); where none lies there (a few requests), the nearest on either side."""
    low, high = np.percentile(values, [max(q - 1, 0), min(q + 1, 100)])
    near = (values >= low) & (values <= high)
    if not near.any():
        low, high = values[values <= low].max(), values[values >= high].min()
        near = (values >= low) & (values <= high)
    return near


def memory_held(ttft: pd.DataFrame, *, side: str = "prefill", ax: Axes | None = None) -> Axes:
    """KV tokens held over time on each worker (a step line each), with the capacity.

    The prefill side holds a request's prompt from its prefill's start until its handoff ends; the decode
    side its prompt and output tokens from its admission until it is done (which needs
    ``num_output_tokens`` in the trace). Where memory is taken and given back at one instant, the line follows
    the replay's own order (its ``*_seq`` columns), so that it draws what each worker held together, a
    holding of no time included, and never a negative count.

    A frame whose workers, token counts or event numbers are not whole numbers >= 0, whose times (ms) are
    missing or infinite, that holds text, booleans, durations or dates in a column it reads, or in which a
    request gives its memory back before it takes it (never a :func:`perfmodel.replay_ttft` result) is refused,
    naming the column, how many requests and the first.

    Parameters
    ----------
    ttft
        A :func:`perfmodel.replay_ttft` result (times in ms, tokens as counts).
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
    check_choice("side", side, tuple(_HELD))
    if side == "decode" and isinstance(ttft, pd.DataFrame) and not {"done_ms", "num_output_tokens"} <= set(ttft):
        raise InputError(
            "memory_held",
            "the frame ttft has no done_ms or num_output_tokens, so decode memory is not known",
            "replay a trace with a num_output_tokens column",
        )
    from ..kernels.serving import held_tokens

    worker_column, taken, given_back, numbers, tokens = _HELD[side]
    rules = {worker_column: "whole", taken: "time", given_back: "time", **dict.fromkeys((*numbers, *tokens), "whole")}
    got = _columns(ttft, rules, _MEMORY)
    start, end = got[taken], got[given_back]
    fix = f"pass a perfmodel.replay_ttft(...) result, whose requests hold memory from {taken} to {given_back}"
    what = f"{given_back!r} before {taken!r}"
    _refuse_rows(_MEMORY, ttft.index, end < start, what, fix, lambda i: f"{end[i]!r} < {start[i]!r} ms")
    first, then = (got[column] for column in numbers)
    what = f"{numbers[1]!r} before {numbers[0]!r} (the replay's order of taking and giving back memory)"
    _refuse_rows(_MEMORY, ttft.index, then <= first, what, fix, lambda i: f"{then[i]:.0f} <= {first[i]:.0f}")
    held = np.sum([got[column] for column in tokens], axis=0)
    events, workers, running = held_tokens(got[worker_column].astype(np.int64), first, then, held)
    times = np.concatenate([start, end])[events]
    ax = axes_or_current(ax)
    for w, style in zip(np.unique(workers), line_styles()):
        mine = workers == w
        ax.step(
            times[mine],
            running[mine],
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
