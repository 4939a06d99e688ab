"""Tests generated from the input table (perfmodel.inputs.table): every input, as a scalar and as an array,
on the serial and the parallel kernel, through every entry point that takes it, against the plain-Python
reference; and an invalid value of every input at every entry point gives an InputError naming it.

An input added to the table is tested here without a new test being written: its example value, its
valid range, its sweep and replay-grid axes, its replay form and its command-line flag say what to try.
"""

from __future__ import annotations

import enum
import inspect
import math
import re
import warnings
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError, handoff_delay_ms, handoff_delays, replay_grid, replay_handoffs, sweep
from perfmodel.inputs.table import GROUPS, INPUTS, LAYERWISE, OPTIONS, ROW_INPUTS, SAME, Input

from .reference import destination_missing_tokens_row, handoff_delay_row

TOKENS = [0, 100, 4096, 20_000]
#: What every call passes (the model's required inputs, and the tokens a destination lacks).
BASE = {
    "num_input_tokens": TOKENS,
    "kv_transfer_bandwidth": 50.0,
    "kv_bytes_per_token": 1000.0,
    "destination_missing_tokens": 1024,
}
#: The option that switches an extension group on, where one does.
SWITCH = {"layerwise": {"overlap": "layerwise"}, "block": {"kv_layout": "block"}}
TESTED = [e for e in ROW_INPUTS if e.name != "num_input_tokens"]
#: What makes each option matter (its model, or the inputs it shapes).
OPTION_CONTEXT = {
    "kv_cache_dtype": {"kv_bytes_per_token": "llama-3.1-8b"},
    "tp": {"kv_bytes_per_token": "llama-3.1-8b"},
    "scope": {"kv_bytes_per_token": "llama-3.1-8b"},
    "decode_tp": {"kv_bytes_per_token": "llama-3.1-70b", "tp": 8},
    "overlap": {"kv_bytes_per_token": "llama-3.1-8b", "prefill_ms": 5.0},
    "kv_layout": {"kv_bytes_per_token": "llama-3.1-8b", "per_message_ms": 0.0005, "block_size": 16},
}


def context(entry: Input) -> dict:
    """The other inputs that make ``entry`` matter: its extension group at its examples (one of two
    alternatives), and the option that turns the group on."""
    found = dict(SWITCH.get(entry.group, {}))
    for other in GROUPS.get(entry.group, ()):
        if not other.instead_of:
            found[other.name] = other.example
    if entry.instead_of:
        found.pop(entry.instead_of, None)
    return found


def array_of(entry: Input) -> list:
    """An array of valid values of ``entry``, as long as :data:`TOKENS`."""
    if entry.name == "num_input_tokens":
        return list(TOKENS)
    second = entry.default if entry.kind in ("code", "flag") else OTHER_NAME.get(entry.name, entry.example * 2)
    return [entry.example, second] * (len(TOKENS) // 2)


#: A second valid value of an input given by name (one that costs nothing: the example costs 3 ms a request).
OTHER_NAME = {"connector": "vllm-nixl"}


def invalid_values(entry: Input) -> list:
    """Values outside ``entry``'s valid range (from the table)."""
    if entry.kind in ("code", "flag"):
        return ["bogus", 7]
    valid = entry.valid
    found = [valid.low - 1]
    if valid.open_low:
        found.append(valid.low)
    if valid.whole:
        found.append(valid.low + 1.5)
    if not valid.nan_ok:
        found.append(math.nan)
    if not valid.inf_ok:
        found.append(math.inf)
    return found


def _at(value, i):
    return value[i] if isinstance(value, (list, np.ndarray)) else value


def expected(call: dict, n: int = len(TOKENS)) -> np.ndarray:
    """The reference's delays, row by row, of a call of :func:`perfmodel.handoff_delay_ms`."""
    layerwise = call.get("overlap") == "layerwise"
    rows = []
    for i in range(n):
        value = {e.name: _at(call.get(e.name, e.default if not e.required else None), i) for e in ROW_INPUTS}
        value = {k: (None if v is inspect.Parameter.empty else v) for k, v in value.items()}
        delay = handoff_delay_row(
            value["num_input_tokens"],
            value["kv_transfer_bandwidth"],
            value["kv_bytes_per_token"],
            value["worker_type"],
            value["completed"],
            value["mode"],
            value["destination_missing_tokens"],
            0 if value["state_bytes"] is None else value["state_bytes"],
            value["latency_ms"],
            value["fallback_delay_ms"],
            value["per_block_ms"],
            value["block_size"],
            value["per_message_ms"],
            value["prefill_ms"],
            value["prefill_tokens_per_s"],
            value["num_layers"] if layerwise else None,
            value["layer_group"],
            value["layerwise_min_tokens"],
            kv_layout=call.get("kv_layout", "layer_kv"),
            message_layers=[("full", 0, 2)] * int(value["num_layers"] or 0),
            blocks_per_message=value["blocks_per_message"],
        )
        rows.append(math.nan if delay is None else delay)
    return np.array(rows)


@pytest.fixture(params=["serial", "parallel"])
def kernel(request) -> Iterator[bool]:
    """Both kernels at every entry point: the threshold of the parallel one lowered to every call."""
    parallel = request.param == "parallel"
    with perfmodel.set_options(parallel_min_rows=0 if parallel else 1 << 62):
        yield parallel


def _assert_close(got, want) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=float), want, rtol=1e-12, atol=0, equal_nan=True)


def _names(error: InputError, entry: Input) -> bool:
    return entry.name in (error.argument or "") or entry.name in str(error)


# --- every entry point that takes a row's inputs: the numpy API, the facade, the accessor, Dask, the command line

#: The entry points a case of every input goes through (``tests/entry_points.py``; a sweep and a replay take
#: lists of values and replay forms instead: their own tests below).
IN_PROCESS = ("handoff_delay_ms", "handoff_delays", "accessor", "dask")
#: (form, kernel, entry point): the parallel kernel where it runs in this process (it runs the serial loop on
#: each thread's rows: tested where the input is an array).
CASES = [
    *((form, "serial", entry) for form in ("scalar", "array") for entry in (*IN_PROCESS, "cli")),
    *(("array", "parallel", entry) for entry in IN_PROCESS),
]


def _through(call_entry_point, call: dict):
    """``call`` (the numpy API's keywords) through an entry point (the fixture, or its ``refusal``)."""
    rest = dict(call)
    return call_entry_point(
        rest.pop("num_input_tokens"), rest.pop("kv_transfer_bandwidth"), rest.pop("kv_bytes_per_token"), **rest
    )


@pytest.mark.parametrize(("form", "kernel", "entry_point"), CASES, indirect=["kernel", "entry_point"])
@pytest.mark.parametrize("entry", ROW_INPUTS, ids=lambda e: e.name)
def test_every_input_at_every_entry_point(entry, form, kernel, entry_point):
    value = entry.example if form == "scalar" and entry.name != "num_input_tokens" else array_of(entry)
    call = {**BASE, **context(entry), entry.name: value}
    _assert_close(_through(entry_point, call), expected(call))


@pytest.mark.parametrize("entry_point", [*IN_PROCESS, "cli"], indirect=True)
@pytest.mark.parametrize("entry", ROW_INPUTS, ids=lambda e: e.name)
def test_an_invalid_value_of_every_input_is_refused_at_every_entry_point(entry, entry_point):
    """One line naming the input (the command line: its flag or column, exit code 2, nothing written)."""
    bad = invalid_values(entry)[0]
    call = {**BASE, **context(entry), entry.name: TOKENS[:-1] + [bad] if entry.name == "num_input_tokens" else bad}
    message = _through(entry_point.refusal, call)
    assert entry.name in message or (entry.cli and entry.cli in message), message


@pytest.mark.parametrize("kernel", ["serial"], indirect=True)  # (both kernels count invalid rows: test_handoff)
@pytest.mark.parametrize("entry", ROW_INPUTS, ids=lambda e: e.name)
def test_an_invalid_value_of_every_input_is_refused_naming_it(entry, kernel):
    for bad in invalid_values(entry):
        for value in (bad, [entry.example if entry.example is not None else 1] * 3 + [bad]):
            call = {**BASE, **context(entry), entry.name: value}
            if isinstance(value, list) and entry.name != "num_input_tokens":
                call["num_input_tokens"] = TOKENS
            with pytest.raises(InputError) as raised:
                handoff_delay_ms(**call)
            assert _names(raised.value, entry), (bad, str(raised.value))
            df = pd.DataFrame({"bad": value if isinstance(value, list) else [value] * len(TOKENS)})
            with pytest.raises(InputError) as raised:
                handoff_delays(df, **{**call, entry.name: "bad"})
            assert "'bad'" in str(raised.value) and _names(raised.value, entry), str(raised.value)
            coerced = handoff_delay_ms(**call, errors="coerce")
            assert np.isnan(coerced).all() if np.ndim(value) == 0 else np.isnan(coerced[-1])


def _documented_names(function) -> set[str]:
    """The names a numpydoc Parameters section documents (``a, b`` lines count for each; ``**axes`` as axes)."""
    doc = inspect.getdoc(function) or ""
    section = doc.partition("Parameters\n----------\n")[2]
    section = section.split("\nReturns\n")[0].split("\nExamples\n")[0]
    return {
        name.strip().lstrip("*")
        for line in section.splitlines()
        if line and not line.startswith(" ")
        for name in line.split(",")
    }


@pytest.mark.parametrize("name", [n for n in perfmodel.__all__ if inspect.isfunction(getattr(perfmodel, n))])
def test_every_public_function_documents_every_parameter(name):
    function = getattr(perfmodel, name)
    missing = set(inspect.signature(function).parameters) - _documented_names(function)
    assert not missing, f"{name} does not document {sorted(missing)}"


def test_every_public_parameter_is_documented_from_the_table():
    """Each input's docstring line is the table's, in every signature that takes it."""
    from perfmodel import frame

    for function in (handoff_delay_ms, frame.handoff_delays, perfmodel.required_bandwidth, perfmodel.max_tokens_within):
        doc = inspect.getdoc(function)  # (indentation as Python 3.13 keeps it: none)
        for name, parameter in inspect.signature(function).parameters.items():
            stars = "**" if parameter.kind is parameter.VAR_KEYWORD else ""  # (numpydoc writes **inputs)
            assert f"\n{stars}{name}\n" in doc, (function.__name__, name)
        for entry in (*ROW_INPUTS, *OPTIONS):
            if entry.name in inspect.signature(function).parameters and not (
                entry.name == "num_input_tokens"
                and function.__name__ != "handoff_delay_ms"
                and function.__name__ != "handoff_delays"
            ):  # (the inverse questions take fractional counts)
                assert " ".join(entry.doc.split()[:4]) in " ".join(doc.split()), (function.__name__, entry.name)


def test_signatures_take_the_tables_inputs_with_its_defaults():
    from perfmodel import frame

    numpy_api = inspect.signature(handoff_delay_ms).parameters
    facade = inspect.signature(frame.handoff_delays).parameters
    for entry in (*ROW_INPUTS, *OPTIONS):
        assert entry.name in numpy_api, entry.name
        if not entry.required:
            assert numpy_api[entry.name].default == entry.default or (numpy_api[entry.name].default is entry.default), (
                entry.name
            )
        if entry in ROW_INPUTS or entry.name in ("overlap", "kv_cache_dtype", "tp", "scope", "errors", "parallel"):
            assert entry.name in facade, entry.name


#: Where the replay's meaning of an input's default differs from the numpy API's (documented there; the table's
#: replay_default).
REPLAY_DEFAULTS = {name: entry.default_in_replay for name, entry in INPUTS.items() if entry.replay_default != SAME}


def test_the_public_signatures_are_the_tables():
    """The edge's options and the replay's keywords are the table's entries, with its defaults, and every
    sweep and grid axis is an input of the table: an input added to the table with ``replay=``/``axis=``/
    ``grid_axis=`` reaches the replay, the sweep, the grid and the command line (their lists are derived)."""
    import dataclasses
    import inspect

    from perfmodel.handoff import Options  # (internal: the options record the facade and the sweep share)
    from perfmodel.replay import GRID_AXES
    from perfmodel.sweeps import AXES

    for field in dataclasses.fields(Options):
        assert field.default == INPUTS[field.name].default, field.name
    replay = dict(inspect.signature(replay_handoffs).parameters)
    assert [replay.pop(name).kind for name in ("trace", "ready_ms")] == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    ]
    assert set(replay) == {name for name, entry in INPUTS.items() if entry.replay}
    for name, parameter in replay.items():
        assert parameter.default == REPLAY_DEFAULTS.get(name, INPUTS[name].default), name
    assert set(AXES) | set(GRID_AXES) <= set(INPUTS)
    numpy_api = set(inspect.signature(handoff_delay_ms).parameters)
    assert numpy_api == {*(e.name for e in ROW_INPUTS), *(e.name for e in OPTIONS)}


# --- sweeps ------------------------------------------------------------------------------------------


def _sweep_expected(df: pd.DataFrame, given: dict) -> np.ndarray:
    """The reference's delays of each row of a sweep, from the row's own values."""
    rows = []
    for _, row in df.iterrows():
        call = {**BASE, **given, **{k: row[k] for k in df.columns if k in INPUTS}}
        call = {k: (str(v) if isinstance(v, str) or hasattr(v, "categories") else v) for k, v in call.items()}
        tokens = int(row["num_input_tokens"])
        block = int(call.get("block_size") or 64)
        call["destination_missing_tokens"] = destination_missing_tokens_row(tokens, 0, block)
        call["num_input_tokens"] = tokens
        rows.append(expected(call, 1)[0])
    return np.array(rows)


@pytest.mark.parametrize(
    "entry", [e for e in ROW_INPUTS if e.axis and e.name != "num_input_tokens"], ids=lambda e: e.name
)
def test_every_sweep_axis(entry, kernel):
    given = context(entry)
    axes = {
        **{k: v for k, v in BASE.items() if k != "destination_missing_tokens"},
        **given,
        entry.name: array_of(entry)[:2],
    }
    df = sweep(**axes)
    assert len(df) == 2 * len(TOKENS)
    _assert_close(df["handoff_delay_ms"], _sweep_expected(df, {k: v for k, v in given.items() if k != entry.name}))
    for bad in invalid_values(entry):
        with pytest.raises(InputError) as raised:
            sweep(**{**axes, entry.name: [entry.example, bad]})
        assert _names(raised.value, entry), str(raised.value)


# --- replay and replay grids -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    """One request per token count, all at once (the replays below have no contention)."""
    return pd.DataFrame({"arrival_ms": np.zeros(len(TOKENS)), "num_input_tokens": TOKENS})


REPLAYED = [e for e in (*ROW_INPUTS, *OPTIONS) if e.replay and e.group in ("core", "block", "layerwise")]


def _replay_expected(call: dict) -> np.ndarray:
    full = dict(call)
    if full.get("mode") == "destination_missing":  # no hash ids: every block missing, block-rounded
        block = int(full.get("block_size", 512))
        full["destination_missing_tokens"] = [destination_missing_tokens_row(t, 0, block) for t in TOKENS]
    return expected(full)


@pytest.mark.parametrize("form", ["scalar", "array", "column"])
@pytest.mark.parametrize("entry", REPLAYED, ids=lambda e: e.name)
def test_every_replay_input(entry, form, trace):
    """A replay takes each input as the table says: per request (a value, an array, a trace column) or
    one value per replay (an array refused, naming the input)."""
    given = {**context(entry), entry.name: entry.example}
    call = {"kv_transfer_bandwidth": 50.0, "kv_bytes_per_token": 1000.0, **given}
    values = array_of(entry)
    frame = trace
    if form == "array":
        call[entry.name] = values
    elif form == "column":
        frame = trace.assign(given_column=values)
        call[entry.name] = "given_column"
    run = dict(call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if form != "scalar" and entry.replay == "one":
            with pytest.raises(InputError) as raised:
                replay_handoffs(frame, **run)
            assert _names(raised.value, entry), str(raised.value)
            return
        got = replay_handoffs(frame, **run)["handoff_delay_ms"]
    reference = {**call, "num_input_tokens": TOKENS, entry.name: values if form != "scalar" else entry.example}
    reference.setdefault("block_size", 512)
    _assert_close(got, _replay_expected(reference))
    for bad in invalid_values(entry):
        with pytest.raises(InputError) as raised, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            replay_handoffs(trace, **{**call, entry.name: bad})
        assert _names(raised.value, entry), (bad, str(raised.value))


GRIDDED = [e for e in (*ROW_INPUTS, *OPTIONS) if e.grid_axis]


def _grid_base(entry: Input) -> dict:
    """What a grid over ``entry`` replays with (its group's other inputs, the model it shapes)."""
    base = {"kv_transfer_bandwidth": 50.0, "kv_bytes_per_token": 1000.0, **context(entry)}
    base.pop(entry.name, None)
    base.update(OPTION_CONTEXT.get(entry.name, {}))
    return base


@pytest.mark.parametrize("entry", GRIDDED, ids=lambda e: e.name)
def test_every_replay_grid_axis(entry, trace):
    """Each configuration of a grid is the replay of that configuration; an invalid value is refused."""
    base = _grid_base(entry)
    values = [entry.default if entry.kind in ("choice", "degree", "option") else array_of(entry)[1], entry.example]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = replay_grid(trace, **base, **{entry.name: values})
        for i, value in enumerate(values):
            call = {
                k: v for k, v in base.items() if not (entry.name == "overlap" and value == "none" and k in LAYERWISE)
            }  # (a grid's rows without streaming)
            alone = perfmodel.summarize(replay_handoffs(trace, **call, **{entry.name: value}))
            assert grid.iloc[i]["p50_ms"] == pytest.approx(alone["p50_ms"], rel=1e-12, nan_ok=True)
    bad = invalid_values(entry)[0] if entry.valid is not None else "bogus"  # (a choice, an option: a name)
    with pytest.raises(InputError) as raised:
        replay_grid(trace, **base, **{entry.name: [entry.example, bad]})
    assert _names(raised.value, entry), str(raised.value)


# --- the command line --------------------------------------------------------------------------------

#: A value other than the example where the default (None: the model's own) has no text.
OTHER_VALUE = {"kv_cache_dtype": "bf16", "decode_tp": 8}


def _text(value) -> str:
    return value.name.lower() if isinstance(value, enum.Enum) else str(value)


@pytest.mark.parametrize("entry", GRIDDED, ids=lambda e: e.name)
def test_every_grid_axis_reads_from_the_command_line_as_the_api_takes_it(entry, trace, tmp_path, capsys):
    """``perfmodel trace --grid AXIS=A,B`` reads each axis by its kind in the table (a number as a number,
    never as text, which the replay would take for a trace column's name): it writes the grid the API
    replays, value for value and type for type (``16``, not ``16.0``)."""
    from perfmodel.cli import main
    from perfmodel.io import write_table

    base = _grid_base(entry)
    if isinstance(base.get("kv_bytes_per_token"), str):  # a model's name: --model, as the API's model=
        base["model"] = base.pop("kv_bytes_per_token")
    other = OTHER_VALUE.get(entry.name, entry.default if entry.kind in ("choice", "degree") else array_of(entry)[1])
    values = [other, entry.example]
    trace.to_csv(tmp_path / "trace.csv", index=False)
    words = [
        "trace",
        str(tmp_path / "trace.csv"),
        "--out",
        str(tmp_path / "out"),
        "--grid",
        f"{entry.name}={','.join(map(_text, values))}",
    ]
    for name, value in base.items():
        flag = {
            "kv_transfer_bandwidth": "--bandwidth",
            "kv_bytes_per_token": "--kv-bytes-per-token",
            "model": "--model",
        }.get(name)
        words += [flag or INPUTS[name].cli, _text(value)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(words) == 0, capsys.readouterr().err
        grid = replay_grid(trace, **base, **{entry.name: values}, progress=False)
    want = write_table(grid, tmp_path / "api.csv", rounded=[c for c in grid.columns if c != entry.name])
    assert (tmp_path / "out" / "grid.csv").read_text() == want.read_text()


def test_every_flag_in_the_table_is_a_flag_of_the_command_line(capsys):
    """Each flag the table names is an option of some command (as ``perfmodel COMMAND --help`` lists it)."""
    from perfmodel.cli import main

    def help_of(*command: str) -> str:
        assert main([*command, "--help"]) == 0
        return capsys.readouterr().out

    commands = re.findall(r"^    ([a-z]+)\b", help_of().partition("COMMAND\n")[2], flags=re.MULTILINE)
    assert {"sweep", "delay", "trace", "calibrate"} <= set(commands), commands
    flags = set()
    for command in commands:  # every option line of its help: "  -h, --help", "  --tp TP   For models..."
        for options in re.findall(r"^  (-.*?)(?:[ \t]{2,}|$)", help_of(command), flags=re.MULTILINE):
            flags.update(re.findall(r"(?<![\w-])--?[a-z][\w-]*", options))
    for entry in (*ROW_INPUTS, *OPTIONS):
        if entry.cli:
            assert entry.cli in flags, entry.name


@pytest.mark.parametrize("indent", ["", "    ", "\t"])
def test_parameter_sections_fill_docstrings_of_any_indentation(indent):
    """Python 3.13 strips a docstring's common indentation when it compiles it; 3.10-3.12 keep it."""
    from perfmodel.inputs.table import documented

    def function(tp, own):
        pass

    function.__doc__ = f"One line.\n\n{indent}Parameters\n{indent}----------\n{indent}@inputs\n\n{indent}Returns\n{indent}-------\n{indent}None\n"
    documented(extra={"own": "Its own parameter."})(function)
    assert f"\n{indent}tp\n{indent}    For models given by name" in function.__doc__
    assert f"\n{indent}own\n{indent}    Its own parameter.\n" in function.__doc__
    assert _documented_names(function) == {"tp", "own"}
