"""Every learner's model bytes are those recorded in ``golden_models.json`` (see ``golden.py``).

The record was written by the commit whose arithmetic is the reference; a refactor of the folds,
the learner modules or the state bundles must keep every file's bytes, or rewrite the record
and name the learners whose bytes moved and why. The cases run in one subprocess with OpenBLAS
pinned to the Haswell kernels they were recorded with.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pinned_digests() -> dict:
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "tests.okl_core.golden"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "AMD64"), reason="recorded with OpenBLAS's x86-64 Haswell kernels")
def test_every_learner_writes_the_recorded_model_bytes():
    from tests.okl_core.golden import recorded

    want, got = recorded(), _pinned_digests()
    assert sorted(got) == sorted(want), "the cases changed: a learner or an option value was added or removed"
    moved = {key: sorted(k for k in want[key]["arrays"] if got[key]["arrays"].get(k) != want[key]["arrays"][k])
             for key in want if got[key]["file"] != want[key]["file"]}
    assert not moved, f"{len(moved)} of {len(want)} model files changed (case/step: arrays that moved): {moved}"
