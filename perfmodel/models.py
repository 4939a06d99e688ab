"""KV-cache bytes per token from Hugging Face model configs, and built-in model presets.

Nothing is downloaded: a config is a dict, a ``config.json`` on disk (or the folder
holding it), or the name of a preset in :data:`MODELS`, whose values are copied from
each model's published ``config.json`` (only the fields the KV cache depends on).
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MODELS", "ModelConfig", "kv_bytes_per_token", "layer_count", "model_config", "save_model",
           "user_models"]

ModelConfig = Mapping[str, Any] | str | os.PathLike


def _gqa(layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int | None = None, **extra: Any) -> dict:
    config = {"num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "torch_dtype": "bfloat16", **extra}
    if head_dim is not None:
        config["head_dim"] = head_dim
    return config


_DEEPSEEK_V3 = {
    # deepseek-ai/DeepSeek-V3 (and -R1, same architecture): Multi-head Latent Attention
    "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
    "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "torch_dtype": "bfloat16",
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
}

_DTYPE_BYTES = {
    **dict.fromkeys(["float32", "fp32", "float"], 4),
    **dict.fromkeys(["bfloat16", "bf16", "float16", "fp16", "half"], 2),
    **dict.fromkeys(["fp8", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fn", "float8_e4m3fn", "float8_e5m2",
                     "float8_e4m3fnuz", "float8_e5m2fnuz", "int8"], 1),
}

_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_HEADS = ("num_attention_heads", "n_head")
_HIDDEN = ("hidden_size", "n_embd", "d_model")


def _closest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5)
    return f"did you mean {', '.join(close)}? " if close else ""


def model_config(config: ModelConfig) -> dict[str, Any]:
    """A model config as a dict: from a dict, a preset name, a ``config.json`` or its folder.

    Configs of multimodal models keep the language model under ``text_config``; that
    part is returned (with the top-level dtype when it has none of its own).

    >>> from perfmodel import model_config
    >>> model_config("llama-3.1-8b")["num_key_value_heads"]
    8
    """
    if isinstance(config, Mapping):
        data = dict(config)
    elif isinstance(config, (str, os.PathLike)):
        key = str(config).strip().lower()
        users = user_models() if key not in MODELS else {}
        if key in MODELS or key in users:
            data = dict(MODELS[key] if key in MODELS else users[key])
        else:
            path = Path(config)
            if path.is_dir():
                path = path / "config.json"
            if not path.is_file():
                raise ValueError(
                    f"model {str(config)!r}: not a preset nor a config.json file. Fix: "
                    f"{_closest(key, [*MODELS, *users])}use a preset ({', '.join([*MODELS, *users])}), "
                    "a path to config.json or its folder, or a dict")
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as error:
                raise ValueError(f"model config {str(path)!r} could not be read: {error}. "
                                 "Fix: pass a valid Hugging Face config.json") from None
    else:
        raise TypeError(f"model config must be a dict, preset name or path, got {type(config).__name__}")
    text = data.get("text_config")
    if isinstance(text, Mapping) and not any(k in data for k in _LAYERS):
        dtype = {k: data[k] for k in ("torch_dtype", "dtype") if k in data}
        data = {**dtype, **text}
    return data


def user_models() -> dict[str, dict[str, Any]]:
    """Model configs saved with :func:`save_model` (or ``perfmodel models --add``), by name."""
    from . import _presets

    return {name: entry.get("config", {}) for name, entry in _presets.load("models").items()}


def save_model(name: str, config: ModelConfig, *, source: str = "") -> Path:
    """Save a Hugging Face config (dict, ``config.json`` path or its folder) as a user model preset:
    every entry point then accepts ``name``. The KV-relevant fields are checked first.

    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_model("my-llama", {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4})
    >>> kv_bytes_per_token("my-llama")
    512
    """
    from . import _presets

    data = model_config(config)
    kv_bytes_per_token(data)  # refuse a config without the fields the KV cache needs
    origin = source or (str(config) if isinstance(config, (str, os.PathLike)) else "a config dict")
    return _presets.save("models", name, {"config": data, "source": origin}, builtin=set(MODELS))


def _field(config: Mapping[str, Any], names: tuple[str, ...]) -> int:
    for name in names:
        value = config.get(name)
        if value is not None:
            return int(value)
    raise ValueError(f"model config has no {' / '.join(names)}; it has: {', '.join(sorted(config)) or 'no fields'}. "
                     f"Fix: add {names[0]} to the config")


def _dtype_bytes(config: Mapping[str, Any], kv_cache_dtype: str | None) -> int:
    name = kv_cache_dtype
    if name is None or str(name).lower() == "auto":
        name = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    key = str(name).lower().removeprefix("torch.")
    if key not in _DTYPE_BYTES:
        from .errors import InputError

        raise InputError("kv_cache_dtype", f"{name!r} is not known",
                         f"use one of {', '.join(sorted(_DTYPE_BYTES))} (or None/'auto' for the model's dtype)")
    return _DTYPE_BYTES[key]


def kv_bytes_per_token(
    config: ModelConfig, *, kv_cache_dtype: str | None = None, tp: int = 1, scope: str = "rank",
) -> int:
    """KV-cache bytes one token occupies on one GPU (``scope="rank"``), or on all the GPUs of the
    tensor-parallel group together (``scope="group"``: what the group sends over the network).

    - GQA/MHA: ``2 * layers * ceil(kv_heads / tp) * head_dim * dtype_bytes`` (keys and
      values), with the config's explicit ``head_dim`` when it has one, else
      ``hidden_size // num_attention_heads``; ``num_key_value_heads`` defaults to
      ``num_attention_heads`` (``multi_query`` configs have one KV head).
    - MLA (``kv_lora_rank`` in the config: DeepSeek-V2/V3/R1, Kimi-K2): one latent of
      ``kv_lora_rank + qk_rope_head_dim`` per layer, no factor 2, replicated on every
      tensor-parallel rank (``tp`` does not divide it).

    Parameters
    ----------
    config
        A parsed ``config.json`` (dict), a path to one or to its folder, or a
        :data:`MODELS` preset name.
    kv_cache_dtype
        KV-cache dtype: ``None``/``"auto"`` uses the config's ``torch_dtype`` (default
        bfloat16); fp8 variants take 1 byte, fp16/bf16 2, fp32 4.
    tp
        Tensor-parallel degree: the bytes are per GPU, KV heads split across ranks
        (at least one head each).
    scope
        ``"rank"`` (default): one GPU's bytes. ``"group"``: ``tp`` times that, the bytes
        every rank of the prefill group sends: KV heads replicated because ``tp`` exceeds
        the KV heads (and an MLA latent held by every rank) count once per rank.

    Returns
    -------
    int
        Bytes per token per GPU.

    Examples
    --------
    >>> from perfmodel import kv_bytes_per_token
    >>> kv_bytes_per_token("llama-3.1-70b")
    327680
    >>> kv_bytes_per_token("qwen3-32b")  # head_dim 128, not 5120 / 64 = 80
    262144
    >>> kv_bytes_per_token("deepseek-v3", kv_cache_dtype="fp8", tp=8)
    35136
    >>> kv_bytes_per_token("qwen3-235b-a22b", tp=8, scope="group")  # 4 KV heads on 8 ranks: each sent twice
    385024
    """
    from .errors import check_choice, check_whole

    tp = check_whole("tp", tp, smallest=1)
    ranks = tp if check_choice("scope", scope, ("rank", "group")) == "group" else 1
    return ranks * _rank_bytes(model_config(config), kv_cache_dtype, tp)


def layer_count(config: ModelConfig) -> int:
    """The number of transformer layers of a model (name, config or path).

    >>> layer_count("llama-3.1-70b")
    80
    """
    return _field(model_config(config), _LAYERS)


def _rank_bytes(cfg: Mapping[str, Any], kv_cache_dtype: str | None, tp: int) -> int:
    """One GPU's KV bytes per token."""
    dtype_bytes = _dtype_bytes(cfg, kv_cache_dtype)
    layers = _field(cfg, _LAYERS)
    if cfg.get("kv_lora_rank") is not None:
        latent = _field(cfg, ("kv_lora_rank",)) + _field(cfg, ("qk_rope_head_dim",))
        return layers * latent * dtype_bytes
    heads = _field(cfg, _HEADS)
    if cfg.get("multi_query"):
        kv_heads = 1
    elif cfg.get("num_key_value_heads") is not None:
        kv_heads = _field(cfg, ("num_key_value_heads",))
    else:
        kv_heads = heads
    head_dim = int(cfg["head_dim"]) if cfg.get("head_dim") else _field(cfg, _HIDDEN) // heads
    return 2 * layers * max(1, math.ceil(kv_heads / tp)) * head_dim * dtype_bytes
