"""SDK workers of local multi-process runs (``multi_processing``), forked from a preloaded server.

Beam's FnApiRunner starts each worker as a new ``python -m apache_beam.runners.worker.sdk_worker_main``
process, which spends a second or more importing Beam, numpy, pyarrow and okl before it
can take work; on two cores the workers' imports only start once the launcher has
finished its own. On Linux, okl's local runner (:func:`pipelines.common.direct_runner`)
forks its workers instead from a **fork server** that has imported all of that once
(:data:`PRELOAD`). ``pipelines.train`` and ``pipelines.predict`` start the server as soon as
their command line asks for ``multi_processing``, so that it imports while the launcher
does (one core each); a worker is then ready within milliseconds of being asked for.

Each worker (forked, or started as ``python -m pipelines.sdk_worker BLAS_THREADS`` where
there is no ``fork``):

* runs Beam's SDK harness with the environment Beam gives a worker process (control and
  logging endpoints, pipeline options, worker id) and exits when the runner closes it;
* gets ``BLAS_THREADS`` BLAS threads (cores // workers, at least one) unless the
  environment says otherwise (``OPENBLAS_NUM_THREADS``, ...): with one worker per core,
  BLAS's own threads would compete for the same cores (FOGD on 2 cores, 2 workers: about
  25% slower end to end). The server loads BLAS with one thread, so that BLAS has no
  threads when it forks (forking while other threads run is unsafe; the one other thread
  the server has is pyarrow's jemalloc background thread, which jemalloc's own fork
  handlers stop in the child); a worker that should have more BLAS threads sets them
  with ``threadpoolctl``;
* shows no import-time log lines on the console (Beam's "apitools not found" warning,
  "Logging handler created."): the root logger gets a ``NullHandler`` before Beam is
  imported; the worker's logs reach the launcher over the Fn API
  (``--default_sdk_harness_log_level``).

Protocol. The launcher and the server share a socket; a request is one byte carrying three
file descriptors: the worker's end of a new socket pair (its *lifeline*), and the
launcher's current stdout and stderr. The server forks; the child reads its configuration
from the lifeline (one JSON line: environment, BLAS threads, and the launcher's current
working directory and import path), answers its pid, runs the harness, and answers
``exit CODE`` before it exits. A lifeline closed by the launcher (the launcher stopped it,
or died) ends the worker. No pickles cross these sockets. The server exits, after its
last worker, when the launcher closes its socket (at exit).
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import traceback

__all__ = [
    "PRELOAD",
    "BLAS_VARIABLES",
    "ForkedWorker",
    "can_fork",
    "start_server",
    "start_server_for",
    "start_worker",
    "multi_processing_requested",
    "serve",
    "main",
]

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

PRELOAD = (
    "apache_beam.runners.worker.sdk_worker_main",
    "apache_beam.runners.worker.bundle_processor",
    "pyarrow.parquet",
    "okl_core.learners",
    "transforms",
)
"""Modules the fork server imports once for all the workers it forks."""


def can_fork() -> bool:
    """Whether workers are forked from the server (Linux), rather than started as new processes."""
    return sys.platform.startswith("linux")


def _quiet_unconfigured_logging() -> None:
    """Give a process whose logging nobody set up a NullHandler on the root logger.

    A ``logging.warning`` on a root logger with no handler sets up a console handler
    (``basicConfig``); in a worker, that would put Beam's import-time warnings on the
    launcher's console.
    """
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def _set_blas_threads(blas_threads: int, loaded_with_one: bool) -> None:
    """``blas_threads`` per worker unless the environment says otherwise (set before numpy loads).

    ``loaded_with_one``: numpy is loaded already, with one BLAS thread (a forked worker).
    """
    for name in BLAS_VARIABLES:
        os.environ.setdefault(name, str(blas_threads))
    wanted = os.environ["OPENBLAS_NUM_THREADS"]
    if loaded_with_one and wanted.isdigit() and int(wanted) > 1:
        import threadpoolctl

        threadpoolctl.threadpool_limits(int(wanted), user_api="blas")


def _run_harness() -> None:
    """Run Beam's SDK harness on this process's environment until the runner closes it."""
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main([])


# ---------------------------------------------------------------- launcher side

_LOCK = threading.Lock()
_SERVER: dict = {}  # "process": Popen of the server, "socket": the launcher's end, "workers": forked so far
_LIVE: set = set()  # lifelines of running workers, closed at exit


def multi_processing_requested(argv: list[str]) -> bool:
    """Whether a command line asks for local multi-process workers (a cheap look at the flags).

    Only decides whether to start the fork server early; the runner starts it anyway
    when it needs it.
    """
    flags = dict(arg.split("=", 1) if "=" in arg else (arg, nxt) for arg, nxt in zip(argv, argv[1:] + [""]))
    runner = flags.get("--runner", "DirectRunner").lower()
    return flags.get("--direct_running_mode") == "multi_processing" and runner in ("directrunner", "direct") and "--streaming" not in argv


def start_server_for(argv: list[str]) -> None:
    """Start the fork server now if ``argv`` asks for local multi-process workers (Linux)."""
    if can_fork() and multi_processing_requested(argv):
        start_server()


def start_server() -> None:
    """Start the fork server (no-op when it is running)."""
    with _LOCK:
        _start_server_locked()


def _start_server_locked() -> None:
    if _SERVER and _SERVER["process"].poll() is None:
        return
    ours, theirs = socket.socketpair()
    environment = {**os.environ, **{name: "1" for name in BLAS_VARIABLES}}  # no BLAS threads in the server
    code = "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from pipelines.sdk_worker import serve; serve(int(sys.argv[2]))"
    process = subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(sys.path), str(theirs.fileno())],
        pass_fds=(theirs.fileno(),), env=environment, stdin=subprocess.DEVNULL,
    )
    theirs.close()
    _SERVER.update(process=process, socket=ours, workers=0)


def _stop_server() -> None:
    """At exit: end running workers, let the server reap them and exit, wait for it."""
    with _LOCK:
        for lifeline in list(_LIVE):
            lifeline.close()
        _LIVE.clear()
        if not _SERVER:
            return
        _SERVER["socket"].close()
        if not _SERVER["workers"]:
            _SERVER["process"].kill()  # may still be importing (a usage error, --help): don't wait for it
        try:
            _SERVER["process"].wait(timeout=10)  # it exits once its last worker has
        except subprocess.TimeoutExpired:
            _SERVER["process"].kill()
            _SERVER["process"].wait()
        _SERVER.clear()


atexit.register(_stop_server)


class ForkedWorker:
    """The launcher's handle on a forked worker: its pid, ``wait`` and ``kill``."""

    def __init__(self, lifeline: socket.socket):
        self._lifeline = lifeline
        self._reader = lifeline.makefile("rb")
        line = self._reader.readline()
        if not line:
            raise RuntimeError("the okl fork server did not start a worker (see its error above)")
        self.pid = int(line)
        self.returncode: int | None = None

    def wait(self) -> int:
        """Block until the worker ends; its exit code (-9 when it died without saying)."""
        if self.returncode is None:
            code = -9
            for line in self._reader:
                if line.startswith(b"exit "):
                    code = int(line.split()[1])
            self.returncode = code
            self._close()
        return self.returncode

    def kill(self) -> None:
        """End the worker now (it exits when its lifeline closes; SIGKILL makes sure)."""
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._close()

    def _close(self) -> None:
        with _LOCK:
            _LIVE.discard(self._lifeline)
        self._reader.close()
        self._lifeline.close()


def start_worker(environment: dict[str, str], blas_threads: int) -> ForkedWorker:
    """Fork a worker that runs Beam's SDK harness with ``environment`` (a worker process's)."""
    ours, theirs = socket.socketpair()
    # What a new worker process would get from the launcher as it is now (the server was
    # started earlier, perhaps elsewhere): environment, working directory, import path.
    config = {"environment": dict(environment), "blas_threads": int(blas_threads), "cwd": os.getcwd(), "sys_path": sys.path}
    config = json.dumps(config) + "\n"
    with _LOCK:
        _start_server_locked()
        _LIVE.add(ours)
        _SERVER["workers"] += 1
        try:
            socket.send_fds(_SERVER["socket"], [b"w"], [theirs.fileno(), sys.stdout.fileno(), sys.stderr.fileno()])
        finally:
            theirs.close()
    ours.sendall(config.encode())
    return ForkedWorker(ours)


# ------------------------------------------------------------------ server side


def serve(fd: int) -> None:
    """The fork server: preload, then fork a worker per request until the launcher leaves."""
    _quiet_unconfigured_logging()
    for module in PRELOAD:
        importlib.import_module(module)
    requests = socket.socket(fileno=fd)
    # Ctrl-C is the launcher's to handle: it then closes the lifelines, which ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, _reap)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(requests, 1, 3)
        except OSError:
            break
        if not message:
            break  # the launcher closed its end
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            requests.close()
            _worker(*fds)  # never returns
        for descriptor in fds:
            os.close(descriptor)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:  # the workers end as their lifelines close
        try:
            os.wait()
        except ChildProcessError:
            break
    os._exit(0)  # nothing to clean up: skip the teardown of the preloaded modules


def _reap(*_) -> None:
    """SIGCHLD: collect ended workers (their CPU time then counts as the server's children's)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _worker(lifeline_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    """A forked worker: take the launcher's output streams and configuration, run the harness."""
    code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        os.close(stdout_fd)
        os.close(stderr_fd)
        lifeline = socket.socket(fileno=lifeline_fd)
        config = json.loads(lifeline.makefile("rb").readline())
        lifeline.sendall(f"{os.getpid()}\n".encode())
        threading.Thread(target=_exit_when_closed, args=(lifeline,), daemon=True, name="okl-lifeline").start()
        os.environ.clear()
        os.environ.update(config["environment"])
        os.chdir(config["cwd"])
        sys.path[:] = config["sys_path"]
        sys.argv[:] = [__file__]
        _set_blas_threads(config["blas_threads"], loaded_with_one=True)
        _run_harness()
        code = 0
    except BaseException:  # noqa: BLE001 - reported on stderr and in the exit code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            lifeline.sendall(f"exit {code}\n".encode())
        except (OSError, NameError):
            pass
        # Done: skip the interpreter's teardown (joining idle pool threads, freeing every
        # module), which the launcher would otherwise wait for at the end of each run.
        os._exit(code)


def _exit_when_closed(lifeline: socket.socket) -> None:
    """End the worker when the launcher closes its lifeline (stopped, or gone)."""
    try:
        while lifeline.recv(1024):
            pass
    except OSError:
        pass
    os._exit(1)


# ------------------------------------------------------------- process entry point


def main(argv: list[str]) -> None:
    """``python -m pipelines.sdk_worker BLAS_THREADS``: a worker as a new process (no fork)."""
    _set_blas_threads(int(argv[1]) if len(argv) > 1 else 1, loaded_with_one=False)
    _quiet_unconfigured_logging()
    _run_harness()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
