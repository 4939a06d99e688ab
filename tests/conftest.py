import os
from pathlib import Path

import hypothesis
import pytest

hypothesis.settings.register_profile("ci", deadline=None, max_examples=30, print_blob=True)
hypothesis.settings.register_profile("thorough", deadline=None, max_examples=400, print_blob=True)  # .ci/run
hypothesis.settings.register_profile("nojit", deadline=None, max_examples=40)
hypothesis.settings.load_profile(
    "nojit"
    if os.environ.get("NUMBA_DISABLE_JIT") == "1"
    else "thorough"
    if os.environ.get("PERFMODEL_THOROUGH") == "1"
    else "ci"
)


def pytest_addoption(parser):
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="add the slow end-to-end checks (marked exhaustive) to the run; -m exhaustive runs only them",
    )


def pytest_collection_modifyitems(config, items):
    """The exhaustive checks are left out unless --exhaustive adds them or a -m expression chooses."""
    if config.getoption("--exhaustive") or config.option.markexpr:
        return
    kept = [item for item in items if "exhaustive" not in item.keywords]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if "exhaustive" in item.keywords])
        items[:] = kept


@pytest.fixture
def ax():
    """The Axes of a new figure (Agg: no display), closed after the test: for the figures' tests."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory) -> Path:
    """The sample data as it is published (the traces uncompressed, the microbenchmark tables under
    ``measurements/``), made from the copies the package ships (:mod:`perfmodel.datasets`): no test skips
    for want of a folder beside the repository."""
    import gzip
    import shutil

    from perfmodel import datasets

    folder = tmp_path_factory.mktemp("data")
    (folder / "measurements").mkdir()
    for name in datasets.names():
        source = datasets.path(name)
        if source.suffix == ".gz":
            with gzip.open(source, "rb") as packed, open(folder / source.stem, "wb") as plain:
                shutil.copyfileobj(packed, plain)
        else:
            shutil.copyfile(source, folder / "measurements" / source.name)
    return folder


@pytest.fixture(params=["handoff_delay_ms", "handoff_delays", "accessor", "sweep", "replay_handoffs", "dask", "cli"])
def entry_point(request, tmp_path):
    """A case through one entry point a user has (each in turn): ``entry_point(tokens, bandwidth, per_token,
    **keywords)`` returns the delays (ms) as that entry point computes them, ``entry_point.refusal(...)`` the
    line with which it refuses them (see ``tests/entry_points.py``)."""
    from tests.entry_points import ENTRY_POINTS, EntryPoint

    assert request.param in ENTRY_POINTS
    return EntryPoint(request.param, tmp_path)
