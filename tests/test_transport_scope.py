"""Transports say what their figures were measured over (Transport.measured_over): a node's benchmark is shared out to
its GPUs on a cluster (Transport.per_flow), so the node's GPUs handing off together take the time the node's
benchmark predicts; one flow's figures are charged as they are."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import perfmodel
from perfmodel import Cluster, InputError, Transport
from perfmodel.network.links import PROFILES, transport_profiles, transports
from perfmodel.network.transport import SCOPES

EFA = "mooncake-te-efa-p5en"


def _p5en(transport: Transport) -> Cluster:
    return dataclasses.replace(perfmodel.get_cluster("aws-p5en"), transport=transport)


def test_every_shipped_profile_says_what_it_was_measured_over():
    from perfmodel.network.transport import DECLARED

    declared = {name: t for name, t in transports().items() if name in DECLARED}
    # (declared from a node's published rate: a node-wide limit, and no cost per message or block to scope)
    assert declared and all(t.node_gb_s and not (t.per_message_ms or t.per_block_ms) for t in declared.values())
    found = {name: (t.measured_over, t.measured_gpus) for name, t in transports().items() if name not in DECLARED}
    assert found == {
        "fastdeploy-rdma": ("thread", 1),
        "mooncake-te-rdma": ("thread", 1),
        "uccl-rdma": ("nic", 1),
        "nixl-uccl-rdma": ("nic", 1),
        "nixl-ucx-rdma": ("nic", 1),
        EFA: ("node", 8),
    }
    assert set(found) == set(PROFILES) and {scope for scope, _ in found.values()} <= set(SCOPES)
    assert "8 GPUs together" in transports()[EFA].source  # (what the scope reads from)


def test_per_flow_shares_a_nodes_costs_out_to_its_gpus_and_leaves_the_rest():
    node = Transport("n", per_message_ms=3e-4, per_block_ms=1e-3, setup_ms=0.5, efficiency=0.9, measured_over="node",
                     measured_gpus=8, line_rate_gb_s=400.0, source="s")  # fmt: skip
    flow = node.per_flow()
    assert (flow.per_message_ms, flow.per_block_ms) == (3e-4 * 8, 1e-3 * 8)
    assert (flow.setup_ms, flow.efficiency, flow.line_rate_gb_s, flow.name, flow.source) == (0.5, 0.9, 400.0, "n", "s")
    assert (flow.measured_over, flow.measured_gpus) == ("flow", 1) and flow.per_flow() is flow
    for scope in ("flow", "thread", "gpu", "nic"):
        t = Transport("t", per_message_ms=3e-4, measured_over=scope)
        assert t.per_flow() is t
    one = Transport("t", per_message_ms=3e-4, measured_over="node", measured_gpus=1)
    assert one.per_flow() is one


@pytest.mark.parametrize("tokens", [128, 1024, 8192])
@pytest.mark.parametrize("block_size", [16, 128])
def test_a_p5en_node_handing_off_together_takes_what_the_nodes_benchmark_predicts(tokens, block_size):
    """Each of the 8 ranks' flows pays 8x the node's cost per message and moves over its share of the node's
    NICs: the handoff takes the node profile's own time for the node's bytes and messages."""
    cluster = _p5en(transports()[EFA])
    flows = perfmodel.handoff_flows(tokens, cluster, "llama-3.1-70b", tp=8, block_size=block_size)
    delay = float(perfmodel.handoff_delay_ms(tokens, cluster, "llama-3.1-70b", tp=8, block_size=block_size))
    efa = transports()[EFA]
    node = perfmodel.Link("node", 400.0, efficiency=efa.efficiency, per_message_ms=efa.per_message_ms)
    per_rank = flows.drop_duplicates("src_rank")  # (a rank's two NICs each carry its messages)
    want = float(node.transfer_ms(flows["bytes"].sum(), 0, per_rank["messages"].sum()))
    assert flows["src_rank"].nunique() == 8 and delay == float(flows["time_ms"].max())
    assert delay == pytest.approx(want, rel=1e-12)
    # the profile where a link goes is one GPU's share: the same handoff on it takes the cluster's time
    on_link = perfmodel.handoff_delay_ms(tokens, EFA, "llama-3.1-70b", tp=8, block_size=block_size)
    assert float(on_link) == pytest.approx(delay, rel=1e-12)
    assert transport_profiles()[EFA].bandwidth_gb_s == 50.0
    unshared = _p5en(dataclasses.replace(transports()[EFA], measured_over="flow", measured_gpus=1))
    before = float(perfmodel.handoff_delay_ms(tokens, unshared, "llama-3.1-70b", tp=8, block_size=block_size))
    assert before < delay / 2  # (each GPU charged the node's cost per message: several times too fast)


def test_the_replay_charges_each_flow_a_nodes_costs_as_the_static_path_does():
    cluster = _p5en(transports()[EFA])
    trace = perfmodel.synthetic_trace(50, rate_per_s=0.5, seed=3)  # (far apart: each handoff alone)
    replay = perfmodel.replay_handoffs(trace, cluster, "llama-3.1-70b", tp=8, block_size=16, contention="none")
    alone = perfmodel.handoff_delay_ms(trace["num_input_tokens"].to_numpy(), cluster, "llama-3.1-70b", tp=8,
                                       block_size=16)  # fmt: skip
    np.testing.assert_allclose(replay["handoff_delay_ms"].to_numpy(float), np.asarray(alone), rtol=1e-12)


@pytest.mark.parametrize(
    "fields, phrase",
    [
        (dict(measured_over="Node"), "measured_over 'Node' is not one of 'flow', 'thread', 'gpu', 'nic', 'node'"),
        (dict(measured_over=None), "measured_over None is not one of"),
        (dict(measured_over=8), "measured_over 8 is not one of"),
        (
            dict(measured_over="nic", measured_gpus=8),
            "measured_gpus 8 with measured_over 'nic': only a node's figures span several",
        ),
        (dict(measured_over="node", measured_gpus=0), "measured_gpus 0 is not a whole number >= 1"),
        (dict(measured_over="node", measured_gpus=2.5), "measured_gpus 2.5 is not a whole number >= 1"),
        (dict(measured_over="node", measured_gpus="8"), "measured_gpus '8'"),
        (dict(measured_over="node", measured_gpus=True), "measured_gpus True is a boolean"),
        (dict(measured_over="node", measured_gpus=float("nan")), "measured_gpus nan"),
    ],
)
def test_a_measured_over_that_says_nothing_clear_is_refused_in_one_line(fields, phrase):
    with pytest.raises(InputError) as raised:
        Transport("t", **fields)
    text = str(raised.value)
    assert phrase in text and text.startswith("transport 't'") and "Fix:" in text and "\n" not in text


@pytest.fixture
def presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config" / "presets.json"


def test_a_saved_cluster_keeps_its_transports_scope(presets):
    perfmodel.save_cluster(dataclasses.replace(_p5en(transports()[EFA]), name="our-p5en"))
    entry = json.loads(presets.read_text())["clusters"]["our-p5en"]["transport"]
    assert (entry["measured_over"], entry["measured_gpus"]) == ("node", 8)
    assert perfmodel.get_cluster("our-p5en").flow_transport == transports()[EFA].per_flow()


def test_a_cluster_saved_before_scopes_keeps_a_shipped_profiles_scope_by_its_name(presets):
    """An entry written before transports had a scope: under a shipped profile's name its figures are that
    profile's, so a node's stay a node's; under any other name they are one flow's."""
    perfmodel.save_cluster(dataclasses.replace(_p5en(transports()[EFA]), name="old"))
    data = json.loads(presets.read_text())
    old = {k: v for k, v in data["clusters"]["old"]["transport"].items() if k not in ("measured_over", "measured_gpus")}
    data["clusters"]["old"]["transport"] = old
    data["clusters"]["ours"] = {**data["clusters"]["old"], "transport": {**old, "name": "our-efa"}}
    presets.write_text(json.dumps(data))
    assert perfmodel.get_cluster("old").transport == transports()[EFA]
    ours = perfmodel.get_cluster("ours").transport
    assert (ours.measured_over, ours.measured_gpus) == ("flow", 1) and ours.per_flow() is ours


def test_a_cluster_says_when_its_transport_is_a_nodes_figures():
    assert (
        "(a node's figures over 8 GPUs, each GPU's flow charged 8x its cost per message)"
        in _p5en(transports()[EFA]).describe()
    )
    assert _p5en(transports()["mooncake-te-rdma"]).describe().endswith("transport mooncake-te-rdma")


def test_a_nodes_figures_without_how_many_gpus_shared_them_are_refused():
    with pytest.raises(InputError, match=r"measured_over 'node' without measured_gpus.*Fix: pass measured_gpus"):
        Transport("t", per_message_ms=3e-4, measured_over="node")
    assert Transport("t", measured_over="gpu").measured_gpus == 1  # (other scopes: one GPU at most)


def test_an_old_entry_under_a_profiles_name_in_another_case_keeps_its_scope(presets):
    perfmodel.save_cluster(dataclasses.replace(_p5en(transports()[EFA]), name="old"))
    data = json.loads(presets.read_text())
    old = {k: v for k, v in data["clusters"]["old"]["transport"].items() if k not in ("measured_over", "measured_gpus")}
    data["clusters"]["old"]["transport"] = {**old, "name": " Mooncake-TE-EFA-p5en "}
    presets.write_text(json.dumps(data))
    found = perfmodel.get_cluster("old").transport
    assert (found.measured_over, found.measured_gpus) == ("node", 8)


def test_ideal_is_a_transport_by_name_as_the_clusters_table_shows_it():
    assert perfmodel.network.links.get_transport(" Ideal ") == Transport()
    cluster = dataclasses.replace(perfmodel.get_cluster("aws-p5en"), transport="ideal")
    assert cluster.transport == Transport()


def test_a_missing_block_size_quotes_the_cost_each_flow_pays():
    with pytest.raises(InputError) as raised:
        perfmodel.handoff_delay_ms(1024, _p5en(transports()[EFA]), "llama-3.1-70b", tp=8)
    per_flow = transports()[EFA].per_flow().per_message_ms
    assert f"costs {per_flow:.3g} ms per message of each flow" in str(raised.value)


def test_a_transport_sweep_tells_its_values_apart_by_label():
    """A sweep's transport column names each value: two different transports under one name are refused
    (the table could not tell them apart), the same transport twice, spelt as a profile and as its name, is
    one value given twice; a transport renamed is its own value."""
    te = transports()["mooncake-te-rdma"]
    sweep = dict(num_input_tokens=[1024], model="llama-3.1-8b", cluster="aws-p5en", block_size=16)
    with pytest.raises(InputError, match="axis transport has a repeated value: 'mooncake-te-rdma' twice"):
        perfmodel.sweep(transport=[te, "mooncake-te-rdma"], **sweep)
    with pytest.raises(InputError, match="axis transport has different values labelled 'mooncake-te-rdma'"):
        perfmodel.sweep(transport=[dataclasses.replace(te, measured_over="gpu", per_message_ms=1e-3), te], **sweep)
    with pytest.raises(InputError, match="axis link has different values labelled 'a'"):
        perfmodel.sweep(
            link=[perfmodel.Link("a", 1.0), perfmodel.Link("a", 2.0)], num_input_tokens=[1], model="llama-3.1-8b"
        )
    found = perfmodel.sweep(transport=[te, dataclasses.replace(te, name="te-slow", per_message_ms=1e-3)], **sweep)
    assert list(found["transport"]) == ["mooncake-te-rdma", "te-slow"]
    assert found["handoff_delay_ms"].iloc[0] < found["handoff_delay_ms"].iloc[1]
