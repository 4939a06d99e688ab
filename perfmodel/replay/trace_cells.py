"""Why a trace's row is malformed, in the words the file holds: the rules :func:`perfmodel.read_trace` checks each
row against, and the error naming the first bad row's place, column, rule and cell (a CSV file's text, a JSON
line's value as written, a Parquet file's value).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..errors import InputError, plain
from ..inputs.words import count
from .trace_text import date_order


class Source(NamedTuple):
    """Where a canonical column of a trace comes from: the file's column, its values as read (None: the trace's
    own, a Mooncake file's) and whether they were read as datetimes."""

    column: str
    values: pd.Series | None = None
    datetimes: bool = False


class Rule(NamedTuple):
    """One rule of a trace's rows: the canonical column it is about, what it checks and the rows it refuses."""

    name: str
    kind: str  # "time", "count", "null_id", "ids", "ready"
    bad: np.ndarray


def place(path: Any, i: int) -> str:
    """Where the trace's row ``i`` (from 0) is: its line in a CSV or JSON-lines file, counted as an editor counts
    them (:func:`csv_line`, :func:`jsonl_line`), its row (from 1) in a Parquet file (or a file that cannot be read
    again)."""
    from ..ground.tables import detect

    fmt = detect(path).format
    line = csv_line(path, i) if fmt == "csv" else jsonl_line(path, i) if fmt == "jsonl" else None
    return f"row {i + 1}" if line is None else f"line {line}"


def csv_line(path: Any, i: int) -> int | None:
    """The line (from 1, the header's) where data record ``i`` (from 0) of a CSV file starts, as an editor counts
    lines: the blank lines a CSV reader skips and the line breaks inside quoted cells counted, records of more
    fields than the header left aside (``errors="skip"`` reads the file without them); None when the file has no
    such record or cannot be read as CSV again.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = path.write_text('a,b\\n1,"x\\ny"\\n\\n  \\n2,3\\n')
    >>> csv_line(path, 0), csv_line(path, 1), csv_line(path, 2)
    (2, 6, None)
    """
    from ..ground.tables import detect, open_input

    try:
        with (
            open_input(Path(path), detect(path).compression) as raw,
            io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text,
        ):
            records = csv.reader(text)
            header = next(records, None)
            if header is None:
                return None
            end, seen = records.line_num, -1
            for record in records:
                start, end = end + 1, records.line_num
                blank = not record or (len(record) == 1 and record[0] != "" and not record[0].strip())
                if blank or len(record) > len(header):  # (pandas skips lines of white space; "" is an empty cell)
                    continue
                seen += 1
                if seen == i:
                    return start
    except (OSError, EOFError, ValueError, csv.Error):  # (a file pandas read but this reader cannot: no line named)
        return None
    return None


def jsonl_line(path: Any, i: int) -> int | None:
    """The line (from 1) of record ``i`` (from 0) of a JSON-lines file, blank lines counted as the reader skips
    them; None when the file has no such record or cannot be read again."""
    from ..ground.tables import detect, open_input

    try:
        with open_input(Path(path), detect(path).compression) as raw, io.BufferedReader(raw) as lines:  # type: ignore[type-var]  # (typeshed asks for a RawIOBase; any binary stream works)
            seen = -1
            for number, line in enumerate(lines, start=1):
                seen += bool(line.strip())
                if seen == i and line.strip():
                    return number
    except (OSError, EOFError, ValueError):
        return None
    return None


def row_rules(df: pd.DataFrame, null_ids: np.ndarray, bad_ids: np.ndarray) -> list[Rule]:
    """The rules every row of a trace in canonical columns must meet, each with the rows it refuses: a finite
    arrival; whole token counts (and prefill workers) from 0 to 2**53; hash ids that are all known
    (``null_ids``: the rows holding a null one; ``bad_ids``: cells that are no list, left for errors='skip'); a
    prefill that completes (``ready_ms``) at or after its arrival."""
    arrival = df["arrival_ms"].to_numpy(dtype="float64", na_value=np.nan)
    rules = [Rule("arrival_ms", "time", ~np.isfinite(arrival))]
    for name in ("num_input_tokens", "num_output_tokens", "prefill_worker"):
        if name in df:
            numbers = pd.to_numeric(df[name])
            values = numbers.to_numpy(dtype="float64", na_value=np.nan)
            bad = ~(values >= 0) | (values != np.floor(values)) | ~(values <= 2.0**53)
            if pd.api.types.is_integer_dtype(numbers.dtype):  # (2**53 + 1 as a float is 2**53: compared whole)
                bad |= (numbers > 2**53).to_numpy(dtype=bool, na_value=False)
            rules.append(Rule(name, "count", bad))
    if "hash_ids" in df:
        null = np.zeros(len(df), dtype=bool)
        null[null_ids] = True
        rules += [Rule("hash_ids", "null_id", null), Rule("hash_ids", "ids", bad_ids)]
    if "prefill_ms" in df:  # (an empty cell: the request has no prefill time of its own)
        own = pd.to_numeric(df["prefill_ms"]).to_numpy(dtype="float64", na_value=np.nan)
        rules.append(Rule("prefill_ms", "ms", ~np.isnan(own) & ~((own >= 0) & (own < np.inf))))
    if "ready_ms" in df:
        ready = df["ready_ms"].to_numpy(dtype="float64", na_value=np.nan)
        rules += [Rule("ready_ms", "time", ~np.isfinite(ready)), Rule("ready_ms", "ready", ~(ready >= arrival))]
    return rules


def malformed_rows_error(df: pd.DataFrame, rules: list[Rule], path: Path, sources: dict[str, Source]) -> InputError:
    """The error of a trace's malformed rows: the first one's place and column, its cell as the file holds it
    and the rule it breaks, and how many rows are malformed."""
    bad = np.logical_or.reduce([rule.bad for rule in rules])
    i = int(np.argmax(bad))
    rule = next(rule for rule in rules if rule.bad[i])
    source = sources.get(rule.name) or Source(rule.name)
    value, where = as_written(path, i, source, df)
    if rule.kind == "ready":
        arrival = sources.get("arrival_ms") or Source("arrival_ms")
        start, _ = as_written(path, i, arrival, df)
        problem = (
            f"{_named('ready_ms', source)} {_bare(value)} is before {_named('arrival_ms', arrival)} {_bare(start)}"
        )
        where = f"{path}, {where}"
    else:
        problem = _broken(rule, value, path, df, source, i)
        where = f"{path}, {where}, column {source.column!r}"
    n = int(bad.sum())
    said = "1 malformed row" if n == 1 else f"the first of {count(n, 'malformed row')}"
    return InputError(
        where,
        f"{problem} ({said})",
        f"repair {'it' if n == 1 else 'them'}, or pass errors='skip' (--skip-bad-lines) to leave such lines out",
    )


def _broken(rule: Rule, value: Any, path: Path, df: pd.DataFrame, source: Source, i: int) -> str:
    """The rule the cell ``value`` (row ``i`` of ``rule``'s column) breaks, in words, the cell shown first."""
    if _empty(value):
        return "the cell is empty"
    shown = _shown(value)
    if rule.kind == "null_id":
        return f"{shown} holds a null block id: a block whose identity is unknown is never a cache hit"
    if rule.kind == "ids":
        return f"{shown} is not a list of block ids"
    if rule.kind == "ms":
        return f"{shown} is not a prefill time in ms >= 0 (leave the cell empty where a request has none)"
    if rule.kind == "time":
        if not source.datetimes:
            return f"{shown} is not a finite number of ms, nor a time"
        valid = np.flatnonzero(np.isfinite(df[rule.name].to_numpy(dtype="float64", na_value=np.nan)))
        if not valid.size:
            return f"{shown} is not a time"
        model, order = _model_row(source, valid)
        first, at = as_written(path, model, source, df)
        return f"{shown} is not a time written as {at}'s ({_shown(first)}{order})"
    number = pd.to_numeric(df[rule.name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)[i]
    what = "workers are numbered from 0" if rule.name == "prefill_worker" else "token counts are whole numbers >= 0"
    if math.isnan(number):
        return f"{shown} is not a number"
    if number < 0:
        return f"{shown} is negative: {what}"
    if number != math.floor(number):
        return f"{shown} is not a whole number: {what}"
    return f"{shown} is above 2**53, too large to count exactly"


def _model_row(source: Source, valid: np.ndarray) -> tuple[int, str]:
    """The row whose time the column's others are written as (the first read), and how its dates are read: for
    dates written day and month first, the row that settled the order (``, day first``)."""
    text = source.values
    if text is None or not (text.dtype == object or isinstance(text.dtype, pd.StringDtype)):
        return int(valid[0]), ""
    order = date_order(text.astype("string").str.strip())
    if order is None or order.day_first is None:
        return int(valid[0]), ""
    said = ", day first" if order.day_first else ", month first"
    return (order.row, said) if order.row in valid else (int(valid[0]), said)


def as_written(path: Path, i: int, source: Source, df: pd.DataFrame) -> tuple[Any, str]:
    """Row ``i`` of ``source``'s column as the file holds it, and where: a CSV file's text, a JSON-lines file's
    value as written (its line counted as the file counts them), else the value read."""
    from ..ground.tables import detect, json_lines

    kind = detect(path)
    try:
        if kind.format == "csv":
            text = pd.read_csv(
                path, dtype=str, keep_default_na=False, usecols=[source.column], nrows=i + 1, encoding="utf-8-sig"
            )
            return _Text(text.iloc[i, 0]), place(path, i)
        if kind.format == "jsonl":
            for k, (number, record) in enumerate(json_lines(path, kind.compression)):
                if k == i:
                    return _Json(record.get(source.column)), f"line {number}"
    except (ValueError, OSError, KeyError, IndexError):  # (the file as read stands: its value shown as read)
        pass
    value = (source.values if source.values is not None else df[source.column]).iloc[i]
    return plain(list(value) if isinstance(value, np.ndarray) else value), place(path, i)


class _Text(str):
    """A CSV file's cell: text, shown quoted."""


class _Json:
    """A JSON line's value, shown as JSON writes it."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _empty(value: Any) -> bool:
    """Whether a cell is empty: no text, no JSON value, a missing value."""
    if isinstance(value, _Json):
        return value.value is None
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, float) and math.isnan(value))


def _shown(value: Any) -> str:
    """A cell in a message: text quoted (``'13/12/2023 18:17:04'``), a JSON value as written, else its repr."""
    if isinstance(value, _Json):
        return json.dumps(value.value)
    return repr(str(value)) if isinstance(value, _Text) else repr(value)


def _bare(value: Any) -> str:
    """A cell in a sentence, unquoted (``ready_ms 2 is before arrival_ms 3``)."""
    return str(value) if isinstance(value, _Text) else _shown(value)


def _named(name: str, source: Source) -> str:
    """A canonical column in a sentence, with the file's column when it is named otherwise."""
    return name if source.column == name else f"{name} (column {source.column!r})"
