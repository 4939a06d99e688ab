"""Every use of a private API of another library, each with its public fallback.

numba: where it keeps perfmodel's compiled kernels (a per-user cache folder, never the package),
whether a kernel is compiled or cached yet (the first run says it compiles), the cache's upkeep, and
the option that compiles a helper without reference counting (:func:`no_reference_counting`).

numba's default puts ``cache=True`` files in ``__pycache__`` beside the source, i.e.
inside ``site-packages/perfmodel``: files pip did not install and will not remove, which
then shadow a later (editable) install. perfmodel's kernels are cached instead in
``$PERFMODEL_CACHE_DIR`` or the user cache folder (``platformdirs.user_cache_dir``),
one subfolder per perfmodel and numba version, and in it one per install location (source folder).
Entries other runs cannot use any more are pruned when a kernel is first compiled (:func:`prune_cache`). ``NUMBA_CACHE_DIR``, when set,
wins as usual. Other packages' numba functions are not affected: the locator answers
only for files of this package.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import numba

try:  # private: numba.core.caching (its locator classes); without it, numba's own cache folders
    from numba.core import caching, config
except ImportError:  # pragma: no cover (a numba that moved them)
    caching = config = None

try:  # private: numba.core.registry (the class of numba.njit's functions; see CompiledOnly)
    from numba.core.registry import CPUDispatcher as _Dispatcher
except ImportError:  # pragma: no cover (a numba that moved it)
    _Dispatcher = object

_PACKAGE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """The folder perfmodel's compiled kernels are cached in.

    >>> cache_dir().name
    'numba'
    """
    explicit = os.environ.get("PERFMODEL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser() / "numba"
    import platformdirs

    return Path(platformdirs.user_cache_dir("perfmodel", appauthor=False)) / "numba"


def cache_target() -> Path:
    """The folder numba caches perfmodel's kernels in: ``NUMBA_CACHE_DIR`` when set (as numba reads it: made
    absolute, ``~`` not expanded), else this install's folder in :func:`cache_dir`."""
    numba_dir = config.CACHE_DIR if config is not None else ""
    return Path(os.path.abspath(numba_dir)) if numba_dir else _mine()


def cache_dir_unusable() -> str | None:
    """Why compiled kernels cannot be cached where numba would put them (:func:`cache_target`), as far as can be
    told without creating anything: the nearest part of that path that exists is no folder (a file, a dangling
    symlink) or a folder one may not write. None where nothing tells so.

    >>> cache_dir_unusable() is None or "folder" in cache_dir_unusable()
    True
    """
    part = cache_target()
    while not os.path.lexists(part) and part.parent != part:
        part = part.parent
    if not part.is_dir():
        return f"{part} is not a folder"
    if not os.access(part, os.W_OK | os.X_OK):
        return f"{part} is a folder one may not write"
    return None


def cache_fix() -> str:
    """How to make the kernels' cache folder usable: the variable that names it."""
    if config is not None and config.CACHE_DIR:
        return "set NUMBA_CACHE_DIR to a folder you may write, or unset it"
    if os.environ.get("PERFMODEL_CACHE_DIR"):
        return "set PERFMODEL_CACHE_DIR to a folder you may write"
    return "set PERFMODEL_CACHE_DIR to a folder you may write (the user cache folder is not usable)"


def _cannot_write(folder: Path) -> str | None:
    """Why ``folder`` cannot hold numba's cache files, tried as numba tries it (the folder made, a temporary file
    written in it); None where it can."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as error:
        return f"{folder} cannot be written ({error.strerror or type(error).__name__})"
    return None


def cache_problem() -> str | None:
    """Why compiled kernels cannot be cached where numba would put them, found as numba finds it at its first
    compile (:func:`cache_dir_unusable`, then the folder made and a file written in it); None where they can.

    >>> cache_problem() is None or "folder" in cache_problem()
    True
    """
    return cache_dir_unusable() or _cannot_write(cache_target())


@functools.cache
def cache_kernels() -> bool:
    """Whether perfmodel's kernels are cached on disk (numba's ``cache=``), decided once, when the kernels are first
    imported, as numba would find out at their first compile (:func:`cache_dir_unusable`, then the folder made and
    written): not where that fails, where numba would cache them inside the package's own ``__pycache__``
    instead; one warning then says why and how to fix it, and the kernels compile in each process. Always with
    ``NUMBA_DISABLE_JIT=1`` (nothing is compiled)."""
    if config is None or config.DISABLE_JIT:
        return True
    problem = cache_problem()
    if problem is None:
        return True
    from .errors import warn

    warn(f"perfmodel cannot cache its compiled kernels: {problem}, so they compile again in each process. Fix: "
         f"{cache_fix()}")  # fmt: skip
    return False


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("perfmodel")
    except PackageNotFoundError:  # (a source tree on sys.path, not installed)
        return "source"


_Base = (caching._SourceFileBackedLocatorMixin, caching._CacheLocator) if caching is not None else (object,)


def source_stamp(package: Path) -> str:
    """A short hash of the Python files under ``package`` (each one's path, size and modification time).

    numba checks a cached kernel against its own source file only, not against the modules whose jitted
    helpers it compiled in: after an edit of a helper's module alone (an editable install pulled, a file
    patched) it would load the old machine code. The stamp is part of the cache's folder, so any change of
    the package's sources compiles afresh (and the old folder is pruned as another version's).

    >>> source_stamp(_PACKAGE) == source_stamp(_PACKAGE)
    True
    """
    import hashlib

    digest = hashlib.sha1()
    for path in sorted(package.rglob("*.py")):
        st = path.stat()
        digest.update(f"{path.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


@functools.cache
def _version_folder() -> str:
    """The cache's subfolder of this perfmodel and numba version and of these sources (:func:`source_stamp`)."""
    return f"{_version()}+{source_stamp(_PACKAGE)}-numba{numba.__version__}"


def _install_folder() -> str:
    """The cache's subfolder of this install location (numba's own naming: the package's name and a hash of its
    folder's path).

    >>> _INSTALL_FOLDER.fullmatch(_install_folder()) is not None
    True
    """
    import hashlib

    return f"perfmodel_{hashlib.sha1(str(_PACKAGE).encode()).hexdigest()}"


class _PerfmodelCacheLocator(*_Base):  # type: ignore[misc]  # (numba's private classes, or object: chosen at import)
    """numba cache locator for this package's source files only."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = str(cache_dir() / _version_folder() / _install_folder())

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        if config.CACHE_DIR or _PACKAGE not in Path(py_file).resolve().parents:
            return None  # NUMBA_CACHE_DIR set by the user, or not our code: numba's own locators decide
        return super().from_function(py_func, py_file)


def install_cache_locator() -> bool:
    """Put the locator first in numba's list (once; idempotent). Whether it is installed: False where
    numba's private classes moved, and numba's default (``__pycache__`` beside the source) applies."""
    impl = caching and (getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None))  # renamed in 0.62
    classes = getattr(impl, "_locator_classes", None)
    if classes is None:
        return False
    if _PerfmodelCacheLocator not in classes:
        classes.insert(0, _PerfmodelCacheLocator)
    return True


def _cpu_options(options: dict[str, bool]) -> dict[str, bool]:
    """``options`` where numba's CPU target (``numba.core.cpu.CPUTargetOptions``, private) has every one of
    them; else none (each caller's public fallback)."""
    try:  # private: numba.core.cpu
        from numba.core.cpu import CPUTargetOptions
    except ImportError:  # pragma: no cover (a numba that moved it)
        return {}
    return options if all(hasattr(CPUTargetOptions, name) for name in options) else {}


def no_reference_counting() -> dict[str, bool]:
    """The ``numba.njit`` options that compile a function without numba's reference counting:
    ``{"_nrt": False}``, a private option of numba's CPU target (``numba.core.cpu.CPUTargetOptions``),
    where this numba has it; else none (the public fallback: reference counted, the same results,
    ~50-100 ns more per call of a helper that takes arrays).

    >>> no_reference_counting() in ({"_nrt": False}, {})
    True
    """
    return _cpu_options({"_nrt": False})


def inlined_by_llvm() -> dict[str, bool]:
    """The ``numba.njit`` options that have LLVM inline a function wherever compiled code calls it:
    ``{"forceinline": True}`` (numba's CPU target, ``numba.core.cpu.CPUTargetOptions``), where this numba has it;
    else none (the same code, called: each call then copies its arguments, one machine word at a time). Unlike
    numba's own ``inline="always"``, numba types the function once, not again at each call site.

    >>> inlined_by_llvm() in ({"forceinline": True}, {})
    True
    """
    return _cpu_options({"forceinline": True})


def no_wrappers() -> dict[str, bool]:
    """The ``numba.njit`` options that compile a function without the wrappers that let Python call it
    (unboxing its arguments from Python objects, and a C callback): private options of numba's CPU target,
    where this numba has them; else none (the public fallback: the same code, a slower first compile). A
    function so compiled must go through :func:`compiled_only`: entered from Python it would crash.

    >>> no_wrappers() in ({"no_cpython_wrapper": True, "no_cfunc_wrapper": True}, {})
    True
    """
    if _Dispatcher is object:  # pragma: no cover (no class to refuse Python's calls with)
        return {}
    return _cpu_options({"no_cpython_wrapper": True, "no_cfunc_wrapper": True})


class CompiledOnly(_Dispatcher):  # (numba's private class, or object)
    """A numba function compiled without its Python wrappers (:func:`no_wrappers`): compiled code calls it as
    any other; a call from Python raises, in one line (instead of crashing)."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"{self.py_func.__qualname__} is called by perfmodel's compiled kernels only, not from Python "
            "(compiled without the wrappers that would let Python call it)"
        )


def compiled_only(dispatcher: Any) -> Any:
    """``dispatcher`` (a numba function compiled with :func:`no_wrappers`' options) as a :class:`CompiledOnly`;
    anything else (a plain function: ``NUMBA_DISABLE_JIT=1``) as it is.

    >>> compiled_only(len) is len
    True
    """
    if _Dispatcher is not object and type(dispatcher) is _Dispatcher:
        dispatcher.__class__ = CompiledOnly
    return dispatcher


# --- the first compile and the cache's upkeep ---------------------------------------------------------

_SOURCE_NOTE = "perfmodel-source.txt"  # in each install location's folder: the source folder it was compiled from
#: perfmodel's folders, named as :func:`_version_folder` and :func:`_install_folder` name them (perfmodel's version or
#: ``source``, the sources' stamp, numba's version; a hash of the install's path): nothing else in the cache is touched
_VERSION_FOLDER = re.compile(r"(?:source|\d[\w.!+]*?)(?:\+[0-9a-f]{12})?-numba\d[\w.+-]*")  # (0.1.0's: unstamped)
_INSTALL_FOLDER = re.compile(r"perfmodel_[0-9a-f]{40}")
#: numba's files (an index, its data), named as numba names them: one of perfmodel's source files and a function, the
#: line, the Python (``handoff.handoff_serial-42.py311.nbi``, ``....py311.0.nbc``); with the source note, all the
#: upkeep removes
_NUMBA_FILE = re.compile(
    rf"(?:{'|'.join(sorted({re.escape(p.stem) for p in _PACKAGE.rglob('*.py')}))})\..+-\d+\.py\d+[a-z]*\.(?:nbi|\d+\.nbc)"
)
_NOT_OURS = "not perfmodel's: holds only files it did not write"  # a folder's state in cache_entries
_UNMARKED_DAYS = 90  # an entry without a source note (older perfmodel) is pruned when untouched this long
_OTHER_VERSION_DAYS = 7  # this install's folder of another perfmodel or numba version (an upgrade, or a second
#                           virtualenv on one editable source: both keep their entries while both are used)
_OTHER_PYTHON_DAYS = 30  # files of another Python in this install's folder: pruned when untouched this long
_noticed: set[str] = set()


def is_cold(dispatcher: object) -> bool:
    """Whether ``dispatcher`` (a numba function with ``cache=True``) has nothing compiled in this process and
    no cache index on disk: its first call compiles. False where that cannot be told.

    >>> import numba
    >>> is_cold(numba.njit(lambda x: x))  # not cached at all: nothing to tell
    False
    """
    if getattr(dispatcher, "overloads", None):
        return False
    index = _index_path(dispatcher)
    return index is not None and not os.path.exists(index)


def _index_path(dispatcher: object) -> str | None:
    """Where numba keeps the cache index of ``dispatcher``; None where that cannot be told."""
    index = getattr(getattr(getattr(dispatcher, "_cache", None), "_cache_file", None), "_index_path", None)  # private
    return index if isinstance(index, str) else None


def uncompiled(dispatcher: object) -> bool:
    """Whether nothing of ``dispatcher`` (a numba function) is compiled in this process yet; False for a plain
    function (``NUMBA_DISABLE_JIT=1`` leaves kernels so: there is nothing to compile).

    >>> uncompiled(lambda x: x)
    False
    """
    return not getattr(dispatcher, "overloads", True)


def notice_first_compile(kernel: str, dispatcher: object, seconds: float, stream: TextIO | None = None) -> bool:
    """Before the first call of a kernel whose cache is cold: on a terminal (``stream``, default standard
    error; nothing when piped), say once per process and kernel that it compiles, once, and about how long
    that takes; then make the folder numba compiles into, if it is this install's, and prune the cache's stale
    entries (:func:`prune_cache`, which writes the folder's source note). Whether the cache was cold.

    >>> notice_first_compile("example", object(), 1.0)
    False
    """
    if kernel in _noticed or not is_cold(dispatcher):
        return False
    _noticed.add(kernel)
    stream = sys.stderr if stream is None else stream
    try:
        if stream.isatty():
            print(
                f"perfmodel: compiling kernels, once: about {seconds:.0f} s for the {kernel} (cached in {cache_dir()})",
                file=stream,
                flush=True,
            )
    except (AttributeError, ValueError, OSError):  # a closed or unusual stream: say nothing
        pass
    with contextlib.suppress(OSError):  # upkeep never stops a computation
        mine = _mine()
        if Path(str(_index_path(dispatcher))).parent == mine:  # numba compiles into this install's folder: made now
            mine.mkdir(parents=True, exist_ok=True)  # (numba would at its save), so that the prune writes its note
        prune_cache()
    return True


def _source_of(folder: Path) -> Path | None:
    note = folder / _SOURCE_NOTE
    if not _is_owned(note):
        return None
    try:
        return Path(note.read_text().splitlines()[0])
    except (OSError, IndexError):
        return None


def _is_owned(path: Path) -> bool:
    """Whether ``path`` (in an install location's folder) is a file numba or perfmodel writes there: a regular
    file (not a symlink) named as numba names its index (``*.nbi``) and data (``*.nbc``) files, or perfmodel's
    source note."""
    named = _NUMBA_FILE.fullmatch(path.name) or path.name == _SOURCE_NOTE
    return bool(named) and not path.is_symlink() and path.is_file()


def _owned(folder: Path) -> list[Path]:
    """The files numba and perfmodel wrote in ``folder`` (directly in it: numba writes no subfolders)."""
    try:
        return sorted(p for p in folder.iterdir() if _is_owned(p))
    except OSError:
        return []


def foreign_files(folder: Path) -> list[Path]:
    """What ``folder`` (an install location's folder in the cache) holds that neither numba nor perfmodel
    wrote: other files, subfolders, symlinks. The upkeep leaves them, and so the folder, where they are.

    >>> foreign_files(Path("/no/such/folder"))
    []
    """
    try:
        return sorted(p for p in folder.iterdir() if not _is_owned(p))
    except OSError:
        return []


def _age_days(path: Path) -> float:
    """Days since ``path`` (a file, or the newest of the files numba and perfmodel wrote in a folder) was
    last written; a folder without them: the folder's own time."""
    times = [f.lstat().st_mtime for f in _owned(path)] if path.is_dir() else []
    return (time.time() - max(times, default=path.lstat().st_mtime)) / 86400.0


def cache_entries() -> list[tuple[Path, int, str]]:
    """Each install location's folder in the cache: (folder, bytes, state), the state ``"current"`` (this
    install, this version), ``"stale"`` (what :func:`prune_cache` removes, with why), ``"kept"``, or, for a
    folder holding only files perfmodel did not write, ``"not perfmodel's"`` (left alone). The bytes are
    those of numba's and perfmodel's files only (:func:`foreign_files` lists the others). Symlinks are not
    followed.

    >>> [state for _, _, state in cache_entries() if state == "current"] in ([], ["current"])
    True
    """
    root, here = cache_dir(), _install_folder()
    entries: list[tuple[Path, int, str]] = []
    if not root.is_dir():
        return entries
    for version in sorted(
        p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and _VERSION_FOLDER.fullmatch(p.name)
    ):
        for folder in sorted(
            p for p in version.iterdir() if p.is_dir() and not p.is_symlink() and _INSTALL_FOLDER.fullmatch(p.name)
        ):
            source, owned = _source_of(folder), _owned(folder)
            if not owned and foreign_files(folder):
                state = _NOT_OURS
            elif version.name == _version_folder() and folder.name == here:
                state = "current"
            elif folder.name == here and _age_days(folder) > _OTHER_VERSION_DAYS:
                state = f"stale: this install location, another perfmodel or numba version, {_OTHER_VERSION_DAYS}+ days"
            elif source is not None and not (source / "__init__.py").is_file():
                state = f"stale: {source} is gone"
            elif source is None and _age_days(folder) > _UNMARKED_DAYS:
                state = f"stale: unused for more than {_UNMARKED_DAYS} days"
            else:
                state = "kept"
            entries.append((folder, sum(f.lstat().st_size for f in owned), state))
    return entries


class CacheSweep(NamedTuple):
    """What :func:`prune_cache` or :func:`clear_cache` did: the install locations' folders whose files it
    removed, the bytes of the files removed, and the folders it kept because they hold files perfmodel did
    not write (see :func:`foreign_files`; they keep them) or files of its own it could not remove."""

    removed: list[Path]
    freed: int
    kept: list[Path]


def _sweep(entries: list[Path], others: list[Path]) -> CacheSweep:
    """Remove the files numba and perfmodel wrote in ``entries`` (install locations' folders), then each of
    these folders and of the version folders holding them that is empty. A folder holding anything else stays
    (in :attr:`CacheSweep.kept`; a version folder only when what keeps it is not one of ``others``, the cache's
    entries, which answer for themselves or are in use). Never follows a symlink: it removes regular files and
    empty folders only."""
    removed, freed, kept = [], 0, []
    for folder in entries:
        gone = 0
        for file in _owned(folder):
            with contextlib.suppress(OSError):
                size = file.lstat().st_size
                file.unlink()
                freed, gone = freed + size, gone + 1
        try:
            folder.rmdir()
        except OSError:
            if folder.is_dir():
                kept.append(folder)
            if not gone:
                continue  # (nothing of perfmodel's removed from it: none in it, or none it could remove)
        removed.append(folder)
    listed, answered = set(others), set(kept)
    for version in sorted({f.parent for f in entries}):
        try:
            version.rmdir()
        except OSError:
            rest = list(version.iterdir()) if version.is_dir() else []
            if any(p not in listed for p in rest) and all(p in answered for p in rest if p in listed):
                kept.append(version)  # (only what perfmodel did not write keeps it: no entry still in use)
    return CacheSweep(removed, freed, kept)


def _mine() -> Path:
    """This install's folder in the cache (numba's, once it compiled here: see :class:`_PerfmodelCacheLocator`)."""
    return cache_dir() / _version_folder() / _install_folder()


def prune_cache() -> CacheSweep:
    """Remove the cache's stale entries (see :func:`cache_entries`), and in this install's folder the
    files of other Pythons untouched for 30 days; write this install's source note, where its folder exists
    (a prune creates no folder). Only the files numba and perfmodel wrote go, and a folder once it is empty: one
    holding anything else stays (:class:`CacheSweep`).

    >>> isinstance(prune_cache(), CacheSweep)  # doctest: +SKIP
    True
    """
    if config is not None and config.CACHE_DIR:
        return CacheSweep([], 0, [])  # NUMBA_CACHE_DIR: numba's cache, not perfmodel's
    entries = cache_entries()
    for folder, _, state in entries:
        if state == "current":
            tag = f".py{sys.version_info[0]}{sys.version_info[1]}."
            for file in _owned(folder):
                if file.name != _SOURCE_NOTE and tag not in file.name and _age_days(file) > _OTHER_PYTHON_DAYS:
                    file.unlink(missing_ok=True)
    stale = [folder for folder, _, state in entries if state.startswith("stale")]
    swept = _sweep(stale, [folder for folder, _, _ in entries])
    mine = _mine()
    note = mine / _SOURCE_NOTE
    if mine.is_dir() and not note.is_symlink() and (note.is_file() or not note.exists()):  # (never through a link)
        with contextlib.suppress(OSError):  # (a read-only cache: its entries stay as they are)
            note.write_text(f"{_PACKAGE}\n")
    return swept


def clear_cache() -> CacheSweep:
    """Remove every compiled kernel perfmodel cached (all versions and install locations), and the folders
    that then are empty; one holding files perfmodel did not write stays, with them (:class:`CacheSweep`).
    The next run compiles again.

    >>> clear_cache().freed >= 0  # doctest: +SKIP
    True
    """
    root = cache_dir()
    entries = [folder for folder, _, _ in cache_entries()]
    swept = _sweep(entries, entries)
    if root.is_dir():  # version folders holding no install location's folder (kept ones are reported by _sweep)
        for version in sorted(root.iterdir()):
            if version.is_dir() and not version.is_symlink() and _VERSION_FOLDER.fullmatch(version.name):
                if version in {f.parent for f in entries}:
                    continue
                try:
                    version.rmdir()
                except OSError:
                    swept.kept.append(version)
    return swept
