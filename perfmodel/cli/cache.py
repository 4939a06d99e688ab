"""``perfmodel cache``: where the compiled kernels are cached, how large each entry is, ``--clear`` and ``--prune``.

Only the files numba and perfmodel write there are removed, in the folders perfmodel makes (no other folder is listed
or touched), and folders once they are empty: a folder holding anything else stays, with it, and is named as kept.
A prune creates no folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _kept(folders: list[Path]) -> None:
    from .. import _compat

    for folder in folders:
        if _compat.foreign_files(folder):
            print(f"kept {folder}: it holds files perfmodel did not write")
        else:  # (only perfmodel's files, which it could not remove: read-only, another user's)
            print(f"kept {folder}: its files could not be removed; check the folder's permissions")


def cmd_cache(args: argparse.Namespace) -> int:
    """Run ``perfmodel cache``: list the cache's entries, or clear or prune it (``args.clear``, ``args.prune``)."""
    from .. import _compat
    from ..inputs.words import count

    if args.clear:
        swept = _compat.clear_cache()
        print(
            f"removed {swept.freed / 1e6:,.1f} MB of compiled kernels from {_compat.cache_dir()}; the next run "
            "compiles them again"
        )
        _kept(swept.kept)
        return 0
    if args.prune:
        swept = _compat.prune_cache()
        print(
            f"removed {count(len(swept.removed), 'stale entry', 'stale entries')} ({swept.freed / 1e6:,.1f} MB) "
            f"from {_compat.cache_dir()}"
        )
        _kept(swept.kept)
        return 0
    entries = _compat.cache_entries()
    print(
        f"compiled kernels: {_compat.cache_dir()} ({sum(size for _, size, _ in entries) / 1e6:,.1f} MB; "
        "PERFMODEL_CACHE_DIR moves it)"
    )
    for folder, size, state in entries:
        others = ""
        if not state.startswith("not perfmodel's") and _compat.foreign_files(folder):
            others = "; also holds files perfmodel did not write (they stay)"
        print(f"  {size / 1e6:7,.1f} MB  {folder.parent.name}/{folder.name}  {state}{others}")
    unusable = _compat.cache_dir_unusable()
    if unusable:
        print(f"  (not usable: {unusable}; kernels compile again in each process: {_compat.cache_fix()})")
    elif not entries:
        print("  (empty: the first run compiles the kernels, once)")
    print(
        "\nStale entries are pruned when kernels are first compiled (or with --prune); --clear removes all. "
        "Only the files numba and perfmodel wrote are removed."
    )
    return 0


def register(sub: Any) -> None:
    """Add ``perfmodel cache`` to the subcommands ``sub``."""
    cache = sub.add_parser(
        "cache",
        help="the compiled kernels' cache: where, how large; --clear, --prune",
        description="Show perfmodel's cache of compiled kernels, prune its stale entries or clear it.",
    )
    what = cache.add_mutually_exclusive_group()
    what.add_argument("--clear", action="store_true", help="remove every compiled kernel (all versions)")
    what.add_argument(
        "--prune",
        action="store_true",
        help="remove the entries no install can use any more (other versions here, removed installs)",
    )
    cache.set_defaults(run=cmd_cache)
