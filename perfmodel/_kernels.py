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


def loop_helper(function):
    """:func:`jit` for a helper that a kernel calls once per item with arrays, compiled without numba's
    reference counting: otherwise each call increments and decrements its arrays' counts atomically
    (numba issues 2345 and 2350), ~50-100 ns a call, as much as the helper's own work (the replay's four
    helpers: 0.25 -> 0.15 s per 1M requests, measured). Such a helper cannot allocate arrays or return
    one (numba refuses to compile it then); views of its arguments are safe while they do not outlive the call."""
    return jit(_nrt=False)(function)


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
    :data:`perfmodel.handoff.ARGUMENTS` for their meaning and units). The kernels take these
    fields in this order, as a plain tuple or as this record (numba types a plain tuple faster)."""

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
    window_bytes_per_token: Any = None  # model terms (see perfmodel.models.KVTerms): None for proportional bytes
    window_tokens: Any = None
    chunk_bytes_per_token: Any = None
    chunk_tokens: Any = None
    worker_type_masks: Any = None  # (ones, valid) when worker_type holds category codes (see decode_codes)
    mode_masks: Any = None  # the same for mode


@jit
def gather(codes, table, out):
    """``out[i] = table[codes[i]]`` (code -1 takes the table's last entry): labels' values spread to
    every row in one pass, without numpy's conversion of small integer codes to 64-bit indices first."""
    n = table.shape[0]
    for i in range(codes.shape[0]):
        code = codes[i]
        out[i] = table[code if code >= 0 else n + code]
    return out


@jit
def gather_bytes(codes, table, out):
    """``out[i] = table[codes[i]]`` for uint8 codes and a 256-entry table: no bounds or sign to test, so
    the loop has no branch (twice :func:`gather`'s speed for int8 category codes viewed as uint8)."""
    for i in range(codes.shape[0]):
        out[i] = table[codes[i]]
    return out


def decode_codes(codes, ones, valid):
    """The value of category codes: 1 where the code's bit is set in both ``ones`` and ``valid``, 0 where
    only in ``valid``, -1 (invalid) elsewhere (a missing label's -1, unknown labels, codes past 63).

    The model only asks of a worker type whether it is prefill, of a mode whether it is
    destination_missing, and of both whether the label is valid: so two 64-bit masks over a
    categorical's codes stand for its categories, and the kernel decodes row by row with shifts,
    which vectorize (a table lookup per row would not). This is the numpy form, for the error path."""
    code = np.asarray(codes).astype(np.int64)
    shift = (code & 63).astype(np.uint64)
    ok = (code >= 0) & (code < 64) & (((np.uint64(valid) >> shift) & np.uint64(1)) != 0)
    one = ((np.uint64(ones) >> shift) & np.uint64(1)) != 0
    return np.where(ok, one.astype(np.int8), np.int8(-1)).astype(np.int8)


def _decoded(code, masks):
    """Row value of a code argument: itself, or its category code decoded by ``masks`` (see decode_codes)."""
    return code if masks is None else decode_codes(code, *masks)[()]


@overload(_decoded, inline="always")
def _decoded_numba(code, masks):
    if isinstance(masks, (types.NoneType, types.Omitted)):
        return lambda code, masks: code

    def decode(code, masks):
        ones, valid = masks
        c = np.int64(code)
        shift = np.uint64(c & 63)
        ok = (c >= 0) & (c < 64) & (((valid >> shift) & np.uint64(1)) != 0)
        one = ((ones >> shift) & np.uint64(1)) != 0
        return np.int8(np.int64(ok) * (np.int64(one) + 1) - 1)  # 1, 0 or -1 without a branch

    return decode


@jit(inline="always")
def transfer_ms(nbytes, bandwidth_gb_s, latency_ms, blocks=0.0, per_block_ms=0.0):
    """Transfer time in ms, in upstream's operation order (bytes over line rate), plus, only when
    bytes move, the setup latency and the per-block cost. With both 0 this is upstream's delay, bit for bit."""
    delay = nbytes / (bandwidth_gb_s * 1e9) * 1000.0
    return delay + ((latency_ms + blocks * per_block_ms) if nbytes > 0 else 0.0)


# The extensions are optional fields of Inputs: None when off, so that numba compiles them out
# (the default path stays upstream's formula at the memory floor) and only their users pay.

def _block_cost(per_block_ms, block_size, charged, i):
    """(blocks moved * per-block cost in ms, invalid) of row ``i``; (0, False) when the extension is off.

    Plain Python (``NUMBA_DISABLE_JIT=1``); compiled, the overload below decides on None by type.
    """
    return (0.0, False) if per_block_ms is None else _block_cost_on(per_block_ms, block_size, charged, i)


def _exposed(full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens, i):
    """(the delay exposed after prefill, invalid) of row ``i`` under layer-wise streaming; (full, False) when off."""
    if num_layers is None:
        return full, False
    return _exposed_on(full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens,
                       i)


def _capped_bytes(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens):
    """Bytes of the sliding-window and chunked-attention layers of a row (the row's values, or None when
    the model has no such layers: then 0)."""
    if window_bytes_per_token is None:
        return 0.0
    return capped_bytes(np.float64(window_bytes_per_token), np.float64(window_tokens),
                        np.float64(chunk_bytes_per_token), np.float64(chunk_tokens), charged, tokens)


@overload(_capped_bytes, inline="always")
def _capped_bytes_numba(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens):
    if isinstance(window_bytes_per_token, (types.NoneType, types.Omitted)):
        return lambda window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens: 0.0
    return lambda window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens: \
        capped_bytes(np.float64(window_bytes_per_token), np.float64(window_tokens), np.float64(chunk_bytes_per_token),
                     np.float64(chunk_tokens), charged, tokens)


@jit(inline="always")
def capped_bytes(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens):
    """Bytes of sliding-window layers (at most ``window_tokens`` of the ``charged`` tail) and of
    chunked-attention layers (at most the prompt's current chunk: ``((tokens - 1) mod C) + 1``
    tokens, none for an empty prompt), in float64 (exact for whole numbers below 2**53)."""
    c = chunk_tokens
    current = (tokens - 1.0) - np.floor((tokens - 1.0) / c) * c + 1.0 if (c > 0) & (tokens > 0) else 0.0
    return window_bytes_per_token * min(charged, window_tokens) + chunk_bytes_per_token * min(charged, current)


@overload(_block_cost, inline="always")
def _block_cost_numba(per_block_ms, block_size, charged, i):
    if isinstance(per_block_ms, (types.NoneType, types.Omitted)):
        return lambda per_block_ms, block_size, charged, i: (0.0, False)
    return _block_cost_on


def _block_cost_on(per_block_ms, block_size, charged, i):
    """:func:`_block_cost` when the extension is on (one body for numba and plain Python)."""
    pb = np.float64(_at(per_block_ms, i))
    bs = np.float64(_at(block_size, i))
    invalid = (pb < 0) | (pb != pb) | (pb == np.inf) | ((pb > 0) & (not bs > 0)) | (bs < 0) | (bs == np.inf)
    blocks = np.ceil(charged / bs) if bs > 0 else 0.0
    return blocks * pb, invalid


@overload(_exposed, inline="always")
def _exposed_numba(full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens, i):
    if isinstance(num_layers, (types.NoneType, types.Omitted)):
        return lambda full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, \
            layerwise_min_tokens, i: (full, False)
    return _exposed_on


def _exposed_on(full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens, i):
    """:func:`_exposed` when the extension is on (one body for numba and plain Python)."""
    pre = np.float64(_at(prefill_ms, i))
    rate = np.float64(_at(prefill_tokens_per_s, i))
    layers = np.float64(_at(num_layers, i))
    group = np.float64(_at(layer_group, i))
    lw_min = np.float64(_at(layerwise_min_tokens, i))
    inf = np.inf
    invalid = (
        (pre < 0) | (pre == inf)
        | (rate <= 0) | (rate == inf)
        | (layers < 0) | (layers != layers) | (layers == inf) | (layers - np.floor(layers) > 0)
        | (group < 1) | (group != group) | (group - np.floor(group) > 0) | ((layers > 0) & (group > layers))
        | (lw_min < 0) | (lw_min != lw_min) | (lw_min == inf)
    )
    # of the full transfer X, only what could not hide behind the prefill's compute
    compute = pre if rate != rate else tokens / rate * 1000.0
    streamed = (layers > 0) & (tokens >= lw_min)
    hidden = max(full * group / layers, full - compute * (layers - group) / layers)
    return ((hidden if compute == compute else np.nan) if streamed else full), invalid  # unknown prefill: unknown


@jit(inline="always")
def _handoff_row(
    tokens, bandwidth_gb_s, bytes_per_token, worker, completed, mode, missing_tokens, state_bytes, latency_ms,
    fallback_ms, per_block_ms, block_size, prefill_ms, prefill_tokens_per_s, num_layers, layer_group,
    layerwise_min_tokens, window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens,
    worker_masks, mode_masks, i,
):
    """Delay (ms, NaN when none applies), invalid flag and bytes moved of row ``i`` (arguments: the
    fields of :class:`Inputs`, unpacked by the caller so that LLVM sees plain arrays and vectorizes the loop)."""
    t = np.float64(_at(tokens, i))
    b = np.float64(_at(bandwidth_gb_s, i))
    p = np.float64(_at(bytes_per_token, i))
    w_code = _at(worker, i)
    c = _at(completed, i)
    m_code = _at(mode, i)
    d = np.float64(_at(missing_tokens, i))
    s = np.float64(_at(state_bytes, i))
    lat = np.float64(_at(latency_ms, i))
    fb = np.float64(_at(fallback_ms, i))
    # read before the first branch: numba's parfor pass refuses copies of the loop index after one
    wb, wt = _at(window_bytes_per_token, i), _at(window_tokens, i)
    cb, ct = _at(chunk_bytes_per_token, i), _at(chunk_tokens, i)
    w, m = _decoded(w_code, worker_masks), _decoded(m_code, mode_masks)
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
    # Upstream's operation order: tokens as f64 * bytes_per_token as f64, / (bw * 1e9) * 1000. Windowed and
    # chunked layers add their capped bytes; a fixed state moves with the tokens (none when nothing is charged).
    capped = _capped_bytes(wb, wt, cb, ct, charged, t)
    nbytes = charged * p + capped + (s if charged > 0 else 0.0)
    block_cost, block_invalid = _block_cost(per_block_ms, block_size, charged, i)
    full = nbytes / (b * 1e9) * 1000.0 + ((lat + block_cost) if nbytes > 0 else 0.0)
    exposed, stream_invalid = _exposed(full, t, prefill_ms, prefill_tokens_per_s, num_layers, layer_group,
                                       layerwise_min_tokens, i)
    invalid = invalid | block_invalid | stream_invalid
    unknown = (p != p) | (s != s) | (b != b) | (b == 0)
    value = fb if unknown else exposed
    applies = (w == 1) & (c != 0) & (t == t) & (charged == charged) & (not invalid)
    return (value if applies else np.nan), invalid, nbytes


@jit
def handoff_serial(inputs, out, missing_out=None, bytes_out=None):
    """Fill ``out`` with handoff delays in ms (and, if given, ``missing_out`` with ``isnan(out)``
    and ``bytes_out`` with the bytes each row's transfer moves, in the same pass); return the
    number of invalid rows."""
    (t, b, p, w, c, m, d, s, lat, fb, pb, bs, pre, rate, layers, group, lw_min, wb, wt, cb, ct, wm, mm) = inputs
    n_invalid = 0
    for i in range(out.shape[0]):
        value, invalid, nbytes = _handoff_row(t, b, p, w, c, m, d, s, lat, fb, pb, bs, pre, rate, layers, group,
                                              lw_min, wb, wt, cb, ct, wm, mm, i)
        out[i] = value
        _put(missing_out, i, value != value)
        _put(bytes_out, i, nbytes)
        n_invalid += invalid
    return n_invalid


@jit(parallel=True)
def handoff_parallel(inputs, out, missing_out=None, bytes_out=None):
    """:func:`handoff_serial` over ``numba.prange`` (for large arrays)."""
    (t, b, p, w, c, m, d, s, lat, fb, pb, bs, pre, rate, layers, group, lw_min, wb, wt, cb, ct, wm, mm) = inputs
    n_invalid = 0
    for i in numba.prange(out.shape[0]):
        value, invalid, nbytes = _handoff_row(t, b, p, w, c, m, d, s, lat, fb, pb, bs, pre, rate, layers, group,
                                              lw_min, wb, wt, cb, ct, wm, mm, i)
        out[i] = value
        _put(missing_out, i, value != value)
        _put(bytes_out, i, nbytes)
        n_invalid += invalid
    return n_invalid
