"""Where numba keeps perfmodel's compiled kernels: a per-user cache folder, never the package.

numba's default puts ``cache=True`` files in ``__pycache__`` beside the source, i.e.
inside ``site-packages/perfmodel``: files pip did not install and will not remove, which
then shadow a later (editable) install. perfmodel's kernels are cached instead in
``$PERFMODEL_CACHE_DIR`` or the user cache folder (``platformdirs.user_cache_dir``),
one subfolder per perfmodel version and source folder. ``NUMBA_CACHE_DIR``, when set,
wins as usual. Other packages' numba functions are not affected: the locator answers
only for files of this package.
"""

from __future__ import annotations

import os
from pathlib import Path

import numba
from numba.core import caching, config

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


class _PerfmodelCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba cache locator for this package's source files only."""

    def __init__(self, py_func, py_file):
        from . import __version__

        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        subpath = self.get_suitable_cache_subpath(py_file)
        self._cache_path = str(cache_dir() / f"{__version__}-numba{numba.__version__}" / subpath)

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        if config.CACHE_DIR or Path(py_file).resolve().parent != _PACKAGE:
            return None  # NUMBA_CACHE_DIR set by the user, or not our code: numba's own locators decide
        return super().from_function(py_func, py_file)


def install() -> None:
    """Put the locator first in numba's list (once); idempotent."""
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.62
    classes = impl._locator_classes
    if _PerfmodelCacheLocator not in classes:
        classes.insert(0, _PerfmodelCacheLocator)
