"""The command line shows what it was asked: every option in the summary and the figures."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
import perfmodel
import perfmodel.plotting as pp


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_summary_has_a_labelled_level_for_every_option_with_several_values(tmp_path):
    done = run(
        "sweep",
        "--model",
        "llama-3.1-70b",
        "deepseek-v3",
        "--kv-cache-dtype",
        "bf16",
        "fp8",
        "--tp",
        "1",
        "8",
        "--link",
        "ib-ndr",
        "--tokens",
        "1k,32k",
        "--latency-ms",
        "0.5",
        "--out",
        str(tmp_path / "r"),
    )
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    assert "latency_ms=0.5" in header  # one value: named in the heading
    level_line = next(line for line in done.stdout.splitlines() if line.startswith("model"))
    assert level_line.split() == ["model", "kv_cache_dtype", "tp", "link"]
    assert "fp8" in done.stdout and "bf16" in done.stdout
    table = pd.read_csv(tmp_path / "r" / "sweep.csv")
    assert len(table) == 2 * 2 * 2 * 2


def test_figures_honour_every_option():
    df = perfmodel.sweep(
        model=["llama-3.1-70b", "deepseek-v3"],
        kv_cache_dtype=["bf16", "fp8"],
        tp=8,
        link=["ib-ndr", "roce-400g", "nvlink4"],
        latency_ms=0.5,
        num_input_tokens=[1024, 32768],
    )
    fig = pp.delay_vs_tokens_figure(df)
    assert [ax.get_title() for ax in fig.axes] == [
        "llama-3.1-70b, KV bf16",
        "llama-3.1-70b, KV fp8",
        "deepseek-v3, KV bf16",
        "deepseek-v3, KV fp8",
    ]
    assert "TP8" in fig.get_suptitle() and "+0.5 ms latency" in fig.get_suptitle()
    assert len(fig.legends) == 1  # one legend for all panels
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ib-ndr\n= roce-400g", "nvlink4"]
    grid = perfmodel.sweep(
        model=["llama-3.1-70b", "deepseek-v3"],
        kv_cache_dtype=["bf16", "fp8"],
        tp=8,
        kv_transfer_bandwidth=[10.0, 100.0, 1000.0],
        num_input_tokens=[1024, 8192, 32768],
    )
    heat = pp.heatmap_figure(grid)
    titles = [ax.get_title() for ax in heat.axes if ax.get_title()]
    assert titles == ["llama-3.1-70b, KV bf16", "llama-3.1-70b, KV fp8", "deepseek-v3, KV bf16", "deepseek-v3, KV fp8"]
    meshes = [ax.collections[0].get_array() for ax in heat.axes if ax.get_title()]
    assert not (meshes[0] == meshes[1]).all()  # fp8 is not the bf16 heatmap again


def test_cli_heatmap_changes_with_the_options(tmp_path):
    for name, extra in (("bf16", []), ("fp8", ["--kv-cache-dtype", "fp8", "--tp", "8"])):
        done = run(
            "sweep",
            "--model",
            "llama-3.1-70b",
            "--link",
            "ib-ndr",
            "--tokens",
            "1k,32k",
            *extra,
            "--out",
            str(tmp_path / name),
        )
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "bf16" / "heatmap.png").read_bytes() != (tmp_path / "fp8" / "heatmap.png").read_bytes()


def test_replay_output_carries_the_trace_columns_and_warns_without_hashes(tmp_path):
    (tmp_path / "t.csv").write_text("arrival_ms,num_input_tokens\n0,1000\n5,3000\n")
    done = run(
        "trace",
        str(tmp_path / "t.csv"),
        "--model",
        "llama-3.1-8b",
        "--link",
        "ib-ndr",
        "--mode",
        "destination_missing",
        "--out",
        str(tmp_path / "o"),
    )
    assert done.returncode == 0, done.stderr
    assert "warning: the trace has no hash_ids" in done.stderr and "costs slightly more" in done.stderr
    replay = pd.read_csv(tmp_path / "o" / "replay.csv")
    assert list(replay.columns[:3]) == ["request", "arrival_ms", "num_input_tokens"]
    assert replay["num_input_tokens"].tolist() == [1000, 3000]
    with pytest.warns(UserWarning, match="no hash_ids"):
        perfmodel.replay_handoffs(pd.read_csv(tmp_path / "t.csv"), "ib-ndr", "llama-3.1-8b", mode="destination_missing")


def test_output_folders_get_the_usual_permissions(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    done = run(
        "sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--tokens", "1k,2k", "--out", str(tmp_path / "new")
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((tmp_path / "new" / "sweep.csv").stat().st_mode) == 0o666 & ~umask
