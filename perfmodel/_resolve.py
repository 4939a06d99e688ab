"""Names to numbers at the edge: model names/configs to bytes per token, links to bandwidth.

Used by every entry point above the numpy layer (pandas facade, sweeps, trace replay,
command line), so ``kv_bytes_per_token="llama-3.1-70b"`` and
``kv_transfer_bandwidth="8x ib-ndr"`` mean the same everywhere. A column of names is
resolved once per distinct name, never per row.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._coerce import map_distinct
from .links import Link, get_link
from .errors import check_whole
from .models import _dtype_bytes, kv_bytes_per_token


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


def bytes_per_token(value: Any, *, kv_cache_dtype: str | None = None, tp: int = 1, errors: str = "raise") -> Any:
    """``kv_bytes_per_token`` as numbers: a model name, config or path (or an array of them)
    becomes its KV bytes per token; numbers pass through unchanged. With ``errors="coerce"``
    an unknown name in a column becomes missing."""
    tp = check_whole("tp", tp, smallest=1)  # knobs are checked first: errors="coerce" is for the rows only
    _dtype_bytes({}, kv_cache_dtype)
    if isinstance(value, (Mapping, str, os.PathLike)):
        return kv_bytes_per_token(value, kv_cache_dtype=kv_cache_dtype, tp=tp)
    if np.ndim(value) == 0 or not holds_labels(value):
        if kv_cache_dtype is not None or tp != 1:
            raise ValueError("kv_cache_dtype and tp apply to model names or configs, but kv_bytes_per_token is "
                             "already a number of bytes. Fix: pass a model (e.g. 'llama-3.1-70b') or drop them")
        return value
    resolve = _per_label(lambda m: kv_bytes_per_token(m, kv_cache_dtype=kv_cache_dtype, tp=tp), errors)
    return map_distinct(_array(value), resolve, np.float64, np.nan)


def bandwidth_and_latency(value: Any, *, errors: str = "raise") -> tuple[Any, Any]:
    """``kv_transfer_bandwidth`` as numbers: a :class:`Link` or link name (or an array of them)
    becomes ``(effective bandwidth GB/s, latency ms)``; numbers pass through with latency None.
    With ``errors="coerce"`` an unknown name in a column becomes missing."""
    if isinstance(value, (Link, str)):
        link = get_link(value)
        return link.effective_bandwidth_gb_s, link.latency_ms
    if np.ndim(value) == 0 or not holds_labels(value):
        return value, None
    data = _array(value)
    bandwidth = map_distinct(data, _per_label(lambda v: get_link(v).effective_bandwidth_gb_s, errors), np.float64,
                             np.nan)
    latency = map_distinct(data, _per_label(lambda v: get_link(v).latency_ms, errors), np.float64, 0.0)
    latency[np.isnan(latency)] = 0.0  # an unknown link is already missing through its bandwidth
    return bandwidth, latency


def add_latency(latency_ms: Any, link_latency_ms: Any) -> Any:
    """The caller's latency plus the link's (skipped when the link adds none)."""
    if link_latency_ms is None or (np.ndim(link_latency_ms) == 0 and link_latency_ms == 0):
        return latency_ms
    if np.ndim(link_latency_ms) and not np.any(link_latency_ms):
        return latency_ms
    if isinstance(latency_ms, pd.Series):
        latency_ms = latency_ms.to_numpy(dtype=np.float64, na_value=np.nan)
    return np.add(latency_ms, link_latency_ms)


def _array(value: Any) -> Any:
    if isinstance(value, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray, np.ndarray)):
        return value
    return np.asarray(value, dtype=object)
