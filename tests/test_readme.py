"""The README is tested as a user meets it: every Python snippet runs, in order, in one process, from an
empty folder, on perfmodel installed from a wheel (not this source tree), and every ``# -> value`` it
shows is checked; every shell command runs, from an empty folder too; the README stays a short
user's guide that speaks of the software only."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: Runs the README's Python snippets in order and checks each ``# -> value`` (argv: the README's path).
DRIVER = r"""
import ast, math, re, sys
import numpy as np

def expected(text):
    text = text.strip().split("  ")[0].strip()
    number = re.fullmatch(r"(-?\d+(?:\.(\d+))?)(?:\s+[A-Za-z/]+)?", text)
    if number:
        return float(number.group(1)), len(number.group(2) or "")
    return ast.literal_eval(text.replace("nan", "None")), None

def check(actual, want, decimals, source):
    if decimals is not None:
        assert abs(float(actual) - want) <= 0.5 * 10.0 ** -decimals + 1e-12 * abs(want), (source, actual)
    elif isinstance(want, (list, tuple)):
        values = list(actual) if isinstance(actual, tuple) else list(np.asarray(actual, dtype=object).tolist())
        assert len(values) == len(want), (source, actual)
        for got, w in zip(values, want):
            if w is None:
                assert got is None or (isinstance(got, float) and math.isnan(got)), (source, actual)
            else:
                assert math.isclose(float(got), float(w), rel_tol=1e-6), (source, actual)
    else:
        assert actual == want, (source, actual)

import perfmodel
print("perfmodel from", perfmodel.__file__)
namespace, checked = {"__name__": "readme"}, 0
for block in re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), flags=re.S):
    lines = block.splitlines()
    for statement in ast.parse(block).body:
        source = "\n".join(lines[statement.lineno - 1:statement.end_lineno])
        comment = re.search(r"#\s*->\s*(.*)$", lines[statement.end_lineno - 1])
        if comment and isinstance(statement, ast.Expr):
            value = eval(compile(ast.Expression(statement.value), "README.md", "eval"), namespace)
            check(value, *expected(comment.group(1)), source)
            checked += 1
        else:
            exec(compile(ast.Module([statement], type_ignores=[]), "README.md", "exec"), namespace)
print("checked", checked)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """perfmodel installed from a wheel of this tree into a folder of its own (its data files included)."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next((base / "dist").glob("perfmodel-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(base / "site"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return base / "site"


def _run_snippets(tmp_path: Path, site: Path | None) -> str:
    """The README's snippets from an empty folder, on the package at ``site`` (None: the one under test)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**_environment(), **({"PYTHONPATH": str(site)} if site else {})}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(README)], cwd=empty, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split("checked")[-1]) >= 12
    assert not [p for p in empty.iterdir() if p.name != "perfmodel-examples"], list(empty.iterdir())
    return done.stdout


def test_every_python_snippet_runs_from_an_empty_folder(tmp_path):
    _run_snippets(tmp_path, None)


@pytest.mark.exhaustive
def test_every_python_snippet_runs_from_an_empty_folder_on_an_installed_package(installed, tmp_path):
    assert f"perfmodel from {installed}" in _run_snippets(tmp_path, installed)


def _environment() -> dict:
    import os

    return dict(os.environ)


def _commands() -> list[str]:
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line:
                commands.append(line)
    return commands


@pytest.mark.parametrize("command", [c for c in _commands() if not c.startswith("pip ")])
def test_every_shell_command_runs_from_an_empty_folder(command, tmp_path):
    words = shlex.split(command)
    assert words[0] == "perfmodel"
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", *words[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr


def test_the_setup_commands_are_the_two_ci_runs():
    setup = [c for c in _commands() if c.startswith("pip ")]
    ci = (ROOT / ".ci" / "run").read_text()
    assert len(setup) == 2 and all(c in ci for c in setup), setup


def test_the_readme_is_a_short_users_guide():
    text = README.read_text()
    assert len(text) <= 15_000
    assert not re.search(r"\bsessions?\b|\(issue [0-9]+\)|\.\./shared|tried and reverted|this workspace", text, re.I)
    for link in re.findall(r"\]\(([^)#\s]+)", text):
        path = _in_repository(link)
        assert path is None or (ROOT / path).exists(), link


def _repository_url() -> str | None:
    """The repository's URL from pyproject's [project.urls] (Repository, Source or Homepage), if it has one."""
    text = (ROOT / "pyproject.toml").read_text()
    urls = re.search(r"^\[project\.urls\]\n(.*?)(?:^\[|\Z)", text, flags=re.M | re.S)
    found = re.search(r'^(?:Repository|Source|Homepage)\s*=\s*"([^"]+)"', urls.group(1), flags=re.M) if urls else None
    return found.group(1).rstrip("/") if found else None


def _in_repository(link: str) -> str | None:
    """The file of the repository a README link or image points to: a relative path, or an absolute link
    into the repository (``URL/blob/BRANCH/path``, ``URL/raw/BRANCH/path``, as a package index needs); None
    for links elsewhere."""
    if not re.match(r"[a-z]+:", link):
        return link
    url = _repository_url()
    if url and link.startswith(url + "/"):
        parts = link[len(url) + 1 :].split("/", 2)
        assert len(parts) == 3 and parts[0] in ("blob", "raw", "tree"), link
        return parts[2]
    return None


@pytest.mark.exhaustive
def test_the_sdist_runs_its_own_tests(tmp_path):
    """The source distribution carries its tests' conftest, references and data, the changelog and the
    citation: unpacked, a few of its tests run against its own package."""
    import tarfile

    # (from another folder: the ``build/`` folder that ``pip install .`` leaves in the tree would otherwise be
    # imported as the ``build`` package)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    archive = next((tmp_path / "dist").glob("perfmodel-*.tar.gz"))
    with tarfile.open(archive) as sdist:
        sdist.extractall(tmp_path / "src", filter="data")
    tree = next((tmp_path / "src").iterdir())
    for name in (
        "CHANGELOG.md",
        "CITATION.cff",
        "tests/conftest.py",
        "tests/__init__.py",
        "tests/reference.py",
        "tests/reference_replay.py",
        "tests/data",
        ".ci/run",
        "docs/_static/delay_vs_tokens.png",
    ):
        assert (tree / name).exists(), name
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-n",
            "0",
            "-m",
            "not exhaustive",
            "tests/test_models.py",
            "tests/test_trace.py::test_read_mooncake_sample",
            "tests/test_readme.py::test_the_readme_is_a_short_users_guide",
            "-W",
            "ignore",
        ],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=900,
        env={**_environment(), "PYTHONPATH": str(tree)},
    )
    assert done.returncode == 0 and " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]


def _collected(*options: str) -> int:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:randomly",
            "-n",
            "0",
            "tests/test_examples.py",
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return int(re.search(r"(\d+)(?:/\d+)? tests? collected", done.stdout).group(1))


def test_the_exhaustive_checks_are_added_as_the_readme_says():
    """'--exhaustive adds the slow end-to-end checks': the default run leaves them out, --exhaustive runs
    them besides the others, -m exhaustive only them (-m exhaustive ran only them where the README said
    it added them)."""
    assert "--exhaustive` adds" in README.read_text()
    default, everything, only = _collected(), _collected("--exhaustive"), _collected("-m", "exhaustive")
    assert 0 < default < everything and only == everything - default, (default, everything, only)
