"""User presets, round 11: a name that reads as a number, a model name that is also a config on disk, a path read
whatever the presets file holds, a hand-written entry under a built-in's name, and names shared between kinds."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import perfmodel
from perfmodel import Cluster, Connector, InputError, Link
from perfmodel.cli import main
from perfmodel.model.models import MODELS, save_model, user_models
from perfmodel.model.prefill import PrefillProfile, save_prefill
from perfmodel.network.connector import save_connector, user_connectors
from perfmodel.network.links import save_link, user_links
from perfmodel.network.presets import save_cluster, user_clusters

_CONFIG = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}
#: Llama-3.1-8B: 2 (K, V) * 32 layers * 8 KV heads * 128 values * 2 bytes (bf16) = 131,072 bytes a token.
_LLAMA_8B = 131_072


@pytest.fixture
def presets(tmp_path, monkeypatch):
    """The presets file of a config folder of the test's own; the working directory is a folder beside it."""
    (tmp_path / "config").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path / "config" / "presets.json"


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "\n" not in err, err
    return err


def _float32_llama(folder: Path) -> Path:
    """A folder holding Llama-3.1-8B's config in float32 (twice the built-in's bytes a token)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**MODELS["llama-3.1-8b"], "torch_dtype": "float32"}))
    return folder


def _cluster(name: str) -> Cluster:
    return Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8, name=name)


# 1: a name that reads as a number --------------------------------------------------------------------------------

_NUMBERS = ["4096", "50", " 1e3 ", "0.5", "inf", "NaN", "NA", "null", "n/a", "\uff14\uff10\uff19\uff16"]


@pytest.mark.parametrize("name", _NUMBERS)
def test_every_save_refuses_a_name_that_reads_as_a_number_or_as_missing(presets, name):
    """'4096' saved as a model was the preset to kv_bytes_per_token('4096') but 4,096 bytes to handoff_delay_ms."""
    saves = {
        "link": lambda: save_link(Link(name, 1.0, latency_ms=5.0)),
        "model": lambda: save_model(name, "llama-3.1-70b"),
        "cluster": lambda: save_cluster(_cluster(name)),
        "connector": lambda: save_connector(Connector(name, request_ms=1.0)),
        "prefill": lambda: save_prefill(PrefillProfile(5.0, 0.1, name=name)),
    }
    for kind, save in saves.items():
        with pytest.raises(InputError, match="reads as") as raised:
            save()
        said = str(raised.value)
        assert "\n" not in said and "Fix:" in said and repr(name) in said, (kind, said)
    assert not presets.exists()


def test_the_command_line_refuses_a_number_as_a_name_before_anything_is_saved(presets, tmp_path, capsys):
    assert main(["models", "--add", "4096", "llama-3.1-70b"]) == 2
    said = _error(capsys)
    assert "'4096'" in said and "reads as the number 4096" in said, said
    table = tmp_path / "work" / "transfers.csv"
    table.write_text("nbytes,measured_ms\n1e6,0.1\n1e7,0.3\n1e8,2.3\n")
    assert main(["calibrate", str(table), "--name", "50", "--save", "--out", str(tmp_path / "fit")]) == 2
    assert "reads as the number 50" in _error(capsys) and not (tmp_path / "fit").exists()
    tokens = np.array([256, 1024, 4096, 16384])
    wire = perfmodel.handoff_delay_ms(tokens, "ib-ndr", "llama-3.1-8b")
    handoffs = tmp_path / "work" / "handoffs.csv"
    handoffs.write_text("num_input_tokens,measured_ms\n" + "".join(f"{t},{w + 1.5}\n" for t, w in zip(tokens, wire)))
    fit = ["connectors", "--fit", str(handoffs), "--link", "ib-ndr", "--model", "llama-3.1-8b"]
    assert main([*fit, "--name", "7", "--save"]) == 2
    assert "reads as the number 7" in _error(capsys)
    assert not presets.exists()


def test_a_hand_written_entry_named_like_a_number_is_unusable_saying_why(presets, capsys):
    presets.write_text(
        json.dumps(
            {
                "links": {"50": {"bandwidth_gb_s": 1.0, "latency_ms": 5.0}, "ok": {"bandwidth_gb_s": 2.0}},
                "models": {"4096": {"config": _CONFIG}},
                "clusters": {"NA": {"nic": "ib-ndr", "nics_per_node": 4, "gpus_per_node": 8}},
                "connectors": {"1e3": {"request_ms": 1.0}},
            }
        )
    )
    with pytest.warns(UserWarning, match="'50': its name reads as the number 50"):
        assert list(user_links()) == ["ok"]
    with pytest.warns(UserWarning, match="'4096': its name reads as the number 4096"):
        assert user_models() == {}
    with pytest.warns(UserWarning, match="'NA': its name reads as a missing value"):
        assert user_clusters() == {}
    with pytest.warns(UserWarning, match="'1e3': its name reads as the number 1000"):
        assert user_connectors() == {}
    with pytest.raises(InputError, match="reads as the number 50"):
        perfmodel.get_link("2x 50")
    with pytest.raises(InputError, match="reads as the number 4096"):
        perfmodel.kv_bytes_per_token("4096")
    # where a value goes, the text is its number: 1,000 tokens of 4,096 bytes over 1 GB/s take 4.096 ms
    assert perfmodel.handoff_delay_ms(1000, 1.0, "4096") == pytest.approx(4.096)
    assert main(["presets", "list"]) == 0
    assert capsys.readouterr().out.count("no: its name reads as") == 4


# 2: perfmodel models --add NAME DIR, DIR named like a preset -----------------------------------------------------


def test_models_add_of_a_config_folder_named_like_a_preset_saves_what_it_records(presets, capsys):
    """It saved the built-in's bf16 config and recorded the float32 folder as its source."""
    folder = _float32_llama(Path("llama-3.1-8b"))
    code = main(["models", "--add", "mine", "llama-3.1-8b"])
    if code == 0:  # read as the folder given: its config, its path recorded
        entry = json.loads(presets.read_text())["models"]["mine"]
        assert entry["config"]["torch_dtype"] == "float32" and entry["source"] == str(folder.resolve())
    else:  # refused as ambiguous, naming both: nothing saved
        said = _error(capsys)
        assert code == 2 and "built-in" in said and str(folder.resolve()) in said and "'./llama-3.1-8b'" in said
        assert not presets.exists()
    with pytest.raises(InputError, match="both"):
        save_model("mine2", "llama-3.1-8b")
    save_model("mine2", "./llama-3.1-8b")
    assert json.loads(presets.read_text())["models"]["mine2"]["config"]["torch_dtype"] == "float32"
    assert perfmodel.kv_bytes_per_token("mine2") == 2 * _LLAMA_8B


def test_models_add_of_a_folder_without_a_config_never_records_it_as_the_source(presets, capsys):
    Path("llama-3.1-8b").mkdir()
    assert main(["models", "--add", "mine", "llama-3.1-8b"]) == 2
    assert "config.json" in _error(capsys) and not presets.exists()


# 3: a model name that is also a config on disk -------------------------------------------------------------------


def test_a_user_model_name_that_is_also_a_config_folder_here_is_refused_naming_both(presets, tmp_path, monkeypatch):
    save_model("ourmodel", _CONFIG)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    folder = _float32_llama(Path("ourmodel"))
    with pytest.raises(InputError) as raised:
        perfmodel.kv_bytes_per_token("ourmodel")
    said = str(raised.value)
    assert "\n" not in said and "user model" in said and str(presets) in said, said
    assert str(folder.resolve()) in said and "'./ourmodel'" in said, said
    assert perfmodel.kv_bytes_per_token("./ourmodel") == 2 * _LLAMA_8B
    with pytest.raises(InputError, match="both"):
        perfmodel.handoff_delay_ms(1000, "ib-ndr", "ourmodel")


@pytest.mark.parametrize("as_file", [False, True])
def test_a_built_in_model_name_that_is_also_a_config_here_is_refused_naming_both(presets, as_file):
    """huggingface-cli download ... --local-dir llama-3.1-8b, then kv_bytes_per_token('llama-3.1-8b'): the preset."""
    if as_file:
        Path("llama-3.1-8b").write_text(json.dumps({**MODELS["llama-3.1-8b"], "torch_dtype": "float32"}))
    else:
        _float32_llama(Path("llama-3.1-8b"))
    with pytest.raises(InputError, match="built-in model") as raised:
        perfmodel.kv_bytes_per_token("llama-3.1-8b")
    assert "'./llama-3.1-8b'" in str(raised.value) and "\n" not in str(raised.value)
    assert perfmodel.kv_bytes_per_token("./llama-3.1-8b") == 2 * _LLAMA_8B
    with pytest.raises(InputError, match="built-in model"):
        perfmodel.handoff_delay_ms([1000, 1000], "ib-ndr", ["llama-3.1-70b", "llama-3.1-8b"])
    assert perfmodel.kv_bytes_per_token("llama-3.1-70b") == 327_680  # (other names: the presets, as ever)


def test_a_folder_without_a_config_named_like_a_model_hides_nothing(presets):
    Path("llama-3.1-8b").mkdir()  # (an output folder named after the model: no config.json, no model)
    assert perfmodel.kv_bytes_per_token("llama-3.1-8b") == _LLAMA_8B


# 4: a path is read whatever the presets file holds ---------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"links": {}, "comment": "x"}', '{"links": ', "[1, 2]"])
def test_a_config_path_is_read_whatever_the_presets_file_holds(presets, tmp_path, text):
    folder = _float32_llama(tmp_path / "x")
    presets.write_text(text)
    for given in (str(folder / "config.json"), str(folder), folder, "../x", "../x/config.json"):
        assert perfmodel.kv_bytes_per_token(given) == 2 * _LLAMA_8B, given
    with pytest.raises(ValueError, match="nope") as raised:
        perfmodel.kv_bytes_per_token(str(tmp_path / "nope" / "config.json"))
    assert str(presets) not in str(raised.value)
    assert perfmodel.kv_bytes_per_token("llama-3.1-8b") == _LLAMA_8B  # (the built-ins too)
    with pytest.raises(InputError) as raised:  # (a name that may be a user preset: the file's error)
        perfmodel.kv_bytes_per_token("ourmodel")
    assert str(presets) in str(raised.value)


# 5: a hand-written entry under a built-in's name; names shared between kinds -------------------------------------

_SHADOWS = {
    "links": {"ib-ndr": {"bandwidth_gb_s": 10.0}},
    "models": {"llama-3.1-8b": {"config": _CONFIG}},
    "clusters": {"hgx-h100-8x400g": {"nic": "ib-ndr", "nics_per_node": 1, "gpus_per_node": 8}},
    "connectors": {"vllm-nixl": {"request_ms": 5.0}},
}


def test_a_hand_written_entry_under_a_built_in_name_is_unusable_saying_so(presets, capsys):
    presets.write_text(json.dumps(_SHADOWS))
    assert main(["presets", "list"]) == 0
    out = capsys.readouterr().out
    for kind in ("link", "model", "cluster"):
        assert f"no: is a built-in {kind}'s name: rename it" in out, out
    assert "built-in connector's name" in out
    for listing, kind in ((user_links, "link"), (user_models, "model"), (user_clusters, "cluster")):
        with pytest.warns(UserWarning, match=f"is a built-in {kind}'s name: rename it"):
            assert listing() == {}
    with pytest.warns(UserWarning, match="built-in connector's name"):
        assert user_connectors() == {}


def test_using_a_built_in_name_the_file_also_holds_warns_once_naming_the_entry(presets):
    save_link(Link("ours", 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no such entry: nothing said)
        assert perfmodel.handoff_delay_ms(1000, "ib-ndr", "llama-3.1-8b") == pytest.approx(_LLAMA_8B * 1000 / 50e6)
    presets.write_text(json.dumps({**_SHADOWS, "links": {**_SHADOWS["links"], "ours": {"bandwidth_gb_s": 1.0}}}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0
            assert perfmodel.get_link("2x ib-ndr").bandwidth_gb_s == 100.0
            assert perfmodel.kv_bytes_per_token("llama-3.1-8b") == _LLAMA_8B
            assert perfmodel.get_cluster("hgx-h100-8x400g").nics_per_node == 8
            assert perfmodel.handoff_delay_ms(1000, "hgx-h100-8x400g", "llama-3.1-8b") > 0
    said = [str(w.message) for w in caught]
    assert len(said) == 3, said
    for kind, name in (("links", "ib-ndr"), ("models", "llama-3.1-8b"), ("clusters", "hgx-h100-8x400g")):
        [one] = [s for s in said if f"{presets}: {kind} {name!r}" in s]
        assert "the built-in is used" in one and "Fix:" in one and "\n" not in one, one


def test_a_cluster_entry_named_like_a_built_in_link_is_said_where_the_link_is_used(presets):
    presets.write_text(json.dumps({"clusters": {"IB-NDR": {"nic": "ib-ndr", "nics_per_node": 2, "gpus_per_node": 8}}}))
    with pytest.warns(UserWarning, match="clusters 'IB-NDR'.*the built-in is used"):
        assert perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0
    with pytest.warns(UserWarning, match="is a built-in link's name"):
        assert user_clusters() == {}


def test_a_link_and_a_cluster_never_share_a_name_built_in_or_saved(presets):
    """They go where one another go: a name shared would be ambiguous wherever a link goes."""
    with pytest.raises(InputError, match="built-in link"):
        save_cluster(_cluster("ib-ndr"))
    with pytest.raises(InputError, match="built-in cluster"):
        save_link(Link("hgx-h100-8x400g", 1.0))
    save_link(Link("lab", 1.0))
    with pytest.raises(InputError, match="user link 'lab'"):
        save_cluster(_cluster("lab"))
    save_cluster(_cluster("rack"))
    with pytest.raises(InputError, match="user cluster 'rack'"):
        save_link(Link("rack", 1.0))


def test_kinds_that_go_to_different_arguments_may_share_a_name_and_each_is_found(presets, capsys):
    """A model goes where a model goes, a link or cluster where a link goes, a connector where a connector goes: a
    name of several of them is never ambiguous where it is used (presets show and remove ask for --kind)."""
    save_model("rack", _CONFIG)
    save_cluster(_cluster("rack"))  # (a cluster named like a user model)
    save_cluster(_cluster("llama-3.1-8b"))  # (and like a built-in model)
    save_link(Link("qwen3-32b", 5.0))  # (a link named like a built-in model)
    save_connector(Connector("rack", request_ms=2.0))  # (a connector named like a cluster and a model)
    save_connector(Connector("ib-ndr", request_ms=1.0))  # (and like a built-in link)
    assert perfmodel.kv_bytes_per_token("rack") == 2 * 2 * 64 * 2  # (K and V of 2 layers, 4 heads of 16, bf16)
    assert perfmodel.get_cluster("rack").nics_per_node == 4 and perfmodel.get_link("qwen3-32b").bandwidth_gb_s == 5.0
    assert perfmodel.kv_bytes_per_token("qwen3-32b") == perfmodel.kv_bytes_per_token(MODELS["qwen3-32b"])
    cluster, model = perfmodel.get_cluster("rack"), user_models()["rack"]
    assert perfmodel.handoff_delay_ms(1000, "rack", "rack", connector="rack") == perfmodel.handoff_delay_ms(
        1000, cluster, model, connector=Connector("x", request_ms=2.0)
    )
    assert perfmodel.handoff_delay_ms(1000, "ib-ndr", "qwen3-32b", connector="ib-ndr") == pytest.approx(
        perfmodel.handoff_delay_ms(1000, 50.0, MODELS["qwen3-32b"]) + 1.0
    )
    assert perfmodel.handoff_delay_ms(1000, "llama-3.1-8b", "llama-3.1-8b") == perfmodel.handoff_delay_ms(
        1000, _cluster("llama-3.1-8b"), MODELS["llama-3.1-8b"]
    )
    assert main(["presets", "show", "rack"]) == 2
    assert "--kind" in _error(capsys)
    assert main(["presets", "show", "rack", "--kind", "connector"]) == 0
