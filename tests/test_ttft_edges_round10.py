"""The TTFT replay's edge, round 10 (helper 51): duplicated, text and nested inputs refused in one line (they
ended in numba's typing error or pandas' and numpy's); a summary of a result that lost its attrs says so (it
took one prefill worker and unbounded memory: a busy share of 3.26 for 0.82)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.errors import InputError

BASE = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [10, 20], "num_output_tokens": [1, 2]})
MS_PER_TOKEN = dict(kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6)


def _twice(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return pd.concat([frame, frame[[column]]], axis=1)


@pytest.mark.parametrize(
    ("trace", "keywords", "said"),
    [
        (_twice(BASE, "num_output_tokens"), dict(decode_step_ms=1.0), "trace column 'num_output_tokens': the trace has 2"),
        (_twice(BASE.assign(prefill_worker=[0, 1]), "prefill_worker"), dict(prefill_workers=2), "'prefill_worker': the trace has 2"),
        (_twice(BASE.assign(step=[1.0, 2.0]), "step"), dict(decode_step_ms="step"), "trace column 'step': the trace has 2"),
        (BASE.assign(num_output_tokens=["1", "x"]), dict(decode_step_ms=1.0), "'num_output_tokens': holds 'x' at row 1"),
        (BASE.assign(prefill_worker=["0", "x"]), dict(prefill_workers=2), "'prefill_worker': holds 'x' at row 1"),
        (BASE.assign(p=["1", "x"]), dict(prefill_ms="p"), "trace column 'p': holds 'x' at row 1: not a number"),
        (BASE, dict(prefill_ms=[[1.0], [2.0]]), "prefill_ms: has 2 dimensions"),
        (BASE, dict(prefill_tokens_per_s=1j), "prefill_tokens_per_s: holds 1j: not a number"),
        (BASE.assign(num_output_tokens=[2**53, 1]), dict(decode_step_ms=1.0), "not a whole number from 0 to 2\\*\\*53"),
        (BASE.assign(num_output_tokens=["1,000", "2"]), dict(decode_step_ms=1.0), "thousands separator: write 1000"),
    ],
)  # fmt: skip
def test_bad_serving_inputs_are_refused_in_one_line(trace, keywords, said):
    with pytest.raises(InputError, match=said):
        perfmodel.replay_ttft(trace, **MS_PER_TOKEN, **keywords)


def test_a_summary_of_a_result_without_its_attrs_says_so(tmp_path):
    trace = perfmodel.synthetic_trace(400, rate_per_s=40, seed=0)
    ttft = perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-8b", prefill_workers=4, prefill_tokens_per_s=20_000,
                                 decode_workers=2, decode_kv_tokens=400_000)  # fmt: skip
    ttft.to_csv(tmp_path / "ttft.csv")
    back = pd.read_csv(tmp_path / "ttft.csv", index_col=0)
    with pytest.warns(UserWarning, match=r"none of replay_ttft's attrs.*\(4 prefill, 2 decode"):
        summary = perfmodel.summarize_ttft(back)
    whole = perfmodel.summarize_ttft(ttft)
    assert summary["prefill_busy"] == pytest.approx(whole["prefill_busy"], rel=1e-12)
    assert np.isnan(summary["decode_memory_peak"]) and whole["decode_memory_peak"] > 0
