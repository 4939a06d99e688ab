"""Every use of a private API of another library, each with its public fallback.

numba: where it keeps perfmodel's compiled kernels (below), and the option that compiles a helper
without reference counting (:func:`no_reference_counting`).

numba, the cache: where it keeps perfmodel's compiled kernels (a per-user cache folder, never the package).

numba's default puts ``cache=True`` files in ``__pycache__`` beside the source, i.e.
inside ``site-packages/perfmodel``: files pip did not install and will not remove, which
then shadow a later (editable) install. perfmodel's kernels are cached instead in
``$PERFMODEL_CACHE_DIR`` or the user cache folder (``platformdirs.user_cache_dir``),
one subfolder per perfmodel version and source folder. ``NUMBA_CACHE_DIR``, when set,
wins as usual. Other packages' numba functions are not affected: the locator answers
only for files of this package.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numba

try:  # private: numba.core.caching (its locator classes); without it, numba's own cache folders
    from numba.core import caching, config
except ImportError:  # pragma: no cover (a numba that moved them)
    caching = config = None

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


@functools.lru_cache(maxsize=None)
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("perfmodel")
    except PackageNotFoundError:  # (a source tree on sys.path, not installed)
        return "source"


_Base = (caching._SourceFileBackedLocatorMixin, caching._CacheLocator) if caching is not None else (object,)


class _PerfmodelCacheLocator(*_Base):
    """numba cache locator for this package's source files only."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        subpath = self.get_suitable_cache_subpath(py_file)
        self._cache_path = str(cache_dir() / f"{_version()}-numba{numba.__version__}" / subpath)

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        if config.CACHE_DIR or Path(py_file).resolve().parent != _PACKAGE:
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


def no_reference_counting() -> dict[str, bool]:
    """The ``numba.njit`` options that compile a function without numba's reference counting:
    ``{"_nrt": False}``, a private option of numba's CPU target (``numba.core.cpu.CPUTargetOptions``),
    where this numba has it; else none (the public fallback: reference counted, the same results,
    ~50-100 ns more per call of a helper that takes arrays).

    >>> no_reference_counting() in ({"_nrt": False}, {})
    True
    """
    try:  # private: numba.core.cpu
        from numba.core.cpu import CPUTargetOptions
    except ImportError:  # pragma: no cover (a numba that moved it)
        return {}
    return {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}
