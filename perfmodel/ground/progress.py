"""One progress bar for every long path (sweeps, replay grids, ``delay`` on big files, the Dask paths).

Shown on a terminal once the work has taken a second, quiet when the output is piped or
redirected (tqdm's ``disable=None``), and never drawn for work too small to report on.
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Any


def progress_bar(total: int | None, *, unit: str, desc: str, progress: bool | None = None, at_least: int = 0) -> Any:
    """A tqdm bar over ``total`` units of work, to use as a context manager and ``update`` as work is done.

    ``progress``: None (default) shows it on a terminal after one second, and not at all for
    ``at_least`` units or fewer; True always shows it; False never does (its updates cost nothing).
    ``total`` None: an unknown amount of work (the bar counts without a percentage).

    >>> with progress_bar(3, unit="configs", desc="replay grid", progress=False) as bar:
    ...     bar.update(3)
    """
    if progress is not None and not isinstance(progress, bool):
        from ..errors import InputError

        raise InputError("progress", f"{progress!r} is not True, False or None", "pass progress=True, False or None")
    hidden = progress is False or (progress is None and total is not None and total <= at_least)
    return _bar()(
        total=total,
        unit=unit,
        unit_scale=True,
        delay=1.0,
        desc=desc,
        disable=True if hidden else (None if progress is None else False),
    )


@functools.cache
def _bar() -> type:
    """tqdm's bar (a notebook's where one runs) without its monitor thread, which any bar would start, hidden
    or not: a second thread stops the command line from drawing its figures beside the work (a fork)."""
    from tqdm.auto import tqdm

    return type("Bar", (tqdm,), {"monitor_interval": 0})


def in_threads(one: Any, items: list[Any], workers: int, *, desc: str, progress: bool | None = None) -> list[Any]:
    """``one(item)`` of every item of ``items``, in order, on up to ``workers`` threads, with a progress bar
    (``desc``); on an error or Ctrl-C what has not started is cancelled and nothing is returned. The warnings
    the threads give are given again once each, here, at the caller's line (a thread's stack holds none of the
    caller's frames, so a warning given there would name the thread pool's).

    >>> in_threads(lambda x: x * x, [1, 2, 3], 2, desc="squares", progress=False)
    [1, 4, 9]
    """
    import concurrent.futures

    results: list[Any] = [None] * len(items)
    with (
        WarningsOnce(),
        concurrent.futures.ThreadPoolExecutor(max_workers=max(min(workers, len(items)), 1)) as pool,
        progress_bar(len(items), unit="configs", desc=desc, progress=progress) as bar,
    ):
        futures = {pool.submit(one, item): i for i, item in enumerate(items)}
        try:
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
                bar.update(1)
        except BaseException:  # Ctrl-C or an error: cancel what has not started, return nothing
            for future in futures:
                future.cancel()
            raise
    return results


class WarningsOnce:
    """The warnings given inside the block (by any thread), given again once each (by category and text) at the
    caller's line as the block ends, also when it raises: a grid checks each configuration on two requests, then
    replays it on a thread, and each would say the same warning again (the threads' would name the thread pool's
    line). The caller's filters hold inside (a warning they ignore stays ignored). (A class: its ``__exit__`` is
    perfmodel's own frame, which :func:`perfmodel.errors.warn` looks past to the caller's line.)

    >>> import warnings
    >>> from perfmodel.errors import warn
    >>> with warnings.catch_warnings(record=True) as shown:
    ...     warnings.simplefilter("always")
    ...     with WarningsOnce():
    ...         for _ in range(3):
    ...             warn("careful")
    >>> [str(w.message) for w in shown]
    ['careful']
    """

    def __enter__(self) -> None:
        import warnings

        self._catching = warnings.catch_warnings(record=True)
        self._caught = self._catching.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        from ..errors import warn

        self._catching.__exit__(kind, error, trace)
        for category, message in dict.fromkeys((w.category, str(w.message)) for w in self._caught or ()):
            warn(message, category)


def says_each_warning_once(function: Any) -> Any:
    """``function`` run inside :class:`WarningsOnce`: a question that replays a trace many times (a search over
    counts or rates) says each of its replays' warnings once, at its caller's line.

    >>> from perfmodel.errors import warn
    >>> import warnings
    >>> @says_each_warning_once
    ... def search():
    ...     for _ in range(8):
    ...         warn("no hash_ids")
    >>> with warnings.catch_warnings(record=True) as shown:
    ...     warnings.simplefilter("always")
    ...     search()
    >>> len(shown)
    1
    """

    @functools.wraps(function)
    def once(*args: Any, **kwargs: Any) -> Any:
        with WarningsOnce():
            return function(*args, **kwargs)

    return once
