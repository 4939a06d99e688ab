"""``perfmodel sweep``: the main job, a what-if over models x links x prompt lengths (a table, two figures and
a summary).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs.table import CLUSTER_FIELDS, INPUTS, NAMED_BY, flags
from ..inputs.words import count
from ..network.links import DEFAULT_LINKS
from ._draw import alongside, save
from ._parsing import UsageError, floats, given, output_path, parse_tokens, reader, table_options

DEFAULT_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "deepseek-v3"]


DEFAULT_TOKENS = "128:131072:x2"


def cmd_sweep(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import perfmodel

    tokens = parse_tokens(args.tokens)
    axes: dict[str, Any] = {"num_input_tokens": tokens}
    if args.kv_bytes_per_token is not None:
        per_token = args.kv_bytes_per_token  # (whole numbers, as 1e6 may be written, stay whole in the table)
        axes["kv_bytes_per_token"] = (
            [int(v) for v in per_token] if all(v.is_integer() for v in per_token) else per_token
        )
    else:
        axes["model"] = args.model or DEFAULT_MODELS
    if args.bandwidth:
        axes["kv_transfer_bandwidth"] = floats("--bandwidth", args.bandwidth, positive=True)  # (log axes)
    elif args.cluster:
        axes["cluster"] = args.cluster
    else:
        axes["link"] = args.link or list(DEFAULT_LINKS)
    if args.cache_hit:
        axes["cache_hit_ratio"] = floats("--cache-hit", args.cache_hit, high=1.0)
    axes.update(given(args))
    _no_repeats(axes)
    for name in ("kv_cache_dtype", "tp", "decode_tp", "scope"):
        if name in axes and "model" not in axes:
            raise UsageError(f"{INPUTS[name].cli} applies to models (--model), not to --kv-bytes-per-token")
    fields = [INPUTS[name].cli or name for name in CLUSTER_FIELDS if name in axes]
    if fields and "cluster" not in axes:
        raise UsageError(f"{', '.join(fields)} vary a cluster's fields: give --cluster NAME too")
    links = [perfmodel.get_link(name) for name in axes.get("link", [])]
    if (
        args.cache_hit
        or "per_block_ms" in axes
        or "per_message_ms" in axes
        or any(link.per_block_ms or link.per_message_ms for link in links)
    ):
        axes.setdefault("block_size", [64])

    from ..ground.files import output_folder

    out: Path = args.out
    table_name = f"sweep.{args.format}"
    names = [table_name, "delay_vs_tokens.png"] + (["heatmap.png"] if len(tokens) > 1 else [])
    with output_folder(
        out, command="sweep", names=names
    ) as stage:  # refuses a folder holding files of these names not ours
        rows, summary = _sweep_outputs(axes, tokens, stage, table_name)
    print(summary)  # (after the files are in place: a closed or full output keeps them)
    figures = [str(out / n) for n in names[1:] if (out / n).exists()]
    print(f"\nwrote {out / table_name} ({count(rows, 'row')})" + (f" and {', '.join(figures)}" if figures else ""))
    return 0


#: The flags of the sweep's axes that are not the input table's.
_AXIS_FLAGS = {
    "kv_transfer_bandwidth": "--bandwidth",
    "cache_hit_ratio": "--cache-hit",
    "model": "--model",
    "link": "--link",
    "cluster": "--cluster",
    "kv_bytes_per_token": "--kv-bytes-per-token",
}


def _no_repeats(axes: dict[str, Any]) -> None:
    """Refuse a flag's value given twice (``--bandwidth 1 1``): each would be a row of its own, twice."""
    for name, values in axes.items():
        if not isinstance(values, list) or name == "num_input_tokens":  # (token counts: a sorted set already)
            continue
        seen: set[str] = set()
        for value in values:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            if shown in seen:
                flag = _AXIS_FLAGS.get(name) or INPUTS[name].cli or name
                raise UsageError(f"{flag}: {shown} is given twice; give each value once")
            seen.add(shown)


def _sweep_outputs(axes: dict[str, Any], tokens: list[int], stage: Path, table_name: str) -> tuple[int, str | None]:
    """Compute the sweep, write its table and figures into ``stage``; return the rows and the summary to print."""
    import matplotlib.pyplot as plt
    import numpy as np

    import perfmodel
    import perfmodel.plotting as pp

    from ..io import write_table

    df = perfmodel.sweep(**axes)
    write_table(df, stage / table_name, rounded=[c for c in df.columns if c not in axes])  # (results: 13 digits)
    draw_heatmap = None
    if len(tokens) > 1:  # the same what-if over a bandwidth grid instead of the links
        grid = {k: v for k, v in axes.items() if k not in ("link", "kv_transfer_bandwidth", "cluster", *CLUSTER_FIELDS)}
        grid["kv_transfer_bandwidth"] = np.geomspace(1, 1000, 61)
        draw_heatmap = functools.partial(
            _draw_heatmap, perfmodel.sweep(**grid), stage / "heatmap.png", axes.get("link", [])
        )
    summary: str | None = None
    try:
        with alongside(draw_heatmap):  # the two figures drawn side by side, on two cores
            try:
                save(pp.delay_vs_tokens_figure(df, budgets_ms=[50]), stage / "delay_vs_tokens.png")
            except InputError as error:  # (e.g. every delay 0 ms: a log axis shows none; the table stands)
                print(f"perfmodel sweep: warning: delay_vs_tokens.png not drawn: {error.problem}", file=sys.stderr)
            plt.close("all")
            summary = _summary(df, tokens)
    except _NotDrawn as error:  # the heatmap's (raised where it was drawn): the table and other figure stand
        print(f"perfmodel sweep: warning: heatmap.png not drawn: {error}", file=sys.stderr)
    return len(df), summary


class _NotDrawn(Exception):
    """A figure that cannot be drawn (its reason: the message), from wherever it was drawn (a forked child too:
    a plain message pickles)."""


def _draw_heatmap(grid: Any, path: Path, links: Sequence[Any]) -> None:
    import perfmodel.plotting as pp

    try:
        fig = pp.heatmap_figure(grid, budgets_ms=(10, 50, 100), links=links)
    except InputError as error:  # (e.g. every delay 0 ms or NaN: nothing to colour)
        raise _NotDrawn(error.problem) from None
    save(fig, path)


def _summary(df: Any, tokens: list[int]) -> str:
    """Delay (ms) at a few prompt lengths: one row per model and per value of every option given
    more than one value (each a labelled level), the options with one value in the heading."""
    from ..sweeps import AXES

    options = [
        c
        for c in AXES
        if c in df.columns and c != "num_input_tokens" and not any(name in df.columns for name in NAMED_BY.get(c, ()))
    ]  # (bytes of a model: its name)
    levels = [c for c in options if c in ("model", "link", "cluster") or df[c].nunique() > 1]
    fixed = [c for c in options if c not in levels]
    hits = [t for t in (1024, 8192, 32768, 131072) if t in tokens]  # (a few lengths: these, or spread over them all)
    spread = sorted({tokens[round(i * (len(tokens) - 1) / 3)] for i in range(4)})
    wanted = tokens if len(tokens) <= 4 else hits if len(hits) >= 2 else spread
    part = df[df["num_input_tokens"].isin(wanted)]
    table = part.pivot_table(
        index=levels, columns="num_input_tokens", values="handoff_delay_ms", observed=True, sort=False, dropna=False
    )
    table.columns = [f"{t // 1024}k" if t % 1024 == 0 else str(t) for t in table.columns]
    heading = ", ".join(f"{c}={df[c].iloc[0]}" for c in fixed)
    return (
        f"handoff delay (ms) at prompt length{f' ({heading})' if heading else ''}:\n"
        + table.to_string(float_format=lambda v: f"{v:,.3g}")
        + f"\n({df.attrs['question']})"
    )


def register(sub: Any) -> None:
    """Add ``perfmodel sweep`` to the subcommands ``sub``."""
    sweep = sub.add_parser(
        "sweep",
        help="what-if grid: models/bytes x links/bandwidths x prompt lengths (the main job)",
        description="Sweep handoff delays over models x links x prompt lengths; write a table, "
        "plots and a summary. With no options: popular models x "
        f"{len(DEFAULT_LINKS)} link presets ({', '.join(DEFAULT_LINKS)}) "
        "x 128 to 128k tokens.",
    )
    what = sweep.add_mutually_exclusive_group()
    what.add_argument("--model", nargs="+", metavar="NAME", help=f"model presets (default: {' '.join(DEFAULT_MODELS)})")
    what.add_argument(
        "--kv-bytes-per-token",
        type=reader("kv_bytes_per_token"),
        nargs="+",
        metavar="BYTES",
        help="bytes per token instead",
    )
    how = sweep.add_mutually_exclusive_group()
    how.add_argument("--link", nargs="+", metavar="NAME", help="link presets, e.g. '8x ib-ndr' (default: 8 above)")
    how.add_argument("--bandwidth", nargs="+", metavar="GBPS", help="bandwidths in decimal GB/s instead")
    how.add_argument(
        "--cluster",
        nargs="+",
        metavar="NAME",
        help="cluster presets or saved clusters instead (perfmodel "
        "clusters): every handoff's flows share their NICs, switches and NVLink ports; the flags of "
        "its fields (--nics-per-node 4 8 ...) vary them",
    )
    sweep.add_argument(
        "--tokens",
        default=DEFAULT_TOKENS,
        metavar="LIST|RANGE",
        help="'1k,8k,32k' or START:STOP[:STEP], STEP a count or xFACTOR (default %(default)s)",
    )
    sweep.add_argument("--cache-hit", nargs="+", metavar="RATIO", help="destination cache hit ratios in [0, 1]")
    table_options(
        sweep,
        flags("sweep"),
        many=True,
        block_size="for --cache-hit and per-block costs (default 64, a "
        "common engine page size; perfmodel trace defaults to 512, a Mooncake hash block)",
    )
    sweep.add_argument(
        "--out",
        type=output_path,
        default=Path("perfmodel-results"),
        metavar="DIR",
        help="output folder (default %(default)s)",
    )
    sweep.add_argument("--format", choices=["csv", "parquet"], default="csv")
    sweep.set_defaults(run=cmd_sweep)
