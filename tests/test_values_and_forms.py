"""Values and forms a hostile user passes: float block ids, arrays of config dicts, completed=None, bandwidth
arrays mixing numbers and link names, arrays of different lengths in the inverse questions, absurd worker
counts, and a utilisation above 1 by float noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import perfmodel
from perfmodel import InputError, handoff_delay_ms, replay_handoffs, summarize


def _trace(hashes, tokens=512):
    return pd.DataFrame(
        {
            "arrival_ms": np.arange(len(hashes), dtype=float) * 100,
            "num_input_tokens": tokens,
            "num_output_tokens": 1,
            "hash_ids": hashes,
        }
    )


@pytest.mark.parametrize("hashes", [[[1.5], [1.7]], [[1.0], [np.nan]], [[1.0], [np.inf]]])
def test_block_ids_that_are_not_whole_are_refused_not_truncated(hashes):
    with pytest.raises(InputError, match="hash_ids"):
        replay_handoffs(_trace(hashes), kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing")


def test_block_ids_that_are_not_whole_are_refused_in_an_arrow_column():
    trace = _trace([[1.5], [1.7]])
    trace["hash_ids"] = pd.Series([[1.5], [1.7]], dtype=pd.ArrowDtype(pa.list_(pa.float64())))
    with pytest.raises(InputError, match="not whole"):
        replay_handoffs(trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing")


def test_whole_float_block_ids_are_the_integers():
    floats = replay_handoffs(
        _trace([[1.0], [1.0]]), kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing"
    )
    ints = replay_handoffs(
        _trace([[1], [1]]), kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing"
    )
    assert floats["cached_tokens"].tolist() == ints["cached_tokens"].tolist() == [0, 512]


@pytest.mark.parametrize("form", [list, lambda v: np.array(v, dtype=object), pd.Series])
def test_an_array_of_config_dicts_works_like_the_names(form):
    config = perfmodel.model_config("llama-3.1-8b")
    other = perfmodel.model_config("llama-3.1-70b")
    got = handoff_delay_ms([1000, 2000, 3000], 50.0, form([config, other, config]))
    expected = handoff_delay_ms([1000, 2000, 3000], 50.0, ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-8b"])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", ["completed", "worker_type", "mode"])
def test_none_is_not_a_state(name):
    with pytest.raises(InputError, match=name):
        handoff_delay_ms(1000, 50.0, 1000, **{name: None})


def test_a_bandwidth_array_mixing_numbers_and_link_names():
    got = handoff_delay_ms([1000, 1000], [50.0, "ib-ndr"], 1000)
    assert got.tolist() == [handoff_delay_ms(1000, 50.0, 1000), handoff_delay_ms(1000, "ib-ndr", 1000)]


@pytest.mark.parametrize(
    "call",
    [
        lambda: perfmodel.required_bandwidth([1000, 2000, 3], 1000, budget_ms=[1.0, 2.0]),
        lambda: perfmodel.max_tokens_within([50.0, 40.0, 1.0], 1000, budget_ms=[1.0, 2.0]),
    ],
)
def test_inverse_questions_name_the_arguments_of_different_lengths(call):
    with pytest.raises(InputError, match="budget_ms"):
        call()


def test_absurd_decode_worker_counts_are_refused_with_the_bound():
    with pytest.raises(InputError, match="decode_workers"):
        replay_handoffs(
            _trace([[1], [2]]),
            kv_bytes_per_token=1,
            kv_transfer_bandwidth=1.0,
            decode_workers=10**13,
            decode_cache_blocks=10,
        )  # (24 x 10**13 bytes: refused on any machine, never allocated)


def _replayed(transfer, start, end, links=1):
    frame = pd.DataFrame(
        {
            "handoff_delay_ms": transfer,
            "queue_ms": 0.0,
            "transfer_ms": transfer,
            "transfer_bytes": 1,
            "saved_bytes": 0,
            "start_ms": start,
            "end_ms": end,
        }
    )
    frame.attrs.update(links=links, mode="full_prompt")
    return frame


def test_utilisation_is_clipped_only_by_float_noise():
    # two transfers back to back on one link: busy all the time; 0.1 + 0.2 > 0.3 by one rounding step
    assert summarize(_replayed([0.1, 0.2], [0.0, 0.1], [0.1, 0.3]))["link_utilisation"] == 1.0
    # transfers that overlap (no contention): an offered load above 1 is reported as it is
    assert summarize(_replayed([0.2, 0.2], [0.0, 0.1], [0.2, 0.3]))["link_utilisation"] == pytest.approx(4 / 3)
    # a load a little above 1 but far above float noise stays
    assert summarize(_replayed([0.1, 0.2000001], [0.0, 0.1], [0.1, 0.3]))["link_utilisation"] > 1.0
