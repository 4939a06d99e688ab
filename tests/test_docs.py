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
