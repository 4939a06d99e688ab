"""The first run: what the kernels compile with an empty cache, what is said about it, and the cache's upkeep.

Each check runs a fresh interpreter with a cache folder of its own (``PERFMODEL_CACHE_DIR``), so that
numba really compiles; numba's own compile events list what it compiled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Records numba's compile events while running ``sys.argv[1]`` (Python source); prints them as JSON.
RECORDER = r'''
import json, sys
from numba.core import event
with event.install_recorder("numba:compile") as recorder:
    exec(sys.argv[1])
names = [(ev.data["dispatcher"].py_func.__qualname__, str(ev.data["args"])) for _, ev in recorder.buffer
         if ev.is_start and "dispatcher" in ev.data]
print(json.dumps(names))
'''

REPLAY = '''
import perfmodel
trace = perfmodel.synthetic_trace(300, rate_per_s=200, seed=1)
for contention in ("none", "fifo", "fair"):
    perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", mode="destination_missing", decode_workers=3,
                              contention=contention, links=2)
'''


def _compiled(code: str, cache: Path) -> list[tuple[str, str]]:
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(cache)}
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", RECORDER, code], capture_output=True, text=True, env=env,
                          timeout=900)
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
    helpers = [name for name, signature in cold if name in ("heap_push", "heap_pop", "_route", "_insert_blocks")]
    assert sorted(helpers) == ["_insert_blocks", "_route", "heap_pop", "heap_push"], helpers
    assert not [s for _, s in cold if "Literal[int]" in s]


def test_a_warm_cache_compiles_nothing(replay_compiles):
    _, warm = replay_compiles
    assert warm == []


@pytest.mark.parametrize("labels", [
    ["prefill", "decode", "prefill"],
    "object", "category", "str", "string[pyarrow]",
])
def test_worker_type_labels_reach_the_kernel_as_one_code_dtype(labels):
    """Label columns of every form are one compiled form: their codes as int8 (a list gave int64 codes and
    pandas' text columns int32, each a specialization of its own: seconds on a cold cache)."""
    import pandas as pd

    from perfmodel.handoff import _coerce

    column = ["prefill", "decode", "prefill"]
    value = column if isinstance(labels, list) else pd.Series(column, dtype=labels)
    arg = _coerce("worker_type", value)
    assert arg.value.dtype == "int8" and arg.masks is not None


def test_small_calls_mixing_scalars_and_arrays_compile_one_form(tmp_path):
    """The README's small calls (an array of prompt lengths with one bandwidth, two arrays with one model...)
    compiled a specialization each; spread to arrays they share one, with the same numbers."""
    code = '''
import numpy as np, perfmodel
tokens = np.array([1024, 32768, 7])
a = perfmodel.handoff_delay_ms(tokens, 50.0, 327_680)
b = perfmodel.handoff_delay_ms(tokens, np.array([50.0, 25.0, 1.0]), 327_680)
c = perfmodel.handoff_delay_ms(tokens, np.array([50.0, 25.0, 1.0]), np.array([327_680.0, 1e6, 3.0]))
d = perfmodel.handoff_delay_ms(4096, np.array([50.0, 25.0, 1.0]), 1e6)
assert a.tolist() == [1024 * 327_680 / (50.0 * 1e9) * 1000.0, 32768 * 327_680 / (50.0 * 1e9) * 1000.0,
                      7 * 327_680 / (50.0 * 1e9) * 1000.0], a
assert d.tolist() == [4096 * 1e6 / (bw * 1e9) * 1000.0 for bw in (50.0, 25.0, 1.0)], d
'''
    kernels = [s for name, s in _compiled(code, tmp_path) if name == "handoff_serial"]
    assert len(kernels) == 1, kernels
