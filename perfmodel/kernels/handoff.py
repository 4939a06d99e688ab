"""Numba kernels: plain loops over preallocated outputs, no pandas, no validation messages.

Each argument of :func:`handoff_serial` is either a scalar
(broadcast to every row) or a read-only, C-contiguous 1-D array of one fixed dtype; the
caller (:mod:`perfmodel.handoff`) guarantees that, so the set of compiled
specializations stays small. The body is branchless so LLVM vectorizes it, and the
validation of every row is fused into the same pass as a count of invalid rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .. import _compat
from ..inputs.table import INPUTS, ROW_NAMES, group_beyond_layers, outside, per_block_without_block

_compat.install_cache_locator()  # compiled kernels go to the user cache folder, never into the installed package

# error_model="numpy": division by zero gives inf/nan instead of raising.
# No fastmath at all: NaN is how "missing" flows here, and reassociation ("arcp",
# "contract") would change the last bit against upstream's operation order. The kernel is
# bound by memory traffic, so strict IEEE arithmetic costs nothing measurable (bench/).
# Cached on disk unless the cache folder is unusable (then numba would cache inside the package: _compat).
_JIT_OPTIONS = dict(nogil=True, cache=_compat.cache_kernels(), error_model="numpy")


def jit(*args, parallel: bool = False, **kwargs):
    """``numba.njit`` with the project's options (one place to change them)."""
    return numba.njit(*args, parallel=parallel, **{**_JIT_OPTIONS, **kwargs})


def loop_helper(function=None, *, python: bool = True):
    """:func:`jit` for a helper that a kernel calls once per item with arrays, compiled without numba's
    reference counting: otherwise each call increments and decrements its arrays' counts atomically
    (numba issues 2345 and 2350), ~50-100 ns a call, as much as the helper's own work (the replay's four
    helpers: 0.25 -> 0.15 s per 1M requests, measured). Such a helper cannot allocate arrays or return
    one (numba refuses to compile it then); views of its arguments are safe while they do not outlive the call.

    ``@loop_helper(python=False)``: a helper only compiled code calls, compiled without the wrappers that let
    Python call it (:func:`perfmodel._compat.no_wrappers`; a call from Python raises): for a helper taking
    records of arrays, a part of its first compile (the replay's helpers: ~5-10% of its cold compile)."""
    if function is None:
        return lambda function: loop_helper(function, python=python)
    wrappers = {} if python else _compat.no_wrappers()
    compiled = jit(**_compat.no_reference_counting(), **wrappers)(function)
    return _compat.compiled_only(compiled) if wrappers else compiled


def _at(values, i):
    """``values[i]`` for an array, ``values`` itself for a scalar (broadcast)."""
    return values[i] if isinstance(values, np.ndarray) else values


@overload(_at)
def _at_numba(values, i):
    if isinstance(values, types.Array):
        return lambda values, i: values[i]
    return lambda values, i: values


def _put(target, i, value):
    """``target[i] = value``, or nothing when ``target`` is None (an optional output)."""
    if target is not None:
        target[i] = value


@overload(_put)
def _put_numba(target, i, value):
    if isinstance(target, (types.NoneType, types.Omitted)):
        return lambda target, i, value: None

    def store(target, i, value):
        target[i] = value

    return store


#: The kernel's record: the per-row inputs of :data:`perfmodel.inputs.table.ROW_INPUTS` in that order, each a
#: scalar (broadcast) or a read-only 1-D array, or None for an extension that is off (then compiled out);
#: then a model's capped byte terms, its message terms (:class:`perfmodel.inputs.resolve.MessageTerms`) and the
#: label codes' masks.
FIELDS = (
    *ROW_NAMES,
    "window_bytes_per_token",
    "window_tokens",
    "chunk_bytes_per_token",
    "chunk_tokens",
    "full_messages",
    "window_messages",
    "chunk_messages",
    "state_messages",
    "worker_type_masks",
    "mode_masks",
)


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


@overload(_decoded)
def _decoded_numba(code, masks):
    if isinstance(masks, (types.NoneType, types.Omitted)):
        return lambda code, masks: code

    def decode(code, masks):
        ones, valid = masks[0], masks[1]
        c = np.int64(code)
        shift = np.uint64(c & 63)
        ok = (c >= 0) & (c < 64) & (((valid >> shift) & np.uint64(1)) != 0)
        one = ((ones >> shift) & np.uint64(1)) != 0
        return np.int8(np.int64(ok) * (np.int64(one) + 1) - 1)  # 1, 0 or -1 without a branch

    return decode


@jit
def fixed_ms(latency_ms, block_ms, message_ms):
    """A transfer's fixed costs in ms: its latency, then its blocks' cost, then its messages', added in this
    order wherever a transfer pays them (the numpy API, the replays, :meth:`perfmodel.Link.transfer_ms`), so
    that each path gives the same number to the last bit.

    >>> float(fixed_ms(0.5, 0.25, 0.125))
    0.875
    """
    return latency_ms + block_ms + message_ms


@jit
def transfer_ms(nbytes, bandwidth_gb_s, fixed):
    """Transfer time in ms: ``nbytes`` over ``bandwidth_gb_s`` (decimal GB/s) in upstream's operation order,
    plus, only when bytes move, the fixed costs ``fixed`` (ms, :func:`fixed_ms`). With no fixed cost this is
    upstream's delay, bit for bit.

    >>> float(transfer_ms(1e9, 1.0, 0.5)), float(transfer_ms(0.0, 1.0, 0.5))
    (1000.5, 0.0)
    """
    return nbytes / (bandwidth_gb_s * 1e9) * 1000.0 + (fixed if nbytes > 0 else 0.0)


# --- the handoff kernel -----------------------------------------------------------------------------
# Each input's valid range comes from the table (perfmodel.inputs.table), compiled in as constants. The
# extensions are None when off, so that numba compiles them out (the default path stays upstream's
# formula at the memory floor) and only their users pay.

_T, _B, _P, _W, _C, _M, _D, _S, _LAT, _FB, _PB, _BS, _PM, _BPM, _PRE, _RATE, _LAYERS, _GROUP, _MIN = (
    tuple(INPUTS[name].valid or ()) for name in ROW_NAMES
)
_outside = jit(outside)
_no_block = jit(per_block_without_block)
_beyond_layers = jit(group_beyond_layers)
_is_none = (types.NoneType, types.Omitted)


def _block_cost(per_block_ms, block_size, blocks_per_message, charged):
    """(blocks moved * per-block cost in ms, invalid) of one row; (0, False) when the extension is off."""
    if per_block_ms is None:
        return 0.0, False
    pb, bs = np.float64(per_block_ms), np.float64(block_size)
    invalid = _outside(pb, _PB) | _outside(bs, _BS) | _no_block(pb, bs) | _outside(np.float64(blocks_per_message), _BPM)
    return blocks_of(charged, bs) * pb, invalid


@overload(_block_cost)
def _block_cost_numba(per_block_ms, block_size, blocks_per_message, charged):
    if isinstance(per_block_ms, _is_none):
        return lambda per_block_ms, block_size, blocks_per_message, charged: (0.0, False)
    return _block_cost


def _message_cost(
    per_message_ms,
    block_size,
    blocks_per_message,
    full,
    window,
    chunk,
    state,
    window_tokens,
    chunk_tokens,
    charged,
    tokens,
):
    """(messages posted * per-message cost in ms, invalid) of one row; (0, False) when the extension is off
    (its message terms None): each layer kind's charged tokens in blocks, merged ``blocks_per_message`` to a
    message, times its messages per block."""
    if full is None:
        return 0.0, False
    pm, bs = np.float64(per_message_ms), np.float64(block_size)
    invalid = _outside(pm, _PM) | _no_block(pm, bs)
    messages = messages_of(
        charged,
        tokens,
        bs,
        np.float64(full),
        np.float64(window),
        np.float64(chunk),
        np.float64(state),
        np.float64(window_tokens),
        np.float64(chunk_tokens),
        np.float64(blocks_per_message),
    )
    return messages * pm, invalid


@overload(_message_cost)
def _message_cost_numba(
    per_message_ms,
    block_size,
    blocks_per_message,
    full,
    window,
    chunk,
    state,
    window_tokens,
    chunk_tokens,
    charged,
    tokens,
):
    if isinstance(full, _is_none):
        return (
            lambda per_message_ms, block_size, blocks_per_message, full, window, chunk, state, window_tokens, chunk_tokens, charged, tokens: (
                0.0,
                False,
            )
        )
    return _message_cost


def _exposed(full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens):
    """(the delay exposed after prefill, invalid) of one row under layer-wise streaming; (full, False) when off."""
    if num_layers is None:
        return full, False
    pre, rate = np.float64(prefill_ms), np.float64(prefill_tokens_per_s)
    layers, group, lw_min = np.float64(num_layers), np.float64(layer_group), np.float64(layerwise_min_tokens)
    invalid = (
        _outside(pre, _PRE)
        | _outside(rate, _RATE)
        | _outside(layers, _LAYERS)
        | _outside(group, _GROUP)
        | _outside(lw_min, _MIN)
        | _beyond_layers(group, layers)
    )
    # of the full transfer X, only what could not hide behind the prefill's compute
    compute = pre if rate != rate else tokens / rate * 1000.0  # noqa: PLR0124 (NaN tests: numba kernel)
    streamed = (layers > 0) & (tokens >= lw_min)
    hidden = max(full * group / layers, full - compute * (layers - group) / layers) if streamed else full
    return ((hidden if compute == compute else np.nan) if streamed else full), invalid  # noqa: PLR0124 (numba): unknown prefill: unknown


@overload(_exposed)
def _exposed_numba(full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens):
    if isinstance(num_layers, _is_none):
        return lambda full, tokens, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens: (
            full,
            False,
        )
    return _exposed


class ByteTerms(NamedTuple):
    """The byte terms of a handoff (or of one flow of it), in :func:`kv_bytes`' order: bytes per token of its
    full-attention, sliding-window and chunked-attention layers, its fixed state bytes (which move with every
    handoff), and the window and the chunk in tokens (0: none). The one record of these terms: a model's
    (:meth:`perfmodel.KVTerms.byte_terms`), a head's (:meth:`perfmodel.network.clusters.HeadTerms.byte_terms`) and
    a flow's carry it.

    >>> ByteTerms(40960.0).bytes(1024, 1024)
    41943040.0
    """

    full: float
    window: float = 0.0
    chunk: float = 0.0
    state: float = 0.0
    window_tokens: float = 0.0
    chunk_tokens: float = 0.0

    def bytes(self, charged: float, tokens: float) -> float:
        """Bytes moved for ``charged`` tokens of a ``tokens``-token prompt (:func:`kv_bytes`)."""
        return float(kv_bytes(*(np.float64(x) for x in self), np.float64(charged), np.float64(tokens)))


def _floor_quotient(x, c):
    """``floor(x / c)``: in integers for integers (exact, as numpy's ``//``), ``np.floor(x / c)`` otherwise."""
    both_whole = isinstance(x, (int, np.integer)) and isinstance(c, (int, np.integer))
    return x // c if both_whole else np.floor(x / c)


@overload(_floor_quotient)
def _floor_quotient_numba(x, c):
    if isinstance(x, types.Integer) and isinstance(c, types.Integer):
        return lambda x, c: x // c
    return lambda x, c: np.floor(x / c)


@jit
def current_chunk(tokens, chunk_tokens):
    """Tokens of a prompt's current chunk, ``((tokens - 1) mod C) + 1`` (0 for an empty prompt or no chunk):
    the one current-chunk formula (in integers for integers, exactly; in float64 otherwise)."""
    c = chunk_tokens
    if (c > 0) & (tokens > 0):
        return (tokens - 1) - _floor_quotient(tokens - 1, c) * c + 1
    return 0


@jit
def blocks_of(tokens, block_size):
    """Blocks of ``block_size`` tokens that hold ``tokens`` tokens, ``ceil(tokens / block_size)`` (0 without a block
    size): the one block count (a handoff's blocks, each layer kind's blocks of its messages)."""
    return np.ceil(tokens / block_size) if block_size > 0 else 0.0


@jit
def regions(blocks, blocks_per_message):
    """Messages of ``blocks`` consecutive blocks merged ``blocks_per_message`` to a message (``inf``: one)."""
    return max(np.ceil(blocks / blocks_per_message), 1.0) if blocks > 0 else 0.0


@jit
def messages_of(
    charged, tokens, block_size, full, window, chunk, state, window_tokens, chunk_tokens, blocks_per_message=1.0
):
    """Messages one rank posts for ``charged`` tokens of a ``tokens``-token prompt (0 without a block size):
    each layer kind's kept tokens in blocks (a window or chunk layer's at most its window or current
    chunk), merged ``blocks_per_message`` to a message, times its messages per block, and the states'
    messages (a state moves with every handoff). The one message-count formula: every path calls it."""
    if not block_size > 0:
        return 0.0
    current = current_chunk(tokens, chunk_tokens)
    bpm = blocks_per_message
    if state < 0:  # kv_layout "block" with windows and chunks but no full attention: the longer-kept layer's blocks
        return regions(blocks_of(max(min(charged, window_tokens), min(charged, current)), block_size), bpm)
    return (
        regions(blocks_of(charged, block_size), bpm) * full
        + regions(blocks_of(min(charged, window_tokens), block_size), bpm) * window
        + regions(blocks_of(min(charged, current), block_size), bpm) * chunk
        + state
    )


@jit
def capped_bytes(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens):
    """Bytes of sliding-window layers (at most ``window_tokens`` of the ``charged`` tail) and of
    chunked-attention layers (at most the prompt's current chunk), in float64 (exact for whole
    numbers below 2**53), or in int64 for integers."""
    current = current_chunk(tokens, chunk_tokens)
    return window_bytes_per_token * min(charged, window_tokens) + chunk_bytes_per_token * min(charged, current)


def _capped_or_none(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens):
    """:func:`capped_bytes`, or 0 when the model has no capped layers (its window terms None: compiled out)."""
    if window_bytes_per_token is None:
        return 0.0
    return capped_bytes(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens)


@overload(_capped_or_none)
def _capped_or_none_numba(window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens):
    if isinstance(window_bytes_per_token, _is_none):
        return lambda window_bytes_per_token, window_tokens, chunk_bytes_per_token, chunk_tokens, charged, tokens: 0.0
    return _capped_or_none


@jit
def kv_bytes(full, window, chunk, state, window_tokens, chunk_tokens, charged, tokens):
    """Bytes a handoff (or one flow of it) moves for ``charged`` tokens of a ``tokens``-token prompt, from its
    byte terms (:class:`ByteTerms`): bytes per token of its full-attention, sliding-window and chunked-attention
    layers, its fixed state bytes (which move with every handoff), the window and the chunk in tokens. Upstream's
    operation order: ``charged * full`` first, then the capped layers, then the state. ``window`` None: the
    model has no capped layers (``chunk`` and both token counts None too; compiled out). The one bytes formula:
    every path (handoff kernel, replays, clusters, inverse questions) calls it; in int64 for integers, exactly."""
    return charged * full + _capped_or_none(window, window_tokens, chunk, chunk_tokens, charged, tokens) + state


@jit
def kv_bytes_each(full, window, chunk, state, window_tokens, chunk_tokens, charged, tokens, out):
    """Fill ``out`` with :func:`kv_bytes` of each element of equally long 1-D arrays (int64 exactly for int64)."""
    for i in range(out.size):
        out[i] = kv_bytes(
            full[i], window[i], chunk[i], state[i], window_tokens[i], chunk_tokens[i], charged[i], tokens[i]
        )


@jit
def messages_each(
    charged, tokens, block_size, full, window, chunk, state, window_tokens, chunk_tokens, blocks_per_message
):
    """:func:`messages_of` of each element of equally long 1-D arrays (float64; ``blocks_per_message`` one number)."""
    out = np.empty(charged.size, dtype=np.float64)
    for i in range(out.size):
        out[i] = messages_of(
            charged[i],
            tokens[i],
            block_size[i],
            full[i],
            window[i],
            chunk[i],
            state[i],
            window_tokens[i],
            chunk_tokens[i],
            blocks_per_message,
        )
    return out


@jit
def _handoff_row(inputs, i):
    """Delay (ms, NaN when none applies), invalid flag and bytes moved of row ``i`` of the record."""
    (
        t,
        b,
        p,
        w,
        c,
        m,
        d,
        s,
        lat,
        fb,
        pb,
        bs,
        pm,
        bpm,
        pre,
        rate,
        layers,
        group,
        lw_min,
        wb,
        wt,
        cb,
        ct,
        fm,
        wm,
        cm,
        sm,
        w_masks,
        m_masks,
    ) = inputs
    t, b, p = np.float64(_at(t, i)), np.float64(_at(b, i)), np.float64(_at(p, i))
    w, c = np.float64(_decoded(_at(w, i), w_masks)), np.float64(_at(c, i))
    m, d, s = np.float64(_decoded(_at(m, i), m_masks)), np.float64(_at(d, i)), np.float64(_at(s, i))
    lat, fb = np.float64(_at(lat, i)), np.float64(_at(fb, i))
    invalid = (
        _outside(t, _T)
        | _outside(b, _B)
        | _outside(p, _P)
        | _outside(w, _W)
        | _outside(c, _C)
        | _outside(m, _M)
        | _outside(d, _D)
        | _outside(s, _S)
        | _outside(lat, _LAT)
        | _outside(fb, _FB)
    )
    charged = d if m == 1 else t
    # Upstream's operation order: tokens as f64 * bytes_per_token as f64, / (bw * 1e9) * 1000. Windowed and
    # chunked layers add their capped bytes; a fixed state moves once per handoff, even when no token is charged
    # (the newest upstream's rule).
    nbytes = kv_bytes(p, _at(wb, i), _at(cb, i), s, _at(wt, i), _at(ct, i), charged, t)
    block_cost, block_invalid = _block_cost(_at(pb, i), _at(bs, i), _at(bpm, i), charged)
    message_cost, message_invalid = _message_cost(
        _at(pm, i),
        _at(bs, i),
        _at(bpm, i),
        _at(fm, i),
        _at(wm, i),
        _at(cm, i),
        _at(sm, i),
        _at(wt, i),
        _at(ct, i),
        charged,
        t,
    )
    full = transfer_ms(nbytes, b, fixed_ms(lat, block_cost, message_cost))
    exposed, stream_invalid = _exposed(
        full, t, _at(pre, i), _at(rate, i), _at(layers, i), _at(group, i), _at(lw_min, i)
    )
    invalid = invalid | block_invalid | message_invalid | stream_invalid
    unknown = (p != p) | (s != s) | (b != b) | (b == 0)  # noqa: PLR0124 (NaN tests: numba kernel)
    value = fb if unknown else exposed
    applies = (w == 1) & (c != 0) & (t == t) & (charged == charged) & (not invalid)  # noqa: PLR0124 (NaN tests: numba kernel)
    return (value if applies else np.nan), invalid, nbytes


@jit
def handoff_serial(inputs, out, missing_out=None, bytes_out=None):
    """Fill ``out`` with handoff delays in ms (and, if given, ``missing_out`` with ``isnan(out)`` and
    ``bytes_out`` with the bytes each row's transfer moves, in the same pass); return the number of
    invalid rows. ``inputs``: the record of :data:`FIELDS`. The one loop: threads run it on shares of
    the rows (views of every array: it holds no GIL)."""
    n_invalid = 0
    for i in range(out.shape[0]):
        value, invalid, nbytes = _handoff_row(inputs, i)
        out[i] = value
        _put(missing_out, i, value != value)  # noqa: PLR0124 (NaN tests: numba kernel)
        _put(bytes_out, i, nbytes)
        n_invalid += invalid
    return n_invalid


#: The record's per-row fields (sliced for a share of the rows); the label masks after them are not.
PER_ROW = len(FIELDS) - 2
