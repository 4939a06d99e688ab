"""The package's structure: layers without import cycles, private APIs of other libraries in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "perfmodel"


def _imports() -> dict[str, set[str]]:
    """Each module's imports of the package's other modules, function-local ones included."""
    modules = {path.stem: path for path in PACKAGE.glob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module.split(".")[0]] if node.module else [alias.name for alias in node.names]
                edges[name].update(t for t in targets if t in modules and t not in (name, "__init__"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perfmodel."):
                target = node.module.split(".")[1]
                if target in modules and target != name:
                    edges[name].add(target)
    return edges


def test_no_module_imports_a_module_that_imports_it_back():
    edges = _imports()

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for other in edges[todo.pop()]:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    cycles = sorted(name for name in edges if name in reachable(name))
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_the_bottom_layer_imports_nothing_above_it():
    edges = _imports()
    bottom = {"errors", "_codes", "_inputs", "_fs", "_compat"}
    for name in bottom:
        assert edges[name] <= bottom, (name, edges[name] - bottom)


_PRIVATE = re.compile(r"pandas\.core|numba\.core|\._get_column_array|\._from_mgr|_locator_classes|SingleBlockManager")


def test_private_apis_of_other_libraries_only_in_compat():
    users = sorted(path.name for path in PACKAGE.glob("*.py")
                   if path.name != "_compat.py" and _PRIVATE.search(path.read_text()))
    assert not users, f"private pandas/numba APIs outside _compat.py: {users}"


def test_the_cache_locator_and_its_fallback_compile_the_same_kernel(tmp_path, monkeypatch):
    """With the private locator, kernels are cached in perfmodel's folder; without it (a numba that
    moved its classes), numba's default applies: both give the same numbers."""
    import subprocess
    import sys

    code = ("import numpy as np, perfmodel\n"
            "print(repr(perfmodel.handoff_delay_ms(np.array([1, 4096]), 1.0, 1000.0).tolist()))\n")
    fallback = "import perfmodel._compat as c; c.install_cache_locator = lambda: False\n"
    outputs = []
    for prefix in ("", fallback):
        env = {**__import__("os").environ, "PERFMODEL_CACHE_DIR": str(tmp_path / "cache"),
               "NUMBA_CACHE_DIR": str(tmp_path / "numba") if prefix else ""}
        env = {k: v for k, v in env.items() if v}
        done = subprocess.run([sys.executable, "-c", prefix + code], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert any((tmp_path / "cache").rglob("*.nbi")), "the locator caches the kernels in perfmodel's folder"


@pytest.mark.parametrize("module", sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__")))
def test_every_module_imports_alone(module):
    import importlib

    importlib.import_module(f"perfmodel.{module}")
