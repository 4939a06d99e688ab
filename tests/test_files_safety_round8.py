"""Output folders under an edit or a second command while a run computes: a file the user edited meanwhile is not
removed as stale, a dangling symlink of an output's name is refused as any other file the command did not write,
and two commands writing one folder both keep their entries in its manifest. The concurrent edit or run is
simulated inside the first run's ``with`` block (deterministic: no timing)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfmodel.errors import InputError
from perfmodel.ground.files import MANIFEST, check_output_folder, output_folder


def _commands(folder: Path) -> dict[str, list[str]]:
    return json.loads((folder / MANIFEST).read_text())["commands"]


def _sweep(out: Path, names: list[str]) -> None:
    with output_folder(out, command="sweep", names=names) as stage:
        for name in names:
            (stage / name).write_text(f"run of {name}")


# --- 1. a stale file the user edits while the run computes stays, and is no longer the command's ---------------


def test_a_stale_file_edited_during_the_run_stays_and_is_no_longer_recorded(tmp_path):
    out = tmp_path / "out"
    _sweep(out, ["sweep.csv", "heatmap.png"])
    with output_folder(out, command="sweep", names=["sweep.csv"]) as stage:
        (out / "heatmap.png").write_text("USER EDITED")  # the user edits it while the run computes
        (stage / "sweep.csv").write_text("b")
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "heatmap.png", "sweep.csv"]
    assert (out / "heatmap.png").read_text() == "USER EDITED"
    assert _commands(out) == {"sweep": ["sweep.csv"]}
    with pytest.raises(InputError, match="heatmap.png"):  # the user's now: never replaced
        check_output_folder(out, command="sweep", names=["sweep.csv", "heatmap.png"])


def test_a_stale_file_left_as_written_is_still_removed(tmp_path):
    out = tmp_path / "out"
    _sweep(out, ["sweep.csv", "heatmap.png"])
    _sweep(out, ["sweep.csv"])
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "sweep.csv"]


# --- 2. a dangling symlink is a file the command did not write ---------------------------------------------------


def test_a_dangling_symlink_of_an_outputs_name_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.csv").symlink_to(tmp_path / "nonexistent" / "x.csv")
    with pytest.raises(InputError, match=r"out: holds sweep.csv, which perfmodel sweep did not write"):
        check_output_folder(out, command="sweep", names=["sweep.csv"])
    with pytest.raises(InputError, match="sweep.csv"):
        _sweep(out, ["sweep.csv"])
    assert (out / "sweep.csv").is_symlink() and os.readlink(out / "sweep.csv") == str(
        tmp_path / "nonexistent" / "x.csv"
    )
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv"]


def test_a_dangling_symlink_made_during_the_run_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    with (
        pytest.raises(InputError, match="sweep.csv"),
        output_folder(out, command="sweep", names=["sweep.csv"]) as stage,
    ):
        (out / "sweep.csv").symlink_to(tmp_path / "nonexistent.csv")
        (stage / "sweep.csv").write_text("a")
    assert (out / "sweep.csv").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv"]


def test_an_output_folder_that_is_a_dangling_symlink_is_refused_as_not_a_folder(tmp_path):
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "nowhere")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        check_output_folder(out, command="sweep", names=["sweep.csv"])
    assert out.is_symlink() and not (tmp_path / "nowhere").exists()


# --- 3. two commands writing one folder at once both keep their entries -----------------------------------------


def test_two_commands_writing_one_folder_at_once_keep_both_entries(tmp_path):
    out = tmp_path / "out"
    with output_folder(out, command="ttft", names=["ttft.csv"]) as first:
        (first / "ttft.csv").write_text("t")
        with output_folder(out, command="trace", names=["replay.csv"]) as second:
            (second / "replay.csv").write_text("r")
    assert _commands(out) == {"trace": ["replay.csv"], "ttft": ["ttft.csv"]}
    assert set(json.loads((out / MANIFEST).read_text())["stamps"]) == {"replay.csv", "ttft.csv"}
    check_output_folder(out, command="trace", names=["replay.csv"])  # each may replace its own files
    check_output_folder(out, command="ttft", names=["ttft.csv"])
    with output_folder(out, command="trace", names=["replay.csv"]) as stage:
        (stage / "replay.csv").write_text("r2")
    assert (out / "replay.csv").read_text() == "r2" and (out / "ttft.csv").read_text() == "t"


def test_a_command_run_twice_at_once_keeps_the_files_of_the_run_that_ended_last(tmp_path):
    out = tmp_path / "out"
    with output_folder(out, command="sweep", names=["sweep.csv"]) as first:
        (first / "sweep.csv").write_text("first")
        (first / "extra.csv").write_text("first")
        with output_folder(out, command="sweep", names=["sweep.csv"]) as second:
            (second / "sweep.csv").write_text("second")
    assert (out / "sweep.csv").read_text() == "first" and _commands(out) == {"sweep": ["extra.csv", "sweep.csv"]}


def test_a_folder_one_may_write_but_not_read_is_written_unlocked(tmp_path, monkeypatch):
    """The lock opens the folder for reading: a folder one may write but not read (``chmod 333``) is written as it
    was before the lock, unlocked (the lock's open failed, and the whole run was lost)."""
    out = tmp_path / "write-only"
    out.mkdir()
    real_open = os.open

    def no_reading(path, flags, *args, **kwargs):
        if Path(path) == out and flags == os.O_RDONLY:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_reading)
    _sweep(out, ["sweep.csv"])
    assert (out / "sweep.csv").read_text() == "run of sweep.csv"
