"""Connectors (perfmodel.network.connector): a connector's cost per request and per descriptor are the caller's
latency and per-message costs in other words, at every entry point (the numpy API, clusters, the facade, sweeps,
the replay on links and clusters, TTFT, grids, the command line), never hiding an invalid value; the built-in
figures carry their sources; fit_connector recovers what it is given; saved connectors are user presets."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import perfmodel
from perfmodel import CONNECTORS, Connector, InputError, fit_connector, handoff_delay_ms
from perfmodel.network.connector import WINDOWS

REQUEST = Connector("request-only", request_ms=1.25)
BOTH = Connector("both", request_ms=0.75, per_descriptor_ms=0.0004)
TOKENS = [0, 1, 17, 4096, 32_768]


def _as_costs(connector: Connector, **call):
    """The same call with the connector's costs written as the caller's latency and per-message costs."""
    call["latency_ms"] = call.get("latency_ms", 0.0) + connector.request_ms
    call["per_message_ms"] = call.get("per_message_ms", 0.0) + connector.per_descriptor_ms
    return call


# --- the connector itself -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (dict(request_ms=-1.0), "request_ms"),
        (dict(request_ms=math.nan), "request_ms"),
        (dict(per_descriptor_ms=math.inf), "per_descriptor_ms"),
        (dict(per_descriptor_ms="0.1"), "per_descriptor_ms"),
        (dict(request_ms=True), "request_ms"),
        (dict(window="queue"), "window"),
        (dict(source=3), "source"),
    ],
)
def test_a_connector_refuses_what_is_not_a_cost_naming_it(fields, named):
    with pytest.raises(InputError) as raised:
        Connector("bad", **fields)
    assert named in str(raised.value) and "Fix:" in str(raised.value)


def test_every_built_in_connector_says_where_its_figures_come_from_and_for_which_versions():
    for name, connector in CONNECTORS.items():
        assert connector.name == name == name.lower()
        assert connector.source and connector.version, name
        assert connector.window in WINDOWS and connector.metric, name
        if connector.off:
            assert "no public figure" in connector.source, name
        else:  # a figure: a public issue or pull request, with its date
            assert any(word in connector.source for word in ("issue #", "PR #")), name
            assert "20" in connector.source, name


def test_the_published_figures():
    assert CONNECTORS["vllm-nixl-0.10.1"].request_ms == 3.0  # vllm-project/vllm #23780: ~3 ms per request
    assert CONNECTORS["sglang-nixl-unprepped"].per_descriptor_ms == pytest.approx(0.04)  # 0.6 s / 15k segments
    assert CONNECTORS["vllm-nixl"].off and CONNECTORS["sglang-mooncake"].off


def test_a_connector_of_a_number_no_float_holds_is_refused_in_one_line():
    with pytest.raises(InputError, match=r"request_ms \(a number of 401 digits\)"):
        Connector("huge", request_ms=10**400)


def test_the_metric_window():
    transfer = Connector("t", request_ms=3.0, per_descriptor_ms=0.01, window="transfer")
    handoff = Connector("h", request_ms=3.0, per_descriptor_ms=0.01)
    assert transfer.metric_ms([10.0, 0.0], [100, 0]).tolist() == [6.0, 0.0]  # (no handoff: nothing to take away)
    assert transfer.metric_ms([10.0, 5.0], np.array([100, 400])).tolist() == [6.0, 0.0]  # (never below 0)
    with pytest.raises(InputError, match="descriptors"):
        transfer.metric_ms(10.0)  # (its cost per descriptor cannot be taken away without them)
    with pytest.raises(InputError, match="descriptors"):
        transfer.costs_ms([-1])
    assert handoff.metric_ms([10.0, 0.0], [100, 0]).tolist() == [10.0, 0.0]
    delay = handoff_delay_ms(4096, "ib-ndr", "llama-3.1-8b", block_size=16, connector=transfer)
    descriptors = perfmodel.kv_messages("llama-3.1-8b", 4096, 16)
    assert transfer.metric_ms(delay, descriptors) == pytest.approx(handoff_delay_ms(4096, "ib-ndr", "llama-3.1-8b"))


def test_names_resolve_ignoring_case_and_unknown_ones_are_refused_with_the_closest():
    assert perfmodel.get_connector(" VLLM-NIXL ") is CONNECTORS["vllm-nixl"]
    assert perfmodel.get_connector(None) is None and perfmodel.get_connector(REQUEST) is REQUEST
    with pytest.raises(InputError, match=r"did you mean 'vllm-nixl'"):
        handoff_delay_ms(100, 1.0, 1000, connector="vllm-nixll")
    with pytest.raises(InputError, match="connector"):
        handoff_delay_ms(100, 1.0, 1000, connector=3.0)


# --- the numpy API, clusters and the facade -------------------------------------------------------------


@given(
    request_ms=st.floats(0, 50, allow_nan=False),
    per_descriptor_ms=st.floats(0, 0.01, allow_nan=False),
    latency_ms=st.floats(0, 5, allow_nan=False),
    per_message_ms=st.floats(0, 0.01, allow_nan=False),
    block_size=st.sampled_from([1, 16, 128]),
)
def test_a_connector_is_the_callers_latency_and_per_message_costs_in_other_words(
    request_ms, per_descriptor_ms, latency_ms, per_message_ms, block_size
):
    connector = Connector("c", request_ms=request_ms, per_descriptor_ms=per_descriptor_ms)
    call = dict(latency_ms=latency_ms, per_message_ms=per_message_ms, block_size=block_size)
    for link, model in (("ib-ndr", "llama-3.1-8b"), ("nixl-ucx-rdma", "deepseek-v3"), (37.5, "qwen3-32b")):
        got = handoff_delay_ms(TOKENS, link, model, connector=connector, **call)
        want = handoff_delay_ms(TOKENS, link, model, **_as_costs(connector, **call))
        np.testing.assert_array_equal(got, want)
    assert got[0] == 0.0  # (a handoff of no bytes costs nothing, as upstream's: the connector is not paid)


@pytest.mark.parametrize("cluster", ["hgx-h100-8x400g", "gb200-nvl72", "aws-p5en"])
def test_on_a_cluster_every_flow_pays_the_connector_once_in_parallel(cluster):
    call = dict(tp=8, block_size=16)
    got = handoff_delay_ms(TOKENS, cluster, "llama-3.1-70b", connector=BOTH, **call)
    want = handoff_delay_ms(TOKENS, cluster, "llama-3.1-70b", **_as_costs(BOTH, **call))
    np.testing.assert_array_equal(got, want)
    alone = handoff_delay_ms(32_768, cluster, "llama-3.1-70b", tp=8)
    assert handoff_delay_ms(32_768, cluster, "llama-3.1-70b", tp=8, connector=REQUEST) == pytest.approx(alone + 1.25)


def test_a_column_of_clusters_and_links_pays_the_connector_once_per_row():
    links = ["ib-ndr", "hgx-h100-8x400g", 50.0]
    got = handoff_delay_ms([4096] * 3, links, "llama-3.1-70b", tp=8, connector=REQUEST)
    want = handoff_delay_ms([4096] * 3, links, "llama-3.1-70b", tp=8, latency_ms=1.25)
    np.testing.assert_array_equal(got, want)


def test_an_invalid_latency_is_not_hidden_by_the_connectors_cost():
    """-1 ms + 3 ms would be a valid 2 ms: the caller's value is refused as given, or NaN with coerce."""
    with pytest.raises(InputError) as raised:
        handoff_delay_ms([100, 200], 1.0, 1000, latency_ms=[-1.0, 0.0], connector="vllm-nixl-0.10.1")
    assert "latency_ms" in str(raised.value) and "-1" in str(raised.value)
    coerced = handoff_delay_ms(
        [100, 200], 1.0, 1000, latency_ms=[-1.0, 0.0], connector="vllm-nixl-0.10.1", errors="coerce"
    )
    assert np.isnan(coerced[0]) and coerced[1] == pytest.approx(3.2)  # (0.2 ms of bytes, 3 ms of connector)
    with pytest.raises(InputError, match="per_message_ms"):
        handoff_delay_ms(
            100, 1.0, "llama-3.1-8b", block_size=16, per_message_ms=-0.5, connector="sglang-nixl-unprepped"
        )


@pytest.mark.parametrize(
    "where",
    [
        perfmodel.Link("slow-setup", 50.0, latency_ms=2.0),
        perfmodel.Cluster(nic=perfmodel.Link("nic", 50.0, latency_ms=2.0), nics_per_node=8, gpus_per_node=8),
        "ib-ndr",
    ],
    ids=["link", "cluster", "connector"],
)
def test_no_cost_added_to_the_callers_hides_an_invalid_value(where):
    """A link's, a cluster's NIC's or a connector's cost added to the caller's latency: -1 ms + 2 ms is no valid
    1 ms. Refused as given; with coerce, that row is missing and the others get the cost."""
    connector = "vllm-nixl-0.10.1" if where == "ib-ndr" else None
    call = dict(tp=8, connector=connector)
    for latency in (-1.0, math.nan, math.inf, [-1.0, 0.5], ["x", "0.5"], True):
        tokens = [4096, 4096] if isinstance(latency, list) else 4096
        with pytest.raises(InputError, match="latency_ms"):
            handoff_delay_ms(tokens, where, "llama-3.1-70b", latency_ms=latency, **call)
    got = handoff_delay_ms([4096, 4096], where, "llama-3.1-70b", latency_ms=["x", "0.5"], errors="coerce", **call)
    want = handoff_delay_ms(4096, where, "llama-3.1-70b", latency_ms=0.5, **call)
    assert np.isnan(got[0]) and got[1] == want


def test_the_facade_adds_the_connector_to_a_column_with_an_invalid_entry_under_coerce():
    df = pd.DataFrame({"tokens": [4096, 4096], "latency": ["0.5", "x"]})
    got = perfmodel.handoff_delays(
        df,
        num_input_tokens="tokens",
        kv_transfer_bandwidth="ib-ndr",
        kv_bytes_per_token="llama-3.1-8b",
        latency_ms="latency",
        connector="vllm-nixl-0.10.1",
        errors="coerce",
    )
    assert got.iloc[0] == handoff_delay_ms(4096, "ib-ndr", "llama-3.1-8b", latency_ms=3.5) and got.isna().iloc[1]


def test_a_replay_still_takes_text_for_a_column_name_only():
    trace = perfmodel.synthetic_trace(20, rate_per_s=10, seed=0)
    with pytest.raises(InputError, match="one value"):
        perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", latency_ms="1", connector="vllm-nixl-0.10.1")


def test_none_names_no_connector_where_only_text_goes():
    assert perfmodel.get_connector("None") is None
    df = perfmodel.sweep(
        model="llama-3.1-8b", link="ib-ndr", connector=["none", "vllm-nixl-0.10.1"], num_input_tokens=[1024]
    )
    assert df["handoff_delay_ms"].iloc[1] - df["handoff_delay_ms"].iloc[0] == pytest.approx(3.0)


def test_a_sweep_with_descriptor_costs_counts_layers_for_messages_not_streaming():
    connector = Connector("z", per_descriptor_ms=0.01)
    call = dict(num_input_tokens=[4096], block_size=16, num_layers=32)
    got = perfmodel.sweep(kv_bytes_per_token=131072, kv_transfer_bandwidth=50.0, connector=connector, **call)
    want = handoff_delay_ms(4096, 50.0, 131072, block_size=16, num_layers=32, per_message_ms=0.01)
    assert got["handoff_delay_ms"].iloc[0] == want


def test_descriptors_need_a_block_size_and_the_error_names_the_connector():
    with pytest.raises(InputError) as raised:
        handoff_delay_ms(4096, "ib-ndr", "llama-3.1-8b", connector="sglang-nixl-unprepped")
    assert str(raised.value).startswith("connector:") and "block_size" in str(raised.value)


def test_the_facade_and_the_accessor():
    df = pd.DataFrame({"tokens": [1024, 8192], "latency": [0.5, 0.0]})
    got = df.perfmodel.handoff_delay(
        num_input_tokens="tokens",
        kv_transfer_bandwidth="ib-ndr",
        kv_bytes_per_token="llama-3.1-8b",
        latency_ms="latency",
        connector=REQUEST,
    )
    want = handoff_delay_ms([1024, 8192], "ib-ndr", "llama-3.1-8b", latency_ms=[1.75, 1.25])
    np.testing.assert_array_equal(got.to_numpy(dtype=float), want)


def test_a_sweep_over_connectors_labels_each_row_by_name():
    df = perfmodel.sweep(
        model="llama-3.1-8b",
        link="ib-ndr",
        connector=["vllm-nixl", "vllm-nixl-0.10.1", BOTH],
        block_size=16,
        num_input_tokens=[1024],
    )
    assert df["connector"].astype(str).tolist() == ["vllm-nixl", "vllm-nixl-0.10.1", "both"]
    base = handoff_delay_ms(1024, "ib-ndr", "llama-3.1-8b", block_size=16)
    extra = BOTH.costs_ms(perfmodel.kv_messages("llama-3.1-8b", 1024, 16))
    np.testing.assert_allclose(df["handoff_delay_ms"], [base, base + 3.0, base + extra], rtol=1e-12)


# --- replays ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace():
    return perfmodel.datasets.load("mooncake-synthetic").head(400)


@pytest.mark.parametrize(
    "setup",
    [
        dict(link="ib-ndr", contention="fifo", links=2),
        dict(link="ib-ndr", contention="fair"),
        dict(link="hgx-h100-8x400g", contention="fair", tp=8, prefill_workers=2, decode_workers=2),
    ],
    ids=["fifo", "fair", "cluster"],
)
def test_the_replay_pays_the_connector_as_the_callers_costs(trace, setup):
    call = dict(model="llama-3.1-70b", block_size=16, mode="destination_missing", **setup)
    got = perfmodel.replay_handoffs(trace, connector=BOTH, **call)
    want = perfmodel.replay_handoffs(trace, **_as_costs(BOTH, **call))
    pd.testing.assert_frame_equal(got, want)
    assert not got.equals(perfmodel.replay_handoffs(trace, **call))


def test_ttft_and_its_grid_take_the_connector(trace):
    serving = dict(prefill_workers=2, prefill_tokens_per_s=20_000.0, decode_step_ms=5.0, contention="fifo")
    got = perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-70b", connector=REQUEST, **serving)
    want = perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-70b", latency_ms=1.25, **serving)
    pd.testing.assert_frame_equal(got, want)
    grid = perfmodel.ttft_grid(trace, link="ib-ndr", model="llama-3.1-70b", connector=[None, REQUEST], **serving)
    p99 = [
        perfmodel.summarize_ttft(perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-70b", connector=c, **serving))[
            "p99_ms"
        ]
        for c in (None, REQUEST)
    ]
    np.testing.assert_allclose(grid["p99_ms"], p99, rtol=1e-12)


def test_a_replay_grid_over_connectors(trace):
    grid = perfmodel.replay_grid(
        trace, model="llama-3.1-8b", link="ib-ndr", contention="fair", connector=["vllm-nixl", "vllm-nixl-0.10.1"]
    )
    assert grid["connector"].astype(str).tolist() == ["vllm-nixl", "vllm-nixl-0.10.1"]
    assert grid["p50_ms"].iloc[1] > grid["p50_ms"].iloc[0]


# --- fits ----------------------------------------------------------------------------------------------


@given(
    request_ms=st.floats(0, 20, allow_nan=False),
    per_descriptor_ms=st.floats(0, 0.002, allow_nan=False),
)
@example(request_ms=1.2206921708754828e-08, per_descriptor_ms=0.001953125)  # (CI: off by 5.6e-12, 3e-9 of it)
@example(request_ms=1.0, per_descriptor_ms=1.01791231144833e-11)  # (2.7 ns on the largest handoff: not told from none)
def test_fit_connector_recovers_the_costs_it_is_given(request_ms, per_descriptor_ms):
    tokens = np.array([128, 1024, 4096, 16_384, 65_536])
    wire = handoff_delay_ms(tokens, "roce-400g", "llama-3.1-8b")
    descriptors = perfmodel.kv_messages("llama-3.1-8b", tokens, 16)
    measured = wire + request_ms + per_descriptor_ms * descriptors
    fitted = fit_connector(measured, wire, descriptors, name="ours")
    # (a cost of a few nanoseconds is not told from none; the fit trades the two at rounding's scale)
    assert fitted.request_ms == pytest.approx(request_ms, abs=1e-6)
    # (the per-descriptor cost to within what the fit resolves: 1e-7 of the longest handoff, on its descriptors)
    off = abs(fitted.per_descriptor_ms - per_descriptor_ms) * descriptors.max()
    assert off <= 1e-7 * measured.max() + 1e-8 * per_descriptor_ms * descriptors.max(), (fitted, per_descriptor_ms)
    assert fitted.fit is not None and fitted.fit.max_relative_error < 1e-7 and fitted.window == "handoff"


def test_fit_connector_says_what_it_cannot_separate_and_refuses_bad_measurements():
    fitted = fit_connector([5.0, 6.0], [3.0, 4.0], [100, 100])
    assert fitted.request_ms == pytest.approx(2.0) and fitted.per_descriptor_ms == 0
    assert "not separable" in fitted.fit.note
    assert fit_connector([5.0, 6.0], [3.0, 4.0]).request_ms == pytest.approx(2.0)
    faster = fit_connector([2.0, 5.0], [3.0, 4.0])  # (one faster than the transport alone: it says so)
    assert "1 handoff measured faster than the transport alone" in faster.fit.note
    for measured, transport, descriptors, named in (
        (None, None, None, "measured_ms"),
        ([True, True], [1.0, 1.0], None, "measured_ms"),
        ([2.0, 3.0], [1.0, 1.0], [1.5, 2], "descriptors"),
        ([1.0, -1.0], [0.5, 0.5], None, "measured_ms"),
        ([1.0, 0.0], [0.5, 0.5], None, "measured_ms"),
        ([1.0, 2.0], [0.5], None, "transport_ms"),
        ([1.0, 2.0], [0.5, math.nan], None, "transport_ms"),
        ([1.0, 2.0], [0.5, 0.5], [1], "descriptors"),
        ([], [], None, "measured_ms"),
    ):
        with pytest.raises(InputError, match=named):
            fit_connector(measured, transport, descriptors)


# --- user presets ----------------------------------------------------------------------------------------


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    return tmp_path / "presets.json"


def test_a_saved_connector_goes_wherever_a_connector_does(config, trace):
    perfmodel.save_connector(Connector("Our-vLLM", request_ms=2.0, source="our benchmark"))
    assert perfmodel.user_connectors()["our-vllm"].request_ms == 2.0
    assert handoff_delay_ms(1000, 1.0, 1e6, connector="our-vllm") == 1002.0
    replay = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", connector="OUR-VLLM")
    plain = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", latency_ms=2.0)
    pd.testing.assert_frame_equal(replay, plain)


def test_saving_refuses_a_built_in_name_and_never_replaces_an_entry_written_by_hand(config):
    with pytest.raises(InputError, match="built-in"):
        perfmodel.save_connector(Connector("vllm-nixl", request_ms=1.0))
    config.write_text(json.dumps({"connectors": {"mine": {"request_ms": 4.0}}}))
    before = config.read_text()
    with pytest.raises(InputError, match="exists already"):
        perfmodel.save_connector(Connector("mine", request_ms=1.0))
    assert config.read_text() == before
    assert perfmodel.get_connector("mine").request_ms == 4.0  # (written by hand, read as any other)


def test_a_saved_connector_never_shadows_a_built_in(config):
    config.write_text(json.dumps({"connectors": {"VLLM-NIXL-0.10.1": {"request_ms": 99.0}}}))
    assert perfmodel.get_connector("vllm-nixl-0.10.1").request_ms == 3.0
    with pytest.warns(UserWarning, match="built-in"):
        assert perfmodel.user_connectors() == {}


def test_a_malformed_saved_connector_is_refused_naming_the_file_and_entry(config):
    config.write_text(json.dumps({"connectors": {"typo": {"request_msec": 4.0}, "neg": {"request_ms": -1}}}))
    with pytest.raises(InputError, match=r"unknown field 'request_msec' \(did you mean 'request_ms'\?\)"):
        perfmodel.get_connector("typo")
    with pytest.raises(InputError, match=r"'neg'.*not a finite number >= 0"):
        perfmodel.get_connector("neg")
    with pytest.warns(UserWarning) as caught:
        assert perfmodel.user_connectors() == {}
    assert {"typo", "neg"} <= {name for w in caught for name in ("typo", "neg") if f"'{name}'" in str(w.message)}


def test_the_command_line_lists_shows_and_removes_saved_connectors(config, capsys):
    from perfmodel.cli import main

    perfmodel.save_connector(Connector("lab", per_descriptor_ms=0.001, source="lab run"))
    assert main(["presets", "list"]) == 0
    assert "connector  lab" in capsys.readouterr().out
    assert main(["presets", "show", "lab"]) == 0
    assert "lab: 1 us per descriptor" in capsys.readouterr().out
    assert main(["presets", "remove", "lab", "--kind", "connector"]) == 0
    assert perfmodel.user_connectors() == {}


def test_the_command_line_takes_a_connector_where_the_api_does(tmp_path, capsys):
    from perfmodel.cli import main

    table = tmp_path / "requests.csv"
    pd.DataFrame({"num_input_tokens": [1024, 4096]}).to_csv(table, index=False)
    out = tmp_path / "delays.csv"
    words = ["delay", str(table), "--out", str(out), "--link", "ib-ndr", "--model", "llama-3.1-8b"]
    assert main([*words, "--connector", "vllm-nixl-0.10.1"]) == 0
    got = pd.read_csv(out)["handoff_delay_ms"].to_numpy()
    np.testing.assert_allclose(got, handoff_delay_ms([1024, 4096], "ib-ndr", "llama-3.1-8b") + 3.0, rtol=1e-12)
    assert main([*words[:3], str(tmp_path / "other.csv"), *words[4:], "--connector", "nope"]) == 2
    assert "--connector" in capsys.readouterr().err and not (tmp_path / "other.csv").exists()


def test_perfmodel_connectors_lists_them_and_fits_yours_from_measured_handoffs(tmp_path, monkeypatch, capsys):
    from perfmodel.cli import main

    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    assert main(["connectors"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in CONNECTORS) and "vllm-project/vllm issue #23780" in listed
    tokens = np.array([256, 1024, 4096, 16_384, 65_536])
    wire = handoff_delay_ms(tokens, "ib-ndr", "llama-3.1-8b", block_size=16)
    measured = wire + 2.5 + 0.0003 * perfmodel.kv_messages("llama-3.1-8b", tokens, 16)
    table = tmp_path / "handoffs.csv"
    pd.DataFrame({"num_input_tokens": tokens, "measured_ms": measured}).to_csv(table, index=False)
    words = ["connectors", "--fit", str(table), "--link", "ib-ndr", "--model", "llama-3.1-8b", "--block-size", "16"]
    assert main([*words, "--name", "ours", "--save"]) == 0
    assert "2.5 ms per request, 0.3 us per descriptor" in capsys.readouterr().out
    ours = perfmodel.get_connector("ours")
    assert ours.request_ms == pytest.approx(2.5) and ours.per_descriptor_ms == pytest.approx(0.0003)
    before = (tmp_path / "config" / "presets.json").read_text()
    for name in ("ours", "vllm-nixl", "none"):  # (a saved name again, a built-in's, no connector's: nothing fitted)
        assert main([*words, "--name", name, "--save"]) == 2
        assert "fitted" not in capsys.readouterr().out
    assert (tmp_path / "config" / "presets.json").read_text() == before
    (tmp_path / "bad.csv").write_text("num_input_tokens,measured_ms\n100,x\n")
    assert main([*words[:2], str(tmp_path / "bad.csv"), *words[3:]]) == 2
    assert "line 2: measured_ms 'x' is not a number" in capsys.readouterr().err


def test_a_fit_leaves_out_handoffs_of_no_bytes_and_refuses_when_nothing_is_left_to_fit():
    fitted = fit_connector([5.0, 6.0, 4.0], [3.0, 4.0, 0.0])  # (the last moves no bytes: it pays no connector)
    assert fitted.request_ms == pytest.approx(2.0) and "1 handoff of no bytes left out" in fitted.fit.note
    with pytest.raises(InputError, match="took less than the transport alone, so no connector cost is left"):
        fit_connector([1.0, 1.0], [2.0, 3.0])


def test_perfmodel_connectors_refuses_fit_flags_without_fit_and_a_save_without_a_name(tmp_path, capsys):
    from perfmodel.cli import main

    for words, says in (
        (["connectors", "--link", "ib-ndr"], "--link goes with --fit"),
        (["connectors", "--save"], "--save goes with --fit"),
        (["connectors", "--fit", str(tmp_path / "t.csv"), "--link", "ib-ndr", "--model", "llama-3.1-8b", "--save"],
         "--save saves the fitted connector under --name"),
    ):  # fmt: skip
        assert main(words) == 2
        assert says in capsys.readouterr().err
