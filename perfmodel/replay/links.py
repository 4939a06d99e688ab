"""A replay's handoffs on links: the configuration checked as the link kernel's records, the loop run, the
result's table (:class:`LinkHandoffs`, which :func:`perfmodel.replay.edge.handoffs_on` gives both replays when
the link is not a cluster). The network is :class:`perfmodel.kernels.replay.OnLinks`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from ..errors import InputError, warn
from ..handoff import checked
from ..inputs import coerce as _coerce
from ..inputs import resolve as _resolve
from ..inputs.codes import choice_code
from ..inputs.coerce import read_only
from .prepared import (
    PreparedTrace,
    byte_column,
    bytes_name,
    layerwise_lead,
    link_column,
    notice_first_compile,
    one_value,
    request_values,
    terms_per_request,
)

__all__ = ["LinkHandoffs"]


class LinkHandoffs:
    """A replay's handoffs on links (a pool of ``c.links`` links of one kind), as
    :func:`perfmodel.replay.edge.handoffs_on` decides: the link ``bandwidth_spec`` and the model ``bytes_spec``
    as read there, the options both networks read checked there. What only links read is checked when a replay
    asks (:func:`link_inputs`)."""

    def __init__(
        self,
        prepared: PreparedTrace,
        c: SimpleNamespace,
        bandwidth_spec: Any,
        bytes_spec: Any,
        destination_missing: bool,
    ) -> None:
        self.prepared, self.c = prepared, c
        self.specs = (bandwidth_spec, bytes_spec, destination_missing)

    def replay(self) -> pd.DataFrame:
        """The handoffs alone (the table :func:`perfmodel.replay_handoffs` returns)."""
        from ..kernels import replay as _replay
        from ..kernels import serving

        trace = self.prepared.trace
        requests, cluster, kv_terms, link, times = link_inputs(self.prepared, self.c, *self.specs)
        out = _replay.Results.empty(len(trace))
        notice_first_compile()
        try:
            serving.replay(requests.order, requests.ready_ms, _replay.new_run(requests, cluster, out), cluster.workers)
        except serving.Unfinished:  # (a handoff that never ends: its time overflowed to inf, refused by name)
            finite_transfers(trace, out, link[0])
            raise
        finite_transfers(trace, out, link[0])
        return _replay_frame(trace, self.prepared.tokens, times, out, kv_terms, self.c, link)

    def under_load(self, serving_inputs: SimpleNamespace) -> SimpleNamespace:
        """The TTFT replay's hooks (:meth:`perfmodel.replay.edge.Handoffs.under_load`): each handoff ready when
        the loop admits it to decode."""
        from ..kernels import replay as _replay

        prepared, c, n = self.prepared, self.c, len(self.prepared.trace)
        requests, cluster, kv_terms, link, times = link_inputs(prepared, c, *self.specs)
        admitted = np.empty(n)  # the replay's ready times (when each handoff may start): written at admission
        requests = requests._replace(
            ready_ms=admitted, prefill_end_ms=read_only(admitted), last_fraction=read_only(np.ones(n))
        )
        out = _replay.Results.empty(n)

        def start(horizon: np.ndarray) -> Any:
            net = _replay.new_run(requests._replace(ready_ms=np.zeros(n) if n else admitted), cluster, out)
            return net._replace(requests=requests)  # (the state from times 0 on; the handoffs' ready times written)

        def wrap(net: Any, base: float) -> tuple[dict[str, Any], dict[str, Any]]:
            finite_transfers(prepared.trace, out, link[0])
            handoffs = {
                "decode_worker": out.worker,
                "transfer_end_ms": out.end,
                "link_wait_ms": out.queue if c.contention != "none" else np.zeros(n),
                "transfer_ms": out.transfer,
                "link": link_column(out.link),
                "cached_tokens": out.cached,
                "charged_tokens": out.charged,
                "transfer_bytes": byte_column(out.bytes, bool(np.all(kv_terms == np.floor(kv_terms)))),
            }
            return handoffs, dict(links=c.links, bandwidth_gb_s=link[0], latency_ms=link[1])

        return SimpleNamespace(
            times=times,
            tokens=requests.tokens,
            admitted=admitted,
            decode_workers=cluster.workers,
            start=start,
            wrap=wrap,
            unfinished=lambda: finite_transfers(prepared.trace, out, link[0]),  # (a transfer of inf ms: named)
        )


def link_inputs(
    prepared: PreparedTrace, c: SimpleNamespace, bandwidth_spec: Any, bytes_spec: Any, destination_missing: bool
) -> tuple[Any, Any, np.ndarray, tuple[float, float, float, float], tuple[np.ndarray, float]]:
    """A replay's configuration ``c`` on a link, checked, as the kernel's records: (requests, cluster, the
    table of byte terms, (bandwidth GB/s, latency, per-block and per-message ms), (ready times from the
    earliest, the earliest)), for both replays (:class:`LinkHandoffs`)."""
    from ..kernels import replay as _replay

    trace, tokens = prepared.trace, prepared.tokens
    _check_options(c)
    bandwidth, latency, per_block, per_message = _link_of(
        bandwidth_spec,
        one_value("latency_ms", c.latency_ms),
        one_value("per_block_ms", c.per_block_ms),
        one_value("per_message_ms", c.per_message_ms),
    )
    fallback = _fallback_of(c.fallback_delay_ms, bandwidth, c.contention)
    shape = dict(kv_cache_dtype=c.kv_cache_dtype, tp=c.tp, scope=c.scope, decode_tp=c.decode_tp)
    model_of, kv_terms = terms_per_request(
        trace, bytes_spec, shape, c.state_bytes, (c.kv_layout, c.num_layers) if per_message else None, bytes_name(c)
    )
    lead, last_fraction = layerwise_lead(trace, tokens, bytes_spec, c, per_message)
    (ready, base), n = prepared.relative_ready(), len(trace)  # (durations from relative times: timestamps shifted back)
    available = ready - lead  # when each transfer may start
    requests = _replay.Requests(
        order=np.argsort(available, kind="stable").astype(np.int64),
        ready_ms=available,
        tokens=tokens,
        blocks=prepared.blocks,
        offsets=prepared.offsets,
        model_of=model_of,
        kv_terms=kv_terms,
        prefill_end_ms=_coerce.read_only(ready),
        last_fraction=_coerce.read_only(last_fraction),
        blocks_per_message=request_values(trace, "blocks_per_message", c.blocks_per_message),
    )
    cluster = _replay.Cluster(
        n_unique=prepared.n_unique,
        hash_block_tokens=prepared.hash_block_tokens,
        block_size=c.block_size,
        destination_missing=destination_missing,
        workers=c.decode_workers,
        capacity=-1 if c.decode_cache_blocks is None else c.decode_cache_blocks,
        prefix_routing=c.routing == "prefix",
        contention=choice_code("contention", c.contention),
        n_links=min(c.links, max(n, 1)),  # (more links than requests: each transfer has one of its own all the same)
        bandwidth_gb_s=bandwidth,
        latency_ms=latency,
        per_block_ms=per_block,
        per_message_ms=per_message,
        fallback_delay_ms=fallback,
    )
    return requests, cluster, kv_terms, (bandwidth, latency, per_block, per_message), (ready, base)


def _check_options(c: SimpleNamespace) -> None:
    """Refuse what only a cluster decides (the options both networks read are checked at the edge:
    :func:`perfmodel.replay.edge.handoffs_on`)."""
    if c.routing in ("least_loaded", "topology") or c.prefill_workers is not None:  # (what a cluster decides)
        asked = "prefill_workers" if c.prefill_workers is not None else f"routing={c.routing!r}"
        raise InputError(
            asked.split("=", maxsplit=1)[0],
            f"{asked} needs a cluster (which workers sit where), and the link is not one",
            "pass a perfmodel.Cluster (or a cluster preset) as the link, or drop it",
        )


def finite_transfers(trace: pd.DataFrame, out: Any, bandwidth: float) -> None:
    """Refuse a replay whose transfer times are not finite (upstream's replay refuses them: e.g. a subnormal
    bandwidth), or whose handoffs end beyond what a time can hold, naming the first request."""
    if not np.isfinite(out.transfer).all():
        first = int(np.argmax(~np.isfinite(out.transfer)))
        raise InputError(
            "kv_transfer_bandwidth",
            f"{bandwidth!r} GB/s gives request {trace.index[first]!r} a "
            f"transfer time of {out.transfer[first]!r} ms (its bytes over the bandwidth, plus its fixed "
            "costs)",
            "pass a realistic bandwidth in GB/s and fixed costs in ms (latency_ms, per_block_ms, per_message_ms)",
        )
    overflowed = np.isinf(out.end)  # (each finite alone, but queued one after another: beyond a time's range)
    if overflowed.any():
        first = int(np.argmax(overflowed))
        raise InputError(
            "latency_ms, fallback_delay_ms",
            f"request {trace.index[first]!r}'s handoff would end at {out.end[first]!r} ms: the handoffs queued "
            "before it add up beyond what a time can hold",
            "pass fixed costs and a fallback delay of realistic size, in ms",
        )


def _replay_frame(
    trace: pd.DataFrame,
    tokens: np.ndarray,
    times: tuple[np.ndarray, float],
    out: Any,
    kv_terms: np.ndarray,
    c: SimpleNamespace,
    link: tuple[float, float, float, float],
) -> pd.DataFrame:
    """The replay's per-request table (indexed like the trace) from the kernel's results, with the link in attrs.
    ``times``: the ready times from the earliest, and the earliest (durations from the former, timestamps
    shifted back by the latter)."""
    bandwidth, latency, per_block, per_message = link
    ready, base = times
    moving = out.bytes > 0
    first, last = (float(out.start[moving].min()), float(out.end[moving].max())) if moving.any() else (0.0, 0.0)
    whole_bytes = bool(np.all(kv_terms == np.floor(kv_terms)))  # (whole bytes per token: whole byte counts)
    columns = {
        # copies of the trace's own columns (the frame below shares every array it is given)
        "arrival_ms": trace["arrival_ms"].to_numpy(dtype=np.float64, copy=True),
        "num_input_tokens": tokens.copy(),
        "decode_worker": out.worker,
        "link": link_column(out.link),
        "cached_tokens": out.cached,
        "charged_tokens": out.charged,
        # whole bytes as integers (exact below 2**53, which the kernel's float64 arithmetic guarantees)
        "transfer_bytes": byte_column(out.bytes, whole_bytes),
        "saved_bytes": byte_column(out.saved, whole_bytes),
        "transfer_ms": out.transfer,
        "queue_ms": out.queue,
        # layer-wise: what the client sees after its prefill ends; otherwise waiting plus transfer
        "handoff_delay_ms": (out.end - ready) if c.overlap == "layerwise" else out.queue + out.transfer,
        "start_ms": out.start + base if base else out.start,
        "end_ms": out.end + base if base else out.end,
    }
    result = pd.DataFrame(columns, index=trace.index, copy=False)  # this call's own arrays: not stacked into copies
    result.attrs.update(
        contention=c.contention,
        links=c.links,
        mode=c.mode,
        bandwidth_gb_s=bandwidth,
        latency_ms=latency,
        per_block_ms=per_block,
        per_message_ms=per_message,
        block_size=c.block_size,
        overlap=c.overlap,
        kv_layout=c.kv_layout,
        span_ms=last - first,
        span_ends_ms=max(abs(first), abs(last)),
        requests=len(trace),
    )
    return result


def _link_of(spec: Any, latency_ms: Any, per_block_ms: Any, per_message_ms: Any) -> tuple[float, float, float, float]:
    """One link for the replay: (effective bandwidth GB/s, finite and >= 0 as upstream's replay requires (0:
    no transfer is modeled, the fallback delay stands); total latency ms, total per-block ms, total per-message ms)."""
    if np.ndim(spec) != 0:
        raise InputError(
            "kv_transfer_bandwidth",
            "a replay runs on one kind of link, got several values",
            "pass one bandwidth, link name or Link (replay_grid sweeps several)",
        )
    try:
        terms = _resolve.link_terms(spec)
    except InputError as error:
        raise error.relocated("kv_transfer_bandwidth", error.row) from None
    try:
        bandwidth = float(checked("kv_transfer_bandwidth", terms.bandwidth_gb_s))
    except InputError as error:  # (the numpy API's rule offers NaN and +inf, which a replay refuses: its own rule)
        _refuse_bandwidth(error.value if isinstance(error.value, (int, float)) else terms.bandwidth_gb_s)
    costs = _resolve.with_link_costs(
        dict(latency_ms=latency_ms, per_block_ms=per_block_ms, per_message_ms=per_message_ms), terms
    )
    latency, per_block, per_message = (float(costs[name]) for name in _resolve.LINK_COSTS)
    if not 0 <= bandwidth < np.inf:
        _refuse_bandwidth(bandwidth)
    return bandwidth, latency, per_block, per_message


def _refuse_bandwidth(bandwidth: Any) -> NoReturn:
    """Refuse a replay's bandwidth ``bandwidth`` (decimal GB/s: negative, NaN or infinite) by the replay's own
    rule: finite and >= 0 (upstream's replay refuses NaN and +inf), 0 with a fallback delay."""
    value = float(bandwidth) if isinstance(bandwidth, (int, float, np.number)) else math.nan
    problem = "not a number" if math.isnan(value) else "negative" if value < 0 else "infinite"
    raise InputError(
        "kv_transfer_bandwidth",
        f"{bandwidth!r} GB/s is {problem}: a replay needs a finite bandwidth >= 0 "
        "(upstream's replay refuses NaN and +inf)",
        "pass a bandwidth in decimal GB/s, finite and >= 0 (0: no transfer is modeled, each handoff takes "
        "fallback_delay_ms)",
    )


def _fallback_of(value: Any, bandwidth: float, contention: str) -> float:
    """The replay's fallback delay (ms): checked always, used at a bandwidth of 0 (upstream's replay)."""
    fallback = None if value is None else float(one_value("fallback_delay_ms", value))
    if bandwidth == 0:
        if fallback is None:
            raise InputError(
                "fallback_delay_ms",
                "is None, and a bandwidth of 0 models no transfer",
                "pass fallback_delay_ms= the delay to charge each handoff (upstream's default: 0.0)",
            )
        if contention == "fair":
            raise InputError(
                "contention",
                "'fair' shares bytes on a link, and a bandwidth of 0 moves none",
                "pass a bandwidth > 0, or contention='none' or contention='fifo' with fallback_delay_ms",
            )
        if fallback == 0:  # (upstream's default: a disabled link would look infinitely fast, so it is said)
            warn(
                "a bandwidth of 0 models no transfer: each handoff takes fallback_delay_ms=0.0, as upstream's replay "
                "does, so every delay is 0 ms. Pass the link's bandwidth to model its transfers, or fallback_delay_ms="
                "the delay to charge"
            )
    return 0.0 if fallback is None else fallback
