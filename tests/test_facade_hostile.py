"""A hostile tester's findings on the facade, the inputs and the model configs (each test failed before its fix)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel as pm
from perfmodel import InputError

# --- 1. a label that is also a column of the frame ------------------------------------------------------------


@pytest.mark.parametrize(
    ("argument", "label", "extra"),
    [("worker_type", "decode", {}), ("mode", "full_prompt", {"destination_missing_tokens": [10, 10]})],
)
def test_a_label_that_is_also_a_column_is_refused_as_ambiguous(argument, label, extra):
    df = pd.DataFrame({"num_input_tokens": [100, 200], label: [1, 1], **extra})
    with pytest.raises(InputError, match=rf"{argument}: '{label}' is both a column of the frame and a"):
        pm.handoff_delays(df, **{argument: label}, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6)


def test_a_label_clash_reads_as_the_preset_clash_does():
    df = pd.DataFrame({"num_input_tokens": [1], "decode": [1], "ib-ndr": [1.0]})
    messages = []
    for kw in ({"worker_type": "decode", "kv_transfer_bandwidth": 1.0}, {"kv_transfer_bandwidth": "ib-ndr"}):
        with pytest.raises(InputError) as caught:
            pm.handoff_delays(df, kv_bytes_per_token=1e6, **kw)
        messages.append(str(caught.value))
    assert all("is both a column of the frame and" in m and "rename the column" in m for m in messages)


def test_a_label_without_a_clash_still_reads_as_a_label():
    df = pd.DataFrame({"num_input_tokens": [100, 200], "decode_x": [1, 1]})
    out = pm.handoff_delays(df, worker_type="decode", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6)
    assert out.isna().all()
    out = pm.handoff_delays(df, mode="full_prompt", kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6)
    assert out.tolist() == [100.0, 200.0]


# --- 2 and 10. Falcon configs, and one reading of heads -------------------------------------------------------

FALCON_40B = {  # falcon-40b's shape, by hand (transformers' FalconConfig field names)
    "model_type": "falcon",
    "num_hidden_layers": 60,
    "num_attention_heads": 128,
    "num_kv_heads": 8,
    "new_decoder_architecture": True,
    "multi_query": True,
    "hidden_size": 8192,
    "torch_dtype": "bfloat16",
}
FALCON_7B = {  # falcon-7b's shape, by hand: multi-query, the old decoder architecture
    "model_type": "falcon",
    "num_hidden_layers": 32,
    "num_attention_heads": 71,
    "multi_query": True,
    "new_decoder_architecture": False,
    "hidden_size": 4544,
    "torch_dtype": "bfloat16",
}


def test_falcon_40b_shape_has_its_8_kv_heads():
    assert pm.kv_bytes_per_token(FALCON_40B) == 2 * 60 * 8 * 64 * 2  # 122,880
    assert pm.kv_heads(FALCON_40B) == 8
    no_mq = {**FALCON_40B, "multi_query": False}
    assert pm.kv_bytes_per_token(no_mq) == 2 * 60 * 8 * 64 * 2
    alias = {k: v for k, v in FALCON_40B.items() if k != "num_kv_heads"} | {"n_head_kv": 8}
    assert pm.kv_bytes_per_token(alias) == 2 * 60 * 8 * 64 * 2


def test_falcon_7b_shape_has_one_kv_head():
    assert pm.kv_bytes_per_token(FALCON_7B) == 2 * 32 * 1 * 64 * 2  # 8,192
    assert pm.kv_heads(FALCON_7B) == 1
    default_mq = {k: v for k, v in FALCON_7B.items() if k != "multi_query"}  # FalconConfig's default: multi_query
    assert pm.kv_bytes_per_token(default_mq) == 2 * 32 * 1 * 64 * 2


def test_falcon_without_multi_query_has_num_kv_heads_or_every_head():
    rw = {**FALCON_7B, "multi_query": False}
    assert pm.kv_bytes_per_token(rw) == 2 * 32 * 71 * 64 * 2
    assert pm.kv_heads(rw) == 71


def test_kv_heads_refuses_what_kv_bytes_per_token_refuses():
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 16, "hidden_size": 512}
    with pytest.raises(InputError, match="16 is more than the 8 attention heads"):
        pm.kv_bytes_per_token(cfg)
    with pytest.raises(InputError, match="16 is more than the 8 attention heads"):
        pm.kv_heads(cfg)
    falcon = {**FALCON_40B, "num_kv_heads": 256}
    with pytest.raises(InputError, match="'num_kv_heads'.*256 is more than the 128"):
        pm.kv_heads(falcon)


# --- 9. layer_types -------------------------------------------------------------------------------------------

_TWO_LAYERS = {"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512}


def test_a_null_layer_type_is_refused_naming_its_position():
    with pytest.raises(InputError, match=r"'layer_types'.*entry 1 is None"):
        pm.kv_bytes_per_token({**_TWO_LAYERS, "layer_types": ["full_attention", None]})


def test_layer_types_as_text_is_refused_as_not_a_list():
    with pytest.raises(InputError, match=r"'layer_types'.*'full_attention' is not a list"):
        pm.kv_bytes_per_token({**_TWO_LAYERS, "layer_types": "full_attention"})


def test_layer_types_of_the_wrong_length_is_an_input_error():
    with pytest.raises(InputError, match=r"'layer_types'.*3 layer_types for 2 layers"):
        pm.kv_bytes_per_token({**_TWO_LAYERS, "layer_types": ["full_attention"] * 3})


# --- 3. text in a bandwidth or bytes column reads one way everywhere ----------------------------------------


@pytest.mark.parametrize(
    ("bandwidth", "per_token", "expected"),
    [
        (np.array(["1", "NA"], dtype=object), 1e6, [1.0, np.nan]),
        ([1.0, ""], 1e6, [1.0, np.nan]),
        (1.0, ["1000", "null"], [0.001, np.nan]),
        (["1.0", "nan"], 1e6, [1.0, np.nan]),
        (["ib-ndr", "NA"], 1e6, [0.02, np.nan]),
        (1.0, ["llama-3.1-8b", "None"], [0.131072, np.nan]),
    ],
)
def test_missing_markers_and_number_text_in_a_list(bandwidth, per_token, expected):
    out = pm.handoff_delay_ms([1, 1], bandwidth, per_token)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_number_text_as_a_scalar_is_the_number():
    assert (
        pm.handoff_delay_ms(1, "50", 1e6)
        == pm.handoff_delay_ms(1, 50.0, 1e6)
        == pm.handoff_delay_ms([1], ["50"], 1e6)[0]
    )
    assert pm.handoff_delay_ms(1, 1.0, "1000") == pm.handoff_delay_ms(1, 1.0, 1000.0)
    assert np.isnan(pm.handoff_delay_ms(1, "NA", 1e6))


def test_a_csv_column_read_without_missing_markers():
    import io

    text = "num_input_tokens,kv_transfer_bandwidth,kv_bytes_per_token\n1,NA,1000\n2,1,1000\n"
    out = pm.handoff_delays(pd.read_csv(io.StringIO(text), keep_default_na=False))
    assert out.isna().tolist() == [True, False] and out.iloc[1] == 0.002


# --- 4 and 5. errors name the column, the rows and the first row's label --------------------------------------


def test_an_unknown_link_in_a_column_names_the_column_the_count_and_the_label():
    df = pd.DataFrame({"num_input_tokens": [1, 1, 1], "l": ["ib-ndr", "nope", "nope"]}, index=["a", "b", "c"])
    with pytest.raises(
        InputError,
        match=r"^column 'l' \(kv_transfer_bandwidth\): 2 invalid rows; first at row 'b': "
        r"'nope' \(unknown link 'nope'\)",
    ):
        pm.handoff_delays(df, kv_transfer_bandwidth="l", kv_bytes_per_token=1000)


def test_an_unknown_model_in_a_column_names_the_count_and_the_label():
    df = pd.DataFrame({"num_input_tokens": [1, 1], "m": ["llama-3.1-8b", "llama-3.1-8c"]}, index=["a", "b"])
    with pytest.raises(
        InputError,
        match=r"^column 'm' \(kv_bytes_per_token\): 1 invalid row; first at row 'b': "
        r"'llama-3.1-8c' \(model 'llama-3.1-8c': not a preset",
    ):
        pm.handoff_delays(df, kv_transfer_bandwidth=1.0, kv_bytes_per_token="m")


def test_an_unknown_link_in_an_array_names_the_argument_and_the_position():
    with pytest.raises(InputError, match=r"^kv_transfer_bandwidth: 1 invalid row; first at row 1: 'nope'"):
        pm.handoff_delay_ms([1, 1], ["ib-ndr", "nope"], 1000)
    np.testing.assert_array_equal(
        np.isnan(pm.handoff_delay_ms([1, 1], ["ib-ndr", "nope"], 1000, errors="coerce")), [False, True]
    )


def test_a_name_that_is_neither_a_column_nor_a_preset_says_both():
    df = pd.DataFrame({"num_input_tokens": [1], "bandwidth": [1.0]})
    with pytest.raises(
        InputError,
        match=r"^kv_transfer_bandwidth: no column 'bw' in the frame \(it has "
        r"\['num_input_tokens', 'bandwidth'\]\), and unknown link 'bw'",
    ):
        pm.handoff_delays(df, kv_transfer_bandwidth="bw", kv_bytes_per_token=1000)


def test_a_series_argument_names_the_row_by_its_label():
    df = pd.DataFrame({"num_input_tokens": [1, 1, 1, 1]}, index=list("abcd"))
    bandwidth = pd.Series([1.0, 1.0, -2.0, 1.0], index=list("dcba"))
    with pytest.raises(InputError, match=r"^kv_transfer_bandwidth: 1 invalid row; first at row 'b': -2.0 \(negative"):
        pm.handoff_delays(df, kv_transfer_bandwidth=bandwidth, kv_bytes_per_token=1000)


def test_other_invalid_rows_name_their_column():
    df = pd.DataFrame({"num_input_tokens": [-1, 1], "bw": [1.0, -1.0]}, index=["a", "b"])
    with pytest.raises(InputError, match=r"other invalid rows: column 'bw' \(kv_transfer_bandwidth\) 1"):
        pm.handoff_delays(df, kv_transfer_bandwidth="bw", kv_bytes_per_token=1000)


# --- 6, 7, 8, 12. messages of the numpy layer -----------------------------------------------------------------


def test_out_says_which_condition_failed():
    out = np.empty(10)
    out.setflags(write=False)
    with pytest.raises(InputError, match=r"^out: is read-only"):
        pm.handoff_delay_ms(np.arange(10), 2.0, 1000.0, out=out)
    with pytest.raises(InputError, match=r"^out: is not C-contiguous"):
        pm.handoff_delay_ms(np.arange(5), 2.0, 1000.0, out=np.empty(10)[::2])
    with pytest.raises(InputError, match=r"^out: has length 9; it must be of length 10"):
        pm.handoff_delay_ms(np.arange(10), 2.0, 1000.0, out=np.empty(9))


def test_a_whole_fraction_is_a_whole_number():
    from fractions import Fraction

    assert pm.handoff_delay_ms(Fraction(128, 1), 1.0, 1e6) == 128.0
    with pytest.raises(InputError, match=r"Fraction\(1, 2\) is not a whole number"):
        pm.handoff_delay_ms(Fraction(1, 2), 1.0, 1e6)


@pytest.mark.parametrize("tokens", [[2**53 + 1], 2**53 + 1, np.array([2**53 + 1], np.uint64)])
def test_tokens_just_above_2_53_are_refused(tokens):
    with pytest.raises(InputError, match="above 9007199254740992"):
        pm.handoff_delay_ms(tokens, 1.0, 1.0)
    assert pm.handoff_delay_ms(np.array([2**53]), 1.0, 1.0)[0] == pm.handoff_delay_ms(
        2.0**53, 1.0, 1.0
    )  # (2**53 is in)


def test_one_row_is_one_row():
    with pytest.raises(InputError, match=r"kv_transfer_bandwidth has 1 row\)"):
        pm.handoff_delay_ms([1, 2, 3], [1.0], 1e6)


def test_numbers_in_a_column_of_models_are_shown_as_given():
    with pytest.raises(InputError, match=r"first at row 1: -5 \(negative"):
        pm.handoff_delay_ms([1, 1], 1.0, np.array(["llama-3.1-8b", -5], dtype=object))


# --- 11. Dask keywords ---------------------------------------------------------------------------------------


def test_dask_refuses_an_unknown_keyword_when_the_graph_is_built():
    dd = pytest.importorskip("dask.dataframe")
    import perfmodel.dask as pmd

    ddf = dd.from_pandas(pd.DataFrame({"num_input_tokens": [1, 2]}), npartitions=1)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bogus'"):
        pmd.handoff_delays(ddf, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6, bogus=1)
    with pytest.raises(TypeError, match=r"'kv_bytes_per_tokens'.*did you mean kv_bytes_per_token"):
        pmd.handoff_delays(ddf, kv_transfer_bandwidth=1.0, kv_bytes_per_tokens=1e6)


def test_an_int64_array_is_read_as_the_kernel_reads_it() -> None:
    """An int64 array, the kernel's own dtype, is not scanned again for the bound (a pass over every row): the
    kernel reads it as float64, in which 2**53 + 1 is 2**53, and prices that, the same delay to the last bit;
    2**53 + 2 is refused."""
    assert pm.handoff_delay_ms(np.array([2**53 + 1]), 1.0, 1.0)[0] == pm.handoff_delay_ms(2.0**53, 1.0, 1.0)
    with pytest.raises(InputError, match="above 9007199254740992"):
        pm.handoff_delay_ms(np.array([2**53 + 2]), 1.0, 1.0)
