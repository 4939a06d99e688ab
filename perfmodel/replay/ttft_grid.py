"""TTFT grids and the sizing questions asked of them: every combination of serving and handoff inputs
(request rate included) replayed on threads, the highest request rate whose p99 TTFT stays within a
budget, and the fewest workers, links or NICs per node that keep it.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import itertools
import math
import numbers
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, check_choice, check_whole, shown, warn
from ..ground.progress import says_each_warning_once
from ..inputs import words as _words
from ..inputs.coerce import edge_values
from ..inputs.resolve import axis_labels, axis_values
from ..inputs.table import CLUSTER_FIELDS
from ..network.placement import is_cluster
from ..options import option
from .prepared import PreparedTrace, axis_label, in_configuration, layers_where_counted, no_series_axes, prepare_trace
from .summaries import check_percentile
from .ttft import replay_ttft, serving_trace, summarize_ttft, ttft_prepared

__all__ = ["max_rate_for_ttft", "fewest_for_ttft", "ttft_grid"]

#: The serving's keywords of :func:`perfmodel.replay_ttft`; the others are the handoff's.
SERVING = (
    "prefill_workers",
    "prefill_ms",
    "prefill_tokens_per_s",
    "prefill_routing",
    "prefill_kv_tokens",
    "decode_kv_tokens",
    "decode_step_ms",
    "concurrency",
)
#: What a TTFT grid may vary: every keyword of :func:`perfmodel.replay_ttft`, the request rate, and a cluster (as
#: ``cluster``) or its fields (``nics_per_node``, ``nic``, ...), which replace the cluster's where the link goes.
TTFT_AXES = (
    "request_rate_per_s",
    *[name for name in inspect.signature(replay_ttft).parameters if name != "trace"],
    "cluster",
    *CLUSTER_FIELDS,
)
#: The counts :func:`fewest_for_ttft` searches.
COUNTS = ("prefill_workers", "decode_workers", "links", "nics_per_node")


def trace_rate_per_s(trace: pd.DataFrame) -> float:
    """A trace's mean request rate (requests/s): requests after the first over the time to the last.

    Parameters
    ----------
    trace : pandas.DataFrame
        A trace with ``arrival_ms``.

    Returns
    -------
    float
        Requests per second.

    Examples
    --------
    >>> trace_rate_per_s(pd.DataFrame({"arrival_ms": [0.0, 500.0, 1000.0], "num_input_tokens": [1, 1, 1]}))
    2.0
    """
    arrival = trace["arrival_ms"].to_numpy(dtype=np.float64)
    span = float(arrival.max() - arrival.min()) if arrival.size else 0.0
    if not arrival.size:
        raise InputError("trace", "is empty: it has no rate to scale", "give a trace of requests")
    if arrival.size < 2 or not span > 0:
        raise InputError(
            "trace",
            "its requests all arrive at one instant, so it has no rate to scale to a request rate",
            "give a trace whose arrivals span some time (e.g. perfmodel.synthetic_trace)",
        )
    return (arrival.size - 1) / span * 1000.0


def at_rate(prepared: PreparedTrace, rate_per_s: float) -> PreparedTrace:
    """``prepared`` with its arrivals scaled in time (from the first) to a mean rate of ``rate_per_s``."""
    number = isinstance(rate_per_s, (int, float, np.number)) and not isinstance(rate_per_s, (bool, np.bool_))
    if not (number and 0 < rate_per_s < math.inf):
        raise InputError(
            "request_rate_per_s",
            f"must be a finite rate > 0 (requests/s), got {rate_per_s!r}",
            "pass request rates in requests per second",
        )
    ready = prepared.ready_ms
    first = float(ready.min())
    scaled = first + (ready - first) * (trace_rate_per_s(prepared.trace) / float(rate_per_s))
    scaled.flags.writeable = False
    return dataclasses.replace(prepared, ready_ms=scaled)


def _configs(axes: dict[str, Any]) -> list[dict[str, Any]]:
    unknown = sorted(set(axes) - set(TTFT_AXES))
    if unknown:  # (a close name offered, as fewest_for_ttft and max_rate_for_ttft offer it)
        close = difflib.get_close_matches(unknown[0], TTFT_AXES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(
            "ttft_grid", f"unknown axis {unknown}{hint}", "use keywords of replay_ttft or request_rate_per_s"
        )
    no_series_axes("ttft_grid", axes)
    axes = edge_values(axes)
    listed = {name: axis_values("ttft_grid", name, v) for name, v in axes.items()}  # (a range too, as sweeps take)
    for name, values in listed.items():
        axis_labels("ttft_grid", name, values)  # (a value given twice, in any spelling, would replay twice: refused)
    size = math.prod(len(v) for v in listed.values())
    most = option("max_grid_configs")
    if size > most:
        raise InputError(
            "ttft_grid",
            f"{size:,} configurations, more than {most:,}, each of which replays the whole trace",
            "give the axes fewer values, or raise perfmodel.set_options(max_grid_configs=...)",
        )
    return [dict(zip(listed, values)) for values in itertools.product(*listed.values())]


def _one(prepared: PreparedTrace, config: dict[str, Any]) -> pd.DataFrame:
    config = dict(config)
    rate = config.pop("request_rate_per_s", None)
    if rate is not None:
        prepared = at_rate(prepared, rate)
    if {"cluster", *CLUSTER_FIELDS} & set(config):  # a cluster axis: one Cluster where the link goes
        from .cluster import with_cluster

        config = with_cluster(config)
    serving = {name: config.pop(name) for name in SERVING if name in config}
    defaults = {name: p.default for name, p in inspect.signature(replay_ttft).parameters.items() if name in SERVING}
    return ttft_prepared(prepared, config, {**defaults, **serving})


def ttft_grid(
    trace: pd.DataFrame, *, num_threads: int | None = None, progress: bool | None = None, **axes: Any
) -> pd.DataFrame:
    """Replay a trace's TTFT under every combination of inputs, in parallel: one row of
    :func:`perfmodel.summarize_ttft`'s figures per configuration.

    Each keyword is a keyword of :func:`perfmodel.replay_ttft` (a value or a list of values) or
    ``request_rate_per_s``: the trace's arrivals scaled in time to that mean rate (requests/s), the knee's
    axis. Configurations run on ``num_threads`` threads (the kernel releases the GIL); every one is first
    checked on two requests, so a bad value fails at once. The result equals the one-by-one loop exactly.

    Parameters
    ----------
    trace
        From :func:`perfmodel.read_trace` or :func:`perfmodel.synthetic_trace`.
    num_threads
        Threads replaying configurations at once (default: the cores available).
    progress
        Show a progress bar: None (default) on a terminal when the grid takes more than a second.
    **axes
        The inputs: each a value or a list.

    Returns
    -------
    pandas.DataFrame
        One row per configuration (the last axis fastest): the axes' values, then the summary's figures
        (``p50_ms``, ``p99_ms``, ``queue_p99_ms``, ..., ``prefill_busy``, ``dominant_p99_stage``).

    Examples
    --------
    >>> from perfmodel import synthetic_trace, ttft_grid
    >>> grid = ttft_grid(synthetic_trace(2000, 10, seed=0), link="ib-ndr", model="llama-3.1-8b",
    ...                  prefill_tokens_per_s=40_000, request_rate_per_s=[5, 10, 15], progress=False)
    >>> bool(grid["p99_ms"].is_monotonic_increasing)
    True
    """
    from ..ground.progress import WarningsOnce, in_threads

    with WarningsOnce():  # (each configuration's, said once: its check on two requests and its replay say the same)
        prepared, configs = grid_plan(trace, axes)
        workers = (os.cpu_count() or 1) if num_threads is None else check_whole("num_threads", num_threads, smallest=1)
        rows = in_threads(lambda c: grid_summary(prepared, c), configs, workers, desc="ttft grid", progress=progress)
    return grid_table(configs, rows)


def fixed_workers(trace: pd.DataFrame, routings: list[Any], where: str) -> None:
    """Refuse a count of prefill workers that varies while the trace's ``prefill_worker`` column fixes each
    request's worker (the routing read where none is given, ``routings``): a count would change nothing.

    >>> import pandas as pd
    >>> fixed_workers(pd.DataFrame({"prefill_worker": [0, 1]}), ["round_robin"], "count_of")  # (a policy routes)
    """
    if "prefill_worker" in trace.columns and any(r is None or r == "prefill_worker" for r in routings):
        raise InputError(
            where,
            "varies the prefill workers, but the trace's prefill_worker column gives each request its worker, so "
            "every count would replay the same requests on the same workers",
            "pass prefill_routing='round_robin' or 'least_loaded' to route by a policy as the count varies (or drop "
            "the column)",
        )


def grid_plan(trace: pd.DataFrame, axes: dict[str, Any]) -> tuple[PreparedTrace, list[dict[str, Any]]]:
    """A TTFT grid's prepared trace and configurations (the last axis fastest), every value checked on two
    requests first, so that a bad one fails at once (here, not on a thread or a Dask worker)."""
    closed = axes.get("concurrency")
    closed = axis_values("ttft_grid", "concurrency", closed)
    if "request_rate_per_s" in axes and any(v is not None for v in closed):
        raise InputError(
            "request_rate_per_s",
            "scales the trace's arrival times, which a closed loop (concurrency=) ignores",
            "vary concurrency for a closed loop, or drop concurrency to vary the request rate",
        )
    configs = _configs(axes)
    if len({c.get("prefill_workers") for c in configs}) > 1:
        fixed_workers(trace, [c.get("prefill_routing") for c in configs], "prefill_workers")
    prepared = _prepared(trace)
    sample = prepare_trace(trace.iloc[: min(len(trace), 2)])

    def check(on: PreparedTrace, config: dict[str, Any]) -> None:
        _one(on, {k: v for k, v in config.items() if k != "request_rate_per_s"})
        if "request_rate_per_s" in config:
            at_rate(prepared, config["request_rate_per_s"])

    return prepared, layers_where_counted(configs, check, sample, prepared)


def grid_summary(prepared: PreparedTrace, config: dict[str, Any]) -> dict[str, Any]:
    """One configuration's row of a TTFT grid: :func:`perfmodel.summarize_ttft` of its replay."""
    return in_configuration(config, lambda: summarize_ttft(_one(prepared, config)))


def grid_table(configs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A TTFT grid's table: each configuration's axes' values, then its summary's figures."""
    labels = [{k: axis_label(k, v) for k, v in config.items()} for config in configs]
    return pd.DataFrame([{**label, **row} for label, row in zip(labels, rows)])


class MaxRate(float):
    """:func:`max_rate_for_ttft`'s answer: a rate in requests/s (a float) that says whether the search found it.

    Parameters
    ----------
    rate : float
        The rate (requests/s).
    kept : str
        ``"found"``: the highest rate that keeps the budget, within ``relative_tolerance``; ``"every"``: every rate
        tried keeps it, so the rate is the highest tried and the answer is at least that; ``"none"``: even the
        lowest rate tried misses it (the rate is 0.0).
    tried_per_s : tuple of float
        The lowest and highest rates searched (requests/s).

    Examples
    --------
    >>> rate = MaxRate(50.0, "every", (0.05, 50.0))
    >>> rate + 0, rate.kept
    (50.0, 'every')
    """

    kept: str
    tried_per_s: tuple[float, float]

    def __new__(cls, rate: float, kept: str, tried_per_s: tuple[float, float]) -> MaxRate:
        answer = super().__new__(cls, rate)
        answer.kept, answer.tried_per_s = kept, (float(tried_per_s[0]), float(tried_per_s[1]))
        return answer

    def __repr__(self) -> str:  # (a search bound never shown as a rate found)
        if self.kept == "found":
            return float.__repr__(self)
        low, high = self.tried_per_s
        if self.kept == "every":
            return f"{float.__repr__(self)} (at least: every rate tried, {low:.4g} to {high:.4g}/s, keeps the budget)"
        return f"{float.__repr__(self)} (none: even the lowest rate tried, {low:.4g}/s, misses the budget)"

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled with its meaning, e.g. to a Dask worker)
        return (MaxRate, (float(self), self.kept, self.tried_per_s))


def _p99(prepared: PreparedTrace, config: dict[str, Any], percentile: float) -> float:
    from .summaries import percentile_ms

    ttft = _one(prepared, config)["ttft_ms"].to_numpy()
    return float(percentile_ms(ttft, [percentile])[0])


@says_each_warning_once
def max_rate_for_ttft(
    trace: pd.DataFrame,
    *,
    ttft_budget_ms: float,
    percentile: float = 99.0,
    rate_range_per_s: tuple[float, float] | None = None,
    relative_tolerance: float = 0.01,
    **inputs: Any,
) -> MaxRate:
    """The highest request rate (requests/s) at which the trace's TTFT percentile stays within a budget.

    The trace's arrivals are scaled in time to each rate tried (as :func:`ttft_grid`'s
    ``request_rate_per_s``), and the rate is found by bisection to ``relative_tolerance``: the answer keeps the
    budget, the answer times ``1 + relative_tolerance`` does not. Bisection assumes the percentile grows
    with the rate (as queues do); a replay can break that by a little at small scales.

    Parameters
    ----------
    trace
        The traffic's shape (its prompt lengths and arrival pattern).
    ttft_budget_ms
        The budget on the TTFT percentile (ms > 0).
    percentile
        Which percentile (default the p99).
    rate_range_per_s
        (lowest, highest) rates to search (default: 1/1000 to 1000 times the trace's own rate).
    relative_tolerance
        How close the answer is (default 1%).
    **inputs
        Keywords of :func:`perfmodel.replay_ttft` (the serving and the handoff); not ``concurrency``.

    Returns
    -------
    MaxRate
        The rate in requests/s, a float whose ``kept`` says what it is: ``"found"`` (the rate found by bisection),
        ``"every"`` (every rate tried keeps the budget: the rate is the highest tried, and the answer is at least
        that; search further with ``rate_range_per_s``) or ``"none"`` (even the lowest rate tried misses it: 0.0);
        ``tried_per_s`` holds the (lowest, highest) rates searched.

    Examples
    --------
    >>> from perfmodel import max_rate_for_ttft, synthetic_trace
    >>> trace = synthetic_trace(2000, 10, seed=0)
    >>> rate = max_rate_for_ttft(trace, ttft_budget_ms=500, link="ib-ndr", model="llama-3.1-8b",
    ...                          prefill_tokens_per_s=100_000)   # 44 ms per mean prompt: saturates near 23/s
    >>> round(rate, 1), rate.kept
    (13.7, 'found')
    >>> max_rate_for_ttft(trace, ttft_budget_ms=1e9, link="ib-ndr", model="llama-3.1-8b").kept
    'every'
    """
    _question_keywords("max_rate_for_ttft", inputs, "request_rate_per_s")
    if inputs.get("concurrency") is not None:
        raise InputError("concurrency", "a closed loop sets its own rate", "drop concurrency to ask for a rate")
    budget = _budget(ttft_budget_ms)
    check_percentile(percentile)
    if not (isinstance(relative_tolerance, numbers.Real) and 1e-9 <= relative_tolerance <= 1):
        raise InputError(
            "relative_tolerance",
            f"{shown(relative_tolerance)} is not a tolerance from 1e-9 to 1 (the bisection stops when the rates "
            "tried are this close: 0 never stops)",
            "pass e.g. relative_tolerance=0.01",
        )
    prepared = _prepared(trace)  # (the trace checked first: its rate is read from it)
    own = trace_rate_per_s(prepared.trace)
    low, high = _rate_range(rate_range_per_s) if rate_range_per_s is not None else (own / 1000, own * 1000)
    keeps = lambda rate: _p99(at_rate(prepared, rate), inputs, percentile) <= budget  # noqa: E731
    tried = (float(low), float(high))
    if not keeps(low):
        return MaxRate(0.0, "none", tried)
    if keeps(high):
        return MaxRate(high, "every", tried)
    while high / low > 1 + relative_tolerance:
        middle = math.sqrt(low * high)
        low, high = (middle, high) if keeps(middle) else (low, middle)
    return MaxRate(low, "found", tried)


@says_each_warning_once
def fewest_for_ttft(
    trace: pd.DataFrame,
    count_of: str = "prefill_workers",
    *,
    ttft_budget_ms: float,
    percentile: float = 99.0,
    most: int = 4096,
    **inputs: Any,
) -> int | None:
    """The fewest prefill workers, decode workers, links or NICs per node that keep the trace's TTFT percentile
    within a budget.

    Every count from 1 up is tried, in order (a few at a time on threads), until one keeps the budget: no
    monotonicity is assumed (one more prefill worker can raise the p99, as routing changes), so the answer is
    the fewest that keeps it, and None means no count up to ``most`` does (each tried: ``most`` replays). NICs
    per node are tried over the counts a node of the cluster takes, as :func:`perfmodel.required_nics` tries
    them (:func:`perfmodel.replay.sizing.nic_counts`: the divisors of its GPUs per node, then 2 to 4 NICs per
    GPU), up to ``most``; the counts the cluster cannot be built with (its PCIe switches, NIC map or NICs down)
    are skipped with a warning that names them.

    Parameters
    ----------
    trace
        The traffic (as :func:`perfmodel.replay_ttft` takes it).
    count_of
        ``"prefill_workers"``, ``"decode_workers"``, ``"links"`` (the NICs a pool of links stands for) or
        ``"nics_per_node"`` (of the cluster given as the link).
    ttft_budget_ms
        The budget on the TTFT percentile (ms > 0).
    percentile
        Which percentile (default the p99).
    most
        The largest count to try.
    **inputs
        The other keywords of :func:`perfmodel.replay_ttft`.

    Returns
    -------
    int or None
        The fewest count that keeps the budget, or None when no count up to ``most`` keeps it.

    Examples
    --------
    >>> from perfmodel import fewest_for_ttft, synthetic_trace
    >>> trace = synthetic_trace(2000, 40, seed=0)   # 40 requests/s of 110 ms prefills: 4.4 workers busy
    >>> fewest_for_ttft(trace, "prefill_workers", ttft_budget_ms=1000, link="ib-ndr", model="llama-3.1-8b",
    ...                 prefill_tokens_per_s=40_000)
    7
    """
    from ..ground.progress import in_threads

    check_choice("count_of", count_of, COUNTS)
    _question_keywords("fewest_for_ttft", inputs, count_of)
    most = check_whole("most", most, smallest=1)
    budget = _budget(ttft_budget_ms)
    check_percentile(percentile)
    prepared = _prepared(trace)
    link = inputs.get("link", inputs.get("kv_transfer_bandwidth"))
    if count_of == "links" and (inputs.get("cluster") is not None or is_cluster(link)):
        raise InputError(
            "count_of",
            "'links' counts a pool of links, but the link is a cluster (which decides the resources flows share)",
            "ask for the fewest 'nics_per_node' of the cluster",
        )
    if count_of == "prefill_workers":
        fixed_workers(trace, [inputs.get("prefill_routing")], "count_of")
    counts: Sequence[int] = (
        _nic_counts(inputs, most) if count_of == "nics_per_node" else range(1, _held(inputs, count_of, most) + 1)
    )  # (lazy)
    if count_of == "links" and str(inputs.get("contention", "none")).lower() == "none":
        counts = [1]  # (each handoff alone: any count of links gives the TTFT of one, exactly; 1 is the fewest)
    p99 = lambda count: _p99(prepared, {**inputs, count_of: count}, percentile)  # noqa: E731
    workers = os.cpu_count() or 1
    start, size = 0, 2 * workers
    while start < len(counts):  # ascending, in batches that double: the first count that keeps it is the answer
        batch = counts[start : start + size]
        found = in_threads(p99, list(batch), workers, desc="fewest_for_ttft", progress=False)
        kept = [k for k, v in zip(batch, found) if v <= budget]
        if kept:
            return kept[0]
        start, size = start + size, size * 2
    return None


def _nic_counts(inputs: dict[str, Any], most: int) -> list[int]:
    """The NICs per node up to ``most`` that the cluster of ``inputs`` (its ``cluster``, else its link, with its
    fields replaced) can be built with, as :func:`perfmodel.required_nics` tries them; the others said in a
    warning, or :class:`InputError` where there is no cluster or no count up to ``most`` builds."""
    from ..network.placement import get_cluster
    from .cluster import with_cluster
    from .sizing import buildable, nic_counts

    base = inputs.get("cluster")
    base = inputs.get("link", inputs.get("kv_transfer_bandwidth")) if base is None else base
    if base is None or np.ndim(base) != 0 or not is_cluster(base):
        raise InputError(
            "count_of",
            f"'nics_per_node' counts a cluster's NICs, but the link is {base!r}",
            "give a cluster (a perfmodel.Cluster or a cluster preset) as the link",
        )
    cluster = get_cluster(base)  # (its GPUs per node read as they are: never built with a count of its own)
    gpus = check_whole("gpus_per_node", inputs.get("gpus_per_node", cluster.gpus_per_node), smallest=1)
    build = lambda count: with_cluster({**inputs, "nics_per_node": count})  # noqa: E731
    counts = nic_counts(gpus)
    try:
        return [
            k for k, _ in buildable("fewest_for_ttft", cluster.name, [k for k in counts if k <= most], build, "None")
        ]
    except InputError as error:
        larger = [k for k in counts if k > most and _builds(build, k)]
        if not larger:
            raise
        raise InputError(
            "most",
            f"{most} leaves no NIC count per node that cluster {cluster.name!r} can be built with ({error.problem})",
            f"pass most >= {larger[0]}",
        ) from None


def _held(inputs: dict[str, Any], count_of: str, most: int) -> int:
    """The most workers (``count_of``: prefill or decode) up to ``most`` that the cluster of ``inputs`` holds when its
    size is fixed (``nodes``), said in a warning when fewer than ``most``: a larger count is not placed, so not
    tried (None then means no count that fits keeps the budget). ``most`` without a cluster of fixed size."""
    from ..network.placement import get_cluster
    from .cluster import with_cluster

    given = inputs.get("cluster", inputs.get("link", inputs.get("kv_transfer_bandwidth")))
    if count_of not in ("prefill_workers", "decode_workers") or given is None or np.ndim(given) != 0:
        return most
    if not is_cluster(given):
        return most
    spec = with_cluster(inputs).get("kv_transfer_bandwidth")
    cluster = get_cluster(spec) if spec is not None and np.ndim(spec) == 0 and is_cluster(spec) else None
    if cluster is None or cluster.nodes is None:
        return most
    tp, decode_tp = inputs.get("tp", 1), inputs.get("decode_tp")
    workers = {"prefill_workers": inputs.get("prefill_workers", 1), "decode_workers": inputs.get("decode_workers", 1)}
    fits = lambda k: _builds(lambda n: cluster.placement(tp, decode_tp, **{**workers, count_of: n}), k)  # noqa: E731
    if not fits(1):
        return most  # (the replay says why, in its own words)
    low, high = 1, most  # (placement is monotone in the count: the most that fits, by bisection)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    if low < most:
        warn(
            f"fewest_for_ttft: cluster {cluster.name!r} of {_words.count(cluster.nodes, 'node')} holds at most "
            f"{_words.count(low, count_of.replace('_', ' ')[:-1])} here, so larger counts were not tried; None means no count "
            f"up to {low} keeps the budget (give the cluster more nodes to try more)"
        )
    return low


def _builds(build: Any, count: int) -> bool:
    """Whether ``build(count)`` builds (no :class:`InputError`)."""
    try:
        build(count)
    except InputError:
        return False
    return True


def _question_keywords(question: str, inputs: dict[str, Any], searched: str) -> None:
    """A sizing question's other keywords: those of :func:`perfmodel.replay_ttft` (or a cluster's), not the one it
    searches; else the error Python gives an unknown keyword (a close name suggested), or :class:`InputError`."""
    if searched in inputs:
        raise InputError(searched, f"is what {question} searches", f"drop the {searched} keyword")
    known = [name for name in TTFT_AXES if name != "request_rate_per_s"]
    unknown = sorted(set(inputs) - set(known))
    if unknown:
        close = difflib.get_close_matches(unknown[0], [*known, "percentile"], n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{question}() got unexpected keyword arguments {unknown}{hint}")


def _prepared(trace: pd.DataFrame) -> PreparedTrace:
    """The trace prepared once for every configuration of a grid or a question, refused when it has no request
    (no percentile, no rate to scale)."""
    prepared = serving_trace(trace)
    if not len(prepared.trace):
        raise InputError("trace", "has no requests: no TTFT percentile to compute", "pass a trace with requests")
    return prepared


def _rate_range(given: Any) -> tuple[float, float]:
    """A search's (lowest, highest) rates in requests/s, or :class:`InputError`."""
    pair = tuple(given) if isinstance(given, (tuple, list, np.ndarray)) else ()
    if len(pair) == 2 and all(_real(v) for v in pair) and 0 < pair[0] < pair[1] < math.inf:
        return float(pair[0]), float(pair[1])
    raise InputError(
        "rate_range_per_s",
        f"needs two numbers, 0 < lowest < highest < inf, got {given!r}"
        if len(pair) == 2
        else f"needs two numbers, 0 < lowest < highest < inf, got {shown(given)}",
        "pass (lowest, highest) rates in requests/s",
    )


def _real(value: Any) -> bool:
    """A real number that is not a bool (True is no budget nor rate)."""
    return isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_))


def _budget(value: Any) -> float:
    if not (_real(value) and 0 < value < math.inf):
        raise InputError(
            "ttft_budget_ms",
            f"must be a finite time > 0 in ms, got {value!r}",
            "pass the budget in ms, e.g. ttft_budget_ms=500",
        )
    return float(value)
