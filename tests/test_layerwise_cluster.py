"""Layer-wise streaming on a cluster (``overlap="layerwise"``): a handoff alone streams its layer groups as on a
link, each group its flows at a group's share of their bytes and costs, one group at a time. On one NIC each side
it is the link's layer-wise delay bit for bit; on any cluster it is the contract's rule applied to the cluster's
own handoff time X: ``max(X * g / L, X - C * (L - g) / L)``, X below ``layerwise_min_tokens``. In a replay, each
handoff's flows stream and share the cluster; on one NIC each side, as the link's layer-wise replay."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import Cluster

ONE_EACH_SIDE = Cluster(name="one", nic="ib-ndr", nics_per_node=1, gpus_per_node=1, nodes=2, nvlink_domain=1)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 200_000), min_size=1, max_size=8),
    prefill_ms=st.one_of(st.just(0.0), st.floats(0.0, 5e3)),
    layer_group=st.integers(1, 32),
    minimum=st.sampled_from([0, 1, 1000, 50_000]),
    transport=st.sampled_from(["ideal", "mooncake-te-rdma", "fastdeploy-rdma"]),
    block_size=st.sampled_from([16, 64]),
)
def test_on_one_nic_each_side_it_is_the_links_layerwise_delay_bit_for_bit(
    tokens, prefill_ms, layer_group, minimum, transport, block_size
):
    cluster = dataclasses.replace(ONE_EACH_SIDE, transport=transport)
    link = perfmodel.Link("nic", 50.0, efficiency=cluster.flow_transport.efficiency,
                          per_message_ms=cluster.flow_transport.per_message_ms)  # fmt: skip
    kw = dict(overlap="layerwise", prefill_ms=prefill_ms, layer_group=layer_group, layerwise_min_tokens=minimum,
              block_size=block_size)  # fmt: skip
    on_cluster = perfmodel.handoff_delay_ms(np.array(tokens), cluster, "llama-3.1-8b", **kw)
    on_link = perfmodel.handoff_delay_ms(np.array(tokens), link, "llama-3.1-8b", **kw)
    np.testing.assert_array_equal(on_cluster, on_link)


@pytest.mark.parametrize("name", ["hgx-h100-8x400g", "aws-p5en", "gb200-nvl72"])
@pytest.mark.parametrize("hop_latency_ms", [0.0, 0.02])
def test_on_a_cluster_it_is_the_contracts_rule_on_the_clusters_own_handoff_time(name, hop_latency_ms):
    cluster = dataclasses.replace(perfmodel.get_cluster(name), hop_latency_ms=hop_latency_ms,
                                  transport="mooncake-te-rdma")  # fmt: skip
    tokens = np.array([0, 1, 100, 999, 1000, 4096, 65_536, 131_072])
    prefill = np.array([0.0, 3.0, 1.0, 50.0, 50.0, 0.0, 800.0, 2.0])
    shape = dict(tp=8, block_size=16)
    whole = np.asarray(perfmodel.handoff_delay_ms(tokens, cluster, "llama-3.1-70b", **shape))
    streamed = perfmodel.handoff_delay_ms(tokens, cluster, "llama-3.1-70b", overlap="layerwise", prefill_ms=prefill,
                                          layer_group=4, layerwise_min_tokens=1000, **shape)  # fmt: skip
    layers, group = 80, 4  # (Llama-3.1-70B)
    want = [x if n < 1000 else max(x * group / layers, x - c * (layers - group) / layers)
            for x, n, c in zip(whole, tokens, prefill)]  # fmt: skip
    np.testing.assert_allclose(streamed, want, rtol=1e-12, atol=0)
    assert (np.asarray(streamed) <= whole).all() and streamed[-2] < whole[-2] / 2


def test_a_sweep_and_the_command_stream_it_on_a_cluster(tmp_path, capsys):
    found = perfmodel.sweep(num_input_tokens=[32_768], model="llama-3.1-70b", tp=8, cluster="hgx-h100-8x400g",
                            overlap=["none", "layerwise"], prefill_ms=400.0)  # fmt: skip
    none, layerwise = found["handoff_delay_ms"]
    assert layerwise == pytest.approx(none * 1 / 80) and none == pytest.approx(26.8435456)
    trace = tmp_path / "t.csv"
    trace.write_text("num_input_tokens\n32768\n")
    out = tmp_path / "o.csv"
    from perfmodel.cli import main

    assert main(["delay", str(trace), "--cluster", "hgx-h100-8x400g", "--model", "llama-3.1-70b", "--tp", "8",
                 "--overlap", "layerwise", "--prefill-ms", "400", "--out", str(out)]) == 0  # fmt: skip
    assert float(out.read_text().splitlines()[1].split(",")[-1]) == pytest.approx(layerwise)


@settings(max_examples=25, deadline=None)
@example(rate=400.0, tokens_per_s=5000.0, layer_group=1, minimum=0, contention="fair", mode="destination_missing")
@given(
    rate=st.sampled_from([5.0, 60.0, 400.0]),
    tokens_per_s=st.sampled_from([5_000.0, 20_000.0, 1e6]),
    layer_group=st.sampled_from([1, 4, 32]),
    minimum=st.sampled_from([0, 4000]),
    contention=st.sampled_from(["fair", "none"]),
    mode=st.sampled_from(["full_prompt", "destination_missing"]),
)
def test_a_replay_on_one_nic_each_side_is_the_links_layerwise_replay(
    rate, tokens_per_s, layer_group, minimum, contention, mode
):
    """Its flows start with its first layer group and share the cluster; it ends no earlier than its prefill's end
    plus its last group's share of its time alone, as on a link."""
    trace = perfmodel.synthetic_trace(300, rate_per_s=rate, seed=3)
    kw = dict(overlap="layerwise", prefill_tokens_per_s=tokens_per_s, layer_group=layer_group,
              layerwise_min_tokens=minimum, contention=contention, mode=mode)  # fmt: skip
    on_cluster = perfmodel.replay_handoffs(trace, ONE_EACH_SIDE, "llama-3.1-8b", prefill_workers=1, **kw)
    on_link = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", **kw)
    for column in ("start_ms", "end_ms", "transfer_ms"):
        np.testing.assert_allclose(on_cluster[column], on_link[column], rtol=1e-12, atol=1e-12, err_msg=column)
    # (a delay is its end less its prefill's end: equal to 1e-12 of the times it is the difference of, as the ends
    # are; a saturated link's many sharing events round its ends apart by tens of ulps)
    times = 1e-12 * float(on_link["end_ms"].abs().max())
    np.testing.assert_allclose(on_cluster["handoff_delay_ms"], on_link["handoff_delay_ms"], rtol=1e-12, atol=times)
    assert on_cluster.attrs["overlap"] == "layerwise"
    # alone, a streamed handoff waits for nothing: its queue is 0, whatever its prefill (a link counts the compute)
    if contention == "none":
        assert (on_cluster["queue_ms"] == 0).all()


def test_a_replay_on_a_cluster_streams_every_handoffs_flows():
    trace = perfmodel.datasets.load("mooncake-synthetic").head(300)
    setup = dict(tp=8, prefill_workers=2, decode_workers=2, contention="fair", mode="destination_missing")
    after = perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-70b", **setup)
    streamed = perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-70b", overlap="layerwise",
                                         prefill_tokens_per_s=20_000.0, **setup)  # fmt: skip
    assert streamed["handoff_delay_ms"].mean() < after["handoff_delay_ms"].mean() / 10
    assert (streamed["handoff_delay_ms"] >= 0).all() and streamed["bottleneck"].notna().any()
    grid = perfmodel.replay_grid(trace, link="hgx-h100-8x400g", model="llama-3.1-70b", overlap=["none", "layerwise"],
                                 prefill_tokens_per_s=20_000.0, **setup)  # fmt: skip
    assert grid["p99_ms"].tolist() == pytest.approx(
        [perfmodel.summarize(r)["p99_ms"] for r in (after, streamed)], rel=1e-12
    )


def test_a_streamed_handoff_alone_on_a_link_waits_for_nothing_under_fair_sharing():
    """Its queue is what it waits or is slowed beyond its streamed time alone: 0 on an idle link, as on a cluster
    (the prefill it overlaps is no queue)."""
    trace = perfmodel.synthetic_trace(3, rate_per_s=0.01, seed=2)
    kw = dict(overlap="layerwise", prefill_ms=50.0, contention="fair")
    on_link = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", **kw)
    on_cluster = perfmodel.replay_handoffs(trace, ONE_EACH_SIDE, "llama-3.1-8b", prefill_workers=1, **kw)
    assert (on_link["queue_ms"] == 0).all() and (on_cluster["queue_ms"] == 0).all()
