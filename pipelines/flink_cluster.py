"""A local Flink session cluster of separate processes, for jobs on the layout of a real cluster.

The embedded ``[local]`` mini-cluster of :func:`pipelines.local_runners.flink_runner_options`
runs the whole job in the job server's JVM. This module starts what a real deployment runs
(Flink on Kubernetes, say), on one machine::

    JobManager      java ... StandaloneSessionClusterEntrypoint --configDir <state>/conf/jobmanager
    TaskManager i   java ... TaskManagerRunner --configDir <state>/conf/taskmanager-<i>
    worker pool i   <python> -m pipelines.worker_pool 127.0.2.<i>:P

each a process group of its own, with its own config folder and log under the state folder
(``<cache>/clusters/flink`` unless told otherwise). The JVMs run on the Flink job server's
classpath (:func:`pipelines.local_runners.flink_job_server_jar`: its Maven jars hold
``flink-runtime``'s entry points and the Beam operators the TaskManagers execute). Every
port is a free port of the loopback interface chosen at start; ``cluster.json`` in the
state folder records them and the process ids, so that another process can stop the cluster.

Jobs are submitted through the job server, with :meth:`FlinkCluster.runner_options`::

    --runner=FlinkRunner --flink_job_server_jar=JAR --flink_master=127.0.0.1:<rest port>
    --environment_type=EXTERNAL --environment_config=okl-worker-pool:P --parallelism=<TaskManagers>

The TaskManagers start Beam's Python SDK workers through a worker pool (the EXTERNAL
environment), each through its own, as on Kubernetes, where each TaskManager pod has its
pool as a sidecar at ``localhost:50000``. A shared pool does not work: every TaskManager
numbers its workers from ``1-1``, so one TaskManager stopping its worker stops another's
(whose task then waits for it forever). The EXTERNAL environment names one address for
all TaskManagers; here each TaskManager's JVM resolves its host name ``okl-worker-pool``
through a hosts file of its own (``-Djdk.net.hosts.file``) to its pool's loopback address
``127.0.2.<i>``. A pool is Beam's ``worker_pool_main`` service bound to that address
(:func:`pipelines.worker_pool.serve_worker_pool`); it starts SDK workers as ``python`` from the PATH, so the
pool's environment has its Python's ``bin`` first (otherwise the workers miss
``apache_beam`` and the job hangs).

A TaskManager started without Flink's shell scripts needs its memory and CPU given
explicitly (:data:`TASKMANAGER_MEMORY`); okl's graph needs 256 MB of network memory
(64 MB fails with "Insufficient number of network buffers"). A failed task is restarted
(fixed-delay restart strategy), from the last checkpoint when the job checkpoints
(Beam's ``--checkpointing_interval``), into ``<state>/checkpoints``.

From the command line (:mod:`pipelines.engines`)::

    okl engines start flink-cluster --taskmanagers 2
    okl engines status flink-cluster
    okl engines stop flink-cluster
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from okl_core.data.download import default_cache_dir
from pipelines.local_runners import FLINK_BEAM_VERSION, FLINK_JVM_EXPORTS, FLINK_JVM_OPENS, EngineUnavailable, flink_job_server_jar

__all__ = [
    "JOBMANAGER_CLASS",
    "TASKMANAGER_CLASS",
    "TASKMANAGER_MEMORY",
    "CLUSTER_ENV",
    "WORKER_POOL_HOST",
    "pool_host",
    "FLINK_PYTHON_ENV",
    "FlinkCluster",
    "ClusterProcess",
    "default_state_dir",
    "flink_python",
    "start_cluster",
    "stop_cluster",
    "load_cluster",
    "cluster_processes",
    "process_alive",
    "restart_process",
]

_LOG = logging.getLogger(__name__)

JOBMANAGER_CLASS = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
"""Main class of a Flink session cluster's JobManager (what ``bin/jobmanager.sh`` starts)."""
TASKMANAGER_CLASS = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
"""Main class of a Flink TaskManager (what ``bin/taskmanager.sh`` starts)."""
FLINK_PYTHON_ENV = "OKL_FLINK_PYTHON"
"""Environment variable naming the Python of the worker pools (as for tests/pipelines/test_flink.py)."""
WORKER_POOL_HOST = "okl-worker-pool"
"""The host name of the EXTERNAL environment: each TaskManager resolves it to its own worker pool."""
CLUSTER_ENV = "OKL_FLINK_CLUSTER"
"""Environment variable set to the state folder in every process of a cluster (and their children)."""

TASKMANAGER_MEMORY = {
    "taskmanager.cpu.cores": "1",
    "taskmanager.memory.framework.heap.size": "128m",
    "taskmanager.memory.task.heap.size": "2560m",
    # Flink's batch shuffle takes its read buffers (batch-shuffle.size, 64 MB) from the framework's
    # off-heap memory, and Beam's gRPC to the SDK workers takes direct buffers from the task's: with
    # 64 MB and 0 MB, a batch task failed to deploy now and then ("Can't allocate enough direct
    # buffer for batch shuffle read buffer pool") and its restarted job hung.
    "taskmanager.memory.framework.off-heap.size": "128m",
    "taskmanager.memory.framework.off-heap.batch-shuffle.size": "64m",
    "taskmanager.memory.task.off-heap.size": "128m",
    "taskmanager.memory.managed.size": "64m",
    "taskmanager.memory.network.min": "256m",
    "taskmanager.memory.network.max": "256m",
    "taskmanager.memory.jvm-metaspace.size": "384m",
    "taskmanager.memory.jvm-overhead.min": "128m",
    "taskmanager.memory.jvm-overhead.max": "128m",
    "external-resources": "none",
}
"""A TaskManager's memory and CPU (about 3.7 GB a process): Flink's scripts derive these; without them it refuses to start.

The streaming job's state lives on the TaskManagers' heap (Flink's default state backend), and
its use grows while the job runs: Beam's Flink runner registers new state for every deferred
remainder of a Python splittable DoFn (apache/beam#27648), which the PeriodicImpulses polling the
watched folder and the versions defer all the time (a class histogram of a full heap: 2 million
``CopyOnWriteStateMap`` of 30,000 registered states). A TaskManager with 1 GB of task heap ran out
of it about three minutes into a stream, one with 1.5 GB in about four. Each job loads its own
copy of Beam's classes (Flink's child-first class loading), hence the metaspace."""
# The JVM flags that Flink's scripts derive from TASKMANAGER_MEMORY (heap = framework + task heap;
# direct memory = framework + task off-heap + network).
_TASKMANAGER_JVM = ["-Xms2688m", "-Xmx2688m", "-XX:MaxDirectMemorySize=512m", "-XX:MaxMetaspaceSize=384m"]
_JOBMANAGER_JVM = ["-Xms256m", "-Xmx512m", "-XX:MaxMetaspaceSize=256m"]
_STATE_FILE = "cluster.json"
_START_TIMEOUT = 240.0  # seconds: JVM start-up on a small, busy machine


def default_state_dir() -> str:
    """``<cache>/clusters/flink``: the cluster's config, logs and ``cluster.json`` (``$OKL_CACHE`` or ``~/.cache/okl``)."""
    return os.path.join(default_cache_dir(), "clusters", "flink")


@dataclasses.dataclass(frozen=True)
class ClusterProcess:
    """One process of a cluster: its role (``jobmanager``, ``taskmanager-1``, ``worker-pool-1``), id, log and command line."""

    role: str
    pid: int
    log: str
    command: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class FlinkCluster:
    """A running local Flink session cluster (what ``cluster.json`` records).

    Attributes
    ----------
    state_dir : str
        Config folders, logs, checkpoints and ``cluster.json``.
    rest_port : int
        The JobManager's REST port: ``--flink_master=127.0.0.1:<rest_port>``.
    worker_pool_port : int
        The port of every TaskManager's own Beam SDK worker pool (each at its own loopback address).
    processes : list of ClusterProcess
        Every process started, each the leader of its own process group.
    job_server_jar : str
        The Flink job server that submits jobs to the cluster.
    python : str
        The Python of the worker pools (apache-beam at the job server's version).
    """

    state_dir: str
    rest_port: int
    worker_pool_port: int
    processes: list
    job_server_jar: str
    python: str

    @property
    def flink_master(self) -> str:
        """``127.0.0.1:<rest port>``, Beam's ``--flink_master``."""
        return f"127.0.0.1:{self.rest_port}"

    @property
    def environment_config(self) -> str:
        """``okl-worker-pool:<port>``, Beam's ``--environment_config``: each TaskManager's own worker pool."""
        return f"{WORKER_POOL_HOST}:{self.worker_pool_port}"

    def runner_options(self, parallelism: int | None = None) -> list[str]:
        """Beam flags that run a pipeline on this cluster (module docstring).

        Parameters
        ----------
        parallelism : int, optional
            Flink's ``--parallelism`` (default: the number of TaskManagers).
        """
        taskmanagers = sum(p.role.startswith("taskmanager-") for p in self.processes)
        return [
            "--runner=FlinkRunner",
            f"--flink_job_server_jar={self.job_server_jar}",
            f"--flink_master={self.flink_master}",
            "--environment_type=EXTERNAL",
            f"--environment_config={self.environment_config}",
            f"--parallelism={parallelism or taskmanagers}",
        ]

    def process(self, role: str) -> ClusterProcess:
        """The process named ``role`` (``jobmanager``, ``taskmanager-2``, ``worker-pool-1``)."""
        for p in self.processes:
            if p.role == role:
                return p
        raise KeyError(role)

    def taskmanagers_registered(self) -> int:
        """How many TaskManagers the JobManager counts now (its REST ``/overview``)."""
        return int(self._rest("/overview")["taskmanagers"])

    def jobs(self) -> list[dict]:
        """The JobManager's jobs: ``[{"id": ..., "status": "RUNNING"}, ...]`` (REST ``/jobs``)."""
        return list(self._rest("/jobs")["jobs"])

    def _rest(self, path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}{path}", timeout=10) as response:
            return json.loads(response.read())


def flink_python() -> str:
    """The Python whose ``apache-beam`` is the job server's version: this one, ``$OKL_FLINK_PYTHON``, or the repository's ``.venv-flink``.

    Raises
    ------
    EngineUnavailable
        Neither is (``make runners`` builds ``.venv-flink``).
    """
    try:
        import importlib.metadata

        if importlib.metadata.version("apache-beam") == FLINK_BEAM_VERSION:
            return sys.executable
    except importlib.metadata.PackageNotFoundError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    python = os.environ.get(FLINK_PYTHON_ENV) or os.path.join(root, ".venv-flink", "bin", "python")
    if not os.path.exists(python):
        raise EngineUnavailable(f"{python} is missing: the worker pools need apache-beam=={FLINK_BEAM_VERSION} "
                                f"(`make runners` creates .venv-flink; --python or ${FLINK_PYTHON_ENV} names another Python)")
    return python


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports of 127.0.0.1 (held together while chosen, so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def load_cluster(state_dir: str | None = None) -> FlinkCluster | None:
    """The cluster that ``cluster.json`` in ``state_dir`` records, or None when there is none."""
    path = os.path.join(state_dir or default_state_dir(), _STATE_FILE)
    try:
        with open(path) as f:
            record = json.load(f)
    except FileNotFoundError:
        return None
    record["processes"] = [ClusterProcess(**p) for p in record["processes"]]
    return FlinkCluster(**record)


def cluster_processes(state_dir: str) -> list[int]:
    """Ids of the live processes started for the cluster of ``state_dir`` and their children.

    Found by :data:`CLUSTER_ENV` in each process's environment (``/proc``), so an SDK worker
    a worker pool started is found too, whatever became of the pool.
    """
    marker = f"{CLUSTER_ENV}={os.path.abspath(state_dir)}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0") and process_alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _config_lines(settings: dict) -> str:
    return "".join(f"{key}: {value}\n" for key, value in settings.items())


def _common_settings(state_dir: str, ports: dict) -> dict:
    """The settings every process of the cluster shares (addresses, restart strategy, folders)."""
    return {
        "jobmanager.rpc.address": "127.0.0.1",
        "jobmanager.rpc.port": ports["rpc"],
        "jobmanager.bind-host": "127.0.0.1",
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        "rest.port": ports["rest"],
        "blob.server.port": ports["blob"],
        "taskmanager.host": "127.0.0.1",
        "taskmanager.bind-host": "127.0.0.1",
        "jobmanager.memory.process.size": "1024m",
        "parallelism.default": 1,
        # Spread a job's slots over the TaskManagers (Flink fills one TaskManager first otherwise),
        # so that a job with parallelism 2 on 2 TaskManagers runs in both.
        "cluster.evenly-spread-out-slots": "true",
        # A lost TaskManager or SDK worker fails its tasks; Flink restarts them (from the last
        # checkpoint of a checkpointing job) rather than failing the job.
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 20,
        "restart-strategy.fixed-delay.delay": "2 s",
        "state.checkpoints.dir": "file://" + os.path.join(state_dir, "checkpoints"),
        "execution.checkpointing.dir": "file://" + os.path.join(state_dir, "checkpoints"),
        # A TaskManager killed with SIGKILL is noticed when its connection drops; the heartbeat
        # timeout only bounds the case where it hangs. 30 s was too short on a busy small machine:
        # a live TaskManager was declared lost in the middle of a stream, and the job restarted.
        "heartbeat.timeout": 120000,
        "io.tmp.dirs": os.path.join(state_dir, "tmp"),
        "web.tmpdir": os.path.join(state_dir, "tmp", "web"),
        "classloader.check-leaked-classloader": "false",
    }


def _jvm_command(jar: str, jvm: list[str], main_class: str, conf: str, log: str) -> list[str]:
    """``java`` with the job server's classpath, the JDK packages Flink needs opened, and a log file."""
    # The pathing jar's manifest opens the JDK packages only under `java -jar`: with -cp they are flags.
    opens = [f"--add-opens={p}=ALL-UNNAMED" for p in FLINK_JVM_OPENS]
    exports = [f"--add-exports={p}=ALL-UNNAMED" for p in FLINK_JVM_EXPORTS]
    logging_flags = ["-Dorg.slf4j.simpleLogger.defaultLogLevel=info", f"-Dorg.slf4j.simpleLogger.logFile={log}",
                     "-Dorg.slf4j.simpleLogger.showDateTime=true"]
    return ["java", *jvm, *opens, *exports, *logging_flags, "-cp", jar, main_class, "--configDir", conf]


def _write_conf(state_dir: str, role: str, settings: dict) -> str:
    conf = os.path.join(state_dir, "conf", role)
    os.makedirs(conf, exist_ok=True)
    with open(os.path.join(conf, "flink-conf.yaml"), "w") as f:
        f.write(_config_lines(settings))
    return conf


def _spawn(command: list[str], output: str, env: dict) -> int:
    """Start ``command`` as the leader of a new process group (so that stopping it stops its children), printing to ``output``."""
    with open(output, "ab") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    return proc.pid


def _check_running(state_dir: str) -> None:
    """Refuse to start over a live cluster of the same state folder; forget a dead one's record."""
    running = load_cluster(state_dir)
    if running is not None and any(process_alive(p.pid) for p in running.processes):
        raise EngineUnavailable(f"a Flink cluster is already running from {state_dir} (REST 127.0.0.1:{running.rest_port}): "
                                f"stop it first (okl engines stop flink-cluster --state_dir {state_dir})")
    if cluster_processes(state_dir):
        raise EngineUnavailable(f"processes of an earlier Flink cluster of {state_dir} are still running: "
                                f"okl engines stop flink-cluster --state_dir {state_dir}")
    if running is not None:
        os.remove(os.path.join(state_dir, _STATE_FILE))


def start_cluster(taskmanagers: int = 2, state_dir: str | None = None, slots: int = 2, python: str | None = None,
                  timeout: float = _START_TIMEOUT) -> FlinkCluster:
    """Start a JobManager, ``taskmanagers`` TaskManagers and a worker pool per TaskManager; wait until all serve.

    Parameters
    ----------
    taskmanagers : int
        Number of TaskManager processes (each about 3.7 GB, ``slots`` task slots).
    state_dir : str, optional
        Config folders, logs, checkpoints and ``cluster.json`` (default :func:`default_state_dir`).
    slots : int
        Task slots per TaskManager.
    python : str, optional
        The worker pools' Python (default :func:`flink_python`).
    timeout : float
        Seconds to wait for every TaskManager to register and every pool to listen.

    Returns
    -------
    FlinkCluster
        The running cluster (also recorded in ``<state_dir>/cluster.json``).

    Raises
    ------
    EngineUnavailable
        No ``java``, no job server, a cluster already running from ``state_dir``, or a process
        that exits or does not serve in time (the message names it and its log's last line);
        whatever was started is stopped again.
    """
    if taskmanagers < 1 or slots < 1:
        raise EngineUnavailable(f"--taskmanagers and --slots must be at least 1, not {taskmanagers} and {slots}")
    if shutil.which("java") is None:
        raise EngineUnavailable("`java` is not on the PATH: the Flink cluster needs Java 11 or newer")
    jar = flink_job_server_jar()
    if jar is None:
        raise EngineUnavailable("the Flink job server is not built: run `okl engines install flink` (or `make runners`)")
    python = python or flink_python()
    state_dir = os.path.abspath(state_dir or default_state_dir())
    os.makedirs(os.path.join(state_dir, "logs"), exist_ok=True)
    os.makedirs(os.path.join(state_dir, "tmp", "web"), exist_ok=True)
    _check_running(state_dir)
    free = _free_ports(3 + 2 * taskmanagers)
    pool_port = _free_pool_port(taskmanagers)
    ports = {"rest": free[0], "rpc": free[1], "blob": free[2]}
    common = _common_settings(state_dir, ports)
    env = _cluster_env(state_dir, python)
    processes: list[ClusterProcess] = []

    def start(role: str, command: list[str], process_env: dict) -> None:
        # A JVM logs into <role>.log (slf4j) and prints to <role>.out; a pool prints to <role>.log.
        log = os.path.join(state_dir, "logs", role + ".log")
        output = log if role.startswith("worker-pool-") else os.path.join(state_dir, "logs", role + ".out")
        processes.append(ClusterProcess(role, _spawn(command, output, process_env), log, command))

    try:
        conf = _write_conf(state_dir, "jobmanager", common)
        start("jobmanager", _jvm_command(jar, _JOBMANAGER_JVM, JOBMANAGER_CLASS, conf, os.path.join(state_dir, "logs", "jobmanager.log")), env)
        for i in range(1, taskmanagers + 1):
            role = f"taskmanager-{i}"
            settings = {**common, **TASKMANAGER_MEMORY, "taskmanager.numberOfTaskSlots": slots,
                        "taskmanager.rpc.port": free[1 + 2 * i], "taskmanager.data.port": free[2 + 2 * i],
                        "taskmanager.resource-id": role}
            conf = _write_conf(state_dir, role, settings)
            hosts = _write_hosts(conf, pool_host(i))
            jvm = [*_TASKMANAGER_JVM, f"-Djdk.net.hosts.file={hosts}"]
            start(role, _jvm_command(jar, jvm, TASKMANAGER_CLASS, conf, os.path.join(state_dir, "logs", role + ".log")), env)
            start(f"worker-pool-{i}", [python, "-m", "pipelines.worker_pool", f"{pool_host(i)}:{pool_port}"], env)
        cluster = FlinkCluster(state_dir, ports["rest"], pool_port, processes, jar, python)
        _record(cluster)
        _wait_serving(cluster, taskmanagers, timeout)
    except BaseException:
        _stop_processes(processes, state_dir)
        _forget(state_dir)
        raise
    return cluster


def pool_host(taskmanager: int) -> str:
    """The loopback address of TaskManager ``taskmanager``'s worker pool (``127.0.2.<i>``), which it knows as ``okl-worker-pool``."""
    return f"127.0.2.{taskmanager}"


def _free_pool_port(taskmanagers: int) -> int:
    """A port free at every worker pool's address (the EXTERNAL environment names one port for all)."""
    for _ in range(50):
        port = _free_ports(1)[0]
        sockets = []
        try:
            for i in range(1, taskmanagers + 1):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(s)
                s.bind((pool_host(i), port))
            return port
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise EngineUnavailable(f"no port is free at every worker pool address 127.0.2.1-{taskmanagers}")


def _write_hosts(conf: str, pool_address: str) -> str:
    """A hosts file for one TaskManager's JVM (``-Djdk.net.hosts.file``): ``okl-worker-pool`` is its own pool.

    With it the JVM resolves names from this file only, so it names this machine too.
    """
    path = os.path.join(conf, "hosts")
    with open(path, "w") as f:
        f.write(f"127.0.0.1 localhost {socket.gethostname()}\n{pool_address} {WORKER_POOL_HOST}\n")
    return path


def _cluster_env(state_dir: str, python: str) -> dict:
    """The environment of the cluster's processes: marked as this cluster's, the pools' Python's ``bin`` first on the PATH.

    A worker pool starts SDK workers as ``python`` from the PATH, so that ``bin`` comes first
    (the JVMs do not mind).
    """
    return {**os.environ, CLUSTER_ENV: state_dir, "PATH": os.path.dirname(python) + os.pathsep + os.environ.get("PATH", "")}


def restart_process(cluster: FlinkCluster, role: str, timeout: float = _START_TIMEOUT) -> ClusterProcess:
    """Start the process ``role`` of ``cluster`` again (after it was lost) with its command line; wait until it serves.

    What a supervisor (Kubernetes restarting a pod) does; ``cluster.json`` records the new process id.
    """
    old = cluster.process(role)
    if process_alive(old.pid):
        raise EngineUnavailable(f"the Flink cluster's {role} is still running (pid {old.pid})")
    output = old.log if role.startswith("worker-pool-") else old.log[: -len(".log")] + ".out"
    new = ClusterProcess(role, _spawn(old.command, output, _cluster_env(cluster.state_dir, cluster.python)), old.log, old.command)
    cluster.processes[cluster.processes.index(old)] = new
    _record(cluster)
    _wait_serving(cluster, sum(p.role.startswith("taskmanager-") for p in cluster.processes), timeout)
    return new


def _record(cluster: FlinkCluster) -> None:
    """Write ``cluster.json`` atomically (temp file + rename)."""
    path = os.path.join(cluster.state_dir, _STATE_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(dataclasses.asdict(cluster), f, indent=1)
    os.replace(path + ".tmp", path)


def _forget(state_dir: str) -> None:
    try:
        os.remove(os.path.join(state_dir, _STATE_FILE))
    except FileNotFoundError:
        pass


def _last_log_line(log: str) -> str:
    lines = []
    for path in (log, log[:-len(".log")] + ".out"):
        try:
            with open(path, errors="replace") as f:
                lines += [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            continue
    wanted = [line for line in lines if "Exception" in line or "ERROR" in line or "Error" in line]
    return (wanted or lines or ["(empty log)"])[-1][:400]


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def _wait_serving(cluster: FlinkCluster, taskmanagers: int, timeout: float) -> None:
    """Until the JobManager counts every TaskManager and every pool accepts connections; raise on an exit or timeout."""
    deadline = time.monotonic() + timeout
    while True:
        for p in cluster.processes:
            if not process_alive(p.pid):
                raise EngineUnavailable(f"the Flink cluster's {p.role} exited while starting: {_last_log_line(p.log)} (log: {p.log})")
        try:
            registered = cluster.taskmanagers_registered()
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            registered = -1
        pools = [pool_host(int(p.role.rsplit("-", 1)[1])) for p in cluster.processes if p.role.startswith("worker-pool-")]
        if registered == taskmanagers and all(_port_open(host, cluster.worker_pool_port) for host in pools):
            return
        if time.monotonic() > deadline:
            where = "the JobManager's REST port does not answer" if registered < 0 else f"{registered} of {taskmanagers} TaskManagers registered"
            raise EngineUnavailable(f"the Flink cluster did not start in {timeout:.0f} s: {where} (logs in {cluster.state_dir}/logs)")
        time.sleep(1)


def _stop_processes(processes: list, state_dir: str, grace: float = 15.0) -> list[str]:
    """SIGTERM each process group, SIGKILL what is left after ``grace`` seconds; returns the roles stopped."""
    stopped = []
    for p in processes:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            stopped.append(p.role)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and (any(process_alive(p.pid) for p in processes) or cluster_processes(state_dir)):
        time.sleep(0.3)
    for p in processes:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    # Children that left their group (or whose group leader is gone) carry the cluster's marker.
    for pid in cluster_processes(state_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in processes:  # reap the ones this process started
        try:
            os.waitpid(p.pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return stopped


def stop_cluster(state_dir: str | None = None) -> list[str]:
    """Stop every process of the cluster of ``state_dir`` (and their children); returns the roles that were running.

    An empty list: no cluster was running there. Nothing of the cluster is left running
    afterwards (checked through :func:`cluster_processes`).
    """
    state_dir = os.path.abspath(state_dir or default_state_dir())
    cluster = load_cluster(state_dir)
    processes = cluster.processes if cluster is not None else []
    running = [p.role for p in processes if process_alive(p.pid)]
    strays = cluster_processes(state_dir)
    if running or strays:
        _stop_processes([p for p in processes if process_alive(p.pid)], state_dir)
    _forget(state_dir)
    deadline = time.monotonic() + 10  # a process killed with SIGKILL takes a moment to go
    while (left := cluster_processes(state_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        raise EngineUnavailable(f"processes {left} of the Flink cluster of {state_dir} are still running after SIGKILL")
    return running or (["strays"] if strays else [])

