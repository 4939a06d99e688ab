"""User presets under a hostile tester: concurrent saves, hand-written entries, symlinks, permissions, repeated keys,
lookalike names, names that read as paths or options, flags no command reads, and messages that name the file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import perfmodel
from perfmodel import Cluster, InputError, Link
from perfmodel.cli import main
from perfmodel.inputs import user_presets as _presets
from perfmodel.model.models import save_model
from perfmodel.network.links import remove_link, save_link, user_links

_CONFIG = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}
#: A Llama-like config: 32 layers, 8 KV heads of 128 values, bf16: 2 * 32 * 8 * 128 * 2 = 131,072 bytes a token.
_LLAMA = {
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
}


@pytest.fixture
def presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    return tmp_path / "config" / "presets.json"


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "\n" not in err, err
    return err


# A1: concurrent saves ------------------------------------------------------------------------------------------


def test_concurrent_saves_from_many_processes_keep_every_preset(presets, tmp_path):
    """16 processes saving at once: the file held 11 or 12 of them, and every one had said 'saved'."""
    script = tmp_path / "save_one.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            from perfmodel import Link
            from perfmodel.network.links import save_link
            from perfmodel.model.models import save_model
            i = int(sys.argv[1])
            save_link(Link(f"l{i}", float(i + 1)))
            save_model(f"m{i}", {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4})
            """
        )
    )
    env = {**os.environ, "PERFMODEL_CONFIG_DIR": str(presets.parent)}
    runs = [subprocess.Popen([sys.executable, str(script), str(i)], env=env) for i in range(16)]
    assert [run.wait(timeout=300) for run in runs] == [0] * 16
    data = json.loads(presets.read_text())
    assert sorted(data["links"]) == sorted(f"l{i}" for i in range(16))
    assert sorted(data["models"]) == sorted(f"m{i}" for i in range(16))
    assert [data["links"][f"l{i}"]["bandwidth_gb_s"] for i in range(16)] == [float(i + 1) for i in range(16)]
    assert not list(presets.parent.glob("*perfmodel-tmp"))


def test_a_save_reads_the_file_again_under_its_lock(presets, monkeypatch):
    """What another process wrote between the name check and the write is kept (and a name it took is refused)."""
    real = _presets.check_free
    calls = []

    def meanwhile(*args, **kwargs):  # another process saves while this one checks its name
        key = real(*args, **kwargs)
        if not calls:
            calls.append(1)
            presets.write_text(json.dumps({"links": {"other": {"bandwidth_gb_s": 3.0, "saved_by": "perfmodel"}}}))
        return key

    monkeypatch.setattr(_presets, "check_free", meanwhile)
    save_link(Link("mine", 5.0))
    data = json.loads(presets.read_text())["links"]
    assert data["other"]["bandwidth_gb_s"] == 3.0 and data["mine"]["bandwidth_gb_s"] == 5.0
    calls.clear()

    def taken_meanwhile(*args, **kwargs):
        key = real(*args, **kwargs)
        if not calls:
            calls.append(1)
            presets.write_text(json.dumps({"links": {"late": {"bandwidth_gb_s": 7.0, "saved_by": "perfmodel"}}}))
        return key

    monkeypatch.setattr(_presets, "check_free", taken_meanwhile)
    with pytest.raises(InputError, match="'late' exists already"):
        save_link(Link("late", 9.0))
    assert json.loads(presets.read_text())["links"]["late"]["bandwidth_gb_s"] == 7.0


# A3: --replace never replaces a hand-written entry ---------------------------------------------------------------


def test_replace_refuses_a_hand_written_entry_with_the_words_of_remove(presets, capsys, tmp_path):
    hand = {"config": _CONFIG}
    presets.write_text(json.dumps({"models": {"lab": hand}, "links": {"LAB ": {"bandwidth_gb_s": 20}}}))
    before = presets.read_text()
    (tmp_path / "cfg.json").write_text(json.dumps(_LLAMA))
    assert main(["presets", "remove", "lab", "--kind", "model"]) == 2
    said_by_remove = _error(capsys)
    assert main(["models", "--add", "lab", "cfg.json", "--replace"]) == 2
    said = _error(capsys)
    assert "perfmodel did not save it (it has no 'saved_by': 'perfmodel'), so it leaves it alone" in said
    assert said.split(": ", 2)[-1] == said_by_remove.split(": ", 2)[-1]
    with pytest.raises(InputError, match="perfmodel did not save it"):
        save_link(Link("lab", 99.0), replace=True)
    cluster = Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8, name="rack")
    presets.write_text(json.dumps({"clusters": {" Rack ": {"nic": "ib-ndr", "nics_per_node": 2, "gpus_per_node": 8}}}))
    before = presets.read_text()
    with pytest.raises(InputError, match="perfmodel did not save it"):
        perfmodel.save_cluster(cluster, replace=True)
    assert presets.read_text() == before
    # one saved by perfmodel is replaced
    presets.write_text(json.dumps({"links": {"lab": {"bandwidth_gb_s": 20, "saved_by": "perfmodel"}}}))
    save_link(Link("LAB", 99.0), replace=True)
    assert perfmodel.get_link("lab").bandwidth_gb_s == 99.0


def test_replace_and_remove_refuse_two_spellings_of_one_name_saying_so(presets, capsys):
    both = {"bandwidth_gb_s": 20, "saved_by": "perfmodel"}
    presets.write_text(json.dumps({"links": {"Lab": both, "lab ": {**both, "bandwidth_gb_s": 30}}}))
    before = presets.read_text()
    with pytest.raises(InputError, match="'Lab' and 'lab ' name the same preset") as raised:
        save_link(Link("lab", 99.0), replace=True)
    assert "did not save" not in str(raised.value)
    assert main(["presets", "remove", "lab"]) == 2
    said = _error(capsys)
    assert "'Lab' and 'lab ' name the same preset" in said and "did not save" not in said
    assert presets.read_text() == before
    assert main(["presets", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("link"))
    assert "by hand" not in row and "perfmodel" in row, row
    assert main(["presets", "show", "lab"]) == 0
    out = capsys.readouterr().out
    assert "null" not in out and '"bandwidth_gb_s": 30' in out and '"Lab"' in out


# A4: the user's file kept --------------------------------------------------------------------------------------


def test_a_save_writes_through_a_symlink_and_keeps_the_mode(presets, tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "presets.json"
    real.write_text(json.dumps({"links": {"lab": {"bandwidth_gb_s": 20}}}))
    real.chmod(0o600)
    presets.symlink_to(real)
    save_link(Link("viasym", 10.0))
    assert presets.is_symlink() and presets.resolve() == real.resolve()
    data = json.loads(real.read_text())
    assert data["links"]["viasym"]["bandwidth_gb_s"] == 10.0 and data["links"]["lab"] == {"bandwidth_gb_s": 20}
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert not list(dotfiles.glob("*perfmodel-tmp")) and not list(presets.parent.glob("*perfmodel-tmp"))
    remove_link("viasym")
    assert presets.is_symlink() and "viasym" not in json.loads(real.read_text())["links"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_a_repeated_key_is_refused_by_save_and_remove_never_collapsed(presets, capsys):
    text = '{"links": {"dup": {"bandwidth_gb_s": 1, "bandwidth_gb_s": 2}, "fast": {"bandwidth_gb_s": 3, "saved_by": "perfmodel"}}}'
    presets.write_text(text)
    assert main(["presets", "remove", "fast"]) == 2
    said = _error(capsys)
    assert "'bandwidth_gb_s' appears twice" in said and "'dup'" in said and str(presets) in said
    with pytest.raises(InputError, match=r"'bandwidth_gb_s' appears twice.*") as raised:
        save_link(Link("new", 5.0))
    assert "'dup'" in str(raised.value)
    with pytest.raises(InputError, match="appears twice"):
        save_model("m", _CONFIG)
    assert presets.read_text() == text
    # a repeated entry name in a section names the entry
    text = '{"links": {"a": {"bandwidth_gb_s": 1}, "a": {"bandwidth_gb_s": 2}}}'
    presets.write_text(text)
    with pytest.raises(InputError, match="'a' appears twice") as raised:
        save_link(Link("new", 5.0))
    assert "links" in str(raised.value)
    assert presets.read_text() == text


# B4: names -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ib-ndr\u200b", "lab\u200dx", "a\nb", "a\tb", "x\u2028y", "q\x07"])
def test_names_with_invisible_or_control_characters_are_refused(presets, name):
    with pytest.raises(InputError, match=r"U\+[0-9A-F]{4}") as raised:
        save_link(Link(name, 1.0))
    assert "\n" not in str(raised.value)
    with pytest.raises(InputError, match=r"U\+"):
        save_model(name, _CONFIG)
    assert not presets.exists()


def test_a_name_starting_with_a_dash_is_refused(presets):
    with pytest.raises(InputError, match="starts with '-'"):
        save_link(Link("--x", 1.0))
    with pytest.raises(InputError, match="starts with '-'"):
        perfmodel.save_connector(perfmodel.Connector("-c", request_ms=1.0))
    assert not presets.exists()


def test_names_are_normalized_nfkc_so_a_fullwidth_built_in_is_refused(presets):
    with pytest.raises(InputError, match="built-in"):
        save_link(Link("\uff29\uff22-\uff2e\uff24\uff32", 1.0))
    save_link(Link("\uff2c\uff41\uff42", 20.0))
    assert list(json.loads(presets.read_text())["links"]) == ["lab"]
    assert perfmodel.get_link("lab").bandwidth_gb_s == 20.0
    assert _presets.key_of("\uff43\uff41\uff46\u00e9") == "café" == _presets.key_of("cafe\u0301")


def test_a_hand_written_name_with_an_invisible_character_is_not_usable(presets):
    presets.write_text(json.dumps({"links": {"ib-ndr\u200b": {"bandwidth_gb_s": 1.0}, "ok": {"bandwidth_gb_s": 2}}}))
    with pytest.warns(UserWarning, match="U\\+200B"):
        links = user_links()
    assert list(links) == ["ok"]


@pytest.mark.parametrize(
    "literal, shown",
    [("1e400", "1e400"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("NaN", "NaN"), ("-1e999", "-1e999")],
)
def test_hand_written_non_finite_numbers_are_refused_naming_entry_and_field(presets, literal, shown):
    presets.write_text('{"links": {"lab": {"bandwidth_gb_s": ' + literal + '}, "ok": {"bandwidth_gb_s": 20}}}')
    with pytest.raises(InputError) as raised:
        perfmodel.get_link("lab")
    said = str(raised.value)
    assert "'lab'" in said and "bandwidth_gb_s" in said and shown in said and str(presets) in said, said
    assert perfmodel.handoff_delay_ms(1000, "ok", 131_072) == pytest.approx(131_072_000 / 20e9 * 1000)
    before = presets.read_text()
    with pytest.raises(InputError, match="'lab'"):
        save_link(Link("new", 5.0))
    assert presets.read_text() == before
    # inside a model's config, the field is named too
    presets.write_text('{"models": {"m": {"config": {"num_hidden_layers": 2, "hidden_size": ' + literal
                       + ', "num_attention_heads": 4}}}}')  # fmt: skip
    with pytest.raises(InputError, match="hidden_size") as raised:
        perfmodel.kv_bytes("m", 1)
    assert "'m'" in str(raised.value)


def test_an_infinite_link_perfmodel_saved_reads_back(presets):
    """perfmodel writes an infinite bandwidth as Infinity (a free transfer): that entry is its own, and reads back."""
    save_link(Link("free", float("inf")))
    assert perfmodel.get_link("free").bandwidth_gb_s == float("inf")
    save_link(Link("other", 2.0))
    assert perfmodel.get_link("free").bandwidth_gb_s == float("inf")


# B2: a model named like a path ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cfg.json", "models/x", "x.JSON", "cdir"])
def test_a_model_name_that_reads_as_a_path_is_refused(presets, tmp_path, name, capsys):
    (tmp_path / "cdir").mkdir()
    (tmp_path / "cdir" / "config.json").write_text(json.dumps(_LLAMA))
    (tmp_path / "cfg.json").write_text(json.dumps(_LLAMA))
    (tmp_path / "small.json").write_text(json.dumps(_CONFIG))
    with pytest.raises(InputError, match="path") as raised:
        save_model(name, _CONFIG)
    assert "Fix:" in str(raised.value)
    assert main(["models", "--add", name, "small.json"]) == 2
    assert "path" in _error(capsys)
    assert not presets.exists()
    # the file is what --model reads: 32 layers * 8 heads * 128 * 2 (K, V) * 2 bytes = 131,072 bytes a token
    assert perfmodel.kv_bytes("./cfg.json", 1) == 131_072


def test_a_hand_written_model_named_like_a_file_is_refused_by_name(presets, tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(_LLAMA))
    presets.write_text(json.dumps({"models": {"cfg.json": {"config": _CONFIG}, "ok": {"config": _CONFIG}}}))
    assert perfmodel.kv_bytes("cfg.json", 1) == 131_072  # (the file's 32 layers, never the entry's 2: a path)
    with pytest.warns(UserWarning, match="'cfg.json': its name ends in '.json'"):
        assert list(perfmodel.model.models.user_models()) == ["ok"]
    assert perfmodel.kv_bytes("ok", 1) == 2 * 2 * 64 * 2  # 2 layers, K and V, hidden 64 (4 heads of 16), 2 bytes


# D2: link names ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cluster", "Cluster ", "mooncake-tcp-4x200g", "ideal", "mooncake-tcp-8x400g"])
def test_a_link_may_not_take_the_name_cluster_nor_a_transport(presets, name):
    with pytest.raises(InputError) as raised:
        save_link(Link(name, 10.0))
    assert "Fix:" in str(raised.value)
    assert not presets.exists()
    presets.write_text(json.dumps({"links": {name: {"bandwidth_gb_s": 10.0}}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert user_links() == {}
    with pytest.raises(InputError):
        perfmodel.get_link(name)
    presets.unlink()


# C: flags no command reads -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["connectors", "--tp", "8"], "--tp"),
        (["connectors", "--kv-layout", "block"], "--kv-layout"),
        (["models", "--add", "x", "cfg.json", "--tp", "8"], "--tp"),
        (["models", "--add", "x", "cfg.json", "--decode-tp", "2"], "--decode-tp"),
        (["models", "--add", "x", "cfg.json", "--kv-cache-dtype", "fp8"], "--kv-cache-dtype"),
        (["models", "--kv-cache-dtype", "fp8"], "--kv-cache-dtype"),
        (["presets", "list", "foo"], "foo"),
        (["presets", "list", "--kind", "link"], "--kind"),
    ],
)
def test_a_flag_no_command_reads_is_a_usage_error(presets, tmp_path, capsys, argv, flag):
    (tmp_path / "cfg.json").write_text(json.dumps(_LLAMA))
    assert main(argv) == 2
    said = _error(capsys)
    assert flag in said and "Fix:" in said, said
    assert not presets.exists()


# D1: unreadable presets file -----------------------------------------------------------------------------------


def test_connectors_and_prefills_warn_and_list_the_built_ins_beside_an_unreadable_file(presets, capsys):
    presets.write_text('{"links": {"a": ')
    with pytest.warns(UserWarning, match="cannot be read"):
        assert perfmodel.user_connectors() == {}
    with pytest.warns(UserWarning, match="cannot be read"):
        assert perfmodel.user_prefills() == {}
    assert main(["connectors"]) == 0
    out, err = capsys.readouterr()
    assert "vllm-nixl" in out and "cannot be read" in err


# D3 / E1: a presets file that cannot be written ----------------------------------------------------------------


def _read_only(folder: Path, monkeypatch) -> None:
    """The folder as a read-only file system sees it (root writes through permission bits)."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        if Path(path).resolve() == folder.resolve() and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    folder.chmod(0o555)


@pytest.fixture
def handoffs(tmp_path):
    tokens = np.array([256, 1024, 4096, 16384])
    wire = perfmodel.handoff_delay_ms(tokens, "ib-ndr", "llama-3.1-8b")
    table = tmp_path / "h4.csv"
    table.write_text("num_input_tokens,measured_ms\n" + "".join(f"{t},{w + 1.5}\n" for t, w in zip(tokens, wire)))
    return table


def test_connectors_save_refuses_a_read_only_folder_before_fitting(presets, handoffs, capsys, monkeypatch):
    _read_only(presets.parent, monkeypatch)
    try:
        argv = ["connectors", "--fit", str(handoffs), "--link", "ib-ndr", "--model", "llama-3.1-8b", "--name", "ro"]
        assert main([*argv, "--save"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "perfmodel-tmp" not in err and "cannot be written" in err and "Fix:" in err, err
        assert f"{presets}:" in err
    finally:
        presets.parent.chmod(0o755)


def test_a_failed_write_names_presets_json_never_a_temporary_file(presets, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(_presets.os, "replace", refuse)
    with pytest.raises(InputError) as raised:
        save_link(Link("x", 1.0))
    said = str(raised.value)
    assert said.startswith(f"{presets}: cannot be written (read-only file system)") and "Fix:" in said, said
    assert "perfmodel-tmp" not in said and not list(presets.parent.glob("*perfmodel-tmp"))


def test_a_config_folder_that_is_a_file_is_said_so(tmp_path, monkeypatch):
    (tmp_path / "cfgfile").write_text("x")
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "cfgfile"))
    with pytest.raises(InputError, match="is a file, not a folder") as raised:
        save_link(Link("x", 1.0))
    assert "PERFMODEL_CONFIG_DIR" in str(raised.value)
    assert (tmp_path / "cfgfile").read_text() == "x"


# E: messages ---------------------------------------------------------------------------------------------------


def test_connectors_fit_errors_name_the_file_and_line_not_flags_it_has_not(presets, tmp_path, capsys):
    argv = ["connectors", "--link", "ib-ndr", "--model", "llama-3.1-8b", "--fit"]
    cases = {
        "num_input_tokens,measured_ms\n512,1.0\n512.5,2.0\n": ("line 3", "num_input_tokens", "512.5"),
        "num_input_tokens,measured_ms\n512,1.0\n-512,2.0\n": ("line 3", "num_input_tokens", "-512"),
        "num_input_tokens,measured_ms\n512,-3\n": ("line 2", "measured_ms", "-3"),
        "num_input_tokens,measured_ms\n512,inf\n": ("line 2", "measured_ms", "inf"),
        "num_input_tokens,measured_ms\n": ("no handoff", "t.csv", ""),
        "num_input_tokens,measured_ms\n0,1.0\n0,2.0\n": ("moves no bytes", "t.csv", ""),
    }
    for text, phrases in cases.items():
        (tmp_path / "t.csv").write_text(text)
        assert main([*argv, str(tmp_path / "t.csv")]) == 2
        said = _error(capsys)
        assert all(p in said for p in phrases) and "--column" not in said and "row 0" not in said, (text, said)
        assert "position" not in said and "(0 handoffs)" not in said, said
    (tmp_path / "t.csv").write_text("num_input_tokens,measured_ms\n512,1.0\n")
    assert main(["connectors", "--link", "ib-ndr", "--model", "nope", "--fit", str(tmp_path / "t.csv")]) == 2
    said = _error(capsys)
    assert "--model" in said and "--kv-bytes-per-token" not in said, said


def test_a_connector_fit_far_off_or_of_too_few_points_is_said_so(presets, tmp_path, capsys):
    (tmp_path / "t.csv").write_text("num_input_tokens,measured_ms\n512,1e-300\n1024,50\n")
    argv = ["connectors", "--link", "ib-ndr", "--model", "llama-3.1-8b", "--fit", str(tmp_path / "t.csv")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "overflow" not in err and "): ;" not in out and "digits" not in out, out + err
    assert "warning" in err.lower() and "max error" in err
    (tmp_path / "t.csv").write_text("num_input_tokens,measured_ms\n512,5.0\n")
    assert main(argv) == 2  # (one handoff tells no per-descriptor cost from a per-request one: refused, as fit_link)
    _, err = capsys.readouterr()
    assert "needs measurements of at least two sizes" in err and "got 1 handoff" in err


def test_connectors_fit_save_says_the_name_it_is_kept_by_and_where_it_came_from(presets, handoffs, capsys):
    argv = ["connectors", "--fit", str(handoffs), "--link", "ib-ndr", "--model", "llama-3.1-8b"]
    assert main([*argv, "--name", "Our Vllm", "--save"]) == 0
    out = capsys.readouterr().out
    assert "'our vllm'" in out and "--connector 'our vllm'" in out
    source = json.loads(presets.read_text())["connectors"]["our vllm"]["source"]
    assert str(handoffs.resolve()) in source and "ib-ndr" in source and "llama-3.1-8b" in source
    # 1.5 ms on top of the transport in every handoff: the fit finds it
    assert perfmodel.get_connector("our vllm").request_ms == pytest.approx(1.5, rel=1e-6)


def test_models_add_names_the_config_file_and_quotes_the_name(presets, tmp_path, capsys):
    (tmp_path / "cfg.json").write_text(json.dumps(_LLAMA))
    assert main(["models", "--add", "My Model", "cfg.json"]) == 0
    out = capsys.readouterr().out
    assert "--model 'my model'" in out
    # 131,072 bytes a token * 32,768 tokens = 4,294.967 MB
    assert "4,295.0 MB at 32k" in out
    assert json.loads(presets.read_text())["models"]["my model"]["source"] == str((tmp_path / "cfg.json").resolve())
    assert main(["models", "--add", "x", "nonexist.json"]) == 2
    said = _error(capsys)
    assert "nonexist.json" in said and "not found" in said
    (tmp_path / "c_nan.json").write_text(json.dumps({**_LLAMA, "num_key_value_heads": float("nan")}))
    assert main(["models", "--add", "y", "c_nan.json"]) == 2
    assert "c_nan.json" in _error(capsys)
    (tmp_path / "c_dtype.json").write_text(json.dumps({**_LLAMA, "torch_dtype": "float77"}))
    assert main(["models", "--add", "z", "c_dtype.json"]) == 2
    said = _error(capsys)
    assert "c_dtype.json" in said and "--kv-cache-dtype" not in said, said


def test_a_clash_fix_quotes_a_name_with_spaces(presets):
    presets.write_text(json.dumps({"clusters": {"Rack A": {"nic": "ib-ndr", "nics_per_node": 2, "gpus_per_node": 8}}}))
    with pytest.raises(InputError, match="perfmodel presets remove 'rack a' --kind cluster"):
        save_link(Link("rack a", 1.0))


def test_count_grammar_of_one_rank(presets, capsys):
    assert main(["models", "--tp", "1", "--decode-tp", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 ranks" not in out and "prefill group of 1 rank " in out


def test_a_cluster_entry_error_shows_no_python_internals_and_one_fix(presets):
    presets.write_text(
        json.dumps(
            {
                "clusters": {
                    "a": {"nic": {"name": "n", "bandwidth_gb_s": 10, "foo": 1}, "nics_per_node": 2, "gpus_per_node": 8},
                    "b": {"nic": "ib-ndr", "nics_per_node": 0, "gpus_per_node": 8},
                    "c": {"nic": "ib-ndr", "nics_per_node": 2, "gpus_per_node": 8, "source": 5},
                }
            }
        )
    )
    for name, phrase in (("a", "'foo'"), ("b", "nics_per_node"), ("c", "'source'")):
        with pytest.raises(InputError) as raised:
            perfmodel.get_cluster(name)
        said = str(raised.value)
        assert phrase in said and said.count("Fix:") == 1 and "__init__" not in said, said


def test_a_prefill_entry_with_a_bad_field_names_the_field(presets):
    presets.write_text(json.dumps({"prefills": {"p2": {"fixed_ms": 1.0, "ms_per_token": "x"}}}))
    with pytest.raises(InputError, match="'ms_per_token' is the text 'x'"):
        perfmodel.get_prefill("p2")


def test_presets_show_and_list_say_who_saved_it(presets, capsys):
    presets.write_text(json.dumps({"links": {"hand": {"bandwidth_gb_s": 2}}}))
    save_link(Link("auto", 3.0))
    assert main(["presets", "show", "auto"]) == 0
    assert "saved by perfmodel" in capsys.readouterr().out
    assert main(["presets", "show", "hand"]) == 0
    assert "written by hand" in capsys.readouterr().out
    assert main(["presets", "remove", "aut"]) == 2
    assert "did you mean auto" in _error(capsys)


def test_lookups_read_names_as_the_presets_are_keyed():
    """Saved names are NFKC-normalized; lookups read the name the same way (a full-width spelling is the name)."""

    def wide(text: str) -> str:  # (full-width letters: U+FF21 on)
        return "".join(chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in text)

    assert perfmodel.handoff_delay_ms(1000, wide("IB-NDR"), wide("LLAMA") + "-3.1-8b") == perfmodel.handoff_delay_ms(
        1000, "ib-ndr", "llama-3.1-8b"
    )
    assert perfmodel.get_cluster(wide("HGX") + "-h100-8x400g") is perfmodel.get_cluster("hgx-h100-8x400g")
