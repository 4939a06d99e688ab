"""The pandas facade and sweeps over Dask DataFrames, for data larger than one machine.

``pip install "perfmodel[dask]"``. Partitions run the *serial* kernel: Dask already runs
partitions in parallel, and numba's default threading layer must not be entered from
several threads at once. Names (worker types, models, links) map to fixed codes and
numbers, so every partition maps them alike whatever labels it happens to hold.
``import perfmodel`` never imports this module (nor Dask).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


import pandas as pd

try:
    import dask  # noqa: F401  (the extra is installed)
    import dask.dataframe as dd
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError('perfmodel.dask needs Dask: pip install "perfmodel[dask]"') from error

from .frame import RESULT_NAME, handoff_delays as _pandas_handoff_delays
from .sweeps import SweepPlan

__all__ = ["delay_files", "handoff_delays", "sweep"]


def _partition(df: pd.DataFrame, keywords: dict[str, Any]) -> pd.Series:
    return _pandas_handoff_delays(df, parallel=False, **keywords)


def handoff_delays(ddf: dd.DataFrame, **keywords: Any) -> dd.Series:
    """:func:`perfmodel.handoff_delays` over a Dask DataFrame: a lazy ``Float64`` Series.

    Keywords are those of the pandas facade (column names or values; model and link
    names). Errors name the column, the row label and the value, as in pandas, when the
    result is computed.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd
    >>> import perfmodel.dask
    >>> pdf = pd.DataFrame({"num_input_tokens": [1024, 32768, 4096, 128]})
    >>> ddf = dd.from_pandas(pdf, npartitions=2)
    >>> perfmodel.dask.handoff_delays(ddf, kv_bytes_per_token="llama-3.1-70b",
    ...                               kv_transfer_bandwidth="ib-ndr").compute().round(3).tolist()
    [6.711, 214.748, 26.844, 0.839]
    """
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"expected a dask DataFrame, got {type(ddf).__name__}; for pandas use perfmodel.handoff_delays")
    meta = pd.Series(pd.array([], dtype="Float64"), name=RESULT_NAME, index=ddf._meta.index)
    return ddf.map_partitions(_partition, keywords, meta=meta)


def sweep(*, rows_per_partition: int = 2_000_000, **axes: Any) -> dd.DataFrame:
    """:func:`perfmodel.sweep` as a partitioned Dask DataFrame, for grids larger than memory.

    Each partition computes its own range of rows (in the documented order), so nothing
    is materialized until computed or written, e.g. ``.to_parquet(folder)``.

    Examples
    --------
    >>> import numpy as np, perfmodel.dask
    >>> ddf = perfmodel.dask.sweep(link=["nvlink4", "ib-ndr"], model="llama-3.1-8b",
    ...                            num_input_tokens=np.arange(1, 1001), rows_per_partition=500)
    >>> ddf.npartitions, len(ddf)
    (4, 2000)
    """
    if rows_per_partition < 1:
        raise ValueError(f"rows_per_partition must be >= 1, got {rows_per_partition}")
    plan = SweepPlan.of(axes)
    bounds = [(start, min(plan.n, start + rows_per_partition)) for start in range(0, plan.n, rows_per_partition)]
    meta = plan.rows(0, 0)
    divisions = [b[0] for b in bounds] + [plan.n - 1] if bounds else None
    return dd.from_map(functools.partial(_sweep_rows, plan), bounds, meta=meta, divisions=divisions,
                       enforce_metadata=False)


def _sweep_rows(plan: SweepPlan, bounds: tuple[int, int]) -> pd.DataFrame:
    return plan.rows(*bounds, progress=False)


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A distributed client: to an existing scheduler, or a local cluster of worker processes."""
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler) as client:
            yield client
    else:
        with LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            yield client


def delay_files(
    source: str | os.PathLike, target: str | os.PathLike, *, scheduler: str | None = None, workers: int | None = None,
    errors: str = "raise", **keywords: Any,
) -> int:
    """Add ``handoff_delay_ms`` to Parquet files (a file, folder or glob) on a Dask cluster.

    Writes partitioned Parquet to the folder ``target``: first into a temporary folder
    beside it, renamed into place when every partition succeeded. ``scheduler`` is the
    address of an existing cluster (``tcp://host:8786``); otherwise a local cluster of
    ``workers`` processes runs the job. Returns the number of rows written.

    Examples
    --------
    >>> from perfmodel.dask import delay_files
    >>> delay_files("logs/*.parquet", "delays/", workers=2, kv_bytes_per_token="llama-3.1-70b",
    ...             kv_transfer_bandwidth="ib-ndr", num_input_tokens="prompt_tokens")  # doctest: +SKIP
    12000000
    """
    target = Path(target)
    pattern = str(source)
    if not any(ch in pattern for ch in "*?[") and not Path(pattern).exists():
        raise FileNotFoundError(2, "no such file or folder", pattern)
    if target.suffix.lower() in (".csv", ".jsonl", ".json"):
        raise ValueError(f"{target}: with --workers/--scheduler the output is a folder of Parquet files. "
                         "Fix: name a folder, e.g. --out delays/")
    with _client(scheduler, workers):
        ddf = dd.read_parquet(pattern)
        result = ddf.assign(**{RESULT_NAME: handoff_delays(ddf, errors=errors, **keywords)})
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            result.to_parquet(staging, write_index=False)
            rows = int(dd.read_parquet(staging).shape[0].compute())
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return rows


