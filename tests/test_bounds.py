"""Counts that size memory are bounded, booleans are never counts, error texts show plain values, and a
malformed saved cluster is named with its file wherever it is read: a tester's findings, test first."""

import json
import time

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import Cluster, replay_grid, replay_handoffs, synthetic_trace
from perfmodel.errors import InputError


@pytest.fixture(scope="module")
def trace():
    return synthetic_trace(40, rate_per_s=20, seed=0)


def _refused(call, *words):
    """The call is refused at once with one InputError naming each of ``words`` (no MemoryError, no hang)."""
    start = time.perf_counter()
    with pytest.raises(InputError) as raised:
        call()
    text = str(raised.value)
    assert "\n" not in text and all(word in text for word in words), text
    assert time.perf_counter() - start < 20, "refused only after a long time"
    return text


# --- 1. counts that size an allocation ------------------------------------------------------------


@pytest.mark.parametrize("contention", ["fifo", "fair", "none"])
def test_absurd_link_counts_are_refused_with_the_cap(trace, contention):
    _refused(lambda: replay_handoffs(trace, 50.0, 1000, links=10**9, contention=contention), "links", "1,048,576")


@pytest.mark.parametrize("contention", ["fifo", "fair"])
def test_links_beyond_the_requests_give_the_answer_of_one_link_per_request(trace, contention):
    many = replay_handoffs(trace, 0.5, 10**6, links=1000, contention=contention)
    enough = replay_handoffs(trace, 0.5, 10**6, links=len(trace), contention=contention)
    pd.testing.assert_frame_equal(many.drop(columns="link"), enough.drop(columns="link"), check_exact=False)
    assert many.attrs["links"] == 1000


@pytest.mark.parametrize(
    "keywords",
    [
        dict(prefill_workers=10**9, decode_workers=1),
        dict(prefill_workers=1, decode_workers=10**9),
        dict(prefill_workers=2**19, decode_workers=2**19),
        dict(tp=10**9),
    ],
)
def test_absurd_worker_counts_on_a_cluster_are_refused(trace, keywords):
    keywords = {"tp": 8, **keywords}
    _refused(lambda: replay_handoffs(trace, "hgx-h100-8x400g", "llama-3.1-70b", contention="fair", **keywords))


def test_absurd_decode_workers_on_links_are_refused_by_the_cap(trace):
    _refused(lambda: replay_handoffs(trace, 50.0, 1000, decode_workers=10**9), "decode_workers", "1,048,576")


@pytest.mark.parametrize("field", ["gpus_per_node", "nics_per_node", "nodes", "nvlink_domain"])
def test_absurd_cluster_sizes_are_refused(field):
    fields = {"nic": "ib-ndr", "nics_per_node": 8, "gpus_per_node": 8, field: 10**9}
    if field == "nvlink_domain":
        fields["nvlink"] = "nvlink4"
    _refused(lambda: Cluster(**fields), field)


def test_a_cluster_axis_of_absurd_size_is_refused_in_a_replay_grid(trace):
    _refused(
        lambda: replay_grid(
            trace, cluster="hgx-h100-8x400g", model="llama-3.1-8b", nodes=[2, 10**9], contention="fair", progress=False
        ),
        "nodes",
    )


def test_a_links_axis_of_absurd_size_is_refused_in_a_replay_grid(trace):
    _refused(
        lambda: replay_grid(
            trace,
            kv_transfer_bandwidth=50.0,
            kv_bytes_per_token=1000,
            links=[1, 10**9],
            contention="fifo",
            progress=False,
        ),
        "links",
    )


def test_a_replay_grid_of_absurdly_many_configurations_is_refused(trace):
    _refused(
        lambda: replay_grid(
            trace, kv_transfer_bandwidth=list(range(1, 10**4)), kv_bytes_per_token=list(range(1, 10**4)), progress=False
        ),
        "configurations",
    )


def test_an_absurd_synthetic_trace_is_refused():
    _refused(lambda: synthetic_trace(10**12, 20), "n")


def test_the_command_line_refuses_absurd_links_in_one_line(trace, tmp_path, capsys):
    from perfmodel.cli import main

    trace.to_csv(tmp_path / "trace.csv", index=False)
    code = main(
        [
            "trace",
            str(tmp_path / "trace.csv"),
            "--model",
            "llama-3.1-70b",
            "--link",
            "ib-ndr",
            "--contention",
            "fifo",
            "--links",
            "1000000000",
            "--out",
            str(tmp_path / "x"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "links" in err and len(err.splitlines()) == 1, err


# --- 2. num_layers ---------------------------------------------------------------------------------

_LAYERED = dict(per_message_ms=0.001, block_size=16)


@pytest.mark.parametrize(
    "call",
    [
        lambda n: perfmodel.handoff_delay_ms(1000, 50.0, 1000, num_layers=n, **_LAYERED),
        lambda n: perfmodel.required_bandwidth(1000, 1000, budget_ms=10.0, num_layers=n, **_LAYERED),
        lambda n: perfmodel.max_tokens_within(50.0, 1000, budget_ms=10.0, num_layers=n, **_LAYERED),
        lambda n: pd.DataFrame({"num_input_tokens": [1000]}).perfmodel.handoff_delay(
            kv_transfer_bandwidth=50.0, kv_bytes_per_token=1000, num_layers=n, **_LAYERED
        ),
        lambda n: perfmodel.sweep(
            num_input_tokens=[1000], kv_transfer_bandwidth=50.0, kv_bytes_per_token=1000, num_layers=n, **_LAYERED
        ),
    ],
    ids=["handoff_delay_ms", "required_bandwidth", "max_tokens_within", "accessor", "sweep"],
)
@pytest.mark.parametrize("layers", [True, 10**20, 2**16 + 1])
def test_num_layers_is_a_whole_number_of_layers_within_its_bound(call, layers):
    _refused(lambda: call(layers), "num_layers")


def test_num_layers_up_to_its_bound_is_taken():
    assert perfmodel.handoff_delay_ms(1000, 50.0, 1000, num_layers=2**16, **_LAYERED) > 0


# --- 3. plain values in error texts ----------------------------------------------------------------


def test_error_texts_show_numpy_numbers_as_plain_values(trace):
    c = Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    text = _refused(lambda: replay_handoffs(trace, c, 1000, latency_ms=np.float64(-1.5)), "-1.5")
    assert "np." not in text
    error = InputError(
        "x",
        f"{np.int64(3)!r} and {np.float64(1.5)!r} and {np.str_('a')!r} and {np.True_!r}",
        "fix",
        n_invalid=1,
        row=np.int64(2),
        value=np.float64(1.5),
    )
    assert "np." not in str(error) and "3 and 1.5 and 'a' and True" in str(error), str(error)
    assert "row 2: 1.5 (" in str(error)


# --- 4. a malformed saved cluster ------------------------------------------------------------------


@pytest.fixture
def presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))

    def write(clusters):
        (tmp_path / "presets.json").write_text(json.dumps({"clusters": clusters}))
        return str(tmp_path / "presets.json")

    return write


def test_a_saved_cluster_that_is_not_an_object_is_named_with_its_file_where_it_is_used(presets):
    path = presets({"c1": 5})
    _refused(lambda: perfmodel.handoff_delay_ms(1000, "c1", "llama-3.1-8b"), path, "'c1'", "not an object")


def test_a_saved_cluster_missing_a_field_says_which(presets, capsys):
    from perfmodel.cli import main

    path = presets({"c2": {"nic": "ib-ndr", "gpus_per_node": 8}})
    text = _refused(lambda: perfmodel.handoff_delay_ms(1000, "c2", "llama-3.1-8b"), path, "'c2'", "nics_per_node")
    assert "__init__" not in text and "keyword" not in text, text
    capsys.readouterr()
    assert main(["clusters"]) == 0
    said = capsys.readouterr().err  # (one line, as perfmodel links and models say a bad preset)
    assert said.startswith("perfmodel clusters: warning: "), said
    assert path in said and "nics_per_node" in said and "__init__" not in said, said


def test_a_saved_cluster_with_an_unknown_field_says_which(presets):
    path = presets({"c3": {"nic": "ib-ndr", "gpus_per_node": 8, "nics_per_node": 8, "gpus": 8}})
    text = _refused(lambda: perfmodel.handoff_delay_ms(1000, "c3", "llama-3.1-8b"), path, "'c3'", "'gpus'")
    assert "__init__" not in text, text
