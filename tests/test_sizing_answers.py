"""Sizing answers checked by brute force over the forward functions: the fewest count that keeps a budget is the
fewest (no monotonicity assumed), over the counts a cluster can be built with, in the unit the answer names; and
the smaller answers (duplicated counts, a 0 bandwidth, nothing moved, a mistyped axis) read as the rest do."""

from __future__ import annotations

import dataclasses
import re
import warnings

import pandas as pd
import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.replay.sizing import nic_counts, required_nics

KW = dict(link="ib-ndr", model="llama-3.1-8b", prefill_tokens_per_s=40_000)


def ttft_p99(trace: pd.DataFrame, **config) -> float:
    """The p99 TTFT of one replay (ms), by the forward functions."""
    return float(pm.summarize_ttft(pm.replay_ttft(trace, **config))["p99_ms"])


def fewest_by_hand(p99: dict[int, float], budget_ms: float) -> int | None:
    """The smallest count whose p99 is within the budget, every count looked at; None where none is."""
    return min((k for k, v in p99.items() if v <= budget_ms), default=None)


@pytest.fixture(scope="module")
def uneven() -> pd.DataFrame:
    return pm.synthetic_trace(1000, 40, seed=0)  # (its p99 TTFT rises from 9 to 10 prefill workers)


def test_the_fewest_workers_are_the_fewest_even_where_one_more_hurts(uneven):
    p99 = {k: ttft_p99(uneven, **KW, prefill_workers=k) for k in range(1, 12)}
    budget = 425.0
    assert p99[9] <= budget < p99[10] and p99[11] <= budget  # (the trace is not monotone: what this checks)
    expected = fewest_by_hand(p99, budget)
    assert expected == 9
    assert pm.fewest_for_ttft(uneven, "prefill_workers", ttft_budget_ms=budget, **KW) == expected
    assert pm.fewest_for_ttft(uneven, "prefill_workers", ttft_budget_ms=budget, most=10, **KW) == expected
    assert pm.fewest_for_ttft(uneven, "prefill_workers", ttft_budget_ms=budget, most=8, **KW) is None
    for budget in sorted(set(p99.values()))[:6]:  # every budget at a count's own p99: that count or a fewer one
        assert pm.fewest_for_ttft(uneven, "prefill_workers", ttft_budget_ms=budget, most=11, **KW) == fewest_by_hand(
            p99, budget
        )


def buildable_p99(trace: pd.DataFrame, cluster: pm.Cluster, **config) -> dict[int, float]:
    """The p99 TTFT at each NIC count per node the cluster can be built with."""
    p99 = {}
    for k in nic_counts(cluster.gpus_per_node):
        try:
            node = dataclasses.replace(cluster, nics_per_node=k)
        except InputError:
            continue
        p99[k] = ttft_p99(trace, link=node, **config)
    return p99


PCIE = dict(nic="roce-400g", nics_per_node=8, gpus_per_node=8, gpus_per_pcie_switch=2, pcie_switch_gb_s=64.0)


@pytest.mark.parametrize(
    ("cluster", "skipped"),
    [
        (pm.CLUSTERS["gb200-nvl72"], None),  # (4 GPUs per node: 64 NICs is more than 8 per GPU)
        (pm.Cluster(**PCIE), r"cannot take 2 NIC counts per node \(1: .*; 2: "),  # (1 NIC: 8 GPUs behind 2 switches)
    ],
)
def test_the_fewest_nics_per_node_are_among_the_counts_the_cluster_takes(cluster, skipped):
    trace = pm.synthetic_trace(120, 40, seed=0)
    config = dict(model="llama-3.1-70b", tp=4 if cluster.gpus_per_node == 4 else 8, contention="fair")
    p99 = buildable_p99(trace, cluster, **config)
    for budget in [*sorted(set(p99.values())), min(p99.values()) / 2]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answer = pm.fewest_for_ttft(trace, "nics_per_node", ttft_budget_ms=budget, link=cluster, **config)
        assert answer == fewest_by_hand(p99, budget), (budget, p99)
        said = [str(w.message) for w in caught]
        if skipped:
            assert any(re.search(skipped, s) for s in said), said
            assert any(s.startswith("fewest_for_ttft: cluster") for s in said), said
        else:
            assert not said, said
    if skipped:  # (no count up to most=2 can be built: said, not None)
        with pytest.raises(InputError, match=r"^most: 2 leaves no NIC count per node .* Fix: pass most >= 4"):
            pm.fewest_for_ttft(trace, "nics_per_node", ttft_budget_ms=1e9, link=cluster, most=2, **config)


def test_striped_over_a_link_of_several_nics_counts_nics():
    trace = pm.synthetic_trace(300, rate_per_s=40, seed=0)
    ask = dict(model="llama-3.1-70b", budget_ms=200, contention="fifo", striped=True)
    four = required_nics(trace, "4x ib-ndr", **ask)
    one = required_nics(trace, "ib-ndr", counts=[4 * n for n in range(1, 9)], **ask)
    assert four.unit == "NICs striped" and four.count == one.count == 4
    assert four.tried["link"].tolist() == list(range(4, 33, 4))
    assert four.tried["p99_ms"].tolist() == one.tried["p99_ms"].tolist()
    assert str(four).endswith(": 4 NICs striped")
    assert (
        required_nics(trace, "4x ib-ndr", counts=[8], **ask).tried["p99_ms"].tolist()
        == one.tried["p99_ms"].tolist()[1:2]
    )
    with pytest.raises(InputError, match=r"^counts: 6 is not a multiple of the 4 NICs of '4x ib-ndr'"):
        required_nics(trace, "4x ib-ndr", counts=[6], **ask)


def test_required_nics_says_which_counts_a_cluster_cannot_take():
    trace = pm.synthetic_trace(100, 40, seed=0)
    with pytest.warns(
        UserWarning, match=r"^required_nics: cluster 'cluster' cannot take 2 NIC counts per node \(1: .*; 2: "
    ):
        answer = required_nics(trace, pm.Cluster(**PCIE), "llama-3.1-70b", budget_ms=50, contention="fair", tp=8)
    assert answer.tried["nics_per_node"].tolist() == [4, 8, 16, 24, 32]


def test_a_count_given_twice_is_refused_as_the_grids_refuse_it():
    trace = pm.synthetic_trace(50, 40, seed=0)
    with pytest.raises(InputError, match=r"^counts: has a repeated value: 2 "):
        required_nics(trace, "ib-ndr", "llama-3.1-70b", budget_ms=50, contention="fifo", counts=[4, 2, 2, 1])


def test_a_zero_bandwidth_is_sized_with_its_fallback_as_the_replay_reads_it():
    trace = pm.synthetic_trace(50, 40, seed=0)
    answer = required_nics(trace, 0, "llama-3.1-70b", budget_ms=50, contention="fifo", fallback_delay_ms=1.0)
    replay = pm.replay_handoffs(trace, link=0.0, model="llama-3.1-70b", contention="fifo", fallback_delay_ms=1.0)
    assert answer.count == 1
    assert answer.tried["p99_ms"].iloc[0] == pytest.approx(pm.summarize(replay)["p99_ms"], rel=1e-12)


def test_the_loads_of_flows_that_move_nothing_have_the_documented_columns():
    loads = pm.resource_loads(pm.handoff_flows(0, "hgx-h100-8x400g", "llama-3.1-70b", tp=8))
    assert loads.empty
    assert loads.columns.tolist() == ["kind", "capacity_gb_s", "flows", "bytes", "busy_ms", "bottleneck"]
    assert loads["busy_ms"].sum() == 0.0


def test_a_mistyped_ttft_grid_axis_is_offered_its_name():
    trace = pm.synthetic_trace(20, 10, seed=0)
    with pytest.raises(InputError, match=r"did you mean 'prefill_workers'\?"):
        pm.ttft_grid(trace, prefill_worker=[1, 2], link="ib-ndr", model="llama-3.1-8b", progress=False)


def test_max_tokens_within_reads_a_nan_bandwidth_as_unknown() -> None:
    """A NaN bandwidth is unknown (SEMANTICS: no delay modeled), so the answer is NaN, as for 0 GB/s; it was
    refused as no number >= 0, where handoff_delay_ms takes it."""
    import math

    import perfmodel

    assert math.isnan(perfmodel.max_tokens_within(float("nan"), "llama-3.1-70b", budget_ms=50.0))
    mixed = perfmodel.max_tokens_within([float("nan"), 50.0, 0.0], "llama-3.1-70b", budget_ms=50.0)
    assert math.isnan(mixed[0]) and mixed[1] == 7629 and math.isnan(mixed[2])
    with pytest.raises(perfmodel.InputError, match="-1.0"):
        perfmodel.max_tokens_within(-1.0, "llama-3.1-70b", budget_ms=50.0)


def test_counting_links_under_no_contention_replays_once_and_warns_of_nothing() -> None:
    """Under contention="none" each handoff moves alone, so every count of links gives the same replay: the
    sizing questions replay it once (they warned, seven times, that the links they set themselves do nothing)."""
    import perfmodel

    trace = perfmodel.synthetic_trace(200, rate_per_s=20, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = perfmodel.required_nics(trace, "ib-ndr", "llama-3.1-70b", budget_ms=50, contention="none")
        assert perfmodel.fewest_for_ttft(trace, "links", ttft_budget_ms=1e9, link="ib-ndr", model="llama-3.1-8b") == 1
        assert (
            perfmodel.fewest_for_ttft(trace, "links", ttft_budget_ms=1.0, link="ib-ndr", model="llama-3.1-8b") is None
        )
    alone = perfmodel.summarize(perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-70b"))["p99_ms"]
    assert answer.tried["p99_ms"].tolist() == [alone] * 8 and answer.tried["links"].tolist() == list(range(1, 9))
