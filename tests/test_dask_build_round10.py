"""perfmodel.dask.handoff_delays checks the names it is given as the graph is built: a mistyped column or preset
fails at the call, in the pandas facade's words, not later at compute on a worker."""

from __future__ import annotations

import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")

import perfmodel  # noqa: E402
import perfmodel.dask as pmd  # noqa: E402
from perfmodel.errors import InputError  # noqa: E402


@pytest.fixture(scope="module")
def ddf():
    frame = pd.DataFrame(
        {
            "num_input_tokens": [1024, 32768, 4096, 128],
            "worker_type": pd.Categorical(["prefill", "decode", "prefill", "prefill"]),
            "model": pd.Categorical(["llama-3.1-70b"] * 4),
        }
    )
    return dd.from_pandas(frame, npartitions=2)


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        (dict(num_input_tokens="tokns", kv_bytes_per_token="model"), "no column 'tokns'"),
        (dict(kv_bytes_per_token="llama-3.1-70x"), "did you mean llama-3.1-70b"),
        (dict(kv_bytes_per_token="model", worker_type="workers"), "no column 'workers'"),
    ],
)
def test_a_mistyped_name_fails_as_the_graph_is_built(ddf, keywords, said):
    with pytest.raises(InputError, match=said):
        pmd.handoff_delays(ddf, kv_transfer_bandwidth="ib-ndr", **keywords)  # (no .compute())


def test_unknown_categories_still_compute_as_pandas_does(ddf):
    unknown = ddf.assign(model=ddf["model"].cat.as_unknown(), worker_type=ddf["worker_type"].cat.as_unknown())
    lazy = pmd.handoff_delays(unknown, kv_bytes_per_token="model", kv_transfer_bandwidth="ib-ndr")
    expected = perfmodel.handoff_delays(ddf.compute(), kv_bytes_per_token="model", kv_transfer_bandwidth="ib-ndr")
    pd.testing.assert_series_equal(lazy.compute(), expected)
    assert str(lazy.dtype) == "Float64" and lazy.name == "handoff_delay_ms"
