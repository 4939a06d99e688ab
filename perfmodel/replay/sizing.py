"""Sizing answers: the fewest NICs whose p-th percentile handoff delay on a trace meets a budget, each answer
with the question it answers (the percentile of what, with which contention, over which NICs).

One rule decides "the p-th percentile meets the budget" for every entry point (:func:`required_nics`,
:func:`perfmodel.summarize`'s ``p99_ms``, ``perfmodel trace --grid --budget-ms``): :func:`percentile_ms`
(numpy's ``"linear"`` method) and ``<=`` (:func:`meets_budget`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, check_choice, check_flag, check_whole, shown, warn
from ..ground.progress import says_each_warning_once
from ..inputs.codes import choice_code, choice_names
from ..inputs.words import count as count_of
from ..options import renamed_keywords
from .summaries import (
    CONTENTION_WORDS,
    MAX_NICS_PER_GPU,
    QUANTILE_METHOD,
    alone_question,
    bytes_words,
    check_percentile,
    counted,
    fewest_meeting,
    meets_budget,
    nic_counts,
    percentile_ms,
    replay_percentile_question,
)

__all__ = [
    "MAX_NICS_PER_GPU",
    "QUANTILE_METHOD",
    "NicSizing",
    "alone_question",
    "buildable",
    "counted",
    "fewest_meeting",
    "meets_budget",
    "nic_counts",
    "percentile_ms",
    "replay_percentile_question",
    "required_nics",
]

#: The link counts :func:`required_nics` tries on a link by default (1 to 8: the NICs of an 8-GPU node).
DEFAULT_LINK_COUNTS = tuple(range(1, 9))


@dataclasses.dataclass(frozen=True)
class NicSizing:
    """The answer of :func:`required_nics`: a count of NICs, and the question it answers.

    ``str()`` gives both, e.g. ``"p99 of per-request handoff delays replayed ...: 3 links"``.

    Parameters
    ----------
    count
        The fewest count tried whose percentile meets the budget (``inf`` where none does).
    unit
        What is counted: ``"NICs per node"`` (a cluster's), ``"links"`` (separate links, each the link given) or
        ``"NICs striped"`` (NICs: a link of several, ``"4x ib-ndr"``, is 4 of them, its multiples 8, 12, ...).
    axis
        The replay's input varied: ``"nics_per_node"``, ``"links"`` or ``"link"``.
    percentile, budget_ms, contention, scope
        The percentile (99 for the p99), the budget (ms), the replay's contention and scope (``percent``: the
        percentile's old name, deprecated).
    question
        The question answered, in words.
    tried
        One row per count tried: the count (column ``axis``), the percentile (``p99_ms``), ``meets_budget``.

    Examples
    --------
    >>> import math
    >>> answer = NicSizing(count=math.inf, unit="links", axis="links", percentile=99.0, budget_ms=5.0,
    ...                    contention="fifo", scope="rank", question="p99 within 5 ms", tried=None)
    >>> answer.count
    inf
    """

    count: float
    unit: str
    axis: str
    percentile: float
    budget_ms: float
    contention: str
    scope: str
    question: str
    tried: pd.DataFrame = dataclasses.field(repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.question}: {counted(self.count, self.unit)}"

    @property
    def percent(self) -> float:
        """The percentile's old name (deprecated: read ``percentile``)."""
        warn("NicSizing.percent is now NicSizing.percentile; the old name goes away in a future release", FutureWarning)
        return self.percentile


def _question(percentile: float, budget_ms: float, contention: str, scope: str, over: str) -> str:
    return (
        f"p{percentile:g} of per-request handoff delays within {budget_ms:g} ms, replayed {over}, "
        f"{CONTENTION_WORDS[choice_code('contention', contention)]}, {scope}"
    )


def buildable(
    question: str, name: str, counts: Sequence[int], build: Callable[[int], Any], none: str = "inf"
) -> list[tuple[int, Any]]:
    """Each NIC count per node a cluster can be built with, and what ``build`` makes of it; the counts ``build``
    refuses (its PCIe switches, NIC map or NICs down cannot take them) are left out, and one warning names them.

    Parameters
    ----------
    question
        The function asking (it starts the warning).
    name
        The cluster's name.
    counts
        NICs per node to try, ascending.
    build
        A count's cluster (or its answer): raises :class:`InputError` for a count the cluster cannot take.
    none
        What the question answers where no count tried meets its budget (``"inf"``, ``"None"``).

    Returns
    -------
    list of (int, object)
        The counts built, each with what ``build`` made of it.

    Raises
    ------
    InputError
        The first count's refusal, where no count can be built.

    Examples
    --------
    >>> buildable("q", "c", [1, 2, 4], lambda k: k * 10)
    [(1, 10), (2, 20), (4, 40)]
    """
    built, skipped = [], []
    for count in counts:
        try:
            built.append((count, build(count)))
        except InputError as error:
            skipped.append((count, error))
    if not built and skipped:
        raise skipped[0][1]
    if skipped:  # (never tried: an answer of none says only that none of the others meets the budget)
        why: dict[str, list[str]] = {}  # (each reason once, with the counts it refused)
        for c, refusal in skipped:
            why.setdefault(refusal.problem, []).append(str(c))
        reasons = "; ".join(f"{', '.join(refused)}: {problem}" for problem, refused in why.items())
        warn(
            f"{question}: cluster {name!r} cannot take {count_of(len(skipped), 'NIC count')} per node ({reasons}), "
            f"so they were not tried; the answers are among {', '.join(str(c) for c, _ in built)}, and {none} means "
            "none of those meets the budget"
        )
    return built


def _counts(counts: Sequence[int] | None) -> list[int] | None:
    """The counts asked for, each a whole number >= 1 and given once (a count given twice would replay twice
    and be listed twice in ``tried``: refused, as the grids refuse a repeated value)."""
    if counts is None:
        return None
    given = [check_whole("counts", c, smallest=1) for c in np.atleast_1d(np.asarray(counts, dtype=object))]
    if not given:
        raise InputError("counts", "is empty", "pass the counts to try, e.g. counts=[1, 2, 4, 8]")
    repeated = sorted({c for c in given if given.count(c) > 1})
    if repeated:
        raise InputError(
            "counts",
            f"has a repeated value: {', '.join(map(str, repeated))} (its replay would run twice)",
            "give each count once",
        )
    return given


def _striped(one: Any, counts: list[int] | None) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    """Striped candidates in NICs: a link of several (``"4x ib-ndr"``: 4) counts its NICs, 4 per multiple; with
    the question's words for what the transfers go over."""
    from ..network.links import MULTIPLE, Link

    if not isinstance(one, Link):  # (a bandwidth of 0 GB/s, as the replay reads it: its fallback delay)
        name = f"{float(one):g} GB/s"
        options: list[tuple[int, dict[str, Any]]] = [
            (n, dict(link=float(one) * n)) for n in counts or DEFAULT_LINK_COUNTS
        ]
        return options, f"over one '{name}' link N times as fast (N NICs striped)"
    nics, base = 1, one.name
    while (match := MULTIPLE.match(base)) is not None:
        nics, base = nics * int(match.group(1)), match.group(2)
    if nics == 1:
        options = [(n, dict(link=one.times(n))) for n in counts or DEFAULT_LINK_COUNTS]
        return options, f"over one '{one.name}' link N times as fast (N NICs striped)"
    for c in counts or ():
        if c % nics:
            raise InputError(
                "counts",
                f"{c} is not a multiple of the {nics} NICs of {one.name!r} (striped counts are NICs)",
                f"pass multiples of {nics}, or link={base!r} to stripe any count of its NICs",
            )
    counts = counts or [nics * n for n in DEFAULT_LINK_COUNTS]
    options = [(c, dict(link=dataclasses.replace(one.times(c // nics), name=f"{c}x {base}"))) for c in counts]
    return options, (
        f"over one link of N '{base}' NICs striped, N times as fast as one (N NICs striped: {nics} per '{one.name}')"
    )


def _candidates(
    link: Any,
    counts: Sequence[int] | None,
    striped: bool,
    tp: int,
    scope: str,
) -> tuple[str, str, list[tuple[int, dict[str, Any]]], str, str]:
    """(axis, unit, [(count, the replay's keywords)], where the transfers go, the bytes each carries)."""
    bytes_of = bytes_words(scope, False) + f" at TP{tp}"  # (one rank's bytes at TP1 are the whole model's)
    from ..network.links import Link, get_link
    from ..network.placement import get_cluster, is_cluster

    counts = _counts(counts)
    if is_cluster(link):
        if striped:
            raise InputError("striped", "applies to a link, but a cluster's NICs are its own", "drop striped=True")
        base = get_cluster(link)
        build = lambda count: dict(link=dataclasses.replace(base, nics_per_node=int(count)))  # noqa: E731
        if counts:  # (a count asked for by name that its PCIe switches cannot take: refused)
            options = [(count, build(count)) for count in counts]
        else:  # (the counts a node takes that this one cannot: skipped, and said)
            options = buildable("required_nics", base.name, nic_counts(base.gpus_per_node), build)
        return (
            "nics_per_node",
            "NICs per node",
            options,
            f"on {base.name or 'the cluster'} with N NICs per node",
            f"each TP{tp} handoff's flows over the node's NICs",
        )
    if isinstance(link, (bool, np.bool_)) or not isinstance(link, (str, Link, numbers.Real)):
        raise InputError(
            "link",
            f"{link!r} is not a link, a bandwidth or a cluster",
            "pass a link name such as 'ib-ndr', a perfmodel.Link, a bandwidth in GB/s, or a perfmodel.Cluster",
        )
    one: Any
    if not isinstance(link, numbers.Real):
        one = get_link(link)
    elif link == 0:  # (a bandwidth of 0 GB/s, which no Link is, goes to the replay as it is: its fallback delay)
        one = 0.0
    else:
        one = Link(f"{float(link):g} GB/s", float(link))
    name = f"{one:g} GB/s" if isinstance(one, float) else one.name
    if striped:
        options, over = _striped(one, counts)
        return "link", "NICs striped", options, over, f"{bytes_of} striped over the N"
    return (
        "links",
        "links",
        [(n, dict(link=one, links=n)) for n in counts or DEFAULT_LINK_COUNTS],
        f"over N separate '{name}' links",
        f"{bytes_of} over one link whole",
    )


@renamed_keywords(percent="percentile")
@says_each_warning_once
def required_nics(
    trace: pd.DataFrame,
    link: Any,
    model: Any,
    *,
    budget_ms: float,
    contention: str,
    percentile: float = 99,
    counts: Sequence[int] | None = None,
    striped: bool = False,
    **replay_options: Any,
) -> NicSizing:
    """The fewest NICs with which the ``percentile``-th percentile of a trace's replayed, per-request handoff
    delays meets ``budget_ms``, with ``contention`` as the replay takes it; the answer says which question it
    answers.

    The trace is replayed (:func:`perfmodel.replay_handoffs`) once per count, each the same but for the
    count: on a cluster (:class:`perfmodel.Cluster` or a preset's name), its NICs per node (every count its
    nodes can take, :func:`nic_counts`); on a link, ``links=N`` separate links, each transfer over one of them
    whole, or with ``striped=True`` one link ``"Nx"`` as fast (1 to 8 by default), counted in NICs (a link of
    several, ``"4x ib-ndr"``, is striped 1 to 8 times: 4 to 32 NICs). Every count is tried (no monotonicity
    assumed); the answer is the smallest whose percentile (:func:`percentile_ms`) is within the budget
    (:func:`meets_budget`). Counts a cluster cannot be built with (its PCIe switches, NIC map or NICs down) are
    skipped with a warning that names them, as :func:`perfmodel.required_nics_per_node` skips them. ``contention="none"`` prices each handoff alone, as
    :func:`perfmodel.required_nics_per_node` does for one prompt.

    Parameters
    ----------
    trace
        Requests, as :func:`perfmodel.replay_handoffs` takes them.
    link
        A link preset's name (``"ib-ndr"``: one NIC; ``"4x ib-ndr"``: four), a :class:`perfmodel.Link`, a
        bandwidth in GB/s (0 reads as :func:`perfmodel.replay_handoffs` reads it: its ``fallback_delay_ms``) or a
        cluster.
    model
        The model (a preset name or config).
    budget_ms
        The budget the percentile must meet (ms, > 0).
    contention
        ``"none"``, ``"fifo"`` or ``"fair"`` (a cluster: ``"none"`` or ``"fair"``), as the replay takes it:
        no default, since it decides the answer.
    percentile
        The percentile (default 99: the p99; ``percent=``, its old name, is deprecated).
    counts
        The counts to try, each once (default: those above); striped, NICs (multiples of the link's own).
    striped
        On a link: vary ``"Nx link"`` (one link N times as fast) instead of ``links=N``.
    **replay_options
        Any other keyword of :func:`perfmodel.replay_handoffs` (``tp``, ``scope``, ``decode_workers``...).

    Returns
    -------
    NicSizing
        ``count`` (``inf`` where no count tried meets the budget), ``question`` in words and the counts
        ``tried`` with their percentile; ``str()`` gives both.

    Examples
    --------
    >>> import perfmodel
    >>> from perfmodel.replay.sizing import required_nics
    >>> trace = perfmodel.synthetic_trace(300, rate_per_s=40, seed=0)
    >>> answer = required_nics(trace, "ib-ndr", "llama-3.1-70b", budget_ms=200, contention="fifo")
    >>> answer.count, answer.unit
    (2, 'links')
    >>> print(answer)
    p99 of per-request handoff delays within 200 ms, replayed over N separate 'ib-ndr' links, transfers queued
    first come first served on each link, one rank's bytes of each request (scope rank) at TP1 over one link whole: 2 links
    >>> required_nics(trace, "ib-ndr", "llama-3.1-70b", budget_ms=200, contention="none").count  # each alone
    1
    """
    from . import check_keywords, prepare_trace, replay_prepared

    check_choice("contention", contention, choice_names("contention"))
    check_flag("striped", striped)
    number = isinstance(budget_ms, (int, float, np.integer, np.floating)) and not isinstance(budget_ms, bool)
    if not (number and math.isfinite(budget_ms) and budget_ms > 0):
        raise InputError("budget_ms", f"{shown(budget_ms)} is not a finite number of ms > 0", "pass budget_ms > 0")
    check_percentile(percentile)
    for name in ("link", "links", "kv_transfer_bandwidth", "model", "kv_bytes_per_token", "contention"):
        if name in replay_options:
            raise InputError(name, "is set by required_nics itself", f"drop {name}=...")
    if "nics_per_node" in replay_options:  # (the count it varies on a cluster, as links on links: refused)
        raise InputError("nics_per_node", "is what required_nics searches on a cluster",
                         "drop nics_per_node, or give the counts to try as counts=")  # fmt: skip
    check_keywords("required_nics", {name: v for name, v in replay_options.items() if name != "ready_ms"})
    scope = str(replay_options.get("scope", "rank"))
    axis, unit, options, over, carried = _candidates(link, counts, striped, int(replay_options.get("tp", 1)), scope)
    prepared = prepare_trace(trace, ready_ms=replay_options.pop("ready_ms", None))
    rows: list[dict[str, Any]] = []
    alone = axis == "links" and contention == "none"  # (each handoff alone: the count of links changes nothing)
    for count, config in options:
        if alone and rows:  # (one replay answers every count, exactly)
            rows.append({**rows[0], axis: count})
            continue
        config = {**config, "links": 1} if alone else config
        replay = replay_prepared(prepared, model=model, contention=contention, **config, **replay_options)
        delays = replay["handoff_delay_ms"].to_numpy(dtype=np.float64)
        if not np.isfinite(delays).any():  # (no request, or none whose handoff is modeled: nothing to size)
            raise InputError(
                "trace",
                f"has no handoff to size ({count_of(len(delays), 'request')}, no finite delay among them)",
                "pass a trace of completed prefill requests",
            )
        p = float(percentile_ms(delays, percentile))
        rows.append({axis: count, f"p{percentile:g}_ms": p, "meets_budget": bool(p <= budget_ms)})
    tried = pd.DataFrame(rows, columns=[axis, f"p{percentile:g}_ms", "meets_budget"])
    fewest = fewest_meeting([int(c) for c in tried[axis]], tried[f"p{percentile:g}_ms"], budget_ms)
    return NicSizing(
        count=fewest,
        unit=unit,
        axis=axis,
        percentile=float(percentile),
        budget_ms=float(budget_ms),
        contention=contention,
        scope="cluster" if axis == "nics_per_node" else scope,
        question=_question(percentile, budget_ms, contention, carried, over)
        + ("" if counts is None else f", N among {', '.join(str(c) for c in tried[axis])}"),  # (the counts asked for)
        tried=tried,
    )
