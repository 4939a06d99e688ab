"""Files of requests in, the same rows with ``handoff_delay_ms`` out, in bounded memory.

Chunks are read with pandas (CSV, JSON lines) or pyarrow (Parquet), passed through the
pandas facade, and appended to a temporary file beside the output, which is renamed into
place only when every chunk succeeded: a failed run leaves no output behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from .frame import RESULT_NAME, handoff_delays
from .handoff import Errors

__all__ = ["delay_file", "format_of", "read_chunks"]

_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".json": "jsonl",
            ".ndjson": "jsonl"}


def format_of(path: str | os.PathLike) -> str:
    """'csv', 'parquet' or 'jsonl' from a file name (compression suffixes allowed for text)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2", ".zst", ".xz", ".zip"):
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext not in _FORMATS:
        raise ValueError(f"{path}: cannot tell the format from {ext or 'no extension'!r}. "
                         "Fix: name it .csv, .parquet or .jsonl")
    return _FORMATS[ext]


def read_chunks(path: str | os.PathLike, chunk_rows: int) -> tuple[Iterator[pd.DataFrame], int | None]:
    """Chunks of at most ``chunk_rows`` rows, and the total row count when the format tells it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", str(path))
    fmt = format_of(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            file = pq.ParquetFile(path)
        except Exception as error:  # pyarrow raises several types for a damaged file
            raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
        batches = (batch.to_pandas() for batch in file.iter_batches(batch_size=chunk_rows))
        return batches, file.metadata.num_rows
    if fmt == "csv":
        return iter(pd.read_csv(path, chunksize=chunk_rows, dtype_backend="numpy_nullable")), None
    return iter(pd.read_json(path, lines=True, chunksize=chunk_rows, dtype_backend="numpy_nullable")), None


@contextlib.contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files private; outputs get the usual permissions
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class _Writer:
    """Appends chunks to one CSV, Parquet or JSON-lines file."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path, self.fmt = path, fmt
        self._parquet: Any = None
        self._first = True

    def write(self, chunk: pd.DataFrame) -> None:
        if self.fmt == "csv":
            chunk.to_csv(self.path, mode="w" if self._first else "a", header=self._first, index=False)
        elif self.fmt == "jsonl":
            with open(self.path, "w" if self._first else "a") as handle:
                chunk.to_json(handle, orient="records", lines=True)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(chunk, preserve_index=False)
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(self.path, table.schema)
            elif table.schema != self._parquet.schema:
                try:
                    table = table.cast(self._parquet.schema)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
                    raise ValueError(f"a column changed type between chunks ({table.schema} vs "
                                     f"{self._parquet.schema}). Fix: pass a larger --chunk-rows or clean the column") from None
            self._parquet.write_table(table)
        self._first = False

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
        elif self._first:  # no chunk at all: still write a valid empty file
            if self.fmt == "parquet":
                pd.DataFrame({RESULT_NAME: pd.Series(dtype="Float64")}).to_parquet(self.path)
            else:
                self.path.write_text("" if self.fmt == "jsonl" else f"{RESULT_NAME}\n")


def delay_file(
    input_path: str | os.PathLike, output_path: str | os.PathLike, *, chunk_rows: int = 1_000_000,
    errors: Errors = "raise", progress: bool | None = None, **keywords: Any,
) -> int:
    """Add ``handoff_delay_ms`` to every row of a CSV, Parquet or JSON-lines file.

    ``keywords`` are those of :func:`perfmodel.handoff_delays` (column names or values,
    model and link names included). Rows are numbered from 1 in error messages.

    Returns
    -------
    int
        The number of rows written.

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> from perfmodel.io import delay_file
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"num_input_tokens": [1024, 32768]}).to_csv(folder / "in.csv", index=False)
    >>> delay_file(folder / "in.csv", folder / "out.csv", kv_bytes_per_token="llama-3.1-70b",
    ...            kv_transfer_bandwidth="ib-ndr", progress=False)
    2
    >>> pd.read_csv(folder / "out.csv")["handoff_delay_ms"].round(3).tolist()
    [6.711, 214.748]
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    source, target = Path(input_path), Path(output_path)
    out_format = format_of(target)
    if source.resolve() == target.resolve():
        raise ValueError(f"{target}: the output would overwrite the input. Fix: write to another file")
    chunks, total = read_chunks(source, chunk_rows)
    rows = 0
    with _atomic(target) as tmp, tqdm(total=total, unit="rows", unit_scale=True, desc=source.name,
                                      disable=(None if progress is None else not progress)) as bar:
        writer = _Writer(tmp, out_format)
        try:
            for chunk in chunks:  # a malformed line surfaces here, as a ValueError from the reader
                chunk.index = pd.RangeIndex(rows + 1, rows + 1 + len(chunk))
                result = chunk.assign(**{RESULT_NAME: handoff_delays(chunk, errors=errors, **keywords)})
                writer.write(result)
                rows += len(chunk)
                bar.update(len(chunk))
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from None
        finally:
            writer.close()
    return rows
