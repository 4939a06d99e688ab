"""Hostile input at every entry point: nothing lost, nothing silently wrong.

One section per class of failure (issue: data safety and hostile input). Each test here
failed on the code before the fix it guards.
"""

from __future__ import annotations

import datetime
import gzip
import json
import lzma
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import InputError
from perfmodel.ground.files import atomic_file  # (a signal in its every window: no public call reaches them)
from perfmodel.io import MANIFEST, delay_file, output_folder


def _default_signals() -> None:
    """In a child, before it runs: SIGINT, SIGTERM and SIGHUP as a terminal gives them (a suite run with SIGINT
    ignored, under nohup or a CI runner's background shell, would hand its children SIG_IGN, and Python then
    never raises KeyboardInterrupt)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _popen(argv, **options) -> subprocess.Popen:
    """``subprocess.Popen`` of a child that is to be signalled: default signal handling whatever this suite's."""
    return subprocess.Popen(
        argv,
        preexec_fn=_default_signals,  # noqa: PLW1509 (signal dispositions are set only so)
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


@pytest.fixture(autouse=True)
def _sigint_raises_keyboard_interrupt():
    """The tests that signal this process itself: SIGINT raises KeyboardInterrupt, as in a terminal, even when
    the suite runs with SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


KEYWORDS = dict(kv_bytes_per_token=1000, kv_transfer_bandwidth=10.0)


def run(*args: str, cwd: Path | None = None, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, **kwargs
    )


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The CLI failed with exit code 2 and exactly one line on stderr (no traceback): that line."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if "perfmodel-tmp" in p.name or "perfmodel-staging" in p.name)


# --- 1. outputs never destroy anything but perfmodel's own output --------------------------


@pytest.fixture
def parquet_folder(tmp_path: Path) -> Path:
    source = tmp_path / "in"
    source.mkdir()
    for i in range(2):
        pd.DataFrame({"num_input_tokens": np.arange(100) + 100 * i}).to_parquet(source / f"p{i}.parquet")
    return source


@pytest.mark.exhaustive  # (two Dask clusters)
def test_dask_output_keeps_the_users_files(tmp_path, parquet_folder):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "mine.txt").write_text("precious")
    (keep / "sub").mkdir()
    (keep / "sub" / "notes.md").write_text("also precious")
    for _ in range(2):  # the second run replaces its own parts only
        done = run(
            "delay",
            str(parquet_folder),
            "--out",
            str(keep),
            "--workers",
            "1",
            "--bandwidth",
            "10",
            "--kv-bytes-per-token",
            "1000",
        )
        assert done.returncode == 0, done.stderr
    assert (keep / "mine.txt").read_text() == "precious" and (keep / "sub" / "notes.md").read_text() == "also precious"
    assert sorted(p.name for p in keep.glob("part-*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    assert len(pd.read_parquet(keep / "part-00001.parquet")) == 100 and not leftovers(keep)


@pytest.mark.parametrize("where", ["input", "inside", "dot"])
def test_output_overlapping_an_input_is_refused(tmp_path, parquet_folder, where):
    before = {p: p.read_bytes() for p in parquet_folder.iterdir()}
    out = {"input": str(parquet_folder), "inside": str(parquet_folder / "sub"), "dot": "."}[where]
    done = run(
        "delay",
        str(parquet_folder),
        "--out",
        out,
        "--workers",
        "1",
        "--bandwidth",
        "10",
        "--kv-bytes-per-token",
        "1000",
        cwd=parquet_folder if where == "dot" else None,
    )
    assert "input" in one_line_error(done)
    assert {p: p.read_bytes() for p in parquet_folder.iterdir()} == before


def test_single_file_output_cannot_be_the_input(tmp_path):
    source = tmp_path / "r.csv"
    source.write_text("num_input_tokens\n5\n")
    done = run("delay", str(source), "--out", str(source), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    assert "the output is the input itself" in one_line_error(done) and source.read_text() == "num_input_tokens\n5\n"


def test_sweep_refuses_to_replace_a_file_it_did_not_write(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "sweep.csv").write_text("my own numbers\n")
    done = run("sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--tokens", "1k,2k", "--out", str(out))
    assert "sweep.csv, which perfmodel sweep did not write" in one_line_error(done)
    assert (out / "sweep.csv").read_text() == "my own numbers\n" and not leftovers(out)


def test_sweep_reruns_replace_only_their_own_files(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = ("sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", str(out))
    assert run(*args, "--tokens", "1k,2k").returncode == 0 and (out / "heatmap.png").exists()
    done = run(*args, "--tokens", "1k")  # one prompt length: no heatmap this time
    assert done.returncode == 0, done.stderr
    assert not (out / "heatmap.png").exists()  # perfmodel's own stale output goes ...
    assert (out / "notes.txt").read_text() == "mine"  # ... the user's stays
    assert json.loads((out / MANIFEST).read_text())["commands"] == {"sweep": ["delay_vs_tokens.png", "sweep.csv"]}


def _written_by(command: str, folder: Path, files: dict[str, str]) -> None:
    with output_folder(folder, command=command, names=list(files)) as stage:
        for name, text in files.items():
            (stage / name).write_text(text)


def test_an_output_the_user_edited_is_neither_replaced_nor_removed(tmp_path):
    out = tmp_path / "results"
    _written_by("sweep", out, {"sweep.csv": "ours\n", "heatmap.png": "ours"})
    (out / "sweep.csv").write_text("ours, annotated by hand\n")
    with pytest.raises(InputError, match=r"sweep\.csv \(written by perfmodel sweep, changed since\)"):
        _written_by("sweep", out, {"sweep.csv": "new\n"})
    assert (out / "sweep.csv").read_text() == "ours, annotated by hand\n"
    os.utime(out / "heatmap.png", ns=(0, 0))  # (a change of its time alone: as edited)
    _written_by("sweep", out, {"summary.txt": "new"})  # heatmap.png is stale but changed: kept, now the user's
    assert (out / "heatmap.png").read_text() == "ours" and (out / "sweep.csv").exists()
    assert json.loads((out / MANIFEST).read_text())["commands"] == {"sweep": ["summary.txt"]}
    _written_by("sweep", out, {"summary.txt": "again"})  # an unchanged file of its own: replaced, as before
    assert (out / "summary.txt").read_text() == "again"


def test_an_output_file_the_user_edited_is_not_replaced(tmp_path):
    from perfmodel.ground.files import check_output_file, record_output_file

    target = tmp_path / "delays.csv"
    target.write_text("ours\n")
    record_output_file(target, command="delay")
    check_output_file(target, command="delay")  # unchanged: its own, replaced without a word
    target.write_text("ours, and a column of my own\n")
    with pytest.raises(
        InputError, match="did not write it as it is now .it has changed since perfmodel delay wrote it.*--replace"
    ):
        check_output_file(target, command="delay")
    check_output_file(target, command="delay", replace=True)


def test_a_manifest_without_stamps_still_owns_its_files(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "sweep.csv").write_text("written by an older perfmodel\n")
    (out / MANIFEST).write_text(json.dumps({"written_by": "perfmodel", "commands": {"sweep": ["sweep.csv"]}}))
    _written_by("sweep", out, {"sweep.csv": "new\n"})
    assert (out / "sweep.csv").read_text() == "new\n"


def test_a_file_where_a_folder_is_needed(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file")
    done = run("sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--tokens", "1k", "--out", str(blocker))
    assert "not a folder" in one_line_error(done) and blocker.read_text() == "a file"


def _slow_input(tmp_path: Path, rows: int = 300_000) -> Path:
    source = tmp_path / "slow.jsonl"
    source.write_text("".join(f'{{"num_input_tokens": {i}, "tag": "r{i}"}}\n' for i in range(rows)))
    return source


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_write_leaves_no_temporary_file_and_the_old_output(tmp_path, signum):
    source = _slow_input(tmp_path)
    out = tmp_path / "out" / "delays.csv"
    out.parent.mkdir()
    out.write_text("previous output\n")
    process = _popen(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "delay",
            str(source),
            "--out",
            str(out),
            "--bandwidth",
            "1",
            "--kv-bytes-per-token",
            "1",
            "--chunk-rows",
            "1000",
            "--replace",  # (the old output is the user's: asked to replace it, and interrupted)
        ]
    )
    deadline = time.monotonic() + 120
    while not leftovers(out.parent) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, "the command ended before it could be interrupted"
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    # (128 + signum, or ended by the signal itself: CI saw SIGINT's -2 once in some thousand runs, after the
    # message; both are a shell's 130, and what the user keeps is below)
    assert process.returncode in (128 + signum, -signum), stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert out.read_text() == "previous output\n" and not leftovers(out.parent)


class _SignalFromAnotherThread:
    """Send SIGINT to a thread that does not block it, as a process's pyarrow or numba threads do: Python
    then runs the handler in the main thread at its next instruction, whatever the main thread's mask."""

    def __init__(self) -> None:
        self.go, self.sent = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        self.go.wait()
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        self.sent.set()

    def now(self) -> None:
        self.go.set()
        self.sent.wait(10)


def _signalling_after(monkeypatch, module, name: str, times: int = 1):
    """Make ``module.name`` send a signal (from another thread) right after its first call returns."""
    real, sender, calls = getattr(module, name), _SignalFromAnotherThread(), []

    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == times:
            sender.now()
        return result

    monkeypatch.setattr(module, name, wrapped)


def test_a_signal_right_after_the_temporary_file_is_made_leaves_no_file(tmp_path, monkeypatch):
    target = tmp_path / "out.csv"
    target.write_text("previous output\n")
    _signalling_after(monkeypatch, tempfile, "mkstemp")
    with pytest.raises(KeyboardInterrupt), atomic_file(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "previous output\n" and not leftovers(tmp_path)


def test_a_signal_right_after_the_staging_folder_is_made_leaves_no_folder(tmp_path, monkeypatch):
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    _signalling_after(monkeypatch, tempfile, "mkdtemp")
    with pytest.raises(KeyboardInterrupt), output_folder(out, command="sweep") as stage:
        (stage / "sweep.csv").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_a_signal_while_an_output_folder_is_moved_in_completes_it_and_says_so(tmp_path, monkeypatch):
    out = tmp_path / "results"
    with output_folder(out, command="sweep") as stage:
        for name in ("a.csv", "b.png", "c.png"):
            (stage / name).write_text("old")
    _signalling_after(monkeypatch, os, "replace")  # after the first of the three files is moved in
    with pytest.raises(KeyboardInterrupt) as interrupted, output_folder(out, command="sweep") as stage:
        for name in ("a.csv", "b.png", "c.png"):
            (stage / name).write_text("new")
    assert {p.name: p.read_text() for p in out.glob("*.*") if p.name != MANIFEST} == dict.fromkeys(
        ("a.csv", "b.png", "c.png"), "new"
    )  # all three, not one new and two old
    assert interrupted.value.output_complete == str(out) and not leftovers(out)


def test_an_interrupt_after_the_output_was_complete_says_so():
    from perfmodel.cli._main import interrupted_message

    done = KeyboardInterrupt()
    done.output_complete = "results"
    assert interrupted_message(done) == "perfmodel: interrupted (SIGINT) after results was complete"
    assert interrupted_message(KeyboardInterrupt()) == (
        "perfmodel: interrupted (SIGINT); no output was written or changed"
    )


_SIGNAL_AT = """
import importlib, os, signal, sys
import perfmodel.cli._main as m
point, out = sys.argv[1], sys.argv[2]
def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)
if point == "parser":  # before the command line is read
    real_parser = m.build_parser
    m.build_parser = lambda: (ctrl_c(), real_parser())[1]
elif point == "imports":  # in the middle of the heavy imports (numba, pyarrow, matplotlib), held back
    real_import = importlib.import_module
    def import_module(name, *args):
        if name == "pyarrow":
            ctrl_c()
        return real_import(name, *args)
    importlib.import_module = import_module
elif point == "command":  # the first thing the command does
    real_preload = m._preload
    m._preload = lambda command: (real_preload(command), ctrl_c())[0]
sys.argv = ["perfmodel", "sweep", "--out", out]
m.console()
"""


@pytest.mark.parametrize("point", ["parser", "imports", "command"])
def test_ctrl_c_during_start_up_is_one_line(tmp_path, point):
    """Ctrl-C at a known point of the start-up (before the command line is read, amid the heavy imports, as
    the command begins): exit 130, one line, no output. (A timed signal accepted exit 0, when the command had
    finished before it: then it checked nothing.)"""
    process = _popen([sys.executable, "-c", _SIGNAL_AT, point, str(tmp_path / "r")])
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, (process.returncode, stderr)
    assert stderr.strip() == "perfmodel: interrupted (SIGINT); no output was written or changed", stderr
    assert not (tmp_path / "r").exists()


def test_the_signal_tests_hold_when_the_suite_runs_with_sigint_ignored(tmp_path):
    """Under nohup or a CI runner's background shell SIGINT is ignored, and children inherit it: the signal
    tests, run so, still pass (their children get default handling; this process raises KeyboardInterrupt)."""

    def ignored() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:randomly",
            __file__,
            "-k",
            ("ctrl_c_during_start_up and imports or signal_mid_write and 2 or right_after_the_temporary_file"),
        ],
        preexec_fn=ignored,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0 and " passed" in done.stdout and "deselected" in done.stdout, done.stdout[-2000:]


_SIGNAL_WHILE_DRAWING = """
import os, signal, sys, time
from pathlib import Path
import perfmodel.cli as cli, perfmodel.cli._draw as draw, perfmodel.plotting as pp
out, signame, drawing = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
def slow_heatmap(*args, **kwargs):  # the drawing child: still at work when the signal comes
    time.sleep(1.0)
    (out.parent / "late").write_text("the child outlived the command")
def signalled(*args, **kwargs):  # the parent, while the child draws: Ctrl-C to the whole group, or a kill
    if signame == "SIGINT":
        os.killpg(0, signal.SIGINT)
    else:
        os.kill(os.getpid(), getattr(signal, signame))
    time.sleep(5)
draw._fork_is_safe_and_useful = lambda: drawing == "fork"  # (both paths, as test_cli's drawing fixture)
pp.heatmap_figure, pp.delay_vs_tokens_figure = slow_heatmap, signalled
sys.argv = ["perfmodel", "sweep", "--tokens", "1k:32k", "--out", str(out)]
cli.console()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the figures are drawn side by side on Linux only")
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("drawing", ["fork", "in-process"])
def test_a_signal_while_the_figures_are_drawn_leaves_nothing_behind(tmp_path, signame, drawing):
    """Interrupted while a child draws the heatmap: one line, the signal's exit code, no output folder,
    no staging folder, and no child writing anything afterwards."""
    process = _popen(
        [sys.executable, "-c", _SIGNAL_WHILE_DRAWING, str(tmp_path / "r"), signame, drawing], start_new_session=True
    )
    _, stderr = process.communicate(timeout=120)
    signum = getattr(signal, signame)
    assert process.returncode == 128 + signum, (process.returncode, stderr)
    assert stderr.strip() == f"perfmodel: interrupted ({signame}); no output was written or changed", stderr
    time.sleep(1.5)  # long enough for a child left running to write its file
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "suffix, opener", [(".csv.gz", gzip.open), (".jsonl.xz", lzma.open), (".csv.bz2", None), (".jsonl.zst", None)]
)
def test_compression_follows_the_output_suffix(tmp_path, suffix, opener):
    source = tmp_path / "r.csv"
    source.write_text("num_input_tokens\n1024\n2048\n")
    out = tmp_path / f"out{suffix}"
    delay_file(source, out, progress=False, **KEYWORDS)
    raw = out.read_bytes()
    magic = {".gz": b"\x1f\x8b", ".xz": b"\xfd7zXZ", ".bz2": b"BZh", ".zst": b"\x28\xb5\x2f\xfd"}[out.suffix]
    assert raw.startswith(magic)
    back = next(iter(perfmodel.io.read_chunks(out)[0]))  # and perfmodel reads its own output back
    expected = perfmodel.handoff_delay_ms([1024, 2048], 10.0, 1000)
    if ".csv" in suffix:  # (CSV carries computed columns to 13 significant digits)
        expected = perfmodel.io.significant(expected)
    assert back["handoff_delay_ms"].tolist() == expected.tolist()


@pytest.mark.parametrize("name", ["out.parquet.gz", "out.zip", "out.txt", "out"])
def test_unknown_or_unsupported_output_suffix_is_refused(tmp_path, name):
    source = tmp_path / "r.csv"
    source.write_text("num_input_tokens\n1\n")
    done = run("delay", str(source), "--out", str(tmp_path / name), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    one_line_error(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


# --- file faults: a full disk and a read-only folder (small tmpfs mounts, where allowed) ----


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip() or 'not permitted'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_full_disk_is_one_line_and_leaves_the_old_output(tmp_path, small_tmpfs):
    source = tmp_path / "big.csv"
    pd.DataFrame({"num_input_tokens": np.arange(200_000)}).to_csv(source, index=False)
    out = small_tmpfs / "delays.csv"
    out.write_text("previous output\n")
    done = run(
        "delay",
        str(source),
        "--out",
        str(out),
        "--bandwidth",
        "1",
        "--kv-bytes-per-token",
        "1",
        "--chunk-rows",
        "10000",
        "--replace",  # (the old output is the user's: asked to replace it, and the disk is full)
    )
    assert "No space left on device" in one_line_error(done)
    assert out.read_text() == "previous output\n" and not leftovers(small_tmpfs)


def test_read_only_folder_is_one_line(tmp_path, small_tmpfs):
    source = tmp_path / "r.csv"
    source.write_text("num_input_tokens\n1\n")
    assert subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)]).returncode == 0
    done = run(
        "delay", str(source), "--out", str(small_tmpfs / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1"
    )
    assert "Read-only file system" in one_line_error(done)
    done = run(
        "sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--tokens", "1k", "--out", str(small_tmpfs / "results")
    )
    assert "Read-only file system" in one_line_error(done)


# --- 2. lossless pass-through --------------------------------------------------------------

INT64 = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**60 + 1, -(2**63), 2**53 + 1]))
FLOAT = st.one_of(
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.1 + 0.2, 5e-324, 1e308, -0.0]),
)
TEXT = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"), max_size=8).filter(
        lambda t: t != ""
    ),
)


#: pandas 2 reads CSV floats exactly only when asked (as perfmodel.read_trace asks; from pandas 3 on, unasked)
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _read_back(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().split("\n") if line]  # not splitlines: \x85 is text
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    frame = pd.read_csv(
        path, dtype={"id": "Int64", "text": "string"}, keep_default_na=False, na_values=[""], **_EXACT_FLOATS
    )
    return [{k: (None if pd.isna(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(st.tuples(INT64, FLOAT, TEXT), min_size=1, max_size=30),
    fmt=st.sampled_from(["csv", "parquet", "jsonl"]),
)
def test_parquet_columns_pass_through_exactly(tmp_path_factory, rows, fmt):
    folder = tmp_path_factory.mktemp("lossless")
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "x": pa.array([r[1] for r in rows], pa.float64()),
            "text": pa.array([r[2] for r in rows], pa.string()),
            "num_input_tokens": pa.array(range(len(rows)), pa.int64()),
        }
    )
    pq.write_table(table, folder / "in.parquet")
    out = folder / f"out.{fmt}"
    delay_file(folder / "in.parquet", out, progress=False, chunk_rows=7, **KEYWORDS)
    back = _read_back(out)
    for original, row in zip(table.to_pylist(), back, strict=True):
        assert row["id"] == original["id"] and type(row["id"]) is type(original["id"])
        assert row["x"] == original["x"] and (row["x"] is None or np.signbit(row["x"]) == np.signbit(original["x"]))
        assert row["text"] == original["text"]
        expected = original["num_input_tokens"] * 1000 / 10e9 * 1000
        if fmt == "csv":  # (CSV carries computed columns to 13 significant digits)
            expected = float(perfmodel.io.significant(np.array([expected]))[0])
        assert row["handoff_delay_ms"] == expected
    if fmt == "parquet":  # types too
        assert pq.read_schema(out).field("id").type == pa.int64()


def test_csv_fields_pass_through_as_written(tmp_path):
    text = 'id,num_input_tokens,code,note,big\n1,5,007,"a,b",18446744073709551617\n2,6,,NA,\n'
    (tmp_path / "in.csv").write_text(text)
    delay_file(tmp_path / "in.csv", tmp_path / "out.csv", progress=False, **KEYWORDS)
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0] == "id,num_input_tokens,code,note,big,handoff_delay_ms"
    assert lines[1].startswith('1,5,007,"a,b",18446744073709551617,') and lines[2].startswith("2,6,,NA,,")
    delay_file(tmp_path / "in.csv", tmp_path / "out.parquet", progress=False, **KEYWORDS)
    schema = pq.read_schema(tmp_path / "out.parquet")  # typed only where the whole column converts exactly
    assert [str(schema.field(c).type) for c in ("id", "code", "note", "big")] == ["int64", "string", "string", "string"]


def test_json_lines_with_varying_keys_give_the_union(tmp_path):
    lines = [
        '{"num_input_tokens": 1, "a": 1152921504606846977}',
        '{"num_input_tokens": 2, "b": "x"}',
        '{"num_input_tokens": 3, "a": null, "c": [1, 2]}',
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"out.{fmt}"
        delay_file(tmp_path / "in.jsonl", out, progress=False, chunk_rows=1, **KEYWORDS)
        if fmt == "csv":
            delay = perfmodel.io.significant(perfmodel.handoff_delay_ms([1, 2], 10.0, 1000)).tolist()
            assert out.read_text().splitlines()[:3] == [
                "num_input_tokens,a,b,c,handoff_delay_ms",
                f"1,1152921504606846977,,,{delay[0]!r}",
                f"2,,x,,{delay[1]!r}",
            ]
        else:
            rows = _read_back(out)
            assert [r["a"] for r in rows] == [2**60 + 1, None, None] and [r["b"] for r in rows] == [None, "x", None]
            assert rows[2]["c"] == ([1, 2] if fmt == "jsonl" else "[1, 2]")


def test_float_results_round_trip_in_json_lines(tmp_path):
    (tmp_path / "in.csv").write_text("num_input_tokens\n3\n")
    delay_file(
        tmp_path / "in.csv", tmp_path / "o.jsonl", progress=False, kv_bytes_per_token=1, kv_transfer_bandwidth=7.0
    )
    value = json.loads((tmp_path / "o.jsonl").read_text())["handoff_delay_ms"]
    assert value == perfmodel.handoff_delay_ms(3, 7.0, 1)  # all 17 digits, not 10


def test_replay_bytes_and_tokens_are_integers():
    replay = perfmodel.replay_handoffs(perfmodel.synthetic_trace(200, 10, seed=1), model="llama-3.1-8b", link="ib-ndr")
    assert replay["transfer_bytes"].dtype == np.int64 and replay["charged_tokens"].dtype == np.int64


# --- 3. replay never invents a cache hit ---------------------------------------------------


def _mooncake(path: Path, hashes: list[str]) -> Path:
    path.write_text(
        "".join(
            f'{{"timestamp": {i}, "input_length": 1024, "output_length": 1, "hash_ids": {h}}}\n'
            for i, h in enumerate(hashes)
        )
    )
    return path


def test_null_hash_id_in_a_file_is_an_error_naming_the_line(tmp_path):
    path = _mooncake(tmp_path / "t.jsonl", ["[1, 2]", "[1, null]", "[3, 4]"])
    with pytest.raises(ValueError, match=r"t\.jsonl, line 2: hash_ids must be a list of integers"):
        perfmodel.read_trace(path)
    with pytest.warns(UserWarning, match="skipped 1 malformed line"):
        trace = perfmodel.read_trace(path, errors="skip")
    assert len(trace) == 2 and trace.attrs["skipped_lines"] == 1


def test_null_hash_id_in_a_frame_is_an_error_naming_the_row():
    trace = pd.DataFrame(
        {
            "arrival_ms": [0.0, 1.0],
            "num_input_tokens": [1024, 1024],
            "hash_ids": pd.Series([[7, 8], [7, None]], index=["a", "b"]).to_numpy(),
        },
        index=["a", "b"],
    )
    trace.attrs["hash_block_tokens"] = 512
    with pytest.raises(InputError, match="null block id, first at row 'b'"):
        perfmodel.replay_handoffs(trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, mode="destination_missing")


@pytest.mark.parametrize("bad", [0, -512, 2.5, True])
def test_block_sizes_must_be_positive_whole_numbers(tmp_path, bad):
    path = _mooncake(tmp_path / "t.jsonl", ["[1]"])
    with pytest.raises(InputError, match="hash_block_tokens"):
        perfmodel.read_trace(path, hash_block_tokens=bad)
    with pytest.raises(InputError, match="hash_block_tokens"):
        perfmodel.synthetic_trace(10, 1.0, hash_block_tokens=bad)
    trace = perfmodel.read_trace(path)
    trace.attrs["hash_block_tokens"] = bad
    with pytest.raises(InputError, match="hash_block_tokens"):
        perfmodel.replay_handoffs(trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0)
    with pytest.raises(InputError, match="block_size"):
        perfmodel.replay_handoffs(
            perfmodel.read_trace(path), kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, block_size=bad
        )


def test_fractional_counts_are_errors_not_truncated(tmp_path):
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [1024.0, 99.5]})
    with pytest.raises(InputError, match="not a whole number"):
        perfmodel.replay_handoffs(trace, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0)
    (tmp_path / "t.csv").write_text("arrival_ms,num_input_tokens,num_output_tokens\n0,10,2.5\n")
    with pytest.raises(ValueError, match="line 2"):
        perfmodel.read_trace(tmp_path / "t.csv")
    with pytest.raises(InputError, match="tp: 2.5"):
        perfmodel.kv_bytes_per_token("llama-3.1-70b", tp=2.5)
    with pytest.raises(InputError, match="tp: 2.5"):
        perfmodel.sweep(model="llama-3.1-70b", tp=[1, 2.5], link="ib-ndr", num_input_tokens=[1])
    with pytest.raises(InputError, match="decode_workers"):
        perfmodel.replay_handoffs(trace.head(1), kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, decode_workers=1.5)


# --- 4. no silent misreads in the API ------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        np.timedelta64(5, "ms"),
        pd.Timedelta(5, "ms"),
        datetime.timedelta(seconds=1),
        pd.Timestamp("2024-01-01"),
        np.array([1, 2], dtype="timedelta64[s]"),
        pd.Series(pd.to_timedelta([1, 2], unit="s")),
    ],
)
@pytest.mark.parametrize("argument", ["num_input_tokens", "kv_transfer_bandwidth", "latency_ms"])
def test_times_are_never_numbers(value, argument):
    inputs = {**dict(num_input_tokens=1, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1), argument: value}
    with pytest.raises(InputError, match=f"{argument}: got .*where plain numbers were expected"):
        perfmodel.handoff_delay_ms(**inputs)


@pytest.mark.parametrize(
    "argument",
    ["num_input_tokens", "kv_bytes_per_token", "kv_transfer_bandwidth", "worker_type", "mode", "state_bytes"],
)
def test_nullable_booleans_are_never_numbers_or_codes(argument):
    flags = pd.array([True, None, False], dtype="boolean")
    inputs = {**dict(num_input_tokens=[1, 2, 3], kv_transfer_bandwidth=1.0, kv_bytes_per_token=1), argument: flags}
    if argument == "mode":
        inputs["destination_missing_tokens"] = 1
    with pytest.raises(InputError, match=argument):
        perfmodel.handoff_delay_ms(**inputs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.booleans()), min_size=1, max_size=40))
def test_masked_entries_are_missing(entries):
    data, mask = (np.array(v) for v in zip(*entries))
    masked = np.ma.masked_array(data, mask=mask)
    expected = perfmodel.handoff_delay_ms(np.where(mask, np.nan, data), 1.0, 1000)
    np.testing.assert_array_equal(perfmodel.handoff_delay_ms(masked, 1.0, 1000), expected)
    np.testing.assert_array_equal(
        perfmodel.handoff_delay_ms(1000, np.ma.masked_array(data + 1.0, mask=mask), 1),
        perfmodel.handoff_delay_ms(1000, np.where(mask, np.nan, data + 1.0), 1),
    )


def test_series_values_align_on_the_index_or_are_refused():
    df = pd.DataFrame({"n": [10, 20, 30]}, index=["a", "b", "c"])
    shuffled = pd.Series([3.0, 2.0, 1.0], index=["c", "b", "a"])
    result = perfmodel.handoff_delays(df, num_input_tokens="n", kv_bytes_per_token=1e9, kv_transfer_bandwidth=shuffled)
    assert result.tolist() == [10_000.0, 10_000.0, 10_000.0]  # each row its own bandwidth, not by position
    with pytest.raises(InputError, match="index differs"):
        perfmodel.handoff_delays(
            df, num_input_tokens=pd.Series([1, 2, 3]), kv_bytes_per_token=1, kv_transfer_bandwidth=1.0
        )


def test_integer_overflow_raises():
    with pytest.raises(InputError, match="64-bit integer"):
        perfmodel.destination_missing_tokens(2**63 - 1, 0, 2**62)
    with pytest.raises(InputError, match="64-bit integer"):
        perfmodel.destination_missing_tokens(1e30, 0, 16)


def test_coerce_turns_unknown_names_in_a_column_into_missing_rows():
    df = pd.DataFrame(
        {
            "n": [1024, 1024, 1024],
            "model": ["llama-3.1-70b", "no-such-model", "qwen3-32b"],
            "link": ["ib-ndr", "ib-ndr", "warp-drive"],
        }
    )
    result = perfmodel.handoff_delays(
        df, num_input_tokens="n", kv_bytes_per_token="model", kv_transfer_bandwidth="link", errors="coerce"
    )
    assert result.isna().tolist() == [False, True, True]
    with pytest.raises(ValueError, match="no-such-model|warp-drive"):  # (the first found)
        perfmodel.handoff_delays(df, num_input_tokens="n", kv_bytes_per_token="model", kv_transfer_bandwidth="link")
    with pytest.raises(InputError, match="tp"):  # knobs are never coerced away
        perfmodel.handoff_delays(
            df, num_input_tokens="n", kv_bytes_per_token="model", kv_transfer_bandwidth="link", errors="coerce", tp=0
        )


@pytest.mark.parametrize("missing", ["kv_transfer_bandwidth", "kv_bytes_per_token"])
def test_an_input_not_given_is_named_as_missing(missing):
    given = {k: v for k, v in dict(kv_transfer_bandwidth=1.0, kv_bytes_per_token=1).items() if k != missing}
    with pytest.raises(InputError, match=f"{missing}: was not given"):
        perfmodel.handoff_delays(pd.DataFrame({"num_input_tokens": [1]}), **given)


@pytest.mark.parametrize(
    "knob",
    [
        dict(num_threads=0),
        dict(num_threads=2.5),
        dict(num_threads="4"),
        dict(num_threads=10**6),
        dict(parallel="yes"),
        dict(errors="ignore"),
    ],
)
def test_knobs_are_validated(knob):
    with pytest.raises(InputError, match=next(iter(knob))):
        perfmodel.handoff_delay_ms([1, 2], 1.0, 1, **knob)


# --- 5. whole-input error reports ----------------------------------------------------------


def test_cli_counts_invalid_rows_over_the_whole_file(tmp_path):
    tokens = np.arange(10_000)
    tokens[[1500, 7000, 9999]] = -1
    pd.DataFrame({"num_input_tokens": tokens}).to_csv(tmp_path / "r.csv", index=False)
    done = run(
        "delay",
        str(tmp_path / "r.csv"),
        "--out",
        str(tmp_path / "o.csv"),
        "--bandwidth",
        "1",
        "--kv-bytes-per-token",
        "1",
        "--chunk-rows",
        "1000",
    )
    line = one_line_error(done)
    assert "3 invalid rows; first at line 1502: '-1'" in line and "--errors coerce" in line
    assert "errors='coerce'" not in line and not (tmp_path / "o.csv").exists()


@pytest.mark.exhaustive  # (a Dask cluster)
def test_dask_reports_the_total_and_first_bad_row_in_input_order(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for i, bad_rows in enumerate([[], [40, 41], [3]]):
        tokens = np.arange(100)
        tokens[bad_rows] = -5
        pd.DataFrame({"num_input_tokens": tokens}).to_parquet(source / f"p{i}.parquet")
    done = run(
        "delay",
        str(source),
        "--out",
        str(tmp_path / "out"),
        "--workers",
        "2",
        "--bandwidth",
        "1",
        "--kv-bytes-per-token",
        "1",
    )
    line = one_line_error(done)
    assert "p1.parquet" in line and "3 invalid rows; first at row 41: -5" in line
    assert not (tmp_path / "out").exists()


# --- 6. one line and exit 2 for every user-caused failure; bugs are exit 1 -----------------


def test_unreachable_scheduler_is_bounded_and_one_line(tmp_path, parquet_folder):
    started = time.monotonic()
    done = run(
        "delay",
        str(parquet_folder),
        "--out",
        str(tmp_path / "o"),
        "--scheduler",
        "tcp://127.0.0.1:9",
        "--connect-timeout",
        "2",
        "--bandwidth",
        "1",
        "--kv-bytes-per-token",
        "1",
    )
    assert "cannot reach the Dask scheduler" in one_line_error(done)
    assert time.monotonic() - started < 60 and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "name, content, fragment",
    [
        ("bad.csv.gz", b"\x1f\x8b\x08\x00garbage", "bad.csv.gz"),
        ("bad.jsonl.gz", b"\x1f\x8b\x08\x00garbage", "bad.jsonl.gz"),
        ("empty.jsonl", b"", "no JSON objects"),
        ("blank.jsonl", b"\n\n", "no JSON objects"),
        ("array.json", b'[{"num_input_tokens": 1}]\n', "a JSON list, not an object"),
        ("scalar.jsonl", b'{"num_input_tokens": 1}\n42\n', "line 2: a JSON int, not an object"),
        ("empty.csv", b"", "the file is empty"),
        ("bad.parquet", b"PAR1 not really", "not a readable Parquet file"),
    ],
)
def test_bad_input_files_are_one_line(tmp_path, name, content, fragment):
    (tmp_path / name).write_bytes(content)
    done = run(
        "delay", str(tmp_path / name), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1"
    )
    assert fragment in one_line_error(done)
    assert not (tmp_path / "o.csv").exists() and not leftovers(tmp_path)


def test_internal_errors_are_not_disguised_as_user_errors():
    code = (
        "import sys, perfmodel.cli as c, perfmodel.cli.models as models\n"
        "def boom(args): raise KeyError('our bug')\n"
        "models.cmd_models = boom  # (the command's module registers what it holds when the parser is built)\n"
        "sys.exit(c.main(['models']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "internal error" in done.stderr and "KeyError: 'our bug'" in done.stderr


# --- 7. bounded memory on hostile sizes ----------------------------------------------------


def test_huge_token_range_is_refused_at_once(tmp_path):
    started = time.monotonic()
    done = run("sweep", "--tokens", "1:1000000000:1", "--out", str(tmp_path / "r"))
    assert "1,000,000,000 values" in one_line_error(done) and time.monotonic() - started < 30
    assert not (tmp_path / "r").exists()


def test_a_sweep_larger_than_memory_is_refused_before_allocating():
    with pytest.raises(InputError, match="more than this machine's"):
        perfmodel.sweep(
            num_input_tokens=np.arange(1, 10**6), kv_transfer_bandwidth=np.arange(1, 10**6), kv_bytes_per_token=1
        )


# --- 8. the install stays clean: compiled kernels live in a per-user cache ------------------


def test_compiled_kernels_are_cached_outside_the_package(tmp_path):
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)
    code = "import perfmodel; perfmodel.handoff_delay_ms([1, 2], 1.0, 1); print(perfmodel.__file__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    package = Path(done.stdout.strip()).parent
    assert list((tmp_path / "cache").rglob("*.nbi"))  # the index of the compiled kernels, in the user cache
    assert not [p for p in package.rglob("*") if p.suffix in (".nbi", ".nbc")]  # and nothing inside the package


@pytest.mark.parametrize("out_name", ["o.csv", "o.parquet", "o.jsonl"])
def test_header_only_files_keep_their_columns(tmp_path, out_name):
    (tmp_path / "empty.csv").write_text("id,num_input_tokens,note\n")
    assert delay_file(tmp_path / "empty.csv", tmp_path / out_name, progress=False, **KEYWORDS) == 0
    if out_name.endswith(".csv"):
        assert (tmp_path / out_name).read_text() == "id,num_input_tokens,note,handoff_delay_ms\n"
    elif out_name.endswith(".parquet"):
        assert pq.read_schema(tmp_path / out_name).names == ["id", "num_input_tokens", "note", "handoff_delay_ms"]
        delay_file(tmp_path / out_name, tmp_path / "again.csv", progress=False, **KEYWORDS)  # and back, still empty
        assert (tmp_path / "again.csv").read_text() == "id,num_input_tokens,note,handoff_delay_ms\n"
    else:
        assert (tmp_path / out_name).read_text() == ""
