"""Engines' own files (perfmodel.engines, ``perfmodel measured``): every figure against a hand computation or a slow
reference from the observations the test files were written from (tests/data/engines/generate.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfmodel import handoff_delay_ms, replay_handoffs
from perfmodel.cli import main
from perfmodel.engines import (
    FORMATS,
    WINDOWS,
    bucket_quantile,
    compare_measured,
    measured_fits,
    read_benchmark,
    read_engine_metrics,
)
from perfmodel.errors import InputError

DATA = Path(__file__).resolve().parent / "data" / "engines"
FILES = sorted(p for p in DATA.iterdir() if p.suffix in (".prom", ".json", ".jsonl"))


def _generate():
    spec = importlib.util.spec_from_file_location("engines_generate", DATA / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


G = _generate()


def _reference_quantile(q, bounds, observations):
    """histogram_quantile from the raw observations: count them into the buckets, find the bucket by walking
    up, interpolate linearly (Prometheus's rule, written out plainly)."""
    bounds = [*bounds, math.inf]
    cumulative = [sum(1 for x in observations if x <= b) for b in bounds]
    rank = q * cumulative[-1]
    for i, count in enumerate(cumulative):  # noqa: B007 (the bucket's index is read after the loop)
        if count >= rank:
            break
    if i == len(bounds) - 1:
        return bounds[-2], bounds[-2], math.inf
    low = 0.0 if i == 0 else bounds[i - 1]
    below = 0 if i == 0 else cumulative[i - 1]
    return low + (bounds[i] - low) * (rank - below) / (cumulative[i] - below), low, bounds[i]


def _row(frame, metric, stage="", labels=None):
    rows = frame[(frame["metric"] == metric) & (frame["stage"] == stage)]
    if labels is not None:
        rows = rows[rows["labels"].str.contains(labels, regex=False)]
    assert len(rows) == 1, (metric, stage, labels, len(rows))
    return rows.iloc[0]


# --- quantiles -----------------------------------------------------------------------------------------------


def test_bucket_quantile_by_hand():
    # ClickHouse's documented example of histogram_quantile's rule: le 0, 0.5, 1, +Inf with 6, 11, 14, 19:
    # rank 9.5 lies in (0, 0.5], 3.5 of its 5 observations in: 0.5 * 3.5 / 5 = 0.35
    assert bucket_quantile(0.5, [0, 0.5, 1, math.inf], [6, 11, 14, 19]) == pytest.approx((0.35, 0.0, 0.5))
    # the lowest bucket starts at 0: rank 1 of 4 in (0, 0.1] holding 2: 0.05
    assert bucket_quantile(0.25, [0.1, 1, math.inf], [2, 4, 4]) == pytest.approx((0.05, 0.0, 0.1))
    # in the +Inf bucket: the highest finite bound, and the bucket unbounded above
    assert bucket_quantile(0.99, [0.1, 1, math.inf], [0, 5, 10]) == (1.0, 1.0, math.inf)
    # an empty histogram has no quantile
    assert all(math.isnan(v) for v in bucket_quantile(0.5, [0.1, math.inf], [0, 0]))


@pytest.mark.parametrize(
    "file, stages", [("sglang_prefill.prom", G.PREFILL_STAGES), ("sglang_decode.prom", G.DECODE_STAGES)]
)
def test_sglang_stages_equal_the_hand_computation(file, stages):
    frame = read_engine_metrics(DATA / file)
    for stage, observations in stages.items():
        row = _row(frame, "sglang:per_stage_req_latency_seconds", stage)
        assert row["type"] == "histogram"
        assert row["count"] == len(observations)
        assert row["sum"] == pytest.approx(sum(observations))
        assert row["mean"] == pytest.approx(sum(observations) / len(observations))
        for q in (50, 90, 99):
            expected = _reference_quantile(q / 100, G.SGLANG_STAGE_BUCKETS, observations)
            assert (row[f"p{q}"], row[f"p{q}_low"], row[f"p{q}_high"]) == pytest.approx(expected)
            # the bucket holds the sample quantile (the ceil(q n)-th smallest observation)
            kth = sorted(observations)[math.ceil(q / 100 * len(observations)) - 1]
            assert row[f"p{q}_low"] <= kth <= row[f"p{q}_high"]


def test_the_transfer_stage_by_hand():
    """prefill_transfer_kv_cache observed 11, 13, 17, 29 ms; buckets 1.62**i ms: 11.16 < 13 < 17 < 18.08 < 29 <
    29.28, so 11 ms lies in (6.887, 11.16] and p50 (rank 2) in (11.16, 18.08], holding 13 and 17: 11.16 + 6.92/2."""
    row = _row(
        read_engine_metrics(DATA / "sglang_prefill.prom"),
        "sglang:per_stage_req_latency_seconds",
        "prefill_transfer_kv_cache",
    )
    low, high = 0.001 * 1.62**5, 0.001 * 1.62**6
    assert (row["p50_low"], row["p50_high"]) == pytest.approx((low, high))
    assert row["p50"] == pytest.approx(low + (high - low) * 1 / 2)
    assert row["mean"] == pytest.approx(0.0175)
    assert "transfer queue" in row["window"]


def test_vllm_nixl_by_hand_and_label_sets_apart():
    frame = read_engine_metrics(DATA / "vllm_nixl.prom")
    zero = _row(frame, "vllm:nixl_xfer_time_seconds", labels='engine="0"')
    one = _row(frame, "vllm:nixl_xfer_time_seconds", labels='engine="1"')
    # engine 0: 4, 8, 12, 30, 60, 90 ms; p50 rank 3 is the top of (10, 25] (holding 12 alone): 25 ms;
    # p90 rank 5.4 is 0.4 into (75, 100] (holding 90 alone): 85 ms
    assert (zero["count"], zero["sum"]) == (6, pytest.approx(0.204))
    assert (zero["p50"], zero["p50_low"], zero["p50_high"]) == pytest.approx((0.025, 0.01, 0.025))
    assert (zero["p90"], zero["p90_low"], zero["p90_high"]) == pytest.approx((0.085, 0.075, 0.1))
    assert (one["count"], one["mean"]) == (3, pytest.approx(0.022))
    assert zero["labels"] == 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
    failed = frame[frame["metric"] == "vllm:nixl_num_failed_transfers_total"]
    assert sorted(failed["value"]) == [0.0, 1.0] and failed["type"].eq("counter").all()
    nbytes = _row(frame, "vllm:nixl_bytes_transferred", labels='engine="0"')
    assert nbytes["mean"] == 64 * 2**20
    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        row = _row(frame, name, labels='engine="0"')
        assert row["count"] == len(G.VLLM_TTFT["0"]) and row["window"]


def test_unknown_metrics_are_kept_and_listed(capsys):
    text = (
        '# TYPE my_queue_depth gauge\nmy_queue_depth{pool="a"} 3\nmy_queue_depth{pool="b"} 5\n'
        'untyped_thing 7\n# TYPE rpc_seconds summary\nrpc_seconds{quantile="0.5"} 0.2\n'
        "rpc_seconds_sum 4.0\nrpc_seconds_count 10\n"
    )
    frame = read_engine_metrics(text)
    assert sorted(frame["metric"]) == ["my_queue_depth", "my_queue_depth", "rpc_seconds", "untyped_thing"]
    assert (frame["window"] == "").all()
    rpc = _row(frame, "rpc_seconds")
    assert (rpc["count"], rpc["mean"], rpc["p50"]) == (10, 0.4, 0.2)
    assert sorted(_row(frame, "my_queue_depth", labels=p)["value"] for p in ('"a"', '"b"')) == [3, 5]
    frame = read_engine_metrics(DATA / "sglang_prefill.prom")
    assert "sglang:gen_throughput" in set(frame["metric"])
    assert main(["measured", str(DATA / "sglang_prefill.prom")]) == 0
    out = capsys.readouterr().out
    assert "not interpreted by perfmodel (kept above, as read): sglang:gen_throughput" in out


# --- benchmarks ----------------------------------------------------------------------------------------------


def test_vllm_bench_serve_as_a_trace():
    trace = read_benchmark(DATA / "vllm_bench_serve.json")
    requests = G.REQUESTS
    assert trace["num_input_tokens"].tolist() == [r[0] for r in requests]
    assert trace["num_output_tokens"].tolist() == [r[1] for r in requests]
    assert trace["completed"].tolist() == [not r[5] for r in requests]
    expected = [r[2] * 1000 if not r[5] else math.nan for r in requests]
    np.testing.assert_allclose(trace["ttft_ms"], expected, rtol=1e-12)
    np.testing.assert_allclose(trace["arrival_ms"], [(r[4] - 100.0) * 1000 for r in requests], rtol=1e-12)
    assert trace.attrs["request_rate"] == 4.0 and trace.attrs["max_concurrency"] == 8
    assert trace.attrs["reported"]["mean_ttft_ms"] == pytest.approx(np.nanmean(expected))
    # the trace replays
    done = trace[trace["completed"]]
    replay = replay_handoffs(done, model="llama-3.1-8b", link="ib-ndr")
    np.testing.assert_allclose(
        replay["handoff_delay_ms"], handoff_delay_ms(done["num_input_tokens"].to_numpy(), "ib-ndr", "llama-3.1-8b")
    )


def test_sglang_bench_serving_runs():
    path = DATA / "sglang_bench_serving.jsonl"
    with pytest.raises(InputError, match="holds 2 benchmark runs.*run=0 to 1"):
        read_benchmark(path)
    first, last = read_benchmark(path, run=0), read_benchmark(path, run=-1)
    assert first.attrs["tool"] == "sglang bench_serving" and "arrival_ms" not in first
    assert last.attrs["arrivals"] == "none in the file: the benchmark ran at 8 requests/s"
    np.testing.assert_allclose(last["ttft_ms"], first["ttft_ms"] * 1.5, rtol=1e-9)
    with pytest.raises(InputError, match="no run 2"):
        read_benchmark(path, run=2)


def test_a_benchmark_without_per_request_lists_says_the_flag(tmp_path):
    for result, flag in (
        ({"completed": 3, "duration": 1.0, "burstiness": 1.0}, "--save-detailed"),
        ({"completed": 3, "duration": 1.0, "dataset_name": "random"}, "--output-details"),
    ):
        path = tmp_path / "result.json"
        path.write_text(json.dumps(result))
        with pytest.raises(InputError, match=flag):
            read_benchmark(path)


def test_a_benchmark_with_a_bad_list_is_refused(tmp_path):
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    result["ttfts"] = result["ttfts"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(result))
    with pytest.raises(InputError, match="ttfts: 7 values for 8 requests"):
        read_benchmark(tmp_path / "short.json")
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    result["input_lens"][2] = -5
    (tmp_path / "negative.json").write_text(json.dumps(result))
    with pytest.raises(InputError, match="input_lens: request 2 has -5"):
        read_benchmark(tmp_path / "negative.json")


# --- the model beside the measurements -----------------------------------------------------------------------


def test_compare_measured_against_a_reference():
    trace = read_benchmark(DATA / "vllm_bench_serve.json")
    scrapes = [read_engine_metrics(DATA / f) for f in ("sglang_prefill.prom", "vllm_nixl.prom")]
    table = compare_measured(trace, scrapes, model="llama-3.1-8b", link="ib-ndr").set_index(["what", "labels"])
    tokens = trace.loc[trace["completed"], "num_input_tokens"].to_numpy()
    delays = [float(handoff_delay_ms(int(n), "ib-ndr", "llama-3.1-8b")) for n in tokens]  # one at a time
    model = table.loc[("model: handoff delay", "")]
    assert model["count"] == len(tokens) and model["quantiles"] == "exact"
    assert model["mean_ms"] == pytest.approx(np.mean(delays))
    for q in (50, 90, 99):
        assert model[f"p{q}_ms"] == pytest.approx(np.percentile(delays, q))
    stage = table.loc['sglang:per_stage_req_latency_seconds{stage="prefill_transfer_kv_cache"}'].iloc[0]
    assert stage["quantiles"] == "bucket-bounded"
    assert (stage["p50_ms"], stage["p50_low_ms"], stage["p50_high_ms"]) == pytest.approx(
        tuple(
            1000 * v
            for v in _reference_quantile(0.5, G.SGLANG_STAGE_BUCKETS, G.PREFILL_STAGES["prefill_transfer_kv_cache"])
        )
    )
    assert len(table.loc["vllm:nixl_xfer_time_seconds"]) == 2  # engines 0 and 1 apart
    ttft = table.loc[("measured TTFT (vllm bench serve)", "")]
    assert ttft["p99_ms"] == pytest.approx(np.percentile([r[2] * 1000 for r in G.REQUESTS if not r[5]], 99))
    with pytest.raises(InputError, match="model= and link="):
        compare_measured(trace, model="llama-3.1-8b")
    with pytest.raises(InputError, match="prompts of a benchmark"):
        compare_measured(None, scrapes, model="llama-3.1-8b", link="ib-ndr")
    with pytest.raises(InputError, match="kv_cache_dtype, tp configure the model, but no model is given"):
        compare_measured(trace, scrapes, tp=8, kv_cache_dtype="fp8")  # never silently ignored


def _nixl_scrape(transfers):
    """A vLLM scrape of NIXL transfers: (bytes, seconds) each, as _sum and _count."""
    lines = []
    for name, column in (("vllm:nixl_xfer_time_seconds", 1), ("vllm:nixl_bytes_transferred", 0)):
        lines += [
            f"# TYPE {name} histogram",
            f'{name}_bucket{{le="+Inf"}} {len(transfers)}',
            f"{name}_count {len(transfers)}",
            f"{name}_sum {sum(t[column] for t in transfers)!r}",
        ]
    return "\n".join(lines) + "\n"


def test_measured_fits_a_link_to_nixl_means_and_says_what_it_cannot():
    def time_s(nbytes):
        return (0.1 + nbytes / 40e9 * 1000) / 1000  # 0.1 ms latency, 40 GB/s

    small = _nixl_scrape([(1e7, time_s(1e7)), (3e7, time_s(3e7))])  # mean 2e7 bytes
    large = _nixl_scrape([(4e8, time_s(4e8))])
    fits = measured_fits([read_engine_metrics(small), read_engine_metrics(large)])
    assert fits.link.bandwidth_gb_s == pytest.approx(40.0, rel=1e-9)
    assert fits.link.latency_ms == pytest.approx(0.1, rel=1e-9)
    assert "run means, not of single transfers" in fits.notes[0]
    assert "prefill: not fitted" in fits.notes[1]
    one = measured_fits([read_engine_metrics(DATA / "vllm_nixl.prom")])
    assert one.link is None and "needs two or more" in one.notes[0]
    none = measured_fits([read_engine_metrics(DATA / "sglang_prefill.prom")])
    assert none.link is None and "no file pairs bytes with transfer times" in none.notes[0]


# --- files: refused in one line, never changed ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name, content",
    [
        ("trace.csv", b"arrival_ms,num_input_tokens,num_output_tokens\n0,1024,128\n250,2048,64\n"),
        ("random.json", b'{"model": "llama", "layers": [1, 2]}'),
        ("list.json", b"[1, 2, 3]\n"),
        ("empty.prom", b""),
        ("comments.prom", b"# HELP nothing here\n"),
        ("binary.bin", bytes(range(256)) * 4),
        ("latin1.txt", "caf\xe9 1\n".encode("latin-1")),
    ],
)
def test_another_format_is_refused_in_one_line(name, content, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(content)
    from perfmodel.engines import detect

    reader = read_benchmark if detect(path) == "benchmark" else read_engine_metrics
    with pytest.raises(InputError) as refused:
        reader(path)
    assert FORMATS in str(refused.value)
    assert main(["measured", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"perfmodel measured: error: {path}: ")
    assert "Prometheus text exposition" in err and "bench serve" in err and "bench_serving" in err


def test_bad_paths_one_line(tmp_path, capsys):
    assert main(["measured", str(tmp_path / "missing.prom")]) == 2
    assert (
        capsys.readouterr().err
        == f"perfmodel measured: error: {tmp_path / 'missing.prom'}: No such file or directory\n"
    )
    assert main(["measured", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["measured", str(DATA / "vllm_nixl.prom"), "--model", "llama-3.1-8b"]) == 2
    assert "--model and --link" in capsys.readouterr().err


def test_the_readers_and_the_command_change_no_file(capsys):
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in FILES}
    for path in FILES:
        if path.suffix == ".prom":
            read_engine_metrics(path)
        else:
            read_benchmark(path, run=-1)
    assert (
        main(
            [
                "measured",
                *map(str, [p for p in FILES if p.suffix != ".jsonl"]),
                "--model",
                "llama-3.1-8b",
                "--link",
                "ib-ndr",
            ]
        )
        == 0
    )
    assert main(["measured", str(DATA / "sglang_bench_serving.jsonl"), "--run", "1"]) == 0
    capsys.readouterr()
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in FILES} == before


def test_the_command_prints_the_tables(capsys):
    files = [str(DATA / f) for f in ("sglang_prefill.prom", "sglang_decode.prom", "vllm_bench_serve.json")]
    assert main(["measured", *files, "--model", "llama-3.1-8b", "--link", "ib-ndr"]) == 0
    out = capsys.readouterr().out
    for text in (
        "prefill_transfer_kv_cache",
        "decode_transferred",
        "bucket-bounded",
        "model: handoff delay",
        "measured TTFT (vllm bench serve)",
        "windows (what each row covers):",
        "link: not fitted",
        "arrivals: start_times",
    ):
        assert text in out, text
    assert main(["measured", "--help"]) == 0
    assert "Prometheus text exposition" in capsys.readouterr().out


@pytest.mark.parametrize(
    "buckets, count, problem",
    [
        ([("0.01", 3), ("0.02", 2), ("+Inf", 4)], 4, "bucket counts decrease"),
        ([("0.01", 1), ("0.02", 3)], 3, "no +Inf bucket"),
        ([("0.01", 1), ("+Inf", 3)], 5, "_count 5 is not the +Inf bucket's 3"),
    ],
)
def test_a_broken_histogram_is_refused_not_summarized(buckets, count, problem):
    """A histogram whose buckets do not add up would give quantiles that mean nothing: refused, naming it."""
    text = (
        "# TYPE vllm:nixl_xfer_time_seconds histogram\n"
        + "".join(f'vllm:nixl_xfer_time_seconds_bucket{{engine="0",le="{le}"}} {n}\n' for le, n in buckets)
        + (
            f'vllm:nixl_xfer_time_seconds_count{{engine="0"}} {count}\nvllm:nixl_xfer_time_seconds_sum{{engine="0"}} 0.1\n'
        )
    )
    with pytest.raises(InputError, match=r"vllm:nixl_xfer_time_seconds\{engine=\"0\"\}: " + re.escape(problem)):
        read_engine_metrics(text)


def test_a_benchmark_without_output_lengths_has_no_output_column(tmp_path):
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    del result["output_lens"]
    (tmp_path / "r.json").write_text(json.dumps(result))
    assert "num_output_tokens" not in read_benchmark(tmp_path / "r.json")  # never zeros made up


def test_a_gauge_with_le_and_quantile_labels_keeps_every_series():
    """SGLang's gauge histograms are gauges labelled le and gt: each series its own row, none merged away."""
    text = (
        "# TYPE sglang:routing_key_running_req_count gauge\n"
        'sglang:routing_key_running_req_count{gt="0",le="1"} 4\n'
        'sglang:routing_key_running_req_count{gt="1",le="2"} 2\n'
        "# TYPE my_gauge gauge\n"
        'my_gauge{quantile="0.5"} 1\nmy_gauge{quantile="0.9"} 7\n'
    )
    frame = read_engine_metrics(text)
    assert frame["value"].tolist() == [4, 2, 1, 7]
    assert frame["labels"].tolist() == ['gt="0",le="1"', 'gt="1",le="2"', 'quantile="0.5"', 'quantile="0.9"']


@pytest.mark.parametrize(
    "text",
    [
        (
            '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 3\n'
            'vllm:num_requests_running{engine="0"} 5\n'
        ),
        (DATA / "vllm_nixl.prom").read_text() + (DATA / "vllm_nixl.prom").read_text(),  # two scrapes in one file
    ],
)
def test_a_series_given_twice_is_refused(text):
    """The same series twice (two servers' scrapes pasted into one file) would have one overwrite the other, or
    sum two servers' buckets into one: refused, naming the series."""
    with pytest.raises(InputError, match=r"appears twice.*scrape a server a file"):
        read_engine_metrics(text)


def test_a_request_without_a_first_token_has_no_ttft(tmp_path):
    """Both tools leave a request's ttft at 0.0 until a token arrives, and may write None for a failed one: no
    TTFT of 0 ms enters the figures, and a failed request's missing values are no error."""
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    result["ttfts"][6] = None  # the failed request
    result["latencies"][6] = None
    result["ttfts"][0] = 0.0  # a request that streamed no token
    del result["errors"]
    result["errors"] = ["", "", "", "", "", "", "Server disconnected", ""]
    # the tools' mean holds the completed requests' ttfts as they are, the 0.0 too
    result["mean_ttft_ms"] = np.mean([t for t, e in zip(result["ttfts"], result["errors"]) if not e]) * 1000
    (tmp_path / "r.json").write_text(json.dumps(result))
    trace = read_benchmark(tmp_path / "r.json")
    assert math.isnan(trace["ttft_ms"][0]) and math.isnan(trace["ttft_ms"][6]) and trace["completed"][0]
    table = compare_measured(trace)
    assert table["count"].iloc[0] == 6  # seven completed, one without a first token


@pytest.mark.parametrize(
    "key, values, shown",
    [
        ("input_lens", [1e30, 4096, 8192], "request 0 has 1e+30"),
        ("input_lens", [True, False, 8192], "request 0 has True"),
        ("input_lens", [1.5, 4096, 8192], "request 0 has 1.5"),
        ("input_lens", ["4096", 4096, 8192], "request 0 has '4096'"),
        ("output_lens", [10, -1, 3], "request 1 has -1"),
        ("ttfts", [0.1, float("nan"), 0.2], "request 1 has nan"),
        ("ttfts", [0.1, float("inf"), 0.2], "request 1 has inf"),
        ("ttfts", [0.1, True, 0.2], "request 1 has True"),
    ],
)
def test_a_hostile_per_request_value_is_refused(key, values, shown, tmp_path):
    """A count that is huge, a boolean, fractional, a string, negative, NaN or inf is refused, naming the file,
    the key, the request and the value, never read as a wrong number."""
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    for name in ("input_lens", "output_lens", "ttfts", "errors", "latencies", "start_times"):
        result[name] = result[name][:3]
    result[key] = values
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match=re.escape(f"{path}: {key}: {shown}")):
        read_benchmark(path)


@pytest.mark.parametrize(
    "le, count, total, problem",
    [
        ("0.1", "NaN", "0.1", "_bucket"),
        ("0.1", "4", "NaN", "_sum nan"),
        ("0.1", "4", "+Inf", "_sum inf"),
        ("0.1", "4", "-1", "_sum -1"),
        ("-0.1", "4", "0.1", "le -0.1"),
    ],
)
def test_a_histogram_of_nan_or_negative_values_is_refused(le, count, total, problem):
    text = (
        "# TYPE vllm:nixl_xfer_time_seconds histogram\n"
        f'vllm:nixl_xfer_time_seconds_bucket{{engine="0",le="{le}"}} {count}\n'
        f'vllm:nixl_xfer_time_seconds_bucket{{engine="0",le="+Inf"}} {count}\n'
        f'vllm:nixl_xfer_time_seconds_count{{engine="0"}} {count}\n'
        f'vllm:nixl_xfer_time_seconds_sum{{engine="0"}} {total}\n'
    )
    with pytest.raises(InputError, match=r"vllm:nixl_xfer_time_seconds\{engine=\"0\"\}: .*" + re.escape(problem)):
        read_engine_metrics(text)


def test_a_list_of_another_length_names_the_files_key_in_the_singular(tmp_path):
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    for name in ("input_lens", "output_lens", "errors", "latencies", "start_times"):
        result[name] = result[name][:1]
    result["ttfts"] = result["ttfts"][:2]
    (tmp_path / "r.json").write_text(json.dumps(result))
    with pytest.raises(InputError, match=re.escape("ttfts: 2 values for 1 request (input_lens)")):
        read_benchmark(tmp_path / "r.json")


def test_a_benchmark_of_one_request_says_one_request(tmp_path, capsys):
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    for name in ("input_lens", "output_lens", "ttfts", "errors", "latencies", "start_times"):
        result[name] = result[name][:1]
    result.update(completed=1, mean_ttft_ms=result["ttfts"][0] * 1000)  # the run's own figures, as the tool writes
    (tmp_path / "r.json").write_text(json.dumps(result))
    assert main(["measured", str(tmp_path / "r.json")]) == 0
    assert "result, 1 request (1 completed)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "call, argument",
    [
        (compare_measured, "metrics"),
        (lambda t, m: compare_measured(t, ["x.prom"]), "metrics"),
        (lambda t, m: compare_measured(t.drop(columns="completed"), [m]), "benchmark"),
        (lambda t, m: measured_fits(m), "metrics"),
        (lambda t, m: read_benchmark(DATA / "vllm_bench_serve.json", run=1.5), "run"),
        (lambda t, m: read_benchmark(DATA / "vllm_bench_serve.json", run="1"), "run"),
        (lambda t, m: read_benchmark(DATA / "vllm_bench_serve.json", run=True), "run"),
        (lambda t, m: read_engine_metrics(None), "path_or_text"),
        (lambda t, m: read_engine_metrics(123), "path_or_text"),
        (lambda t, m: read_engine_metrics(b"x 1\n"), "path_or_text"),
        (lambda t, m: read_engine_metrics(""), "path_or_text"),
    ],
)
def test_a_wrong_argument_is_one_input_error(call, argument):
    trace = read_benchmark(DATA / "vllm_bench_serve.json")
    metrics = read_engine_metrics(DATA / "vllm_nixl.prom")
    with pytest.raises(InputError, match=argument):
        call(trace, metrics)


def test_each_reader_recognises_the_others_format():
    with pytest.raises(InputError, match="this is a benchmark result: use read_benchmark"):
        read_engine_metrics(DATA / "vllm_bench_serve.json")
    with pytest.raises(InputError, match="this is a benchmark result: use read_benchmark"):
        read_engine_metrics(DATA / "sglang_bench_serving.jsonl")
    with pytest.raises(InputError, match="this is a Prometheus scrape: use read_engine_metrics"):
        read_benchmark(DATA / "vllm_nixl.prom")


@pytest.mark.parametrize("link", [0, math.nan, "0", "nan"])
def test_a_link_of_no_bandwidth_is_refused(link):
    trace = read_benchmark(DATA / "vllm_bench_serve.json")
    with pytest.raises(InputError, match="link") as refused:
        compare_measured(trace, model="llama-3.1-8b", link=link)
    assert "\n" not in str(refused.value)


def test_the_failure_counters_are_interpreted_as_the_docs_say(capsys):
    frame = read_engine_metrics(DATA / "vllm_nixl.prom")
    for name in ("vllm:nixl_num_failed_transfers_total", "vllm:nixl_num_failed_notifications_total"):
        assert name in (DATA.parent.parent.parent / "docs" / "measured.rst").read_text()
        assert (frame.loc[frame["metric"] == name, "window"] != "").all()
        assert WINDOWS[name]
        assert main(["measured", str(DATA / "vllm_nixl.prom")]) == 0
        interpreted_not = [line for line in capsys.readouterr().out.splitlines() if "not interpreted" in line]
        assert not any(name in line for line in interpreted_not)


def test_a_non_ascii_metric_name_says_the_parsers_message():
    with pytest.raises(InputError) as refused:
        read_engine_metrics("# TYPE vllm:zeit_\u00e4 gauge\nvllm:zeit_\u00e4 1\n")
    assert "(ValueError)" not in str(refused.value)


@pytest.mark.parametrize(
    "key, value",
    [
        ("duration", -1),
        ("duration", True),
        ("duration", "12"),
        ("max_concurrency", 1.5),
        ("max_concurrency", True),
        ("request_rate", -4),
        ("request_rate", "fast"),
        ("input_lens", 4096),
    ],
)
def test_a_hostile_run_figure_is_refused(key, value, tmp_path):
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    result[key] = value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match=re.escape(f"{path}: {key}: ")):
        read_benchmark(path)


@pytest.mark.parametrize("reader", [read_benchmark, read_engine_metrics])
def test_broken_json_is_refused_in_one_line(reader, tmp_path):
    (tmp_path / "broken.json").write_text("{oops\n")
    with pytest.raises(InputError, match="not JSON or JSON lines|JSON, but no benchmark result"):
        reader(tmp_path / "broken.json")


# --- a hostile user's pass: totals, frames, byte-order marks, labels, summaries, flags -------------------------


def _vllm_result(**changes):
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    result.update(changes)
    return result


def test_ttfts_in_ms_are_refused_not_read_a_thousand_times_too_long(tmp_path):
    """The hostile user's file: ttfts written in ms; each is longer than the whole run, and their mean is a
    thousand times the file's own mean_ttft_ms: refused, naming the file, the key, both numbers and the cause."""
    path = tmp_path / "r.json"
    result = {
        "backend": "vllm",
        "endpoint_type": "vllm",
        "request_rate": 4.0,
        "duration": 1.5,
        "completed": 3,
        "input_lens": [1024, 4096, 8192],
        "output_lens": [1, 1, 1],
        "ttfts": [120, 310, 560],
        "errors": ["", "", ""],
        "mean_ttft_ms": 330.0,
    }
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match=rf"{re.escape(str(path))}: ttfts: request 0 has 120 s, longer than") as e:
        read_benchmark(path)
    assert "duration 1.5 s" in str(e.value) and "look like ms" in str(e.value)
    assert "vllm bench serve writes seconds" in str(e.value)
    # a run long enough for them: the mean says it, against the file's own
    path.write_text(json.dumps({**result, "duration": 1000.0}))
    with pytest.raises(InputError, match=rf"{re.escape(str(path))}: mean_ttft_ms: .*330000.*330\b") as e:
        read_benchmark(path)
    assert "look like ms" in str(e.value)


@pytest.mark.parametrize("run", [0, 1])
def test_sglang_ttfts_in_ms_are_refused_too(run, tmp_path):
    lines = (DATA / "sglang_bench_serving.jsonl").read_text().splitlines()
    result = json.loads(lines[run])
    result["ttfts"] = [t * 1000 for t in result["ttfts"]]
    result["duration"] = 10_000.0
    lines[run] = json.dumps(result)
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"mean_ttft_ms: .*look like ms, and sglang bench_serving writes seconds"):
        read_benchmark(path, run=run)
    read_benchmark(path, run=1 - run)  # the other run is as SGLang wrote it


def test_the_files_completed_count_is_checked(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_vllm_result(completed=8)))
    with pytest.raises(
        InputError,
        match=rf"{re.escape(str(path))}: completed: the lists hold 7 completed requests \(no error\), but the file says 8",
    ):
        read_benchmark(path)
    result = _vllm_result()
    del result["errors"]  # every request then counts as completed: 8, where the file says 7
    path.write_text(json.dumps(result))
    with pytest.raises(
        InputError,
        match=r"completed: the lists hold 8 completed requests \(no error\), but the file says 7: .*no errors list",
    ):
        read_benchmark(path)
    path.write_text(json.dumps(_vllm_result(completed="7")))
    with pytest.raises(InputError, match="completed: '7' is not a whole number"):
        read_benchmark(path)


def test_a_mean_ttft_rounded_in_the_file_is_read_and_one_off_by_more_is_refused(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_vllm_result(mean_ttft_ms=390.4)))  # 0.1 %: rounding
    assert read_benchmark(path)["completed"].sum() == 7
    path.write_text(json.dumps(_vllm_result(mean_ttft_ms=420.0)))  # 7 %: another run's figure
    with pytest.raises(InputError, match=r"mean_ttft_ms: the mean TTFT of the 7 completed requests is 390 ms, .*420"):
        read_benchmark(path)
    result = _vllm_result()
    del result["mean_ttft_ms"]  # no figure of its own: nothing to check against, read as before
    path.write_text(json.dumps(result))
    assert read_benchmark(path)["ttft_ms"].max() == pytest.approx(1050.0)


def test_latencies_longer_than_the_run_are_refused(tmp_path):
    result = _vllm_result()
    result["latencies"] = [v * 1000 for v in result["latencies"]]
    (tmp_path / "r.json").write_text(json.dumps(result))
    with pytest.raises(InputError, match=r"latencies: request 0 has 1400 s, longer than the whole run"):
        read_benchmark(tmp_path / "r.json")


@pytest.mark.parametrize(
    "call, reader",
    [
        (lambda t, m: measured_fits([pd.DataFrame({"metric": []})]), "read_engine_metrics"),
        (lambda t, m: compare_measured(None, [pd.DataFrame({"metric": []})]), "read_engine_metrics"),
        (lambda t, m: measured_fits([m.assign(mean="x")]), "read_engine_metrics"),
        (lambda t, m: compare_measured(t, [m.assign(p50="x")]), "read_engine_metrics"),
        (lambda t, m: compare_measured(t.assign(completed="yes")), "read_benchmark"),
        (
            lambda t, m: compare_measured(t.assign(completed="yes"), model="llama-3.1-8b", link="ib-ndr"),
            "read_benchmark",
        ),
        (lambda t, m: compare_measured(t.assign(num_input_tokens="4k")), "read_benchmark"),
        (lambda t, m: compare_measured(t.assign(ttft_ms="fast")), "read_benchmark"),
    ],
)
def test_a_frame_not_from_the_readers_is_one_input_error(call, reader):
    trace = read_benchmark(DATA / "vllm_bench_serve.json")
    metrics = read_engine_metrics(DATA / "vllm_nixl.prom")
    with pytest.raises(InputError, match=rf"not {reader}\(\)'s output") as refused:
        call(trace, metrics)
    assert "\n" not in str(refused.value)


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("name", ["vllm_bench_serve.json", "sglang_bench_serving.jsonl", "vllm_nixl.prom"])
def test_a_byte_order_mark_is_read_as_nothing(name, tmp_path, capsys):
    from perfmodel.engines import detect

    path = tmp_path / name
    path.write_bytes(BOM + (DATA / name).read_bytes())
    assert detect(path) == detect(DATA / name)
    if name.endswith(".prom"):
        assert read_engine_metrics(path).equals(read_engine_metrics(DATA / name))
        assert read_engine_metrics((BOM + (DATA / name).read_bytes()).decode()).equals(read_engine_metrics(DATA / name))
    else:
        assert read_benchmark(path, run=-1).equals(read_benchmark(DATA / name, run=-1))
    assert main(["measured", str(path), "--run", "0"] if name.endswith(".jsonl") else ["measured", str(path)]) == 0
    assert "\ufeff" not in capsys.readouterr().out


def test_a_json_array_of_results_is_runs_as_json_lines_are(tmp_path, capsys):
    lines = (DATA / "sglang_bench_serving.jsonl").read_text().splitlines()
    path = tmp_path / "runs.json"
    path.write_text("[" + ",\n".join(lines) + "]\n")
    with pytest.raises(InputError, match="holds 2 benchmark runs.*run=0 to 1"):
        read_benchmark(path)
    for run in (0, 1, -1):
        assert read_benchmark(path, run=run).equals(read_benchmark(DATA / "sglang_bench_serving.jsonl", run=run))
    (tmp_path / "one.json").write_text("[" + lines[0] + "]")
    assert read_benchmark(tmp_path / "one.json").equals(read_benchmark(DATA / "sglang_bench_serving.jsonl", run=0))
    assert main(["measured", str(path), "--run", "1"]) == 0
    assert "sglang bench_serving result" in capsys.readouterr().out


def test_labels_are_shown_as_prometheus_writes_them_never_split_inside_a_value(tmp_path, capsys):
    path = tmp_path / "l.prom"
    path.write_text('# TYPE g gauge\ng{model_name="org/m,rev=a"} 3\ng{model_name="org/m,rev=b"} 4\n')
    assert main(["measured", str(path)]) == 0
    out = capsys.readouterr().out
    assert "every one labelled" not in out and 'rev=a"' not in out.replace('model_name="org/m,rev=a"', "")
    assert 'model_name="org/m,rev=a"' in out and 'model_name="org/m,rev=b"' in out
    path.write_text('# TYPE g gauge\ng{m="a,b",x="1"} 3\ng{m="a,b",x="2"} 4\n')
    assert main(["measured", str(path)]) == 0
    out = capsys.readouterr().out
    assert '(every one labelled m="a,b")' in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("g ")] == ['x="1"', 'x="2"']
    frame = read_engine_metrics('# TYPE g gauge\ng{a="x\\"y",b="c\\\\d",n="1\\n2"} 3\n')
    assert frame["labels"].tolist() == ['a="x\\"y",b="c\\\\d",n="1\\n2"']


@pytest.mark.parametrize(
    "samples, problem",
    [
        ('s{quantile="0.5"} -3\ns_count 4\ns_sum 12\n', "quantile 0.5: -3"),
        ('s{quantile="0.5"} +Inf\ns_count 4\ns_sum 12\n', "quantile 0.5: inf"),
        ('s{quantile="0.5"} 3\ns_count -1\ns_sum 12\n', "_count -1"),
        ('s{quantile="0.5"} 3\ns_count 1.5\ns_sum 12\n', "_count 1.5"),
        ('s{quantile="0.5"} 3\ns_count 4\ns_sum -12\n', "_sum -12"),
        ('s{quantile="0.5"} 3\ns_count 4\ns_sum NaN\n', "_sum nan"),
        ('s{quantile="1.5"} 3\ns_count 4\ns_sum 12\n', "quantile 1.5"),
        ('s{quantile="-0.5"} 3\ns_count 4\ns_sum 12\n', "quantile -0.5"),
        ('s{quantile="fast"} 3\ns_count 4\ns_sum 12\n', "quantile 'fast'"),
    ],
)
def test_a_summary_of_nan_or_negative_values_is_refused(samples, problem):
    with pytest.raises(InputError, match=r"^<text>: s\{\}: .*" + re.escape(problem)) as refused:
        read_engine_metrics("# TYPE s summary\n" + samples)
    assert "summary" in str(refused.value)


def test_a_summary_quantile_of_an_empty_window_is_nan():
    """Go's and Envoy's clients write NaN for a quantile whose window holds no observation: read as NaN (no
    figure), not refused."""
    row = read_engine_metrics('# TYPE s summary\ns{quantile="0.5"} NaN\ns_count 0\ns_sum 0\n').iloc[0]
    assert math.isnan(row["p50"]) and row["count"] == 0


def test_a_histogram_bound_that_is_no_number_is_one_input_error():
    with pytest.raises(InputError, match=r"<text>: h\{\}: le 'fast' is not a number"):
        read_engine_metrics('# TYPE h histogram\nh_bucket{le="fast"} 1\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n')


def test_run_without_a_benchmark_file_is_refused(capsys):
    assert main(["measured", str(DATA / "vllm_nixl.prom"), "--run", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--run selects a run of a benchmark file" in err


def test_a_request_failed_without_a_reason_phrase_is_failed_not_a_false_alarm(tmp_path):
    """The clients save an HTTP error's reason phrase, which may be empty: such a failed request was counted as
    completed, then (once the file's own count was checked) the whole file was refused."""
    result = json.loads((DATA / "vllm_bench_serve.json").read_text())
    failed = result["errors"].index("Server disconnected")
    assert result["ttfts"][failed] == 0.0
    result["errors"][failed] = ""
    path = tmp_path / "silent.json"
    path.write_text(json.dumps(result))
    trace = read_benchmark(path)
    assert int(trace["completed"].sum()) == result["completed"] and not trace["completed"].iloc[failed]
    result["completed"] -= 1  # (one fewer than even that explains: still refused)
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match="completed: the lists hold"):
        read_benchmark(path)
