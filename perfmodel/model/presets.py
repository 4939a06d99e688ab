"""The built-in model presets: the KV-relevant fields of each model's published ``config.json``, by name
(:data:`perfmodel.MODELS`; :mod:`perfmodel.model.models` reads them)."""

from __future__ import annotations

from typing import Any


def _gqa(layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int | None = None, **extra: Any) -> dict:
    config = {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "torch_dtype": "bfloat16",
        **extra,
    }
    if head_dim is not None:
        config["head_dim"] = head_dim
    return config


_DEEPSEEK_V3 = {
    # deepseek-ai/DeepSeek-V3 (and -R1, same architecture): Multi-head Latent Attention
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "torch_dtype": "bfloat16",
}

#: Model presets: name -> the KV-relevant fields of the model's published ``config.json``.
MODELS: dict[str, dict[str, Any]] = {
    # meta-llama/Llama-3.1-{8B,70B,405B}
    "llama-3.1-8b": _gqa(32, 4096, 32, 8, model_type="llama"),
    "llama-3.1-70b": _gqa(80, 8192, 64, 8, model_type="llama"),
    "llama-3.1-405b": _gqa(126, 16384, 128, 8, model_type="llama"),
    # Qwen/Qwen2.5-{7B,72B}
    "qwen2.5-7b": _gqa(28, 3584, 28, 4, model_type="qwen2"),
    "qwen2.5-72b": _gqa(80, 8192, 64, 8, model_type="qwen2"),
    # Qwen/Qwen3-*: explicit head_dim (hidden_size / heads is wrong for 32B, 30B-A3B, 235B-A22B)
    "qwen3-8b": _gqa(36, 4096, 32, 8, 128, model_type="qwen3"),
    "qwen3-32b": _gqa(64, 5120, 64, 8, 128, model_type="qwen3"),
    "qwen3-30b-a3b": _gqa(48, 2048, 32, 4, 128, model_type="qwen3_moe"),
    "qwen3-235b-a22b": _gqa(94, 4096, 64, 4, 128, model_type="qwen3_moe"),
    # mistralai/Mixtral-8x7B-v0.1, mistralai/Mixtral-8x22B-v0.1
    "mixtral-8x7b": _gqa(32, 4096, 32, 8, model_type="mixtral"),
    "mixtral-8x22b": _gqa(56, 6144, 48, 8, model_type="mixtral"),
    "deepseek-v3": _DEEPSEEK_V3,
    "deepseek-r1": _DEEPSEEK_V3,
    # Models whose bytes are not proportional to the prompt (see kv_terms):
    # mistralai/Mistral-7B-v0.1: every layer a 4096-token sliding window
    "mistral-7b-v0.1": _gqa(32, 4096, 32, 8, model_type="mistral", sliding_window=4096),
    # openai/gpt-oss-{20b,120b}: sliding (128 tokens) and full attention alternate
    "gpt-oss-20b": _gqa(
        24,
        2880,
        64,
        8,
        64,
        model_type="gpt_oss",
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * 12,
    ),
    "gpt-oss-120b": _gqa(
        36,
        2880,
        64,
        8,
        64,
        model_type="gpt_oss",
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * 18,
    ),
    # google/gemma-3-27b-it (text_config): five 1024-token local layers, then one global
    "gemma-3-27b": _gqa(62, 5376, 32, 16, 128, model_type="gemma3_text", sliding_window=1024, sliding_window_pattern=6),
    # meta-llama/Llama-4-Scout-17B-16E (text_config): 8192-token chunked attention on RoPE layers,
    # every 4th layer global (no RoPE)
    "llama-4-scout": _gqa(
        48, 5120, 40, 8, 128, model_type="llama4_text", attention_chunk_size=8192, no_rope_layers=[1, 1, 1, 0] * 12
    ),
    # Qwen/Qwen3-Next-80B-A3B-Instruct: Gated DeltaNet (linear attention, a fixed state) in three of
    # every four layers, full attention in the fourth
    "qwen3-next-80b-a3b": _gqa(
        48,
        2048,
        16,
        2,
        256,
        model_type="qwen3_next",
        full_attention_interval=4,
        linear_num_key_heads=16,
        linear_key_head_dim=128,
        linear_num_value_heads=32,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
    ),
}
