"""``perfmodel ttft``: a request trace's time to first token under load (prefill queues, memory held, decode
admission), its summary, a grid over request rates, and the sizing questions.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from ..inputs.codes import choice_names
from ..inputs.table import INPUTS, flags
from ..inputs.words import count
from ._parsing import UsageError, column_pairs, finite_above_zero, link_name, table_options, trace_file
from .clusters import add_cluster_flags, cluster_of

#: The handoff's flags: ``perfmodel trace``'s (the input table's) but layer-wise streaming's, which the TTFT replay
#: refuses (``num_layers`` aside: it counts messages too); ``prefill_ms`` and ``prefill_tokens_per_s`` are the
#: serving's service times here.
HANDOFF_FLAGS = tuple(
    name
    for name in flags("trace")
    if name in ("prefill_ms", "prefill_tokens_per_s", "num_layers")
    or (INPUTS[name].group != "layerwise" and name != "overlap")
)
SERVING_FLAGS = ("prefill_routing", "prefill_kv_tokens", "decode_kv_tokens", "decode_step_ms", "concurrency")
TRACE_COLUMNS = ("arrival_ms", "num_input_tokens", "num_output_tokens", "hash_ids")
SHOWN = (
    "requests",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "mean_ms",
    "queue_p99_ms",
    "prefill_p99_ms",
    "admission_wait_p99_ms",
    "handoff_delay_p99_ms",
    "prefill_busy",
    "prefill_memory_peak",
    "decode_memory_peak",
    "throughput_per_s",
    "dominant_p99_stage",
)


def cmd_ttft(args: argparse.Namespace) -> int:
    from ..ground.files import output_folder
    from ..io import write_table
    from ..replay.traces import read_trace
    from ..replay.ttft import replay_ttft, summarize_ttft
    from ..replay.ttft_grid import fewest_for_ttft, max_rate_for_ttft, ttft_grid

    _check_flags(args)
    trace = read_trace(args.trace, columns=column_pairs(args.column, TRACE_COLUMNS) or None)
    config = {
        name: getattr(args, name) for name in (*HANDOFF_FLAGS, *SERVING_FLAGS) if getattr(args, name, None) is not None
    }
    cluster = cluster_of(args)  # (a name that is no cluster: said as a cluster's; fields without one refused)
    config |= {
        name: value
        for name, value in (
            ("model", args.model),
            ("kv_bytes_per_token", args.kv_bytes_per_token),
            ("link", args.link or cluster),
            ("kv_transfer_bandwidth", args.bandwidth),
        )
        if value is not None
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.budget_ms is not None:
            return _question(args, trace, config, fewest_for_ttft, max_rate_for_ttft)
        if args.rate:
            table = ttft_grid(trace, request_rate_per_s=args.rate, **config)
            _print_grid(table)
            name = "grid.csv"
        else:
            ttft = replay_ttft(trace, **config)
            summary = summarize_ttft(ttft)
            _print_summary(summary, args.json)
            name = "ttft.csv"
    for warning in caught:  # (e.g. a closed loop ignoring arrival times) one line each
        print(f"perfmodel ttft: warning: {str(warning.message).removeprefix('replay_ttft: ')}", file=sys.stderr)
    if args.out is not None:
        names = _written(args)
        with output_folder(args.out, command="ttft", names=names, inputs=[args.trace]) as stage:
            if args.rate:
                write_table(table, stage / name, rounded=[c for c in table.columns if c != "request_rate_per_s"])
            else:
                frame = ttft.rename_axis(ttft.index.name or "request").reset_index()
                write_table(frame, stage / name, rounded=[c for c in ttft.columns if c.endswith("_ms")])
                (stage / "summary.json").write_text(json.dumps(summary, indent=1))
        print(f"\nwrote {', '.join(str(args.out / n) for n in names)}")
    return 0


def _written(args: argparse.Namespace) -> list[str]:
    """The files ``--out`` receives."""
    return ["grid.csv"] if args.rate else ["ttft.csv", "summary.json"]


def _check_flags(args: argparse.Namespace) -> None:
    """The flags that cannot go together, or miss one another, refused before anything is read (and an --out
    folder that would refuse the files, before any work)."""
    from ..ground.files import check_output_folder

    if args.out is not None and args.budget_ms is not None:
        raise UsageError("--budget-ms answers a question in one line and writes no file: drop --out")
    if args.out is not None:
        check_output_folder(args.out, command="ttft", names=_written(args), inputs=[args.trace])
    if args.fewest and getattr(args, args.fewest, None) is not None:  # (it would be replaced by the counts tried)
        flag = "--" + args.fewest.replace("_", "-")
        raise UsageError(f"{flag} is what --fewest {args.fewest} searches: drop {flag}")
    if args.fewest and args.budget_ms is None:
        raise UsageError("--fewest needs --budget-ms (the p99 TTFT to keep, ms)")
    if args.rate and args.budget_ms is not None:
        raise UsageError("--rate draws a grid and --budget-ms asks a question: give one of them")
    if args.model is None and args.kv_bytes_per_token is None:
        raise UsageError("give --model (or --kv-bytes-per-token)")
    if args.link is None and args.bandwidth is None and args.cluster is None:
        raise UsageError("give --link (or --bandwidth, or --cluster)")
    if args.fewest == "nics_per_node" and args.cluster is None:
        raise UsageError("--fewest nics_per_node counts a cluster's NICs: give --cluster")


def _question(args: argparse.Namespace, trace: Any, config: dict[str, Any], fewest: Any, max_rate: Any) -> int:
    if args.fewest:
        answer = fewest(trace, args.fewest, ttft_budget_ms=args.budget_ms, **config)
        what = args.fewest.replace("_", " ")
        print(
            f"the fewest {what} with p99 TTFT <= {args.budget_ms:g} ms: "
            + (
                f"{answer}"
                if answer is not None
                else "none (even the most tried, 4,096 or a node's most NICs, misses it)"
            )
        )
    else:
        rate = max_rate(trace, ttft_budget_ms=args.budget_ms, **config)
        print(
            f"highest request rate with p99 TTFT <= {args.budget_ms:g} ms: {rate:,.4g} requests/s "
            f"(the trace's arrivals scaled in time; {count(len(trace), 'request')})"
        )
    return 0


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=1))
        return
    width = max(map(len, SHOWN))
    for key in SHOWN:
        value = summary[key]
        shown = f"{value:,.4g}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else value
        print(f"{key:<{width}}  {shown}")


def _print_grid(grid: Any) -> None:
    import pandas as pd

    columns = [
        "request_rate_per_s",
        "p50_ms",
        "p99_ms",
        "queue_p99_ms",
        "handoff_delay_p99_ms",
        "prefill_busy",
        "dominant_p99_stage",
    ]
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(grid[columns].to_string(index=False, float_format=lambda v: f"{v:,.4g}"))


def register(sub: Any) -> None:
    """Add ``perfmodel ttft`` to the subcommands ``sub``."""
    ttft = sub.add_parser(
        "ttft",
        help="a trace's time to first token under load: queues, memory, admission",
        description="Replay a request trace's time to first token: prefill workers queueing, KV "
        "memory held during the handoff, decode admission (perfmodel.replay_ttft).",
    )
    ttft.add_argument("trace", type=trace_file, help="trace file (as perfmodel trace reads it), or dataset:NAME")
    tm = ttft.add_mutually_exclusive_group()
    tm.add_argument("--model", metavar="NAME", help="model preset")
    tm.add_argument("--kv-bytes-per-token", type=float, metavar="BYTES", help="KV bytes per token, instead of --model")
    tl = ttft.add_mutually_exclusive_group()
    tl.add_argument("--link", metavar="NAME", type=link_name, help="link preset (perfmodel links lists them)")
    tl.add_argument("--bandwidth", type=float, metavar="GBPS", help="decimal GB/s, instead of --link")
    add_cluster_flags(
        ttft,
        tl,
        help="cluster preset: every handoff's flows cross its NICs, switches and NVLink (--contention fair shares them "
        "max-min; perfmodel clusters lists them)",
    )
    table_options(
        ttft,
        HANDOFF_FLAGS,
        many=False,
        prefill_workers="prefill workers, each serving one prefill at a time (default 1)",
        prefill_ms="each prefill's time in ms (default: from --prefill-tokens-per-s, else 0)",
        prefill_tokens_per_s="a prefill worker's rate in tokens/s, instead of --prefill-ms",
    )
    ttft.add_argument(
        "--prefill-routing",
        choices=choice_names("prefill_routing"),
        help="how arrivals pick a prefill worker (default: the trace's prefill_worker column, else round_robin)",
    )
    ttft.add_argument(
        "--prefill-kv-tokens",
        type=int,
        metavar="TOKENS",
        help="KV tokens a prefill worker holds at most, until each handoff ends (default unbounded)",
    )
    ttft.add_argument(
        "--decode-kv-tokens",
        type=int,
        metavar="TOKENS",
        help="KV tokens (prompt and output) a decode worker holds at most (default unbounded; needs num_output_tokens)",
    )
    ttft.add_argument("--decode-step-ms", type=float, metavar="MS", help="ms per generated token (default 0)")
    ttft.add_argument("--concurrency", type=int, metavar="N", help="closed loop: N clients (arrival times ignored)")
    ttft.add_argument(
        "--rate",
        type=finite_above_zero,
        nargs="+",
        metavar="PER_S",
        help="replay at each request rate (the trace's arrivals scaled in time): the knee",
    )
    ttft.add_argument(
        "--budget-ms",
        type=finite_above_zero,
        metavar="MS",
        help="answer: the highest request rate whose p99 TTFT stays within MS",
    )
    ttft.add_argument(
        "--fewest",
        choices=["prefill_workers", "decode_workers", "links", "nics_per_node"],  # (ttft_grid.COUNTS, unimported)
        help="with --budget-ms: the fewest of these that keep the p99 TTFT within it",
    )
    ttft.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=COLUMN",
        help="for a generic trace file: where arrival_ms, num_input_tokens, num_output_tokens are",
    )
    ttft.add_argument("--json", action="store_true", help="print the summary as JSON")
    ttft.add_argument("--out", type=Path, metavar="DIR", help="write ttft.csv and summary.json (grid.csv for --rate)")
    ttft.set_defaults(run=cmd_ttft)
