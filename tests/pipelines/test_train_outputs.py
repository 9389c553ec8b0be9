"""``pipelines.train`` outputs: a used --output is refused, one run's files are published together.

Real runs in real processes, paused (SIGSTOP) or killed (SIGKILL) between publishing steps
by the fault points of :mod:`okl_core.publish`. Every finished output is checked against
its ``run.json``: each file's checksum, and the run id in ``metrics.json``.
"""

import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys

import pytest

from okl_core.data import write_dataset
from pipelines import train
from tests.pipelines.reference import binary_data
from tests.pipelines.test_prepare_races import _wait_stopped
from tests.pipelines.test_remote_paths import PREFIX

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ["dead_letter.jsonl", "metrics.json", "model.npz", "online_error.png", "run.json"]


@pytest.fixture
def data(tmp_path):
    X, y = binary_data(300)
    write_dataset(tmp_path / "data", X, y, "binary", classes=[-1, 1])
    return str(tmp_path / "data")


def _args(data, out, *more):
    return ["--input", data, "--learner", "fogd", "--param", "n_components=8", "--sigma", "1", "--batch_rows", "64", "--output", str(out), *more]


def _train(data, out, *more, env=None, wait=True, umask=None):
    argv = [sys.executable, "-m", "pipelines.train", *_args(data, out, *more), "--runner=DirectRunner"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=None if umask is None else (lambda: os.umask(umask)))
    if not wait:
        return proc
    stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _one_run(out) -> str:
    """The run id of the output folder, after checking that every file is that run's."""
    out = str(out)
    assert sorted(os.listdir(out)) == FILES
    with open(os.path.join(out, "run.json")) as f:
        manifest = json.load(f)
    for entry in manifest["files"].values():
        with open(os.path.join(out, entry["file"]), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == entry["sha256"]
    with open(os.path.join(out, "metrics.json")) as f:
        assert json.load(f)["run_id"] == manifest["run_id"]
    return manifest["run_id"]


def _hidden(tmp_path):
    return sorted(n for n in os.listdir(tmp_path) if n.startswith("."))


def test_used_output_is_refused_without_overwrite(tmp_path, data, capsys):
    out = tmp_path / "out"
    first = train.run(_args(data, out))
    first_id = _one_run(out)
    assert first.files["model"] == f"{out}/model.npz" and first.metrics["run_id"] == first_id
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        train.run(_args(data, out, "--eta", "0.5"))
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m pipelines.train: error: --output {out} already exists (pass --overwrite to replace it)"
    assert _one_run(out) == first_id
    train.run(_args(data, out, "--eta", "0.5", "--overwrite"))
    assert _one_run(out) != first_id and _hidden(tmp_path) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        ((), "{out} already exists (pass --overwrite to replace it)"),
        (("--overwrite",), "{out}: not an okl run folder (no run.json, model.npz or metrics.json); not replacing it even with --overwrite"),
    ],
    ids=["plain", "overwrite"],
)
def test_a_folder_that_is_not_a_run_is_never_replaced(tmp_path, data, capsys, flags, message):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit):
        train.run(_args(data, out, *flags))
    assert capsys.readouterr().err.splitlines()[-1] == "python -m pipelines.train: error: --output " + message.format(out=out)
    assert os.listdir(out) == ["notes.txt"] and _hidden(tmp_path) == []


def test_an_output_that_cannot_be_made_is_one_line(data, capsys):
    """The staging folder cannot be made (here under /proc): one line naming --output, no traceback."""
    with pytest.raises(SystemExit):
        train.run(_args(data, "/proc/okl-x"))
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m pipelines.train: error: --output /proc/okl-x: cannot write there (No such file or directory: /proc/.okl-x.lock)")


def test_an_empty_output_folder_is_used(tmp_path, data):
    (tmp_path / "out").mkdir()
    train.run(_args(data, tmp_path / "out"))
    _one_run(tmp_path / "out")


def test_a_refused_job_leaves_no_output(tmp_path, data, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        train.run(_args(data, tmp_path / "out", "--param", "bogus=1"))
    assert "unknown parameter" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["data"]
    # Nor the parent folders it made for --output (once left behind: runs/ of a job without --output, new/deep/)
    monkeypatch.chdir(tmp_path)
    for output in (["--output", "new/deep/out"], []):
        with pytest.raises(SystemExit):
            train.run([*_no_output_args(data), "--param", "bogus=1", *output])
        assert sorted(os.listdir(tmp_path)) == ["data"]


@pytest.mark.parametrize("second_flags", [(), ("--overwrite",)], ids=["plain", "overwrite"])
def test_second_run_into_a_busy_output_is_refused(tmp_path, data, second_flags):
    out = tmp_path / "out"
    first = _train(data, out, env={"OKL_TEST_PAUSE_AT": "staged"}, wait=False)
    try:
        _wait_stopped(first, timeout=300)
        second = _train(data, out, "--eta", "0.5", *second_flags)
    finally:
        first.send_signal(signal.SIGCONT)
    stdout, _ = first.communicate(timeout=300)
    assert second.returncode == 2
    assert second.stderr.splitlines()[-1] == (f"python -m pipelines.train: error: --output {out} is being written by pid {first.pid} on "
                                              f"{socket.gethostname()} (lock {tmp_path / '.out.lock'}); wait for it or choose another path")
    assert first.returncode == 0 and f"model:        {out}/model.npz" in stdout
    _one_run(out)
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize("kill_at", ["staged", "aside"])
def test_a_run_killed_while_publishing_leaves_one_whole_run(tmp_path, data, kill_at):
    out = tmp_path / "out"
    assert _train(data, out).returncode == 0
    old_id = _one_run(out)
    killed = _train(data, out, "--eta", "0.5", "--overwrite", env={"OKL_TEST_KILL_AT": kill_at})
    assert killed.returncode == -signal.SIGKILL
    assert os.path.exists(out) == (kill_at == "staged")
    if kill_at == "staged":
        assert _one_run(out) == old_id
    # The next run restores the old run (killed between its renames), cleans the staging folder, then refuses.
    refused = _train(data, out)
    assert refused.returncode == 2 and refused.stderr.splitlines()[-1].endswith(f"--output {out} already exists (pass --overwrite to replace it)")
    assert _one_run(out) == old_id and _hidden(tmp_path) == []
    assert _train(data, out, "--overwrite").returncode == 0
    assert _one_run(out) != old_id and _hidden(tmp_path) == []


def test_remote_output_refused_when_used_and_tied_by_run_json(tmp_path, data, capsys):
    remote = PREFIX + str(tmp_path / "remote")
    train.run(_args(data, remote))
    first_id = _one_run(tmp_path / "remote")
    with pytest.raises(SystemExit):
        train.run(_args(data, remote))
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m pipelines.train: error: --output {remote} already holds a run "
        f"(run.json, model.npz, metrics.json, online_error.png, dead_letter.jsonl); pass --overwrite to replace it")
    train.run(_args(data, remote, "--overwrite"))
    assert _one_run(tmp_path / "remote") != first_id


@pytest.mark.parametrize("umask, mode", [(0o022, 0o755), (0o002, 0o775)])
def test_output_folder_permissions_follow_the_umask(tmp_path, data, umask, mode):
    assert _train(data, tmp_path / "out", umask=umask).returncode == 0
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == mode


def _no_output_args(data, *more):
    return ["--input", data, "--learner", "fogd", "--param", "n_components=8", "--sigma", "1", "--batch_rows", "64", *more]


def test_a_glob_without_output_trains_into_runs_named_after_its_folder(tmp_path, data, monkeypatch):
    """Issue: the default output of --input 'DIR/*.parquet' was runs/*.parquet-fogd, a folder named with a wildcard."""
    monkeypatch.chdir(tmp_path)
    result = train.run(_no_output_args(f"{data}/*.parquet"))
    assert result.output == os.path.join("runs", "data-fogd") and os.listdir("runs") == ["data-fogd"]
    _one_run(tmp_path / "runs" / "data-fogd")


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
@pytest.mark.parametrize("given, recorded_name, expected", [
    ("data/*.parquet", None, "data"),                            # a glob: its folder
    ("data/part-*-of-00001.parquet", None, "data"),
    ("data/part-00000-of-00001.parquet", None, "part-00000-of-00001"),  # a file: its name without .parquet
    ("plain", None, "plain"),                                    # streaming: a folder of Parquet files without dataset.json
    ("data", "my data/v2*", "my_data_v2"),                       # dataset.json's name, as one safe folder name
    ("data", "../..", "data"),                                   # nothing safe left
])
def test_the_default_output_is_one_safe_folder_for_every_input(tmp_path, data, monkeypatch, streaming, given, recorded_name, expected):
    """``runs/<data>-<learner>`` names one folder under runs/, without a wildcard, slash or leading dot, the same
    for a batch and a streaming job; a refused or abandoned launch takes back the folders it made."""
    import shutil

    from pipelines.job import resolve_job

    if given == "plain" and not streaming:
        pytest.skip("a batch job reads a folder only when it holds dataset.json")
    monkeypatch.chdir(tmp_path)
    os.mkdir("plain")
    shutil.copy(os.path.join(data, "part-00000-of-00001.parquet"), "plain")
    if recorded_name is not None:
        with open(os.path.join(data, "dataset.json")) as f:
            info = json.load(f)
        with open(os.path.join(data, "dataset.json"), "w") as f:
            json.dump({**info, "name": recorded_name}, f)
    request = train.parse_args(_no_output_args(given, *(["--streaming"] if streaming else [])))
    job = resolve_job(request)
    assert job.output == os.path.join("runs", f"{expected}-fogd")
    if streaming:  # written in place
        assert os.listdir("runs") == [f"{expected}-fogd"]
    else:  # staged beside it
        assert job.staging.path == os.path.abspath(job.output)
    job.abandon()
    assert not os.path.exists("runs")
