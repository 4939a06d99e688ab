"""The summaries refuse a result whose times are not plain numbers (booleans read as 0 and 1, durations, dates,
text), in one line naming the column, rather than summarising them or failing with pandas' own error."""

from __future__ import annotations

import pandas as pd
import pytest

import perfmodel
from perfmodel.errors import InputError


@pytest.fixture(scope="module")
def results() -> dict[str, pd.DataFrame]:
    trace = perfmodel.synthetic_trace(40, rate_per_s=20, seed=2)
    return {
        "summarize": perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", contention="fifo"),
        "summarize_ttft": perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-8b", prefill_tokens_per_s=50_000),
    }


CORRUPT = {
    "booleans": lambda s: s > s.median(),
    "durations": lambda s: pd.to_timedelta(s, unit="ms"),
    "dates": lambda s: pd.to_datetime(s, unit="ms"),
    "text": lambda s: s.map(lambda v: f"{v:.3f}"),
}


@pytest.mark.parametrize("kind", list(CORRUPT))
@pytest.mark.parametrize(("summary", "column"), [("summarize", "handoff_delay_ms"), ("summarize_ttft", "ttft_ms")])
def test_a_summary_refuses_times_that_are_not_numbers(results, summary, column, kind):
    frame = results[summary].copy()
    frame[column] = CORRUPT[kind](frame[column])
    with pytest.raises(InputError) as caught:
        getattr(perfmodel, summary)(frame)
    message = str(caught.value)
    assert column in message and "Fix:" in message and "\n" not in message, message


@pytest.mark.parametrize("summary", ["summarize", "summarize_ttft"])
def test_a_result_as_made_is_summarised(results, summary):
    assert getattr(perfmodel, summary)(results[summary])["p50_ms"] >= 0
