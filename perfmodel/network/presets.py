"""Cluster presets: named :class:`perfmodel.Cluster` descriptions of published machines (each field's
source in docs/clusters.rst and in :data:`SOURCES`), and the user's saved clusters (``presets.json``,
kind ``"clusters"``, as links are).
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any, cast

from ..errors import InputError, warn
from ..inputs import user_presets as _presets
from .clusters import Cluster
from .links import LINKS, MULTIPLE, PROFILES, Link, Transport, get_transport
from .specs import SPECS
from .transport import DECLARED

__all__ = [
    "CLUSTERS",
    "SOURCES",
    "check_cluster_name",
    "cluster_names",
    "get_cluster",
    "remove_cluster",
    "save_cluster",
    "user_clusters",
]

_DGX_H100 = (
    "NVIDIA DGX H100 user guide: 8 H100 GPUs, 8 single-port ConnectX-7 400 Gb/s NICs for the compute "
    "fabric (one per GPU), NVLink 4 (900 GB/s per GPU, both directions) through NVSwitch within the node"
)

#: Built-in clusters by name (ideal transport: give one with ``dataclasses.replace(c, transport=...)``).
CLUSTERS: dict[str, Cluster] = {name: Cluster(**fields, name=name) for name, fields in SPECS.items()}

#: Each preset's sources, field by field.
SOURCES: dict[str, dict[str, str]] = {
    "hgx-h100-8x400g": {
        "node": _DGX_H100,
        "fabric": "NVIDIA DGX SuperPOD reference architecture: rail-optimized compute fabric "
        "(NIC k of every node on leaf k)",
    },
    "hgx-h200-8x400g": {
        "node": "NVIDIA HGX H200: the H100 baseboard's NVLink 4 and 8 x 400 Gb/s ConnectX-7; see " + _DGX_H100,
        "fabric": "NVIDIA DGX SuperPOD reference architecture: rail-optimized",
    },
    "gcp-a3-ultra": {
        "node": "Google Cloud a3-ultragpu-8g: 8 NVIDIA H200 GPUs, each with a dedicated ConnectX-7 "
        "400 Gb/s NIC, RDMA over RoCE (GoogleCloudPlatform/cluster-toolkit release v1.44.1)",
        "pcie": "no public figure of its PCIe switches' count and bandwidth was found: not modeled "
        "(give gpus_per_pcie_switch and pcie_switch_gb_s to model them)",
        "fabric": "not published: flat (non-blocking); its RoCE network has one subnet per NIC "
        "(GKE DRANET set-up for A3 Ultra/A4)",
    },
    "aws-p5": {
        "node": "AWS EC2 p5.48xlarge: 8 H100 GPUs, up to 32 network cards and 3,200 Gb/s of EFA bandwidth "
        "(AWS EC2 user guide 'Maximize network bandwidth ... with EFA', whose P5 example launches 32 EFA "
        "devices): 32 x 100 Gb/s",
        "nvlink": "NVIDIA H100: NVLink 4, 900 GB/s per GPU both directions",
    },
    "aws-p5en": {
        "node": "AWS EC2 p5en.48xlarge: 8 H200 GPUs, 16 x 200 Gb/s EFA (kvcache-ai/Mooncake docs, 'EFA transport')",
        "nvlink": "NVIDIA H200: NVLink 4, 900 GB/s per GPU both directions",
    },
    "gb200-nvl72": {
        "node": "NVIDIA GB200 NVL72: 18 compute trays of 4 Blackwell GPUs in one NVLink domain of 72, "
        "NVLink 5 at 1.8 TB/s per GPU both directions; a compute tray's cluster network is "
        "4 x ConnectX-7 single-port 400G OSFP, one per GPU (NVIDIA DGX GB200 user guide, "
        "'Hardware', compute tray configuration)"
    },
}


def cluster_names() -> set[str]:
    """The names of the built-in and saved clusters."""
    good, bad = _presets.load("clusters")
    return set(CLUSTERS) | set(good) | {name for name in bad if name}  # (an unusable entry: its error where used)


def get_cluster(name: str) -> Cluster:
    """A cluster by name: a built-in preset, or one saved with :func:`save_cluster`.

    Parameters
    ----------
    name
        A preset's name (:data:`CLUSTERS`) or a saved cluster's.

    Returns
    -------
    perfmodel.Cluster
        The cluster, as defined (built in or saved).

    Examples
    --------
    >>> get_cluster("gb200-nvl72").nvlink_domain
    72
    """
    key = _presets.key_of(name)
    if key in CLUSTERS:  # (built-ins first: an entry of the file under its name is never used, said once)
        _presets.warn_hidden(key, ("clusters", "links"), "cluster")
        return CLUSTERS[key]
    users, bad = user_clusters_and_errors()
    if key in bad:
        raise bad[key]
    if key in users:
        return users[key]
    close = difflib.get_close_matches(key, [*CLUSTERS, *users], n=3, cutoff=0.4)
    raise InputError(
        "cluster",
        f"unknown cluster {name!r}",
        (f"did you mean {', '.join(close)}? " if close else "")
        + f"use one of {', '.join([*CLUSTERS, *users])}, or a perfmodel.Cluster",
    )


def user_clusters() -> dict[str, Cluster]:
    """The clusters saved with :func:`save_cluster`, by name.

    A user cluster that cannot be used (or a presets file that cannot be read) is left out with a
    ``UserWarning`` naming the file, the entry and what is wrong.

    Returns
    -------
    dict of str to Cluster
        The usable user clusters, by name (empty when none is saved).

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> user_clusters()
    {}
    """
    try:
        clusters, bad = user_clusters_and_errors()
    except InputError as error:
        warn(str(error))
        return {}
    _presets.warn_unusable(bad)
    return clusters


def user_clusters_and_errors() -> tuple[dict[str, Cluster], dict[str, InputError]]:
    """The usable user clusters, and the error of each that is not (by name); a file that cannot be read as
    presets raises its error."""
    return _presets.parse_each("clusters", _from_entry)


def _link_entry(link: Link | None) -> Any:
    if link is None:
        return None
    if link.name in LINKS and LINKS[link.name] == link:
        return link.name
    return {
        "name": link.name,
        "bandwidth_gb_s": link.bandwidth_gb_s,
        "latency_ms": link.latency_ms,
        "efficiency": link.efficiency,
        "per_block_ms": link.per_block_ms,
        "per_message_ms": link.per_message_ms,
    }


def _transport_entry(transport: Transport) -> Any:
    return {f.name: getattr(transport, f.name) for f in dataclasses.fields(Transport)}


def _scoped(transport: dict[str, Any]) -> dict[str, Any]:
    """A saved transport's fields; one saved before transports said what they were measured over, under a
    shipped profile's name, has that profile's ``measured_over`` (its figures came from it: a node's benchmark
    stays a node's, never charged per flow)."""
    profile = PROFILES.get(str(transport.get("name", "")).strip().lower())
    if "measured_over" in transport or profile is None:
        return transport
    return {**transport, "measured_over": profile.measured_over, "measured_gpus": profile.measured_gpus}


def _taken(key: str) -> str:
    """What a name a user cluster cannot take already is ("" if it is free of built-ins)."""
    if key in CLUSTERS:
        return "a built-in cluster preset"
    if key in LINKS:
        return "a built-in link preset (a cluster goes where a link goes)"
    if key in PROFILES:
        return "a transport profile (a link and a transport's name)"
    if key in DECLARED or key == "ideal":
        return "a transport's name (--transport takes it)"
    if MULTIPLE.match(key):
        return "read as a multiple of a link ('8x ib-ndr': eight of them)"
    return ""


def _entry_taken(key: str) -> str:
    """What makes a cluster entry's name unusable, its built-in or transport coming first ("" if nothing)."""
    if key in CLUSTERS:
        return "is a built-in cluster's name"
    if key in LINKS or key in PROFILES:
        return "is a built-in link's name (a link and a cluster go where one another go)"
    return f"is {_taken(key)}" if _taken(key) else ""


def _from_entry(name: str, entry: dict[str, Any]) -> Cluster:
    if _entry_taken(name):
        raise _presets.entry_error(name, "clusters", f"{_entry_taken(name)}: rename it")
    known = [f.name for f in dataclasses.fields(Cluster) if f.name != "name"]
    unknown = sorted(set(entry) - {*known, "source", _presets.SAVED_BY})
    if unknown:
        raise _presets.entry_error(
            name,
            "clusters",
            f"has the unknown field(s) {', '.join(map(repr, unknown))} (a cluster's fields: {', '.join(known)})",
        )
    missing = [
        f.name
        for f in dataclasses.fields(Cluster)
        if f.name not in entry and f.name != "name" and f.default is dataclasses.MISSING
    ]
    if missing:
        raise _presets.entry_error(name, "clusters", f"misses the field(s) {', '.join(map(repr, missing))}")
    _presets.text_field(name, "clusters", entry, "source")
    _presets.text_field(name, "clusters", entry, _presets.SAVED_BY)
    fields = {k: v for k, v in entry.items() if k not in ("source", _presets.SAVED_BY)}
    for key, made in (("nic", Link), ("nvlink", Link), ("transport", Transport)):
        inner = fields.get(key)
        known_inner = [f.name for f in dataclasses.fields(made)]
        unknown_inner = sorted(set(inner) - set(known_inner)) if isinstance(inner, dict) else []
        if unknown_inner:  # (named here: the class would say only that a keyword is unexpected)
            raise _presets.entry_error(
                name,
                "clusters",
                f"{key!r} has {'an unknown field' if len(unknown_inner) == 1 else 'unknown fields'} "
                f"{', '.join(map(repr, unknown_inner))} (a {made.__name__}'s "
                f"fields: {', '.join(known_inner)})",
            )
    try:
        for key in ("nic", "nvlink"):
            if isinstance(fields.get(key), dict):
                fields[key] = Link(**fields[key])
        if isinstance(fields.get("transport"), dict):
            fields["transport"] = Transport(**_scoped(fields["transport"]))
        elif isinstance(fields.get("transport"), str):
            fields["transport"] = get_transport(fields["transport"])
        return Cluster(**fields, name=name)
    except InputError as error:  # (its own fix dropped: the entry's is to repair it)
        raise _presets.entry_error(
            name, "clusters", f"is not a valid cluster ({error.where}: {error.problem})"
        ) from None
    except (TypeError, ValueError, KeyError) as error:
        raise _presets.entry_error(name, "clusters", f"is not a valid cluster ({error})") from None


def check_cluster_name(name: str, *, replace: bool = False) -> None:
    """Refuse a name a user cluster cannot take: empty, the name every :class:`perfmodel.Cluster` given none
    has (``"cluster"``), a built-in cluster's, link's or transport's, one that reads as a multiple of a link
    (``"8x ib-ndr"``) or as a number (``"50"``), a user link's, or one already saved (unless ``replace``); or a
    presets file it could not be saved to. A model's or a connector's name is free: they go to other arguments.

    Parameters
    ----------
    name
        The name (names ignore case and surrounding spaces).
    replace
        Whether a user cluster of that name may be replaced.

    Examples
    --------
    >>> check_cluster_name("ib-ndr")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: cluster name: 'ib-ndr' is a built-in link preset (a cluster goes where a link goes). Fix: choose another name.
    """
    key = _presets.key_of(name)
    if key == "cluster":
        raise InputError(
            "cluster name",
            f"{name!r} is the name of every Cluster given none",
            "name it: perfmodel.Cluster(..., name='our-cluster')",
        )
    if _taken(key):
        raise InputError("cluster name", f"{name!r} is {_taken(key)}", "choose another name")
    _presets.check_free("clusters", name, builtin=set(CLUSTERS), replace=replace)


def save_cluster(cluster: Cluster, *, source: str = "", replace: bool = False) -> Path:
    """Save ``cluster`` as a user preset under its name: every entry point then accepts the name
    (``kv_transfer_bandwidth="our-cluster"``). Returns the presets file.

    Parameters
    ----------
    cluster
        The :class:`perfmodel.Cluster`, saved under its ``name``: not ``"cluster"`` (every unnamed
        cluster's), nor a name :func:`check_cluster_name` refuses (a built-in cluster's, link's or
        transport's, a user link's).
    source
        Where its figures come from.
    replace
        Replace a user cluster of that name (otherwise refused).

    Returns
    -------
    pathlib.Path
        The presets file.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> from perfmodel import Cluster
    >>> _ = save_cluster(Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8, name="our-cluster"))
    >>> get_cluster("our-cluster").nics_per_node
    4
    """
    if not isinstance(cluster, Cluster):
        raise InputError("cluster", f"got {type(cluster).__name__}", "pass a perfmodel.Cluster")
    check_cluster_name(cluster.name, replace=replace)
    entry = {f.name: getattr(cluster, f.name) for f in dataclasses.fields(Cluster) if f.name != "name"}
    # (a Cluster resolves its links and transport: Link, Link or None, Transport)
    entry["nic"], entry["nvlink"] = (
        _link_entry(cast(Link, cluster.nic)),
        _link_entry(cast("Link | None", cluster.nvlink)),
    )
    entry["transport"] = _transport_entry(cast(Transport, cluster.transport))
    entry["source"] = source
    return _presets.save("clusters", cluster.name, entry, builtin=set(CLUSTERS), replace=replace)


def remove_cluster(name: str) -> Path:
    """Remove a user cluster that perfmodel saved (:func:`save_cluster`); returns the presets file. An entry
    perfmodel did not save (written by hand) is refused and left as it is.

    Parameters
    ----------
    name
        The user cluster's name (any case).

    Returns
    -------
    pathlib.Path
        The presets file.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> from perfmodel import Cluster
    >>> _ = save_cluster(Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8, name="our-cluster"))
    >>> _ = remove_cluster("Our-Cluster"); user_clusters()
    {}
    """
    return _presets.remove("clusters", name)
