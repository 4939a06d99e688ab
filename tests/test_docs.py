"""Every ``>>>`` example of the documentation's pages runs and prints what the page says."""

from __future__ import annotations

import doctest
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
           "perfmodel.handoff", "perfmodel.errors")


def _public_functions():
    import importlib
    import inspect

    for module in MODULES:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj


@pytest.mark.parametrize("name, obj", list(_public_functions()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_function_and_class_has_an_api_page_and_its_parameters(name, obj):
    """Every public name of every public module (not only the top level's) has a page in docs/api.rst,
    and each function documents each of its parameters in a numpydoc Parameters section."""
    import inspect
    import re

    api = (DOCS / "api.rst").read_text() if DOCS.is_dir() else None
    short = name.rsplit(".", 1)[1]
    if api is not None:
        listed = set(re.findall(r"^\s+(perfmodel[\w.]+)\s*$", api, flags=re.M))
        assert any(entry.rsplit(".", 1)[1] == short for entry in listed), f"{name} has no page in docs/api.rst"
    if inspect.isfunction(obj):
        doc = inspect.getdoc(obj) or ""
        section = doc.partition("Parameters\n----------\n")[2].split("\nReturns\n")[0].split("\nYields\n")[0]
        section = section.split("\nExamples\n")[0]
        documented = {n.strip().lstrip("*") for line in section.splitlines() if line and not line.startswith(" ")
                      for n in line.split(":")[0].split(",")}
        missing = set(inspect.signature(obj).parameters) - documented
        assert not missing, f"{name} does not document {sorted(missing)}"
