"""Files perfmodel writes: atomic files, and output folders that hold what each command wrote.

User files are precious: a file is written to a temporary name beside its target and
renamed onto it when complete; an output folder receives its files staged in a hidden
folder and moved in when all are complete. Its manifest (``.perfmodel-output.json``)
lists the files each command wrote there (each with its size and modification time), so a
command replaces, or removes as stale, only files it wrote itself and that have not changed
since: never a user's file, another command's, nor one the user edited.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import InputError

__all__ = [
    "MANIFEST",
    "atomic_file",
    "check_not_in_package",
    "check_not_overlapping",
    "check_output_file",
    "interrupts_deferred",
    "output_folder",
    "record_output_file",
]

#: The file in an output folder that lists what perfmodel wrote there, command by command.
MANIFEST = ".perfmodel-output.json"


def _normal_permissions(path: Path, mode: int = 0o666) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``target``, renamed onto it only if the block succeeds.

    The temporary file is removed whatever happens (an error, Ctrl-C, or SIGTERM/SIGHUP,
    which the command line turns into an interrupt). A ``target`` that is a symlink is written
    through (its target replaced, the link kept: a user's dotfiles stay linked), and a file
    replaced keeps its permission bits; a new one gets the usual ones.

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "notes.txt"
    >>> with atomic_file(target) as tmp:
    ...     _ = tmp.write_text("complete")
    >>> target.read_text()
    'complete'
    """
    target = Path(target)
    if target.is_dir():
        raise IsADirectoryError(21, "is a folder; name a file", str(target))
    target = target.resolve() if target.is_symlink() else target
    made = _make_folder(target.parent)
    tmp, done = None, False
    try:
        with interrupts_deferred(), _said_as(target):  # the file and its name, or neither
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".perfmodel-tmp", dir=target.parent)
            os.close(fd)
            tmp = Path(name)
        yield tmp
        try:  # (mkstemp makes files private: a file replaced keeps its bits, a new one gets the usual ones)
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        except FileNotFoundError:
            _normal_permissions(tmp)
        os.replace(tmp, target)
        done = True
    finally:
        with interrupts_deferred():
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            if not done:  # (a failed run leaves no folder it made either)
                _unmake(made)


def _make_folder(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; the folders made, the deepest first."""
    made, part = [], folder
    while not os.path.lexists(part) and part.parent != part:
        made.append(part)
        part = part.parent
    folder.mkdir(parents=True, exist_ok=True)
    return made


def _unmake(made: list[Path]) -> None:
    """Remove the folders ``made`` (the deepest first) that are still empty, up to the first that is not."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return


@contextlib.contextmanager
def _said_as(target: Path) -> Iterator[None]:
    """An OSError making a temporary name beside ``target`` (a read-only or full disk) said of ``target``, the
    output the user named, never of the temporary name they did not."""
    try:
        yield
    except OSError as error:
        if error.errno is None:
            raise
        raise OSError(
            error.errno, f"{error.strerror} (cannot write there: choose another --out)", str(target)
        ) from None


#: The signals that interrupt a command: Ctrl-C, ``kill`` and a closed terminal.
_INTERRUPTS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP that arrive in the block take effect as it ends: their handlers run then.

    Python runs a signal's handler in the main thread whichever thread received the signal (a
    process with pyarrow's or numba's threads), so masking signals in one thread does not hold
    them back; the handlers themselves are replaced for the block. Outside the main thread,
    where Python runs no handler, the block runs as it is.

    >>> with interrupts_deferred():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda received, _frame: pending.append(received)) for signum in _INTERRUPTS
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):  # each signal's own handler once, in order of arrival
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_not_overlapping(output: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse an output that is, contains or lies inside one of the inputs (files or folders).

    >>> check_not_overlapping("out/", ["data/requests.csv"])
    >>> check_not_overlapping("data", ["data/requests.csv"])
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: data: the output folder contains the input data/requests.csv. Fix: write the output somewhere else (e.g. --out results/).
    """
    out = Path(output).resolve()
    for source in inputs:
        src = Path(source).resolve()
        if out == src:
            problem = "the output is the input itself"
        elif _within(src, out):
            problem = f"the output folder contains the input {source}"
        elif _within(out, src):
            problem = f"the output lies inside the input folder {source}"
        else:
            continue
        raise InputError(str(output), problem, "write the output somewhere else (e.g. --out results/)")


def check_not_in_package(output: str | os.PathLike) -> None:
    """Refuse an output inside the installed perfmodel package: its code and the data every ``dataset:NAME``
    reads (an output there would replace a shipped file, or sit among them).

    >>> check_not_in_package("results")
    """
    package = Path(__file__).resolve().parent.parent
    if _within(Path(output).resolve(), package):
        raise InputError(
            str(output),
            f"lies inside the installed perfmodel package ({package}), whose files are its code and shipped data",
            "write the output somewhere else (e.g. --out results/)",
        )


def _foreign_manifest(folder: Path) -> bool:
    """Whether ``folder`` holds a file of the manifest's name that perfmodel did not write (not its JSON)."""
    path = folder / MANIFEST
    if not os.path.lexists(path):
        return False
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return True
    return not (isinstance(data, dict) and (data.get("written_by") == "perfmodel" or {"commands", "files"} & set(data)))


def _refuse_foreign_manifest(folder: Path) -> None:
    if _foreign_manifest(folder):
        raise InputError(
            str(folder),
            f"holds {MANIFEST}, which perfmodel did not write (it is the name of the list of files perfmodel "
            "writes there)",
            f"choose another --out folder, or move {MANIFEST} away",
        )


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and "/" not in name and name not in ("", ".", "..")


def _read(folder: Path) -> dict:
    """The folder's manifest as stored (an unreadable one: empty)."""
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _manifest(folder: Path) -> dict[str, set[str]]:
    """The files each command wrote in ``folder`` and has not been changed since (by size and modification time),
    by command (an unreadable manifest: none; one written before the stamps were kept: every file it lists)."""
    data = _read(folder)
    commands = data.get("commands")
    if not isinstance(commands, dict):  # a manifest of one list: files of a command not named
        files = data.get("files", [])
        commands = {"": files if isinstance(files, list) else []}
    stamps = data.get("stamps")
    unchanged = (lambda n: True) if not isinstance(stamps, dict) else (lambda n: stamps.get(n) == _stamp(folder / n))
    return {
        str(command): {n for n in names if _plain_name(n) and unchanged(n)}
        for command, names in commands.items()
        if isinstance(names, list)
    }


def _stamp(path: Path) -> list[int] | None:
    """A file as it is now: its size and modification time (ns); None for a file that is not there."""
    try:
        status = path.lstat()
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns]


def _changed(folder: Path, command: str, names: Iterable[str]) -> set[str]:
    """Of ``names``, those the manifest lists as ``command``'s but whose files have changed since it wrote them."""
    commands = _read(folder).get("commands")
    listed = commands.get(command, []) if isinstance(commands, dict) else []
    return {n for n in names if isinstance(listed, list) and n in listed} - _manifest(folder).get(command, set())


def check_output_folder(
    target: str | os.PathLike, *, command: str, names: Iterable[str], inputs: Iterable[str | os.PathLike] = ()
) -> dict[str, set[str]]:
    """Refuse, before any work, an output folder ``command`` cannot write ``names`` into: one that is a file, that
    overlaps an input, or that holds a file of one of those names which ``command`` did not write (a user's, or
    another command's). Returns the folder's manifest (empty for a folder yet to be made). An input that does not
    exist is said to be missing first (not as one the output would overwrite).

    >>> import tempfile, pathlib
    >>> check_output_folder(pathlib.Path(tempfile.mkdtemp()) / "new", command="sweep", names=["sweep.csv"])
    {}
    """
    target = Path(target)
    inputs = list(inputs)
    for source in inputs:
        if not os.path.lexists(source):
            raise FileNotFoundError(2, "no such file", str(source))
    check_not_overlapping(target, inputs)
    check_not_in_package(target)
    if os.path.lexists(target) and not target.is_dir():  # (a symlink to nowhere too: it exists)
        raise NotADirectoryError(20, "exists and is not a folder; name a folder", str(target))
    if target.is_dir():
        _refuse_foreign_manifest(target)
    manifest = _manifest(target) if target.is_dir() else {}
    owned = manifest.get(command, set())
    foreign = sorted(n for n in names if os.path.lexists(target / n) and n not in owned)
    if foreign:
        others = {n: c for c, files in manifest.items() if c != command for n in files}
        changed = _changed(target, command, foreign)
        others.update(dict.fromkeys(changed, f"{command}, changed since"))
        listing = ", ".join(f"{n} (written by perfmodel {others[n]})" if others.get(n) else n for n in foreign)
        which = f"which perfmodel {command} did not write" + (", or changed since it wrote them" if changed else "")
        raise InputError(
            str(target), f"holds {listing}, {which}", "choose another --out folder, or move those files away"
        )
    return manifest


@contextlib.contextmanager
def output_folder(
    target: str | os.PathLike, *, command: str, names: Sequence[str] = (), inputs: Iterable[str | os.PathLike] = ()
) -> Iterator[Path]:
    """A staging folder for one command's output files; moved into ``target`` only when the block succeeds.

    ``target`` may be new, empty, or hold other files: the command adds its own and replaces
    only the files the manifest says it wrote itself (also removing those of its earlier runs
    that this run did not write again). A file of the same name that the command did not
    write (a user's, or another command's) makes it refuse, before any work when ``names``
    lists the files to come; the other commands' files stay as they are.

    Parameters
    ----------
    target : str or os.PathLike
        The output folder (created if absent).
    command : str
        The command writing, for the folder's manifest.
    names : sequence of str
        The files it writes.
    inputs : iterable of paths
        Files it reads, which it must not overwrite.

    Yields
    ------
    pathlib.Path
        The staging folder: write the command's files there.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "results"
    >>> with output_folder(out, command="sweep") as stage:
    ...     _ = (stage / "summary.txt").write_text("ok")
    >>> sorted(p.name for p in out.iterdir())
    ['.perfmodel-output.json', 'summary.txt']
    """
    target = Path(target)
    check_output_folder(target, command=command, names=names, inputs=inputs)
    made = _make_folder(target)
    if made:
        _normal_permissions(target, 0o777)
    staging = None
    try:
        with interrupts_deferred(), _said_as(target):  # the folder and its name, or neither
            staging = Path(tempfile.mkdtemp(prefix=".perfmodel-staging-", dir=target))
        yield staging
        written = sorted(p.name for p in staging.iterdir())
        with _locked(target):  # the folder as it is now (edits, other commands' runs), not as it was before the work
            manifest = check_output_folder(target, command=command, names=written)
            try:
                with interrupts_deferred():  # every file moved in and the manifest written, or none moved
                    _move_in(staging, target, written, command, manifest)
            except KeyboardInterrupt as interrupt:  # it came while they were moved in: the output is complete
                interrupt.output_complete = str(target)  # type: ignore[attr-defined]  # (ours, read by the CLI)
                raise
    except BaseException:
        with interrupts_deferred():
            _discard(staging)
            _unmake(made)
        raise
    _discard(staging)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` (an output folder) for the block, so that commands writing it at once read and
    write its manifest one after the other. The folder itself is locked (``fcntl.flock``; released when the process
    ends, however it ends): no lock file is left among the outputs. Where it cannot be locked (no ``fcntl``:
    Windows; a file system without ``flock``; a folder one may write but not read), the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover (Windows)
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # (a folder one may write but not read: unlocked, as before the lock)
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _move_in(staging: Path, target: Path, written: list[str], command: str, manifest: dict[str, set[str]]) -> None:
    """Move a command's ``written`` files from ``staging`` into ``target``, remove that command's files of an
    earlier run it did not write again and that are still as it wrote them (``manifest``, read just before),
    and write the folder's manifest."""
    for name in written:
        os.replace(staging / name, target / name)
    for stale in sorted(manifest.get(command, set()) - set(written)):  # this command's own files of an earlier run
        if (target / stale).is_file() and not (target / stale).is_symlink():
            (target / stale).unlink()
    manifest[command] = set(written)
    for other, names in manifest.items():
        if other != command:
            manifest[other] = {n for n in names if n not in written and (target / n).exists()}
    _write_manifest(target, manifest, written)


def _write_manifest(folder: Path, manifest: dict[str, set[str]], written: Iterable[str]) -> None:
    """Write the folder's manifest: each command's files (``manifest``, the unchanged ones), stamped as they are
    now where just ``written``, else as they were when written."""
    commands = {c: sorted(files) for c, files in sorted(manifest.items()) if files}
    kept = _read(folder).get("stamps")
    kept = kept if isinstance(kept, dict) else {}
    fresh = set(written)
    stamps = {n: _stamp(folder / n) if n in fresh or n not in kept else kept[n] for f in commands.values() for n in f}
    with atomic_file(folder / MANIFEST) as tmp:
        tmp.write_text(json.dumps({"written_by": "perfmodel", "commands": commands, "stamps": stamps}, indent=1))


def check_output_file(target: str | os.PathLike, *, command: str, replace: bool = False) -> None:
    """Refuse an existing ``target`` that ``command`` did not write (its folder's manifest says), unless ``replace``.

    >>> import tempfile, pathlib
    >>> mine = pathlib.Path(tempfile.mkdtemp()) / "mine.csv"
    >>> _ = mine.write_text("precious")
    >>> check_output_file(mine, command="delay")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: ...mine.csv: exists, and perfmodel delay did not write it. Fix: ...
    """
    target = Path(target)
    check_not_in_package(target)  # (even with replace: a shipped file is no user's to replace)
    if target.parent.is_dir():
        _refuse_foreign_manifest(target.parent)  # (the file's record goes there)
    if replace or not (target.exists() or target.is_symlink()) or target.is_dir():  # (a folder: atomic_file's)
        return
    manifest = _manifest(target.parent)
    if target.name in manifest.get(_file_key(command), set()):
        return
    other = next((c for c, files in manifest.items() if target.name in files), None)
    whose = f" (perfmodel {other} did)" if other else ""
    if _changed(target.parent, _file_key(command), [target.name]):
        whose = f" as it is now (it has changed since perfmodel {command} wrote it)"
    raise InputError(
        str(target),
        f"exists, and perfmodel {command} did not write it{whose}",
        "choose another --out file, or add --replace to overwrite it",
    )


def _file_key(command: str) -> str:
    """A command's single files' entry in a manifest: apart from its output folders' (whose stale files it removes)."""
    return f"{command} --out FILE"


def record_output_file(target: str | os.PathLike, *, command: str) -> None:
    """Record in its folder's manifest that ``command`` wrote the file ``target`` (beside its other files)."""
    target = Path(target)
    with _locked(target.parent), interrupts_deferred():
        manifest = _manifest(target.parent)
        for names in manifest.values():
            names.discard(target.name)
        manifest.setdefault(_file_key(command), set()).add(target.name)
        _write_manifest(target.parent, manifest, [target.name])


def _discard(staging: Path | None) -> None:
    """Remove the staging folder (ours)."""
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
