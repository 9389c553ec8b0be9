"""Inputs and outputs under a URL scheme go through Beam's FileSystems (as gs:// on Dataflow).

A test file system serves ``okltest:///abs/path`` from the local disk, so the remote code
paths (dataset.json and Parquet through FileSystems streams, outputs through
FileSystems.create) run here without a cloud.
"""

import numpy as np
from apache_beam.io.localfilesystem import LocalFileSystem

import okl_core
from okl_core.data.layout import write_dataset
from pipelines import train
from tests.pipelines.reference import binary_data

PREFIX = "okltest://"


class _SchemeShim(LocalFileSystem):
    """Local files under the ``okltest://`` scheme."""

    @classmethod
    def scheme(cls):
        return "okltest"

    @staticmethod
    def _local(path):
        return path[len(PREFIX) :] if path.startswith(PREFIX) else path

    def join(self, basepath, *paths):
        return "/".join([basepath.rstrip("/"), *paths])

    def _path_open(self, path, mode, mime_type="application/octet-stream", compression_type=None):
        return super()._path_open(self._local(path), mode, mime_type, compression_type)

    def create(self, path, *args, **kwargs):
        return super().create(self._local(path), *args, **kwargs)

    def exists(self, path):
        return super().exists(self._local(path))


def test_remote_input_and_output_give_the_local_model(tmp_path):
    X, y = binary_data(1500)
    write_dataset(tmp_path / "data", X, y, "binary", n_shards=2, row_group_rows=400)
    args = ["--learner", "fogd", "--param", "n_components=16", "--sigma", "median", "--num_shards", "2", "--batch_rows", "256"]
    train.run(["--input", str(tmp_path / "data"), *args, "--output", str(tmp_path / "local")])
    remote = train.run(["--input", PREFIX + str(tmp_path / "data"), *args, "--output", PREFIX + str(tmp_path / "remote")])
    assert remote.metrics is None and remote.model_path == PREFIX + str(tmp_path / "remote" / "model.npz")
    assert (tmp_path / "remote" / "model.npz").read_bytes() == (tmp_path / "local" / "model.npz").read_bytes()
    for name in ("metrics.json", "online_error.png", "dead_letter.jsonl"):
        assert (tmp_path / "remote" / name).exists()
    learner, state = okl_core.load_model(tmp_path / "remote" / "model.npz")
    assert int(state.n_seen) == 1500 and np.isfinite(state.w).all()


def test_remote_input_must_be_a_data_set_directory(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit):
        train.run(["--input", PREFIX + str(tmp_path / "nothing"), "--learner", "fogd", "--output", str(tmp_path / "o")])
    assert "no dataset.json; remote inputs must be okl data set directories" in capsys.readouterr().err
