"""``step='normalized'`` of the random-feature learners (fogd, mfogd, fogd_r): NAG, the
normalized adaptive gradient of Ross, Mineiro & Langford (UAI 2013, Algorithm 2), against a
hand-written row-by-row fold of the algorithm, its invariance to the features' scales, its
first step in closed form, its merge and mix, and its model files."""

import math

import numpy as np
import pytest

import okl_core
from okl_core.learners.fogd import NormalizedState
from okl_core.learners.compiled import folds
from okl_core.learners.rules import LINEAR_FOLDS, BinaryHingeRule, HingeRuleConfig
from tests.okl_core.reference import linear
from tests.okl_core.reference.folds import use_reference_folds

from .learner_data import rule_updates, tiny_problem

D, SIGMA, SEED, BLOCK = 30, 1.0, 5, 16
CASES = [("fogd", "binary", {"eta": 0.3}), ("mfogd", "multiclass", {"eta": 0.2, "n_classes": 4}), ("fogd_r", "regression", {"eta": 0.1, "eps": 0.05})]


def _learner(name, **params):
    return okl_core.make_learner(name, n_inputs=4, n_components=D, sigma=SIGMA, seed=SEED, block_size=BLOCK, step="normalized", **params)


def _reference(task, Z, y, eta, n_classes=None, eps=0.0):
    """Algorithm 2 of the paper, row by row in plain Python floats: rescale and ``N`` before
    the prediction, then ``G_j += g_j^2``, ``w_j -= eta sqrt(t/N) g_j / (s_j sqrt(G_j))``."""
    k = Z.shape[1]
    rows = n_classes or 1
    W, G = [[0.0] * k for _ in range(rows)], [[0.0] * k for _ in range(rows)]
    s, N, scores = [0.0] * k, 0.0, []
    for t, (z, label) in enumerate(zip(Z.tolist(), y), start=1):
        for j in range(k):
            if abs(z[j]) > s[j]:
                for r in range(rows):
                    W[r][j] *= s[j] / abs(z[j])
                s[j] = abs(z[j])
        N += sum((z[j] / s[j]) ** 2 for j in range(k) if s[j] > 0)
        f = [sum(W[r][j] * z[j] for j in range(k)) for r in range(rows)]
        scores.append(f if n_classes else f[0])
        for r, u in rule_updates(task, f, label, eps):
            for j in range(k):
                g = u * z[j]
                G[r][j] += g * g
                if G[r][j] > 0:
                    W[r][j] -= eta * math.sqrt(t / N) * g / (s[j] * math.sqrt(G[r][j]))
    return np.array(W).squeeze(), np.array(s), np.array(G).squeeze(), N, np.array(scores)


@pytest.mark.parametrize(("name", "task", "params"), CASES)
@pytest.mark.parametrize("reference", [True, False], ids=["numpy", "compiled"])
def test_normalized_fold_matches_the_papers_algorithm(monkeypatch, name, task, params, reference):
    if reference:
        use_reference_folds(monkeypatch)
    X, y = tiny_problem(task, 4, n=200, n_classes=params.get("n_classes", 3))
    learner = _learner(name, **params)
    state, first = learner.update(learner.init(), X[:70], y[:70])
    state, rest = learner.update(state, X[70:], y[70:])  # t and N carry over between batches
    # the learner's own (float32) features in float64: the reference differs only in summation order
    Z = learner.features.transform(X).astype(np.float64)
    w, s, G, N, ref_scores = _reference(task, Z, y, params["eta"], params.get("n_classes"), params.get("eps", 0.0))
    assert isinstance(state, NormalizedState) and int(state.n_seen) == 200
    np.testing.assert_allclose(np.concatenate([first, rest]), ref_scores, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(state.w, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(state.scale, s)
    np.testing.assert_allclose(state.g2, G, rtol=1e-12)
    assert float(state.norm_sum) == pytest.approx(N, rel=1e-12)
    assert np.count_nonzero(state.g2) > 0 and np.count_nonzero(state.w) > 0


@pytest.mark.parametrize("reference", [True, False], ids=["numpy", "compiled"])
def test_scaling_a_feature_by_a_power_of_two_changes_no_prediction(reference):
    # The paper's point: the predictions do not depend on the features' scales. With powers of
    # two every rounding is the same, so the online scores are identical bytes.
    jit = linear if reference else folds(LINEAR_FOLDS)
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((300, 12))
    Z[rng.random(Z.shape) < 0.3] = 0.0  # features that start at zero and appear later
    y = np.where(Z @ rng.standard_normal(12) > 0, 1.0, -1.0)
    column_scales = 2.0 ** rng.integers(-20, 20, 12)
    rule = BinaryHingeRule(HingeRuleConfig(eta=1.0))
    runs = []
    for features in (Z, Z * column_scales):
        w, s, G, N, scores = np.zeros(12), np.zeros(12), np.zeros(12), np.zeros(1), np.empty(300)
        jit.fold_weights_normalized(rule.code, jit.Batch(features, y, scores), 0, w, jit.Normalized(s, G, N, 0, 0.5))
        runs.append((scores, w, s, N))
    (scores, w, s, N), (scaled_scores, scaled_w, scaled_s, scaled_N) = runs
    np.testing.assert_array_equal(scaled_scores, scores)
    np.testing.assert_array_equal(scaled_w * column_scales, w)
    np.testing.assert_array_equal(scaled_s, s * column_scales)
    np.testing.assert_array_equal(scaled_N, N)
    assert np.mean(np.sign(scores) != y) < 0.3  # and it learns


def test_first_normalized_step_in_closed_form():
    # From zero: s = |z|, N = number of non-zero features (k), G = z^2, t = 1, so
    # w_j = eta sqrt(1 / k) u / z_j and the new score of the same row is eta sqrt(k) u.
    learner = _learner("fogd", eta=0.25)
    X = np.array([[0.1, -0.4, 0.3, 0.9]], dtype=np.float32)
    state, _ = learner.update(learner.init(), X, np.array([-1.0]))
    z = learner.features.transform(X)[0].astype(np.float64)
    k = np.count_nonzero(z)
    assert k == 2 * D and float(state.norm_sum) == k
    np.testing.assert_array_equal(state.scale, np.abs(z))
    np.testing.assert_allclose(state.w, -0.25 * math.sqrt(1 / k) / z, rtol=1e-14)
    assert learner.predict(state, X)[0] == pytest.approx(-0.25 * math.sqrt(k), rel=1e-12)


def _shards(learner, base=None):
    start = learner.init() if base is None else base
    out = []
    for seed, n in ((3, 60), (4, 90)):
        X, y = tiny_problem(learner.task, 4, n=n, n_classes=3, seed=seed)
        out.append(learner.update(start, X * (1.0 + seed), y)[0])  # other scales per shard
    return out


@pytest.mark.parametrize("name", ["fogd", "mfogd", "fogd_r"])
def test_merge_averages_w_takes_the_largest_scale_and_sums_the_accumulators(name):
    learner = _learner(name, **({"n_classes": 3} if name == "mfogd" else {}))
    a, b = _shards(learner)
    assert not np.array_equal(a.scale, b.scale)
    merged = learner.merge([a, b])
    np.testing.assert_allclose(merged.w, (60 * a.w + 90 * b.w) / 150, rtol=1e-12)
    np.testing.assert_array_equal(merged.scale, np.maximum(a.scale, b.scale))
    np.testing.assert_array_equal(merged.g2, a.g2 + b.g2)
    assert float(merged.norm_sum) == float(a.norm_sum) + float(b.norm_sum) and int(merged.n_seen) == 150
    X, y = tiny_problem(learner.task, 4, n=40, n_classes=3, seed=9)
    base = learner.update(learner.init(), X, y)[0]
    c, d = _shards(learner, base)
    from_base = learner.merge([c, d], base=base)
    np.testing.assert_array_equal(from_base.g2, base.g2 + (c.g2 - base.g2) + (d.g2 - base.g2))
    assert float(from_base.norm_sum) == float(base.norm_sum) + (float(c.norm_sum) - float(base.norm_sum)) + (float(d.norm_sum) - float(base.norm_sum))
    np.testing.assert_array_equal(from_base.scale, np.maximum(c.scale, d.scale))
    assert int(from_base.n_seen) == 40 + 60 + 90 and isinstance(from_base, NormalizedState)


def test_mix_keeps_the_local_accumulators_and_the_largest_scale():
    learner = _learner("mfogd", n_classes=3)
    a, b = _shards(learner)
    mixed = okl_core.mix_states(learner, a, b, 0.5)
    np.testing.assert_array_equal(mixed.g2, a.g2)
    assert float(mixed.norm_sum) == float(a.norm_sum) and int(mixed.n_seen) == int(a.n_seen)
    np.testing.assert_array_equal(mixed.scale, np.maximum(a.scale, b.scale))
    np.testing.assert_allclose(mixed.w, 0.5 * a.w + 0.5 * b.w, rtol=1e-15)


def test_normalized_model_round_trips_with_its_accumulators():
    learner = _learner("mfogd", eta=0.1, n_classes=3)
    X, y = tiny_problem("multiclass", 4, n=50, n_classes=3)
    state = learner.update(learner.init(), X, y)[0]
    loaded, again = okl_core.model_from_bytes(okl_core.model_bytes(learner, state))
    assert loaded.config.step == "normalized" and isinstance(again, NormalizedState)
    for field in NormalizedState._fields:
        np.testing.assert_array_equal(getattr(again, field), getattr(state, field))
    # and it goes on learning as the state it was saved from
    np.testing.assert_array_equal(loaded.update(again, X, y)[0].w, learner.update(state, X, y)[0].w)
