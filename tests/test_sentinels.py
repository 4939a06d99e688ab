"""No sentinel reaches a user as a value: where there is nothing to say (no link used, no link at all, no
resource saturated), a replay's and a flows table's cells are missing, never -1 (which looks like an index) or
an empty name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import Cluster, Link, replay_handoffs


def _trace():
    return pd.DataFrame({"arrival_ms": [0.0, 0.0, 1.0, 2.0], "num_input_tokens": [4096, 0, 4096, 4096]})


@pytest.mark.parametrize("contention", ["none", "fair"])
def test_a_replay_on_a_cluster_names_no_link(contention):
    """A cluster has no links: the column was -1 on every row."""
    got = replay_handoffs(_trace(), "hgx-h100-8x400g", "llama-3.1-70b", tp=8, contention=contention)
    assert got["link"].isna().all()
    assert not (got["link"].fillna(0) < 0).any()


def test_a_replay_on_links_names_the_link_used_and_no_other():
    """fifo: the link each transfer queued for, missing for the transfer of 0 bytes (it used none); none: each
    transfer alone at line rate, on no link of the pool (the column was -1)."""
    fifo = replay_handoffs(_trace(), Link("nic", 12.5), "llama-3.1-8b", contention="fifo", links=2)
    assert fifo["link"].tolist() == [0, pd.NA, 1, 0]
    fair = replay_handoffs(_trace(), Link("nic", 12.5), "llama-3.1-8b", contention="fair", links=2)
    assert fair["link"].isna().tolist() == [False, True, False, False]
    alone = replay_handoffs(_trace(), Link("nic", 12.5), "llama-3.1-8b")
    assert alone["link"].isna().all()


def test_a_written_replay_leaves_the_link_empty(tmp_path):
    got = replay_handoffs(_trace(), "hgx-h100-8x400g", "llama-3.1-70b", tp=8, contention="fair")
    path = tmp_path / "replay.csv"
    got.to_csv(path)
    assert pd.read_csv(path)["link"].isna().all()


def test_a_handoff_with_no_flow_has_no_bottleneck():
    """It was named "" (an empty name) in attrs; a flow that nothing saturated holds back is missing too."""
    flows = perfmodel.handoff_flows(0, Cluster(nic=Link("nic", 50.0), nics_per_node=1, gpus_per_node=1), 1000.0)
    assert len(flows) == 0 and flows.attrs["bottleneck"] is None
    assert np.isclose(flows.attrs["delay_ms"], 0.0)
    loaded = perfmodel.handoff_flows(32_768, "hgx-h100-8x400g", "llama-3.1-70b", tp=8)
    assert not (loaded["bottleneck"] == "").any() and loaded.attrs["bottleneck"] in loaded.attrs["resources"]
