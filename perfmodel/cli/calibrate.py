"""``perfmodel calibrate``: a link fitted to measured transfers, its errors, a figure, a user preset."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..calibration import FIT_FROM_BYTES
from ..inputs.words import count
from ._draw import save
from ._parsing import UsageError, data_file, in_flags, one_line_warnings, output_path, table_options

#: The model's inputs that turn a table's prompt lengths into bytes and messages (flags from the input table).
CALIBRATE_FLAGS = ("kv_cache_dtype", "tp", "decode_tp", "scope", "block_size", "kv_layout")


def cmd_calibrate(args: argparse.Namespace) -> int:
    with one_line_warnings("calibrate"):  # what the fit cannot vouch for: one line each
        return _calibrate(args)


def _calibrate(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import perfmodel.plotting as pp

    from ..calibration import calibrate
    from ..ground.files import check_output_folder, output_folder
    from ..network.links import check_link_name, save_link

    check_output_folder(args.out, command="calibrate", names=["calibration.png"], inputs=[args.measurements])
    if args.replace and not args.save:
        raise UsageError("--replace replaces a saved link of --name's name, so it needs --save. Fix: add --save")
    if args.save:
        check_link_name(args.name, replace=args.replace)  # before anything is written: a refused name leaves nothing
    flag, names = ("--compare", args.compare) if args.compare else ("--link", [args.link] if args.link else [])
    compare = [_link(flag, name) for name in names]
    fitted = calibrate(
        args.measurements,
        name=args.name,
        model=args.model,
        kv_cache_dtype=args.kv_cache_dtype,
        tp=args.tp,
        decode_tp=args.decode_tp,
        scope=args.scope,
        block_size=args.block_size,
        kv_layout=args.kv_layout,
        line_rate_gb_s=args.line_rate_gb_s,
        nic=args.nic,
        fit_from_bytes=args.fit_from_bytes,
    )
    link, m = fitted.link, fitted.measurements
    report = [f"fitted {link.name!r}: {fitted.report.describe()}"]  # (printed once the files are written and saved)
    smaller = int((~m.fitted).sum())
    if smaller:
        report.append(
            f"({count(smaller, 'smaller transfer')}, below {m.fit_from_bytes:,.0f} bytes, "
            f"{'is' if smaller == 1 else 'are'} not fitted: --fit-from-bytes 0 fits every size)"
        )
    report.append(
        f"{'link':<24} {'max error':>10} {'mean error':>11}" + ("  (over the transfers fitted)" if smaller else "")
    )
    for candidate in [link, *compare]:
        errors = fitted.relative_errors(candidate)[m.fitted]
        report.append(f"{candidate.name:<24} {errors.max():>10.1%} {errors.mean():>11.1%}")
    if not compare:
        report.append("(--link NAME: the link these measurements ran on, to compare the fit with)")
    report.append(_by_size(fitted, [link, *compare]))
    with output_folder(args.out, command="calibrate", names=["calibration.png"], inputs=[args.measurements]) as stage:
        fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
        pp.calibration(
            m.nbytes, m.measured_ms, link, n_blocks=m.n_blocks, n_messages=m.n_messages, fitted=m.fitted,
            compare=compare, ax=ax,
        )  # fmt: skip
        ax.set_title(
            f"{link.name}: measured against predicted" + (f"\n{m.setup}" if m.setup else ""), fontsize="medium"
        )
        save(fig, stage / "calibration.png")
        plt.close(fig)
        path = save_link(link, source=_command(args), replace=args.replace) if args.save else None
    print("\n".join([*report, "", f"wrote {args.out / 'calibration.png'}", _saved(link.name, path)]))
    return 0


def _link(flag: str, name: str) -> Any:
    """The link ``flag`` names; an unknown one is refused naming that flag."""
    from ..errors import InputError
    from ..network.links import get_link

    try:
        return get_link(name)
    except InputError as error:
        raise UsageError(f"{flag}: {error.problem}. Fix: {error.fix}") from None


def _command(args: argparse.Namespace) -> str:
    """The command that fitted a saved link (its ``source``): the measurements as given (a shipped table by its
    dataset name) and the options that shape the fit."""
    from ..ground.data import given_as

    words = ["perfmodel calibrate", given_as(args.measurements), f"--fit-from-bytes {args.fit_from_bytes:g}"]
    for flag in (
        "model",
        "kv_cache_dtype",
        "tp",
        "decode_tp",
        "scope",
        "block_size",
        "kv_layout",
        "line_rate_gb_s",
        "nic",
    ):
        if getattr(args, flag, None) is not None:
            words.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}")
    return " ".join(words)


def _by_size(fitted: Any, links: list[Any]) -> str:
    """Every measurement's size, time and each link's error (signed: below 0 the link is too fast), the sizes
    not fitted marked."""
    lines = ["\neach transfer: " + ", ".join(f"{k.name} error" for k in links) + " (predicted - measured) / measured"]
    m = fitted.measurements
    width = max(map(len, m.places), default=0)
    place = (lambda i: f"{m.places[i]:<{width}} ") if width else (lambda i: "")
    lines.append(
        f"{'':<{width + 1 if width else 0}}{'bytes':>14} {'measured ms':>12}"
        + "".join(f" {k.name[:12]:>12}" for k in links)
    )
    # (an error that rounds to 0.0% is printed +0.0%, never -0.0%)
    errors = [np.where(np.abs(e) < 5e-4, 0.0, e) for e in (fitted.errors_by_size(k)["error"].to_numpy() for k in links)]
    for i in np.argsort(m.nbytes, kind="stable"):
        row = f"{place(i)}{m.nbytes[i]:>14,.0f} {m.measured_ms[i]:>12.4g}" + "".join(f" {e[i]:>+12.1%}" for e in errors)
        lines.append(row + ("" if m.fitted[i] else "  (not fitted)"))
    return "\n".join(lines)


def _saved(name: str, path: Path | None) -> str:
    """What became of the fit: saved (under the name it is kept by: names ignore case), or how to save it, which
    never proposes a name --save would refuse (a built-in one, or one taken)."""
    import shlex

    from ..errors import InputError
    from ..inputs import user_presets as _presets
    from ..network.links import check_link_name

    key = _presets.key_of(name)
    if path is not None:
        spelled = "" if key == name else f" (names ignore case: {name!r} is kept as {key!r})"
        return (
            f"saved link {key!r}{spelled} to {path}: use --link {shlex.quote(key)} (or kv_transfer_bandwidth={key!r})"
        )
    try:
        check_link_name(name)
    except InputError as refused:
        fix = in_flags(refused.fix, {"replace=True": "--save --replace"})  # (the API's words, as flags)
        return f"(not saved as a preset; --save would refuse --name {name}: {refused.problem}. Fix: {fix})"
    return f"(not saved as a preset: add --save to use it as --link {shlex.quote(key)})"


def _at_least_zero(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def _positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number > 0")
    return value


def register(sub: Any) -> None:
    """Add ``perfmodel calibrate`` to the subcommands ``sub``."""
    calibrate = sub.add_parser(
        "calibrate",
        help="fit a link to measured transfers (--save: as a preset)",
        description="Fit latency, bandwidth (and with n_blocks or n_messages columns, or "
        "--block-size, per-block and per-message costs) to measured transfers; "
        "print the errors next to the link they ran on; "
        "plot predicted against measured; with --save, save the link as a user preset.",
    )
    calibrate.add_argument(
        "measurements",
        type=data_file,
        help="CSV/Parquet/JSON lines, perftest's output as is (ib_write_bw, ib_read_bw, "
        "ib_*_lat), or dataset:NAME (a shipped table, see perfmodel.datasets): nbytes (or "
        "#bytes, or num_input_tokens with --model or a model column), measured_ms (or "
        "measured_us, measured_gb_s decimal, measured_gib_s binary, perftest's "
        "'BW average[MB/sec]', 'BW average[MiB/sec]' or 'BW average[Gb/sec]'), optional n_blocks and n_messages",
    )
    calibrate.add_argument("--name", required=True, help="the link's name (then --link NAME everywhere)")
    calibrate.add_argument("--link", metavar="NAME", help="the link the measurements ran on, shown next to the fit")
    calibrate.add_argument(
        "--compare", nargs="+", metavar="LINK", help="links to show next to the fit (default: --link's)"
    )
    calibrate.add_argument("--model", help="model whose KV cache turns num_input_tokens into bytes (and messages)")
    table_options(
        calibrate,
        CALIBRATE_FLAGS,
        many=False,
        kv_cache_dtype="with --model: the KV-cache dtype",
        tp="with --model: the prefill's TP degree",
        decode_tp="with --model: the decode's TP degree",
        scope="with --model: the busiest rank's bytes (default) or the TP group's",
        block_size="with --model: KV block size; the fit then has a per-message cost",
        kv_layout="with --block-size: how a block lies in memory, which sets the messages (default layer_kv)",
    )
    limit = calibrate.add_mutually_exclusive_group()
    limit.add_argument(
        "--line-rate-gb-s",
        type=_positive_float,
        metavar="GB_S",
        help="the line rate of the NIC measured (decimal GB/s): the fitted bandwidth never exceeds it",
    )
    limit.add_argument("--nic", metavar="LINK", help="or the link preset of the NIC measured (its line rate)")
    calibrate.add_argument(
        "--fit-from-bytes",
        type=_at_least_zero,
        default=FIT_FROM_BYTES,
        metavar="BYTES",
        help="the smallest transfer fitted (default %(default)s, 64 KiB: the sizes a KV handoff moves); smaller ones "
        "are shown, not fitted; 0 fits every size",
    )
    calibrate.add_argument(
        "--out",
        type=output_path,
        default=Path("perfmodel-calibration"),
        metavar="DIR",
        help="folder for calibration.png (default %(default)s)",
    )
    saving = calibrate.add_mutually_exclusive_group()
    saving.add_argument("--save", action="store_true", help="save the link as a user preset under --name")
    saving.add_argument("--no-save", action="store_true", help="do not save it (the default)")
    calibrate.add_argument(
        "--replace",
        action="store_true",
        help="with --save: replace a user link of that name (a taken name is refused otherwise)",
    )
    calibrate.set_defaults(run=cmd_calibrate)
