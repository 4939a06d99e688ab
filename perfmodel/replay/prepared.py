"""A trace prepared for replay, once: checked, its block hashes remapped to dense ids, its per-request
values read (a value, an array or a column of the trace), shared read-only by every configuration of a
replay grid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numba
import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import InputError, check_whole, not_a_number, shown
from ..handoff import checked
from ..inputs import coerce as _coerce
from ..inputs import resolve as _resolve
from ..inputs.coerce import aligned, non_numeric_kind, whole_numbers
from ..inputs.table import INPUTS, UNCOUNTED_LAYERS, group_beyond_layers, layerwise_given
from ..inputs.words import count
from .traces import HASH_TYPE, MOONCAKE_BLOCK_TOKENS, null_hash_rows, pc_fill_empty

__all__ = ["PreparedTrace", "prepare_trace", "ranked_ids"]

T = TypeVar("T")


@dataclass(frozen=True)
class PreparedTrace:
    """A trace checked and turned into the replay kernel's arrays, once (shared read-only by every
    configuration of a :func:`replay_grid`).

    Parameters
    ----------
    trace : pandas.DataFrame
        The trace as given (read only).
    tokens : numpy.ndarray
        Each request's prompt tokens (int64).
    ready_ms : numpy.ndarray
        When each request's prefill completes, ms (float64).
    blocks, offsets : numpy.ndarray
        The requests' block ids, dense, and where each request's ids start (CSR).
    n_unique : int
        How many distinct blocks the trace holds.
    hash_block_tokens : int
        Tokens per block of the trace's hashes.
    arrival_ms : numpy.ndarray or None
        Each request's arrival, ms (float64), when ready times were given apart from the arrivals (measured
        prefill ends: a prefill must fit between the two); None when the arrivals are the ready times.

    Examples
    --------
    >>> from perfmodel import synthetic_trace
    >>> from perfmodel.replay.prepared import prepare_trace
    >>> prepared = prepare_trace(synthetic_trace(4, rate_per_s=1.0))
    >>> prepared.tokens.shape, prepared.tokens.dtype.name
    ((4,), 'int64')
    """

    trace: pd.DataFrame
    tokens: np.ndarray  # int64
    ready_ms: np.ndarray  # float64: when each prefill completes
    blocks: np.ndarray  # dense block ids
    offsets: np.ndarray
    n_unique: int
    hash_block_tokens: int
    arrival_ms: np.ndarray | None = None  # float64: set when the ready times are not the arrivals

    @property
    def has_hashes(self) -> bool:
        return "hash_ids" in self.trace

    def relative_ready(self) -> tuple[np.ndarray, float]:
        """(each ready time from the earliest, the earliest): a replay works in these, so that every
        duration it reports is a difference of relative times (at Unix-epoch milliseconds, about 1.7e12, one
        ulp is 2.4e-4 ms: a delay taken as end minus arrival there is rounded to it). Times from 0 are kept
        as they are (the same array)."""
        base = float(self.ready_ms.min()) if self.ready_ms.size else 0.0
        if base == 0.0:
            return self.ready_ms, 0.0
        return self.ready_ms - base, base  # (exact for times within a factor 2 of one another: Sterbenz)


def prepare_trace(trace: pd.DataFrame, *, ready_ms: Any = None) -> PreparedTrace:
    """Check a trace and remap its block hashes to dense ids: the work every replay of it shares.

    Parameters
    ----------
    trace : pandas.DataFrame
        A trace as :func:`perfmodel.read_trace` reads it.
    ready_ms : array-like or str, optional
        When each handoff may start (a column name or values); default: the trace's ``ready_ms`` column
        when it has one (measured prefill ends, as :func:`perfmodel.read_trace` keeps them), else arrivals.

    Returns
    -------
    PreparedTrace
        The checked trace with its dense block ids, for replays to share.

    Examples
    --------
    >>> from perfmodel.replay import prepare_trace
    >>> from perfmodel import synthetic_trace
    >>> prepare_trace(synthetic_trace(100, 10, seed=0)).tokens.shape
    (100,)
    """
    if not isinstance(trace, pd.DataFrame):
        raise InputError(
            "trace",
            f"expected a pandas DataFrame, got {type(trace).__name__}",
            "read it with perfmodel.read_trace or make one with perfmodel.synthetic_trace",
        )
    hash_block_tokens = check_whole(
        "trace.attrs['hash_block_tokens']", trace.attrs.get("hash_block_tokens", MOONCAKE_BLOCK_TOKENS), smallest=1
    )
    for column in ("arrival_ms", "num_input_tokens"):
        if column not in trace:
            raise InputError(
                "trace",
                f"has no {column!r} column (it has {list(trace.columns)})",
                "read it with perfmodel.read_trace, or name the columns arrival_ms and num_input_tokens",
            )
    try:
        tokens = np.ascontiguousarray(whole_numbers("num_input_tokens", trace["num_input_tokens"]))
        request_values(trace, "num_input_tokens", tokens)
    except InputError as error:  # name the request by its row label
        row = trace.index[error.row] if isinstance(error.row, (int, np.integer)) else error.row
        raise error.relocated("trace column 'num_input_tokens'", row, coerce_hint="") from None
    arrival = _times(
        trace, "arrival_ms", "arrival_ms", "trace column 'arrival_ms'",
        "read the trace with perfmodel.read_trace, or give arrival times as numbers of ms",
        "drop or repair the rows without an arrival time",
    )  # fmt: skip
    ready = arrival
    ready_ms = _coerce.edge_values({"ready_ms": ready_ms})["ready_ms"]
    if ready_ms is None and "ready_ms" in trace.columns:  # (measured prefill ends, as read_trace keeps them)
        ready_ms = "ready_ms"
    if ready_ms is not None:
        ready = _times(
            trace, "ready_ms", ready_ms, "ready_ms", "pass a trace column name, an array or a number of ms",
            "pass one finite time in ms per request (default: the trace's ready_ms column, else the arrival times)",
        )  # fmt: skip
        _ready_after_arrival(trace, ready, arrival)
    blocks, offsets, n_unique = _flat_hashes(trace)
    _ids_within_prompts(trace, tokens, offsets, hash_block_tokens)
    if n_unique >= 2**31:  # the caches keep block ids in 32 bits
        raise InputError(
            "trace column 'hash_ids'",
            f"{n_unique:,} distinct block ids (the replay handles up to {2**31 - 1:,})",
            "replay the trace in parts, e.g. by time window",
        )
    for array in (tokens, ready, blocks, offsets, arrival):
        array.flags.writeable = False  # shared by threads: nobody writes
    apart = ready is not arrival and not np.array_equal(ready, arrival)  # (the arrivals again: not measured ends)
    return PreparedTrace(trace, tokens, ready, blocks, offsets, n_unique, hash_block_tokens, arrival if apart else None)


def link_column(links: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """A replay's ``link`` column: each request's link, missing (not -1, which looks like an index) where none
    was used.

    >>> link_column(np.array([0, -1, 1])).tolist()
    [0, <NA>, 1]
    """
    return pd.arrays.IntegerArray(links, links < 0)


def byte_column(nbytes: np.ndarray, whole: bool | None = None) -> np.ndarray:
    """A replay's column of byte counts: whole numbers (int64) where they are (``whole``: known from the bytes
    per token; None: read off the values) and below 2**53, where a float holds every integer; else as they are.

    >>> byte_column(np.array([1.0, 2.0])).dtype.name, byte_column(np.array([1.5, 2.0])).dtype.name
    ('int64', 'float64')
    """
    whole = bool(np.all(nbytes == np.floor(nbytes))) if whole is None else whole
    return nbytes.astype(np.int64) if whole and bool((nbytes < 2.0**53).all()) else nbytes


def _ids_within_prompts(trace: pd.DataFrame, tokens: np.ndarray, offsets: np.ndarray, hash_block_tokens: int) -> None:
    """Refuse a request with more hash ids than its prompt has blocks of ``hash_block_tokens`` tokens (the last
    one partial): its ids stand for smaller blocks (an engine's pages), and each read as ``hash_block_tokens``
    tokens would make every shared prefix far longer than it is. Fewer ids (a prompt hashed in part) are kept."""
    ids = np.diff(offsets)
    most = -(-tokens // hash_block_tokens)
    over = ids > most
    if over.any():
        i = int(np.argmax(over))
        raise InputError(
            "trace column 'hash_ids'",
            f"request {trace.index[i]!r} has {ids[i]:,} hash ids for a prompt of {tokens[i]:,} tokens: at "
            f"{hash_block_tokens:,} tokens per id (the trace's hash_block_tokens) it has at most {most[i]:,} "
            f"({count(int(over.sum()), 'request')} with too many ids)",
            "give the tokens each id covers, hash_block_tokens=N: where the trace is read (read_trace), or in "
            "trace.attrs of a DataFrame made by hand",
        )


def _flat_hashes(trace: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense block ids (0..U-1), offsets, U: one vectorized pass over the hash_ids column."""
    if "hash_ids" not in trace:
        return np.empty(0, np.int64), np.zeros(len(trace) + 1, np.int64), 0
    column = trace["hash_ids"]
    try:  # Arrow-backed (as read_trace makes it): zero-copy through the Arrow protocol
        lists = pa.array(column) if isinstance(column.dtype, pd.ArrowDtype) else pa.array(column.to_list())
        if isinstance(lists.type, (pa.ListType, pa.LargeListType)) and pa.types.is_floating(lists.type.value_type):
            _whole_block_ids(trace, lists)  # (a cast would truncate 1.5 and 1.7 to one id: invented cache hits)
        lists = lists.cast(HASH_TYPE)
    except (pa.ArrowException, TypeError, OverflowError):
        raise _first_bad_cell(column) from None
    if isinstance(lists, pa.ChunkedArray):  # a column read in several blocks
        lists = lists.combine_chunks()
    if lists.null_count:
        lists = pc_fill_empty(lists)
    null_rows = null_hash_rows(lists)
    if null_rows.size:
        raise InputError(
            "trace column 'hash_ids'",
            f"{count(null_rows.size, 'request')} {'has' if null_rows.size == 1 else 'have'} a null block id, first at row "
            f"{trace.index[null_rows[0]]!r}",
            "drop those requests or repair their hash_ids (a block whose identity is unknown cannot be a cache hit)",
        )
    lists = lists.cast(pa.large_list(pa.int64()))
    offsets = lists.offsets.to_numpy().astype(np.int64)
    values = lists.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    span = int(values.max()) - int(values.min()) if values.size else -1
    if 0 <= span < max(64 * values.size, 1 << 24):
        # integer ids in a range at most 64x their count (Mooncake's are 0, 1, 2...; a synthetic trace's
        # leave gaps): ranked through a bitmap of the range (at most 16 bytes per id), 4-9x faster than pandas'
        # hashing (11.4M synthetic ids: 0.08-0.11 s on two threads, 0.16 s on one, against 0.7-0.9 s)
        from ..options import option

        threads = 2 if values.size >= option("parallel_min_rows") and numba.config.NUMBA_NUM_THREADS > 1 else 1
        dense, unique = ranked_ids(values.astype(np.int64, copy=False), threads)  # (two threads: most of the gain)
        return dense, offsets, unique
    dense, uniques = pd.factorize(values)  # hash-based, O(n): ids need only be dense, not sorted
    return dense.astype(np.int64, copy=False), offsets, int(uniques.size)


def _first_bad_cell(column: pd.Series) -> InputError:
    """The error of the first request whose hash_ids the replay cannot take, naming its row and what it holds
    (ids beyond 64-bit integers are refused, never wrapped: -1 and 2**64 - 1 would become one block)."""
    from .traces import id_cell

    for label, value in column.items():
        if value is None:  # (no block ids: taken as none)
            continue
        try:
            if isinstance(value, str):  # (text such as "[1, 2]" is how a CSV file holds lists: read_trace parses it)
                raise ValueError(
                    f"holds {value!r}, not a list of block ids (text: read the file with perfmodel.read_trace)"
                )
            id_cell(value.tolist() if isinstance(value, np.ndarray) else value)
        except ValueError as error:
            return InputError(
                f"trace column 'hash_ids', row {label!r}",
                str(error),
                "give each request a list of whole block ids within 64-bit integers (one per block; [] for none)",
            )
    return InputError(
        "trace column 'hash_ids'",
        "does not hold lists of integers",
        "give each request a list of whole block ids (one per block, within 64-bit integers)",
    )


#: About how long the replay's kernels take to compile on a cold cache, on links (2 cores, measured).
FIRST_COMPILE_S = 10


def notice_first_compile(seconds: float = FIRST_COMPILE_S) -> None:
    """On a terminal, say once that the replay's event loop compiles (when the cache is cold), in about
    ``seconds``. Every replay runs the one loop (:func:`perfmodel.kernels.serving.serve_pass`): the replay of
    handoffs and the TTFT replay, on links or a cluster."""
    from .. import _compat
    from ..kernels import serving

    if _compat.uncompiled(serving.serve_pass):
        _compat.notice_first_compile("replay", serving.serve_pass, seconds)


def _whole_block_ids(trace: pd.DataFrame, lists: Any) -> None:
    """Refuse block ids given as floats that are not whole numbers (or not finite), naming the first request."""
    import pyarrow.compute as pc

    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    flat = pc.list_flatten(lists)
    values = flat.to_numpy(zero_copy_only=False).astype(np.float64)
    known = pc.is_valid(flat).to_numpy(zero_copy_only=False)  # (nulls are refused as unknown blocks later)
    with np.errstate(invalid="ignore"):
        bad = known & ~((np.floor(values) == values) & (np.abs(values) < 2.0**63))
    if bad.any():
        first = int(np.argmax(bad))
        row = int(pc.list_parent_indices(lists).to_numpy()[first])
        raise InputError(
            "trace column 'hash_ids'",
            f"{count(int(bad.sum()), 'block id')} {'is' if bad.sum() == 1 else 'are'} not whole numbers, first at "
            f"row {trace.index[row]!r}: {values[first]!r}",
            "give whole block ids (a fractional id would be truncated into another block's, inventing cache hits)",
        )


def ranked_ids(values: np.ndarray, threads: int = 1) -> tuple[np.ndarray, int]:
    """The dense ids of integer ``values`` (their ranks among the distinct values) and how many there
    are, through a bitmap of their range, its two passes shared by ``threads`` threads.

    >>> ranked_ids(np.array([7, 3, 7, 64, 3]))
    (array([1, 0, 1, 2, 0]), 3)
    """
    from ..kernels import replay as _replay
    from ..kernels.threads import in_shares

    notice_first_compile()
    lowest = values.min() if values.size else 0
    marks = np.zeros((threads, ((values.max() - lowest) >> 6) + 1 if values.size else 0), dtype=np.uint64)
    in_shares(values.size, threads, lambda k, i, j: _replay.mark_ids(values[i:j], lowest, marks[k]))
    table, unique = _replay.rank_table(marks)
    dense = np.empty(values.size, dtype=np.int64)
    in_shares(values.size, threads, lambda _k, i, j: _replay.rank_ids(values[i:j], lowest, table, dense[i:j]))
    return dense, int(unique)


def request_values(trace: pd.DataFrame, name: str, value: Any) -> np.ndarray:
    """A value, array or trace column name as one float64 per request, checked by the table's rule
    (the first bad request named by its row label)."""
    values = _per_request(trace, name, value)
    try:
        checked(name, values)
    except InputError as error:
        if error.position is None:
            raise
        raise error.relocated(name, trace.index[error.position], coerce_hint="") from None
    return values


def on_rows(trace: pd.DataFrame, name: str, value: Any) -> Any:
    """``value`` (of the input ``name``) as the trace's rows take it: a Series given as a value lands on the rows
    of its labels (:func:`perfmodel.inputs.coerce.aligned`); anything else as it is."""
    return aligned(trace.index, name, value, "trace") if isinstance(value, pd.Series) else value


#: The inputs a replay takes one value per request of (a value, an array, a Series or a trace column).
PER_REQUEST = (
    "kv_bytes_per_token",
    "model",
    "state_bytes",
    "prefill_ms",
    "prefill_tokens_per_s",
    "num_layers",
    "blocks_per_message",
    "decode_step_ms",
)


def no_series_axes(where: str, axes: dict[str, Any]) -> None:
    """Refuse a Series for a per-request input (:data:`PER_REQUEST`) among a replay grid's ``axes``: the grid would
    read it as a list of configurations, one value for every request each, where a replay reads it as one value
    per request."""
    for name, value in axes.items():
        if isinstance(value, pd.Series) and name in PER_REQUEST:
            raise InputError(
                f"{where}: {name}",
                f"a Series, which a grid reads as {count(len(value), 'configuration')} (one value for every request "
                "each), not one value per request",
                "give the axis a list of values, or for one value per request a trace column's name",
            )


def _times(trace: pd.DataFrame, name: str, value: Any, where: str, unreadable: str, missing: str) -> np.ndarray:
    """One finite time (ms) per request: ``value`` of the input ``name`` (a trace column name, an array or a
    number), refused at ``where`` when it is not numbers (fix: ``unreadable``) or not finite (fix: ``missing``)."""
    try:
        times = np.ascontiguousarray(_per_request(trace, name, value, unreadable))
    except (TypeError, ValueError) as error:
        if isinstance(error, InputError):
            raise
        raise InputError(where, f"is not one time in ms per request ({error})", unreadable) from None
    if not np.isfinite(times).all():
        first = int(np.argmax(~np.isfinite(times)))
        raise InputError(
            where,
            f"{name.removesuffix('_ms')} times must be finite, got {times[first]!r} at row {trace.index[first]!r}",
            missing,
        )
    return times


def _ready_after_arrival(trace: pd.DataFrame, ready: np.ndarray, arrival: np.ndarray) -> None:
    """Refuse ready times before their requests' arrivals (prefill times alone, given where the times prefills
    end go, would replay every handoff before its request arrived)."""
    early = ready < arrival
    if early.any():
        first = int(np.argmax(early))
        raise InputError(
            "ready_ms",
            f"a handoff is ready before its request arrives: {ready[first]!r} ms at row {trace.index[first]!r}, its "
            f"arrival {float(trace['arrival_ms'].iloc[first])!r} ms ({count(int(early.sum()), 'such row')})",
            "ready_ms is when each prefill ends, on the trace's clock: pass arrival_ms plus the prefill time",
        )


def trace_column(trace: pd.DataFrame, column: str) -> pd.Series:
    """The trace's column ``column``, refused where the trace has several of that name (which one is it?)."""
    found = trace[column]
    if isinstance(found, pd.DataFrame):
        raise InputError(
            f"trace column {column!r}",
            f"the trace has {found.shape[1]} columns of that name (which one is meant?)",
            "keep one column of each name (e.g. trace.loc[:, ~trace.columns.duplicated()])",
        )
    return found


def as_floats(where: str, value: Any, fix: str = "pass real numbers") -> np.ndarray:
    """A number, or a 1-D array or Series of numbers, as float64 (NaN for missing values); text that is no number,
    a complex number or a nested list is refused naming ``where`` and the first such value (and ``fix``)."""
    if np.ndim(value) > 1:
        raise InputError(where, f"has {np.ndim(value)} dimensions", "pass one value per request (a 1-D array)")
    try:
        if np.ndim(value):
            return np.asarray(pd.Series(value).to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        cells = pd.Series(value if np.ndim(value) else [value], dtype=object)
        numbers = pd.to_numeric(cells, errors="coerce")
        first = int(np.argmax(numbers.isna().to_numpy() & cells.notna().to_numpy()))
        at = (
            ""
            if not np.ndim(value)
            else f" at row {value.index[first]!r}"
            if isinstance(value, pd.Series)
            else (f" at position {first}")
        )
        raise InputError(where, f"holds {cells.iloc[first]!r}{at}: {not_a_number(cells.iloc[first])}", fix) from None


def _per_request(trace: pd.DataFrame, name: str, value: Any, fix: str = "pass real numbers") -> np.ndarray:
    """A value, array or trace column name as one float64 per request (text that is no number refused with
    ``fix``)."""
    where = name
    if isinstance(value, str):
        if value not in trace.columns:
            raise InputError(
                name,
                f"no trace column {value!r} (the trace has {list(trace.columns)})",
                f"pass {name} as a number, an array or a column name",
            )
        where, value = f"trace column {value!r}", trace_column(trace, value)
    value = on_rows(trace, name, value)
    _no_times(where, pd.Series(value) if np.ndim(value) == 1 else value)
    if (
        isinstance(value, (bool, np.bool_))
        or pd.api.types.is_bool_dtype(getattr(value, "dtype", None))
        or (np.ndim(value) and np.asarray(value).dtype.kind == "b")
    ):
        raise InputError(name, "got booleans where numbers were expected", f"pass {name} as numbers")
    values = as_floats(where, value, fix)
    return (
        np.broadcast_to(values, (len(trace),))
        if values.ndim == 0 or values.shape == (len(trace),)
        else _wrong_length(name, values, len(trace))
    )


def _no_times(where: str, value: Any) -> None:
    """Refuse durations and dates (one, or a Series of them) where ms go: their raw unit would be read as ms (1 ms
    of ``timedelta64[us]`` as 1000), a date's from its epoch."""
    kind = non_numeric_kind(value) if isinstance(value, (pd.Series, np.ndarray)) or np.ndim(value) == 0 else None
    duration, date = kind == "durations", kind == "dates"
    if duration or date:
        raise InputError(
            where,
            f"got {'durations' if duration else 'dates'} where ms as plain numbers were expected",
            "divide durations by pd.Timedelta(1, 'ms')"
            if duration
            else "give ms from one origin, the same for every "
            "time of the replay (arrival_ms, ready_ms): (times - origin) / pd.Timedelta(1, 'ms')",
        )


def _wrong_length(name: str, values: np.ndarray, n: int) -> np.ndarray:
    raise InputError(
        name, f"{count(values.size, 'value')} for {count(n, 'request')}", "pass one value per request, or one for all"
    )


def one_value(name: str, value: Any) -> Any:
    """A replay's one value of an input (checked by the table's rule); an array or a column is refused."""
    if isinstance(value, str) and INPUTS[name].kind not in ("code", "choice"):
        raise InputError(
            name,
            f"a replay takes one number, got the text {value!r} (not a trace column: {name} is one value per replay)",
            "pass a number, not text",
        )
    if np.ndim(value) != 0:
        raise InputError(
            name, f"a replay takes one value, got {shown(value)}", "pass one value (replay_grid compares several)"
        )
    return checked(name, value)


def per_request_given(value: Any) -> bool:
    """Whether ``value`` (of an input a replay takes per request) is given per request: an array, a list, a Series
    or a trace column's name."""
    return bool(np.ndim(value)) or isinstance(value, str)


def bytes_name(config: Any) -> str:
    """The name a replay's call gave its bytes per token: ``kv_bytes_per_token``, or its alias ``model``."""
    return "kv_bytes_per_token" if config.kv_bytes_per_token is not None else "model"


def terms_per_request(
    trace: pd.DataFrame,
    spec: Any,
    shape: dict[str, Any],
    state_bytes: Any,
    messages: tuple[str, Any] | None,
    name: str = "kv_bytes_per_token",
) -> tuple[np.ndarray, np.ndarray]:
    """(each request's row of the table, the table of byte and message terms: one row per distinct model or bytes
    value, and layer count when messages cost, columns as :class:`perfmodel.kernels.replay.Requests` documents).
    ``spec`` is one value or a trace column of values or model names, its bytes shaped by ``shape``
    (kv_cache_dtype, tp, decode_tp, scope); ``state_bytes`` (a value, array or column) replaces the models'
    state; ``messages``: the KV layout and layer count (one value, or one per request) when messages cost (else
    no messages); ``name``: the bytes' input as the call named it (:func:`bytes_name`)."""
    column = None
    n = len(trace)
    if isinstance(spec, str) and spec in trace.columns:
        column, spec = spec, trace[spec]
    where = f"trace column {column!r}" if column else name
    if np.ndim(spec) and not isinstance(spec, Mapping):
        if len(spec) != n:
            raise InputError(
                where,
                f"{count(len(spec), 'value')} for {count(n, 'request')}",
                "pass one number or model per request (or one for all)",
            )
        array = spec if isinstance(spec, (pd.Series, np.ndarray)) else np.asarray(spec, dtype=object)
        codes, distinct = _coerce.distinct(array)
        if (codes < 0).any():
            first = int(np.argmax(codes < 0))
            raise InputError(
                where,
                f"{count(int((codes < 0).sum()), 'request')} without bytes per token or a model, first at row "
                f"{trace.index[first]!r}",
                "pass one number or model per request (or one for all)",
            )
        model_of, values = np.ascontiguousarray(codes, dtype=np.int64), list(distinct)
    else:
        model_of, values = np.zeros(n, dtype=np.int64), [spec]
    layout, layers = messages if messages else ("", None)
    rows: list[tuple[Any, float | None]]
    if layers is not None and per_request_given(layers):  # a row per (model, layer count) the requests have
        layer_values, layer_of = np.unique(request_values(trace, "num_layers", layers), return_inverse=True)
        pairs, model_of = np.unique(model_of * len(layer_values) + layer_of.reshape(-1), return_inverse=True)
        rows = [(values[k // len(layer_values)], float(layer_values[k % len(layer_values)])) for k in pairs.tolist()]
        model_of = np.ascontiguousarray(model_of.reshape(-1), dtype=np.int64)
    else:
        rows = [(v, None if layers is None else float(one_value("num_layers", layers))) for v in values]
    try:
        terms = [_resolve.model_terms(v, **shape) for v, _ in rows]
        posted = [_resolve.message_terms(v, layout, k) if messages else (0.0,) * 4 for v, k in rows]
    except InputError:
        raise
    except ValueError as error:  # an unknown model: say where it came from
        problem, _, fix = str(error).partition(". Fix: ")
        raise InputError(where, problem, fix.rstrip(".") or "pass known models") from None
    # a term a model does not have (None) is 0; bytes per token stay as given (NaN is refused below)
    table = np.array(
        [
            [float(row[0])] + [0.0 if v is None else float(v) for v in (*row[1:], *more)]
            for row, more in zip(terms, posted)
        ],
        dtype=np.float64,
    ).reshape(-1, 10)
    if state_bytes is not None:
        state = request_values(trace, "state_bytes", state_bytes)
        table, model_of = table[model_of], np.arange(n, dtype=np.int64)
        table[:, 5] = state
    finite = (table >= 0) & (table < np.inf)
    for name, ok in ((where, finite[:, 0]), ("state_bytes", finite[:, 5])):
        bad = ~ok[model_of]
        if bad.any():
            row = int(np.argmax(bad))
            raise InputError(
                name,
                f"{count(int(bad.sum()), 'request')} without a finite number of bytes >= 0, first at row "
                f"{trace.index[row]!r}: {table[model_of[row], 0 if name == where else 5]!r}",
                "pass one number or model per request (or one for all)"
                if name == where
                else "pass state bytes >= 0 (a value, an array or a trace column)",
            )
    return model_of, np.ascontiguousarray(table)


def layerwise_lead(
    trace: pd.DataFrame, tokens: np.ndarray, bytes_spec: Any, c: Any, per_message_ms: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per request: how long before the prefill ends its transfer may start, and the share of the
    transfer left after the prefill ends at the earliest (layer-wise streaming, as the configuration
    ``c`` asks; else 0 and 1)."""
    n = len(trace)
    layerwise_given({**vars(c), "per_message_ms": per_message_ms}, c.overlap, c.kv_layout)
    num_layers = c.num_layers
    if c.overlap == "none":
        return np.zeros(n), np.ones(n)
    compute = prefill_durations(trace, tokens, c)
    if num_layers is None:
        spec = trace[bytes_spec] if isinstance(bytes_spec, str) and bytes_spec in trace.columns else bytes_spec
        if not isinstance(spec, (str, dict)) and not (np.ndim(spec) and _resolve.holds_labels(spec)):
            raise InputError(
                "num_layers",
                "is required for overlap='layerwise' when kv_bytes_per_token is a number",
                "pass num_layers, or a model name or config as kv_bytes_per_token",
            )
        num_layers = _resolve.num_layers(spec)
    layers = request_values(trace, "num_layers", num_layers)
    group = float(one_value("layer_group", c.layer_group))
    minimum = float(one_value("layerwise_min_tokens", c.layerwise_min_tokens))
    beyond = group_beyond_layers(group, layers)
    if beyond.any():
        first = int(np.argmax(beyond))
        raise InputError(
            "layer_group",
            f"more layers per group ({group:g}) than request {trace.index[first]!r} has ({layers[first]:g})",
            "pass a layer_group between 1 and num_layers",
        )
    streamed = (tokens >= minimum) & (layers > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lead = np.where(streamed, compute * (layers - group) / layers, 0.0)
        return lead, np.where(streamed, group / layers, 1.0)


def prefill_durations(trace: pd.DataFrame, tokens: np.ndarray, c: Any) -> np.ndarray:
    """Each request's prefill time (ms) for layer-wise streaming: the configuration ``c``'s ``prefill_ms`` (a
    value, an array or a trace column), else its tokens over ``prefill_tokens_per_s``; a time not finite refused,
    naming the first request (a replay must know when each transfer may start)."""
    given = "prefill_ms" if c.prefill_ms is not None else "prefill_tokens_per_s"
    compute = (
        request_values(trace, "prefill_ms", c.prefill_ms)
        if c.prefill_ms is not None
        else tokens / request_values(trace, "prefill_tokens_per_s", c.prefill_tokens_per_s) * 1000.0
    )
    unknown = ~(compute < np.inf)
    if unknown.any():
        first = int(np.argmax(unknown))
        raise InputError(
            given,
            f"{count(int(unknown.sum()), 'request')} without a known prefill time, first at row "
            f"{trace.index[first]!r}: a replay must know when each transfer may start",
            "give every request a prefill time (a value, an array or a trace column)",
        )
    return compute


#: How far (ms) a measured ready time may lie before its arrival plus its prefill and still count as that sum:
#: a microsecond, well above float64's rounding of times on an epoch clock in ms (~2.4e-4 ms at 1.7e12 ms),
#: where a logged ready time of arrival + prefill need not equal the sum computed again.
READY_TOLERANCE_MS = 1e-3


def prefills_fit(prepared: PreparedTrace, c: Any) -> None:
    """Refuse layer-wise streaming (the configuration ``c``) over measured prefill ends that its prefill times do
    not fit: a prefill ends at its ``ready_ms`` and runs after its request arrives, so ``ready_ms - prefill`` must
    not be before ``arrival_ms`` (else its first layers would go before the request arrived; within
    :data:`READY_TOLERANCE_MS`, a clock's rounding). Every request is
    checked, streamed or not; nothing to check when the arrivals are the ready times (the contract's default: each
    arrival is its prefill's end) or when the streaming options are incomplete (refused where they are read)."""
    if (
        c.overlap != "layerwise"
        or prepared.arrival_ms is None
        or (c.prefill_ms is None) == (c.prefill_tokens_per_s is None)
    ):
        return
    trace, ready, arrival = prepared.trace, prepared.ready_ms, prepared.arrival_ms
    compute = prefill_durations(trace, prepared.tokens, c)
    early = ready < arrival + compute - READY_TOLERANCE_MS
    if early.any():
        first = int(np.argmax(early))
        raise InputError(
            f"ready_ms, {'prefill_ms' if c.prefill_ms is not None else 'prefill_tokens_per_s'}",
            f"a prefill of {float(compute[first])!r} ms ending at ready_ms {float(ready[first])!r} would have "
            f"started at {float(ready[first] - compute[first])!r} ms, before its request arrived at "
            f"{float(arrival[first])!r} ms, at row {trace.index[first]!r} ({count(int(early.sum()), 'such row')}): "
            "layer-wise streaming would send its KV before the request arrived",
            "a prefill runs between its arrival and its ready_ms (its end): pass prefill times of at most "
            "ready_ms - arrival_ms, or ready_ms='arrival_ms' to take each arrival as its prefill's end",
        )


def in_configuration(config: Mapping[str, Any], run: Callable[[], T]) -> T:
    """``run()``, an :class:`~perfmodel.errors.InputError` it raises naming the grid's configuration ``config``
    (its inputs given, as the grid's table shows them): one grid runs many, and the error is one of them's.

    >>> in_configuration({"link": "ib-ndr", "links": 2}, lambda: 1)
    1
    """
    try:
        return run()
    except InputError as error:
        given = ", ".join(f"{k}={axis_label(k, v)!r}" for k, v in config.items() if v is not None)
        raise error.relocated(f"{error.where} (in the grid's configuration {given})", error.row) from None


def axis_label(name: str, value: Any) -> Any:
    """A grid's value of the axis ``name`` as its tables show it: a label axis's as text (a link given as a
    number among names, ``25.0``, is ``"25.0"``; a code by its name, ``1`` as ``"destination_missing"``), any
    other as it is (objects of their own by their name); the summary and the per-request rows alike.

    >>> axis_label("mode", 1), axis_label("link", 25.0), axis_label("decode_workers", 4)
    ('destination_missing', '25.0', 4)
    """
    from ..inputs.table import LABEL_AXES

    label = _resolve.label_of(_resolve.named_code(name, value))
    return str(label) if name in LABEL_AXES else label


def layers_where_counted(configs: list[dict[str, Any]], check: Any, sample: Any, whole: Any) -> list[dict[str, Any]]:
    """A grid's distinct configurations, each checked by ``check(sample, config)`` (a replay of two requests),
    with a ``num_layers`` set to None in those where it counts nothing (no cost per message, streaming off)
    while it counts in another: a grid's layer count applies where it counts, as a sweep's does. Refused (as a
    single replay refuses it) where it counts in none. A configuration that is another's once its inputs that do
    not apply are None is kept once (its first place): a grid replays no configuration twice.

    A configuration the sample refuses is checked again on the ``whole`` trace, so that its error counts and
    names the trace's rows, not the sample's (and a refusal that was the sample's alone is not one); the error
    names the configuration (:func:`in_configuration`).

    >>> layers_where_counted([{"num_layers": 32}], lambda trace, config: None, None, None)
    [{'num_layers': 32}]
    """

    def uncounted(error: InputError) -> bool:
        return error.where == "num_layers" and error.problem == UNCOUNTED_LAYERS

    def verified(config: dict[str, Any]) -> None:
        try:
            check(sample, config)
        except InputError as error:
            if uncounted(error):
                raise
            in_configuration(config, lambda: check(whole, config))

    kept, refused, counted = [], None, False
    for config in configs:
        try:
            verified(config)
            counted = counted or config.get("num_layers") is not None
        except InputError as error:
            if not uncounted(error):
                raise
            refused, config = error, {**config, "num_layers": None}
            verified(config)
        kept.append(config)
    if refused is not None and not counted:
        raise refused
    distinct: dict[tuple[Any, ...], dict[str, Any]] = {}
    for config in kept:  # (values by identity: the grid's own objects, or None where they do not apply)
        distinct.setdefault(tuple((k, id(v)) for k, v in config.items()), config)
    return list(distinct.values())
