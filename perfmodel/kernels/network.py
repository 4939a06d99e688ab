"""The network a handoff runs on, as an event loop drives it: links (:class:`perfmodel.kernels.replay.OnLinks`) or a
cluster (:class:`perfmodel.kernels.cluster.OnCluster`), behind one set of operations.

Each operation takes the network's record last and runs that network's own code: compiled, numba picks it by
the record's type (an ``overload``, so a loop over links compiles no cluster code, and
the other way round); in plain Python (``NUMBA_DISABLE_JIT=1``) the record's class picks it. The one event loop,
:func:`perfmodel.kernels.serving.serve_pass`, is written once on these, for both networks (the replay of handoffs
alone is that loop with no prefill stage: :func:`perfmodel.kernels.serving.replay`):

- ``route_request(r, now, net)``: request ``r`` is routed (and charged) at ``now``; returns its decode worker;
- ``room(net)``: whether a handoff can start now; else the caller returns for :func:`grown`;
- ``start_request(i, r, now, net)``: request ``r``'s handoff starts at ``now``, the ``i``-th to start;
- ``next_event(net)``, ``advance(t, net)``: the network's own next event (sharing: a fixed cost ending, bytes
  finishing; inf: none) and everything at ``t`` (True: it did nothing, :func:`grown` first);
- ``next_end(net)``, ``take_end(net)``: the earliest known handoff end (inf: none), and that handoff taken: its
  blocks enter its decode worker's cache; returns (request, end).

Each operation reads the parts of the record it uses once, at its top, and never the record again (a cluster's
record is ~600 machine words): read again deep in a body whose helpers LLVM inlines, it cost
LLVM's optimiser seconds (measured: the cluster's ``start_request`` took 3.3 s to optimise, 2.9 s of it in the
SROA pass, of a first cluster replay's 28 s; 0.6 s read at its top).

A call costs the words of its arguments: numba passes a record as its fields, one machine word at a time (a 1-D
array is 7 words), and LLVM inlines only small callees. So the operations stay small (LLVM inlines them in the
loop), the two large ones the loop calls once (``start_request``, ``advance``) LLVM is told to inline, a helper
compiled apart is given the records it reads, never the network's record whole, a helper with one caller is
inlined in it, and a cluster's arrays of one length are one structured array
(:mod:`perfmodel.kernels.cluster_records`). Measured on a cluster of one NIC each side: ~4,700 words copied
into calls a request, 1.9 s for 1M requests; ~2,800 words, 1.3 s; the whole record ~600 words instead of
~1,200: 14% less CPU time, and the first replay compiles in 19 s of CPU time instead of 24. ``start_request``
and ``advance`` inlined (~590 and ~210 words no longer copied, each about once a request), measured interleaved
with the code before: ~30% less time on that cluster, ~10% on 16 nodes, ~20% under fair sharing on a link with a
latency; the first cluster replay compiles in about the same time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba.extending import overload

from .._compat import inlined_by_llvm, no_reference_counting, no_wrappers
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


def _operation(name: str, *params: str, inline: bool = False) -> Callable[..., Any]:
    """The operation ``name`` of parameters ``params`` (the network's record ``net`` last): the links' function of
    that name for an :class:`~perfmodel.kernels.replay.OnLinks`, the cluster's for an
    :class:`~perfmodel.kernels.cluster.OnCluster`. Compiled, it is an ``overload`` whose implementation is that
    network's own function (its Python source, compiled once, without the wrappers Python calls through, and
    called). Not inlined by numba: numba compiles an inlined overload in full to type it, then again in its caller,
    and each function taking the network's record costs seconds to compile (measured: the first cluster replay took
    75 s with inlining and Python's wrappers, 40 s without). ``inline=True``: LLVM inlines it
    (:func:`perfmodel._compat.inlined_by_llvm`), for an operation the loop calls in one place whose body is too
    large for LLVM to inline on its own, so that its call copies no record. The typing reads the record's type;
    numba wants its parameters written out (``params``), not ``*args``."""
    on_links, on_cluster = getattr(_links, name), getattr(_cluster, name)

    def choose(net: Any) -> Any:  # (the typing: the implementation for the record's numba type, else None)
        kind = getattr(net, "instance_class", None)
        impl = on_links if kind is _links.OnLinks else on_cluster if kind is _cluster.OnCluster else None
        return None if impl is None else impl.py_func

    arguments = ", ".join(params)
    scope: dict[str, Any] = {
        "on_links": on_links,
        "on_cluster": on_cluster,
        "OnLinks": _links.OnLinks,
        "choose": choose,
    }
    exec(
        f"def operation({arguments}):\n    return (on_links if isinstance(net, OnLinks) else on_cluster)({arguments})\n"
        f"def typing({arguments}):\n    return choose(net)\n",
        scope,
    )
    options = {**no_reference_counting(), **no_wrappers(), **(inlined_by_llvm() if inline else {})}
    overload(scope["operation"], jit_options=options)(scope["typing"])
    operation = scope["operation"]
    operation.__name__ = operation.__qualname__ = name
    operation.__doc__ = f"{on_links.__doc__}\n\n(On a cluster: {on_cluster.__doc__})"
    return operation


route_request = _operation("route_request", "r", "now", "net")
room = _operation("room", "net")
start_request = _operation("start_request", "i", "r", "now", "net", inline=True)
next_event = _operation("next_event", "net")
advance = _operation("advance", "t", "net", inline=True)
next_end = _operation("next_end", "net")
take_end = _operation("take_end", "net")


def grown(net: Any) -> Any:
    """``net`` (an ``OnLinks`` or ``OnCluster``) with the room its loop stopped for."""
    return (_links.grown if isinstance(net, _links.OnLinks) else _cluster.grown)(net)
