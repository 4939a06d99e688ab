"""numpy-level API: coerce and validate inputs at the edge, one kernel pass, return an array.

Data flows one way: every argument is coerced once to a scalar or a read-only,
C-contiguous 1-D array of a small fixed set of dtypes (inputs already in that set are
never copied), one fused Numba pass computes delays and counts invalid rows, and only
when that count is non-zero (and ``errors="raise"``) does a slower diagnostic pass find
which argument, row and value were at fault.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Literal

import numba
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from . import _kernels
from ._codes import TransferMode, WorkerType
from .errors import InputError, check_flag, check_whole

__all__ = [
    "InputError",
    "PARALLEL_MIN_ROWS",
    "destination_missing_tokens",
    "handoff_delay_ms",
]

Errors = Literal["raise", "coerce"]

#: Rows from which the ``prange`` kernel is used by default. On 2 cores the parallel kernel
#: starts to win at ~30k rows (bench/run.py checks the ratio at this threshold).
PARALLEL_MIN_ROWS = 50_000

# Stand-in for an entry that could not be parsed at all (a string, an unknown label):
# invalid under every rule, so the kernel counts it and errors="coerce" yields NaN.
_UNPARSEABLE = -1

_WORKER_NAMES = {m.name.lower(): m.value for m in WorkerType}
_MODE_NAMES = {m.name.lower(): m.value for m in TransferMode}
_FLAG_NAMES = {"true": 1, "false": 0}


@dataclass(frozen=True)
class _Rule:
    """How one argument is coerced (``kind``) and what valid values look like (``rule``)."""

    kind: str  # count | real | code | flag
    rule: str
    names: dict[str, int] | None = None  # accepted labels of a code


_RULES: dict[str, _Rule] = {
    "num_input_tokens": _Rule("count", "token counts are whole numbers >= 0 (NaN marks a missing count)"),
    "kv_transfer_bandwidth": _Rule(
        "real", "bandwidth is in decimal GB/s and >= 0 (0 or NaN: no delay modeled; +inf: free transfer)"
    ),
    "kv_bytes_per_token": _Rule("count", "KV bytes per token are finite numbers >= 0 (NaN marks unknown)"),
    "worker_type": _Rule(
        "code", "worker types are aggregated/prefill/decode, their codes 0/1/2 or WorkerType members", _WORKER_NAMES
    ),
    "completed": _Rule("flag", "completed is True/False (or 1/0)", _FLAG_NAMES),
    "mode": _Rule(
        "code", "modes are full_prompt/destination_missing, their codes 0/1 or TransferMode members", _MODE_NAMES
    ),
    "destination_missing_tokens": _Rule(
        "count", "destination-missing token counts are whole numbers >= 0 (NaN marks a missing count)"
    ),
    "state_bytes": _Rule("real", "state bytes are finite numbers >= 0 (NaN marks unknown)"),
    "latency_ms": _Rule("real", "latency is a finite number of milliseconds >= 0"),
    "fallback_delay_ms": _Rule("real", "the fallback delay is a finite number of milliseconds >= 0, or None"),
}

#: The model's ten inputs, in the kernel's argument order (the pandas facade takes the same names).
ARGUMENTS = tuple(_RULES)

# The kernel's validity rules, restated in numpy for the diagnostic pass (error path only).
_INF = np.inf
_INVALID = {
    "num_input_tokens": lambda x: (x < 0) | (x == _INF) | (x - np.floor(x) > 0),
    "kv_transfer_bandwidth": lambda x: x < 0,
    "kv_bytes_per_token": lambda x: (x < 0) | (x == _INF),
    "worker_type": lambda x: (x < 0) | (x > 2),
    "completed": lambda x: (x != 0) & (x != 1),
    "mode": lambda x: (x < 0) | (x > 1),
    "destination_missing_tokens": lambda x: (x < 0) | (x == _INF) | (x - np.floor(x) > 0),
    "state_bytes": lambda x: (x < 0) | (x == _INF),
    "latency_ms": lambda x: ~((x >= 0) & (x < _INF)),
    "fallback_delay_ms": lambda x: (x < 0) | (x == _INF),
}


@dataclass
class _Arg:
    """One coerced argument: ``value`` for the kernel, ``original`` for error messages."""

    name: str
    value: Any  # numpy scalar, or read-only C-contiguous 1-D array
    original: Any  # 1-D array of what the caller gave (before conversion)

    @property
    def is_array(self) -> bool:
        return isinstance(self.value, np.ndarray)


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view (one kernel type for writeable and read-only inputs)."""
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _as_1d(name: str, value: Any) -> tuple[Any, bool]:
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
    if array.ndim == 0:
        return array.reshape(1), True
    if array.ndim > 1:
        raise InputError(
            name, f"must be a scalar or 1-D, got an array of shape {array.shape}",
            "pass one column, or flatten it with .ravel()",
        )
    return array, False


def _unmask(name: str, value: np.ma.MaskedArray) -> np.ndarray:
    """A masked array with its masked entries as missing (NaN for numbers, None otherwise)."""
    if not np.ma.getmask(value).any():
        return np.ma.getdata(value)
    if value.dtype.kind in "iuf":
        return value.astype(np.float64).filled(np.nan)
    if value.dtype.kind in "b":
        raise InputError(name, "got a masked boolean array", "pass a pandas 'boolean' array, or fill the mask")
    return value.astype(object).filled(None)


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


def _to_numeric(name: str, data: Any) -> np.ndarray:
    """Numbers as int64 or float64; entries that are not numbers as ``_UNPARSEABLE``."""
    if not isinstance(data, np.ndarray):
        if getattr(data.dtype, "kind", "") == "b":  # nullable booleans too: never read as 0/1
            raise InputError(name, "got booleans where numbers were expected", "pass numbers, e.g. .astype('int64')")
        data = _pandas_to_numpy(data)
    dtype = data.dtype
    if dtype == np.int64 or dtype == np.float64:
        return data
    if dtype.kind == "b":
        raise InputError(name, "got booleans where numbers were expected", "pass numbers, e.g. .astype('int64')")
    if dtype.kind in "mMc":  # would otherwise parse as nanoseconds or lose an imaginary part: never a silent number
        raise InputError(name, f"got {dtype} values where plain numbers were expected",
                         "pass plain numbers in the argument's unit (tokens, bytes, GB/s or ms)")
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


def _parse_objects(name: str, data: NDArray[np.object_]) -> np.ndarray:
    """Objects (numbers, numeric text, missing markers) as int64 if all are whole, else float64.

    Booleans, dates and durations are errors (never silently numbers); anything else that
    is not a number becomes ``_UNPARSEABLE``, so the kernel counts it as invalid.
    """
    try:
        kinds = {type(v) for v in pd.unique(data) if v is not None}
    except TypeError:  # unhashable entries (lists): every type, the slow way
        kinds = {type(v) for v in data if v is not None}
    for kind in kinds:
        if issubclass(kind, (bool, np.bool_)):
            raise InputError(name, "got booleans where numbers were expected", "pass numbers, e.g. 1 and 0")
        if issubclass(kind, (np.timedelta64, np.datetime64)) or kind.__module__.startswith(("datetime", "pandas")) \
                and kind.__name__ in ("timedelta", "datetime", "date", "Timedelta", "Timestamp"):
            raise InputError(name, f"got {kind.__name__} values where plain numbers were expected",
                             "pass plain numbers in the argument's unit (tokens, bytes, GB/s or ms)")
    if kinds and all(issubclass(k, (int, np.integer)) for k in kinds):
        try:
            return data.astype(np.int64)
        except (OverflowError, TypeError):
            pass  # beyond int64, or missing values among them: float64 below
    text = pd.Series(data, dtype=object)
    if any(issubclass(k, str) for k in kinds):
        is_text = text.map(type) == str
        missing_text = text[is_text].str.strip().str.lower().isin(MISSING_TEXT)
        text[missing_text[missing_text].index] = None
    parsed = pd.to_numeric(text, errors="coerce")
    parsed = parsed.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
    parsed[np.isnan(parsed) & ~pd.isna(text).to_numpy()] = _UNPARSEABLE
    return parsed


def map_distinct(data: Any, label_to_value: Callable[[Any], Any], dtype: Any, missing: Any) -> np.ndarray:
    """Map each distinct label of ``data`` once (hash-based), then spread the results to every row.

    Works on numpy arrays and pandas objects (Categorical codes are reused as they are);
    missing labels (None, NaN, NA) map to ``missing``.
    """
    if isinstance(data.dtype, pd.CategoricalDtype):
        categorical = data.array if isinstance(data, (pd.Series, pd.Index)) else data
        codes, uniques = np.asarray(categorical.codes), categorical.categories
    else:
        codes, uniques = pd.factorize(data, use_na_sentinel=True)
    lookup = np.array([label_to_value(label) for label in uniques] + [missing], dtype=dtype)
    if (lookup.dtype == codes.dtype and lookup[-1] == -1
            and np.array_equal(lookup[:-1], np.arange(len(uniques)))):
        return codes  # categories already in code order: the codes are the answer, no copy
    return lookup[codes]  # code -1 (missing) takes the last entry


def _to_codes(data: Any, names: dict[str, int], limit: int, accept_bool: bool) -> np.ndarray:
    """Labels, enum members or integer codes as int8 codes (bool kept for flags).

    Anything that is not a valid code becomes ``_UNPARSEABLE``.
    """
    dtype = data.dtype
    if dtype.kind == "b" and not accept_bool:  # booleans (nullable ones too) are never worker types or modes
        return np.full(len(data), _UNPARSEABLE, dtype=np.int8)
    if not isinstance(data, np.ndarray) and dtype.kind in "iufb" and not isinstance(dtype, pd.CategoricalDtype):
        data = _pandas_to_numpy(data)
        dtype = data.dtype
    if dtype.kind == "b" and isinstance(dtype, np.dtype):
        return data if accept_bool else np.full(len(data), _UNPARSEABLE, dtype=np.int8)
    if dtype == np.int8:
        return data
    if dtype.kind in "iuf" and isinstance(dtype, np.dtype):
        valid = (data >= 0) & (data <= limit)
        if dtype.kind == "f":
            valid &= data == np.floor(data)
        return np.where(valid, data, _UNPARSEABLE).astype(np.int8)
    return map_distinct(data, lambda label: _code_of(label, names, limit, accept_bool), np.int8, _UNPARSEABLE)


def _code_of(label: Any, names: dict[str, int], limit: int, accept_bool: bool) -> int:
    """The code of one label: a name (any case), an enum member or an integer code."""
    if isinstance(label, str):
        label = label.strip().lower()
        if label.isdigit():  # "1" from a text file, or numpy's cast of a mixed list
            return int(label) if int(label) <= limit else _UNPARSEABLE
        return names.get(label, _UNPARSEABLE)
    if isinstance(label, (bool, np.bool_)):
        return int(label) if accept_bool else _UNPARSEABLE
    if isinstance(label, (int, np.integer, float, np.floating)) and 0 <= label <= limit and label == int(label):
        return int(label)
    return _UNPARSEABLE


def _scalar(name: str, value: Any) -> Any:
    """A plain Python or numpy scalar as the kernel's scalar type, or None to take the general path."""
    rule = _RULES[name]
    if isinstance(value, (np.timedelta64, np.datetime64)):
        return None  # the general path refuses them with a clear message
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value) if rule.kind == "flag" else None
    if isinstance(value, (int, np.integer)):
        if rule.kind == "count":
            return np.int64(value) if -(2**63) <= value < 2**63 else np.float64(value)
        if rule.kind == "real":
            return np.float64(value)
        return np.int8(value) if 0 <= value <= (2 if name == "worker_type" else 1) else np.int8(_UNPARSEABLE)
    if isinstance(value, (float, np.floating)) and rule.kind in ("count", "real"):
        return np.float64(value)
    if isinstance(value, str) and rule.kind == "code":
        return np.int8(_code_of(value, rule.names, 2 if name == "worker_type" else 1, False))
    return None


def _coerce(name: str, value: Any) -> _Arg:
    scalar_value = _scalar(name, value)
    if scalar_value is not None:  # the common case for most arguments: no array round trip
        return _Arg(name, scalar_value, [value])
    rule = _RULES[name]
    data, scalar = _as_1d(name, value)
    if rule.kind == "count":
        converted = _to_numeric(name, data)
    elif rule.kind == "real":
        converted = _to_numeric(name, data).astype(np.float64, copy=False)
    else:
        converted = _to_codes(data, rule.names, 2 if name == "worker_type" else 1, rule.kind == "flag")
    if scalar:
        return _Arg(name, converted[0], data)
    return _Arg(name, _read_only(converted), data)


def _common_length(args: list[_Arg]) -> int:
    lengths = {a.name: len(a.value) for a in args if a.is_array}
    if not lengths:
        return 1
    n = next(iter(lengths.values()))
    if any(length != n for length in lengths.values()):
        listing = ", ".join(f"{k} has {v}" for k, v in lengths.items())
        raise InputError(
            "inputs", f"arrays of different lengths ({listing} rows)",
            "pass arrays of one common length, or a scalar to apply one value to every row",
        )
    return n


def _diagnose(args: list[_Arg], n: int) -> InputError:
    """The first argument with invalid rows, with the count of every argument's invalid rows
    (error path only; plain numpy)."""
    counts: dict[str, int] = {}
    first: tuple[_Arg, np.ndarray] | None = None
    for arg in args:
        with np.errstate(invalid="ignore"):
            invalid = np.broadcast_to(_INVALID[arg.name](np.asarray(arg.value)), (n,))
        n_invalid = int(np.count_nonzero(invalid))
        if n_invalid:
            counts[arg.name] = n_invalid
            first = first or (arg, invalid)
    if first is None:
        raise AssertionError("the kernel counted invalid rows that the diagnostic pass does not find")
    arg, invalid = first
    if not arg.is_array:  # one value, applied to every row
        value = _plain(arg.original[0])
        return InputError(arg.name, f"{value!r} is {_why(arg.name, value)}", _RULES[arg.name].rule, value=value)
    position = int(np.argmax(invalid))
    original = arg.original.iloc[position] if hasattr(arg.original, "iloc") else arg.original[position]
    return InputError(
        arg.name, _why(arg.name, original), _RULES[arg.name].rule,
        n_invalid=counts[arg.name], row=position, value=_plain(original), position=position, counts=counts,
    )


def _plain(value: Any) -> Any:
    """numpy scalars as Python scalars, for readable messages."""
    return value.item() if isinstance(value, np.generic) else value


def _why(name: str, value: Any) -> str:
    """What is wrong with one invalid value, in words."""
    kind = _RULES[name].kind
    if kind in ("code", "flag"):
        valid = ", ".join(repr(k) for k in _RULES[name].names)
        return f"not a valid {name.replace('_', ' ')}; valid: {valid}"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "not a number"
    if number != number:
        return "missing"
    if number < 0:
        return "negative"
    if number in (np.inf, -np.inf):
        return "infinite"
    return "not a whole number"


def _check_out(out: Any, n: int, args: list[_Arg]) -> np.ndarray:
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.ndim != 1:
        raise InputError("out", f"must be a 1-D float64 numpy array, got {type(out).__name__} "
                         f"{getattr(out, 'dtype', '')} {getattr(out, 'shape', '')}".rstrip(),
                         f"pass np.empty({n}) or leave out=None")
    if out.shape[0] != n or not out.flags.c_contiguous or not out.flags.writeable:
        raise InputError("out", f"must be writeable, C-contiguous and of length {n}, got length {out.shape[0]}",
                         f"pass np.empty({n}) or leave out=None")
    for arg in args:
        if arg.is_array and np.may_share_memory(out, arg.value):
            raise InputError("out", f"shares memory with {arg.name}", "pass a separate output array")
    return out


_parallel_lock = threading.Lock()


def _run_kernel(values: list[Any], out: np.ndarray, missing_out: np.ndarray | None, parallel: bool | None,
                num_threads: int | None) -> int:
    """One kernel pass; the ``prange`` kernel for large inputs, one caller thread at a time.

    numba's default ``workqueue`` threading layer is not safe when several Python
    threads enter parallel code at once (dask's threaded scheduler does): a thread that
    finds the parallel kernel busy runs the serial one instead.
    """
    n = out.shape[0]
    if parallel is None:
        parallel = n >= PARALLEL_MIN_ROWS and (num_threads or numba.get_num_threads()) > 1
    if parallel and _parallel_lock.acquire(blocking=False):
        try:
            if num_threads is None:
                return int(_kernels.handoff_parallel(*values, out, missing_out))
            previous = numba.get_num_threads()
            numba.set_num_threads(num_threads)
            try:
                return int(_kernels.handoff_parallel(*values, out, missing_out))
            finally:
                numba.set_num_threads(previous)
        finally:
            _parallel_lock.release()
    return int(_kernels.handoff_serial(*values, out, missing_out))


def handoff_delay_ms(
    num_input_tokens: ArrayLike,
    kv_transfer_bandwidth: ArrayLike,
    kv_bytes_per_token: ArrayLike,
    worker_type: ArrayLike = WorkerType.PREFILL,
    completed: ArrayLike = True,
    *,
    mode: ArrayLike = TransferMode.FULL_PROMPT,
    destination_missing_tokens: ArrayLike | None = None,
    state_bytes: ArrayLike = 0,
    latency_ms: ArrayLike = 0.0,
    fallback_delay_ms: ArrayLike | None = None,
    errors: Errors = "raise",
    out: NDArray[np.float64] | None = None,
    parallel: bool | None = None,
    num_threads: int | None = None,
) -> NDArray[np.float64]:
    """KV-cache handoff delay in milliseconds, one value per row (NaN where none applies).

    Reproduces the prefill-to-decode handoff timing of NVIDIA aisimulate-core 0.12.0
    with the default arguments: a completed prefill worker's handoff costs
    ``tokens * kv_bytes_per_token / (kv_transfer_bandwidth * 1e9) * 1000`` ms.

    Every input is a scalar (applied to every row) or a 1-D array-like (list, numpy
    array, pandas Series) of one common length; the result is always a 1-D float64
    array (length 1 when every input is a scalar).

    Parameters
    ----------
    num_input_tokens
        Prompt tokens, whole numbers >= 0; NaN marks a missing count.
    kv_transfer_bandwidth
        Link bandwidth in decimal GB/s (1 GB = 1e9 bytes). NaN (unknown) or 0 (disabled):
        no delay is modeled (NaN, or ``fallback_delay_ms``); +inf: 0 ms.
    kv_bytes_per_token
        KV-cache bytes per token (>= 0); NaN marks unknown, like a missing bandwidth.
    worker_type
        :class:`WorkerType`, its code (0/1/2) or name (``"prefill"``). Only prefill pays.
    completed
        Whether the prefill emitted its terminal token. Only completed prefills pay.
    mode
        :class:`TransferMode`, code or name: charge the full prompt, or only
        ``destination_missing_tokens`` (see :func:`destination_missing_tokens`).
    destination_missing_tokens
        Tokens the decode worker lacks; required where ``mode`` is destination_missing.
    state_bytes
        Extra bytes per transfer (recurrent state of hybrid models); default 0.
    latency_ms
        Fixed setup latency (ms) added to each transfer that moves more than 0 bytes.
    fallback_delay_ms
        Delay (ms) used instead of NaN where bandwidth or bytes per token are unknown
        or the bandwidth is 0 (upstream's coordinated-handoff fallback). Default: none.
    errors
        ``"raise"`` (default): invalid values raise :class:`InputError` (a ValueError)
        naming the argument, the number of invalid rows, the first one and its value.
        ``"coerce"``: invalid rows give NaN.
    out
        Optional preallocated float64 array of the result's length to write into.
    parallel
        Force the parallel (True) or serial (False) kernel; default: parallel from
        :data:`PARALLEL_MIN_ROWS` rows on.
    num_threads
        Threads for the parallel kernel (default: numba's setting).

    Returns
    -------
    numpy.ndarray
        float64 delays in ms, NaN where no handoff applies or its cost is unknown.

    Examples
    --------
    >>> import perfmodel
    >>> perfmodel.handoff_delay_ms(128, 1.0, 1_000_000)
    array([128.])
    >>> perfmodel.handoff_delay_ms([4096, 32768], 50.0, 327_680, ["prefill", "decode"])
    array([26.8435456,        nan])
    >>> perfmodel.handoff_delay_ms(100, 1.0, 1000, mode="destination_missing",
    ...                            destination_missing_tokens=20)
    array([0.02])
    """
    given = locals()
    inputs = {name: given[name] for name in ARGUMENTS}
    return _handoff(inputs, errors=errors, out=out, parallel=parallel, num_threads=num_threads)[0]


def _handoff(
    inputs: dict[str, Any],
    *,
    errors: Errors = "raise",
    out: NDArray[np.float64] | None = None,
    parallel: bool | None = None,
    num_threads: int | None = None,
    with_missing: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.bool_] | None]:
    """:func:`handoff_delay_ms` of ``inputs`` (its ten inputs by name), and optionally
    the result's NaN mask, written by the kernel in the same pass."""
    check_errors(errors)
    check_flag("parallel", parallel, optional=True)
    if num_threads is not None:
        check_whole("num_threads", num_threads, smallest=1)
        if num_threads > numba.config.NUMBA_NUM_THREADS:
            raise InputError("num_threads", f"{num_threads} is more than the {numba.config.NUMBA_NUM_THREADS} threads "
                             "numba started with", f"pass num_threads <= {numba.config.NUMBA_NUM_THREADS}, or set "
                             "NUMBA_NUM_THREADS before starting Python")
    missing_tokens_given = inputs["destination_missing_tokens"] is not None
    defaults = {"destination_missing_tokens": np.nan, "fallback_delay_ms": np.nan}
    values = {name: defaults[name] if inputs[name] is None and name in defaults else inputs[name] for name in _RULES}
    args = [_coerce(name, value) for name, value in values.items()]  # in the kernel's argument order
    n = _common_length(args)
    mode = args[list(_RULES).index("mode")].value
    if not missing_tokens_given and np.any(np.asarray(mode) == TransferMode.DESTINATION_MISSING):
        raise InputError(
            "destination_missing_tokens", "is required where mode is destination_missing",
            "pass destination_missing_tokens (see perfmodel.destination_missing_tokens) or use mode='full_prompt'",
        )
    out = np.empty(n, dtype=np.float64) if out is None else _check_out(out, n, args)
    missing = np.empty(n, dtype=np.bool_) if with_missing else None
    n_invalid = _run_kernel([a.value for a in args], out, missing, parallel, num_threads)
    if n_invalid and errors == "raise":
        raise _diagnose(args, n)
    return out, missing


def check_errors(errors: Any, choices: tuple[str, ...] = ("raise", "coerce")) -> str:
    """``errors`` if it is one of ``choices``, else :class:`InputError`."""
    if not isinstance(errors, str) or errors not in choices:
        raise InputError("errors", f"must be {' or '.join(map(repr, choices))}, got {errors!r}",
                         f"pass errors={choices[0]!r} or errors={choices[1]!r}")
    return errors


def whole_numbers(name: str, value: ArrayLike, smallest: int = 0) -> NDArray[np.int64]:
    """``value`` (scalar or 1-D) as int64, or :class:`InputError` naming the first entry that is not
    a whole number >= ``smallest`` (missing values included).

    >>> from perfmodel.handoff import whole_numbers
    >>> whole_numbers("block_size", [16, 64.0], smallest=1)
    array([16, 64])
    """
    data, _ = _as_1d(name, value)
    numbers = _to_numeric(name, data)
    if numbers.dtype == np.int64:
        invalid = numbers < smallest
    else:  # floats: whole, finite and within int64's range (a cast would wrap around silently)
        invalid = ~((numbers >= smallest) & (numbers < 2.0**63) & (numbers == np.floor(numbers)))
    if invalid.any():
        position = int(np.argmax(invalid))
        original, number = _plain(np.asarray(data, dtype=object)[position]), numbers[position]
        problem = "missing" if number != number else f"below {smallest}" if 0 <= number < smallest \
            else "too large for a 64-bit integer" if 2.0**63 <= number < np.inf else _why("num_input_tokens", original)
        raise InputError(
            name, problem, f"{name} must be whole numbers >= {smallest} (fill or drop missing counts first)",
            n_invalid=int(invalid.sum()), row=position, value=original,
        )
    return numbers.astype(np.int64, copy=False)


def destination_missing_tokens(
    num_input_tokens: ArrayLike, cached_tokens: ArrayLike, block_size: int | ArrayLike
) -> NDArray[np.int64]:
    """Tokens charged in destination_missing mode: fresh blocks times the block size.

    The decode worker allocates ``ceil(num_input_tokens / block_size)`` blocks, of which
    ``floor(cached_tokens / block_size)`` (at most all of them) are already cached; the
    rest are transferred whole. So a partial last block counts as a full block (the
    result can exceed the prompt) and a full hit charges 0 tokens. Inputs broadcast.

    Parameters
    ----------
    num_input_tokens
        Prompt tokens (whole numbers >= 0).
    cached_tokens
        Tokens of the prompt's prefix already in the destination's cache (>= 0).
    block_size
        KV-cache block size in tokens (> 0).

    Returns
    -------
    numpy.ndarray
        int64 token counts, broadcast to the inputs' common shape (1-D).

    Examples
    --------
    >>> import perfmodel
    >>> perfmodel.destination_missing_tokens([100, 100, 128, 0], [0, 64, 128, 0], 64)
    array([128,  64,   0,   0])
    """
    counts = [whole_numbers(name, value, smallest) for name, value, smallest in (
        ("num_input_tokens", num_input_tokens, 0), ("cached_tokens", cached_tokens, 0), ("block_size", block_size, 1))]
    try:
        tokens, cached, block = np.broadcast_arrays(*counts)
    except ValueError:
        raise InputError("inputs", f"lengths {[len(c) for c in counts]} do not broadcast",
                         "pass arrays of one common length, or scalars") from None
    blocks = -(-tokens // block)
    fresh = blocks - np.minimum(cached // block, blocks)
    too_large = fresh > np.iinfo(np.int64).max // block  # fresh * block would wrap around
    if too_large.any():
        position = int(np.argmax(too_large.reshape(-1)))
        raise InputError("destination_missing_tokens", "the block-rounded token count exceeds the 64-bit integer "
                         f"range (first at position {position}: {int(tokens.reshape(-1)[position])} tokens, "
                         f"block size {int(block.reshape(-1)[position])})", "pass realistic token counts")
    return (fresh * block).astype(np.int64, copy=False)
