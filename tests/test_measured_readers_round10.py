"""The readers of measured files, round 10: ``perfmodel connectors --fit`` refuses durations and booleans as
``calibrate`` does (never nanoseconds taken as ms, never true as 1 ms); perftest's ``[MiB/sec]`` (perftest 4.5
and later) is read as its ``[MB/sec]`` is; compressed perftest output is recognised; a boolean token count in
``delay_file`` is named at its file, line and column; a ``;``-separated (Excel) CSV is said to be one; and two
size or time columns that differ only in case are refused, as two of other names are."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError
from perfmodel.calibration import calibrate, read_measurements
from perfmodel.cli import main
from perfmodel.io import delay_file

SEP = "-" * 87 + "\n"
TOKENS = np.array([1024, 4096, 16384, 32768])
LINK, MODEL = "ib-ndr", "llama-3.1-8b"


def _quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def _err_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert "fitted" not in captured.out
    return lines[0]


# --- F8: connectors --fit reads numbers as calibrate does ----------------------------------------------------


def _handoffs_ms() -> np.ndarray:
    """Each handoff's time: the transport's plus 2 ms of connector."""
    return np.asarray(perfmodel.handoff_delay_ms(TOKENS, LINK, MODEL), dtype=float) + 2.0


def _fit(path: Path) -> int:
    return main(["connectors", "--fit", str(path), "--link", LINK, "--model", MODEL])


def test_connectors_fit_of_plain_ms_still_fits_the_2_ms_exactly(tmp_path, capsys):
    table = tmp_path / "conn.parquet"
    pd.DataFrame({"num_input_tokens": TOKENS, "measured_ms": _handoffs_ms()}).to_parquet(table)
    assert _fit(table) == 0
    assert "2 ms per request; 4 points, max error 0.0%" in capsys.readouterr().out


def test_connectors_fit_refuses_a_parquet_duration_column(tmp_path, capsys):
    table = tmp_path / "conn_td.parquet"
    durations = pd.to_timedelta(_handoffs_ms(), unit="ms")
    pd.DataFrame({"num_input_tokens": TOKENS, "measured_ms": durations}).to_parquet(table)
    assert _fit(table) == 2
    line = _err_line(capsys)
    assert f"{table}, row 1: column 'measured_ms' holds durations" in line, line
    assert "not plain numbers. Fix: divide durations by pd.Timedelta(1, 'ms')" in line, line


def test_connectors_fit_refuses_a_json_lines_boolean_time_at_its_line(tmp_path, capsys):
    table = tmp_path / "conn_bool.jsonl"
    rows = [{"num_input_tokens": int(t), "measured_ms": float(m)} for t, m in zip(TOKENS, _handoffs_ms())]
    rows.append({"num_input_tokens": 100, "measured_ms": True})
    table.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert _fit(table) == 2
    line = _err_line(capsys)
    assert f"{table}, line 5: column 'measured_ms' holds booleans (true), not plain numbers" in line, line
    assert "Fix: give plain numbers in the column" in line, line


def test_connectors_fit_refuses_a_boolean_token_count_too(tmp_path, capsys):
    table = tmp_path / "tok_bool.jsonl"
    table.write_text('{"num_input_tokens": 1024, "measured_ms": 3.0}\n{"num_input_tokens": true, "measured_ms": 4.0}\n')
    assert _fit(table) == 2
    assert f"{table}, line 2: column 'num_input_tokens' holds booleans (true)" in _err_line(capsys)


# --- F4: perftest 4.5's [MiB/sec] ------------------------------------------------------------------------------


def _perftest(unit: str) -> str:
    return (
        SEP + f" #bytes     #iterations    BW peak[{unit}/sec]    BW average[{unit}/sec]   MsgRate[Mpps]\n"
        " 65536      5000             11030.78            11030.45\t\t     0.176487\n"
        " 1048576    5000             15128.13            15121.79              0.015122\n" + SEP
    )


def test_perftest_mib_per_second_is_read_as_2_to_the_20_bytes_per_second(tmp_path):
    path = tmp_path / "mib.txt"
    path.write_text(_perftest("MiB"))
    m = _quiet(calibrate, path).measurements
    assert m.nbytes.tolist() == [65536.0, 1048576.0]
    assert m.measured_ms.tolist() == [65536 / (11030.45 * 2.0**20) * 1000, 1048576 / (15121.79 * 2.0**20) * 1000]
    assert m.places == ("line 3", "line 4")
    old = tmp_path / "mb.txt"
    old.write_text(_perftest("MB"))  # perftest before 4.5: the same unit, under another name
    assert _quiet(calibrate, old).report == _quiet(calibrate, path).report


def test_the_shipped_perftest_run_reads_the_same_under_mib(tmp_path):
    text = perfmodel.datasets.path("perftest-ib-hdr").read_text()
    renamed = tmp_path / "hdr_mib.txt"
    renamed.write_text(text.replace("[MB/sec]", "[MiB/sec]"))
    shipped = _quiet(calibrate, "dataset:perftest-ib-hdr", fit_from_bytes=0)  # (all sizes: a fit far from some)
    ours = _quiet(calibrate, renamed, fit_from_bytes=0)
    assert shipped.report == ours.report and ours.report.points == 23
    np.testing.assert_array_equal(shipped.measurements.measured_ms, ours.measurements.measured_ms)
    mib_s = ours.measurements.nbytes / (ours.measurements.measured_ms / 1000) / 2**20
    assert mib_s[-1] == pytest.approx(23240.68, rel=1e-12)


def test_a_throughput_unit_perftest_does_not_print_is_still_refused(tmp_path):
    path = tmp_path / "gib.txt"
    path.write_text(_perftest("GiB"))
    with pytest.raises(InputError, match=r"column 'BW average\[GiB/sec\]' has a unit calibrate cannot tell"):
        calibrate(path)


# --- F5: compressed perftest output --------------------------------------------------------------------------


def _zstd(path: Path, data: bytes) -> None:
    import pyarrow as pa

    with pa.output_stream(str(path), compression="zstd") as out:
        out.write(data)


WRITERS = {
    ".gz": lambda path, data: path.write_bytes(gzip.compress(data)),
    ".bz2": lambda path, data: path.write_bytes(bz2.compress(data)),
    ".xz": lambda path, data: path.write_bytes(lzma.compress(data)),
    ".zst": _zstd,
}


@pytest.mark.parametrize("suffix", sorted(WRITERS))
def test_compressed_perftest_output_is_read_as_the_plain_file(tmp_path, suffix):
    plain = perfmodel.datasets.path("perftest-ib-hdr")
    packed = tmp_path / f"write_bw.txt{suffix}"
    WRITERS[suffix](packed, plain.read_bytes())
    frame, places, where = read_measurements(packed)
    expected, expected_places, _ = read_measurements(plain)
    pd.testing.assert_frame_equal(frame, expected)
    assert places == expected_places and where == str(packed)
    assert calibrate(packed).report == calibrate(plain).report


def test_a_compressed_text_that_is_no_perftest_output_says_so_truthfully(tmp_path):
    packed = tmp_path / "notes.txt.gz"
    packed.write_bytes(gzip.compress(b"nbytes measured_ms\n1 2\n"))
    with pytest.raises(InputError) as raised:
        calibrate(packed)
    message = str(raised.value)
    assert message.startswith(f"{packed}: cannot tell the format from '.txt.gz'"), message
    assert "and it is not perftest's output (no '#bytes' header)" in message, message


# --- F7: delay_file names a boolean token count at its file, line and column ---------------------------------


def _delay(source: Path, target: Path) -> int:
    return delay_file(source, target, kv_bytes_per_token=1e6, kv_transfer_bandwidth=1.0, progress=False)


def test_delay_file_names_a_json_lines_boolean_token_count(tmp_path):
    source = tmp_path / "tokbool.jsonl"
    source.write_text('{"num_input_tokens": 256}\n\n{"num_input_tokens": true}\n')
    with pytest.raises(InputError) as raised:
        _delay(source, tmp_path / "o.jsonl")
    message = str(raised.value)
    assert message.startswith(f"{source}, line 3, column 'num_input_tokens': true is a boolean, not a token count")
    assert "1 and 0" not in message and "Fix:" in message
    assert not (tmp_path / "o.jsonl").exists()


def test_delay_file_names_a_parquet_boolean_token_count_by_its_row(tmp_path):
    source = tmp_path / "tokbool.parquet"
    pd.DataFrame({"num_input_tokens": [True, False]}).to_parquet(source)
    with pytest.raises(InputError, match=r"tokbool.parquet, row 1, column 'num_input_tokens': True is a boolean"):
        _delay(source, tmp_path / "o.csv")


def test_the_delay_command_names_a_boolean_token_count(tmp_path, capsys):
    source = tmp_path / "tokbool.jsonl"
    source.write_text('{"num_input_tokens": true}\n{"num_input_tokens": 256}\n')
    words = ["delay", str(source), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1"]
    assert main(words) == 2
    err = capsys.readouterr().err
    assert "line 1, column 'num_input_tokens': true is a boolean, not a token count" in err, err


def test_delay_file_still_reads_json_lines_token_counts_exactly(tmp_path):
    source, target = tmp_path / "tok.jsonl", tmp_path / "o.jsonl"
    source.write_text('{"num_input_tokens": 256, "flag": true}\n{"num_input_tokens": 1024, "flag": false}\n')
    assert _delay(source, target) == 2
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    expected = perfmodel.handoff_delay_ms([256, 1024], kv_bytes_per_token=1e6, kv_transfer_bandwidth=1.0)
    assert [r["handoff_delay_ms"] for r in rows] == expected.tolist() == [256.0, 1024.0]
    assert [r["flag"] for r in rows] == [True, False]


# --- F9: a ';'-separated CSV is said to be one ---------------------------------------------------------------


def _excel(path: Path, header: str, *rows: str, sep: str = ";") -> Path:
    path.write_bytes(("\ufeff" + "\r\n".join([header.replace(",", sep), *rows]) + "\r\n").encode())
    return path


def test_calibrate_says_a_semicolon_separated_csv_is_one(tmp_path):
    path = _excel(tmp_path / "excel.csv", "nbytes,measured_ms", "1048576;0,05", "16777216;0,7")
    with pytest.raises(InputError) as raised:
        calibrate(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: separated by ';', not by commas"), message
    assert "save it as CSV with commas between fields and decimal points" in message, message
    assert "a comma too many" not in message


def test_delay_and_read_trace_say_a_semicolon_separated_csv_is_one(tmp_path):
    path = _excel(tmp_path / "dexcel.csv", "num_input_tokens,x", "128;1,5")
    with pytest.raises(InputError, match=r"dexcel.csv: separated by ';', not by commas"):
        _delay(path, tmp_path / "o.csv")
    trace = _excel(tmp_path / "az_excel.csv", "TIMESTAMP,ContextTokens,GeneratedTokens", "16/11/2023 18:17;4808;10")
    with pytest.raises(InputError, match=r"az_excel.csv: separated by ';', not by commas"):
        perfmodel.read_trace(trace)


def test_a_tab_separated_table_is_said_to_be_one(tmp_path):
    path = _excel(tmp_path / "t.csv", "nbytes,measured_ms", "1048576\t0.05", sep="\t")
    with pytest.raises(InputError, match=r"t.csv: separated by tabs, not by commas"):
        calibrate(path)


def test_plain_csv_with_a_semicolon_inside_a_cell_still_reads_exactly(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text('nbytes,measured_ms,notes\n1048576,0.05,"a;b"\n16777216,0.7,c\n')
    m = _quiet(calibrate, path).measurements
    assert m.nbytes.tolist() == [1048576.0, 16777216.0] and m.measured_ms.tolist() == [0.05, 0.7]
    single = tmp_path / "one.csv"  # (one column, no separator at all: still a CSV table)
    single.write_text("num_input_tokens\n256\n")
    assert _delay(single, tmp_path / "o.csv") == 1


# --- F10: two size or time columns that differ only in case ----------------------------------------------------


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("nbytes,Measured_us,measured_ms\n1048576,50,0.05\n16777216,700,0.7\n",
         "has both Measured_us and measured_ms: which one was measured?"),
        ("nbytes,NBYTES,measured_ms\n1048576,1,0.05\n16777216,2,0.7\n",
         "has both nbytes and NBYTES: which one is each transfer's bytes?"),
        ("nbytes,#BYTES,measured_ms\n1048576,1,0.05\n16777216,2,0.7\n",
         "has both nbytes and #BYTES: which one is each transfer's bytes?"),
        ("nbytes,measured_gb_s,Measured_GB_s\n1048576,20,21\n16777216,20,21\n",
         "has both measured_gb_s and Measured_GB_s: which one was measured?"),
    ],
)  # fmt: skip
def test_columns_that_differ_only_in_case_are_refused_with_the_documented_question(tmp_path, text, phrase):
    path = tmp_path / "case.csv"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        calibrate(path)
    assert str(raised.value).startswith(f"{path}: {phrase}"), str(raised.value)
    frame = pd.read_csv(path)
    with pytest.raises(InputError, match=phrase.replace("?", r"\?")):
        calibrate(frame)


def test_a_known_column_in_another_case_alone_is_named(tmp_path):
    path = tmp_path / "upper.csv"
    path.write_text("nbytes,MEASURED_MS\n1048576,0.05\n16777216,0.7\n")
    with pytest.raises(InputError, match=r"column 'MEASURED_MS' is measured_ms in another case.*rename it measured_ms"):
        calibrate(path)


def test_perftest_s_latency_pair_and_other_columns_are_still_read(tmp_path):
    path = tmp_path / "lat.csv"
    path.write_text("#bytes,t_typical[usec],t_avg[usec],Measured by\n65536,23.09,23.2,me\n1048576,100.5,101,me\n")
    m = _quiet(calibrate, path).measurements
    assert m.nbytes.tolist() == [65536.0, 1048576.0] and m.measured_ms.tolist() == [23.09e-3, 100.5e-3]


@pytest.mark.parametrize(
    ("measured", "said"),
    [
        (lambda ms: pd.Series(pd.to_timedelta(ms, unit="ms")), "got durations where plain numbers were expected"),
        (lambda ms: pd.to_timedelta(ms, unit="ms").to_numpy(), "got durations.*divide durations by pd.Timedelta"),
        (lambda ms: pd.Series(pd.to_datetime(ms, unit="ms")), "got dates where plain numbers were expected"),
        (lambda ms: pd.Series([True, *ms[1:]], dtype=object), "got booleans where plain numbers were expected"),
    ],
)
def test_fit_connector_refuses_durations_dates_and_booleans(measured, said):
    """A duration was read as its nanoseconds: a 2 ms cost fitted as 6.2e6 ms."""
    tokens = np.array([1024, 4096, 16384, 32768])
    wire = np.asarray(perfmodel.handoff_delay_ms(tokens, "ib-ndr", "llama-3.1-8b"))
    with pytest.raises(InputError, match=f"^measured_ms: {said}"):
        perfmodel.fit_connector(measured(wire + 2.0), wire)
    assert perfmodel.fit_connector(wire + 2.0, wire).request_ms == pytest.approx(2.0, rel=1e-12)
