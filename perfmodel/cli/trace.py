"""``perfmodel trace``: a request trace replayed through the handoff model (``--grid``: every combination).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs.table import INPUTS, flags
from ..inputs.words import count
from ._draw import save
from ._parsing import (
    UsageError,
    as_flags,
    finite_above_zero,
    given,
    link_name,
    name_value,
    output_path,
    read_trace_file,
    reader,
    table_options,
    trace_file,
    trace_file_options,
)
from .clusters import FIELD_FLAGS, add_cluster_flags, cluster_of

TRACE_COLUMNS = ("arrival_ms", "num_input_tokens", "num_output_tokens", "ready_ms", "hash_ids")
_BUDGETS_MS = (50.0, 100.0)  # (--budget-ms when --grid is given without it)


def cmd_trace(args: argparse.Namespace) -> int:

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import perfmodel.plotting as pp

    from ..ground.files import check_output_folder, output_folder
    from ..io import json_text, write_table
    from ..replay import replay_handoffs, summarize
    from ..replay.sizing import replay_percentile_question

    check_output_folder(args.out, command=_command(args), names=_written(args), inputs=[args.trace])  # before the replay
    if args.budget_ms is not None and not args.grid:  # (a flag that applies to nothing is refused, never ignored)
        raise UsageError("--budget-ms reports on the configurations of --grid: give --grid too, or drop --budget-ms")


    trace = read_trace_file(args, "trace", TRACE_COLUMNS)
    cluster = cluster_of(args)  # (a name that is no cluster: said as a cluster's, not as a link's)
    config = {"model": args.model, "kv_bytes_per_token": args.kv_bytes_per_token, "link": args.link or cluster,
              "kv_transfer_bandwidth": args.bandwidth, **given(args)}
    config = {name: value for name, value in config.items() if value is not None}  # (not given: the API's default)
    axes = _grid_axes(args.grid) if args.grid else {}
    _check_grid_and_flags(args, config, axes)
    if axes:
        return _trace_grid(args, trace, {**config, **axes}, axes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        replay = replay_handoffs(trace, **config)  # (from its ready_ms column, when it has one)
    for warning in caught:  # e.g. destination_missing on a trace without hash_ids: said once, in one line, in flags
        said = as_flags(str(warning.message).removeprefix("replay_handoffs: "), args)
        print(f"perfmodel trace: warning: {said}", file=sys.stderr)
    summary = summarize(replay)
    out: Path = args.out
    names = _written(args)
    with output_folder(out, command=_command(args), names=names, inputs=[args.trace]) as stage:
        write_table(replay.rename_axis(replay.index.name or "request").reset_index(), stage / names[0],
                    rounded=[c for c in replay.columns if c not in trace.columns])  # (results: 13 digits)
        (stage / "summary.json").write_text(json_text(summary))
        try:
            fig = pp.replay_figure(replay)
        except InputError as error:  # (e.g. every delay 0 ms: a log axis shows none; the table stands)
            print(f"perfmodel trace: warning: replay.png not drawn: {error.problem}", file=sys.stderr)
        else:
            save(fig, stage / "replay.png")
            plt.close(fig)
    width = max(map(len, summary))
    for key, value in summary.items():
        shown = f"{value:,.4g}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else value
        print(f"{key:<{width}}  {shown}")  # (text, such as the busiest resource's name, as it is)
    print("\n" + replay_percentile_question(99, replay.attrs.get("contention"), config.get("scope", "rank"),
                                             cluster="resources" in replay.attrs).replace("p99", "p50_ms, p90_ms, p99_ms: "
                                                                                          "percentiles", 1))
    if replay.attrs.get("contention") == "none":  # (the default: say what the figures leave out)
        print("\ncontention none: each handoff as if alone on its link; overlapping transfers queue or share "
              "with --contention fifo or fair")
    print(f"\nwrote {', '.join(str(out / name) for name in names if (out / name).exists())}")  # (a figure drawn)
    return 0


def _check_grid_and_flags(args: argparse.Namespace, config: dict[str, Any], axes: dict[str, list[Any]]) -> None:
    """Refuse a model or link given nowhere, and a flag whose value a --grid axis would replace (a cluster
    field's flag too: the grid's values would silently win)."""
    for one, other, flag in (("model", "kv_bytes_per_token", "--kv-bytes-per-token"),
                             ("link", "kv_transfer_bandwidth", "--bandwidth")):
        if not {one, other} & {*config, *axes} and (one != "link" or "cluster" not in axes):
            raise UsageError(f"give --{one} (or {flag}, or --grid {one}=...)")
        if {one, other} & set(config) and {one, other} & set(axes):
            raise UsageError(f"--grid {one}=... (or {other}=...) replaces --{one} and {flag}: give one of them")
    fields = {name for _, name in FIELD_FLAGS if getattr(args, f"cluster_{name}", None) is not None}
    twice = sorted((set(config) | fields) & set(axes))
    if twice:
        named = (INPUTS[twice[0]].cli if twice[0] in INPUTS else None) or f"--{twice[0].replace('_', '-')}"
        raise UsageError(f"--grid {twice[0]}=... and its flag {named} are both given: give its values in --grid only")


def _command(args: argparse.Namespace) -> str:
    """The command as its output folder's manifest records it."""
    return "trace --grid" if args.grid else "trace"


def _written(args: argparse.Namespace) -> list[str]:
    """The files ``--out`` receives."""
    return [f"grid.{args.format}", "grid.png"] if args.grid else [f"replay.{args.format}", "summary.json", "replay.png"]


def _grid_axes(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``--grid AXIS=V1,V2`` options as replay_grid axes."""
    from ..replay import GRID_AXES

    axes: dict[str, list[Any]] = {}
    for spec in specs:
        name, text = name_value("--grid", spec, GRID_AXES, "decode_workers=4,8,16")
        values: list[Any] = []
        for part in (p.strip() for p in text.split(",") if p.strip()):
            unbounded = name == "decode_cache_blocks" and part.lower() in ("none", "unbounded")
            try:
                values.append(None if unbounded else reader(name, f"--grid {name}")(part))
            except argparse.ArgumentTypeError as error:  # (a flag's reader: argparse would say it in one line)
                said = str(error).removeprefix(f"--grid {name}: ")  # (a reader given the axis names it already)
                raise UsageError(f"--grid {name}: {said}") from None
        if name in axes:
            raise UsageError(f"--grid: axis {name} is given twice; give its values once, e.g. {name}=A,B")
        axes[name] = values
    if not any(len(values) > 1 for values in axes.values()):
        raise UsageError("--grid: no axis has more than one value, so there is nothing to compare; give an axis "
                         "two values or more (e.g. --grid decode_workers=4,8), or replay without --grid")
    return axes


def _trace_grid(args: argparse.Namespace, trace: Any, config: dict[str, Any], axes: dict[str, list[Any]]) -> int:
    """``perfmodel trace --grid``: replay every configuration (``config``: the flags' values and the grid's
    ``axes``), write the table and figure, report the budgets."""
    import matplotlib.pyplot as plt
    import pandas as pd

    import perfmodel.plotting as pp

    from ..ground.files import output_folder
    from ..io import write_table
    from ..replay import replay_grid

    try:
        grid: pd.DataFrame = replay_grid(trace, progress=None, **config)  # (keep="summary": one table)
    except InputError as error:  # a value of an axis: said as the --grid axis it came from, not as its flag
        said = [name for name in axes if error.where == name or error.problem.startswith(f"axis {name} ")]
        if said:  # (an axis' own refusal, a repeated value, is the grid's: named by its axis too)
            error.where = f"--grid {said[0]}"
        raise
    out: Path = args.out
    names = _written(args)
    with output_folder(out, command=_command(args), names=names, inputs=[args.trace]) as stage:
        write_table(grid, stage / names[0], rounded=[c for c in grid.columns if c not in axes])
        fig = pp.replay_grid_figure(grid, budget_ms=min(args.budget_ms or _BUDGETS_MS))
        save(fig, stage / "grid.png")
        plt.close(fig)
    load = "busiest_utilisation" if "busiest_utilisation" in grid else "link_utilisation"  # (a cluster has no links)
    shown = [*axes, "p50_ms", "p99_ms", "mean_queue_ms", load, "zero_delay_share"]
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(f"{count(len(grid), 'configuration')} replayed on {count(len(trace), 'request')}:")
        print(grid[shown].to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
        question = _grid_question(grid, config, axes)
        print(f"\np99_ms: {question}")
        counts = [name for name in ("links", "nics_per_node") if len(axes.get(name, ())) > 1]
        for budget in sorted(args.budget_ms or _BUDGETS_MS):
            meeting = smallest_first(grid[grid["p99_ms"] <= budget], axes)
            print(f"\np99 within {budget:g} ms: {len(meeting)} of {count(len(grid), 'configuration')}"
                  + (", the smallest first (numbers ascending, names in the order given):" if len(meeting) else ""))
            if len(meeting):
                print(meeting[shown].head(5).to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
            if len(meeting) > 5:  # (the rest in the grid's table)
                print(f"(the first 5 shown; all {len(meeting)} in {out / names[0]})")
            if len(counts) == 1 and all(len(v) == 1 for k, v in axes.items() if k != counts[0]):
                print(_fewest(grid, counts[0], budget, question))
    print(f"\nwrote {out / names[0]} and {out / names[1]}")
    return 0


def _grid_question(grid: Any, config: dict[str, Any], axes: dict[str, list[Any]]) -> str:
    """What the grid's ``p99_ms`` is the p99 of, in words (contention and scope: the flags', or each row's)."""
    from ..replay.sizing import replay_percentile_question

    def one(name: str, default: str) -> str | None:  # (None: each row's own; an axis of one value is that value)
        if name in axes:
            return str(axes[name][0]) if len(axes[name]) == 1 else None
        return str(config.get(name, default))

    contention, scope = one("contention", "none"), one("scope", "rank")
    return replay_percentile_question(99, contention, scope, cluster="busiest_utilisation" in grid)


def _fewest(grid: Any, axis: str, budget: float, question: str) -> str:
    """The grid's one count axis (``links`` or ``nics_per_node``) read off, beside the question it answers: the
    fewest whose p99 meets ``budget`` (:func:`perfmodel.replay.sizing.fewest_meeting`, as :func:`perfmodel.required_nics`
    decides it)."""
    from ..replay.sizing import counted, fewest_meeting

    tried = [int(c) for c in grid[axis]]
    count = fewest_meeting(tried, grid["p99_ms"].tolist(), budget)
    unit, over = ("NICs per node", "with N NICs per node") if axis == "nics_per_node" else ("links", "over N links")
    spec = f"{axis}={','.join(map(str, tried))}"
    if not math.isfinite(count):  # none meets it: said so, with the best that was found
        best = int(grid["p99_ms"].to_numpy().argmin())
        return (f"{question}, {over}: no count of {spec} meets {budget:g} ms "
                f"(the best p99: {grid['p99_ms'].iloc[best]:,.4g} ms at {axis}={tried[best]})")
    return f"{question}, {over}, within {budget:g} ms: {counted(count, unit)} (the fewest of {spec})"


def smallest_first(rows: Any, axes: dict[str, list[Any]]) -> Any:
    """The grid's ``rows`` ordered by their configuration: axis by axis in the order given, numbers
    ascending and names (links, models) in the order the axis lists them; never by a result.

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"decode_workers": [8, 8, 4, 4], "link": ["ib-ndr", "8x ib-ndr"] * 2,
    ...                      "p99_ms": [40.0, 5.0, 45.0, 6.0]})
    >>> smallest_first(rows, {"decode_workers": [8, 4], "link": ["ib-ndr", "8x ib-ndr"]}).values.tolist()
    [[4, 'ib-ndr', 45.0], [4, '8x ib-ndr', 6.0], [8, 'ib-ndr', 40.0], [8, '8x ib-ndr', 5.0]]
    """
    import pandas as pd

    keys = {}
    for name, values in axes.items():
        column = rows[name]
        if pd.api.types.is_numeric_dtype(column):
            keys[name] = column.to_numpy()
        else:
            position = {str(v): k for k, v in enumerate(values)}
            keys[name] = column.astype(str).map(position).to_numpy()
    order = pd.DataFrame(keys, index=rows.index).sort_values(list(keys), kind="stable").index
    return rows.loc[order]


def register(sub: Any) -> None:
    """Add ``perfmodel trace`` to the subcommands ``sub``."""
    trace = sub.add_parser("trace", help="replay a request trace: per-request handoffs, prefix cache, contention",
                           description="Replay a request trace (Mooncake JSON lines, the Azure CSV, or any CSV, "
                                       "Parquet or JSON-lines table of requests) through the handoff model.")
    trace.add_argument("trace", type=trace_file, help="trace file (.jsonl Mooncake or generic, .csv Azure or "
                       "generic, .parquet), or "
                       "dataset:NAME for a shipped trace (dataset:mooncake-synthetic, dataset:azure-code-2023)")
    tm = trace.add_mutually_exclusive_group()
    tm.add_argument("--model", metavar="NAME", help="model preset (or --grid model=...)")
    tm.add_argument("--kv-bytes-per-token", type=reader("kv_bytes_per_token"), metavar="BYTES",
                    help="KV-cache bytes per prompt token, instead of --model")
    tl = trace.add_mutually_exclusive_group()
    tl.add_argument("--link", metavar="NAME", type=link_name, help="link preset, built-in or yours (perfmodel links lists them; "
                    "or --grid link=...)")
    tl.add_argument("--bandwidth", type=reader("kv_transfer_bandwidth"), metavar="GBPS",
                    help="the link's bandwidth per direction, decimal GB/s, instead of --link")
    add_cluster_flags(trace, tl, help="cluster preset: every handoff's flows share its NICs, switches and NVLink "
                      "max-min fairly (with --contention fair; --grid nics_per_node=4,8 varies its fields)")
    trace.add_argument("--grid", action="extend", nargs="+", default=[], metavar="AXIS=V1,V2,...",
                       help="replay every combination: e.g. --grid decode_workers=4,8,16 link=ib-ndr,nvlink4 "
                            "(several axes, or the flag repeated; axes: the options above by their API names, see perfmodel.replay_grid)")
    trace.add_argument("--budget-ms", type=finite_above_zero, nargs="+", metavar="MS",
                       help="with --grid: report the configurations whose p99 handoff delay meets each budget "
                            f"(default {' '.join(f'{b:g}' for b in _BUDGETS_MS)})")
    table_options(trace, flags("trace"), many=False, block_size="KV block (page) size (default 512: the Mooncake "
                   "trace's hash block, so a cached prefix is whole blocks; perfmodel sweep defaults to 64)")
    trace.add_argument("--skip-bad-lines", action="store_true", help="skip malformed lines (reported) instead of stopping")
    trace.add_argument("--column", action="append", default=[], metavar="NAME=COLUMN",
                       help="for a generic CSV/Parquet/JSON-lines trace: where arrival_ms, num_input_tokens, num_output_tokens, "
                            "hash_ids and ready_ms (prefill completion, ms or datetime) are (repeatable)")
    trace_file_options(trace)
    trace.add_argument("--out", type=output_path, required=True, metavar="DIR")
    trace.add_argument("--format", choices=["csv", "parquet"], default="csv")
    trace.set_defaults(run=cmd_trace)
