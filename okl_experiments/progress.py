"""Progress shown on stderr while commands work: one bar drawing, two displays.

* :class:`ProgressBar` -- a redrawn bar for work measured in bytes or rows (data
  preparation, downloads): implements :class:`okl_core.data.sources.Progress`, tqdm when
  installed, else a plain line; redraws at most a few times per second and stays silent
  when stderr is not a terminal unless forced, so logs and CI output stay clean.
* :class:`RunProgress` -- one line per finished run of a sweep: the bar, counts, elapsed
  and remaining time, and the run's metric (lines, not redraws: they are the sweep's log).
* :class:`LiveProgress` -- a redrawn line of a running Beam pipeline (``train``, ``predict``):
  rows done and rows/s per shard, read from the :class:`okl_core.heartbeat.Heartbeat` files
  its steps write (why files and not Beam's metrics: :mod:`okl_core.heartbeat`).
"""

from __future__ import annotations

import collections
import math
import os
import shutil
import sys
import tempfile
import threading
import time

from okl_core.heartbeat import read_heartbeats
from okl_experiments.text import format_value

__all__ = ["ProgressBar", "RunProgress", "bar", "PROGRESS_ENV", "progress_wanted", "process_start_time", "wall_time_text", "LiveProgress"]


def bar(fraction: float, width: int, fill: str = "#", empty: str = " ") -> str:
    """``[####    ]``-style bar text (without brackets) of ``fraction`` in [0, 1]."""
    filled = int(width * min(max(fraction, 0.0), 1.0))
    return fill * filled + empty * (width - filled)


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def _human(value: float, unit: str) -> str:
    if unit == "B":
        for scale, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= scale:
                return f"{value / scale:.1f} {suffix}"
        return f"{value:.0f} B"
    return f"{value:,.0f} {unit}"


class ProgressBar:
    """Progress sink drawing ``label [#####.....] 45% 1.2 GiB/2.6 GiB 12.3 MiB/s ETA 1:40``.

    Parameters
    ----------
    enabled : bool or None
        None: draw only when stderr is a terminal.
    stream : file, optional
        Where to draw (stderr).
    interval : float
        Seconds between redraws.
    """

    def __init__(self, enabled: bool | None = None, stream=None, interval: float = 0.2):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else bool(enabled)
        self.interval = interval
        self._tqdm = None
        self._total = None
        self._unit = ""
        self._label = ""
        self._started = 0.0
        self._last_draw = 0.0
        self._done = 0
        self._samples: collections.deque[tuple[float, int]] = collections.deque([(0.0, 0)])

    def start(self, total, unit, label):
        self.finish()
        self._total, self._unit, self._label = total, unit, label
        self._started = self._last_draw = time.perf_counter()
        self._done = 0
        self._samples = collections.deque([(self._started, 0)])
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._tqdm = tqdm(total=total, unit=unit, unit_scale=True, unit_divisor=1024 if unit == "B" else 1000, desc=label, file=self.stream, leave=False)

    def update(self, done):
        delta, self._done = done - self._done, done
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.update(delta)
            return
        now = time.perf_counter()
        if now - self._last_draw >= self.interval:
            self._last_draw = now
            self._draw(now)

    RATE_WINDOW = 20.0
    """Seconds of recent progress the rate and ETA are measured over: the work's first seconds
    (warming up, e.g. RDKit's first molecules) would otherwise weigh on the estimate for the
    whole run -- measured from the start, a 62 s molecular conversion showed ETA 1:46 at 10%.
    The window opens at the first progress reported (what came before it is start-up)."""

    def rate(self, now: float) -> float:
        """Units per second over the last :attr:`RATE_WINDOW` seconds (from the start until then)."""
        if self._samples[-1][1] == 0 and self._done > 0:  # measure from the first progress, not from the start
            self._samples.clear()
        self._samples.append((now, self._done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.RATE_WINDOW:
            self._samples.popleft()
        then, done_then = self._samples[0]
        if now - then < 1.0:  # too short a window to tell: since the start
            then, done_then = self._started, 0
        return (self._done - done_then) / max(now - then, 1e-9)

    def _draw(self, now):
        rate = self.rate(now)
        text = f"{self._label} {_human(self._done, self._unit)}"
        if self._total:
            frac = min(1.0, self._done / self._total)
            eta = (self._total - self._done) / rate if rate > 0 else 0
            text = f"{self._label} [{bar(frac, 30)}] {frac:4.0%} {_human(self._done, self._unit)}/{_human(self._total, self._unit)} ETA {_clock(eta)}"
        text += f" {_human(rate, self._unit)}/s"
        self.stream.write("\r" + text[:120].ljust(120))
        self.stream.flush()

    def finish(self):
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self.enabled and self._label:
            self.stream.write("\r" + " " * 120 + "\r")
            self.stream.flush()
        self._label = ""


class RunProgress:
    """One line per finished run on ``stream`` (None: silent), e.g.
    ``[####....] 4/8 runs, 1/2 points, 3.1 s, ~3 s left | point 0 (sigma=1) run 3: online_mistake_rate 0.1520 (0.74 s)``.
    """

    def __init__(self, total_runs: int, total_points: int, metric: str, stream=None, width: int = 20):
        self.total_runs, self.total_points, self.metric = total_runs, total_points, metric
        self.stream, self.width = stream, width
        self.runs = self.points = 0
        self.start = time.perf_counter()

    def run_done(self, result: dict, point_index: int, swept: dict) -> None:
        """Count a run (``result`` of :func:`okl_experiments.runs.run_task`) and print its line."""
        self.runs += 1
        if self.stream is None:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.runs * (self.total_runs - self.runs)
        values = ", ".join(f"{k}={format_value(v)}" for k, v in swept.items()) or "-"
        outcome = (f"{self.metric} {result['metrics'].get(self.metric, math.nan):.4f}" if result["ok"] else f"FAILED {result['error']}")
        if result.get("diverged"):
            outcome += f", DIVERGED {result['diverged']}"
        print(f"[{bar(self.runs / max(self.total_runs, 1), self.width, empty='.')}] {self.runs}/{self.total_runs} runs, "
              f"{self.points}/{self.total_points} points, {elapsed:.1f} s, ~{eta:.0f} s left | "
              f"point {point_index} ({values}) run {result['run']}: {outcome} ({result['seconds']:.2f} s)",
              file=self.stream, flush=True)

    def point_done(self) -> None:
        """Count a point whose runs have all finished."""
        self.points += 1


# -- progress of running pipelines ----------------------------------------------------
PROGRESS_ENV = "OKL_PROGRESS"
"""``OKL_PROGRESS=1`` draws progress even when stderr is not a terminal; ``0`` never draws it."""


def progress_wanted(stream=None) -> bool:
    """Whether to draw progress on ``stream`` (stderr): ``$OKL_PROGRESS`` if set, else a terminal."""
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def _proc_start_time() -> float | None:
    """Start of this process (seconds since the epoch) from Linux's /proc, or None elsewhere.

    Its age is the system's uptime less the process's start after boot (both to the clock
    tick), subtracted from now: /proc/stat's boot time is whole seconds, so adding the start
    to it was off by up to a second (a 2.1 s ``make run`` reported 2.3 s from process start).
    """
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time, clock ticks after boot
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


_IMPORTED_AT = time.time()


def process_start_time() -> float:
    """When this process started (seconds since the epoch): interpreter start-up, imports and
    launch all come after it. Linux's /proc gives it to the clock tick; elsewhere it is when
    this module was first imported (the CLIs import it before Beam)."""
    started = _proc_start_time()
    return started if started is not None and started <= _IMPORTED_AT else _IMPORTED_AT


def wall_time_text(launched_at: float, job_seconds: float | None = None, from_process_start: bool = True) -> str:
    """``4.2 s wall time from process start (1.3 s start-up: interpreter, imports, resolving the inputs; 2.8 s job)``.

    ``launched_at``: when the command had its inputs resolved and started the job;
    ``job_seconds``: how long the job took from then, when known. ``from_process_start``:
    False when the command runs inside a longer-lived process (a notebook, a script
    calling ``run``), whose start says nothing about this run: the time then counts from
    ``launched_at`` (``2.8 s wall time from the call of run (2.8 s job)``).
    """
    now = time.time()
    job = f"{job_seconds:.1f} s job" if job_seconds is not None else ""
    if not from_process_start:
        return f"{now - launched_at:.1f} s wall time from the call of run" + (f" ({job})" if job else "")
    started = process_start_time()
    text = f"{now - started:.1f} s wall time from process start ({max(0.0, launched_at - started):.1f} s start-up: interpreter, imports, resolving the inputs"
    return text + (f"; {job})" if job else ")")


def _rate(rows: float, seconds: float) -> str:
    return f"{rows / seconds:,.0f} rows/s" if seconds > 0 else "- rows/s"


class LiveProgress:
    """A redrawn line of a running pipeline's progress on stderr, from :class:`~okl_core.heartbeat.Heartbeat` files.

    ``label [#####.....] 45% 14,652/32,561 rows, 9,812 rows/s | shard 0: 4,096 rows 3,120 rows/s | ... 2.1 s``

    A background thread reads the heartbeats in a temporary directory (``directory``, made
    here; the steps' :class:`~okl_core.heartbeat.Heartbeat` writes there) every ``interval`` seconds. Files are
    named ``shard-<k>-r<round>`` (one entry per shard, rounds summed; with more than
    ``max_shown`` shards, their count and range of rates instead) or anything else (summed
    into the total only: e.g. one file per bundle of a prediction step).
    Used as a context manager; disabled (no thread, ``directory`` None) unless ``enabled``.
    On leaving, the last line is drawn once more and kept (the job's rows and rates).
    """

    def __init__(self, label: str, total_rows: int, enabled: bool, stream=None, interval: float = 0.5, max_shown: int = 4):
        self.label, self.total, self.enabled = label, total_rows, enabled
        self.stream = stream or sys.stderr
        self.interval, self.max_shown = interval, max_shown
        self.directory: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.time()
        self._width = 0
        self._last_done, self._last_change = 0.0, 0.0

    def __enter__(self) -> "LiveProgress":
        if self.enabled:
            self.directory = tempfile.mkdtemp(prefix="okl-progress-")
            self._thread = threading.Thread(target=self._loop, name="okl-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            assert self.directory is not None  # made with the thread
            self._draw(self.line(read_heartbeats(self.directory)))  # the final state stays on screen
            self.stream.write("\n")
            self.stream.flush()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _loop(self) -> None:
        assert self.directory is not None  # made before the thread starts
        while not self._stop.wait(self.interval):
            try:
                self._draw(self.line(read_heartbeats(self.directory)))
            except OSError:
                return

    def line(self, beats: dict[str, dict]) -> str:
        """The progress line for the heartbeats ``beats`` (name -> ``{"rows", "seconds"}``)."""
        elapsed = time.time() - self._started
        parts: dict[str, list[float]] = {}
        for name, beat in beats.items():
            key = name.split("-r")[0]
            rows, seconds = parts.setdefault(key, [0.0, 0.0])
            parts[key] = [rows + beat["rows"], seconds + beat["seconds"]]
        done = sum(rows for rows, _ in parts.values())
        if not parts:
            return f"{self.label}: starting the pipeline ({self.total:,} rows) ... {elapsed:.1f} s"
        if done != self._last_done:  # the rate up to the latest row: merging and writing after it do not dilute it
            self._last_done, self._last_change = done, elapsed
        frac = done / self.total if self.total else 0.0
        text = f"{self.label} [{bar(frac, 20, empty='.')}] {frac:4.0%} {done:,.0f}/{self.total:,} rows, {_rate(done, self._last_change)}"
        if not all(key.startswith("shard-") for key in parts):  # bundles of one step: the total says it all
            pass
        elif len(parts) <= self.max_shown:
            text += "".join(f" | {key.replace('-', ' ')}: {rows:,.0f} rows {_rate(rows, seconds)}" for key, (rows, seconds) in parts.items())
        else:
            rates = [rows / seconds for rows, seconds in parts.values() if seconds > 0]
            if rates:
                text += f" | {len(parts)} shards: {min(rates):,.0f}-{max(rates):,.0f} rows/s each"
        return text + f" | {elapsed:.1f} s"

    def _draw(self, text: str) -> None:
        width = max(40, shutil.get_terminal_size((120, 24)).columns - 1)
        text = text[:width]
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)
