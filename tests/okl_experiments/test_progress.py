"""Progress displays: the bar's rate after a slow start, the live line from heartbeats, start-up time."""

import io
import os
import subprocess
import sys
import time

import pytest

from okl_core.heartbeat import Heartbeat
from okl_experiments import progress
from okl_experiments.params import derived_line, derived_values
from okl_experiments.progress import LiveProgress, ProgressBar, process_start_time, progress_wanted


def test_rate_ignores_the_start_up_and_follows_recent_progress():
    bar = ProgressBar(enabled=False)
    bar.start(1000, "rows", "x")
    t0 = bar._started
    bar._done = 10
    bar.rate(t0 + 10.0)  # 10 s to the first 10 rows (warming up), then 100 rows/s
    bar._done = 110
    assert bar.rate(t0 + 11.0) == pytest.approx(100.0)  # measured from the start: 10 rows/s, ETA 10x too long
    for k in range(2, 60):  # then 10 rows/s for a minute: the window follows within 20 s
        bar._done = 110 + 10 * k
        rate = bar.rate(t0 + 10.0 + k)
    assert rate == pytest.approx(10.0)


def test_live_line_per_shard_summed_over_rounds_and_for_many_shards():
    live = LiveProgress("train", 1000, enabled=False)
    beats = {"shard-0-r0": {"rows": 200, "seconds": 1.0}, "shard-0-r1": {"rows": 100, "seconds": 1.0}, "shard-1-r0": {"rows": 250, "seconds": 0.5}}
    line = live.line(beats)
    assert "train [###########.........]  55% 550/1,000 rows, " in line
    assert "| shard 0: 300 rows 150 rows/s | shard 1: 250 rows 500 rows/s |" in line
    many = live.line({f"shard-{k}-r0": {"rows": 10, "seconds": 1.0 + k} for k in range(6)})
    assert "60/1,000 rows" in many and "| 6 shards: 2-10 rows/s each |" in many
    assert live.line({}).startswith("train: starting the pipeline (1,000 rows) ...")
    assert "predict-1" not in LiveProgress("predict", 10, enabled=False).line({"predict-1": {"rows": 4, "seconds": 1.0}})


def test_live_progress_draws_on_its_stream_and_keeps_the_last_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the line is cut at the terminal's width, which depends on where pytest runs
    stream = io.StringIO()
    with LiveProgress("train", 100, enabled=True, stream=stream, interval=0.05) as live:
        Heartbeat(live.directory, "shard-0-r0").beat(100, done=True)
        time.sleep(0.2)
    directory = live.directory
    assert not os.path.exists(directory)
    assert stream.getvalue().rstrip().endswith(" s") and "100/100 rows" in stream.getvalue().splitlines()[-1]
    with LiveProgress("train", 100, enabled=False) as off:
        assert off.directory is None


def test_progress_wanted_follows_the_terminal_unless_forced(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    assert not progress_wanted(io.StringIO())
    monkeypatch.setenv(progress.PROGRESS_ENV, "1")
    assert progress_wanted(io.StringIO())
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")
    assert not progress_wanted(io.StringIO())


def test_process_start_time_is_when_the_process_started():
    code = "import time; t = time.time(); time.sleep(0.3); from okl_experiments.progress import process_start_time as p; print(t, p())"
    launched = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    first_line, started = map(float, out.stdout.split())
    # After the launch (to the clock tick, 10 ms: /proc's boot time alone is whole seconds, and
    # adding to it put the start up to a second early) and before the first line ran.
    assert launched - 0.02 <= started <= first_line, (launched, started, first_line)
    assert process_start_time() <= time.time()


def test_derived_values_name_what_the_data_decided():
    derived = derived_values({"sigma": "0.2*median", "nu": "0.01/n", "loss": "hinge", "eta": 0.1},
                             {"sigma": 1.23456, "nu": 1e-7, "loss": "hinge", "eta": 0.1})
    assert derived == {"sigma": ("0.2*median", 1.23456), "nu": ("0.01/n", 1e-7)}
    assert derived_line(derived, 100000) == "nu=1e-07 (0.01/n), sigma=1.235 (0.2*median), n=100,000 rows"
