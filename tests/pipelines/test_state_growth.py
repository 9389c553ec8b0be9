"""pipelines.train refuses, at launch, a learner whose state would outgrow its cap (issue 17, class 7)."""

import os

import numpy as np
import pytest

from okl_core.data.layout import write_dataset
from pipelines import train


def _regression(path, n=600):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    write_dataset(path, X, np.sin(X[:, 0]) + 0.5 * X[:, 1], "regression", n_shards=2)


@pytest.mark.parametrize("name", ["krr", "kernel_awv"])
def test_an_exact_learner_over_max_rows_is_refused_before_the_job(tmp_path, capsys, name):
    _regression(tmp_path / "data")
    with pytest.raises(SystemExit) as exit_info:
        train.run(["--input", str(tmp_path / "data"), "--learner", name, "--param", "max_rows=500",
                   "--sigma", "1.0", "--output", str(tmp_path / "out"), "--runner=DirectRunner"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"python -m pipelines.train: error: {name}: a stream (600 rows: a 3 MiB state holding every example and a "
                   "600 x 600 inverse) would exceed max_rows=500; raise max_rows if about three times that fits in memory "
                   "(updates and merges copy the inverse), or use pkawv_taylor or pkawv_nystrom, whose state does not grow "
                   "with the stream")
    assert not os.path.exists(tmp_path / "out" / "model.npz")


def test_within_the_cap_it_trains(tmp_path):
    _regression(tmp_path / "data")
    result = train.run(["--input", str(tmp_path / "data"), "--learner", "krr", "--param", "max_rows=600",
                        "--sigma", "1.0", "--num_shards", "2", "--output", str(tmp_path / "out"), "--runner=DirectRunner"])
    assert result.metrics["rows"]["trained"] == 600 and result.metrics["diverged"] is None
