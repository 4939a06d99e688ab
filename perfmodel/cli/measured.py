"""``perfmodel measured``: engines' own files read (Prometheus scrapes, benchmark results), and the model beside them."""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Any

from ..inputs.words import count
from ._parsing import UsageError, link_or_gb_s, one_line_warnings, table_options

#: The model's inputs the comparison takes as flags (from the input table).
MEASURED_FLAGS = ("kv_cache_dtype", "tp", "decode_tp", "scope")


def cmd_measured(args: argparse.Namespace) -> int:
    with one_line_warnings("measured"):
        return _measured(args)


def _measured(args: argparse.Namespace) -> int:
    from ..engines import compare_measured, detect, measured_fits, read_benchmark, read_engine_metrics

    if (args.model is None) != (args.link is None):
        raise UsageError("the model beside the measurements needs --model and --link (give both, or neither)")
    seen: dict[str, str] = {}
    for path in args.files:  # (one file twice would count its means and its requests twice)
        key = os.path.realpath(path)
        if key in seen:
            also = "" if seen[key] == str(path) else f" (also as {seen[key]})"
            raise UsageError(f"{path} is given twice{also}: give each file once")
        seen[key] = str(path)
    kinds = [detect(path) for path in args.files]
    if args.benchmark_run is not None and "benchmark" not in kinds:
        raise UsageError("--run selects a run of a benchmark file, and no FILE given is one")
    scrapes, benchmarks = [], []
    for path, kind in zip(args.files, kinds):
        if kind == "benchmark":
            benchmarks.append(read_benchmark(path, run=args.benchmark_run))
        else:
            scrapes.append(read_engine_metrics(path))
    if args.model is not None and len(benchmarks) > 1:
        raise UsageError("the model takes its prompts from one benchmark file; give one with --model")
    table = None
    if args.model is not None:  # (before anything is printed: a bad model or link is the one line said)
        options = {name: getattr(args, name) for name in MEASURED_FLAGS if getattr(args, name) is not None}
        table = compare_measured(
            benchmarks[0] if benchmarks else None, scrapes, model=args.model, link=args.link, **options
        )
    for i, trace in enumerate(benchmarks):
        print(("\n" if i else "") + _benchmark_text(trace))
    for i, frame in enumerate(scrapes):
        print(("\n" if i or benchmarks else "") + _scrape_text(frame))
    if table is not None:
        print(
            f"\nthe model ({args.model} over {args.link}) beside the measurements, ms "
            "(bucket-bounded: the value interpolated in its bucket, as histogram_quantile does, [bucket]):"
        )
        print(_compare_text(table))
    fits = measured_fits(scrapes, benchmarks[0] if benchmarks else None)
    print()
    for note in fits.notes:
        print(note)
    if table is None:
        print("\n(--model NAME --link NAME: the model's handoff delay over the benchmark's prompts, beside these)")
    return 0


def _shown(value: float) -> str:
    if math.isnan(value):
        return "-"
    return ("-inf" if value < 0 else "inf") if math.isinf(value) else f"{value:,.4g}"


def _quantile(row: Any, q: int, suffix: str = "") -> str:
    value, low, high = (row[f"p{q}{end}{suffix}"] for end in ("", "_low", "_high"))
    if low == high or math.isnan(value):
        return _shown(value)
    return f"{_shown(value)} [{_shown(low)}, {_shown(high)}]"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [header, *rows]]
    return "\n".join(lines)


#: One ``k="v"`` of a series' labels as read_engine_metrics writes them (the value escaped as Prometheus writes it:
#: a comma or an escaped quote inside it is part of it).
_LABEL = re.compile(r'[^=,"]+="(?:[^"\\]|\\.)*"')


def _common_labels(labels: list[str], every: bool = False) -> tuple[set[str], str]:
    """The ``k="v"`` labels every labelled metric shares (with ``every``: every series, an unlabelled one
    included), said once, and them as text."""
    sets = [set(_LABEL.findall(text)) for text in labels if text or every]
    common = set.intersection(*sets) if sets else set()
    return common, ",".join(sorted(common))


def _own(labels: str, common: set[str]) -> str:
    return ",".join(part for part in _LABEL.findall(labels) if part not in common)


def _scrape_text(frame: Any) -> str:
    """A scrape as a table: each metric as the engine names it, its stage and own labels, its figures."""
    common, said = _common_labels(frame["labels"].tolist(), every=True)
    rows = []
    for _, row in frame.iterrows():
        figures = (
            [_shown(row["count"]), _shown(row["mean"]), *(_quantile(row, q) for q in (50, 90, 99))]
            if row["type"] in ("histogram", "gaugehistogram", "summary")
            else [_shown(row["value"]), "", "", "", ""]
        )
        rows.append([row["metric"], row["stage"], _own(row["labels"], common), row["type"], *figures])
    lines = [
        (
            f"{frame.attrs.get('source', '')}: Prometheus scrape, {len(frame)} series"
            + (f" (every one labelled {said})" if said else "")
        ),
        (
            "histogram quantiles are bucket-bounded: the value interpolated linearly in its bucket, as Prometheus's "
            "histogram_quantile does, then [the bucket's bounds]; in the metric's own unit"
        ),
        _table(["metric", "stage", "labels", "type", "count/value", "mean", "p50", "p90", "p99"], rows),
    ]
    unknown = sorted(set(frame.loc[frame["window"] == "", "metric"]))
    if unknown:
        lines.append(f"not interpreted by perfmodel (kept above, as read): {', '.join(unknown)}")
    return "\n".join(lines)


def _benchmark_text(trace: Any) -> str:
    import numpy as np

    done = trace[trace["completed"]]
    a = trace.attrs
    tokens = done["num_input_tokens"].to_numpy()
    ttft = done["ttft_ms"].to_numpy()
    lines = [
        (
            f"{a['source']}: {a['tool']} result, {count(len(trace), 'request')} ({len(done)} completed) in "
            f"{a['duration_s']:g} s"
        ),
        f"arrivals: {a['arrivals']}",
        "as a trace (perfmodel.engines.read_benchmark): columns " + ", ".join(trace.columns),
    ]
    if len(done):
        lines.append(
            f"input tokens: mean {tokens.mean():,.0f}, p50 {np.percentile(tokens, 50):,.0f}, "
            f"max {tokens.max():,}; TTFT ms (exact over the completed requests): mean {ttft.mean():,.4g}, "
            + ", ".join(f"p{q} {np.percentile(ttft, q):,.4g}" for q in (50, 90, 99))
        )
    return "\n".join(lines)


def _compare_text(table: Any) -> str:
    common, _ = _common_labels(table["labels"].tolist())
    rows = [
        [
            row["what"],
            _own(row["labels"], common),
            _shown(row["count"]),
            _shown(row["mean_ms"]),
            *(_quantile(row, q, "_ms") for q in (50, 90, 99)),
        ]
        for _, row in table.iterrows()
    ]
    windows = [f"  {row['what']}: {row['window']}" for _, row in table.drop_duplicates("what").iterrows()]
    return "\n".join(
        [
            _table(["what", "labels", "count", "mean", "p50", "p90", "p99"], rows),
            "windows (what each row covers):",
            *windows,
        ]
    )


def register(sub: Any) -> None:
    """Add ``perfmodel measured`` to the subcommands ``sub``."""
    from ..engines import FORMATS

    measured = sub.add_parser(
        "measured",
        help="read engines' files (Prometheus scrapes, benchmark results); the model beside them",
        description=f"Read what an engine measured: {FORMATS}. Print each metric or stage as the engine names it "
        "(histograms: count, mean, bucket-bounded p50/p90/p99), a benchmark's requests as a trace "
        "(input and output lengths, TTFT, rate or concurrency); with --model and --link, the model's "
        "handoff delay over the benchmark's prompts beside the measured transfer stage and TTFT, and "
        "what the files can fit. Files are only read.",
    )
    measured.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="a Prometheus text exposition (curl host:port/metrics > FILE; SGLang's prefill or "
        "decode side, vLLM's), a vllm bench serve --save-result --save-detailed JSON, or a "
        "SGLang bench_serving --output-details JSONL",
    )
    measured.add_argument(
        "--run",
        type=int,
        metavar="N",
        dest="benchmark_run",
        help="which run of a benchmark file holding several (0 the first, -1 the last)",
    )
    measured.add_argument("--model", help="model preset (or config.json) whose handoff is put beside the measurements")
    measured.add_argument(
        "--link", type=link_or_gb_s, help="link or cluster preset (or decimal GB/s) the handoff runs on"
    )
    table_options(measured, MEASURED_FLAGS, many=False)
    measured.set_defaults(run=cmd_measured)
