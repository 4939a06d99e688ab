"""One way in: every entry point accepts the same forms of bandwidth and bytes per token, takes
the model's inputs in one positional order, and returns numpy's scalar-in/scalar-out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import Link

TOKENS = [1024, 32768]
MODEL = "llama-3.1-70b"
BYTES = perfmodel.kv_bytes_per_token(MODEL)
CONFIG = dict(perfmodel.MODELS[MODEL])
EXPECTED = perfmodel.handoff_delay_ms(TOKENS, 400.0, BYTES)  # 8 x 50 GB/s, the same in every form


def bandwidth_forms(tmp_path):
    return {
        "number": 400.0,
        "preset multiple": "8x ib-ndr",
        "Link": Link("eight-ports", 400.0),
        "fitted Link": perfmodel.fit_link([1e6, 1e9], [1e6 / 400e6, 1e9 / 400e6]),
        "column of names": pd.Series(["8x ib-ndr", "8x ib-ndr"]),
    }


def bytes_forms(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    return {
        "number": BYTES,
        "model name": MODEL,
        "config dict": CONFIG,
        "config path": str(path),
        "column of names": pd.Series([MODEL, MODEL]),
    }


@pytest.mark.parametrize("form", ["number", "preset multiple", "Link", "fitted Link", "column of names"])
def test_every_bandwidth_form_at_every_entry_point(entry_point, form, tmp_path):
    result = entry_point(TOKENS, bandwidth_forms(tmp_path)[form], BYTES)
    np.testing.assert_allclose(result, EXPECTED, rtol=1e-9)


@pytest.mark.parametrize("form", ["number", "model name", "config dict", "config path", "column of names"])
def test_every_bytes_form_at_every_entry_point(entry_point, form, tmp_path):
    result = entry_point(TOKENS, 400.0, bytes_forms(tmp_path)[form])
    np.testing.assert_allclose(result, EXPECTED, rtol=1e-12)


@pytest.mark.parametrize("form", ["number", "preset multiple", "Link", "model name", "config dict", "config path"])
def test_inverse_questions_take_the_same_forms(form, tmp_path):
    bandwidth = bandwidth_forms(tmp_path).get(form, 400.0)
    per_token = bytes_forms(tmp_path).get(form, BYTES)
    needed = perfmodel.required_bandwidth(32768, per_token, budget_ms=50.0)
    assert needed == pytest.approx(32768 * BYTES / 0.05 / 1e9)
    longest = perfmodel.max_tokens_within(bandwidth, per_token, budget_ms=50.0)
    assert (
        perfmodel.handoff_delay_ms(longest, 400.0, BYTES)
        <= 50.0
        < perfmodel.handoff_delay_ms(longest + 1, 400.0, BYTES)
    )


# --- one signature convention ----------------------------------------------------------


@pytest.mark.parametrize(
    "call, kind",
    [
        (lambda: perfmodel.handoff_delay_ms(1024, 50.0, BYTES), np.float64),
        (lambda: perfmodel.required_bandwidth(1024, BYTES, budget_ms=10.0), np.float64),
        (lambda: perfmodel.max_tokens_within(50.0, BYTES, budget_ms=10.0), np.int64),  # a count of tokens
        (lambda: perfmodel.LINKS["ib-ndr"].transfer_ms(1e9), np.float64),
        (lambda: perfmodel.destination_missing_tokens(100, 64, 16), np.int64),
    ],
)
def test_scalars_in_give_a_numpy_scalar_out(call, kind):
    assert type(call()) is kind


@pytest.mark.parametrize(
    "call",
    [
        lambda: perfmodel.handoff_delay_ms([1024], 50.0, BYTES),
        lambda: perfmodel.required_bandwidth([1024], BYTES, budget_ms=10.0),
        lambda: perfmodel.max_tokens_within([50.0], BYTES, budget_ms=10.0),
        lambda: perfmodel.LINKS["ib-ndr"].transfer_ms([1e9]),
        lambda: perfmodel.destination_missing_tokens([100], 64, 16),
    ],
)
def test_arrays_in_give_an_array_out(call):
    result = call()
    assert isinstance(result, np.ndarray) and result.shape == (1,)


def test_one_positional_order_and_knobs_by_keyword():
    # the model's inputs in one order everywhere; a third positional argument to the inverse questions is refused
    assert perfmodel.handoff_delay_ms(32768, 50.0, BYTES) == perfmodel.handoff_delay_ms(
        num_input_tokens=32768, kv_transfer_bandwidth=50.0, kv_bytes_per_token=BYTES
    )
    with pytest.raises(TypeError):
        perfmodel.required_bandwidth(32768, BYTES, 50.0)
    with pytest.raises(TypeError):
        perfmodel.max_tokens_within(50.0, BYTES, 50.0)
    with pytest.raises(TypeError):
        perfmodel.handoff_delay_ms(32768, 50.0, BYTES, "prefill")  # worker_type is a keyword
