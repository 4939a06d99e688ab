"""Integer codes for worker types and transfer modes (no numba, no pandas)."""

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
