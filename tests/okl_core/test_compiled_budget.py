"""The compiled folds of the budget learners (RBP, Forgetron, BOGD, NORMA) give the numpy fold's bytes.

Each learner is trained with the compiled fold and with the numpy loop of
``_BudgetLearner.update`` (``OKL_NO_JIT=1``) over its options, with budgets small enough that
the set fills and is maintained (removals, shrinking, rescaling) inside a batch; states,
online scores and predictions must be byte-identical for several batch splits, and a run
that switches between the two folds mid-stream must equal either. While the compiled fold
runs, the numpy loop's kernel row raises, so a comparison cannot pass by running numpy twice.
"""

import numpy as np
import pytest

import okl_core
from okl_core.learners import budget
from okl_core.learners.budget import BudgetSet, squared_norms
from tests.okl_core.real_data import a9a, mnist_test
from tests.okl_core.test_compiled_folds import labels, pixels

numba = pytest.importorskip("numba", reason="numba is not installed: only the numpy folds run")

from okl_core.learners import _jit_folds  # noqa: E402  (needs numba)

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


def train(learner, X, y, splits, state=None):
    """The state after the batches, and per batch the state's and the online scores' bytes."""
    state, out = state if state is not None else learner.init(), []
    for part in np.array_split(np.arange(len(y)), splits):
        state, scores = learner.update(state, X[part], y[part])
        out += [okl_core.model_bytes(learner, state), scores.tobytes()]
    return state, out + [np.ascontiguousarray(learner.predict(state, X[:50])).tobytes()]


def forbid_numpy(monkeypatch):
    """Make the numpy loop's kernel row fail (the compiled fold must do the work)."""

    def fail(self, x):
        raise AssertionError("the numpy per-row loop ran where the compiled fold should have")

    monkeypatch.setattr(BudgetSet, "kernel_row", fail)


def numpy_run(monkeypatch, learner, X, y, splits):
    monkeypatch.setenv("OKL_NO_JIT", "1")
    try:
        return train(learner, X, y, splits)
    finally:
        monkeypatch.delenv("OKL_NO_JIT")


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
def test_compiled_budget_fold_gives_the_numpy_loops_bytes(monkeypatch, name, params, splits):
    learner, X, y = setup(name, params)
    reference_state, reference = numpy_run(monkeypatch, learner, X, y, splits)
    assert_maintained(learner, reference_state, len(y))
    forbid_numpy(monkeypatch)
    assert train(learner, X, y, splits)[1] == reference


@pytest.mark.parametrize(("name", "params"), CASES, ids=IDS)
def test_switching_folds_mid_stream_stops_and_resumes(monkeypatch, name, params):
    # Numpy for the first 130 rows, compiled for the rest (and the other way round): the bytes of one fold.
    learner, X, y = setup(name, params, seed=1)
    _, reference = numpy_run(monkeypatch, learner, X, y, 1)
    monkeypatch.setenv("OKL_NO_JIT", "1")
    first, _ = train(learner, X[:130], y[:130], 2)
    monkeypatch.delenv("OKL_NO_JIT")
    compiled_first, _ = train(learner, X[:130], y[:130], 3)
    assert okl_core.model_bytes(learner, first) == okl_core.model_bytes(learner, compiled_first)
    monkeypatch.setenv("OKL_NO_JIT", "1")
    numpy_second, _ = train(learner, X[130:], y[130:], 2, state=compiled_first)
    monkeypatch.delenv("OKL_NO_JIT")
    with monkeypatch.context() as m:
        forbid_numpy(m)
        compiled_second, _ = train(learner, X[130:], y[130:], 3, state=first)
    for state in (numpy_second, compiled_second):
        assert okl_core.model_bytes(learner, state) == reference[-3]


def test_forgetron_cases_shrink_and_grow():
    # The Forgetron cases exercise phi < 1 (published rule) and phi > 1 (the code's root).
    learner, X, y = setup("forgetron", dict(sigma=2.0, budget=15))
    phis, original = [], budget.forgetron_shrink

    def spy(*args, **kwargs):
        phis.append(original(*args, **kwargs))
        return phis[-1]

    with pytest.MonkeyPatch.context() as m:
        m.setenv("OKL_NO_JIT", "1")
        m.setattr(budget, "forgetron_shrink", spy)
        train(learner, X, y, 1)
        assert min(phis) < 1.0
        phis.clear()
        train(okl_core.make_learner("forgetron", n_inputs=D_IN, sigma=2.0, budget=15, phi_root="code"), X, y, 1)
        assert max(phis) > 1.0


def test_bogd_bound_scales_the_coefficients():
    learner, X, y = setup("bogd", dict(sigma=2.0, budget=15, eta=0.5, lam=0.01, gamma=1.0))
    state, _ = train(learner, X, y, 1)
    assert np.max(np.abs(state.alpha)) <= 0.5 * 1.0


def test_subclass_that_changes_the_rule_runs_the_numpy_loop(monkeypatch):
    class Shifted(budget.RBP):
        def _learn(self, work, x32, x64, y, k, f, t, u):
            super()._learn(work, x32, x64, y, k, f - 0.5, t, u)

    learner = Shifted(budget.RBPConfig(n_inputs=D_IN, sigma=2.0, budget=15))
    X, digits = pixels(200, D_IN)
    y = labels(learner, digits)
    monkeypatch.setenv("OKL_NO_JIT", "1")
    reference = train(learner, X, y, 2)[1]
    monkeypatch.delenv("OKL_NO_JIT")
    assert train(learner, X, y, 2)[1] == reference
    assert train(okl_core.make_learner("rbp", n_inputs=D_IN, sigma=2.0, budget=15), X, y, 2)[1] != reference


def test_compiled_squared_norm_is_squared_norms_bit_for_bit():
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((200, 123)) * rng.random((200, 123)) ** 4).astype(np.float32)
    rows, columns = np.zeros((200, 123), np.float32), np.zeros((123, 200))
    sq, A, stamp, coef = np.zeros(200), np.zeros((200, 1)), np.zeros(200, np.int64), np.zeros(1)
    for i in range(200):
        _jit_folds.support_put(X, i, X[i].astype(np.float64), i, rows, columns, sq, A, coef, stamp, i)
    assert sq.tobytes() == squared_norms(X.astype(np.float64)).tobytes()
    assert all(squared_norms(r[None, :])[0] == s for r, s in zip(X.astype(np.float64), sq))


@pytest.mark.parametrize("seed", range(20))
def test_compiled_argmax_is_numpys_with_ties_nan_and_inf(seed):
    rng = np.random.default_rng(seed)
    f = rng.choice([0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], size=rng.integers(2, 6), p=[0.3, 0.3, 0.2, 0.05, 0.1, 0.05])
    assert _jit_folds.argmax_skipping(f, -1) == int(np.argmax(f))
    for skip in range(len(f)):
        masked = f.copy()
        masked[skip] = -np.inf
        assert _jit_folds.argmax_skipping(f, skip) == int(np.argmax(masked))


@pytest.mark.parametrize(("sigma", "mu", "damage", "mistakes"), [
    (1.0, 0.2, 3.0, 10), (1.0, 0.9, 4.6, 10), (0.5, -0.3, 0.0, 1), (2.0, 1.5, 6.0, 14), (0.7, 0.35, 1.0, 3),
    (1.0, float("nan"), 2.0, 5), (0.0, 0.0, 0.0, 1),
])
@pytest.mark.parametrize("root", ["feasible", "code"])
def test_compiled_phi_is_forgetron_shrink(sigma, mu, damage, mistakes, root):
    expected = budget.forgetron_shrink(sigma, mu, damage, mistakes, root)
    got = _jit_folds.forgetron_phi(sigma, mu, damage, mistakes, budget.FORGETRON_RATIO, root == "code")
    assert np.array(got).tobytes() == np.array(expected).tobytes()


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
def test_compiled_budget_folds_on_real_data_at_the_papers_budget(monkeypatch, name, params):
    learner = okl_core.make_learner(name, n_inputs=784 if "n_classes" in params else 123, budget=100, **params)
    if learner.task == "multiclass":
        X, y = mnist_test()
        X, y = X[:2000], y[:2000]
    else:
        X, y = a9a()
        X, y = X[:3000], y[:3000].astype(np.float64)
    reference_state, reference = numpy_run(monkeypatch, learner, X, y, 3)
    assert_maintained(learner, reference_state, len(y))
    forbid_numpy(monkeypatch)
    assert train(learner, X, y, 3)[1] == reference


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
def test_compiled_budget_folds_on_drawn_options(monkeypatch, seed):
    name, params = random_case(seed)
    learner, X, y = setup(name, params, n=300, seed=seed)
    splits = 1 + seed % 5
    _, reference = numpy_run(monkeypatch, learner, X, y, splits)
    forbid_numpy(monkeypatch)
    assert train(learner, X, y, splits)[1] == reference, (name, params)
