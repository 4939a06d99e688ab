"""TTFT under load: the replay's handoffs with the serving around them (prefill queues, KV memory held
while a handoff runs, decode admission, closed-loop clients).

This module checks the inputs and wraps the result; the handoffs' own configuration is the replay's
(:func:`perfmodel.replay.edge.handoffs_on`), and the event loop is the kernel of
:mod:`perfmodel.kernels.serving`, built on the replay kernel's network.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..errors import InputError, check_choice, check_whole, shown, warn
from ..inputs.codes import choice_code, choice_names
from ..inputs.coerce import edge_values, non_numeric_kind, read_only
from ..inputs.words import count
from ..model.prefill import PrefillProfile
from . import configured
from .edge import handoffs_on
from .prepared import (
    PreparedTrace,
    _per_request,
    as_floats,
    notice_first_compile,
    prepare_trace,
    request_values,
    trace_column,
)
from .summaries import check_result, memory_held, percentile_ms  # noqa: F401 (memory_held: documented here too)

__all__ = ["TTFT_PARTS", "replay_ttft", "summarize_ttft"]

#: The parts of a request's time to first token, in order: they add up to ``ttft_ms``.
TTFT_PARTS = ("queue_ms", "prefill_ms", "handoff_delay_ms", "decode_step_ms")
#: The parts :func:`summarize_ttft` gives the percentiles of (prefixes of its keys): those of ``ttft_ms`` and the
#: handoff delay's (``admission_wait``, ``link_wait`` and ``transfer`` add up to ``handoff_delay``).
SUMMARY_PARTS = ("queue", "prefill", "admission_wait", "link_wait", "transfer", "handoff_delay", "decode_step")
#: The trace column of each request's own prefill time (ms), which comes before any given for all.
OWN_PREFILL = "prefill_ms"
#: The columns numbering the moments memory is taken and given back, in the order the replay took them: its
#: prefill memory at ``prefill_start_ms`` and ``transfer_end_ms``, its decode memory at ``admitted_ms`` and
#: ``done_ms`` (one count over the run; at one instant, what tells which holdings were held together).
MEMORY_EVENTS = ("prefill_start_seq", "transfer_end_seq", "admitted_seq", "done_seq")
_PREFILL_ROUTING = choice_names("prefill_routing")
DEFAULT_PREFILL_ROUTING = _PREFILL_ROUTING[0]  # (where the trace has no prefill_worker column)


def replay_ttft(
    trace: pd.DataFrame,
    kv_transfer_bandwidth: Any = None,
    kv_bytes_per_token: Any = None,
    *,
    model: Any = None,
    link: Any = None,
    prefill_workers: int = 1,
    prefill_ms: Any = None,
    prefill_tokens_per_s: Any = None,
    prefill_routing: str | None = None,
    prefill_kv_tokens: int | None = None,
    decode_workers: int = 1,
    decode_kv_tokens: int | None = None,
    decode_step_ms: Any = 0.0,
    concurrency: int | None = None,
    mode: Literal["full_prompt", "destination_missing"] = "full_prompt",
    block_size: int = 512,
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
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    decode_tp: int | None = None,
    scope: Literal["rank", "group"] = "rank",
    kv_layout: Literal["layer_kv", "layer", "block"] = "layer_kv",
    num_layers: Any = None,
    connector: Any = None,
) -> pd.DataFrame:
    """Replay a trace's time to first token under load: prefill queues, memory held, decode admission.

    Each request arrives (``arrival_ms``, or issued by ``concurrency`` closed-loop clients), queues at a
    prefill worker (first come first served, one prefill at a time), holds its prompt's KV tokens there
    from its prefill's start until its handoff ends, is routed at its prefill's end to a decode worker
    (``routing``, as :func:`perfmodel.replay_handoffs`), waits there until its prompt and output tokens fit
    (admission), and then hands off its KV cache exactly as the replay does, over links (``contention``
    ``"none"``, ``"fifo"`` on ``links`` links, ``"fair"`` sharing) or a cluster's resources (``"none"`` or
    ``"fair"``), with prefix caches and every cost. Its first token comes ``decode_step_ms`` after the handoff
    ends, its last ``num_output_tokens * decode_step_ms`` after it (its first, for 0 output tokens); then its
    decode memory is freed. The documentation's "TTFT under load" states every rule and the order of events at
    one instant.

    With unbounded memory, no prefill time and ``decode_step_ms=0`` every ``handoff_delay_ms`` is
    :func:`perfmodel.replay_handoffs`' (bit for bit) and ``ttft_ms`` equals it.

    Parameters
    ----------
    trace
        From :func:`perfmodel.read_trace` or :func:`perfmodel.synthetic_trace`: ``arrival_ms``,
        ``num_input_tokens``, and ``num_output_tokens`` where decode memory is bounded or the loop closed; a
        ``prefill_ms`` column is each request's own prefill time (ms >= 0; NaN: none of its own), which comes
        before ``prefill_ms`` and ``prefill_tokens_per_s`` given for all. A ``ready_ms`` column (measured prefill
        ends) is refused, here and by the TTFT grids and questions: this replay models each prefill
        (:func:`perfmodel.replay_handoffs` replays from measured ends).
    kv_transfer_bandwidth, link, kv_bytes_per_token, model
        The network and the bytes per token, as :func:`perfmodel.replay_handoffs` takes them: a link (GB/s, a
        link preset or a :class:`perfmodel.Link`) with ``links`` and ``contention``, or a cluster (a
        :class:`perfmodel.Cluster` or a cluster preset: each handoff's flows cross its NICs, switches and
        uplinks, ``contention="fair"`` sharing them max-min, ``"none"`` each handoff alone); and a number, a
        model preset, a config or a trace column (on a cluster, one model).
    prefill_workers
        Prefill workers (each a TP group serving one prefill at a time; whole number >= 1).
    prefill_ms
        Each prefill's time (ms >= 0) where the trace has none of its own: one value, a trace column name, an
        array, or a :class:`perfmodel.PrefillProfile` (from :func:`perfmodel.fit_prefill`). Default: from
        ``prefill_tokens_per_s``, else 0 (every prefill instant). Where the trace has a ``prefill_ms`` column, a
        request's own time comes first, and a warning says what that overrides; a request with none (NaN) and
        nothing given for all is refused.
    prefill_tokens_per_s
        A prefill worker's rate (tokens/s > 0), instead of ``prefill_ms``: ``num_input_tokens / rate`` (where the
        trace has no ``prefill_ms`` of its own).
    prefill_routing
        Default: the trace's ``prefill_worker`` column where it has one (as :func:`perfmodel.replay_handoffs`
        reads it), else ``"round_robin"`` (the k-th arrival to worker ``k mod prefill_workers``); ``"least_loaded"`` (the
        fewest requests queued or in prefill; ties: the first of the tied after the worker chosen last), or
        the name of a trace column of worker indices (0 to ``prefill_workers - 1``).
    prefill_kv_tokens
        KV tokens each prefill worker holds at most (whole number >= 1; default unbounded).
    decode_workers
        Decode workers, each with its own prefix cache and memory.
    decode_kv_tokens
        KV tokens each decode worker holds at most (prompt plus output tokens of what it admitted; default
        unbounded).
    decode_step_ms
        ms per generated token (>= 0): one value, a trace column name or an array.
    concurrency
        Closed loop: this many clients issue the trace's requests in order, the first ``concurrency`` at 0,
        the next each time one is done (its arrival times are then ignored, and a warning says so).
        Default: open loop at the trace's arrival times.
    mode, block_size, decode_cache_blocks, routing, contention, links, latency_ms, per_block_ms, per_message_ms
        The handoffs, as :func:`perfmodel.replay_handoffs` takes them.
    fallback_delay_ms, blocks_per_message, state_bytes, kv_cache_dtype, tp, decode_tp, scope, kv_layout, connector
        The handoffs, as :func:`perfmodel.replay_handoffs` takes them.
    num_layers
        Where messages cost (``per_message_ms``) and ``kv_layout`` posts them per layer: the layer count of
        bytes given as a number (a value, an array or a trace column: one per request on links, one value on a
        cluster); a named model's own by default.

    Returns
    -------
    pandas.DataFrame
        Indexed like the trace: ``prefill_worker``, ``decode_worker``, the timestamps (ms) ``arrival_ms``,
        ``prefill_start_ms``, ``prefill_end_ms``, ``admitted_ms``, ``transfer_end_ms``, ``first_token_ms``,
        ``done_ms``; the breakdown ``queue_ms`` (waiting for the prefill worker or its memory),
        ``prefill_ms``, ``admission_wait_ms`` (waiting for decode memory), ``link_wait_ms`` (waiting for or
        slowed by the link), ``transfer_ms`` (alone), ``handoff_delay_ms`` (= admission wait + link wait +
        transfer), ``decode_step_ms`` and ``ttft_ms`` (= queue + prefill + handoff delay + step, exactly);
        and the handoff's ``link``, ``cached_tokens``, ``charged_tokens``, ``transfer_bytes`` (on a cluster
        also ``flows`` and ``bottleneck``, the resource that limited it, as the replay's); ``num_input_tokens``
        (and ``num_output_tokens``); and ``prefill_start_seq``, ``transfer_end_seq``, ``admitted_seq`` and
        ``done_seq``: the order in which the replay took and gave back memory at those times (one count over the
        run), which at one instant tells what a worker held together. ``attrs`` hold the configuration (workers,
        capacities) for :func:`summarize_ttft`; on a cluster also each resource's load, as
        :func:`perfmodel.replay.cluster.resource_table` reads it.

    Examples
    --------
    Two requests of 500 and 600 tokens at 0 ms, 1 ms per token on the link, 0.1 ms per token of prefill,
    a prefill worker holding 1,000 tokens: the second waits for the first's handoff to free its memory.

    >>> import pandas as pd
    >>> from perfmodel import replay_ttft
    >>> trace = pd.DataFrame({"arrival_ms": [0.0, 0.0], "num_input_tokens": [500, 600],
    ...                       "num_output_tokens": [1, 1]})
    >>> ttft = replay_ttft(trace, 1.0, 1e6, prefill_tokens_per_s=10_000, prefill_kv_tokens=1000,
    ...                    contention="fifo", decode_step_ms=10.0)
    >>> ttft["ttft_ms"].tolist(), ttft["queue_ms"].tolist()
    ([560.0, 1220.0], [0.0, 550.0])

    On a cluster, the same two requests' flows share its NICs (max-min); the table names each one's bottleneck:

    >>> from perfmodel import Cluster
    >>> cluster = Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    >>> ttft = replay_ttft(trace, cluster, 1e6, prefill_tokens_per_s=10_000, contention="fair")
    >>> ttft["bottleneck"].tolist()
    ['node0/nic0/out', 'node0/nic0/out']
    """
    config = dict(
        kv_transfer_bandwidth=kv_transfer_bandwidth,
        kv_bytes_per_token=kv_bytes_per_token,
        model=model,
        link=link,
        mode=mode,
        block_size=block_size,
        decode_workers=decode_workers,
        decode_cache_blocks=decode_cache_blocks,
        routing=routing,
        contention=contention,
        links=links,
        latency_ms=latency_ms,
        per_block_ms=per_block_ms,
        per_message_ms=per_message_ms,
        fallback_delay_ms=fallback_delay_ms,
        blocks_per_message=blocks_per_message,
        state_bytes=state_bytes,
        kv_cache_dtype=kv_cache_dtype,
        tp=tp,
        decode_tp=decode_tp,
        scope=scope,
        kv_layout=kv_layout,
        num_layers=num_layers,
        connector=connector,
    )
    serving = dict(
        prefill_workers=prefill_workers,
        prefill_ms=prefill_ms,
        prefill_tokens_per_s=prefill_tokens_per_s,
        prefill_routing=prefill_routing,
        prefill_kv_tokens=prefill_kv_tokens,
        decode_kv_tokens=decode_kv_tokens,
        decode_step_ms=decode_step_ms,
        concurrency=concurrency,
    )
    return ttft_prepared(serving_trace(trace), config, serving)


def serving_trace(trace: pd.DataFrame) -> PreparedTrace:
    """``trace`` prepared for TTFT replays, which model each prefill: a ``ready_ms`` column (measured prefill ends,
    which they would not use) is refused.

    >>> serving_trace(pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [10]})).tokens.tolist()
    [10]
    """
    if isinstance(trace, pd.DataFrame) and "ready_ms" in trace.columns:  # (not a frame: prepare_trace says so)
        raise InputError(
            "trace",
            "has a ready_ms column (measured prefill ends), which a TTFT replay does not use: it models each prefill "
            "from arrival_ms (prefill_ms=, prefill_tokens_per_s=)",
            "drop the column (trace.drop(columns='ready_ms')), or replay the handoffs from the measured prefill ends "
            "with perfmodel.replay_handoffs",
        )
    return prepare_trace(trace)


def ttft_prepared(prepared: PreparedTrace, config: dict[str, Any], serving: dict[str, Any]) -> pd.DataFrame:
    """One TTFT replay of a prepared trace: ``config`` the handoffs' keywords, ``serving`` the serving's."""
    from ..kernels import serving as _serving

    c = configured(config, prepared.trace)
    trace, tokens, n = prepared.trace, prepared.tokens, len(prepared.trace)
    handoffs = handoffs_on(prepared, c)
    s = _serving_inputs(trace, tokens, edge_values(serving), c)
    on = handoffs.under_load(s)
    ready, base = on.times
    if s.concurrency:
        order, arrivals, base = np.arange(n, dtype=np.int64), np.zeros(n), 0.0
    else:
        order = np.argsort(ready, kind="stable").astype(np.int64)
        arrivals = np.ascontiguousarray(ready[order], dtype=np.float64)
    sv = _serving.Serving(
        arrival_order=order,
        arrival_ms=arrivals,
        tokens=read_only(on.tokens),
        service_ms=s.service,
        step_ms=s.step,
        outputs=s.outputs,
        prefill_worker=s.prefill_worker,
        decode_worker=np.zeros(n, np.int64),
        admitted=on.admitted,
        prefill_start=np.full(n, np.nan),
        prefill_end=np.full(n, np.nan),
        first_token=np.full(n, np.nan),
        done=np.full(n, np.nan),
        **{name: np.full(n, -1, dtype=np.int64) for name in MEMORY_EVENTS},
        prefill_workers=s.prefill_workers,
        prefill_routing=s.routing_code,
        prefill_capacity=s.prefill_capacity,
        decode_capacity=s.decode_capacity,
        concurrency=s.concurrency,
    )
    queues = _serving.new_queues(n, s.prefill_workers, on.decode_workers)  # (dones are events: memory is given back)
    queues.counters[1] = min(s.concurrency, n) if s.concurrency else n  # requests issued
    notice_first_compile()
    try:
        net = _serving.run(on.start(_horizon(arrivals, s)), sv, queues)
    except _serving.Unfinished:  # (a handoff that never ends: refused by name where it can be, else a bug)
        on.unfinished()
        raise
    handoffs, attrs = on.wrap(net, base)
    return _frame(trace, tokens, s, sv, handoffs, attrs, base, c)


def _horizon(arrivals: np.ndarray, s: SimpleNamespace) -> np.ndarray:
    """The times a cluster's utilisation bins span (first and last; they grow past it): the arrivals, or in a
    closed loop (whose arrivals come as it runs) an estimate of its span, the prefills' work over the prefill
    workers or each request's prefill and decode over the clients, whichever is longer."""
    if not s.concurrency:
        return arrivals
    busy = float(s.service.sum()) / s.prefill_workers
    cycles = float((s.service + s.outputs * s.step).sum()) / s.concurrency
    return np.array([0.0, max(busy, cycles)])


def _serving_counts(given: dict[str, Any]) -> tuple[int, int | None, int | None, int | None]:
    """The serving's counts, checked: prefill workers (1 to 2**20), the tokens each prefill and decode worker holds
    and the clients of a closed loop (1 to 2**53, or None: unbounded, open)."""
    workers = check_whole(
        "prefill_workers",
        given["prefill_workers"],
        smallest=1,
        largest=2**20,
        above="pass prefill_workers as a whole number of workers from 1 to 1,048,576",
    )
    prefill_capacity, decode_capacity, concurrency = (
        check_whole(name, given[name], smallest=1, optional=True, largest=2**53, above=f"pass at most 2**53 {unit}")
        for name, unit in (("prefill_kv_tokens", "tokens"), ("decode_kv_tokens", "tokens"), ("concurrency", "clients"))
    )
    return workers, prefill_capacity, decode_capacity, concurrency


def _serving_inputs(
    trace: pd.DataFrame,
    tokens: np.ndarray,
    given: dict[str, Any],
    c: SimpleNamespace,
) -> SimpleNamespace:
    """The serving's inputs, checked, as the kernel's arrays and scalars."""
    n = len(trace)
    workers, prefill_capacity, decode_capacity, concurrency = _serving_counts(given)
    needs_outputs = decode_capacity is not None or concurrency is not None
    outputs = np.zeros(n, dtype=np.int64)
    if "num_output_tokens" in trace:
        outputs = _whole_column(trace, "num_output_tokens")
    elif needs_outputs:
        why = "decode_kv_tokens bounds decode memory" if decode_capacity is not None else "the loop is closed"
        raise InputError(
            "trace",
            f"has no 'num_output_tokens' column, and {why}: each request's output tokens "
            "decide when it is done (never defaulted)",
            "add a num_output_tokens column (whole numbers >= 0)",
        )
    service = _service_ms(trace, tokens, given["prefill_ms"], given["prefill_tokens_per_s"])
    step = request_values_nonnegative(trace, "decode_step_ms", given["decode_step_ms"])
    if n:
        arrival = trace["arrival_ms"].to_numpy(dtype=np.float64)
        bound = float(np.abs(arrival).max()) + float(service.sum()) + float((step * (outputs + 1.0)).sum())
        if not np.isfinite(bound) or bound > 1e300:
            raise InputError(
                "prefill_ms, decode_step_ms",
                f"the prefills and decode steps add up to {bound:.3g} ms, beyond what a time can hold",
                "pass prefill and step times in ms that a run's clock can reach (each well below 1e300)",
            )
    routing = given["prefill_routing"]
    if routing is None:  # (as the replay reads a trace: its prefill_worker column where it has one)
        routing = "prefill_worker" if "prefill_worker" in trace.columns else DEFAULT_PREFILL_ROUTING
    prefill_worker, code = _prefill_routing(trace, routing, workers)
    for capacity, name, need in (
        (prefill_capacity, "prefill_kv_tokens", tokens),
        (decode_capacity, "decode_kv_tokens", tokens + outputs),
    ):
        if capacity is not None and n and need.max() > capacity:
            first = int(np.argmax(need > capacity))
            what = "prompt tokens" if name == "prefill_kv_tokens" else "prompt and output tokens"
            raise InputError(
                name,
                f"request {trace.index[first]!r} holds {int(need[first]):,} {what}, more than a "
                f"worker's {capacity:,}: it could never run",
                f"pass {name} >= {int(need.max()):,}, or drop the requests that do not fit",
            )
    if concurrency is not None and n and np.ptp(trace["arrival_ms"].to_numpy(dtype=np.float64)) > 0:
        warn(
            f"replay_ttft: concurrency={concurrency} closes the loop, so the trace's arrival times are "
            "ignored: its requests are issued in order as clients finish"
        )
    if c.overlap != "none":  # (the replay's default; the TTFT replay streams nothing layer by layer yet)
        raise InputError("overlap", "layer-wise streaming is not modelled under load", "drop overlap=")
    return SimpleNamespace(
        prefill_workers=workers,
        prefill_capacity=-1 if prefill_capacity is None else prefill_capacity,
        decode_capacity=-1 if decode_capacity is None else decode_capacity,
        concurrency=concurrency or 0,
        outputs=outputs,
        service=service,
        step=step,
        prefill_worker=prefill_worker,
        routing_code=code,
        routing_name=routing,
        has_outputs="num_output_tokens" in trace,
    )


def _prefill_routing(trace: pd.DataFrame, routing: Any, workers: int) -> tuple[np.ndarray, int]:
    """(each request's prefill worker, -1 where the kernel routes; the kernel's routing code) of
    ``prefill_routing``: a policy's name, or a trace column of worker indices."""
    n = len(trace)
    prefill_worker = np.full(n, -1, dtype=np.int64)
    if isinstance(routing, str) and routing in trace.columns and routing not in _PREFILL_ROUTING:
        prefill_worker = _whole_column(trace, routing)
        beyond = prefill_worker >= workers
        if beyond.any():
            first = int(np.argmax(beyond))
            raise InputError(
                f"trace column {routing!r}",
                f"worker {prefill_worker[first]} at row {trace.index[first]!r}"
                f", beyond the {count(workers, 'prefill worker')}",
                f"pass prefill_workers >= {int(prefill_worker.max()) + 1} (the largest worker + 1), or give workers "
                "from 0",
            )
        code = 2
    else:
        check_choice("prefill_routing", routing, (*_PREFILL_ROUTING, "<a trace column of worker indices>"))
        code = choice_code("prefill_routing", routing)
    return prefill_worker, code


def _whole_column(trace: pd.DataFrame, column: str) -> np.ndarray:
    """A trace column of whole numbers >= 0 (below 2**53) as int64, the first bad row named."""
    series = trace_column(trace, column)
    if non_numeric_kind(series) is not None:
        raise InputError(
            f"trace column {column!r}", f"holds {non_numeric_kind(series)}, not whole numbers", "give plain numbers"
        )
    values = as_floats(f"trace column {column!r}", series)
    bad = ~((values >= 0) & (np.floor(values) == values) & (values < 2.0**53))
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError(
            f"trace column {column!r}",
            f"{count(int(bad.sum()), 'value')} not a whole number from 0 to 2**53 (exclusive), "
            f"first at row {trace.index[first]!r}: {values[first]!r}",
            "give every request a whole number >= 0, below 2**53",
        )
    return values.astype(np.int64)


def request_values_nonnegative(trace: pd.DataFrame, name: str, value: Any) -> np.ndarray:
    """A value, an array or a trace column of finite numbers >= 0, one per request (the first bad one named)."""
    values = np.ascontiguousarray(_per_request(trace, name, value), dtype=np.float64)
    bad = ~((values >= 0) & (values < np.inf))
    if bad.any() and np.ndim(value) == 0 and not isinstance(value, str):  # (one value for every request)
        raise InputError(name, f"{shown(value)} is not finite and >= 0", f"pass {name} as finite ms >= 0")
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError(
            name,
            f"{count(int(bad.sum()), 'value')} not finite and >= 0, first at row "
            f"{trace.index[first]!r}: {values[first]!r}",
            f"pass {name} as finite ms >= 0",
        )
    return values


def _service_ms(trace: pd.DataFrame, tokens: np.ndarray, prefill_ms: Any, rate: Any) -> np.ndarray:
    """Each request's prefill time (ms), in the documentation's order: the request's own (the trace's column
    ``prefill_ms``), else ``prefill_ms`` given for all (a value, an array, a column named, a profile), else from
    ``prefill_tokens_per_s``, else 0 (none given). A warning says what the request's own times override; a request
    without one (NaN) takes the time given for all, and with none given is refused (never made up)."""
    if prefill_ms is not None and rate is not None:
        raise InputError(
            "prefill_ms, prefill_tokens_per_s",
            "both given, and a prefill's time comes from one of them",
            "pass one of them (a time per prefill, or a rate)",
        )
    has_own = OWN_PREFILL in trace.columns
    if has_own and isinstance(prefill_ms, str) and prefill_ms == OWN_PREFILL:
        prefill_ms = None  # (the column named: the request's own, as without the keyword)
    given = _given_service_ms(trace, tokens, prefill_ms, rate)
    if not has_own:
        return np.zeros(len(trace)) if given is None else given
    own = _own_service_ms(trace)
    missing = np.isnan(own)
    if given is None:
        if missing.any():
            first = int(np.argmax(missing))
            raise InputError(
                f"trace column {OWN_PREFILL!r}",
                f"{count(int(missing.sum()), 'request')} without a prefill time (NaN), first at row "
                f"{trace.index[first]!r}, and none given for all: a prefill time is never made up",
                "give every request its prefill time, or pass prefill_ms or prefill_tokens_per_s for the requests "
                "without one",
            )
        return own
    name, value = ("prefill_ms", prefill_ms) if rate is None else ("prefill_tokens_per_s", rate)
    said = _said(name, value)
    if missing.any():
        use = f"{said} gives only the {count(int(missing.sum()), 'request')} without one (NaN)"
    else:
        use = f"{said} is not used"
    warn(
        f"replay_ttft: the trace's column {OWN_PREFILL!r} gives each request its own prefill time, which comes "
        f"before a time given for all: {use} (drop the column to time every prefill by {name})"
    )
    return np.where(missing, given, own)


def _said(name: str, value: Any) -> str:
    """A prefill input as a warning names it: ``prefill_ms=5``, ``prefill_ms='column'``, or what it is."""
    if isinstance(value, PrefillProfile):
        return f"{name} (the profile {value.name!r})"
    if isinstance(value, str):
        return f"{name}={value!r}"
    if np.ndim(value) == 0:
        return f"{name}={float(value):g}"
    return f"{name} ({shown(value)})"


def _own_service_ms(trace: pd.DataFrame) -> np.ndarray:
    """The trace's column ``prefill_ms`` as float64, NaN where a request has none; a value that is not finite
    and >= 0 refused, its row named."""
    where = f"trace column {OWN_PREFILL!r}"
    values = np.array(_per_request(trace, OWN_PREFILL, OWN_PREFILL), dtype=np.float64)
    bad = ~np.isnan(values) & ~((values >= 0) & (values < np.inf))
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError(
            where,
            f"{count(int(bad.sum()), 'value')} not finite and >= 0, first at row {trace.index[first]!r}: "
            f"{values[first]!r}",
            "give each request's prefill time in ms >= 0 (NaN where it has none)",
        )
    return values


def _given_service_ms(trace: pd.DataFrame, tokens: np.ndarray, prefill_ms: Any, rate: Any) -> np.ndarray | None:
    """Each request's prefill time (ms) from the inputs given for all: ``prefill_ms`` (a value, an array, a
    column, a profile or its saved name), else ``prefill_tokens_per_s``; None where neither is given."""
    if isinstance(prefill_ms, str) and prefill_ms not in trace.columns:  # (a saved profile's name)
        from ..model.prefill import get_prefill

        prefill_ms = get_prefill(prefill_ms)
    if isinstance(prefill_ms, PrefillProfile):
        return np.ascontiguousarray(prefill_ms.prefill_ms(tokens))
    if prefill_ms is not None:
        return request_values_nonnegative(trace, "prefill_ms", prefill_ms)
    if rate is not None:
        rates = np.asarray(request_values(trace, "prefill_tokens_per_s", rate), dtype=np.float64)
        bad = ~(rates > 0) | np.isnan(rates)
        if bad.any():
            first = int(np.argmax(bad))
            where = f"first at row {trace.index[first]!r}: {rates[first]!r}"
            what = f"{count(int(bad.sum()), 'value')} not a rate above 0, {where}"
            raise InputError("prefill_tokens_per_s", what, "pass a prefill worker's rate in tokens/s above 0")
        return np.ascontiguousarray(tokens / rates * 1000.0)
    return None


def _frame(
    trace: pd.DataFrame,
    tokens: np.ndarray,
    s: SimpleNamespace,
    sv: Any,
    handoffs: dict[str, Any],
    network_attrs: dict[str, Any],
    base: float,
    c: SimpleNamespace,
) -> pd.DataFrame:
    """The per-request table from the kernel's results and the network's own columns (``handoffs``: each
    handoff's decode worker, end, link wait, transfer alone, and what the replay reports of it) and attrs
    (parts as differences of relative times, timestamps shifted back by ``base``)."""
    n = len(trace)
    arrival = np.empty(n)
    arrival[sv.arrival_order] = sv.arrival_ms
    queue = sv.prefill_start - arrival
    prefill = sv.prefill_end - sv.prefill_start
    admission_wait = sv.admitted - sv.prefill_end
    link_wait, transfer = handoffs.pop("link_wait_ms"), handoffs.pop("transfer_ms")
    handoff = admission_wait + link_wait + transfer
    ttft = queue + prefill + handoff + sv.step_ms
    shift = (lambda t: t + base) if base else (lambda t: t)
    columns = {
        "prefill_worker": sv.prefill_worker,
        "decode_worker": handoffs.pop("decode_worker"),
        "arrival_ms": shift(arrival),
        "prefill_start_ms": shift(sv.prefill_start),
        "prefill_end_ms": shift(sv.prefill_end),
        "admitted_ms": shift(sv.admitted),
        "transfer_end_ms": shift(handoffs.pop("transfer_end_ms")),
        "first_token_ms": shift(sv.first_token),
        "done_ms": shift(sv.done),
        "queue_ms": queue,
        "prefill_ms": prefill,
        "admission_wait_ms": admission_wait,
        "link_wait_ms": link_wait,
        "transfer_ms": transfer,
        "handoff_delay_ms": handoff,
        "decode_step_ms": sv.step_ms,
        "ttft_ms": ttft,
        "num_input_tokens": tokens.copy(),
        **handoffs,
    }
    if s.has_outputs:
        columns["num_output_tokens"] = s.outputs
    columns |= {name: getattr(sv, name) for name in MEMORY_EVENTS}
    if not s.has_outputs:
        del columns["done_ms"], columns["done_seq"]
    result = pd.DataFrame(columns, index=trace.index, copy=False)
    result.attrs.update(
        contention=c.contention,
        mode=c.mode,
        prefill_workers=s.prefill_workers,
        decode_workers=c.decode_workers,
        prefill_kv_tokens=None if s.prefill_capacity < 0 else s.prefill_capacity,
        decode_kv_tokens=None if s.decode_capacity < 0 else s.decode_capacity,
        concurrency=s.concurrency or None,
        prefill_routing=str(s.routing_name),
        requests=n,
        **network_attrs,
    )
    return result


def summarize_ttft(ttft: pd.DataFrame) -> dict[str, Any]:
    """Headline figures of a TTFT replay: each part's percentiles, each stage's utilisation, what dominates.

    Percentiles as :func:`perfmodel.summarize` takes them (numpy's ``"linear"`` method).

    Parameters
    ----------
    ttft
        A result of :func:`replay_ttft`.

    Returns
    -------
    dict
        ``requests``; ``p50_ms``, ``p90_ms``, ``p99_ms``, ``mean_ms`` of ``ttft_ms`` and, prefixed by each part's
        name (``queue``, ``prefill``, ``admission_wait``, ``link_wait``, ``transfer``,
        ``handoff_delay``, ``decode_step``), the same four of it (``queue_p99_ms``...); ``span_ms`` (first
        arrival to last first token or done); ``throughput_per_s`` (requests over the span); ``prefill_busy``
        (the prefill workers' busy share of the span); ``prefill_memory_mean`` and ``prefill_memory_peak``,
        ``decode_memory_mean`` and ``decode_memory_peak`` (tokens held over capacity: the time-average over
        workers, and the most any worker held at once, in the order the replay took and gave back memory at one
        instant: its ``*_seq`` columns; NaN where unbounded); ``dominant_p99_stage``: the part with the largest
        mean among the requests at or above the p99 TTFT (``"queue"``, ``"prefill"``, ``"admission_wait"``,
        ``"link_wait"``, ``"transfer"`` or ``"decode_step"``).

    Examples
    --------
    >>> import pandas as pd
    >>> from perfmodel import replay_ttft, summarize_ttft
    >>> trace = pd.DataFrame({"arrival_ms": [0.0, 0.0], "num_input_tokens": [500, 600]})
    >>> summary = summarize_ttft(replay_ttft(trace, 1.0, 1e6, prefill_tokens_per_s=10_000,
    ...                                      prefill_kv_tokens=1000, contention="fifo", decode_step_ms=10.0))
    >>> summary["p50_ms"], summary["dominant_p99_stage"], summary["decode_step_p99_ms"]
    (890.0, 'transfer', 10.0)
    """
    needed = ["ttft_ms", *(f"{part}_ms" for part in SUMMARY_PARTS), "arrival_ms", "first_token_ms", "prefill_worker",
              "prefill_start_ms", "transfer_end_ms", "num_input_tokens", "decode_worker", "admitted_ms"]  # fmt: skip
    check_result(ttft, "ttft", needed, "replay_ttft", ("saved_bytes", "replay_handoffs", "summarize"))
    ttft_ms = ttft["ttft_ms"].to_numpy(dtype=np.float64)
    replayed = ttft.attrs.get("requests")
    if isinstance(replayed, int) and replayed != len(ttft):
        warn(
            f"summarize_ttft: the result holds {len(ttft):,} of the {replayed:,} requests replayed (rows filtered "
            "out, a warm-up dropped?): its percentiles are of these rows, but its utilisation, throughput and memory "
            "count only their own work and holdings, not the other requests' at the same time, so they understate "
            "the run's. Summarize the whole result for those, and take a subset's percentiles with "
            "perfmodel.replay.sizing.percentile_ms"
        )
    summary: dict[str, Any] = {"requests": int(ttft_ms.size)}
    for prefix, column in (("", "ttft_ms"), *((f"{part}_", f"{part}_ms") for part in SUMMARY_PARTS)):
        values = ttft[column].to_numpy(dtype=np.float64)
        p50, p90, p99 = percentile_ms(values, [50, 90, 99])
        summary |= {
            f"{prefix}p50_ms": float(p50),
            f"{prefix}p90_ms": float(p90),
            f"{prefix}p99_ms": float(p99),
            f"{prefix}mean_ms": float(values.mean()) if values.size else np.nan,
        }
    start = float(ttft["arrival_ms"].min()) if len(ttft) else 0.0
    ends = ttft["done_ms"] if "done_ms" in ttft else ttft["first_token_ms"]
    end = float(np.maximum(ends, ttft["first_token_ms"]).max()) if len(ttft) else 0.0
    span = end - start
    workers, decode_workers = (int(ttft.attrs.get(f"{side}_workers", 0)) for side in ("prefill", "decode"))
    if not workers or not decode_workers:  # (attrs lost: a CSV round trip)
        workers = workers or int(ttft["prefill_worker"].max()) + 1 if len(ttft) else 1
        decode_workers = decode_workers or int(ttft["decode_worker"].max()) + 1 if len(ttft) else 1
        warn(
            "summarize_ttft: the result has none of replay_ttft's attrs (read back from a file?): the workers are "
            f"counted from its columns ({workers} prefill, {decode_workers} decode; a worker that served no request "
            "is missed) and the memory capacities are unknown (NaN): keep the result's attrs (Parquet keeps them) "
            "to summarize it as replayed"
        )
    summary["span_ms"] = span
    summary["throughput_per_s"] = len(ttft) / span * 1000.0 if span > 0 else np.nan
    summary["prefill_busy"] = float(ttft["prefill_ms"].sum()) / (workers * span) if span > 0 else np.nan
    for side, n_workers in (("prefill", workers), ("decode", decode_workers)):
        capacity = ttft.attrs.get(f"{side}_kv_tokens")
        mean, peak = _memory_share(ttft, side, capacity, n_workers, (start, end))
        summary[f"{side}_memory_mean"], summary[f"{side}_memory_peak"] = mean, peak
    summary["dominant_p99_stage"] = dominant_stage(ttft, summary["p99_ms"])
    return summary


#: Each side's memory in a result: each holding's worker, when it is taken and given back (ms, and the replay's
#: numbers of those events, :data:`MEMORY_EVENTS`) and the columns of its tokens.
_HELD = {
    "prefill": ("prefill_worker", "prefill_start_ms", "transfer_end_ms", "prefill_start_seq", "transfer_end_seq",
                ("num_input_tokens",)),
    "decode": ("decode_worker", "admitted_ms", "done_ms", "admitted_seq", "done_seq",
               ("num_input_tokens", "num_output_tokens")),
}  # fmt: skip


def _memory_share(
    ttft: pd.DataFrame, side: str, capacity: int | None, workers: int, span: tuple[float, float]
) -> tuple[float, float]:
    """How full ``side``'s memory was in a result (:data:`_HELD`): the time-average share of the capacity its
    ``workers`` held over ``span`` (ms), and the most any worker held at once (in the replay's order at one instant:
    :func:`perfmodel.kernels.serving.held_tokens`); NaN for an unbounded capacity or an empty span."""
    from ..kernels.serving import held_tokens

    if capacity is None or span[1] <= span[0]:
        return np.nan, np.nan
    worker, taken, given, taken_seq, given_seq, tokens = _HELD[side]
    needed = [taken, given, taken_seq, given_seq, *tokens]
    check_result(ttft, "ttft", needed, "replay_ttft", ("saved_bytes", "replay_handoffs", "summarize"))
    read = {c: ttft[c].to_numpy() for c in (worker, taken, given, taken_seq, given_seq)}
    held = np.sum([ttft[c].to_numpy(dtype=np.int64) for c in tokens], axis=0)
    start, end = read[taken].astype(np.float64), read[given].astype(np.float64)
    mean = float(np.sum(held * (end - start))) / (capacity * workers * (span[1] - span[0]))
    _, _, running = held_tokens(read[worker], read[taken_seq], read[given_seq], held)
    return mean, float(running.max()) / capacity if running.size else 0.0


def dominant_stage(ttft: pd.DataFrame, threshold_ms: float) -> str:
    """The part of TTFT with the largest mean among the requests whose TTFT is ``threshold_ms`` or more.

    Parameters
    ----------
    ttft : pandas.DataFrame
        A result of :func:`replay_ttft`.
    threshold_ms : float
        The TTFT (ms) from which a request is in the tail (e.g. the p99).

    Returns
    -------
    str
        ``"queue"``, ``"prefill"``, ``"admission_wait"``, ``"link_wait"``, ``"transfer"`` or ``"decode_step"``
        (empty for an empty tail).

    Examples
    --------
    >>> import pandas as pd
    >>> from perfmodel import replay_ttft
    >>> trace = pd.DataFrame({"arrival_ms": [0.0, 0.0], "num_input_tokens": [500, 600]})
    >>> dominant_stage(replay_ttft(trace, 1.0, 1e6, prefill_tokens_per_s=500), 0.0)  # 1-1.2 s prefills
    'prefill'
    """
    tail = ttft[ttft["ttft_ms"] >= threshold_ms] if len(ttft) else ttft
    parts = {
        "queue": "queue_ms",
        "prefill": "prefill_ms",
        "admission_wait": "admission_wait_ms",
        "link_wait": "link_wait_ms",
        "transfer": "transfer_ms",
        "decode_step": "decode_step_ms",
    }
    if not len(tail):
        return ""
    means = {name: float(tail[column].mean()) for name, column in parts.items()}
    return max(means, key=lambda name: means[name])
