"""settle_worker_process: freezes the heap in Beam's SDK worker processes, and nowhere else; capacity errors' one line."""

from __future__ import annotations

import gc
import os

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import okl_core
from pipelines.common import make_pipeline
from transforms.worker import is_sdk_worker_process, settle_worker_process


def _settle_in_step(options: list[str]) -> None:
    """Run settle_worker_process inside a Beam step; assert what it did there."""
    launcher = os.getpid()

    def settle(_):
        settled = settle_worker_process()
        frozen = gc.get_freeze_count()
        later = [[i] for i in range(1000)]  # objects created after the first call stay the collector's
        settle_worker_process()
        # Not ==: the worker's other threads may free frozen objects meanwhile (a worker that
        # ran earlier pipelines' bundles); freezing ``later`` would add 1,000 or more.
        return settled, frozen > 0 and gc.get_freeze_count() <= frozen and len(later) == 1000, os.getpid() != launcher

    with make_pipeline(PipelineOptions(options)) as p:  # okl's DirectRunner: the FnApiRunner
        seen = p | beam.Create([0]) | beam.Map(settle)
        in_worker = "--direct_running_mode=multi_processing" in options
        assert_that(seen, equal_to([(in_worker, in_worker, in_worker)]))


def test_a_pipeline_in_the_callers_process_leaves_its_collector_alone():
    before = gc.get_freeze_count()
    _settle_in_step(["--runner=DirectRunner"])
    assert not is_sdk_worker_process()
    assert gc.get_freeze_count() == before


def test_beams_multi_processing_workers_freeze_their_heap():
    # The real worker processes of the DirectRunner (python -m apache_beam...sdk_worker_main).
    _settle_in_step(["--runner=DirectRunner", "--direct_num_workers=1", "--direct_running_mode=multi_processing"])



def test_the_capacity_line_is_found_in_what_each_runner_raises():
    """In-process runners re-raise the CapacityError (Beam appends the step to a copy chained to the
    original); worker processes, Prism and Flink raise a RuntimeError holding the worker's traceback as text."""
    from transforms.worker import capacity_error_line

    line = "kernel_ogd: the support set would exceed max_support=5; raise max_support"
    in_process = okl_core.CapacityError(line + " [while running 'TrainOnline_r0/FoldShard/ParDo(_FoldShard)']")
    in_process.__context__ = okl_core.CapacityError(line)
    remote = RuntimeError("Pipeline job failed:\nTraceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                          f"okl_core.learners.support.CapacityError: {line}\n\nDuring handling ...\n"
                          f"okl_core.learners.support.CapacityError: {line} [while running 'TrainOnline_r0/FoldShard']\n")
    chained = RuntimeError("wrapper")
    chained.__cause__ = in_process
    for err in (in_process, remote, chained):
        assert capacity_error_line(err) == line
    assert capacity_error_line(ValueError("kernel_ogd: X contains NaN or inf")) is None
    assert capacity_error_line(RuntimeError("ValueError: something else would exceed x=1 but no semicolon")) is None
    prefixed = RuntimeError(f"Caused by: java.lang.RuntimeError: Error received from SDK harness\n"
                            f"E   okl_core.learners.support.CapacityError: {line}\n")
    assert capacity_error_line(prefixed) == line


def test_a_capacity_error_is_found_in_what_a_real_pipeline_raises():
    """The error a real in-process job and a real worker process end in (not a hand-made one)."""
    from okl_core.learners.support import cap_error
    from transforms.worker import capacity_error_line

    def over_cap(_):
        raise cap_error("kernel_ogd", "max_support", 5, "the support set", "raise max_support")

    for options in (["--runner=DirectRunner"], ["--direct_num_workers=1", "--direct_running_mode=multi_processing"]):
        try:
            with make_pipeline(PipelineOptions(options)) as p:
                p | beam.Create([0]) | beam.Map(over_cap)
        except Exception as err:  # noqa: BLE001  (whatever the runner raises)
            assert capacity_error_line(err) == "kernel_ogd: the support set would exceed max_support=5; raise max_support", options
        else:
            raise AssertionError(f"{options}: the job did not fail")


def test_worker_processes_get_the_jobs_options_and_the_launchers_environment_is_left_alone():
    """okl's multi_processing workers read the job's options (logging at errors unless given) from
    the file their own PIPELINE_OPTIONS_FILE names; the launcher's environment never names one."""
    import json

    def options_seen(_):
        path = os.environ.get("PIPELINE_OPTIONS_FILE")
        with open(path) as f:
            options = json.load(f)["options"]
        return os.getpid() != launcher, options["default_sdk_harness_log_level"], options["direct_running_mode"]

    launcher = os.getpid()
    with make_pipeline(PipelineOptions(["--direct_num_workers=1", "--direct_running_mode=multi_processing"])) as p:
        assert_that(p | beam.Create([0]) | beam.Map(options_seen), equal_to([(True, "ERROR", "multi_processing")]))
    assert "PIPELINE_OPTIONS_FILE" not in os.environ
