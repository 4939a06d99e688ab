"""A trace's cells written as text, read one way for the whole column: dates whose day and month come first in
one order (settled by a value, never guessed), and lists of block ids (``[1, 2]``, ``[1 2]``, whole floats).
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["DateOrder", "ShortenedList", "date_order", "id_cell", "one_format"]


def one_format(column: pd.Series, where: str = "") -> pd.Series:
    """Text as datetimes in one format for the whole column (never guessed row by row: 12/11 and 13/11 would be
    read month first and day first): ISO 8601 (any precision), else the format of its first value as pandas
    infers it, a second's fraction aside (``18:15:46`` and ``18:15:46.5`` are one format); a row in another
    format is no time (NaT: a malformed row). Dates written day and month first (``01/12/2023``) are read in the
    order a value settles (:func:`date_order`: ``13/12/2023`` day first, ``12/13/2023`` month first), every one
    (a value in the other order is no time); when none settles it, the column is refused, naming ``where``:
    pandas would read them month first."""
    iso = pd.to_datetime(column, errors="coerce", format="ISO8601")
    if iso.notna().sum() == column.notna().sum():
        return iso
    text = column.astype("string").str.strip()
    order = date_order(text)
    if (
        order is not None
        and order.day_first is None
        and _day_month_fields(text)[0].notna().sum() > pd.to_numeric(text, errors="coerce").notna().sum()
    ):
        first = text.dropna().iloc[0]  # (dates, not a column of ms with a stray date: that row alone is malformed)
        raise InputError(
            where,
            f"the order of day and month is ambiguous: {first!r} (the first value) and every "
            "other value read as day/month and as month/day alike (no first or second number above 12 "
            "settles it)",
            "write ISO 8601 dates (year-month-day), e.g. 2023-12-01 23:59:59",
        )
    day_first = bool(order and order.day_first)
    with warnings.catch_warnings():  # (a first value pandas cannot infer a format from: each value parsed alone)
        warnings.simplefilter("ignore", UserWarning)
        seconds = pd.to_datetime(
            text.str.replace(r"(:\d\d)[.,]\d+", r"\1", regex=True), errors="coerce", dayfirst=day_first
        )
        each = pd.to_datetime(text, errors="coerce", format="mixed", dayfirst=day_first)  # (its fraction kept)
    if not (pd.api.types.is_datetime64_any_dtype(seconds) and pd.api.types.is_datetime64_any_dtype(each)):
        return iso  # (time zones pandas will not mix: the caller's own case)
    inferred = each.where(seconds.notna() & (each.dt.floor("s") == seconds))  # read as the first value is
    if order is not None:  # (pandas reads each value alone when it infers no format, 13/12/23 and 12/13/23 alike)
        first_number, second_number = _day_month_fields(text)
        day, month = (first_number, second_number) if day_first else (second_number, first_number)
        inferred = inferred.where(
            ((inferred.dt.day == day) & (inferred.dt.month == month)).fillna(False).to_numpy(dtype=bool)
        )
    return inferred if inferred.notna().sum() > iso.notna().sum() else iso


#: A date written with its day and month first, in an order to find, then its year: ``01/12/2023``, ``1.12.23``.
_DAY_MONTH = r"^(\d{1,2})([/.-])(\d{1,2})\2(?:\d{4}|\d{2})(?!\d)"


class DateOrder(NamedTuple):
    """The order of a column's dates written day and month first: ``day_first`` (None: no value settles it) and
    the row of the first value that settles it (-1: none)."""

    day_first: bool | None
    row: int


def _day_month_fields(text: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The first and second numbers of each value written as a date with its day and month first, with the
    separator of the column's first value (NaN elsewhere)."""
    parts = text.str.extract(_DAY_MONTH)
    separator = parts[1].dropna().iloc[0] if parts[1].notna().any() else None
    same = (parts[1] == separator).fillna(False).to_numpy(dtype=bool)
    first, second = (pd.to_numeric(parts[k].where(same), errors="coerce").astype("float64") for k in (0, 2))
    return first, second


def date_order(text: pd.Series) -> DateOrder | None:
    """Whether a column of text whose first value is a date written with its day and month first (``01/12/2023``,
    ``1.12.23``, ``01-12-2023``) is day first: settled by its first value with a first number above 12 (day
    first) or a second one (month first); None when the first value is no such date.

    >>> date_order(pd.Series(["01/12/2023 23:59", "13/12/2023 00:00"]))
    DateOrder(day_first=True, row=1)
    >>> date_order(pd.Series(["01/12/2023 23:59", "02/12/2023 00:00"]))
    DateOrder(day_first=None, row=-1)
    >>> date_order(pd.Series(["2023-12-01 23:59"])) is None
    True
    """
    values = text.dropna()
    if values.empty or re.match(_DAY_MONTH, str(values.iloc[0])) is None:
        return None
    first, second = _day_month_fields(text.astype("string"))
    day = ((first > 12) & (first <= 31) & (second >= 1) & (second <= 12)).to_numpy(dtype=bool)
    month = ((second > 12) & (second <= 31) & (first >= 1) & (first <= 12)).to_numpy(dtype=bool)
    if not (day.any() or month.any()):
        return DateOrder(None, -1)
    at_day = int(np.argmax(day)) if day.any() else len(day)
    at_month = int(np.argmax(month)) if month.any() else len(month)
    return DateOrder(at_day < at_month, min(at_day, at_month))


def id_cell(value: Any) -> list[int]:
    """One hash_ids cell as a list of 64-bit integers, or a ValueError saying what it holds."""
    if (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    ):
        raise ValueError("the cell is empty (a request's block ids are unknown: write [] for none)")
    try:
        items: list[Any] = _id_list(value) if isinstance(value, str) else list(value)
    except ShortenedList:
        raise ShortenedList(
            f"holds {value!r}, a list shortened with '...' when it was written (pandas prints a "
            "long list so in a CSV file): its ids are lost"
        ) from None
    except (ValueError, TypeError) as error:
        why = f": {error}" if isinstance(error, ValueError) and str(error) else ""
        raise ValueError(f"holds {value!r}, not a list of block ids{why}") from None
    ids = [_whole(h, value) for h in items]  # (1.0 is block 1, as the replay reads it; 1.5 is no block)
    if not all(isinstance(h, (int, np.integer)) and not isinstance(h, bool) for h in ids):
        raise ValueError(f"holds {value!r}, not a list of whole block ids")
    if not all(-(2**63) <= h < 2**63 for h in ids):
        raise ValueError(f"holds a block id outside 64-bit integers ({str(value)[:40]})")
    return ids


class ShortenedList(ValueError):
    """A hash_ids cell written shortened with ``...`` (pandas' printing of a long list): its ids are lost."""


def _whole(h: Any, value: Any) -> Any:
    """A block id given as a float: the integer when whole and at most 2**53 in magnitude, a ValueError naming it
    when fractional, not finite or larger (a float so large holds no exact id: 2**53 + 1 is read as 2**53)."""
    if not isinstance(h, (float, np.floating)):
        return h
    if not (math.isfinite(h) and h == math.floor(h)):
        raise ValueError(f"holds {value!r}, not a list of block ids: its block id {float(h)!r} is not whole")
    if abs(h) > 2.0**53:
        raise ValueError(
            f"holds {value!r}, not a list of block ids: its block id {float(h)!r} is above 2**53, a "
            "float too large to hold an exact id (write ids as integers)"
        )
    return int(h)


def _id_list(text: str) -> list[int | float]:
    """``"[1, 2, 3]"`` (JSON) or ``"[1 2 3]"`` (how pandas writes an Arrow list column to CSV) as a list, integers
    as integers (exact at any size) and floats (``1.0``, ``1.``: a float column written so) as floats, for
    :func:`_whole`; an empty element (``"[1,,2]"``, ``"[,]"``) is a ValueError saying so, never merged away."""
    inner = text.strip()
    if "..." in inner:
        raise ShortenedList(text)
    if not (inner.startswith("[") and inner.endswith("]")) or not re.fullmatch(r"[\d\s,.eE+-]*", inner[1:-1]):
        raise ValueError()
    body = inner[1:-1].strip()
    items = body.split(",") if "," in body else body.split()
    if body and not all(item.strip() for item in items):
        raise ValueError("an empty element, a block whose id is unknown (as a null one)")
    return [_id_item(item.strip()) for item in items]


def _id_item(item: str) -> int | float:
    """One element of a hash_ids cell's text: an integer, or a float (``1.0``, ``1.``, ``1e3``) for :func:`_whole`
    to take when whole; else a ValueError."""
    if re.fullmatch(r"[+-]?\d+", item):
        return int(item)
    if re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", item):
        return float(item)
    raise ValueError()
