"""Learner parameters from a data set: the mini-language, n_inputs/n_classes, batch rounding, config files."""

import json
import logging

import numpy as np
import pytest

import okl_core
from okl_core.reporting import headline, job_curves
from okl_experiments.params import (
    DataFacts, batch_rows_for, build_learner, check_fit, learner_config, learner_params, minibatch_rows, read_learner_config, resolve_values,
)


def _facts(n=300, d=4, task="binary", n_classes=None):
    X = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
    calls = []

    def rows():
        calls.append(1)
        return X

    return DataFacts(d, task, n_classes, n, rows=rows, name="toy"), X, calls


def test_the_mini_language():
    facts, X, calls = _facts()
    median = okl_core.median_heuristic(X, n_samples=1000)
    out = resolve_values({"sigma": "median", "eta": 0.1, "loss": "hinge", "horizon": "n", "nu": "0.01/n", "c": "1/n"}, facts)
    assert out == {"sigma": median, "eta": 0.1, "loss": "hinge", "horizon": 300, "nu": 0.01 / 300, "c": 1 / 300}
    assert resolve_values({"sigma": "0.2*median"}, facts) == {"sigma": 0.2 * median}
    assert len(calls) == 1  # the rows are read once, and only when a value needs them
    l1 = resolve_values({"sigma": "median", "kernel": "laplacian"}, facts)["sigma"]
    assert l1 == okl_core.median_heuristic(X, n_samples=1000, metric="l1")
    for bad in ("median/2", "-1*median", "x*median", "c/n", "0/n"):
        with pytest.raises(ValueError, match="expected a number"):
            resolve_values({"sigma": bad}, facts)


def test_learner_params_add_what_the_data_determines():
    facts, X, calls = _facts(task="multiclass", n_classes=3)
    assert learner_params("mfogd", {"eta": 0.1, "sigma": 2.0}, facts) == {"eta": 0.1, "sigma": 2.0, "n_inputs": 4, "n_classes": 3}
    assert calls == []
    # sigma left out: its data default, the median heuristic on the rows
    median = okl_core.median_heuristic(X, n_samples=1000)
    assert learner_params("mfogd", {"eta": 0.1}, facts) == {"eta": 0.1, "sigma": median, "n_inputs": 4, "n_classes": 3}
    assert calls == [1]
    with pytest.raises(ValueError, match="n_inputs=5 contradicts toy"):
        learner_params("mfogd", {"n_inputs": 5}, facts)
    with pytest.raises(ValueError, match="learner fogd is set up for binary data but toy holds multiclass data"):
        build_learner("fogd", {}, facts)


@pytest.mark.parametrize("name", ["oks", "ioks", "rf_ioks"])
def test_the_horizon_is_the_row_count_unless_given(name):
    facts, _, calls = _facts(n=300)
    assert learner_params(name, {}, facts)["horizon"] == 300
    assert learner_params(name, {"horizon": 50}, facts)["horizon"] == 50
    assert build_learner(name, {"kernels": "gaussian:1"}, facts).config.horizon == 300
    assert len(calls) == 1  # the rows, read once for the default dictionary's median
    assert "horizon" not in learner_params("oks_pp", {}, facts)  # no horizon field: nothing added


@pytest.mark.parametrize("name, values, message", [
    ("fogd", {"sigmaa": 1.0}, r"fogd: unknown parameter\(s\) \['sigmaa'\]; valid: "),
    ("fogd_r", {}, "learner fogd_r is set up for regression data but toy holds binary data"),
])
def test_check_fit_refuses_before_building(name, values, message):
    facts, _, calls = _facts()
    with pytest.raises(ValueError, match=message):
        check_fit(name, values, facts)
    with pytest.raises(ValueError, match=message):
        build_learner(name, values, facts)
    assert calls == []


def test_batch_rows_are_rounded_in_one_place_with_a_warning(caplog):
    dsg = okl_core.make_learner("dsg", n_inputs=3, batch_size=48)
    fogd = okl_core.make_learner("fogd", n_inputs=3)
    assert minibatch_rows(dsg) == 48 and minibatch_rows(fogd) == 1
    with caplog.at_level(logging.WARNING, logger="okl_experiments.params"):
        assert batch_rows_for(dsg) == 4128 and caplog.records == []  # the default is rounded silently
        assert batch_rows_for(dsg, 96) == 96 and caplog.records == []
        assert batch_rows_for(dsg, 100) == 144
        assert batch_rows_for(fogd, 100) == 100
    assert [r.getMessage() for r in caplog.records] == ["batch_rows 100 is not a multiple of dsg's batch_size 48: rounded up to 144"]


def test_config_files_round_trip(tmp_path):
    learner = okl_core.make_learner("fogd", n_inputs=3, sigma=2.0)
    path = tmp_path / "best.json"
    path.write_text(json.dumps(learner_config(learner)))
    name, params = read_learner_config(str(path))
    assert okl_core.make_learner(name, **params).config == learner.config
    path.write_text("[1]")
    with pytest.raises(ValueError, match="expected"):
        read_learner_config(str(path))


def test_headline_names_the_batch_sums_of_the_curves():
    assert (headline("binary").summary_key, headline("regression").batch_sum) == ("mistake_rate", "sum_squared_error")
    batches = [{"shard": s, "round": 0, "seq": q, "rows": 100, "mistakes": m} for s, q, m in [(0, 0, 30), (1, 0, 40), (0, 1, 10), (1, 1, 20)]]
    with pytest.raises(ValueError, match="sum_squared_error"):
        job_curves(batches, "regression")
