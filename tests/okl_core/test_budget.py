"""Budget learners (okl_core.learners.budget) against hand-computed folds and literal transcriptions.

Three kinds of tests: a few rows worked out by hand (which vector goes, the shrink,
projection, rescaling coefficients); each learner against a list-based transcription of its
published rule on a longer stream (state and online scores); properties on random streams
(the budget is never exceeded, batching and seeds).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import okl_core
from okl_core.features import exact_kernel
from okl_core.learners.budget import FORGETRON_RATIO, forgetron_shrink
from okl_core.random import row_uniforms

from .learner_data import tiny_problem

BINARY = ["rbp", "forgetron", "projectron", "projectron_pp", "bpa_s", "bogd"]
MULTICLASS = ["mrbp", "mprojectron", "mbogd", "mforgetron", "mprojectron_pp", "mbpa_s"]
ALL = BINARY + ["norma_r"]
REGRESSION = ["rbp_r", "bogd_r", "forgetron_r", "projectron_r"]
EVERY = ALL + MULTICLASS + REGRESSION
SIGMA = 0.5


def make(name, **params):
    classes = {"n_classes": 3} if name in MULTICLASS else {}
    return okl_core.make_learner(name, **{"n_inputs": 2, "sigma": SIGMA, **classes, **params})


def stream_for(learner, n, seed):
    return tiny_problem(learner.task, learner.config.n_inputs, n=n, n_classes=getattr(learner.config, "n_classes", 3), seed=seed)


def far_points(n, d=2):
    """Rows so far apart that every cross kernel value underflows to 0."""
    return (np.arange(n)[:, None] * 100.0 * np.ones((1, d))).astype(np.float32)


def k(a, b, sigma=SIGMA):
    return float(exact_kernel("gaussian", np.atleast_2d(a), np.atleast_2d(b), sigma)[0, 0])


def uniform(seed, t):
    return float(row_uniforms(seed, t, t + 1, 1)[0, 0])


# -- a few rows by hand ---------------------------------------------------------------------
def test_rbp_removes_the_slot_of_its_uniform_and_the_new_vector_takes_it():
    learner = make("rbp", budget=2, seed=7)
    X, y = far_points(4), np.array([-1, 1, -1, 1])  # f = 0 at every row: a mistake on each -1
    state, scores = learner.update(learner.init(), X, y)
    np.testing.assert_array_equal(scores, 0.0)
    # Mistakes at rows 0 and 2 fill the budget; row 1 (+1, f = 0) is no mistake; row 3 neither.
    np.testing.assert_array_equal(state.stamp, [0, 2])
    X2, y2 = far_points(7)[4:], np.array([-1, -1, -1])
    state, _ = learner.update(state, X2, y2)
    stamps = [0, 2]
    for t in (4, 5, 6):
        stamps[min(int(uniform(7, t) * 2), 1)] = t
    np.testing.assert_array_equal(state.stamp, stamps)
    np.testing.assert_array_equal(state.support, far_points(7)[stamps])
    np.testing.assert_array_equal(state.alpha, [-1.0, -1.0])
    assert int(state.n_support) == 2 and int(state.n_seen) == 7


def test_forgetron_shrinks_by_the_self_tuned_phi_worked_by_hand():
    learner = make("forgetron", budget=1)
    X, y = far_points(3), np.array([-1, -1, -1])  # three mistakes, kernel values 0 across rows
    state, _ = learner.update(learner.init(), X[:2], y[:2])
    # Row 1: r = row 0, sigma = 1, mu = y_r f'(x_r) = 1, M = 2: 2 phi - phi^2 <= 15/16 -> phi = 3/4.
    assert float(state.alpha[0]) == pytest.approx(-0.75, abs=1e-15)
    assert float(state.damage) == pytest.approx(15 / 16, abs=1e-15) and int(state.mistakes) == 2
    state, _ = learner.update(state, X[2:], y[2:])
    # Row 2: sigma = mu = 3/4, M = 3, Q = 15/16: 1.5 phi - 0.5625 phi^2 <= 45/32 - 15/16.
    phi = (1.5 - math.sqrt(1.5**2 - 4 * 0.5625 * (45 / 32 - 15 / 16))) / (2 * 0.5625)
    assert float(state.alpha[0]) == pytest.approx(-phi, rel=1e-12)
    assert float(state.damage) == pytest.approx(45 / 32, rel=1e-12)  # the bound holds with equality
    np.testing.assert_array_equal(state.stamp, [2])


def test_forgetron_does_not_shrink_while_the_damage_bound_allows_it():
    assert forgetron_shrink(sigma=1.0, mu=1.0, damage=0.0, mistakes=3) == 1.0  # Psi = 1 <= 45/32
    # An oldest vector the new model already gets very wrong (mu < 0) costs more.
    phi = forgetron_shrink(sigma=1.0, mu=-1.0, damage=0.5, mistakes=3)
    assert phi * phi * 3 + 2 * phi + 0.5 == pytest.approx(FORGETRON_RATIO * 3, rel=1e-12)


@pytest.mark.parametrize("name", ["projectron", "projectron_pp"])
def test_projectron_projects_a_close_vector_and_adds_a_distant_one(name):
    learner = make(name, budget=5, eta=0.1)
    X = np.array([[0.0, 0.0], [0.1, 0.0], [3.0, 0.0]], dtype=np.float32)
    state, _ = learner.update(learner.init(), X[:1], np.array([-1]))
    np.testing.assert_array_equal(state.alpha[:1], [-1.0])
    assert float(state.gram_inverse[0, 0]) == 1.0
    # x1 close to x0: f(x1) = -k01 < 0 and y = +1 is a mistake; delta^2 = 1 - k01^2 <= 0.1 -> project.
    k01 = k(X[0], X[1])
    assert 1 - k01**2 <= 0.1
    state, scores = learner.update(state, X[1:2], np.array([1]))
    assert scores[0] == pytest.approx(-k01, rel=1e-12)
    assert int(state.n_support) == 1
    assert float(state.alpha[0]) == pytest.approx(-1.0 + k01, rel=1e-12)  # alpha += y K^{-1} k
    # x2 far away: f(x2) = (k01 - 1) k02 < 0 predicts -1, y = +1 is a mistake; delta^2 ~ 1 > eta -> add.
    k02 = k(X[0], X[2])
    state, _ = learner.update(state, X[2:], np.array([1]))
    assert int(state.n_support) == 2 and float(state.alpha[1]) == 1.0
    inverse = np.linalg.inv([[1.0, k02], [k02, 1.0]])
    np.testing.assert_allclose(state.gram_inverse[:2, :2], inverse, rtol=1e-12)


def test_projectron_pp_also_updates_on_margin_errors_with_tau():
    eta = 3.0  # a margin update needs loss > delta^2 / eta, i.e. eta > 1 + k for two close points
    X = np.array([[0.0, 0.0], [0.12, 0.0]], dtype=np.float32)
    kk = k(X[0], X[1])
    states = {}
    for name in ("projectron", "projectron_pp"):
        learner = make(name, budget=5, eta=eta)
        state, _ = learner.update(learner.init(), X[:1], np.array([1]))  # f = 0, y = +1: no mistake
        assert int(state.n_support) == 0
        state, _ = learner.update(learner.init(), X[:1], np.array([-1]))  # a mistake: alpha = -1
        states[name], scores = learner.update(state, X[1:], np.array([-1]))  # y f = kk in (0, 1)
        assert scores[0] == pytest.approx(-kk, rel=1e-12)
    assert float(states["projectron"].alpha[0]) == -1.0  # no mistake, no update
    loss, delta2 = 1 - kk, 1 - kk * kk
    norm2 = kk * kk
    assert loss - delta2 / eta > 0
    tau = min(loss / norm2, 1.0, 2 * (loss - delta2 / eta) / norm2)
    assert float(states["projectron_pp"].alpha[0]) == pytest.approx(-1.0 - tau * kk, rel=1e-12)


def test_bpa_s_removes_the_cheapest_vector_and_folds_its_projection_into_the_new_one():
    C = 0.5
    learner = make("bpa_s", budget=2, C=C)
    X = np.array([[0.0, 0.0], [5.0, 5.0], [0.2, 0.0]], dtype=np.float32)
    y = np.array([1, -1, -1])
    state, scores = learner.update(learner.init(), X, y)
    # Rows 0 and 1: f ~ 0, loss ~ 1, tau = C. Row 2 (near x0, f = C k02 > 0): loss = 1 + C k02.
    k02, k12 = k(X[0], X[2]), k(X[1], X[2])
    f2 = C * k02 - C * k12
    assert scores[2] == pytest.approx(f2, rel=1e-12)
    costs = [C**2 * (1 - k02**2), C**2 * (1 - k12**2)]  # alpha_r^2 (1 - k(x_r, x)^2): x0 is cheaper
    assert costs[0] < costs[1]
    tau = min(C, 1 + f2)
    np.testing.assert_array_equal(state.stamp, [2, 1])
    assert float(state.alpha[0]) == pytest.approx(C * k02 - tau, rel=1e-12)
    assert float(state.alpha[1]) == -C


@pytest.mark.parametrize("decay", ["every_example", "on_update"])
def test_bogd_decays_and_rescales_the_survivors_by_b_over_b_minus_1(decay):
    eta, lam, seed = 0.5, 0.2, 3
    learner = make("bogd", budget=2, eta=eta, lam=lam, seed=seed, decay=decay)
    X = far_points(4)
    X[3] = X[0]  # row 3 is x0 again: f = its decayed coefficient, y f = that < 1 still updates
    y = np.array([1, -1, 1, 1])
    state, scores = learner.update(learner.init(), X, y)
    g = 1 - eta * lam
    # row 0: add 0.5; row 1: decay, add -0.5 (full); row 2: decay, rescale by 2, replace a slot.
    alpha = [eta * g, -eta]
    alpha = [a * g * 2 for a in alpha]
    slot = min(int(uniform(seed, 2) * 2), 1)
    stamps = [0, 1]
    alpha[slot], stamps[slot] = eta, 2
    if stamps[0] == 0:  # x0 survived: row 3 scores its coefficient
        assert scores[3] == pytest.approx(alpha[0], rel=1e-12)
    alpha = [a * g * 2 for a in alpha]
    slot3 = min(int(uniform(seed, 3) * 2), 1)
    alpha[slot3], stamps[slot3] = eta, 3
    np.testing.assert_array_equal(state.stamp, stamps)
    np.testing.assert_allclose(state.alpha, alpha, rtol=1e-12)


def test_bogd_decay_reading_matters_only_without_an_update():
    X, y = np.zeros((3, 2), dtype=np.float32), np.array([1, 1, 1])
    g = 1 - 0.9 * 0.5
    alphas = {}
    for decay in ("every_example", "on_update"):
        learner = make("bogd", budget=5, eta=0.9, lam=0.5, decay=decay)
        # Row 0 adds 0.9; row 1 (f = 0.9 < 1) decays and adds 0.9; row 2 (f = 0.9 g + 0.9 >= 1) does not update.
        state, scores = learner.update(learner.init(), X, y)
        assert scores[2] == pytest.approx(0.9 * g + 0.9, rel=1e-12)
        alphas[decay] = state.alpha[:2]
    np.testing.assert_allclose(alphas["on_update"], [0.9 * g, 0.9], rtol=1e-12)
    np.testing.assert_allclose(alphas["every_example"], [0.9 * g * g, 0.9 * g], rtol=1e-12)


def test_norma_adapts_eps_and_truncates_the_oldest():
    eta, lam, nu, eps = 0.5, 0.2, 0.4, 0.1
    learner = make("norma_r", budget=2, eta=eta, lam=lam, nu=nu, eps=eps)
    X = far_points(4)
    y = np.array([1.0, -1.0, 0.05, 2.0])
    state, scores = learner.update(learner.init(), X, y)
    np.testing.assert_array_equal(scores, 0.0)  # far rows: nothing to predict from
    g = 1 - eta * lam
    # row 0: |1| > 0.1 add +0.5, eps 0.4; row 1: |-1| > 0.4 add -0.5, eps 0.7;
    # row 2: |0.05| <= 0.7 no add, eps 0.5; row 3: |2| > 0.5, full: replace the oldest (row 0).
    np.testing.assert_array_equal(state.stamp, [3, 1])
    np.testing.assert_allclose(state.alpha, [eta, -eta * g * g], rtol=1e-12)
    assert float(state.eps) == pytest.approx(0.1 + 2 * (1 - nu) * eta - nu * eta + (1 - nu) * eta, rel=1e-12)


# -- literal transcriptions on a longer stream --------------------------------------------------
class Reference:
    """A list-based budgeted expansion with the learners' slot discipline."""

    def __init__(self, budget):
        self.budget, self.sv, self.alpha, self.stamp = budget, [], [], []

    def row(self, x):
        return exact_kernel("gaussian", x[None], np.array(self.sv).reshape(-1, len(x)), SIGMA)[0]

    def f(self, x):
        return float(self.row(x) @ np.array(self.alpha)) if self.sv else 0.0

    def put(self, slot, x, coef, t):
        if slot == len(self.sv):
            self.sv.append(x), self.alpha.append(coef), self.stamp.append(t)
        else:
            self.sv[slot], self.alpha[slot], self.stamp[slot] = x, coef, t

    @property
    def full(self):
        return len(self.sv) == self.budget


def mistake(f, y):
    return (1 if f >= 0 else -1) != y


def ref_rbp(X, y, budget, seed):
    m, scores = Reference(budget), []
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        if mistake(f, label):
            m.put(min(int(uniform(seed, t) * budget), budget - 1) if m.full else len(m.sv), x, float(label), t)
    return m, scores


def forgetron_phi(sigma, mu, Q, M, root="feasible"):
    """The largest phi in (0, 1] with psi(phi) + Q <= 15/32 M, by bisection; ``root='code'``: the
    root of psi(phi) + Q = 15/32 M above 1 when the quadratic opens downwards (np.roots)."""

    def psi(phi):
        lam = phi * sigma
        return lam * lam + 2 * lam - 2 * lam * phi * mu

    if psi(1.0) + Q <= 15 / 32 * M:
        return 1.0
    a = sigma * sigma - 2 * sigma * mu
    if root == "code" and a < 0:
        return max(np.roots([a, 2 * sigma, Q - 15 / 32 * M]).real)
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if psi(mid) + Q <= 15 / 32 * M else (lo, mid)
    return lo


def ref_forgetron(X, y, budget, root="feasible"):
    m, scores, M, Q = Reference(budget), [], 0, 0.0
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        if not mistake(f, label):
            continue
        M += 1
        if not m.full:
            m.put(len(m.sv), x, float(label), t)
            continue
        r = int(np.argmin(m.stamp))
        sigma, y_r = abs(m.alpha[r]), np.sign(m.alpha[r])
        mu = y_r * (m.f(m.sv[r]) + label * k(x, m.sv[r]))
        phi = forgetron_phi(sigma, mu, Q, M, root)
        Q += (phi * sigma) ** 2 + 2 * phi * sigma - 2 * phi * sigma * phi * mu
        m.alpha = [phi * a for a in m.alpha]
        m.put(r, x, phi * label, t)
    return m, scores


def code_tau(loss, norm2, delta2, budget):
    """The authors' code's Projectron++ margin step: tau, or 0 when its test fails."""
    U = 0.25 * math.sqrt((budget + 1) / math.log(budget + 1))
    tau = min(loss / norm2, 1)
    return tau if tau * (2 * loss - tau * norm2 - 2 * U * math.sqrt(delta2)) >= 0 else 0.0


def ref_projectron(X, y, budget, eta, plus, margin_test="eta"):
    m, scores = Reference(budget), []
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        if m.sv:
            kx = m.row(x)
            K = exact_kernel("gaussian", np.array(m.sv), np.array(m.sv), SIGMA)
            d = np.linalg.solve(K, kx)
            delta2 = max(1 - kx @ d, 0.0)
        if mistake(f, label):
            if m.sv and (delta2 <= eta or m.full):
                m.alpha = list(np.array(m.alpha) + label * d)
            else:
                m.put(len(m.sv), x, float(label), t)
        elif plus and label * f < 1 and m.sv and margin_test == "code":
            tau = code_tau(1 - label * f, 1 - delta2, delta2, budget)
            m.alpha = list(np.array(m.alpha) + tau * label * d)
        elif plus and label * f < 1 and m.sv:
            loss, norm2 = 1 - label * f, 1 - delta2
            if norm2 > 0 and loss - delta2 / eta > 0:
                tau = min(loss / norm2, 1, 2 * (loss - delta2 / eta) / norm2)
                m.alpha = list(np.array(m.alpha) + tau * label * d)
    return m, scores


def ref_bpa_s(X, y, budget, C):
    m, scores = Reference(budget), []
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        loss = 1 - label * f
        if loss <= 0:
            continue
        tau = min(C, loss)
        if not m.full:
            m.put(len(m.sv), x, tau * label, t)
            continue
        # The PA-I objective for each candidate r, with the RKHS norm from the Gram matrix.
        best = None
        for r in range(budget):
            beta = m.alpha[r] * k(m.sv[r], x) + tau * label
            diff = np.array([-m.alpha[r], beta])
            pts = np.array([m.sv[r], x])
            gram = exact_kernel("gaussian", pts, pts, SIGMA)
            new_f = f - m.alpha[r] * k(m.sv[r], x) + beta
            value = 0.5 * diff @ gram @ diff + C * max(0.0, 1 - label * new_f)
            if best is None or value < best[0] - 1e-12:
                best = (value, r, beta)
        m.put(best[1], x, best[2], t)
    return m, scores


def ref_bogd(X, y, budget, eta, lam, seed, gamma=np.inf, removal="random"):
    m, scores = Reference(budget), []
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        m.alpha = [(1 - eta * lam) * a for a in m.alpha]
        if label * f >= 1:
            continue
        if not m.full:
            m.put(len(m.sv), x, eta * label, t)
            continue
        if removal == "oldest":
            m.put(int(np.argmin(m.stamp)), x, eta * label, t)
        else:
            m.alpha = [a * budget / (budget - 1) for a in m.alpha]
            m.put(min(int(uniform(seed, t) * budget), budget - 1), x, eta * label, t)
        scale = min(1.0, eta * gamma / max(abs(a) for a in m.alpha))  # the authors' code's bound
        m.alpha = [a * scale for a in m.alpha]
    return m, scores


def ref_norma(X, y, budget, eta, lam, nu, eps):
    m, scores = Reference(budget), []
    for t, (x, target) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        m.alpha = [(1 - eta * lam) * a for a in m.alpha]
        if abs(target - f) <= eps:
            eps -= nu * eta
            continue
        eps += (1 - nu) * eta
        m.put(int(np.argmin(m.stamp)) if m.full else len(m.sv), x, eta * np.sign(target - f), t)
    return m, scores


CASES = {
    "rbp": ({"budget": 12, "seed": 5}, lambda X, y: ref_rbp(X, y, 12, 5)),
    "forgetron": ({"budget": 12}, lambda X, y: ref_forgetron(X, y, 12)),
    "projectron": ({"budget": 12, "eta": 0.3}, lambda X, y: ref_projectron(X, y, 12, 0.3, False)),
    "projectron_pp": ({"budget": 12, "eta": 0.3}, lambda X, y: ref_projectron(X, y, 12, 0.3, True)),
    "bpa_s": ({"budget": 12, "C": 0.7}, lambda X, y: ref_bpa_s(X, y, 12, 0.7)),
    "bogd": ({"budget": 12, "eta": 0.4, "lam": 0.3, "seed": 2}, lambda X, y: ref_bogd(X, y, 12, 0.4, 0.3, 2)),
    "forgetron-code": ({"budget": 12, "phi_root": "code"}, lambda X, y: ref_forgetron(X, y, 12, "code")),
    "projectron_pp-code": ({"budget": 12, "eta": 0.3, "margin_test": "code"},
                           lambda X, y: ref_projectron(X, y, 12, 0.3, True, "code")),
    "bogd-gamma": ({"budget": 12, "eta": 0.4, "lam": 0.0, "seed": 2, "gamma": 1.5},
                   lambda X, y: ref_bogd(X, y, 12, 0.4, 0.0, 2, gamma=1.5)),
    "bogd-oldest": ({"budget": 12, "eta": 0.4, "lam": 0.1, "removal": "oldest"},
                    lambda X, y: ref_bogd(X, y, 12, 0.4, 0.1, 0, removal="oldest")),
    "norma_r": ({"budget": 12, "eta": 0.3, "lam": 0.05, "nu": 0.3, "eps": 0.05},
                lambda X, y: ref_norma(X, y, 12, 0.3, 0.05, 0.3, 0.05)),
}


@pytest.mark.parametrize("name", ALL + ["forgetron-code", "projectron_pp-code", "bogd-gamma", "bogd-oldest"])
def test_learner_matches_the_transcription_of_its_published_rule(name):
    params, reference = CASES[name]
    learner = make(name.split("-")[0], n_inputs=3, **params)
    X, y = tiny_problem(learner.task, 3, n=160, seed=11)
    state, scores = learner.update(learner.init(), X, y)
    model, ref_scores = reference(X.astype(np.float64), y)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-9, atol=1e-10)
    n = int(state.n_support)
    assert n == len(model.sv) == 12  # the stream fills the budget and exercises its maintenance
    np.testing.assert_array_equal(state.stamp[:n], model.stamp)
    np.testing.assert_array_equal(state.support[:n], np.array(model.sv, dtype=np.float32))
    np.testing.assert_allclose(state.alpha[:n], model.alpha, rtol=1e-9, atol=1e-10)
    if "-" in name:  # an option of the authors' code: it changed the model on this stream
        default = make(name.split("-")[0], n_inputs=3,
                       **{k: v for k, v in params.items() if k not in ("phi_root", "gamma", "removal", "margin_test")})
        other, _ = default.update(default.init(), X, y)
        assert not np.allclose(other.alpha, state.alpha)
    if name.startswith("projectron"):  # full: every later mistake projected
        assert max(model.stamp) < 100
    else:  # vectors were replaced
        assert len(set(model.stamp)) == n and min(model.stamp) > 12


# -- limits and equivalences ---------------------------------------------------------------------
def test_without_removals_rbp_is_the_kernel_perceptron_and_bogd_kernel_ogd():
    X, y = tiny_problem("binary", 3, n=150, seed=4)
    pairs = [("rbp", {}, "kernel_perceptron", {}), ("bogd", {"eta": 0.3, "lam": 0.0}, "kernel_ogd", {"eta": 0.3}),
             ("projectron", {"eta": 1e-9}, "kernel_perceptron", {})]
    for budgeted, params, exact, exact_params in pairs:
        a = make(budgeted, n_inputs=3, budget=1000, **params)
        b = make(exact, n_inputs=3, **exact_params)
        state_a, scores_a = a.update(a.init(), X, y)
        state_b, scores_b = b.update(b.init(), X, y)
        np.testing.assert_allclose(scores_a, scores_b, rtol=1e-9, atol=1e-10, err_msg=budgeted)
        n = int(state_a.n_support)
        assert n == len(state_b.alpha) > 0
        np.testing.assert_allclose(state_a.alpha[:n], state_b.alpha, rtol=1e-9, atol=1e-10)


STREAMS = st.tuples(st.integers(1, 6), st.integers(1, 60), st.integers(0, 2**31), st.sampled_from(EVERY))


@settings(max_examples=40, deadline=None)
@given(STREAMS)
def test_the_budget_is_never_exceeded_and_slots_stay_consistent(case):
    budget, n, seed, name = case
    budget = max(budget, 2) if "bogd" in name else budget
    learner = make(name, n_inputs=3, budget=budget, **({"seed": seed % 1000} if "rbp" in name or "bogd" in name else {}))
    X, y = stream_for(learner, n, seed % 997)
    state = learner.init()
    for start in range(0, n, 7):
        state, _ = learner.update(state, X[start : start + 7], y[start : start + 7])
        m = int(state.n_support)
        assert 0 <= m <= budget and state.support.shape == (budget, 3)
        assert np.all(state.stamp[:m] >= 0) and np.all(state.stamp[m:] == -1)
        assert len(set(state.stamp[:m].tolist())) == m and np.all(state.alpha[m:] == 0)
        assert np.all(np.isfinite(state.alpha))


@pytest.mark.parametrize("name", EVERY)
def test_any_batching_gives_the_same_model_bytes(name):
    learner = make(name, n_inputs=3, budget=10)
    X, y = stream_for(learner, 200, 8)
    whole, whole_scores = learner.update(learner.init(), X, y)
    state, parts = learner.init(), []
    for start, stop in [(0, 1), (1, 33), (33, 34), (34, 150), (150, 200)]:
        state, s = learner.update(state, X[start:stop], y[start:stop])
        parts.append(s)
    np.testing.assert_array_equal(np.concatenate(parts), whole_scores)
    assert okl_core.model_bytes(learner, state) == okl_core.model_bytes(learner, whole)


@pytest.mark.parametrize("name", ["rbp", "bogd", "mrbp", "mbogd"])
def test_the_seed_alone_decides_which_vectors_go(name):
    X, y = stream_for(make(name, n_inputs=3), 200, 9)

    def train(seed):
        learner = make(name, n_inputs=3, budget=8, seed=seed)
        state, _ = learner.update(learner.init(), X, y)
        return okl_core.model_bytes(learner, state), state.stamp

    (first, stamps), (again, _), (other, other_stamps) = train(0), train(0), train(1)
    assert first == again
    assert first != other and not np.array_equal(stamps, other_stamps)  # other vectors were kept


@pytest.mark.parametrize("name", EVERY)
def test_merging_and_mixing_are_refused_with_a_clear_error(name):
    learner = make(name, n_inputs=3)
    X, y = stream_for(learner, 40, 0)
    state, _ = learner.update(learner.init(), X, y)
    with pytest.raises(okl_core.NotMergeableError, match=f"^{name} states cannot be merged: .*budget"):
        okl_core.merge_states(learner, [state, state])
    with pytest.raises(okl_core.NotMergeableError, match=f"^{name} cannot mix"):
        okl_core.check_mixable(learner)


INVALID = [
    ("bogd", dict(budget=1), "budget"),
    ("norma_r", dict(eta=2.0, lam=0.5), "eta \\* lam"),
    ("norma_r", dict(nu=1.5), "nu"),
    ("bogd", dict(decay="sometimes"), "decay"),
    ("projectron", dict(eta=0.0), "eta"),
    ("forgetron", dict(phi_root="larger"), "phi_root"),
    ("mforgetron", dict(margin="pairwise"), "margin"),
    ("bogd", dict(gamma=0.0), "gamma"),
    ("mbogd", dict(removal="newest"), "removal"),
    ("projectron_pp", dict(margin_test="U"), "margin_test"),
    ("mbpa_s", dict(C=-1.0), "^C must"),
    ("projectron_r", dict(projection_eta=0.0), "projection_eta"),
    ("forgetron_r", dict(eta=0.0), "eta"),
    ("rbp", dict(seed=2**64), r"^seed must be < 2\*\*64"),  # once accepted, failing at the first update
    ("bogd_r", dict(seed=2**64), r"^seed must be < 2\*\*64"),
]


@pytest.mark.parametrize(("name", "params", "field"), INVALID)
def test_invalid_parameters_name_the_field(name, params, field):
    with pytest.raises(ValueError, match=field):
        make(name, **params)


def test_forgetron_without_shrinking_removes_the_oldest_as_it_is():
    learner = make("forgetron", budget=1, shrinking=False)
    state, _ = learner.update(learner.init(), far_points(3), np.array([-1, -1, -1]))
    np.testing.assert_array_equal(state.alpha, [-1.0])
    np.testing.assert_array_equal(state.stamp, [2])
    assert float(state.damage) == pytest.approx(1.0 + 1.0)  # Psi(1, 1) = 1 per removal, recorded


# -- one class per algorithm -----------------------------------------------------------------------
PER_TASK = {"mrbp": "rbp", "rbp_r": "rbp", "mforgetron": "forgetron", "forgetron_r": "forgetron", "mprojectron": "projectron",
            "mprojectron_pp": "projectron_pp", "projectron_r": "projectron", "mbpa_s": "bpa_s", "mbogd": "bogd", "bogd_r": "bogd"}


@pytest.mark.parametrize(("name", "algorithm"), sorted(PER_TASK.items()))
def test_a_per_task_name_is_its_algorithms_class_naming_another_config(name, algorithm):
    cls, base = okl_core.learner_class(name), okl_core.learner_class(algorithm)
    assert issubclass(cls, base) and cls.config_class is not base.config_class
    assert {k for k in vars(cls) if not k.startswith("__")} == {"name", "config_class", "conformance_params"}  # no behaviour of its own: the algorithm's class learns every task
    learner = make(name)
    assert learner.task == learner.config.task != base.config_class.task
    state, _ = learner.update(learner.init(), *stream_for(learner, 60, seed=3))
    loaded, loaded_state = okl_core.model_from_bytes(okl_core.model_bytes(learner, state))
    assert type(loaded) is cls and loaded.name == name and loaded.config == learner.config
    assert okl_core.model_bytes(loaded, loaded_state) == okl_core.model_bytes(learner, state)
