"""Cluster presets: named :class:`perfmodel.Cluster` descriptions of published machines (each field's
source in docs/clusters.rst and in :data:`SOURCES`), and the user's saved clusters (``presets.json``,
kind ``"clusters"``, as links are).
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

from . import _presets
from .clusters import Cluster
from .errors import InputError
from .links import LINKS, Link, Transport, get_transport

__all__ = ["CLUSTERS", "SOURCES", "cluster_names", "get_cluster", "save_cluster", "user_clusters"]

_DGX_H100 = ("NVIDIA DGX H100 user guide: 8 H100 GPUs, 8 single-port ConnectX-7 400 Gb/s NICs for the compute "
             "fabric (one per GPU), NVLink 4 (900 GB/s per GPU, both directions) through NVSwitch within the node")

#: Built-in clusters by name (ideal transport: give one with ``dataclasses.replace(c, transport=...)``).
CLUSTERS: dict[str, Cluster] = {
    "hgx-h100-8x400g": Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, nvlink_domain=8, nvlink="nvlink4",
                               fabric="rail", name="hgx-h100-8x400g"),
    "hgx-h200-8x400g": Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, nvlink_domain=8, nvlink="nvlink4",
                               fabric="rail", name="hgx-h200-8x400g"),
    "gcp-a3-ultra": Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, nvlink_domain=8, nvlink="nvlink4",
                            name="gcp-a3-ultra"),
    "aws-p5": Cluster(nic="efa-100g", nics_per_node=32, gpus_per_node=8, nvlink_domain=8,
                      nvlink="nvlink4", name="aws-p5"),
    "aws-p5en": Cluster(nic="efa-200g", nics_per_node=16, gpus_per_node=8, nvlink_domain=8, nvlink="nvlink4",
                        name="aws-p5en"),
    "gb200-nvl72": Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=4, nvlink_domain=72, nvlink="nvlink5",
                           name="gb200-nvl72"),
}

#: Each preset's sources, field by field.
SOURCES: dict[str, dict[str, str]] = {
    "hgx-h100-8x400g": {"node": _DGX_H100,
                        "fabric": "NVIDIA DGX SuperPOD reference architecture: rail-optimized compute fabric "
                                  "(NIC k of every node on leaf k)"},
    "hgx-h200-8x400g": {"node": "NVIDIA HGX H200: the H100 baseboard's NVLink 4 and 8 x 400 Gb/s ConnectX-7; "
                                "see " + _DGX_H100,
                        "fabric": "NVIDIA DGX SuperPOD reference architecture: rail-optimized"},
    "gcp-a3-ultra": {"node": "Google Cloud a3-ultragpu-8g: 8 NVIDIA H200 GPUs, each with a dedicated ConnectX-7 "
                             "400 Gb/s NIC, RDMA over RoCE (GoogleCloudPlatform/cluster-toolkit release v1.44.1)",
                     "pcie": "no public figure of its PCIe switches' count and bandwidth was found: not modeled "
                             "(give gpus_per_pcie_switch and pcie_switch_gb_s to model them)",
                     "fabric": "not published: flat (non-blocking); its RoCE network has one subnet per NIC "
                               "(GKE DRANET set-up for A3 Ultra/A4)"},
    "aws-p5": {"node": "AWS EC2 p5.48xlarge: 8 H100 GPUs, up to 32 network cards and 3,200 Gb/s of EFA bandwidth "
                       "(AWS EC2 user guide 'Maximize network bandwidth ... with EFA', whose P5 example launches 32 EFA "
                       "devices): 32 x 100 Gb/s",
               "nvlink": "NVIDIA H100: NVLink 4, 900 GB/s per GPU both directions"},
    "aws-p5en": {"node": "AWS EC2 p5en.48xlarge: 8 H200 GPUs, 16 x 200 Gb/s EFA (kvcache-ai/Mooncake docs, "
                         "'EFA transport')",
                 "nvlink": "NVIDIA H200: NVLink 4, 900 GB/s per GPU both directions"},
    "gb200-nvl72": {"node": "NVIDIA GB200 NVL72: 18 compute trays of 4 Blackwell GPUs in one NVLink domain of 72, "
                            "NVLink 5 at 1.8 TB/s per GPU both directions; a compute tray's cluster network is "
                            "4 x ConnectX-7 single-port 400G OSFP, one per GPU (NVIDIA DGX GB200 user guide, "
                            "'Hardware', compute tray configuration)"},
}


def cluster_names() -> set[str]:
    """The names of the built-in and saved clusters."""
    return set(CLUSTERS) | set(_presets.load("clusters")[0])


def get_cluster(name: str) -> Cluster:
    """A cluster by name: a built-in preset, or one saved with :func:`save_cluster`.

    Parameters
    ----------
    name
        A preset's name (:data:`CLUSTERS`) or a saved cluster's.

    Returns
    -------
    perfmodel.Cluster

    Examples
    --------
    >>> get_cluster("gb200-nvl72").nvlink_domain
    72
    """
    key = name.strip().lower() if isinstance(name, str) else ""
    if key in CLUSTERS:
        return CLUSTERS[key]
    users, bad = _presets.load("clusters")
    if key in bad:
        raise bad[key]
    if key in users:
        return _from_entry(key, users[key])
    close = difflib.get_close_matches(key, [*CLUSTERS, *users], n=3, cutoff=0.4)
    raise InputError("cluster", f"unknown cluster {name!r}", (f"did you mean {', '.join(close)}? " if close else "")
                     + f"use one of {', '.join([*CLUSTERS, *users])}, or a perfmodel.Cluster")


def user_clusters() -> dict[str, Cluster]:
    """The clusters saved with :func:`save_cluster`, by name.

    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> user_clusters()
    {}
    """
    return {name: _from_entry(name, entry) for name, entry in _presets.load("clusters")[0].items()}


def _link_entry(link: Link | None) -> Any:
    if link is None:
        return None
    if link.name in LINKS and LINKS[link.name] == link:
        return link.name
    return {"name": link.name, "bandwidth_gb_s": link.bandwidth_gb_s, "latency_ms": link.latency_ms,
            "efficiency": link.efficiency, "per_block_ms": link.per_block_ms, "per_message_ms": link.per_message_ms}


def _transport_entry(transport: Transport) -> Any:
    return {f.name: getattr(transport, f.name) for f in dataclasses.fields(Transport)}


def _from_entry(name: str, entry: dict[str, Any]) -> Cluster:
    try:
        fields = dict(entry)
        fields.pop("source", None)
        fields.pop(_presets.SAVED_BY, None)
        for key in ("nic", "nvlink"):
            if isinstance(fields.get(key), dict):
                fields[key] = Link(**fields[key])
        if isinstance(fields.get("transport"), dict):
            fields["transport"] = Transport(**fields["transport"])
        elif isinstance(fields.get("transport"), str):
            fields["transport"] = get_transport(fields["transport"])
        return Cluster(**fields, name=name)
    except (TypeError, ValueError, KeyError) as error:
        raise _presets.entry_error(name, "clusters", f"is not a valid cluster ({error})") from None


def save_cluster(cluster: Cluster, *, source: str = "", replace: bool = False) -> Path:
    """Save ``cluster`` as a user preset under its name: every entry point then accepts the name
    (``kv_transfer_bandwidth="our-cluster"``). Returns the presets file.

    Parameters
    ----------
    cluster
        The :class:`perfmodel.Cluster` (saved under its ``name``, which no built-in preset may have).
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
    entry = {f.name: getattr(cluster, f.name) for f in dataclasses.fields(Cluster) if f.name != "name"}
    entry["nic"], entry["nvlink"] = _link_entry(cluster.nic), _link_entry(cluster.nvlink)
    entry["transport"] = _transport_entry(cluster.transport)
    entry["source"] = source
    return _presets.save("clusters", cluster.name, entry, builtin=set(CLUSTERS), replace=replace)

