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

:func:`settle_worker_process` collects once, then moves the objects alive into the
collector's permanent generation (``gc.freeze``), the first time one of okl's DoFns is set up
in the process, and freezes again at exit; so neither the full collections during the job
nor the final one walk them again. Only the first call does this: objects created later
(states, batches, a failed bundle's traceback and what it holds) stay the collector's, and
since nothing unreachable is frozen, nothing is kept alive that would otherwise be freed.
Only dedicated workers do this: a pipeline run in the caller's own process (the DirectRunner
in-process, LOOPBACK) leaves the caller's collector alone.

A learner that outgrows a cap of its config (:class:`okl_core.CapacityError`: ``max_support``,
``max_rows``, ...) ends the job; the command then prints the error's one line
(:func:`capacity_error_line` finds it in whatever the runner raises), and
:func:`quiet_capacity_traces`, installed by the CLIs and by okl's local worker processes
(:mod:`pipelines.sdk_worker`), the processes whose console is the user's terminal, keeps the
runners' tracebacks of it off that console: the ones they log, and the copy Beam's SDK harness
prints to ``sys.stderr`` (``sdk_worker.py``: in the launcher itself when its workers are
threads of it, ``LOOPBACK`` on Prism or ``multi_threading``). Remote workers (Flink's,
Dataflow's) keep theirs in their logs.
"""

from __future__ import annotations

import atexit
import gc
import logging
import sys
import threading

import okl_core

__all__ = ["settle_worker_process", "is_sdk_worker_process", "SDK_WORKER_MAIN", "capacity_error_line", "quiet_capacity_traces"]

SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"
"""The module a Beam SDK worker process runs as ``__main__`` (``python -m ...``)."""

_SETTLED: list[bool] = []


def is_sdk_worker_process() -> bool:
    """True when this process is a Beam SDK worker (its ``__main__`` is :data:`SDK_WORKER_MAIN`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == SDK_WORKER_MAIN


def settle_worker_process() -> bool:
    """In a Beam SDK worker, the first time: collect, freeze what is alive, and freeze again at exit.

    Called from the ``setup`` of okl's DoFns; later calls, and calls in any other process,
    do nothing. Returns whether this process is settled.
    """
    if not is_sdk_worker_process():
        return False
    if not _SETTLED:
        _SETTLED.append(True)
        gc.collect()  # nothing unreachable is frozen with the rest (one full collection: 0.09 s in a worker, once)
        gc.freeze()
        atexit.register(gc.freeze)  # runs before the interpreter's final collection
    return True


_CAPACITY_TYPE = f"{okl_core.CapacityError.__module__}.{okl_core.CapacityError.__qualname__}: "
"""How a :class:`okl_core.CapacityError` begins its line in a traceback's text (Python's format:
``module.Class: message``), where it reaches the launcher as text: a worker process's,
Prism's or Flink's failed bundle hands back the worker's traceback as a string."""


def _capacity_in_text(text: str) -> str | None:
    """The message of the first :class:`okl_core.CapacityError` in a traceback's ``text``, or None.

    The first: a runner that re-raises an error with its step appended chains it to the
    original, which the traceback holds first, as the learner raised it.
    """
    for line in text.splitlines():
        at = line.find(_CAPACITY_TYPE)  # at the line's start, unless a runner prefixed the worker's lines
        if at >= 0:
            return line[at + len(_CAPACITY_TYPE):]
    return None


def capacity_error_line(err: BaseException) -> str | None:
    """The :class:`okl_core.CapacityError` message that ended a job, if one did (else None).

    A learner outgrowing its config's cap is the config's limit, not a defect: the command
    reports that one line (which names the parameter to raise) instead of Beam's traceback.
    Found by type in the chain of ``err`` (an in-process runner re-raises the learner's error,
    a copy of its type with the step appended, chained to the original: the original's message
    is the one line), or in the traceback text a worker's error carries (:func:`_capacity_in_text`).
    """
    seen: set[int] = set()
    found: str | None = None
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, okl_core.CapacityError):
            found = str(current)  # the last one in the chain: the learner's own
        elif found is None:
            found = _capacity_in_text(str(current))
        current = current.__cause__ or current.__context__
    return found


class _DropCapacityTraces(logging.Filter):
    """Drop the runners' ERROR logs of a :class:`okl_core.CapacityError` (a DoFn's traceback,
    a worker's relayed one): the command prints the error's one line instead
    (:func:`capacity_error_line`); any other error keeps its logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        if record.exc_info and record.exc_info[1] is not None and capacity_error_line(record.exc_info[1]) is not None:
            return False
        return _capacity_in_text(record.getMessage()) is None


_CAPACITY_TRACES = _DropCapacityTraces()


class _QuietCapacityStderr:
    """``sys.stderr`` without the tracebacks of a :class:`okl_core.CapacityError` that Beam's SDK
    harness prints (``print(traceback, file=sys.stderr)``: the text, then print's newline,
    both dropped); every other write, and every other attribute, is the stream's.

    The one stream okl replaces, because no configuration reaches that copy: Beam's
    ``SdkHarness._execute`` prints a failed instruction's traceback with ``print`` (beside
    logging it, which :class:`_DropCapacityTraces` handles), so neither a logging filter nor
    a level keeps it off the console of a process that runs an SDK harness (the command, when
    its workers are threads of it; a local worker process).
    """

    def __init__(self, stream):
        self.stream = stream
        self._dropped = threading.local()  # print's newline follows the text in the same thread

    def write(self, text: str) -> int:
        if text.startswith("Traceback (most recent call last)") and _capacity_in_text(text) is not None:
            self._dropped.last = True
            return len(text)
        if text == "\n" and getattr(self._dropped, "last", False):
            self._dropped.last = False
            return len(text)
        self._dropped.last = False
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def quiet_capacity_traces() -> None:
    """Drop capacity errors' tracebacks from this process's console (the CLIs, and okl's local
    worker processes, whose traceback would reach the same terminal): its logs and Beam's printed
    copy; idempotent."""
    for handler in logging.getLogger().handlers:  # handlers, not the root logger: Beam's loggers' records reach them directly
        if _CAPACITY_TRACES not in handler.filters:
            handler.addFilter(_CAPACITY_TRACES)
    if sys.stderr is not None and not isinstance(sys.stderr, _QuietCapacityStderr):
        sys.stderr = _QuietCapacityStderr(sys.stderr)
