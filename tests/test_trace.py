"""Trace reading and replay: sample traces, invariants, hand-worked cases, and the plain-Python reference."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import InputError, read_trace, replay_handoffs, summarize, synthetic_trace

from .reference_replay import replay_reference

BW = 2**20 / 1e6  # GB/s at which 1 KiB takes 1/1024 ms: exact binary fractions in tests


def _cells(column):
    """A column's values with missing ones as None (a replay's ``link`` is missing where no link was used)."""
    return [None if pd.isna(x) else x for x in column.tolist()]


def _trace(ready, tokens, hashes=None):
    df = pd.DataFrame(
        {
            "arrival_ms": np.asarray(ready, float),
            "num_input_tokens": np.asarray(tokens, np.int64),
            "num_output_tokens": 1,
        }
    )
    if hashes is not None:
        df["hash_ids"] = pd.Series(hashes, dtype=pd.ArrowDtype(pa.list_(pa.int64())))
    df.attrs["hash_block_tokens"] = 512
    return df


# --- reading ---------------------------------------------------------------------------------


def test_read_mooncake_sample(shared_data):
    trace = read_trace(shared_data / "mooncake_synthetic_trace.jsonl")
    assert len(trace) == 3993 and trace.attrs["format"] == "mooncake"
    assert list(trace.columns) == ["arrival_ms", "num_input_tokens", "num_output_tokens", "hash_ids"]
    assert trace["arrival_ms"].iloc[0] == 0 and trace["arrival_ms"].is_monotonic_increasing
    assert trace["hash_ids"].iloc[0][:3] == [0, 1, 2] and trace["num_input_tokens"].iloc[0] == 40160
    blocks = np.array([len(ids) for ids in trace["hash_ids"]])  # (Series.list: pandas >= 2.2 only)
    np.testing.assert_array_equal(blocks, -(-trace["num_input_tokens"].to_numpy() // 512))


def test_read_azure_sample(shared_data):
    trace = read_trace(shared_data / "azure_llm_2023_code.csv")
    assert len(trace) == 8819 and trace.attrs["format"] == "azure" and "hash_ids" not in trace
    assert trace["num_input_tokens"].iloc[:3].tolist() == [4808, 3180, 110]
    assert trace["arrival_ms"].iloc[1] == pytest.approx(52.0) and trace["arrival_ms"].min() == 0


@pytest.mark.parametrize(
    "name, mode",
    [("mooncake_synthetic_trace.jsonl", "destination_missing"), ("azure_llm_2023_code.csv", "full_prompt")],
)
def test_replay_sample_traces(shared_data, name, mode):
    trace = read_trace(shared_data / name)
    replay = replay_handoffs(
        trace, model="llama-3.1-70b", link="ib-ndr", mode=mode, decode_workers=4, contention="fair", links=2
    )
    assert len(replay) == len(trace) and replay["handoff_delay_ms"].notna().all()
    summary = summarize(replay)
    assert summary["p50_ms"] <= summary["p99_ms"] <= summary["max_ms"]
    if mode == "destination_missing":  # Mooncake's shared prefixes are reused
        assert summary["bytes_saved_by_prefix_reuse"] > 0


def test_hash_ids_in_several_chunks():
    one = synthetic_trace(300, 50, seed=1)
    two = pd.concat([one.iloc[:100], one.iloc[100:]])  # an Arrow column of two chunks
    assert pa.array(two["hash_ids"]).num_chunks == 2
    kw = dict(kv_bytes_per_token=1000, kv_transfer_bandwidth=10.0, mode="destination_missing", decode_workers=2)
    pd.testing.assert_frame_equal(replay_handoffs(two, **kw), replay_handoffs(one, **kw))


def test_malformed_line_is_named_or_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    good = {"timestamp": 1, "input_length": 10, "output_length": 2, "hash_ids": [1]}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "input_length": -4}), json.dumps(good)]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"t.jsonl, line 2: not valid JSON"):
        read_trace(path)
    with pytest.warns(UserWarning, match=r"t.jsonl: skipped 2 malformed lines of 4"):
        trace = read_trace(path, errors="skip")
    assert len(trace) == 2 and trace.attrs["skipped_lines"] == 2
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "trace",
            str(path),
            "--kv-bytes-per-token",
            "10",
            "--bandwidth",
            "1",
            "--skip-bad-lines",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "skipped 2 malformed lines" in done.stderr
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "input_length": -4}) + "\n")
    with pytest.raises(ValueError, match=r"t.jsonl, line 2, column 'input_length': -4 is negative"):
        read_trace(path)


def test_generic_csv_with_mapping_and_datetimes(tmp_path):
    path = tmp_path / "requests.csv"
    pd.DataFrame({"when": ["2026-01-01 00:00:01", "2026-01-01 00:00:00.5"], "prompt": [100, 200]}).to_csv(
        path, index=False
    )
    trace = read_trace(path, columns={"arrival_ms": "when", "num_input_tokens": "prompt"})
    assert trace["arrival_ms"].tolist() == [500.0, 0.0] and trace["num_input_tokens"].tolist() == [100, 200]
    with pytest.raises(
        ValueError, match=r"no column for \['arrival_ms', 'num_input_tokens'\]; the file has \['when', 'prompt'\]"
    ):
        read_trace(path)


def test_a_csv_trace_reads_its_numbers_exactly(tmp_path):
    """Every float as written, to the last bit (pandas 2's default CSV parser is off by one unit in the
    last place for some, e.g. 0.30000000000000004 read as 0.3)."""
    arrival = np.array([0.30000000000000004, 9.999999999999999e-05, 1234.5678901234567, 0.0])
    ready = arrival + np.array([0.1, 0.2, 1e-13, 7.000000000000001])
    path = tmp_path / "requests.csv"
    pd.DataFrame({"arrival_ms": arrival, "num_input_tokens": [1, 2, 3, 4], "ready_ms": ready}).to_csv(path, index=False)
    trace = read_trace(path)  # every column under its own name is found, ready_ms too
    np.testing.assert_array_equal(trace["arrival_ms"].to_numpy(), arrival - arrival.min())
    np.testing.assert_array_equal(trace["ready_ms"].to_numpy(), ready - arrival.min())


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_ready_ms_column_is_kept_not_dropped(tmp_path, suffix):
    """A trace saved with its prefill completion times reads back with them (they were silently
    dropped unless mapped by hand, and the replay then started every transfer at arrival)."""
    frame = pd.DataFrame({"arrival_ms": [0.0, 10.0], "num_input_tokens": [100, 200], "ready_ms": [5.0, 30.0]})
    path = tmp_path / f"trace{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    trace = read_trace(path)
    assert trace["ready_ms"].tolist() == [5.0, 30.0]


@pytest.mark.parametrize("column", ["arrival_ms", "ready_ms"])
def test_one_bad_time_spoils_one_row_not_the_column(tmp_path, column):
    """A column of numbers with one stray word was read as datetimes: every row became malformed (and
    errors='skip' dropped them all). The word's row alone is malformed; the others keep their numbers."""
    frame = pd.DataFrame(
        {"arrival_ms": ["0", "10", "20"], "num_input_tokens": [100, 200, 300], "ready_ms": ["5", "15", "25"]}
    )
    frame.loc[1, column] = "abc"
    path = tmp_path / "requests.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(
        ValueError,
        match=r"line 3, column '(arrival_ms|ready_ms)': 'abc' is not a finite number of ms, nor a time \(1 malformed row\)",
    ):
        read_trace(path)
    with pytest.warns(UserWarning, match="skipped 1 malformed line"):
        trace = read_trace(path, errors="skip")
    assert trace["num_input_tokens"].tolist() == [100, 300]
    assert trace["ready_ms"].tolist() == [5.0, 25.0]


@pytest.mark.parametrize("utc", [False, True])
def test_a_parquet_trace_with_timestamp_columns(tmp_path, utc):
    """Timestamps (a datetime dtype, not text) are times from the earliest arrival, in ms."""
    when = pd.to_datetime(["2026-01-01 00:00:01.000", "2026-01-01 00:00:00.500"], utc=utc)
    pd.DataFrame({"arrival_ms": when, "num_input_tokens": [1, 2], "ready_ms": when + pd.Timedelta("250ms")}).to_parquet(
        tmp_path / "t.parquet"
    )
    trace = read_trace(tmp_path / "t.parquet")
    assert trace["arrival_ms"].tolist() == [500.0, 0.0] and trace["ready_ms"].tolist() == [750.0, 250.0]


def test_arrival_and_ready_times_on_different_clocks_are_refused(tmp_path):
    """Arrivals in ms and completions as datetimes (or the reverse) cannot be put on one clock."""
    path = tmp_path / "requests.csv"
    pd.DataFrame(
        {"arrival_ms": [0, 10], "num_input_tokens": [1, 2], "ready_ms": ["2026-01-01 00:00:01", "2026-01-01 00:00:02"]}
    ).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"ready_ms.*datetimes.*arrival_ms.*numbers"):
        read_trace(path)


def test_ready_times_from_a_generic_trace(tmp_path):
    path = tmp_path / "requests.csv"
    pd.DataFrame(
        {
            "t": ["2026-01-01 00:00:01", "2026-01-01 00:00:02"],
            "prompt": [10_000, 10_000],
            "done": ["2026-01-01 00:00:01.5", "2026-01-01 00:00:02.1"],
        }
    ).to_csv(path, index=False)
    mapping = {"arrival_ms": "t", "num_input_tokens": "prompt", "ready_ms": "done"}
    trace = read_trace(path, columns=mapping)
    assert trace["arrival_ms"].tolist() == [0.0, 1000.0] and trace["ready_ms"].tolist() == [500.0, 1100.0]
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, ready_ms="ready_ms")
    assert replay["start_ms"].tolist() == [500.0, 1100.0] and replay["end_ms"].tolist() == [510.0, 1110.0]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "trace",
            str(path),
            "--kv-bytes-per-token",
            "1000",
            "--bandwidth",
            "1",
            *[a for k, v in mapping.items() for a in ("--column", f"{k}={v}")],
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(tmp_path / "out" / "replay.csv")["start_ms"].tolist() == [500.0, 1100.0]
    (tmp_path / "early.csv").write_text("t,prompt,done\n5,10,4\n")
    with pytest.raises(ValueError, match=r"line 2: ready_ms \(column 'done'\) 4 is before arrival_ms \(column 't'\) 5"):
        read_trace(tmp_path / "early.csv", columns=mapping)  # ready before arrival
    with pytest.raises(ValueError, match="unknown trace column name"):
        read_trace(path, columns={**mapping, "prefill": "done"})


def test_parquet_and_bad_rows(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame({"arrival_ms": [0.0, 1.0, 2.0], "num_input_tokens": [1.0, -1.0, 3.0]}).to_parquet(path)
    with pytest.raises(ValueError, match=r"t.parquet, row 2, column 'num_input_tokens': -1.0 is negative"):
        read_trace(path)
    with pytest.warns(UserWarning, match="skipped 1 malformed"):
        assert read_trace(path, errors="skip")["num_input_tokens"].tolist() == [1, 3]


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "nope.jsonl")
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(ValueError, match="cannot tell the format from"):
        read_trace(tmp_path / "t.txt")


def test_synthetic_trace_is_seeded_and_shares_prefixes():
    a, b = synthetic_trace(3000, 100, seed=3), synthetic_trace(3000, 100, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(synthetic_trace(3000, 100, seed=4))
    gaps = np.diff(a["arrival_ms"])
    assert gaps.min() >= 0 and 1000 / 100 * 0.9 < gaps.mean() < 1000 / 100 * 1.1  # Poisson at 100/s
    blocks = np.array([len(ids) for ids in a["hash_ids"]])
    np.testing.assert_array_equal(blocks, -(-a["num_input_tokens"].to_numpy() // 512))
    flat = np.concatenate(a["hash_ids"].to_list())
    assert len(np.unique(flat)) < 0.8 * len(flat)  # sessions and system prompts repeat blocks


# --- replay: invariants ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample():
    return synthetic_trace(4000, rate_per_s=40, seed=11)


@pytest.mark.parametrize("contention", ["none", "fifo", "fair"])
@pytest.mark.parametrize("mode", ["full_prompt", "destination_missing"])
def test_invariants(sample, contention, mode):
    replay = replay_handoffs(
        sample,
        model="llama-3.1-8b",
        link="ib-ndr",
        mode=mode,
        decode_workers=3,
        decode_cache_blocks=2000,
        contention=contention,
        links=2,
        latency_ms=0.2,
    )
    assert replay.index.equals(sample.index)
    assert (replay["queue_ms"] >= 0).all()
    np.testing.assert_array_equal(replay["handoff_delay_ms"], replay["queue_ms"] + replay["transfer_ms"])
    np.testing.assert_allclose(replay["end_ms"] - sample["arrival_ms"], replay["handoff_delay_ms"], atol=1e-6)
    if contention == "none":
        assert (replay["queue_ms"] == 0).all()
    rounded_full = -(-sample["num_input_tokens"] // 512) * 512
    assert (replay["charged_tokens"] <= rounded_full).all()
    assert replay["decode_worker"].between(0, 2).all()


def test_larger_cache_never_saves_less(sample):
    saved = [
        summarize(
            replay_handoffs(
                sample,
                kv_bytes_per_token=1000,
                kv_transfer_bandwidth=50.0,
                mode="destination_missing",
                decode_cache_blocks=capacity,
            )
        )["bytes_saved_by_prefix_reuse"]
        for capacity in (0, 10, 100, 1000, 10_000, None)
    ]
    assert saved[0] == 0 and all(a <= b for a, b in itertools.pairwise(saved)) and saved[-1] > 0


def test_one_link_queues_at_least_as_much_as_two(sample):
    kw = dict(model="llama-3.1-70b", link="ib-ndr", contention="fifo")
    one, two = replay_handoffs(sample, links=1, **kw), replay_handoffs(sample, links=2, **kw)
    assert (one["queue_ms"] >= two["queue_ms"] - 1e-9).all() and one["queue_ms"].sum() > two["queue_ms"].sum()
    fair_one = replay_handoffs(sample, links=1, **{**kw, "contention": "fair"})
    fair_two = replay_handoffs(sample, links=2, **{**kw, "contention": "fair"})
    assert fair_one["queue_ms"].sum() >= fair_two["queue_ms"].sum()


def test_deterministic(sample):
    kw = dict(model="deepseek-v3", link="roce-400g", mode="destination_missing", decode_workers=4, contention="fair")
    pd.testing.assert_frame_equal(replay_handoffs(sample, **kw), replay_handoffs(sample, **kw))


def test_replay_shares_no_memory_with_the_trace(sample):
    """The result is built without copies of the kernel's outputs, but never on the caller's own arrays."""
    trace = sample.head(500).copy()
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=10.0)
    for column in ("arrival_ms", "num_input_tokens"):
        assert not np.shares_memory(replay[column].to_numpy(), trace[column].to_numpy()), column
    before = trace.copy()
    replay.loc[:, :] = 0
    pd.testing.assert_frame_equal(trace, before)


def test_more_block_ids_than_the_caches_can_name_is_refused(sample, monkeypatch):
    from perfmodel.replay import prepared  # (a trace of 2**31 distinct block ids is tens of GB: their count faked)

    monkeypatch.setattr(
        prepared, "_flat_hashes", lambda trace: (np.zeros(0, np.int64), np.zeros(len(trace) + 1, np.int64), 2**31)
    )
    with pytest.raises(ValueError, match="2,147,483,648 distinct block ids.*in parts"):
        replay_handoffs(sample.head(10), kv_bytes_per_token=1000, kv_transfer_bandwidth=10.0)


def test_ready_ms_column(sample):
    trace = sample.assign(prefill_done=sample["arrival_ms"] + 100.0)
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=10.0, ready_ms="prefill_done")
    np.testing.assert_allclose(replay["start_ms"], trace["prefill_done"])


def test_a_ready_ms_column_is_read_by_every_handoff_replay(sample):
    """read_trace keeps a ready_ms column "for replay_handoffs" (and the command line replays from it): the
    Python replays read it too, instead of starting every handoff at its arrival without a word."""
    trace = sample.head(50).assign(ready_ms=sample["arrival_ms"].head(50) + np.linspace(0.0, 500.0, 50) ** 2 / 50)
    common = dict(kv_bytes_per_token=10_000, kv_transfer_bandwidth=1.0)  # (queues that differ from the arrivals')
    replay = replay_handoffs(trace, **common)
    np.testing.assert_array_equal(replay["start_ms"], trace["ready_ms"])
    pd.testing.assert_frame_equal(replay, replay_handoffs(trace, ready_ms="ready_ms", **common))
    arrivals = replay_handoffs(trace, ready_ms=trace["arrival_ms"].to_numpy(), **common)  # (an explicit choice wins)
    np.testing.assert_array_equal(arrivals["start_ms"], trace["arrival_ms"])
    grid = perfmodel.replay_grid(trace, contention="fifo", links=[1], **common)
    assert grid["p99_ms"].tolist() == [summarize(replay_handoffs(trace, contention="fifo", **common))["p99_ms"]]
    nics = perfmodel.required_nics(trace, "ib-ndr", "llama-3.1-70b", budget_ms=1e9, contention="fifo")
    on_one = replay_handoffs(trace, "ib-ndr", "llama-3.1-70b", contention="fifo", ready_ms="ready_ms")
    assert nics.tried["p99_ms"].iloc[0] == summarize(on_one)["p99_ms"]


@pytest.mark.parametrize(
    "question",
    [
        lambda trace, serving: perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-8b", **serving),
        lambda trace, serving: perfmodel.ttft_grid(
            trace,
            link="ib-ndr",
            model="llama-3.1-8b",
            prefill_workers=[1, 2],
            **{k: v for k, v in serving.items() if k != "prefill_workers"},
        ),
        lambda trace, serving: perfmodel.max_rate_for_ttft(
            trace, ttft_budget_ms=1e3, link="ib-ndr", model="llama-3.1-8b", **serving
        ),
    ],
    ids=["replay_ttft", "ttft_grid", "max_rate_for_ttft"],
)
def test_a_ttft_replay_refuses_measured_prefill_ends(sample, question):
    """A TTFT replay models each prefill: measured prefill ends (ready_ms) would be ignored, so they are refused,
    as perfmodel ttft refuses them."""
    trace = sample.head(20).assign(ready_ms=sample["arrival_ms"].head(20) + 100.0)
    serving = dict(prefill_workers=1, prefill_tokens_per_s=20_000, decode_step_ms=30.0)
    with pytest.raises(ValueError, match=r"trace: has a ready_ms column \(measured prefill ends\).*drop the column"):
        question(trace, serving)
    question(trace.drop(columns="ready_ms"), serving)  # (without it, it runs)


# --- hand-worked examples --------------------------------------------------------------------


def test_fair_two_simultaneous_transfers_share_equally():
    trace = _trace([0.0, 0.0], [10_000, 10_000])  # 10 ms each alone at 1 GB/s with 1000 B/token
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, contention="fair")
    assert replay["end_ms"].tolist() == pytest.approx([20.0, 20.0])
    assert replay["queue_ms"].tolist() == pytest.approx([10.0, 10.0])


def test_fair_overlapping_transfers():
    # A alone 10 ms from t=0; B alone 10 ms from t=5. A: 5 ms alone, then half rate for its last half -> 15.
    # B: half rate from 5 to 15 (half done), then alone for the rest -> 20.
    trace = _trace([0.0, 5.0], [10_000, 10_000])
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, contention="fair")
    assert replay["end_ms"].tolist() == pytest.approx([15.0, 20.0])
    fifo = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, contention="fifo")
    assert fifo["end_ms"].tolist() == pytest.approx([10.0, 20.0]) and fifo["queue_ms"].tolist() == pytest.approx([0, 5])


def test_fair_two_links_do_not_share():
    trace = _trace([0.0, 0.0, 0.0], [10_000, 10_000, 10_000])
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, contention="fair", links=2)
    assert replay["link"].tolist() == [0, 1, 0] and replay["end_ms"].tolist() == pytest.approx([20.0, 10.0, 20.0])


def test_fair_latency_is_setup_before_sharing():
    trace = _trace([0.0, 0.0], [10_000, 10_000])
    replay = replay_handoffs(
        trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, contention="fair", latency_ms=1.0
    )
    assert replay["end_ms"].tolist() == pytest.approx([21.0, 21.0]) and replay["transfer_ms"].tolist() == [11.0, 11.0]


def test_prefix_cache_and_causality():
    # Request 1 shares request 0's two blocks; it arrives after 0's transfer ended (hit) or during it (miss).
    for gap, expected_cached in ((100.0, 1024), (0.5, 0)):
        trace = _trace([0.0, gap], [1024, 1500], [[7, 8], [7, 8, 9]])
        replay = replay_handoffs(
            trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0, mode="destination_missing", block_size=512
        )
        assert replay["cached_tokens"].tolist() == [0, expected_cached]
        assert replay["charged_tokens"].tolist() == [1024, 1536 - expected_cached]


def test_prefix_routing_follows_the_cache_and_round_robin_breaks_ties():
    trace = _trace([0, 10, 20, 30], [512] * 4, [[1], [2], [1], [3]])
    replay = replay_handoffs(
        trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, decode_workers=2, mode="destination_missing"
    )
    assert replay["decode_worker"].tolist() == [0, 1, 0, 1]
    assert replay["cached_tokens"].tolist() == [0, 0, 512, 0]


def test_lru_evicts_least_recent():
    trace = _trace([0, 10, 20, 30], [512] * 4, [[1], [2], [3], [1]])
    cached = replay_handoffs(
        trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing", decode_cache_blocks=2
    )["cached_tokens"]
    assert cached.tolist() == [0, 0, 0, 0]  # block 1 was evicted by 2 and 3
    cached = replay_handoffs(
        trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing", decode_cache_blocks=3
    )["cached_tokens"]
    assert cached.tolist() == [0, 0, 0, 512]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(kv_bytes_per_token=1), "kv_transfer_bandwidth and link are both missing"),
        (dict(kv_transfer_bandwidth=1.0), "kv_bytes_per_token and model are both missing"),
        (dict(kv_transfer_bandwidth=1.0, link="ib-ndr", kv_bytes_per_token=1), "are both given"),
        (
            dict(kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, contention="shared"),
            "contention: 'shared' is not one of",
        ),
        (dict(kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, decode_workers=0), "decode_workers"),
        (dict(kv_bytes_per_token=1, kv_transfer_bandwidth=-1.0), "bandwidth"),
        (dict(kv_bytes_per_token=1, kv_transfer_bandwidth=0.0, contention="fair"), "a bandwidth of 0 moves none"),
        (dict(model="llama-9", link="ib-ndr"), "model 'llama-9'"),
    ],
)
def test_replay_errors(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        replay_handoffs(_trace([0.0], [10]), **kwargs)


# --- the reference ---------------------------------------------------------------------------


@st.composite
def small_traces(draw):
    n = draw(st.integers(1, 10))
    ready = [float(draw(st.integers(0, 40))) for _ in range(n)]
    tokens = [draw(st.integers(0, 3000)) for _ in range(n)]
    hashes = [[draw(st.integers(0, 5)) for _ in range(-(-t // 512))] for t in tokens]
    return ready, tokens, hashes


@settings(max_examples=300, deadline=None)
@given(
    case=small_traces(),
    workers=st.integers(1, 3),
    capacity=st.sampled_from([None, 0, 1, 2, 4]),
    routing=st.sampled_from(["prefix", "round_robin"]),
    contention=st.sampled_from(["none", "fifo", "fair"]),
    links=st.integers(1, 2),
    mode=st.sampled_from(["full_prompt", "destination_missing"]),
    block_size=st.sampled_from([256, 512, 1000]),
    latency=st.sampled_from([0.0, 0.5]),
    per_block=st.sampled_from([0.0, 2.0**-7]),  # (exact: 0.01 left a shared end an ulp past an arrival it ties)
    layerwise=st.sampled_from([None, (3.0, 4, 1), (50.0, 8, 2)]),
)
def test_kernel_equals_reference(
    case, workers, capacity, routing, contention, links, mode, block_size, latency, per_block, layerwise
):
    ready, tokens, hashes = case
    kw = dict(mode=mode, block_size=block_size, routing=routing, contention=contention, links=links)
    streaming = {}
    lead, fraction = None, None
    if layerwise is not None:  # (prefill ms, layers, group)
        compute, layers, group = layerwise
        streaming = dict(overlap="layerwise", prefill_ms=compute, num_layers=layers, layer_group=group)
        lead, fraction = [compute * (layers - group) / layers] * len(ready), [group / layers] * len(ready)
    replay = replay_handoffs(
        _trace(ready, tokens, hashes),
        kv_bytes_per_token=1024,
        kv_transfer_bandwidth=BW,
        decode_workers=workers,
        decode_cache_blocks=capacity,
        latency_ms=latency,
        per_block_ms=per_block,
        **streaming,
        **kw,
    )
    expected = pd.DataFrame(
        replay_reference(
            ready,
            tokens,
            hashes,
            bytes_per_token=1024,
            bandwidth_gb_s=BW,
            workers=workers,
            capacity=capacity,
            latency_ms=latency,
            per_block_ms=per_block,
            lead=lead,
            last_fraction=fraction,
            **kw,
        )
    )
    for column in ("decode_worker", "cached_tokens", "charged_tokens", "link"):
        assert _cells(replay[column]) == _cells(expected[column]), column
    compared = ("transfer_bytes", "transfer_ms", "start_ms", "end_ms", "handoff_delay_ms") + (
        ("queue_ms",) if layerwise is None else ()
    )
    for column in compared:
        np.testing.assert_allclose(replay[column], expected[column], rtol=1e-9, atol=1e-9, err_msg=column)


@st.composite
def long_traces(draw):
    """Up to 150 requests over few distinct blocks, often re-sending an earlier request's prefix: bounded
    caches fill, blocks are used again while held (mid-recency) and leave, many times over."""
    n = draw(st.integers(1, 150))
    distinct = draw(st.integers(1, 40))
    hashes = []
    for _ in range(n):
        if hashes and draw(st.booleans()):
            earlier = hashes[draw(st.integers(0, len(hashes) - 1))]
            prefix = earlier[: draw(st.integers(0, len(earlier)))]
        else:
            prefix = []
        hashes.append(prefix + draw(st.lists(st.integers(0, distinct - 1), max_size=6)))
    tokens = [512 * len(h) for h in hashes]
    ready = [float(i) for i in range(n)]
    return ready, tokens, hashes


@settings(max_examples=150, deadline=None)
@given(
    case=long_traces(),
    workers=st.sampled_from([1, 2, 3, 70]),
    capacity=st.integers(1, 12),
    routing=st.sampled_from(["prefix", "round_robin"]),
)
def test_bounded_caches_equal_reference_over_long_traces(case, workers, capacity, routing):
    """The caches' recency order kept over many fills and evictions (the short traces above fill a cache
    a few times at most): which worker each request goes to and what it finds cached, against the
    reference's OrderedDict LRUs."""
    ready, tokens, hashes = case
    kw = dict(mode="destination_missing", routing=routing, workers=workers, capacity=capacity)
    replay = replay_handoffs(
        _trace(ready, tokens, hashes),
        kv_bytes_per_token=1024,
        kv_transfer_bandwidth=BW,
        mode="destination_missing",
        routing=routing,
        decode_workers=workers,
        decode_cache_blocks=capacity,
    )
    expected = pd.DataFrame(replay_reference(ready, tokens, hashes, bytes_per_token=1024, bandwidth_gb_s=BW, **kw))
    assert replay["decode_worker"].tolist() == expected["decode_worker"].tolist()
    assert replay["cached_tokens"].tolist() == expected["cached_tokens"].tolist()


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.one_of(st.tuples(st.integers(0, 6).map(float), st.integers(0, 3)), st.none()), max_size=60))
def test_event_heap_pops_in_time_then_sequence_order(ops):
    """The replay's array heap against heapq: pushes of (time, seq) with many ties, pops (None) in between."""
    import heapq

    from perfmodel.kernels.replay import heap_pop, heap_push, new_heap

    heap = new_heap(len(ops))
    size, expected, popped, got = 0, [], [], []
    for item, op in enumerate(ops):
        if op is None:
            if size:
                size = heap_pop(heap, size)
                got.append(tuple(heap[size].tolist()))
                popped.append(heapq.heappop(expected))
        else:
            size = heap_push(heap, size, op[0], op[1], item)
            heapq.heappush(expected, (op[0], op[1], item))
    while size:
        size = heap_pop(heap, size)
        got.append(tuple(heap[size].tolist()))
        popped.append(heapq.heappop(expected))
    # equal (time, seq) pairs may come out in either order; the replay never pushes two of them
    assert [g[:2] for g in got] == [p[:2] for p in popped]


@pytest.mark.parametrize(
    "workers, capacity, routing, contention",
    [
        (1, 40, "prefix", "fifo"),
        (4, 60, "prefix", "fifo"),
        (8, 25, "prefix", "fair"),
        (3, 30, "round_robin", "none"),
        (16, 200, "prefix", "fifo"),
        (64, 20, "prefix", "fifo"),
        (65, 20, "prefix", "fair"),
        (130, 10, "prefix", "none"),
        (70, 20, "round_robin", "fifo"),
    ],
)  # 64 workers fill one bit word, 65 and more take several
def test_long_lru_lists_equal_the_reference(sample, workers, capacity, routing, contention):
    """Thousands of requests sharing prefixes through small caches: long LRU lists, constant eviction,
    blocks touched again at every depth of the list (the hypothesis cases above keep lists short)."""
    trace = sample.head(2500)
    hashes = [list(h) for h in trace["hash_ids"]]
    kw = dict(mode="destination_missing", routing=routing, contention=contention, links=2)
    replay = replay_handoffs(
        trace,
        kv_bytes_per_token=1024,
        kv_transfer_bandwidth=BW,
        decode_workers=workers,
        decode_cache_blocks=capacity,
        **kw,
    )
    expected = pd.DataFrame(
        replay_reference(
            trace["arrival_ms"].tolist(),
            trace["num_input_tokens"].tolist(),
            hashes,
            bytes_per_token=1024,
            bandwidth_gb_s=BW,
            workers=workers,
            capacity=capacity,
            **kw,
        )
    )
    assert 0 < replay["cached_tokens"].sum() < trace["num_input_tokens"].sum()  # hits and misses both
    for column in ("decode_worker", "cached_tokens", "charged_tokens", "link"):
        assert _cells(replay[column]) == _cells(expected[column]), column


def test_summarize_and_cli(tmp_path, sample):
    replay = replay_handoffs(
        sample, model="llama-3.1-8b", link="ib-ndr", mode="destination_missing", decode_workers=2, contention="fifo"
    )
    summary = summarize(replay)
    assert summary["handoffs"] == len(sample) and summary["p50_ms"] <= summary["p90_ms"] <= summary["p99_ms"]
    assert summary["bytes_saved_by_prefix_reuse"] == replay["cached_tokens"].sum() * 131_072
    assert 0 < summary["link_utilisation"] < 1 and math.isclose(summary["max_ms"], replay["handoff_delay_ms"].max())
    path = tmp_path / "trace.jsonl"
    rows = sample.head(300).assign(hash_ids=lambda d: d["hash_ids"].map(list))
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "timestamp": r.arrival_ms,
                    "input_length": int(r.num_input_tokens),
                    "output_length": int(r.num_output_tokens),
                    "hash_ids": [int(h) for h in r.hash_ids],
                }
            )
            for r in rows.itertuples()
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "trace",
            str(path),
            "--model",
            "llama-3.1-8b",
            "--link",
            "ib-ndr",
            "--mode",
            "destination_missing",
            "--decode-workers",
            "2",
            "--contention",
            "fair",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "p99_ms" in done.stdout
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["handoffs"] == 300
    assert len(pd.read_csv(tmp_path / "out" / "replay.csv")) == 300
    assert (tmp_path / "out" / "replay.png").stat().st_size > 10_000


def _assert_replay_is_the_reference(replay: pd.DataFrame, trace: pd.DataFrame, **kw) -> None:
    """``replay`` (of ``trace`` at 50 GB/s and 1000 B/token) is the plain-Python reference's, request by request."""
    expected = pd.DataFrame(
        replay_reference(
            trace["arrival_ms"].tolist(),
            trace["num_input_tokens"].tolist(),
            [list(h) for h in trace["hash_ids"]],
            bytes_per_token=1000,
            bandwidth_gb_s=50.0,
            **kw,
        )
    )
    assert 0 < replay["cached_tokens"].sum() < trace["num_input_tokens"].sum()  # hits and misses both
    for column in ("decode_worker", "cached_tokens", "charged_tokens", "link"):
        assert _cells(replay[column]) == _cells(expected[column]), column
    for column in ("transfer_bytes", "start_ms", "end_ms", "handoff_delay_ms"):
        np.testing.assert_allclose(replay[column], expected[column], rtol=1e-9, atol=1e-9, err_msg=column)


def test_block_ids_are_remapped_the_same_way_whatever_their_range():
    # small integer ids (Mooncake's) are ranked through a bitmap, 64-bit hashes go through pandas' factorize: the
    # dense ids may be numbered differently (value order, first appearance) but name the same blocks, so every
    # replay is the same: the reference's, which reads the ids as given
    trace = synthetic_trace(3000, rate_per_s=50, seed=11)
    small = trace.assign(hash_ids=[[int(h) % 5000 for h in ids] for ids in trace["hash_ids"]])
    hashed = small.assign(hash_ids=[[(h * 0x9E3779B97F4A7C15) % 2**63 for h in ids] for ids in small["hash_ids"]])
    assert max(max(ids) for ids in hashed["hash_ids"] if ids) > 2**62  # (far beyond any bitmap)
    kw = dict(mode="destination_missing", decode_workers=3, decode_cache_blocks=200, contention="fifo")
    replay = replay_handoffs(small, 50.0, 1000, **kw)
    pd.testing.assert_frame_equal(replay_handoffs(hashed, 50.0, 1000, **kw), replay)
    _assert_replay_is_the_reference(
        replay, small, mode="destination_missing", workers=3, capacity=200, contention="fifo"
    )


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.integers(-(2**40), 2**40), max_size=300),
    shift=st.sampled_from([0, 63, 64, 2**62]),
    threads=st.sampled_from([1, 2, 3]),
)
def test_ranked_ids_are_the_ranks_of_the_values(values, shift, threads):
    """The bitmap ranking against numpy's: every word boundary, negative and huge offsets, repeats; on one
    thread, and on several with one bitmap each (their shares splitting the values anywhere)."""
    from perfmodel.replay.prepared import ranked_ids

    values = np.asarray(values, dtype=np.int64)
    values = values - values.min() + shift if values.size else values
    if values.size and values.max() - values.min() > 2**20:
        values = values % 100_003 + shift  # keep the bitmap small
    dense, count = ranked_ids(values, threads)
    ranks = np.unique(values, return_inverse=True)[1].reshape(-1) if values.size else values
    np.testing.assert_array_equal(dense, ranks)
    assert count == len(np.unique(values))


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_saved_trace_reads_back_with_its_prefixes(tmp_path, suffix):
    # a trace saved with pandas (Parquet keeps the Arrow lists, CSV writes them as "[13 14 15]") reads back with its
    # hash_ids under their own name, index included: the same replay, prefix reuse and all (session 3: Parquet
    # crashed with an internal error, and both formats lost the hash_ids without --column hash_ids=hash_ids)
    trace = synthetic_trace(400, rate_per_s=20, seed=4)
    path = tmp_path / f"trace{suffix}"
    trace.to_parquet(path) if suffix == ".parquet" else trace.to_csv(path, index=False)
    back = read_trace(path)
    kw = dict(mode="destination_missing", decode_workers=2, contention="fifo")
    expected = replay_handoffs(trace, 50.0, 1000, **kw)
    got = replay_handoffs(back, 50.0, 1000, **kw)
    np.testing.assert_array_equal(got["transfer_bytes"], expected["transfer_bytes"])
    assert (got["cached_tokens"] > 0).any()
    bad = tmp_path / "bad.csv"
    bad.write_text('arrival_ms,num_input_tokens,hash_ids\n0,100,"[1, 2]"\n5,100,oops\n')
    with pytest.raises(ValueError, match=r"bad.csv, line 3, column 'hash_ids': holds 'oops', not a list of block ids"):
        read_trace(bad)


def test_block_ids_of_a_large_trace_are_ranked_in_parallel_as_in_serial():
    """Above the parallel threshold the block ids are ranked on two threads: the same replay as on one
    thread, and the reference's."""
    import perfmodel

    trace = synthetic_trace(8000, rate_per_s=100, seed=3)
    kw = dict(mode="destination_missing", decode_workers=2, decode_cache_blocks=3000, contention="fifo")
    with perfmodel.set_options(parallel_min_rows=1 << 62):
        serial = replay_handoffs(trace, 50.0, 1000, **kw)
    with perfmodel.set_options(parallel_min_rows=0):
        pd.testing.assert_frame_equal(replay_handoffs(trace, 50.0, 1000, **kw), serial)
    _assert_replay_is_the_reference(
        serial, trace, mode="destination_missing", workers=2, capacity=3000, contention="fifo"
    )


# --- a reader never misreads a time, a count or a file: each was a silent number or a raw error --------------


def _written(tmp_path, name, data):
    path = tmp_path / name
    if isinstance(data, pd.DataFrame):
        data.to_parquet(path)
    elif isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def test_durations_in_a_parquet_trace_are_read_as_ms(tmp_path):
    """One second was read as 1,000,000 ms (the duration's raw unit, microseconds)."""
    frame = pd.DataFrame({"arrival_ms": pd.to_timedelta([0, 1], unit="s"), "num_input_tokens": [100, 200]})
    assert read_trace(_written(tmp_path, "t.parquet", frame))["arrival_ms"].tolist() == [0.0, 1000.0]


def test_an_azure_trace_reads_its_times_in_one_format(tmp_path):
    """12/11 was read month first and 13/11 day first: 28 days apart, in reverse order. 13/11 settles the order
    (day first) for the whole column; a later value in the other order is refused."""
    header = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    mixed = _written(tmp_path, "a.csv", header + "12/11/2023 10:00:00,100,1\n13/11/2023 10:00:00,200,1\n")
    assert read_trace(mixed)["arrival_ms"].tolist() == [0.0, 86_400_000.0]
    other = _written(tmp_path, "a2.csv", header + "13/11/2023 10:00:00,100,1\n11/13/2023 10:00:00,200,1\n")
    with pytest.raises(
        InputError,
        match=r"a2.csv, line 3, column 'TIMESTAMP': '11/13/2023 10:00:00' is not a time written as line 2's "
        r"\('13/11/2023 10:00:00', day first\)",
    ):
        read_trace(other)
    iso = _written(tmp_path, "b.csv", header + "2023-11-16 18:15:46.6805900,100,1\n2023-11-16 18:15:47,200,1\n")
    assert read_trace(iso)["arrival_ms"].tolist() == pytest.approx([0.0, 319.41])  # (ISO 8601 at any precision)
    numbers = _written(tmp_path, "c.csv", header + "1700000000.5,100,1\n1700000001.5,200,1\n")
    with pytest.raises(InputError, match="column 'TIMESTAMP': holds numbers, but an Azure trace's are datetimes"):
        read_trace(numbers)  # (were read as ms)


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("b.jsonl", '{"arrival_ms": 0, "num_input_tokens": true}\n{"arrival_ms": 1, "num_input_tokens": 5}\n',
         "column 'num_input_tokens': holds booleans, not token counts"),
        ("b.parquet", pd.DataFrame({"arrival_ms": [0, 1], "num_input_tokens": [True, False]}),
         "column 'num_input_tokens': holds booleans"),
        ("t.parquet", pd.DataFrame({"arrival_ms": [True, False], "num_input_tokens": [1, 2]}),
         "column 'arrival_ms': holds booleans, not times"),
        ("t.jsonl.gz", gzip.compress(b'{"timestamp": 1, "input_length": 100, "output_length": 1}\n' * 999)[:-4],
         r"t.jsonl.gz: could not be read \(.*\). Fix: check that the file is complete"),
        ("bad.parquet", b"garbage" * 10, "bad.parquet: could not be read"),
    ],
)  # fmt: skip
def test_a_trace_reader_refuses_what_it_would_misread(tmp_path, name, data, words):
    with pytest.raises(InputError, match=words):
        read_trace(_written(tmp_path, name, data))


def test_a_folder_is_no_trace_and_a_mapped_column_is_named(tmp_path):
    with pytest.raises(IsADirectoryError, match="a folder, not a trace file"):
        read_trace(tmp_path)
    path = _written(tmp_path, "t.csv", "arrival_ms,num_input_tokens\n0,100\n5,200\n")
    with pytest.raises(InputError, match=r"no column arrival_ms='ts'; the file has \['arrival_ms'"):
        read_trace(path, columns={"arrival_ms": "ts"})  # (was "no column for ['arrival_ms']", which it has)


def test_the_command_refuses_a_budget_without_a_grid(tmp_path, capsys):
    from perfmodel.cli import main

    path = _written(tmp_path, "t.csv", "arrival_ms,num_input_tokens\n0,100\n5,200\n")
    args = ["trace", str(path), "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", str(tmp_path / "o")]
    assert main([*args, "--budget-ms", "5"]) == 2  # (was ignored: no budget anywhere in the output)
    assert "--budget-ms reports on the configurations of --grid" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
