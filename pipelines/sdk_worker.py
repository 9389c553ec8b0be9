"""``python -m pipelines.sdk_worker``: a local Beam SDK worker process, quiet, stopped by its launcher.

The DirectRunner's ``multi_processing`` workers (``--direct_running_mode multi_processing``)
run Beam's own worker, ``apache_beam.runners.worker.sdk_worker_main``, through this module
(:func:`pipelines.common.make_pipeline` names it as the workers' command). Before Beam's
worker starts, it sets up the two things that cannot be set from the job's options, because
they happen before the worker reads them:

* **Stops.** A terminal's Ctrl-C, and a SIGTERM sent to the whole process group (systemd,
  a CI runner), reach every process of the command, the workers too. The workers ignore
  both: the command that started them handles the stop (:func:`pipelines.cli.main`) and
  ends the job, which ends them. Otherwise each worker printed its own KeyboardInterrupt
  traceback, and the others their broken connections to the command (some ninety lines
  before the command's ``interrupted``).
* **Console logging.** The workers' console (the command's stderr) carries warnings and
  errors only, formatted as the commands format theirs, without the stray warnings Beam's
  modules log on the root logger (:class:`pipelines.cli.BeamNoise`), nor the worker's own
  start-up warnings (Beam 2.62's "No semi_persistent_directory found": its module runs as
  ``__main__``, whose logger is kept at ERROR). Beam's worker logs its start-up at INFO
  (``Logging handler created.``, ``Load pipeline options from file: ...``) before it reads
  the job's log level (``--default_sdk_harness_log_level``, ERROR for these workers) from
  the options; without a handler of the worker's own, the "apitools not found" warning
  gave the root logger Python's default one, and those lines reached the console.

Everything else is Beam's worker, unchanged: it runs as ``__main__`` as it does when started
with ``python -m`` (:func:`transforms.worker.is_sdk_worker_process` recognises it).
"""

from __future__ import annotations

import logging
import os
import runpy
import signal
import sys

from pipelines.cli import BEAM_NOISE

__all__ = ["main"]

_BEAM_WORKER = "apache_beam.runners.worker.sdk_worker_main"  # transforms.worker.SDK_WORKER_MAIN (not imported: it imports Beam)
_CONSOLE_FORMAT = "%(levelname)s %(name)s: %(message)s"  # pipelines.common.configure_logging's


def _quiet_console() -> None:
    """A console handler of the worker's own: warnings and errors, without Beam's noise nor a
    learner's capacity error, whose one line the command prints (:func:`transforms.worker.quiet_capacity_traces`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(_CONSOLE_FORMAT))
    handler.addFilter(BEAM_NOISE)
    root = logging.getLogger()
    root.addHandler(handler)
    root.addFilter(BEAM_NOISE)
    logging.getLogger("__main__").setLevel(logging.ERROR)  # Beam's worker module, run as __main__ (its _LOGGER's name)
    from transforms.worker import quiet_capacity_traces  # imports Beam: once the handler and filter are in place

    quiet_capacity_traces()


def main(argv: list[str] | None = None) -> None:
    """Ignore Ctrl-C and SIGTERM, log warnings and errors only, then run Beam's SDK worker.

    ``argv`` (default: the command line): the job's options file, if any, which Beam's worker
    reads from ``PIPELINE_OPTIONS_FILE`` (:func:`pipelines.common._worker_options_file`).
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    _quiet_console()
    options_file = (sys.argv[1:] if argv is None else argv)[:1]
    if options_file:
        os.environ["PIPELINE_OPTIONS_FILE"] = options_file[0]  # this worker's own environment, which Beam's worker reads
    runpy.run_module(_BEAM_WORKER, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
