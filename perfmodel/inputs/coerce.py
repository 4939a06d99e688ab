"""Generic coercion at the edge: user values to numpy arrays of a few fixed dtypes, never a silent misread.

Used by every entry point (the numpy-level API, the pandas facade, sweeps, replay) so an
input form is accepted, or refused, the same way everywhere:

- scalars, lists, numpy arrays (masked entries are missing), pandas Series/Index and
  extension arrays (nullable, Arrow-backed, categorical);
- numbers as int64 or float64; text is parsed, with the usual spellings of "missing"
  (``""``, ``NA``, ``null``...) as missing; booleans, dates and durations are refused
  where numbers are expected, never read as 0/1 or nanoseconds;
- labels (names, enum members, codes) as small integer codes, each distinct label mapped
  once (:func:`map_distinct`), never per row.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError, check_choice, not_a_number
from .table import INPUTS

# Stand-in for an entry that could not be parsed at all (a string, an unknown label):
# invalid under every rule, so the kernel counts it and errors="coerce" yields NaN.
UNPARSEABLE = -1


def non_numeric_kind(values: Any) -> str | None:
    """What ``values`` (a scalar, a list, an array or a Series) hold that is never to be read as numbers:
    ``"booleans"`` (not 0 and 1), ``"durations"`` or ``"dates"`` (not their raw unit, not from an epoch); None when
    they hold none of these (numbers, or text to parse). The one test of every reader of numbers.

    >>> non_numeric_kind([1.5, 2]), non_numeric_kind([1, True]), non_numeric_kind(pd.to_timedelta([1], unit="ms"))
    (None, 'booleans', 'durations')
    """
    if isinstance(values, (pd.Series, pd.Index)):
        data = values.to_numpy()
    else:
        data = np.asarray(values, dtype=object if isinstance(values, (list, tuple)) else None)
    kind = {"b": "booleans", "m": "durations", "M": "dates"}.get(data.dtype.kind)
    if kind is not None or data.dtype.kind != "O":
        return kind
    return _kind_of_types(_types(data.ravel()))


def _types(data: NDArray[np.object_]) -> set[type]:
    """The types of a 1-D object array's values (None's left out): of every value, never of its distinct values
    (``True`` is equal to ``1``, and a set of values keeps one of them)."""
    return set(pd.unique(np.frompyfunc(type, 1, 1)(data))) - {type(None)}


def _kind_of_types(types: set[type]) -> str | None:
    """:func:`non_numeric_kind` of values of these types."""
    for t in types:  # (pandas' Timedelta and Timestamp are datetime's timedelta and datetime)
        if issubclass(t, (bool, np.bool_)):
            return "booleans"
        if issubclass(t, (datetime.timedelta, np.timedelta64)):
            return "durations"
        if issubclass(t, (datetime.date, np.datetime64)):
            return "dates"
    return None


def one_index(values: dict[str, Any]) -> None:
    """Refuses Series among ``values`` (inputs by name) whose indexes differ: paired by position, as numpy pairs
    arrays, rows of other labels would meet (pandas pairs them by label); and a DataFrame (one column is wanted).

    >>> one_index({"num_input_tokens": pd.Series([1, 2]), "kv_transfer_bandwidth": pd.Series([3.0, 4.0])})
    """
    for name, value in values.items():
        if isinstance(value, pd.DataFrame):
            as_1d(name, value)  # (refused there, naming its columns)
    series = [(name, value) for name, value in values.items() if isinstance(value, pd.Series)]
    for name, value in series[1:]:
        first, index = series[0][0], series[0][1].index
        if not value.index.equals(index):
            raise InputError(
                name,
                f"a Series whose index differs from {first}'s (paired by position, rows of other labels would meet)",
                f"align it first ({name}.reindex({first}.index)), pass .to_numpy() to pair by position, or put "
                "both in one DataFrame and use df.perfmodel",
            )


def aligned(index: pd.Index, argument: str, series: pd.Series, whose: str = "frame") -> pd.Series:
    """``series``, a per-row input given as a value, on the rows of ``index`` by label, as pandas aligns it (never
    by position): as it is when its index is ``index``, reordered when it holds the same rows in another order;
    otherwise refused, naming ``argument`` (``whose``: what ``index`` belongs to, for the message).

    >>> aligned(pd.Index([1, 2]), "ready_ms", pd.Series([5.0, 6.0], index=[2, 1])).tolist()
    [6.0, 5.0]
    """
    if series.index.equals(index):
        return series
    if series.index.is_unique and index.is_unique and len(series) == len(index) and series.index.isin(index).all():
        return series.reindex(index)  # the same rows in another order
    raise InputError(
        argument,
        f"a Series whose index differs from the {whose}'s (its values would land on other rows)",
        f"pass a Series with the {whose}'s index, a column name, or .to_numpy() to align by position",
    )


def why_invalid(name: str, value: Any) -> str:
    """What is wrong with one invalid value of the input ``name``, in words (as every entry point says it).

    >>> why_invalid("num_input_tokens", -3), why_invalid("num_input_tokens", 2**53 + 1)
    ('negative', 'above 9007199254740992')
    """
    entry = INPUTS[name]
    if entry.kind in ("code", "flag"):
        valid = ", ".join(repr(k) for k in entry.labels or ())
        return f"not a valid {name.replace('_', ' ')}; valid: {valid}"
    if entry.valid is not None and exactly_above(value, entry.valid.high):
        return f"above {entry.valid.high:.17g}"  # (exactly: 2**53 + 1 as a float is 2**53)
    try:
        number = float(value)
    except OverflowError:  # (an int beyond float64's range)
        return "beyond the range of float64 numbers (about 1.8e308)"
    except (TypeError, ValueError):
        return not_a_number(value)
    if math.isnan(number):
        return "missing"
    if number < 0:
        return "negative"
    if number in (np.inf, -np.inf):
        return "infinite"
    limits = entry.valid
    assert limits is not None, name  # (a number's input has a range)
    if number > limits.high:
        return f"above {limits.high:.17g}"
    if number < limits.low or (number == limits.low and limits.open_low):
        return f"below {limits.low:g}" if not limits.open_low else f"not above {limits.low:g}"
    return "not a whole number"


def check_out(out: Any, n: int, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """``out`` if the kernel can write ``n`` delays into it, sharing no memory with the input ``arrays``; else
    one line saying which condition fails (a 1-D float64 array, writeable, C-contiguous, of ``n`` entries)."""
    fix = f"pass np.empty({n}) or leave out=None"
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.ndim != 1:
        got = f"{type(out).__name__} {getattr(out, 'dtype', '')} {getattr(out, 'shape', '')}".rstrip()
        raise InputError("out", f"must be a 1-D float64 numpy array, got {got}", fix)
    if not out.flags.writeable:
        raise InputError("out", "is read-only (a pandas column's array may be: copy-on-write)", fix)
    if not out.flags.c_contiguous:
        raise InputError("out", "is not C-contiguous (a strided view)", fix)
    if out.shape[0] != n:
        raise InputError("out", f"has length {out.shape[0]}; it must be of length {n} (one entry per row)", fix)
    for name, array in arrays.items():
        if np.may_share_memory(out, array):
            raise InputError("out", f"shares memory with {name}", "pass a separate output array")
    return out


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view (one kernel type for writeable and read-only inputs)."""
    flags = a.flags
    if not flags.c_contiguous:
        a = np.ascontiguousarray(a)
        flags = a.flags
    if flags.writeable:
        a = a.view()
        a.setflags(write=False)  # (a.flags.writeable = False builds a second flags object: ~2 us after a kernel pass)
    return a


def as_1d(name: str, value: Any) -> tuple[Any, bool]:
    """``value`` as a 1-D numpy array or pandas array-like, and whether it was a scalar."""
    if isinstance(value, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray)):
        return value, False
    if isinstance(value, pd.DataFrame):
        raise InputError(
            name, f"got a DataFrame with columns {list(value.columns)}", "pass one column, e.g. df['column']"
        )
    if np.ma.isMaskedArray(value):  # masked entries are missing values, never the numbers behind the mask
        value = _unmask(name, value)
    array = np.asarray(value)
    if array.ndim == 1 and array.dtype.kind in "USbiuf" and not isinstance(value, np.ndarray) and _mixed(value):
        array = np.asarray(value, dtype=object)  # each entry read as it is, as it would be alone
    if array.ndim == 0:
        return array.reshape(1), True
    if array.ndim > 1:
        raise InputError(
            name,
            f"must be a scalar or 1-D, got an array of shape {array.shape}",
            "pass one column, or flatten it with .ravel()",
        )
    return array, False


def _mixed(entries: Any) -> bool:
    """Whether a sequence mixes text, booleans and other values, which numpy would convert to one of
    them (1.0 -> '1.0', an enum member -> 'WorkerType.PREFILL' on Python 3.10, False -> 0)."""
    kinds = {
        str if issubclass(kind, (str, bytes)) else bool if issubclass(kind, (bool, np.bool_)) else object
        for kind in set(map(type, entries))
    }
    return len(kinds) > 1


def _unmask(name: str, value: np.ma.MaskedArray) -> np.ndarray:
    """A masked array with its masked entries as missing (NaN for numbers, None otherwise)."""
    if not np.ma.getmask(value).any():
        return np.ma.getdata(value)
    if value.dtype.kind in "iuf":
        return value.astype(np.float64).filled(np.nan)  # type: ignore[attr-defined]  # (numpy's stubs type a MaskedArray's astype as an ndarray)
    if value.dtype.kind in "b":
        raise InputError(name, "got a masked boolean array", "pass a pandas 'boolean' array, or fill the mask")
    return value.astype(object).filled(None)  # type: ignore[attr-defined]  # (numpy's stubs type a MaskedArray's astype as an ndarray)


def _pandas_to_numpy(data: Any) -> np.ndarray:
    """A pandas Series/Index/ExtensionArray as numpy: numbers as numbers (NA as NaN), else objects."""
    dtype = data.dtype
    if isinstance(dtype, np.dtype):
        return data.to_numpy()
    if dtype.kind in "iufb" and not isinstance(dtype, pd.CategoricalDtype):
        if dtype.kind in "iu" and not pd.isna(data).any():
            return data.to_numpy(dtype=np.int64 if dtype.kind == "i" else np.uint64)
        if dtype.kind == "b" and not pd.isna(data).any():
            return data.to_numpy(dtype=np.bool_)
        return data.to_numpy(dtype=np.float64, na_value=np.nan)
    return np.asarray(data, dtype=object)


def no_booleans(name: str, value: Any) -> None:
    """Refuse booleans (a bool, numpy's, an array or column of them, nullable ones too) where numbers go: never
    read as 0/1. The one check every numeric input passes.

    >>> no_booleans("num_layers", True)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: num_layers: got booleans where numbers were expected. Fix: pass numbers, e.g. .astype('int64').
    """
    dtype = getattr(value, "dtype", None)
    if (
        isinstance(value, (bool, np.bool_))
        or getattr(dtype, "kind", "") == "b"
        or (dtype is None and isinstance(value, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in value))
    ):
        raise InputError(name, "got booleans where numbers were expected", "pass numbers, e.g. .astype('int64')")


def to_numeric(name: str, data: Any) -> np.ndarray:
    """Numbers as int64 or float64; entries that are not numbers as ``UNPARSEABLE``."""
    if not isinstance(data, np.ndarray):
        no_booleans(name, data)  # (nullable booleans too)
        data = _pandas_to_numpy(data)
    dtype = data.dtype
    if dtype == np.int64 or dtype == np.float64:
        return data
    no_booleans(name, data)
    if dtype.kind in "mMc":  # would otherwise parse as nanoseconds or lose an imaginary part: never a silent number
        raise InputError(
            name,
            f"got {dtype} values where plain numbers were expected",
            "pass plain numbers in the argument's unit (tokens, bytes, GB/s or ms)",
        )
    if dtype.kind == "i" or (dtype.kind == "u" and dtype.itemsize < 8):
        return data.astype(np.int64)
    if dtype.kind == "u":  # uint64 beyond int64's range stays exact enough as float64
        fits = data.size == 0 or data.max() <= np.iinfo(np.int64).max
        return data.astype(np.int64 if fits else np.float64)
    if dtype.kind == "f":
        return data.astype(np.float64)
    # objects and strings: parse; genuine missing values (None, NaN, NA, "" and "NA"-like text) stay NaN.
    return _parse_objects(name, np.asarray(data, dtype=object))


#: Text that means "missing" in a file (compared case-insensitively, after stripping spaces).
MISSING_TEXT = frozenset({"", "na", "nan", "null", "none", "n/a", "<na>", "nat"})


def text_number(value: Any) -> float | None:
    """The number a text holds, NaN for a missing marker (:data:`MISSING_TEXT`), None for any other value: how
    text reads as a number at every entry point, alone or in a list or column.

    >>> text_number(" 1e3 "), text_number("NA"), text_number("ib-ndr"), text_number(5)
    (1000.0, nan, None, None)
    """
    if not isinstance(value, str) or "_" in value:  # (Python's float() reads 1_000; no file or frame does)
        return None
    if value.strip().lower() in MISSING_TEXT:
        return float("nan")
    try:
        return float(value)
    except ValueError:
        return None


def _parse_objects(name: str, data: NDArray[np.object_]) -> np.ndarray:
    """Objects (numbers, numeric text, missing markers) as int64 if all are whole, else float64.

    Booleans, dates and durations are errors (never silently numbers); anything else that
    is not a number becomes ``UNPARSEABLE``, so the kernel counts it as invalid.
    """
    kinds = _types(data)
    refused = _kind_of_types(kinds)
    if refused == "booleans":
        raise InputError(name, "got booleans where numbers were expected", "pass numbers, e.g. 1 and 0")
    if refused is not None:
        raise InputError(
            name,
            f"got {refused} where plain numbers were expected",
            "pass plain numbers in the argument's unit (tokens, bytes, GB/s or ms)",
        )
    if kinds and all(issubclass(k, (int, np.integer)) for k in kinds):
        try:
            return data.astype(np.int64)
        except (OverflowError, TypeError):
            pass  # beyond int64, or missing values among them: float64 below
    text = pd.Series(data, dtype=object)
    if any(issubclass(k, Fraction) for k in kinds):  # (pandas reads no Fraction; Fraction(128, 1) is 128)
        text = text.map(_fraction_as_float)
    beyond = pd.Series(False, index=text.index)
    if any(issubclass(k, int) for k in kinds):  # Python ints beyond float64's range: not numbers it can hold
        beyond = text.map(_beyond_float)
        text[beyond] = None
    if any(issubclass(k, str) for k in kinds):
        is_text = text.map(type) == str  # noqa: E721 (elementwise: exactly str, not a subclass)
        missing_text = text[is_text].str.strip().str.lower().isin(MISSING_TEXT)
        text[missing_text[missing_text].index] = None
    parsed = pd.to_numeric(text, errors="coerce")
    parsed = parsed.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
    parsed[(np.isnan(parsed) & ~pd.isna(text).to_numpy()) | beyond.to_numpy(dtype=bool)] = UNPARSEABLE
    entry = INPUTS.get(name)
    if entry is not None and entry.kind == "count" and entry.valid is not None and math.isfinite(entry.valid.high):
        for i in np.flatnonzero(parsed == entry.valid.high):  # (a count above it may read as it: 2**53 + 1 as 2**53)
            parsed[i] = UNPARSEABLE if exactly_above(data[i], entry.valid.high) else parsed[i]
    return parsed


def exactly_above(value: Any, high: float) -> bool:
    """Whether ``value``, a whole number or its text, is above ``high`` exactly, where float64 would round it to it.

    >>> exactly_above(2**53 + 1, 2.0**53), exactly_above(" 9007199254740993 ", 2.0**53), exactly_above(2.0**53, 2.0**53)
    (True, True, False)
    """
    if isinstance(value, str):
        try:
            value = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            return False
    if isinstance(value, np.integer):
        value = int(value)  # (compared exactly: numpy would compare it as a float)
    return isinstance(value, (int, Fraction)) and not isinstance(value, bool) and value > high


def _fraction_as_float(value: Any) -> Any:
    """A :class:`~fractions.Fraction` as the float it is (one beyond float64's range stays, not a number); else as is."""
    if not isinstance(value, Fraction):
        return value
    try:
        return float(value)
    except OverflowError:
        return value


_HUGE = 2**1000  # (ints below it in size are floats; float64 ends near 2**1024)


def _beyond_float(value: Any) -> bool:
    """Whether ``value`` is a Python int beyond float64's range (``float(value)`` overflows)."""
    if not isinstance(value, int) or -_HUGE < value < _HUGE:
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def map_distinct(data: Any, label_to_value: Callable[[Any], Any], dtype: Any, missing: Any) -> np.ndarray:
    """Map each distinct label of ``data`` once (hash-based), then spread the results to every row.

    Works on numpy arrays and pandas objects (Categorical codes are reused as they are);
    missing labels (None, NaN, NA) map to ``missing``.
    """
    codes, uniques = distinct(data)
    return spread(codes, np.array([label_to_value(label) for label in uniques] + [missing], dtype=dtype))


class Coded:
    """A column of labels given as the codes of its distinct labels (which need not be hashable:
    model configs), as a grid that knows its few distinct values hands them to the edge."""

    ndim = 1
    dtype = np.dtype(object)

    def __init__(self, codes: np.ndarray, labels: list[Any]) -> None:
        self.codes, self.labels = codes, labels

    def __len__(self) -> int:
        return len(self.codes)


def holds_nothing(value: Any) -> bool:
    """Whether an array not of numbers (names, objects, text) holds nothing: no row, or every row missing (an empty
    frame's column, Dask's meta among them). A column of numbers holds numbers, missing or not.

    >>> holds_nothing(np.array([], dtype=object)), holds_nothing([None, np.nan]), holds_nothing(np.array([np.nan]))
    (True, True, False)
    """
    listed = isinstance(value, (list, tuple))
    dtype = getattr(value, "dtype", None)  # (a scalar, numbers, a Coded column of labels: no)
    if (dtype is None and not listed) or isinstance(value, Coded) or (dtype is not None and dtype.kind in "iufb"):
        return False
    if np.ndim(value) == 0 or not len(value):
        return np.ndim(value) > 0
    first = value[0] if listed else np.asarray(value[:1], dtype=object)[0]
    return pd.isna(first) is True and bool(pd.isna(np.asarray(value, dtype=object)).all())  # (names: said at once)


def distinct(data: Any) -> tuple[np.ndarray, Any]:
    """(codes, distinct labels) of a column: -1 codes missing labels. Categorical codes are reused
    as they are, Arrow-backed columns are encoded by Arrow (its int32 indices, no 64-bit copy)."""
    if isinstance(data, Coded):
        return data.codes, data.labels
    if isinstance(data.dtype, pd.CategoricalDtype):
        categorical = data.array if isinstance(data, (pd.Series, pd.Index)) else data
        return np.asarray(categorical.codes), categorical.categories
    if _arrow_backed(data):
        return _arrow_codes(data)
    try:
        return pd.factorize(data, use_na_sentinel=True)
    except TypeError:  # unhashable labels (config dicts): by their content, each distinct one once
        return _content_codes(data)


def _content_codes(data: Any) -> tuple[np.ndarray, list]:
    """(codes, distinct labels) of labels some of which are unhashable (mappings: model configs), two
    configs with the same content being one label."""
    import json
    from collections.abc import Mapping

    values = list(data.to_numpy() if isinstance(data, (pd.Series, pd.Index)) else data)
    keys = np.empty(len(values), dtype=object)
    keys[:] = [("config", json.dumps(v, sort_keys=True, default=str)) if isinstance(v, Mapping) else v for v in values]
    codes, uniques = pd.factorize(keys, use_na_sentinel=True)
    first = {code: i for i, code in reversed(list(enumerate(codes.tolist()))) if code >= 0}
    return codes, [values[first[k]] for k in range(len(uniques))]


def _arrow_backed(data: Any) -> bool:
    """Whether a pandas column keeps its values in Arrow (``string[pyarrow]``, ``str``, ``ArrowDtype``)."""
    dtype = getattr(data, "dtype", None)
    return isinstance(dtype, pd.ArrowDtype) or (
        isinstance(dtype, pd.StringDtype) and dtype.storage in ("pyarrow", "pyarrow_numpy")
    )


def _arrow_codes(data: Any) -> tuple[np.ndarray, list]:
    """(codes, distinct labels) of an Arrow-backed column by Arrow's dictionary encoding (chunks unified)."""
    import pyarrow as pa

    encoded = pa.array(getattr(data, "array", data)).dictionary_encode()  # a dictionary column stays as it is
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks else pa.array([], encoded.type)
    indices = encoded.indices
    if indices.null_count:  # missing labels: code -1
        indices = indices.cast(pa.int64() if pa.types.is_unsigned_integer(indices.type) else indices.type)
        indices = indices.fill_null(-1)
    return indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def spread(codes: np.ndarray, lookup: np.ndarray) -> np.ndarray:
    """``lookup[codes]``: code -1 (a missing label) takes the last entry, as numpy's indexing does."""
    return lookup[np.asarray(codes)]


def to_codes(data: Any, names: dict[str, int], limit: int, accept_bool: bool) -> np.ndarray:
    """Labels, enum members or integer codes as int8 codes (bool kept for flags).

    Anything that is not a valid code becomes ``UNPARSEABLE``.
    """
    dtype = data.dtype
    if dtype.kind == "b" and not accept_bool:  # booleans (nullable ones too) are never worker types or modes
        return np.full(len(data), UNPARSEABLE, dtype=np.int8)
    if not isinstance(data, np.ndarray) and dtype.kind in "iufb" and not isinstance(dtype, pd.CategoricalDtype):
        data = _pandas_to_numpy(data)
        dtype = data.dtype
    if dtype.kind == "b" and isinstance(dtype, np.dtype):
        return data if accept_bool else np.full(len(data), UNPARSEABLE, dtype=np.int8)
    if dtype == np.int8:
        return data
    if dtype.kind in "iuf" and isinstance(dtype, np.dtype):
        valid = (data >= 0) & (data <= limit)
        if dtype.kind == "f":
            valid &= data == np.floor(data)
        return np.where(valid, data, UNPARSEABLE).astype(np.int8)
    return map_distinct(data, lambda label: code_of(label, names, limit, accept_bool), np.int8, UNPARSEABLE)


def code_of(label: Any, names: dict[str, int], limit: int, accept_bool: bool) -> int:
    """The code of one label: a name (any case), an enum member or an integer code."""
    if isinstance(label, str):
        label = label.strip().lower()
        if label.isdigit():  # "1" from a text file, or numpy's cast of a mixed list
            return int(label) if int(label) <= limit else UNPARSEABLE
        return names.get(label, UNPARSEABLE)
    if isinstance(label, (bool, np.bool_)):
        return int(label) if accept_bool else UNPARSEABLE
    if isinstance(label, (int, np.integer, float, np.floating)) and 0 <= label <= limit and label == int(label):
        return int(label)
    return UNPARSEABLE


def plain(value: Any) -> Any:
    """numpy scalars as Python scalars, for readable messages."""
    return value.item() if isinstance(value, np.generic) else value


def unboxed(value: Any) -> Any:
    """A value in a 0-d array of objects or text as the value itself (a name, a link, a cluster, None: one value,
    as given plain); anything else as it is.

    >>> unboxed(np.array("ib-ndr")), unboxed(np.array(None, dtype=object)), unboxed(np.array(2.0)).ndim
    ('ib-ndr', None, 0)
    """
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "OUS":
        return value.item()
    return value


#: The inputs that take a name (a link, a model) or a number: text holding a number is that number.
_NAMED_OR_NUMBERS = ("kv_transfer_bandwidth", "kv_bytes_per_token")


def edge_values(given: dict[str, Any]) -> dict[str, Any]:
    """An entry point's keywords as its edge reads them: each :func:`unboxed`, and a Python int beyond float64's
    range refused by its keyword (alone, or in a list, a tuple or an array or Series of objects), before any
    conversion meets it as an ``OverflowError``.

    >>> edge_values({"link": np.array("ib-ndr"), "links": 2})
    {'link': 'ib-ndr', 'links': 2}
    >>> edge_values({"latency_ms": [0, 10**400]})
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: latency_ms: a number of 401 digits is beyond the range of float64 numbers (about 1.8e308). Fix: pass a number of a realistic size.
    """
    values = dict(given)
    for name, value in given.items():
        kind = type(value)  # (most keywords are None, floats or names: nothing to unbox or to check)
        if kind is np.ndarray:
            values[name] = value = unboxed(value)
            kind = type(value)
        if kind is int or kind is list or kind is tuple:  # (arrays of objects: parsed where they are read)
            _no_int_beyond_float(name, value if kind is not int else (value,))
        elif isinstance(value, str) and name in _NAMED_OR_NUMBERS and text_number(value) is not None:
            values[name] = text_number(value)  # ("50" GB/s, "NA": the number or missing value, as in a list)
    return values


def _no_int_beyond_float(name: str, entries: Any) -> None:
    """Refuse a Python int beyond float64's range among ``entries`` (the keyword ``name``'s)."""
    if any(type(entry) is int and not -_HUGE < entry < _HUGE for entry in entries):
        digits = [len(str(abs(entry))) for entry in entries if _beyond_float(entry)]
        if digits:
            raise InputError(
                name,
                f"a number of {max(digits)} digits is beyond the range of float64 numbers (about 1.8e308)",
                "pass a number of a realistic size",
            )


#: The inputs without which there is no model, and those whose default is a value (None is none of theirs).
_REQUIRED = tuple(name for name, entry in INPUTS.items() if entry.required)
_NONE_REFUSED = frozenset(name for name, entry in INPUTS.items() if not entry.required and entry.default is not None)


def check_required(values: dict[str, Any]) -> None:
    """Refuse a required input not given (None): without it there is no model.

    >>> check_required({"num_input_tokens": None})
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: num_input_tokens: is required (got None). Fix: pass num_input_tokens: Prompt tokens, whole numbers >= 0; NaN marks a missing count.
    """
    for name in _REQUIRED:
        if name in values and values[name] is None:
            raise InputError(
                name, "is required (got None)", f"pass {name}: {INPUTS[name].doc.split('. ')[0].rstrip('.')}"
            )


def refuse_none(given: dict[str, Any], frame_columns: tuple[str, ...] = ()) -> None:
    """Refuse None given for an input whose default is not None: None is no value, never taken for the default.
    ``frame_columns``: the inputs the pandas facade reads from the frame's column of their name by default (None is
    refused for them, required or not); other required inputs are left to the check of required inputs.

    >>> refuse_none({"state_bytes": None, "num_input_tokens": None})
    >>> refuse_none({"tp": None})
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: tp: is None, which is not a value of it. Fix: pass one (e.g. 2), or leave it out for the default (1).
    """
    for name, value in given.items():
        if value is not None or (name not in frame_columns and name not in _NONE_REFUSED):
            continue
        entry = INPUTS[name]
        default = getattr(entry.default, "name", entry.default)
        if name in frame_columns:
            leave = f"to read the frame's column {name!r}"
            if entry.required:
                raise InputError(
                    name, "is required (got None)", f"pass {name} (a value or a column name), or leave it out {leave}"
                )
            leave += f" (where the frame has none: {'not given' if default is None else default})"
        else:
            leave = f"for the default ({default})"
        raise InputError(
            name, "is None, which is not a value of it", f"pass one (e.g. {entry.example!r}), or leave it out {leave}"
        )


def check_errors(errors: Any, choices: tuple[str, ...] | None = None) -> str:
    """``errors`` if it is one of ``choices`` (default: the input table's, ``"raise"`` and ``"coerce"``), else
    :class:`InputError` (the one choice validator, :func:`perfmodel.errors.check_choice`)."""
    return check_choice("errors", errors, INPUTS["errors"].choices if choices is None else choices)


def _count_problem(original: Any, number: float, smallest: int) -> str:
    """Why one entry is not a whole number >= ``smallest``, in words."""
    if math.isnan(number):
        return "missing"
    try:
        float(original)
    except (TypeError, ValueError):
        return not_a_number(original)
    if number < 0:
        return "negative"
    if number < smallest:
        return f"below {smallest}"
    if number == np.inf:
        return "infinite"
    if number >= 2.0**63:
        return "too large for a 64-bit integer"
    return "not a whole number"


def whole_numbers(
    name: str,
    value: ArrayLike,
    smallest: int = 0,
    *,
    coerce_hint: str | None = None,
) -> NDArray[np.int64]:
    """``value`` (scalar or 1-D) as int64, or :class:`InputError` naming the first entry that is not
    a whole number >= ``smallest`` (missing values included). ``coerce_hint``: how the caller turns
    bad rows into NaN (``""`` where it cannot: the error then offers only the fix).

    >>> from perfmodel.inputs.coerce import whole_numbers
    >>> whole_numbers("block_size", [16, 64.0], smallest=1)
    array([16, 64])
    """
    data, _ = as_1d(name, value)
    numbers = to_numeric(name, data)
    if numbers.dtype == np.int64:
        invalid = numbers < smallest
    else:  # floats: whole, finite and within int64's range (a cast would wrap around silently)
        invalid = ~((numbers >= smallest) & (numbers < 2.0**63) & (numbers == np.floor(numbers)))
    if invalid.any():
        position = int(np.argmax(invalid))
        original, number = plain(np.asarray(data, dtype=object)[position]), numbers[position]
        problem = _count_problem(original, number, smallest)
        raise InputError(
            name,
            problem,
            f"{name} must be whole numbers >= {smallest} (fill or drop missing counts first)",
            n_invalid=int(invalid.sum()),
            row=position,
            value=original,
            coerce_hint=coerce_hint,
        )
    return numbers.astype(np.int64, copy=False)
