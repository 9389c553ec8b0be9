"""Stops and quiet output, with real processes: SIGTERM and Ctrl-C end a command with one line
(``terminated``, exit status 143; ``interrupted``, 130), publish nothing and leave no process
behind, with Beam's worker processes too; no command prints Beam's ``apitools`` warning or
its workers' start-up lines; the first use of a learner says it is compiling, once, and the
compile cache changes no model byte."""

import glob
import hashlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from okl_experiments.sweep import read_results
from pipelines.okl import COMMANDS
from tests.conftest import sweep_binary_data, warm_folds

ROOT = pathlib.Path(__file__).resolve().parents[2]
OKL = str(pathlib.Path(sys.executable).parent / "okl")
TWO_WORKERS = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
NOISE = ("apitools not found", "Logging handler created", "Load pipeline options from file")


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _start(argv, cwd, **env):
    return subprocess.Popen(argv, cwd=cwd, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _session(sid: int) -> list[str]:
    """The command lines of the live processes of session ``sid`` (the command's, started with start_new_session)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if int(session) == sid and state != "Z":
            found.append(cmdline)
    return found


def _wait_for(condition, what: str, proc, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


def _stop(proc, signum, group: bool, then: float) -> str:
    """Send ``signum`` to ``proc`` (or its whole process group) ``then`` seconds from now; its stderr."""
    time.sleep(then)
    assert proc.poll() is None, "the job ended before it was stopped: make it longer"
    (os.killpg if group else os.kill)(proc.pid, signum)
    _, err = proc.communicate(timeout=90)
    return err


def _nothing_left(proc) -> None:
    """No process of the command's session outlives it (workers, runners: stopped with it)."""
    deadline = time.monotonic() + 10
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _session(proc.pid) == []


STOPS = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("terminated", 143)}


def _train_and_stop(tmp_path, signum, group: bool, workers: bool, console_script: bool):
    out = tmp_path / "run"
    warm_folds("kernel_ogd_r")  # a first use's "compiling" line is not what this test is about
    flags = ["--synthetic_rows", "100000", "--learner", "kernel_ogd_r", "--output", str(out), *(TWO_WORKERS if workers else [])]
    argv = [OKL, "train", *flags] if console_script else [sys.executable, "-m", "pipelines.train", *flags]
    proc = _start(argv, tmp_path)
    # The demo writes its data set into the run's staging folder, then trains: about a minute of kernel OGD.
    _wait_for(lambda: glob.glob(str(tmp_path / ".run*" / "data" / "train" / "dataset.json")), "the data set", proc)
    if workers:
        _wait_for(lambda: sum("pipelines.sdk_worker" in line for line in _session(proc.pid)) >= 2, "two workers", proc)
    err = _stop(proc, signum, group, then=2.0)
    word, status = STOPS[signum]
    program = "okl train" if console_script else "python -m pipelines.train"
    assert (proc.returncode, err.strip().splitlines()) == (status, [f"{program}: {word}"]), err[-3000:]
    assert os.listdir(tmp_path) == []  # no run published, no staging folder or lock left behind
    _nothing_left(proc)


def test_sigterm_ends_train_with_one_line(tmp_path):
    """SIGTERM to the command alone (``kill``, ``timeout``, Kubernetes): as Ctrl-C, with its own line and status."""
    _train_and_stop(tmp_path, signal.SIGTERM, group=False, workers=False, console_script=True)


@pytest.mark.slow
@pytest.mark.parametrize("signum, group", [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c", "sigterm-to-the-group", "sigterm-to-the-command"])
def test_stopping_train_with_two_worker_processes_prints_one_line_and_leaves_no_worker(tmp_path, signum, group):
    """Beam's worker processes get a terminal's Ctrl-C (and a group's SIGTERM) too: they leave the stop
    to the command, which ends them; nothing of theirs is printed."""
    _train_and_stop(tmp_path, signum, group=group, workers=True, console_script=signum == signal.SIGTERM)


@pytest.mark.slow
def test_sigterm_ends_a_sweep_with_one_line_and_its_finished_points(tmp_path):
    sweep_binary_data(tmp_path / "data")
    warm_folds("kernel_ogd")
    out = tmp_path / "sweep"
    proc = _start([sys.executable, "-m", "pipelines.sweep", "--input", str(tmp_path / "data"), "--learner", "kernel_ogd",
                   "--grid", "sigma=0.5,1,2,4", "--repeats", "100", "--num_workers", "2", "--output", str(out)], ROOT)
    _wait_for(lambda: (out / "results.parquet").exists(), "the first point", proc)
    err = _stop(proc, signal.SIGTERM, group=True, then=0.5)
    lines = err.strip().splitlines()
    assert (proc.returncode, lines[-1]) == (143, "python -m pipelines.sweep: terminated"), err[-3000:]
    # Before it: the progress lines a sweep prints when stderr is not a terminal, nothing else.
    assert all(line.startswith(("sweep: ", "[")) for line in lines[:-1]), err[-3000:]
    rows, _ = read_results(str(out / "results.parquet"))  # complete, with the points that finished
    assert 1 <= len(rows) < 4 and all(r["status"] == "ok" and r["runs"] == 100 for r in rows)
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet"]
    _nothing_left(proc)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_prints_no_beam_warning(command):
    """``--help`` of every command, by both entry points: the help on stdout, nothing on stderr."""
    for argv in ([OKL, command, "--help"], [sys.executable, "-m", f"pipelines.{command}", "--help"]):
        out = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
        assert (out.returncode, out.stderr) == (0, ""), (argv, out.stderr)
        assert "usage:" in out.stdout


def _sha256(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def test_two_worker_train_is_quiet_and_first_use_compiles_once_with_the_same_bytes(tmp_path):
    """A fresh compile cache: the first run says it compiles (once, before its workers start), the
    second loads the folds and says nothing; both print no Beam or worker noise; same model bytes."""
    env = {"OKL_CACHE": str(tmp_path / "cache")}
    errs = []
    for run in ("first", "second"):
        proc = subprocess.run([OKL, "train", "--synthetic_rows", "3000", "--learner", "kernel_ogd_r", "--num_shards", "2",
                               "--output", str(tmp_path / run), *TWO_WORKERS],
                              cwd=tmp_path, env={k: v for k, v in _env(**env).items() if k != "NUMBA_CACHE_DIR"},
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        errs.append(proc.stderr.splitlines())
    compiling = "okl train: compiling the kernel_ogd_r folds (first use on this machine; later runs load them from the cache)"
    assert errs[0] == [compiling], errs[0]
    assert errs[1] == [], errs[1]
    # cached where okl's cache is, in the folder named by the fold sources' digest
    assert glob.glob(str(tmp_path / "cache" / "numba" / "*" / "*" / "_expansion_folds.*.nbi"))
    assert _sha256(tmp_path / "first" / "model.npz") == _sha256(tmp_path / "second" / "model.npz")
    for err in errs:
        assert not any(noise in line for noise in NOISE for line in err)


def _write_csv(path, rows: int, seed: int = 0) -> None:
    """A CSV of ``rows`` rows: ten numeric features and a yes/no label."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(rows, 10)), 4)
    lines = [",".join([f"f{i}" for i in range(10)] + ["label"])]
    lines += [",".join(map(str, row)) + ("," + ("yes" if row[0] > 0 else "no")) for row in X.tolist()]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_sigterm_ends_prepare_and_predict_with_one_line(tmp_path):
    """prepare (300,000 CSV rows: ~10 s) and predict (those rows against a kernel model of 2,000
    rows, with two worker processes: ~30 s), each stopped while it writes: one line, nothing published."""
    _write_csv(tmp_path / "big.csv", 300_000)
    _write_csv(tmp_path / "small.csv", 2_000, seed=1)
    run = lambda *argv: subprocess.run([OKL, *argv], cwd=tmp_path, env=_env(), capture_output=True, text=True, check=True)  # noqa: E731
    warm_folds("kernel_ogd")
    proc = _start([OKL, "prepare", "csv", "big.csv", "--target", "label", "--output", "stopped"], tmp_path)
    _wait_for(lambda: glob.glob(str(tmp_path / ".stopped.tmp-*")), "prepare's staging folder", proc)
    err = _stop(proc, signal.SIGTERM, group=False, then=1.0)
    assert (proc.returncode, err.strip().splitlines()) == (143, ["okl prepare: terminated"]), err[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["big.csv", "small.csv"]
    _nothing_left(proc)

    run("prepare", "csv", "big.csv", "--target", "label", "--output", "big")
    run("prepare", "csv", "small.csv", "--target", "label", "--output", "small", "--like", "big")
    run("train", "--input", "small", "--learner", "kernel_ogd", "--output", "model")
    before = sorted(os.listdir(tmp_path))
    proc = _start([OKL, "predict", "--model", "model/model.npz", "--input", "big", "--output", "predictions", *TWO_WORKERS], tmp_path)
    _wait_for(lambda: sum("pipelines.sdk_worker" in line for line in _session(proc.pid)) >= 2, "two workers", proc)
    err = _stop(proc, signal.SIGTERM, group=True, then=3.0)
    assert (proc.returncode, err.strip().splitlines()) == (143, ["okl predict: terminated"]), err[-3000:]
    assert sorted(os.listdir(tmp_path)) == before
    _nothing_left(proc)
