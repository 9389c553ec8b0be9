"""Ctrl-C ends ``pipelines.train`` and ``pipelines.sweep`` with one line and exit status 130, and
leaves no half-written output. The signal goes to the whole process group, as a terminal sends it."""

import glob
import os
import pathlib
import signal
import subprocess
import sys
import time

from okl_experiments.sweep import read_results
from tests.conftest import sweep_binary_data, warm_folds

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _start(argv):
    return subprocess.Popen([sys.executable, "-m", *argv], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _interrupt_when(proc, pattern: str, then: float, timeout: float = 120):
    """Send SIGINT to ``proc``'s group ``then`` seconds after a path matches ``pattern``; its stdout, stderr."""
    deadline = time.monotonic() + timeout
    while not glob.glob(pattern):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{pattern} never appeared"
        time.sleep(0.05)
    time.sleep(then)
    assert proc.poll() is None, "the job ended before it was interrupted: make it longer"
    os.killpg(proc.pid, signal.SIGINT)
    return proc.communicate(timeout=60)


def _hidden_or_temporary(root: pathlib.Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.startswith(".") or "tmp" in p.name]


def test_ctrl_c_ends_train_with_one_line(tmp_path):
    out = tmp_path / "run"
    warm_folds("kernel_ogd_r")  # a first use's "compiling" line is not what this test is about
    # The demo writes its data set into the run's staging folder (.run.tmp-*, published with the
    # run when it ends), then trains: kernel OGD over 100,000 rows takes about a minute.
    proc = _start(["pipelines.train", "--synthetic_rows", "100000", "--learner", "kernel_ogd_r", "--output", str(out)])
    _, err = _interrupt_when(proc, str(tmp_path / ".run*" / "data" / "train" / "dataset.json"), then=2.0)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["python -m pipelines.train: interrupted"], err[-3000:]
    assert os.listdir(tmp_path) == []  # no run published, no staging folder or lock left behind


def test_ctrl_c_ends_a_sweep_with_one_line_and_its_finished_points(tmp_path):
    sweep_binary_data(tmp_path / "data")
    warm_folds("kernel_ogd")
    out = tmp_path / "sweep"
    proc = _start(["pipelines.sweep", "--input", str(tmp_path / "data"), "--learner", "kernel_ogd", "--grid", "sigma=0.5,1,2,4",
                   "--repeats", "100", "--num_workers", "2", "--output", str(out)])
    _, err = _interrupt_when(proc, str(out / "results.parquet"), then=0.5)  # written when the first point is complete
    assert proc.returncode == 130
    lines = err.strip().splitlines()
    assert lines[-1] == "python -m pipelines.sweep: interrupted", err[-3000:]
    assert "Traceback" not in err and all(not line.startswith(("ERROR", "WARNING")) for line in lines), err[-3000:]
    rows, _ = read_results(str(out / "results.parquet"))  # complete, with the points that finished
    assert 1 <= len(rows) < 4 and all(r["status"] == "ok" and r["runs"] == 100 for r in rows)
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet"]
    assert _hidden_or_temporary(out) == []
