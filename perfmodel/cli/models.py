"""``perfmodel models``: the model presets, their layer mix and KV bytes per token (``--add``: your own).
"""

from __future__ import annotations

import argparse
from typing import Any

from ._parsing import UsageError, one_line_warnings, table_options


def cmd_models(args: argparse.Namespace) -> int:
    with one_line_warnings("models"):  # a user preset that cannot be used: one line, and the others listed
        return _models(args)


def _models(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..inputs.words import count
    from ..model.layers import attention_heads
    from ..model.models import MODELS, ModelShape, kv_bytes, kv_terms, model_config, model_source, user_models

    if args.replace and not args.add:
        raise UsageError("--replace replaces a user model saved under --add's NAME. Fix: give --add NAME CONFIG")
    shaping = [f"--{k.replace('_', '-')}" for k in ("tp", "decode_tp", "kv_cache_dtype") if getattr(args, k) is not None]
    if args.add and shaping:
        raise UsageError(f"{', '.join(shaping)} {'goes' if len(shaping) == 1 else 'go'} with the listing (its columns "
                         "of a prefill group handing off), not with --add, which saves the config as it is. Fix: "
                         f"drop {' '.join(shaping)}, or run perfmodel models {' '.join(shaping)} apart")
    if args.kv_cache_dtype is not None and args.tp is None and args.decode_tp is None:
        raise UsageError("--kv-cache-dtype is the dtype of the --tp/--decode-tp columns, which are not asked for. Fix: "
                         "add --tp N --decode-tp M (the listing shows fp8 bytes already in its '@32k fp8' column)")
    if args.add:
        return _add(*args.add, replace=args.replace)
    users = user_models()
    rows = []
    shaped = args.tp is not None or args.decode_tp is not None
    shape = ModelShape(kv_cache_dtype=args.kv_cache_dtype, tp=args.tp or 1, decode_tp=args.decode_tp)
    tp, decode_tp = shape.tp, shape.decode_degree
    label = f"tp{tp}->tp{decode_tp}" + (f" {args.kv_cache_dtype}" if args.kv_cache_dtype else "")

    def pair(config: Any) -> dict[str, float]:
        """The bytes per token of a prefill-to-decode pair: the busiest rank's and the group's."""
        if not shaped:
            return {}
        shape = dict(kv_cache_dtype=args.kv_cache_dtype, tp=tp, decode_tp=decode_tp)
        return {f"{label} rank B/token": int(kv_bytes(config, 1, **shape)),
                f"{label} group B/token": int(kv_bytes(config, 1, **shape, scope="group"))}

    for name, config in {**MODELS, **users}.items():  # (by config: a folder here named like a preset hides nothing)
        cfg = model_config(config)
        terms = kv_terms(config)
        mla = cfg.get("kv_lora_rank") is not None
        mix = [f"{count} {kind}" for count, kind in (
            (terms.full_layers, "full"), (terms.window_layers, f"window {terms.window_tokens}"),
            (terms.chunk_layers, f"chunk {terms.chunk_tokens}"), (terms.state_layers, "state")) if count]
        rows.append({
            "model": name,
            "attention": "MLA" if mla else "GQA",
            "layers": " + ".join(mix),
            "kv_heads": "-" if mla or terms.full_layers + terms.window_layers + terms.chunk_layers == 0
                        else attention_heads(cfg)[1],  # (the heads the bytes use: Falcon's, GLM's, multi-query)
            "bytes/token": terms.full_bytes_per_token + terms.window_bytes_per_token + terms.chunk_bytes_per_token,
            "MB @1k": kv_bytes(config, 1024) / 1e6,
            "MB @32k": kv_bytes(config, 32_768) / 1e6,
            "@32k fp8": kv_bytes(config, 32_768, kv_cache_dtype="fp8") / 1e6,
            "@32k fp8 tp8 group": kv_bytes(config, 32_768, kv_cache_dtype="fp8", tp=8, scope="group") / 1e6,
            **pair(config),
            "source": "built-in" if name in MODELS else "user",
        })
    with pd.option_context("display.float_format", "{:,.1f}".format, "display.width", 200):
        print(pd.DataFrame(rows).to_string(index=False))
    if users:
        print("\nUser presets:\n" + "\n".join(f"  {name}: {_origin(name, model_source(name))}" for name in users))
    print("\nbytes/token: what one token costs in every layer that keeps it; window and chunk layers keep at most their"
          "\nlast W tokens or the current chunk, state layers a fixed state per request. MB @1k and @32k: the bytes a"
          "\nhandoff of 1,024 and 32,768 tokens moves (one GPU's, bf16 unless noted)."
          "\ngroup: what all 8 ranks of a TP8 prefill group send (replicated KV heads and MLA latents count per rank)."
          + (f"\n{label}: bytes of one token (with its state) from a prefill group of {count(tp, 'rank')} to a decode "
             f"group of {count(decode_tp, 'rank')}: each decode rank receives the KV heads it serves; rank = the busiest rank's share."
             if shaped else "\nA prefill-to-decode pair with other TP degrees: perfmodel models --tp 8 --decode-tp 2")
          + "\nAdd your own: perfmodel models --add NAME path/to/config.json; list, show or remove yours: "
            "perfmodel presets")
    return 0


def _origin(name: str, source: str) -> str:
    """Where a user model comes from, as ``model_source`` says it (``user: <source> (<file>)``); one written by
    hand with no source is said to be so (never "saved")."""
    from ..inputs import user_presets as _presets

    entry = _presets.load("models")[0].get(name, {})
    if not entry.get("source") and entry.get(_presets.SAVED_BY) != "perfmodel":
        return f"written by hand ({_presets.presets_path()})"
    return source.partition(": ")[2]


def _add(name: str, config: str, *, replace: bool) -> int:
    """``--add NAME CONFIG``: the config checked first (its errors name the file), saved with its full path."""
    import shlex
    from pathlib import Path

    from ..errors import InputError
    from ..inputs.user_presets import check_free, key_of
    from ..model.models import MODELS, kv_bytes, kv_terms, model_config, save_model

    check_free("models", name, builtin=set(MODELS), replace=replace)  # (the name and the presets file first)
    path = Path(config).expanduser()
    config = str(path.resolve()) if path.exists() else config  # (a path given is read as that path, never a preset's name)
    is_path = path.exists() or key_of(config) not in MODELS  # (a preset's name copies that preset)
    if is_path and not path.exists():
        try:
            model_config(config)  # (a user preset of that name copies it too)
        except ValueError:
            raise UsageError(f"--add CONFIG {config!r}: file not found. Fix: give the path of a Hugging Face "
                             "config.json or of its folder") from None
    try:
        kv_terms(model_config(config))
    except InputError as error:  # (the config's own fields: named with the file, never a flag it did not give)
        where = error.where.removeprefix("model config").strip()  # (kv_terms adds " of <the config's name>")
        where = where.partition(" of ")[0] if where.startswith("field ") else "" if where.startswith("of ") else where
        field = where.removeprefix("field ").strip("'")
        fix = f'correct {field} in the config (e.g. "bfloat16")' if field in ("torch_dtype", "dtype") else error.fix
        raise UsageError(f"model config {config!r}: {where + ': ' if where else ''}{error.problem}. Fix: {fix}") from None
    source = str(path.resolve()) if path.exists() else config
    saved = save_model(name, config, source=source, replace=replace)
    key = key_of(name)  # (names ignore case: the preset is kept in lower case)
    spelled = "" if key == name else f"; names ignore case: {name!r} is kept as {key!r}"
    print(f"saved model {key!r} ({kv_terms(key).describe()}; {kv_bytes(key, 32_768) / 1e6:,.1f} MB at 32k "
          f"tokens{spelled}) to {saved}; use --model {shlex.quote(key)}")
    return 0


def register(sub: Any) -> None:
    """Add ``perfmodel models`` to the subcommands ``sub``."""
    models = sub.add_parser("models", help="the model presets and their KV bytes per token (--add: your own)",
                            description="List the model presets and yours: attention kind, layers, KV heads, "
                                        "head size and KV-cache bytes per token (one GPU's, TP1, bf16). --tp and "
                                        "--decode-tp add the bytes of a prefill group handing off to a decode "
                                        "group; --add saves a Hugging Face config.json as a preset.")
    models.add_argument("--add", nargs=2, metavar=("NAME", "CONFIG"),
                        help="save a Hugging Face config.json (or its folder) as a model preset NAME")
    models.add_argument("--replace", action="store_true",
                        help="with --add: replace a user model of that NAME (a taken name is refused otherwise)")
    table_options(models, ("tp", "decode_tp", "kv_cache_dtype"), many=False,
                   tp="with --decode-tp: show the bytes of a prefill group of TP ranks handing off",
                   decode_tp="to a decode group of DECODE_TP ranks",
                   kv_cache_dtype="for the --tp/--decode-tp columns (default: the model's)")
    models.set_defaults(run=cmd_models)

