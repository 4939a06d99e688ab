"""A transport: an engine's data path (its fixed costs and the fraction of line rate it reaches), usable on any
NIC of a :class:`perfmodel.Cluster`, and what its figures were measured over (:data:`SCOPES`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import cast

from ..errors import InputError, check_number, finite_at_least

__all__ = ["DECLARED", "SCOPES", "Transport"]


@dataclass(frozen=True)
class Transport:
    """An engine's data path (Mooncake TE, NIXL over UCX or UCCL, FastDeploy), usable on any NIC: its
    fixed costs and the fraction of a NIC's line rate its large transfers reach.

    On a :class:`perfmodel.Cluster`, every flow of a handoff pays ``setup_ms`` (before data moves),
    its messages times ``per_message_ms`` and its blocks times ``per_block_ms``; a NIC carries
    ``efficiency`` times its line rate.

    ``measured_over`` records what the figures were measured over: ``"flow"`` (what one flow pays, the default),
    ``"thread"`` (one posting thread on one port), ``"gpu"`` (one GPU's transfers), ``"nic"`` (one NIC or
    rail), or ``"node"`` (a node's ``measured_gpus`` GPUs moving data together: a benchmark's aggregate).
    A cluster charges each flow the per-flow figures (:meth:`per_flow`): a node's costs per message and
    per block were shared by its GPUs, so each GPU's flow pays ``measured_gpus`` times them, and the node's
    GPUs together take the time the node's benchmark does; the other scopes are one flow's already.

    Parameters
    ----------
    name
        A label for tables and plots.
    per_message_ms
        Cost of each message (transfer descriptor) a rank posts, in ms.
    per_block_ms
        Cost of each KV block moved, in ms.
    setup_ms
        Cost of each transfer before data moves, in ms (0 where no source gives one).
    efficiency
        Fraction of a NIC's line rate that large transfers reach (0 < efficiency <= 1).
    line_rate_gb_s
        The line rate (GB/s) of the hardware a profile was measured on (None: not from a benchmark).
    source
        Where the figures come from.
    measured_over
        What the figures were measured over (:data:`SCOPES`): ``"flow"``, ``"thread"``, ``"gpu"``, ``"nic"``
        or ``"node"``.
    measured_gpus
        With measured_over ``"node"`` (required there): how many GPUs moved data together in the measurement
        (>= 1); 1 otherwise.
    node_gb_s
        What a node's traffic through this transport reaches together, GB/s each way, whatever its NICs (a TCP
        stack's copies through the host): on a cluster, every NIC flow crosses its node's stack of this capacity
        at each end. None (default): no such limit.

    Examples
    --------
    >>> from perfmodel import Transport
    >>> Transport("te", per_message_ms=0.0005, efficiency=0.8).efficiency
    0.8
    >>> node = Transport("efa", per_message_ms=0.0003, measured_over="node", measured_gpus=8)   # a node's 8 GPUs together
    >>> round(node.per_flow().per_message_ms * 1000, 6), node.per_flow().measured_over        # each GPU's flow, us
    (2.4, 'flow')
    """

    name: str = "ideal"
    per_message_ms: float = 0.0
    per_block_ms: float = 0.0
    setup_ms: float = 0.0
    efficiency: float = 1.0
    line_rate_gb_s: float | None = None
    source: str = ""
    measured_over: str = "flow"
    measured_gpus: int | None = None
    node_gb_s: float | None = None

    def __post_init__(self) -> None:
        where = f"transport {self.name!r}"
        put = object.__setattr__
        for term, ok, rule, fix in _NUMBERS:  # (each number by its rule; None where a figure is not given)
            if getattr(self, term) is not None or term in ("efficiency", *_COSTS):
                put(self, term, check_number(where, term, getattr(self, term), ok, rule, fix))
        if not isinstance(self.measured_over, str) or self.measured_over not in SCOPES:
            raise InputError(
                where,
                f"measured_over {self.measured_over!r} is not one of {', '.join(map(repr, SCOPES))}",
                "say what its figures were measured over: 'flow' (one flow's), 'thread', 'gpu', 'nic' "
                "or 'node' (with measured_gpus)",
            )
        if self.measured_gpus is None:
            if self.measured_over == "node":
                raise InputError(
                    where,
                    "measured_over 'node' without measured_gpus: a node's figures are shared by the GPUs that moved "
                    "data together, and how many is not given",
                    "pass measured_gpus, e.g. 8 for a node's 8 GPUs",
                )
            put(self, "measured_gpus", 1)
        put(
            self,
            "measured_gpus",
            int(
                check_number(
                    where,
                    "measured_gpus",
                    self.measured_gpus,
                    lambda v: math.isfinite(v) and v == int(v) and v >= 1,
                    "is not a whole number >= 1",
                    "pass how many GPUs moved data together, e.g. 8",
                )
            ),
        )
        if cast(int, self.measured_gpus) > 1 and self.measured_over != "node":
            raise InputError(
                where,
                f"measured_gpus {self.measured_gpus} with measured_over {self.measured_over!r}: only a node's "
                "figures span several GPUs",
                "pass measured_over='node', or leave measured_gpus at 1",
            )

    def per_flow(self) -> Transport:
        """The figures one flow of a :class:`perfmodel.Cluster` pays: a node's (measured_over ``"node"``) costs per
        message and per block times its ``measured_gpus`` (they were shared by the GPUs moving data together),
        its setup and efficiency as they are; any other scope's figures as they are (this transport).

        >>> from perfmodel.network.links import transports
        >>> efa = transports()["mooncake-te-efa-p5en"]          # 8 GPUs of a p5en node together
        >>> efa.measured_over, efa.measured_gpus, efa.per_flow().per_message_ms == 8 * efa.per_message_ms
        ('node', 8, True)
        """
        if self.measured_over != "node" or self.measured_gpus == 1:
            return self
        g = cast(int, self.measured_gpus)  # (a whole number >= 1 once made)
        return dataclasses.replace(
            self,
            per_message_ms=self.per_message_ms * g,
            per_block_ms=self.per_block_ms * g,
            measured_over="flow",
            measured_gpus=1,
        )


#: What a transport's figures can have been measured over (:attr:`Transport.measured_over`).
SCOPES = ("flow", "thread", "gpu", "nic", "node")
_COSTS = ("per_message_ms", "per_block_ms", "setup_ms")
_POSITIVE = finite_at_least(0.0, open_low=True)
#: Each number of a transport: (field, its range, what a refused value is not, how to give it).
_NUMBERS = (
    ("efficiency", lambda v: 0 < v <= 1, "is not in (0, 1]",
     "pass the fraction of a NIC's line rate its large transfers reach, e.g. 0.81"),
    *((term, finite_at_least(0.0), "is not a finite number >= 0", f"pass {term} in ms >= 0") for term in _COSTS),
    ("line_rate_gb_s", _POSITIVE, "is not a finite number > 0", "pass the benchmark hardware's line rate in GB/s, or None"),
    ("node_gb_s", _POSITIVE, "is not a finite number > 0",
     "pass what a node's traffic through it reaches together, in GB/s, or None"),
)  # fmt: skip

_TCP_SOURCE = (
    "Mooncake transfer engine's TCP transport, a 40 GB transfer between two nodes of {nics}: ~{tcp} GB/s against "
    "{rdma} GB/s over RDMA (kvcache-ai/Mooncake, doc/en/transfer-engine.md, 'Highlights'); a node's traffic together, "
    "on NICs of {line} GB/s in all"
)
#: Transports declared from a published figure rather than fitted to a table (:func:`perfmodel.network.links.transports`
#: lists them with the fitted profiles): the TCP fallback of Mooncake's transfer engine, a node-wide limit.
DECLARED = {
    t.name: t
    for t in (
        Transport(
            "mooncake-tcp-4x200g",
            node_gb_s=36.0,
            line_rate_gb_s=100.0,
            source=_TCP_SOURCE.format(nics="4 x 200 Gb/s RoCE", tcp=36, rdma=87, line=100),
        ),
        Transport(
            "mooncake-tcp-8x400g",
            node_gb_s=41.0,
            line_rate_gb_s=400.0,
            source=_TCP_SOURCE.format(nics="8 x 400 Gb/s RoCE", tcp=41, rdma=190, line=400),
        ),
    )
}
