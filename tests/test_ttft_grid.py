"""TTFT grids and sizing questions: the grid is the one-by-one loop, rates scale arrivals, the answers keep
their budget and the next step does not."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.replay.cluster import with_cluster
from perfmodel.replay.ttft_grid import trace_rate_per_s

LINK = dict(link="ib-ndr", model="llama-3.1-8b")


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    frame = pm.synthetic_trace(1500, 20, seed=2)
    frame["num_output_tokens"] = 50
    return frame


def test_the_grid_is_the_one_by_one_loop(trace):
    grid = pm.ttft_grid(
        trace,
        **LINK,
        prefill_tokens_per_s=[60_000, 90_000],
        prefill_workers=[1, 2],
        request_rate_per_s=[10, 20],
        contention="fifo",
        decode_step_ms=5.0,
        num_threads=2,
        progress=False,
    )
    assert len(grid) == 8
    assert grid[["prefill_tokens_per_s", "prefill_workers", "request_rate_per_s"]].iloc[1].tolist() == [60_000, 1, 20]
    for _, row in grid.iterrows():
        arrivals = trace["arrival_ms"].to_numpy()
        scaled = trace.assign(
            arrival_ms=arrivals[0] + (arrivals - arrivals[0]) * trace_rate_per_s(trace) / row["request_rate_per_s"]
        )
        one = pm.summarize_ttft(
            pm.replay_ttft(
                scaled,
                **LINK,
                prefill_tokens_per_s=row["prefill_tokens_per_s"],
                prefill_workers=int(row["prefill_workers"]),
                contention="fifo",
                decode_step_ms=5.0,
            )
        )
        for key in ("p50_ms", "p99_ms", "queue_p99_ms", "prefill_busy"):
            assert row[key] == pytest.approx(one[key], rel=1e-12), key


def test_a_faster_rate_is_a_trace_squeezed_in_time(trace):
    grid = pm.ttft_grid(trace, **LINK, request_rate_per_s=[5.0, 40.0], progress=False)
    assert grid["span_ms"].iloc[0] == pytest.approx(8 * grid["span_ms"].iloc[1], rel=0.02)
    with pytest.raises(InputError, match="request_rate_per_s"):
        pm.ttft_grid(trace, **LINK, request_rate_per_s=[0.0], progress=False)
    with pytest.raises(InputError, match="unknown axis"):
        pm.ttft_grid(trace, **LINK, prefil_workers=[1, 2], progress=False)


def test_a_bad_value_fails_before_any_replay(trace):
    with pytest.raises(InputError, match="prefill_workers"):
        pm.ttft_grid(trace, **LINK, prefill_workers=[1, 0], progress=False)


def test_the_highest_rate_keeps_the_budget_and_one_step_more_does_not(trace):
    kw = dict(**LINK, prefill_tokens_per_s=80_000, prefill_workers=2)
    rate = pm.max_rate_for_ttft(trace, ttft_budget_ms=400.0, relative_tolerance=0.01, **kw)
    p99 = {
        r: pm.ttft_grid(trace, **kw, request_rate_per_s=r, progress=False)["p99_ms"].iloc[0]
        for r in (rate, rate * 1.02)
    }
    assert p99[rate] <= 400.0 < p99[rate * 1.02]
    with pytest.raises(InputError, match="concurrency"):
        pm.max_rate_for_ttft(trace, ttft_budget_ms=400.0, concurrency=4, **kw)
    with pytest.raises(InputError, match="ttft_budget_ms"):
        pm.max_rate_for_ttft(trace, ttft_budget_ms=-1, **kw)


def test_the_fewest_workers_keep_the_budget_and_one_fewer_does_not(trace):
    kw = dict(**LINK, prefill_tokens_per_s=30_000)
    fewest = pm.fewest_for_ttft(trace, "prefill_workers", ttft_budget_ms=1000.0, **kw)
    p99 = {k: pm.summarize_ttft(pm.replay_ttft(trace, **kw, prefill_workers=k))["p99_ms"] for k in (fewest - 1, fewest)}
    assert p99[fewest] <= 1000.0 < p99[fewest - 1]
    assert pm.fewest_for_ttft(trace, "prefill_workers", ttft_budget_ms=1e-3, most=4, **kw) is None
    links = pm.fewest_for_ttft(
        trace, "links", ttft_budget_ms=1000.0, link=5.0, model="llama-3.1-8b", contention="fifo", most=64
    )
    assert links is not None and links > 1
    with pytest.raises(InputError, match="count_of"):
        pm.fewest_for_ttft(trace, "nics", ttft_budget_ms=50.0, **kw)


def test_memory_held_is_the_running_sum_of_holdings():
    from perfmodel.replay.ttft import memory_held

    # worker 0 holds 5 over [0, 10) and 5 over [5, 15): peak 10; worker 1 holds 8 over [0, 2)
    mean, peak = memory_held(
        np.array([0, 0, 1]),
        np.array([0.0, 5.0, 0.0]),
        np.array([10.0, 15.0, 2.0]),
        np.array([5, 5, 8]),
        capacity=10,
        workers=2,
        span=(0.0, 20.0),
    )
    assert peak == 1.0
    assert mean == pytest.approx((50 + 50 + 16) / (10 * 2 * 20))
    # a release and an acquisition at one instant: the release first (no false peak)
    _, peak = memory_held(
        np.array([0, 0]),
        np.array([0.0, 10.0]),
        np.array([10.0, 20.0]),
        np.array([10, 10]),
        capacity=10,
        workers=1,
        span=(0.0, 20.0),
    )
    assert peak == 1.0


CLUSTER = dict(
    link="hgx-h100-8x400g",
    model="llama-3.1-70b",
    tp=2,
    prefill_workers=8,
    decode_workers=2,
    contention="fair",
    prefill_tokens_per_s=60_000,
)


@pytest.fixture(scope="module")
def busy_trace() -> pd.DataFrame:
    return pm.synthetic_trace(1500, 60, seed=0)  # (88 GB/s of KV at 60 requests/s: more than one 400G NIC)


def test_a_grid_over_a_clusters_fields_is_the_one_by_one_loop(busy_trace):
    grid = pm.ttft_grid(busy_trace, **CLUSTER, nics_per_node=[1, 8], progress=False)
    assert grid["nics_per_node"].tolist() == [1, 8]
    for _, row in grid.iterrows():
        cluster = with_cluster({"link": CLUSTER["link"], "nics_per_node": int(row["nics_per_node"])})[
            "kv_transfer_bandwidth"
        ]
        one = pm.replay_ttft(busy_trace, cluster, **{k: v for k, v in CLUSTER.items() if k != "link"})
        assert row["p99_ms"] == pytest.approx(pm.summarize_ttft(one)["p99_ms"], rel=1e-12)
    assert grid["p99_ms"].iloc[0] > 10 * grid["p99_ms"].iloc[1]  # (one NIC per node: the handoffs queue for it)
    assert grid["dominant_p99_stage"].iloc[0] == "link_wait"


def test_the_fewest_nics_per_node_keep_the_budget_and_the_next_fewer_count_does_not(busy_trace):
    fewest = pm.fewest_for_ttft(busy_trace, "nics_per_node", ttft_budget_ms=2000.0, **CLUSTER)
    assert fewest in (2, 4, 8)  # (the counts an 8-GPU node takes)
    fewer = {4: 2, 8: 4, 2: 1}[fewest]
    p99 = {
        k: pm.ttft_grid(busy_trace, **CLUSTER, nics_per_node=k, progress=False)["p99_ms"].iloc[0]
        for k in (fewer, fewest)
    }
    assert p99[fewest] <= 2000.0 < p99[fewer]
    with pytest.raises(InputError, match="cluster"):
        pm.fewest_for_ttft(busy_trace, "nics_per_node", ttft_budget_ms=50.0, link="ib-ndr", model="llama-3.1-8b")


@pytest.mark.exhaustive  # (a Dask cluster)
def test_the_dask_ttft_grid_equals_the_in_process_grid(trace):
    pytest.importorskip("distributed")
    import perfmodel.dask

    axes = dict(**LINK, prefill_tokens_per_s=60_000, prefill_workers=[1, 2], request_rate_per_s=[10, 20])
    local = pm.ttft_grid(trace, progress=False, **axes)
    pd.testing.assert_frame_equal(perfmodel.dask.ttft_grid(trace, workers=2, progress=False, **axes), local)


@pytest.mark.parametrize(
    ("question", "given", "message"),
    [
        ("max_rate_for_ttft", dict(relative_tolerance=0), "relative_tolerance: 0 is not a tolerance"),
        ("max_rate_for_ttft", dict(relative_tolerance=float("nan")), "relative_tolerance: nan is not a tolerance"),
        ("max_rate_for_ttft", dict(percentile=float("nan")), "percentile: nan is not a percentile"),
        ("max_rate_for_ttft", dict(percentile=101), "percentile: 101 is not a percentile"),
        ("fewest_for_ttft", dict(percentile=float("nan")), "percentile: nan is not a percentile"),
        ("fewest_for_ttft", dict(percentile=True), "percentile: True is not a percentile"),
    ],
)
def test_a_sizing_question_refuses_a_tolerance_or_percentile_it_cannot_answer(question, given, message):
    """A tolerance of 0 could bisect forever; a NaN percentile failed inside numpy with a raw ValueError."""
    trace = pm.synthetic_trace(50, 10, seed=0)
    with pytest.raises(InputError, match=f"^{message}"):
        getattr(pm, question)(trace, ttft_budget_ms=500, link="ib-ndr", model="llama-3.1-8b", **given)


@pytest.mark.parametrize("question", ["max_rate_for_ttft", "fewest_for_ttft"])
def test_sizing_questions_refuse_a_keyword_they_would_ignore(question):
    trace = pm.synthetic_trace(50, rate_per_s=40, seed=0)
    ask = functools.partial(
        getattr(pm, question),
        trace,
        ttft_budget_ms=2000,
        link="ib-ndr",
        model="llama-3.1-8b",
        prefill_tokens_per_s=20_000,
    )
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['percent'\] \(did you mean 'percentile'\?\)"):
        ask(percent=50)  # (was ignored: the p99's answer for a p50 question)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]$"):
        ask(bogus=1)
    searched = "request_rate_per_s" if question == "max_rate_for_ttft" else "prefill_workers"
    with pytest.raises(InputError, match=f"{searched}: is what {question} searches"):
        ask(**{searched: 2})  # (fewest_for_ttft replaced the count given by the counts it tried)
