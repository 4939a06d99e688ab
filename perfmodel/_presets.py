"""User presets: links and models registered by name, in one JSON file in the user's config folder.

The folder is ``$PERFMODEL_CONFIG_DIR`` when set, else ``platformdirs.user_config_dir("perfmodel")``
(``~/.config/perfmodel`` on Linux); the file is ``presets.json``::

    {"links": {"our-rdma": {"bandwidth_gb_s": 48.0, "latency_ms": 0.1, "per_block_ms": 0.0,
                            "efficiency": 1.0, "source": "perfmodel calibrate rdma.csv"}},
     "models": {"our-model": {"config": {...}, "source": "/path/config.json"}}}

Written atomically (a failed write leaves the previous file); read on every lookup of a
name that is not a built-in preset, so a preset saved by the command line is seen at once.
A user preset may not take a built-in preset's name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ._fs import atomic_file
from .errors import InputError


def config_dir() -> Path:
    """The folder holding ``presets.json``.

    >>> import os; os.environ["PERFMODEL_CONFIG_DIR"] = "/tmp/pm-config"; config_dir()
    PosixPath('/tmp/pm-config')
    """
    explicit = os.environ.get("PERFMODEL_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("perfmodel", appauthor=False))


def presets_path() -> Path:
    """The user presets file (it may not exist yet)."""
    return config_dir() / "presets.json"


def _read(path: Path) -> dict[str, Any]:
    """The presets file's object (empty when there is none); anything else is an error naming the file."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise InputError(str(path), f"the user presets file cannot be read ({error})",
                         "repair it, or move it away to start afresh") from None
    if not isinstance(data, dict):
        raise InputError(str(path), f"the user presets file holds a {type(data).__name__}, not an object of "
                         "'links', 'models' and 'clusters'", "repair it, or move it away to start afresh")
    return data


def load(kind: str) -> tuple[dict[str, dict[str, Any]], dict[str, InputError]]:
    """The user presets of one kind (``"links"``, ``"models"`` or ``"clusters"``) by name, and the error of each entry
    that is not an object of fields (reported when that name is used: the others still work)."""
    path = presets_path()
    section = _read(path).get(kind, {})
    if not isinstance(section, dict):
        raise InputError(f"{path}: {kind!r}", f"is a {type(section).__name__}, not an object of presets by name",
                         "repair it, or move the file away to start afresh")
    good: dict[str, dict[str, Any]] = {}
    bad: dict[str, InputError] = {}
    for name, entry in section.items():
        if isinstance(entry, dict):
            good[name] = entry
        else:
            bad[name] = entry_error(name, kind, f"is a {type(entry).__name__}, not an object of fields")
    return good, bad


def entry_error(name: str, kind: str, problem: str) -> InputError:
    """The error of one malformed user preset: the file, the entry, the fix."""
    return InputError(f"{presets_path()}: {kind} {name!r}", problem,
                      "repair or remove that entry (or save it again with perfmodel)")


def save(kind: str, name: str, entry: dict[str, Any], *, builtin: set[str]) -> Path:
    """Add or replace one user preset (atomically); refuses a built-in preset's name and a file it
    cannot read (which it never overwrites)."""
    key = name.strip().lower() if isinstance(name, str) else ""
    if not key or key in builtin:
        raise InputError(f"{kind[:-1]} name", f"{name!r} is {'empty' if not key else 'a built-in preset'}",
                         "choose another name")
    path = presets_path()
    data = _read(path)
    section = data.setdefault(kind, {})
    if not isinstance(section, dict):
        raise InputError(f"{path}: {kind!r}", f"is a {type(section).__name__}, not an object of presets by name",
                         "repair it, or move the file away to start afresh")
    section[key] = entry
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path
