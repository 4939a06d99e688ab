"""Every example runs and writes its PNG (a smoke test, as CI runs them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted(
    p for p in (Path(__file__).resolve().parents[1] / "examples").glob("*.py") if not p.name.startswith("_")
)


def test_there_are_at_least_four_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.exhaustive  # (the documentation's gallery runs them too)
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_and_writes_a_png(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    pngs = list(tmp_path.glob("*.png"))
    assert pngs and all(p.stat().st_size > 10_000 for p in pngs)
    assert done.stdout.strip()  # each prints the numbers behind its figure


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_a_downloaded_example_imports_only_installed_modules(script):
    """The gallery offers each script for download alone: it imports nothing from beside it (the
    examples imported a ``_common`` module that is not downloaded with them)."""
    import ast
    import importlib.util

    tree = ast.parse(script.read_text())
    modules = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    modules |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level
    }
    beside = {p.stem for p in script.parent.glob("*.py")}
    missing = sorted(m for m in modules if m in beside or importlib.util.find_spec(m) is None)
    assert not missing, missing
