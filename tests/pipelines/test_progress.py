"""Live progress of pipelines.train and pipelines.predict: seen on a terminal, absent in logs.

The commands run as subprocesses with stderr on a pseudo-terminal (python's ``pty``), as a
user's shell runs them; the same commands with stderr on a pipe must print no progress.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# "train [####...]  42% 8,192/20,000 rows, 9,000 rows/s | shard 0: 4,096 rows 12,000 rows/s | shard 1: ... | 1.2 s"
PROGRESS = re.compile(r"train \[[#.]+\] +\d+% ([\d,]+)/20,000 rows, [\d,]+ rows/s \| shard 0: ([\d,]+) rows [\d,]+ rows/s \| shard 1: ([\d,]+) rows [\d,]+ rows/s")
TRAIN = ["-m", "pipelines.train", "--runner=DirectRunner", "--synthetic_rows", "20000", "--num_shards", "2", "--batch_rows", "1024"]


def _env():
    env = {k: v for k, v in os.environ.items() if k != "OKL_PROGRESS"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"  # room for both shards on the line
    return env


def _run_on_pty(args: list[str]) -> tuple[str, str]:
    """Run ``python args`` with stderr on a pseudo-terminal; its (stdout, terminal output)."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=child, env=_env(), cwd=ROOT)
    os.close(child)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    stdout = proc.communicate(timeout=120)[0].decode()
    os.close(main)
    assert proc.returncode == 0, seen.decode(errors="replace")
    return stdout, seen.decode(errors="replace")


def test_train_shows_rows_and_rates_per_shard_on_a_terminal(tmp_path):
    stdout, terminal = _run_on_pty([*TRAIN, "--output", str(tmp_path / "run")])
    lines = [m.groups() for m in PROGRESS.finditer(terminal)]
    assert lines, terminal
    done = [tuple(int(v.replace(",", "")) for v in groups) for groups in lines]
    assert done[-1] == (20000, 10000, 10000)  # the last line stays: every row of both shards
    assert all(total == a + b for total, a, b in done)
    assert [d[0] for d in done] == sorted(d[0] for d in done)  # never goes back
    # The summary: wall time from process start, and what the data decided.
    wall = re.search(r"([\d.]+) s wall time from process start \(([\d.]+) s start-up.*; ([\d.]+) s job\)", stdout)
    assert wall and float(wall[1]) >= float(wall[2]) + float(wall[3]) - 0.1, stdout
    assert re.search(r"from the data: sigma=[\d.e+-]+ \(0\.2\*median\), n=20,000 rows", stdout), stdout


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    proc = subprocess.run([sys.executable, *TRAIN, "--output", str(tmp_path / "run")], capture_output=True, text=True, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "rows/s" not in proc.stderr and "\r" not in proc.stderr
    assert "rows/s" not in proc.stdout and "wall time from process start" in proc.stdout


def test_predict_shows_rows_on_a_terminal(tmp_path):
    from okl_core.data.synthetic import write_synthetic

    subprocess.run([sys.executable, *TRAIN, "--output", str(tmp_path / "run")], check=True, capture_output=True, env=_env(), cwd=ROOT)
    write_synthetic(tmp_path / "data", 5000, seed=3)
    _, terminal = _run_on_pty(["-m", "pipelines.predict", "--runner=DirectRunner", "--model", str(tmp_path / "run" / "model.npz"),
                               "--input", str(tmp_path / "data"), "--output", str(tmp_path / "pred" / "p")])
    totals = [int(m[1].replace(",", "")) for m in re.finditer(r"predict \[[#.]+\] +\d+% ([\d,]+)/5,000 rows, [\d,]+ rows/s", terminal)]
    assert totals and totals[-1] == 5000, terminal


def test_run_called_in_a_longer_lived_process_counts_from_the_call(tmp_path, capsys):
    """A notebook or script calling ``run``: its process started long before, so the summary's
    time starts at the call (a command's starts at its process's start: the tests above)."""
    from pipelines.train import run

    time.sleep(1.0)  # whatever this process did before; the summary must not count it
    began = time.time()
    run(["--runner=DirectRunner", "--synthetic_rows", "2000", "--output", str(tmp_path / "run")])
    took = time.time() - began
    stdout = capsys.readouterr().out
    assert "from process start" not in stdout, stdout
    wall = re.search(r"([\d.]+) s wall time from the call of run \(([\d.]+) s job\)", stdout)
    assert wall and float(wall[2]) <= float(wall[1]) <= took + 0.1, stdout
