"""Numba helpers of flows sharing resources max-min fairly (:mod:`perfmodel.kernels.cluster`'s parts), and the
one simulation of handoffs alone in a cluster (:func:`simulate_keys`).

Progressive filling over items that stand for ``count`` equal flows each (a class of flows of one
path; or one flow of a handoff alone), in the operation order of the plain-Python reference
(``tests/reference_maxmin.py``, ``maxmin_rates``: repeatedly, the resources of the smallest fair share
fix the rate of every unfrozen item on them); a handoff alone in the cluster (the reference's
``simulate``), for the replay's handoffs one at a time and for many keys at once (:func:`simulate_keys`:
every caller of the static path, :mod:`perfmodel.network.clusters`; explicit flows are one key of it,
:func:`simulate_flows`); the heaps of each class's flows (in chunks)
and the indexed heap of the classes by next end.
Helpers read their arguments' fields by name (the records are :mod:`perfmodel.kernels.cluster`'s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .. import _compat
from .handoff import fixed_ms, jit, kv_bytes, loop_helper

SATURATED = 1e-9  # a resource is full when its flows' rates reach its capacity within this (relative)
NIL = -1


# --- max-min fair rates by progressive filling ----------------------------------------------------------


@loop_helper(python=False)
def _ready(m, q, lc):
    """A filling of ``q`` items over ``m`` local resources ready for :func:`fill_classes`: each resource's whole
    capacity left and its items' flows, no item frozen (rate ``inf`` until one is)."""
    for j in range(m):
        lc.work.left[j] = lc.local_paths.capacities[j]
        lc.work.free[j] = 0
    for k in range(q):
        lc.work.frozen[k] = False
        lc.work.rates[k] = np.inf
        for x in range(lc.local_paths.class_off[k], lc.local_paths.class_off[k + 1]):
            lc.work.free[lc.local_paths.class_res[x]] += lc.work.counts[k]


@loop_helper(python=False)
def _local_paths(q, paths, lc, stamp, m):
    """Local paths of the items ``lc.work.items[:q]`` (classes) and each local resource's items; resources not yet
    collected under ``stamp`` are added after the first ``m``. Returns the number of local resources."""
    lc.local_paths.class_off[0] = 0
    x = 0
    for k in range(q):
        c = lc.work.items[k]
        for y in range(paths.class_off[c], paths.class_off[c + 1]):
            r = paths.class_res[y]
            if lc.work.stamp[r] != stamp:
                lc.work.stamp[r] = stamp
                lc.work.local[r] = m
                lc.work.resources[m] = r
                m += 1
            lc.local_paths.class_res[x] = lc.work.local[r]
            x += 1
        lc.local_paths.class_off[k + 1] = x
    for j in range(m + 1):
        lc.local_paths.res_off[j] = 0
    for y in range(x):
        lc.local_paths.res_off[lc.local_paths.class_res[y] + 1] += 1
    for j in range(m):
        lc.local_paths.res_off[j + 1] += lc.local_paths.res_off[j]
        lc.local_paths.capacities[j] = paths.capacities[lc.work.resources[j]]
        lc.work.free[j] = lc.local_paths.res_off[j]  # (a cursor while the lists are written)
    for k in range(q):
        for y in range(lc.local_paths.class_off[k], lc.local_paths.class_off[k + 1]):
            j = lc.local_paths.class_res[y]
            lc.local_paths.res_classes[lc.work.free[j]] = k
            lc.work.free[j] += 1
    return m


@loop_helper(python=False)
def _neck_of(k, lc):
    """Precise rule 9 for item ``k`` in the interval of rates ``lc.work.rates``: the first resource on its path
    that its items fill (within ``SATURATED``) and on which no item moves faster; -1 if none."""
    mine = lc.work.rates[k]
    for y in range(lc.local_paths.class_off[k], lc.local_paths.class_off[k + 1]):
        j = lc.local_paths.class_res[y]
        used = 0.0
        faster = False
        for x in range(lc.local_paths.res_off[j], lc.local_paths.res_off[j + 1]):
            o = lc.local_paths.res_classes[x]
            used += lc.work.rates[o] * lc.work.counts[o]
            faster |= lc.work.rates[o] > mine * (1 + 1e-12)
        if used >= lc.local_paths.capacities[j] * (1 - SATURATED) and not faster:
            return lc.work.resources[j]
    return -1


# --- a handoff alone in the cluster ------------------------------------------------------------------


class Paths(NamedTuple):
    """The cluster's resources and classes (:class:`perfmodel.kernels.cluster.Structure`'s first arrays)."""

    capacities: np.ndarray
    class_off: np.ndarray
    class_res: np.ndarray
    res_off: np.ndarray
    res_classes: np.ndarray


#: Work arrays of a filling over local indices (a handoff's flows alone, :func:`fill_classes` over
#: ``local_paths``), one structured array (as :data:`ALONE`) whose rows are indexed by resource (global: its
#: stamp, the filling that last collected it, and its local index; local: its global index, capacity left,
#: unfrozen flows, fair share and state), by item (its class, flows, rate and state), or by position in a list
#: (the resources of the smallest share in a step; the local resources 0, 1, ...); ``counters`` rows 0 and 1:
#: [fillings so far, filling steps so far].
LOCAL = np.dtype(
    [
        ("stamp", np.int64),
        ("local", np.int64),
        ("resources", np.int64),
        ("items", np.int64),
        ("counts", np.int64),
        ("rates", np.float64),
        ("frozen", np.bool_),
        ("left", np.float64),
        ("free", np.int64),
        ("ratio", np.float64),
        ("live", np.int64),
        ("stale", np.bool_),
        ("tie_step", np.int64),
        ("ties", np.int64),
        ("counters", np.int64),
        ("members", np.int64),
    ],
    align=True,
)


class Local(NamedTuple):
    """A filling over local indices: its work arrays (:data:`LOCAL`) and the local paths, as :class:`Paths`
    (items for classes; each local resource's capacity)."""

    work: np.ndarray
    local_paths: Paths


def new_local(resources: int, items: int, longest: int) -> Local:
    """An empty :class:`Local` for fillings of at most ``items`` items over ``resources`` resources (paths of at
    most ``longest``).

    >>> lc = new_local(3, 2, 2); len(lc.work), lc.work["members"].tolist(), lc.local_paths.class_res.shape
    (3, [0, 1, 2], (4,))
    """
    r, k = max(resources, 1), max(items, 1)
    entries = k * max(longest, 1)
    work = np.zeros(max(r, k, 2), LOCAL).view(np.recarray)
    work["members"] = np.arange(len(work))
    ints = lambda n: np.zeros(n, np.int64)  # noqa: E731
    return Local(work, Paths(np.zeros(r), ints(k + 1), ints(entries), ints(r + 1), ints(entries)))


#: Work arrays of one handoff's flows alone (:func:`alone`), one row per kept flow (a structured array: numba
#: passes it as one array, where a record of ten arrays costs ten arrays' words in every call,
#: :mod:`perfmodel.kernels.network`).
ALONE = np.dtype(
    [
        ("start", np.float64),
        ("bytes", np.float64),
        ("left", np.float64),
        ("anchor", np.float64),
        ("rate", np.float64),
        ("ends", np.float64),
        ("neck", np.int64),
        ("order", np.int64),
        ("active", np.int64),
        ("finish", np.float64),
    ],
    align=True,
)


class Memo(NamedTuple):
    """Fillings done already, by the classes of the active flows in order (open addressing, a power of 2 of
    slots): a filling depends only on them (the paths and capacities fixed), so the same classes in the same
    order are looked up, not filled again. Per slot: its number of items (-1: empty), its classes, each
    item's rate and bottleneck (:func:`_neck_of`, a global resource or -1); the slots used."""

    size: np.ndarray  # int64 (S,)
    keys: np.ndarray  # int64 (S, W)
    rates: np.ndarray  # float64 (S, W)
    necks: np.ndarray  # int64 (S, W)
    counter: np.ndarray  # int64 (1,)


@jit(inline="always", **_compat.no_reference_counting())
def _recall(na, al, classes, memo):
    """(slot, found) of the ``na`` active flows' classes in ``memo``: found, or the empty slot where they go;
    (-1, False) when they do not fit (more items than a slot holds, or the memo 3/4 full)."""
    slots, width = memo.keys.shape
    if na > width or slots == 0:
        return -1, False
    h = 0
    for x in range(na):
        h = ((h * 31) + classes[al.active[x]] + 1) & 0xFFFFFFFFFFFF  # (< 2**53: no overflow)
    s = h & (slots - 1)
    while memo.size[s] >= 0:
        if memo.size[s] == na:
            same = True
            for x in range(na):
                if memo.keys[s, x] != classes[al.active[x]]:
                    same = False
                    break
            if same:
                return s, True
        s = (s + 1) & (slots - 1)
    if 4 * memo.counter[0] >= 3 * slots:
        return -1, False
    return s, False


@loop_helper(python=False)
def _remember(s, na, al, classes, lc, memo):
    """Keep the filling just done (``lc``) of the ``na`` active flows in slot ``s``: rates and bottlenecks."""
    memo.size[s] = na
    memo.counter[0] += 1
    for x in range(na):
        memo.keys[s, x] = classes[al.active[x]]
        memo.rates[s, x] = lc.work.rates[x]
        memo.necks[s, x] = _neck_of(x, lc)


@jit(inline="always", **_compat.no_reference_counting())
def _alone_rates(na, t, al, paths, lc, classes, memo):
    """New rates at ``t`` of the ``na`` active flows (``al.active``): bytes so far carried at the old rate.
    With a :class:`Memo` (else None) a filling of the same classes in the same order is looked up; returns
    the slot read or written (-1: none, the filling is ``lc``'s)."""
    slot, found = -1, False
    if memo is not None:
        slot, found = _recall(na, al, classes, memo)
    if not found:
        stamp = lc.work.counters[0] + 1
        lc.work.counters[0] = stamp
        for x in range(na):
            lc.work.items[x] = classes[al.active[x]]
            lc.work.counts[x] = 1
        m = _local_paths(na, paths, lc, stamp, 0)
        _ready(m, na, lc)
        fill_classes(m, na, lc.local_paths, lc.work.counts, lc.work)
        if memo is not None and slot >= 0:
            _remember(slot, na, al, classes, lc, memo)
    for x in range(na):
        f = al.active[x]
        new = lc.work.rates[x]
        if memo is not None and slot >= 0:
            new = memo.rates[slot, x]
        if new != al.rate[f]:  # (else its end stands: the same anchor, bytes left and rate)
            if al.rate[f] == al.rate[f]:  # it was moving: its bytes so far at the old rate
                al.left[f] -= al.rate[f] * 1e9 * (t - al.anchor[f]) / 1000.0
                al.anchor[f] = t
            al.rate[f] = new
            al.finish[f] = al.anchor[f] + max(al.left[f], 0.0) / (al.rate[f] * 1e9) * 1000.0
    return slot


@loop_helper(python=False)
def alone(q, al, paths, lc, classes, positions, memo):
    """:func:`_alone_memo`, compiled apart (the replay's handoffs, each alone)."""
    return _alone_memo(q, al, paths, lc, classes, positions, memo)


@jit(inline="always", **_compat.no_reference_counting())
def _alone_memo(q, al, paths, lc, classes, positions, memo):
    """The reference's ``simulate`` (``tests/reference_maxmin.py``) of ``q > 0`` flows (starts ``al.start``, bytes ``al.bytes`` > 0,
    classes ``classes``; fillings looked up in ``memo``, a :class:`Memo` or None): each flow's end
    (``al.ends``), its rate and since when (``al.rate``, ``al.anchor``) and its bottleneck when it ended
    (``al.neck``); returns the index of the last-ending flow (ties: the lowest of ``positions``)."""
    for f in range(q):  # by start, ties in index order (insertion sort: a handful of flows)
        al.order[f] = f
        x = f
        while x > 0 and al.start[al.order[x - 1]] > al.start[f]:
            al.order[x] = al.order[x - 1]
            x -= 1
        al.order[x] = f
        al.left[f], al.anchor[f], al.rate[f] = al.bytes[f], al.start[f], np.nan
    pending, na = 0, 0
    t = al.start[al.order[0]]
    while pending < q or na > 0:
        while pending < q and al.start[al.order[pending]] <= t:
            al.active[na] = al.order[pending]
            na += 1
            pending += 1
        if na == 0:
            t = al.start[al.order[pending]]
            continue
        slot = _alone_rates(na, t, al, paths, lc, classes, memo)
        t_end = np.inf
        for x in range(na):
            t_end = min(t_end, al.finish[al.active[x]])
        t_next = min(t_end, al.start[al.order[pending]]) if pending < q else t_end
        if t_next == t_end:
            still = 0
            for x in range(na):
                f = al.active[x]
                if al.finish[f] == t_end:
                    al.ends[f] = t_end
                    if memo is not None:
                        al.neck[f] = memo.necks[slot, x] if slot >= 0 else _neck_of(x, lc)
                    else:
                        al.neck[f] = _neck_of(x, lc)
                else:
                    al.active[still] = f
                    still += 1
            na = still
        t = t_next
    last = 0
    for f in range(1, q):
        if al.ends[f] > al.ends[last] or (al.ends[f] == al.ends[last] and positions[f] < positions[last]):
            last = f
    return last


class Batch(NamedTuple):
    """:func:`_batch`'s outputs. Per key: its last-ending flow of more than 0 bytes (-1: none; ties: the
    lowest), that flow's end (ms; -inf: none) and its bottleneck (a resource, -1: none saturated). Per key
    and flow, when asked (else of 0 rows): its end (its start for a flow of 0 bytes: it does not move),
    its rate in its final rate interval (GB/s; NaN: it did not move), since when it had that rate (ms) and
    its bottleneck then."""

    last: np.ndarray  # int64 (K,)
    end: np.ndarray  # float64 (K,)
    neck: np.ndarray  # int64 (K,)
    ends: np.ndarray  # float64 (K, F) or (0, F)
    rates: np.ndarray
    anchors: np.ndarray
    necks: np.ndarray  # int64


@jit(inline="always", **_compat.no_reference_counting())
def _one_key(k, begin, size, paths, lc, al, memo, classes, out):
    """Key ``k``'s flows (``begin[f]`` ms, ``size[f]`` bytes) alone: :class:`Batch` ``out``'s row ``k``. A flow of
    0 bytes (or NaN) does not move: it ends at its start."""
    flows = len(size)
    q = 0
    for f in range(flows):
        if size[f] > 0:
            al.start[q], al.bytes[q], classes[q] = begin[f], size[f], f
            q += 1
    if q > 0:
        _alone_memo(q, al, paths, lc, classes, classes, memo)
    last, end, neck, x = -1, -np.inf, -1, 0
    per_flow = out.ends.shape[0] > 0
    for f in range(flows):
        moves = size[f] > 0
        e = al.ends[x] if moves else begin[f]
        if moves and (last < 0 or e > end):
            last, end, neck = f, e, al.neck[x]
        if per_flow:
            out.ends[k, f] = e
            out.rates[k, f] = al.rate[x] if moves else np.nan
            out.anchors[k, f] = al.anchor[x] if moves else begin[f]
            out.necks[k, f] = al.neck[x] if moves else -1
        if moves:
            x += 1
    out.last[k], out.end[k], out.neck[k] = last, end, neck


class Keys(NamedTuple):
    """Per key (a distinct row of the static path): charged tokens, the prompt's tokens, the messages one rank
    posts and the blocks it moves (float64 (K,) each)."""

    charged: np.ndarray
    tokens: np.ndarray
    messages: np.ndarray
    blocks: np.ndarray


class FlowTerms(NamedTuple):
    """Per flow: its byte terms (float64 (F, 4): :func:`perfmodel.network.clusters.flow_terms`) and costs (float64 (F, 3):
    its fixed cost before messages and blocks, ms, and its cost per message and per block); the window and the
    chunk in tokens."""

    terms: np.ndarray
    costs: np.ndarray
    window_tokens: float
    chunk_tokens: float


@loop_helper(python=False)
def flow_bytes(terms, f, charged, tokens, window_tokens, chunk_tokens):
    """Bytes of flow ``f`` for ``charged`` tokens of a ``tokens``-token prompt
    (:func:`perfmodel.network.clusters.flow_bytes`; the one formula, :func:`perfmodel.kernels.handoff.kv_bytes`)."""
    return kv_bytes(terms[f, 0], terms[f, 1], terms[f, 2], terms[f, 3], window_tokens, chunk_tokens, charged, tokens)


@loop_helper
def _batch(keys, flows, paths, lc, al, memo, classes, begin, size, out):
    """Each key's flows alone in the cluster, sharing max-min fairly (:func:`_alone_memo`, its fillings shared
    between keys through ``memo``): :class:`Batch` ``out``. A key is given by its tokens, messages and blocks
    (:class:`Keys`); each flow's bytes (:func:`flow_bytes`) and start (its fixed cost, then its messages' and
    blocks', in :func:`perfmodel.network.clusters.alone_ms`'s order) come from its :class:`FlowTerms`; flow ``f``
    crosses the resources of class ``f`` of ``paths``."""
    for k in range(len(keys.charged)):
        charged, tokens = keys.charged[k], keys.tokens[k]
        messages, blocks = keys.messages[k], keys.blocks[k]
        for f in range(flows.terms.shape[0]):
            size[f] = flow_bytes(flows.terms, f, charged, tokens, flows.window_tokens, flows.chunk_tokens)
            begin[f] = fixed_ms(flows.costs[f, 0], blocks * flows.costs[f, 2], messages * flows.costs[f, 1])
        _one_key(k, begin, size, paths, lc, al, memo, classes, out)


def new_alone(flows: int) -> np.ndarray:
    """Work arrays (:data:`ALONE`) of one handoff of at most ``flows`` flows alone (:func:`alone`).

    >>> new_alone(3).dtype.names[:2]
    ('start', 'bytes')
    """
    return np.zeros(max(flows, 1), ALONE).view(np.recarray)


def new_memo(flows: int, keys: int) -> Memo:
    """An empty :class:`Memo` for handoffs of at most ``flows`` flows: room for every filling of ``keys``
    handoffs' worth of distinct orders (4 fillings a flow), at most ~64k entries."""
    kmax = max(flows, 1)
    wanted, room = 4 * kmax * max(keys, 1), max(64, 65_536 // kmax)
    slots = 1 << (min(wanted, room) - 1).bit_length()
    return Memo(
        np.full(slots, -1, np.int64),
        np.zeros((slots, kmax), np.int64),
        np.zeros((slots, kmax)),
        np.zeros((slots, kmax), np.int64),
        np.zeros(1, np.int64),
    )


def _work(flows: int, resources: int, longest: int, keys: int) -> tuple:
    """Work arrays of :func:`_batch` for ``keys`` keys of ``flows`` flows over ``resources`` resources (paths of
    at most ``longest``): a filling's, a handoff's, a memo, the flows' classes, a key's starts and bytes."""
    kmax = max(flows, 1)
    lc = new_local(resources, kmax, longest)
    return lc, new_alone(kmax), new_memo(kmax, keys), np.zeros(kmax, np.int64), np.zeros(flows), np.zeros(flows)


def simulate_keys(
    keys: Keys, flows: FlowTerms, paths: Sequence[Sequence[int]], capacities: Sequence[float], per_flow: bool = False
) -> Batch:
    """Each key's flows alone in the cluster, sharing its resources max-min fairly (:func:`_batch`): the keys
    given by their tokens, messages and blocks (:class:`Keys`), each flow's bytes and start computed in the
    kernel from its :class:`FlowTerms`, over the resources ``paths[f]`` (indices into ``capacities``, decimal
    GB/s). The fillings of the same active flows are shared between keys; from ``parallel_min_rows`` keys on
    (:mod:`perfmodel.options`) the keys are shared between threads. ``per_flow``: also each flow's end, rate,
    since when and bottleneck.

    >>> keys = Keys(*np.array([[1.0, 3.0]] * 2), np.zeros(2), np.zeros(2))
    >>> flows = FlowTerms(np.array([[1e9, 0, 0, 0], [2e9, 0, 0, 0]]), np.zeros((2, 3)), 0.0, 0.0)
    >>> simulate_keys(keys, flows, [[0], [0]], [2.0]).end.tolist()
    [1500.0, 4500.0]
    """

    def run(i: int, j: int, *rest: Any) -> None:
        _batch(Keys._make(x[i:j] for x in keys), flows, *rest)

    return _in_threads(run, len(keys.charged), len(flows.terms), paths, capacities, per_flow)


def simulate_flows(
    starts_ms: ArrayLike, nbytes: ArrayLike, paths: Sequence[Sequence[int]], capacities: Sequence[float]
) -> Batch:
    """Flows that start at ``starts_ms`` and move ``nbytes`` each over ``paths`` alone in the cluster, with every
    per-flow output: one key of :func:`simulate_keys` (the same compiled simulation), one token whose flows move
    their bytes per token and start after their fixed costs (exactly: ``1 * bytes + 0`` and ``start + 0``).

    >>> b = simulate_flows([0.0, 0.0], [1e9, 3e9], [[0], [0]], [2.0])
    >>> b.ends.tolist(), b.last.tolist(), b.neck.tolist()  # 1 GB/s each, then 2 GB/s
    ([[1000.0, 2000.0]], [1], [0])
    """
    nbytes = np.asarray(nbytes, dtype=np.float64).reshape(-1)
    terms, costs = np.zeros((len(nbytes), 4)), np.zeros((len(nbytes), 3))
    terms[:, 0], costs[:, 0] = nbytes, np.asarray(starts_ms, dtype=np.float64)
    one, none = np.ones(1), np.zeros(1)
    return simulate_keys(Keys(one, one, none, none), FlowTerms(terms, costs, 0.0, 0.0), paths, capacities, True)


def _in_threads(
    run: Any, keys: int, flows: int, paths: Sequence[Sequence[int]], capacities: Sequence[float], per_flow: bool
) -> Batch:
    """A :class:`Batch` of ``keys`` keys of ``flows`` flows, ``run(i, j, paths, *work, out)`` filling keys ``i``
    to ``j`` on views of the outputs, on threads from ``parallel_min_rows`` keys on."""
    import numba

    from ..options import option
    from .threads import in_shares

    lengths = [len(p) for p in paths]
    where = Paths(
        np.asarray(capacities, dtype=np.float64),
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        np.asarray([r for p in paths for r in p], dtype=np.int64),
        np.zeros(1, np.int64),
        np.zeros(0, np.int64),
    )
    rows = keys if per_flow else 0
    out = Batch(
        np.zeros(keys, np.int64),
        np.zeros(keys),
        np.zeros(keys, np.int64),
        np.zeros((rows, flows)),
        np.zeros((rows, flows)),
        np.zeros((rows, flows)),
        np.zeros((rows, flows), np.int64),
    )
    threads = numba.config.NUMBA_NUM_THREADS if keys >= option("parallel_min_rows") else 1

    def share(_k: int, i: int, j: int) -> None:
        """Keys ``i`` to ``j``: views of the outputs, work arrays of their own."""
        work = _work(flows, len(where.capacities), max(lengths, default=0), j - i)
        run(i, j, where, *work, Batch._make(a[i:j] for a in out))

    in_shares(keys, max(threads, 1), share)
    return out


# --- the heaps of the classes and of their flows ----------------------------------------------------


class Heaps(NamedTuple):
    """Each class's flows as a binary heap by target, in chunks of ``CHUNK`` entries: position ``p`` of class
    ``c``'s heap is entry ``p % _CHUNK`` of chunk ``table[c, p // _CHUNK]`` (a heap's top levels share one
    chunk, and its entries are apart from the flows' other fields: few cache lines a push or a pop)."""

    table: np.ndarray  # int64 (C, T): each class's chunks
    keys: np.ndarray  # float64 (chunks, _CHUNK): targets
    slots: np.ndarray  # int64 (chunks, _CHUNK): the flows' pool slots
    free: np.ndarray  # int64 (chunks,): the free chunks, ``counter[0]`` of them
    counter: np.ndarray


CHUNK = 256


@jit(inline="always", **_compat.no_reference_counting())
def push_flow(c, n, key, slot, heaps):
    """Add (``key``, ``slot``) to class ``c``'s heap of ``n`` flows (a new chunk when its last is full)."""
    table, keys, slots = heaps.table, heaps.keys, heaps.slots
    if n % CHUNK == 0:
        heaps.counter[0] -= 1
        table[c, n // CHUNK] = heaps.free[heaps.counter[0]]
    p = n
    while p > 0:
        parent = (p - 1) // 2
        up, at = table[c, parent // CHUNK], parent % CHUNK
        if keys[up, at] <= key:
            break
        here, there = table[c, p // CHUNK], p % CHUNK
        keys[here, there], slots[here, there] = keys[up, at], slots[up, at]
        p = parent
    here, there = table[c, p // CHUNK], p % CHUNK
    keys[here, there], slots[here, there] = key, slot


@jit(inline="always", **_compat.no_reference_counting())
def pop_flow(c, n, heaps):
    """Remove the smallest of class ``c``'s heap of ``n`` flows (its chunk freed when the last empties)."""
    table, keys, slots = heaps.table, heaps.keys, heaps.slots
    size = n - 1
    last, at = table[c, size // CHUNK], size % CHUNK
    key, slot = keys[last, at], slots[last, at]
    if at == 0:
        heaps.free[heaps.counter[0]] = last
        heaps.counter[0] += 1
    if size == 0:
        return
    p = 0
    while True:
        child = 2 * p + 1
        if child >= size:
            break
        down, off = table[c, child // CHUNK], child % CHUNK
        if child + 1 < size:
            right, r_off = table[c, (child + 1) // CHUNK], (child + 1) % CHUNK
            if keys[right, r_off] < keys[down, off]:
                child, down, off = child + 1, right, r_off
        if key <= keys[down, off]:
            break
        here, there = table[c, p // CHUNK], p % CHUNK
        keys[here, there], slots[here, there] = keys[down, off], slots[down, off]
        p = child
    here, there = table[c, p // CHUNK], p % CHUNK
    keys[here, there], slots[here, there] = key, slot


@loop_helper(python=False)
def _sift(cl, at, size):
    """Move the class at heap position ``at`` up or down to its place (by (end, class))."""
    heap, end, where = cl.heap, cl.end, cl.where
    c = heap[at]
    while at > 0:
        parent = (at - 1) // 2
        p = heap[parent]
        if end[p] < end[c] or (end[p] == end[c] and p < c):
            break
        heap[at] = p
        where[p] = at
        at = parent
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        o = heap[child]
        if child + 1 < size:
            o2 = heap[child + 1]
            if end[o2] < end[o] or (end[o2] == end[o] and o2 < o):
                child, o = child + 1, o2
        if end[c] < end[o] or (end[c] == end[o] and c < o):
            break
        heap[at] = o
        where[o] = at
        at = child
    heap[at] = c
    where[c] = at


@loop_helper(python=False)
def heap_remove(cl, c, size):
    """Remove class ``c`` from the heap of ``size`` classes; returns the new size."""
    at = cl.where[c]
    cl.where[c] = NIL
    size -= 1
    if at != size:
        cl.heap[at] = cl.heap[size]
        cl.where[cl.heap[at]] = at
        _sift(cl, at, size)
    return size


@jit(inline="always", **_compat.no_reference_counting())
def schedule(cl, c, size):
    """Class ``c``'s next end from its virtual time, placed in the heap (or taken out of it when it has no
    flow); returns the heap's new size."""
    if cl.count[c] == 0:
        return heap_remove(cl, c, size) if cl.where[c] >= 0 else size
    cl.end[c] = cl.since[c] + max(cl.first[c] - cl.served[c], 0.0) / (cl.rate[c] * 1e9) * 1000.0
    if cl.where[c] < 0:
        cl.heap[size] = c
        cl.where[c] = size
        size += 1
    _sift(cl, cl.where[c], size)
    return size


@loop_helper(python=False)
def label(first, last, members, paths, counts, sc, stamp):
    """The connected sets of classes with flows among resources ``members[first:last]`` (a component of the
    cluster): ``sc.group_res[first:last]`` lists them set by set (``sc.group_cls`` their classes, from the
    component's first class position ``sc.group[first]``); each resource's set starts at ``sc.group[r]``,
    the set starting at position ``g`` ends at ``sc.group_end[g]`` and its classes span
    ``sc.group_cls_span[g, 0]:sc.group_cls_span[g, 1]``."""
    pos_r, pos_c = first, sc.group_cls_span[first, 0]
    for x in range(first, last):
        r0 = members[x]
        if sc.res_stamp[r0] == stamp:
            continue
        g, head = pos_r, pos_r
        sc.res_stamp[r0] = stamp
        sc.group_res[pos_r] = r0
        pos_r += 1
        sc.group_cls_span[g, 0] = pos_c
        while head < pos_r:
            r = sc.group_res[head]
            head += 1
            sc.group[r] = g
            for y in range(paths.res_off[r], paths.res_off[r + 1]):
                c = paths.res_classes[y]
                if counts[c] == 0 or sc.cls_stamp[c] == stamp:
                    continue
                sc.cls_stamp[c] = stamp
                sc.group_cls[pos_c] = c
                pos_c += 1
                for z in range(paths.class_off[c], paths.class_off[c + 1]):
                    s = paths.class_res[z]
                    if sc.res_stamp[s] != stamp:
                        sc.res_stamp[s] = stamp
                        sc.group_res[pos_r] = s
                        pos_r += 1
        sc.group_end[g] = pos_r
        sc.group_cls_span[g, 1] = pos_c


@loop_helper(python=False)
def fill_classes(m, q, paths, counts, sc):
    """The one max-min filler: rates of the items ``sc.items[:q]`` (classes of ``counts[c]`` equal flows) over the
    resources ``sc.members[:m]`` (capacities left in ``sc.left``, flows in ``sc.free``, ``paths`` each item's
    resources and each resource's items), by progressive filling: repeatedly, the resources of the smallest
    fair share (capacity left over unfrozen flows) fix the rate of every unfrozen item on them, in the operation
    order of the reference's ``maxmin_rates`` (``tests/reference_maxmin.py``). ``sc.rates[c]`` for each item
    ``c`` (``inf`` when no resource limits it). Two callers: the cluster replay, over a connected set in the
    cluster's own indices (its :data:`perfmodel.kernels.cluster_records.SCRATCH`), and a handoff alone, over local
    indices (a :class:`Local`'s ``work``, its paths ``Local.local_paths``). A resource's share is recomputed only when a step changed it, and only resources with flows not
    yet frozen are scanned (the same numbers as recomputing them all)."""
    left, free, frozen, rates, ratio, live, stale = sc.left, sc.free, sc.frozen, sc.rates, sc.ratio, sc.live, sc.stale
    n = 0
    for j in range(m):
        r = sc.members[j]
        if free[r] > 0:
            ratio[r] = left[r] / free[r]
            stale[r] = False
            live[n] = r
            n += 1
    while n > 0:
        share, ties, kept = np.inf, 0, 0
        for j in range(n):  # the resources with flows not yet frozen: the smallest share, and each of it
            r = live[j]
            if free[r] == 0:
                continue
            live[kept] = r
            kept += 1
            if stale[r]:  # (its share is recomputed once after a step changed it, however often)
                ratio[r] = left[r] / free[r]
                stale[r] = False
            if ratio[r] < share:
                share, ties = ratio[r], 0
            if ratio[r] == share:
                sc.ties[ties] = r
                ties += 1
        n = kept
        if share == np.inf:  # none left, or of unlimited capacity: the flows left are unlimited too
            return
        step = sc.counters[1] + 1
        sc.counters[1] = step
        for x in range(ties):
            sc.tie_step[sc.ties[x]] = step
        for x in range(ties):
            r = sc.ties[x]
            for y in range(paths.res_off[r], paths.res_off[r + 1]):
                c = paths.res_classes[y]
                if counts[c] == 0 or frozen[c]:
                    continue
                frozen[c] = True
                rates[c] = share
                for z in range(paths.class_off[c], paths.class_off[c + 1]):
                    s = paths.class_res[z]
                    if free[s] > 0 and sc.tie_step[s] != step:  # (a tie's own flows all freeze in this step)
                        left[s] = max(left[s] - share * counts[c], 0.0)
                        free[s] -= counts[c]
                        stale[s] = True
        for x in range(ties):
            free[sc.ties[x]] = 0
