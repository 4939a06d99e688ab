"""User presets (presets.json): every malformed entry or file is one clear line naming the file, the entry and
what is wrong, at every reader; saving refuses a taken name unless asked to replace; removing touches only what
perfmodel saved."""

from __future__ import annotations

import json
import re
import warnings

import pytest

import perfmodel
from perfmodel import InputError, Link
from perfmodel.cli import main

_CONFIG = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}


@pytest.fixture
def presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    return tmp_path / "presets.json"


# entry -> a phrase the error must hold (what is wrong, in words)
BAD_LINKS = {
    "a fit that is a list": ({"bandwidth_gb_s": 10.0, "fit": [1, 2]}, "'fit' is a list"),
    "a fit of unknown fields": ({"bandwidth_gb_s": 10.0, "fit": {"x": 1}}, "'fit'"),
    "a fit whose error is text": (
        {"bandwidth_gb_s": 10.0, "fit": {"points": 3, "max_relative_error": "low", "mean_relative_error": 0.1}},
        "max_relative_error",
    ),
    "a bare number": (5, "is a number, not an object of fields"),
    "a bandwidth as text": ({"bandwidth_gb_s": "fast"}, "'bandwidth_gb_s' is the text 'fast'"),
    "a bandwidth as numeric text": ({"bandwidth_gb_s": "10"}, "'bandwidth_gb_s' is the text '10'"),
    "a bandwidth as true": ({"bandwidth_gb_s": True}, "'bandwidth_gb_s' is true"),
    "no bandwidth": ({"latency_ms": 1.0}, "has no 'bandwidth_gb_s'"),
    "a negative bandwidth": ({"bandwidth_gb_s": -1.0}, "bandwidth_gb_s -1.0 is not > 0"),
    "a source that is a list": ({"bandwidth_gb_s": 10.0, "source": [1]}, "'source' is a list"),
    "an unknown field": ({"bandwidth_gb_s": 10.0, "bandwith_ms": 3}, "unknown field 'bandwith_ms'"),
    "a null latency": ({"bandwidth_gb_s": 10.0, "latency_ms": None}, "'latency_ms' is null"),
}


def _one_line_about(error: str, presets, name: str, phrase: str) -> None:
    assert str(presets) in error and f"'{name}'" in error and phrase in error, error
    assert "unknown link" not in error and "\n" not in error.strip(), error


@pytest.mark.parametrize("case", list(BAD_LINKS))
def test_a_malformed_link_entry_is_named_at_every_reader(presets, case, capsys):
    entry, phrase = BAD_LINKS[case]
    presets.write_text(json.dumps({"links": {"ours": entry, "good": {"bandwidth_gb_s": 20.0}}}))
    with pytest.raises(InputError) as raised:
        perfmodel.get_link("ours")
    _one_line_about(str(raised.value), presets, "ours", phrase)
    with pytest.raises(InputError) as raised:
        perfmodel.handoff_delay_ms(1000, "2x ours", "llama-3.1-8b")
    _one_line_about(str(raised.value), presets, "ours", phrase)
    with pytest.raises(InputError) as raised:  # a close name: the suggestion says what is wrong with it
        perfmodel.get_link("ourz")
    said = str(raised.value)
    assert "did you mean ours" in said and str(presets) in said and phrase in said, said
    with pytest.warns(UserWarning) as caught:
        users = perfmodel.network.links.user_links()
    assert list(users) == ["good"]
    _one_line_about(str(caught[0].message), presets, "ours", phrase)
    assert perfmodel.get_link("good").bandwidth_gb_s == 20.0 and perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0
    capsys.readouterr()
    for command in ("links", "models"):
        assert main([command]) == 0, command
        out, err = capsys.readouterr()
        assert "internal error" not in err and ("ib-ndr" in out or "llama-3.1-8b" in out)
        if command == "links":
            assert "good" in out
            assert str(presets) in err and "'ours'" in err and phrase in err, err


BAD_FILES = {
    "a top-level list": ("[1, 2]", "holds a list, not an object"),
    "invalid JSON": ("{not json", "cannot be read"),
    "an unknown kind": (json.dumps({"lnks": {"ours": {"bandwidth_gb_s": 1.0}}}), "'lnks', which is no kind of preset"),
    "links as a list": (json.dumps({"links": [1]}), "'links' is a list"),
    "a name given twice": (
        '{"links": {"ours": {"bandwidth_gb_s": 1.0}, "ours": {"bandwidth_gb_s": 2.0}}}',
        "'ours' appears twice",
    ),
    "a top-level number": ("3", "holds a number, not an object"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_malformed_presets_file_is_named_and_never_stops_the_built_ins(presets, case, capsys):
    content, phrase = BAD_FILES[case]
    presets.write_text(content)
    with pytest.raises(InputError) as raised:
        perfmodel.get_link("ours")
    assert str(presets) in str(raised.value) and phrase in str(raised.value), str(raised.value)
    assert "unknown link" not in str(raised.value)
    with pytest.raises(InputError, match="presets.json"):
        perfmodel.model_config("our-model")
    assert perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0
    with pytest.warns(UserWarning, match=phrase.replace("[", r"\[")):
        assert perfmodel.network.links.user_links() == {}
    with pytest.warns(UserWarning):
        assert perfmodel.model.models.user_models() == {}
    capsys.readouterr()
    for command in ("links", "models"):
        assert main([command]) == 0, command
        _, err = capsys.readouterr()
        assert "internal error" not in err and str(presets) in err, err
    with pytest.raises(InputError):
        perfmodel.network.links.save_link(Link("mine", 1.0))
    assert presets.read_text() == content  # never overwritten


def test_names_that_differ_only_in_case_are_one_name(presets):
    presets.write_text(json.dumps({"links": {"Ours": {"bandwidth_gb_s": 1.0}}}))
    assert perfmodel.get_link("ours").bandwidth_gb_s == 1.0 and perfmodel.get_link("OURS").bandwidth_gb_s == 1.0
    presets.write_text(json.dumps({"links": {"Ours": {"bandwidth_gb_s": 1.0}, "ours": {"bandwidth_gb_s": 2.0}}}))
    with pytest.raises(InputError, match="'Ours' and 'ours' name the same preset"):
        perfmodel.get_link("ours")


def test_an_entry_under_a_built_in_name_is_said_never_to_be_used(presets):
    presets.write_text(json.dumps({"links": {"ib-ndr": {"bandwidth_gb_s": 1.0}, "2x mine": {"bandwidth_gb_s": 1.0}}}))
    assert perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0  # the built-in comes first
    with pytest.warns(UserWarning) as caught:
        perfmodel.network.links.user_links()
    said = " ".join(str(w.message) for w in caught)
    assert "'ib-ndr'" in said and "built-in" in said and "'2x mine'" in said and "multiple" in said, said


BAD_MODELS = {
    "a bare number": (3, "is a number, not an object of fields"),
    "a config that is a list": ({"config": [1]}, "'config' is a list"),
    "no config": ({"source": "x"}, "has no 'config'"),
    "a config without layers": ({"config": {"hidden_size": 64}}, "num_hidden_layers"),
    "a config of text": ({"config": {**_CONFIG, "hidden_size": "big"}}, "hidden_size"),
    "an unknown field": ({"config": _CONFIG, "cfg": 1}, "unknown field 'cfg'"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_a_malformed_model_entry_is_named_at_every_reader(presets, case, capsys):
    entry, phrase = BAD_MODELS[case]
    presets.write_text(json.dumps({"models": {"mine": entry, "good": {"config": _CONFIG}}}))
    for call in (lambda: perfmodel.model_config("mine"), lambda: perfmodel.kv_bytes("mine", 10)):
        with pytest.raises(InputError) as raised:
            call()
        assert str(presets) in str(raised.value) and "'mine'" in str(raised.value) and phrase in str(raised.value)
    with pytest.raises(ValueError) as raised:
        perfmodel.model_config("mien")
    assert "did you mean mine" in str(raised.value) and str(presets) in str(raised.value)
    with pytest.warns(UserWarning, match="'mine'"):
        assert list(perfmodel.model.models.user_models()) == ["good"]
    assert perfmodel.kv_bytes("good", 10) > 0
    capsys.readouterr()
    assert main(["models"]) == 0
    out, err = capsys.readouterr()
    assert "good" in out and "'mine'" in err and str(presets) in err and "internal error" not in err, err


# --- saving: a taken name is refused unless replace=True ----------------------------------------------


def test_saving_under_a_taken_name_is_refused_unless_asked_to_replace(presets, tmp_path):
    perfmodel.network.links.save_link(Link("ours", 10.0), source="first")
    before = presets.read_text()
    for name in ("ours", "OURS", " Ours "):
        with pytest.raises(InputError, match="exists already"):
            perfmodel.network.links.save_link(Link(name, 20.0))
        with pytest.raises(InputError, match="exists already"):  # before its table is read (there is none)
            perfmodel.calibrate(tmp_path / "never-read.csv", name=name, save=True)
    assert presets.read_text() == before
    perfmodel.network.links.save_link(Link("Ours", 20.0), replace=True)
    assert perfmodel.get_link("ours").bandwidth_gb_s == 20.0
    perfmodel.model.models.save_model("m", _CONFIG)
    with pytest.raises(InputError, match="exists already"):
        perfmodel.model.models.save_model("M", _CONFIG)
    perfmodel.model.models.save_model("M", {**_CONFIG, "num_hidden_layers": 4}, replace=True)
    assert perfmodel.kv_bytes("m", 1) == 2 * perfmodel.kv_bytes({**_CONFIG}, 1)


def test_user_presets_say_where_they_come_from(presets, capsys):
    perfmodel.network.links.save_link(Link("ours", 10.0), source="lab")
    assert main(["links"]) == 0
    listing = capsys.readouterr().out
    assert f"\n  ours: lab ({presets})\n" in listing, listing  # (under "Sources:")
    assert re.search(r"^ +ours( +[\d.,-]+%?)+ +user$", listing, flags=re.MULTILINE), listing  # its kind: a user's
    with pytest.raises(InputError) as raised:
        perfmodel.get_link("ourz")
    assert "did you mean ours" in str(raised.value) and str(presets) in str(raised.value)


# --- removing: only what perfmodel saved -------------------------------------------------------------


def test_remove_takes_away_only_entries_perfmodel_saved(presets):
    perfmodel.network.links.save_link(Link("ours", 10.0))
    data = json.loads(presets.read_text())
    data["links"]["by-hand"] = {"bandwidth_gb_s": 5.0}
    presets.write_text(json.dumps(data))
    with pytest.raises(InputError, match="perfmodel did not save it"):
        perfmodel.network.links.remove_link("by-hand")
    assert "by-hand" in json.loads(presets.read_text())["links"]
    with pytest.raises(InputError, match="no user link 'nothing'"):
        perfmodel.network.links.remove_link("nothing")
    assert perfmodel.network.links.remove_link("OURS") == presets
    assert list(json.loads(presets.read_text())["links"]) == ["by-hand"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(perfmodel.network.links.user_links()) == ["by-hand"]


def test_the_presets_command_lists_shows_and_removes_only_what_perfmodel_saved(presets, capsys):
    assert main(["presets", "list"]) == 0 and "no user presets in" in capsys.readouterr().out
    perfmodel.network.links.save_link(Link("ours", 10.0), source="lab")
    perfmodel.model.models.save_model("mine", _CONFIG)
    data = json.loads(presets.read_text())
    data["links"]["by-hand"] = {"bandwidth_gb_s": 5.0}
    data["links"]["broken"] = {"bandwidth_gb_s": "fast"}
    presets.write_text(json.dumps(data))
    assert main(["presets", "list"]) == 0
    out = capsys.readouterr().out
    assert str(presets) in out and "ours" in out and "mine" in out and "lab" in out and "by hand" in out
    assert "'bandwidth_gb_s' is the text 'fast'" in out  # listed, with what is wrong
    assert main(["presets", "show", "OURS"]) == 0 and '"bandwidth_gb_s": 10.0' in capsys.readouterr().out
    assert main(["presets", "show", "mine"]) == 0 and "layers" in capsys.readouterr().out
    assert main(["presets", "remove", "by-hand"]) == 2
    assert "perfmodel did not save it" in capsys.readouterr().err
    assert main(["presets", "remove", "nothing"]) == 2 and "no user preset 'nothing'" in capsys.readouterr().err
    assert main(["presets", "remove"]) == 2 and "needs a NAME" in capsys.readouterr().err
    assert main(["presets", "remove", "ours"]) == 0 and "removed the user link 'ours'" in capsys.readouterr().out
    assert main(["presets", "remove", "mine"]) == 0
    left = json.loads(presets.read_text())
    assert sorted(left["links"]) == ["broken", "by-hand"] and left["models"] == {}


def test_models_add_refuses_a_taken_name_unless_replace(presets, tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_CONFIG))
    assert main(["models", "--add", "mine", str(config)]) == 0
    assert main(["models", "--add", "MINE", str(config)]) == 2 and "exists already" in capsys.readouterr().err
    assert main(["models", "--add", "MINE", str(config), "--replace"]) == 0
    assert main(["models"]) == 0 and str(presets) in capsys.readouterr().out  # where the user preset comes from


# --- one name, one thing: a link and a cluster go where one another go -----------------------------------


def _cluster(name):
    return perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=8, name=name)


@pytest.mark.parametrize(
    "name, phrase",
    [
        ("ib-ndr", "'ib-ndr' is a built-in link preset"),
        (" IB-NDR ", "built-in link preset"),
        ("mooncake-te-rdma", "is a transport profile"),
        ("8x ib-ndr", "is read as a multiple of a link"),
        ("cluster", "the name of every Cluster given none"),
        ("Cluster", "given none"),
        ("aws-p5", "'aws-p5' is a built-in cluster preset"),
        ("efa-100g", "built-in link preset"),
    ],
)
def test_a_cluster_may_not_be_saved_under_a_link_transport_or_placeholder_name(presets, name, phrase):
    with pytest.raises(InputError, match=phrase):
        perfmodel.save_cluster(_cluster(name))
    assert not presets.exists()


def test_a_user_link_and_a_user_cluster_never_share_a_name(presets):
    perfmodel.network.links.save_link(Link("ours", 10.0))
    with pytest.raises(InputError, match="a user link 'ours' exists already"):
        perfmodel.save_cluster(_cluster("OURS"))
    perfmodel.save_cluster(_cluster("lab"))
    with pytest.raises(InputError, match="a user cluster 'lab' exists already"):
        perfmodel.network.links.save_link(Link("Lab", 10.0))
    with pytest.raises(InputError, match="a user link 'ours' exists already"):  # replace is for one's own kind
        perfmodel.save_cluster(_cluster("ours"), replace=True)
    for name in ("aws-p5", "GB200-NVL72"):
        with pytest.raises(InputError, match="is a built-in cluster preset"):
            perfmodel.network.links.save_link(Link(name, 10.0))
    assert sorted(json.loads(presets.read_text())["links"]) == ["ours"]
    assert sorted(json.loads(presets.read_text())["clusters"]) == ["lab"]


def test_a_name_written_by_hand_as_a_link_and_a_cluster_is_refused_where_it_is_used(presets):
    cluster = {"nic": "ib-ndr", "nics_per_node": 1, "gpus_per_node": 8}
    presets.write_text(
        json.dumps(
            {
                "links": {"twice": {"bandwidth_gb_s": 5.0}},
                "clusters": {"twice": cluster, "ib-ndr": cluster, "aws-p5": cluster, "fine": cluster},
            }
        )
    )
    for use in (
        lambda: perfmodel.handoff_delay_ms(1024, "twice", 327_680),
        lambda: perfmodel.get_link("twice"),
        lambda: perfmodel.get_cluster("twice"),
        lambda: perfmodel.required_bandwidth(1024, "llama-3.1-70b", budget_ms=10.0, tp=8, cluster="twice"),
    ):
        with pytest.raises(InputError, match="also the name of a user"):
            use()
    with pytest.raises(InputError, match="'ib-ndr'.* is a built-in link's name"):
        perfmodel.get_cluster("ib-ndr")
    assert perfmodel.get_cluster("aws-p5") == perfmodel.CLUSTERS["aws-p5"]  # (the built-in comes first)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(perfmodel.user_clusters()) == ["fine"]
    said = " ".join(str(w.message) for w in caught)
    assert "'twice'" in said and "'ib-ndr'" in said and "is a built-in cluster's name" in said, said


def test_saved_clusters_are_listed_shown_and_removed_as_links_and_models_are(presets, capsys):
    perfmodel.save_cluster(_cluster("lab"), source="our racks")
    perfmodel.model.models.save_model("lab", _CONFIG)  # (a model may share a cluster's name: they go in other places)
    data = json.loads(presets.read_text())
    data["clusters"]["by-hand"] = {"nic": "ib-ndr", "nics_per_node": 1, "gpus_per_node": 8}
    data["clusters"]["broken"] = {"nic": "ib-ndr", "nics_per_node": 3, "gpus_per_node": 8}
    presets.write_text(json.dumps(data))
    assert main(["presets", "list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"cluster +lab +our racks +perfmodel +yes", out) and "by-hand" in out, out
    assert "nics_per_node 3 neither divides" in out
    assert main(["presets", "show", "lab"]) == 2 and "--kind cluster" in capsys.readouterr().err
    assert main(["presets", "show", "lab", "--kind", "cluster"]) == 0
    assert "8 GPUs and 1 x ib-ndr per node" in capsys.readouterr().out
    assert main(["presets", "remove", "by-hand", "--kind", "cluster"]) == 2
    assert "perfmodel did not save it" in capsys.readouterr().err
    assert main(["presets", "remove", "LAB", "--kind", "cluster"]) == 0
    assert "removed the user cluster 'lab'" in capsys.readouterr().out
    assert sorted(json.loads(presets.read_text())["clusters"]) == ["broken", "by-hand"]
    perfmodel.save_cluster(_cluster("again"))
    assert perfmodel.remove_cluster("Again") == presets
    with pytest.warns(UserWarning, match="'broken'"):
        assert "again" not in perfmodel.user_clusters()
    with pytest.raises(InputError, match="no user cluster 'again'"):
        perfmodel.remove_cluster("again")


# --- presets list lines up; a name saved again in other letters is said as it is kept ------------------------


def test_presets_list_columns_line_up(presets, capsys):
    """The columns of the table were misaligned (pandas right-aligned long text under left-aligned names)."""
    perfmodel.network.links.save_link(Link("a", 20.0), source="short")
    perfmodel.network.links.save_link(
        Link("a-much-longer-name", 20.0), source="perfmodel calibrate " + "x" * 90 + ".csv"
    )
    perfmodel.model.models.save_model("m", _CONFIG)
    assert main(["presets", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("kind"))
    rows = [line for line in lines[header + 1 :] if line.strip()][:3]
    starts = [lines[header].index(title) for title in ("name", "source", "saved by", "usable")]
    for row in rows:
        for start in starts:
            assert row[start - 1] == " " and row[start] != " ", (row, start)


@pytest.mark.parametrize("command", ["calibrate", "models"])
def test_a_replaced_preset_is_said_under_the_name_it_is_kept(presets, tmp_path, capsys, command):
    """Replacing 'mylink' as 'MyLink' kept the key 'mylink' and said 'saved link MyLink ... --link MyLink'."""
    table = tmp_path / "a.csv"
    table.write_text("nbytes,measured_ms\n1e6,0.1\n1e7,0.3\n1e8,2.3\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_CONFIG))

    def save(name, *more):
        if command == "calibrate":
            return main(["calibrate", str(table), "--name", name, "--save", *more, "--out", str(tmp_path / name)])
        return main(["models", "--add", name, str(config), *more])

    kind = "links" if command == "calibrate" else "models"
    assert save("mylink") == 0
    capsys.readouterr()
    assert save("MyLink", "--replace") == 0
    out = capsys.readouterr().out
    kept = list(json.loads(presets.read_text())[kind])
    assert len(kept) == 1
    assert f"'{kept[0]}'" in out and f"--{'link' if command == 'calibrate' else 'model'} {kept[0]}" in out, out
    assert kept[0] == "mylink" or "'MyLink'" not in out.replace(f"'{kept[0]}'", "")


# --- every malformed shape of an entry, generated over every field: one line naming the file and the entry, and
# the other presets still usable --------------------------------------------------------------------------------

_GOOD = {
    "links": ("good-link", {"bandwidth_gb_s": 20.0}),
    "models": ("good-model", {"config": _CONFIG}),
    "clusters": ("good-cluster", {"nic": "ib-ndr", "nics_per_node": 4, "gpus_per_node": 8}),
}
_FIT = {"points": 3, "max_relative_error": 0.1, "mean_relative_error": 0.05}
#: Values no field takes as they are (or takes, when they are valid: then the entry must simply work).
_HOSTILE = [
    None,
    True,
    False,
    "",
    "x",
    "10",
    [],
    [1],
    {},
    {"nested": {"deeper": 1}},
    float("nan"),
    float("inf"),
    -float("inf"),
    -1,
    0,
    1.5,
    1e308,
    2**63,
    2**70,
]


def _hostile_entries(kind: str):
    """(label, entry) pairs: the entry not an object, each field missing, wrong in every way, and unknown."""
    good = _GOOD[kind][1]
    yield "an empty object", {}
    for value in (None, True, 3, 2.5, "text", [], [good]):
        yield f"the entry {value!r}", value
    fields = {
        "links": {
            **good,
            "latency_ms": 0.0,
            "efficiency": 1.0,
            "per_block_ms": 0.0,
            "per_message_ms": 0.0,
            "source": "",
            "saved_by": "perfmodel",
            "fit": _FIT,
        },
        "models": {**good, "source": ""},
        "clusters": {
            **good,
            "nodes": 2,
            "transport": "mooncake-te-rdma",
            "nvlink_domain": 8,
            "nvlink": "nvlink4",
            "fabric": "rail",
            "oversubscription": 1.0,
            "hop_latency_ms": 0.0,
            "source": "",
        },
    }[kind]
    for field in [*fields, "unknown_field"]:
        yield f"no {field!r}", {k: v for k, v in fields.items() if k != field}
        for value in _HOSTILE:
            yield f"{field!r}: {value!r}", {**fields, field: value}
    nested = {
        "links": ("fit", _FIT),
        "models": ("config", _CONFIG),
        "clusters": ("nic", {"name": "n", "bandwidth_gb_s": 10.0}),
    }
    name, inner = nested[kind]
    for field in [*inner, "unknown_field"]:
        yield f"{name!r} without {field!r}", {**fields, name: {k: v for k, v in inner.items() if k != field}}
        for value in _HOSTILE:
            yield f"{name!r} field {field!r}: {value!r}", {**fields, name: {**inner, field: value}}


def _lookups():
    return {"links": perfmodel.get_link, "models": perfmodel.model_config, "clusters": perfmodel.get_cluster}


@pytest.mark.parametrize("kind", list(_GOOD))
def test_every_malformed_entry_shape_is_one_line_about_its_entry_and_the_others_still_work(presets, kind, capsys):
    """A NaN or infinite fit's point count, a config of 1e308 layers, ... ended in ValueError, OverflowError or an
    internal error, and made every other user preset unusable (the error then spoke of kv_transfer_bandwidth)."""
    cases = list(_hostile_entries(kind))
    assert len(cases) > 100
    failures = []
    for label, entry in cases:
        data = {k: {name: good} for k, (name, good) in _GOOD.items()}
        data[kind]["hostile"] = entry
        presets.write_text(json.dumps(data))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                _lookups()[kind]("hostile")
            except InputError as error:
                said = str(error)
                if str(presets) not in said or "'hostile'" not in said or "\n" in said or "Fix:" not in said:
                    failures.append((label, said))
            except Exception as error:  # noqa: BLE001 (what the test is about)
                failures.append((label, f"{type(error).__name__}: {error}"))
            for other, (name, _) in _GOOD.items():
                try:
                    _lookups()[other](name)
                except Exception as error:  # noqa: BLE001
                    failures.append((label, f"the valid {other} {name!r} became unusable: {error}"))
    assert not failures, "\n".join(f"{label}: {said}" for label, said in failures[:20])


@pytest.mark.parametrize("kind", list(_GOOD))
def test_every_reader_command_lists_the_others_beside_a_malformed_entry(presets, kind, capsys):
    """The listings and a command resolving a valid name, beside a few of the hostile shapes of each kind."""
    shapes = [
        entry
        for label, entry in _hostile_entries(kind)
        if "nan" in label
        or "inf" in label
        or "1e+308" in label
        or "2**70" in label
        or "2**63" in label
        or label.startswith("the entry")
    ][::5]
    assert len(shapes) > 5
    for entry in shapes:
        data = {k: {name: good} for k, (name, good) in _GOOD.items()}
        data[kind]["hostile"] = entry
        presets.write_text(json.dumps(data))
        for command in (["presets", "list"], ["links"], ["models"], ["clusters"]):
            code = main(command)
            out, err = capsys.readouterr()
            assert code == 0 and "internal error" not in err, (entry, command, err)
            if command == ["presets", "list"]:
                assert all(name in out for name, _ in _GOOD.values()), (entry, out)


def test_a_key_given_twice_inside_an_entry_is_that_entry_s_error_only(presets):
    """A repeated field made the whole file unreadable: every user preset of every kind was refused."""
    presets.write_text(
        '{"links": {"twice": {"bandwidth_gb_s": 1.0, "bandwidth_gb_s": 2.0}, '
        '"nested": {"bandwidth_gb_s": 1.0, "fit": {"points": 3, "points": 4, "max_relative_error": 0.1, '
        '"mean_relative_error": 0.1}}, "good": {"bandwidth_gb_s": 20.0}}}'
    )
    assert perfmodel.get_link("good").bandwidth_gb_s == 20.0
    for name in ("twice", "nested"):
        with pytest.raises(InputError) as raised:
            perfmodel.get_link(name)
        said = str(raised.value)
        assert str(presets) in said and f"'{name}'" in said and "appears twice" in said, said
    presets.write_text('{"links": {"good": {"bandwidth_gb_s": 20.0}}, "links": {}}')  # (the file's own keys)
    with pytest.raises(InputError, match="'links' appears twice"):
        perfmodel.get_link("good")
