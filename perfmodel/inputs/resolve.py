"""Names to numbers at the edge: model names/configs to bytes per token, links to bandwidth.

Used by every entry point above the numpy layer (pandas facade, sweeps, trace replay,
command line), so ``kv_bytes_per_token="llama-3.1-70b"`` and
``kv_transfer_bandwidth="8x ib-ndr"`` mean the same everywhere. A column of names is
resolved once per distinct name, never per row.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

import numpy as np
import pandas as pd

from ..errors import InputError
from ..model.models import KVTerms, ModelShape, kv_terms, layer_count
from ..network.links import Link, get_link, transports
from .coerce import Coded, distinct, no_booleans, spread, text_number, why_invalid
from .table import Valid, check_option
from .words import count


def _is_number_text(label: Any) -> bool:
    """Whether ``label`` is text holding a number or a missing marker (``"1000"``, ``"NA"``, ``""``)."""
    return text_number(label) is not None


def _as_number(label: Any, argument: str | None = None) -> float:
    """A number, or text holding one (NaN for a missing marker), as a float; with ``argument``, one outside its
    range is refused as given (``-5``, not the ``-5.0`` of the column of floats it becomes), as the kernel would."""
    from .table import INPUTS, outside

    number = text_number(label)
    number = float(label) if number is None else number
    if argument is None or INPUTS[argument].valid is None:
        return number
    with np.errstate(invalid="ignore"):
        if outside(np.float64(number), tuple(INPUTS[argument].valid)):  # type: ignore[arg-type]
            raise InputError(argument, why_invalid(argument, label), INPUTS[argument].rule)
    return number


def resolved_labels(argument: str, codes: np.ndarray, labels: Any, resolve: Callable[[Any], Any], errors: str) -> list:
    """Each distinct label of a column resolved once by ``resolve``. A label it refuses is NaN with
    ``errors="coerce"``; else one :class:`InputError` naming ``argument``, how many rows hold refused labels, the
    first of them (its position, which the pandas facade names by its label) and its label, in the refusal's words.
    """
    found, refused = [], {}
    for i, label in enumerate(labels):
        try:
            found.append(resolve(label))
        except (ValueError, TypeError) as error:
            found.append(np.nan)
            refused[i] = error
    bad = np.isin(codes, list(refused)) if refused and errors != "coerce" else None
    if bad is not None and bad.any():  # (an unused category refused is on no row)
        first = int(np.argmax(bad))
        refusal = refused[int(codes[first])]
        if isinstance(refusal, InputError):
            problem, fix = refusal.problem, refusal.fix
            problem = problem if refusal.where in ("link", "model", argument) else f"{refusal.where}: {problem}"
        else:
            problem, _, fix = str(refusal).partition(". Fix: ")
        raise InputError(
            argument,
            problem,
            fix.rstrip(".") or f"correct the {argument} of those rows",
            n_invalid=int(bad.sum()),
            row=first,
            value=labels[int(codes[first])],
            position=first,
        )
    return found


def holds_labels(value: Any) -> bool:
    """Whether ``value`` (array-like) holds names or objects rather than numbers."""
    if isinstance(value, Coded):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        value = np.asarray(value, dtype=object) if isinstance(value, (list, tuple)) else np.asarray(value)
        dtype = value.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return True
    if dtype.kind not in "OUST" and not isinstance(dtype, pd.StringDtype):
        return False
    try:
        uniques = pd.unique(pd.Series(np.asarray(value, dtype=object) if isinstance(value, list) else value))
    except TypeError:  # unhashable labels: config dicts
        uniques = distinct(_array(value))[1]
    return any(isinstance(u, (Link, Mapping)) or (isinstance(u, str) and not _is_number_text(u)) for u in uniques)


def per_label(resolve: Callable[[Any], Any], errors: str) -> Callable[[Any], Any]:
    """``resolve`` for one label of a column; with ``errors="coerce"`` an unknown one is missing (NaN)."""
    if errors != "coerce":
        return resolve

    def lenient(label: Any) -> Any:
        try:
            return resolve(label)
        except (ValueError, TypeError):
            return np.nan

    return lenient


class ModelTerms(NamedTuple):
    """A model's byte terms as numbers (scalars, or arrays for a column of models); the capped and
    state terms are None where they add nothing (see :class:`perfmodel.model.models.KVTerms`)."""

    bytes_per_token: Any
    window_bytes_per_token: Any = None
    window_tokens: Any = None
    chunk_bytes_per_token: Any = None
    chunk_tokens: Any = None
    state_bytes: Any = None

    @property
    def proportional(self) -> bool:
        """Whether the bytes are bytes per token times tokens (no capped or state term)."""
        return self.window_bytes_per_token is None and self.state_bytes is None


#: The capped terms' names in the kernel's record (:data:`perfmodel.kernels.handoff.FIELDS`) and in ModelTerms.
CAPPED = ("window_bytes_per_token", "window_tokens", "chunk_bytes_per_token", "chunk_tokens")


def model_terms(
    value: Any,
    *,
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    scope: str = "rank",
    decode_tp: int | None = None,
    errors: str = "raise",
) -> ModelTerms:
    """``kv_bytes_per_token`` as the kernel's byte terms: a model name, config or path (or an array
    of them) becomes its :class:`~perfmodel.model.models.KVTerms` (one GPU's, or with ``scope="group"``
    the whole TP group's); numbers pass through as bytes per token. With ``errors="coerce"`` an
    unknown name in a column becomes missing."""
    shape = ModelShape(kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp, scope=scope)  # (validated first:
    tp, decode_tp = shape.tp, shape.decode_tp  # errors="coerce" is for the rows only)

    def terms_of(model: Any) -> KVTerms:
        return kv_terms(model, kv_cache_dtype=kv_cache_dtype, tp=tp, scope=scope, decode_tp=decode_tp)

    if isinstance(value, (Mapping, str, os.PathLike)):  # one model: its terms as scalars
        one = terms_of(value).byte_terms
        capped = bool(one.window or one.chunk)

        def kept(term: Any) -> Any:
            return np.float64(term) if capped else None

        return ModelTerms(
            np.float64(one.full),
            kept(one.window),
            kept(one.window_tokens),
            kept(one.chunk),
            kept(one.chunk_tokens),
            np.float64(one.state) if one.state else None,
        )
    shaped = shape.shapes_bytes
    if np.ndim(value) == 0 or not holds_labels(value):
        _numbers_unshaped(shaped)
        return ModelTerms(value)
    codes, uniques = distinct(_array(value))
    if any(is_number(label) for label in uniques):  # bytes per token among models
        _numbers_unshaped(shaped)

    def terms_of_label(label: Any) -> KVTerms:
        return KVTerms(cast(int, _as_number(label, "kv_bytes_per_token"))) if is_number(label) else terms_of(label)

    found = resolved_labels("kv_bytes_per_token", codes, uniques, terms_of_label, errors)
    return _terms_of_lookups(
        [[np.nan if isinstance(t, float) else getattr(t, name) for t in found] + [np.nan] for name in _FIELDS], codes
    )


def is_number(label: Any) -> bool:
    """Whether a label of a bytes-per-token column is a number of bytes, not a model: a number, or its text (a
    CSV's or Arrow's column mixing models and numbers holds text, "1000" the same as 1000)."""
    if isinstance(label, str):
        return _is_number_text(label)
    return isinstance(label, (int, float, np.number)) and not isinstance(label, (bool, np.bool_))


def _numbers_unshaped(shaped: bool) -> None:
    if shaped:
        raise InputError(
            "kv_bytes_per_token",
            "kv_cache_dtype, tp, decode_tp and scope apply to model names or "
            "configs, but kv_bytes_per_token holds numbers of bytes",
            "pass models (e.g. 'llama-3.1-70b') or drop them",
        )


#: The fields of KVTerms the kernel reads, in ModelTerms' order.
_FIELDS = ("full_bytes_per_token", *CAPPED, "state_bytes")


def _terms_of_lookups(lookups: list[list[Any]], codes: np.ndarray) -> ModelTerms:
    """ModelTerms of a column from one lookup table per field (the column's distinct models plus a
    last NaN entry for missing ones), spread over the rows. A term that is 0 for every model is
    None, so that the kernel compiles it away."""
    tables = [np.array(lookup, dtype=np.float64) for lookup in lookups]

    def used(*indexes: int) -> bool:
        return any(np.nansum(tables[i]) > 0 for i in indexes)

    def shaped(table: np.ndarray) -> Any:
        return spread(codes, table)

    capped = used(1, 3)
    return ModelTerms._make(
        (
            shaped(tables[0]),
            *(shaped(t) if capped else None for t in tables[1:5]),
            shaped(tables[5]) if used(5) else None,
        )
    )


class MessageTerms(NamedTuple):
    """Messages per block of a model's full-attention, window and chunked layers, and its states'
    messages per transfer (see :meth:`perfmodel.model.models.KVTerms.message_factors`): numbers or arrays."""

    full_messages: Any
    window_messages: Any
    chunk_messages: Any
    state_messages: Any


def message_terms(value: Any, kv_layout: str, layers: Any, *, errors: str = "raise", costs: Any = None) -> MessageTerms:
    """The message terms of ``kv_bytes_per_token`` in ``kv_layout``: a model's (name, config, path
    or a column of them) from its layer mix; for numbers, ``layers`` full-attention layers with
    keys and values (a scalar or an array; required for the layer layouts), of which none may be 0 where a
    message costs something (``costs``: the cost per message, a value or one per row; None: on every row)."""
    check_option("kv_layout", kv_layout)
    if isinstance(value, (Mapping, str, os.PathLike)):
        return MessageTerms(*map(np.float64, kv_terms(value).message_factors(kv_layout)))
    if np.ndim(value) == 0 or not holds_labels(value):
        if kv_layout == "block":  # numbers: full-attention layers, one message per block of the request
            return MessageTerms(1.0, 0.0, 0.0, 0.0)
        if layers is None:
            raise InputError(
                "per_message_ms",
                f"kv_layout={kv_layout!r} posts messages per layer, and "
                "kv_bytes_per_token is a number of bytes with no layers",
                "pass num_layers (--num-layers), a model name or config, or kv_layout='block'",
            )
        per_layer = 2.0 if kv_layout == "layer_kv" else 1.0
        layers = _posting_layers(checked_layers(layers, errors), kv_layout, errors, costs)
        return MessageTerms(np.multiply(layers, per_layer, dtype=np.float64), 0.0, 0.0, 0.0)
    codes, uniques = distinct(_array(value))
    found = resolved_labels(
        "kv_bytes_per_token", codes, uniques, lambda m: kv_terms(m).message_factors(kv_layout), errors
    )
    tables = [np.array([np.nan if isinstance(f, float) else f[i] for f in found] + [np.nan]) for i in range(4)]
    return MessageTerms(*(spread(codes, table) for table in tables))


def _posting_layers(layers: Any, kv_layout: str, errors: str, costs: Any) -> Any:
    """Checked layer counts (a number or an array) that post messages per layer: 0 layers would post none, and
    a cost per message (``costs``, None: on every row) would charge nothing, so a 0 where a message costs
    something is refused (with ``errors="coerce"``, NaN for its rows)."""
    zero = np.asarray(layers) == 0
    if costs is not None and zero.any():
        try:
            charged = np.asarray(costs, dtype=np.float64) != 0  # (NaN too: its row is refused where it is read)
        except (TypeError, ValueError, OverflowError):
            charged = np.True_  # (a cost that is not a number is refused, and named, where it is coerced)
        if not zero.ndim:  # (one layer count for every row: refused where any row charges)
            zero = np.bool_(charged.any())
        elif charged.ndim == 0 or charged.shape == zero.shape:  # (rows of another length are refused elsewhere)
            zero = zero & charged
    if not zero.any():
        return layers
    if errors == "coerce":
        return np.where(zero, np.nan, layers) if zero.ndim else np.float64(np.nan)
    where = f" at row {int(np.argmax(zero.reshape(-1)))}" if zero.ndim else ""
    raise InputError(
        "num_layers",
        f"0 layers{where} post no messages in kv_layout={kv_layout!r}, so a cost per message would charge nothing",
        "pass the model's layer count (>= 1), or kv_layout='block' (messages per block)",
    )


def checked_layers(layers: Any, errors: str = "raise") -> Any:
    """A layer count (a number or an array) checked by the table's rule, as every entry point checks it:
    the :class:`InputError` naming the first bad row, or with ``errors="coerce"`` NaN for those rows."""
    from .table import INPUTS, outside

    entry = INPUTS["num_layers"]
    no_booleans("num_layers", layers)
    try:
        values = np.asarray(layers, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("num_layers", f"{layers!r} is not a number of layers", f"pass {entry.rule}") from None
    with np.errstate(invalid="ignore"):
        bad = np.asarray(outside(values, tuple(cast(Valid, entry.valid))))
    if not bad.any():
        return values if values.ndim else values[()]
    if errors == "coerce":
        return np.where(bad, np.nan, values) if values.ndim else np.float64(np.nan)
    first = int(np.argmax(bad.reshape(-1)))
    where = f"first at row {first}: " if values.ndim else ""
    raise InputError(
        "num_layers",
        f"{count(int(bad.sum()), 'invalid value')}; {where}{values.reshape(-1)[first].item()!r}",
        f"{entry.rule}, or pass errors='coerce' to get NaN for those rows",
    )


def own_layers(value: Any, layers: Any, labels: Any = None) -> None:
    """Refuse an explicit ``layers`` that differs from the layer count of the named model(s) in ``value``
    (rows of numbers are left alone): a model's layer mix sets its bytes and messages, and another count
    cannot apply to them, nor to its layer-wise streaming without mixing two models in one delay. Every such
    row is counted, the first named by its position, or by its label in ``labels`` (a trace's index)."""
    if layers is None:
        return
    own = np.asarray(num_layers(value, errors="coerce"), dtype=np.float64)
    try:
        own, given = np.broadcast_arrays(own, np.asarray(layers, dtype=np.float64))
    except ValueError:
        return  # (lengths are refused where the rows are broadcast)
    differs = ~np.isnan(own) & (given != own)
    fix = "drop num_layers (a named model's layers come from its config), or pass bytes per token as a number with num_layers"
    if differs.ndim == 0 and differs:
        raise InputError("num_layers", f"{given:g} layers, but the model given has {own:g}", fix)
    if differs.any():
        first, n = int(np.argmax(differs)), int(np.count_nonzero(differs))
        raise InputError(
            "num_layers",
            f"the model on that row has {own[first]:g} layers",
            fix,
            n_invalid=n,
            row=first if labels is None else labels[first],
            position=first,
            value=int(given[first]) if np.isfinite(given[first]) and given[first] % 1 == 0 else float(given[first]),
            counts={"num_layers": n},
            coerce_hint="",
        )


def num_layers(value: Any, *, errors: str = "raise") -> Any:
    """The layer count of a model name, config or path (or of each in an array of them)."""
    if isinstance(value, (Mapping, str, os.PathLike)):
        return layer_count(value)
    codes, uniques = distinct(_array(value))
    found = resolved_labels("kv_bytes_per_token", codes, uniques, layer_count, errors)
    return spread(codes, np.array([*found, np.nan], dtype=np.float64))


class LinkTerms(NamedTuple):
    """A link's terms as numbers (scalars, or arrays for a column of links); None where it adds nothing."""

    bandwidth_gb_s: Any
    latency_ms: Any
    per_block_ms: Any
    per_message_ms: Any


#: What goes beside a link, not for it: each one's keyword (a cluster's data path, an engine's connector).
NOT_LINKS = {"Transport": "a cluster's transport (Cluster(nic=..., transport=...))", "Connector": "connector="}


def link_terms(value: Any, *, errors: str = "raise") -> LinkTerms:
    """``kv_transfer_bandwidth`` as numbers: a :class:`Link` or link name (or an array of them)
    becomes its effective bandwidth (GB/s), latency (ms), per-block and per-message costs (ms);
    numbers pass through (no latency, no per-block or per-message cost). With ``errors="coerce"`` an unknown name in a
    column becomes missing. A Transport or a Connector is refused, naming where it goes."""
    kind = type(value).__name__
    if kind in NOT_LINKS:
        raise InputError(
            "kv_transfer_bandwidth",
            f"a {kind} ({value.name!r}) goes beside a link, not a link",
            f"pass it as {NOT_LINKS[kind]}, and a Link or a link name (e.g. 'ib-ndr') as the link",
        )
    if isinstance(value, (Link, str)):
        link = get_link(value)
        return LinkTerms(link.effective_bandwidth_gb_s, link.latency_ms, link.per_block_ms, link.per_message_ms)
    if np.ndim(value) == 0 or not holds_labels(value):
        return LinkTerms(value, None, None, None)
    codes, uniques = distinct(_array(value))
    found = resolved_labels("kv_transfer_bandwidth", codes, uniques, _link_row, errors)
    tables = np.array(
        [(np.nan, 0.0, 0.0, 0.0) if np.ndim(f) == 0 else f for f in found] + [(np.nan, 0.0, 0.0, 0.0)], dtype=np.float64
    )  # (an unknown or missing link is missing through its bandwidth, costs 0)
    return LinkTerms(*(spread(codes, tables[:, k]) for k in range(4)))


def _link_row(value: Any) -> tuple[float, float, float, float]:
    """The terms of one entry of a column of links, where a number (or its text) is a bandwidth in GB/s with no
    other cost, as a number alone is: a column may mix both, as a bytes column mixes numbers and models."""
    if (
        isinstance(value, (int, float, np.integer, np.floating, str))
        and not isinstance(value, (bool, np.bool_))
        and (not isinstance(value, str) or _is_number_text(value))
    ):
        return _as_number(value, "kv_transfer_bandwidth"), 0.0, 0.0, 0.0
    link = get_link(value)
    return link.effective_bandwidth_gb_s, link.latency_ms, link.per_block_ms, link.per_message_ms


#: A link's fixed costs, each added to the caller's own (at every entry point).
LINK_COSTS = ("latency_ms", "per_block_ms", "per_message_ms")


def with_link_costs(given: dict[str, Any], link: LinkTerms, errors: str = "raise") -> dict[str, Any]:
    """The caller's fixed costs (``given``: absent or None, the input's default) plus the link's own: the one
    rule of every entry point that takes a link.

    >>> with_link_costs({"latency_ms": 0.5}, LinkTerms(50.0, 1.0, None, 0.001))
    {'latency_ms': np.float64(1.5), 'per_block_ms': 0.0, 'per_message_ms': np.float64(0.001)}
    """
    from .table import INPUTS

    return {
        name: add(INPUTS[name].default if given.get(name) is None else given[name], getattr(link, name), name, errors)
        for name in LINK_COSTS
    }


#: A connector's costs, each added to the caller's input it stands beside: (input, the connector's field).
CONNECTOR_COSTS = (("latency_ms", "request_ms"), ("per_message_ms", "per_descriptor_ms"))


def with_connector(given: Mapping[str, Any], connector: Any, errors: str = "raise") -> dict[str, Any]:
    """The caller's ``latency_ms`` and ``per_message_ms`` (``given``: absent or None, the input's default) plus a
    connector's cost per request and per descriptor: the one rule of every entry point that takes ``connector=``
    (``{}`` when it adds nothing), each sum as :func:`add` makes it (an invalid value of the caller's stays as
    given).

    >>> with_connector({"latency_ms": 0.5}, "vllm-nixl-0.10.1")
    {'latency_ms': np.float64(3.5)}
    """
    from ..network.connector import get_connector
    from .table import INPUTS

    found = get_connector(connector)
    if found is None or found.off:
        return {}
    if found.per_descriptor_ms and given.get("block_size") is None:
        raise InputError(
            "connector",
            f"{found.name!r} costs {found.per_descriptor_ms * 1e3:g} us per descriptor, and descriptors need a block "
            "size",
            "give block_size (the engine's KV block size in tokens)",
        )
    return {
        name: add(INPUTS[name].default if given.get(name) is None else given[name], getattr(found, term), name, errors)
        for name, term in CONNECTOR_COSTS
        if getattr(found, term)
    }


def add(value: Any, extra: Any, name: str | None = None, errors: str = "raise") -> Any:
    """``value`` plus a cost added to it (a link's, a cluster's, a connector's), skipped when the cost adds nothing
    (so no array is made). With ``name``, ``value`` is the caller's input of that name, read as the numpy API reads
    it, and a sum never hides an invalid value (-1 ms plus a link's 2 ms is not a valid 1 ms): one invalid entry,
    and ``value`` is returned as given, for the entry point to refuse as given; with ``errors="coerce"``, its
    invalid entries stay invalid (their rows missing) and the others get the cost. Text alone is no number here
    (a replay takes it for a trace column's name): returned as given.

    >>> add([-1.0, 0.5], 2.0, "latency_ms", errors="coerce").tolist()
    [-1.0, 2.5]
    """
    from .args import coerce
    from .table import INPUTS, outside

    if extra is None or (np.ndim(extra) == 0 and extra == 0):
        return value
    if np.ndim(extra) and not np.any(extra):
        return value
    if isinstance(value, pd.Series):
        value = value.to_numpy(dtype=np.float64, na_value=np.nan)
    if name is None:
        return np.add(value, extra)
    if isinstance(value, str):
        return value
    try:
        numbers = np.asarray(coerce(name, value).kernel_values(), dtype=np.float64)
    except InputError:
        return value  # (booleans, or what is no number: refused as given)
    with np.errstate(invalid="ignore"):
        bad = outside(numbers, cast(Valid, INPUTS[name].valid))
    if np.any(bad) and errors != "coerce":
        return value
    total = numbers + extra
    return np.where(bad, numbers, total) if np.ndim(total) else (numbers if bad else total)


def label_of(value: Any) -> Any:
    """How a value is named in a table: a Link by its name, a config by its model name, an enum by
    its lower-case name; anything else as it is.

    >>> from perfmodel import LINKS
    >>> label_of(LINKS["ib-ndr"]), label_of({"model_type": "llama"}), label_of(8)
    ('ib-ndr', 'llama', 8)
    """
    import enum

    if isinstance(value, Link) or type(value).__name__ in ("Cluster", "Transport", "Connector"):
        return value.name
    if isinstance(value, Mapping):
        return str(value.get("_name_or_path") or value.get("model_type") or "config")
    if isinstance(value, enum.Enum):
        return value.name.lower()
    return value


def is_one(value: Any) -> bool:
    """Whether ``value`` is one value (a number, a name, a config, a path, a Link), not a list or column of them."""
    return value is None or isinstance(value, (str, bytes, Mapping, os.PathLike, Link)) or np.ndim(value) == 0


def axis_values(where: str, name: str, value: Any) -> list[Any]:
    """A grid axis' values (sweeps, replay grids): one value, or a list of them (an Arrow array's as pandas reads
    them: a missing value as NaN or None); an empty axis is refused."""
    if type(value).__module__.startswith("pyarrow") and hasattr(value, "to_pandas"):
        value = value.to_pandas()
    values = [value] if is_one(value) else list(value)
    if not values:
        raise InputError(where, f"axis {name} is empty", "give it at least one value")
    return values


def axis_labels(where: str, name: str, values: list[Any]) -> list[str]:
    """How a grid axis' values are named in its table (see :func:`label_of`); a value given twice is refused,
    also when the two are spelt differently (case, spaces, ``1x``, ``1`` and ``1.0``: see :func:`_identity`)."""
    values = [named_code(name, value) for value in values]  # (a mode's code and its name are one value)
    labels = [str(label_of(value)) for value in values]
    seen: dict[Any, str] = {}
    for value, label in zip(values, labels):
        key = _identity(value)
        if key in seen:
            same = f"{seen[key]!r} and {label!r} are the same value" if seen[key] != label else f"{label!r} twice"
            raise InputError(
                where,
                f"axis {name} has a repeated value: {same} (its configurations would run twice)",
                "give each value once",
            )
        seen[key] = label
    if len(set(labels)) < len(labels):  # (different values, one label: the table could not tell them apart)
        label = next(label for label in labels if labels.count(label) > 1)
        raise InputError(
            where,
            f"axis {name} has different values labelled {label!r}: its table could not tell them apart",
            "give each its own name, e.g. dataclasses.replace(value, name='...'), or a config its own '_name_or_path'",
        )
    return labels


def _identity(value: Any) -> Any:
    """What a grid value stands for, so that two spellings of one value are one: a link by its preset's name
    (case and spaces aside, ``1x NAME`` as ``NAME``; a shipped transport profile as its name), other names case
    and spaces aside, numbers by value, a Link, Transport or Cluster of one's own by its figures."""
    import re

    if isinstance(value, (str, Link)):
        try:
            link = get_link(value) if isinstance(value, str) else value
            named = get_link(link.name) if isinstance(value, Link) else link
        except (InputError, ValueError, TypeError, OSError):
            if isinstance(value, Link):
                return ("object", repr(value))
            return ("name", " ".join(str(value).split()).lower())
        if named != link:  # (a Link of its own under a preset's name: not that preset)
            return ("object", repr(value))
        return ("preset", re.sub(r"^1\s*x\s*", "", " ".join(link.name.split()).lower()))
    if type(value).__name__ == "Transport" and transports().get(value.name.strip().lower()) == value:
        return ("preset", value.name.strip().lower())  # (a shipped profile: as its name)
    if type(value).__name__ in ("Cluster", "Transport"):
        return ("object", repr(value))
    if isinstance(value, (bool, np.bool_)) or value is None:
        return ("flag", value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return ("number", "nan") if np.isnan(value) else ("number", float(value))  # (NaN: one value too)
    if isinstance(value, Mapping):  # (a config by its content: two configs of one name are two values)
        return ("config", repr(sorted((str(k), repr(v)) for k, v in value.items())))
    return ("label", str(label_of(value)))


def named_code(name: str, value: Any) -> Any:
    """A code input's value by its name (``mode``: ``1``, ``"1"`` and ``TransferMode(1)`` are
    ``"destination_missing"``); any other value as it is.

    >>> named_code("mode", 1), named_code("mode", " 0"), named_code("decode_workers", 1)
    ('destination_missing', 'full_prompt', 1)
    """
    from .table import INPUTS

    entry = INPUTS.get(name)
    if entry is None or entry.kind != "code" or not entry.labels or isinstance(value, (bool, np.bool_)):
        return value
    names = {str(code): label for label, code in entry.labels.items()}  # (a code as a number or as text, "1")
    number = isinstance(value, (int, float, np.number))
    if not number and not isinstance(value, str):
        return value
    code = f"{float(value):g}" if number else value.strip().lower()  # (an enum member: its value, on Python 3.10 too)
    return names.get(code, code if code in entry.labels else value)


def _array(value: Any) -> Any:
    if isinstance(value, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray, np.ndarray, Coded)):
        return value
    return np.asarray(value, dtype=object)
