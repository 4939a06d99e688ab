"""The figure of a calibration: measured transfers against a fitted link's (and others') predictions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

from ..errors import InputError
from ..inputs.words import count
from ..network.fits import measured_vectors
from ..network.links import Link, get_link
from ._style import axes_or_current, line_styles, plain_log_axis, si


def calibration(
    nbytes: Any,
    measured_ms: Any,
    link: Link | str,
    *,
    n_blocks: Any = None,
    n_messages: Any = None,
    fitted: Any = None,
    compare: Sequence[Link | str] = (),
    legend: bool = True,
    ax: Axes | None = None,
    **kwargs: Any,
) -> Axes:
    """Measured transfer times against a fitted link's predictions (and other links', e.g. line rate).

    Log-log over transfer size: the measurements as points (hollow where the fit is not of them), each link's
    prediction as a line through the same sizes (and block counts), its largest relative error over the
    measurements fitted in the legend.

    Parameters
    ----------
    nbytes, measured_ms
        The measurements (bytes, ms), as given to :func:`perfmodel.fit_link`.
    link
        The fitted link (or a preset's name).
    n_blocks, n_messages
        Blocks and messages of each measurement (for links with per-block and per-message costs).
    fitted
        Which measurements the fit is of (bool per measurement, as
        :attr:`perfmodel.calibration.Measurements.fitted`); default: all.
    compare
        Other links (or preset names) drawn for comparison.
    legend
        Whether to draw the legend.
    ax
        Where to draw (default: the current Axes).
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot` for the measurements.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np, perfmodel, perfmodel.plotting as pp
    >>> nbytes = np.geomspace(1e4, 1e9, 8)
    >>> measured = 0.05 + nbytes / 40e9 * 1000
    >>> ax = pp.calibration(nbytes, measured, perfmodel.fit_link(nbytes, measured, name="fit"), compare=["ib-ndr"],
    ...                     ax=plt.subplots()[1])
    >>> [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()]
    ['measured', 'fit', 'ib-ndr']
    """
    read = measured_vectors("calibration", nbytes=nbytes, measured_ms=measured_ms)
    x, t = cast(np.ndarray, read["nbytes"]), cast(np.ndarray, read["measured_ms"])
    if not x.size or x.shape != t.shape:
        raise InputError(
            "calibration",
            f"{count(x.size, 'transfer size')} and {count(t.size, 'measured time')}",
            "pass one measured time per size, as given to perfmodel.fit_link",
        )
    bad = ~((x > 0) & (t > 0) & np.isfinite(x) & np.isfinite(t))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            "calibration",
            f"measurement {i} ({x[i]!r} bytes in {t[i]!r} ms) is not of bytes > 0 in ms > 0",
            "drop failed or empty measurements, as perfmodel.fit_link needs",
        )
    link = get_link(link)  # (a preset's name, as compare= takes)
    ax = axes_or_current(ax)
    blocks, messages = (
        np.zeros_like(x) if n is None else np.broadcast_to(np.asarray(n, dtype=float), x.shape)
        for n in (n_blocks, n_messages)
    )
    kept = np.ones(x.shape, bool) if fitted is None else np.broadcast_to(np.asarray(fitted, dtype=bool), x.shape)
    order = np.argsort(x, kind="stable")
    points = {"marker": "o", "color": "0.1", "label": "measured", **kwargs}
    ax.plot(x[order][kept[order]], t[order][kept[order]], linestyle="none", **points)
    if not kept.all():
        hollow = {**points, "markerfacecolor": "none", "label": "measured, not fitted"}
        ax.plot(x[order][~kept[order]], t[order][~kept[order]], linestyle="none", **hollow)
    for candidate, style in zip([link, *map(get_link, compare)], line_styles()):
        predicted = np.asarray(candidate.transfer_ms(x, blocks, messages), dtype=float)
        worst = float(np.max(np.abs(predicted[kept] - t[kept]) / t[kept]))
        ax.plot(
            x[order], predicted[order], label=f"{candidate.name}: max error {worst:.0%}", **{**style, "marker": None}
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: si(v) + "B"))
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("transfer time (ms)")
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        ax.legend(fontsize="small")
    return ax
