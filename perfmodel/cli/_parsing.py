"""Reading the command line: token counts and ranges, numbers, NAME=VALUE options, and the model's flags built
from the input table (:mod:`perfmodel.inputs.table`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from ..ground.data import given_as
from ..inputs.table import INPUTS, ROW_INPUTS, Valid, flags
from ..options import option


class UsageError(argparse.ArgumentTypeError):
    """Bad input from the command line: reported in one line, exit code 2 (by argparse, when a flag's
    value cannot be read)."""


def token_count(text: str, rule: str = "") -> int:
    """'32k' -> 32768 (tokens are counted in binary k), '1M' -> 1048576, '4096' -> 4096; a text that is no count
    is refused as a token count, or, given the input's ``rule`` (a count of layers, of blocks...), with it."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not match:
        raise UsageError(f"{text!r}: {rule}" if rule else f"{text!r} is not a token count (examples: 4096, 32k, 1M)")
    number, unit = match.group(1), {"": 1, "k": 1024, "m": 1024**2}[match.group(2).lower()]
    if "." not in number:  # (whole numbers exactly, however large: the API's bounds refuse them by name)
        return int(number) * unit
    value = float(number) * unit
    if value != int(value):
        raise UsageError(f"{text!r}: {rule}" if rule else f"{text!r} is not a whole number of tokens")
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

    A list that also reads as one number with thousands separators (``32,768``) is refused; ``32, 768`` is the
    list.
    """
    if ":" not in spec:
        if re.fullmatch(r"\s*\d{1,3}(,\d{3})+\s*", spec):  # ('32,768': 32768 or [32, 768]? never guessed)
            parts = [part.strip() for part in spec.split(",")]
            raise UsageError(
                f"--tokens {spec!r} reads as one number with thousands separators or as a list of "
                f"{len(parts)} counts: write {''.join(parts)} for one count, or {', '.join(parts)!r} (a space after "
                "each comma) for the list"
            )
        return _lengths(spec, {token_count(part) for part in spec.split(",") if part.strip()}) or _fail(
            f"empty token list {spec!r}"
        )
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"token range {spec!r} is not START:STOP[:STEP]")
    start, stop = token_count(parts[0]), token_count(parts[1])
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
            values.append(round(value))
            value *= factor
    else:
        increment = token_count(step)
        if increment <= 0:
            raise UsageError(f"token range step {step!r} must be > 0")
        _check_range_size(spec, (stop - start) // increment + 1)
        values = list(range(start, stop + 1, increment))
    return _lengths(spec, values)


def _lengths(spec: str, values: Any) -> list[int]:
    """The prompt lengths, sorted, without repeats; a 0 is refused."""
    if 0 in values:
        raise UsageError(
            f"--tokens {spec!r} includes 0: a prompt length is at least 1 token (a 0-token prompt "
            "hands nothing off, and the figures' log axes cannot show it)"
        )
    return sorted(set(values))


# (the most prompt lengths one --tokens option may ask for, counted before anything is built: the option
# max_token_values, perfmodel.set_options)


def _check_range_size(spec: str, count: float) -> None:
    most = option("max_token_values")
    if count > most:
        raise UsageError(
            f"token range {spec!r} has {count:,.0f} values, more than {most:,}; "  # (never one)
            "use a coarser step (e.g. 1k:128k:1k or a geometric step such as x1.1), or from Python raise "
            "perfmodel.set_options(max_token_values=...) and run perfmodel.cli.main([...]) (no flag or "
            "environment variable sets the option)"
        )


def flag_float(text: str) -> float:
    """A flag's number as Python reads it, but never an overflow taken for infinity: ``1e400`` (a typo) is refused,
    ``inf`` is infinity as written; a ValueError for text that is no number.

    >>> flag_float("2.5"), flag_float("inf")
    (2.5, inf)
    >>> flag_float("1e400")
    Traceback (most recent call last):
    ...
    perfmodel.cli._parsing.UsageError: '1e400' is beyond a float's range (about 1.8e308): write a smaller number
    (or inf, where the flag takes no limit)
    """
    value = float(text)
    if math.isinf(value) and "inf" not in str(text).lower():
        raise UsageError(
            f"{str(text).strip()!r} is beyond a float's range (about 1.8e308): write a smaller number (or inf, "
            "where the flag takes no limit)"
        )
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def data_file(text: str) -> Path:
    """argparse type: a file, or ``dataset:NAME`` for a table of measurements shipped with perfmodel (a shipped
    trace, which holds no measurements, is refused by name)."""
    return Path(_dataset_or(text, False))


def output_path(text: str) -> Path:
    """argparse type: where a command writes (a folder, or ``perfmodel delay``'s file); ``-`` (standard output to
    many tools) and an empty name are refused: perfmodel writes files.

    >>> output_path("results")
    PosixPath('results')
    """
    if text.strip() in ("", "-"):
        raise argparse.ArgumentTypeError(
            f"{text!r} names no file or folder (perfmodel writes its outputs as files, not to standard output): "
            "name a folder or a file, e.g. --out results"
        )
    return Path(text)


def trace_file(text: str) -> Path:
    """argparse type: a trace file, or ``dataset:NAME`` for a request trace shipped with perfmodel."""
    return Path(_dataset_or(text, True))


def requests_source(text: str) -> str:
    """argparse type: a file, folder or glob of requests (as given), or ``dataset:NAME`` for a shipped trace."""
    return _dataset_or(text, True)


def _dataset_or(text: str, trace: bool | None) -> str:
    """``text`` itself, or the file of the shipped dataset it names (``dataset:NAME``, the prefix in any case):
    an unknown name, or a table where a trace is wanted (``trace``) or the reverse, is refused by name."""
    from ..ground import data as _data

    if text[: len(_data.PREFIX)].lower() != _data.PREFIX:
        return text
    name = text[len(_data.PREFIX) :].strip().lower()
    kinds = {key: kind for key, (_, kind) in _data.FILES.items() if trace is None or (kind == "trace") == trace}
    what = "dataset" if trace is None else "trace" if trace else "table of measurements"
    if name not in kinds:
        other = name in _data.FILES
        raise argparse.ArgumentTypeError(
            f"{text!r} is {'a ' + ('table' if trace else 'trace') + ', not a ' + what if other else 'not a shipped ' + what}"
            f"; use one of {', '.join('dataset:' + k for k in kinds)} (see perfmodel.datasets)"
        )
    return str(_data.path(name))


def _fail(message: str) -> Any:
    raise UsageError(message)


def floats(
    name: str,
    texts: Sequence[str],
    *,
    low: float = 0.0,
    high: float = float("inf"),
    positive: bool = False,
    rule: str = "",
) -> list[float]:
    """Numbers from comma-separated texts, within [low, high] (> 0 with ``positive``); errors begin with ``name``;
    NaN is refused as not a number, with the range the flag takes (or its input's ``rule``)."""
    values = []
    name = f"{name}: " if name else ""
    for text in texts:
        for part in str(text).split(","):
            try:
                value = flag_float(part)
            except ValueError:
                raise UsageError(f"{name}{part!r} is not a number") from None
            if math.isnan(value):  # NaN is no number at all: said as what it is, with the range the flag takes
                taken = rule or "pass a number " + ("> 0" if positive and low <= 0 else f"in [{low:g}, {high:g}]")
                raise UsageError(f"{name}{part.strip()!r} is not a number (NaN): {taken}")
            if not low <= value <= high or (positive and not value > 0):
                raise UsageError(
                    f"{name}{value:g} is "
                    + ("not > 0" if positive and low <= value <= high else f"outside [{low:g}, {high:g}]")
                )
            values.append(value)
    return values


def finite_above_zero(text: str) -> float:
    """argparse type of a flag that takes a finite number > 0 (a budget, a timeout): NaN and inf refused by name.

    >>> finite_above_zero("nan")
    Traceback (most recent call last):
    ...
    perfmodel.cli._parsing.UsageError: 'nan' is not a number (NaN): pass a finite number > 0
    """
    rule = "pass a finite number > 0"
    try:
        value = flag_float(text)
    except ValueError:
        raise UsageError(f"{text!r} is not a number: {rule}") from None
    if math.isnan(value):
        raise UsageError(f"{text.strip()!r} is not a number (NaN): {rule}")
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{value:g}: {rule}")
    return value


def _as_number(text: str) -> float | None:
    """``text`` as a number, or None when it is none (a name)."""
    try:
        return float(text)
    except ValueError:
        return None


def link_or_gb_s(text: str) -> str | float:
    """argparse type of a ``--link`` that takes a preset's name or a decimal GB/s (finite, > 0).

    >>> link_or_gb_s("50"), link_or_gb_s("ib-ndr")
    (50.0, 'ib-ndr')
    >>> link_or_gb_s("-5")
    Traceback (most recent call last):
    ...
    perfmodel.cli._parsing.UsageError: -5: a bandwidth in decimal GB/s must be a finite number > 0 (e.g. --link 50), or name a link preset (perfmodel links)
    """
    value = _as_number(text)
    if value is None:
        return text
    if not (math.isfinite(value) and value > 0):
        raise UsageError(
            f"{text.strip()}: a bandwidth in decimal GB/s must be a finite number > 0 (e.g. --link 50), "
            "or name a link preset (perfmodel links)"
        )
    return value


def link_name(text: str) -> str:
    """argparse type of a ``--link`` that takes a preset's name only: a number is refused with the flag that takes it.

    >>> link_name("50")
    Traceback (most recent call last):
    ...
    perfmodel.cli._parsing.UsageError: '50' is a bandwidth, not a link name: use --bandwidth 50 (decimal GB/s)
    """
    if _as_number(text) is not None:
        raise UsageError(f"{text!r} is a bandwidth, not a link name: use --bandwidth {text.strip()} (decimal GB/s)")
    return text


#: The model's per-row inputs (the input table's), each of which ``--column NAME=COLUMN`` may read from the file.
COLUMN_ARGUMENTS = tuple(e.name for e in ROW_INPUTS)


#: The trace formats ``--trace-format`` names (:func:`perfmodel.read_trace`'s ``format``).
TRACE_FORMATS = ("mooncake", "azure", "csv", "parquet", "jsonl")


def trace_file_options(parser: argparse.ArgumentParser) -> None:
    """How :func:`read_trace_file` reads the trace file (``perfmodel trace`` and ``perfmodel ttft`` alike):
    ``--trace-format``, its format (a file in a format's shape read as the generic table it is), and
    ``--hash-block-tokens``, the prompt tokens each hash id covers (:func:`perfmodel.read_trace`'s)."""
    from ..ground.data import MOONCAKE_BLOCK_TOKENS

    parser.add_argument(
        "--trace-format",
        choices=TRACE_FORMATS,
        help="the trace file's format (default: detected from its name, a CSV's header and a JSON line's keys); "
        "csv or jsonl reads a file shaped as Azure's or Mooncake's as a generic table, with --column",
    )
    parser.add_argument(
        "--hash-block-tokens",
        type=positive_int,
        default=MOONCAKE_BLOCK_TOKENS,
        metavar="N",
        help=f"prompt tokens each of a request's hash_ids covers (default: {MOONCAKE_BLOCK_TOKENS}, Mooncake's "
        "traces; an engine's page size for ids hashed per page)",
    )


def read_trace_file(args: argparse.Namespace, command: str, columns: Sequence[str]) -> Any:
    """``args.trace`` read as a trace (:func:`perfmodel.read_trace`): in ``--trace-format`` when given, with the
    ``--column`` mappings of ``columns`` (honoured whatever the file), its malformed lines skipped (and said on
    stderr) with ``--skip-bad-lines``; a column not found said with its flag, and a trace with no request
    refused, before any work."""
    from ..inputs.words import count
    from ..replay.traces import read_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the skipped lines: said below, in the command's words)
        try:
            trace = read_trace(args.trace, getattr(args, "trace_format", None),
                               errors="skip" if args.skip_bad_lines else "raise",
                               columns=column_pairs(args.column, columns) or None,
                               hash_block_tokens=args.hash_block_tokens)  # fmt: skip
        except ValueError as error:  # a column not found: the fix is the command line's flag, not Python's columns=
            missing = getattr(error, "missing_columns", None)
            if not missing:
                raise
            flags = " ".join(f"--column {name}=COLUMN" for name in missing)
            raise UsageError(f"{str(error).split(' Fix: ')[0]} Fix: pass {flags} (the file's column)") from None
    skipped = trace.attrs.get("skipped_lines")
    if skipped:
        print(
            f"perfmodel {command}: skipped {count(skipped, 'malformed line')} of {given_as(args.trace)}",
            file=sys.stderr,
        )
    if not len(trace):  # (nothing to replay, nor to draw: said before any work)
        raise UsageError(f"{given_as(args.trace)} has no requests" + (" (every line of it skipped as malformed)" if skipped
                         else "") + ": give a trace with one request or more")  # fmt: skip
    return trace


def column_pairs(pairs: Sequence[str], allowed: Sequence[str] = COLUMN_ARGUMENTS) -> dict[str, str]:
    """``NAME=COLUMN`` options as a mapping; a NAME outside ``allowed`` is an error with the closest one, and so
    is a NAME given twice (the last would win without a word).

    >>> column_pairs(["num_input_tokens=prompt", "arrival_ms=t"], ["num_input_tokens", "arrival_ms"])
    {'num_input_tokens': 'prompt', 'arrival_ms': 't'}
    """
    mapping: dict[str, str] = {}
    for pair in pairs:
        name, column = name_value("--column", pair, allowed, f"{allowed[0]}=my_column")
        if name in mapping:
            raise UsageError(f"--column {name} given twice ({name}={mapping[name]}, {name}={column}): give it once")
        mapping[name] = column
    return mapping


def name_value(option: str, spec: str, allowed: Sequence[str], example: str) -> tuple[str, str]:
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


def table_options(parser: argparse.ArgumentParser, names: Sequence[str], *, many: bool, **help: str) -> None:
    """The flags of the inputs ``names``, from the input table: flag, choices and first docstring
    sentence (or ``help``'s text) each; numbers are checked by the API, with the table's messages.
    Inputs given one instead of another are mutually exclusive."""
    groups: dict[str, Any] = {}
    for name in names:
        entry = INPUTS[name]
        pair = entry.instead_of or next((e.name for e in INPUTS.values() if e.instead_of == name), None)
        target = groups.setdefault(pair, parser.add_mutually_exclusive_group()) if pair else parser
        target.add_argument(
            cast(str, entry.cli),  # (the inputs flags() gives have a flag)
            nargs="+" if many else None,
            dest=name,
            help=help.get(name, plain(entry.doc.split(". ")[0])),
            **value_kind(name),
        )


def value_kind(name: str) -> dict[str, Any]:
    """How a flag of input ``name`` takes its value: its choices, or its reader and a metavar saying its unit.

    >>> value_kind("hop_latency_ms")["metavar"], value_kind("nics_per_node")["metavar"]
    ('MS', 'N')
    >>> value_kind("blocks_per_message")["metavar"], value_kind("prefill_tokens_per_s")["metavar"]
    ('BLOCKS', 'RATE')
    """
    entry = INPUTS[name]
    if entry.choices or entry.labels:
        return dict(choices=list(entry.choices or entry.labels or ()))  # (either is non-empty here)
    unit = next(
        (u for suffix, u in (("_ms", "MS"), ("_gb_s", "GBPS"), ("_per_s", "RATE")) if name.endswith(suffix)), None
    )
    counted = (
        name.split("_per_", maxsplit=1)[0].rsplit("_", maxsplit=1)[-1].upper()
    )  # (what is counted: blocks_per_message, BLOCKS)
    return dict(type=reader(name), metavar=unit or ("N" if entry.kind == "degree" else counted))


def plain(text: str) -> str:
    """A docstring's reST as plain text for ``--help``: roles to their target's last name, literals bare.

    >>> plain("a :class:`perfmodel.TransferMode` or ``'prefill'`` (see :func:`~perfmodel.sweep`)")
    "a TransferMode or 'prefill' (see sweep)"
    >>> plain("see :doc:`the clusters page </clusters>`")
    'see the clusters page'
    """
    text = re.sub(r":doc:`([^`<]+?)\s*<[^`>]+>`", r"\1", text)  # a page by its title
    text = re.sub(r":[a-z]+:`~?(?:[^`<]*<)?([^`>]+)>?`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("``", "")


def reader(name: str, where: str = "") -> Callable[[str], Any]:
    """How a value of input ``name`` is read from the command line (a flag's, or a --grid axis'), by its
    kind in the input table: whole numbers as counts ('32k'), other numbers as numbers >= 0, the rest as text.
    """
    entry = INPUTS[name]
    if entry.kind == "degree":
        return positive_int
    if entry.kind == "count" and cast(Valid, entry.valid).whole:  # (every count has a valid range)
        return token_count if name == "num_input_tokens" else lambda text: token_count(text, entry.rule)
    if entry.kind == "real" and entry.group == "cluster_field":
        return lambda text: _ruled(where, name, text)
    if entry.kind in ("count", "real"):
        return lambda text: _within(where, name, text)
    return str


def _within(where: str, name: str, text: str) -> float:
    """One number of input ``name`` within its valid range, or its rule in words, with the value given (a flag
    takes one value for every row: never said as rows).

    >>> _within("", "blocks_per_message", "1.5")
    Traceback (most recent call last):
    ...
    perfmodel.cli._parsing.UsageError: 1.5: blocks per message are whole numbers >= 1, or inf (one message per layer)
    >>> _within("", "blocks_per_message", "inf"), _within("", "latency_ms", "2")
    (inf, 2.0)
    """
    from ..inputs.table import outside

    entry = INPUTS[name]
    said = f"{where}: " if where else ""
    try:
        value = flag_float(text)
    except ValueError:
        raise UsageError(f"{said}{text!r} is not a number: {entry.rule}") from None
    if math.isnan(value):  # (NaN marks an unknown row in a column; a flag gives a number)
        raise UsageError(
            f"{said}{text.strip()!r} is not a number (NaN): a flag takes a number (NaN only marks a row of a "
            f"file without a value); {entry.rule}"
        )
    import numpy as np

    with np.errstate(invalid="ignore"):  # (inf - floor(inf) is NaN: outside's whole-number test)
        bad = outside(value, cast(Valid, entry.valid))  # (every number's input has a valid range)
    if bad:
        raise UsageError(f"{said}{value:g}: {entry.rule}")
    return value


def _ruled(where: str, name: str, text: str) -> float:
    """A number of a cluster field ``name`` within its valid range, or its rule in words (not ``[0, inf]``:
    ``--hop-latency-ms inf`` is refused as the cluster refuses ``hop_latency_ms=inf``).

    >>> _ruled("", "oversubscription", "0.5")
    Traceback (most recent call last):
    ...
    perfmodel.cli._parsing.UsageError: 0.5: pass oversubscription as a number >= 1 (1: non-blocking)
    """
    from ..inputs.table import outside

    if text.strip().lower() in ("nan", "+nan", "-nan"):
        raise UsageError(f"{where + ': ' if where else ''}{text.strip()!r} is not a number (NaN): {INPUTS[name].rule}")
    value = floats(where, [text], low=-math.inf)[0]
    if not math.isfinite(value) or outside(value, cast(Valid, INPUTS[name].valid)):  # (no field takes NaN, inf)
        raise UsageError(f"{where + ': ' if where else ''}{value:g}: {INPUTS[name].rule}")
    return value


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The inputs given as flags built from the input table (:func:`perfmodel.inputs.table.flags`), by the API's names."""
    return {name: getattr(args, name) for name in TABLE_FLAGS if getattr(args, name, None) is not None}


#: Every input some command takes as a flag built from the input table.
TABLE_FLAGS = tuple(dict.fromkeys(name for command in ("sweep", "trace", "delay") for name in flags(command)))


@contextlib.contextmanager
def one_line_warnings(command: str, *, every: bool = True) -> Iterator[None]:
    """Inside: each warning shown is one line on stderr, ``perfmodel COMMAND: warning: ...`` (not Python's two lines
    naming perfmodel's own source file); ``every``: each ``UserWarning`` is shown, each time (else Python's filters
    decide, as around a whole command: a library's warnings they hide stay hidden)."""

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        print(f"perfmodel {command}: warning: {str(message).strip().splitlines()[0]}", file=sys.stderr)

    with warnings.catch_warnings():
        if every:
            warnings.simplefilter("always", UserWarning)
        warnings.showwarning = show
        yield


def command_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The flags of one command, by the API names a message may use (for messages that name an argument): each
    option of ``parser`` by its ``dest`` (the input table's flags take the API's names as theirs), the one flag
    of a switch by ``NAME=VALUE`` (``errors=skip``: ``--skip-bad-lines``), two flags for one input as
    ``--a/--b``, and the inputs read from a column as ``--column NAME=COLUMN``. A name the command has no flag for
    is not in it: its message keeps the API's word, never another command's flag.

    >>> from perfmodel.cli._main import build_parser
    >>> flags = command_flags(build_parser().parse_args(["trace", "t.csv", "--out", "o"]).command_parser)
    >>> flags["decode_cache_blocks"], flags["fallback_delay_ms"], flags["errors=skip"], "chunk_rows" in flags
    ('--cache-blocks', '--fallback-delay-ms', '--skip-bad-lines', False)
    >>> flags["ready_ms=arrival_ms"]
    '--column ready_ms=arrival_ms'
    """
    flags: dict[str, str] = {}
    for action in parser._actions:
        longs = [option for option in action.option_strings if option.startswith("--")]
        if not longs or action.dest in (argparse.SUPPRESS, "help", "debug") or action.dest in flags:
            continue
        flags[action.dest] = longs[0]
        if isinstance(action, argparse._StoreTrueAction):  # a switch: name=True is the flag alone
            flags[f"{action.dest}=True"] = longs[0]
        for choice in action.choices or ():  # (a value outside the choices is not this flag's: said as the API's)
            flags[f"{action.dest}={choice}"] = f"{longs[0]} {choice}"
    if "skip_bad_lines" in flags:  # a reader's errors='skip' is this switch
        flags["errors=skip"] = flags["skip_bad_lines"]
    if "trace_format" in flags:  # read_trace's format= is --trace-format here (--format is the output's)
        for key in [k for k in flags if k == "format" or k.startswith("format=")]:
            del flags[key]
        for key, said in list(flags.items()):
            if key == "trace_format" or key.startswith("trace_format="):
                flags[key.replace("trace_format", "format", 1)] = said
    for name, pair in (
        ("kv_transfer_bandwidth", ("bandwidth", "link")),
        ("kv_bytes_per_token", ("kv_bytes_per_token", "model")),
    ):
        if all(dest in flags for dest in pair):
            flags[name] = "/".join(flags[dest] for dest in pair)
    for dest, said in list(flags.items()):  # a cluster's field flag (dest cluster_NAME): NAME in the API's words
        if dest.startswith("cluster_"):
            flags.setdefault(dest.removeprefix("cluster_"), said)
    if "column" in flags:
        for name in ("num_input_tokens", "worker_type", "completed", "destination_missing_tokens"):
            flags.setdefault(name, f"--column {name}=COLUMN")
        flags.setdefault("ready_ms=arrival_ms", "--column ready_ms=arrival_ms")  # (the API's ready_ms='arrival_ms')
    return flags


def in_flags(text: str, flags: dict[str, str]) -> str:
    """An API error's words for the command line: ``name='value'`` as ``--flag value`` (or as the flag ``flags``
    gives ``name=value``: a switch, a choice; a value outside a flag's choices stays the API's), ``name >= value``
    as ``--flag >= value``, ``drop name`` as ``drop --flag``, an argument's name alone (one with an underscore,
    outside quotes) as ``--flag``, for the inputs that have one flag; a flag then said twice in a row, ``--flag
    (--flag)``, once.

    >>> in_flags("pass contention='fair', or drop block_size (e.g. prefill_kv_tokens=1)",
    ...           {"contention": "--contention", "block_size": "--block-size", "prefill_kv_tokens": "--prefill-kv-tokens"})
    'pass --contention fair, or drop --block-size (e.g. --prefill-kv-tokens 1)'
    >>> in_flags("pass prefill_kv_tokens >= 191,378 (a block_size < x stays)", {"prefill_kv_tokens": "--prefill-kv-tokens"})
    'pass --prefill-kv-tokens >= 191,378 (a block_size < x stays)'
    """
    import re

    def flag(name: str) -> str | None:
        said = flags.get(name)
        return said if said and said.startswith("--") and "/" not in said and " " not in said else None

    def value(match: re.Match[str]) -> str:
        name, given = match.group(1), match.group(3) or match.group(2)
        if name is None:  # a flag and its value already: as it is
            return match.group(0)
        if given is None:  # a name alone: only an argument's (with an underscore) is a flag's
            return (flag(name) or name) if "_" in name else name
        if f"{name}={given}" in flags:
            return flags[f"{name}={given}"]
        said = flag(name)
        chosen = any(key.startswith(f"{name}=") for key in flags)  # (a flag of choices, and not one of them)
        return f"{said} {given}" if said and not chosen else match.group(0)

    text = re.sub(
        r"--[\w-]+ [\w.+-]+|(?<![\w.'\"\[/-])([a-z][a-z0-9_]*)(?:=('([^']*)'|[\w.+-]+)|(?![\w'\"(=]))", value, text
    )
    text = re.sub(r"\b([a-z][a-z0-9_]*)(?= [<>]=? )", lambda m: flag(m.group(1)) or m.group(1), text)
    text = re.sub(r"\bdrop ([a-z][a-z0-9_]*)\b", lambda m: f"drop {flag(m.group(1)) or m.group(1)}", text)
    return re.sub(r"(--[\w-]+) \(\1\)", r"\1", text)


def as_flags(text: str, args: argparse.Namespace) -> str:
    """``text`` (a message of the API) in the words of the command ``args`` were parsed for: its own flags where it
    names an argument (:func:`command_flags`); for what a command prints itself, e.g. its warnings.

    >>> from perfmodel.cli._main import build_parser
    >>> as_flags("decode_cache_blocks=4 has no effect", build_parser().parse_args(["trace", "t.csv", "--out", "o"]))
    '--cache-blocks 4 has no effect'
    """
    return in_flags(text, command_flags(args.command_parser))
