"""Every reader (perfmodel.io's tables, perfmodel.replay.traces's traces) on hostile encodings: a byte-order mark,
repeated JSON keys, numbers too large for a double, thousands separators, repeated column names, empty or
too-large hash-id cells: one clear line naming the file, the column and the line; skip where offered."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (b'{"timestamp": 2, "timestamp": 3, "input_length": 10, "output_length": 1}\n', "appear twice"),
        (b'{"timestamp": 1e400, "input_length": 10, "output_length": 1}\n', "too large for a double"),
        (
            b'{"timestamp": 2, "input_length": 10, "output_length": 1, "hash_ids": [1, 1, 99999999999999999999]}\n',
            "64-bit",
        ),
    ],
)
def test_a_bad_json_line_is_named_and_skipped(tmp_path, bad, fragment):
    path = _write(tmp_path, "t.jsonl", MOONCAKE_GOOD + bad)
    with pytest.raises(ValueError, match=rf"t.jsonl, line 2: .*{fragment}"):
        read_trace(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = read_trace(path, errors="skip")
    assert len(trace) == 1 and trace.attrs["skipped_lines"] == 1


@pytest.mark.parametrize(
    "rows, fragment",
    [
        (b'0,"1,000",[1]\n', "thousands separator"),
        (b"0,10,\n", "cell is empty"),
        (b"0,10,[99999999999999999999]\n", "outside 64-bit"),
        (b"0,10,[1.5]\n", "not a list"),
    ],
)
def test_a_bad_csv_cell_is_named_by_file_line_and_column_and_skipped(tmp_path, rows, fragment):
    path = _write(tmp_path, "t.csv", b"arrival_ms,num_input_tokens,hash_ids\n1,20,[1]\n" + rows)
    with pytest.raises(InputError, match=rf"t.csv, line 3, column '[a-z_]+': .*{fragment}"):
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

AZURE_THOUSANDS = (
    b'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,4808,10\n2023-11-16 18:15:50.99,"3,180",8\n'
)


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
    with pytest.raises(
        InputError,
        match=r"t.csv: column 'num_input_tokens' \(num_input_tokens\): 1 invalid row; first at line 3: "
        r"'3,180' \(not a number; it has a thousands separator: write 3180\)",
    ):
        pio.delay_file(path, tmp_path / "out.csv", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1)
    assert not (tmp_path / "out.csv").exists()


def test_a_measurement_with_a_thousands_separator_is_refused_at_its_line(tmp_path):
    from perfmodel.calibration import calibrate

    path = _write(tmp_path, "m.csv", b'nbytes,measured_ms\n1000,0.5\n"4,096",0.7\n')
    with pytest.raises(
        InputError,
        match=r"m.csv, line 3: column 'nbytes' holds '4,096', not a number; it has a "
        r"thousands separator: write 4096",
    ):
        calibrate(path)


# --- a JSON-lines trace takes the columns a CSV trace takes ------------------------------------------------


def test_a_json_lines_trace_in_perfmodels_columns_reads_as_the_csv_does(tmp_path):
    """'line 1: timestamp is missing' before, though a CSV trace of the same columns is read."""
    csv = _write(
        tmp_path, "t.csv", b"arrival_ms,num_input_tokens,num_output_tokens,hash_ids\n5,700,3,[1 2]\n9,600,4,[1 3]\n"
    )
    jsonl = _write(
        tmp_path,
        "t.jsonl",
        b'{"arrival_ms": 5, "num_input_tokens": 700, "num_output_tokens": 3, '
        b'"hash_ids": [1, 2]}\n{"arrival_ms": 9, "num_input_tokens": 600, '
        b'"num_output_tokens": 4, "hash_ids": [1, 3]}\n',
    )
    from_csv, from_jsonl = read_trace(csv), read_trace(jsonl)
    assert from_jsonl.attrs["format"] == "jsonl"
    pd.testing.assert_frame_equal(from_jsonl, from_csv)
    mapped = _write(tmp_path, "m.jsonl", b'{"t": 5, "prompt": 700}\n{"t": 9, "prompt": 600}\n')
    trace = read_trace(mapped, columns={"arrival_ms": "t", "num_input_tokens": "prompt"})
    assert trace["num_input_tokens"].tolist() == [700, 600] and trace["arrival_ms"].tolist() == [0.0, 4.0]
    with pytest.raises(
        ValueError,
        match=r"m.jsonl: no column for \['arrival_ms', 'num_input_tokens'\]; the "
        r"file has \['t', 'prompt'\]",
    ):
        read_trace(mapped)
    bad = _write(
        tmp_path,
        "b.jsonl",
        b'{"arrival_ms": 5, "num_input_tokens": 700}\n{"arrival_ms": 9, "num_input_tokens": "3,180"}\n',
    )
    with pytest.raises(
        InputError,
        match=r"b.jsonl, line 2, column 'num_input_tokens': '3,180' is not a number; "
        r"it has a thousands separator: write 3180",
    ):
        read_trace(bad)


@pytest.mark.parametrize("name", ["bad.csv.gz", "bad.jsonl.gz"])
def test_a_damaged_compressed_trace_is_named(tmp_path, name):
    """The format's detection read the header first: 'Truncated compressed stream', naming no file."""
    path = _write(tmp_path, name, b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(InputError, match=f"{name}: could not be read"):
        read_trace(path)


# --- block ids: a column of empty cells, ids beyond 64 bits, negative ids, at every reader and at the replay ----


@pytest.mark.parametrize(
    "name, data, fragment",
    [
        (
            "all-empty.csv",
            b"arrival_ms,num_input_tokens,hash_ids\n0,10,\n1,20,\n",
            "line 2, column 'hash_ids': the cell is empty",
        ),
        ("bare.csv", b"arrival_ms,num_input_tokens,hash_ids\n0,10,5\n1,20,6\n", "line 2, column 'hash_ids': holds 5"),
        (
            "bare-huge.csv",
            b"arrival_ms,num_input_tokens,hash_ids\n0,10,9223372036854775808\n",
            "line 2, column 'hash_ids'",
        ),
        (
            "huge.csv",
            b"arrival_ms,num_input_tokens,hash_ids\n0,10,[1]\n1,20,[9223372036854775808]\n",
            "line 3, column 'hash_ids': holds a block id outside 64-bit integers",
        ),
        (
            "huge.jsonl",
            (
                b'{"arrival_ms": 0, "num_input_tokens": 5, "hash_ids": [18446744073709551616]}\n'
                b'{"arrival_ms": 1, "num_input_tokens": 5, "hash_ids": [1]}\n'
            ),
            "line 1, column 'hash_ids': holds a block id outside 64-bit integers",
        ),
        (
            "mooncake.jsonl",
            (
                b'{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [9223372036854775808]}\n'
                b'{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
            ),
            "line 1: hash_ids must be 64-bit integers",
        ),
    ],
)
def test_block_ids_that_are_no_lists_or_beyond_64_bits_are_named_by_line_and_column(tmp_path, name, data, fragment):
    """A column of empty cells ended in ArrowNotImplementedError; so did a column of bare numbers."""
    with pytest.raises(ValueError) as raised:
        read_trace(_write(tmp_path, name, data))
    said = str(raised.value)
    assert name in said and fragment in said and "Fix:" in said and "\n" not in said, said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if data.count(b"\n") > 2:  # (a line left to read)
            assert len(read_trace(_write(tmp_path, name, data), errors="skip")) < data.count(b"\n")


def test_block_ids_of_a_parquet_trace_beyond_64_bits_are_named_by_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table(
            {
                "arrival_ms": [0.0, 1.0],
                "num_input_tokens": [5, 6],
                "hash_ids": pa.array([[1], [2**63]], pa.list_(pa.uint64())),
            }
        ),
        path,
    )
    with pytest.raises(InputError, match=r"row 2, column 'hash_ids': holds a block id outside 64-bit integers"):
        read_trace(path)


@pytest.mark.parametrize(
    "ids, fragment",
    [
        ([[1], [2**63]], "row 'b': holds a block id outside 64-bit integers"),
        ([[1], [2**64 + 5]], "row 'b': holds a block id outside 64-bit integers"),
        ([[1], float("nan")], "row 'b': the cell is empty"),
        ([[1], "[2]"], "row 'b': holds '[2]', not a list of block ids"),
        ([[1], [True]], "row 'b': holds [True], not a list of whole block ids"),
    ],
)
def test_the_replay_names_the_row_of_block_ids_it_cannot_take(ids, fragment):
    """A frame's ids of 2**63 or more were 'does not hold lists of integers', with no row."""
    import perfmodel

    trace = pd.DataFrame(
        {"arrival_ms": [0.0, 1.0], "num_input_tokens": [1024, 2048], "hash_ids": ids}, index=["a", "b"]
    )
    with pytest.raises(InputError) as raised:
        perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b")
    said = str(raised.value)
    assert "trace column 'hash_ids'" in said and fragment in said and "Fix:" in said, said


def test_negative_and_empty_block_ids_are_identities_like_any_other(tmp_path):
    """Negative ids are signed 64-bit hashes: they share a prefix exactly as positive ones do; empty lists are
    requests with no block ids. Every reader agrees."""
    import perfmodel

    csv = read_trace(
        _write(
            tmp_path,
            "n.csv",
            b'arrival_ms,num_input_tokens,hash_ids\n0,1024,"[-5, -6]"\n1,1024,"[-5, -6]"\n2,1024,[]\n',
        )
    )
    lines = read_trace(
        _write(
            tmp_path,
            "n.jsonl",
            b'{"timestamp": 0, "input_length": 1024, "output_length": 0, '
            b'"hash_ids": [-5, -6]}\n{"timestamp": 1, "input_length": 1024, '
            b'"output_length": 0, "hash_ids": [-5, -6]}\n{"timestamp": 2, '
            b'"input_length": 1024, "output_length": 0, "hash_ids": []}\n',
        )
    )
    assert csv["hash_ids"].tolist() == lines["hash_ids"].tolist() == [[-5, -6], [-5, -6], []]
    shifted = csv.assign(hash_ids=pd.Series([[7, 8], [7, 8], []], dtype=csv["hash_ids"].dtype))
    kwargs = dict(mode="destination_missing", block_size=512, decode_workers=1)
    negative = perfmodel.replay_handoffs(csv, "ib-ndr", "llama-3.1-8b", **kwargs)["handoff_delay_ms"]
    positive = perfmodel.replay_handoffs(shifted, "ib-ndr", "llama-3.1-8b", **kwargs)["handoff_delay_ms"]
    assert negative.tolist() == positive.tolist()


@pytest.mark.parametrize("second, code", [("2023-11-16 19:15:47.5+01:00", 0), ("2023-11-16 18:15:47.5", 2)])
def test_an_azure_trace_mixing_time_zones_is_read_or_refused_in_one_line(tmp_path, capsys, second, code):
    """On pandas before 3 a mix of offsets gave objects, not datetimes: the command ended in a traceback (exit 1)."""
    from perfmodel.cli import main

    path = _write(
        tmp_path,
        "azure.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5+00:00,100,5\n" + second.encode() + b",200,5\n",
    )
    assert (
        main(["trace", str(path), "--link", "ib-ndr", "--model", "llama-3.1-8b", "--out", str(tmp_path / "o")]) == code
    )
    err = capsys.readouterr().err
    if code:
        assert "azure.csv: column 'TIMESTAMP', line 3" in err and "has no time zone" in err, err
        assert len(err.strip().splitlines()) == 1, err
    else:
        assert read_trace(path)["arrival_ms"].tolist() == [0.0, 1000.0]


def _open_at_end(text: bytes) -> int:
    """The slow reference: the byte offset of a quoted field still open at the end of ``text``, else -1, read
    character by character as pyarrow reads CSV (a quote opens a field only at its start; inside, a doubled
    quote is a quote, a single one closes it; anywhere else a quote is a character)."""
    start = 3 if text.startswith(b"\xef\xbb\xbf") else 0
    inside, opened, at_start, i = False, -1, True, start
    while i < len(text):
        c = text[i : i + 1]
        if inside:
            if c == b'"' and text[i + 1 : i + 2] == b'"':
                i += 1  # (a doubled quote: a quote)
            elif c == b'"':
                inside = False
            at_start = False
        elif c == b'"' and at_start:
            inside, opened = True, i
        else:
            at_start = c in (b",", b"\n", b"\r")
        i += 1
    return opened if inside else -1


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from([b"a", b",", b'"', b"\n", b"\r", b"\xef\xbb\xbf"]), max_size=40).map(b"".join),
    size=st.integers(1, 7),
)
def test_the_quote_follower_equals_a_character_by_character_reading_in_any_read_size(text, size):
    import io

    from perfmodel.ground.tables import _Quotes

    quotes = _Quotes(io.BytesIO(text))
    while quotes.read(size):
        pass
    quotes.read(size)  # (a reader asks again at the end)
    expected = _open_at_end(text)
    assert (quotes.opened if quotes.inside else -1) == expected


def test_write_table_refuses_what_no_file_can_hold_and_calibrate_an_unknown_model(tmp_path):
    from perfmodel import calibrate

    with pytest.raises(InputError, match="the column 'a' appears twice"):
        pio.write_table(pd.DataFrame([[1, 2]], columns=["a", "a"]), tmp_path / "x.csv")  # (an AttributeError)
    with pytest.raises(InputError, match="write_table: got a list"):
        pio.write_table([1, 2], tmp_path / "x.csv")
    assert not list(tmp_path.iterdir())
    with pytest.raises(InputError, match="the table: model: model 'nope': not a preset nor a config.json file"):
        calibrate(pd.DataFrame({"num_input_tokens": [128, 1024], "measured_ms": [0.5, 1.5]}), model="nope")
