"""Request traces: read them (Mooncake, Azure, any CSV/Parquet table) and make synthetic ones.

Replaying them through the handoff model is :mod:`perfmodel.replay`.

Canonical trace columns: ``arrival_ms`` (float, from the earliest request),
``num_input_tokens``, ``num_output_tokens`` (where the file has them: never made up) and,
when the format has them, ``ready_ms``, ``prefill_worker`` and ``hash_ids``
(one id per ``hash_block_tokens`` tokens of the prompt, equal ids = a shared prefix
block), held as an Arrow ``list<int64>`` column: one flat int64 array with offsets,
seen by users as lists.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import InputError, check_whole, not_a_number, warn
from ..ground.data import MOONCAKE_BLOCK_TOKENS
from ..inputs.codes import choice_names
from ..inputs.coerce import check_errors, non_numeric_kind
from ..inputs.words import count
from ..options import deprecated_constant, option
from .trace_cells import Rule, Source, malformed_rows_error, row_rules
from .trace_cells import place as _place
from .trace_text import ShortenedList, id_cell, one_format

__all__ = ["read_trace", "synthetic_trace"]

# (the most requests synthetic_trace makes at once: the option max_synthetic_requests, perfmodel.set_options;
# the old constant, MAX_REQUESTS, reads it with a warning)
__getattr__ = deprecated_constant("perfmodel.replay.traces", {"MAX_REQUESTS": "max_synthetic_requests"})

_CANONICAL = ("arrival_ms", "num_input_tokens", "num_output_tokens")
#: The columns a generic table may have too, kept under these names: when each prefill completed, the prefill
#: worker each request ran on (as :func:`perfmodel.replay_ttft` and a cluster's replay read it), each request's
#: own prefill time (ms, as :func:`perfmodel.replay_ttft` reads it; an empty cell: none of its own), the hashes.
_OPTIONAL = ("ready_ms", "prefill_worker", "prefill_ms", "hash_ids")
HASH_TYPE = pa.list_(pa.int64())

#: The columns of the trace formats that name them their own way: canonical name -> the format's column.
FORMAT_COLUMNS = {
    "mooncake": {"arrival_ms": "timestamp", "num_input_tokens": "input_length", "num_output_tokens": "output_length",
                 "hash_ids": "hash_ids"},
    "azure": {"arrival_ms": "TIMESTAMP", "num_input_tokens": "ContextTokens", "num_output_tokens": "GeneratedTokens"},
}


# --- reading -------------------------------------------------------------------------------

#: pandas 2's CSV parser reads some floats one unit in the last place off (0.30000000000000004 as 0.3)
#: unless asked for round trips; pandas 3 reads them exactly by default (and deprecates the option).
_EXACT_FLOATS: dict[str, str] = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _detect(path: Path) -> str:
    """The trace format, from the file name (the one detection of :func:`perfmodel.io.detect`), a CSV's header
    and the keys of a JSON-lines file's first object (Mooncake's ``timestamp`` and ``input_length`` both, else a
    generic table, ``"jsonl"``)."""
    from ..ground.tables import csv_header, detect, json_lines
    from ..io import damage_named

    kind = detect(path)
    with damage_named(path):
        if kind.format == "csv":
            return "azure" if {"TIMESTAMP", "ContextTokens"} <= set(csv_header(path, kind.compression)) else "csv"
        if kind.format == "jsonl":
            try:
                keys = set(next(json_lines(path, kind.compression), (0, {"timestamp": None}))[1])
            except (InputError, UnicodeDecodeError):  # (a malformed first line: the Mooncake reader names it)
                return "mooncake"
            return "mooncake" if {"timestamp", "input_length"} <= keys else "jsonl"  # (Mooncake's keys, both)
    return kind.format


def format_columns(path: str | os.PathLike) -> dict[str, str]:
    """The columns of a trace file in a format that names them its own way (Mooncake JSON lines, the Azure
    CSV), as :func:`read_trace` reads them: canonical name -> the file's column; ``{}`` for a generic table
    (its columns go by perfmodel's names, or by a mapping).

    Parameters
    ----------
    path : str or os.PathLike
        A trace file (CSV, Parquet or JSON lines).

    Returns
    -------
    dict of str to str
        E.g. ``{"num_input_tokens": "input_length", ...}`` for a Mooncake trace.

    Examples
    --------
    >>> from perfmodel import datasets
    >>> format_columns(datasets.path("azure-code-2023"))["num_input_tokens"]
    'ContextTokens'
    """
    return dict(FORMAT_COLUMNS.get(_detect(Path(path)), {}))


def _mooncake_lines(path: Path, errors: str) -> tuple[pa.Table, list[int]]:
    """Parse JSON lines with pyarrow; find, name or skip malformed lines only if parsing fails (the positions of
    the lines left out among the file's records, blank lines not counted)."""
    import pyarrow.json as pj

    # counts as float64 (exact below 2**53; whole numbers checked with the other rows'), so "600.0" reads as 600
    fields = {"timestamp": pa.float64(), "input_length": pa.float64(), "output_length": pa.float64(),
              "hash_ids": HASH_TYPE}
    options = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(path, parse_options=options)
        if table.num_rows and all(table.column(f).null_count == 0 for f in ("timestamp", "input_length")) \
                and null_hash_rows(table.column("hash_ids")).size == 0 \
                and all(_below_2_53(table.column(f)) for f in ("input_length", "output_length")):
            return table, []
    except pa.ArrowInvalid:
        pass
    # slow path, only for files with problems (a count parsed as a float from 2**53 on may have been rounded, a
    # whole float among the block ids is no int64 to pyarrow): check each line, then parse the good ones
    good: list[bytes] = []
    left_out: list[int] = []  # (positions of the lines left out among the file's records)
    first_bad = None
    from ..ground.tables import detect, open_input

    with open_input(path, detect(path).compression) as raw, io.BufferedReader(raw) as handle:  # type: ignore[type-var]  # (typeshed asks for a RawIOBase; any binary stream works)
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            problem, line = _checked_line(line)
            if problem is None:
                good.append(line if line.endswith(b"\n") else line + b"\n")
            else:
                left_out.append(len(good) + len(left_out))
                first_bad = first_bad or (number, problem)
                if errors == "raise":
                    break
    if first_bad and errors == "raise":
        number, problem = first_bad
        raise InputError(f"{path}, line {number}", problem, "repair the line, or pass errors='skip' "
                         "(--skip-bad-lines) to leave malformed lines out")
    if not good:
        raise InputError(str(path), "has no valid trace line (each needs timestamp, input_length, output_length)",
                         "give a Mooncake trace: JSON lines with those keys")
    try:
        return pj.read_json(io.BytesIO(b"".join(good)), parse_options=options), left_out
    except pa.ArrowInvalid as error:  # (what the line checks above do not foresee: still one line, naming the file)
        raise InputError(str(path), f"cannot be read as JSON lines ({str(error).strip()})",
                         "repair the file: one JSON object per line") from None


def _below_2_53(counts: pa.ChunkedArray) -> bool:
    """Whether every count pyarrow read (as float64) is below 2**53, so exact: 2**53 + 1 reads as 2**53."""
    import pyarrow.compute as pc

    largest = pc.max(counts).as_py()
    return largest is None or largest < 2.0**53


def _checked_line(line: bytes) -> tuple[str | None, bytes]:
    """A Mooncake line's problem (None: none), and the line as pyarrow is to read it: block ids written as whole
    floats (``1.0``, ids as :func:`replay_handoffs` reads them) rewritten as integers."""
    problem = _line_problem(line)
    if problem is None:
        record = json.loads(line)
        hashes = record.get("hash_ids")
        if isinstance(hashes, list) and any(isinstance(h, float) for h in hashes):
            line = json.dumps({**record, "hash_ids": [int(h) for h in hashes]}).encode() + b"\n"
    return problem, line


def _line_problem(line: bytes) -> str | None:
    """Why a Mooncake line cannot be read (None: it can): no JSON object, a count that is missing or no whole
    number from 0 to 2**53, block ids that are no list of whole 64-bit ids (a float above 2**53 holds no exact
    one)."""
    from ..ground.tables import RepeatedKey, unique_keys

    try:
        record = json.loads(line, object_pairs_hook=unique_keys)
    except RepeatedKey as error:
        return str(error)
    except ValueError as error:
        return f"not valid JSON ({getattr(error, 'msg', error)})"
    if not isinstance(record, dict):
        return "not a JSON object"
    for name in ("timestamp", "input_length", "output_length"):
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
            return f"{name} is missing or not a number ({value!r})"
        if not -1.7976931348623157e308 <= value <= 1.7976931348623157e308:
            return f"{name} is too large for a double ({str(value)[:30]})"
    for name in ("input_length", "output_length"):
        if record[name] < 0 or record[name] != int(record[name]):
            return f"{name} must be a whole number >= 0, got {record[name]!r}"
    for name in ("input_length", "output_length"):
        if not record[name] <= 2**53:
            return f"{name} {record[name]!r} is above 2**53 tokens"
    hashes = record.get("hash_ids", [])
    if hashes is None:
        return None
    if not isinstance(hashes, list) or not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in hashes):
        return "hash_ids must be a list of integers"
    for h in hashes:
        if isinstance(h, float) and not (math.isfinite(h) and h == math.floor(h)):
            return f"hash_ids holds {h!r}, not a whole block id"
        if isinstance(h, float) and abs(h) > 2.0**53:
            return f"hash_ids holds {h!r}, above 2**53: a float so large holds no exact block id"
    if not all(-(2**63) <= h < 2**63 for h in hashes):
        return "hash_ids must be 64-bit integers"
    return None


def read_trace(
    path: str | os.PathLike,
    format: Literal["mooncake", "azure", "csv", "parquet", "jsonl"] | None = None,
    *,
    columns: dict[str, str] | None = None,
    errors: Literal["raise", "skip"] = "raise",
    hash_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> pd.DataFrame:
    """Read a request trace into canonical columns.

    Formats (detected from the extension and the CSV header when ``format`` is None):

    - ``mooncake``: JSON lines with ``timestamp`` (ms), ``input_length``,
      ``output_length`` and ``hash_ids`` (one id per 512-token block); a JSON-lines file whose
      first object has ``timestamp`` and ``input_length``.
    - ``azure``: the Azure LLM inference trace CSV (``TIMESTAMP`` datetime,
      ``ContextTokens``, ``GeneratedTokens``).
    - ``csv`` / ``parquet`` / ``jsonl``: any table (a JSON-lines file whose first object lacks
      ``timestamp`` or ``input_length`` is one); ``columns`` maps canonical names to its columns,
      e.g. ``{"arrival_ms": "ts", "num_input_tokens": "prompt"}`` (an arrival column of datetimes is
      converted to ms; dates written day and month first, ``01/12/2023``, are read in the order a number
      above 12 settles, and refused when none does: write ISO 8601); columns already named ``arrival_ms``,
      ``num_input_tokens``, ``num_output_tokens``, ``ready_ms``, ``prefill_worker`` or ``hash_ids`` are
      found by their names (so a trace saved with ``trace.to_parquet`` reads back as it was, and with
      ``to_csv`` while no request has more than 1000 hash ids: pandas writes a longer list shortened
      with ``...``, which is refused; ``hash_ids`` in a CSV file are text such as ``[12, 13]`` or
      ``[12 13]``, an empty element such as ``[1,,2]`` refused as a null id is; whole floats such as
      ``1.0`` are read as ids, as :func:`replay_handoffs` reads them, up to 2**53). The optional
      ``ready_ms`` (when each prefill completed, on the same clock) is kept for :func:`replay_handoffs`,
      and the optional ``prefill_worker`` (each request's prefill worker, from 0) and ``prefill_ms`` (its own
      prefill time) for :func:`perfmodel.replay_ttft` and a cluster's replay. A table without ``num_output_tokens`` is
      read without it (never as zeros: where a replay needs it, it says so).

    Parameters
    ----------
    path
        The trace file.
    format
        One of the above; None detects it.
    columns
        Canonical name -> column, honoured whatever the file: a Mooncake or Azure file given a
        mapping that names a column its format does not read there (``{"num_input_tokens":
        "output_length"}``, ``{"ready_ms": "done"}``) is read as a generic table (``"jsonl"``,
        ``"csv"``, said in ``attrs["format"]``) with that mapping, and the format's own columns for
        the names it leaves out; a mapping of the format's own columns changes nothing.
    errors
        ``"raise"``: a malformed line is an error naming the file, the line (or row), the column, the
        cell as the file holds it and the rule it breaks, and how many lines are malformed;
        ``"skip"``: such lines are left out and counted in ``df.attrs["skipped_lines"]``.
    hash_block_tokens
        Prompt tokens per hash id (512 for Mooncake traces).

    Returns
    -------
    pandas.DataFrame
        ``arrival_ms``, ``num_input_tokens``, ``num_output_tokens`` (where the file has them; and ``ready_ms``,
        ``prefill_worker``, ``hash_ids``) in trace order, each row indexed by its position among the file's
        records (from 0, blank lines not counted; ``errors="skip"`` leaves gaps), so a replay's rows join back
        to the file's; times count from the first arrival. ``attrs``: ``source``, ``format``,
        ``skipped_lines``, ``hash_block_tokens``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from perfmodel import read_trace
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "trace.jsonl"
    >>> _ = path.write_text('{"timestamp": 5, "input_length": 700, "output_length": 3, "hash_ids": [1, 2]}\\n'
    ...                     '{"timestamp": 9, "input_length": 600, "output_length": 4, "hash_ids": [1, 3]}\\n')
    >>> read_trace(path)
       arrival_ms  num_input_tokens  num_output_tokens hash_ids
    0         0.0               700                  3   [1 2]
    1         4.0               600                  4   [1 3]
    """
    from ..io import damage_named

    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "a folder, not a trace file", str(path))
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", str(path))
    check_errors(errors, choice_names("bad_lines"))
    hash_block_tokens = check_whole("hash_block_tokens", hash_block_tokens, smallest=1)
    try:
        with damage_named(path):  # (a truncated or corrupt file named, with what to check)
            detected = format or _detect(path)
            fmt = _format_read(detected, columns)  # (a format's file given another mapping: a generic table)
            df, skipped, sources = _read_format(path, fmt, columns, errors, own=FORMAT_COLUMNS.get(detected, {}))
    except pa.ArrowInvalid as error:  # (a damaged Parquet file)
        raise InputError(str(path), f"could not be read ({error})", "check that the file is complete "
                         "and in the format its name says") from None
    df, bad_rows = _check_rows(df, path, errors, sources)
    skipped += bad_rows
    first = df["arrival_ms"].min() if len(df) else 0.0
    df["arrival_ms"] = df["arrival_ms"] - first
    if "ready_ms" in df:
        df["ready_ms"] = df["ready_ms"] - first
    df.attrs.update(source=str(path), format=fmt, skipped_lines=int(skipped), hash_block_tokens=hash_block_tokens)
    if skipped:
        warn(f"{path}: skipped {count(skipped, 'malformed line')} of {skipped + len(df)}")
    return df


#: The generic table a Mooncake or Azure file is, read with a column mapping of other columns.
_AS_TABLE = {"mooncake": "jsonl", "azure": "csv"}


def _format_read(fmt: str, columns: dict[str, str] | None) -> str:
    """The format ``fmt``'s file is read in: a Mooncake or Azure file given a mapping that names a column the
    format does not read (or reads as another name) is read as a generic table (``"jsonl"``, ``"csv"``) with
    that mapping, the format's own columns for the names it leaves out."""
    if columns and fmt in _AS_TABLE and not columns.items() <= FORMAT_COLUMNS[fmt].items():
        return _AS_TABLE[fmt]
    return fmt


def _read_format(path: Path, fmt: str, columns: dict[str, str] | None, errors: str,
                 own: dict[str, str] | None = None) -> tuple[pd.DataFrame, int, dict[str, Source]]:
    """A trace file of format ``fmt`` in canonical columns (rows not yet checked), the lines skipped and where each
    column comes from; a generic table's columns found under their own names, then ``own`` (a format's names, read
    as a table), then ``columns``."""
    left_out: list[int] = []
    sources: dict[str, Source] = {}
    if fmt == "mooncake":
        table, left_out = _mooncake_lines(path, errors)
        hashes = table.column("hash_ids")
        if hashes.null_count:
            hashes = pa.chunked_array([pc_fill_empty(chunk) for chunk in hashes.chunks], type=HASH_TYPE)
        df = pd.DataFrame({
            "arrival_ms": table.column("timestamp").to_numpy(),
            "num_input_tokens": table.column("input_length").to_numpy(),
            "num_output_tokens": table.column("output_length").to_numpy(),
            "hash_ids": pd.Series(pd.arrays.ArrowExtensionArray(hashes)),
        })
        sources = {name: Source(column, df[name]) for name, column in FORMAT_COLUMNS["mooncake"].items()}
    elif fmt == "azure":
        raw, left_out = _csv_skipping(path, errors)
        if pd.api.types.is_numeric_dtype(raw.get("TIMESTAMP", pd.Series(dtype=object))):
            raise InputError(f"{path}: column 'TIMESTAMP'", "holds numbers, but an Azure trace's are datetimes (of "
                             "which unit would the numbers be?)", "read it as format='csv' with columns={'arrival_ms': "
                             "'TIMESTAMP', ...} after writing the times in ms")
        df = _canonical(raw, FORMAT_COLUMNS["azure"], path, errors, sources)  # (counts read by _counts)
    elif fmt in ("csv", "parquet", "jsonl"):
        if fmt == "csv":
            raw, left_out = _csv_skipping(path, errors)
        else:
            raw = {"parquet": _read_parquet, "jsonl": _read_json_lines}[fmt](path)
        found = {c: c for c in (*_CANONICAL, *_OPTIONAL) if c in raw}  # columns under their own names
        found.update({c: v for c, v in (own or {}).items() if v in raw})  # (a Mooncake or Azure file's own)
        df = _canonical(raw, {**found, **(columns or {})}, path, errors, sources)
    else:
        raise InputError("format", f"unknown trace format {fmt!r}", "use 'mooncake', 'azure', 'csv', 'parquet' or 'jsonl'")
    if left_out:  # (each request keeps its position among the file's records: a replay's rows join back to them)
        df.index = np.setdiff1d(np.arange(len(df) + len(left_out)), left_out)
    return df, len(left_out), sources


def _csv_skipping(path: Path, errors: str) -> tuple[pd.DataFrame, list[int]]:
    """A CSV trace as a frame, and the records left out (their positions): with ``errors="skip"``, a file with
    records of more fields than the header is read without them (:func:`perfmodel.ground.tables.without_long_lines`)."""
    from ..ground.tables import without_long_lines

    try:
        return _read_csv(path), []
    except InputError:
        if errors != "skip":
            raise
        text, left_out = without_long_lines(path)
        if not left_out:
            raise
        return _read_csv(path, text), left_out


def _read_csv(path: Path, text: Any = None, **options: Any) -> pd.DataFrame:
    """A CSV trace (the file ``path``, or its ``text`` when given) as a frame; a malformed file is an error
    naming it and the line (never a row read into other columns: pandas takes a first column without a header
    as the index, shifting the rest)."""
    try:
        raw = pd.read_csv(path if text is None else text,
                          **{"encoding": "utf-8-sig", **_EXACT_FLOATS, **options})  # (a byte-order mark aside)
    except UnicodeDecodeError as error:
        raise InputError(str(path), f"is not UTF-8 text (byte {error.start}: {error.reason})",
                         "save the trace as UTF-8") from None
    except (pd.errors.ParserError, ValueError) as error:
        _refuse_other_separator(path)  # (decimal commas in a ';'-separated file: more fields than its header)
        raise InputError(str(path), f"cannot be read as CSV ({str(error).strip()})",
                         "repair the file: one value per header column on every line") from None
    if len(raw.columns) == 1:  # (no trace has a single column: a file separated otherwise is refused as such)
        _refuse_other_separator(path)
    if not raw.index.equals(pd.RangeIndex(len(raw))):  # (pandas 3: a RangeIndex from the first field)
        raise InputError(f"{path}, line 2", f"has more fields than the header's {len(raw.columns)} "
                         f"({list(raw.columns)})", "remove the extra fields, or name every column in the header")
    return raw


def _refuse_other_separator(path: Path) -> None:
    """Refuse a CSV trace whose header is one field holding ';' or tabs and no comma, saying how it is separated
    (:func:`perfmodel.ground.tables.refuse_other_separator`: Excel's "CSV" where the decimal mark is a comma),
    never as a file without the trace's columns; a header that cannot be read again passes (the caller's error
    stands)."""
    from ..ground.tables import detect, open_input, refuse_other_separator

    try:
        with open_input(path, detect(path).compression) as raw, \
                io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
            header = next(csv.reader(text), None)
    except (OSError, EOFError, ValueError, csv.Error):
        return
    if header:
        refuse_other_separator(header, str(path))


def _read_json_lines(path: Path) -> pd.DataFrame:
    """A generic JSON-lines trace as a frame of the values as written (perfmodel.io's reader: a malformed line
    is named), whole-number and float columns typed."""
    from ..ground.tables import read_chunks

    chunks, _ = read_chunks(path, chunk_rows=1 << 40, output_format="jsonl")
    return pd.concat(list(chunks), ignore_index=True).infer_objects()


def _hash_lists(column: pd.Series, path: Any, errors: str = "raise") -> tuple[pa.Array, np.ndarray]:
    """A hash_ids column as Arrow lists of integers (lists as they are, or text such as ``[1, 2, 3]``, a CSV
    file's) and which rows are malformed (an empty cell, text that is no list, an id outside 64 bits):
    with ``errors="raise"`` the first is an error naming the file, the column and its line."""
    if not (column.dtype == object or isinstance(column.dtype, pd.StringDtype)) and not _huge_floats(column):
        try:
            lists = pa.array(column, HASH_TYPE)  # (pyarrow 14 keeps an Arrow column's own type here: cast)
            return lists.cast(HASH_TYPE), np.zeros(len(column), dtype=bool)
        except (pa.ArrowException, TypeError, OverflowError):  # (a column of empty cells: NotImplemented)
            pass  # (the cell by cell path below names the first bad one)
    values: list[list[int] | None] = []
    bad = np.zeros(len(column), dtype=bool)
    for i, value in enumerate(column.tolist()):
        try:
            values.append(id_cell(value))
        except ValueError as error:
            if errors == "raise":
                fix = "save the trace as Parquet or JSON lines (e.g. trace.to_parquet), which keep every id" \
                    if isinstance(error, ShortenedList) else "write hash_ids as lists of 64-bit integers, e.g. " \
                    "[12, 13, 14], or pass errors='skip' (--skip-bad-lines) to leave such lines out"
                raise InputError(f"{path}, {_place(path, i)}, column {column.name!r}", f"{error}", fix) from None
            values.append(None)
            bad[i] = True
    return pa.array(values, HASH_TYPE), bad


def _huge_floats(column: pd.Series) -> bool:
    """Whether an Arrow column of lists of floats (a Parquet file's) holds one above 2**53 in magnitude, which the
    cast to int64 would take as an exact id (:func:`_whole` refuses it, cell by cell)."""
    import pyarrow.compute as pc

    arrow_type = getattr(column.dtype, "pyarrow_dtype", None)
    if arrow_type is None or not (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)) \
            or not pa.types.is_floating(arrow_type.value_type):
        return False
    largest = pc.max(pc.abs(pc.list_flatten(pa.array(column)))).as_py()
    return largest is not None and largest > 2.0**53


def _read_parquet(path: Any) -> pd.DataFrame:
    """A Parquet trace as a DataFrame, list columns (hash_ids) as Arrow lists. pandas' own reader
    cannot rebuild the Arrow list dtype it recorded when it wrote such a file (a trace saved with
    ``trace.to_parquet``): mapping list types explicitly reads it back, index included."""
    import pyarrow.parquet as pq

    def lists(arrow_type: pa.DataType) -> Any:
        return pd.ArrowDtype(arrow_type) if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) \
            else None

    table = pq.read_table(path)
    meta = json.loads((table.schema.metadata or {}).get(b"pandas", b"null"))
    if isinstance(meta, dict) and isinstance(meta.get("columns"), list):
        # pandas' record of an Arrow list column's dtype ("list<item: int64>[pyarrow]") is text that pandas
        # before 2.2 cannot parse back (TypeError: data type not understood): the types_mapper gives it instead
        for column in meta["columns"]:
            if isinstance(column, dict) and str(column.get("numpy_type", "")).startswith(("list<", "large_list<")):
                column["numpy_type"] = "object"
        table = table.replace_schema_metadata({**table.schema.metadata, b"pandas": json.dumps(meta).encode()})
    return table.to_pandas(types_mapper=lists)


def null_hash_rows(hashes: Any) -> np.ndarray:
    """Rows whose hash_ids list holds a null entry (a block whose identity is unknown: never a cache hit)."""
    import pyarrow.compute as pc

    if isinstance(hashes, pa.ChunkedArray):
        hashes = hashes.combine_chunks() if hashes.num_chunks else pa.array([], type=HASH_TYPE)
    if hashes.null_count:
        hashes = pc_fill_empty(hashes)
    flat = pc.list_flatten(hashes)
    if flat.null_count == 0:
        return np.empty(0, dtype=np.int64)
    parents = pc.list_parent_indices(hashes).to_numpy()
    return np.unique(parents[pc.is_null(flat).to_numpy(zero_copy_only=False)])


def pc_fill_empty(chunk: pa.ListArray) -> pa.ListArray:
    """Missing hash_ids (null lists) as empty lists."""
    import pyarrow.compute as pc

    return pc.if_else(pc.is_null(chunk), pa.scalar([], type=HASH_TYPE), chunk)


class _OtherZone(Exception):
    """Datetimes with a UTC offset measured from an origin without one, or the reverse (``zoned``: whether the
    column measured has the offsets): pandas cannot subtract them, and which zone the naive ones are in is
    unknown."""

    def __init__(self, zoned: bool) -> None:
        super().__init__(zoned)
        self.zoned = zoned


def _times_ms(column: pd.Series, origin: Any = None, where: str = "", path: Path | None = None) -> tuple[pd.Series, Any]:
    """Times as float ms, and the origin of datetimes (None for numbers): numbers as they are;
    datetimes from ``origin`` (default: their earliest). A text column is numbers unless more of
    its values read as datetimes, so a stray word spoils its own row only (and "25" stays 25 ms).
    Datetimes with different UTC offsets are instants (read in UTC); with and without an offset
    in one column they are ambiguous, and refused naming ``where`` (file and column) and the line
    of ``path``; with an offset where ``origin`` has none (or the reverse), an :class:`_OtherZone`."""
    if pd.api.types.is_timedelta64_dtype(column):  # durations (a Parquet file's): from the trace's start, in ms
        return column / pd.Timedelta(1, "ms"), None
    if non_numeric_kind(column) == "booleans":
        raise InputError(where, "holds booleans, not times", "give times as numbers of ms or as datetimes")
    if pd.api.types.is_datetime64_any_dtype(column):
        parsed = column
    else:
        numbers = pd.to_numeric(column, errors="coerce").astype("float64")
        if pd.api.types.is_numeric_dtype(column):
            return numbers, None
        try:
            with warnings.catch_warnings():  # (pandas 2.x: mixed time zones warn, then give objects)
                warnings.simplefilter("ignore", FutureWarning)
                parsed = one_format(column, where)
            if not pd.api.types.is_datetime64_any_dtype(parsed):  # pandas < 3: time zones it would not mix
                raise ValueError("mixed time zones")
        except InputError:  # (dates whose order of day and month is ambiguous)
            raise
        except ValueError:  # time zones that pandas will not mix in one column (pandas 3 raises)
            text = column.astype("string").str.strip()
            aware = text.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True).fillna(False).to_numpy(dtype=bool)
            if aware.all():
                parsed = pd.to_datetime(column, errors="coerce", format="mixed", utc=True)
            else:
                line = int(np.argmax(aware != aware[0]))
                at, first = (_place(path, line), _place(path, 0)) if path else (f"row {line + 1}", "row 1")
                raise InputError(f"{where}, {at}", f"{text.iloc[line]!r} has {'a' if aware[line] else 'no'} "
                                 f"time zone and {first} {'has one' if aware[0] else 'has none'} ({text.iloc[0]!r}): "
                                 "times with and without one are ambiguous", "give every time its UTC offset (e.g. "
                                 "+00:00), or none") from None
        if numbers.notna().sum() >= parsed.notna().sum():
            return numbers, None
    if origin is not None and not pd.isna(origin) and (parsed.dt.tz is None) != (origin.tzinfo is None):
        raise _OtherZone(parsed.dt.tz is not None)
    origin = parsed.min() if origin is None else origin
    return (parsed - origin).dt.total_seconds() * 1000.0, origin


def _canonical(raw: pd.DataFrame, mapping: dict[str, str], path: Path, errors: str,
               sources: dict[str, Source]) -> pd.DataFrame:
    """The columns of a table ``raw`` that ``mapping`` names, under canonical names (times in ms, counts as
    numbers, hash_ids as Arrow lists); ``sources`` receives where each comes from (for the errors of its rows)."""
    missing = [c for c in ("arrival_ms", "num_input_tokens") if c not in mapping]  # (mapped to no column: below)
    if missing:
        error = InputError(str(path), f"no column for {missing}; the file has {list(raw.columns)}",
                           "pass columns={'arrival_ms': ..., 'num_input_tokens': ...}")
        error.missing_columns = missing  # type: ignore[attr-defined]  # (the command line names its --column flag)
        raise error
    unknown = [c for c in mapping if c not in (*_CANONICAL, *_OPTIONAL)]
    if unknown:
        raise InputError(str(path), f"unknown trace column name(s) {unknown}",
                         f"map only {', '.join((*_CANONICAL, *_OPTIONAL))}")
    absent = [f"{k}={v!r}" for k, v in mapping.items() if v not in raw]
    if absent:
        raise InputError(str(path), f"no column {', '.join(absent)}; the file has {list(raw.columns)}",
                         "map each name to one of the file's columns")
    arrival, origin = _times_ms(raw[mapping["arrival_ms"]], where=f"{path}: column {mapping['arrival_ms']!r}",
                                path=path)
    out = pd.DataFrame({"arrival_ms": arrival,
                        "num_input_tokens": _counts(raw[mapping["num_input_tokens"]], path, errors)})
    for name in ("num_output_tokens", "prefill_worker", "prefill_ms"):  # (never made up where the file has none)
        if name in mapping:
            out[name] = _counts(raw[mapping[name]], path, errors, "prefill times in ms" if name == "prefill_ms" else "")
    if "ready_ms" in mapping:  # when each prefill completed: on the same clock as the arrivals
        try:
            out["ready_ms"], ready_origin = _times_ms(raw[mapping["ready_ms"]], origin,
                                                      where=f"{path}: column {mapping['ready_ms']!r}", path=path)
        except _OtherZone as other:  # (pandas: "Cannot subtract tz-naive and tz-aware datetime-like objects")
            zoned, naive = ("ready_ms", "arrival_ms") if other.zoned else ("arrival_ms", "ready_ms")
            raise InputError(str(path), f"{zoned} ({mapping[zoned]!r}) has times with a UTC offset but {naive} "
                             f"({mapping[naive]!r}) has none: the zone of those is unknown", "give both columns' times "
                             "a UTC offset (e.g. +00:00), or neither") from None
        if (ready_origin is None) != (origin is None):
            kinds = {True: "numbers (ms)", False: "datetimes"}
            raise InputError(str(path), f"ready_ms ({mapping['ready_ms']!r}) holds {kinds[ready_origin is None]} but "
                             f"arrival_ms ({mapping['arrival_ms']!r}) holds {kinds[origin is None]}",
                             "give both times on one clock")
    sources.update({name: Source(column, raw[column], name in ("arrival_ms", "ready_ms") and origin is not None)
                    for name, column in mapping.items()})  # (datetimes: a row's time in another format is named so)
    if "hash_ids" in mapping:
        lists, bad = _hash_lists(raw[mapping["hash_ids"]], path, errors)
        out["hash_ids"] = pd.Series(pd.arrays.ArrowExtensionArray(lists), index=out.index)
        if bad.any():
            out.attrs["bad_hash_rows"] = bad  # (left out by _check_rows, counted as skipped lines)
    return out


def _counts(column: pd.Series, path: Path, errors: str, what: str = "") -> pd.Series:
    """A token column (or ``what`` else) as numbers; with ``errors="raise"`` a cell that is text but no number
    (``"1,000"``: a thousands separator) is an error naming the file, the line and the column (else NaN: a bad row)."""
    if non_numeric_kind(column) is not None:  # (True is no count of 1; a duration or a date no count at all)
        raise InputError(f"{path}, column {column.name!r}", f"holds {non_numeric_kind(column)}, not {what or 'token counts'}",
                         f"give {what or 'whole numbers of tokens'}")
    numbers = pd.to_numeric(column, errors="coerce")
    if errors == "raise" and (column.dtype == object or isinstance(column.dtype, pd.StringDtype)):
        unread = (numbers.isna() & column.notna()).to_numpy()
        if unread.any():
            i, many = int(np.argmax(unread)), int(unread.sum())
            text = str(column.iloc[i])
            counted = f" (the first of {many:,} such cells in the column)" if many > 1 else ""
            raise InputError(f"{path}, {_place(path, i)}, column {column.name!r}",
                             f"{text!r} is {not_a_number(text)}{counted}",
                             f"repair {'them' if many > 1 else 'it'}, or pass errors='skip' (--skip-bad-lines) to leave "
                             "such lines out")  # fmt: skip
    return numbers


def _check_rows(df: pd.DataFrame, path: Path, errors: str, sources: dict[str, Source]) -> tuple[pd.DataFrame, int]:
    """Every row needs an arrival and a whole, non-negative token count (:func:`.trace_cells.row_rules`); with
    ``errors="raise"`` the first row that has not is an error naming its place, column, cell and rule."""
    counts = [c for c in ("num_output_tokens", "prefill_worker") if c in df]  # (where the file has them)
    # a null block id would match nothing reliably: the row is malformed, never a hit
    null_ids = null_hash_rows(pa.array(df["hash_ids"], type=HASH_TYPE)) if "hash_ids" in df else np.empty(0, int)
    rules: list[Rule] = row_rules(df, null_ids, df.attrs.pop("bad_hash_rows", np.zeros(len(df), dtype=bool)))
    bad = np.logical_or.reduce([rule.bad for rule in rules])
    if bad.any():
        if errors == "raise":
            raise malformed_rows_error(df, rules, path, sources)
        df = df.loc[~bad]  # (each request keeps its position among the file's records)
    return df.assign(num_input_tokens=df["num_input_tokens"].astype("int64"),
                     **{c: pd.to_numeric(df[c]).astype("int64") for c in counts}), int(bad.sum())


# --- synthetic traces ----------------------------------------------------------------------



def synthetic_trace(
    n: int,
    rate_per_s: float,
    *,
    seed: int = 0,
    median_input_tokens: int = 2048,
    input_sigma: float = 1.0,
    max_input_tokens: int = 131_072,
    median_output_tokens: int = 256,
    mean_turns: float = 3.0,
    apps: int = 8,
    system_prompt_blocks: tuple[int, int] = (0, 8),
    hash_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> pd.DataFrame:
    """A seeded synthetic trace: Poisson arrivals, log-normal prompts, multi-turn sessions sharing prefixes.

    Each request belongs to a session (``n / mean_turns`` sessions, picked uniformly);
    each session belongs to one of ``apps`` applications whose system prompt (a number of
    whole blocks drawn from ``system_prompt_blocks``) every request of the app shares.
    Turn k of a session re-sends the whole conversation so far plus new tokens
    (log-normal, median ``median_input_tokens / mean_turns``), so its full blocks repeat
    the previous turn's hash ids; a partly filled last block gets an id of its own.
    Prompts are capped at ``max_input_tokens``, their system prompt too: a request has one hash id
    per block of its prompt as capped (a block the cap cuts short gets an id of its own).

    Parameters
    ----------
    n
        Requests.
    rate_per_s
        Mean arrival rate (requests per second, Poisson).
    seed
        Seed of the random generator: the same seed gives the same trace.
    median_input_tokens, input_sigma
        The tokens each turn adds are log-normal with median ``median_input_tokens / mean_turns``
        and sigma ``input_sigma``.
    max_input_tokens
        Cap on a prompt's length (tokens).
    median_output_tokens
        Median output length (tokens, log-normal).
    mean_turns
        Mean turns per session.
    apps
        Applications, each with a system prompt its requests share.
    system_prompt_blocks
        A system prompt's length in whole blocks: drawn uniformly from low to high (inclusive).
    hash_block_tokens
        Tokens per hash id (block), recorded in ``trace.attrs["hash_block_tokens"]``.

    Returns
    -------
    pandas.DataFrame
        The canonical trace columns, ``hash_ids`` included.

    Examples
    --------
    >>> from perfmodel import synthetic_trace
    >>> trace = synthetic_trace(1000, rate_per_s=50, seed=1)
    >>> len(trace), bool(trace["arrival_ms"].is_monotonic_increasing)
    (1000, True)
    """
    most = option("max_synthetic_requests")
    n = check_whole("n", n, largest=most, above=f"pass n <= {most:,} (a synthetic trace is held in "
                    "memory, some hundred bytes a request with its hash ids: generate a larger one in parts), "
                    "or raise perfmodel.set_options(max_synthetic_requests=...)")
    apps = check_whole("apps", apps, smallest=1)
    hash_block_tokens = check_whole("hash_block_tokens", hash_block_tokens, smallest=1)
    max_input_tokens = check_whole("max_input_tokens", max_input_tokens, smallest=1)
    if not rate_per_s > 0 or not mean_turns >= 1:
        raise InputError("synthetic_trace", f"rate_per_s={rate_per_s!r}, mean_turns={mean_turns!r}",
                         "pass rate_per_s > 0 and mean_turns >= 1")
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1000.0 / rate_per_s, n))
    arrival -= arrival[0] if n else 0.0
    sessions = max(1, round(n / mean_turns))
    session = rng.integers(0, sessions, n)
    app_of_session = rng.integers(0, apps, sessions)
    system_blocks = rng.integers(system_prompt_blocks[0], system_prompt_blocks[1] + 1, apps)
    new_tokens = np.maximum(1, rng.lognormal(math.log(max(1.0, median_input_tokens / mean_turns)), input_sigma, n))
    # conversation length so far: cumulative new tokens within each session, in arrival order
    by_session = np.argsort(session, kind="stable")
    cumulative = np.empty(n)
    sorted_new = new_tokens[by_session]
    totals = np.cumsum(sorted_new)
    starts = np.r_[0, np.flatnonzero(np.diff(session[by_session])) + 1] if n else np.array([], dtype=np.int64)
    group_start_total = np.repeat(totals[starts] - sorted_new[starts], np.diff(np.r_[starts, n]))
    cumulative[by_session] = totals - group_start_total
    app = app_of_session[session]
    prefix_tokens = system_blocks[app] * hash_block_tokens
    input_tokens = np.minimum(prefix_tokens + cumulative.astype(np.int64), max_input_tokens)
    # blocks of the prompt as capped (the cap cuts the system prompt too): whole system blocks, whole conversation
    # blocks, and a partly filled last block
    system_used = np.minimum(system_blocks[app], input_tokens // hash_block_tokens)
    full_blocks = input_tokens // hash_block_tokens - system_used
    partial = (input_tokens % hash_block_tokens) > 0
    # ids: app prompts, then per-session conversation blocks, then one fresh id per partial block
    app_base = np.r_[0, np.cumsum(system_blocks)[:-1]]
    max_blocks = max_input_tokens // hash_block_tokens + 1
    session_base = int(system_blocks.sum()) + np.arange(sessions, dtype=np.int64) * max_blocks
    fresh_base = int(system_blocks.sum()) + sessions * max_blocks
    counts = system_used + full_blocks + partial
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    position = np.arange(offsets[-1]) - np.repeat(offsets[:-1], counts)
    owner = np.repeat(np.arange(n), counts)
    in_system = position < system_used[owner]
    in_session = ~in_system & (position < (system_used + full_blocks)[owner])
    ids = np.where(in_system, app_base[app][owner] + position,
                   np.where(in_session, session_base[session][owner] + position - system_used[owner],
                            fresh_base + owner))
    outputs = np.maximum(1, rng.lognormal(math.log(median_output_tokens), 1.0, n)).astype(np.int64)
    hashes = pa.ListArray.from_arrays(pa.array(offsets, pa.int32() if offsets[-1] < 2**31 else pa.int64()),
                                      pa.array(ids.astype(np.int64)))
    df = pd.DataFrame({"arrival_ms": arrival, "num_input_tokens": input_tokens.astype(np.int64),
                       "num_output_tokens": outputs,
                       "hash_ids": pd.Series(pd.arrays.ArrowExtensionArray(hashes.cast(HASH_TYPE)))})
    df.attrs.update(source="synthetic", format="synthetic", skipped_lines=0, hash_block_tokens=hash_block_tokens)
    return df
