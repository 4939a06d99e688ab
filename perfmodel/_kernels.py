"""Numba kernels: plain loops over preallocated outputs, no pandas, no validation messages.

Each argument of :func:`handoff_serial` / :func:`handoff_parallel` is either a scalar
(broadcast to every row) or a read-only, C-contiguous 1-D array of one fixed dtype; the
caller (:mod:`perfmodel.handoff`) guarantees that, so the set of compiled
specializations stays small. The body is branchless so LLVM vectorizes it, and the
validation of every row is fused into the same pass as a count of invalid rows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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


class Inputs(NamedTuple):
    """The model's inputs, each a scalar (broadcast) or a read-only 1-D array (see
    :data:`perfmodel.handoff.ARGUMENTS` for their meaning and units)."""

    num_input_tokens: Any
    kv_transfer_bandwidth: Any
    kv_bytes_per_token: Any
    worker_type: Any
    completed: Any
    mode: Any
    destination_missing_tokens: Any
    state_bytes: Any
    latency_ms: Any
    fallback_delay_ms: Any
    per_block_ms: Any
    block_size: Any
    prefill_ms: Any
    prefill_tokens_per_s: Any
    num_layers: Any
    layer_group: Any
    layerwise_min_tokens: Any


@jit(inline="always")
def transfer_ms(nbytes, bandwidth_gb_s, latency_ms, blocks=0.0, per_block_ms=0.0):
    """Transfer time in ms, in upstream's operation order (bytes over line rate), plus, only when
    bytes move, the setup latency and the per-block cost. With both 0 this is upstream's delay, bit for bit."""
    delay = nbytes / (bandwidth_gb_s * 1e9) * 1000.0
    return delay + ((latency_ms + blocks * per_block_ms) if nbytes > 0 else 0.0)


@jit(inline="always")
def _handoff_row(inputs, i):
    """Delay (ms, NaN when none applies) and invalid flag of row ``i``."""
    t = np.float64(_at(inputs.num_input_tokens, i))
    b = np.float64(_at(inputs.kv_transfer_bandwidth, i))
    p = np.float64(_at(inputs.kv_bytes_per_token, i))
    w = _at(inputs.worker_type, i)
    c = _at(inputs.completed, i)
    m = _at(inputs.mode, i)
    d = np.float64(_at(inputs.destination_missing_tokens, i))
    s = np.float64(_at(inputs.state_bytes, i))
    lat = np.float64(_at(inputs.latency_ms, i))
    fb = np.float64(_at(inputs.fallback_delay_ms, i))
    pb = np.float64(_at(inputs.per_block_ms, i))
    bs = np.float64(_at(inputs.block_size, i))
    pre = np.float64(_at(inputs.prefill_ms, i))
    rate = np.float64(_at(inputs.prefill_tokens_per_s, i))
    layers = np.float64(_at(inputs.num_layers, i))
    group = np.float64(_at(inputs.layer_group, i))
    lw_min = np.float64(_at(inputs.layerwise_min_tokens, i))
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
        | (pb < 0) | (pb != pb) | (pb == inf) | ((pb > 0) & ~(bs > 0))
        | (bs < 0) | (bs == inf)
        | (pre < 0) | (pre == inf)
        | (rate <= 0) | (rate == inf)
        | (layers < 0) | (layers != layers) | (layers == inf) | (layers - np.floor(layers) > 0)
        | (group < 1) | (group != group) | (group - np.floor(group) > 0) | ((layers > 0) & (group > layers))
        | (lw_min < 0) | (lw_min != lw_min) | (lw_min == inf)
    )
    charged = d if m == 1 else t
    # Upstream's operation order: tokens as f64 * bytes_per_token as f64, / (bw * 1e9) * 1000.
    nbytes = charged * p + s
    blocks = np.ceil(charged / bs) if bs > 0 else 0.0
    full = transfer_ms(nbytes, b, lat, blocks, pb)
    # layer-wise streaming: of the full transfer X, only what could not hide behind the prefill's compute
    compute = pre if rate != rate else t / rate * 1000.0
    streamed = (layers > 0) & (t >= lw_min)
    hidden = max(full * group / layers, full - compute * (layers - group) / layers)
    exposed = (hidden if compute == compute else np.nan) if streamed else full  # unknown prefill: unknown delay
    unknown = (p != p) | (s != s) | (b != b) | (b == 0)
    value = fb if unknown else exposed
    applies = (w == 1) & (c != 0) & (t == t) & (charged == charged) & (not invalid)
    return (value if applies else np.nan), invalid


@jit
def handoff_serial(inputs, out, missing_out=None):
    """Fill ``out`` with handoff delays in ms (and ``missing_out``, if given, with
    ``isnan(out)`` in the same pass); return the number of invalid rows."""
    n_invalid = 0
    for i in range(out.shape[0]):
        value, invalid = _handoff_row(inputs, i)
        out[i] = value
        _put(missing_out, i, value != value)
        n_invalid += invalid
    return n_invalid


@jit(parallel=True)
def handoff_parallel(inputs, out, missing_out=None):
    """:func:`handoff_serial` over ``numba.prange`` (for large arrays)."""
    n_invalid = 0
    for i in numba.prange(out.shape[0]):
        value, invalid = _handoff_row(inputs, i)
        out[i] = value
        _put(missing_out, i, value != value)
        n_invalid += invalid
    return n_invalid
