"""A small progress bar on stderr for the CLIs (tqdm when installed, else a plain line).

Implements :class:`okl_core.data.sources.Progress`. Redraws at most a few times per second;
stays silent when stderr is not a terminal unless forced, so logs and CI output stay clean
(only the final summary line is printed).
"""

from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar"]


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
            bar = "#" * int(frac * 30)
            eta = (self._total - self._done) / rate if rate > 0 else 0
            text = f"{self._label} [{bar:<30}] {frac:4.0%} {_human(self._done, self._unit)}/{_human(self._total, self._unit)} ETA {int(eta) // 60}:{int(eta) % 60:02d}"
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
