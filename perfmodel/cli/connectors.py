"""``perfmodel connectors``: the engines' KV connectors, built-in and yours, with their sources; ``--fit TABLE``: a
connector's costs separated from a transport's in a table of measured end-to-end handoffs, saved with ``--save``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError, warn
from ..inputs.table import INPUTS
from ..inputs.words import count
from ._parsing import UsageError, link_name, one_line_warnings, positive_int

#: The columns a table of measured handoffs has (``descriptors`` optional: counted from the model otherwise).
COLUMNS = ("num_input_tokens", "measured_ms")


def cmd_connectors(args: argparse.Namespace) -> int:
    flags = ("link", "model", "block_size", "tp", "kv_layout", "name", "save", "replace")
    given = [f"--{k.replace('_', '-')}" for k in flags if getattr(args, k) not in (None, False)]
    if given and not args.fit:
        raise UsageError(f"{', '.join(given)} {'goes' if len(given) == 1 else 'go'} with --fit. Fix: add --fit TABLE")
    if args.save and args.name is None:
        raise UsageError("--save saves the fitted connector under --name, which is not given. Fix: add --name NAME")
    with one_line_warnings("connectors"):  # a user preset that cannot be used: one line, and the others listed
        return _fit(args) if args.fit else _list()


def _list() -> int:
    import pandas as pd

    from ..network.connector import CONNECTORS, WINDOWS, user_connectors

    connectors = {**CONNECTORS, **user_connectors()}
    rows = [
        {
            "connector": name,
            "ms per request": c.request_ms,
            "us per descriptor": c.per_descriptor_ms * 1000,
            "its metric covers": c.window,
            "versions": c.version or "-",
            "kind": "built-in" if name in CONNECTORS else "yours",
        }
        for name, c in connectors.items()
    ]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    print("\nSources:\n" + "\n".join(f"  {name}: {c.source or '-'}" for name, c in connectors.items()))
    print("\nWindows:\n" + "\n".join(f"  {window}: {words}" for window, words in WINDOWS.items()))
    print(
        "\nUse one wherever a link goes: --connector NAME (its costs are added to the latency and per-message costs). "
        "Fit your own: perfmodel connectors --fit handoffs.csv --link NAME --model NAME --block-size TOKENS --name NAME "
        "--save (the block size counts the descriptors each handoff posts)"
    )
    return 0


def _fit(args: argparse.Namespace) -> int:
    from ..handoff import handoff_delay_ms
    from ..inputs.user_presets import check_free
    from ..model.models import kv_messages
    from ..network.connector import CONNECTORS, fit_connector

    if args.link is None or args.model is None:
        raise UsageError("--fit needs --link (the transport's link or cluster) and --model. Fix: give both")
    if args.replace and not args.save:
        raise UsageError("--replace replaces a saved connector of --name's name, so it needs --save. Fix: add --save")
    if args.save:  # (before anything is fitted or printed: a refused name or an unwritable file leaves nothing)
        check_free("connectors", args.name, builtin={*CONNECTORS, "none"}, replace=args.replace)
    _check_model(args.model)
    numbers, where = _measured(args.fit)
    tokens = numbers["num_input_tokens"]
    tp, kv_layout = args.tp or 1, args.kv_layout or INPUTS["kv_layout"].default
    transport = handoff_delay_ms(tokens, args.link, args.model, block_size=args.block_size, tp=tp, kv_layout=kv_layout)
    if "descriptors" in numbers:
        descriptors = numbers["descriptors"]
    elif args.block_size is not None:
        descriptors = kv_messages(args.model, tokens, args.block_size, kv_layout=kv_layout)  # (per rank)
    else:
        descriptors = None
    try:
        fitted = fit_connector(
            numbers["measured_ms"], transport, descriptors, name=args.name or "fitted", source=_source(args)
        )
    except InputError as error:  # (the table's handoffs: named with the file)
        raise UsageError(f"{where}: {error.problem}. Fix: {error.fix}") from None
    assert fitted.fit is not None  # (a fit's report)
    print(f"fitted {fitted.name!r} over {args.link} ({args.model}): {fitted.fit.describe()}")
    print(fitted.describe())
    _warn_fit(fitted, descriptors)
    if args.save:
        _save(fitted, args.replace)
    return 0


def _check_model(model: str) -> None:
    """Refuse an unknown ``--model`` by its flag (before the table is read)."""
    from ..model.models import kv_terms

    try:
        kv_terms(model)
    except ValueError as error:
        raise UsageError(f"--model {model!r}: {str(error).removeprefix(f'model {model!r}: ')}") from None


def _measured(table_path: str) -> tuple[dict[str, Any], str]:
    """The table's columns as numbers (``descriptors`` when it has one) and the table's name; a missing column,
    no row, or a cell that is no valid value: one line naming the file and the line."""
    from ..calibration import read_measurements

    table, places, where = read_measurements(table_path)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise UsageError(f"{where} has no column {' or '.join(missing)} (it has {list(table.columns)}). Fix: give "
                         "each handoff's num_input_tokens and measured_ms (end to end)")  # fmt: skip
    if len(table) == 0:
        raise UsageError(f"{where} holds no handoff (a header alone). Fix: give one row per measured handoff")
    return {name: _numbers(table, places, where, name) for name in (*COLUMNS, "descriptors") if name in table}, where


def _source(args: argparse.Namespace) -> str:
    """The command that fitted a connector (its saved ``source``): the table's full path, the link and model."""
    from pathlib import Path

    table = str(Path(args.fit).resolve()) if Path(args.fit).exists() else args.fit
    words = ["perfmodel connectors --fit", table, f"--link {args.link}", f"--model {args.model}"]
    words += [
        f"--{k.replace('_', '-')} {getattr(args, k)}" for k in ("block_size", "tp", "kv_layout") if getattr(args, k)
    ]
    return " ".join(words)


def _warn_fit(fitted: Any, descriptors: Any) -> None:
    """Say when a fit is far from its measurements, or has no point left over to check it."""
    import numpy as np

    report = fitted.fit
    costs = 2 if descriptors is not None and np.ptp(descriptors) > 0 else 1
    if report.far:
        warn(report.far_off("check --link, --model and --block-size, and the table's times (end to end, in ms)"))
    if report.points <= costs:
        warn(f"{count(report.points, 'point')} for {count(costs, 'fitted cost')}: nothing is left over to check "
             "the fit (its error is 0 by construction); measure more handoffs of other sizes")  # fmt: skip


def _save(fitted: Any, replace: bool) -> None:
    import shlex

    from ..inputs.user_presets import key_of
    from ..network.connector import save_connector

    path = save_connector(fitted, replace=replace)
    key = key_of(fitted.name)  # (names ignore case: the preset is kept in lower case)
    spelled = "" if key == fitted.name else f" (names ignore case: {fitted.name!r} is kept as {key!r})"
    print(f"saved connector {key!r}{spelled} to {path}; use --connector {shlex.quote(key)}")


#: What each column of the table holds: the words, and whether its values are whole, and above 0 (else from 0).
_RULES = {
    "num_input_tokens": ("whole numbers >= 0", True, False),
    "measured_ms": ("finite numbers > 0 (ms)", False, True),
    "descriptors": ("whole numbers >= 0", True, False),
}


def _numbers(table: Any, places: list[str], where: str, name: str) -> Any:
    """Column ``name`` of a table as read (text cells stay text) as float64 numbers, or one line naming the first
    cell that is none, or no valid value of the column. Booleans, durations and dates are refused as
    :func:`perfmodel.calibrate` refuses them (never true as 1, nor a Parquet duration's nanoseconds as ms)."""
    import numpy as np
    import pandas as pd

    from ..ground.measured_files import refuse_non_numbers

    try:
        refuse_non_numbers(table[name], name, where, places)
    except InputError as error:
        raise UsageError(str(error).removesuffix(".")) from None
    values = pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isnan(values).any():
        first = int(np.argmax(np.isnan(values)))
        raise UsageError(f"{where}, {places[first]}: {name} {table[name].iloc[first]!r} is not a number. Fix: give "
                         f"{name} as numbers")  # fmt: skip
    rule, whole, positive = _RULES[name]
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(values) | ((values <= 0) if positive else (values < 0))
        if whole:
            bad |= values != np.floor(values)
    if bad.any():
        first = int(np.argmax(bad))
        raise UsageError(f"{where}, {places[first]}: {name} {table[name].iloc[first]!r} is not one of {rule}. Fix: "
                         f"give {name} as {rule}")  # fmt: skip
    return values


def register(sub: Any) -> None:
    """Add ``perfmodel connectors`` to the subcommands ``sub``."""
    parser = sub.add_parser(
        "connectors",
        help="the engines' KV connectors, built-in and yours; --fit: yours from measured handoffs",
        description="List the KV connectors (an engine's integration over its transport: a cost per request, a "
        "cost per descriptor, and what its engine's transfer metric covers), each figure with its source. "
        "--fit TABLE separates a connector's costs from the transport's in measured end-to-end handoffs "
        "(columns num_input_tokens, measured_ms, and optionally descriptors).",
    )
    parser.add_argument("--fit", metavar="TABLE", help="a CSV, Parquet or JSON-lines table of measured handoffs")
    parser.add_argument("--link", type=link_name, help="the transport's link, profile or cluster (with --fit)")
    parser.add_argument("--model", help="the model handed off (with --fit)")
    parser.add_argument("--block-size", type=positive_int, metavar="TOKENS", help="KV block size: descriptors counted")
    parser.add_argument("--tp", type=positive_int, metavar="N", help=INPUTS["tp"].doc + " (with --fit; default 1)")
    parser.add_argument(
        "--kv-layout", choices=INPUTS["kv_layout"].choices, help=f"with --fit (default {INPUTS['kv_layout'].default})"
    )
    parser.add_argument("--name", help="the fitted connector's name (with --save: required)")
    parser.add_argument("--save", action="store_true", help="save it as a user preset under --name")
    parser.add_argument("--replace", action="store_true", help="with --save: replace a saved one of that name")
    parser.set_defaults(run=cmd_connectors)
