"""The one edge of both replays (perfmodel.replay.edge.handoffs_on): what both networks read is checked there,
alike, so a cluster refuses what a link refuses, in the same words. Found by a hostile pass: a cluster took an
unknown overlap as layer-wise, text as a latency, a layer count the model does not have, and a NaN fallback
delay at a bandwidth of 0 crashed the process."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.errors import InputError

TRACE = perfmodel.synthetic_trace(30, 20, seed=3)
ONE_NIC = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
MODEL = "llama-3.1-8b"  # 32 layers

REFUSED_ALIKE = {
    "an unknown overlap": dict(overlap="x"),
    "an overlap in capitals": dict(overlap="LAYERWISE"),
    "an unknown layout": dict(kv_layout="x"),
    "a latency as text": dict(latency_ms="1"),
    "a cost per message as text": dict(per_message_ms="0.5"),
    "a negative fallback": dict(fallback_delay_ms=-5.0),
    "a fallback as text": dict(fallback_delay_ms="x"),
    "an infinite fallback": dict(fallback_delay_ms=np.inf),
    "a NaN fallback": dict(fallback_delay_ms=np.nan),
    "a prefill time with streaming off": dict(prefill_ms=20.0),
    "a layer count the model does not have": dict(num_layers=7, per_message_ms=0.01),
    "a layer count that counts nothing": dict(num_layers=32),
    "a routing in capitals": dict(routing="PREFIX"),
    "links as text": dict(links="1"),
    "no block size": dict(block_size=0),
    "no decode worker": dict(decode_workers=0),
    "a layer count in a layout of blocks": dict(num_layers=32, per_message_ms=0.01, kv_layout="block"),
    "a cache beyond what int64 holds": dict(decode_cache_blocks=2**63),
    "a cache of 401 digits": dict(decode_cache_blocks=10**400),
    "a block size beyond what int64 holds": dict(block_size=2**63),
    "a block size beyond float64": dict(block_size=10**400),
}


@pytest.mark.parametrize("case", list(REFUSED_ALIKE))
def test_a_cluster_refuses_what_a_link_refuses_in_the_same_words(case):
    given = REFUSED_ALIKE[case]
    with pytest.raises(InputError) as on_link:
        perfmodel.replay_handoffs(TRACE, "ib-ndr", MODEL, **given)
    with pytest.raises(InputError) as on_cluster:
        perfmodel.replay_handoffs(TRACE, ONE_NIC, MODEL, **given)
    assert str(on_cluster.value) == str(on_link.value)


@pytest.mark.parametrize("case", [c for c in REFUSED_ALIKE if "prefill" not in c and "overlap" not in c])
def test_the_ttft_replay_refuses_them_too_on_both(case):
    given = dict(REFUSED_ALIKE[case], prefill_ms=1.0)
    with pytest.raises(InputError) as on_link:
        perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, **given)
    with pytest.raises(InputError) as on_cluster:
        perfmodel.replay_ttft(TRACE, ONE_NIC, MODEL, **given)
    assert str(on_cluster.value) == str(on_link.value)


def test_a_layer_count_that_counts_nothing_says_what_would_count_it():
    with pytest.raises(InputError, match="num_layers: counts the layers") as raised:
        perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, num_layers=32, prefill_ms=1.0)
    assert "pass a per_message_ms" in str(raised.value)


@pytest.mark.parametrize("contention", ["none", "fifo"])
@pytest.mark.parametrize("replay", ["replay_handoffs", "replay_ttft"])
def test_a_nan_fallback_at_no_bandwidth_is_refused_not_a_crash(replay, contention):
    one = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [100]})
    with pytest.raises(InputError, match="fallback_delay_ms: nan is not a delay a replay can charge"):
        getattr(perfmodel, replay)(one, 0.0, 1e5, fallback_delay_ms=float("nan"), contention=contention)


def test_a_model_given_as_a_series_is_named_model():
    models = pd.Series([MODEL] * len(TRACE), index=TRACE.index + 100)
    with pytest.raises(InputError, match="^model: a Series whose index differs"):
        perfmodel.replay_handoffs(TRACE, "ib-ndr", model=models)


def test_a_cluster_in_a_zero_dimensional_array_is_the_cluster():
    wrapped = perfmodel.replay_handoffs(TRACE, np.array(ONE_NIC, dtype=object), MODEL)
    pd.testing.assert_frame_equal(wrapped, perfmodel.replay_handoffs(TRACE, ONE_NIC, MODEL))


def test_a_grids_requests_keep_every_label_of_a_mixed_axis():
    summary, requests = perfmodel.replay_grid(
        TRACE, link=["ib-ndr", 25.0, ONE_NIC], model=MODEL, keep="requests", num_threads=1, progress=False
    )
    assert not requests["link"].isna().any()
    assert requests["link"].unique().tolist() == summary["link"].tolist() == ["ib-ndr", "25.0", "cluster"]


# --- a grid's layer count applies where it counts (found by a second hostile pass) --------------------------


@pytest.mark.parametrize("link", ["ib-ndr", "hgx-h100-8x400g"])
def test_a_grids_layer_count_applies_where_a_message_costs_something(link):
    grid = perfmodel.replay_grid(
        TRACE, link=link, model=MODEL, num_layers=32, per_message_ms=[0.0, 0.01], num_threads=1, progress=False
    )
    costly = perfmodel.replay_handoffs(TRACE, link, MODEL, num_layers=32, per_message_ms=0.01)
    free = perfmodel.replay_handoffs(TRACE, link, MODEL)
    assert grid["p99_ms"].tolist() == [perfmodel.summarize(r)["p99_ms"] for r in (free, costly)]
    assert pd.isna(grid["num_layers"][0]) and grid["num_layers"][1] == 32


def test_a_grids_layer_count_that_counts_in_no_configuration_is_refused():
    with pytest.raises(InputError, match="num_layers: counts the layers"):
        perfmodel.replay_grid(TRACE, link="ib-ndr", model=MODEL, num_layers=32, block_size=[16, 32], progress=False)
    with pytest.raises(InputError, match="num_layers: counts the layers"):
        perfmodel.ttft_grid(TRACE, link="ib-ndr", model=MODEL, num_layers=32, prefill_ms=[1.0, 2.0], progress=False)


def test_a_ttft_grids_layer_count_applies_where_a_message_costs_something():
    grid = perfmodel.ttft_grid(
        TRACE, link=ONE_NIC, model=MODEL, num_layers=32, per_message_ms=[0.0, 0.01], prefill_ms=1.0, progress=False
    )
    costly = perfmodel.replay_ttft(TRACE, ONE_NIC, MODEL, num_layers=32, per_message_ms=0.01, prefill_ms=1.0)
    assert grid["p99_ms"][1] == perfmodel.summarize_ttft(costly)["p99_ms"]


def test_a_layer_count_counting_messages_stays_on_rows_that_do_not_stream():
    grid = perfmodel.replay_grid(
        TRACE, link="ib-ndr", kv_bytes_per_token=131072, overlap=["layerwise", "none"], num_layers=32,
        per_message_ms=0.01, prefill_ms=20.0, num_threads=1, progress=False,
    )  # fmt: skip
    alone = perfmodel.replay_handoffs(TRACE, "ib-ndr", kv_bytes_per_token=131072, num_layers=32, per_message_ms=0.01)
    assert grid["p99_ms"][1] == perfmodel.summarize(alone)["p99_ms"]


@pytest.mark.parametrize("replay", ["replay_handoffs", "replay_ttft"])
def test_handoffs_queued_beyond_what_a_time_holds_are_refused_by_name(replay):
    three = pd.DataFrame({"arrival_ms": [0.0, 0.0, 0.0], "num_input_tokens": [100, 100, 100]})
    serving = dict(prefill_ms=0.0) if replay == "replay_ttft" else {}
    with pytest.raises(InputError, match="request 1's handoff would end at inf ms"):
        getattr(perfmodel, replay)(three, 0.0, 1e5, fallback_delay_ms=1e308, contention="fifo", **serving)


def test_a_refused_call_warns_of_nothing_first():
    import warnings

    with warnings.catch_warnings(record=True) as caught, pytest.raises(InputError, match="latency_ms"):
        warnings.simplefilter("always")
        perfmodel.replay_handoffs(TRACE, "ib-ndr", MODEL, mode="destination_missing", latency_ms=-1.0)
    assert not caught


# --- a third hostile pass: layer counts that count nothing, sizes beyond int64, grids' rows and labels ---------


@pytest.mark.parametrize("link", ["ib-ndr", ONE_NIC])
def test_zero_layers_posting_messages_per_layer_are_refused_not_charged_nothing(link):
    with pytest.raises(InputError, match="num_layers: 0 layers post no messages in kv_layout='layer_kv'"):
        perfmodel.replay_handoffs(TRACE, link, 131072.0, num_layers=0, per_message_ms=0.01)


def test_zero_layers_posting_messages_per_row_are_named_or_coerced():
    layers = np.array([32, 0, 32])
    with pytest.raises(InputError, match="0 layers at row 1 post no messages"):
        perfmodel.handoff_delay_ms(1000, 25.0, 131072.0, num_layers=layers, per_message_ms=0.01, block_size=16)
    coerced = perfmodel.handoff_delay_ms(
        1000, 25.0, 131072.0, num_layers=layers, per_message_ms=0.01, block_size=16, errors="coerce"
    )
    assert np.isnan(coerced[1]) and np.isfinite(coerced[[0, 2]]).all()


@pytest.mark.parametrize("call", ["handoff_delay_ms", "replay_handoffs"])
def test_a_layer_count_in_a_layout_of_blocks_counts_nothing(call):
    given = dict(num_layers=8, per_message_ms=0.01, kv_layout="block", block_size=16)
    with pytest.raises(InputError, match="num_layers: counts the layers of messages posted per layer"):
        if call == "handoff_delay_ms":
            perfmodel.handoff_delay_ms(1000, 25.0, 131072.0, **given)
        else:
            perfmodel.replay_handoffs(TRACE, "ib-ndr", 131072.0, **given)
    del given["num_layers"]  # (without it: the same call runs)
    assert perfmodel.handoff_delay_ms(1000, 25.0, 131072.0, **given) > 0


@pytest.mark.parametrize("value", [10**400, -(10**400)], ids=["1e400", "-1e400"])
@pytest.mark.parametrize("name", ["num_input_tokens", "block_size", "kv_bytes_per_token"])
def test_an_int_beyond_float64_is_named_not_an_overflow(name, value):
    given = dict(num_input_tokens=1000, kv_transfer_bandwidth=25.0, kv_bytes_per_token=1e5, block_size=16)
    given[name] = value
    with pytest.raises(InputError, match=f"^{name}: "):
        perfmodel.handoff_delay_ms(**given)


def test_a_grid_replays_a_configuration_streaming_off_once_with_its_streaming_inputs_empty():
    summary, requests = perfmodel.replay_grid(
        TRACE,
        link="ib-ndr",
        model=MODEL,
        overlap=["none", "layerwise"],
        prefill_ms=[10.0, 20.0],
        keep="requests",
        progress=False,
    )
    assert [f"{o} {p}" for o, p in zip(summary["overlap"], summary["prefill_ms"])] == [
        "none nan",
        "layerwise 10.0",
        "layerwise 20.0",
    ]
    assert len(requests) == 3 * len(TRACE)
    alone = perfmodel.replay_handoffs(TRACE, "ib-ndr", MODEL)
    assert summary["p99_ms"][0] == perfmodel.summarize(alone)["p99_ms"]


def test_a_grid_keeps_once_the_configurations_a_layer_count_does_not_tell_apart():
    grid = perfmodel.replay_grid(
        TRACE,
        link="ib-ndr",
        model=131072.0,
        num_layers=[8, 16],
        per_message_ms=[0, 0.01],
        block_size=16,
        progress=False,
    )
    assert [f"{m} {k}" for m, k in zip(grid["per_message_ms"], grid["num_layers"])] == [
        "0.0 nan",
        "0.01 8.0",
        "0.01 16.0",
    ]


@pytest.mark.parametrize("grid", ["replay_grid", "ttft_grid"])
def test_both_grids_name_a_mode_given_as_its_code(grid):
    table = getattr(perfmodel, grid)(TRACE, link="ib-ndr", model=MODEL, mode=[1, 0], progress=False)
    assert list(table["mode"].astype(str)) == ["destination_missing", "full_prompt"]


def test_a_ttft_grid_refuses_a_value_given_twice_as_a_replay_grid_does():
    with pytest.raises(InputError, match="ttft_grid: axis link has a repeated value: 'ib-ndr' and 'IB-NDR'"):
        perfmodel.ttft_grid(TRACE, link=["ib-ndr", "IB-NDR"], model=MODEL, progress=False)


def test_the_command_lines_grid_names_a_mode_code_and_replays_streaming_off_once(tmp_path):
    from perfmodel.cli import main

    trace = tmp_path / "t.csv"
    TRACE.to_csv(trace, index=False)
    argv = ["trace", str(trace), "--model", MODEL, "--link", "ib-ndr", "--out", str(tmp_path / "out")]
    assert main([*argv, "--grid", "mode=1,0", "overlap=none,layerwise", "prefill_ms=10,20"]) == 0
    grid = pd.read_csv(tmp_path / "out" / "grid.csv")
    assert [f"{m} {o} {p}" for m, o, p in zip(grid["mode"], grid["overlap"], grid["prefill_ms"])] == [
        "destination_missing none nan",
        "destination_missing layerwise 10.0",
        "destination_missing layerwise 20.0",
        "full_prompt none nan",
        "full_prompt layerwise 10.0",
        "full_prompt layerwise 20.0",
    ]


@pytest.mark.parametrize("call", ["numpy", "replay_handoffs", "replay_ttft"])
def test_a_name_in_a_zero_dimensional_array_is_the_name(call):
    """A 0-d array of text was refused as 'not a number' (numpy API), or failed with a raw ValueError (a model
    in a replay); a 0-d array holding None was a NaN fallback."""
    if call == "numpy":
        assert perfmodel.handoff_delay_ms(1000, np.array("ib-ndr"), np.array(MODEL)) == perfmodel.handoff_delay_ms(
            1000, "ib-ndr", MODEL
        )
        return
    extra = dict(prefill_tokens_per_s=1e5) if call == "replay_ttft" else {}
    replay = getattr(perfmodel, call)
    boxed = replay(TRACE, np.array("ib-ndr"), np.array(MODEL), fallback_delay_ms=np.array(None, dtype=object), **extra)
    pd.testing.assert_frame_equal(boxed, replay(TRACE, "ib-ndr", MODEL, **extra))


@pytest.mark.parametrize("prefill_ms", [1e21, 1e300])
def test_times_too_coarse_for_the_time_bins_widen_them_not_hang(prefill_ms):
    """Streaming prefills of 1e21 ms put the handoffs where origin + k * width == origin for the bins' width:
    the loop asked for room it never got, forever."""
    import subprocess
    import sys

    code = (
        "import perfmodel; t = perfmodel.synthetic_trace(3, rate_per_s=10, seed=0); "
        "r = perfmodel.replay_handoffs(t, model='llama-3.1-70b', link='hgx-h100-8x400g', tp=8, contention='fair', "
        f"overlap='layerwise', prefill_ms={prefill_ms!r}); print(r['handoff_delay_ms'].tolist())"
    )
    streamed = perfmodel.replay_handoffs(
        perfmodel.synthetic_trace(3, rate_per_s=10, seed=0),
        model="llama-3.1-70b",
        link="hgx-h100-8x400g",
        tp=8,
        contention="fair",
        overlap="layerwise",
        prefill_ms=10.0,
    )  # (compiled here, loaded from the cache by the child)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(streamed["handoff_delay_ms"].tolist())


def test_a_sweep_mixing_a_layout_of_blocks_keeps_the_layer_count_where_it_counts():
    table = perfmodel.sweep(
        num_input_tokens=[1000],
        kv_transfer_bandwidth=50.0,
        kv_bytes_per_token=1000.0,
        block_size=16,
        per_message_ms=0.01,
        num_layers=32,
        kv_layout=["block", "layer_kv"],
    )
    alone = [
        perfmodel.handoff_delay_ms(
            1000,
            50.0,
            1000.0,
            block_size=16,
            per_message_ms=0.01,
            kv_layout=layout,
            **({} if layout == "block" else {"num_layers": 32}),
        )
        for layout in ("block", "layer_kv")
    ]
    assert table["handoff_delay_ms"].tolist() == alone


def test_zero_layers_are_refused_only_on_rows_whose_messages_cost_something():
    given = dict(block_size=16, num_layers=[32, 0])
    both = perfmodel.handoff_delay_ms([1000, 1000], 50.0, 1000.0, per_message_ms=[0.01, 0.0], **given)
    assert both.tolist() == [
        perfmodel.handoff_delay_ms(1000, 50.0, 1000.0, block_size=16, per_message_ms=0.01, num_layers=32),
        0.02,
    ]
    with pytest.raises(InputError, match="0 layers at row 1"):
        perfmodel.handoff_delay_ms([1000, 1000], 50.0, 1000.0, per_message_ms=[0.0, 0.01], **given)


BEYOND = 10**400  # (a Python int no float64 holds)
BEYOND_FLOAT64 = {
    "a bandwidth": lambda: perfmodel.handoff_delay_ms(1000, BEYOND, 1000.0),
    "tokens in a list": lambda: perfmodel.handoff_delay_ms([1000, BEYOND], 50.0, 1000.0),
    "tokens in a Series": lambda: perfmodel.handoff_delay_ms(pd.Series([1000, BEYOND]), 50.0, 1000.0),
    "a layer count": lambda: perfmodel.handoff_delay_ms(
        1000, 50.0, 1000.0, num_layers=BEYOND, per_message_ms=0.1, block_size=16
    ),
    "a replay grid's axis": lambda: perfmodel.replay_grid(TRACE, link="ib-ndr", model=MODEL, latency_ms=[0, BEYOND]),
    "a ttft grid's rate": lambda: perfmodel.ttft_grid(
        TRACE, link="ib-ndr", model=MODEL, request_rate_per_s=[1, BEYOND]
    ),
    "a replay's ready times": lambda: perfmodel.replay_handoffs(TRACE, "ib-ndr", MODEL, ready_ms=BEYOND),
    "a replay's bytes": lambda: perfmodel.replay_handoffs(TRACE, "ib-ndr", BEYOND),
    "a decode step": lambda: perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, decode_step_ms=BEYOND),
    "decode memory": lambda: perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, decode_kv_tokens=BEYOND),
}


@pytest.mark.parametrize("case", list(BEYOND_FLOAT64))
def test_an_int_beyond_float64_is_refused_by_its_keyword_at_every_edge(case):
    """Each raised a raw OverflowError (or, for a bandwidth, was taken as infinite: a free transfer)."""
    # (a Series of Python ints is checked exactly against the tokens' bound first: its digits, above 2**53)
    said = "beyond the range of float64 numbers|a number of 401 digits \\(above 9007199254740992\\)"
    with pytest.raises(InputError, match=said) as raised:  # (a Series: its row)
        BEYOND_FLOAT64[case]()
    assert len(str(raised.value)) < 300 and "0" * 31 not in str(raised.value)  # (its digits counted, not shown)


@pytest.mark.parametrize("name", ["prefill_kv_tokens", "concurrency"])
def test_serving_counts_beyond_2_53_are_refused_not_overflowed(name):
    with pytest.raises(InputError, match=f"^{name}: 9,223,372,036,854,775,808 is above"):
        perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, **{name: 2**63})


def test_the_command_line_reads_a_count_exactly():
    """--block-size 9007199254740993 was read through a float, rounded to 2**53 and accepted."""
    from perfmodel.cli._parsing import token_count

    assert token_count("9007199254740993") == 2**53 + 1
    assert token_count("32k") == 32768 and token_count("1.5k") == 1536


@pytest.mark.parametrize("grid", ["replay_grid", "ttft_grid"])
@pytest.mark.parametrize(
    ("axis", "values"),
    [
        ("mode", [1, "destination_missing"]),
        ("mode", ["1", "Destination_Missing"]),
        ("decode_step_ms", [np.nan, np.nan]),
    ],
)
def test_a_value_given_twice_as_its_code_and_its_name_is_refused(grid, axis, values):
    if grid == "replay_grid" and axis == "decode_step_ms":
        values, axis = [np.nan, float("nan")], "latency_ms"
    with pytest.raises(InputError, match=f"axis {axis} has a repeated value"):
        getattr(perfmodel, grid)(TRACE, link="ib-ndr", model=MODEL, progress=False, **{axis: values})


def test_a_grids_requests_have_the_summarys_column_types():
    summary, requests = perfmodel.replay_grid(
        TRACE,
        keep="requests",
        model=MODEL,
        link="ib-ndr",
        overlap=["none", "layerwise"],
        prefill_ms=[5.0, 20.0],
        progress=False,
    )
    assert requests["prefill_ms"].dtype == summary["prefill_ms"].dtype == np.float64
    assert len(requests.merge(summary, on=["overlap", "prefill_ms"])) == len(requests)
