"""``perfmodel ttft``: the library's answers printed, written, and bad flags refused in one line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import perfmodel as pm
from perfmodel.cli import main

FLAGS = [
    "--model",
    "llama-3.1-8b",
    "--link",
    "ib-ndr",
    "--prefill-workers",
    "2",
    "--prefill-tokens-per-s",
    "40000",
    "--decode-step-ms",
    "20",
    "--contention",
    "fifo",
    "--links",
    "2",
]
API = dict(
    model="llama-3.1-8b",
    link="ib-ndr",
    prefill_workers=2,
    prefill_tokens_per_s=40_000.0,
    decode_step_ms=20.0,
    contention="fifo",
    links=2,
)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    trace = pm.synthetic_trace(600, 20, seed=4).drop(columns=["hash_ids"], errors="ignore")
    trace["num_output_tokens"] = 100
    trace.to_csv(path, index=False)
    return path


def test_the_summary_printed_is_the_library_s(trace_file, capsys):
    assert main(["ttft", str(trace_file), *FLAGS, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = pm.summarize_ttft(pm.replay_ttft(pm.read_trace(trace_file), **API))
    assert printed["p99_ms"] == pytest.approx(expected["p99_ms"], rel=1e-12)
    assert printed["dominant_p99_stage"] == expected["dominant_p99_stage"]


def test_out_writes_the_requests_and_the_summary(trace_file, tmp_path, capsys):
    out = tmp_path / "ttft"
    assert main(["ttft", str(trace_file), *FLAGS, "--decode-kv-tokens", "200000", "--out", str(out)]) == 0
    frame = pd.read_csv(out / "ttft.csv")
    assert len(frame) == 600 and "ttft_ms" in frame
    assert json.loads((out / "summary.json").read_text())["requests"] == 600
    assert "p99_ms" in capsys.readouterr().out


def test_rates_print_one_row_each_and_the_budget_is_the_library_s_answer(trace_file, capsys):
    assert main(["ttft", str(trace_file), *FLAGS, "--rate", "5", "10", "20"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[0] == "request_rate_per_s" and [line.split()[0] for line in lines[1:4]] == ["5", "10", "20"]
    assert "per-request TTFT" in lines[-1]  # (what the percentiles are of, under the table)
    assert main(["ttft", str(trace_file), *FLAGS, "--budget-ms", "500"]) == 0
    answer = pm.max_rate_for_ttft(pm.read_trace(trace_file), ttft_budget_ms=500.0, **API)
    assert f"{answer:,.4g} requests/s" in capsys.readouterr().out
    flags = [f for i, f in enumerate(FLAGS) if "--prefill-workers" not in FLAGS[max(i - 1, 0) : i + 1]]
    assert main(["ttft", str(trace_file), *flags, "--budget-ms", "500", "--fewest", "prefill_workers"]) == 0
    fewest = pm.fewest_for_ttft(
        pm.read_trace(trace_file),
        "prefill_workers",
        ttft_budget_ms=500.0,
        **{k: v for k, v in API.items() if k != "prefill_workers"},
    )
    assert capsys.readouterr().out.strip().endswith(f": {fewest}")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--prefill-workers", "0"], "--prefill-workers"),
        (["--decode-kv-tokens", "10"], "decode_kv_tokens"),
        (["--fewest", "decode_workers"], "--fewest needs --budget-ms"),
        (["--budget-ms", "500"], "--budget-ms answers a question in one line and writes no file: drop --out"),
        (["--concurrency", "x"], "--concurrency"),
    ],
)
def test_bad_flags_are_one_line_and_write_nothing(trace_file, tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    assert main(["ttft", str(trace_file), *FLAGS, *extra, "--out", str(out)]) == 2  # (the last value of a flag holds)
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not out.exists()


def test_a_missing_link_is_a_usage_error(trace_file, capsys):
    assert main(["ttft", str(trace_file), "--model", "llama-3.1-8b"]) == 2
    assert "--link" in capsys.readouterr().err


CLUSTER_FLAGS = [
    "--model",
    "llama-3.1-70b",
    "--cluster",
    "hgx-h100-8x400g",
    "--tp",
    "2",
    "--prefill-workers",
    "8",
    "--decode-workers",
    "2",
    "--prefill-tokens-per-s",
    "60000",
    "--contention",
    "fair",
]
CLUSTER_API = dict(
    model="llama-3.1-70b",
    link="hgx-h100-8x400g",
    tp=2,
    prefill_workers=8,
    decode_workers=2,
    prefill_tokens_per_s=60_000.0,
    contention="fair",
)


def test_a_cluster_s_ttft_and_the_fewest_nics_per_node_are_the_library_s(trace_file, capsys):
    assert main(["ttft", str(trace_file), *CLUSTER_FLAGS, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = pm.summarize_ttft(pm.replay_ttft(pm.read_trace(trace_file), **CLUSTER_API))
    assert printed["p99_ms"] == pytest.approx(expected["p99_ms"], rel=1e-12)
    flags = [*CLUSTER_FLAGS, "--budget-ms", "300", "--fewest", "nics_per_node"]
    assert main(["ttft", str(trace_file), *flags]) == 0
    fewest = pm.fewest_for_ttft(pm.read_trace(trace_file), "nics_per_node", ttft_budget_ms=300.0, **CLUSTER_API)
    assert capsys.readouterr().out.strip().endswith(f": {fewest}")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--cluster", "ib-ndr"], "cluster"),
        (["--link", "ib-ndr", "--budget-ms", "50", "--fewest", "nics_per_node"], "give --cluster"),
        (["--cluster", "hgx-h100-8x400g", "--contention", "fifo"], "identical links"),
    ],
)
def test_a_cluster_flag_that_cannot_work_is_one_line(trace_file, capsys, flags, message):
    assert main(["ttft", str(trace_file), "--model", "llama-3.1-8b", *flags]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


def test_a_cluster_s_fields_change_on_the_command_line_of_ttft_and_trace(trace_file, capsys, tmp_path):
    """Found by a hostile pass: `perfmodel delay` and `sweep` took a flag per field of --cluster (--transport,
    --nics-per-node, ...), `ttft` and `trace` did not: a transport could not be replayed without saving a cluster."""
    flags = [*CLUSTER_FLAGS, "--transport", "nixl-ucx-rdma", "--nics-per-node", "4"]
    assert main(["ttft", str(trace_file), *flags, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    from perfmodel.network.clusters import with_fields

    cluster = with_fields(pm.get_cluster("hgx-h100-8x400g"), {"transport": "nixl-ucx-rdma", "nics_per_node": 4})
    api = {**CLUSTER_API, "link": cluster}
    expected = pm.summarize_ttft(pm.replay_ttft(pm.read_trace(trace_file), **api))
    assert printed["p99_ms"] == pytest.approx(expected["p99_ms"], rel=1e-12)
    unchanged = pm.summarize_ttft(pm.replay_ttft(pm.read_trace(trace_file), **CLUSTER_API))
    assert printed["handoff_delay_p99_ms"] != unchanged["handoff_delay_p99_ms"]  # (the flags changed something)
    trace_flags = ["--model", "llama-3.1-70b", "--cluster", "hgx-h100-8x400g", "--tp", "2", "--decode-workers", "2"]
    trace_flags += ["--contention", "fair", "--transport", "nixl-ucx-rdma", "--nics-per-node", "4"]
    assert main(["trace", str(trace_file), *trace_flags, "--out", str(tmp_path / "replay")]) == 0
    replayed = json.loads((tmp_path / "replay" / "summary.json").read_text())
    want = pm.summarize(
        pm.replay_handoffs(
            pm.read_trace(trace_file), cluster, "llama-3.1-70b", tp=2, decode_workers=2, contention="fair"
        )
    )
    assert replayed["p99_ms"] == pytest.approx(want["p99_ms"], rel=1e-12)


@pytest.mark.parametrize("command", ["ttft", "trace"])
def test_a_cluster_s_field_without_a_cluster_is_refused(trace_file, command, capsys, tmp_path):
    flags = ["--model", "llama-3.1-8b", "--link", "ib-ndr", "--transport", "x", "--out", str(tmp_path / "out")]
    assert main([command, str(trace_file), *flags]) == 2
    assert (
        "--transport changes a cluster's fields, and no --cluster is given. Fix: give --cluster NAME too"
        in capsys.readouterr().err
    )


def test_an_out_folder_that_would_refuse_the_files_is_refused_before_any_work(trace_file, tmp_path, capsys):
    out = tmp_path / "results"
    out.mkdir()
    (out / "ttft.csv").write_text("mine")
    assert main(["ttft", str(trace_file), *FLAGS, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "holds ttft.csv, which perfmodel ttft did not write" in captured.err and not captured.out  # (no replay)
    assert (out / "ttft.csv").read_text() == "mine"


def test_fewest_refuses_the_count_it_searches(trace_file, capsys):
    """--prefill-workers 2 with --fewest prefill_workers: the 2 was dropped silently for the counts tried."""
    assert main(["ttft", str(trace_file), *FLAGS, "--budget-ms", "500", "--fewest", "prefill_workers"]) == 2
    assert "--prefill-workers is what --fewest prefill_workers searches" in capsys.readouterr().err
