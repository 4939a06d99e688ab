"""User presets: links and models registered by name, in one JSON file in the user's config folder.

The folder is ``$PERFMODEL_CONFIG_DIR`` when set, else ``platformdirs.user_config_dir("perfmodel")``
(``~/.config/perfmodel`` on Linux); the file is ``presets.json``::

    {"links": {"our-rdma": {"bandwidth_gb_s": 48.0, "latency_ms": 0.1, "per_block_ms": 0.0,
                            "efficiency": 1.0, "source": "perfmodel calibrate rdma.csv",
                            "saved_by": "perfmodel"}},
     "models": {"our-model": {"config": {...}, "source": "/path/config.json", "saved_by": "perfmodel"}}}

Written atomically (a failed write leaves the previous file); read on every lookup of a
name that is not a built-in preset, so a preset saved by the command line is seen at once.
Names ignore case and surrounding spaces. A user preset may not take a built-in preset's
name, nor a name already saved (unless asked to replace it). Entries that perfmodel saved
carry ``"saved_by": "perfmodel"``; only those can be removed by perfmodel.

This module knows the file's shape (an object of kinds, each an object of entries by name);
the fields of each kind's entries are checked where the kind lives (:mod:`perfmodel.network.links`,
:mod:`perfmodel.model.models`).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import InputError, warn
from ..ground.files import atomic_file

T = TypeVar("T")

#: The kinds of user preset the file holds, and the word for one of each.
KINDS = {
    "links": "link",
    "models": "model",
    "clusters": "cluster",
    "prefills": "prefill profile",
    "connectors": "connector",
}
#: Kinds of one namespace: a link and a cluster go where one another go, so a name is one or the other.
RIVALS = {"links": "clusters", "clusters": "links"}
#: The field that marks an entry perfmodel saved itself (only such entries can be removed by perfmodel).
SAVED_BY = "saved_by"
_REPAIR = "repair it, or move it away to start afresh"


def config_dir() -> Path:
    """The folder holding ``presets.json``.

    >>> import os
    >>> previous = os.environ.get("PERFMODEL_CONFIG_DIR")
    >>> os.environ["PERFMODEL_CONFIG_DIR"] = "/tmp/pm-config"; config_dir()
    PosixPath('/tmp/pm-config')
    >>> _ = os.environ.pop("PERFMODEL_CONFIG_DIR") if previous is None else os.environ.update(
    ...     PERFMODEL_CONFIG_DIR=previous)
    """
    explicit = os.environ.get("PERFMODEL_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("perfmodel", appauthor=False))


def presets_path() -> Path:
    """The user presets file (it may not exist yet)."""
    return config_dir() / "presets.json"


def key_of(name: object) -> str:
    """A preset name as every lookup compares it: without surrounding spaces, in lower case ("" if not text)."""
    return name.strip().lower() if isinstance(name, str) else ""


def json_type(value: object) -> str:
    """What a JSON value is, in the words of the file (``a list``, ``the text 'x'``, ``null``, ``true``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, (int, float)):
        return "a number"
    return {"list": "a list", "dict": "an object"}.get(type(value).__name__, f"a {type(value).__name__}")


class _Repeated(dict):
    """A JSON object in which a key appears twice (JSON keeps only the last): ``repeated`` is that key. Inside an
    entry it is that entry's error only; in the file's own object or a kind's section, the file's."""

    repeated = ""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen and not isinstance(seen, _Repeated):
            seen = _Repeated(seen)
            seen.repeated = key
        seen[key] = value
    return seen


def _repeated_inside(value: Any) -> str:
    """The first key given twice in one object anywhere inside ``value`` ("" if none)."""
    if isinstance(value, _Repeated):
        return value.repeated
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((key for key in map(_repeated_inside, items) if key), "")


def _twice(path: Path, key: str) -> InputError:
    return InputError(
        str(path), f"the key {key!r} appears twice in one object (JSON keeps only the last)", "keep one of them"
    )


def _read(path: Path) -> dict[str, Any]:
    """The presets file's object (empty when there is none); anything else is an error naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_repeats)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise InputError(str(path), f"the user presets file cannot be read ({error})", _REPAIR) from None
    if not isinstance(data, dict):
        raise InputError(
            str(path),
            f"the user presets file holds {json_type(data)}, not an object of {', '.join(map(repr, KINDS))}",
            _REPAIR,
        )
    if isinstance(data, _Repeated):
        raise _twice(path, data.repeated)
    for kind, section in data.items():
        if kind not in KINDS:
            close = difflib.get_close_matches(kind, list(KINDS), n=1, cutoff=0.6)
            raise InputError(
                str(path),
                f"holds {kind!r}, which is no kind of preset ({', '.join(KINDS)})",
                f"rename it {close[0]!r}" if close else "remove it, or move the file away",
            )
        if not isinstance(section, dict):
            raise InputError(str(path), f"{kind!r} is {json_type(section)}, not an object of presets by name", _REPAIR)
        if isinstance(section, _Repeated):
            raise _twice(path, section.repeated)
    return data


def entry_error(name: str, kind: str, problem: str) -> InputError:
    """The error of one malformed user preset: the file, the entry, the fix."""
    return InputError(f"{presets_path()}: {kind} {name!r}", problem, "repair or remove that entry in the file")


def load(kind: str) -> tuple[dict[str, dict[str, Any]], dict[str, InputError]]:
    """The user presets of one kind (``"links"``, ``"models"`` or ``"clusters"``) by name (as :func:`key_of`
    makes it), and the error of each entry that is not an object of fields or whose name a user preset of its
    rival kind (:data:`RIVALS`) also has (reported when that name is used: the others still work). A file that
    cannot be read as presets raises its error."""
    data = _read(presets_path())
    section = data.get(kind, {})
    rival = RIVALS.get(kind, "")
    rivals = {key_of(n) for n in data.get(rival, {})}
    good: dict[str, dict[str, Any]] = {}
    bad: dict[str, InputError] = {}
    spelled: dict[str, str] = {}
    for name, entry in section.items():
        key = key_of(name)
        if key in spelled:
            bad[key] = entry_error(
                name,
                kind,
                f"{spelled[key]!r} and {name!r} name the same preset (names ignore case and surrounding spaces)",
            )
            good.pop(key, None)
            continue
        spelled[key] = name
        if not key:
            bad[key] = entry_error(name, kind, "has an empty name")
        elif key in rivals:
            bad[key] = entry_error(
                name,
                kind,
                f"is also the name of a user {KINDS[rival]} in the file (a name is one "
                "link or one cluster, which go where one another go): rename or remove one",
            )
        elif _repeated_inside(entry):
            bad[key] = entry_error(
                name,
                kind,
                f"the key {_repeated_inside(entry)!r} appears twice in one object of "
                "the entry (JSON keeps only the last; keep one of them)",
            )
        elif isinstance(entry, dict):
            good[key] = entry
        else:
            bad[key] = entry_error(name, kind, f"is {json_type(entry)}, not an object of fields")
    return good, bad


def parse_each(kind: str, parse: Callable[[str, dict[str, Any]], T]) -> tuple[dict[str, T], dict[str, InputError]]:
    """:func:`load`, then each well-shaped entry made into what it describes by ``parse(name, entry)``: an entry
    it cannot make (an error of ``parse`` or of what it calls, whatever its type) goes with the others that cannot
    be used, named with the file and the entry, and never stops the rest. A file that cannot be read as presets
    raises its error (then no entry can be trusted: which of them the damage touches is unknown)."""
    entries, bad = load(kind)
    made: dict[str, T] = {}
    for name, entry in entries.items():
        try:
            made[name] = parse(name, entry)
        except InputError as error:
            bad[name] = error
        except (ValueError, TypeError, ArithmeticError, LookupError) as error:  # (a value no check foresaw)
            bad[name] = entry_error(name, kind, f"cannot be used ({str(error).strip() or type(error).__name__})")
    return made, bad


def unknown_fields(name: str, kind: str, entry: dict[str, Any], known: set[str]) -> None:
    """Refuse an entry field no perfmodel reads (a misspelt one would otherwise be silently dropped)."""
    for field in entry:
        if field not in known:
            close = difflib.get_close_matches(field, sorted(known), n=1, cutoff=0.6)
            raise entry_error(
                name, kind, f"has an unknown field {field!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
            )


def text_field(name: str, kind: str, entry: dict[str, Any], field: str) -> str:
    """An optional text field of an entry ("" when absent)."""
    value = entry.get(field, "")
    if not isinstance(value, str):
        raise entry_error(name, kind, f"{field!r} is {json_type(value)}, not text")
    return value


def warn_unusable(bad: dict[str, InputError]) -> None:
    """One warning per user preset that cannot be used (the listings show the others)."""
    for error in bad.values():
        warn(str(error))


def check_free(kind: str, name: str, *, builtin: set[str], replace: bool = False) -> str:
    """The key ``name`` is saved under; refuses an empty or built-in name, a name of a user preset of the rival
    kind (:data:`RIVALS`), a taken one (unless ``replace``), and a presets file it could not save to (which it
    never overwrites)."""
    key = key_of(name)
    if not key or key in builtin:
        raise InputError(
            f"{KINDS[kind]} name", f"{name!r} is {'empty' if not key else 'a built-in preset'}", "choose another name"
        )
    data = _read(presets_path())
    other = RIVALS.get(kind, "")
    clash = [n for n in data.get(other, {}) if key_of(n) == key]
    if clash:
        raise InputError(
            f"{KINDS[kind]} name",
            f"a user {KINDS[other]} {clash[0]!r} exists already in "
            f"{presets_path()} (a name is one link or one cluster, which go where one another go)",
            f"choose another name, or remove that {KINDS[other]} first (perfmodel presets remove "
            f"{clash[0]} --kind {KINDS[other]})",
        )
    section = data.get(kind, {})
    taken = [n for n in section if key_of(n) == key]
    if taken and not replace:
        entry = section[taken[0]]
        source = entry.get("source") if isinstance(entry, dict) else None
        raise InputError(
            f"{KINDS[kind]} name",
            f"a user {KINDS[kind]} {taken[0]!r} exists already in "
            f"{presets_path()}" + (f" (from {source})" if isinstance(source, str) and source else ""),
            "choose another name, or replace it explicitly (replace=True; on the command line --replace)",
        )
    return key


def save(kind: str, name: str, entry: dict[str, Any], *, builtin: set[str], replace: bool = False) -> Path:
    """Add one user preset (atomically), marked as saved by perfmodel; refuses what :func:`check_free` refuses."""
    key = check_free(kind, name, builtin=builtin, replace=replace)
    path = presets_path()
    data = _read(path)
    section = data.setdefault(kind, {})
    for spelled in [n for n in section if key_of(n) == key]:
        del section[spelled]
    section[key] = {**entry, SAVED_BY: "perfmodel"}
    _write(path, data)
    return path


def remove(kind: str, name: str) -> Path:
    """Remove one user preset that perfmodel saved (atomically); returns the file. An entry perfmodel did not
    save (no ``saved_by``), an unknown name and a file it cannot read are refused, and nothing is written."""
    key, path = key_of(name), presets_path()
    data = _read(path)
    section = data.get(kind, {})
    spelled = [n for n in section if key_of(n) == key]
    if not spelled:
        close = difflib.get_close_matches(key, [key_of(n) for n in section], n=3, cutoff=0.5)
        raise InputError(
            f"{KINDS[kind]} name",
            f"no user {KINDS[kind]} {name!r} in {path}",
            (f"did you mean {', '.join(close)}? " if close else "") + "perfmodel presets list shows the user presets",
        )
    entry = section[spelled[0]]
    if len(spelled) > 1 or not (isinstance(entry, dict) and entry.get(SAVED_BY) == "perfmodel"):
        raise InputError(
            f"{path}: {kind} {spelled[0]!r}",
            f"perfmodel did not save it (it has no '{SAVED_BY}': 'perfmodel'), so it leaves it alone",
            "remove it from the file by hand",
        )
    del section[spelled[0]]
    _write(path, data)
    return path


def _write(path: Path, data: dict[str, Any]) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
