"""The batch pipeline on a local Flink cluster gives the DirectRunner's model bytes.

The Flink job server is the pathing jar of :mod:`pipelines.local_runners` (Beam
``FLINK_BEAM_VERSION``, built by ``make runners``); the submitting Python SDK must have the
same Beam version, so the jobs run in ``.venv-flink`` (or in this interpreter when its Beam
is that version), through ``python -m pipelines.train`` -- the DirectRunner reference too,
in the same interpreter. The tests skip only when Java is missing (or Maven, while the job
server is not built yet); a job server or job that does not start or fails is a failure.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from okl_core.data.layout import write_dataset
from pipelines import local_runners
from tests.conftest import cached_runner
from tests.pipelines.reference import binary_data
from tests.pipelines.runner_cases import CASES, prepare

pytestmark = pytest.mark.flink

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLINK_PYTHON_ENV = "OKL_FLINK_PYTHON"
SMALL = ["--learner", "fogd", "--param", "n_components=32", "--sigma", "1.5", "--eta", "0.05", "--num_shards", "2", "--rounds", "2", "--batch_rows", "400"]


@pytest.fixture(scope="module")
def job_server() -> str:
    """The cached job server jar (built here when Maven is present); skips without Java."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: the Flink tests need `java` on the PATH")
    missing = "the Flink job server is not built and Maven is not installed to build it (`make runners` builds it)"
    return cached_runner(local_runners.flink_job_server_jar, "mvn", missing, "Flink job server")


@pytest.fixture(scope="module")
def flink_python() -> str:
    """A Python whose apache-beam is the job server's version: this one, or .venv-flink's."""
    import apache_beam

    if apache_beam.__version__ == local_runners.FLINK_BEAM_VERSION:
        return sys.executable
    python = os.environ.get(FLINK_PYTHON_ENV) or os.path.join(ROOT, ".venv-flink", "bin", "python")
    if not os.path.exists(python):
        pytest.fail(f"{python} is missing: the Flink job server needs apache-beam=={local_runners.FLINK_BEAM_VERSION} "
                    f"on the submitting side (`make runners` creates .venv-flink; ${FLINK_PYTHON_ENV} names another Python)")
    proc = subprocess.run([python, "-c", "import apache_beam; print(apache_beam.__version__)"], capture_output=True, text=True)
    if proc.stdout.strip() != local_runners.FLINK_BEAM_VERSION:
        pytest.fail(f"{python} has apache-beam {proc.stdout.strip() or '(none)'}, the job server {local_runners.FLINK_BEAM_VERSION}: run `make runners`")
    return python


def train(python: str, out, args, runner_args) -> tuple[str, dict, float]:
    """``python -m pipelines.train``: (model sha256, metrics, wall seconds); a failed job fails the test."""
    started = time.perf_counter()
    proc = subprocess.run(
        [python, "-m", "pipelines.train", *args, "--output", str(out), *runner_args],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=600,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        jar = next((a.split("=", 1)[1] for a in runner_args if a.startswith("--flink_job_server_jar=")), None)
        server = f"\n{job_server_alone(jar)}" if jar else ""
        pytest.fail(f"pipelines.train {' '.join(runner_args)} exited with {proc.returncode}:\n{tail}{server}")
    with open(out / "model.npz", "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return digest, json.loads((out / "metrics.json").read_text()), seconds


def job_server_alone(jar: str, seconds: float = 20) -> str:
    """What the job server does started alone (Beam logs its output at INFO only)."""
    command = ["java", "-jar", jar, "--job-port", "0", "--artifact-port", "0", "--expansion-port", "0"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return f"`{' '.join(command)}` alone starts and keeps serving: the job, not the job server, failed"
    output = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[:5])
    return f"`{' '.join(command)}` alone exits with {proc.returncode}:\n{output}"


def comparable(metrics: dict):
    return metrics["online"], metrics.get("test"), metrics["rows"], [{k: v for k, v in b.items() if k != "seconds"} for b in metrics["batches"]]


def same_model_on_flink(python, jar, tmp_path, args):
    direct, direct_metrics, direct_seconds = train(python, tmp_path / "direct", args, ["--runner=DirectRunner"])
    flink, flink_metrics, flink_seconds = train(python, tmp_path / "flink", args, local_runners.flink_runner_options(jar))
    print(f"DirectRunner {direct_seconds:.1f} s, FlinkRunner {flink_seconds:.1f} s (wall, each in a new process)")
    assert flink == direct
    assert comparable(flink_metrics) == comparable(direct_metrics)


def test_small_binary_job_gives_the_direct_runner_bytes(job_server, flink_python, tmp_path):
    X, y = binary_data(4000)
    write_dataset(tmp_path / "train", X, y, "binary", n_shards=4, row_group_rows=512)
    Xt, yt = binary_data(1000, seed=1)
    write_dataset(tmp_path / "test", Xt, yt, "binary")
    same_model_on_flink(flink_python, job_server, tmp_path, ["--input", str(tmp_path / "train"), "--test", str(tmp_path / "test"), *SMALL])


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("flink-data")


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_real_data_gives_the_direct_runner_bytes(case, job_server, flink_python, data_root, tmp_path):
    """a9a and the MNIST digits (tests/pipelines/runner_cases.py), data prepared in the same interpreter."""
    kind, args = CASES[case]
    same_model_on_flink(flink_python, job_server, tmp_path, [*prepare(flink_python, kind, data_root), *args])


@pytest.mark.slow
def test_the_streaming_job_runs_on_flink(job_server, flink_python, tmp_path):
    """The streaming scenario of test_streaming_prism.py (files dropped while the job runs, bad input,
    merge windows, mixing mid-stream, replayed versions, --stop_after) on the local Flink cluster."""
    started = time.perf_counter()
    proc = subprocess.run(
        [flink_python, "-m", "tests.pipelines.test_streaming_prism", str(tmp_path), *local_runners.flink_runner_options(job_server)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=600,
    )
    print(f"streaming on Flink: {time.perf_counter() - started:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("passed: ") == 4, proc.stdout


def marked_after_a_checkpoint_race(python: str, jar: str, out, raw: bool) -> int:
    """How many elements ``tests/pipelines/checkpoint_race.py`` got through to its stateful step."""
    out.mkdir()
    proc = subprocess.run(
        [python, "-m", "tests.pipelines.checkpoint_race", str(out), *(["--raw"] if raw else []), f"--flink_job_server_jar={jar}"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return len(os.listdir(out))


@pytest.mark.slow
def test_a_checkpoint_during_the_first_bundle_loses_nothing(job_server, flink_python, tmp_path):
    """okl's options (a Flink job gets ``--finish_bundle_before_checkpointing``) keep a
    source's elements ahead of its end-of-time watermark when a checkpoint meets its first bundle.

    The same job on Beam's own options loses every element (the stall of the cluster's streaming
    job, ``pipelines.common.FINISH_BUNDLE_BEFORE_CHECKPOINTING``): that run shows the scenario
    reaches the race, so the first assertion can fail.
    """
    from tests.pipelines.checkpoint_race import ELEMENTS

    assert marked_after_a_checkpoint_race(flink_python, job_server, tmp_path / "okl", raw=False) == ELEMENTS
    lost_without = ELEMENTS - marked_after_a_checkpoint_race(flink_python, job_server, tmp_path / "beam", raw=True)
    assert lost_without == ELEMENTS, (f"on Beam's own options the job lost {lost_without} of {ELEMENTS} elements, not all: the "
                                      "scenario no longer reaches the race (a Beam that fixed it, or a checkpoint that missed the bundle)")
