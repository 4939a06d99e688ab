"""``perfmodel presets list|show|remove``: the user presets (links, models, clusters, prefill profiles and
connectors saved by perfmodel, or written by hand), where they come from, and removing those perfmodel saved.
"""

from __future__ import annotations

import argparse
import difflib
import json
from typing import Any, cast

from ._parsing import UsageError

_KINDS = {"link": "links", "model": "models", "cluster": "clusters", "prefill": "prefills", "connector": "connectors"}


def _entries() -> list[dict[str, Any]]:
    """Every user preset: its kind, name, source, whether perfmodel saved it, and what is wrong with it."""
    from ..inputs import user_presets as _presets
    from ..model.models import user_models_and_errors
    from ..model.prefill import user_prefills_and_errors
    from ..network.connector import user_connectors_and_errors
    from ..network.links import user_links_and_errors
    from ..network.presets import user_clusters_and_errors

    rows = []
    for kind, (usable, bad) in (
        ("link", user_links_and_errors()),
        ("model", user_models_and_errors()),
        ("cluster", user_clusters_and_errors()),
        ("prefill", user_prefills_and_errors()),
        ("connector", user_connectors_and_errors()),
    ):
        spellings = _presets.spellings(_KINDS[kind])  # (as written: an unusable entry's too, each spelling)
        for name in [*usable, *bad]:
            entries = [entry if isinstance(entry, dict) else {} for _, entry in spellings.get(name, [])]
            sources = [entry["source"] for entry in entries if isinstance(entry.get("source"), str) and entry["source"]]
            ours = {entry.get(_presets.SAVED_BY) == "perfmodel" for entry in entries}
            rows.append(
                {
                    "kind": kind,
                    "name": name,
                    "source": sources[0] if sources else "-",
                    "saved by": " and ".join(["perfmodel"] * (True in ours) + ["by hand"] * (False in ours)) or "-",
                    "usable": "yes" if name in usable else f"no: {bad[name].problem}",
                }
            )
    return rows


def _one(name: str, kind: str | None) -> dict[str, Any]:
    """The one user preset of that name (of that kind, when the name is of both)."""
    from ..inputs import user_presets as _presets

    key = _presets.key_of(name)
    rows = _entries()
    found = [row for row in rows if row["name"] == key and kind in (None, row["kind"])]
    if not found:
        names = sorted({row["name"] for row in rows if kind in (None, row["kind"])})
        close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
        raise UsageError(
            f"no user preset {name!r}"
            + (f" of kind {kind}" if kind else "")
            + f" in {_presets.presets_path()}. Fix: "
            + (f"did you mean {', '.join(close)}? " if close else "")
            + "perfmodel presets list shows them"
        )
    if len(found) > 1:
        kinds = [row["kind"] for row in found]
        raise UsageError(
            f"{name!r} is a user {' and a user '.join(kinds)}. Fix: add " + " or ".join(f"--kind {k}" for k in kinds)
        )
    return found[0]


def cmd_presets(args: argparse.Namespace) -> int:
    from ..inputs import user_presets as _presets

    path = _presets.presets_path()
    if args.action == "list":
        if args.name is not None or args.kind is not None:
            given = [repr(args.name)] * (args.name is not None) + ["--kind"] * (args.kind is not None)
            verb = "goes" if len(given) == 1 else "go"
            raise UsageError(
                f"perfmodel presets list lists every user preset: {' and '.join(given)} {verb} with show or "
                "remove. Fix: perfmodel presets list, or perfmodel presets show NAME [--kind KIND]"
            )
        return _list(path)
    if args.name is None:
        raise UsageError(f"perfmodel presets {args.action} needs a NAME. Fix: perfmodel presets {args.action} NAME")
    row = _one(args.name, args.kind)
    if args.action == "show":
        return _show(row, path)
    from ..model.models import remove_model
    from ..network.links import remove_link
    from ..network.presets import remove_cluster

    remove = {"link": remove_link, "model": remove_model, "cluster": remove_cluster}.get(row["kind"])
    if remove is None:  # (a prefill profile or a connector: no API of its own to remove one)
        _presets.remove(_KINDS[row["kind"]], row["name"])
    else:
        remove(row["name"])
    print(f"removed the user {row['kind']} {row['name']!r} from {path}")
    return 0


def _list(path: Any) -> int:
    rows = _entries()
    if not rows:
        print(
            f"no user presets in {path}. Save one: perfmodel calibrate TABLE --name NAME --save, "
            "perfmodel models --add NAME config.json, perfmodel.save_cluster(cluster) or perfmodel.save_connector(connector)"
        )
        return 0
    print(f"user presets in {path}:")
    widths = {title: max(len(title), *(len(row[title]) for row in rows)) for title in rows[0]}
    for cells in [dict(zip(widths, widths)), *rows]:  # (the titles, then each preset: text left-aligned, as read)
        print("  ".join(cells[title].ljust(width) for title, width in widths.items()).rstrip())
    print(
        "\nperfmodel presets show NAME: its fields; perfmodel presets remove NAME: removes one perfmodel saved "
        "(one written by hand stays: edit the file)"
    )
    return 0


def _show(row: dict[str, Any], path: Any) -> int:
    from ..inputs import user_presets as _presets

    spelled = _presets.spellings(_KINDS[row["kind"]]).get(row["name"], [])
    entry = spelled[0][1] if len(spelled) == 1 else dict(spelled)  # (several spellings: each, as written)
    who = {"perfmodel": "saved by perfmodel", "by hand": "written by hand"}.get(row["saved by"], row["saved by"])
    print(f"user {row['kind']} {row['name']!r} in {path} ({who}; usable: {row['usable']})")
    print(json.dumps(entry, indent=1, sort_keys=True))
    if row["usable"] == "yes" and row["kind"] == "link":
        from ..network.links import get_link

        link = get_link(row["name"])
        print(
            f"\n{link.effective_bandwidth_gb_s:,.4g} GB/s per direction"
            + (f"; fit: {link.fit.describe()}" if link.fit else "")
        )
    elif row["usable"] == "yes" and row["kind"] == "cluster":
        from ..network.presets import get_cluster

        print(f"\n{get_cluster(row['name']).describe()}")
    elif row["usable"] == "yes" and row["kind"] == "prefill":
        from ..model.prefill import get_prefill

        profile = get_prefill(row["name"])
        print(f"\n{profile.fixed_ms:g} ms + {profile.ms_per_token:g} ms/token + {profile.ms_per_token2:g} ms/token^2")
    elif row["usable"] == "yes" and row["kind"] == "connector":
        from ..network.connector import Connector, get_connector

        print(f"\n{cast(Connector, get_connector(row['name'])).describe()}")
    elif row["usable"] == "yes":
        from ..model.models import kv_terms, user_models_and_errors

        config = user_models_and_errors()[0][row["name"]]  # (its config: never a folder of its name here)
        print(f"\n{kv_terms(config).describe()}")
    return 0


def register(sub: Any) -> None:
    """Add ``perfmodel presets`` to the subcommands ``sub``."""
    presets = sub.add_parser(
        "presets",
        help="your presets: list them, show one, remove one perfmodel saved",
        description="The user presets (links saved by perfmodel calibrate --save, models by "
        "perfmodel models --add, clusters by perfmodel.save_cluster, or written "
        "by hand in presets.json): where they "
        "come from and whether they can be used. remove takes away only an entry "
        "perfmodel saved.",
    )
    presets.add_argument("action", choices=["list", "show", "remove"], help="what to do")
    presets.add_argument("name", nargs="?", help="with show and remove: the preset's name")
    presets.add_argument(
        "--kind", choices=list(_KINDS), help="link, model, cluster, prefill or connector, when a name is of several"
    )
    presets.set_defaults(run=cmd_presets)
