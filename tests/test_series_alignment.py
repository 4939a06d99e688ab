"""A Series given for a per-request input of a replay lands on the trace's rows by label, as pandas aligns it,
never by position: the same rows in another order are aligned; a Series of other rows is refused by name."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.errors import InputError

TRACE = pd.DataFrame(
    {"arrival_ms": [0.0, 1.0, 2.0, 30.0], "num_input_tokens": [1000, 2000, 3000, 500]}, index=[10, 11, 12, 13]
)
VALUES = {  # per-request input: one value per request, in the trace's order (distinct, so a shuffle shows)
    "ready_ms": [5.0, 1.0, 2.5, 40.0],
    "state_bytes": [0.0, 1e6, 3e6, 7e6],
    "kv_bytes_per_token": [131072.0, 65536.0, 327680.0, 1000.0],
}
TTFT_VALUES = {
    "prefill_ms": [5.0, 0.5, 9.0, 1.0],
    "decode_step_ms": [1.0, 2.0, 3.0, 4.0],
    "state_bytes": [0.0, 1e6, 3e6, 7e6],
    "kv_bytes_per_token": [131072.0, 65536.0, 327680.0, 1000.0],
}


def _replay(name: str, value, function=perfmodel.replay_handoffs):
    kwargs = {"kv_transfer_bandwidth": "ib-ndr", "kv_bytes_per_token": 131072.0, name: value}
    if function is perfmodel.replay_handoffs:
        kwargs["contention"] = "fifo"
    return function(TRACE, **kwargs)


@pytest.mark.parametrize(
    ("function", "name"),
    [(perfmodel.replay_handoffs, name) for name in VALUES] + [(perfmodel.replay_ttft, name) for name in TTFT_VALUES],
)
def test_a_series_in_another_order_lands_on_its_own_rows(function, name):
    values = (VALUES if function is perfmodel.replay_handoffs else TTFT_VALUES)[name]
    in_order = _replay(name, np.array(values), function)
    shuffled = pd.Series(values, index=TRACE.index)[[13, 11, 10, 12]]
    pd.testing.assert_frame_equal(_replay(name, shuffled, function), in_order)
    pd.testing.assert_frame_equal(_replay(name, pd.Series(values, index=TRACE.index), function), in_order)


@pytest.mark.parametrize(
    ("function", "name"),
    [(perfmodel.replay_handoffs, name) for name in VALUES] + [(perfmodel.replay_ttft, name) for name in TTFT_VALUES],
)
def test_a_series_of_other_rows_is_refused_by_name(function, name):
    values = (VALUES if function is perfmodel.replay_handoffs else TTFT_VALUES)[name]
    for index in ([0, 1, 2, 3], [10, 11, 12, 12]):
        with pytest.raises(InputError, match=f"^{name}: a Series whose index differs from the trace's") as error:
            _replay(name, pd.Series(values, index=index), function)
        assert ".to_numpy()" in str(error.value)


def test_a_series_of_models_in_another_order_lands_on_its_own_rows():
    models = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "llama-3.1-8b"]
    in_order = perfmodel.replay_handoffs(TRACE, "ib-ndr", np.array(models, dtype=object))
    shuffled = pd.Series(models, index=TRACE.index).iloc[::-1]
    pd.testing.assert_frame_equal(perfmodel.replay_handoffs(TRACE, "ib-ndr", shuffled), in_order)


def test_a_numpy_array_or_list_goes_by_position():
    as_list = _replay("ready_ms", VALUES["ready_ms"])
    assert as_list.loc[11, "start_ms"] == 1.0 and as_list.loc[10, "start_ms"] >= 5.0  # (the list's 2nd value: row 11)
    pd.testing.assert_frame_equal(_replay("ready_ms", np.array(VALUES["ready_ms"])), as_list)


def test_series_of_other_indexes_are_not_paired_by_position():
    tokens = pd.Series([1000, 2000], index=[5, 6])
    bandwidth = pd.Series([1.0, 100.0], index=[6, 5])
    with pytest.raises(InputError, match="^kv_transfer_bandwidth: a Series whose index differs from num_input_tokens'"):
        perfmodel.handoff_delay_ms(tokens, bandwidth, 1e6)
    with pytest.raises(InputError, match="^worker_type: a Series whose index"):
        perfmodel.handoff_delay_ms(tokens, 1.0, 1e6, worker_type=pd.Series(["prefill", "decode"]))
    # one index shared (or one Series among scalars and arrays): paired by position, as numpy pairs arrays
    same = perfmodel.handoff_delay_ms(tokens, bandwidth.reindex(tokens.index), 1e6)
    np.testing.assert_array_equal(same, [10.0, 2000.0])
    np.testing.assert_array_equal(perfmodel.handoff_delay_ms(tokens, np.array([100.0, 1.0]), 1e6), [10.0, 2000.0])


def test_layerwise_streaming_reads_each_requests_layers_from_its_own_model():
    """(Hostile: the bytes followed a reordered Series of models, the layer counts went by position.)"""
    trace = TRACE.assign(arrival_ms=[0.0, 100.0, 200.0, 300.0])
    models = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "llama-3.1-8b"]
    given = dict(overlap="layerwise", prefill_ms=50.0)
    in_order = perfmodel.replay_handoffs(trace, "ib-ndr", np.array(models, dtype=object), **given)
    shuffled = pd.Series(models, index=trace.index).iloc[::-1]
    for keywords in ({"kv_bytes_per_token": shuffled}, {"model": shuffled}):
        pd.testing.assert_frame_equal(perfmodel.replay_handoffs(trace, "ib-ndr", **keywords, **given), in_order)
    layers = pd.Series([32, 80, 64, 32], index=trace.index)  # each model's own count, by label
    got = perfmodel.replay_handoffs(trace, "ib-ndr", shuffled, num_layers=layers.iloc[[2, 0, 3, 1]], **given)
    pd.testing.assert_frame_equal(got, in_order)
    with pytest.raises(
        InputError, match=r"^num_layers: 1 invalid row; first at row 11: 64 \(the model on that row has 80"
    ):
        perfmodel.replay_handoffs(trace, "ib-ndr", shuffled, num_layers=[32, 64, 64, 32], **given)


S = pd.Series


@pytest.mark.parametrize(
    "call",
    [
        lambda: perfmodel.required_bandwidth(S([1000, 2000], index=[5, 6]), S([1e6, 2e6], index=[6, 5]), budget_ms=50),
        lambda: perfmodel.required_bandwidth(
            S([1000, 2000], index=[5, 6]), 1e6, budget_ms=50, latency_ms=S([0.0, 40.0], index=[6, 5])
        ),
        lambda: perfmodel.max_tokens_within(S([1.0, 100.0], index=[6, 5]), S([1e6, 2e6], index=[5, 6]), budget_ms=50),
        lambda: perfmodel.max_tokens_within(
            S([1.0, 100.0], index=[6, 5]), 1e6, budget_ms=S([10.0, 50.0], index=[5, 6])
        ),
        lambda: perfmodel.destination_missing_tokens(S([1000, 2000], index=[5, 6]), S([0, 1000], index=[6, 5]), 16),
        lambda: perfmodel.kv_bytes(
            "llama-3.1-8b", S([1000, 2000], index=[5, 6]), charged_tokens=S([0, 1000], index=[6, 5])
        ),
        lambda: perfmodel.kv_messages(
            "llama-3.1-8b", S([1000, 2000], index=[5, 6]), 16, charged_tokens=S([0, 1000], index=[6, 5])
        ),
    ],
)
def test_every_numpy_entry_point_refuses_series_of_different_indexes(call):
    with pytest.raises(InputError, match="a Series whose index differs from"):
        call()


def test_a_trace_time_as_a_duration_or_a_date_is_refused_not_read_in_its_raw_unit():
    """(Hostile: a timedelta of 1 ms was read as 1000 ms, the dtype's microseconds.)"""
    durations = pd.Series(pd.to_timedelta([0, 1, 2, 3], unit="ms"), index=TRACE.index)
    for call in (
        lambda: perfmodel.replay_handoffs(TRACE, 1.0, 1e6, ready_ms=durations, contention="fifo"),
        lambda: perfmodel.replay_handoffs(TRACE.assign(arrival_ms=durations), 1.0, 1e6),
        lambda: perfmodel.replay_ttft(TRACE.assign(arrival_ms=durations), 1.0, 1e6),
        lambda: perfmodel.replay_ttft(TRACE.assign(arrival_ms=pd.Timestamp(0) + durations), 1.0, 1e6),
        lambda: perfmodel.replay_ttft(TRACE, 1.0, 1e6, prefill_ms=durations),
        # (second pass: lists and single values of them were read in microseconds, or raised a raw TypeError)
        lambda: perfmodel.replay_handoffs(TRACE, 1.0, 1e6, ready_ms=list(durations), contention="fifo"),
        lambda: perfmodel.replay_handoffs(TRACE, 1.0, 1e6, ready_ms=[datetime.timedelta(milliseconds=5)] * 4),
        lambda: perfmodel.replay_handoffs(TRACE, 1.0, 1e6, ready_ms=durations.astype(object)),
        lambda: perfmodel.replay_ttft(TRACE, 1.0, 1e6, prefill_ms=1.0, decode_step_ms=pd.Timedelta(1, "ms")),
        lambda: perfmodel.replay_ttft(TRACE, 1.0, 1e6, prefill_ms=datetime.timedelta(milliseconds=1)),
        lambda: perfmodel.replay_handoffs(TRACE, 1.0, 1e6, ready_ms=list(pd.Timestamp(0) + durations)),
        lambda: perfmodel.replay_handoffs(TRACE, 1.0, 1e6, ready_ms=np.datetime64("2024-01-01")),
    ):
        with pytest.raises(InputError, match=r"got (durations|dates) where ms as plain numbers were expected"):
            call()


@pytest.mark.parametrize(
    ("grid", "name"),
    [(perfmodel.replay_grid, "kv_bytes_per_token"), (perfmodel.ttft_grid, "prefill_ms")],
)
def test_a_grid_refuses_a_series_it_would_read_as_configurations(grid, name):
    """(Hostile: a Series of one value per request ran as one configuration per value, by position.)"""
    given = {"kv_transfer_bandwidth": "ib-ndr", "kv_bytes_per_token": 131072.0}
    given[name] = pd.Series([1.0, 2.0, 3.0, 4.0], index=TRACE.index)
    with pytest.raises(
        InputError, match=rf"^{grid.__name__}: {name}: a Series, which a grid reads as 4 configurations"
    ):
        grid(TRACE, **given)


def test_a_frame_where_one_column_goes_is_refused_by_name_in_every_numpy_entry_point():
    """(Hostile: two one-column frames raised numpy's 'Buffer has wrong number of dimensions'.)"""
    tokens, bandwidth = pd.Series([1000, 2000]).to_frame(), pd.Series([1.0, 2.0]).to_frame()
    with pytest.raises(InputError, match=r"^num_input_tokens: got a DataFrame with columns \[0\]"):
        perfmodel.handoff_delay_ms(tokens, bandwidth, 1e6)
    with pytest.raises(InputError, match=r"^num_input_tokens: got a DataFrame"):
        perfmodel.required_bandwidth(tokens, 1e6, budget_ms=bandwidth)
    with pytest.raises(InputError, match=r"^model config: got a Series of 1 value\. Fix: pass one model"):
        perfmodel.kv_bytes(pd.Series(["llama-3.1-8b"]), 100)  # (a raw TypeError)


def test_a_ready_time_before_its_requests_arrival_is_refused():
    """(Hostile: prefill durations given as ``ready_ms``, where the times prefills end go, replayed every handoff
    before its request arrived, and silently.)"""
    trace = TRACE.assign(arrival_ms=[1000.0, 1010.0, 1020.0, 1030.0])
    durations = [5.0, 6.0, 7.0, 8.0]
    for call in (
        lambda: perfmodel.replay_handoffs(trace, 1.0, 1e6, ready_ms=durations, contention="fifo"),
        lambda: perfmodel.replay_handoffs(trace, 1.0, 1e6, ready_ms=0.0),
        lambda: perfmodel.replay_grid(
            trace, kv_transfer_bandwidth=[1.0, 2.0], kv_bytes_per_token=1e6, ready_ms=durations, progress=False
        ),
        lambda: perfmodel.required_nics(
            trace, "ib-ndr", "llama-3.1-8b", budget_ms=50, contention="fifo", ready_ms=durations
        ),
    ):
        with pytest.raises(
            InputError,
            match=r"ready_ms.*ready before its request arrives: (5|0)\.0 ms at row 10, its "
            r"arrival 1000\.0 ms \(4 such rows\).*arrival_ms plus",
        ):
            call()
    later = [1000.0, 1015.0, 1020.0, 1031.5]  # (at or after each arrival: taken)
    replay = perfmodel.replay_handoffs(trace, 1.0, 1e6, ready_ms=later)
    assert replay["start_ms"].tolist() == later


def test_a_cluster_replay_refuses_a_series_of_models_under_the_name_it_was_given():
    """(Hostile: ``model=`` a Series was refused under the name kv_bytes_per_token, which the call did not use.)"""
    cluster = perfmodel.Cluster(nic="roce-400g", nics_per_node=1, gpus_per_node=1)
    models = pd.Series(["llama-3.1-8b"] * 4, index=TRACE.index)
    sizes = pd.Series([131072.0] * 4, index=TRACE.index)
    for replay in (perfmodel.replay_handoffs, perfmodel.replay_ttft):
        extra = {"prefill_ms": 1.0} if replay is perfmodel.replay_ttft else {}
        with pytest.raises(InputError, match=r"^model: a replay on a cluster takes one model, got a Series of 4"):
            replay(TRACE, cluster, model=models, prefill_workers=1, decode_workers=1, **extra)
        with pytest.raises(InputError, match=r"^kv_bytes_per_token: a replay on a cluster takes one model"):
            replay(TRACE, cluster, kv_bytes_per_token=sizes, prefill_workers=1, decode_workers=1, **extra)
        with pytest.raises(InputError, match=r"^model: trace column 'm' mixes models"):
            replay(
                TRACE.assign(m=["llama-3.1-8b", "llama-3.1-70b"] * 2),
                cluster,
                model="m",
                prefill_workers=1,
                decode_workers=1,
                **extra,
            )


def test_a_grid_takes_a_ready_ms_series_in_another_order_as_the_replay_does():
    """(Hostile: the grid checked each configuration on the first two requests with the Series' first two values
    by position, and refused a valid ready_ms as "ready before its request arrives".)"""
    trace = TRACE.assign(arrival_ms=[0.0, 100.0, 200.0, 300.0])
    ready = (trace["arrival_ms"] + 5.0).reindex([11, 10, 13, 12])
    _, requests = perfmodel.replay_grid(
        trace, kv_transfer_bandwidth=[1.0, 2.0], kv_bytes_per_token=1e3, ready_ms=ready, progress=False, keep="requests"
    )
    replay = perfmodel.replay_handoffs(trace, 1.0, 1e3, ready_ms=ready)
    first = requests[requests["kv_transfer_bandwidth"] == 1.0]
    assert first["start_ms"].tolist() == replay["start_ms"].tolist() == [5.0, 105.0, 205.0, 305.0]


def test_a_missing_or_unreadable_arrival_is_refused_under_its_own_name():
    """(Hostile: a NaN arrival was replayed when ready_ms was given, and refused as "ready_ms" when it was not;
    text raised a raw ValueError.)"""
    missing = TRACE.assign(arrival_ms=[0.0, 1.0, np.nan, 30.0])
    for call in (
        lambda: perfmodel.replay_handoffs(missing, 1.0, 1e6, ready_ms=[5.0, 6.0, 7.0, 40.0]),
        lambda: perfmodel.replay_handoffs(missing, 1.0, 1e6),
        lambda: perfmodel.replay_ttft(missing, 1.0, 1e6, prefill_ms=1.0),
    ):
        with pytest.raises(
            InputError,
            match=r"^trace column 'arrival_ms': arrival times must be finite, got nan at "
            r"row 12",
        ):
            call()
    with pytest.raises(InputError, match=r"^trace column 'arrival_ms': holds 'two' at row 12: not a number"):
        perfmodel.replay_handoffs(TRACE.assign(arrival_ms=["0", "1", "two", "3"]), 1.0, 1e6)


def test_an_unknown_model_on_a_cluster_is_an_input_error_named_as_given():
    """(Hostile: it raised a plain ValueError on a cluster, an InputError on a link.)"""
    cluster = perfmodel.Cluster(nic="roce-400g", nics_per_node=1, gpus_per_node=1)
    with pytest.raises(InputError, match=r"^model: model 'nope-model': not a preset"):
        perfmodel.replay_handoffs(TRACE, cluster, model="nope-model", prefill_workers=1, decode_workers=1)


def test_a_replay_on_links_names_a_bad_model_as_the_call_gave_it():
    """(As on a cluster: ``model=`` was refused under the name kv_bytes_per_token.)"""
    with pytest.raises(InputError, match=r"^model: model 'nope-model': not a preset"):
        perfmodel.replay_handoffs(TRACE, "ib-ndr", model=["llama-3.1-8b", "nope-model", "llama-3.1-8b", "qwen3-8b"])
    with pytest.raises(InputError, match=r"^model: 1 request without bytes per token or a model, first at row 11"):
        perfmodel.replay_handoffs(TRACE, "ib-ndr", model=[1.0, np.nan, 2.0, 3.0])
    with pytest.raises(InputError, match=r"^kv_bytes_per_token: 1 request without bytes per token or a model"):
        perfmodel.replay_handoffs(TRACE, "ib-ndr", kv_bytes_per_token=[1.0, np.nan, 2.0, 3.0])
