"""A Series given for a per-request input of a replay lands on the trace's rows by label, as pandas aligns it,
never by position: the same rows in another order are aligned; a Series of other rows is refused by name."""

from __future__ import annotations

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
