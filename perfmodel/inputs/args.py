"""One argument of the numpy API coerced for the kernel: a scalar or a read-only, C-contiguous 1-D array of
the kernel's few dtypes (inputs already in that set are never copied), label columns as the codes of their
distinct labels, and what the caller gave, for error messages.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pandas as pd

from ..kernels import handoff as _kernels
from .codes import TransferMode, WorkerType
from .coerce import UNPARSEABLE, as_1d, code_of, distinct, read_only, spread, to_codes, to_numeric
from .table import INPUTS, ROW_INPUTS


class Arg:
    """One coerced argument: ``value`` for the kernel, ``original`` for error messages."""

    __slots__ = ("is_array", "masks", "name", "original", "value")

    def __init__(self, name: str, value: Any, original: Any, masks: tuple[np.uint64, np.uint64] | None = None):
        self.name = name
        self.value = value  # numpy scalar, or read-only C-contiguous 1-D array
        self.original = original  # 1-D array of what the caller gave (before conversion)
        self.masks = masks  # value holds label codes: see _label_codes
        self.is_array = isinstance(value, np.ndarray)

    def kernel_values(self) -> Any:
        """The values the kernel works with (category codes decoded as the kernel decodes them)."""
        return self.value if self.masks is None else _kernels.decode_codes(self.value, *self.masks)


def _scalar(name: str, value: Any) -> Any:
    """A plain Python or numpy scalar as the kernel's scalar type, or None to take the general path."""
    rule = INPUTS[name]
    if isinstance(value, (np.timedelta64, np.datetime64)):
        return None  # the general path refuses them with a clear message
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value) if rule.kind == "flag" else None
    if isinstance(value, (int, np.integer)):
        if rule.kind == "count":  # float64, as the kernel computes (exact to 2**53): one compiled type, not two
            if -(2**53) <= value <= 2**53:
                return np.float64(value)
            if rule.valid is not None and int(value) > rule.valid.high:  # (exact: refused before a float cast)
                return np.float64(UNPARSEABLE)
            return np.int64(value) if -(2**63) <= value < 2**63 else _as_float(value)
        if rule.kind == "real":
            return _as_float(value)
        return np.int8(value) if 0 <= value <= rule.code_limit else np.int8(UNPARSEABLE)
    if isinstance(value, (float, np.floating)) and rule.kind in ("count", "real"):
        return np.float64(value)
    if isinstance(value, str) and rule.kind == "code":
        assert rule.labels is not None, name  # (every code has its names)
        return np.int8(code_of(value, rule.labels, rule.code_limit, False))
    return None


def _as_float(value: int | np.integer) -> np.float64:
    """An int as float64; a Python int beyond its range as :data:`UNPARSEABLE` (refused, and named, as a number
    beyond float64's range: never an infinity, which means something for some inputs)."""
    try:
        return np.float64(value)
    except OverflowError:
        return np.float64(UNPARSEABLE)


#: Scalar types whose coercion is remembered (hashable, immutable; NaN is one object, found by identity).
_CACHED_SCALARS = frozenset({bool, int, float, str, np.float64, np.int64, np.int8, np.bool_, WorkerType, TransferMode})


@functools.lru_cache(maxsize=512)
def _scalar_arg(name: str, kind: type, value: Any) -> Arg | None:
    """:func:`coerce` of one plain scalar, remembered: most calls pass the same few."""
    scalar_value = _scalar(name, value)
    return None if scalar_value is None else Arg(name, scalar_value, (value,))


#: Per argument, the dtypes in which a 1-D numpy array reaches the kernel as it is (a read-only view).
_KERNEL_DTYPES = {
    name: frozenset(
        map(
            np.dtype,
            {"count": (np.int64, np.float64), "real": (np.float64,), "code": (np.int8,), "flag": (np.bool_,)}[
                rule.kind
            ],
        )
    )
    for name, rule in ((e.name, e) for e in ROW_INPUTS)
}


def coerce(name: str, value: Any) -> Arg:
    kind = type(value)
    if kind is np.ndarray:  # the common case for columns: the kernel's dtype already, no conversion
        if value.ndim == 1 and value.dtype in _KERNEL_DTYPES[name]:
            return Arg(name, read_only(value), value)  # (its bound checked by the kernel, on the float64 it reads)
    elif kind is pd.Series:  # the same, of a frame (pandas' numpy-backed columns)
        if isinstance(value.dtype, np.dtype) and value.dtype in _KERNEL_DTYPES[name]:
            return Arg(name, read_only(value.to_numpy()), value)
    elif kind in _CACHED_SCALARS:  # the common case for the other arguments: no array round trip
        arg = _scalar_arg(name, kind, value)  # type: ignore[arg-type]  # (a class is hashable) the type is part of the key: 0 and 0.0 are equal
        if arg is not None:
            return arg
    scalar_value = _scalar(name, value)
    if scalar_value is not None:
        return Arg(name, scalar_value, [value])
    rule = INPUTS[name]
    data, scalar = as_1d(name, value)
    if rule.kind == "code" and not scalar and _holds_text(data):
        coded = _label_codes(name, data)
        if coded is not None:
            return coded
    if rule.kind == "count":
        converted = _exact(name, to_numeric(name, data))
    elif rule.kind == "real":
        converted = to_numeric(name, data).astype(np.float64, copy=False)
    else:
        assert rule.labels is not None, name  # (codes and flags have their names)
        converted = to_codes(data, rule.labels, rule.code_limit, rule.kind == "flag")
    if scalar:
        return Arg(name, converted[0], data)
    return Arg(name, read_only(converted), data)


def _exact(name: str, counts: np.ndarray) -> np.ndarray:
    """Whole counts converted from other forms (lists, objects, uint64) as the kernel may read them: int64 entries
    above the input's largest value (2**53 for tokens) are :data:`UNPARSEABLE` (in a float64 copy, on the error
    path only), refused before the kernel's float cast could round one into range (2**53 + 1 is 2**53 as a
    float); anything else as it is. An int64 array of the kernel's own dtype is not scanned again (a pass over
    every row, 18% of a 1M-row call): the kernel checks the float64 it reads, in which 2**53 + 1 is 2**53, the
    same delay to the last bit of the result."""
    valid = INPUTS[name].valid
    if counts.dtype != np.int64 or not counts.size or valid is None or not math.isfinite(valid.high):
        return counts
    high = math.floor(valid.high)  # (an int: numpy compares int64 with it exactly, never as float64)
    if counts.max() <= high:
        return counts
    exact = counts.astype(np.float64)
    exact[counts > high] = UNPARSEABLE
    return read_only(exact) if counts.ndim else exact


def _holds_text(data: Any) -> bool:
    """Whether a column holds labels to encode (categories, strings, objects), not numeric codes."""
    dtype = data.dtype
    return (
        isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype))
        or dtype.kind in "OUS"
        or (isinstance(dtype, pd.ArrowDtype) and dtype.kind not in "iufb")
    )


def _label_codes(name: str, data: Any) -> Arg | None:
    """A column of labels (categorical, text, objects) as the codes of its distinct labels (a
    categorical's own, Arrow's dictionary indices, else pandas' factorization) and, for up to 64
    labels, two bit masks over them (the labels whose value is 1 (prefill, destination_missing), the
    valid ones), which the kernel decodes row by row: no full-length pass spreading the labels'
    values before it. More labels are spread to their values; None for labels that cannot be hashed."""
    try:
        codes, labels = distinct(data)
        if getattr(data, "dtype", None) == np.dtype(object) and not all(isinstance(label, str) for label in labels):
            apart = _booleans_apart(data)  # (numbers among the labels: booleans may hide there)
            if apart is not None:
                codes, labels = distinct(apart)
    except TypeError:  # unhashable entries (lists): the general path
        return None
    values = _label_values(name, labels)
    if len(values) > 64:
        return Arg(name, read_only(spread(codes, np.array([*values, UNPARSEABLE], dtype=np.int8))), data)
    one = sum(1 << position for position, value in enumerate(values) if value == 1)
    valid = sum(1 << position for position, value in enumerate(values) if value != UNPARSEABLE)
    # the codes of up to 64 labels fit in int8: one compiled form whatever gave them (a categorical's int8,
    # Arrow's int32, pandas' int64 factorization), at the cost of one narrowing pass for the wider ones
    return Arg(name, read_only(np.asarray(codes).astype(np.int8, copy=False)), data, (np.uint64(one), np.uint64(valid)))


def _booleans_apart(data: Any) -> np.ndarray | None:
    """Object labels with their booleans (never a worker type or mode) as text, None when they mix no
    booleans with other values: pandas factorizes True with 1 and False with 0 (equal, and hashed
    alike), which would make them valid codes."""
    data = np.asarray(data, dtype=object)
    kinds = set(map(type, data))
    if not any(issubclass(kind, (bool, np.bool_)) for kind in kinds) or len(kinds) == 1:
        return None
    return np.array([repr(bool(v)) if isinstance(v, (bool, np.bool_)) else v for v in data], dtype=object)


def _label_values(name: str, labels: Any) -> list[int]:
    """The code of each label (:data:`UNPARSEABLE` for one that is not a worker type or mode)."""
    rule = INPUTS[name]
    assert rule.labels is not None, name  # (worker types and modes have their names)
    return [code_of(label, rule.labels, rule.code_limit, False) for label in labels]
