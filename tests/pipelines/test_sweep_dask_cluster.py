"""``okl sweep --scheduler tcp://...`` on a Dask cluster of separate processes, and a worker lost mid-sweep.

The cluster is what users start by hand: ``dask scheduler`` and two ``dask worker``
processes (no nanny: a killed worker stays dead), on 127.0.0.1 with ports the scheduler
chooses (``--port 0``, its address read from ``--scheduler-file``). ``okl sweep`` runs as
a subprocess against it; one worker is killed with SIGKILL after the first runs finished.
The sweep must finish on the other worker with every point recorded once and the same
``results.parquet`` as a ``LocalCluster`` sweep (timings aside).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from tests.conftest import sweep_binary_data

pytestmark = pytest.mark.dask_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
# Heavy enough that runs are still pending when a worker is killed (about 0.1-0.2 s a run here).
GRID = ["--learner", "fogd", "--grid", "sigma=0.5,1,2,4", "eta=0.05,0.2", "n_components=1024", "--repeats", "2", "--batch_rows", "8"]
TIMINGS = {"seconds"}  # the only columns that depend on when and where a run ran


def _env() -> dict:
    # the workers import okl's code: this tree first, as the sweep command does
    return {**os.environ, "PYTHONPATH": ROOT, "OKL_PROGRESS": "0"}


def _dask(*args) -> list[str]:
    """The ``dask`` command of this environment (``python -m dask`` where its script is not beside python)."""
    exe = os.path.join(BIN, "dask")
    return [exe, *args] if os.path.exists(exe) else [sys.executable, "-m", "dask", *args]


@pytest.fixture
def dask_cluster(tmp_path):
    """``(address, scheduler, workers)``: a scheduler and 2 workers as separate processes; all stopped after (checked)."""
    pytest.importorskip("distributed")
    from distributed import Client

    info = tmp_path / "scheduler.json"
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    procs = []

    def start(name, *args):
        out = open(logs / f"{name}.log", "wb")
        procs.append(subprocess.Popen(_dask(*args), cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        out.close()
        return procs[-1]

    try:
        scheduler = start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(info))
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            assert scheduler.poll() is None, (logs / "scheduler.log").read_text()
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:"), address
        workers = [start(f"worker{k}", "worker", "--scheduler-file", str(info), "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                         "--no-dashboard", "--name", f"w{k}") for k in range(2)]
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield address, scheduler, workers
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
    assert all(proc.poll() is not None for proc in procs)
    left = [p.pid for p in procs if _alive(p.pid)]
    assert not left, f"Dask processes left running: {left}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _sweep(data, out, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipelines.okl", "sweep", "--input", str(data), *GRID, "--output", str(out), *extra],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running_on(address: str, name: str) -> list:
    """The tasks the scheduler has the worker ``name`` processing now."""
    from distributed import Client

    with Client(address, timeout=30) as client:
        names = {addr: w["name"] for addr, w in client.scheduler_info()["workers"].items()}
        return [key for addr, keys in client.processing().items() if names.get(addr) == name for key in keys]


def _table(path):
    table = pq.read_table(path)
    return table.drop_columns(sorted(TIMINGS)), table.schema.metadata


def test_a_sweep_survives_a_killed_worker_and_records_every_point_once(dask_cluster, tmp_path):
    address, _, workers = dask_cluster
    data = tmp_path / "train"
    sweep_binary_data(data, n=3000)
    proc = _sweep(data, tmp_path / "cluster", "--scheduler", address)
    for line in proc.stderr:  # one line per finished run
        if "2/16 runs, " in line:
            assert _running_on(address, "w0"), "the worker to kill has no run in flight"
            os.kill(workers[0].pid, signal.SIGKILL)
            break
    out, err = proc.communicate(timeout=300)
    assert workers[0].wait(timeout=10) == -signal.SIGKILL
    assert proc.returncode == 0, err[-3000:]
    points, repeats = 8, 2
    # each run was recorded once: the summary counts results as the client received them
    assert f"{points * repeats} runs on " in out, out
    table = pq.read_table(tmp_path / "cluster" / "results.parquet").to_pylist()
    assert sorted(r["point"] for r in table) == list(range(points))  # every point, none twice
    assert all(r["status"] == "ok" and r["runs"] == repeats for r in table), [(r["point"], r["status"], r["error"]) for r in table]
    assert workers[1].poll() is None  # the survivor finished the sweep

    local = _sweep(data, tmp_path / "local", "--num_workers", "2")
    _, local_err = local.communicate(timeout=300)
    assert local.returncode == 0, local_err[-3000:]
    cluster_table, cluster_meta = _table(tmp_path / "cluster" / "results.parquet")
    local_table, local_meta = _table(tmp_path / "local" / "results.parquet")
    assert cluster_table.equals(local_table) and cluster_meta == local_meta
    assert json.loads((tmp_path / "cluster" / "best.json").read_text()) == json.loads((tmp_path / "local" / "best.json").read_text())
