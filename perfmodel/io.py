"""Files in and out: the readers of :mod:`perfmodel.ground.tables`, atomic writers, safe output folders.

Rules every command follows (user files are precious):

- **Formats** come from the name: ``.csv``, ``.parquet``/``.pq``, ``.jsonl``/``.json``/``.ndjson``, text formats
  optionally compressed (``.gz``, ``.bz2``, ``.xz``, ``.zst``), for reading and writing alike; any other is refused.
- **Lossless pass-through**: columns perfmodel does not compute come out with the values (and, where the output
  format has types, the types) they went in with (:mod:`perfmodel.ground.tables` reads them so). Floats are written with round-trip precision, except the results perfmodel computed, which CSV carries
  to 13 significant digits (the model's precision; Parquet, JSON lines: every bit).
- **Atomic outputs**: a file is written to a temporary name beside its target and renamed onto it when complete; an
  output folder receives only perfmodel's own files (listed in its ``.perfmodel-output.json``), staged in a hidden
  folder and moved in when all are complete. A file perfmodel did not write is never replaced or removed, and an
  output may not be, contain or lie inside one of the inputs.
"""

from __future__ import annotations

import contextlib
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

from .errors import Errors, InputError, warn
from .ground.files import MANIFEST, atomic_file, check_not_overlapping, output_folder
from .ground.tables import FileFormat, detect, open_input, read_chunks
from .inputs.coerce import check_errors

__all__ = ["FileFormat", "MANIFEST", "delay_file", "detect", "json_text", "output_folder", "read_chunks", "significant",
           "write_table"]


# --- writing -------------------------------------------------------------------------------

def _open_output(path: Path, compression: str | None) -> IO[bytes]:
    if compression == "xz":
        return lzma.open(path, "wb")
    if compression:
        import pyarrow as pa

        return pa.output_stream(str(path), compression=compression)
    return open(path, "wb")


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


def json_text(data: dict[str, Any]) -> str:
    """A summary as strict JSON text: a number that is NaN or infinite (no JSON number) is ``null``, never the
    bare ``NaN`` or ``Infinity`` that strict readers (``jq``, browsers) refuse.

    Parameters
    ----------
    data : dict
        The summary: numbers (numpy's too), words, and lists or dicts of them.

    Returns
    -------
    str
        Indented JSON text.

    Examples
    --------
    >>> print(json_text({"p99_ms": 12.5, "decode_memory_peak": float("nan")}))
    {
     "p99_ms": 12.5,
     "decode_memory_peak": null
    }
    """

    def strict(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [strict(v) for v in value]
        if isinstance(value, (float, np.floating)) and not math.isfinite(value):
            return None
        return value.item() if isinstance(value, np.generic) else value

    return json.dumps(strict(data), indent=1, allow_nan=False)


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

    >>> significant(np.array([6.710886400000001, 263.19257600000003, 13159628800.0, np.nan])).tolist()
    [6.7108864, 263.192576, 13159628800.0, nan]
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

    A file already at ``path`` is replaced (atomically: the old one stays whole until the new one is complete).
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
    if not isinstance(df, pd.DataFrame):
        raise InputError("write_table", f"got a {type(df).__name__}", "pass a pandas DataFrame")
    twice = df.columns[df.columns.duplicated()]
    if len(twice):  # (a file's header must name each column once)
        raise InputError("write_table", f"the column {twice[0]!r} appears twice", "rename or drop one of them")
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


def _non_number_cell(source: Path, chunk: pd.DataFrame, argument: str, keywords: dict[str, Any]) -> InputError | None:
    """The error to report when the API refused ``argument``'s whole column (its rows uncounted) for holding
    booleans, durations or dates (:func:`perfmodel.inputs.coerce.non_numeric_kind`): the first such cell, named at
    its file, line (a Parquet file's row) and column, and what it is not (true is no count of 1 token); None when
    the refusal is of something else (an option, a value given for every row).

    >>> import pandas as pd, tempfile, pathlib
    >>> source = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = source.write_text('{"num_input_tokens": 5}\\n{"num_input_tokens": true}\\n')
    >>> chunk = pd.DataFrame({"num_input_tokens": [5, True]}, dtype=object, index=[1, 2])
    >>> print(_non_number_cell(source, chunk, "num_input_tokens", {}).problem)
    true is a boolean, not a token count
    """
    from .inputs.coerce import non_numeric_kind
    from .inputs.table import INPUTS

    entry = INPUTS.get(argument)
    column = keywords.get(argument, argument)
    if entry is None or entry.kind not in ("count", "real") or not isinstance(column, str) or column not in chunk:
        return None
    kind = non_numeric_kind(chunk[column])
    if kind is None:
        return None
    values = chunk[column].to_numpy(dtype=object)
    at = next((i for i, v in enumerate(values) if non_numeric_kind([v]) is not None), 0)
    value, text = values[at], detect(source).format != "parquet"  # (a text file wrote true, Parquet holds True)
    shown = json.dumps(bool(value)) if text and isinstance(value, (bool, np.bool_)) else repr(value)
    tokens = argument.endswith("_tokens")
    what = "a token count" if tokens else f"a number ({argument})"
    a = {"booleans": "a boolean", "durations": "a duration", "dates": "a date"}[kind]
    fix = (f"write {'the token count' if tokens else argument} there as a plain number"
           f"{' (true is not 1 token)' if tokens and kind == 'booleans' else ''}, or remove the row")  # fmt: skip
    return InputError(f"{source}, {_place(source, int(chunk.index[at]))}, column {column!r}",
                      f"{shown} is {a}, not {what}", fix)  # fmt: skip


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
            if report.rows == 0 and _RESULT in chunk.columns:  # (said once, as the first chunk is read)
                warn(f"{source} has a column {_RESULT}, which the computed {_RESULT} replaces in the output: "
                     f"rename the file's column to keep both")
            chunk.index = pd.RangeIndex(report.rows + 1, report.rows + 1 + len(chunk))
            report.rows += len(chunk)
            bar.update(len(chunk))
            try:
                delays = handoff_delays(chunk, errors=errors, **keywords)
            except InputError as error:
                if error.n_invalid is None:  # one bad value (an option) for every row: the option is at fault
                    raise _non_number_cell(source, chunk, error.argument, keywords) or error from None
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
    A file already at ``output_path`` is replaced (the command line's ``perfmodel delay`` refuses one it did not
    write, unless ``--replace``).

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

