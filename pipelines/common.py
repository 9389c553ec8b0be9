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
logs on the console). ``multi_processing`` workers start through
:mod:`pipelines.sdk_worker` (BLAS threads shared out among the workers, no import-time
log lines on the console).
"""

from __future__ import annotations

import logging
import os
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, PortableOptions, StandardOptions, WorkerOptions

__all__ = ["UsageError", "pipeline_options", "make_pipeline", "direct_runner", "configure_logging"]

_DIRECT_NAMES = {"directrunner", "direct"}


class UsageError(ValueError):
    """A problem with the command line or its inputs, reported without a traceback."""


def configure_logging() -> None:
    """Console logging for the CLIs: okl at INFO, Beam at WARNING (unless already set up)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("okl", "pipelines", "transforms"):
        logging.getLogger(name).setLevel(logging.INFO)


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


def _local_runner_class():
    """The FnApiRunner, with multi-process workers started through :mod:`pipelines.sdk_worker`."""
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    class LocalRunner(fn_runner.FnApiRunner):
        def run_via_runner_api(self, pipeline_proto, options):
            cores = os.cpu_count() or 1
            workers = options.view_as(DirectOptions).direct_num_workers or cores  # 0 means one per core
            command = f"{sys.executable} -m pipelines.sdk_worker {max(1, cores // max(1, workers))}".encode()
            for environment in pipeline_proto.components.environments.values():
                if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload.decode().endswith(_BEAM_WORKER_COMMAND):
                    environment.payload = command
            return super().run_via_runner_api(pipeline_proto, options)

    return LocalRunner


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
