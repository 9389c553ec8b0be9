"""A row group that cannot be read (a damaged page, found only while reading) is dead-lettered, not a crash.

The data set is real (okl's writer, page checksums on); bytes of one row group's ``x``
column chunk are flipped on disk. The job finishes: that group's rows are counted and
dead-lettered with the file, row group and reason, and the model equals the row-by-row
fold of the other rows.
"""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import okl_core
from okl_core.data import write_dataset
from okl_core.data.plan import StreamPlan
from pipelines import train
from tests.pipelines.reference import binary_data, reference_model

N, GROUP_ROWS, DAMAGED = 600, 100, 2
DAMAGES = {
    # where in the x column chunk of the damaged group, what the reader says
    "page header": (0, "Couldn't deserialize thrift"),
    "page header fields": (3, "Invalid page header"),
    "page checksum field": (9, "could not verify page integrity, CRC checksum verification failed for page_ordinal 0"),
    "compressed bytes": (200, "could not verify page integrity, CRC checksum verification failed for page_ordinal 0"),
}


def _damage(path, offset):
    chunk = pq.ParquetFile(path).metadata.row_group(DAMAGED).column(0)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + offset] ^= 0x55
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("mode", [[], ["--shuffle_rows"]], ids=["read-in-training", "shuffle-rows"])
@pytest.mark.parametrize("offset, said", DAMAGES.values(), ids=list(DAMAGES))
def test_unreadable_row_group_is_dead_lettered(tmp_path, mode, offset, said):
    X, y = binary_data(N)
    write_dataset(tmp_path / "data", X, y, "binary", n_shards=2, row_group_rows=GROUP_ROWS, classes=[-1, 1])
    shard = tmp_path / "data" / "part-00000-of-00002.parquet"
    _damage(shard, offset)
    args = ["--learner", "fogd", "--param", "n_components=8", "--sigma", "1.5", "--num_shards", "2", "--batch_rows", "64"]
    result = train.run(["--input", str(tmp_path / "data"), *args, *mode, "--output", str(tmp_path / "out")])

    lost = np.arange(DAMAGED * GROUP_ROWS, (DAMAGED + 1) * GROUP_ROWS)
    with open(result.files["dead_letter"]) as f:
        dead = [json.loads(line) for line in f]
    assert [d["position"] for d in dead] == lost.tolist()
    assert {(d["row"], d["file"], d["split"]) for d in dead} == {(-1, str(shard), "train")}
    reasons = {d["reason"] for d in dead}
    assert len(reasons) == 1 and reasons.pop().startswith(f"unreadable row group: row group {DAMAGED} ({said}")
    rows = result.metrics["rows"]
    assert (rows["read"], rows["trained"], rows["rejected"]) == (N, N - GROUP_ROWS, GROUP_ROWS)
    assert rows["rejected_by_reason"] == {"unreadable row group": GROUP_ROWS}
    good = np.ones(N, bool)
    good[lost] = False
    learner = okl_core.make_learner("fogd", n_inputs=5, n_components=8, sigma=1.5)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, X, y, StreamPlan(N, 2, 1, 64), good=good, classes=[-1, 1])


def test_what_can_be_checked_at_launch_is_refused_before_the_job(tmp_path, capsys):
    X, y = binary_data(N)
    write_dataset(tmp_path / "data", X, y, "binary", n_shards=2, row_group_rows=GROUP_ROWS, classes=[-1, 1])
    shard = tmp_path / "data" / "part-00001-of-00002.parquet"
    pq.write_table(pq.read_table(shard).slice(0, 0), shard)  # emptied: the row accounting would still balance
    with pytest.raises(SystemExit) as refused:
        train.run(["--input", str(tmp_path / "data"), "--learner", "fogd", "--output", str(tmp_path / "out")])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m pipelines.train: error: --input {tmp_path / 'data'}: {shard}: dataset.json records 300 rows, the file holds 0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("offset", [DAMAGES["page header"][0], DAMAGES["compressed bytes"][0]], ids=["page header", "compressed bytes"])
def test_sigma_median_skips_a_damaged_row_group_as_training_does(tmp_path, offset):
    """The median's sample once read without checksums (a flipped byte in x fed it other
    numbers) and a damaged page header ended the launch in a traceback."""
    X, y = binary_data(N)
    write_dataset(tmp_path / "data", X, y, "binary", n_shards=1, row_group_rows=GROUP_ROWS, classes=[-1, 1])
    _damage(tmp_path / "data" / "part-00000-of-00001.parquet", offset)
    result = train.run(["--input", str(tmp_path / "data"), "--learner", "fogd", "--param", "n_components=8", "--sigma", "median",
                        "--output", str(tmp_path / "out")])
    sample = np.delete(X, np.s_[DAMAGED * GROUP_ROWS:(DAMAGED + 1) * GROUP_ROWS], axis=0)[:1000]
    assert result.metrics["learner"]["config"]["sigma"] == pytest.approx(okl_core.median_heuristic(sample), rel=1e-12)
    assert result.metrics["rows"]["rejected"] == GROUP_ROWS
