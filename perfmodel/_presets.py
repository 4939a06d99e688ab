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


def load(kind: str) -> dict[str, dict[str, Any]]:
    """The user presets of one kind (``"links"`` or ``"models"``), by name; empty without a file."""
    path = presets_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise InputError(str(path), f"the user presets file cannot be read ({error})",
                         "repair it, or move it away to start afresh") from None
    section = data.get(kind, {}) if isinstance(data, dict) else {}
    return section if isinstance(section, dict) else {}


def save(kind: str, name: str, entry: dict[str, Any], *, builtin: set[str]) -> Path:
    """Add or replace one user preset (atomically); refuses a built-in preset's name."""
    key = name.strip().lower()
    if not key or key in builtin:
        raise InputError(f"{kind[:-1]} name", f"{name!r} is {'empty' if not key else 'a built-in preset'}",
                         "choose another name")
    path = presets_path()
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except ValueError as error:
        raise InputError(str(path), f"the user presets file cannot be read ({error})",
                         "repair it, or move it away to start afresh") from None
    data.setdefault(kind, {})[key] = entry
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path
