"""What-if grids: every combination of the axes, one kernel pass, a tidy DataFrame; inverse questions.

The grid is built by numpy (each axis column materialized once, straight into the
result) and goes through the one route of :func:`perfmodel.handoff_delay_ms` a chunk of
rows at a time (one call per combination of the option axes; models and links given as
codes, so they resolve once per distinct value), with a progress bar on a terminal when
the sweep takes more than a second.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from .errors import InputError
from .ground import progress as _progress
from .handoff import Options, checked, destination_missing_tokens, handoff
from .inputs import resolve as _resolve
from .inputs.codes import TransferMode
from .inputs.coerce import Coded, edge_values, one_index, whole_numbers
from .inputs.table import (
    CLUSTER_FIELDS,
    INPUTS,
    LABEL_AXES,
    LAYERWISE,
    OPTION_AXES,
    OPTIONS,
    ROW_NAMES,
    SWEEP_AXES,
    check_cross,
    check_inverse_input,
    check_range,
    documented,
    layerwise_overlaps,
    nonnegative,
)
from .model.models import kv_terms
from .network.connector import get_connector
from .network.links import Link, get_link
from .network.placement import through_nvlink
from .options import option
from .replay.summaries import alone_question, highest_upto, least_true, without_coerce_hint

__all__ = ["AXES", "SweepPlan", "max_tokens_within", "required_bandwidth", "sweep"]

#: The axes :func:`sweep` accepts, in the order of its columns; the last given axis varies fastest (the input
#: table's sweep axes, :data:`perfmodel.inputs.table.SWEEP_AXES`).
AXES = SWEEP_AXES
# (CLUSTER_FIELDS: the fields of a Cluster a sweep may vary, axes beside a cluster axis: the input table's)


def _mode(value: Any) -> TransferMode:
    try:
        return TransferMode[value.strip().upper()] if isinstance(value, str) else TransferMode(value)
    except (KeyError, ValueError):
        raise InputError("sweep", f"unknown mode {value!r}", "use 'full_prompt' or 'destination_missing'") from None


def _cache_hits_apply(values: dict[str, Any]) -> None:
    """A cache hit ratio swept where no mode charges only the tokens missing at the destination is refused: it
    would change nothing (the full prompt moves), beside a column that says a hit ratio."""
    if "cache_hit_ratio" in values and TransferMode.DESTINATION_MISSING not in {_mode(m) for m in values["mode"]}:
        raise InputError(
            "sweep: cache_hit_ratio",
            "applies to mode='destination_missing' (the cached part of a prompt is not moved), and no mode swept is",
            "drop cache_hit_ratio, or sweep mode='destination_missing' too",
        )


def sweep(progress: bool | None = None, **axes: Any) -> pd.DataFrame:
    """Handoff delay over every combination of the given axes (their Cartesian product), each handoff priced
    alone (no contention), per prompt: ``attrs["question"]`` says so in words.

    Each keyword is an axis, a scalar or a list of values:

    - ``num_input_tokens`` (required): prompt lengths in tokens.
    - bytes per token: ``kv_bytes_per_token`` (bytes), or ``model`` (preset names or configs) with optional
      ``kv_cache_dtype`` and ``tp`` axes (sliding-window, chunked-attention and hybrid models move the bytes of
      :class:`perfmodel.KVTerms`).
    - bandwidth: ``kv_transfer_bandwidth`` (decimal GB/s), or ``link`` (preset names such as
      ``"ib-ndr"``/``"8x ib-ndr"``, or :class:`perfmodel.Link`; its latency is added), or ``cluster``
      (:class:`perfmodel.Cluster` objects or cluster preset names such as ``"hgx-h100-8x400g"``: each handoff's
      flows share its NICs, switches and NVLink ports) with axes of its fields: ``nic``, ``nics_per_node``,
      ``gpus_per_node``, ``nodes``, ``transport``, ``nvlink_domain``, ``fabric``, ``oversubscription``,
      ``hop_latency_ms``, ``gpus_per_pcie_switch``, ``pcie_switch_gb_s`` (see :doc:`the clusters page </clusters>`).
    - ``latency_ms`` (ms per transfer), ``state_bytes`` (bytes per transfer that moves tokens; with a model, it
      replaces the model's own state).
    - ``mode`` (``"full_prompt"``/``"destination_missing"``), ``cache_hit_ratio`` (the fraction of the prompt
      already cached at the destination; with it, ``mode`` defaults to destination_missing) and ``block_size``
      (tokens per KV block, default 64, a common engine page size; :func:`perfmodel.replay_handoffs` defaults to
      512, the hash block of Mooncake traces): destination_missing rows are charged block-rounded, as
      :func:`perfmodel.destination_missing_tokens` computes.
    - fidelity (all off unless given): ``per_block_ms`` (cost per KV block, added to a link's own; needs
      ``block_size``), ``per_message_ms`` (cost per message, added to a link's own; needs ``block_size``, and
      ``num_layers`` or a model unless ``kv_layout`` is ``"block"``) with ``kv_layout``, ``decode_tp`` (the decode
      side's tensor parallelism; with a model), ``scope`` (``"rank"``/``"group"``: the busiest GPU's bytes or the TP
      group's), ``overlap`` (``"none"``/``"layerwise"``) with ``prefill_ms`` or ``prefill_tokens_per_s``,
      ``layer_group``, ``layerwise_min_tokens`` and ``num_layers`` (taken from the model when one is named), as in
      :func:`perfmodel.handoff_delay_ms`.

    Rows come in a stable order: axes in the order of :data:`AXES`, the last one varying
    fastest (like nested loops with ``num_input_tokens`` innermost).

    Parameters
    ----------
    progress
        Show a progress bar: None (default) shows one on a terminal when the sweep takes more than a second.
    **axes
        The axes, as above.

    Returns
    -------
    pandas.DataFrame
        One column per given axis (names and labels as categoricals), then ``kv_transfer_bandwidth`` (effective
        GB/s; with ``link``), ``transfer_bytes`` (the bytes each handoff moves) and ``handoff_delay_ms``. On a link
        they are one rank's bytes (the busiest GPU's; the group's with ``scope="group"``) and the link's effective
        bandwidth. On a cluster ``transfer_bytes`` is all the bytes the handoff moves (the sum over its flows, as a
        replay reports it) and ``kv_transfer_bandwidth`` the handoff's rate: those bytes over its delay less its
        last-ending flow's fixed costs, ``transfer_bytes / (handoff_delay_ms - start_ms) / 1e6`` in the terms of
        :func:`perfmodel.handoff_flows` (its flows' aggregate rate; NaN where no byte moves).

    Examples
    --------
    >>> from perfmodel import sweep
    >>> df = sweep(cluster=["hgx-h100-8x400g", "aws-p5"], model="llama-3.1-70b", tp=8, decode_tp=[8, 2],
    ...            num_input_tokens=32768)
    >>> df[["decode_tp", "cluster", "kv_transfer_bandwidth", "transfer_bytes"]]
       decode_tp          cluster  kv_transfer_bandwidth  transfer_bytes
    0          8  hgx-h100-8x400g                  400.0     10737418240
    1          8           aws-p5                  400.0     10737418240
    2          2  hgx-h100-8x400g                  100.0     10737418240
    3          2           aws-p5                  100.0     10737418240

    >>> df = sweep(link=["nvlink4", "ib-ndr"], model="llama-3.1-70b", num_input_tokens=[1024, 32768])
    >>> df[["link", "num_input_tokens", "handoff_delay_ms"]]
         link  num_input_tokens  handoff_delay_ms
    0 nvlink4              1024          0.745654
    1 nvlink4             32768         23.860929
    2  ib-ndr              1024          6.710886
    3  ib-ndr             32768        214.748365
    """
    plan = SweepPlan.of(axes)
    _check_fits_in_memory(plan)
    table = plan.rows(0, plan.n, progress=progress)
    scopes = {str(s) for s in np.atleast_1d(np.asarray(axes.get("scope", "rank"), dtype=object))}
    nvlink = set().union(*(through_nvlink(c, m, o) for c in plan.clusters for o, _ in plan.options
                           for m in plan.values.get("model", [1.0])))  # (what each flow crosses: NVLink, or NICs)
    crossing = "both" if len(nvlink) > 1 else "nvlink" if nvlink == {True} else "nic"
    table.attrs["question"] = alone_question(scopes.pop() if len(scopes) == 1 else None, cluster="cluster" in axes,
                                             crossing=crossing)
    return table


def _physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return None


def _check_fits_in_memory(plan: SweepPlan) -> None:
    """Refuse, before allocating anything, a sweep whose result would not fit in this machine's memory."""
    row_bytes = 8 * (len(plan.axes) + 4)  # at most 8 bytes per column and row (labels take less)
    memory = _physical_memory_bytes()
    if memory is not None and plan.n * row_bytes > memory:
        raise InputError("sweep", f"{plan.n:,} rows need about {plan.n * row_bytes / 1e9:,.1f} GB, more than this "  # (never one)
                         f"machine's {memory / 1e9:,.1f} GB of memory",
                         "sweep fewer values, or use perfmodel.dask.sweep(...).to_parquet(folder) for grids this large")


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: its axes and small per-value tables; any range of its rows on demand.

    Rows are numbered in the documented order; row ``i``'s position on each axis is a digit of ``i`` in the mixed
    radix of the axis lengths. :func:`sweep` materializes all rows, :func:`perfmodel.dask.sweep` one range per
    partition.

    Parameters
    ----------
    axes : tuple of str
        The axes, in the documented order.
    values : dict
        Each axis' values.
    shape : tuple of int
        Each axis' length.
    labels : dict of str to list of str
        The labels of each axis of names (models, links, modes...): its output column's categories.
    links : list of Link
        The links of the link axis.
    options : list
        Per combination of the option axes: its options, and the inputs it drops.
    mode_codes : numpy.ndarray
        The code of each value of the mode axis (empty without one).
    clusters : list
        Per combination of the cluster axes: its cluster.

    Examples
    --------
    >>> from perfmodel.sweeps import SweepPlan
    >>> plan = SweepPlan.of({"link": ["nvlink4", "ib-ndr"], "kv_bytes_per_token": 1000,
    ...                      "num_input_tokens": [1, 2, 3]})
    >>> plan.n, plan.rows(2, 4)[["link", "num_input_tokens"]].to_dict("list")
    (6, {'link': ['nvlink4', 'ib-ndr'], 'num_input_tokens': [3, 1]})
    """

    axes: tuple[str, ...]
    values: dict[str, Any]
    shape: tuple[int, ...]
    labels: dict[str, list[str]]
    links: list[Link]
    options: list[tuple[Options, frozenset[str]]]  # per combination of the option axes: it, and the inputs it drops
    mode_codes: np.ndarray
    clusters: list[Any] = dataclasses.field(default_factory=list)  # per combination of the cluster axes

    @property
    def n(self) -> int:
        """Number of rows (the product of the axis lengths)."""
        return math.prod(self.shape)

    @classmethod
    def of(cls, axes: dict[str, Any]) -> SweepPlan:
        """Validate the axes of :func:`sweep`: every value by its rule, every model in every combination of
        the option axes (each combination one call of the edge per chunk of rows)."""
        axes = _implied(_check_axis_names(edge_values(axes)))
        given = tuple(name for name in AXES if name in axes)
        values: dict[str, Any] = {name: _resolve.axis_values("sweep", name, axes[name]) for name in given}
        values = {name: v if name in LABEL_AXES else np.asarray([np.nan if x is pd.NA else x for x in v])
                  for name, v in values.items()}  # (a nullable array's missing value: NaN, as a float's)
        labels = {name: _resolve.axis_labels("sweep", name, [_mode(v) if name == "mode" else v for v in values[name]])
                  for name in given if name in LABEL_AXES}
        _check_values(values)
        _cache_hits_apply(values)
        links = [get_link(v) for v in values.get("link", [])]
        clusters = _clusters(values, given)
        check_cross({"block_size": values.get("block_size"),
                     **{name: np.add.outer(values.get(name, [0.0]), [getattr(link, name) for link in links] or [0.0])
                        for name in ("per_block_ms", "per_message_ms")},
                     "layer_group": values.get("layer_group"), "num_layers": values.get("num_layers")}, "sweep")
        connectors = [get_connector(v) for v in values.get("connector", [])]
        messages = (
            "per_message_ms" in given
            or any(link.per_message_ms for link in links)
            or any(c is not None and c.per_descriptor_ms for c in connectors)
        )
        return cls(axes=given, values=values, shape=tuple(len(values[name]) for name in given), labels=labels,
                   links=links, options=_options_per_combination(given, values, messages), clusters=clusters,
                   mode_codes=np.array([_mode(m) for m in values.get("mode", [])], dtype=np.int8))

    def rows(self, start: int, stop: int, *, progress: bool | None = None) -> pd.DataFrame:
        """Rows ``start`` to ``stop`` (exclusive) of the sweep, as :func:`sweep` returns them.

        The result's columns are allocated once and filled a chunk of rows at a time, so
        the temporaries stay a chunk long whatever the sweep's size.
        """
        n = stop - start
        columns: dict[str, np.ndarray] = {}
        for name in self.axes:
            dtype = np.min_scalar_type(-len(self.labels[name])) if name in self.labels else \
                np.asarray(self.values[name]).dtype
            columns[name] = np.empty(n, dtype=dtype)
        bandwidth = np.empty(n) if "link" in self.axes or self.clusters else columns["kv_transfer_bandwidth"]
        # whole bytes as integers (float64 arithmetic is exact below 2**53 bytes), else floats
        whole = all(np.all(np.mod(np.asarray(self.values[a], dtype=np.float64), 1) == 0)
                    for a in ("kv_bytes_per_token", "state_bytes") if a in self.values) and not (
            np.isnan(np.asarray(self.values.get("num_input_tokens", []), dtype=np.float64)).any()
        )  # (a NaN prompt's bytes are NaN: floats for every row, whichever rows a call asks for)
        transfer_bytes: np.ndarray = np.empty(n)  # whole byte counts become integers below (exact up to 2**53)
        delay = np.empty(n)
        chunk = option("sweep_chunk_rows")  # rows per chunk: temporaries stay small next to the result (peak memory)
        with _progress.progress_bar(n, unit="cells", desc="sweep", progress=progress, at_least=chunk) as bar:
            for first in range(0, n, chunk):
                part = slice(first, min(n, first + chunk))
                self._fill(np.arange(start + part.start, start + part.stop, dtype=np.int64), part,
                           columns, bandwidth, transfer_bytes, delay)
                bar.update(part.stop - part.start)
        result: dict[str, Any] = {
            name: pd.Categorical.from_codes(columns[name], categories=self.labels[name], validate=False)
            if name in self.labels else columns[name] for name in self.axes}
        result["kv_transfer_bandwidth"] = bandwidth
        if whole and n and transfer_bytes.max() < 2.0**53:  # (NaN: not whole) in place, a chunk at a time
            as_integers = transfer_bytes.view(np.int64)
            for first in range(0, n, chunk):
                as_integers[first:first + chunk] = transfer_bytes[first:first + chunk].astype(np.int64)
            transfer_bytes = as_integers
        result["transfer_bytes"] = transfer_bytes
        result["handoff_delay_ms"] = delay
        return pd.DataFrame(result, index=pd.RangeIndex(start, stop), copy=False)

    def _fill(self, flat: np.ndarray, part: slice, columns: dict[str, np.ndarray], bandwidth: np.ndarray,
              transfer_bytes: np.ndarray, delay: np.ndarray) -> None:
        """Fill one chunk of rows (``flat`` are their numbers) into the preallocated columns."""
        digits: dict[str, np.ndarray] = {}
        inner = 1
        for name, size in zip(reversed(self.axes), reversed(self.shape)):
            digits[name] = (flat // inner) % size
            inner *= size
        for name in self.axes:
            columns[name][part] = digits[name] if name in self.labels else np.asarray(self.values[name])[digits[name]]
        inputs: dict[str, Any] = {name: columns[name][part] for name in self.axes if name in ROW_NAMES}
        if "model" in self.axes:  # resolved by the edge, once per model
            inputs["kv_bytes_per_token"] = Coded(digits["model"], self.values["model"])
        if "link" in self.axes:
            inputs["kv_transfer_bandwidth"] = Coded(digits["link"], self.links)
            bandwidth[part] = np.array([link.effective_bandwidth_gb_s for link in self.links])[digits["link"]]
        if "mode" in self.axes:
            tokens = inputs["num_input_tokens"]
            inputs["mode"] = self.mode_codes[digits["mode"]]
            ratio = columns["cache_hit_ratio"][part] if "cache_hit_ratio" in self.axes else 0.0
            cached = np.floor(np.multiply(ratio, tokens)).astype(np.int64)
            inputs["destination_missing_tokens"] = destination_missing_tokens(tokens, cached,
                                                                              inputs.get("block_size", 64))
        option_axes = [name for name in self.axes if name in OPTION_AXES]
        combos = np.ravel_multi_index([digits[name] for name in option_axes],
                                      [len(self.values[name]) for name in option_axes]) if option_axes else None
        cluster_axes = [name for name in self.axes if name in ("cluster", *CLUSTER_FIELDS)]
        if cluster_axes:  # one call of the edge per cluster (each resolved once)
            # (the handoff's rate: the edge's, per row, with its bytes)
            which = np.ravel_multi_index([digits[name] for name in cluster_axes],
                                         [len(self.values[name]) for name in cluster_axes])
            combos = which if combos is None else combos * len(self.clusters) + which
        self._run(inputs, combos, part, bandwidth, transfer_bytes, delay)

    def _run(self, inputs: dict[str, Any], combos: np.ndarray | None, part: slice, bandwidth: np.ndarray,
             transfer_bytes: np.ndarray, delay: np.ndarray) -> None:
        """One call of the edge per combination of the option and cluster axes (``combos``: each row's), on its
        rows of the chunk ``part``; on a cluster the edge also gives each handoff's rate (the bandwidth column)."""
        for combo in range(len(self.options) * max(len(self.clusters), 1)):
            options, off = self.options[combo // max(len(self.clusters), 1)]
            rows: Any = slice(None) if combos is None else np.flatnonzero(combos == combo)  # (all, or indices)
            given = {name: _rows(value, rows) for name, value in inputs.items() if name not in off}
            if self.clusters:
                given["kv_transfer_bandwidth"] = self.clusters[combo % len(self.clusters)]
            if combos is None:
                handoff(given, options, out=delay[part], bytes_out=transfer_bytes[part])
            elif rows.size:
                moved, rate = np.empty(rows.size), np.empty(rows.size) if self.clusters else None
                delay[part.start + rows] = handoff(given, options, bytes_out=moved, rate_out=rate).delays
                transfer_bytes[part.start + rows] = moved
                if rate is not None:
                    bandwidth[part.start + rows] = rate


def _check_axis_names(axes: dict[str, Any]) -> dict[str, Any]:
    """The axes of a sweep, refused when one is unknown, two name one input, or a required one is missing."""
    unknown = set(axes) - set(AXES)
    if unknown:
        raise InputError("sweep", f"unknown axis {sorted(unknown)}", f"use axes from {', '.join(AXES)}")
    for one, other in (("kv_bytes_per_token", "model"), ("kv_transfer_bandwidth", "link"), ("cluster", "link"),
                       ("cluster", "kv_transfer_bandwidth")):
        if one in axes and other in axes:
            raise InputError("sweep", f"{one} and {other} are both given", f"give either {one} or {other}, not both")
    if "num_input_tokens" not in axes:
        raise InputError("sweep", "num_input_tokens is required", "e.g. num_input_tokens=[1024, 8192, 32768]")
    if "kv_bytes_per_token" not in axes and "model" not in axes:
        raise InputError("sweep", "kv_bytes_per_token is required",
                         "give kv_bytes_per_token (bytes) or model (e.g. model='llama-3.1-70b')")
    fields = [name for name in CLUSTER_FIELDS if name in axes]
    if fields and "cluster" not in axes:
        raise InputError("sweep", f"{', '.join(fields)} vary a cluster's fields", "give a cluster axis too")
    if "kv_transfer_bandwidth" not in axes and "link" not in axes and "cluster" not in axes:
        raise InputError("sweep", "kv_transfer_bandwidth is required",
                         "give kv_transfer_bandwidth (GB/s) or link (e.g. link='ib-ndr')")
    for needs_model in (e.name for e in OPTIONS if e.group == "shape"):
        if needs_model in axes and "model" not in axes:
            raise InputError("sweep", f"{needs_model} applies to model presets/configs", "give a model axis too")
    return axes


def _implied(axes: dict[str, Any]) -> dict[str, Any]:
    """The axes with what others imply (a cache hit ratio: destination_missing; a layer-wise input:
    layer-wise streaming, but a layer count beside per-message costs, which it serves), checked by the layer-wise
    rules of every entry point."""
    if "cache_hit_ratio" in axes and "mode" not in axes:
        axes["mode"] = "destination_missing"
    connectors = _resolve.axis_values("sweep", "connector", axes["connector"]) if "connector" in axes else []
    per_message = "per_message_ms" in axes or any(getattr(get_connector(c), "per_descriptor_ms", 0) for c in connectors)
    if any(a in axes for a in LAYERWISE if a != "num_layers" or not per_message) and "overlap" not in axes:
        axes["overlap"] = "layerwise"
    overlaps = {str(v) for v in _resolve.axis_values("sweep", "overlap", axes.get("overlap", "none"))}
    costs = {"per_message_ms": 1.0} if per_message and "per_message_ms" not in axes else {}  # (a connector's)
    layerwise_overlaps({**axes, **costs}, overlaps)  # the rules of every entry point
    if "layerwise" in overlaps and "num_layers" not in axes and "model" not in axes:
        raise InputError("sweep", "overlap='layerwise' needs the layer count", "give a model axis, or num_layers")
    return axes


def _check_values(values: dict[str, Any]) -> None:
    """Every value of every axis by its rule in the table, before the grid is allocated; numbers given as text
    become the numbers they were read as (the table's column holds numbers)."""
    for name, axis in values.items():
        if name in ROW_NAMES and INPUTS[name].valid is not None and name != "mode":
            try:  # (whole numbers as they are: 2**53 + 1 is above the largest count, never read as 2**53)
                numbers = checked(name, axis.astype(object) if np.asarray(axis).dtype.kind in "iu" else axis)
            except InputError as error:
                raise error.relocated(f"sweep axis {name}", error.row, coerce_hint="") from None
            if np.asarray(axis).dtype.kind in "USO":
                values[name] = np.asarray(numbers)
        elif name not in ROW_NAMES and INPUTS[name].valid is not None:
            check_range(name, axis, f"sweep axis {name}")
    if "block_size" in values:
        whole_numbers("block_size", values["block_size"], 1, coerce_hint="")


def _options_per_combination(given: tuple[str, ...], values: dict[str, Any],
                             messages: bool) -> list[tuple[Options, frozenset[str]]]:
    """The edge's options of each combination of the option axes, and the inputs it drops; every model is
    resolved in every shape here, before the grid is allocated."""
    option_axes = [name for name in given if name in OPTION_AXES]
    options = []
    for chosen in itertools.product(*(values[name] for name in option_axes)):
        option = Options(**dict(zip(option_axes, chosen)))
        for model in values.get("model", []):
            try:  # (an unknown model's name: named as the axis, as a replay names it)
                kv_terms(model, **option.model_options())
            except ValueError as error:
                raise error if isinstance(error, InputError) else InputError.of("model", error) from None
        if messages and "model" not in given:  # bytes as numbers: messages per layer need the layers
            _resolve.message_terms(0.0, option.kv_layout, 1.0 if "num_layers" in given else None)
        counted = messages and option.kv_layout != "block"  # (a layout of blocks posts no message per layer)
        off = frozenset(LAYERWISE) - ({"num_layers"} if counted else set()) if option.overlap == "none" else ()
        options.append((option, frozenset(off)))
    return options


def _clusters(values: dict[str, Any], given: tuple[str, ...]) -> list[Any]:
    """Every combination of the cluster axes as a validated :class:`perfmodel.Cluster` (in row order)."""
    if "cluster" not in given:
        return []
    from .network.clusters import with_fields
    from .network.placement import get_cluster

    fields = [name for name in given if name in CLUSTER_FIELDS]
    found = []
    for base, *chosen in itertools.product(values["cluster"], *(values[name] for name in fields)):
        cluster = get_cluster(base)
        changes = {name: value.item() if isinstance(value, np.generic) else value
                   for name, value in zip(fields, chosen)}
        found.append(with_fields(cluster, changes))
    return found


def _rows(value: Any, rows: Any) -> Any:
    """Some rows of a per-row input of :meth:`SweepPlan._fill`."""
    if isinstance(value, Coded):
        return value if isinstance(rows, slice) else Coded(value.codes[rows], value.labels)
    return value[rows] if isinstance(value, np.ndarray) else value


#: The parameters of the inverse questions that are not inputs of the model.
_INVERSE = {"budget_ms": "The handoff's budget (ms >= 0, +inf allowed); broadcasts with the other inputs.",
            "num_input_tokens": "Prompt tokens (>= 0; a fractional count, as curves pass them, needs the answers of "
                                "the whole counts around it in proportion).",
            "inputs": "Any other input of :func:`perfmodel.handoff_delay_ms` that shapes a full-prompt handoff "
                      "(``latency_ms``, ``per_block_ms``, ``per_message_ms`` with ``block_size`` and ``kv_layout``, "
                      "``state_bytes``, ``kv_cache_dtype``, ``tp``, ``decode_tp``, ``scope``, ``num_layers``...), "
                      "taken as it takes them."}
class _Forward(NamedTuple):
    """Full-prompt handoffs with one inverse question's inputs, every array broadcast to its rows: the
    forward model the answers are settled on, through the edge's one route."""

    kv_bytes_per_token: Any
    inputs: dict[str, Any]
    options: Options

    @classmethod
    def of(cls, kv_bytes_per_token: Any, inputs: dict[str, Any], shape: tuple[int, ...]) -> _Forward:
        for name in inputs:
            check_inverse_input(name)
        per_row = {name: _flat(value, shape) for name, value in inputs.items() if name in ROW_NAMES}
        per_token = _flat(kv_bytes_per_token, shape)
        if isinstance(per_token, (int, float, np.number)):  # numbers as a column, as a sweep passes them: the
            per_token = np.full(math.prod(shape), per_token, dtype=np.float64)  # kernel compiled for it once
        return cls(per_token, per_row, Options.among(inputs))

    def __call__(self, tokens: np.ndarray, bandwidth: Any, rows: Any = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """Delays (ms) and bytes of the handoffs of ``tokens`` at ``bandwidth`` on ``rows``."""
        delay, moved = np.empty(tokens.size), np.empty(tokens.size)
        if not isinstance(bandwidth, np.ndarray) and isinstance(bandwidth, (int, float, np.number)):
            bandwidth = np.full(tokens.size, bandwidth, dtype=np.float64)
        given = {name: value[rows] if isinstance(value, np.ndarray) else value
                 for name, value in {"kv_bytes_per_token": self.kv_bytes_per_token, **self.inputs}.items()}
        handoff({**given, "num_input_tokens": tokens.astype(np.int64), "kv_transfer_bandwidth": bandwidth},
                 self.options, out=delay, bytes_out=moved)
        return delay, moved

    def terms(self) -> list[np.ndarray]:
        """The byte terms of the model or numbers (see :class:`perfmodel.KVTerms`), 0 where it has none."""
        terms = _resolve.model_terms(self.kv_bytes_per_token, **self.options.model_options())
        return [nonnegative("kv_bytes_per_token", terms[0])] + [
            np.float64(0.0) if t is None else np.asarray(t, dtype=np.float64) for t in terms[1:]]


def _flat(value: Any, shape: tuple[int, ...]) -> Any:
    """A value as it is, or an array broadcast to ``shape`` and flattened."""
    if _resolve.is_one(value):
        return value
    array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object if _resolve.holds_labels(
        value) else None)
    return np.broadcast_to(array, shape).reshape(-1)


def _shape(**values: Any) -> tuple[int, ...]:
    """The broadcast shape of the named inputs, or an error naming those that do not broadcast together (or Series
    of different indexes: paired by position, rows of other labels would meet)."""
    one_index(values)
    shapes = {name: () if _resolve.is_one(v) else np.shape(v) for name, v in values.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        arrays = {name: shape for name, shape in shapes.items() if shape != ()}
        raise InputError(" and ".join(arrays), "have shapes that do not broadcast together: " + ", ".join(
            f"{name} {shape}" for name, shape in arrays.items()),
                         "pass arrays of one length (or shapes numpy broadcasts), or single values") from None


def _answer(shape: tuple[int, ...], values: np.ndarray) -> np.float64 | NDArray[np.float64]:
    """numpy's convention: scalars in, a numpy scalar out; arrays in, an array of their shape out."""
    return values[0] if shape == () else values.reshape(shape)


#: The parameters of :func:`required_bandwidth` that are not inputs of the model.
_REQUIRED_BANDWIDTH = dict(_INVERSE, cluster="A :class:`perfmodel.Cluster` or a cluster preset's name: the answer is "
                           "then its NICs' line rate (GB/s) that meets the budget, every other field as it is (NaN "
                           "where no flow crosses a NIC, e.g. inside an NVLink domain).")


@without_coerce_hint
@documented(extra=_REQUIRED_BANDWIDTH)
def required_bandwidth(num_input_tokens: ArrayLike, kv_bytes_per_token: Any, *, budget_ms: ArrayLike,
                       cluster: Any = None, **inputs: Any) -> np.float64 | NDArray[np.float64]:
    """Bandwidth (decimal GB/s) that keeps a full-prompt handoff within ``budget_ms``: one handoff alone
    (no contention), per prompt; for a trace's p99 under load, :func:`perfmodel.required_nics`.

    The inverse of the delay model: ``bytes / ((budget_ms - fixed) / 1000) / 1e9``, the bytes and the fixed costs
    (latency, and with a ``block_size`` the blocks' and messages' costs) being the forward model's own
    (:func:`perfmodel.handoff_delay_ms` at an infinite bandwidth, with every other input as it takes them), then
    settled on the forward model, so that for whole token counts it is the smallest float64 bandwidth with
    ``handoff_delay_ms(tokens, bandwidth, ...) <= budget_ms`` exactly (the closed form alone misses by a rounding
    step either way in ~7% of cases). A fractional count (a curve's) needs the answers of the whole counts around it
    in proportion, ``(1 - f) * at(floor) + f * at(ceil)``, on a link and on a cluster alike: never outside them, so
    a curve through fractional counts passes every whole count's answer. Inputs broadcast like numpy arrays;
    ``kv_bytes_per_token`` may be a model preset name, config or path, or an array of these. 0 bytes need 0 GB/s, as does an
    infinite budget (any bandwidth above 0 meets it); a budget at or below the fixed costs cannot be met by any
    bandwidth (``inf``). Scalars in, a numpy scalar out.

    Parameters
    ----------
    @inputs

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Decimal GB/s: the least bandwidth that meets the budget (``inf`` where none does).

    Examples
    --------
    >>> from perfmodel import required_bandwidth
    >>> required_bandwidth(32_768, "llama-3.1-70b", budget_ms=[50.0, 100.0])
    array([214.74836, 107.37418])
    >>> required_bandwidth(32_768, "llama-3.1-70b", budget_ms=50.0, kv_cache_dtype="fp8")
    np.float64(107.37418)
    >>> required_bandwidth(32_768, "gpt-oss-120b", budget_ms=50.0)  # half its layers keep 128 tokens
    np.float64(24.253563)
    >>> required_bandwidth(32_768, "llama-3.1-70b", budget_ms=250.0, per_message_ms=0.0005, block_size=16)
    np.float64(124.62185)
    >>> required_bandwidth(32_768, "llama-3.1-70b", budget_ms=50.0, tp=8, cluster="hgx-h100-8x400g")  # NIC line rate
    np.float64(26.8435456)
    """
    if (given := np.asarray(num_input_tokens)).dtype.kind in "iu" and given.size and given.max() > 2**53:
        checked("num_input_tokens", given.astype(object))  # (a whole number as it is: 2**53 + 1 is above 2**53)
    tokens = nonnegative("num_input_tokens", num_input_tokens)
    budget = nonnegative("budget_ms", budget_ms, inf_ok=True)
    shape = _shape(num_input_tokens=num_input_tokens, budget_ms=budget_ms, kv_bytes_per_token=kv_bytes_per_token, **inputs)
    forward = _Forward.of(kv_bytes_per_token, inputs, shape)
    tokens, budget = (np.broadcast_to(a, shape).reshape(-1) for a in (tokens, budget))
    least = _least_bandwidth if cluster is None else functools.partial(_nic_line_rate, cluster)
    needed = least(forward, np.ceil(tokens), budget, slice(None))
    part = np.flatnonzero(np.floor(tokens) != tokens)
    if part.size:  # fractional counts (curves): the answers of the whole counts around them, in proportion
        below, above, share = least(forward, np.floor(tokens[part]), budget[part], part), needed[part], tokens[part] % 1
        needed[part] = np.clip((1 - share) * below + share * above, np.minimum(below, above), np.maximum(below, above))
    return _answer(shape, needed)


def _least_bandwidth(forward: _Forward, tokens: np.ndarray, budget: np.ndarray, rows: Any) -> np.ndarray:
    """Per row, the least float64 bandwidth (GB/s) with which the handoff of ``tokens`` (whole counts) on the
    forward model's ``rows`` meets the budget: the closed form, settled on the forward model."""
    fixed, nbytes = forward(tokens, np.inf, rows)  # the fixed costs, and the bytes
    if np.isnan(nbytes).any():
        raise InputError("kv_bytes_per_token", "unknown (NaN) bytes per token", "pass numbers >= 0 or known models")
    with np.errstate(divide="ignore", invalid="ignore"):  # (0 bytes need 0 GB/s; a budget within the fixed costs: inf)
        needed = np.where(nbytes == 0, 0.0, np.where(budget - fixed > 0, nbytes / ((budget - fixed) / 1000.0) / 1e9,
                                                     np.inf)).astype(np.float64)
    exact = np.flatnonzero(np.isfinite(needed) & (needed > 0))
    if exact.size:  # the closed form may miss by a rounding step either way: settle on the forward model
        top = np.float64(np.inf).view(np.int64)  # an infinite bandwidth moves bytes in no time: it fits
        at = exact if isinstance(rows, slice) else rows[exact]  # (the forward model's rows: all, or those given)

        def fits(bits: np.ndarray, some: np.ndarray) -> np.ndarray:
            bandwidth = np.clip(bits, 0, top).view(np.float64)
            return (bits > 0) & (forward(tokens[exact[some]], bandwidth, at[some])[0] <= budget[exact[some]])

        needed[exact] = least_true(needed[exact].view(np.int64), fits, top).view(np.float64)
    return needed


def _nic_line_rate(cluster: Any, forward: _Forward, tokens: np.ndarray, budget: np.ndarray, rows: Any) -> np.ndarray:
    """Per row, the least NIC line rate (GB/s) with which the cluster's handoff of ``tokens`` (whole counts) on the
    forward model's ``rows`` meets the budget, settled on the forward model; NaN where no flow crosses a NIC, inf
    where no line rate meets it. One row at a time: for a few questions, not millions."""
    from .network.placement import get_cluster

    base = get_cluster(cluster)
    nic = cast(Link, base.nic)  # (a Cluster resolves its nic)
    models = [forward.kv_bytes_per_token] if _resolve.is_one(forward.kv_bytes_per_token) else list(
        np.asarray(forward.kv_bytes_per_token, dtype=object))
    if len({str(m) for m in models}) > 1:
        raise InputError("kv_bytes_per_token", "a cluster's line rate is asked of one model at a time",
                         "ask once per model")
    if False not in through_nvlink(base, models[0], forward.options):
        return np.full(tokens.shape, np.nan)
    top = np.float64(np.inf).view(np.int64)
    rows = np.arange(tokens.size) if isinstance(rows, slice) else rows

    def at(rate_bits: np.ndarray, some: np.ndarray) -> np.ndarray:
        rates = np.clip(rate_bits, 0, top).view(np.float64)
        fits = np.zeros(some.size, dtype=bool)
        for k, (rate, row) in enumerate(zip(rates, some)):
            if rate > 0:
                c = dataclasses.replace(base, nic=dataclasses.replace(nic, bandwidth_gb_s=float(rate)))
                fits[k] = forward(tokens[row:row + 1], c, rows[row:row + 1])[0][0] <= budget[row]
        return fits

    start = np.full(tokens.shape, nic.bandwidth_gb_s).view(np.int64)
    unlimited = dataclasses.replace(base, nic=dataclasses.replace(nic, bandwidth_gb_s=np.inf))
    fixed, nbytes = forward(tokens, unlimited, rows)  # an infinite line rate: the fixed costs remain
    needed = np.where((nbytes == 0) | (budget == np.inf), 0.0, np.inf)  # (none needed, as on a link; else none fits)
    search = np.flatnonzero((nbytes > 0) & (fixed < budget) & (budget < np.inf))
    if search.size:
        needed[search] = least_true(start[search], lambda bits, r: at(bits, search[r]), top).view(np.float64)
    return needed


def _every_or_none(forward: _Forward, spec: Any, budget: np.ndarray, window: np.ndarray, chunk: np.ndarray,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: whether the full transfer time stops growing with the prompt (at a prompt ``N`` past every window, at
    a chunk's end, and at ``2 N`` it is the same; streamed, with no compute to hide behind), whether the delay is
    unknown (NaN: a bandwidth of 0, unknown bytes or prefill), and whether an empty prompt already misses the budget."""
    rows = np.arange(budget.size)
    chunk_end = np.maximum(chunk, 1)
    far = np.ceil(np.maximum(2.0**40, window) / chunk_end) * chunk_end  # a whole number of chunks
    whole = forward if forward.options.overlap != "layerwise" else forward._replace(inputs={
        **{k: v for k, v in forward.inputs.items() if k != "prefill_tokens_per_s"}, "prefill_ms": 0.0})
    at, twice = whole(far, spec, rows)[0], whole(2 * far, spec, rows)[0]
    empty, streamed = forward(np.zeros(budget.size), spec, rows)[0], forward(far, spec, rows)[0]
    return twice <= at, np.isnan(at) | np.isnan(streamed), empty > budget


def _marks(forward: _Forward, window: np.ndarray, chunk: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row, where the delay's form changes with the prompt, as :func:`perfmodel.replay.summaries.highest_upto`
    reads them (streamed, a chunked model's chunk must be a whole number of message regions)."""
    def given(name: str, default: float) -> np.ndarray:
        value = forward.inputs.get(name)
        return np.broadcast_to(np.asarray(default if value is None else value, dtype=np.float64), window.shape)

    streamed = forward.options.overlap == "layerwise"
    block = np.nan_to_num(given("block_size", 0.0))  # (0 or NaN: none)
    region = block * given("blocks_per_message", 1.0)
    step = np.where(np.isfinite(region), region, block)  # (a region's tokens; one region a layer: a block's)
    uneven = streamed & (chunk > 0) & (block > 0) & (np.mod(chunk, np.where(block > 0, step, 1.0)) != 0)
    if uneven.any():
        k = int(np.argmax(uneven))
        raise InputError("block_size", f"message regions of {step[k]:g} tokens (block_size x blocks_per_message) do "
                         f"not divide the model's chunk of {chunk[k]:g} tokens, as streaming layer by layer needs",
                         f"pass a block_size (times blocks_per_message) that divides {chunk[k]:g}, e.g. block_size="
                         f"{math.gcd(int(block[k]), int(chunk[k]))} with blocks_per_message=1")
    return given("layerwise_min_tokens", 0.0) * streamed, window, chunk, block, region


@without_coerce_hint
@documented(extra={name: _INVERSE[name] for name in ("budget_ms", "inputs")})
def max_tokens_within(kv_transfer_bandwidth: Any, kv_bytes_per_token: Any, *, budget_ms: ArrayLike,
                      **inputs: Any) -> np.int64 | np.float64 | NDArray[np.int64] | NDArray[np.float64]:
    """The longest prompt (tokens) such that every full-prompt handoff up to it fits in ``budget_ms``, each
    handoff alone (no contention).

    A count of tokens, int64: ``-1`` where not even an empty prompt fits (a state and its latency alone exceed the
    budget). float64 when some answer is not a count: ``inf`` where every prompt fits (nothing that grows with the
    prompt costs anything: its tokens move no bytes or move them at an infinite bandwidth, and no per-block or
    full-attention per-message cost applies; and the highest delay fits), NaN where the delay is unknown (a
    bandwidth of 0), or beyond int64. Checked against the forward model, so
    ``handoff_delay_ms(max_tokens_within(bw, b, budget_ms=x), bw, b) <= x`` holds exactly. Where the delay does not
    grow with the prompt, the answer is the longest N for which *every* prompt of up to N tokens fits (never
    counting on a drop): chunked-attention models' bytes drop at each chunk boundary, and streamed layer by layer
    (``overlap="layerwise"``) prompts shorter than ``layerwise_min_tokens`` go whole while a compute that grows with
    the prompt hides more of it (a window model's delay falls past its window). Streamed, a chunked model's chunk
    must be a whole number of message regions (``block_size * blocks_per_message``). ``kv_transfer_bandwidth`` may
    be a link name or :class:`perfmodel.Link` (its latency and per-block and per-message costs are added), or one
    :class:`perfmodel.Cluster` or cluster preset name (its handoff's flows simulated), ``kv_bytes_per_token`` a
    model name, config or path, each or an array of these; every other input is taken as
    :func:`perfmodel.handoff_delay_ms` takes it. Inputs broadcast; scalars in, a numpy scalar out.

    Parameters
    ----------
    @inputs

    Returns
    -------
    numpy.int64 or numpy.ndarray
        Tokens: the longest prompt whose handoff, and every shorter one's, meets the budget (int64;
        float64 with ``inf`` where every prompt fits).

    Examples
    --------
    >>> from perfmodel import max_tokens_within
    >>> max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=[10.0, 50.0])
    array([1525, 7629])
    >>> max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=50.0)
    np.int64(7629)
    >>> max_tokens_within("ib-ndr", "gpt-oss-120b", budget_ms=50.0)  # 2x the prompt of full attention
    np.int64(67688)
    >>> max_tokens_within("nixl-ucx-rdma", "llama-3.1-70b", budget_ms=50.0, block_size=16)  # 0.73 us per message
    np.int64(1769)
    >>> max_tokens_within(float("inf"), "llama-3.1-70b", budget_ms=50.0)  # every prompt fits
    np.float64(inf)
    >>> max_tokens_within("hgx-h100-8x400g", "llama-3.1-70b", budget_ms=50.0, tp=8)  # 8 NICs, one per rank
    np.int64(61035)
    """
    budget = nonnegative("budget_ms", budget_ms, inf_ok=True)
    shape = _shape(budget_ms=budget_ms, kv_transfer_bandwidth=kv_transfer_bandwidth,
                   kv_bytes_per_token=kv_bytes_per_token, **inputs)
    forward = _Forward.of(kv_bytes_per_token, inputs, shape)
    spec = _flat(kv_transfer_bandwidth, shape)  # (the forward model takes links as they are: their costs added)
    from .network.placement import get_cluster, is_cluster

    if is_cluster(spec):  # the search settles on the forward model: its NICs' capacity only starts it
        spec = get_cluster(spec)
        link = _resolve.LinkTerms(spec.nic_capacity_gb_s, None, None, None)
    else:
        link = _resolve.link_terms(spec)
    given = np.asarray(link.bandwidth_gb_s, dtype=np.float64)  # (NaN: unknown, as everywhere: the answer is NaN)
    known = nonnegative("kv_transfer_bandwidth", np.where(np.isnan(given), 0.0, given), inf_ok=True)
    bandwidth = np.broadcast_to(np.where(np.isnan(given), np.nan, known), shape).reshape(-1)
    budget = np.broadcast_to(budget, shape).reshape(-1)
    latency = np.broadcast_to(_resolve.add(nonnegative("latency_ms", inputs.get("latency_ms", 0.0)), link.latency_ms),
                              shape).reshape(-1)
    terms = (np.broadcast_to(t, budget.shape) for t in forward.terms())  # (flat, as the forward's inputs)
    per_token, _, window, _, chunk, _ = terms
    with np.errstate(divide="ignore", invalid="ignore"):
        allowed = (budget - latency) / 1000.0 * (bandwidth * 1e9)  # bytes that fit
        tokens = np.where(budget - latency >= 0, np.floor(allowed / per_token), 0.0)  # the closed form of bytes
    marks = _marks(forward, window, chunk)
    steady, unknown, none = _every_or_none(forward, spec, budget, window, chunk)
    every = np.isposinf(budget) & ~unknown  # (an infinite budget: every prompt fits, however its delay grows)
    search = np.flatnonzero(~every & ~none & ~unknown)
    if search.size:  # the forward model's own answer, searched from the closed form's

        def too_long(n: np.ndarray, rows: np.ndarray) -> np.ndarray:
            """Whether some prompt of up to n tokens misses the budget (asked where the highest delay can be)."""
            at = search[rows]
            prompts = highest_upto(n, tuple(m[at] for m in marks))
            link_rows = np.repeat(spec[at], prompts.shape[1]) if isinstance(spec, np.ndarray) else spec
            delays = forward(prompts.reshape(-1), link_rows, np.repeat(at, prompts.shape[1]))[0]
            return delays.reshape(prompts.shape).max(axis=1) > budget[at]

        # beyond 2**53 tokens float64 cannot tell one count from the next: the closed form of the bytes stands
        huge = ~too_long(np.full(search.size, 2**53, dtype=np.int64), np.arange(search.size))
        every[search] = huge & steady[search]  # none up to 2**53 misses, and the time stops growing: none ever does
        far = np.where(np.isfinite(tokens[search]), np.maximum(tokens[search], 2**53 - 1), 2**53 - 1)
        start = np.clip(np.nan_to_num(tokens[search], posinf=2**53), 0, 2**53 - 1).astype(np.int64) + 1
        found = np.empty(search.size)
        if (~huge).any():
            rows = np.flatnonzero(~huge)
            found[rows] = least_true(start[rows], lambda n, r: too_long(n, rows[r]), 2**53) - 1
        tokens[search] = np.where(huge, far, found)
    tokens = np.where(unknown, np.nan, np.where(none, -1.0, tokens))
    answer = np.where(every, np.inf, tokens)
    if bool((np.isfinite(answer) & (answer < 2.0**63)).all()):  # a count; float64 only for inf, NaN or beyond int64
        answer = answer.astype(np.int64)
    return _answer(shape, answer)
