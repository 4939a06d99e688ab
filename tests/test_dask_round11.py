"""A hostile tester's findings on perfmodel.dask, round 11 (each test failed before its fix): the pandas facade's
numbers from a model column shaped by options, errors that name the partition and the row label, and columns of
objects that Dask turns into text."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

import perfmodel as pm  # noqa: E402
import perfmodel.dask as pmd  # noqa: E402
from perfmodel import InputError  # noqa: E402


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


MODELS = pd.DataFrame(
    {
        "num_input_tokens": [1024, 32768, 4096, 128],
        "model": ["llama-3.1-70b", "qwen3-8b", "llama-3.1-8b", "llama-3.1-70b"],
    },
    index=list("pqrs"),
)


@pytest.mark.parametrize(
    "options",
    [
        dict(tp=8),
        dict(kv_cache_dtype="fp8"),
        dict(per_message_ms=0.01, block_size=16),
        dict(overlap="layerwise", prefill_ms=5.0),
        dict(tp=8, decode_tp=2, scope="group"),
    ],
)
def test_a_model_column_with_options_that_shape_its_bytes_computes_as_pandas(options):
    keywords = dict(kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", **options)
    lazy = pmd.handoff_delays(dd.from_pandas(MODELS, npartitions=2), **keywords)
    pd.testing.assert_series_equal(lazy.compute(), pm.handoff_delays(MODELS, **keywords), check_index_type=False)


def _message(lazy) -> str:
    with pytest.raises(InputError) as caught:
        lazy.compute()
    return str(caught.value)


def test_an_error_in_the_rows_names_its_partition_and_the_rows_label():
    frame = pd.DataFrame({"num_input_tokens": [1, -1, 2, -3, 4, -5]}, index=list("fdbcea"))
    ddf = dd.from_pandas(frame, npartitions=3, sort=False)
    message = _message(pmd.handoff_delays(ddf, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1.0))
    found = re.search(
        r": 1 invalid row; first at row '(\w)' of partition (\d) \(of 0 to 2; the count is this "
        r"partition's\): (-\d)",
        message,
    )
    assert found, message
    part = ddf.partitions[int(found.group(2))].compute()
    assert part.loc[found.group(1), "num_input_tokens"] == int(found.group(3))


def test_a_layer_count_that_is_not_the_models_names_the_row_label_in_dask():
    frame = pd.DataFrame(
        {"num_input_tokens": [32768, 4096, 5], "model": ["llama-3.1-70b", "llama-3.1-70b", "qwen3-8b"]},
        index=["x", "y", "z"],
    )
    lazy = pmd.handoff_delays(
        dd.from_pandas(frame, npartitions=2),
        kv_transfer_bandwidth=50.0,
        kv_bytes_per_token="model",
        overlap="layerwise",
        prefill_ms=5.0,
        num_layers=80,
    )
    message = _message(lazy)
    assert "1 invalid row; first at row 'z' of partition 1 (of 0 to 1; the count is this partition's): 80" in message
    assert "errors='coerce'" not in message  # (they are refused whatever errors says)


MINE = pm.Link(name="mine", bandwidth_gb_s=10.0, latency_ms=1.0)
CONFIG = {"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(
    ("column", "values"),
    [("kv_transfer_bandwidth", [MINE, "ib-ndr"]), ("kv_bytes_per_token", [CONFIG, "llama-3.1-8b"])],
)
def test_objects_that_dask_turned_into_text_are_refused_naming_the_cause(column, values):
    frame = pd.DataFrame({"num_input_tokens": [1024, 128], column: np.array(values, dtype=object)})
    other = {"kv_transfer_bandwidth": 50.0, "kv_bytes_per_token": "llama-3.1-8b"}
    other.pop(column)
    with dask.config.set({"dataframe.convert-string": True}):
        ddf = dd.from_pandas(frame, npartitions=1)
    message = _message(pmd.handoff_delays(ddf, **other))
    assert "dataframe.convert-string" in message and "the text of a Python object" in message, message
    with dask.config.set({"dataframe.convert-string": False}):
        kept = dd.from_pandas(frame, npartitions=1)
    pd.testing.assert_series_equal(pmd.handoff_delays(kept, **other).compute(), pm.handoff_delays(frame, **other))


def test_numpy_float32_numbers_in_an_object_column_give_pandas_numbers_when_dask_keeps_them():
    frame = pd.DataFrame(
        {"num_input_tokens": [4096, 128], "kv_transfer_bandwidth": np.array([np.float32(1.1), "ib-ndr"], dtype=object)}
    )
    with dask.config.set({"dataframe.convert-string": False}):
        kept = dd.from_pandas(frame, npartitions=2)
    lazy = pmd.handoff_delays(kept, kv_bytes_per_token="llama-3.1-8b")
    pd.testing.assert_series_equal(lazy.compute(), pm.handoff_delays(frame, kv_bytes_per_token="llama-3.1-8b"))


def test_an_empty_dask_frame_gives_an_empty_float64_series():
    empty = dd.from_pandas(MODELS.iloc[:0], npartitions=1)
    got = pmd.handoff_delays(empty, kv_transfer_bandwidth=50.0, kv_bytes_per_token="model", tp=8).compute()
    assert len(got) == 0 and str(got.dtype) == "Float64"
