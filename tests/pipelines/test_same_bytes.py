"""The same model bytes in-process, with two worker processes (any BLAS thread count), on the portable runner and on Prism.

Real data at MNIST size (tests/pipelines/runner_cases.py); Flink runs the same cases in
tests/pipelines/test_flink.py. Each run is a new ``python -m pipelines.train`` process.
"""

import hashlib
import os
import subprocess
import sys

import pytest

from tests.pipelines.runner_cases import CASES, ROOT, prepare

RUNNERS = {
    "two_worker_processes": ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=embed"],
}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("same-bytes")


def _model(args, out, blas_threads=None) -> str:
    env = {**os.environ, "PYTHONPATH": ROOT}
    if blas_threads:  # the whole job (launcher and its workers) with this many OpenBLAS threads
        env.update(OPENBLAS_NUM_THREADS=str(blas_threads), OMP_NUM_THREADS=str(blas_threads))
    proc = subprocess.run([sys.executable, "-m", "pipelines.train", *args, "--output", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(out, "model.npz"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.slow
@pytest.mark.prism
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_runner_gives_the_in_process_bytes(case, data_root, tmp_path, prism_location):
    kind, args = CASES[case]
    args = [*prepare(sys.executable, kind, data_root), *args]
    reference = _model([*args, "--runner=DirectRunner"], tmp_path / "in_process")
    runners = {**RUNNERS, "prism": ["--runner=PrismRunner", f"--prism_location={prism_location}", "--environment_type=LOOPBACK"]}
    got = {name: _model([*args, *flags], tmp_path / name) for name, flags in runners.items()}
    got["two_worker_processes_one_blas_thread"] = _model([*args, *RUNNERS["two_worker_processes"]], tmp_path / "one_thread", blas_threads=1)
    assert got == {name: reference for name in got}
