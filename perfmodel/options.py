"""perfmodel's knobs in one place: where a kernel pass is shared between threads, how large calls are cut, and
how much work one call may ask for (as xarray's ``set_options``).

Each knob has a default, a check and a line of documentation (:data:`KNOBS`). :func:`set_options` changes
some for the rest of the process, or, as a context manager, for a ``with`` block only; :func:`get_options` reads
them. The modules that use a knob read it here at each call, so a change takes effect at the next call. The
options are one mapping of the process, as xarray's are: a ``with`` block changes them for every thread.

>>> import perfmodel
>>> perfmodel.get_options()["parallel_min_rows"]
200000
>>> with perfmodel.set_options(parallel_min_rows=0):       # every kernel pass shared between threads
...     perfmodel.get_options()["parallel_min_rows"]
0
>>> perfmodel.get_options()["parallel_min_rows"]
200000
"""

from __future__ import annotations

import difflib
import functools
import itertools
import sys
import threading
import types
from typing import Any, NamedTuple

from .errors import InputError, check_whole, warn

__all__ = ["KNOBS", "get_options", "set_options"]


class Option(NamedTuple):
    """A knob: its default, the smallest value it takes (a whole number), what it is for, and the largest value
    it takes (None: no bound)."""

    default: int
    smallest: int
    doc: str
    largest: int | None = None


#: Every knob: name -> (default, smallest value, what it is for).
KNOBS: dict[str, Option] = {
    "parallel_min_rows": Option(
        200_000,
        0,
        "rows from which a kernel pass (and a trace's hashing) is shared between "
        "threads by default, when numba has more than one (on 2 cores sharing starts to win at "
        "about 100k rows; ``bench/run.py`` measures the ratio at this threshold)",
    ),
    "spread_max_rows": Option(
        65_536,
        0,
        "up to this many rows, a scalar among the three main inputs (and a single worker type) "
        "is spread to an array, so that small calls share one compiled form of the kernel",
    ),
    "sweep_chunk_rows": Option(
        1 << 18, 1, "rows of a sweep's kernel pass at a time (temporaries stay small next to the result)"
    ),
    "max_worker_pairs": Option(
        2**18,
        1,
        "the most pairs of prefill and decode workers a replay on a cluster "
        "resolves (each pair's flows are resolved once, in Python)",
    ),
    "max_grid_configs": Option(
        10**6, 1, "the most configurations one replay grid takes (each replays the whole trace)"
    ),
    "max_pair_flows": Option(
        2**21,
        1,
        "the most flows the worker pairs of a replay on a cluster hold together (each a Python record resolved "
        "before the replay): e.g. the most pairs with 8 flows each (TP8 on a NIC per GPU)",
    ),
    "max_synthetic_requests": Option(
        10**8,
        1,
        "the most requests ``synthetic_trace`` makes at once: ten times the largest bench run (its trace takes "
        "some GB of memory at that size)",
    ),
    "max_time_bins": Option(
        4096,
        256,
        "the most time bins of a replay's utilisation series on a cluster: where handoffs end further out, "
        "neighbouring bins merge in pairs (twice as wide, the same edges) until the series fits (at most 65,536: "
        "8 bytes a bin for every resource of the cluster)",
        65_536,
    ),
    "max_token_values": Option(
        1_000_000, 1, "the most prompt lengths one ``--tokens`` range of the command line may ask for"
    ),
}

_VALUES: dict[str, int] = {name: option.default for name, option in KNOBS.items()}  # (what the modules read)

# How _VALUES is made: the values set by calls (each with the number of the change that set it) and the ``with``
# blocks running (the number of their start, the set_options object, its values), in the order they started.
# An option's value is that of the latest of these changes: a call's, or a block's until the block ends.
_SET: dict[str, tuple[int, int]] = {name: (0, option.default) for name, option in KNOBS.items()}
_BLOCKS: list[tuple[int, object, dict[str, int]]] = []
_COUNT = itertools.count(1)
_LOCK = threading.Lock()


def _recompute() -> None:
    """``_VALUES`` from the calls' values and the blocks still running (the caller holds ``_LOCK``)."""
    values = {name: value for name, (_, value) in _SET.items()}
    for start, _, changes in _BLOCKS:
        values.update({name: value for name, value in changes.items() if start > _SET[name][0]})
    _VALUES.update(values)


def get_options() -> dict[str, int]:
    """Every knob's value now, as a new dict (changing it changes nothing; :func:`set_options` does).

    Returns
    -------
    dict of str to int
        Each option's name and current value (the options are described in :data:`KNOBS`).

    Examples
    --------
    >>> import perfmodel
    >>> sorted(perfmodel.get_options())
    ['max_grid_configs', 'max_pair_flows', 'max_synthetic_requests', 'max_time_bins', 'max_token_values', \
'max_worker_pairs', 'parallel_min_rows', 'spread_max_rows', 'sweep_chunk_rows']
    """
    return dict(_VALUES)


def option(name: str) -> int:
    """One knob's value now (what the package's modules read at each call)."""
    return _VALUES[name]


def _checked(changes: dict[str, Any]) -> dict[str, int]:
    """The changes, each checked (an unknown name refused with the closest known one), or :class:`InputError`."""
    checked = {}
    for name, value in changes.items():
        if name not in KNOBS:
            close = difflib.get_close_matches(name, KNOBS, n=1)
            raise InputError(
                "set_options",
                f"unknown option {name!r}",
                f"did you mean {close[0]!r}" if close else f"use one of {', '.join(KNOBS)}",
            )
        knob = KNOBS[name]
        checked[name] = int(  # (bools refused there)
            check_whole(name, value, smallest=knob.smallest, largest=knob.largest, above=f"pass at most {knob.largest}")
        )
    return checked


class set_options:  # (lower case: a function to its users, as xarray's set_options)
    """Change perfmodel's knobs (:data:`KNOBS`) for every thread of the process: called, for the rest of the
    process; used in a ``with`` statement, for its block only (the values before it come back at its end, however
    it ends).

    A call makes its changes at once. A ``with`` block makes them when it starts (taking back the call that made
    the object, for each option no later call changed) and undoes them when it ends: each option it set comes back
    to the value of the latest change still in force, that of a block still running (blocks may end in any order,
    in one thread or several) or else that of a call. So once every block has ended the options are what calls
    set, a call made inside a block lasts after it, and one object may serve several blocks, nested or not.

    Every change is checked before any is made: a call that refuses one changes nothing.

    Parameters
    ----------
    **changes : int
        Options to change and their new values (whole numbers): ``parallel_min_rows`` (rows from which a kernel
        pass is shared between threads, default 200,000), ``spread_max_rows`` (rows up to which small calls share
        one compiled form, 65,536), ``sweep_chunk_rows`` (rows of a sweep's pass at a time, 262,144),
        ``max_worker_pairs`` (worker pairs a replay on a cluster resolves, 262,144), ``max_grid_configs``
        (configurations one replay grid takes, 1,000,000), ``max_pair_flows`` (flows those worker pairs hold
        together, 2,097,152), ``max_synthetic_requests`` (requests one synthetic trace makes, 100,000,000),
        ``max_time_bins`` (time bins of a replay's utilisation series on a cluster, 4,096, from 256 to 65,536),
        ``max_token_values`` (prompt lengths one ``--tokens`` range asks for, 1,000,000).

    Returns
    -------
    set_options
        An object that, used in a ``with`` statement, makes its changes for the block and undoes them at its end.

    Raises
    ------
    perfmodel.InputError
        An unknown option (with the closest known name) or a value that is not a whole number in its range.

    Examples
    --------
    >>> import perfmodel
    >>> with perfmodel.set_options(parallel_min_rows=10**12):   # no kernel pass shared between threads
    ...     float(perfmodel.handoff_delay_ms(128, 1.0, 1_000_000))
    128.0
    >>> changes = perfmodel.set_options(sweep_chunk_rows=11)   # a call: at once
    >>> with changes:                                          # a block: the same changes, undone at its end
    ...     perfmodel.get_options()["sweep_chunk_rows"]
    11
    >>> perfmodel.get_options()["sweep_chunk_rows"]            # (the call that made the object taken back)
    262144
    >>> perfmodel.set_options(parallel_min_rows=-1)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: parallel_min_rows: -1 is not a whole number >= 0. Fix: pass a whole number >= 0, e.g. parallel_min_rows=1.
    """

    def __init__(self, **changes: Any) -> None:
        self._changes = _checked(changes)
        with _LOCK:  # (a call: its values at once, for the rest of the process)
            self._call = next(_COUNT)
            self._replaced: dict[str, tuple[int, int]] | None = {name: _SET[name] for name in self._changes}
            _SET.update({name: (self._call, value) for name, value in self._changes.items()})
            _recompute()

    def _take_back(self) -> None:
        """Take back the call that made this object, for each option no later call changed, once (the caller
        holds ``_LOCK`` and recomputes)."""
        if self._replaced is not None:
            _SET.update({n: old for n, old in self._replaced.items() if _SET[n][0] == self._call})
            self._replaced = None

    def __enter__(self) -> set_options:
        with _LOCK:
            self._take_back()  # (its first block: the call that made it is taken back)
            _BLOCKS.append((next(_COUNT), self, self._changes))
            _recompute()
        return self

    def __reduce__(self) -> Any:
        raise TypeError(
            "a set_options object holds this process's changes and cannot be pickled: pass its changes as a dict "
            "and call perfmodel.set_options(**changes) where they apply"
        )

    def __exit__(self, *exc: object) -> None:
        with _LOCK:
            mine = [i for i, (_, owner, _) in enumerate(_BLOCKS) if owner is self]
            if mine:  # (the latest block of this object: blocks of one object nest)
                del _BLOCKS[mine[-1]]
                _recompute()


def deprecated_constant(module: str, names: dict[str, str]) -> Any:
    """The old constants of a module that are knobs now (``names`` maps each old name to its option), and the
    module's ``__getattr__`` (refusing other names). Reading one gives the option's current value; assigning one
    sets the option, as a call to :func:`set_options` would (checked; for the rest of the process), so old code
    that set the constant still steers the package. Either warns (``FutureWarning``, as the moved modules do, at
    the user's line, as often as Python's filters show a warning: under the default action, once per line that
    reads or sets one).

    The module (already in :data:`sys.modules`, as while its code runs) gets a module type with a property for
    each old name (so that ``monkeypatch.setattr`` puts the value before back); its other attributes are as before.

    >>> import sys, types, warnings
    >>> old = sys.modules["old_knobs"] = types.ModuleType("old_knobs")
    >>> old.__getattr__ = deprecated_constant("old_knobs", {"SPREAD": "spread_max_rows"})
    >>> with warnings.catch_warnings(record=True):
    ...     old.SPREAD = 1000
    ...     old.SPREAD, get_options()["spread_max_rows"]
    (1000, 1000)
    >>> _ = set_options(spread_max_rows=65_536)
    >>> del sys.modules["old_knobs"]
    """

    def warn_old(name: str) -> None:
        warn(
            f"{module}.{name} is an option now: read perfmodel.get_options()[{names[name]!r}] and "
            f"change it with perfmodel.set_options({names[name]}=...)",
            FutureWarning,
        )

    assigned: dict[str, tuple[int, set_options]] = {}  # each name's last assignment, and the value before it

    def constant(name: str) -> property:
        def read(_: object) -> int:
            warn_old(name)
            return _VALUES[names[name]]

        def assign(_: object, value: Any) -> None:
            warn_old(name)
            knob = names[name]
            last = assigned.get(name)
            if last is not None and value == last[0]:  # (the value before the last assignment put back, as
                with _LOCK:  # monkeypatch's undo does: that assignment taken back, not a new call)
                    last[1]._take_back()
                    _recompute()
                del assigned[name]
                if _VALUES[knob] == value:  # (else a later call or an open block holds another value: set it)
                    return
            before = _VALUES[knob]
            assigned[name] = (before, set_options(**{knob: value}))

        return property(read, assign)

    def __getattr__(name: str) -> int:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    sys.modules[module].__class__ = type("OldConstants", (types.ModuleType,), {n: constant(n) for n in names})
    return __getattr__


def renamed_keywords(**old_to_new: str) -> Any:
    """A decorator for a function whose keywords were renamed: ``old=new`` pairs. A call with an old name warns
    (``FutureWarning``, once per call site as Python's default filters show it) and passes the value under its
    new name; a call with both names is refused (:class:`TypeError`, as Python refuses a keyword given twice).

    >>> import warnings
    >>> @renamed_keywords(percent="percentile")
    ... def p(percentile=99):
    ...     return percentile
    >>> with warnings.catch_warnings(record=True):
    ...     p(percent=50)
    50
    """

    def decorate(function: Any) -> Any:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{function.__name__}() got {old}= and {new}=: give {new}= only")
                    warn(
                        f"{function.__name__}({old}=...) is now {new}=; the old name goes away in a future release",
                        FutureWarning,
                    )
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper

    return decorate
