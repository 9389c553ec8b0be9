"""``python -m pipelines.prepare``: every kind end to end, summaries, errors, determinism."""

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from okl_core.data import open_dataset, read_idx
from pipelines import prepare
from okl_experiments.progress import ProgressBar
from tests.conftest import shared_data
from tests.data_files import libsvm_text, write_idx_pair

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_mnist_kind(tmp_path, capsys):
    images, labels, raw, y = write_idx_pair(tmp_path, n=30)
    summary = prepare.run(["mnist", "--images", images, "--labels", labels, "--output", str(tmp_path / "m"), "--shards", "4", "--quiet"])
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"wrote {tmp_path / 'm'}: 30 rows x 784 features (multiclass, classes [0, 1") and "4 shards" in out
    ds = open_dataset(tmp_path / "m")
    assert [s.n_rows for s in ds.shards] == [8, 8, 8, 6] and summary.info.n_rows == 30
    np.testing.assert_array_equal(ds.read_all().X, read_idx(images, labels)[0])


def test_libsvm_kind_with_like(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = np.round(rng.random((120, 9)) * (rng.random((120, 9)) < 0.4), 3)
    y = np.where(rng.random(120) < 0.5, 2, 4)
    (tmp_path / "train.svm").write_text(libsvm_text(X, y))
    (tmp_path / "test.svm").write_text(libsvm_text(X[:20], y[:20]))
    prepare.run(["libsvm", str(tmp_path / "train.svm"), "--output", str(tmp_path / "train"), "--feature_scaling", "minmax01", "--quiet"])
    prepare.run(["libsvm", str(tmp_path / "test.svm"), "--output", str(tmp_path / "test"), "--like", str(tmp_path / "train"), "--quiet"])
    train, test = open_dataset(tmp_path / "train"), open_dataset(tmp_path / "test")
    assert train.info.classes == [2, 4] and test.info.classes == [2, 4]
    np.testing.assert_array_equal(test.read_all().X, train.read_all().X[:20])
    assert "binary, classes [2, 4]" in capsys.readouterr().out


def test_libsvm_download_from_url_into_cache(tmp_path):
    source = tmp_path / "remote.svm"
    source.write_text("1 1:0.5\n-1 2:1\n")
    cache = tmp_path / "cache"
    prepare.run(["libsvm", source.as_uri(), "--output", str(tmp_path / "d"), "--download", "--cache_dir", str(cache), "--quiet"])
    assert (cache / "remote.svm").read_text() == source.read_text()
    assert open_dataset(tmp_path / "d").read_all().X.tolist() == [[0.5, 0.0], [0.0, 1.0]]


def test_csv_kind(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n")
    prepare.run(["csv", str(tmp_path / "t.csv"), "--output", str(tmp_path / "c"), "--target", "label", "--feature_scaling", "standard", "--quiet"])
    ds = open_dataset(tmp_path / "c")
    assert ds.task == "binary" and ds.info.classes == ["x", "y"]
    np.testing.assert_allclose(ds.read_all().X[:, 0], [-1.2247449, 0, 1.2247449], rtol=1e-6)


@pytest.mark.parametrize("kind", ["csv", "mnist"])
def test_compression_flag_reaches_every_shard(tmp_path, kind):
    if kind == "csv":
        (tmp_path / "t.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n")
        argv = ["csv", str(tmp_path / "t.csv"), "--target", "label"]
    else:
        images, labels, _, _ = write_idx_pair(tmp_path, n=30)
        argv = ["mnist", "--images", images, "--labels", labels]
    prepare.run([*argv, "--output", str(tmp_path / "zstd"), "--shards", "2", "--compression", "zstd", "--quiet"])
    prepare.run([*argv, "--output", str(tmp_path / "default"), "--shards", "2", "--quiet"])
    zstd, default = open_dataset(tmp_path / "zstd"), open_dataset(tmp_path / "default")
    codecs = {pq.ParquetFile(s.path).metadata.row_group(0).column(0).compression for s in zstd.shards}
    assert codecs == {"ZSTD"} and pq.ParquetFile(default.shards[0].path).metadata.row_group(0).column(0).compression == "LZ4"
    assert zstd.read_all().X.tobytes() == default.read_all().X.tobytes()


def test_molecular_kind(tmp_path, capsys):
    pytest.importorskip("rdkit")
    (tmp_path / "m.csv").write_text("smiles,PCE\nCCO,1.0\nnot-a-smiles,2.0\nO,3.0\n")
    summary = prepare.run(["molecular", str(tmp_path / "m.csv"), "--output", str(tmp_path / "mol"), "--max_atoms", "9", "--steps", "1,5,25", "--quiet"])
    assert summary.n_rejected == 1 and "1 rejected (rejects.csv)" in capsys.readouterr().out
    ds = open_dataset(tmp_path / "mol")
    assert ds.info.n_features == 45 * 3 and ds.read_all().y.tolist() == [1.0, 3.0]


def _mnist8m(tmp_path, name, *extra):
    images = str(shared_data("mnist", "t10k-images-idx3-ubyte.gz"))
    labels = str(shared_data("mnist", "t10k-labels-idx1-ubyte.gz"))
    argv = ["mnist8m", "--images", images, "--labels", labels, "--base_rows", "0:8000", "--seed", "9", "--quiet", "--output", str(tmp_path / name), *extra]
    return prepare.run(argv)


def test_mnist8m_pipeline_independent_of_shards(tmp_path):
    a = _mnist8m(tmp_path, "a", "--rows", "300", "--rows_per_shard", "300", "--batch_rows", "256", "--compression", "snappy")
    b = _mnist8m(tmp_path, "b", "--rows", "300", "--shards", "7", "--batch_rows", "50")
    c = _mnist8m(tmp_path, "c", "--rows", "300", "--rows_per_shard", "300", "--batch_rows", "256", "--compression", "snappy")
    da, db = open_dataset(a.path), open_dataset(b.path)
    assert len(da.shards) == 1 and len(db.shards) == 7
    ra, rb = da.read_all(), db.read_all()
    assert ra.X.tobytes() == rb.X.tobytes() and ra.y.tolist() == rb.y.tolist()
    np.testing.assert_array_equal(rb.row, np.arange(300))
    # Same seed and layout: the same bytes on disk.
    assert open(da.shards[0].path, "rb").read() == open(open_dataset(c.path).shards[0].path, "rb").read()
    assert pq.ParquetFile(da.shards[0].path).metadata.row_group(0).column(0).compression == "SNAPPY"
    info = json.loads(open(os.path.join(a.path, "dataset.json")).read())
    assert info["generator_seed"] == 9 and info["extra"]["base_rows"] == [0, 8000] and info["task"] == "multiclass"
    base_X, base_y = read_idx(str(shared_data("mnist", "t10k-images-idx3-ubyte.gz")), str(shared_data("mnist", "t10k-labels-idx1-ubyte.gz")))
    np.testing.assert_array_equal(ra.y, base_y[:300])


@pytest.mark.slow
def test_mnist8m_multiprocess_workers_give_the_same_rows(tmp_path, capfd):
    one = _mnist8m(tmp_path, "one", "--rows", "2000", "--rows_per_shard", "500")
    capfd.readouterr()
    two = _mnist8m(tmp_path, "two", "--rows", "2000", "--rows_per_shard", "300", "--num_workers", "2")
    # The workers log at ERROR, as train's do, and nothing before they have read their options (pipelines.sdk_worker).
    assert capfd.readouterr().err == ""
    assert open_dataset(one.path).read_all().X.tobytes() == open_dataset(two.path).read_all().X.tobytes()


def test_errors_exit_cleanly(tmp_path):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.prepare", "csv", str(tmp_path / "t.csv"), "--output", str(tmp_path / "o"), "--target", "y"],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert result.returncode == 2
    assert f"prepare: error: {tmp_path / 't.csv'}: no target column 'y'" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]
    with pytest.raises(SystemExit):
        prepare.run(["libsvm", "x", str(tmp_path / "o"), "--bogus-flag"])
    with pytest.raises(ValueError, match="--images and --labels"):
        prepare.run(["mnist", "--output", str(tmp_path / "o")])


def test_progress_bar_draws_without_tqdm(monkeypatch):
    import io

    monkeypatch.setitem(sys.modules, "tqdm", None)
    stream = io.StringIO()
    bar = ProgressBar(enabled=True, stream=stream, interval=0.0)
    bar.start(1 << 20, "B", "scan")
    bar.update(1 << 19)
    bar.finish()
    assert "scan [###############" in stream.getvalue() and "50%" in stream.getvalue()
    silent = io.StringIO()
    quiet = ProgressBar(enabled=False, stream=silent)
    quiet.start(10, "rows", "x")
    quiet.update(5)
    quiet.finish()
    assert silent.getvalue() == ""


def test_mnist8m_shards_report_rows_as_they_write_them(tmp_path, monkeypatch):
    """Progress moves by batches within a shard, not by whole shards."""
    import apache_beam as beam

    from okl_core.data.mnist8m import DeformationConfig
    from okl_core import heartbeat as heartbeat_module
    from okl_core.heartbeat import read_heartbeats
    from transforms.generate import ShardPlan, WriteMnist8mShards

    beats = []
    real_beat = heartbeat_module.Heartbeat.beat

    def every_beat(self, rows, done=False):  # unthrottled, and recorded
        beats.append((os.path.basename(self.path), rows, done))
        self._last = 0.0
        real_beat(self, rows, done=True)

    monkeypatch.setattr(heartbeat_module.Heartbeat, "beat", every_beat)
    base = {"images": str(shared_data("mnist", "t10k-images-idx3-ubyte.gz")), "labels": str(shared_data("mnist", "t10k-labels-idx1-ubyte.gz")),
            "start": 0, "stop": 500}
    (tmp_path / "stage").mkdir()
    (tmp_path / "beats").mkdir()
    plan = ShardPlan(450, 300)
    # The FnApiRunner, not Beam's default: from Beam 2.68 its DirectRunner tries Prism first,
    # whose process-wide job server then keeps this pipeline's options (no --prism_location)
    # for every later Prism job of the test session.
    with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        _ = p | beam.Create([0, 1]) | WriteMnist8mShards(str(tmp_path / "stage"), base, 3, DeformationConfig().to_dict(), plan,
                                                         batch_rows=100, progress_dir=str(tmp_path / "beats"))
    assert sorted(b for b in beats if b[0] == "shard-0.json") == [("shard-0.json", n, d) for n, d in [(100, False), (200, False), (300, False), (300, True)]]
    assert sorted(b for b in beats if b[0] == "shard-1.json") == [("shard-1.json", n, d) for n, d in [(100, False), (150, False), (150, True)]]
    assert {k: v["rows"] for k, v in read_heartbeats(str(tmp_path / "beats")).items()} == {"shard-0": 300, "shard-1": 150}
    assert sorted(os.listdir(tmp_path / "stage")) == [s["file"] for s in plan.shards()]  # no progress files among the data
