"""The words and the one rule of every sizing answer: the percentile of delays (:func:`percentile_ms`,
numpy's ``"linear"`` method), "the percentile meets the budget" (``<=``), the counts of NICs a node can take,
and what each answer is the answer to, in words. Public as :mod:`perfmodel.replay.sizing`, which builds on the
replay; this module sits beneath the replay, the flows and the sweeps, which use it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

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

    from ..errors import InputError
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


def alone_question(scope: str | None, *, cluster: bool = False) -> str:
    """In words, what a delay of the forward model, a sweep or an inverse question is: one handoff priced alone
    (no contention), per prompt, with which bytes.

    Parameters
    ----------
    scope
        ``"rank"`` or ``"group"`` (None: it varies by row; ignored on a cluster).
    cluster
        Whether the handoff is on a cluster (its flows decide the bytes: no scope).

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
    """
    return f"{CONTENTION_WORDS[Contention.NONE]}, per prompt, {bytes_words(scope, cluster, 'bytes')}"


def bytes_words(scope: str | None, cluster: bool, bytes_of: str = "bytes of each request") -> str:
    if cluster:
        owner = "its" if bytes_of == "bytes" else "each handoff's"
        return f"{owner} flows on the cluster's NICs"
    if scope is None:
        return "with each row's scope"
    return f"{'one rank' if scope == 'rank' else 'the whole group'}'s {bytes_of} (scope {scope})"


@renamed_keywords(percent="percentile")
def replay_percentile_question(
    percentile: float, contention: str | None, scope: str | None, *, cluster: bool = False
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
    return f"p{percentile:g} of per-request handoff delays in the replay, {how}, {bytes_words(scope, cluster)}"


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
