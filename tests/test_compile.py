"""The first run: what the kernels compile with an empty cache, what is said about it, and the cache's upkeep.

Each check runs a fresh interpreter with a cache folder of its own (``PERFMODEL_CACHE_DIR``), so that
numba really compiles; numba's own compile events list what it compiled."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: Records numba's compile events while running ``sys.argv[1]`` (Python source); prints them as JSON.
RECORDER = r"""
import json, sys
from numba.core import event
with event.install_recorder("numba:compile") as recorder:
    exec(sys.argv[1])
names = [(ev.data["dispatcher"].py_func.__qualname__, str(ev.data["args"])) for _, ev in recorder.buffer
         if ev.is_start and "dispatcher" in ev.data]
print(json.dumps(names))
"""

REPLAY = """
import perfmodel
trace = perfmodel.synthetic_trace(300, rate_per_s=200, seed=1)
for contention in ("none", "fifo", "fair"):
    perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", mode="destination_missing", decode_workers=3,
                              contention=contention, links=2)
"""


def _compiled(code: str, cache: Path) -> list[tuple[str, str]]:
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(cache)}
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", RECORDER, code], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [tuple(pair) for pair in json.loads(done.stdout.splitlines()[-1])]


@pytest.fixture(scope="module")
def replay_compiles(tmp_path_factory) -> tuple[list, list]:
    """What a cold and then a warm run of three replays compile."""
    cache = tmp_path_factory.mktemp("cache")
    return _compiled(REPLAY, cache), _compiled(REPLAY, cache)


def test_the_replay_compiles_no_string_formatting(replay_compiles):
    """A slice assignment in the event loop compiled numba's shape-mismatch message (str, repr and join of
    tuples: more than half of the replay's first compile)."""
    cold, _ = replay_compiles
    text = [name for name, _ in cold if "raise_with_shape_context" in name or "unicode" in name or "str" in name]
    assert not text, text


def test_the_replay_compiles_each_helper_once(replay_compiles):
    """A counter that starts as the literal 0 compiled the heap and routing helpers a second time."""
    cold, _ = replay_compiles
    helpers = [name for name, signature in cold if name in ("heap_push", "heap_pop", "route", "insert_blocks")]
    assert sorted(helpers) == ["heap_pop", "heap_push", "insert_blocks", "route"], helpers
    assert not [s for _, s in cold if "Literal[int]" in s]


def test_a_warm_cache_compiles_nothing(replay_compiles):
    _, warm = replay_compiles
    assert warm == []


def test_every_replay_compiles_one_event_loop_per_network(tmp_path):
    """The replay of handoffs alone and the TTFT replay are one loop (``serve_pass``): on links and on a cluster,
    with every contention and layer-wise streaming, each network's loop compiles once (a record's array read-only
    in one replay and writeable in the other compiled a second loop: seconds on a cold cache)."""
    code = """
import perfmodel
trace = perfmodel.synthetic_trace(200, rate_per_s=200, seed=1)
serving = dict(prefill_workers=2, prefill_tokens_per_s=50_000, decode_step_ms=5.0, decode_workers=2)
for link, keywords in (("ib-ndr", {}), ("hgx-h100-8x400g", dict(tp=8))):
    for contention in ("none", "fifo", "fair") if link == "ib-ndr" else ("none", "fair"):
        perfmodel.replay_handoffs(trace, link, "llama-3.1-8b", decode_workers=2, contention=contention, **keywords)
        perfmodel.replay_ttft(trace, link, "llama-3.1-8b", contention=contention, **serving, **keywords)
    perfmodel.replay_handoffs(trace, link, "llama-3.1-8b", decode_workers=2, contention="fair", overlap="layerwise",
                              prefill_ms=20.0, **keywords)
"""
    loops = [signature for name, signature in _compiled(code, tmp_path) if name == "serve_pass"]
    assert len(loops) == 2, loops  # (one on links, one on a cluster)
    assert {"OnLinks" in s for s in loops} == {True, False}, loops
    assert not [name for name, _ in _compiled(code, tmp_path) if name in ("replay_pass", "serve_pass")]  # warm


def test_worker_type_labels_of_every_form_compile_one_kernel(tmp_path):
    """Label columns of every form are one compiled form: their codes as int8 (a list gave int64 codes and
    pandas' text columns int32, each a specialization of its own: seconds on a cold cache)."""
    code = """
import numpy as np, pandas as pd, perfmodel
labels = ["prefill", "decode", "prefill"]
forms = [labels, pd.Series(labels, dtype=object), pd.Series(labels, dtype="category"), pd.Series(labels, dtype="str"),
         pd.Series(labels, dtype="string[pyarrow]")]
delays = [perfmodel.handoff_delay_ms([1000, 2000, 3000], 1.0, 1000, worker_type=form) for form in forms]
assert all(np.array_equal(d, delays[0], equal_nan=True) for d in delays), delays
assert delays[0][0] == 1.0 and delays[0][2] == 3.0, delays  # (the prefill rows: 1000 and 3000 kB at 1 GB/s)
"""
    kernels = [signature for name, signature in _compiled(code, tmp_path) if name == "handoff_serial"]
    assert len(kernels) == 1, kernels
    assert "Array(int8, 1" in kernels[0], kernels  # the worker types' codes (numba's name of an int8 array)


def test_small_calls_mixing_scalars_and_arrays_compile_one_form(tmp_path):
    """The README's small calls (an array of prompt lengths with one bandwidth, two arrays with one model...)
    compiled a specialization each; spread to arrays they share one, with the same numbers."""
    code = """
import numpy as np, perfmodel
tokens = np.array([1024, 32768, 7])
a = perfmodel.handoff_delay_ms(tokens, 50.0, 327_680)
b = perfmodel.handoff_delay_ms(tokens, np.array([50.0, 25.0, 1.0]), 327_680)
c = perfmodel.handoff_delay_ms(tokens, np.array([50.0, 25.0, 1.0]), np.array([327_680.0, 1e6, 3.0]))
d = perfmodel.handoff_delay_ms(4096, np.array([50.0, 25.0, 1.0]), 1e6)
perfmodel.required_bandwidth([1024, 4096], "llama-3.1-70b", budget_ms=50)   # (one row's arrays, bytes written)
perfmodel.max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=50)
assert a.tolist() == [1024 * 327_680 / (50.0 * 1e9) * 1000.0, 32768 * 327_680 / (50.0 * 1e9) * 1000.0,
                      7 * 327_680 / (50.0 * 1e9) * 1000.0], a
assert d.tolist() == [4096 * 1e6 / (bw * 1e9) * 1000.0 for bw in (50.0, 25.0, 1.0)], d
"""
    kernels = [s for name, s in _compiled(code, tmp_path) if name == "handoff_serial"]
    assert len(kernels) == 1, kernels


def _stderr_on_a_terminal(code: str, cache: Path) -> str:
    """What a fresh interpreter running ``code`` writes to standard error when that is a terminal."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(cache)}
    env.pop("NUMBA_CACHE_DIR", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], stderr=follower, stdout=subprocess.PIPE, env=env, timeout=900
        )
        os.close(follower)
        assert done.returncode == 0
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # (the terminal's other end is closed: all read)
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(leader)


TWO_CALLS = "import perfmodel; perfmodel.handoff_delay_ms(1, 1.0, 1); perfmodel.handoff_delay_ms([1, 2], 1.0, 1)"


def test_the_first_run_says_once_that_it_compiles_on_a_terminal_only(tmp_path):
    cold = _stderr_on_a_terminal(TWO_CALLS, tmp_path / "cache")
    assert cold.count("compiling kernels, once: about") == 1 and "s for the handoff (cached in" in cold, cold
    warm = _stderr_on_a_terminal(TWO_CALLS, tmp_path / "cache")
    assert "compiling" not in warm, warm
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path / "other")}
    piped = subprocess.run([sys.executable, "-c", TWO_CALLS], capture_output=True, text=True, env=env, timeout=900)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr


def _entry(root: Path, version: str, install: str, source: str | None = None, days: float = 0.0) -> Path:
    import time

    folder = root / "numba" / version / install
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handoff.handoff_serial-10.py311.nbi").write_bytes(b"x" * 100)
    if source is not None:
        (folder / "perfmodel-source.txt").write_text(source + "\n")
    for file in folder.iterdir():
        os.utime(file, (time.time() - days * 86400,) * 2)
    return folder


def _cache(*flags: str, capsys) -> str:
    """What ``perfmodel cache FLAGS`` prints (the cache: ``$PERFMODEL_CACHE_DIR``)."""
    from perfmodel.cli import main

    assert main(["cache", *flags]) == 0
    return capsys.readouterr().out


def _states(listing: str) -> dict[str, str]:
    """``perfmodel cache``'s listing: each entry ("version/install") and its state."""
    return dict(re.findall(r"^ +[\d,.]+ MB  (\S+/\S+)  (.+)$", listing, flags=re.MULTILINE))


def _name(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}"


def _install(tag: str) -> str:
    """The folder of another install location, named as perfmodel names them (a hash of its path)."""
    import hashlib

    return "perfmodel_" + hashlib.sha1(tag.encode()).hexdigest()


def test_stale_cache_entries_are_pruned_and_live_ones_kept(tmp_path, monkeypatch, capsys):
    """Entries of another version at this install location (unused for a week), of an install location
    that is gone, and unmarked ones unused for 90 days go; another live install, a recently used other
    version and anything that is not perfmodel's (folders not named as perfmodel names its own) stay."""
    import perfmodel
    from perfmodel import _compat

    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert "removed 0 stale entries" in _cache("--prune", capsys=capsys)  # an empty cache: stays empty
    assert not (tmp_path / "numba").exists()
    version, here = _compat._version_folder(), _compat._install_folder()
    live = tmp_path / "live-install" / "perfmodel"
    live.mkdir(parents=True)
    (live / "__init__.py").write_text("")
    current = _entry(tmp_path, version, here)
    upgraded = _entry(tmp_path, "0.0.1+0123456789ab-numba0.60.0", here, days=8)
    second_venv = _entry(tmp_path, "0.1.0+0123456789ab-numba0.61.2", here, days=1)
    gone = _entry(tmp_path, version, _install("gone"), str(tmp_path / "deleted" / "perfmodel"))
    other = _entry(tmp_path, version, _install("live"), str(live))
    old_unmarked = _entry(tmp_path, "0.0.9+0123456789ab-numba0.59.0", _install("old"), days=100)
    new_unmarked = _entry(tmp_path, "0.0.9+0123456789ab-numba0.59.0", _install("new"), days=3)
    foreign = tmp_path / "numba" / "not-ours"
    foreign.mkdir()
    unstamped = _entry(tmp_path, "0.0.1-numba0.60.0", here, days=100)  # (perfmodel 0.1.0's shape: no source stamp)
    states = _states(_cache(capsys=capsys))
    assert set(states) == {
        _name(f) for f in (current, upgraded, second_venv, gone, other, old_unmarked, new_unmarked, unstamped)
    }, states
    assert states[_name(current)] == "current" and states[_name(other)] == "kept", states
    assert states[_name(second_venv)] == "kept" and states[_name(new_unmarked)] == "kept", states
    assert all(states[_name(f)].startswith("stale") for f in (upgraded, gone, old_unmarked, unstamped)), states
    assert "removed 4 stale entries" in _cache("--prune", capsys=capsys)
    assert not upgraded.exists() and not gone.exists() and not old_unmarked.exists() and not unstamped.exists()
    assert not upgraded.parent.exists()  # an emptied version folder goes too
    for kept in (current, second_venv, other, new_unmarked, foreign):
        assert kept.exists(), kept
    assert (current / "perfmodel-source.txt").read_text().strip() == str(Path(perfmodel.__file__).resolve().parent)
    cleared = _cache("--clear", capsys=capsys)  # (the entries' few hundred bytes: 0.0 MB)
    assert cleared.startswith(f"removed 0.0 MB of compiled kernels from {tmp_path / 'numba'}"), cleared
    assert foreign.exists() and not current.exists() and not other.exists() and not new_unmarked.exists()
    assert _states(_cache(capsys=capsys)) == {}


def test_the_cache_command_lists_and_clears(tmp_path):
    import perfmodel

    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)

    def cache(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "perfmodel", "cache", *flags], capture_output=True, text=True, env=env
        )

    first = subprocess.run([sys.executable, "-c", TWO_CALLS], capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stderr  # (numba's first compile: this install's folder, with its note)
    (entry,) = [note.parent for note in tmp_path.glob("numba/*/*/perfmodel-source.txt")]
    assert (entry / "perfmodel-source.txt").read_text() == f"{Path(perfmodel.__file__).resolve().parent}\n"
    _entry(tmp_path, entry.parent.name, entry.name)
    listing = cache()
    assert listing.returncode == 0 and f"{entry.parent.name}/{entry.name}  current" in listing.stdout, listing
    cleared = cache("--clear")
    assert cleared.returncode == 0 and "removed" in cleared.stdout and not entry.exists(), cleared


def test_an_edit_of_a_helpers_module_alone_compiles_its_callers_afresh(tmp_path):
    """numba checks a cached kernel against its own file only: a kernel whose jitted helper lives in another module
    of the package must not load its old machine code once only the helper's module changed."""
    import shutil

    import perfmodel

    source = tmp_path / "src"
    shutil.copytree(Path(perfmodel.__file__).parent, source / "perfmodel", ignore=shutil.ignore_patterns("__pycache__"))
    helper = source / "perfmodel" / "_probe_helper.py"
    helper.write_text("from .kernels.handoff import jit\n\n\n@jit\ndef helper():\n    return 1.0\n")
    (source / "perfmodel" / "_probe_kernel.py").write_text(
        "from .kernels.handoff import jit\nfrom ._probe_helper import helper\n\n\n@jit\ndef kernel():\n    return helper()\n"
    )
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(source)}
    env.pop("NUMBA_CACHE_DIR", None)
    code = (  # (this copy of the package, not an editable install's: its finder goes first)
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if not "
        "getattr(f, '__module__', '').startswith('__editable__')]; "
        "from perfmodel._probe_kernel import kernel; import perfmodel; "
        f"assert perfmodel.__file__.startswith({str(source)!r}), perfmodel.__file__; print(kernel())"
    )

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run() == "1.0"
    assert list((tmp_path / "cache").rglob("*probe_kernel*.nbi"))  # (cached: the next run would load it)
    before = helper.stat().st_mtime_ns
    helper.write_text(helper.read_text().replace("1.0", "2.0"))
    os.utime(helper, ns=(before + 10**9, before + 10**9))  # (a later time even on a coarse clock)
    assert run() == "2.0"


@pytest.mark.parametrize(
    "unusable", ["a file", "a dangling symlink", "read-only", "NUMBA_CACHE_DIR a file", "a name too long"]
)
def test_an_unusable_cache_folder_never_puts_kernels_in_the_package(tmp_path, unusable):
    """``PERFMODEL_CACHE_DIR`` (or ``NUMBA_CACHE_DIR``) naming a file, a dangling symlink or a folder one cannot
    write: numba's fallback would cache inside the package's ``__pycache__`` (files pip did not install). The
    kernels compile without a cache, one warning says why and how to fix it, the package holds no cache file, and
    ``perfmodel cache`` says the folder is not usable."""
    import shutil

    import perfmodel

    if unusable == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    source = tmp_path / "src"
    shutil.copytree(Path(perfmodel.__file__).parent, source / "perfmodel", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    if unusable == "a dangling symlink":
        cache.symlink_to(tmp_path / "nowhere")
    elif unusable == "read-only":
        cache.mkdir(mode=0o555)
    elif unusable == "a name too long":  # (its parent may be written: only making it tells)
        cache = tmp_path / ("x" * 300)
    else:
        cache.write_text("not a folder")
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(cache), "PYTHONPATH": str(source)}
    env.pop("NUMBA_CACHE_DIR", None)
    if unusable == "NUMBA_CACHE_DIR a file":
        env.update(PERFMODEL_CACHE_DIR=str(tmp_path / "usable"), NUMBA_CACHE_DIR=str(cache))
    code = (  # (this copy of the package, not an editable install's: its finder goes first)
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if not "
        "getattr(f, '__module__', '').startswith('__editable__')]; import perfmodel; "
        f"assert perfmodel.__file__.startswith({str(source)!r}), perfmodel.__file__; "
        "print(perfmodel.handoff_delay_ms(1024, 100.0, 'llama-3.1-8b'))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
        )
        listing = subprocess.run(
            [sys.executable, "-m", "perfmodel", "cache"], capture_output=True, text=True, env=env, timeout=300
        )
    finally:
        if unusable == "read-only":
            cache.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == 1024 * 131072 / 100e9 * 1000
    cached = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert not cached, cached
    assert done.stderr.count("perfmodel cannot cache its compiled kernels") == 1, done.stderr
    assert (
        f"{cache} is not a folder" in done.stderr
        or "may not write" in done.stderr
        or "File name too long" in (done.stderr)
    ), done.stderr
    variable = "NUMBA_CACHE_DIR" if "NUMBA" in unusable else "PERFMODEL_CACHE_DIR"
    assert f"Fix: set {variable} to a folder you may write" in done.stderr, done.stderr
    assert "<string>:1: UserWarning" in done.stderr, done.stderr  # (at the user's line: here, python -c's)
    if unusable == "a name too long":  # (the listing reads the folder: one line says why it cannot)
        assert listing.returncode == 2 and listing.stderr.count("\n") == 1, listing
        assert "File name too long" in listing.stderr, listing
    else:
        assert listing.returncode == 0 and "not usable: " in listing.stdout and "empty" not in listing.stdout, listing


#: The README's Python snippets in order (from ``README``), then the main job into ``OUT`` (both set before it).
TOUR_AND_MAIN_JOB = """
import re, warnings
warnings.simplefilter("ignore")
from pathlib import Path
from perfmodel.cli._main import main
readme = Path(README)
namespace = {"__name__": "readme"}
for block in re.findall(r"```python\\n(.*?)```", readme.read_text(), flags=re.S):
    exec(compile(block, "README.md", "exec"), namespace)
assert main(["sweep", "--out", OUT]) == 0
"""


def test_after_cache_fill_the_readme_tour_and_the_main_job_compile_nothing(tmp_path):
    """``perfmodel cache --fill`` compiles what a first run compiles: on the cache it filled, the README's tour and
    the main job (``perfmodel sweep``) compile nothing; filled again, it compiles nothing either."""
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)
    fill = [sys.executable, "-m", "perfmodel", "cache", "--fill"]
    done = subprocess.run(fill, capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"compiled kernels cached in {tmp_path / 'cache' / 'numba'}" in done.stdout, done.stdout
    assert re.search(r"^  replays and TTFT on a cluster: [\d.,]+ s$", done.stdout, re.M), done.stdout  # (a line a step)
    assert not done.stderr, done.stderr  # (the samples' warnings and the first-compile notice: not shown)
    readme = Path(__file__).resolve().parents[1] / "README.md"
    code = f"OUT = {str(tmp_path / 'out')!r}\nREADME = {str(readme)!r}\n{TOUR_AND_MAIN_JOB}"
    assert _compiled(code, tmp_path / "cache") == []
    assert (tmp_path / "out" / "sweep.csv").is_file()
    again = RECORDER.replace("exec(sys.argv[1])", "from perfmodel.cli._main import main; main(['cache', '--fill'])")
    env_again = {**env, "PYTHONWARNINGS": "ignore"}
    twice = subprocess.run([sys.executable, "-c", again], capture_output=True, text=True, env=env_again, timeout=900)
    assert twice.returncode == 0 and json.loads(twice.stdout.splitlines()[-1]) == [], twice.stderr[-3000:]


def test_cache_fill_refuses_a_folder_it_cannot_write_before_compiling(tmp_path):
    """An unusable cache folder: one line that says which and how to fix it, exit 2, nothing compiled or made."""
    target = tmp_path / "a file"
    target.write_text("not a folder")
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(target)}
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", "cache", "--fill"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2, done
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("perfmodel cache: error: cache: ") and "is not a folder" in line, line
    assert "Fix: set PERFMODEL_CACHE_DIR to a folder you may write" in line and "compiling" not in done.stdout, done
    assert target.read_text() == "not a folder"


def test_cache_fill_takes_no_other_action_and_compiles_nothing_without_jit(tmp_path):
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)

    def cache(*flags: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "perfmodel", "cache", *flags],
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=300,
        )

    both = cache("--fill", "--clear")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr, both
    plain = cache("--fill", NUMBA_DISABLE_JIT="1")
    assert plain.returncode == 0 and plain.stdout.startswith("nothing to compile: NUMBA_DISABLE_JIT"), plain
    assert not (tmp_path / "cache").exists()
