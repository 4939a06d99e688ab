"""A hostile tester's findings on the pandas facade and the numpy API, round 11 (each test failed before its fix):
None never stands for a default, text reads one way (and a column named like a value is ambiguous), empty frames,
and errors that count every invalid row and name the first by its label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel as pm
from perfmodel import InputError

DF = pd.DataFrame({"num_input_tokens": [100, 200]}, index=["a", "b"])
NUMBERS = dict(kv_transfer_bandwidth=1.0, kv_bytes_per_token=1000)

# --- 1. a required input given as None ----------------------------------------------------------------------------


@pytest.mark.parametrize("argument", ["num_input_tokens", "kv_transfer_bandwidth", "kv_bytes_per_token"])
@pytest.mark.parametrize("others", ["values", "a column"])
def test_a_required_input_given_as_none_is_refused_by_the_facade(argument, others):
    given = {**NUMBERS, argument: None}
    frame = DF.assign(bw=1.0)
    if others == "a column" and argument != "kv_transfer_bandwidth":
        given["kv_transfer_bandwidth"] = "bw"
    with pytest.raises(InputError, match=rf"^{argument}: is required \(got None\)\. Fix: .*[^.]\.$"):
        pm.handoff_delays(frame, **given)


def test_the_numpy_api_says_is_required_in_one_sentence():
    with pytest.raises(InputError) as caught:
        pm.handoff_delay_ms(None, 1.0, 1000)
    assert not str(caught.value).endswith(".."), str(caught.value)


# --- 2. None given where the default is a column or a value ----------------------------------------------------------

FRAME = pd.DataFrame(
    {
        "num_input_tokens": [100, 200],
        "worker_type": ["decode", "decode"],
        "completed": [False, False],
        "mode": ["full_prompt"] * 2,
        "destination_missing_tokens": [10, 20],
    }
)


@pytest.mark.parametrize(
    "argument",
    [
        "worker_type",
        "completed",
        "mode",
        "destination_missing_tokens",
        "latency_ms",
        "per_block_ms",
        "per_message_ms",
        "blocks_per_message",
        "layer_group",
        "layerwise_min_tokens",
        "tp",
        "overlap",
        "scope",
        "kv_layout",
    ],
)
def test_none_is_never_taken_for_the_facades_default(argument):
    with pytest.raises(InputError, match=rf"^{argument}: is None, which is not a value of it\. Fix: "):
        pm.handoff_delays(FRAME, **NUMBERS, **{argument: None})


@pytest.mark.parametrize(
    "argument",
    [
        "latency_ms",
        "per_block_ms",
        "per_message_ms",
        "blocks_per_message",
        "layer_group",
        "layerwise_min_tokens",
        "tp",
        "overlap",
        "scope",
        "kv_layout",
    ],
)
def test_none_is_never_taken_for_the_numpy_apis_default(argument):
    with pytest.raises(InputError, match=rf"^{argument}: is None, which is not a value of it\. Fix: "):
        pm.handoff_delay_ms([100, 200], 1.0, 1000, **{argument: None})


def test_the_facades_refusal_of_none_names_the_column_it_would_read():
    with pytest.raises(InputError, match=r"leave it out to read the frame's column 'worker_type'"):
        pm.handoff_delays(FRAME, **NUMBERS, worker_type=None)


@pytest.mark.parametrize(
    "argument",
    [
        "state_bytes",
        "fallback_delay_ms",
        "block_size",
        "prefill_ms",
        "prefill_tokens_per_s",
        "num_layers",
        "decode_tp",
        "kv_cache_dtype",
        "connector",
    ],
)
def test_none_stays_the_default_where_the_default_is_none(argument):
    frame = FRAME.drop(columns=["worker_type", "completed"])
    got = pm.handoff_delays(frame, **NUMBERS, **{argument: None})
    np.testing.assert_array_equal(got.to_numpy(dtype=float), pm.handoff_delay_ms([100, 200], 1.0, 1000))


# --- 3. a column named like a value; text values ---------------------------------------------------------------------

CLASH = pd.DataFrame(
    {
        "num_input_tokens": [100, 200],
        "50": [1.0, 2.0],
        "1": [2, 2],
        "true": [0, 0],
        "nan": [1.0, 1.0],
        "": [1.0, 1.0],
        "1e6": [5.0, 5.0],
        "0": [1, 1],
    }
)


@pytest.mark.parametrize(
    ("argument", "text"),
    [
        ("kv_transfer_bandwidth", "50"),
        ("kv_transfer_bandwidth", "nan"),
        ("kv_transfer_bandwidth", ""),
        ("kv_bytes_per_token", "1e6"),
        ("latency_ms", "1"),
        ("completed", "true"),
        ("worker_type", "1"),
        ("mode", "0"),
        ("num_input_tokens", "1"),
        ("state_bytes", "1e6"),
    ],
)
def test_a_column_whose_name_reads_as_a_value_is_refused_as_ambiguous(argument, text):
    given = {**NUMBERS, "kv_bytes_per_token": 1e6, argument: text}
    with pytest.raises(
        InputError, match=rf"^{argument}: '{text}' is both a column of the frame and .*rename the column"
    ):
        pm.handoff_delays(CLASH, **given)


@pytest.mark.parametrize(
    "text",
    [
        dict(num_input_tokens="100"),
        dict(latency_ms="1"),
        dict(completed="true"),
        dict(completed="0"),
        dict(worker_type="2"),
        dict(kv_transfer_bandwidth="50"),
        dict(kv_bytes_per_token="1e6"),
        dict(state_bytes="10"),
        dict(mode="destination_missing", destination_missing_tokens="20"),
        dict(fallback_delay_ms="3", kv_bytes_per_token="NA"),
    ],
)
def test_text_values_read_as_the_numpy_api_reads_them(text):
    given = {"kv_transfer_bandwidth": 1.0, "kv_bytes_per_token": 1e6, **text}
    want = pm.handoff_delay_ms(**{"num_input_tokens": [100, 200], **given})
    got = pm.handoff_delays(pd.DataFrame({"num_input_tokens": [100, 200]}), **given)
    np.testing.assert_array_equal(got.to_numpy(dtype=float, na_value=np.nan), np.broadcast_to(want, (2,)))


# --- 5. an empty frame, and a column of models that holds none -------------------------------------------------------

MODELS = pd.DataFrame({"num_input_tokens": [1024, 32768], "model": ["llama-3.1-70b", "qwen3-8b"]}, index=["x", "y"])
SHAPED = [
    dict(tp=8),
    dict(kv_cache_dtype="fp8"),
    dict(per_message_ms=0.01, block_size=16),
    dict(overlap="layerwise", prefill_ms=5.0),
    dict(tp=8, decode_tp=2, scope="group"),
]


@pytest.mark.parametrize("options", SHAPED)
def test_an_empty_frame_gives_an_empty_float64_series(options):
    for empty in (MODELS.iloc[:0], MODELS[MODELS["num_input_tokens"] < 0]):
        got = pm.handoff_delays(empty, kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", **options)
        assert len(got) == 0 and str(got.dtype) == "Float64" and got.name == "handoff_delay_ms"
        assert got.index.equals(empty.index)


@pytest.mark.parametrize("options", SHAPED)
def test_a_column_of_models_that_holds_none_gives_missing_delays(options):
    frame = MODELS.assign(model=np.array([None, None], dtype=object))
    got = pm.handoff_delays(frame, kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", **options)
    assert got.isna().all() and str(got.dtype) == "Float64"
    fallback = pm.handoff_delays(
        frame, kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", fallback_delay_ms=3.0, **options
    )
    assert fallback.tolist() == [3.0, 3.0]
    np.testing.assert_array_equal(
        pm.handoff_delay_ms([1, 2], 50.0, np.array([None, None], dtype=object), **options), [np.nan, np.nan]
    )


def test_an_empty_frame_still_refuses_a_mistyped_column_and_a_bad_option():
    with pytest.raises(InputError, match="no column 'modle'"):
        pm.handoff_delays(MODELS.iloc[:0], kv_transfer_bandwidth=50.0, kv_bytes_per_token="modle", tp=8)
    with pytest.raises(InputError, match="scope"):
        pm.handoff_delays(MODELS.iloc[:0], kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", scope="team")


def test_numbers_with_tp_are_still_refused():
    with pytest.raises(InputError, match="holds numbers of bytes"):
        pm.handoff_delays(
            MODELS.assign(model=[1000.0, 2000.0]), kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", tp=8
        )


# --- 6. a column of clusters: every invalid row counted, the first in row order ---------------------------------------

MIXED = np.array([50.0, "hgx-h100-8x400g", 50.0, "hgx-h100-8x400g"], dtype=object)


def _message(function, *args, **keywords) -> str:
    with pytest.raises(InputError) as caught:
        function(*args, **keywords)
    return str(caught.value)


def test_a_cluster_column_counts_every_invalid_row():
    frame = pd.DataFrame({"num_input_tokens": [-1, -2, -3, 4], "kv_transfer_bandwidth": MIXED}, index=list("abcd"))
    got = _message(pm.handoff_delays, frame, kv_bytes_per_token="llama-3.1-70b")
    assert ": 3 invalid rows; first at row 'a': -1 (negative)" in got, got
    assert got == _message(
        pm.handoff_delays, frame.assign(kv_transfer_bandwidth=50.0), kv_bytes_per_token="llama-3.1-70b"
    )
    got = _message(pm.handoff_delay_ms, [-1, -2, -3, 4], MIXED, "llama-3.1-70b")
    assert got == _message(pm.handoff_delay_ms, [-1, -2, -3, 4], 50.0, "llama-3.1-70b")


def test_a_cluster_column_names_the_first_row_of_the_first_input_at_fault():
    frame = pd.DataFrame(
        {
            "num_input_tokens": [1, 2, -3, 4],
            "kv_transfer_bandwidth": MIXED,
            "kv_bytes_per_token": [-1.0, 10.0, 10.0, -5.0],
        },
        index=list("abcd"),
    )
    for rows in (frame, frame.assign(num_input_tokens=[1, 2, 3, 4])):
        got = _message(pm.handoff_delays, rows)
        assert got == _message(pm.handoff_delays, rows.assign(kv_transfer_bandwidth=50.0)), got


# --- 8. a layer count that is not the model's ------------------------------------------------------------------------

LAYERED = pd.DataFrame(
    {"num_input_tokens": [32768, 4096, 5, 7], "model": ["llama-3.1-70b", "llama-3.1-70b", "qwen3-8b", "qwen3-8b"]},
    index=list("wxyz"),
)
LAYERWISE = dict(kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", overlap="layerwise", prefill_ms=5.0)


def test_a_layer_count_that_is_not_the_models_names_the_row_label_and_the_count():
    got = _message(pm.handoff_delays, LAYERED, num_layers=80, **LAYERWISE)
    assert got.startswith("num_layers: 2 invalid rows; first at row 'y': 80 (") and "36" in got, got
    assert "errors='coerce'" not in got  # (they are refused whatever errors says)
    with pytest.raises(InputError, match=r"^column 'layers' \(num_layers\): 1 invalid row; first at row 'x': 36 "):
        pm.handoff_delays(LAYERED.assign(layers=[80, 36, 36, 36]), num_layers="layers", **LAYERWISE)
    with pytest.raises(InputError, match=r"^num_layers: 2 invalid rows; first at row 2: 80 "):
        pm.handoff_delay_ms(
            LAYERED["num_input_tokens"].to_numpy(),
            50.0,
            LAYERED["model"].to_numpy(),
            num_layers=80,
            overlap="layerwise",
            prefill_ms=5.0,
        )
    with pytest.raises(InputError, match=r"^num_layers: 36 layers, but the model given has 80"):
        pm.handoff_delay_ms(5, 50.0, "llama-3.1-70b", num_layers=36, overlap="layerwise", prefill_ms=5.0)


# --- minor: token counts beyond 2**53 from text ----------------------------------------------------------------------


@pytest.mark.parametrize("column", [["9007199254740993"], ["9007199254740993", None], [9007199254740993, None]])
def test_a_token_count_above_2_53_is_refused_from_text_and_objects(column):
    frame = pd.DataFrame({"num_input_tokens": pd.Series(column, dtype=object)})
    with pytest.raises(InputError, match=r"first at row 0: .*9007199254740993.* \(above 9007199254740992\)"):
        pm.handoff_delays(frame, **NUMBERS)
    with pytest.raises(InputError, match=r"above 9007199254740992"):
        pm.handoff_delay_ms(np.array(column, dtype=object), 1.0, 1.0)
