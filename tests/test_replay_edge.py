"""The one edge of both replays (perfmodel.replay.edge.handoffs_on): what both networks read is checked there,
alike, so a cluster refuses what a link refuses, in the same words. Found by a hostile pass: a cluster took an
unknown overlap as layer-wise, text as a latency, a layer count the model does not have, and a NaN fallback
delay at a bandwidth of 0 crashed the process."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.errors import InputError

TRACE = perfmodel.synthetic_trace(30, 20, seed=3)
ONE_NIC = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
MODEL = "llama-3.1-8b"  # 32 layers

REFUSED_ALIKE = {
    "an unknown overlap": dict(overlap="x"),
    "an overlap in capitals": dict(overlap="LAYERWISE"),
    "an unknown layout": dict(kv_layout="x"),
    "a latency as text": dict(latency_ms="1"),
    "a cost per message as text": dict(per_message_ms="0.5"),
    "a negative fallback": dict(fallback_delay_ms=-5.0),
    "a fallback as text": dict(fallback_delay_ms="x"),
    "an infinite fallback": dict(fallback_delay_ms=np.inf),
    "a NaN fallback": dict(fallback_delay_ms=np.nan),
    "a prefill time with streaming off": dict(prefill_ms=20.0),
    "a layer count the model does not have": dict(num_layers=7, per_message_ms=0.01),
    "a layer count that counts nothing": dict(num_layers=32),
    "a routing in capitals": dict(routing="PREFIX"),
    "links as text": dict(links="1"),
    "no block size": dict(block_size=0),
    "no decode worker": dict(decode_workers=0),
}


@pytest.mark.parametrize("case", list(REFUSED_ALIKE))
def test_a_cluster_refuses_what_a_link_refuses_in_the_same_words(case):
    given = REFUSED_ALIKE[case]
    with pytest.raises(InputError) as on_link:
        perfmodel.replay_handoffs(TRACE, "ib-ndr", MODEL, **given)
    with pytest.raises(InputError) as on_cluster:
        perfmodel.replay_handoffs(TRACE, ONE_NIC, MODEL, **given)
    assert str(on_cluster.value) == str(on_link.value)


@pytest.mark.parametrize("case", [c for c in REFUSED_ALIKE if "prefill" not in c and "overlap" not in c])
def test_the_ttft_replay_refuses_them_too_on_both(case):
    given = dict(REFUSED_ALIKE[case], prefill_ms=1.0)
    with pytest.raises(InputError) as on_link:
        perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, **given)
    with pytest.raises(InputError) as on_cluster:
        perfmodel.replay_ttft(TRACE, ONE_NIC, MODEL, **given)
    assert str(on_cluster.value) == str(on_link.value)


def test_a_layer_count_that_counts_nothing_says_what_would_count_it():
    with pytest.raises(InputError, match="num_layers: counts the layers") as raised:
        perfmodel.replay_ttft(TRACE, "ib-ndr", MODEL, num_layers=32, prefill_ms=1.0)
    assert "pass a per_message_ms" in str(raised.value)


@pytest.mark.parametrize("contention", ["none", "fifo"])
@pytest.mark.parametrize("replay", ["replay_handoffs", "replay_ttft"])
def test_a_nan_fallback_at_no_bandwidth_is_refused_not_a_crash(replay, contention):
    one = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [100]})
    with pytest.raises(InputError, match="fallback_delay_ms: nan is not a delay a replay can charge"):
        getattr(perfmodel, replay)(one, 0.0, 1e5, fallback_delay_ms=float("nan"), contention=contention)


def test_a_model_given_as_a_series_is_named_model():
    models = pd.Series([MODEL] * len(TRACE), index=TRACE.index + 100)
    with pytest.raises(InputError, match="^model: a Series whose index differs"):
        perfmodel.replay_handoffs(TRACE, "ib-ndr", model=models)


def test_a_cluster_in_a_zero_dimensional_array_is_the_cluster():
    wrapped = perfmodel.replay_handoffs(TRACE, np.array(ONE_NIC, dtype=object), MODEL)
    pd.testing.assert_frame_equal(wrapped, perfmodel.replay_handoffs(TRACE, ONE_NIC, MODEL))


def test_a_grids_requests_keep_every_label_of_a_mixed_axis():
    summary, requests = perfmodel.replay_grid(
        TRACE, link=["ib-ndr", 25.0, ONE_NIC], model=MODEL, keep="requests", num_threads=1, progress=False
    )
    assert not requests["link"].isna().any()
    assert requests["link"].unique().tolist() == summary["link"].tolist() == ["ib-ndr", "25.0", "cluster"]
