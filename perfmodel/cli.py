"""The ``perfmodel`` command.

    perfmodel sweep --out results          the main job: a what-if over models x links x prompt lengths
    perfmodel delay requests.csv --out delays.parquet --model llama-3.1-70b --link ib-ndr
    perfmodel trace trace.jsonl --model llama-3.1-70b --link ib-ndr --out replay
    perfmodel models | perfmodel links     the presets

Heavy modules (numba, matplotlib, pyarrow) are imported inside the commands, so
``perfmodel --help`` answers at once. Bad input ends with one line on stderr and exit
code 2 (``--debug`` shows the traceback); outputs are written to a temporary file beside
the target and renamed into place only when complete.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import math
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ._inputs import INPUTS, ROW_INPUTS

DEFAULT_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "deepseek-v3"]
DEFAULT_TOKENS = "128:131072:x2"
TRACE_COLUMNS = ("arrival_ms", "num_input_tokens", "num_output_tokens", "ready_ms", "hash_ids")


class UsageError(argparse.ArgumentTypeError):
    """Bad input from the command line: reported in one line, exit code 2 (by argparse, when a flag's
    value cannot be read)."""


# --- parsing helpers ----------------------------------------------------------------------

def _count(text: str) -> int:
    """'32k' -> 32768 (tokens are counted in binary k), '1M' -> 1048576, '4096' -> 4096."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not match:
        raise UsageError(f"{text!r} is not a token count (examples: 4096, 32k, 1M)")
    value = float(match.group(1)) * {"": 1, "k": 1024, "m": 1024**2}[match.group(2).lower()]
    if value != int(value):
        raise UsageError(f"{text!r} is not a whole number of tokens")
    return int(value)


def parse_tokens(spec: str) -> list[int]:
    """Token counts from a list ('1k,8k,32k') or a range 'START:STOP[:STEP]' (STOP included).

    STEP is a count ('1k') for an arithmetic range or 'xF' for a geometric one; the
    default step is x2 (powers of two from START).

    >>> parse_tokens("1k,8k,32k")
    [1024, 8192, 32768]
    >>> parse_tokens("128:1k")
    [128, 256, 512, 1024]
    >>> parse_tokens("1000:4000:1000")
    [1000, 2000, 3000, 4000]
    """
    if ":" not in spec:
        return _lengths(spec, {_count(part) for part in spec.split(",") if part.strip()}) or \
            _fail(f"empty token list {spec!r}")
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"token range {spec!r} is not START:STOP[:STEP]")
    start, stop = _count(parts[0]), _count(parts[1])
    step = parts[2].strip().lower() if len(parts) == 3 else "x2"
    if stop < start:
        raise UsageError(f"token range {spec!r} ends before it starts")
    values = []
    if step.startswith("x"):
        try:
            factor = float(step[1:])
        except ValueError:
            raise UsageError(f"token range step {step!r} is not xFACTOR (e.g. x2)") from None
        if not factor > 1 or start == 0:
            raise UsageError(f"geometric token range {spec!r} needs a factor > 1 and START > 0")
        _check_range_size(spec, math.log(stop / start) / math.log(factor) + 1 if stop > start else 1)
        value = float(start)
        while value <= stop * (1 + 1e-12):
            values.append(int(round(value)))
            value *= factor
    else:
        increment = _count(step)
        if increment <= 0:
            raise UsageError(f"token range step {step!r} must be > 0")
        _check_range_size(spec, (stop - start) // increment + 1)
        values = list(range(start, stop + 1, increment))
    return _lengths(spec, values)


def _lengths(spec: str, values: Any) -> list[int]:
    """The prompt lengths, sorted, without repeats; a 0 is refused."""
    if 0 in values:
        raise UsageError(f"--tokens {spec!r} includes 0: a prompt length is at least 1 token (a 0-token prompt "
                         "hands nothing off, and the figures' log axes cannot show it)")
    return sorted(set(values))


#: The most prompt lengths one --tokens option may ask for (counted before anything is built).
MAX_TOKEN_VALUES = 1_000_000


def _check_range_size(spec: str, count: float) -> None:
    if count > MAX_TOKEN_VALUES:
        raise UsageError(f"token range {spec!r} has {count:,.0f} values, more than {MAX_TOKEN_VALUES:,}; "
                         "use a coarser step (e.g. 1k:128k:1k or a geometric step such as x1.1)")


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def _data_file(text: str) -> Path:
    """argparse type: a file, or ``dataset:NAME`` for a dataset shipped with perfmodel."""
    if not text.startswith("dataset:"):
        return Path(text)
    from . import datasets

    try:
        return datasets.path(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _fail(message: str) -> Any:
    raise UsageError(message)


def _floats(name: str, texts: Sequence[str], *, low: float = 0.0, high: float = float("inf"),
            positive: bool = False) -> list[float]:
    """Numbers from comma-separated texts, within [low, high] (> 0 with ``positive``); errors begin with ``name``."""
    values = []
    name = f"{name}: " if name else ""
    for text in texts:
        for part in str(text).split(","):
            try:
                value = float(part)
            except ValueError:
                raise UsageError(f"{name}{part!r} is not a number") from None
            if not low <= value <= high or (positive and not value > 0):
                raise UsageError(f"{name}{value:g} is " + ("not > 0" if positive and low <= value <= high else
                                                              f"outside [{low:g}, {high:g}]"))
            values.append(value)
    return values


#: The model's per-row inputs (the input table's), each of which ``--column NAME=COLUMN`` may read from the file.
COLUMN_ARGUMENTS = tuple(e.name for e in ROW_INPUTS)


def _columns(pairs: Sequence[str], allowed: Sequence[str] = COLUMN_ARGUMENTS) -> dict[str, str]:
    """``NAME=COLUMN`` options as a mapping; a NAME outside ``allowed`` is an error with the closest one."""
    return dict(_name_value("--column", pair, allowed, f"{allowed[0]}=my_column") for pair in pairs)


def _name_value(option: str, spec: str, allowed: Sequence[str], example: str) -> tuple[str, str]:
    """``NAME=VALUE`` of one option; a NAME outside ``allowed`` is an error naming the closest one."""
    import difflib

    name, sep, value = (part.strip() for part in spec.partition("="))
    if not sep or not name or not value:
        raise UsageError(f"{option} {spec!r} is not NAME=VALUE (e.g. {example})")
    if name not in allowed:
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise UsageError(f"{option} {spec!r}: {name!r} is not one of the names; {hint}names: {', '.join(allowed)}")
    return name, value


# --- subcommands ---------------------------------------------------------------------------

def cmd_sweep(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import perfmodel

    tokens = parse_tokens(args.tokens)
    axes: dict[str, Any] = {"num_input_tokens": tokens}
    if args.kv_bytes_per_token is not None:
        axes["kv_bytes_per_token"] = args.kv_bytes_per_token
    else:
        axes["model"] = args.model or DEFAULT_MODELS
    if args.bandwidth:
        axes["kv_transfer_bandwidth"] = _floats("--bandwidth", args.bandwidth, positive=True)  # (log axes)
    else:
        axes["link"] = args.link or list(perfmodel.LINKS)
    if args.cache_hit:
        axes["cache_hit_ratio"] = _floats("--cache-hit", args.cache_hit, high=1.0)
    axes.update(_given(args))
    for name in ("kv_cache_dtype", "tp", "decode_tp", "scope"):
        if name in axes and "model" not in axes:
            raise UsageError(f"{INPUTS[name].cli} applies to models (--model), not to --kv-bytes-per-token")
    links = [perfmodel.get_link(name) for name in axes.get("link", [])]
    if (args.cache_hit or "per_block_ms" in axes or "per_message_ms" in axes
            or any(link.per_block_ms or link.per_message_ms for link in links)):
        axes.setdefault("block_size", [64])

    from ._fs import output_folder

    out: Path = args.out
    table_name = f"sweep.{args.format}"
    names = [table_name, "delay_vs_tokens.png"] + (["heatmap.png"] if len(tokens) > 1 else [])
    with output_folder(out, command="sweep", names=names) as stage:  # refuses a folder holding files of these names not ours
        rows = _sweep_outputs(axes, tokens, stage, table_name)
    print(f"\nwrote {out / table_name} ({rows:,} rows) and {', '.join(str(out / n) for n in names[1:])}")
    return 0


def _sweep_outputs(axes: dict[str, Any], tokens: list[int], stage: Path, table_name: str) -> int:
    """Compute the sweep, write its table and figures into ``stage``, print the summary; return the rows."""
    import matplotlib.pyplot as plt
    import numpy as np

    import perfmodel
    import perfmodel.plotting as pp

    from .io import write_table

    df = perfmodel.sweep(**axes)
    write_table(df, stage / table_name)
    draw_heatmap = None
    if len(tokens) > 1:  # the same what-if over a bandwidth grid instead of the links
        grid = {k: v for k, v in axes.items() if k not in ("link", "kv_transfer_bandwidth")}
        grid["kv_transfer_bandwidth"] = np.geomspace(1, 1000, 61)
        draw_heatmap = functools.partial(_draw_heatmap, perfmodel.sweep(**grid), stage / "heatmap.png",
                                         axes.get("link", []))
    with _alongside(draw_heatmap):  # the two figures drawn side by side, on two cores
        _save(pp.delay_vs_tokens_figure(df, budgets_ms=[50]), stage / "delay_vs_tokens.png")
        plt.close("all")
        summary = _summary(df, tokens)
    print(summary)
    return len(df)


def _fork_is_safe_and_useful() -> bool:
    """A second core, on Linux, with no other Python thread running.

    The child only draws (matplotlib, numpy, PIL; any model call in it runs serially). The
    native threads a process may have here (OpenBLAS's, pyarrow's, numba's) prepare for a
    fork themselves; a Python thread could hold a lock the child would then wait on forever
    (e.g. when :func:`main` is called from a notebook), so then nothing is forked. macOS
    does not support forking a process with its system libraries loaded.
    """
    import multiprocessing
    import threading

    return sys.platform == "linux" and len(os.sched_getaffinity(0)) > 1 and threading.active_count() == 1 \
        and "fork" in multiprocessing.get_all_start_methods()


@contextlib.contextmanager
def _alongside(task: Callable[[], None] | None) -> Iterator[None]:
    """Run ``task`` in a forked child process while the block runs (when :func:`_fork_is_safe_and_useful`),
    else after the block, in this process.

    Leaving the block normally waits for the child and raises its error, if any, here. Leaving it
    by an error or an interrupt stops the child first, so nothing the child writes outlives the
    block (a staging folder is removed right after).
    """
    if task is None:
        yield
        return
    if not _fork_is_safe_and_useful():
        yield
        task()
        return
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run_and_report, args=(task, send, _SIGNALS), name="perfmodel-draw",
                            daemon=True)
    # The child inherits this process's signal handlers, which raise; one landing while it starts up
    # would be swallowed there. So it starts with these signals blocked, and unblocks them with their
    # default action (end at once: it has nothing to clean up). start() flushes the standard streams
    # first, so nothing buffered here is printed twice.
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        with warnings.catch_warnings():  # Python >= 3.12 warns of any thread, the native ones above too
            warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
            child.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    send.close()
    try:
        yield
        try:
            error = receive.recv()
        except EOFError:  # died without a word: killed, or crashed in C
            child.join()
            error = RuntimeError(f"the drawing process ended without finishing (exit code {child.exitcode})")
        child.join()
        if error is not None:
            raise error
    finally:
        receive.close()
        if child.is_alive():  # left by an error or an interrupt: stop it before anything it writes is cleaned up
            child.terminate()
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()


#: The signals that interrupt the command (Ctrl-C, ``kill``, a closed terminal).
_SIGNALS = frozenset(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


def _run_and_report(task: Callable[[], None], send: Any, signals: frozenset[int]) -> None:
    """In the child of :func:`_alongside`: default signal actions, then run ``task``; send back ``None`` or
    its error."""
    for signum in signals:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    try:
        task()
        error = None
    except BaseException as raised:  # noqa: BLE001 (an interrupt too: the parent decides what it means)
        error = raised
    try:
        send.send(error)
    except Exception:  # an error that does not pickle: its type and message
        send.send(RuntimeError(f"{type(error).__name__}: {error}"))


def _draw_heatmap(grid: Any, path: Path, links: Sequence[Any]) -> None:
    import perfmodel.plotting as pp

    _save(pp.heatmap_figure(grid, budgets_ms=(10, 50, 100), links=links), path)


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=130, format="png")


def _summary(df: Any, tokens: list[int]) -> str:
    """Delay (ms) at a few prompt lengths: one row per model and per value of every option given
    more than one value (each a labelled level), the options with one value in the heading."""
    from .sweeps import AXES

    derived = {"kv_bytes_per_token": "model", "kv_transfer_bandwidth": "link"}
    options = [c for c in AXES if c in df.columns and c != "num_input_tokens" and derived.get(c) not in df.columns]
    levels = [c for c in options if c in ("model", "link") or df[c].nunique() > 1]
    fixed = [c for c in options if c not in levels]
    wanted = [t for t in (1024, 8192, 32768, 131072) if t in tokens] or tokens[:: max(1, len(tokens) // 4)][:4]
    part = df[df["num_input_tokens"].isin(wanted)]
    table = part.pivot_table(index=levels, columns="num_input_tokens", values="handoff_delay_ms", observed=True,
                             sort=False, dropna=False)
    table.columns = [f"{t // 1024}k" if t % 1024 == 0 else str(t) for t in table.columns]
    heading = ", ".join(f"{c}={df[c].iloc[0]}" for c in fixed)
    return (f"handoff delay (ms) at prompt length{f' ({heading})' if heading else ''}:\n"
            + table.to_string(float_format=lambda v: f"{v:,.3g}"))


def cmd_delay(args: argparse.Namespace) -> int:
    from . import io

    columns = _columns(args.column)
    keywords: dict[str, Any] = {name: column for name, column in columns.items()}
    if args.kv_bytes_per_token is not None:
        keywords["kv_bytes_per_token"] = args.kv_bytes_per_token
    elif args.model:
        keywords["kv_bytes_per_token"] = args.model
    if args.bandwidth is not None:
        keywords["kv_transfer_bandwidth"] = args.bandwidth
    elif args.link:
        keywords["kv_transfer_bandwidth"] = args.link
    keywords.update(_given(args))
    if args.scheduler or args.workers:
        from . import dask as pm_dask

        rows = pm_dask.delay_files(args.input, args.out, scheduler=args.scheduler, workers=args.workers,
                                   errors=args.errors, chunk_rows=args.chunk_rows,
                                   connect_timeout_s=args.connect_timeout, **keywords)
    else:
        rows = io.delay_file(args.input, args.out, chunk_rows=args.chunk_rows, errors=args.errors,
                             progress=None, **keywords)
    print(f"wrote {args.out} ({rows:,} rows)", file=sys.stderr)
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    import pandas as pd

    from .models import MODELS, kv_bytes, kv_terms, model_config, save_model, user_models

    if args.add:
        name, config = args.add
        path = save_model(name, config)
        print(f"saved model {name!r} ({kv_terms(name).describe()}; {kv_bytes(name, 32_768) / 1e6:,.1f} MB at 32k "
              f"tokens) to {path}; use --model {name}")
        return 0
    users = user_models()
    rows = []
    shaped = args.tp is not None or args.decode_tp is not None
    tp, decode_tp = args.tp or 1, args.decode_tp or args.tp or 1
    label = f"tp{tp}->tp{decode_tp}" + (f" {args.kv_cache_dtype}" if args.kv_cache_dtype else "")

    def pair(name: str) -> dict[str, float]:
        """The bytes per token of a prefill-to-decode pair: the busiest rank's and the group's."""
        if not shaped:
            return {}
        shape = dict(kv_cache_dtype=args.kv_cache_dtype, tp=tp, decode_tp=decode_tp)
        return {f"{label} rank B/token": int(kv_bytes(name, 1, **shape)),
                f"{label} group B/token": int(kv_bytes(name, 1, **shape, scope="group"))}

    for name in [*MODELS, *users]:
        cfg = model_config(name)
        terms = kv_terms(name)
        mla = cfg.get("kv_lora_rank") is not None
        mix = [f"{count} {kind}" for count, kind in (
            (terms.full_layers, "full"), (terms.window_layers, f"window {terms.window_tokens}"),
            (terms.chunk_layers, f"chunk {terms.chunk_tokens}"), (terms.state_layers, "state")) if count]
        rows.append({
            "model": name,
            "attention": "MLA" if mla else "GQA",
            "layers": " + ".join(mix),
            "kv_heads": "-" if mla else cfg.get("num_key_value_heads", cfg.get("num_attention_heads", "?")),
            "bytes/token": terms.full_bytes_per_token + terms.window_bytes_per_token + terms.chunk_bytes_per_token,
            "MB @1k": kv_bytes(name, 1024) / 1e6,
            "MB @32k": kv_bytes(name, 32_768) / 1e6,
            "@32k fp8": kv_bytes(name, 32_768, kv_cache_dtype="fp8") / 1e6,
            "@32k fp8 tp8 group": kv_bytes(name, 32_768, kv_cache_dtype="fp8", tp=8, scope="group") / 1e6,
            **pair(name),
            "source": "built-in" if name in MODELS else "user",
        })
    with pd.option_context("display.float_format", "{:,.1f}".format, "display.width", 200):
        print(pd.DataFrame(rows).to_string(index=False))
    print("\nbytes/token: what one token costs in every layer that keeps it; window and chunk layers keep at most their"
          "\nlast W tokens or the current chunk, state layers a fixed state per request. MB @1k and @32k: the bytes a"
          "\nhandoff of 1,024 and 32,768 tokens moves (one GPU's, bf16 unless noted)."
          "\ngroup: what all 8 ranks of a TP8 prefill group send (replicated KV heads and MLA latents count per rank)."
          + (f"\n{label}: bytes of one token (with its state) from a prefill group of {tp} ranks to a decode group of "
             f"{decode_tp}: each decode rank receives the KV heads it serves; rank = the busiest rank's share."
             if shaped else "\nA prefill-to-decode pair with other TP degrees: perfmodel models --tp 8 --decode-tp 2")
          + "\nAdd your own: perfmodel models --add NAME path/to/config.json")
    return 0


def cmd_links(args: argparse.Namespace) -> int:
    import pandas as pd

    from .handoff import handoff_delay_ms
    from .links import LINKS, link_source, transport_profiles, user_links

    links = {**LINKS, **transport_profiles(), **user_links()}
    rows = [{"link": name, "GB/s per direction": link.effective_bandwidth_gb_s, "latency_ms": link.latency_ms,
             "per_block_us": link.per_block_ms * 1000, "per_message_us": link.per_message_ms * 1000,
             "fit error": "-" if link.fit is None else f"{link.fit.max_relative_error:.0%}",
             "32k tokens of llama-3.1-70b (ms)": handoff_delay_ms(32768, link, "llama-3.1-70b", block_size=16),
             "kind": link_source(name).split(":")[0]}
            for name, link in links.items()]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    sources = [f"  {name}: {link_source(name).partition(': ')[2]}" for name in links if ": " in link_source(name)]
    if sources:
        print("\nSources:\n" + "\n".join(sources))
    print("\nMultiples: '8x ib-ndr' is eight NICs (8 x 50 GB/s). Per-block and per-message costs at 16-token blocks, "
          "one message per block, layer and K or V (kv_layout='layer_kv'). Fit your own: perfmodel calibrate "
          "measurements.csv --name NAME")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import perfmodel.plotting as pp

    from ._fs import check_not_overlapping, output_folder
    from .links import check_link_name, fit_link, get_link, save_link

    check_not_overlapping(args.out, [args.measurements])
    if not args.no_save:
        check_link_name(args.name)  # before anything is written: a refused name leaves no figure behind
    compare = [get_link(name) for name in (args.compare or ([args.link] if args.link else []))]
    table = _read_measurements(args.measurements)
    nbytes, measured, blocks, messages, setup = _measurements(table, args)
    link = fit_link(nbytes, measured, n_blocks=blocks, n_messages=messages, name=args.name)
    report = link.fit
    print(f"fitted {link.name!r}: {report.describe()}")
    print(f"{'link':<24} {'max error':>10} {'mean error':>11}")
    for candidate in [link, *compare]:
        predicted = np.asarray(candidate.transfer_ms(nbytes, 0 if blocks is None else blocks,
                                                     0 if messages is None else messages), dtype=float)
        errors = np.abs(predicted - measured) / measured
        print(f"{candidate.name:<24} {errors.max():>10.1%} {errors.mean():>11.1%}")
    if not compare:
        print("(--link NAME: the link these measurements ran on, to compare the fit with)")
    with output_folder(args.out, command="calibrate", names=["calibration.png"], inputs=[args.measurements]) as stage:
        fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
        pp.calibration(nbytes, measured, link, n_blocks=blocks, n_messages=messages, compare=compare, ax=ax)
        ax.set_title(f"{link.name}: measured against predicted" + (f"\n{setup}" if setup else ""), fontsize="medium")
        _save(fig, stage / "calibration.png")
        plt.close(fig)
        path = None if args.no_save else save_link(link, source=f"perfmodel calibrate {args.measurements}")
    print(f"\nwrote {args.out / 'calibration.png'}")
    if path is not None:
        print(f"saved link {link.name!r} to {path}: use --link {link.name} (or kv_transfer_bandwidth={link.name!r})")
    return 0


#: Time columns in microseconds that calibrate reads (perftest's ib_*_lat output names its t_typical_us).
_MICROSECONDS = ("measured_us", "t_typical_us", "t_avg_us")
#: Throughput columns and the bytes per second of their unit: decimal GB/s, binary GiB/s.
_THROUGHPUTS = {"measured_gb_s": 1e9, "measured_gib_s": 2.0**30}


def _read_measurements(path: Path) -> Any:
    """A measurements table; CSV files may hold ``#`` comment lines (as perftest's output does)."""
    import pandas as pd

    from .io import detect, read_chunks

    if detect(path).format != "csv":
        return pd.concat(list(read_chunks(path, output_format="parquet")[0]), ignore_index=True)
    try:
        return pd.read_csv(path, comment="#", skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
        raise UsageError(f"{path}: cannot be read as a CSV table ({str(error).strip()})") from None


def _measurements(table: Any, args: argparse.Namespace) -> tuple[Any, Any, Any, Any, str]:
    """(bytes, measured ms, blocks or None, messages or None, the setup in words) from a measurements
    table; refuses rows it cannot use and columns whose unit it cannot tell."""
    import numpy as np
    import pandas as pd

    from .models import kv_bytes, kv_messages

    def numbers(column: str) -> Any:
        """A column as float64 (None when absent); a value that is not a number is refused, naming its line."""
        if column not in table:
            return None
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = np.isnan(values) & table[column].notna().to_numpy()
        if bad.any():
            row = int(np.argmax(bad))
            raise UsageError(f"{args.measurements}: column {column!r}, data row {row + 1}: "
                             f"{table[column].iloc[row]!r} is not a number. Fix: repair it, or leave it empty")
        return values

    known = {"measured_ms", *_MICROSECONDS, *_THROUGHPUTS}
    unclear = [c for c in table.columns if str(c).startswith("measured") and c not in known]
    if unclear:
        raise UsageError(f"{args.measurements}: column {unclear[0]!r} has a unit calibrate cannot tell; rename it "
                         "measured_ms (milliseconds), measured_us (microseconds), measured_gb_s (decimal GB/s, "
                         "1e9 bytes/s) or measured_gib_s (binary GiB/s, 2**30 bytes/s)")
    shape = dict(kv_cache_dtype=args.kv_cache_dtype, tp=args.tp or 1, decode_tp=args.decode_tp,
                 scope=args.scope or "rank")
    setup = ""
    blocks, messages = numbers("n_blocks"), numbers("n_messages")
    if "nbytes" in table:
        nbytes = numbers("nbytes")
        if args.model or args.block_size or args.tp or args.decode_tp or args.scope or args.kv_cache_dtype:
            raise UsageError("--model, --tp, --decode-tp, --scope, --kv-cache-dtype and --block-size turn "
                             f"num_input_tokens into bytes and messages, but {args.measurements} gives nbytes. "
                             "Fix: drop them, or give num_input_tokens instead of nbytes")
    elif "num_input_tokens" in table and (args.model or "model" in table):
        models = [args.model] * len(table) if args.model else table["model"].astype(str).tolist()
        tokens, chosen = numbers("num_input_tokens"), np.array(models, dtype=object)
        nbytes = np.full(len(table), np.nan)
        if args.block_size and messages is None:
            messages = np.full(len(table), np.nan)
        for model in dict.fromkeys(models):  # each model's bytes per prompt (windows and states included)
            rows = (chosen == model) & np.isfinite(tokens)
            nbytes[rows] = kv_bytes(model, tokens[rows], **shape)
            if args.block_size and "n_messages" not in table:
                messages[rows] = kv_messages(model, tokens[rows], args.block_size, kv_layout=args.kv_layout)
        setup = (f"{', '.join(dict.fromkeys(models))}; tp {shape['tp']}"
                 + (f" to decode tp {args.decode_tp}" if args.decode_tp else "") + f", {shape['scope']} bytes"
                 + (f", {args.kv_cache_dtype}" if args.kv_cache_dtype else "")
                 + (f"; {args.block_size}-token blocks, {args.kv_layout} messages" if args.block_size else ""))
    else:
        raise UsageError(f"{args.measurements}: needs an nbytes column, or num_input_tokens with --model (or a model "
                         f"column); it has {list(table.columns)}")
    measured = numbers("measured_ms")
    for column in _MICROSECONDS:  # perftest's ib_write_lat (t_typical_us) and the like
        if measured is None and column in table:
            measured = numbers(column) / 1000.0
    for column, unit in _THROUGHPUTS.items():  # throughput tables: the time each size took at the rate measured
        if column in table:
            from_throughput = nbytes / (numbers(column) * unit) * 1000.0
            measured = from_throughput if measured is None else np.where(np.isnan(measured), from_throughput,
                                                                         measured)
    if measured is None:
        raise UsageError(f"{args.measurements}: needs a time column (measured_ms, or in microseconds "
                         f"{', '.join(_MICROSECONDS)}) or a throughput column ({', '.join(_THROUGHPUTS)}); it has "
                         f"{list(table.columns)}")
    keep = np.isfinite(nbytes) & np.isfinite(measured)
    for counts in (blocks, messages):
        if counts is not None:
            keep &= np.isfinite(counts)
    if not keep.all():
        print(f"perfmodel calibrate: left out {int((~keep).sum())} row(s) without a size or a measurement",
              file=sys.stderr)
    return (nbytes[keep], measured[keep], None if blocks is None else blocks[keep],
            None if messages is None else messages[keep], setup)


def cmd_trace(args: argparse.Namespace) -> int:
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import perfmodel.plotting as pp

    from ._fs import check_not_overlapping, output_folder
    from .io import write_table
    from .replay import replay_handoffs, summarize
    from .trace import read_trace

    check_not_overlapping(args.out, [args.trace])  # before the (long) replay

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported below, in one line
        trace = read_trace(args.trace, errors="skip" if args.skip_bad_lines else "raise",
                           columns=_columns(args.column, TRACE_COLUMNS) or None)
    if trace.attrs.get("skipped_lines"):
        print(f"perfmodel trace: skipped {trace.attrs['skipped_lines']} malformed line(s) of {args.trace}",
              file=sys.stderr)
    config = {"model": args.model, "kv_bytes_per_token": args.kv_bytes_per_token, "link": args.link,
              "kv_transfer_bandwidth": args.bandwidth, "decode_workers": args.decode_workers,
              "decode_cache_blocks": args.cache_blocks, "routing": args.routing, "contention": args.contention,
              "links": args.links, **_given(args)}
    config = {name: value for name, value in config.items() if value is not None}  # (not given: the API's default)
    axes = _grid_axes(args.grid) if args.grid else {}
    for one, other in (("model", "kv_bytes_per_token"), ("link", "kv_transfer_bandwidth")):
        if not {one, other} & {*config, *axes}:
            raise UsageError(f"give --{one} (or --{other.replace('_', '-')}, or --grid {one}=...)")
        if {one, other} & set(config) and {one, other} & set(axes):
            raise UsageError(f"--grid {one}=... (or {other}=...) replaces --{one} and --{other.replace('_', '-')}: "
                             "give one of them")
    twice = sorted(set(config) & set(axes))
    if twice:
        raise UsageError(f"--grid {twice[0]}=... and its flag are both given: give its values in --grid only")
    if axes:
        return _trace_grid(args, trace, {**config, **axes}, axes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        replay = replay_handoffs(trace, ready_ms="ready_ms" if "ready_ms" in trace else None, **config)
    for warning in caught:  # e.g. destination_missing on a trace without hash_ids: said once, in one line
        print(f"perfmodel trace: warning: {str(warning.message).removeprefix('replay_handoffs: ')}", file=sys.stderr)
    summary = summarize(replay)
    out: Path = args.out
    names = [f"replay.{args.format}", "summary.json", "replay.png"]
    with output_folder(out, command="trace", names=names, inputs=[args.trace]) as stage:
        write_table(replay.rename_axis(replay.index.name or "request").reset_index(), stage / names[0])
        (stage / "summary.json").write_text(json.dumps(summary, indent=1))
        fig = pp.replay_figure(replay)
        _save(fig, stage / "replay.png")
        plt.close(fig)
    width = max(map(len, summary))
    for key, value in summary.items():
        print(f"{key:<{width}}  {value:,.4g}" if isinstance(value, float) else f"{key:<{width}}  {value:,}")
    print(f"\nwrote {out / ('replay.' + args.format)}, {out / 'summary.json'}, {out / 'replay.png'}")
    return 0


def _grid_axes(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``--grid AXIS=V1,V2`` options as replay_grid axes."""
    from .replay import GRID_AXES

    axes: dict[str, list[Any]] = {}
    for spec in specs:
        name, text = _name_value("--grid", spec, GRID_AXES, "decode_workers=4,8,16")
        values: list[Any] = []
        for part in (p.strip() for p in text.split(",") if p.strip()):
            unbounded = name == "decode_cache_blocks" and part.lower() in ("none", "unbounded")
            values.append(None if unbounded else _reader(name, f"--grid {name}")(part))
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

    from ._fs import output_folder
    from .io import write_table
    from .replay import replay_grid

    grid = replay_grid(trace, progress=None, ready_ms="ready_ms" if "ready_ms" in trace else None, **config)
    out: Path = args.out
    names = [f"grid.{args.format}", "grid.png"]
    with output_folder(out, command="trace --grid", names=names, inputs=[args.trace]) as stage:
        write_table(grid, stage / names[0])
        fig = pp.replay_grid_figure(grid, budget_ms=min(args.budget_ms))
        _save(fig, stage / "grid.png")
        plt.close(fig)
    shown = [c for c in axes] + ["p50_ms", "p99_ms", "mean_queue_ms", "link_utilisation", "zero_delay_share"]
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(f"{len(grid)} configurations replayed on {len(trace):,} requests:")
        print(grid[shown].to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
        numeric = [c for c in axes if pd.api.types.is_numeric_dtype(grid[c])]
        for budget in sorted(args.budget_ms):
            meeting = grid[grid["p99_ms"] <= budget].sort_values([*numeric, "p99_ms"])
            print(f"\np99 within {budget:g} ms: {len(meeting)} of {len(grid)} configurations"
                  + (", the smallest first:" if len(meeting) else ""))
            if len(meeting):
                print(meeting[shown].head(5).to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    print(f"\nwrote {out / names[0]} and {out / names[1]}")
    return 0


# --- the parser ----------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (what was wrong, and where the usage is), exit code 2."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfmodel", description="KV-cache handoff delay of disaggregated LLM serving, for millions of cases.",
        epilog="Run 'perfmodel sweep --out results' for the default what-if (models x links x 128 to 128k tokens).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sweep = sub.add_parser("sweep", help="what-if grid: models/bytes x links/bandwidths x prompt lengths (the main job)",
                           description="Sweep handoff delays over models x links x prompt lengths; write a table, "
                                       "plots and a summary. With no options: popular models x every link preset "
                                       "x 128 to 128k tokens.")
    what = sweep.add_mutually_exclusive_group()
    what.add_argument("--model", nargs="+", metavar="NAME", help=f"model presets (default: {' '.join(DEFAULT_MODELS)})")
    what.add_argument("--kv-bytes-per-token", type=int, nargs="+", metavar="BYTES", help="bytes per token instead")
    how = sweep.add_mutually_exclusive_group()
    how.add_argument("--link", nargs="+", metavar="NAME", help="link presets, e.g. nvlink4 '8x ib-ndr' (default: all)")
    how.add_argument("--bandwidth", nargs="+", metavar="GBPS", help="bandwidths in decimal GB/s instead")
    sweep.add_argument("--tokens", default=DEFAULT_TOKENS, metavar="LIST|RANGE",
                       help="'1k,8k,32k' or START:STOP[:STEP], STEP a count or xFACTOR (default %(default)s)")
    sweep.add_argument("--cache-hit", nargs="+", metavar="RATIO", help="destination cache hit ratios in [0, 1]")
    _table_options(sweep, _SWEEP, many=True, block_size="for --cache-hit and per-block costs (default 64)")
    sweep.add_argument("--out", type=Path, default=Path("perfmodel-results"), metavar="DIR",
                       help="output folder (default %(default)s)")
    sweep.add_argument("--format", choices=["csv", "parquet"], default="csv")
    sweep.set_defaults(run=cmd_sweep)

    delay = sub.add_parser("delay", help="add handoff_delay_ms to a CSV / Parquet / JSON-lines file of requests",
                           description="Read requests, add a handoff_delay_ms column, write OUTPUT (format from its "
                                       "extension). Large files are processed in chunks.")
    delay.add_argument("input", help="CSV, Parquet or JSON-lines file (with --workers/--scheduler: also a folder or glob)")
    delay.add_argument("--out", required=True, help="output file (.csv, .parquet, .jsonl), or folder with dask")
    per_token = delay.add_mutually_exclusive_group()
    per_token.add_argument("--kv-bytes-per-token", type=float, metavar="BYTES")
    per_token.add_argument("--model", metavar="NAME", help="model preset (or a column of model names via --column)")
    bw = delay.add_mutually_exclusive_group()
    bw.add_argument("--bandwidth", type=float, metavar="GBPS")
    bw.add_argument("--link", metavar="NAME")
    delay.add_argument("--column", action="append", default=[], metavar="ARG=COLUMN",
                       help="read an argument from a column, e.g. num_input_tokens=prompt_tokens (repeatable)")
    _table_options(delay, ("fallback_delay_ms", *_SWEEP), many=False)
    delay.add_argument("--errors", choices=["raise", "coerce"], default="raise",
                       help="invalid rows: stop (default) or leave the delay empty")
    delay.add_argument("--chunk-rows", type=_positive_int, default=1_000_000, metavar="N",
                       help="rows per chunk (default 1M)")
    delay.add_argument("--workers", type=_positive_int, metavar="N",
                       help="run on a local Dask cluster of N worker processes")
    delay.add_argument("--scheduler", metavar="ADDRESS", help="run on an existing Dask cluster")
    delay.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                       help="how long to wait for --scheduler before giving up (default %(default)s)")
    delay.set_defaults(run=cmd_delay)

    models = sub.add_parser("models", help="the model presets and their KV bytes per token (--add: your own)")
    models.add_argument("--add", nargs=2, metavar=("NAME", "CONFIG"),
                        help="save a Hugging Face config.json (or its folder) as a model preset NAME")
    models.add_argument("--tp", type=_positive_int, metavar="N",
                        help="with --decode-tp: show the bytes of a prefill group of N ranks handing off")
    models.add_argument("--decode-tp", type=_positive_int, metavar="N", help="to a decode group of N ranks")
    models.add_argument("--kv-cache-dtype", metavar="DTYPE", help="for the --tp/--decode-tp columns (default: the model's)")
    models.set_defaults(run=cmd_models)
    sub.add_parser("links", help="the interconnect presets, built-in and yours").set_defaults(run=cmd_links)

    calibrate = sub.add_parser("calibrate", help="fit a link to measured transfers and save it as a preset",
                               description="Fit latency, bandwidth (and with n_blocks or n_messages columns, or "
                                           "--block-size, per-block and per-message costs) to measured transfers; "
                                           "print the errors next to the link they ran on; "
                                           "plot predicted against measured; save the link as a user preset.")
    calibrate.add_argument("measurements", type=_data_file,
                           help="CSV/Parquet/JSON lines, or dataset:NAME (a shipped table, see perfmodel.datasets): "
                                "nbytes (or num_input_tokens with --model or a model column), measured_ms "
                                "(or measured_us, measured_gb_s decimal, measured_gib_s binary), optional n_blocks "
                                "and n_messages")
    calibrate.add_argument("--name", required=True, help="the link's name (then --link NAME everywhere)")
    calibrate.add_argument("--link", metavar="NAME", help="the link the measurements ran on, shown next to the fit")
    calibrate.add_argument("--compare", nargs="+", metavar="LINK",
                           help="links to show next to the fit (default: --link's)")
    calibrate.add_argument("--model", help="model whose KV cache turns num_input_tokens into bytes (and messages)")
    calibrate.add_argument("--kv-cache-dtype", metavar="DTYPE", help="with --model: the KV-cache dtype")
    calibrate.add_argument("--tp", type=_positive_int, metavar="N", help="with --model: the prefill's TP degree")
    calibrate.add_argument("--decode-tp", type=_positive_int, metavar="N", help="with --model: the decode's TP degree")
    calibrate.add_argument("--scope", choices=["rank", "group"],
                           help="with --model: the busiest rank's bytes (default) or the TP group's")
    calibrate.add_argument("--block-size", type=_positive_int, metavar="TOKENS",
                           help="with --model: KV block size; the fit then has a per-message cost")
    calibrate.add_argument("--kv-layout", choices=["layer_kv", "layer", "block"], default="layer_kv",
                           help="with --block-size: how a block lies in memory, which sets the messages")
    calibrate.add_argument("--out", type=Path, default=Path("perfmodel-calibration"), metavar="DIR",
                           help="folder for calibration.png (default %(default)s)")
    calibrate.add_argument("--no-save", action="store_true", help="do not save the link as a preset")
    calibrate.set_defaults(run=cmd_calibrate)

    trace = sub.add_parser("trace", help="replay a request trace: per-request handoffs, prefix cache, contention",
                           description="Replay a Mooncake JSON-lines or Azure CSV trace through the handoff model.")
    trace.add_argument("trace", type=_data_file, help="trace file (.jsonl Mooncake, .csv Azure or generic), or "
                       "dataset:NAME for a shipped trace (dataset:mooncake-synthetic, dataset:azure-code-2023)")
    tm = trace.add_mutually_exclusive_group()
    tm.add_argument("--model", metavar="NAME", help="model preset (or --grid model=...)")
    tm.add_argument("--kv-bytes-per-token", type=float, metavar="BYTES")
    tl = trace.add_mutually_exclusive_group()
    tl.add_argument("--link", metavar="NAME", help="link preset (or --grid link=...)")
    tl.add_argument("--bandwidth", type=float, metavar="GBPS")
    trace.add_argument("--grid", action="extend", nargs="+", default=[], metavar="AXIS=V1,V2,...",
                       help="replay every combination: e.g. --grid decode_workers=4,8,16 link=ib-ndr,nvlink4 "
                            "(several axes, or the flag repeated; axes: the options above by their API names, see perfmodel.replay_grid)")
    trace.add_argument("--budget-ms", type=float, nargs="+", default=[50.0, 100.0], metavar="MS",
                       help="with --grid: report the configurations whose p99 handoff delay meets each budget")
    trace.add_argument("--decode-workers", type=_positive_int, metavar="N", help="decode workers (default 1)")
    trace.add_argument("--cache-blocks", type=int, metavar="N", help="LRU capacity per decode worker (default unbounded)")
    trace.add_argument("--routing", choices=["prefix", "round_robin"], help="decode routing (default prefix)")
    trace.add_argument("--contention", choices=["none", "fifo", "fair"], help="link sharing (default none)")
    trace.add_argument("--links", type=_positive_int, metavar="N", help="identical links (default 1)")
    _table_options(trace, _SWEEP, many=False, block_size="KV block (page) size (default 512)")
    trace.add_argument("--skip-bad-lines", action="store_true", help="skip malformed lines (reported) instead of stopping")
    trace.add_argument("--column", action="append", default=[], metavar="NAME=COLUMN",
                       help="for a generic CSV/Parquet trace: where arrival_ms, num_input_tokens, num_output_tokens, "
                            "hash_ids and ready_ms (prefill completion, ms or datetime) are (repeatable)")
    trace.add_argument("--out", type=Path, required=True, metavar="DIR")
    trace.add_argument("--format", choices=["csv", "parquet"], default="csv")
    trace.set_defaults(run=cmd_trace)
    return parser


#: The model's inputs that sweep, delay and trace take as flags (their names, flags and help from the input
#: table; all at upstream's model when not given). delay also takes --fallback-delay-ms.
_SWEEP = ("mode", "latency_ms", "block_size", "kv_cache_dtype", "tp", "per_block_ms", "per_message_ms", "kv_layout",
          "state_bytes", "decode_tp", "scope", "overlap", "prefill_ms", "prefill_tokens_per_s", "num_layers",
          "layer_group", "layerwise_min_tokens")


def _table_options(parser: argparse.ArgumentParser, names: Sequence[str], *, many: bool, **help: str) -> None:
    """The flags of the inputs ``names``, from the input table: flag, choices and first docstring
    sentence (or ``help``'s text) each; numbers are checked by the API, with the table's messages.
    Inputs given one instead of another are mutually exclusive."""
    groups: dict[str, Any] = {}
    for name in names:
        entry = INPUTS[name]
        pair = entry.instead_of or next((e.name for e in INPUTS.values() if e.instead_of == name), None)
        target = groups.setdefault(pair, parser.add_mutually_exclusive_group()) if pair else parser
        kind = (dict(choices=list(entry.choices or entry.labels)) if entry.choices or entry.labels else
                dict(type=_reader(name), metavar=name.split("_")[-1].upper()))
        target.add_argument(entry.cli, nargs="+" if many else None, dest=name,
                            help=help.get(name, entry.doc.split(". ")[0].replace("``", "")), **kind)


def _reader(name: str, where: str = "") -> Callable[[str], Any]:
    """How a value of input ``name`` is read from the command line (a flag's, or a --grid axis'), by its
    kind in the input table: whole numbers as counts ('32k'), other numbers as numbers >= 0, the rest as text.
    The replay's own counts (decode_workers, decode_cache_blocks, links) are whole numbers too."""
    entry = INPUTS.get(name)
    if entry is not None and entry.kind == "degree":
        return _positive_int
    if entry is None and name in ("decode_workers", "decode_cache_blocks", "links") or entry is not None and (
            entry.kind == "count" and entry.valid.whole):
        return _count
    if entry is not None and entry.kind in ("count", "real"):
        return lambda text: _floats(where, [text])[0]
    return str


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The model's inputs given on the command line, by the API's names."""
    return {name: getattr(args, name) for name in ("fallback_delay_ms", *_SWEEP)
            if getattr(args, name, None) is not None}


def _version() -> str:
    from . import __version__

    return __version__


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every ``finally`` removes its temporary files."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


#: What each command imports (numba's compiler, pyarrow, matplotlib: C and C++ libraries).
_HEAVY = {"sweep": ("perfmodel.sweeps", "pyarrow", "matplotlib.pyplot"), "delay": ("perfmodel.io", "pyarrow.csv"),
          "trace": ("perfmodel.replay", "pyarrow.json", "matplotlib.pyplot")}


def _preload(command: str) -> None:
    """Import the command's heavy modules with Ctrl-C/SIGTERM/SIGHUP held back until they are loaded.

    An interrupt in the middle of a C/C++ library's initialization can abort the process
    (SIGABRT, no message); held back, it interrupts cleanly right after.
    """
    import importlib

    pending: list[int] = []
    previous = {}
    try:
        for signum in _SIGNALS:
            previous[signum] = signal.signal(signum, lambda received, _frame: pending.append(received))
    except ValueError:  # not the main thread: nothing to hold back
        pass
    try:
        if command in ("sweep", "trace"):
            import matplotlib

            matplotlib.use("Agg")
        for module in _HEAVY.get(command, ()):
            importlib.import_module(module)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if pending:
        raise Interrupted(pending[0])


#: The command-line flags behind the API's argument names, for error messages.
def _flags() -> dict[str, str]:
    """Each input's command-line flag (from the input table), for messages that name an argument."""


    return {
        **{e.name: e.cli for e in INPUTS.values() if e.cli},
        "kv_transfer_bandwidth": "--bandwidth/--link", "kv_bytes_per_token": "--kv-bytes-per-token/--model",
        "chunk_rows": "--chunk-rows", "decode_workers": "--decode-workers", "decode_cache_blocks": "--cache-blocks",
        "links": "--links",
        **{name: f"--column {name}=COLUMN" for name in ("num_input_tokens", "worker_type", "completed",
                                                         "destination_missing_tokens")},
    }


def _user_errors() -> tuple[type[BaseException], ...]:
    """Failures caused by the input, the files or the machine (exit 2), as opposed to bugs (exit 1)."""
    import lzma
    import zlib

    # ValueError covers InputError, bad JSON/CSV/Parquet (pyarrow's ArrowInvalid) and undecodable text;
    # OSError covers missing files, permissions, a full disk, read-only targets and unreachable schedulers.
    return UsageError, ValueError, OSError, EOFError, lzma.LZMAError, zlib.error


def _one_line(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"{error.filename}: {error.strerror}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    0: done. 2: a failure caused by the input, the files or the machine (one line on
    stderr; ``--debug`` shows the traceback). 1: an internal error (a bug: the traceback
    is shown). 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP): interrupted, outputs untouched.
    """
    previous = {}
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            with contextlib.suppress(ValueError):  # not the main thread: leave the handlers alone
                previous[signum] = signal.signal(signum, _interrupt)
    command = "?"
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version, or a usage error (said in one line)
            return done.code if isinstance(done.code, int) else 2
        command = args.command
        _preload(command)
        try:
            return args.run(args)
        except _user_errors() as error:
            if args.debug:
                raise
            if hasattr(error, "coerce_hint"):  # an InputError: speak of the command's flags, not of arguments
                error.coerce_hint = "--errors coerce" if command == "delay" else ""
                flags = _flags()
                if error.where in flags:
                    error.where = f"{flags[error.where]} ({error.where})"
            print(f"perfmodel {command}: error: {_one_line(error)}", file=sys.stderr)
            return 2
    except KeyboardInterrupt as interrupt:
        signum = getattr(interrupt, "signum", signal.SIGINT)
        print(f"perfmodel: interrupted ({signal.Signals(signum).name}); no output was written or changed",
              file=sys.stderr)
        return 128 + int(signum)
    except SystemExit:
        raise
    except Exception:  # a bug in perfmodel, not the user's input: say so, with the traceback
        print(f"perfmodel {command}: internal error (please report it, with this traceback):\n"
              f"{traceback.format_exc()}", file=sys.stderr)
        return 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def console() -> None:
    """The ``perfmodel`` command (and ``python -m perfmodel``): :func:`main`, then exit with its code.

    Before exiting it freezes the garbage collector's objects: the interpreter's final cyclic
    collections over everything pandas, numba and matplotlib allocated (0.2-0.4 s, measured on the
    main job) would only free memory the operating system reclaims anyway. Every file perfmodel writes is
    closed by then, and the standard streams are still flushed.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console()
