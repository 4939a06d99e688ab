"""``perfmodel cache``: where the compiled kernels are cached, how large each entry is, and ``--clear``."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_cache(args: argparse.Namespace) -> int:
    from .. import _compat

    if args.clear:
        freed = _compat.clear_cache()
        print(
            f"removed {freed / 1e6:,.1f} MB of compiled kernels from {_compat.cache_dir()}; the next run "
            "compiles them again"
        )
        return 0
    if args.prune:
        removed = _compat.prune_cache()
        print(f"removed {len(removed)} stale entr{'y' if len(removed) == 1 else 'ies'} from {_compat.cache_dir()}")
        return 0
    entries = _compat.cache_entries()
    print(
        f"compiled kernels: {_compat.cache_dir()} ({sum(size for _, size, _ in entries) / 1e6:,.1f} MB; "
        "PERFMODEL_CACHE_DIR moves it)"
    )
    for folder, size, state in entries:
        print(f"  {size / 1e6:7,.1f} MB  {folder.parent.name}/{folder.name}  {state}")
    if not entries:
        print("  (empty: the first run compiles the kernels, once)")
    print("\nStale entries are pruned when kernels are first compiled (or with --prune); --clear removes all.")
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
