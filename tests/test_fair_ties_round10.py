"""Fair sharing at one instant: a transfer whose bytes finish as another's fixed costs end ends first, so the
other takes the link it frees (SEMANTICS, "Order at one instant": handoff ends, then fixed-cost ends). It took
the busier link: its TTFT and another's doubled."""

from __future__ import annotations

import pandas as pd
import pytest

import perfmodel

TRACE = pd.DataFrame({"arrival_ms": [0.0, 0.0, 1.0], "num_input_tokens": [100, 1, 10]})
ON_TWO_LINKS = dict(kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6, latency_ms=1.0, contention="fair", links=2)


def test_the_ttft_replay_frees_the_link_before_the_next_transfer_takes_one():
    """1 ms a token, 1 ms of latency: request 1 ends at 2 ms on link 1, as request 2's latency ends; request 2
    takes link 1 (free) and ends at 12, request 0 keeps link 0 alone and ends at 101."""
    ttft = perfmodel.replay_ttft(TRACE, **ON_TWO_LINKS)
    assert ttft["ttft_ms"].tolist() == [101.0, 2.0, 11.0]
    assert ttft["link"].tolist() == [0, 1, 1]


def test_the_replay_of_handoffs_alone_agrees():
    replay = perfmodel.replay_handoffs(TRACE, **ON_TWO_LINKS)
    assert replay["handoff_delay_ms"].tolist() == [101.0, 2.0, 11.0]
    assert replay["link"].tolist() == [0, 1, 1]


@pytest.mark.parametrize("links", [2, 3])
def test_exact_ties_agree_with_the_reference(links):
    """Whole-millisecond inputs tie often: every request against the suite's reference event simulation."""
    from .reference_replay import contention_reference

    ready = [0.0, 0.0, 1.0, 2.0, 2.0, 12.0, 12.0, 13.0]
    tokens = [100, 1, 10, 1, 3, 5, 1, 2]
    trace = pd.DataFrame({"arrival_ms": ready, "num_input_tokens": tokens})
    got = perfmodel.replay_handoffs(trace, **{**ON_TWO_LINKS, "links": links})["handoff_delay_ms"].tolist()
    want, _ = contention_reference(
        ready, tokens, bytes_per_token=1e6, bandwidth_gb_s=1.0, contention="fair", links=links, latency_ms=1.0
    )
    assert got == pytest.approx(want, rel=1e-12, abs=0)
