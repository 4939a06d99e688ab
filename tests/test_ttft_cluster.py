"""TTFT under load on a cluster: the serving loop of perfmodel.kernels.serving over the cluster's own network
(perfmodel.kernels.network). Checked against what is already checked: the degenerate case is replay_handoffs
on the cluster bit for bit, a cluster of one NIC each side is its link (whose TTFT is compared with the
plain-Python simulation of tests/reference_ttft.py), and the network's part of a loaded run is the cluster's
replay from each admission (whose flows are compared with tests/reference_cluster_replay.py)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.replay.cluster import resource_table

RAILS = pm.Cluster(nic="ib-ndr", nics_per_node=2, gpus_per_node=4, name="two NICs per node")
HANDOFF_COLUMNS = ("decode_worker", "cached_tokens", "charged_tokens", "transfer_bytes", "transfer_ms", "flows")


def _trace(arrival, tokens, outputs=None, **columns):
    frame = pd.DataFrame({"arrival_ms": np.asarray(arrival, dtype=float), "num_input_tokens": tokens, **columns})
    if outputs is not None:
        frame["num_output_tokens"] = outputs
    return frame


@pytest.mark.parametrize("routing", ["prefix", "round_robin", "least_loaded", "topology"])
@pytest.mark.parametrize("contention", ["none", "fair"])
def test_degenerate_case_on_a_cluster_is_replay_handoffs_bit_for_bit(contention, routing):
    trace = pm.synthetic_trace(1500, rate_per_s=200, seed=7)
    kw = dict(
        contention=contention,
        routing=routing,
        decode_workers=3,
        prefill_workers=2,
        tp=2,
        mode="destination_missing",
        decode_cache_blocks=400,
        block_size=64,
        latency_ms=0.05,
        per_block_ms=0.001,
    )
    replay = pm.replay_handoffs(trace, RAILS, "llama-3.1-70b", **kw)
    ttft = pm.replay_ttft(trace, RAILS, "llama-3.1-70b", **kw)
    assert (ttft["handoff_delay_ms"].to_numpy() == replay["handoff_delay_ms"].to_numpy()).all()
    assert (ttft["ttft_ms"] == ttft["handoff_delay_ms"]).all()
    for column in HANDOFF_COLUMNS + ("prefill_worker",):
        assert (ttft[column].to_numpy() == replay[column].to_numpy()).all(), column
    assert ttft["bottleneck"].equals(replay["bottleneck"])
    assert (ttft["transfer_end_ms"].to_numpy() == replay["end_ms"].to_numpy()).all()
    assert ttft.attrs["resources"] == replay.attrs["resources"]
    assert ttft.attrs["utilisation"] == replay.attrs["utilisation"]
    assert resource_table(ttft).equals(resource_table(replay))


@st.composite
def one_nic_cases(draw):
    n = draw(st.integers(1, 12))
    contention = draw(st.sampled_from(["none", "fair"]))
    alone = contention == "none"  # (alone, every pair of workers is the one link; shared, only one pair is)
    return dict(
        arrival=draw(st.lists(st.sampled_from([0.0, 0.0, 2.5, 5.0, 40.0]), min_size=n, max_size=n)),
        tokens=draw(st.lists(st.sampled_from([0, 1, 500, 512, 513, 1500, 3000]), min_size=n, max_size=n)),
        outputs=draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
        shared=draw(st.booleans()),
        contention=contention,
        prefill_workers=draw(st.integers(1, 3)) if alone else 1,
        decode_workers=draw(st.integers(1, 3)) if alone else 1,
        routing=draw(st.sampled_from(["prefix", "round_robin"])),
        prefill_routing=draw(st.sampled_from(["round_robin", "least_loaded"])),
        prefill_tokens_per_s=draw(st.sampled_from([None, 20_000.0])),
        prefill_kv_tokens=draw(st.sampled_from([None, 3000, 4500])),
        decode_kv_tokens=draw(st.sampled_from([None, 3005, 6000])),
        decode_step_ms=draw(st.sampled_from([0.0, 2.5])),
        concurrency=draw(st.sampled_from([None, None, 1, 2])),
        latency_ms=draw(st.sampled_from([0.0, 1.5])),
        per_block_ms=draw(st.sampled_from([0.0, 0.25])),
        mode=draw(st.sampled_from(["full_prompt", "destination_missing"])),
    )


@settings(max_examples=150, deadline=None)
@given(case=one_nic_cases())
def test_a_cluster_of_one_nic_each_side_is_its_link(case):
    link = pm.Link(bandwidth_gb_s=1.0, name="one GB/s")
    cluster = pm.Cluster(nic=link, nics_per_node=1, gpus_per_node=1)
    tokens = case.pop("tokens")
    trace = _trace(case.pop("arrival"), tokens, case.pop("outputs"))
    if case.pop("shared"):
        trace["hash_ids"] = [[1, 2, 3, 4, 5, 6][: -(-t // 512)] for t in tokens]
    kw = dict(case, block_size=512)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the closed loop says that it ignores arrival times)
        on_link = pm.replay_ttft(trace, link, 1e6, **kw)
        on_cluster = pm.replay_ttft(trace, cluster, 1e6, **kw)
    for column in on_link.columns.drop(["link"]):
        a, b = on_link[column].to_numpy(dtype=float), on_cluster[column].to_numpy(dtype=float)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-9, err_msg=column)


@pytest.mark.parametrize("decode_kv_tokens", [None, 60_000])
def test_the_network_of_a_loaded_run_is_the_cluster_replay_from_each_admission(decode_kv_tokens):
    # a burst of 400 requests at 0 (more flows at once than the kernel's first pool holds: admissions wait for
    # it to grow), then a stream; one decode worker, so that routing at the prefill end and at admission agree
    rng = np.random.default_rng(3)
    n = 900
    arrival = np.r_[np.zeros(400), np.sort(rng.uniform(0, 4000, n - 400))]
    trace = _trace(arrival, rng.integers(100, 8000, n), rng.integers(1, 400, n))
    kw = dict(contention="fair", tp=2, decode_workers=1, prefill_workers=2, routing="round_robin", latency_ms=0.02)
    ttft = pm.replay_ttft(
        trace,
        RAILS,
        "llama-3.1-8b",
        prefill_tokens_per_s=400_000,
        decode_step_ms=1.0,
        decode_kv_tokens=decode_kv_tokens,
        **kw,
    )
    replay = pm.replay_handoffs(trace, RAILS, "llama-3.1-8b", ready_ms=ttft["admitted_ms"].to_numpy(), **kw)
    np.testing.assert_allclose(ttft["transfer_end_ms"], replay["end_ms"], rtol=1e-12)
    np.testing.assert_allclose(
        ttft["link_wait_ms"] + ttft["transfer_ms"], replay["handoff_delay_ms"], rtol=1e-9, atol=1e-9
    )
    for column in HANDOFF_COLUMNS:
        assert (ttft[column].to_numpy() == replay[column].to_numpy()).all(), column
    parts = ttft["queue_ms"] + ttft["prefill_ms"] + ttft["handoff_delay_ms"] + ttft["decode_step_ms"]
    assert (ttft["ttft_ms"] == parts).all()
    if decode_kv_tokens is None:
        assert (ttft["admitted_ms"] == ttft["prefill_end_ms"]).all()
        return
    # admission: first come first served at the decode worker, each admitted when it fits and not before
    assert (ttft["admission_wait_ms"] > 0).sum() > 100
    by_end = ttft.sort_values(["prefill_end_ms"], kind="stable")
    assert by_end["admitted_ms"].is_monotonic_increasing
    need = (ttft["num_input_tokens"] + ttft["num_output_tokens"]).to_numpy()
    admitted, done = ttft["admitted_ms"].to_numpy(), ttft["done_ms"].to_numpy()
    ahead = dict(zip(by_end.index[1:], by_end.index[:-1]))  # (the request before each in the queue)
    for r in np.flatnonzero(ttft["admission_wait_ms"].to_numpy() > 0)[::10]:
        held = need[(admitted <= admitted[r]) & (done > admitted[r])].sum()  # (r itself included)
        assert held <= decode_kv_tokens
        just_before = admitted[r] - 1e-9 * max(1.0, admitted[r])
        held_before = need[(admitted < admitted[r]) & (done > just_before)].sum()
        # it waited because it did not fit, or behind one that did not (first come first served)
        assert held_before + need[r] > decode_kv_tokens or admitted[ahead[r]] == admitted[r]


def test_a_loaded_cluster_reports_its_resources_and_the_tail_it_dominates():
    trace = pm.synthetic_trace(2000, rate_per_s=80, seed=2)
    ttft = pm.replay_ttft(
        trace,
        "hgx-h100-8x400g",
        "llama-3.1-70b",
        contention="fair",
        tp=2,
        prefill_workers=4,
        decode_workers=2,
        prefill_tokens_per_s=60_000,
        decode_step_ms=20.0,
        routing="topology",
    )
    assert ttft.attrs["cluster"] == "hgx-h100-8x400g" and ttft.attrs["links"] == 1
    table = resource_table(ttft)
    assert math.isclose(table["bottleneck_share"].sum(), 1.0) and (table["peak_utilisation"] <= 1 + 1e-9).all()
    summary = pm.summarize_ttft(ttft)
    assert summary["dominant_p99_stage"] == "queue" and summary["p99_ms"] > 1000  # (1.2x the prefills' capacity)
    assert (ttft["link_wait_ms"] >= 0).all() and (ttft["bottleneck"].notna() == (ttft["flows"] > 0)).all()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(contention="fifo"), "identical links"),
        (dict(contention="fair", links=2), "drop links"),
        (dict(scope="group"), "scope does not apply"),
        (dict(kv_bytes_per_token=1e6, tp=2), "tp=2 needs the model's config"),
    ],
)
def test_what_a_cluster_decides_is_refused_naming_it(kw, match):
    kw = {"kv_bytes_per_token": "llama-3.1-8b", **kw}
    with pytest.raises(InputError, match=match):
        pm.replay_ttft(_trace([0.0], [5]), "hgx-h100-8x400g", **kw)


@pytest.mark.parametrize(
    ("kw", "named", "fix"),
    [
        (dict(kv_cache_dtype="fp8"), "kv_cache_dtype='fp8' needs", "or leave out kv_cache_dtype for"),
        (dict(tp=2), "tp=2 needs", "or leave out tp, decode_tp for"),  # (decode_tp is tp's unless given)
        (dict(tp=2, decode_tp=2), "tp=2 needs", "or leave out tp, decode_tp for"),
        (dict(tp=2, decode_tp=1), "tp=2 needs", "or leave out tp for"),
        (dict(decode_tp=2), "decode_tp=2 needs", "or leave out decode_tp for"),
        (
            dict(tp=2, kv_cache_dtype="fp8"),
            "tp=2 and kv_cache_dtype='fp8' need",
            "leave out tp, decode_tp, kv_cache_dtype",
        ),
    ],
)
@pytest.mark.parametrize("surface", ["replay_handoffs", "replay_ttft", "handoff_delay_ms"])
def test_bytes_as_a_number_on_a_cluster_name_the_option_that_needs_a_model(kw, named, fix, surface):
    """Bytes per token as a number on a cluster: the error names the options that need the model's config (it said
    "or tp=1" to a call with tp=1 and kv_cache_dtype='fp8', which then failed again)."""
    cluster = pm.Cluster(nic="roce-400g", nics_per_node=2, gpus_per_node=2)
    calls = {
        "replay_handoffs": lambda: pm.replay_handoffs(_trace([0.0], [5]), cluster, 1000.0, contention="fair", **kw),
        "replay_ttft": lambda: pm.replay_ttft(_trace([0.0], [5]), cluster, 1000.0, **kw),
        "handoff_delay_ms": lambda: pm.handoff_delay_ms(1000, cluster, 1000.0, **kw),
    }
    with pytest.raises(InputError, match=r"kv_bytes_per_token: ") as error:
        calls[surface]()
    assert named in str(error.value) and fix in str(error.value), str(error.value)
    assert "or tp=1" not in str(error.value)


@pytest.mark.parametrize("routing", ["least_loaded", "topology"])
def test_routing_that_needs_a_cluster_says_so_on_a_link(routing):
    with pytest.raises(InputError, match="needs a cluster"):
        pm.replay_ttft(_trace([0.0], [5]), 1.0, 1e6, routing=routing)


def test_a_trace_s_prefill_worker_column_places_the_prefills_as_the_replay_reads_it():
    trace = _trace([0.0, 0.0], [1000, 1000], prefill_worker=[0, 0])
    kw = dict(
        model="llama-3.1-70b", tp=8, contention="fair", prefill_workers=2, decode_workers=2, routing="round_robin"
    )
    replay = pm.replay_handoffs(trace, "hgx-h100-8x400g", **kw)
    ttft = pm.replay_ttft(trace, "hgx-h100-8x400g", **kw)
    assert ttft["prefill_worker"].tolist() == [0, 0] == replay["prefill_worker"].tolist()
    assert (ttft["handoff_delay_ms"].to_numpy() == replay["handoff_delay_ms"].to_numpy()).all()
    assert ttft.attrs["prefill_routing"] == "prefill_worker"
    spread = pm.replay_ttft(trace, "hgx-h100-8x400g", prefill_routing="round_robin", **kw)  # (asked: the column aside)
    assert spread["prefill_worker"].tolist() == [0, 1]


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(prefill_tokens_per_s=np.nan), "prefill_tokens_per_s"),
        (dict(prefill_tokens_per_s=[1e4, np.nan]), "prefill_tokens_per_s"),
        (dict(prefill_ms=1e308), "beyond what a time can hold"),
        (dict(decode_step_ms=1e308), "beyond what a time can hold"),
    ],
)
def test_service_times_that_no_run_can_finish_are_refused_up_front(kw, match):
    for network in (50.0, "hgx-h100-8x400g"):
        with pytest.raises(InputError, match=match):
            pm.replay_ttft(_trace([0.0, 1.0], [1000, 2000]), network, "llama-3.1-8b", **kw)


def test_the_sizing_questions_refuse_what_they_cannot_answer():
    empty = _trace([], [], [])
    cluster = dict(link="hgx-h100-8x400g", model="llama-3.1-70b", tp=8)
    with pytest.raises(InputError, match="no requests"):
        pm.ttft_grid(empty, request_rate_per_s=[10], **cluster, progress=False)
    with pytest.raises(InputError, match="no requests"):
        pm.fewest_for_ttft(empty, "nics_per_node", ttft_budget_ms=100, **cluster)
    trace = pm.synthetic_trace(50, 20, seed=1)
    with pytest.raises(InputError, match="nics_per_node"):
        pm.fewest_for_ttft(trace, "links", ttft_budget_ms=600, **cluster)
    trace["num_output_tokens"] = 10
    with pytest.raises(InputError, match="closed loop"):
        pm.ttft_grid(trace, request_rate_per_s=[10, 100], concurrency=4, **cluster, progress=False)


def test_a_closed_loop_on_a_cluster_bins_its_utilisation_too():
    trace = pm.synthetic_trace(300, 200, seed=14)
    ttft = pm.replay_ttft(
        trace,
        "hgx-h100-8x400g",
        model="llama-3.1-70b",
        tp=8,
        contention="fair",
        concurrency=8,
        decode_step_ms=1.0,
        prefill_tokens_per_s=50_000,
    )
    found = ttft.attrs["utilisation"]
    assert found is not None and found["start_ms"] == 0.0
    series = np.array(next(iter(found["series"].values())))
    assert 0 < series.max() <= 1 + 1e-9
    # the bins' integral is the load's (busy GB x ms over the resource's capacity)
    busiest = max(found["series"], key=lambda name: ttft.attrs["resources"][name]["busy_gb_ms"])
    resource = ttft.attrs["resources"][busiest]
    integral = np.sum(found["series"][busiest]) * found["bin_ms"] * resource["capacity_gb_s"]
    assert integral == pytest.approx(resource["busy_gb_ms"], rel=1e-9)


def test_a_column_of_one_model_on_a_cluster_is_that_model():
    trace = pm.synthetic_trace(200, 50, seed=4)
    one = pm.replay_ttft(trace.assign(kvb=327_680.0), "hgx-h100-8x400g", "kvb", contention="fair")
    assert one.equals(pm.replay_ttft(trace, "hgx-h100-8x400g", 327_680.0, contention="fair"))
    named = pm.replay_handoffs(trace.assign(m="llama-3.1-8b"), "hgx-h100-8x400g", "m", contention="fair")
    assert named.equals(pm.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-8b", contention="fair"))
    mixed = trace.assign(m=["llama-3.1-8b", "llama-3.1-70b"] * 100)
    with pytest.raises(InputError, match=r"mixes models \(2 models"):
        pm.replay_ttft(mixed, "hgx-h100-8x400g", "m")
