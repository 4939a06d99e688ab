"""Replay on a cluster (SEMANTICS.md "Replay on a cluster"): the contract's incast example exactly, the
degenerate cluster against today's fair replay, every request against the plain-Python event simulation
(tests/reference_cluster_replay.py) over small random clusters and traces, and hostile inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import Cluster, InputError, Link, replay_handoffs

from . import reference_cluster_replay as ref
from .test_clusters import as_reference, clusters

LLAMA_70B = "llama-3.1-70b"
TOKENS = 32_768


def hgx(nics=8):
    return Cluster(nic=Link("nic50", 50.0), nics_per_node=nics, gpus_per_node=8)


def within_prompts(rows, block=16):
    """Drawn rows (arrival, tokens, hash ids, ...) with each request's ids cut to its prompt's blocks of ``block``
    tokens (the last one partial), as a trace holds them (more ids than blocks are refused)."""
    return [(r[0], r[1], list(r[2])[: -(-r[1] // block)], *r[3:]) for r in rows]


def trace_of(arrivals, tokens, hash_ids=None, block=16):
    frame = pd.DataFrame(
        {"arrival_ms": np.asarray(arrivals, dtype=float), "num_input_tokens": np.asarray(tokens, dtype=np.int64)}
    )
    if hash_ids is not None:
        frame["hash_ids"] = pd.Series(list(hash_ids), dtype=object)
    frame.attrs["hash_block_tokens"] = block
    return frame


# --- the contract's worked example --------------------------------------------------------------


def test_incast_four_prefill_nodes_onto_one_decode_worker():
    trace = trace_of([0.0] * 4, [TOKENS] * 4)
    got = replay_handoffs(trace, hgx(), LLAMA_70B, tp=8, prefill_workers=4, decode_workers=1, contention="fair")
    assert got["handoff_delay_ms"].tolist() == pytest.approx([107.3741824] * 4, rel=1e-15)
    assert got["prefill_worker"].tolist() == [0, 1, 2, 3]
    assert (got["flows"] == 8).all()
    assert set(got["bottleneck"].astype(str)) <= {f"node4/nic{k}/in" for k in range(8)}
    summary = perfmodel.summarize(got)
    assert summary["util_peak:node4/nic0/in"] == pytest.approx(1.0, rel=1e-12)
    assert summary["util_peak:node0/nic0/out"] == pytest.approx(0.25, rel=1e-12)


def test_incast_spread_over_four_decode_workers():
    trace = trace_of([0.0] * 4, [TOKENS] * 4)
    got = replay_handoffs(
        trace, hgx(), LLAMA_70B, tp=8, prefill_workers=4, decode_workers=4, contention="fair", routing="round_robin"
    )
    assert got["handoff_delay_ms"].tolist() == pytest.approx([26.8435456] * 4, rel=1e-15)
    assert got["decode_worker"].tolist() == [0, 1, 2, 3]


def test_contention_none_is_each_handoff_alone():
    trace = trace_of([0.0] * 4, [TOKENS] * 4)
    got = replay_handoffs(trace, hgx(), LLAMA_70B, tp=8, prefill_workers=4, contention="none")
    assert got["handoff_delay_ms"].tolist() == pytest.approx([26.8435456] * 4, rel=1e-15)
    assert (got["transfer_ms"] == got["handoff_delay_ms"]).all()


def test_least_loaded_and_topology_spread_the_incast():
    trace = trace_of([0.0] * 4, [TOKENS] * 4)
    for routing in ("least_loaded", "topology"):
        got = replay_handoffs(
            trace, hgx(), LLAMA_70B, tp=8, prefill_workers=4, decode_workers=4, contention="fair", routing=routing
        )
        assert got["decode_worker"].tolist() == [0, 1, 2, 3], routing
        assert got["handoff_delay_ms"].tolist() == pytest.approx([26.8435456] * 4, rel=1e-15)


def test_topology_prefers_the_nvlink_domain():
    nvl = Cluster(nic=Link("nic50", 50.0), nics_per_node=4, gpus_per_node=4, nvlink_domain=8, nvlink=Link("nv", 900.0))
    # prefill worker 0 on GPUs 0-3 (node 0); decode workers on nodes 1 (same NVLink domain) and 2
    trace = trace_of([0.0, 100.0], [1000, 1000])
    got = replay_handoffs(
        trace, nvl, LLAMA_70B, tp=4, prefill_workers=1, decode_workers=2, contention="fair", routing="topology"
    )
    assert got["decode_worker"].tolist() == [0, 0]
    blind = replay_handoffs(
        trace, nvl, LLAMA_70B, tp=4, prefill_workers=1, decode_workers=2, contention="fair", routing="round_robin"
    )
    assert blind["decode_worker"].tolist() == [0, 1]
    assert got["handoff_delay_ms"].iloc[1] < blind["handoff_delay_ms"].iloc[1]


# --- the degenerate case: today's fair replay on one link ---------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 20), st.integers(0, 3000), st.lists(st.integers(0, 6), max_size=6)),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from(["full_prompt", "destination_missing"]),
    st.sampled_from([0.0, 0.05]),
    st.sampled_from([0.0]),
    st.sampled_from([None, 0, 3]),
)
def test_one_gpu_each_with_one_nic_is_todays_fair_replay_on_it(rows, mode, latency, per_block, capacity):
    """Equal fixed costs only: today's fair replay starts data phases in processing order (a transfer with
    a shorter per-block setup waits for an earlier one's data start; tests/reference_replay.py does the
    same), while a flow on a cluster starts moving when its own fixed costs are paid."""
    rows = within_prompts(rows)
    trace = trace_of([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], block=16)
    nic = Link("nic", 12.5, latency_ms=latency)
    cluster = Cluster(nic=nic, nics_per_node=1, gpus_per_node=1)
    keywords = dict(
        mode=mode,
        block_size=16,
        decode_cache_blocks=capacity,
        per_block_ms=per_block,
        contention="fair",
        latency_ms=0.002,
    )
    got = replay_handoffs(trace, cluster, 1000.0, **keywords)
    want = replay_handoffs(trace, nic, 1000.0, links=1, **keywords)
    for column in ("decode_worker", "cached_tokens", "charged_tokens", "transfer_bytes", "saved_bytes"):
        assert got[column].tolist() == want[column].tolist(), column
    np.testing.assert_allclose(got["handoff_delay_ms"], want["handoff_delay_ms"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(got["end_ms"], want["end_ms"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(got["transfer_ms"], want["transfer_ms"], rtol=1e-12, atol=0)


# --- every request against the reference event simulation ---------------------------------------------


def _model(heads):
    return {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_key_value_heads": heads,
        "num_attention_heads": 2 * heads,
        "head_dim": 64,
        "hidden_size": 128 * heads,
        "torch_dtype": "bfloat16",
    }


def _degrees(heads):
    return [t for t in (1, 2, 4, 8) if heads % t == 0 or t % heads == 0]


@settings(max_examples=80, deadline=None)
@given(clusters(), st.sampled_from([1, 2, 4, 8]), st.data())
def test_every_request_matches_the_reference_simulation(cluster, heads, data):
    tp = data.draw(st.sampled_from([t for t in _degrees(heads) if t <= 8]), label="tp")
    decode_tp = data.draw(st.sampled_from([t for t in _degrees(heads) if t <= 8]), label="decode_tp")
    P = data.draw(st.integers(1, 3), label="prefill_workers")
    D = data.draw(st.integers(1, 3), label="decode_workers")
    routing = data.draw(st.sampled_from(["prefix", "round_robin", "least_loaded", "topology"]), label="routing")
    contention = data.draw(st.sampled_from(["fair", "none"]), label="contention")
    mode = data.draw(st.sampled_from(["full_prompt", "destination_missing"]), label="mode")
    capacity = data.draw(st.sampled_from([None, 4]), label="capacity")
    latency = data.draw(st.sampled_from([0.0, 0.01]), label="latency")
    per_block = data.draw(st.sampled_from([0.0, 0.0005]), label="per_block")
    rows = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), st.integers(0, 400), st.lists(st.integers(0, 5), max_size=5)
            ),
            min_size=1,
            max_size=14,
        ),
        label="rows",
    )
    rows = within_prompts(rows)
    column = data.draw(st.booleans(), label="prefill_worker column")
    prefill_ms = data.draw(st.sampled_from([None, 0.0, 0.3, 2.0]), label="layer-wise prefill_ms")
    trace = trace_of([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], block=16)
    prefill_of = None
    if column:
        prefill_of = [data.draw(st.integers(0, P - 1)) for _ in rows]
        trace["prefill_worker"] = prefill_of
    model = _model(heads)
    head_bpt = 2 * 2 * 64 * 2  # K and V, 2 layers, head_dim 64, bf16
    got = replay_handoffs(
        trace,
        cluster,
        model,
        tp=tp,
        decode_tp=decode_tp,
        prefill_workers=P,
        decode_workers=D,
        routing=routing,
        contention=contention,
        mode=mode,
        block_size=16,
        decode_cache_blocks=capacity,
        latency_ms=latency,
        per_block_ms=per_block,
        **({} if prefill_ms is None else dict(overlap="layerwise", prefill_ms=prefill_ms)),
    )
    arrivals = trace["arrival_ms"].tolist()
    streamed = None  # (the model's 2 layers, sent one at a time: the first half a prefill before its end)
    if prefill_ms is not None:
        streamed = (arrivals, [0.5] * len(rows))
    want = ref.replay_reference(
        as_reference(cluster),
        heads,
        head_bpt,
        0.0,
        arrivals if prefill_ms is None else [a - prefill_ms / 2 for a in arrivals],
        [r[1] for r in rows],
        [r[2] for r in rows],
        tp=tp,
        decode_tp=decode_tp,
        prefill_workers=P,
        decode_workers=D,
        prefill_of=prefill_of,
        routing=routing,
        contention=contention,
        mode=mode,
        block_size=16,
        hash_block_tokens=16,
        capacity=capacity,
        latency_ms=latency,
        per_block_ms=per_block,
        streamed=streamed,
    )
    for column_name, key in (
        ("decode_worker", "decode_worker"),
        ("cached_tokens", "cached_tokens"),
        ("charged_tokens", "charged_tokens"),
        ("flows", "flows"),
    ):
        assert got[column_name].tolist() == [w[key] for w in want], column_name
    np.testing.assert_allclose(got["transfer_bytes"], [w["transfer_bytes"] for w in want], rtol=1e-12)
    np.testing.assert_allclose(got["handoff_delay_ms"], [w["delay_ms"] for w in want], rtol=1e-9, atol=1e-12)


# --- hostile inputs: one clear line each -----------------------------------------------------------


@pytest.mark.parametrize(
    "keywords, name",
    [
        (dict(contention="fifo"), "contention"),
        (dict(links=2), "links"),
        (dict(scope="group"), "scope"),
        (dict(routing="nearest"), "routing"),
        (dict(latency_ms=-1.0), "latency_ms"),
        (dict(prefill_workers=0), "prefill_workers"),
    ],
)
def test_what_a_cluster_decides_is_refused(keywords, name):
    trace = trace_of([0.0, 1.0], [100, 200])
    with pytest.raises(InputError, match=name):
        replay_handoffs(trace, hgx(), LLAMA_70B, tp=8, **{"contention": "fair", **keywords})


@pytest.mark.parametrize("keywords", [dict(routing="least_loaded"), dict(routing="topology"), dict(prefill_workers=2)])
def test_cluster_options_on_a_link_are_refused(keywords):
    with pytest.raises(InputError, match="needs a cluster"):
        replay_handoffs(trace_of([0.0], [10]), "ib-ndr", LLAMA_70B, **keywords)


@pytest.mark.parametrize("values", [[0, 2], [0, -1], [0, 0.5]])
def test_a_bad_prefill_worker_column_is_refused(values):
    trace = trace_of([0.0, 1.0], [100, 200])
    trace["prefill_worker"] = values
    with pytest.raises(InputError, match="prefill_worker"):
        replay_handoffs(trace, hgx(), LLAMA_70B, tp=8, prefill_workers=2, contention="fair")


def test_a_column_of_models_and_bytes_with_tp_are_refused():
    trace = trace_of([0.0, 1.0], [100, 200])
    trace["model"] = [LLAMA_70B, "llama-3.1-8b"]
    with pytest.raises(InputError, match="mixes models"):
        replay_handoffs(trace, hgx(), "model", tp=8, contention="fair")
    with pytest.raises(InputError, match="number of bytes"):
        replay_handoffs(trace, hgx(), 1000.0, tp=8, contention="fair")


def test_without_a_cluster_the_replay_is_todays():
    trace = perfmodel.synthetic_trace(300, 50, seed=3)
    got = replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", contention="fair", decode_workers=3)
    assert "bottleneck" not in got and "prefill_worker" not in got
    assert "resources" not in got.attrs


# --- grids --------------------------------------------------------------------------------------------


def test_a_grid_over_cluster_fields_and_routing_is_each_replay():
    trace = perfmodel.synthetic_trace(120, 200, seed=2)
    base = Cluster(nic=Link("nic50", 50.0), nics_per_node=8, gpus_per_node=8, fabric="rail", name="hgx")
    grid, requests = perfmodel.replay_grid(
        trace,
        link=base,
        model=LLAMA_70B,
        tp=8,
        decode_tp=4,
        prefill_workers=2,
        decode_workers=2,
        contention="fair",
        nics_per_node=[4, 8],
        routing=["round_robin", "topology"],
        keep="requests",
    )
    combos = [(int(a), str(b)) for a, b in zip(grid["nics_per_node"], grid["routing"])]
    assert sorted(combos) == [(4, "round_robin"), (4, "topology"), (8, "round_robin"), (8, "topology")]
    assert len(requests) == 4 * len(trace)
    for (nics, routing), row in zip(combos, grid.itertuples()):
        alone = replay_handoffs(
            trace,
            Cluster(nic=Link("nic50", 50.0), nics_per_node=nics, gpus_per_node=8, fabric="rail"),
            LLAMA_70B,
            tp=8,
            decode_tp=4,
            prefill_workers=2,
            decode_workers=2,
            contention="fair",
            routing=routing,
        )
        assert row.p99_ms == perfmodel.summarize(alone)["p99_ms"]


def test_cluster_fields_without_a_cluster_are_refused():
    with pytest.raises(InputError, match="vary a cluster's fields"):
        perfmodel.replay_grid(trace_of([0.0, 1.0], [10, 20]), link="ib-ndr", model=LLAMA_70B, nics_per_node=[4, 8])


def test_messages_and_blocks_cost_as_on_todays_link():
    """Per-message and per-block costs (equal for every request here: today's fair replay starts data
    phases in processing order) give today's fair replay on the degenerate cluster."""
    trace = trace_of([0.0, 0.0, 0.1, 0.3, 0.3], [3000] * 5)
    nic = Link("nic", 25.0, latency_ms=0.003, per_message_ms=0.0001)
    keywords = dict(block_size=16, per_message_ms=0.0002, per_block_ms=0.00001, contention="fair", blocks_per_message=4)
    got = replay_handoffs(trace, Cluster(nic=nic, nics_per_node=1, gpus_per_node=1), "llama-3.1-8b", **keywords)
    want = replay_handoffs(trace, nic, "llama-3.1-8b", **keywords)
    np.testing.assert_allclose(got["handoff_delay_ms"], want["handoff_delay_ms"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(got["transfer_ms"], want["transfer_ms"], rtol=1e-12, atol=0)


def test_the_command_line_replays_a_grid_on_a_cluster(tmp_path):
    import subprocess
    import sys

    trace = perfmodel.synthetic_trace(60, 50, seed=1)
    path = tmp_path / "t.csv"
    trace[["arrival_ms", "num_input_tokens"]].to_csv(path, index=False)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "trace",
            str(path),
            "--cluster",
            "hgx-h100-8x400g",
            "--model",
            "llama-3.1-70b",
            "--tp",
            "8",
            "--prefill-workers",
            "2",
            "--decode-workers",
            "2",
            "--contention",
            "fair",
            "--grid",
            "nics_per_node=4,8",
            "routing=round_robin,topology",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    grid = pd.read_csv(tmp_path / "out" / "grid.csv")
    assert sorted(zip(grid["nics_per_node"], grid["routing"])) == [
        (4, "round_robin"),
        (4, "topology"),
        (8, "round_robin"),
        (8, "topology"),
    ]


def test_ready_times_a_hair_apart_keep_the_time_bins_small():
    """(Hostile: arrivals 5e-324 ms apart once made bins of no width, and the replay filled memory.)"""
    got = replay_handoffs(trace_of([0.0, 5e-324, 1e-300], [3000] * 3), hgx(), LLAMA_70B, tp=8, contention="fair")
    assert len(got.attrs["utilisation"]["series"]["node0/nic0/out"]) <= 200


def test_the_command_line_replays_on_a_cluster_and_refuses_in_one_line(tmp_path, capsys):
    from perfmodel.cli import main

    base = [
        "trace",
        "dataset:mooncake-synthetic",
        "--cluster",
        "hgx-h100-8x400g",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "8",
        "--contention",
        "fair",
    ]
    assert main([*base, "--decode-workers", "2", "--out", str(tmp_path / "one")]) == 0  # (it printed text with ',')
    shown = capsys.readouterr().out
    assert "busiest_resource" in shown and "\nwrote " in shown
    nope = [*base[:2], "--cluster", "nope", *base[4:]]  # (a flag is given once: its value replaced)
    for argv, said in (
        ([*base, "--grid", "nics_per_node=0,8"], "--grid nics_per_node: 0 is below 1"),
        (nope, "unknown cluster 'nope'"),
    ):
        assert main([*argv, "--out", str(tmp_path / "other")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "other").exists()


def test_a_contention_that_is_no_mode_is_said_to_be_none():
    trace = perfmodel.synthetic_trace(20, 20, seed=0)
    with pytest.raises(InputError, match="'bogus' is not one of 'none', 'fifo', 'fair'"):
        replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-70b", tp=8, contention="bogus")


# --- summaries and grids on a cluster --------------------------------------------------------------------------


def _small_cluster_replay(**options):
    trace = perfmodel.synthetic_trace(300, rate_per_s=80, seed=2)
    keywords = dict(tp=8, prefill_workers=2, decode_workers=2, contention="fair") | options
    return perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-70b", **keywords)


def test_a_summary_on_a_cluster_has_no_link_utilisation_and_none_without_contention():
    """A cluster has resources, not links: link_utilisation (each handoff alone over one link) is missing
    there, and the busiest resource says the load; each handoff alone (contention="none") simulates no load,
    so no utilisation is claimed (it read 0.0 while naming a bottleneck)."""
    shared = perfmodel.summarize(_small_cluster_replay())
    assert np.isnan(shared["link_utilisation"])
    assert 0 < shared["busiest_utilisation"] <= 1 and shared["busiest_resource"]
    alone = perfmodel.summarize(_small_cluster_replay(contention="none"))
    loads = [v for k, v in alone.items() if k.startswith("util_")]
    assert loads and np.isnan(loads).all()
    assert alone["busiest_resource"] is None and np.isnan(alone["busiest_utilisation"])
    assert sum(v for k, v in alone.items() if k.startswith("bottleneck_share:")) == pytest.approx(1.0)


def test_a_grid_on_a_cluster_has_its_axes_and_headline_figures_only(tmp_path):
    """Per-resource figures are not grid columns (the figure took them for axes: panels of NaN)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import perfmodel.plotting as pp

    trace = perfmodel.synthetic_trace(300, rate_per_s=80, seed=2)
    grid = perfmodel.replay_grid(
        trace,
        cluster="hgx-h100-8x400g",
        model="llama-3.1-70b",
        tp=8,
        prefill_workers=2,
        decode_workers=2,
        contention="fair",
        nics_per_node=[4, 8],
        routing=["round_robin", "topology"],
    )
    assert not [c for c in grid.columns if ":" in c]
    assert grid["link_utilisation"].isna().all() and grid["busiest_utilisation"].between(0, 1).all()
    fig = pp.replay_grid_figure(grid, budget_ms=100)
    try:
        assert len([ax for ax in fig.axes if ax.get_visible()]) == 3  # two panels and a colour bar
        titles = " ".join(ax.get_title() for ax in fig.axes) + fig.get_suptitle()
        assert "util" not in titles and "busiest" not in titles
    finally:
        plt.close(fig)


@pytest.mark.parametrize("values", [["0", "1"], [True, False]], ids=["text", "booleans"])
def test_a_prefill_worker_column_of_text_or_booleans_is_refused(values):
    """Worker numbers are numbers: text ("0") and booleans were read as 0 and 1 without a word."""
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [1024, 2048], "prefill_worker": values})
    with pytest.raises(InputError, match="prefill_worker.*not worker numbers"):
        replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-70b", tp=8, prefill_workers=2, contention="fair")


def _bins_hold_the_busy_integral(got):
    """Every resource's time bins add up to its load's integral (GB/s x ms): no load lost in a bin."""
    found = got.attrs["utilisation"]
    for name, series in found["series"].items():
        resource = got.attrs["resources"][name]
        total = np.sum(series) * resource["capacity_gb_s"] * found["bin_ms"]
        assert total == pytest.approx(resource["busy_gb_ms"], rel=1e-9), name


def test_a_handoff_lasting_ages_merges_time_bins_instead_of_filling_memory():
    """(Hostile: a handoff of 1e14 bytes per token ends ~1e11 ms after its start; the bins grew to reach it, 3 GiB
    for 1e14 and a killed process for 1e300.)"""
    for kv_bytes_per_token in (1e14, 1e300):
        got = replay_handoffs(trace_of([0.0, 1.0, 2.0], [3000] * 3), hgx(), kv_bytes_per_token, contention="fair")
        found = got.attrs["utilisation"]
        assert len(found["series"]["node0/nic0/out"]) <= perfmodel.get_options()["max_time_bins"]
        assert found["bin_ms"] >= got["end_ms"].max() / perfmodel.get_options()["max_time_bins"]
        _bins_hold_the_busy_integral(got)


def test_merged_time_bins_are_the_fine_bins_added_in_groups():
    """With fewer bins allowed, each bin is the sum of the bins it merges (the same edges: widths double)."""
    trace = trace_of(np.arange(0.0, 40.0, 2.0), [30_000] * 20)
    fine = replay_handoffs(trace, hgx(2), LLAMA_70B, tp=8, contention="fair")
    with perfmodel.set_options(max_time_bins=256):
        coarse = replay_handoffs(trace, hgx(2), LLAMA_70B, tp=8, contention="fair")
    pd.testing.assert_frame_equal(coarse, fine)  # the handoffs: unchanged
    f, c = fine.attrs["utilisation"], coarse.attrs["utilisation"]
    assert c["start_ms"] == f["start_ms"]
    group = round(c["bin_ms"] / f["bin_ms"])
    assert group > 1 and c["bin_ms"] == f["bin_ms"] * group and len(f["series"]["node0/nic0/out"]) > 256
    for name, series in f["series"].items():
        padded = np.zeros(-(-len(series) // group) * group)
        padded[: len(series)] = series
        np.testing.assert_allclose(
            c["series"][name], padded.reshape(-1, group).sum(axis=1) / group, rtol=1e-9, atol=1e-15
        )
    _bins_hold_the_busy_integral(coarse)


@pytest.mark.parametrize("contention", ["none", "fair"])
def test_a_handoff_that_never_ends_is_refused_by_its_request_on_a_cluster(contention):
    """(Hostile: 1e305 bytes per token overflowed to a handoff of inf ms, and the loop said 'a bug'.)"""
    trace = trace_of([0.0, 1.0], [1000, 2000])
    with pytest.raises(InputError, match=r"^kv_bytes_per_token: request 1's handoff moves inf bytes .* never ends"):
        replay_handoffs(trace, hgx(), 1e305, contention=contention)
    with pytest.raises(InputError, match=r"^kv_bytes_per_token: request 1's handoff moves inf bytes"):
        perfmodel.replay_ttft(trace, hgx(), 1e305, contention=contention)
    slow = Cluster(nic=Link(name="slow", bandwidth_gb_s=5e-324), nics_per_node=1, gpus_per_node=1)
    with pytest.raises(
        InputError, match=r"^kv_transfer_bandwidth: request 0's handoff moves 1000000000.0 bytes and takes inf ms"
    ):
        replay_handoffs(trace, slow, 1e6, contention=contention)
