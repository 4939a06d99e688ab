"""The one edge of both replays: where a replay's handoffs run, read once and decided once.

The replay of handoffs alone (:func:`perfmodel.replay_handoffs`) and the TTFT replay
(:func:`perfmodel.replay_ttft`) read the link (or cluster), the model and the mode of a configuration here,
and here alone decide whether its handoffs run on links or on a cluster: :func:`handoffs_on` gives them a
:class:`perfmodel.replay.links.LinkHandoffs` or a :class:`perfmodel.replay.cluster.ClusterHandoffs`, which check
the rest of the configuration and drive the one event loop (:mod:`perfmodel.kernels.serving`) over their
network. Each answers the same two calls: ``replay()``, the handoffs alone as a table, and
``under_load(serving)``, the hooks the TTFT replay runs the loop with.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Protocol

import pandas as pd

from ..errors import InputError, warn
from ..inputs.codes import TransferMode
from ..network.placement import is_cluster
from .prepared import PreparedTrace, on_rows, one_value

__all__ = ["Handoffs", "handoffs_on"]


class Handoffs(Protocol):
    """A replay's handoffs on their network (links or a cluster), as :func:`handoffs_on` gives them."""

    def replay(self) -> pd.DataFrame:
        """The replay of the handoffs alone: the table :func:`perfmodel.replay_handoffs` returns."""

    def under_load(self, serving_inputs: SimpleNamespace) -> SimpleNamespace:
        """The TTFT replay's hooks, for the serving's checked inputs ``serving_inputs``: ``times`` (ready times from
        the earliest, and the earliest), ``tokens``, ``decode_worker`` and ``admitted`` (the arrays the loop
        writes), ``decode_workers``, ``start(horizon)`` making the network, ``wrap(net, base)`` its columns and
        attrs, and ``unfinished()`` naming a handoff that never ends."""


def handoffs_on(prepared: PreparedTrace, c: SimpleNamespace) -> Handoffs:
    """The handoffs of the configuration ``c`` (:func:`perfmodel.replay.configured`) on their network: the link
    or cluster (``kv_transfer_bandwidth`` or its alias ``link``), the model (``kv_bytes_per_token`` or
    ``model``) and the mode read once, and links against a cluster decided here, for both replays. Sets
    ``c.mode`` to the mode's name; warns when the mode charges missing blocks of a trace without hashes.

    >>> from perfmodel.replay import configured, prepare_trace
    >>> trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [1024, 2048]})
    >>> handoffs_on(prepare_trace(trace), configured({"link": "ib-ndr", "model": "llama-3.1-8b"})).replay()[
    ...     "handoff_delay_ms"].round(4).tolist()
    [2.6844, 5.3687]
    """
    bandwidth_spec = _one_of(
        "kv_transfer_bandwidth", c.kv_transfer_bandwidth, "link", c.link, "<GB/s or e.g. 'ib-ndr'>"
    )
    models = _one_of("kv_bytes_per_token", c.kv_bytes_per_token, "model", c.model, "<bytes or e.g. 'llama-3.1-70b'>")
    bytes_spec = on_rows(prepared.trace, "kv_bytes_per_token", models)
    destination_missing = int(one_value("mode", c.mode)) == TransferMode.DESTINATION_MISSING
    c.mode = "destination_missing" if destination_missing else "full_prompt"
    if destination_missing and not prepared.has_hashes:
        warn(
            "the trace has no hash_ids, so no prefix can be found in any cache: destination_missing charges every "
            "block, block-rounded, which costs slightly more than full_prompt. Read a trace with hash_ids (e.g. "
            "Mooncake) to model prefix reuse."
        )
    if is_cluster(bandwidth_spec):  # flows sharing a cluster's resources max-min
        from .cluster import ClusterHandoffs

        return ClusterHandoffs(prepared, c, bandwidth_spec, bytes_spec, destination_missing)
    from .links import LinkHandoffs

    return LinkHandoffs(prepared, c, bandwidth_spec, bytes_spec, destination_missing)


def _one_of(name: str, value: Any, alias: str, alias_value: Any, example: str) -> Any:
    if (value is None) == (alias_value is None):
        both = value is not None
        raise InputError(
            f"{name}, {alias}",
            f"{name} and {alias} {'are both given' if both else 'are both missing'}",
            f"pass {name}={example} (or {alias}=, the same), once",
        )
    return alias_value if value is None else value
