"""Every ``>>>`` example of the documentation's pages runs and prints what the page says."""

from __future__ import annotations

import doctest
import functools
import inspect
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.rst") if p.name != "sg_execution_times.rst") if DOCS.is_dir() else []


@pytest.mark.skipif(not PAGES, reason="docs/ is not beside the tests (an installed package)")
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from an empty folder, as a reader runs them
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE
                              | doctest.ELLIPSIS, verbose=False, report=False)
    assert result.failed == 0, f"{page.name}: {result.failed} of {result.attempted} examples failed (run pytest -s)"


MODULES = ("perfmodel", "perfmodel.io", "perfmodel.datasets", "perfmodel.dask", "perfmodel.plotting", "perfmodel.trace",
           "perfmodel.replay", "perfmodel.sweeps", "perfmodel.links", "perfmodel.models", "perfmodel.frame",
           "perfmodel.handoff", "perfmodel.errors", "perfmodel.clusters", "perfmodel.flows", "perfmodel.cluster_replay",
           "perfmodel.calibrate", "perfmodel.cli", "perfmodel.sizing")


def _public_functions():
    import importlib
    import inspect

    for module in MODULES:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj


PUBLIC = list(_public_functions())
#: Public names known to have no page of their own yet (another's page of the same short name stood in).
NO_PAGE_YET: dict[str, str] = {}


@functools.cache
def _paged_objects() -> list:
    """What each ``perfmodel...`` entry of docs/api.rst names: the attribute (plotting.calibration is the
    figure, not its module), the module where more of the name follows (calibrate.calibrate)."""
    import importlib
    import types

    found = []
    for entry in re.findall(r"^\s+(perfmodel[\w.]+)\s*$", (DOCS / "api.rst").read_text(), flags=re.MULTILINE):
        parts = entry.split(".")
        obj = importlib.import_module("perfmodel")
        for i in range(1, len(parts)):
            obj = getattr(obj, parts[i], None)
            if obj is None or (i < len(parts) - 1 and not isinstance(obj, (types.ModuleType, type))):
                obj = importlib.import_module(".".join(parts[:i + 1]))
        found.append(obj)
    return found


@pytest.mark.skipif(not (DOCS / "api.rst").is_file(), reason="docs/ is not beside the tests (an installed package)")
@pytest.mark.parametrize("name, obj", [
    pytest.param(name, obj, marks=pytest.mark.xfail(strict=True, reason=NO_PAGE_YET[name])) if name in NO_PAGE_YET
    else (name, obj) for name, obj in PUBLIC], ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_function_and_class_has_an_api_page(name, obj):
    """Every public name of every public module (not only the top level's) has a page in docs/api.rst: an
    entry that names that very object (perfmodel.dask.handoff_delays is not perfmodel.handoff_delays)."""
    assert any(paged is obj for paged in _paged_objects()), f"{name} has no page in docs/api.rst"


@pytest.mark.parametrize("name, obj", [(name, obj) for name, obj in PUBLIC if inspect.isfunction(obj)],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_function_documents_each_parameter(name, obj):
    """Each public function documents each of its parameters in a numpydoc Parameters section."""
    doc = inspect.getdoc(obj) or ""
    section = doc.partition("Parameters\n----------\n")[2].split("\nReturns\n")[0].split("\nYields\n")[0]
    section = section.split("\nExamples\n")[0]
    documented = {n.strip().lstrip("*") for line in section.splitlines() if line and not line.startswith(" ")
                  for n in line.split(":")[0].split(",")}
    missing = set(inspect.signature(obj).parameters) - documented
    assert not missing, f"{name} does not document {sorted(missing)}"
