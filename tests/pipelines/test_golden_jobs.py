"""``okl train`` jobs on the built-in demo data write the model bytes recorded before a refactor.

The learner-level record (``tests/okl_core/golden_models.json``) pins the folds; these pin
what the pipelines add around them (argument parsing, data-derived defaults, sharding, rounds,
merges). The digests were written by the reference commit's ``python -m pipelines.train`` with
OpenBLAS pinned to its Haswell kernels; every runner gives the DirectRunner's bytes
(``test_same_bytes.py``), so one runner is enough here. A change that moves them must update
the digest and say which learner moved and why.
"""

import hashlib
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = ["--synthetic_rows", "4000"]

JOBS = {
    "fogd_r": ([*DEMO, "--learner", "fogd_r", "--num_shards", "2", "--rounds", "2"],
         "72341bc1943d4734da50c4bb4e98f932cfbf6d7403fe3dca260cd98593b807e8"),
    "dsg": ([*DEMO, "--learner", "dsg", "--num_shards", "2"],
         "abbe89fdc36f12e6082adc68c1386e4e62c1493181a10ca55222961078298a9c"),
    "omkl_gf": ([*DEMO, "--learner", "omkl_gf", "--num_shards", "2", "--rounds", "2"],
         "29defe2cb1b1d466ae877e55dcb70cdc52fe36b2761a9045df02796876d69eff"),
    "pkawv_taylor": ([*DEMO, "--learner", "pkawv_taylor", "--num_shards", "2", "--rounds", "2"],
         "aaf98c1df8e232e28c8f34f8c00661dc4ef4bfece099ea92c48f1bf10a2236eb"),
    "rbp_r": ([*DEMO, "--learner", "rbp_r", "--param", "budget=300"],
         "9f82e4346ec2bbea9b5199be030d0804c4e822d906c42c51dda2fe7e64f0b8f7"),
    "nogd_r": ([*DEMO, "--learner", "nogd_r", "--param", "budget=300"],
         "71d72b37ee913b237dd79ef2c1dddfd1ef9db39cec81361decbb6fe190a9328d"),
    "projectron_r": ([*DEMO, "--learner", "projectron_r"],
         "00e0d37290896ea777678cab8ca7136225c154c31a173a79db091b48ff4e74a5"),
    "oks_pp": ([*DEMO, "--learner", "oks_pp", "--param", "loss=square"],
         "365288ebf001d2ffce49974cfe0c1b3a330a96112e58ead8118bba97b7b549a3"),
}


def _job_digest(args, out) -> str:
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pipelines.train", "--runner=DirectRunner", *args, "--output", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(out, "model.npz"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "AMD64"), reason="recorded with OpenBLAS's x86-64 Haswell kernels")
@pytest.mark.parametrize("job", sorted(JOBS))
def test_the_job_writes_the_recorded_model_bytes(job, tmp_path):
    args, want = JOBS[job]
    assert _job_digest(args, tmp_path / "out") == want
