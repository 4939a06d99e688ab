"""``perfmodel cache``: where the compiled kernels are cached, how large each entry is, ``--clear``, ``--prune``
and ``--fill``.

Only the files numba and perfmodel write there are removed, in the folders perfmodel makes (no other folder is listed
or touched), and folders once they are empty: a folder holding anything else stays, with it, and is named as kept.
A prune creates no folder. ``--fill`` compiles, into the cache, what the public entry points compile on their
first call (:func:`_fill_steps`: small calls on embedded samples), so that a machine or an image pays the
compile once, before its first real run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _kept(folders: list[Path]) -> None:
    from .. import _compat

    for folder in folders:
        if _compat.foreign_files(folder):
            print(f"kept {folder}: it holds files perfmodel did not write")
        else:  # (only perfmodel's files, which it could not remove: read-only, another user's)
            print(f"kept {folder}: its files could not be removed; check the folder's permissions")


def _fill_steps() -> list[tuple[str, Callable[[], object]]]:
    """What ``--fill`` runs, step by step: the calls of the README's tour and the main job (arrays, frames, sweeps,
    clusters alone, replays and TTFT on links and on a cluster), on the embedded samples, a few rows each. Each
    entry point compiles per kind of input (an array or a scalar, the contention, links or a cluster); these are
    the kinds a first run meets."""
    import numpy as np
    import pandas as pd

    import perfmodel
    from perfmodel import datasets

    from ..inputs.codes import choice_names

    trace = datasets.load("mooncake-synthetic").head(200)
    azure = datasets.load("azure-code-2023").head(200)
    serving = dict(prefill_workers=2, prefill_tokens_per_s=20_000, decode_step_ms=30.0)
    cluster = "hgx-h100-8x400g"

    def arrays() -> None:
        perfmodel.handoff_delay_ms(128, 1.0, 1_000_000)
        perfmodel.handoff_delay_ms(32_768, "8x ib-ndr", "llama-3.1-70b", kv_cache_dtype="fp8")
        perfmodel.handoff_delay_ms([4096, 32768], 50.0, 327_680, worker_type=["prefill", "decode"])
        perfmodel.handoff_delay_ms(32_768, "nixl-ucx-rdma", "llama-3.1-70b", block_size=[16, 128])
        perfmodel.kv_bytes("gpt-oss-120b", [1024, 32_768])
        perfmodel.kv_messages("llama-3.1-8b", 7_500, 16)
        with perfmodel.set_options(parallel_min_rows=0):  # (the pass shared between threads, from 200,000 rows)
            perfmodel.handoff_delay_ms(np.arange(1, 5), 50.0, 327_680)

    def frames() -> None:
        requests = pd.DataFrame({"tokens": [1024, 32768], "model": ["llama-3.1-70b", "deepseek-v3"]})
        requests.perfmodel.assign_handoff_delay(
            num_input_tokens="tokens", kv_bytes_per_token="model", kv_transfer_bandwidth="ib-ndr"
        )
        perfmodel.sweep(model=["llama-3.1-70b"], link=["ib-ndr"], num_input_tokens=[128, 1024])
        perfmodel.required_bandwidth(32_768, "llama-3.1-70b", budget_ms=50)
        perfmodel.max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=50)

    def clusters() -> None:
        perfmodel.handoff_delay_ms(32_768, cluster, "llama-3.1-70b", tp=8, decode_tp=2)
        perfmodel.handoff_flows(32_768, cluster, "llama-3.1-70b", tp=8, decode_tp=2)
        perfmodel.required_bandwidth(32_768, "llama-3.1-70b", budget_ms=50, cluster=cluster, tp=8)

    def replays() -> None:
        for contention in choice_names("contention"):
            perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-70b", decode_workers=2, contention=contention)
        perfmodel.replay_ttft(azure, "ib-ndr", "llama-3.1-70b", decode_workers=2, contention="fifo", **serving)

    def on_a_cluster() -> None:
        for contention in ("none", "fair"):
            perfmodel.replay_handoffs(trace, cluster, "llama-3.1-70b", tp=8, decode_workers=1, contention=contention)
        perfmodel.replay_ttft(azure, cluster, "llama-3.1-70b", tp=8, decode_workers=1, contention="fair", **serving)

    return [
        ("arrays (handoff_delay_ms, kv_bytes, kv_messages)", arrays),
        ("frames and sweeps", frames),
        ("handoffs alone on a cluster", clusters),
        ("replays and TTFT on links", replays),
        ("replays and TTFT on a cluster", on_a_cluster),
    ]


def _fill() -> int:
    """``perfmodel cache --fill``: compile what the entry points compile (:func:`_fill_steps`), a line per step."""
    import numba

    from .. import _compat
    from ..errors import InputError

    if numba.config.DISABLE_JIT:
        print("nothing to compile: NUMBA_DISABLE_JIT is set (the kernels run as plain Python)")
        return 0
    problem = _compat.cache_problem()
    if problem:
        raise InputError("cache", f"{problem}: compiled kernels could not be kept", _compat.cache_fix())
    print(f"compiling perfmodel's kernels into {_compat.cache_target()} (about 30 s on two cores):", flush=True)
    started = time.perf_counter()
    for name, step in _fill_steps():
        begun = time.perf_counter()
        # (the samples' own warnings and the first-compile notice say nothing about the user's data)
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            step()
        print(f"  {name}: {time.perf_counter() - begun:,.1f} s", flush=True)
    print(
        f"compiled kernels cached in {_compat.cache_target()} in {time.perf_counter() - started:,.1f} s: the entry "
        "points' first calls load them (an input of another kind, e.g. an array where a number was, compiles once)"
    )
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    """Run ``perfmodel cache``: list the cache's entries, or clear, prune or fill it (``args.clear``, ``args.prune``,
    ``args.fill``)."""
    from .. import _compat
    from ..inputs.words import count

    if args.fill:
        return _fill()
    part = _compat.cache_dir()
    while not part.exists() and part.parent != part:
        part = part.parent
    if (args.clear or args.prune) and not part.is_dir():  # (no cache there: nothing perfmodel wrote to remove)
        print(f"nothing to remove: {part} is not a folder (set PERFMODEL_CACHE_DIR to a folder you may write)")
        return 0
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
        help="the compiled kernels' cache: where, how large; --clear, --prune, --fill",
        description="Show perfmodel's cache of compiled kernels, prune its stale entries, clear it, or fill it.",
    )
    what = cache.add_mutually_exclusive_group()
    what.add_argument("--clear", action="store_true", help="remove every compiled kernel (all versions)")
    what.add_argument(
        "--prune",
        action="store_true",
        help="remove the entries no install can use any more (other versions here, removed installs)",
    )
    what.add_argument(
        "--fill",
        action="store_true",
        help="compile the kernels the entry points use into the cache, once (about 30 s), for first runs to load: "
        "after an install, or while building an image",
    )
    cache.set_defaults(run=cmd_cache)
