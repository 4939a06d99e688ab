"""Every reader (perfmodel.io's tables, perfmodel.trace's traces) on hostile encodings: a byte-order mark,
repeated JSON keys, numbers too large for a double, thousands separators, repeated column names, empty or
too-large hash-id cells: one clear line naming the file, the column and the line; skip where offered."""

from __future__ import annotations

import warnings

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
