"""Merging by seed and prequential metrics that merge across shards."""

import math
import warnings

import numpy as np
import pytest

import okl_core
from okl_core.evaluation import beats_baseline, constant_baseline
from okl_core.merge import check_mergeable
from okl_core.metrics import Prequential

from .learner_data import tiny_problem


def test_merge_is_the_n_seen_weighted_average():
    learner = okl_core.make_learner("mfogd", n_inputs=4, n_classes=3, n_components=16, sigma=1.0)
    X, y = tiny_problem("multiclass", 4, n=90)
    a, _ = learner.update(learner.init(), X[:60], y[:60])
    b, _ = learner.update(learner.init(), X[60:], y[60:])
    merged = okl_core.merge_states(learner, [a, b])
    np.testing.assert_allclose(merged.w, (60 * a.w + 30 * b.w) / 90)
    assert int(merged.n_seen) == 90
    assert okl_core.merge_states(learner, [a]) is a


def test_merging_diverged_states_gives_nan_without_a_numpy_warning():
    """inf of both signs average to NaN (reported as divergence by the callers), silently."""
    learner = okl_core.make_learner("fogd", n_inputs=4, n_components=8, sigma=1.0)
    a, b = learner.init(), learner.init()
    a = a._replace(w=np.full_like(a.w, np.inf), n_seen=np.int64(5))
    b = b._replace(w=np.full_like(b.w, -np.inf), n_seen=np.int64(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        merged = okl_core.merge_states(learner, [a, b])
    assert np.isnan(merged.w).all()


def test_mismatched_specs_cannot_merge():
    a = okl_core.make_learner("fogd", n_inputs=4, seed=1)
    b = okl_core.make_learner("fogd", n_inputs=4, seed=2)
    with pytest.raises(okl_core.NotMergeableError, match="seed"):
        okl_core.merge_states(a, [a.init(), b.init()], learners=[a, b])
    with pytest.raises(okl_core.NotMergeableError, match="mfogd"):
        check_mergeable(a, okl_core.make_learner("mfogd", n_inputs=4, n_classes=2))
    dsg = okl_core.make_learner("dsg", n_inputs=4)
    check_mergeable(dsg, okl_core.make_learner("dsg", n_inputs=4, feature_cache_mb=1))  # runtime-only field
    with pytest.raises(okl_core.NotMergeableError, match="DSGState"):
        okl_core.merge_states(a, [a.init(), dsg.init()])
    with pytest.raises(okl_core.NotMergeableError, match="no states"):
        okl_core.merge_states(a, [])


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_metrics_of_shards_merge_to_the_metrics_of_the_whole(task):
    rng = np.random.default_rng(0)
    n = 100
    if task == "binary":
        y, scores = rng.choice([-1, 1], n), rng.normal(size=n)
    elif task == "multiclass":
        y, scores = rng.integers(0, 4, n), rng.normal(size=(n, 4))
    else:
        y, scores = rng.normal(size=n), rng.normal(size=n)
    whole = Prequential(task).add(scores, y)
    merged = Prequential(task).add(scores[:30], y[:30]).merge(Prequential(task).add(scores[30:], y[30:]))
    assert merged.n == whole.n == n
    assert merged.mistakes == whole.mistakes
    assert merged.mse == pytest.approx(whole.mse) and merged.mae == pytest.approx(whole.mae)
    assert merged.class_counts == whole.class_counts and merged.class_mistakes == whole.class_mistakes
    if task == "binary":
        assert whole.mistake_rate == np.mean(np.where(scores >= 0, 1, -1) != y)
    if task == "regression":
        assert whole.mse == pytest.approx(np.mean((scores - y) ** 2))
    assert Prequential(**whole.to_dict()).summary() == whole.summary()


def test_metrics_refuse_mixed_tasks():
    with pytest.raises(ValueError):
        Prequential("binary").merge(Prequential("regression"))
    with pytest.raises(ValueError):
        Prequential("ranking")
    assert np.isnan(Prequential("binary").mistake_rate)


def _rounds(name, X, y, shards=2, rounds=3, **params):
    """Iterative parameter mixing in okl_core: each round starts every shard from the merge."""
    learner = okl_core.make_learner(name, n_inputs=X.shape[1], **params)
    parts = np.array_split(np.arange(len(y)), shards * rounds)
    merged = learner.init()
    for r in range(rounds):
        states = []
        for k in range(shards):
            rows = parts[r * shards + k]
            state, _ = learner.update(merged, X[rows], y[rows])
            states.append(state)
        merged = okl_core.merge_states(learner, states, base=merged)
    return learner, merged


def test_rounds_of_a_summing_learner_equal_training_on_all_rows():
    X, y = tiny_problem("regression", 3, n=120)
    learner, merged = _rounds("pkawv_taylor", X, y, degree=3, sigma=1.0)
    whole, _ = learner.update(learner.init(), X, y)
    assert int(merged.n_seen) == 120
    np.testing.assert_allclose(merged.gram, whole.gram, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(learner.predict(merged, X), learner.predict(whole, X), rtol=1e-6, atol=1e-8)
    learner, merged = _rounds("krr", X[:60], y[:60], sigma=1.0)
    whole, _ = learner.update(learner.init(), X[:60], y[:60])
    assert int(merged.n_seen) == 60 and len(merged.targets) == 60
    np.testing.assert_allclose(learner.predict(merged, X), learner.predict(whole, X), rtol=1e-6, atol=1e-8)


def test_rounds_of_an_averaging_learner_weight_by_new_examples():
    X, y = tiny_problem("binary", 4, n=90)
    learner = okl_core.make_learner("fogd", n_inputs=4, n_components=16, sigma=1.0, eta=0.1)
    base, _ = learner.update(learner.init(), X[:30], y[:30])
    a, _ = learner.update(base, X[30:70], y[30:70])  # +40
    b, _ = learner.update(base, X[70:], y[70:])  # +20
    merged = okl_core.merge_states(learner, [a, b], base=base)
    np.testing.assert_allclose(merged.w, (40 * a.w + 20 * b.w) / 60)
    assert int(merged.n_seen) == 90
    with pytest.raises(okl_core.NotMergeableError, match="fewer examples"):
        okl_core.merge_states(learner, [base, learner.init()], base=base)


def test_a_learner_that_declares_nothing_cannot_merge_or_mix():
    """The defaults merge only declared fields: an undeclared field is a clear refusal."""
    from typing import NamedTuple

    from okl_core.learners.base import Learner
    from okl_core.merge import check_mixable

    class State(NamedTuple):
        w: np.ndarray
        n_seen: np.ndarray

    class Undeclared(Learner):
        name = "undeclared"
        state_class = State

        def init(self):
            return State(w=np.zeros(2), n_seen=np.asarray(0, dtype=np.int64))

    learner = Undeclared.__new__(Undeclared)
    s = State(w=np.zeros(2), n_seen=np.asarray(1, dtype=np.int64))
    with pytest.raises(okl_core.NotMergeableError, match=r"undeclared states cannot be combined: fields \['w'\]"):
        learner.merge([s, s])
    with pytest.raises(okl_core.NotMergeableError, match="undeclared cannot mix"):
        check_mixable(learner)
    Undeclared.averaged_fields = ("w",)
    assert int(learner.merge([s, s]).n_seen) == 2


@pytest.mark.parametrize(
    "task, scores, y, message",
    [
        ("binary", np.full(5, -1.0), np.array([1]), r"binary metrics need scores of shape \(n,\) and labels of shape \(n,\) for the same n, got scores \(5,\) and labels \(1,\)"),
        ("regression", np.zeros((3, 1)), np.zeros(3), r"got scores \(3, 1\) and labels \(3,\)"),
        ("multiclass", np.zeros(3), np.zeros(3, int), r"multiclass metrics need scores of shape \(n, C\)"),
        ("multiclass", np.zeros((3, 2)), np.array([0, -1, 1]), r"class indices 0..C-1, got \[-1\]"),
    ],
)
def test_metrics_refuse_scores_and_labels_that_are_not_one_batch(task, scores, y, message):
    """Five scores for one label once counted five mistakes in one example (a mistake rate of 5.0)."""
    metrics = Prequential(task)
    with pytest.raises(ValueError, match=message):
        metrics.add(scores, y)
    assert metrics.n == 0 and metrics.mistakes == 0


@pytest.mark.parametrize("weight", [None, "a", True, float("nan"), -0.1, 1.5])
def test_a_mixing_weight_that_is_not_a_number_in_0_1_is_named(weight):
    learner = okl_core.make_learner("fogd", n_inputs=4, n_components=8)
    with pytest.raises(ValueError, match=r"^mixing weight must be a number in \[0, 1\], got "):
        okl_core.mix_states(learner, learner.init(), learner.init(), weight)


def test_mix_refuses_a_state_of_another_config():
    learner = okl_core.make_learner("dsg", n_inputs=4, block_size=8)
    other = okl_core.make_learner("dsg", n_inputs=4, block_size=16)
    X, y = tiny_problem("binary", 4, n=200)
    a, _ = learner.update(learner.init(), X, y)
    b, _ = other.update(other.init(), X, y)
    with pytest.raises(okl_core.NotMergeableError, match=r"^dsg: merged state array 'coef' has dtype/shape"):
        learner.mix(a, b, 0.5)


def test_regression_errors_that_overflow_give_inf_sums_without_a_warning():
    """A diverging learner's scores overflow the squared-error sum: inf, reported as divergence, no RuntimeWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = Prequential("regression").add(np.array([1e200, -1e200]), np.zeros(2))
    assert metrics.sum_squared_error == np.inf and metrics.sum_absolute_error == 2e200


def _shards(task, y, scores, cuts):
    """Accumulators of consecutive pieces of (scores, y) cut at ``cuts``, merged in order."""
    bounds = [0, *cuts, len(y)]
    total = Prequential(task)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        total = total.merge(Prequential(task).add(scores[lo:hi], y[lo:hi]))
    return total


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_merged_shards_know_the_majority_class_baseline_of_the_concatenated_rows(task):
    rng = np.random.default_rng(1)
    n = 301
    y = rng.choice([-1, 1], n, p=[0.7, 0.3]) if task == "binary" else rng.choice(5, n, p=[0.1, 0.2, 0.4, 0.2, 0.1])
    scores = rng.normal(size=n) if task == "binary" else rng.normal(size=(n, 5))
    merged = _shards(task, y, scores, [17, 150, 151, 290])
    assert merged.baseline == constant_baseline(task, y)  # exactly: counts
    labels = np.where(scores >= 0, 1, -1) if task == "binary" else scores.argmax(1)
    values = [-1, 1] if task == "binary" else range(5)
    assert merged.class_counts == [int((y == v).sum()) for v in values]
    assert merged.predicted_counts == [int((labels == v).sum()) for v in values]
    summary = merged.summary()
    assert summary["baseline"] == constant_baseline(task, y) and summary["one_class"] is False
    assert summary["beats_baseline"] is beats_baseline(merged.mistake_rate, constant_baseline(task, y)["mistake_rate"]) is False


def test_merged_shards_know_the_mean_predictor_baseline_without_cancellation():
    """Targets of mean 1e6 and spread 1: a sum of squares would lose every digit of the variance."""
    rng = np.random.default_rng(2)
    y = 1e6 + rng.normal(size=400)
    merged = _shards("regression", y, np.zeros(400), [1, 99, 250, 251])
    reference = np.mean((y - y.mean()) ** 2)  # the closed form, two-pass
    assert merged.baseline["mse"] == pytest.approx(reference, rel=1e-9)
    assert merged.baseline["mse"] == pytest.approx(constant_baseline("regression", y)["mse"], rel=1e-9)
    assert merged.sum_y == pytest.approx(y.sum(), rel=1e-14)
    # Answering 0 is ~1e12 times worse than the mean: not better than the baseline.
    assert merged.summary()["beats_baseline"] is False


def test_a_model_better_than_the_baseline_and_one_that_answers_one_class():
    y = np.array([1, 1, -1, -1, -1, 1, -1, -1])
    good = Prequential("binary").add(y * 2.0, y)  # every row right
    assert good.summary()["beats_baseline"] is True and good.summary()["one_class"] is False
    constant = Prequential("binary").add(-np.ones(8), y)  # always -1: the majority class itself
    assert constant.one_class and not constant.beats_baseline
    assert constant.mistake_rate == constant.baseline["mistake_rate"] == 3 / 8
    # Rows of one class only: answering it is right, not a warning.
    assert not Prequential("binary").add(np.ones(3), np.ones(3, dtype=int)).one_class
    reg = Prequential("regression").add(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]))
    assert reg.summary() == {"n": 3, "mse": 0.0, "mae": 0.0, "baseline": {"mse": pytest.approx(2 / 3)}, "beats_baseline": True}


def test_metrics_serialized_before_the_baseline_load_with_an_unknown_baseline():
    old = {"task": "binary", "n": 10, "mistakes": 3, "sum_squared_error": 0.0, "sum_absolute_error": 0.0,
           "class_counts": [], "class_mistakes": []}
    loaded = Prequential(**old)
    assert loaded.mistake_rate == 0.3 and math.isnan(loaded.baseline["mistake_rate"]) and not loaded.beats_baseline
    more = loaded.merge(Prequential("binary").add(np.ones(2), np.array([1, -1])))
    assert more.n == 12 and math.isnan(more.baseline["mistake_rate"])  # 2 rows of 12 counted: still unknown
