"""The README is tested: every Python snippet runs, in order, in one session, and every
``# -> value`` it shows is checked; every shell command runs (on small stand-in files).

The snippets run in a folder holding ``requests.csv`` and the two sample traces: the real
ones from ``../shared/data`` when present (then the numbers quoted for them are checked
too), otherwise small synthetic stand-ins of the same format.
"""

from __future__ import annotations

import ast
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from tests.conftest import SHARED_DATA

README = Path(__file__).resolve().parents[1] / "README.md"
REAL_DATA = SHARED_DATA.is_dir()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """requests.csv, mooncake_trace.jsonl and azure_llm_2023_code.csv, as the README assumes."""
    folder = tmp_path_factory.mktemp("readme")
    rng = np.random.default_rng(7)
    n = 300
    pd.DataFrame({
        "prompt_tokens": rng.integers(16, 65_536, n),
        "model": rng.choice(["llama-3.1-70b", "qwen3-32b", "deepseek-v3"], n),
        "link": rng.choice(["nvlink4", "ib-ndr", "8x ib-ndr"], n),
        "worker_type": rng.choice(["prefill", "decode"], n, p=[0.8, 0.2]),
    }).to_csv(folder / "requests.csv", index=False)
    sweep = pd.DataFrame({"nbytes": np.geomspace(1024, 262144, 9) * 1538, "n_blocks": 1538})
    sweep["measured_gb_s"] = sweep["nbytes"] / (0.07e-3 * 1538 + sweep["nbytes"] / 48e9 * 1e3) / 1e6
    if REAL_DATA:  # the published RDMA block-size sweep the README calibrates on
        table = pd.read_csv(SHARED_DATA / "measurements" / "fastdeploy_kvtransfer_vs_mooncake_blocksize.csv")
        table = table[table["notes"].str.startswith("KVTransferManager")]
        sweep = pd.DataFrame({"nbytes": table["nbytes"] * 1538, "n_blocks": 1538,
                              "measured_gb_s": table["measured_gb_s"]})
    sweep.to_csv(folder / "rdma_blocksize.csv", index=False)
    if REAL_DATA:
        shutil.copy(SHARED_DATA / "mooncake_synthetic_trace.jsonl", folder / "mooncake_trace.jsonl")
        shutil.copy(SHARED_DATA / "azure_llm_2023_code.csv", folder / "azure_llm_2023_code.csv")
    else:
        trace = perfmodel.synthetic_trace(400, rate_per_s=20, seed=3)
        with open(folder / "mooncake_trace.jsonl", "w") as handle:
            for row in trace.itertuples():
                handle.write(json.dumps({"timestamp": row.arrival_ms, "input_length": row.num_input_tokens,
                                         "output_length": row.num_output_tokens,
                                         "hash_ids": [int(h) for h in row.hash_ids]}) + "\n")
        start = pd.Timestamp("2023-11-16 18:17:03")
        pd.DataFrame({"TIMESTAMP": start + pd.to_timedelta(np.sort(rng.uniform(0, 600, n)), unit="s"),
                      "ContextTokens": rng.integers(16, 8000, n), "GeneratedTokens": rng.integers(1, 50, n),
                      }).to_csv(folder / "azure_llm_2023_code.csv", index=False)
    return folder


def _expected(text: str) -> tuple[object, int | None] | None:
    """The value a ``# -> ...`` comment shows, and its decimals when it is a rounded number; None: not
    checkable here (a number quoted for data this run does not have)."""
    text = text.strip()
    if " on the " in text and not REAL_DATA:
        return None
    text = text.split("  ")[0].split(" on the ")[0].strip()
    number = re.fullmatch(r"(-?\d+(?:\.(\d+))?)(?:\s+[A-Za-z/]+)?", text)
    if number:
        return float(number.group(1)), len(number.group(2) or "")
    return ast.literal_eval(text.replace("nan", "None")), None


def _check(actual: object, expected: object, decimals: int | None, source: str) -> None:
    if decimals is not None:
        assert abs(float(actual) - expected) <= 0.5 * 10.0**-decimals + 1e-12 * abs(expected), (source, actual)
    elif isinstance(expected, (list, tuple)):
        values = list(np.asarray(actual, dtype=object).tolist()) if not isinstance(actual, tuple) else list(actual)
        assert len(values) == len(expected), (source, actual)
        for got, want in zip(values, expected):
            if want is None:
                assert got is None or (isinstance(got, float) and math.isnan(got)), (source, actual)
            else:  # as many digits as the README shows
                assert math.isclose(float(got), float(want), rel_tol=1e-6), (source, actual)
    else:
        assert actual == expected, (source, actual)


def test_every_python_snippet_runs_and_its_numbers_hold(folder, monkeypatch):
    monkeypatch.chdir(folder)
    blocks = _blocks("python")
    assert len(blocks) >= 6
    namespace: dict = {"__name__": "readme"}
    checked = 0
    for block in blocks:
        lines = block.splitlines()
        for statement in ast.parse(block).body:
            source = "\n".join(lines[statement.lineno - 1:statement.end_lineno])
            comment = re.search(r"#\s*->\s*(.*)$", lines[statement.end_lineno - 1])
            if comment and isinstance(statement, ast.Expr):
                value = eval(compile(ast.Expression(statement.value), "README.md", "eval"), namespace)
                expected = _expected(comment.group(1))
                if expected is not None:
                    _check(value, *expected, source)
                    checked += 1
            else:
                exec(compile(ast.Module([statement], type_ignores=[]), "README.md", "exec"), namespace)
    assert checked >= 12


def _commands() -> list[str]:
    commands = []
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line:
                commands.append(line)
    return commands


def _needs_what_tests_do_not_have(command: str) -> bool:
    """Setup (CI runs it verbatim), and a multi-node cluster's commands."""
    return command.startswith(("pip ", "dask ")) or "HEAD:" in command


@pytest.mark.parametrize("command", [c for c in _commands() if not _needs_what_tests_do_not_have(c)])
def test_every_shell_command_runs(folder, command):
    words = shlex.split(command)
    assert words[0] == "perfmodel"
    done = subprocess.run([sys.executable, "-m", "perfmodel", *words[1:]], capture_output=True, text=True,
                          cwd=folder, timeout=600)
    assert done.returncode == 0, done.stderr


def test_only_setup_and_cluster_commands_are_left_out():
    left_out = [c for c in _commands() if _needs_what_tests_do_not_have(c)]
    assert all(c.startswith(("pip install", "dask scheduler", "dask worker")) or "--scheduler tcp://HEAD" in c
               for c in left_out), left_out
    assert len(left_out) == 5
