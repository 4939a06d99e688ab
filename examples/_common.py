"""Shared by the example scripts: where to write, and the Agg backend."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")


def output_dir(description: str | None) -> Path:
    """Parse ``--out DIR`` (default: ./perfmodel-examples) and create the folder; ``description`` is the
    script's docstring (its first line describes it; the documentation's gallery runs it without one)."""
    parser = argparse.ArgumentParser(description=(description or "").split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    return out
