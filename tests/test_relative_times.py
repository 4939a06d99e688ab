"""Durations from relative times: a replay of a trace shifted by 1.7e12 ms (Unix-epoch milliseconds) reports the
same delays as the trace unshifted, on links (contention none, fifo and fair) and on clusters (none and fair),
with prefix caches, every fixed cost, and in summaries and grids.

Tolerance: exact. The arrivals are multiples of 2**-12 ms, the ulp of a time near 1.7e12 ms, so the shifted
arrivals are the unshifted ones plus 1.7e12 exactly, and a replay that works in times from the earliest arrival
sees bit-identical inputs. (Arbitrary arrivals are themselves rounded to 2.4e-4 ms by the shift, which moves
what overlaps what: that is the input, not the replay's arithmetic.) Timestamps (start_ms, end_ms) stay on the
trace's clock: they are the unshifted ones plus 1.7e12, to within one ulp of that.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import Cluster, Link, Transport, replay_handoffs

from .test_cluster_replay import within_prompts
from .test_clusters import clusters

SHIFT = 1.7e12
ULP = math.ulp(SHIFT)  # 2**-12 ms
TIMESTAMPS = ("arrival_ms", "start_ms", "end_ms")


def _trace(rows, shift=0.0):
    rows = within_prompts(rows)
    frame = pd.DataFrame(
        {
            "arrival_ms": np.array([r[0] * ULP for r in rows]) + shift,
            "num_input_tokens": np.array([r[1] for r in rows], dtype=np.int64),
        }
    )
    frame["hash_ids"] = pd.Series([list(r[2]) for r in rows], dtype=object)
    frame.attrs["hash_block_tokens"] = 16
    return frame


def _same_replay(shifted, unshifted):
    """Every column but the timestamps equal exactly; the timestamps the unshifted ones plus the shift."""
    assert list(shifted.columns) == list(unshifted.columns)
    for column in shifted.columns:
        if column in TIMESTAMPS:
            np.testing.assert_allclose(
                shifted[column].to_numpy() - SHIFT, unshifted[column].to_numpy(), rtol=0, atol=ULP
            )
        else:
            pd.testing.assert_series_equal(shifted[column], unshifted[column], check_exact=True)
    a, b = perfmodel.summarize(shifted), perfmodel.summarize(unshifted)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), key


ROWS = st.lists(
    st.tuples(st.integers(0, 40 * 4096), st.integers(0, 3000), st.lists(st.integers(0, 6), max_size=6)),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(
    ROWS,
    st.sampled_from(["none", "fifo", "fair"]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(["prefix", "round_robin"]),
    st.sampled_from(["full_prompt", "destination_missing"]),
    st.sampled_from([None, 4]),
    st.sampled_from([0.0, 0.013]),
    st.sampled_from([0.0, 0.0007]),
    st.sampled_from([0.0, 0.0001]),
    st.sampled_from(["none", "layerwise"]),
)
def test_a_shifted_trace_on_links_has_the_same_delays(
    rows, contention, links, workers, routing, mode, capacity, latency, per_block, per_message, overlap
):
    keywords = dict(
        link=Link("nic", 12.5),
        model="llama-3.1-8b",
        contention=contention,
        links=links,
        decode_workers=workers,
        routing=routing,
        mode=mode,
        decode_cache_blocks=capacity,
        latency_ms=latency,
        per_block_ms=per_block,
        per_message_ms=per_message,
        block_size=16,
        overlap=overlap,
        prefill_ms=3.0 if overlap == "layerwise" else None,
    )
    _same_replay(replay_handoffs(_trace(rows, SHIFT), **keywords), replay_handoffs(_trace(rows), **keywords))


def _model(heads):
    return {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_key_value_heads": heads,
        "num_attention_heads": 2 * heads,
        "head_dim": 64,
        "hidden_size": 128 * heads,
        "torch_dtype": "bfloat16",
    }


@settings(max_examples=60, deadline=None)
@given(clusters(), st.sampled_from([1, 2, 4, 8]), ROWS, st.data())
def test_a_shifted_trace_on_a_cluster_has_the_same_delays(cluster, heads, rows, data):
    degrees = [t for t in (1, 2, 4, 8) if heads % t == 0 or t % heads == 0]
    costs = data.draw(st.sampled_from([(0.0, 0.0, 0.0), (0.002, 0.0001, 0.0005)]), label="setup, message, block")
    cluster = dataclasses.replace(
        cluster,
        transport=Transport(
            "t",
            setup_ms=costs[0],
            per_message_ms=costs[1],
            per_block_ms=costs[2],
            efficiency=cluster.transport.efficiency,
        ),
    )
    keywords = dict(
        model=_model(heads),
        tp=data.draw(st.sampled_from(degrees), label="tp"),
        decode_tp=data.draw(st.sampled_from(degrees), label="decode_tp"),
        prefill_workers=data.draw(st.integers(1, 3), label="prefill_workers"),
        decode_workers=data.draw(st.integers(1, 3), label="decode_workers"),
        routing=data.draw(st.sampled_from(["prefix", "round_robin", "least_loaded", "topology"])),
        contention=data.draw(st.sampled_from(["none", "fair"])),
        mode=data.draw(st.sampled_from(["full_prompt", "destination_missing"])),
        decode_cache_blocks=data.draw(st.sampled_from([None, 4])),
        latency_ms=data.draw(st.sampled_from([0.0, 0.01])),
        block_size=16,
    )
    _same_replay(
        replay_handoffs(_trace(rows, SHIFT), cluster, **keywords), replay_handoffs(_trace(rows), cluster, **keywords)
    )


@pytest.mark.parametrize("contention", ["none", "fair"])
def test_a_handoff_alone_at_epoch_milliseconds_is_not_rounded_to_their_ulp(contention):
    """The issue's case: a 0.005243 ms handoff at about 1.7e12 ms came out as 0.005127 ms (2% low), with
    contention="none" too, where each handoff is alone by contract; arrivals that are not multiples of the ulp."""
    cluster = Cluster(nic=Link("nic", 50.0), nics_per_node=1, gpus_per_node=1)
    arrivals = 1_733_000_000_000.0 + np.array([0.1, 1234.5671, 98765.4321])
    trace = pd.DataFrame({"arrival_ms": arrivals, "num_input_tokens": [2] * 3})
    got = replay_handoffs(trace, cluster, 131_072.0, contention=contention)
    alone = 2 * 131_072 / 50e9 * 1e3
    assert got["handoff_delay_ms"].tolist() == pytest.approx([alone] * 3, rel=1e-14)
    assert (got["handoff_delay_ms"] == got["transfer_ms"]).all()
    on_link = replay_handoffs(trace, Link("nic", 50.0), 131_072.0, contention=contention)
    assert on_link["handoff_delay_ms"].tolist() == got["handoff_delay_ms"].tolist()


def test_a_grid_of_a_shifted_trace_has_the_same_figures():
    trace = perfmodel.synthetic_trace(400, rate_per_s=200, seed=1)
    trace["arrival_ms"] = np.round(trace["arrival_ms"] / ULP) * ULP
    shifted = trace.copy()
    shifted["arrival_ms"] += SHIFT
    axes = dict(model="llama-3.1-70b", link="ib-ndr", contention=["fifo", "fair"], decode_workers=[1, 2])
    pd.testing.assert_frame_equal(
        perfmodel.replay_grid(shifted, **axes), perfmodel.replay_grid(trace, **axes), check_exact=True
    )
