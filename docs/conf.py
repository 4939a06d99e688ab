"""Sphinx configuration of perfmodel's documentation (no network at build time, none when read: every page
loads only its own files; tests/test_docs.py checks)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))  # the examples' shared helper

import perfmodel  # noqa: E402

project = "perfmodel"
author = "perfmodel developers"
copyright = "perfmodel developers, Apache-2.0"
release = version = perfmodel.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
autodoc_typehints = "none"  # numpydoc's parameter sections say the types and units
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# every documented function and class: each parameter documented (none unknown), a Returns (or Yields)
# section with a description, an Examples section, the docstring's quotes on their own line. Left out:
# the type on each parameter line (PR04: the signatures' hints say it), See Also and extended summaries
# (SA01, ES01), the order of the parameters (PR03: related ones stay together), the summary's grammar.
numpydoc_validation_checks = {"GL08", "GL02", "PR01", "PR02", "RT01", "RT03", "YD01", "EX01"}
# Left to their one-line docstrings: classes' members (methods, properties, dataclass __init__s, the int
# methods the enums inherit), and two helpers of links.py, a module at its 800-line limit.
numpydoc_validation_exclude = {r"\.[A-Z]\w*\.\w+$", r"^perfmodel\.network\.links\.(check_link_name|link_source)$"}
exclude_patterns = [
    "_build",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.json",
    "auto_examples/*.md5",
    "auto_examples/*.codeobj.json",
]
html_theme = "furo"
html_title = f"perfmodel {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
suppress_warnings = ["config.cache"]  # (the gallery's scraper is a function: Sphinx cannot pickle it)

_OUT = Path(tempfile.mkdtemp(prefix="perfmodel-gallery-"))


def _example_argv(gallery_conf: dict, script_vars: dict) -> list[str]:
    """Each example writes its PNGs into a folder of its own, which the scraper below reads."""
    return ["--out", str(_OUT / Path(script_vars["src_file"]).stem)]


def _written_pngs(block, block_vars: dict, gallery_conf: dict, **kwargs) -> str:
    """The PNGs an example wrote into its folder (the examples save and close their figures)."""
    from sphinx_gallery.scrapers import figure_rst

    folder = _OUT / Path(block_vars["src_file"]).stem
    seen = block_vars.setdefault("perfmodel_pngs", set())
    paths = []
    for png in sorted(folder.glob("*.png")) if folder.is_dir() else []:
        if png.name in seen:
            continue
        seen.add(png.name)
        target = next(block_vars["image_path_iterator"])
        shutil.copyfile(png, target)
        paths.append(target)
    return figure_rst(paths, gallery_conf["src_dir"])


sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/[a-z][a-z_]+\.py$",
    "ignore_pattern": r"__init__\.py",
    "reset_argv": _example_argv,
    "image_scrapers": (_written_pngs,),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "write_computation_times": False,  # (its page loads scripts and styles from CDNs: the docs are read offline)
}
os.environ.setdefault("PERFMODEL_CONFIG_DIR", tempfile.mkdtemp(prefix="perfmodel-docs-config-"))


def _inputs_table() -> None:
    """docs/_generated/inputs.rst: the input table of perfmodel.inputs.table, as the user guide shows it."""
    from perfmodel.inputs.table import OPTIONS, ROW_INPUTS

    def cell(value: object) -> str:
        return "" if value in (None, "") else f"``{value}``"

    import enum

    rows = []
    for entry in (*ROW_INPUTS, *OPTIONS):
        default = entry.default
        shown = (
            "required" if entry.required else repr(default.name.lower() if isinstance(default, enum.Enum) else default)
        )
        names = ", ".join(
            f"{label} {cell(value)}"
            for label, value in (("flag", entry.cli), ("sweep", entry.axis), ("grid", entry.grid_axis))
            if value
        )
        rows.append((f"``{entry.name}``", entry.doc, f"``{shown}``", entry.rule or ", ".join(entry.choices), names))
    header = ("input", "meaning", "default", "valid values", "elsewhere")
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 16 40 10 20 14", ""]
    for row in (header, *rows):
        lines.append("   * - " + row[0])
        lines.extend(f"     - {value}" for value in row[1:])
    folder = Path(__file__).parent / "_generated"
    folder.mkdir(exist_ok=True)
    (folder / "inputs.rst").write_text("\n".join(lines) + "\n")


def _bench_table() -> None:
    """docs/_generated/bench.rst: the figures of the last full ``python bench/run.py`` (bench/results/latest.json)."""
    import json

    results = json.loads((ROOT / "bench" / "results" / "latest.json").read_text())
    env = results["environment"]
    lines = [
        (
            f"Measured with Python {env['python']}, numba {env['numba']}, numpy {env['numpy']}, pandas "
            f"{env['pandas']}, {env['cpu_count']} cores ({env.get('kernel_threads', env['cpu_count'])} kernel "
            "threads)."
        ),
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 60 15 10 10 5",
        "",
        "   * - measure",
        "     - value",
        "     - ratio",
        "     - target",
        "     - met",
    ]
    for row in results["rows"]:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.3g}"
        met = "" if row["met"] is None else ("yes" if row["met"] else "no")
        lines += [
            f"   * - {row['measure']}",
            f"     - {row['value']:,.4g} {row['unit']}",
            f"     - {ratio}",
            f"     - {row['target']}",
            f"     - {met}",
        ]
    (Path(__file__).parent / "_generated" / "bench.rst").write_text("\n".join(lines) + "\n")


_inputs_table()
_bench_table()
