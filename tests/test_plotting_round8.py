"""Round 8 of the hostile review of the figures: a p99 handoff of 0 ms said on the TTFT knee's log axis, and
percentiles, missing TTFTs and ``top`` refused where they were drawn as nothing."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest

import perfmodel
import perfmodel.plotting as pp
from perfmodel.errors import InputError
from perfmodel.plotting.cluster import resource_utilisation


@pytest.fixture(scope="module")
def zero_handoff_grid():
    """A TTFT grid whose handoffs carry no bytes: every p99 handoff is 0 ms."""
    return perfmodel.ttft_grid(
        perfmodel.synthetic_trace(50, 10, seed=0),
        kv_transfer_bandwidth=50.0,
        kv_bytes_per_token=0,
        prefill_tokens_per_s=10_000,
        request_rate_per_s=[1, 2],
        progress=False,
    )


@pytest.fixture(scope="module")
def ttft():
    return perfmodel.replay_ttft(
        perfmodel.synthetic_trace(200, 10, seed=0), "ib-ndr", "llama-3.1-8b", prefill_tokens_per_s=60_000
    )


def _labels(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_a_p99_handoff_of_0_ms_is_said_in_the_legend(zero_handoff_grid, ax):
    assert (zero_handoff_grid["handoff_delay_p99_ms"] == 0).all()
    pp.ttft_vs_rate(zero_handoff_grid, ax=ax)
    assert _labels(ax) == ["p99 TTFT", "p50 TTFT", "p99 handoff (0 ms at 2 of 2 rates: below the axis)"]


def test_a_p99_handoff_of_0_ms_at_some_rates_is_said_and_the_others_drawn(zero_handoff_grid, ax):
    grid = zero_handoff_grid.assign(handoff_delay_p99_ms=[0.0, 3.0])
    pp.ttft_vs_rate(grid, ax=ax)
    assert _labels(ax)[2] == "p99 handoff (0 ms at 1 of 2 rates: below the axis)"
    handoff = ax.get_lines()[2]  # a gap at 0 ms (never clipped to a made-up value), a marker on a lone point
    np.testing.assert_array_equal(np.asarray(handoff.get_ydata(), dtype=float), [np.nan, 3.0])
    assert handoff.get_marker() not in ("None", "", None)


def test_a_knee_without_zeros_keeps_its_labels(zero_handoff_grid, ax):
    grid = zero_handoff_grid.assign(handoff_delay_p99_ms=[1.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pp.ttft_vs_rate(grid, by="kv_transfer_bandwidth", ax=ax)
    assert [line.get_marker() for line in ax.get_lines()] == ["o", "None", "None"]
    assert _labels(ax) == [
        "kv_transfer_bandwidth=50: p99 TTFT",
        "kv_transfer_bandwidth=50: p50 TTFT",
        "kv_transfer_bandwidth=50: p99 handoff",
    ]


@pytest.mark.parametrize("percentiles", [(150,), (50, -1), (float("nan"),)])
def test_breakdown_refuses_percentiles_out_of_range(ttft, ax, percentiles):
    with pytest.raises(InputError, match=r"percentiles.*not all in \[0, 100\]") as caught:
        pp.ttft_breakdown(ttft, percentiles=percentiles, ax=ax)
    assert repr(list(percentiles)) in str(caught.value) and "Fix:" in str(caught.value)


def test_breakdown_refuses_no_percentiles(ttft, ax):
    with pytest.raises(InputError, match="percentiles"):
        pp.ttft_breakdown(ttft, percentiles=(), ax=ax)


@pytest.mark.parametrize("column", ["ttft_ms", "transfer_ms"])
def test_breakdown_refuses_rows_without_a_time(ttft, ax, column):
    frame = ttft.copy()
    frame.loc[[3, 7], column] = np.nan
    with pytest.raises(InputError, match=rf"2 of 200 requests have no {column} \(NaN") as caught:
        pp.ttft_breakdown(frame, ax=ax)
    assert "dropna" in str(caught.value)
    assert not ax.patches


@pytest.fixture(scope="module")
def cluster_replay():
    cluster = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    return perfmodel.replay_handoffs(perfmodel.synthetic_trace(200, 20, seed=0), cluster, 1000.0, contention="fair")


@pytest.mark.parametrize("top", [0, -1, 2.5, True, "3"])
def test_resource_utilisation_refuses_a_top_that_is_no_whole_number_from_1(cluster_replay, ax, top):
    with pytest.raises(InputError, match=r"^top: .* Fix: pass a whole number >= 1"):
        resource_utilisation(cluster_replay, top=top, ax=ax)
    assert not ax.get_lines()


def test_resource_utilisation_draws_top_resources(cluster_replay, ax):
    resource_utilisation(cluster_replay, top=1, ax=ax)
    assert len(_labels(ax)) == 1


def test_breakdown_refuses_an_infinite_ttft(ttft, ax):
    frame = ttft.assign(ttft_ms=ttft["ttft_ms"].where(ttft.index != 5, np.inf))
    with pytest.raises(InputError, match=r"1 of 200 requests have no ttft_ms \(NaN or infinite; first at row 5\)"):
        pp.ttft_breakdown(frame, ax=ax)
