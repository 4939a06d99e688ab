"""Grid figures that never mislead: no line joining configurations that differ in an axis not drawn, one
colour scale per figure, and errors that name the function whose frame was given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import LogNorm

import perfmodel
import perfmodel.plotting as pp
from perfmodel.errors import InputError


@pytest.fixture(scope="module")
def ttft_grid():
    """A TTFT grid varying the link and the prefill workers besides the rate."""
    return perfmodel.ttft_grid(
        perfmodel.synthetic_trace(300, 10, seed=0),
        link=["ib-ndr", 5.0],
        prefill_workers=[1, 2],
        model="llama-3.1-8b",
        prefill_tokens_per_s=60_000,
        request_rate_per_s=[5, 10, 15],
        progress=False,
    )


@pytest.fixture(scope="module")
def replay_grid():
    """A replay grid of three axes (a row of panels per link), whose links' p99s differ by about 5x."""
    return perfmodel.replay_grid(
        perfmodel.synthetic_trace(400, 30, seed=0),
        model="llama-3.1-70b",
        contention="fair",
        decode_workers=[2, 4],
        links=[1, 2, 4],
        link=["ib-ndr", "4x ib-ndr"],
    )


@pytest.mark.parametrize("by", ["link", None])
def test_ttft_vs_rate_refuses_a_grid_varying_an_axis_it_does_not_draw(ttft_grid, ax, by):
    """One line through configurations that differ in prefill_workers zig-zags between them: refused,
    naming the column, as grid_percentiles and grid_budget refuse."""
    with pytest.raises(InputError, match=r"ttft_vs_rate.*prefill_workers.*vary") as error:
        pp.ttft_vs_rate(ttft_grid, by=by, ax=ax)
    assert ("'link'" in str(error.value)) == (by is None), str(error.value)
    assert not ax.get_lines()
    one = ttft_grid[ttft_grid["prefill_workers"] == 2]  # the axes chosen: each configuration drawn once
    pp.ttft_vs_rate(one, by="link", ax=ax)
    p99 = [line for line in ax.get_lines() if line.get_label().endswith("p99 TTFT")]
    assert [line.get_label() for line in p99] == ["link=ib-ndr: p99 TTFT", "link=5.0: p99 TTFT"]
    for line, link in zip(p99, ["ib-ndr", "5.0"]):
        rows = one[one["link"].astype(str) == link].sort_values("request_rate_per_s")
        np.testing.assert_array_equal(line.get_xdata(), rows["request_rate_per_s"])
        np.testing.assert_array_equal(line.get_ydata(), rows["p99_ms"])
        assert np.all(np.diff(line.get_xdata()) > 0)  # one point per rate: no vertical zig-zag


def test_ttft_vs_rate_names_ttft_grid_for_a_wrong_or_empty_frame(ttft_grid, ax):
    with pytest.raises(InputError, match=r"no rows.*ttft_grid"):
        pp.ttft_vs_rate(ttft_grid.iloc[:0], ax=ax)
    with pytest.raises(InputError, match=r"ttft_grid") as error:
        pp.ttft_vs_rate(ttft_grid.drop(columns="request_rate_per_s"), by="link", ax=ax)
    assert "sweep" not in str(error.value)


def _heatmaps(fig):
    return [ax for ax in fig.axes if ax.images]


def test_replay_grid_figure_shares_one_colour_scale(replay_grid):
    """The same colour is the same value in every panel: one norm (same type, vmin and vmax: the figure's
    extremes), and one colour bar that says it serves every panel."""
    fig = pp.replay_grid_figure(replay_grid, budget_ms=100)
    try:
        panels = _heatmaps(fig)
        assert len(panels) == 2
        norms = [panel.images[0].norm for panel in panels]
        values = replay_grid["p99_ms"].to_numpy(float)
        assert values.max() / values.min() > 3  # (the case where per-panel scales misled)
        for norm in norms:
            assert type(norm) is LogNorm
            assert (norm.vmin, norm.vmax) == (values.min(), values.max())
        assert len({panel.images[0].get_cmap().name for panel in panels}) == 1
        bars = [a for a in fig.axes if a.get_label() == "<colorbar>"]
        assert len(bars) == 1
        assert "every panel" in bars[0].get_ylabel(), bars[0].get_ylabel()
        # only the panel holding the figure's largest value reaches the top colour
        tops = [float(np.max(norms[0](np.ma.getdata(panel.images[0].get_array())))) for panel in panels]
        assert sorted(tops) == [pytest.approx(tops[0] if tops[0] < 1 else tops[1]), 1.0], tops
        assert min(tops) < 0.5, tops
    finally:
        plt.close(fig)


@pytest.mark.parametrize("values", [(50.0, 80.0), (50.0, 50.0), (0.0, 80.0)], ids=["flat panels", "equal", "zero"])
def test_replay_grid_figure_of_flat_panels_still_shares_a_scale(replay_grid, values):
    """Each panel's values equal (no span of its own): still one scale over the figure's values, linear
    where a log one cannot show them (all equal, or a 0 ms cell)."""
    flat = replay_grid.assign(p99_ms=np.where(replay_grid["link"] == "ib-ndr", *values))
    fig = pp.replay_grid_figure(flat, budget_ms=100)
    try:
        norms = [panel.images[0].norm for panel in _heatmaps(fig)]
        assert len({(type(n), n.vmin, n.vmax) for n in norms}) == 1, norms
        low, high = norms[0].vmin, norms[0].vmax  # (a colour bar widens an empty span around the one value)
        assert (low, high) == values if values[0] < values[1] else low < values[0] < high
        assert isinstance(norms[0], LogNorm) == (0 < values[0] < values[1])
    finally:
        plt.close(fig)


def test_grid_budget_takes_a_shared_norm(replay_grid, ax):
    part = replay_grid[replay_grid["link"] == "4x ib-ndr"]
    norm = LogNorm(vmin=1.0, vmax=1000.0)
    pp.grid_budget(part, "links", "decode_workers", budget_ms=100, norm=norm, ax=ax)
    assert ax.images[0].norm is norm


def test_grid_percentiles_names_the_function_that_made_the_frame(replay_grid, ttft_grid, ax):
    with pytest.raises(InputError, match=r"p95_ms.*replay_grid.*p90_ms") as error:
        pp.grid_percentiles(replay_grid, stat="p95_ms", ax=ax)
    assert "sweep" not in str(error.value)
    with pytest.raises(InputError, match=r"p95_ms.*ttft_grid") as error:
        pp.grid_percentiles(ttft_grid, stat="p95_ms", ax=ax)
    assert "sweep" not in str(error.value)
    sweep = perfmodel.sweep(model="qwen3-8b", link=["ib-ndr", "eth-100g"], num_input_tokens=[1000, 8000])
    with pytest.raises(InputError, match=r"perfmodel\.sweep.*delay_vs_tokens"):
        pp.grid_percentiles(sweep, ax=ax)
    with pytest.raises(InputError, match=r"perfmodel\.sweep"):
        pp.grid_budget(sweep, budget_ms=100, ax=ax)


def test_grid_percentiles_draws_a_ttft_grid_as_ttft(ttft_grid, ax):
    """A TTFT grid's statistics are not configuration axes, and its p99_ms is the p99 TTFT."""
    one = ttft_grid[ttft_grid["request_rate_per_s"] == 10]
    pp.grid_percentiles(one, "prefill_workers", "link", ax=ax)
    assert "TTFT" in ax.get_ylabel() and "handoff" not in ax.get_ylabel()
    for line in ax.get_lines()[:2]:
        rows = one[one["link"].astype(str) == line.get_label()].sort_values("prefill_workers")
        np.testing.assert_array_equal(line.get_ydata(), rows["p99_ms"])


@pytest.mark.parametrize("figure", ["grid_budget", "grid_percentiles", "replay_grid_figure"])
def test_grid_figures_of_an_empty_frame_say_it_is_empty(replay_grid, figure, ax):
    call = {
        "grid_budget": lambda df: pp.grid_budget(df, budget_ms=100, ax=ax),
        "grid_percentiles": lambda df: pp.grid_percentiles(df, ax=ax),
        "replay_grid_figure": lambda df: pp.replay_grid_figure(df, budget_ms=100),
    }[figure]
    with pytest.raises(InputError, match=rf"{figure}: the frame has no rows") as error:
        call(replay_grid.iloc[:0])
    assert "vary" not in str(error.value)


@pytest.mark.parametrize(
    ("figure", "source"),
    [
        (lambda frame, ax: pp.ttft_breakdown(frame, ax=ax), "perfmodel.replay_ttft"),
        (lambda frame, ax: pp.memory_held(frame, ax=ax), "perfmodel.replay_ttft"),
        (lambda frame, ax: pp.link_timeline(frame, ax=ax), "perfmodel.replay_handoffs"),
        (lambda frame, ax: pp.delay_cdf(frame, ax=ax), "perfmodel.replay_handoffs"),
    ],
)
def test_a_frame_without_a_figures_columns_names_the_function_that_makes_them(figure, source, ax) -> None:
    """A frame without the columns a figure reads is refused naming the function whose frames have them (every
    figure said ``perfmodel.sweep``, which makes none of the TTFT or replay figures' columns)."""
    import pandas as pd

    with pytest.raises(InputError, match=rf"Fix: pass a frame from {source}\(\.\.\.\)"):
        figure(pd.DataFrame({"num_input_tokens": [1, 2]}), ax)
