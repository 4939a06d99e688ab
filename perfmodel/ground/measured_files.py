"""Files of measured transfers, as :func:`perfmodel.calibrate` reads them: CSV tables (``#`` comment lines, text
cells), Parquet, JSON lines and perftest's own text output (``ib_write_bw`` and its kin, saved as is, compressed
or not), each row with its place in the file; and the one refusal of a column of booleans, durations or dates
where numbers go (:func:`refuse_non_numbers`), for every reader of such a table.
"""

from __future__ import annotations

import csv
import io as _io
import json
import lzma
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..inputs.coerce import non_numeric_kind
from ..inputs.words import count
from .tables import compression_of, detect, json_lines, open_input, refuse_other_separator

__all__ = ["read_measured_file", "refuse_non_numbers", "unique_columns"]

#: perftest's table header: ``#bytes  #iterations ...``.
_PERFTEST_HEADER = re.compile(r"^\s*#bytes\s+#")


def read_measured_file(path: Path, where: str) -> tuple[pd.DataFrame, list[str]]:
    """A table of measured transfers in a file (CSV, Parquet, JSON lines or perftest's text output) as its cells,
    with each row's place in the file (a line, or a Parquet row) for the messages; ``where`` names the file."""

    try:
        kind = detect(path)
    except InputError as error:
        compression = compression_of(path)  # (perftest's output saved compressed: run.txt.gz)
        if _is_perftest(path, compression):
            return _read_perftest(path, where, compression)
        raise InputError(
            where, f"{error.problem}, and it is not perftest's output (no '#bytes' header)", error.fix
        ) from None
    if kind.format == "parquet":
        frame = pd.read_parquet(path)
        return frame, [f"row {i + 1}" for i in range(len(frame))]
    if kind.format == "jsonl":
        numbered = list(json_lines(path, kind.compression))
        return (
            pd.DataFrame.from_records([record for _, record in numbered]),
            [f"line {number}" for number, _ in numbered],
        )
    if _is_perftest(path, kind.compression):
        return _read_perftest(path, where, kind.compression)
    return _read_csv(path, where, kind.compression)


def _lines(path: Path, compression: str | None) -> _io.TextIOWrapper:
    return _io.TextIOWrapper(open_input(path, compression), encoding="utf-8-sig", newline="")


def _is_comment(line: str) -> bool:
    """A ``#`` line is a comment, but for perftest's header (``#bytes ...``)."""
    stripped = line.lstrip()
    return stripped.startswith("#") and not stripped.startswith("#bytes")


def _is_perftest(path: Path, compression: str | None) -> bool:
    """Whether a text file (compressed as ``compression`` says) is perftest's own output (a ``#bytes  #iterations
    ...`` header, no commas); a file that cannot be read so (not text, not of that compression) is not."""
    try:
        with _lines(path, compression) as text:
            return any(_PERFTEST_HEADER.match(line) and "," not in line for line, _ in zip(text, range(10_000)))
    except (ValueError, OSError, EOFError, lzma.LZMAError):  # (ValueError: undecodable text, pyarrow's ArrowInvalid)
        return False


def _read_csv(path: Path, where: str, compression: str | None) -> tuple[pd.DataFrame, list[str]]:
    """A CSV table as text cells, with each row's 1-based line in the file (``#`` comment lines counted)."""
    numbers: list[int] = []

    def data_lines(text: Any) -> Any:
        for number, line in enumerate(text, start=1):
            if line.strip() and not _is_comment(line):
                numbers.append(number)
                yield line

    with _lines(path, compression) as text:
        reader = csv.reader(data_lines(text), skipinitialspace=True)
        try:
            header = [h.strip() for h in next(reader, [])]
            refuse_other_separator(header, where)  # (before its rows: a decimal comma is no comma too many)
            rows, places = [], []
            for row in _records(reader):
                first = numbers[row[0]]
                cells = [c.strip() for c in row[1]]
                if len(cells) > len(header):
                    raise InputError(
                        f"{where}, line {first}",
                        f"{len(cells)} fields where the header has {len(header)}",
                        "repair the line (a comma too many, or a value not quoted)",
                    )
                rows.append(cells + [""] * (len(header) - len(cells)))
                places.append(f"line {first}")
        except (csv.Error, UnicodeDecodeError) as error:
            raise InputError(where, f"cannot be read as a CSV table ({error})", "repair the file") from None
    if not header:
        raise InputError(where, "holds no table (no header line)", "give a CSV table with a header line")
    unique_columns(header, where)
    return pd.DataFrame(rows, columns=header, dtype=object), places


def _records(reader: Any) -> Any:
    """(index of its first line among the data lines, fields) for each record of a csv reader."""
    while True:
        start = reader.line_num
        row = next(reader, None)
        if row is None:
            return
        yield start, row


def refuse_non_numbers(cells: pd.Series, column: str, where: str, places: Sequence[str]) -> None:
    """Refuse a column of a table (read from ``where``, each row at its place in ``places``) that holds booleans,
    durations or dates (:func:`perfmodel.inputs.coerce.non_numeric_kind`): never read as 1 and 0, as a duration's
    raw unit (nanoseconds) or as a date's epoch. The first such cell is named at its place, in one line, as
    every reader of a table of measurements (:func:`perfmodel.calibrate`, ``perfmodel connectors --fit``) says it.

    >>> refuse_non_numbers(pd.Series([1.5, 2.0]), "measured_ms", "t.jsonl", ["line 1", "line 2"])
    >>> refuse_non_numbers(pd.Series([1.5, True]), "measured_ms", "t.jsonl", ["line 1", "line 2"])
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: t.jsonl, line 2: column 'measured_ms' holds booleans (true), not plain numbers. Fix: give plain numbers in the column.
    """
    kind = non_numeric_kind(cells)
    if kind is None:
        return
    values = cells.to_numpy(dtype=object)
    row = next((i for i, v in enumerate(values) if non_numeric_kind([v]) is not None), 0)
    value, place = values[row], places[row] if row < len(places) else f"row {row + 1}"
    # (a JSON-lines file wrote true, a frame or a Parquet file holds True)
    shown = json.dumps(bool(value)) if isinstance(value, (bool, np.bool_)) and place.startswith("line ") else value
    fix = "divide durations by pd.Timedelta(1, 'ms')" if kind == "durations" else "give plain numbers"
    raise InputError(f"{where}, {place}", f"column {column!r} holds {kind} ({shown}), not plain numbers",
                     f"{fix} in the column")  # fmt: skip


def unique_columns(header: list[str], where: str) -> None:
    """Refuse a table whose header names a column twice (``where``: the table, for the message).

    >>> unique_columns(["nbytes", "measured_ms"], "t.csv")
    """
    seen = set()
    for name in header:
        if name in seen:
            raise InputError(where, f"the column {name!r} appears twice", "keep one of them, or rename the other")
        seen.add(name)


def _perftest_columns(line: str) -> list[str]:
    """perftest's header as column names: fields apart by two or more spaces or tabs (``#bytes #iterations``
    is two)."""
    names: list[str] = []
    for part in re.split(r"\s{2,}|\t+", line.strip()):
        names.extend(part.split() if re.fullmatch(r"#\S+(\s+#\S+)+", part) else [part])
    return names


def _read_perftest(path: Path, where: str, compression: str | None) -> tuple[pd.DataFrame, list[str]]:
    """perftest's text output: the rows under each ``#bytes`` header, up to the dashed line that ends the table
    (perftest's banner, its warnings and a row printed again after the table are not measurements)."""
    header: list[str] = []
    rows, places, inside = [], [], False
    with _lines(path, compression) as text:
        for number, line in enumerate(text, start=1):
            stripped = line.strip()
            if _PERFTEST_HEADER.match(line):
                columns = _perftest_columns(line)
                if header and columns != header:
                    raise InputError(
                        f"{where}, line {number}", "a second table of other columns", "keep one perftest run per file"
                    )
                header, inside = columns, True
            elif inside and stripped.startswith("---"):
                inside = False
            elif inside and stripped[:1].isdigit():
                cells = stripped.split()
                if len(cells) != len(header):
                    collapsed = len(header) == 1 and " " in header[0]  # (perftest parts its names by 2+ spaces)
                    raise InputError(
                        f"{where}, line {number}",
                        f"{count(len(cells), 'value')} under a header of {count(len(header), 'column')}"
                        + (
                            " (its names apart by single spaces: they cannot be told from the spaces inside a name"
                            " such as 'BW peak[MB/sec]')"
                            if collapsed
                            else ""
                        ),
                        "save perftest's output as it prints it (e.g. ib_write_bw ... > out.txt, not echo $out)"
                        if collapsed
                        else "repair the line, or remove it",
                    )
                rows.append(cells)
                places.append(f"line {number}")
    if not header:
        raise InputError(where, "holds no perftest table (no '#bytes' header)", "save perftest's output as is")
    return pd.DataFrame(rows, columns=header, dtype=object), places
