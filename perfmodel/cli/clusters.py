"""``perfmodel clusters``: the cluster presets, built-in and yours, with their sources; and the
``--cluster NAME`` flags (plus one per field) that other commands take.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, cast

from ..errors import InputError
from ..inputs.table import CLUSTER_FIELDS, INPUTS
from ._parsing import UsageError, one_line_warnings, plain, value_kind

if TYPE_CHECKING:
    from ..network.links import Link, Transport

#: The fields a command line may change of a named cluster (the input table's): flag and field.
FIELD_FLAGS = tuple((cast(str, INPUTS[name].cli), name) for name in CLUSTER_FIELDS)  # (each has a flag)


def add_cluster_flags(
    parser: argparse.ArgumentParser, group: Any, help: str = "a cluster preset or saved cluster (perfmodel clusters)"
) -> None:
    """``--cluster NAME`` (in ``group``, beside the bandwidth flags; ``help`` its help) and a flag per field of it."""
    group.add_argument("--cluster", metavar="NAME", help=help)
    fields = parser.add_argument_group("cluster fields", "change a field of --cluster")
    for flag, name in FIELD_FLAGS:
        fields.add_argument(flag, dest=f"cluster_{name}", help=field_help(name), **value_kind(name))


def field_help(name: str) -> str:
    """A cluster field's flag help: its line in the input table, without the words that make it an axis."""
    return plain(INPUTS[name].doc.split(": ", 1)[1].rstrip("."))


def cluster_of(args: argparse.Namespace) -> Any:
    """The cluster the flags describe (None without --cluster); field flags without it are refused."""
    changes = {
        name: getattr(args, f"cluster_{name}")
        for _, name in FIELD_FLAGS
        if getattr(args, f"cluster_{name}", None) is not None
    }
    if getattr(args, "cluster", None) is None:
        if changes:
            flags = ", ".join(flag for flag, name in FIELD_FLAGS if name in changes)
            verb = "changes" if len(changes) == 1 else "change"
            raise UsageError(
                f"{flags} {verb} a cluster's fields, and no --cluster is given. Fix: give --cluster NAME too"
            )
        return None
    from ..network.clusters import with_fields
    from ..network.placement import get_cluster

    cluster = get_cluster(args.cluster)
    return with_fields(cluster, changes)


def cmd_clusters(args: argparse.Namespace) -> int:
    with one_line_warnings("clusters"):  # a user preset that cannot be used: one line, and the others listed
        return _clusters()


def _clusters() -> int:
    import pandas as pd

    from ..handoff import handoff_delay_ms
    from ..network.presets import CLUSTERS, SOURCES, user_clusters

    clusters = {**CLUSTERS, **user_clusters()}
    unplaced: dict[str, str] = {}

    def example(name: str, c: Any) -> str:  # (a cluster that cannot place it still listed, and said why below)
        try:
            return f"{handoff_delay_ms(32768, c, 'llama-3.1-70b', tp=8, block_size=16):,.4g}"
        except InputError as error:
            unplaced[name] = error.problem
            return "n/a"

    rows = [
        {
            "cluster": name,
            "GPUs/node": c.gpus_per_node,
            "NICs/node": f"{c.nics_per_node} x {cast('Link', c.nic).name}",  # (a Cluster resolves its nic)
            "NIC GB/s": c.nic_capacity_gb_s,
            "NVLink domain": c.nvlink_domain,
            "fabric": c.fabric,
            "transport": cast("Transport", c.transport).name,  # (and its transport)
            "paths": _paths_as_found(c),
            "32k tokens of llama-3.1-70b, TP8, 16-token blocks (ms)": example(name, c),
            "kind": "built-in" if name in CLUSTERS else "user",
        }
        for name, c in clusters.items()
    ]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    for name, problem in unplaced.items():
        print(f"  n/a: {name}: {problem}")
    print("\nSources:")
    for name, fields in SOURCES.items():
        print(f"  {name}: " + "; ".join(fields.values()))
    print("\nUse one wherever a link goes: --cluster NAME (and --nics-per-node N ... to change a field).")
    return 0


def _paths_as_found(c: Any) -> str:
    """A cluster's degraded paths in a few words ("as built": none): NICs down, GPUs pinned, its host bridge."""
    said = []
    if c.nics_down:
        said.append("NICs down " + ",".join(str(k) for k in c.nics_down))
    if c.nic_map is not None:
        said.append("GPU->NIC " + ",".join(str(k) for k in c.nic_map))
    if c.host_bridge_gb_s is not None:
        said.append(f"host bridge {c.host_bridge_gb_s:g} GB/s")
    return "; ".join(said) or "as built"


def register(sub: Any) -> None:
    """Add ``perfmodel clusters`` to the subcommands ``sub``."""
    sub.add_parser(
        "clusters",
        help="the cluster presets, built-in and yours",
        description="List the cluster presets (built-in nodes of published machines, and clusters you saved "
        "with perfmodel.save_cluster or wrote in presets.json): GPUs and NICs per node, NVLink domain, "
        "fabric, transport, its paths as found (NICs down, GPUs pinned to other NICs, a host bridge), and the handoff of 32k tokens of Llama-3.1-70B at TP8 on each, with the "
        "sources of their figures. Use a name with --cluster (and a field flag, e.g. --nics-per-node, "
        "to change one).",
    ).set_defaults(run=cmd_clusters)
