"""Calibration: a link fitted to a table of measured transfers (:func:`calibrate`).

A table gives each measured transfer's size (``nbytes``, perftest's ``#bytes``, or
``num_input_tokens`` with a model), its time or throughput, and optionally its blocks and
messages; :func:`calibrate` reads it (a DataFrame, a CSV, Parquet or JSON-lines file,
perftest's own text output, or ``dataset:NAME``), fits :func:`perfmodel.fit_link` and says
how well the fit describes the measurements. Every value it cannot use is reported at its
place in the file: the 1-based line of a text file (comment lines counted), the row of a
Parquet file or the row label of a DataFrame.

Units of the columns it reads (another ``measured_*`` or ``BW average[...]`` column, whose
unit it cannot tell, is refused):

=========================================  ==================================================
column                                     unit
=========================================  ==================================================
``measured_ms``                            milliseconds
``measured_us``, ``t_typical_us``,         microseconds (perftest's ``ib_*_lat``: the typical
``t_avg_us``, ``t_typical[usec]``,         time is the median)
``t_avg[usec]``
``measured_gb_s``                          decimal GB/s (1e9 bytes/s)
``measured_gib_s``                         binary GiB/s (2**30 bytes/s)
``BW average[MB/sec]``,                    perftest's MB/sec: 2**20 bytes/s (perftest computes
``BW average[MiB/sec]``                    it with a factor of 0x100000, linux-rdma/perftest
                                           ``perftest_parameters.c``; perftest 4.5 and later name
                                           the same unit MiB/sec)
``BW average[Gb/sec]``                     perftest's Gb/sec (``--report_gbits``): 1e9 bits/s
=========================================  ==================================================

perftest's ``BW peak`` is the best interval of a run, not its transfers' time, and is not read.

Only transfers of :data:`FIT_FROM_BYTES` (64 KiB) and more are fitted by default (``fit_from_bytes``): a KV
handoff's transfers are of that size and more, and perftest's smallest messages (2 bytes to 32 KiB), which
only a per-message rate limits, would pull the bandwidth away from what large transfers reach. The smaller
ones are still read, and :meth:`Calibration.errors_by_size` gives every size's error.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from .errors import InputError, check_choice, check_number, check_whole, finite_at_least, not_a_number, warn
from .ground.measured_files import read_measured_file, refuse_non_numbers, unique_columns
from .inputs import user_presets as _presets
from .inputs.words import count
from .network.fits import SIZE_SPREAD, distinct_points, one_point
from .network.links import FitReport, Link, check_link_name, fitted_link, get_link, save_link

__all__ = ["FIT_FROM_BYTES", "Calibration", "Measurements", "calibrate", "read_measurements"]

#: The smallest transfer :func:`calibrate` fits by default, bytes (64 KiB).
FIT_FROM_BYTES = 65_536

#: Time columns, first present first, and the milliseconds of their unit.
TIMES = {
    "measured_ms": 1.0,
    "measured_us": 1e-3,
    "t_typical_us": 1e-3,
    "t_avg_us": 1e-3,
    "t_typical[usec]": 1e-3,
    "t_avg[usec]": 1e-3,
}
#: Throughput columns and the bytes per second of their unit.
THROUGHPUTS = {
    "measured_gb_s": 1e9,
    "measured_gib_s": 2.0**30,
    "BW average[MB/sec]": 2.0**20,
    "BW average[MiB/sec]": 2.0**20,  # (perftest 4.5 and later: the same 0x100000 bytes, named so)
    "BW average[Gb/sec]": 1.25e8,
}
#: Size columns (bytes per measured transfer), first present first.
SIZES = ("nbytes", "#bytes")
#: The arguments that turn tokens into bytes and messages (only with num_input_tokens).
_SHAPE = ("model", "kv_cache_dtype", "tp", "decode_tp", "scope", "block_size", "kv_layout")
#: Time columns perftest prints side by side (the typical time and the average): one measurement, read as the first.
_PERFTEST_TIMES = ({"t_typical_us", "t_avg_us"}, {"t_typical[usec]", "t_avg[usec]"})
#: A time and a throughput of one row further apart than this (relative) are refused: which one was measured?
_DISAGREE = 0.05
#: Without a line rate, a fitted bandwidth above the best throughput measured by more than the fit's largest
#: error (and at least this fraction: an alpha-beta fit of exact data is always a little above) is said.
_ABOVE_BEST = 0.01


@dataclass(frozen=True, eq=False)
class Measurements:
    """The measured transfers :func:`calibrate` fits, read from a table (rows it could not use left out).

    ``places`` says where each measurement is in its source ("line 7", "row 3"), ``left_out``
    how many rows had no size or no measurement, ``setup`` the model, parallelism and blocks
    that turned tokens into bytes (empty when the table gave bytes).

    Parameters
    ----------
    source : str
        Where the table came from (a file, or a description).
    nbytes, measured_ms : numpy.ndarray
        Each transfer's bytes and measured time (ms).
    n_blocks, n_messages : numpy.ndarray, optional
        Each transfer's blocks and messages, when the table gives them.
    places : tuple of str
        Where each measurement is in its source (``"line 7"``, ``"row 3"``).
    left_out : int
        How many rows had no size or no measurement.
    setup : str
        The model, parallelism and blocks that turned tokens into bytes (empty: the table gave bytes).
    fit_from_bytes : float
        The smallest transfer fitted, bytes (``fitted`` says which were).
    left_out_places : tuple of str
        Where each row left out is in its source.

    Examples
    --------
    >>> import pandas as pd, perfmodel
    >>> table = pd.DataFrame({"nbytes": [1e6, 1e7, 1e8], "measured_ms": [0.03, 0.21, 2.01]})
    >>> measured = perfmodel.calibrate(table).measurements
    >>> measured.measured_ms.tolist(), measured.left_out
    ([0.03, 0.21, 2.01], 0)
    """

    source: str
    nbytes: np.ndarray
    measured_ms: np.ndarray
    n_blocks: np.ndarray | None = None
    n_messages: np.ndarray | None = None
    places: tuple[str, ...] = ()
    left_out: int = 0
    setup: str = ""
    fit_from_bytes: float = 0.0
    left_out_places: tuple[str, ...] = ()

    @property
    def fitted(self) -> np.ndarray:
        """Which measurements the fit is of (bool): those of ``fit_from_bytes`` bytes or more."""
        return np.asarray(self.nbytes >= self.fit_from_bytes)

    @property
    def best_throughput_gb_s(self) -> float:
        """The highest throughput measured, decimal GB/s (bytes / time)."""
        return float(np.max(self.nbytes / self.measured_ms) / 1e6)


@dataclass(frozen=True, eq=False)
class Calibration:
    """What :func:`calibrate` returns: the fitted link, its report, the measurements, and what to know.

    ``warnings`` holds what the fit could not vouch for (each also issued as a ``UserWarning``);
    ``saved_to`` is the presets file when the link was saved (``save=True``), else None.

    Parameters
    ----------
    link : Link
        The fitted link.
    report : FitReport
        How well it describes the measurements.
    measurements : Measurements
        What was fitted.
    line_rate_gb_s : float, optional
        The hardware's line rate the fit was bounded by (decimal GB/s), if given.
    warnings : tuple of str
        What the fit could not vouch for (each also issued as a ``UserWarning``).
    saved_to : pathlib.Path, optional
        The presets file when the link was saved (``save=True``), else None.

    Examples
    --------
    >>> import pandas as pd, perfmodel
    >>> fitted = perfmodel.calibrate(pd.DataFrame({"nbytes": [1e6, 1e7, 1e8], "measured_ms": [0.03, 0.21, 2.01]}))
    >>> type(fitted.link).__name__, fitted.report.points, fitted.measurements.nbytes.size
    ('Link', 3, 3)
    """

    link: Link
    report: FitReport
    measurements: Measurements
    line_rate_gb_s: float | None = None
    warnings: tuple[str, ...] = ()
    saved_to: Path | None = field(default=None)

    def predicted_ms(self, link: Link | str | None = None) -> np.ndarray:
        """Each measurement's time (ms) as ``link`` (default: the fitted one) predicts it."""
        chosen = self.link if link is None else get_link(link)
        m = self.measurements
        return np.asarray(
            chosen.transfer_ms(
                m.nbytes, 0 if m.n_blocks is None else m.n_blocks, 0 if m.n_messages is None else m.n_messages
            ),
            dtype=float,
        )

    def relative_errors(self, link: Link | str | None = None) -> np.ndarray:
        """Each measurement's relative error under ``link`` (default: the fitted one), fitted or not."""
        m = self.measurements
        return np.abs(self.predicted_ms(link) - m.measured_ms) / m.measured_ms

    def errors_by_size(self, link: Link | str | None = None) -> pd.DataFrame:
        """Every measurement beside ``link``'s prediction (default: the fitted link), by size.

        Columns ``nbytes``, ``measured_ms``, ``predicted_ms``, ``error`` (signed, ``(predicted - measured) /
        measured``: below 0 the link is too fast) and ``fitted`` (whether the fit is of it: ``fit_from_bytes``);
        measurements read from a file or frame are indexed by where each is in it (``place``: ``"line 7"``).

        >>> import pandas as pd, perfmodel
        >>> table = pd.DataFrame({"nbytes": [1e3, 1e6, 1e7, 1e8], "measured_ms": [0.01, 0.03, 0.21, 2.01]})
        >>> perfmodel.calibrate(table).errors_by_size()["fitted"].tolist()   # 1 kB is below 64 KiB
        [False, True, True, True]
        """
        m = self.measurements
        predicted = self.predicted_ms(link)
        return pd.DataFrame(
            {
                "nbytes": m.nbytes,
                "measured_ms": m.measured_ms,
                "predicted_ms": predicted,
                "error": (predicted - m.measured_ms) / m.measured_ms,
                "fitted": m.fitted,
            },
            index=pd.Index(m.places, name="place") if m.places else None,
        )


def calibrate(
    table: pd.DataFrame | str | os.PathLike,
    *,
    name: str = "fitted",
    model: str | None = None,
    kv_cache_dtype: str | None = None,
    tp: int | None = None,
    decode_tp: int | None = None,
    scope: str | None = None,
    block_size: int | None = None,
    kv_layout: str | None = None,
    line_rate_gb_s: float | None = None,
    nic: Link | str | None = None,
    fit_from_bytes: float = FIT_FROM_BYTES,
    save: bool = False,
    replace: bool = False,
    source: str = "",
) -> Calibration:
    """Fit a link to a table of measured transfers and say how well it describes them.

    What the fit cannot vouch for is warned of and kept in ``warnings``: a fit far from its measurements (its
    largest error above 10%, as ``perfmodel connectors --fit`` says it: rows of several setups, or a node's
    aggregate beside one NIC's bytes), a bandwidth above every measurement, rows left out (by their lines).

    Parameters
    ----------
    table
        A DataFrame, a CSV / Parquet / JSON-lines file, perftest's text output (``ib_write_bw``,
        ``ib_read_bw``, ``ib_*_lat``, saved as is), or ``"dataset:NAME"`` (a shipped table,
        :mod:`perfmodel.datasets`). Columns: a size (``nbytes`` or ``#bytes``; or
        ``num_input_tokens`` with ``model`` or a ``model`` column), a time or a throughput (see
        the module's table of units), optionally ``n_blocks`` and ``n_messages``.
    name
        The fitted link's name (and the preset's, with ``save``).
    model, kv_cache_dtype, tp, decode_tp, scope
        With ``num_input_tokens``: the model whose KV cache turns tokens into bytes, and the
        bytes of which setup (as :func:`perfmodel.kv_bytes` takes them).
    block_size, kv_layout
        With ``model``: KV block size in tokens, and layout (default ``"layer_kv"``; only with ``block_size``);
        the fit then has a per-message cost (:func:`perfmodel.kv_messages` counts the messages). A table with
        an ``n_messages`` column gives its own messages: ``block_size`` beside it is refused.
    line_rate_gb_s
        The line rate of the hardware measured, decimal GB/s: the fitted bandwidth never exceeds it.
    nic
        Or a link preset (or :class:`perfmodel.Link`) whose ``bandwidth_gb_s`` is that line rate.
    fit_from_bytes
        The smallest transfer fitted, bytes (default :data:`FIT_FROM_BYTES`, 64 KiB: the sizes a KV handoff
        moves); smaller ones are read and their errors given (:meth:`Calibration.errors_by_size`), not
        fitted. 0 fits them all.
    save
        Save the fitted link as a user preset under ``name`` (see :func:`perfmodel.network.links.save_link`).
    replace
        With ``save``: replace a user preset of that name (otherwise a taken name is refused,
        before anything is read or fitted).
    source
        Where the saved preset says it comes from (default: the table).

    Returns
    -------
    Calibration
        ``link`` (the fitted :class:`perfmodel.Link`), ``report`` (its
        :class:`perfmodel.network.links.FitReport`), ``measurements``, ``warnings``, ``saved_to``.

    Examples
    --------
    >>> import perfmodel
    >>> table = perfmodel.datasets.load("fastdeploy-rdma-blocksize")
    >>> ours = table[table["notes"].str.startswith("KVTransferManager")]
    >>> fitted = perfmodel.calibrate(ours.assign(nbytes=ours["nbytes"] * 1538, n_messages=1538), name="fd-rdma",
    ...                              nic="roce-400g")
    >>> round(fitted.link.bandwidth_gb_s, 1), round(fitted.link.per_message_ms * 1e3, 3), fitted.report.points
    (48.0, 0.069, 9)
    >>> fitted.link.bandwidth_gb_s <= 50.0 and fitted.warnings == ()   # never above roce-400g's line rate
    True
    """
    if save:
        check_link_name(name, replace=replace)  # before anything is read: a refused name costs nothing
    cap = _line_rate(line_rate_gb_s, nic)
    smallest = _smallest_fitted(fit_from_bytes)
    tp, decode_tp, block_size = (check_whole(k, v, smallest=1, optional=True) for k, v in
                                 (("tp", tp), ("decode_tp", decode_tp), ("block_size", block_size)))  # fmt: skip
    if kv_layout is not None:
        from .inputs.codes import choice_names

        kv_layout = check_choice("kv_layout", kv_layout, choice_names("kv_layout"))
    frame, places, where = read_measurements(table)
    shape = dict(model=model, kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp, scope=scope,
                 block_size=block_size, kv_layout=kv_layout)  # fmt: skip
    measurements = dataclasses.replace(_measurements(frame, places, where, **shape), fit_from_bytes=smallest)
    fitted = _fitted(measurements, where)
    link = fitted_link(fitted.nbytes, fitted.measured_ms, n_blocks=fitted.n_blocks, n_messages=fitted.n_messages,
                    name=name, line_rate_gb_s=cap)  # fmt: skip
    said = _warnings(link, fitted, measurements, where, cap)
    for text in said:
        warn(text)
    saved = save_link(link, source=source or f"perfmodel.calibrate({where})", replace=replace) if save else None
    return Calibration(link, cast(FitReport, link.fit), measurements, cap, said, saved)  # (a fitted link's fit)


def _warnings(
    link: Link, fitted: Measurements, measurements: Measurements, where: str, cap: float | None
) -> tuple[str, ...]:
    """What a calibration says of its fit: a bandwidth above what was measured (over the rows ``fitted``), a fit
    far from its measurements, the rows ``measurements`` left out."""
    said = _above_what_was_measured(link, fitted, cap)  # (over what was fitted: a small row says nothing of it)
    far = cast(FitReport, link.fit).far_off(
        "check that every row is one NIC's bytes (a node's aggregate over N NICs is N times one NIC's), of one "
        "setup (one machine, one direction), and the table's units"
    )
    said += (f"{where}: {far}",) if far else ()
    if measurements.left_out:
        rows = f"{count(measurements.left_out, 'row')} with an empty cell (a size, a time or a count)"
        said += (f"{where}: left out {rows}: {_lines_of(measurements.left_out_places)}",)
    return said


def _smallest_fitted(fit_from_bytes: Any) -> float:
    """``fit_from_bytes`` checked: a finite number of bytes >= 0."""
    return float(
        check_number(
            "calibrate", "fit_from_bytes", fit_from_bytes, finite_at_least(0.0), "is not a finite number >= 0",
            "give the smallest transfer to fit in bytes (0 fits every size)",
        )
    )  # fmt: skip


def _fitted(m: Measurements, where: str) -> Measurements:
    """The measurements to fit (those of ``m.fitted``); fewer than the two a fit needs are refused, with the
    sizes there are (a fit of all of them is asked for with fit_from_bytes 0)."""
    kept = m.fitted
    pick = lambda a: None if a is None else a[kept]  # noqa: E731
    if distinct_points(m.nbytes[kept], pick(m.n_blocks), pick(m.n_messages)) < 2:
        if distinct_points(m.nbytes, m.n_blocks, m.n_messages) < 2:  # (the whole table: one size)
            raise InputError(where, one_point("measured transfer", m.nbytes), "measure transfers of several sizes "
                             "(e.g. 1 MB to 1 GB), each row one transfer's bytes and time")  # fmt: skip
        raise InputError(
            where,
            f"has {count(int(kept.sum()), 'transfer')} of {m.fit_from_bytes:,.0f} bytes or more (fit_from_bytes, "
            f"the sizes a KV handoff moves), and a fit needs 2; its sizes are {m.nbytes.min():,.0f} to "
            f"{m.nbytes.max():,.0f} bytes ({SIZE_SPREAD:.0%} apart or more)",
            "give fit_from_bytes= (--fit-from-bytes) at most the second largest size, or 0 to fit every size",
        )
    return dataclasses.replace(
        m,
        nbytes=m.nbytes[kept],
        measured_ms=m.measured_ms[kept],
        n_blocks=pick(m.n_blocks),
        n_messages=pick(m.n_messages),
        places=tuple(np.asarray(m.places, dtype=object)[kept]) if m.places else (),
    )


def _line_rate(line_rate_gb_s: float | None, nic: Link | str | None) -> float | None:
    """The line rate to cap the fit at: given, or a NIC preset's; both given is refused."""
    if nic is None:
        return line_rate_gb_s
    if line_rate_gb_s is not None:
        raise InputError(
            "line_rate_gb_s",
            f"given ({line_rate_gb_s!r}) beside nic={nic!r}, which sets it too",
            "give one of them (--line-rate-gb-s or --nic)",
        )
    return _nic(nic).bandwidth_gb_s


def _nic(nic: Link | str) -> Link:
    """The NIC ``nic`` names (a :class:`Link`, a line-rate preset, a user link, ``"8x NAME"`` for a table of
    several NICs' bytes together); a cluster or a transport profile (whose bandwidth is a fit's, or a GPU's share
    of a node) is refused, naming what to give."""
    from .network.links import LINKS, MULTIPLE, PROFILES
    from .network.specs import SPECS

    if isinstance(nic, Link):
        return nic
    key = nic.strip().lower() if isinstance(nic, str) else nic
    multiple = MULTIPLE.match(key) if isinstance(key, str) else None
    base = multiple.group(2) if multiple else key
    if base in SPECS:
        why, fix = "is a cluster, not a NIC", f"give its NIC, nic={SPECS[base]['nic']!r}"
    elif base in PROFILES:
        why, fix = "is a transport profile, not a NIC (a fit's bandwidth)", "give the NIC it ran on, e.g. 'ib-ndr'"
    else:
        try:
            return get_link(nic)
        except InputError as error:
            fix = f"give the NIC measured: a line-rate preset ({', '.join(LINKS)}), a saved link, or a perfmodel.Link"
            raise InputError("nic", error.problem, fix) from None
    raise InputError("nic", f"{nic!r} {why}", fix)


def _above_what_was_measured(link: Link, m: Measurements, cap: float | None) -> tuple[str, ...]:
    """What the fit cannot vouch for: a bandwidth above every measurement by more than the fit's own error
    (no line rate given), or measurements faster than the line rate given."""
    best, error = m.best_throughput_gb_s, cast(FitReport, link.fit).max_relative_error  # (a fitted link's)
    margin = max(error, _ABOVE_BEST)
    if cap is not None:
        if best > cap:
            return (
                (
                    f"{m.source}: the best measured throughput, {best:.4g} GB/s, is above the line rate given, "
                    f"{cap:.4g} GB/s: check the units of the table and the NIC"
                ),
            )
        return ()
    if link.bandwidth_gb_s > best * (1.0 + margin):
        return (
            (
                f"{m.source}: the fitted bandwidth, {link.bandwidth_gb_s:.4g} GB/s, is above the best measured "
                f"throughput, {best:.4g} GB/s, by more than the fit's own error ({error:.1%}): it extrapolates "
                "beyond the measurements. Fix: give the line rate (line_rate_gb_s=, --line-rate-gb-s or --nic) to "
                "cap it, or measure larger transfers"
            ),
        )
    return ()


# --- reading a table ---------------------------------------------------------------------------------


def read_measurements(table: pd.DataFrame | str | os.PathLike) -> tuple[pd.DataFrame, list[str], str]:
    """A measurements table as read (text cells stay text), the place of each row in its source
    ("line 7" of a text file, "row 3" of a Parquet file, "row <label>" of a DataFrame), and the
    source's name.

    Parameters
    ----------
    table
        A DataFrame, a CSV, JSON-lines or Parquet file, perftest's text output, or ``"dataset:NAME"``.

    Returns
    -------
    tuple
        The frame, each row's place, and the source's name.

    Examples
    --------
    >>> frame, places, where = read_measurements("dataset:fastdeploy-rdma-blocksize")
    >>> places[:2], where
    (['line 2', 'line 3'], 'dataset:fastdeploy-rdma-blocksize')
    """
    if isinstance(table, pd.DataFrame):
        where = str(table.attrs.get("source") or "the table")
        unique_columns([str(c) for c in table.columns], where)
        return table, [f"row {label!r}" for label in table.index], where
    if not isinstance(table, (str, os.PathLike)):
        raise InputError("table", f"got {type(table).__name__}", "pass a DataFrame, a file or 'dataset:NAME'")
    where = str(table)
    if where.startswith("dataset:"):
        from .ground.data import path as dataset_path

        path = dataset_path(where)
    else:
        path = Path(table)
    if path.is_dir():
        raise IsADirectoryError(21, "is a folder, not a table", str(path))
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", str(path))
    from .io import damage_named

    with damage_named(Path(where)):  # (a truncated or corrupt file named, with what to check)
        frame, places = read_measured_file(path, where)
    return frame, places, where


# --- bytes, times, blocks and messages ------------------------------------------------------------------


class _Columns:
    """A table's columns as numbers, each bad value reported at its place in the source."""

    def __init__(self, frame: pd.DataFrame, places: list[str], where: str) -> None:
        self.frame, self.places, self.where = frame, places, where

    def __contains__(self, column: str) -> bool:
        return column in self.frame.columns

    def numbers(self, column: str) -> np.ndarray | None:
        """A column as float64 (None when absent; empty cells NaN); a value that is not a number is refused."""
        if column not in self:
            return None
        cells = self.frame[column]
        refuse_non_numbers(cells, column, self.where, self.places)
        empty = cells.isna().to_numpy() | cells.astype(str).str.strip().eq("").to_numpy()
        values = pd.to_numeric(cells.where(~empty), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = np.isnan(values) & ~empty
        if bad.any():
            row = int(np.argmax(bad))
            raise InputError(
                f"{self.where}, {self.places[row]}",
                f"column {column!r} holds {cells.iloc[row]!r}, {not_a_number(cells.iloc[row])}",
                "repair it, or leave the cell empty",
            )
        return values

    def first(self, columns: Any) -> str | None:
        return next((c for c in columns if c in self), None)


def _measurements(frame: pd.DataFrame, places: list[str], where: str, **shape: Any) -> Measurements:
    """The measured transfers of a table: bytes, ms, blocks and messages; rows without a size or a
    measurement left out; every value checked at its place."""
    table = _Columns(frame, places, where)
    _refuse_two_of_one(table)
    _refuse_unclear_units(table)
    blocks, messages = table.numbers("n_blocks"), table.numbers("n_messages")
    size = table.first(SIZES)
    if size is not None:
        given = [a for a in _SHAPE if shape.get(a)]
        if given:
            raise InputError(
                where,
                f"gives bytes ({size!r}), so {', '.join(given)} (which turn num_input_tokens "
                "into bytes and messages) have nothing to do",
                "drop them, or give num_input_tokens instead of bytes",
            )
        nbytes, setup = cast(np.ndarray, table.numbers(size)), ""  # (the column is there)
    elif "num_input_tokens" in table and (shape["model"] or "model" in table):
        nbytes, messages, setup = _bytes_of_tokens(table, messages, **shape)
    else:
        raise InputError(
            where,
            f"needs an nbytes column (or perftest's #bytes), or num_input_tokens with a model "
            f"(model= / --model, or a model column); it has {list(frame.columns)}",
            "add the column, or name the model",
        )
    measured = _times(table, nbytes)
    return _kept(table, nbytes, measured, blocks, messages, setup)


def _refuse_two_of_one(table: _Columns) -> None:
    """Refuse two columns of one quantity, their names compared ignoring case (``nbytes`` beside ``#bytes`` or
    ``NBYTES``; ``measured_ms`` beside ``Measured_us``; one throughput twice): which one is it? Never one taken
    silently, the other ignored. perftest's typical and average latency, printed side by side, are one."""
    columns = [str(c) for c in table.frame.columns]

    def present(names: Any) -> list[str]:
        wanted = {name.lower() for name in names}
        return [c for c in columns if c.lower() in wanted]

    pairs = [{name.lower() for name in pair} for pair in _PERFTEST_TIMES]
    groups = [(present(SIZES), "which one is each transfer's bytes?")]
    times = present(TIMES)
    groups += [([] if {t.lower() for t in times} in pairs and len(times) == 2 else times, "which one was measured?")]
    groups += [(present([name]), "which one was measured?") for name in THROUGHPUTS]
    for found, question in groups:
        if len(found) > 1:
            raise InputError(table.where, f"has both {found[0]} and {found[1]}: {question}",
                             "keep the one measured, drop the other")  # fmt: skip


def _refuse_unclear_units(table: _Columns) -> None:
    """Refuse a time or throughput column whose unit calibrate cannot tell, and a column that is one it reads
    written in another case (names are read as written: it would be ignored)."""
    known = {*TIMES, *THROUGHPUTS}
    by_case = {name.lower(): name for name in (*known, *SIZES)}
    for column in table.frame.columns:
        text = str(column)
        meant = by_case.get(text.lower())
        if meant is not None and text != meant:
            raise InputError(
                table.where,
                f"column {text!r} is {meant} in another case (names are read as written: it would be ignored)",
                f"rename it {meant}",
            )
        if text not in known and text.startswith(("measured", "BW average")):
            raise InputError(
                table.where,
                f"column {text!r} has a unit calibrate cannot tell",
                "rename it measured_ms (milliseconds), measured_us (microseconds), measured_gb_s "
                "(decimal GB/s, 1e9 bytes/s) or measured_gib_s (binary GiB/s, 2**30 bytes/s)",
            )


def _bytes_of_tokens(
    table: _Columns,
    messages: np.ndarray | None,
    *,
    model: str | None,
    kv_cache_dtype: str | None,
    tp: int | None,
    decode_tp: int | None,
    scope: str | None,
    block_size: int | None,
    kv_layout: str | None,
) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Bytes (and, with a block size, messages) of each row's prompt under its model and setup."""
    from .model.models import kv_bytes, kv_messages

    if (block_size is not None and messages is not None) or (kv_layout is not None and block_size is None):
        given = "block_size" if block_size is not None else "kv_layout"
        why = "the table's n_messages column gives the messages" if messages is not None else "no block_size is given"
        raise InputError(table.where, f"{given} (which counts messages) has nothing to do: {why}",
                         f"drop {given}" + (", or the n_messages column" if messages is not None else ", or give "
                         "block_size (--block-size) too"))  # fmt: skip
    kv_layout = kv_layout or "layer_kv"

    models = _models_of(table, model)
    tokens = cast(np.ndarray, table.numbers("num_input_tokens"))  # (the caller found the column)
    shape: dict[str, Any] = dict(
        kv_cache_dtype=kv_cache_dtype,
        tp=1 if tp is None else tp,
        decode_tp=decode_tp,
        scope="rank" if scope is None else scope,
    )
    nbytes = np.full(len(tokens), np.nan)
    counted = block_size is not None and messages is None
    if counted:
        messages = np.full(len(tokens), np.nan)
    for name in dict.fromkeys(models):  # each model's bytes per prompt (windows and states included)
        rows = (models == name) & np.isfinite(tokens)
        try:
            nbytes[rows] = kv_bytes(name, tokens[rows], **shape)
            if counted:
                cast(np.ndarray, messages)[rows] = kv_messages(
                    name, tokens[rows], cast(int, block_size), kv_layout=kv_layout
                )
        except InputError as error:  # (a bad token cell: at its place in the table, not in the subset given)
            at = error.position if error.position is not None else error.row
            if (
                error.argument != "num_input_tokens"
                or not isinstance(at, (int, np.integer))
                or not 0 <= at < rows.sum()
            ):
                raise
            place = table.places[int(np.flatnonzero(rows)[at])]
            raise InputError(f"{table.where}, {place}", f"num_input_tokens is {error.value!r} ({error.problem})",
                             error.fix) from None  # fmt: skip
        except ValueError as error:  # (an unknown model: one InputError, named as the table or the call gave it)
            problem, _, fix = str(error).partition(". Fix: ")
            raise InputError(f"{table.where}: model", problem, fix.rstrip(".") or "pass a known model") from None
    setup = (
        f"{', '.join(dict.fromkeys(models))}; tp {shape['tp']}"
        + (f" to decode tp {decode_tp}" if decode_tp else "")
        + f", {shape['scope']} bytes"
        + (f", {kv_cache_dtype}" if kv_cache_dtype else "")
        + (f"; {block_size}-token blocks, {kv_layout} messages" if block_size else "")
    )
    return nbytes, messages, setup


def _models_of(table: _Columns, model: str | None) -> np.ndarray:
    """Each row's model: the one given, or the table's model column (an empty cell, or a column that says
    otherwise than the model given, is refused)."""
    if "model" not in table:
        return np.array([model] * len(table.frame), dtype=object)
    cells = table.frame["model"]
    names = [None if pd.isna(c) or not str(c).strip() else str(c).strip() for c in cells]
    for row, name in enumerate(names):
        if model is not None and name is not None and _presets.key_of(name) != _presets.key_of(model):
            raise InputError(
                f"{table.where}, {table.places[row]}",
                f"the model column says {name!r}, but the model given is {model!r}",
                "drop the model given, or the column",
            )
        if model is None and name is None:
            raise InputError(
                f"{table.where}, {table.places[row]}",
                "the model cell is empty",
                "name the row's model, or give one model for every row (model= / --model)",
            )
    return np.array([model] * len(names) if model is not None else names, dtype=object)


def _times(table: _Columns, nbytes: np.ndarray) -> np.ndarray:
    """Each row's measured ms: from the first time column present, each missing time from a throughput."""
    column = table.first(TIMES)  # (one time column, or perftest's pair: _refuse_two_of_one)
    measured = None if column is None else cast(np.ndarray, table.numbers(column)) * TIMES[column]
    for column, unit in THROUGHPUTS.items():  # throughput tables: the time each size took at the rate measured
        if column in table:
            rate = cast(np.ndarray, table.numbers(column))
            used = ~np.isnan(rate) & (True if measured is None else np.isnan(measured))
            bad = used & ~(np.isfinite(rate) & (rate > 0))
            if bad.any():  # (before a time is made of it: a negative rate is no negative time)
                row = int(np.argmax(bad))
                raise InputError(
                    f"{table.where}, {table.places[row]}",
                    f"the throughput {column} is {float(rate[row])!r}, not a finite number > 0",
                    "drop failed or empty measurements (an empty cell is left out)",
                )
            with np.errstate(divide="ignore", invalid="ignore"):
                from_throughput = nbytes / (rate * unit) * 1000.0
                off = np.abs(from_throughput / (np.nan if measured is None else measured) - 1.0) > _DISAGREE
            if off.any():  # (a time beside a throughput that says otherwise: which one was measured?)
                row = int(np.argmax(off))
                raise InputError(
                    f"{table.where}, {table.places[row]}",
                    f"the throughput {column} ({float(rate[row]):g}) gives {float(from_throughput[row]):.4g} ms, "
                    f"the time column {float(cast(np.ndarray, measured)[row]):.4g} ms: which one was measured?",
                    "keep the one measured, drop the other",
                )
            measured = from_throughput if measured is None else np.where(np.isnan(measured), from_throughput, measured)
    if measured is None:
        raise InputError(
            table.where,
            f"needs a time column ({', '.join(TIMES)}) or a throughput column "
            f"({', '.join(THROUGHPUTS)}); it has {list(table.frame.columns)}",
            "add one",
        )
    return measured


def _kept(
    table: _Columns,
    nbytes: np.ndarray,
    measured: np.ndarray,
    blocks: np.ndarray | None,
    messages: np.ndarray | None,
    setup: str,
) -> Measurements:
    """The rows with a size and a measurement (and counts, when given), each value checked > 0 at its place."""
    columns = {"the size": nbytes, "the time": measured, "n_blocks": blocks, "n_messages": messages}
    keep = np.ones(len(nbytes), dtype=bool)
    for values in columns.values():
        if values is not None:
            keep &= ~np.isnan(values)
    for label, values in columns.items():
        if values is None:
            continue
        bad = keep & ~(np.isfinite(values) & (values > 0))
        if bad.any():
            row = int(np.argmax(bad))
            raise InputError(
                f"{table.where}, {table.places[row]}",
                f"{label} is {float(values[row])!r}, not a finite number > 0",
                "drop failed or empty measurements (an empty cell is left out)",
            )
    if not keep.any():
        empty = [
            label
            for label in ("n_blocks", "n_messages")
            if columns[label] is not None
            and len(nbytes)
            and np.isnan(cast(np.ndarray, columns[label])).all()
            and not np.isnan(nbytes + measured).all()
        ]
        raise InputError(
            table.where,
            f"every row lacks {' and '.join(empty)} (its column is empty)" if empty else "has no row with both a size "
            "and a measurement",
            "fill the column in, or drop the column" if empty else "fill in the table",
        )  # fmt: skip
    places = tuple(p for p, k in zip(table.places, keep) if k)
    return Measurements(
        table.where,
        nbytes[keep],
        measured[keep],
        None if blocks is None else blocks[keep],
        None if messages is None else messages[keep],
        places,
        int((~keep).sum()),
        setup,
        left_out_places=tuple(p for p, k in zip(table.places, keep) if not k),
    )


def _lines_of(places: tuple[str, ...], shown: int = 5) -> str:
    """Places in words, the first ``shown`` of them ("lines 3 and 5", "rows 'a', 'b' and 7 more").

    >>> _lines_of(("line 3", "line 5")), _lines_of(("row 2",))
    ('lines 3 and 5', 'row 2')
    """
    first = list(places[:shown])
    kind = first[0].split(" ", 1)[0] if first else ""
    if first and all(p.startswith(f"{kind} ") for p in first):
        first = [p.split(" ", 1)[1] for p in first]
        kind += "s " if len(places) > 1 else " "
    else:
        kind = ""
    more = f" and {len(places) - shown} more" if len(places) > shown else ""
    listed = ", ".join(first) if more or len(first) < 2 else f"{', '.join(first[:-1])} and {first[-1]}"
    return kind + listed + more
