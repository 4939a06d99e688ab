"""Numba kernels: plain loops over preallocated outputs, no pandas, no validation messages.

Each argument of :func:`handoff_serial` / :func:`handoff_parallel` is either a scalar
(broadcast to every row) or a read-only, C-contiguous 1-D array of one fixed dtype; the
caller (:mod:`perfmodel.handoff`) guarantees that, so the set of compiled
specializations stays small. The body is branchless so LLVM vectorizes it, and the
validation of every row is fused into the same pass as a count of invalid rows.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from . import _cache

_cache.install()  # compiled kernels go to the user cache folder, never into the installed package

# error_model="numpy": division by zero gives inf/nan instead of raising.
# No fastmath at all: NaN is how "missing" flows here, and reassociation ("arcp",
# "contract") would change the last bit against upstream's operation order. The kernel is
# bound by memory traffic, so strict IEEE arithmetic costs nothing measurable (bench/).
_JIT_OPTIONS = dict(nogil=True, cache=True, error_model="numpy")


def jit(*args, parallel: bool = False, **kwargs):
    """``numba.njit`` with the project's options (one place to change them)."""
    return numba.njit(*args, parallel=parallel, **{**_JIT_OPTIONS, **kwargs})


def _at(values, i):
    """``values[i]`` for an array, ``values`` itself for a scalar (broadcast)."""
    return values[i] if isinstance(values, np.ndarray) else values


@overload(_at, inline="always")
def _at_numba(values, i):
    if isinstance(values, types.Array):
        return lambda values, i: values[i]
    return lambda values, i: values


def _put(target, i, value):
    """``target[i] = value``, or nothing when ``target`` is None (an optional output)."""
    if target is not None:
        target[i] = value


@overload(_put, inline="always")
def _put_numba(target, i, value):
    if isinstance(target, (types.NoneType, types.Omitted)):
        return lambda target, i, value: None

    def store(target, i, value):
        target[i] = value

    return store


@jit(inline="always")
def transfer_ms(nbytes, bandwidth_gb_s, latency_ms):
    """Line-rate transfer time in ms, in upstream's operation order; latency only if bytes move."""
    delay = nbytes / (bandwidth_gb_s * 1e9) * 1000.0
    return delay + (latency_ms if nbytes > 0 else 0.0)


@jit(inline="always")
def _handoff_row(
    tokens, bandwidth_gb_s, bytes_per_token, worker, completed,
    mode, missing_tokens, state_bytes, latency_ms, fallback_ms, i,
):
    """Delay (ms, NaN when none applies) and invalid flag of row ``i``."""
    t = np.float64(_at(tokens, i))
    b = np.float64(_at(bandwidth_gb_s, i))
    p = np.float64(_at(bytes_per_token, i))
    w = _at(worker, i)
    c = _at(completed, i)
    m = _at(mode, i)
    d = np.float64(_at(missing_tokens, i))
    s = np.float64(_at(state_bytes, i))
    lat = np.float64(_at(latency_ms, i))
    fb = np.float64(_at(fallback_ms, i))
    inf = np.inf
    # x - floor(x) > 0 is True only for a finite fractional x (NaN and inf give False).
    invalid = (
        (t < 0) | (t == inf) | (t - np.floor(t) > 0)
        | (b < 0)
        | (p < 0) | (p == inf)
        | (w < 0) | (w > 2)
        | ((c != 0) & (c != 1))
        | (m < 0) | (m > 1)
        | (d < 0) | (d == inf) | (d - np.floor(d) > 0)
        | (s < 0) | (s == inf)
        | (lat < 0) | (lat != lat) | (lat == inf)
        | (fb < 0) | (fb == inf)
    )
    charged = d if m == 1 else t
    # Upstream's operation order: tokens as f64 * bytes_per_token as f64, / (bw * 1e9) * 1000.
    nbytes = charged * p + s
    delay = transfer_ms(nbytes, b, lat)
    unknown = (p != p) | (s != s) | (b != b) | (b == 0)
    value = fb if unknown else delay
    applies = (w == 1) & (c != 0) & (t == t) & (charged == charged) & (not invalid)
    return (value if applies else np.nan), invalid


@jit
def handoff_serial(
    tokens, bandwidth_gb_s, bytes_per_token, worker, completed,
    mode, missing_tokens, state_bytes, latency_ms, fallback_ms, out, missing_out=None,
):
    """Fill ``out`` with handoff delays in ms (and ``missing_out``, if given, with
    ``isnan(out)`` in the same pass); return the number of invalid rows."""
    n_invalid = 0
    for i in range(out.shape[0]):
        value, invalid = _handoff_row(
            tokens, bandwidth_gb_s, bytes_per_token, worker, completed,
            mode, missing_tokens, state_bytes, latency_ms, fallback_ms, i,
        )
        out[i] = value
        _put(missing_out, i, value != value)
        n_invalid += invalid
    return n_invalid


@jit(parallel=True)
def handoff_parallel(
    tokens, bandwidth_gb_s, bytes_per_token, worker, completed,
    mode, missing_tokens, state_bytes, latency_ms, fallback_ms, out, missing_out=None,
):
    """:func:`handoff_serial` over ``numba.prange`` (for large arrays)."""
    n_invalid = 0
    for i in numba.prange(out.shape[0]):
        value, invalid = _handoff_row(
            tokens, bandwidth_gb_s, bytes_per_token, worker, completed,
            mode, missing_tokens, state_bytes, latency_ms, fallback_ms, i,
        )
        out[i] = value
        _put(missing_out, i, value != value)
        n_invalid += invalid
    return n_invalid
