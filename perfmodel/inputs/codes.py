"""Integer codes for worker types, transfer modes and every choice set of the API (no numba, no pandas).

A choice set is an :class:`enum.IntEnum` whose members' lower-case names are what users pass
(``contention="fair"``); the kernels' integer constants are the members' values. :data:`CHOICES` holds
every choice set once, by the name of the input that takes it; :func:`choice_names` gives the names
(for a check or an error message), :func:`choice_code` a name's code.
"""

from __future__ import annotations

import enum


class WorkerType(enum.IntEnum):  # numpydoc ignore=PR01
    """Which kind of worker emitted a request's terminal token.

    Only a completed ``PREFILL`` hands its KV cache to a decode worker; aggregated
    workers (prefill and decode on one GPU) and decode workers never pay a handoff.

    Examples
    --------
    >>> WorkerType.PREFILL, int(WorkerType.DECODE), WorkerType["AGGREGATED"].value
    (<WorkerType.PREFILL: 1>, 2, 0)
    """

    AGGREGATED = 0
    PREFILL = 1
    DECODE = 2

    def __str__(self) -> str:  # its code, as from Python 3.11 on (3.10 wrote the member's name into files)
        return str(int(self))


class TransferMode(enum.IntEnum):  # numpydoc ignore=PR01
    """Which tokens a handoff is charged for.

    ``FULL_PROMPT`` charges the whole prompt (upstream's default);
    ``DESTINATION_MISSING`` charges only the tokens the decode worker lacks,
    block-rounded (see :func:`perfmodel.destination_missing_tokens`).

    Examples
    --------
    >>> TransferMode(1).name.lower()
    'destination_missing'
    """

    FULL_PROMPT = 0
    DESTINATION_MISSING = 1

    def __str__(self) -> str:  # its code, as from Python 3.11 on (3.10 wrote the member's name into files)
        return str(int(self))


class Choice(enum.IntEnum):  # numpydoc ignore=PR01
    """A choice set: its members' lower-case names are the values users pass, their values the kernels' codes.

    Examples
    --------
    >>> Contention.FAIR.label, int(Contention.FAIR)
    ('fair', 2)
    """

    @property
    def label(self) -> str:
        """The name users pass (the member's name in lower case)."""
        return self.name.lower()


class Overlap(Choice):  # numpydoc ignore=PR01
    """Whether a handoff streams layer groups while prefill runs."""

    NONE = 0
    LAYERWISE = 1


class Scope(Choice):  # numpydoc ignore=PR01
    """Whose bytes a model's bytes per token count: the busiest rank's, or the tensor-parallel group's."""

    RANK = 0
    GROUP = 1


class KVLayout(Choice):  # numpydoc ignore=PR01
    """How a KV block lies in memory (which sets the messages of a per-message cost)."""

    LAYER_KV = 0
    LAYER = 1
    BLOCK = 2


class ErrorPolicy(Choice):  # numpydoc ignore=PR01
    """What invalid rows do: raise an InputError, or give NaN."""

    RAISE = 0
    COERCE = 1


class BadLines(Choice):  # numpydoc ignore=PR01
    """What a trace's malformed lines do as it is read: raise, or be left out (``read_trace``'s ``errors``)."""

    RAISE = 0
    SKIP = 1


class Contention(Choice):  # numpydoc ignore=PR01
    """How a replay's transfers share links (the replay kernel's NONE, FIFO and FAIR)."""

    NONE = 0
    FIFO = 1
    FAIR = 2


class Routing(Choice):  # numpydoc ignore=PR01
    """How a replay picks each handoff's decode worker (the cluster kernel's PREFIX ... TOPOLOGY)."""

    PREFIX = 0
    ROUND_ROBIN = 1
    LEAST_LOADED = 2
    TOPOLOGY = 3


class PrefillRouting(Choice):  # numpydoc ignore=PR01
    """How a TTFT replay picks each arrival's prefill worker (the serving kernel's ROUND_ROBIN and LEAST_LOADED;
    a trace column of workers is the third way)."""

    ROUND_ROBIN = 0
    LEAST_LOADED = 1


class Fabric(Choice):  # numpydoc ignore=PR01
    """A cluster's network between nodes: one non-blocking switch, or rails of leaf switches."""

    FLAT = 0
    RAIL = 1


class Keep(Choice):  # numpydoc ignore=PR01
    """What a replay grid keeps: one row per configuration, or also every request's replay."""

    SUMMARY = 0
    REQUESTS = 1


#: Every choice set of the API, once, by the name of the input that takes it.
CHOICES: dict[str, type[Choice]] = {
    "overlap": Overlap,
    "scope": Scope,
    "kv_layout": KVLayout,
    "errors": ErrorPolicy,
    "bad_lines": BadLines,  # (read_trace's errors=)
    "contention": Contention,
    "routing": Routing,
    "prefill_routing": PrefillRouting,
    "fabric": Fabric,
    "keep": Keep,
}


def choice_names(name: str) -> tuple[str, ...]:
    """The values the input ``name`` takes, in order (the first is its default).

    Parameters
    ----------
    name : str
        An input of :data:`CHOICES` (``"contention"``, ``"routing"``...).

    Returns
    -------
    tuple of str
        The names users pass.

    Examples
    --------
    >>> choice_names("contention")
    ('none', 'fifo', 'fair')
    """
    return tuple(member.label for member in CHOICES[name])


def choice_code(name: str, value: str) -> int:
    """The code (the kernels' integer) of ``value``, one of :func:`choice_names` of ``name`` (checked before).

    Parameters
    ----------
    name : str
        An input of :data:`CHOICES`.
    value : str
        One of its names.

    Returns
    -------
    int
        The member's value.

    Examples
    --------
    >>> choice_code("routing", "least_loaded")
    2
    """
    return int(CHOICES[name][value.upper()])
