"""Every warning perfmodel gives points at the line that called it (the user's), not at a line inside the
package, however deep the call that warns (as ``warnings.warn``'s ``stacklevel`` is meant to)."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

import perfmodel

TRACE = pd.DataFrame({"arrival_ms": [0.0, 5.0], "num_input_tokens": [1000, 3000]})


def _bad_preset(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    entries = {"good": {"bandwidth_gb_s": 20.0}, "ours": {"bandwidth_gb_s": "fast"}}
    (tmp_path / "presets.json").write_text(json.dumps({"links": entries}))


def _malformed_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    good = json.dumps({"timestamp": 1, "input_length": 10, "output_length": 2, "hash_ids": [1]})
    path.write_text("\n".join([good, "{not json", good]) + "\n")
    return path


def _left_out_row(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("nbytes,measured_ms\n1e6,0.1\n1e7,\n1e8,2.3\n1e9,21\n")
    return path


CALLS = {
    "a replay charging missing blocks of a trace without hashes": lambda tmp_path, monkeypatch: (
        perfmodel.replay_handoffs(TRACE, "ib-ndr", "llama-3.1-8b", mode="destination_missing")
    ),
    "a TTFT replay charging missing blocks of a trace without hashes": lambda tmp_path, monkeypatch: (
        perfmodel.replay_ttft(TRACE, "ib-ndr", "llama-3.1-8b", mode="destination_missing", prefill_ms=1.0)
    ),
    "a cluster replay charging missing blocks of a trace without hashes": lambda tmp_path, monkeypatch: (
        perfmodel.replay_handoffs(TRACE, "hgx-h100-8x400g", "llama-3.1-8b", mode="destination_missing")
    ),
    "a replay grid on threads": lambda tmp_path, monkeypatch: perfmodel.replay_grid(
        TRACE,
        link="ib-ndr",
        model="llama-3.1-8b",
        mode="destination_missing",
        block_size=[16, 32],
        num_threads=2,
        progress=False,
    ),
    "a TTFT grid on threads": lambda tmp_path, monkeypatch: perfmodel.ttft_grid(
        TRACE,
        link="ib-ndr",
        model="llama-3.1-8b",
        mode="destination_missing",
        prefill_ms=[1.0, 2.0],
        num_threads=2,
        progress=False,
    ),
    "a closed loop ignoring arrival times": lambda tmp_path, monkeypatch: perfmodel.replay_ttft(
        TRACE.assign(num_output_tokens=[1, 1]), "ib-ndr", "llama-3.1-8b", prefill_ms=1.0, concurrency=1
    ),
    "a trace read skipping a malformed line": lambda tmp_path, monkeypatch: perfmodel.read_trace(
        _malformed_trace(tmp_path), errors="skip"
    ),
    "an old constant read": lambda tmp_path, monkeypatch: perfmodel.replay.MAX_CONFIGS,
    "a calibration leaving a row out": lambda tmp_path, monkeypatch: perfmodel.calibrate(_left_out_row(tmp_path)),
    "a user link that cannot be used, listed": lambda tmp_path, monkeypatch: (
        _bad_preset(tmp_path, monkeypatch),
        perfmodel.network.links.user_links(),
    ),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_a_warning_points_at_the_line_that_called(case, tmp_path, monkeypatch):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CALLS[case](tmp_path, monkeypatch)
    ours = [w for w in caught if issubclass(w.category, (UserWarning, DeprecationWarning, FutureWarning))]
    assert ours, f"{case}: no warning"
    assert all(w.filename == __file__ for w in ours), [(w.filename, w.lineno, str(w.message)[:60]) for w in ours]


def test_the_package_warns_through_the_one_helper():
    """Every warning goes through :func:`perfmodel.errors.warn` (which finds the caller's line), but the old
    module paths' (raised by the import system, whose own frames Python skips)."""
    from pathlib import Path

    package = Path(perfmodel.__file__).parent
    direct = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if path.name not in ("errors.py", "_moved.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "warnings.warn(" in line
    ]
    assert not direct, f"warn through perfmodel.errors.warn: {direct}"
