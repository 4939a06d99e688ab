"""Trace replay: per-request handoffs with decode routing, destination prefix caches and link contention.

This module holds the replay's public face, its grids and its summary. The trace is prepared once (hash ids
to dense block ids, per-request values) by :mod:`perfmodel.replay.prepared`; a configuration is checked and
its network chosen at the one edge of both replays, :mod:`perfmodel.replay.edge` (links:
:mod:`perfmodel.replay.links`; a cluster: :mod:`perfmodel.replay.cluster`); the event loop itself is the Numba
kernel of :mod:`perfmodel.kernels.serving`, over the network of :mod:`perfmodel.kernels.replay` or
:mod:`perfmodel.kernels.cluster`.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..errors import InputError, check_choice, check_whole
from ..ground.progress import WarningsOnce, in_threads
from ..inputs import resolve as _resolve
from ..inputs import table as _inputs
from ..inputs.codes import choice_names
from ..inputs.coerce import edge_values
from ..inputs.table import INPUTS, LAYERWISE, check_count, layerwise_overlaps
from ..options import deprecated_constant, option
from .prepared import PreparedTrace, axis_label, in_configuration, layers_where_counted, no_series_axes, prepare_trace
from .summaries import check_result, percentile_ms, replay_percentile_question

__all__ = ["GRID_AXES", "PreparedTrace", "prepare_trace", "replay_grid", "replay_handoffs", "summarize"]


# --- replay --------------------------------------------------------------------------------

def replay_handoffs(
    trace: pd.DataFrame,
    kv_transfer_bandwidth: Any = None,
    kv_bytes_per_token: Any = None,
    *,
    model: Any = None,
    link: Any = None,
    mode: Literal["full_prompt", "destination_missing"] = "full_prompt",
    block_size: int = 512,
    decode_workers: int = 1,
    decode_cache_blocks: int | None = None,
    routing: Literal["prefix", "round_robin", "least_loaded", "topology"] = "prefix",
    contention: Literal["none", "fifo", "fair"] = "none",
    links: int = 1,
    latency_ms: float = 0.0,
    per_block_ms: float = 0.0,
    per_message_ms: float = 0.0,
    fallback_delay_ms: float = 0.0,
    blocks_per_message: float = 1.0,
    state_bytes: Any = None,
    ready_ms: Any = None,
    overlap: Literal["none", "layerwise"] = "none",
    prefill_ms: Any = None,
    prefill_tokens_per_s: Any = None,
    num_layers: Any = None,
    layer_group: int = 1,
    layerwise_min_tokens: int = 0,
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    decode_tp: int | None = None,
    scope: Literal["rank", "group"] = "rank",
    kv_layout: Literal["layer_kv", "layer", "block"] = "layer_kv",
    connector: Any = None,
    prefill_workers: int | None = None,
) -> pd.DataFrame:
    """Replay a trace's handoffs: decode routing, destination prefix caches, link contention.

    Deterministic: requests are handled in ready order (``ready_ms``, default the
    trace's ``ready_ms`` column, else their arrival), ties in trace order.

    - Each handoff goes to a decode worker: ``routing="prefix"`` picks the worker whose
      cache holds the longest prefix of the request's ``hash_ids`` (ties: round robin),
      ``"round_robin"`` takes them in turn.
    - Each decode worker keeps an LRU cache of block hashes (``decode_cache_blocks``
      blocks, unbounded when None). A request's blocks enter its worker's cache when its
      transfer ends (so a block still in flight is not a hit).
    - ``mode="destination_missing"`` charges the blocks the worker lacks, block-rounded
      to ``block_size`` (rule 2 of the model, :doc:`/model`; default 512, the hash block of Mooncake
      traces, so that a cached prefix is whole blocks: :func:`perfmodel.sweep` defaults to 64, a
      common engine page size); ``"full_prompt"`` charges the whole prompt.
      ``cached_tokens`` reports the worker's cached prefix in both modes. A trace without
      ``hash_ids`` has no prefix information: every block is missing, and the block
      rounding makes destination_missing cost slightly *more* than full_prompt (a warning
      says so).
    - ``contention="none"``: every transfer runs at line rate from its ready time (as
      upstream); ``"fifo"``: transfers queue for ``links`` identical links, each taking
      the link free soonest, the one free earliest even among idle links (ties: the
      lowest-numbered); ``"fair"``: a transfer first pays its fixed costs (latency,
      per-block and per-message work), holding no share of a link meanwhile; when they end
      (in the order they end) it moves its bytes on the link with the fewest transfers
      moving (a transfer whose bytes finish at that instant no longer counts), sharing it
      equally with them (exact processor-sharing event simulation).

    Parameters
    ----------
    trace
        From :func:`read_trace` or :func:`synthetic_trace` (``arrival_ms``,
        ``num_input_tokens``, optional ``hash_ids``).
    kv_transfer_bandwidth, link
        Decimal GB/s, a link preset name (``"ib-ndr"``, ``"8x ib-ndr"``) or a
        :class:`perfmodel.Link` (its latency is added). ``link=`` is the same.
    kv_bytes_per_token, model
        Bytes per token, a model preset name, config dict or ``config.json`` path (with
        ``kv_cache_dtype``, ``tp``), or the name of a trace column holding any of these
        per request (a trace mixing models replays at once). ``model=`` is the same.
        Sliding-window, chunked-attention and hybrid models move the bytes of
        :class:`perfmodel.KVTerms`: in destination_missing mode, of the missing tail.
    mode, block_size, decode_workers, decode_cache_blocks, routing, contention, links, latency_ms
        As above; ``latency_ms`` is a per-transfer setup latency in ms.
    per_block_ms
        Cost per KV block moved (ms), added to the link's own; blocks are
        ``ceil(charged tokens / block_size)``. Under ``fair`` sharing it is setup work,
        like the latency, before the bytes share the link.
    per_message_ms, kv_layout
        Cost per message (transfer descriptor) one rank posts (ms), added to the link's
        own, and how a block lies in memory, which sets the messages
        (:func:`perfmodel.kv_messages`, with this ``block_size``). Setup work under
        ``fair`` sharing, like the per-block cost.
    connector
        The serving engine's KV connector (a :class:`perfmodel.Connector` or its name): its cost per request
        is added to ``latency_ms``, its cost per descriptor to ``per_message_ms`` (fixed costs, paid before the
        bytes share a link under ``fair`` sharing).
    fallback_delay_ms
        Every transfer's time (ms) when the bandwidth is 0, which models no transfer
        (upstream's replay, whose default is 0.0); a ``"fifo"`` link is busy for it, and
        ``"fair"`` sharing needs a bandwidth > 0.
    blocks_per_message
        Consecutive blocks merged into one message (whole number >= 1, or ``inf``: one
        message per layer and K/V); see :func:`perfmodel.kv_messages`.
    state_bytes
        Bytes of a fixed state sent with every handoff, even one of 0 tokens (a value, array
        or trace column; on a cluster, one value); default: the model's own (see
        :class:`perfmodel.KVTerms`), 0 for bytes given as numbers.
    ready_ms
        When each prefill completes and its handoff may start: a column name or an
        array in ms; default: the trace's ``ready_ms`` column when it has one (as
        :func:`perfmodel.read_trace` keeps it), else ``arrival_ms`` (``ready_ms="arrival_ms"``
        replays from the arrivals of a trace that has the column).
    overlap, prefill_ms, prefill_tokens_per_s, num_layers, layer_group, layerwise_min_tokens
        Layer-wise streaming (``overlap="layerwise"``): the transfer starts when the
        first layer group is computed, ``prefill_ms * (L - g) / L`` before the prefill
        ends (``prefill_ms`` a value, array or trace column; or ``prefill_tokens_per_s``),
        and ends no earlier than the prefill's end plus the last group's share of it;
        the delay is counted from the prefill's end. ``num_layers`` defaults to the
        model's. Requests shorter than ``layerwise_min_tokens`` are sent after prefill. Over measured
        prefill ends (``ready_ms`` apart from the arrivals), each prefill must fit between its request's
        arrival and its ready time (``ready_ms - prefill >= arrival_ms``): else the call is refused.
    kv_cache_dtype, tp, decode_tp, scope
        For models by name or config, as in :func:`perfmodel.kv_bytes_per_token`.
    prefill_workers
        On a cluster (a :class:`perfmodel.Cluster` or a cluster preset where the link goes):
        prefill workers of ``tp`` GPUs, taking requests round robin in trace order, or as the
        trace's ``prefill_worker`` column says (default: 1, or that column's largest worker + 1).
        A replay on a cluster shares every resource of every handoff's flows max-min fairly
        (``contention="fair"``; ``"none"``: each handoff alone in the cluster), routes with
        ``"prefix"``, ``"round_robin"``, ``"least_loaded"`` or ``"topology"`` and adds the
        columns ``prefill_worker``, ``flows`` and ``bottleneck`` (the documentation's "Clusters as they are",
        "Replaying a trace on a cluster"; :func:`perfmodel.replay.cluster.resource_table` gives each resource's load).

    Returns
    -------
    pandas.DataFrame
        Indexed like the trace: ``arrival_ms`` and ``num_input_tokens`` (from the trace),
        ``decode_worker``, ``link`` (the link it used, a nullable integer: missing where it used none,
        under ``contention="none"``, for 0 bytes, and on a cluster, which has no links), ``cached_tokens``,
        ``charged_tokens``, ``transfer_bytes`` (integers when bytes per token are),
        ``saved_bytes`` (destination_missing: what a cold destination would have been
        sent, block-rounded, minus ``transfer_bytes``; 0 in full_prompt mode),
        ``transfer_ms`` (alone on the link), ``queue_ms`` (waiting or slowed by
        sharing), ``handoff_delay_ms`` (what the request waits for its KV after its prefill ends,
        ms), ``start_ms``, ``end_ms``. Without layer-wise streaming (``overlap="none"``, the
        default) ``handoff_delay_ms = queue_ms + transfer_ms``, the handoff's ready time to
        ``end_ms``. With ``overlap="layerwise"`` the transfer starts before the prefill ends, and
        that identity does not hold: ``handoff_delay_ms = end_ms - the prefill's end`` (the ready
        time: ``ready_ms``, else the arrival), alone ``max(X * g / L, X - C * (L - g) / L)`` for a
        transfer of ``X = transfer_ms``, prefill ``C`` and ``L`` layers sent ``g`` at a time, so it can
        be less than ``queue_ms + transfer_ms`` (which count from the first group's readiness).

    Examples
    --------
    >>> from perfmodel import replay_handoffs, synthetic_trace
    >>> trace = synthetic_trace(2000, rate_per_s=20, seed=0)
    >>> replay = replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", mode="destination_missing",
    ...                          decode_workers=4, contention="fifo")
    >>> bool((replay["handoff_delay_ms"] == replay["queue_ms"] + replay["transfer_ms"]).all())
    True
    """
    config = dict(
        kv_transfer_bandwidth=kv_transfer_bandwidth, kv_bytes_per_token=kv_bytes_per_token, model=model, link=link,
        mode=mode, block_size=block_size, decode_workers=decode_workers, decode_cache_blocks=decode_cache_blocks,
        routing=routing, contention=contention, links=links, latency_ms=latency_ms, per_block_ms=per_block_ms,
        per_message_ms=per_message_ms, fallback_delay_ms=fallback_delay_ms, state_bytes=state_bytes, overlap=overlap,
        prefill_ms=prefill_ms, prefill_tokens_per_s=prefill_tokens_per_s, num_layers=num_layers,
        layer_group=layer_group, layerwise_min_tokens=layerwise_min_tokens, kv_cache_dtype=kv_cache_dtype, tp=tp,
        decode_tp=decode_tp, scope=scope, kv_layout=kv_layout, blocks_per_message=blocks_per_message,
        prefill_workers=prefill_workers, connector=connector)
    return replay_prepared(prepare_trace(trace, ready_ms=ready_ms), **config)


#: A replay's configuration: the keywords of :func:`replay_handoffs` after the trace, with their defaults.
_CONFIG = {name: p.default for name, p in inspect.signature(replay_handoffs).parameters.items()
           if name not in ("trace", "ready_ms")}


def configured(given: dict[str, Any], trace: pd.DataFrame) -> SimpleNamespace:
    """A replay's configuration: :func:`replay_handoffs`' keywords ``given`` over their defaults, a connector's
    costs added to the caller's latency and per-message costs (once, here, for links and clusters alike). A model
    given as text that names a column of ``trace`` and is also a model's name or a number is refused as
    ambiguous, as the pandas facade refuses it (before text numbers are read as numbers)."""
    from ..frame import refuse_both

    for name in ("kv_bytes_per_token", "model"):
        value = given.get(name)
        if isinstance(value, str) and value in trace.columns:
            refuse_both("kv_bytes_per_token", value, name)
    c = SimpleNamespace(**{**_CONFIG, **edge_values(given)})
    vars(c).update(_resolve.with_connector(vars(c), c.connector))
    return c


def replay_prepared(prepared: PreparedTrace, **given: Any) -> pd.DataFrame:
    """One configuration's replay of a prepared trace (``given``: keywords of :func:`replay_handoffs`)."""
    from .edge import handoffs_on

    if {"cluster", *_inputs.CLUSTER_FIELDS} & set(given):  # a grid's cluster axes: one Cluster where the link goes
        from .cluster import with_cluster

        given = with_cluster(given)
    check_keywords("replay_handoffs", given)
    return handoffs_on(prepared, configured(given, prepared.trace)).replay()


def check_keywords(question: str, given: Any) -> None:
    """Refuse keywords :func:`replay_handoffs` does not take, as Python would, naming ``question`` (the function
    the user called, which passes them on)."""
    unknown = set(given) - set(_CONFIG)
    if unknown:
        raise TypeError(f"{question}() got unexpected keyword arguments {sorted(unknown)}")


def summarize(replay: pd.DataFrame) -> dict[str, float]:
    """Headline figures of a replay: delay percentiles (ms), link utilisation, bytes moved and saved.

    ``p50_ms``, ``p90_ms`` and ``p99_ms`` are percentiles of the per-request handoff delays under the
    replay's own contention (:func:`perfmodel.replay.sizing.percentile_ms`: numpy's ``"linear"`` method, as
    :func:`perfmodel.required_nics` takes them).

    ``link_utilisation`` is the time the links are held, summed over the handoffs that move
    bytes, over the replayed span (first start to last end of those handoffs, ms over ms: a
    fraction) times the number of links. What holds a link follows the contention: under
    ``contention="fifo"`` a transfer holds its link for its whole time (``transfer_ms``: fixed
    costs and bytes); under ``"fair"`` for its bytes' time only (``transfer_bytes`` over the
    bandwidth), since it pays its fixed costs (latency, per-block and per-message work) holding
    no share of a link. Under these two it is at most 1 (1: the links were never idle in the
    span; a replay whose handoffs queue or share with it at 1 needs more links or bandwidth).
    Under ``contention="none"`` each handoff moves alone, as if on a link of its own, and
    ``links`` changes nothing: the figure is the transfers' whole time over the span, not
    divided by ``links``, i.e. the mean number of handoffs in flight (above 1: they overlap,
    and one link would have to queue or share them). An empty replay's is NaN, as its other
    figures; one that moves no byte, 0. On a cluster, which has resources rather than links,
    it is missing (NaN) and ``busiest_utilisation`` says how loaded the cluster is.
    ``bytes_saved_by_prefix_reuse`` counts the cached prefix blocks a destination_missing
    replay did not send (0 in full_prompt mode). A replay on a cluster adds each resource's
    ``util_mean:NAME``, ``util_peak:NAME`` and ``bottleneck_share:NAME``, and
    ``busiest_resource`` and ``busiest_utilisation``
    (:func:`perfmodel.replay.cluster.resource_table` has them as a table).

    Parameters
    ----------
    replay
        A result of :func:`replay_handoffs` (its columns, and its attrs' ``links`` and ``mode``).

    Returns
    -------
    dict
        ``handoffs``, ``p50_ms``, ``p90_ms``, ``p99_ms``, ``mean_ms``, ``max_ms``, ``mean_queue_ms``
        (ms), ``link_utilisation``, ``bytes_moved`` and ``bytes_saved_by_prefix_reuse``.

    Examples
    --------
    >>> from perfmodel import replay_handoffs, summarize, synthetic_trace
    >>> replay = replay_handoffs(synthetic_trace(500, 10), model="llama-3.1-8b", link="ib-ndr")
    >>> sorted(summarize(replay))[:3]
    ['bytes_moved', 'bytes_saved_by_prefix_reuse', 'handoffs']
    """
    check_result(replay, "replay", ["handoff_delay_ms", "transfer_bytes", "transfer_ms", "queue_ms", "start_ms", "end_ms"],
                 "replay_handoffs", ("ttft_ms", "replay_ttft", "summarize_ttft"))
    delay = replay["handoff_delay_ms"].to_numpy(dtype=np.float64)
    moving = replay[replay["transfer_bytes"] > 0]
    span, ends = _span(replay, moving)
    links, held = _links_held(replay, moving)
    load = held / (span * links) if span > 0 else 0.0 if delay.size else np.nan
    # a load above 1 by float noise alone is 1: a sum of n terms is off by at most ~n ulps of the sum, the span
    # (a difference of two times) by an ulp of the larger time; beyond that an offered load above 1 is real
    if load > 1.0 and len(moving):
        noise = (len(moving) + 2) * np.finfo(np.float64).eps * (1.0 + ends / span)
        load = 1.0 if load - 1.0 <= noise else load
    saved = float(replay["saved_bytes"].sum()) if replay.attrs.get("mode") == "destination_missing" else 0.0
    percentiles = percentile_ms(delay, [50, 90, 99])  # (the one percentile of every sizing answer)
    on_cluster = {}
    if "resources" in replay.attrs:  # a replay on a cluster: each resource's utilisation and bottleneck share
        from .cluster import cluster_summary

        on_cluster = cluster_summary(replay)
    return {
        "handoffs": int(delay.size),
        "p50_ms": float(percentiles[0]), "p90_ms": float(percentiles[1]), "p99_ms": float(percentiles[2]),
        "mean_ms": float(delay.mean()) if delay.size else np.nan,
        "max_ms": float(delay.max()) if delay.size else np.nan,
        "mean_queue_ms": float(replay["queue_ms"].mean()) if delay.size else np.nan,
        "link_utilisation": np.nan if "resources" in replay.attrs else load,
        "bytes_moved": float(replay["transfer_bytes"].sum()),
        "bytes_saved_by_prefix_reuse": saved,
    } | on_cluster


def _links_held(replay: pd.DataFrame, moving: pd.DataFrame) -> tuple[int, float]:
    """(the links that divide the utilisation, the time in ms the handoffs that move bytes (``moving``) hold
    them, summed), as :func:`summarize` counts them: ``contention="none"`` 1 link (each handoff alone) and the
    transfers' whole time, ``"fifo"`` the replay's links and the whole time, ``"fair"`` its links and the
    bytes' time only (the fixed costs hold no share): ``transfer_bytes / (bandwidth_gb_s * 1e9) * 1000``."""
    contention = str(replay.attrs.get("contention", "fifo")).lower()
    links = 1 if contention == "none" else int(replay.attrs.get("links", 1))
    bandwidth = float(replay.attrs.get("bandwidth_gb_s", np.nan))
    if contention == "fair" and 0 < bandwidth < np.inf:  # (the kernel's operation order: bytes / (bw * 1e9) * 1000)
        return links, float((moving["transfer_bytes"].to_numpy(dtype=np.float64) / (bandwidth * 1e9) * 1000.0).sum())
    return links, float(moving["transfer_ms"].sum())


def _span(replay: pd.DataFrame, moving: pd.DataFrame) -> tuple[float, float]:
    """(first start to last end of the handoffs that move bytes, the largest time it was taken from): the
    replay's own, from its relative times, for a whole replay; else from the timestamp columns."""
    if "span_ms" in replay.attrs and replay.attrs.get("requests") == len(replay):
        span = float(replay.attrs["span_ms"])
        return span, float(replay.attrs.get("span_ends_ms", span))
    if not len(moving):
        return 0.0, 0.0
    return (float(moving["end_ms"].max() - moving["start_ms"].min()),
            float(np.abs(moving[["start_ms", "end_ms"]].to_numpy()).max()))


# --- replay grids: many cluster configurations against one trace ------------------------------

#: The axes :func:`replay_grid` accepts (each a value or a list), in the order of its columns (the input
#: table's grid axes, :data:`perfmodel.inputs.table.GRID_AXES`).
GRID_AXES = _inputs.GRID_AXES


# The most configurations a replay grid takes is the option max_grid_configs (each replays the whole trace: ten
# thousand replays are hours of work; a million, a grid that was not meant). MAX_CONFIGS was a constant here.
__getattr__ = deprecated_constant("perfmodel.replay", {"MAX_CONFIGS": "max_grid_configs"})


def grid_configs(axes: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the axes, as keyword dicts, in the grid's row order (the last axis fastest)."""
    import itertools
    import math

    unknown = sorted(set(axes) - set(GRID_AXES))
    if unknown:
        raise InputError("replay_grid", f"unknown axis {unknown}", f"use axes from {', '.join(GRID_AXES)}")
    no_series_axes("replay_grid", axes)
    axes = edge_values(axes)
    names = [name for name in GRID_AXES if name in axes]
    values = [_resolve.axis_values("replay_grid", name, axes[name]) for name in names]
    for name, given in zip(names, values):  # a value given twice (in any spelling) would replay twice: refused
        _resolve.axis_labels("replay_grid", name, given)
        if INPUTS[name].kind == "degree":  # counts by their bound, before any replay
            for value in given:
                if value is not None:
                    check_count(name, value)
    size = math.prod(len(v) for v in values)
    most = option("max_grid_configs")
    if size > most:
        shape = " x ".join(f"{len(v):,} {name}" for name, v in zip(names, values))
        raise InputError("replay_grid", f"{size:,} configurations ({shape}), more than {most:,}, each of which "
                         "replays the whole trace", "give the axes fewer values, run the grid in parts (one call per value of "
                         "its longest axis), or raise perfmodel.set_options(max_grid_configs=...)")
    configs = [dict(zip(names, c)) for c in itertools.product(*values)]
    overlaps = {str(c.get("overlap", "none")) for c in configs}
    layerwise_overlaps(axes, overlaps)  # (as in sweeps: the layer-wise inputs apply to the streaming rows)
    if len(overlaps) > 1:  # the streaming inputs do not apply where streaming is off: None there (one such row)
        configs = [{k: None if k in LAYERWISE and k != "num_layers" and c.get("overlap") == "none" else v  # (it counts
                    for k, v in c.items()} for c in configs]  # messages too)
    return configs


def grid_row(prepared: PreparedTrace, config: dict[str, Any], *, keep_requests: bool = False,
             ) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """One configuration of a grid: :func:`summarize`'s figures plus the share of zero-delay handoffs
    (and the replay itself, when asked)."""
    replay = in_configuration(config, lambda: replay_prepared(prepared, **config))  # (no figure per resource: names vary)
    stats = {name: value for name, value in summarize(replay).items() if ":" not in name}
    delays = replay["handoff_delay_ms"].to_numpy()
    stats["zero_delay_share"] = float(np.mean(delays == 0)) if delays.size else float("nan")
    return stats, replay if keep_requests else None


def grid_frame(configs: list[dict[str, Any]], stats: list[dict[str, Any]]) -> pd.DataFrame:
    """The grid's table: the configurations' values (labels as categoricals, in order of appearance), then the stats;
    ``attrs["question"]``: what its ``p99_ms`` is the p99 of."""
    summary = pd.DataFrame([{**{k: axis_label(k, v) for k, v in config.items()}, **row}
                            for config, row in zip(configs, stats)])
    for name in configs[0] if configs else ():
        if name in _inputs.LABEL_AXES:
            summary[name] = pd.Categorical(summary[name], categories=list(dict.fromkeys(summary[name])))
    summary.attrs["question"] = grid_question(configs, cluster="busiest_utilisation" in summary)
    return summary


def grid_question(configs: list[dict[str, Any]], *, cluster: bool) -> str:
    """What a grid's ``p99_ms`` is the p99 of, in words (its contention and scope, or "each row's")."""
    contentions = {str(c.get("contention", _CONFIG["contention"])) for c in configs}
    scopes = {str(c.get("scope", _CONFIG["scope"])) for c in configs}
    return replay_percentile_question(99, contentions.pop() if len(contentions) == 1 else None,
                                      scopes.pop() if len(scopes) == 1 else None, cluster=cluster)


def replay_grid(
    trace: pd.DataFrame,
    *,
    keep: Literal["summary", "requests"] = "summary",
    num_threads: int | None = None,
    progress: bool | None = None,
    ready_ms: Any = None,
    **axes: Any,
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Replay one trace under every combination of cluster configurations, in parallel: one row each, its
    ``p99_ms`` the p99 of the replay's per-request handoff delays (``attrs["question"]`` says with which
    contention and bytes; :func:`perfmodel.required_nics` reads the fewest NICs off such replays).

    Capacity planning's question ("which configuration keeps the handoff's p99 under budget
    for our traffic?") in one call. Each keyword of :data:`GRID_AXES` is a value or a list
    (the keywords of :func:`replay_handoffs`: ``decode_workers``, ``decode_cache_blocks``,
    ``routing``, ``mode``, ``contention``, ``links``, ``link`` or ``kv_transfer_bandwidth``,
    ``model`` or ``kv_bytes_per_token``, ``kv_cache_dtype``, ``tp``, ``scope``,
    ``block_size``, ``latency_ms``, ``per_block_ms`` and the layer-wise options). The trace
    is prepared once (checks, block-hash remapping) and shared read-only; configurations run
    on ``num_threads`` threads (default: the cores available; the replay kernel releases
    the GIL), with a progress bar on a terminal when the grid takes more than a second.
    Ctrl-C stops it and returns nothing. The result equals the one-by-one loop exactly.

    Parameters
    ----------
    trace
        From :func:`read_trace` or :func:`synthetic_trace`, as :func:`replay_handoffs` takes it.
    keep
        ``"summary"`` (default): one row per configuration; ``"requests"``: also every request's replay.
    num_threads
        Threads replaying configurations at once (default: the cores available).
    progress
        Show a progress bar: None (default) shows one on a terminal when the grid takes more than a second.
    ready_ms
        When each prefill completes, as :func:`replay_handoffs` takes it (one for every configuration).
    **axes
        The axes of :data:`GRID_AXES`: each a value or a list of values, a keyword of :func:`replay_handoffs`.

    Returns
    -------
    pandas.DataFrame
        One row per distinct configuration (an input that does not apply to one, such as
        ``prefill_ms`` with ``overlap="none"``, is empty there, and the configuration is replayed
        once): the axes' values in columns named like the axes (labels as categoricals), then
        :func:`summarize`'s figures (``handoffs``, ``p50_ms``, ``p90_ms``, ``p99_ms``, ``mean_ms``,
        ``max_ms``, ``mean_queue_ms``, ``link_utilisation``, ``bytes_moved``, ``bytes_saved_by_prefix_reuse``) and
        ``zero_delay_share`` (handoffs that cost 0 ms: their whole prompt was cached); on a
        cluster also ``busiest_resource`` and ``busiest_utilisation`` (the figures of each
        resource are :func:`summarize`'s of one replay: their names differ between clusters).
        With ``keep="requests"``, also every request's replay in long format, the
        configuration's columns first (``(summary, requests)``; the replay's own ``link``,
        the index of the link used, is called ``link_index`` there).

    Examples
    --------
    >>> from perfmodel import replay_grid, synthetic_trace
    >>> grid = replay_grid(synthetic_trace(2000, rate_per_s=40, seed=0), model="llama-3.1-70b",
    ...                    link=["ib-ndr", "8x ib-ndr"], decode_workers=[1, 4], mode="destination_missing",
    ...                    contention="fifo")
    >>> grid[["link", "decode_workers"]].astype(str).agg(" ".join, axis=1).tolist()
    ['ib-ndr 1', 'ib-ndr 4', '8x ib-ndr 1', '8x ib-ndr 4']
    >>> bool((grid["p99_ms"] >= grid["p50_ms"]).all())
    True
    """
    import os as _os

    check_choice("keep", keep, choice_names("keep"))
    workers = (_os.cpu_count() or 1) if num_threads is None else check_whole("num_threads", num_threads, smallest=1)

    def one(config: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame | None]:
        return grid_row(prepared, config, keep_requests=keep == "requests")

    with WarningsOnce():  # (each configuration's, said once: its check on two requests and its replay say the same)
        prepared, configs = grid_plan(trace, axes, ready_ms)
        results = in_threads(one, configs, workers, desc="replay grid", progress=progress)
    names = list(configs[0])
    summary = grid_frame(configs, [stats for stats, _ in results])
    if keep == "summary":
        return summary
    return summary, _requests_frame(configs, [replay for _, replay in results], names, summary)


def grid_plan(trace: pd.DataFrame, axes: dict[str, Any], ready_ms: Any) -> tuple[PreparedTrace, list[dict[str, Any]]]:
    """A replay grid's prepared trace and its distinct configurations (the last axis fastest), every one first
    checked on two requests, so that a bad value fails at once (here, not on a thread or a Dask worker)."""
    configs = grid_configs(axes)
    prepared = prepare_trace(trace, ready_ms=ready_ms)
    sample = prepare_trace(trace.head(2), ready_ms=None if ready_ms is None else prepared.ready_ms[:2])  # (aligned)
    return prepared, layers_where_counted(configs, lambda on, config: replay_prepared(on, **config), sample, prepared)


def _requests_frame(configs: list[dict[str, Any]], replays: list[pd.DataFrame], names: list[str],
                    summary: pd.DataFrame) -> pd.DataFrame:
    """Every configuration's per-request rows in one frame, each row labelled with its configuration's axes
    (categories in the summary's order); the replay's own ``link`` column is ``link_index``."""
    parts = []
    for config, replay in zip(configs, replays):
        labelled = replay.rename_axis(replay.index.name or "request").reset_index()
        labelled = labelled.rename(columns={"link": "link_index"})  # the config's link axis takes the name "link"
        for name in reversed(names):
            labelled.insert(0, name, axis_label(name, config[name]))
        parts.append(labelled)
    requests = pd.concat(parts, ignore_index=True)
    for name in names:  # (each axis as the summary has it: labels as its categories, numbers of its dtype, NaN for None)
        if name in _inputs.LABEL_AXES:
            requests[name] = pd.Categorical(requests[name], categories=summary[name].cat.categories)
        else:
            requests[name] = requests[name].astype(summary[name].dtype)
    return requests
