"""`pipelines.train --streaming` from the command line: without Prism it fails clearly; a
learner that cannot mix is refused at launch with --mix_weight > 0."""

import os
import subprocess
import sys

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from pipelines.common import UsageError
from pipelines.requests import StreamRequest
from pipelines.stream import check_mix_weight


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
    assert not (tmp_path / "out").exists()  # made at launch, and once left behind empty


def test_mix_weight_refuses_learners_that_cannot_mix_at_launch():
    for name in ("kernel_ogd", "pkawv_taylor", "nogd"):
        learner = okl_core.make_learner(name, n_inputs=3)
        with pytest.raises(UsageError, match=rf"--mix_weight 0\.5: {name} cannot mix") as err:
            check_mix_weight(StreamRequest(mix_weight=0.5), learner)
        assert "\n" not in str(err.value)
        check_mix_weight(StreamRequest(mix_weight=0.0), learner)  # weight 0: streams without mixing
    for name in ("fogd", "dsg", "raker"):
        check_mix_weight(StreamRequest(mix_weight=0.5), okl_core.make_learner(name, n_inputs=3))


@pytest.mark.parametrize("flag", ["stop_after", "snapshot_seconds", "poll_seconds", "merge_seconds"])
@pytest.mark.parametrize("value, shown", [(-5.0, "-5"), (0.0, "0"), (float("nan"), "nan"), (float("inf"), "inf")])
def test_time_flags_must_be_finite_and_positive(flag, value, shown):
    """Issue: inf and NaN gave Beam tracebacks (some after the job ran), --stop_after 0 ran and learned nothing."""
    with pytest.raises(UsageError) as err:
        StreamRequest(**{flag: value})
    assert str(err.value) == f"--{flag} {shown}: must be a finite number of seconds > 0"


def _plain_parquet(path, rows=40, first_row=0, checksums=True):
    """A Parquet file as a user writes it with pyarrow (no dataset.json): x list<float32>, y int32 +-1, row numbers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(first_row)
    X = rng.random((rows, 4), dtype=np.float32)
    table = pa.table({
        "x": pa.array(list(X), pa.list_(pa.float32())),
        "y": pa.array(np.where(X[:, 0] > 0.5, 1, -1).astype(np.int32)),
        "row": pa.array(np.arange(first_row, first_row + rows, dtype=np.int64)),
    })
    pq.write_table(table, path, write_page_checksum=checksums)
    return path


def test_a_streamed_directory_of_plain_parquet_files_is_watched_as_dir_star_parquet(tmp_path):
    """Issue: --input DIR without dataset.json was refused ("not an okl data set"), though README
    says a directory is watched as DIR/*.parquet."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines import train
    from pipelines.job import resolve_job
    from pipelines.stream import build_streaming_graph

    (tmp_path / "in").mkdir()
    _plain_parquet(tmp_path / "in" / "a.parquet")
    request = train.parse_args(
        ["--streaming", "--input", str(tmp_path / "in"), "--learner", "fogd", "--sigma", "1", "--output", str(tmp_path / "out")])
    job = resolve_job(request)
    assert (job.source.n_features, job.source.task) == (4, "binary")
    resolved = build_streaming_graph(beam.Pipeline(options=PipelineOptions([])), job)
    assert resolved["pattern"] == str(tmp_path / "in" / "*.parquet")


def test_a_damaged_page_in_the_first_streamed_file_is_one_line_at_launch(tmp_path, capsys):
    """Issue: a page that fails its checksum ended the launch in a traceback (OSError from _files_width)."""
    import pyarrow.parquet as pq

    from pipelines import train

    (tmp_path / "in").mkdir()
    path = _plain_parquet(tmp_path / "in" / "a.parquet")
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + 100] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(SystemExit) as refused:
        train.run(["--streaming", "--input", str(tmp_path / "in"), "--learner", "fogd", "--sigma", "1", "--output", str(tmp_path / "out")])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"python -m pipelines.train: error: --input {tmp_path / 'in' / '*.parquet'}: {path}: column x cannot be read to tell the number of "
        "features (could not verify page integrity, CRC checksum verification failed for page_ordinal 0)")


def _labels_file(path, labels):
    """A user's Parquet file of ``labels`` (two features), rows numbered from 0."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(labels)
    x = pa.array([[float(i), 1.0] for i in range(n)], pa.list_(pa.float32()))
    pq.write_table(pa.table({"x": x, "y": pa.array(labels, pa.int32()), "row": pa.array(np.arange(n))}), path)


def test_a_streaming_launch_takes_files_that_each_number_their_rows_from_zero(tmp_path):
    """Independent producers of a watched folder number each file's rows from 0; the
    disjointness check once refused such a streaming launch (it ran before this stop)."""
    from pipelines.common import UsageError
    from pipelines.job import _open

    _labels_file(tmp_path / "a.parquet", [1, -1, 1])
    _labels_file(tmp_path / "b.parquet", [-1, 1])
    source = _open(str(tmp_path / "*.parquet"), "--input", streaming=True)
    assert (source.task, source.n_rows) == ("binary", 5)
    with pytest.raises(UsageError, match=r"overlap rows 0..2"):
        _open(str(tmp_path / "*.parquet"), "--input")


def test_a_relaunch_takes_up_the_files_an_earlier_job_dead_lettered(tmp_path):
    """Issue: a streaming relaunch on the same --output was refused while --input still held a file
    the earlier job had dead-lettered (``--input DIR/*.parquet: foreign.parquet: not in the okl layout``).
    The launch leaves such files out of its checks; the reader skips one that holds nothing to learn
    (its dead letter stands), and reads one whose good rows no version holds (a job stopped between)."""
    import apache_beam as beam
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines import train
    from pipelines.common import make_pipeline
    from pipelines.job import resolve_job
    from pipelines.stream import build_streaming_graph
    from transforms.streaming import ReadParquetFiles, WriteDeadLetterFiles, dead_letter_file, dead_lettered_files

    watched, output = tmp_path / "in", tmp_path / "out"
    watched.mkdir()
    good = str(_plain_parquet(watched / "a.parquet"))
    foreign = str(watched / "foreign.parquet")
    pq.write_table(pa.table({"a": [1, 2, 3]}), foreign)
    mixed = str(watched / "mixed.parquet")
    table = pq.read_table(_plain_parquet(tmp_path / "mixed.parquet", first_row=40))
    pq.write_table(table.set_column(0, "x", pa.array([None] + table.column("x").to_pylist()[1:], pa.list_(pa.float32()))), mixed)
    # The earlier job: its reader's dead letters, written by its step (no version yet: it stopped before the first one)
    reader = ReadParquetFiles(4, "binary", None, 1, 16)
    judged = [(path, reader.read(path, 0)) for path in (foreign, mixed)]
    assert [len(batches) for _, (batches, _) in judged] == [0, 3]  # foreign: nothing to learn; mixed: 39 good rows
    with make_pipeline(PipelineOptions([])) as p:
        p | beam.Create([(path, dead) for path, (_, dead) in judged]) | WriteDeadLetterFiles(str(output))
    letters = {path: open(dead_letter_file(str(output), path), "rb").read() for path in (foreign, mixed)}

    request = train.parse_args(
        ["--streaming", "--input", str(watched), "--learner", "fogd", "--sigma", "1", "--output", str(output)])
    job = resolve_job(request)  # was: UsageError naming foreign.parquet
    assert [g[0] for g in job.source.row_groups] == [good]  # the judged files are left out of the launch's checks
    resolved = build_streaming_graph(beam.Pipeline(options=PipelineOptions([])), job)
    assert resolved["files_dead_lettered"] == 2
    again = ReadParquetFiles(4, "binary", None, 1, 16, dead_lettered=dead_lettered_files(str(output), {}))
    assert again.read(foreign, 0) == ([], [])
    batches, dead = again.read(mixed, 0)
    assert (len(batches), dead) == (3, judged[1][1][1])  # its rows are learned; its dead letter is the same
    assert again.read(good, 0)[0]  # a file no job dead-lettered is read as ever
    assert {path: open(dead_letter_file(str(output), path), "rb").read() for path in (foreign, mixed)} == letters


def test_a_relaunch_whose_only_file_an_earlier_job_dead_lettered_in_part_opens_it(tmp_path):
    """Issue: a job stopped (Ctrl-C) after dead-lettering a bad row of the only watched file and
    before a version learned it whole could not be restarted (``no data set at 'in/*.parquet' (...;
    1 left out: in/mixed.parquet)``), though its good rows were still to learn and the restart ran
    before the dead-lettered files were left out of the launch's checks."""
    import apache_beam as beam
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines import train
    from pipelines.common import make_pipeline
    from pipelines.job import resolve_job
    from transforms.streaming import ReadParquetFiles, WriteDeadLetterFiles, dead_lettered_files

    watched, output = tmp_path / "in", tmp_path / "out"
    watched.mkdir()
    table = pq.read_table(_plain_parquet(tmp_path / "mixed.parquet"))
    mixed = str(watched / "mixed.parquet")
    pq.write_table(table.set_column(0, "x", pa.array([None] + table.column("x").to_pylist()[1:], pa.list_(pa.float32()))), mixed)
    batches, dead = ReadParquetFiles(4, "binary", None, 1, 16).read(mixed, 0)  # the earlier job: 39 good rows, 1 dead letter
    with make_pipeline(PipelineOptions([])) as p:
        p | beam.Create([(mixed, dead)]) | WriteDeadLetterFiles(str(output))
    assert dead_lettered_files(str(output), {}) == {mixed}

    request = train.parse_args(
        ["--streaming", "--input", str(watched), "--learner", "fogd", "--sigma", "1", "--output", str(output)])
    job = resolve_job(request)  # was: UsageError, no data set at the glob
    assert ([g[0] for g in job.source.row_groups], job.source.n_rows, job.source.task) == ([mixed], 40, "binary")
    assert len(batches) == 3


STREAM_FOGD = ["--learner", "fogd", "--param", "n_components=16", "--sigma", "1"]


@pytest.fixture(scope="module")
def classes_sets(tmp_path_factory):
    """The same rows prepared with the classes [0, 1] and [1, 0], and a model trained on the first."""
    from pipelines import train
    from tests.pipelines.reference import binary_data

    root = tmp_path_factory.mktemp("classes")
    X, y = binary_data(300)
    write_dataset(root / "b01", X, y, "binary", classes=[0, 1])
    write_dataset(root / "b10", X, -y, "binary", classes=[1, 0])
    model = train.run(["--input", str(root / "b01"), *STREAM_FOGD, "--output", str(root / "run")]).model_path
    return root, model


def _streaming_error(argv, capsys) -> str:
    from pipelines import train

    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        train.run(["--streaming", *STREAM_FOGD, *argv])
    assert refused.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def test_a_streaming_job_refuses_to_continue_a_model_trained_on_other_classes(classes_sets, tmp_path, capsys):
    """Issue: --init_model (or a restart's newest version) trained on the classes [0, 1] went on
    learning data whose dataset.json says [1, 0]: every label learned as the other class."""
    import shutil

    from okl_core.state import version_file_name

    root, model = classes_sets
    info = root / "b10" / "dataset.json"
    def refused(model):  # as okl predict words it: the data is what to prepare again (not the learner, nor the output)
        return (f"python -m pipelines.train: error: --input {info} has the classes [1, 0], the model {model} was trained on [0, 1]: "
                "its labels would be scored as other classes; prepare it with --like the training data set")

    line = _streaming_error(["--input", str(root / "b10"), "--init_model", model, "--output", str(tmp_path / "a")], capsys)
    assert line == refused(model)
    (tmp_path / "b").mkdir()
    shutil.copy(model, tmp_path / "b" / version_file_name(3))  # a restart in the same --output
    line = _streaming_error(["--input", str(root / "b10"), "--output", str(tmp_path / "b")], capsys)
    assert line == refused(tmp_path / "b" / version_file_name(3))  # was: "holds a model version this job cannot continue (...);
    # restart with that run's learner and parameters, or give a new --output": neither would help
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [version_file_name(3)]


def test_the_model_a_streaming_job_starts_from_records_the_classes_its_versions_keep(classes_sets, tmp_path):
    """The start model records the data's classes (dataset.json), else those of the model it
    continues from (files without dataset.json: their classes are the codes); MergeSnapshots
    writes them into every version (tests/transforms/test_streaming.py)."""
    from pipelines.job import _open
    from pipelines.stream import initial_model

    root, model = classes_sets
    learner, state = okl_core.load_model(model)
    source = _open(str(root / "b01"), "--input", streaming=True)
    glob_source = _open(str(root / "b10" / "*.parquet"), "--input", streaming=True)  # no dataset.json: not checked
    cases = [(None, source, learner.init(), [0, 1]), (model, source, state, [0, 1]),
             (model, glob_source, state, [0, 1]), (None, glob_source, learner.init(), None)]
    for init_model, data, expected, classes in cases:
        started, _, _ = initial_model(init_model, learner, str(tmp_path / "out"), data)
        assert okl_core.model_classes(started) == classes
        assert started == okl_core.model_bytes(learner, expected, classes)


def _plain_input(tmp_path):
    (tmp_path / "in").mkdir()
    _plain_parquet(tmp_path / "in" / "a.parquet")
    return str(tmp_path / "in" / "*.parquet")


@pytest.mark.parametrize("flags, message", [
    (["--rounds", "2"], "--rounds is for batch jobs; a streaming job mixes continuously (--mix_weight)"),
    (["--mix_weight", "2"], "--mix_weight 2.0: must be in [0, 1]"),
    (["--environment_type=PROCESS"], "Beam pipeline options: Option process_command is required for environment type PROCESS"),
])
@pytest.mark.parametrize("output", ["new/deep/out", None], ids=["output", "default"])
def test_a_launch_refused_after_the_job_was_resolved_leaves_no_folder(tmp_path, monkeypatch, capsys, flags, message, output):
    """Issue: a streaming launch refused after resolve_job had made --output (a late flag check, a class
    mismatch, Prism not starting) left the empty folder, and its parents, behind."""
    from pipelines import train

    pattern = _plain_input(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["--streaming", "--input", pattern, *STREAM_FOGD, "--stop_after", "5", *[f.format(tmp=tmp_path) for f in flags]]
    with pytest.raises(SystemExit) as refused:
        train.run(argv + (["--output", output] if output else []))  # (Prism that does not start: the test above)
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"python -m pipelines.train: error: {message}"
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_a_refused_restart_keeps_its_output_as_it_was(classes_sets, tmp_path, capsys):
    """The folder of a restart existed before the launch: a refusal removes nothing of it, not even when empty."""
    root, model = classes_sets
    (tmp_path / "empty").mkdir()
    _streaming_error(["--input", str(root / "b01"), "--rounds", "2", "--output", str(tmp_path / "empty")], capsys)
    assert os.listdir(tmp_path / "empty") == []
    line = _streaming_error(["--input", str(root / "b10"), "--init_model", model, "--output", str(tmp_path / "new")], capsys)
    assert "has the classes [1, 0]" in line and sorted(os.listdir(tmp_path)) == ["empty"]


@pytest.mark.parametrize("output, message", [
    ("a-file", "--output {tmp}/a-file is a file, not a directory"),
    ("a-file/sub", "--output {tmp}/a-file/sub: cannot write there (Not a directory: {tmp}/a-file/sub)"),
    ("/proc/okl-x", "--output /proc/okl-x: cannot write there (No such file or directory: /proc/okl-x)"),
])
def test_a_streaming_output_that_cannot_be_made_is_one_line(tmp_path, capsys, output, message):
    """Issue: these ended in FileExistsError / NotADirectoryError / FileNotFoundError tracebacks."""
    (tmp_path / "a-file").write_text("x")
    pattern = _plain_input(tmp_path)
    path = output if output.startswith("/") else str(tmp_path / output)
    line = _streaming_error(["--input", pattern, "--output", path], capsys)
    assert line == f"python -m pipelines.train: error: {message.format(tmp=tmp_path)}"


def test_streaming_without_input_is_refused_before_writing_the_demo_data(tmp_path, monkeypatch, capsys):
    """Issue: the built-in demo data set (65,536 rows) was written into runs/ before --input was asked for, and left there."""
    monkeypatch.chdir(tmp_path)
    line = _streaming_error([], capsys)
    assert line == "python -m pipelines.train: error: --streaming needs --input (a directory or glob where new Parquet files appear)"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("damage, why", [
    ({"model-v000002.json": b'{"version": 2, "files": {'},
     "{out}/model-v000002.json: not a version record okl wrote (Expecting property name enclosed in double quotes: line 1 column 26 (char 25))"),
    ({"model-v000002.json": b'{"version": 2, "files": {"/in/a.parquet": 40}}'},
     "{out}/model-v000002.json: not a version record okl wrote ('files' entry '/in/a.parquet' is 40, not an object of rows (an integer >= 0) and done (true or false))"),
    ({"model-v000002.npz": b"not a model"}, "{out}/model-v000002.npz: not a readable okl model file (File is not a zip file)"),
])
def test_a_restart_from_a_damaged_newest_version_is_one_line_naming_the_file(classes_sets, tmp_path, capsys, damage, why):
    """Issue: a truncated or foreign version record in a restart's --output ended the launch in a traceback.
    Versions are written atomically, so a damaged one is refused, not skipped: which rows the job holds
    would otherwise change silently; the line says how to go back to the version before it."""
    import shutil

    from okl_core.state import version_file_name

    root, model = classes_sets
    out = tmp_path / "out"
    out.mkdir()
    for v in (1, 2):
        shutil.copy(model, out / version_file_name(v))
    for name, data in damage.items():
        (out / name).write_bytes(data)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    line = _streaming_error(["--input", str(root / "b01"), "--output", str(out)], capsys)
    assert line == (f"python -m pipelines.train: error: --output {out}: its newest model version cannot be used ({why.format(out=out)}); "
                    "move model-v000002.npz and its .json record out of the folder to restart from the version before it, or give a new --output")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # The same file given as --init_model is named as that flag's.
    line = _streaming_error(["--input", str(root / "b01"), "--init_model", str(out / version_file_name(2)), "--output", str(tmp_path / "new")], capsys)
    named = "" if why.startswith("{out}/model-v000002.npz") else f"{out / version_file_name(2)}: "
    assert line == f"python -m pipelines.train: error: --init_model {named}{why.format(out=out)}"
