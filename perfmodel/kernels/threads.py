"""The threads that share a compiled pass: each runs the one serial loop (compiled without the GIL) on views
of its share of the rows, rather than a second ``prange`` body (the kernel pass of :mod:`perfmodel.handoff`,
a trace's hashing, the batch of handoffs alone of :mod:`perfmodel.kernels.sharing`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba

__all__ = ["in_shares"]


def in_shares(n: int, threads: int, task: Callable[[int, int, int], Any]) -> list[Any]:
    """``task(k, i, j)`` for each ``k``-th of ``threads`` shares of ``range(n)`` (rows ``i`` to ``j``), run at
    once on the pool's threads and this one (compiled code holds no GIL); the results in order.

    >>> in_shares(10, 2, lambda k, i, j: (k, i, j))
    [(0, 0, 5), (1, 5, 10)]
    """
    bounds = [(k, k * n // threads, (k + 1) * n // threads) for k in range(threads)]
    others = [_pool().submit(task, *share) for share in bounds[1:]]
    return [task(*bounds[0]), *(other.result() for other in others)]


_threads: dict[int, ThreadPoolExecutor] = {}  # this process's pool (a forked child makes its own)


def _pool() -> ThreadPoolExecutor:
    """The threads that run shares of a kernel pass, started on first use (in each process)."""
    pid = os.getpid()
    if pid not in _threads:
        _threads.clear()
        _threads[pid] = ThreadPoolExecutor(
            max_workers=max(numba.config.NUMBA_NUM_THREADS, 2) - 1, thread_name_prefix="perfmodel-kernel"
        )
    return _threads[pid]
