"""Entry point of the SDK worker processes of local multi-process runs (``multi_processing``).

Beam's FnApiRunner starts each worker as ``python -m apache_beam.runners.worker.sdk_worker_main``;
okl's local runner (:func:`pipelines.common.direct_runner`) starts them through this
module instead, which does two things before handing over to Beam's worker:

* BLAS gets ``BLAS_THREADS`` threads per worker (the argument; cores // workers, at least
  one) unless the environment already says otherwise: with one worker per core, BLAS's
  own threads would compete for the same cores (FOGD on 2 cores, 2 workers: about 25%
  slower end to end).
* The root logger gets a handler before Beam is imported. The worker sends its logs to
  the launcher over the Fn API (shown at ``--default_sdk_harness_log_level``), but import-
  time messages such as Beam's "apitools not found" warning about BigQuery clients, and
  its "Logging handler created." line, would otherwise reach the console through
  ``logging``'s default console set-up.

Usage: ``python -m pipelines.sdk_worker BLAS_THREADS`` (the runner passes the rest in the
environment, as for Beam's own worker).
"""

from __future__ import annotations

import logging
import os
import sys

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv: list[str]) -> None:
    """Set BLAS threads and quiet console logging, then run Beam's SDK worker."""
    threads = argv[1] if len(argv) > 1 else "1"
    for name in BLAS_VARIABLES:
        os.environ.setdefault(name, threads)  # before numpy is imported
    logging.getLogger().addHandler(logging.NullHandler())
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(argv)
    # The harness has finished every bundle and closed its log channel: skip the
    # interpreter's teardown (joining idle pool threads, freeing every module), which
    # the launcher would otherwise wait for at the end of each run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
