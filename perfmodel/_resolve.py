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

from ._coerce import map_distinct
from .links import Link, get_link
from .errors import InputError, check_choice, check_whole
from .models import _dtype_bytes, kv_bytes_per_token, layer_count


def _is_number_text(label: Any) -> bool:
    try:
        float(label)
    except (TypeError, ValueError):
        return False
    return True


def holds_labels(value: Any) -> bool:
    """Whether ``value`` (array-like) holds names or objects rather than numbers."""
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


def bytes_per_token(value: Any, *, kv_cache_dtype: str | None = None, tp: int = 1, scope: str = "rank",
                    errors: str = "raise") -> Any:
    """``kv_bytes_per_token`` as numbers: a model name, config or path (or an array of them)
    becomes its KV bytes per token (one GPU's, or with ``scope="group"`` the whole TP
    group's); numbers pass through unchanged. With ``errors="coerce"`` an unknown name in
    a column becomes missing."""
    tp = check_whole("tp", tp, smallest=1)  # knobs are checked first: errors="coerce" is for the rows only
    check_choice("scope", scope, ("rank", "group"))
    _dtype_bytes({}, kv_cache_dtype)
    if isinstance(value, (Mapping, str, os.PathLike)):
        return kv_bytes_per_token(value, kv_cache_dtype=kv_cache_dtype, tp=tp, scope=scope)
    if np.ndim(value) == 0 or not holds_labels(value):
        if kv_cache_dtype is not None or tp != 1 or scope != "rank":
            raise InputError("kv_bytes_per_token", "kv_cache_dtype, tp and scope apply to model names or configs, "
                             "but kv_bytes_per_token is already a number of bytes",
                             "pass a model (e.g. 'llama-3.1-70b') or drop them")
        return value
    resolve = _per_label(lambda m: kv_bytes_per_token(m, kv_cache_dtype=kv_cache_dtype, tp=tp, scope=scope), errors)
    return map_distinct(_array(value), resolve, np.float64, np.nan)


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


def link_terms(value: Any, *, errors: str = "raise") -> LinkTerms:
    """``kv_transfer_bandwidth`` as numbers: a :class:`Link` or link name (or an array of them)
    becomes its effective bandwidth (GB/s), latency (ms) and per-block cost (ms); numbers pass
    through (no latency, no per-block cost). With ``errors="coerce"`` an unknown name in a
    column becomes missing."""
    if isinstance(value, (Link, str)):
        link = get_link(value)
        return LinkTerms(link.effective_bandwidth_gb_s, link.latency_ms, link.per_block_ms)
    if np.ndim(value) == 0 or not holds_labels(value):
        return LinkTerms(value, None, None)
    data = _array(value)
    terms = []
    for attribute, missing in (("effective_bandwidth_gb_s", np.nan), ("latency_ms", 0.0), ("per_block_ms", 0.0)):
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

    if isinstance(value, Link):
        return value.name
    if isinstance(value, Mapping):
        return str(value.get("_name_or_path") or value.get("model_type") or "config")
    if isinstance(value, enum.Enum):
        return value.name.lower()
    return value


def _array(value: Any) -> Any:
    if isinstance(value, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray, np.ndarray)):
        return value
    return np.asarray(value, dtype=object)
