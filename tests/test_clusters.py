"""Clusters as they are (SEMANTICS.md): the worked examples exactly, the domain model against the
plain-Python reference (tests/reference_cluster.py) over small random clusters, and hostile values."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel
from perfmodel import Cluster, Link, Transport
from perfmodel.network.clusters import alone, alone_ms, handoffs_at_once, head_terms, split_heads

from . import reference_cluster as ref
from .reference_maxmin import maxmin_rates, simulate

TOKENS = 32_768
LLAMA_70B = "llama-3.1-70b"  # 8 KV heads, 327,680 B/token, 40,960 per rank at TP8


def hgx(nics=8, **extra):
    return Cluster(nic=Link("nic50", 50.0), nics_per_node=nics, gpus_per_node=8, **extra)


def delay(cluster, tp, decode_tp=None, tokens=TOKENS, model=LLAMA_70B):
    """The domain model's delay of a handoff alone (the simulation of its own flows)."""
    resolved = alone(cluster, head_terms(model, decode_tp=decode_tp or tp), tp, decode_tp)
    return alone_ms(resolved, cluster, tokens, tokens)[0]


# --- the worked examples ------------------------------------------------------------------------


def test_tp8_to_tp8_on_8_nics_is_8_flows_of_their_own_nics():
    resolved = alone(hgx(), head_terms(LLAMA_70B), 8)
    assert len(resolved.flows) == 8 and {f.src_rank for f in resolved.flows} == set(range(8))
    assert all(f.src_rank == f.dst_rank for f in resolved.flows)
    assert resolved.full * TOKENS == 1_342_177_280
    assert delay(hgx(), 8) == 1_342_177_280 / (50.0 * 1e9) * 1000 == pytest.approx(26.8435456, rel=1e-15)


def test_4_nics_per_node_two_flows_per_nic_at_both_ends():
    assert delay(hgx(4), 8) == pytest.approx(53.6870912, rel=1e-15)
    resolved = alone(hgx(4), head_terms(LLAMA_70B), 8)
    assert resolved.bandwidth_gb_s == 25.0 and resolved.linear


def test_tp8_to_decode_tp2_four_flows_on_each_decode_nic():
    resolved = alone(hgx(), head_terms(LLAMA_70B, decode_tp=2), 8, 2)
    assert len(resolved.flows) == 8 and sorted({f.dst_rank for f in resolved.flows}) == [0, 1]
    assert delay(hgx(), 8, 2) == pytest.approx(107.3741824, rel=1e-15)


def test_incast_through_the_same_simulation():
    terms = head_terms(LLAMA_70B)
    onto_one = handoffs_at_once(hgx(), terms, 8, 8, [(k, 0) for k in range(4)], TOKENS)
    onto_four = handoffs_at_once(hgx(), terms, 8, 8, [(k, k) for k in range(4)], TOKENS)
    assert onto_one == pytest.approx([107.3741824] * 4, rel=1e-15)
    assert onto_four == pytest.approx([26.8435456] * 4, rel=1e-15)


def test_nvl72_tp8_inside_the_domain_crosses_nvlink_only():
    nvl72 = Cluster(
        nic=Link("nic50", 50.0), nics_per_node=4, gpus_per_node=4, nvlink_domain=72, nvlink=Link("nvl", 900.0)
    )
    resolved = alone(nvl72, head_terms(LLAMA_70B), 8)
    assert all(f.nvlink and f.hops == 0 for f in resolved.flows)
    assert {resolved.resources.kinds[r] for f in resolved.flows for r in f.path} == {"nvlink"}
    assert round(delay(nvl72, 8), 10) == 1.4913080889


def test_hgx_nvlink_domain_of_one_node_is_never_used_by_a_handoff():
    resolved = alone(hgx(nvlink_domain=8, nvlink="nvlink4"), head_terms(LLAMA_70B), 8)
    assert not any(f.nvlink for f in resolved.flows)


# --- max-min fairness and the simulation ------------------------------------------------------------


def test_progressive_filling_and_rates_that_rise_when_a_flow_ends():
    # (the simulation itself on hand-worked cases; through clusters: the tests against tests/reference_cluster.py)
    assert maxmin_rates([[0], [0, 1], [1]], [10.0, 4.0]) == [8.0, 2.0, 2.0]
    # two flows of 1 and 3 GB on one 2 GB/s resource: 1 GB/s each, then the second alone at 2 GB/s
    outcome = simulate([0.0, 0.0], [1e9, 3e9], [[0], [0]], [2.0])
    assert outcome.ends_ms == [1000.0, 2000.0] and outcome.rate_changed == [False, True]


def test_the_closed_form_overstates_when_unequal_flows_share_and_the_simulation_is_used():
    """Flows of unequal bytes sharing a NIC: the closed form fixed + max(bytes / max-min rate) would give
    the larger flow's bytes at half the NIC; the contract's own simulation (rates recomputed when a flow
    ends) gives less. Llama-3.1-70B has 8 heads; TP8 -> decode_tp 1 on 1 NIC per node: 8 flows share."""
    c = Cluster(nic=Link("nic50", 50.0), nics_per_node=1, gpus_per_node=8)
    terms = head_terms(LLAMA_70B, decode_tp=1)._replace(state=1e9)  # the first flow also carries 1 GB of state
    resolved = alone(c, terms, 8, 1)
    assert not resolved.linear
    got = alone_ms(resolved, c, TOKENS, TOKENS)[0]
    total = 8 * 40960 * TOKENS + 1e9
    assert got == pytest.approx(total / 50e9 * 1000, rel=1e-12)  # the NIC is busy to the end
    closed_form = (40960 * TOKENS + 1e9) / (50e9 / 8) * 1000
    assert got < closed_form


# --- the domain model against the reference ---------------------------------------------------------


def as_reference(c: Cluster) -> dict:
    return dict(
        gpus_per_node=c.gpus_per_node,
        nics_per_node=c.nics_per_node,
        nvlink_domain=c.nvlink_domain,
        nvlink_gb_s=c.nvlink.effective_bandwidth_gb_s if c.nvlink else None,
        nvlink_latency_ms=c.nvlink.latency_ms if c.nvlink else 0.0,
        nic_gb_s=c.nic.bandwidth_gb_s,
        nic_latency_ms=c.nic.latency_ms,
        efficiency=c.transport.efficiency * c.nic.efficiency,
        fabric=c.fabric,
        oversubscription=c.oversubscription,
        hop_latency_ms=c.hop_latency_ms,
        gpus_per_pcie_switch=c.gpus_per_pcie_switch,
        pcie_switch_gb_s=c.pcie_switch_gb_s,
        nodes=c.nodes,
        nic_map=c.nic_map,
        nics_down=c.nics_down,
        host_bridge_gb_s=c.host_bridge_gb_s,
        node_gb_s=c.transport.node_gb_s,
    )


@st.composite
def clusters(draw):
    g = draw(st.sampled_from([1, 2, 4, 8]))
    n = draw(st.sampled_from(sorted({x for x in (1, 2, 4, 8, 16) if (g % x == 0 or x % g == 0) and x <= 8 * g})))
    fabric = draw(st.sampled_from(["flat", "rail"]))
    sharing = g // n if n <= g else 1
    switch = draw(st.sampled_from([None, *[s for s in (1, 2, 4, 8) if g % s == 0 and s % sharing == 0]]))
    domain = draw(st.sampled_from(sorted({1, g, 2 * g, max(g // 2, 1)})))
    degraded = draw(st.sampled_from(["none", "map", "down"])) if n <= g else "none"  # (mis-pinned GPUs, NICs down)
    nic_map = tuple(draw(st.integers(0, n - 1)) for _ in range(g)) if degraded == "map" else None
    down = (
        tuple(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n - 1))) if degraded == "down" and n > 1 else ()
    )
    shape = dict(gpus_per_node=g, nics_per_node=n, gpus_per_pcie_switch=switch, nic_map=nic_map, nics_down=down)
    host = draw(st.sampled_from([8.0, 30.0])) if ref.crosses_host(shape) else None
    return Cluster(
        nic=Link("nic", draw(st.sampled_from([12.5, 25.0, 50.0])), latency_ms=draw(st.sampled_from([0.0, 0.01]))),
        nics_per_node=n,
        gpus_per_node=g,
        fabric=fabric,
        oversubscription=draw(st.sampled_from([1.0, 2.0, 3.0])) if fabric == "rail" else 1.0,
        hop_latency_ms=draw(st.sampled_from([0.0, 0.003])),
        transport=Transport(
            "t", efficiency=draw(st.sampled_from([1.0, 0.8])), node_gb_s=draw(st.sampled_from([None, None, 30.0]))
        ),  # (a TCP fallback's node limit)
        gpus_per_pcie_switch=switch,
        pcie_switch_gb_s=draw(st.sampled_from([20.0, 64.0])) if switch else None,
        nvlink_domain=domain,
        nvlink=Link("nv", 450.0, latency_ms=0.001) if domain > 1 else None,
        nic_map=nic_map,
        nics_down=down,
        host_bridge_gb_s=host,
    )


def _degrees(heads):
    return [t for t in (1, 2, 4, 8, 16) if heads % t == 0 or t % heads == 0]


@given(clusters(), st.sampled_from([1, 2, 4, 8]), st.data(), st.integers(0, 5000), st.sampled_from([0.0, 3e6]))
def test_a_handoff_alone_matches_the_reference(cluster, heads, data, tokens, state):
    p = data.draw(st.sampled_from(_degrees(heads)))
    d = data.draw(st.sampled_from(_degrees(heads)))
    head_bytes = 4096.0
    terms = perfmodel.network.clusters.HeadTerms(heads, head_bytes, state=state)
    resolved = alone(cluster, terms, p, d)
    got, _, nbytes = alone_ms(resolved, cluster, tokens, tokens)
    want = ref.handoff_ms(as_reference(cluster), heads, head_bytes * tokens, p, d, state_bytes=state)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    reference_flows = ref.flows(as_reference(cluster), heads, head_bytes * tokens, p, d, state)
    moving = [resolved.flows[k] for k, b in enumerate(nbytes) if b > 0]  # (a flow of 0 bytes does not exist)
    assert len(moving) == len(reference_flows)
    assert sorted(b for k, b in enumerate(nbytes) if b > 0) == pytest.approx(
        sorted(f["bytes"] for f in reference_flows), rel=1e-12
    )
    if tokens and resolved.linear:  # the kernel's closed form of the resolved terms
        nbytes = resolved.full * tokens + resolved.state
        closed = nbytes / (resolved.bandwidth_gb_s * 1e9) * 1000 + resolved.latency_ms
        assert closed == pytest.approx(want, rel=1e-9)


@given(clusters(), st.data())
def test_several_handoffs_at_once_match_the_reference(cluster, data):
    heads = 8
    p = data.draw(st.sampled_from([1, 2, 4, 8]))
    workers = data.draw(st.integers(1, 3))
    pairs = [(a, data.draw(st.integers(0, workers - 1))) for a in range(workers)]
    terms = perfmodel.network.clusters.HeadTerms(heads, 1000.0)
    got = handoffs_at_once(cluster, terms, p, p, pairs, 2048, prefill_workers=workers, decode_workers=workers)
    want = ref.many_handoffs_ms(as_reference(cluster), heads, 1000.0 * 2048, p, p, pairs, workers, workers)
    assert got == pytest.approx(want, rel=1e-9)


@given(
    st.sampled_from([1, 2, 3, 4, 8]),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from([2, 4, 8, 16]),
)
def test_placement_matches_the_reference(tp, decode_tp, prefill_workers, decode_workers, g):
    c = Cluster(nic="ib-ndr", nics_per_node=g, gpus_per_node=g)
    want = ref.place(dict(gpus_per_node=g), tp, decode_tp, prefill_workers, decode_workers)
    got = c.placement(tp, decode_tp, prefill_workers, decode_workers)
    assert [list(w) for w in got[0]] == want[0] and [list(w) for w in got[1]] == want[1]


def test_heads_replicated_and_split():
    assert split_heads(8, 8) == tuple((i,) for i in range(8))
    assert split_heads(16, 8)[:4] == ((0,), (0,), (1,), (1,))
    assert split_heads(2, 8) == ((0, 1, 2, 3), (4, 5, 6, 7))
    with pytest.raises(perfmodel.InputError, match="cannot split the model's 8 KV heads"):
        split_heads(3, 8)


def test_replicated_heads_reach_each_decode_rank_once_spread_over_holders():
    """4 KV heads, TP8 -> decode_tp 8: each head on 2 prefill ranks; the m-th decode rank needing a head
    gets it from the (m mod 2)-th holder: i -> i."""
    c = hgx()
    resolved = alone(c, perfmodel.network.clusters.HeadTerms(4, 1000.0), 8, 8)
    assert [(f.src_rank, f.dst_rank) for f in resolved.flows] == [(i, i) for i in range(8)]
    mla = alone(
        c, perfmodel.network.clusters.HeadTerms(1, 1000.0), 4, 8
    )  # a latent: decode rank j from prefill j mod p
    assert [(f.src_rank, f.dst_rank) for f in mla.flows] == sorted((j % 4, j) for j in range(8))


# --- hostile values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(nics_per_node=3), "neither divides nor is a multiple of the 8 GPUs"),
        (dict(nics_per_node=0), "nics_per_node 0 is not a whole number >= 1"),
        (dict(nics_per_node=2.5), "nics_per_node 2.5 is not a whole number"),
        (dict(gpus_per_node=-8), "gpus_per_node -8"),
        (dict(nodes=0), "nodes 0"),
        (dict(fabric="torus"), "torus"),
        (dict(oversubscription=2.0), "a flat fabric is non-blocking"),
        (dict(fabric="rail", oversubscription=0.5), "oversubscription 0.5 is not a finite number >= 1"),
        (dict(fabric="rail", oversubscription=math.nan), "oversubscription nan"),
        (dict(hop_latency_ms=-0.001), "hop_latency_ms -0.001"),
        (dict(nvlink_domain=3), "neither a multiple nor a divisor of the 8 GPUs"),
        (dict(nvlink_domain=16), "no nvlink is given"),
        (dict(gpus_per_pcie_switch=2), "go together"),
        (dict(gpus_per_pcie_switch=3, pcie_switch_gb_s=64.0), "does not divide the 8 GPUs"),
        (dict(nics_per_node=2, gpus_per_pcie_switch=2, pcie_switch_gb_s=64.0), "4 GPUs share each NIC"),
        (dict(gpus_per_pcie_switch=2, pcie_switch_gb_s=0.0), "pcie_switch_gb_s 0.0 is not a finite number > 0"),
        (dict(nic=12), "is not a Link or a link name"),
        (dict(nic="no-such-nic"), "^nic: unknown link 'no-such-nic'"),
        (dict(nvlink_domain=8, nvlink="no-such-nvlink"), "^nvlink: unknown link"),
        (dict(nic="2x ib-ndr"), r"nic '2x ib-ndr' is 2 NICs.*Fix: pass nic='ib-ndr' and the count as nics_per_node"),
        (dict(nvlink="nvlink4"), "nvlink 'nvlink4' is given, but nvlink_domain is 1.*Fix: pass nvlink_domain"),
        (dict(name=5), "cluster name: 5 is not text"),
        (dict(name="  "), "cluster name: '  ' is empty"),
        (dict(nics_per_node=np.float64(8.5)), "nics_per_node 8.5 is not a whole number"),
        (dict(nodes=np.int64(0)), "nodes 0 is not a whole number >= 1"),
        (dict(transport=0.8), "is not a perfmodel.Transport"),
    ],
)
def test_hostile_cluster_fields_are_refused_with_one_clear_error(fields, message):
    base = dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)
    with pytest.raises(perfmodel.InputError, match=message):
        Cluster(**{**base, **fields})


def test_numpy_numbers_are_taken_as_the_numbers_they_are():
    python = Cluster(
        nic="ib-ndr",
        nics_per_node=8,
        gpus_per_node=8,
        nodes=2,
        nvlink_domain=8,
        nvlink="nvlink4",
        fabric="rail",
        oversubscription=2.0,
        hop_latency_ms=0.5,
        gpus_per_pcie_switch=2,
        pcie_switch_gb_s=64.0,
    )
    numpy = Cluster(
        nic="ib-ndr",
        nics_per_node=np.int64(8),
        gpus_per_node=np.int32(8),
        nodes=np.uint8(2),
        nvlink_domain=np.float64(8.0),
        nvlink="nvlink4",
        fabric="rail",
        oversubscription=np.float32(2.0),
        hop_latency_ms=np.float64(0.5),
        gpus_per_pcie_switch=np.int16(2),
        pcie_switch_gb_s=np.float32(64),
    )
    assert numpy == python
    assert all(
        type(getattr(numpy, f)) is int
        for f in ("nics_per_node", "gpus_per_node", "nodes", "nvlink_domain", "gpus_per_pcie_switch")
    )
    assert python.placement(np.int64(8), np.float64(4.0)) == python.placement(8, 4)


def test_an_nvlink_domain_axis_of_1_is_a_cluster_without_nvlink():
    df = perfmodel.sweep(
        cluster="hgx-h100-8x400g", nvlink_domain=[1, 8], model=LLAMA_70B, tp=4, num_input_tokens=TOKENS
    )
    no_domain = dataclasses.replace(perfmodel.CLUSTERS["hgx-h100-8x400g"], nvlink_domain=1, nvlink=None)
    assert df["handoff_delay_ms"].tolist() == [
        float(perfmodel.handoff_delay_ms(TOKENS, c, LLAMA_70B, tp=4))
        for c in (no_domain, perfmodel.CLUSTERS["hgx-h100-8x400g"])
    ]


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(efficiency=0.0), r"efficiency 0.0 is not in \(0, 1\]"),
        (dict(efficiency=1.2), r"efficiency 1.2 is not in \(0, 1\]"),
        (dict(efficiency=math.nan), "efficiency nan"),
        (dict(setup_ms=-1.0), "setup_ms -1.0"),
        (dict(per_message_ms=math.inf), "per_message_ms inf"),
    ],
)
def test_hostile_transports(fields, message):
    with pytest.raises(perfmodel.InputError, match=message):
        Transport("t", **fields)


def test_a_placement_larger_than_the_cluster_is_refused():
    with pytest.raises(perfmodel.InputError, match="need 2 nodes of 8 GPUs, the cluster has 1"):
        hgx(nodes=1).placement(8)
    with pytest.raises(perfmodel.InputError, match="need 4 nodes"):
        hgx(nodes=2).placement(16)


def test_a_rail_fabric_across_rails_crosses_leaf_spine_leaf_and_pays_three_hops():
    """TP8 -> decode_tp 2 on a rail fabric: prefill GPU i (NIC i) sends decode GPUs 0 and 1 (NICs 0, 1):
    most flows change rails; oversubscribed leaf uplinks of 2 NICs (2 nodes) x 50 / 2 = 50 GB/s."""
    c = hgx(fabric="rail", oversubscription=2.0, hop_latency_ms=0.003)
    resolved = alone(c, head_terms(LLAMA_70B, decode_tp=2), 8, 2)
    hops = {(f.src_rank, f.dst_rank): f.hops for f in resolved.flows}
    assert hops[(0, 0)] == 1 and hops[(4, 1)] == 3
    leaf = [r for r, kind in enumerate(resolved.resources.kinds) if kind == "leaf"]
    assert leaf and {resolved.resources.capacities[r] for r in leaf} == {50.0}
    assert not resolved.linear  # flows of one and three hops start at different times
    got = alone_ms(resolved, c, TOKENS, TOKENS)[0]
    want = ref.handoff_ms(as_reference(c), 8, 40960 * TOKENS, 8, 2)
    assert got == pytest.approx(want, rel=1e-12)


# --- a cluster where a link goes (the numpy API) ------------------------------------------------------


@given(
    st.sampled_from([1, 2, 4, 8]),
    st.lists(st.integers(0, 2**20), min_size=1, max_size=20),
    st.sampled_from(["llama-3.1-70b", "llama-3.1-8b", "qwen3-32b", "gemma-3-27b", "deepseek-v3"]),
    st.sampled_from([12.5, 50.0, 100.0]),
)
def test_the_degenerate_cluster_equals_its_nic_as_a_link_bit_for_bit(tp, tokens, model, rate):
    """One NIC per GPU, flat, ideal transport, no hop latency, p = d, alone."""
    c = Cluster(nic=Link("nic", rate), nics_per_node=8, gpus_per_node=8)
    got = perfmodel.handoff_delay_ms(tokens, c, model, tp=tp)
    want = perfmodel.handoff_delay_ms(tokens, rate, model, tp=tp)
    assert got.tobytes() == want.tobytes()


def test_the_worked_examples_through_handoff_delay_ms():
    f = perfmodel.handoff_delay_ms
    assert f(TOKENS, hgx(), LLAMA_70B, tp=8) == f(TOKENS, 50.0, LLAMA_70B, tp=8) == pytest.approx(26.8435456)
    assert f(TOKENS, hgx(4), LLAMA_70B, tp=8) == pytest.approx(53.6870912, rel=1e-15)
    assert f(TOKENS, hgx(), LLAMA_70B, tp=8, decode_tp=2) == pytest.approx(107.3741824, rel=1e-15)
    nvl72 = Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=4, nvlink_domain=72, nvlink="nvlink5")
    assert round(float(f(TOKENS, nvl72, LLAMA_70B, tp=8)), 10) == 1.4913080889


def test_fixed_costs_on_a_cluster_transport_caller_and_nic():
    transport = Transport("t", per_message_ms=0.001, setup_ms=0.5, efficiency=0.8)
    c = Cluster(nic=Link("nic", 50.0, latency_ms=0.01), nics_per_node=8, gpus_per_node=8, transport=transport)
    got = perfmodel.handoff_delay_ms(7500, c, "llama-3.1-8b", tp=8, latency_ms=0.1, per_message_ms=0.002, block_size=16)
    messages = 30_016  # 32 layers * 2 * 469 blocks (each rank posts its own)
    nbytes = 7500 * perfmodel.kv_bytes_per_token("llama-3.1-8b", tp=8)
    want = 0.5 + 0.01 + 0.1 + messages * 0.003 + nbytes / (40e9) * 1000
    assert got == pytest.approx(want, rel=1e-12)


def test_a_nonlinear_handoff_is_simulated_row_by_row():
    c = Cluster(nic=Link("nic50", 50.0), nics_per_node=1, gpus_per_node=8)
    tokens = [TOKENS, 0, 5, 5, 1000]
    got = perfmodel.handoff_delay_ms(tokens, c, LLAMA_70B, tp=8, decode_tp=1, state_bytes=1e9)
    terms = head_terms(LLAMA_70B, decode_tp=1, state_bytes=1e9)
    resolved = alone(c, terms, 8, 1)
    want = [alone_ms(resolved, c, n, n)[0] for n in tokens]
    assert got == pytest.approx(want, rel=1e-12) and got[1] == pytest.approx(1e9 / 50e9 * 1000)  # the state moves


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(scope="group"), "scope does not apply"),
        (dict(tp=8, kv_bytes_per_token=40960.0), "kv_bytes_per_token is a number of bytes"),
        (dict(tp=8, kv_bytes_per_token=[40960.0, 1000.0]), "holds some"),  # (at tp=1: one GPU's bytes each)
        (dict(tp=3), "cannot split the model's 8 KV heads"),
        (dict(tp=8, decode_tp=16, kv_bytes_per_token="llama-3.1-70b"), None),
    ],
)
def test_what_a_cluster_decides_is_refused_with_it(kwargs, message):
    args = {"kv_bytes_per_token": "llama-3.1-70b", **kwargs}
    model = args.pop("kv_bytes_per_token")
    if message is None:
        assert perfmodel.handoff_delay_ms(TOKENS, hgx(), model, **args) > 0
        return
    with pytest.raises(perfmodel.InputError, match=message):
        perfmodel.handoff_delay_ms(TOKENS, hgx(), model, **args)


def test_a_column_of_models_on_a_cluster_is_each_model_alone():
    models = ["llama-3.1-70b", "llama-3.1-8b", "llama-3.1-70b"]
    got = perfmodel.handoff_delay_ms([1024, 32768, 7], hgx(4), models, tp=8)
    want = [perfmodel.handoff_delay_ms(n, hgx(4), m, tp=8) for n, m in zip([1024, 32768, 7], models)]
    assert got.tolist() == want


def test_the_facade_takes_a_cluster():
    import pandas as pd

    df = pd.DataFrame({"num_input_tokens": [1024, 32768], "model": ["llama-3.1-70b", "llama-3.1-8b"]})
    got = perfmodel.handoff_delays(df, kv_transfer_bandwidth=hgx(4), kv_bytes_per_token="model", tp=8)
    assert got.tolist() == perfmodel.handoff_delay_ms([1024, 32768], hgx(4), df["model"], tp=8).tolist()


def test_a_sweep_over_a_cluster_and_its_fields():
    base = Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, name="hgx")
    df = perfmodel.sweep(
        cluster=base,
        nics_per_node=[1, 2, 4, 8],
        nic=["ib-ndr", "ib-xdr"],
        model=LLAMA_70B,
        tp=8,
        num_input_tokens=[1024, TOKENS],
    )
    assert len(df) == 16 and list(df["nics_per_node"].unique()) == [1, 2, 4, 8]
    for row in df.itertuples():
        c = Cluster(nic=row.nic, nics_per_node=int(row.nics_per_node), gpus_per_node=8)
        assert row.handoff_delay_ms == perfmodel.handoff_delay_ms(row.num_input_tokens, c, LLAMA_70B, tp=8)
    with pytest.raises(perfmodel.InputError, match="give a cluster axis too"):
        perfmodel.sweep(nics_per_node=[1, 2], model=LLAMA_70B, num_input_tokens=1, link="ib-ndr")
    with pytest.raises(perfmodel.InputError, match="neither divides"):
        perfmodel.sweep(cluster=base, nics_per_node=[3], model=LLAMA_70B, num_input_tokens=1)


# --- transports, NIC presets, cluster presets --------------------------------------------------------


def test_transports_are_rederived_from_their_benchmarks_line_rate():
    from perfmodel.network.links import transport_profiles, transports

    te = transports()["mooncake-te-rdma"]
    table = perfmodel.datasets.load("fastdeploy-rdma-blocksize")  # the benchmark it comes from, as published
    best = table.loc[table["notes"].str.startswith("Mooncake transfer_engine_bench"), "measured_gb_s"].max()
    assert te.efficiency == pytest.approx(40.71 / 50, rel=1e-9) and te.line_rate_gb_s == 50.0
    assert te.efficiency == pytest.approx(best / 50.0, rel=1e-14)  # its best throughput over the line rate
    assert te.setup_ms == 0.0 and te.per_message_ms > 0
    link = transport_profiles()["mooncake-te-rdma"]
    assert link.effective_bandwidth_gb_s == pytest.approx(40.71) and link.bandwidth_gb_s == 50.0  # not 52.5
    assert transports()["uccl-rdma"].efficiency == 1.0 and transports()["uccl-rdma"].line_rate_gb_s is None
    for name, transport in transports().items():
        assert 0 < transport.efficiency <= 1 and transport.source, name


def test_a_transport_on_a_nic_of_its_benchmarks_speed_is_its_profile_as_a_link():
    c = Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, transport="mooncake-te-rdma")
    on_cluster = perfmodel.handoff_delay_ms(32_768, c, "qwen3-235b-a22b", tp=4, decode_tp=8, block_size=16)
    on_link = perfmodel.handoff_delay_ms(
        32_768, "mooncake-te-rdma", "qwen3-235b-a22b", tp=4, decode_tp=8, block_size=16
    )
    assert on_cluster == pytest.approx(on_link, rel=1e-12)
    faster = dataclasses.replace(c, nic="roce-800g")  # the same transport on a NIC twice as fast
    assert faster.nic_capacity_gb_s == pytest.approx(2 * 40.71)


@pytest.mark.parametrize(
    "name, rate",
    [
        ("eth-100g", 12.5),
        ("eth-200g", 25.0),
        ("eth-400g", 50.0),
        ("eth-800g", 100.0),
        ("roce-100g", 12.5),
        ("roce-200g", 25.0),
        ("roce-400g", 50.0),
        ("roce-800g", 100.0),
        ("ib-hdr", 25.0),
        ("ib-ndr", 50.0),
        ("ib-xdr", 100.0),
        ("efa-100g", 12.5),
        ("efa-200g", 25.0),
    ],
)
def test_nic_presets_at_their_line_rate(name, rate):
    assert perfmodel.get_link(name).bandwidth_gb_s == rate


@pytest.mark.parametrize("name", list(perfmodel.CLUSTERS))
def test_every_cluster_preset_uses_nic_and_nvlink_presets_one_can_name(name):
    preset = perfmodel.CLUSTERS[name]
    assert preset.nic == perfmodel.LINKS[preset.nic.name]
    assert preset.nvlink is None or preset.nvlink == perfmodel.LINKS[preset.nvlink.name]
    again = Cluster(
        nic=preset.nic.name,
        nics_per_node=preset.nics_per_node,
        gpus_per_node=preset.gpus_per_node,
        nvlink_domain=preset.nvlink_domain,
        nvlink=preset.nvlink and preset.nvlink.name,
        fabric=preset.fabric,
        name=name,
    )
    assert again == preset and f"x {preset.nic.name} per node" in preset.describe()


def test_cluster_presets_by_name_and_user_presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    for name, cluster in perfmodel.CLUSTERS.items():
        assert perfmodel.handoff_delay_ms(TOKENS, name, LLAMA_70B, tp=8) == perfmodel.handoff_delay_ms(
            TOKENS, cluster, LLAMA_70B, tp=8
        )
    assert round(float(perfmodel.handoff_delay_ms(TOKENS, "gb200-nvl72", LLAMA_70B, tp=8)), 10) == 1.4913080889
    ours = Cluster(
        nic=Link("our-nic", 40.0, latency_ms=0.01),
        nics_per_node=4,
        gpus_per_node=8,
        transport=Transport("ours", per_message_ms=0.001, efficiency=0.9),
        name="our-cluster",
    )
    perfmodel.save_cluster(ours, source="lab")
    assert perfmodel.get_cluster("our-cluster") == ours
    assert perfmodel.handoff_delay_ms(
        TOKENS, "our-cluster", LLAMA_70B, tp=8, block_size=16
    ) == perfmodel.handoff_delay_ms(TOKENS, ours, LLAMA_70B, tp=8, block_size=16)
    with pytest.raises(perfmodel.InputError, match="built-in"):
        perfmodel.save_cluster(dataclasses.replace(ours, name="aws-p5"))
    with pytest.raises(perfmodel.InputError, match="unknown link"):
        perfmodel.handoff_delay_ms(TOKENS, "no-such-cluster", LLAMA_70B)


# --- explanations --------------------------------------------------------------------------------------


@given(clusters(), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]), st.integers(0, 40_000))
def test_handoff_flows_end_when_the_handoff_does(cluster, tp, decode_tp, tokens):
    flows = perfmodel.handoff_flows(tokens, cluster, LLAMA_70B, tp=tp, decode_tp=decode_tp, latency_ms=0.1)
    delay = perfmodel.handoff_delay_ms(tokens, cluster, LLAMA_70B, tp=tp, decode_tp=decode_tp, latency_ms=0.1)
    assert flows.attrs["delay_ms"] == pytest.approx(delay, rel=1e-12)
    if tokens:
        assert flows["bytes"].sum() == tokens * perfmodel.kv_bytes_per_token(LLAMA_70B, tp=decode_tp, scope="group")
        assert flows.attrs["bottleneck"]  # some resource holds the last flow back


def test_resource_loads_name_the_bottleneck():
    loads = perfmodel.resource_loads(perfmodel.handoff_flows(TOKENS, hgx(4), LLAMA_70B, tp=8))
    assert set(loads["kind"]) == {"nic"} and loads["flows"].max() == 2 and loads["bottleneck"].sum() == 1


# --- the inverse questions ------------------------------------------------------------------------------


def test_required_bandwidth_on_a_cluster_is_the_least_nic_line_rate_that_meets_the_budget():
    import numpy as np

    c = hgx(4)
    budgets = [50.0, 100.0, 0.0, 1.0]
    got = perfmodel.required_bandwidth([TOKENS, TOKENS, TOKENS, 0], LLAMA_70B, budget_ms=budgets, tp=8, cluster=c)
    assert got[2] == np.inf and got[3] == 0.0
    for rate, budget in zip(got[:2], budgets):

        def delay(r):
            nic = dataclasses.replace(c.nic, bandwidth_gb_s=float(r))
            return perfmodel.handoff_delay_ms(TOKENS, dataclasses.replace(c, nic=nic), LLAMA_70B, tp=8)

        assert delay(rate) <= budget < delay(np.nextafter(rate, 0))
    assert got[0] == pytest.approx(2 * 26.8435456)  # two GPUs per NIC: twice the line rate of one
    nvl72 = perfmodel.required_bandwidth(TOKENS, LLAMA_70B, budget_ms=10.0, tp=8, cluster="gb200-nvl72")
    assert np.isnan(nvl72)  # no NIC on the path


def test_max_tokens_within_on_a_cluster():
    got = perfmodel.max_tokens_within(hgx(4), LLAMA_70B, budget_ms=[10.0, 50.0], tp=8)
    assert got.tolist() == perfmodel.max_tokens_within(25.0, LLAMA_70B, budget_ms=[10.0, 50.0], tp=8).tolist()
    for n, budget in zip(got, [10.0, 50.0], strict=True):
        assert perfmodel.handoff_delay_ms(n, hgx(4), LLAMA_70B, tp=8) <= budget
        assert perfmodel.handoff_delay_ms(n + 1, hgx(4), LLAMA_70B, tp=8) > budget


def test_a_column_of_cluster_names_and_links():
    import pandas as pd

    df = pd.DataFrame(
        {
            "num_input_tokens": [TOKENS, TOKENS, 1024, TOKENS, 7],
            "where": ["hgx-h100-8x400g", "gb200-nvl72", "ib-ndr", "aws-p5", None],
        }
    )
    got = perfmodel.handoff_delays(df, kv_transfer_bandwidth="where", kv_bytes_per_token=LLAMA_70B, tp=8)
    want = [
        perfmodel.handoff_delay_ms(n, w, LLAMA_70B, tp=8) for n, w in zip(df["num_input_tokens"][:4], df["where"][:4])
    ]
    assert got[:4].tolist() == want and got.isna().tolist() == [False] * 4 + [True]
    with pytest.raises(perfmodel.InputError, match="row 1"):
        perfmodel.handoff_delay_ms([1, -1], ["aws-p5", "aws-p5"], LLAMA_70B, tp=8)


# --- the command line and the figure ---------------------------------------------------------------------


def test_the_command_line_takes_a_cluster_and_its_fields(tmp_path, capsys):
    import pandas as pd

    from perfmodel.cli import main

    requests = tmp_path / "requests.csv"
    pd.DataFrame({"num_input_tokens": [1024, TOKENS]}).to_csv(requests, index=False)
    out = tmp_path / "out.csv"
    assert (
        main(
            [
                "delay",
                str(requests),
                "--out",
                str(out),
                "--cluster",
                "hgx-h100-8x400g",
                "--nics-per-node",
                "4",
                "--model",
                LLAMA_70B,
                "--tp",
                "8",
            ]
        )
        == 0
    )
    want = perfmodel.handoff_delay_ms(
        [1024, TOKENS], dataclasses.replace(perfmodel.CLUSTERS["hgx-h100-8x400g"], nics_per_node=4), LLAMA_70B, tp=8
    )
    np.testing.assert_allclose(pd.read_csv(out)["handoff_delay_ms"], want, rtol=1e-12)  # (CSV: 13 digits)
    assert (
        main(
            [
                "delay",
                str(requests),
                "--out",
                str(out),
                "--nics-per-node",
                "4",
                "--model",
                LLAMA_70B,
                "--bandwidth",
                "50",
            ]
        )
        == 2
    )
    assert "give --cluster NAME too" in capsys.readouterr().err
    assert main(["clusters"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in perfmodel.CLUSTERS) and "Sources:" in listing


def test_the_main_job_sweeps_clusters_and_their_fields(tmp_path, capsys):
    import pandas as pd

    from perfmodel.cli import main

    out = tmp_path / "results"
    assert (
        main(
            [
                "sweep",
                "--cluster",
                "hgx-h100-8x400g",
                "aws-p5",
                "--nics-per-node",
                "1",
                "8",
                "--model",
                LLAMA_70B,
                "--tp",
                "8",
                "--tokens",
                "1k,32k",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = capsys.readouterr().out
    table = pd.read_csv(out / "sweep.csv")
    assert len(table) == 8 and {"cluster", "nics_per_node"} <= set(table.columns)
    for (name, nics), part in table.groupby(["cluster", "nics_per_node"]):
        cluster = dataclasses.replace(perfmodel.CLUSTERS[name], nics_per_node=nics)
        np.testing.assert_allclose(
            part["handoff_delay_ms"],
            perfmodel.handoff_delay_ms(part["num_input_tokens"].to_numpy(), cluster, LLAMA_70B, tp=8),
            rtol=1e-12,
        )
    assert "kv_transfer_bandwidth" not in summary  # (a cluster's NIC rate is not what the rows differ by)
    assert main(["sweep", "--nics-per-node", "4", "--out", str(tmp_path / "other")]) == 2
    assert "give --cluster NAME too" in capsys.readouterr().err


def test_the_figure_of_resource_loads_marks_the_bottleneck():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perfmodel.plotting import resource_loads

    fig, ax = plt.subplots()
    resource_loads(perfmodel.handoff_flows(TOKENS, hgx(4), LLAMA_70B, tp=8, decode_tp=2), ax=ax)
    hatched = [bar for bar in ax.patches if bar.get_hatch()]
    assert len(hatched) == 1 and hatched[0].get_width() == max(bar.get_width() for bar in ax.patches)
    plt.close(fig)


@pytest.mark.parametrize(
    "field, value", [("oversubscription", 0.5), ("hop_latency_ms", -1.0), ("pcie_switch_gb_s", 0.0)]
)
def test_a_cluster_field_axis_outside_its_range_says_how_to_give_it(field, value):
    with pytest.raises(perfmodel.InputError, match=rf"Fix: pass {field} as a"):
        perfmodel.sweep(cluster="hgx-h100-8x400g", **{field: [value]}, model=LLAMA_70B, tp=8, num_input_tokens=1024)


def _delay_error(tmp_path, capsys, *flags):
    from perfmodel.cli import main

    requests = tmp_path / "requests.csv"
    requests.write_text("num_input_tokens\n1024\n")
    code = main(
        [
            "delay",
            str(requests),
            "--out",
            str(tmp_path / "out.csv"),
            "--model",
            LLAMA_70B,
            "--tp",
            "8",
            "--cluster",
            "hgx-h100-8x400g",
            *flags,
        ]
    )
    return code, capsys.readouterr().err


def test_the_command_line_names_the_flag_behind_each_cluster_error(tmp_path, capsys):
    code, err = _delay_error(tmp_path, capsys, "--transport", "mooncake-te-rdma")
    assert code == 2 and "--per-message-ms" not in err, err
    assert "transport 'mooncake-te-rdma' costs 0.00046" in err and "ms per message" in err and "--block-size" in err
    code, err = _delay_error(tmp_path, capsys, "--nic", "efa-999")
    assert code == 2 and "error: --nic (nic): unknown link 'efa-999'" in err, err
    for value in ("inf", "-1"):
        code, err = _delay_error(tmp_path, capsys, "--hop-latency-ms", value)
        assert code == 2 and "[0, inf]" not in err and "finite number of ms >= 0" in err, err
    code, err = _delay_error(tmp_path, capsys, "--oversubscription", "0.5")
    assert code == 2 and "a number >= 1" in err, err
    code, err = _delay_error(tmp_path, capsys, "--gpus-per-pcie-switch", "2")
    assert code == 2 and "go together" in err and "=" not in err.split("Fix:")[1], err


def test_a_transports_per_message_cost_without_a_block_size_is_said_as_such():
    with pytest.raises(perfmodel.InputError, match="^block_size: the cluster's transport 'mooncake-te-rdma' costs"):
        perfmodel.handoff_delay_ms(
            TOKENS,
            Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, transport="mooncake-te-rdma"),
            LLAMA_70B,
            tp=8,
        )


def test_an_unknown_name_where_a_link_goes_suggests_clusters_and_links_by_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    perfmodel.save_cluster(Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, name="hgx-h998"))
    with pytest.raises(perfmodel.InputError) as raised:
        perfmodel.handoff_delay_ms(TOKENS, "hgx-h999", LLAMA_70B, tp=8)
    said = str(raised.value)
    assert "hgx-h998 (a user cluster in" in said and "hgx-h100-8x400g (a cluster preset)" in said, said
    with pytest.raises(perfmodel.InputError, match=r"ib-ndr \(a link preset\)"):
        perfmodel.handoff_delay_ms(TOKENS, "ib-ndx", LLAMA_70B, tp=8)


# --- the tester's findings on clusters as tables --------------------------------------------------------


def test_coerce_turns_an_unknown_name_missing_in_a_column_of_clusters_and_links_too():
    import pandas as pd

    df = pd.DataFrame(
        {
            "num_input_tokens": [TOKENS] * 3,
            "kv_bytes_per_token": [LLAMA_70B] * 3,
            "kv_transfer_bandwidth": ["hgx-h100-8x400g", "ib-ndx", "ib-ndr"],
        },
        index=["a", "b", "c"],
    )
    got = perfmodel.handoff_delays(df, tp=8, errors="coerce")
    assert got.isna().tolist() == [False, True, False]
    assert got["a"] == perfmodel.handoff_delay_ms(TOKENS, "hgx-h100-8x400g", LLAMA_70B, tp=8)
    assert got["c"] == perfmodel.handoff_delay_ms(TOKENS, "ib-ndr", LLAMA_70B, tp=8)
    with pytest.raises(perfmodel.InputError, match="ib-ndx"):
        perfmodel.handoff_delays(df, tp=8)


def test_a_column_mixing_models_and_bytes_on_a_cluster_is_each_alone_or_one_clear_error():
    c = "hgx-h100-8x400g"
    got = perfmodel.handoff_delay_ms(TOKENS, c, [LLAMA_70B, 40_960.0, "1000"])
    assert got.tolist() == [perfmodel.handoff_delay_ms(TOKENS, c, m) for m in (LLAMA_70B, 40_960.0, 1000.0)]
    numbers = perfmodel.handoff_delay_ms(TOKENS, c, [40_960.0, 100.0])
    assert numbers.tolist() == [perfmodel.handoff_delay_ms(TOKENS, c, b) for b in (40_960.0, 100.0)]
    with pytest.raises(perfmodel.InputError, match="kv_bytes_per_token: .*number"):
        perfmodel.handoff_delay_ms(TOKENS, c, [LLAMA_70B, 40_960.0], tp=8)
    with pytest.raises(perfmodel.InputError, match="row 1"):
        perfmodel.handoff_delay_ms(TOKENS, c, [LLAMA_70B, -1.0])
    got = perfmodel.handoff_delay_ms(TOKENS, c, [LLAMA_70B, -1.0, "no-such-model"], errors="coerce")
    assert np.isnan(got[1:]).all() and got[0] == perfmodel.handoff_delay_ms(TOKENS, c, LLAMA_70B)


def _per_flows(flows):
    """All bytes the handoff moves, and the rate at which it moves them after its last flow's fixed costs."""
    last = flows["time_ms"].idxmax()
    moved = int(flows["bytes"].sum())
    return moved, moved / ((flows.attrs["delay_ms"] - flows["start_ms"][last]) / 1000.0) / 1e9


@pytest.mark.parametrize(
    "clusters, model, tp, decode_tp",
    [
        (["hgx-h100-8x400g", "aws-p5", "gb200-nvl72"], LLAMA_70B, 8, [8, 2]),
        (["hgx-h100-8x400g", "aws-p5"], "qwen3-next-80b-a3b", 2, [2, 1]),  # (state: simulated row by row)
        ([dataclasses.replace(perfmodel.CLUSTERS["aws-p5"], transport="mooncake-te-rdma")], LLAMA_70B, 8, [8, 4]),
    ],
)
def test_a_sweeps_columns_on_a_cluster_mean_all_the_handoffs_bytes_and_their_rate(clusters, model, tp, decode_tp):
    df = perfmodel.sweep(
        cluster=clusters,
        model=model,
        tp=tp,
        decode_tp=decode_tp,
        num_input_tokens=[1024, TOKENS],
        latency_ms=0.25,
        block_size=64,
    )
    assert df["transfer_bytes"].dtype == np.int64
    for row in df.itertuples():
        cluster = clusters[list(df["cluster"].cat.categories).index(row.cluster)]
        flows = perfmodel.handoff_flows(
            row.num_input_tokens, cluster, model, tp=tp, decode_tp=row.decode_tp, latency_ms=0.25, block_size=64
        )
        moved, rate = _per_flows(flows)
        assert row.transfer_bytes == moved
        assert row.kv_transfer_bandwidth == pytest.approx(rate, rel=1e-9)
        assert row.handoff_delay_ms == pytest.approx(flows.attrs["delay_ms"], rel=1e-12)


def test_handoff_flows_bytes_and_ranks_are_integers_and_messages_missing_unless_counted():
    for tokens in (TOKENS, 0):
        flows = perfmodel.handoff_flows(tokens, "aws-p5", LLAMA_70B, tp=8)
        for column in ("src_rank", "dst_rank", "sub", "src_gpu", "dst_gpu", "heads", "bytes"):
            assert flows[column].dtype == np.int64, column
        assert flows["messages"].isna().all()
    counted = perfmodel.handoff_flows(TOKENS, "aws-p5", LLAMA_70B, tp=8, block_size=16)
    assert (counted["messages"] == perfmodel.kv_messages(LLAMA_70B, TOKENS, 16)).all()


@pytest.mark.parametrize("name", ["handoff_delay_ms", "sweep", "max_tokens_within", "handoff_delays"])
def test_every_entry_point_that_takes_a_link_says_it_takes_a_cluster(name):
    from perfmodel._accessor import PerfmodelAccessor

    assert "perfmodel.Cluster" in getattr(perfmodel, name).__doc__
    assert "perfmodel.Cluster" in PerfmodelAccessor.handoff_delay.__doc__
    assert "cluster=" in perfmodel.required_bandwidth.__doc__.split("Examples")[1]


# --- the fewest NICs per node for a budget -----------------------------------------------------------------


@pytest.mark.parametrize(
    "cluster, tp, decode_tp",
    [
        (hgx(), 8, None),
        (hgx(), 8, 2),
        (hgx(), 2, None),
        (Cluster(nic="ib-ndr", nics_per_node=2, gpus_per_node=4, fabric="rail", oversubscription=2.0), 4, None),
    ],
)
def test_required_nics_per_node_is_the_smallest_count_within_budget(cluster, tp, decode_tp):
    """Against trying every count by hand, one prompt at a time (no monotonicity assumed)."""
    tokens = [0, 1, 512, 4096, 32_768, 131_072, 1_000_000]
    budget = 40.0
    got = perfmodel.required_nics_per_node(tokens, cluster, LLAMA_70B, tp=tp, decode_tp=decode_tp, budget_ms=budget)
    g = cluster.gpus_per_node
    counts = [c for c in range(1, g + 1) if g % c == 0] + [g * k for k in (2, 3, 4)]
    for n, answer in zip(tokens, got, strict=True):  # (a shorter answer checked nothing more)
        fits = [
            c
            for c in counts
            if perfmodel.handoff_delay_ms(
                n, dataclasses.replace(cluster, nics_per_node=c), LLAMA_70B, tp=tp, decode_tp=decode_tp
            )
            <= budget
        ]
        assert answer == (min(fits) if fits else math.inf), (n, answer, fits)


def test_required_nics_per_node_says_what_it_cannot_answer():
    got = perfmodel.required_nics_per_node(
        [32_768, 32_768],
        "hgx-h100-8x400g",
        LLAMA_70B,
        tp=8,
        budget_ms=50,
        worker_type=["prefill", "decode"],
        latency_ms=0.0,
    )
    assert got[0] == 8 and np.isnan(got[1])  # a decode worker hands nothing off
    assert (
        perfmodel.required_nics_per_node(32_768, "hgx-h100-8x400g", LLAMA_70B, tp=8, budget_ms=5, latency_ms=6.0)
        == math.inf
    )  # fixed costs alone exceed it
    assert perfmodel.required_nics_per_node(32_768, "gb200-nvl72", LLAMA_70B, tp=8, budget_ms=5) == 1  # NVLink only
    for budget in (0, -1, math.nan, math.inf, "50", True):
        with pytest.raises(perfmodel.InputError, match="budget_ms"):
            perfmodel.required_nics_per_node(32_768, "hgx-h100-8x400g", LLAMA_70B, tp=8, budget_ms=budget)


def test_required_nics_per_node_says_which_counts_it_could_not_try():
    """With a NIC down, counts 1, 2, 16, 24 and 32 cannot be built: they were skipped without a word, and the
    answer inf read "even 4 NICs per GPU are too slow" though 8 was the most tried."""
    down = Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, nics_down=(3,))
    with pytest.warns(
        UserWarning,
        match=r"cannot take 5 NIC counts per node \(1: nics_down.*a node has 1 .*; 2: .*a node has 2 .*; 16: .*among 4, 8",
    ):
        got = perfmodel.required_nics_per_node(32768, down, LLAMA_70B, tp=8, budget_ms=30)
    assert np.isinf(got).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (every count buildable: nothing to say)
        perfmodel.required_nics_per_node(32768, "hgx-h100-8x400g", LLAMA_70B, tp=8, budget_ms=30)


def test_handoff_flows_bytes_past_2_to_the_53_are_floats_not_wrapped_integers():
    """2**48 tokens of a 70B model is 1.15e19 bytes a flow: int64 wrapped it to -9.2e18 (and resource_loads)."""
    flows = perfmodel.handoff_flows(2**48, "hgx-h100-8x400g", LLAMA_70B, tp=8)
    assert flows["bytes"].dtype == np.float64
    assert flows["bytes"].iloc[0] == 2.0**48 * 40960
    loads = perfmodel.resource_loads(flows)
    assert (loads["bytes"] > 0).all() and (loads["busy_ms"] > 0).all()


@pytest.mark.parametrize("tp, decode_tp", [(4, None), (2, 8), (8, 2)])
def test_a_given_state_counted_as_the_docs_say_equals_the_models_own(tp, decode_tp):
    """state_bytes is counted as a number of bytes per token is (one rank's, the group's, each decode rank's on
    a cluster): the model's own state so counted, given back, gives the same delays on every path."""
    model = "qwen3-next-80b-a3b"
    d = decode_tp or tp
    for scope in ("rank", "group"):
        own = perfmodel.kv_terms(model, tp=tp, decode_tp=decode_tp, scope=scope).state_bytes
        for tokens in (0, 4096):
            default = perfmodel.handoff_delay_ms(tokens, 50.0, model, tp=tp, decode_tp=decode_tp, scope=scope)
            given = perfmodel.handoff_delay_ms(tokens, 50.0, model, tp=tp, decode_tp=decode_tp, scope=scope,
                                               state_bytes=own)  # fmt: skip
            assert given == default, (scope, tokens)
    cluster = Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8)
    each = perfmodel.kv_terms(model, tp=d).state_bytes
    for tokens in (0, 4096):
        default = perfmodel.handoff_delay_ms(tokens, cluster, model, tp=tp, decode_tp=decode_tp)
        given = perfmodel.handoff_delay_ms(tokens, cluster, model, tp=tp, decode_tp=decode_tp, state_bytes=each)
        assert given == default, tokens
