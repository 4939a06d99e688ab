"""pandas facade: DataFrame columns in, an index-aligned ``handoff_delay_ms`` Series out.

No arithmetic here: each argument is looked up (a column, or a value), names are
resolved (models, links), and the numpy-level :func:`perfmodel.handoff_delay_ms` does
the one kernel pass. Errors from that layer are re-reported with the column name and
the row *label*.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from ._codes import TransferMode, WorkerType
from .errors import InputError
from ._coerce import check_errors
from .handoff import ARGUMENTS, Errors, Options, _handoff

__all__ = ["RESULT_NAME", "handoff_delays"]

#: Name of the result Series and of the column the accessor adds.
RESULT_NAME = "handoff_delay_ms"

try:
    from pandas.core.internals import SingleBlockManager as _SingleBlockManager
except ImportError:  # (see _result_series)
    _SingleBlockManager = None

# Arguments whose default column may be absent, and the value used then (upstream's defaults).
_FALLBACKS: dict[str, Any] = {
    "worker_type": WorkerType.PREFILL,
    "completed": True,
    "mode": TransferMode.FULL_PROMPT,
    "destination_missing_tokens": None,
}
_LABELS = {"worker_type": WorkerType, "mode": TransferMode}
_NUMBERS = frozenset({bool, int, float})  # Python numbers are values, never column labels


def _aligned(df: pd.DataFrame, argument: str, series: pd.Series) -> pd.Series:
    """A Series given as a value, aligned on the frame's index (never used by position)."""
    if series.index.equals(df.index):
        return series
    if series.index.is_unique and df.index.is_unique and len(series) == len(df) and series.index.isin(df.index).all():
        return series.reindex(df.index)  # the same rows in another order
    raise InputError(argument, "a Series whose index differs from the frame's (its values would land on other rows)",
                     "pass a Series with the frame's index, a column name, or .to_numpy() to align by position")


def _column(df: pd.DataFrame, label: Hashable) -> Any:
    """The values of the column ``label`` (a numpy array or pandas extension array, never copied).

    pandas' own ``DataFrame._get_column_array`` (pandas >= 1.3) where the label names one column:
    ``df[label]`` builds a Series that the facade would unwrap at once, ~10 us a column, ~30 us
    right after a kernel pass has flushed the caches (five columns were half the facade's own
    cost at 1M rows). Otherwise (duplicate labels, a pandas without it) ``df[label]`` itself.
    """
    position = df.columns.get_loc(label)
    getter = getattr(df, "_get_column_array", None)
    if getter is not None and isinstance(position, (int, np.integer)):
        return getter(int(position))
    return df[label]


def _lookup(df: pd.DataFrame, argument: str, spec: Any) -> tuple[Any, Hashable | None]:
    """The value of one argument, and the column it came from (None for a value: None itself means
    not given, never a column labelled None)."""
    kind = type(spec)
    if spec is None or kind in _NUMBERS:
        return spec, None
    if (kind is str or isinstance(spec, Hashable) and not isinstance(spec, (bool, int, float))) and spec in df.columns:
        return _column(df, spec), spec  # (str first: an abstract-class check costs ~10 us after a kernel pass)
    if isinstance(spec, pd.Series):
        return _aligned(df, argument, spec), None
    if not isinstance(spec, str):
        return spec, None
    if spec == argument and argument in _FALLBACKS:  # the default column name, absent: upstream's default
        return _FALLBACKS[argument], None
    if spec == argument:  # a required input, neither given nor a column of the frame
        what = {"num_input_tokens": "prompt tokens", "kv_transfer_bandwidth": "GB/s, a link name or a Link",
                "kv_bytes_per_token": "bytes, a model name or a config"}.get(argument, "a value")
        raise InputError(argument, f"was not given, and the frame has no column {argument!r} "
                         f"(it has {list(df.columns)})", f"pass {argument}=<{what}, or a column name>")
    if argument in _LABELS and spec.strip().lower() in {m.name.lower() for m in _LABELS[argument]}:
        return spec, None  # a label such as worker_type="decode"
    if argument in ("kv_bytes_per_token", "kv_transfer_bandwidth"):
        return spec, None  # a model or link name, resolved (or rejected) below
    raise InputError(
        argument, f"no column {spec!r}; the frame has {list(df.columns)}",
        f"pass {argument}=<one of those columns> or a value",
    )


def handoff_delays(
    df: pd.DataFrame,
    *,
    num_input_tokens: Any = "num_input_tokens",
    kv_transfer_bandwidth: Any = "kv_transfer_bandwidth",
    kv_bytes_per_token: Any = "kv_bytes_per_token",
    worker_type: Any = "worker_type",
    completed: Any = "completed",
    mode: Any = "mode",
    destination_missing_tokens: Any = "destination_missing_tokens",
    state_bytes: Any = None,
    latency_ms: Any = 0.0,
    fallback_delay_ms: Any = None,
    per_block_ms: Any = 0.0,
    block_size: Any = None,
    overlap: str = "none",
    prefill_ms: Any = None,
    prefill_tokens_per_s: Any = None,
    num_layers: Any = None,
    layer_group: Any = 1,
    layerwise_min_tokens: Any = 0,
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    scope: str = "rank",
    errors: Errors = "raise",
    parallel: bool | None = None,
) -> pd.Series:
    """KV-cache handoff delay (ms) of every row of ``df``, as a nullable ``Float64`` Series.

    Each keyword is a column name of ``df`` or a value (scalar or array) applied to the
    rows. The defaults are upstream's parameter names; ``worker_type``, ``completed``,
    ``mode`` and ``destination_missing_tokens`` fall back to prefill / True /
    full_prompt / none when their default columns are absent. Semantics and units are
    those of :func:`perfmodel.handoff_delay_ms`.

    ``kv_bytes_per_token`` may also be a model preset name or config (or a column of
    model names), resolved with ``kv_cache_dtype``, ``tp`` and ``scope`` (see
    :func:`perfmodel.kv_bytes_per_token`); ``kv_transfer_bandwidth`` may be a link name
    or :class:`perfmodel.Link` (or a column of them), whose latency and per-block cost
    are then added. The extensions (per-block cost, layer-wise streaming) take values or
    columns, as in :func:`perfmodel.handoff_delay_ms`; ``state_bytes`` (default: the
    model's own state, 0 for numbers) too.

    ``parallel`` forces the serial (False) or parallel (True) kernel; the default picks
    by size (the Dask layer runs the serial one inside its partitions).

    Returns
    -------
    pandas.Series
        Named ``handoff_delay_ms``, with ``df``'s index, dtype ``Float64``; ``<NA>``
        where no handoff applies or its cost is unknown.

    Raises
    ------
    ValueError
        Naming the column, the number of invalid rows, the first one's row label and
        value, and the fix (``errors="coerce"`` turns invalid rows into ``<NA>``).

    Examples
    --------
    >>> import pandas as pd, perfmodel
    >>> df = pd.DataFrame({"num_input_tokens": [4096, 32768, 1000],
    ...                    "worker_type": ["prefill", "prefill", "decode"]},
    ...                   index=["a", "b", "c"])
    >>> perfmodel.handoff_delays(df, kv_transfer_bandwidth="ib-ndr", kv_bytes_per_token="llama-3.1-70b")
    a     26.843546
    b    214.748365
    c          <NA>
    Name: handoff_delay_ms, dtype: Float64
    """
    given = locals()
    check_errors(errors)
    if not isinstance(df, pd.DataFrame):
        raise InputError("df", f"expected a pandas DataFrame, got {type(df).__name__}",
                         "pass a DataFrame (for arrays use perfmodel.handoff_delay_ms)")
    values: dict[str, Any] = {}
    columns: dict[str, Hashable] = {}
    for argument in ARGUMENTS:
        values[argument], column = _lookup(df, argument, given[argument])
        if column is not None:
            columns[argument] = column
    if not columns and all(np.ndim(v) == 0 for v in values.values()):  # every argument one value: every row gets it
        values["num_input_tokens"] = np.full(len(df), values["num_input_tokens"])
    try:
        result = _handoff(values, Options.of(kv_cache_dtype, tp, scope, overlap),
                          errors=errors, with_missing=True, parallel=parallel)
    except InputError as error:
        if error.argument in columns:  # name the column, and the row by its label
            row = df.index[error.position] if error.position is not None else error.row
            raise error.relocated(f"column {columns[error.argument]!r} ({error.argument})", row) from None
        raise
    delays, missing = result.delays, result.missing
    if len(delays) != len(df):
        arrays = [a for a, v in values.items() if np.ndim(v) > 0 and a not in columns]
        raise InputError("inputs", f"arrays given as values ({', '.join(arrays)}) have {len(delays)} rows but the "
                         f"frame has {len(df)}", "pass arrays as long as the frame, or column names")
    return _result_series(delays, missing, df.index)


def _result_series(delays: np.ndarray, missing: np.ndarray, index: pd.Index) -> pd.Series:
    """The facade's answer: a nullable ``Float64`` Series named :data:`RESULT_NAME` on ``index``, on the
    kernel's own arrays (no copy). Built on pandas' block manager (``Series._from_mgr``, pandas >= 2.1)
    where pandas has it: the public constructor's checks and conversions cost ~80 us right after a
    1M-row kernel pass, this ~45 us; else by the constructor (a test compares the two)."""
    values = pd.arrays.FloatingArray(delays, missing)
    try:
        manager = _SingleBlockManager.from_array(values, index)
        series = pd.Series._from_mgr(manager, axes=manager.axes)
    except (AttributeError, TypeError):  # a pandas without them
        return pd.Series(values, index=index, name=RESULT_NAME, copy=False)
    series.name = RESULT_NAME
    return series
