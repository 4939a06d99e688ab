"""``perfmodel ttft``: a request trace's time to first token under load (prefill queues, memory held, decode
admission), its summary, a grid over request rates, and the sizing questions.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from ..ground.data import given_as
from ..inputs.codes import choice_names
from ..inputs.table import INPUTS, flags
from ..inputs.words import count
from ._parsing import (
    UsageError,
    as_flags,
    finite_above_zero,
    link_name,
    output_path,
    read_trace_file,
    reader,
    table_options,
    token_count,
    trace_file,
    trace_file_options,
)
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
TRACE_COLUMNS = ("arrival_ms", "num_input_tokens", "num_output_tokens", "prefill_worker", "prefill_ms", "hash_ids")
SHOWN = (
    "requests",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "mean_ms",
    "queue_p99_ms",
    "prefill_p99_ms",
    "admission_wait_p99_ms",
    "link_wait_p99_ms",
    "transfer_p99_ms",
    "handoff_delay_p99_ms",
    "decode_step_p99_ms",
    "prefill_busy",
    "prefill_memory_peak",
    "decode_memory_peak",
    "throughput_per_s",
    "dominant_p99_stage",
)


#: ttft's memory flags and their help.
MEMORY_FLAGS = {
    "--prefill-kv-tokens": "KV tokens a prefill worker holds at most, until each handoff ends (default unbounded)",
    "--decode-kv-tokens": "KV tokens (prompt and output) a decode worker holds at most (default unbounded; needs "
    "num_output_tokens)",
}

#: The most of a count ``--fewest`` tries (each tried from 1 up; ``fewest_for_ttft``'s ``most``).
MOST = 4096
#: ``--fewest``'s counts: their unit.
UNITS = {
    "prefill_workers": "prefill workers",
    "decode_workers": "decode workers",
    "links": "links",
    "nics_per_node": "NICs per node",
}


def cmd_ttft(args: argparse.Namespace) -> int:
    from ..ground.files import output_folder
    from ..io import json_text, write_table
    from ..replay.ttft import replay_ttft, summarize_ttft
    from ..replay.ttft_grid import ttft_grid

    _check_flags(args)
    trace = _read(args)
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
    setup = _setup(args, trace, config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.budget_ms is not None:
            lines = _question(args, trace, config, setup)
        elif args.rate:
            table = ttft_grid(trace, request_rate_per_s=args.rate, **config)
        else:
            ttft = replay_ttft(trace, **config)
            summary = summarize_ttft(ttft)
    for warning in caught:  # (e.g. a closed loop ignoring arrival times) one line each, in the command's flags
        said = as_flags(str(warning.message).removeprefix("replay_ttft: "), args)
        print(f"perfmodel ttft: warning: {said}", file=sys.stderr)
    if args.budget_ms is not None:
        print("\n".join(lines))
        return 0
    if args.rate:
        _print_grid(table)
        rates = ", ".join(f"{r:g}" for r in args.rate)
        print(f"\np50_ms, p99_ms: percentiles of {setup}, at {rates} requests/s (its arrivals scaled in time)")
    else:
        _print_summary(summary, args.json)
        if not args.json:
            print(f"\np50_ms, p90_ms, p99_ms, mean_ms: percentiles of {setup}")
    if args.out is not None:
        names = _written(args)
        with output_folder(args.out, command=_command(args), names=names, inputs=[args.trace]) as stage:
            if args.rate:
                write_table(table, stage / names[0], rounded=[c for c in table.columns if c != "request_rate_per_s"])
            else:
                frame = ttft.rename_axis(ttft.index.name or "request").reset_index()
                write_table(frame, stage / names[0], rounded=[c for c in ttft.columns if c.endswith("_ms")])
                (stage / "summary.json").write_text(json_text(summary))
        print(f"\nwrote {', '.join(str(args.out / n) for n in names)}")
    return 0


def _read(args: argparse.Namespace) -> Any:
    """The trace, its malformed lines skipped (and said) with ``--skip-bad-lines``; a trace with no request, or
    with measured prefill ends (``ready_ms``, which this replay would not use: it models each prefill), refused."""
    trace = read_trace_file(args, "ttft", TRACE_COLUMNS)
    if "ready_ms" in trace:
        raise UsageError(
            f"{given_as(args.trace)} has a ready_ms column (measured prefill ends), which perfmodel ttft does not use: it "
            "models each prefill from arrival_ms (--prefill-ms, --prefill-tokens-per-s); drop the column, or replay "
            "the handoffs from the measured prefill ends with perfmodel trace"
        )
    return trace


def _command(args: argparse.Namespace) -> str:
    """The command as its output folder's manifest records it (a replay and a grid are different questions)."""
    return "ttft --rate" if args.rate else "ttft"


def _written(args: argparse.Namespace) -> list[str]:
    """The files ``--out`` receives."""
    return ["grid.csv"] if args.rate else ["ttft.csv", "summary.json"]


def _check_flags(args: argparse.Namespace) -> None:
    """The flags that cannot go together, or miss one another, refused before anything is read (and an --out
    folder that would refuse the files, before any work)."""
    from ..ground.files import check_output_folder

    if args.out is not None and args.budget_ms is not None:
        raise UsageError("--budget-ms answers a question in one line and writes no file: drop --out")
    if args.json and args.rate:
        raise UsageError(
            "--json prints one replay's summary, and --rate prints a table (--out DIR writes it): drop --json"
        )
    if args.json and args.budget_ms is not None:
        raise UsageError("--json prints one replay's summary, and --budget-ms answers in one line: drop --json")
    if args.out is not None:
        check_output_folder(args.out, command=_command(args), names=_written(args), inputs=[args.trace])
    if args.fewest:  # (the flag would be replaced by the counts tried; a cluster's field is stored as cluster_NAME)
        dest = f"cluster_{args.fewest}" if args.fewest == "nics_per_node" else args.fewest
        if getattr(args, dest, None) is not None:
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


def _setup(args: argparse.Namespace, trace: Any, config: dict[str, Any]) -> str:
    """In words, what a TTFT percentile here is of: the requests, the loop, the prefill, the decode and the
    handoffs (the flags' values, else replay_ttft's defaults; ``--fewest``'s count left to its answer)."""
    import inspect

    from ..inputs.codes import choice_code
    from ..replay.summaries import CONTENTION_WORDS
    from ..replay.ttft import replay_ttft

    defaults = {name: p.default for name, p in inspect.signature(replay_ttft).parameters.items()}
    given = {**defaults, **config}
    n = count(len(trace), "request")
    loop = (
        f"closed loop of {count(given['concurrency'], 'client')}"
        if given["concurrency"] is not None
        else "open loop at its arrival times"
    )
    prefill = _prefill_words(trace, given["prefill_ms"], given["prefill_tokens_per_s"])
    routing = given["prefill_routing"] or (
        "the trace's prefill_worker column" if "prefill_worker" in trace else "round robin"
    )
    parts = [f"per-request TTFT (arrival to first token) over {n} of {given_as(args.trace)}, {loop}"]
    if args.fewest != "prefill_workers":
        parts.append(f"{count(given['prefill_workers'], 'prefill worker')} ({prefill}, routed by {routing})")
    else:
        parts.append(f"{prefill}, routed by {routing}")
    decode = f"routing: {str(given['routing']).replace('_', ' ')}"
    if args.fewest != "decode_workers":
        parts.append(f"{count(given['decode_workers'], 'decode worker')} ({decode})")
    else:
        parts.append(f"decode {decode}")
    for name, side in (("prefill_kv_tokens", "prefill"), ("decode_kv_tokens", "decode")):
        if given[name] is not None:
            parts.append(f"{given[name]:,} KV tokens per {side} worker")
    contention = str(given["contention"])
    where = f"cluster {args.cluster}" if args.cluster is not None else None
    if where is None and contention != "none" and args.fewest != "links":
        where = count(given["links"], "link")
    words = CONTENTION_WORDS[choice_code("contention", contention)]
    parts.append(f"handoffs of {_handoff_words(args, given)}: {words}" + (f" ({where})" if where else ""))
    parts.append(f"{given['decode_step_ms']:g} ms per output token")
    return ", ".join(parts)


def _handoff_words(args: argparse.Namespace, given: dict[str, Any]) -> str:
    """What each handoff moves and over what, in words: the model (or bytes per token), its TP degrees, the link
    (or bandwidth; a cluster is said with the contention)."""
    what = args.model if args.model is not None else f"{args.kv_bytes_per_token:,g} bytes per token"
    tp, decode_tp = given.get("tp") or 1, given.get("decode_tp")
    degrees = f"TP{tp}" + (f" to TP{decode_tp}" if decode_tp not in (None, tp) else "")
    over = args.link if args.link is not None else None if args.bandwidth is None else f"{args.bandwidth:g} GB/s"
    return f"{what} at {degrees}" + (f" over {over}" if over is not None else "")


def _prefill_words(trace: Any, prefill_ms: float | None, rate: float | None) -> str:
    """Each prefill's time in words, as replay_ttft takes it: the trace's own ``prefill_ms`` first, then the flag
    given for all (``--prefill-ms`` or ``--prefill-tokens-per-s``), else none.

    >>> import pandas as pd
    >>> _prefill_words(pd.DataFrame({"prefill_ms": [5.0, None]}), None, 20_000.0)
    "prefill times from the trace's prefill_ms column, else at 20,000 tokens/s"
    """
    for_all = (
        f"at {rate:,g} tokens/s" if rate is not None else f"{prefill_ms:g} ms each" if prefill_ms is not None else None
    )
    if "prefill_ms" not in trace:
        return f"prefill {for_all}" if for_all else "no prefill time"
    if for_all and trace["prefill_ms"].isna().any():
        return f"prefill times from the trace's prefill_ms column, else {for_all}"
    return "prefill times from the trace's prefill_ms column"


def _question(args: argparse.Namespace, trace: Any, config: dict[str, Any], setup: str) -> list[str]:
    """``--budget-ms``'s lines: what its p99 is of, then the answer (the highest rate, or with ``--fewest`` the fewest
    of a count), last."""
    from ..replay.ttft_grid import fewest_for_ttft, max_rate_for_ttft

    budget = f"p99 TTFT <= {args.budget_ms:g} ms"
    if args.fewest:
        many = UNITS[args.fewest]
        answer = fewest_for_ttft(trace, args.fewest, ttft_budget_ms=args.budget_ms, most=MOST, **config)
        if args.fewest == "nics_per_node":
            tried = (
                f"the NICs per node a node of {args.cluster} takes (the divisors of its GPUs per node, then 2 to 4 per "
                "GPU; those it cannot be built with skipped)"
            )
        else:
            tried = f"1..{MOST:,} {many}"
        said = f"{answer}" if answer is not None else f"none of {tried} (even the most tried misses it)"
        searched = f"of {tried}, each tried from the fewest up: no monotonicity assumed"
        if args.fewest == "links" and str(config.get("contention", "none")) == "none":  # (one replay answers all)
            searched = f"of {tried}: each handoff alone, so any count of links gives the TTFT of one, replayed once"
            said = f"{answer}" if answer is not None else f"none of {tried} (the one replay misses it)"
        return [f"p99 TTFT: of {setup}\n", f"the fewest {many} ({searched}) with {budget}: {said}"]
    rate = max_rate_for_ttft(trace, ttft_budget_ms=args.budget_ms, **config)
    low, high = rate.tried_per_s
    searched = f"{low:,.4g}..{high:,.4g} requests/s"
    if rate.kept == "every":
        said = f"at least {high:,.4g} requests/s (every rate tried keeps it: {searched}, up to 1000x the trace's own)"
    elif rate.kept == "none":
        said = f"none of {searched} (even the lowest rate tried, 1/1000 of the trace's own, misses it)"
    else:
        said = f"{rate:,.4g} requests/s (searched {searched} by bisection, to 1%)"
    return [
        f"p99 TTFT: of {setup}, its arrivals scaled in time to each rate tried\n",
        f"highest request rate with {budget}: {said}",
    ]


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    from ..io import json_text

    if as_json:
        print(json_text(summary))
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
    tm.add_argument(
        "--kv-bytes-per-token",
        type=reader("kv_bytes_per_token"),
        metavar="BYTES",
        help="KV bytes per token, instead of --model",
    )
    tl = ttft.add_mutually_exclusive_group()
    tl.add_argument("--link", metavar="NAME", type=link_name, help="link preset (perfmodel links lists them)")
    tl.add_argument(
        "--bandwidth", type=reader("kv_transfer_bandwidth"), metavar="GBPS", help="decimal GB/s, instead of --link"
    )
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
        prefill_ms="each prefill's time in ms where the trace has no prefill_ms column of its own, which comes first "
        "(default: from --prefill-tokens-per-s, else 0)",
        prefill_tokens_per_s="a prefill worker's rate in tokens/s, instead of --prefill-ms (the trace's prefill_ms "
        "column comes first)",
    )
    ttft.add_argument(
        "--prefill-routing",
        choices=choice_names("prefill_routing"),
        help="how arrivals pick a prefill worker (default: the trace's prefill_worker column, else round_robin)",
    )
    for flag, said in MEMORY_FLAGS.items():  # (token counts as --tokens reads them: 32k, 1M)
        ttft.add_argument(flag, type=token_count, metavar="TOKENS", help=said)
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
        help="for a generic trace file: where arrival_ms, num_input_tokens, num_output_tokens, prefill_worker, "
        "prefill_ms and hash_ids are (repeatable)",
    )
    trace_file_options(ttft)
    ttft.add_argument(
        "--skip-bad-lines", action="store_true", help="skip malformed lines (reported) instead of stopping"
    )
    ttft.add_argument("--json", action="store_true", help="print the summary as JSON (not with --rate or --budget-ms)")
    ttft.add_argument("--out", type=output_path, metavar="DIR", help="write ttft.csv, summary.json (--rate: grid.csv)")
    ttft.set_defaults(run=cmd_ttft)
