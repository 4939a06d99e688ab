"""The network a handoff runs on, as an event loop drives it: links (:class:`perfmodel.kernels.replay.OnLinks`) or a
cluster (:class:`perfmodel.kernels.cluster.OnCluster`), behind one set of operations.

Each operation takes the network's record last and runs that network's own code: compiled, numba picks it by
the record's type (an ``overload`` inlined into its caller, so a loop over links compiles no cluster code, and
the other way round); in plain Python (``NUMBA_DISABLE_JIT=1``) the record's class picks it. The two event loops
are written once on these, for both networks: the replay's (:func:`replay_pass`, each request at its ready time)
and the serving's (:func:`perfmodel.kernels.serving.serve_pass`):

- ``route_request(r, now, net)``: request ``r`` is routed (and charged) at ``now``; returns its decode worker;
- ``room(net)``: whether a handoff can start now; else the caller returns for :func:`grown`;
- ``start_request(i, r, now, net)``: request ``r``'s handoff starts at ``now``, the ``i``-th to start;
- ``next_event(net)``, ``advance(t, net)``: the network's own next event (sharing: a fixed cost ending, bytes
  finishing; inf: none) and everything at ``t`` (True: it did nothing, :func:`grown` first);
  ``advance_until(now, net)``: every such event up to ``now`` (True: stopped for :func:`grown`);
- ``next_end(net)``, ``take_end(net)``: the earliest known handoff end (inf: none), and that handoff taken: its
  blocks enter its decode worker's cache; returns (request, end).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np
from numba.extending import overload

from .._compat import no_reference_counting
from . import cluster as _cluster
from . import replay as _links
from .handoff import loop_helper

__all__ = [
    "advance",
    "advance_until",
    "grown",
    "next_end",
    "next_event",
    "replay",
    "replay_pass",
    "room",
    "route_request",
    "start_request",
    "take_end",
]


def _operation(name: str, *params: str) -> Callable[..., Any]:
    """The operation ``name`` of parameters ``params`` (the network's record ``net`` last): the links' function of
    that name for an :class:`~perfmodel.kernels.replay.OnLinks`, the cluster's for an
    :class:`~perfmodel.kernels.cluster.OnCluster`. Compiled, it is an ``overload`` inlined into its caller (numba
    inlines one of fixed parameters, not of ``*args``: the three functions are written out in ``params``)."""
    on_links, on_cluster = getattr(_links, name), getattr(_cluster, name)

    def choose(net: Any) -> Any:  # (the typing: the implementation for the record's numba type, else None)
        kind = getattr(net, "instance_class", None)
        impl = on_links if kind is _links.OnLinks else on_cluster if kind is _cluster.OnCluster else None
        return None if impl is None else types.FunctionType(scope["implementation"].__code__, {"impl": impl})

    arguments = ", ".join(params)
    scope: dict[str, Any] = {
        "on_links": on_links,
        "on_cluster": on_cluster,
        "OnLinks": _links.OnLinks,
        "choose": choose,
    }
    exec(
        f"def operation({arguments}):\n    return (on_links if isinstance(net, OnLinks) else on_cluster)({arguments})\n"
        f"def typing({arguments}):\n    return choose(net)\n"
        f"def implementation({arguments}):\n    return impl({arguments})\n",
        scope,
    )
    overload(scope["operation"], jit_options=no_reference_counting(), inline="always")(scope["typing"])
    operation = scope["operation"]
    operation.__name__ = operation.__qualname__ = name
    operation.__doc__ = f"{on_links.__doc__}\n\n(On a cluster: {on_cluster.__doc__})"
    return operation


route_request = _operation("route_request", "r", "now", "net")
room = _operation("room", "net")
start_request = _operation("start_request", "i", "r", "now", "net")
next_event = _operation("next_event", "net")
advance = _operation("advance", "t", "net")
advance_until = _operation("advance_until", "now", "net")
next_end = _operation("next_end", "net")
take_end = _operation("take_end", "net")


def grown(net: Any) -> Any:
    """``net`` (an ``OnLinks`` or ``OnCluster``) with the room its loop stopped for."""
    return (_links.grown if isinstance(net, _links.OnLinks) else _cluster.grown)(net)


@loop_helper
def replay_pass(i, order, ready, net):
    """The replay on the network ``net`` of the requests from the ``i``-th in ``order`` (ready order, each ready
    at ``ready[r]``) on: each at its ready time after the network's events until then and the handoffs ended by
    then (their blocks entering the caches). Returns where it stopped: past the last request (``n + 1``), or
    where the network needs room (:func:`grown`)."""
    n = order.shape[0]
    while i <= n:
        now = ready[order[i]] if i < n else np.inf
        if advance_until(now, net):
            return i
        t = next_end(net)
        while t <= now and t != np.inf:  # blocks of handoffs ended by now enter the caches, in end order
            take_end(net)
            t = next_end(net)
        if i == n:
            return n + 1
        if not room(net):
            return i
        r = order[i]
        route_request(r, now, net)
        start_request(i, r, now, net)
        i += 1
    return i


def replay(order: np.ndarray, ready: np.ndarray, net: Any) -> Any:
    """Replay the requests in ``order`` (ready order, ready at ``ready``) on the network ``net`` (an ``OnLinks`` or
    an ``OnCluster``) to the end: :func:`replay_pass` until it is done, the network grown where it stopped.
    Returns the network as it ended."""
    i = 0
    while True:
        i = int(replay_pass(np.int64(i), order, ready, net))
        if i > len(order):
            return net
        net = grown(net)
