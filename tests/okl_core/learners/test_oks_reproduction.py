"""Li & Liao's a9a numbers (spec/oks.md, Tables 2 and 5) with the spec's settings (slow).

One random permutation of the 32,561 a9a training rows (the paper averages ten), the six
Gaussian kernels sigma = 2^-2 .. 2^3, the logistic loss, U = 15, the a9a features as
distributed (binary, already within [-1, 1]), horizon T = 32,561. Measured on the
reference machine with this permutation (``default_rng(0)``, learner seed 0): OKS 19.83%,
IOKS 17.33%, OKS++ 16.65%, RF-OKS++ (D = 400) 17.21% with the released script's tuning
and 19.26% with the paper's. Over five permutations (bench/repro_multikernel.py oks
--runs 5): OKS 19.79 +- 0.06 (paper 19.65), IOKS 17.41 +- 0.10 (17.46), OKS++ 16.85 +-
0.14 (16.57), RF-OKS++ 17.37 +- 0.25 released tuning / 19.16 +- 0.08 paper tuning (17.28).
Tolerance: the issue's 1.5 points against the paper.
"""

import numpy as np
import pytest

import okl_core

from ..real_data import a9a

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def a9a_stream():
    X, y = a9a()
    order = np.random.default_rng(0).permutation(len(y))
    return X[order], y[order]


def online_mistake_rate(a9a_stream, name, **params):
    X, y = a9a_stream
    learner = okl_core.make_learner(name, n_inputs=123, seed=0, **params)
    state, scores = learner.update(learner.init(), X, y)
    return 100.0 * float(np.mean(learner.to_labels(scores) != y)), learner, state


@pytest.mark.parametrize(
    "name, params, paper",
    [
        ("oks", {"horizon": 32561}, 19.65),
        ("ioks", {"horizon": 32561}, 17.46),
        ("oks_pp", {}, 16.57),
        ("rf_oks_pp", {"tuning": "released_code"}, 17.28),
    ],
)
def test_a9a_mistake_rate_within_1_5_points_of_the_paper(a9a_stream, name, params, paper):
    rate, learner, state = online_mistake_rate(a9a_stream, name, **params)
    assert abs(rate - paper) <= 1.5, f"{name}: {rate:.2f}% vs the paper's {paper}%"
    # The selected bandwidth is one of the wide kernels that fit a9a's binary features.
    assert learner.best_kernel(state) in ("gaussian:2.0", "gaussian:4.0", "gaussian:8.0")


def test_a9a_rf_oks_pp_with_the_papers_tuning(a9a_stream):
    # Theorem 3.1's exploration (about 12% of the rounds at the end) spends more rounds on
    # the narrow kernels, whose random-feature models are noise on a9a: 19.16 +- 0.08 over
    # five permutations. The published 17.28% came from the released script's far smaller
    # exploration (tuning='released_code', tested above). Checked against our measurement.
    rate, learner, state = online_mistake_rate(a9a_stream, "rf_oks_pp")
    released, _, _ = online_mistake_rate(a9a_stream, "rf_oks_pp", tuning="released_code")
    assert abs(rate - 19.16) <= 0.5, f"rf_oks_pp: {rate:.2f}%"
    assert rate > released + 1.0
    assert learner.config.n_components == 400
