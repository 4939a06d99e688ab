"""Engines' own files: Prometheus scrapes of SGLang and vLLM, ``vllm bench serve`` and SGLang ``bench_serving``
results, and the model put beside what they measured.

- :func:`read_engine_metrics`: a Prometheus text exposition (``curl host:port/metrics``), parsed by
  ``prometheus_client``'s parser, as one row per metric and label set: counters and gauges as their values,
  histograms as count, sum, mean and bucket-bounded quantiles.
- :func:`read_benchmark`: a benchmark's result file as a trace (``num_input_tokens``, ``num_output_tokens``,
  ``ttft_ms``, ``arrival_ms`` when the file has send times) that :func:`perfmodel.replay_handoffs` replays.
- :func:`compare_measured`: the model's handoff delay over a benchmark's prompts beside the measured transfer
  stage and TTFT, each with the window it covers; :func:`measured_fits` says what the files can fit.

Sources of the formats (the shapes the readers and the test files follow): SGLang's
``python/sglang/srt/metrics/collector.py`` and ``python/sglang/bench_serving.py`` (commits 00ae9c15 and 0033168f),
vLLM's ``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`` (``NixlPromMetrics``, connector
version 2, commit 002a1057), ``vllm/v1/metrics/loggers.py`` (commit a6f0308c) and ``vllm/benchmarks/serve.py``
(commit 009e6d4a).
"""

from __future__ import annotations

import codecs
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .errors import InputError
from .inputs import engine_checks as checks
from .inputs.words import count

__all__ = [
    "FORMATS",
    "WINDOWS",
    "MeasuredFits",
    "bucket_quantile",
    "compare_measured",
    "detect",
    "measured_fits",
    "read_benchmark",
    "read_engine_metrics",
]

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

#: The measured windows that hold the KV transfer, and the TTFTs, that :func:`compare_measured` shows.
TRANSFER_METRICS = (
    "sglang:per_stage_req_latency_seconds{prefill_transfer_kv_cache}",
    "sglang:per_stage_req_latency_seconds{decode_transferred}",
    "vllm:nixl_xfer_time_seconds",
)
TTFT_METRICS = ("sglang:time_to_first_token_seconds", "vllm:time_to_first_token_seconds")
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})  # (as Prometheus escapes a label's value)


def _refuse(where: str, problem: str) -> InputError:
    return InputError(where, problem, f"give one of the formats perfmodel reads from engines: {FORMATS}")


def _text_of(path_or_text: str | os.PathLike[str], name: str = "path_or_text") -> tuple[str, str]:
    """(where, text): a path's text (read only, never changed), or a text given as such (a str with a newline)."""
    if not isinstance(path_or_text, (str, os.PathLike)) or not str(path_or_text):
        got = "an empty str" if isinstance(path_or_text, str) else f"a {type(path_or_text).__name__}"
        raise InputError(name, f"got {got}", "pass a file's path (a str or pathlib.Path), or the text itself (a str)")
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return "<text>", path_or_text.removeprefix("\ufeff")  # (a byte-order mark is not part of the text)
    path = Path(path_or_text)
    if path.is_dir():
        raise InputError(str(path), "a directory, not a file", "give the file itself")
    data = path.read_bytes()  # (a missing file: OSError, said in one line by the command)
    if b"\x00" in data[:4096]:
        raise _refuse(str(path), "a binary file, not text")
    try:
        return str(path), data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise _refuse(str(path), f"not UTF-8 text (byte {error.start})") from None


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


def _families(where: str, text: str) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    if not text.strip():
        raise _refuse(where, "an empty file")
    if text.lstrip()[:1] in "{[":
        try:
            results = _results(where, text)
        except InputError:
            results = []
        benchmark = bool(results) and all(_is_benchmark(result) for result in results)
        if benchmark:
            raise InputError(where, "this is a benchmark result: use read_benchmark", "pass the file to read_benchmark")
        raise _refuse(where, "JSON, but no benchmark result (no 'completed' and 'duration' keys)")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, KeyError, TypeError) as error:
        line = str(error).strip().splitlines()[0][:80] if str(error).strip() else _unsaid(error, text)
        raise _refuse(where, f"not a Prometheus text exposition ({line})") from None
    if not any(family.samples for family in families):
        raise _refuse(where, "no metric samples")
    return families


def _unsaid(error: Exception, text: str) -> str:
    """What a parser error without a message was about: the first line with a character not ASCII, if any."""
    for number, line in enumerate(text.splitlines(), start=1):
        odd = next((c for c in line if not c.isascii()), None)
        if odd is not None:
            return f"line {number}, {line[:60]!r}: {odd!r} is not ASCII, which a metric name must be"
    return f"prometheus_client's parser raised {type(error).__name__} with no message"


def read_engine_metrics(path_or_text: str | os.PathLike[str]) -> pd.DataFrame:
    """An engine's Prometheus scrape as one row per metric and label set (SGLang, vLLM, or any other).

    Parsed by ``prometheus_client``'s parser (``text_string_to_metric_families``). Counters and gauges give
    their ``value``; histograms give ``count``, ``sum``, ``mean`` and, for each of p50, p90 and p99, the
    bucket the quantile lies in (``p50_low`` to ``p50_high``: all a histogram knows) and ``p50``, the value
    interpolated linearly inside that bucket as Prometheus's ``histogram_quantile`` does
    (:func:`bucket_quantile`); summaries give the quantiles they publish. Values are in the metric's own
    unit (seconds for ``*_seconds``). Each label set (``engine``, ``model_name``, ``stage``, ...) is its own row;
    metrics perfmodel does not interpret are kept (``window`` empty), never dropped. Nothing is written.

    Parameters
    ----------
    path_or_text
        A file of Prometheus text exposition (as ``curl http://host:port/metrics`` saves it), or the text
        itself (a str with a newline).

    Returns
    -------
    pandas.DataFrame
        Columns ``metric`` (as the engine names it; a counter with its ``_total``), ``type``, ``stage`` (the
        ``stage`` label, or empty), ``labels`` (the other labels, as in the file), ``value``, ``count``,
        ``sum``, ``mean``, ``p50``, ``p50_low``, ``p50_high`` (and the same for p90 and p99), ``window`` (what
        the metric measures, from :data:`WINDOWS`; empty for metrics perfmodel does not interpret).
        ``attrs["source"]`` names the file.

    Examples
    --------
    >>> from perfmodel.engines import read_engine_metrics
    >>> scrape = '''# TYPE vllm:nixl_xfer_time_seconds histogram
    ... vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.01"} 2.0
    ... vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.025"} 4.0
    ... vllm:nixl_xfer_time_seconds_bucket{engine="0",le="+Inf"} 4.0
    ... vllm:nixl_xfer_time_seconds_count{engine="0"} 4.0
    ... vllm:nixl_xfer_time_seconds_sum{engine="0"} 0.05
    ... '''
    >>> row = read_engine_metrics(scrape).iloc[0]
    >>> row["metric"], row["labels"], float(row["count"]), float(row["mean"])
    ('vllm:nixl_xfer_time_seconds', 'engine="0"', 4.0, 0.0125)
    >>> float(row["p50_low"]), float(row["p50_high"]), float(row["p50"])  # rank 2 of 4: the top of (0, 0.01]
    (0.0, 0.01, 0.01)
    """
    where, text = _text_of(path_or_text)
    rows, seen = [], set()
    for family in _families(where, text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            if key in seen:
                raise InputError(
                    f"{where}: {sample.name}{{{_labels_text(sample.labels)}}}",
                    "appears twice (two scrapes in one file?), so one would overwrite or add to the other",
                    "scrape a server a file, and give the files one by one",
                )
            seen.add(key)
        rows.extend(_family_rows(where, family))
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
_SCRAPE_KINDS = {column: "text" if column in _TEXT else "number" for column in _COLUMNS}
_BENCHMARK_KINDS = {"completed": "bool", "num_input_tokens": "number", "ttft_ms": "number"}


#: A histogram's (or gauge histogram's, or summary's) count and sum samples.
_TOTALS = {"_count": "count", "_sum": "sum", "_gcount": "count", "_gsum": "sum"}


def _family_rows(where: str, family: Any) -> list[dict[str, Any]]:
    """One row per label set of a parsed metric family."""
    groups: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for sample in family.samples:
        if sample.name.endswith("_created"):  # (a counter's or histogram's creation time, not a measurement)
            continue
        bucketed = {"histogram": "le", "gaugehistogram": "le", "summary": "quantile"}.get(family.type)
        labels = {key: value for key, value in sample.labels.items() if key != bucketed}
        group = groups.setdefault(
            tuple(labels.items()), {"labels": labels, "buckets": [], "quantiles": {}, "name": sample.name}
        )
        suffix = sample.name[len(family.name) :]
        series = f"{where}: {family.name}{{{_labels_text(labels)}}}"
        if family.type in ("histogram", "gaugehistogram") and suffix == "_bucket":
            group["buckets"].append((checks.bound(series, "le", sample.labels["le"]), float(sample.value)))
        elif suffix in _TOTALS and bucketed:
            group[_TOTALS[suffix]] = float(sample.value)
        elif family.type == "summary" and "quantile" in sample.labels:
            group["quantiles"][checks.bound(series, "quantile", sample.labels["quantile"])] = float(sample.value)
        else:
            group["value"], group["name"] = float(sample.value), sample.name
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
    if buckets:
        checks.check_buckets(series, buckets, row["count"], group.get("sum", 0.0))
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
    row["window"] = WINDOWS.get(f"{name}{{{stage}}}" if stage else name, "")
    return row


# --- benchmark results -----------------------------------------------------------------------------------------

#: Keys by which a result object is told to be vLLM's or SGLang's (vllm/benchmarks/serve.py writes ``burstiness``,
#: ``endpoint_type`` and ``mean_e2el_ms``; sglang/bench_serving.py ``dataset_name``, ``mean_e2e_latency_ms`` and
#: ``total_output_tokens_retokenized``).
_VLLM_KEYS = ("burstiness", "endpoint_type", "mean_e2el_ms", "tokenizer_id")
_SGLANG_KEYS = ("total_output_tokens_retokenized", "mean_e2e_latency_ms", "dataset_name")


def _results(where: str, text: str) -> list[dict[str, Any]]:
    """The result objects of a benchmark file: one JSON object (``vllm bench serve --save-result``), a JSON array
    of them, or one a line (SGLang's JSONL; vLLM's ``--append-result``)."""
    try:
        whole = json.loads(text)
        return whole if isinstance(whole, list) else [whole]  # (a JSON array of results: one run each)
    except json.JSONDecodeError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        try:
            scrape = text.lstrip()[:1] not in "{[" and bool(_families(where, text))
        except InputError:
            scrape = False
        if scrape:
            raise InputError(
                where, "this is a Prometheus scrape: use read_engine_metrics", "pass the file to read_engine_metrics"
            ) from None
        raise _refuse(where, f"not JSON or JSON lines ({error.msg})") from None


def _is_benchmark(result: Any) -> bool:
    return isinstance(result, dict) and "completed" in result and "duration" in result


def _tool(result: dict[str, Any]) -> str:
    if any(key in result for key in _SGLANG_KEYS):
        return "sglang bench_serving"
    if any(key in result for key in _VLLM_KEYS):
        return "vllm bench serve"
    return "benchmark"


def read_benchmark(path: str | os.PathLike[str], *, run: int | None = None) -> pd.DataFrame:
    """A benchmark's requests as a trace: ``vllm bench serve`` result JSON or SGLang ``bench_serving`` JSONL.

    Both tools keep per-request lists only when asked (``vllm bench serve --save-result --save-detailed``;
    ``python -m sglang.bench_serving --output-details``): ``input_lens``, ``output_lens``, ``ttfts`` (seconds),
    ``errors``, and vLLM's ``start_times`` (when each request was sent, ``time.perf_counter`` seconds) and
    ``latencies``. A file of several runs (SGLang appends one line a run; so does vLLM's ``--append-result``; or
    a JSON array of results) needs ``run``. Where the file has its own figures, what is read must agree with them:
    no completed request's TTFT or latency longer than the run's ``duration``, as many requests without an error
    as ``completed``, their mean TTFT ``mean_ttft_ms`` (to 1%); else the file is refused. Nothing is written.

    Parameters
    ----------
    path
        The result file.
    run
        Which run of a file of several (0 the first, -1 the last); default: the file's only run.

    Returns
    -------
    pandas.DataFrame
        One row per request, in the benchmark's order: ``num_input_tokens``, ``num_output_tokens`` (where the
        file has ``output_lens``), ``ttft_ms`` (NaN for a failed request, and for one that received no token:
        the tools leave its ttft at 0), ``completed`` (no error), and where
        the file has them ``latency_ms`` and ``arrival_ms`` (send times from the first request's, ms). ``attrs``: ``source``,
        ``tool``, ``request_rate`` (requests/s, ``inf`` for all at once), ``max_concurrency`` (None:
        unbounded), ``duration_s``, ``arrivals`` (where ``arrival_ms`` comes from, or why there is none) and
        ``reported`` (the file's own summary figures: ``mean_ttft_ms``, ``median_ttft_ms``, ...).

    Examples
    --------
    >>> from perfmodel.engines import read_benchmark
    >>> trace = read_benchmark(_fixture("vllm_bench_serve.json"))
    >>> list(trace.columns)
    ['num_input_tokens', 'num_output_tokens', 'ttft_ms', 'completed', 'latency_ms', 'arrival_ms']
    >>> trace.attrs["tool"], trace.attrs["request_rate"], trace.attrs["max_concurrency"]
    ('vllm bench serve', 4.0, 8)
    """
    where, text = _text_of(Path(path) if isinstance(path, str) and path else path, "path")
    if run is not None and (isinstance(run, bool) or not isinstance(run, int)):
        raise InputError(f"{where}: run", f"got {run!r}, not a whole number", "pass run=0, 1, ... (-1 the last)")
    results = _results(where, text)
    if not results or not all(_is_benchmark(result) for result in results):
        raise _refuse(
            where, "JSON, but no benchmark result (no 'completed' and 'duration' keys)" if results else "empty"
        )
    if run is None and len(results) > 1:
        raise InputError(
            f"{where}: run",
            f"the file holds {len(results)} benchmark runs",
            f"choose one: run=0 to {len(results) - 1} (the command's --run), -1 the last",
        )
    try:
        result = results[run or 0]
    except IndexError:
        raise InputError(
            f"{where}: run", f"no run {run}: the file holds {len(results)}", f"pass run=0 to {len(results) - 1}"
        ) from None
    return _trace_of(where, result)


def _trace_of(where: str, result: dict[str, Any]) -> pd.DataFrame:
    tool = _tool(result)
    if "input_lens" not in result or "ttfts" not in result:
        flag = "--output-details" if tool.startswith("sglang") else "--save-detailed (with --save-result)"
        raise InputError(
            where, f"a {tool} result without per-request lists (input_lens, ttfts)", f"rerun the benchmark with {flag}"
        )
    checks.figure(where, "request_rate", result.get("request_rate"), missing=True)
    checks.figure(where, "max_concurrency", result.get("max_concurrency"), whole=True, missing=True)
    if not isinstance(result["input_lens"], list):
        got = f"a {type(result['input_lens']).__name__}"
        raise InputError(f"{where}: input_lens", f"{got}, not a list", "give the file as the benchmark wrote it")
    n = len(result["input_lens"])
    columns = {
        "input_lens": result["input_lens"],
        "output_lens": result.get("output_lens"),
        "ttfts": result["ttfts"],
        "errors": result.get("errors"),
        "latencies": result.get("latencies"),
        "start_times": result.get("start_times"),
    }
    for name, values in columns.items():
        if values is not None and (not isinstance(values, list) or len(values) != n):
            got = count(len(values), "value") if isinstance(values, list) else f"a {type(values).__name__}"
            raise InputError(
                f"{where}: {name}",
                f"{got} for {count(n, 'request')} (input_lens)",
                "give the file as the benchmark wrote it",
            )
    errors = columns["errors"]
    completed = np.array([not e for e in errors] if errors is not None else [True] * n, dtype=bool)
    trace = pd.DataFrame({"num_input_tokens": checks.numbers(where, "input_lens", columns["input_lens"], int)})
    if columns["output_lens"] is not None:
        trace["num_output_tokens"] = checks.numbers(where, "output_lens", columns["output_lens"], int)
    ttft = checks.numbers(where, "ttfts", columns["ttfts"], float, failed=~completed)
    completed = checks.without_silent_failures(where, result, completed, ttft)
    seconds = {"ttfts": ttft}
    trace["ttft_ms"] = np.where(completed & (ttft > 0), ttft * 1e3, np.nan)  # (0: no first token came)
    trace["completed"] = completed
    if columns["latencies"] is not None:
        seconds["latencies"] = latency = checks.numbers(
            where, "latencies", columns["latencies"], float, failed=~completed
        )
        trace["latency_ms"] = np.where(completed, latency * 1e3, np.nan)
        if (short := completed & (latency < ttft)).any():  # (a request cannot end before its first token)
            i = int(np.argmax(short))
            raise InputError(f"{where}: latencies", f"request {i} took {latency[i]:g} s end to end but {ttft[i]:g} s to "
                             "its first token (ttfts)", "give the file as the benchmark wrote it")  # fmt: skip
    checks.check_totals(where, tool, result, completed, seconds)
    if columns["start_times"] is not None and n:
        start = checks.numbers(where, "start_times", columns["start_times"], float)
        trace["arrival_ms"] = (start - start.min()) * 1e3
        arrivals = "start_times: when the client sent each request (after any --max-concurrency wait)"
    else:
        arrivals = "none in the file: the benchmark ran at " + _load(result)
    trace.attrs.update(
        source=where,
        tool=tool,
        request_rate=_rate(result.get("request_rate")),
        max_concurrency=result.get("max_concurrency"),
        duration_s=checks.figure(where, "duration", result["duration"]),
        arrivals=arrivals,
        reported={k: v for k, v in result.items() if k.endswith("_ms") and isinstance(v, (int, float))},
    )
    return trace


def _rate(value: Any) -> float:
    if value is None:
        return math.nan
    return math.inf if str(value).lower() in ("inf", "infinity") else float(value)


def _load(result: dict[str, Any]) -> str:
    """The load a benchmark ran at, in words."""
    rate, concurrency = _rate(result.get("request_rate")), result.get("max_concurrency")
    said = [
        "all requests at once"
        if rate == math.inf
        else "an unknown rate"
        if math.isnan(rate)
        else f"{rate:g} requests/s"
    ]
    if concurrency:
        said.append(f"at most {concurrency} in flight")
    return ", ".join(said)


def detect(path: str | os.PathLike[str]) -> str:
    """Which engine file ``path`` is: ``"benchmark"`` (JSON or JSON lines: ``{`` or ``[`` first, after any
    byte-order mark) or ``"metrics"`` (anything else, which :func:`read_engine_metrics` then reads or refuses);
    reads the file's first bytes only.

    Parameters
    ----------
    path
        The file.

    Returns
    -------
    str
        ``"benchmark"`` or ``"metrics"``.

    Examples
    --------
    >>> detect(_fixture("sglang_bench_serving.jsonl")), detect(_fixture("vllm_nixl.prom"))
    ('benchmark', 'metrics')
    """
    with open(path, "rb") as file:
        head = file.read(4096).removeprefix(codecs.BOM_UTF8).lstrip()
    return "benchmark" if head[:1] in (b"{", b"[") else "metrics"


# --- the model beside what was measured ------------------------------------------------------------------------

#: The comparison's columns: each percentile exact (a benchmark's requests, the model) or bucket-bounded.
COMPARE_COLUMNS = [
    "what",
    "labels",
    "window",
    "quantiles",
    "count",
    "mean_ms",
    *[f"p{q}{end}_ms" for q in QUANTILES for end in ("", "_low", "_high")],
]


def compare_measured(
    benchmark: pd.DataFrame | None = None,
    metrics: Sequence[pd.DataFrame] = (),
    *,
    model: Any = None,
    link: Any = None,
    **options: Any,
) -> pd.DataFrame:
    """The model's handoff delay over a benchmark's prompts, beside the measured transfer stage and TTFT.

    Each row says which window of a request's life it covers: the model's handoff runs from the prefill's end
    to the KV cache's arrival, alone on the link (no queueing behind other transfers); SGLang's
    ``prefill_transfer_kv_cache`` stage adds the wait in the prefill's transfer queue, vLLM's
    ``nixl_xfer_time_seconds`` is one NIXL transfer's wire time (a request may take several), and a TTFT holds
    everything before the first token. A histogram's percentiles are bucket-bounded (the ``_low`` and ``_high``
    columns); a benchmark's and the model's are exact over the requests.

    Parameters
    ----------
    benchmark
        From :func:`read_benchmark`: its completed requests' ``num_input_tokens`` are the model's prompts, its
        ``ttft_ms`` the client's TTFT.
    metrics
        Scrapes from :func:`read_engine_metrics` (SGLang's prefill or decode side, vLLM's).
    model, link
        The model (a preset name, config dict or ``config.json``) and the link (a preset name, decimal GB/s, a
        :class:`perfmodel.Link`, a cluster), as in :func:`perfmodel.handoff_delay_ms`; both or neither.
    **options
        More keywords of :func:`perfmodel.handoff_delay_ms` (``kv_cache_dtype``, ``tp``, ``decode_tp``, ...).

    Returns
    -------
    pandas.DataFrame
        One row per figure (:data:`COMPARE_COLUMNS`): ``what`` (the metric as the engine names it, with its
        stage), ``labels`` (the metric's other labels), ``window``, ``quantiles`` (``"exact"`` or ``"bucket-bounded"``), ``count``, and in
        ms ``mean_ms``, ``p50_ms`` with ``p50_low_ms`` and ``p50_high_ms`` (the same for p90 and p99).

    Examples
    --------
    >>> from perfmodel.engines import compare_measured, read_benchmark, read_engine_metrics
    >>> table = compare_measured(read_benchmark(_fixture("vllm_bench_serve.json")),
    ...                          [read_engine_metrics(_fixture("sglang_prefill.prom"))],
    ...                          model="llama-3.1-8b", link="ib-ndr")
    >>> table["what"].tolist()[:2]
    ['model: handoff delay', 'sglang:per_stage_req_latency_seconds{stage="prefill_transfer_kv_cache"}']
    >>> round(float(table["p50_ms"].iloc[0]), 3)   # the median prompt (4,096 tokens) over 400G IB: 0.5 GB in 10.7 ms
    10.737
    """
    if (model is None) != (link is None):
        raise InputError(
            "compare_measured",
            "the model needs both a model and a link",
            "pass model= and link= (the command's --model and --link), or neither",
        )
    if model is None and options:
        raise InputError(
            "compare_measured",
            f"{', '.join(sorted(options))} configure{'s' if len(options) == 1 else ''} the model, but no model is given",
            "pass model= and link= too, or drop them",
        )
    metrics = checks.scrapes("compare_measured: metrics", metrics, _SCRAPE_KINDS)
    problem = "" if benchmark is None else checks.unlike(benchmark, "read_benchmark", _BENCHMARK_KINDS)
    if problem:
        raise InputError("compare_measured: benchmark", f"got {problem}", "pass read_benchmark(path), or None")
    rows = []
    if model is not None:
        if benchmark is None or not benchmark["completed"].any():
            raise InputError(
                "compare_measured: benchmark",
                "the model needs the prompts of a benchmark's completed requests",
                "give a benchmark result (read_benchmark) with the scrapes",
            )
        from .handoff import handoff_delay_ms

        tokens = benchmark.loc[benchmark["completed"], "num_input_tokens"]
        if (tokens <= 0).any():  # (a prompt of no token moves no KV cache: no handoff to model)
            where = f"compare_measured: {benchmark.attrs.get('source', 'benchmark')}"
            raise InputError(where, f"request {tokens.index[tokens <= 0][0]} has a prompt of 0 tokens (input_lens), "
                             "which moves no KV cache (no handoff)", "rerun the benchmark with prompts of 1 token or more")  # fmt: skip
        delay = np.asarray(handoff_delay_ms(tokens.to_numpy(), link, model, **options), dtype=np.float64)
        if not (np.isfinite(delay) & (delay > 0)).all():
            raise InputError(
                "compare_measured: link",
                f"{link!r} gives a handoff delay of {delay[~(np.isfinite(delay) & (delay > 0))][0]:g} ms",
                "pass a link of a bandwidth > 0 (a bandwidth of 0 or NaN models no handoff)",
            )
        window = "prefill end to KV cache at the decode worker, alone on the link (no queueing behind other transfers)"
        rows.append(_exact("model: handoff delay", window, delay))
    for frame in metrics:
        for _, row in frame.iterrows():
            key = f"{row['metric']}{{{row['stage']}}}" if row["stage"] else row["metric"]
            if row["type"] == "histogram" and key in TRANSFER_METRICS + TTFT_METRICS:
                rows.append(_bucketed(row))
    if benchmark is not None and benchmark["completed"].any():
        window = "client: request sent to first token received (queue, prefill, handoff, first decode step, network)"
        ttft = benchmark.loc[benchmark["completed"], "ttft_ms"].to_numpy()
        rows.append(_exact(f"measured TTFT ({benchmark.attrs.get('tool', 'benchmark')})", window, ttft))
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def _exact(what: str, window: str, values_ms: np.ndarray) -> dict[str, Any]:
    values = values_ms[np.isfinite(values_ms)]
    row: dict[str, Any] = {
        "what": what,
        "labels": "",
        "window": window,
        "quantiles": "exact",
        "count": float(values.size),
        "mean_ms": float(values.mean()) if values.size else math.nan,
    }
    for q in QUANTILES:
        value = float(np.percentile(values, q)) if values.size else math.nan
        row.update({f"p{q}_ms": value, f"p{q}_low_ms": value, f"p{q}_high_ms": value})
    return row


def _bucketed(row: pd.Series) -> dict[str, Any]:
    """A histogram row of :func:`read_engine_metrics`, in ms."""
    out = {
        "what": f'{row["metric"]}{{stage="{row["stage"]}"}}' if row["stage"] else row["metric"],
        "labels": row["labels"],
        "window": row["window"],
        "quantiles": "bucket-bounded",
        "count": row["count"],
        "mean_ms": row["mean"] * 1e3,
    }
    for column in COMPARE_COLUMNS[6:]:
        out[column] = row[column.removesuffix("_ms")] * 1e3
    return out


class MeasuredFits(NamedTuple):
    """What the files fit (:func:`measured_fits`): a link, or None, and in words what was and was not fitted.

    Parameters
    ----------
    link
        A :class:`perfmodel.Link` fitted to vLLM's NIXL means (named ``"nixl-means"``), or None.
    notes
        One sentence each: the link's fit or why there is none, the prefill's.

    Examples
    --------
    >>> MeasuredFits(None, ["link: not fitted"]).link is None
    True
    """

    link: Any
    notes: list[str]


def measured_fits(metrics: Sequence[pd.DataFrame] = (), benchmark: pd.DataFrame | None = None) -> MeasuredFits:
    """The fits the files allow, and what they cannot fit, in words.

    :func:`perfmodel.fit_link` needs each transfer's bytes and time; no engine file here pairs them per
    request. vLLM's NIXL histograms give one point per scrape and label set, the mean bytes against the mean
    time (and the mean descriptors, the messages): for an affine link (latency plus bytes over bandwidth, plus a
    cost per message) the mean transfer follows the same line, so two points or more at different mean sizes
    (scrapes of runs with different prompt lengths) fit a link to the means. That is a fit of run means, not of
    single transfers: its errors say how well the means line up, nothing of the spread within a run. SGLang's
    stage times carry no bytes; a benchmark has no transfer times.

    Parameters
    ----------
    metrics
        Scrapes from :func:`read_engine_metrics`.
    benchmark
        From :func:`read_benchmark` (only to say what it cannot fit).

    Returns
    -------
    MeasuredFits
        ``link``: a :class:`perfmodel.Link` fitted to the NIXL means, or None; ``notes``: one sentence each.

    Examples
    --------
    >>> from perfmodel.engines import measured_fits, read_engine_metrics
    >>> fits = measured_fits([read_engine_metrics(_fixture("vllm_nixl.prom"))])
    >>> fits.link is None, fits.notes[0][:72]                  # two engines' means, one size
    (True, 'link: not fitted: the NIXL histograms give 2 means of one size (67.1 MB)')
    """
    from .network.fits import SIZE_SPREAD, distinct_points

    points, unsaid = [], []  # (unsaid: each series whose mean is no number, a histogram without its _sum)
    for frame in checks.scrapes("measured_fits: metrics", metrics, _SCRAPE_KINDS):
        hist = frame[frame["type"] == "histogram"].set_index(["metric", "labels"])
        for labels in hist.index.get_level_values("labels").unique():
            pair = [("vllm:nixl_bytes_transferred", labels), ("vllm:nixl_xfer_time_seconds", labels)]
            if not all(key in hist.index for key in pair):
                continue
            (nbytes, time), mean_d = (hist.loc[key] for key in pair), ("vllm:nixl_num_descriptors", labels)
            descriptors = hist.loc[mean_d, "mean"] if mean_d in hist.index else math.nan
            nan = [f"{k}{{{labels}}}" for (k, _), r in zip(pair, (nbytes, time)) if not np.isfinite(r["mean"])]
            if nan and nbytes["count"] > 0 and time["count"] > 0:
                unsaid.append(f"{frame.attrs.get('source', 'a scrape')}: {', '.join(nan)}")
            elif nbytes["count"] > 0 and time["count"] > 0:
                points.append((nbytes["mean"], time["mean"] * 1e3, descriptors))
    notes, link = [], None
    x, t, d = (np.array(column, dtype=float) for column in zip(*points)) if points else (np.array([]),) * 3
    messages = d if d.size and np.isfinite(d).all() else None
    if distinct_points(x, messages) >= 2:
        from .network.links import fit_link

        link = fit_link(x, t, n_messages=messages, name="nixl-means")
        assert link.fit is not None  # (a fitted link carries its report)
        notes.append(f"link: fitted to {len(points)} NIXL means (mean bytes, mean transfer time) at "
                     f"{distinct_points(x, messages)} sizes: {link.fit.describe()}; a fit of run means, not of single "
                     "transfers")  # fmt: skip
    elif points:
        span = " to ".join(dict.fromkeys(f"{v / 1e6:.1f}" for v in (x.min(), x.max())))  # (67.1, or 67.1 to 68.0)
        notes.append(f"link: not fitted: the NIXL histograms give {count(x.size, 'mean')} of one size ({span} MB) "
                     f"and fit_link needs two or more sizes {SIZE_SPREAD:.0%} apart; scrape runs of different prompt "
                     "lengths (a fit of their means, not of single transfers)")  # fmt: skip
    else:
        notes.append("link: not fitted: " + ("no NIXL mean is left (a histogram without its _sum gives none)" if unsaid
                     else "no file pairs bytes with transfer times (vLLM's NIXL histograms do, as means; SGLang's "
                     "stages and a benchmark's requests carry no bytes)"))  # fmt: skip
    if unsaid:
        notes.append(f"link: left out {count(len(unsaid), 'NIXL mean')} the files do not give (a histogram without "
                     f"its _sum): {'; '.join(unsaid)}")  # fmt: skip
    notes.append(
        "prefill: not fitted: prefill times are histograms (SGLang's prefill_forward, vLLM's "
        "request_prefill_time_seconds), not paired with each request's prompt length"
        + ("; the benchmark's TTFT holds more than the prefill" if benchmark is not None else "")
    )
    return MeasuredFits(link, notes)


def _fixture(name: str) -> str:
    """A test file shipped with the tests (for the examples)."""
    return str(Path(__file__).resolve().parents[1] / "tests" / "data" / "engines" / name)
