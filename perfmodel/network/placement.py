"""A :class:`perfmodel.Cluster` where a link goes: resolved once per configuration into the kernel's terms.

A handoff alone in a cluster is its flows' simulation (:mod:`perfmodel.network.clusters`). Where its delay is
linear in the bytes (every flow's byte terms in one ratio, every flow's own fixed cost equal) it is
``fixed + bytes / (rate * 1e9) * 1000`` of its last-ending flow for every prompt, and the kernel
computes exactly that from the resolved terms: a million rows on a cluster cost what they cost on a
link. Otherwise each distinct charged-token count is simulated, and its delay reaches the kernel as
an equivalent bandwidth per row (the kernel still validates, applies worker types, fallbacks and
adds the caller's, the transport's and the links' per-message and per-block costs).
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from typing import Any, NamedTuple, cast

import numpy as np

from ..errors import InputError
from ..inputs import resolve as _resolve
from ..inputs.coerce import Coded, distinct, spread
from ..inputs.user_presets import key_of
from .clusters import Alone, Cluster, alone, flow_terms, head_terms, refuse_what_it_decides
from .links import Link

__all__ = ["Route", "is_cluster", "route"]


def is_cluster(value: Any) -> bool:
    """Whether ``kv_transfer_bandwidth`` is one cluster (a :class:`Cluster`, or a cluster preset's name)."""
    if isinstance(value, Cluster):
        return True
    if isinstance(value, str):
        from .links import LINKS, MULTIPLE, PROFILES
        from .presets import CLUSTERS, cluster_names

        key = key_of(value)
        if key in CLUSTERS:
            return True
        if key in LINKS or key in PROFILES or MULTIPLE.match(key):  # (links: the presets file is not read)
            return False
        return key in cluster_names()
    return False


def holds_clusters(value: Any) -> bool:
    """Whether ``kv_transfer_bandwidth`` is a column (list, array, Series) holding clusters or their names."""
    if isinstance(getattr(value, "dtype", None), np.dtype) and value.dtype.kind in "iufb":
        return False  # (numbers, one or many: no pass over them)
    if isinstance(value, (int, float, Cluster)) or _resolve.is_one(value):
        return False
    column = as_column(value)
    if not _resolve.holds_labels(column) and not (
        len(column) and isinstance(column[0] if not hasattr(column, "iloc") else column.iloc[0], Cluster)
    ):
        return False
    _, labels = distinct(column)
    return any(isinstance(label, Cluster) or is_cluster(label) for label in labels)


def as_column(value: Any) -> Any:
    """A column of labels as pandas and numpy take it (a list as an object array)."""
    import pandas as pd

    if isinstance(value, (pd.Series, np.ndarray, Coded)):
        return value
    return np.asarray(value if not isinstance(value, tuple) else list(value), dtype=object)


def take(value: Any, rows: np.ndarray) -> Any:
    """The ``rows`` of a per-row input (scalars as they are)."""
    import pandas as pd

    if isinstance(value, Coded):
        return Coded(np.asarray(value.codes)[rows], value.labels)
    if isinstance(value, pd.Series):
        return value.iloc[rows]
    if value is None or _resolve.is_one(value):
        return value
    array = np.asarray(value, dtype=object) if _resolve.holds_labels(value) else np.asarray(value)
    return array[rows]


def get_cluster(value: Any) -> Cluster:
    """A :class:`Cluster` from itself or a preset's name."""
    if isinstance(value, Cluster):
        return value
    from .presets import get_cluster as preset

    return preset(value)


class Route(NamedTuple):
    """What the kernel needs of a cluster: the resolved handoff (None for bytes the kernel refuses), or
    for a column of models the codes of its rows and each distinct model's resolved handoff."""

    cluster: Cluster
    resolved: Alone | None
    codes: Any = None
    many: list[Alone | None] | None = None  # (None: an unknown model, missing)
    per_token: Any = None  # a column of numbers of bytes: ``resolved`` is one byte's handoff
    state: Any = None  # a state size the kernel refuses (negative, not a number) or gives NaN for: as given


def _model_key(model: Any) -> Any:
    if isinstance(model, Mapping):
        return json.dumps(model, sort_keys=True, default=str)
    if isinstance(model, os.PathLike):
        return os.fspath(model)
    return model


@functools.lru_cache(maxsize=256)
def _resolved(
    cluster: Cluster,
    model_key: Any,
    number: bool,
    kv_cache_dtype: Any,
    tp: int,
    decode_tp: int,
    state_bytes: float | None,
) -> Alone:
    model = json.loads(model_key) if isinstance(model_key, str) and model_key.startswith("{") else model_key
    if number:
        from .clusters import HeadTerms

        terms = HeadTerms(1, float(model), state=float(state_bytes or 0.0))
    else:
        terms = head_terms(model, kv_cache_dtype=kv_cache_dtype, decode_tp=decode_tp, state_bytes=state_bytes)
    return alone(cluster, terms, tp, decode_tp)


def route(values: dict[str, Any], options: Any, errors: str = "raise") -> Route:
    """Resolve ``values["kv_transfer_bandwidth"]`` (a cluster) for the call's model and options; in
    place, the bandwidth, bytes-per-token, state and fixed-cost inputs become the kernel's terms of the
    linear case (see :func:`apply`). Numbers of bytes (alone, a column of them, or among models) are one
    GPU's: one head sent from prefill GPU 0 to decode GPU 0, with ``tp=1`` only. Refuses what the cluster
    decides (``scope="group"``, ``overlap="layerwise"``); with ``errors="coerce"`` an unknown model in a
    column is missing."""
    try:
        return _route(values, options, errors)
    except InputError:
        raise
    except ValueError as error:  # (an unknown model's name: named as the argument, as on a link)
        raise InputError.of("kv_bytes_per_token", error) from None


def _route(values: dict[str, Any], options: Any, errors: str) -> Route:
    """:func:`route`, its errors as they come."""
    cluster = get_cluster(values["kv_transfer_bandwidth"])
    refuse_what_it_decides(options)
    model = values["kv_bytes_per_token"]
    one = isinstance(model, (str, Mapping, os.PathLike))
    number = not one and np.ndim(model) == 0 and not isinstance(model, bool)
    numbers = not one and not number and not _resolve.holds_labels(model)  # a column of numbers of bytes
    codes = labels = None
    if not (one or number or numbers):
        codes, labels = distinct(model if isinstance(model, Coded) else np.asarray(model, dtype=object))
        if len(labels) == 1 and not _resolve.is_number(labels[0]):
            model, one, codes = labels[0], True, None
    tp, decode_tp = options.tp, options.decode_degree
    if number or numbers or any(map(_resolve.is_number, () if labels is None else labels)):
        refuse_model_options(tp, decode_tp, options.kv_cache_dtype, column=not number)
    _block_size_needed(cluster, values.get("block_size"))
    state, bad = _one_state(values["state_bytes"])
    if number and not float(model) >= 0:  # NaN or negative: the kernel's rules say what that gives
        return Route(cluster, None)
    if bad is not None:  # (resolved without it; the kernel refuses it, or gives NaN, as on a link)
        return route({**values, "state_bytes": None}, options, errors)._replace(state=bad)
    byte = _resolved(cluster, 1.0, True, None, 1, 1, state) if number or numbers or codes is not None else None
    if numbers:  # one byte's handoff, its byte terms times each row's bytes (apply)
        return Route(cluster, byte, per_token=np.asarray(model, dtype=np.float64))
    if codes is not None:

        def model_of(m: Any) -> Alone:
            return _resolved(cluster, _model_key(m), False, options.kv_cache_dtype, tp, decode_tp, state)

        return Route(cluster, None, codes, _many(labels, cast(Alone, byte), model_of, errors))  # (byte: resolved)
    resolved = _resolved(
        cluster, float(model) if number else _model_key(model), number, options.kv_cache_dtype, tp, decode_tp, state
    )
    return Route(cluster, resolved)


def through_nvlink(cluster: Cluster, model: Any, options: Any) -> set[bool]:
    """Whether each flow of the cluster's handoff alone, of one model (or a number of bytes) and the options of
    :class:`perfmodel.handoff.Options`, crosses NVLink (True) or NICs (False)."""
    from .clusters import HeadTerms

    terms = HeadTerms(1, float(model)) if isinstance(model, (int, float, np.number)) else head_terms(
        model, kv_cache_dtype=options.kv_cache_dtype, decode_tp=options.decode_degree)  # fmt: skip
    return {flow.nvlink for flow in alone(cluster, terms, options.tp, options.decode_tp).flows}


def refuse_model_options(tp: int, decode_tp: int, kv_cache_dtype: Any, column: bool = False) -> None:
    """Refuse bytes per token given as numbers (``column``: a column holding some) on a cluster with the options
    only a model's config can apply: ``tp`` and ``decode_tp`` (the cluster places the model's KV heads on its
    ranks) and ``kv_cache_dtype``. The error names the options that were given.

    >>> refuse_model_options(1, 1, None)  # (a number of bytes for one GPU of each side: nothing to refuse)
    >>> refuse_model_options(1, 1, "fp8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    perfmodel.errors.InputError: kv_bytes_per_token: kv_cache_dtype='fp8' needs the model's config (...
    """
    named = [f"tp={tp}"] if tp != 1 else []
    named += [f"decode_tp={decode_tp}"] if decode_tp not in (1, tp) else []  # (as tp unless given)
    named += [f"kv_cache_dtype={kv_cache_dtype!r}"] if kv_cache_dtype is not None else []
    if named:
        dropped = (
            ["tp"] * (tp != 1) + ["decode_tp"] * (decode_tp != 1) + ["kv_cache_dtype"] * (kv_cache_dtype is not None)
        )
        raise InputError(
            "kv_bytes_per_token",
            f"{' and '.join(named)} need{'s' if len(named) == 1 else ''} the model's config (a cluster places its "
            "KV heads on its ranks; a dtype sizes them), but kv_bytes_per_token is a number of bytes"
            + (" (or a column that holds some)" if column else ""),
            f"pass the model (e.g. 'llama-3.1-70b'), or leave out {', '.join(dropped)} for one GPU's bytes",
        )


def _one_state(state: Any) -> tuple[float | None, Any]:
    """The call's one state size (bytes each decode rank receives), or None; and the value as given where it is
    not a finite number >= 0 (for the kernel to refuse, or to give NaN for, as on a link); a column is refused."""
    if state is not None and np.ndim(state) != 0:
        raise InputError(
            "state_bytes",
            "a cluster takes one state size per call (state_bytes holds a column)",
            "pass one number of state bytes (each decode rank receives it)",
        )
    if state is None:
        return None, None
    if isinstance(state, (bool, np.bool_, str, bytes)) or not isinstance(state, (int, float, np.number)):
        return None, state
    value = float(state)
    return (value, None) if math.isfinite(value) and value >= 0 else (None, state)


def _many(labels: Any, byte: Alone, model_of: Any, errors: str) -> list[Alone | None]:
    """Each distinct label's resolved handoff: a number of bytes is one byte's handoff scaled, a model its own
    (None: unknown, with ``errors="coerce"``); every one linear, or the column is refused."""
    many = [
        byte._replace(full=float(label) * byte.full)
        if _resolve.is_number(label)
        else _resolve.per_label(model_of, errors)(label)
        for label in labels
    ]
    if not all(r.linear for r in many if isinstance(r, Alone)):
        raise InputError(
            "kv_transfer_bandwidth",
            "a column of models on a cluster whose handoffs are not linear in "
            "their bytes (state split unevenly, or flows of unequal fixed costs)",
            "call once per model",
        )
    return [r if isinstance(r, Alone) else None for r in many]


def _block_size_needed(cluster: Cluster, block_size: Any) -> None:
    """Refuse a cluster whose transport, NIC or NVLink costs something per message or block (counted from KV
    blocks) when no block size is given, naming that cost (the caller gave no per-message cost of their own)."""
    if block_size is not None:
        return
    for what, costs in (
        (f"transport {cluster.flow_transport.name!r}", cluster.flow_transport),  # (what each flow pays)
        (f"NIC {cast(Link, cluster.nic).name!r}", cluster.nic),
        (f"NVLink {getattr(cluster.nvlink, 'name', '')!r}", cluster.nvlink),
    ):
        for unit in ("message", "block"):
            cost = getattr(costs, f"per_{unit}_ms", 0.0)
            if cost:
                raise InputError(
                    "block_size",
                    f"the cluster's {what} costs {cost:.3g} ms per {unit} of each flow, counted from "
                    "the KV blocks, but no block size is given",
                    "give the KV block size in tokens (block_size=, or --block-size on the command line)",
                )


def apply(values: dict[str, Any], found: Route, errors: str = "raise") -> dict[str, Any]:
    """In place: the kernel's bandwidth, state and fixed costs of the resolved handoff; returns its
    byte terms (``bytes_per_token`` and, for window or chunked layers, the capped terms). Linear: the
    last-ending flow's terms at its rate, its own latency added. Otherwise the group's byte terms; the
    bandwidth is then set per row (:func:`nonlinear_bandwidth`)."""
    c, r, codes, many, per_token, bad_state = found
    if bad_state is not None:
        terms = apply(values, found._replace(state=None), errors)
        values["state_bytes"] = bad_state
        return terms
    if many is not None:
        return _apply_many(values, c, codes, many, errors)
    if r is None:
        values["kv_transfer_bandwidth"] = np.float64(c.nic_capacity_gb_s)
        return {"bytes_per_token": values["kv_bytes_per_token"]}
    transport = c.flow_transport  # (what each flow pays)
    extras = [("per_message_ms", transport.per_message_ms), ("per_block_ms", transport.per_block_ms)]
    if r.linear:  # (every flow's own costs are the last's: the kernel adds them; otherwise each flow's are simulated)
        extras = [
            ("per_message_ms", transport.per_message_ms + r.per_message_ms),
            ("per_block_ms", transport.per_block_ms + r.per_block_ms),
            ("latency_ms", r.latency_ms),
        ]
        full, window, chunk, state = r.full, r.window, r.chunk, r.state
        values["kv_transfer_bandwidth"] = np.float64(r.bandwidth_gb_s)
    else:
        full, window, chunk, state = group_terms(r)
        values["kv_transfer_bandwidth"] = np.float64(np.nan)  # (set per row before the kernel)
    for name, extra in extras:
        if extra:
            values[name] = _resolve.add(0.0 if values[name] is None else values[name], extra, name, errors)
    if state or values["state_bytes"] is not None:
        values["state_bytes"] = np.float64(state)
    terms = {"bytes_per_token": np.float64(full) if per_token is None else np.multiply(per_token, full)}
    if window or chunk:
        terms.update(
            window_bytes_per_token=np.float64(window),
            window_tokens=np.float64(r.terms.window_tokens),
            chunk_bytes_per_token=np.float64(chunk),
            chunk_tokens=np.float64(r.terms.chunk_tokens),
        )
    return terms


def _apply_many(
    values: dict[str, Any], c: Cluster, codes: Any, many: list[Alone | None], errors: str
) -> dict[str, Any]:
    """:func:`apply` for a column of models (each linear): each term a lookup by model, spread over the rows."""

    def column(get: Any, missing: float) -> np.ndarray:  # (an unknown model's rows: missing)
        return spread(codes, np.array([missing if r is None else get(r) for r in many] + [missing], dtype=np.float64))

    known = [r for r in many if r is not None]

    t = c.flow_transport  # (what each flow pays)
    for name, get in (
        ("latency_ms", lambda r: r.latency_ms),
        ("per_message_ms", lambda r: t.per_message_ms + r.per_message_ms),
        ("per_block_ms", lambda r: t.per_block_ms + r.per_block_ms),
    ):
        if any(get(r) for r in known):
            values[name] = _resolve.add(0.0 if values[name] is None else values[name], column(get, 0.0), name, errors)
    values["kv_transfer_bandwidth"] = column(lambda r: r.bandwidth_gb_s, np.nan)
    if any(r.state for r in known) or values["state_bytes"] is not None:
        values["state_bytes"] = column(lambda r: r.state, 0.0)
    terms = {"bytes_per_token": column(lambda r: r.full, np.nan)}
    if any(r.window or r.chunk for r in known):
        terms.update(
            window_bytes_per_token=column(lambda r: r.window, 0.0),
            window_tokens=column(lambda r: r.terms.window_tokens, 0.0),
            chunk_bytes_per_token=column(lambda r: r.chunk, 0.0),
            chunk_tokens=column(lambda r: r.terms.chunk_tokens, 0.0),
        )
    return terms


def group_terms(r: Alone) -> tuple[float, float, float, float]:
    """The byte terms of all of a handoff's flows together."""
    vectors = [flow_terms(f, r.terms) for f in r.flows]
    return cast("tuple[float, float, float, float]", tuple(float(sum(v[k] for v in vectors)) for k in range(4)))


def link_costs(r: Alone) -> bool:
    """Whether some flow's link (NIC or NVLink) costs something per message or per block."""
    return any(f.link.per_message_ms or f.link.per_block_ms for f in r.flows)


def nonlinear_bandwidth(
    found: Route,
    tokens: Any,
    charged: Any,
    after_fixed: bool = False,
    counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Per row, the bandwidth at which the kernel's bytes (the group's, terms ``group``) take what the
    simulation of the handoff's flows takes for that row's charged tokens (each distinct count simulated
    once, all in one call of :func:`perfmodel.kernels.sharing.simulate_keys`). Each flow pays its own link's
    per-message and per-block costs for the row's messages and blocks (``counts``: each row's, when a link
    costs something per message or block); the transport's and the caller's (common to all flows) are the
    kernel's. With ``after_fixed``: the handoff's rate, its bytes over its time after its last-ending
    flow's own fixed costs (NaN where it moves no bytes)."""
    from ..kernels.handoff import fixed_ms
    from ..kernels.sharing import FlowTerms, Keys, simulate_keys

    c, r = found.cluster, cast(Alone, found.resolved)  # (a route resolved alone, not linear)
    tokens = np.asarray(tokens, dtype=np.float64)
    charged = np.asarray(charged, dtype=np.float64)
    tokens, charged = np.broadcast_arrays(tokens, charged)
    columns = [charged] + ([tokens] if r.terms.chunk_tokens > 0 else [])
    if counts is not None:
        columns += np.broadcast_arrays(*counts, tokens)[:2]
    keys, inverse = distinct_rows([np.nan_to_num(np.ravel(x), nan=-1.0) for x in columns])
    m = keys[0]
    n = keys[1] if r.terms.chunk_tokens > 0 else np.zeros_like(m)
    messages, blocks = (keys[-2], keys[-1]) if counts is not None else (np.zeros_like(m), np.zeros_like(m))
    valid = (m >= 0) & (n >= 0) & (messages >= 0) & (blocks >= 0)
    every = bool(valid.all())
    if not every:
        m, n, messages, blocks = m[valid], n[valid], messages[valid], blocks[valid]
    t = c.flow_transport
    own = np.array([f.own_latency_ms(c) for f in r.flows], dtype=np.float64)
    per_message = np.array([f.link.per_message_ms for f in r.flows], dtype=np.float64)
    per_block = np.array([f.link.per_block_ms for f in r.flows], dtype=np.float64)
    costs = np.stack([t.setup_ms + own, per_message, per_block], axis=1)
    flows = FlowTerms(
        np.array([flow_terms(f, r.terms) for f in r.flows], dtype=np.float64).reshape(-1, 4),
        costs,
        float(r.terms.window_tokens),
        float(r.terms.chunk_tokens),
    )
    batch = simulate_keys(Keys(m, n, messages, blocks), flows, [f.path for f in r.flows], r.resources.capacities)
    last = batch.last
    sim_ms = np.where(last >= 0, batch.end, 0.0)  # (no flow moves: 0)
    nbytes = _bytes_of(group_terms(r), r.terms, m, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        if after_fixed:
            at = np.maximum(last, 0)
            fixed = fixed_ms.py_func(costs[at, 0], blocks * per_block[at], messages * per_message[at])
            sim_ms = sim_ms - np.where(last >= 0, fixed, 0.0)
            rate = np.where(nbytes > 0, nbytes / (sim_ms / 1000.0) / 1e9, np.nan)
        else:
            rate = np.where(sim_ms > 0, nbytes / (sim_ms / 1000.0) / 1e9, np.inf)
    if not every:
        rate, kept = np.full(keys.shape[1], np.nan), rate
        rate[valid] = kept
    return rate[inverse].reshape(tokens.shape)


def _bytes_of(vector: tuple[float, ...], terms: Any, charged: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """:func:`perfmodel.network.clusters.flow_bytes` of every key at once (the one bytes formula, element by element)."""
    from ..kernels.handoff import kv_bytes_each

    out = np.empty(charged.shape, dtype=np.float64)
    kv_bytes_each(
        *(np.full(charged.shape, float(x)) for x in (*vector, terms.window_tokens, terms.chunk_tokens)),
        np.ascontiguousarray(charged, dtype=np.float64),
        np.ascontiguousarray(tokens, dtype=np.float64),
        out,
    )
    return out


def distinct_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of ``columns``, one column each, shape (columns, K); each row's index among them).
    Whole numbers in a range of at most a few times the rows: one table of codes (no sort, no hash);
    otherwise pandas' hashing, column by column.

    >>> keys, inverse = distinct_rows([np.array([3.0, 1.0, 3.0, -1.0])])
    >>> keys[0][inverse].tolist()
    [3.0, 1.0, 3.0, -1.0]
    """
    import pandas as pd

    size = len(columns[0])
    low = [float(x.min()) if size else 0.0 for x in columns]
    high = [float(x.max()) if size else math.inf for x in columns]
    spans = [int(hi - lo) + 1 if hi - lo < 2**40 else 2**62 for lo, hi in zip(low, high)]  # (inf, NaN: 2**62)
    if math.prod(spans) <= 4 * size + (1 << 20) and all(np.array_equal(x, np.trunc(x)) for x in columns):
        code = np.zeros(size, np.int64)
        for x, lo, span in zip(columns, low, spans):
            code = code * span + (x - lo).astype(np.int64)
        seen = np.zeros(math.prod(spans), np.bool_)
        seen[code] = True
        present = np.flatnonzero(seen)
        index = np.zeros(len(seen), np.int64)
        index[present] = np.arange(len(present))
        keys, rest = [], present
        for lo, span in zip(reversed(low), reversed(spans)):
            keys.append((rest % span).astype(np.float64) + lo)
            rest = rest // span
        return np.array(keys[::-1]).reshape(len(columns), -1), index[code]
    code = np.zeros(size, np.int64)
    for x in columns:
        codes, labels = pd.factorize(x)
        code = pd.factorize(code * len(labels) + codes)[0]
    first = np.zeros(int(code.max()) + 1 if size else 0, np.int64)
    first[code[::-1]] = np.arange(size)[::-1]
    return np.array([x[first] for x in columns]).reshape(len(columns), -1), code


def _all_over_last(r: Alone) -> float:
    """A linear handoff's bytes over its last-ending flow's (every flow's terms in one ratio)."""
    last = sum(flow_terms(r.flows[r.last], r.terms))
    return sum(sum(flow_terms(f, r.terms)) for f in r.flows) / last if last > 0 else 1.0


def whole_handoff(
    found: Route, nbytes: np.ndarray, tokens: Any, charged: Any, counts: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, all the bytes the handoff moves (the sum over its flows; ``nbytes``: the kernel's bytes of
    each row) and its rate (GB/s): those bytes over its time after its last-ending flow's fixed costs
    (the transport's setup, latencies and hops, the messages' and blocks' costs), NaN where no bytes move."""
    _, r, codes, many = found[:4]
    if many is not None:
        factor: np.ndarray | float = spread(
            codes, np.array([np.nan if a is None else _all_over_last(a) for a in many] + [np.nan])
        )
        rate: np.ndarray | float = (
            spread(codes, np.array([np.nan if a is None else a.bandwidth_gb_s for a in many] + [np.nan])) * factor
        )
    elif r is None:
        factor, rate = 1.0, np.nan
    elif r.linear:
        factor = _all_over_last(r)
        rate = r.bandwidth_gb_s * factor
    else:  # (the kernel's bytes are the group's already)
        factor, rate = 1.0, nonlinear_bandwidth(found, tokens, charged, after_fixed=True, counts=counts)
    total = np.multiply(nbytes, factor)
    return total, np.where(total > 0, np.broadcast_to(rate, total.shape), np.nan)
