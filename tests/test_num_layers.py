"""num_layers with per-message costs: validated alike at every entry point (numpy API, facade, sweep, replay,
required_bandwidth, max_tokens_within), scalar and array alike; with a named model, an explicit num_layers that
differs from the model's own is refused (its layer mix sets the bytes and messages; another count cannot apply
to them, and using it for streaming only would mix two models in one delay)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError

MESSAGES = dict(per_message_ms=0.001, block_size=16)


def _entry_points():
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [1000], "num_output_tokens": 1})
    frame = pd.DataFrame({"num_input_tokens": [1000]})
    return {
        "numpy": lambda **kw: perfmodel.handoff_delay_ms(1000, 50.0, 131072, **kw),
        "facade": lambda **kw: perfmodel.handoff_delays(
            frame, kv_transfer_bandwidth=50.0, kv_bytes_per_token=131072, **kw
        ),
        "sweep": lambda **kw: perfmodel.sweep(
            num_input_tokens=[1000], kv_transfer_bandwidth=50.0, kv_bytes_per_token=131072, **kw
        ),
        "replay": lambda **kw: perfmodel.replay_handoffs(
            trace, kv_transfer_bandwidth=50.0, kv_bytes_per_token=131072, **kw
        ),
        "required_bandwidth": lambda **kw: perfmodel.required_bandwidth(1000, 131072, budget_ms=10.0, **kw),
        "max_tokens_within": lambda **kw: perfmodel.max_tokens_within(50.0, 131072, budget_ms=10.0, **kw),
    }


@pytest.mark.parametrize("entry", list(_entry_points()))
@pytest.mark.parametrize("layers", [-1, -np.inf, 0.5, np.nan, np.inf, [32, -1]])
def test_a_bad_layer_count_is_refused_everywhere(entry, layers):
    """(An array: a sweep's axis values are each checked; a replay takes one value, and says so.)"""
    with pytest.raises(InputError, match="num_layers"):
        result = _entry_points()[entry](num_layers=layers, **MESSAGES)
        print(result)


@pytest.mark.parametrize("entry", list(_entry_points()))
def test_a_good_layer_count_is_taken_alike(entry):
    """The same count of layers, hence messages, everywhere: the numpy API's delay (which it changes)."""

    def delay(tokens=1000, bandwidth=50.0, layers=32):
        return perfmodel.handoff_delay_ms(tokens, bandwidth, 131072, num_layers=layers, **MESSAGES)

    assert delay() != delay(layers=16)  # (a message per block, layer and K or V: the count matters)
    result = _entry_points()[entry](num_layers=32, **MESSAGES)
    if entry == "required_bandwidth":  # the least bandwidth within 10 ms
        assert delay(bandwidth=result) <= 10.0 < delay(bandwidth=np.nextafter(result, 0))
    elif entry == "max_tokens_within":  # the longest prompt within 10 ms
        assert delay(tokens=result) <= 10.0 < delay(tokens=result + 1)
    else:
        got = result if entry == "numpy" else (result if entry == "facade" else result["handoff_delay_ms"]).iloc[0]
        assert got == delay(), (entry, got, delay())


@pytest.mark.parametrize("per_message", [0.0, np.array([0.0]), [0.0]])
def test_num_layers_without_a_message_cost_is_refused_as_scalar_and_array(per_message):
    with pytest.raises(
        InputError,
        match="num_layers: counts the layers of messages posted per layer or of layer-wise streaming, and neither is on",
    ):
        perfmodel.handoff_delay_ms([1000], 50.0, 131072, per_message_ms=per_message, block_size=16, num_layers=32)


def test_an_explicit_layer_count_that_differs_from_a_named_model_s_is_refused():
    with pytest.raises(InputError, match="num_layers"):
        perfmodel.handoff_delay_ms(1000, 50.0, "llama-3.1-8b", num_layers=16, **MESSAGES)
    with pytest.raises(InputError, match="num_layers"):
        perfmodel.handoff_delay_ms(1000, 50.0, "llama-3.1-8b", num_layers=16, overlap="layerwise", prefill_ms=10.0)
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [1000], "num_output_tokens": 1})
    with pytest.raises(InputError, match="num_layers"):
        perfmodel.replay_handoffs(trace, kv_transfer_bandwidth=50.0, model="llama-3.1-8b", num_layers=16, **MESSAGES)
    # the model's own count is the same model: accepted, and equal to leaving it out
    assert perfmodel.handoff_delay_ms(
        1000, 50.0, "llama-3.1-8b", num_layers=32, **MESSAGES
    ) == perfmodel.handoff_delay_ms(1000, 50.0, "llama-3.1-8b", **MESSAGES)


@pytest.mark.parametrize("contention", ["none", "fifo"])
def test_a_replay_counts_each_requests_messages_with_its_own_layer_count(contention):
    """(The table declares num_layers per request in a replay; with message costs it was refused as one value.)
    Each request's messages follow its own layer count: with contention none each row equals the replay of its
    layer count alone; a Series lands by label; fifo keeps the link's order."""
    trace = perfmodel.synthetic_trace(40, rate_per_s=50, seed=1)
    sizes = np.where(np.arange(40) % 2, 65536.0, 131072.0)
    layers = np.where(np.arange(40) % 3, 32, 80)
    given = dict(kv_bytes_per_token=sizes, contention=contention, **MESSAGES)
    mixed = perfmodel.replay_handoffs(trace, "ib-ndr", num_layers=layers, **given)
    shuffled = pd.Series(layers, index=trace.index)[::-1]
    by_label = perfmodel.replay_handoffs(trace, "ib-ndr", num_layers=shuffled, **given)
    pd.testing.assert_frame_equal(mixed, by_label)
    if contention == "none":
        for count in (32, 80):
            alone = perfmodel.replay_handoffs(trace, "ib-ndr", num_layers=count, **given)
            rows = layers == count
            np.testing.assert_array_equal(mixed["handoff_delay_ms"][rows], alone["handoff_delay_ms"][rows])
    few = perfmodel.replay_handoffs(trace, "ib-ndr", num_layers=32, **given)
    assert (mixed["handoff_delay_ms"] >= few["handoff_delay_ms"]).all()  # (more layers, more messages)
    assert (mixed["handoff_delay_ms"] > few["handoff_delay_ms"]).any()


def test_a_cluster_replay_refuses_per_request_layer_counts_for_messages_by_name():
    cluster = perfmodel.Cluster(nic="roce-400g", nics_per_node=1, gpus_per_node=1)
    trace = perfmodel.synthetic_trace(4, rate_per_s=50, seed=1)
    with pytest.raises(
        InputError,
        match=r"^num_layers: a replay on a cluster counts messages with one layer count, "
        r"got a list of 4 values",
    ):
        perfmodel.replay_handoffs(
            trace,
            cluster,
            kv_bytes_per_token=65536.0,
            num_layers=[32, 32, 16, 16],
            prefill_workers=1,
            decode_workers=1,
            **MESSAGES,
        )


def test_a_cluster_replay_streams_with_per_request_layer_counts_when_messages_cost_nothing():
    cluster = perfmodel.Cluster(nic="roce-400g", nics_per_node=1, gpus_per_node=1)
    trace = perfmodel.synthetic_trace(4, rate_per_s=50, seed=1)
    replay = perfmodel.replay_handoffs(
        trace,
        cluster,
        kv_bytes_per_token=65536.0,
        num_layers=[32, 32, 16, 16],
        overlap="layerwise",
        prefill_ms=5.0,
        prefill_workers=1,
        decode_workers=1,
    )
    assert replay["handoff_delay_ms"].notna().all()


def test_the_ttft_replay_takes_the_layer_count_its_message_error_asks_for():
    """(Hostile: replay_ttft's error said "pass num_layers (--num-layers)", which neither it, ttft_grid nor
    ``perfmodel ttft`` took.) Its handoffs equal the replay's with the same layer counts, per request too."""
    trace = perfmodel.synthetic_trace(30, rate_per_s=50, seed=2)
    layers = np.where(np.arange(30) % 2, 16, 32)
    given = dict(kv_bytes_per_token=65536.0, **MESSAGES)
    ttft = perfmodel.replay_ttft(trace, "ib-ndr", num_layers=layers, **given)
    replay = perfmodel.replay_handoffs(trace, "ib-ndr", num_layers=layers, **given)
    np.testing.assert_array_equal(ttft["handoff_delay_ms"], replay["handoff_delay_ms"])
    grid = perfmodel.ttft_grid(trace, link="ib-ndr", num_layers=[16, 32], progress=False, **given)
    assert len(grid) == 2 and grid["p99_ms"].iloc[0] < grid["p99_ms"].iloc[1]
    with pytest.raises(InputError, match=r"pass num_layers \(--num-layers\)"):
        perfmodel.replay_ttft(trace, "ib-ndr", **given)


def test_a_replay_names_text_where_its_one_number_goes():
    """Found by a hostile pass: latency_ms="1" was refused as "a replay takes one value, got '1'" (it is one)."""
    import perfmodel

    trace = perfmodel.synthetic_trace(10, rate_per_s=10, seed=0)
    with pytest.raises(perfmodel.InputError, match=r"latency_ms: a replay takes one number, got the text '1'"):
        perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", latency_ms="1")
