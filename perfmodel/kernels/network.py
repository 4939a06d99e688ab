"""The network a handoff runs on, as an event loop drives it: links (:class:`perfmodel.kernels.replay.OnLinks`) or a
cluster (:class:`perfmodel.kernels.cluster.OnCluster`), behind one set of operations.

Each operation takes the network's record last and runs that network's own code: compiled, numba picks it by
the record's type (an ``overload``, so a loop over links compiles no cluster code, and the other way round);
in plain Python (``NUMBA_DISABLE_JIT=1``) the record's class picks it. The serving loop
(:mod:`perfmodel.kernels.serving`) is written once on these:

- ``route_request(r, now, net)``: request ``r`` is routed (and charged) at ``now``; returns its decode worker;
- ``room(net)``: whether a handoff can start now; else the caller returns for :func:`grown`;
- ``start_request(i, r, now, net)``: request ``r``'s handoff starts at ``now``, the ``i``-th to start;
- ``next_event(net)``, ``advance(t, net)``: the network's own next event (sharing: a fixed cost ending, bytes
  finishing; inf: none) and everything at ``t`` (True: it did nothing, :func:`grown` first);
- ``next_end(net)``, ``take_end(net)``: the earliest known handoff end (inf: none), and that handoff taken: its
  blocks enter its decode worker's cache; returns (request, end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba.extending import overload

from .._compat import no_reference_counting
from . import cluster as _cluster
from . import replay as _links

__all__ = [
    "advance",
    "grown",
    "next_end",
    "next_event",
    "room",
    "route_request",
    "start_request",
    "take_end",
]


def _operation(name: str) -> Callable[..., Any]:
    """The operation ``name``: the links' function of that name for an :class:`~perfmodel.kernels.replay.OnLinks`,
    the cluster's for an :class:`~perfmodel.kernels.cluster.OnCluster` (its last argument)."""
    on_links, on_cluster = getattr(_links, name), getattr(_cluster, name)

    def operation(*args: Any) -> Any:
        return (on_links if isinstance(args[-1], _links.OnLinks) else on_cluster)(*args)

    @overload(operation, jit_options=no_reference_counting())
    def _typed(*args: Any) -> Any:
        kind = getattr(args[-1], "instance_class", None)
        impl = on_links if kind is _links.OnLinks else on_cluster if kind is _cluster.OnCluster else None
        if impl is None:
            return None

        def typed(*args: Any) -> Any:  # (annotated as the stub is: numba compares the two signatures)
            return impl(*args)

        return typed

    operation.__name__ = operation.__qualname__ = name
    operation.__doc__ = f"{on_links.__doc__}\n\n(On a cluster: {on_cluster.__doc__})"
    return operation


route_request = _operation("route_request")
room = _operation("room")
start_request = _operation("start_request")
next_event = _operation("next_event")
advance = _operation("advance")
next_end = _operation("next_end")
take_end = _operation("take_end")


def grown(net: Any) -> Any:
    """``net`` (an ``OnLinks`` or ``OnCluster``) with the room its loop stopped for."""
    return (_links.grown if isinstance(net, _links.OnLinks) else _cluster.grown)(net)
