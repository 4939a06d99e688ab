"""pytest's set-up for the whole project, the doctests in perfmodel/ as well as the suite in tests/: no test or
doctest reads or writes the user's own presets, and none leaves the next one another presets folder."""

import os

import pytest


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.fixture(autouse=True, scope="session")
def _private_user_presets(tmp_path_factory):
    """Every test and doctest sees a presets folder of the session's own (never the user's)."""
    previous = os.environ.get("PERFMODEL_CONFIG_DIR")
    os.environ["PERFMODEL_CONFIG_DIR"] = str(tmp_path_factory.mktemp("config"))
    yield
    _restore("PERFMODEL_CONFIG_DIR", previous)


@pytest.fixture(autouse=True)
def _presets_folder_restored():
    """A doctest that points ``PERFMODEL_CONFIG_DIR`` at a folder of its own (``save_link``'s, ``save_model``'s)
    leaves the next test the session's folder."""
    before = os.environ.get("PERFMODEL_CONFIG_DIR")
    yield
    _restore("PERFMODEL_CONFIG_DIR", before)
