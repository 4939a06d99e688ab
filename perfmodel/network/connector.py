"""A connector: the serving engine's integration that moves a handoff (vLLM's NixlConnector, SGLang's NIXL and
Mooncake backends), apart from the transport under it: a fixed cost per request, a cost per descriptor, and the
window its engine's own transfer metric covers. Built-in connectors (:data:`CONNECTORS`) carry each figure's
public source and the engine versions it holds for; where no source gives a figure, it is 0 (off).
:func:`fit_connector` separates a connector's costs from a transport's in end-to-end measurements."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError, check_number, finite_at_least, shown, warn
from ..inputs.coerce import non_numeric_kind
from ..inputs.words import count
from .fits import FitReport, distinct_points, nonnegative_least_squares, one_point

__all__ = ["CONNECTORS", "WINDOWS", "Connector", "fit_connector", "get_connector", "save_connector", "user_connectors"]

#: What an engine's own transfer metric covers of a handoff (:attr:`Connector.window`), in words.
WINDOWS = {
    "handoff": "the whole handoff: the connector's work, then the transfer (an end-to-end measurement)",
    "transfer": "the transfer once posted: the connector's work before the post is outside it",
}


@dataclass(frozen=True)
class Connector:
    """A serving engine's KV connector: what it costs on top of its transport, and what its engine's metric sees.

    Every handoff that moves bytes pays ``request_ms`` once (on a :class:`perfmodel.Cluster`, each of its flows
    pays it in parallel, so once), and ``per_descriptor_ms`` for each descriptor (message: a contiguous region of
    the KV cache, see ``kv_layout`` and ``blocks_per_message``) a rank posts, both on top of the link's or
    transport's own costs: ``connector=`` adds them to ``latency_ms`` and ``per_message_ms``, wherever those go.

    Parameters
    ----------
    name
        A label for tables and plots.
    request_ms
        Cost of each handoff, in ms (building and launching it: descriptor ids, handles, notifications).
    per_descriptor_ms
        Cost of each descriptor a rank posts, in ms (needs ``block_size``).
    window
        What the engine's own transfer metric covers (:data:`WINDOWS`): ``"handoff"`` (the connector's work and the
        transfer) or ``"transfer"`` (the transfer once posted). :meth:`metric_ms` is a modelled handoff in that
        window.
    metric
        The engine's metric of the transfer (``""``: none named).
    source
        Where the figures come from.
    version
        The engine versions the figures hold for.
    fit
        How well a fitted connector describes its measurements (:func:`fit_connector`; None otherwise).

    Examples
    --------
    >>> from perfmodel import Connector, handoff_delay_ms
    >>> ours = Connector("ours", request_ms=2.0)
    >>> handoff_delay_ms(1_000, 1.0, 1_000_000, connector=ours)   # 1,000 ms of bytes, 2 ms of connector
    np.float64(1002.0)
    """

    name: str = "none"
    request_ms: float = 0.0
    per_descriptor_ms: float = 0.0
    window: str = "handoff"
    metric: str = ""
    source: str = ""
    version: str = ""
    fit: FitReport | None = field(default=None, compare=False, repr=False)  # set by fit_connector

    def __post_init__(self) -> None:
        where = f"connector {self.name!r}"
        for term, what in (("request_ms", "ms per handoff"), ("per_descriptor_ms", "ms per descriptor")):
            value = check_number(
                where, term, getattr(self, term), finite_at_least(0.0), "is not a finite number >= 0", f"pass {what}"
            )
            object.__setattr__(self, term, value)
        if not isinstance(self.window, str) or self.window not in WINDOWS:
            raise InputError(
                where,
                f"window {self.window!r} is not one of {', '.join(map(repr, WINDOWS))}",
                "say what the engine's transfer metric covers: 'handoff' (end to end) or 'transfer' (once posted)",
            )
        for text in ("name", "metric", "source", "version"):
            if not isinstance(getattr(self, text), str):
                raise InputError(where, f"{text} {getattr(self, text)!r} is not text", f"pass {text} as a string")

    @property
    def off(self) -> bool:
        """Whether it costs nothing (every figure 0)."""
        return self.request_ms == 0 and self.per_descriptor_ms == 0

    def costs_ms(self, descriptors: Any = 0) -> Any:
        """What it adds to a handoff that moves bytes and posts ``descriptors`` descriptors per rank, in ms.

        >>> Connector("c", request_ms=1.0, per_descriptor_ms=0.01).costs_ms([0, 100])
        array([1., 2.])
        """
        return self.request_ms + self.per_descriptor_ms * _as_given("descriptors", descriptors, whole=True)

    def metric_ms(self, handoff_ms: Any, descriptors: Any = None) -> Any:
        """A modelled handoff (``handoff_ms``, with this connector, of ``descriptors`` descriptors per rank) in the
        window of the engine's metric: itself for ``"handoff"``; without the connector's work for ``"transfer"``
        (``descriptors`` needed where it costs per descriptor; never below 0).

        >>> c = Connector("c", request_ms=3.0, window="transfer")
        >>> float(c.metric_ms(10.0))
        7.0
        """
        handoff = _as_given("handoff_ms", handoff_ms)
        if self.window == "handoff":
            return handoff
        if self.per_descriptor_ms and descriptors is None:
            raise InputError(
                "descriptors", f"{self.name!r} costs per descriptor", "pass each handoff's descriptors per rank"
            )
        costs = self.costs_ms(0 if descriptors is None else descriptors)
        return np.where(handoff > 0, np.maximum(handoff - costs, 0.0), handoff)

    def describe(self) -> str:
        """One line: its costs (or off), the metric's window, and the versions.

        >>> CONNECTORS["vllm-nixl-0.10.1"].describe()
        'vllm-nixl-0.10.1: 3 ms per request; vllm:nixl_xfer_time_seconds covers the transfer once posted (vLLM v0.10.1.1 and earlier)'
        """
        costs = [
            f"{self.request_ms:g} ms per request" if self.request_ms else "",
            f"{self.per_descriptor_ms * 1e3:g} us per descriptor" if self.per_descriptor_ms else "",
        ]
        shown = ", ".join(c for c in costs if c) or "no cost: off"
        metric = f"; {self.metric or 'its metric'} covers {WINDOWS[self.window].split(':')[0]}"
        return f"{self.name}: {shown}{metric}" + (f" ({self.version})" if self.version else "")


_NIXL_METRIC = "vllm:nixl_xfer_time_seconds"
_SGLANG_STAGE = 'sglang:per_stage_req_latency_seconds{stage="prefill_transfer_kv_cache"}'

#: Built-in connectors by name, each figure with its public source and the versions it holds for (figures no
#: source gives are 0: off). ``perfmodel presets list`` lists them beside your own (:func:`save_connector`).
CONNECTORS: dict[str, Connector] = {
    c.name: c
    for c in (
        Connector(
            "vllm-nixl",
            window="transfer",
            metric=_NIXL_METRIC,
            source="no public figure for the connector's own costs since vllm-project/vllm PR #23887 (off); "
            "the metric: NixlPromMetrics in vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py "
            "(a transfer posted to done)",
            version="vLLM v0.10.2 and later",
        ),
        Connector(
            "vllm-nixl-0.10.1",
            request_ms=3.0,
            window="transfer",
            metric=_NIXL_METRIC,
            source="vllm-project/vllm issue #23780 (2025-08-27): the NIXL connector takes ~3 ms to launch a "
            "transfer per request (_get_block_desc_ids); fixed by PR #23887 (merged 2025-08-29)",
            version="vLLM v0.10.1.1 and earlier",
        ),
        Connector(
            "sglang-nixl-unprepped",
            per_descriptor_ms=0.6e3 / 15_000,
            window="handoff",
            metric=_SGLANG_STAGE,
            source="ai-dynamo/nixl issue #176 (2025-04-22): SGLang's agent.transfer() took 0.6 s for about 15k "
            "segments (1 GB), 0.04 ms per descriptor; sgl-project/sglang PR #26406 (merged 2026-05-26) "
            "prepares descriptor lists once (make_prepped_xfer)",
            version="SGLang's NIXL backend before PR #26406",
        ),
        Connector(
            "sglang-mooncake",
            window="handoff",
            metric=_SGLANG_STAGE,
            source="no public figure for the backend's own costs (off); the stage runs from entering the "
            "transfer queue to the transfer's end (python/sglang/srt/metrics/collector.py); its "
            "sglang:kv_transfer_latency_ms covers only a chunked prefill's last chunk (sgl-project/sglang "
            "PR #32147)",
            version="SGLang 0.5 and later",
        ),
    )
}


def get_connector(value: Any) -> Connector | None:
    """A connector from a name (built-in, or saved with :func:`save_connector`; case ignored) or a
    :class:`Connector`; None, or the name ``"none"`` (for the command line and axes), is none.

    Parameters
    ----------
    value
        A connector's name, a :class:`Connector`, or None.

    Returns
    -------
    Connector or None
        The connector (None for None).

    Examples
    --------
    >>> get_connector("VLLM-NIXL-0.10.1").request_ms
    3.0
    """
    if value is None or isinstance(value, Connector):
        return value
    if not isinstance(value, str):
        raise InputError(
            "connector",
            f"{shown(value)} is neither a connector's name nor a Connector",
            "pass a name of perfmodel.CONNECTORS",
        )
    from ..inputs import user_presets as _presets

    key = _presets.key_of(value)  # (as a saved name is kept: NFKC-normalized, stripped, in lower case)
    if key == "none":
        return None
    if key in CONNECTORS:
        _presets.warn_hidden(key, ("connectors",), "connector")
        return CONNECTORS[key]

    usable, bad = user_connectors_and_errors()
    if key in bad:
        raise bad[key]
    if key in usable:
        return usable[key]
    names = [*CONNECTORS, *usable]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    raise InputError(
        "connector",
        f"{value!r} is not a known connector" + (f" (did you mean {close[0]!r}?)" if close else ""),
        f"use one of {', '.join(names)}, a perfmodel.Connector, or save yours (perfmodel.save_connector); "
        f"user presets live in {_presets.presets_path()}",
    )


_FIELDS = tuple(f.name for f in dataclasses.fields(Connector) if f.name != "fit")


def save_connector(connector: Connector, *, replace: bool = False) -> Any:
    """Save ``connector`` as a user preset under its name: ``connector="<name>"`` then takes it wherever a
    connector goes, and ``perfmodel presets list`` lists it. Returns the presets file.

    A name already saved (names ignore case) is refused unless ``replace=True``, as is a built-in's; the file is
    written atomically, and an entry written by hand is never replaced without it.

    Parameters
    ----------
    connector
        The connector (its name is the preset's), e.g. from :func:`fit_connector`.
    replace
        Replace a preset of that name.

    Returns
    -------
    pathlib.Path
        The presets file written.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_connector(Connector("our-vllm", request_ms=1.5, source="our benchmark, 2026-11"))
    >>> get_connector("our-vllm").request_ms
    1.5
    """
    from ..inputs import user_presets as _presets

    if not isinstance(connector, Connector):
        raise InputError(
            "save_connector", f"takes a Connector, got {type(connector).__name__}", "make one, or fit_connector"
        )
    entry = {field: getattr(connector, field) for field in _FIELDS if field != "name"}
    return _presets.save("connectors", connector.name, entry, builtin={*CONNECTORS, "none"}, replace=replace)


def user_connectors() -> dict[str, Connector]:
    """The connectors saved with :func:`save_connector`, by name; one that cannot be used (or a presets file that
    cannot be read) is left out with a ``UserWarning`` naming the file, the entry and what is wrong.

    Returns
    -------
    dict of str to Connector
        The usable saved connectors, by name (empty when none is saved).

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> user_connectors()
    {}
    """
    from ..inputs import user_presets as _presets

    try:
        usable, bad = user_connectors_and_errors()
    except InputError as error:  # (a file that cannot be read: the others, built in, still listed)
        warn(str(error))
        return {}
    _presets.warn_unusable(bad)
    return usable


def user_connectors_and_errors() -> tuple[dict[str, Connector], dict[str, InputError]]:
    """The usable saved connectors, and the error of each that is not (by name)."""
    from ..inputs import user_presets as _presets

    def parse(name: str, entry: dict[str, Any]) -> Connector:
        if name in CONNECTORS or name == "none":
            raise _presets.entry_error(name, "connectors", "is a built-in connector's name: rename it")
        _presets.unknown_fields(name, "connectors", entry, {*_FIELDS, _presets.SAVED_BY})
        try:
            return Connector(**{**{k: v for k, v in entry.items() if k in _FIELDS}, "name": name})
        except InputError as error:
            raise _presets.entry_error(name, "connectors", error.problem) from None

    return _presets.parse_each("connectors", parse)


def fit_connector(
    measured_ms: Any,
    transport_ms: Any,
    descriptors: Any = None,
    *,
    name: str = "fitted",
    source: str = "",
) -> Connector:
    """A connector's costs separated from a transport's: each handoff's measured time (end to end) against the
    model's time for it with the transport given and no connector. The rest, ``measured - transport``, is fitted
    as ``request_ms + per_descriptor_ms * descriptors`` (non-negative, minimising the relative error of the
    whole handoff, as :func:`perfmodel.fit_link` does); without ``descriptors``, or with one count for all, as
    ``request_ms`` alone (said in the report). Handoffs less than 10% apart in transport time (and descriptors)
    are one point, and a fit needs two (:func:`perfmodel.network.fits.distinct_points`).

    Parameters
    ----------
    measured_ms
        Each handoff's measured time (ms > 0), end to end: a benchmark's, or an engine's metric whose window is
        the whole handoff (:data:`WINDOWS`).
    transport_ms
        The model's time for each (ms >= 0), with its link or cluster and transport and no connector, e.g.
        :func:`perfmodel.handoff_delay_ms`.
    descriptors
        Each handoff's descriptors per rank (>= 0), e.g. :func:`perfmodel.kv_messages`; None: not known.
    name, source
        The fitted connector's name, and where its measurements come from.

    Returns
    -------
    Connector
        With ``window="handoff"``; ``fit`` (a :class:`perfmodel.network.fits.FitReport`) says how well it describes them.

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel import fit_connector, handoff_delay_ms, kv_messages
    >>> tokens = np.array([256, 1024, 4096, 16384])
    >>> wire = handoff_delay_ms(tokens, "ib-ndr", "llama-3.1-8b")
    >>> descriptors = kv_messages("llama-3.1-8b", tokens, 16)
    >>> measured = wire + 2.0 + 0.0005 * descriptors          # 2 ms per request, 0.5 us per descriptor
    >>> c = fit_connector(measured, wire, descriptors, name="ours")
    >>> round(c.request_ms, 6), round(c.per_descriptor_ms * 1e3, 6), c.fit.max_relative_error < 1e-9
    (2.0, 0.5, True)
    """
    measured, transport, counts = _measured(measured_ms, transport_ms, descriptors)
    moving = transport > 0  # (a handoff that moves no bytes pays no connector: nothing of it to fit)
    if not moving.any():
        raise InputError(
            "transport_ms",
            f"each of the {count(moving.size, 'handoff')} moves no bytes (its transport time is 0: a prompt of 0 "
            "tokens), so no connector cost can be fitted",
            "measure handoffs that move bytes (prompts of at least one token)",
        )
    if not (measured[moving] >= transport[moving]).any():
        raise InputError(
            "measured_ms",
            f"every handoff that moves bytes ({count(int(moving.sum()), 'handoff')}) took less than the transport "
            "alone, so no connector cost is left to fit",
            "check the link or cluster and the transport given (their model is slower than every measurement)",
        )
    notes = [f"{count(int((~moving).sum()), 'handoff')} of no bytes left out"] if not moving.all() else []
    measured, transport, counts = measured[moving], transport[moving], None if counts is None else counts[moving]
    if distinct_points(transport, counts) < 2:  # (the transport's time stands for the handoff's size)
        raise InputError(
            "fit_connector", one_point("handoff", transport, "ms of transport"), "measure handoffs of several sizes"
        )
    faster = int(np.sum(measured < transport))
    if faster:
        notes.append(f"{count(faster, 'handoff')} measured faster than the transport alone: its model is slower than "
                     "what was measured (check the link or cluster, and the transport)")  # fmt: skip
    columns = [np.ones_like(measured)]
    if counts is not None and np.ptp(counts) > 0:
        columns.append(counts)
    elif counts is not None:
        notes.append("one descriptor count for all: its cost is not separable from the request's, fitted as request_ms")
    design = np.stack(columns, axis=1) / measured[:, None]
    target = (measured - transport) / measured
    with np.errstate(over="ignore"):  # (a measurement far below its transport: an error beyond 1e154 squared)
        x = nonnegative_least_squares(design, target)
    request_ms, per_descriptor_ms = float(x[0]), float(x[1]) if len(x) > 1 else 0.0
    errors = np.abs(design @ x - target)
    report = FitReport(
        points=int(measured.size),
        max_relative_error=float(errors.max()),
        mean_relative_error=float(errors.mean()),
        note="; ".join(notes),
        parameters={"request_ms": request_ms, "per_descriptor_ms": per_descriptor_ms},
    )
    return Connector(name, request_ms=request_ms, per_descriptor_ms=per_descriptor_ms, source=source, fit=report)


def _measured(measured_ms: Any, transport_ms: Any, descriptors: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """:func:`fit_connector`'s inputs as arrays of one length (descriptors None when not given), or one clear line."""
    measured = _numbers("measured_ms", measured_ms, low_open=True)
    if measured.size < 1:
        raise InputError("measured_ms", "is empty", "pass at least one measured handoff")
    given = [("transport_ms", _numbers("transport_ms", transport_ms), "the model's time for each measured handoff")]
    if descriptors is not None:
        given.append(("descriptors", _numbers("descriptors", descriptors, whole=True),
                      "each handoff's descriptors per rank (perfmodel.kv_messages)"))  # fmt: skip
    for name, values, fix in given:
        if values.shape != measured.shape:
            raise InputError(name, f"holds {count(values.size, 'value')} for {count(measured.size, 'measurement')}",
                             f"pass {fix}")  # fmt: skip
    return measured, given[0][1], given[1][1] if descriptors is not None else None


def _as_given(name: str, value: Any, *, whole: bool = False) -> Any:
    """:func:`_numbers` of ``value``, one number for one number."""
    numbers = _numbers(name, value, whole=whole)
    return numbers if np.ndim(value) else numbers[0]


def _numbers(name: str, value: Any, *, low_open: bool = False, whole: bool = False) -> np.ndarray:
    """``value`` as a 1-D float64 array of finite numbers >= 0 (> 0 with ``low_open``; whole ones with ``whole``),
    or one clear line; None, booleans, text, durations and dates are no numbers (a duration would be read as its
    nanoseconds)."""
    kind = None if value is None or isinstance(value, str) else non_numeric_kind(value)
    if kind is not None:
        durations = kind == "durations" and name.endswith("_ms")
        raise InputError(
            name,
            f"got {kind} where plain numbers were expected",
            f"divide durations by pd.Timedelta(1, 'ms') in {name}" if durations else f"pass {name} as plain numbers",
        )
    if value is None or isinstance(value, str) or np.asarray(value).dtype.kind in "bOUS":
        shown = "None" if value is None else "booleans" if np.asarray(value).dtype.kind == "b" else repr(value)[:60]
        raise InputError(name, f"got {shown} where numbers were expected", f"pass {name} as numbers")
    try:
        numbers = np.atleast_1d(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        raise InputError(name, f"{value!r} holds values that are not numbers", f"pass {name} as numbers") from None
    if numbers.ndim != 1:
        raise InputError(name, f"has {numbers.ndim} dimensions", f"pass {name} as one value per handoff")
    bad = ~np.isfinite(numbers) | (numbers <= 0 if low_open else numbers < 0)
    if whole:
        bad |= np.isfinite(numbers) & (numbers != np.floor(numbers))
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError(
            name,
            f"holds {numbers[first]!r} at position {first}",
            f"pass {name} as finite{' whole' if whole else ''} numbers {'>' if low_open else '>='} 0",
        )
    return numbers
