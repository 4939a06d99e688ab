"""The checks of :mod:`perfmodel.engines`' readers: a benchmark's per-request lists and a histogram's buckets, each
value refused in one line (naming the file, the key or series, and the value) rather than read as a wrong number."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from .words import count as counted

#: How far a benchmark file's own mean TTFT may lie from the mean of its ttfts: the tools write both unrounded,
#: but a file that went through another writer may round its figures (a relative 1e-6 would refuse that); 1%
#: allows for rounding and still tells seconds from ms (a factor of 1000) or a figure of another run.
TOLERANCE = 0.01


def numbers(where: str, key: str, values: list[Any], kind: type, failed: np.ndarray | None = None) -> np.ndarray:
    """A per-request list as numbers, each finite and >= 0 (whole and below 2**53 for ``int``; never a boolean or
    a string), except for ``failed`` requests, whose values may be missing (None, NaN)."""
    array = np.full(len(values), math.nan)
    for i, v in enumerate(values):
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if (v is None or (number and math.isnan(v))) and failed is not None and failed[i]:
            continue
        if number and (0 <= v < 2**53 and float(v).is_integer() if kind is int else 0 <= v < math.inf):
            array[i] = v
            continue
        raise InputError(
            f"{where}: {key}",
            f"request {i} has {v!r}, not a " + ("whole number >= 0" if kind is int else "finite number >= 0"),
            "give the file as the benchmark wrote it",
        )
    return array.astype(np.int64) if kind is int else array


def check_buckets(
    where: str, buckets: list[tuple[float, float]], count: float, total: float, *, signed: bool = False
) -> None:
    """A histogram's buckets as the exposition format requires them: counts finite and >= 0, cumulative (never
    decreasing), the last ``+Inf``, equal to ``_count``; ``le`` and ``_sum`` not NaN or negative (``_sum``
    finite); else its quantiles would mean nothing, and it is refused. With ``signed``, ``le`` and ``_sum`` may
    be negative (a histogram perfmodel does not interpret, a temperature's: legal in the format, kept as the
    engine wrote it); only the sign is free."""
    counts = [n for _, n in buckets]
    bad = [f"_bucket le {le:g}: {n:g}" for le, n in buckets if not 0 <= n < math.inf]
    bad += [f"le {le:g}" for le, _ in buckets if (math.isnan(le) if signed else not le >= 0)]
    bad += [f"_count {count:g}" for _ in [0] if not (math.isnan(count) or 0 <= count < math.inf)]
    bad += [f"_sum {total:g}" for _ in [0] if not (math.isfinite(total) if signed else 0 <= total < math.inf)]
    problem = (
        "a NaN, infinite or negative value (" + ", ".join(bad) + ")"
        if bad
        else "bucket counts decrease (" + ", ".join(f"le {le:g}: {n:g}" for le, n in buckets) + ")"
        if any(b < a for a, b in itertools.pairwise(counts))
        else "no +Inf bucket"
        if not math.isinf(buckets[-1][0])
        else f"_count {count:g} is not the +Inf bucket's {counts[-1]:g}"
        if not math.isnan(count) and count != counts[-1]
        else ""
    )
    if problem:
        raise InputError(
            where,
            problem,
            "give the scrape as the engine wrote it (a histogram's buckets are "
            'cumulative, end with le="+Inf" and add up to its _count)',
        )


def check_summary(where: str, quantiles: dict[float, float], count: float, total: float) -> None:
    """A summary as the exposition format requires it, held as :func:`check_buckets` holds a histogram: quantile
    labels 0 to 1, quantiles not negative or infinite (NaN is no observation in the client's window, as Go's and
    Envoy's clients write it), ``_count`` a whole number >= 0, ``_sum`` finite and >= 0; else refused."""
    bad = [f"quantile {q:g}" for q in quantiles if not 0 <= q <= 1]
    bad += [f"quantile {q:g}: {v:g}" for q, v in quantiles.items() if not (math.isnan(v) or 0 <= v < math.inf)]
    whole = math.isnan(count) or (0 <= count < math.inf and count.is_integer())
    if not whole:
        bad.append(f"_count {count:g}")
    if not 0 <= total < math.inf:
        bad.append(f"_sum {total:g}")
    if bad:
        raise InputError(
            where,
            "a summary with a value out of range (" + ", ".join(bad) + ")",
            "give the scrape as the engine wrote it (a summary's quantile labels lie in 0 to 1, its _count is a "
            "whole number >= 0, its _sum and quantiles are not negative)",
        )


def bound(where: str, key: str, text: str) -> float:
    """A bucket's ``le`` or a summary's ``quantile`` label as a number; else refused in one line."""
    try:
        return float(text)
    except ValueError:
        raise InputError(
            where,
            f"{key} {text!r} is not a number",
            "give the scrape as the engine wrote it (a histogram's le and a summary's quantile label are numbers)",
        ) from None


def check_totals(
    where: str, tool: str, result: dict[str, Any], completed: np.ndarray, seconds: dict[str, np.ndarray]
) -> None:
    """A benchmark's per-request lists against the run's own figures: no completed request's ``seconds`` (its
    ``ttfts``, ``latencies``) longer than the run's ``duration``, as many requests without an error as the file's
    ``completed``, and their mean TTFT the file's ``mean_ttft_ms`` where it has one (to :data:`TOLERANCE`); else
    refused in one line, naming the file, the key, both numbers and the likely cause."""
    writes = "vllm bench serve and SGLang bench_serving write" if tool == "benchmark" else f"{tool} writes"
    duration = figure(where, "duration", result["duration"])
    for key, values in seconds.items():
        done = values[completed]
        if (done > duration * (1 + TOLERANCE)).any():
            i = int(np.flatnonzero(completed & (values > duration * (1 + TOLERANCE)))[0])
            cause = f"the {key} look like ms, and {writes} seconds" if done.max() / 1e3 <= duration else ""
            raise InputError(
                f"{where}: {key}",
                f"request {i} has {values[i]:g} s, longer than the whole run (duration {duration:g} s)"
                + (f": {cause}" if cause else ": the lists and the duration are of different runs"),
                f"give the file as the benchmark wrote it ({key} in seconds)",
            )
    reported, n = figure(where, "completed", result["completed"], whole=True), int(completed.sum())
    if n != reported:
        cause = (
            "the file has no errors list, so every request counts as completed"
            if result.get("errors") is None
            else "a request failed without an error message, or the lists are of another run"
        )
        raise InputError(
            f"{where}: completed",
            f"the lists hold {counted(n, 'completed request')} (no error), but the file says {reported:g}: {cause}",
            "give the file as the benchmark wrote it",
        )
    mean = figure(where, "mean_ttft_ms", result.get("mean_ttft_ms"), missing=True)
    ours = float(seconds["ttfts"][completed].mean() * 1e3) if n else math.nan
    if not (math.isnan(mean) or math.isnan(ours) or math.isclose(ours, mean, rel_tol=TOLERANCE)):
        thousand = 500 < ours / mean < 2000 if mean else False
        raise InputError(
            f"{where}: mean_ttft_ms",
            f"the mean TTFT of the {counted(n, 'completed request')} is {ours:g} ms, the file's mean_ttft_ms "
            f"{mean:g} (more apart than the {TOLERANCE:.0%} rounding allows): "
            + (f"the ttfts look like ms, and {writes} seconds" if thousand else "the lists are of another run"),
            "give the file as the benchmark wrote it (ttfts in seconds)",
        )


def without_silent_failures(where: str, result: dict[str, Any], completed: np.ndarray, ttft: np.ndarray) -> np.ndarray:
    """``completed`` (requests without an error message) less the requests that failed without one: the clients
    save an HTTP error's reason phrase, which may be empty, so where the file's ``completed`` count is lower by
    exactly the requests that have no error and no first token (a TTFT of 0), those failed."""
    reported = figure(where, "completed", result.get("completed"), whole=True, missing=True)
    silent = completed & (ttft == 0)
    if result.get("errors") is not None and 0 < completed.sum() - reported == silent.sum():
        return completed & ~silent
    return completed


def unlike(frame: Any, reader: str, kinds: dict[str, str]) -> str:
    """What keeps ``frame`` from being ``reader``'s output (``kinds``: each column it uses, ``"text"``,
    ``"number"`` or ``"bool"``): not a DataFrame, a column missing or of another type; empty if nothing."""
    if not isinstance(frame, pd.DataFrame):
        return f"a {type(frame).__name__}, not {reader}()'s output"
    missing = [column for column in kinds if column not in frame.columns]
    if missing:
        return f"a DataFrame without the column {missing[0]!r}: not {reader}()'s output"
    for column, kind in kinds.items():
        values = frame[column]
        ok = (
            pd.api.types.is_bool_dtype(values)
            if kind == "bool"
            else pd.api.types.is_string_dtype(values)
            if kind == "text"
            else pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        )
        if not ok:
            return f"a DataFrame whose column {column!r} is {values.dtype}, not {kind}: not {reader}()'s output"
    return ""


def scrapes(name: str, frames: Any, kinds: dict[str, str]) -> list[pd.DataFrame]:
    """Scrapes given as a list of ``read_engine_metrics`` frames (``kinds``: its columns' types, as for
    :func:`unlike`), else refused in one line."""
    listed = isinstance(frames, Sequence) and not isinstance(frames, (str, bytes))
    problems = [unlike(f, "read_engine_metrics", kinds) for f in frames] if listed else [f"a {type(frames).__name__}"]
    problem = next((p for p in problems if p), "")
    if problem:
        got = f"{'a list holding ' if listed else ''}{problem}"
        raise InputError(name, f"got {got}", "pass a list of scrapes: [read_engine_metrics(path), ...]")
    return list(frames)


def figure(where: str, key: str, value: Any, *, whole: bool = False, missing: bool = False) -> float:
    """A run's figure (``duration``, ``request_rate``, ``max_concurrency``): a number >= 0 (whole for ``whole``;
    None, and for a rate ``inf``, where ``missing``), never a boolean or a string; else refused in one line."""
    if value is None and missing:
        return math.nan
    if missing and not whole and str(value).lower() in ("inf", "infinity"):
        return math.inf
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and value >= 0 and (isinstance(value, int) or (value < math.inf and (not whole or value.is_integer()))):
        return float(value)
    rule = "a whole number >= 0" if whole else "a finite number >= 0"
    raise InputError(f"{where}: {key}", f"{value!r} is not {rule}", "give the file as the benchmark wrote it")
