"""``step='adagrad'`` of the random-feature learners (fogd, mfogd, fogd_r) against a
hand-written row-by-row fold of diagonal AdaGrad (Duchi, Hazan & Singer 2011), its merge
and mix, and model files from before the option (they load with the paper's constant step)."""

import io
import json
import math

import numpy as np
import pytest

import okl_core
from okl_core.learners.fogd import AdaGradState, LinearState
from okl_core.learners.rules import ADAGRAD_DELTA

from .learner_data import rule_updates, tiny_problem
from .test_fogd import _reference_features
from tests.okl_core.reference.folds import use_reference_folds

D, SIGMA, SEED, BLOCK = 30, 1.0, 5, 16


def _learner(name, **params):
    return okl_core.make_learner(name, n_inputs=4, n_components=D, sigma=SIGMA, seed=SEED, block_size=BLOCK, step="adagrad", **params)


def _adagrad_coordinate(w, G, j, g, eta):
    """One coordinate of the AdaGrad step for gradient ``g`` (plain Python floats)."""
    G[j] += g * g
    w[j] -= eta * g / (ADAGRAD_DELTA + math.sqrt(G[j]))


def _reference(task, X, y, eta, n_classes=None, eps=0.0):
    """Row by row: score with the current weights, then AdaGrad on the rule's subgradient."""
    Z = _reference_features(X, D, SIGMA, SEED, BLOCK)
    k = Z.shape[1]
    rows = n_classes or 1
    W, G, scores = [[0.0] * k for _ in range(rows)], [[0.0] * k for _ in range(rows)], []
    for z, label in zip(Z, y):
        f = [sum(W[r][j] * z[j] for j in range(k)) for r in range(rows)]
        scores.append(f if n_classes else f[0])
        for r, u in rule_updates(task, f, label, eps):
            for j in range(k):
                _adagrad_coordinate(W[r], G[r], j, u * z[j], eta)
    return np.array(W).squeeze(), np.array(G).squeeze(), np.array(scores)


@pytest.mark.parametrize(
    ("name", "task", "params"),
    [("fogd", "binary", {"eta": 0.3}), ("mfogd", "multiclass", {"eta": 0.2, "n_classes": 4}), ("fogd_r", "regression", {"eta": 0.1, "eps": 0.05})],
)
@pytest.mark.parametrize("reference", [True, False], ids=["numpy", "compiled"])
def test_adagrad_fold_matches_the_hand_written_fold(monkeypatch, name, task, params, reference):
    if reference:
        use_reference_folds(monkeypatch)
    X, y = tiny_problem(task, 4, n=200, n_classes=params.get("n_classes", 3))
    learner = _learner(name, **params)
    state, scores = learner.update(learner.init(), X, y)
    w, G, ref_scores = _reference(task, X, y, params["eta"], params.get("n_classes"), params.get("eps", 0.0))
    assert isinstance(state, AdaGradState) and int(state.n_seen) == 200
    # float32 features (the reference's are float64): agreement to float32 rounding
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(state.w, w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(state.g2, G, rtol=1e-4, atol=1e-4)
    assert np.count_nonzero(state.g2) > 0 and np.all(state.g2 >= 0)


def test_first_adagrad_step_is_eta_times_the_sign_of_the_gradient():
    # Closed form: from zero, G_j = z_j^2, so the step is eta y z_j / (delta + |z_j|) ~ eta y sign(z_j).
    learner = _learner("fogd", eta=0.25)
    X = np.array([[0.1, -0.4, 0.3, 0.9]], dtype=np.float32)
    state, _ = learner.update(learner.init(), X, np.array([-1.0]))
    z = learner.features.transform(X)[0].astype(np.float64)
    np.testing.assert_array_equal(state.g2, z * z)
    np.testing.assert_allclose(state.w, -0.25 * z / (ADAGRAD_DELTA + np.abs(z)), rtol=1e-15)


def test_adagrad_differs_from_the_constant_step_and_constant_is_the_default():
    X, y = tiny_problem("binary", 4, n=100)
    constant = okl_core.make_learner("fogd", n_inputs=4, n_components=D, eta=0.3)
    assert constant.config.step == "constant" and constant.state_class is LinearState
    adaptive = _learner("fogd", eta=0.3)
    a = constant.update(constant.init(), X, y)[0]
    b = adaptive.update(adaptive.init(), X, y)[0]
    assert isinstance(a, LinearState) and not np.allclose(a.w, b.w)
    with pytest.raises(ValueError, match=r"step must be one of \['adagrad', 'constant', 'normalized'\], got 'adam'"):
        okl_core.make_learner("mfogd", n_inputs=4, n_classes=3, step="adam")


def _shards(learner, base=None):
    start = learner.init() if base is None else base
    out = []
    for seed, n in ((3, 60), (4, 90)):
        X, y = tiny_problem(learner.task, 4, n=n, n_classes=3, seed=seed)
        out.append(learner.update(start, X, y)[0])
    return out


@pytest.mark.parametrize("name", ["fogd", "mfogd", "fogd_r"])
def test_merge_averages_w_and_sums_the_squared_gradients(name):
    learner = _learner(name, **({"n_classes": 3} if name == "mfogd" else {}))
    a, b = _shards(learner)
    merged = learner.merge([a, b])
    np.testing.assert_array_equal(merged.g2, a.g2 + b.g2)
    np.testing.assert_allclose(merged.w, (60 * a.w + 90 * b.w) / 150, rtol=1e-12)
    X, y = tiny_problem(learner.task, 4, n=40, n_classes=3, seed=9)
    base = learner.update(learner.init(), X, y)[0]
    c, d = _shards(learner, base)
    from_base = learner.merge([c, d], base=base)
    np.testing.assert_allclose(from_base.g2, base.g2 + (c.g2 - base.g2) + (d.g2 - base.g2), rtol=1e-15)
    assert np.all(from_base.g2 >= base.g2) and int(from_base.n_seen) == 40 + 60 + 90


def test_mix_keeps_the_local_squared_gradients():
    learner = _learner("mfogd", n_classes=3)
    a, b = _shards(learner)
    mixed = okl_core.mix_states(learner, a, b, 0.5)
    assert mixed.g2 is a.g2 or np.array_equal(mixed.g2, a.g2)
    np.testing.assert_allclose(mixed.w, 0.5 * a.w + 0.5 * b.w, rtol=1e-15)


def test_adagrad_model_round_trips_with_its_accumulator():
    learner = _learner("fogd_r", eta=0.1)
    X, y = tiny_problem("regression", 4, n=50)
    state = learner.update(learner.init(), X, y)[0]
    loaded, again = okl_core.model_from_bytes(okl_core.model_bytes(learner, state))
    assert loaded.config.step == "adagrad" and isinstance(again, AdaGradState)
    np.testing.assert_array_equal(again.g2, state.g2)


@pytest.mark.parametrize("name", ["fogd", "mfogd", "fogd_r"])
def test_model_files_from_before_the_option_load_with_the_constant_step(name):
    learner = okl_core.make_learner(name, n_inputs=4, n_components=D, **({"n_classes": 3} if name == "mfogd" else {}))
    X, y = tiny_problem(learner.task, 4, n=60, n_classes=3)
    state = learner.update(learner.init(), X, y)[0]
    with np.load(io.BytesIO(okl_core.model_bytes(learner, state))) as npz:
        arrays = dict(npz)
    assert sorted(arrays) == ["__header__", "n_seen", "w"]  # the constant step's file has no accumulator
    header = json.loads(arrays["__header__"].tobytes())
    del header["config"]["step"]  # as okl wrote it before the option
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    old = io.BytesIO()
    np.savez(old, **arrays)
    loaded, loaded_state = okl_core.model_from_bytes(old.getvalue())
    assert loaded.config.step == "constant" and isinstance(loaded_state, LinearState)
    np.testing.assert_array_equal(loaded.predict(loaded_state, X), learner.predict(state, X))
    # and it keeps learning with the paper's rule, as before
    np.testing.assert_array_equal(loaded.update(loaded_state, X, y)[0].w, learner.update(state, X, y)[0].w)
