"""Names to numbers at the edge: model names/configs to bytes per token, links to bandwidth.

Used by every entry point above the numpy layer (pandas facade, sweeps, trace replay,
command line), so ``kv_bytes_per_token="llama-3.1-70b"`` and
``kv_transfer_bandwidth="8x ib-ndr"`` mean the same everywhere. A column of names is
resolved once per distinct name, never per row.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ._coerce import Coded, distinct, map_distinct, spread
from .links import Link, get_link
from .errors import InputError, check_choice
from .models import KVTerms, ModelShape, kv_terms, layer_count


def _is_number_text(label: Any) -> bool:
    try:
        float(label)
    except (TypeError, ValueError):
        return False
    return True


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
    uniques = pd.unique(pd.Series(np.asarray(value, dtype=object) if isinstance(value, list) else value))
    return any(isinstance(u, (Link, Mapping)) or (isinstance(u, str) and not _is_number_text(u)) for u in uniques)


def _per_label(resolve: Callable[[Any], Any], errors: str) -> Callable[[Any], Any]:
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
    state terms are None where they add nothing (see :class:`perfmodel.models.KVTerms`)."""

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


_CAPPED = ("window_bytes_per_token", "window_tokens", "chunk_bytes_per_token", "chunk_tokens")


def model_terms(value: Any, *, kv_cache_dtype: str | None = None, tp: int = 1, scope: str = "rank",
                decode_tp: int | None = None, errors: str = "raise") -> ModelTerms:
    """``kv_bytes_per_token`` as the kernel's byte terms: a model name, config or path (or an array
    of them) becomes its :class:`~perfmodel.models.KVTerms` (one GPU's, or with ``scope="group"``
    the whole TP group's); numbers pass through as bytes per token. With ``errors="coerce"`` an
    unknown name in a column becomes missing."""
    shape = ModelShape(kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp, scope=scope)  # (validated first:
    tp, decode_tp = shape.tp, shape.decode_tp  # errors="coerce" is for the rows only)

    def terms_of(model: Any) -> KVTerms:
        return kv_terms(model, kv_cache_dtype=kv_cache_dtype, tp=tp, scope=scope, decode_tp=decode_tp)

    if isinstance(value, (Mapping, str, os.PathLike)):  # one model: its terms as scalars
        one = terms_of(value)
        capped = bool(one.window_bytes_per_token or one.chunk_bytes_per_token)
        return ModelTerms(np.float64(one.full_bytes_per_token),
                          *(np.float64(getattr(one, name)) if capped else None for name in _CAPPED),
                          np.float64(one.state_bytes) if one.state_bytes else None)
    shaped = shape.shapes_bytes
    if np.ndim(value) == 0 or not holds_labels(value):
        _numbers_unshaped(shaped)
        return ModelTerms(value)
    codes, uniques = distinct(_array(value))
    numbers = {i: label for i, label in enumerate(uniques) if _is_number(label)}  # bytes per token among models
    if numbers:
        _numbers_unshaped(shaped)
    found = [KVTerms(float(numbers[i])) if i in numbers else _per_label(terms_of, errors)(label)
             for i, label in enumerate(uniques)]
    return _terms_of_lookups([[np.nan if isinstance(t, float) else getattr(t, name) for t in found] + [np.nan]
                              for name in _FIELDS], codes)


def _is_number(label: Any) -> bool:
    return isinstance(label, (int, float, np.number)) and not isinstance(label, (bool, np.bool_))


def _numbers_unshaped(shaped: bool) -> None:
    if shaped:
        raise InputError("kv_bytes_per_token", "kv_cache_dtype, tp, decode_tp and scope apply to model names or "
                         "configs, but kv_bytes_per_token holds numbers of bytes",
                         "pass models (e.g. 'llama-3.1-70b') or drop them")


#: The fields of KVTerms the kernel reads, in ModelTerms' order.
_FIELDS = ("full_bytes_per_token", *_CAPPED, "state_bytes")


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
    return ModelTerms(shaped(tables[0]), *(shaped(t) if capped else None for t in tables[1:5]),
                      shaped(tables[5]) if used(5) else None)


class MessageTerms(NamedTuple):
    """Messages per block of a model's full-attention, window and chunked layers, and its states'
    messages per transfer (see :meth:`perfmodel.models.KVTerms.message_factors`): numbers or arrays."""

    full_messages: Any
    window_messages: Any
    chunk_messages: Any
    state_messages: Any


def message_terms(value: Any, kv_layout: str, layers: Any, *, errors: str = "raise") -> MessageTerms:
    """The message terms of ``kv_bytes_per_token`` in ``kv_layout``: a model's (name, config, path
    or a column of them) from its layer mix; for numbers, ``layers`` full-attention layers with
    keys and values (a scalar or an array; required for the layer layouts)."""
    check_choice("kv_layout", kv_layout, ("layer_kv", "layer", "block"))
    if kv_layout == "block":
        return MessageTerms(1.0, 0.0, 0.0, 0.0)
    if isinstance(value, (Mapping, str, os.PathLike)):
        return MessageTerms(*map(np.float64, kv_terms(value).message_factors(kv_layout)))
    if np.ndim(value) == 0 or not holds_labels(value):
        if layers is None:
            raise InputError("per_message_ms", f"kv_layout={kv_layout!r} posts messages per layer, and "
                             "kv_bytes_per_token is a number of bytes with no layers",
                             "pass num_layers (--num-layers), a model name or config, or kv_layout='block'")
        per_layer = 2.0 if kv_layout == "layer_kv" else 1.0
        return MessageTerms(np.multiply(layers, per_layer, dtype=np.float64), 0.0, 0.0, 0.0)
    codes, uniques = distinct(_array(value))
    found = [_per_label(lambda m: kv_terms(m).message_factors(kv_layout), errors)(label) for label in uniques]
    tables = [np.array([np.nan if isinstance(f, float) else f[i] for f in found] + [np.nan]) for i in range(4)]
    return MessageTerms(*(spread(codes, table) for table in tables))


def num_layers(value: Any, *, errors: str = "raise") -> Any:
    """The layer count of a model name, config or path (or of each in an array of them)."""
    if isinstance(value, (Mapping, str, os.PathLike)):
        return layer_count(value)
    return map_distinct(_array(value), _per_label(layer_count, errors), np.float64, np.nan)


class LinkTerms(NamedTuple):
    """A link's terms as numbers (scalars, or arrays for a column of links); None where it adds nothing."""

    bandwidth_gb_s: Any
    latency_ms: Any
    per_block_ms: Any
    per_message_ms: Any


def link_terms(value: Any, *, errors: str = "raise") -> LinkTerms:
    """``kv_transfer_bandwidth`` as numbers: a :class:`Link` or link name (or an array of them)
    becomes its effective bandwidth (GB/s), latency (ms), per-block and per-message costs (ms);
    numbers pass through (no latency, no per-block or per-message cost). With ``errors="coerce"`` an unknown name in a
    column becomes missing."""
    if isinstance(value, (Link, str)):
        link = get_link(value)
        return LinkTerms(link.effective_bandwidth_gb_s, link.latency_ms, link.per_block_ms, link.per_message_ms)
    if np.ndim(value) == 0 or not holds_labels(value):
        return LinkTerms(value, None, None, None)
    data = _array(value)
    terms = []
    for attribute, missing in (("effective_bandwidth_gb_s", np.nan), ("latency_ms", 0.0), ("per_block_ms", 0.0),
                               ("per_message_ms", 0.0)):
        column = map_distinct(data, _per_label(lambda v, a=attribute: getattr(get_link(v), a), errors), np.float64,
                              missing)
        if attribute != "effective_bandwidth_gb_s":
            column[np.isnan(column)] = 0.0  # an unknown link is already missing through its bandwidth
        terms.append(column)
    return LinkTerms(*terms)


def add(value: Any, extra: Any) -> Any:
    """``value`` plus a link's term (skipped when the link adds nothing, so no array is made)."""
    if extra is None or (np.ndim(extra) == 0 and extra == 0):
        return value
    if np.ndim(extra) and not np.any(extra):
        return value
    if isinstance(value, pd.Series):
        value = value.to_numpy(dtype=np.float64, na_value=np.nan)
    return np.add(value, extra)


def label_of(value: Any) -> Any:
    """How a value is named in a table: a Link by its name, a config by its model name, an enum by
    its lower-case name; anything else as it is.

    >>> from perfmodel import LINKS
    >>> label_of(LINKS["ib-ndr"]), label_of({"model_type": "llama"}), label_of(8)
    ('ib-ndr', 'llama', 8)
    """
    import enum

    if isinstance(value, Link) or type(value).__name__ in ("Cluster", "Transport"):
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
    """A grid axis' values (sweeps, replay grids): one value, or a list of them; an empty axis is refused."""
    values = [value] if is_one(value) else list(value)
    if not values:
        raise InputError(where, f"axis {name} is empty", "give it at least one value")
    return values


def axis_labels(where: str, name: str, values: list[Any]) -> list[str]:
    """How a grid axis' values are named in its table (see :func:`label_of`); a value given twice is refused."""
    labels = [str(label_of(value)) for value in values]
    if len(set(labels)) != len(labels):
        raise InputError(where, f"axis {name} has repeated values {labels}", "give each value once")
    return labels


def _array(value: Any) -> Any:
    if isinstance(value, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray, np.ndarray, Coded)):
        return value
    return np.asarray(value, dtype=object)
