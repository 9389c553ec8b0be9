"""Li & Liao's a9a numbers (spec/oks.md, Tables 2 and 5) with the spec's settings (slow).

One random permutation of the 32,561 a9a training rows (the paper averages ten), the six
Gaussian kernels sigma = 2^-2 .. 2^3, the logistic loss, U = 15, the a9a features as
distributed (binary, already within [-1, 1]), horizon T = 32,561. Measured on the
reference machine (one permutation, seed 0): OKS 19.6%, IOKS 17.2%, OKS++ 16.7%,
RF-OKS++ (D = 400) 18.7% with the paper's tuning and 17.2% with the released script's.
Tolerance: the issue's 1.5 points, except RF-OKS++ with the paper's tuning (2 points, see
the test).
"""

import numpy as np
import pytest

import okl_core
from tests.conftest import shared_data

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def a9a_stream():
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(shared_data("a9a", "a9a")), n_features=123)
    order = np.random.default_rng(0).permutation(len(y))
    return X.toarray().astype(np.float32)[order], y.astype(np.int64)[order]


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
    # Theorem 3.1's exploration (about 12% of rounds at the end) spends more rounds on the
    # narrow kernels, whose random-feature models are noise on a9a; the published 17.28%
    # came from the released script's much smaller exploration (tuning='released_code').
    rate, learner, state = online_mistake_rate(a9a_stream, "rf_oks_pp")
    assert abs(rate - 17.28) <= 2.0, f"rf_oks_pp: {rate:.2f}%"
    assert learner.config.n_components == 400
