"""The one edge of both replays: where a replay's handoffs run, read once and decided once.

The replay of handoffs alone (:func:`perfmodel.replay_handoffs`) and the TTFT replay
(:func:`perfmodel.replay_ttft`) read the link (or cluster), the model and the mode of a configuration here,
and here alone decide whether its handoffs run on links or on a cluster: :func:`handoffs_on` checks every option
both networks read, in the same words, and gives them a :class:`perfmodel.replay.links.LinkHandoffs` or a
:class:`perfmodel.replay.cluster.ClusterHandoffs`, which check what only their network reads and drive the one
event loop (:mod:`perfmodel.kernels.serving`) over it. Each answers the same two calls: ``replay()``, the
handoffs alone as a table, and ``under_load(serving_inputs)``, the hooks the TTFT replay runs the loop with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..errors import InputError, check_whole, warn
from ..inputs import resolve as _resolve
from ..inputs.codes import Contention, TransferMode, choice_code
from ..inputs.table import INPUTS, check_count, check_option
from ..inputs.words import count
from ..network.placement import is_cluster
from .prepared import PreparedTrace, bytes_name, on_rows, one_value, prefills_fit, request_values

__all__ = ["Handoffs", "handoffs_on"]


class Handoffs(Protocol):
    """A replay's handoffs on their network (links or a cluster), as :func:`handoffs_on` gives them."""

    def replay(self) -> pd.DataFrame:
        """The replay of the handoffs alone: the table :func:`perfmodel.replay_handoffs` returns."""

    def under_load(self, serving_inputs: SimpleNamespace) -> SimpleNamespace:
        """The TTFT replay's hooks, for the serving's checked inputs ``serving_inputs``: ``times`` (ready times from
        the earliest, and the earliest), ``tokens``, ``admitted`` (the array the loop writes each handoff's
        start in: on links, the network's ready times), ``decode_workers``, ``start(horizon)`` making the network, ``wrap(net, base)`` its columns and
        attrs, and ``unfinished()`` naming a handoff that never ends."""


def handoffs_on(prepared: PreparedTrace, c: SimpleNamespace) -> Handoffs:
    """The handoffs of the configuration ``c`` (:func:`perfmodel.replay.configured`) on their network: the link
    or cluster (``kv_transfer_bandwidth`` or its alias ``link``), the model (``kv_bytes_per_token`` or
    ``model``) and the mode read once, and links against a cluster decided here, for both replays. Sets
    ``c.mode`` to the mode's name; warns when the mode charges missing blocks of a trace without hashes, and of
    options that would change nothing: bounded decode caches without hashes, several links each handoff ignores
    (``contention="none"``).

    >>> from perfmodel.replay import configured, prepare_trace
    >>> trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [1024, 2048]})
    >>> handoffs_on(prepare_trace(trace), configured({"link": "ib-ndr", "model": "llama-3.1-8b"}, trace)).replay()[
    ...     "handoff_delay_ms"].round(4).tolist()
    [2.6844, 5.3687]
    """
    bandwidth_spec = _one_of(
        "kv_transfer_bandwidth", c.kv_transfer_bandwidth, "link", c.link, "<GB/s or e.g. 'ib-ndr'>"
    )
    models = _one_of("kv_bytes_per_token", c.kv_bytes_per_token, "model", c.model, "<bytes or e.g. 'llama-3.1-70b'>")
    bytes_spec = on_rows(prepared.trace, bytes_name(c), models)
    destination_missing = int(one_value("mode", c.mode)) == TransferMode.DESTINATION_MISSING
    c.mode = "destination_missing" if destination_missing else "full_prompt"
    _check_shared(prepared, c, bytes_spec)
    prefills_fit(prepared, c)  # (measured prefill ends that layer-wise prefill times do not fit: refused alike)
    if destination_missing and not prepared.has_hashes:  # (after the checks: a refused call says nothing else)
        warn(
            "the trace has no hash_ids, so no prefix can be found in any cache: destination_missing charges every "
            "block, block-rounded, which costs slightly more than full_prompt. Read a trace with hash_ids (e.g. "
            "Mooncake) to model prefix reuse."
        )
    if c.decode_cache_blocks is not None and not prepared.has_hashes:
        warn(
            f"decode_cache_blocks={c.decode_cache_blocks} has no effect: the trace has no hash_ids, so no block "
            "enters any decode cache. Read a trace with hash_ids (e.g. Mooncake) to model bounded caches."
        )
    if is_cluster(bandwidth_spec):  # flows sharing a cluster's resources max-min
        from .cluster import ClusterHandoffs

        return ClusterHandoffs(prepared, c, bandwidth_spec, bytes_spec, destination_missing)
    if c.links > 1 and choice_code("contention", c.contention) == Contention.NONE:
        warn(
            f"links={c.links} has no effect under contention='none': each handoff moves alone, as if on a link of "
            f"its own. Pass contention='fifo' (queues) or 'fair' (shared) to replay {c.links} links."
        )
    from .links import LinkHandoffs

    return LinkHandoffs(prepared, c, bandwidth_spec, bytes_spec, destination_missing)


def _one_of(name: str, value: Any, alias: str, alias_value: Any, example: str) -> Any:
    """The one of ``value`` and its alias' ``alias_value`` given (both or neither: refused, with ``example``)."""
    if (value is None) == (alias_value is None):
        both = value is not None
        raise InputError(
            f"{name}, {alias}",
            f"{name} and {alias} {'are both given' if both else 'are both missing'}",
            f"pass {name}={example} (or {alias}=, the same), once",
        )
    return alias_value if value is None else value


def _bounded(name: str, value: Any, *, smallest: int, optional: bool = False) -> int | None:
    """A whole number from ``smallest`` to the table's bound for ``name`` (2**53), as a Python int (the kernel's
    int64 holds it), or :class:`InputError`."""
    largest = int(INPUTS[name].valid.high)  # type: ignore[union-attr]
    return check_whole(
        name,
        value,
        smallest=smallest,
        optional=optional,
        largest=largest,
        above=f"pass {name} as a whole number from {smallest} to 2**53",
    )


def _check_shared(prepared: PreparedTrace, c: SimpleNamespace, bytes_spec: Any) -> None:
    """Check the options both networks read, alike (one message whatever the network), each one-value input
    and count replaced by its checked value: the choices, the counts and the block size, the caller's fixed costs
    and fallback delay (one number each, never text), the decode caches' memory, and a layer count against the
    model's own layers."""
    for name in ("routing", "contention", "overlap", "kv_layout"):
        check_option(name, getattr(c, name))
    c.block_size = _bounded("block_size", one_value("block_size", c.block_size), smallest=1)
    c.decode_workers = check_count("decode_workers", c.decode_workers)
    c.links = check_count("links", c.links)
    c.decode_cache_blocks = _bounded("decode_cache_blocks", c.decode_cache_blocks, smallest=0, optional=True)
    for name in ("latency_ms", "per_block_ms", "per_message_ms"):
        setattr(c, name, one_value(name, getattr(c, name)))
    if c.fallback_delay_ms is not None:
        c.fallback_delay_ms = one_value("fallback_delay_ms", c.fallback_delay_ms)
        if not math.isfinite(c.fallback_delay_ms):  # (NaN is "none" in the numpy API; a replay charges a delay)
            raise InputError(
                "fallback_delay_ms",
                f"{c.fallback_delay_ms!r} is not a delay a replay can charge",
                "pass a finite number of milliseconds >= 0, or None",
            )
    _caches_fit(c.decode_workers, prepared.n_unique, c.decode_cache_blocks)
    trace = prepared.trace
    models = trace[bytes_spec] if isinstance(bytes_spec, str) and bytes_spec in trace.columns else bytes_spec
    if c.num_layers is not None and (
        isinstance(models, (str, Mapping)) or (np.ndim(models) and _resolve.holds_labels(models))
    ):
        _resolve.own_layers(
            np.asarray(models, dtype=object) if np.ndim(models) else models,
            request_values(trace, "num_layers", c.num_layers),
            trace.index,
        )


def _caches_fit(workers: int, n_unique: int, capacity: int | None) -> None:
    """Refuse a replay whose decode caches (see :func:`perfmodel.kernels.replay.new_caches`) need more memory than
    the machine has, before allocating them: the bound is the memory, named with what it would take."""
    import os

    blocks = max(n_unique, 1)
    need = blocks * -(-workers // 64) * 8 + workers * 24  # which workers hold each block; per-worker counters
    if capacity is not None and 0 < capacity < n_unique:  # bounded caches: a slot per block and a log each
        need += workers * blocks * 4 + workers * min(2 * capacity, 2**31 - 1) * 4
    try:  # what the machine has free now (the caches are not all it needs: half of it at most)
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") // 2
    except (AttributeError, OSError, ValueError):
        memory = 2**40  # (no way to ask: only the absurd is refused)
    try:  # a limit on this process' address space (ulimit -v) binds first
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        memory = min(memory, limit) if limit > 0 else memory
    except (ImportError, OSError, ValueError):
        pass
    if need > memory:
        raise InputError(
            "decode_workers",
            f"{count(workers, 'decode worker')} with {count(n_unique, 'distinct block')}"
            + (f" and {count(capacity, 'block')} each" if capacity else "")
            + f" need {need / 1e9:,.1f} GB "
            f"for their caches, more than the {memory / 1e9:,.1f} GB a replay may take here (half the free memory)",
            "pass fewer decode_workers (or a smaller decode_cache_blocks)",
        )
