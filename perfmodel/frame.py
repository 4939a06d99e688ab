"""pandas facade: DataFrame columns in, an index-aligned ``handoff_delay_ms`` Series out.

No arithmetic here: each argument is looked up (a column, or a value), names are
resolved (models, links), and the numpy-level :func:`perfmodel.handoff_delay_ms` does
the one kernel pass. Errors from that layer are re-reported with the column name and
the row *label*.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Hashable
from typing import Any, cast

import numpy as np
import pandas as pd

from .errors import Errors, InputError
from .handoff import ARGUMENTS, Options, handoff
from .inputs.codes import TransferMode, WorkerType
from .inputs.coerce import UNPARSEABLE, aligned, check_errors, code_of, refuse_none, text_number
from .inputs.table import INPUTS, ROW_INPUTS, documented
from .inputs.words import count
from .network.links import get_link

__all__ = ["RESULT_NAME", "handoff_delays"]

#: Name of the result Series and of the column the accessor adds.
RESULT_NAME = "handoff_delay_ms"

#: Inputs read from the frame's column of the same name by default; where that column is absent,
#: the numpy API's default applies (a required input is then an error).
FRAME_COLUMNS = tuple(e.name for e in ROW_INPUTS if e.group == "core" and e.name not in
                      ("state_bytes", "latency_ms", "fallback_delay_ms"))
_LABELS = {"worker_type": WorkerType, "mode": TransferMode}


def _column(df: pd.DataFrame, label: Hashable) -> Any:
    """The values of the column ``label`` (a numpy array or pandas extension array, not copied)."""
    column = df[label]
    if not isinstance(column, pd.Series):  # (duplicate labels: a frame, refused below)
        return column
    return column.to_numpy() if isinstance(column.dtype, np.dtype) else column.array  # (numpy's: a view)


def _lookup(df: pd.DataFrame, argument: str, spec: Any) -> tuple[Any, Hashable | None]:
    """The value of one argument, and the column it came from (None for a value: None itself means
    not given, never a column labelled None)."""
    if spec is None or isinstance(spec, (numbers.Number, np.generic)):  # numbers (numpy's too) are values
        return spec, None
    if isinstance(spec, Hashable) and spec in df.columns:
        if isinstance(spec, str) and spec != argument:
            refuse_both(argument, spec)
        return _column(df, spec), spec
    if isinstance(spec, pd.Series):
        return aligned(df.index, argument, spec), None
    if not isinstance(spec, str):
        return spec, None
    if spec == argument and not INPUTS[argument].required:  # the default column, absent: the default value
        return INPUTS[argument].default, None
    if spec == argument:  # a required input, neither given nor a column of the frame
        what = {"num_input_tokens": "prompt tokens", "kv_transfer_bandwidth": "GB/s, a link name, a Link or a cluster",
                "kv_bytes_per_token": "bytes, a model name or a config"}.get(argument, "a value")
        raise InputError(argument, f"was not given, and the frame has no column {argument!r} "
                         f"(it has {list(df.columns)})", f"pass {argument}=<{what}, or a column name>")
    if _reads_as_value(argument, spec):
        return spec, None  # text that reads as a value, as everywhere: "50" GB/s, "NA", worker_type="decode"
    if argument in ("kv_bytes_per_token", "kv_transfer_bandwidth"):
        refused = _preset_error(argument, spec)
        close = difflib.get_close_matches(spec, [str(c) for c in df.columns], n=1, cutoff=0.8)
        if close and refused:  # (a column's name mistyped: said as such)
            raise InputError(argument, f"no column {spec!r} (did you mean the column {close[0]!r}?) and no preset of "
                             "that name", f"pass {argument}={close[0]!r}, or a value")
        if refused:  # (neither: both said, a mistyped column's name too)
            problem, _, fix = str(refused).partition(". Fix: ")
            problem = refused.problem if isinstance(refused, InputError) and refused.where == "link" else problem
            raise InputError(argument, f"no column {spec!r} in the frame (it has {list(df.columns)}), and {problem}",
                             fix.rstrip(".") or f"pass one of the frame's columns or a value as {argument}")
        return spec, None  # a model or link name, resolved below
    raise InputError(
        argument, f"no column {spec!r}; the frame has {list(df.columns)}",
        f"pass {argument}=<one of those columns> or a value",
    )


def _reads_as_value(argument: str, text: str) -> bool:
    """Whether ``text`` is a value of ``argument`` as the numpy API reads it: a number or a missing marker, or a
    worker type's, mode's or completed's label or code (``"decode"``, ``"1"``, ``"true"``)."""
    entry = INPUTS[argument]
    if entry.kind in ("code", "flag"):
        assert entry.labels is not None, argument  # (codes and flags have their names)
        return code_of(text, entry.labels, entry.code_limit, False) != UNPARSEABLE
    return text_number(text) is not None


def _is_label(argument: str, spec: str) -> bool:
    """Whether ``spec`` is a label of ``argument``'s choices (``worker_type="decode"``, ``mode="full_prompt"``)."""
    return argument in _LABELS and spec.strip().lower() in {m.name.lower() for m in _LABELS[argument]}


def refuse_both(argument: str, spec: str, where: str | None = None) -> None:
    """Refuse a column name that is also a value of ``argument`` (a number or a missing marker as text, a label or
    code, a preset's name): ambiguous, never guessed. ``where``: the argument as the call named it (default
    ``argument``; a replay's ``model``)."""
    entry, number = INPUTS[argument], text_number(spec)
    if argument in _LABELS and _reads_as_value(argument, spec):
        kind = _LABELS[argument]
        member = kind(code_of(spec, entry.labels or {}, entry.code_limit, False))
        what = f"a {kind.__name__} {'label' if _is_label(argument, spec) else 'code'}"
        instead = f"the value as perfmodel.{kind.__name__}.{member.name}"
    elif entry.kind == "flag" and _reads_as_value(argument, spec):
        what, instead = f"a value of {argument}", f"the value as {bool(code_of(spec, entry.labels or {}, 1, False))}"
    elif number is not None:
        what, instead = (("a missing value's marker", "the missing value as float('nan')") if math.isnan(number)
                         else ("a number written as text", f"the number as {number!r}"))
    elif argument in ("kv_bytes_per_token", "kv_transfer_bandwidth") and not _preset_error(argument, spec):
        what, instead = "a preset's name", "the preset as an object (perfmodel.get_link, perfmodel.Cluster, a model config)"
    else:
        return
    raise InputError(where or argument, f"{spec!r} is both a column of the frame and {what}",
                     f"pass the column as df[{spec!r}], or {instead}, or rename the column")


def _relocated(error: InputError, index: pd.Index, columns: dict[str, Hashable]) -> InputError:
    """``error`` of the numpy layer as the frame's: its column named (and the other columns with invalid rows), and
    its row by its label (every array the facade passes on, a column's or an aligned Series', has the frame's rows)."""
    if error.argument not in columns and error.position is None:
        return error

    def named(argument: str) -> str:
        return f"column {columns[argument]!r} ({argument})" if argument in columns else argument

    row = index[error.position] if error.position is not None else error.row
    counts = {k if k == error.argument else named(k): v for k, v in error.counts.items()}
    return error.relocated(named(error.argument) if error.argument in columns else error.where, row, counts=counts)


def _preset_error(argument: str, name: str) -> Exception | None:
    """None if ``name`` names a model (``kv_bytes_per_token``) or a link or cluster (``kv_transfer_bandwidth``), else
    the lookup's refusal."""
    from .model.models import model_config
    from .network.placement import get_cluster, is_cluster

    try:
        if argument == "kv_bytes_per_token":
            model_config(name)
        elif is_cluster(name):
            get_cluster(name)
        else:
            get_link(name)
    except (InputError, ValueError, KeyError, OSError) as error:
        return error
    return None


def _read(df: pd.DataFrame, given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Hashable]]:
    """Each argument's value in ``given``, or its column of ``df`` (:func:`_lookup`); and the columns read, by argument."""
    values: dict[str, Any] = {}
    columns: dict[str, Hashable] = {}
    for argument in ARGUMENTS:
        values[argument], column = _lookup(df, argument, given[argument])
        if column is not None:
            columns[argument] = column
    return values, columns


@documented(extra={
    "df": "The rows: one handoff each.",
    **{name: f"A column name of ``df`` (default: ``{name!r}``, where the frame has it) or a value. "
       + INPUTS[name].doc for name in FRAME_COLUMNS},
    **{e.name: "A column name of ``df`` or a value. " + e.doc for e in ROW_INPUTS if e.name not in FRAME_COLUMNS},
})
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
    per_message_ms: Any = 0.0,
    blocks_per_message: Any = 1.0,
    prefill_ms: Any = None,
    prefill_tokens_per_s: Any = None,
    num_layers: Any = None,
    layer_group: Any = 1,
    layerwise_min_tokens: Any = 0,
    overlap: str = "none",
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    decode_tp: int | None = None,
    scope: str = "rank",
    kv_layout: str = "layer_kv",
    connector: Any = None,
    errors: Errors = "raise",
    parallel: bool | None = None,
) -> pd.Series:
    """KV-cache handoff delay (ms) of every row of ``df``, as a nullable ``Float64`` Series.

    Each per-row keyword is a column name of ``df`` or a value (scalar or array) applied to the rows. The
    defaults are upstream's parameter names; ``worker_type``, ``completed``, ``mode`` and
    ``destination_missing_tokens`` fall back to prefill / True / full_prompt / none when their default columns
    are absent; None is no value, and is refused where the default is a column or a value. Numbers (numpy's
    included) are always values, never column labels; text is a column's name or, as in the numpy API, a value
    (``"50"`` GB/s, ``"NA"``, ``"decode"``): text that is both is refused as ambiguous. An empty frame gives an
    empty Series. Semantics and units are those of :func:`perfmodel.handoff_delay_ms`; the Dask layer runs the
    serial kernel inside its partitions.

    Parameters
    ----------
    @inputs

    Returns
    -------
    pandas.Series
        Named ``handoff_delay_ms``, with ``df``'s index, dtype ``Float64``; ``<NA>`` where no handoff applies or
        its cost is unknown.

    Raises
    ------
    ValueError
        Naming the column, the number of invalid rows, the first one's row label and value, and the fix
        (``errors="coerce"`` turns invalid rows into ``<NA>``).

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
    given = dict(
        num_input_tokens=num_input_tokens, kv_transfer_bandwidth=kv_transfer_bandwidth,
        kv_bytes_per_token=kv_bytes_per_token, worker_type=worker_type, completed=completed, mode=mode,
        destination_missing_tokens=destination_missing_tokens, state_bytes=state_bytes, latency_ms=latency_ms,
        fallback_delay_ms=fallback_delay_ms, per_block_ms=per_block_ms, block_size=block_size,
        per_message_ms=per_message_ms, blocks_per_message=blocks_per_message, prefill_ms=prefill_ms,
        prefill_tokens_per_s=prefill_tokens_per_s,
        num_layers=num_layers, layer_group=layer_group, layerwise_min_tokens=layerwise_min_tokens)
    check_errors(errors)
    if not isinstance(df, pd.DataFrame):
        raise InputError("df", f"expected a pandas DataFrame, got {type(df).__name__}",
                         "pass a DataFrame (for arrays use perfmodel.handoff_delay_ms)")
    chosen = dict(overlap=overlap, kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp, scope=scope,
                  kv_layout=kv_layout, connector=connector)
    refuse_none({**given, **chosen}, FRAME_COLUMNS)  # (None is no value: never taken for the default, nor a column)
    values, columns = _read(df, given)
    try:
        result = handoff(values, Options.of(**chosen), errors=errors, with_missing=True, parallel=parallel)
    except InputError as error:
        raise _relocated(error, df.index, columns) from None
    delays, missing = result.delays, cast(np.ndarray, result.missing)  # (asked for: with_missing=True)
    if len(delays) == 1 and not columns and all(np.ndim(v) == 0 for v in values.values()):
        delays, missing = np.full(len(df), delays[0]), np.full(len(df), missing[0])  # every row the one value's
    if len(delays) != len(df):
        arrays = [a for a, v in values.items() if np.ndim(v) > 0 and a not in columns]
        raise InputError("inputs", f"arrays given as values ({', '.join(arrays)}) have {count(len(delays), 'row')} but the "
                         f"frame has {len(df)}", "pass arrays as long as the frame, or column names")
    return pd.Series(pd.arrays.FloatingArray(delays, missing), index=df.index, name=RESULT_NAME, copy=False)
