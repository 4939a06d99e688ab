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
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError, check_whole, shown, warn
from ..inputs import user_presets as _presets
from ..inputs.coerce import one_index, whole_numbers
from ..inputs.table import INPUTS, check_count, check_option, documented
from ..inputs.words import count
from . import layers as _layers
from .layers import LAYERS, MOST_LAYERS, _field, kv_dtype_bytes, layer_bytes, layer_kinds, state_bytes
from .presets import MODELS

__all__ = ["KVTerms", "MODELS", "ModelConfig", "kv_bytes", "kv_bytes_per_token", "kv_messages", "kv_terms",
           "layer_count", "model_config", "model_source", "remove_model", "save_model", "user_models"]

ModelConfig = Mapping[str, Any] | str | os.PathLike


def model_config(config: ModelConfig) -> dict[str, Any]:
    """A model config as a dict: from a dict, a preset name, a ``config.json`` or its folder.

    Configs of multimodal models keep the language model under ``text_config``; that
    part is returned (with the top-level dtype when it has none of its own).

    Parameters
    ----------
    config
        A dict, a preset name (built-in or saved with :func:`save_model`), a ``config.json``
        path or the folder holding one. A text holding a '/' or ending in '.json' is a path, read
        whatever the presets file holds; a preset's name that also names a config here (a file, or
        a folder holding config.json) is refused as ambiguous (``"./name"`` is the folder).

    Returns
    -------
    dict
        A fresh copy of the config (the language model's part of a multimodal one).

    Examples
    --------
    >>> from perfmodel import model_config
    >>> model_config("llama-3.1-8b")["num_key_value_heads"]
    8
    """
    if isinstance(config, Mapping):
        data = dict(config)
    elif isinstance(config, (str, os.PathLike)):
        data = _named(str(config))
    else:
        raise InputError("model config", f"got {shown(config)}" if hasattr(config, "__len__") else
                         f"got {type(config).__name__}", "pass one model: a preset name, a config dict or a path")
    text = data.get("text_config")
    if isinstance(text, Mapping) and not any(k in data for k in LAYERS):
        dtype: dict[str, Any] = {k: data[k] for k in ("torch_dtype", "dtype") if k in data}
        data = {**dtype, **_layers.TEXT_CONFIG_DEFAULTS.get(str(text.get("model_type")).lower(), {}), **text}
    return data



def _named(text: str) -> dict[str, Any]:
    """A model's config by name (a built-in or user preset) or from a config.json or its folder. A text that reads
    as a path (a '/', '.json') is read as one, the presets file unread (no preset has such a name); a preset's
    name that also names a config here (a file, or a folder holding config.json) is refused as ambiguous."""
    if _presets.path_problem(text):
        return _read_config(text, _on_disk(text))
    on_disk = _on_disk(text)
    key = _presets.key_of(text)  # (as the presets are keyed: NFKC, stripped, lower case)
    if key in MODELS:  # (built-ins first: an entry of the file under its name is never used, said once)
        _presets.warn_hidden(key, ("models",), "model")
    preset = MODELS[key] if key in MODELS else _user_model(key)
    if preset is not None and on_disk is not None:
        what = "folder" if on_disk.name == "config.json" and os.path.isdir(text) else "file"
        named = "the built-in model preset" if key in MODELS else f"a user model preset in {_presets.presets_path()}"
        raise InputError(f"model {text!r}", f"is both {named} and the {what} {str(Path(text).resolve())!r} here",
                         f"for the {what}, give {os.path.join('.', text)!r}; for the preset, rename or move the "
                         f"{what}, or work in another folder")
    if preset is not None:
        return dict(preset)
    if on_disk is None:
        users, bad = user_models_and_errors()
        raise ValueError(f"model {text!r}: not a preset nor a config.json file. Fix: {_suggest(key, users, bad)}use "
                         f"a preset ({', '.join([*MODELS, *users])}), a path to config.json or its folder, or a dict")
    return _read_config(text, on_disk)


def _on_disk(text: str) -> Path | None:
    """The config file ``text`` names on disk (itself, or the config.json in it when a folder); None if none."""
    try:
        if not os.access(text, os.F_OK):  # (the usual case, a name: nothing there, and no exception raised)
            return None
        folder = stat.S_ISDIR(os.stat(text).st_mode)
    except (OSError, ValueError):  # (gone meanwhile, or a name the system cannot take)
        return None
    path = Path(text) / "config.json" if folder else Path(text)
    return path if path.is_file() else None


def _read_config(text: str, path: Path | None) -> dict[str, Any]:
    """The JSON object of the config file ``path`` (``text`` names it; None: there is none, an error)."""
    if path is None:
        raise ValueError(f"model {text!r}: no config.json file there ({str(Path(text).resolve())!r}). Fix: give the "
                         "path of a Hugging Face config.json or of its folder")
    try:
        data = json.loads(path.read_text(), object_pairs_hook=lambda pairs: _once_each(path, pairs))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"model config {str(path)!r}", f"could not be read: {error}",
                         "pass a valid Hugging Face config.json") from None
    if not isinstance(data, Mapping):
        raise InputError(f"model config {str(path)!r}", f"holds {type(data).__name__}, not a JSON object",
                         "pass a Hugging Face config.json (one JSON object of fields)")
    return dict(data)


def _once_each(path: Path, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a config file, each key once (JSON keeps only the last of a key given twice: refused)."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise InputError(f"model config {str(path)!r}", f"gives the field {key!r} twice ({data[key]!r} and "
                             f"{value!r})", "keep one of them")
        data[key] = value
    return data


def _suggest(key: str, users: dict[str, Any], bad: dict[str, InputError]) -> str:
    """"did you mean ...? " for an unknown model: presets, and user presets with their file (and, for one that
    cannot be used, what is wrong with it)."""
    close = difflib.get_close_matches(key, [*MODELS, *users, *bad], n=3, cutoff=0.5)
    file = _presets.presets_path()
    said = [f"{n} (a user preset in {file}, which cannot be used: {bad[n].problem})" if n in bad else
            f"{n} (a user preset in {file})" if n in users else n for n in close]
    return f"did you mean {', '.join(said)}? " if said else ""


def user_models() -> dict[str, dict[str, Any]]:
    """Model configs saved with :func:`save_model` (or ``perfmodel models --add``), by name.

    A user preset that cannot be used (or a presets file that cannot be read) is left out with a
    ``UserWarning`` naming the file, the entry and what is wrong.

    Returns
    -------
    dict of str to dict
        The usable user model configs, by name (empty when none is saved).

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> from perfmodel.model.models import user_models
    >>> user_models()
    {}
    """
    try:
        users, bad = user_models_and_errors()
    except InputError as error:
        warn(str(error))
        return {}
    _presets.warn_unusable(bad)
    return users


def _model_entry(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A saved model's config, every field checked (and the config's KV fields): errors name the file and entry."""
    if name in MODELS:
        raise _presets.entry_error(name, "models", "is a built-in model's name: rename it")
    _presets.unknown_fields(name, "models", entry, {"config", "source", _presets.SAVED_BY})
    _presets.text_field(name, "models", entry, "source")
    _presets.text_field(name, "models", entry, _presets.SAVED_BY)
    if "config" not in entry:
        raise _presets.entry_error(name, "models", "has no 'config' object")
    config = entry["config"]
    if not isinstance(config, dict):
        raise _presets.entry_error(name, "models", f"'config' is {_presets.json_type(config)}, not an object of "
                                   "a Hugging Face config's fields")
    try:
        kv_terms(config)
    except (ValueError, TypeError) as error:
        raise _presets.entry_error(name, "models", f"its config cannot be used ({str(error).strip()})") from None
    return config


def user_models_and_errors() -> tuple[dict[str, dict[str, Any]], dict[str, InputError]]:
    """The usable user models' configs, and the error of each malformed one (by name); a file that cannot
    be read as presets raises its error."""
    return _presets.parse_each("models", _model_entry)


def _user_model(key: str) -> dict[str, Any] | None:
    """A user model's config by name (None: no such preset), or the error of a malformed entry."""
    users, bad = user_models_and_errors()
    if key in bad:
        raise bad[key]
    return users.get(key)


def save_model(name: str, config: ModelConfig, *, source: str = "", replace: bool = False) -> Path:
    """Save a Hugging Face config (dict, ``config.json`` path or its folder) as a user model preset:
    every entry point then accepts ``name``. The KV-relevant fields are checked first; a name already
    saved (names ignore case) is refused unless ``replace=True``.

    Parameters
    ----------
    name : str
        The preset's name.
    config : ModelConfig
        A Hugging Face config, or the path of a config.json or its folder.
    source : str
        Where it comes from, shown by ``perfmodel models``.
    replace : bool
        Replace a user model of that name.

    Returns
    -------
    pathlib.Path
        The presets file written.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_model("my-llama", {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4})
    >>> kv_bytes("my-llama", 10)
    np.int64(5120)
    """
    data = model_config(config)
    kv_terms(data)  # refuse a config without the fields the KV cache needs
    origin = source or (str(config) if isinstance(config, (str, os.PathLike)) else "a config dict")
    return _presets.save("models", name, {"config": data, "source": origin}, builtin=set(MODELS), replace=replace)


def remove_model(name: str) -> Path:
    """Remove a user model that perfmodel saved (:func:`save_model`, ``perfmodel models --add``); returns the
    presets file. An entry perfmodel did not save (written by hand) is refused and left as it is.

    Parameters
    ----------
    name : str
        The user model's name.

    Returns
    -------
    pathlib.Path
        The presets file the entry was removed from.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_model("my-llama", {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4})
    >>> _ = remove_model("my-llama"); user_models()
    {}
    """
    return _presets.remove("models", name)


def model_source(name: str) -> str:
    """Where a model preset comes from: "built-in", or "user: <source> (<file>)".

    Parameters
    ----------
    name : str
        A model preset's name (built in or yours).

    Returns
    -------
    str
        ``"built-in"`` or ``"user: <source> (<file>)"``.

    Examples
    --------
    >>> model_source("llama-3.1-8b")
    'built-in'
    """
    key = _presets.key_of(name)
    if key in MODELS:
        return "built-in"
    entry = _presets.load("models")[0].get(key, {})
    source = entry.get("source") if isinstance(entry.get("source"), str) else ""
    return f"user: {source or 'saved'} ({_presets.presets_path()})"


@dataclass(frozen=True)
class ModelShape:
    """How a model's KV cache is held and handed off: the KV-cache dtype, the tensor-parallel degrees of the
    prefill and decode groups, whose bytes count (``scope``) and how a block lies in memory
    (``kv_layout``, which sets the messages). Validated once, when made; defaults from the input table.

    >>> ModelShape(tp=8, decode_tp=2).decode_degree
    2
    >>> ModelShape(tp=0)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: tp: 0 is not a whole number >= 1. Fix: pass a whole number >= 1, e.g. tp=1.
    """

    kv_cache_dtype: str | None = INPUTS["kv_cache_dtype"].default
    tp: int = INPUTS["tp"].default
    decode_tp: int | None = INPUTS["decode_tp"].default
    scope: str = INPUTS["scope"].default
    kv_layout: str = INPUTS["kv_layout"].default

    def __post_init__(self) -> None:
        object.__setattr__(self, "tp", check_count("tp", self.tp))
        if self.decode_tp is not None:
            object.__setattr__(self, "decode_tp", check_count("decode_tp", self.decode_tp))
        check_option("scope", self.scope)
        check_option("kv_layout", self.kv_layout)
        kv_dtype_bytes({}, self.kv_cache_dtype)

    @property
    def decode_degree(self) -> int:
        """The decode group's tensor-parallel degree (``decode_tp``, or ``tp`` when not given)."""
        return self.tp if self.decode_tp is None else self.decode_tp

    @property
    def shapes_bytes(self) -> bool:
        """Whether bytes per token depend on this shape (so they must come from a model, not a number)."""
        return (self.kv_cache_dtype is not None or self.tp != 1 or self.scope != "rank"
                or self.decode_tp not in (None, self.tp))

    def bytes_options(self) -> dict[str, Any]:
        """The keywords of :func:`kv_terms` (and :func:`kv_bytes`, :func:`kv_bytes_per_token`) for this shape."""
        return dict(kv_cache_dtype=self.kv_cache_dtype, tp=self.tp, scope=self.scope, decode_tp=self.decode_tp)


def kv_bytes_per_token(
    config: ModelConfig, *, kv_cache_dtype: str | None = None, tp: int = 1, scope: str = "rank",
    decode_tp: int | None = None,
) -> int:
    """KV-cache bytes one token occupies on one GPU (``scope="rank"``), or on all the GPUs of the
    tensor-parallel group together (``scope="group"``: what the group sends over the network).

    - GQA/MHA: ``2 * layers * ceil(kv_heads / tp) * head_dim * dtype_bytes`` (keys and
      values), with the config's explicit ``head_dim`` when it has one, else
      ``hidden_size // num_attention_heads``; ``num_key_value_heads`` defaults to
      ``num_attention_heads`` (``multi_query`` configs have one KV head; Falcon's ``num_kv_heads`` are read
      as transformers' ``FalconAttention`` reads them; ChatGLM/GLM-4: ``multi_query_group_num`` KV heads
      with ``multi_query_attention``, heads of ``kv_channels`` values).
    - MLA (``kv_lora_rank`` in the config: DeepSeek-V2/V3/R1, Kimi-K2): one latent of
      ``kv_lora_rank + qk_rope_head_dim`` per layer, no factor 2, replicated on every
      tensor-parallel rank (``tp`` does not divide it).

    Only for models whose every layer keeps every token: a model with sliding-window,
    chunked or linear-attention layers has no constant bytes per token, and asking for one
    raises (use :func:`kv_bytes` for its bytes per request, or :func:`kv_terms`).

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
    decode_tp
        The decode side's tensor-parallel degree ``d`` (default: ``tp``, written ``p``).
        Each decode rank receives the ``max(ceil(kv_heads / d), 1)`` KV heads it serves (an
        MLA latent whole), so the group moves ``G = d *`` one decode rank's bytes;
        ``scope="group"`` gives ``G``, ``scope="rank"`` the busiest rank's share,
        ``ceil(G / min(p, d))``. With ``d = p`` these are the values above.

    Returns
    -------
    int
        Bytes per token (per GPU, or per TP group with ``scope="group"``).

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
    >>> kv_bytes_per_token("llama-3.1-70b", tp=8, decode_tp=2)  # each decode rank receives 4 of 8 KV heads
    163840
    """
    terms = kv_terms(config, kv_cache_dtype=kv_cache_dtype, tp=tp, scope=scope, decode_tp=decode_tp)
    if not terms.proportional:
        raise ValueError(
            f"model {_name_of(config)!r} {terms.describe()}, so its KV bytes are not proportional to the prompt "
            "and it has no constant bytes per token. Fix: use perfmodel.kv_bytes(model, num_input_tokens) for the "
            "bytes of each request, or pass the model itself (by name or config) wherever bytes per token are "
            "accepted")
    return terms.full_bytes_per_token


@dataclass(frozen=True)
class KVTerms:
    """What a model's KV cache holds for a prompt, as the terms of the bytes a handoff moves.

    A request with a prompt of ``n`` tokens, of which ``m`` are charged (``m = n`` for a
    full-prompt handoff; the missing tail for ``destination_missing``), moves::

        full_bytes_per_token * m
        + window_bytes_per_token * min(m, window_tokens)
        + chunk_bytes_per_token * min(m, c(n))
        + state_bytes                                   (also when m = 0)

    where ``c(n) = ((n - 1) mod chunk_tokens) + 1`` is the number of tokens in the
    prompt's current chunk (0 for ``n = 0``). The window and the current chunk are the
    prompt's last tokens, so they are what a destination that lacks the tail lacks first.
    Byte counts are per GPU, or per tensor-parallel group (``scope="group"``).

    Layer types and where they come from:

    - full attention (every token): ``full_attention`` layers, and every layer of a model
      without any of the patterns below;
    - sliding window (the last ``window_tokens`` tokens): ``sliding_attention`` layers,
      or ``sliding_window`` with ``sliding_window_pattern`` (Gemma 3, Cohere 2: every
      pattern-th layer global; without a pattern, transformers' default: Gemma 2 2, Gemma 3 6,
      Cohere 2 4), Gemma 2 (every other layer), ``max_window_layers``
      (Qwen2: layers from that index on) or else on every layer (Mistral 7B v0.1);
      ``use_sliding_window: false`` turns it off;
    - chunked attention (the current ``chunk_tokens`` chunk): ``chunked_attention``
      layers, or ``attention_chunk_size`` on the RoPE layers of Llama 4 (``no_rope_layers``,
      or every ``no_rope_layer_interval``-th layer, default 4, global);
    - a fixed state per request, whatever the prompt: linear attention (Gated DeltaNet,
      Qwen3-Next; MiniMax's lightning attention), Mamba-2 (Nemotron-H, Zamba 2, Bamba, and
      Falcon-H1's mixer beside the attention in every layer) and Mamba v1 (Jamba) layers, each
      state from the config's own fields (:ref:`layer-mix`) in the model's dtype (the recurrent
      part in ``mamba_ssm_dtype`` where given). ``kv_cache_dtype`` does not apply to states
      (serving engines keep them in the model's dtype); pass ``state_bytes`` to override;
    - nothing per prompt token: Mllama's ``cross_attention_layers`` (they keep the image's KV).

    Parameters
    ----------
    full_bytes_per_token : int
        Bytes per charged token of the full-attention layers.
    window_bytes_per_token, window_tokens : int
        Bytes per token of the sliding-window layers, and their window (tokens).
    chunk_bytes_per_token, chunk_tokens : int
        Bytes per token of the chunked-attention layers, and their chunk (tokens).
    state_bytes : int
        Bytes of the fixed state of the linear-attention and SSM layers, per request.
    full_layers, window_layers, chunk_layers, state_layers, layers : int
        How many layers of each kind the model has, and in all (0: the four counts' sum; Falcon-H1's count twice).
    kv_tensors : int
        Tensors a layer keeps per token: 2, keys and values (1: an MLA latent).

    Examples
    --------
    >>> from perfmodel import kv_terms
    >>> terms = kv_terms("gpt-oss-20b")
    >>> terms.full_bytes_per_token, terms.window_bytes_per_token, terms.window_tokens
    (24576, 24576, 128)
    >>> terms.bytes(32_768)  # bytes of a 32k-token prompt: about half of 24 full layers' 1.6 GB
    np.int64(808452096)
    """

    full_bytes_per_token: int
    window_bytes_per_token: int = 0
    window_tokens: int = 0
    chunk_bytes_per_token: int = 0
    chunk_tokens: int = 0
    state_bytes: int = 0
    full_layers: int = 0
    window_layers: int = 0
    chunk_layers: int = 0
    state_layers: int = 0
    kv_tensors: int = 2  # tensors a layer keeps per token: keys and values (1: an MLA latent)
    layers: int = 0

    @property
    def proportional(self) -> bool:
        """Whether the bytes are ``full_bytes_per_token`` times the charged tokens (upstream's model)."""
        return self.window_bytes_per_token == 0 and self.chunk_bytes_per_token == 0 and self.state_bytes == 0

    @property
    def byte_terms(self) -> Any:
        """The byte terms as the kernel's record, :class:`perfmodel.kernels.handoff.ByteTerms` (its field order).

        >>> KVTerms(1000, window_bytes_per_token=10, window_tokens=128).byte_terms
        ByteTerms(full=1000, window=10, chunk=0, state=0, window_tokens=128, chunk_tokens=0)
        """
        from ..kernels.handoff import ByteTerms

        return ByteTerms(self.full_bytes_per_token, self.window_bytes_per_token, self.chunk_bytes_per_token,
                         self.state_bytes, self.window_tokens, self.chunk_tokens)

    def describe(self) -> str:
        """The layer mix in words (e.g. ``'keeps a 128-token window in 12 of its 24 layers'``)."""
        total = self.layers or (self.full_layers + self.window_layers + self.chunk_layers + self.state_layers)
        parts = []
        if self.window_layers:
            parts.append(f"a {self.window_tokens}-token window in {self.window_layers}")
        if self.chunk_layers:
            parts.append(f"only the current {self.chunk_tokens}-token chunk in {self.chunk_layers}")
        if self.state_layers:
            parts.append(f"a fixed state ({self.state_bytes:,} bytes) in {self.state_layers}")
        if parts or self.full_layers != total:
            return f"keeps {' and '.join(parts) or f'every token in {self.full_layers}'} of its {total} layers"
        return f"keeps every token in {total} layers"

    def bytes(self, num_input_tokens: ArrayLike, charged_tokens: ArrayLike | None = None,
              ) -> np.int64 | NDArray[np.int64]:
        """Bytes moved for prompts of ``num_input_tokens`` tokens of which ``charged_tokens`` (default:
        all) are sent; inputs broadcast, scalars in give a numpy scalar out (see :func:`kv_bytes`)."""
        scalar, n, m = _prompts(num_input_tokens, charged_tokens)
        largest = int(max(m.max(initial=0), 0))
        per_token = self.full_bytes_per_token + self.window_bytes_per_token + self.chunk_bytes_per_token
        if largest * per_token + self.state_bytes >= 2**62:
            raise InputError("num_input_tokens", f"{largest} tokens overflow the 64-bit byte count",
                             "pass realistic token counts")
        total = _kv_bytes_of(self.byte_terms, n, m)
        return total.reshape(-1)[0] if scalar else total.reshape(-1)


    def messages(self, num_input_tokens: ArrayLike, block_size: int, *, charged_tokens: ArrayLike | None = None,
                 kv_layout: str = "layer_kv", blocks_per_message: float = 1) -> np.int64 | NDArray[np.int64]:
        """Messages (transfer descriptors) one rank posts to move ``charged_tokens`` (default: all) of
        prompts of ``num_input_tokens`` in blocks of ``block_size`` tokens; see :func:`kv_messages`."""
        check_option("kv_layout", kv_layout)
        block = check_whole("block_size", block_size, smallest=1)
        merged = _blocks_per_message(blocks_per_message)
        scalar, n, m = _prompts(num_input_tokens, charged_tokens)
        total = np.asarray(prompt_messages(n, m, block, *self.message_factors(kv_layout), self.window_tokens,
                                           self.chunk_tokens, merged), dtype=np.int64)
        return total.reshape(-1)[0] if scalar else total.reshape(-1)

    def message_factors(self, kv_layout: str) -> tuple[int, int, int, int]:
        """Messages per block of the full-attention, window and chunked layers together, and of the
        states per transfer, in ``kv_layout`` (the kernel's terms)."""
        if kv_layout == "block":  # a block holds every layer that keeps it: the longest-kept layer's blocks
            if self.full_layers or not (self.window_layers and self.chunk_layers):
                return int(self.full_layers > 0), int(self.window_layers > 0 and not self.full_layers), \
                    int(self.chunk_layers > 0 and not self.full_layers), 0
            return 0, 1, 1, -1  # windows and chunks, no full attention: -1 asks for the longer of the two
        per_layer = self.kv_tensors if kv_layout == "layer_kv" else 1
        return (self.full_layers * per_layer, self.window_layers * per_layer, self.chunk_layers * per_layer,
                self.state_layers)


def _prompts(num_input_tokens: ArrayLike, charged_tokens: ArrayLike | None) -> tuple[bool, np.ndarray, np.ndarray]:
    """(whether both are scalars, prompt lengths, charged tokens: default all) as whole int64 numbers, broadcast."""
    scalar = np.ndim(num_input_tokens) == 0 and (charged_tokens is None or np.ndim(charged_tokens) == 0)
    one_index({"num_input_tokens": num_input_tokens, "charged_tokens": charged_tokens})
    n = whole_numbers("num_input_tokens", num_input_tokens, 0, coerce_hint="")
    m = n if charged_tokens is None else whole_numbers("charged_tokens", charged_tokens, 0, coerce_hint="")
    try:
        n, m = np.broadcast_arrays(n, m)
    except ValueError:
        raise InputError("charged_tokens", f"{count(m.size, 'value')} for {count(n.size, 'prompt')}",
                         "pass one charged count per prompt, or one for all") from None
    return scalar, n, m


def _blocks_per_message(value: Any) -> float:
    """``blocks_per_message`` checked: a whole number >= 1, or inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not (
            value == math.inf or (value >= 1 and float(value).is_integer())):
        raise InputError("blocks_per_message", f"{shown(value)} is not a whole number >= 1 or inf",
                         "pass the blocks merged into one message (1: one per block; inf: one per layer)")
    return float(value)


def prompt_messages(num_input_tokens: Any, charged_tokens: Any, block_size: Any, full_messages: Any,
                    window_messages: Any, chunk_messages: Any, state_messages: Any, window_tokens: Any,
                    chunk_tokens: Any, blocks_per_message: float = 1.0) -> Any:
    """Messages of one rank's handoff on numpy arrays (broadcast, int64): each layer's charged
    tokens in blocks (a window or chunk layer's at most its window or current chunk), merged
    ``blocks_per_message`` to a message (``ceil(blocks / blocks_per_message)``, one for ``inf``), times
    the messages per block of those layers, plus the states' messages: the kernel's
    :func:`perfmodel.kernels.handoff.messages_of`, element by element."""
    from ..kernels import handoff as _kernels

    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (
        charged_tokens, num_input_tokens, block_size, full_messages, window_messages, chunk_messages,
        state_messages, window_tokens, chunk_tokens)))
    flat = [np.array(a).reshape(-1) for a in arrays]  # (copies: broadcast views are read-only)
    counted = _kernels.messages_each(*flat, np.float64(blocks_per_message))
    return counted.astype(np.int64).reshape(arrays[0].shape)


def prompt_bytes(num_input_tokens: Any, charged_tokens: Any, full_bytes_per_token: Any, window_bytes_per_token: Any,
                 window_tokens: Any, chunk_bytes_per_token: Any, chunk_tokens: Any, state_bytes: Any) -> Any:
    """The :class:`KVTerms` formula on numpy arrays (broadcast; int64 in, int64 out, exactly): bytes
    moved for ``charged_tokens`` of prompts of ``num_input_tokens``: the kernel's
    :func:`perfmodel.kernels.handoff.kv_bytes`, element by element (in integers)."""
    from ..kernels.handoff import ByteTerms

    terms = ByteTerms(full_bytes_per_token, window_bytes_per_token, chunk_bytes_per_token, state_bytes, window_tokens,
                      chunk_tokens)
    return _kv_bytes_of(terms, num_input_tokens, charged_tokens)


def _kv_bytes_of(terms: Any, num_input_tokens: Any, charged_tokens: Any) -> np.ndarray:
    """:func:`perfmodel.kernels.handoff.kv_bytes` of a :class:`~perfmodel.kernels.handoff.ByteTerms` (numbers or arrays) for
    ``charged_tokens`` of prompts of ``num_input_tokens``, broadcast, in int64 exactly."""
    from ..kernels import handoff as _kernels

    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in (*terms, charged_tokens, num_input_tokens)))
    flat = [np.array(a).reshape(-1) for a in arrays]  # (copies: broadcast views are read-only)
    out = np.empty(flat[0].size, dtype=np.int64)
    _kernels.kv_bytes_each(*flat, out)
    return out.reshape(arrays[0].shape)


@documented(extra={"config": "A model preset name, a Hugging Face config dict, or a ``config.json`` (or its folder)."})
def kv_terms(
    config: ModelConfig, *, kv_cache_dtype: str | None = None, tp: int = 1, scope: str = "rank",
    decode_tp: int | None = None,
) -> KVTerms:
    """A model's KV-cache terms: bytes per token of its full-attention, sliding-window and
    chunked-attention layers, window and chunk lengths, and the fixed state of its
    linear-attention/SSM layers (see :class:`KVTerms` for the formula and the layer types).

    Parameters
    ----------
    @inputs

    Returns
    -------
    KVTerms
        The terms, each in bytes per token, tokens or bytes as its field says.

    Examples
    --------
    >>> from perfmodel import kv_terms
    >>> kv_terms("llama-3.1-8b").proportional
    True
    >>> kv_terms("gemma-3-27b").describe()
    'keeps a 1024-token window in 52 of its 62 layers'
    >>> kv_terms("qwen3-next-80b-a3b").state_bytes  # 36 Gated DeltaNet layers, bf16
    39518208
    """
    shape = ModelShape(kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp, scope=scope)
    tp, decode_tp, group = shape.tp, shape.decode_degree, shape.scope == "group"

    def moved(one_decode_rank: int) -> int:
        """Bytes of the group (decode_tp receivers, each its own heads), or of its busiest rank."""
        whole = decode_tp * one_decode_rank
        return whole if group else -(-whole // min(tp, decode_tp))

    cfg = model_config(config)
    try:
        kinds = layer_kinds(cfg)
        per_layer = layer_bytes(cfg, kv_cache_dtype, decode_tp)
        count = {kind: kinds.count(kind) for kind in ("full", "window", "chunk")}
        state, state_layers = state_bytes(cfg, kinds, decode_tp)
        window = _field(cfg, ("sliding_window",)) if count["window"] else 0
        chunk = _field(cfg, ("attention_chunk_size",)) if count["chunk"] else 0
    except InputError as error:  # say which model's config
        if not error.where.startswith("model config"):
            raise
        raise error.relocated(f"{error.where} of {_name_of(config)}", error.row) from None
    return KVTerms(
        full_bytes_per_token=moved(per_layer * count["full"]),
        window_bytes_per_token=moved(per_layer * count["window"]),
        window_tokens=window,
        chunk_bytes_per_token=moved(per_layer * count["chunk"]),
        chunk_tokens=chunk,
        state_bytes=moved(state), full_layers=count["full"], window_layers=count["window"],
        chunk_layers=count["chunk"], state_layers=state_layers, kv_tensors=1 if cfg.get("kv_lora_rank") else 2,
        layers=len(kinds),
    )


def kv_bytes(
    config: ModelConfig, num_input_tokens: ArrayLike, *, charged_tokens: ArrayLike | None = None,
    kv_cache_dtype: str | None = None, tp: int = 1, scope: str = "rank", decode_tp: int | None = None,
) -> np.int64 | NDArray[np.int64]:
    """KV-cache bytes a handoff moves for each prompt (any model, including sliding-window,
    chunked-attention and hybrid ones; see :class:`KVTerms` for the formula).

    Parameters
    ----------
    config
        A model preset name, config dict, or path to ``config.json`` or its folder.
    num_input_tokens
        Prompt lengths (whole numbers >= 0); broadcast with ``charged_tokens``.
    charged_tokens
        Tokens sent of each prompt (default: all of them): for ``destination_missing``
        handoffs, the block-rounded missing tail (:func:`perfmodel.destination_missing_tokens`).
    kv_cache_dtype, tp, scope, decode_tp
        As for :func:`kv_bytes_per_token`.

    Returns
    -------
    numpy.int64 or numpy.ndarray
        Bytes per request (int64): a scalar for scalar inputs.

    Examples
    --------
    >>> from perfmodel import kv_bytes
    >>> kv_bytes("llama-3.1-8b", [1024, 32_768])  # every layer keeps every token
    array([ 134217728, 4294967296])
    >>> kv_bytes("gemma-3-27b", [1024, 32_768])  # 52 of 62 layers keep 1024 tokens at most
    array([ 520093696, 3120562176])
    >>> kv_bytes("gemma-3-27b", 32_768, charged_tokens=512)  # only the missing tail is sent
    np.int64(260046848)
    """
    return kv_terms(config, kv_cache_dtype=kv_cache_dtype, tp=tp, scope=scope, decode_tp=decode_tp).bytes(
        num_input_tokens, charged_tokens)


def kv_messages(
    config: ModelConfig, num_input_tokens: ArrayLike, block_size: int, *, charged_tokens: ArrayLike | None = None,
    kv_layout: str = "layer_kv", blocks_per_message: float = 1,
) -> np.int64 | NDArray[np.int64]:
    """Messages (transfer descriptors: contiguous regions of the KV cache) one rank posts to hand
    off each prompt, the count a link's ``per_message_ms`` is paid for.

    In the layer layouts every layer's charged tokens go in blocks of ``block_size``: a
    sliding-window or chunked layer's at most its window or current chunk, a linear-attention
    or SSM layer's state as one message. ``"layer_kv"`` posts one message per block, layer
    and K or V (one per block and layer for an MLA latent), ``"layer"`` one per block and
    layer, ``"block"`` (every layer of a block contiguous) one per block of the charged
    tokens. Ranks post theirs in parallel, so tensor parallelism does not change the count.

    Parameters
    ----------
    config
        A model preset name, config dict, or path to ``config.json`` or its folder.
    num_input_tokens
        Prompt lengths (whole numbers >= 0); broadcast with ``charged_tokens``.
    block_size
        KV block size in tokens (whole number >= 1).
    charged_tokens
        Tokens sent of each prompt (default: all of them).
    kv_layout
        ``"layer_kv"`` (default), ``"layer"`` or ``"block"``.
    blocks_per_message
        Consecutive blocks merged into one message (region): each layer's (or, for ``"block"``,
        the request's) blocks make ``ceil(blocks / blocks_per_message)`` messages; 1 (default):
        one per block; ``inf``: one per layer and K/V.

    Returns
    -------
    numpy.int64 or numpy.ndarray
        Messages per request (int64): a scalar for scalar inputs.

    Examples
    --------
    >>> from perfmodel import kv_messages
    >>> [int(kv_messages("llama-3.1-8b", 7500, 16, kv_layout=layout)) for layout in ("layer_kv", "layer", "block")]
    [30016, 15008, 469]
    >>> kv_messages("gemma-3-27b", [512, 32_768], 16)  # 52 layers keep a 1024-token window: 64 blocks each
    array([ 3968, 47616])
    >>> [int(kv_messages("llama-3.1-8b", 7500, 16, blocks_per_message=b)) for b in (float("inf"), 4)]
    [64, 7552]
    """
    return kv_terms(config).messages(num_input_tokens, block_size, charged_tokens=charged_tokens, kv_layout=kv_layout,
                                     blocks_per_message=blocks_per_message)


def layer_count(config: ModelConfig) -> int:
    """The number of transformer layers of a model (name, config or path).

    Parameters
    ----------
    config : ModelConfig
        A Hugging Face config (a mapping).

    Returns
    -------
    int
        The number of layers.

    Examples
    --------
    >>> layer_count("llama-3.1-70b")
    80
    """
    return _field(model_config(config), LAYERS, largest=MOST_LAYERS)


def _name_of(config: ModelConfig) -> str:
    if isinstance(config, Mapping):
        return str(config.get("_name_or_path") or config.get("model_type") or "config")
    return str(config)


