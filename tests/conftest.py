import os
from pathlib import Path

import hypothesis
import pytest

hypothesis.settings.register_profile("ci", deadline=None, max_examples=30, print_blob=True)
hypothesis.settings.register_profile("thorough", deadline=None, max_examples=400, print_blob=True)  # .ci/run
hypothesis.settings.register_profile("nojit", deadline=None, max_examples=40)
hypothesis.settings.load_profile("nojit" if os.environ.get("NUMBA_DISABLE_JIT") == "1" else
                                 "thorough" if os.environ.get("PERFMODEL_THOROUGH") == "1" else "ci")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True, scope="session")
def _private_user_presets(tmp_path_factory):
    """Tests never read or write the user's own presets (nor cache the kernels beside them)."""
    previous = os.environ.get("PERFMODEL_CONFIG_DIR")
    os.environ["PERFMODEL_CONFIG_DIR"] = str(tmp_path_factory.mktemp("config"))
    yield
    if previous is None:
        os.environ.pop("PERFMODEL_CONFIG_DIR", None)
    else:
        os.environ["PERFMODEL_CONFIG_DIR"] = previous


@pytest.fixture
def shared_data() -> Path:
    """../shared/data/ beside the project; tests that need it skip without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present (it ships beside the repository, not with the package)")
    return SHARED_DATA


@pytest.fixture(params=["handoff_delay_ms", "handoff_delays", "accessor", "sweep", "replay_handoffs", "dask", "cli"])
def entry_point(request, tmp_path):
    """A case through one entry point a user has (each in turn): ``entry_point(tokens, bandwidth, per_token,
    **keywords)`` returns the delays (ms) as that entry point computes them (see ``tests/entry_points.py``)."""
    import functools

    from tests.entry_points import ENTRY_POINTS, delays

    assert request.param in ENTRY_POINTS
    return functools.partial(delays, request.param, tmp_path=tmp_path)
