"""pipelines.train end to end on small data: exactness against plain okl_core folds,
determinism under delivery order and file layout, rounds, errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.data.plan import StreamPlan
from okl_core.data.synthetic import gaussian_blobs
from okl_core.learners.multikernel import parse_kernel_dictionary
from okl_experiments.params import DEFAULT_BATCH_ROWS, MEDIAN_ROWS
from pipelines import train
from tests.pipelines.reference import binary_data, reference_model
from tests.pipelines.runner_cases import ROOT

FOGD = ["--learner", "fogd", "--param", "n_components=32", "--sigma", "1.5", "--eta", "0.05"]


def _run(tmp_path, name, *args):
    result = train.run([*args, "--output", str(tmp_path / name), "--runner=DirectRunner"])
    with open(result.model_path, "rb") as f:
        return result, f.read()


@pytest.fixture(scope="module")
def binary_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("binary")
    X, y = binary_data(3000)
    write_dataset(root / "train", X, y, "binary", n_shards=3, row_group_rows=700)
    Xt, yt = binary_data(800, seed=1)
    write_dataset(root / "test", Xt, yt, "binary", n_shards=1, row_group_rows=500)
    return root, X, y, Xt, yt


def test_one_shard_is_the_sequential_fold_bit_for_bit(tmp_path, binary_set):
    root, X, y, Xt, yt = binary_set
    result, model = _run(tmp_path, "seq", "--input", str(root / "train"), "--test", str(root / "test"), *FOGD, "--batch_rows", "500")
    learner = okl_core.make_learner("fogd", n_inputs=5, n_components=32, sigma=1.5, eta=0.05)
    assert model == reference_model(learner, X, y, StreamPlan(3000, 1, 1, 500))
    # The metrics are the fold's online and test numbers.
    state = learner.init()
    online = okl_core.Prequential("binary")
    curves = []
    for start in range(0, 3000, 500):
        state, scores = learner.update(state, X[start : start + 500], y[start : start + 500])
        online.add(scores, y[start : start + 500])
        wrong = learner.to_labels(scores) != y[start : start + 500]
        curves.append([[500 * k // 8, int(wrong[: 500 * k // 8].sum())] for k in range(1, 9)])
    m = result.metrics
    assert [b["curve"] for b in m["batches"]] == curves  # the points within each batch, for the plot
    assert m["online"]["merged"]["mistakes"] == online.mistakes and m["rows"]["trained"] == 3000
    assert m["test"]["mistakes"] == int((learner.to_labels(learner.predict(state, Xt)) != yt).sum())
    assert len(m["batches"]) == 6 and [b["n_seen"] for b in m["batches"]] == list(range(500, 3001, 500))
    assert os.path.getsize(result.files["plot"]) > 1000 and open(result.files["dead_letter"]).read() == ""


def test_dsg_one_shard_keeps_minibatches(tmp_path, binary_set):
    root, X, y, _, _ = binary_set
    params = ["--param", "block_size=16", "--param", "batch_size=16", "--param", "theta=2.0", "--sigma", "1.5"]
    _, model = _run(tmp_path, "dsg", "--input", str(root / "train"), "--learner", "dsg", *params, "--batch_rows", "160")
    learner = okl_core.make_learner("dsg", n_inputs=5, block_size=16, batch_size=16, theta=2.0, sigma=1.5)
    assert model == reference_model(learner, X, y, StreamPlan(3000, 1, 1, 160, align=16))
    assert int(okl_core.model_from_bytes(model)[1].t) == 3000 // 16 + 1  # 187 full mini-batches and one of 8 rows


def test_shards_and_rounds_are_the_unrolled_merge_of_folds(tmp_path, binary_set):
    root, X, y, _, _ = binary_set
    _, model = _run(tmp_path, "k3r2", "--input", str(root / "train"), *FOGD, "--num_shards", "3", "--rounds", "2", "--batch_rows", "256")
    learner = okl_core.make_learner("fogd", n_inputs=5, n_components=32, sigma=1.5, eta=0.05)
    assert model == reference_model(learner, X, y, StreamPlan(3000, 3, 2, 256))
    assert model != reference_model(learner, X, y, StreamPlan(3000, 3, 1, 256))


def test_same_bytes_whatever_the_delivery_order_and_file_layout(tmp_path, binary_set):
    root, X, y, _, _ = binary_set
    args = [*FOGD, "--num_shards", "2", "--rounds", "2", "--batch_rows", "300"]
    _, base = _run(tmp_path, "a", "--input", str(root / "train"), *args)
    _, shuffled = _run(tmp_path, "b", "--input", str(root / "train"), *args, "--read_order_seed", "7")
    # The same rows written as 5 files with row groups of 333 rows (batches span row groups and files).
    write_dataset(tmp_path / "relaid", X, y, "binary", n_shards=5, row_group_rows=333)
    _, relaid = _run(tmp_path, "c", "--input", str(tmp_path / "relaid" / "part-*.parquet"), *args, "--read_order_seed", "3")
    # Rows read in their own step and shuffled to the training step: the same model again.
    _, shipped = _run(tmp_path, "d", "--input", str(tmp_path / "relaid"), *args, "--shuffle_rows", "--read_order_seed", "5")
    assert base == shuffled == relaid == shipped


def test_multiclass_config_file_and_flags(tmp_path):
    X, y = gaussian_blobs(1200, seed=5, n_classes=3, n_features=4)
    write_dataset(tmp_path / "mc", X, y, "multiclass", n_shards=2, row_group_rows=256, classes=[0, 1, 2])
    config = tmp_path / "best.json"
    config.write_text(json.dumps({"learner": "mfogd", "params": {"n_components": 16, "sigma": 9.0, "eta": 0.1}}))
    result, model = _run(tmp_path, "mc-out", "--input", str(tmp_path / "mc"), "--config", str(config), "--sigma", "2.0", "--num_shards", "2")
    learner = okl_core.make_learner("mfogd", n_inputs=4, n_classes=3, n_components=16, sigma=2.0, eta=0.1)
    assert model == reference_model(learner, X, y, StreamPlan(1200, 2, 1, DEFAULT_BATCH_ROWS), classes=[0, 1, 2])
    assert result.metrics["learner"]["config"]["n_classes"] == 3
    assert [s["shard"] for s in result.metrics["online"]["per_shard"]] == [0, 1]


def test_sigma_median_uses_the_first_rows(tmp_path, binary_set):
    root, X, _, _, _ = binary_set
    result, _ = _run(tmp_path, "med", "--input", str(root / "train"), "--learner", "fogd", "--param", "n_components=8", "--sigma", "0.5*median")
    expected = 0.5 * okl_core.median_heuristic(X[:MEDIAN_ROWS], n_samples=MEDIAN_ROWS)
    assert result.metrics["learner"]["config"]["sigma"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--learner", "nope"], "unknown learner 'nope'"),
        (["--input", "{missing}", "--learner", "fogd"], "no data set at"),
        (["--learner", "dsg", "--input", "{mc}"], "learner dsg is set up for binary data but"),
        (["--learner", "mfogd"], "set up for multiclass data but"),
        (["--learner", "fogd", "--param", "bogus=1"], "unknown parameter"),
        (["--learner", "fogd", "--param", "novalue"], "expected KEY=VALUE"),
        (["--learner", "fogd", "--sigma", "median/2"], "expected a number"),
        (["--learner", "fogd", "--num_shards", "5000"], "some segments would be empty"),
        (["--learner", "fogd", "--test", "{mc}"], "--test"),
        # streaming flags a batch job once ignored (a random-bytes --init_model trained a fresh model)
        (["--learner", "fogd", "--init_model", "{missing}"], "error: --init_model is for streaming jobs (--streaming); without it, this is a batch job, which would ignore it\n"),
        (["--learner", "fogd", "--stop_after", "3", "--mix_weight", "0.5"], "error: --stop_after, --mix_weight are for streaming jobs"),
        (["--learner", "fogd", "--poll_seconds", "1"], "error: --poll_seconds is for streaming jobs"),
        (["--learner", "fogd", "--batch_rows", "0"], "error: --batch_rows must be >= 1, got 0\n"),  # once silently 4096
        (["--learner", "fogd", "--runner=Bogus"], "error: --runner Bogus: not a runner Beam knows; valid values are DataflowRunner, "),
    ],
)
def test_clear_errors(tmp_path, binary_set, capsys, args, message):
    root = binary_set[0]
    X, y = gaussian_blobs(50, n_classes=3, n_features=2)
    write_dataset(tmp_path / "mc", X, y, "multiclass", classes=[0, 1, 2])
    args = [a.format(missing=tmp_path / "missing", mc=tmp_path / "mc") for a in args]
    if "--input" not in args:
        args += ["--input", str(root / "train")]
    with pytest.raises(SystemExit) as exit_info:
        train.run([*args, "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_online_error_figure_of_a_short_sharded_run(tmp_path, binary_set):
    """Two batches per shard: every curve has points within its batches, on the job's rows,
    and the legend stands outside the axes, clear of every line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401  (the figure draws on Agg)

    from okl_core.reporting import job_curves
    from transforms.outputs import online_error_figure

    root, *_ = binary_set
    result, _ = _run(tmp_path, "k3", "--input", str(root / "train"), *FOGD, "--num_shards", "3", "--batch_rows", "512")
    m = result.metrics
    assert {len([b for b in m["batches"] if b["shard"] == s]) for s in range(3)} == {2, 3}  # a short run: 2-3 batches a shard
    curves = job_curves(m["batches"], "binary")
    for s, (xs, ys) in curves.shards.items():
        assert len(xs) >= 16 and xs[-1] == 3000  # job-wide rows, not the shard's 1000
        assert ys[-1] == pytest.approx(m["online"]["per_shard"][s]["mistake_rate"])
    assert curves.x[-1] == 3000 and curves.merged[-1] == pytest.approx(m["online"]["merged"]["mistake_rate"])
    fig = online_error_figure(m, "binary")
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    majority = okl_core.evaluation.constant_baseline("binary", binary_set[2])["mistake_rate"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["shard 0", "shard 1", "shard 2", "all shards", f"majority class {majority:.4g}"]
    assert legend.x0 >= ax.get_window_extent().x1  # outside the axes, to the right
    *curve_lines, baseline = ax.get_lines()
    assert list(baseline.get_ydata()) == [majority, majority]  # the horizontal line of the constant answer
    for line in ax.get_lines():
        assert not line.get_window_extent(fig.canvas.get_renderer()).overlaps(legend)
    for line in curve_lines:
        assert line.get_xdata()[-1] == 3000
    assert fig.get_window_extent().contains(legend.x1 - 1, legend.y0 + 1)  # and inside the image


def test_a_test_set_whose_classes_differ_is_refused(tmp_path):
    """Stored labels are codes into dataset.json's classes: a test set prepared without --like
    that holds classes 1..3 of 0..3 once had its labels scored as other classes."""
    X, y = gaussian_blobs(60, n_classes=4, n_features=2)
    write_dataset(tmp_path / "train", X, y, "multiclass", classes=[0, 1, 2, 3])
    write_dataset(tmp_path / "test", X[:30], y[:30] % 3, "multiclass", classes=[1, 2, 3])
    with pytest.raises(SystemExit) as exit_info:
        train.run(["--input", str(tmp_path / "train"), "--test", str(tmp_path / "test"), "--learner", "mfogd", "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("streaming", [[], ["--streaming", "--stop_after", "5"]], ids=["batch", "streaming"])
def test_class_names_no_model_file_could_record_are_refused_at_launch(tmp_path, capsys, streaming):
    """Issue: a dataset.json whose class names take more than a model file's header holds (1 MiB)
    ended the job in a ValueError traceback when the first model was written (batch: building the graph;
    streaming: the start model), the streaming output left behind. Refused up front, in one line."""
    X, y = binary_data(60)
    write_dataset(tmp_path / "train", X, y, "binary", classes=["n" * 300_000, "p" * 300_000])
    with pytest.raises(SystemExit) as exit_info:
        train.run(["--input", str(tmp_path / "train"), *FOGD, "--output", str(tmp_path / "out"), *streaming])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"python -m pipelines.train: error: --input {tmp_path / 'train' / 'dataset.json'}: the 2 class names take 600008 bytes as JSON, "
        f"more than the {okl_core.state.MAX_CLASSES_BYTES} a model file records; give the classes shorter names")
    assert sorted(os.listdir(tmp_path)) == ["train"]


def test_the_model_file_records_the_training_classes_through_shards_and_rounds(tmp_path, binary_set):
    """Issue: a model file did not say which classes its codes stand for (predict could not check
    its input). The classes of the training set's dataset.json now reach the merged model of the
    last round; the arrays are those of the fold, and data without classes records none."""
    X, y = gaussian_blobs(900, seed=4, n_classes=3, n_features=2)
    write_dataset(tmp_path / "train", X, y, "multiclass", n_shards=3, classes=["cat", "dog", "eel"])
    result, model = _run(tmp_path, "out", "--input", str(tmp_path / "train"), "--learner", "mfogd", "--param", "n_components=16",
                         "--sigma", "1.5", "--num_shards", "3", "--rounds", "2", "--batch_rows", "100")
    learner, _ = okl_core.load_model(result.model_path)
    assert okl_core.model_classes(model) == ["cat", "dog", "eel"]
    assert model == reference_model(learner, X, y, StreamPlan(900, 3, 2, 100), classes=["cat", "dog", "eel"])
    target = (X[:, 0] - X[:, 1]).astype(np.float32)
    write_dataset(tmp_path / "reg", X, target, "regression")
    for name, data in (("reg", ["--input", str(tmp_path / "reg"), "--learner", "fogd_r", "--param", "n_components=8", "--sigma", "1"]),
                       ("bin", ["--input", str(binary_set[0] / "train"), *FOGD])):
        assert okl_core.model_classes(_run(tmp_path, f"out-{name}", *data)[1]) is None


@pytest.mark.parametrize("output, message", [
    ("", "--output is empty: give a directory (or leave the flag out for runs/<data>-<learner>)"),
    ("/proc/okl-out", "--output /proc/okl-out: cannot write there (No such file or directory: /proc/.okl-out.lock)"),
    ("{file}/sub", "--output {file}/sub: cannot write there (File exists: {file})"),
])
def test_an_output_that_cannot_be_written_is_one_line(tmp_path, binary_set, capsys, output, message):
    """These once ended in FileNotFoundError / PermissionError tracebacks; '' trained into runs/."""
    (tmp_path / "afile").write_text("x")
    output, message = (text.format(file=tmp_path / "afile") for text in (output, message))
    with pytest.raises(SystemExit) as exit_info:
        train.run(["--input", str(binary_set[0] / "train"), *FOGD, "--output", output])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"python -m pipelines.train: error: {message}\n"


@pytest.mark.parametrize("workers", [[], ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
                                     ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]],
                         ids=["in_process", "worker_processes", "worker_threads"])
def test_a_learner_over_its_cap_ends_the_job_with_the_cap_line(tmp_path, binary_set, workers):
    """max_support reached mid-job: Beam's traceback (156 lines; 10 with worker processes) became
    one line naming the parameter, exit status 1, and no output folder. Worker threads (and
    worker processes) once printed Beam's copy of the traceback too (sdk_worker.py prints it)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.train", "--input", str(binary_set[0] / "train"), "--learner", "kernel_ogd",
         "--param", "max_support=5", "--output", str(tmp_path / "out"), *workers],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    expected = ("python -m pipelines.train: error: kernel_ogd: the support set would exceed max_support=5; it holds one row per "
                "update: raise max_support, or use a budgeted (nogd) or random-feature (fogd) learner for long streams")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == expected
    assert "ERROR" not in proc.stderr and "Traceback" not in proc.stderr
    if "--direct_running_mode=multi_processing" not in workers:  # worker processes log their start-up (INFO) before they read the job's options
        assert proc.stderr == expected + "\n"
    assert sorted(os.listdir(tmp_path)) == []


def test_a_glob_of_a_prepared_set_trains_with_its_test_set(tmp_path):
    """Classes inferred from a glob are the codes; only dataset.json records what they stand
    for: a glob of the training files beside a test set prepared --like it was refused."""
    X, y = gaussian_blobs(60, n_classes=3, n_features=2)
    write_dataset(tmp_path / "train", X, y, "multiclass", classes=["a", "b", "c"])
    write_dataset(tmp_path / "test", X[:30], y[:30], "multiclass", classes=["a", "b", "c"])
    result = train.run(["--input", str(tmp_path / "train" / "*.parquet"), "--test", str(tmp_path / "test"), "--learner", "mfogd",
                        "--param", "n_components=16", "--sigma", "1.5", "--output", str(tmp_path / "out")])
    assert result.metrics["test"]["n"] == 30


@pytest.mark.parametrize("learner, extra", [("fogd", []), ("oks_pp", ["--sigma", "median"]), ("oks_pp", [])])
def test_defaults_and_sigma_median_are_derived_from_the_first_rows(tmp_path, binary_set, capsys, learner, extra):
    """A bandwidth left at its default is the median heuristic, said on the summary; OKS's dictionary is in its units."""
    root, X, _, _, _ = binary_set
    args = ["--param", "n_components=8"] if learner == "fogd" else ["--param", "max_support=10000"]
    result, _ = _run(tmp_path, "med", "--input", str(root / "train"), "--learner", learner, *args, *extra)
    median = okl_core.median_heuristic(X[:MEDIAN_ROWS], n_samples=MEDIAN_ROWS)
    config = result.metrics["learner"]["config"]
    if learner == "fogd":
        assert config["sigma"] == pytest.approx(median, rel=1e-12)
        assert f"sigma={median:.4g} (median)" in capsys.readouterr().out
    else:
        widths = [s for _, s in parse_kernel_dictionary(config["kernels"])]
        assert widths == pytest.approx([median * 2.0**k for k in range(-2, 4)], rel=1e-12)
        assert f"kernels=6 bandwidths {widths[0]:.4g}..{widths[-1]:.4g} (median-scaled)" in capsys.readouterr().out
