"""A hostile tester's findings on the engines' readers (round 10, F2, F13, F14), each pinned: a histogram whose
lines list labels in other orders, a benchmark key written twice, send times spanning more than the run, a
histogram of negative bounds beside the engine's, a scrape stripped of its ``# TYPE`` lines, a counter written
without ``_total``; and the shipped engine files read as they did."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from perfmodel.cli import main
from perfmodel.engines import WINDOWS, compare_measured, measured_fits, read_benchmark, read_engine_metrics
from perfmodel.errors import InputError

DATA = Path(__file__).resolve().parent / "data" / "engines"
TTFT = "vllm:time_to_first_token_seconds"


def _one_line(error: pytest.ExceptionInfo[InputError]) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


# --- F2: label order carries no meaning ------------------------------------------------------------------------

ORDERED = f"""# TYPE {TTFT} histogram
{TTFT}_bucket{{le="0.1",engine="0",model_name="m"}} 1
{TTFT}_bucket{{le="1",engine="0",model_name="m"}} 3
{TTFT}_bucket{{le="+Inf",engine="0",model_name="m"}} 4
{TTFT}_count{{model_name="m",engine="0"}} 4
{TTFT}_sum{{model_name="m",engine="0"}} 2.5
"""


def test_a_histogram_whose_lines_order_labels_differently_is_one_row():
    """The report's scrape: the _bucket lines list engine first, the _count and _sum lines model_name first. One
    series, one row, with its mean and its quantiles; its labels as its first line lists them."""
    frame = read_engine_metrics(ORDERED)
    assert len(frame) == 1, frame[["labels", "count", "sum"]]
    row = frame.iloc[0]
    assert row["labels"] == 'engine="0",model_name="m"'  # (the first line's order, le left out)
    assert (row["count"], row["sum"], row["mean"]) == (4, 2.5, 0.625)
    # p50: rank 2 of 4 lies in (0.1, 1], which holds 2 (counts 1 -> 3): halfway, 0.55
    assert (row["p50"], row["p50_low"], row["p50_high"]) == pytest.approx((0.55, 0.1, 1.0))
    table = compare_measured(None, [frame])
    assert table["what"].tolist() == [TTFT] and table["mean_ms"].tolist() == [625.0]


def test_the_labels_text_is_the_first_lines_order_whatever_the_later_lines_say():
    """Stable: the _count line first gives its order, the _bucket lines' other order changes nothing."""
    text = (
        f"# TYPE {TTFT} histogram\n"
        f'{TTFT}_count{{model_name="m",engine="0"}} 1\n{TTFT}_sum{{model_name="m",engine="0"}} 0.5\n'
        f'{TTFT}_bucket{{engine="0",le="1",model_name="m"}} 1\n{TTFT}_bucket{{le="+Inf",engine="0",model_name="m"}} 1\n'
    )
    frame = read_engine_metrics(text)
    assert frame["labels"].tolist() == ['model_name="m",engine="0"']
    assert (frame["count"].iloc[0], frame["mean"].iloc[0], frame["p50_high"].iloc[0]) == (1, 0.5, 1.0)


def test_a_summary_and_a_gauge_group_by_the_label_set_too():
    text = (
        '# TYPE s summary\ns{quantile="0.5",b="2",a="1"} 3\ns_count{a="1",b="2"} 4\ns_sum{a="1",b="2"} 12\n'
        '# TYPE g gauge\ng{b="2",a="1"} 3\ng{a="1",b="3"} 4\n'
    )
    frame = read_engine_metrics(text)
    assert frame["metric"].tolist() == ["s", "g", "g"]
    assert (frame["count"].iloc[0], frame["mean"].iloc[0], frame["p50"].iloc[0]) == (4, 3, 3)
    assert frame["labels"].tolist() == ['b="2",a="1"', 'b="2",a="1"', 'a="1",b="3"']


def test_the_same_series_twice_in_another_label_order_is_still_refused():
    text = '# TYPE g gauge\ng{a="1",b="2"} 3\ng{b="2",a="1"} 4\n'
    with pytest.raises(InputError, match="appears twice"):
        read_engine_metrics(text)


def _nixl(nbytes: float, seconds: float, bytes_order: str, time_order: str) -> str:
    """One scrape of vLLM's NIXL histograms, each family listing its labels in its own order."""
    lines = []
    for name, mean, order in (
        ("vllm:nixl_bytes_transferred", nbytes, bytes_order),
        ("vllm:nixl_xfer_time_seconds", seconds, time_order),
    ):
        lines += [f"# TYPE {name} histogram"]
        lines += [f"{name}_bucket{{{order.format(le=le)}}} 4" for le in ("1e12", "+Inf")]
        labels = order.replace('le="{le}",', "").replace(',le="{le}"', "")
        lines += [f"{name}_count{{{labels}}} 4", f"{name}_sum{{{labels}}} {4 * mean}"]
    return "\n".join(lines) + "\n"


def test_measured_fits_pairs_the_nixl_histograms_by_label_set_not_by_their_order():
    """The bytes histogram lists engine first, the time histogram model_name first: the same series' labels, so
    the means pair, and three scrapes at three sizes fit the link."""
    a, b = 'engine="0",le="{le}",model_name="m"', 'model_name="m",le="{le}",engine="0"'
    scrapes = [read_engine_metrics(_nixl(size, 1e-4 + size / 20e9, a, b)) for size in (1e7, 4e7, 1.6e8)]
    fits = measured_fits(scrapes)
    assert fits.link is not None, fits.notes
    assert round(fits.link.bandwidth_gb_s, 6) == 20.0


# --- F13: a key written twice; send times longer than the run ---------------------------------------------------


def _vllm_text() -> str:
    return (DATA / "vllm_bench_serve.json").read_text()


def test_a_benchmark_key_written_twice_is_refused_naming_the_file_and_the_key(tmp_path):
    result = json.loads(_vllm_text())
    text = json.dumps(result)[:-1] + ', "input_lens": ' + json.dumps([2 * x for x in result["input_lens"]]) + "}"
    path = tmp_path / "dupkey.json"
    path.write_text(text)
    with pytest.raises(InputError) as refused:
        read_benchmark(path)
    message = _one_line(refused)
    assert message.startswith(f"{path}: ") and "'input_lens'" in message and "twice" in message, message
    assert main(["measured", str(path)]) == 2


def test_a_key_written_twice_in_a_line_of_json_lines_names_the_line(tmp_path):
    lines = (DATA / "sglang_bench_serving.jsonl").read_text().splitlines()
    lines[1] = lines[1][:-1] + ', "duration": 9.0}'
    path = tmp_path / "dupkey.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as refused:
        read_benchmark(path, run=0)  # (the whole file is read: its runs are one file)
    message = _one_line(refused)
    assert message.startswith(f"{path}, line 2: ") and "'duration'" in message, message


def test_a_benchmark_with_a_key_twice_given_to_the_scrape_reader_is_still_told_to_use_read_benchmark(tmp_path):
    path = tmp_path / "dupkey.json"
    path.write_text(_vllm_text()[:-1] + ', "duration": 4.2}')
    with pytest.raises(InputError, match="use read_benchmark"):
        read_engine_metrics(path)


def test_send_times_spanning_more_than_the_run_are_refused_naming_both_numbers(tmp_path):
    """start_times in ms (x1000) span 1,750 s for a run of 4.2 s: the arrivals cannot be longer than the run."""
    result = json.loads(_vllm_text())
    result["start_times"] = [t * 1e3 for t in result["start_times"]]
    path = tmp_path / "ms.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError) as refused:
        read_benchmark(path)
    message = _one_line(refused)
    assert message.startswith(f"{path}: start_times: "), message
    assert "1750 s" in message and "duration 4.2 s" in message and "ms" in message, message


def test_send_times_of_another_run_are_refused_and_a_rounded_duration_is_read(tmp_path):
    result = json.loads(_vllm_text())
    span = max(result["start_times"]) - min(result["start_times"])  # 1.75 s
    result["start_times"] = [t * 1e4 for t in result["start_times"]]  # 17,500 s: 17.5 s even as ms, another run
    path = tmp_path / "other.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match=r"start_times: .*17500 s.*duration 4\.2 s.*different runs"):
        read_benchmark(path)
    result = json.loads(_vllm_text())
    result["duration"] = round(span / 1.005, 4)  # (a writer rounded the duration: inside the 1% tolerance)
    result["latencies"] = result["ttfts"] = [min(v, result["duration"]) for v in result["ttfts"]]
    result.pop("mean_ttft_ms")
    path.write_text(json.dumps(result))
    assert read_benchmark(path)["arrival_ms"].max() == pytest.approx(span * 1e3)


# --- F14: negative bounds kept where not interpreted; stripped # TYPE lines; counters as written ---------------

TEMPERATURE = """# TYPE room_temperature_celsius histogram
room_temperature_celsius_bucket{le="-10"} 1
room_temperature_celsius_bucket{le="0"} 3
room_temperature_celsius_bucket{le="20"} 7
room_temperature_celsius_bucket{le="+Inf"} 8
room_temperature_celsius_count 8
room_temperature_celsius_sum -12
"""


def test_a_histogram_perfmodel_does_not_interpret_keeps_its_negative_bounds():
    """A temperature histogram scraped along: negative le and a negative sum, legal in the format. Kept, as the
    docs say of metrics perfmodel does not interpret, with its quantiles as histogram_quantile gives them."""
    text = (DATA / "vllm_nixl.prom").read_text() + TEMPERATURE
    frame = read_engine_metrics(text)
    row = frame[frame["metric"] == "room_temperature_celsius"].iloc[0]
    assert (row["type"], row["window"], row["count"], row["sum"], row["mean"]) == ("histogram", "", 8, -12, -1.5)
    # p50: rank 4 of 8 lies in (0, 20], holding 4 (3 -> 7): a quarter in, 5; p90: rank 7.2 in +Inf: 20
    assert (row["p50"], row["p50_low"], row["p50_high"]) == pytest.approx((5.0, 0.0, 20.0))
    assert (row["p90"], row["p90_high"]) == (20.0, math.inf)
    assert len(frame[frame["window"] != ""]) == len(read_engine_metrics(DATA / "vllm_nixl.prom").query("window != ''"))
    # 6 of 8 at or below -10: p50 (rank 4) lies in the lowest bucket, whose bound is <= 0: that bound, as
    # Prometheus's histogram_quantile gives it, the bucket reaching down without end
    cold = read_engine_metrics(TEMPERATURE.replace('"-10"} 1', '"-10"} 6').replace('"0"} 3', '"0"} 6')).iloc[0]
    assert (cold["p50"], cold["p50_low"], cold["p50_high"]) == (-10.0, -math.inf, -10.0)


def test_an_interpreted_histogram_with_a_negative_bound_is_still_refused():
    text = TEMPERATURE.replace("room_temperature_celsius", TTFT)
    with pytest.raises(
        InputError, match=re.escape(f"{TTFT}{{}}: a NaN, infinite or negative value (le -10, _sum -12)")
    ):
        read_engine_metrics(text)


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ('le="20"} 7', 'le="20"} 2', "bucket counts decrease (le -10: 1, le 0: 3, le 20: 2, le inf: 8)"),
        ("_count 8", "_count 9", "_count 9 is not the +Inf bucket's 8"),
        ('room_temperature_celsius_bucket{le="+Inf"} 8\n', "", "no +Inf bucket"),
        ("_sum -12", "_sum -Inf", "_sum -inf"),
        ('le="0"} 3', 'le="NaN"} 3', "le nan"),
        ('le="0"} 3', 'le="0"} -3', "_bucket le 0: -3"),
    ],
)
def test_a_histogram_of_negative_bounds_is_still_checked_otherwise(old, new, problem):
    """Only the sign is free: a histogram that does not add up is refused as before, its own values named."""
    text = TEMPERATURE.replace(old, new)
    assert text != TEMPERATURE
    with pytest.raises(InputError) as refused:
        read_engine_metrics(text)
    message = _one_line(refused)
    assert message.startswith("<text>: room_temperature_celsius{}: ") and problem in message, message
    assert "le -10" not in message.split("(")[1] or "decrease" in message, message  # (the sign is no problem)


def _stripped(name: str) -> str:
    return "".join(line for line in (DATA / name).read_text().splitlines(keepends=True) if not line.startswith("#"))


@pytest.mark.parametrize(
    "name, metric",
    [
        ("vllm_nixl.prom", "vllm:nixl_xfer_time_seconds"),
        ("sglang_prefill.prom", "sglang:per_stage_req_latency_seconds"),
    ],
)
def test_a_scrape_stripped_of_its_type_lines_is_refused_naming_the_histogram(name, metric, tmp_path, capsys):
    """grep -v '^#' leaves each _bucket, _count and _sum line an untyped number: the TTFT and transfer rows would
    be missing from the comparison without a word. Refused, naming the histogram and the line to put back."""
    path = tmp_path / name
    path.write_text(_stripped(name))
    with pytest.raises(InputError) as refused:
        read_engine_metrics(path)
    message = _one_line(refused)
    assert message.startswith(f"{path}: {metric}{{"), message
    assert f"'# TYPE {metric} histogram'" in message and "grep" in message, message
    assert "prefill_bootstrap" in message or "engine=" in message, message
    assert main(["measured", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_histogram_perfmodel_does_not_interpret_without_its_type_line_is_kept_as_written():
    frame = read_engine_metrics(TEMPERATURE.split("\n", 1)[1])
    assert frame["metric"].tolist() == [
        *["room_temperature_celsius_bucket"] * 4,
        "room_temperature_celsius_count",
        "room_temperature_celsius_sum",
    ]
    assert (frame["type"] == "unknown").all() and (frame["window"] == "").all()


def test_a_histogram_cut_from_its_type_line_by_another_metric_is_refused():
    """The same untyped lines, when another family's lines separate them from their # TYPE line."""
    text = ORDERED.replace(f"{TTFT}_count", f"# TYPE other gauge\nother 1\n{TTFT}_count", 1)
    with pytest.raises(InputError, match=re.escape(f"{TTFT}{{") + ".*# TYPE " + re.escape(TTFT) + " histogram"):
        read_engine_metrics(text)


def test_a_counter_written_without_total_keeps_the_engines_name():
    """prometheus_client's parser adds _total to a counter's samples written without it; the docs promise each
    metric as the engine names it. The window is the counter's all the same."""
    name = "vllm:nixl_num_failed_transfers"
    frame = read_engine_metrics(f'# TYPE {name} counter\n{name}{{engine="0"}} 3\n# TYPE c_total counter\nc_total 2\n')
    assert frame["metric"].tolist() == [name, "c_total"]
    assert frame["value"].tolist() == [3, 2] and (frame["type"] == "counter").all()
    assert frame["window"].iloc[0] == WINDOWS[f"{name}_total"]


def test_a_counter_declared_with_and_without_total_is_refused():
    """Two counters foo and foo_total: the parser names both foo_total, so which is which cannot be told."""
    with pytest.raises(InputError, match=r"'foo' and 'foo_total'"):
        read_engine_metrics('# TYPE foo counter\nfoo{a="1"} 3\n# TYPE foo_total counter\nfoo_total{a="2"} 2\n')


# --- the shipped engine files read as before --------------------------------------------------------------------


def _snapshot() -> dict:
    out: dict = {}
    for path in sorted(DATA.iterdir()):
        if path.suffix == ".prom":
            out[path.name] = read_engine_metrics(path)
        elif path.suffix == ".json":
            out[path.name] = read_benchmark(path)
        elif path.suffix == ".jsonl":
            for run in (0, 1, -1):
                out[f"{path.name}{run}"] = read_benchmark(path, run=run)
    scrapes = [out[key] for key in sorted(out) if key.endswith(".prom")]
    out["compare"] = compare_measured(out["vllm_bench_serve.json"], scrapes, model="llama-3.1-8b", link="ib-ndr")
    out["fits"] = measured_fits(scrapes, out["vllm_bench_serve.json"]).notes
    return out


def _digest(value) -> str:
    """A frame (its values to 17 digits, its columns, the kinds of its dtypes and its attrs, the source by its
    file's name) or a list of notes, as a short hash: the same on every machine, path and pandas version."""
    if isinstance(value, list):
        text = json.dumps(value)
    else:
        attrs = {k: Path(v).name if k == "source" else v for k, v in value.attrs.items()}
        text = value.to_csv(float_format="%.17g") + repr([dtype.kind for dtype in value.dtypes])
        text += json.dumps(attrs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: Each shipped file's frame, the comparison and the fits' notes, as the readers gave them before these fixes.
BEFORE = {  # (computed with the readers of commit e6c537c, before these fixes)
    "sglang_bench_serving.jsonl0": "4ef2801cd01a92e9",
    "sglang_bench_serving.jsonl1": "2b3289a152c1e806",
    "sglang_bench_serving.jsonl-1": "2b3289a152c1e806",
    "sglang_decode.prom": "b2ff96bc16b38c1b",
    "sglang_prefill.prom": "0c8ae0bd763c5bb3",
    "vllm_bench_serve.json": "c1de3aaeaef41a0c",
    "vllm_nixl.prom": "22bcab79c07d75e9",
    "compare": "68be12a31a69b0ea",
    "fits": "0baf7a4626a1a7f0",
}


def test_the_shipped_engine_files_read_as_before():
    """Every shipped file reads to the very frame it read to before (values, columns, types, attrs), and the
    comparison and the fits say the same."""
    assert {key: _digest(value) for key, value in _snapshot().items()} == BEFORE
