"""Heartbeat files: rows a running pipeline step has done so far, for a progress display.

Why files and not Beam's metrics: the steps do count their rows as Beam counters
(``rows_trained``), but no public Beam API shows them while a local job runs. The
FnApiRunner (``--runner=DirectRunner``) blocks in ``run()`` and reports metrics only when
the job ends (its progress requests to workers take no public callback); the
PortableRunner's result (Prism, Flink) fetches ``metrics()`` from the job service once and
caches it. A step on a local worker writes a small JSON file instead, at most four times a
second, into a temporary folder the launcher reads (:class:`Heartbeat`,
:func:`read_heartbeats`; drawn by :class:`okl_experiments.progress.LiveProgress`); the
final summary still comes from Beam's counters and ``metrics.json``.
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["Heartbeat", "read_heartbeats"]


class Heartbeat:
    """Rows a pipeline step has done so far, written for a progress display to read.

    The step (a DoFn on a local worker: in-process, a worker process or Prism's loopback
    workers) calls :meth:`beat` as it goes; at most every ``interval`` seconds it replaces
    ``<directory>/<name>.json`` (``{"rows", "seconds"}``, atomically), and always on
    ``done``. A ``directory`` of None makes it a no-op.
    """

    def __init__(self, directory: str | None, name: str, interval: float = 0.25):
        self.path = None if directory is None else os.path.join(directory, name + ".json")
        self.interval = interval
        self.started = time.time()
        self._last = 0.0

    def beat(self, rows: int, done: bool = False) -> None:
        """Record ``rows`` done so far (throttled unless ``done``); never fails the step."""
        if self.path is None:
            return
        now = time.time()
        if not done and now - self._last < self.interval:
            return
        self._last = now
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump({"rows": int(rows), "seconds": now - self.started, "done": done}, f)
            os.replace(tmp, self.path)
        except OSError:  # progress is best effort: the job's outputs do not depend on it
            pass


def read_heartbeats(directory: str) -> dict[str, dict]:
    """The :class:`Heartbeat` records in ``directory``: name -> ``{"rows", "seconds", "done"}``."""
    beats = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            try:
                with open(os.path.join(directory, name)) as f:
                    beats[name[:-5]] = json.load(f)
            except (OSError, ValueError):
                continue  # replaced while read: next time
    return beats
