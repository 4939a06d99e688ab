"""The cache's upkeep owns only what numba and perfmodel wrote: a user's file named ``*.nbc``/``*.nbi`` (not numba's
naming of a perfmodel source file's kernel) stays through ``--clear`` and ``--prune``, and a prune that could not remove
a stale entry's files says so, once, instead of reporting the entry removed and kept for files perfmodel did not write.
A folder is perfmodel's only when named as perfmodel names its folders, and a prune creates none."""

from __future__ import annotations

import hashlib
import io
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel import _compat
from perfmodel.cli import main


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    return tmp_path / "cache" / "numba"


def _run(*flags: str, capsys) -> str:
    assert main(["cache", *flags]) == 0
    return capsys.readouterr().out


def _kernel(folder: Path, days: float = 0.0) -> list[Path]:
    """numba's files of one kernel, named as numba names them (source file, function, line, Python)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [folder / "handoff.handoff_serial-42.py311.nbi", folder / "handoff.handoff_serial-42.py311.0.nbc"]
    for file in files:
        file.write_bytes(b"k" * 1000)
        os.utime(file, (time.time() - days * 86400,) * 2)
    return files


def _install(tag: str) -> str:
    """The folder of an install location, named as perfmodel names them (a hash of its path)."""
    return "perfmodel_" + hashlib.sha1(tag.encode()).hexdigest()


@pytest.mark.parametrize("how", ["--clear", "--prune"])
def test_a_users_nbc_and_nbi_files_are_not_numbas(root, capsys, how):
    version = root / _compat._version_folder()
    user = {
        version / _install("run1") / "result.nbc": b"precious",
        version / _install("run1") / "README": b"note",
        version / _install("run2") / "index.nbi": b"mine",
        version / _install("run3") / "kernel-42.py311.nbi": b"numba's naming, not after a file of perfmodel's",
        root / "lab-numba2-runs" / "run1" / "handoff.handoff_serial-42.py311.nbi": b"in a folder not perfmodel's",
    }
    for path, data in user.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (time.time() - 200 * 86400,) * 2)  # untouched for long: would be stale if it were perfmodel's
    kernels = _kernel(version / _install("run3"), days=200)  # numba's own, beside a user's
    _run(how, capsys=capsys)
    for path, data in user.items():
        assert path.is_file() and path.read_bytes() == data, path
    assert not any(k.exists() for k in kernels)


def test_a_stale_entry_whose_files_cannot_be_removed_is_reported_once_truly(root, capsys, monkeypatch):
    version = root / _compat._version_folder()
    stale = version / ("perfmodel_" + "0" * 40)
    _kernel(stale)
    (stale / "perfmodel-source.txt").write_text(f"{root.parent / 'deleted' / 'perfmodel'}\n")  # its source is gone
    unlink = Path.unlink

    def refused(path: Path, missing_ok: bool = False) -> None:
        if path.parent == stale:
            raise PermissionError(13, "Permission denied", str(path))
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refused)
    out = _run("--prune", capsys=capsys)
    assert out.startswith(f"removed 0 stale entries (0.0 MB) from {root}"), out
    assert f"kept {stale}: its files could not be removed" in out, out
    assert "did not write" not in out, out
    assert sorted(p.name for p in stale.iterdir()) == [
        "handoff.handoff_serial-42.py311.0.nbc",
        "handoff.handoff_serial-42.py311.nbi",
        "perfmodel-source.txt",
    ]


def test_a_folder_named_like_perfmodels_is_not_an_entry(root, capsys):
    _kernel(root / "lab-numba2-runs" / "run1")
    assert "lab-numba2-runs" not in _run(capsys=capsys)


def test_a_prune_of_an_empty_cache_creates_nothing(root, capsys):
    root.parent.mkdir()
    out = _run("--prune", capsys=capsys)
    assert out.startswith("removed 0 stale entries"), out
    assert list(root.parent.iterdir()) == []


def test_the_first_compile_into_a_fresh_cache_notes_its_source(root, monkeypatch):
    """The folder a prune no longer makes is made before numba's first compile into it, with its source note (what
    a later prune reads to tell whether this install is gone)."""
    monkeypatch.setattr(_compat, "_noticed", set())
    mine = root / _compat._version_folder() / _compat._install_folder()
    index = SimpleNamespace(_index_path=str(mine / "handoff.handoff_serial-42.py311.nbi"))
    cold = SimpleNamespace(overloads={}, _cache=SimpleNamespace(_cache_file=index))
    assert _compat.notice_first_compile("fresh", cold, 1.0, stream=io.StringIO())
    assert (mine / "perfmodel-source.txt").read_text() == f"{Path(_compat.__file__).resolve().parent}\n"
