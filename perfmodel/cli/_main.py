"""The command line's parser, its one-line errors and exit codes, and the entry point."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from ..ground.files import interrupts_deferred
from . import cache, calibrate, clusters, connectors, delay, links, measured, models, presets, sweep, trace, ttft
from ._parsing import UsageError, command_flags, in_flags, one_line_warnings

#: The namespace attribute recording which single-value flags were given, and their values (removed after parsing).
_GIVEN = "_perfmodel_given_once"


def _shown(value: Any) -> str:
    """A flag's value as the command line wrote it, near enough: ``1.0`` as ``1``, a list as its words.

    >>> _shown(1.0), _shown(["nvlink4", "8x ib-ndr"]), _shown("1k")
    ('1', "nvlink4 '8x ib-ndr'", '1k')
    """
    if isinstance(value, (list, tuple)):
        return " ".join(repr(v) if isinstance(v, str) and " " in v else _shown(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class _StoreOnce(argparse.Action):
    """argparse's ``store`` (the value kept under the flag's ``dest``), refusing a flag given a second time
    (argparse keeps the last one, silently). Flags meant to repeat say so (``action="append"`` or ``"extend"``:
    ``--column``, ``--grid``)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        option = option_string
        if option is not None:  # (a positional argument is taken once by argparse itself)
            given = namespace.__dict__.setdefault(_GIVEN, {})
            if self.dest in given:
                first_flag, first = given[self.dest]
                flag = first_flag if first_flag == option else f"{first_flag}/{option}"
                raise argparse.ArgumentError(
                    None, f"{flag} given twice ({_shown(first)}, {_shown(values)}): give it once"
                )
            given[self.dest] = (option, values)
        setattr(namespace, self.dest, values)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (what was wrong, and where the usage is), exit code 2, and the close
    match of a mistyped subcommand, choice or flag: argparse's own ``suggest_on_error`` for choices where the
    Python has it (3.14+), the same words from :mod:`difflib` where it does not; flags on every Python. A
    single-value flag given twice is refused (:class:`_StoreOnce`), in every subcommand (whose parsers are of
    this class too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _OWN_SUGGESTIONS:
            kwargs.setdefault("suggest_on_error", True)
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if (
            _OWN_SUGGESTIONS
            or choices is None
            or not isinstance(value, str)
            or value in choices
            or not all(isinstance(choice, str) for choice in choices)
        ):
            return super()._check_value(action, value)
        close = difflib.get_close_matches(value, list(choices), n=1)
        if not close:
            return super()._check_value(action, value)
        raise argparse.ArgumentError(
            action,
            f"invalid choice: {value!r}, maybe you meant {close[0]!r}? (choose from {', '.join(map(repr, choices))})",
        )

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, unknown = self.parse_known_args(args, namespace)
        parsed.__dict__.pop(_GIVEN, None)  # (the record of the flags given: no option of the command)
        if unknown:  # said by the subcommand whose flags they were meant to be, with its flags' close match
            parser = _chosen(self, parsed)
            parser.error(f"unrecognized arguments: {' '.join(unknown)}{_flag_hint(parser, unknown)}")
        return parsed


#: Whether argparse suggests close choices itself (Python 3.14+: ``suggest_on_error``).
_OWN_SUGGESTIONS = sys.version_info >= (3, 14)


def _chosen(parser: argparse.ArgumentParser, parsed: Any) -> argparse.ArgumentParser:
    """The (sub)command's parser that ``parsed`` went through last: ``perfmodel sweep``'s for ``perfmodel sweep ...``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(parsed, action.dest, None) in action.choices:
            return _chosen(action.choices[getattr(parsed, action.dest)], parsed)
    return parser


def _flag_hint(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """ " (maybe you meant '--clear'?)" for the first unrecognized flag close to one of ``parser``'s own flags
    (the subcommand's, not the main parser's), or ""."""
    flags = sorted({f for action in parser._actions for f in action.option_strings})
    for word in unknown:
        close = difflib.get_close_matches(word.split("=")[0], flags, n=1) if word.startswith("-") else []
        if close:
            return f" (maybe you meant {close[0]!r}?)"
    return ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfmodel",
        description="KV-cache handoff delay of disaggregated LLM serving, for millions of cases.",
        epilog="Run 'perfmodel sweep --out results' for the default what-if (models x links x 128 to 128k tokens).",
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for command in (
        sweep,
        delay,
        models,
        links,
        presets,
        clusters,
        connectors,
        calibrate,
        trace,
        ttft,
        measured,
        cache,
    ):
        command.register(sub)
    for subcommand in sub.choices.values():  # --debug after the subcommand too (its default: the main parser's)
        subcommand.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        subcommand.set_defaults(command_parser=subcommand)  # (its flags name the API's arguments in its messages)
    return parser


DEBUG_HELP = "show tracebacks instead of one-line errors"


def _version() -> str:
    from .. import __version__

    return __version__


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every ``finally`` removes its temporary files."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


#: What each command imports (numba's compiler, pyarrow, matplotlib: C and C++ libraries).
_HEAVY = {
    "sweep": ("perfmodel.sweeps", "pyarrow", "matplotlib.pyplot"),
    "delay": ("perfmodel.io", "pyarrow.csv"),
    "trace": ("perfmodel.replay", "pyarrow.json", "matplotlib.pyplot"),
}


def _preload(command: str) -> None:
    """Import the command's heavy modules with Ctrl-C/SIGTERM/SIGHUP held back until they are loaded.

    An interrupt in the middle of a C/C++ library's initialization can abort the process
    (SIGABRT, no message); held back, it interrupts cleanly right after.
    """
    import importlib

    with interrupts_deferred():
        if command in ("sweep", "trace"):
            import matplotlib

            matplotlib.use("Agg")
        for module in _HEAVY.get(command, ()):
            importlib.import_module(module)


def interrupted_message(interrupt: KeyboardInterrupt) -> str:
    """What the command says when Ctrl-C, SIGTERM or SIGHUP stopped it (``output_complete``: the output folder
    whose files were being moved in when it came, and were all moved in).

    >>> interrupted_message(KeyboardInterrupt())
    'perfmodel: interrupted (SIGINT); no output was written or changed'
    """
    name = signal.Signals(getattr(interrupt, "signum", signal.SIGINT)).name
    complete = getattr(interrupt, "output_complete", None)
    if complete:
        return f"perfmodel: interrupted ({name}) after {complete} was complete"
    return f"perfmodel: interrupted ({name}); no output was written or changed"


def _user_errors() -> tuple[type[BaseException], ...]:
    """Failures caused by the input, the files or the machine (exit 2), as opposed to bugs (exit 1)."""
    import lzma
    import zlib

    # ValueError covers InputError, bad JSON/CSV/Parquet (pyarrow's ArrowInvalid) and undecodable text;
    # OSError covers missing files, permissions, a full disk, read-only targets and unreachable schedulers.
    return UsageError, ValueError, OSError, EOFError, lzma.LZMAError, zlib.error


def _one_line(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"{error.filename}: {error.strerror}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    0: done. 2: a failure caused by the input, the files or the machine (one line on
    stderr; ``--debug`` shows the traceback). 1: an internal error (a bug: the traceback
    is shown). 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP): interrupted, outputs untouched.
    141 (as SIGPIPE): the reader of the output closed it (``perfmodel links | head -1``); nothing is said.

    Parameters
    ----------
    argv
        The arguments after ``perfmodel`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code.

    Examples
    --------
    >>> main(["links", "--help"])  # doctest: +ELLIPSIS
    usage: perfmodel links ...
    0
    """
    previous = {}
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            with contextlib.suppress(ValueError):  # not the main thread: leave the handlers alone
                previous[signum] = signal.signal(signum, _interrupt)
    command = "?"
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version, or a usage error (said in one line)
            sys.stdout.flush()  # (a closed pipe is found here)
            return done.code if isinstance(done.code, int) else 2
        command = args.command
        try:
            with one_line_warnings(command, every=False):  # (a warning shown, the kernels' cache's too: one line)
                _preload(command)
                code = args.run(args)
            sys.stdout.flush()  # (a closed pipe is found here, when the last of the output is written)
            return code
        except BrokenPipeError:
            raise  # (not the input's fault: below)
        except _user_errors() as error:
            if args.debug:
                raise
            if isinstance(error, InputError):  # speak of the command's flags, not of arguments
                error.coerce_hint = "--errors coerce" if command == "delay" else ""
                flags = command_flags(_chosen(parser, args))  # (the failing command's own flags, none of another's)
                if error.where in flags:
                    error.where = f"{flags[error.where]} ({error.where})"
                error.problem, error.fix = (in_flags(text, flags) for text in (error.problem, error.fix))
            print(f"perfmodel {command}: error: {_one_line(error)}", file=sys.stderr)
            return 2
    except KeyboardInterrupt as interrupt:
        print(interrupted_message(interrupt), file=sys.stderr)
        return 128 + int(getattr(interrupt, "signum", signal.SIGINT))
    except BrokenPipeError:  # the reader stopped reading (| head): end quietly, as a shell tool does on SIGPIPE
        _stdout_to_devnull()
        return 128 + 13
    except SystemExit:
        raise
    except Exception:  # noqa: BLE001 (the last resort) a bug in perfmodel, not the user's input: say so, with the traceback
        print(
            f"perfmodel {command}: internal error (please report it, with this traceback):\n{traceback.format_exc()}",
            file=sys.stderr,
        )
        return 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stdout_to_devnull() -> None:
    """Point standard output at the null device, so that the interpreter's last flush of what is left in its
    buffer finds no closed pipe (Python's "Note on SIGPIPE", in the signal module's documentation)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # (a stdout without a file: nothing to do)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def console() -> None:
    """The ``perfmodel`` command (and ``python -m perfmodel``): :func:`main`, then exit with its code.

    Before exiting it freezes the garbage collector's objects: the interpreter's final cyclic collections over
    everything pandas, numba and matplotlib allocated (0.2-0.4 s, measured on the main job) would only free
    memory the operating system reclaims anyway. Every file perfmodel writes is closed by then, and the standard
    streams are still flushed. A run that failed on its input (exit code 2) wrote nothing: it flushes the
    standard streams and ends at once, with no teardown (with pyarrow 14, a failed CSV read's read-ahead
    outlives its reader, closed or not, and aborted the interpreter's teardown in about 1 run of 7 on a loaded
    machine).

    Examples
    --------
    >>> import sys
    >>> from unittest import mock
    >>> from perfmodel.cli import console
    >>> with mock.patch.object(sys, "argv", ["perfmodel", "--help"]), mock.patch("gc.freeze"):
    ...     try:
    ...         console()  # doctest: +ELLIPSIS
    ...     except SystemExit as exit:
    ...         print("exit code", exit.code)
    usage: perfmodel ...
    exit code 0
    """
    code = main()
    if code == 2:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    gc.freeze()  # (an interrupted run freezes too: it must not run finalizers that a second signal could break)
    sys.exit(code)


if __name__ == "__main__":
    console()
