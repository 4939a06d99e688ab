"""Every plot helper on the Agg backend: the Axes it was given, the expected lines and labels."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import perfmodel
import perfmodel.plotting as pp

TOKENS = [1024, 4096, 32768]


def test_delay_vs_tokens(ax):
    df = perfmodel.sweep(link=["nvlink4", "ib-ndr", "eth-100g"], model="llama-3.1-70b", num_input_tokens=TOKENS)
    assert pp.delay_vs_tokens(df, hue="link", budgets_ms=[50], ax=ax) is ax
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in lines] == ["nvlink4", "ib-ndr", "eth-100g"]
    np.testing.assert_array_equal(lines[1].get_ydata(), df[df["link"] == "ib-ndr"]["handoff_delay_ms"])
    assert len({line.get_linestyle() for line in lines}) == 3  # tell apart without colour
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "prompt length (tokens)" and ax.get_ylabel() == "handoff delay (ms)"
    ax.figure.canvas.draw()
    assert "32k" in [t.get_text() for t in ax.get_xticklabels()]


def test_delay_vs_tokens_bandwidth_hue_and_ambiguity(ax):
    df = perfmodel.sweep(model=["qwen3-8b", "qwen3-32b"], kv_transfer_bandwidth=[50.0, 450.0], num_input_tokens=TOKENS)
    with pytest.raises(ValueError, match=r"the columns \['model'\] vary"):
        pp.delay_vs_tokens(df, hue="kv_transfer_bandwidth", ax=ax)
    pp.delay_vs_tokens(df[df["model"] == "qwen3-8b"], hue="kv_transfer_bandwidth", ax=ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["50 GB/s", "450 GB/s"]


def test_heatmap(ax):
    df = perfmodel.sweep(
        model="llama-3.1-8b", kv_transfer_bandwidth=np.geomspace(5, 900, 12), num_input_tokens=2 ** np.arange(7, 18)
    )
    assert pp.heatmap(df, budgets_ms=(10, 50, 100), ax=ax) is ax
    assert len(ax.collections) == 1 and len(ax.lines) == 3  # the mesh, and one budget curve each
    assert not ax.texts  # no label on the data: the colour bar names the budgets, beside its own ticks
    bar = next(other for other in ax.figure.axes if other is not ax and other.child_axes)
    assert [t.get_text() for t in bar.child_axes[0].get_yticklabels()] == ["10 ms", "50 ms", "100 ms"]
    assert ax.get_ylabel() == "bandwidth (GB/s)" and ax.get_yscale() == "log"
    tokens, bandwidth = ax.lines[1].get_data()  # the 50 ms curve is the model's own answer, not interpolated
    np.testing.assert_allclose(
        bandwidth, perfmodel.required_bandwidth(tokens, "llama-3.1-8b", budget_ms=50), rtol=1e-12
    )
    np.testing.assert_allclose(ax.get_yticks(), df["kv_transfer_bandwidth"].unique())  # ticks at the swept values


def test_heatmap_cells_sit_at_the_swept_values(ax):
    df = perfmodel.sweep(
        model="llama-3.1-8b", kv_transfer_bandwidth=[10.0, 100.0, 1000.0], num_input_tokens=[1024, 4096, 16384, 65536]
    )
    mesh = pp.heatmap(df, budgets_ms=(), ax=ax).collections[0]
    xs, ys = mesh.get_coordinates()[0, :, 0], mesh.get_coordinates()[:, 0, 1]
    np.testing.assert_allclose(np.sqrt(xs[:-1] * xs[1:]), [1024, 4096, 16384, 65536])  # centred, geometrically
    np.testing.assert_allclose(np.sqrt(ys[:-1] * ys[1:]), [10, 100, 1000])


def test_delay_vs_tokens_picks_the_one_varying_axis_and_names_several(ax):
    df = perfmodel.sweep(num_input_tokens=TOKENS, kv_transfer_bandwidth=[12.5, 50, 450], kv_bytes_per_token=131072)
    pp.delay_vs_tokens(df, ax=ax)
    assert [line.get_label() for line in ax.get_lines()] == ["12.5 GB/s", "50 GB/s", "450 GB/s"]
    both = perfmodel.sweep(
        model=["qwen3-8b", "qwen3-32b"], kv_transfer_bandwidth=[50.0, 450.0], num_input_tokens=TOKENS
    )
    with pytest.raises(ValueError, match=r"several columns vary \(\['model', 'kv_transfer_bandwidth'\]\).*hue="):
        pp.delay_vs_tokens(both, ax=ax)


def test_coinciding_series_stay_visible(ax):
    df = perfmodel.sweep(model="llama-3.1-70b", link=["ib-ndr", "roce-400g", "nvlink4"], num_input_tokens=TOKENS)
    pp.delay_vs_tokens(df, ax=ax, linewidth=3)
    assert [line.get_label() for line in ax.get_lines()] == ["ib-ndr\n= roce-400g", "nvlink4"]
    assert ax.get_lines()[0].get_linewidth() == 3  # **kwargs reach matplotlib


def test_required_bandwidth(ax):
    assert pp.required_bandwidth(TOKENS, "llama-3.1-70b", budgets_ms=[10, 50], links=["ib-ndr", "nvlink4"], ax=ax) is ax
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:2] == ["10 ms budget", "50 ms budget"]
    np.testing.assert_allclose(
        ax.get_lines()[1].get_ydata(), perfmodel.required_bandwidth(TOKENS, "llama-3.1-70b", budget_ms=50)
    )
    assert {t.get_text() for t in ax.texts} == {"ib-ndr", "nvlink4"}


def test_delay_cdf_marks_percentiles(ax):
    delays = pd.Series(np.r_[np.arange(1, 101, dtype=float), [np.nan]], name="replay")
    assert pp.delay_cdf(delays, ax=ax) is ax
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["p50 50.5 ms", "p90 90.1 ms", "p99 99 ms"]
    step = ax.get_lines()[0]
    assert step.get_ydata()[-1] == 1.0 and len(step.get_xdata()) == 100  # NaN left out


def test_compare_sweeps_and_distributions(ax):
    ib = perfmodel.sweep(link="ib-ndr", model="llama-3.1-70b", num_input_tokens=TOKENS)
    nv = perfmodel.sweep(link="nvlink4", model="llama-3.1-70b", num_input_tokens=TOKENS)
    assert pp.compare(ib, nv, labels=("IB", "NVLink"), ax=ax) is ax
    assert [line.get_label() for line in ax.get_lines()] == ["IB", "NVLink"]
    assert any("9x at 32k" in t.get_text() for t in ax.texts)
    fig, ax2 = plt.subplots()
    pp.compare(np.arange(1, 10.0), np.arange(1, 5.0), ax=ax2)
    assert [t.get_text() for t in ax2.get_legend().get_texts()] == [
        "before: p50 5, p90 8.2, p99 8.92 ms",
        "after: p50 2.5, p90 3.7, p99 3.97 ms",
    ]
    plt.close(fig)


def test_link_timeline(ax):
    replay = pd.DataFrame({"start_ms": [0.0, 1000.0, 5000.0], "end_ms": [2000.0, 3000.0, 6000.0]})
    assert pp.link_timeline(replay, ax=ax) is ax
    busy = ax.get_lines()[0].get_ydata()
    assert max(busy) == 2 and busy[-1] == 0


def test_link_timeline_bins_are_exact_means(ax):
    # one transfer in flight on [0, 4) s, two on [1, 2) s: bins of 1 s have means 1, 2, 1, 1
    replay = pd.DataFrame({"start_ms": [0.0, 1000.0], "end_ms": [4000.0, 2000.0]})
    pp.link_timeline(replay, bins=4, ax=ax)
    stairs = [p for p in ax.patches if p.get_label().startswith("mean per")]
    np.testing.assert_allclose(stairs[0].get_data().values, [1, 2, 1, 1])


def test_delay_cdf_names_zero_delays(ax):
    pp.delay_cdf(pd.Series([0.0, 0.0, 1.0, 2.0], name="replay"), ax=ax)
    assert ax.get_legend().get_texts()[0].get_text() == "replay (50.0% at 0 ms)"


def test_default_axes_is_current_axes(ax):
    df = perfmodel.sweep(link="ib-ndr", model="llama-3.1-70b", num_input_tokens=TOKENS)
    plt.sca(ax)
    assert pp.delay_vs_tokens(df) is ax


def test_plotting_is_not_imported_by_the_package():
    import subprocess
    import sys

    code = (
        "import sys, perfmodel; perfmodel.sweep(link='ib-ndr', kv_bytes_per_token=1, num_input_tokens=1); "
        "print('matplotlib' in sys.modules)"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def _tick_texts(fig) -> list[str]:
    fig.canvas.draw()
    return [
        label.get_text()
        for a in fig.axes
        for axis in (a.xaxis, a.yaxis)
        for label in axis.get_ticklabels(which="both")
        if label.get_visible() and label.get_text()
    ]


@pytest.mark.parametrize("figure", ["delay_vs_tokens_figure", "heatmap_figure", "delay_cdf", "grid_budget"])
def test_log_axes_read_as_plain_numbers(figure):
    """Log axes (delays, bandwidths, the colour bar) say 0.1, 10, 1k, never mathtext powers like 10^2 (which
    also cost ~10 ms each to parse and render)."""
    sweep = perfmodel.sweep(
        model=["llama-3.1-8b", "deepseek-v3"],
        kv_transfer_bandwidth=np.geomspace(1, 1000, 31),
        num_input_tokens=2 ** np.arange(7, 18),
    )
    if figure == "delay_cdf":
        fig, ax = plt.subplots()
        pp.delay_cdf({"a": np.geomspace(0.01, 500, 100)}, ax=ax)
    elif figure == "grid_budget":
        fig, ax = plt.subplots()
        grid = pd.DataFrame({"decode_workers": [1, 1, 2, 2], "links": [1, 2, 1, 2], "p99_ms": [0.5, 3.0, 40.0, 900.0]})
        pp.grid_budget(grid, budget_ms=100, ax=ax)
    else:
        fig = getattr(pp, figure)(sweep)
    try:
        texts = _tick_texts(fig)
        assert texts and not [t for t in texts if "$" in t or "^" in t], texts
        assert {"1", "10", "100"} <= set(texts) or {"0.1", "10", "100"} <= set(texts), texts
    finally:
        plt.close(fig)


def test_a_log_axis_spanning_less_than_a_decade_keeps_labels(ax):
    """Minor ticks are labelled (as matplotlib does) when a log axis has too few decades to show."""
    df = perfmodel.sweep(kv_transfer_bandwidth=[50.0, 60.0], kv_bytes_per_token=131072, num_input_tokens=[2048, 4096])
    pp.delay_vs_tokens(df, ax=ax)
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.yaxis.get_ticklabels(which="both") if t.get_text()]
    assert len(labels) >= 2 and not [t for t in labels if "$" in t], labels
    fig = pp.delay_vs_tokens_figure(df)
    try:
        fig.canvas.draw()
        labels = [
            t.get_text() for t in fig.axes[0].yaxis.get_ticklabels(which="both") if t.get_text() and t.get_visible()
        ]
        assert len(labels) >= 2, labels
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "hue_axis", [{"kv_transfer_bandwidth": [50.0, 60.0]}, {"link": ["ib-ndr", "roce-400g", "nvlink4"]}]
)
def test_the_shared_legend_fits_in_the_figure(hue_axis):
    df = perfmodel.sweep(**hue_axis, kv_bytes_per_token=131072, num_input_tokens=[2048, 4096])
    fig = pp.delay_vs_tokens_figure(df)
    try:
        fig.canvas.draw()
        legend = fig.legends[0].get_window_extent()
        assert legend.x1 <= fig.bbox.x1 and legend.x0 >= 0, (legend, fig.bbox)
    finally:
        plt.close(fig)


def test_a_heatmap_names_each_link_at_its_bandwidth(ax):
    df = perfmodel.sweep(
        model="llama-3.1-8b", kv_transfer_bandwidth=np.geomspace(1, 1000, 20), num_input_tokens=[1024, 8192]
    )
    pp.heatmap(df, links=["ib-ndr", "nvlink4", "roce-400g", "nvlink5"], ax=ax)
    names = {text.get_text(): text.xy[1] for text in ax.texts}
    assert names == {"ib-ndr = roce-400g": 50.0, "nvlink4": 450.0, "nvlink5": 900.0}
    across = {float(line.get_ydata()[0]) for line in ax.get_lines() if len(set(line.get_ydata())) == 1}
    assert across == {50.0, 450.0, 900.0}  # a line across at each bandwidth


# --- figures as the README draws them: no two labels on top of each other, no title cut off ----------


def _drawn_texts(fig) -> list:
    """Every text the figure draws (tick labels only of ticks within their axis' view), after a draw."""
    from matplotlib.text import Text

    fig.canvas.draw()
    tick_labels, drawn = set(), []

    def walk(ax):
        yield ax
        for child in ax.child_axes:
            yield from walk(child)

    for top in fig.axes:
        for ax in walk(top):
            for axis in (ax.xaxis, ax.yaxis):
                low, high = sorted(axis.get_view_interval())
                span = (high - low) * 1e-9
                for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                    labels = (tick.label1, tick.label2)
                    tick_labels.update(labels)
                    if tick.get_loc() is not None and low - span <= tick.get_loc() <= high + span:
                        drawn.extend(labels)
    drawn += [t for t in fig.findobj(Text) if t not in tick_labels]
    return [t for t in drawn if t.get_visible() and t.get_text().strip()]


def _check_layout(fig) -> None:
    renderer = fig.canvas.get_renderer()
    texts = _drawn_texts(fig)
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    frame = fig.bbox
    titles = [t for t in texts if t.get_text() in (fig.get_suptitle(), *(ax.get_title() for ax in fig.axes))]
    assert titles
    for text, box in ((t, b) for t, b in boxes if t in titles):
        if True:
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, (
                f"title {text.get_text()!r} is cut off: {box} outside {frame}"
            )
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, f"the legend is cut off: {box} outside {frame}"
    gap = 2.0  # pixels between two labels side by side, so that they never read as one
    for k, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[k + 1 :]:
            across = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            up = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            assert min(across, up) <= 1.0 and not (up > 0 and across > -gap), (
                f"{a.get_text()!r} and {b.get_text()!r} touch or overlap"
            )
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.images + ax.collections]  # heatmaps: text hides there
    for text, box in boxes:
        for ax in panels:
            if text.axes is not ax:
                area = ax.get_window_extent(renderer)
                inside = min(box.x1, area.x1) - max(box.x0, area.x0), min(box.y1, area.y1) - max(box.y0, area.y0)
                assert min(inside) <= 1.0, f"{text.get_text()!r} is drawn over a panel it does not belong to"


def _readme_sweep_grid(**axes):
    """The grid 'perfmodel sweep' draws its heatmap from (its own bandwidths, the README's other axes)."""
    return perfmodel.sweep(
        kv_transfer_bandwidth=np.geomspace(1, 1000, 61), num_input_tokens=[2**k for k in range(10, 18)], **axes
    )


@pytest.mark.parametrize(
    "axes, links",
    [
        (dict(model=["llama-3.1-70b", "deepseek-v3"], kv_cache_dtype=["bf16", "fp8"]), ["nvlink4", "8x ib-ndr"]),
        (dict(model="llama-3.1-70b"), list(perfmodel.LINKS)),
        (dict(model=["llama-3.1-70b", "deepseek-v3", "qwen3-32b", "llama-3.1-8b"]), list(perfmodel.LINKS)),
    ],
    ids=["readme-sweep", "one-model", "main-job"],
)
def test_heatmap_figure_labels_never_overlap_nor_leave_the_figure(axes, links):
    fig = pp.heatmap_figure(_readme_sweep_grid(**axes), budgets_ms=(10, 50, 100), links=links)
    try:
        _check_layout(fig)
    finally:
        plt.close(fig)


def test_the_colour_bar_tells_the_budgets_apart():
    """The 10, 50 and 100 ms marks on the colour bar show as many distinct dash patterns (a dash-dot of
    the bar's width looked solid, like 10 ms's line)."""
    fig = pp.heatmap_figure(_readme_sweep_grid(model="llama-3.1-70b"), budgets_ms=(10, 50, 100), links=["ib-ndr"])
    try:
        bar = fig.axes[-1]
        marks = [line for line in bar.get_lines() if len(set(line.get_ydata())) == 1]
        assert len(marks) == 3
        width_pt = bar.get_window_extent().width * 72 / fig.dpi
        patterns = set()
        for line in marks:
            _, dashes = line._dash_pattern  # (matplotlib's drawn pattern, scaled: it has no public getter)
            period = sum(dashes) if dashes else 0.0
            assert dashes is None or period * 2 <= width_pt, (line.get_linestyle(), period, width_pt)  # 2 periods
            patterns.add(tuple(dashes) if dashes else None)
        assert len(patterns) == 3
    finally:
        plt.close(fig)


def test_a_heatmap_of_one_panel_with_a_long_title_keeps_its_title_and_budget_labels_off_the_data():
    """``perfmodel sweep --cluster ... --model llama-3.1-70b --tp 8``: one panel, a title longer than it."""
    df = _readme_sweep_grid(model="llama-3.1-70b", tp=8)
    fig = pp.heatmap_figure(df, budgets_ms=(10, 50, 100))
    try:
        _check_layout(fig)
    finally:
        plt.close(fig)


def test_a_legend_of_coinciding_links_fits_in_the_figure():
    """Links of one bandwidth share one legend entry, which stays inside the figure."""
    df = perfmodel.sweep(
        model="llama-3.1-70b",
        link=["nvlink4", "8x ib-ndr", "ib-ndr", "roce-400g", "eth-400g", "2x eth-200g"],
        num_input_tokens=2 ** np.arange(7, 18),
    )
    fig = pp.delay_vs_tokens_figure(df, budgets_ms=[50])
    try:
        _check_layout(fig)
    finally:
        plt.close(fig)


def test_delay_vs_tokens_figure_of_the_readme():
    df = perfmodel.sweep(
        model=["llama-3.1-70b", "deepseek-v3"],
        link=["nvlink4", "ib-ndr", "pcie5"],
        kv_cache_dtype=["bf16", "fp8"],
        num_input_tokens=2 ** np.arange(7, 18),
    )
    fig = pp.delay_vs_tokens_figure(df, budgets_ms=[50])
    try:
        _check_layout(fig)
    finally:
        plt.close(fig)


@pytest.fixture(scope="module")
def readme_grid():
    trace = perfmodel.datasets.load("mooncake-synthetic")
    return perfmodel.replay_grid(
        trace,
        model="llama-3.1-70b",
        contention="fair",
        decode_workers=[4, 8],
        link=["ib-ndr", "4x ib-ndr"],
        mode="destination_missing",
    )


def test_replay_grid_figure_reads_as_it_should(readme_grid):
    fig = pp.replay_grid_figure(readme_grid, budget_ms=100)
    try:
        _check_layout(fig)
        lines = fig.axes[0]
        ticks = [t for t in lines.get_xticks() if lines.get_xlim()[0] <= t <= lines.get_xlim()[1]]
        assert all(float(t).is_integer() for t in ticks), ticks  # decode workers are whole
        labels = [ax.get_ylabel() for ax in fig.axes] + [ax.get_xlabel() for ax in fig.axes]
        assert not [label for label in labels if "_ms" in label or label == "decode_workers"], labels
        titles = " ".join([fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)])
        meeting = (readme_grid["p99_ms"] <= 100).any()
        assert ("within 100 ms" in titles) == bool(meeting), titles
        assert "llama-3.1-70b" in titles and "fair" in titles, titles  # which configuration it shows
    finally:
        plt.close(fig)


@pytest.mark.parametrize("curves", [2, 4])
def test_delay_cdfs_of_coinciding_percentiles_keep_their_labels_apart(curves):
    """Curves whose percentiles fall on one another (a replay's delays often do: most handoffs alone on
    their link take the same time) still show every value, legibly."""
    rng = np.random.default_rng(0)
    same = np.r_[np.full(700, 3.78), rng.uniform(3.78, 11.0, 300)]
    data = {f"configuration {k}": same * (1 + 0.003 * k) for k in range(curves)}
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    try:
        pp.delay_cdf(data, ax=ax)
        ax.set_title("delays")
        fig.canvas.draw()
        _check_layout(fig)
        shown = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        for values in data.values():
            for p in (50, 90, 99):
                assert f"{np.percentile(values, p):.3g}" in shown
    finally:
        plt.close(fig)


@pytest.mark.parametrize("cluster, tp", [("aws-p5", 8), ("gb200-nvl72", 64)])
def test_the_figure_of_resource_loads_on_many_resources_stays_readable(cluster, tp):
    flows = perfmodel.handoff_flows(32768, cluster, "llama-3.1-70b", tp=tp)
    fig, ax = plt.subplots()
    pp.resource_loads(flows, ax=ax)
    try:
        assert len(ax.patches) <= 25  # (aws-p5: 64 resources; gb200-nvl72 at tp=64: 128)
        hatched = [bar for bar in ax.patches if bar.get_hatch()]
        assert len(hatched) == 1 and hatched[0].get_width() == max(bar.get_width() for bar in ax.patches)
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert any(flows.attrs["bottleneck"] in label for label in labels)
        _check_layout(fig)
    finally:
        plt.close(fig)


# --- a hostile user's pass: no silently wrong figure, one-line errors for bad input --------------------

from perfmodel.errors import InputError  # noqa: E402


def _budget_curve(ax, budget_index=0):
    """The (tokens, bandwidth) of a heatmap's exact budget curve."""
    curves = [line for line in ax.get_lines() if line.get_label().endswith("ms budget")]
    return curves[budget_index].get_data()


@pytest.mark.parametrize(
    "inputs, grid",
    [
        (
            dict(connector="vllm-nixl-0.10.1"),
            dict(kv_transfer_bandwidth=[1.0, 31.6, 1000.0], num_input_tokens=[128, 8192, 131072]),
        ),
        (
            dict(per_block_ms=0.001, block_size=16),
            dict(
                kv_transfer_bandwidth=np.geomspace(1, 1000, 6),
                num_input_tokens=np.geomspace(128, 131072, 7).astype(int),
            ),
        ),
        (
            dict(latency_ms=1.0, kv_cache_dtype="fp8"),
            dict(kv_transfer_bandwidth=[1.0, 1000.0], num_input_tokens=[128, 131072]),
        ),
    ],
    ids=["connector", "per-block", "latency-fp8"],
)
def test_a_heatmap_budget_contour_is_the_models_own_answer_for_every_input(ax, inputs, grid):
    df = perfmodel.sweep(model="llama-3.1-8b", **inputs, **grid)
    pp.heatmap(df, budgets_ms=[10], ax=ax)
    tokens, bandwidth = _budget_curve(ax)
    np.testing.assert_allclose(
        bandwidth, perfmodel.required_bandwidth(tokens, "llama-3.1-8b", budget_ms=10, **inputs), rtol=1e-12
    )
    fig = pp.heatmap_figure(df, budgets_ms=[10])
    try:
        tokens, bandwidth = _budget_curve(fig.axes[0])
        np.testing.assert_allclose(
            bandwidth, perfmodel.required_bandwidth(tokens, "llama-3.1-8b", budget_ms=10, **inputs), rtol=1e-12
        )
    finally:
        plt.close(fig)


def test_a_heatmap_contour_the_model_cannot_answer_is_labelled_interpolated(ax):
    df = perfmodel.sweep(
        model="llama-3.1-8b",
        cache_hit_ratio=[0.0, 0.5, 0.9],
        kv_transfer_bandwidth=[1.0, 10.0, 100.0],
        num_input_tokens=8192,
    )
    pp.heatmap(df, x="cache_hit_ratio", budgets_ms=[50], ax=ax)
    assert not [line for line in ax.get_lines() if line.get_label().endswith("ms budget")]
    assert [c.get_label() for c in ax.collections[1:]] == ["50 ms budget (interpolated between cells)"]
    bar = next(other for other in ax.figure.axes if other is not ax and other.child_axes)
    assert "interpolated" in bar.get_ylabel()


def test_required_bandwidth_draws_one_curve_per_model(ax):
    models = ["llama-3.1-70b", "deepseek-v3"]
    pp.required_bandwidth([1024, 8192], models, budgets_ms=[50], links=[], ax=ax)
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"llama-3.1-70b: 50 ms budget", "deepseek-v3: 50 ms budget"}
    for model in models:
        np.testing.assert_allclose(
            lines[f"{model}: 50 ms budget"].get_ydata(),
            perfmodel.required_bandwidth([1024, 8192], model, budget_ms=50),
        )


def _legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_curves_that_cannot_be_drawn_are_never_in_the_legend(ax):
    df = perfmodel.sweep(
        model="llama-3.1-70b", kv_transfer_bandwidth=[0.0, 50.0, np.inf], num_input_tokens=[1024, 8192, 32768]
    )
    with pytest.warns(UserWarning, match=r"not drawn: '0 GB/s' \(missing delays \(NaN\)\), 'inf GB/s' \(0 ms delays\)"):
        pp.delay_vs_tokens(df, ax=ax)
    assert _legend_texts(ax) == ["50 GB/s"]
    with pytest.warns(UserWarning, match="not drawn"):
        fig = pp.delay_vs_tokens_figure(df)
    try:
        assert [t.get_text() for t in fig.legends[0].get_texts()] == ["50 GB/s"]
    finally:
        plt.close(fig)
    with pytest.raises(InputError, match="nothing to draw"):
        pp.delay_vs_tokens(df[df["kv_transfer_bandwidth"] != 50.0], ax=ax)
    with pytest.raises(InputError, match="nothing to draw"):
        pp.delay_vs_tokens_figure(df[df["kv_transfer_bandwidth"] == np.inf])


def test_compare_leaves_an_undrawable_curve_out_of_the_legend(ax):
    ib = perfmodel.sweep(link="ib-ndr", model="llama-3.1-70b", num_input_tokens=TOKENS)
    with pytest.warns(UserWarning, match=r"'after' \(0 ms delays\)"):
        pp.compare(ib, ib.assign(handoff_delay_ms=0.0), ax=ax)
    assert _legend_texts(ax) == ["before"]
    with pytest.raises(InputError, match="nothing to draw"):
        pp.compare(ib.assign(handoff_delay_ms=np.nan), ib.assign(handoff_delay_ms=0.0), ax=ax)


def test_required_bandwidth_leaves_a_budget_no_bandwidth_meets_out_of_the_legend(ax):
    with pytest.warns(UserWarning, match=r"'5 ms budget' \(no bandwidth meets it\)"):
        pp.required_bandwidth(TOKENS, "llama-3.1-70b", budgets_ms=[5, 50], latency_ms=10.0, links=[], ax=ax)
    assert _legend_texts(ax) == ["50 ms budget"]


def test_infinite_values_read_as_inf():
    from perfmodel.plotting._style import label_of, si

    assert si(np.inf) == "inf" and si(-np.inf) == "-inf" and label_of("kv_transfer_bandwidth", np.inf) == "inf GB/s"


def test_delay_cdf_refuses_negative_delays_and_keeps_infinite_ones(ax):
    with pytest.raises(InputError, match="negative"):
        pp.delay_cdf(pd.Series([-1.0, 2, 3]), ax=ax)
    pp.delay_cdf(pd.Series([1.0, np.inf, 3], name="r"), percentiles=[50, 99], ax=ax)
    step = ax.get_lines()[0]
    np.testing.assert_allclose(step.get_ydata(), [1 / 3, 2 / 3])  # never reaches 1 before the infinite delay
    assert _legend_texts(ax) == ["r (33.3% infinite)"]
    assert sorted(t.get_text() for t in ax.texts) == ["p50 3 ms", "p99 inf ms"]


def test_delay_cdf_names_a_series_with_no_delays_and_refuses_nothing_to_draw(ax):
    with pytest.warns(UserWarning, match=r"'b'.*no delays"):
        pp.delay_cdf({"a": np.arange(1, 5.0), "b": np.full(3, np.nan)}, ax=ax)
    assert [t.split(":")[0] for t in _legend_texts(ax)] == ["a"]
    for data in (pd.Series([np.nan, np.nan]), pd.Series([], dtype=float), {}, {"a": []}):
        with pytest.raises(InputError, match="no delays"):
            pp.delay_cdf(data, ax=ax)
    with pytest.raises(InputError, match="percentiles"):
        pp.delay_cdf(np.arange(1, 5.0), percentiles=[150], ax=ax)


SWEEP = dict(model="llama-3.1-8b", kv_transfer_bandwidth=[10.0, 100.0], num_input_tokens=[1024, 8192])


@pytest.mark.parametrize(
    "draw",
    [
        lambda df: pp.delay_vs_tokens(df, ax=plt.gca()),
        pp.delay_vs_tokens_figure,
        lambda df: pp.heatmap(df, ax=plt.gca()),
        pp.heatmap_figure,
    ],
    ids=["delay_vs_tokens", "delay_vs_tokens_figure", "heatmap", "heatmap_figure"],
)
@pytest.mark.parametrize("frame", ["all-nan", "empty"])
def test_figures_of_frames_with_nothing_to_draw_are_refused(draw, frame):
    df = perfmodel.sweep(**SWEEP)
    df = df.assign(handoff_delay_ms=np.nan) if frame == "all-nan" else df.iloc[:0]
    try:
        with pytest.raises(InputError):
            draw(df)
    finally:
        plt.close("all")


def test_bad_arguments_of_figures_are_one_line_errors(ax):
    df = perfmodel.sweep(**SWEEP)
    with pytest.raises(InputError, match="num_input_tokens"):
        pp.required_bandwidth([], "llama-3.1-8b", ax=ax)
    with pytest.raises(InputError, match="not finite"):
        pp.heatmap(perfmodel.sweep(**{**SWEEP, "kv_transfer_bandwidth": [10.0, np.inf]}), ax=ax)
    with pytest.raises(InputError, match="label"):
        pp.delay_vs_tokens(df, label="X", ax=ax)
    fig, ax2 = plt.subplots()
    try:
        pp.delay_vs_tokens(df[df["kv_transfer_bandwidth"] == 10.0], label="X", ax=ax2)  # one line: its name
        assert ax2.get_lines()[0].get_label() == "X"
    finally:
        plt.close(fig)


def test_a_scalar_budget_is_one_budget(ax):
    df = perfmodel.sweep(**SWEEP)
    pp.delay_vs_tokens(df, budgets_ms=50, ax=ax)
    assert [t.get_text() for t in ax.texts] == ["50 ms budget"]
    fig, ax2 = plt.subplots()
    try:
        pp.heatmap(df, budgets_ms=10, ax=ax2)
        assert [line.get_label() for line in ax2.get_lines()] == ["10 ms budget"]
        pp.required_bandwidth(TOKENS, "llama-3.1-8b", budgets_ms=50, links=[], ax=ax2)
        assert "50 ms budget" in [line.get_label() for line in ax2.get_lines()]
    finally:
        plt.close(fig)
    for figure in (pp.delay_vs_tokens_figure(df, budgets_ms=50), pp.heatmap_figure(df, budgets_ms=10)):
        plt.close(figure)


@pytest.mark.parametrize("budget", [0, -5, np.nan, np.inf, "50", True])
def test_budgets_that_mean_nothing_are_refused_everywhere(ax, budget):
    df = perfmodel.sweep(**SWEEP)
    grid = pd.DataFrame({"decode_workers": [1, 1, 2, 2], "links": [1, 2, 1, 2], "p99_ms": [0.5, 3.0, 40.0, 900.0]})
    calls = [
        lambda: pp.delay_vs_tokens(df, budgets_ms=[budget], ax=ax),
        lambda: pp.delay_vs_tokens_figure(df, budgets_ms=[budget]),
        lambda: pp.heatmap(df, budgets_ms=[budget], ax=ax),
        lambda: pp.heatmap_figure(df, budgets_ms=[budget]),
        lambda: pp.required_bandwidth(TOKENS, "llama-3.1-8b", budgets_ms=[budget], ax=ax),
        lambda: pp.grid_percentiles(grid, budget_ms=budget, ax=ax),
        lambda: pp.grid_budget(grid, budget_ms=budget, ax=ax),
        lambda: pp.replay_grid_figure(grid, budget_ms=budget),
    ]
    try:
        for call in calls:
            with pytest.raises(InputError, match="budget"):
                call()
    finally:
        plt.close("all")
