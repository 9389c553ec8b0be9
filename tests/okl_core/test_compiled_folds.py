"""The compiled per-row folds (okl_core.learners.compiled) give the numpy references' bytes.

Every learner whose fold is compiled is trained with its compiled folds and with the numpy
reference of them (tests/okl_core/reference; OKS: oks.py's numpy steps) over several
configurations and batch splits; states, online scores and predictions must be
byte-identical. Without numba, or with numba's ``NUMBA_DISABLE_JIT=1``, the same fold code
runs as Python and gives the same bytes.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import okl_core
import okl_core.learners.omkl
import okl_core.learners.oks
from okl_core.learners import _jit_folds, compiled, multikernel, rules
from okl_core.learners.rules import MulticlassHingeRule, RegressionRule
from tests.okl_core.real_data import a9a
from tests.okl_core.reference.folds import use_reference_folds

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


def fold_on_demand_without_guesses(stops):
    """:func:`multikernel.fold_on_demand` with no features guessed ahead and small blocks, recording
    each stop of the fold in ``stops``: the driver's stop-and-resume path on every row."""
    original = multikernel.fold_on_demand

    def no_guess(bank, omega, X, guess, run, block_bytes=8 * 2**20):
        def counted(*args):
            stops.append(run(*args))
            return stops[-1]

        original(bank, omega, X, lambda start, stop: np.zeros((stop - start, omega.shape[0]), dtype=bool), counted, block_bytes=40_000)

    return no_guess


def use_numpy(monkeypatch, name):
    """Make learner ``name`` run the numpy reference folds of tests/okl_core/reference."""
    use_reference_folds(monkeypatch)


def both_folds(monkeypatch, name, params, n=600, splits=3, seed=0):
    """The reference's bytes of ``train_bytes`` on pixel rows, the learner and its rows."""
    learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
    X, digits = pixels(n, seed=seed)
    y = labels(learner, digits)
    with monkeypatch.context() as m:
        use_numpy(m, name)
        reference = train_bytes(learner, X, y, splits)
    return reference, learner, X, y


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("splits", [1, 4])
def test_compiled_fold_gives_the_references_bytes(monkeypatch, name, params, splits):
    reference, learner, X, y = both_folds(monkeypatch, name, params, splits=splits)
    assert train_bytes(learner, X, y, splits) == reference


# The multi-kernel learners of okl_core.learners.omkl (the OKS family: test_compiled_oks.py):
# every rule option and graph shape, on the pixel rows.
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


@pytest.mark.parametrize(("name", "params"), MK_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(MK_CASES)])
@pytest.mark.parametrize("splits", [1, 4])
def test_compiled_multikernel_folds_give_the_references_bytes(monkeypatch, name, params, splits):
    reference, learner, X, y = both_folds(monkeypatch, name, params, splits=splits)
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
    with monkeypatch.context() as m:
        use_numpy(m, name)
        reference = _merged_then_trained(learner, X, y)
    assert _merged_then_trained(learner, X, y) == reference


@pytest.mark.parametrize(("module", "name", "params"), [
    ("omkl", "omkl_gf", dict(n_components=40, draws_per_node=3, selective_nodes=2)),
])
def test_compiled_fold_without_guessed_features_stops_and_resumes(monkeypatch, module, name, params):
    # No features computed ahead: the fold stops at every row for the kernel it drew, the
    # driver computes that kernel for the rest of the block, and the bytes do not change.
    reference, learner, X, y = both_folds(monkeypatch, name, params, splits=2)
    stops = []
    no_guess = fold_on_demand_without_guesses(stops)

    monkeypatch.setattr(getattr(okl_core.learners, module), "fold_on_demand", no_guess)
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


AS_PYTHON = """
import hashlib, json, sys, warnings
if sys.argv[1] == "no-numba":
    sys.modules["numba"] = None  # import numba fails
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import okl_core
    from tests.okl_core.test_compiled_folds import D_IN, labels, pixels, train_bytes
    out = {}
    for name, params in json.loads(sys.argv[2]):
        learner = okl_core.make_learner(name, n_inputs=D_IN, **params)
        X, digits = pixels(150, seed=1)
        out[name] = hashlib.sha256(b"".join(train_bytes(learner, X, labels(learner, digits), 2))).hexdigest()
print(json.dumps([out, [str(w.message) for w in caught if w.category is RuntimeWarning]]))
"""
AS_PYTHON_CASES = [
    ("fogd", dict(n_components=40, sigma=1.0, eta=0.3, step="normalized")),
    ("mfogd", dict(n_components=40, sigma=1.0, eta=0.2, n_classes=3, step="adagrad")),
    ("mkernel_ogd", dict(sigma=2.0, eta=0.5, n_classes=3)),
    ("nogd_r", dict(sigma=2.0, budget=20, rank=10, eta=0.3, eps=0.01)),
    ("omkl_gf", dict(n_components=20, selective_nodes=2)),
    ("raker", dict(n_components=20)),
]


def _as_python(mode, env=None):
    """(learner -> sha256 of its bytes, RuntimeWarnings) of :data:`AS_PYTHON` in a fresh process."""
    result = subprocess.run([sys.executable, "-c", AS_PYTHON, mode, json.dumps(AS_PYTHON_CASES)], capture_output=True, text=True,
                            check=True, env={**os.environ, **(env or {})}, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_without_numba_the_same_folds_run_as_python_after_one_warning():
    (python, warned), (compiled_bytes, quiet) = _as_python("no-numba"), _as_python("numba")
    assert python == compiled_bytes and quiet == []
    assert len(warned) == 1 and re.match(r"okl: numba unavailable \((ModuleNotFound|Import)Error: ", warned[0])
    assert warned[0].endswith("): folds run as plain Python, same code, slower")


def test_numbas_disable_jit_runs_the_folds_as_python_with_the_same_bytes():
    (python, warned), (compiled_bytes, _) = _as_python("numba", {"NUMBA_DISABLE_JIT": "1"}), _as_python("numba")
    assert python == compiled_bytes and warned == []


def test_the_compile_cache_is_keyed_by_every_fold_source(tmp_path, monkeypatch):
    # numba keys a fold's cache by its own file only: the folder is named by a hash over all
    # the fold modules (and the rule codes they freeze), so an edit anywhere moves it.
    assert all(os.path.isfile(compiled._source_path(name)) for name in compiled.FOLD_MODULES + compiled._FROZEN_SOURCES)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    digest = compiled.fold_sources_digest()
    assert compiled.fold_cache_dir() == str(tmp_path / digest)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / digest))  # a child process of okl's
    assert compiled.fold_cache_dir() == str(tmp_path / digest)
    sources = tmp_path / "sources"
    sources.mkdir()
    for name in compiled.FOLD_MODULES + compiled._FROZEN_SOURCES:
        (sources / (name.rsplit(".", 1)[-1] + ".py")).write_text(f"# {name}\n")
    monkeypatch.syspath_prepend(str(sources))
    monkeypatch.setattr(compiled, "FOLD_MODULES", ("_linear_folds", "_expansion_folds"))
    monkeypatch.setattr(compiled, "_FROZEN_SOURCES", ("rules",))
    before = compiled.fold_sources_digest()
    (sources / "_expansion_folds.py").write_text("# changed\n")
    assert compiled.fold_sources_digest() != before and len(before) == 16


def test_folds_refuses_a_module_that_is_not_a_fold_module():
    with pytest.raises(ValueError, match="okl_core.learners.rules is not a fold module"):
        compiled.folds("okl_core.learners.rules")


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
import json, os, sys, numpy as np, okl_core, pytest
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
        with pytest.MonkeyPatch.context() as m:
            if mode == "numpy":  # imported here: the references' import loads the fold modules, and scipy's BLAS
                from tests.okl_core.reference.folds import use_reference_folds
                use_reference_folds(m)
            state, scores = learner.update(learner.init(), X, y)
        out[name + "/" + mode] = okl_core.model_bytes(learner, state).hex()[-64:] + scores.tobytes().hex()[-64:]
print(json.dumps(out))
"""


def _fresh_process(mode):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, mode], env=env, capture_output=True, text=True, check=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
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
from okl_core.learners import compiled
def loaded():
    modules = [sys.modules[m] for m in compiled.FOLD_MODULES if m in sys.modules]
    return {name: [str(s) for s in f.signatures] for m in modules for name, f in vars(m).items() if getattr(f, "signatures", None)}
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
    result = subprocess.run([sys.executable, "-c", WARM_UP, "mfogd"], capture_output=True, text=True, check=True)
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
    params = dict(okl_core.learner_class(name).conformance_params)
    learner = okl_core.make_learner(name, n_inputs=6, **params)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    labels = {
        "binary": np.where(rng.random(120) < 0.5, -1.0, 1.0),
        "multiclass": rng.integers(0, getattr(learner.config, "n_classes", 2), 120),
        "regression": rng.normal(size=120),
    }
    learner.update(learner.init(), X, labels[learner.task])  # compiled before the patching below: numba would read a patched helper
    called = []
    for module in map(compiled.folds, compiled.FOLD_MODULES):
        for attribute in dir(module):
            function = getattr(module, attribute)
            if attribute.startswith("fold_") and hasattr(function, "py_func"):  # a numba dispatcher: a compiled fold
                monkeypatch.setattr(module, attribute, lambda *a, _f=function, _n=attribute: called.append(_n) or _f(*a))
    learner.update(learner.init(), X, labels[learner.task])
    assert called, f"{name}: update ran no compiled fold"
