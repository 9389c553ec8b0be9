"""The ``okl`` console script: okl's commands from any folder, and the LICENSE in the distribution."""

import importlib.metadata
import os
import pathlib
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
OKL = pathlib.Path(sys.executable).parent / "okl"


def _okl_script():
    if not OKL.exists():
        pytest.skip(f"no okl console script beside {sys.executable}: reinstall okl (make setup) to get it")
    return str(OKL)


@pytest.fixture
def folder_with_its_own_packages(tmp_path):
    """A working folder whose ``pipelines`` and ``transforms`` packages are not okl's."""
    for package in ("pipelines", "transforms"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "pipelines" / "train.py").write_text("print('not okl: the folder\\'s own pipelines.train')\n")
    return tmp_path


def _run(argv, cwd, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a user runs it: no path of the checkout
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_python_m_in_such_a_folder_runs_the_folders_own_package(folder_with_its_own_packages):
    """Why the console script exists: ``python -m`` puts the current folder first on sys.path."""
    done = _run([sys.executable, "-m", "pipelines.train", "--help"], folder_with_its_own_packages)
    assert "not okl" in done.stdout


def test_okl_train_runs_okls_train_from_any_folder(folder_with_its_own_packages):
    okl = _okl_script()
    helped = _run([okl, "train", "--help"], folder_with_its_own_packages)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: okl train") and "--num_shards" in helped.stdout and "not okl" not in helped.stdout
    out = folder_with_its_own_packages / "run"
    trained = _run([okl, "train", "--synthetic_rows", "2000", "--output", str(out)], folder_with_its_own_packages)
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert "fogd_r: 2000 rows trained" in trained.stdout
    assert {"model.npz", "metrics.json", "online_error.png", "dead_letter.jsonl"} <= set(os.listdir(out))


def test_okl_lists_its_commands_and_refuses_unknown_ones(tmp_path):
    okl = _okl_script()
    listed = _run([okl, "--help"], tmp_path)
    assert listed.returncode == 0
    assert all(f"  {c} " in listed.stdout for c in ("train", "prepare", "predict", "sweep", "report", "reproduce", "engines", "learners"))
    unknown = _run([okl, "trian"], tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines() == [
        "okl: error: unknown command 'trian'; choose one of train, prepare, predict, sweep, report, reproduce, engines, learners"]


def test_every_command_is_declared_and_answers_help():
    """pyproject declares the one ``okl`` script; each of its commands parses ``--help``."""
    from pipelines.okl import COMMANDS, main

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"okl": "pipelines.okl:main"}
    for command in COMMANDS:
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0, command


def test_license_file_is_apache_2_and_goes_into_the_distribution():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    metadata = importlib.metadata.metadata("okl")
    if "License-File" not in metadata:
        pytest.skip("the installed okl predates its LICENSE: reinstall okl (make setup) to check the installed metadata")
    assert metadata["License-File"] == "LICENSE"
    files = [str(f) for f in importlib.metadata.distribution("okl").files or []]
    assert any(f == "LICENSE" or f.endswith("/LICENSE") for f in files), files


def test_okl_names_its_commands_only_while_it_runs(capsys):
    from pipelines.okl import main

    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert capsys.readouterr().out.startswith("usage: okl sweep")
    from pipelines import sweep

    assert sweep.build_parser().prog == "python -m pipelines.sweep"
