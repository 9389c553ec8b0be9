"""Shared test configuration: slow-test gating and the location of ../shared/data."""

import os
import pathlib

import pytest

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def run_slow() -> bool:
    """Slow tests run on CI (CI=true) or when OKL_RUN_SLOW=1."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("OKL_RUN_SLOW") == "1"


def pytest_collection_modifyitems(config, items):
    if run_slow():
        return
    skip = pytest.mark.skip(reason="slow test: set OKL_RUN_SLOW=1 (CI runs it)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def shared_data(*parts) -> pathlib.Path:
    """Path under ../shared/data, skipping the calling test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available: {path} is missing (it lives in ../shared/data beside the project)")
    return path


@pytest.fixture(scope="session")
def prism_location() -> str:
    """Beam's Prism runner binary, cached by `make runners` (built here when missing).

    Skips only when Go is not installed; a Prism that cannot be built fails the test.
    """
    import shutil

    from pipelines import engines

    binary = engines.prism_binary()
    if binary is None:
        if shutil.which("go") is None:
            pytest.skip("Go is not installed: the Prism runner is built with `go install` (`make runners`)")
        try:
            binary = engines.prism_binary(build=True)
        except engines.EngineUnavailable as err:
            pytest.fail(f"Prism: {err}")
    return binary
