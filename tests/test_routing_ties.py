"""Routing ties on a cluster (SEMANTICS.md "Replay on a cluster", amended): the last tie of "least_loaded" and
"topology" goes round robin among the tied workers, the first of them after the worker chosen last, so equal
workers share equally (they all went to worker 0)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import Cluster, Link, replay_handoffs

LLAMA_70B = "llama-3.1-70b"


def _equal_workers():
    return Cluster(nic=Link("nic50", 50.0), nics_per_node=8, gpus_per_node=8)


@pytest.mark.parametrize("contention", ["none", "fair"])
@pytest.mark.parametrize("routing", ["least_loaded", "topology"])
def test_idle_equal_workers_take_requests_in_turn(routing, contention):
    """Eight requests far apart (every worker idle at each arrival), four equal decode workers."""
    trace = pd.DataFrame({"arrival_ms": np.arange(8) * 1000.0, "num_input_tokens": [4096] * 8})
    got = replay_handoffs(
        trace, _equal_workers(), LLAMA_70B, tp=8, decode_workers=4, routing=routing, contention=contention
    )
    assert got["decode_worker"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_a_tie_goes_to_the_first_tied_worker_after_the_one_chosen_last():
    """Worker 1 busy with a long handoff when the third request arrives: workers 0, 2 and 3 tie (idle), and
    the worker chosen last was 1, so it goes to 2 (the lowest index would have said 0)."""
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0, 2.0], "num_input_tokens": [16, 131_072, 16]})
    got = replay_handoffs(
        trace, _equal_workers(), LLAMA_70B, tp=8, decode_workers=4, routing="least_loaded", contention="fair"
    )
    assert got["decode_worker"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("routing", ["least_loaded", "topology"])
def test_equal_workers_share_a_long_trace_within_a_few_percent(routing):
    """4,000 requests of a synthetic trace, one prefill worker and four equal decode workers (HGX nodes, one
    NIC per GPU): each decode worker takes 1/4 of them within 3 percentage points (with the lowest index on
    ties, worker 0 took most: every idle moment sent the next request there). Without hash_ids: "topology"
    prefers the worker caching the longest prefix before the least loaded, so with prefix reuse the caches
    make the workers unequal (0.19 to 0.33 of this trace), by design."""
    trace = perfmodel.synthetic_trace(4000, rate_per_s=200, seed=3).drop(columns="hash_ids")
    got = replay_handoffs(
        trace,
        "hgx-h100-8x400g",
        LLAMA_70B,
        tp=8,
        prefill_workers=1,
        decode_workers=4,
        routing=routing,
        contention="fair",
    )
    shares = got["decode_worker"].value_counts(normalize=True).reindex(range(4), fill_value=0.0)
    assert np.abs(shares - 0.25).max() < 0.03, shares.to_dict()
