"""The pandas facade and sweeps over Dask DataFrames, for data larger than one machine.

``pip install "perfmodel[dask]"``. Each partition runs the kernel in its worker's thread:
Dask already runs partitions in parallel. Names (worker types, models, links) map to fixed codes and
numbers, so every partition maps them alike whatever labels it happens to hold.
``import perfmodel`` never imports this module (nor Dask).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:
    import dask  # noqa: F401  (the extra is installed)
    import dask.dataframe as dd
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError('perfmodel.dask needs Dask: pip install "perfmodel[dask]"') from error

from .errors import Errors, InputError, check_whole
from .frame import RESULT_NAME
from .frame import handoff_delays as _pandas_handoff_delays
from .sweeps import SweepPlan

__all__ = ["delay_files", "handoff_delays", "sweep"]


#: The text of a Python object (``Link(name='mine', ...)``, a config's ``{'num_hidden_layers': 32, ...}``): what Dask
#: makes of an object in a column it turns into text (its option ``dataframe.convert-string``).
_OBJECT_TEXT = re.compile(r"\s*([A-Za-z_][\w.]*\(.*\)|\{.*\}|\[.*\])\s*", re.DOTALL)


def _partition(
    df: pd.DataFrame, keywords: dict[str, Any], npartitions: int = 1, partition_info: dict[str, Any] | None = None
) -> pd.Series:
    """The pandas facade on one partition (Dask passes ``partition_info``; the meta has none). An error in its rows
    names the partition, whose rows alone it counts (the frame's others are not read: no second pass)."""
    try:
        return _pandas_handoff_delays(df, parallel=False, **keywords)
    except InputError as error:
        if partition_info is None or error.n_invalid is None:
            raise
        place = (
            f"row {error.row!r} of partition {partition_info['number']} (of 0 to {npartitions - 1}; the count is "
            "this partition's)"
        )
        problem, fix, coerce_hint = error.problem, error.fix, error.coerce_hint
        if isinstance(error.value, str) and _OBJECT_TEXT.fullmatch(error.value):
            problem = "the text of a Python object, which Dask made of the object when it built the frame"
            fix = (
                "build the Dask frame under dask.config.set({'dataframe.convert-string': False}), which keeps "
                "a column of objects as objects (Dask turns it into text by default)"
            )
            coerce_hint = ""
        raise InputError(
            error.where,
            problem,
            fix,
            n_invalid=error.n_invalid,
            row=error.row,
            value=error.value,
            argument=error.argument,
            position=error.position,
            counts=error.counts,
            coerce_hint=coerce_hint,
            place=place,
        ) from None


def handoff_delays(ddf: dd.DataFrame, **keywords: Any) -> dd.Series:
    """:func:`perfmodel.handoff_delays` over a Dask DataFrame: a lazy ``Float64`` Series.

    Keywords are those of the pandas facade (column names or values; model and link
    names). A name that is no column of the frame nor a preset fails here, as the graph is built (the frame's
    empty ``_meta`` goes through the facade). Errors in the rows come when the result is computed, from the
    first partition that holds invalid rows: they name the column, that partition, its count of invalid rows
    (the other partitions are not read for them) and its first one by row label and value.

    Dask turns a column of objects into text when it builds a frame (its option
    ``dataframe.convert-string``, on by default), and this function reads the partitions as Dask
    holds them. Objects that are not text (a :class:`perfmodel.Link`, a model config, a numpy
    ``float32`` number) keep their pandas results in a frame built under
    ``dask.config.set({"dataframe.convert-string": False})``; the text of an object is refused,
    naming that option.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The requests, one row each.
    **keywords
        The inputs of :func:`perfmodel.handoff_delay_ms` (values or column names).

    Returns
    -------
    dask.dataframe.Series
        Lazy ``Float64`` handoff delays in ms, one per row, partitioned as ``ddf``.

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
    _check_keywords(keywords)
    for name, value in keywords.items():  # (each partition would take the whole array as its own rows)
        if isinstance(value, tuple) and value in ddf.columns:
            continue  # (a column's label: a MultiIndex's)
        if isinstance(value, (dd.Series, dd.DataFrame)) or (not isinstance(value, str) and np.ndim(value) > 0):
            raise InputError(
                name,
                f"{type(value).__name__} of values per row, but a Dask frame's partitions cannot split it",
                f"add the values as a column of the frame (ddf.assign) and pass its name as {name}, or one value",
            )
    meta = _partition(ddf._meta, keywords)  # (names checked here: a mistyped column fails now, not at compute)
    return ddf.map_partitions(_partition, keywords, ddf.npartitions, meta=meta)


def _check_keywords(keywords: dict[str, Any]) -> None:
    """Refuse, when the graph is built, a keyword the pandas facade does not take (its workers would, at compute
    time), in Python's words, with the closest name; ``parallel`` is the partitions' own (each runs serially)."""
    import difflib
    import inspect

    taken = [p for p in inspect.signature(_pandas_handoff_delays).parameters if p not in ("df", "parallel")]
    for name in keywords:
        if name not in taken:
            close = difflib.get_close_matches(name, taken, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; it takes {', '.join(taken)}"
            if name == "parallel":
                hint = " (Dask runs the partitions in parallel, each serially)"
            raise TypeError(f"handoff_delays() got an unexpected keyword argument {name!r}{hint}")


def sweep(*, rows_per_partition: int = 2_000_000, **axes: Any) -> dd.DataFrame:
    """:func:`perfmodel.sweep` as a partitioned Dask DataFrame, for grids larger than memory.

    Each partition computes its own range of rows (in the documented order), so nothing
    is materialized until computed or written, e.g. ``.to_parquet(folder)``.

    Parameters
    ----------
    rows_per_partition : int
        Rows of the grid in each partition.
    **axes
        The axes of :func:`perfmodel.sweep`.

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy: the rows of :func:`perfmodel.sweep`, in its order, ``partition_rows`` per partition, every
        partition's columns of the types :func:`perfmodel.sweep` gives.

    Examples
    --------
    >>> import numpy as np, perfmodel.dask
    >>> ddf = perfmodel.dask.sweep(link=["nvlink4", "ib-ndr"], model="llama-3.1-8b",
    ...                            num_input_tokens=np.arange(1, 1001), rows_per_partition=500)
    >>> ddf.npartitions, len(ddf)
    (4, 2000)
    """
    rows_per_partition = check_whole("rows_per_partition", rows_per_partition, smallest=1)
    plan = SweepPlan.of(axes)
    bounds = [(start, min(plan.n, start + rows_per_partition)) for start in range(0, plan.n, rows_per_partition)]
    meta = plan.rows(0, min(plan.n, 1)).iloc[:0]  # (the types of a row: an empty sweep's bytes are floats)
    divisions = [b[0] for b in bounds] + [plan.n - 1] if bounds else None
    return dd.from_map(
        functools.partial(_sweep_rows, plan, meta.dtypes.to_dict()),
        bounds,
        meta=meta,
        divisions=divisions,
        enforce_metadata=False,
    )


def _sweep_rows(plan: SweepPlan, dtypes: dict[str, Any], bounds: tuple[int, int]) -> pd.DataFrame:
    """One partition's rows, each column of the whole grid's type (a partition without a NaN prompt would hold
    whole bytes where the grid holds floats)."""
    return plan.rows(*bounds, progress=False).astype(dtypes)


#: Seconds to wait for an existing scheduler before giving up (``--connect-timeout``).
CONNECT_TIMEOUT_S = 10.0


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int | None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """A distributed client: to an existing scheduler (bounded wait), or a local cluster of ``workers`` worker
    processes (None: one per core; 0, a negative count or a fraction refused, as the command line refuses them)."""
    import logging

    workers = check_whole("workers", workers, smallest=1, optional=True)

    from distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout=connect_timeout_s)
        except (OSError, TimeoutError, ValueError) as error:
            raise ConnectionError(
                f"cannot reach the Dask scheduler at {scheduler} within {connect_timeout_s:g} s "
                f"({str(error).splitlines()[0] if str(error) else type(error).__name__}). Fix: "
                "check the address and that 'dask scheduler' runs there"
            ) from None
        with client:
            yield client
    else:
        with (
            LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,
                # no dashboard, and its health routes on a free local port (never "8787 in use")
                scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client


def input_files(source: str | os.PathLike) -> list[Path]:
    """The files a source names: itself, a folder's data files (recursively, sorted) or a glob's matches.

    Hidden files and folders (``.name``, ``_name``: Parquet metadata, perfmodel's staging) are skipped.

    >>> input_files("no-such-*.parquet")
    Traceback (most recent call last):
    ...
    FileNotFoundError: [Errno 2] no file matches: 'no-such-*.parquet'
    """
    from .io import detect

    def is_data(p: Path) -> bool:
        try:
            detect(p)
        except InputError:
            return False
        return p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)

    pattern = str(source)
    path = Path(pattern)
    if any(ch in pattern for ch in "*?["):
        import glob

        files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if is_data(p))
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(2, "no such file or folder", pattern)
    if not files:
        raise FileNotFoundError(2, "no file matches", pattern)
    return files


def _delay_part(source: str, target: str, chunk_rows: int, errors: Errors, keywords: dict[str, Any]) -> Any:
    """One input file -> one Parquet part (on a worker); returns its report, never raises a user error."""
    from .io import FileFormat, TableWriter, delay_rows

    writer = TableWriter(Path(target), FileFormat("parquet"))
    try:
        report = delay_rows(source, writer, chunk_rows=chunk_rows, errors=errors, progress=False, keywords=keywords)
        if report.error is None:
            writer.close(empty_columns=[RESULT_NAME])
        else:
            writer.abort()
        return report
    except Exception as error:  # noqa: BLE001 (sent back, not swallowed): reported by the client, in input order, without a worker traceback in the logs
        import traceback

        writer.abort()
        error.__perfmodel_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]  # (ours, for the client)
        return error


def delay_files(
    source: str | os.PathLike,
    target: str | os.PathLike,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    errors: str = "raise",
    chunk_rows: int = 1_000_000,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    progress: bool | None = None,
    **keywords: Any,
) -> int:
    """Add ``handoff_delay_ms`` to the rows of many files (a file, folder or glob) on a Dask cluster.

    Each input file (CSV, Parquet or JSON lines) is one task, read in chunks of
    ``chunk_rows`` rows and written as one Parquet part of the folder ``target``
    (``part-00000.parquet``, ... in input order; other columns pass through losslessly).
    The parts are staged in a hidden folder inside ``target`` and moved in only when
    every task succeeded; files in ``target`` that perfmodel did not write are left alone
    (and one of the same name as a part makes it refuse). Invalid rows are reported for
    all files at once: the total, and the first one in input order with its file and row.

    ``scheduler`` is the address of an existing cluster (``tcp://host:8786``, waited for
    at most ``connect_timeout_s`` seconds); otherwise a local cluster of ``workers``
    processes runs the job. Every worker must see ``source`` and ``target`` at the same
    paths (a shared file system). ``progress``: a bar of the files done, on a terminal (None, the
    default), always (True) or never (False). Returns the number of rows written.

    Parameters
    ----------
    source : str or os.PathLike
        The requests: a CSV, Parquet or JSON-lines file, or a folder or glob of them.
    target : str or os.PathLike
        Where the result goes (a Parquet folder, one file per partition).
    scheduler : str, optional
        The address of a running Dask scheduler.
    workers : int, optional
        Start a local cluster of this many workers instead.
    errors : {'raise', 'coerce'}
        As :func:`perfmodel.handoff_delay_ms`.
    chunk_rows : int
        Rows per partition read.
    connect_timeout_s : float
        Seconds to wait for the scheduler.
    progress : bool, optional
        A progress bar (default: on a terminal).
    **keywords
        The inputs of :func:`perfmodel.handoff_delay_ms` (values or column names).

    Returns
    -------
    int
        The number of rows written, over all files.

    Examples
    --------
    >>> from perfmodel.dask import delay_files
    >>> delay_files("logs/*.parquet", "delays/", workers=2, kv_bytes_per_token="llama-3.1-70b",
    ...             kv_transfer_bandwidth="ib-ndr", num_input_tokens="prompt_tokens")  # doctest: +SKIP
    12000000
    """
    from .ground.files import output_folder
    from .inputs.coerce import check_errors
    from .io import Report, detect

    check_errors(errors)
    target = Path(target)
    if target.suffix.lower() in (".csv", ".jsonl", ".json", ".ndjson", ".parquet", ".pq", ".gz"):
        raise InputError(
            str(target),
            "with --workers/--scheduler the output is a folder of Parquet parts",
            "name a folder, e.g. --out delays/",
        )
    files = input_files(source)
    for file in files:
        detect(file)
    names = [f"part-{i:05d}.parquet" for i in range(len(files))]
    inputs = [*files, *([source] if Path(source).is_dir() else [])]
    _check_parts_folder(target, names, inputs)
    with output_folder(target, command="delay", names=names, inputs=inputs) as stage:
        with _client(scheduler, workers, connect_timeout_s) as client:
            futures = client.map(
                _delay_part,
                [str(f) for f in files],
                [str(stage / n) for n in names],
                chunk_rows=chunk_rows,
                errors=errors,
                keywords=keywords,
                pure=False,
            )
            results = _gather(client, futures, unit="files", desc="delay", progress=progress)
        total = Report()  # reported once the cluster is closed: no worker chatter after the error line
        for result in results:
            if isinstance(result, BaseException):
                raise result
            total.merge(result)
        total.raise_if_invalid()
        _one_schema(files, [stage / n for n in names])  # (before the parts are moved in: all or nothing)
    return total.rows


def _one_schema(files: list[Path], parts: list[Path]) -> None:
    """Refuse parts of different columns (input files of different columns): one Parquet dataset holds one schema,
    and a reader of the folder would drop or mix the columns that differ."""
    import pyarrow.parquet as pq

    first = None
    for file, part in zip(files, parts):
        if not part.exists():  # (an empty input writes no part)
            continue
        names = pq.read_schema(part).names
        if first is None:
            first = (file, names)
        elif names != first[1]:
            differ = sorted(set(names) ^ set(first[1])) or ["the order of the columns"]
            raise InputError(
                str(file),
                f"has other columns than {first[0]} ({', '.join(map(str, differ))}), and one output folder of Parquet "
                "parts holds one set of columns",
                "run the files of each set of columns apart, or give them the same columns",
            )


def _check_parts_folder(target: Path, names: list[str], inputs: list[Any]) -> None:
    """Refuse, before a cluster starts, a folder the parts ``names`` cannot go into: one ``output_folder`` refuses,
    or one holding Parquet files perfmodel delay did not write (a reader of the folder would mix them with the
    parts)."""
    from .ground.files import check_output_folder

    owned = check_output_folder(target, command="delay", names=names, inputs=inputs).get("delay", set())
    strays = sorted(p.name for p in target.glob("*.parquet") if p.name not in owned) if target.is_dir() else []
    if strays:
        raise InputError(
            str(target),
            f"holds {strays[0]}, a Parquet file perfmodel delay did not write, which a reader of the folder's parts "
            "would take for one of them",
            "choose another --out folder, or move the folder's Parquet files away",
        )


def _gather(client: Any, futures: list[Any], *, unit: str, desc: str, progress: bool | None) -> list[Any]:
    """The futures' results, in their order, with the project's progress bar counting them as they finish
    (:func:`distributed.as_completed`, Dask's own completion reports)."""
    from distributed import as_completed

    from .ground.progress import progress_bar

    with progress_bar(len(futures), unit=unit, desc=desc, progress=progress) as bar:
        for _ in as_completed(futures):
            bar.update(1)
    return client.gather(futures)


def _grid_config(prepared: Any, config: dict[str, Any]) -> dict[str, Any]:
    """One configuration of a replay grid, on a worker, against the scattered prepared trace."""
    from .replay import grid_row

    return grid_row(prepared, config)[0]


def replay_grid(
    trace: pd.DataFrame,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    progress: bool | None = None,
    ready_ms: Any = None,
    **axes: Any,
) -> pd.DataFrame:
    """:func:`perfmodel.replay_grid` on a Dask cluster: one task per configuration, the prepared
    trace scattered to the workers once. The same table as the in-process grid, row for row.

    Parameters
    ----------
    trace : pandas.DataFrame
        A trace as :func:`perfmodel.read_trace` reads it.
    scheduler : str, optional
        An existing cluster's address; otherwise a local cluster of ``workers`` processes runs the grid.
    workers : int, optional
        The local cluster's worker processes (default: one per core).
    connect_timeout_s : float
        How long to wait for the scheduler (s).
    progress : bool, optional
        A bar of the configurations done: on a terminal (None, the default), always (True) or never (False).
    ready_ms
        When each request's handoff may start (ms): a trace column's name, an array or a Series of the trace's
        rows, as :func:`perfmodel.replay_grid` takes it (default: the arrivals).
    **axes
        The axes and fixed inputs of :func:`perfmodel.replay_grid`.

    Returns
    -------
    pandas.DataFrame
        One row per configuration, as :func:`perfmodel.replay_grid` returns it.

    Examples
    --------
    >>> import perfmodel, perfmodel.dask
    >>> trace = perfmodel.synthetic_trace(500, rate_per_s=20, seed=0)
    >>> grid = perfmodel.dask.replay_grid(trace, workers=2, model="llama-3.1-8b", link="ib-ndr",
    ...                                   decode_workers=[1, 2])  # doctest: +SKIP
    """
    from .replay import grid_frame, grid_plan

    prepared, configs = grid_plan(trace, axes, ready_ms)  # (here: a bad axis value fails at once, not on a worker)
    rows = _on_workers(_grid_config, prepared, configs, "replay grid", scheduler, workers, connect_timeout_s, progress)
    return grid_frame(configs, rows)


def _on_workers(
    task: Any,
    prepared: Any,
    configs: list[dict[str, Any]],
    desc: str,
    scheduler: str | None,
    workers: int | None,
    connect_timeout_s: float,
    progress: bool | None,
) -> list[Any]:
    """``task(prepared, config)`` of each configuration on a Dask cluster, the prepared trace scattered to the
    workers once; the results in the configurations' order."""
    with _client(scheduler, workers, connect_timeout_s) as client:
        shared = client.scatter(prepared, broadcast=True)
        futures = [client.submit(task, shared, config, pure=False) for config in configs]
        return _gather(client, futures, unit="configs", desc=desc, progress=progress)


def ttft_grid(
    trace: pd.DataFrame,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    progress: bool | None = None,
    **axes: Any,
) -> pd.DataFrame:
    """:func:`perfmodel.ttft_grid` on a Dask cluster: one task per configuration, the prepared trace scattered to
    the workers once. The same table as the in-process grid, row for row.

    Parameters
    ----------
    trace : pandas.DataFrame
        A trace as :func:`perfmodel.read_trace` reads it.
    scheduler : str, optional
        An existing cluster's address; otherwise a local cluster of ``workers`` processes runs the grid.
    workers : int, optional
        The local cluster's worker processes (default: one per core).
    connect_timeout_s : float
        How long to wait for the scheduler (s).
    progress : bool, optional
        A bar of the configurations done: on a terminal (None, the default), always (True) or never (False).
    **axes
        The axes and fixed inputs of :func:`perfmodel.ttft_grid` (``request_rate_per_s``, any keyword of
        :func:`perfmodel.replay_ttft`, a cluster's fields).

    Returns
    -------
    pandas.DataFrame
        One row per configuration, as :func:`perfmodel.ttft_grid` returns it.

    Examples
    --------
    >>> import perfmodel, perfmodel.dask
    >>> trace = perfmodel.synthetic_trace(500, rate_per_s=20, seed=0)
    >>> grid = perfmodel.dask.ttft_grid(trace, workers=2, model="llama-3.1-8b", link="ib-ndr",
    ...                                 prefill_tokens_per_s=40_000, request_rate_per_s=[5, 10])  # doctest: +SKIP
    """
    from .replay.ttft_grid import grid_plan, grid_summary, grid_table

    prepared, configs = grid_plan(trace, axes)  # (here: a bad axis value fails at once, not on a worker)
    rows = _on_workers(grid_summary, prepared, configs, "ttft grid", scheduler, workers, connect_timeout_s, progress)
    return grid_table(configs, rows)
