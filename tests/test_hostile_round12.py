"""Hostile use, round 12: what a user trying the package as an adversary found, each failing on the code before
its fix. Silently wrong numbers first (a trace column taken over the model asked for, results that depend on the
rows' order without a word), then options, errors and the command line's outputs."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError
from perfmodel.ground.files import atomic_file

HGX = "hgx-h100-8x400g"


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=600,
    )


# --- a trace column named like the model asked for --------------------------------------------------------


@pytest.fixture
def shadowing() -> pd.DataFrame:
    """Two requests, and a column named like a model preset that holds another model's name."""
    return pd.DataFrame(
        {"arrival_ms": [0.0, 100.0], "num_input_tokens": [1000, 1000], "llama-3.1-70b": ["qwen3-32b"] * 2}
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda t: perfmodel.replay_handoffs(t, "ib-ndr", "llama-3.1-70b", contention="none"),
        lambda t: perfmodel.replay_handoffs(t, "ib-ndr", model="llama-3.1-70b", contention="fair"),
        lambda t: perfmodel.replay_handoffs(t, HGX, "llama-3.1-70b", tp=8, contention="none"),
        lambda t: perfmodel.replay_ttft(t, "ib-ndr", "llama-3.1-70b", contention="none"),
        lambda t: perfmodel.replay_grid(t, model="llama-3.1-70b", link=["ib-ndr", "8x ib-ndr"], contention="none"),
        lambda t: perfmodel.required_nics(t, "ib-ndr", "llama-3.1-70b", budget_ms=5, contention="none"),
    ],
    ids=["replay", "replay model=", "cluster", "ttft", "grid", "required_nics"],
)
def test_a_model_name_that_is_also_a_trace_column_is_refused_as_the_facade_refuses_it(shadowing, call):
    """The replays read the column (qwen3-32b's bytes) where the call named llama-3.1-70b; the facade refused."""
    with pytest.raises(InputError, match="'llama-3.1-70b' is both a column of the frame and a preset's name"):
        call(shadowing)


def test_a_number_as_text_that_is_also_a_trace_column_is_refused():
    trace = pd.DataFrame({"arrival_ms": [0.0, 100.0], "num_input_tokens": [1000, 1000], "65536": [1.0, 1.0]})
    with pytest.raises(InputError, match="'65536' is both a column of the frame and a number written as text"):
        perfmodel.replay_handoffs(trace, "ib-ndr", "65536", contention="none")
    plain = trace.drop(columns="65536")  # (without the column: the number, as in the numpy API)
    got = perfmodel.replay_handoffs(plain, "ib-ndr", "65536", contention="none")["handoff_delay_ms"]
    assert got.tolist() == [perfmodel.handoff_delay_ms(1000, "ib-ndr", 65536.0)] * 2


def test_the_column_itself_is_still_read_when_named_as_a_column(shadowing):
    got = perfmodel.replay_handoffs(shadowing, "ib-ndr", shadowing["llama-3.1-70b"], contention="none")
    assert got["handoff_delay_ms"].tolist() == [perfmodel.handoff_delay_ms(1000, "ib-ndr", "qwen3-32b")] * 2


# --- a cluster replay's prefill workers take rows in trace order: said when that is not arrival order -------


def _quiet(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught]


def test_an_unsorted_trace_on_several_prefill_workers_says_that_rows_go_round_robin_in_trace_order():
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0, 2.0, 3.0], "num_input_tokens": [32768, 32768, 1000, 1000]})
    keywords = dict(tp=8, prefill_workers=2, decode_workers=2, contention="fair", routing="round_robin")
    shuffled = trace.iloc[[2, 0, 3, 1]]
    sorted_run, said = _quiet(lambda: perfmodel.replay_handoffs(trace, HGX, "llama-3.1-70b", **keywords))
    assert not [s for s in said if "arrival order" in s], said
    _, said = _quiet(lambda: perfmodel.replay_handoffs(shuffled, HGX, "llama-3.1-70b", **keywords))
    assert [s for s in said if "not in arrival order" in s and "round robin in the trace's row order" in s], said
    own = shuffled.assign(prefill_worker=[0, 1, 0, 1])  # (the workers given: nothing to say)
    _, said = _quiet(lambda: perfmodel.replay_handoffs(own, HGX, "llama-3.1-70b", **keywords))
    assert not [s for s in said if "arrival order" in s], said
    one = {**keywords, "prefill_workers": 1}  # (one worker: the order changes nothing)
    _, said = _quiet(lambda: perfmodel.replay_handoffs(shuffled, HGX, "llama-3.1-70b", **one))
    assert not [s for s in said if "arrival order" in s], said
    assert sorted_run["prefill_worker"].tolist() == [0, 1, 0, 1]


# --- the old constants: an assignment is a call, also when it puts back an earlier value ---------------------


@pytest.fixture
def restored():
    before = perfmodel.get_options()["parallel_min_rows"]
    yield
    perfmodel.set_options(parallel_min_rows=before)


def test_assigning_an_old_constant_back_after_another_call_sets_it(restored):
    import perfmodel.handoff as h

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        before = h.PARALLEL_MIN_ROWS
        h.PARALLEL_MIN_ROWS = 5
        perfmodel.set_options(parallel_min_rows=100)
        h.PARALLEL_MIN_ROWS = before  # (the earlier value: once taken as an undo that left 100)
        assert perfmodel.get_options()["parallel_min_rows"] == before
        h.PARALLEL_MIN_ROWS = 10
        with perfmodel.set_options(parallel_min_rows=3):
            h.PARALLEL_MIN_ROWS = before  # (inside a block of 3: it stayed 3)
            assert perfmodel.get_options()["parallel_min_rows"] == before


def test_monkeypatch_still_puts_an_old_constant_back(restored, monkeypatch):
    import perfmodel.handoff as h

    before = perfmodel.get_options()["parallel_min_rows"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        monkeypatch.setattr(h, "PARALLEL_MIN_ROWS", 7)
        assert perfmodel.get_options()["parallel_min_rows"] == 7
        monkeypatch.undo()
    assert perfmodel.get_options()["parallel_min_rows"] == before


# --- numbers and errors -------------------------------------------------------------------------------------


def test_an_infinite_budget_needs_no_line_rate_on_a_cluster_as_no_bandwidth_on_a_link():
    """A bisection down to the smallest float: 5e-324 GB/s."""
    on_cluster = perfmodel.required_bandwidth(32768, "llama-3.1-70b", budget_ms=np.inf, cluster=HGX, tp=8)
    assert on_cluster == 0.0 == perfmodel.required_bandwidth(32768, "llama-3.1-70b", budget_ms=np.inf)
    finite = perfmodel.required_bandwidth(32768, "llama-3.1-70b", budget_ms=[np.inf, 50.0], cluster=HGX, tp=8)
    assert finite[0] == 0.0 and finite[1] == perfmodel.required_bandwidth(
        32768, "llama-3.1-70b", budget_ms=50.0, cluster=HGX, tp=8
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: perfmodel.handoff_delay_ms(1000, HGX, "llama-70b", tp=8),
        lambda: perfmodel.handoff_flows(1000, HGX, "llama-70b", tp=8),
        lambda: perfmodel.handoff_delay_ms(1000, "ib-ndr", "llama-70b"),
    ],
    ids=["cluster", "flows", "link"],
)
def test_an_unknown_model_is_an_input_error_naming_the_argument_on_a_cluster_as_on_a_link(call):
    with pytest.raises(InputError, match=r"^kv_bytes_per_token: model 'llama-70b': not a preset.*did you mean"):
        call()


def test_an_unknown_model_in_a_sweep_is_an_input_error_naming_the_axis():
    for place in (dict(link=["ib-ndr"]), dict(cluster=[HGX], tp=8)):
        with pytest.raises(InputError, match=r"^model: model 'llama-70b': not a preset"):
            perfmodel.sweep(model=["llama-70b"], num_input_tokens=[1], **place)


def test_a_fraction_given_as_a_percentile_is_said_to_be_one():
    trace = pd.DataFrame({"arrival_ms": [0.0, 10.0], "num_input_tokens": [1000, 2000]})
    with pytest.warns(UserWarning, match=r"percentile=0.99 is the p0.99.*pass percentile=99 for the p99"):
        perfmodel.required_nics(trace, "ib-ndr", "llama-3.1-8b", budget_ms=50, contention="none", percentile=0.99)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        perfmodel.required_nics(trace, "ib-ndr", "llama-3.1-8b", budget_ms=50, contention="none", percentile=99)
    with pytest.raises(InputError, match=r"^percentile: 101 is not a percentile in \[0, 100\]"):
        perfmodel.required_nics(trace, "ib-ndr", "llama-3.1-8b", budget_ms=50, contention="none", percentile=101)


@pytest.mark.parametrize("name", ["a,b", "pinned=1"])
def test_a_cluster_whose_name_a_grid_could_not_name_is_refused_before_it_is_saved(name, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    cluster = perfmodel.Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, name=name)
    with pytest.raises(InputError, match=r"^cluster name: .* contains '[,=]'.*Fix: choose a name without ',' or '='"):
        perfmodel.save_cluster(cluster)
    assert not (tmp_path / "config").exists() or not any((tmp_path / "config").rglob("*.json"))


# --- a failed run leaves nothing it made, parents included ------------------------------------------------


def test_a_failed_write_removes_the_folders_it_made_and_keeps_the_ones_it_found(tmp_path):
    (tmp_path / "kept").mkdir()
    target = tmp_path / "kept" / "new" / "deeper" / "out.csv"
    with pytest.raises(RuntimeError), atomic_file(target):
        raise RuntimeError("the computation failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"] and not any((tmp_path / "kept").iterdir())
    with atomic_file(target) as tmp:  # (done: the folders stay, with the file)
        tmp.write_text("x")
    assert target.read_text() == "x"


@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "--out", "n6/a/b", "--model", "llama-3.1-70b", "--cluster", HGX, "--nics-per-node", "3"],
        ["delay", "req.csv", "--out", "n7/a/b.csv", "--tp", "8"],
    ],
    ids=["sweep", "delay"],
)
def test_a_failed_command_leaves_no_parent_folder_it_made(command, tmp_path):
    (tmp_path / "req.csv").write_text("num_input_tokens\n100\n")
    done = _cli(*command, cwd=tmp_path)
    assert done.returncode == 2, done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["req.csv"], list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "--out", "-"],
        ["trace", "dataset:mooncake-synthetic", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", "-"],
        ["delay", "req.csv", "--link", "ib-ndr", "--model", "llama-3.1-8b", "--out", "-"],
        ["ttft", "dataset:azure-code-2023", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", "-"],
        ["calibrate", "dataset:perftest-ib-hdr", "--out", ""],
    ],
    ids=["sweep", "trace", "delay", "ttft", "calibrate"],
)
def test_standard_output_is_no_place_to_write_to(command, tmp_path):
    (tmp_path / "req.csv").write_text("num_input_tokens\n100\n")
    done = _cli(*command, cwd=tmp_path)
    assert done.returncode == 2 and "names no file or folder" in done.stderr, done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["req.csv"]


def test_clearing_a_cache_that_is_a_file_removes_nothing_and_says_so(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for flag in ("--clear", "--prune"):
        done = _cli("cache", flag, cwd=tmp_path, PERFMODEL_CACHE_DIR=str(notes))
        assert done.returncode == 0 and done.stdout.startswith(f"nothing to remove: {notes} is not a folder"), done
    assert notes.read_text() == "mine"


# --- TTFT: a request is never done before its first token ----------------------------------------------------


def test_a_request_of_no_output_tokens_is_done_at_its_first_token_and_holds_its_memory_until_then():
    """It was done (its decode memory freed, the next request of a closed loop issued) a step before its first
    token: the next request was admitted into memory the first still held."""
    trace = pd.DataFrame({"arrival_ms": [0.0, 0.0], "num_input_tokens": [1000, 1000], "num_output_tokens": [0, 1]})
    got = perfmodel.replay_ttft(trace, 1.0, 1e6, decode_step_ms=50, decode_kv_tokens=1001, contention="fifo")
    assert (got["done_ms"] >= got["first_token_ms"]).all(), got
    assert got["done_ms"].iloc[0] == got["first_token_ms"].iloc[0] == 1050.0
    assert got["admitted_ms"].iloc[1] == 1050.0  # (memory for one request only: after the first is done)
    closed = perfmodel.replay_ttft(trace, 1.0, 1e6, decode_step_ms=50, concurrency=1, contention="fifo")
    assert closed["arrival_ms"].iloc[1] == closed["first_token_ms"].iloc[0] == 1050.0  # (issued when done)


def test_summarizing_a_subset_of_a_ttft_result_says_what_its_figures_miss():
    """Utilisation and memory of half the rows read half the run's, silently."""
    trace = perfmodel.synthetic_trace(600, rate_per_s=20, seed=0)
    kw = dict(prefill_workers=2, prefill_tokens_per_s=60_000, decode_kv_tokens=100_000, decode_step_ms=3)
    ttft = perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-8b", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = perfmodel.summarize_ttft(ttft)
    with pytest.warns(UserWarning, match=r"holds 300 of the 600 requests replayed.*understate"):
        part = perfmodel.summarize_ttft(ttft[ttft["prefill_worker"] == 0])
    assert part["prefill_busy"] < whole["prefill_busy"]  # (what the warning is about)


def test_fit_prefill_takes_lengths_less_than_ten_percent_apart_as_one_and_says_when_it_is_far_off():
    """Lengths 0.6% apart fitted a quadratic that put 171 s on a 128k prompt; a fit 89% off said nothing."""
    with pytest.raises(InputError, match=r"at least two prompt lengths \(10% apart or more\), got 4 measurements"):
        perfmodel.fit_prefill([1024, 1030, 1024, 1030], [10, 11, 10.2, 10.9])
    with pytest.warns(UserWarning, match=r"fit_prefill: the fit is far from the measurements \(max error \d+%\)"):
        perfmodel.fit_prefill([1000, 2000, 4000, 8000], [100, 10, 100, 10])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close = perfmodel.fit_prefill([1000, 2000, 4000], [10.0, 20.0, 40.0])
    assert close.max_relative_error < 1e-9


def test_a_generic_tables_token_count_above_2_53_is_refused_as_the_other_readers_refuse_it(tmp_path):
    """An int64 column held 2**53 + 1 exactly; its check read it as a float (2**53) and passed it."""
    table = tmp_path / "big.csv"
    table.write_text("arrival_ms,num_input_tokens\n0,9007199254740993\n1,100\n")
    with pytest.raises(InputError, match=r"line 2, column 'num_input_tokens': '9007199254740993' is above 2\*\*53"):
        perfmodel.read_trace(table)
    table.write_text("arrival_ms,num_input_tokens\n0,9007199254740992\n1,100\n")  # (2**53 itself: exact, kept)
    assert perfmodel.read_trace(table)["num_input_tokens"].tolist() == [2**53, 100]


def test_a_bool_is_no_request_rate_and_workers_and_bins_are_whole_numbers(ax):
    trace = perfmodel.synthetic_trace(20, rate_per_s=5, seed=0)
    with pytest.raises(InputError, match=r"request_rate_per_s \(in the grid's .*\): must be a finite rate > 0"):
        perfmodel.ttft_grid(trace, link="ib-ndr", model="llama-3.1-8b", request_rate_per_s=[True, 1], progress=False)
    from perfmodel import dask as on_dask

    for workers in (0, -1, 1.5):  # (0 ran one worker per core; -1 waited for a worker; 1.5 a TypeError)
        with pytest.raises(InputError, match=rf"^workers: {workers} is not a whole number >= 1"):
            on_dask.ttft_grid(trace, link="ib-ndr", model="llama-3.1-8b", prefill_workers=[1], workers=workers)
    import matplotlib

    matplotlib.use("Agg")
    from perfmodel import plotting

    replay = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", contention="fifo")
    for bins in (-1, 1.5, "10"):
        with pytest.raises(InputError, match=r"^bins: "):
            plotting.link_timeline(replay, bins=bins, ax=ax)
    ax = plotting.link_timeline(replay, bins=4, ax=ax)  # (a short replay with bins asked for: they are drawn)
    assert ax.get_legend() is not None


def test_fewest_for_ttft_tries_counts_as_it_needs_them():
    """A large ``most`` built every count up front (a MemoryError at 10**9) though 1 keeps the budget."""
    trace = perfmodel.synthetic_trace(20, rate_per_s=5, seed=0)
    assert perfmodel.fewest_for_ttft(trace, ttft_budget_ms=1e6, link="ib-ndr", model="llama-3.1-8b", most=10**12) == 1


def test_compare_measured_names_itself_for_an_option_it_does_not_take():
    from perfmodel.engines import compare_measured

    benchmark = pd.DataFrame({"completed": [True], "num_input_tokens": [1000]})
    with pytest.raises(TypeError, match=r"^compare_measured\(\) got unexpected keyword arguments \['contention'\]"):
        compare_measured(benchmark, [], model="llama-3.1-8b", link="ib-ndr", contention="fifo")


@pytest.mark.parametrize(
    "command",
    [
        ["calibrate", "nonexist.csv", "--name", "x", "--out", "."],
        ["ttft", "nonexist.csv", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", "."],
        ["trace", "nonexist.csv", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", "."],
    ],
    ids=["calibrate", "ttft", "trace"],
)
def test_a_missing_input_is_said_missing_not_overwritten(command, tmp_path):
    """calibrate and ttft said the output folder (.) contained the input: the input does not exist."""
    done = _cli(*command, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().endswith("nonexist.csv: no such file"), done


def test_a_damaged_table_of_measurements_is_named_with_what_to_check(tmp_path):
    """calibrate raised zlib's bare OSError, naming no file."""
    damaged = tmp_path / "bad.csv.gz"
    damaged.write_bytes(b"not gzip at all")
    with pytest.raises(
        InputError, match=r"bad.csv.gz: could not be read \(.*\)\. Fix: check that the file is complete"
    ):
        perfmodel.calibrate(damaged)


def test_the_calibration_figure_refuses_what_fit_link_refuses_and_takes_a_presets_name(ax):
    """An empty table raised numpy's zero-size error, mismatched lengths an IndexError, a name an AttributeError."""
    import matplotlib

    matplotlib.use("Agg")
    from perfmodel import plotting

    for sizes, times, said in (
        ([], [], "0 transfer sizes and 0 measured times"),
        ([1e6, 1e7], [1.0], "2 transfer sizes and 1 measured time"),
        ([1e6, 1e7], [1.0, 0.0], r"measurement 1 \(10000000.0 bytes in 0.0 ms\) is not of bytes > 0 in ms > 0"),
    ):
        with pytest.raises(InputError, match=rf"^calibration: {said}"):
            plotting.calibration(sizes, times, "ib-ndr", ax=ax)
    ax = plotting.calibration([1e6, 1e7], [0.05, 0.3], "ib-ndr", ax=ax)
    assert [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()] == ["measured", "ib-ndr"]


def test_a_taken_name_is_told_to_replace_with_the_flag_alone(tmp_path):
    """'(--replace True; on the command line --replace)': a switch takes no value."""
    env = dict(PERFMODEL_CONFIG_DIR=str(tmp_path / "config"))
    first = _cli("calibrate", "dataset:perftest-ib-hdr", "--name", "ours", "--save", "--out", "a", cwd=tmp_path, **env)
    assert first.returncode == 0, first
    again = _cli("calibrate", "dataset:perftest-ib-hdr", "--name", "ours", "--save", "--out", "b", cwd=tmp_path, **env)
    assert again.returncode == 2 and again.stderr.strip().endswith("replace it explicitly (--replace)."), again
    assert not (tmp_path / "b").exists()


def test_a_float_beyond_range_is_not_told_to_be_written_as_inf_where_inf_is_refused(tmp_path):
    done = _cli("ttft", "dataset:azure-code-2023", "--model", "llama-3.1-8b", "--link", "ib-ndr",
                "--prefill-tokens-per-s", "1e400", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "write a smaller number (or inf, where the flag takes no limit)" in done.stderr


def test_a_bucket_bound_written_twice_in_two_spellings_is_refused(tmp_path):
    """le="0.1" and le="0.10" are one bound: a histogram of both was read, and its quantiles from it."""
    scrape = tmp_path / "metrics.txt"
    scrape.write_text(
        "# TYPE vllm:nixl_xfer_time_seconds histogram\n"
        'vllm:nixl_xfer_time_seconds_bucket{le="0.1"} 2.0\n'
        'vllm:nixl_xfer_time_seconds_bucket{le="0.10"} 3.0\n'
        'vllm:nixl_xfer_time_seconds_bucket{le="+Inf"} 4.0\n'
        "vllm:nixl_xfer_time_seconds_count 4.0\n"
        "vllm:nixl_xfer_time_seconds_sum 0.3\n"
    )
    with pytest.raises(InputError, match=r'le="0.10"\}: appears twice'):
        perfmodel.read_engine_metrics(scrape)


def test_a_compressed_scrape_is_read_through_and_a_damaged_one_named(tmp_path):
    """A gzipped scrape was refused as 'a binary file', with no word of its compression."""
    import gzip

    text = (
        "# TYPE vllm:nixl_xfer_time_seconds histogram\n"
        'vllm:nixl_xfer_time_seconds_bucket{le="0.1"} 2.0\n'
        'vllm:nixl_xfer_time_seconds_bucket{le="+Inf"} 4.0\n'
        "vllm:nixl_xfer_time_seconds_count 4.0\n"
        "vllm:nixl_xfer_time_seconds_sum 0.3\n"
    )
    (tmp_path / "m.txt").write_text(text)
    (tmp_path / "m.txt.gz").write_bytes(gzip.compress(text.encode()))
    plain, packed = (perfmodel.read_engine_metrics(tmp_path / name) for name in ("m.txt", "m.txt.gz"))
    pd.testing.assert_frame_equal(plain, packed)  # (NaN where NaN)
    (tmp_path / "bad.txt.gz").write_bytes(b"xx")
    with pytest.raises(InputError, match=r"bad.txt.gz: could not be read as gzip"):
        perfmodel.read_engine_metrics(tmp_path / "bad.txt.gz")
    (tmp_path / "m.bin").write_bytes(gzip.compress(text.encode()))
    with pytest.raises(InputError, match=r"a binary file, not text \(a compressed one: name it with its suffix"):
        perfmodel.read_engine_metrics(tmp_path / "m.bin")


def test_one_scrape_given_twice_is_refused_not_counted_twice(tmp_path):
    scrape = tmp_path / "m.txt"
    scrape.write_text("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n")
    (tmp_path / "again.txt").symlink_to(scrape)
    for files in (["m.txt", "m.txt"], ["m.txt", "again.txt"]):
        done = _cli("measured", *files, cwd=tmp_path)
        assert done.returncode == 2 and "is given twice" in done.stderr and "give each file once" in done.stderr, done


def test_input_files_of_other_columns_are_refused_before_any_part_is_written(tmp_path):
    """Parts of different schemas were written: pandas dropped a column and filled another, Dask raised."""
    (tmp_path / "multi").mkdir()
    (tmp_path / "multi" / "a.csv").write_text("num_input_tokens,note\n100,a\n200,b\n")
    (tmp_path / "multi" / "b.csv").write_text("num_input_tokens,other\n100,x\n")
    done = _cli("delay", "multi/*.csv", "--out", "out", "--workers", "1", "--link", "ib-ndr", "--model",
                "llama-3.1-8b", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "has other columns than" in done.stderr and "(note, other)" in done.stderr, done
    assert not (tmp_path / "out").exists()


def test_cells_that_are_no_number_are_counted_and_a_worker_fix_is_the_flag(tmp_path):
    (tmp_path / "nn.csv").write_text("arrival_ms,num_input_tokens\n0,100\n1,x\n2,y\n")
    with pytest.raises(
        InputError, match=r"line 3, column 'num_input_tokens': 'x' is not a number \(the first of 2 such"
    ):
        perfmodel.read_trace(tmp_path / "nn.csv")
    (tmp_path / "pw.csv").write_text("arrival_ms,num_input_tokens,pw\n0,100,0\n1,100,5\n")
    done = _cli("ttft", "pw.csv", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--column", "prefill_worker=pw",
                "--prefill-workers", "2", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "Fix: pass --prefill-workers >= 6 (the largest worker + 1)" in done.stderr, done
