"""``perfmodel ttft`` as a hostile user drives it: the trace's columns honoured or refused as the API does, no flag
ignored, no search bound printed as an answer, and every answer saying what question it answers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import perfmodel as pm
from perfmodel.cli import main

NET = ["--bandwidth", "1000", "--kv-bytes-per-token", "1e6"]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(capsys):
    captured = capsys.readouterr()
    error = captured.err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error, error
    return error


@pytest.fixture
def poisson(tmp_path):
    """60 requests, about 10 a second."""
    path = tmp_path / "poisson.csv"
    trace = pm.synthetic_trace(60, 10, seed=3, median_input_tokens=1000).drop(columns=["hash_ids"])
    trace.to_csv(path, index=False)
    return path


# --- A3: the trace's prefill_worker column -----------------------------------------------------------------------


def test_the_prefill_worker_column_routes_prefills_as_the_api_does(tmp_path, capsys):
    """Three 1,000-token prefills of 100 ms on worker 0 (the column), 1 ms handoffs: TTFT 101, 201, 291 ms."""
    text = "arrival_ms,num_input_tokens,num_output_tokens,prefill_worker\n0,1000,1,0\n0,1000,1,0\n10,1000,1,0\n"
    path = write(tmp_path, "t4.csv", text)
    flags = [*NET, "--prefill-tokens-per-s", "10000", "--prefill-workers", "2", "--json"]
    assert main(["ttft", str(path), *flags]) == 0
    printed = json.loads(capsys.readouterr().out)
    api = pm.summarize_ttft(
        pm.replay_ttft(pd.read_csv(path), 1000.0, 1e6, prefill_tokens_per_s=10_000, prefill_workers=2)
    )
    assert printed["p50_ms"] == api["p50_ms"] == 201.0
    assert printed["p99_ms"] == pytest.approx(201 + 0.98 * 90, abs=1e-9) and printed["p99_ms"] == api["p99_ms"]
    assert pm.read_trace(path)["prefill_worker"].tolist() == [0, 0, 0]


def test_a_prefill_worker_column_under_another_name_is_mapped_with_column(tmp_path, capsys):
    text = "t,n,o,w\n0,1000,1,1\n0,1000,1,1\n10,1000,1,1\n"
    path = write(tmp_path, "w.csv", text)
    columns = ["--column", "arrival_ms=t", "--column", "num_input_tokens=n", "--column", "num_output_tokens=o"]
    flags = [*NET, "--prefill-tokens-per-s", "10000", "--prefill-workers", "2", "--json", *columns]
    assert main(["ttft", str(path), *flags, "--column", "prefill_worker=w"]) == 0
    assert json.loads(capsys.readouterr().out)["p50_ms"] == 201.0  # (all on worker 1: queued)
    assert main(["ttft", str(path), *flags]) == 0
    assert json.loads(capsys.readouterr().out)["p50_ms"] == 101.0  # (round robin without it)


# --- A4: a missing num_output_tokens is never defaulted -------------------------------------------------------------


def test_a_missing_num_output_tokens_is_refused_where_it_is_needed(tmp_path, capsys):
    path = write(tmp_path, "t6.csv", "arrival_ms,num_input_tokens\n0,500\n0,600\n")
    out = tmp_path / "never"
    for extra in (["--concurrency", "1"], ["--decode-kv-tokens", "600"]):
        assert main(["ttft", str(path), *NET, "--decode-step-ms", "10", *extra, "--out", str(out)]) == 2
        error = one_line_error(capsys)
        assert "num_output_tokens" in error and "never defaulted" in error
        assert not out.exists()
    assert "num_output_tokens" not in pm.read_trace(path)  # (never zeros made up)


def test_a_missing_num_output_tokens_is_fine_where_it_is_not_needed(tmp_path, capsys):
    """500 and 600 tokens at 1 GB/s, 1e6 B/token, on one FIFO link: handoffs end at 500 and 1,100 ms, +10 ms step."""
    path = write(tmp_path, "t6.csv", "arrival_ms,num_input_tokens\n0,500\n0,600\n")
    assert main(["ttft", str(path), "--bandwidth", "1", "--kv-bytes-per-token", "1e6", "--contention", "fifo",
                 "--decode-step-ms", "10", "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    assert printed["p50_ms"] == pytest.approx((510 + 1110) / 2)


# --- A5: --fewest nics_per_node with --nics-per-node ---------------------------------------------------------------


def test_fewest_nics_per_node_refuses_nics_per_node(poisson, capsys):
    flags = ["--model", "llama-3.1-70b", "--cluster", "hgx-h100-8x400g", "--tp", "8", "--contention", "fair"]
    argv = ["ttft", str(poisson), *flags, "--budget-ms", "250", "--fewest", "nics_per_node", "--nics-per-node", "1"]
    assert main(argv) == 2
    assert "--nics-per-node is what --fewest nics_per_node searches: drop --nics-per-node" in one_line_error(capsys)


# --- A7: a search bound is not an answer ---------------------------------------------------------------------------


def test_max_rate_says_when_every_rate_tried_keeps_the_budget_or_none_does(poisson):
    trace = pm.read_trace(poisson)
    own = (len(trace) - 1) / trace["arrival_ms"].max() * 1000.0
    kw = dict(kv_transfer_bandwidth=10.0, kv_bytes_per_token=1e6, contention="fifo")
    every = pm.max_rate_for_ttft(trace, ttft_budget_ms=1e9, **kw)
    assert every == pytest.approx(own * 1000) and every.kept == "every"
    assert every.tried_per_s == pytest.approx((own / 1000, own * 1000))
    none = pm.max_rate_for_ttft(trace, ttft_budget_ms=1.0, **kw)
    assert none == 0.0 and none.kept == "none" and none.tried_per_s == pytest.approx((own / 1000, own * 1000))
    found = pm.max_rate_for_ttft(trace, ttft_budget_ms=1500.0, **kw)
    assert found.kept == "found" and own / 1000 < found < own * 1000


def test_the_cli_says_at_least_or_none_at_the_edges(poisson, capsys):
    flags = ["--bandwidth", "10", "--kv-bytes-per-token", "1e6", "--contention", "fifo"]
    trace = pm.read_trace(poisson)
    high = pm.max_rate_for_ttft(trace, ttft_budget_ms=1e9, kv_transfer_bandwidth=10.0, kv_bytes_per_token=1e6,
                                contention="fifo")  # fmt: skip
    assert main(["ttft", str(poisson), *flags, "--budget-ms", "1e9"]) == 0
    out = capsys.readouterr().out
    assert f"at least {high:,.4g} requests/s (every rate tried keeps it" in out
    assert main(["ttft", str(poisson), *flags, "--budget-ms", "1"]) == 0
    out = capsys.readouterr().out
    low = high.tried_per_s[0]
    assert f"none of {low:,.4g}..{high:,.4g} requests/s" in out and " 0 requests/s" not in out


# --- A8: ready_ms ---------------------------------------------------------------------------------------------------


def test_a_ready_ms_column_is_refused_not_ignored(tmp_path, capsys):
    text = "arrival_ms,num_input_tokens,num_output_tokens,ready_ms\n0,1000,1,500\n0,1000,1,900\n"
    path = write(tmp_path, "t5.csv", text)
    assert main(["ttft", str(path), *NET, "--out", str(tmp_path / "never")]) == 2
    error = one_line_error(capsys)
    assert "ready_ms" in error and "perfmodel trace" in error
    assert not (tmp_path / "never").exists()


# --- A9: --json where it applies to nothing -------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [["--rate", "5", "10"], ["--budget-ms", "2000"]])
def test_json_with_rate_or_budget_is_refused(poisson, capsys, extra):
    assert main(["ttft", str(poisson), *NET, "--json", *extra]) == 2
    error = one_line_error(capsys)
    assert "--json" in error and extra[0] in error


# --- B2: --skip-bad-lines ------------------------------------------------------------------------------------------


def test_skip_bad_lines_is_a_flag_of_ttft_as_its_error_says(tmp_path, capsys):
    lines = [
        '{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [1,2]}',
        '{"timestamp": 5, "input_length": 1000, "output_length": 1, "hash_ids": [1.5]}',
        '{"timestamp": 9, "input_length": 1000, "output_length": 1, "hash_ids": [1]}',
    ]
    path = write(tmp_path, "mc.jsonl", "\n".join(lines) + "\n")
    assert main(["ttft", str(path), *NET]) == 2
    assert "--skip-bad-lines" in one_line_error(capsys)
    assert main(["ttft", str(path), *NET, "--skip-bad-lines", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["requests"] == 2
    assert "skipped 1 malformed line" in captured.err


# --- B3: an empty trace -----------------------------------------------------------------------------------------------


def test_an_empty_trace_is_refused(tmp_path, capsys):
    path = write(tmp_path, "empty.csv", "arrival_ms,num_input_tokens,num_output_tokens\n")
    out = tmp_path / "never"
    assert main(["ttft", str(path), *NET, "--out", str(out)]) == 2
    assert f"{path} has no requests" in one_line_error(capsys)
    assert not out.exists()


# --- B6: one output folder for a replay and a grid ------------------------------------------------------------------


def test_a_grid_keeps_the_replay_written_to_the_same_folder(poisson, tmp_path, capsys):
    out = tmp_path / "v1"
    assert main(["ttft", str(poisson), *NET, "--out", str(out)]) == 0
    assert main(["ttft", str(poisson), *NET, "--rate", "5", "10", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} >= {"ttft.csv", "summary.json", "grid.csv"}
    assert main(["ttft", str(poisson), *NET, "--out", str(out)]) == 0  # (and back: each its own command)
    assert (out / "grid.csv").exists()


# --- C1-C3: what question each answer answers ---------------------------------------------------------------------


def test_the_summary_and_the_grid_say_what_their_percentiles_are_of(poisson, capsys):
    flags = [*NET, "--contention", "fifo", "--links", "2", "--prefill-workers", "3", "--decode-step-ms", "5"]
    assert main(["ttft", str(poisson), *flags]) == 0
    out = capsys.readouterr().out
    assert "percentiles of per-request TTFT" in out and "60 requests" in out
    assert "transfers queued first come first served" in out and "2 links" in out
    assert "3 prefill workers" in out and "5 ms per output token" in out
    assert main(["ttft", str(poisson), *flags, "--rate", "5", "10"]) == 0
    out = capsys.readouterr().out
    assert "per-request TTFT" in out and "transfers queued first come first served" in out and "5, 10" in out


def test_fewest_names_its_unit_the_counts_tried_and_says_none_in_links(poisson, capsys):
    flags = ["--bandwidth", "10", "--kv-bytes-per-token", "1e6", "--contention", "fifo"]
    assert main(["ttft", str(poisson), *flags, "--budget-ms", "1", "--fewest", "links"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("with p99 TTFT <= 1 ms: none of 1..4,096 links (even the most tried misses it)")
    assert "NIC" not in out
    trace = pm.read_trace(poisson)
    kw = dict(kv_transfer_bandwidth=10.0, kv_bytes_per_token=1e6, contention="fifo")
    fewest = pm.fewest_for_ttft(trace, "links", ttft_budget_ms=3000.0, **kw)
    assert main(["ttft", str(poisson), *flags, "--budget-ms", "3000", "--fewest", "links"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith(f"the fewest links (of 1..4,096 links, each tried from the fewest up: no monotonicity assumed) "
                                f"with p99 TTFT <= 3000 ms: {fewest}")  # fmt: skip
    assert "transfers queued first come first served" in out


def test_the_budget_answer_names_the_setup(poisson, capsys):
    flags = ["--bandwidth", "10", "--kv-bytes-per-token", "1e6", "--contention", "fifo"]
    assert main(["ttft", str(poisson), *flags, "--budget-ms", "1500"]) == 0
    out = capsys.readouterr().out
    assert "transfers queued first come first served" in out and "1 prefill worker" in out


def test_summaries_are_strict_json_with_null_for_what_is_no_number(tmp_path, poisson, capsys):
    """summary.json and --json held a bare NaN (decode memory unbounded), which strict readers (jq) refuse."""

    def strict(text):
        return json.loads(text, parse_constant=lambda word: pytest.fail(f"{word} is not JSON"))

    out = tmp_path / "o"
    assert main(["ttft", str(poisson), *NET, "--prefill-tokens-per-s", "40000", "--out", str(out)]) == 0
    summary = strict((out / "summary.json").read_text())
    assert summary["decode_memory_peak"] is None and summary["requests"] == 60
    capsys.readouterr()
    assert main(["ttft", str(poisson), *NET, "--prefill-tokens-per-s", "40000", "--json"]) == 0
    assert strict(capsys.readouterr().out)["decode_memory_peak"] is None
    assert main(["trace", str(poisson), *NET, "--out", str(tmp_path / "t")]) == 0
    strict((tmp_path / "t" / "summary.json").read_text())
