"""The compiled folds of the Projectrons and BPA-S (okl_core.learners.budget._folds) give the
numpy reference's bytes.

Each learner is trained with its compiled fold (``update``) and with the numpy per-row fold of
tests/okl_core/reference/budget.py over several configurations and batch splits, the budget
filling and the projections, margin updates and removals happening inside batches; states,
online scores and predictions must be byte-identical. The reference counts what its updates
did, so each case is checked to exercise the maintenance it is there for.
"""

import collections

import numpy as np
import pytest

import okl_core
from okl_core.learners import budget
from okl_core.learners.budget._support import fold_module
from tests.okl_core.real_data import a9a, mnist_test
from tests.okl_core.reference import budget as reference
from tests.okl_core.test_compiled_folds import labels, pixels

folds = fold_module()

D_IN = 24
# (learner, parameters, what the numpy run must do at least once; see `actions`)
CASES = [
    ("projectron", dict(sigma=0.5, budget=12, eta=0.1), {"add", "project_full"}),
    ("projectron", dict(sigma=15.0, budget=16, eta=0.3, kernel="laplacian"), {"add", "project_room", "project_full"}),
    ("projectron_pp", dict(sigma=1.0, budget=12, eta=1.0), {"add", "project_room", "margin"}),
    ("projectron_pp", dict(sigma=1.0, budget=12, eta=0.1, margin_test="code"), {"add", "project_full", "margin"}),
    ("projectron_pp", dict(sigma=2.0, budget=16, eta=0.5, kernel="cauchy"), {"add", "project_full", "margin"}),
    ("projectron_r", dict(sigma=0.5, budget=12, eta=0.3, eps=0.05), {"add", "project_full"}),
    ("projectron_r", dict(sigma=2.0, budget=16, eta=0.5, eps=0.01, threshold="squared", projection_eta=0.3),
     {"add", "project_room", "project_full"}),
    ("mprojectron", dict(sigma=0.5, budget=12, eta=0.1, n_classes=3), {"add", "project_full"}),
    ("mprojectron", dict(sigma=12.0, budget=24, eta=0.3, n_classes=10, kernel="laplacian"), {"add", "project_room", "project_full"}),
    ("mprojectron_pp", dict(sigma=1.0, budget=12, eta=1.0, n_classes=4), {"add", "project_room", "margin"}),
    ("mprojectron_pp", dict(sigma=1.0, budget=12, eta=0.1, n_classes=3, margin_test="code"), {"add", "project_full", "margin"}),
    ("bpa_s", dict(sigma=0.5, budget=12), {"add", "replace"}),
    ("bpa_s", dict(sigma=2.0, budget=16, C=0.1, kernel="cauchy"), {"add", "replace"}),
    ("mbpa_s", dict(sigma=0.5, budget=12, n_classes=3), {"add", "replace"}),
    ("mbpa_s", dict(sigma=2.0, budget=16, C=0.3, n_classes=10, kernel="laplacian"), {"add", "replace"}),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)]


def train_bytes(learner, X, y, splits, resume=False, seen=None):
    """States after each batch (read back from model bytes before the next one when
    ``resume``), online scores and final predictions, as bytes; by the reference's fold
    (counting its actions into ``seen``) when ``seen`` is given, else by ``learner.update``."""
    state, out = learner.init(), []
    for part in np.array_split(np.arange(len(y)), splits):
        if resume:
            learner, state = okl_core.model_from_bytes(okl_core.model_bytes(learner, state))
        if seen is None:
            state, scores = learner.update(state, X[part], y[part])
        else:
            state, scores = reference.fold(learner, state, X[part], y[part], seen)
        out += [okl_core.model_bytes(learner, state), scores.tobytes()]
    return out + [np.ascontiguousarray(learner.predict(state, X[:50])).tobytes()]


def both_folds(learner, X, y, splits, expected=(), resume=False):
    """The compiled fold's bytes, then the reference's (checking it did each of ``expected``:
    ``add`` a new vector, ``project_room`` / ``project_full`` a mistake projected with room
    left / the set full, ``margin`` a Projectron++ margin update that changed a coefficient,
    ``replace`` a BPA-S removal)."""
    seen = collections.Counter()
    want = train_bytes(learner, X, y, splits, resume, seen)
    assert set(expected) <= {k for k, v in seen.items() if v}, seen
    return train_bytes(learner, X, y, splits, resume), want


@pytest.mark.parametrize(("name", "params", "expected"), CASES, ids=IDS)
@pytest.mark.parametrize("splits", [1, 3, 7])
def test_compiled_budget_fold_gives_the_references_bytes(name, params, expected, splits):
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(400, D_IN, seed=len(params))
    got, want = both_folds(learner, X, labels(learner, digits), splits, expected)
    assert got == want


@pytest.mark.parametrize(("name", "params", "expected"), CASES[::2], ids=IDS[::2])
def test_compiled_budget_fold_stops_and_resumes_from_model_bytes(name, params, expected):
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(300, D_IN, seed=1)
    got, want = both_folds(learner, X, labels(learner, digits), 5, resume=True)
    assert got == want
    assert got[-1] == train_bytes(learner, X, labels(learner, digits), 1)[-1]  # batching does not change the model


@pytest.mark.parametrize("seed", range(4))
def test_compiled_argmax_and_removal_match_numpy_with_ties_nan_and_inf(seed):
    rng = np.random.default_rng(seed)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, 0.5])
    for _ in range(300):
        f = rng.integers(-2, 3, 5).astype(np.float64) / 2.0  # ties
        hit = rng.random(5) < 0.15
        f[hit] = rng.choice(specials, hit.sum())
        label = int(rng.integers(0, 5))
        assert folds.argmax_skipping(f, -1) == np.argmax(f), f
        with np.errstate(invalid="ignore"):
            rival = reference.best_wrong_class(f, label)[0]
        assert folds.argmax_skipping(f, label) == rival, (f, label)
        k = rng.integers(0, 3, 5) / 2.0
        for alpha in (f, np.stack([f, f[::-1]], 1)):
            weights = alpha * alpha if alpha.ndim == 1 else budget.squared_norms(alpha)
            with np.errstate(invalid="ignore"):
                expected = int(np.argmin(weights * (1.0 - k * k)))
            assert folds.bpa_s_slot(np.ascontiguousarray(alpha), k, 5) == expected, (alpha, k)


def test_compiled_budget_folds_on_a9a():
    # a9a rows (d = 123, 14 non-zero), the FOGD paper's B = 100: the budget fills, then
    # every mistake projects / replaces a vector, within the 3,000 rows.
    X, y = a9a()
    X, y = X[:3000], y[:3000]
    for name, params, expected in [("projectron_pp", dict(sigma=2.0, eta=0.1, margin_test="code"), {"add", "project_full", "margin"}),
                                   ("bpa_s", dict(sigma=8.0), {"add", "replace"})]:
        learner = okl_core.make_learner(name, n_inputs=123, budget=100, **params)
        got, want = both_folds(learner, X, y, 2, expected)
        assert got == want, name


def test_compiled_budget_folds_on_mnist():
    # MNIST test digits (d = 784), B = 100, 10 classes: the multiclass learners' folds fill
    # the budget and maintain it over 2,000 rows.
    X, y = mnist_test()
    X, y = X[:2000], y[:2000]
    for name, params, expected in [("mprojectron_pp", dict(eta=0.5), {"add", "project_full", "margin"}),
                                   ("mbpa_s", {}, {"add", "replace"})]:
        learner = okl_core.make_learner(name, n_inputs=784, sigma=4.0, budget=100, n_classes=10, **params)
        got, want = both_folds(learner, X, y, 3, expected)
        assert got == want, name
