"""Round 9 of the hostile review of the TTFT figures (``ttft_breakdown``, ``memory_held``, ``ttft_vs_rate``): a
column they read holding text, durations, dates, objects or booleans, a column missing, no rows, NaN, negative or
infinite times, all refused in one line naming the figure, the column, the value and the fix (they raised pandas'
or numpy's own errors, or drew a wrong figure); and the edges that must draw (one request, identical requests,
percentiles 0 and 100, two requests)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

import perfmodel
import perfmodel.plotting as pp
from perfmodel.errors import InputError


@pytest.fixture(scope="module")
def ttft() -> pd.DataFrame:
    trace = perfmodel.synthetic_trace(60, 10, seed=0)
    trace["num_output_tokens"] = 20
    return perfmodel.replay_ttft(
        trace,
        "ib-ndr",
        "llama-3.1-8b",
        prefill_workers=2,
        prefill_tokens_per_s=60_000,
        prefill_kv_tokens=200_000,
        decode_kv_tokens=400_000,
        decode_step_ms=20.0,
    )


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    return perfmodel.ttft_grid(
        perfmodel.synthetic_trace(100, 10, seed=0),
        link="ib-ndr",
        model="llama-3.1-8b",
        prefill_tokens_per_s=60_000,
        request_rate_per_s=[5, 10, 15],
        progress=False,
    )


def _corrupted(frame: pd.DataFrame, column: str, kind: str) -> pd.DataFrame:
    """``frame`` with ``column`` holding what a figure cannot read as numbers (row 1 of it, or all of it)."""
    frame = frame.copy()
    values = frame[column]
    if kind == "text":
        frame[column] = values.astype(str)
    elif kind == "one text cell":
        frame[column] = values.astype(object)
        frame.loc[frame.index[1], column] = "3,180"
    elif kind == "a list cell":
        frame[column] = values.astype(object)
        frame.at[frame.index[1], column] = [1.0]
    elif kind == "durations":
        frame[column] = pd.to_timedelta(values, unit="ms")
    elif kind == "duration objects":
        frame[column] = values.astype(object)
        frame.at[frame.index[1], column] = pd.Timedelta(5, "ms")
    elif kind == "dates":
        frame[column] = pd.to_datetime(values, unit="ms")
    elif kind == "booleans":
        frame[column] = values > values.median()
    return frame


#: How the fix of each kind of bad column reads (of a column of ms; durations and dates elsewhere: the source).
FIXES = {
    "text": "pd.to_numeric",
    "one text cell": "pd.to_numeric",
    "a list cell": "pd.to_numeric",
    "durations": "pd.Timedelta(1, 'ms')",
    "duration objects": "pd.Timedelta(1, 'ms')",
    "dates": "pd.Timedelta(1, 'ms')",
    "booleans": "",
}
KINDS = list(FIXES)


def _fix(kind: str, column: str, source: str) -> str:
    """What the fix of ``column`` holding ``kind`` names: the conversion, or the function whose frames are right."""
    fix = FIXES[kind]
    return fix if fix and (column.endswith("_ms") or "Timedelta" not in fix) else source


def _refused(call, where: str, column: str, fix: str) -> str:
    """The one line with which ``call`` is refused: an InputError of ``where`` naming ``column`` and ``fix``."""
    with pytest.raises(InputError) as caught:
        call()
    message = str(caught.value)
    assert message.startswith(f"{where}: "), message
    assert repr(column) in message or f" {column} " in message, message
    assert "Fix: " in message and fix in message.split("Fix: ", 1)[1], message
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("column", ["ttft_ms", "queue_ms", "transfer_ms", "decode_step_ms"])
def test_breakdown_refuses_a_time_column_that_holds_no_numbers(ttft, ax, column, kind):
    frame = _corrupted(ttft, column, kind)
    _refused(lambda: pp.ttft_breakdown(frame, ax=ax), "ttft_breakdown", column, _fix(kind, column, "replay_ttft"))
    assert not ax.patches


def test_breakdown_names_the_first_cell_that_is_no_number(ttft, ax):
    message = _refused(
        lambda: pp.ttft_breakdown(_corrupted(ttft, "queue_ms", "one text cell"), ax=ax),
        "ttft_breakdown",
        "queue_ms",
        "pd.to_numeric",
    )
    assert "first at row 1: '3,180'" in message and "thousands separator" in message


@pytest.mark.parametrize("column", ["ttft_ms", "prefill_ms", "transfer_ms"])
def test_breakdown_refuses_negative_times(ttft, ax, column):
    frame = ttft.copy()
    frame.loc[[4, 9], column] = -5.0
    message = _refused(lambda: pp.ttft_breakdown(frame, ax=ax), "ttft_breakdown", column, f"[{column!r}] >= 0")
    assert "2 of 60 requests" in message and "first at row 4: -5.0" in message
    assert not ax.patches


def test_breakdown_draws_a_negative_link_wait(ttft, ax):
    """On a cluster a handoff can end sooner than alone (max-min sharing: another flow slows one of its flows'
    rivals), so its link wait is negative (perfmodel.replay.cluster.link_wait_ms): a result as made is drawn, the
    bars still adding up to their TTFTs."""
    frame = ttft.copy()
    frame["link_wait_ms"] -= 0.25
    frame["transfer_ms"] += 0.25
    pp.ttft_breakdown(frame, percentiles=(50,), ax=ax)
    assert len(ax.patches) == 6


def test_breakdown_refuses_all_missing_ttfts(ttft, ax):
    message = _refused(
        lambda: pp.ttft_breakdown(ttft.assign(ttft_ms=np.nan), ax=ax), "ttft_breakdown", "ttft_ms", "dropna"
    )
    assert "60 of 60 requests have no ttft_ms" in message


def test_breakdown_suggests_leaving_infinite_times_out_with_isfinite(ttft, ax):
    frame = ttft.copy()
    frame.loc[2, "transfer_ms"] = -np.inf
    _refused(lambda: pp.ttft_breakdown(frame, ax=ax), "ttft_breakdown", "transfer_ms", "np.isfinite")


def test_breakdown_of_an_empty_frame_or_no_frame_is_refused(ttft, ax):
    _refused(lambda: pp.ttft_breakdown(ttft.iloc[:0], ax=ax), "ttft_breakdown", "ttft", "replay")
    _refused(lambda: pp.ttft_breakdown(ttft["ttft_ms"], ax=ax), "ttft_breakdown", "ttft", "perfmodel.replay_ttft")


@pytest.mark.parametrize("percentiles", [(True,), (50, False), ("50",), (50, "99")])
def test_breakdown_refuses_percentiles_that_are_no_numbers(ttft, ax, percentiles):
    with pytest.raises(InputError, match=r"^ttft_breakdown: percentiles .* not a number.*Fix: pass numbers in"):
        pp.ttft_breakdown(ttft, percentiles=percentiles, ax=ax)
    assert not ax.patches


def test_breakdown_refuses_a_percentile_given_twice(ttft, ax):
    with pytest.raises(InputError, match=r"^ttft_breakdown: percentiles \[50, 99, 50\] repeat p50.*Fix: pass"):
        pp.ttft_breakdown(ttft, percentiles=(50, 99, 50), ax=ax)


def _tops(ax) -> list[float]:
    """Each bar's total height (ms), left to right."""
    tops: dict[int, float] = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = tops.get(x, 0.0) + patch.get_height()
    return [tops[x] for x in sorted(tops)]


def test_breakdown_at_percentiles_0_and_100_is_the_fastest_and_slowest_requests(ttft, ax):
    pp.ttft_breakdown(ttft, percentiles=(0, 100), ax=ax)
    low, high = _tops(ax)
    values = np.sort(ttft["ttft_ms"].to_numpy())
    assert values[0] <= low <= np.percentile(values, 1) and np.percentile(values, 99) <= high <= values[-1]


def test_breakdown_of_one_request_and_of_identical_requests_is_their_ttft(ttft, ax):
    one = ttft.iloc[[7]]
    pp.ttft_breakdown(one, ax=ax)
    assert _tops(ax) == pytest.approx([one["ttft_ms"].iloc[0]] * 2)
    ax.clear()
    pp.ttft_breakdown(pd.concat([one] * 5, ignore_index=True), percentiles=(0, 50, 100), ax=ax)
    assert _tops(ax) == pytest.approx([one["ttft_ms"].iloc[0]] * 3)


def test_breakdown_of_two_requests_draws_no_nan_bar(ax):
    """With two requests no TTFT lies between the p49 and the p51: the bar is of the requests on either side of
    that band, here both (it was NaN, drawn as an empty bar labelled "nan ms")."""
    trace = pd.DataFrame({"arrival_ms": [0.0, 1000.0], "num_input_tokens": [500, 6000]})
    two = perfmodel.replay_ttft(trace, 5.0, "llama-3.1-8b", prefill_tokens_per_s=10_000)
    pp.ttft_breakdown(two, ax=ax)
    tops = _tops(ax)
    assert np.isfinite(tops).all() and "nan" not in " ".join(text.get_text() for text in ax.texts)
    assert tops == pytest.approx([two["ttft_ms"].mean(), two["ttft_ms"].max()])


def test_breakdown_reads_a_frame_of_nullable_or_object_numbers_as_its_float_twin(ttft, ax):
    pp.ttft_breakdown(ttft, ax=ax)
    expected = _tops(ax)
    ax.clear()
    frame = ttft.astype({"queue_ms": "Float64", "prefill_ms": object, "transfer_ms": "category"})
    pp.ttft_breakdown(frame, ax=ax)
    assert _tops(ax) == pytest.approx(expected)


PREFILL_SIDE = ["prefill_worker", "prefill_start_ms", "transfer_end_ms", "num_input_tokens"]
DECODE_SIDE = ["decode_worker", "admitted_ms", "done_ms", "num_input_tokens", "num_output_tokens"]
MEMORY_COLUMNS = [("prefill", c) for c in PREFILL_SIDE] + [("decode", c) for c in DECODE_SIDE]


@pytest.mark.parametrize("kind", ["text", "a list cell", "durations", "dates", "booleans"])
@pytest.mark.parametrize(("side", "column"), MEMORY_COLUMNS)
def test_memory_held_refuses_a_column_that_holds_no_numbers(ttft, ax, side, column, kind):
    frame = _corrupted(ttft, column, kind)
    _refused(lambda: pp.memory_held(frame, side=side, ax=ax), "memory_held", column, _fix(kind, column, "replay_ttft"))
    assert not ax.get_lines()


@pytest.mark.parametrize(("side", "column"), MEMORY_COLUMNS)
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_memory_held_refuses_missing_or_infinite_values(ttft, ax, side, column, value):
    frame = ttft.astype({column: float})
    frame.loc[3, column] = value
    message = _refused(lambda: pp.memory_held(frame, side=side, ax=ax), "memory_held", column, "replay_ttft")
    assert "1 of 60 requests" in message and "row 3" in message


@pytest.mark.parametrize(
    ("side", "column", "value"),
    [
        ("prefill", "prefill_worker", -1.0),
        ("decode", "decode_worker", 0.5),
        ("prefill", "num_input_tokens", -10.0),
        ("decode", "num_output_tokens", 2.5),
    ],
)
def test_memory_held_refuses_workers_and_tokens_that_are_no_whole_numbers(ttft, ax, side, column, value):
    frame = ttft.astype({column: float})
    frame.loc[5, column] = value
    message = _refused(lambda: pp.memory_held(frame, side=side, ax=ax), "memory_held", column, "replay_ttft")
    assert f"first at row 5: {value!r}" in message and "whole number >= 0" in message


@pytest.mark.parametrize(("side", "start", "end"), [("prefill", "prefill_start_ms", "transfer_end_ms"),
                                                    ("decode", "admitted_ms", "done_ms")])  # fmt: skip
def test_memory_held_refuses_requests_that_end_before_they_start(ttft, ax, side, start, end):
    frame = ttft.copy()
    frame.loc[6, end] = frame.loc[6, start] - 1.0
    message = _refused(lambda: pp.memory_held(frame, side=side, ax=ax), "memory_held", end, "replay_ttft")
    assert start in message and "row 6" in message


@pytest.mark.parametrize("column", ["decode_worker", "admitted_ms", "num_input_tokens"])
def test_memory_held_names_a_missing_decode_column(ttft, ax, column):
    _refused(
        lambda: pp.memory_held(ttft.drop(columns=column), side="decode", ax=ax),
        "memory_held",
        column,
        "perfmodel.replay_ttft",
    )


@pytest.mark.parametrize("side", ["prefill", "decode"])
def test_memory_held_of_an_empty_frame_or_no_frame_is_refused(ttft, ax, side):
    _refused(lambda: pp.memory_held(ttft.iloc[:0], side=side, ax=ax), "memory_held", "ttft", "replay")
    assert not ax.get_lines()
    _refused(lambda: pp.memory_held(ttft["ttft_ms"], side=side, ax=ax), "memory_held", "ttft", "replay_ttft")


@pytest.mark.parametrize("side", ["prefill", "decode"])
def test_memory_held_of_one_request_holds_its_tokens(ttft, ax, side):
    one = ttft.iloc[[4]]
    pp.memory_held(one, side=side, ax=ax)
    worker, capacity = ax.get_lines()
    held = one["num_input_tokens"].iloc[0] + (one["num_output_tokens"].iloc[0] if side == "decode" else 0)
    assert list(worker.get_ydata()) == [held, 0] and capacity.get_label() == "capacity"


VS_RATE_COLUMNS = ["request_rate_per_s", "p50_ms", "p99_ms", "handoff_delay_p99_ms"]


@pytest.mark.parametrize("kind", ["text", "one text cell", "a list cell", "durations", "dates", "booleans"])
@pytest.mark.parametrize("column", VS_RATE_COLUMNS)
def test_ttft_vs_rate_refuses_a_column_that_holds_no_numbers(grid, ax, column, kind):
    fix = _fix(kind, column, "ttft_grid")
    _refused(lambda: pp.ttft_vs_rate(_corrupted(grid, column, kind), ax=ax), "ttft_vs_rate", column, fix)
    assert not ax.get_lines()


@pytest.mark.parametrize("column", VS_RATE_COLUMNS)
@pytest.mark.parametrize("value", [-1.0, np.inf, np.nan])
def test_ttft_vs_rate_refuses_negative_infinite_or_missing_values(grid, ax, column, value):
    frame = grid.astype({column: float})
    frame.loc[1, column] = value
    message = _refused(lambda: pp.ttft_vs_rate(frame, ax=ax), "ttft_vs_rate", column, "grid")
    assert "1 of 3 rows" in message and "row 1" in message
    assert not ax.get_lines()


def test_ttft_vs_rate_refuses_two_rows_at_one_rate(grid, ax):
    twice = pd.concat([grid, grid.assign(p99_ms=grid["p99_ms"] * 2)], ignore_index=True)
    _refused(lambda: pp.ttft_vs_rate(twice, ax=ax), "ttft_vs_rate", "request_rate_per_s", "drop_duplicates")
    assert not ax.get_lines()


def test_ttft_vs_rate_of_no_frame_is_refused(grid, ax):
    _refused(lambda: pp.ttft_vs_rate(grid["p99_ms"], ax=ax), "ttft_vs_rate", "grid", "perfmodel.ttft_grid")


def test_ttft_vs_rate_keeps_a_curve_whose_by_value_is_missing(grid, ax):
    frame = pd.concat([grid.assign(links=1.0), grid.assign(links=np.nan)], ignore_index=True)
    pp.ttft_vs_rate(frame, by="links", ax=ax)
    assert len(ax.get_lines()) == 6


def test_ttft_vs_rate_of_one_rate_draws_its_points(grid, ax):
    pp.ttft_vs_rate(grid.iloc[[0]], ax=ax)
    assert [float(line.get_ydata()[0]) for line in ax.get_lines()] == pytest.approx(
        grid.loc[0, ["p99_ms", "p50_ms", "handoff_delay_p99_ms"]].astype(float).tolist()
    )
