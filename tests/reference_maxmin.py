"""Flows sharing resources: max-min fair rates by progressive filling, and a small event simulation.

The slow, obviously correct reference of perfmodel's jitted simulation (``perfmodel.kernels.sharing``: its
filler ``fill_classes``, a handoff alone ``_alone_memo`` and the batch of keys ``simulate_keys``, which
follow this module's operation order). Plain Python over small sets (a handoff's flows: tens), no
numpy: :func:`maxmin_rates` at each start or end of a flow with the flows active then. Units: bytes, decimal GB/s, ms. A flow's time is computed in the kernel's
operation order, ``bytes / (rate * 1e9) * 1000``, from the last moment its rate changed, so a flow
whose rate never changes ends at exactly ``start + bytes / (rate * 1e9) * 1000``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Outcome", "maxmin_rates", "saturated", "simulate"]


def maxmin_rates(paths: Sequence[Sequence[int]], capacities: Sequence[float]) -> list[float]:
    """Max-min fair rates (GB/s) of flows crossing resources (progressive filling).

    ``paths[f]`` holds the indices into ``capacities`` (GB/s) of the resources flow ``f`` crosses.
    Repeatedly, the resource with the smallest fair share (its capacity left over its unfrozen flows)
    fixes the rate of every unfrozen flow on it. A flow that crosses no resource has rate ``inf``.

    >>> maxmin_rates([[0], [0, 1], [1]], [10.0, 4.0])
    [8.0, 2.0, 2.0]
    """
    n = len(paths)
    rates = [math.inf] * n
    users: dict[int, list[int]] = {}
    for f, path in enumerate(paths):
        for r in path:
            users.setdefault(r, []).append(f)
    left = {r: float(capacities[r]) for r in users}
    free = {r: len(flows) for r, flows in users.items()}
    frozen = [False] * n
    while free:
        share = min(left[r] / free[r] for r in free)
        if share == math.inf:  # resources of unlimited capacity: the flows left are unlimited too
            break
        for r in [r for r in free if left[r] / free[r] == share]:
            for f in users[r]:
                if not frozen[f]:
                    frozen[f] = True
                    rates[f] = share
                    for other in paths[f]:
                        if other in free:
                            left[other] = max(left[other] - share, 0.0)
                            free[other] -= 1
            for s in [s for s in free if free[s] == 0]:
                del free[s]
    return rates


def saturated(
    paths: Sequence[Sequence[int]], capacities: Sequence[float], rates: Sequence[float], tolerance: float = 1e-9
) -> set[int]:
    """The resources whose flows' rates fill their capacity (within ``tolerance``, relative).

    >>> sorted(saturated([[0], [0, 1]], [10.0, 40.0], [5.0, 5.0]))
    [0]
    """
    load: dict[int, float] = {}
    for path, rate in zip(paths, rates):
        for r in path:
            load[r] = load.get(r, 0.0) + rate
    return {r for r, used in load.items() if used >= capacities[r] * (1 - tolerance)}


class Outcome(NamedTuple):
    """A simulation's result, per flow: its end (ms), its rate and every flow's rates in its final rate
    interval, and whether its rate ever changed after it started."""

    ends_ms: list[float]
    final_rates: list[float]
    final_interval: list[dict[int, float]]  # flow -> rate of every flow moving then
    rate_changed: list[bool]


def simulate(
    starts_ms: Sequence[float], nbytes: Sequence[float], paths: Sequence[Sequence[int]], capacities: Sequence[float]
) -> Outcome:
    """Flows that start at ``starts_ms`` and move ``nbytes`` each, sharing resources max-min fairly,
    rates recomputed whenever a flow starts or ends. A flow of 0 bytes ends at its start.

    >>> simulate([0.0, 0.0], [1e9, 3e9], [[0], [0]], [2.0]).ends_ms  # both at 1 GB/s, then 2 GB/s
    [1000.0, 2000.0]
    """
    n = len(nbytes)
    ends = [math.nan] * n
    final_rates = [math.nan] * n
    final_interval: list[dict[int, float]] = [{} for _ in range(n)]
    changed = [False] * n
    anchor = list(starts_ms)  # when each flow's current rate began
    left = [float(b) for b in nbytes]  # bytes left at its anchor
    rate = [math.nan] * n
    pending = sorted(range(n), key=lambda f: starts_ms[f])
    active: list[int] = []
    t = starts_ms[pending[0]] if pending else 0.0
    while pending or active:
        while pending and starts_ms[pending[0]] <= t:
            f = pending.pop(0)
            if left[f] > 0:
                active.append(f)
            else:
                ends[f] = starts_ms[f]
        if not active:
            if not pending:  # (the last flows moved nothing)
                break
            t = starts_ms[pending[0]]
            continue
        new = maxmin_rates([paths[f] for f in active], capacities)
        snapshot = dict(zip(active, new))
        for f, r in zip(active, new):
            if r != rate[f]:
                if rate[f] == rate[f]:  # it was moving: its bytes so far at the old rate
                    left[f] -= rate[f] * 1e9 * (t - anchor[f]) / 1000.0
                    changed[f] = True
                    anchor[f] = t
                rate[f] = r
            final_interval[f] = snapshot
        finish = {f: anchor[f] + (max(left[f], 0.0) / (rate[f] * 1e9) * 1000.0) for f in active}
        t_end = min(finish.values())
        t_next = min(t_end, starts_ms[pending[0]]) if pending else t_end
        if t_next == t_end:
            for f in [f for f in active if finish[f] == t_end]:
                ends[f], final_rates[f] = finish[f], rate[f]
                active.remove(f)
        t = t_next
    return Outcome(ends, final_rates, final_interval, changed)
