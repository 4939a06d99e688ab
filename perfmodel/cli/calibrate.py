"""``perfmodel calibrate``: a link fitted to measured transfers, its errors, a figure, a user preset.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._draw import _save
from ._parsing import UsageError, _data_file, _positive_int


def cmd_calibrate(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import perfmodel.plotting as pp

    from .._fs import check_not_overlapping, output_folder
    from ..links import check_link_name, fit_link, get_link, save_link

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

    from ..io import detect, read_chunks

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

    from ..models import kv_bytes, kv_messages

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


def register(sub: Any) -> None:
    """Add ``perfmodel calibrate`` to the subcommands ``sub``."""
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

