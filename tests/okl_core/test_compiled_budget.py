"""The compiled folds of the budget learners (RBP, Forgetron, BOGD, NORMA) give the numpy reference's bytes.

Each learner is trained with its compiled fold (``update``) and with the numpy per-row fold of
tests/okl_core/reference/budget.py over its options, with budgets small enough that the set
fills and is maintained (removals, shrinking, rescaling) inside a batch; states, online scores
and predictions must be byte-identical for several batch splits, and a run that switches
between the two mid-stream must equal either.
"""

import numpy as np
import pytest

import okl_core
from okl_core.learners import budget
from okl_core.learners.budget import SupportArrays, squared_norms
from okl_core.learners.budget._support import fold_module
from tests.okl_core.real_data import a9a, mnist_test
from tests.okl_core.reference import budget as reference
from tests.okl_core.test_compiled_folds import labels, pixels

folds = fold_module()

CASES = [
    ("rbp", dict(sigma=2.0, budget=15)),
    ("rbp", dict(sigma=3.0, budget=25, seed=4, kernel="laplacian")),
    ("mrbp", dict(sigma=2.0, budget=15, n_classes=10)),
    ("mrbp", dict(sigma=2.0, budget=20, n_classes=3, seed=2, kernel="cauchy")),
    ("rbp_r", dict(sigma=2.0, budget=15, eta=0.3, eps=0.05)),
    ("rbp_r", dict(sigma=2.0, budget=15, eta=0.3, eps=0.01, threshold="squared")),
    ("forgetron", dict(sigma=2.0, budget=15)),
    ("forgetron", dict(sigma=2.0, budget=15, phi_root="code")),
    ("forgetron", dict(sigma=2.0, budget=15, shrinking=False, kernel="laplacian")),
    ("mforgetron", dict(sigma=2.0, budget=15, n_classes=10)),
    ("mforgetron", dict(sigma=2.0, budget=15, n_classes=10, margin="multiclass")),
    ("mforgetron", dict(sigma=2.0, budget=15, n_classes=3, phi_root="code", margin="multiclass")),
    ("mforgetron", dict(sigma=2.0, budget=15, n_classes=3, shrinking=False)),
    ("forgetron_r", dict(sigma=2.0, budget=15, eta=1.0, eps=0.05)),
    ("forgetron_r", dict(sigma=2.0, budget=15, eta=0.5, eps=0.01, threshold="squared", phi_root="code")),
    ("forgetron_r", dict(sigma=2.0, budget=15, eta=0.5, eps=0.05, shrinking=False)),
    ("bogd", dict(sigma=2.0, budget=15)),
    ("bogd", dict(sigma=2.0, budget=15, eta=0.5, lam=0.01, gamma=1.0)),
    ("bogd", dict(sigma=2.0, budget=15, eta=0.5, lam=0.01, decay="on_update", removal="oldest", gamma=10.0)),
    ("mbogd", dict(sigma=2.0, budget=15, n_classes=10, eta=0.5, lam=1e-5, removal="oldest")),
    ("mbogd", dict(sigma=2.0, budget=15, n_classes=3, gamma=0.5, kernel="cauchy")),
    ("bogd_r", dict(sigma=2.0, budget=15, eta=0.3, eps=0.05)),
    ("bogd_r", dict(sigma=2.0, budget=15, eta=0.3, eps=0.01, threshold="squared", decay="on_update", gamma=1.0)),
    ("norma_r", dict(sigma=2.0, budget=15)),
    ("norma_r", dict(sigma=1.0, budget=15, eta=0.3, lam=0.01, nu=0.3, eps=0.05, kernel="laplacian")),
]
D_IN = 32
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


def train(learner, X, y, splits, state=None, fold=None):
    """The state after the batches, and per batch the state's and the online scores' bytes
    (``fold``: the reference's fold in place of ``learner.update``)."""
    step = learner.update if fold is None else (lambda state, X, y: fold(learner, state, X, y))
    state, out = state if state is not None else learner.init(), []
    for part in np.array_split(np.arange(len(y)), splits):
        state, scores = step(state, X[part], y[part])
        out += [okl_core.model_bytes(learner, state), scores.tobytes()]
    return state, out + [np.ascontiguousarray(learner.predict(state, X[:50])).tobytes()]


def reference_run(learner, X, y, splits):
    return train(learner, X, y, splits, fold=reference.fold)


def setup(name, params, n=400, seed=0):
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(n, D_IN, seed=seed)
    return learner, X, labels(learner, digits)


def assert_maintained(learner, state, n_rows):
    """The set filled and vectors were replaced: full, and vectors from the last half of the stream."""
    assert int(state.n_support) == learner.config.budget
    assert int(state.stamp.max()) >= n_rows // 2
    assert len(set(state.stamp.tolist())) == learner.config.budget


@pytest.mark.parametrize(("name", "params"), CASES, ids=IDS)
@pytest.mark.parametrize("splits", [1, 3, 8])
def test_compiled_budget_fold_gives_the_references_bytes(name, params, splits):
    learner, X, y = setup(name, params)
    expected_state, expected = reference_run(learner, X, y, splits)
    assert_maintained(learner, expected_state, len(y))
    assert train(learner, X, y, splits)[1] == expected


@pytest.mark.parametrize(("name", "params"), CASES, ids=IDS)
def test_switching_folds_mid_stream_stops_and_resumes(name, params):
    # The reference for the first 130 rows, compiled for the rest (and the other way round): the bytes of one fold.
    learner, X, y = setup(name, params, seed=1)
    _, expected = reference_run(learner, X, y, 1)
    first, _ = reference_run(learner, X[:130], y[:130], 2)
    compiled_first, _ = train(learner, X[:130], y[:130], 3)
    assert okl_core.model_bytes(learner, first) == okl_core.model_bytes(learner, compiled_first)
    reference_second, _ = train(learner, X[130:], y[130:], 2, state=compiled_first, fold=reference.fold)
    compiled_second, _ = train(learner, X[130:], y[130:], 3, state=first)
    for state in (reference_second, compiled_second):
        assert okl_core.model_bytes(learner, state) == expected[-3]


def test_forgetron_cases_shrink_and_grow(monkeypatch):
    # The Forgetron cases exercise phi < 1 (published rule) and phi > 1 (the code's root).
    learner, X, y = setup("forgetron", dict(sigma=2.0, budget=15))
    phis, original = [], reference.forgetron_shrink

    def spy(*args, **kwargs):
        phis.append(original(*args, **kwargs))
        return phis[-1]

    monkeypatch.setattr(reference, "forgetron_shrink", spy)
    reference_run(learner, X, y, 1)
    assert min(phis) < 1.0
    phis.clear()
    reference_run(okl_core.make_learner("forgetron", n_inputs=D_IN, sigma=2.0, budget=15, phi_root="code"), X, y, 1)
    assert max(phis) > 1.0


def test_bogd_bound_scales_the_coefficients():
    learner, X, y = setup("bogd", dict(sigma=2.0, budget=15, eta=0.5, lam=0.01, gamma=1.0))
    state, _ = train(learner, X, y, 1)
    assert np.max(np.abs(state.alpha)) <= 0.5 * 1.0


def test_compiled_squared_norm_is_squared_norms_bit_for_bit():
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((200, 123)) * rng.random((200, 123)) ** 4).astype(np.float32)
    rows, columns = np.zeros((200, 123), np.float32), np.zeros((123, 200))
    sq, alpha, stamp, coef = np.zeros(200), np.zeros(200), np.zeros(200, np.int64), np.zeros(1)
    support = SupportArrays(rows, columns, sq, alpha, alpha.reshape(200, 1), stamp)
    for i in range(200):
        folds.support_put(X, i, X[i].astype(np.float64), i, support, coef, i)
    assert sq.tobytes() == squared_norms(X.astype(np.float64)).tobytes()
    assert all(squared_norms(r[None, :])[0] == s for r, s in zip(X.astype(np.float64), sq))


@pytest.mark.parametrize("seed", range(20))
def test_compiled_argmax_is_numpys_with_ties_nan_and_inf(seed):
    rng = np.random.default_rng(seed)
    f = rng.choice([0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], size=rng.integers(2, 6), p=[0.3, 0.3, 0.2, 0.05, 0.1, 0.05])
    assert folds.argmax_skipping(f, -1) == int(np.argmax(f))
    for skip in range(len(f)):
        masked = f.copy()
        masked[skip] = -np.inf
        assert folds.argmax_skipping(f, skip) == int(np.argmax(masked))


@pytest.mark.parametrize(("sigma", "mu", "damage", "mistakes"), [
    (1.0, 0.2, 3.0, 10), (1.0, 0.9, 4.6, 10), (0.5, -0.3, 0.0, 1), (2.0, 1.5, 6.0, 14), (0.7, 0.35, 1.0, 3),
    (1.0, float("nan"), 2.0, 5), (0.0, 0.0, 0.0, 1),
])
@pytest.mark.parametrize("root", ["feasible", "code"])
def test_compiled_phi_is_the_references_forgetron_shrink(sigma, mu, damage, mistakes, root):
    expected = reference.forgetron_shrink(sigma, mu, damage, mistakes, root)
    got = folds.forgetron_phi(sigma, mu, damage, mistakes, budget.FORGETRON_RATIO, root == "code")
    assert np.array(got).tobytes() == np.array(expected).tobytes()
    assert np.array(budget.forgetron_shrink(sigma, mu, damage, mistakes, root)).tobytes() == np.array(expected).tobytes()


# Real data at the papers' budget (B = 100): a9a rows for the binary learners, MNIST digits for
# the multiclass ones; thousands of rows, so that the set is maintained for most of the run.
REAL_CASES = [
    ("rbp", dict(sigma=8.0)),
    ("forgetron", dict(sigma=8.0, phi_root="code")),
    ("bogd", dict(sigma=8.0, eta=0.5, lam=1e-6, gamma=10.0)),
    ("rbp_r", dict(sigma=8.0, eta=0.1, eps=0.1)),
    ("forgetron_r", dict(sigma=8.0, eta=0.5, eps=0.1)),
    ("bogd_r", dict(sigma=8.0, eta=0.1, eps=0.1)),
    ("norma_r", dict(sigma=8.0)),
    ("mrbp", dict(sigma=4.0, n_classes=10)),
    ("mforgetron", dict(sigma=4.0, n_classes=10)),
    ("mbogd", dict(sigma=4.0, n_classes=10, eta=0.5, lam=1e-5, removal="oldest")),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "params"), REAL_CASES, ids=[n for n, _ in REAL_CASES])
def test_compiled_budget_folds_on_real_data_at_the_papers_budget(name, params):
    learner = okl_core.make_learner(name, n_inputs=784 if "n_classes" in params else 123, budget=100, **params)
    if learner.task == "multiclass":
        X, y = mnist_test()
        X, y = X[:2000], y[:2000]
    else:
        X, y = a9a()
        X, y = X[:3000], y[:3000].astype(np.float64)
    expected_state, expected = reference_run(learner, X, y, 3)
    assert_maintained(learner, expected_state, len(y))
    assert train(learner, X, y, 3)[1] == expected


def random_case(seed):
    """A learner of this file with options, kernel, bandwidth and budget drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    name = ["rbp", "mrbp", "rbp_r", "forgetron", "mforgetron", "forgetron_r", "bogd", "mbogd", "bogd_r", "norma_r"][seed % 10]
    params = dict(sigma=float(rng.choice([0.5, 1.0, 2.0, 4.0])), budget=int(rng.integers(5, 30)),
                  kernel=str(rng.choice(["gaussian", "gaussian", "laplacian", "cauchy"])))
    if name.startswith("m"):
        params["n_classes"] = int(rng.integers(2, 11))
    if name.endswith("_r") and name != "norma_r":
        params.update(eta=float(rng.choice([0.1, 0.5, 1.0])), eps=float(rng.choice([0.0, 0.01, 0.1])),
                      threshold=str(rng.choice(["absolute", "squared"])))
    if "forgetron" in name:
        params.update(shrinking=bool(rng.random() < 0.8), phi_root=str(rng.choice(["feasible", "code"])))
        if name == "mforgetron":
            params["margin"] = str(rng.choice(["class_score", "multiclass"]))
    if "bogd" in name:
        params.update(decay=str(rng.choice(["every_example", "on_update"])), removal=str(rng.choice(["random", "oldest"])),
                      gamma=float(rng.choice([np.inf, 10.0, 0.5])), lam=float(rng.choice([0.0, 1e-3, 0.05])))
        if name == "mbogd":
            params["eta"] = float(rng.choice([0.2, 0.5]))
    if name == "norma_r":
        params.update(eta=float(rng.choice([0.03, 0.3])), lam=float(rng.choice([0.0, 0.03])), nu=float(rng.choice([0.2, 1.0])))
    return name, params


@pytest.mark.parametrize("seed", range(30))
def test_compiled_budget_folds_on_drawn_options(seed):
    name, params = random_case(seed)
    learner, X, y = setup(name, params, n=300, seed=seed)
    splits = 1 + seed % 5
    _, expected = reference_run(learner, X, y, splits)
    assert train(learner, X, y, splits)[1] == expected, (name, params)
