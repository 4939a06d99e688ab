"""Degraded paths on a cluster: GPUs pinned to other GPUs' NICs (``nic_map``), NICs or rails down (``nics_down``),
and the host bridge a GPU's flows cross to reach a NIC behind another PCIe switch (``host_bridge_gb_s``). Worked
examples by hand; every entry point (alone, flows, replay, presets, the command line) reads the same network; the
property tests against the suite's reference (tests/test_clusters.py, tests/test_cluster_replay.py) draw these
fields too."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import Cluster, InputError

#: An HGX-like node: 8 GPUs, 8 x 400G NICs, a PCIe switch per 2 GPUs (and their 2 NICs) of 64 GB/s each way.
BASE = dict(nic="roce-400g", nics_per_node=8, gpus_per_node=8, gpus_per_pcie_switch=2, pcie_switch_gb_s=64.0)
FLOW_BYTES = 32_768 * 40_960  # Llama-3.1-70B at TP8: one rank's bytes of 32,768 tokens


def _ms(gb_s: float) -> float:
    return FLOW_BYTES / (gb_s * 1e9) * 1000


def test_as_built_each_gpu_uses_its_own_nic_behind_its_own_switch():
    hgx = Cluster(**BASE)
    assert [hgx.nics_of(i) for i in range(8)] == [(i,) for i in range(8)]
    # each switch carries its 2 GPUs' flows: 32 GB/s each
    assert perfmodel.handoff_delay_ms(32_768, hgx, "llama-3.1-70b", tp=8) == pytest.approx(_ms(32.0), rel=1e-12)


def test_gpus_pinned_across_switches_share_the_host_bridge():
    """Every GPU on the NIC two along (behind the next switch): all 8 flows of a node cross its host bridge of
    40 GB/s each way (5 GB/s each), though the bytes and the NICs are the same."""
    pinned = Cluster(**BASE, nic_map=(2, 3, 4, 5, 6, 7, 0, 1), host_bridge_gb_s=40.0)
    delay = perfmodel.handoff_delay_ms(32_768, pinned, "llama-3.1-70b", tp=8)
    assert delay == pytest.approx(_ms(5.0), rel=1e-12)
    flows = perfmodel.handoff_flows(32_768, pinned, "llama-3.1-70b", tp=8)
    assert set(flows["bottleneck"]) == {"node0/host/out"}


def test_a_nic_down_moves_its_gpus_flows_to_the_next_nic_up():
    """NIC 3 down: GPU 3 uses NIC 4, behind the next switch, through the host. That switch then carries GPUs 3, 4
    and 5 (64 / 3 GB/s each), the slowest of the handoff's flows."""
    down = Cluster(**BASE, nics_down=(3,), host_bridge_gb_s=40.0)
    assert [down.nics_of(i)[0] for i in range(8)] == [0, 1, 2, 4, 4, 5, 6, 7]
    assert perfmodel.handoff_delay_ms(32_768, down, "llama-3.1-70b", tp=8) == pytest.approx(_ms(64 / 3), rel=1e-12)


def test_a_rail_down_on_a_rail_fabric_sends_its_flows_across_rails():
    rail = dict(nic="roce-400g", nics_per_node=8, gpus_per_node=8, fabric="rail", hop_latency_ms=0.002)
    down = perfmodel.handoff_flows(32_768, Cluster(**rail, nics_down=(7,)), "llama-3.1-70b", tp=8)
    # GPU 7 (prefill and decode alike) uses NIC 0: still one rail from NIC 0 to NIC 0, but NIC 0 carries two flows
    assert down["path"].iloc[7] == "node0/nic0/out > node1/nic0/in" and (down["start_ms"] == 0.002).all()
    assert down["rate_gb_s"].tolist() == [25.0, *[50.0] * 6, 25.0]
    assert perfmodel.handoff_delay_ms(32_768, Cluster(**rail, nics_down=(7,)), "llama-3.1-70b", tp=8) == (
        pytest.approx(0.002 + _ms(25.0), rel=1e-12)
    )


def test_without_pcie_switches_a_map_only_shares_nics():
    both_on_nic0 = Cluster(nic="roce-400g", nics_per_node=2, gpus_per_node=2, nic_map=(0, 0))
    assert perfmodel.handoff_delay_ms(32_768, both_on_nic0, "llama-3.1-70b", tp=2) == pytest.approx(
        32_768 * 163_840 / 25e9 * 1000, rel=1e-12
    )


def test_the_replay_the_flows_and_ttft_read_the_same_network():
    pinned = Cluster(**BASE, nic_map=(2, 3, 4, 5, 6, 7, 0, 1), host_bridge_gb_s=40.0)
    trace = perfmodel.synthetic_trace(40, rate_per_s=2.0, seed=4)
    alone = perfmodel.replay_handoffs(trace, pinned, "llama-3.1-70b", tp=8, contention="none")
    each = perfmodel.handoff_delay_ms(trace["num_input_tokens"], pinned, "llama-3.1-70b", tp=8)
    np.testing.assert_allclose(alone["handoff_delay_ms"], each, rtol=1e-12)
    assert set(alone["bottleneck"].dropna()) == {"node0/host/out"}
    ttft = perfmodel.replay_ttft(trace, pinned, "llama-3.1-70b", tp=8, contention="fair")
    assert (ttft["handoff_delay_ms"] >= alone["handoff_delay_ms"] - 1e-9).all()


def test_a_degraded_cluster_is_a_preset_the_command_line_names(tmp_path, monkeypatch, capsys):
    from perfmodel.cli import main

    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    down = Cluster(**BASE, nics_down=(3,), host_bridge_gb_s=40.0, name="hgx-nic3-down")
    perfmodel.save_cluster(down)
    saved = json.loads((tmp_path / "config" / "presets.json").read_text())["clusters"]["hgx-nic3-down"]
    assert saved["nics_down"] == [3] and saved["nic_map"] is None
    assert perfmodel.get_cluster("hgx-nic3-down") == down
    out = tmp_path / "sweep"
    words = ["sweep", "--cluster", "hgx-nic3-down", "--model", "llama-3.1-70b", "--tp", "8", "--tokens", "32k:32k"]
    assert main([*words, "--out", str(out)]) == 0
    got = pd.read_csv(out / "sweep.csv")["handoff_delay_ms"].iloc[0]
    assert got == pytest.approx(_ms(64 / 3), rel=1e-12)
    assert "NIC 3 down" in down.describe() and "40 GB/s through the host" in down.describe()


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (dict(nic_map=(0, 1)), "nic_map holds 2 NICs for 8 GPUs"),
        (dict(nic_map="01234567"), "not a list of NIC indices"),
        (dict(nic_map=(0, 1, 2, 3, 4, 5, 6, 8)), "nic_map names NIC 8, but a node has 8"),
        (dict(nic_map=(0, 1, 2, 3, 4, 5, 6, 1.5)), "nic_map entry 1.5 is not a whole number"),
        (dict(nic_map=(0, 1, 2, 3, 4, 5, 6, True)), "nic_map entry True is a boolean"),
        (dict(nics_down=(-1,)), "nics_down entry -1 is not a whole number >= 0"),
        (dict(nics_down=(1, 1)), "names a NIC twice"),
        (dict(nics_down=tuple(range(8))), "takes every one of the 8 NICs of a node down"),
        (dict(nics_down=(3,)), "GPU 3 uses NIC 4, behind another PCIe switch"),
        (dict(nic_map=(0, 1, 2, 3, 4, 5, 6, 7), nics_down=(7,), host_bridge_gb_s=9.0), "maps GPU 7 to NIC 7, which"),
        (dict(host_bridge_gb_s=10.0), "so it would never be used"),
        (dict(nics_down=(3,), host_bridge_gb_s=0.0), "host_bridge_gb_s 0.0 is not a finite number > 0"),
        (dict(nics_per_node=16, nics_down=(3,)), "one NIC per GPU or fewer"),
    ],
)
def test_a_degraded_path_that_cannot_be_is_refused_in_one_line(fields, says):
    with pytest.raises(InputError) as raised:
        Cluster(**{**BASE, **fields})
    assert says in str(raised.value) and "Fix:" in str(raised.value)


# --- a TCP fallback: a transport whose limit is its node's traffic together ------------------------------------


def test_the_tcp_fallback_caps_a_nodes_traffic_together_whatever_its_nics():
    """Mooncake's TCP transport on 8 x 400G: ~41 GB/s for the node (kvcache-ai/Mooncake), so a TP8 handoff's 8
    flows share 41 GB/s at each end: 5.125 GB/s each, against 50 over RDMA."""
    tcp = Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, transport="mooncake-tcp-8x400g")
    assert perfmodel.handoff_delay_ms(32_768, tcp, "llama-3.1-70b", tp=8) == pytest.approx(_ms(41 / 8), rel=1e-12)
    flows = perfmodel.handoff_flows(32_768, tcp, "llama-3.1-70b", tp=8)
    assert set(flows["bottleneck"]) == {"node0/stack/out"}
    assert "at most 41 GB/s each way" in tcp.describe()
    tcp_transport = perfmodel.transports()["mooncake-tcp-4x200g"]
    assert tcp_transport.node_gb_s == 36.0 and "kvcache-ai/Mooncake" in tcp_transport.source


def test_a_tcp_fallback_is_no_link_and_a_bad_node_limit_is_refused():
    with pytest.raises(InputError, match="use it as a cluster's transport"):
        perfmodel.handoff_delay_ms(1000, "mooncake-tcp-8x400g", "llama-3.1-8b")
    for bad in (0.0, -1.0, float("nan"), float("inf"), True, "41"):
        with pytest.raises(InputError, match="node_gb_s"):
            perfmodel.Transport("tcp", node_gb_s=bad)


def test_a_tcp_fallback_goes_wherever_a_transport_does(tmp_path, monkeypatch):
    from perfmodel.cli import main

    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    out = tmp_path / "sweep"
    words = ["sweep", "--cluster", "hgx-h100-8x400g", "--transport", "mooncake-tcp-8x400g", "--model",
             "llama-3.1-70b", "--tp", "8", "--tokens", "32k:32k", "--out", str(out)]  # fmt: skip
    assert main(words) == 0
    assert pd.read_csv(out / "sweep.csv")["handoff_delay_ms"].iloc[0] == pytest.approx(_ms(41 / 8), rel=1e-12)
    cluster = Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, transport="mooncake-tcp-8x400g", name="tcp")
    perfmodel.save_cluster(cluster)
    assert perfmodel.get_cluster("tcp").transport.node_gb_s == 41.0


def test_a_user_cluster_cannot_take_a_transports_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    for name in ("mooncake-tcp-8x400g", "ideal"):
        with pytest.raises(InputError, match="a transport's name"):
            perfmodel.save_cluster(Cluster(**BASE, name=name))
    assert not (tmp_path / "config" / "presets.json").exists()
