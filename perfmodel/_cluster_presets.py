"""Cluster presets: named :class:`perfmodel.Cluster` descriptions of published machines (sources in
docs/clusters.rst), and the user's saved clusters."""

from __future__ import annotations

import difflib

from .clusters import Cluster
from .errors import InputError

__all__ = ["CLUSTERS", "cluster_names", "get_cluster"]

#: Built-in clusters by name.
CLUSTERS: dict[str, Cluster] = {}


def cluster_names() -> set[str]:
    """The names of the built-in clusters."""
    return set(CLUSTERS)


def get_cluster(name: str) -> Cluster:
    """A cluster preset by name."""
    key = name.strip().lower() if isinstance(name, str) else ""
    if key in CLUSTERS:
        return CLUSTERS[key]
    close = difflib.get_close_matches(key, list(CLUSTERS), n=3, cutoff=0.4)
    raise InputError("cluster", f"unknown cluster {name!r}",
                     (f"did you mean {', '.join(close)}? " if close else "") + f"use one of {', '.join(CLUSTERS)}")
