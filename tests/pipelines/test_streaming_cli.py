"""`pipelines.train --streaming` from the command line: without Prism it fails clearly."""

import subprocess
import sys

import numpy as np

from okl_core.data.layout import write_dataset


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
