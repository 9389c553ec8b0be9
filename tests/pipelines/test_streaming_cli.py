"""`pipelines.train --streaming` from the command line: without Prism it fails clearly; a
learner that cannot mix is refused at launch with --mix_weight > 0."""

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from pipelines.common import UsageError
from pipelines.stream import check_streaming_args


def test_streaming_without_a_prism_binary_is_a_clear_usage_error(tmp_path):
    X = np.random.default_rng(0).random((200, 3), dtype=np.float32)
    write_dataset(tmp_path / "in", X, X.sum(1), "regression", n_shards=2)
    cmd = [sys.executable, "-m", "pipelines.train", "--streaming", "--input", str(tmp_path / "in" / "*.parquet"),
           "--learner", "fogd_r", "--output", str(tmp_path / "out"), "--stop_after", "5",
           "--prism_location", str(tmp_path / "no-prism-here")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--prism_location" in done.stderr and "Prism" in done.stderr


def _streaming_args(mix_weight):
    return SimpleNamespace(rounds=1, mix_weight=mix_weight, snapshot_batches=None, snapshot_seconds=None,
                           poll_seconds=1.0, merge_seconds=None)


def test_mix_weight_refuses_learners_that_cannot_mix_at_launch():
    for name in ("kernel_ogd", "pkawv_taylor", "nogd"):
        learner = okl_core.make_learner(name, n_inputs=3)
        with pytest.raises(UsageError, match=rf"--mix_weight 0\.5: {name} cannot mix") as err:
            check_streaming_args(_streaming_args(0.5), learner)
        assert "\n" not in str(err.value)
        check_streaming_args(_streaming_args(0.0), learner)  # weight 0: streams without mixing
    for name in ("fogd", "dsg", "raker"):
        check_streaming_args(_streaming_args(0.5), okl_core.make_learner(name, n_inputs=3))
