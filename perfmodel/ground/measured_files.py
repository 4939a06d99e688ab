"""Files of measured transfers, as :func:`perfmodel.calibrate` reads them: CSV tables (``#`` comment lines, text
cells), Parquet, JSON lines and perftest's own text output (``ib_write_bw`` and its kin, saved as is), each row
with its place in the file.
"""

from __future__ import annotations

import csv
import io as _io
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import InputError
from ..inputs.words import count
from .tables import detect, json_lines, open_input

__all__ = ["read_measured_file", "unique_columns"]

#: perftest's table header: ``#bytes  #iterations ...``.
_PERFTEST_HEADER = re.compile(r"^\s*#bytes\s+#")


def read_measured_file(path: Path, where: str) -> tuple[pd.DataFrame, list[str]]:
    """A table of measured transfers in a file (CSV, Parquet, JSON lines or perftest's text output) as its cells,
    with each row's place in the file (a line, or a Parquet row) for the messages; ``where`` names the file."""

    try:
        kind = detect(path)
    except InputError as error:
        if _is_perftest(path, None):
            return _read_perftest(path, where, None)
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
    """Whether a text file is perftest's own output (a ``#bytes  #iterations ...`` header, no commas)."""
    try:
        with _lines(path, compression) as text:
            return any(_PERFTEST_HEADER.match(line) and "," not in line for line, _ in zip(text, range(10_000)))
    except (UnicodeDecodeError, OSError):
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
