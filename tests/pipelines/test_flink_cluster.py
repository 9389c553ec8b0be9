"""Jobs on a local Flink session cluster of separate processes (pipelines/flink_cluster.py).

One cluster -- a JobManager, 2 TaskManagers and their Beam SDK worker pools, each a process
of its own -- is started for the module and stopped at its end, and then no process of it
may be left (checked through the marker every process of it carries). Jobs are submitted
from the Python whose apache-beam is the job server's (``.venv-flink``), as in test_flink.py,
with ``--environment_type=EXTERNAL``; each must give the DirectRunner's model bytes.

The tests skip only when Java is missing (or Maven, while the job server is not built);
where Java is present, a cluster that does not start is a failure.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from pipelines import flink_cluster, local_runners
from tests.pipelines.reference import binary_data
from tests.pipelines.runner_cases import CASES, prepare
from tests.pipelines.test_flink import SMALL, comparable, job_server, train  # noqa: F401  (job_server: a fixture)
from transforms.streaming import dead_letter_file, learned_files

pytestmark = pytest.mark.flink_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OKL = [sys.executable, "-m", "pipelines.okl"]


@pytest.fixture(scope="module")
def flink_python(job_server) -> str:
    """The Python of the worker pools and of the submitting side (apache-beam at the job server's version)."""
    try:
        return flink_cluster.flink_python()
    except local_runners.EngineUnavailable as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def cluster(job_server, flink_python, tmp_path_factory):
    """A cluster of 2 TaskManagers for the module (every job here shares it); afterwards nothing of it may be running."""
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


A9A_ROWS, A9A_TEST_ROWS = 8000, 2000  # test_same_bytes.py's cases (runner_cases.CASES) on the first rows of a9a


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("flink-cluster-data")


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_real_data_gives_the_direct_runner_bytes(case, cluster, flink_python, data_root, tmp_path):
    """fogd, dsg and rf_oks_pp on a9a, mfogd and dsg on the MNIST digits, 2 TaskManagers: the DirectRunner's model bytes."""
    kind, args = CASES[case]
    same_model_on_cluster(flink_python, cluster, tmp_path, [*prepare(flink_python, kind, data_root, a9a_rows=(A9A_ROWS, A9A_TEST_ROWS)), *args])


# -- streaming with faults -------------------------------------------------------------
STREAM_ROWS, STREAM_FILES, STREAM_EVERY = 250, 20, 1.5
# s from launch: the job's start on the cluster (~45 s on a busy machine) + the files' arrival
# (30 s) + a restart; no longer: the TaskManagers' heap use grows while a streaming job runs (flink_cluster.TASKMANAGER_MEMORY)
STREAM_STOP = 110.0
STREAM_ARGS = ["--learner", "fogd", "--param", "n_components=32", "--sigma", "1.5", "--eta", "0.1", "--num_shards", "2",
               "--batch_rows", "100", "--snapshot_batches", "1", "--poll_seconds", "0.5", "--merge_seconds", "1"]


class JobReadNoFile(AssertionError):
    """The streaming job on the cluster ended without reading a file.

    It did, about 1 run in 7, until okl turned on Beam's ``--finish_bundle_before_checkpointing``
    for every Flink job (``pipelines.common.FINISH_BUNDLE_BEFORE_CHECKPOINTING``):
    the first checkpoint met the first bundle after the impulse of the watch's splittable DoFn, whose end-of-time
    watermark then left ahead of its output, and the stateful deduplication step after it
    dropped every match as late (Flink REST: that step's input watermark +inf, records in > 0,
    out 0). Its own failure type, so that a recurrence reads as what it is."""


class VersionWatch(threading.Thread):
    """Records each model version's bytes (and its record less the time) when it first appears, and when."""

    def __init__(self, output):
        super().__init__(daemon=True)
        self.output, self.seen, self.first_seen, self.stop = output, {}, {}, threading.Event()

    def look(self):
        for version, path in okl_core.model_versions(self.output):
            if version not in self.seen:
                with open(path, "rb") as f:
                    self.seen[version] = (hashlib.sha256(f.read()).hexdigest(), version_record(path))
                self.first_seen[version] = time.time()

    def run(self):
        while not self.stop.is_set():
            self.look()
            time.sleep(0.2)


def version_record(path) -> dict:
    with open(path[: -len(".npz")] + ".json") as f:
        return {k: v for k, v in json.load(f).items() if k != "time"}


def stream(root, python, runner_args, fault=None, stop_after=STREAM_STOP):
    """A streaming job in its own process (``python -m pipelines.train --streaming``) while files arrive; ``fault(job,
    command, info)`` is called once a third of them have landed (and sets ``info["at"]``, the time of its kill). Returns what happened; the job must end with exit status 0
    (``fault`` may restart it and return the new process)."""
    from tests.pipelines.test_streaming_prism import Dropper, _files, _write_file

    root = str(root)
    watched, staging, output = (os.path.join(root, d) for d in ("in", "staging", "out"))
    os.makedirs(watched), os.makedirs(staging)
    names = [f"f-{i:04d}.parquet" for i in range(STREAM_FILES)]
    files = _files(names, seed=30, n_rows=STREAM_ROWS, bad=names[7])
    os.rename(_write_file(staging, *files[0]), os.path.join(watched, names[0]))  # a file must exist at launch
    dropper = Dropper(staging, watched, files[1:], every=STREAM_EVERY, started=os.path.join(output, "snapshots", "run-000001"))
    command = [python, "-m", "pipelines.train", "--streaming", "--input", os.path.join(watched, "*.parquet"), *STREAM_ARGS,
               "--stop_after", str(stop_after), "--output", output, *runner_args]
    watch = VersionWatch(output)
    began = time.time()
    job = launch(command)
    watch.start()
    fault_info = {}
    try:
        dropper.start()
        if fault is not None:
            while len(dropper.landed) < STREAM_FILES // 3 and job.poll() is None:
                time.sleep(0.2)
            job = fault(job, command, fault_info) or job  # sets fault_info["at"]: the time of the kill
        out, _ = job.communicate(timeout=stop_after + 300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the streaming job did not end {stop_after + 300:.0f} s after its launch")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    dropper.join(), watch.stop.set(), watch.join()
    watch.look()
    assert job.returncode == 0, out[-4000:]
    if not okl_core.model_versions(output):
        raise JobReadNoFile(f"the job ended (exit 0) {time.time() - began:.0f} s after its launch without a model version:\n{out[-2000:]}")
    return {"output": output, "files": {n: (X, y) for n, X, y in files}, "bad": names[7], "watch": watch, "began": began,
            "landed": dropper.landed, "fault": fault_info, "ended": time.time()}


def launch(command):
    """The job in a process group of its own (so that a machine loss can be played by killing the group)."""
    return subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def check_exactly_once(run) -> dict:
    """Every good row of every file in the final version once; versions 1..V, each written once; dead letters once."""
    output, files, watch = run["output"], run["files"], run["watch"]
    good = {name: int(np.isfinite(X).all(axis=1).sum()) for name, (X, _) in files.items()}
    versions = okl_core.model_versions(output)
    assert [v for v, _ in versions] == list(range(1, len(versions) + 1)), "a version is missing"
    for version, path in versions:  # each loads, and is what was first written under its number
        okl_core.load_model(path)
        with open(path, "rb") as f:
            assert (hashlib.sha256(f.read()).hexdigest(), version_record(path)) == watch.seen[version], f"version {version} was rewritten"
    final = versions[-1][1]
    learned = {os.path.basename(key): got for key, got in learned_files(final).items()}
    assert learned == {name: {"rows": rows, "done": True} for name, rows in good.items()}
    assert version_record(final)["n_seen"] == sum(good.values())
    with open(dead_letter_file(output, run["bad"])) as f:
        assert [json.loads(line)["row"] for line in f] == [3, 117]
    assert sorted(os.listdir(os.path.join(output, "dead_letter"))) == [run["bad"] + ".jsonl"]
    last_landed = max(run["landed"].values())
    complete = min(t for v, t in watch.first_seen.items() if version_record(versions[v - 1][1])["n_seen"] == sum(good.values()))
    rows_per_second = sum(good.values()) / (complete - run["began"])
    return {"rows_per_second": rows_per_second, "lag_after_last_file": complete - last_landed, "versions": len(versions)}


def recovery_seconds(run) -> float:
    """Seconds from the fault to the first new version after it."""
    after = [t for t in run["watch"].first_seen.values() if t > run["fault"]["at"]]
    return min(after) - run["fault"]["at"]


CHECKPOINT_MS = 2000
IDLE_MS = int((STREAM_STOP - 20) * 1000)  # past --stop_after: a job's sources start some 40 s after its launch
MEASURED = {}
"""Figures of the streaming runs (printed by each test; the fault-free run is the reference)."""


def running_job(cluster, output=None, timeout=300) -> str:
    """The id of the cluster's running job (waits for it). None running by then and no version in
    ``output``: the job never ran or ended without reading a file (:class:`JobReadNoFile`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [job["id"] for job in cluster.jobs() if job["status"] == "RUNNING"]
        if running:
            return running[-1]
        time.sleep(0.5)
    if output is not None and not okl_core.model_versions(output):
        raise JobReadNoFile(f"no job running on the cluster {timeout} s after a third of the files landed, and no model version")
    pytest.fail("no job is running on the cluster")


def flink_figure(cluster, job_id, path, key):
    with urllib.request.urlopen(f"http://{cluster.flink_master}/jobs/{job_id}{path}", timeout=10) as response:
        return key(json.loads(response.read()))


def wait_for_checkpoint(cluster, job_id, timeout=20) -> bool:
    """Until the job has completed a checkpoint (what a restart starts from), for at most ``timeout`` s; whether it has.

    The first checkpoint may take long (its barrier waits for the bundles in flight); a fault
    before it restarts the job from its start, which must learn each row once as well.
    """
    deadline = time.monotonic() + timeout
    while flink_figure(cluster, job_id, "/checkpoints", lambda r: r["counts"]["completed"]) < 1:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


class RestartWatch(threading.Thread):
    """Follows a job after a fault: when Flink has it running again, and whether a restart rewrote a version.

    A task that failed on "versioned model files are never overwritten" after a restore from a
    checkpoint (the replayed merges fall in other processing-time windows than the failed
    attempt's, whose versions exist) would be restarted by Flink until its attempts ran out; the
    job is cancelled at the first such failure instead, and the test then fails on the job's exit status.
    """

    def __init__(self, cluster, job_id):
        super().__init__(daemon=True)
        self.cluster, self.job_id, self.stop = cluster, job_id, threading.Event()
        self.began, self.running_again, self.rewrite = time.time(), None, None

    def run(self):
        restarting = False
        while not self.stop.is_set():
            try:
                status = flink_figure(self.cluster, self.job_id, "", lambda r: r["state"])
                history = flink_figure(self.cluster, self.job_id, "/exceptions", lambda r: r["exceptionHistory"]["entries"])
            except (OSError, ValueError, KeyError):
                status, history = None, []
            restarting = restarting or status in ("RESTARTING", "FAILING") or bool(history)
            if restarting and status == "RUNNING" and self.running_again is None:
                self.running_again = time.time() - self.began
            rewrites = [e for e in history if "versioned model files are never overwritten" in e.get("stacktrace", "")]
            if rewrites and self.rewrite is None:
                self.rewrite = next(line for line in rewrites[0]["stacktrace"].splitlines() if "FileExistsError" in line).strip()
                request = urllib.request.Request(f"http://{self.cluster.flink_master}/jobs/{self.job_id}?mode=cancel", method="PATCH")
                urllib.request.urlopen(request, timeout=10).close()
            if status in ("FINISHED", "CANCELED", "FAILED"):
                return
            time.sleep(0.5)


def restarts(cluster, job_id) -> int:
    """How many times the job failed (and was restarted): the JobManager's exception history, kept after the job ends."""
    return len(flink_figure(cluster, job_id, "/exceptions", lambda r: r["exceptionHistory"]["entries"]))


def restart_taskmanagers(cluster) -> None:
    """Stop every TaskManager and start it again (a rolling restart; no job is running).

    Beam's Flink runner keeps state of every deferred remainder of a Python splittable DoFn on
    the TaskManager's heap (apache/beam#27648): the PeriodicImpulses that poll the watched folder
    and the versions make it grow for as long as a streaming job runs, so each streaming test
    starts on TaskManagers of its own (with the heap of one that ran a job before, the third
    streaming job on a cluster ran out of it).
    """
    for role in [p.role for p in cluster.processes if p.role.startswith("taskmanager-")]:
        pid = cluster.process(role).pid
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while flink_cluster.process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if flink_cluster.process_alive(pid):
            os.killpg(pid, signal.SIGKILL)
            time.sleep(1)
        flink_cluster.restart_process(cluster, role)


@pytest.fixture(scope="module")
def streaming_flags(cluster):
    # Sources idle this long end, so that the job ends: with checkpoints on, Beam keeps them open otherwise. The Impulse
    # under each PeriodicImpulse is idle from its start: with 5 s the job now and then ended before it had read a file.
    return [*cluster.runner_options(), f"--checkpointing_interval={CHECKPOINT_MS}", f"--shutdown_sources_after_idle_ms={IDLE_MS}"]


@pytest.mark.slow
def test_streaming_on_the_cluster_learns_every_row_once(cluster, flink_python, streaming_flags, tmp_path):
    """The reference run: no fault, checkpoints on."""
    restart_taskmanagers(cluster)
    run = stream(tmp_path, flink_python, streaming_flags)
    MEASURED["no fault"] = figures = check_exactly_once(run)
    print(f"streaming on the Flink session cluster, no fault: {figures}")


def fault_on_cluster(cluster, flink_python, streaming_flags, tmp_path, name, kill):
    """The streaming job with ``kill(cluster)`` once a third of the files landed (and a checkpoint completed, if one does within 20 s); checks and figures."""
    state = {}

    def fault(job, command, info):
        state["job"] = job_id = running_job(cluster, output=command[command.index("--output") + 1])
        state["checkpoint"] = wait_for_checkpoint(cluster, job_id)
        info["at"] = time.time()
        kill(cluster)
        state["watch"] = RestartWatch(cluster, job_id)
        state["watch"].start()

    restart_taskmanagers(cluster)
    try:
        run = stream(tmp_path, flink_python, streaming_flags, fault=fault)
    finally:
        if "watch" in state:
            state["watch"].stop.set()
            print(f"{name}: Flink had the job running again {state['watch'].running_again} s after the fault; "
                  f"a version rewritten: {state['watch'].rewrite}")
    assert state["watch"].rewrite is None, state["watch"].rewrite
    figures = {**check_exactly_once(run), "recovery_seconds": recovery_seconds(run), "restarts": restarts(cluster, state["job"]),
               "from_a_checkpoint": state["checkpoint"],
               "running_again_seconds": state["watch"].running_again}
    MEASURED[name] = figures
    print(f"streaming on the Flink session cluster, {name}: {figures} (no fault: {MEASURED.get('no fault')})")
    assert figures["restarts"] >= 1, "Flink did not restart the job: the kill went unnoticed"


@pytest.mark.slow
def test_a_killed_worker_pool_costs_a_restart_not_a_row(cluster, flink_python, streaming_flags, tmp_path):
    """kill -9 of a TaskManager's worker pool and its Python SDK workers while files arrive (a sidecar lost);
    its supervisor starts the pool again 3 s later, as Kubernetes restarts a container."""

    def kill_pool(cluster):
        os.killpg(cluster.process("worker-pool-1").pid, signal.SIGKILL)  # the pool and the SDK workers it started
        time.sleep(3)
        flink_cluster.restart_process(cluster, "worker-pool-1")

    fault_on_cluster(cluster, flink_python, streaming_flags, tmp_path, "worker pool killed", kill_pool)


@pytest.mark.slow
def test_a_killed_taskmanager_costs_a_restart_not_a_row(cluster, flink_python, streaming_flags, tmp_path):
    """kill -9 of a TaskManager while files arrive: the job restarts from its last checkpoint on the one left."""
    try:
        fault_on_cluster(cluster, flink_python, streaming_flags, tmp_path, "TaskManager killed",
                         lambda cluster: os.killpg(cluster.process("taskmanager-2").pid, signal.SIGKILL))
    finally:
        if not flink_cluster.process_alive(cluster.process("taskmanager-2").pid):  # killed: the next test gets 2 TaskManagers again
            flink_cluster.restart_process(cluster, "taskmanager-2")


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1
