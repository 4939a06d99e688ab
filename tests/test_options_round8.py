"""set_options blocks that end in any order, a reused or re-entered object, the old module constants assigned,
and every knob in set_options' docstring (hostile review, round 8)."""

from __future__ import annotations

import ast
import importlib
import threading
import warnings
from pathlib import Path

import pytest

import perfmodel
from perfmodel import get_options, set_options
from perfmodel.options import KNOBS

DEFAULTS = {name: knob.default for name, knob in KNOBS.items()}


@pytest.fixture(autouse=True)
def _defaults_around_each_test():
    assert get_options() == DEFAULTS
    yield
    set_options(**DEFAULTS)  # (calls made by the test, or a failing test's blocks, changing nothing for the next)


# --- 1. blocks ending out of order, a reused or re-entered object ----------------------------------------------


def test_blocks_of_two_threads_ending_out_of_order_leave_nothing_changed():
    """A enters, B enters, A ends, B ends: B's value holds until B ends, then the value set outside blocks."""
    entered_a, entered_b, ended_a, end_b = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with set_options(parallel_min_rows=1):
            entered_a.set()
            entered_b.wait(10)
        ended_a.set()

    def b():
        entered_a.wait(10)
        with set_options(parallel_min_rows=2):
            entered_b.set()
            ended_a.wait(10)
            seen["after A ended, inside B"] = get_options()["parallel_min_rows"]
            end_b.wait(10)

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    ended_a.wait(10)
    end_b.set()
    for t in threads:
        t.join(10)
    assert seen == {"after A ended, inside B": 2}
    assert get_options()["parallel_min_rows"] == DEFAULTS["parallel_min_rows"]


def test_blocks_ending_out_of_order_in_one_thread():
    first = set_options(max_grid_configs=1)
    first.__enter__()
    second = set_options(max_grid_configs=2)
    second.__enter__()
    first.__exit__(None, None, None)
    assert get_options()["max_grid_configs"] == 2  # (the block still running keeps its value)
    second.__exit__(None, None, None)
    assert get_options()["max_grid_configs"] == DEFAULTS["max_grid_configs"]


def test_a_reused_object_applies_its_values_at_its_block_and_keeps_a_later_call():
    s = set_options(sweep_chunk_rows=11)
    set_options(sweep_chunk_rows=22)
    with s:
        assert get_options()["sweep_chunk_rows"] == 11
    assert get_options()["sweep_chunk_rows"] == 22  # (the call after the object was made is kept)


def test_an_object_made_before_a_later_call_keeps_its_call():
    """(The call that made an object is taken back at its block's start for the options no later call changed.)"""
    first, second = set_options(max_grid_configs=1), set_options(max_grid_configs=2)
    with first, second:
        assert get_options()["max_grid_configs"] == 2
    assert get_options()["max_grid_configs"] == 1  # (first's call, changed by second's: kept as a call)


def test_a_re_entered_object_keeps_its_values_in_the_outer_block():
    set_options(parallel_min_rows=200_000)
    s = set_options(parallel_min_rows=3)
    with s:
        with s:
            assert get_options()["parallel_min_rows"] == 3
        assert get_options()["parallel_min_rows"] == 3
    assert get_options()["parallel_min_rows"] == 200_000


def test_a_with_statement_leaves_no_trace_even_inside_another_block():
    with set_options(spread_max_rows=5):
        with set_options(spread_max_rows=6, max_time_bins=512):
            assert (get_options()["spread_max_rows"], get_options()["max_time_bins"]) == (6, 512)
        assert (get_options()["spread_max_rows"], get_options()["max_time_bins"]) == (5, DEFAULTS["max_time_bins"])
    assert get_options() == DEFAULTS


def test_a_call_inside_a_block_applies_at_once_and_lasts():
    with set_options(max_worker_pairs=7):
        set_options(max_worker_pairs=9)
        assert get_options()["max_worker_pairs"] == 9
    assert get_options()["max_worker_pairs"] == 9  # (a call is for the rest of the process)


# --- 2. the old module constants, assigned ---------------------------------------------------------------------


def _served() -> dict[tuple[str, str], str]:
    """Every old constant ``deprecated_constant`` serves, from the package's sources: (module, name) -> knob."""
    found = {}
    for path in sorted(Path(perfmodel.__file__).parent.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            call = node.value if isinstance(node, ast.Assign) else None
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "deprecated_constant":
                module, names = (ast.literal_eval(arg) for arg in call.args)
                found.update({(module, old): knob for old, knob in names.items()})
    return found


def test_every_old_constant_is_found():
    assert {old for _, old in _served()} >= {
        "PARALLEL_MIN_ROWS",
        "SPREAD_MAX_ROWS",
        "MAX_CONFIGS",
        "MAX_REQUESTS",
        "MAX_PAIR_FLOWS",
    }


@pytest.mark.parametrize(("module", "old"), sorted(_served()))
def test_assigning_an_old_constant_sets_its_option_with_a_warning(module, old):
    knob = _served()[(module, old)]
    mod = importlib.import_module(module)
    with pytest.warns(FutureWarning, match=rf"perfmodel\.set_options\({knob}=") as caught:
        setattr(mod, old, 300)
    assert caught[0].filename == __file__
    assert get_options()[knob] == 300
    assert old not in vars(mod)  # (no plain attribute shadowing the option)
    set_options(**{knob: 301})
    with pytest.warns(FutureWarning):
        assert getattr(mod, old) == 301  # (a read after agrees with the option)


def test_an_old_constant_assigned_under_error_filters_raises():
    import perfmodel.handoff as h

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FutureWarning, match=r"set_options\(parallel_min_rows="):
            h.PARALLEL_MIN_ROWS = 0


def test_old_code_forcing_threads_by_the_constant_still_does():
    import perfmodel.handoff as h

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        h.PARALLEL_MIN_ROWS = 0
        assert get_options()["parallel_min_rows"] == 0
        assert h.PARALLEL_MIN_ROWS == 0
        h.PARALLEL_MIN_ROWS = DEFAULTS["parallel_min_rows"]


def test_a_monkeypatched_old_constant_is_undone(monkeypatch):
    import perfmodel.replay as r

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        monkeypatch.setattr(r, "MAX_CONFIGS", 10)
        assert get_options()["max_grid_configs"] == 10
        monkeypatch.undo()
    assert get_options()["max_grid_configs"] == DEFAULTS["max_grid_configs"]


def test_an_old_constant_assigned_a_bad_value_is_refused_and_changes_nothing():
    import perfmodel.replay as r

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(perfmodel.InputError, match=r"^max_grid_configs: 0 is not a whole number >= 1\."):
            r.MAX_CONFIGS = 0
    assert get_options() == DEFAULTS


def test_other_module_attributes_are_set_as_before():
    import perfmodel.handoff as h

    h.SOMETHING_ELSE = 1
    try:
        assert vars(h)["SOMETHING_ELSE"] == 1
    finally:
        del h.SOMETHING_ELSE


def test_the_warning_says_where_it_is_shown():
    """The docstring promised "once per name"; Python's filters show a warning once per place: it says so."""
    from perfmodel.options import deprecated_constant

    assert "once per name" not in (deprecated_constant.__doc__ or "")


# --- 5. every knob in the docstring ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(KNOBS))
def test_every_knob_is_in_set_options_docstring_with_its_default(name):
    doc = " ".join(set_options.__doc__.split())
    assert f"``{name}``" in doc
    default = f"{KNOBS[name].default:,}"
    assert f"``{name}`` (" in doc and default in doc.split(f"``{name}`` (", 1)[1].split(")")[0], (name, default)


def test_monkeypatching_an_old_constant_inside_a_block_leaves_nothing_behind(monkeypatch):
    """pytest's undo puts back the value it read (the block's): that is the assignment taken back, not a new
    call that outlives the block (it left 123 for the rest of the process)."""
    from perfmodel import handoff

    before = get_options()["parallel_min_rows"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with set_options(parallel_min_rows=123):
            monkeypatch.setattr(handoff, "PARALLEL_MIN_ROWS", 5)
            assert get_options()["parallel_min_rows"] == 5
            monkeypatch.undo()
            assert get_options()["parallel_min_rows"] == 123
    assert get_options()["parallel_min_rows"] == before


def test_a_set_options_object_is_not_pickled():
    """Its changes are this process's (their order, the calls they replaced): pickled into another process it undid
    a setting there. Refused, saying what to pass instead."""
    import pickle

    with set_options(sweep_chunk_rows=11) as changes, pytest.raises(TypeError, match=r"cannot be pickled.*as a dict"):
        pickle.dumps(changes)
