"""Configs of hybrid, SSM, cross-attention and GLM models under a hostile tester: every layer mix a config gives is
read as its configuration class defines it (transformers' ``configuration_*.py``), or refused naming the field;
never read as every layer being full attention. Bytes are worked out by hand in the comments."""

from __future__ import annotations

import json

import pytest

import perfmodel as pm
from perfmodel import InputError, kv_bytes_per_token, kv_terms
from perfmodel.cli import main
from perfmodel.model.layers import attention_heads, layer_kinds
from perfmodel.model.models import save_model

# --- 1. hybrid and SSM layer mixes -------------------------------------------------------------------------------

#: ai21labs/Jamba-v0.1 (JambaConfig): attention where i % attn_layer_period == attn_layer_offset, Mamba elsewhere.
JAMBA = {
    "model_type": "jamba",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attn_layer_period": 8,
    "attn_layer_offset": 4,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "sliding_window": None,
    "torch_dtype": "bfloat16",
}
#: One Mamba (v1) layer: 8192 channels (2 * 4096), a conv state of d_conv - 1 = 3 and an SSM state of 16, bf16.
JAMBA_LAYER_STATE = (8192 * 3 + 8192 * 16) * 2  # 311,296

#: ibm-ai-platform/Bamba-9B (BambaConfig): attention at attn_layer_indices, Mamba-2 elsewhere.
BAMBA = {
    "model_type": "bamba",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attn_layer_indices": [9, 18, 27],
    "mamba_n_heads": 128,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 128,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "torch_dtype": "bfloat16",
}
BAMBA_LAYER_STATE = ((128 * 64 + 2 * 1 * 128) * 3 + 128 * 64 * 128) * 2  # 2,147,840

#: MiniMaxAI/MiniMax-Text-01 (remote code): attn_type_list, 1 = softmax attention, 0 = lightning attention.
MINIMAX = {
    "model_type": "minimax_text_01",
    "num_hidden_layers": 80,
    "hidden_size": 6144,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "attn_type_list": ([0] * 7 + [1]) * 10,
    "torch_dtype": "bfloat16",
}
#: One lightning-attention layer's state: a head_dim x head_dim matrix per head, in the model's dtype.
MINIMAX_LAYER_STATE = 64 * 128 * 128 * 2  # 2,097,152

#: tiiuae/Falcon-H1 shape (FalconH1Config): every layer runs attention and a Mamba-2 mixer side by side.
FALCON_H1 = {
    "model_type": "falcon_h1",
    "num_hidden_layers": 36,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "mamba_d_ssm": 1536,
    "mamba_n_heads": 24,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 128,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "torch_dtype": "bfloat16",
}
FALCON_H1_LAYER_STATE = ((24 * 64 + 2 * 128) * 3 + 24 * 64 * 128) * 2  # 403,968

#: Zyphra/Zamba2-2.7B shape (Zamba2Config's default layers_block_type): "hybrid" = the shared attention block and a
#: Mamba-2 layer, "mamba" = a Mamba-2 layer; the attention's head is 2 * hidden_size / heads (160), not kv_channels.
ZAMBA2_BLOCKS = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + ["hybrid"]
ZAMBA2_BLOCKS += ["mamba"] * 2
ZAMBA2 = {
    "model_type": "zamba2",
    "num_hidden_layers": 54,
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "kv_channels": 80,  # Zamba2Config saves hidden_size // heads here; the attention does not use it
    "layers_block_type": ZAMBA2_BLOCKS,
    "mamba_d_state": 64,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_ngroups": 1,
    "n_mamba_heads": 80,
    "mamba_headdim": 64,
    "torch_dtype": "bfloat16",
}
ZAMBA2_LAYER_STATE = ((80 * 64 + 2 * 1 * 64) * 3 + 80 * 64 * 64) * 2  # 686,848

#: meta-llama/Llama-3.2-11B-Vision (MllamaConfig): 40 text layers, 8 of them cross-attention to the image.
MLLAMA = {
    "model_type": "mllama",
    "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "mllama_text_model",
        "num_hidden_layers": 40,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
    },
    "vision_config": {"model_type": "mllama_vision_model", "num_hidden_layers": 32},
}


def test_jamba_keeps_kv_in_its_4_attention_layers_and_a_mamba_state_in_the_other_28():
    kinds = layer_kinds(JAMBA)
    assert [i for i, kind in enumerate(kinds) if kind == "full"] == [4, 12, 20, 28]
    terms = kv_terms(JAMBA)
    assert terms.full_bytes_per_token == 2 * 4 * 8 * 128 * 2 == 16_384  # not 131,072
    assert (terms.full_layers, terms.state_layers) == (4, 28)
    assert terms.state_bytes == 28 * JAMBA_LAYER_STATE == 8_716_288
    assert kv_terms(JAMBA, tp=2).state_bytes == 28 * (4096 * 3 + 4096 * 16) * 2  # channels split over ranks


def test_bamba_reads_attn_layer_indices():
    terms = kv_terms(BAMBA)
    assert terms.full_bytes_per_token == 2 * 3 * 8 * 128 * 2 == 12_288
    assert (terms.full_layers, terms.state_layers) == (3, 29)
    assert terms.state_bytes == 29 * BAMBA_LAYER_STATE


def test_minimax_reads_attn_type_list_and_the_lightning_state():
    terms = kv_terms(MINIMAX)
    assert terms.full_bytes_per_token == 2 * 10 * 8 * 128 * 2 == 40_960
    assert (terms.full_layers, terms.state_layers) == (10, 70)
    assert terms.state_bytes == 70 * MINIMAX_LAYER_STATE
    assert kv_terms(MINIMAX, tp=8).state_bytes == 70 * 8 * 128 * 128 * 2  # 64 heads on 8 ranks
    # transformers' own MiniMaxConfig gives the same mix as layer_types: its linear attention is lightning attention
    hf = {k: v for k, v in MINIMAX.items() if k != "attn_type_list"} | {
        "model_type": "minimax",
        "layer_types": ["linear_attention" if t == 0 else "full_attention" for t in MINIMAX["attn_type_list"]],
    }
    assert kv_terms(hf) == terms
    all_softmax = {**MINIMAX, "attn_type_list": [1] * 80}  # MiniMax-M2: every layer softmax attention
    assert kv_bytes_per_token(all_softmax) == 2 * 80 * 8 * 128 * 2


def test_falcon_h1_has_kv_and_a_mamba_state_in_every_layer():
    terms = kv_terms(FALCON_H1)
    assert terms.full_bytes_per_token == 2 * 36 * 2 * 64 * 2 == 18_432
    assert (terms.full_layers, terms.state_layers) == (36, 36)
    assert terms.state_bytes == 36 * FALCON_H1_LAYER_STATE


def test_zamba2_reads_layers_block_type_and_its_attention_head_size():
    terms = kv_terms(ZAMBA2)
    assert ZAMBA2_BLOCKS.count("hybrid") == 9
    assert terms.full_bytes_per_token == 2 * 9 * 32 * 160 * 2 == 184_320
    assert (terms.full_layers, terms.state_layers) == (9, 54)  # every layer has its Mamba-2 mixer
    assert terms.state_bytes == 54 * ZAMBA2_LAYER_STATE


def test_nemotron_h_reads_layers_block_type_as_its_override_pattern():
    pattern = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 4,
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
    old = kv_terms({**pattern, "hybrid_override_pattern": "M*ME"})
    new = kv_terms({**pattern, "layers_block_type": ["mamba", "attention", "mamba", "moe"]})
    assert new == old and (new.full_layers, new.state_layers) == (1, 2)


def test_mllama_cross_attention_layers_keep_no_kv_per_prompt_token():
    assert layer_kinds(pm.model_config(MLLAMA)).count("full") == 32
    assert kv_bytes_per_token(MLLAMA) == 2 * 32 * 8 * 128 * 2 == 131_072  # not 40 layers' 163,840


@pytest.mark.parametrize(
    "config, field",
    [
        # Zamba (v1): its attention_layer_period rule is not Jamba's; Mamba-1 layers with heads
        ({"model_type": "zamba", "attn_layer_period": 6, "attn_layer_offset": 4}, "attn_layer_period"),
        ({"model_type": "zamba", "layers_block_type": ["mamba", "hybrid"]}, "layers_block_type"),
        # a Jamba-style field without a model type that says whose rule it is
        ({"attn_layer_period": 2, "attn_layer_offset": 1}, "attn_layer_period"),
        ({"attn_layer_indices": [1]}, "attn_layer_indices"),
        ({"attn_type_list": [0, 1]}, "attn_type_list"),
        ({"cross_attention_layers": [0]}, "cross_attention_layers"),
        ({"layers_block_type": ["mamba", "attention"]}, "layers_block_type"),
        # RecurrentGemma, LFM2, Hymba: layer mixes whose recurrent, convolution or parallel state is not modelled
        ({"model_type": "recurrent_gemma", "block_types": ["recurrent", "attention"]}, "block_types"),
        ({"model_type": "lfm2", "full_attn_idxs": [1]}, "full_attn_idxs"),
        ({"model_type": "hymba", "global_attn_idx": [0], "sliding_window": 1024}, "global_attn_idx"),
        # pure state-space models: no attention layer at all
        ({"model_type": "mamba2"}, "model_type"),
        ({"model_type": "mamba"}, "model_type"),
    ],
)
def test_a_layer_mix_perfmodel_does_not_read_is_refused_naming_its_field(config, field):
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2}
    with pytest.raises(InputError) as caught:
        kv_terms({**base, **config})
    said = str(caught.value)
    assert "\n" not in said and f"'{field}'" in said and "layer_types" in said, said


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"attn_layer_offset": 8}, r"attn_layer_offset.*8.*smaller than attn_layer_period \(8\)"),
        ({"attn_layer_offset": None}, "'attn_layer_offset' of jamba: is null"),
        ({"sliding_window": 4096}, r"'sliding_window'.*which of its layers"),
    ],
)
def test_jamba_fields_are_checked(change, fragment):
    with pytest.raises(InputError, match=fragment):
        kv_terms({**JAMBA, **change})


@pytest.mark.parametrize(
    "config, fragment",
    [
        ({**BAMBA, "attn_layer_indices": [9, 32]}, r"'attn_layer_indices'.*entry 1 is 32.*0 to 31"),
        ({**BAMBA, "attn_layer_indices": [9, 9]}, r"'attn_layer_indices'.*9 twice"),
        ({**BAMBA, "attn_layer_indices": "9"}, r"'attn_layer_indices'.*not a list"),
        ({**MINIMAX, "attn_type_list": [1] * 79}, r"'attn_type_list'.*79 entries for 80 layers"),
        ({**MINIMAX, "attn_type_list": [2] * 80}, r"'attn_type_list'.*entry 0 is 2.*0 \(lightning"),
        ({**ZAMBA2, "layers_block_type": ["mamba"] * 53 + ["moe"]}, r"'layers_block_type'.*\['moe'\]"),
        ({**ZAMBA2, "layers_block_type": ["mamba"] * 3}, r"'layers_block_type'.*3 entries for 54 layers"),
    ],
)
def test_the_lists_of_a_layer_mix_are_checked(config, fragment):
    with pytest.raises(InputError, match=fragment) as caught:
        kv_terms(config)
    assert "\n" not in str(caught.value)


def test_mllama_cross_attention_layers_are_checked():
    bad = {**MLLAMA, "text_config": {**MLLAMA["text_config"], "cross_attention_layers": [3, 40]}}
    with pytest.raises(InputError, match=r"'cross_attention_layers'.*entry 1 is 40"):
        kv_terms(bad)
    missing = {
        **MLLAMA,
        "text_config": {k: v for k, v in MLLAMA["text_config"].items() if k != "cross_attention_layers"},
    }
    with pytest.raises(InputError, match="cross_attention_layers"):  # transformers' default is not assumed
        kv_terms(missing)


# --- 2. ChatGLM / GLM's KV heads and head size -------------------------------------------------------------------

CHATGLM3 = {  # THUDM/chatglm3-6b
    "model_type": "chatglm",
    "num_layers": 28,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "multi_query_attention": True,
    "multi_query_group_num": 2,
    "kv_channels": 128,
    "torch_dtype": "float16",
}
GLM4_9B = {**CHATGLM3, "num_layers": 40, "torch_dtype": "bfloat16"}  # THUDM/glm-4-9b-chat


def test_chatglm_reads_multi_query_group_num_and_kv_channels():
    assert kv_bytes_per_token(CHATGLM3) == 2 * 28 * 2 * 128 * 2 == 28_672  # not 458,752
    assert kv_bytes_per_token(GLM4_9B) == 2 * 40 * 2 * 128 * 2 == 40_960  # not 655,360
    assert attention_heads(GLM4_9B) == (32, 2) and pm.kv_heads(GLM4_9B) == 2
    every_head = {**CHATGLM3, "multi_query_attention": False}
    assert kv_bytes_per_token(every_head) == 2 * 28 * 32 * 128 * 2
    wide = {**CHATGLM3, "kv_channels": 256}  # the head size is kv_channels, not hidden_size / heads
    assert kv_bytes_per_token(wide) == 2 * 28 * 2 * 256 * 2


def test_chatglm_without_its_group_count_is_refused():
    config = {k: v for k, v in CHATGLM3.items() if k != "multi_query_group_num"}
    with pytest.raises(InputError, match="multi_query_group_num"):
        kv_bytes_per_token(config)
    with pytest.raises(InputError, match=r"'multi_query_group_num'.*33 is more than the 32"):
        kv_bytes_per_token({**CHATGLM3, "multi_query_group_num": 33})


# --- 3. Gemma 3 and Cohere 2 without sliding_window_pattern --------------------------------------------------------


@pytest.mark.parametrize("model_type", ["gemma3_text", "gemma3"])
def test_gemma3_without_a_pattern_has_every_sixth_layer_global(model_type):
    config = {
        "model_type": model_type,
        "num_hidden_layers": 62,
        "hidden_size": 5376,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "sliding_window": 1024,
    }
    terms = kv_terms(config)
    assert (terms.full_layers, terms.window_layers) == (10, 52)  # as the gemma-3-27b preset
    assert terms == kv_terms("gemma-3-27b")


def test_cohere2_without_a_pattern_has_every_fourth_layer_global():
    config = {  # CohereLabs/c4ai-command-r7b-12-2024's shape
        "model_type": "cohere2",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "sliding_window": 4096,
    }
    terms = kv_terms(config)
    assert (terms.full_layers, terms.window_layers) == (8, 24)
    assert [i for i, kind in enumerate(layer_kinds(config)) if kind == "full"] == list(range(3, 32, 4))


# --- 4. the kv_heads column of perfmodel models --------------------------------------------------------------------


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _column(out: str, model: str, column: str) -> str:
    """A cell of the listing: the table's values end where their header ends (right-aligned)."""
    lines = out.splitlines()
    end = lines[0].index(column) + len(column)
    row = next(line for line in lines[1:] if line.split()[:1] == [model])
    return row[:end].split()[-1]


def test_the_models_listing_shows_the_kv_heads_the_bytes_use(config_dir, capsys):
    falcon_7b = {  # tiiuae/falcon-7b: 71 attention heads, multi-query: one KV head
        "model_type": "falcon",
        "num_hidden_layers": 32,
        "num_attention_heads": 71,
        "multi_query": True,
        "new_decoder_architecture": False,
        "hidden_size": 4544,
        "torch_dtype": "bfloat16",
    }
    null_kv = {"num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": None}
    bigcode = {"model_type": "gpt_bigcode", "n_layer": 40, "n_head": 48, "n_embd": 6144, "multi_query": True}
    for name, config in [("my-falcon", falcon_7b), ("null-kv", null_kv), ("my-bigcode", bigcode), ("my-glm", GLM4_9B)]:
        save_model(name, config)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert _column(out, "my-falcon", "kv_heads") == "1"
    assert _column(out, "null-kv", "kv_heads") == "32"
    assert _column(out, "my-bigcode", "kv_heads") == "1"
    assert _column(out, "my-glm", "kv_heads") == "2"
    assert _column(out, "llama-3.1-8b", "kv_heads") == "8" and _column(out, "deepseek-v3", "kv_heads") == "-"


# --- 5. a config's torch_dtype that is not a dtype ------------------------------------------------------------------


@pytest.mark.parametrize("field, value", [("torch_dtype", "auto"), ("torch_dtype", 16), ("dtype", "auto")])
def test_a_config_dtype_that_is_no_dtype_names_the_config_field(field, value, tmp_path):
    config = {k: v for k, v in GLM4_9B.items() if k != "torch_dtype"} | {field: value}
    with pytest.raises(InputError) as caught:
        kv_terms(config)
    said = str(caught.value)
    assert said.startswith(f"model config field '{field}' of chatglm: {value!r} is"), said
    assert "kv_cache_dtype='bf16'" in said and "'auto' for the model's dtype" not in said and "\n" not in said
    assert kv_bytes_per_token(config, kv_cache_dtype="bf16") == 40_960  # the way out it names
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match=f"model config field '{field}' of {path}"):
        kv_terms(path)


def test_an_explicit_kv_cache_dtype_that_is_unknown_still_names_the_argument():
    with pytest.raises(InputError, match=r"^kv_cache_dtype: 'fp7' is not known"):
        kv_terms(GLM4_9B, kv_cache_dtype="fp7")


def test_models_add_names_the_config_s_torch_dtype_and_no_flag(config_dir, capsys):
    (config_dir / "c.json").write_text(json.dumps({**GLM4_9B, "torch_dtype": "auto"}))
    assert main(["models", "--add", "glm", "c.json"]) == 2
    said = capsys.readouterr().err.strip()
    assert "c.json" in said and "torch_dtype" in said and "'auto'" in said and "\n" not in said, said
    assert "--kv-cache-dtype" not in said and "kv_cache_dtype" not in said, said
    assert "'auto' for" not in said and "correct torch_dtype" in said, said  # never the refused value as the fix
