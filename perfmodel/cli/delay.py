"""``perfmodel delay``: a ``handoff_delay_ms`` column added to a table of requests (in chunks, or on Dask)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import warn
from ..inputs.codes import choice_names
from ..inputs.table import INPUTS, flags
from ..inputs.words import count
from ._parsing import (
    UsageError,
    column_pairs,
    finite_above_zero,
    given,
    one_line_warnings,
    output_path,
    positive_int,
    reader,
    requests_source,
    table_options,
)
from .clusters import add_cluster_flags, cluster_of


def cmd_delay(args: argparse.Namespace) -> int:
    from .. import io

    columns = column_pairs(args.column)
    if "num_input_tokens" not in columns and Path(args.input).is_file():
        from ..replay.traces import format_columns

        # a trace in a format of its own (Mooncake, Azure; dataset:NAME): its prompt lengths, as perfmodel trace reads them
        prompt = format_columns(args.input).get("num_input_tokens")
        columns.update({"num_input_tokens": prompt} if prompt else {})
    if args.connect_timeout is not None and not args.scheduler:  # (a flag that applies to nothing: refused)
        raise UsageError("--connect-timeout is how long to wait for --scheduler: give --scheduler, or drop it")
    flagged: dict[str, Any] = {}
    flag: dict[str, str] = {}  # (which flag gave each input, for the message below)
    bytes_flags = (("--kv-bytes-per-token", args.kv_bytes_per_token), ("--model", args.model))
    bandwidth_flags = (("--bandwidth", args.bandwidth), ("--link", args.link), ("--cluster", cluster_of(args)))
    for name, options in (("kv_bytes_per_token", bytes_flags), ("kv_transfer_bandwidth", bandwidth_flags)):
        first = next(((option, value) for option, value in options if value is not None and value != ""), None)
        if first is not None:
            flag[name], flagged[name] = first[0], _preset(*first)
    table = given(args)
    flagged.update(table)
    flag.update({name: str(INPUTS[name].cli) for name in table})
    twice = sorted(set(flagged) & set(columns))
    if twice:  # (the flag's value replaced the column's on every row)
        name = twice[0]
        raise UsageError(f"--column {name}={columns[name]} and {flag[name]} both give {name}: give one of them")
    _say_columns_replaced(args.input, {name: flag[name] for name in flagged if name not in columns})
    keywords: dict[str, Any] = {**columns, **flagged}
    if args.scheduler or args.workers:
        from .. import dask as pm_dask

        rows = pm_dask.delay_files(
            args.input,
            args.out,
            scheduler=args.scheduler,
            workers=args.workers,
            errors=args.errors,
            chunk_rows=args.chunk_rows,
            connect_timeout_s=pm_dask.CONNECT_TIMEOUT_S if args.connect_timeout is None else args.connect_timeout,
            **keywords,
        )
    else:
        from ..ground.files import check_not_overlapping, check_output_file, record_output_file

        check_not_overlapping(args.out, [args.input])  # (the input itself: said as that)
        check_output_file(args.out, command="delay", replace=args.replace)  # before the work: a user's file stays
        rows = io.delay_file(
            args.input, args.out, chunk_rows=args.chunk_rows, errors=args.errors, progress=None, **keywords
        )
        record_output_file(args.out, command="delay")
    print(f"wrote {args.out} ({count(rows, 'row')})", file=sys.stderr)
    return 0


def _preset(flag: str, value: Any) -> Any:
    """``--link NAME`` and ``--model NAME`` as the presets they name (on the command line a flag's name is a preset,
    never a column of the file, which ``--column`` names: a file with a column of that name is no ambiguity)."""
    import perfmodel

    if flag == "--link":
        return perfmodel.get_link(value)
    return perfmodel.model_config(value) if flag == "--model" else value


def _say_columns_replaced(source: str, flags: dict[str, str]) -> None:
    """One warning line for each input a flag gives whose column of the same name the file has (read by default,
    :data:`perfmodel.frame.FRAME_COLUMNS`): the flag's value replaces that column on every row."""
    from ..frame import FRAME_COLUMNS
    from ..io import read_chunks

    if not Path(source).is_file() or not set(flags) & set(FRAME_COLUMNS):
        return
    chunks, _ = read_chunks(source, 1, output_format="csv")
    header = next(chunks, None)
    names = set(header.columns) if header is not None else set()
    with one_line_warnings("delay"):
        for name in sorted(set(flags) & set(FRAME_COLUMNS) & names):
            warn(
                f"{flags[name]} replaces the column {name} of {source} on every row (delay reads that column by "
                f"default): drop {flags[name]} to use the column"
            )


def register(sub: Any) -> None:
    """Add ``perfmodel delay`` to the subcommands ``sub``."""
    delay = sub.add_parser(
        "delay",
        help="add handoff_delay_ms to a CSV / Parquet / JSON-lines file of requests",
        description="Read requests, add a handoff_delay_ms column, write OUTPUT (format from its "
        "extension). Large files are processed in chunks.",
    )
    delay.add_argument(
        "input",
        type=requests_source,
        help="CSV, Parquet or JSON-lines file (with --workers/--scheduler: also a folder or glob), "
        "or dataset:NAME for a shipped trace; a Mooncake or Azure trace's prompt lengths are "
        "its input_length or ContextTokens column",
    )
    delay.add_argument(
        "--out",
        type=output_path,
        required=True,
        help="output file (.csv, .parquet, .jsonl), or folder with dask; an existing file that perfmodel delay "
        "did not write is refused (see --replace)",
    )
    delay.add_argument(
        "--replace",
        action="store_true",
        help="overwrite an existing --out file that perfmodel delay did not write (refused otherwise)",
    )
    per_token = delay.add_mutually_exclusive_group()
    per_token.add_argument(
        "--kv-bytes-per-token",
        type=reader("kv_bytes_per_token"),
        metavar="BYTES",
        help="KV-cache bytes per prompt token, instead of --model",
    )
    per_token.add_argument("--model", metavar="NAME", help="model preset (or a column of model names via --column)")
    bw = delay.add_mutually_exclusive_group()
    bw.add_argument(
        "--bandwidth",
        type=reader("kv_transfer_bandwidth"),
        metavar="GBPS",
        help="the link's bandwidth per direction, decimal GB/s, instead of --link",
    )
    bw.add_argument("--link", metavar="NAME", help="link preset, built-in or yours (perfmodel links lists them)")
    add_cluster_flags(delay, bw)
    delay.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="ARG=COLUMN",
        help="read an argument from a column, e.g. num_input_tokens=prompt_tokens (repeatable)",
    )
    table_options(delay, flags("delay"), many=False)
    delay.add_argument(
        "--errors",
        choices=list(choice_names("errors")),
        default=choice_names("errors")[0],
        help="invalid rows: stop (default) or leave the delay empty",
    )
    delay.add_argument(
        "--chunk-rows", type=positive_int, default=1_000_000, metavar="N", help="rows per chunk (default 1M)"
    )
    delay.add_argument(
        "--workers", type=positive_int, metavar="N", help="run on a local Dask cluster of N worker processes"
    )
    delay.add_argument("--scheduler", metavar="ADDRESS", help="run on an existing Dask cluster")
    delay.add_argument(
        "--connect-timeout",
        type=finite_above_zero,
        metavar="SECONDS",
        help="how long to wait for --scheduler before giving up (default 10)",
    )
    delay.set_defaults(run=cmd_delay)
