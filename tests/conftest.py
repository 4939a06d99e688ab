import os
from pathlib import Path

import hypothesis
import pytest

hypothesis.settings.register_profile("ci", deadline=None, max_examples=150, print_blob=True)
hypothesis.settings.register_profile("nojit", deadline=None, max_examples=40)
hypothesis.settings.load_profile("nojit" if os.environ.get("NUMBA_DISABLE_JIT") == "1" else "ci")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data/ beside the project; tests that need it skip without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present (it ships beside the repository, not with the package)")
    return SHARED_DATA
