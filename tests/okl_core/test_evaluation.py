"""okl_core.evaluation against exact references: the row-by-row fold, direct counts."""

import dataclasses
import math

import numpy as np
import pytest

import okl_core
from okl_core.evaluation import (
    curve_checkpoints,
    effective_batch_rows,
    evaluate,
    mean_std,
    metric_value,
    permuted,
    run_online,
)
from okl_core.metrics import Prequential
from okl_core.random import block_bit_generator, permutation

from .learner_data import tiny_problem


def _fogd(**kw):
    return okl_core.make_learner("fogd", n_inputs=4, n_components=24, sigma=1.0, eta=0.1, **kw)


def test_run_online_equals_the_row_by_row_fold_and_direct_counts():
    X, y = tiny_problem("binary", 4, n=500)
    learner = _fogd()
    run = run_online(learner, X, y, batch_rows=64, curve_points=10)
    state = learner.init()
    for i in range(len(y)):  # the paper's protocol, literally (float32 gemv vs gemm: last bits)
        state, _ = learner.update(state, X[i : i + 1], y[i : i + 1])
    np.testing.assert_allclose(run.state.w, state.w, rtol=1e-5, atol=1e-6)
    whole, scores = learner.update(learner.init(), X, y)
    np.testing.assert_array_equal(run.state.w, whole.w)
    wrong = learner.to_labels(scores) != y
    assert run.metrics.n == 500 and run.metrics.mistakes == int(wrong.sum())
    # The curve is the exact cumulative mistake rate at each checkpoint.
    assert run.curve_n[-1] == 500
    np.testing.assert_array_equal(run.curve_value, [wrong[:n].mean() for n in run.curve_n])


def test_run_online_does_not_depend_on_batch_rows_for_per_row_learners():
    X, y = tiny_problem("multiclass", 4, n=300)
    learner = okl_core.make_learner("mfogd", n_inputs=4, n_classes=3, n_components=16, sigma=1.0, eta=0.2)
    a = run_online(learner, X, y, batch_rows=7)
    b = run_online(learner, X, y, batch_rows=300)
    np.testing.assert_array_equal(a.state.w, b.state.w)
    # Counts are equal; the scores' magnitudes are float sums whose order follows the batches.
    assert a.metrics.sum_abs_score == pytest.approx(b.metrics.sum_abs_score, rel=1e-12)
    assert dataclasses.replace(a.metrics, sum_abs_score=0.0) == dataclasses.replace(b.metrics, sum_abs_score=0.0)
    np.testing.assert_array_equal(a.curve_value, b.curve_value)


def test_regression_run_reports_mse_and_mae():
    X, y = tiny_problem("regression", 4, n=200)
    learner = okl_core.make_learner("fogd_r", n_inputs=4, n_components=16, sigma=1.0, eta=0.01, eps=0.01)
    run = run_online(learner, X, y, batch_rows=50)
    _, scores = learner.update(learner.init(), X, y)
    assert metric_value(run.metrics, "mse") == pytest.approx(np.mean((scores - y) ** 2), rel=1e-12)
    assert metric_value(run.metrics, "mae") == pytest.approx(np.mean(np.abs(scores - y)), rel=1e-12)
    assert run.curve_value[-1] == pytest.approx(run.metrics.mse, rel=1e-12)
    with pytest.raises(ValueError, match="not defined for regression"):
        metric_value(run.metrics, "error")


def test_minibatch_learner_batches_round_up_to_whole_minibatches():
    X, y = tiny_problem("binary", 4, n=96)
    learner = okl_core.make_learner("dsg", n_inputs=4, block_size=8, batch_size=16, theta=2.0)
    assert effective_batch_rows(learner, 40) == 48
    assert effective_batch_rows(_fogd(), 40) == 40
    run = run_online(learner, X, y, batch_rows=40)  # 48-row updates: six full mini-batches
    state, _ = learner.update(learner.init(), X, y)
    assert int(run.state.t) == 6
    np.testing.assert_array_equal(run.state.coef, state.coef)
    with pytest.raises(ValueError, match="batch_rows"):
        effective_batch_rows(learner, 0)


def test_evaluate_scores_predictions_of_the_state():
    X, y = tiny_problem("binary", 4, n=400)
    learner = _fogd()
    run = run_online(learner, X[:300], y[:300])
    scored = evaluate(learner, run.state, X[300:], y[300:], batch_rows=33)
    labels = learner.to_labels(learner.predict(run.state, X[300:]))
    assert scored.n == 100 and scored.mistakes == int((labels != y[300:]).sum())


def test_permutation_is_seeded_stable_and_keyed():
    p = permutation(1000, 7, 3)
    assert sorted(p.tolist()) == list(range(1000))
    np.testing.assert_array_equal(p, permutation(1000, 7, 3))
    assert not np.array_equal(p, permutation(1000, 7, 4))
    assert not np.array_equal(p, permutation(1000, 8, 3))
    # Documented definition: the stable argsort of the raw words keyed (seed, key).
    np.testing.assert_array_equal(p, np.argsort(block_bit_generator(7, 3).random_raw(1000), kind="stable"))
    assert permutation(0, 1, 1).shape == (0,)
    X, y = np.arange(10.0)[:, None], np.arange(10)
    Xp, yp = permuted(X, y, 7, 3)
    np.testing.assert_array_equal(Xp[:, 0], yp)


def test_curve_checkpoints_cover_log_and_linear_scales():
    cp = curve_checkpoints(10_000, 10)
    assert cp[0] == 1 and cp[-1] == 10_000 and np.all(np.diff(cp) > 0)
    assert {1000, 2000, 5000} <= set(cp.tolist())  # evenly spaced
    assert {3, 22, 167} <= set(cp.tolist())  # log spaced: 10000 ** (k / 9)
    assert curve_checkpoints(0, 10).size == 0 and curve_checkpoints(5, 0).size == 0


def test_mean_std_is_the_sample_std():
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)
    mean, std = mean_std([0.5])
    assert mean == 0.5 and math.isnan(std)
    assert all(math.isnan(v) for v in mean_std([]))


def test_metric_value_reads_the_accumulator():
    m = Prequential(task="binary").add(np.array([1.0, -1.0, 2.0]), np.array([1, 1, -1]))
    assert metric_value(m, "error") == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="not defined"):
        metric_value(m, "mse")


def test_evaluate_refuses_labels_update_would_refuse():
    """0/1 labels for a binary learner were scored as mistakes (142 of 237 instead of 45), a
    label 7 of 3 classes grew the class counts, 2**40 asked for 8 TiB."""
    X, y = tiny_problem("binary", 4, n=100)
    learner = okl_core.make_learner("fogd", n_inputs=4, n_components=16, sigma=1.0)
    state = run_online(learner, X, y).state
    with pytest.raises(ValueError, match=r"^fogd: binary labels must be -1 or \+1; row 0: bad label: 0 is not -1 or \+1$"):
        evaluate(learner, state, X, (y > 0).astype(int) * 0)
    with pytest.raises(ValueError, match=r"^batch_rows must be an integer >= 1, got 0$"):
        evaluate(learner, state, X, y, batch_rows=0)
    assert evaluate(learner, state, X, y).mistakes == int((learner.to_labels(learner.predict(state, X)) != y).sum())


def test_permuted_refuses_x_and_y_of_other_lengths():
    """The permutation was sized by y: X's extra rows were dropped silently."""
    with pytest.raises(ValueError, match=r"^X has 10 rows but y has 5$"):
        permuted(np.arange(20).reshape(10, 2), np.arange(5), 0, 0)


def test_the_constant_baseline_is_the_best_constant_answer_of_the_rows():
    from okl_core.evaluation import beats_baseline, constant_baseline

    y = np.array([1, -1, -1, 1, -1, -1, -1, -1])
    assert constant_baseline("binary", y) == {"mistake_rate": 0.25}
    assert constant_baseline("multiclass", np.array([0, 2, 2, 1, 2])) == {"mistake_rate": 0.4}
    t = np.array([1.0, 2.0, 3.0, 10.0])
    got = constant_baseline("regression", t)
    # brute force over constants: the mean minimises the squared error, the median the absolute
    grid = np.linspace(0, 11, 110001)
    assert got["mse"] == pytest.approx(min(np.mean((t - c) ** 2) for c in grid[::100]), rel=1e-4)
    assert got["mae"] == pytest.approx(np.mean(np.abs(t[:, None] - grid[None, :]), axis=0).min(), abs=1e-9)
    assert math.isnan(constant_baseline("binary", np.array([]))["mistake_rate"])
    assert beats_baseline(0.2, 0.25) and not beats_baseline(0.248, 0.25) and not beats_baseline(0.3, 0.25)
    assert not beats_baseline(float("nan"), 0.25) and beats_baseline(0.0, 0.0) and not beats_baseline(0.1, 0.0)
