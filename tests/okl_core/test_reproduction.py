"""Reproductions of the papers' numbers with the spec's settings (slow; CI runs them).

Figures measured on the reference machine are in the issue notes; the assertions use the
tolerances the issues state.
"""

import numpy as np
import pytest

import okl_core

from .real_data import a9a, mnist_test

pytestmark = pytest.mark.slow


def _online_error(name, X, y, permutations, **params):
    errors = []
    for r in range(permutations):
        order = np.random.default_rng(r).permutation(len(y))
        learner = okl_core.make_learner(name, seed=r, **params)
        _, scores = learner.update(learner.init(), X[order], y[order])
        errors.append(np.mean(learner.to_labels(scores) != y[order]))
    return float(np.mean(errors)), float(np.std(errors))


def test_mfogd_on_mnist_test_digits_within_2_points_of_11_8():
    X, y = mnist_test()
    # spec/fogd_nogd.md Table 7: sigma = 8, D = 4B = 400, unscaled; eta from the grid
    # {2, 0.2, 0.02, 0.002, 0.0002} (0.002 is the best on this split; code default 0.005).
    mean, std = _online_error("mfogd", X, y, 5, n_inputs=784, n_classes=10, n_components=400, sigma=8.0, eta=0.002)
    print(f"MFOGD MNIST online mistake rate {100 * mean:.2f} +- {100 * std:.2f} % (paper 11.8 +- 0.2)")
    assert abs(mean - 0.118) <= 0.02


def test_fogd_on_a9a_within_1_point_of_17_4():
    X_train, y_train = a9a("a9a")
    X_test, y_test = a9a("a9a.t")
    X, y = np.vstack([X_train, X_test]), np.concatenate([y_train, y_test])  # 48,842 rows
    mean, std = _online_error("fogd", X, y, 5, n_inputs=123, n_components=400, sigma=8.0, eta=0.002)
    print(f"FOGD a9a online mistake rate {100 * mean:.2f} +- {100 * std:.2f} % (paper 17.4 +- 0.1)")
    assert abs(mean - 0.174) <= 0.01


def test_dsg_hinge_on_a9a_test_error_at_most_16_percent():
    X_train, y_train = a9a("a9a")
    X_test, y_test = a9a("a9a.t")
    n = len(y_train)
    sigma = okl_core.median_heuristic(X_train)  # 4.0 on a9a
    errors = []
    for r in range(3):
        order = np.random.default_rng(r).permutation(n)
        # spec/dsg.md Adult row: median sigma, nu = 1/(100 n), batch 2^6, block 2^5, one pass.
        # theta is never reported: gamma_i = theta / (step_offset + i) = 0.05 / (1 + i / 1e4),
        # with the paper's optional block preconditioning, tuned on a9a train by permutation.
        learner = okl_core.make_learner(
            "dsg", n_inputs=123, loss="hinge", sigma=sigma, nu=1.0 / (100 * n), batch_size=64, block_size=32,
            theta=500.0, step_offset=1e4, precondition=True, precondition_eps=1e-3, seed=r,
        )
        state, _ = learner.update(learner.init(), X_train[order], y_train[order])
        errors.append(np.mean(learner.to_labels(learner.predict(state, X_test)) != y_test))
    print(f"DSG a9a test error {100 * np.mean(errors):.2f} +- {100 * np.std(errors):.2f} % (paper 15.3)")
    assert np.mean(errors) <= 0.16
