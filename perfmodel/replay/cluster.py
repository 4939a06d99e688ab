"""A trace replayed on a :class:`perfmodel.Cluster`: what only a cluster reads, checked, and the result's table.

Both replays come here (:class:`ClusterHandoffs`) from their one edge, :func:`perfmodel.replay.edge.handoffs_on`,
when ``kv_transfer_bandwidth`` (or ``link``) is a cluster; the simulation is :mod:`perfmodel.replay.on_cluster`. :func:`cluster_summary` adds each
resource's utilisation and the share of requests each one bottlenecked to :func:`perfmodel.summarize`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pandas as pd

from ..errors import InputError, shown, warn
from ..inputs.coerce import read_only
from ..inputs.table import check_count
from ..inputs.words import count
from ..kernels import cluster as _kernel
from ..kernels import serving
from ..network.clusters import HeadTerms, head_terms, with_fields
from ..network.links import Link
from ..network.placement import get_cluster, refuse_model_options
from . import on_cluster as _cluster_replay
from .prepared import (
    byte_column,
    bytes_name,
    layerwise_lead,
    link_column,
    notice_first_compile,
    per_request_given,
    request_values,
    terms_per_request,
)

# (ClusterHandoffs, with_cluster and cluster_summary serve the replays and summarize: not the API)
__all__ = ["resource_table"]

FIRST_COMPILE_S = 25  # about how long the replay's kernel takes to compile on a cold cache (s)


def with_cluster(given: dict[str, Any]) -> dict[str, Any]:
    """A replay grid's configuration with a ``cluster`` axis or a cluster's fields (``nics_per_node``,
    ``nic``, ...) as replay keywords: the cluster (the ``cluster`` value, else the link's) with those
    fields replaced goes where the link goes.

    >>> from perfmodel import Cluster
    >>> c = with_cluster({"cluster": Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8), "nics_per_node": 4})
    >>> c["kv_transfer_bandwidth"].nics_per_node, c["kv_transfer_bandwidth"].name
    (4, 'cluster (nics_per_node=4)')
    """
    from ..inputs.table import CLUSTER_FIELDS
    from ..network.placement import is_cluster

    given = dict(given)
    base = given.pop("cluster", None)
    fields = {name: given.pop(name) for name in CLUSTER_FIELDS if name in given}
    fields = {k: v.item() if isinstance(v, np.generic) else v for k, v in fields.items()}
    if base is not None and (given.get("link") is not None or given.get("kv_transfer_bandwidth") is not None):
        raise InputError(
            "cluster",
            "a cluster and a link are both given (a cluster goes where the link goes)",
            "give the cluster, or the link, once",
        )
    if base is None:
        key = "link" if given.get("link") is not None else "kv_transfer_bandwidth"
        base = given.pop(key, None)
        if base is None or np.ndim(base) != 0 or not is_cluster(base):
            raise InputError(
                ", ".join(fields),
                f"vary a cluster's fields, but the link is {base!r}",
                "give a cluster (a perfmodel.Cluster or a cluster preset) as the link or a cluster axis",
            )
    cluster = get_cluster(base)
    cluster = with_fields(cluster, fields)
    given["kv_transfer_bandwidth"] = cluster
    return given


def _finite(cluster: Any) -> None:
    """Refuse a cluster with a link of infinite bandwidth, as a replay on a link refuses one."""
    for what, link in (("nic", cluster.nic), ("nvlink", cluster.nvlink)):
        if link is not None and not math.isfinite(link.bandwidth_gb_s):
            raise InputError(
                f"cluster {cluster.name!r}",
                f"{what} {link.name!r} has a bandwidth of inf GB/s: a replay "
                "needs a finite bandwidth (upstream's replay refuses +inf)",
                f"pass a {what} of finite bandwidth (a handoff alone, handoff_delay_ms, takes +inf: "
                "its bytes move in 0 ms)",
            )


def _sized(cluster: Any) -> None:
    """Warn of an oversubscribed rail fabric whose size is the placement's (``nodes`` unset, the contract's rule
    5): its leaf uplinks grow with the workers a replay places, so replays of other worker counts (a grid, a
    sizing question) price other fabrics, even handoffs alone."""
    if cluster.fabric == "rail" and cluster.oversubscription > 1 and cluster.nodes is None:
        warn(
            f"cluster {cluster.name!r}: its leaf uplinks carry (NICs on a leaf) x line rate / "
            f"{cluster.oversubscription:g}, and with nodes unset a leaf holds one NIC per node the replay places: "
            "replays of other worker counts price other fabrics. Give the cluster's size, nodes=N, to fix it"
        )


#: The columns of a row of the replay's table of terms (:class:`perfmodel.kernels.replay.Requests`' ``kv_terms``) that
#: :func:`perfmodel.kernels.handoff.messages_of` takes, in its order: full, window, chunk and state messages; window
#: and chunk tokens.
_MESSAGE_COLUMNS = (6, 7, 8, 9, 2, 4)


def _terms(c: SimpleNamespace, trace: pd.DataFrame, bytes_spec: Any, d: int) -> HeadTerms:
    """The model's bytes by KV head (a number of bytes: one head, with tp = decode_tp = 1)."""
    name = bytes_name(c)  # (as the call named it)
    if isinstance(bytes_spec, str) and bytes_spec in trace.columns:  # one model in all: its value
        values = trace[bytes_spec].unique()
        if len(values) > 1:
            raise InputError(
                name,
                f"trace column {bytes_spec!r} mixes models ({len(values):,} models or sizes), but a replay on a cluster "
                "places one model's KV heads on its ranks",
                "replay each model's requests in a call of its own",
            )
        bytes_spec = (values[0].item() if isinstance(values[0], np.generic) else values[0]) if len(values) else 0.0
    state = c.state_bytes
    if state is not None:
        if isinstance(state, str) or np.ndim(state) != 0:
            raise InputError(
                "state_bytes",
                "a replay on a cluster takes one state size (not a column or array)",
                "pass one number of state bytes (each decode rank receives it)",
            )
        from ..handoff import checked

        state = float(checked("state_bytes", state))
        if not (math.isfinite(state) and state >= 0):  # (NaN: unknown, which a replay cannot move)
            raise InputError(
                "state_bytes",
                f"{c.state_bytes!r} is unknown (NaN), and a replay moves every state",
                "pass state_bytes >= 0, or leave it out (the model's own)",
            )
    if isinstance(bytes_spec, (str, Mapping)) or hasattr(bytes_spec, "__fspath__"):
        try:
            return head_terms(bytes_spec, kv_cache_dtype=c.kv_cache_dtype, decode_tp=d, state_bytes=state)
        except InputError:
            raise
        except ValueError as error:  # an unknown model: named as the call named it, as on a link
            problem, _, fix = str(error).partition(". Fix: ")
            raise InputError(name, problem, fix.rstrip(".") or "pass a known model") from None
    if np.ndim(bytes_spec) != 0 or isinstance(bytes_spec, bool):
        raise InputError(
            name,
            f"a replay on a cluster takes one model, got {shown(bytes_spec)} (its KV heads are placed on the "
            "cluster's ranks once)",
            "pass one model (e.g. 'llama-3.1-70b') or one number of bytes per token; replay each model's requests "
            "in a call of its own",
        )
    value = float(bytes_spec)
    if not (math.isfinite(value) and value >= 0):
        raise InputError(
            name,
            f"{bytes_spec!r} is not a finite number of bytes >= 0",
            "pass a model or a number of bytes per token >= 0",
        )
    refuse_model_options(c.tp, d, c.kv_cache_dtype)
    return HeadTerms(1, value, state=float(state or 0.0))


def _prefill_of(trace: pd.DataFrame, workers: int | None, arrival: np.ndarray) -> tuple[np.ndarray, int]:
    """Each request's prefill worker (precise rule 10: round robin in trace order) and the number of prefill
    workers; a warning where that order is not the arrivals' (``arrival``, ms), with more than one worker."""
    n = len(trace)
    if "prefill_worker" not in trace.columns:
        p = 1 if workers is None else workers
        if p > 1 and bool(np.any(arrival[1:] < arrival[:-1])):
            warn(
                f"the trace is not in arrival order: its {p} prefill workers take the requests round robin in the "
                "trace's row order (the result's prefill_worker column shows each request's). Sort the trace by "
                "arrival_ms for arrival order, or give it a prefill_worker column"
            )
        return np.arange(n, dtype=np.int64) % p, p
    column = trace["prefill_worker"]
    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        raise InputError(
            "trace column 'prefill_worker'",
            f"holds {column.dtype} values, not worker numbers",
            "give every row a whole number below prefill_workers (e.g. .astype('int64'), or drop the "
            "column: round robin)",
        )
    values = column.to_numpy(dtype=np.float64, na_value=np.nan) if n else np.zeros(0)
    bad = ~((values >= 0) & (values == np.floor(values)) & np.isfinite(values))
    p = workers if workers is not None else (int(values.max()) + 1 if n and not bad.any() else 1)
    bad |= values >= p
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError(
            "trace column 'prefill_worker'",
            f"{count(int(bad.sum()), 'row')} {'is' if bad.sum() == 1 else 'are'} not a prefill worker 0..{p - 1}, "
            f"first at row {trace.index[first]!r}: {column.iloc[first]!r}",
            "give every row a whole number below prefill_workers (or drop the column: round robin)",
        )
    return values.astype(np.int64), p


class ClusterHandoffs:
    """A replay's handoffs on a cluster, as :func:`perfmodel.replay.edge.handoffs_on` decides: the cluster
    ``cluster_spec`` and the model ``bytes_spec`` as read there, the options both networks read checked there.
    When a replay asks, the options a cluster decides are refused
    (:func:`perfmodel.replay.on_cluster.refuse_on_cluster`) and the rest is read (:func:`cluster_inputs`)."""

    def __init__(
        self, prepared: Any, c: SimpleNamespace, cluster_spec: Any, bytes_spec: Any, destination_missing: bool
    ) -> None:
        self.prepared, self.c = prepared, c
        self.specs = (cluster_spec, bytes_spec, destination_missing)

    def _inputs(self, prefill: Any) -> tuple[SimpleNamespace, tuple[np.ndarray, np.ndarray]]:
        """:func:`cluster_inputs` of this configuration, each request's prefill worker from ``prefill``; and
        layer by layer, each request's lead and the share of its time alone sent after its prefill ends
        (:func:`perfmodel.replay.prepared.layerwise_lead`: its rules checked, streaming or not)."""
        _cluster_replay.refuse_on_cluster(self.c)
        prepared, c, (cluster_spec, bytes_spec, destination_missing) = self.prepared, self.c, self.specs
        message_terms = _message_terms_of(prepared.trace, bytes_spec, c)
        on = cluster_inputs(prepared, c, cluster_spec, bytes_spec, destination_missing, message_terms, prefill)
        posts = float(on.config["message_terms"].size > 0)  # (a message costs something: layers count messages)
        return on, layerwise_lead(prepared.trace, prepared.tokens, bytes_spec, c, posts)

    def _network(
        self,
        on: SimpleNamespace,
        ready_sorted: np.ndarray,
        prefill_of: np.ndarray,
        out: Any,
        streamed: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> Any:
        """The kernel's network for the loop (:func:`perfmodel.kernels.cluster.new_run`), before its first
        request: the structure and configuration of ``on`` (:func:`cluster_inputs`, time bins over
        ``ready_sorted``), each request's prefill worker ``prefill_of`` (the array itself: the TTFT loop writes the
        workers it routes to there), outputs to ``out``; ``streamed``, layer by layer: each request's prefill end
        and the share of its time alone sent after it."""
        p = self.prepared
        st, cfg = _cluster_replay.kernel_inputs(
            ready_sorted=ready_sorted, n_unique=p.n_unique, resources=on.resources, pairs=on.pairs, terms=on.terms,
            config=on.config,
        )  # fmt: skip
        return _kernel.new_run(
            p.tokens.astype(np.int64), p.blocks, p.offsets, np.asarray(prefill_of, dtype=np.int64), st, cfg, out,
            read_only(np.asarray(on.blocks_per_message, np.float64)),
            None if streamed is None else (read_only(streamed[0]), read_only(streamed[1])),
        )  # fmt: skip

    def replay(self) -> pd.DataFrame:
        """The handoffs alone (the table :func:`perfmodel.replay_handoffs` returns). Layer by layer, each
        request's first layer group may go before its prefill ends (its lead), and the share of its time alone
        sent after its prefill ends is counted as on a link."""
        prepared, c = self.prepared, self.c
        arrival = prepared.ready_ms if prepared.arrival_ms is None else prepared.arrival_ms
        on, lead = self._inputs(lambda workers: _prefill_of(prepared.trace, workers, arrival))
        streaming = lead if c.overlap != "none" else None
        ready, base = prepared.relative_ready()  # (every duration from relative times; timestamps shifted back)
        available = ready if streaming is None else ready - streaming[0]  # (when each handoff may start)
        notice_first_compile(FIRST_COMPILE_S)
        out = _kernel.Outputs.empty(len(prepared.tokens))
        order = np.argsort(available, kind="stable").astype(np.int64)
        run = self._network(
            on, available[order], on.prefill_of, out, None if streaming is None else (ready, streaming[1])
        )
        try:
            net = serving.replay(order, np.ascontiguousarray(available, np.float64), run, run.cfg.workers)
        except serving.Unfinished:
            finite_handoffs(prepared.trace, out)
            raise
        loads = (net.sim.loads.busy, net.sim.loads.peak, net.sim.loads.bins, net.sim.loads.touched)
        replayed = _cluster_replay.replayed(out, on.prefill_of, net.st, net.cfg, loads)  # (net's: its bins may widen)
        return _frame(
            prepared.trace,
            prepared.tokens,
            (ready, base, None if streaming is None else (available, streaming[1])),
            replayed,
            on.resources,
            c,
            on.cluster,
            on.prefill_workers,
            on.decode_workers,
            self.specs[2],
        )

    def under_load(self, serving_inputs: SimpleNamespace) -> SimpleNamespace:
        """The TTFT replay's hooks (:meth:`perfmodel.replay.edge.Handoffs.under_load`): each request's prefill
        worker the serving's own array (written at arrival where the loop routes)."""
        prepared, c, n = self.prepared, self.c, len(self.prepared.trace)
        on, _ = self._inputs(lambda _: (serving_inputs.prefill_worker, serving_inputs.prefill_workers))
        out = _kernel.Outputs.empty(n)
        tokens = prepared.tokens.astype(np.int64)

        def start(horizon: np.ndarray) -> Any:
            return self._network(on, horizon, serving_inputs.prefill_worker, out)

        def wrap(net: Any, base: float) -> tuple[dict[str, Any], dict[str, Any]]:
            loads = net.sim.loads
            replayed = _cluster_replay.replayed(
                out, serving_inputs.prefill_worker, net.st, net.cfg, (loads.busy, loads.peak, loads.bins, loads.touched)
            )
            handoffs = {
                "decode_worker": out.decode_worker,
                "transfer_end_ms": out.end,
                "link_wait_ms": link_wait_ms(out.end - out.start, out.alone_ms, out.end),
                "transfer_ms": out.alone_ms,
                "link": link_column(np.full(n, -1, np.int64)),
                "cached_tokens": out.cached,
                "charged_tokens": out.charged,
                "transfer_bytes": byte_column(out.bytes),
                "flows": out.flows,
                "bottleneck": bottleneck_column(out, on.resources),
            }
            attrs = dict(
                links=1, cluster=on.cluster.name, routing=c.routing, **resource_attrs(replayed, on.resources, base)
            )
            return handoffs, attrs

        return SimpleNamespace(
            times=prepared.relative_ready(),
            tokens=tokens,
            admitted=np.zeros(len(tokens)),  # (the loop's own: the cluster writes each handoff's start too)
            decode_workers=on.decode_workers,
            start=start,
            wrap=wrap,
            unfinished=lambda: finite_handoffs(prepared.trace, out),  # (a handoff of inf ms: named)
        )


def _message_terms_of(trace: pd.DataFrame, bytes_spec: Any, c: SimpleNamespace) -> Any:
    """For a replay on a cluster: ``shape -> the model's message terms`` (a row of the replay's table of terms,
    for the split ``shape`` of its KV heads), as :func:`perfmodel.replay.cluster.cluster_inputs` asks for them: one
    layer count (the cluster's kernel counts every request's messages with one row)."""

    def message_terms(shape: dict[str, Any]) -> np.ndarray:
        if c.num_layers is not None and per_request_given(c.num_layers):
            raise InputError(
                "num_layers",
                f"a replay on a cluster counts messages with one layer count, got {shown(c.num_layers)}",
                "pass one num_layers (layer-wise streaming alone takes one "
                "per request), or replay each layer count in a call of its own",
            )
        return terms_per_request(trace, bytes_spec, shape, None, (c.kv_layout, c.num_layers), bytes_name(c))[1][0]

    return message_terms


def cluster_inputs(
    prepared: Any,
    c: SimpleNamespace,
    cluster_spec: Any,
    bytes_spec: Any,
    destination_missing: bool,
    message_terms: Any,
    prefill: Any,
) -> SimpleNamespace:
    """A replay's configuration ``c`` (the options both networks read checked at the edge,
    :func:`perfmodel.replay.edge.handoffs_on`) on the cluster ``cluster_spec``, resolved: the cluster, the
    model's terms, each request's prefill worker and their number (``prefill(c.prefill_workers)``), the
    resources and every pair's flows, the kernel's configuration (a dict:
    :func:`perfmodel.replay.on_cluster.kernel_inputs`) and the decode workers. Shared by the replay and the TTFT
    replay (:func:`perfmodel.replay.ttft.replay_ttft`)."""

    cluster = get_cluster(cluster_spec)
    _finite(cluster)
    _sized(cluster)
    block_size, decode_workers, capacity = c.block_size, c.decode_workers, c.decode_cache_blocks
    prefill_workers = check_count("prefill_workers", c.prefill_workers, optional=True)
    tp = check_count("tp", c.tp)
    d = tp if c.decode_tp is None else check_count("decode_tp", c.decode_tp)
    costs = (  # the caller's; each flow adds the transport's and its own (Flow.fixed_terms)
        float(c.latency_ms),  # (each one number, checked at the edge: perfmodel.replay.edge)
        float(c.per_message_ms),
        float(c.per_block_ms),
    )
    blocks_per_message = request_values(prepared.trace, "blocks_per_message", c.blocks_per_message)
    terms = _terms(c, prepared.trace, bytes_spec, d)
    prefill_of, p = prefill(prefill_workers)
    resources, pairs = _cluster_replay.pairs_of(cluster, terms, tp, d, p, decode_workers, costs)
    posts = (
        costs[1] + cluster.flow_transport.per_message_ms > 0
        or cast(Link, cluster.nic).per_message_ms > 0
        or (cluster.nvlink is not None and cast(Link, cluster.nvlink).per_message_ms > 0)
    )
    messages = np.zeros(0)  # (none: messages cost nothing)
    if posts:
        kv = message_terms(dict(kv_cache_dtype=c.kv_cache_dtype, tp=tp, scope="rank", decode_tp=d))
        messages = np.array([kv[k] for k in _MESSAGE_COLUMNS], dtype=np.float64)
    config = dict(
        hash_block_tokens=int(prepared.hash_block_tokens),
        block_size=int(block_size),
        destination_missing=bool(destination_missing),
        capacity=capacity,
        routing=c.routing,
        fair=c.contention == "fair",
        message_terms=messages,
    )
    return SimpleNamespace(
        cluster=cluster,
        terms=terms,
        prefill_of=prefill_of,
        prefill_workers=p,
        resources=resources,
        pairs=pairs,
        config=config,
        decode_workers=decode_workers,
        blocks_per_message=blocks_per_message,
    )


def _frame(
    trace: pd.DataFrame,
    tokens: np.ndarray,
    times: tuple[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None],
    replayed: Any,
    resources: Any,
    c: SimpleNamespace,
    cluster: Any,
    p: int,
    decode_workers: int,
    destination_missing: bool,
) -> pd.DataFrame:
    """The per-request table; ``times``: the ready times (prefill ends) from the earliest, the earliest (durations
    from the former, timestamps shifted back by the latter), and streamed layer by layer (else None): when each
    handoff could start (before its prefill ends) and the share of its time alone sent after its prefill ends."""
    out = replayed.out
    ready, base, streamed = times
    if streamed is None:
        raw = out.end - ready
        wait = link_wait_ms(raw, out.alone_ms, out.end)
        delay = np.where(wait < 0, raw, out.alone_ms + wait)  # (as on a link: queue + transfer, exact unhindered)
    else:  # its wait: beyond what it takes streamed alone; its delay, as on a link: from its prefill's end
        available, last_fraction = streamed
        alone_end = np.maximum(out.alone_ms, ready - available + out.alone_ms * last_fraction)
        wait = link_wait_ms(out.end - available, alone_end, out.end)
        delay = out.end - ready
    queue = np.maximum(wait, 0.0)
    transfer_bytes = byte_column(out.bytes)
    columns = {
        "arrival_ms": trace["arrival_ms"].to_numpy(dtype=np.float64, copy=True),
        "num_input_tokens": tokens.copy(),
        "prefill_worker": replayed.prefill_worker,
        "decode_worker": out.decode_worker,
        "link": link_column(np.full(len(trace), -1, np.int64)),
        "cached_tokens": out.cached,
        "charged_tokens": out.charged,
        "transfer_bytes": transfer_bytes,
        "saved_bytes": byte_column(out.saved) if transfer_bytes.dtype == np.int64 else out.saved,
        "transfer_ms": out.alone_ms,
        "queue_ms": queue,
        "handoff_delay_ms": delay,
        "start_ms": out.start + base if base else out.start,
        "end_ms": out.end + base if base else out.end,
        "flows": out.flows,
        "bottleneck": bottleneck_column(out, resources),
    }
    result = pd.DataFrame(columns, index=trace.index, copy=False)
    result.attrs.update(
        contention=c.contention,
        links=1,
        mode="destination_missing" if destination_missing else "full_prompt",
        cluster=cluster.name,
        routing=c.routing,
        prefill_workers=p,
        decode_workers=decode_workers,
        block_size=c.block_size,
        overlap=c.overlap,
        kv_layout=c.kv_layout,
        requests=len(trace),
        **resource_attrs(replayed, resources, base),
    )
    return result


def finite_handoffs(trace: pd.DataFrame, out: Any) -> None:
    """Refuse a replay on a cluster whose handoff never ends (its bytes, or its time alone in the cluster,
    overflowed to inf: more than a time in ms holds), naming the first request; else return (the loop's own
    error stands)."""
    endless = ~(np.isfinite(out.bytes) & np.isfinite(out.alone_ms))
    if endless.any():
        first = int(np.argmax(endless))
        nbytes, alone = float(out.bytes[first]), float(out.alone_ms[first])
        raise InputError(
            "kv_bytes_per_token" if not math.isfinite(nbytes) else "kv_transfer_bandwidth",
            f"request {trace.index[first]!r}'s handoff moves {nbytes!r} bytes and takes {alone!r} ms alone in the "
            "cluster (its bytes over its rates, plus its fixed costs): it never ends",
            "pass realistic bytes per token (a model, or a number), NIC rates in GB/s and fixed costs in ms "
            "(latency_ms, per_block_ms, per_message_ms)",
        )


def link_wait_ms(raw_ms: np.ndarray, alone_ms: np.ndarray, end_ms: np.ndarray) -> np.ndarray:
    """Each handoff's time on a cluster beyond its time alone (ms), from its time from start to end and its end
    (relative ms): 0 within rounding (1e-9 of its time alone, or 8 ulps of its end: the times it is the difference
    of), negative where others sped it up (max-min can: another flow slows one of its flows' rivals).

    >>> link_wait_ms(np.array([3.0, 2.0 + 1e-12, 1.5]), np.array([2.0, 2.0, 2.0]), np.full(3, 1e4)).tolist()
    [1.0, 0.0, -0.5]
    """
    wait = raw_ms - alone_ms
    rounding = np.maximum(1e-9 * alone_ms, 8.0 * np.spacing(np.abs(end_ms)))
    return np.where(np.abs(wait) <= rounding, 0.0, wait)


def bottleneck_column(out: Any, resources: Any) -> pd.Categorical:
    """Each handoff's bottleneck (the resource named, missing where it moved nothing) from the kernel's codes."""
    names = list(resources.names)
    if not names:
        return pd.Categorical([None] * len(out.bottleneck))
    return pd.Categorical.from_codes(out.bottleneck, categories=names)


def resource_attrs(replayed: Any, resources: Any, base: float) -> dict[str, Any]:
    """A replay's attrs on a cluster: each resource's kind, capacity, load integral and peak, the span from the
    first moving handoff's start to the last end (and its ends' magnitude), the binned utilisation."""
    out = replayed.out
    moving = out.bytes > 0
    first, last = (float(out.start[moving].min()), float(out.end[moving].max())) if moving.any() else (0.0, 0.0)
    return dict(
        resources={
            name: {
                "kind": resources.kinds[k],
                "capacity_gb_s": resources.capacities[k],
                "busy_gb_ms": float(replayed.busy[k]),
                "peak_gb_s": float(replayed.peak[k]),
            }
            for k, name in enumerate(resources.names)
        },
        span_ms=last - first,
        span_ends_ms=max(abs(first), abs(last)),
        utilisation=_binned(replayed, resources, base) if replayed.touched.any() else None,
    )


def _binned(replayed: Any, resources: Any, base: float) -> dict[str, Any]:
    """Each resource's mean utilisation per time bin (its load's integral over capacity x bin width), for the
    resources that carried a load, over the bins up to the last one any of them reached (the first bin starting
    ``base`` ms after the replay's relative time 0)."""
    written = replayed.bins[replayed.touched]
    bins = 1 + int(np.flatnonzero((written != 0).any(axis=0)).max(initial=0))
    series = {
        resources.names[r]: (replayed.bins[r, :bins] / (resources.capacities[r] * replayed.bin_ms)).tolist()
        for r in np.flatnonzero(replayed.touched)
    }
    return {"start_ms": replayed.origin_ms + base, "bin_ms": replayed.bin_ms, "series": series}


def resource_table(replay: pd.DataFrame) -> pd.DataFrame:
    """Each resource of a replay on a cluster: kind, capacity (GB/s), mean and peak utilisation, and the
    share of handoffs it bottlenecked.

    Mean utilisation: the bytes it carried over its capacity times the replay's span (first handoff's
    start to last end); peak: its largest load over its capacity (loads change only when flows start or
    end). Under ``contention="none"`` handoffs do not share the cluster, so no load is simulated: both
    are missing (NaN), and only the bottleneck shares are known.

    Parameters
    ----------
    replay
        A result of :func:`perfmodel.replay_handoffs` on a cluster.

    Returns
    -------
    pandas.DataFrame
        Indexed by resource name: ``kind``, ``capacity_gb_s``, ``mean_utilisation``, ``peak_utilisation``,
        ``bottleneck_share``.

    Examples
    --------
    >>> import perfmodel
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    >>> r = perfmodel.replay_handoffs(perfmodel.synthetic_trace(50, 20, seed=0), c, 1000.0, contention="fair")
    >>> resource_table(r)["bottleneck_share"].to_dict()  # (ties: the first on the path)
    {'node0/nic0/out': 1.0, 'node1/nic0/in': 0.0}
    """
    found = replay.attrs.get("resources")
    if found is None:
        raise InputError(
            "replay",
            "has no resources (it was not replayed on a cluster)",
            "pass a replay_handoffs(...) result whose link is a perfmodel.Cluster",
        )
    span = float(replay.attrs.get("span_ms", 0.0))
    shared = replay.attrs.get("contention") != "none"  # (each handoff alone: no load to speak of)
    handoffs = max(int((replay["flows"] > 0).sum()), 1)
    counts = replay["bottleneck"].value_counts()
    rows = {
        name: {
            "kind": v["kind"],
            "capacity_gb_s": v["capacity_gb_s"],
            "mean_utilisation": (v["busy_gb_ms"] / (v["capacity_gb_s"] * span) if span > 0 else 0.0)
            if shared
            else np.nan,
            "peak_utilisation": v["peak_gb_s"] / v["capacity_gb_s"] if shared else np.nan,
            "bottleneck_share": float(counts.get(name, 0)) / handoffs,
        }
        for name, v in found.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def cluster_summary(replay: pd.DataFrame) -> dict[str, float]:
    """Per-resource figures for :func:`perfmodel.summarize`: ``util_mean:NAME``, ``util_peak:NAME`` and
    ``bottleneck_share:NAME`` for every resource, and the busiest resource's name and mean utilisation
    (None and NaN where no load was simulated: ``contention="none"``, or no handoff moved a byte)."""
    table = resource_table(replay)
    result: dict[str, Any] = {}
    for name, row in table.iterrows():
        result[f"util_mean:{name}"] = float(row["mean_utilisation"])
        result[f"util_peak:{name}"] = float(row["peak_utilisation"])
        result[f"bottleneck_share:{name}"] = float(row["bottleneck_share"])
    loaded = table["mean_utilisation"][table["mean_utilisation"] > 0] if len(table) else table
    busiest = loaded.idxmax() if len(loaded) else None
    result["busiest_resource"] = busiest
    result["busiest_utilisation"] = float(loaded[busiest]) if busiest is not None else np.nan
    return result
