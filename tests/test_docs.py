"""Every ``>>>`` example of the documentation's pages runs and prints what the page says."""

from __future__ import annotations

import doctest
import functools
import inspect
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.rst") if p.name != "sg_execution_times.rst") if DOCS.is_dir() else []


@pytest.mark.skipif(not PAGES, reason="docs/ is not beside the tests (an installed package)")
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from an empty folder, as a reader runs them
    result = doctest.testfile(
        str(page),
        module_relative=False,
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS,
        verbose=False,
        report=False,
    )
    assert result.failed == 0, f"{page.name}: {result.failed} of {result.attempted} examples failed (run pytest -s)"


MODULES = (
    "perfmodel",
    "perfmodel.io",
    "perfmodel.datasets",
    "perfmodel.dask",
    "perfmodel.plotting",
    "perfmodel.replay.traces",
    "perfmodel.replay",
    "perfmodel.sweeps",
    "perfmodel.network.links",
    "perfmodel.model.models",
    "perfmodel.frame",
    "perfmodel.handoff",
    "perfmodel.errors",
    "perfmodel.network.clusters",
    "perfmodel.flows",
    "perfmodel.replay.cluster",
    "perfmodel.calibration",
    "perfmodel.engines",
    "perfmodel.cli",
    "perfmodel.replay.sizing",
)


def _public_functions():
    import importlib
    import inspect

    for module in MODULES:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj


PUBLIC = list(_public_functions())
#: Public names known to have no page of their own yet (another's page of the same short name stood in).
NO_PAGE_YET: dict[str, str] = {}


@functools.cache
def _paged_objects() -> list:
    """What each ``perfmodel...`` entry of docs/api.rst names: the attribute (plotting.calibration is the
    figure, not its module), the module where more of the name follows (calibrate.calibrate)."""
    import importlib
    import types

    found = []
    for entry in re.findall(r"^\s+(perfmodel[\w.]+)\s*$", (DOCS / "api.rst").read_text(), flags=re.MULTILINE):
        parts = entry.split(".")
        obj = importlib.import_module("perfmodel")
        for i in range(1, len(parts)):
            obj = getattr(obj, parts[i], None)
            if obj is None or (i < len(parts) - 1 and not isinstance(obj, (types.ModuleType, type))):
                obj = importlib.import_module(".".join(parts[: i + 1]))
        found.append(obj)
    return found


@pytest.mark.skipif(not (DOCS / "api.rst").is_file(), reason="docs/ is not beside the tests (an installed package)")
@pytest.mark.parametrize(
    "name, obj",
    [
        pytest.param(name, obj, marks=pytest.mark.xfail(strict=True, reason=NO_PAGE_YET[name]))
        if name in NO_PAGE_YET
        else (name, obj)
        for name, obj in PUBLIC
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_public_function_and_class_has_an_api_page(name, obj):
    """Every public name of every public module (not only the top level's) has a page in docs/api.rst: an
    entry that names that very object (perfmodel.dask.handoff_delays is not perfmodel.handoff_delays)."""
    assert any(paged is obj for paged in _paged_objects()), f"{name} has no page in docs/api.rst"


@pytest.mark.parametrize(
    "name, obj",
    [(name, obj) for name, obj in PUBLIC if inspect.isfunction(obj)],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_public_function_documents_each_parameter(name, obj):
    """Each public function documents each of its parameters in a numpydoc Parameters section."""
    doc = inspect.getdoc(obj) or ""
    section = doc.partition("Parameters\n----------\n")[2].split("\nReturns\n")[0].split("\nYields\n")[0]
    section = section.split("\nExamples\n")[0]
    documented = {
        n.strip().lstrip("*")
        for line in section.splitlines()
        if line and not line.startswith(" ")
        for n in line.split(":")[0].split(",")
    }
    missing = set(inspect.signature(obj).parameters) - documented
    assert not missing, f"{name} does not document {sorted(missing)}"


# --- offline: no page loads anything from the network ----------------------------------------------------------

import ast  # noqa: E402
import os  # noqa: E402
from html.parser import HTMLParser  # noqa: E402

_REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
_CSS_REMOTE = re.compile(r"""(?:@import\s+|url\()\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


class _Loads(HTMLParser):
    """What a page loads: scripts, style sheets, icons and fonts (<link href>), images, frames and media,
    and the url()/@import of its inline styles."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        wanted = {
            "script": ("src",),
            "link": ("href",),
            "img": ("src", "srcset"),
            "iframe": ("src",),
            "source": ("src", "srcset"),
            "video": ("src", "poster"),
            "audio": ("src",),
            "embed": ("src",),
            "object": ("data",),
        }.get(tag, ())
        rel = (attributes.get("rel") or "").lower()
        for name in wanted:
            value = attributes.get(name) or ""
            if tag == "link" and rel in ("canonical", "alternate", "search", "index", "next", "prev", "author"):
                continue  # (navigation, not a load)
            if _REMOTE.match(value):
                self.found.append(f"<{tag} {name}={value!r}>")
        if _CSS_REMOTE.search(attributes.get("style") or ""):
            self.found.append(f"<{tag} style=...> loads {attributes['style'][:80]!r}")
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style and _CSS_REMOTE.search(data):
            self.found.append(f"<style> loads {_CSS_REMOTE.search(data).group(0)!r}...")


def remote_loads(html: str) -> list[str]:
    """Each remote resource the HTML text loads (an empty list: the page reads offline)."""
    parser = _Loads()
    parser.feed(html)
    return parser.found


def test_the_scanner_finds_a_remote_script_a_style_a_font_and_an_image():
    page = (
        '<html><head><script src="https://cdn.datatables.net/x.js"></script>'
        '<link rel="stylesheet" href="//fonts.googleapis.com/css?family=Roboto">'
        '<style>@import url("https://fonts.example/f.css");</style></head>'
        '<body><img src="http://example.org/a.png"><a href="https://example.org/">a link is no load</a>'
        '<link rel="canonical" href="https://example.org/page.html"><script src="_static/local.js"></script>'
        '<img src="_images/local.png"></body></html>'
    )
    found = remote_loads(page)
    assert len(found) == 4, found
    assert not remote_loads('<script src="_static/a.js"></script><link rel="stylesheet" href="_static/a.css">')


def _conf() -> ast.Module:
    return ast.parse((DOCS / "conf.py").read_text())


def _assigned(name: str) -> ast.expr | None:
    for node in _conf().body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.value
    return None


@pytest.mark.skipif(not (DOCS / "conf.py").is_file(), reason="docs/ is not beside the tests (an installed package)")
def test_the_configuration_loads_nothing_from_the_network():
    """Fast, from docs/conf.py alone: no MathJax (a CDN script by default), no gallery execution-times page
    (DataTables and Bootstrap from CDNs), no remote style sheet or script of our own."""
    extensions = ast.literal_eval(_assigned("extensions"))
    assert "sphinx.ext.mathjax" not in extensions or _assigned("mathjax_path") is not None, (
        "sphinx.ext.mathjax loads MathJax from a CDN: drop it, or set mathjax_path to a local copy"
    )
    gallery = _assigned("sphinx_gallery_conf")
    options = {ast.literal_eval(k): v for k, v in zip(gallery.keys, gallery.values) if isinstance(k, ast.Constant)}
    assert "write_computation_times" in options and ast.literal_eval(options["write_computation_times"]) is False, (
        "sphinx-gallery's execution-times page loads jQuery, DataTables and Bootstrap from CDNs"
    )
    for name in ("html_js_files", "html_css_files", "html_theme_options", "html_favicon", "html_logo"):
        value = _assigned(name)
        text = ast.get_source_segment((DOCS / "conf.py").read_text(), value) if value is not None else ""
        assert not re.search(r"(?:https?:)?//", text), f"{name} names a remote file: {text}"


def test_the_theme_and_the_gallery_load_no_remote_fonts_or_styles():
    """furo's and sphinx-gallery's own static files (what every page loads) import nothing remote."""
    import importlib.util

    for package in ("furo", "sphinx_gallery"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            pytest.skip(f"{package} is not installed (pip install -e '.[docs]')")
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in [*root.rglob("*.css"), *root.rglob("*.css_t")]:
            assert not _CSS_REMOTE.search(path.read_text(errors="replace")), f"{path} loads a remote file"


_BUILT = os.environ.get("PERFMODEL_DOCS_HTML")


@pytest.mark.skipif(not _BUILT, reason="set PERFMODEL_DOCS_HTML to a built HTML folder (.ci/run does)")
def test_no_built_page_loads_anything_from_the_network():
    pages = sorted(Path(_BUILT).rglob("*.html"))
    assert pages, f"no HTML pages under {_BUILT}"
    remote = {
        str(p.relative_to(_BUILT)): found for p in pages if (found := remote_loads(p.read_text(errors="replace")))
    }
    assert not remote, f"{len(remote)} pages load from the network: {dict(list(remote.items())[:5])}"


# --- claims of coverage match what runs -----------------------------------------------------------------------

README = DOCS.parent / "README.md"


@pytest.mark.skipif(not README.is_file(), reason="README.md is not beside the tests (an installed package)")
def test_the_readme_says_how_many_presets_the_main_job_sweeps():
    """The main job sweeps DEFAULT_LINKS, not every link preset: the README says how many of how many."""
    from perfmodel.cli.sweep import DEFAULT_MODELS
    from perfmodel.network.links import DEFAULT_LINKS, LINKS

    text = " ".join(README.read_text().split())
    assert f"over {len(DEFAULT_LINKS)} of the {len(LINKS)} interconnect presets" in text
    assert (
        f"for {['no', 'one', 'two', 'three', 'four', 'five'][len(DEFAULT_MODELS)]} models and "
        f"{['', '', '', '', '', '', '', 'seven', 'eight', 'nine', 'ten'][len(DEFAULT_LINKS)]} interconnects" in text
    )


def test_the_help_of_sweep_names_the_presets_it_sweeps(capsys):
    from perfmodel.cli import main
    from perfmodel.network.links import DEFAULT_LINKS

    assert main(["sweep", "--help"]) == 0
    assert f"{len(DEFAULT_LINKS)} link presets ({', '.join(DEFAULT_LINKS)})" in " ".join(
        capsys.readouterr().out.split()
    )


@pytest.mark.skipif(not (DOCS / "files.rst").is_file(), reason="docs/ is not beside the tests (an installed package)")
def test_the_files_page_names_every_compression_that_is_read_and_no_other():
    from perfmodel.ground.tables import _COMPRESSIONS

    line = next(line for line in (DOCS / "files.rst").read_text().splitlines() if "may be compressed" in line)
    assert set(re.findall(r"``(\.\w+)``", line)) == set(_COMPRESSIONS), line


@pytest.mark.skipif(
    not (DOCS / "messages.rst").is_file(), reason="docs/ is not beside the tests (an installed package)"
)
def test_every_transport_profile_has_no_setup_cost_as_the_pages_say():
    from perfmodel.network.links import get_transport, transport_profiles

    assert "every profile's ``setup_ms`` is 0" in " ".join((DOCS / "messages.rst").read_text().split())
    assert all(get_transport(name).setup_ms == 0 for name in transport_profiles())
