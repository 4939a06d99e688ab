"""The cluster surfaces' edges: numeric fields of public objects (bools refused, numpy scalars taken), counts that
size a handoff's work bounded, NaN on the command line said as what it is, and one handoff alone priced alike by
every route."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import Cluster, Link, Transport
from perfmodel.inputs.table import CLUSTER_BOUNDS, MAX_CLUSTER_TP, MAX_NICS_PER_GPU
from perfmodel.model.models import ModelShape

# --- numeric fields of public objects: bools refused, numpy scalars taken ---------------------------------------

_BASES = {
    Link: dict(name="x", bandwidth_gb_s=50.0),
    Transport: dict(name="t"),
    Cluster: dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8),
    ModelShape: dict(),
}
#: A valid value of each numeric field (with the fields it needs beside it).
_VALID = {
    (Link, "bandwidth_gb_s"): (1.0, {}),
    (Link, "latency_ms"): (1.0, {}),
    (Link, "efficiency"): (1.0, {}),
    (Link, "max_relative_error"): (1.0, {}),
    (Link, "per_block_ms"): (1.0, {}),
    (Link, "per_message_ms"): (1.0, {}),
    (Transport, "per_message_ms"): (1.0, {}),
    (Transport, "per_block_ms"): (1.0, {}),
    (Transport, "setup_ms"): (1.0, {}),
    (Transport, "efficiency"): (1.0, {}),
    (Transport, "line_rate_gb_s"): (1.0, {}),
    (Transport, "measured_gpus"): (2, {"measured_over": "node"}),
    (Cluster, "nics_per_node"): (1, {}),
    (Cluster, "gpus_per_node"): (8, {}),
    (Cluster, "nodes"): (1, {}),
    (Cluster, "nvlink_domain"): (8, {"nvlink": "nvlink4"}),
    (Cluster, "oversubscription"): (1.0, {"fabric": "rail"}),
    (Cluster, "hop_latency_ms"): (1.0, {}),
    (Cluster, "gpus_per_pcie_switch"): (8, {"pcie_switch_gb_s": 64.0}),
    (Cluster, "pcie_switch_gb_s"): (1.0, {"gpus_per_pcie_switch": 8}),
    (Cluster, "host_bridge_gb_s"): (1.0, {"gpus_per_pcie_switch": 2, "pcie_switch_gb_s": 64.0, "nics_down": (3,)}),
    (Transport, "node_gb_s"): (1.0, {}),
    (ModelShape, "tp"): (1, {}),
    (ModelShape, "decode_tp"): (1, {}),
}
_NOT_NUMBERS = {
    "name",
    "nic",
    "transport",
    "nvlink",
    "fabric",
    "fit",
    "source",
    "kv_cache_dtype",
    "scope",
    "kv_layout",
    "measured_over",
    "nic_map",  # (NIC indices: tuples whose entries tests/test_degraded_paths.py checks)
    "nics_down",
}


def _numeric_fields():
    for kind in _BASES:
        for f in dataclasses.fields(kind):
            if f.name not in _NOT_NUMBERS:
                yield kind, f.name


def test_every_numeric_field_is_listed():
    """A new numeric field of a public object must be added to _VALID (so it is covered below)."""
    assert set(_numeric_fields()) == set(_VALID)


@pytest.mark.parametrize(
    "kind, name", sorted(_VALID, key=lambda k: (k[0].__name__, k[1])), ids=lambda v: getattr(v, "__name__", v)
)
@pytest.mark.parametrize("boolean", [True, False, np.True_, np.False_], ids=repr)
def test_every_numeric_field_refuses_booleans(kind, name, boolean):
    _, needs = _VALID[(kind, name)]
    with pytest.raises(perfmodel.InputError, match=rf"{name}|boolean"):
        kind(**{**_BASES[kind], **needs, name: boolean})


@pytest.mark.parametrize(
    "kind, name", sorted(_VALID, key=lambda k: (k[0].__name__, k[1])), ids=lambda v: getattr(v, "__name__", v)
)
@pytest.mark.parametrize("as_numpy", [np.float32, np.float64, np.int64, np.int32], ids=lambda t: t.__name__)
def test_every_numeric_field_takes_numpy_scalars_as_the_numbers_they_are(kind, name, as_numpy):
    value, needs = _VALID[(kind, name)]
    plain = kind(**{**_BASES[kind], **needs, name: value})
    numpy = kind(**{**_BASES[kind], **needs, name: as_numpy(value)})
    assert numpy == plain
    assert type(getattr(numpy, name)) in (int, float)  # (a Python number, never a numpy scalar)


def test_a_half_efficiency_of_numpy_is_a_half():
    assert Transport(efficiency=np.float32(0.5)).efficiency == 0.5
    assert (
        Cluster(
            nic="ib-ndr", nics_per_node=8, gpus_per_node=8, transport=Transport(efficiency=np.float32(0.5))
        ).nic_capacity_gb_s
        == 25.0
    )


# --- counts that size work: bounded ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CLUSTER_BOUNDS))
def test_each_cluster_count_is_bounded_in_one_line_naming_the_bound(name):
    bound, why = CLUSTER_BOUNDS[name]
    fields = {**dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8), name: bound + 1}
    if name == "nvlink_domain":
        fields["nvlink"] = "nvlink4"
    if name == "gpus_per_pcie_switch":
        fields["pcie_switch_gb_s"] = 64.0
    with pytest.raises(perfmodel.InputError) as error:
        Cluster(**fields)
    text = str(error.value)
    assert "\n" not in text and name in text and f"{bound + 1:,}" in text and f"{bound:,}" in text and why in text


def test_a_million_nics_is_refused_before_any_work():
    with pytest.raises(perfmodel.InputError, match=r"nics_per_node 1,048,576 is above 64"):
        Cluster(nic="ib-ndr", nics_per_node=2**20, gpus_per_node=8)


def test_nics_per_gpu_are_bounded():
    with pytest.raises(perfmodel.InputError, match=rf"more than the {MAX_NICS_PER_GPU}.*Fix: pass nics_per_node <= 8"):
        Cluster(nic="ib-ndr", nics_per_node=16, gpus_per_node=1)
    Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=1)


@pytest.mark.parametrize("name", ["tp", "decode_tp"])
def test_a_tensor_parallel_degree_on_a_cluster_is_bounded(name):
    c = Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)
    inputs = {**dict(tp=1, decode_tp=1), name: 2 * MAX_CLUSTER_TP}
    for call in (
        lambda: perfmodel.handoff_delay_ms(1000, c, "llama-3.1-8b", **inputs),
        lambda: perfmodel.handoff_flows(1000, c, "llama-3.1-8b", **inputs),
    ):
        with pytest.raises(perfmodel.InputError, match=rf"^{name}: 1,152 GPUs per worker.*above 576"):
            call()


def test_a_sweep_over_an_absurd_nic_count_is_refused():
    with pytest.raises(perfmodel.InputError, match="nics_per_node"):
        perfmodel.sweep(
            num_input_tokens=[1000], cluster="hgx-h100-8x400g", model="llama-3.1-8b", nics_per_node=[8, 2**20]
        )


# --- NaN on the command line -------------------------------------------------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "flag, said",
    [
        ("--oversubscription", "pass oversubscription as a number >= 1"),
        ("--hop-latency-ms", "pass hop_latency_ms as a finite number of ms >= 0"),
        ("--latency-ms", "latency is a finite number of milliseconds >= 0"),
        ("--cache-hit", "pass a number in [0, 1]"),
        ("--bandwidth", "pass a number > 0"),
    ],
)
def test_nan_on_a_float_flag_is_named_not_a_number_with_its_range(flag, said):
    link = ["--cluster", "hgx-h100-8x400g"] if flag in ("--oversubscription", "--hop-latency-ms") else []
    if flag != "--bandwidth" and not link:
        link = ["--bandwidth", "50"]
    done = _cli("sweep", "--model", "llama-3.1-8b", *link, flag, "nan")
    assert done.returncode != 0
    line = done.stderr.strip()
    assert "\n" not in line and "not a number (NaN)" in line and said in line and "outside" not in line, line


# --- one handoff alone: one answer by every route ----------------------------------------------------------------

_MODEL = "llama-3.1-8b"  # 8 KV heads, 32 layers


@st.composite
def _mixed_clusters(draw):
    """Clusters of every cost, their NVLink domains often spanning nodes (so a decode worker's ranks are some
    NVLinked to the prefill worker, others reached over NICs)."""
    g = draw(st.sampled_from([1, 2, 4]))
    n = draw(st.sampled_from(sorted({x for x in (1, 2, 4, 8) if (g % x == 0 or x % g == 0) and x <= 8 * g})))
    fabric = draw(st.sampled_from(["flat", "rail"]))
    sharing = g // n if n <= g else 1
    switch = draw(st.sampled_from([None, *[s for s in (1, 2, 4) if g % s == 0 and s % sharing == 0]]))
    domain = draw(st.sampled_from(sorted({1, g, 2 * g, 4 * g})))
    cost = st.sampled_from([0.0, 0.0005, 0.002])
    nic = Link(
        "nic",
        draw(st.sampled_from([12.5, 50.0])),
        latency_ms=draw(st.sampled_from([0.0, 0.01])),
        efficiency=draw(st.sampled_from([1.0, 0.9])),
        per_message_ms=draw(cost),
        per_block_ms=draw(cost),
    )
    nvlink = (
        Link(
            "nv",
            draw(st.sampled_from([10.0, 450.0])),
            latency_ms=draw(st.sampled_from([0.0, 0.001])),
            per_message_ms=draw(cost),
            per_block_ms=draw(cost),
        )
        if domain > 1
        else None
    )
    transport = Transport(
        "t",
        efficiency=draw(st.sampled_from([1.0, 0.8])),
        setup_ms=draw(cost),
        per_message_ms=draw(cost),
        per_block_ms=draw(cost),
    )
    return Cluster(
        nic=nic,
        nics_per_node=n,
        gpus_per_node=g,
        fabric=fabric,
        transport=transport,
        oversubscription=draw(st.sampled_from([1.0, 2.0])) if fabric == "rail" else 1.0,
        hop_latency_ms=draw(st.sampled_from([0.0, 0.003])),
        gpus_per_pcie_switch=switch,
        pcie_switch_gb_s=draw(st.sampled_from([20.0, 64.0])) if switch else None,
        nvlink_domain=domain,
        nvlink=nvlink,
    )


def _replayed(trace, cluster, contention, **inputs):
    import pandas as pd

    table = perfmodel.replay_handoffs(pd.DataFrame(trace), cluster, _MODEL, contention=contention, **inputs)
    return table["handoff_delay_ms"].to_numpy()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _mixed_clusters(),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(1, 3000),
    st.sampled_from([16, 64]),
    st.sampled_from([1.0, 4.0, math.inf]),
    st.sampled_from(["layer_kv", "block"]),
    st.sampled_from([(0.0, 0.0, 0.0), (0.02, 0.0003, 0.0001)]),
)
def test_one_handoff_alone_has_one_answer_by_every_route(cluster, p, d, tokens, block, merged, layout, caller):
    latency, per_message, per_block = caller
    inputs = dict(
        tp=p,
        decode_tp=d,
        block_size=block,
        blocks_per_message=merged,
        kv_layout=layout,
        latency_ms=latency,
        per_message_ms=per_message,
        per_block_ms=per_block,
    )
    delay = float(perfmodel.handoff_delay_ms(tokens, cluster, _MODEL, **inputs))
    flows = perfmodel.handoff_flows(tokens, cluster, _MODEL, **inputs)
    assert flows.attrs["delay_ms"] == pytest.approx(delay, rel=1e-9)
    assert float(flows["time_ms"].max()) == pytest.approx(delay, rel=1e-9)
    one = [dict(arrival_ms=0.0, num_input_tokens=tokens)]
    apart = [dict(arrival_ms=k * 1e4, num_input_tokens=tokens) for k in range(3)]  # (never overlapping)
    for trace, contention in ((one, "none"), (one, "fair"), (apart, "fair")):
        got = _replayed(trace, cluster, contention, **inputs)
        assert got == pytest.approx([delay] * len(trace), rel=1e-9), (contention, len(trace))


def _as_reference(c: Cluster) -> dict:
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
    )


@settings(max_examples=40, deadline=None)
@given(_mixed_clusters(), st.sampled_from([1, 2, 4, 8]), st.integers(1, 3000), st.sampled_from([0.0, 3e6]))
def test_one_handoff_alone_matches_the_slow_reference(cluster, p, tokens, state):
    """Without costs per message or block (the reference has none), the delay is the reference's simulation."""
    from tests import reference_cluster as ref

    plain = dataclasses.replace(
        cluster,
        nic=dataclasses.replace(cluster.nic, per_message_ms=0.0, per_block_ms=0.0),
        nvlink=None
        if cluster.nvlink is None
        else dataclasses.replace(cluster.nvlink, per_message_ms=0.0, per_block_ms=0.0),
        transport=dataclasses.replace(cluster.transport, per_message_ms=0.0, per_block_ms=0.0),
    )
    head_bytes = perfmodel.network.clusters.head_terms(_MODEL).full
    got = float(perfmodel.handoff_delay_ms(tokens, plain, _MODEL, tp=p, decode_tp=8, state_bytes=state))
    want = ref.handoff_ms(
        _as_reference(plain), 8, head_bytes * tokens, p, 8, fixed_ms=plain.transport.setup_ms, state_bytes=state
    )
    assert got == pytest.approx(want, rel=1e-9)


def test_the_mixed_handoff_of_nvlink_and_nic_flows_pays_the_nics_messages():
    """Decode ranks 0-3 NVLinked to the prefill worker, 4-7 over NICs that cost 1 us per message: each flow pays
    its own link's costs, and the handoff ends with its last flow (a NIC flow), by every route."""
    nic = Link("nic", 50.0, per_message_ms=0.001)
    c = Cluster(nic=nic, nics_per_node=4, gpus_per_node=4, nvlink_domain=8, nvlink=Link("slow", 10.0))
    inputs = dict(tp=4, decode_tp=8, block_size=16)
    flows = perfmodel.handoff_flows(4096, c, _MODEL, **inputs)
    nic_flows = flows[flows["dst_gpu"] >= 8]
    assert (nic_flows["start_ms"] == 16384 * 0.001).all()  # (16,384 messages each)
    delay = float(perfmodel.handoff_delay_ms(4096, c, _MODEL, **inputs))
    assert delay == pytest.approx(flows.attrs["delay_ms"], rel=1e-12) and delay > 16.384
    import pandas as pd

    for contention in ("none", "fair"):
        table = perfmodel.replay_handoffs(
            pd.DataFrame(dict(arrival_ms=[0.0], num_input_tokens=[4096])), c, _MODEL, contention=contention, **inputs
        )
        assert table["handoff_delay_ms"].iloc[0] == pytest.approx(delay, rel=1e-12)


# --- the cluster path validates as the link path does -----------------------------------------------------------

_C = Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)


@pytest.mark.parametrize("state", [-5, -1e6, -math.inf, math.inf])
def test_a_bad_state_on_a_cluster_is_refused_as_on_a_link(state):
    with pytest.raises(perfmodel.InputError) as on_link:
        perfmodel.handoff_delay_ms(4096, 50.0, _MODEL, state_bytes=state)
    for call in (
        lambda: perfmodel.handoff_delay_ms(4096, _C, _MODEL, tp=8, state_bytes=state),
        lambda: perfmodel.handoff_flows(4096, _C, _MODEL, tp=8, state_bytes=state),
    ):
        with pytest.raises(perfmodel.InputError) as on_cluster:
            call()
        assert str(on_cluster.value) == str(on_link.value)


def test_a_nan_state_on_a_cluster_gives_nan_as_on_a_link():
    assert math.isnan(perfmodel.handoff_delay_ms(4096, 50.0, _MODEL, state_bytes=math.nan))
    assert math.isnan(perfmodel.handoff_delay_ms(4096, _C, _MODEL, tp=8, state_bytes=math.nan))
    assert np.isnan(perfmodel.handoff_delay_ms([4096, 10], _C, _MODEL, tp=8, state_bytes=math.nan)).all()
    with pytest.raises(perfmodel.InputError, match="state_bytes: is NaN"):
        perfmodel.handoff_flows(4096, _C, _MODEL, tp=8, state_bytes=math.nan)


def test_a_bad_state_with_coerce_is_missing_on_a_cluster():
    got = perfmodel.handoff_delay_ms([4096, 10], _C, _MODEL, tp=8, state_bytes=-5, errors="coerce")
    assert np.isnan(got).all()


@pytest.mark.parametrize(
    "name, value",
    [
        ("latency_ms", -1.0),
        ("latency_ms", math.nan),
        ("latency_ms", True),
        ("per_message_ms", -1.0),
        ("per_block_ms", -1.0),
        ("per_message_ms", math.nan),
        ("per_block_ms", math.inf),
    ],
)
def test_handoff_flows_refuses_what_handoff_delay_ms_refuses(name, value):
    inputs = dict(tp=8, block_size=16, **{name: value})
    with pytest.raises(perfmodel.InputError) as delay:
        perfmodel.handoff_delay_ms(4096, _C, _MODEL, **inputs)
    with pytest.raises(perfmodel.InputError) as flows:
        perfmodel.handoff_flows(4096, _C, _MODEL, **inputs)
    assert str(flows.value) == str(delay.value)


@pytest.mark.parametrize("which", ["nic", "nvlink"])
def test_a_replay_on_a_cluster_refuses_an_infinite_link_as_a_replay_on_a_link_does(which):
    import pandas as pd

    infinite = Link("inf", math.inf)
    fields = dict(nic=infinite) if which == "nic" else dict(nic="ib-ndr", nvlink_domain=16, nvlink=infinite)
    c = Cluster(**{**dict(nics_per_node=8, gpus_per_node=8), **fields})
    trace = pd.DataFrame(dict(arrival_ms=[0.0], num_input_tokens=[4096]))
    for contention in ("none", "fair"):
        with pytest.raises(perfmodel.InputError, match="a replay needs a finite bandwidth"):
            perfmodel.replay_handoffs(trace, c, _MODEL, tp=8, contention=contention)
    with pytest.raises(perfmodel.InputError, match="a replay needs a finite bandwidth"):
        perfmodel.replay_handoffs(trace, infinite, _MODEL, tp=8)
    # the numpy API keeps the link path's rule: +inf moves bytes in 0 ms (the fixed costs remain)
    alone = float(perfmodel.handoff_delay_ms(4096, c, _MODEL, tp=8))
    assert alone == float(perfmodel.handoff_delay_ms(4096, infinite, _MODEL, tp=8)) == 0.0


def test_a_column_of_states_on_a_cluster_is_each_row_its_own_state():
    """A cluster takes one state per handoff: a column goes one call per distinct size, each row as alone."""
    states = [0.0, 1e6, math.nan, 1e6]
    got = perfmodel.handoff_delay_ms([4096, 10, 4096, 4096], _C, _MODEL, tp=8, state_bytes=states)
    want = [
        float(perfmodel.handoff_delay_ms(t, _C, _MODEL, tp=8, state_bytes=s))
        for t, s in zip([4096, 10, 4096, 4096], states)
    ]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(perfmodel.InputError) as on_link:
        perfmodel.handoff_delay_ms([4096, 10], 50.0, _MODEL, state_bytes=[5, -5])
    with pytest.raises(perfmodel.InputError) as on_cluster:
        perfmodel.handoff_delay_ms([4096, 10], _C, _MODEL, tp=8, state_bytes=[5, -5])
    assert str(on_cluster.value) == str(on_link.value)


def test_a_sweep_over_states_on_a_cluster_equals_direct_calls():
    table = perfmodel.sweep(num_input_tokens=[4096, 10], cluster=_C, model=_MODEL, state_bytes=[0, 1e6], tp=8)
    for row in table.itertuples():
        assert row.handoff_delay_ms == float(
            perfmodel.handoff_delay_ms(row.num_input_tokens, _C, _MODEL, tp=8, state_bytes=row.state_bytes)
        )


def test_a_replay_whose_pairs_hold_too_many_flows_is_refused_before_any_work():
    import pandas as pd

    trace = pd.DataFrame(dict(arrival_ms=[0.0], num_input_tokens=[4096]))
    c = Cluster(nic="ib-ndr", nics_per_node=64, gpus_per_node=8)
    with pytest.raises(
        perfmodel.InputError,
        match=rf"^decode_workers: .*pairs of up to 4,096 flows each, more than "
        rf"the {perfmodel.get_options()['max_pair_flows']:,}",
    ):
        perfmodel.replay_handoffs(trace, c, _MODEL, tp=512, decode_tp=512, decode_workers=1000, contention="fair")


def test_one_pair_of_too_many_flows_is_said_in_the_singular_and_names_tp():
    import pandas as pd

    trace = pd.DataFrame(dict(arrival_ms=[0.0], num_input_tokens=[4096]))
    with (
        perfmodel.set_options(max_pair_flows=3),
        pytest.raises(
            perfmodel.InputError,
            match=r"^tp: 1 prefill and 1 decode worker make 1 pair of up to 8 flows each, more than.*Fix: pass a smaller",
        ),
    ):
        perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", _MODEL, tp=8, contention="fair")


def test_handoffs_at_once_charge_each_flow_its_own_links_costs():
    from perfmodel.network.clusters import handoffs_at_once, head_terms

    nic = Link("nic", 50.0, per_message_ms=0.001, per_block_ms=0.0005)
    c = Cluster(nic=nic, nics_per_node=4, gpus_per_node=4, nvlink_domain=8, nvlink=Link("slow", 10.0))
    flows = perfmodel.handoff_flows(4096, c, _MODEL, tp=4, decode_tp=8, block_size=16)
    (one,) = handoffs_at_once(
        c,
        head_terms(_MODEL, decode_tp=8),
        4,
        8,
        [(0, 0)],
        4096,
        messages=float(flows["messages"].iloc[0]),
        blocks=4096 / 16,
    )
    assert one == pytest.approx(flows.attrs["delay_ms"], rel=1e-12)


@pytest.mark.parametrize("command, flag", [("trace", "--budget-ms"), ("delay", "--connect-timeout")])
@pytest.mark.parametrize("text", ["nan", "inf", "-5"])
def test_a_budget_or_timeout_flag_takes_finite_numbers_above_zero_only(tmp_path, command, flag, text):
    source = tmp_path / "in.csv"
    source.write_text("arrival_ms,num_input_tokens,worker_type,completed\n0,100,prefill,true\n")
    done = _cli(
        command, str(source), "--out", str(tmp_path / "out"), "--model", "llama-3.1-8b", "--bandwidth", "50", flag, text
    )
    line = done.stderr.strip()
    assert done.returncode != 0 and "\n" not in line and flag in line and "pass a finite number > 0" in line, line
    if text == "nan":
        assert "not a number (NaN)" in line


@pytest.mark.parametrize(
    "name, value",
    [
        ("latency_ms", [0.1]),
        ("latency_ms", np.array([0.1, 0.2])),
        ("per_message_ms", np.array([1e-4])),
        ("per_block_ms", [0.0]),
        ("block_size", [16]),
        ("blocks_per_message", np.array([4.0])),
        ("state_bytes", [0.0]),
        ("tp", np.array([8])),
        ("kv_cache_dtype", ["fp8"]),
    ],
    ids=lambda v: repr(v) if not isinstance(v, str) else v,
)
def test_handoff_flows_takes_one_value_of_each_input_in_one_line(name, value):
    """handoff_flows describes one handoff: an array where a value goes is refused by name (a 1-element array
    raised numpy's raw "only 0-dimensional arrays can be converted" TypeError)."""
    keywords = {"tp": 8, "block_size": 16, name: value}
    with pytest.raises(perfmodel.InputError, match=f"^{name}: .*one value"):
        perfmodel.handoff_flows(32_768, "hgx-h100-8x400g", "llama-3.1-70b", **keywords)
