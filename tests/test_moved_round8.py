"""The old module paths (perfmodel._moved): their warnings name the user's line however the old path is reached,
and what ``import perfmodel.calibrate as x`` gives is what the docs say (hostile review, round 8)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import perfmodel
import perfmodel._moved


@pytest.fixture
def trace_not_imported():
    """The old path perfmodel.trace as before its first import (its module stays loaded at its new place)."""
    importlib.import_module("perfmodel.replay.traces")
    saved_module = sys.modules.pop("perfmodel.trace", None)
    saved_attribute = vars(perfmodel).pop("trace", None)
    yield
    if saved_module is not None:
        sys.modules["perfmodel.trace"] = saved_module
    if saved_attribute is not None:
        vars(perfmodel)["trace"] = saved_attribute


def _ours(caught):
    return [w for w in caught if issubclass(w.category, FutureWarning) and "perfmodel.trace" in str(w.message)]


def test_an_old_path_reached_by_attribute_warns_at_the_users_line(trace_not_imported):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        perfmodel.trace.read_trace  # noqa: B018
    ours = _ours(caught)
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert ours[0].filename == __file__, (ours[0].filename, ours[0].lineno)


def test_an_old_path_imported_warns_at_the_users_line(trace_not_imported):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import perfmodel.trace  # noqa: F401
    ours = _ours(caught)
    assert len(ours) == 1 and ours[0].filename == __file__, [(w.filename, str(w.message)) for w in caught]


def test_an_old_path_by_import_module_warns_at_the_users_line(trace_not_imported):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module("perfmodel.trace")
    assert module is sys.modules["perfmodel.replay.traces"]
    ours = _ours(caught)
    assert len(ours) == 1 and ours[0].filename == __file__, [(w.filename, str(w.message)) for w in caught]


def test_an_old_path_warns_once(trace_not_imported):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        perfmodel.trace  # noqa: B018
        perfmodel.trace  # noqa: B018
        importlib.import_module("perfmodel.trace")
    assert len(_ours(caught)) == 1


def test_import_calibrate_as_gives_the_function_and_from_import_the_modules_names():
    """The public function keeps the name perfmodel.calibrate; the module's names come with from-imports, and
    perfmodel._moved says so."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import perfmodel.calibrate as cal
        from perfmodel.calibrate import read_measurements
    from perfmodel.calibration import calibrate
    from perfmodel.calibration import read_measurements as new

    assert cal is calibrate and read_measurements is new
    text = " ".join(perfmodel._moved.__doc__.split())
    assert "import perfmodel.calibrate as" in text and "from perfmodel.calibrate import" in text, text[:200]
