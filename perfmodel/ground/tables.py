"""Table files perfmodel reads: one format detection, lossless readers of CSV, Parquet and JSON lines.

- **Formats** come from the name: ``.csv``, ``.parquet``/``.pq``, ``.jsonl``/``.json``/``.ndjson``, text formats
  optionally compressed (``.gz``, ``.bz2``, ``.xz``, ``.zst``); any other is refused.
- **Lossless pass-through**: Parquet columns keep their Arrow types (nullable integers stay integers); CSV fields
  are carried as text (typed only for a typed output, and then only where the whole column converts without
  loss); JSON values are Python's own (any integer exact), with the union of the keys of all lines as columns.
- **Nothing read past damage**: a CSV line of the wrong field count, a quoted field never closed, a JSON line
  that is not an object or names a key twice: each is refused, naming the line.

:mod:`perfmodel.io` writes tables and runs the delay job over files on these readers.
"""

from __future__ import annotations

import csv
import io as _io
import json
import lzma
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = [
    "FileFormat",
    "RepeatedKey",
    "compression_of",
    "csv_header",
    "detect",
    "json_lines",
    "open_input",
    "read_chunks",
    "refuse_other_separator",
    "unique_keys",
    "without_long_lines",
]

_FORMATS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
}
_COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}


# --- formats -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileFormat:
    """A file's format (``csv``, ``parquet`` or ``jsonl``) and compression (None or a codec name).

    Parameters
    ----------
    format : str
        ``"csv"``, ``"parquet"`` or ``"jsonl"``.
    compression : str, optional
        None, or ``"gzip"``, ``"bz2"``, ``"xz"`` or ``"zstd"``.

    Examples
    --------
    >>> FileFormat("csv", "gzip") == detect("trace.csv.gz")
    True
    """

    format: str
    compression: str | None = None


def detect(path: str | os.PathLike) -> FileFormat:
    """The format and compression of a file, from its name (the one detection every reader and writer uses).

    Parameters
    ----------
    path : str or os.PathLike
        A file name.

    Returns
    -------
    FileFormat
        The format (``"csv"``, ``"parquet"`` or ``"jsonl"``) and compression (or None).

    Examples
    --------
    >>> detect("requests.csv.gz")
    FileFormat(format='csv', compression='gzip')
    >>> detect("delays.parquet")
    FileFormat(format='parquet', compression=None)
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    compression = compression_of(path)
    if compression:
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext not in _FORMATS:
        known = ", ".join(sorted(_FORMATS))
        if suffixes:  # (a compressed file: the suffix before its compression's, with it)
            what = repr("".join(Path(path).suffixes[-2:] if compression else Path(path).suffixes[-1:]))
        else:
            what = f"no extension before {Path(path).suffix!r}" if compression else "no extension"
        raise InputError(
            str(path),
            f"cannot tell the format from {what}",
            f"name it with one of {known}; CSV and JSON lines may add .gz, .bz2, .xz or .zst",
        )
    fmt = _FORMATS[ext]
    if fmt == "parquet" and compression:
        raise InputError(
            str(path),
            "Parquet files are compressed inside; a compression suffix on one is not supported",
            "drop the compression suffix (e.g. name it delays.parquet)",
        )
    return FileFormat(fmt, compression)


def compression_of(path: str | os.PathLike) -> str | None:
    """The compression a file's last suffix names (``"gzip"``, ``"bz2"``, ``"xz"``, ``"zstd"``), or None: for a
    file whose format its name does not tell (perftest's text output, ``run.txt.gz``), what to open it with.

    >>> compression_of("write_bw.txt.gz"), compression_of("trace.csv"), compression_of("run.txt.zst")
    ('gzip', None, 'zstd')
    """
    suffix = Path(path).suffix.lower()
    return _COMPRESSIONS.get(suffix)


def open_input(path: Path, compression: str | None) -> IO[bytes]:
    if compression == "xz":
        return lzma.open(path, "rb")
    if compression:
        import pyarrow as pa

        return pa.input_stream(str(path), compression=compression)
    return open(path, "rb")


# --- reading -------------------------------------------------------------------------------


def read_chunks(
    path: str | os.PathLike,
    chunk_rows: int = 1_000_000,
    *,
    output_format: str = "jsonl",
) -> tuple[Iterator[pd.DataFrame], int | None]:
    """Chunks of at most ``chunk_rows`` rows of a CSV, Parquet or JSON-lines file, and the
    row count when the format tells it up front.

    Columns come through losslessly (see the module notes), in the form that suits
    ``output_format``, the format they are headed for: Parquet as Arrow-backed columns;
    JSON values as Python objects (for a Parquet output: Arrow columns of one type per key
    over the whole file); CSV fields as text (for a Parquet or JSON output: int64, float64
    or bool where every field of the whole file converts exactly). Typing JSON or CSV
    takes one extra pass over the file.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV, Parquet or JSON-lines file.
    chunk_rows : int
        Rows per chunk.
    output_format : str
        The format the chunks will be written in (how text columns are kept).

    Returns
    -------
    tuple of (iterator of pandas.DataFrame, int or None)
        The chunks, read lazily, and the file's row count when its format tells it up front (None otherwise).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "r.jsonl"
    >>> _ = path.write_text('{"id": 1152921504606846977, "n": 5}\\n{"n": 7, "tag": "x"}\\n')
    >>> chunks, _ = read_chunks(path)
    >>> next(chunks).to_dict("list")
    {'id': [1152921504606846977, None], 'n': [5, 7], 'tag': [None, 'x']}
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    if path.is_dir():
        raise IsADirectoryError(21, "is a folder, not a file", str(path))
    if chunk_rows < 1:
        raise InputError("chunk_rows", f"{chunk_rows!r} is below 1", "pass a whole number of rows >= 1")
    kind = detect(path)
    if kind.format == "parquet":
        return _parquet_chunks(path, chunk_rows)
    if kind.format == "csv":
        return _csv_chunks(path, kind.compression, chunk_rows, typed=output_format != "csv"), None
    return _jsonl_chunks(path, kind.compression, chunk_rows, typed=output_format == "parquet"), None


def _parquet_chunks(path: Path, chunk_rows: int) -> tuple[Iterator[pd.DataFrame], int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as error:  # pyarrow raises several types for a damaged file
        raise InputError(str(path), f"not a readable Parquet file ({error})", "check the file") from None

    def batches() -> Iterator[pd.DataFrame]:
        produced = False
        for batch in file.iter_batches(batch_size=chunk_rows):
            produced = True
            yield batch.to_pandas(types_mapper=_arrow_dtype)
        if not produced:  # no rows: still the columns, so that the output keeps them
            yield file.schema_arrow.empty_table().to_pandas(types_mapper=_arrow_dtype)

    return batches(), file.metadata.num_rows


def _arrow_dtype(arrow_type: Any) -> Any:
    """Arrow-backed pandas columns (exact types, nulls kept), except dictionaries: pandas Categoricals."""
    import pyarrow as pa

    return None if pa.types.is_dictionary(arrow_type) else pd.ArrowDtype(arrow_type)


def csv_header(path: Path, compression: str | None) -> list[str]:
    try:
        with open_input(path, compression) as raw, _io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
            header = next(csv.reader(text), None)  # (utf-8-sig: a byte-order mark is not part of the first name)
    except UnicodeDecodeError as error:
        raise InputError(
            str(path), f"is not UTF-8 text (byte {error.start}: {error.reason})", "save the file as UTF-8"
        ) from None
    if not header:
        raise InputError(str(path), "the file is empty (no header line)", "pass a CSV file with a header line")
    refuse_other_separator(header, str(path))
    if len(set(header)) != len(header):
        repeated = sorted({h for h in header if header.count(h) > 1})
        raise InputError(str(path), f"repeated column names {repeated}", "give every column a distinct name")
    return header


#: Separators of tables saved as "CSV" by spreadsheets in other settings, and their names in a message.
_OTHER_SEPARATORS = {";": "';'", "\t": "tabs"}


def refuse_other_separator(header: list[str], where: str) -> None:
    """Refuse a table whose header, read as CSV, is one field holding ``;`` or tabs and no comma: its fields are
    separated by another character (Excel saves "CSV" with ``;`` where the decimal mark is a comma), and every
    line would be one field, or split at its decimal commas. ``where`` names the file, for the message.

    >>> refuse_other_separator(["nbytes", "measured_ms"], "m.csv")
    >>> refuse_other_separator(["nbytes;measured_ms"], "m.csv")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: m.csv: separated by ';', not by commas (its header is 'nbytes;measured_ms'; Excel writes CSV so in locales whose decimal mark is a comma). Fix: save it as CSV with commas between fields and decimal points (e.g. pandas.read_csv(path, sep=';', decimal=',').to_csv(new_path, index=False)).
    """
    if len(header) != 1 or "," in header[0]:
        return
    found = [sep for sep in _OTHER_SEPARATORS if sep in header[0]]
    if not found:
        return
    sep = found[0]
    shown = header[0] if len(header[0]) <= 80 else header[0][:77] + "..."
    why = "; Excel writes CSV so in locales whose decimal mark is a comma" if sep == ";" else ""
    decimal = ", decimal=','" if sep == ";" else ""
    raise InputError(
        where,
        f"separated by {_OTHER_SEPARATORS[sep]}, not by commas (its header is {shown!r}{why})",
        "save it as CSV with commas between fields and decimal points (e.g. "
        f"pandas.read_csv(path, sep={sep!r}{decimal}).to_csv(new_path, index=False))",
    )


def _csv_batches(path: Path, compression: str | None, names: list[str]) -> Iterator[Any]:
    """The file as Arrow record batches of text columns (empty fields null), naming a bad line."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    bad: list[Any] = []

    def on_invalid_row(row: Any) -> str:
        bad.append(row)
        return "error"

    options = dict(
        read_options=pacsv.ReadOptions(use_threads=False, block_size=1 << 24),
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid_row),
        convert_options=pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            strings_can_be_null=True,
            null_values=[""],
            quoted_strings_can_be_null=True,
        ),
    )
    try:
        with open_input(path, compression) as stream, pacsv.open_csv(counted := _Quotes(stream), **options) as reader:
            yield from reader
    except pa.ArrowInvalid as error:
        if bad:
            row = bad[0]
            line = f"line {row.number}" if row.number is not None else "a line"
            raise InputError(
                f"{path}, {line}",
                f"{row.actual_columns} fields where the header has {row.expected_columns}: {row.text[:80]!r}",
                "repair or remove the line",
            ) from None
        raise InputError(str(path), f"not a readable CSV file ({error})", "check the file") from None
    if counted.inside:  # (pyarrow reads a quoted field never closed as closed at the end of the file)
        raise InputError(
            f"{path}, line {_line_at(path, compression, counted.opened)}",
            "a quoted field opens here and is never closed: it would run to the end of the file (cut short?)",
            'close the quote (a quote inside a quoted field is doubled: "5""")',
        )


class _Quotes:
    """A binary stream that follows, as it is read, whether a quoted field is open, as pyarrow reads CSV: a quote
    opens a field only at its start (the file's, after a comma or a line end); inside one, doubled quotes are a
    quote and a single one closes it; a quote anywhere else is a character. ``opened``: the byte offset of the
    open field's first quote."""

    closed = False

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.inside, self.opened = stream, False, -1
        self.offset, self.before, self.held = 0, b"\n", b""  # (bytes before ``held``; the byte before them)

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self._follow(bytes(data))
        return data

    def _follow(self, data: bytes) -> None:
        text = self.held + data
        if self.offset == 0 and data and len(text) < 3 and _BOM.startswith(text):  # (a byte-order mark, in parts)
            self.held = text
            return
        start = 3 if self.offset == 0 and text.startswith(_BOM) else 0
        end = len(text) if not data else len(text.rstrip(b'"'))  # (a run of quotes may go on in the next read)
        if text.find(b'"', start, end) >= 0:
            self._runs(np.frombuffer(text, np.uint8, end - start, start), self.offset + start)
        self.before = text[end - 1 : end] if end > start else self.before
        self.offset, self.held = self.offset + end, text[end:]

    def _runs(self, codes: np.ndarray, offset: int) -> None:
        """Follow the runs of quotes in ``codes`` (bytes from ``offset`` on). A run of even length changes nothing
        (doubled quotes inside a field, or a quoted field that is empty); of odd length, it closes the open field,
        or with none open opens one where it starts a field (else it is a character). Where no quote stands
        inside a field not quoted, opening and closing runs alternate, and numpy finds the state at the end."""
        quotes = np.flatnonzero(codes == 34)
        first = np.r_[True, np.diff(quotes) != 1]
        odd = quotes[first][np.diff(np.r_[np.flatnonzero(first), len(quotes)]) % 2 == 1]
        before = np.where(odd > 0, codes[np.maximum(odd - 1, 0)], ord(self.before))
        starts_field = np.isin(before, (44, 10, 13))  # (after a comma, a line end, or at the file's start)
        if starts_field[int(self.inside) :: 2].all():
            self.inside ^= len(odd) % 2 == 1
            self.opened = offset + int(odd[-1]) if self.inside and len(odd) else self.opened
            return
        for at, opens in zip(odd.tolist(), starts_field.tolist()):  # (a quote inside a field not quoted)
            if self.inside:
                self.inside = False
            elif opens:
                self.inside, self.opened = True, offset + at


_BOM = b"\xef\xbb\xbf"


def _line_at(path: Path, compression: str | None, offset: int) -> int:
    """The line (from 1) of the byte at ``offset``, lines ending as pyarrow ends them (``\\n``, ``\\r\\n`` or
    ``\\r``)."""
    lines, read, carried_cr = 1, 0, False
    with open_input(path, compression) as stream:
        while read < offset and (data := bytes(stream.read(min(1 << 24, offset - read)))):
            lines += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") - (carried_cr and data[:1] == b"\n")
            read, carried_cr = read + len(data), data.endswith(b"\r")
    return lines


# Numbers as CSV text that survive a round trip: no leading zeros (codes such as "007" stay text), no "+".
_INT_TEXT = r"^-?(0|[1-9][0-9]*)$"
_FLOAT_TEXT = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$|^-?\.[0-9]+([eE][-+]?[0-9]+)?$"
_BOOL_TEXT = {"true", "false", "True", "False", "TRUE", "FALSE"}


def _csv_kinds(path: Path, compression: str | None, names: list[str]) -> dict[str, str]:
    """The type each CSV column converts to without loss over the whole file: int, float, bool or text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    possible = {name: {"int", "float", "bool"} for name in names}
    for batch in _csv_batches(path, compression, names):
        for name, column in zip(batch.schema.names, batch.columns):
            kinds = possible[name]
            values = column.drop_null()
            if not kinds or len(values) == 0:
                continue
            if "int" in kinds and not pc.all(pc.match_substring_regex(values, _INT_TEXT)).as_py():
                kinds.discard("int")
            int_like = pc.match_substring_regex(values, _INT_TEXT)
            if pc.any(int_like).as_py():
                try:
                    whole = pc.cast(pc.filter(values, int_like), pa.int64())
                except pa.ArrowInvalid:  # beyond int64: carried as text, exact
                    kinds -= {"int", "float"}
                else:  # as a float, a whole number is exact up to 2**53
                    if pc.max(pc.abs(whole)).as_py() > 2**53:
                        kinds.discard("float")
            if "float" in kinds and not pc.all(pc.match_substring_regex(values, _FLOAT_TEXT)).as_py():
                kinds.discard("float")
            if "bool" in kinds and not pc.all(pc.is_in(values, pa.array(sorted(_BOOL_TEXT)))).as_py():
                kinds.discard("bool")
    order = ("int", "bool", "float")
    return {name: next((k for k in order if k in kinds), "text") for name, kinds in possible.items()}


def _csv_chunks(path: Path, compression: str | None, chunk_rows: int, typed: bool) -> Iterator[pd.DataFrame]:
    import pyarrow as pa
    import pyarrow.compute as pc

    names = csv_header(path, compression)
    kinds = _csv_kinds(path, compression, names) if typed else {}
    target = {"int": pa.int64(), "float": pa.float64()}
    produced = False
    for batch in _csv_batches(path, compression, names):
        produced = True
        columns = []
        for name, column in zip(batch.schema.names, batch.columns):
            kind = kinds.get(name, "text")
            if kind in target:
                column = pc.cast(column, target[kind])
            elif kind == "bool":
                column = pc.equal(pc.utf8_lower(column), "true")
            columns.append(column)
        table = pa.Table.from_arrays(columns, names=batch.schema.names)
        for start in range(0, table.num_rows, chunk_rows):
            yield table.slice(start, chunk_rows).to_pandas(types_mapper=pd.ArrowDtype)
    if not produced:  # a header and no rows: the columns still pass through
        yield pd.DataFrame({name: pd.Series(dtype=pd.ArrowDtype(pa.string())) for name in names})


class RepeatedKey(ValueError):
    """A JSON object names one key twice (JSON readers keep one of the values, silently)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: an object whose keys are all distinct, else :class:`RepeatedKey`."""
    record = dict(pairs)
    if len(record) != len(pairs):
        repeated = sorted({k for k, _ in pairs if sum(1 for q, _ in pairs if q == k) > 1})
        raise RepeatedKey(f"the key(s) {', '.join(map(repr, repeated))} appear twice in one object")
    return record


def json_lines(path: Path, compression: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a line that is not a JSON object is an error."""
    with open_input(path, compression) as raw, _io.TextIOWrapper(raw, encoding="utf-8-sig") as text:  # (a BOM: as CSV)
        for number, line in enumerate(text, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line, object_pairs_hook=unique_keys)
            except RepeatedKey as error:
                raise InputError(f"{path}, line {number}", str(error), "keep one value of each key") from None
            except ValueError as error:
                raise InputError(
                    f"{path}, line {number}",
                    f"not valid JSON ({getattr(error, 'msg', error)})",
                    "repair or remove the line (each line holds one JSON object)",
                ) from None
            if not isinstance(record, dict):
                raise InputError(
                    f"{path}, line {number}",
                    f"a JSON {type(record).__name__}, not an object",
                    'write one JSON object per line, e.g. {"num_input_tokens": 1024}',
                )
            yield number, record


class _JsonKind:
    """What one key holds over a whole JSON-lines file: the value types, and the largest whole number."""

    def __init__(self) -> None:
        self.types: set[type] = set()
        self.largest_int = 0

    def add(self, value: Any) -> None:
        if value is not None:
            self.types.add(type(value))
            if type(value) is int:
                self.largest_int = max(self.largest_int, abs(value))

    def arrow_type(self) -> Any:
        """The Arrow type that holds every value exactly; None: JSON text."""
        import pyarrow as pa

        if self.types <= {bool}:
            return pa.bool_()
        if self.types <= {int} and self.largest_int < 2**63:
            return pa.int64()
        if self.types <= {int, float} and self.largest_int <= 2**53:
            return pa.float64()
        if self.types <= {str}:
            return pa.string()
        return None  # lists, objects, huge integers or mixed types


def _jsonl_chunks(path: Path, compression: str | None, chunk_rows: int, typed: bool) -> Iterator[pd.DataFrame]:
    kinds: dict[str, _JsonKind] = {}
    for _, record in json_lines(path, compression):  # first pass: every key of the file, in order of appearance
        for key, value in record.items():
            kinds.setdefault(key, _JsonKind()).add(value)
    if not kinds:
        raise InputError(str(path), "no JSON objects with fields in the file", "pass a JSON-lines file of requests")
    types = {name: kind.arrow_type() for name, kind in kinds.items()} if typed else None
    batch: list[dict[str, Any]] = []
    for _, record in json_lines(path, compression):
        batch.append(record)
        if len(batch) == chunk_rows:
            yield _records_frame(batch, list(kinds), types)
            batch = []
    if batch:
        yield _records_frame(batch, list(kinds), types)


def _records_frame(records: list[dict[str, Any]], names: list[str], types: dict[str, Any] | None) -> pd.DataFrame:
    """JSON objects as a frame, None where a key is absent: Python values (exact), or with ``types``
    Arrow columns of those types (JSON text where the type is None)."""
    import pyarrow as pa

    columns: dict[str, Any] = {}
    for name in names:
        values = [record.get(name) for record in records]
        if types is None:
            columns[name] = np.empty(len(records), dtype=object)
            columns[name][:] = values
            continue
        arrow_type = types[name]
        if arrow_type is None:
            arrow_type, values = pa.string(), [None if v is None else json.dumps(v) for v in values]
        elif arrow_type == pa.float64():
            values = [None if v is None else float(v) for v in values]
        columns[name] = pd.array(pa.array(values, type=arrow_type), dtype=pd.ArrowDtype(arrow_type))
    # (object: no inference may turn None into NaN)
    return pd.DataFrame(columns, dtype=object if types is None else None, copy=False)


def without_long_lines(path: str | os.PathLike) -> tuple[_io.StringIO, list[int]]:
    """A CSV file's text without its records of more fields than the header (pandas stops at the first, or reads
    its first field as an index), and which were left out (their positions among the file's records, blank lines
    not counted, from 0): what ``errors="skip"`` reads instead of the file.

    Blank lines are kept (a CSV reader skips them, uncounted); a record of fewer fields stays, for the reader to
    find its empty cells. The file is read as UTF-8 text (a byte-order mark aside), compressed or not.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file with a header line.

    Returns
    -------
    tuple of (io.StringIO, list of int)
        The records kept, as CSV text from the header on, and the positions of the records left out.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = path.write_text("a,b\\n1,2\\n3,4,5\\n6,7\\n")
    >>> text, left_out = without_long_lines(path)
    >>> text.getvalue().splitlines(), left_out
    (['a,b', '1,2', '6,7'], [1])
    """
    path = Path(path)
    kept, left_out, position = _io.StringIO(), [], 0
    writer = csv.writer(kept, lineterminator="\n")
    with (
        open_input(path, detect(path).compression) as raw,
        _io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text,
    ):
        records = csv.reader(text)
        header = next(records, None)
        if header is None:
            return kept, []
        writer.writerow(header)
        for record in records:
            if len(record) > len(header):
                left_out.append(position)
            else:
                writer.writerow(record)
            position += bool(record)  # (a blank line is no record: the reader skips it)
    kept.seek(0)
    return kept, left_out
