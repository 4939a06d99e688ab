"""The Dask layer: equal to pandas on a process cluster, safe under threads, robust to a lost worker."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

import perfmodel  # noqa: E402
import perfmodel.dask as pmd  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import the tests

WORKERS = ["prefill", "decode", "aggregated", "prefill", "prefill"]


def _requests(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "num_input_tokens": rng.integers(0, 131_072, n),
            "model": pd.Categorical(rng.choice(["llama-3.1-70b", "deepseek-v3", "qwen3-32b"], n)),
            "link": rng.choice(["nvlink4", "ib-ndr", "8x ib-ndr"], n),
            "worker_type": rng.choice(WORKERS, n),
        },
        index=pd.Index([f"r{i}" for i in range(n)], name="request"),
    )


KEYWORDS = dict(kv_bytes_per_token="model", kv_transfer_bandwidth="link")


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_process_cluster_equals_pandas(client):
    pdf = _requests(20_000)
    # a partition may hold labels (models, worker types) that others do not: codes must not depend on that
    ddf = dd.from_pandas(pdf, npartitions=6, sort=False)
    result = pmd.handoff_delays(ddf, **KEYWORDS).compute()
    # dask stores string labels in its own string dtype; the labels themselves must match
    pd.testing.assert_series_equal(result, perfmodel.handoff_delays(pdf, **KEYWORDS), check_index_type=False)
    assert result.dtype == "Float64" and result.index.tolist() == pdf.index.tolist()


@pytest.mark.exhaustive  # (thread stress on 1M rows)
def test_threaded_scheduler_does_not_crash():
    pdf = _requests(1_200_000, seed=1)  # partitions large enough for the parallel kernel, were it used
    ddf = dd.from_pandas(pdf, npartitions=4, sort=False)
    result = pmd.handoff_delays(ddf, **KEYWORDS).compute(scheduler="threads", num_workers=4)
    pd.testing.assert_series_equal(result, perfmodel.handoff_delays(pdf, **KEYWORDS), check_index_type=False)


@pytest.mark.exhaustive  # (thread stress on 1M rows)
def test_the_facade_is_safe_from_many_threads():
    pdf = _requests(600_000, seed=2)
    expected = perfmodel.handoff_delays(pdf, **KEYWORDS)
    results, failures = [], []

    def work():
        try:
            results.append(perfmodel.handoff_delays(pdf, **KEYWORDS))  # may ask for the parallel kernel
        except Exception as error:  # noqa: BLE001  # pragma: no cover - reported below
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and len(results) == 4
    for result in results:
        pd.testing.assert_series_equal(result, expected)


def _flaky_partition(i: int, marker: str) -> pd.DataFrame:
    """Partition i of a frame; the first attempt at partition 2 kills its worker process."""
    if i == 2 and not os.path.exists(marker):
        with open(marker, "w"):
            pass
        os._exit(1)
    return _requests(5000, seed=100 + i).set_axis([f"p{i}-{k}" for k in range(5000)], axis=0)


def test_lost_worker_still_gives_the_complete_result(client, tmp_path):
    marker = str(tmp_path / "died-once")
    parts = range(6)
    meta = _requests(0)
    ddf = dd.from_map(functools.partial(_flaky_partition, marker=marker), parts, meta=meta)
    result = pmd.handoff_delays(ddf, **KEYWORDS).compute()
    assert os.path.exists(marker)  # a worker really died
    expected = pd.concat([perfmodel.handoff_delays(_flaky_partition(i, marker), **KEYWORDS) for i in parts])
    pd.testing.assert_series_equal(result, expected, check_index_type=False)


def test_errors_name_the_row_label(client):
    pdf = _requests(1000)
    pdf.loc["r777", "num_input_tokens"] = -3
    with pytest.raises(
        perfmodel.InputError,
        match=r"column 'num_input_tokens' \(num_input_tokens\): 1 invalid row; "
        r"first at row 'r777'",
    ) as info:
        pmd.handoff_delays(dd.from_pandas(pdf, npartitions=3, sort=False), **KEYWORDS).compute()
    assert info.value.row == "r777" and info.value.value == -3  # the whole error crossed the process boundary


def test_sweep_partitions_equal_the_in_memory_sweep(tmp_path):
    axes = dict(
        model=["llama-3.1-8b", "deepseek-v3"],
        link=["nvlink4", "ib-ndr", "eth-100g"],
        mode=["full_prompt", "destination_missing"],
        cache_hit_ratio=[0.0, 0.5],
        num_input_tokens=np.arange(0, 2000, 7),
    )
    expected = perfmodel.sweep(**axes)
    ddf = pmd.sweep(rows_per_partition=999, **axes)
    assert ddf.npartitions == -(-len(expected) // 999)
    pd.testing.assert_frame_equal(ddf.compute(scheduler="sync"), expected)
    ddf.to_parquet(tmp_path / "grid")
    back = pd.read_parquet(tmp_path / "grid")
    np.testing.assert_array_equal(back["handoff_delay_ms"], expected["handoff_delay_ms"])


def test_cli_delay_on_parquet_folder_with_local_workers(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    frames = [_requests(3000, seed=s).reset_index(drop=True) for s in range(3)]
    for i, frame in enumerate(frames):
        frame.to_parquet(source / f"part-{i}.parquet")
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "delay",
            str(source / "*.parquet"),
            "--out",
            str(out),
            "--workers",
            "2",
            "--column",
            "kv_bytes_per_token=model",
            "--column",
            "kv_transfer_bandwidth=link",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = pd.read_parquet(out)
    assert len(result) == 9000
    expected = pd.concat([perfmodel.handoff_delays(f, **KEYWORDS) for f in frames], ignore_index=True)
    np.testing.assert_array_equal(
        result["handoff_delay_ms"].to_numpy(float, na_value=np.nan), expected.to_numpy(float, na_value=np.nan)
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no staging left behind


def test_import_perfmodel_does_not_import_dask():
    code = "import sys, perfmodel; perfmodel.handoff_delay_ms(1, 1.0, 1); print('dask' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


@pytest.mark.parametrize(
    "values",
    [np.array([1.0, 2.0]), [1.0, 2.0, 3.0, 4.0], pd.Series([1.0, 2.0, 3.0, 4.0])],
)
def test_values_per_row_are_refused_where_partitions_cannot_split_them(values):
    """(Hostile: an array of 2 values went whole to each partition of 2 rows: [1000, 1000, 3000, 250].)"""
    ddf = dd.from_pandas(pd.DataFrame({"num_input_tokens": [1000, 2000, 3000, 500]}), npartitions=2)
    with pytest.raises(perfmodel.InputError, match=r"^kv_transfer_bandwidth: .* partitions cannot split it"):
        pmd.handoff_delays(ddf, kv_transfer_bandwidth=values, kv_bytes_per_token=1e6)
    column = ddf.assign(bandwidth=dd.from_pandas(pd.Series([1.0, 2.0, 4.0, 5.0]), npartitions=2))
    got = pmd.handoff_delays(column, kv_transfer_bandwidth="bandwidth", kv_bytes_per_token=1e6).compute()
    assert got.astype(float).tolist() == [1000.0, 1000.0, 750.0, 100.0]


def test_delay_files_refuses_a_folder_whose_parquet_files_a_reader_would_mix_in(tmp_path):
    """The parts were written beside a user's part.0.parquet: reading the folder mixed its rows in."""
    source = tmp_path / "in.parquet"
    _requests(100, seed=0).reset_index(drop=True).to_parquet(source)
    out = tmp_path / "out"
    out.mkdir()
    _requests(5, seed=1).to_parquet(out / "part.0.parquet")
    with pytest.raises(perfmodel.InputError, match="holds part.0.parquet, a Parquet file perfmodel delay did not"):
        pmd.delay_files(source, out, workers=1, **KEYWORDS)  # (refused before a cluster starts)
    assert sorted(p.name for p in out.iterdir()) == ["part.0.parquet"]


def test_a_dask_sweep_is_of_one_type_and_reads_nullable_axes_as_sweep_does():
    """Partitions were int64 or float64 by whether they held a NaN prompt (the meta said float64); a nullable
    Int64 axis came back as text."""
    ax = dict(
        kv_bytes_per_token=1000, kv_transfer_bandwidth=50, num_input_tokens=pd.array([1, 2, 3, None], dtype="Int64")
    )
    d = pmd.sweep(rows_per_partition=2, **ax)
    parts = [p.compute() for p in d.to_delayed()]
    assert all(p.dtypes.equals(d.dtypes) for p in parts)
    whole = perfmodel.sweep(**ax)
    assert whole["num_input_tokens"].dtype == np.float64
    np.testing.assert_array_equal(d.compute()["num_input_tokens"], whole["num_input_tokens"])
    np.testing.assert_array_equal(d.compute()["transfer_bytes"], whole["transfer_bytes"])
    with pytest.raises(perfmodel.InputError, match="rows_per_partition: 1.5 is not a whole number"):
        pmd.sweep(rows_per_partition=1.5, **ax)
