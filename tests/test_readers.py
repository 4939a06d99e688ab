"""Every reader (perfmodel.io's tables, perfmodel.trace's traces) on hostile encodings: a byte-order mark,
repeated JSON keys, numbers too large for a double, thousands separators, repeated column names, empty or
too-large hash-id cells: one clear line naming the file, the column and the line; skip where offered."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from perfmodel import InputError, read_trace
from perfmodel import io as pio


def _write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


AZURE = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.0,400,10\n"


def test_an_azure_trace_with_a_byte_order_mark(tmp_path):
    plain = read_trace(_write(tmp_path, "plain.csv", AZURE))
    marked = read_trace(_write(tmp_path, "marked.csv", b"\xef\xbb\xbf" + AZURE))
    assert marked.attrs["format"] == "azure" and marked.equals(plain)


def test_a_generic_trace_with_a_byte_order_mark(tmp_path):
    trace = read_trace(_write(tmp_path, "t.csv", b"\xef\xbb\xbfarrival_ms,num_input_tokens\n0,10\n1,20\n"))
    assert trace["num_input_tokens"].tolist() == [10, 20]


MOONCAKE_GOOD = b'{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'


@pytest.mark.parametrize("bad, fragment", [
    (b'{"timestamp": 2, "timestamp": 3, "input_length": 10, "output_length": 1}\n', "appear twice"),
    (b'{"timestamp": 1e400, "input_length": 10, "output_length": 1}\n', "too large for a double"),
    (b'{"timestamp": 2, "input_length": 10, "output_length": 1, "hash_ids": [1, 1, 99999999999999999999]}\n',
     "64-bit"),
])
def test_a_bad_json_line_is_named_and_skipped(tmp_path, bad, fragment):
    path = _write(tmp_path, "t.jsonl", MOONCAKE_GOOD + bad)
    with pytest.raises(ValueError, match=fr"t.jsonl, line 2: .*{fragment}"):
        read_trace(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = read_trace(path, errors="skip")
    assert len(trace) == 1 and trace.attrs["skipped_lines"] == 1


@pytest.mark.parametrize("rows, fragment", [
    (b'0,"1,000",[1]\n', "thousands separator"),
    (b"0,10,\n", "cell is empty"),
    (b"0,10,[99999999999999999999]\n", "outside 64-bit"),
    (b"0,10,[1.5]\n", "not a list"),
])
def test_a_bad_csv_cell_is_named_by_file_line_and_column_and_skipped(tmp_path, rows, fragment):
    path = _write(tmp_path, "t.csv", b"arrival_ms,num_input_tokens,hash_ids\n1,20,[1]\n" + rows)
    with pytest.raises(InputError, match=fr"t.csv, line 3, column '[a-z_]+': .*{fragment}"):
        read_trace(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = read_trace(path, errors="skip")
    assert len(trace) == 1 and trace.attrs["skipped_lines"] == 1


def test_repeated_csv_columns_are_named_not_renamed(tmp_path):
    path = _write(tmp_path, "t.csv", b"arrival_ms,num_input_tokens,num_input_tokens\n0,10,20\n")
    with pytest.raises(InputError, match=r"repeated column names \['num_input_tokens'\]"):
        read_trace(path)
    with pytest.raises(InputError, match=r"repeated column names \['num_input_tokens'\]"):
        pio.delay_file(path, tmp_path / "out.csv", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1)


def test_a_json_line_with_a_repeated_key_is_refused_by_the_table_reader(tmp_path):
    path = _write(tmp_path, "t.jsonl", b'{"num_input_tokens": 10}\n{"num_input_tokens": 10, "num_input_tokens": 20}\n')
    with pytest.raises(InputError, match=r"t.jsonl, line 2: .*'num_input_tokens' appear twice"):
        pio.delay_file(path, tmp_path / "out.csv", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1)


def test_a_table_with_a_byte_order_mark(tmp_path):
    path = _write(tmp_path, "t.csv", b"\xef\xbb\xbfnum_input_tokens\n10\n")
    assert pio.delay_file(path, tmp_path / "out.csv", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1) == 1


# --- a thousands separator, at every reader: the file, the column, the line, and the number to write ----------

AZURE_THOUSANDS = b'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,4808,10\n' \
                  b'2023-11-16 18:15:50.99,"3,180",8\n'


def test_an_azure_trace_with_a_thousands_separator_names_file_column_and_line(tmp_path):
    """'cannot be read as CSV (could not convert string to float: '3,180'). Fix: ... one value per header
    column' before: no line, and a wrong fix."""
    path = _write(tmp_path, "a.csv", AZURE_THOUSANDS)
    with pytest.raises(InputError) as raised:
        read_trace(path)
    message = str(raised.value)
    assert "a.csv, line 3, column 'ContextTokens'" in message and "'3,180'" in message, message
    assert "thousands separator" in message and "write 3180" in message and "header column" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert read_trace(path, errors="skip")["num_input_tokens"].tolist() == [4808]


def test_a_table_with_a_thousands_separator_is_refused_at_its_line(tmp_path):
    path = _write(tmp_path, "t.csv", b'num_input_tokens\n100\n"3,180"\n')
    with pytest.raises(InputError, match=r"t.csv: column 'num_input_tokens' \(num_input_tokens\): 1 invalid row; first at line 3: "
                                         r"'3,180' \(not a number; it has a thousands separator: write 3180\)"):
        pio.delay_file(path, tmp_path / "out.csv", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1)
    assert not (tmp_path / "out.csv").exists()


def test_a_measurement_with_a_thousands_separator_is_refused_at_its_line(tmp_path):
    from perfmodel.calibrate import calibrate

    path = _write(tmp_path, "m.csv", b'nbytes,measured_ms\n1000,0.5\n"4,096",0.7\n')
    with pytest.raises(InputError, match=r"m.csv, line 3: column 'nbytes' holds '4,096', not a number; it has a "
                                         r"thousands separator: write 4096"):
        calibrate(path)


# --- a JSON-lines trace takes the columns a CSV trace takes ------------------------------------------------

def test_a_json_lines_trace_in_perfmodels_columns_reads_as_the_csv_does(tmp_path):
    """'line 1: timestamp is missing' before, though a CSV trace of the same columns is read."""
    csv = _write(tmp_path, "t.csv", b"arrival_ms,num_input_tokens,num_output_tokens,hash_ids\n5,700,3,[1 2]\n"
                                    b"9,600,4,[1 3]\n")
    jsonl = _write(tmp_path, "t.jsonl", b'{"arrival_ms": 5, "num_input_tokens": 700, "num_output_tokens": 3, '
                                        b'"hash_ids": [1, 2]}\n{"arrival_ms": 9, "num_input_tokens": 600, '
                                        b'"num_output_tokens": 4, "hash_ids": [1, 3]}\n')
    from_csv, from_jsonl = read_trace(csv), read_trace(jsonl)
    assert from_jsonl.attrs["format"] == "jsonl"
    pd.testing.assert_frame_equal(from_jsonl, from_csv)
    mapped = _write(tmp_path, "m.jsonl", b'{"t": 5, "prompt": 700}\n{"t": 9, "prompt": 600}\n')
    trace = read_trace(mapped, columns={"arrival_ms": "t", "num_input_tokens": "prompt"})
    assert trace["num_input_tokens"].tolist() == [700, 600] and trace["arrival_ms"].tolist() == [0.0, 4.0]
    with pytest.raises(ValueError, match=r"m.jsonl: no column for \['arrival_ms', 'num_input_tokens'\]; the "
                                         r"file has \['t', 'prompt'\]"):
        read_trace(mapped)
    bad = _write(tmp_path, "b.jsonl", b'{"arrival_ms": 5, "num_input_tokens": 700}\n'
                                     b'{"arrival_ms": 9, "num_input_tokens": "3,180"}\n')
    with pytest.raises(InputError, match=r"b.jsonl, line 2, column 'num_input_tokens': '3,180' is not a number; "
                                         r"it has a thousands separator: write 3180"):
        read_trace(bad)


@pytest.mark.parametrize("name", ["bad.csv.gz", "bad.jsonl.gz"])
def test_a_damaged_compressed_trace_is_named(tmp_path, name):
    """The format's detection read the header first: 'Truncated compressed stream', naming no file."""
    path = _write(tmp_path, name, b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(InputError, match=f"{name}: could not be read"):
        read_trace(path)
