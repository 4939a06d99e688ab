"""Each formula once (issue #41): the bytes a handoff moves, the tokens of a prompt's current chunk and the
messages a handoff posts are computed by :mod:`perfmodel.kernels.handoff` only (``kv_bytes``/``capped_bytes``,
``current_chunk``, ``messages_of``); every other module calls them. A source scan catches the arithmetic
coming back elsewhere."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import numpy as np

PACKAGE = Path(__file__).resolve().parent.parent / "perfmodel"

#: The arithmetic of the formulas, as written out by hand (the code and the docs' formulas differ: ``mod``).
PATTERNS = {
    "the current chunk": re.compile(
        r"%\s*\(?\s*(np\.)?[\w.]*(max\w*\()?[\w.]*chunk|floor\(\s*\(\s*\w+\s*-\s*1(\.0)?\s*\)\s*/"
    ),
    "the capped bytes": re.compile(r"\*\s*(np\.)?min(imum)?\(\s*[\w.\[\]]+\s*,\s*[\w.\[\]]*(window_tokens|current)\b"),
    "the full-attention bytes": re.compile(r"\bcharged\s*\*\s*[\w.]*full\b|\bfull\w*\s*\*\s*charged\b"),
    "the messages": re.compile(r"\bregions\(|//\s*int\(\s*blocks_per_message|/\s*blocks_per_message\b"),
}

#: Known sites left, each with why (file: count of lines).
LEFT = {
    # the end of the chunk before a prompt's current one, floor((n - 1) / C) * C (= n - current_chunk), for the
    # inverse search's bracket on arrays: numpy, not yet a jitted vectorised loop
    "sweeps.py": 1,
}

#: Modules another change moves onto the formulas (issue #41 item 3, second half); drop each once it does.
MOVING = {"kernels/replay.py", "kernels/cluster.py", "replay/on_cluster.py", "kernels/sharing.py"}


def _code_lines(source: str) -> dict[int, str]:
    """Each line's code without its strings (docstrings, messages) and comments: what the scan reads."""
    lines: dict[int, list[str]] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.STRING, tokenize.COMMENT) and token.string.strip():
            lines.setdefault(token.start[0], []).append(token.string)
    return {number: re.sub(r"\s*([^\w\s])\s*", r"\1", " ".join(parts)) for number, parts in lines.items()}


def _sites(source: str) -> list[tuple[int, str]]:
    return [
        (number, what)
        for number, code in _code_lines(source).items()
        for what, pattern in PATTERNS.items()
        if pattern.search(code)
    ]


def test_the_formulas_are_written_once_in_the_kernels():
    sites = {
        f"{path.relative_to(PACKAGE).as_posix()}:{number} ({what})"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() != "kernels/handoff.py"
        and path.relative_to(PACKAGE).as_posix() not in MOVING
        and len(found := _sites(path.read_text(encoding="utf-8"))) > LEFT.get(path.relative_to(PACKAGE).as_posix(), 0)
        for number, what in found
    }
    assert not sites, (
        f"write these with perfmodel.kernels.handoff' formulas (kv_bytes, current_chunk, messages_of): {sites}"
    )


def test_the_scan_sees_the_formulas_written_out():
    """The patterns catch each formula as the code wrote it before (so the scan above means something)."""
    written = [
        "current = ((tokens - 1) % terms.chunk_tokens) + 1 if terms.chunk_tokens > 0 and tokens > 0 else 0.0",
        "current = np.where(n > 0, (n - 1) % np.maximum(chunk_tokens, 1) + 1, 0)",
        "return (tokens - 1.0) - np.floor((tokens - 1.0) / c) * c + 1.0",
        "return charged * full + (window * min(charged, terms.window_tokens) if window else 0.0)",
        "x = chunk_bytes_per_token * np.minimum(m, current) + state_bytes",
        "return -(-whole // int(blocks_per_message))",
        "regions(np.ceil(charged / block_size), bpm) * full",
    ]
    assert [bool(_sites(line)) for line in written] == [True] * len(written)
    assert _kernels_source_has_each()


def _kernels_source_has_each() -> bool:
    source = (PACKAGE / "kernels/handoff.py").read_text(encoding="utf-8")
    return all(f"def {name}(" in source for name in ("kv_bytes", "capped_bytes", "current_chunk", "messages_of"))


def test_the_one_formulas_give_the_byte_and_message_counts():
    """The formulas themselves: integers stay exact integers (numpy's int64 formula, beyond 2**53 too)."""
    from perfmodel.kernels import handoff as _kernels

    assert _kernels.current_chunk(8193, 8192) == 1 and _kernels.current_chunk(8192.0, 8192.0) == 8192.0
    assert _kernels.current_chunk(0, 8192) == 0 and _kernels.current_chunk(5.0, 0.0) == 0.0
    big = 2**40 + 5
    assert _kernels.kv_bytes(147456, 0, 147456, 0, 0, 8192, big, big) == 147456 * big + 147456 * 5
    assert _kernels.ByteTerms(40960.0, state=7.0).bytes(1024, 1024) == 40960.0 * 1024 + 7.0
    assert _kernels.messages_of(33.0, 33.0, 16.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0) == 3 * 2 + 1
    assert np.isnan(_kernels.kv_bytes(1.0, None, None, 0.0, None, None, np.nan, 1.0))
