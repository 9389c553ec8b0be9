"""``python -m pipelines.sweep`` and its neighbours on the audit's bad input: ``--resume``
of another search space, points matched by their complete config, used outputs,
outputs that cannot be written, an unreachable scheduler, a diverging sweep."""

import json
import os
import warnings

import numpy as np
import pytest

from okl_core.data.layout import write_dataset
from okl_experiments.data import okl_source
from okl_experiments.grid import SearchSpace
from okl_experiments.sweep import SweepSettings, make_points, read_results, sweep
from pipelines import report, reproduce
from pipelines import sweep as sweep_cli
from pipelines.cli import UsageError
from tests.conftest import sweep_binary_data

ERROR = "python -m pipelines.sweep: error: "


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep-outputs") / "binary"
    sweep_binary_data(path, n=300)
    return str(path)


def _run(data, out, *flags):
    return sweep_cli.run(["--input", data, "--learner", "fogd", "--scheduler", "serial", "--output", str(out), *flags])


def _refused(data, out, *flags) -> str:
    with pytest.raises(SystemExit) as done:
        _run(data, out, *flags)
    return str(done.value)


def _files(folder) -> dict:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


# -- 1. --resume of another search space ---------------------------------------------------
def test_resume_refuses_a_table_of_another_space_and_leaves_it_as_it_was(data, tmp_path):
    out = tmp_path / "s"
    _run(data, out, "--grid", "sigma=1,2", "n_components=16", "--repeats", "2")
    before = _files(out)
    message = _refused(data, out, "--grid", "eta=0.02,0.2", "n_components=16", "--repeats", "2", "--resume")
    assert message == (f"{ERROR}--resume: {out}/results.parquet holds 2 point(s) outside this search space "
                       '(point 0: {"n_components": 16, "n_inputs": 5, "sigma": 1}); it was made over '
                       '{"n_components": [16], "sigma": [1, 2]}, this sweep\'s points do not include them: resume with that '
                       "space (more values may be added), use another --output, or --overwrite")
    assert _files(out) == before


@pytest.mark.parametrize("flags, differ", [
    (["--curve_points", "8"], "curve_points"),
    (["--repeats", "3"], "repeats"),
    (["--reseed"], "reseed"),
])
def test_resume_refuses_other_settings_by_name(data, tmp_path, flags, differ):
    out = tmp_path / "s"
    _run(data, out, "--grid", "sigma=1,2", "n_components=16", "--repeats", "2")
    assert _refused(data, out, "--grid", "sigma=1,2", "n_components=16", "--repeats", "2", *flags, "--resume") == (
        f"{ERROR}--resume: {out}/results.parquet was made with other settings ({differ} differ); "
        "use another --output or the same settings")


# -- 2. points matched by their complete configuration ---------------------------------
def test_resume_matches_points_by_the_complete_config(data, tmp_path, capsys):
    out = tmp_path / "s"
    first = _run(data, out, "--grid", "eta=0.002,0.02", "n_components=16")
    # fogd's sigma defaults to the median heuristic: the same two configurations, typed otherwise
    again = _run(data, out, "--grid", "eta=0.002,0.02", "n_components=16", "sigma=median", "--resume")
    assert (again.ran, again.skipped) == (0, 2)
    assert [r["point"] for r in again.rows] == [0, 1]
    assert [r["online_mistake_rate_runs"] for r in again.rows] == [r["online_mistake_rate_runs"] for r in first.rows]
    rows, _ = read_results(str(out / "results.parquet"))
    median = json.loads(rows[0]["params"])["sigma"]
    assert isinstance(median, float) and median != 8.0
    assert [json.loads(r["params"]) for r in rows] == [
        {"eta": 0.002, "n_components": 16, "n_inputs": 5, "sigma": median}, {"eta": 0.02, "n_components": 16, "n_inputs": 5, "sigma": median}]


def test_one_configuration_twice_in_a_grid_is_refused(data, tmp_path):
    assert _refused(data, tmp_path / "s", "--grid", "sigma=2,2.0", "n_components=16") == (
        f"{ERROR}--grid 'sigma=2,2.0': value 2.0 is listed twice")
    assert not (tmp_path / "s").exists()
    # a value derived from the data can equal a listed one: the same configuration, refused too
    median = _run(data, tmp_path / "m", "--grid", "sigma=median", "n_components=16").rows[0]["params"]
    median = json.loads(median)["sigma"]
    assert _refused(data, tmp_path / "s", "--grid", f"sigma=median,{median!r}", "n_components=16") == (
        f'{ERROR}--grid: points 0 {{"sigma": "median"}} and 1 {{"sigma": {median!r}}} are the same learner configuration; '
        "list each value once")


# -- 3. used outputs, stale best.json --------------------------------------------------
def test_a_used_output_is_refused_without_resume_or_overwrite(data, tmp_path):
    out = tmp_path / "s"
    _run(data, out, "--grid", "sigma=1,2", "n_components=16")
    before = _files(out)
    assert _refused(data, out, "--grid", "sigma=4", "n_components=16") == (
        f"{ERROR}--output {out} already holds files (best.json, results.md, results.parquet); "
        "pass --resume to continue the sweep there, or --overwrite to replace it")
    assert _files(out) == before


def test_overwrite_and_resume_refuse_a_folder_that_is_not_a_sweep(tmp_path):
    path = tmp_path / "d"
    sweep_binary_data(path, n=300)
    before = _files(path)
    assert _refused(str(path), path, "--grid", "sigma=1", "n_components=16", "--overwrite") == (
        f"{ERROR}--output {path}: it holds files a sweep does not write (dataset.json, part-00000-of-00002.parquet, "
        "part-00001-of-00002.parquet); not replacing it even with --overwrite")
    assert _refused(str(path), path, "--grid", "sigma=1", "n_components=16", "--resume") == (
        f"{ERROR}--resume: --output {path} holds no results.parquet: it is not a sweep's output")
    assert _refused(str(path), tmp_path / "x", "--resume", "--overwrite") == (
        f"{ERROR}--resume continues the sweep in --output, --overwrite replaces it: pass one of them")
    assert _files(path) == before


def test_overwrite_publishes_the_new_sweep_whole_and_no_old_best_survives_it(data, tmp_path):
    out = tmp_path / "s"
    _run(data, out, "--grid", "sigma=1,2", "n_components=16")
    assert (out / "best.json").exists()
    message = _refused(data, out, "--grid", "eta=-1", "n_components=16", "--overwrite")
    assert message.startswith(f"{ERROR}no point succeeded (first error: ValueError: ")
    assert sorted(os.listdir(out)) == ["results.md", "results.parquet"]  # the old best.json went with its results
    rows, _ = read_results(str(out / "results.parquet"))
    assert [(json.loads(r["params"])["eta"], r["status"]) for r in rows] == [(-1, "error")]
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith(".")) == []  # no staging folder or lock left


def test_a_library_sweep_that_chooses_no_best_removes_the_old_one(data, tmp_path):
    train = okl_source(data)
    out = tmp_path / "s"
    good = make_points("fogd", SearchSpace.from_tokens(["sigma=1", "n_components=16"]), train)
    bad = make_points("fogd", SearchSpace.from_tokens(["eta=-1", "n_components=16"]), train)
    assert sweep(SweepSettings("fogd", train), good, out_dir=str(out)).best_path == str(out / "best.json")
    failed = sweep(SweepSettings("fogd", train), bad, out_dir=str(out))
    assert failed.best is None and not (out / "best.json").exists()


# -- 4. outputs that cannot be written, an unreachable scheduler: one line -------------------
def _a_file(tmp_path):
    path = tmp_path / "afile"
    path.write_text("x")
    return path


@pytest.mark.parametrize("output, expected", [
    ("{file}", "--output {file} is a file, not a directory"),
    ("{file}/sub", "--output {file}/sub: cannot write there (Not a directory: {file}/sub)"),
    ("/proc/x", "--output /proc/x: cannot write there (No such file or directory: /proc/x)"),
    ("", "--output is empty: give a directory"),
])
def test_outputs_that_cannot_be_written_are_refused_in_one_line_naming_the_flag(data, tmp_path, output, expected):
    file = _a_file(tmp_path)
    output, expected = output.format(file=file), expected.format(file=file)
    with pytest.raises(SystemExit) as done:
        sweep_cli.run(["--input", data, "--learner", "fogd", "--grid", "n_components=16", "--scheduler", "serial", "--output", output])
    assert str(done.value) == ERROR + expected
    with pytest.raises(UsageError) as refused:  # reproduce's usage errors: one line and exit 2 through pipelines.cli.main
        reproduce.run(["--only", "fogd-a9a", "--runs", "1", "--no_tune", "--scheduler", "serial", "--output", output])
    assert str(refused.value) == expected


@pytest.mark.parametrize("command", ["sweep", "curves", "reproduce"])
def test_report_refuses_an_output_that_is_a_file_or_empty(tmp_path, command):
    file = _a_file(tmp_path)
    for output, expected in ((str(file), f"--output {file} is a file, not a directory"), ("", "--output is empty: give a directory")):
        with pytest.raises(SystemExit) as done:
            report.run([command, str(tmp_path / "results.parquet"), "--output", output])
        assert str(done.value) == f"python -m pipelines.report: error: {expected}"
    assert os.listdir(tmp_path) == ["afile"]


def test_an_unreachable_scheduler_is_one_line_naming_the_flag(data, tmp_path):
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(SystemExit) as done:
            sweep_cli.run(["--input", data, "--learner", "fogd", "--grid", "n_components=16",
                           "--scheduler", "tcp://127.0.0.1:1", "--output", str(tmp_path / "s")])
    assert str(done.value).startswith(f"{ERROR}--scheduler tcp://127.0.0.1:1: cannot connect to a Dask scheduler there (")
    assert "\n" not in str(done.value)


# -- 9. a diverging sweep prints no numpy warning ------------------------------------------
def test_a_diverging_sweep_warns_nothing(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    write_dataset(tmp_path / "reg", X, np.sin(X[:, 0]) + 0.5 * X[:, 1], "regression", n_shards=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the run, not be printed
        with pytest.raises(SystemExit) as done:
            sweep_cli.run(["--input", str(tmp_path / "reg"), "--learner", "fogd_r", "--grid", "eta=10", "n_components=16",
                           "--scheduler", "serial", "--output", str(tmp_path / "s")])
    assert str(done.value) == (f"{ERROR}no point succeeded (first error: run 0 diverged at row 0 "
                               "(NaN or inf in the scores, model or errors)); no best config written")
    rows, _ = read_results(str(tmp_path / "s" / "results.parquet"))
    assert [r["status"] for r in rows] == ["diverged"]


# -- 5. report metrics: one table of names, unknown ones refused; --top ----------------------
@pytest.fixture(scope="module")
def grid_table(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("grid") / "s"
    _run(data, out, "--grid", "sigma=1,2", "eta=0.1,0.2", "n_components=16")
    return str(out / "results.parquet")


@pytest.mark.parametrize("metric", ["bogus", "online_mse"])
def test_report_curves_refuses_a_metric_the_table_does_not_hold(grid_table, tmp_path, metric):
    with pytest.raises(SystemExit) as done:
        report.run(["curves", grid_table, "--metric", metric, "--output", str(tmp_path / "f")])
    assert str(done.value) == (f"python -m pipelines.report: error: --metric {metric!r} is not in {grid_table} "
                               "(it has ['online_mistake_rate'])")
    assert not (tmp_path / "f" / "online_error.png").exists()


@pytest.mark.parametrize("top", ["0", "-1"])
def test_report_curves_refuses_top_below_one(grid_table, tmp_path, top):
    with pytest.raises(SystemExit) as done:
        report.run(["curves", grid_table, "--top", top, "--output", str(tmp_path / "f")])
    assert str(done.value) == f"python -m pipelines.report: error: --top must be >= 1, got {top}"


def test_report_takes_the_old_metric_names_sweep_takes(grid_table, tmp_path):
    written = report.run(["sweep", grid_table, "--metric", "online_error", "--output", str(tmp_path / "f")])
    assert [os.path.basename(p) for p in written] == ["sweep_sigma.png", "sweep_eta.png", "sweep_heatmap_sigma_eta.png"]
    assert report.run(["curves", grid_table, "--metric", "online_error", "--output", str(tmp_path / "c")]) == [
        str(tmp_path / "c" / "online_error.png")]


# -- 7. heatmaps: validated before any figure, values normalised -----------------------------
@pytest.mark.parametrize("pair, message", [
    ("sigma,bogus", "--heatmap: 'bogus' is not a parameter of this sweep"),
    ("sigma,sigma", "--heatmap needs two different parameters A,B, got 'sigma,sigma'"),
])
def test_report_sweep_refuses_a_bad_heatmap_before_writing_any_figure(grid_table, tmp_path, pair, message):
    """No figure, and no --output folder: the refused command takes back the folders it made (it once left them empty)."""
    with pytest.raises(SystemExit) as done:
        report.run(["sweep", grid_table, "--heatmap", pair, "--output", str(tmp_path / "f" / "g")])
    assert str(done.value) == f"python -m pipelines.report: error: {message}"
    assert os.listdir(tmp_path) == []
    (tmp_path / "f").mkdir()  # a folder that was there before stays
    with pytest.raises(SystemExit):
        report.run(["sweep", grid_table, "--heatmap", pair, "--output", str(tmp_path / "f")])
    assert os.listdir(tmp_path) == ["f"] and os.listdir(tmp_path / "f") == []


def test_a_refused_reproduce_and_a_sweep_without_a_scheduler_leave_no_output_folder(data, tmp_path):
    """Issue: reproduce made --output, then refused an unknown --only key and left the folder; a sweep
    made it, then could not reach its scheduler. Both now take back the folders they made."""
    with pytest.raises(UsageError, match="unknown setting"):
        reproduce.run(["--only", "nope", "--scheduler", "serial", "--output", str(tmp_path / "r" / "out")])
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(SystemExit, match="cannot connect to a Dask scheduler"):
            sweep_cli.run(["--input", data, "--learner", "fogd", "--grid", "n_components=16",
                           "--scheduler", "tcp://127.0.0.1:1", "--output", str(tmp_path / "s" / "out")])
    assert os.listdir(tmp_path) == []


def test_heatmap_takes_2_and_2_0_as_one_value(data, tmp_path):
    from okl_experiments.figures import plot_sweep
    from okl_experiments.sweep import Point

    train = okl_source(data)
    base = {"n_inputs": 5, "n_components": 16}
    points = [Point(i, {"sigma": s, "eta": e}, {**base, "sigma": s, "eta": e})
              for i, (s, e) in enumerate([(2, 0.1), (2.0, 0.2), (4, 0.1), (4, 0.2)])]
    sweep(SweepSettings("fogd", train), points, out_dir=str(tmp_path / "s"), swept=["sigma", "eta"])
    written = plot_sweep(str(tmp_path / "s" / "results.parquet"), str(tmp_path / "f"), heatmap=("sigma", "eta"))
    assert [os.path.basename(p) for p in written] == ["sweep_sigma.png", "sweep_eta.png", "sweep_heatmap_sigma_eta.png"]


# -- 8. grid syntax and counts ----------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (["--grid", "sigma=2,,4"], "--grid 'sigma=2,,4': empty value in the list (separate values by single commas)"),
    (["--grid", "sigma=2,2"], "--grid 'sigma=2,2': value 2 is listed twice"),
    (["--grid", "sigma=2", "--samples", "0"], "--samples must be >= 1, got 0"),
    (["--grid", "sigma=2", "--curve_points", "0"], "--curve_points must be >= 1, got 0"),
    (["--grid", "sigma=2", "--curve_points", "-5"], "--curve_points must be >= 1, got -5"),
    (["--grid", "sigma=2", "--shuffle_seed", "-1"], "--shuffle_seed must be an integer >= 0, got -1"),
    (["--grid", "sigma=2", "--search_seed", "-1"], "--search_seed must be an integer >= 0, got -1"),
    (["--grid", "n_components=1.5:1.9", "--samples", "2"],
     "--grid n_components: an integer range must hold an integer, got [1.5, 1.9] (n_components is an integer parameter)"),
])
def test_bad_grid_and_counts_are_refused_before_any_run(data, tmp_path, flags, message):
    assert _refused(data, tmp_path / "s", *flags) == ERROR + message
    assert not (tmp_path / "s").exists()


def test_a_whole_float_is_taken_for_an_integer_parameter(data, tmp_path):
    result = _run(data, tmp_path / "s", "--grid", "n_components=1.6e1", "sigma=2")
    assert [r["status"] for r in result.rows] == ["ok"] and result.best["params"]["n_components"] == 16


@pytest.mark.parametrize("content, message", [
    ({"sigma": []}, "'sigma': a list of values must not be empty"),
    ({"sigma": {"low": 1, "high": 4, "log": "no"}}, "'sigma': 'log' must be true or false, got \"no\""),
    ({"sigma": {"low": 1, "high": 4, "int": 1}}, "'sigma': 'int' must be true or false, got 1"),
    ({"n_components": {"low": 1.5, "high": 1.9, "int": True}}, "'n_components': an integer range must hold an integer, got [1.5, 1.9]"),
    ({"sigma": [2, 2.0]}, "'sigma': value 2.0 is listed twice"),
])
def test_grid_file_errors_name_the_file_and_parameter(data, tmp_path, content, message):
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(content))
    assert _refused(data, tmp_path / "s", "--grid_file", str(path), "--samples", "2") == f"{ERROR}{path}: {message}"
