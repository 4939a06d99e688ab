"""Upstream's two rules of SEMANTICS.md (rule 6's replay at a bandwidth of 0, and the state moved once per
completed handoff even when 0 tokens are missing), and block-layout messages of windowed models, at every
entry point: the numpy API, the facade, sweeps and inverse questions, the replay, the references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import handoff_delay_ms, kv_messages, replay_handoffs, required_bandwidth, sweep

from . import reference


def _trace(ready, tokens, hashes=None):
    df = pd.DataFrame(
        {
            "arrival_ms": np.asarray(ready, float),
            "num_input_tokens": np.asarray(tokens, np.int64),
            "num_output_tokens": 1,
        }
    )
    if hashes is not None:
        import pyarrow as pa

        df["hash_ids"] = pd.Series(hashes, dtype=pd.ArrowDtype(pa.list_(pa.int64())))
    df.attrs["hash_block_tokens"] = 512
    return df


# --- the state moves once per completed handoff, even when 0 tokens are missing ---------------------


def test_the_contract_s_example_state_alone():
    # 0 charged tokens, S = 50,000 bytes at 1 GB/s: 0.05 ms, in both modes
    assert handoff_delay_ms(0, 1.0, 1000, state_bytes=50_000) == pytest.approx(0.05, rel=1e-12)
    assert handoff_delay_ms(
        100, 1.0, 1000, state_bytes=50_000, mode="destination_missing", destination_missing_tokens=0
    ) == pytest.approx(0.05, rel=1e-12)
    # and its latency, since bytes move
    assert handoff_delay_ms(0, 1.0, 1000, state_bytes=50_000, latency_ms=1.0) == pytest.approx(1.05, rel=1e-12)
    # no state, nothing charged: nothing moves, no latency (upstream bit for bit)
    assert handoff_delay_ms(0, 1.0, 1000, latency_ms=1.0) == 0.0


def test_reference_and_kernel_agree_on_the_state_of_an_empty_handoff():
    expected = reference.handoff_delay_row(0, 1.0, 1000, state_bytes=50_000)
    assert expected == pytest.approx(0.05, rel=1e-12)


def test_a_model_s_own_state_moves_when_nothing_is_missing():
    terms = perfmodel.kv_terms("qwen3-next-80b-a3b")
    assert terms.bytes(1000, charged_tokens=0) == terms.state_bytes
    got = handoff_delay_ms(1000, 10.0, "qwen3-next-80b-a3b", mode="destination_missing", destination_missing_tokens=0)
    assert got == pytest.approx(terms.state_bytes / 10e9 * 1000, rel=1e-12)


def test_replay_sends_the_state_on_a_full_cache_hit():
    trace = _trace([0.0, 100.0], [1024, 1024], [[7, 8], [7, 8]])
    replay = replay_handoffs(
        trace,
        kv_bytes_per_token=1000,
        kv_transfer_bandwidth=1.0,
        state_bytes=50_000,
        mode="destination_missing",
        block_size=512,
    )
    assert replay["charged_tokens"].tolist() == [1024, 0]
    assert replay["transfer_bytes"].tolist() == [1024 * 1000 + 50_000, 50_000]
    assert replay["transfer_ms"].iloc[1] == pytest.approx(0.05, rel=1e-12)


def test_sweeps_and_inverse_questions_charge_the_state_of_an_empty_prompt():
    table = sweep(num_input_tokens=[0], kv_transfer_bandwidth=[1.0], kv_bytes_per_token=[1000], state_bytes=50_000)
    assert table["handoff_delay_ms"].tolist() == pytest.approx([0.05])
    # 50,000 bytes in 0.05 ms need 1 GB/s
    assert required_bandwidth(0, 1000, budget_ms=0.05, state_bytes=50_000) == pytest.approx(1.0, rel=1e-12)


# --- replay at a bandwidth of 0: upstream's fallback delay -----------------------------------------


def test_replay_at_bandwidth_zero_uses_the_fallback_delay():
    trace = _trace([0.0, 1.0], [1000, 2000])
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=0.0, fallback_delay_ms=3.0)
    assert replay["handoff_delay_ms"].tolist() == [3.0, 3.0]
    # upstream's default fallback is 0.0
    replay = replay_handoffs(trace, kv_bytes_per_token=1000, kv_transfer_bandwidth=0.0)
    assert replay["handoff_delay_ms"].tolist() == [0.0, 0.0]
    # as the numpy API does
    assert handoff_delay_ms(1000, 0.0, 1000, fallback_delay_ms=3.0) == 3.0


def test_replay_refusals_of_bandwidth_no_longer_claim_upstream_refuses_zero():
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError) as error:
            replay_handoffs(_trace([0.0], [10]), kv_bytes_per_token=1, kv_transfer_bandwidth=bad)
        assert "refuses 0" not in str(error.value)


# --- block-layout messages of windowed models: a block holds every layer that keeps it -------------


def test_block_layout_of_an_all_window_model_is_capped_by_its_window():
    # mistral-7b-v0.1: every layer keeps a 4,096-token window: at most 4096 / 16 = 256 messages
    assert int(kv_messages("mistral-7b-v0.1", 10_000_000, 16, kv_layout="block")) == 256
    assert int(kv_messages("mistral-7b-v0.1", 100, 16, kv_layout="block")) == 7
    # a model with full-attention layers: every block of the prompt
    assert int(kv_messages("gemma-3-27b", 32_768, 16, kv_layout="block")) == 2048


def test_block_layout_messages_in_the_kernel_the_facade_and_replay():
    per_message = 0.001
    expected = 256 * per_message + perfmodel.kv_terms("mistral-7b-v0.1").bytes(10_000_000) / 50e9 * 1000
    got = handoff_delay_ms(
        10_000_000, 50.0, "mistral-7b-v0.1", per_message_ms=per_message, block_size=16, kv_layout="block"
    )
    assert got == pytest.approx(expected, rel=1e-12)
    frame = pd.DataFrame({"num_input_tokens": [10_000_000]})
    via_frame = perfmodel.handoff_delays(
        frame,
        kv_transfer_bandwidth=50.0,
        kv_bytes_per_token="mistral-7b-v0.1",
        per_message_ms=per_message,
        block_size=16,
        kv_layout="block",
    )
    assert via_frame.iloc[0] == pytest.approx(expected, rel=1e-12)
    replay = replay_handoffs(
        _trace([0.0], [10_000_000]),
        kv_transfer_bandwidth=50.0,
        model="mistral-7b-v0.1",
        per_message_ms=per_message,
        block_size=16,
        kv_layout="block",
    )
    assert replay["transfer_ms"].iloc[0] == pytest.approx(expected, rel=1e-12)


def test_block_layout_reference_counts_the_longest_kept_layer():
    layers = [("window", 4096, 2)] * 32
    assert reference.messages(10_000_000, 10_000_000, 16, layers, "block") == 256
    assert reference.messages(10_000, 10_000, 16, [("full", 0, 2)] + layers, "block") == 625
