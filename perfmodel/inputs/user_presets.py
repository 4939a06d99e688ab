"""User presets: links and models registered by name, in one JSON file in the user's config folder.

The folder is ``$PERFMODEL_CONFIG_DIR`` when set, else ``platformdirs.user_config_dir("perfmodel")``
(``~/.config/perfmodel`` on Linux); the file is ``presets.json``::

    {"links": {"our-rdma": {"bandwidth_gb_s": 48.0, "latency_ms": 0.1, "per_block_ms": 0.0,
                            "efficiency": 1.0, "source": "perfmodel calibrate rdma.csv",
                            "saved_by": "perfmodel"}},
     "models": {"our-model": {"config": {...}, "source": "/path/config.json", "saved_by": "perfmodel"}}}

Written atomically (a failed write leaves the previous file); read on every lookup of a
name that is not a built-in preset, so a preset saved by the command line is seen at once (a lookup of a
built-in's name looks only at whether the file changed, to warn of an entry under that name: :func:`warn_hidden`).
Names ignore case and surrounding spaces. A user preset may not take a built-in preset's
name, a name that reads as a number or as missing (:func:`number_problem`), nor a name already saved (unless
asked to replace it). Entries that perfmodel saved carry ``"saved_by": "perfmodel"``; only those can be removed
by perfmodel.

This module knows the file's shape (an object of kinds, each an object of entries by name);
the fields of each kind's entries are checked where the kind lives (:mod:`perfmodel.network.links`,
:mod:`perfmodel.model.models`).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import functools
import json
import math
import os
import shlex
import unicodedata
from collections.abc import Callable, Iterator
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
    """The folder holding ``presets.json``: ``$PERFMODEL_CONFIG_DIR`` when set, else platformdirs' user config
    folder (asked once in a process).

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
    return Path(_user_config_dir())


@functools.cache
def _user_config_dir() -> str:
    """platformdirs' user config folder for perfmodel, asked once in a process (asking takes some 17 us, and each
    lookup of a built-in's name needs the presets file's path: :func:`warn_hidden`)."""
    import platformdirs

    return platformdirs.user_config_dir("perfmodel", appauthor=False)


def presets_path() -> Path:
    """The user presets file (it may not exist yet)."""
    return config_dir() / "presets.json"


@functools.lru_cache(maxsize=16)
def _presets_text(explicit: str | None) -> str:
    """:func:`presets_path` as text for the value ``explicit`` of ``$PERFMODEL_CONFIG_DIR``, made once: a lookup of a
    built-in's name asks for it."""
    return os.path.join(os.path.expanduser(explicit) if explicit else _user_config_dir(), "presets.json")


def key_of(name: object) -> str:
    """A preset name as every lookup compares it: Unicode NFKC-normalized (full-width letters read as the plain ones),
    without surrounding spaces, in lower case ("" if not text).

    >>> key_of(" \\uff2c\\uff41\\uff42 "), key_of(3)
    ('lab', '')
    """
    return unicodedata.normalize("NFKC", name).strip().lower() if isinstance(name, str) else ""


#: Unicode categories no name may hold: control characters, invisible format characters (zero-width space and
#: joiners), line and paragraph separators.
_INVISIBLE = {"Cc", "Cf", "Zl", "Zp"}


def name_problem(name: str) -> str:
    """Why a preset's name cannot be saved as it is ("" if it can): it holds a control or invisible character
    (a name that prints like another's), it starts with '-' (the command line reads it as an option), or it
    contains ',' or '=' (a ``--grid AXIS=V1,V2`` of the command line could not name it).

    >>> name_problem("ib-ndr\u200b")
    'holds the invisible or control character U+200B (ZERO WIDTH SPACE)'
    >>> name_problem("our-rdma"), name_problem("a,b")
    ('', "contains ',', which --grid AXIS=V1,V2 reads between two values")
    """
    text = unicodedata.normalize("NFKC", name).strip() if isinstance(name, str) else ""
    for char in text:
        if unicodedata.category(char) in _INVISIBLE:
            return f"holds the invisible or control character U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')})"
    if text.startswith("-"):
        return "starts with '-', which the command line reads as an option"
    for separator, as_what in ((",", "between two values"), ("=", "as the axis' end")):
        if separator in text:
            return f"contains {separator!r}, which --grid AXIS=V1,V2 reads {as_what}"
    return ""


def number_problem(name: str) -> str:
    """Why a preset's name means something else wherever a value goes ("" if it does not): text that holds a
    number is that number, and a missing marker (``"NA"``, ``"null"``, ``"nan"``) is missing, alone or in a list
    or column (:func:`perfmodel.inputs.coerce.text_number`), so a preset of that name would mean two things.

    >>> number_problem("4096")
    'reads as the number 4096 wherever a value goes (text holding a number is that number)'
    >>> number_problem(" NA ").split(" wherever")[0], number_problem("our-50g")
    ('reads as a missing value', '')
    """
    from .coerce import text_number

    for text in dict.fromkeys((name, key_of(name))):  # (as written, and as NFKC reads it: full-width digits too)
        number = text_number(text)
        if number is not None and math.isnan(number):
            return "reads as a missing value wherever a value goes (text such as 'NA', 'null' or 'nan' is missing)"
        if number is not None:
            return f"reads as the number {number:g} wherever a value goes (text holding a number is that number)"
    return ""


def path_problem(name: str) -> str:
    """Why a model's name reads as a path whatever is on disk ("" if it does not): it holds a '/' or ends in
    '.json'. No model preset has such a name, so such a name is read as a path, never looked up in the file.

    >>> path_problem("models/x"), path_problem("llama-3.1-8b")
    ("holds a '/', so it reads as a path to a config.json", '')
    """
    text = unicodedata.normalize("NFKC", name).strip()
    if "/" in text or os.sep in text or (os.altsep and os.altsep in text):
        return "holds a '/', so it reads as a path to a config.json"
    if text.lower().endswith(".json"):
        return "ends in '.json', so it reads as a config file's path"
    return ""


def _model_path_problem(name: str) -> str:
    """Why a model preset's name could be read as a path ("" if it cannot): a model is a preset, a config.json
    or its folder, and the preset would hide the file."""
    text = unicodedata.normalize("NFKC", name).strip()
    if path_problem(name):
        return path_problem(name)
    for spelled in dict.fromkeys((text, text.lower())):
        if Path(spelled).expanduser().exists():
            what = "folder" if Path(spelled).expanduser().is_dir() else "file"
            return f"names the existing {what} {str(Path(spelled).resolve())!r}, which the preset would hide as a path"
    return ""


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


class _Literal(float):
    """A number the file writes as no finite one (``1e400``, ``Infinity``, ``NaN``): the float JSON reads, with
    the text it was written as (``text``), so that the entry holding it can be named."""

    text = ""

    def __new__(cls, text: str) -> _Literal:
        number = super().__new__(cls, float(text))
        number.text = text
        return number


#: The texts perfmodel itself writes for a non-finite number (json's): an entry it saved may hold them.
_OWN_LITERALS = frozenset({"Infinity", "-Infinity", "NaN"})


def _float(text: str) -> float:
    number = float(text)
    return number if math.isfinite(number) else _Literal(text)


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


def _literal_inside(value: Any, where: str = "", allowed: frozenset[str] = frozenset()) -> tuple[str, str]:
    """The first number written as no finite one (but for the texts ``allowed``) anywhere inside ``value``: where
    it is (``'bandwidth_gb_s'``, ``'config' field 'hidden_size'``) and its text; ("", "") if none."""
    if isinstance(value, _Literal):
        return ("", "") if value.text in allowed else (where, value.text)
    if isinstance(value, dict):
        items = [(f"{where} field {k!r}" if where else repr(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(f"{where or 'the entry'} item {i}", v) for i, v in enumerate(value)]
    else:
        return "", ""
    found = (_literal_inside(v, w, allowed) for w, v in items)
    return next((one for one in found if one[1]), ("", ""))


def _non_finite(entry: Any) -> tuple[str, str]:
    """:func:`_literal_inside` of an entry; one perfmodel saved may hold the texts it writes itself for a
    non-finite number (``Infinity``: an infinite bandwidth, a free transfer)."""
    own = isinstance(entry, dict) and entry.get(SAVED_BY) == "perfmodel"
    return _literal_inside(entry, allowed=_OWN_LITERALS if own else frozenset())


def _non_finite_problem(where: str, text: str) -> str:
    return f"{where} is written {text}, which is no finite number (JSON has no infinity nor NaN; a number that large overflows)"


def _twice(path: Path, key: str, where: str = "") -> InputError:
    return InputError(
        f"{path}: {where}" if where else str(path),
        f"the {'entry' if where else 'key'} {key!r} appears twice in one object (JSON keeps only the last)",
        "keep one of them",
    )


def _folder_problem(path: Path) -> InputError | None:
    """The error of a config folder that is a file, or of a presets file that is a folder (None if neither)."""
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        named = "PERFMODEL_CONFIG_DIR" if os.environ.get("PERFMODEL_CONFIG_DIR") else "the config folder"
        return InputError(
            str(folder),
            f"the config folder ({named}) is a file, not a folder",
            "set PERFMODEL_CONFIG_DIR to a folder, or move that file away",
        )
    if path.is_dir():
        return InputError(str(path), "the user presets file is a folder", "move that folder away")
    return None


def _read(path: Path) -> dict[str, Any]:
    """The presets file's object (empty when there is none); anything else is an error naming the file."""
    problem = _folder_problem(path)
    if problem is not None:
        raise problem
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text, object_pairs_hook=_no_repeats, parse_float=_float, parse_constant=_Literal)
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
            raise _twice(path, section.repeated, kind)
    return data


def entry_error(name: str, kind: str, problem: str) -> InputError:
    """The error of one malformed user preset: the file, the entry, the fix."""
    return InputError(f"{presets_path()}: {kind} {name!r}", problem, "repair or remove that entry in the file")


def spellings(kind: str) -> dict[str, list[tuple[str, Any]]]:
    """Every entry of one kind as written in the file, by name (as :func:`key_of` makes it): each spelling of
    that name and its entry (two when the file holds ``"Lab"`` and ``"lab "``). A file that cannot be read as
    presets raises its error."""
    found: dict[str, list[tuple[str, Any]]] = {}
    for name, entry in _read(presets_path()).get(kind, {}).items():
        found.setdefault(key_of(name), []).append((name, entry))
    return found


def _entry_problem(kind: str, name: str, entry: Any, rivals: set[str]) -> str:
    """What makes one entry unusable before its fields are read ("" if nothing)."""
    key, rival = key_of(name), RIVALS.get(kind, "")
    where, text = _non_finite(entry)
    if not key:
        return "has an empty name"
    if name_problem(name).startswith("holds"):
        return f"its name {name_problem(name)}: rename it"
    if number_problem(name):
        return f"its name {number_problem(name)}: rename it"
    if kind == "models" and path_problem(name):
        return f"its name {path_problem(name)}: rename it"
    if key in rivals:
        return (
            f"is also the name of a user {KINDS[rival]} in the file (a name is one "
            "link or one cluster, which go where one another go): rename or remove one"
        )
    if _repeated_inside(entry):
        return (
            f"the key {_repeated_inside(entry)!r} appears twice in one object of "
            "the entry (JSON keeps only the last; keep one of them)"
        )
    if text:
        return _non_finite_problem(where, text)
    return "" if isinstance(entry, dict) else f"is {json_type(entry)}, not an object of fields"


def load(kind: str) -> tuple[dict[str, dict[str, Any]], dict[str, InputError]]:
    """The user presets of one kind (``"links"``, ``"models"`` or ``"clusters"``) by name (as :func:`key_of`
    makes it), and the error of each entry that is not an object of fields or whose name a user preset of its
    rival kind (:data:`RIVALS`) also has (reported when that name is used: the others still work). A file that
    cannot be read as presets raises its error."""
    data = _read(presets_path())
    rivals = {key_of(n) for n in data.get(RIVALS.get(kind, ""), {})}
    good: dict[str, dict[str, Any]] = {}
    bad: dict[str, InputError] = {}
    spelled: dict[str, str] = {}
    for name, entry in data.get(kind, {}).items():
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
        problem = _entry_problem(kind, name, entry, rivals)
        if problem:
            bad[key] = entry_error(name, kind, problem)
        else:
            good[key] = entry
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


#: The names each kind's section of a presets file holds (as written, by :func:`key_of`), as last read, by file
#: with its size, modification time and inode: a lookup of a built-in's name costs one ``stat``, not a read.
_HELD: dict[str, tuple[tuple[int, int, int], dict[str, dict[str, str]]]] = {}
#: The entries :func:`warn_hidden` has warned of (file, kind, name as written): each is said once in a process.
_WARNED: set[tuple[str, str, str]] = set()


def warn_hidden(key: str, kinds: tuple[str, ...], builtin: str) -> None:
    """Warn, once in a process, of each entry of ``kinds`` the presets file holds under the name ``key`` of a
    built-in ``builtin`` (``"link"``, ``"model"``, ...), which a lookup of that name has just used: that entry is
    never used. A file that cannot be read is not said here (the built-in never depends on it; listings say it).

    >>> import json, os, tempfile, warnings
    >>> os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = presets_path().write_text(json.dumps({"clusters": {"IB-NDR": {}}}))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_hidden("ib-ndr", ("links", "clusters"), "link")
    ...     warn_hidden("ib-ndr", ("links", "clusters"), "link")
    >>> len(caught), str(caught[0].message).split("presets.json: ")[1]
    (1, "clusters 'IB-NDR': is a built-in link's name, so the built-in is used, never this entry. Fix: rename the entry in the file.")
    """
    text = _presets_text(os.environ.get("PERFMODEL_CONFIG_DIR"))
    try:
        info = os.stat(text)
    except (OSError, ValueError):  # (no file, or a path the system cannot take: no entry)
        return
    stamp = (info.st_size, info.st_mtime_ns, info.st_ino)
    held = _HELD.get(text)
    if held is None or held[0] != stamp:
        try:
            data = _read(Path(text))
        except InputError:  # (a file that cannot be read: no entry of it is used, so none hides a built-in)
            data = {}
        held = (stamp, {kind: {key_of(name): name for name in section} for kind, section in data.items()})
        _HELD[text] = held
    for kind in kinds:
        spelled = held[1].get(kind, {}).get(key)
        if spelled is not None and (text, kind, spelled) not in _WARNED:
            _WARNED.add((text, kind, spelled))
            problem = f"is a built-in {builtin}'s name, so the built-in is used, never this entry"
            warn(str(InputError(f"{presets_path()}: {kind} {spelled!r}", problem, "rename the entry in the file")))


def check_free(kind: str, name: str, *, builtin: set[str], replace: bool = False) -> str:
    """The key ``name`` is saved under; refuses an empty or built-in name, one holding an invisible or control
    character or starting with '-' (:func:`name_problem`), one that reads as a number or as missing
    (:func:`number_problem`), a model's that reads as a path, a name of a user preset
    of the rival kind (:data:`RIVALS`), a taken one (unless ``replace``, and then only one perfmodel saved), and
    a presets file it could not save to (unreadable, holding what it could not write back as it is, or in a
    folder it cannot write), which it never overwrites."""
    path = presets_path()
    key = _check_free_in(_read(path), path, kind, name, builtin=builtin, replace=replace)
    _check_writable(path)
    return key


def _check_free_in(data: dict[str, Any], path: Path, kind: str, name: str, *, builtin: set[str], replace: bool) -> str:
    """:func:`check_free` on the file's object ``data``."""
    key = key_of(name)
    if not key or key in builtin:
        raise InputError(
            f"{KINDS[kind]} name", f"{name!r} is {'empty' if not key else 'a built-in preset'}", "choose another name"
        )
    if name_problem(name):
        problem = name_problem(name)
        fix = (
            "choose a name that does not start with '-'"
            if problem.startswith("starts")
            else "choose a name without ',' or '='"
            if problem.startswith("contains")
            else "type the name again without that character"
        )
        raise InputError(f"{KINDS[kind]} name", f"{name!r} {name_problem(name)}", fix)
    if number_problem(name):
        raise InputError(
            f"{KINDS[kind]} name",
            f"{name!r} {number_problem(name)}",
            f"choose a name that reads as no number ('our-{key}')",
        )
    if kind == "models" and _model_path_problem(name):
        raise InputError(
            "model name",
            f"{name!r} {_model_path_problem(name)}",
            "choose a name that reads as no path (no '/', no '.json', not the name of a file or folder here)",
        )
    _check_rewritable(data, path)
    other = RIVALS.get(kind, "")
    clash = [n for n in data.get(other, {}) if key_of(n) == key]
    if clash:
        raise InputError(
            f"{KINDS[kind]} name",
            f"a user {KINDS[other]} {clash[0]!r} exists already in "
            f"{path} (a name is one link or one cluster, which go where one another go)",
            f"choose another name, or remove that {KINDS[other]} first (perfmodel presets remove "
            f"{shlex.quote(key_of(clash[0]))} --kind {KINDS[other]})",
        )
    section = data.get(kind, {})
    taken = [n for n in section if key_of(n) == key]
    if taken and not replace:
        entry = section[taken[0]]
        source = entry.get("source") if isinstance(entry, dict) else None
        raise InputError(
            f"{KINDS[kind]} name",
            f"a user {KINDS[kind]} {taken[0]!r} exists already in "
            f"{path}" + (f" (from {source})" if isinstance(source, str) and source else ""),
            "choose another name, or replace it explicitly (replace=True)",
        )
    if taken:
        _check_ours(section, taken, path, kind)
    return key


def _check_ours(section: dict[str, Any], spelled: list[str], path: Path, kind: str) -> None:
    """Refuse to replace or remove an entry perfmodel did not save, or a name the file spells twice."""
    if len(spelled) > 1:
        raise InputError(
            f"{path}: {kind} {spelled[0]!r}",
            f"{' and '.join(map(repr, spelled))} name the same preset (names ignore case and surrounding spaces)",
            "keep one of them in the file by hand",
        )
    entry = section[spelled[0]]
    if not (isinstance(entry, dict) and entry.get(SAVED_BY) == "perfmodel"):
        raise InputError(
            f"{path}: {kind} {spelled[0]!r}",
            f"perfmodel did not save it (it has no '{SAVED_BY}': 'perfmodel'), so it leaves it alone",
            "remove it from the file by hand",
        )


def _check_rewritable(data: dict[str, Any], path: Path) -> None:
    """Refuse a file perfmodel could not write back as it is: an entry holding a key twice (JSON keeps only the
    last: writing it back would drop the other) or a number written as no finite one."""
    for kind, section in data.items():
        for name, entry in section.items():
            repeated, (where, text) = _repeated_inside(entry), _non_finite(entry)
            if repeated or text:
                problem = (
                    f"the key {repeated!r} appears twice in one object of the entry (JSON keeps only the last)"
                    if repeated
                    else _non_finite_problem(where, text)
                )
                raise InputError(
                    f"{path}: {kind} {name!r}",
                    f"{problem}, so perfmodel cannot write the file back as it is",
                    "repair that entry by hand (keep one of the keys; write a finite number), then try again",
                )


def save(kind: str, name: str, entry: dict[str, Any], *, builtin: set[str], replace: bool = False) -> Path:
    """Add one user preset (atomically), marked as saved by perfmodel; refuses what :func:`check_free` refuses.
    The file is read again, checked again and written under an exclusive lock, so that saves and removals that
    run at once each keep what the others wrote."""
    key = check_free(kind, name, builtin=builtin, replace=replace)
    path = presets_path()
    with _locked(path):
        data = _read(path)
        _check_free_in(data, path, kind, name, builtin=builtin, replace=replace)
        section = data.setdefault(kind, {})
        for spelled in [n for n in section if key_of(n) == key]:
            del section[spelled]
        section[key] = {**entry, SAVED_BY: "perfmodel"}
        _write(path, data)
    return path


def remove(kind: str, name: str) -> Path:
    """Remove one user preset that perfmodel saved (atomically, under the lock :func:`save` takes); returns the
    file. An entry perfmodel did not save (no ``saved_by``), a name the file spells twice, an unknown name and a
    file it cannot read or write back as it is are refused, and nothing is written."""
    path = presets_path()
    _removal(_read(path), path, kind, name)  # (an unknown name: refused before any lock or folder is made)
    with _locked(path):
        data = _read(path)
        spelled = _removal(data, path, kind, name)
        del data[kind][spelled]
        _write(path, data)
    return path


def _removal(data: dict[str, Any], path: Path, kind: str, name: str) -> str:
    """The spelling in ``data`` of the one entry :func:`remove` may remove, or its error."""
    key = key_of(name)
    section = data.get(kind, {})
    spelled = [n for n in section if key_of(n) == key]
    if not spelled:
        close = difflib.get_close_matches(key, [key_of(n) for n in section], n=3, cutoff=0.5)
        raise InputError(
            f"{KINDS[kind]} name",
            f"no user {KINDS[kind]} {name!r} in {path}",
            (f"did you mean {', '.join(close)}? " if close else "") + "perfmodel presets list shows the user presets",
        )
    _check_ours(section, spelled, path, kind)
    _check_rewritable(data, path)
    return spelled[0]


def _unwritable(path: Path, error: OSError) -> InputError:
    reason = (error.strerror or str(error)).lower()
    return InputError(
        str(path),
        f"cannot be written ({reason})",
        "make its folder writable, or set PERFMODEL_CONFIG_DIR to a folder you can write",
    )


def _target(path: Path) -> Path:
    """The file a write goes to: a symlink's target (the user's file, e.g. in a dotfiles folder), else ``path``."""
    return path.resolve() if path.is_symlink() else path


def _check_writable(path: Path) -> None:
    """Refuse a presets file whose folder (or the nearest folder above it that exists) cannot be written."""
    folder = _target(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        read_only = hasattr(os, "statvfs") and bool(os.statvfs(folder).f_flag & getattr(os, "ST_RDONLY", 1))
        raise _unwritable(
            path,
            OSError(
                errno.EROFS if read_only else errno.EACCES, os.strerror(errno.EROFS if read_only else errno.EACCES)
            ),
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on the presets file for the block (a lock file beside it, ``.presets.json.lock``, held with
    ``fcntl.flock``: released when the process ends, however it ends). Where there is no ``fcntl`` (Windows),
    there is no lock: saves that run at once may lose one another's entries there, as before."""
    try:
        import fcntl
    except ImportError:  # (no fcntl: the read-modify-write runs unlocked)
        yield
        return
    problem = _folder_problem(path)
    if problem is not None:
        raise problem
    lock = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:  # (a lock file made by another user: locking needs only to read it)
            fd = os.open(lock, os.O_RDONLY)
    except OSError as error:
        raise _unwritable(path, error) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write the presets atomically (:func:`perfmodel.ground.files.atomic_file`: through a symlink to the
    user's file, keeping its permission bits); a failure names the file, never its temporary."""
    try:
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as error:
        raise _unwritable(path, error) from None
