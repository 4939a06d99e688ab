"""The one error type for bad input, and the small ``check_*`` helpers every entry point uses.

An :class:`InputError` says what was wrong, where (the argument, column, file or line),
the first offending value and how to fix it. It is a :class:`ValueError`, so
``except ValueError`` catches it, and it pickles with all its fields (errors cross
process boundaries, e.g. from Dask workers).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

__all__ = ["Errors", "InputError", "check_choice", "check_flag", "check_number", "check_whole"]

#: What an entry point does with invalid rows: raise an :class:`InputError`, or give NaN for them.
Errors = Literal["raise", "coerce"]


class InputError(ValueError):
    """Invalid input: which argument, how many rows, the first bad row and value, the fix.

    ``where`` names the argument (the pandas facade puts the column name there, the
    command line the file) and ``row`` the first bad row (a position in the numpy
    layer, a row label in pandas, a 1-based row number in files); ``place`` says where
    that row is when a row number would not (``"line 3"`` of a text file). ``counts`` maps
    each argument with invalid rows to how many it has, when known.

    Parameters
    ----------
    where : str
        The argument, column or file the error is about.
    problem : str
        What is wrong, in words.
    fix : str
        How to fix it.
    n_invalid : int, optional
        How many rows are invalid (None: one value, not rows).
    row, value : Any, optional
        The first bad row (position, label or 1-based row number) and its value.
    argument : str, optional
        The argument's own name (default: ``where``).
    position : int, optional
        The first bad row's position (0-based), when ``row`` is a label.
    counts : dict of str to int, optional
        Each argument with invalid rows and how many it has.
    coerce_hint : str, optional
        How the message asks for NaN instead of an error (default ``errors='coerce'``).
    place : str, optional
        Where the row is when a row number would not say (``"line 3"``).

    Examples
    --------
    >>> error = InputError("num_input_tokens", "negative", "pass counts >= 0", n_invalid=2, row=5, value=-1)
    >>> str(error)
    "num_input_tokens: 2 invalid rows; first at row 5: -1 (negative). Fix: pass counts >= 0, or pass errors='coerce' to get NaN for those rows."
    """

    #: How the message tells the user to ask for missing values instead of an error
    #: (the command line replaces it with its flag; empty: no such option there).
    coerce_hint: str = "errors='coerce'"

    def __init__(
        self,
        where: str,
        problem: str,
        fix: str,
        *,
        n_invalid: int | None = None,
        row: Any = None,
        value: Any = None,
        argument: str | None = None,
        position: int | None = None,
        counts: dict[str, int] | None = None,
        coerce_hint: str | None = None,
        place: str | None = None,
    ) -> None:
        self.where, self.problem, self.fix = plain_text(where), plain_text(problem), plain_text(fix)
        self.n_invalid, self.row, self.value, self.place = n_invalid, plain(row), plain(value), place
        self.argument = argument or where
        self.position = position
        self.counts = dict(counts or {})
        if coerce_hint is not None:
            self.coerce_hint = coerce_hint
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.n_invalid is None:
            return _long_numbers_counted(f"{self.where}: {self.problem}. Fix: {self.fix}.")
        rows = "row" if self.n_invalid == 1 else "rows"
        others = {k: v for k, v in self.counts.items() if k != self.argument}
        also = ("; other invalid rows: " + ", ".join(f"{k} {v:,}" for k, v in others.items())) if others else ""
        coerce = f", or pass {self.coerce_hint} to get NaN for those rows" if self.coerce_hint else ""
        return _long_numbers_counted(
            f"{self.where}: {self.n_invalid:,} invalid {rows}; first at {self.place or f'row {self.row!r}'}: "
            f"{self.value!r} ({self.problem}){also}. Fix: {self.fix}{coerce}."
        )

    def _fields(self) -> dict[str, Any]:
        return dict(
            n_invalid=self.n_invalid,
            row=self.row,
            value=self.value,
            argument=self.argument,
            position=self.position,
            counts=self.counts,
            coerce_hint=self.coerce_hint,
            place=self.place,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable with all its fields."""
        return _rebuild_input_error, (self.where, self.problem, self.fix, self._fields())

    @classmethod
    def of(
        cls, argument: str, error: Exception, fix: str = "pass a number, a preset name or a column of them"
    ) -> InputError:
        """The :class:`InputError` of ``argument`` for an error whose text reads ``problem. Fix: how`` (``fix``
        where it names no fix).

        >>> str(InputError.of("kv_bytes_per_token", ValueError("model 'x': not a preset. Fix: use a preset")))
        "kv_bytes_per_token: model 'x': not a preset. Fix: use a preset."
        """
        problem, _, how = str(error).partition(". Fix: ")
        return cls(argument, problem, how.rstrip(".") or fix)

    def relocated(self, where: str, row: Any, **changes: Any) -> InputError:
        """The same error, reported at another place (a column, a file) and row (a label, a row number; ``place``
        among ``changes``: a line of a file)."""
        return InputError(
            self.where if where is None else where, self.problem, self.fix, **{**self._fields(), "row": row, **changes}
        )


#: numpy's repr of a scalar (``np.float64(1.5)``, ``np.str_('a')``, ``np.True_``) inside a message's text.
_NUMPY_REPR = re.compile(
    r"\bnp\.(?:(?:float|int|uint|complex)\d+|longdouble|str_|bytes_|bool_?)\(((?:[^()]|\([^()]*\))*)\)"
    r"|\bnp\.(True|False)_"
)

#: A numpy scalar's repr (its value in group 1 or 2), or a string quoted by ``repr`` (no group: kept as is).
_NUMPY_REPR_OR_QUOTED = re.compile(
    _NUMPY_REPR.pattern + r"""|(?<![\w'"])'(?:[^'\\\n]|\\.)*'(?![\w'])|(?<![\w'"])"(?:[^"\\\n]|\\.)*"(?![\w"])"""
)


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (shown as ``1.5``, never ``np.float64(1.5)``); else as is."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def plain_text(text: Any) -> Any:
    """A message's text with numpy's scalar reprs written as plain values (``np.float64(1.5)``: ``1.5``): the
    one place every :class:`InputError` passes, whichever ``!r`` formatted a numpy number into it. A quoted
    string (a file's cell shown with ``!r``) is shown as it is: its text is what the file holds.

    >>> plain_text("got np.float64(-1.5) and np.int64(3) and np.True_")
    'got -1.5 and 3 and True'
    >>> plain_text("column 'x' holds 'np.float64(0.07)', not a number")
    "column 'x' holds 'np.float64(0.07)', not a number"
    """
    if not isinstance(text, str) or "np." not in text:
        return text
    return _NUMPY_REPR_OR_QUOTED.sub(lambda m: m.group(m.lastindex or 0), text)


#: A run of more digits than any count or id holds (an int beyond float64 typed by mistake, 10**400).
_LONG_NUMBER = re.compile(r"(-?)([0-9]{31,})")


def _long_numbers_counted(text: str) -> str:
    """``text`` with each run of more than 30 digits written as how many digits it has: one line a user can read.

    >>> _long_numbers_counted("got " + "1" * 400 + " and -" + "2" * 40)
    'got a number of 400 digits and a negative number of 40 digits'
    """
    return _LONG_NUMBER.sub(lambda m: f"a{' negative' if m.group(1) else ''} number of {len(m.group(2))} digits", text)


#: A number written with a thousands separator: 3,180 or -1,234,567.5 (never a number to Python or pandas).
_THOUSANDS = re.compile(r"[+-]?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?")


def not_a_number(value: Any) -> str:
    """Why a value that does not read as a number is not one, in words: a thousands separator is named, with
    the number to write instead (every reader says it so: the file's cell, a frame's).

    Parameters
    ----------
    value : Any
        The value (a file's cell, usually text) that is not a number.

    Returns
    -------
    str
        ``"not a number"``, and what to write when it is a number with thousands separators.

    Examples
    --------
    >>> not_a_number("3,180")
    'not a number; it has a thousands separator: write 3180'
    >>> not_a_number("ten")
    'not a number'
    """
    text = value.strip() if isinstance(value, str) else ""
    if _THOUSANDS.fullmatch(text):
        return f"not a number; it has a thousands separator: write {text.replace(',', '')}"
    return "not a number"


def _rebuild_input_error(where: str, problem: str, fix: str, fields: dict[str, Any]) -> InputError:
    return InputError(where, problem, fix, **fields)


@overload
def check_whole(
    name: str,
    value: Any,
    *,
    smallest: int = ...,
    optional: Literal[False] = ...,
    largest: int | None = ...,
    above: str = ...,
) -> int: ...
@overload
def check_whole(
    name: str, value: Any, *, smallest: int = ..., optional: bool = ..., largest: int | None = ..., above: str = ...
) -> int | None: ...
def check_whole(
    name: str, value: Any, *, smallest: int = 0, optional: bool = False, largest: int | None = None, above: str = ""
) -> int | None:
    """``value`` as a Python int, or :class:`InputError`: a whole number >= ``smallest`` (and <= ``largest``,
    refused with the fix ``above``) (bools and fractions refused, never truncated); ``None`` passes when ``optional``.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : Any
        What was given.
    smallest : int
        The smallest value allowed.
    optional : bool
        Whether None is allowed.
    largest : int, optional
        The largest value allowed (default: none).
    above : str
        The fix of a value above ``largest``.

    Returns
    -------
    int or None
        ``value`` as a Python int (``None`` only when ``optional``).

    Examples
    --------
    >>> check_whole("decode_workers", 8.0, smallest=1)
    8
    >>> check_whole("tp", 2.5, smallest=1)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: tp: 2.5 is not a whole number >= 1. Fix: pass a whole number >= 1, e.g. tp=1.
    """
    if value is None and optional:
        return None
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy scalars read as Python numbers
        value = value.item()
    whole = (isinstance(value, numbers.Integral) and not isinstance(value, bool)) or (
        isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer()
    )
    if not whole or value < smallest:
        raise InputError(
            name,
            f"{shown(value)} is not a whole number >= {smallest}",
            f"pass a whole number >= {smallest}, e.g. {name}={max(smallest, 1)}",
        )
    if largest is not None and value > largest:
        digits = len(str(int(value)))
        given = f"{int(value):,}" if digits <= 24 else f"a number of {digits:,} digits"
        raise InputError(name, f"{given} is above {largest:,}", above or f"pass a whole number <= {largest:,}")
    return int(value)


def shown(value: Any) -> str:
    """``value`` as a message shows it: its repr, or for a container (a list, an array, a Series) what it is and
    how many values it holds (a Series' repr runs over many lines).

    >>> import numpy as np
    >>> shown(2.5), shown([1, 2, 3]), shown(np.array([1.0])), shown(np.array(5))
    ('2.5', 'a list of 3 values', 'a numpy array of 1 value', 'array(5)')
    """
    try:
        size = None if isinstance(value, (str, bytes, dict)) else len(value)
    except TypeError:  # (no length, or a 0-d array's)
        size = None
    if size is None:
        return repr(value)
    kind = {"ndarray": "numpy array"}.get(type(value).__name__, type(value).__name__)
    return f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind} of {size:,} value{'' if size == 1 else 's'}"


def check_number(where: str, name: str, value: Any, ok: Callable[[float], bool], rule: str, fix: str) -> int | float:
    """A numeric field of a public object (a :class:`perfmodel.Link`'s, :class:`perfmodel.Transport`'s,
    :class:`perfmodel.Cluster`'s): a real number, numpy's scalars read as the Python numbers they are, for which
    ``ok`` holds; booleans (Python's and numpy's: never 0/1), text and anything else refused, as is a value
    outside the range (``rule`` says what it is not, ``fix`` how to give it). The one check of every such field.

    Parameters
    ----------
    where : str
        The object, for the message (``"link 'ib-ndr'"``).
    name : str
        The field's name.
    value : Any
        What was given.
    ok : callable
        Whether a number is in the field's range (NaN reaches it: refuse it there unless it is allowed).
    rule : str
        What a refused number is not (``"is not > 0"``).
    fix : str
        How to give the field.

    Returns
    -------
    int or float
        ``value`` as a Python int (a whole-number type) or float.

    Examples
    --------
    >>> import numpy as np
    >>> check_number("transport 'te'", "efficiency", np.float32(0.5), lambda v: 0 < v <= 1, "is not in (0, 1]", "pass 0.8")
    0.5
    >>> check_number("link 'x'", "bandwidth_gb_s", True, lambda v: v > 0, "is not > 0", "pass a bandwidth in GB/s > 0")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: link 'x': bandwidth_gb_s True is a boolean, not a number. Fix: pass a bandwidth in GB/s > 0.
    """
    import numpy as np

    if isinstance(value, (bool, np.bool_)):  # (numpy's bool is no numbers.Real either)
        raise InputError(where, f"{name} {shown(value)} is a boolean, not a number", fix)
    if isinstance(value, numbers.Integral):
        number: int | float = int(value)
    elif isinstance(value, numbers.Real):
        number = float(value)
    else:
        raise InputError(where, f"{name} {shown(value)} is not a number", fix)
    try:
        valid = ok(number)
    except OverflowError:  # (an int beyond every float: no field's range holds it)
        valid = False
    if not valid:
        text = "nan (not a number)" if isinstance(number, float) and math.isnan(number) else repr(number)
        text = text if len(text) <= 40 else f"(a number of {len(text)} digits)"
        raise InputError(where, f"{name} {text} {rule}", fix)
    return number


def finite_at_least(low: float, open_low: bool = False) -> Callable[[float], bool]:
    """The range test of :func:`check_number` for finite numbers >= ``low`` (> with ``open_low``)."""
    return lambda v: math.isfinite(v) and (v > low if open_low else v >= low)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices`` (strings), else :class:`InputError` listing them.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : Any
        What was given.
    choices : sequence of str
        The values allowed.

    Returns
    -------
    str
        ``value`` itself, one of ``choices``.

    Examples
    --------
    >>> check_choice("contention", "fifo", ("none", "fifo", "fair"))
    'fifo'
    """
    if not isinstance(value, str) or value not in choices:
        raise InputError(
            name,
            f"{shown(value)} is not one of {', '.join(map(repr, choices))}",
            f"pass {name}={choices[0]!r} or another of those",
        )
    return value


def check_flag(name: str, value: Any, *, optional: bool = False) -> bool | None:
    """``value`` if it is a bool (``None`` passes when ``optional``), else :class:`InputError`.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : Any
        What was given.
    optional : bool
        Whether None is allowed.

    Returns
    -------
    bool or None
        ``value`` itself (``None`` only when ``optional``).

    Examples
    --------
    >>> check_flag("parallel", None, optional=True) is None
    True
    """
    if value is None and optional:
        return None
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise InputError(
            name,
            f"{shown(value)} is not True or False",
            f"pass {name}=True or {name}=False" + (" (or None for the default)" if optional else ""),
        )
    return bool(value)


#: Where the frames between the user's line and a warning are: perfmodel, numba (calling perfmodel's hooks while it
#: compiles or caches) and the import system (importlib, and its frozen bootstrap).
_NOT_THE_USERS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep,
    "<frozen importlib",
)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue ``message`` as a warning of ``category`` at the first line outside perfmodel, numba and the import
    system that led here: the caller's line, however deep inside the package the warning is raised (pandas'
    ``find_stack_level``), so that Python's filters and the message's location name the caller's code (judged as
    ``warnings.warn`` would: its module, its registry).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("careful")
    >>> str(caught[0].message), caught[0].filename.startswith("<doctest")
    ('careful', True)
    """
    frame = inspect.currentframe()
    if frame is None:  # (a Python without frames: Python's own stack level)
        warnings.warn(message, category, stacklevel=2)
        return
    numba_file = getattr(sys.modules.get("numba"), "__file__", None)  # (numba calls perfmodel's hooks as it compiles)
    skipped = _NOT_THE_USERS + ((os.path.dirname(os.path.abspath(numba_file)) + os.sep,) if numba_file else ())
    while frame.f_back is not None and frame.f_code.co_filename.startswith(skipped):
        frame = frame.f_back
    where = frame.f_globals
    warnings.warn_explicit(  # (no module_globals: as warnings.warn, the line's text read from its file)
        message,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        where.get("__name__", "<string>"),
        where.setdefault("__warningregistry__", {}),
    )
