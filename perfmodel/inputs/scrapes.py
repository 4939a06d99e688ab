"""Prometheus scrapes of engines (SGLang, vLLM, any other) read as one row per metric and label set, for
:mod:`perfmodel.engines`: counters and gauges as their values, histograms as count, sum, mean and bucket-bounded
quantiles (:func:`bucket_quantile`, as Prometheus's ``histogram_quantile``), each checked
(:mod:`perfmodel.inputs.engine_checks`) rather than read as a wrong number.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from . import engine_checks as checks

__all__ = ["FORMATS", "QUANTILES", "WINDOWS", "bucket_quantile", "metric_families", "metrics_frame"]

#: The formats perfmodel reads from engines, as every refusal names them.
FORMATS = (
    "Prometheus text exposition (a /metrics scrape of SGLang or vLLM), vllm bench serve --save-result JSON, "
    "SGLang bench_serving JSONL"
)

#: The quantiles a histogram is summarized by (percent).
QUANTILES = (50, 90, 99)

#: What each metric perfmodel interprets measures: the window of a request's life it covers. A key is a metric's
#: name, or ``name{stage}`` for SGLang's per-stage histogram. Every other metric is kept and listed as read.
WINDOWS = {
    "sglang:per_stage_req_latency_seconds{prefill_transfer_kv_cache}": "prefill side: from entering the transfer queue (prefill done) to the KV transfer's end",
    "sglang:per_stage_req_latency_seconds{decode_transferred}": "decode side: from entering the transfer queue to the KV cache received (can include the prefill itself)",
    "sglang:per_stage_req_latency_seconds{prefill_bootstrap}": "prefill side: the bootstrap (handshake) queue",
    "sglang:per_stage_req_latency_seconds{prefill_forward}": "prefill side: the prefill forward pass(es)",
    "sglang:per_stage_req_latency_seconds{decode_bootstrap}": "decode side: the prealloc queue (bootstrap and memory allocation wait)",
    "sglang:per_stage_req_latency_seconds{decode_prepare}": "decode side: received to the prealloc queue",
    "sglang:per_stage_req_latency_seconds{decode_waiting}": "decode side: waiting queue to the forward pass",
    "sglang:time_to_first_token_seconds": "this server: request received to first token",
    "sglang:queue_time_seconds": "this server: waiting queue to the forward pass",
    "sglang:e2e_request_latency_seconds": "this server: request received to last token",
    "vllm:time_to_first_token_seconds": "this engine: request received to first token",
    "vllm:request_queue_time_seconds": "this engine: the WAITING phase",
    "vllm:request_prefill_time_seconds": "this engine: the PREFILL phase (scheduled to first token)",
    "vllm:e2e_request_latency_seconds": "this engine: request received to last token",
    "vllm:nixl_xfer_time_seconds": "one NIXL transfer (a decode worker's READ), posted to done: the wire time, no queueing before the post",
    "vllm:nixl_post_time_seconds": "one NIXL transfer: the time to post it",
    "vllm:nixl_bytes_transferred": "bytes of one NIXL transfer",
    "vllm:nixl_num_descriptors": "descriptors (messages) of one NIXL transfer",
    "vllm:nixl_num_failed_transfers_total": "NIXL transfers that failed, since the engine started",
    "vllm:nixl_num_failed_notifications_total": "NIXL notifications that failed, since the engine started",
}


_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})  # (as Prometheus escapes a label's value)


def refuse_format(where: str, problem: str) -> InputError:
    return InputError(where, problem, f"give one of the formats perfmodel reads from engines: {FORMATS}")


def text_of(path_or_text: str | os.PathLike[str], name: str = "path_or_text") -> tuple[str, str]:
    """(where, text): a path's text (read only, never changed), or a text given as such (a str with a newline)."""
    if not isinstance(path_or_text, (str, os.PathLike)) or not str(path_or_text):
        got = "an empty str" if isinstance(path_or_text, str) else f"a {type(path_or_text).__name__}"
        raise InputError(name, f"got {got}", "pass a file's path (a str or pathlib.Path), or the text itself (a str)")
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return "<text>", path_or_text.removeprefix("\ufeff")  # (a byte-order mark is not part of the text)
    path = Path(path_or_text)
    if path.is_dir():
        raise InputError(str(path), "a directory, not a file", "give the file itself")
    if isinstance(path_or_text, str) and not path.exists():  # (a one-line text read as a path: say how text is told)
        raise FileNotFoundError(
            2,
            "no such file (a str is read as the text itself only when it holds a newline: end a "
            "one-line text with '\\n')",
            path_or_text,
        )
    from ..ground.tables import compression_of, open_input

    compression = compression_of(path)  # (a scrape or result saved compressed, as its suffix says: read through)
    try:
        with open_input(path, compression) as stream:  # (a missing file: OSError, said in one line by the command)
            data = stream.read()
    except (EOFError, ValueError, OSError) as error:
        if compression is None or (isinstance(error, OSError) and error.filename):
            raise
        raise InputError(str(path), f"could not be read as {compression} ({error})", "check that the file is "
                         "complete and compressed as its name says") from None  # fmt: skip
    if b"\x00" in data[:4096]:
        raise refuse_format(str(path), "a binary file, not text (a compressed one: name it with its suffix, .gz)")
    try:
        return str(path), data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise refuse_format(str(path), f"not UTF-8 text (byte {error.start})") from None


def bucket_quantile(q: float, upper_bounds: Sequence[float], cumulative: Sequence[float]) -> tuple[float, float, float]:
    """The ``q`` quantile of a Prometheus histogram, as ``histogram_quantile`` computes it, with its bucket.

    The quantile lies in the first bucket whose cumulative count reaches ``q * total``; inside it, the value is
    interpolated linearly between the bucket's bounds (Prometheus's rule: the lowest bucket starts at 0 when its
    upper bound is above 0; a quantile in the ``+Inf`` bucket is the highest finite bound).

    Parameters
    ----------
    q
        The quantile, 0 to 1.
    upper_bounds
        Each bucket's ``le``, ascending, the last ``inf``.
    cumulative
        Each bucket's cumulative count.

    Returns
    -------
    tuple of float
        ``(value, low, high)``: the interpolated value and the bounds of the bucket it lies in (``high`` is
        ``inf`` in the ``+Inf`` bucket); NaN for an empty histogram.

    Examples
    --------
    >>> bucket_quantile(0.5, [0, 0.5, 1, float("inf")], [6, 11, 14, 19])  # (rank 9.5: 3.5 of the 5 in (0, 0.5])
    (0.35, 0.0, 0.5)
    >>> bucket_quantile(0.99, [0.1, 1.0, float("inf")], [0, 5, 10])       # in +Inf: the highest finite bound
    (1.0, 1.0, inf)
    """
    bounds = np.asarray(upper_bounds, dtype=np.float64)
    counts = np.asarray(cumulative, dtype=np.float64)
    if not (0.0 <= q <= 1.0) or bounds.size < 2 or not np.isinf(bounds[-1]) or counts[-1] <= 0:
        return math.nan, math.nan, math.nan
    rank = q * counts[-1]
    b = int(np.searchsorted(counts[:-1], rank, side="left"))  # the first bucket whose count reaches the rank
    if b == bounds.size - 1:
        return float(bounds[-2]), float(bounds[-2]), math.inf
    if b == 0 and bounds[0] <= 0:
        return float(bounds[0]), -math.inf, float(bounds[0])
    start, count = (0.0, counts[0]) if b == 0 else (bounds[b - 1], counts[b] - counts[b - 1])
    below = 0.0 if b == 0 else counts[b - 1]
    value = start + (bounds[b] - start) * ((rank - below) / count) if count > 0 else bounds[b]
    return float(value), float(start), float(bounds[b])


def _labels_text(labels: dict[str, str]) -> str:
    """The labels as Prometheus writes them: ``k="v"``, each value's backslashes, quotes and newlines escaped."""
    return ",".join(f'{key}="{value.translate(_ESCAPES)}"' for key, value in labels.items())


#: One ``k="v"`` of :func:`_labels_text` (a value's quotes and backslashes escaped).
_LABEL = re.compile(r'(?:^|,)([^=,]+)="((?:[^"\\]|\\.)*)"')


def label_set(text: str) -> tuple[tuple[str, str], ...]:
    """The labels of a ``labels`` text (:func:`_labels_text`) as a set (sorted pairs, values left escaped): two
    series are the same whatever order their labels are listed in.

    >>> label_set('model_name="m",engine="0"')
    (('engine', '0'), ('model_name', 'm'))
    """
    return tuple(sorted(_LABEL.findall(text)))


def metric_families(where: str, text: str) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    if not text.strip():
        raise refuse_format(where, "an empty file")
    if text.lstrip()[:1] in "{[":  # (JSON: perfmodel.engines tells a benchmark result first)
        raise refuse_format(where, "JSON, not a Prometheus text exposition")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, KeyError, TypeError) as error:
        line = str(error).strip().splitlines()[0][:80] if str(error).strip() else _unsaid(error, text)
        raise refuse_format(where, f"not a Prometheus text exposition ({line})") from None
    if not any(family.samples for family in families):
        raise refuse_format(where, "no metric samples")
    return families


def _unsaid(error: Exception, text: str) -> str:
    """What a parser error without a message was about: the first line with a character not ASCII, if any."""
    for number, line in enumerate(text.splitlines(), start=1):
        odd = next((c for c in line if not c.isascii()), None)
        if odd is not None:
            return f"line {number}, {line[:60]!r}: {odd!r} is not ASCII, which a metric name must be"
    return f"prometheus_client's parser raised {type(error).__name__} with no message"


def _bound(text: str) -> object:
    """A bucket's bound or a quantile as the number it writes (text that is no number: itself)."""
    try:
        return float(text)
    except ValueError:
        return text


def metrics_frame(where: str, text: str) -> pd.DataFrame:
    """The text of a scrape (from ``where``) as :func:`perfmodel.engines.read_engine_metrics` returns it: one row
    per metric and label set, each checked."""
    families = metric_families(where, text)
    plain = _counters_without_total(where, text)
    rows, seen = [], set()
    for family in families:
        renamed = family.type == "counter" and family.name in plain  # (the parser added _total: taken off again)
        for sample in family.samples:
            name = sample.name.removesuffix("_total") if renamed else sample.name
            labels = {k: (_bound(v) if k in ("le", "quantile") else v) for k, v in sample.labels.items()}
            key = (name, tuple(sorted(labels.items())))  # (a bound by its number: le="0.1" and le="0.10" are one)
            if key in seen:
                raise InputError(
                    f"{where}: {name}{{{_labels_text(sample.labels)}}}",
                    "appears twice (two scrapes in one file?), so one would overwrite or add to the other",
                    "scrape a server a file, and give the files one by one",
                )
            seen.add(key)
            if family.type == "unknown":
                _refuse_untyped_histogram(where, sample)
        rows.extend(_family_rows(where, family, renamed))
    frame = pd.DataFrame(rows, columns=_COLUMNS).astype({c: float for c in _COLUMNS if c not in _TEXT})
    frame.attrs["source"] = where
    return frame


_COLUMNS = [
    "metric",
    "type",
    "stage",
    "labels",
    "value",
    "count",
    "sum",
    "mean",
    *[f"p{q}{end}" for q in QUANTILES for end in ("", "_low", "_high")],
    "window",
]
_TEXT = ("metric", "type", "stage", "labels", "window")
#: The columns of read_engine_metrics' and read_benchmark's frames the comparison and the fits read, by type.
SCRAPE_KINDS = {column: "text" if column in _TEXT else "number" for column in _COLUMNS}


#: A histogram's (or gauge histogram's, or summary's) count and sum samples.
_TOTALS = {"_count": "count", "_sum": "sum", "_gcount": "count", "_gsum": "sum"}


def _counters_without_total(where: str, text: str) -> set[str]:
    """The counters the text declares without ``_total`` (``# TYPE foo counter``, its samples ``foo``), whose
    samples ``prometheus_client``'s parser renames ``foo_total``; a name declared both with and without ``_total``
    (two counters the parser would name alike) is refused."""
    declared = set()
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"] and parts[3].strip() == "counter":
            declared.add(parts[2].strip('"'))
    plain = {name for name in declared if not name.endswith("_total")}
    both = sorted(name for name in plain if f"{name}_total" in declared)
    if both:
        raise InputError(
            f"{where}: {both[0]}",
            f"two counters, {both[0]!r} and {both[0] + '_total'!r}: prometheus_client's parser names the samples "
            "of both with _total, so which series is which cannot be told",
            "give each counter a name of its own (the text format's samples of counter foo are named foo or "
            "foo_total, not both)",
        )
    return plain


#: The histograms perfmodel interprets, by name (SGLang's per-stage histogram once, for all its stages).
_HISTOGRAMS = {key.split("{")[0] for key in WINDOWS if not key.endswith("_total")}


def _refuse_untyped_histogram(where: str, sample: Any) -> None:
    """Refuse a sample of a histogram perfmodel interprets that the parser read as an untyped number: its
    ``# TYPE`` line was stripped (``grep -v '^#'``) or other lines stand between it and its samples, so the
    histogram (a TTFT, a transfer) would be missing from the comparison without a word."""
    suffix = next((end for end in ("_bucket", "_count", "_sum") if sample.name.endswith(end)), "")
    name = sample.name.removesuffix(suffix)
    stage = sample.labels.get("stage", "")
    if not suffix or name not in _HISTOGRAMS or not WINDOWS.get(f"{name}{{{stage}}}" if stage else name):
        return
    labels = {key: value for key, value in sample.labels.items() if key != "le"}
    raise InputError(
        f"{where}: {name}{{{_labels_text(labels)}}}",
        f"its samples ({sample.name}) are read as untyped numbers, not a histogram: no '# TYPE {name} histogram' "
        "line right before them (stripped, as grep -v '^#' does, or other metrics' lines in between), so its "
        "count, mean and quantiles would be missing from the comparison",
        f"save the scrape as the engine wrote it (curl http://HOST:PORT/metrics > file), or put the line "
        f"'# TYPE {name} histogram' back right before its samples",
    )


def _family_rows(where: str, family: Any, renamed: bool = False) -> list[dict[str, Any]]:
    """One row per label set of a parsed metric family (``renamed``: a counter written without ``_total``, which
    the parser added to its samples' names). A series is told by its labels as a set, whatever their order on
    each line (the order carries no meaning in the exposition format); its ``labels`` text keeps the order of the
    series' first line."""
    groups: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for sample in family.samples:
        if sample.name.endswith("_created"):  # (a counter's or histogram's creation time, not a measurement)
            continue
        bucketed = {"histogram": "le", "gaugehistogram": "le", "summary": "quantile"}.get(family.type)
        labels = {key: value for key, value in sample.labels.items() if key != bucketed}
        group = groups.setdefault(
            tuple(sorted(labels.items())), {"labels": labels, "buckets": [], "quantiles": {}, "name": sample.name}
        )
        suffix = sample.name[len(family.name) :]
        series = f"{where}: {family.name}{{{_labels_text(group['labels'])}}}"
        if family.type in ("histogram", "gaugehistogram") and suffix == "_bucket":
            group["buckets"].append((checks.bound(series, "le", sample.labels["le"]), float(sample.value)))
        elif suffix in _TOTALS and bucketed:
            group[_TOTALS[suffix]] = float(sample.value)
        elif family.type == "summary" and "quantile" in sample.labels:
            group["quantiles"][checks.bound(series, "quantile", sample.labels["quantile"])] = float(sample.value)
        else:
            group["value"] = float(sample.value)
            group["name"] = sample.name.removesuffix("_total") if renamed else sample.name
    return [_row(where, family, group) for group in groups.values()]


def _row(where: str, family: Any, group: dict[str, Any]) -> dict[str, Any]:
    labels = dict(group["labels"])
    stage = labels.pop("stage", "")
    kind = family.type
    name = family.name if kind in ("histogram", "gaugehistogram", "summary") else group["name"]
    row: dict[str, Any] = {
        "metric": name,
        "type": kind,
        "stage": stage,
        "labels": _labels_text(labels),
        "value": group.get("value", math.nan),
        "count": group.get("count", math.nan),
        "sum": group.get("sum", math.nan),
    }
    buckets, series = sorted(group["buckets"]), f"{where}: {name}{{{_labels_text(group['labels'])}}}"
    key = f"{name}{{{stage}}}" if stage else name
    window = WINDOWS.get(key) or (WINDOWS.get(f"{name}_total", "") if kind == "counter" else "")
    if buckets:
        # (a histogram perfmodel does not interpret may have negative bounds or sum: a temperature's)
        checks.check_buckets(series, buckets, row["count"], group.get("sum", 0.0), signed=not window)
    if kind == "summary":
        checks.check_summary(series, group["quantiles"], row["count"], group.get("sum", 0.0))
    if buckets and math.isnan(row["count"]):
        row["count"] = buckets[-1][1] if math.isinf(buckets[-1][0]) else math.nan
    row["mean"] = row["sum"] / row["count"] if row["count"] > 0 else math.nan
    for q in QUANTILES:
        if buckets:
            bounds, counts = zip(*buckets)
            value, low, high = bucket_quantile(q / 100, bounds, counts)
        else:
            value = group["quantiles"].get(q / 100, math.nan)
            low = high = value  # (a summary's quantile is the engine's own, not bucketed)
        row.update({f"p{q}": value, f"p{q}_low": low, f"p{q}_high": high})
    row["window"] = window
    return row


def fixture(name: str) -> str:
    """A test file shipped with the tests (for the examples)."""
    return str(Path(__file__).resolve().parents[2] / "tests" / "data" / "engines" / name)
