"""``perfmodel connectors``: the engines' KV connectors, built-in and yours, with their sources; ``--fit TABLE``: a
connector's costs separated from a transport's in a table of measured end-to-end handoffs, saved with ``--save``."""

from __future__ import annotations

import argparse
from typing import Any

from ..inputs.table import INPUTS
from ._parsing import UsageError, link_name, one_line_warnings, positive_int

#: The columns a table of measured handoffs has (``descriptors`` optional: counted from the model otherwise).
COLUMNS = ("num_input_tokens", "measured_ms")


def cmd_connectors(args: argparse.Namespace) -> int:
    given = [f"--{k.replace('_', '-')}" for k in ("link", "model", "block_size", "name", "save", "replace")
             if getattr(args, k) not in (None, False)]  # fmt: skip
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
        "Fit your own: perfmodel connectors --fit handoffs.csv --link NAME --model NAME --name NAME --save"
    )
    return 0


def _fit(args: argparse.Namespace) -> int:
    from ..calibration import read_measurements
    from ..handoff import handoff_delay_ms
    from ..inputs.user_presets import check_free
    from ..model.models import kv_messages
    from ..network.connector import CONNECTORS, fit_connector, save_connector

    if args.link is None or args.model is None:
        raise UsageError("--fit needs --link (the transport's link or cluster) and --model. Fix: give both")
    if args.replace and not args.save:
        raise UsageError("--replace replaces a saved connector of --name's name, so it needs --save. Fix: add --save")
    if args.save:  # (before anything is fitted or printed: a refused name leaves nothing)
        check_free("connectors", args.name, builtin={*CONNECTORS, "none"}, replace=args.replace)
    table, places, where = read_measurements(args.fit)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise UsageError(f"{where} has no column {' or '.join(missing)} (it has {list(table.columns)}). Fix: give "
                         "each handoff's num_input_tokens and measured_ms (end to end)")  # fmt: skip
    numbers = {name: _numbers(table, places, where, name) for name in (*COLUMNS, "descriptors") if name in table}
    tokens = numbers["num_input_tokens"]
    shape = dict(tp=args.tp, kv_layout=args.kv_layout)
    transport = handoff_delay_ms(tokens, args.link, args.model, block_size=args.block_size, **shape)
    if "descriptors" in numbers:
        descriptors = numbers["descriptors"]
    elif args.block_size is not None:
        descriptors = kv_messages(args.model, tokens, args.block_size, kv_layout=args.kv_layout)  # (per rank)
    else:
        descriptors = None
    fitted = fit_connector(numbers["measured_ms"], transport, descriptors, name=args.name or "fitted", source=where)
    assert fitted.fit is not None  # (a fit's report)
    print(f"fitted {fitted.name!r} over {args.link} ({args.model}): {fitted.fit.describe()}")
    print(fitted.describe())
    if args.save:
        print(f"saved to {save_connector(fitted, replace=args.replace)}")
    return 0


def _numbers(table: Any, places: list[str], where: str, name: str) -> Any:
    """Column ``name`` of a table as read (text cells stay text) as float64 numbers, or one line naming the first
    cell that is none."""
    import numpy as np
    import pandas as pd

    values = pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isnan(values).any():
        first = int(np.argmax(np.isnan(values)))
        raise UsageError(f"{where}, {places[first]}: {name} {table[name].iloc[first]!r} is not a number. Fix: give "
                         f"{name} as numbers")  # fmt: skip
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
    parser.add_argument("--tp", type=positive_int, default=1, metavar="N", help=INPUTS["tp"].doc)  # (with --fit)
    parser.add_argument("--kv-layout", default="layer_kv", choices=INPUTS["kv_layout"].choices)
    parser.add_argument("--name", help="the fitted connector's name (with --save: required)")
    parser.add_argument("--save", action="store_true", help="save it as a user preset under --name")
    parser.add_argument("--replace", action="store_true", help="with --save: replace a saved one of that name")
    parser.set_defaults(run=cmd_connectors)
