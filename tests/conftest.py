"""Shared test configuration: slow-test gating, the location of ../shared/data, a Dask cluster for sweeps."""

import os
import pathlib

import numpy as np
import pytest

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def run_slow() -> bool:
    """Slow tests run on CI (CI=true) or when OKL_RUN_SLOW=1."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("OKL_RUN_SLOW") == "1"


# Modules that take longest (minutes: a Flink session cluster and its streams, the embedded Flink
# jobs) go first, so that `make test`'s workers (pytest-xdist, a module per worker) end together.
LONGEST_FIRST = {"test_flink_cluster.py": 0, "test_flink.py": 1}


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: LONGEST_FIRST.get(item.path.name, len(LONGEST_FIRST)))  # stable: each module's tests stay in order
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
    from pipelines import local_runners

    return cached_runner(local_runners.prism_binary, "go", "Go is not installed: the Prism runner is built with `go install` (`make runners`)", "Prism")


def cached_runner(get, tool: str, missing: str, what: str) -> str:
    """``get()``'s cached runner, else ``get(build=True)``: skips (``missing``) without ``tool``, fails when the build does."""
    import shutil

    from pipelines.local_runners import EngineUnavailable

    found = get()
    if found is None:
        if shutil.which(tool) is None:
            pytest.skip(missing)
        try:
            found = get(build=True)
        except EngineUnavailable as err:
            pytest.fail(f"{what}: {err}")
    return found


@pytest.fixture(scope="module")
def client():
    """A sweep's own LocalCluster (2 worker processes, 1 thread each), for the tests of one module.

    Module-scoped: an idle cluster left running slows the Beam tests on a small machine."""
    pytest.importorskip("distributed")
    from okl_experiments.runs import dask_client

    with dask_client(None, workers=2) as c:
        yield c


def sweep_binary_data(path, n=1500, d=5, seed=0):
    """A small binary okl data set at ``path`` (2 shards); returns its rows."""
    from okl_core.data.layout import write_dataset

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 > 0.8, 1, -1)
    write_dataset(path, X, y, "binary", n_shards=2, row_group_rows=500, classes=[-1, 1])
    return X, y


def warm_folds(*learners: str, env: dict | None = None) -> None:
    """Compile the folds of ``learners`` into the compile cache of a command run with ``env`` (in a
    process of its own, as a command's first run would), so that a test of a command's exact
    stderr does not meet the first use's ``compiling ...`` line."""
    import subprocess
    import sys

    code = ("import sys, okl_core; from okl_core.learners.compiled import warm_up\n"
            "for name in sys.argv[1:]: warm_up(okl_core.make_learner(name, n_inputs=3))")
    subprocess.run([sys.executable, "-c", code, *learners], env={**os.environ, **(env or {})}, check=True,
                   cwd=pathlib.Path(__file__).resolve().parents[1])
