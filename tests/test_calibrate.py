"""perfmodel.calibrate: tables of measurements -> fitted links. Bad values at their line of the file, taken
names refused, never above the line rate it is told, perftest's own output read as is."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import InputError, Link
from perfmodel.calibration import calibrate, read_measurements
from perfmodel.cli import main

DATA = Path(__file__).parent / "data"


@pytest.fixture
def presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config" / "presets.json"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- places: a bad value at its line of the file ------------------------------------------------------


@pytest.mark.parametrize(
    "text, line, phrase",
    [
        ("nbytes,measured_ms\n1000,0.5\n2000,abc\n", 3, "column 'measured_ms' holds 'abc', not a number"),
        ("# a comment\n# another\nnbytes,measured_ms\n1000,0.5\n2000,abc\n", 5, "'abc', not a number"),
        ("nbytes,measured_ms\n1000,\n,0.4\n2000,0.5\n3000,-1\n", 5, "the time is -1.0, not a finite number > 0"),
        ("nbytes,measured_ms\n1000,0.5\n\n# gap\n0,0.7\n", 5, "the size is 0.0"),
        ("nbytes,measured_us\n1000,5\n2000,inf\n", 3, "the time is inf"),
        ("nbytes,measured_ms\n1000,0.5\n2000,0.6,7\n", 3, "3 fields where the header has 2"),
        ('nbytes,measured_ms,notes\n1000,0.5,"two\nlines"\n2000,x,\n', 4, "'x', not a number"),
    ],
)
def test_a_bad_value_is_reported_at_its_line_of_the_file(tmp_path, text, line, phrase):
    table = _write(tmp_path / "m.csv", text)
    with pytest.raises(InputError) as raised:
        calibrate(table)
    assert f"m.csv, line {line}" in str(raised.value) and phrase in str(raised.value), str(raised.value)


def test_a_bad_value_of_a_json_lines_or_a_frame_is_reported_at_its_line_or_label(tmp_path):
    table = _write(
        tmp_path / "m.jsonl", '{"nbytes": 1000, "measured_ms": 0.5}\n\n{"nbytes": 2000, "measured_ms": "slow"}\n'
    )
    with pytest.raises(InputError, match=r"m.jsonl, line 3: column 'measured_ms' holds 'slow'"):
        calibrate(table)
    frame = pd.DataFrame({"nbytes": [1e3, 2e3, 3e3], "measured_ms": [0.5, np.nan, -2.0]}, index=[10, 20, 30])
    with pytest.raises(InputError, match=r"row 30: the time is -2.0"):
        calibrate(frame)


def test_the_cli_names_the_file_and_line(tmp_path, capsys):
    table = _write(tmp_path / "m.csv", "# perftest\nnbytes,measured_ms\n1000,0.5\n2000,abc\n")
    assert main(["calibrate", str(table), "--name", "x", "--out", str(tmp_path / "c")]) == 2
    error = capsys.readouterr().err
    assert "m.csv, line 4: column 'measured_ms' holds 'abc', not a number" in error and "\n" not in error.strip()
    assert not (tmp_path / "c").exists()


def test_an_empty_model_cell_is_a_clear_error(tmp_path, capsys):
    table = _write(
        tmp_path / "e2e.csv",
        "num_input_tokens,model,measured_ms\n1000,llama-3.1-8b,1.0\n4000,,3.0\n16000,llama-3.1-8b,9.0\n",
    )
    with pytest.raises(InputError, match=r"e2e.csv, line 3: the model cell is empty"):
        calibrate(table)
    assert main(["calibrate", str(table), "--name", "x", "--out", str(tmp_path / "c")]) == 2
    assert "line 3: the model cell is empty" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"line 2: the model column says 'llama-3.1-8b', but the model given"):
        calibrate(table, model="llama-3.1-70b")


def test_tokens_become_the_bytes_and_messages_of_their_setup():
    tokens = np.array([1000, 4000, 16000, 64000])
    truth = Link("truth", 40.0, per_message_ms=0.0005)
    measured = truth.transfer_ms(
        perfmodel.kv_bytes("llama-3.1-70b", tokens, tp=8, decode_tp=2),
        messages=perfmodel.kv_messages("llama-3.1-70b", tokens, 16),
    )
    fitted = calibrate(
        pd.DataFrame({"num_input_tokens": tokens, "measured_ms": measured}),
        model="llama-3.1-70b",
        tp=8,
        decode_tp=2,
        block_size=16,
        line_rate_gb_s=50.0,
    )
    assert fitted.link.bandwidth_gb_s == pytest.approx(40.0) and fitted.link.per_message_ms == pytest.approx(5e-4)
    with pytest.raises(InputError, match="gives bytes"):
        calibrate(pd.DataFrame({"nbytes": [1e6, 1e7], "measured_ms": [1.0, 2.0]}), model="llama-3.1-8b")


# --- taken names: refused unless replace --------------------------------------------------------------


def test_calibrating_under_a_taken_name_is_refused_and_its_fit_never_replaced(tmp_path, presets, capsys):
    first = _write(tmp_path / "a.csv", "nbytes,measured_ms\n1e6,0.1\n1e7,0.3\n1e8,2.3\n")
    other = _write(tmp_path / "b.csv", "nbytes,measured_ms\n1e6,1.1\n1e7,1.3\n1e8,9.3\n")
    calibrate(first, name="ours", save=True)
    saved = presets.read_text()
    for name in ("ours", "OURS", " Ours"):
        with pytest.raises(InputError, match="exists already"):
            calibrate(other, name=name, save=True)
        assert main(["calibrate", str(other), "--name", name, "--save", "--out", str(tmp_path / "c")]) == 2
        assert "exists already" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert presets.read_text() == saved  # the saved fit, untouched
    assert calibrate(other, name="ours").link.bandwidth_gb_s != perfmodel.get_link("ours").bandwidth_gb_s
    assert main(["calibrate", str(other), "--name", "Ours", "--save", "--replace", "--out", str(tmp_path / "c")]) == 0
    assert perfmodel.get_link("ours").fit == calibrate(other, name="ours").report
    assert main(["calibrate", str(other), "--name", "x", "--replace", "--out", str(tmp_path / "d")]) == 2


def test_calibrate_saves_only_when_asked(tmp_path, presets, capsys):
    table = _write(tmp_path / "a.csv", "nbytes,measured_ms\n1e6,0.1\n1e7,0.3\n1e8,2.3\n")
    assert main(["calibrate", str(table), "--name", "ours", "--out", str(tmp_path / "c")]) == 0
    assert not presets.exists() and "--save" in capsys.readouterr().out
    calibrate(table, name="ours")
    assert not presets.exists()
    assert main(["calibrate", str(table), "--name", "ours", "--save", "--out", str(tmp_path / "c")]) == 0
    assert json.loads(presets.read_text())["links"]["ours"]["saved_by"] == "perfmodel"


# --- never above line rate ---------------------------------------------------------------------------


def _plateau() -> pd.DataFrame:
    """A perftest-style throughput table of a 400G NIC (50 GB/s) measured up to 4 MiB: 10 us of fixed cost, and
    a bandwidth that the measurements never reach (52.84 GB/s, as a fit of such a table gives): the best
    throughput measured is 46.9 GB/s."""
    sizes = 2.0 ** np.arange(16, 23)
    measured_ms = 0.010 + sizes / 52.84e6
    return pd.DataFrame({"nbytes": sizes, "measured_gb_s": sizes / (measured_ms * 1e6)})


def test_a_line_rate_caps_the_fitted_bandwidth():
    table = _plateau()
    with pytest.warns(UserWarning, match="above the best measured throughput"):
        free = calibrate(table)
    assert free.link.bandwidth_gb_s > 50.0 and free.warnings  # above every measurement, and said
    for capped in (
        calibrate(table, line_rate_gb_s=50.0),
        calibrate(table, nic="ib-ndr"),
        calibrate(table, nic="roce-400g"),
    ):
        assert capped.link.bandwidth_gb_s <= 50.0 and capped.warnings == () and capped.line_rate_gb_s == 50.0
        assert "line rate" in capped.report.note
    with pytest.raises(InputError, match="give one of them"):
        calibrate(table, line_rate_gb_s=50.0, nic="ib-ndr")
    with pytest.warns(UserWarning, match="above the line rate given"):
        calibrate(table, line_rate_gb_s=25.0)  # faster than the NIC: the units or the NIC are wrong


def test_the_cli_caps_and_warns_in_one_line(tmp_path, capsys):
    table = tmp_path / "plateau.csv"
    _plateau().to_csv(table, index=False)
    assert main(["calibrate", str(table), "--name", "x", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert "perfmodel calibrate: warning:" in err and "above the best measured throughput" in err, err
    for flags in (["--line-rate-gb-s", "50"], ["--nic", "ib-ndr"]):
        assert main(["calibrate", str(table), "--name", "x", *flags, "--out", str(tmp_path / "c")]) == 0
        out, err = capsys.readouterr()
        assert "warning" not in err and "held at the line rate, 50 GB/s" in out, (out, err)
    assert main(["calibrate", str(table), "--name", "x", "--line-rate-gb-s", "0", "--out", str(tmp_path / "c")]) == 2
    assert (
        main(
            [
                "calibrate",
                str(table),
                "--name",
                "x",
                "--line-rate-gb-s",
                "50",
                "--nic",
                "ib-ndr",
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 2
    )


def _reference_fit(nbytes: np.ndarray, measured: np.ndarray, cap: float) -> float:
    """The least relative squared error of latency + bytes / bandwidth with latency >= 0 and bandwidth <= cap, by
    a fine search over the seconds per byte (the latency solved exactly at each)."""
    best = np.inf
    floor = 1e-6 / cap
    for ms_per_byte in np.concatenate([[floor], floor * np.geomspace(1, 1e3, 20_001)]):
        rest = 1 - ms_per_byte * nbytes / measured
        latency = max(0.0, float(np.sum(rest / measured) / np.sum(1 / measured**2)))
        best = min(best, float(np.sum((rest - latency / measured) ** 2)))
    return best


@pytest.mark.filterwarnings("ignore:the fit is far:UserWarning", "ignore:the best measured throughput:UserWarning")
@settings(max_examples=40, deadline=None)
@given(
    bandwidth=st.floats(5.0, 200.0),
    latency=st.floats(0.0, 0.5),
    cap=st.floats(5.0, 200.0),
    noise=st.lists(st.floats(-0.05, 0.05), min_size=6, max_size=6),
)
def test_a_capped_fit_is_the_best_fit_below_the_line_rate(bandwidth, latency, cap, noise):
    nbytes = np.geomspace(1e4, 1e9, 6)
    measured = (latency + nbytes / (bandwidth * 1e6)) * (1 + np.array(noise))
    link = perfmodel.fit_link(nbytes, measured, line_rate_gb_s=cap)
    assert link.bandwidth_gb_s <= cap
    ours = float(np.sum((1 - link.transfer_ms(nbytes) / measured) ** 2))
    assert ours <= _reference_fit(nbytes, measured, cap) + 1e-9
    free = perfmodel.fit_link(nbytes, measured)
    if free.bandwidth_gb_s < cap * (1 - 1e-6):  # the bound does not bind: the same fit
        assert link.bandwidth_gb_s == pytest.approx(free.bandwidth_gb_s, rel=1e-6)
        assert link.latency_ms == pytest.approx(free.latency_ms, rel=1e-6, abs=1e-12)


def test_no_line_rate_keeps_the_fit_bit_for_bit():
    nbytes = np.array([1e5, 1e6, 1e7, 1e8, 1e9])
    measured = 0.2 + nbytes / 40e9 * 1000 * np.array([1.01, 0.99, 1.0, 1.02, 0.98])
    assert perfmodel.fit_link(nbytes, measured) == perfmodel.fit_link(nbytes, measured, line_rate_gb_s=None)


# --- perftest's own output ----------------------------------------------------------------------------


@pytest.mark.parametrize("nic", [None, "ib-hdr"])
def test_the_perftest_fit_predicts_the_sizes_a_handoff_moves(nic):
    """perftest's 2-byte to 32 KiB messages are not fitted (a per-message rate limits them): the fit of the
    rest predicts 1 MiB and 8 MiB within 3%, with or without the NIC; a fit of every size does not."""
    fitted = calibrate("dataset:perftest-ib-hdr", nic=nic)
    by_size = fitted.errors_by_size().set_index("nbytes")
    assert fitted.report.points == int(by_size["fitted"].sum()) == 8
    assert by_size.index[by_size["fitted"]].min() == 65536 and not by_size["fitted"][by_size.index < 65536].any()
    assert (by_size.loc[[2.0**20, 2.0**23], "error"].abs() < 0.03).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        every_size = calibrate("dataset:perftest-ib-hdr", nic=nic, fit_from_bytes=0)
    assert every_size.report.points == 23
    assert (every_size.errors_by_size().set_index("nbytes").loc[[2.0**20], "error"].abs() > 0.03).all()


def test_errors_by_size_are_the_links_own_predictions_for_every_row():
    fitted = calibrate(DATA / "ib_write_bw_hdr.txt")
    m, table = fitted.measurements, fitted.errors_by_size("ib-hdr")
    want = np.array([Link("ib-hdr", 25.0).transfer_ms(b, 0, 0) for b in m.nbytes], dtype=float)
    assert list(table.columns) == ["nbytes", "measured_ms", "predicted_ms", "error", "fitted"]
    assert table["predicted_ms"].tolist() == want.tolist() and table["nbytes"].tolist() == m.nbytes.tolist()
    assert table["error"].tolist() == ((want - m.measured_ms) / m.measured_ms).tolist()
    assert np.abs(table["error"]).tolist() == fitted.relative_errors("ib-hdr").tolist()
    assert table["fitted"].tolist() == (m.nbytes >= 65536).tolist()


@pytest.mark.filterwarnings("ignore:the fit is far:UserWarning", "ignore:the best measured throughput:UserWarning")
def test_the_default_fit_is_fit_link_over_the_transfers_of_64_kib_and_more():
    fitted = calibrate(DATA / "ib_write_bw_hdr.txt")
    m = fitted.measurements
    kept = m.nbytes >= 65536
    assert fitted.link == fit_link_of(m.nbytes[kept], m.measured_ms[kept])
    assert calibrate(DATA / "ib_write_bw_hdr.txt", fit_from_bytes=0).link == fit_link_of(m.nbytes, m.measured_ms)


def fit_link_of(nbytes, measured_ms):
    return perfmodel.fit_link(nbytes, measured_ms, name="fitted")


@pytest.mark.parametrize(
    "value, phrase",
    [
        (-1, "fit_from_bytes -1 is not a finite number >= 0"),
        (float("nan"), "fit_from_bytes nan (not a number) is not a finite number >= 0"),
        (float("inf"), "fit_from_bytes inf is not a finite number >= 0"),
        (True, "fit_from_bytes True is a boolean, not a number"),
        ("64k", "fit_from_bytes '64k'"),
        (5e6, ("has 1 transfer of 5,000,000 bytes or more (fit_from_bytes, the sizes a KV handoff moves), and a "
               "fit needs 2; its sizes are 2 to 8,388,608 bytes")),
    ],
)  # fmt: skip
def test_a_fit_from_bytes_that_leaves_too_little_to_fit_is_refused_in_one_line(value, phrase):
    assert calibrate(DATA / "ib_write_bw_hdr.txt", fit_from_bytes=4e6).report.points == 2  # 4 and 8 MiB: a fit
    with pytest.raises(InputError) as raised:
        calibrate(DATA / "ib_write_bw_hdr.txt", fit_from_bytes=value)
    assert phrase in str(raised.value) and "Fix:" in str(raised.value) and "\n" not in str(raised.value)


def test_what_the_fit_cannot_vouch_for_is_judged_on_the_transfers_fitted():
    """A fast unfitted row (below fit_from_bytes) neither hides the extrapolation warning nor raises a line-rate one."""
    big = pd.DataFrame({"nbytes": [1e6, 2e6, 4e6], "measured_ms": [0.05, 0.09, 0.17]})
    odd = pd.concat([pd.DataFrame({"nbytes": [32768.0], "measured_ms": [0.0003]}), big], ignore_index=True)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        alone, with_small = calibrate(big), calibrate(odd)
        capped = calibrate(odd, line_rate_gb_s=30.0)
    assert len(alone.warnings) == 1 and with_small.warnings == alone.warnings and capped.warnings == ()
    assert with_small.link == alone.link


def test_the_shipped_perftest_run_is_the_tests_copy():
    shipped, places, _ = read_measurements("dataset:perftest-ib-hdr")
    ours, our_places, _ = read_measurements(DATA / "ib_write_bw_hdr.txt")
    pd.testing.assert_frame_equal(shipped, ours)
    assert places == our_places
    assert perfmodel.datasets.load("perftest-ib-hdr").equals(ours.apply(pd.to_numeric))


def test_the_command_prints_every_size_and_marks_those_not_fitted(tmp_path, capsys):
    assert main(["calibrate", "dataset:perftest-ib-hdr", "--name", "x", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "(15 smaller transfers, below 65,536 bytes, are not fitted: --fit-from-bytes 0 fits every size)" in out
    rows = [
        line.removeprefix(line.split()[0] + " " + line.split()[1])
        for line in out.splitlines()
        if line.startswith("line ")
    ]
    assert len(rows) == 23 and sum("(not fitted)" in row for row in rows) == 15
    assert rows[-1].split()[0] == "8,388,608" and "(not fitted)" not in rows[-1]
    assert main(["calibrate", "dataset:perftest-ib-hdr", "--name", "x", "--fit-from-bytes", "0",
                 "--out", str(tmp_path / "b")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "not fitted" not in out and "23 points" in out
    assert main(["calibrate", "dataset:perftest-ib-hdr", "--name", "x", "--fit-from-bytes", "-1"]) == 2
    assert "'-1' is not a finite number >= 0" in capsys.readouterr().err


def test_perftest_text_and_its_csv_form_are_read_as_is():
    text, places, _ = read_measurements(DATA / "ib_write_bw_hdr.txt")
    assert len(text) == 23 and places[0] == "line 46" and places[-1] == "line 68"  # not the row printed again
    from_text = calibrate(DATA / "ib_write_bw_hdr.txt", fit_from_bytes=0)
    from_csv = calibrate(DATA / "ib_write_bw_hdr.csv", fit_from_bytes=0)
    assert from_text.report == from_csv.report and from_text.report.points == 23
    m = from_text.measurements
    mib_s = m.nbytes / (m.measured_ms / 1000) / 2**20  # perftest's MB/sec is MiB/s
    assert mib_s[-1] == pytest.approx(23240.68) and mib_s[0] == pytest.approx(5.30)
    capped = calibrate(DATA / "ib_write_bw_hdr.txt", line_rate_gb_s=25.0, fit_from_bytes=0)  # HDR: 200 Gb/s
    assert from_text.link.bandwidth_gb_s > 25.0 >= capped.link.bandwidth_gb_s


def test_perftest_latency_output_and_gbits_are_read(tmp_path):
    lat = _write(
        tmp_path / "lat.txt",
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
        "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
        " 2       1000          0.85           4.10         0.89     \t       0.91        \t0.05\t\t1.10 "
        "\t\t4.10\n 4096    1000          4.90           8.20         5.03     \t       5.07        \t0.06\t\t"
        "5.40 \t\t8.20\n 65536   1000          22.9           30.1         23.09     \t       23.2      \t0.1"
        "\t\t24.0 \t\t30.1\n---------------------------------------------------------------------------\n",
    )
    m = calibrate(lat, fit_from_bytes=0).measurements
    assert list(m.measured_ms * 1000) == pytest.approx([0.89, 5.03, 23.09])  # t_typical, the median
    gbits = _write(
        tmp_path / "g.txt",
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
        "MsgRate[Mpps]\n 65536      5000           95.00              90.00              0.17\n"
        " 1048576    5000           97.00              96.00              0.011\n",
    )
    m = calibrate(gbits).measurements
    assert m.nbytes[0] / (m.measured_ms[0] / 1000) == pytest.approx(90e9 / 8)
    odd = _write(tmp_path / "odd.csv", "#bytes,BW average[KB/sec]\n65536,9000\n")
    with pytest.raises(InputError, match=r"'BW average\[KB/sec\]' has a unit calibrate cannot tell"):
        calibrate(odd)


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("nbytes,measured_ms,measured_ms\n1,2,3\n", "the column 'measured_ms' appears twice"),
        ("nbytes,measured_ms\n", "has no row with both a size and a measurement"),
        ("nbytes,measured_ms\n1000,\n", "has no row with both a size and a measurement"),
        ("", "holds no table"),
        ("bytes,measured_ms\n1,2\n", "needs an nbytes column"),
        ("nbytes,time\n1,2\n", "needs a time column"),
        ("nbytes,measured_gbps\n1,2\n", "'measured_gbps' has a unit calibrate cannot tell"),
    ],
)
def test_tables_calibrate_cannot_use_are_refused_in_one_line(tmp_path, text, phrase):
    with pytest.raises(InputError) as raised:
        calibrate(_write(tmp_path / "m.csv", text))
    assert phrase in str(raised.value) and "m.csv" in str(raised.value), str(raised.value)


def test_frames_folders_and_unknown_formats_are_refused_in_one_line(tmp_path):
    twice = pd.DataFrame([[1e6, 1.0, 2.0], [1e7, 2.0, 3.0]], columns=["nbytes", "measured_ms", "measured_ms"])
    with pytest.raises(InputError, match="the column 'measured_ms' appears twice"):
        calibrate(twice)
    with pytest.raises(IsADirectoryError):
        calibrate(tmp_path)
    with pytest.raises(InputError, match=r"notes.txt: cannot tell the format from '.txt', and it is not perftest's"):
        calibrate(_write(tmp_path / "notes.txt", "nbytes measured_ms\n1 2\n"))
    crlf = _write(tmp_path / "crlf.txt", "")
    crlf.write_bytes((DATA / "ib_write_bw_hdr.txt").read_bytes().replace(b"\n", b"\r\n"))
    assert calibrate(crlf).report == calibrate(DATA / "ib_write_bw_hdr.txt").report


def test_rows_left_out_are_said(tmp_path):
    table = _write(tmp_path / "m.csv", "nbytes,measured_ms\n1e6,0.1\n1e7,\n1e8,2.3\n1e9,21\n")
    with pytest.warns(UserWarning, match="left out 1 row"):
        fitted = calibrate(table)
    assert fitted.measurements.left_out == 1 and fitted.measurements.places == ("line 2", "line 4", "line 5")


def test_perfmodel_calibrate_is_the_function_even_once_its_module_is_imported():
    import importlib

    importlib.import_module("perfmodel.calibration")
    assert callable(perfmodel.calibrate) and perfmodel.calibrate.__name__ == "calibrate"
    with pytest.warns(UserWarning, match="the fit is far from the measurements") as caught:
        assert perfmodel.calibrate("dataset:mooncake-te-efa", nic="8x ib-xdr").report.points > 2
    assert len(caught) == 1, [str(w.message) for w in caught]  # (that table mixes setups: only that is said)


def test_a_fit_under_a_built_in_name_is_not_told_to_save_under_it(tmp_path, presets, capsys):
    """'add --save to use it as --link ib-ndr' was suggested, which --save then refuses (a built-in name)."""
    table = _write(tmp_path / "a.csv", "nbytes,measured_ms\n1e6,0.1\n1e7,0.3\n1e8,2.3\n")
    assert main(["calibrate", str(table), "--name", "ib-ndr", "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "add --save" not in out and "'ib-ndr' is a built-in preset" in out and "choose another" in out, out
    perfmodel.network.links.save_link(Link("ours", 20.0))
    assert main(["calibrate", str(table), "--name", "OURS", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "exists already" in out and "--replace" in out, out  # taken by a user link: --save --replace replaces it
    assert main(["calibrate", str(table), "--name", "fresh", "--out", str(tmp_path / "e")]) == 0
    assert "add --save to use it as --link fresh" in capsys.readouterr().out


@pytest.mark.parametrize(
    "nic, phrase",
    [
        ("aws-p5en", "'aws-p5en' is a cluster, not a NIC. Fix: give its NIC, nic='efa-200g'"),
        ("uccl-rdma", "'uccl-rdma' is a transport profile, not a NIC"),
        ("2x Mooncake-TE-RDMA", "'2x Mooncake-TE-RDMA' is a transport profile, not a NIC"),
        ("no-such-nic", "unknown link 'no-such-nic'. Fix: give the NIC measured: a line-rate preset (nvlink4"),
    ],
)
def test_a_nic_that_is_not_one_nic_is_refused_by_its_own_name(nic, phrase):
    with pytest.raises(InputError) as raised:
        calibrate("dataset:perftest-ib-hdr", nic=nic)
    assert str(raised.value).startswith("nic: ") and phrase in str(raised.value)
    assert calibrate("dataset:perftest-ib-hdr", nic="1x ib-hdr").link.bandwidth_gb_s <= 25.0
    assert calibrate("dataset:mooncake-te-efa", nic="16x efa-200g").link.bandwidth_gb_s <= 400.0  # (a node's NICs)


@pytest.mark.parametrize("rate", ["-5", "0", "inf"])
def test_a_throughput_that_is_no_throughput_is_refused_as_itself(tmp_path, rate):
    file = tmp_path / "t.csv"
    file.write_text(f"nbytes,measured_gb_s\n1000000,10\n2000000,{rate}\n4000000,20\n")
    with pytest.raises(InputError, match=rf"t.csv, line 3: the throughput measured_gb_s is {float(rate)!r}, not a"):
        calibrate(file)


def test_errors_by_size_say_where_each_row_is_and_the_saved_fit_says_how_it_was_made(tmp_path, presets, capsys):
    table = calibrate("dataset:perftest-ib-hdr").errors_by_size()
    assert table.index.name == "place" and table.index[0].startswith("line ")
    assert main(["calibrate", "dataset:perftest-ib-hdr", "--name", "ours", "--nic", "ib-hdr", "--save",
                 "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "15 smaller transfers, below 65,536 bytes, are not fitted" in printed and "-0.0%" not in printed
    source = json.loads(presets.read_text())["links"]["ours"]["source"]
    assert source == "perfmodel calibrate dataset:perftest-ib-hdr --fit-from-bytes 65536 --nic ib-hdr"
    assert main(["calibrate", "dataset:perftest-ib-hdr", "--name", "one", "--fit-from-bytes", "4",
                 "--out", str(tmp_path / "out2")]) == 0  # fmt: skip
    assert "(1 smaller transfer, below 4 bytes, is not fitted" in capsys.readouterr().out


# --- every fit reads its measurements one way: never a duration's raw unit, a boolean's 1 or a position's pairing


MS = pd.to_timedelta([0.03, 0.21, 2.01], unit="ms")  # (timedelta64[ns]: 30,000 of its unit in 0.03 ms)
FITS_OF_BAD_MEASUREMENTS = {
    "calibrate, durations": (lambda: calibrate(pd.DataFrame({"nbytes": [1e6, 1e7, 1e8], "measured_ms": MS})),
                             "column 'measured_ms' holds durations"),
    "calibrate, booleans": (lambda: calibrate(pd.DataFrame({"nbytes": [1e6, 1e7, True], "measured_ms": [1, 2, 3]})),
                            "column 'nbytes' holds booleans"),
    "fit_link, durations": (lambda: perfmodel.fit_link([1e6, 1e7, 1e8], MS), "measured_ms: got durations"),
    "fit_link, boolean blocks": (lambda: perfmodel.fit_link([1e6, 1e7], [1, 2], n_blocks=True), "n_blocks: got booleans"),
    "fit_link, dates": (lambda: perfmodel.fit_link(pd.to_datetime(["2024-01-01", "2024-01-02"]), [1, 2]),
                        "nbytes: got dates"),
    "fit_link, a dict": (lambda: perfmodel.fit_link({"a": 1}, [1, 2]), "nbytes: {'a': 1} at position 0, not a number"),
    "fit_prefill, durations": (lambda: perfmodel.fit_prefill([100, 200, 400], pd.to_timedelta([1, 2, 4], unit="ms")),
                               "measured_ms: got durations"),
    "fit_prefill, text": (lambda: perfmodel.fit_prefill(["a", "b"], [1, 2]), "'a' at position 0, not a number"),
    "fit_prefill, huge prompts": (lambda: perfmodel.fit_prefill([1e200, 2e200], [1, 2]), "not from 0 to 2\\*\\*53"),
    "fit_prefill, Series in two orders": (
        lambda: perfmodel.fit_prefill(pd.Series([4096, 128, 1024]), pd.Series([213.0, 14.4, 59.2]).sort_values()),
        "index differs",
    ),
    "calibrate, tp 0": (lambda: calibrate(pd.DataFrame({"num_input_tokens": [128, 1024], "measured_ms": [0.5, 1.5]}),
                                          model="llama-3.1-8b", tp=0), "tp: 0 is not a whole number >= 1"),
    "calibrate, block_size 0": (
        lambda: calibrate(pd.DataFrame({"num_input_tokens": [128, 1024], "measured_ms": [0.5, 1.5]}),
                          model="llama-3.1-8b", block_size=0),
        "block_size: 0 is not a whole number >= 1",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FITS_OF_BAD_MEASUREMENTS))
def test_a_fit_refuses_measurements_it_would_misread(case):
    """Each was fitted: 0.03 ms as 30,000 ms, True as 1, Series paired by position, tp 0 as 1, block_size 0 as none;
    or raised a raw numpy error."""
    ask, words = FITS_OF_BAD_MEASUREMENTS[case]
    with pytest.raises(InputError, match=words):
        ask()


def test_the_command_refuses_an_out_folder_before_it_fits(tmp_path, capsys):
    """It fitted and printed the whole table, then refused the folder holding a file it did not write."""
    table = _write(tmp_path / "m.csv", "nbytes,measured_ms\n1e6,0.03\n1e7,0.21\n1e8,2.01\n")
    out = tmp_path / "res"
    out.mkdir()
    (out / "calibration.png").write_text("mine")
    assert main(["calibrate", str(table), "--name", "t", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "holds calibration.png, which perfmodel calibrate did not write" in captured.err
    assert "fitted" not in captured.out and (out / "calibration.png").read_text() == "mine"


def test_two_time_columns_are_refused_and_a_row_left_out_is_said_as_it_is(tmp_path):
    both = pd.DataFrame({"nbytes": [1e6, 1e7], "measured_ms": [0.03, 0.21], "measured_us": [999.0, 999.0]})
    with pytest.raises(InputError, match="has both measured_ms and measured_us"):
        calibrate(both)  # (measured_ms was fitted, the other ignored)
    table = pd.DataFrame({"nbytes": [1e6, 1e7, 1e8], "measured_ms": [0.03, 0.21, 2.01], "n_blocks": [1, 2, None]})
    with pytest.warns(UserWarning, match=r"left out 1 row with an empty cell \(a size, a time or a count\)"):
        calibrate(table, fit_from_bytes=0)  # (said "without a size or a measurement": it had both)
