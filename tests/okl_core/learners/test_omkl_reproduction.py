"""OMKL-GF against Raker on a regression stream built locally (slow).

The paper's UCI sets are not in ../shared/data, so the stream is Friedman #1
(``sklearn.datasets.make_friedman1``: 10,000 rows, 10 features uniform in [0, 1], noise
1.0, random_state 0) with the target min-max scaled to [0, 1] (spec: scale features and
targets to [0, 1]). Settings are the paper's: 17 Gaussians 2^-8 .. 2^8, D = 50,
lambda = 1e-3, eta = eta_e = 1/sqrt(t). Measured (mean over random-feature seeds 0-1):
Raker MSE 9.93e-3, OMKL-GF (M = 7, J = 1) 9.89e-3, (M = 1, J = 1) 23.8e-3: the paper's
pattern (M = 7 close to Raker, M = 1 clearly worse). Over ten seeds
(bench/repro_multikernel.py omkl --runs 10): Raker 10.06, M = 1 24.64, M = 7 10.24,
M = 10 9.62, M = 17 9.44 (x 1e-3).
"""

import numpy as np
import pytest

import okl_core

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def friedman():
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=10_000, n_features=10, noise=1.0, random_state=0)
    return X.astype(np.float32), (y - y.min()) / (y.max() - y.min())


def online_mse(stream, name, seeds=(0, 1), **params):
    X, y = stream
    errors = []
    for seed in seeds:
        learner = okl_core.make_learner(name, n_inputs=10, seed=seed, **params)
        _, scores = learner.update(learner.init(), X, y)
        errors.append(np.mean((scores - y) ** 2))
    return float(np.mean(errors))


def test_omkl_gf_with_seven_draws_is_close_to_raker_and_one_draw_is_worse(friedman):
    raker = online_mse(friedman, "raker")
    gf7 = online_mse(friedman, "omkl_gf", draws_per_node=7, selective_nodes=1)
    gf1 = online_mse(friedman, "omkl_gf", draws_per_node=1, selective_nodes=1)
    variance = float(np.var(friedman[1]))
    assert raker < 0.5 * variance and gf7 < 0.5 * variance
    assert gf7 <= 1.25 * raker, (gf7, raker)
    assert gf1 > 1.5 * gf7, (gf1, gf7)


def test_the_per_example_freeze_fires_early_and_the_running_mse_reading_keeps_table_1s_pattern(friedman):
    """bench/repro_gaps.py omkl_freeze: the spec's per-example reading freezes within the first
    100 examples; the running-MSE reading (default) never fires here and keeps M = 7 near Raker."""
    X, y = friedman
    for seed in (0, 1):
        learner = okl_core.make_learner("omkl_gf", n_inputs=10, seed=seed, draws_per_node=7, selective_nodes=1,
                                        freeze_below=1e-4, freeze_on="example")
        state = learner.init()
        for t in range(200):
            state, _ = learner.update(state, X[t : t + 1], y[t : t + 1])
            if bool(state.frozen):
                break
        assert bool(state.frozen) and t < 100, (seed, t)
    raker = online_mse(friedman, "raker")
    gf7 = online_mse(friedman, "omkl_gf", draws_per_node=7, selective_nodes=1, freeze_below=1e-4, freeze_on="mse")
    assert gf7 <= 1.25 * raker, (gf7, raker)
    learner = okl_core.make_learner("omkl_gf", n_inputs=10, draws_per_node=7, freeze_below=1e-4)
    assert not bool(learner.update(learner.init(), X, y)[0].frozen)
