"""Divergence in memory (issue 17, class 1): run_online finishes and says where; merges of
diverged states never raise; every registered learner, pushed to overflow, finishes."""

import dataclasses
import warnings

import numpy as np
import pytest

import okl_core
from okl_core import testing
from okl_core.divergence import diverged, exploded, non_finite_fields
from okl_core.evaluation import run_online
from okl_core.metrics import Prequential

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
    if "lam" in config and "eta" in config:  # BOGD, NORMA: the decay 1 - eta lam must stay positive (checked by their configs)
        config["lam"] = min(config["lam"], 0.5 / config["eta"])
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


# -- finite divergence: a loss that explodes without overflowing --------------------------
STEP_PARAMETER = {
    "bogd": "eta", "bogd_r": "eta", "mbogd": "eta", "norma_r": "eta", "omkl_gf": "eta", "raker": "eta",
    "fogd": "eta", "fogd_r": "eta", "mfogd": "eta", "kernel_ogd": "eta", "kernel_ogd_r": "eta", "mkernel_ogd": "eta",
    "nogd": "eta", "nogd_r": "eta", "mnogd": "eta", "forgetron_r": "eta", "projectron_r": "eta", "rbp_r": "eta",
    "dsg": "theta", "oks": "step_scale",
}
"""The step size of each learner that has one (a huge value must be flagged)."""

CANNOT_EXPLODE = {
    # Coefficients of size at most 1 per row (perceptron, RBP, Forgetron, Projectron: their
    # eta is a margin threshold, not a step) or capped by construction (PA: min(C, loss / k(x, x))):
    "kernel_perceptron", "rbp", "mrbp", "forgetron", "mforgetron", "projectron", "projectron_pp", "mprojectron",
    "mprojectron_pp", "bpa_s", "mbpa_s",
    # Step sizes fixed by the paper's theory from the horizon and the loss (no free step):
    "ioks", "rf_ioks", "oks_pp", "rf_oks_pp",
    # Exact (kernel) ridge solutions, no step:
    "krr", "kernel_awv", "pkawv_nystrom", "pkawv_taylor",
}
"""Learners without a free step size, whose scores stay bounded by their construction."""


def test_every_registered_learner_is_classified_for_the_explosion_tests():
    assert set(STEP_PARAMETER) | CANNOT_EXPLODE == set(okl_core.learner_names())
    assert not set(STEP_PARAMETER) & CANNOT_EXPLODE


def _conformance_run(name, n=400, **changes):
    learner = testing.conformance_learner(name, **changes)
    X, y = tiny_problem(learner.task, learner.config.n_inputs, n=n, n_classes=getattr(learner.config, "n_classes", None) or 3)
    return run_online(learner, X, y, batch_rows=50)


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_a_healthy_run_of_every_learner_is_not_flagged(name):
    run = _conformance_run(name)
    assert run.diverged_at is None and not exploded(run.metrics)
    assert run.metrics.beats_baseline  # healthy indeed: better than the constant answer


@pytest.mark.parametrize("name", sorted(STEP_PARAMETER))
def test_a_huge_step_is_flagged_for_every_learner_that_has_one(name):
    config = dataclasses.asdict(testing.conformance_learner(name).config)
    changes = {STEP_PARAMETER[name]: 1e12}
    if "lam" in config and "eta" in changes:  # the decay 1 - eta lam must stay positive (checked by their configs)
        changes["lam"] = min(config["lam"], 0.5 / changes["eta"])
    run = _conformance_run(name, **changes)
    assert run.diverged_at == 0


def test_a_finite_explosion_is_divergence():
    """BOGD-R with a small budget and little decay: an MSE ~1e5 times the targets' scale, every number finite."""
    learner = okl_core.make_learner("bogd_r", n_inputs=4, sigma=0.5, budget=10, eta=0.5, lam=0.001, removal="random")
    X, y = tiny_problem("regression", 4, n=2000)
    run = run_online(learner, X, y, batch_rows=100)
    assert np.isfinite(run.metrics.mse) and not non_finite_fields(run.state) and run.metrics.mse > 1e4
    assert run.diverged_at == 800
    # The first 800 rows were not yet past the rule; the first 900 are.
    head = run_online(learner, X[:800], y[:800], batch_rows=100).metrics
    assert not exploded(head) and exploded(run_online(learner, X[:900], y[:900], batch_rows=100).metrics)


def _regression_metrics(scores, y):
    return Prequential("regression").add(np.asarray(scores, dtype=np.float64), np.asarray(y, dtype=np.float64))


def test_the_regression_rule_is_1000_times_the_mse_of_answering_zero():
    y = np.array([1.0, -1.0, 2.0, 0.0])  # E[y^2] = 1.5
    error = np.sqrt(1e3 * 1.5)
    assert not exploded(_regression_metrics(y + error * 0.999, y))
    assert exploded(_regression_metrics(y + error * 1.001, y))
    assert not exploded(_regression_metrics([5.0, 5.0], [0.0, 0.0]))  # no scale to measure against
    assert not exploded(Prequential("regression"))


def test_a_slow_learner_on_targets_far_from_zero_is_not_flagged():
    """Targets 1e4 +- 1: a learner still near 0 is 1e8 variances off, but no worse than answering 0."""
    rng = np.random.default_rng(0)
    y = 1e4 + rng.normal(size=500)
    assert not exploded(_regression_metrics(np.linspace(0, 5e3, 500), y))


def test_the_classification_rule_is_on_the_scores_magnitude_per_row_scored():
    y = np.array([1, -1] * 50)
    assert not exploded(Prequential("binary").add(np.full(100, 0.999e5), y))  # 1e3 * 100 rows
    assert exploded(Prequential("binary").add(np.full(100, 1.001e5), y))
    assert exploded(Prequential("multiclass").add(np.tile([[0.0, -2e5, 1.0]], (100, 1)), np.zeros(100, dtype=int)))
