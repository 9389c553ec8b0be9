"""Build the real Beam runners of local runs and tests into okl's cache (what ``make runners`` calls).

::

    python -m pipelines.engines install prism     # or: flink, all
    python -m pipelines.engines path prism        # print the cached path (exit 1 when absent)
    okl engines start flink-cluster --taskmanagers 2   # a local Flink session cluster
    okl engines status flink-cluster
    okl engines stop flink-cluster

The command line of :mod:`pipelines.local_runners` (Prism built with ``go install``, a
Flink job server from Maven Central) and of :mod:`pipelines.flink_cluster` (a JobManager,
TaskManagers and Beam SDK worker pools as separate processes; ``start`` prints the Beam
flags that submit a job to it).
"""

from __future__ import annotations

import logging
import sys

import pipelines.common  # noqa: F401  (imports Beam first, without its spurious warnings; flink_cluster imports Beam)
from pipelines import flink_cluster
from pipelines.cli import Parser, UsageError, main as command_main, prog
from pipelines.local_runners import RUNNERS, EngineUnavailable
from pipelines.requests import ClusterRequest

__all__ = ["build_parser", "main"]


def build_parser() -> Parser:
    """The command line of ``engines`` (:mod:`pipelines.cli`'s conventions)."""
    parser = Parser(prog=prog("engines"), description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "path", *CLUSTER_COMMANDS])
    parser.add_argument("engine", nargs="?", choices=[*RUNNERS, "all", CLUSTER],
                        help=f"a runner (install, path) or {CLUSTER} (start, stop, status; the default of stop and status)")
    parser.add_argument("--if_available", action="store_true",
                        help="skip (exit 0) when a needed tool is not on the PATH")
    parser.add_argument("--taskmanagers", type=int, default=2, help="start: number of TaskManager processes")
    parser.add_argument("--slots", type=int, default=2, help="start: task slots per TaskManager")
    parser.add_argument("--state_dir", default=None,
                        help="the cluster's config, logs, checkpoints and cluster.json (default <cache>/clusters/flink)")
    parser.add_argument("--python", default=None,
                        help="start: the worker pools' Python (apache-beam at the job server's version; default .venv-flink's)")
    return parser


CLUSTER = "flink-cluster"
CLUSTER_COMMANDS = ("start", "stop", "status")


def cluster_command(request: ClusterRequest) -> int:
    """``start``, ``stop`` or ``status`` of the local Flink session cluster; prints what it did; returns the exit code."""
    state_dir = request.state_dir or flink_cluster.default_state_dir()
    if request.command == "start":
        cluster = flink_cluster.start_cluster(request.taskmanagers, state_dir, slots=request.slots, python=request.python)
        print(f"{CLUSTER}: running from {cluster.state_dir} (JobManager and {request.taskmanagers} TaskManagers, "
              f"web UI and REST http://{cluster.flink_master})")
        print("submit jobs with: " + " ".join(cluster.runner_options()))
        return 0
    if request.command == "stop":
        stopped = flink_cluster.stop_cluster(state_dir)
        print(f"{CLUSTER}: stopped {', '.join(stopped)}" if stopped else f"{CLUSTER}: none running from {state_dir}")
        return 0
    running = flink_cluster.load_cluster(state_dir)
    if running is None:
        print(f"{CLUSTER}: none running from {state_dir}")
        return 1
    for p in running.processes:
        print(f"{p.role}: {'running' if flink_cluster.process_alive(p.pid) else 'GONE'} (pid {p.pid}, log {p.log})")
    print("submit jobs with: " + " ".join(running.runner_options()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.engines {install,path} {prism,flink,all}`` or ``{start,stop,status} flink-cluster``; returns the exit code.

    ``install`` builds what is missing and prints each path; ``--if_available`` turns a
    missing tool (``go``, ``java``, ``mvn``) into a one-line note and exit code 0, so that
    ``make runners`` goes on without that runner. ``path`` prints the cached path, or
    exits with 1 when it is not built.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command in CLUSTER_COMMANDS or args.engine == CLUSTER:
        if args.command not in CLUSTER_COMMANDS or args.engine not in (None, CLUSTER):
            raise UsageError(f"{args.command} takes {'a runner: ' + ', '.join([*RUNNERS, 'all']) if args.engine == CLUSTER else CLUSTER}")
        try:
            return cluster_command(ClusterRequest.from_args(args))
        except EngineUnavailable as err:
            raise UsageError(f"{CLUSTER}: {err}") from None
    if args.engine is None:
        raise UsageError(f"{args.command} needs a runner: {', '.join([*RUNNERS, 'all'])}")
    code = 0
    for name in list(RUNNERS) if args.engine == "all" else [args.engine]:
        if args.command == "path":
            path = RUNNERS[name](build=False)
            if path is None:
                print(f"{name}: not built (python -m pipelines.engines install {name})", file=sys.stderr)
                code = 1
            else:
                print(path)
            continue
        try:
            print(RUNNERS[name](build=True))
        except EngineUnavailable as err:
            missing_tool = "is not on the PATH" in str(err)
            print(f"{name}: {'skipped, ' if missing_tool and args.if_available else ''}{err}", file=sys.stderr)
            if not (missing_tool and args.if_available):
                code = 1
    return code


if __name__ == "__main__":
    command_main(main, "engines")
