"""Jobs on a local Flink session cluster of separate processes (pipelines/flink_cluster.py).

One cluster -- a JobManager, 2 TaskManagers and their Beam SDK worker pools, each a process
of its own -- is started for the module and stopped at its end, and then no process of it
may be left (checked through the marker every process of it carries). Jobs are submitted
from the Python whose apache-beam is the job server's (``.venv-flink``), as in test_flink.py,
with ``--environment_type=EXTERNAL``; each must give the DirectRunner's model bytes.

The tests skip only when Java is missing (or Maven, while the job server is not built);
where Java is present, a cluster that does not start is a failure.
"""

import os
import shutil
import subprocess
import sys

import pytest

from okl_core.data.layout import write_dataset
from pipelines import flink_cluster, local_runners
from tests.conftest import cached_runner, shared_data
from tests.pipelines.reference import binary_data
from tests.pipelines.test_flink import SMALL, comparable, train

pytestmark = pytest.mark.flink_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OKL = [sys.executable, "-m", "pipelines.okl"]


@pytest.fixture(scope="module")
def job_server() -> str:
    """The cached job server jar (built here when Maven is present); skips without Java."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: the Flink cluster tests need `java` on the PATH")
    missing = "the Flink job server is not built and Maven is not installed to build it (`make runners` builds it)"
    return cached_runner(local_runners.flink_job_server_jar, "mvn", missing, "Flink job server")


@pytest.fixture(scope="module")
def flink_python(job_server) -> str:
    """The Python of the worker pools and of the submitting side (apache-beam at the job server's version)."""
    try:
        return flink_cluster.flink_python()
    except local_runners.EngineUnavailable as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def cluster(job_server, flink_python, tmp_path_factory):
    """A cluster of 2 TaskManagers for the module; afterwards nothing of it may be running."""
    state_dir = str(tmp_path_factory.mktemp("flink-cluster"))
    try:
        running = flink_cluster.start_cluster(2, state_dir, python=flink_python)
    except local_runners.EngineUnavailable as err:
        pytest.fail(f"the Flink cluster did not start: {err}")
    try:
        yield running
    finally:
        flink_cluster.stop_cluster(state_dir)
        assert flink_cluster.cluster_processes(state_dir) == []


def okl(*args, timeout=300):
    """``okl ARGS`` in a new process (this interpreter, the worktree first on the path)."""
    return subprocess.run([*OKL, *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=timeout)


def test_okl_engines_starts_and_stops_a_cluster_of_separate_processes(job_server, flink_python, tmp_path):
    """The CLI: start (the flags to use), status, a second start refused, stop, nothing left."""
    state = str(tmp_path / "state")
    started = okl("engines", "start", "flink-cluster", "--taskmanagers", "1", "--state_dir", state, "--python", flink_python)
    try:
        assert started.returncode == 0, started.stderr
        record = flink_cluster.load_cluster(state)
        assert [p.role for p in record.processes] == ["jobmanager", "taskmanager-1", "worker-pool-1"]
        assert f"--flink_master=127.0.0.1:{record.rest_port}" in started.stdout
        assert f"--environment_config=okl-worker-pool:{record.worker_pool_port}" in started.stdout
        assert record.taskmanagers_registered() == 1
        # Separate processes, each in a process group of its own, all marked as this cluster's.
        pids = [p.pid for p in record.processes]
        assert len(set(pids)) == 3 and all(os.getpgid(pid) == pid for pid in pids)
        assert set(pids) <= set(flink_cluster.cluster_processes(state))
        status = okl("engines", "status", "--state_dir", state)
        assert status.returncode == 0 and status.stdout.count(": running (pid") == 3, status.stdout
        again = okl("engines", "start", "flink-cluster", "--state_dir", state, "--python", flink_python)
        assert again.returncode == 2
        assert again.stderr.strip().splitlines() == [
            f"okl engines: error: flink-cluster: a Flink cluster is already running from {state} (REST 127.0.0.1:{record.rest_port}): "
            f"stop it first (okl engines stop flink-cluster --state_dir {state})"]
    finally:
        stopped = okl("engines", "stop", "--state_dir", state)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == "flink-cluster: stopped jobmanager, taskmanager-1, worker-pool-1"
    assert flink_cluster.cluster_processes(state) == []
    assert flink_cluster.load_cluster(state) is None
    gone = okl("engines", "status", "--state_dir", state)
    assert gone.returncode == 1 and gone.stdout.strip() == f"flink-cluster: none running from {state}"


def test_a_cluster_that_cannot_start_is_one_line_and_leaves_nothing(job_server, tmp_path):
    """A worker-pool Python without apache-beam: the pools exit, the start fails in one line, all is stopped."""
    state = str(tmp_path / "state")
    proc = okl("engines", "start", "flink-cluster", "--taskmanagers", "1", "--state_dir", state, "--python", shutil.which("true"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("okl engines: error: flink-cluster: the Flink cluster's worker-pool-1 exited while starting"), proc.stderr
    assert flink_cluster.cluster_processes(state) == []
    assert flink_cluster.load_cluster(state) is None


def same_model_on_cluster(python, cluster, tmp_path, args):
    """The job on the cluster and on the DirectRunner (both from ``python``): the same model bytes and metrics."""
    direct, direct_metrics, direct_seconds = train(python, tmp_path / "direct", args, ["--runner=DirectRunner"])
    flink, flink_metrics, flink_seconds = train(python, tmp_path / "cluster", args, cluster.runner_options())
    print(f"DirectRunner {direct_seconds:.1f} s, Flink session cluster {flink_seconds:.1f} s (wall, each in a new process)")
    assert flink == direct
    assert comparable(flink_metrics) == comparable(direct_metrics)
    assert cluster.jobs()[-1:] and all(job["status"] == "FINISHED" for job in cluster.jobs())


def test_small_binary_job_gives_the_direct_runner_bytes(cluster, flink_python, tmp_path):
    X, y = binary_data(4000)
    write_dataset(tmp_path / "train", X, y, "binary", n_shards=4, row_group_rows=512)
    Xt, yt = binary_data(1000, seed=1)
    write_dataset(tmp_path / "test", Xt, yt, "binary")
    before = len(cluster.jobs())
    same_model_on_cluster(flink_python, cluster, tmp_path, ["--input", str(tmp_path / "train"), "--test", str(tmp_path / "test"), *SMALL])
    assert len(cluster.jobs()) == before + 1  # the job ran on this cluster
    # Both TaskManagers ran a part of it (the slots are spread over them).
    for role in ("taskmanager-1", "taskmanager-2"):
        with open(cluster.process(role).log, errors="replace") as f:
            assert "switched from DEPLOYING to INITIALIZING" in f.read(), role


A9A_ROWS, A9A_TEST_ROWS = 8000, 2000
REAL_CASES = {
    "a9a-fogd": ("a9a", ["--learner", "fogd", "--sigma", "4", "--num_shards", "4", "--rounds", "2"]),
    "a9a-dsg": ("a9a", ["--learner", "dsg", "--sigma", "4", "--param", "block_size=256", "--param", "batch_size=1024",
                        "--param", "theta=1000", "--param", "step_offset=3000", "--num_shards", "2", "--rounds", "2"]),
    "a9a-rf_oks_pp": ("a9a", ["--learner", "rf_oks_pp", "--num_shards", "2"]),
    "a9a-mfogd": ("a9a", ["--learner", "mfogd", "--param", "n_components=200", "--sigma", "4", "--num_shards", "2", "--rounds", "2"]),
    "mnist-mfogd": ("mnist", ["--learner", "mfogd", "--param", "n_components=800", "--sigma", "8", "--eta", "0.005",
                              "--num_shards", "2", "--rounds", "2"]),
    "mnist-dsg": ("mnist", ["--learner", "dsg", "--param", "loss=softmax", "--sigma", "8", "--param", "block_size=512",
                            "--param", "batch_size=1024", "--param", "theta=10", "--num_shards", "2"]),
}
"""The learners of test_same_bytes.py's real-data cases, on the first 8,000 rows of a9a (and the MNIST test digits)."""


def prepare_real(python, kind, root) -> list[str]:
    """``okl prepare`` of the case's data under ``root`` (once); a9a cut to its first rows; returns the data flags."""
    out = os.path.join(str(root), kind)
    if kind == "a9a":
        source = shared_data("a9a")
        for name, rows in (("a9a", A9A_ROWS), ("a9a.t", A9A_TEST_ROWS)):
            with open(source / name) as f, open(os.path.join(str(root), name + ".head"), "w") as cut:
                cut.writelines(line for _, line in zip(range(rows), f))
        steps = [["libsvm", os.path.join(str(root), "a9a.head"), "--n_features", "123", "--output", out],
                 ["libsvm", os.path.join(str(root), "a9a.t.head"), "--output", out + "-test", "--like", out]]
    else:
        source = shared_data("mnist")
        steps = [["mnist", "--images", str(source / "t10k-images-idx3-ubyte.gz"), "--labels", str(source / "t10k-labels-idx1-ubyte.gz"), "--output", out]]
    if not os.path.exists(out):
        for args in steps:
            proc = subprocess.run([python, "-m", "pipelines.prepare", *args, "--quiet"], cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
    return ["--input", out, *(["--test", out + "-test"] if kind == "a9a" else [])]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("flink-cluster-data")


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REAL_CASES))
def test_real_data_gives_the_direct_runner_bytes(case, cluster, flink_python, data_root, tmp_path):
    """fogd, mfogd, dsg and rf_oks_pp on a9a and the MNIST digits, 2 TaskManagers: the DirectRunner's model bytes."""
    kind, args = REAL_CASES[case]
    same_model_on_cluster(flink_python, cluster, tmp_path, [*prepare_real(flink_python, kind, data_root), *args])
