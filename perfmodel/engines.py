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
import inspect
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
from .inputs.scrapes import (
    FORMATS,
    QUANTILES,
    SCRAPE_KINDS,
    WINDOWS,
    bucket_quantile,
    fixture,  # noqa: F401 (the examples' files)
    label_set,
    metric_families,
    metrics_frame,
    refuse_format,
    text_of,
)
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

#: The measured windows that hold the KV transfer, and the TTFTs, that :func:`compare_measured` shows.
TRANSFER_METRICS = (
    "sglang:per_stage_req_latency_seconds{prefill_transfer_kv_cache}",
    "sglang:per_stage_req_latency_seconds{decode_transferred}",
    "vllm:nixl_xfer_time_seconds",
)
TTFT_METRICS = ("sglang:time_to_first_token_seconds", "vllm:time_to_first_token_seconds")
_BENCHMARK_KINDS = {"completed": "bool", "num_input_tokens": "number", "ttft_ms": "number"}


def read_engine_metrics(path_or_text: str | os.PathLike[str]) -> pd.DataFrame:
    """An engine's Prometheus scrape as one row per metric and label set (SGLang, vLLM, or any other).

    Parsed by ``prometheus_client``'s parser (``text_string_to_metric_families``). Counters and gauges give
    their ``value``; histograms give ``count``, ``sum``, ``mean`` and, for each of p50, p90 and p99, the
    bucket the quantile lies in (``p50_low`` to ``p50_high``: all a histogram knows) and ``p50``, the value
    interpolated linearly inside that bucket as Prometheus's ``histogram_quantile`` does
    (:func:`bucket_quantile`); summaries give the quantiles they publish. Values are in the metric's own
    unit (seconds for ``*_seconds``). Each label set (``engine``, ``model_name``, ``stage``, ...) is its own row,
    whatever order each line lists the labels in (the order means nothing in the format); metrics perfmodel does
    not interpret are kept (``window`` empty), never dropped, a histogram of negative bounds or sum too (a
    temperature's). A histogram whose buckets do not add up, one perfmodel interprets with a negative bound or
    sum, and one perfmodel interprets whose samples come without their ``# TYPE ... histogram`` line (stripped,
    as ``grep -v '^#'`` does) would give wrong or no quantiles, and are refused. Nothing is written.

    Parameters
    ----------
    path_or_text
        A file of Prometheus text exposition (as ``curl http://host:port/metrics`` saves it), or the text
        itself (a str with a newline).

    Returns
    -------
    pandas.DataFrame
        Columns ``metric`` (as the engine names it: a counter with its ``_total`` where the file writes one),
        ``type``, ``stage`` (the ``stage`` label, or empty), ``labels`` (the other labels, as the series' first
        line lists them), ``value``, ``count``,
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
    where, text = text_of(path_or_text)
    if text.strip() and text.lstrip()[:1] in "{[":
        try:
            results = _results(where, text, repeats=True)  # (only to tell a benchmark: read_benchmark checks it)
        except InputError:
            results = []
        if results and all(_is_benchmark(result) for result in results):
            raise InputError(where, "this is a benchmark result: use read_benchmark", "pass the file to read_benchmark")
        raise refuse_format(where, "JSON, but no benchmark result (no 'completed' and 'duration' keys)")
    return metrics_frame(where, text)


# --- benchmark results -----------------------------------------------------------------------------------------

#: Keys by which a result object is told to be vLLM's or SGLang's (vllm/benchmarks/serve.py writes ``burstiness``,
#: ``endpoint_type`` and ``mean_e2el_ms``; sglang/bench_serving.py ``dataset_name``, ``mean_e2e_latency_ms`` and
#: ``total_output_tokens_retokenized``).
_VLLM_KEYS = ("burstiness", "endpoint_type", "mean_e2el_ms", "tokenizer_id")
_SGLANG_KEYS = ("total_output_tokens_retokenized", "mean_e2e_latency_ms", "dataset_name")


def _results(where: str, text: str, *, repeats: bool = False) -> list[dict[str, Any]]:
    """The result objects of a benchmark file: one JSON object (``vllm bench serve --save-result``), a JSON array
    of them, or one a line (SGLang's JSONL; vLLM's ``--append-result``). A key written twice in one object is
    refused, naming the file (and the line of JSON lines), as the package's other JSON readers refuse it: a JSON
    parser keeps one of the values, silently (``repeats``: kept, to tell a file's kind only)."""
    from .ground.tables import RepeatedKey, unique_keys

    hook, fix = None if repeats else unique_keys, "keep one value of each key (give the file as the benchmark wrote it)"
    try:
        whole = json.loads(text, object_pairs_hook=hook)
        return whole if isinstance(whole, list) else [whole]  # (a JSON array of results: one run each)
    except json.JSONDecodeError:
        pass
    except RepeatedKey as error:  # (one document, or the first line of JSON lines: the whole text tells which)
        try:
            json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            raise InputError(where, str(error), fix) from None
    results = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            results.append(json.loads(line, object_pairs_hook=hook))
        except RepeatedKey as error:
            raise InputError(f"{where}, line {number}", str(error), fix) from None
        except json.JSONDecodeError as error:
            try:
                scrape = text.lstrip()[:1] not in "{[" and bool(metric_families(where, text))
            except InputError:
                scrape = False
            if scrape:
                raise InputError(
                    where,
                    "this is a Prometheus scrape: use read_engine_metrics",
                    "pass the file to read_engine_metrics",
                ) from None
            raise refuse_format(where, f"not JSON or JSON lines ({error.msg})") from None
    return results


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
    no completed request's TTFT or latency longer than the run's ``duration``, nor the send times spread over more
    than it, as many requests without an error as ``completed``, their mean TTFT ``mean_ttft_ms`` (each to 1%);
    else the file is refused, as it is for a key written twice in one result. Nothing is written.

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
    >>> trace = read_benchmark(fixture("vllm_bench_serve.json"))
    >>> list(trace.columns)
    ['num_input_tokens', 'num_output_tokens', 'ttft_ms', 'completed', 'latency_ms', 'arrival_ms']
    >>> trace.attrs["tool"], trace.attrs["request_rate"], trace.attrs["max_concurrency"]
    ('vllm bench serve', 4.0, 8)
    """
    where, text = text_of(Path(path) if isinstance(path, str) and path else path, "path")
    if run is not None and (isinstance(run, bool) or not isinstance(run, int)):
        raise InputError(f"{where}: run", f"got {run!r}, not a whole number", "pass run=0, 1, ... (-1 the last)")
    results = _results(where, text)
    if not results or not all(_is_benchmark(result) for result in results):
        raise refuse_format(
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
        _check_span(where, start, checks.figure(where, "duration", result["duration"]))
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


def _check_span(where: str, start: np.ndarray, duration: float) -> None:
    """Refuse send times (``start_times``) that span more than the run's ``duration``: vLLM's client reads both on
    one clock (``time.perf_counter``), the duration from before the first request is sent to after the last one
    ends, so every send lies inside it; as for the TTFTs, :data:`perfmodel.inputs.engine_checks.TOLERANCE` (1%)
    allows for a writer that rounds the duration, and still tells ms from seconds or another run's lists."""
    span = float(start.max() - start.min())
    if span <= duration * (1 + checks.TOLERANCE):
        return
    cause = (
        "the start_times look like ms, and vllm bench serve writes seconds"
        if span / 1e3 <= duration * (1 + checks.TOLERANCE)
        else "the lists and the duration are of different runs"
    )
    raise InputError(
        f"{where}: start_times",
        f"the requests were sent over {span:g} s, longer than the whole run (duration {duration:g} s): {cause}",
        "give the file as the benchmark wrote it (start_times in seconds)",
    )


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
    >>> detect(fixture("sglang_bench_serving.jsonl")), detect(fixture("vllm_nixl.prom"))
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


def _refuse_other_options(options: dict[str, Any], model: Any) -> None:
    """Refuse, as Python refuses keywords and naming :func:`compare_measured`, options that are not the model's
    (``model``: :func:`perfmodel.handoff_delay_ms`, whose own first three arguments are not options)."""
    own = {"num_input_tokens", "kv_transfer_bandwidth", "kv_bytes_per_token"}
    unknown = sorted(set(options) - (set(inspect.signature(model).parameters) - own))
    if unknown:
        raise TypeError(
            f"compare_measured() got unexpected keyword arguments {unknown}: its options are handoff_delay_ms's "
            "(each handoff alone on the link: no contention, no queue)"
        )


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
    >>> table = compare_measured(read_benchmark(fixture("vllm_bench_serve.json")),
    ...                          [read_engine_metrics(fixture("sglang_prefill.prom"))],
    ...                          model="llama-3.1-8b", link="ib-ndr")
    >>> table["what"].tolist()[:2]
    ['model: handoff delay', 'sglang:per_stage_req_latency_seconds{stage="prefill_transfer_kv_cache"}']
    >>> round(float(table["p50_ms"].iloc[0]), 3)   # the median prompt (4,096 tokens) over 400G IB: 0.5 GB in 10.7 ms
    10.737
    """
    from .handoff import handoff_delay_ms

    _refuse_other_options(options, handoff_delay_ms)
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
    metrics = checks.scrapes("compare_measured: metrics", metrics, SCRAPE_KINDS)
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
    >>> fits = measured_fits([read_engine_metrics(fixture("vllm_nixl.prom"))])
    >>> fits.link is None, fits.notes[0][:72]                  # two engines' means, one size
    (True, 'link: not fitted: the NIXL histograms give 2 means of one size (67.1 MB)')
    """
    from .network.fits import SIZE_SPREAD, distinct_points

    points, unsaid = [], []  # (unsaid: each series whose mean is no number, a histogram without its _sum)
    for frame in checks.scrapes("measured_fits: metrics", metrics, SCRAPE_KINDS):
        hist: dict[tuple[str, tuple[tuple[str, str], ...]], pd.Series] = {}  # (by label set: order means nothing)
        for _, row in frame[frame["type"] == "histogram"].iterrows():
            hist.setdefault((row["metric"], label_set(row["labels"])), row)
        for labels in dict.fromkeys(labels for _, labels in hist):
            pair = [("vllm:nixl_bytes_transferred", labels), ("vllm:nixl_xfer_time_seconds", labels)]
            if not all(key in hist for key in pair):
                continue
            (nbytes, time), mean_d = (hist[key] for key in pair), ("vllm:nixl_num_descriptors", labels)
            descriptors = hist[mean_d]["mean"] if mean_d in hist else math.nan
            nan = [f"{r['metric']}{{{r['labels']}}}" for r in (nbytes, time) if not np.isfinite(r["mean"])]
            if nan and nbytes["count"] > 0 and time["count"] > 0:
                unsaid.append(f"{frame.attrs.get('source', 'a scrape')}: {', '.join(nan)}")
            elif nbytes["count"] > 0 and time["count"] > 0:
                points.append((nbytes["mean"], time["mean"] * 1e3, descriptors))
    notes, link = [], None
    x, t, d = (np.array(column, dtype=float) for column in zip(*points)) if points else (np.array([]),) * 3
    messages = d if d.size and np.isfinite(d).all() else None
    if distinct_points(x, messages) >= 2:
        from .network.links import fitted_link

        link = fitted_link(x, t, n_messages=messages, name="nixl-means")
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
