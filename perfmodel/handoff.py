"""numpy-level API: coerce and validate inputs at the edge, one kernel pass, return an array.

Data flows one way: every argument is coerced once to a scalar or a read-only,
C-contiguous 1-D array of a small fixed set of dtypes (inputs already in that set are
never copied), one fused Numba pass computes delays and counts invalid rows, and only
when that count is non-zero (and ``errors="raise"``) does a slower diagnostic pass find
which argument, row and value were at fault.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _compat
from .errors import Errors, InputError, check_flag, check_whole
from .inputs import resolve as _resolve
from .inputs.args import Arg, coerce
from .inputs.codes import TransferMode, WorkerType
from .inputs.coerce import (
    check_errors,
    check_out,
    check_required,
    distinct,
    edge_values,
    holds_nothing,
    one_index,
    plain,
    read_only,
    refuse_none,
    whole_numbers,
    why_invalid,
)
from .inputs.table import (
    CROSS,
    GROUPS,
    INPUTS,
    ROW_INPUTS,
    ROW_NAMES,
    check_option,
    documented,
    group_off,
    is_default,
    layerwise_given,
    outside,
)
from .inputs.words import count
from .kernels import handoff as _kernels
from .kernels.threads import in_shares
from .model.models import ModelShape
from .network import placement as _onto_cluster
from .network.connector import Connector
from .network.links import Link
from .options import deprecated_constant, option

__all__ = ["InputError", "destination_missing_tokens", "handoff_delay_ms"]

# (two constants that are options now, perfmodel.set_options: read with a warning)
__getattr__ = deprecated_constant("perfmodel.handoff", {"PARALLEL_MIN_ROWS": "parallel_min_rows", "SPREAD_MAX_ROWS": "spread_max_rows"})

#: About how long the handoff kernel's first form takes to compile on a cold cache (2 cores, measured).
FIRST_COMPILE_S = 2

#: The model's per-row inputs, in the kernel's order (the pandas facade takes the same names).
ARGUMENTS = ROW_NAMES
_MODE_INDEX = ARGUMENTS.index("mode")


def _group_slice(group: str) -> slice:
    names = [e.name for e in GROUPS[group]]
    first = ARGUMENTS.index(names[0])
    assert ARGUMENTS[first:first + len(names)] == tuple(names), "an extension's inputs are adjacent in the table"
    return slice(first, first + len(names))


#: Where each extension's inputs sit in the kernel's record.
_GROUP_SLICES = {group: _group_slice(group) for group in GROUPS}
_NONES = {group: [None] * (where.stop - where.start) for group, where in _GROUP_SLICES.items()}
_WORKER_INDEX = ARGUMENTS.index("worker_type")
_MESSAGES = _resolve.MessageTerms._fields
assert (*ARGUMENTS, *_resolve.CAPPED, *_MESSAGES, "worker_type_masks", "mode_masks") == _kernels.FIELDS


# Up to the option spread_max_rows, a scalar among the three main inputs (and a single worker type) is spread to an
# array (:func:`_kernel_record`), a single row's call too, and every optional output is written: one compiled form
# for the small calls instead of one per mix (each a compile of 1-3 s on a cold cache), for copies that cost
# microseconds.
# Larger calls keep their scalars and write only the outputs asked for.
_MAIN = (ARGUMENTS.index("num_input_tokens"), ARGUMENTS.index("kv_transfer_bandwidth"),
         ARGUMENTS.index("kv_bytes_per_token"))


def _spread(value: Any, n: int) -> np.ndarray:
    """A scalar as a read-only array of ``n`` rows, a whole number as int64 (as a column of counts comes)."""
    whole = abs(value) < 2**53 and float(value).is_integer()  # (False for NaN)
    return read_only(np.full(n, value, dtype=np.int64 if whole else np.float64))


def _small(args: list[Arg], n: int) -> bool:
    """Whether a call is small enough to take the one compiled form of small calls (a single row too)."""
    return n <= option("spread_max_rows")


# A single worker type (0 or 1) as the label codes a column of them gives: code 0, and the masks saying whether
# that label is prefill (1) and valid (see _args._label_codes), which the kernel decodes to the same value.
_WORKER_AS_LABEL = {0: (np.uint64(0), np.uint64(1)), 1: (np.uint64(1), np.uint64(1))}


def _spread_worker(arg: Arg, n: int) -> tuple[Any, Any]:
    """The worker type's (value, masks) in the small calls' form: a single 0 or 1 as ``n`` label codes."""
    value = arg.value
    if arg.is_array or arg.masks is not None or type(value) is not np.int8 or int(value) not in _WORKER_AS_LABEL:
        return value, arg.masks
    return read_only(np.zeros(n, dtype=np.int8)), _WORKER_AS_LABEL[int(value)]


def _kernel_record(args: list[Arg], terms: dict[str, Any], n: int = 1, small: bool = False) -> tuple:
    """The kernel's record (:data:`perfmodel.kernels.handoff.FIELDS`); an extension whose inputs are all at
    their off values is None there, so its terms compile away and the default path stays upstream's
    formula (and its speed). A plain tuple: numba types it in C, a named one in Python."""
    values = [a.value for a in args]
    worker_masks = args[_WORKER_INDEX].masks
    if small:  # (the one compiled form of small calls: the main inputs and the worker type arrays)
        for i in _MAIN:
            if not args[i].is_array:
                values[i] = _spread(values[i], n) if i == _MAIN[0] else read_only(np.full(n, values[i]))
        values[_WORKER_INDEX], worker_masks = _spread_worker(args[_WORKER_INDEX], n)
    defaults = _default_args()
    for group, where in _GROUP_SLICES.items():
        if all(map(operator.is_, args[where], defaults[where])) or group_off(group, {a.name: a.value
                                                                                   for a in args[where]}):
            values[where] = _NONES[group]
    return (*values, *(terms[name] for name in (*_resolve.CAPPED, *_MESSAGES)), worker_masks, args[_MODE_INDEX].masks)


def _model_term(value: Any) -> Any:
    """A model's capped byte or message term (resolved here, so always numbers) as the kernel takes it."""
    if value is None or np.ndim(value) == 0:
        return None if value is None else np.float64(value)
    return read_only(np.ascontiguousarray(value, dtype=np.float64))


def _common_length(args: list[Arg], capped: dict[str, Any]) -> int:
    """The rows of the arrays among the arguments and a model's terms (1: all scalars)."""
    lengths = {a.name: len(a.value) for a in args if a.is_array}
    for name, value in capped.items():
        if isinstance(value, np.ndarray):
            lengths[name] = len(value)
    if not lengths:
        return 1
    if len(set(lengths.values())) > 1:
        listing = ", ".join(f"{k} has {count(v, 'row')}" for k, v in lengths.items())
        raise InputError(
            "inputs", f"arrays of different lengths ({listing})",
            "pass arrays of one common length, or a scalar to apply one value to every row",
        )
    return next(iter(lengths.values()))


def _invalid_rows(arg: Arg, n: int) -> np.ndarray:
    """Where one argument breaks its range in the table (the kernel's rule, in numpy)."""
    with np.errstate(invalid="ignore"):
        values = np.asarray(arg.kernel_values(), dtype=np.float64)
        limits = INPUTS[arg.name].valid
        assert limits is not None, arg.name  # (the table's numbers have ranges)
        return np.broadcast_to(outside(values, limits), (n,))


def _diagnose(args: list[Arg], n: int) -> InputError:
    """The first argument with invalid rows, with the count of every argument's invalid rows
    (error path only; plain numpy, the table's rules)."""
    counts: dict[str, int] = {}
    first: tuple[Arg, np.ndarray] | None = None
    for arg in args:
        invalid = _invalid_rows(arg, n)
        n_invalid = int(np.count_nonzero(invalid))
        if n_invalid:
            counts[arg.name] = n_invalid
            first = first or (arg, invalid)
    if first is None:  # only rules that tie two inputs together
        by_name = {a.name: a for a in args}
        for rule in CROSS:
            blamed, other = by_name[rule.blamed], by_name[rule.other]
            with np.errstate(invalid="ignore"):
                invalid = np.broadcast_to(rule.invalid(np.asarray(blamed.value, dtype=np.float64),
                                                       np.asarray(other.value, dtype=np.float64)), (n,))
            if invalid.any():
                position = int(np.argmax(invalid))
                value = plain(blamed.original[0] if not blamed.is_array else
                               np.asarray(blamed.original, dtype=object)[position])
                if not blamed.is_array and not other.is_array:
                    return InputError(rule.blamed, f"{value!r}: {rule.problem}", rule.fix, value=value)
                return InputError(rule.blamed, rule.problem, rule.fix, n_invalid=int(invalid.sum()), row=position,
                                  value=value, position=position, counts={rule.blamed: int(invalid.sum())})
        raise AssertionError("the kernel counted invalid rows that the diagnostic pass does not find")
    arg, invalid = first
    if not arg.is_array:  # one value, applied to every row
        value = plain(arg.original[0])
        return InputError(arg.name, f"{value!r} is {why_invalid(arg.name, value)}", INPUTS[arg.name].rule, value=value)
    position = int(np.argmax(invalid))
    original = arg.original.iloc[position] if hasattr(arg.original, "iloc") else arg.original[position]
    return InputError(
        arg.name, why_invalid(arg.name, original), INPUTS[arg.name].rule,
        n_invalid=counts[arg.name], row=position, value=plain(original), position=position, counts=counts,
    )


def _run_kernel(values: tuple, out: np.ndarray, missing_out: np.ndarray | None, parallel: bool | None,
                num_threads: int | None, bytes_out: np.ndarray | None = None) -> int:
    """One kernel pass: the compiled loop over every row, or over each thread's share of the rows for
    large inputs (:func:`in_shares`)."""
    n = out.shape[0]
    if _compat.uncompiled(_kernels.handoff_serial):  # (the first call of this process: quick from then on)
        _compat.notice_first_compile("handoff", _kernels.handoff_serial, FIRST_COMPILE_S)
    threads = num_threads or numba.config.NUMBA_NUM_THREADS
    if parallel is None:
        parallel = n >= option("parallel_min_rows") and threads > 1
    if not parallel or threads == 1:
        return int(_kernels.handoff_serial(values, out, missing_out, bytes_out))

    def share(_k: int, i: int, j: int) -> int:
        """The kernel over rows ``i`` to ``j``: views of every per-row array."""
        rows = [v[i:j] if isinstance(v, np.ndarray) else v for v in values[:_kernels.PER_ROW]]
        return _kernels.handoff_serial((*rows, *values[_kernels.PER_ROW:]), out[i:j],
                                       None if missing_out is None else missing_out[i:j],
                                       None if bytes_out is None else bytes_out[i:j])

    return int(sum(in_shares(n, threads, share)))


@documented()
def handoff_delay_ms(
    num_input_tokens: ArrayLike,
    kv_transfer_bandwidth: ArrayLike,
    kv_bytes_per_token: Any,
    *,
    worker_type: ArrayLike = WorkerType.PREFILL,
    completed: ArrayLike = True,
    mode: ArrayLike = TransferMode.FULL_PROMPT,
    destination_missing_tokens: ArrayLike | None = None,
    state_bytes: ArrayLike | None = None,
    latency_ms: ArrayLike = 0.0,
    fallback_delay_ms: ArrayLike | None = None,
    per_block_ms: ArrayLike = 0.0,
    block_size: ArrayLike | None = None,
    per_message_ms: ArrayLike = 0.0,
    blocks_per_message: ArrayLike = 1.0,
    prefill_ms: ArrayLike | None = None,
    prefill_tokens_per_s: ArrayLike | None = None,
    num_layers: ArrayLike | None = None,
    layer_group: ArrayLike = 1,
    layerwise_min_tokens: ArrayLike = 0,
    overlap: Literal["none", "layerwise"] = "none",
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    decode_tp: int | None = None,
    scope: Literal["rank", "group"] = "rank",
    kv_layout: Literal["layer_kv", "layer", "block"] = "layer_kv",
    connector: Connector | str | None = None,
    errors: Errors = "raise",
    out: NDArray[np.float64] | None = None,
    parallel: bool | None = None,
    num_threads: int | None = None,
) -> np.float64 | NDArray[np.float64]:
    """KV-cache handoff delay in milliseconds, one value per row (NaN where none applies).

    Reproduces the prefill-to-decode handoff timing of NVIDIA aisimulate-core 0.12.0
    with the default arguments: a completed prefill worker's handoff costs
    ``tokens * kv_bytes_per_token / (kv_transfer_bandwidth * 1e9) * 1000`` ms.

    Every per-row input is a scalar (applied to every row) or a 1-D array-like (list,
    numpy array, pandas Series) of one common length. As in numpy, scalars in give a
    ``numpy.float64`` out, arrays in give a 1-D float64 array.

    Parameters
    ----------
    @inputs

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Delays in ms, NaN where no handoff applies or its cost is unknown.

    Examples
    --------
    >>> import perfmodel
    >>> perfmodel.handoff_delay_ms(128, 1.0, 1_000_000)
    np.float64(128.0)
    >>> perfmodel.handoff_delay_ms([4096, 32768], 50.0, 327_680, worker_type=["prefill", "decode"])
    array([26.8435456,        nan])
    >>> perfmodel.handoff_delay_ms(32_768, "ib-ndr", "llama-3.1-70b", kv_cache_dtype="fp8")  # names resolve
    np.float64(107.3741824)
    >>> perfmodel.handoff_delay_ms(100, 1.0, 1000, mode="destination_missing",
    ...                            destination_missing_tokens=20)
    np.float64(0.02)
    """
    inputs = dict(
        num_input_tokens=num_input_tokens, kv_transfer_bandwidth=kv_transfer_bandwidth,
        kv_bytes_per_token=kv_bytes_per_token, worker_type=worker_type, completed=completed, mode=mode,
        destination_missing_tokens=destination_missing_tokens, state_bytes=state_bytes, latency_ms=latency_ms,
        fallback_delay_ms=fallback_delay_ms, per_block_ms=per_block_ms, block_size=block_size,
        per_message_ms=per_message_ms, blocks_per_message=blocks_per_message, prefill_ms=prefill_ms,
        prefill_tokens_per_s=prefill_tokens_per_s,
        num_layers=num_layers, layer_group=layer_group, layerwise_min_tokens=layerwise_min_tokens)
    chosen = dict(overlap=overlap, kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp, scope=scope,
                  kv_layout=kv_layout, connector=connector)
    refuse_none({**inputs, **chosen})  # (None is no value: never taken for the default)
    result = handoff(inputs, Options.of(**chosen), errors=errors, out=out, parallel=parallel, num_threads=num_threads)
    return result.delays[0] if result.scalar and out is None else result.delays


@dataclass(frozen=True)
class Options(ModelShape):
    """How names resolve and which extensions apply, one value per call: the model's shape
    (:class:`perfmodel.model.models.ModelShape`) and whether layer groups stream while prefill runs. Validated
    when made."""

    overlap: str = INPUTS["overlap"].default  # "layerwise": stream layer groups while prefill runs
    connector: Any = INPUTS["connector"].default  # a Connector or its name: costs added to latency and messages

    def __post_init__(self) -> None:
        super().__post_init__()
        check_option("overlap", self.overlap)

    @classmethod
    def of(cls, **chosen: Any) -> Options:
        """The options a call was given (the shared plain ones when they are the defaults)."""
        if all(value is _OPTION_DEFAULTS[name] or (is_default(name, value) and type(value) is not bool)
               for name, value in chosen.items()):
            return _PLAIN
        return cls(**chosen)

    @classmethod
    def among(cls, values: Mapping[str, Any]) -> Options:
        """:meth:`of` the options among ``values`` (a call's keywords, some of them options)."""
        return cls.of(**{name: values[name] for name in _OPTION_NAMES if name in values})

    def model_options(self) -> dict[str, Any]:
        """The options of :func:`perfmodel.inputs.resolve.model_terms` (the model's shape)."""
        return self.bytes_options()


_PLAIN = Options()  # (no names shaped by options, no layer-wise streaming)
_OPTION_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Options)}
_OPTION_NAMES = tuple(_OPTION_DEFAULTS)


class _Result(NamedTuple):
    delays: NDArray[np.float64]
    missing: NDArray[np.bool_] | None  # the NaN mask of delays, when asked for
    scalar: bool  # every input was a single value


def _names_in(value: Any) -> bool:
    """Whether a bandwidth or bytes-per-token value holds names (models, links) or objects to resolve."""
    kind = type(value)
    if (kind is np.ndarray and value.dtype.kind in "iuf") or kind in (int, float, np.float64, np.int64):
        return False
    if isinstance(value, (str, Mapping, os.PathLike, Link)) or type(value).__name__ in _resolve.NOT_LINKS:
        return True
    if isinstance(value, (int, float, np.number)):
        return False
    return np.ndim(value) > 0 and _resolve.holds_labels(value)


def _resolve_links(values: dict[str, Any], errors: str) -> None:
    """In place, once per distinct name: links to bandwidth, latency, per-block and per-message costs
    (added to the caller's). Unknown names raise, or with ``errors="coerce"`` leave their rows missing."""
    if not _names_in(values["kv_transfer_bandwidth"]):
        return
    try:
        link = _resolve.link_terms(values["kv_transfer_bandwidth"], errors=errors)
    except (ValueError, TypeError) as error:  # (an InputError as it is: it names the input already)
        raise error if isinstance(error, InputError) else InputError.of("kv_transfer_bandwidth", error) from None
    values["kv_transfer_bandwidth"] = link.bandwidth_gb_s
    values.update(_resolve.with_link_costs(values, link, errors))


def _cluster_bandwidth(found: _onto_cluster.Route, args: list[Arg], counts: Any) -> Arg:
    """The bandwidth per row at which a cluster's handoff takes its simulated time (the nonlinear case)."""
    bandwidth = _onto_cluster.nonlinear_bandwidth(found, *_charged(args), counts=counts)
    value = bandwidth.reshape(-1)[0] if bandwidth.ndim == 0 or (bandwidth.size == 1 and not any(
        a.is_array for a in args)) else bandwidth
    return Arg("kv_transfer_bandwidth", np.float64(value) if np.ndim(value) == 0 else read_only(value), [value])


def _flow_counts(found: _onto_cluster.Route, args: list[Arg], capped: dict[str, Any],
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per row, the messages one rank posts and the blocks it moves (as the kernel counts them), for a cluster
    handoff whose flows' links cost something per message or block, each flow its own link's (None: none does)."""
    tokens, charged = _charged(args)
    bs = np.asarray(args[_BLOCK_SIZE_INDEX].kernel_values(), dtype=np.float64)
    bpm = np.asarray(args[_BLOCKS_PER_MESSAGE_INDEX].kernel_values(), dtype=np.float64)
    tokens, charged, bs, bpm = np.broadcast_arrays(tokens, charged, bs, bpm)
    with np.errstate(invalid="ignore", divide="ignore"):
        blocks = np.where(bs > 0, np.ceil(charged / bs), 0.0)
    messages = np.zeros(blocks.shape)
    if capped.get("full_messages") is not None:  # (each distinct row's messages counted once)
        names = ("full_messages", "window_messages", "chunk_messages", "state_messages", "window_tokens",
                 "chunk_tokens")
        terms = [np.broadcast_to(np.asarray(capped[k], dtype=np.float64), blocks.shape) for k in names]
        rows = np.stack([np.ravel(x) for x in (charged, tokens, bs, bpm, *terms)])
        keys, inverse = np.unique(np.nan_to_num(rows, nan=-1.0), axis=1, return_inverse=True)
        counted = np.array([np.nan if np.any(key[[0, 1, 3]] < 0) else _kernels.messages_of(
            key[0], key[1], max(key[2], 0.0), *key[4:8], *key[8:10], key[3]) for key in keys.T])
        messages = counted[np.asarray(inverse).ravel()].reshape(blocks.shape)
    return messages, blocks


def _whole_handoff(found: _onto_cluster.Route | None, args: list[Arg], bytes_out: np.ndarray | None,
                   rate_out: np.ndarray | None, counts: Any = None) -> None:
    """In place, after the kernel: on a cluster, all the bytes of each row's handoff and (when asked) its rate;
    on a link, the rate asked for is its bandwidth."""
    if found is not None and bytes_out is not None:
        total, rate = _onto_cluster.whole_handoff(found, bytes_out, *_charged(args), counts)
        bytes_out[:] = total
        if rate_out is not None:
            rate_out[:] = rate
    elif rate_out is not None:
        rate_out[:] = args[_BANDWIDTH_INDEX].kernel_values()


def _charged(args: list[Arg]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's prompt tokens and charged tokens (the destination's missing ones where its mode says so)."""
    tokens = np.asarray(args[0].kernel_values(), dtype=np.float64)
    missing = np.asarray(args[_MISSING_INDEX].kernel_values(), dtype=np.float64)
    mode = np.asarray(args[_MODE_INDEX].kernel_values())
    return tokens, np.where(mode == 1, missing, tokens)


_BANDWIDTH_INDEX = ARGUMENTS.index("kv_transfer_bandwidth")
_MISSING_INDEX = ARGUMENTS.index("destination_missing_tokens")
_BLOCK_SIZE_INDEX = ARGUMENTS.index("block_size")
_BLOCKS_PER_MESSAGE_INDEX = ARGUMENTS.index("blocks_per_message")


def _resolve_models(values: dict[str, Any], options: Options, errors: str,
                    cluster_terms: dict[str, Any] | None = None, messages_needed: bool = False) -> dict[str, Any]:
    """In place, once per distinct name: models (names, configs) to bytes per token, to their message
    terms where messages cost (``per_message_ms``), and to layer counts for layer-wise streaming.
    Returns the capped byte terms of sliding-window and chunked-attention models and the message terms
    (None each when there are none); a model's fixed state becomes ``state_bytes`` unless the caller
    gave one (``messages_needed``: the message terms even when the caller's messages cost nothing, for a
    cluster's links that cost something per message)."""
    per_token = values["kv_bytes_per_token"]
    model_given = _names_in(per_token)
    terms = dict.fromkeys((*_resolve.CAPPED, *_MESSAGES))
    if not model_given and holds_nothing(per_token):  # no model, no number (no row): unknown bytes on every row
        values["kv_bytes_per_token"] = np.full(len(per_token), np.nan)
        values["num_layers"] = None if options.overlap == "none" else values["num_layers"]
        return terms
    try:
        if model_given and values["num_layers"] is not None:
            _resolve.own_layers(per_token, values["num_layers"])
        if messages_needed or not _all_off("per_message_ms", values["per_message_ms"]):
            costs = None if messages_needed else values["per_message_ms"]  # (a cluster's links: on every row)
            terms.update(_resolve.message_terms(per_token, options.kv_layout, values["num_layers"],
                                                errors=errors, costs=costs)._asdict())
        if options.overlap == "none":
            values["num_layers"] = None  # (its kernel value: 0, no streaming)
        elif values["num_layers"] is None:
            if not model_given:
                raise InputError("num_layers", "is required for overlap='layerwise' when kv_bytes_per_token is a "
                                 "number", "pass num_layers, or a model name or config as kv_bytes_per_token")
            values["num_layers"] = _resolve.num_layers(per_token, errors=errors)
        if cluster_terms is not None:  # a cluster: its flows' byte terms (the model stays named for its messages)
            cluster_terms = dict(cluster_terms)
            values["kv_bytes_per_token"] = cluster_terms.pop("bytes_per_token")
            terms.update(cluster_terms)
        elif model_given or options.shapes_bytes:
            model = _resolve.model_terms(per_token, **options.model_options(), errors=errors)
            values["kv_bytes_per_token"] = model.bytes_per_token
            terms.update({name: getattr(model, name) for name in _resolve.CAPPED})
            if values["state_bytes"] is None:
                values["state_bytes"] = model.state_bytes
    except InputError:
        raise
    except (ValueError, TypeError) as error:
        raise InputError.of("kv_bytes_per_token", error) from None
    if terms["full_messages"] is not None:  # messages count window and chunk tokens: numbers, 0 for none
        for name in ("window_tokens", "chunk_tokens"):
            terms[name] = 0.0 if terms[name] is None else terms[name]
    return terms


def _all_off(name: str, value: Any) -> bool:
    """Whether an input is its off value on every row."""
    default = INPUTS[name].default
    if value is None or value is default or (type(value) is type(default) and value == default):
        return True
    off = INPUTS[name].off
    return bool(np.all(np.asarray(value, dtype=np.float64) == off)) if np.ndim(value) else is_default(name, value)


def handoff(
    inputs: dict[str, Any],
    options: Options | None = None,
    *,
    errors: Errors = "raise",
    out: NDArray[np.float64] | None = None,
    parallel: bool | None = None,
    num_threads: int | None = None,
    with_missing: bool = False,
    bytes_out: NDArray[np.float64] | None = None,
    rate_out: NDArray[np.float64] | None = None,
) -> _Result:
    """:func:`handoff_delay_ms` of ``inputs`` (the :data:`ARGUMENTS` by name; absent or None: not
    given), the one route of every entry point: options checked, the rules that tie inputs together,
    names resolved, every argument coerced, one kernel pass, and the diagnosis of invalid rows.
    Optionally the result's NaN mask and (into ``bytes_out``) the bytes each row's transfer moves,
    written by the kernel in the same pass; on a cluster, all the bytes its flows move, and (into
    ``rate_out``) the rate of its handoff (:func:`perfmodel.network.placement.whole_handoff`; on a link, its
    bandwidth)."""
    _check_how(errors, parallel, num_threads)
    one_index(inputs)
    options = _PLAIN if options is None else options
    values: dict[str, Any] = dict.fromkeys(ARGUMENTS)
    values.update(edge_values(inputs))
    values.update(_resolve.with_connector(values, options.connector, errors))  # (once: see _by_cluster)
    if holds_nothing(values["kv_bytes_per_token"]):  # no model (nor number, nor row): nothing for a shape to apply to
        options = dataclasses.replace(options, tp=1, decode_tp=None, kv_cache_dtype=None)
    if _onto_cluster.holds_clusters(values["kv_transfer_bandwidth"]):
        return _by_cluster(values, options, errors, out, parallel, num_threads, with_missing, bytes_out, rate_out)
    check_required(values)
    cluster = _onto_cluster.is_cluster(values["kv_transfer_bandwidth"])
    if cluster and np.ndim(values["state_bytes"]):  # (one state per call; None is no column)
        return _by_state(values, options, errors, out, parallel, num_threads, with_missing, bytes_out, rate_out)
    found = _onto_cluster.route(values, options, errors) if cluster else None
    if found is None:
        _resolve_links(values, errors)
    layerwise_given(values, options.overlap, options.kv_layout)
    # a cluster's bandwidth and fixed costs as a link's, before the model's message terms are read; a handoff
    # whose flows pay unequal costs is simulated, each flow with its own link's costs per message and block
    simulated, own_costs, messages_needed = _simulated(found)
    capped = _resolve_models(values, options, errors, None if found is None else _onto_cluster.apply(values, found, errors),
                             messages_needed=messages_needed)
    # an input not given, or given as its default, is the default's coerced argument (no lookup: plain calls are quick)
    args = [arg if value is None or value is default or (type(value) is type(default) and value == default)
            else coerce(name, value) for (name, value), default, arg in zip(values.items(), _DEFAULTS, _default_args())]
    if any(value is not None for value in capped.values()):
        capped = {name: _model_term(value) for name, value in capped.items()}
    n = _common_length(args, capped)
    counts = _simulated_terms(found, args, capped, own_costs) if simulated and found is not None else None
    if inputs.get("destination_missing_tokens") is None and _any_destination_missing(args[_MODE_INDEX]):
        raise InputError(
            "destination_missing_tokens", "is required where mode is destination_missing",
            "pass destination_missing_tokens (see perfmodel.destination_missing_tokens) or use mode='full_prompt'",
        )
    out = np.empty(n, dtype=np.float64) if out is None else check_out(
        out, n, {a.name: a.value for a in args if a.is_array})
    missing = np.empty(n, dtype=np.bool_) if with_missing else None
    bytes_out = np.empty(n) if rate_out is not None and bytes_out is None else bytes_out
    _kernel_pass(args, capped, n, out, missing, bytes_out, errors, parallel, num_threads)
    _whole_handoff(found, args, bytes_out, rate_out, counts)
    return _Result(out, missing, n == 1 and not any(a.is_array for a in args))


def _simulated_terms(found: _onto_cluster.Route, args: list[Arg], capped: dict[str, Any], own_costs: bool) -> Any:
    """A simulated handoff's rate into ``args``; its flows' (messages, blocks) where each pays its own, else None."""
    counts = _flow_counts(found, args, capped) if own_costs else None
    args[_BANDWIDTH_INDEX] = _cluster_bandwidth(found, args, counts)
    return counts


def _simulated(found: _onto_cluster.Route | None) -> tuple[bool, bool, bool]:
    """Whether a cluster's handoff (of one model) is simulated (its flows' costs or bytes unequal), whether
    some flow's link costs something per message or block (each flow paying its own), and per message."""
    resolved = None if found is None else found.resolved
    if resolved is None or resolved.linear:
        return False, False, False
    own_costs = bool(_onto_cluster.link_costs(resolved))
    return True, own_costs, own_costs and any(f.link.per_message_ms for f in resolved.flows)


def _by_state(values: dict[str, Any], options: Options, errors: Errors, out: Any, parallel: bool | None,
              num_threads: int | None, with_missing: bool, bytes_out: Any, rate_out: Any) -> _Result:
    """:func:`handoff` on a cluster of a column of state sizes (a cluster takes one per call): checked as on a
    link (the column's error), then one call per distinct size on its rows."""
    if errors == "raise":
        checked("state_bytes", values["state_bytes"])
    values["state_bytes"] = np.asarray(coerce("state_bytes", values["state_bytes"]).kernel_values(), np.float64)
    return _by_cluster(values, options, errors, out, parallel, num_threads, with_missing, bytes_out, rate_out,
                       by="state_bytes")


def _check_how(errors: Errors, parallel: bool | None, num_threads: int | None) -> None:
    """The options of how a call runs (not of the model): checked before anything is resolved."""
    if errors != "raise":
        check_errors(errors)
    if parallel is not None:
        check_flag("parallel", parallel)
    if num_threads is not None:
        check_whole("num_threads", num_threads, smallest=1)
        if num_threads > numba.config.NUMBA_NUM_THREADS:
            raise InputError("num_threads", f"{num_threads} is more than the {numba.config.NUMBA_NUM_THREADS} threads "
                             "numba started with", f"pass num_threads <= {numba.config.NUMBA_NUM_THREADS}, or set "
                             "NUMBA_NUM_THREADS before starting Python")


def _kernel_pass(args: list[Arg], capped: dict[str, Any], n: int, out: np.ndarray, missing: np.ndarray | None,
                 bytes_out: np.ndarray | None, errors: Errors, parallel: bool | None, num_threads: int | None) -> None:
    """The one kernel pass into ``out`` (and ``missing``, ``bytes_out`` when asked for), then the diagnosis of
    invalid rows when the kernel counted any and errors raise."""
    written_missing, written_bytes = missing, bytes_out
    small = _small(args, n)
    if small:  # (and its every output written: a form without them would be another compile)
        written_missing = np.empty(n, dtype=np.bool_) if missing is None else missing
        written_bytes = np.empty(n) if bytes_out is None else bytes_out
    n_invalid = _run_kernel(_kernel_record(args, capped, n, small), out, written_missing, parallel, num_threads,
                            written_bytes)
    if n_invalid and errors == "raise":
        raise _diagnose(args, n)


def _by_cluster(values: dict[str, Any], options: Options, errors: Errors, out: Any, parallel: bool | None,
                num_threads: int | None, with_missing: bool, bytes_out: Any, rate_out: Any = None,
                by: str = "kv_transfer_bandwidth") -> _Result:
    """:func:`handoff` of a column of clusters (or clusters and links): one call per distinct cluster, on its
    rows, and one for all the other rows (links, bandwidths, missing ones), as a column of their own, so that
    links, numbers and ``errors`` go as they go without clusters. ``by="state_bytes"``: on one cluster, one call
    per distinct state size (a cluster takes one per call), each on its rows."""
    codes, labels = distinct(_onto_cluster.as_column(values[by]))
    codes = np.asarray(codes)
    every = np.array([*labels, np.nan], dtype=object)
    clusters = [k for k, label in enumerate(labels) if by != "kv_transfer_bandwidth" or _onto_cluster.is_cluster(label)]
    groups = [(np.flatnonzero(codes == k), labels[k]) for k in clusters]
    rest = np.flatnonzero(~np.isin(codes, clusters))
    if rest.size:
        column = every[codes[rest]]  # (code -1, a missing value: NaN)
        groups.append((rest, column if _resolve.holds_labels(column) else column.astype(np.float64)))
    if by != "kv_transfer_bandwidth":  # (missing sizes: NaN, unknown, as on a link)
        groups = [(rows, np.float64(np.nan) if np.ndim(label) else label) for rows, label in groups]
    n = len(codes)
    for name, value in values.items():
        if name != by and np.ndim(value) and len(value) != n:
            raise InputError("inputs", f"arrays of different lengths ({by} has {count(n, 'row')}, {name} "
                             f"has {len(value)})", "pass arrays of one common length, or a scalar for every row")
    delays = np.empty(n) if out is None else check_out(out, n, {})
    missing = np.empty(n, dtype=np.bool_) if with_missing else None
    options = options if options.connector is None else dataclasses.replace(options, connector=None)  # (added)
    failed: list[InputError] = []  # (every group's invalid rows, counted together)
    for rows, label in groups:
        part = {name: _onto_cluster.take(value, rows) for name, value in values.items()}
        part[by] = label
        moved = None if bytes_out is None else np.empty(rows.size)
        rate = None if rate_out is None else np.empty(rows.size)
        try:
            result = handoff(part, options, errors=errors, parallel=parallel, num_threads=num_threads,
                              with_missing=with_missing, bytes_out=moved, rate_out=rate)
        except InputError as error:
            if error.position is None:
                raise
            failed.append(error.relocated(error.where, int(rows[error.position]), position=int(rows[error.position])))
            continue
        delays[rows] = result.delays
        if missing is not None:
            missing[rows] = result.missing
        if bytes_out is not None:
            bytes_out[rows] = moved
        if rate_out is not None:
            rate_out[rows] = rate
    if failed:
        raise _first_of(failed)
    return _Result(delays, missing, False)


def _first_of(errors: list[InputError]) -> InputError:
    """Groups of rows' errors as one call's: the first input at fault at its first row, rows counted over all."""
    counts = dict(sum((Counter({e.argument: e.n_invalid or 1} | e.counts) for e in errors), Counter()))
    first = min(errors, key=lambda e: ((*ARGUMENTS, e.argument).index(e.argument), e.position))
    return first.relocated(first.where, first.row, n_invalid=first.n_invalid and counts[first.argument], counts=counts)


def checked(name: str, value: Any) -> Any:
    """One input coerced and checked by its rule in the table, as the kernel checks it (for the entry
    points that run a kernel of their own: the replay): its values (a scalar, or an array), or the
    :class:`InputError` that :func:`handoff_delay_ms` would raise for it.

    >>> checked("layer_group", 2.0)
    np.float64(2.0)
    >>> checked("block_size", [16, 1.5])
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: block_size: 1 invalid row; first at row 1: 1.5 (not a whole number). Fix: block sizes are whole numbers of tokens from 1 to 2**53 (0 or NaN: none), or pass errors='coerce' to get NaN for those rows.
    """
    arg = coerce(name, value)
    n = len(arg.value) if arg.is_array else 1
    if _invalid_rows(arg, n).any():
        raise _diagnose([arg], n)
    return arg.kernel_values()


@functools.cache
def _default_args() -> tuple[Arg, ...]:
    """Each per-row input's argument when it is not given (its kernel default), in the kernel's order."""
    return tuple(coerce(e.name, e.kernel_default if e.default is None or e.required else e.default)
                 for e in ROW_INPUTS)


#: Each per-row input's public default, in the kernel's order.
_DEFAULTS = tuple(e.default for e in ROW_INPUTS)


def _any_destination_missing(mode: Arg) -> bool:
    """Whether any row's mode is destination_missing (label codes: only when some label is)."""
    if mode.masks is not None and not mode.masks[0]:
        return False
    values = mode.kernel_values()
    return bool(values == 1) if not mode.is_array else bool(np.any(values == 1))


def destination_missing_tokens(
    num_input_tokens: ArrayLike, cached_tokens: ArrayLike, block_size: int | ArrayLike
) -> np.int64 | NDArray[np.int64]:
    """Tokens charged in destination_missing mode: fresh blocks times the block size.

    The decode worker allocates ``ceil(num_input_tokens / block_size)`` blocks, of which
    ``floor(cached_tokens / block_size)`` are already cached, at most the prompt's full
    blocks (only a full block carries a hash upstream, so a partial last block always
    moves); the rest are transferred whole. So a partial last block counts as a full block
    (the result can exceed the prompt) and a full hit on a prompt of whole blocks charges
    0 tokens. Inputs broadcast.

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
    numpy.int64 or numpy.ndarray
        int64 token counts: a scalar for scalar inputs, else broadcast to the inputs'
        common length (1-D).

    Examples
    --------
    >>> import perfmodel
    >>> perfmodel.destination_missing_tokens([100, 100, 128, 0, 100], [0, 64, 128, 0, 500], 64)
    array([128,  64,   0,   0,  64])
    """
    scalar = all(np.ndim(v) == 0 for v in (num_input_tokens, cached_tokens, block_size))
    given = {"num_input_tokens": num_input_tokens, "cached_tokens": cached_tokens, "block_size": block_size}
    one_index(given)
    counts = [whole_numbers(name, given[name], smallest, coerce_hint="") for name, smallest in zip(given, (0, 0, 1))]
    try:
        tokens, cached, block = np.broadcast_arrays(*counts)
    except ValueError:
        raise InputError("inputs", f"lengths {[len(c) for c in counts]} do not broadcast",
                         "pass arrays of one common length, or scalars") from None
    blocks = -(-tokens // block)
    fresh = blocks - np.minimum(cached // block, tokens // block)  # only full blocks can be hits (upstream)
    too_large = fresh > np.iinfo(np.int64).max // block  # fresh * block would wrap around
    if too_large.any():
        position = int(np.argmax(too_large.reshape(-1)))
        raise InputError("destination_missing_tokens", "the block-rounded token count exceeds the 64-bit integer "
                         f"range (first at position {position}: {int(tokens.reshape(-1)[position])} tokens, "
                         f"block size {int(block.reshape(-1)[position])})", "pass realistic token counts")
    charged = (fresh * block).astype(np.int64, copy=False)
    return charged[0] if scalar else charged
