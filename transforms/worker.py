"""What okl's DoFns do to the process they run in: keep Python's collector off the heap they start with.

A Beam SDK worker process (``python -m apache_beam.runners.worker.sdk_worker_main``: the
DirectRunner's ``multi_processing`` workers, Prism's and Flink's process or Docker
environments, Dataflow) holds Beam, pyarrow, numba and okl once they are imported: about
200,000 objects that live as long as the process. Python's cyclic collector walks all of
them in each full collection and once more when the interpreter exits. That last walk
is the expensive one: 0.38-0.48 s per worker (mfogd, 2 workers, 20,000 rows, from the
worker's exit handlers to its ``exit_group``, strace), and the DirectRunner stops its
workers one after the other, so a local 2-worker job waited ~0.9 s after its last row for
nothing (with :func:`settle_worker_process`: 23-43 ms per worker).

:func:`settle_worker_process` moves the objects alive when a DoFn is set up into the
collector's permanent generation (``gc.freeze``), and freezes again at exit, so neither
the full collections during the job nor the final one walk them again. Objects created
afterwards are collected as usual; what is frozen is freed with the process. Only
dedicated workers do this: a pipeline run in the caller's own process (the DirectRunner
in-process, LOOPBACK) leaves the caller's collector alone, since freezing a notebook's heap
would keep its unreachable cycles alive for good.
"""

from __future__ import annotations

import atexit
import gc
import sys

__all__ = ["settle_worker_process", "is_sdk_worker_process", "SDK_WORKER_MAIN"]

SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"
"""The module a Beam SDK worker process runs as ``__main__`` (``python -m ...``)."""

_AT_EXIT: list[bool] = []


def is_sdk_worker_process() -> bool:
    """True when this process is a Beam SDK worker (its ``__main__`` is :data:`SDK_WORKER_MAIN`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == SDK_WORKER_MAIN


def settle_worker_process() -> bool:
    """In a Beam SDK worker, freeze the objects alive now and skip the collector's walk at exit.

    Called from the ``setup`` of okl's DoFns; does nothing in any other process. Returns
    whether it froze.
    """
    if not is_sdk_worker_process():
        return False
    gc.freeze()
    if not _AT_EXIT:
        _AT_EXIT.append(True)
        atexit.register(gc.freeze)  # runs before the interpreter's final collection
    return True
