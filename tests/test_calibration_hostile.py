"""A hostile tester's findings on calibration and engines' measured data (h1), each pinned: fits of one
distinct size refused, NIXL means without a sum left out and said, poor fits warned of, bad cells at their
line of the file, ambiguous columns refused."""

from __future__ import annotations

import contextlib
import json
import warnings

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError
from perfmodel.cli import main


def _histogram(name: str, mean: float, n: int = 4, total: bool = True) -> str:
    lines = [f"# TYPE {name} histogram", f'{name}_bucket{{le="+Inf"}} {n}', f"{name}_count {n}"]
    return "\n".join(lines + ([f"{name}_sum {mean * n!r}"] if total else [])) + "\n"


def _nixl(mean_bytes: float, mean_s: float, *, total: bool = True) -> str:
    return _histogram("vllm:nixl_bytes_transferred", mean_bytes, total=total) + _histogram(
        "vllm:nixl_xfer_time_seconds", mean_s
    )


# --- 1. measured_fits: two scrapes of one prompt length are one size ------------------------------------


def test_measured_fits_refuses_two_means_of_one_size():
    a = perfmodel.read_engine_metrics(_nixl(67_108_864, 0.0200))
    b = perfmodel.read_engine_metrics(_nixl(67_109_000, 0.0199))
    fits = perfmodel.measured_fits([a, b])
    assert fits.link is None, fits.notes[0]
    assert "not fitted" in fits.notes[0] and "10%" in fits.notes[0], fits.notes[0]


def test_measured_fits_still_fits_means_of_sizes_apart():
    scrapes = [perfmodel.read_engine_metrics(_nixl(b, 1e-4 + b / 20e9)) for b in (1e7, 4e7, 1.6e8)]
    fits = perfmodel.measured_fits(scrapes)
    assert fits.link is not None and round(fits.link.bandwidth_gb_s, 6) == 20.0


# --- 3. fit_link and fit_connector: one distinct point is refused ---------------------------------------


@pytest.mark.parametrize(
    "sizes, times",
    [([1e6, 1e6], [1.0, 1.0]), ([67_108_864, 67_109_000], [20.0, 19.9]), ([1e6, 1.04e6, 1.08e6], [1.0, 1.1, 1.0])],
)
def test_fit_link_refuses_sizes_too_close_to_tell_bandwidth_from_latency(sizes, times):
    with pytest.raises(InputError, match=r"fit_link: needs measurements of at least two sizes.*10%"):
        perfmodel.fit_link(sizes, times)


def test_fit_link_keeps_a_page_size_experiment_and_sizes_apart():
    pages = perfmodel.fit_link([983e6, 983e6], [20.0, 8.0], n_messages=[30_016, 3_776])
    assert round(pages.per_message_ms * 1000, 3) == 0.457
    link = perfmodel.fit_link([1e6, 1.2e6], [0.1 + 1e6 / 20e6, 0.1 + 1.2e6 / 20e6])
    assert round(link.bandwidth_gb_s, 6) == 20.0


@pytest.mark.parametrize("measured, transport", [([10.0], [5.0]), ([10.0, 10.5], [5.0, 5.0])])
def test_fit_connector_refuses_one_distinct_handoff(measured, transport):
    with pytest.raises(InputError, match=r"fit_connector: needs measurements of at least two sizes"):
        perfmodel.fit_connector(measured, transport)


# --- 5. a NIXL histogram without _sum: left out and said, never a crash ---------------------------------


def test_measured_fits_leaves_out_a_mean_without_a_sum_and_says_where(tmp_path):
    nosum = tmp_path / "nosum_a.prom"
    nosum.write_text(_nixl(4e7, 0.004, total=False))
    a = perfmodel.read_engine_metrics(nosum)
    b = perfmodel.read_engine_metrics(_nixl(2e8, 0.012))
    fits = perfmodel.measured_fits([a, b])
    assert fits.link is None
    said = " ".join(fits.notes)
    assert "nosum_a.prom" in said and "vllm:nixl_bytes_transferred" in said and "_sum" in said, said


def test_the_command_measured_says_a_mean_without_a_sum(tmp_path, capsys):
    (tmp_path / "a.prom").write_text(_nixl(4e7, 0.004, total=False))
    (tmp_path / "b.prom").write_text(_nixl(2e8, 0.012))
    assert main(["measured", str(tmp_path / "a.prom"), str(tmp_path / "b.prom")]) == 0
    assert "a.prom" in capsys.readouterr().out


# --- 2. calibrate warns of a poor fit, as connectors --fit does ------------------------------------------


def test_calibrate_warns_of_a_fit_far_from_its_measurements():
    sizes = 2.0 ** np.arange(17, 25)
    times = sizes / 20e6 * np.where(np.arange(sizes.size) % 2, 1.6, 1.0)  # half the rows 60% slower
    with pytest.warns(UserWarning, match="the fit is far from the measurements"):
        fitted = perfmodel.calibrate(pd.DataFrame({"nbytes": sizes, "measured_ms": times}))
    assert any("far from the measurements" in text for text in fitted.warnings)


def test_the_far_off_check_is_one_for_calibrate_and_connectors():
    from perfmodel.network.fits import FitReport

    assert FitReport(3, 0.05, 0.01).far_off("x") == ""
    assert "far from the measurements (3 points, max error 20.0%" in FitReport(3, 0.2, 0.1).far_off("check it")


# --- 4. a bad token cell: the file and its line, no flag calibrate lacks ---------------------------------


@pytest.mark.parametrize("cell, problem", [("-3", "negative"), ("1.5", "not a whole number"), ("1e20", "too large")])
def test_a_bad_token_cell_is_reported_at_its_line_of_the_file(tmp_path, capsys, cell, problem):
    table = tmp_path / "tokneg2.csv"
    table.write_text(f"num_input_tokens,measured_ms\n,1\n,1\n1024,1\n2048,2\n4096,4\n{cell},3\n")
    with pytest.raises(InputError) as raised:
        perfmodel.calibrate(table, model="llama-3.1-8b")
    assert "tokneg2.csv, line 7" in str(raised.value) and problem in str(raised.value), str(raised.value)
    assert main(["calibrate", str(table), "--name", "x", "--model", "llama-3.1-8b", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "tokneg2.csv, line 7" in err and "--column" not in err, err


# --- 6. compare_measured: a prompt of 0 tokens is named, not the link ------------------------------------


def test_compare_measured_names_a_request_of_no_tokens(tmp_path):
    result = {"backend": "vllm", "endpoint_type": "vllm", "request_rate": 4.0, "max_concurrency": None,
              "duration": 2.0, "completed": 3, "input_lens": [0, 4096, 8192], "output_lens": [128, 128, 64],
              "ttfts": [0.12, 0.31, 0.56], "errors": ["", "", ""]}  # fmt: skip
    path = tmp_path / "zero_tokens.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError) as raised:
        perfmodel.compare_measured(perfmodel.read_benchmark(path), [], model="llama-3.1-8b", link="ib-ndr")
    text = str(raised.value)
    assert "zero_tokens.json" in text and "request 0" in text and "0 tokens" in text and "ib-ndr" not in text, text


# --- 7. a cell's text is shown as it is in the file -------------------------------------------------------


def test_a_cell_holding_a_numpy_repr_is_shown_as_written(tmp_path):
    table = tmp_path / "npcell.csv"
    table.write_text("nbytes,measured_ms\n1000000,np.float64(0.07)\n2000000,0.12\n")
    with pytest.raises(InputError, match=r"holds 'np\.float64\(0\.07\)', not a number"):
        perfmodel.calibrate(table)
    from perfmodel.errors import plain_text

    assert plain_text("got np.float64(-1.5) in {'a': np.int64(3)}") == "got -1.5 in {'a': 3}"


# --- 8. an empty count column is named --------------------------------------------------------------------


def test_an_empty_count_column_is_named(tmp_path):
    table = tmp_path / "fewer.csv"
    table.write_text("nbytes,measured_ms,n_blocks\n1000000,0.07\n2000000,0.12\n4000000,0.22\n")
    with pytest.raises(InputError, match=r"fewer.csv: every row lacks n_blocks.*drop the column"):
        perfmodel.calibrate(table)


# --- 9. ambiguous columns and unused or invalid arguments are refused --------------------------------------

_S = [2**20, 2**22, 2**24]
_MS = [x / 20e6 + 0.02 for x in _S]


@pytest.mark.parametrize(
    "columns, phrase",
    [
        ({"nbytes": _S, "#bytes": [2 * x for x in _S], "measured_ms": _MS}, "has both nbytes and #bytes"),
        ({"nbytes": _S, "measured_us": [m * 1e3 for m in _MS], "t_typical_us": [m * 1e6 for m in _MS]},
         "has both measured_us and t_typical_us"),
        ({"nbytes": _S, "measured_ms": _MS, "measured_gb_s": [1.0] * 3}, "measured_gb_s"),
    ],
)  # fmt: skip
def test_ambiguous_columns_are_refused(columns, phrase):
    with pytest.raises(InputError, match=phrase.replace("(", r"\(").replace("[", r"\[")):
        perfmodel.calibrate(pd.DataFrame(columns))


def test_a_time_beside_a_throughput_that_agrees_and_perftest_s_latency_pair_are_read():
    agreeing = pd.DataFrame({"nbytes": _S, "measured_ms": _MS, "measured_gb_s": [x / m / 1e6 for x, m in zip(_S, _MS)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert round(perfmodel.calibrate(agreeing).link.bandwidth_gb_s, 6) == 20.0
        pair = pd.DataFrame(
            {"nbytes": _S, "t_typical[usec]": [m * 1e3 for m in _MS], "t_avg[usec]": [m * 1e3 for m in _MS]}
        )
        assert round(perfmodel.calibrate(pair).link.bandwidth_gb_s, 6) == 20.0


def test_kv_layout_is_checked_and_refused_with_bytes():
    table = pd.DataFrame({"nbytes": _S, "measured_ms": _MS})
    with pytest.raises(InputError, match="kv_layout"):
        perfmodel.calibrate(table, kv_layout="block")
    tokens = pd.DataFrame({"num_input_tokens": [1024, 4096, 16384], "measured_ms": [1.0, 3.0, 11.0]})
    with pytest.raises(InputError, match="nonsense"):
        perfmodel.calibrate(tokens, model="llama-3.1-8b", block_size=16, kv_layout="nonsense")
    with pytest.raises(InputError, match="n_messages"):
        perfmodel.calibrate(tokens.assign(n_messages=[10, 40, 160]), model="llama-3.1-8b", block_size=16)


# --- 10, 11. perfmodel measured: -inf bounds and labels every series shares --------------------------------


def test_the_command_measured_keeps_the_sign_of_a_lower_bound_and_says_labels_only_shared(tmp_path, capsys):
    (tmp_path / "zero.prom").write_text(
        "# TYPE vllm:nixl_xfer_time_seconds histogram\n"
        'vllm:nixl_xfer_time_seconds_bucket{le="0.0"} 5\nvllm:nixl_xfer_time_seconds_bucket{le="0.01"} 8\n'
        'vllm:nixl_xfer_time_seconds_bucket{le="+Inf"} 10\nvllm:nixl_xfer_time_seconds_count 10\n'
        "vllm:nixl_xfer_time_seconds_sum 0.05\n"
    )
    assert main(["measured", str(tmp_path / "zero.prom")]) == 0
    out = capsys.readouterr().out
    assert "[inf, 0]" not in out, out
    (tmp_path / "lbl.prom").write_text('# TYPE g gauge\ng 1\n# TYPE h gauge\nh{model_name="m"} 2\n')
    assert main(["measured", str(tmp_path / "lbl.prom")]) == 0
    assert "every one labelled" not in capsys.readouterr().out.splitlines()[0]


# --- 12. a JSON-lines file with a BOM is read, as a CSV with one is ----------------------------------------


def test_a_json_lines_table_with_a_bom_is_read(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"nbytes": 1000000, "measured_ms": 0.07}\n{"nbytes": 4000000, "measured_ms": 0.22}\n'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert perfmodel.calibrate(path).report.points == 2


# --- 13. smaller gaps ----------------------------------------------------------------------------------------


def test_a_one_row_table_names_the_file_not_fit_link(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("nbytes,measured_ms\n1000000,0.07\n")
    with pytest.raises(InputError) as raised:
        perfmodel.calibrate(path)
    assert str(raised.value).startswith(f"{path}:") and "fit_link" not in str(raised.value), str(raised.value)


def test_an_unknown_compare_link_names_compare(tmp_path, capsys):
    path = tmp_path / "ok.csv"
    path.write_text("nbytes,measured_ms\n1000000,0.1\n4000000,0.3\n16000000,1.0\n")
    assert (
        main(["calibrate", str(path), "--name", "a", "--out", str(tmp_path / "o"), "--compare", "ib-ndr", "nosuch"])
        == 2
    )
    err = capsys.readouterr().err
    assert "--compare" in err and "--link" not in err.split("Fix")[0], err


def test_left_out_rows_are_named_by_their_lines(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("nbytes,measured_ms\n1000000,0.1\n,0.2\n4000000,0.3\n16000000,\n")
    with pytest.warns(UserWarning, match=r"left out 2 rows.*lines 3 and 5"):
        perfmodel.calibrate(path)


def test_an_empty_benchmark_file_is_not_called_json(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("")
    with pytest.raises(InputError) as raised:
        perfmodel.read_benchmark(path)
    assert "JSON, but" not in str(raised.value), str(raised.value)


def test_calibrate_help_lists_perftest_s_gigabits(capsys):
    with contextlib.suppress(SystemExit):
        main(["calibrate", "--help"])
    assert "BW average[Gb/sec]" in " ".join(capsys.readouterr().out.split())


def test_a_latency_shorter_than_its_ttft_is_refused(tmp_path):
    result = {"backend": "vllm", "endpoint_type": "vllm", "request_rate": 4.0, "max_concurrency": None,
              "duration": 2.0, "completed": 2, "input_lens": [1024, 4096], "output_lens": [128, 128],
              "ttfts": [0.12, 0.31], "latencies": [0.05, 0.9], "errors": ["", ""]}  # fmt: skip
    path = tmp_path / "short.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match=r"request 0"):
        perfmodel.read_benchmark(path)
