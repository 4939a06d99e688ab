"""The cache's upkeep (``perfmodel cache --clear``, ``--prune`` and the prune on a cold first compile) removes
only the files numba and perfmodel write (``*.nbi``, ``*.nbc``, ``perfmodel-source.txt``) and folders once
they are empty: a user's files anywhere in the cache folder stay, symlinks are never followed out of it, and
the sizes reported count only what is removed. Only folders named as perfmodel names them are its entries."""

from __future__ import annotations

import hashlib
import io
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel import _compat
from perfmodel.cli import main

KERNEL_BYTES = 300_000  # each entry's compiled kernels: 0.3 MB
USER_BYTES = 5_000_000  # each user file: 5 MB, so a size that counted them would show


def _age(path: Path, days: float) -> None:
    os.utime(path, (time.time() - days * 86400,) * 2, follow_symlinks=False)


def _write(path: Path, data: bytes, days: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    _age(path, days)
    return path


def _kernels(folder: Path, days: float = 0.0, source: str | None = None) -> list[Path]:
    """numba's files of one kernel (an index and its data) in ``folder``, and perfmodel's note when ``source``."""
    files = [
        _write(folder / "handoff.handoff_serial-10.py311.nbi", b"i" * 1_000, days),
        _write(folder / "handoff.handoff_serial-10.py311.1.nbc", b"c" * (KERNEL_BYTES - 1_000), days),
    ]
    if source is not None:
        files.append(_write(folder / "perfmodel-source.txt", f"{source}\n".encode(), days))
    return files


def _install(tag: str) -> str:
    """The folder of another install location, named as perfmodel names them (a hash of its path)."""
    return "perfmodel_" + hashlib.sha1(tag.encode()).hexdigest()


def _run(*flags: str, capsys) -> str:
    assert main(["cache", *flags]) == 0
    return capsys.readouterr().out


@pytest.fixture
def cache(tmp_path, monkeypatch, capsys) -> Path:
    """A cache (``$PERFMODEL_CACHE_DIR``) with this install's folder in it (as numba makes it), noted by a prune."""
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    cache = tmp_path / "cache" / "numba"
    (cache / _compat._version_folder() / _compat._install_folder()).mkdir(parents=True)
    _run("--prune", capsys=capsys)
    return cache


def _current(cache: Path) -> Path:
    """This install's folder: the one whose note names this package's folder."""
    package = str(Path(_compat.__file__).resolve().parent)
    (note,) = [n for n in cache.glob("*/*/perfmodel-source.txt") if n.read_text().strip() == package]
    return note.parent


ELSEWHERE = "0.0.1+0123456789ab-numba0.60.0"  # a symlink named as a version folder


def _hostile(cache: Path, outside: Path) -> dict[Path, bytes]:
    """User files in several shapes of folder in the cache (and one outside, reached by symlinks); the
    compiled kernels perfmodel wrote beside them. Every user file, with its content."""
    here = _current(cache)
    version = here.parent
    _kernels(here, source=str(Path(_compat.__file__).resolve().parent))
    stale = version / _install("stale")  # an older perfmodel's entry (no note), untouched for 100 days ...
    _kernels(stale, days=100)
    gone = version / _install("gone")  # ... and one of a source folder that is gone
    _kernels(gone, source=str(outside.parent / "deleted" / "perfmodel"))
    user = {
        version / "userstuff" / "deep" / "thesis.tex": b"precious",  # a user's folder in a version folder
        version / _install("user") / "thesis.tex": b"mine",  # named like an install's folder: a user's file only
        here / "notes.txt": b"n" * USER_BYTES,  # beside this install's kernels
        here / "mine" / "kernel.nbi": b"not numba's",  # named like numba's, in a subfolder perfmodel did not make
        stale / "results.csv": b"r" * USER_BYTES,  # in a stale entry, as old as it
        gone / "draft.nbc.bak": b"draft",
        cache / "backup-numba2" / "photos" / "2024" / "a.jpg": b"img",  # folders named like *-numba<digit>...
        cache / "backup-numba2" / "photos" / "b.jpg": b"img2",
        cache / "archive-numba1" / "old_project" / "results.csv": b"keep",
        cache / "archive-numba1" / "old_project" / "handoff.handoff_serial-10.py311.nbi": b"named as numba names",
        outside / "data" / "handoff.handoff_serial-1.py311.nbi": b"outside index",  # outside the cache (symlinks below)
        outside / "data" / "paper.pdf": b"outside",
    }
    for path, data in user.items():
        _write(path, data, days=100 if "numba1" in str(path) or path.parent == stale else 0)
    (version / _install("linked")).symlink_to(outside / "data", target_is_directory=True)  # as an install folder
    (cache / ELSEWHERE).symlink_to(outside, target_is_directory=True)  # as a version folder
    (here / "outside").symlink_to(outside / "data", target_is_directory=True)  # inside an install folder
    (here / "handoff.handoff_serial-9.py311.nbi").symlink_to(outside / "data" / "handoff.handoff_serial-1.py311.nbi")
    return user


def _intact(user: dict[Path, bytes]) -> None:
    for path, data in user.items():
        assert path.is_file() and path.read_bytes() == data, path


def _auto_prune(monkeypatch) -> None:
    """The prune that runs before the first compile of a kernel whose cache is cold."""
    monkeypatch.setattr(_compat, "_noticed", set())
    cold = SimpleNamespace(
        overloads={}, _cache=SimpleNamespace(_cache_file=SimpleNamespace(_index_path="/no/such.nbi"))
    )
    assert _compat.notice_first_compile("hostile", cold, 1.0, stream=io.StringIO())


@pytest.mark.parametrize("how", ["--clear", "--prune", "automatic prune"])
def test_no_user_file_is_removed(cache, tmp_path, monkeypatch, capsys, how):
    user = _hostile(cache, tmp_path / "outside")
    here = _current(cache)
    if how == "automatic prune":
        _auto_prune(monkeypatch)
    else:
        _run(how, capsys=capsys)
    _intact(user)
    assert (cache / ELSEWHERE).is_symlink() and (here.parent / _install("linked")).is_symlink()
    assert (here / "handoff.handoff_serial-9.py311.nbi").is_symlink()  # (a link: perfmodel did not write it)
    for stale in (_install("stale"), _install("gone")):
        assert sorted(p.name for p in (here.parent / stale).iterdir()) in (["results.csv"], ["draft.nbc.bak"]), stale


def test_clear_removes_only_kernels_reports_what_stays_and_counts_only_what_it_removed(cache, tmp_path, capsys):
    user = _hostile(cache, tmp_path / "outside")
    here = _current(cache)
    empty = here.parent / _install("only_kernels")  # an entry of kernels only: removed whole
    _kernels(empty, source=str(tmp_path))
    out = _run("--clear", capsys=capsys)
    _intact(user)
    assert out.startswith(f"removed 1.2 MB of compiled kernels from {cache}"), out  # 4 entries of 0.3 MB
    assert not list(cache.rglob("*.nbc")) and not list(cache.rglob("perfmodel-source.txt"))
    assert not empty.exists()
    kept = re.findall(r"^kept (.+): it holds files perfmodel did not write$", out, flags=re.MULTILINE)
    assert sorted(kept) == sorted(
        str(p)
        for p in (
            here,
            here.parent / _install("stale"),
            here.parent / _install("gone"),
            here.parent / _install("user"),
            here.parent,  # (for the user's folder "userstuff" and a symlink)
        )
    ), out
    assert len(out.splitlines()) == 1 + len(kept), out  # one line each
    assert "numba1" not in out and "numba2" not in out, out  # (folders not perfmodel's: not touched, not reported)


def test_prune_keeps_a_stale_folder_holding_a_user_file(cache, tmp_path, capsys):
    user = _hostile(cache, tmp_path / "outside")
    here = _current(cache)
    out = _run("--prune", capsys=capsys)
    _intact(user)
    assert out.startswith(f"removed 2 stale entries (0.6 MB) from {cache}"), out  # the stale and the gone one
    stale, gone = here.parent / _install("stale"), here.parent / _install("gone")
    assert f"kept {stale}: it holds files perfmodel did not write" in out, out
    assert f"kept {gone}: it holds files perfmodel did not write" in out, out
    assert sorted(p.name for p in stale.iterdir()) == ["results.csv"]
    assert (here / "handoff.handoff_serial-10.py311.1.nbc").is_file()  # this install's kernels stay
    assert "backup-numba2" not in out and "archive-numba1" not in out  # (not perfmodel's: not touched, not reported)
    assert f"kept {here.parent}:" not in out, out  # (this install keeps it anyway)
    again = _run("--prune", capsys=capsys)
    assert again.startswith("removed 0 stale entries (0.0 MB)") and not re.search(
        "^kept ", again, flags=re.MULTILINE
    ), again


def test_the_listing_counts_only_perfmodels_files_and_marks_the_others(cache, tmp_path, capsys):
    _hostile(cache, tmp_path / "outside")
    here = _current(cache)
    out = _run(capsys=capsys)
    lines = {m[1]: (m[0], m[2]) for m in re.findall(r"^ +([\d,.]+) MB  (\S+/\S+)  (.+)$", out, flags=re.MULTILINE)}
    name = f"{here.parent.name}/{here.name}"
    assert lines[name][0] == "0.3" and lines[name][1].startswith("current"), out
    assert "perfmodel did not write" in lines[name][1], out
    user = f"{here.parent.name}/{_install('user')}"
    assert lines[user] == ("0.0", "not perfmodel's: holds only files it did not write"), out
    assert not [n for n in lines if "numba1" in n or "numba2" in n or "userstuff" in n], out  # (not perfmodel's)
    assert f"({0.3 * 3:.1f} MB;" in out.splitlines()[0], out  # this install, the stale and the gone entries
    assert not [n for n in lines if _install("linked") in n or ELSEWHERE in n], out  # symlinks: not followed


def test_a_file_perfmodel_did_not_write_is_not_overwritten_through_a_symlinked_note(cache, tmp_path, capsys):
    here = _current(cache)
    mine = _write(tmp_path / "outside" / "diary.txt", b"dear diary")
    (here / "perfmodel-source.txt").unlink()
    (here / "perfmodel-source.txt").symlink_to(mine)
    _run("--prune", capsys=capsys)
    _run("--clear", capsys=capsys)
    assert mine.read_bytes() == b"dear diary"


def test_a_folder_kept_for_an_entry_in_use_is_not_reported(cache, capsys):
    here = _current(cache)
    _kernels(here.parent / _install("old"), days=100)  # stale: goes; its version folder stays for this install's
    _write(here / "notes.txt", b"mine")
    out = _run("--prune", capsys=capsys)
    assert out.startswith("removed 1 stale entry (0.3 MB)") and not re.search("^kept ", out, flags=re.MULTILINE), out
    assert not (here.parent / _install("old")).exists() and (here / "notes.txt").read_bytes() == b"mine"
