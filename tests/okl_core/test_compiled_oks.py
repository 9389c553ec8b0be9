"""The compiled folds of online kernel selection give the numpy reference fold's bytes.

``okl_core.learners.oks._folds`` is the one implementation of ``oks``, ``oks_pp``, ``ioks``,
``rf_oks_pp`` and ``rf_ioks``; ``tests/okl_core/reference/oks.py`` is the numpy per-row fold it
replaced. Each learner is trained by ``update`` and by the reference over every loss, rule
option, kernel kind and batch split: states (as model files), their distributions ``(q, p)``,
online scores and predictions must be byte-identical.
"""

import math

import numpy as np
import pytest

import okl_core
from okl_core.learners import compiled
from okl_core.learners.oks import learners as oks_learners
from okl_core.learners.oks import tsallis_step
from tests.okl_core.real_data import a9a
from tests.okl_core.reference import oks as reference
from tests.okl_core.test_compiled_folds import fold_on_demand_without_guesses, labels, pixels

pytest.importorskip("numba", reason="numba is not installed")
D_IN = 64
TWO = "gaussian:0.5,gaussian:2"
NINE = ",".join(f"gaussian:2^{k}" for k in range(-2, 7))
MIXED = "gaussian:1,laplacian:8,cauchy:2"
CASES = [
    ("rf_oks_pp", dict(n_components=64)),
    ("rf_oks_pp", dict(n_components=32, tuning="released_code")),
    ("rf_oks_pp", dict(n_components=32, loss="square", kernels=NINE, norm_bound=2.0)),
    ("rf_ioks", dict(n_components=64, horizon=600)),
    ("rf_ioks", dict(n_components=32, loss="absolute", horizon=2000)),
    ("rf_ioks", dict(n_components=32, loss="square", kernels=NINE, horizon=600, loss_max=2.0)),
    ("rf_ioks", dict(n_components=32, horizon=600, loss_cap=False)),
    # The kernel versions (growing support sets): every loss, kernel kind and projection.
    ("oks", dict(horizon=600)),
    ("oks", dict(horizon=2000, loss="absolute", kernels=MIXED)),
    ("oks", dict(horizon=600, loss="square", kernels=TWO, step_scale=3.0)),
    ("oks_pp", dict()),
    ("oks_pp", dict(tuning="released_code", kernels=MIXED)),
    ("oks_pp", dict(loss="square", kernels=NINE, norm_bound=0.5)),
    ("ioks", dict(horizon=600)),
    ("ioks", dict(horizon=2000, loss="absolute", kernels=MIXED)),
    ("ioks", dict(horizon=600, loss="square", kernels=NINE, loss_max=2.0, norm_bound=0.5)),
    ("ioks", dict(horizon=600, loss_cap=False, kernels=MIXED)),
    ("oks", dict(horizon=600, predict_with="mixture")),
    ("rf_oks_pp", dict(n_components=32, predict_with="mixture")),
]


class Reference:
    """``learner``'s update, distributions and predict by the numpy reference fold."""

    def __init__(self, learner):
        self.learner = learner

    def update(self, state, X, y):
        return reference.reference_update(self.learner, state, X, y)

    def distributions(self, state):
        return reference.distributions(self.learner, state)

    def predict(self, state, X):
        return reference.reference_predict(self.learner, state, X)


def train_bytes(learner, fold, X, y, splits):
    """With ``fold`` (``learner`` itself, or its :class:`Reference`): the state after each batch
    (its model file), its ``(q, p)``, the online scores and the final predictions, as bytes."""
    state, out = learner.init(), []
    for part in np.array_split(np.arange(len(y)), splits):
        state, scores = fold.update(state, X[part], y[part])
        out += [okl_core.model_bytes(learner, state), *(a.tobytes() for a in fold.distributions(state)), scores.tobytes()]
    return out + [np.ascontiguousarray(fold.predict(state, X[:50])).tobytes()]


def both(name, params, n=600, splits=3, seed=0):
    """``(compiled, reference)`` bytes of ``name`` on ``n`` pixel rows in ``splits`` batches."""
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(n, seed=seed)
    y = labels(learner, digits)
    return train_bytes(learner, learner, X, y, splits), train_bytes(learner, Reference(learner), X, y, splits)


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("splits", [1, 4])
def test_compiled_folds_give_the_reference_folds_bytes(name, params, splits):
    got, want = both(name, params, splits=splits)
    assert got == want


def _merged_then_trained(learner, update, X, y):
    """Two shards trained apart, merged, the merge trained on: states and scores as bytes."""
    halves = np.array_split(np.arange(len(y)), 3)
    shards = [update(learner.init(), X[part], y[part]) for part in halves[:2]]
    merged = learner.merge([state for state, _ in shards])
    final, scores = update(merged, X[halves[2]], y[halves[2]])
    return [okl_core.model_bytes(learner, s) for s in (shards[0][0], shards[1][0], merged, final)] + [scores.tobytes()]


@pytest.mark.parametrize("name", ["rf_oks_pp", "rf_ioks"])
def test_compiled_folds_after_a_merge(name):
    params = {"rf_ioks": dict(horizon=600)}.get(name, {})
    learner = okl_core.make_learner(name, n_inputs=D_IN, n_components=40, **params)
    X, digits = pixels(600, seed=2)
    y = labels(learner, digits)
    assert _merged_then_trained(learner, learner.update, X, y) == _merged_then_trained(learner, Reference(learner).update, X, y)


@pytest.mark.parametrize(("name", "params"), [("rf_oks_pp", dict(n_components=40)), ("rf_ioks", dict(n_components=40, horizon=600))])
def test_compiled_fold_without_guessed_features_stops_and_resumes(monkeypatch, name, params):
    # No features computed ahead: the fold stops at every row for the kernel it drew, the
    # driver computes that kernel for the rest of the block, and the bytes do not change.
    stops = []
    no_guess = fold_on_demand_without_guesses(stops)

    monkeypatch.setattr(oks_learners, "fold_on_demand", no_guess)
    got, want = both(name, params, splits=2)
    assert got == want
    assert sum(j >= 0 for _, j in stops) > 2


A9A_KERNEL_VERSIONS = [("oks", dict(horizon=32561)), ("oks_pp", dict()), ("ioks", dict(horizon=32561))]


@pytest.mark.parametrize(("name", "params", "rows", "splits"), [
    ("rf_oks_pp", dict(n_components=400), 1500, 3),
    ("rf_ioks", dict(n_components=400, horizon=32561), 1500, 3),
    ("rf_oks_pp", dict(n_components=400, tuning="released_code"), 1500, 3),
    # The kernel versions: support sets growing to the 1,500 rows; then the paper's run, all
    # 32,561 rows in batches of ~4,000 (sets of up to ~20,000 rows; minutes for the reference).
    *[(name, params, 1500, 3) for name, params in A9A_KERNEL_VERSIONS],
    *[pytest.param(name, params, None, 8, marks=pytest.mark.slow) for name, params in A9A_KERNEL_VERSIONS],
])
def test_compiled_folds_on_a9a_at_the_papers_size(name, params, rows, splits):
    # a9a rows (d = 123), the six kernels of spec/oks.md, D = 400 for the random features.
    X, y = a9a()
    X, y = X[:rows], y[:rows].astype(np.float64)
    learner = okl_core.make_learner(name, n_inputs=123, **params)
    assert train_bytes(learner, learner, X, y, splits) == train_bytes(learner, Reference(learner), X, y, splits)


SUPPORT_FOLDS = {"oks": "fold_oks", "oks_pp": "fold_oks_pp", "ioks": "fold_ioks"}


@pytest.mark.parametrize(("name", "params"), [
    ("oks", dict(horizon=900, loss="square", kernels=MIXED)),
    ("oks_pp", dict(loss="square", kernels=TWO, norm_bound=0.5)),
    ("ioks", dict(horizon=900, loss="absolute", kernels=MIXED, norm_bound=0.3)),
])
def test_compiled_support_folds_grow_project_and_resume(monkeypatch, name, params):
    # The fold stops before a row whose drawn kernel's buffers are full; the driver doubles
    # them and resumes at that row. Three batches: the later ones start from a state's rows.
    jit = compiled.folds("okl_core.learners.oks._folds")
    stops = []
    original = getattr(jit, SUPPORT_FOLDS[name])
    monkeypatch.setattr(jit, SUPPORT_FOLDS[name], lambda *args: stops.append(original(*args)) or stops[-1])
    got, want = both(name, params, n=900, splits=3)
    assert got == want
    assert sum(need >= 0 for _, need in stops) > 3 and stops[-1] == (300, -1)
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(900)
    state, _ = learner.update(learner.init(), X, labels(learner, digits))
    if name != "oks":  # projected onto ||f_i|| <= U at least once (OKS does not project)
        assert np.any(state.sq_norm == learner.config.radius**2)


@pytest.mark.parametrize("name", ["oks", "oks_pp", "ioks"])
def test_compiled_support_folds_stop_at_the_cap_as_the_reference(name):
    # Logistic gradients are never 0: every row adds a support vector, so 120 rows fit
    # max_support = 120 and the 121st raises the cap's error, in either fold.
    learner = okl_core.make_learner(name, n_inputs=D_IN, max_support=120, **({} if name == "oks_pp" else {"horizon": 200}))
    X, digits = pixels(121, seed=5)
    y = labels(learner, digits)
    outcomes = []
    for update in (learner.update, Reference(learner).update):
        state, _ = update(learner.init(), X[:60], y[:60])
        full, _ = update(state, X[60:120], y[60:120])
        with pytest.raises(okl_core.CapacityError, match="max_support=120") as error:
            update(state, X[60:], y[60:])
        outcomes.append((okl_core.model_bytes(learner, full), int(full.sv_count.sum()), str(error.value)))
    assert outcomes[0] == outcomes[1] and outcomes[0][1] == 120


def test_compiled_paper_losses_are_the_references_at_the_edges():
    jit = compiled.folds("okl_core.learners.oks._folds")
    values = [-800.0, -40.0, -1.0, -0.5, -1e-300, 0.0, 1e-300, 0.25, 1.0, 3.0, 40.0, 800.0, math.inf, -math.inf, math.nan]
    for name, kind in okl_core.learners.oks.LOSS_CODES.items():
        targets = [-1.0, 1.0] if name == "logistic" else [-1.0, 0.0, 0.5, 1.0]
        for f in values:
            for y in targets:
                got = np.array(jit.paper_loss(kind, f, y))
                want = np.array(reference.paper_loss(name, f, y))
                assert got.tobytes() == want.tobytes(), (name, f, y, got, want)


@pytest.mark.parametrize("seed", range(3))
def test_compiled_tsallis_step_is_the_references(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        K = int(rng.integers(2, 9))
        q = np.maximum(rng.dirichlet(np.full(K, 0.3)), 1e-12)
        eta = rng.uniform(1e-4, 0.5, size=K)
        c_tilde = np.zeros(K)
        c_tilde[rng.integers(K)] = rng.uniform(0, 1) / rng.uniform(0.01, 1)
        got, mu = tsallis_step(q, eta, c_tilde)
        want, mu_want = reference.tsallis_step(q, eta, c_tilde)
        assert got.tobytes() == want.tobytes() and mu == mu_want
