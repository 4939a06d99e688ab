"""Files in and out: one format detection, lossless readers, atomic writers, safe output folders.

Rules every command follows (user files are precious):

- **Formats** come from the name: ``.csv``, ``.parquet``/``.pq``, ``.jsonl``/``.json``/``.ndjson``, text formats
  optionally compressed (``.gz``, ``.bz2``, ``.xz``, ``.zst``), for reading and writing alike; any other is refused.
- **Lossless pass-through**: columns perfmodel does not compute come out with the values (and, where the output
  format has types, the types) they went in with: Parquet columns keep their Arrow types (nullable integers stay
  integers); CSV fields are carried as text (typed only for a typed output, and then only where the whole column
  converts without loss); JSON values are Python's own (any integer exact), with the union of the keys of all lines
  as columns. Floats are written with round-trip precision, except the results perfmodel computed, which CSV carries
  to 13 significant digits (the model's precision; Parquet, JSON lines: every bit).
- **Atomic outputs**: a file is written to a temporary name beside its target and renamed onto it when complete; an
  output folder receives only perfmodel's own files (listed in its ``.perfmodel-output.json``), staged in a hidden
  folder and moved in when all are complete. A file perfmodel did not write is never replaced or removed, and an
  output may not be, contain or lie inside one of the inputs.
"""

from __future__ import annotations

import contextlib
import csv
import io as _io
import json
import lzma
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from .errors import Errors, InputError
from .ground.files import MANIFEST, atomic_file, check_not_overlapping, output_folder
from .inputs.coerce import check_errors

__all__ = ["FileFormat", "MANIFEST", "delay_file", "detect", "output_folder", "read_chunks", "significant", "write_table"]

_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".json": "jsonl",
            ".ndjson": "jsonl"}
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
    compression = _COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext not in _FORMATS:
        known = ", ".join(sorted(_FORMATS))
        what = repr(Path(path).suffix) if Path(path).suffix else "no extension"
        raise InputError(str(path), f"cannot tell the format from {what}",
                         f"name it with one of {known}; CSV and JSON lines may add .gz, .bz2, .xz or .zst")
    fmt = _FORMATS[ext]
    if fmt == "parquet" and compression:
        raise InputError(str(path), "Parquet files are compressed inside; a compression suffix on one is not supported",
                         "drop the compression suffix (e.g. name it delays.parquet)")
    return FileFormat(fmt, compression)


def open_input(path: Path, compression: str | None) -> IO[bytes]:
    if compression == "xz":
        return lzma.open(path, "rb")
    if compression:
        import pyarrow as pa

        return pa.input_stream(str(path), compression=compression)
    return open(path, "rb")


def _open_output(path: Path, compression: str | None) -> IO[bytes]:
    if compression == "xz":
        return lzma.open(path, "wb")
    if compression:
        import pyarrow as pa

        return pa.output_stream(str(path), compression=compression)
    return open(path, "wb")


# --- reading -------------------------------------------------------------------------------

def read_chunks(path: str | os.PathLike, chunk_rows: int = 1_000_000, *, output_format: str = "jsonl",
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
        raise InputError(str(path), f"is not UTF-8 text (byte {error.start}: {error.reason})",
                         "save the file as UTF-8") from None
    if not header:
        raise InputError(str(path), "the file is empty (no header line)", "pass a CSV file with a header line")
    if len(set(header)) != len(header):
        repeated = sorted({h for h in header if header.count(h) > 1})
        raise InputError(str(path), f"repeated column names {repeated}", "give every column a distinct name")
    return header


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
        convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=True,
                                             null_values=[""], quoted_strings_can_be_null=True),
    )
    try:
        with open_input(path, compression) as stream, pacsv.open_csv(stream, **options) as reader:
            yield from reader
    except pa.ArrowInvalid as error:
        if bad:
            row = bad[0]
            line = f"line {row.number}" if row.number is not None else "a line"
            raise InputError(f"{path}, {line}", f"{row.actual_columns} fields where the header has "
                             f"{row.expected_columns}: {row.text[:80]!r}", "repair or remove the line") from None
        raise InputError(str(path), f"not a readable CSV file ({error})", "check the file") from None


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
    with open_input(path, compression) as raw, _io.TextIOWrapper(raw, encoding="utf-8") as text:
        for number, line in enumerate(text, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line, object_pairs_hook=unique_keys)
            except RepeatedKey as error:
                raise InputError(f"{path}, line {number}", str(error), "keep one value of each key") from None
            except ValueError as error:
                raise InputError(f"{path}, line {number}", f"not valid JSON ({getattr(error, 'msg', error)})",
                                 "repair or remove the line (each line holds one JSON object)") from None
            if not isinstance(record, dict):
                raise InputError(f"{path}, line {number}", f"a JSON {type(record).__name__}, not an object",
                                 "write one JSON object per line, e.g. {\"num_input_tokens\": 1024}")
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
    return pd.DataFrame(columns, dtype=object if types is None else None, copy=False)  # object: no inference may turn None into NaN


# --- writing -------------------------------------------------------------------------------

def _nested_as_json(df: pd.DataFrame) -> pd.DataFrame:
    """Lists and dicts (object or Arrow columns) as JSON text, for CSV and Parquet cells."""
    import pyarrow as pa

    changed = {}
    for name in df.columns:
        column = df[name]
        dtype = column.dtype
        if isinstance(dtype, pd.ArrowDtype) and pa.types.is_nested(dtype.pyarrow_dtype):
            changed[name] = pd.array([None if v is None else json.dumps(v) for v in
                                      pa.array(column).to_pylist()], dtype=pd.ArrowDtype(pa.string()))
        elif dtype == np.dtype(object) and any(isinstance(v, (list, dict)) for v in column):
            changed[name] = column.map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
    return df.assign(**changed) if changed else df


def _python_values(column: pd.Series) -> list[Any]:
    """A column as exact Python values, None for missing (NaN included: JSON has no NaN)."""
    import pyarrow as pa

    if isinstance(column.dtype, pd.ArrowDtype):
        values = pa.array(column).to_pylist()
    elif column.dtype == object:
        values = column.tolist()
    else:
        values = column.astype(object).where(column.notna(), None).tolist()
    return [None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v for v in values]


def _typed_for_parquet(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns (JSON values) as Arrow columns whose type holds every value exactly."""
    import pyarrow as pa

    changed = {}
    for name in df.columns:
        if df[name].dtype != object:
            continue
        values = _python_values(df[name])
        kinds = {type(v) for v in values if v is not None}
        if kinds <= {bool}:
            arrow = pa.array(values, type=pa.bool_())
        elif kinds <= {int} and all(-(2**63) <= v < 2**63 for v in values if v is not None):
            arrow = pa.array(values, type=pa.int64())
        elif kinds <= {int, float} and all(abs(v) <= 2**53 for v in values if isinstance(v, int)):
            arrow = pa.array([None if v is None else float(v) for v in values], type=pa.float64())
        elif kinds <= {str}:
            arrow = pa.array(values, type=pa.string())
        else:  # lists, objects, huge integers or mixed types: exact as JSON text
            arrow = pa.array([None if v is None else json.dumps(v) for v in values], type=pa.string())
        changed[name] = pd.array(arrow, dtype=pd.ArrowDtype(arrow.type))
    return df.assign(**changed) if changed else df


class TableWriter:
    """Appends frames to one CSV, Parquet or JSON-lines file (compressed as the name says).

    Every frame must have the columns of the first. ``path`` is where the bytes go (a
    temporary file); ``kind`` comes from the final name.
    """

    def __init__(self, path: Path, kind: FileFormat, *, rounded: Sequence[str] = ()) -> None:
        self.path, self.kind = path, kind
        self.rounded = tuple(rounded) if kind.format == "csv" else ()  # see write_table
        self.columns: list[Any] | None = None
        self._parquet: Any = None
        self._stream: Any = None
        self._header_written = False

    def write(self, df: pd.DataFrame) -> None:
        if self.columns is None:
            self.columns = list(df.columns)
        elif list(df.columns) != self.columns:
            raise InputError(str(self.path), f"the columns changed between chunks ({list(df.columns)} after "
                             f"{self.columns})", "write every chunk with the same columns")
        if self.kind.format == "parquet":
            self._write_parquet(df)
            return
        floats = [name for name in self.rounded if name in df.columns and pd.api.types.is_float_dtype(df[name].dtype)]
        if floats:
            df = df.assign(**{name: _significant_column(df[name]) for name in floats})
        if self._stream is None:
            self._stream = _io.TextIOWrapper(_open_output(self.path, self.kind.compression), encoding="utf-8",
                                             newline="")
        if self.kind.format == "csv":
            _nested_as_json(df).to_csv(self._stream, header=not self._header_written, index=False,
                                       lineterminator="\n")
            self._header_written = True
        else:
            values = [_python_values(df[name]) for name in df.columns]
            names = [str(name) for name in df.columns]
            self._stream.writelines(json.dumps(dict(zip(names, row)), ensure_ascii=False) + "\n"
                                    for row in zip(*values))

    def _write_parquet(self, df: pd.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(_typed_for_parquet(df), preserve_index=False)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, table.schema)
        elif table.schema != self._parquet.schema:
            try:
                table = table.cast(self._parquet.schema)  # safe casts only: never a silent loss
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
                changed = [f.name for f, g in zip(table.schema, self._parquet.schema) if f.type != g.type]
                raise InputError(str(self.path), f"column(s) {changed} changed type between chunks",
                                 "pass a larger --chunk-rows, or write CSV or JSON lines") from None
        self._parquet.write_table(table)

    def close(self, empty_columns: Sequence[str] = ()) -> None:
        """Finish the file; with no frame written, a valid empty file with ``empty_columns``."""
        if self.columns is None:
            self.write(pd.DataFrame({name: pd.Series(dtype="Float64") for name in empty_columns}))
        if self._parquet is not None:
            self._parquet.close()
        if self._stream is not None:
            self._stream.close()

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            if self._parquet is not None:
                self._parquet.close()
        with contextlib.suppress(Exception):
            if self._stream is not None:
                self._stream.close()


#: Significant digits of the computed columns a CSV table is written with (``write_table(rounded=...)``):
#: the model's own precision (the contract: within 1e-12 of upstream; 13 digits are within 5e-13), without
#: the last bits of float arithmetic (``6.710886400000001``).
SIGNIFICANT_DIGITS = 13


def significant(values: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """Floats rounded to ``digits`` significant digits (whole numbers, zeros, NaN, infinities and magnitudes
    below 1e-280 as they are): how CSV outputs carry perfmodel's computed columns.

    Parameters
    ----------
    values : numpy.ndarray
        Floats (any shape).
    digits : int
        Significant digits to keep (default :data:`SIGNIFICANT_DIGITS`, 13).

    Returns
    -------
    numpy.ndarray
        float64, of the shape of ``values``.

    Examples
    --------

    >>> significant(np.array([6.710886400000001, 263.19257600000003, 13159628800.0, np.nan]))
    array([6.7108864000e+00, 2.6319257600e+02, 1.3159628800e+10,          nan])
    >>> [repr(float(v)) for v in significant(np.array([6.710886400000001, 0.1 + 0.2]))]
    ['6.7108864', '0.3']
    """
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        magnitude = np.floor(np.log10(np.abs(values)))
        scale = 10.0 ** (digits - 1 - magnitude)
        rounded = np.round(values * scale) / scale
    keep = ~np.isfinite(rounded) | (values == np.floor(values)) | (np.abs(values) < 1e-280)
    return np.where(keep, values, rounded)


def write_table(df: pd.DataFrame, path: str | os.PathLike, *, rounded: Sequence[str] = ()) -> Path:
    """Write a frame as CSV, Parquet or JSON lines (format and compression from the name), atomically.

    Floats are written to the last bit (shortest round-trip form), except the float columns named in
    ``rounded`` (results perfmodel computed), which CSV carries to :data:`SIGNIFICANT_DIGITS`
    significant digits; Parquet and JSON lines keep every bit:

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    path : str or os.PathLike
        Its file (format and compression from the name).
    rounded : sequence of str
        Float columns CSV writes to :data:`SIGNIFICANT_DIGITS` significant digits.

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pandas as pd, pyarrow.csv, tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "t.csv.gz"
    >>> _ = write_table(pd.DataFrame({"x": [0.1 + 0.2], "delay_ms": [6.710886400000001]}), target, rounded=["delay_ms"])
    >>> pyarrow.csv.read_csv(target).to_pylist()  # pandas 2's read_csv would round x: 0.3
    [{'x': 0.30000000000000004, 'delay_ms': 6.7108864}]
    """
    path = Path(path)
    kind = detect(path)
    with atomic_file(path) as tmp:
        writer = TableWriter(tmp, kind, rounded=rounded)
        try:
            writer.write(df)
        except BaseException:
            writer.abort()
            raise
        writer.close()
    return path


def _significant_column(column: pd.Series) -> pd.Series:
    """A float column (numpy or nullable) with :func:`significant` values, its missing entries kept."""
    values = significant(column.to_numpy(dtype=np.float64, na_value=np.nan))
    return pd.Series(values, index=column.index, name=column.name).astype(column.dtype)


# --- the delay job over files --------------------------------------------------------------

@dataclass
class Report:
    """What one pass over a file found: rows read, and the first invalid row with the totals."""

    rows: int = 0
    error: InputError | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, error: InputError) -> None:
        for argument, count in (error.counts or {error.argument: error.n_invalid or 0}).items():
            self.counts[argument] = self.counts.get(argument, 0) + count
        if self.error is None:
            self.error = error

    def merge(self, other: Report) -> None:
        """Add a later part's report (parts in input order)."""
        self.rows += other.rows
        for argument, count in other.counts.items():
            self.counts[argument] = self.counts.get(argument, 0) + count
        if self.error is None:
            self.error = other.error

    def raise_if_invalid(self) -> None:
        """The first invalid row, with the totals over everything read, as an :class:`InputError`."""
        if self.error is not None:
            first = self.error
            raise first.relocated(first.where, first.row, n_invalid=self.counts.get(first.argument, first.n_invalid),
                                  counts=self.counts)


_RESULT = "handoff_delay_ms"


@contextlib.contextmanager
def damage_named(source: Path) -> Iterator[None]:
    """Inside: a damaged file (truncated or corrupt compression), whose error names no file, is reported with
    ``source``'s name (an error naming a file, such as a missing one, passes as it is)."""
    import zlib

    try:
        yield
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as error:
        if isinstance(error, OSError) and error.filename:
            raise
        raise InputError(str(source), f"could not be read ({error})", "check that the file is complete and "
                         "in the format (and compression) its name says") from None


def _reading(source: Path, chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``chunks``, with a damaged file (truncated or corrupt compression) reported with its name."""
    while True:
        with damage_named(source):
            try:
                chunk = next(chunks)
            except StopIteration:
                return
        yield chunk


def _place(path: Path, row: int) -> str:
    """Where data row ``row`` (from 1) of a file is, in words: its line in a CSV file (the header and blank lines
    counted, as an editor counts them) or in a JSON-lines file, its row in a Parquet file."""
    kind = detect(path)
    if kind.format == "parquet":
        return f"row {row}"
    seen = -1 if kind.format == "csv" else 0  # (a CSV file's first line is its header)
    with open_input(path, kind.compression) as raw, _io.BufferedReader(raw) as lines:  # type: ignore[type-var]  # (typeshed asks for a RawIOBase; any binary stream works)
        for number, line in enumerate(lines, start=1):
            blank = not line.rstrip(b"\r\n") if kind.format == "csv" else not line.strip()  # (as each reader skips)
            seen += not blank
            if seen == row:
                return f"line {number}"
    return f"row {row}"


def delay_rows(source: str | os.PathLike, writer: TableWriter | None, *, chunk_rows: int, errors: Errors,
               progress: bool | None, keywords: dict[str, Any]) -> Report:
    """Compute ``handoff_delay_ms`` for every row of ``source``, appending to ``writer``.

    Rows are numbered from 1; the first invalid one is said at its line of a CSV or JSON-lines file.
    Invalid rows (with ``errors="raise"``) stop the writing but not the reading, so the report
    counts them over the whole file.
    """
    from .frame import handoff_delays
    from .ground.progress import progress_bar

    source = Path(source)
    output_format = "parquet" if writer is None else writer.kind.format
    chunks, total = read_chunks(source, chunk_rows, output_format=output_format)
    chunks = _reading(source, chunks)
    report = Report()
    with progress_bar(total, unit="rows", desc=source.name, progress=progress) as bar:
        for chunk in chunks:
            chunk.index = pd.RangeIndex(report.rows + 1, report.rows + 1 + len(chunk))
            report.rows += len(chunk)
            bar.update(len(chunk))
            try:
                delays = handoff_delays(chunk, errors=errors, **keywords)
            except InputError as error:
                if error.n_invalid is None:  # one bad value (an option) for every row: the option is at fault
                    raise
                place = _place(source, error.row) if report.error is None else None  # (the first is reported)
                report.add(error.relocated(f"{source}: {error.where}", error.row, place=place))
                continue
            if report.error is None and writer is not None:
                writer.write(chunk.assign(**{_RESULT: delays}))
    return report


def delay_file(
    input_path: str | os.PathLike, output_path: str | os.PathLike, *, chunk_rows: int = 1_000_000,
    errors: Errors = "raise", progress: bool | None = None, **keywords: Any,
) -> int:
    """Add ``handoff_delay_ms`` to every row of a CSV, Parquet or JSON-lines file.

    ``keywords`` are those of :func:`perfmodel.handoff_delays` (column names or values,
    model and link names included). Every other column is passed through losslessly.
    Error messages name the first invalid row by its line of a CSV or JSON-lines file (by its
    row, from 1, of a Parquet file), and count invalid rows over the whole file. The output is written atomically: on any error, nothing is written.

    Parameters
    ----------
    input_path : str or os.PathLike
        The requests: CSV, Parquet or JSON lines (compression from the name).
    output_path : str or os.PathLike
        Where the requests go with a ``handoff_delay_ms`` column added.
    chunk_rows : int
        Rows read and computed at a time.
    errors : {'raise', 'coerce'}
        As :func:`perfmodel.handoff_delay_ms`.
    progress : bool, optional
        A progress bar (default: on a terminal).
    **keywords
        The inputs of :func:`perfmodel.handoff_delay_ms` (values or column names).

    Returns
    -------
    int
        The number of rows written.

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> from perfmodel.io import delay_file
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"num_input_tokens": [1024, 32768]}).to_csv(folder / "in.csv", index=False)
    >>> delay_file(folder / "in.csv", folder / "out.csv", kv_bytes_per_token="llama-3.1-70b",
    ...            kv_transfer_bandwidth="ib-ndr", progress=False)
    2
    >>> pd.read_csv(folder / "out.csv")["handoff_delay_ms"].round(3).tolist()
    [6.711, 214.748]
    """
    check_errors(errors)
    source, target = Path(input_path), Path(output_path)
    kind = detect(target)
    detect(source)
    check_not_overlapping(target, [source])
    if not source.exists():
        raise FileNotFoundError(2, "no such file", str(source))
    with atomic_file(target) as tmp:
        writer = TableWriter(tmp, kind, rounded=[_RESULT])  # (the input's columns as they are)
        try:
            report = delay_rows(source, writer, chunk_rows=chunk_rows, errors=errors, progress=progress,
                                keywords=keywords)
            report.raise_if_invalid()
            writer.close(empty_columns=[_RESULT])
        except BaseException:
            writer.abort()
            raise
    return report.rows

