"""``pipelines.prepare`` into one OUT from real processes: races, kills between steps, permissions, leftovers.

Writers are paused (SIGSTOP) or killed (SIGKILL) exactly between two publishing steps by
the fault points of :mod:`okl_core.publish` (``OKL_TEST_PAUSE_AT`` / ``OKL_TEST_KILL_AT``).
"""

import os
import signal
import socket
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from okl_core.data import open_dataset
from tests.data_files import libsvm_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _svm(tmp_path, name, n_rows, seed):
    rng = np.random.default_rng(seed)
    X = np.round(rng.random((n_rows, 4)), 3)
    (tmp_path / name).write_text(libsvm_text(X, np.where(rng.random(n_rows) < 0.5, -1, 1)))
    return str(tmp_path / name)


def _prepare(tmp_path, source, *flags, env=None, umask=None, wait=True):
    argv = [sys.executable, "-m", "pipelines.prepare", "libsvm", source, "--output", str(tmp_path / "out"), "--quiet", *flags]
    environment = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    proc = subprocess.Popen(argv, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    if not wait:
        return proc
    stdout, stderr = proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _wait_stopped(proc, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the writer never reached its pause point")


def _rows(tmp_path):
    return open_dataset(tmp_path / "out").info.n_rows


def _listing(tmp_path):
    return sorted(os.listdir(tmp_path))


@pytest.mark.parametrize("second_flags", [(), ("--overwrite",)], ids=["plain", "overwrite"])
def test_second_writer_of_a_locked_out_is_refused(tmp_path, second_flags):
    first = _prepare(tmp_path, _svm(tmp_path, "a.svm", 10, 0), env={"OKL_TEST_PAUSE_AT": "staged"}, wait=False)
    try:
        _wait_stopped(first)
        second = _prepare(tmp_path, _svm(tmp_path, "b.svm", 20, 1), *second_flags)
    finally:
        first.send_signal(signal.SIGCONT)
    first.communicate()
    out = tmp_path / "out"
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr == (f"python -m pipelines.prepare: error: {out} is being written by pid {first.pid} on {socket.gethostname()} "
                             f"(lock {tmp_path / '.out.lock'}); wait for it or choose another path\n")
    assert first.returncode == 0 and _rows(tmp_path) == 10
    assert _listing(tmp_path) == ["a.svm", "b.svm", "out"]


def test_two_racing_writers_exactly_one_succeeds(tmp_path):
    sources = [_svm(tmp_path, f"{k}.svm", 200 + k, k) for k in range(2)]
    procs = [_prepare(tmp_path, s, wait=False) for s in sources]
    results = [(p.wait(), p.stderr.read()) for p in procs]
    winners = [k for k, (code, _) in enumerate(results) if code == 0]
    assert len(winners) == 1
    code, err = results[1 - winners[0]]
    out = tmp_path / "out"
    # The holder writes its pid into the lock file just after taking the lock: a loser that
    # looks in between sees an empty file and says "another process".
    busy = [f"python -m pipelines.prepare: error: {out} is being written by {holder} "
            f"(lock {tmp_path / '.out.lock'}); wait for it or choose another path\n"
            for holder in (f"pid {procs[winners[0]].pid} on {socket.gethostname()}", "another process")]
    assert code == 2 and err in (*busy, f"python -m pipelines.prepare: error: {out} already exists (pass --overwrite to replace it)\n")
    assert _rows(tmp_path) == 200 + winners[0]
    assert _listing(tmp_path) == ["0.svm", "1.svm", "out"]


@pytest.mark.parametrize(
    "kill_at, left_behind",
    [("staged", [".out.lock", ".out.tmp-"]), ("aside", [".out.lock", ".out.old-", ".out.tmp-"])],
)
def test_killed_overwrite_never_leaves_nothing(tmp_path, kill_at, left_behind):
    old, new = _svm(tmp_path, "old.svm", 10, 0), _svm(tmp_path, "new.svm", 30, 1)
    assert _prepare(tmp_path, old).returncode == 0
    killed = _prepare(tmp_path, new, "--overwrite", env={"OKL_TEST_KILL_AT": kill_at})
    assert killed.returncode == -signal.SIGKILL
    hidden = sorted(n for n in os.listdir(tmp_path) if n.startswith("."))
    assert [h if h == ".out.lock" else h[: h.index("-") + 1] for h in hidden] == left_behind
    assert ("out" in os.listdir(tmp_path)) == (kill_at == "staged")
    # The next writer puts the old data set back (killed between its renames), cleans the rest, then decides.
    refused = _prepare(tmp_path, new)
    assert refused.returncode == 2 and refused.stderr == f"python -m pipelines.prepare: error: {tmp_path / 'out'} already exists (pass --overwrite to replace it)\n"
    assert _rows(tmp_path) == 10 and _listing(tmp_path) == ["new.svm", "old.svm", "out"]
    assert _prepare(tmp_path, new, "--overwrite").returncode == 0
    assert _rows(tmp_path) == 30 and _listing(tmp_path) == ["new.svm", "old.svm", "out"]


@pytest.mark.parametrize("umask, dir_mode, file_mode", [(0o022, 0o755, 0o644), (0o002, 0o775, 0o664), (0o077, 0o700, 0o600)])
def test_data_set_permissions_follow_the_umask(tmp_path, umask, dir_mode, file_mode):
    assert _prepare(tmp_path, _svm(tmp_path, "a.svm", 10, 0), umask=umask).returncode == 0
    out = tmp_path / "out"
    assert stat.S_IMODE(os.stat(out).st_mode) == dir_mode
    assert {stat.S_IMODE(os.stat(out / f).st_mode) for f in os.listdir(out)} == {file_mode}


def test_overwrite_refuses_a_folder_that_is_not_a_data_set(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    result = _prepare(tmp_path, _svm(tmp_path, "a.svm", 10, 0), "--overwrite")
    assert result.returncode == 2
    assert result.stderr == f"python -m pipelines.prepare: error: {tmp_path / 'out'}: not an okl data set (no dataset.json); not replacing it even with --overwrite\n"
    assert os.listdir(tmp_path / "out") == ["notes.txt"] and _listing(tmp_path) == ["a.svm", "out"]
