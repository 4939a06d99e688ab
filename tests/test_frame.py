"""The pandas facade and the df.perfmodel accessor, against the numpy-level function."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import pandas as hpd

import perfmodel
from perfmodel import LINKS, InputError, Link, handoff_delay_ms, handoff_delays


def _frame(n=6, index=None):
    return pd.DataFrame(
        {
            "num_input_tokens": np.arange(n) * 1000,
            "kv_transfer_bandwidth": np.linspace(10, 60, n),
            "kv_bytes_per_token": np.full(n, 131_072),
            "worker_type": ["prefill", "decode", "prefill", "aggregated", "prefill", "prefill"][:n],
            "completed": [True, True, False, True, True, True][:n],
        },
        index=index,
    )


def _expected(df: pd.DataFrame, **kw) -> np.ndarray:
    return handoff_delay_ms(
        df["num_input_tokens"].to_numpy("float64", na_value=np.nan),
        df["kv_transfer_bandwidth"].to_numpy("float64", na_value=np.nan),
        df["kv_bytes_per_token"].to_numpy("float64", na_value=np.nan),
        worker_type=df["worker_type"].astype(object).to_numpy(),
        completed=df["completed"].to_numpy(),
        **kw,
    )


def _assert_matches(result: pd.Series, expected: np.ndarray, df: pd.DataFrame):
    assert result.name == "handoff_delay_ms" and result.dtype == "Float64"
    assert result.index.equals(df.index)
    np.testing.assert_array_equal(result.to_numpy("float64", na_value=np.nan), expected)


def test_result_is_named_nullable_and_aligned():
    df = _frame()
    result = handoff_delays(df)
    _assert_matches(result, _expected(df), df)
    assert result.isna().tolist() == [False, True, True, True, False, False]


@pytest.mark.parametrize(
    "tokens", ["int64", "Int64", "float64", "Float64", "int32", "int64[pyarrow]", "double[pyarrow]", "uint32"]
)
@pytest.mark.parametrize("worker", ["object", "category", "str", "string[pyarrow]", "codes-int8", "codes-Int64"])
def test_every_dtype_combination_equals_numpy_level(tokens, worker):
    df = _frame()
    codes = df["worker_type"].map({"aggregated": 0, "prefill": 1, "decode": 2})
    df["num_input_tokens"] = df["num_input_tokens"].astype(tokens)
    df["worker_type"] = {"codes-int8": codes.astype("int8"), "codes-Int64": codes.astype("Int64")}.get(
        worker, df["worker_type"].astype(worker) if not worker.startswith("codes") else None
    )
    _assert_matches(handoff_delays(df), _expected(_frame()), df)


def test_nullable_na_gives_na():
    df = _frame()
    df["num_input_tokens"] = pd.array([1000, None, 3000, 4000, 5000, None], dtype="Int64")
    df["kv_transfer_bandwidth"] = pd.array([10, 20, 30, 40, None, 60], dtype="Float64")
    result = handoff_delays(df)
    assert result.isna().tolist() == [False, True, True, True, True, True]


@pytest.mark.parametrize(
    "index",
    [
        pd.Index(["a", "b", "c", "d", "e", "f"]),
        pd.Index([3, 3, 1, 1, 0, 0]),  # non-unique
        pd.MultiIndex.from_product([["x", "y"], [1, 2, 3]], names=["host", "req"]),
        pd.date_range("2026-01-01", periods=6, freq="s"),
    ],
)
def test_index_is_preserved(index):
    df = _frame(index=index)
    _assert_matches(handoff_delays(df), _expected(df), df)


def test_empty_frame():
    df = _frame().iloc[:0]
    result = handoff_delays(df)
    assert len(result) == 0 and result.dtype == "Float64"


def test_defaults_when_optional_columns_are_absent():
    df = pd.DataFrame({"num_input_tokens": [128], "kv_transfer_bandwidth": [1.0], "kv_bytes_per_token": [1e6]})
    assert handoff_delays(df).tolist() == [128.0]


def test_column_names_and_values_mix():
    df = pd.DataFrame({"prompt": [100, 200], "gbps": [1.0, 2.0]})
    result = handoff_delays(
        df,
        num_input_tokens="prompt",
        kv_transfer_bandwidth="gbps",
        kv_bytes_per_token=1000,
        worker_type="prefill",
        latency_ms=np.array([0.0, 1.0]),
    )
    assert result.tolist() == [0.1, 0.1 + 1.0]


def test_all_values_broadcast_to_the_frame():
    df = pd.DataFrame(index=range(3))
    result = handoff_delays(df, num_input_tokens=128, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6)
    assert result.tolist() == [128.0] * 3


def test_model_and_link_names():
    df = pd.DataFrame({"num_input_tokens": [32_768, 4096]})
    result = handoff_delays(df, kv_transfer_bandwidth="ib-ndr", kv_bytes_per_token="llama-3.1-70b")
    np.testing.assert_allclose(result.to_numpy(float), np.array([32_768, 4096]) * 327_680 / 50e9 * 1e3)
    fp8_tp8 = handoff_delays(
        df, kv_transfer_bandwidth="8x ib-ndr", kv_bytes_per_token="llama-3.1-70b", kv_cache_dtype="fp8", tp=8
    )
    np.testing.assert_allclose(fp8_tp8.to_numpy(float), np.array([32_768, 4096]) * (327_680 / 16) / 400e9 * 1e3)


def test_columns_of_model_and_link_names_and_link_latency():
    df = pd.DataFrame(
        {
            "num_input_tokens": [1000, 1000, 1000],
            "model": pd.Categorical(["llama-3.1-8b", "deepseek-v3", "llama-3.1-8b"]),
            "link": ["nvlink4", "ib-ndr", "slow"],
        }
    )
    slow = Link("slow", 1.0, latency_ms=2.0)
    df["link"] = [LINKS["nvlink4"], LINKS["ib-ndr"], slow]
    result = handoff_delays(df, kv_bytes_per_token="model", kv_transfer_bandwidth="link")
    expected = [1000 * 131_072 / 450e9 * 1e3, 1000 * 70_272 / 50e9 * 1e3, 1000 * 131_072 / 1e9 * 1e3 + 2.0]
    np.testing.assert_allclose(result.to_numpy(float), expected, rtol=1e-15)


def test_accessor_and_pipe():
    df = _frame()
    kw = dict(fallback_delay_ms=0.0)
    pd.testing.assert_series_equal(df.perfmodel.handoff_delay(**kw), handoff_delays(df, **kw))  # (NA: numpy 1.24's
    # assert_array_equal compares pd.NA elementwise and fails)
    chained = (
        df.pipe(lambda d: d[d["completed"]])
        .perfmodel.assign_handoff_delay(**kw)
        .groupby("worker_type")["handoff_delay_ms"]
        .sum()
    )
    assert chained["prefill"] == pytest.approx(handoff_delays(df[df["completed"]]).sum())
    assert "handoff_delay_ms" not in df.columns  # the input frame is untouched


def test_errors_name_column_and_row_label():
    df = _frame(index=pd.Index(list("abcdef"), name="request"))
    df.loc["d", "num_input_tokens"] = -7
    with pytest.raises(ValueError) as info:
        handoff_delays(df)
    message = str(info.value)
    assert message.startswith("column 'num_input_tokens' (num_input_tokens): 1 invalid row; first at row 'd': -7")
    assert "errors='coerce'" in message
    coerced = handoff_delays(df, errors="coerce")
    assert pd.isna(coerced["d"]) and coerced["a"] == 0.0


def test_unknown_worker_label_lists_valid_labels():
    df = _frame(index=pd.RangeIndex(10, 16))
    df["worker_type"] = df["worker_type"].replace("decode", "decoder").astype("category")
    with pytest.raises(
        ValueError,
        match=r"column 'worker_type' \(worker_type\): 1 invalid row; first at row 11: "
        r"'decoder' \(not a valid worker type; valid: 'aggregated', 'prefill', 'decode'\)",
    ):
        handoff_delays(df)


def test_missing_required_column_lists_columns():
    df = pd.DataFrame({"tokens": [1], "bw": [1.0]})
    with pytest.raises(ValueError, match=r"no column 'num_input_tokens' \(it has \['tokens', 'bw'\]\)"):
        handoff_delays(df, kv_transfer_bandwidth="bw", kv_bytes_per_token=1)


def test_unknown_model_name_in_a_column_is_named():
    df = pd.DataFrame({"num_input_tokens": [1], "model": ["llama-9"]})
    with pytest.raises(
        ValueError,
        match="column 'model' \\(kv_bytes_per_token\\): 1 invalid row; first at row 0: 'llama-9' \\(model 'llama-9'",
    ):
        handoff_delays(df, kv_transfer_bandwidth=1.0, kv_bytes_per_token="model")


def test_value_arrays_must_match_the_frame():
    df = pd.DataFrame({"num_input_tokens": [1, 2, 3]})
    with pytest.raises(ValueError, match="different lengths"):
        handoff_delays(df, kv_transfer_bandwidth=[1.0, 2.0], kv_bytes_per_token=1)
    with pytest.raises(
        ValueError, match=r"\(num_input_tokens, kv_transfer_bandwidth\) have 2 rows but the frame has 3"
    ):
        handoff_delays(df, num_input_tokens=[1, 2], kv_transfer_bandwidth=[1.0, 2.0], kv_bytes_per_token=1)


def test_dtype_and_tp_need_a_model():
    df = pd.DataFrame({"num_input_tokens": [1]})
    with pytest.raises(ValueError, match="kv_cache_dtype, tp, decode_tp and scope apply to model names"):
        handoff_delays(df, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1000, tp=8)


def test_inputs_are_not_modified():
    df = _frame()
    before = df.copy(deep=True)
    handoff_delays(df)
    pd.testing.assert_frame_equal(df, before)


@given(
    hpd.data_frames(
        [
            hpd.column("num_input_tokens", elements=st.one_of(st.none(), st.integers(0, 10**7)), dtype=object),
            hpd.column(
                "kv_transfer_bandwidth", elements=st.one_of(st.none(), st.floats(0, 1e4), st.just(np.inf)), dtype=object
            ),
            hpd.column("kv_bytes_per_token", elements=st.integers(0, 10**6), dtype="int64"),
            hpd.column(
                "worker_type", elements=st.sampled_from(["prefill", "decode", "aggregated", None]), dtype=object
            ),
            hpd.column("completed", elements=st.booleans(), dtype=bool),
        ],
        index=hpd.indexes(elements=st.integers(-5, 5), max_size=12),
    )
)
def test_hypothesis_frames_with_na(df):
    df["num_input_tokens"] = df["num_input_tokens"].astype("Int64")
    df["kv_transfer_bandwidth"] = df["kv_transfer_bandwidth"].astype("Float64")
    df["worker_type"] = df["worker_type"].astype("category")
    result = handoff_delays(df, errors="coerce")
    worker = df["worker_type"].astype(object).where(df["worker_type"].notna(), "missing").to_numpy()
    expected = handoff_delay_ms(
        df["num_input_tokens"].to_numpy("float64", na_value=np.nan),
        df["kv_transfer_bandwidth"].to_numpy("float64", na_value=np.nan),
        df["kv_bytes_per_token"].to_numpy(),
        worker_type=worker,
        completed=df["completed"].to_numpy(),
        errors="coerce",
    )
    _assert_matches(result, expected, df)
    assert result.isna().sum() >= (df["worker_type"] != "prefill").sum()


def test_top_level_exports():
    assert perfmodel.handoff_delays is handoff_delays


def test_large_categorical_columns_spread_like_small_ones():
    # from 4096 rows a compiled pass spreads category codes (int8 codes: a 256-entry table, -1 = missing);
    # it must give what numpy's own indexing gives below that size, missing and unknown labels included
    rng = np.random.default_rng(8)
    labels = rng.choice(np.array(["prefill", "decode", "aggregated", "oracle", None], dtype=object), 10_000)
    df = pd.DataFrame(
        {
            "num_input_tokens": rng.integers(0, 5000, 10_000),
            "worker_type": pd.Categorical(labels),
            "model": pd.Categorical(rng.choice(["gpt-oss-20b", "llama-3.1-8b", "nope", None], 10_000)),
        }
    )
    whole = perfmodel.handoff_delays(df, kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", errors="coerce")
    parts = pd.concat(
        [
            perfmodel.handoff_delays(
                df.iloc[i : i + 1000], kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", errors="coerce"
            )
            for i in range(0, 10_000, 1000)
        ]
    )
    pd.testing.assert_series_equal(whole, parts)
    prefill = (labels == "prefill") & np.isin(df["model"].astype(object), ["gpt-oss-20b", "llama-3.1-8b"])
    assert (whole.notna().to_numpy() == prefill).all()


def _mixed_frame(n: int = 40) -> pd.DataFrame:
    """Columns of every kind the facade reads: numpy, nullable, categorical, Arrow and object text, NA rows."""
    rng = np.random.default_rng(7)
    workers = rng.choice(["prefill", "decode", "aggregated"], n)
    return pd.DataFrame(
        {
            "num_input_tokens": pd.array(rng.integers(0, 5000, n), dtype="Int64"),
            "kv_transfer_bandwidth": rng.choice([50.0, 0.0, np.nan], n),
            "kv_bytes_per_token": rng.integers(1, 10_000, n),
            "worker_type": pd.Categorical(workers),
            "mode": pd.array(rng.choice(["full_prompt", "destination_missing"], n), dtype=pd.StringDtype("pyarrow")),
            "destination_missing_tokens": np.where(rng.random(n) > 0.1, rng.integers(0, 64, n), np.nan),
            "completed": rng.random(n) > 0.2,
            "text workers": np.array(workers, dtype=object),
        },
        index=pd.Index([f"r{i}" for i in range(n)]),
    )


def test_duplicate_column_labels_are_refused_clearly():
    df = pd.DataFrame([[1, 2, 3.0]], columns=["num_input_tokens", "num_input_tokens", "kv_transfer_bandwidth"])
    with pytest.raises(InputError, match="DataFrame with columns"):
        handoff_delays(df, kv_bytes_per_token=1000)


def test_a_column_labelled_none_is_never_an_argument_left_out():
    """None means "not given": a frame's column labelled None must not become state_bytes (or any
    other argument whose default is None) behind the user's back."""
    df = pd.DataFrame({"num_input_tokens": [100, 200], "kv_transfer_bandwidth": [1.0, 1.0], None: [5e6, 5e6]})
    pd.testing.assert_series_equal(
        handoff_delays(df, kv_bytes_per_token=1000),
        handoff_delays(df[["num_input_tokens", "kv_transfer_bandwidth"]], kv_bytes_per_token=1000),
    )


def test_a_frame_of_one_2d_block_reads_its_strided_columns_right():
    """A frame built from one C-ordered 2-D array stores its columns strided: each is read right."""
    values = np.array([[100.0, 1.0, 1000.0], [200.0, 2.0, 10.0], [0.0, 4.0, 5.0]])
    df = pd.DataFrame(values, columns=["num_input_tokens", "kv_transfer_bandwidth", "kv_bytes_per_token"])
    np.testing.assert_array_equal(
        handoff_delays(df).to_numpy(dtype=float), handoff_delay_ms(values[:, 0], values[:, 1], values[:, 2])
    )


@pytest.mark.parametrize(
    "index",
    [
        pd.RangeIndex(4),
        pd.Index(["a", "b", "c", "d"]),
        pd.Index([3, 3, 1, 1]),
        pd.MultiIndex.from_product([["x", "y"], [1, 2]], names=["host", "req"]),
        pd.date_range("2026-01-01", periods=4, freq="s", tz="UTC"),
    ],
)
def test_result_is_a_nullable_series_on_the_frames_index(index):
    """The facade's Series: the frame's index, its name, Float64 with <NA> where no handoff applies, and a
    result the caller can write to without touching the frame."""
    df = pd.DataFrame(
        {"num_input_tokens": [4096, 0, 100, 5], "worker_type": ["prefill", "decode", "prefill", "x"]}, index=index
    )
    result = handoff_delays(df, kv_transfer_bandwidth=50.0, kv_bytes_per_token=1000, errors="coerce")
    assert result.index is df.index and result.name == "handoff_delay_ms" and str(result.dtype) == "Float64"
    assert result.isna().tolist() == [False, True, False, True] and result.flags.allows_duplicate_labels
    before = df.copy()
    result.iloc[0] = -1.0
    assert result.iloc[0] == -1.0
    pd.testing.assert_frame_equal(df, before)


def test_categories_in_another_order_are_read_in_their_own_order():
    """Unordered categoricals with the same categories in another order are equal dtypes to pandas (and
    hash alike), but their codes mean other labels: what the facade remembers of one must not answer
    for the other."""
    first = pd.Categorical(["prefill", "decode", "prefill"], categories=["prefill", "decode"])
    second = pd.Categorical(["prefill", "decode", "prefill"], categories=["decode", "prefill"])
    assert first.dtype == second.dtype and hash(first.dtype) == hash(second.dtype)
    expected = [4.096, np.nan, 4.096]
    for labels in (first, second, first, second):
        df = pd.DataFrame({"num_input_tokens": [4096] * 3, "worker_type": labels})
        np.testing.assert_array_equal(
            handoff_delays(df, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1000).to_numpy(
                dtype=float, na_value=np.nan
            ),
            expected,
        )
        np.testing.assert_array_equal(handoff_delay_ms([4096] * 3, 1.0, 1000, worker_type=labels), expected)


def test_a_name_that_is_both_a_column_and_a_preset_is_refused_and_a_mistyped_column_is_named():
    """A pivoted sweep has a column 'ib-ndr': kv_transfer_bandwidth='ib-ndr' read its delays as GB/s."""
    wide = pd.DataFrame({"num_input_tokens": [1024, 32768], "ib-ndr": [6.7, 214.7], "bandwidth": [5.0, 5.0]})
    with pytest.raises(InputError, match="'ib-ndr' is both a column of the frame and a preset's name"):
        wide.perfmodel.handoff_delay(kv_bytes_per_token="llama-3.1-8b", kv_transfer_bandwidth="ib-ndr")
    with pytest.raises(InputError, match=r"no column 'bandwith' \(did you mean the column 'bandwidth'\?\)"):
        wide.perfmodel.handoff_delay(kv_bytes_per_token="llama-3.1-8b", kv_transfer_bandwidth="bandwith")
    assert wide.perfmodel.handoff_delay(kv_bytes_per_token=1000.0, kv_transfer_bandwidth=wide["ib-ndr"]).notna().all()
