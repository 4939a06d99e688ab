"""The checks of :mod:`perfmodel.engines`' readers: a benchmark's per-request lists and a histogram's buckets, each
value refused in one line (naming the file, the key or series, and the value) rather than read as a wrong number."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ..errors import InputError


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


def check_buckets(where: str, buckets: list[tuple[float, float]], count: float, total: float) -> None:
    """A histogram's buckets as the exposition format requires them: counts finite and >= 0, cumulative (never
    decreasing), the last ``+Inf``, equal to ``_count``; ``le`` and ``_sum`` not NaN or negative (``_sum``
    finite); else its quantiles would mean nothing, and it is refused."""
    counts = [n for _, n in buckets]
    bad = [f"_bucket le {le:g}: {n:g}" for le, n in buckets if not 0 <= n < math.inf]
    bad += [f"le {le:g}" for le, _ in buckets if not le >= 0]
    bad += [f"_count {count:g}" for _ in [0] if not (math.isnan(count) or 0 <= count < math.inf)]
    bad += [f"_sum {total:g}" for _ in [0] if not 0 <= total < math.inf]
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
