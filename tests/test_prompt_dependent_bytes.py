"""Models whose bytes are not proportional to the prompt: sliding-window, chunked-attention and hybrid layers.

A plain-Python, layer-by-layer reference (tests/reference.py: layer_bytes) against kv_terms/kv_bytes,
the kernel, and every entry point a model goes through.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import kv_bytes, kv_bytes_per_token, kv_terms

from .reference import handoff_delay_row, layer_bytes

# One attention layer's bytes per token, by hand: 2 (K and V) * kv_heads * head_dim * 2 bytes (bf16).
GPT_OSS = 2 * 8 * 64 * 2  # 2048: gpt-oss-20b and -120b
GEMMA3_27B = 2 * 16 * 128 * 2  # 8192
MISTRAL_7B = 2 * 8 * 128 * 2  # 4096
LLAMA4_SCOUT = 2 * 8 * 128 * 2  # 4096
QWEN3_NEXT = 2 * 2 * 256 * 2  # 2048
# Qwen3-Next's Gated DeltaNet state per layer: conv (2 * 16 * 128 + 32 * 128) * (4 - 1) values,
# recurrent 32 * 128 * 128 values, bf16
QWEN3_NEXT_STATE = ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * 2  # 1,097,728

# (layers of each kind, as (kind, bytes per token, window or chunk, state)) worked out from the published configs
HAND_LAYERS = {
    "gpt-oss-20b": [("window", GPT_OSS, 128, 0), ("full", GPT_OSS, 0, 0)] * 12,
    "gpt-oss-120b": [("window", GPT_OSS, 128, 0), ("full", GPT_OSS, 0, 0)] * 18,
    "gemma-3-27b": ([("window", GEMMA3_27B, 1024, 0)] * 5 + [("full", GEMMA3_27B, 0, 0)]) * 10
    + [("window", GEMMA3_27B, 1024, 0)] * 2,
    "mistral-7b-v0.1": [("window", MISTRAL_7B, 4096, 0)] * 32,
    "llama-4-scout": ([("chunk", LLAMA4_SCOUT, 8192, 0)] * 3 + [("full", LLAMA4_SCOUT, 0, 0)]) * 12,
    "qwen3-next-80b-a3b": ([("state", 0, 0, QWEN3_NEXT_STATE)] * 3 + [("full", QWEN3_NEXT, 0, 0)]) * 12,
}


@pytest.mark.parametrize("name", sorted(HAND_LAYERS))
@pytest.mark.parametrize("tokens", [0, 1, 127, 128, 129, 1024, 4097, 8192, 8193, 32_768, 131_072])
def test_presets_against_layer_by_layer_bytes(name, tokens):
    assert kv_bytes(name, tokens) == layer_bytes(HAND_LAYERS[name], tokens, tokens)


def test_the_issue_s_examples():
    # a 32k-token gpt-oss prompt: counting every layer as full attention overstates the bytes ~2x; Gemma 3 ~5x
    full_gpt_oss = 24 * GPT_OSS * 32_768
    assert full_gpt_oss / kv_bytes("gpt-oss-20b", 32_768) == pytest.approx(2.0, rel=0.01)
    full_gemma = 62 * GEMMA3_27B * 32_768
    assert full_gemma / kv_bytes("gemma-3-27b", 32_768) == pytest.approx(5.3, rel=0.02)
    terms = kv_terms("qwen3-next-80b-a3b")
    assert (terms.full_layers, terms.state_layers, terms.state_bytes) == (12, 36, 36 * QWEN3_NEXT_STATE)
    assert kv_terms("llama-4-scout").describe() == "keeps only the current 8192-token chunk in 36 of its 48 layers"


def test_proportional_bytes_per_token_is_refused_for_these_models():
    for name in HAND_LAYERS:
        with pytest.raises(ValueError, match=r"not proportional.*perfmodel\.kv_bytes\(model, num_input_tokens\)"):
            kv_bytes_per_token(name)
    assert kv_bytes_per_token("llama-3.1-8b") == 131_072  # full attention: unchanged


@pytest.mark.parametrize(
    "config, kinds",
    [
        # Qwen2.5 configs carry a sliding window but switch it off
        ({"sliding_window": 131072, "use_sliding_window": False}, ["full"] * 4),
        # Qwen2 style: layers from max_window_layers on use the window
        ({"sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 3}, ["full"] * 3 + ["window"]),
        ({"sliding_window": 4096, "model_type": "gemma2", "head_dim": 64}, ["window", "full", "window", "full"]),
        ({"sliding_window": 512, "sliding_window_pattern": 4}, ["window"] * 3 + ["full"]),
        ({"sliding_window": 512}, ["window"] * 4),
        ({"attention_chunk_size": 64}, ["chunk"] * 3 + ["full"]),  # Llama 4's default: every 4th layer global
        ({"attention_chunk_size": 64, "no_rope_layer_interval": 2}, ["chunk", "full"] * 2),
        ({"attention_chunk_size": 64, "no_rope_layers": [0, 1, 1, 0]}, ["full", "chunk", "chunk", "full"]),
        (
            {
                "layer_types": ["full_attention", "sliding_attention", "chunked_attention", "full_attention"],
                "sliding_window": 16,
                "attention_chunk_size": 64,
            },
            ["full", "window", "chunk", "full"],
        ),
    ],
)
def test_layer_patterns_of_older_and_newer_configs(config, kinds):
    base = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2}
    terms = kv_terms({**base, **config})
    per_layer = 2 * 2 * 64 * 2
    assert terms.full_bytes_per_token == kinds.count("full") * per_layer
    assert terms.window_bytes_per_token == kinds.count("window") * per_layer
    assert terms.chunk_bytes_per_token == kinds.count("chunk") * per_layer


def test_mamba2_hybrid_state_from_the_override_pattern():
    config = {
        "num_hidden_layers": 4,
        "hybrid_override_pattern": "M*M-",
        "hidden_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "mamba_num_heads": 8,
        "mamba_head_dim": 16,
        "n_groups": 2,
        "ssm_state_size": 32,
        "conv_kernel": 4,
    }
    per_layer_state = ((8 * 16 + 2 * 2 * 32) * 3 + 8 * 16 * 32) * 2  # conv + SSM, bf16: 9,728
    terms = kv_terms(config)
    assert (terms.full_bytes_per_token, terms.state_bytes, terms.state_layers) == (
        2 * 2 * 32 * 2,
        2 * per_layer_state,
        2,
    )
    ranks = kv_terms(config, tp=2)  # heads and groups split across ranks
    assert ranks.state_bytes == 2 * ((4 * 16 + 2 * 1 * 32) * 3 + 4 * 16 * 32) * 2


def test_state_uses_the_ssm_dtype_and_not_the_kv_cache_dtype():
    config = dict(perfmodel.MODELS["qwen3-next-80b-a3b"])
    assert kv_terms(config, kv_cache_dtype="fp8").state_bytes == kv_terms(config).state_bytes
    config["mamba_ssm_dtype"] = "float32"  # Qwen3.5 configs keep the recurrent state in fp32
    per_layer = (2 * 16 * 128 + 32 * 128) * 3 * 2 + 32 * 128 * 128 * 4
    assert kv_terms(config).state_bytes == 36 * per_layer


@pytest.mark.parametrize(
    "config, fragment",
    [
        ({"layer_types": ["full_attention", "cross_attention"]}, r"layer types \['cross_attention'\]"),
        ({"layer_types": ["full_attention"]}, "1 layer_types for 2 layers"),
        ({"layer_types": ["linear_attention", "full_attention"]}, "no linear_num_key_heads"),
        ({"hybrid_override_pattern": "M?"}, "unknown symbols"),
    ],
)
def test_configs_perfmodel_cannot_read_are_refused(config, fragment):
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2}
    with pytest.raises(ValueError, match=fragment):
        kv_terms({**base, **config})


# --- hypothesis: random layer mixes against the layer-by-layer reference -------------------------------

KINDS = {
    "full": "full_attention",
    "window": "sliding_attention",
    "chunk": "chunked_attention",
    "state": "linear_attention",
}


@st.composite
def configs(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=8))
    config = {
        "num_hidden_layers": len(kinds),
        "layer_types": [KINDS[k] for k in kinds],
        "hidden_size": 64,
        "num_attention_heads": 8,
        "num_key_value_heads": draw(st.integers(1, 8)),
        "head_dim": draw(st.sampled_from([16, 64, 128])),
        "sliding_window": draw(st.integers(1, 300)),
        "attention_chunk_size": draw(st.integers(1, 300)),
        "linear_num_key_heads": draw(st.integers(1, 8)),
        "linear_num_value_heads": draw(st.integers(1, 8)),
        "linear_key_head_dim": draw(st.sampled_from([16, 32])),
        "linear_value_head_dim": draw(st.sampled_from([16, 64])),
        "linear_conv_kernel_dim": draw(st.integers(1, 4)),
    }
    return kinds, config


def reference_layers(kinds, config, tp, dtype_bytes, ranks):
    """Each layer as (kind, bytes per token, window/chunk, state bytes), per the documented formulas."""
    attention = 2 * math.ceil(config["num_key_value_heads"] / tp) * config["head_dim"] * dtype_bytes
    k_heads = math.ceil(config["linear_num_key_heads"] / tp)
    v_heads = math.ceil(config["linear_num_value_heads"] / tp)
    k_dim, v_dim = config["linear_key_head_dim"], config["linear_value_head_dim"]
    state = (
        (2 * k_heads * k_dim + v_heads * v_dim) * (config["linear_conv_kernel_dim"] - 1) + v_heads * k_dim * v_dim
    ) * 2  # the state keeps the model's dtype (bf16)
    length = {"window": config["sliding_window"], "chunk": config["attention_chunk_size"]}
    return [
        (k, ranks * attention if k != "state" else 0, length.get(k, 0), ranks * state if k == "state" else 0)
        for k in kinds
    ]


@given(
    configs(),
    st.integers(0, 2000),
    st.integers(0, 2000),
    st.sampled_from([1, 2, 8]),
    st.sampled_from([None, "fp8"]),
    st.sampled_from(["rank", "group"]),
)
def test_any_layer_mix_matches_the_reference(drawn, tokens, charged, tp, dtype, scope):
    kinds, config = drawn
    layers = reference_layers(kinds, config, tp, 1 if dtype else 2, tp if scope == "group" else 1)
    expected = layer_bytes(layers, tokens, charged)
    assert kv_bytes(config, tokens, charged_tokens=charged, kv_cache_dtype=dtype, tp=tp, scope=scope) == expected
    # the kernel, through the numpy API: the same bytes, over line rate (destination_missing charges the tail)
    delay = perfmodel.handoff_delay_ms(
        tokens,
        1.0,
        config,
        mode="destination_missing",
        destination_missing_tokens=charged,
        kv_cache_dtype=dtype,
        tp=tp,
        scope=scope,
    )
    assert delay == pytest.approx(expected / 1e9 * 1000, rel=1e-12, abs=0)
    terms = kv_terms(config, kv_cache_dtype=dtype, tp=tp, scope=scope)
    reference = handoff_delay_row(
        tokens,
        1.0,
        terms.full_bytes_per_token,
        mode=1,
        missing_tokens=charged,
        state_bytes=terms.state_bytes,
        window_bytes_per_token=terms.window_bytes_per_token,
        window_tokens=terms.window_tokens,
        chunk_bytes_per_token=terms.chunk_bytes_per_token,
        chunk_tokens=terms.chunk_tokens,
    )
    assert delay == pytest.approx(reference, rel=1e-12, abs=0)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.sampled_from(["gpt-oss-20b", "llama-3.1-8b", "llama-4-scout", "qwen3-next-80b-a3b", "gemma-3-27b"]),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 40_000),
    st.booleans(),
)
def test_columns_of_models_equal_one_model_at_a_time(models, tokens, parallel):
    lengths = (np.arange(len(models)) * 997 + tokens) % 40_000
    together = perfmodel.handoff_delay_ms(lengths, 50.0, models, parallel=parallel)
    one_by_one = [perfmodel.handoff_delay_ms(n, 50.0, m) for n, m in zip(lengths, models)]
    np.testing.assert_array_equal(together, one_by_one)
    np.testing.assert_array_equal(together, [kv_bytes(m, n) / 50e9 * 1000 for n, m in zip(lengths, models)])


# --- everywhere a model goes ----------------------------------------------------------------------------


def test_explicit_state_bytes_replace_the_model_s():
    tokens = 1000
    own = perfmodel.handoff_delay_ms(tokens, 1.0, "qwen3-next-80b-a3b")
    assert own == pytest.approx(kv_bytes("qwen3-next-80b-a3b", tokens) / 1e6)
    assert perfmodel.handoff_delay_ms(tokens, 1.0, "qwen3-next-80b-a3b", state_bytes=0) == pytest.approx(
        tokens * 12 * QWEN3_NEXT / 1e6
    )
    assert perfmodel.handoff_delay_ms(tokens, 1.0, "qwen3-next-80b-a3b", state_bytes=1e6) == pytest.approx(
        (tokens * 12 * QWEN3_NEXT + 1e6) / 1e6
    )
    # a fully cached prompt moves its state alone (the newest upstream's rule: SEMANTICS, state_bytes)
    assert perfmodel.handoff_delay_ms(
        tokens, 1.0, "qwen3-next-80b-a3b", mode="destination_missing", destination_missing_tokens=0
    ) == pytest.approx(perfmodel.kv_terms("qwen3-next-80b-a3b").state_bytes / 1e6)


def test_facade_and_accessor_with_a_column_of_models():
    df = pd.DataFrame(
        {
            "num_input_tokens": [32_768, 32_768, 100, 9000, 500],
            "model": ["gpt-oss-120b", "llama-3.1-8b", "gpt-9", "llama-4-scout", "qwen3-next-80b-a3b"],
        }
    )
    delays = df.perfmodel.handoff_delay(kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", errors="coerce")
    assert delays.equals(
        perfmodel.handoff_delays(df, kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", errors="coerce")
    )
    expected = [
        kv_bytes("gpt-oss-120b", 32_768) / 50e6,
        kv_bytes("llama-3.1-8b", 32_768) / 50e6,
        np.nan,
        kv_bytes("llama-4-scout", 9000) / 50e6,
        kv_bytes("qwen3-next-80b-a3b", 500) / 50e6,
    ]
    np.testing.assert_allclose(delays.to_numpy(dtype=float, na_value=np.nan), expected, rtol=1e-15)


def test_sweep_reports_the_bytes_moved():
    df = perfmodel.sweep(
        model=["gpt-oss-20b", "gemma-3-27b", "llama-4-scout", "qwen3-next-80b-a3b"],
        kv_cache_dtype=["bf16", "fp8"],
        link="ib-ndr",
        num_input_tokens=[0, 1000, 9000, 40_000],
    )
    for row in df.itertuples():
        nbytes = kv_bytes(row.model, row.num_input_tokens, kv_cache_dtype=row.kv_cache_dtype)
        assert row.transfer_bytes == nbytes
        assert row.handoff_delay_ms == perfmodel.handoff_delay_ms(
            row.num_input_tokens, "ib-ndr", row.model, kv_cache_dtype=row.kv_cache_dtype
        )
    cached = perfmodel.sweep(
        model="gemma-3-27b", link="ib-ndr", num_input_tokens=32_768, cache_hit_ratio=[0.0, 0.5, 1.0], block_size=64
    )
    missing = perfmodel.destination_missing_tokens(32_768, [0, 16_384, 32_768], 64)
    assert cached["transfer_bytes"].tolist() == kv_bytes("gemma-3-27b", 32_768, charged_tokens=missing).tolist()


@pytest.mark.parametrize(
    "model", ["gpt-oss-120b", "gemma-3-27b", "mistral-7b-v0.1", "llama-4-scout", "qwen3-next-80b-a3b"]
)
def test_inverse_questions_stay_exact(model):
    tokens = np.array([1, 500, 4096, 8192, 8193, 32_768])
    needed = perfmodel.required_bandwidth(tokens, model, budget_ms=50.0, latency_ms=0.5)
    np.testing.assert_allclose(perfmodel.handoff_delay_ms(tokens, needed, model, latency_ms=0.5), 50.0, rtol=1e-12)
    budgets = np.array([0.2, 1.0, 5.0, 20.0, 60.0])
    longest = perfmodel.max_tokens_within("ib-ndr", model, budget_ms=budgets)
    for budget, n in zip(budgets, longest, strict=True):
        if np.isinf(n):  # a window model: its bytes stop growing
            assert perfmodel.handoff_delay_ms(10**9, "ib-ndr", model) <= budget
            continue
        prompts = np.arange(0, int(n) + 2)
        delays = perfmodel.handoff_delay_ms(prompts, "ib-ndr", model)
        assert (delays[:-1] <= budget).all()  # every prompt up to n fits
        assert delays[: int(n) + 2].max() > budget  # and n + 1 does not, or a shorter one just before it


def test_a_chunked_model_never_counts_on_the_drop_at_a_chunk_boundary():
    # Llama 4 Scout: bytes fall from 8192 to 8193 tokens (the chunked layers restart), but a budget that
    # 8192 tokens miss is missed by every prompt that reaches 8192 first
    budget = float(perfmodel.handoff_delay_ms(8192, "ib-ndr", "llama-4-scout")) - 1e-9
    assert perfmodel.handoff_delay_ms(8193, "ib-ndr", "llama-4-scout") <= budget
    assert perfmodel.max_tokens_within("ib-ndr", "llama-4-scout", budget_ms=budget) == 8191


def test_replay_moves_the_models_bytes():
    trace = perfmodel.synthetic_trace(600, rate_per_s=20, seed=4)
    trace["model"] = np.array(["gpt-oss-20b", "qwen3-next-80b-a3b", "llama-3.1-8b"])[np.arange(600) % 3]
    full = perfmodel.replay_handoffs(trace, "ib-ndr", "model")
    for model, part in full.groupby(trace["model"]):
        np.testing.assert_array_equal(part["transfer_bytes"], kv_bytes(model, part["num_input_tokens"].to_numpy()))
    tail = perfmodel.replay_handoffs(
        trace, "ib-ndr", "model", mode="destination_missing", decode_workers=2, block_size=64
    )
    for model, part in tail.groupby(trace["model"]):
        n, m = part["num_input_tokens"].to_numpy(), part["charged_tokens"].to_numpy()
        np.testing.assert_array_equal(part["transfer_bytes"], kv_bytes(model, n, charged_tokens=m))
        cold = kv_bytes(model, n, charged_tokens=-(-n // 64) * 64)
        np.testing.assert_array_equal(part["saved_bytes"], cold - kv_bytes(model, n, charged_tokens=m))
    assert (tail["cached_tokens"] > 0).any()
    stateless = perfmodel.replay_handoffs(trace, "ib-ndr", "model", state_bytes=0)
    assert (stateless["transfer_bytes"] <= full["transfer_bytes"]).all()
    grid = perfmodel.replay_grid(trace, model=["gpt-oss-20b", "llama-3.1-8b"], link="ib-ndr")
    assert grid["bytes_moved"].iloc[0] == kv_bytes("gpt-oss-20b", trace["num_input_tokens"].to_numpy()).sum()


def run(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, **kwargs)


def test_cli_models_shows_the_layer_mix_and_bytes_at_1k_and_32k(tmp_path):
    listing = run("models")
    assert listing.returncode == 0, listing.stderr
    line = next(row for row in listing.stdout.splitlines() if row.split()[:1] == ["gpt-oss-20b"])
    assert "12 full + 12 window 128" in line and "MB @1k" in listing.stdout and "MB @32k" in listing.stdout
    assert (
        f"{kv_bytes('gpt-oss-20b', 1024) / 1e6:,.1f}" in line
        and f"{kv_bytes('gpt-oss-20b', 32_768) / 1e6:,.1f}" in line
    )
    assert "12 full + 36 state" in listing.stdout and "36 chunk 8192" in listing.stdout
    config = {
        "num_hidden_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "sliding_window": 64,
        "sliding_window_pattern": 2,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    added = run("models", "--add", "tiny-swa", str(tmp_path / "config.json"))
    assert added.returncode == 0 and "a 64-token window in 2 of its 4 layers" in added.stdout
    done = run(
        "sweep", "--model", "gpt-oss-20b", "--link", "ib-ndr", "--tokens", "1k,32k", "--out", str(tmp_path / "s")
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(tmp_path / "s" / "sweep.csv")
    assert table["transfer_bytes"].tolist() == kv_bytes("gpt-oss-20b", [1024, 32_768]).tolist()  # k = 1024


def test_cli_state_bytes_replaces_the_model_s_everywhere(tmp_path):
    done = run(
        "sweep",
        "--model",
        "qwen3-next-80b-a3b",
        "--link",
        "ib-ndr",
        "--tokens",
        "1k",
        "--state-bytes",
        "0",
        "1e6",
        "--out",
        str(tmp_path / "s"),
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(tmp_path / "s" / "sweep.csv")
    assert table["transfer_bytes"].tolist() == [1024 * 12 * QWEN3_NEXT, 1024 * 12 * QWEN3_NEXT + 10**6]
    (tmp_path / "r.csv").write_text("num_input_tokens,model\n1000,qwen3-next-80b-a3b\n1000,gpt-oss-20b\n")
    for extra, expected in (
        ([], [kv_bytes("qwen3-next-80b-a3b", 1000), kv_bytes("gpt-oss-20b", 1000)]),
        (["--state-bytes", "0"], [1000 * 12 * QWEN3_NEXT, kv_bytes("gpt-oss-20b", 1000)]),
    ):
        out = tmp_path / f"d{len(extra)}.csv"
        done = run(
            "delay",
            str(tmp_path / "r.csv"),
            "--out",
            str(out),
            "--column",
            "kv_bytes_per_token=model",
            "--bandwidth",
            "1",
            *extra,
        )
        assert done.returncode == 0, done.stderr
        np.testing.assert_allclose(pd.read_csv(out)["handoff_delay_ms"], np.array(expected) / 1e6, rtol=1e-12)
    trace = perfmodel.synthetic_trace(200, rate_per_s=20, seed=2)
    trace.to_parquet(tmp_path / "t.parquet")
    done = run(
        "trace",
        str(tmp_path / "t.parquet"),
        "--model",
        "qwen3-next-80b-a3b",
        "--link",
        "ib-ndr",
        "--grid",
        "state_bytes=0,4e7",
        "--out",
        str(tmp_path / "g"),
    )
    assert done.returncode == 0, done.stderr
    grid = pd.read_csv(tmp_path / "g" / "grid.csv")
    assert grid["state_bytes"].tolist() == [0, 4e7] and grid["bytes_moved"].iloc[1] > grid["bytes_moved"].iloc[0]


@pytest.mark.parametrize(
    "call, fragment",
    [
        (
            lambda: kv_bytes("gpt-oss-20b", -5),
            (
                r"num_input_tokens: 1 invalid row; first at row 0: -5 \(negative\)\. Fix: "
                r"num_input_tokens must be whole numbers >= 0 \(fill or drop missing counts "
                r"first\)\.$"
            ),
        ),
        (lambda: kv_bytes("gpt-oss-20b", [10, 20], charged_tokens=[1, 2, 3]), "charged_tokens: 3 values for 2 prompts"),
        (lambda: kv_terms("gpt-oss-20b", tp=0), "tp: 0 is not a whole number >= 1"),
        (
            lambda: perfmodel.replay_handoffs(
                perfmodel.synthetic_trace(5, rate_per_s=1), "ib-ndr", "qwen3-next-80b-a3b", state_bytes=-1
            ),
            (
                r"state_bytes: 5 invalid rows; first at row 0: -1.0 \(negative\)\. Fix: state bytes "
                r"are finite numbers >= 0 \(NaN marks unknown\)\.$"
            ),
        ),
    ],
)
def test_bad_inputs_name_the_fix_that_applies(call, fragment):
    # kv_bytes has no errors="coerce": its messages must not offer one
    with pytest.raises(ValueError, match=fragment):
        call()
