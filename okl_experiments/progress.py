"""Progress shown on stderr while commands work: one bar drawing, two displays.

* :class:`ProgressBar` -- a redrawn bar for work measured in bytes or rows (data
  preparation, downloads): implements :class:`okl_core.data.sources.Progress`, tqdm when
  installed, else a plain line; redraws at most a few times per second and stays silent
  when stderr is not a terminal unless forced, so logs and CI output stay clean.
* :class:`RunProgress` -- one line per finished run of a sweep: the bar, counts, elapsed
  and remaining time, and the run's metric (lines, not redraws: they are the sweep's log).
"""

from __future__ import annotations

import math
import sys
import time

from okl_experiments.text import format_value

__all__ = ["ProgressBar", "RunProgress", "bar"]


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

    def start(self, total, unit, label):
        self.finish()
        self._total, self._unit, self._label = total, unit, label
        self._started = self._last_draw = time.perf_counter()
        self._done = 0
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

    def _draw(self, now):
        elapsed = max(now - self._started, 1e-9)
        rate = self._done / elapsed
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
