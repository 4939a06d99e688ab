"""The words and the one rule of every sizing answer: the percentile of delays (:func:`percentile_ms`,
numpy's ``"linear"`` method), "the percentile meets the budget" (``<=``), the counts of NICs a node can take,
the searches of the answers settled on the forward model (:func:`least_true`, :func:`highest_upto`), and what
each answer is the answer to, in words. Public as :mod:`perfmodel.replay.sizing`, which builds on the
replay; this module sits beneath the replay, the flows and the sweeps, which use it too.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar, cast

import numpy as np

from ..errors import InputError, shown, warn
from ..inputs.codes import Contention, choice_code
from ..options import renamed_keywords

__all__ = [
    "MAX_NICS_PER_GPU",
    "QUANTILE_METHOD",
    "alone_question",
    "check_result",
    "counted",
    "fewest_meeting",
    "meets_budget",
    "nic_counts",
    "percentile_ms",
    "replay_percentile_question",
    "least_true",
    "highest_upto",
    "without_coerce_hint",
]


def check_result(frame: Any, argument: str, columns: Sequence[str], made_by: str, other: tuple[str, str, str]) -> None:
    """Refuse ``frame`` unless it has ``columns`` (a result of ``made_by``), in one line: ``other`` is (the column
    that marks the other kind of result, the function that makes it, the summary that takes it).

    >>> import pandas as pd
    >>> check_result(pd.DataFrame({"x": [1]}), "replay", ["handoff_delay_ms"], "replay_handoffs",
    ...              ("ttft_ms", "replay_ttft", "summarize_ttft"))
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: replay: not a result of replay_handoffs (no column 'handoff_delay_ms'). Fix: pass what replay_handoffs returns.
    """
    import pandas as pd

    from ..inputs.coerce import non_numeric_kind

    if not hasattr(frame, "columns"):
        raise InputError(argument, f"not a DataFrame ({type(frame).__name__})", f"pass what {made_by} returns")
    marker, other_maker, other_summary = other
    if marker in frame.columns:
        raise InputError(argument, f"a result of {other_maker}, not of {made_by}", f"pass it to {other_summary}()")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            argument, f"not a result of {made_by} (no column {missing[0]!r})", f"pass what {made_by} returns"
        )
    for column in (c for c in columns if c.endswith("_ms")):  # (times as plain numbers: the summaries' arithmetic)
        data = frame[column]
        kind = non_numeric_kind(data) or (None if pd.api.types.is_numeric_dtype(data.dtype) else f"{data.dtype} values")
        if kind is not None:
            raise InputError(
                argument,
                f"column {column!r} holds {kind}, not ms as plain numbers",
                f"pass what {made_by} returns (times in ms as floats)"
                + (f", e.g. {argument}[{column!r}] / pd.Timedelta(1, 'ms')" if kind == "durations" else ""),
            )


#: How every percentile of delays is taken (numpy's and pandas' default: between two order statistics).
QUANTILE_METHOD: Final = "linear"

#: The most NICs per GPU a node's NIC count is tried up to by the sizing questions (AWS p5 nodes have four EFA
#: devices per GPU); a :class:`perfmodel.Cluster` takes up to :data:`perfmodel.inputs.table.MAX_NICS_PER_GPU` (8).
MAX_NICS_PER_GPU = 4

#: How a question says each contention (by its code).
CONTENTION_WORDS: dict[int, str] = {
    Contention.NONE: "each handoff alone, no contention",
    Contention.FIFO: "transfers queued first come first served on each link",
    Contention.FAIR: "transfers sharing each link or NIC max-min fairly",
}


def check_percentile(percentile: Any) -> None:
    """Refuse a percentile outside [0, 100] (one line, :class:`InputError`); warn for one between 0 and 1, which
    reads as a fraction (``0.99`` for the p99) but is the p0.99.

    >>> check_percentile(99)
    >>> check_percentile(101)
    Traceback (most recent call last):
    perfmodel.errors.InputError: percentile: 101 is not a percentile in [0, 100]. Fix: pass e.g. percentile=99.
    """
    if isinstance(percentile, (bool, np.bool_)) or not (
        isinstance(percentile, numbers.Real) and 0 <= float(percentile) <= 100
    ):
        raise InputError(
            "percentile", f"{shown(percentile)} is not a percentile in [0, 100]", "pass e.g. percentile=99"
        )
    if 0 < float(percentile) < 1:
        warn(
            f"percentile={percentile:g} is the p{percentile:g}, a percentile from 0 to 100, not a fraction: pass "
            f"percentile={100 * percentile:g} for the p{100 * percentile:g}"
        )


@renamed_keywords(percent="percentile")
def percentile_ms(delays: Any, percentile: float | Sequence[float]) -> Any:
    """The ``percentile``-th percentile(s) of delays (ms), numpy's ``"linear"`` method (:data:`QUANTILE_METHOD`).

    The one percentile of every sizing answer: :func:`perfmodel.summarize`'s ``p50_ms``, ``p90_ms`` and
    ``p99_ms`` and :func:`required_nics` take it here.

    Parameters
    ----------
    delays
        Delays (ms), any array-like (a replay's ``handoff_delay_ms``).
    percentile
        A percentile in [0, 100] (99 for the p99), or a sequence of them.

    Returns
    -------
    float or numpy.ndarray
        The percentile(s), ms; NaN for no delays.

    Examples
    --------
    >>> from perfmodel.replay.sizing import percentile_ms
    >>> float(percentile_ms([10.0, 20.0, 30.0, 40.0], 50))
    25.0
    """
    values = np.asarray(delays, dtype=np.float64).reshape(-1)
    if values.size == 0:
        return np.full(np.shape(percentile), np.nan) if np.ndim(percentile) else math.nan
    return np.percentile(values, percentile, method=QUANTILE_METHOD)


@renamed_keywords(percent="percentile")
def meets_budget(delays: Any, budget_ms: float, percentile: float = 99) -> bool:
    """Whether the ``percentile``-th percentile of ``delays`` (:func:`percentile_ms`) is within ``budget_ms``.

    Parameters
    ----------
    delays
        Delays (ms), array-like.
    budget_ms
        The budget (ms).
    percentile
        The percentile (default 99).

    Returns
    -------
    bool
        ``percentile_ms(delays, percentile) <= budget_ms`` (no delays: False).

    Examples
    --------
    >>> from perfmodel.replay.sizing import meets_budget
    >>> meets_budget([10.0, 20.0, 100.0], 50.0, percentile=50), meets_budget([10.0, 20.0, 100.0], 50.0)
    (True, False)
    """
    return bool(percentile_ms(delays, percentile) <= budget_ms)


def nic_counts(gpus_per_node: int) -> list[int]:
    """The NICs per node a node of ``gpus_per_node`` GPUs can take: the divisors of ``gpus_per_node`` (GPUs
    sharing a NIC), then 2 to :data:`MAX_NICS_PER_GPU` NICs per GPU.

    Parameters
    ----------
    gpus_per_node
        GPUs per node (a whole number >= 1).

    Returns
    -------
    list of int
        NIC counts, ascending.

    Examples
    --------
    >>> from perfmodel.replay.sizing import nic_counts
    >>> nic_counts(8)
    [1, 2, 4, 8, 16, 24, 32]
    """
    g = int(gpus_per_node)
    return [c for c in range(1, g + 1) if g % c == 0] + [g * k for k in range(2, MAX_NICS_PER_GPU + 1)]


def counted(count: float, unit: str) -> str:
    """``count`` of ``unit`` (its plural), singular for 1: ``"1 link"``, ``"3 links"``, ``"1 NIC per node"``;
    ``"none of the counts tried"`` for ``inf``.

    Parameters
    ----------
    count
        A count, or ``inf``.
    unit
        The plural, e.g. ``"links"``, ``"NICs per node"``.

    Returns
    -------
    str
        The count and its unit.

    Examples
    --------
    >>> from perfmodel.replay.sizing import counted
    >>> counted(1, "NICs per node"), counted(3, "links"), counted(float("inf"), "links")
    ('1 NIC per node', '3 links', 'none of the counts tried (links)')
    """
    if not math.isfinite(count):
        return f"none of the counts tried ({unit})"
    first, _, rest = unit.partition(" ")
    one = first[:-1] if count == 1 and first.endswith("s") else first
    return f"{count:g} {one}{' ' + rest if rest else ''}"


def fewest_meeting(counts: Sequence[float], percentiles_ms: Sequence[float], budget_ms: float) -> float:
    """The smallest of ``counts`` whose percentile is within ``budget_ms`` (``<=``, every count looked at: no
    monotonicity assumed), ``inf`` where none is.

    Parameters
    ----------
    counts
        The counts tried.
    percentiles_ms
        Each count's percentile (ms), from :func:`percentile_ms`.
    budget_ms
        The budget (ms).

    Returns
    -------
    float
        The count (a whole number) or ``inf``.

    Examples
    --------
    >>> from perfmodel.replay.sizing import fewest_meeting
    >>> fewest_meeting([1, 2, 3, 4], [113.1, 54.0, 48.7, 48.7], 50.0)
    3
    """
    meeting = [c for c, p in zip(counts, percentiles_ms, strict=True) if p <= budget_ms]
    return min(meeting) if meeting else math.inf


def alone_question(scope: str | None, *, cluster: bool = False, crossing: str = "nic") -> str:
    """In words, what a delay of the forward model, a sweep or an inverse question is: one handoff priced alone
    (no contention), per prompt, with which bytes.

    Parameters
    ----------
    scope
        ``"rank"`` or ``"group"`` (None: it varies by row; ignored on a cluster).
    cluster
        Whether the handoff is on a cluster (its flows decide the bytes: no scope).
    crossing
        On a cluster, what its flows cross (:data:`CROSSING_WORDS`): ``"nic"`` (the cluster's NICs), ``"nvlink"``
        (NVLink only: every flow inside an NVLink domain) or ``"both"``.

    Returns
    -------
    str
        E.g. ``"each handoff alone, no contention, per prompt, one rank's bytes (scope rank)"``.

    Examples
    --------
    >>> from perfmodel.replay.sizing import alone_question
    >>> print(alone_question("rank"))
    each handoff alone, no contention, per prompt, one rank's bytes (scope rank)
    >>> print(alone_question(None, cluster=True))
    each handoff alone, no contention, per prompt, its flows on the cluster's NICs
    >>> print(alone_question(None, cluster=True, crossing="nvlink"))
    each handoff alone, no contention, per prompt, its flows over NVLink only, never a NIC
    """
    return f"{CONTENTION_WORDS[Contention.NONE]}, per prompt, {bytes_words(scope, cluster, 'bytes', crossing)}"


#: What a cluster's flows cross, in words: its NICs, NVLink only (both workers in one NVLink domain), or both
#: (a handoff whose flows cross both, or rows of a sweep that cross one or the other).
CROSSING_WORDS: dict[str, str] = {
    "nic": "on the cluster's NICs",
    "nvlink": "over NVLink only, never a NIC",
    "both": "on the cluster's NICs and over NVLink",
}


def bytes_words(
    scope: str | None, cluster: bool, bytes_of: str = "bytes of each request", crossing: str = "nic"
) -> str:
    if cluster:
        owner = "its" if bytes_of == "bytes" else "each handoff's"
        return f"{owner} flows {CROSSING_WORDS[crossing]}"
    if scope is None:
        return "with each row's scope"
    return f"{'one rank' if scope == 'rank' else 'the whole group'}'s {bytes_of} (scope {scope})"


@renamed_keywords(percent="percentile")
def replay_percentile_question(
    percentile: float, contention: str | None, scope: str | None, *, cluster: bool = False, crossing: str = "nic"
) -> str:
    """In words, what a replay's percentile (``p99_ms``...) is the percentile of: the per-request handoff
    delays, with which contention and which bytes.

    Parameters
    ----------
    percentile
        The percentile (99 for ``p99_ms``).
    contention
        The replay's contention (None: it varies by row).
    scope
        The replay's scope (None: it varies by row; ignored on a cluster).
    cluster
        Whether the replay is on a cluster (its flows decide the bytes: no scope).
    crossing
        On a cluster, what its flows cross, as :func:`alone_question` takes it.

    Returns
    -------
    str
        E.g. ``"p99 of per-request handoff delays in the replay, each handoff alone, no contention, one rank's
        bytes of each request (scope rank)"``.

    Examples
    --------
    >>> from perfmodel.replay.sizing import replay_percentile_question
    >>> print(replay_percentile_question(99, "fifo", "rank"))
    p99 of per-request handoff delays in the replay, transfers queued first come first served on each link,
    one rank's bytes of each request (scope rank)
    """
    how = (
        CONTENTION_WORDS[choice_code("contention", contention)]
        if contention is not None
        else "with each row's contention"
    )
    return f"p{percentile:g} of per-request handoff delays in the replay, {how}, {bytes_words(scope, cluster, crossing=crossing)}"


def least_true(start: np.ndarray, predicate: Callable[[np.ndarray, np.ndarray], np.ndarray], top: int) -> np.ndarray:
    """Per row, the least integer ``x`` in ``1..top`` for which ``predicate(x, rows)`` holds, for a predicate false
    below some threshold and true from it on (false at 0, true at ``top``): gallop from ``start`` (an estimate) to
    bracket the threshold, then bisect. ``predicate`` gets the values and the row indices they belong to, and is
    called on the rows still searched only. The one search of the answers settled on the forward model (the least
    bandwidth that meets a budget, the shortest prompt that misses it).

    Parameters
    ----------
    start
        Per row, an estimate (int64).
    predicate
        ``predicate(values, rows)``: whether each row's value is enough.
    top
        The largest value (true there).

    Returns
    -------
    numpy.ndarray
        Per row, the least value for which the predicate holds (int64).

    Examples
    --------
    >>> least_true(np.array([1, 50]), lambda x, rows: x * x >= np.array([10, 2000])[rows], 10**6).tolist()
    [4, 45]
    """
    everyone = np.arange(start.size)
    start = np.clip(start, 1, top)
    high, low = start.copy(), start.copy()
    holds = predicate(start, everyone)
    step = np.ones(start.size, dtype=np.int64)
    moving = everyone
    while moving.size:  # from below: true rows look for a false value further down, and the reverse
        up = ~holds[moving]
        candidate = np.where(
            up, np.minimum(start[moving] + step[moving], top), np.maximum(start[moving] - step[moving], 0)
        )
        ok = predicate(candidate, moving) & (candidate > 0)  # false at 0 by contract
        high[moving] = np.where(ok, candidate, high[moving])
        low[moving] = np.where(ok, low[moving], candidate)
        step[moving] *= 2
        done = np.where(up, ok | (candidate >= top), ~ok)  # a false below a true: the threshold is bracketed
        moving = moving[~done]
    searching = everyone[high - low > 1]
    while searching.size:
        middle = low[searching] + (high[searching] - low[searching]) // 2
        ok = predicate(middle, searching)
        high[searching] = np.where(ok, middle, high[searching])
        low[searching] = np.where(ok, low[searching], middle)
        searching = searching[high[searching] - low[searching] > 1]
    return high


def highest_upto(n: np.ndarray, marks: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per row, prompts of at most ``n`` tokens among which one has the highest handoff delay of every prompt up
    to ``n``, where the delay need not grow with the prompt (a chunk's bytes drop at its end; streamed layer by
    layer, a short prompt goes whole and a compute growing with the prompt hides more).

    ``marks`` are per row, as :func:`perfmodel.max_tokens_within` reads them: streaming's first prompt, the
    window, the chunk, the KV block and the message region (``block_size * blocks_per_message``), in tokens (0:
    none). Between the prompts where the delay's form changes (0, 1, streaming's first, past the window, each
    chunk's first, past the window in a chunk), a prompt's delay is a convex function of it (its transfer, less
    the compute it hides behind) plus costs that step up at each block's and region's first token: its highest
    is at such a prompt, the one before it, ``n``, or the first or last of a kind of token around them (a block's
    first or last, a region's, a region's last block's first). Chunks between them repeat one another (a chunk a
    whole number of regions), each such prompt's delay convex in the chunk's index: the first and last stand for
    all.

    Parameters
    ----------
    n
        Per row, the longest prompt (tokens, a whole number up to 2**53).
    marks
        Per row: streaming's first prompt, the window, the chunk, the block and the region, in tokens.

    Returns
    -------
    numpy.ndarray
        Per row, whole prompt lengths from 0 to ``n`` (float64; a few hundred at most).

    Examples
    --------
    >>> zero, window = np.zeros(1), np.array([4096.0])
    >>> prompts = highest_upto(np.array([10_000.0]), (np.array([8192.0]), window, zero, zero, zero))
    >>> sorted({int(p) for p in prompts[0]})
    [0, 1, 4096, 4097, 8191, 8192, 10000]
    """
    start, window, chunk, block, region = marks
    start, window, n = np.minimum(start, 2.0**54), np.minimum(window, 2.0**54), np.asarray(n, dtype=np.float64)
    period = np.where(chunk > 0, chunk, 2.0**54)  # (no chunks: one, longer than any prompt)

    def index(x: np.ndarray) -> np.ndarray:
        return np.floor(np.maximum(x - 1, 0) / period)

    last = index(n)
    chunks = (
        [0 * n]
        if not (chunk > 0).any()
        else [k + d for k in (0 * n, index(start), index(window + 1), last) for d in (-1, 0, 1)]
    )
    firsts = np.stack([np.clip(j, 0, last) * period + 1 for j in chunks], axis=1)
    starts = np.concatenate(
        [
            np.stack([0 * n, 0 * n + 1, start, window + 1], axis=1),
            firsts,
            firsts + window[:, None],
            firsts + period[:, None],
        ],
        axis=1,
    )
    ends = np.concatenate([starts - 1, n[:, None]], axis=1)
    points = [starts, ends]
    for size, offset in ((block, 1), (block, 0), (region, 1), (region, 0), (region, 1 - block), (region, block)):
        usable = (block > 0) & np.isfinite(size)  # (elsewhere a step of 1: the marks themselves)
        if usable.any():
            step, at = np.where(usable, size, 1.0)[:, None], np.broadcast_to(offset, n.shape)[:, None]
            points += [starts + np.mod(at - starts, step), ends - np.mod(ends - at, step)]
    return np.clip(np.concatenate(points, axis=1), 0, n[:, None])


_Question = TypeVar("_Question", bound=Callable[..., Any])


def without_coerce_hint(question: _Question) -> _Question:
    """``question`` (a sizing answer, which takes no ``errors``) with the fix of each of its errors offering only
    what it takes: never ``errors='coerce'``, which the forward model's errors offer for its rows.

    Parameters
    ----------
    question
        The function.

    Returns
    -------
    callable
        The same function, its errors' fixes without the offer.

    Examples
    --------
    >>> def ask(latency_ms):
    ...     raise InputError("latency_ms", "negative", "pass ms >= 0", n_invalid=1, row=0, value=-1.0)
    >>> without_coerce_hint(ask)(-1.0)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: latency_ms: 1 invalid row; first at row 0: -1.0 (negative). Fix: pass ms >= 0.
    """

    @functools.wraps(question)
    def asked(*args: Any, **kwargs: Any) -> Any:
        try:
            return question(*args, **kwargs)
        except InputError as error:
            if not error.coerce_hint:
                raise
            raise error.relocated(error.where, error.row, coerce_hint="") from None

    return cast(_Question, asked)


def memory_held(
    worker: Any,
    start_ms: Any,
    end_ms: Any,
    tokens: Any,
    *,
    capacity: int | None,
    workers: int,
    span: tuple[float, float],
) -> tuple[float, float]:
    """How full the workers' memory was: the time-average share of the capacity held, and the highest share
    any worker held at any instant (a release before an acquisition at one instant).

    Parameters
    ----------
    worker : array-like
        Each holding's worker (whole numbers).
    start_ms, end_ms : array-like
        When each holding starts and ends (ms).
    tokens : array-like
        Each holding's tokens.
    capacity : int or None
        Tokens each worker holds at most (None: unbounded).
    workers : int
        How many workers share the time-average.
    span : tuple of float
        (start, end) in ms of the time averaged over.

    Returns
    -------
    tuple of float
        (mean share, peak share); NaN for an unbounded capacity or an empty span.

    Examples
    --------
    >>> memory_held([0, 0], [0.0, 5.0], [10.0, 15.0], [5, 5], capacity=10, workers=1, span=(0.0, 20.0))
    (0.5, 1.0)
    """
    if capacity is None or span[1] <= span[0]:
        return np.nan, np.nan
    worker, start_ms, end_ms, tokens = (np.asarray(a) for a in (worker, start_ms, end_ms, tokens))
    mean = float(np.sum(tokens * (end_ms - start_ms))) / (capacity * workers * (span[1] - span[0]))
    times = np.concatenate([end_ms, start_ms])  # (a release before an acquisition at one instant)
    deltas = np.concatenate([-tokens, tokens]).astype(np.float64)
    owners = np.concatenate([worker, worker])
    order = np.lexsort((deltas, times, owners))
    held = np.cumsum(deltas[order])  # per worker: the running sum restarts at each new owner
    first = np.r_[True, owners[order][1:] != owners[order][:-1]]
    offsets = np.maximum.accumulate(np.where(first, np.arange(first.size), 0))
    before = np.r_[0.0, held][offsets]
    return mean, float((held - before).max()) / capacity if held.size else 0.0
