"""The package's structure: layers without import cycles, private APIs of other libraries in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "perfmodel"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Every module of the package (subpackages included) by its dotted name.
MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports() -> dict[str, set[str]]:
    """Each module's imports of the package's other modules, function-local ones included (a package's
    ``__init__`` counts as the package; importing a submodule does not count as importing its package)."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
                candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            edges[name].update(c for c in candidates if c in MODULES and c != name
                               and not name.startswith(c + "."))
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
    bottom = {f"perfmodel.{name}" for name in ("errors", "_codes", "_inputs", "_fs", "_compat")}
    for name in bottom:
        assert edges[name] <= bottom, (name, edges[name] - bottom)


_PRIVATE = re.compile(r"pandas\.core|numba\.core|_nrt\s*=|\"_nrt\"|\._get_column_array|\._from_mgr|_locator_classes|SingleBlockManager")


def test_private_apis_of_other_libraries_only_in_compat():
    users = sorted(name for name, path in MODULES.items()
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


@pytest.mark.parametrize("module", [name for name in MODULES if not name.endswith("__main__")])
def test_every_module_imports_alone(module):
    import importlib

    importlib.import_module(module)


def test_the_package_cites_its_documentation_never_files_users_do_not_have():
    """Docstrings and messages point to the documentation's pages, not to the project's working notes."""
    cited = sorted(name for name, path in MODULES.items()
                   if re.search(r"SEMANTICS|DESIGN\.md|\.\./shared", path.read_text()))
    assert not cited, f"modules citing files outside the package and its docs: {cited}"
