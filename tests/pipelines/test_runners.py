"""The same model bytes on every local runner (Prism too, see also test_flink.py), and the DirectRunner never tries Prism."""

import json
import os
import subprocess
import sys

import pytest

from okl_core.data.layout import write_dataset
from pipelines import train
from pipelines.job import SYNTHETIC_TRAIN_ROWS
from tests.conftest import warm_folds
from tests.pipelines.reference import binary_data

ARGS = ["--learner", "fogd", "--param", "n_components=32", "--sigma", "1.5", "--eta", "0.05", "--num_shards", "2", "--rounds", "2", "--batch_rows", "400"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("runners")
    X, y = binary_data(4000)
    write_dataset(root / "train", X, y, "binary", n_shards=4, row_group_rows=512)
    Xt, yt = binary_data(1000, seed=1)
    write_dataset(root / "test", Xt, yt, "binary")
    return root


def _train(data, out, *runner_args):
    result = train.run(["--input", str(data / "train"), "--test", str(data / "test"), *ARGS, "--output", str(out), *runner_args])
    with open(result.model_path, "rb") as f:
        return f.read(), result.metrics


def _beam_version() -> tuple[int, int]:
    import apache_beam

    return tuple(int(part) for part in apache_beam.__version__.split(".")[:2])


def _comparable(metrics):
    return metrics["online"], metrics["test"], metrics["rows"], [{k: v for k, v in b.items() if k != "seconds"} for b in metrics["batches"]]


def test_in_process_and_portable_embed_give_the_same_bytes(data, tmp_path):
    model, metrics = _train(data, tmp_path / "direct", "--runner=DirectRunner")
    portable, portable_metrics = _train(data, tmp_path / "portable", "--runner=PortableRunner", "--job_endpoint=embed")
    assert model == portable
    assert _comparable(metrics) == _comparable(portable_metrics)


def test_multi_processing_two_workers_gives_the_same_bytes(data, tmp_path):
    model, metrics = _train(data, tmp_path / "direct", "--runner=DirectRunner")
    multi, multi_metrics = _train(
        data, tmp_path / "multi", "--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"
    )
    assert model == multi
    assert _comparable(metrics) == _comparable(multi_metrics)


def test_direct_runner_never_tries_prism(data, tmp_path, monkeypatch):
    """Our DirectRunner path runs on the FnApiRunner; Beam's own switching runner would call Prism."""
    from apache_beam.runners.portability import prism_runner

    calls = []

    def refuse(self, pipeline, options):
        calls.append(1)
        raise RuntimeError("prism must not be used")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    direct, _ = _train(data, tmp_path / "direct", "--runner=DirectRunner")
    default, _ = _train(data, tmp_path / "default")  # no --runner at all
    assert calls == []
    # The patch is effective: Beam's Prism-first DirectRunner (Beam >= 2.68) does reach it,
    # then falls back to the FnApiRunner, which trains the same model.
    switching, _ = _train(data, tmp_path / "switching", "--runner=SwitchingDirectRunner")
    assert calls == ([1] if _beam_version() >= (2, 68) else [])
    assert direct == default == switching


@pytest.mark.parametrize("workers", [[], ["--num_shards", "2", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]], ids=["in_process", "two_workers"])
def test_command_line_run_is_quiet(data, tmp_path, workers):
    """`python -m pipelines.train --runner=DirectRunner` offline: no errors, tracebacks or worker logs on stderr
    (two workers: not their start-up lines either, pipelines.sdk_worker)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    warm_folds("fogd_r")  # a first use's "compiling" line (tests/pipelines/test_stops.py) is not what this test is about
    out = tmp_path / "cli"
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.train", "--runner=DirectRunner", "--synthetic_rows", "4096", "--output", str(out), *workers],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    for name in ("model.npz", "metrics.json", "online_error.png", "dead_letter.jsonl"):
        assert (out / name).exists() and str(out / name) in proc.stdout


@pytest.mark.prism
def test_prism_gives_the_same_bytes(data, tmp_path, prism_location):
    model, metrics = _train(data, tmp_path / "direct", "--runner=DirectRunner")
    prism, prism_metrics = _train(
        data, tmp_path / "prism", "--runner=PrismRunner", f"--prism_location={prism_location}", "--environment_type=LOOPBACK", "--prism_log_level=error"
    )
    assert model == prism
    assert _comparable(metrics) == _comparable(prism_metrics)


@pytest.mark.slow
def test_the_make_run_command_as_is(tmp_path):
    """Exactly `python -m pipelines.train --runner=DirectRunner`: the built-in demo, quiet, into ./runs/."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    warm_folds("fogd_r")
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.train", "--runner=DirectRunner"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
    out = tmp_path / "runs" / "synthetic-fogd_r"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rows"]["trained"] == SYNTHETIC_TRAIN_ROWS
    assert metrics["test"]["mse"] < 0.0115  # the noise variance is 0.01, the target variance 0.075
    assert "runs/synthetic-fogd_r/online_error.png" in proc.stdout


@pytest.mark.parametrize("given, sent", [
    (["--runner=FlinkRunner", "--streaming"], True),
    (["--runner=flink"], True),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--streaming", "--checkpointing_interval=2000"], True),
    (["--runner=FlinkRunner", "--checkpointing_interval=2000", "--finish_bundle_before_checkpointing"], True),
    (["--runner=DirectRunner"], None),
    (["--runner=PrismRunner", "--streaming"], None),
])
def test_flink_jobs_finish_bundles_before_a_checkpoint(given, sent):
    """Flink jobs (and any with ``--checkpointing_interval``) carry ``finish_bundle_before_checkpointing`` to Beam's
    Flink runner (what its job server reads), so a checkpoint never reorders a bundle's output and watermark
    (``test_flink.py::test_a_checkpoint_during_the_first_bundle_loses_nothing`` runs the race)."""
    from pipelines.common import FINISH_BUNDLE_BEFORE_CHECKPOINTING, pipeline_options

    options = pipeline_options(given).get_all_options(drop_default=True)
    assert options.get(FINISH_BUNDLE_BEFORE_CHECKPOINTING) is sent
