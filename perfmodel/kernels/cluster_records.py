"""Records of the replay on a cluster (:mod:`perfmodel.kernels.cluster`): its state and work arrays, each a
named tuple of arrays read by field name (numba passes one to a function as its fields, word by word: a helper
compiled apart takes only the records it reads, :mod:`perfmodel.kernels.network`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .sharing import Alone, Heaps, Local, Memo


class Classes(NamedTuple):
    """Each class's flows moving: how many, their virtual time and rate, their bytes, their heap."""

    count: np.ndarray  # type: ignore[assignment]  # (a field named count shadows tuple.count)
    served: np.ndarray  # bytes each of its flows received since the class was last empty
    since: np.ndarray  # when ``served`` was brought up to date (ms)
    rate: np.ndarray  # each flow's (GB/s); NaN: no flow moves
    bytes: np.ndarray  # its flows' bytes together
    delivered: np.ndarray  # of which delivered
    first: np.ndarray  # its flows' smallest target
    end: np.ndarray  # when its next flow ends
    heap: np.ndarray  # classes with flows, an indexed heap by (end, class)
    where: np.ndarray  # each class's position in ``heap`` (-1: not in it)
    touched: np.ndarray  # the batch (event time) in which its flows last changed
    neck: np.ndarray  # its flows' bottleneck when they end (this batch)


class Pool(NamedTuple):
    """Flows paying their fixed costs or moving, by slot (recycled): a flow's bytes, its request (by position
    in ready order), its position in the pair, the copy of that position and its class; the free slots; and
    the heap of the flows not yet moving (alone: not yet ended) by when they start (end)."""

    nbytes: np.ndarray
    seq: np.ndarray
    req: np.ndarray  # its request (``order[seq]``)
    sole: np.ndarray  # bool: its request's only flow simulated
    position: np.ndarray  # int32
    copy_id: np.ndarray  # int32: a row of Structure.views
    cls: np.ndarray  # int32
    free: np.ndarray
    times: np.ndarray
    seqs: np.ndarray
    items: np.ndarray


class Loads(NamedTuple):
    """Each resource's load (GB/s), since when, its integral (GB/s x ms), its peak, and its time bins."""

    load: np.ndarray
    since: np.ndarray
    busy: np.ndarray
    peak: np.ndarray
    bins: np.ndarray  # (R, bins): the load's integral per time bin
    touched: np.ndarray  # bool (R,): a bin of the resource was written
    bin_of: np.ndarray  # (R,): the bin of ``since`` when it was last spread (bins are found by stepping from it)


class Scratch(NamedTuple):
    """Work arrays of the batches: the seeds and ending classes of one, and the filling of a connected set
    (in the cluster's own indices, :func:`perfmodel.kernels.sharing.fill_classes`)."""

    res_stamp: np.ndarray  # (R,): the filling in which a resource was last collected
    members: np.ndarray  # (R,): the connected set's resources
    cls_stamp: np.ndarray  # (C,)
    items: np.ndarray  # (C,): its classes
    rates: np.ndarray  # (C,): each class's new rate
    frozen: np.ndarray  # (C,)
    left: np.ndarray  # (R,): capacity left
    free: np.ndarray  # (R,): flows not yet frozen
    ratio: np.ndarray  # (R,): each resource's fair share (capacity left / flows)
    live: np.ndarray  # its resources with flows not yet frozen
    stale: np.ndarray  # bool (R,): its share changed since last computed
    ties: np.ndarray
    seeds: np.ndarray  # resources whose flows changed in this batch
    seeded: np.ndarray  # (R,): the batch in which a resource was last made a seed
    covered: np.ndarray  # (R,): the batch in which a resource's rates were last recomputed
    ending: np.ndarray  # classes whose flows end in this batch
    counters: np.ndarray  # [filling stamp, filling step]
    labelled: np.ndarray  # bool (K,): each component's connected sets are up to date
    group: np.ndarray  # (R,): where each resource's connected set starts in ``group_res``
    group_res: np.ndarray  # (R,): each component's resources, set by set (:func:`perfmodel.kernels.sharing.label`)
    group_end: np.ndarray  # (R,): by a set's start: its end
    group_cls: np.ndarray  # (C,): the sets' classes with flows
    group_cls_span: np.ndarray  # (R, 2): by a set's start: its classes in ``group_cls``
    flows_on: np.ndarray  # (R,): each resource's flows moving
    tie_step: np.ndarray  # (R,): the filling step in which a resource last had the smallest share


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


class Pending(NamedTuple):
    """Handoffs ended whose blocks have yet to enter a cache: a heap by (end, ready order) of (request, decode
    worker) as one number, ``request * workers + worker``."""

    times: np.ndarray
    seqs: np.ndarray
    items: np.ndarray


class Ends(NamedTuple):
    """Per request: its flows still moving, the position of its last-ending flow so far, the earliest it can end
    (streamed layer by layer: its prefill's end plus its last group's share of its time alone; else -inf); the
    pending handoffs."""

    remaining: np.ndarray  # int32
    last_pos: np.ndarray  # int32
    earliest: np.ndarray  # float64
    pending: Pending


class Waiting(NamedTuple):
    """Per decode worker: the bytes and flows routed to it not yet moving (alone: not yet ended), and a work
    array of its loads (routing)."""

    nbytes: np.ndarray
    flows: np.ndarray
    loads: np.ndarray


class Kept(NamedTuple):
    """A handoff's simulated flows, by kept flow: class, position in the pair, copy (a row of Structure.views)."""

    cls: np.ndarray
    position: np.ndarray
    copy_id: np.ndarray


class Sim(NamedTuple):
    """The flows sharing the cluster: their classes, their pool and heaps, the resources' loads and the batches'
    work arrays (what :func:`perfmodel.kernels.cluster.advance` reads)."""

    cl: Classes
    pool: Pool
    heaps: Heaps
    loads: Loads
    sc: Scratch


class AloneWork(NamedTuple):
    """Work arrays of one handoff alone in the cluster (its time alone, :func:`perfmodel.kernels.sharing.alone`):
    a filling's, its flows', its kept flows' (:class:`Kept`) and the fillings done already. Apart from
    :class:`Sim`, whose helpers never read them (each call copies its records, word by word:
    :mod:`perfmodel.kernels.network`)."""

    lc: Local
    al: Alone
    kept: Kept
    memo: Memo  # the fillings of a handoff's flows alone, by their classes in order
