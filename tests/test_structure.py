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
            edges[name].update(c for c in candidates if c in MODULES and c != name and not name.startswith(c + "."))
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
    bottom = {f"perfmodel.{name}" for name in ("errors", "inputs.codes", "inputs.table", "ground.files", "_compat")}
    for name in bottom:
        assert edges[name] <= bottom, (name, edges[name] - bottom)


_PRIVATE = re.compile(
    r"pandas\.core|numba\.core|_nrt\s*=|\"_nrt\"|\._get_column_array|\._from_mgr|_locator_classes|SingleBlockManager"
)


def test_private_apis_of_other_libraries_only_in_compat():
    users = sorted(
        name for name, path in MODULES.items() if path.name != "_compat.py" and _PRIVATE.search(path.read_text())
    )
    assert not users, f"private pandas/numba APIs outside _compat.py: {users}"


def test_the_cache_locator_and_its_fallback_compile_the_same_kernel(tmp_path, monkeypatch):
    """With the private locator, kernels are cached in perfmodel's folder; without it (a numba that
    moved its classes), numba's default applies: both give the same numbers."""
    import subprocess
    import sys

    code = (
        "import numpy as np, perfmodel\n"
        "print(repr(perfmodel.handoff_delay_ms(np.array([1, 4096]), 1.0, 1000.0).tolist()))\n"
    )
    fallback = "import perfmodel._compat as c; c.install_cache_locator = lambda: False\n"
    outputs = []
    for prefix in ("", fallback):
        env = {
            **__import__("os").environ,
            "PERFMODEL_CACHE_DIR": str(tmp_path / "cache"),
            "NUMBA_CACHE_DIR": str(tmp_path / "numba") if prefix else "",
        }
        env = {k: v for k, v in env.items() if v}
        done = subprocess.run(
            [sys.executable, "-c", prefix + code], capture_output=True, text=True, env=env, timeout=300
        )
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
    cited = sorted(
        name for name, path in MODULES.items() if re.search(r"SEMANTICS|DESIGN\.md|\.\./shared", path.read_text())
    )
    assert not cited, f"modules citing files outside the package and its docs: {cited}"


def _complexity(function: ast.AST) -> int:
    """McCabe's cyclomatic complexity of a function's own body (nested functions count on their own):
    one plus each branch point."""
    count = 1
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(
            node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.comprehension)
        ):
            count += 1 + (len(node.ifs) if isinstance(node, ast.comprehension) else 0)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.match_case):
            count += 1
        todo.extend(ast.iter_child_nodes(node))
    return count


def _functions() -> list[tuple[str, ast.AST]]:
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{name}.{node.name}", node))
    return found


def test_modules_and_functions_stay_small_enough_to_read():
    """No module over 800 lines, no function over 80 lines of code (its docstring aside), none of cyclomatic
    complexity 31 or more: where one grows, its steps become named helpers."""
    assert not [
        (n, len(p.read_text().splitlines())) for n, p in MODULES.items() if len(p.read_text().splitlines()) > 800
    ]
    long, tangled = [], []
    for name, node in _functions():
        lines = node.end_lineno - node.lineno + 1
        if ast.get_docstring(node) is not None:
            lines -= node.body[0].end_lineno - node.body[0].lineno + 1
        if lines > 80:
            long.append((name, lines))
        if _complexity(node) > 30:
            tangled.append((name, _complexity(node)))
    assert not long, f"functions over 80 lines of code: {long}"
    assert not tangled, f"functions of cyclomatic complexity over 30: {tangled}"


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """(positional parameters, all parameters) of a function, ``*args`` and ``**kwargs`` counted as one each."""
    a = node.args
    positional = len(a.posonlyargs) + len(a.args) + (a.vararg is not None)
    return positional, positional + len(a.kwonlyargs) + (a.kwarg is not None)


def test_no_function_takes_more_than_14_parameters():
    """Related arrays travel as one record (a named tuple, read by field name; numba passes it as one argument),
    jitted helpers included: no function takes more than 14 positional parameters, and no private one (its name
    or its module's starting with ``_``) more than 14 in all. A public entry point's keyword-only options are
    its documented interface, not a list of arrays."""
    crowded = []
    for name, node in _functions():
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional, total = _parameters(node)
        private = any(part.startswith("_") and not part.startswith("__") for part in name.split("."))
        if positional > 14 or (private and total > 14):
            crowded.append((name, total))
    assert not crowded, f"functions of more than 14 parameters (group related arrays into a record): {crowded}"


def test_the_parameter_count_reads_every_kind():
    source = "def f(a, b, /, c, *d, e, f=1, **g):\n    pass\n"
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert _parameters(node) == (4, 7)


def test_the_complexity_count_is_mccabes():
    source = "def f(a, b):\n    if a and b:\n        return [x for x in a if x]\n    for i in b:\n        pass\n"
    assert _complexity(ast.parse(source).body[0]) == 6  # 1 + if + and + comprehension (+ its if) + for


_LEAVING = """
import os

def test_{first}_leaves_another_folder():
    os.environ["PERFMODEL_CONFIG_DIR"] = "/nonexistent/left-behind"

def test_{second}_sees_the_sessions_folder():
    assert os.environ["PERFMODEL_CONFIG_DIR"] != "/nonexistent/left-behind"
    assert os.environ["PERFMODEL_CONFIG_DIR"].startswith(os.environ["SESSION_TMP"])
"""


@pytest.mark.parametrize("order", ["leaver first", "leaver last"])
def test_no_test_leaves_the_next_one_another_presets_folder(tmp_path, order):
    """A test (a doctest of save_link or save_model) that points PERFMODEL_CONFIG_DIR at a folder of its own
    leaves the next test the session's folder: the project's conftest.py, in a session of its own, with the
    test that leaves another folder run before and after the one that checks (pytest runs a file's tests in
    order; the names make the order)."""
    import os
    import subprocess
    import sys

    first, second = ("a", "b") if order == "leaver first" else ("b", "a")
    (tmp_path / "test_leaving.py").write_text(_LEAVING.format(first=first, second=second))
    root = Path(__file__).parent.parent
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "conftest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--basetemp",
            str(tmp_path / "base"),
            str(tmp_path / "test_leaving.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root), "SESSION_TMP": str(tmp_path / "base")},
    )
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    broken = tmp_path / "conftest.py"  # and without the project's fixture, the check fails: it can fail
    broken.write_text("")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--basetemp",
            str(tmp_path / "base2"),
            str(tmp_path / "test_leaving.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "SESSION_TMP": str(tmp_path / "base2")},
    )
    assert done.returncode != 0 and "failed" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(
    "function",
    [
        "perfmodel.handoff.handoff_delay_ms",
        "perfmodel.frame.handoff_delays",
        "perfmodel.replay.replay_handoffs",
        "perfmodel.sweeps.required_bandwidth",
        "perfmodel.sweeps.max_tokens_within",
    ],
)
def test_every_parameter_of_an_entry_point_is_read(function):
    """The entry points pass their parameters on by name (no ``locals()``): one forgotten there would be
    silently dropped (a replay ignored ``blocks_per_message`` so)."""
    module, name = function.rsplit(".", 1)
    tree = ast.parse(MODULES[module].read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    arguments = node.args
    parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert not parameters - read, f"{function} never reads {sorted(parameters - read)}"


def _underscore_imports() -> dict[tuple[str, str], set[str]]:
    """(defining module, importing module) -> the underscore names the one imports from (or reads on) the other."""
    found: dict[tuple[str, str], set[str]] = {}
    for name, path in MODULES.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        bound = {}  # local name -> the package module it is
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
                for alias in node.names:
                    if f"{target}.{alias.name}" in MODULES:
                        bound[alias.asname or alias.name] = f"{target}.{alias.name}"
                    elif target in MODULES and target != name and re.match(r"_(?!_)", alias.name):
                        found.setdefault((target, name), set()).add(alias.name)
            elif isinstance(node, ast.Import):
                bound.update({alias.asname: alias.name for alias in node.names if alias.asname in MODULES})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and re.match(r"_(?!_)", node.attr):
                target = bound.get(node.value.id, name)
                if target != name and f"{target}.{node.attr}" not in MODULES:
                    found.setdefault((target, name), set()).add(node.attr)
    return found


def test_few_underscore_names_cross_between_modules():
    """A name shared between the package's modules has no leading underscore; underscores mark what is private
    to one module. At most 25 underscore names imported from one module into another, all pairs together."""
    found = _underscore_imports()
    assert sum(len(names) for names in found.values()) <= 25, sorted(found.items())


def test_the_top_level_holds_few_modules():
    """The package's top level holds the faces (at most 16 modules); the rest lives in subpackages named for
    what is in them (inputs, model, network, kernels, replay, ground, cli, plotting)."""
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 16, top
    assert {path.parent.name for path in PACKAGE.glob("*/__init__.py")} >= {
        "inputs",
        "model",
        "network",
        "kernels",
        "replay",
        "ground",
        "cli",
        "plotting",
    }
    assert not (PACKAGE / "calibrate.py").exists(), "a module perfmodel.calibrate would shadow the function"


#: old dotted paths (each written in two pieces: so that a search for an old path written whole finds only perfmodel._moved)
OLD_PATHS = {
    "perfmodel." + "_kernels": "perfmodel.kernels.handoff",
    "perfmodel." + "links": "perfmodel.network.links",
    "perfmodel." + "trace": "perfmodel.replay.traces",
}


def test_the_old_module_paths_still_import_the_same_modules():
    """The modules moved by the layout keep their old dotted paths: the same module object (its own spec), a
    public old path warning once with FutureWarning; a pickle naming the old path loads."""
    import importlib
    import pickle
    import subprocess
    import sys
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for old, new in OLD_PATHS.items():
            module = importlib.import_module(old)
            assert module is importlib.import_module(new) and module.__spec__.name == new
    code = "import perfmodel\nfrom perfmodel.calibrate import calibrate\nimport perfmodel.calibrate\n"
    done = subprocess.run(
        [sys.executable, "-W", "always::FutureWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("FutureWarning") == 1, done.stderr  # once, naming the new place
    assert "perfmodel.calibration" in done.stderr
    import perfmodel

    link = perfmodel.get_link(next(iter(perfmodel.LINKS)))
    saved = pickle.dumps(link, protocol=0)  # (text opcodes: the module path can be edited in place)
    assert b"perfmodel.network.links" in saved
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert pickle.loads(saved.replace(b"perfmodel.network.links", b"perfmodel." + b"links")) == link
