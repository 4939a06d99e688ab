"""The perfmodel command, run as users run it: in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfmodel.cli import UsageError, main, parse_tokens


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.fixture
def requests_csv(tmp_path: Path) -> Path:
    path = tmp_path / "requests.csv"
    pd.DataFrame({"prompt_tokens": [1024, 32768, 4096], "worker_type": ["prefill", "decode", "prefill"]}).to_csv(
        path, index=False
    )
    return path


def test_help_does_not_import_numba_or_matplotlib():
    code = (
        "import sys, runpy; sys.argv = ['perfmodel', '--help']\n"
        "try: runpy.run_module('perfmodel', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in ('numba', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: perfmodel" in done.stdout and done.stdout.strip().endswith("[]")


def test_sweep_defaults(tmp_path):
    done = run("sweep", "--out", str(tmp_path / "results"))
    assert done.returncode == 0, done.stderr
    df = pd.read_csv(tmp_path / "results" / "sweep.csv")
    assert set(df["link"]) == {"nvlink4", "nvlink5", "pcie4", "pcie5", "ib-ndr", "ib-xdr", "roce-400g", "eth-100g"}
    assert df["num_input_tokens"].min() == 128 and df["num_input_tokens"].max() == 131072
    assert (tmp_path / "results" / "delay_vs_tokens.png").stat().st_size > 10_000
    assert (tmp_path / "results" / "heatmap.png").stat().st_size > 10_000
    assert "handoff delay (ms) at prompt length" in done.stdout and "32k" in done.stdout


def test_sweep_options_and_parquet(tmp_path):
    done = run(
        "sweep",
        "--model",
        "deepseek-v3",
        "--bandwidth",
        "50",
        "450",
        "--tokens",
        "1k,32k",
        "--mode",
        "destination_missing",
        "--cache-hit",
        "0",
        "0.5",
        "--format",
        "parquet",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    df = pd.read_parquet(tmp_path / "sweep.parquet")
    assert len(df) == 2 * 2 * 2 and set(df["cache_hit_ratio"]) == {0.0, 0.5}


def test_delay_csv_to_parquet(tmp_path, requests_csv):
    out = tmp_path / "delays.parquet"
    done = run(
        "delay",
        str(requests_csv),
        "--out",
        str(out),
        "--model",
        "llama-3.1-70b",
        "--link",
        "ib-ndr",
        "--column",
        "num_input_tokens=prompt_tokens",
    )
    assert done.returncode == 0, done.stderr
    df = pd.read_parquet(out)
    assert df["handoff_delay_ms"].round(3).tolist()[::2] == [6.711, 26.844] and pd.isna(df["handoff_delay_ms"][1])


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_delay_in_chunks_matches_one_pass(tmp_path, requests_csv, suffix):
    source = tmp_path / f"big.{suffix}"
    big = pd.DataFrame({"num_input_tokens": range(25_000)})
    big.to_csv(source, index=False) if suffix == "csv" else big.to_json(source, orient="records", lines=True)
    out = tmp_path / f"out.{suffix}"
    done = run(
        "delay",
        str(source),
        "--out",
        str(out),
        "--bandwidth",
        "10",
        "--kv-bytes-per-token",
        "1000",
        "--chunk-rows",
        "4096",
    )
    assert done.returncode == 0, done.stderr
    result = pd.read_csv(out) if suffix == "csv" else pd.read_json(out, lines=True)
    assert len(result) == 25_000
    pd.testing.assert_series_equal(
        result["handoff_delay_ms"], big["num_input_tokens"] * 1000 / 10e9 * 1e3, check_names=False, check_dtype=False
    )


def test_models_and_links():
    models = run("models")
    assert models.returncode == 0 and "qwen3-32b" in models.stdout and "262144" in models.stdout
    links = run("links")
    assert links.returncode == 0 and "ib-ndr" in links.stdout and "8x ib-ndr" in links.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["delay", "{dir}/missing.csv", "--out", "{dir}/o.csv", "--bandwidth", "1", "--kv-bytes-per-token", "1"],
            "missing.csv: no such file",
        ),
        (
            [
                "delay",
                "{csv}",
                "--out",
                "{dir}/o.csv",
                "--bandwidth",
                "1",
                "--kv-bytes-per-token",
                "1",
                "--column",
                "num_input_tokens=tokens",
            ],
            "no column 'tokens'; the frame has ['prompt_tokens', 'worker_type']",
        ),
        (
            ["delay", "{bad}", "--out", "{dir}/o.csv", "--bandwidth", "1", "--kv-bytes-per-token", "1"],
            "column 'num_input_tokens' (num_input_tokens): 1 invalid row; first at line 3: 'ten' (not a number)",
        ),
        (
            [
                "delay",
                "{csv}",
                "--out",
                "{dir}/o.csv",
                "--bandwidth",
                "-1",
                "--kv-bytes-per-token",
                "1",
                "--column",
                "num_input_tokens=prompt_tokens",
            ],
            "argument --bandwidth: -1: bandwidth is in decimal GB/s and >= 0",
        ),
        (
            [
                "delay",
                "{csv}",
                "--out",
                "{dir}/o.csv",
                "--link",
                "ib-nrd",
                "--kv-bytes-per-token",
                "1",
                "--column",
                "num_input_tokens=prompt_tokens",
            ],
            "unknown link 'ib-nrd'. Fix: did you mean ib-ndr",
        ),
        (["sweep", "--model", "lama-3.1-70b", "--out", "{dir}/s"], "did you mean llama-3.1-70b"),
        (
            [
                "delay",
                "{csv}",
                "--out",
                "{dir}/o.csv",
                "--bandwidth",
                "1",
                "--kv-bytes-per-token",
                "1",
                "--column",
                "num_input_token=prompt_tokens",
            ],
            "did you mean num_input_tokens?",
        ),
        (
            [
                "trace",
                "{csv}",
                "--out",
                "{dir}/t",
                "--bandwidth",
                "1",
                "--kv-bytes-per-token",
                "1",
                "--column",
                "arrival=when",
            ],
            "'arrival' is not one of the names; did you mean arrival_ms?",
        ),
        (["sweep", "--tokens", "1k:zz", "--out", "{dir}/s"], "'zz' is not a token count"),
        (["sweep", "--bandwidth", "fast", "--out", "{dir}/s"], "--bandwidth: 'fast' is not a number"),
        (
            ["delay", "{csv}", "--out", "{dir}/o.txt", "--bandwidth", "1", "--kv-bytes-per-token", "1"],
            "cannot tell the format from '.txt'",
        ),
        (
            ["delay", "{unreadable}", "--out", "{dir}/o.csv", "--bandwidth", "1", "--kv-bytes-per-token", "1"],
            "not a readable Parquet file",
        ),
    ],
)
def test_bad_input_one_line_exit_2_no_output(tmp_path, requests_csv, args, message):
    bad = tmp_path / "bad.csv"
    bad.write_text("num_input_tokens\n10\nten\n")
    unreadable = tmp_path / "broken.parquet"
    unreadable.write_bytes(b"not parquet at all")
    before = set(tmp_path.rglob("*"))
    filled = [a.format(dir=tmp_path, csv=requests_csv, bad=bad, unreadable=unreadable) for a in args]
    done = run(*filled)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert message in lines[0]
    assert set(tmp_path.rglob("*")) == before  # nothing created, nothing half-written


def test_a_failed_command_exits_with_2_every_time(tmp_path):
    """A failed run ends without the interpreter's teardown: with pyarrow 14, a failed CSV read's read-ahead
    aborted the teardown in about 1 run of 7 on a loaded machine (the suite runs it beside other tests)."""
    bad = tmp_path / "bad.csv"
    bad.write_text("num_input_tokens,x\n10\n30,40\n")
    for _ in range(15):
        done = subprocess.run([sys.executable, "-m", "perfmodel", "delay", str(bad), "--out", str(tmp_path / "o.csv"),
                               "--model", "llama-3.1-8b", "--link", "ib-ndr"], capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (done.returncode, done.stderr)


def test_malformed_csv_line_is_named(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("num_input_tokens\n10\n20\n30,40\n")
    done = run("delay", str(bad), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    assert done.returncode == 2 and "bad.csv, line 4: 2 fields where the header has 1" in done.stderr
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('num_input_tokens,note\n10,a\n20,"1310', 3),  # (a file cut short inside a quoted field)
        ('num_input_tokens,note\n10,a\n20,"x\n30,y\n', 3),  # (the quote swallows the lines after it)
        ('num_input_tokens,note\n10,"a ""b"" c"\n20,"x\n', 3),  # (doubled quotes inside a field are closed)
        ('num_input_tokens,note\n10,a\n20,"ab\ncd""ef\ngh', 3),  # (where it opens, not its last quote)
        ('num_input_tokens,note\r10,a\r20,"cut\r30', 3),  # (lines ended by \r alone, as pyarrow reads them)
        ('num_input_tokens,note\n10,12"\n20,"cut', 3),  # (a quote inside a field not quoted is a character)
        ('num_input_tokens,note\n10,a\n20,b\n30,""\n40,"', 5),  # (a field that opens at the very end)
    ],
)
def test_a_quoted_field_never_closed_is_refused_not_read_to_the_end(tmp_path, text, line):
    """(Hostile: pyarrow reads a quote never closed as if closed at the end of the file: a file cut short
    inside its last field gave that field's first characters as its value, and the run went on.)"""
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    done = run("delay", str(bad), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    assert done.returncode == 2, done.stderr
    assert f"bad.csv, line {line}: a quoted field opens here and is never closed" in done.stderr, done.stderr
    assert not (tmp_path / "o.csv").exists()


def test_quotes_as_csv_writes_them_are_read(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text('num_input_tokens,note\n10,"a ""b"", c"\n20,"two\nlines"\n30,5"\n')
    done = run("delay", str(good), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(tmp_path / "o.csv")["note"].tolist() == ['a "b", c', "two\nlines", '5"']


def test_existing_output_is_not_overwritten_by_a_failed_run(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("num_input_tokens\n" + "10\n" * 5000 + "-1\n")
    out = tmp_path / "o.csv"
    out.write_text("precious\n")
    done = run(
        "delay",
        str(bad),
        "--out",
        str(out),
        "--bandwidth",
        "1",
        "--kv-bytes-per-token",
        "1",
        "--chunk-rows",
        "1000",
        "--replace",  # (asked to replace it: the run fails, and the file stays)
    )
    assert done.returncode == 2 and "1 invalid row; first at line 5002: '-1'" in done.stderr
    assert out.read_text() == "precious\n" and sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "o.csv"]


def test_debug_shows_traceback(tmp_path):
    done = run("--debug", "sweep", "--tokens", "x", "--out", str(tmp_path))
    assert done.returncode != 0 and "Traceback" in done.stderr


def test_argparse_errors_exit_2():
    done = run("sweep", "--format", "xlsx")
    assert done.returncode == 2 and "invalid choice" in done.stderr


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("1k,8k,32k", [1024, 8192, 32768]),
        ("128:1k", [128, 256, 512, 1024]),
        ("1000:3000:1000", [1000, 2000, 3000]),
        ("1:100:x10", [1, 10, 100]),
        ("1M", [1048576]),
    ],
)
def test_parse_tokens(spec, expected):
    assert parse_tokens(spec) == expected


@pytest.mark.parametrize("spec", ["", "5:1", "1:10:x1", "0:10:x2", "1:2:3:4", "1.5", "0", "0,1k", "0:4k:1k"])
def test_parse_tokens_rejects(spec):
    with pytest.raises(UsageError):
        parse_tokens(spec)


def test_the_installed_command_exits_with_mains_code_and_all_its_output(tmp_path):
    """``perfmodel`` runs ``console`` (main, then an exit that skips the final garbage collections):
    the exit code is main's and nothing printed is lost."""
    from importlib.metadata import entry_points

    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    if "perfmodel" not in scripts:
        pytest.skip("perfmodel is not installed")
    assert scripts["perfmodel"] == "perfmodel.cli:console"
    code = "import sys; from perfmodel.cli import console; sys.argv[1:] = {args!r}; console()"
    done = subprocess.run(
        [sys.executable, "-c", code.format(args=["sweep", "--tokens", "1k,2k", "--out", str(tmp_path / "r")])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.rstrip().endswith("heatmap.png"), done.stderr
    assert (tmp_path / "r" / "heatmap.png").stat().st_size > 0
    done = subprocess.run(
        [sys.executable, "-c", code.format(args=["sweep", "--tokens", "0"])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "error" in done.stderr


# --- the main job draws its two figures side by side (a forked child draws the heatmap) ----------

FORKS = [True, False] if sys.platform == "linux" else [False]


@pytest.fixture(params=FORKS, ids=lambda fork: "forked" if fork else "in-process")
def drawing(request, monkeypatch):
    # (the choice to fork has no public switch, and depends on the machine: both paths, forced)
    import perfmodel.cli._draw as cli

    monkeypatch.setattr(cli, "_fork_is_safe_and_useful", lambda: request.param)
    return request.param


def test_both_drawing_paths_write_the_same_figures(tmp_path, drawing, capsys):
    from perfmodel.cli import main

    assert main(["sweep", "--tokens", "1k:32k", "--model", "qwen3-32b", "--out", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("handoff delay (ms) at prompt length") == 1 and printed.count("wrote ") == 1, printed
    reference = tmp_path / "reference"
    assert main(["sweep", "--tokens", "1k:32k", "--model", "qwen3-32b", "--out", str(reference)]) == 0
    for name in ("delay_vs_tokens.png", "heatmap.png", "sweep.csv"):
        assert (tmp_path / "r" / name).read_bytes() == (reference / name).read_bytes(), name


def test_a_failed_figure_is_reported_and_nothing_is_written(tmp_path, drawing, capsys, monkeypatch):
    import perfmodel.plotting as pp
    from perfmodel.cli import main

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device", "heatmap.png")

    monkeypatch.setattr(pp, "heatmap_figure", disk_full)
    assert main(["sweep", "--tokens", "1k:32k", "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.strip() == "perfmodel sweep: error: heatmap.png: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_a_failure_beside_the_drawing_child_stops_it_before_cleaning_up(tmp_path, drawing, capsys, monkeypatch):
    """The parent fails while the child still draws: the child is stopped, so it never writes into the
    (removed) staging folder or anywhere else afterwards."""
    import multiprocessing
    import time

    import perfmodel.plotting as pp
    from perfmodel.cli import main

    def slow_heatmap(*args, **kwargs):
        time.sleep(1.0)
        (tmp_path / "late").write_text("the child outlived the command")
        raise AssertionError("unreachable when the child is stopped")

    def broken(*args, **kwargs):
        raise ValueError("no figure today")

    monkeypatch.setattr(pp, "heatmap_figure", slow_heatmap)
    monkeypatch.setattr(pp, "delay_vs_tokens_figure", broken)
    assert main(["sweep", "--tokens", "1k:32k", "--out", str(tmp_path / "r")]) == 2
    assert "no figure today" in capsys.readouterr().err
    if drawing:
        assert multiprocessing.active_children() == []
        time.sleep(1.5)  # (past the child's second of drawing: it never got to write)
        assert not (tmp_path / "late").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_nothing_is_forked_beside_another_python_thread():
    """A Python thread could hold a lock a forked child would wait on forever (a notebook has several)."""
    import threading

    # (the decision itself: perfmodel sweep's own effect of it is the test below)
    from perfmodel.cli._draw import _fork_is_safe_and_useful

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not _fork_is_safe_and_useful()
    finally:
        stop.set()
        thread.join()


@pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
    reason="the heatmap is drawn beside the computation on Linux with two cores or more",
)
def test_perfmodel_sweep_draws_its_heatmap_in_a_child_unless_another_thread_runs(tmp_path):
    """With nothing else running, ``perfmodel sweep`` draws its heatmap in a forked child, on a second core;
    with another Python thread running (a notebook), in this process. Each in a fresh interpreter, as a
    command starts (this test process holds other tests' thread pools)."""
    script = """
import os, sys, threading
from pathlib import Path
import perfmodel.plotting as pp
from perfmodel.cli import main

notes, beside_a_thread = Path(sys.argv[1]), sys.argv[2] == "thread"
real = pp.heatmap_figure

def noting_the_process(*args, **kwargs):
    (notes / f"drawn-by-{os.getpid()}").write_text("")
    return real(*args, **kwargs)

pp.heatmap_figure = noting_the_process
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
if beside_a_thread:
    thread.start()
code = main(["sweep", "--tokens", "1k:32k", "--model", "qwen3-32b", "--out", str(notes / "out")])
stop.set()
print(os.getpid(), code)
"""

    def drawn_by(how: str) -> tuple[int, set[int]]:
        notes = tmp_path / how
        notes.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", script, str(notes), how], capture_output=True, text=True, timeout=300
        )
        pid, code = map(int, done.stdout.split()[-2:])
        assert code == 0, done.stderr
        return pid, {int(note.name.removeprefix("drawn-by-")) for note in notes.glob("drawn-by-*")}

    pid, drawers = drawn_by("thread")
    assert drawers == {pid}
    pid, drawers = drawn_by("alone")
    assert len(drawers) == 1 and pid not in drawers, drawers


@pytest.mark.skipif(sys.platform != "linux", reason="forks on Linux only")
def test_the_drawing_child_runs_numbas_parallel_code_serially(monkeypatch):
    """A threading layer the parent started does not survive a fork (GNU OpenMP ends a child that
    enters it): in the child, every kernel takes its serial version."""
    # (the drawing child itself: no public call computes in it)
    import numpy as np

    import perfmodel
    import perfmodel.cli._draw as cli

    monkeypatch.setattr(cli, "_fork_is_safe_and_useful", lambda: True)
    tokens = np.arange(1, 200_001)
    expected = perfmodel.handoff_delay_ms(tokens, 50.0, 1000, parallel=True)  # the parent's layer starts

    def in_the_child() -> None:
        if not np.array_equal(perfmodel.handoff_delay_ms(tokens, 50.0, 1000, parallel=True), expected):
            raise AssertionError("the child computed other delays")

    with cli.alongside(in_the_child):
        pass


COMMANDS = ("sweep", "delay", "trace", "calibrate", "models", "links", "cache", "clusters")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_plain_text_and_says_what_the_command_does(command):
    """No Sphinx markup in --help (':class:`perfmodel.TransferMode`' leaked), and every command describes
    itself (models and links had only the option list)."""
    done = run(command, "--help")
    assert done.returncode == 0, done.stderr
    assert not re.search(r":(class|func|mod|meth|data|doc|attr):|``", done.stdout), done.stdout
    description = done.stdout.split("\n\n")[1]
    assert not description.startswith(("options:", "positional arguments:")), done.stdout


def test_errors_name_flags_that_exist():
    """A missing link named a --kv-transfer-bandwidth flag that trace does not have (it is --bandwidth)."""
    done = run("trace", "dataset:mooncake-synthetic", "--model", "llama-3.1-70b", "--out", "never")
    assert done.returncode == 2
    flags = set(re.findall(r"--[a-z][a-z-]+", done.stderr))
    known = set(re.findall(r"--[a-z][a-z-]+", run("trace", "--help").stdout))
    assert flags and flags <= known, flags - known


def test_result_columns_carry_no_float_noise(tmp_path):
    """6.710886400000001 ms is 6.7108864 ms: computed columns are written to 13 significant digits (within
    the model's 1e-12), the inputs as given."""
    done = run("sweep", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tokens", "1k,3k", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "sweep.csv").read_text()
    assert "6.7108864," in text or "6.7108864\n" in text, text
    assert not re.search(r"\d\.\d*0000000\d\b|\d\.\d*9999999\d\b", text), text


# --- a closed pipe, the file's line, the flags' help ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["links"],
        ["presets", "list"],
        ["trace", "dataset:mooncake-synthetic", "--model", "llama-3.1-8b", "--link", "ib-ndr"],
    ],
)
def test_a_closed_pipe_ends_quietly_with_141(tmp_path, command):
    """``perfmodel links | head -1``: 'error: [Errno 32] Broken pipe' and exit 2 before. head reads the line
    echoed first and exits, so perfmodel (a second later) writes into a pipe nobody reads: every time."""
    import shlex

    argv = [sys.executable, "-m", "perfmodel", *command] + (
        ["--out", str(tmp_path / "t")] if command[0] == "trace" else []
    )
    script = f"{{ echo first; {shlex.join(argv)}; }} | head -1; exit ${{PIPESTATUS[0]}}"
    env = {**os.environ, "PERFMODEL_CONFIG_DIR": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.stdout == "first\n"
    assert done.stderr == "" and done.returncode == 141, (done.returncode, done.stderr)


def test_a_closed_pipe_in_process_returns_141(monkeypatch, capsys):
    from perfmodel.cli import main

    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["links"]) == 141
    assert capsys.readouterr().err == ""


def test_delay_names_the_line_of_the_file_and_a_thousands_separator(tmp_path):
    """'row 2' (a data row) where calibrate and trace say 'line 3' (the file's line); '3,180' said only
    'not a number'."""
    bad = tmp_path / "bad.csv"
    bad.write_text('num_input_tokens\n100\n"3,180"\n')
    done = run("delay", str(bad), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "bad.csv" in done.stderr and "column 'num_input_tokens'" in done.stderr
    assert "first at line 3: '3,180'" in done.stderr and "thousands separator" in done.stderr
    assert "write 3180" in done.stderr
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"num_input_tokens": 100}\n\n{"num_input_tokens": -1}\n')
    done = run("delay", str(jsonl), "--out", str(tmp_path / "o.csv"), "--bandwidth", "1", "--kv-bytes-per-token", "1")
    assert done.returncode == 2 and "first at line 3: -1 (negative)" in done.stderr, done.stderr
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("command", ["delay", "trace"])
def test_every_flag_of_delay_and_trace_says_what_it_takes(command):
    """--kv-bytes-per-token, --bandwidth and --link had no help; --blocks-per-message read 'MESSAGE'."""
    done = run(command, "--help")
    text = re.sub(r"\s+", " ", done.stdout)
    for flag in ("--kv-bytes-per-token BYTES", "--bandwidth GBPS", "--link NAME", "--kv-cache-dtype DTYPE"):
        after = text.split(f" {flag} ", 2)[-1]  # (the options list, after the usage line)
        assert not after.startswith("--"), (flag, after[:80])
    assert "--blocks-per-message BLOCKS" in text and "MESSAGE" not in text


def test_a_bad_layer_count_is_said_as_a_layer_count(tmp_path):
    done = run("delay", "x.csv", "--out", "y.csv", "--num-layers", "-1")
    assert done.returncode == 2 and "layer counts are whole numbers" in done.stderr and "token" not in done.stderr, (
        done.stderr
    )


def test_a_trace_without_contention_says_what_its_figures_leave_out(tmp_path, capsys):
    """The default replay prices each handoff alone: its summary says so, and how to make transfers share."""
    args = ["trace", "dataset:azure-code-2023", "--model", "llama-3.1-70b", "--link", "ib-ndr"]
    assert main([*args, "--out", str(tmp_path / "alone")]) == 0
    assert "contention none: each handoff as if alone" in capsys.readouterr().out
    assert main([*args, "--contention", "fifo", "--out", str(tmp_path / "queued")]) == 0
    assert "contention none" not in capsys.readouterr().out


# --- a mistyped subcommand, flag or choice: the close match, generated over the whole parser -------------------


def _mistyped(word: str) -> str:
    """``word`` with one inner letter dropped (``--clear`` -> ``--cler``)."""
    letters = [i for i, c in enumerate(word) if c.isalpha()]
    i = letters[len(letters) // 2]
    return word[:i] + word[i + 1 :]


def _subcommands():
    import argparse

    from perfmodel.cli._main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_mistyped_subcommand_flag_and_choice_suggests_the_close_match():
    import argparse

    from perfmodel.cli._main import _flag_hint

    _, commands = _subcommands()
    checked = 0
    for name, command in commands.items():
        said = _error_of(["perfmodel", _mistyped(name)]) if _mistyped(name) not in commands else None
        if said is not None:
            assert f"maybe you meant {name!r}" in said, said
            checked += 1
        for action in command._actions:
            for flag in (f for f in action.option_strings if f.startswith("--") and f != "--help"):
                wrong = _mistyped(flag)
                if any(f.startswith(wrong) for a in command._actions for f in a.option_strings):
                    continue  # (an abbreviation argparse takes)
                hint = _flag_hint(command, [wrong])
                assert repr(flag) in hint and "maybe you meant" in hint, (name, flag, hint)
                checked += 1
            for choice in (c for c in action.choices or () if isinstance(c, str) and len(c) > 3):
                if _mistyped(choice) in action.choices:
                    continue
                with pytest.raises(argparse.ArgumentError) as raised:
                    command._check_value(action, _mistyped(choice))
                assert "maybe you meant" in str(raised.value), (name, action.dest, str(raised.value))
                checked += 1
    assert checked > 100


def _error_of(argv):
    import contextlib
    import io

    from perfmodel.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(argv[1:]) == 2
    return err.getvalue()


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["cache", "--clean"], "maybe you meant '--clear'?"),
        (["swep"], "maybe you meant 'sweep'?"),
        (["trace", "t.csv", "--contention", "fiffo", "--out", "o"], "maybe you meant 'fifo'?"),
        (["--debgu", "links"], "maybe you meant '--debug'?"),
        (["delay", "in.csv", "--out", "o.csv", "--model", "llama-3.1-8b", "--link", "ib-nrd"], "did you mean ib-ndr"),
    ],
)
def test_the_close_match_of_a_mistyped_word_is_said_in_one_line(argv, hint, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("num_input_tokens\n1000\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert hint in err and len(err.strip().splitlines()) == 1, err


def test_one_row_is_one_row(tmp_path, capsys):
    table = tmp_path / "one.csv"
    table.write_text("num_input_tokens\n1000\n")
    assert (
        main(["delay", str(table), "--out", str(tmp_path / "o.csv"), "--link", "ib-ndr", "--model", "llama-3.1-8b"])
        == 0
    )
    assert "(1 row)" in capsys.readouterr().err


def test_every_printed_count_goes_through_the_one_helper():
    """A count written straight into a message ("{n} rows", "row(s)") says "1 rows" for one: every count of
    perfmodel's messages goes through perfmodel.inputs.words.count."""
    nouns = (
        "rows|requests|lines|values|blocks|cells|points|chunks|entries|measurements|configurations|flows|ids"
        "|workers|prompts"
    )
    counted = (
        r"\{(?:len\([^{}]*\)|int\([^{}]*\)|[\w.\[\]]*(?:\.size|count|counts\[\d\]|rows|n|workers|capacity|"
        r"points|skipped|left_out|n_unique))(?::[^{}]*)?\}"
    )
    pattern = re.compile(counted + r" (?:[a-z]+ )?(?:" + nouns + r")\b|\} [a-z ]*\w\(s\)")
    found = []
    for path in sorted(Path(__file__).parent.parent.joinpath("perfmodel").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if pattern.search(line) and "(never one)" not in line:
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert len(list(Path(__file__).parent.parent.joinpath("perfmodel").rglob("*.py"))) > 20
    assert not found, "\n".join(found)


# --- a hostile user's defects ----------------------------------------------------------------------------------


def test_delay_refuses_to_overwrite_a_file_it_did_not_write(tmp_path, capsys):
    """``echo precious > mine.csv; perfmodel delay one.csv --out mine.csv`` overwrote the user's file."""
    table = tmp_path / "one.csv"
    table.write_text("num_input_tokens\n1000\n")
    mine = tmp_path / "mine.csv"
    mine.write_text("precious\n")
    argv = ["delay", str(table), "--out", str(mine), "--model", "llama-3.1-8b", "--link", "ib-ndr"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert mine.read_text() == "precious\n"
    assert len(err.strip().splitlines()) == 1 and "mine.csv" in err and "--replace" in err, err
    assert main([*argv, "--replace"]) == 0  # asked for: replaced, and perfmodel's own from then on
    assert "handoff_delay_ms" in mine.read_text()
    assert main(argv) == 0  # its own output, written again
    ours = tmp_path / "ours.csv"
    assert main([*argv[:3], str(ours), *argv[4:]]) == 0 and main([*argv[:3], str(ours), *argv[4:]]) == 0
    assert main(argv) == 0, capsys.readouterr().err  # a second output beside it leaves the first its own
    assert sorted(p.name for p in tmp_path.iterdir()) == [".perfmodel-output.json", "mine.csv", "one.csv", "ours.csv"]


ENGINES = Path(__file__).parent / "data" / "engines"


def test_measured_takes_a_link_in_gb_s(capsys):
    """Its help says "(or decimal GB/s)", but ``--link 50`` was refused as unknown link '50'."""
    bench = str(ENGINES / "vllm_bench_serve.json")
    assert main(["measured", bench, "--model", "llama-3.1-8b", "--link", "50"]) == 0, capsys.readouterr().err
    for bad in ("-5", "0", "nan"):
        assert main(["measured", bench, "--model", "llama-3.1-8b", "--link", bad]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--link" in err and "aws-p5" not in err, err
        assert "> 0" in err, err


def test_trace_link_of_a_number_says_to_use_bandwidth(capsys, tmp_path):
    argv = ["trace", "dataset:mooncake-synthetic", "--model", "llama-3.1-8b", "--link", "50", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--bandwidth 50" in err, err


def _every_subcommand():
    """Each (sub)command's words, its parser, and the arguments it requires (stand-ins, from its parser)."""
    import argparse

    from perfmodel.cli._main import build_parser

    def walk(parser, words):
        required, inner = [], None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                inner = action
            elif action.required and not action.option_strings:
                required.append(str((action.choices or ["x"])[0]))
            elif action.required:
                required += [action.option_strings[0], str((action.choices or ["x"])[0])]
        if inner is None:
            yield words, parser, required
            return
        for name, child in inner.choices.items():
            yield from walk(child, [*words, *required, name])

    for words, parser, required in walk(build_parser(), []):
        yield pytest.param(words, parser, required, id=" ".join(words))


@pytest.mark.parametrize("words, parser, required", list(_every_subcommand()))
def test_a_mistyped_flag_of_a_subcommand_is_the_subcommands_error(words, parser, required, capsys):
    """``perfmodel sweep --tokns 1k`` said 'perfmodel: error: ... (usage: perfmodel --help)', and suggested
    the top level's flags (``clusters --json``: '--version')."""
    own = sorted(f for a in parser._actions for f in a.option_strings if f.startswith("--") and f != "--help")
    own = [f for f in own if f != "--debug"]
    unambiguous = [f for f in own if not any(g.startswith(_mistyped(f)) for g in own)]
    flag = max(unambiguous, key=len) if unambiguous else None
    typo = _mistyped(flag) if flag else "--jsn"
    assert main([*words, *required, typo]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"{parser.prog}: error: unrecognized arguments: {typo}"), err
    assert parser.prog == "perfmodel " + " ".join(words) and f"(usage: {parser.prog} --help)" in err, err
    suggested = re.findall(r"'(--[\w-]+)'", err)
    assert set(suggested) <= set(own), err
    if flag:
        assert suggested == [flag], err


def test_debug_is_taken_after_the_subcommand_too(tmp_path, capsys):
    assert main(["links", "--debug"]) == 0
    main(["measured", str(tmp_path / "x.prom"), "--debug"])
    assert "Traceback" in capsys.readouterr().err


def test_clusters_says_a_bad_cluster_preset_in_one_line(tmp_path):
    """``perfmodel clusters`` printed Python's warning (``.../cli/clusters.py:55: UserWarning: ...`` and a
    source line); links and models say ``perfmodel links: warning: ...``."""
    import json

    good = {"nic": "ib-ndr", "nics_per_node": 4, "gpus_per_node": 8}
    bad = {"nic": "ib-ndr", "nics_per_node": 3, "gpus_per_node": 8}
    (tmp_path / "presets.json").write_text(json.dumps({"clusters": {"lab": good, "broken": bad}}))
    env = {**os.environ, "PERFMODEL_CONFIG_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", "clusters"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.strip()]
    assert warned and all(line.startswith("perfmodel clusters: warning: ") for line in warned), done.stderr
    assert "broken" in done.stderr and "lab" in done.stdout


def test_clusters_show_the_paths_as_found(tmp_path):
    """A saved cluster with a NIC down, GPUs pinned to others' NICs or a host bridge is listed with them (the
    listing showed it as built, its handoff slower for no reason it gave)."""
    import json

    down = {"nic": "ib-ndr", "nics_per_node": 8, "gpus_per_node": 8, "nics_down": [3]}
    pinned = {"nic": "ib-ndr", "nics_per_node": 8, "gpus_per_node": 8, "nic_map": [0, 0, 2, 3, 4, 5, 6, 7]}
    (tmp_path / "presets.json").write_text(json.dumps({"clusters": {"rail-down": down, "pinned": pinned}}))
    env = {**os.environ, "PERFMODEL_CONFIG_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", "clusters"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "NICs down 3" in rows["rail-down"], done.stdout
    assert "GPU->NIC 0,0,2,3,4,5,6,7" in rows["pinned"], done.stdout
    assert "as built" in rows["hgx-h100-8x400g"], done.stdout


def test_a_budget_no_count_meets_is_said_plainly(tmp_path, capsys):
    """'within 5 ms: none of the counts tried (links) (the fewest of links=1,2)' was the line."""
    argv = ["trace", "dataset:azure-code-2023", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--contention", "fifo"]
    assert main([*argv, "--grid", "links=1,2", "--budget-ms", "5", "--out", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert "none of the counts tried" not in out and "the fewest of" not in out, out
    assert re.search(r"no count of links=1,2 meets 5 ms \(the best p99: [\d.,]+ ms at links=[12]\)", out), out


def test_trace_without_arrival_ms_names_the_cli_flag(tmp_path, capsys):
    """'Fix: pass columns={'arrival_ms': ...}' is Python's fix, not the command line's."""
    table = tmp_path / "t.csv"
    table.write_text("t,num_input_tokens\n0,1000\n5,2000\n")
    argv = ["trace", str(table), "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--column arrival_ms=COLUMN" in err, err
    assert "columns={" not in err and "'t'" in err, err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            ["--column", "kv_bytes_per_token=model", "--model", "llama-3.1-70b"],
            "--column kv_bytes_per_token=model and --model both give kv_bytes_per_token",
        ),
        (
            ["--column", "block_size=bs", "--block-size", "16", "--model", "llama-3.1-70b"],
            "--column block_size=bs and --block-size both give block_size",
        ),
        (
            ["--column", "kv_transfer_bandwidth=bw", "--model", "llama-3.1-70b"],
            "--column kv_transfer_bandwidth=bw and --link both give kv_transfer_bandwidth",
        ),
        (
            ["--model", "llama-3.1-70b", "--connect-timeout", "5"],
            "--connect-timeout is how long to wait for --scheduler",
        ),
    ],
)
def test_delay_refuses_a_flag_it_would_ignore_or_let_win_over_a_column(tmp_path, capsys, extra, words):
    """--model replaced the model column on every row (a deepseek row priced as llama); --connect-timeout without
    --scheduler did nothing."""
    source = tmp_path / "r.csv"
    source.write_text("num_input_tokens,model,bs\n1024,llama-3.1-70b,64\n1024,deepseek-v3,64\n")
    out = tmp_path / "o.csv"
    assert main(["delay", str(source), "--out", str(out), "--link", "ib-ndr", *extra]) == 2
    assert words in capsys.readouterr().err and not out.exists()


def test_delay_says_when_a_flag_replaces_a_column_it_reads_by_default(tmp_path, capsys):
    """A file's kv_transfer_bandwidth column (read by default) was replaced by --link on every row without a word:
    500 ms became 20 ms."""
    source = tmp_path / "d.csv"
    source.write_text("id,num_input_tokens,kv_transfer_bandwidth\n1,1000,2\n2,2000,4\n")
    out = tmp_path / "o.csv"
    assert main(["delay", str(source), "--out", str(out), "--kv-bytes-per-token", "1e6"]) == 0
    assert pd.read_csv(out)["handoff_delay_ms"].tolist() == [500.0, 500.0]
    assert "replaces" not in capsys.readouterr().err
    assert main(["delay", str(source), "--out", str(out), "--kv-bytes-per-token", "1e6", "--link", "ib-ndr"]) == 0
    err = capsys.readouterr().err
    assert "warning: --link replaces the column kv_transfer_bandwidth of" in err and "drop --link" in err, err
    assert pd.read_csv(out)["handoff_delay_ms"].tolist() == [20.0, 40.0]


def test_a_sweep_whose_figure_cannot_be_drawn_still_writes_its_table(tmp_path, capsys):
    """--bandwidth inf: every delay 0 ms, which a log axis cannot show; the table is valid and is written."""
    out = tmp_path / "res"
    assert main(["sweep", "--bandwidth", "inf", "--model", "llama-3.1-8b", "--tokens", "1k,2k", "--out", str(out)]) == 0
    assert "delay_vs_tokens.png not drawn: nothing to draw" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["heatmap.png", "sweep.csv"]
    assert (pd.read_csv(out / "sweep.csv")["handoff_delay_ms"] == 0).all()
