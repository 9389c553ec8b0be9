"""FOGD, MFOGD and FOGD-R against a literal transcription of the spec's update rules."""

import warnings

import numpy as np
import pytest

import okl_core
from okl_core.features import frequency_block

from .learner_data import tiny_problem


def _reference_features(X, D, sigma, seed, block_size):
    """z(x) = [cos(U^T x), sin(U^T x)], U from the generator blocks, in float64 (unscaled)."""
    blocks = [frequency_block("gaussian", sigma, X.shape[1], block_size, seed, b) for b in range(-(-D // block_size))]
    U = np.concatenate(blocks, axis=1)[:, :D].astype(np.float64)
    P = X.astype(np.float64) @ U
    return np.hstack([np.cos(P), np.sin(P)])


def test_fogd_binary_matches_reference_fold():
    X, y = tiny_problem("binary", 4, n=300)
    learner = okl_core.make_learner("fogd", n_inputs=4, n_components=50, sigma=1.0, eta=0.05, seed=5, block_size=16)
    state, scores = learner.update(learner.init(), X, y)
    Z = _reference_features(X, 50, 1.0, 5, 16)
    w, ref_scores = np.zeros(100), []
    for z, label in zip(Z, y):
        f = w @ z
        ref_scores.append(f)
        if label * f < 1:
            w = w + 0.05 * label * z
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(state.w, w, rtol=1e-4, atol=1e-4)
    assert int(state.n_seen) == 300


def test_mfogd_changes_only_the_true_and_rival_class():
    X, y = tiny_problem("multiclass", 4, n=50, n_classes=4)
    learner = okl_core.make_learner("mfogd", n_inputs=4, n_classes=4, n_components=20, sigma=1.0, eta=0.1)
    state = learner.init()
    state, _ = learner.update(state, X[:30], y[:30])
    before = state.w.copy()
    state, scores = learner.update(state, X[30:31], y[30:31])
    changed = np.flatnonzero(np.any(state.w != before, axis=1))
    s = scores[0].copy()
    true_class = y[30]
    s[true_class] = -np.inf
    rival = int(np.argmax(s))
    if scores[0][true_class] - scores[0][rival] < 1:
        assert sorted(changed) == sorted([true_class, rival])
        z = learner.features.transform(X[30:31])[0].astype(np.float64)
        np.testing.assert_allclose(state.w[true_class] - before[true_class], 0.1 * z)
        np.testing.assert_allclose(state.w[rival] - before[rival], -0.1 * z)
    else:
        assert changed.size == 0


def test_mfogd_ties_go_to_the_first_class():
    learner = okl_core.make_learner("mfogd", n_inputs=2, n_classes=3, n_components=4)
    scores = learner.predict(learner.init(), np.zeros((2, 2)))
    np.testing.assert_array_equal(learner.to_labels(scores), [0, 0])


@pytest.mark.parametrize("threshold", ["absolute", "squared"])
def test_fogd_regression_thresholds(threshold):
    X, y = tiny_problem("regression", 4, n=200)
    learner = okl_core.make_learner("fogd_r", n_inputs=4, n_components=30, sigma=1.0, eta=0.01, eps=0.1, threshold=threshold)
    state, scores = learner.update(learner.init(), X, y)
    Z = _reference_features(X, 30, 1.0, 0, 256)
    w, ref = np.zeros(60), []
    for z, target in zip(Z, y):
        f = w @ z
        ref.append(f)
        r = target - f
        if (r * r if threshold == "squared" else abs(r)) > 0.1:
            w = w + 0.01 * r * z
    np.testing.assert_allclose(scores, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state.w, w, rtol=1e-4, atol=1e-5)


def test_threshold_readings_differ_and_bad_values_are_rejected():
    X, y = tiny_problem("regression", 4, n=200)
    a = okl_core.make_learner("fogd_r", n_inputs=4, n_components=30, sigma=1.0, eta=0.01, eps=0.1, threshold="absolute")
    b = okl_core.make_learner("fogd_r", n_inputs=4, n_components=30, sigma=1.0, eta=0.01, eps=0.1, threshold="squared")
    assert not np.array_equal(a.update(a.init(), X, y)[0].w, b.update(b.init(), X, y)[0].w)
    with pytest.raises(ValueError, match="threshold"):
        okl_core.make_learner("fogd_r", n_inputs=4, threshold="relative")


def test_labels_are_validated():
    learner = okl_core.make_learner("fogd", n_inputs=2)
    with pytest.raises(ValueError, match="-1 or \\+1"):
        learner.update(learner.init(), np.zeros((2, 2)), np.array([0, 1]))
    m = okl_core.make_learner("mfogd", n_inputs=2, n_classes=3)
    with pytest.raises(ValueError, match="0..2"):
        m.update(m.init(), np.zeros((1, 2)), np.array([3]))
    with pytest.raises(ValueError, match="NaN"):
        learner.update(learner.init(), np.array([[np.nan, 0.0]]), np.array([1]))


@pytest.mark.parametrize(
    "X, message",
    [
        (np.array([[1.0, 2.0], [1e39, 0.0]]), r"^fogd: X contains NaN or inf \(row 1: finite values beyond float32's range, \|x\| > 3.4e\+38, which learners compute in\)$"),
        (np.array([["a", "b"]]), r"^fogd: X must hold real numbers \(a plain, unmasked array\), got ndarray of <U1$"),
        (np.array([[1 + 2j, 0]]), r"^fogd: X must hold real numbers .* got ndarray of complex128$"),
        (np.ma.masked_array([[1.0, 2.0]], mask=[[0, 1]]), r"^fogd: X must hold real numbers .* got MaskedArray of float64$"),
        ([[1.0, 2.0], [3.0]], r"^fogd: X must be a 2-D array of numbers \(setting an array element with a sequence"),
    ],
)
def test_inputs_that_are_not_float32_numbers_are_named(X, message):
    """Finite float64 values beyond float32's range once printed a numpy overflow warning and then
    "X contains NaN or inf"; strings and ragged lists gave numpy's message without the learner."""
    learner = okl_core.make_learner("fogd", n_inputs=2, n_components=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=message):
            learner.predict(learner.init(), X)


@pytest.mark.parametrize("name", ["fogd", "kernel_ogd", "pkawv_taylor", "raker"])
@pytest.mark.parametrize("sigma", [1e-31, 1e31])
def test_a_bandwidth_whose_square_or_frequencies_overflow_is_refused(name, sigma):
    """sigma = 1e-39 once gave NaN scores (float32 frequencies overflow); 1e155 an OverflowError."""
    params = {"kernels": f"gaussian:{sigma!r}"} if name == "raker" else {"sigma": sigma}
    with pytest.raises(ValueError, match=r"sigma must be a number in \[1e-30, 1e\+30\] \(a kernel bandwidth\)"):
        okl_core.make_learner(name, n_inputs=2, **params)


def test_scaled_features_with_D_times_eta_give_the_same_predictions():
    X, y = tiny_problem("binary", 4, n=200)
    D = 40
    unscaled = okl_core.make_learner("fogd", n_inputs=4, n_components=D, sigma=1.0, eta=0.01, scaled=False)
    scaled = okl_core.make_learner("fogd", n_inputs=4, n_components=D, sigma=1.0, eta=0.01 * D, scaled=True)
    _, a = unscaled.update(unscaled.init(), X, y)
    _, b = scaled.update(scaled.init(), X, y)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)  # eta_scaled = D eta_unscaled (spec/README.md)
