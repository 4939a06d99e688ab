"""The lowest-version job of .ci/run installs .ci/lowest.txt: each pin there is the floor pyproject.toml declares
(a floor raised in one place and not the other would leave the lowest versions untested)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _floors() -> dict[str, str]:
    if sys.version_info < (3, 11):
        pytest.importorskip("tomli")
        import tomli as tomllib
    else:
        import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*>=\s*([0-9.]+)(?:\s*,.*)?", requirement.strip())
        assert match, f"pyproject.toml: {requirement!r} declares no floor (>=)"
        floors[match.group(1).lower()] = match.group(2)
    return floors


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def test_the_lowest_pins_are_the_declared_floors():
    pins = dict(
        line.split("==")
        for line in (ROOT / ".ci" / "lowest.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    floors = _floors()
    assert len(floors) > 8
    assert sorted(pins) == sorted(floors), (sorted(pins), sorted(floors))
    different = {name: (pins[name], floors[name]) for name in floors if _release(pins[name]) != _release(floors[name])}
    assert not different, f"pin in .ci/lowest.txt, floor in pyproject.toml: {different}"
