"""Divergence in memory (issue 17, class 1): run_online finishes and says where; merges of
diverged states never raise; every registered learner, pushed to overflow, finishes."""

import dataclasses
import warnings

import numpy as np
import pytest

import okl_core
from okl_core import testing
from okl_core.divergence import diverged, non_finite_fields
from okl_core.evaluation import run_online

from .learner_data import tiny_problem


def _regression(n=1024, scale=1.0):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, (np.sin(X[:, 0]) + 0.5 * X[:, 1]) * scale


@pytest.fixture(autouse=True)
def _quiet_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def test_a_step_too_large_diverges_at_the_first_batch_and_the_run_finishes():
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0, eta=10.0)
    X, y = _regression()
    run = run_online(learner, X, y, batch_rows=256)
    assert run.diverged and run.diverged_at == 0 and run.metrics.n == 1024
    assert non_finite_fields(run.state) == ["w"] and np.isnan(run.metrics.mse)


def test_large_finite_targets_do_not_count_as_divergence():
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0, eta=1e-4)
    X, y = _regression(scale=1e9)
    run = run_online(learner, X, y, batch_rows=256)
    assert run.diverged_at is None and 1e15 < run.metrics.mse < 1e19


def test_errors_that_overflow_are_divergence_even_with_finite_scores():
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0, eta=1e-4)
    X, y = _regression(scale=1e200)  # squared errors of 1e400 overflow to inf
    run = run_online(learner, X, y, batch_rows=256)
    assert run.diverged_at == 0 and run.metrics.mse == np.inf


def test_divergence_later_in_the_stream_names_its_batch():
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0, eta=1e-2)
    X, y = _regression()
    y[600:] *= 1e200  # from row 600, in batch 2 (rows 512..767), squared errors overflow
    run = run_online(learner, X, y, batch_rows=256)
    assert run.diverged_at == 512


@pytest.mark.parametrize("scores, state_w, expected", [
    ([1.0, 2.0], [0.0], False), ([np.nan, 2.0], [0.0], True), ([1.0, np.inf], [0.0], True), ([1.0], [-np.inf], True),
])
def test_diverged_checks_scores_and_state(scores, state_w, expected):
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0)
    state = learner.init()._replace(w=np.resize(np.asarray(state_w, dtype=np.float64), 32))
    assert diverged(state, np.asarray(scores)) is expected


def _extreme(name):
    """The learner with its step size a million times too large (if it has one) and data of its task."""
    base = testing.conformance_learner(name)
    config = dataclasses.asdict(base.config)
    if "eta" in config:
        config["eta"] = 1e12
    learner = okl_core.make_learner(name, **config)
    X, y = tiny_problem(learner.task, learner.config.n_inputs, n=200)
    X = np.asarray(X) * 1e3
    if learner.task == "regression":
        y = np.asarray(y, dtype=np.float64) * 1e150
    return learner, X, y


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_every_learner_pushed_to_overflow_finishes_its_run(name):
    learner, X, y = _extreme(name)
    run = run_online(learner, X, y, batch_rows=50)
    assert run.metrics.n == 200
    # diverged_at is set exactly when something is not finite at the end of the run
    finite_end = not non_finite_fields(run.state) and np.isfinite([run.metrics.sum_squared_error, run.metrics.sum_absolute_error]).all()
    assert run.diverged or finite_end


@pytest.mark.parametrize("name", [n for n in okl_core.learner_names() if okl_core.learner_class(n).merge_semantics != "none"])
def test_merging_a_diverged_state_never_raises(name):
    learner = testing.conformance_learner(name)
    X, y = tiny_problem(learner.task, learner.config.n_inputs, n=40)
    base = learner.init()
    good, _ = learner.update(base, X[:20], y[:20])
    other, _ = learner.update(base, X[20:], y[20:])
    nan = other._replace(**{k: np.full_like(v, np.nan) for k, v in other._asdict().items()
                            if np.asarray(v).dtype.kind == "f" and np.asarray(v).size})
    try:
        merged = okl_core.merge_states(learner, [good, nan], base=base)
    except okl_core.NotMergeableError:
        pytest.skip(f"{name} does not merge")
    assert non_finite_fields(merged)
    data = okl_core.model_bytes(learner, merged)
    with pytest.raises(okl_core.ModelFileError, match="holds NaN or inf values"):
        okl_core.model_from_bytes(data, source="merged")
    okl_core.model_from_bytes(data, source="merged", allow_non_finite=True)
