"""Reading a model's config: its counts (strictly: whole numbers in range, the field and file named), the bytes
of its KV-cache dtype, and what each of its layers keeps (full, sliding-window or chunked attention, a
linear-attention, lightning-attention or Mamba state, nothing), for :mod:`perfmodel.model.models`.

Each way a config gives its layer mix is read as the model's configuration class in Hugging Face transformers
(``models/<family>/configuration_<family>.py``) defines it, or refused naming the field: a config whose mix
perfmodel does not read is never taken for full attention in every layer.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from ..errors import InputError, shown
from ..inputs.words import count

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
    null = [name for name in names if name in config]  # (present, but null: not "has no")
    if null:
        raise InputError(f"model config field {null[0]!r}", "is null, and this config needs its value",
                         f"give {null[0]} a whole number in the config")  # fmt: skip
    raise InputError(
        "model config",
        f"has no {' / '.join(names)}; it has: {', '.join(sorted(config)) or 'no fields'}",
        f"add {names[0]} to the config",
    )


def kv_dtype_bytes(config: Mapping[str, Any], kv_cache_dtype: str | None) -> int:
    """Bytes of one KV-cache value: ``kv_cache_dtype``'s, or with ``None``/``"auto"`` the model's own dtype
    (:func:`model_dtype_bytes`). An unknown ``kv_cache_dtype`` is an error naming the argument; an unknown dtype in
    the config, one naming the config's field.

    >>> kv_dtype_bytes({"torch_dtype": "float32"}, None), kv_dtype_bytes({"torch_dtype": "float32"}, "fp8")
    (4, 1)
    """
    if kv_cache_dtype is None or str(kv_cache_dtype).lower() == "auto":
        return model_dtype_bytes(config)
    return _dtype_bytes(
        kv_cache_dtype,
        "kv_cache_dtype",
        f"use one of {', '.join(sorted(_DTYPE_BYTES))} (or None/'auto' for the model's dtype)",
    )


def model_dtype_bytes(config: Mapping[str, Any], *, for_state: bool = False) -> int:
    """Bytes of one value of the model's own dtype: the config's ``torch_dtype`` (or ``dtype``, the name newer
    transformers writes), bfloat16 when it gives neither. A value that is no dtype perfmodel knows (``"auto"``, a
    number) is an error naming that field; its fix is ``kv_cache_dtype`` for the KV cache, not for a state
    (``for_state``), which keeps the model's dtype.

    >>> model_dtype_bytes({"torch_dtype": "float16"}), model_dtype_bytes({})
    (2, 2)
    >>> model_dtype_bytes({"torch_dtype": "auto"})
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: model config field 'torch_dtype': 'auto' is not a dtype perfmodel knows the size of. Fix: correct torch_dtype in the config (e.g. "bfloat16"), or pass the KV cache's dtype, e.g. kv_cache_dtype='bf16'.
    """
    field = next((name for name in ("torch_dtype", "dtype") if config.get(name) is not None), None)
    if field is None:
        return _DTYPE_BYTES["bfloat16"]
    fix = f'correct {field} in the config (e.g. "bfloat16")'
    if not for_state:
        fix += ", or pass the KV cache's dtype, e.g. kv_cache_dtype='bf16'"
    return _dtype_bytes(
        config[field], f"model config field {field!r}", fix, "is not a dtype perfmodel knows the size of"
    )


def _dtype_bytes(name: Any, where: str, fix: str, problem: str = "is not known") -> int:
    """The bytes of a dtype's name (``torch.`` and case ignored), else an error at ``where``."""
    key = str(name).lower().removeprefix("torch.")
    if key not in _DTYPE_BYTES:
        raise InputError(where, f"{shown(name)} {problem}", fix)
    return _DTYPE_BYTES[key]


def _ssm_dtype_bytes(config: Mapping[str, Any]) -> int:
    """Bytes of a recurrent (SSM) state value: the config's ``mamba_ssm_dtype``, else the model's dtype."""
    value = config.get("mamba_ssm_dtype")
    if value is None or str(value).lower() == "auto":
        return model_dtype_bytes(config, for_state=True)
    return _dtype_bytes(value, "model config field 'mamba_ssm_dtype'", 'correct mamba_ssm_dtype (e.g. "float32")')


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
    """The KV kind of every layer: full, window, chunk, linear (Gated DeltaNet), lightning (MiniMax's linear
    attention), mamba (Mamba-2), mamba1 (Mamba) or none (no per-token cache). A Mamba mixer that runs beside a
    layer's attention (Falcon-H1, Zamba 2) is not a kind of its own: :func:`state_bytes` adds it.

    >>> layer_kinds({"num_hidden_layers": 4, "sliding_window": 512, "model_type": "cohere2"})
    ['window', 'window', 'window', 'full']
    >>> layer_kinds({"model_type": "jamba", "num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1})
    ['mamba1', 'full', 'mamba1', 'full']
    """
    return _layer_mix(cfg)[0]


#: Fields by which layers reuse another layer's KV cache (holding none of their own), which perfmodel does not
#: read: refused where set, never taken for layers that each hold their own.
_SHARED_KV_FIELDS = {
    "num_kv_shared_layers": "Gemma 3n's last layers, which reuse an earlier layer's KV cache",
    "use_cla": "Hunyuan's cross-layer attention (layers sharing one KV cache)",
}


def _layer_mix(cfg: Mapping[str, Any]) -> tuple[list[str], int]:
    """(the kind of every layer, the layers whose Mamba mixer runs beside their attention)."""
    layers = _field(cfg, LAYERS, largest=MOST_LAYERS)
    model_type = str(cfg.get("model_type") or "").lower()
    shared = next((name for name in _SHARED_KV_FIELDS if cfg.get(name) not in (None, False, 0)), None)
    if shared is not None:
        raise InputError(
            f"model config field {shared!r}",
            f"{shown(cfg[shared])} gives {_SHARED_KV_FIELDS[shared]}, which perfmodel does not read (its layers would "
            "be counted as each holding its own)",
            f"give layer_types with 'none' for each layer that holds no cache of its own, and drop {shared}; or pass "
            "the model's bytes as numbers (kv_bytes_per_token, state_bytes)",
        )
    types = cfg.get("layer_types")
    if types is not None:
        kinds = [_LAYER_TYPES[t.lower()] for t in _layer_types(types, layers)]
        if model_type.startswith("minimax"):  # (transformers' MiniMaxConfig: its linear attention is lightning)
            kinds = ["lightning" if kind == "linear" else kind for kind in kinds]
        return kinds, 0
    pattern = cfg.get("hybrid_override_pattern")
    if pattern:
        unknown = sorted(set(pattern) - set(_PATTERN_TYPES))
        if unknown or len(pattern) != layers:
            raise ValueError(
                f"model config's hybrid_override_pattern {pattern!r} has {len(pattern)} layers for "
                f"{layers}{' and unknown symbols ' + str(unknown) if unknown else ''}. "
                "Fix: one of M, *, -, E per layer"
            )
        return [_PATTERN_TYPES[c] for c in pattern], 0
    family = _FAMILIES.get("minimax" if model_type.startswith("minimax") else model_type)
    if family is not None:
        if cfg.get("sliding_window") and cfg.get("use_sliding_window", True) is not False:
            raise InputError(
                "model config field 'sliding_window'",
                f"{shown(cfg['sliding_window'])} is given with the layer mix of a {model_type!r} model, which does "
                "not say which of its layers keep a window",
                "give layer_types (sliding_attention for the layers that keep a window), or drop sliding_window",
            )
        return family(cfg, layers)
    _refuse_unread_mix(cfg, model_type)
    return _attention_kinds(cfg, model_type, layers), 0


#: transformers' default ``sliding_window_pattern`` of a model type whose config may leave it out (every n-th layer
#: global): ``Gemma2Config`` (every other layer), ``Gemma3TextConfig`` (6), ``Cohere2Config`` (4).
_DEFAULT_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6, "cohere2": 4}


def _attention_kinds(cfg: Mapping[str, Any], model_type: str, layers: int) -> list[str]:
    """The kinds of a config of no hybrid family: Qwen3-Next's ``full_attention_interval``, Llama 4's chunks, sliding
    windows, else full attention in every layer."""
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
            cfg, ("sliding_window_pattern", "_sliding_window_pattern"), default=_DEFAULT_PATTERN.get(model_type, 0)
        )
        if pattern_every:
            return ["full" if (i + 1) % pattern_every == 0 else "window" for i in range(layers)]
        if cfg.get("max_window_layers") is not None:
            first = _field(cfg, ("max_window_layers",), smallest=0)
            return ["window" if i >= first else "full" for i in range(layers)]
        return ["window"] * layers
    return ["full"] * layers


# --- hybrid families: each reads its layer mix as its transformers configuration class defines it -----------------


def _jamba(cfg: Mapping[str, Any], layers: int) -> tuple[list[str], int]:
    """``JambaConfig.layers_block_type``: attention where ``i % attn_layer_period == attn_layer_offset``, Mamba
    (v1) elsewhere."""
    period = _field(cfg, ("attn_layer_period",))
    offset = _field(cfg, ("attn_layer_offset",), smallest=0)
    if offset >= period:
        raise InputError(
            "model config field 'attn_layer_offset'",
            f"{offset} is not smaller than attn_layer_period ({period})",
            "correct attn_layer_offset (the first attention layer's index, below the period)",
        )
    return ["full" if i % period == offset else "mamba1" for i in range(layers)], 0


def _bamba(cfg: Mapping[str, Any], layers: int) -> tuple[list[str], int]:
    """``BambaConfig.layers_block_type``: attention at ``attn_layer_indices``, Mamba-2 elsewhere."""
    attention = _indices(cfg, "attn_layer_indices", layers)
    return ["full" if i in attention else "mamba" for i in range(layers)], 0


def _minimax(cfg: Mapping[str, Any], layers: int) -> tuple[list[str], int]:
    """MiniMax-Text-01 / M1 / M2's ``attn_type_list``: 1 softmax attention, 0 lightning (linear) attention."""
    where = "model config field 'attn_type_list'"
    flags = _layer_list(cfg, "attn_type_list", layers)
    for position, flag in enumerate(flags):
        if isinstance(flag, bool) or flag not in (0, 1):
            raise InputError(
                where,
                f"entry {position} is {shown(flag)}, not 0 (lightning attention) or 1 (softmax attention)",
                f"give 0 or 1 for layer {position}",
            )
    return ["full" if flag == 1 else "lightning" for flag in flags], 0


def _falcon_h1(cfg: Mapping[str, Any], layers: int) -> tuple[list[str], int]:
    """``FalconH1Config.layers_block_type``: every layer "hybrid", attention and a Mamba-2 mixer side by side."""
    return ["full"] * layers, layers


def _mllama(cfg: Mapping[str, Any], layers: int) -> tuple[list[str], int]:
    """``MllamaTextConfig.cross_attention_layers``: those layers attend to the image's keys and values (kept per
    image, not per prompt token); the others are self-attention."""
    cross = _indices(cfg, "cross_attention_layers", layers)
    return ["none" if i in cross else "full" for i in range(layers)], 0


#: ``layers_block_type`` of the model types that save it in their config: (kind, with a Mamba mixer beside) by name.
#: Zamba 2 (``Zamba2Config``): "hybrid" = the shared attention block and a Mamba-2 layer. Nemotron-H (the list that
#: replaces ``hybrid_override_pattern``): "mamba", "attention", "moe", "mlp".
_BLOCK_TYPES = {
    "zamba2": {"hybrid": ("full", 1), "mamba": ("mamba", 0)},
    "nemotron_h": {"mamba": ("mamba", 0), "attention": ("full", 0), "moe": ("none", 0), "mlp": ("none", 0)},
}


def _blocks(cfg: Mapping[str, Any], layers: int) -> tuple[list[str], int]:
    """A ``layers_block_type`` list, read by its model type's names (:data:`_BLOCK_TYPES`)."""
    names = _BLOCK_TYPES[str(cfg.get("model_type")).lower()]
    blocks = _layer_list(cfg, "layers_block_type", layers)
    unknown = sorted({str(b) for b in blocks if not isinstance(b, str) or b.lower() not in names})
    if unknown:
        raise InputError(
            "model config field 'layers_block_type'",
            f"has block types {unknown} that a {cfg.get('model_type')!r} model does not have",
            f"give one of {', '.join(names)} per layer",
        )
    read = [names[b.lower()] for b in blocks]
    return [kind for kind, _ in read], sum(beside for _, beside in read)


_FAMILIES = {
    "jamba": _jamba,
    "bamba": _bamba,
    "minimax": _minimax,
    "falcon_h1": _falcon_h1,
    "zamba2": _blocks,
    "nemotron_h": _blocks,
    "mllama": _mllama,
    "mllama_text_model": _mllama,
}


def _mix_field(cfg: Mapping[str, Any], field: str) -> Any:
    """The config's ``field`` that gives its layer mix; refused where the config has none (never a default)."""
    value = cfg.get(field)
    if value is None:
        raise InputError(
            "model config",
            f"has no {field}, which gives the layer mix of a {cfg.get('model_type')!r} model",
            f"add {field} to the config, or give layer_types",
        )
    return value


def _layer_list(cfg: Mapping[str, Any], field: str, layers: int) -> list[Any]:
    """A config's list of one entry per layer (never a default the config does not give)."""
    value = _mix_field(cfg, field)
    if not isinstance(value, (list, tuple)):
        raise InputError(f"model config field {field!r}", f"{shown(value)} is not a list", "give a list per layer")
    if len(value) != layers:
        raise InputError(
            f"model config field {field!r}",
            f"has {count(len(value), 'entry', 'entries')} for {count(layers, 'layer')}",
            "give one per layer",
        )
    return list(value)


def _indices(cfg: Mapping[str, Any], field: str, layers: int) -> set[int]:
    """A config's list of layer indices (each a whole number from 0 to ``layers - 1``, each once)."""
    where = f"model config field {field!r}"
    value = _mix_field(cfg, field)
    if not isinstance(value, (list, tuple)):
        raise InputError(where, f"{shown(value)} is not a list", f"give a list of layer indices from 0 to {layers - 1}")
    seen: set[int] = set()
    for position, index in enumerate(value):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < layers:
            raise InputError(
                where,
                f"entry {position} is {shown(index)}, not a layer index from 0 to {layers - 1}",
                f"correct {field} (the model has {count(layers, 'layer')})",
            )
        if index in seen:
            raise InputError(where, f"gives layer {index} twice", f"give each layer once in {field}")
        seen.add(index)
    return seen


#: Fields that give a layer mix, and whose mix each is: read for the model types of :data:`_FAMILIES`, refused for
#: any other (or a config without ``model_type``), never taken for full attention in every layer.
_MIX_FIELDS = {
    "attn_layer_period": "the layer mix of Jamba (model_type 'jamba') or of Zamba (another rule)",
    "attn_layer_offset": "the layer mix of Jamba (model_type 'jamba') or of Zamba (another rule)",
    "attn_layer_indices": "Bamba's attention layers (model_type 'bamba')",
    "attn_type_list": "MiniMax's softmax and lightning-attention layers (a model_type starting 'minimax')",
    "layers_block_type": "the blocks of Zamba 2 or Nemotron-H (model_type 'zamba2', 'nemotron_h') or of Zamba",
    "cross_attention_layers": "Mllama's cross-attention layers (model_type 'mllama_text_model')",
    "block_types": "RecurrentGemma's recurrent (RG-LRU) and local-attention blocks",
    "_block_types": "RecurrentGemma's recurrent (RG-LRU) and local-attention blocks",
    "full_attn_idxs": "LFM2's attention and short-convolution layers",
    "global_attn_idx": "Hymba's global-attention layers (each layer also runs Mamba heads)",
}
#: Model types of state-space models without attention layers.
_STATE_SPACE = ("mamba", "mamba2", "falcon_mamba")
_MIX_FIX = (
    "give layer_types (one per layer: full_attention, sliding_attention, chunked_attention, linear_attention, mamba "
    "or none, with the fields of its state), or pass the model's bytes as numbers (kv_bytes_per_token, state_bytes)"
)


def _refuse_unread_mix(cfg: Mapping[str, Any], model_type: str) -> None:
    """Refuse a config that gives its layer mix in a way perfmodel does not read (one line naming the field)."""
    if model_type in _STATE_SPACE:
        raise InputError(
            "model config field 'model_type'",
            f"{model_type!r} is a state-space model without attention layers; perfmodel does not read its state",
            _MIX_FIX,
        )
    field = next((name for name in _MIX_FIELDS if cfg.get(name) is not None), None)
    if field is not None:
        kind = f"model_type {model_type!r}" if model_type else "a config without model_type"
        raise InputError(
            f"model config field {field!r}",
            f"gives {_MIX_FIELDS[field]}, which perfmodel does not read for {kind}",
            _MIX_FIX,
        )


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
    vLLM's ``RWConfig`` reads falcon-40b (it sets it for a hidden size of 8192, falcon-40b's). ChatGLM and GLM-4
    (the remote code's ``ChatGLMConfig``): ``multi_query_group_num`` KV heads with ``multi_query_attention``, else
    every attention head. Other configs: ``multi_query`` is one KV head, else ``num_key_value_heads``, else every
    attention head.

    Examples
    --------
    >>> attention_heads({"model_type": "falcon", "num_attention_heads": 128, "num_kv_heads": 8,
    ...                  "new_decoder_architecture": True, "multi_query": True})
    (128, 8)
    >>> attention_heads({"num_attention_heads": 32, "num_key_value_heads": 8})
    (32, 8)
    >>> attention_heads({"num_attention_heads": 32, "multi_query_attention": True, "multi_query_group_num": 2})
    (32, 2)
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
    elif cfg.get("multi_query_attention"):
        field = "multi_query_group_num"
        kv_heads = _field(cfg, (field,))
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
    """One attention layer's KV bytes per token on one GPU: an MLA latent, or keys and values of
    ``ceil(kv_heads / tp)`` heads (at least one) of :func:`head_size` values each.

    >>> layer_bytes({"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}, None, 1)
    4096
    """
    dtype_bytes = kv_dtype_bytes(cfg, kv_cache_dtype)
    if cfg.get("kv_lora_rank") is not None:
        return (_field(cfg, ("kv_lora_rank",)) + _field(cfg, ("qk_rope_head_dim",), smallest=0)) * dtype_bytes
    heads, kv_heads = attention_heads(cfg)
    return 2 * max(1, math.ceil(kv_heads / tp)) * head_size(cfg, heads) * dtype_bytes


#: transformers' default ``head_dim`` of a model type whose configuration class declares one that
#: ``hidden_size / num_attention_heads`` need not give (a config without the field is that model as transformers
#: reads it): ``GemmaConfig``, ``Gemma2Config``, ``Gemma3TextConfig`` (256), ``Qwen3Config`` (128), in
#: ``transformers/models/*/configuration_*.py``. (``Qwen3MoeConfig`` declares none: its head is derived.)
CLASS_HEAD_DIM = {"gemma": 256, "gemma2": 256, "gemma3_text": 256, "qwen3": 128}


#: The fields a multimodal model's ``text_config`` leaves out when they equal its configuration class's defaults
#: (transformers saves a sub-config as its difference from them), for the classes whose defaults are known here:
#: ``Gemma3TextConfig`` (``transformers/models/gemma3/configuration_gemma3.py``; google/gemma-3-4b-it's
#: text_config gives none of its heads, gemma-3-12b-it's no head_dim).
TEXT_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "hidden_size": 2304,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 4096,
    },
}


def head_size(cfg: Mapping[str, Any], heads: int) -> int:
    """The values of one attention head: ``head_dim``, else ChatGLM's ``kv_channels``, else the model type's class
    default (:data:`CLASS_HEAD_DIM`), else ``hidden_size / heads``;
    Zamba 2's shared attention block works on twice the hidden size (``Zamba2Config.attention_head_dim = 2 *
    hidden_size // num_attention_heads``, whatever ``kv_channels`` it saves).

    >>> head_size({"hidden_size": 4096}, 32), head_size({"hidden_size": 4096, "kv_channels": 256}, 32)
    (128, 256)
    >>> head_size({"model_type": "qwen3", "hidden_size": 2560}, 32)  # Qwen3Config's head_dim, not 2560 / 32
    128
    """
    model_type = str(cfg.get("model_type")).lower()
    if model_type == "zamba2":
        width, field = 2 * _field(cfg, _HIDDEN), "2 * hidden_size"
    else:
        explicit = _field(cfg, ("head_dim", "kv_channels"), default=CLASS_HEAD_DIM.get(model_type, 0))
        if explicit:
            return explicit
        width, field = _field(cfg, _HIDDEN), "hidden_size"
    if width < heads or width % heads:
        size = "is smaller than" if width < heads else "is not a multiple of"
        raise InputError(
            "model config field 'hidden_size'",
            f"{field} = {width} {size} the {heads} attention heads, so a head's size is not a whole number",
            "give head_dim, or correct hidden_size",
        )
    return width // heads


def state_bytes(cfg: Mapping[str, Any], kinds: list[str], tp: int) -> tuple[int, int]:
    """(one GPU's fixed state bytes per request, layers holding one) of the linear-attention, lightning-attention
    and Mamba layers of ``kinds`` (:func:`layer_kinds`) and of the Mamba mixers beside a layer's attention.

    >>> config = {"model_type": "jamba", "num_hidden_layers": 2, "attn_layer_period": 2, "attn_layer_offset": 1,
    ...           "hidden_size": 64, "mamba_expand": 2, "mamba_d_conv": 4, "mamba_d_state": 16}
    >>> state_bytes(config, layer_kinds(config), 1)  # one Mamba layer: 128 channels of (4 - 1) + 16 values, bf16
    (4864, 1)
    """
    counts = {kind: kinds.count(kind) for kind in _STATE_OF}
    counts["mamba"] += _layer_mix(cfg)[1]
    if not any(counts.values()):
        return 0, 0
    dtype, ssm_dtype = model_dtype_bytes(cfg, for_state=True), _ssm_dtype_bytes(cfg)
    total = sum(n * _STATE_OF[kind](cfg, tp, dtype, ssm_dtype) for kind, n in counts.items() if n)
    return total, sum(counts.values())


def _gated_delta_net(cfg: Mapping[str, Any], tp: int, dtype: int, ssm_dtype: int) -> int:
    """One Gated DeltaNet layer's state on one rank (Qwen3-Next): convolution values and the recurrent state."""
    k_heads = math.ceil(_field(cfg, ("linear_num_key_heads",)) / tp)
    v_heads = math.ceil(_field(cfg, ("linear_num_value_heads",)) / tp)
    k_dim, v_dim = _field(cfg, ("linear_key_head_dim",)), _field(cfg, ("linear_value_head_dim",))
    conv = (2 * k_heads * k_dim + v_heads * v_dim) * (_field(cfg, ("linear_conv_kernel_dim",)) - 1)
    return conv * dtype + v_heads * k_dim * v_dim * ssm_dtype


def _mamba2(cfg: Mapping[str, Any], tp: int, dtype: int, ssm_dtype: int) -> int:
    """One Mamba-2 layer's state on one rank, by the field names of Nemotron-H, Bamba / Falcon-H1 and Zamba 2."""
    heads = math.ceil(_field(cfg, ("mamba_num_heads", "mamba_n_heads", "n_mamba_heads")) / tp)
    head_dim = _field(cfg, ("mamba_head_dim", "mamba_d_head", "mamba_headdim"))
    groups = math.ceil(_field(cfg, ("n_groups", "mamba_n_groups", "mamba_ngroups")) / tp)
    state = _field(cfg, ("ssm_state_size", "mamba_d_state"))
    conv = (heads * head_dim + 2 * groups * state) * (_field(cfg, ("conv_kernel", "mamba_d_conv")) - 1)
    return conv * dtype + heads * head_dim * state * ssm_dtype


def _mamba1(cfg: Mapping[str, Any], tp: int, dtype: int, ssm_dtype: int) -> int:
    """One Mamba (v1) layer's state on one rank (Jamba): ``mamba_expand * hidden_size`` channels, each with
    ``mamba_d_conv - 1`` convolution values and ``mamba_d_state`` recurrent ones."""
    channels = math.ceil(_field(cfg, ("mamba_expand",)) * _field(cfg, _HIDDEN) / tp)
    return (
        channels * (_field(cfg, ("mamba_d_conv",)) - 1) * dtype + channels * _field(cfg, ("mamba_d_state",)) * ssm_dtype
    )


def _lightning(cfg: Mapping[str, Any], tp: int, dtype: int, ssm_dtype: int) -> int:
    """One lightning-attention layer's state on one rank (MiniMax): a ``head_dim x head_dim`` matrix per attention
    head, in the model's dtype."""
    heads = _field(cfg, HEADS)
    size = head_size(cfg, heads)
    return math.ceil(heads / tp) * size * size * dtype


#: The state of one layer of each kind that keeps one: (config, tp, dtype bytes, SSM dtype bytes) -> bytes.
_STATE_OF = {"linear": _gated_delta_net, "lightning": _lightning, "mamba": _mamba2, "mamba1": _mamba1}
