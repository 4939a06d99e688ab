"""perfmodel's knobs in one place (perfmodel.options): set_options for the process or a with block, every change
checked before any is made, the old module constants still readable (with a warning), and each knob read by the
code it steers at each call."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError, get_options, set_options
from perfmodel.options import KNOBS


def test_the_defaults_are_the_knobs_defaults():
    assert get_options() == {name: knob.default for name, knob in KNOBS.items()}


def test_a_with_block_restores_the_values_however_it_ends():
    before = get_options()
    with pytest.raises(RuntimeError), set_options(parallel_min_rows=7, max_grid_configs=3):
        assert get_options()["parallel_min_rows"] == 7 and get_options()["max_grid_configs"] == 3
        raise RuntimeError
    assert get_options() == before


def test_a_call_lasts_until_changed_back():
    before = get_options()["spread_max_rows"]
    try:
        set_options(spread_max_rows=5)
        assert get_options()["spread_max_rows"] == 5
    finally:
        set_options(spread_max_rows=before)
    assert get_options()["spread_max_rows"] == before


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"parallel_min_row": 1}, "did you mean 'parallel_min_rows'"),
        ({"no_such_knob": 1}, "use one of parallel_min_rows"),
        ({"parallel_min_rows": -1}, "is not a whole number >= 0"),
        ({"sweep_chunk_rows": 0}, "is not a whole number >= 1"),
        ({"max_grid_configs": 2.5}, "is not a whole number"),
        ({"max_grid_configs": True}, "is not a whole number"),
        ({"max_worker_pairs": "8"}, "is not a whole number"),
        ({"max_worker_pairs": float("nan")}, "is not a whole number"),
    ],
)
def test_a_refused_change_is_one_line_and_changes_nothing(changes, message):
    before = get_options()
    with pytest.raises(InputError, match=message) as caught:
        set_options(**{"spread_max_rows": 1, **changes})  # (the good change beside it is not made either)
    assert "\n" not in str(caught.value)
    assert get_options() == before


def test_numpy_whole_numbers_are_taken():
    with set_options(max_grid_configs=np.int64(12)):
        assert get_options()["max_grid_configs"] == 12
        assert type(get_options()["max_grid_configs"]) is int


def test_get_options_is_a_copy():
    got = get_options()
    got["parallel_min_rows"] = -5
    assert get_options()["parallel_min_rows"] == KNOBS["parallel_min_rows"].default


@pytest.mark.parametrize(
    "module, name, knob",
    [
        ("handoff", "PARALLEL_MIN_ROWS", "parallel_min_rows"),
        ("handoff", "SPREAD_MAX_ROWS", "spread_max_rows"),
        ("replay", "MAX_CONFIGS", "max_grid_configs"),
        ("_cluster_replay", "MAX_PAIR_FLOWS", "max_pair_flows"),
        ("trace", "MAX_REQUESTS", "max_synthetic_requests"),
    ],
)
def test_the_old_constants_still_read_with_a_warning(module, name, knob):
    import importlib

    mod = importlib.import_module(f"perfmodel.{module}")
    with set_options(**{knob: 123}), pytest.warns(FutureWarning, match=rf"set_options\({knob}="):
        assert getattr(mod, name) == 123
    with pytest.raises(AttributeError):
        mod.NO_SUCH_CONSTANT  # noqa: B018


def test_the_grid_cap_is_read_at_each_call():
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [100, 200]})
    with set_options(max_grid_configs=1), pytest.raises(InputError, match="more than 1,"):
        perfmodel.replay_grid(trace, model="llama-3.1-8b", link=["ib-ndr", "eth-400g"])
    assert len(perfmodel.replay_grid(trace, model="llama-3.1-8b", link=["ib-ndr", "eth-400g"])) == 2


def test_the_worker_pair_cap_is_read_at_each_call():
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [100, 200]})
    kw = {"tp": 1, "prefill_workers": 2, "decode_workers": 2, "contention": "fair"}
    with set_options(max_worker_pairs=3), pytest.raises(InputError, match="more than the 3 a replay"):
        perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-8b", **kw)
    assert len(perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-8b", **kw)) == 2


@pytest.mark.parametrize(
    ("prefill", "decode", "named"),
    [(1, 5, "decode_workers"), (5, 1, "prefill_workers"), (2, 2, "prefill_workers and decode_workers")],
)
def test_too_many_worker_pairs_name_the_workers_that_make_them(prefill, decode, named):
    """The error named prefill_workers (1) for 300,000 decode workers."""
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [100]})
    kw = {"tp": 1, "prefill_workers": prefill, "decode_workers": decode, "contention": "fair"}
    with set_options(max_worker_pairs=3), pytest.raises(InputError, match=rf"^{named}: {prefill} prefill and "):
        perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-8b", **kw)


def test_the_pair_flow_cap_is_read_at_each_call():
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [100, 200]})
    kw = {"tp": 1, "prefill_workers": 2, "decode_workers": 2, "contention": "fair"}
    with set_options(max_pair_flows=3), pytest.raises(InputError, match=r"more than the 3 flows.*max_pair_flows="):
        perfmodel.replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-8b", **kw)


def test_the_synthetic_trace_cap_is_read_at_each_call():
    with set_options(max_synthetic_requests=10), pytest.raises(InputError, match="pass n <= 10 "):
        perfmodel.synthetic_trace(11, 10.0)
    assert len(perfmodel.synthetic_trace(11, 10.0)) == 11


def test_the_token_range_cap_is_read_at_each_call():
    from perfmodel.cli._parsing import UsageError, _check_range_size

    _check_range_size("1:100", 100)
    with set_options(max_token_values=10), pytest.raises(UsageError, match="100 values, more than 10;"):
        _check_range_size("1:100", 100)


def test_the_parallel_threshold_decides_and_gives_the_same_delays():
    tokens = np.arange(1, 5001)
    with set_options(parallel_min_rows=10**12):
        serial = perfmodel.handoff_delay_ms(tokens, 50.0, 327_680)
    with set_options(parallel_min_rows=0), warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(perfmodel.handoff_delay_ms(tokens, 50.0, 327_680, num_threads=2), serial)


def test_a_sweep_in_chunks_of_any_size_is_the_same_sweep():
    axes = {"model": "llama-3.1-70b", "link": ["ib-ndr", "nvlink4"], "num_input_tokens": [128, 4096, 32_768]}
    whole = perfmodel.sweep(**axes)
    with set_options(sweep_chunk_rows=1):
        pd.testing.assert_frame_equal(perfmodel.sweep(**axes), whole)


def test_an_object_used_for_two_blocks_makes_its_changes_in_each():
    before = get_options()["spread_max_rows"]
    changes = set_options(spread_max_rows=5)
    with changes:
        assert get_options()["spread_max_rows"] == 5
    assert get_options()["spread_max_rows"] == before
    with changes:
        assert get_options()["spread_max_rows"] == 5
    assert get_options()["spread_max_rows"] == before


def test_a_close_name_is_one_clean_suggestion():
    with pytest.raises(InputError) as caught:
        set_options(parallel_min_row=1)
    assert str(caught.value).endswith("Fix: did you mean 'parallel_min_rows'.")


def test_a_knob_with_a_bound_refuses_what_is_beyond_it():
    """(Hostile: max_time_bins=10**8 brought back the memory its bound keeps a replay's bins to.)"""
    with pytest.raises(
        perfmodel.InputError, match=r"^max_time_bins: 100,000,000 is above 65,536\. Fix: pass at most 65536"
    ):
        perfmodel.set_options(max_time_bins=10**8)
    with perfmodel.set_options(max_time_bins=65_536):
        assert perfmodel.get_options()["max_time_bins"] == 65_536
