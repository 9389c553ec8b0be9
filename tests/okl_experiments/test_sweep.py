"""Sweeps on a real dask.distributed LocalCluster (2 worker processes, 1 thread each).

The reference for every number is a serial run written out in the test: the learner made
from the point's parameters, folded with okl_core.evaluation over run r's permutation.
"""

import json
import logging
import os
import pickle
from collections import Counter

import pytest

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.evaluation import evaluate, mean_std, metric_value, permuted, run_online
from okl_experiments import runs
from okl_experiments.data import okl_source
from okl_experiments.grid import SearchSpace
from okl_experiments.sweep import SweepSettings, make_points, read_results, sweep
from tests.conftest import sweep_binary_data

_TRIM_PRESET = "MALLOC_TRIM_THRESHOLD_" in os.environ


def test_local_cluster_is_two_single_threaded_processes(client):
    assert sorted(client.nthreads().values()) == [1, 1]
    pids = client.run(os.getpid)
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert set(client.run(os.getenv, "OMP_NUM_THREADS").values()) == {"1"}
    # The workers' own logs stay off the terminal (shutdown races logged ERROR tracebacks there).
    levels = client.run(lambda: [logging.getLogger(n).getEffectiveLevel() for n in ("distributed.worker", "distributed.core", "distributed.utils_comm")])
    assert all(level == logging.CRITICAL for worker in levels.values() for level in worker), levels
    if not _TRIM_PRESET:  # Dask's default 65536 is dropped (see runs.dask_client)
        assert set(client.run(os.getenv, "MALLOC_TRIM_THRESHOLD_").values()) == {None}


def _serial(params, X, y, runs, shuffle_seed=0, Xt=None, yt=None):
    """Per-run metric values of a point, computed directly with okl_core."""
    online, test = [], []
    for r in range(runs):
        learner = okl_core.make_learner("fogd", **params)
        Xp, yp = permuted(X, y, shuffle_seed, r)
        result = run_online(learner, Xp, yp, batch_rows=4096)
        online.append(metric_value(result.metrics, "error"))
        if Xt is not None:
            test.append(metric_value(evaluate(learner, result.state, Xt, yt), "error"))
    return online, test


def _points(source, tokens):
    return make_points("fogd", SearchSpace.from_tokens(tokens), source)


def test_sweep_numbers_equal_a_serial_run_and_data_is_loaded_once_per_worker(client, tmp_path):
    X, y = sweep_binary_data(tmp_path / "train")
    Xt, yt = sweep_binary_data(tmp_path / "test", n=400, seed=1)
    train, test = okl_source(str(tmp_path / "train")), okl_source(str(tmp_path / "test"))
    settings = SweepSettings("fogd", train, test, repeats=3)
    points = _points(train, ["sigma=0.5,1,2", "eta=0.05,0.2", "n_components=32"])
    result = sweep(settings, points, out_dir=str(tmp_path / "out"), client=client, rank_by="test_mistake_rate")
    assert result.ran == 6 and result.skipped == 0 and result.rank_by == "test_mistake_rate"
    for row, point in zip(result.rows, points):
        online, test_values = _serial(point.params, X, y, 3, Xt=Xt, yt=yt)
        assert row["status"] == "ok" and row["runs"] == 3
        assert row["online_mistake_rate_runs"] == online and row["test_mistake_rate_runs"] == test_values
        assert (row["online_mistake_rate_mean"], row["online_mistake_rate_std"]) == mean_std(online)
        assert (row["test_mistake_rate_mean"], row["test_mistake_rate_std"]) == mean_std(test_values)
    # The 18 tasks ran on both workers; each worker loaded the train and test sets once.
    workers = Counter(r["worker"] for r in result.task_results)
    loads = Counter(r["worker"] for r in result.task_results if r["loaded"])
    assert len(workers) == 2 and sum(workers.values()) == 18
    assert set(loads) <= set(workers) and all(v <= 2 for v in loads.values())
    # What travels per task is the source description, not the rows.
    task = settings.tasks(points[0])[0]
    assert len(pickle.dumps(task)) < 2000 < X.nbytes
    # Table on disk = rows in memory; the best point is the lowest test error.
    rows, meta = read_results(result.results_path)
    assert [r["test_mistake_rate_mean"] for r in rows] == [r["test_mistake_rate_mean"] for r in result.rows]
    assert meta["settings"]["repeats"] == 3 and meta["metrics"] == ["online_mistake_rate", "test_mistake_rate"] and meta["rank_by"] == "test_mistake_rate"
    best_row = min(result.rows, key=lambda r: (r["test_mistake_rate_mean"], r["point"]))
    assert result.best["params"]["sigma"] == json.loads(best_row["params"])["sigma"]


def test_best_config_is_valid_for_make_learner_and_reproduces_the_point(client, tmp_path):
    X, y = sweep_binary_data(tmp_path / "train")
    train = okl_source(str(tmp_path / "train"))
    result = sweep(SweepSettings("fogd", train, repeats=2), _points(train, ["sigma=1,2", "eta=0.1", "n_components=32"]),
                   out_dir=str(tmp_path / "out"), client=client)
    with open(result.best_path) as f:
        best = json.load(f)
    assert set(best) == {"learner", "params", "rank_by"} and best["learner"] == "fogd"
    best_row = min(result.rows, key=lambda r: (r["online_mistake_rate_mean"], r["point"]))
    assert best["rank_by"] == {"metric": "online_mistake_rate", "mean": best_row["online_mistake_rate_mean"], "std": best_row["online_mistake_rate_std"]}
    learner = okl_core.make_learner(best["learner"], **best["params"])
    assert best["params"] == {"n_inputs": 5, "n_components": 32, "kernel": "gaussian", "sigma": best["params"]["sigma"],
                              "seed": 0, "block_size": 256, "scaled": False, "eta": 0.1, "step": "constant"}
    online, _ = _serial(best["params"], X, y, 2)
    assert min(r["online_mistake_rate_mean"] for r in result.rows) == mean_std(online)[0]
    assert learner.task == "binary"


def test_resume_skips_finished_points_and_checks_settings(client, tmp_path):
    sweep_binary_data(tmp_path / "train")
    train = okl_source(str(tmp_path / "train"))
    out = str(tmp_path / "out")
    first = sweep(SweepSettings("fogd", train, repeats=2), _points(train, ["sigma=1,2", "eta=0.1", "n_components=16"]),
                  out_dir=out, client=client)
    assert first.ran == 2
    bigger = _points(train, ["sigma=1,2,4", "eta=0.1", "n_components=16"])
    second = sweep(SweepSettings("fogd", train, repeats=2), bigger, out_dir=out, client=client, resume=True)
    assert (second.ran, second.skipped) == (1, 2)
    assert {r["point"] for r in second.task_results} == {2}  # only sigma=4 ran
    assert len(second.rows) == 3 and [r["params"] for r in second.rows[:2]] == [r["params"] for r in first.rows]
    third = sweep(SweepSettings("fogd", train, repeats=2), bigger, out_dir=out, client=client, resume=True)
    assert (third.ran, third.task_results) == (0, [])
    with pytest.raises(ValueError, match="repeats"):
        sweep(SweepSettings("fogd", train, repeats=3), bigger, out_dir=out, client=client, resume=True)
    # A rewritten data set is another source: its old results are not reused.
    X, y = sweep_binary_data(tmp_path / "other", seed=3)
    write_dataset(tmp_path / "train", X, y, "binary", overwrite=True, classes=[-1, 1])
    rewritten = okl_source(str(tmp_path / "train"))
    assert rewritten != train
    with pytest.raises(ValueError, match="train"):
        sweep(SweepSettings("fogd", rewritten, repeats=2), bigger, out_dir=out, client=client, resume=True)


def test_a_failing_point_is_recorded_and_the_rest_complete(client, tmp_path):
    X, y = sweep_binary_data(tmp_path / "train")
    train = okl_source(str(tmp_path / "train"))
    points = _points(train, ["sigma=1", "eta=0.1,-1,0.2", "n_components=16"])
    result = sweep(SweepSettings("fogd", train, repeats=2), points, out_dir=str(tmp_path / "out"), client=client)
    status = {json.loads(r["params"])["eta"]: r for r in result.rows}
    assert status[-1]["status"] == "error" and "eta must be a finite number > 0" in status[-1]["error"]
    assert status[0.1]["status"] == status[0.2]["status"] == "ok"
    assert status[0.2]["online_mistake_rate_runs"] == _serial(points[2].params, X, y, 2)[0]
    assert result.best["params"]["eta"] in (0.1, 0.2)
    # Resume retries the failed point only.
    again = sweep(SweepSettings("fogd", train, repeats=2), points, out_dir=str(tmp_path / "out"), client=client, resume=True)
    assert again.ran == 1 and {r["point"] for r in again.task_results} == {1}


def test_a_future_that_errs_is_an_error_result(client, tmp_path):
    """An exception outside run_task's own guard (as from a killed worker) becomes an error result."""
    sweep_binary_data(tmp_path / "train")
    task = runs.RunTask(4, 1, "fogd", (("n_inputs", 5),), okl_source(str(tmp_path / "train")))
    for where in (client, None):
        [result] = list(runs.execute([task], where, func=len))  # len(task) raises TypeError
        assert (result["point"], result["run"], result["ok"]) == (4, 1, False)
        assert result["error"].startswith("TypeError")


def test_serial_scheduler_gives_the_same_table_as_the_cluster(client, tmp_path):
    sweep_binary_data(tmp_path / "train")
    train = okl_source(str(tmp_path / "train"))
    points = _points(train, ["sigma=1,2", "eta=0.1", "n_components=16"])
    on_cluster = sweep(SweepSettings("fogd", train, repeats=2), points, client=client)
    here = sweep(SweepSettings("fogd", train, repeats=2), points, client=None)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(on_cluster.rows) == strip(here.rows)


def test_a_diverging_point_is_marked_diverged_never_ok(tmp_path):
    """eta=10 makes fogd_r's weights NaN from the first batch: the point reads 'diverged', is never best."""
    import numpy as np

    from okl_experiments.sweep import markdown_table

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    write_dataset(tmp_path / "train", X, np.sin(X[:, 0]) + 0.5 * X[:, 1], "regression", n_shards=1)
    train = okl_source(str(tmp_path / "train"))
    points = make_points("fogd_r", SearchSpace.from_tokens(["sigma=1", "eta=0.05,10", "n_components=16"]), train)
    settings = SweepSettings("fogd_r", train, repeats=2, batch_rows=200)
    with np.errstate(all="ignore"):
        result = sweep(settings, points, out_dir=str(tmp_path / "out"), client=None)
    status = {json.loads(r["params"])["eta"]: r for r in result.rows}
    assert status[0.05]["status"] == "ok" and status[0.05]["error"] is None
    assert status[10]["status"] == "diverged" and status[10]["runs"] == 2
    assert status[10]["error"] == "run 0 diverged at row 0 (NaN or inf in the scores, model or errors)"
    assert np.isnan(status[10]["online_mse_mean"])
    assert [r["diverged"] for r in result.task_results if r["point"] == 1] == [status[10]["error"][6:]] * 2
    assert result.best["params"]["eta"] == 0.05
    table = markdown_table(result.rows, "online_mse", ["eta"]).splitlines()
    assert table[2].startswith("| 1 | 0 | 0.05 |") and table[3].endswith("| diverged: run 0 diverged at row 0 (NaN or inf in the scores, model or errors) |")
    # A diverged point is a result: --resume keeps it, as it keeps ok points.
    with np.errstate(all="ignore"):
        again = sweep(settings, points, out_dir=str(tmp_path / "out"), client=None, resume=True)
    assert again.ran == 0 and [r["status"] for r in again.rows] == ["ok", "diverged"]


def test_with_a_test_set_the_default_ranking_is_still_the_online_metric(tmp_path):
    sweep_binary_data(tmp_path / "train")
    sweep_binary_data(tmp_path / "test", n=300, seed=1)
    train, test = okl_source(str(tmp_path / "train")), okl_source(str(tmp_path / "test"))
    points = _points(train, ["sigma=0.5,4", "eta=0.2", "n_components=16"])
    result = sweep(SweepSettings("fogd", train, test), points, out_dir=str(tmp_path / "out"))
    assert result.rank_by == "online_mistake_rate" and result.best["rank_by"]["metric"] == "online_mistake_rate"
    best_row = min(result.rows, key=lambda r: (r["online_mistake_rate_mean"], r["point"]))
    assert result.best["params"]["sigma"] == json.loads(best_row["params"])["sigma"]
    assert read_results(result.results_path)[1]["rank_by"] == "online_mistake_rate"


def test_old_metric_names_are_understood():
    """okl 0.1 named the mistake rate ``error``: ``--rank_by online_error`` and its results tables still work."""
    from okl_core.evaluation import canonical_metric
    from okl_core.reporting import metric_of
    from okl_experiments.metrics import experiment_metric
    from okl_experiments.sweep import _current_names

    assert canonical_metric("error") == "mistake_rate" and canonical_metric("mse") == "mse"
    assert experiment_metric("online_error") == "online_mistake_rate" and experiment_metric("test_error") == "test_mistake_rate"
    assert experiment_metric("online_mse") == "online_mse" and metric_of("online_error") == "mistake_rate"
    rows, meta = _current_names([{"point": 0, "online_error_mean": 0.2, "online_error_std": 0.01, "online_error_runs": [0.2],
                                  "test_error_mean": 0.3, "status": "ok"}],
                                {"metrics": ["online_error", "test_error"], "rank_by": "online_error"})
    assert rows == [{"point": 0, "online_mistake_rate_mean": 0.2, "online_mistake_rate_std": 0.01, "online_mistake_rate_runs": [0.2],
                     "test_mistake_rate_mean": 0.3, "status": "ok"}]
    assert meta == {"metrics": ["online_mistake_rate", "test_mistake_rate"], "rank_by": "online_mistake_rate"}


def test_json_files_stay_strict_with_non_finite_numbers(tmp_path):
    import math

    from okl_core.jsonio import loads_json, strict_json
    from okl_experiments.text import read_json, write_json

    value = {"mse": math.nan, "curve": [1.0, math.inf, -math.inf], "name": "run", "n": 3}
    text = strict_json(value, sort_keys=True)
    assert text == '{"curve": [1.0, "Infinity", "-Infinity"], "mse": "NaN", "n": 3, "name": "run"}'
    back = loads_json(text)
    assert math.isnan(back["mse"]) and back["curve"] == [1.0, math.inf, -math.inf] and back["name"] == "run"
    path = write_json(str(tmp_path / "v.json"), value)
    assert math.isnan(read_json(path)["mse"])


def test_a_test_set_whose_classes_differ_is_refused_as_train_refuses_it(tmp_path):
    """A sweep once scored a test set prepared without --like (classes b, c, d against a, b, c) silently."""
    import numpy as np

    from okl_experiments.data import okl_sources

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), np.arange(30) % 3
    write_dataset(tmp_path / "train", X, y, "multiclass", classes=["a", "b", "c"])
    write_dataset(tmp_path / "test", X, y, "multiclass", classes=["b", "c", "d"])
    with pytest.raises(ValueError, match=r"^--test .*/test has the classes \['b', 'c', 'd'\], the training data \['a', 'b', 'c'\]: its labels"):
        okl_sources(str(tmp_path / "train"), str(tmp_path / "test"))
    write_dataset(tmp_path / "test_like", X, y, "multiclass", classes=["a", "b", "c"])
    assert okl_sources(str(tmp_path / "train"), str(tmp_path / "test_like"))[1].n_classes == 3


def test_points_carry_the_baseline_of_their_rows_and_a_flat_kernel_is_flagged(tmp_path):
    """sigma = 1e6 makes the Gaussian kernel constant over the rows: a model no better than always
    answering the majority class, which the table flags; the point that learns is not flagged,
    and a huge step is 'diverged' though every number stays finite (the scores exploded)."""
    import numpy as np

    from okl_core.evaluation import constant_baseline
    from okl_experiments.sweep import baseline_flag, markdown_table

    def imbalanced(path, n, seed):  # about 30% of the rows +1
        X = np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32)
        y = np.where(X[:, 0] > 0.5, 1, -1)
        write_dataset(path, X, y, "binary", n_shards=1, classes=[-1, 1])
        return y

    y, yt = imbalanced(tmp_path / "train", 2000, 0), imbalanced(tmp_path / "test", 600, 1)
    train, test = okl_source(str(tmp_path / "train")), okl_source(str(tmp_path / "test"))
    points = make_points("fogd", SearchSpace.from_tokens(["sigma=1,1e6", "eta=0.1,1e12", "n_components=16"]), train)
    result = sweep(SweepSettings("fogd", train, test, repeats=2), points, out_dir=str(tmp_path / "out"), client=None)
    rows = {(json.loads(r["params"])["sigma"], json.loads(r["params"])["eta"]): r for r in result.rows}
    learned, flat, huge = rows[(1.0, 0.1)], rows[(1e6, 0.1)], rows[(1.0, 1e12)]
    for r in (learned, flat):
        assert r["online_mistake_rate_baseline"] == constant_baseline("binary", y)["mistake_rate"]
        assert r["test_mistake_rate_baseline"] == constant_baseline("binary", yt)["mistake_rate"]
    assert baseline_flag(learned, "online_mistake_rate") is None
    flag = "no better than the majority class; one class for every row"  # on the test rows
    assert flat["status"] == "ok" and flat["one_class"] is True and baseline_flag(flat, "online_mistake_rate") == flag
    assert flat["online_mistake_rate_mean"] > 0.99 * flat["online_mistake_rate_baseline"]
    assert huge["status"] == "diverged" and huge["error"].startswith("run 0 diverged at row 0 (the loss exploded; over the run: mean score magnitude")
    assert np.isfinite(huge["online_mistake_rate_mean"])  # finite, and still divergence
    table = markdown_table(result.rows, "online_mistake_rate", ["sigma", "eta"]).splitlines()
    assert "majority class (baseline)" in table[0]
    flat_line = next(line for line in table[2:] if line.split("|")[2].strip() == str(flat["point"]))
    assert flat_line.endswith(f"| ok: {flag} |")
    assert f"| {constant_baseline('binary', y)['mistake_rate']:.4f} |" in flat_line
    # The flag survives the results file.
    stored = {r["point"]: r for r in read_results(str(tmp_path / "out" / "results.parquet"))[0]}
    assert baseline_flag(stored[flat["point"]], "online_mistake_rate") == flag
