"""Drawing beside the computation: a figure drawn in a forked child process on a second core while the parent
works, stopped with the command on an interrupt so that nothing it writes outlives the command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _fork_is_safe_and_useful() -> bool:
    """A second core, on Linux, with no other Python thread running.

    The child only draws (matplotlib, numpy, PIL; any model call in it runs serially). The
    native threads a process may have here (OpenBLAS's, pyarrow's, numba's) prepare for a
    fork themselves; a Python thread could hold a lock the child would then wait on forever
    (e.g. when :func:`main` is called from a notebook), so then nothing is forked. macOS
    does not support forking a process with its system libraries loaded.
    """
    import multiprocessing
    import threading

    return (
        sys.platform == "linux"
        and len(os.sched_getaffinity(0)) > 1
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
    )


@contextlib.contextmanager
def alongside(task: Callable[[], None] | None) -> Iterator[None]:
    """Run ``task`` in a forked child process while the block runs (when :func:`_fork_is_safe_and_useful`),
    else after the block, in this process.

    Leaving the block normally waits for the child and raises its error, if any, here. Leaving it
    by an error or an interrupt stops the child first, so nothing the child writes outlives the
    block (a staging folder is removed right after).
    """
    if task is None:
        yield
        return
    if not _fork_is_safe_and_useful():
        yield
        task()
        return
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run_and_report, args=(task, send, _SIGNALS), name="perfmodel-draw", daemon=True)
    # The child inherits this process's signal handlers, which raise; one landing while it starts up
    # would be swallowed there. So it starts with these signals blocked, and unblocks them with their
    # default action (end at once: it has nothing to clean up). start() flushes the standard streams
    # first, so nothing buffered here is printed twice.
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        with warnings.catch_warnings():  # Python >= 3.12 warns of any thread, the native ones above too
            warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
            child.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    send.close()
    try:
        yield
        try:
            error = receive.recv()
        except EOFError:  # died without a word: killed, or crashed in C
            child.join()
            error = RuntimeError(f"the drawing process ended without finishing (exit code {child.exitcode})")
        child.join()
        if error is not None:
            raise error
    finally:
        receive.close()
        if child.is_alive():  # left by an error or an interrupt: stop it before anything it writes is cleaned up
            child.terminate()
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()


#: The signals that interrupt the command (Ctrl-C, ``kill``, a closed terminal).
_SIGNALS = frozenset(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


def _run_and_report(task: Callable[[], None], send: Any, signals: frozenset[int]) -> None:
    """In the child of :func:`alongside`: default signal actions, then run ``task``; send back ``None`` or
    its error."""
    for signum in signals:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    try:
        task()
        error = None
    except BaseException as raised:  # noqa: BLE001 (an interrupt too: the parent decides what it means)
        error = raised
    try:
        send.send(error)
    except Exception:  # noqa: BLE001 (pickling raises any type): an error that does not pickle: its type and message
        send.send(RuntimeError(f"{type(error).__name__}: {error}"))


def save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=130, format="png")
