"""Declared once: the input table (perfmodel.inputs.table), the choice sets (perfmodel.inputs.codes.CHOICES), the Cluster's
fields (perfmodel.inputs.table.CLUSTER_TABLE) and the knobs (perfmodel.options.KNOBS) are each written in one place,
and the public signatures, the checks and the kernels' constants follow them."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

import perfmodel
from perfmodel.inputs.codes import CHOICES, Contention, Routing, choice_code, choice_names
from perfmodel.inputs.table import CLUSTER_BOUNDS, CLUSTER_FIELD, CLUSTER_TABLE, INPUTS, OPTIONS, ROW_INPUTS
from perfmodel.kernels import cluster as _cluster_kernel
from perfmodel.kernels import replay as _replay
from perfmodel.options import KNOBS

PACKAGE = Path(perfmodel.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))
EMPTY = inspect.Parameter.empty


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


# --- choice sets -------------------------------------------------------------------------------------


def test_every_choice_input_takes_its_set_from_the_table():
    choice_inputs = {name: entry for name, entry in INPUTS.items() if entry.kind == "choice"}
    assert set(choice_inputs) <= set(CHOICES)
    for name, entry in choice_inputs.items():
        assert entry.choices == choice_names(name), name
        if entry.default is not None:  # (a cluster field's axis has no default: the cluster's)
            assert entry.default == choice_names(name)[0], name
    # (replay_grid's, read_trace's and replay_ttft's own)
    assert set(CHOICES) - set(choice_inputs) == {"keep", "bad_lines", "prefill_routing"}
    assert inspect.signature(perfmodel.replay_grid).parameters["keep"].default == choice_names("keep")[0]
    prefill_routing = inspect.signature(perfmodel.replay_ttft).parameters["prefill_routing"].default
    assert prefill_routing is None  # (the trace's prefill_worker column where it has one, else the first choice)
    from perfmodel.replay.ttft import DEFAULT_PREFILL_ROUTING

    assert choice_names("prefill_routing")[0] == DEFAULT_PREFILL_ROUTING


def test_choice_names_and_codes_round_trip():
    for name, members in CHOICES.items():
        names = choice_names(name)
        assert len(set(names)) == len(names) >= 2, name
        assert [choice_code(name, label) for label in names] == [int(m) for m in members] == list(range(len(names)))


def test_the_kernels_constants_are_the_enum_values():
    assert (_replay.NONE, _replay.FIFO, _replay.FAIR) == (Contention.NONE, Contention.FIFO, Contention.FAIR)
    kernel = (
        _cluster_kernel.PREFIX,
        _cluster_kernel.ROUND_ROBIN,
        _cluster_kernel.LEAST_LOADED,
        _cluster_kernel.TOPOLOGY,
    )
    assert kernel == tuple(Routing)
    assert all(type(c) is int for c in (_replay.NONE, _replay.FIFO, _replay.FAIR, *kernel))  # (numba: constants)


#: Parameters whose choice set has another name in the table: (function, parameter) -> its name in CHOICES.
_OWN_NAMES = {("read_trace", "errors"): "bad_lines"}


def _literal_annotations():
    """(function, parameter, names) of every public function's parameter annotated with a Literal of a choice set."""
    functions = [getattr(perfmodel, n) for n in perfmodel.__all__ if inspect.isfunction(getattr(perfmodel, n))]
    for function in functions:
        for name, hint in typing.get_type_hints(function).items():
            choice = _OWN_NAMES.get((function.__name__, name), name)
            if choice in CHOICES and typing.get_origin(hint) is typing.Literal:
                yield function.__name__, choice, typing.get_args(hint)


def test_literal_annotations_are_the_choice_sets():
    found = list(_literal_annotations())
    assert {"routing", "contention", "overlap", "scope", "kv_layout", "keep", "bad_lines"} <= {
        name for _, name, _ in found
    }
    for function, name, names in found:
        assert names == choice_names(name), (function, name)
    assert typing.get_args(perfmodel.errors.Errors) == choice_names("errors")


def _string_collections(tree: ast.Module):
    """(line, strings) of every tuple, list or set of string literals and of every dict's string keys, outside a
    ``Literal[...]`` annotation (checked against the table above)."""
    in_literal: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal":
            in_literal |= {id(inner) for inner in ast.walk(node.slice)}
    for node in ast.walk(tree):
        if id(node) in in_literal:
            continue
        items = (
            node.keys
            if isinstance(node, ast.Dict)
            else node.elts
            if isinstance(node, (ast.Tuple, ast.List, ast.Set))
            else None
        )
        if items and all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
            yield node.lineno, frozenset(i.value for i in items)  # type: ignore[union-attr]


def test_no_choice_set_is_declared_twice():
    sets = {frozenset(choice_names(name)): name for name in CHOICES}
    twice = [
        f"{path.relative_to(PACKAGE)}:{line}: {sets[strings]}"
        for path in SOURCES
        if path.relative_to(PACKAGE).as_posix() != "inputs/codes.py"
        for line, strings in _string_collections(_tree(path))
        if strings in sets
    ]
    assert not twice, twice


# --- knobs -------------------------------------------------------------------------------------------


def _deprecated_constants() -> dict[str, tuple[str, str]]:
    """Every old constant that is a knob now: name -> (module, knob), from the modules' ``deprecated_constant``."""
    found = {}
    for path in SOURCES:
        for node in _tree(path).body:
            call = node.value if isinstance(node, ast.Assign) else None
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "deprecated_constant":
                module, names = (ast.literal_eval(arg) for arg in call.args)
                found.update({old: (module, knob) for old, knob in names.items()})
    return found


def _module_constants(path: Path) -> set[str]:
    return {
        target.id
        for node in _tree(path).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }


def test_no_knob_is_declared_twice():
    old = _deprecated_constants()
    assert {"MAX_PAIR_FLOWS", "MAX_REQUESTS", "PARALLEL_MIN_ROWS", "SPREAD_MAX_ROWS", "MAX_CONFIGS"} <= set(old)
    assert {knob for _, knob in old.values()} <= set(KNOBS)
    for path in SOURCES:  # (an old constant is read through the module's __getattr__, never assigned again)
        assert not (_module_constants(path) & set(old)), path
        assert not (_module_constants(path) & {name.upper() for name in KNOBS}), path


def test_every_knob_is_read_by_name_and_every_name_read_is_a_knob():
    read = set()
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "option" and node.args:
                assert isinstance(node.args[0], ast.Constant), f"{path}:{node.lineno}"
                read.add(node.args[0].value)
    assert read == set(KNOBS)


@pytest.mark.parametrize("old", sorted(_deprecated_constants()))
def test_each_old_constant_reads_its_knob(old):
    import importlib

    module, knob = _deprecated_constants()[old]
    with perfmodel.set_options(**{knob: 7}), pytest.warns(FutureWarning, match=knob):
        assert getattr(importlib.import_module(module), old) == 7


# --- signatures --------------------------------------------------------------------------------------


def _parameters(function) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)


def test_the_numpy_api_takes_every_row_input_and_option_with_the_tables_default():
    taken = _parameters(perfmodel.handoff_delay_ms)
    assert list(taken) == [e.name for e in (*ROW_INPUTS, *OPTIONS)]
    for entry in (*ROW_INPUTS, *OPTIONS):
        assert taken[entry.name].default is entry.default or taken[entry.name].default == entry.default, entry.name


def test_the_facade_reads_columns_of_the_inputs_names_and_else_the_tables_defaults():
    from perfmodel.frame import FRAME_COLUMNS

    taken = _parameters(perfmodel.handoff_delays)
    for name, parameter in taken.items():
        if name in FRAME_COLUMNS:
            assert parameter.default == name
        elif name in INPUTS:
            assert parameter.default is INPUTS[name].default or parameter.default == INPUTS[name].default, name


def test_the_replay_takes_every_replay_input_with_the_tables_replay_default():
    taken = _parameters(perfmodel.replay_handoffs)
    for entry in INPUTS.values():
        if entry.replay:
            assert entry.name in taken, entry.name
            assert taken[entry.name].default == entry.default_in_replay, entry.name
    assert {name for name in taken if name in INPUTS} == {e.name for e in INPUTS.values() if e.replay}


@pytest.mark.parametrize(
    "name",
    [
        "required_bandwidth",
        "max_tokens_within",
        "kv_bytes_per_token",
        "kv_bytes",
        "kv_terms",
        "read_trace",
        "compare_measured",
        "replay_grid",
        "Link",
        "Transport",
        "handoff_flows",
        "required_nics_per_node",
    ],
)
def test_other_entry_points_take_the_tables_inputs_with_its_defaults(name):
    for parameter, given in _parameters(getattr(perfmodel, name)).items():
        if parameter in INPUTS and given.default is not EMPTY:  # (required there: its own first argument)
            default = INPUTS[parameter].default
            assert given.default is default or given.default == default, (name, parameter)


def test_the_shape_and_option_records_have_the_tables_defaults():
    from perfmodel.handoff import Options
    from perfmodel.model.models import ModelShape

    for record in (Options, ModelShape):
        for field in dataclasses.fields(record):
            assert field.default == INPUTS[field.name].default, (record.__name__, field.name)


# --- the Cluster's fields ----------------------------------------------------------------------------


def test_the_clusters_fields_are_the_tables_in_its_order_with_its_defaults():
    fields = dataclasses.fields(perfmodel.Cluster)
    assert [f.name for f in fields] == [f.name for f in CLUSTER_TABLE]
    for field in fields:
        default = CLUSTER_FIELD[field.name].default
        assert (field.default is dataclasses.MISSING) == (default is EMPTY), field.name
        if default is not EMPTY:
            assert field.default == default, field.name


def test_the_axes_over_cluster_fields_are_the_tables():
    from perfmodel.inputs.table import CLUSTER_FIELDS

    assert tuple(f.name for f in CLUSTER_TABLE if f.example is not None) == CLUSTER_FIELDS
    for name in CLUSTER_FIELDS:
        assert INPUTS[name].valid == CLUSTER_FIELD[name].valid, name
        assert INPUTS[name].example == CLUSTER_FIELD[name].example, name
    assert {f.name: (int(f.valid.high), f.why) for f in CLUSTER_TABLE if f.why} == CLUSTER_BOUNDS


_BASE = dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)


@pytest.mark.parametrize("field", [f for f in CLUSTER_TABLE if f.type in ("count", "real")], ids=lambda f: f.name)
def test_the_cluster_refuses_each_number_outside_the_tables_range(field):
    low, high = field.valid.low, field.valid.high
    below = low if field.valid.open_low else (low - 1 if field.type == "count" else low - 0.5)
    together = {"gpus_per_pcie_switch": 2, "pcie_switch_gb_s": 64.0}  # (given both or neither)
    for bad in (below, high + 1 if high < float("inf") else float("inf")):
        given = {**_BASE, **(together if field.name in together else {}), field.name: bad}
        with pytest.raises(perfmodel.InputError, match=rf"{field.name} "):
            perfmodel.Cluster(**given)


def test_the_cluster_refuses_a_choice_outside_the_table():
    with pytest.raises(perfmodel.InputError, match=r"^fabric: 'ring' is not one of 'flat', 'rail'"):
        perfmodel.Cluster(**_BASE, fabric="ring")
