"""Fidelity: per-block costs, TP group bytes, layer-wise streaming, calibration and user presets,
at every entry point (numpy, pandas, sweeps, replay, command line), and fits of published data."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError, Link

PAGED = Link("paged-nvlink", 450.0, per_block_ms=0.0025)


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ},
    )


# --- the same extension at every entry point -------------------------------------------


def test_every_entry_point_computes_the_same_per_block_and_layerwise_delay(entry_point):
    tokens = [512, 7500, 32768]
    keywords = dict(block_size=16, overlap="layerwise", prefill_tokens_per_s=12_000, layer_group=2)
    expected = perfmodel.handoff_delay_ms(tokens, PAGED, "llama-3.1-70b", **keywords)
    np.testing.assert_allclose(
        entry_point(tokens, PAGED, "llama-3.1-70b", **keywords), expected, rtol=1e-9
    )  # (a replay computes (ready + x) - ready)
    per_block = dict(
        block_size=16, per_block_ms=0.0025, overlap="layerwise", prefill_tokens_per_s=12_000, layer_group=2
    )  # the same link's terms as numbers and a name (the command line's forms)
    np.testing.assert_allclose(entry_point(tokens, 450.0, "llama-3.1-70b", **per_block), expected, rtol=1e-9)


def test_tp_group_bytes_everywhere():
    # SGLang + Mooncake publish Qwen3-235B at TP8 (4 KV heads) moving exactly twice the model's KV per token
    model_bytes = perfmodel.kv_bytes_per_token("qwen3-235b-a22b")
    group = perfmodel.kv_bytes_per_token("qwen3-235b-a22b", tp=8, scope="group")
    assert group == 2 * model_bytes
    assert perfmodel.kv_bytes_per_token("deepseek-v3", tp=8, scope="group") == 8 * perfmodel.kv_bytes_per_token(
        "deepseek-v3"
    )  # the MLA latent sits on every rank
    assert perfmodel.kv_bytes_per_token("llama-3.1-70b", tp=8, scope="group") == perfmodel.kv_bytes_per_token(
        "llama-3.1-70b"
    )  # 8 KV heads over 8 ranks: nothing replicated
    delay = perfmodel.handoff_delay_ms(1000, 1.0, "qwen3-235b-a22b", tp=8, scope="group")
    assert delay == 1000 * group / 1e9 * 1000
    grid = perfmodel.sweep(
        model="qwen3-235b-a22b", tp=8, scope=["rank", "group"], kv_transfer_bandwidth=1.0, num_input_tokens=1000
    )
    assert grid["transfer_bytes"].tolist() == [1000 * group // 8, 1000 * group]
    with pytest.raises(InputError, match="scope"):
        perfmodel.handoff_delay_ms(1000, 1.0, 327_680, scope="group")  # bytes given as a number: no model to scale
    with pytest.raises(InputError, match="scope: 'world'"):
        perfmodel.kv_bytes_per_token("llama-3.1-70b", scope="world")


def test_layerwise_replay_starts_before_the_prefill_ends():
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [32768]})
    plain = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-70b")
    streamed = perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-70b", overlap="layerwise", prefill_ms=5000.0)
    transfer = plain["transfer_ms"].iloc[0]
    assert streamed["start_ms"].iloc[0] == pytest.approx(-5000.0 * 79 / 80)  # with the first layer computed
    assert streamed["handoff_delay_ms"].iloc[0] == pytest.approx(transfer / 80)  # only the last layer is exposed


# --- calibration on published measurements ---------------------------------------------

MEASUREMENTS = {  # file: (messages per measurement, the link's nominal GB/s, or None: not published)
    "fastdeploy_kvtransfer_vs_mooncake_blocksize.csv": (1538, 50.0),
    "mooncake_te_efa_aws.csv": (128, 400.0),
    "lmcache_pr4161_nixl_ucx_uccl_iov.csv": (256, None),
}


def _tables(shared_data: Path):
    """(file, engine, bytes, measured ms, messages, nominal GB/s) per engine of each published sweep."""
    for name, (messages, nominal) in MEASUREMENTS.items():
        table = pd.read_csv(shared_data / "measurements" / name)
        table["engine"] = table["notes"].str.split(";").str[0]
        if name.startswith("mooncake"):
            table = table[table["citation"].str.contains("block_size sweep")]
        for engine, part in table.groupby("engine"):
            per_message = part["nbytes"].to_numpy(float)
            nbytes = per_message * messages if name.startswith("fastdeploy") else per_message
            measured = nbytes / (part["measured_gb_s"].to_numpy(float) * 1e9) * 1000
            yield name, engine, nbytes, measured, messages, nominal or float(part["measured_gb_s"].max())


@pytest.mark.filterwarnings("ignore:the fit is far:UserWarning", "ignore:the best measured throughput:UserWarning")
def test_fitted_links_describe_published_transfers_where_line_rate_does_not(shared_data):
    fits = 0
    for _name, engine, nbytes, measured, messages, nominal in _tables(shared_data):
        line_rate = nbytes / (nominal * 1e9) * 1000
        line_error = np.max(np.abs(line_rate - measured) / measured)
        fitted = perfmodel.fit_link(nbytes, measured, n_blocks=messages, name=engine)
        alpha_beta = perfmodel.fit_link(nbytes, measured, name=engine)
        assert (
            fitted.fit.points == len(nbytes)
            and fitted.per_block_ms > 0
            and "latency cannot be told apart" in fitted.fit.note
        )
        # one message count per table: a per-message cost and a latency are the same parameter here
        assert fitted.fit.max_relative_error == pytest.approx(alpha_beta.fit.max_relative_error, rel=1e-6)
        assert fitted.fit.max_relative_error < 0.5 and line_error > 0.65  # line rate: off by 3x and more
        assert fitted.fit.max_relative_error < line_error / 2
        fits += 1
    assert fits == 10  # FastDeploy 2 engines, Mooncake EFA read and write, LMCache 6 transports


def test_calibrate_command_on_a_published_table(shared_data, tmp_path):
    table = pd.read_csv(shared_data / "measurements" / "fastdeploy_kvtransfer_vs_mooncake_blocksize.csv")
    table = table[table["notes"].str.startswith("KVTransferManager")]
    table.assign(nbytes=table["nbytes"] * 1538, n_blocks=1538).to_csv(tmp_path / "rdma.csv", index=False)
    done = run(
        "calibrate",
        str(tmp_path / "rdma.csv"),
        "--name",
        "our-fastdeploy",
        "--save",
        "--compare",
        "ib-ndr",
        "--out",
        str(tmp_path / "cal"),
    )
    assert done.returncode == 0, done.stderr
    assert "our-fastdeploy" in done.stdout and "ib-ndr" in done.stdout and "us per block" in done.stdout
    assert (tmp_path / "cal" / "calibration.png").stat().st_size > 10_000
    assert "our-fastdeploy" in run("links").stdout  # saved, and listed with its source
    done = run(
        "sweep",
        "--model",
        "llama-3.1-8b",
        "--link",
        "our-fastdeploy",
        "--tokens",
        "1k,8k",
        "--block-size",
        "16",
        "128",
        "--out",
        str(tmp_path / "sweep"),
    )
    assert done.returncode == 0, done.stderr
    sweep = pd.read_csv(tmp_path / "sweep" / "sweep.csv")
    small, large = (sweep[sweep["block_size"] == b]["handoff_delay_ms"].to_numpy() for b in (16, 128))
    assert np.all(small > large)  # smaller pages cost more


# --- user presets ----------------------------------------------------------------------


def test_saved_links_and_models_work_everywhere(tmp_path):
    perfmodel.network.links.save_link(Link("lab-rdma", 40.0, latency_ms=0.2, per_block_ms=0.001), source="lab")
    config = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2}
    (tmp_path / "config.json").write_text(json.dumps(config))
    done = run("models", "--add", "tiny-gqa", str(tmp_path / "config.json"))
    assert done.returncode == 0, done.stderr
    assert perfmodel.kv_bytes_per_token("tiny-gqa") == 2 * 4 * 2 * 32 * 2
    delay = perfmodel.handoff_delay_ms(1000, "lab-rdma", "tiny-gqa", block_size=100)
    assert delay == pytest.approx(0.2 + 10 * 0.001 + 1000 * 1024 / 40e9 * 1000)
    assert perfmodel.get_link("2x lab-rdma").bandwidth_gb_s == 80.0
    listing = run("links").stdout
    assert "lab-rdma" in listing and "lab-rdma: lab" in listing  # listed with its source
    assert "tiny-gqa" in run("models").stdout
    with pytest.raises(InputError, match="a built-in preset"):
        perfmodel.network.links.save_link(Link("ib-ndr", 1.0))


def test_a_damaged_presets_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    (tmp_path / "presets.json").write_text("{not json")
    with pytest.raises(InputError, match="presets.json: the user presets file cannot be read"):
        perfmodel.get_link("lab-rdma")
    assert perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0  # built-ins never read the file


def test_cli_fidelity_flags(tmp_path):
    (tmp_path / "r.csv").write_text("num_input_tokens\n7500\n32768\n")
    done = run(
        "delay",
        str(tmp_path / "r.csv"),
        "--out",
        str(tmp_path / "o.csv"),
        "--model",
        "llama-3.1-8b",
        "--bandwidth",
        "450",
        "--per-block-ms",
        "0.0025",
        "--block-size",
        "16",
        "--overlap",
        "layerwise",
        "--prefill-tokens-per-s",
        "20000",
    )
    assert done.returncode == 0, done.stderr
    expected = perfmodel.handoff_delay_ms(
        [7500, 32768],
        450.0,
        "llama-3.1-8b",
        per_block_ms=0.0025,
        block_size=16,
        overlap="layerwise",
        prefill_tokens_per_s=20000,
    )
    np.testing.assert_allclose(pd.read_csv(tmp_path / "o.csv")["handoff_delay_ms"], expected, rtol=5e-13)  # 13 digits
    done = run(
        "delay",
        str(tmp_path / "r.csv"),
        "--out",
        str(tmp_path / "o2.csv"),
        "--model",
        "llama-3.1-8b",
        "--bandwidth",
        "450",
        "--per-block-ms",
        "0.0025",
    )
    assert done.returncode == 2 and "--per-block-ms (per_block_ms)" in done.stderr and "--block-size" in done.stderr
    done = run(
        "sweep",
        "--model",
        "qwen3-235b-a22b",
        "--tp",
        "8",
        "--scope",
        "rank",
        "group",
        "--link",
        "ib-ndr",
        "--tokens",
        "1k,2k",
        "--out",
        str(tmp_path / "s"),
    )
    assert done.returncode == 0, done.stderr and "scope" in done.stdout
    assert math.isclose(
        *pd.read_csv(tmp_path / "s" / "sweep.csv")
        .groupby("scope")["handoff_delay_ms"]
        .max()
        .loc[["group", "rank"]]
        .to_numpy()
        / [8, 1]
    )


def test_mixed_fleet_replays_at_once():
    trace = perfmodel.synthetic_trace(400, rate_per_s=5, seed=2)
    trace["model"] = np.where(np.arange(400) % 3 == 0, "deepseek-v3", "llama-3.1-70b")
    mixed = perfmodel.replay_handoffs(trace, "ib-ndr", "model", mode="destination_missing")
    per_token = trace["model"].map(perfmodel.kv_bytes_per_token).to_numpy()
    np.testing.assert_array_equal(mixed["transfer_bytes"], mixed["charged_tokens"] * per_token)
    np.testing.assert_array_equal(mixed["saved_bytes"], mixed["cached_tokens"] * per_token)
    alone = perfmodel.replay_handoffs(
        trace[trace["model"] == "deepseek-v3"], "ib-ndr", "deepseek-v3", mode="destination_missing"
    )
    assert alone["transfer_bytes"].sum() > 0 and perfmodel.summarize(mixed)["bytes_moved"] > 0
    with pytest.raises(InputError, match="trace column 'model'"):
        perfmodel.replay_handoffs(
            trace.assign(model=trace["model"].where(np.arange(400) != 7, "gpt-9")), "ib-ndr", "model"
        )
