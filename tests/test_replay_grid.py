"""Replay grids: equal to the one-by-one loop, deterministic across threads, on Dask, from the command line."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import InputError, replay_grid, replay_handoffs, summarize, synthetic_trace
from perfmodel.replay import GRID_AXES

TRACE = synthetic_trace(3000, rate_per_s=60, seed=11)
AXES = dict(
    model="llama-3.1-70b",
    link=["ib-ndr", "4x ib-ndr"],
    decode_workers=[1, 4],
    decode_cache_blocks=[200, None],
    mode="destination_missing",
    contention=["fifo", "fair"],
)


def _one_by_one(trace, axes):
    names = [n for n in GRID_AXES if n in axes]
    rows = []
    for combination in itertools.product(*(axes[n] if isinstance(axes[n], list) else [axes[n]] for n in names)):
        config = dict(zip(names, combination))
        replay = replay_handoffs(trace, **config)
        stats = summarize(replay)
        stats["zero_delay_share"] = float(np.mean(replay["handoff_delay_ms"] == 0))
        rows.append({**config, **stats})
    return pd.DataFrame(rows)


def test_grid_equals_the_one_by_one_loop():
    grid = replay_grid(TRACE, progress=False, **AXES)
    expected = _one_by_one(TRACE, AXES)
    assert len(grid) == 2 * 2 * 2 * 2
    for column in expected.columns:
        got, want = grid[column].astype(object).tolist(), expected[column].astype(object).tolist()
        if column in ("model", "link", "mode", "contention"):
            assert got == want, column
        else:
            np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(want, dtype=float), err_msg=column)


def test_summary_columns_and_types():
    grid = replay_grid(TRACE, progress=False, **AXES)
    assert list(grid.columns) == [
        "model",
        "link",
        "mode",
        "contention",
        "decode_workers",
        "decode_cache_blocks",
        "handoffs",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "mean_ms",
        "max_ms",
        "mean_queue_ms",
        "link_utilisation",
        "bytes_moved",
        "bytes_saved_by_prefix_reuse",
        "zero_delay_share",
    ]
    assert isinstance(grid["link"].dtype, pd.CategoricalDtype) and list(grid["link"].cat.categories) == [
        "ib-ndr",
        "4x ib-ndr",
    ]
    assert (grid["p99_ms"] >= grid["p90_ms"]).all() and (grid["p90_ms"] >= grid["p50_ms"]).all()
    faster = grid.groupby("link", observed=True)["p99_ms"].max()
    assert faster["4x ib-ndr"] < faster["ib-ndr"]


def test_deterministic_across_thread_counts():
    one = replay_grid(TRACE, num_threads=1, progress=False, **AXES)
    pd.testing.assert_frame_equal(one, replay_grid(TRACE, num_threads=2, progress=False, **AXES))
    pd.testing.assert_frame_equal(one, replay_grid(TRACE, num_threads=7, progress=False, **AXES))


def test_keep_requests_gives_every_replay_in_long_format():
    summary, requests = replay_grid(
        TRACE.head(300),
        keep="requests",
        progress=False,
        model="llama-3.1-8b",
        link="ib-ndr",
        decode_workers=[1, 2],
        contention="fifo",
    )
    assert len(requests) == 2 * 300 and list(requests.columns[:5]) == [
        "model",
        "link",
        "contention",
        "decode_workers",
        "request",
    ]
    for workers, part in requests.groupby("decode_workers"):
        alone = replay_handoffs(TRACE.head(300), "ib-ndr", "llama-3.1-8b", decode_workers=workers, contention="fifo")
        np.testing.assert_array_equal(part["handoff_delay_ms"].to_numpy(), alone["handoff_delay_ms"].to_numpy())
    assert summary["p99_ms"].tolist() == requests.groupby("decode_workers")["handoff_delay_ms"].quantile(0.99).tolist()


@st.composite
def small_traces(draw):
    n = draw(st.integers(1, 12))
    ready = sorted(float(draw(st.integers(0, 50))) for _ in range(n))
    tokens = [draw(st.integers(0, 3000)) for _ in range(n)]
    hashes = [[draw(st.integers(0, 4)) for _ in range(-(-t // 512))] for t in tokens]
    trace = pd.DataFrame({"arrival_ms": ready, "num_input_tokens": tokens})
    trace["hash_ids"] = pd.Series(hashes, dtype=object)
    trace.attrs["hash_block_tokens"] = 512
    return trace


@settings(max_examples=40, deadline=None)
@given(
    trace=small_traces(),
    workers=st.lists(st.integers(1, 3), min_size=1, max_size=2, unique=True),
    capacity=st.sampled_from([None, 1, 4]),
    contention=st.sampled_from(["none", "fifo", "fair"]),
    links=st.lists(st.integers(1, 2), min_size=1, max_size=2, unique=True),
)
def test_grid_equals_loop_on_hostile_small_traces(trace, workers, capacity, contention, links):
    axes = dict(
        kv_bytes_per_token=1000,
        kv_transfer_bandwidth=[0.001, 0.01],
        decode_workers=workers,
        decode_cache_blocks=capacity,
        contention=contention,
        links=links,
        mode="destination_missing",
    )
    grid = replay_grid(trace, num_threads=2, progress=False, **axes)
    expected = _one_by_one(trace, axes)
    for column in ("p50_ms", "p99_ms", "mean_ms", "max_ms", "bytes_moved", "bytes_saved_by_prefix_reuse"):
        np.testing.assert_array_equal(grid[column].to_numpy(float), expected[column].to_numpy(float), err_msg=column)


def test_errors_come_before_any_work():
    with pytest.raises(InputError, match=r"unknown axis \['workers'\]"):
        replay_grid(TRACE, model="llama-3.1-8b", link="ib-ndr", workers=[1, 2])
    with pytest.raises(InputError, match="unknown link 'warp'"):
        replay_grid(TRACE, model="llama-3.1-8b", link=["warp", "ib-ndr"])
    with pytest.raises(InputError, match="axis decode_workers is empty"):
        replay_grid(TRACE, model="llama-3.1-8b", link="ib-ndr", decode_workers=[])


def test_interrupt_returns_nothing(monkeypatch):
    import perfmodel.replay as replay_module  # (its one configuration's step: no public hook runs per configuration)

    calls = []
    real = replay_module.grid_row

    def interrupted(prepared, config, **kw):
        calls.append(config)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(prepared, config, **kw)

    monkeypatch.setattr(replay_module, "grid_row", interrupted)
    with pytest.raises(KeyboardInterrupt):
        replay_grid(TRACE, num_threads=1, progress=False, **AXES)
    assert len(calls) < 16  # the rest were cancelled


@pytest.mark.exhaustive  # (a Dask cluster)
def test_dask_grid_equals_the_in_process_grid():
    pytest.importorskip("distributed")
    import perfmodel.dask

    axes = dict(model="llama-3.1-8b", link=["ib-ndr", "nvlink4"], decode_workers=[1, 2], contention="fifo")
    local = replay_grid(TRACE, progress=False, **axes)
    distributed_grid = perfmodel.dask.replay_grid(TRACE, workers=2, **axes)
    pd.testing.assert_frame_equal(distributed_grid, local)
    assert distributed_grid.attrs["question"] == local.attrs["question"] and "queued" in local.attrs["question"]
    ready = TRACE["arrival_ms"].to_numpy() + 5.0 * (np.arange(len(TRACE)) % 3)  # (the in-process grid takes it)
    local = replay_grid(TRACE, progress=False, ready_ms=ready, **axes)
    pd.testing.assert_frame_equal(perfmodel.dask.replay_grid(TRACE, workers=2, ready_ms=ready, **axes), local)


def test_cli_grid(tmp_path):
    path = tmp_path / "trace.jsonl"
    with open(path, "w") as handle:
        for row in TRACE.head(1500).itertuples():
            handle.write(
                f'{{"timestamp": {row.arrival_ms}, "input_length": {row.num_input_tokens}, '
                f'"output_length": 1, "hash_ids": {[int(h) for h in row.hash_ids]}}}\n'
            )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "trace",
            str(path),
            "--model",
            "llama-3.1-70b",
            "--mode",
            "destination_missing",
            "--contention",
            "fifo",
            "--grid",
            "decode_workers=1,4",
            "--grid",
            "link=ib-ndr,8x ib-ndr",
            "--budget-ms",
            "20",
            "200",
            "--out",
            str(tmp_path / "g"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    grid = pd.read_csv(tmp_path / "g" / "grid.csv")
    assert len(grid) == 4 and set(grid["link"]) == {"ib-ndr", "8x ib-ndr"}
    assert "p99 within 20 ms" in done.stdout and "p99 within 200 ms" in done.stdout
    # the smallest configuration first, by the axes' own order: never the faster link first by its p99
    listed = done.stdout.split("p99 within 200 ms")[1].splitlines()[2:6]
    meeting = grid[grid["p99_ms"] <= 200]
    expected = [
        (w, link)
        for w in (1, 4)
        for link in ("ib-ndr", "8x ib-ndr")
        if ((meeting["decode_workers"] == w) & (meeting["link"] == link)).any()
    ]
    assert [(int(line.split()[0]), " ".join(line.split()[1:-5])) for line in listed[: len(expected)]] == expected, (
        listed
    )
    assert (tmp_path / "g" / "grid.png").stat().st_size > 10_000
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "trace",
            str(path),
            "--model",
            "llama-3.1-70b",
            "--grid",
            "workers=1,4",
            "--link",
            "ib-ndr",
            "--out",
            str(tmp_path / "h"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "did you mean decode_workers" in done.stderr
