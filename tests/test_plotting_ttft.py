"""The TTFT figures: what they draw, and bad input refused."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest

import perfmodel
import perfmodel.plotting as pp
from perfmodel.errors import InputError


@pytest.fixture(scope="module")
def ttft():
    trace = perfmodel.synthetic_trace(400, 15, seed=1)
    trace["num_output_tokens"] = 20
    return perfmodel.replay_ttft(
        trace,
        5.0,
        "llama-3.1-8b",
        prefill_workers=2,
        prefill_tokens_per_s=60_000,
        prefill_kv_tokens=100_000,
        decode_kv_tokens=400_000,
        decode_step_ms=10.0,
        contention="fifo",
    )


def test_breakdown_bars_add_up_to_about_the_percentile(ttft, ax):
    pp.ttft_breakdown(ttft, ax=ax)
    tops = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0.0), patch.get_y() + patch.get_height())
    p50, p99 = np.percentile(ttft["ttft_ms"], [50, 99])
    assert tops[0] == pytest.approx(p50, rel=0.2) and tops[1] == pytest.approx(p99, rel=0.2)
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["prefill queue", "prefill"]


def test_memory_held_never_exceeds_the_capacity(ttft, ax):
    for side, capacity in (("prefill", 100_000), ("decode", 400_000)):
        ax.clear()
        pp.memory_held(ttft, side=side, ax=ax)
        *workers, cap = ax.get_lines()
        assert cap.get_ydata()[0] == capacity
        assert max(line.get_ydata().max() for line in workers) <= capacity
        assert min(line.get_ydata().min() for line in workers) >= 0


def test_ttft_vs_rate_draws_three_lines_per_curve(ax):
    trace = perfmodel.synthetic_trace(300, 10, seed=0)
    grid = perfmodel.ttft_grid(
        trace,
        link="ib-ndr",
        model="llama-3.1-8b",
        links=[1, 2],
        contention="fifo",
        prefill_tokens_per_s=80_000,
        request_rate_per_s=[5, 10],
        progress=False,
    )
    pp.ttft_vs_rate(grid, by="links", ax=ax)
    assert len(ax.get_lines()) == 6 and ax.get_yscale() == "log"


def test_bad_input_is_refused(ttft, ax):
    with pytest.raises(InputError, match="side"):
        pp.memory_held(ttft, side="both", ax=ax)
    with pytest.raises(InputError, match="num_output_tokens"):
        pp.memory_held(ttft.drop(columns=["done_ms"]), side="decode", ax=ax)
    with pytest.raises((InputError, ValueError), match="request_rate_per_s"):
        pp.ttft_vs_rate(ttft, ax=ax)
