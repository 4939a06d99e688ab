"""Records of the replay on a cluster (:mod:`perfmodel.kernels.cluster`): its state and work arrays, read by
field name. numba passes a named tuple to a function as its fields, word by word (a 1-D array is 7 words), so
arrays of one length are one structured array (one row per class, flow slot, kept flow, decode worker, ...:
``cl.count[c]`` reads a field's view; a ``numpy.recarray``, so that plain Python, ``NUMBA_DISABLE_JIT=1``, reads
fields by name too), passed as one array; a helper compiled apart takes only the records it reads
(:mod:`perfmodel.kernels.network`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .sharing import Heaps, Local, Memo

#: Each class's flows moving, one row per class (a structured array: numba passes it as one array, where a
#: record of a dozen arrays costs a dozen arrays' words in every call, :mod:`perfmodel.kernels.network`):
#: how many, their virtual time and rate, their bytes, their heap.
CLASSES = np.dtype(
    [
        ("count", np.int64),
        ("served", np.float64),  # bytes each of its flows received since the class was last empty
        ("since", np.float64),  # when ``served`` was brought up to date (ms)
        ("rate", np.float64),  # each flow's (GB/s); NaN: no flow moves
        ("bytes", np.float64),  # its flows' bytes together
        ("delivered", np.float64),  # of which delivered
        ("first", np.float64),  # its flows' smallest target
        ("end", np.float64),  # when its next flow ends
        ("heap", np.int64),  # classes with flows, an indexed heap by (end, class)
        ("where", np.int64),  # each class's position in ``heap`` (-1: not in it)
        ("touched", np.int64),  # the batch (event time) in which its flows last changed
        ("neck", np.int64),  # its flows' bottleneck when they end (this batch)
    ],
    align=True,
)


def new_classes(classes: int) -> np.ndarray:
    """The :data:`CLASSES` of ``classes`` classes, none moving (numpy, in Python).

    >>> cl = new_classes(2); cl["where"].tolist(), cl["end"].tolist()
    ([-1, -1], [inf, inf])
    """
    cl = np.zeros(classes, CLASSES).view(np.recarray)
    cl["rate"], cl["end"], cl["where"], cl["neck"] = np.nan, np.inf, -1, -1
    return cl


#: Flows paying their fixed costs or moving, one row per slot (recycled; a structured array, as
#: :data:`CLASSES`): a flow's bytes, its request (by position in ready order), its position in the pair, the
#: copy of that position and its class; the free slots (a stack); and the heap of the flows not yet moving
#: (alone: not yet ended) by when they start (end).
POOL = np.dtype(
    [
        ("bytes", np.float64),
        ("request_seq", np.int64),  # its request's position in ready order
        ("req", np.int64),  # its request (``order[request_seq]``)
        ("sole", np.bool_),  # its request's only flow simulated
        ("position", np.int32),
        ("copy_id", np.int32),  # a row of Structure.views
        ("cls", np.int32),
        ("free", np.int64),
        ("time", np.float64),  # the heap's entries (as perfmodel.kernels.replay.HEAP's)
        ("seq", np.int64),
        ("value", np.int64),
    ],
    align=True,
)


class Loads(NamedTuple):
    """Each resource's load (GB/s), since when, its integral (GB/s x ms), its peak, and its time bins."""

    load: np.ndarray
    since: np.ndarray
    busy: np.ndarray
    peak: np.ndarray
    bins: np.ndarray  # (R, bins): the load's integral per time bin
    touched: np.ndarray  # bool (R,): a bin of the resource was written
    bin_of: np.ndarray  # (R,): the bin of ``since`` when it was last spread (bins are found by stepping from it)


#: Work arrays of the batches, one structured array (as :data:`CLASSES`) whose rows are indexed by resource
#: (R), by class (C), by position in a list, or by component (K): the seeds and ending classes of one batch,
#: and the filling of a connected set (in the cluster's own indices,
#: :func:`perfmodel.kernels.sharing.fill_classes`). Made by :func:`new_scratch`.
SCRATCH = np.dtype(
    [
        ("res_stamp", np.int64),  # (R): the filling in which a resource was last collected
        ("members", np.int64),  # (R): the connected set's resources
        ("cls_stamp", np.int64),  # (C)
        ("items", np.int64),  # (C): its classes
        ("rates", np.float64),  # (C): each class's new rate
        ("frozen", np.bool_),  # (C)
        ("left", np.float64),  # (R): capacity left
        ("free", np.int64),  # (R): flows not yet frozen
        ("ratio", np.float64),  # (R): each resource's fair share (capacity left / flows)
        ("live", np.int64),  # its resources with flows not yet frozen
        ("stale", np.bool_),  # (R): its share changed since last computed
        ("ties", np.int64),
        ("seeds", np.int64),  # resources whose flows changed in this batch
        ("seeded", np.int64),  # (R): the batch in which a resource was last made a seed
        ("covered", np.int64),  # (R): the batch in which a resource's rates were last recomputed
        ("ending", np.int64),  # classes whose flows end in this batch
        ("counters", np.int64),  # rows 0 and 1: [filling stamp, filling step]
        ("labelled", np.bool_),  # (K): each component's connected sets are up to date
        ("group", np.int64),  # (R): where each resource's connected set starts in ``group_res``
        ("group_res", np.int64),  # (R): each component's resources, set by set (sharing.label)
        ("group_end", np.int64),  # (R): by a set's start: its end
        ("group_cls", np.int64),  # (C): the sets' classes with flows
        ("group_cls_span", np.int64, (2,)),  # (R): by a set's start: its classes in ``group_cls``
        ("flows_on", np.int64),  # (R): each resource's flows moving
        ("tie_step", np.int64),  # (R): the filling step in which a resource last had the smallest share
    ],
    align=True,
)


def new_scratch(resources: int, classes: int, components: int) -> np.ndarray:
    """The :data:`SCRATCH` of a cluster of ``resources`` resources, ``classes`` classes and ``components``
    components: all zero (numpy, in Python).

    >>> len(new_scratch(3, 5, 1)), new_scratch(3, 5, 1)["group_cls_span"].shape
    (5, (5, 2))
    """
    return np.zeros(max(resources, classes, components, 2), SCRATCH).view(np.recarray)


class Trace(NamedTuple):
    """The requests (arrays of one length, but ``blocks``): each one's prompt tokens, its dense block ids (request ``r``'s are ``blocks[offsets[r]:offsets[r + 1]]``), its prefill worker, its
    consecutive blocks merged into one message; streamed layer by layer (else both empty): when its prefill ends,
    and the share of its time alone sent after that (its last layer group)."""

    tokens: np.ndarray
    blocks: np.ndarray
    offsets: np.ndarray
    prefill_of: np.ndarray
    blocks_per_message: np.ndarray  # float64: consecutive blocks merged into one message (inf: one per layer)
    prefill_end: np.ndarray
    last_fraction: np.ndarray


class Caches(NamedTuple):
    """The decode workers' prefix caches (:func:`perfmodel.kernels.replay.new_caches`, :func:`perfmodel.kernels.replay.insert_blocks`)."""

    holders: np.ndarray
    alive: np.ndarray
    slot_of: np.ndarray
    log: np.ndarray
    first: np.ndarray
    end: np.ndarray
    size: np.ndarray
    capacity: np.int64  # LRU blocks per decode worker; < 0: unbounded (or never full)


class Ends(NamedTuple):
    """Per request: its flows still moving, the position of its last-ending flow so far, the earliest it can end
    (streamed layer by layer: its prefill's end plus its last group's share of its time alone; else -inf); the
    pending handoffs."""

    remaining: np.ndarray  # int32
    last_pos: np.ndarray  # int32
    earliest: np.ndarray  # float64
    pending: np.ndarray  # a HEAP (perfmodel.kernels.replay) of (end, ready order, request * workers + worker)


#: Per decode worker (one row each, a structured array as :data:`CLASSES`): the bytes and flows routed to it not
#: yet moving (alone: not yet ended), and a work array of its loads (routing).
WAITING = np.dtype([("bytes", np.float64), ("flows", np.int64), ("loads", np.float64)], align=True)

#: A handoff's simulated flows, one row per kept flow (a structured array as :data:`CLASSES`): class, position
#: in the pair, copy (a row of Structure.views).
KEPT = np.dtype([("cls", np.int64), ("position", np.int64), ("copy_id", np.int64)], align=True)


class Sim(NamedTuple):
    """The flows sharing the cluster: their classes, their pool and heaps, the resources' loads and the batches'
    work arrays (what :func:`perfmodel.kernels.cluster.advance` reads)."""

    cl: np.ndarray  # CLASSES, one row per class
    pool: np.ndarray  # POOL, one row per slot
    heaps: Heaps
    loads: Loads
    sc: np.ndarray  # SCRATCH


class AloneWork(NamedTuple):
    """Work arrays of one handoff alone in the cluster (its time alone, :func:`perfmodel.kernels.sharing.alone`):
    a filling's, its flows', its kept flows' (:data:`KEPT`) and the fillings done already. Apart from
    :class:`Sim`, whose helpers never read them (each call copies its records, word by word:
    :mod:`perfmodel.kernels.network`)."""

    lc: Local
    al: np.ndarray  # ALONE, one row per kept flow
    kept: np.ndarray  # KEPT, one row per kept flow
    memo: Memo  # the fillings of a handoff's flows alone, by their classes in order
