"""The trace readers against a hostile tester's report (h53, findings F1, F3, F6, F9, F11, F12): day-first dates
read month first when no day exceeds 12, a time zone on arrivals beside naive prefill ends, errors naming the wrong
line after blank lines or quoted line breaks, a ';'-separated file blamed on its columns, whole-float block ids
refused in CSV and Mooncake files, and a Mooncake count above 2**53 rounded. Each test fails on the behaviour the
report found; the good inputs beside them read exactly as before."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfmodel import datasets
from perfmodel.errors import InputError
from perfmodel.replay.traces import read_trace

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
DAY_MS = 86_400_000.0


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    with open(path, "w", newline="") as handle:  # (the line ends as written)
        handle.write(text)
    return path


def _azure(tmp_path: Path, name: str, *times: str) -> Path:
    return _file(tmp_path, name, AZURE_HEADER + "".join(f"{t},{10 * (i + 1)},1\n" for i, t in enumerate(times)))


# --- F1. a date whose day and month order no value settles ----------------------------------------------------------


def test_day_first_dates_no_value_settles_are_refused(tmp_path):
    """1 Dec 23:59:59 and 2 Dec 00:00:01 were read as 12 Jan and 12 Feb: 30 days apart for 2 s."""
    path = _azure(tmp_path, "az_dayfirst.csv", "01/12/2023 23:59:59", "02/12/2023 00:00:01")
    with pytest.raises(InputError) as raised:
        read_trace(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: column 'TIMESTAMP': ")
    assert "'01/12/2023 23:59:59'" in message
    assert "ambiguous" in message
    assert "Fix: write ISO 8601 dates" in message and "2023-12-01 23:59:59" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "column"),
    [
        ({"format": "csv", "columns": {"arrival_ms": "TIMESTAMP", "num_input_tokens": "ContextTokens"}}, "TIMESTAMP"),
        ({"errors": "skip"}, "TIMESTAMP"),
    ],
)
def test_ambiguous_dates_are_refused_however_the_file_is_read(tmp_path, kwargs, column):
    path = _azure(tmp_path, "amb.csv", "01/12/2023 23:59:59", "02/12/2023 00:00:01")
    with pytest.raises(
        InputError, match=rf"amb.csv: column '{column}': the order of day and month is ambiguous: '01/12/2023 23:59:59'"
    ):
        read_trace(path, **kwargs)


def test_ambiguous_dates_are_refused_in_a_generic_table_and_with_dots(tmp_path):
    generic = _file(tmp_path, "g.csv", "ts,prompt\n05/06/2024 10:00:00,5\n06/06/2024 10:00:00,6\n")
    with pytest.raises(
        InputError, match=r"g.csv: column 'ts': the order of day and month is ambiguous: '05/06/2024 10:00:00'"
    ):
        read_trace(generic, columns={"arrival_ms": "ts", "num_input_tokens": "prompt"})
    dots = _azure(tmp_path, "dots.csv", "01.12.2023 23:59:59", "02.12.2023 00:00:01")  # (a German Excel's)
    with pytest.raises(
        InputError,
        match=r"dots.csv: column 'TIMESTAMP': the order of day and month is ambiguous: '01.12.2023 23:59:59'",
    ):
        read_trace(dots)
    short = _azure(tmp_path, "short.csv", "01/12/23 23:59", "02/12/23 00:01")  # (a two-digit year)
    with pytest.raises(
        InputError, match=r"short.csv: column 'TIMESTAMP': the order of day and month is ambiguous: '01/12/23 23:59'"
    ):
        read_trace(short)


def test_a_day_above_12_settles_day_first_for_every_value(tmp_path):
    path = _azure(tmp_path, "dmy.csv", "01/12/2023 23:59:59", "02/12/2023 00:00:01", "13/12/2023 00:00:00")
    assert read_trace(path)["arrival_ms"].tolist() == [0.0, 2000.0, 11 * DAY_MS + 1000.0]
    # the report's European re-save of the Azure trace, minutes only
    late = _azure(tmp_path, "late.csv", "11/12/2023 18:17:03", "13/12/2023 18:17:04")
    assert read_trace(late)["arrival_ms"].tolist() == [0.0, 2 * DAY_MS + 1000.0]


def test_a_day_above_12_settles_month_first_for_every_value(tmp_path):
    path = _azure(tmp_path, "mdy.csv", "12/01/2023 23:59:59", "12/02/2023 00:00:01", "12/13/2023 00:00:00")
    assert read_trace(path)["arrival_ms"].tolist() == [0.0, 2000.0, 11 * DAY_MS + 1000.0]
    pm = _azure(tmp_path, "pm.csv", "11/16/2023 6:17:03 PM", "11/17/2023 6:17:04 AM")  # (US Excel)
    assert read_trace(pm)["arrival_ms"].tolist() == [0.0, 12 * 3_600_000.0 + 1000.0]


def test_a_value_written_in_the_other_order_is_refused(tmp_path):
    settled_first = _azure(tmp_path, "c1.csv", "13/12/2023 10:00:00", "12/13/2023 10:00:01")
    with pytest.raises(
        InputError,
        match=r"c1.csv, line 3, column 'TIMESTAMP': '12/13/2023 10:00:01' is not a time written as line 2's "
        r"\('13/12/2023 10:00:00'",
    ):
        read_trace(settled_first)
    # the order settled on line 3 (the first value reads both ways): line 4 contradicts it
    settled_later = _azure(tmp_path, "c2.csv", "01/12/2023 10:00:00", "13/12/2023 10:00:00", "12/13/2023 10:00:01")
    with pytest.raises(
        InputError,
        match=r"c2.csv, line 4, column 'TIMESTAMP': '12/13/2023 10:00:01' is not a time written as line 3's "
        r"\('13/12/2023 10:00:00', day first\) \(1 malformed row\)",
    ):
        read_trace(settled_later)
    # a two-digit year: pandas infers no format and reads each value alone (12/13 month first, 13/12 day first)
    short = _azure(tmp_path, "c3.csv", "13/12/23 10:00", "12/13/23 10:01")
    with pytest.raises(InputError, match=r"c3.csv, line 3, column 'TIMESTAMP': '12/13/23 10:01' is not a time"):
        read_trace(short)
    with pytest.warns(UserWarning, match="skipped 1 malformed line of 2"):
        skipped = read_trace(short, errors="skip")
    assert skipped["arrival_ms"].tolist() == [0.0] and skipped.attrs["skipped_lines"] == 1


def test_a_stray_date_in_a_column_of_ms_spoils_its_own_row_only(tmp_path):
    path = _file(tmp_path, "n1.csv", "arrival_ms,num_input_tokens\n01/02/2023,1\n5,2\n7,3\n")
    with pytest.raises(InputError, match=r"n1.csv, line 2, column 'arrival_ms': '01/02/2023' is not a finite number"):
        read_trace(path)


def test_iso_and_numeric_times_read_as_before(tmp_path):
    iso = _azure(tmp_path, "iso.csv", "2023-12-01 23:59:59", "2023-12-02T00:00:01.5")
    assert read_trace(iso)["arrival_ms"].tolist() == [0.0, 2500.0]
    zoned = _azure(tmp_path, "z.csv", "2023-12-01T23:59:59+01:00", "2023-12-01T23:00:01Z")
    assert read_trace(zoned)["arrival_ms"].tolist() == [0.0, 2000.0]
    numbers = _file(tmp_path, "n.csv", "arrival_ms,num_input_tokens\n5,1\n25,2\n")
    assert read_trace(numbers)["arrival_ms"].tolist() == [0.0, 20.0]
    words = _azure(tmp_path, "w.csv", "Dec 1 2023 23:59:59", "Dec 2 2023 00:00:01")  # (no d/m/y: as pandas infers)
    assert read_trace(words)["arrival_ms"].tolist() == [0.0, 2000.0]
    year_first = _azure(tmp_path, "y.csv", "2023/12/01 23:59:59", "2023/12/02 00:00:01")
    assert read_trace(year_first)["arrival_ms"].tolist() == [0.0, 2000.0]


def test_the_shipped_traces_read_as_before():
    azure = read_trace(datasets.path("azure-code-2023"))
    assert len(azure) == 8819 and azure.attrs["format"] == "azure"
    assert azure["arrival_ms"].iloc[[0, 1, 2, -1]].tolist() == [0.0, 52.0, 98.189, 3435948.0560000003]
    assert azure["arrival_ms"].sum() == 13327267954.592
    assert int(azure["num_input_tokens"].sum()) == 18059974 and int(azure["num_output_tokens"].sum()) == 245896
    mooncake = read_trace(datasets.path("mooncake-synthetic"))
    assert len(mooncake) == 3993 and mooncake.attrs["format"] == "mooncake"
    assert mooncake["arrival_ms"].iloc[[0, 1, 2, -1]].tolist() == [0.0, 0.0, 40.0, 1022025.0]
    assert int(mooncake["num_input_tokens"].sum()) == 61194628 and int(mooncake["num_output_tokens"].sum()) == 595432
    assert int(mooncake["hash_ids"].map(len).sum()) == 121877
    assert list(mooncake["hash_ids"].iloc[-1])[-2:] == [17950, 43923]


# --- F3. a time zone on one of the two times ------------------------------------------------------------------------


def test_a_time_zone_on_arrivals_beside_naive_prefill_ends_is_refused(tmp_path):
    path = _file(
        tmp_path,
        "tzcsv.csv",
        "arrival_ms,ready_ms,num_input_tokens\n"
        "2023-11-16T18:17:03Z,2023-11-16T18:17:03.5,10\n2023-11-16T18:17:04Z,2023-11-16T18:17:04.5,20\n",
    )
    with pytest.raises(InputError) as raised:
        read_trace(path)
    message = str(raised.value)
    assert "tzcsv.csv: arrival_ms ('arrival_ms') has times with a UTC offset but ready_ms ('ready_ms') has none" in (
        message
    )
    assert "Fix: give both columns' times a UTC offset" in message and "\n" not in message


def test_a_naive_arrival_beside_zoned_prefill_ends_in_parquet_is_refused(tmp_path):
    times = pd.to_datetime(["2023-11-16 18:17:03", "2023-11-16 18:17:04"])
    table = pa.table(
        {
            "t": pa.array(times, pa.timestamp("ms")),
            "done": pa.array(times.tz_localize("UTC") + pd.Timedelta(500, "ms"), pa.timestamp("ms", tz="UTC")),
            "num_input_tokens": [10, 20],
        }
    )
    path = tmp_path / "tz.parquet"
    pq.write_table(table, path)
    with pytest.raises(
        InputError, match=r"tz.parquet: ready_ms \('done'\) has times with a UTC offset but arrival_ms \('t'\) has none"
    ):
        read_trace(path, columns={"arrival_ms": "t", "ready_ms": "done"})


def test_zoned_times_in_both_columns_still_read(tmp_path):
    path = _file(
        tmp_path,
        "tz2.csv",
        "arrival_ms,ready_ms,num_input_tokens\n"
        "2023-11-16T18:17:03Z,2023-11-16T19:17:03.5+01:00,10\n2023-11-16T18:17:04Z,2023-11-16T18:17:04.5Z,20\n",
    )
    trace = read_trace(path)
    assert trace["arrival_ms"].tolist() == [0.0, 1000.0] and trace["ready_ms"].tolist() == [500.0, 1500.0]


# --- F6. the line of a bad cell, as an editor counts it -------------------------------------------------------------


def test_a_bad_cell_after_blank_lines_names_its_line(tmp_path):
    path = _file(tmp_path, "blankmid.csv", "arrival_ms,num_input_tokens\n0,10\n\n\n\n5,-20\n")
    with pytest.raises(InputError, match=r"blankmid.csv, line 6, column 'num_input_tokens': '-20' is negative"):
        read_trace(path)
    spaces = _file(tmp_path, "spaces.csv", "arrival_ms,num_input_tokens\r\n0,10\r\n  \r\n\r\n5,abc\r\n")
    with pytest.raises(InputError, match=r"spaces.csv, line 5, column 'num_input_tokens': 'abc' is"):
        read_trace(spaces)


def test_a_bad_cell_after_a_quoted_line_break_names_its_line(tmp_path):
    path = _file(tmp_path, "multi.csv", 'arrival_ms,num_input_tokens,note\n0,10,"a\nb\nc"\n5,-20,x\n')
    with pytest.raises(InputError, match=r"multi.csv, line 5, column 'num_input_tokens': '-20' is negative"):
        read_trace(path)


def test_azure_and_hash_id_errors_name_their_lines(tmp_path):
    azure = _file(tmp_path, "az.csv", AZURE_HEADER + "2023-11-16 18:17:03,10,1\n\n2023-11-16 18:17:04,-1,1\n")
    with pytest.raises(InputError, match=r"az.csv, line 4, column 'ContextTokens': '-1' is negative"):
        read_trace(azure)
    hashes = _file(tmp_path, "h.csv", 'arrival_ms,num_input_tokens,hash_ids\n0,10,"[1,\n2]"\n\n1,10,"[1, x]"\n')
    with pytest.raises(InputError, match=r"h.csv, line 5, column 'hash_ids': holds '\[1, x\]'"):
        read_trace(hashes)
    ready = _file(tmp_path, "r.csv", "arrival_ms,num_input_tokens,ready_ms\n0,10,5\n\n3,10,2\n")
    with pytest.raises(InputError, match=r"r.csv, line 4: ready_ms 2 is before arrival_ms 3"):
        read_trace(ready)
    packed = tmp_path / "p.csv.gz"
    with gzip.open(packed, "wt", newline="") as handle:
        handle.write("arrival_ms,num_input_tokens\n0,10\n\n5,1.5\n")
    with pytest.raises(InputError, match=r"p.csv.gz, line 4, column 'num_input_tokens': '1.5' is not a whole"):
        read_trace(packed)


def test_a_time_with_no_zone_among_zoned_ones_names_its_line(tmp_path):
    path = _file(
        tmp_path,
        "mix.csv",
        "arrival_ms,num_input_tokens\n2023-11-16T18:17:03Z,1\n\n2023-11-16T18:17:04+01:00,2\n2023-11-16T18:17:05,3\n",
    )
    with pytest.raises(
        InputError,
        match=r"mix.csv: column 'arrival_ms', line 5: '2023-11-16T18:17:05' has no time zone and line 2 has one",
    ):
        read_trace(path)


def test_a_json_lines_error_names_its_line_after_blank_lines(tmp_path):
    path = _file(
        tmp_path, "g.jsonl", '{"arrival_ms": 0, "num_input_tokens": 1}\n\n{"arrival_ms": 1, "num_input_tokens": 1.5}\n'
    )
    with pytest.raises(InputError, match=r"g.jsonl, line 3, column 'num_input_tokens': 1.5 is not a whole"):
        read_trace(path)


# --- F9. a file separated by ';' or tabs ----------------------------------------------------------------------------


def test_a_semicolon_separated_file_is_said_so(tmp_path):
    path = _file(
        tmp_path, "az_excel.csv", "\ufeffTIMESTAMP;ContextTokens;GeneratedTokens\r\n16/11/2023 18:17;4808;10\r\n"
    )
    with pytest.raises(InputError) as raised:
        read_trace(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: separated by ';', not by commas")
    assert "no column for" not in message and "Fix: save it as CSV with commas between fields and decimal points" in (
        message
    )
    decimal = _file(tmp_path, "dec.csv", "arrival_ms;num_input_tokens\r\n0,5;10\r\n1,5;20\r\n")  # (decimal commas)
    for kwargs in ({}, {"errors": "skip"}, {"format": "csv"}, {"format": "csv", "errors": "skip"}):
        with pytest.raises(InputError, match=r"dec.csv: separated by ';', not by commas"):
            read_trace(decimal, **kwargs)
    named = _file(tmp_path, "named.csv", "t;prompt\r\n0;10\r\n1;20\r\n")
    with pytest.raises(InputError, match=r"named.csv: separated by ';', not by commas"):
        read_trace(named, format="csv", columns={"arrival_ms": "t", "num_input_tokens": "prompt"})


def test_a_tab_separated_file_is_said_so(tmp_path):
    path = _file(tmp_path, "tabs.csv", "arrival_ms\tnum_input_tokens\n0\t10\n1\t20\n")
    for kwargs in ({}, {"format": "csv"}):
        with pytest.raises(
            InputError, match=r"tabs.csv: separated by tabs, not by commas.*Fix: save it as CSV with commas"
        ):
            read_trace(path, **kwargs)


def test_a_semicolon_in_a_comma_separated_file_changes_nothing(tmp_path):
    path = _file(tmp_path, "ok.csv", 'arrival_ms,num_input_tokens,note\n0,10,"a;b"\n1,20,c\n')
    assert read_trace(path)["num_input_tokens"].tolist() == [10, 20]


# --- F11. whole floats as block ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("cell", "ids"), [("[1.0, 2.0]", [1, 2]), ("[1. 2.]", [1, 2]), ("[3, 4.0, 5e0]", [3, 4, 5])])
def test_whole_float_ids_in_a_csv_file_are_ids(tmp_path, cell, ids):
    path = _file(tmp_path, "hf.csv", f'arrival_ms,num_input_tokens,hash_ids\n0,10,"{cell}"\n1,10,"[7]"\n')
    assert read_trace(path)["hash_ids"].map(list).tolist() == [ids, [7]]


def test_fractional_or_huge_float_ids_in_a_csv_file_are_refused(tmp_path):
    half = _file(tmp_path, "h1.csv", 'arrival_ms,num_input_tokens,hash_ids\n0,10,"[1]"\n\n1,10,"[1.0, 1.5]"\n')
    with pytest.raises(
        InputError,
        match=r"h1.csv, line 4, column 'hash_ids': holds '\[1.0, 1.5\]', not a list of block ids: its block id 1.5 is not whole",
    ):
        read_trace(half)
    huge = _file(tmp_path, "h2.csv", 'arrival_ms,num_input_tokens,hash_ids\n0,10,"[9007199254740994.0]"\n')
    with pytest.raises(InputError, match=r"h2.csv, line 2, column 'hash_ids': .*above 2\*\*53"):
        read_trace(huge)
    exact = _file(tmp_path, "h3.csv", 'arrival_ms,num_input_tokens,hash_ids\n0,10,"[9007199254740993]"\n')
    assert read_trace(exact)["hash_ids"].map(list).tolist() == [[9007199254740993]]  # (an integer: exact)


def test_float_ids_in_a_parquet_file_are_ids_up_to_2_53(tmp_path):
    path = tmp_path / "f.parquet"
    ids = pa.array([[1.0, 2.0], [2.0**53]], pa.list_(pa.float64()))
    pq.write_table(pa.table({"arrival_ms": [0.0, 1.0], "num_input_tokens": [10, 20], "hash_ids": ids}), path)
    assert read_trace(path)["hash_ids"].map(list).tolist() == [[1, 2], [2**53]]
    huge = tmp_path / "g.parquet"
    ids = pa.array([[1.0], [2.0**60]], pa.list_(pa.float64()))
    pq.write_table(pa.table({"arrival_ms": [0.0, 1.0], "num_input_tokens": [10, 20], "hash_ids": ids}), huge)
    with pytest.raises(
        InputError, match=r"g.parquet, row 2, column 'hash_ids': .*1.152921504606847e\+18 is above 2\*\*53"
    ):
        read_trace(huge)


def test_whole_float_ids_in_a_mooncake_file_are_ids(tmp_path):
    path = _file(
        tmp_path,
        "hf.jsonl",
        '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1.0, 2.0]}\n'
        '{"timestamp": 3.5, "input_length": 20, "output_length": 2, "hash_ids": [1, 9007199254740993]}\n',
    )
    trace = read_trace(path)
    assert trace["hash_ids"].map(list).tolist() == [[1, 2], [1, 9007199254740993]]
    assert trace["arrival_ms"].tolist() == [0.0, 3.5] and trace["num_input_tokens"].tolist() == [10, 20]
    assert trace.attrs["skipped_lines"] == 0


def test_fractional_or_huge_float_ids_in_a_mooncake_file_are_refused(tmp_path):
    half = _file(
        tmp_path,
        "h.jsonl",
        '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n\n'
        '{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1.0, 1.5]}\n',
    )
    with pytest.raises(InputError, match=r"h.jsonl, line 3: hash_ids holds 1.5, not a whole block id"):
        read_trace(half)
    with pytest.warns(UserWarning, match="skipped 1 malformed line of 2"):
        assert read_trace(half, errors="skip")["hash_ids"].map(list).tolist() == [[1]]
    huge = _file(
        tmp_path,
        "g.jsonl",
        '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [9007199254740994.0]}\n',
    )
    with pytest.raises(InputError, match=r"g.jsonl, line 1: hash_ids holds 9007199254740994.0, .*above 2\*\*53"):
        read_trace(huge)


# --- F12. a Mooncake count above 2**53 ------------------------------------------------------------------------------


def test_a_mooncake_count_above_2_53_is_refused(tmp_path):
    path = _file(
        tmp_path,
        "big.jsonl",
        '{"timestamp": 0, "input_length": 9007199254740993, "output_length": 1}\n'
        '{"timestamp": 1, "input_length": 5, "output_length": 1}\n',
    )
    with pytest.raises(InputError, match=r"big.jsonl, line 1: input_length 9007199254740993 is above 2\*\*53 tokens"):
        read_trace(path)
    out = _file(
        tmp_path,
        "out.jsonl",
        '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
        '{"timestamp": 1, "input_length": 5, "output_length": 9007199254740993}\n',
    )
    with pytest.raises(InputError, match=r"out.jsonl, line 2: output_length 9007199254740993 is above 2\*\*53 tokens"):
        read_trace(out)
    with pytest.warns(UserWarning, match="skipped 1 malformed line of 2"):
        assert read_trace(out, errors="skip")["num_output_tokens"].tolist() == [1]


def test_a_mooncake_count_of_2_53_still_reads(tmp_path):
    path = _file(
        tmp_path,
        "edge.jsonl",
        '{"timestamp": 0, "input_length": 9007199254740992, "output_length": 1}\n'
        '{"timestamp": 1, "input_length": 5, "output_length": 1}\n',
    )
    trace = read_trace(path)
    assert trace["num_input_tokens"].tolist() == [2**53, 5] and trace.attrs["skipped_lines"] == 0
