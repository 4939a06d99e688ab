"""Reading a model's config: its counts (strictly: whole numbers in range, the field and file named), the bytes
of its KV-cache dtype, and what each of its layers keeps (full, sliding-window or chunked attention, a
linear-attention or Mamba state, nothing), for :mod:`perfmodel.model.models`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from ..errors import InputError, shown

_DTYPE_BYTES = {
    **dict.fromkeys(["float32", "fp32", "float"], 4),
    **dict.fromkeys(["bfloat16", "bf16", "float16", "fp16", "half"], 2),
    **dict.fromkeys(
        [
            "fp8",
            "fp8_e4m3",
            "fp8_e5m2",
            "fp8_e4m3fn",
            "float8_e4m3fn",
            "float8_e5m2",
            "float8_e4m3fnuz",
            "float8_e5m2fnuz",
            "int8",
        ],
        1,
    ),
}


LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
HEADS = ("num_attention_heads", "n_head")
_HIDDEN = ("hidden_size", "n_embd", "d_model")


#: The largest count a config's field may hold: every count sizes work or memory (a list of its layers; bytes as
#: 64-bit integers), and the largest real ones are in the tens of thousands (vocabulary, window and chunk sizes).
_LARGEST = 2**31 - 1
#: The most layers a config may have (one entry of work per layer; real models have at most a few hundred).
MOST_LAYERS = 100_000


def _field(
    config: Mapping[str, Any],
    names: tuple[str, ...],
    smallest: int = 1,
    default: int | None = None,
    largest: int = _LARGEST,
) -> int:
    """A count of the config (the first of ``names`` it has): a whole number from ``smallest`` to ``largest``,
    never read leniently (2.7 layers, 0 heads, a negative window, 1e308 layers, a boolean or text are errors
    naming the field)."""
    for name in names:
        value = config.get(name)
        if value is not None:
            whole = (
                isinstance(value, numbers.Real)
                and not isinstance(value, bool)
                and math.isfinite(value)
                and float(value).is_integer()
            )
            if not whole or value < smallest:
                raise InputError(
                    f"model config field {name!r}",
                    f"{shown(value)} is not a whole number >= {smallest}",
                    f"correct {name} in the config",
                )
            if value > largest:
                raise InputError(
                    f"model config field {name!r}",
                    f"{value:.6g} is above {largest:,}",
                    f"correct {name} in the config (no real model has so many)",
                )
            return int(value)
    if default is not None:
        return default
    raise InputError(
        "model config",
        f"has no {' / '.join(names)}; it has: {', '.join(sorted(config)) or 'no fields'}",
        f"add {names[0]} to the config",
    )


def kv_dtype_bytes(config: Mapping[str, Any], kv_cache_dtype: str | None) -> int:
    name = kv_cache_dtype
    if name is None or str(name).lower() == "auto":
        name = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    key = str(name).lower().removeprefix("torch.")
    if key not in _DTYPE_BYTES:
        raise InputError(
            "kv_cache_dtype",
            f"{shown(name)} is not known",
            f"use one of {', '.join(sorted(_DTYPE_BYTES))} (or None/'auto' for the model's dtype)",
        )
    return _DTYPE_BYTES[key]


#: What a layer of each type keeps, from the names in a config's ``layer_types``.
_LAYER_TYPES = {
    "full_attention": "full",
    "attention": "full",
    "global_attention": "full",
    "sliding_attention": "window",
    "sliding_window_attention": "window",
    "local_attention": "window",
    "chunked_attention": "chunk",
    "linear_attention": "linear",
    "mamba": "mamba",
    "mamba2": "mamba",
    "none": "none",
    "mlp": "none",
    "moe": "none",
}


#: Nemotron-H's ``hybrid_override_pattern``: M = Mamba-2, * = attention, - = MLP, E = MoE.
_PATTERN_TYPES = {"M": "mamba", "*": "full", "-": "none", "E": "none"}


def _layer_types(types: Any, layers: int) -> list[str]:
    """A config's ``layer_types``: a list of one known type name per layer, else one line naming the field, the
    position and the value (a null entry is no layer type, never the type ``"none"``)."""
    where = "model config field 'layer_types'"
    if not isinstance(types, (list, tuple)):
        raise InputError(where, f"{shown(types)} is not a list", "give a list of one layer type per layer")
    if len(types) != layers:
        raise InputError(where, f"has {len(types)} layer_types for {layers} layers", "give one layer type per layer")
    for position, name in enumerate(types):
        if not isinstance(name, str):
            raise InputError(
                where,
                f"entry {position} is {shown(name)}, not a layer type's name",
                f"give a name for layer {position}, one of {', '.join(_LAYER_TYPES)}",
            )
    unknown = sorted({t for t in types if t.lower() not in _LAYER_TYPES})
    if unknown:
        raise InputError(
            where,
            f"has layer types {unknown} whose KV cache perfmodel does not model",
            f"map them to one of {', '.join(_LAYER_TYPES)}",
        )
    return list(types)


def layer_kinds(cfg: Mapping[str, Any]) -> list[str]:
    """The KV kind of every layer: full, window, chunk, linear, mamba or none (no cache)."""
    layers = _field(cfg, LAYERS, largest=MOST_LAYERS)
    types = cfg.get("layer_types")
    if types is not None:
        return [_LAYER_TYPES[t.lower()] for t in _layer_types(types, layers)]
    pattern = cfg.get("hybrid_override_pattern")
    if pattern:
        unknown = sorted(set(pattern) - set(_PATTERN_TYPES))
        if unknown or len(pattern) != layers:
            raise ValueError(
                f"model config's hybrid_override_pattern {pattern!r} has {len(pattern)} layers for "
                f"{layers}{' and unknown symbols ' + str(unknown) if unknown else ''}. "
                "Fix: one of M, *, -, E per layer"
            )
        return [_PATTERN_TYPES[c] for c in pattern]
    if cfg.get("full_attention_interval"):
        interval = _field(cfg, ("full_attention_interval",))
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    if cfg.get("attention_chunk_size"):
        no_rope = cfg.get("no_rope_layers") or [
            int((i + 1) % _field(cfg, ("no_rope_layer_interval",), default=4) != 0) for i in range(layers)
        ]
        if len(no_rope) != layers:
            raise ValueError(
                f"model config has {len(no_rope)} no_rope_layers for {layers} layers. Fix: give one flag per layer"
            )
        return ["chunk" if flag else "full" for flag in no_rope]
    if cfg.get("sliding_window") and cfg.get("use_sliding_window", True) is not False:
        pattern_every = _field(
            cfg,
            ("sliding_window_pattern", "_sliding_window_pattern"),
            default=2 if cfg.get("model_type") == "gemma2" else 0,
        )
        if pattern_every:
            return ["full" if (i + 1) % pattern_every == 0 else "window" for i in range(layers)]
        if cfg.get("max_window_layers") is not None:
            first = _field(cfg, ("max_window_layers",), smallest=0)
            return ["window" if i >= first else "full" for i in range(layers)]
        return ["window"] * layers
    return ["full"] * layers


#: Falcon's model types: ``falcon`` (transformers' FalconConfig) and the hub's earlier remote-code names.
_FALCON = ("falcon", "refinedweb", "refinedwebmodel")
#: Falcon's KV-head field and its earlier name (the remote-code RWConfig's).
_FALCON_KV = ("num_kv_heads", "n_head_kv")


def attention_heads(cfg: Mapping[str, Any]) -> tuple[int, int]:
    """(attention heads, KV heads) of a config's attention layers: the one reading of heads, for the bytes per token
    and for :func:`perfmodel.kv_heads`. A KV head count above the attention heads is refused, naming its field.

    Falcon follows transformers' ``FalconAttention`` (``models/falcon/modeling_falcon.py``): ``num_kv_heads`` (the
    remote code's ``n_head_kv``) when ``new_decoder_architecture or not multi_query``, else 1; ``FalconConfig``
    defaults ``num_kv_heads`` to the attention heads and ``multi_query`` to True (a config of another model type
    with Falcon's fields is read by the same rule, ``multi_query`` then False unless given). The remote-code
    ``RefinedWeb`` type (falcon-40b's first config, which has no such field) is the new decoder architecture, as
    vLLM's ``RWConfig`` reads falcon-40b (it sets it for a hidden size of 8192, falcon-40b's). Other configs: ``multi_query`` is one KV head, else ``num_key_value_heads``, else every attention head.

    Examples
    --------
    >>> attention_heads({"model_type": "falcon", "num_attention_heads": 128, "num_kv_heads": 8,
    ...                  "new_decoder_architecture": True, "multi_query": True})
    (128, 8)
    >>> attention_heads({"num_attention_heads": 32, "num_key_value_heads": 8})
    (32, 8)
    """
    heads = _field(cfg, HEADS)
    model_type = str(cfg.get("model_type", "")).lower()
    field = "num_key_value_heads"
    falcon_fields = any(cfg.get(name) is not None for name in ("new_decoder_architecture", *_FALCON_KV))
    if model_type in _FALCON or falcon_fields:
        field = next((name for name in _FALCON_KV if cfg.get(name) is not None), _FALCON_KV[0])
        new_architecture = cfg.get("new_decoder_architecture", model_type == "refinedweb")
        grouped = bool(new_architecture) or not cfg.get("multi_query", model_type in _FALCON)
        kv_heads = _field(cfg, _FALCON_KV, default=heads) if grouped else 1
    elif cfg.get("multi_query"):
        kv_heads = 1
    else:
        kv_heads = _field(cfg, (field,), default=heads)
    if kv_heads > heads:  # (key-value heads serve groups of query heads: never more of them)
        raise InputError(
            f"model config field {field!r}",
            f"{kv_heads} is more than the {heads} attention heads",
            f"correct {field} (at most num_attention_heads)",
        )
    return heads, kv_heads


def layer_bytes(cfg: Mapping[str, Any], kv_cache_dtype: str | None, tp: int) -> int:
    """One attention layer's KV bytes per token on one GPU."""
    dtype_bytes = kv_dtype_bytes(cfg, kv_cache_dtype)
    if cfg.get("kv_lora_rank") is not None:
        return (_field(cfg, ("kv_lora_rank",)) + _field(cfg, ("qk_rope_head_dim",), smallest=0)) * dtype_bytes
    heads, kv_heads = attention_heads(cfg)
    head_dim = _field(cfg, ("head_dim",), default=0)
    if not head_dim:
        hidden = _field(cfg, _HIDDEN)
        if hidden < heads or hidden % heads:
            size = "is smaller than" if hidden < heads else "is not a multiple of"
            raise InputError(
                "model config field 'hidden_size'",
                f"{hidden} {size} the {heads} attention heads, so a head's size is not a whole number",
                "give head_dim, or correct hidden_size",
            )
        head_dim = hidden // heads
    return 2 * max(1, math.ceil(kv_heads / tp)) * head_dim * dtype_bytes


def state_bytes(cfg: Mapping[str, Any], kinds: list[str], tp: int) -> tuple[int, int]:
    """(one GPU's fixed state bytes per request, layers holding one) of linear-attention and Mamba layers."""
    linear, mamba = kinds.count("linear"), kinds.count("mamba")
    if not linear and not mamba:
        return 0, 0
    dtype = kv_dtype_bytes(cfg, None)
    ssm_dtype = kv_dtype_bytes(cfg, cfg.get("mamba_ssm_dtype"))
    total = 0
    if linear:
        k_heads = math.ceil(_field(cfg, ("linear_num_key_heads",)) / tp)
        v_heads = math.ceil(_field(cfg, ("linear_num_value_heads",)) / tp)
        k_dim, v_dim = _field(cfg, ("linear_key_head_dim",)), _field(cfg, ("linear_value_head_dim",))
        conv = (2 * k_heads * k_dim + v_heads * v_dim) * (_field(cfg, ("linear_conv_kernel_dim",)) - 1)
        total += linear * (conv * dtype + v_heads * k_dim * v_dim * ssm_dtype)
    if mamba:
        heads = math.ceil(_field(cfg, ("mamba_num_heads", "mamba_n_heads")) / tp)
        head_dim = _field(cfg, ("mamba_head_dim", "mamba_d_head"))
        groups = math.ceil(_field(cfg, ("n_groups", "mamba_n_groups")) / tp)
        state = _field(cfg, ("ssm_state_size", "mamba_d_state"))
        conv = (heads * head_dim + 2 * groups * state) * (_field(cfg, ("conv_kernel", "mamba_d_conv")) - 1)
        total += mamba * (conv * dtype + heads * head_dim * state * ssm_dtype)
    return total, linear + mamba
