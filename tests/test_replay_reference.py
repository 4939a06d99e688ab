"""Shared links with fixed costs: every request's delay against an independent event simulation
(tests/reference_replay.contention_reference), fifo and fair, with latency, per-block and per-message
costs, several links."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from perfmodel import replay_handoffs

from .reference_replay import contention_reference

BW = 2**20 / 1e6  # GB/s at which 1 KiB takes 1/1024 ms


def _trace(ready, tokens):
    return pd.DataFrame(
        {
            "arrival_ms": np.asarray(ready, float),
            "num_input_tokens": np.asarray(tokens, np.int64),
            "num_output_tokens": 1,
        }
    )


def _replayed(ready, tokens, **kw):
    layers, layout = kw.pop("num_layers"), kw.pop("kv_layout")
    messages = dict(kv_layout=layout) if kw.get("per_message_ms") else {}
    if messages and layout != "block":  # (a layout of blocks posts messages per block: no layer count counts)
        messages["num_layers"] = layers
    return replay_handoffs(_trace(ready, tokens), kv_bytes_per_token=1024, kv_transfer_bandwidth=BW, **messages, **kw)[
        "handoff_delay_ms"
    ].to_numpy()


def test_fair_data_phases_start_when_their_fixed_costs_end():
    """The issue's case: a long setup first, a short one just after; the second's bytes move first."""
    ready, tokens = [0.0, 0.0], [100_000, 1000]
    kw = dict(contention="fair", per_block_ms=0.05, block_size=16, latency_ms=0.0, links=1)
    expected, _ = contention_reference(ready, tokens, bytes_per_token=1024, bandwidth_gb_s=BW, **kw)
    got = _replayed(ready, tokens, num_layers=1, kv_layout="layer_kv", **kw)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@st.composite
def traces(draw):
    n = draw(st.integers(1, 12))
    ready = [float(draw(st.integers(0, 30))) for _ in range(n)]
    tokens = [draw(st.sampled_from([0, 1, 16, 500, 512, 1000, 3000, 8192])) for _ in range(n)]
    return ready, tokens


@settings(max_examples=400, deadline=None)
@given(
    case=traces(),
    contention=st.sampled_from(["none", "fifo", "fair"]),
    links=st.integers(1, 3),
    latency=st.sampled_from([0.0, 0.5, 2.0]),
    per_block=st.sampled_from([0.0, 2.0**-6, 0.25]),
    per_message=st.sampled_from([0.0, 2.0**-10, 2.0**-4]),
    block_size=st.sampled_from([16, 256, 512]),
    layers=st.integers(1, 4),
    layout=st.sampled_from(["layer_kv", "layer", "block"]),
)
def test_every_delay_equals_the_independent_simulation(
    case, contention, links, latency, per_block, per_message, block_size, layers, layout
):
    ready, tokens = case
    kw = dict(
        contention=contention,
        links=links,
        latency_ms=latency,
        per_block_ms=per_block,
        per_message_ms=per_message,
        block_size=block_size,
    )
    expected, ambiguous = contention_reference(
        ready, tokens, bytes_per_token=1024, bandwidth_gb_s=BW, num_layers=layers, kv_layout=layout, **kw
    )
    assume(not ambiguous)
    got = _replayed(ready, tokens, num_layers=layers, kv_layout=layout, **kw)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_twenty_requests_with_transport_costs(seed):
    """Random 20-request replays with a transport's costs (the issue's 70 of 100 differed)."""
    rng = np.random.default_rng(seed)
    ready = np.sort(rng.integers(0, 40, 20)).astype(float).tolist()
    tokens = rng.integers(1, 20_000, 20).tolist()
    kw = dict(contention="fair", links=2, latency_ms=0.5, per_block_ms=2.0**-8, per_message_ms=2.0**-12, block_size=16)
    expected, ambiguous = contention_reference(
        ready, tokens, bytes_per_token=1024, bandwidth_gb_s=BW, num_layers=32, kv_layout="layer", **kw
    )
    assert not ambiguous
    got = _replayed(ready, tokens, num_layers=32, kv_layout="layer", **kw)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
