"""The compiled per-row folds (okl_core.learners.compiled) give the numpy fold's bytes.

Every learner whose fold is compiled is trained with the compiled fold and with the numpy
fold (``OKL_NO_JIT=1``) over several configurations and batch splits; states, online
scores and predictions must be byte-identical. While the compiled fold runs, the numpy
fold's per-row ``score`` raises, so a comparison cannot pass by running numpy twice.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import okl_core
import okl_core.learners.omkl
from okl_core.learners import compiled, multikernel, rules
from okl_core.learners.fogd import _ClassRows, _NormalizedClassRows
from okl_core.learners.rules import LinearRows, MulticlassHingeRule, NormalizedRows, RegressionRule, RegressionRuleConfig, rule_code

numba = pytest.importorskip("numba", reason="numba is not installed: only the numpy folds run")

from okl_core.learners import _jit_folds  # noqa: E402  (needs numba)

# (learner, parameters): every learner with a compiled fold, over several configurations.
CASES = [
    ("fogd", dict(n_components=40, sigma=1.0, eta=0.2)),
    ("fogd", dict(n_components=400, sigma=4.0, eta=0.002, seed=3)),
    ("mfogd", dict(n_components=40, sigma=1.0, eta=0.2, n_classes=3)),
    ("mfogd", dict(n_components=400, sigma=4.0, eta=0.005, n_classes=10, seed=7)),
    ("fogd_r", dict(n_components=40, sigma=1.0, eta=0.05, eps=0.01)),
    ("fogd_r", dict(n_components=200, sigma=2.0, eta=0.01, eps=0.01, threshold="squared")),
    ("fogd", dict(n_components=40, sigma=1.0, eta=0.3, step="adagrad")),
    ("mfogd", dict(n_components=400, sigma=4.0, eta=0.03, n_classes=10, seed=7, step="adagrad")),
    ("fogd_r", dict(n_components=200, sigma=2.0, eta=0.1, eps=0.01, threshold="squared", step="adagrad")),
    ("fogd", dict(n_components=40, sigma=1.0, eta=0.3, step="normalized")),
    ("mfogd", dict(n_components=400, sigma=4.0, eta=0.03, n_classes=10, seed=7, step="normalized")),
    ("fogd_r", dict(n_components=200, sigma=2.0, eta=0.1, eps=0.01, threshold="squared", step="normalized")),
    ("nogd", dict(sigma=2.0, budget=20, rank=10, eta=0.5)),
    ("nogd", dict(sigma=2.0, budget=20, rank=20, eta=0.5, switch="next_update")),
    ("mnogd", dict(sigma=2.0, budget=20, rank=8, eta=0.5, n_classes=10)),
    ("mnogd", dict(sigma=2.0, budget=15, rank=15, eta=0.5, n_classes=3, switch="next_update")),
    ("nogd_r", dict(sigma=2.0, budget=20, rank=10, eta=0.3, eps=0.01)),
    ("nogd_r", dict(sigma=2.0, budget=20, rank=5, eta=0.3, eps=0.001, threshold="squared", switch="next_update")),
]
D_IN = 64


def pixels(n, d=D_IN, seed=0):
    """Pixel-like rows (k/255, ~70% zero) and digit labels from a linear map."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d), dtype=np.float32)
    X[rng.random((n, d)) < 0.7] = 0.0
    X = (np.round(X * 255.0) / 255.0).astype(np.float32)
    return X, np.argmax(X @ rng.standard_normal((d, 10)), axis=1)


def labels(learner, digits):
    if learner.task == "binary":
        return np.where(digits % 2 == 0, 1.0, -1.0)
    if learner.task == "regression":
        return digits / 9.0
    return digits % learner.config.n_classes


def train_bytes(learner, X, y, splits):
    """States after each batch, online scores and final predictions, as bytes."""
    state, out = learner.init(), []
    for part in np.array_split(np.arange(len(y)), splits):
        state, scores = learner.update(state, X[part], y[part])
        out += [okl_core.model_bytes(learner, state), scores.tobytes()]
    return out + [np.ascontiguousarray(learner.predict(state, X[:50])).tobytes()]


def _forbid(monkeypatch):
    """Make the numpy fold's per-row scoring fail (the compiled fold must do the work)."""

    def fail(self, i):
        raise AssertionError("the numpy per-row fold ran where the compiled fold should have")

    for model in (LinearRows, _ClassRows, NormalizedRows, _NormalizedClassRows):  # the NAG models score on their own
        monkeypatch.setattr(model, "score", fail)


def both_folds(monkeypatch, name, params, n=600, splits=3, seed=0):
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(n, seed=seed)
    y = labels(learner, digits)
    monkeypatch.setenv("OKL_NO_JIT", "1")
    reference = train_bytes(learner, X, y, splits)
    monkeypatch.delenv("OKL_NO_JIT")
    return reference, learner, X, y


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("splits", [1, 4])
def test_compiled_fold_gives_the_numpy_folds_bytes(monkeypatch, name, params, splits):
    reference, learner, X, y = both_folds(monkeypatch, name, params, splits=splits)
    _forbid(monkeypatch)
    assert train_bytes(learner, X, y, splits) == reference


# The multi-kernel learners of okl_core.learners.omkl (the OKS family: test_compiled_oks.py):
# every rule option and graph shape, on the pixel rows; their numpy folds raise while the
# compiled ones run.
TWO = "gaussian:0.5,gaussian:2"
NINE = ",".join(f"gaussian:2^{k}" for k in range(-2, 7))
MK_CASES = [
    ("raker", dict(n_components=50)),
    ("raker", dict(n_components=32, kernels=TWO, eta=0.3, schedule="constant", lam=0.0)),
    ("omkl_gf", dict(n_components=50)),
    ("omkl_gf", dict(n_components=30, draws_per_node=3, selective_nodes=3, eta_e=0.5)),
    ("omkl_gf", dict(n_components=30, draws_per_node=2, freeze_below=0.05, freeze_on="example")),
    ("omkl_gf", dict(n_components=30, selective_nodes=2, freeze_below=0.05, freeze_on="example", frozen_q="marginal")),
    ("omkl_gf", dict(n_components=20, draws_per_node=1, schedule="constant", eta=0.2, eta_e=0.3)),
]


def _forbid_multikernel(monkeypatch):
    """Make the multi-kernel learners' numpy per-row steps fail."""
    def fail(*args, **kwargs):
        raise AssertionError("the numpy per-row fold ran where the compiled fold should have")

    for cls, method in ((okl_core.learners.omkl.Raker, "_fold"), (okl_core.learners.omkl.OMKLGF, "_step")):
        monkeypatch.setattr(cls, method, fail)


@pytest.mark.parametrize(("name", "params"), MK_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(MK_CASES)])
@pytest.mark.parametrize("splits", [1, 4])
def test_compiled_multikernel_folds_give_the_numpy_folds_bytes(monkeypatch, name, params, splits):
    reference, learner, X, y = both_folds(monkeypatch, name, params, splits=splits)
    _forbid_multikernel(monkeypatch)
    assert train_bytes(learner, X, y, splits) == reference


def _merged_then_trained(learner, X, y):
    """Two shards trained apart, merged, the merge trained on: states and scores as bytes."""
    halves = np.array_split(np.arange(len(y)), 3)
    shards = [learner.update(learner.init(), X[part], y[part]) for part in halves[:2]]
    merged = learner.merge([state for state, _ in shards])
    final, scores = learner.update(merged, X[halves[2]], y[halves[2]])
    return [okl_core.model_bytes(learner, s) for s in (shards[0][0], shards[1][0], merged, final)] + [scores.tobytes()]


@pytest.mark.parametrize("name", ["raker", "omkl_gf"])
def test_compiled_multikernel_folds_after_a_merge(monkeypatch, name):
    learner = okl_core.make_learner(name, n_inputs=D_IN, n_components=40)
    X, digits = pixels(600, seed=2)
    y = labels(learner, digits)
    monkeypatch.setenv("OKL_NO_JIT", "1")
    reference = _merged_then_trained(learner, X, y)
    monkeypatch.delenv("OKL_NO_JIT")
    _forbid_multikernel(monkeypatch)
    assert _merged_then_trained(learner, X, y) == reference


@pytest.mark.parametrize(("module", "name", "params"), [
    ("omkl", "omkl_gf", dict(n_components=40, draws_per_node=3, selective_nodes=2)),
])
def test_compiled_fold_without_guessed_features_stops_and_resumes(monkeypatch, module, name, params):
    # No features computed ahead: the fold stops at every row for the kernel it drew, the
    # driver computes that kernel for the rest of the block, and the bytes do not change.
    reference, learner, X, y = both_folds(monkeypatch, name, params, splits=2)
    original = multikernel.fold_on_demand
    stops = []

    def no_guess(bank, omega, X, guess, run, block_bytes=8 * 2**20):
        def counted(*args):
            stops.append(run(*args))
            return stops[-1]

        original(bank, omega, X, lambda start, stop: np.zeros((stop - start, omega.shape[0]), dtype=bool), counted, block_bytes=40_000)

    monkeypatch.setattr(getattr(okl_core.learners, module), "fold_on_demand", no_guess)
    _forbid_multikernel(monkeypatch)
    assert train_bytes(learner, X, y, 2) == reference
    assert sum(j >= 0 for _, j in stops) > 2


def test_feature_blocks_are_the_per_row_features_bit_for_bit():
    learner = okl_core.make_learner("raker", n_inputs=D_IN, n_components=100, kernels=NINE)
    X, _ = pixels(300, seed=4)
    bank, omega = learner.bank, learner.bank.stack()
    rows = np.stack([bank.rows(omega, x) for x in X])
    blocks = list(bank.row_blocks(omega, X, block_bytes=100_000))
    assert len(blocks) > 1 and np.concatenate([Z for _, Z in blocks]).tobytes() == rows.tobytes()
    block = multikernel.FeatureBlock(bank, omega, X)
    need = np.random.default_rng(0).random(block.have.shape) < 0.3
    block.fill(need)
    assert np.array_equal(block.have, need) and block.Z[need].tobytes() == rows[need].tobytes()


def test_numpy_fold_is_forced_by_okl_no_jit(monkeypatch):
    monkeypatch.setenv("OKL_NO_JIT", "1")
    assert compiled.kernels() is None
    _forbid(monkeypatch)
    learner = okl_core.make_learner("fogd", n_inputs=D_IN, n_components=20)
    X, digits = pixels(20)
    with pytest.raises(AssertionError, match="numpy per-row fold ran"):
        learner.update(learner.init(), X, labels(learner, digits))


def test_without_numba_the_numpy_fold_runs_after_one_warning(monkeypatch):
    learner = okl_core.make_learner("mfogd", n_inputs=D_IN, n_components=50, n_classes=10, eta=0.05)
    X, digits = pixels(300)
    monkeypatch.setenv("OKL_NO_JIT", "1")
    reference = train_bytes(learner, X, digits, 2)
    monkeypatch.delenv("OKL_NO_JIT")
    monkeypatch.setattr(compiled, "_loaded", [])
    monkeypatch.setitem(sys.modules, "okl_core.learners._jit_folds", None)  # import fails
    monkeypatch.delattr(okl_core.learners, "_jit_folds")
    with pytest.warns(RuntimeWarning, match="compiled folds unavailable.*numpy folds"):
        first = train_bytes(learner, X, digits, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = train_bytes(learner, X, digits, 2)
    assert first == again == reference


def test_rule_codes_cover_the_rules_and_only_them():
    rule = MulticlassHingeRule(type("C", (), {"eta": 0.5, "n_classes": 4})())
    assert rule_code(rule) == rule_code(rule.rival) == (rules.MULTICLASS, 0.5, 0.0)
    config = RegressionRuleConfig(eta=0.1, eps=0.2, threshold="squared")
    assert rule_code(RegressionRule(config)) == (rules.SQUARED, 0.1, 0.2)

    class Shifted(RegressionRule):  # changes the decision: must not be compiled as the parent
        def __call__(self, f, y):
            return super().__call__(f + 1.0, y)

    assert rule_code(Shifted(config)) is None
    assert rule_code(lambda f, y: None) is None


@pytest.mark.parametrize("seed", range(5))
def test_compiled_rival_is_the_rules_rival_with_ties_nan_and_inf(seed):
    rng = np.random.default_rng(seed)
    rule = MulticlassHingeRule(type("C", (), {"eta": 0.1, "n_classes": 5})())
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, 0.5])
    for _ in range(400):
        f = rng.integers(-2, 3, 5).astype(np.float64) / 2.0  # ties and margins of exactly 1
        hit = rng.random(5) < 0.15
        f[hit] = rng.choice(specials, hit.sum())
        label = int(rng.integers(0, 5))
        with np.errstate(invalid="ignore"):
            expected = rule.rival(f.copy(), label)
        assert _jit_folds.rival(f, label) == (-1 if expected is None else expected), (f, label)


@pytest.mark.parametrize("kind", [rules.HINGE, rules.PERCEPTRON, rules.ABSOLUTE, rules.SQUARED])
def test_compiled_scalar_rules_match_the_rules_at_the_thresholds(kind):
    config = type("C", (), {"eta": 0.25, "eps": 0.25, "threshold": "squared" if kind == rules.SQUARED else "absolute"})()
    rule = {rules.HINGE: rules.BinaryHingeRule, rules.PERCEPTRON: rules.PerceptronRule}.get(kind, RegressionRule)(config)
    for f in [-1.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, np.nan]:
        for y in ([-1.0, 1.0] if kind in (rules.HINGE, rules.PERCEPTRON) else [0.0, 0.5, 1.0]):
            expected = rule(np.float64(f), np.float64(y))
            update, coef = _jit_folds.scalar_coefficient(*rule.code, f, y)
            assert update == (expected is not None) and (not update or coef == expected), (f, y)


FRESH_PROCESS = """
import json, os, sys, numpy as np, okl_core
from okl_core.learners import compiled
if sys.argv[1] == "unpinned":
    compiled.pin_new_libraries = lambda: None
rng = np.random.default_rng(0)
X = rng.random((300, 784), dtype=np.float32)
X[rng.random((300, 784)) < 0.8] = 0.0
X = (np.round(X * 255) / 255).astype(np.float32)
digits = np.argmax(X @ rng.standard_normal((784, 10)), axis=1)
out = {}
for name in ("fogd", "mfogd"):
    learner = okl_core.make_learner(name, n_inputs=784, n_components=8192, eta=0.5, **({"n_classes": 10} if name == "mfogd" else {}))
    y = digits if name == "mfogd" else np.where(digits % 2 == 0, 1.0, -1.0)
    for mode in ("compiled", "numpy"):  # the compiled fold first: it loads scipy's BLAS inside the pin
        os.environ["OKL_NO_JIT"] = "1" if mode == "numpy" else "0"
        state, scores = learner.update(learner.init(), X, y)
        out[name + "/" + mode] = okl_core.model_bytes(learner, state).hex()[-64:] + scores.tobytes().hex()[-64:]
print(json.dumps(out))
"""


def _fresh_process(mode):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "OKL_NO_JIT"}
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, mode], env=env, capture_output=True, text=True, check=True)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: (out[name + "/compiled"], out[name + "/numpy"]) for name in ("fogd", "mfogd")}


@pytest.mark.slow
def test_first_use_in_a_fresh_process_pins_scipys_blas():
    # 2 x 8,192 features: OpenBLAS threads a ddot this long (and mfogd's dgemv), so a scipy
    # BLAS loaded by the compiled fold's first call and left at its default thread count
    # would round differently from numpy's pinned one.
    for name, (compiled_bytes, numpy_bytes) in _fresh_process("pinned").items():
        assert compiled_bytes == numpy_bytes, name


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS runs one thread on one core: nothing to pin")
def test_without_pinning_the_new_blas_the_first_use_would_differ():
    # The control of the test above: it is large enough to fail without the pin.
    results = _fresh_process("unpinned")
    assert any(c != n for c, n in results.values())


WARM_UP = """
import json, sys
import numpy as np
import okl_core
from okl_core.learners import _jit_folds, compiled
def loaded():
    return {name: [str(s) for s in f.signatures] for name, f in vars(_jit_folds).items() if hasattr(f, "signatures") and f.signatures}
learner = okl_core.make_learner(sys.argv[1], n_inputs=64, n_components=50, n_classes=10, eta=0.05)
before = loaded()
compiled.warm_up(learner)
warmed = loaded()
rng = np.random.default_rng(0)
learner.update(learner.init(), rng.random((300, 64), dtype=np.float32), rng.integers(0, 10, 300))
print(json.dumps([before, warmed, loaded()]))
"""


def test_warm_up_loads_the_compiled_fold_that_a_batch_then_uses():
    # A worker warms its learner at start: the first real batch must then find every compiled
    # kernel it calls already loaded (same signatures), and none may have been loaded before.
    env = {k: v for k, v in os.environ.items() if k != "OKL_NO_JIT"}
    result = subprocess.run([sys.executable, "-c", WARM_UP, "mfogd"], env=env, capture_output=True, text=True, check=True)
    before, warmed, after = json.loads(result.stdout.strip().splitlines()[-1])
    assert before == {} and "fold_multiclass" in warmed
    assert after == warmed


# Learners whose update is not a per-row loop of scalar decisions, so there is nothing to
# compile: DSG learns mini-batches (its cost is the feature GEMM + cos), and the second-order
# regressors' cost is their matrix algebra (block inverses, Cholesky, rank-one updates).
NOT_ROW_BY_ROW = {"dsg", "kernel_awv", "krr", "pkawv_nystrom", "pkawv_taylor"}


@pytest.mark.parametrize("name", sorted(set(okl_core.learner_names()) - NOT_ROW_BY_ROW))
def test_every_row_by_row_learner_runs_a_compiled_fold(name, monkeypatch):
    """The registry's row-by-row learners (every one but NOT_ROW_BY_ROW) call a compiled fold
    of a module of ``compiled.FOLD_MODULES`` in ``update``: a learner added later without one fails here."""
    if compiled.kernels() is None:
        pytest.skip("compiled folds disabled (OKL_NO_JIT)")
    called = []
    for module in map(compiled.folds, compiled.FOLD_MODULES):
        for attribute in dir(module):
            function = getattr(module, attribute)
            if attribute.startswith("fold_") and isinstance(function, numba.core.registry.CPUDispatcher):
                monkeypatch.setattr(module, attribute, lambda *a, _f=function, _n=attribute: called.append(_n) or _f(*a))
    params = dict(okl_core.learner_class(name).conformance_params)
    learner = okl_core.make_learner(name, n_inputs=6, **params)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    labels = {
        "binary": np.where(rng.random(120) < 0.5, -1.0, 1.0),
        "multiclass": rng.integers(0, getattr(learner.config, "n_classes", 2), 120),
        "regression": rng.normal(size=120),
    }
    learner.update(learner.init(), X, labels[learner.task])
    assert called, f"{name}: update ran no compiled fold"
