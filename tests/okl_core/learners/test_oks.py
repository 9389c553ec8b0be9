"""Online kernel selection (spec/oks.md): OKS, OKS++, IOKS and their random-feature versions.

The learners are checked against plain reference folds written from the spec (kernel
values from ``exact_kernel``, features from ``FourierFeatures``), sharing only the draws.
"""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

import okl_core
from okl_core.features import FourierFeatures, exact_kernel
from okl_core.learners.multikernel import example_uniforms
from okl_core.learners.oks import oks_pp_constant, oks_pp_distribution, tsallis_step
from tests.okl_core.reference.oks import tsallis_step as reference_tsallis_step

KERNELS = "gaussian:0.5,gaussian:2,laplacian:3"


def stream(task, n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)).astype(np.float32)
    r = np.sqrt((X[:, :2] ** 2).sum(1))
    if task == "binary":
        return X, np.where(r < 0.7, 1, -1)
    return X, 0.5 + 0.4 * np.cos(3.0 * r.astype(np.float64))


def loss_and_grad(loss, f, y):
    if loss == "logistic":
        return math.log1p(math.exp(-y * f)), -y / (1 + math.exp(y * f))
    if loss == "square":
        return (f - y) ** 2, 2 * (f - y)
    return abs(f - y), float(np.sign(f - y))


class KernelHypotheses:
    """Reference support sets: f_i(x) = sum alpha k_i(sv, x) by exact_kernel, norm by the Gram matrix."""

    def __init__(self, learner):
        self.dictionary, self.rows, self.alpha = learner.dictionary, [[] for _ in learner.dictionary], [[] for _ in learner.dictionary]

    def value(self, i, x):
        if not self.rows[i]:
            return 0.0
        kernel, sigma = self.dictionary[i]
        return float(exact_kernel(kernel, np.array(self.rows[i]), x[None, :], sigma)[:, 0] @ np.array(self.alpha[i]))

    def step(self, i, x, coef, bound):
        self.rows[i].append(x.astype(np.float64))
        self.alpha[i].append(coef)
        if bound is not None:
            kernel, sigma = self.dictionary[i]
            rows, alpha = np.array(self.rows[i]), np.array(self.alpha[i])
            norm = math.sqrt(alpha @ exact_kernel(kernel, rows, rows, sigma) @ alpha)
            if norm > bound:
                self.alpha[i] = list(alpha * bound / norm)

    def sq_feature(self):
        return 1.0


class FeatureHypotheses:
    """Reference random-feature weights with coordinate clipping to +-U/sqrt(D)."""

    def __init__(self, learner):
        self.maps = [FourierFeatures(spec) for spec in learner.kernel_feature_specs()]
        self.w = np.zeros((len(self.maps), self.maps[0].spec.n_outputs))
        self.D = self.maps[0].spec.n_components

    def value(self, i, x):
        self.z = self.maps[i].transform(x[None, :])[0].astype(np.float64)
        return float(self.z @ self.w[i])

    def step(self, i, x, coef, bound):
        self.w[i] = np.clip(self.w[i] + coef * self.z, -bound / math.sqrt(self.D), bound / math.sqrt(self.D))

    def sq_feature(self):
        return float(self.z @ self.z)


def draw(p, seed, t):
    cdf = np.cumsum(p)
    return min(int(np.searchsorted(cdf, example_uniforms(seed, t, 1)[0] * cdf[-1], side="right")), len(p) - 1)


def reference_oks(learner, X, y):
    cfg, K, T = learner.config, len(learner.dictionary), learner.config.horizon
    hyp, log_w, scores = KernelHypotheses(learner), np.zeros(K), []
    delta = min(1.0, (K / T) ** (1 / 3))
    lam = {"logistic": 25, "square": 25, "absolute": 5}[cfg.loss] * math.sqrt(delta / (K * T))
    eta = math.sqrt(2 * (1 - delta) * math.log(K)) / math.sqrt(K * T)
    for t, (x, target) in enumerate(zip(X, y)):
        q = np.exp(log_w - log_w.max())
        q /= q.sum()
        p = (1 - delta) * q + delta / K
        i = draw(p, cfg.seed, t)
        f = hyp.value(i, x)
        scores.append(f)
        loss, grad = loss_and_grad(cfg.loss, f, target)
        log_w[i] -= eta * loss / p[i]
        if grad:
            hyp.step(i, x, -lam * grad / p[i], None)
    return np.array(scores), np.exp(log_w) / np.exp(log_w).sum()


def reference_oks_pp(learner, X, y, hyp):
    cfg, K = learner.config, len(learner.dictionary)
    U = cfg.radius
    C0, G = {"logistic": (1.0, 1.0), "square": (4.0, 1.0)}[cfg.loss]
    a = (G * C0) ** (1 / 3) * (U * K) ** (2 / 3)
    L, S, scores = np.zeros(K), 0.0, []
    for t, (x, target) in enumerate(zip(X, y)):
        eta = math.sqrt(2 * math.log(K)) / math.sqrt(1 + S)
        q = np.exp(-eta * L - (-eta * L).max())
        q /= q.sum()
        delta = a / (2 * max(a, 2 * L.sum() ** (1 / 3)))
        p = (1 - delta) * q + delta / K
        i = draw(p, cfg.seed, t)
        f = hyp.value(i, x)
        scores.append(f)
        loss, grad = loss_and_grad(cfg.loss, f, target)
        if cfg.tuning == "released_code" and cfg.loss == "logistic":
            a = math.exp(-target * f)
        L[i] += loss / p[i]
        lam = U ** (4 / 3) * max(a**3, 8 * L.sum()) ** (-1 / 6) / (math.sqrt(4 / 3) * K ** (1 / 6) * (G * C0) ** (1 / 3) * math.sqrt(1 + L[i]))
        S += q[i] * (loss / p[i]) ** 2
        if grad:
            hyp.step(i, x, -lam * grad / p[i], U)
    return np.array(scores), L


def reference_ioks(learner, X, y, hyp):
    cfg, K, T = learner.config, len(learner.dictionary), learner.config.horizon
    U = cfg.radius
    G1 = {"absolute": 1.0, "logistic": 1.0, "square": 4.0}[cfg.loss]
    delta, upsilon = T**-0.75, math.exp(2 / (3 * math.log(T)))
    eta = np.full(K, 8 * cfg.loss_max * K ** (3 / 8) / (U * G1 * math.sqrt(T * math.log(T))))
    q, rho, grads, scores = np.full(K, 1 / K), np.full(K, 2.0 * K), np.zeros(K), []
    for t, (x, target) in enumerate(zip(X, y)):
        p = (1 - delta) * q + delta / K
        i = draw(p, cfg.seed, t)
        f = hyp.value(i, x)
        scores.append(f)
        loss, grad = loss_and_grad(cfg.loss, f, target)
        grads[i] += (grad / p[i]) ** 2 * hyp.sq_feature()
        if grad:
            hyp.step(i, x, -U / (math.sqrt(2) * math.sqrt(1 + grads[i])) * grad / p[i], U)
        c = loss / cfg.loss_max
        c = min(c, 1.0) if cfg.loss_cap else c  # loss_cap=False: the spec's c = l / l_max, uncapped
        c_tilde = np.zeros(K)
        c_tilde[i] = c / p[i] if p[i] >= eta.max() else c / (p[i] + eta.max())
        q, _ = reference_tsallis_step(q, eta, c_tilde)
        p = (1 - delta) * q + delta / K
        grow = 1 / p > rho
        rho[grow] = 2 / p[grow]
        eta[grow] *= upsilon
    return np.array(scores), q


@pytest.mark.parametrize("loss", ["logistic", "absolute"])
def test_oks_matches_the_reference_fold(loss):
    X, y = stream("binary" if loss == "logistic" else "regression")
    learner = okl_core.make_learner("oks", n_inputs=3, kernels=KERNELS, loss=loss, horizon=len(y), seed=3)
    state, scores = learner.update(learner.init(), X, y)
    expected, q = reference_oks(learner, X, y)
    np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(list(learner.kernel_weights(state).values()), q, rtol=1e-9)


@pytest.mark.parametrize(
    "name, params",
    [
        ("oks_pp", {"loss": "logistic"}),
        ("oks_pp", {"loss": "logistic", "tuning": "released_code"}),
        ("oks_pp", {"loss": "square"}),
        ("rf_oks_pp", {"loss": "logistic", "n_components": 16}),
        ("rf_oks_pp", {"loss": "square", "n_components": 16, "norm_bound": 0.3}),
    ],
)
def test_oks_pp_matches_the_reference_fold(name, params):
    X, y = stream("binary" if params["loss"] == "logistic" else "regression")
    learner = okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, seed=5, **params)
    state, scores = learner.update(learner.init(), X, y)
    hyp = FeatureHypotheses(learner) if name.startswith("rf") else KernelHypotheses(learner)
    expected, loss_sum = reference_oks_pp(learner, X, y, hyp)
    rtol = 1e-5 if name.startswith("rf") else 1e-9
    np.testing.assert_allclose(scores, expected, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(state.loss_sum, loss_sum, rtol=rtol)
    if name.startswith("rf"):
        np.testing.assert_allclose(state.w, hyp.w, rtol=rtol, atol=rtol)


@pytest.mark.parametrize(
    "name, params",
    [
        ("ioks", {"loss": "logistic"}),
        ("ioks", {"loss": "absolute"}),
        ("ioks", {"loss": "square"}),
        ("rf_ioks", {"loss": "logistic", "n_components": 16}),
        ("rf_ioks", {"loss": "absolute", "n_components": 16}),
        ("ioks", {"loss": "logistic", "loss_cap": False}),
        ("ioks", {"loss": "square", "loss_cap": False}),
        ("rf_ioks", {"loss": "logistic", "n_components": 16, "loss_cap": False}),
    ],
)
def test_ioks_matches_the_reference_fold(name, params):
    X, y = stream("binary" if params["loss"] == "logistic" else "regression")
    learner = okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, horizon=len(y), seed=7, **params)
    state, scores = learner.update(learner.init(), X, y)
    hyp = FeatureHypotheses(learner) if name.startswith("rf") else KernelHypotheses(learner)
    expected, q = reference_ioks(learner, X, y, hyp)
    rtol = 1e-5 if name.startswith("rf") else 1e-9
    np.testing.assert_allclose(scores, expected, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(state.q, q, rtol=rtol)


@pytest.mark.parametrize("name, extra", [("ioks", {}), ("rf_ioks", {"n_components": 16})])
def test_ioks_loss_cap_is_the_default_and_dropping_it_changes_the_weights(name, extra):
    # A stream on which some logistic losses exceed l_max = 1 (y f < -0.54): the two readings
    # of c = l / l_max part there, and only there.
    X, y = stream("binary")
    made = {cap: okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, horizon=len(y), seed=7, loss_cap=cap, **extra)
            for cap in (True, False)}
    default = okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, horizon=len(y), seed=7, **extra)
    assert default.config.loss_cap is True
    states = {cap: learner.update(learner.init(), X, y)[0] for cap, learner in made.items()}
    np.testing.assert_array_equal(default.update(default.init(), X, y)[0].q, states[True].q)
    assert not np.allclose(states[True].q, states[False].q)
    with pytest.raises(ValueError, match="loss_cap"):
        okl_core.make_learner(name, n_inputs=3, horizon=10, loss_cap="no", **extra)


def test_tsallis_bisection_solves_the_normalisation_within_tolerance():
    rng = np.random.default_rng(0)
    for _ in range(300):
        K = int(rng.integers(2, 9))
        q = np.maximum(rng.dirichlet(np.full(K, 0.3)) * (1 + rng.uniform(-1e-5, 1e-5)), 1e-12)
        eta = rng.uniform(1e-4, 0.5, size=K)
        c_tilde = np.zeros(K)
        c_tilde[rng.integers(K)] = rng.uniform(0, 1) / rng.uniform(0.01, 1)
        new, mu = tsallis_step(q, eta, c_tilde)
        assert abs(new.sum() - 1.0) <= 1e-5 and np.all(new > 0)

        def excess(m):
            return np.sum((q ** (-7 / 8) + eta * (c_tilde - m)) ** (-8 / 7)) - 1.0

        # Independent root: brentq between a point below and the pole of the sum.
        pole = np.min(q ** (-7 / 8) / eta + c_tilde)
        lo = -1.0
        while excess(lo) > 0:
            lo *= 2
        hi = pole - 1e-12 * max(1.0, abs(pole))
        root = brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15)
        exact = (q ** (-7 / 8) + eta * (c_tilde - root)) ** (-8 / 7)
        np.testing.assert_allclose(new, exact, rtol=1e-4, atol=1e-6)


def test_ioks_keeps_q_summing_to_one_at_every_step():
    X, y = stream("binary", n=200)
    learner = okl_core.make_learner("ioks", n_inputs=3, kernels=KERNELS + ",gaussian:8", horizon=200)
    state = learner.init()
    for i in range(len(y)):
        state, _ = learner.update(state, X[i : i + 1], y[i : i + 1])
        assert abs(float(state.q.sum()) - 1.0) <= 1e-5
        assert np.all(state.eta >= learner.rule.eta0)  # the rates only increase


@pytest.mark.parametrize("name", ["oks_pp", "rf_oks_pp"])
def test_oks_pp_probabilities_stay_in_the_simplex_with_the_exploration_floor(name):
    X, y = stream("binary", n=150)
    learner = okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, **({"n_components": 16} if name == "rf_oks_pp" else {}))
    K, a = 3, oks_pp_constant(15.0, 1.0, 1.0, 3)
    state = learner.init()
    for i in range(len(y)):
        state, _ = learner.update(state, X[i : i + 1], y[i : i + 1])
        p = np.array(list(learner.sampling_probabilities(state).values()))
        delta = a / (2 * max(a, 2 * float(state.loss_sum.sum()) ** (1 / 3)))  # the spec's delta_t
        assert abs(p.sum() - 1.0) < 1e-12 and np.all(p <= 1.0)
        assert np.all(p >= delta / K * (1 - 1e-12))
        _, p2, delta2 = oks_pp_distribution(state.loss_sum, float(state.sq_loss_sum), a)
        np.testing.assert_array_equal(p, p2)
        assert delta2 == pytest.approx(delta) and 0 < delta2 <= 0.5


def test_rf_oks_pp_clipping_bounds_every_coordinate():
    X, y = stream("binary", n=300)
    U, D = 0.8, 16
    learner = okl_core.make_learner("rf_oks_pp", n_inputs=3, kernels=KERNELS, n_components=D, norm_bound=U)
    state, _ = learner.update(learner.init(), X, y)
    assert np.abs(state.w).max() <= U / math.sqrt(D) * (1 + 1e-15)
    assert np.isclose(np.abs(state.w).max(), U / math.sqrt(D))  # the clip was active
    rf_ioks = okl_core.make_learner("rf_ioks", n_inputs=3, kernels=KERNELS, n_components=D, norm_bound=U, horizon=300)
    state, _ = rf_ioks.update(rf_ioks.init(), X, y)
    assert np.abs(state.w).max() <= U / math.sqrt(D) * (1 + 1e-15)


@pytest.mark.parametrize("kernels", ["gaussian:0.4,gaussian:3", "laplacian:1,cauchy:0.7"])
def test_support_sets_keep_exact_values_and_rkhs_norms(kernels):
    X, y = stream("binary", n=150)
    learner = okl_core.make_learner("oks_pp", n_inputs=3, kernels=kernels, norm_bound=2.0)
    state, _ = learner.update(learner.init(), X, y)
    start = 0
    for i, (kernel, sigma) in enumerate(learner.dictionary):
        stop = start + int(state.sv_count[i])
        rows, alpha = state.sv_x[start:stop].astype(np.float64), state.sv_alpha[start:stop]
        gram = exact_kernel(kernel, rows, rows, sigma)
        assert alpha @ gram @ alpha == pytest.approx(float(state.sq_norm[i]), rel=1e-9, abs=1e-12)
        assert math.sqrt(max(alpha @ gram @ alpha, 0)) <= 2.0 * (1 + 1e-9)  # projected onto ||f|| <= U
        learner_i = okl_core.make_learner("oks_pp", n_inputs=3, kernels=kernels, norm_bound=2.0)
        np.testing.assert_allclose(learner_i.storage.predict(state, i, X), exact_kernel(kernel, X, rows, sigma) @ alpha)
        start = stop
    assert start == len(state.sv_x) == int(state.n_seen)  # logistic gradients are never zero


def test_the_support_cap_fails_clearly_and_leaves_the_state_alone():
    X, y = stream("binary", n=20)
    learner = okl_core.make_learner("oks_pp", n_inputs=3, kernels=KERNELS, max_support=5)
    state, _ = learner.update(learner.init(), X[:5], y[:5])
    before = okl_core.model_bytes(learner, state)
    with pytest.raises(ValueError, match="max_support=5"):
        learner.update(state, X[5:], y[5:])
    assert okl_core.model_bytes(learner, state) == before


def test_horizon_losses_and_tuning_are_validated():
    for name in ("oks", "ioks", "rf_ioks"):
        with pytest.raises(ValueError, match="horizon"):
            okl_core.make_learner(name, n_inputs=3)
    with pytest.raises(ValueError, match="horizon"):
        okl_core.make_learner("ioks", n_inputs=3, horizon=1)  # ln T must be > 0
    for name in ("oks_pp", "rf_oks_pp"):
        with pytest.raises(ValueError, match="loss"):
            okl_core.make_learner(name, n_inputs=3, loss="absolute")
        with pytest.raises(ValueError, match="tuning"):
            okl_core.make_learner(name, n_inputs=3, tuning="code")
    with pytest.raises(ValueError, match="loss"):
        okl_core.make_learner("ioks", n_inputs=3, horizon=10, loss="hinge")
    with pytest.raises(ValueError, match="predict_with"):
        okl_core.make_learner("oks_pp", n_inputs=3, predict_with="vote")
    assert okl_core.make_learner("oks_pp", n_inputs=3, loss="square").task == "regression"


def test_released_code_tuning_changes_only_the_logistic_loss():
    X, y = stream("regression")
    states = []
    for tuning in ("paper", "released_code"):
        learner = okl_core.make_learner("oks_pp", n_inputs=3, kernels=KERNELS, loss="square", tuning=tuning)
        states.append(learner.update(learner.init(), X, y)[0])
    for a, b in zip(*states):
        np.testing.assert_array_equal(a, b)
    X, y = stream("binary")
    learner = okl_core.make_learner("oks_pp", n_inputs=3, kernels=KERNELS, tuning="released_code")
    state, scores = learner.update(learner.init(), X[:1], y[:1])
    assert float(state.delta_constant) == math.exp(-y[0] * scores[0]) == 1.0  # f = 0 on the first example
    state, scores = learner.update(state, X[1:], y[1:])
    assert float(state.delta_constant) == pytest.approx(math.exp(-y[-1] * scores[-1]))


@pytest.mark.parametrize("name", ["oks_pp", "rf_ioks"])
def test_predict_with_the_best_kernel_or_the_q_mixture(name):
    X, y = stream("binary", n=200)
    params = {"kernels": KERNELS, **({"horizon": 200, "n_components": 16} if name == "rf_ioks" else {})}
    best = okl_core.make_learner(name, n_inputs=3, **params)
    mixture = okl_core.make_learner(name, n_inputs=3, predict_with="mixture", **params)
    state, _ = best.update(best.init(), X, y)
    q = np.array(list(best.kernel_weights(state).values()))
    per_kernel = np.stack([best.storage.predict(state, i, X) for i in range(3)])
    np.testing.assert_array_equal(best.predict(state, X), per_kernel[int(np.argmax(q))])
    raw_q = best.distributions(state)[0]
    np.testing.assert_allclose(mixture.predict(state, X), raw_q @ per_kernel)
    assert best.best_kernel(state) == best.kernel_labels[int(np.argmax(q))]


def test_kernel_versions_refuse_to_merge_and_random_feature_versions_average():
    X, y = stream("binary", n=100)
    for name in ("oks", "oks_pp", "ioks"):
        learner = okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, **({"horizon": 100} if name != "oks_pp" else {}))
        state, _ = learner.update(learner.init(), X, y)
        with pytest.raises(okl_core.NotMergeableError, match=f"{name}: kernel models keep growing support sets"):
            okl_core.merge_states(learner, [state, state])
    learner = okl_core.make_learner("rf_ioks", n_inputs=3, kernels=KERNELS, n_components=8, horizon=100)
    a, _ = learner.update(learner.init(), X[:75], y[:75])
    b, _ = learner.update(learner.init(), X[75:], y[75:])
    merged = okl_core.merge_states(learner, [a, b])
    np.testing.assert_allclose(merged.w, 0.75 * a.w + 0.25 * b.w)
    np.testing.assert_allclose(merged.q, 0.75 * a.q + 0.25 * b.q)
    np.testing.assert_array_equal(merged.eta, np.maximum(a.eta, b.eta))
    np.testing.assert_array_equal(merged.n_used, a.n_used + b.n_used)
    learner = okl_core.make_learner("rf_oks_pp", n_inputs=3, kernels=KERNELS, n_components=8)
    a, _ = learner.update(learner.init(), X[:75], y[:75])
    b, _ = learner.update(learner.init(), X[75:], y[75:])
    merged = okl_core.merge_states(learner, [a, b])
    np.testing.assert_allclose(merged.loss_sum, 0.75 * a.loss_sum + 0.25 * b.loss_sum)
    assert int(merged.n_seen) == 100


@pytest.mark.parametrize("name", ["oks_pp", "rf_oks_pp", "ioks", "oks"])
def test_square_loss_learns_a_regression_stream(name):
    X, y = stream("regression", n=600)
    params = {"kernels": "gaussian:0.5,gaussian:2", "loss": "square", **({"horizon": 1800} if name in ("ioks", "oks") else {})}
    learner = okl_core.make_learner(name, n_inputs=3, **params)
    state = learner.init()
    for _ in range(3):
        state, _ = learner.update(state, X, y)
    X_test, y_test = stream("regression", n=300, seed=1)
    assert np.mean((learner.predict(state, X_test) - y_test) ** 2) < 0.5 * np.var(y_test)


@pytest.mark.parametrize("name", ["oks", "oks_pp", "ioks", "rf_oks_pp", "rf_ioks"])
def test_a_state_is_the_storage_fields_the_rule_statistics_and_the_counters(name):
    horizon = {"horizon": 100} if name in ("oks", "ioks", "rf_ioks") else {}
    learner = okl_core.make_learner(name, n_inputs=3, kernels=KERNELS, **horizon)
    fields = learner.storage.fields + learner.rule.stats_class._fields + ("n_used", "n_seen")
    assert learner.state_class._fields == fields
    state = learner.init()
    assert learner.rule.stats_of(state) == tuple(getattr(state, f) for f in learner.rule.stats_class._fields)
