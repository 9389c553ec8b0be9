"""What the okl pipelines share: Beam options, the runner choice, usage errors.

Runner choice
-------------
Beam >= 2.68's ``DirectRunner`` (``SwitchingDirectRunner``) first tries the Prism
runner, which downloads a Go binary from GitHub with no timeout; offline it logs the
failed download and falls back to the FnApiRunner -- and on a network that drops
packets instead of refusing them, the download can hang for minutes. okl pipelines are
batch jobs that the FnApiRunner runs fully (the DirectRunner's own fallback, and the
runner Beam recommends pinning to when Prism gets in the way), so ``--runner=DirectRunner``
(also the default) runs them on the FnApiRunner directly, exactly as the DirectRunner's
fallback does, with ``--direct_num_workers`` and ``--direct_running_mode`` honoured. Pass
``--runner=SwitchingDirectRunner`` (or ``PrismRunner``) to get Beam's Prism-first
behaviour; every other runner is passed through unchanged.

Two defaults make local runs work out of the box, each only when the option is not
given: ``--job_endpoint=embed`` gets ``--environment_type=LOOPBACK`` (the embedded job
server would otherwise start SDK workers in Docker), and ``multi_processing`` workers get
``--default_sdk_harness_log_level=ERROR`` (they would otherwise print their start-up INFO
logs on the console). ``multi_processing`` workers are forked from a
server that has imported Beam and okl once (:mod:`pipelines.sdk_worker`; on Linux, elsewhere
they start as new processes through that module), with BLAS threads shared out among the
workers and no import-time log lines on the console.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import sys
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, PortableOptions, StandardOptions, WorkerOptions

__all__ = ["UsageError", "pipeline_options", "make_pipeline", "direct_runner", "configure_logging", "exit_without_teardown"]

_DIRECT_NAMES = {"directrunner", "direct"}
_LOG = logging.getLogger(__name__)


class UsageError(ValueError):
    """A problem with the command line or its inputs, reported without a traceback."""


def configure_logging() -> None:
    """Console logging for the CLIs: okl at INFO, Beam at WARNING (unless already set up)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("okl", "pipelines", "transforms"):
        logging.getLogger(name).setLevel(logging.INFO)


def exit_without_teardown(code: int = 0) -> typing.NoReturn:
    """End a command-line program: exit handlers run, output is flushed, the teardown is skipped.

    With Beam loaded, the interpreter's teardown (freeing every module's objects) takes
    0.3-0.4 s on two cores after the job's work and output are done.
    """
    atexit._run_exitfuncs()  # what a normal exit runs first (logging's flush, okl's fork server)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def pipeline_options(beam_argv: list[str]) -> PipelineOptions:
    """Beam options from the arguments okl does not use, with the local-run defaults."""
    options = PipelineOptions(beam_argv)
    given = " ".join(beam_argv)
    portable = options.view_as(PortableOptions)
    if portable.job_endpoint == "embed" and "--environment_type" not in given:
        portable.environment_type = "LOOPBACK"
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode == "multi_processing" and "--default_sdk_harness_log_level" not in given:
        options.view_as(WorkerOptions).default_sdk_harness_log_level = "ERROR"
    return options


_BEAM_WORKER_COMMAND = "-m apache_beam.runners.worker.sdk_worker_main"
_FORKED_WORKER_URN = "okl:environment:forked_python_worker:v1"
"""Environment of local multi-process workers forked by :mod:`pipelines.sdk_worker` (payload: BLAS threads)."""
WORKER_EXIT_SECONDS = 30
"""How long a local worker may take to exit once the runner has closed it (then it is ended)."""


def _local_runner_class():
    """The FnApiRunner, with multi-process workers from :mod:`pipelines.sdk_worker` (forked on Linux)."""
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    from pipelines import sdk_worker

    _register_forked_worker_handler()

    class LocalRunner(fn_runner.FnApiRunner):
        def run_via_runner_api(self, pipeline_proto, options):
            cores = os.cpu_count() or 1
            workers = options.view_as(DirectOptions).direct_num_workers or cores  # 0 means one per core
            blas_threads = max(1, cores // max(1, workers))
            if sdk_worker.can_fork():
                urn, payload = _FORKED_WORKER_URN, str(blas_threads).encode()
            else:
                urn, payload = python_urns.SUBPROCESS_SDK, f"{sys.executable} -m pipelines.sdk_worker {blas_threads}".encode()
            for environment in pipeline_proto.components.environments.values():
                if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload.decode().endswith(_BEAM_WORKER_COMMAND):
                    environment.urn, environment.payload = urn, payload
            return super().run_via_runner_api(pipeline_proto, options)

    return LocalRunner


@functools.cache
def _register_forked_worker_handler():
    """Define Beam's worker handler for :data:`_FORKED_WORKER_URN` and register it (once)."""
    import threading

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc, endpoints_pb2
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer
    from apache_beam.utils import thread_pool_executor
    from google.protobuf import json_format, text_format

    from pipelines import sdk_worker

    @worker_handlers.WorkerHandler.register_environment(_FORKED_WORKER_URN, None)
    class ForkedWorkerHandler(worker_handlers.GrpcWorkerHandler):
        """Like Beam's subprocess worker handler, with the worker forked from okl's preloaded server."""

        def __init__(self, payload: bytes, state, provision_info, grpc_server):
            super().__init__(state, provision_info, grpc_server)
            self.blas_threads = int(payload.decode())

        def start_worker(self):
            self.worker, self.stopping = None, threading.Event()
            self.worker_thread = threading.Thread(name="run_worker", target=self._run_worker, daemon=True)
            self.worker_thread.start()

        def stop_worker(self):
            # The runner has closed the worker's control channel: its work is done. A worker
            # that does not then exit (stuck in a DoFn's teardown or on its log stream) is
            # ended, rather than waited for forever.
            self.worker_thread.join(timeout=WORKER_EXIT_SECONDS)
            if self.worker_thread.is_alive() and self.worker is not None:
                _LOG.warning("SDK worker %s (pid %s) did not exit %s s after its work was done: ended", self.worker_id, self.worker.pid, WORKER_EXIT_SECONDS)
                self.stopping.set()
                self.worker.kill()
            self.worker_thread.join()

        def _run_worker(self):
            # The worker's own log channel, shown through Beam's local job service servicer
            # (one "Worker: ..." line per entry, at the entry's level), as for Beam's subprocess
            # workers. Its client pings to keep the stream alive: pings without data must be
            # accepted, or grpc ends the stream after a minute or two ("too_many_pings").
            tolerate_pings = [("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)]
            logs = grpc.server(thread_pool_executor.shared_unbounded_instance(), options=tolerate_pings)
            port = logs.add_insecure_port("localhost:0")
            beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(BeamFnLoggingServicer(), logs)
            logs.start()
            environment = dict(
                os.environ,
                CONTROL_API_SERVICE_DESCRIPTOR=text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=self.control_address)),
                LOGGING_API_SERVICE_DESCRIPTOR=text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=f"localhost:{port}")),
                PIPELINE_OPTIONS=json_format.MessageToJson(self.provision_info.provision_info.pipeline_options),
                WORKER_ID=self.worker_id,
            )
            self.worker = sdk_worker.start_worker(environment, self.blas_threads)
            try:
                if self.worker.wait() and not self.stopping.is_set():
                    raise RuntimeError(f"SDK worker {self.worker_id} (pid {self.worker.pid}) exited with code {self.worker.returncode}")
            finally:
                self.worker.kill()
                logs.stop(0)

    return ForkedWorkerHandler


def direct_runner(options: PipelineOptions):
    """The FnApiRunner set up as Beam's DirectRunner sets it up when Prism is not used."""
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return _local_runner_class()(provision_info=provision)


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the requested runner (DirectRunner: the FnApiRunner, see module docstring)."""
    runner = options.view_as(StandardOptions).runner
    if runner is None or (isinstance(runner, str) and runner.lower() in _DIRECT_NAMES):
        return beam.Pipeline(runner=direct_runner(options), options=options)
    return beam.Pipeline(options=options)
