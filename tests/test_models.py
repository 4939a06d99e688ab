"""kv_bytes_per_token and the model presets, against hand-computed bytes."""

from __future__ import annotations

import json

import pytest

import perfmodel
from perfmodel import MODELS, kv_bytes_per_token

# 2 (K and V) * layers * kv_heads * head_dim * 2 bytes (bf16), worked out by hand
HAND_COMPUTED = {
    "llama-3.1-8b": 2 * 32 * 8 * 128 * 2,  # 131072
    "llama-3.1-70b": 2 * 80 * 8 * 128 * 2,  # 327680
    "llama-3.1-405b": 2 * 126 * 8 * 128 * 2,  # 516096
    "qwen2.5-7b": 2 * 28 * 4 * 128 * 2,  # 57344 (3584 / 28 = 128)
    "qwen2.5-72b": 2 * 80 * 8 * 128 * 2,
    "qwen3-8b": 2 * 36 * 8 * 128 * 2,
    "qwen3-32b": 2 * 64 * 8 * 128 * 2,  # 262144; hidden/heads would give 80, not 128
    "qwen3-30b-a3b": 2 * 48 * 4 * 128 * 2,
    "qwen3-235b-a22b": 2 * 94 * 4 * 128 * 2,
    "mixtral-8x7b": 2 * 32 * 8 * 128 * 2,
    "mixtral-8x22b": 2 * 56 * 8 * 128 * 2,
    "deepseek-v3": 61 * (512 + 64) * 2,  # MLA latent, no factor 2: 70272
    "deepseek-r1": 61 * (512 + 64) * 2,
}


def test_every_preset_is_checked():
    from .test_prompt_dependent_bytes import HAND_LAYERS  # sliding-window, chunked and hybrid models

    assert set(HAND_COMPUTED) | set(HAND_LAYERS) == set(MODELS) and not set(HAND_COMPUTED) & set(HAND_LAYERS)


@pytest.mark.parametrize("name", sorted(HAND_COMPUTED))
def test_presets(name):
    assert kv_bytes_per_token(name) == HAND_COMPUTED[name]
    assert kv_bytes_per_token(name.upper()) == HAND_COMPUTED[name]


def test_upstream_head_dim_bug_is_not_reproduced():
    config = dict(MODELS["qwen3-32b"])
    assert kv_bytes_per_token(config) == 262_144
    del config["head_dim"]  # Qwen3Config's own default is 128: transformers reads the same model
    assert kv_bytes_per_token(config) == 262_144
    config["model_type"] = "qwen2"  # a class with no head_dim: hidden_size // heads = 80, as upstream derives it
    assert kv_bytes_per_token(config) == 2 * 64 * 8 * 80 * 2


@pytest.mark.parametrize("tp, expected_heads", [(1, 8), (2, 4), (8, 1), (16, 1), (3, 3)])
def test_tensor_parallel_splits_kv_heads(tp, expected_heads):
    assert kv_bytes_per_token("llama-3.1-70b", tp=tp) == 2 * 80 * expected_heads * 128 * 2


def test_mla_is_replicated_across_tp_ranks():
    assert kv_bytes_per_token("deepseek-v3", tp=8) == kv_bytes_per_token("deepseek-v3") == 70_272


@pytest.mark.parametrize(
    "dtype, size",
    [
        ("fp8", 1),
        ("fp8_e5m2", 1),
        ("float8_e4m3fn", 1),
        ("bf16", 2),
        ("float16", 2),
        ("fp32", 4),
        ("auto", 2),
        (None, 2),
    ],
)
def test_kv_cache_dtype(dtype, size):
    assert kv_bytes_per_token("llama-3.1-8b", kv_cache_dtype=dtype) == 2 * 32 * 8 * 128 * size


def test_config_dtype_is_used_when_auto():
    config = {**MODELS["llama-3.1-8b"], "torch_dtype": "float32"}
    assert kv_bytes_per_token(config) == 2 * 32 * 8 * 128 * 4
    assert kv_bytes_per_token({**config, "torch_dtype": None, "dtype": "float16"}) == 2 * 32 * 8 * 128 * 2


def test_gpt2_names_and_mha_default():
    gpt2 = {"n_layer": 12, "n_head": 12, "n_embd": 768, "torch_dtype": "float32"}
    assert kv_bytes_per_token(gpt2) == 2 * 12 * 12 * 64 * 4


def test_multi_query():
    config = {"n_layer": 40, "n_head": 48, "n_embd": 6144, "multi_query": True}
    assert kv_bytes_per_token(config) == 2 * 40 * 1 * 128 * 2


def test_text_config_of_multimodal_models():
    config = {
        "architectures": ["LlavaForConditionalGeneration"],
        "torch_dtype": "float16",
        "text_config": {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
        },
    }
    assert kv_bytes_per_token(config) == 2 * 32 * 8 * 128 * 2


def test_config_file_and_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(MODELS["qwen3-8b"]))
    assert kv_bytes_per_token(tmp_path) == kv_bytes_per_token(str(tmp_path / "config.json")) == 147_456


@pytest.mark.parametrize(
    "call, fragment",
    [
        (
            lambda: kv_bytes_per_token({"hidden_size": 4096}),
            "no num_hidden_layers / n_layer / num_layers; it has: hidden_size",
        ),
        (lambda: kv_bytes_per_token({"num_hidden_layers": 2, "hidden_size": 8}), "num_attention_heads"),
        (lambda: kv_bytes_per_token("llama-3.1-7b"), "did you mean llama-3.1-70b, llama-3.1-8b"),
        (lambda: kv_bytes_per_token("llama-3.1-8b", kv_cache_dtype="fp6"), "kv_cache_dtype: 'fp6' is not known"),
        (lambda: kv_bytes_per_token("llama-3.1-8b", tp=0), "tp: 0 is not a whole number >= 1"),
        (lambda: kv_bytes_per_token({"num_hidden_layers": 2, "kv_lora_rank": 512}), "qk_rope_head_dim"),
        (  # (saved as 8 KV heads of 8 attention heads' size: no model has more KV heads than query heads)
            lambda: kv_bytes_per_token(
                {"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 32, "hidden_size": 4096}
            ),
            "'num_key_value_heads' of config: 32 is more than the 8 attention heads",
        ),
        (  # (a head of 4096 // 30 = 136, rounded down without a word)
            lambda: kv_bytes_per_token(
                {"num_hidden_layers": 2, "num_attention_heads": 30, "num_key_value_heads": 2, "hidden_size": 4096}
            ),
            "4096 is not a multiple of the 30 attention heads",
        ),
    ],
)
def test_errors(call, fragment):
    with pytest.raises(ValueError) as info:
        call()
    assert fragment in str(info.value)


def test_unreadable_config(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="could not be read"):
        perfmodel.kv_bytes_per_token(tmp_path)


def test_a_config_file_giving_a_field_twice_is_refused(tmp_path):
    """JSON keeps the last of a key given twice: 32 layers then 2 was read as 2 layers (16x too few bytes)."""
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 32, "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8, '
        '"hidden_size": 4096}'
    )
    with pytest.raises(ValueError, match="gives the field 'num_hidden_layers' twice \\(32 and 2\\)"):
        kv_bytes_per_token(tmp_path)
