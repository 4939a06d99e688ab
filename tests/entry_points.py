"""One case through every entry point a user has: the numpy API, the pandas facade and accessor, a sweep, a
trace replay, Dask and the ``perfmodel delay`` command, each called as a user calls it.

``delays(entry, tokens, bandwidth, per_token, **keywords)`` returns the handoff delays (ms, float64, NaN where
none) of the prompts ``tokens`` at every entry point alike, and ``refusal(...)`` the one line with which the
entry point refuses a case (an InputError's message; the command's standard error, exit code 2); a case an
entry point cannot express (a per-row column where a sweep takes lists of values, a replay of several kinds
of link) is skipped there, with the reason. The ``entry_point`` fixture (``tests/conftest.py``) runs a test
once per entry point (an :class:`EntryPoint`); ``@pytest.mark.parametrize("entry_point", [...],
indirect=True)`` chooses some of them.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError, Link
from perfmodel.inputs.table import INPUTS  # (the table names each input's command-line flag; test_inputs checks them)
from perfmodel.sweeps import AXES

ENTRY_POINTS = ("handoff_delay_ms", "handoff_delays", "accessor", "sweep", "replay_handoffs", "dask", "cli")


def _is_column(value: Any) -> bool:
    return isinstance(value, (pd.Series, list, np.ndarray))


def _names_a_model(value: Any) -> bool:
    return isinstance(value, (str, dict, Path)) or _is_column(value)


def _frame(tokens: Any, bandwidth: Any, per_token: Any, keywords: dict[str, Any]) -> tuple[pd.DataFrame, dict]:
    """The tokens and every per-row column as one frame, and the keywords naming those columns."""
    frame = pd.DataFrame({"num_input_tokens": np.asarray(tokens)})
    named = {"kv_transfer_bandwidth": bandwidth, "kv_bytes_per_token": per_token, **keywords}
    for name, value in named.items():
        if _is_column(value):
            frame[f"col {name}"] = list(value)
            named[name] = f"col {name}"
    return frame, named


def _sweep(tokens: Any, bandwidth: Any, per_token: Any, keywords: dict[str, Any]) -> np.ndarray:
    if any(_is_column(v) for v in (bandwidth, per_token, *keywords.values())):
        pytest.skip("a sweep's axes are lists of values, not per-row columns")
    if set(keywords) - set(AXES):
        pytest.skip(f"a sweep has no axis {sorted(set(keywords) - set(AXES))}")
    axes = {
        ("link" if isinstance(bandwidth, (str, Link)) else "kv_transfer_bandwidth"): [bandwidth],
        ("model" if _names_a_model(per_token) else "kv_bytes_per_token"): [per_token],
        **keywords,
    }
    swept = perfmodel.sweep(num_input_tokens=list(tokens), **axes)
    by_tokens = dict(zip(swept["num_input_tokens"], swept["handoff_delay_ms"]))
    return np.array([by_tokens[t] for t in tokens], dtype=float)


def _replay(tokens: Any, bandwidth: Any, per_token: Any, keywords: dict[str, Any]) -> np.ndarray:
    if _is_column(bandwidth):
        pytest.skip("a replay runs on one kind of link")
    taken = inspect.signature(perfmodel.replay_handoffs).parameters
    if set(keywords) - set(taken):
        pytest.skip(f"a replay does not take {sorted(set(keywords) - set(taken))}")
    if keywords.get("contention", "none") != "none":
        pytest.skip("with contention a replay's handoffs are not each alone")
    trace = pd.DataFrame({"arrival_ms": 0.0, "num_input_tokens": tokens})  # no contention: every request alone
    if _is_column(per_token):
        trace["model"], per_token = np.asarray(per_token, dtype=object), "model"
    replay = perfmodel.replay_handoffs(trace, bandwidth, per_token, **keywords)
    return replay["handoff_delay_ms"].to_numpy(dtype=float)


def _dask(tokens: Any, bandwidth: Any, per_token: Any, keywords: dict[str, Any]) -> np.ndarray:
    dd = pytest.importorskip("dask.dataframe")
    import perfmodel.dask

    frame, named = _frame(tokens, bandwidth, per_token, keywords)
    got = perfmodel.dask.handoff_delays(dd.from_pandas(frame, npartitions=2), **named).compute(scheduler="sync")
    return got.to_numpy(dtype=float, na_value=np.nan)


def _flag_value(value: Any) -> str:
    if isinstance(value, Link):
        pytest.skip("the command line names links by preset name")
    if isinstance(value, (dict, Path)):
        pytest.skip("the command line names models by preset name")
    return str(value)


def _cli(
    tokens: Any, bandwidth: Any, per_token: Any, keywords: dict[str, Any], tmp_path: Path, refused: bool = False
) -> Any:
    """``perfmodel delay`` on a CSV of the case's rows: one flag per value, ``--column`` per column (an input
    without a flag: a column of its one value). The delays; with ``refused``, the one line of the refusal."""
    keywords = {
        name: ([value] * len(tokens) if INPUTS[name].cli is None and not _is_column(value) else value)
        for name, value in keywords.items()
    }
    frame, named = _frame(tokens, bandwidth, per_token, keywords)
    source, target = tmp_path / "requests.csv", tmp_path / "delays.csv"
    frame.to_csv(source, index=False)
    words = ["delay", str(source), "--out", str(target)]
    for name, value in named.items():
        if isinstance(value, str) and value.startswith("col "):
            words += ["--column", f"{name}={value}"]
        elif name == "kv_transfer_bandwidth":
            words += ["--link" if isinstance(value, (str, Link)) else "--bandwidth", _flag_value(value)]
        elif name == "kv_bytes_per_token":
            words += ["--model" if _names_a_model(value) else "--kv-bytes-per-token", _flag_value(value)]
        else:
            words += [INPUTS[name].cli, _flag_value(value)]
    done = subprocess.run([sys.executable, "-m", "perfmodel", *words], capture_output=True, text=True, timeout=300)
    if refused:
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and not target.exists(), (done.returncode, done.stderr)
        return lines[0]
    assert done.returncode == 0, done.stderr
    return pd.read_csv(target)["handoff_delay_ms"].to_numpy(dtype=float)


def delays(
    entry: str, tokens: Any, bandwidth: Any, per_token: Any, *, tmp_path: Path | None = None, **keywords: Any
) -> np.ndarray:
    """The delays (ms) of the prompts ``tokens`` through ``entry`` (one of :data:`ENTRY_POINTS`)."""
    tokens = list(tokens)
    if entry == "handoff_delay_ms":
        return np.asarray(perfmodel.handoff_delay_ms(tokens, bandwidth, per_token, **keywords), dtype=float)
    if entry in ("handoff_delays", "accessor"):
        frame, named = _frame(tokens, bandwidth, per_token, keywords)
        got = (
            perfmodel.handoff_delays(frame, **named)
            if entry == "handoff_delays"
            else frame.perfmodel.handoff_delay(**named)
        )
        return got.to_numpy(dtype=float, na_value=np.nan)
    if entry == "sweep":
        return _sweep(tokens, bandwidth, per_token, keywords)
    if entry == "replay_handoffs":
        return _replay(tokens, bandwidth, per_token, keywords)
    if entry == "dask":
        return _dask(tokens, bandwidth, per_token, keywords)
    assert entry == "cli" and tmp_path is not None, entry
    return _cli(tokens, bandwidth, per_token, keywords, tmp_path)


def refusal(
    entry: str, tokens: Any, bandwidth: Any, per_token: Any, *, tmp_path: Path | None = None, **keywords: Any
) -> str:
    """The one line with which ``entry`` refuses the case: the InputError's message (the command line's
    standard error, with exit code 2 and nothing written)."""
    if entry == "cli":
        assert tmp_path is not None
        return _cli(list(tokens), bandwidth, per_token, keywords, tmp_path, refused=True)
    with pytest.raises(InputError) as raised:
        delays(entry, tokens, bandwidth, per_token, tmp_path=tmp_path, **keywords)
    return str(raised.value)


@dataclass(frozen=True)
class EntryPoint:
    """One entry point, called as :func:`delays` (``entry_point(tokens, bandwidth, per_token, **keywords)``)
    or as :func:`refusal` (``entry_point.refusal(...)``)."""

    name: str
    tmp_path: Path

    def __call__(self, tokens: Any, bandwidth: Any, per_token: Any, **keywords: Any) -> np.ndarray:
        return delays(self.name, tokens, bandwidth, per_token, tmp_path=self.tmp_path, **keywords)

    def refusal(self, tokens: Any, bandwidth: Any, per_token: Any, **keywords: Any) -> str:
        return refusal(self.name, tokens, bandwidth, per_token, tmp_path=self.tmp_path, **keywords)
