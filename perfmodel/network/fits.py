"""The numerics of fitting a link to measurements: how well a fit describes them (:class:`FitReport`), a
non-negative least-squares solve over a few parameters, and the floor a line rate puts on ms per byte.
:func:`perfmodel.fit_link` builds on them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from ..errors import InputError, not_a_number, shown
from ..inputs.coerce import non_numeric_kind, one_index
from ..inputs.words import count


@dataclass(frozen=True)
class FitReport:
    """How well a :func:`perfmodel.fit_link` (or :func:`perfmodel.fit_connector`) result describes its measurements (relative errors, fractions).

    Parameters
    ----------
    points : int
        How many measurements were fitted.
    max_relative_error, mean_relative_error : float
        The largest and the mean ``|predicted - measured| / measured`` (fractions).
    note : str
        What the data could not tell apart (empty: nothing).
    parameters : dict of str to float, optional
        Each fitted parameter's value (held ones: 0), by name.

    Examples
    --------
    >>> from perfmodel import fit_link
    >>> report = fit_link([1e6, 1e7, 1e8], [0.03, 0.21, 2.01]).fit
    >>> report.points, report.max_relative_error < 0.05
    (3, True)
    """

    points: int
    max_relative_error: float
    mean_relative_error: float
    note: str = ""
    parameters: dict[str, float] | None = field(default=None, compare=False)  # each parameter's value (held: 0)

    def describe(self) -> str:
        """The fit in one line: its parameters and errors, and what the data could not tell apart."""
        units = {
            "bandwidth_gb_s": ("GB/s", 1.0),
            "latency_ms": ("ms", 1.0),
            "per_block_ms": ("us per block", 1e3),
            "per_message_ms": ("us per message", 1e3),
            "request_ms": ("ms per request", 1.0),
            "per_descriptor_ms": ("us per descriptor", 1e3),
        }
        shown = [
            f"{value * units[name][1]:,.4g} {units[name][0]}"
            for name, value in (self.parameters or {}).items()
            if value and name in units
        ]
        return (", ".join(shown) or "no cost") + f"; {self.errors()}" + (f" ({self.note})" if self.note else "")

    def errors(self) -> str:
        """Its points and errors in words (an error past 1000% in 3 digits, never 300).

        >>> FitReport(3, 0.021, 0.01).errors()
        '3 points, max error 2.1%, mean 1.0%'
        """
        worst, mean = (
            f"{e:.1%}" if e < 10 else f"{e * 100:.3g}%" for e in (self.max_relative_error, self.mean_relative_error)
        )
        return f"{count(self.points, 'point')}, max error {worst}, mean {mean}"

    def far_off(self, check: str) -> str:
        """The warning a fit far from its measurements earns (its largest error above :data:`FAR_OFF`), ending
        with what to ``check``; empty when it is close. One rule for :func:`perfmodel.calibration.calibrate` and
        ``perfmodel connectors --fit``.

        >>> FitReport(3, 0.2, 0.1).far_off("check the units")
        'the fit is far from the measurements (3 points, max error 20.0%, mean 10.0%): check the units'
        >>> FitReport(3, 0.05, 0.01).far_off("check the units")
        ''
        """
        return f"the fit is far from the measurements ({self.errors()}): {check}" if self.far else ""

    @property
    def far(self) -> bool:
        """Whether its largest error is above :data:`FAR_OFF` (or not a number)."""
        return not self.max_relative_error <= FAR_OFF


#: A fit whose largest relative error is above this is far from its measurements, and said (:meth:`FitReport.far_off`).
FAR_OFF = 0.1

#: Sizes less than this fraction apart are one size to a fit (:func:`distinct_points`): their times tell a
#: bandwidth from a latency (or a per-descriptor cost from a per-request one) only through their noise.
SIZE_SPREAD = 0.1


def _groups(values: np.ndarray) -> np.ndarray:
    """Each value's group: sorted, a new group starts at the first value more than :data:`SIZE_SPREAD` above the
    smallest of the group before it (all values > 0, or all 0 for a count not given)."""
    order = np.argsort(values, kind="stable")
    labels, start, group = np.empty(values.size, dtype=np.int64), None, -1
    for i in order:
        if start is None or values[i] > start * (1.0 + SIZE_SPREAD):
            start, group = values[i], group + 1
        labels[i] = group
    return labels


def distinct_points(*columns: np.ndarray | None) -> int:
    """How many distinct points measurements hold: in each column (sizes, counts; None: not given) values less
    than :data:`SIZE_SPREAD` apart are one value, and two measurements are one point unless a column tells
    them apart. The one rule of :func:`perfmodel.fit_link`, :func:`perfmodel.fit_connector` and
    :func:`perfmodel.measured_fits`: a fit needs two points.

    >>> distinct_points(np.array([1e6, 1e6, 1.05e6]))                  # one size written thrice
    1
    >>> distinct_points(np.array([1e6, 1e6]), np.array([30_016, 3_776]))  # one size, two message counts
    2
    """
    given = [np.asarray(c, dtype=np.float64) for c in columns if c is not None]
    if not given or not given[0].size:
        return 0
    return len({tuple(row) for row in np.column_stack([_groups(c) for c in given])})


def one_point(what: str, sizes: np.ndarray, unit: str = "bytes") -> str:
    """The problem of measurements of one size (:func:`distinct_points` below 2), in the words
    :func:`perfmodel.fit_prefill` uses for one prompt length.

    >>> one_point("measurement", np.array([1e6, 1.02e6]))
    'needs measurements of at least two sizes (10% apart or more), got 2 measurements of one size (1,000,000 to 1,020,000 bytes)'
    """
    shown = lambda v: f"{v:,.0f}" if v >= 1000 else f"{v:.4g}"  # noqa: E731
    span = (
        f" ({' to '.join(dict.fromkeys(shown(v) for v in (sizes.min(), sizes.max())))} {unit})"
        if sizes.size > 1
        else ""
    )
    got = count(sizes.size, what) + (f" of one size{span}" if sizes.size > 1 else "")
    return f"needs measurements of at least two sizes ({SIZE_SPREAD:.0%} apart or more), got {got}"


def measured_vectors(where: str, **given: Any) -> dict[str, np.ndarray | None]:
    """A fit's measurements (by keyword; None stays None) as flat float64 arrays, read one way for every fit
    (:func:`perfmodel.fit_link`, :func:`perfmodel.fit_prefill`): Series of different indexes refused (they would
    pair by position, :func:`perfmodel.inputs.coerce.one_index`); booleans, durations and dates refused (never
    read as 1, in their raw unit or from an epoch); a value that is not a number named by its position.

    >>> measured_vectors("fit", nbytes=[1, 2], n_blocks=None)
    {'nbytes': array([1., 2.]), 'n_blocks': None}
    """
    one_index({label: values for label, values in given.items() if values is not None})
    vectors: dict[str, np.ndarray | None] = {}
    for label, values in given.items():
        kind = None if values is None else non_numeric_kind(values)
        if kind is not None:
            durations = kind == "durations" and label.endswith("_ms")
            raise InputError(
                f"{where}: {label}",
                f"got {kind} where plain numbers were expected",
                "divide durations by pd.Timedelta(1, 'ms')" if durations else "pass plain numbers",
            )
        data = values.to_numpy() if isinstance(values, pd.Series) else values
        try:
            vectors[label] = None if values is None else np.asarray(data, dtype=np.float64).ravel()
        except (TypeError, ValueError, OverflowError):
            flat = np.asarray(data, dtype=object).ravel()
            parsed = pd.to_numeric(pd.Series(flat), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            first = int(np.argmax(np.isnan(parsed) | ~np.isfinite(parsed))) if flat.size else 0
            value = flat[first] if flat.size else values
            raise InputError(
                f"{where}: {label}", f"{shown(value)} at position {first}, {not_a_number(value)}", "pass numbers"
            ) from None
    return vectors


def nonnegative_least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """argmin ||design @ x - target|| over x >= 0, for a few columns: the best of the unconstrained
    fits on every subset of the columns (exact, and cheap for up to three parameters)."""
    best, best_residual = np.zeros(design.shape[1]), float(np.sum(target**2))
    columns = range(design.shape[1])
    for size in range(1, design.shape[1] + 1):
        for subset in itertools.combinations(columns, size):
            solution, *_ = np.linalg.lstsq(design[:, subset], target, rcond=None)
            if np.all(solution >= 0):
                x = np.zeros(design.shape[1])
                x[list(subset)] = solution
                residual = float(np.sum((design @ x - target) ** 2))
                if residual < best_residual - 1e-15 * max(best_residual, 1.0):
                    best, best_residual = x, residual
    return best


def ms_per_byte_floor(line_rate_gb_s: float | None) -> float:
    """The least ms per byte a line rate allows (0: no line rate)."""
    if line_rate_gb_s is None:
        return 0.0
    if (
        isinstance(line_rate_gb_s, bool)
        or not isinstance(line_rate_gb_s, (int, float, np.number))
        or not (0 < line_rate_gb_s < np.inf)
    ):
        raise InputError(
            "line_rate_gb_s",
            f"{line_rate_gb_s!r} is not a number > 0",
            "pass the NIC's line rate in decimal GB/s (400 Gb/s = 50 GB/s)",
        )
    return 1e-6 / float(line_rate_gb_s)


def fit_measured(
    nbytes: Any, measured_ms: Any, n_blocks: Any, n_messages: Any, line_rate_gb_s: float | None
) -> tuple[dict[str, Any], FitReport, float]:
    """:func:`perfmodel.fit_link`'s fit: the link's parameters (``bandwidth_gb_s``, ``latency_ms``,
    ``per_block_ms``, ``per_message_ms``), its :class:`FitReport` and the best measured throughput (GB/s), the
    measurements checked first."""
    x, t, counts = _checked_measurements(nbytes, measured_ms, n_blocks, n_messages)
    # the terms, simplest first; a term the data cannot tell from those already kept is held at 0 (and said)
    terms = {
        "bandwidth": x,
        "per-block cost": counts.get("n_blocks"),
        "per-message cost": counts.get("n_messages"),
        "latency": np.ones_like(t),
    }
    kept: dict[str, np.ndarray] = {}
    notes = []
    for term, column in terms.items():
        if column is None:
            continue
        seen = [np.full_like(c, c.mean()) if distinct_points(c) < 2 else c for c in (*kept.values(), column)]
        scaled = np.column_stack(seen) / t[:, None]  # (a column of one size (SIZE_SPREAD) is as good as constant)
        if np.linalg.matrix_rank(scaled / np.abs(scaled).max(axis=0), tol=1e-9) > len(kept):
            kept[term] = column
        else:
            notes.append(
                f"the {term} cannot be told apart from the {' and '.join(kept)} on these measurements: held at 0"
            )
    # rows divided by t: least squares on the relative error, every parameter >= 0; a line rate bounds the
    # bandwidth from above, i.e. the ms per byte from below: ms_per_byte = floor + d with d >= 0
    floor = ms_per_byte_floor(line_rate_gb_s)
    target = np.ones_like(t) if floor == 0 else 1.0 - floor * x / t
    solution = dict(zip(kept, nonnegative_least_squares(np.column_stack(list(kept.values())) / t[:, None], target)))
    if floor:
        held = solution.get("bandwidth", 0.0) == 0
        solution["bandwidth"] = solution.get("bandwidth", 0.0) + floor
        if held:
            notes.append(f"the bandwidth is held at the line rate, {line_rate_gb_s:g} GB/s")
    ms_per_byte = solution.get("bandwidth", 0.0)
    if ms_per_byte <= 0:
        notes.append("the time does not grow with the bytes on these measurements: the bandwidth is unlimited")
    predicted = np.column_stack([cast(np.ndarray, terms[k]) for k in solution]) @ np.array(list(solution.values()))
    errors = np.abs(predicted - t) / t
    parameters: dict[str, Any] = {
        "bandwidth_gb_s": float(1e-6 / ms_per_byte) if ms_per_byte > 0 else np.inf,
        "latency_ms": float(solution.get("latency", 0.0)),
        "per_block_ms": float(solution.get("per-block cost", 0.0)),
        "per_message_ms": float(solution.get("per-message cost", 0.0)),
    }
    if floor:
        parameters["bandwidth_gb_s"] = min(parameters["bandwidth_gb_s"], float(cast(float, line_rate_gb_s)))
    report = FitReport(
        points=int(x.size),
        max_relative_error=float(errors.max()),
        mean_relative_error=float(errors.mean()),
        note="; ".join(notes),
        parameters=parameters,
    )
    return parameters, report, float((x / t).max()) / 1e6


def _checked_measurements(
    nbytes: Any, measured_ms: Any, n_blocks: Any, n_messages: Any
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """:func:`fit_measured`'s measurements checked: sizes and times (each finite and > 0, one time per size, two
    distinct points or more) and the counts given, one per measurement."""
    read = measured_vectors(
        "fit_link", nbytes=nbytes, measured_ms=measured_ms, n_blocks=n_blocks, n_messages=n_messages
    )
    x, t = cast(np.ndarray, read["nbytes"]), cast(np.ndarray, read["measured_ms"])
    if x.shape != t.shape:
        raise InputError("fit_link", f"{x.size} sizes but {t.size} times", "pass one time per measured size")
    counts: dict[str, np.ndarray] = {}
    for label in ("n_blocks", "n_messages"):
        given = read[label]
        if given is not None:
            try:
                counts[label] = np.broadcast_to(given, x.shape).ravel()
            except ValueError:
                raise InputError(
                    f"fit_link: {label}",
                    f"{count(np.size(given), 'value')} for {count(x.size, 'measurement')}",
                    "pass one count per measurement, or one for all",
                ) from None
    for label, values in (("nbytes", x), ("measured_ms", t), *counts.items()):
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(
                f"fit_link: {label}",
                f"{count(int(bad.sum()), 'value')} not finite and > 0, first at position {i}: {float(values[i])!r}",
                "drop failed or empty measurements",
            )
    if distinct_points(x, *counts.values()) < 2:  # (one size written twice, or sizes too close: no bandwidth)
        raise InputError(
            "fit_link", one_point("measurement", x), "measure transfers of several sizes (e.g. 1 MB to 1 GB)"
        )
    return x, t, counts


def fit_warnings(report: FitReport, best_gb_s: float, line_rate_gb_s: float | None) -> tuple[str, ...]:
    """What a fit of :func:`perfmodel.fit_link` warns of: a measured throughput above the line rate given (the
    units or the NIC are wrong), and a fit far from its measurements (:meth:`FitReport.far_off`).

    >>> fit_warnings(FitReport(3, 0.02, 0.01), 60.0, 50.0)
    ('the best measured throughput, 60 GB/s, is above the line rate given, 50 GB/s: check the units (bytes and ms) and the NIC',)
    """
    said: tuple[str, ...] = ()
    if line_rate_gb_s is not None and best_gb_s > line_rate_gb_s:
        above = f"{best_gb_s:.4g} GB/s, is above the line rate given, {line_rate_gb_s:.4g} GB/s"
        said += (f"the best measured throughput, {above}: check the units (bytes and ms) and the NIC",)
    far = report.far_off("check the units (bytes and ms), and that each transfer is one NIC's bytes of one setup")
    return said + ((far,) if far else ())
