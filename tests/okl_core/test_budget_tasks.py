"""Multiclass and regression budget learners (okl_core.learners.budget) against hand-computed
folds and literal transcriptions (the binary ones and the shared helpers: test_budget.py)."""

import math

import numpy as np
import pytest

import okl_core
from okl_core.features import exact_kernel
from okl_core.learners.budget import forgetron_shrink

from .learner_data import tiny_problem
from .test_budget import SIGMA, Reference, code_tau, far_points, forgetron_phi, k, make, stream_for, uniform


# -- multiclass ------------------------------------------------------------------------------------
def mc_mistake(f, label, C):
    p = int(np.argmax(f))
    if p == label:
        return None
    c = np.zeros(C)
    c[label], c[p] = 1.0, -1.0
    return c


def best_wrong(f, label):
    rivals = np.where(np.arange(len(f)) == label, -np.inf, f)
    s = int(np.argmax(rivals))
    return s, f[label] - f[s]


def ref_mforgetron(X, y, budget, C, margin="class_score", phi_root="feasible"):
    m, scores, M, Q = Reference(budget), [], 0, 0.0
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.row(x) @ np.array(m.alpha) if m.sv else np.zeros(C)
        scores.append(f)
        coef = mc_mistake(f, label, C)
        if coef is None:
            continue
        M += 1
        if not m.full:
            m.put(len(m.sv), x, coef, t)
            continue
        r = int(np.argmin(m.stamp))
        y_r = int(np.argmax(m.alpha[r]))
        sigma = m.alpha[r][y_r]
        f_r = m.row(m.sv[r]) @ np.array(m.alpha) + coef * k(x, m.sv[r])  # f' = f + coef k(x, .)
        mu = f_r[y_r] if margin == "class_score" else best_wrong(f_r, y_r)[1]
        phi = forgetron_phi(sigma, mu, Q, M, phi_root)
        Q += (phi * sigma) ** 2 + 2 * phi * sigma - 2 * phi * sigma * phi * mu
        m.alpha = [phi * a for a in m.alpha]
        m.put(r, x, phi * coef, t)
    return m, np.array(scores)


def ref_mbpa_s(X, y, budget, C_classes, C):
    m, scores = Reference(budget), []
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.row(x) @ np.array(m.alpha) if m.sv else np.zeros(C_classes)
        scores.append(f)
        s, margin = best_wrong(f, label)
        if margin >= 1:
            continue
        step = np.zeros(C_classes)
        step[label], step[s] = 1.0, -1.0
        step *= min(C, (1 - margin) / 2)
        if not m.full:
            m.put(len(m.sv), x, step, t)
            continue
        best = None  # the PA-I objective for each candidate r, the RKHS norm from the Gram matrix
        for r in range(budget):
            beta = m.alpha[r] * k(m.sv[r], x) + step
            pts = np.array([m.sv[r], x])
            gram = exact_kernel("gaussian", pts, pts, SIGMA)
            diff = np.array([-m.alpha[r], beta])  # (2, C): the removed and the new expansion terms
            new_f = f - m.alpha[r] * k(m.sv[r], x) + beta
            value = 0.5 * np.trace(diff.T @ gram @ diff) + C * max(0.0, 1 - best_wrong(new_f, label)[1])
            if best is None or value < best[0] - 1e-12:
                best = (value, r, beta)
        m.put(best[1], x, best[2], t)
    return m, np.array(scores)


def ref_multiclass(name, X, y, budget, C, seed=0, eta=0.0, lam=0.0, removal="random", margin_test="eta"):
    m, scores = Reference(budget), []
    for t, (x, label) in enumerate(zip(X, y)):
        f = m.row(x) @ np.array(m.alpha) if m.sv else np.zeros(C)
        scores.append(f)
        if name == "mprojectron_pp" and m.sv and mc_mistake(f, label, C) is None:
            s, margin = best_wrong(f, label)
            K = exact_kernel("gaussian", np.array(m.sv), np.array(m.sv), SIGMA)
            d = np.linalg.solve(K, m.row(x))
            delta2 = max(1 - m.row(x) @ d, 0.0)
            loss, norm2 = 1 - margin, 2 * (1 - delta2)
            if loss > 0 and margin_test == "code":
                tau = code_tau(loss, 1 - delta2, delta2, budget)
                c = np.zeros(C)
                c[label], c[s] = 1.0, -1.0
                m.alpha = list(np.array(m.alpha) + tau * np.outer(d, c))
            elif loss > 0 and norm2 > 0 and loss - delta2 / eta > 0:
                tau = min(loss / norm2, 1, 2 * (loss - delta2 / eta) / norm2)
                c = np.zeros(C)
                c[label], c[s] = 1.0, -1.0
                m.alpha = list(np.array(m.alpha) + tau * np.outer(d, c))
            continue
        if name == "mbogd":
            m.alpha = [(1 - eta * lam) * a for a in m.alpha]
            rivals = np.where(np.arange(C) == label, -np.inf, f)
            s = int(np.argmax(rivals))
            if f[label] - f[s] >= 1:
                continue
            coef = np.zeros(C)
            coef[label], coef[s] = eta, -eta
        else:
            coef = mc_mistake(f, label, C)
            if coef is None:
                continue
        if name in ("mprojectron", "mprojectron_pp") and m.sv:
            K = exact_kernel("gaussian", np.array(m.sv), np.array(m.sv), SIGMA)
            d = np.linalg.solve(K, m.row(x))
            if 1 - m.row(x) @ d <= eta or m.full:
                m.alpha = list(np.array(m.alpha) + np.outer(d, coef))
                continue
        if m.full and removal == "oldest":
            m.put(int(np.argmin(m.stamp)), x, coef, t)
        elif m.full:
            if name == "mbogd":
                m.alpha = [a * budget / (budget - 1) for a in m.alpha]
            m.put(min(int(uniform(seed, t) * budget), budget - 1), x, coef, t)
        else:
            m.put(len(m.sv), x, coef, t)
    return m, np.array(scores)


MULTICLASS_CASES = {
    "mrbp": {"seed": 4}, "mprojectron": {"eta": 0.2}, "mprojectron_pp": {"eta": 0.5},
    "mprojectron_pp-code": {"eta": 0.5, "margin_test": "code"},
    "mbogd": {"seed": 6, "eta": 0.4, "lam": 0.2}, "mbogd-oldest": {"eta": 0.4, "lam": 0.01, "removal": "oldest"},
    "mforgetron": {}, "mforgetron-multiclass": {"margin": "multiclass"}, "mforgetron-code": {"phi_root": "code"},
    "mbpa_s": {"C": 0.4},
}


def multiclass_reference(case, X, y, budget, C, params):
    name = case.split("-")[0]
    if name == "mforgetron":
        return ref_mforgetron(X, y, budget, C, **params)
    if name == "mbpa_s":
        return ref_mbpa_s(X, y, budget, C, params["C"])
    return ref_multiclass(name, X, y, budget, C, **params)


@pytest.mark.parametrize("case", sorted(MULTICLASS_CASES))
def test_multiclass_learners_match_their_transcriptions(case):
    C, budget, name, params = 4, 12, case.split("-")[0], MULTICLASS_CASES[case]
    learner = make(name, n_inputs=3, n_classes=C, budget=budget, **params)
    X, y = tiny_problem("multiclass", 3, n=200, n_classes=C, seed=12)
    state, scores = learner.update(learner.init(), X, y)
    model, ref_scores = multiclass_reference(case, X.astype(np.float64), y, budget, C, params)
    assert scores.shape == (200, C) and state.alpha.shape == (budget, C)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-9, atol=1e-10)
    n = int(state.n_support)
    assert n == len(model.sv) == budget
    np.testing.assert_array_equal(state.stamp, model.stamp)
    np.testing.assert_allclose(state.alpha, np.array(model.alpha), rtol=1e-9, atol=1e-10)
    if not name.startswith("mprojectron"):
        assert min(model.stamp) > budget  # vectors were replaced
    if name == "mprojectron_pp":  # margin updates happened: the Projectron's model differs
        plain = make("mprojectron", n_inputs=3, n_classes=C, budget=budget, **params)
        assert not np.allclose(plain.update(plain.init(), X, y)[0].alpha, state.alpha)
    if "-" in case:  # the option changed the model on this stream
        default = make(name, n_inputs=3, n_classes=C, budget=budget,
                       **{k: v for k, v in params.items() if k not in ("margin", "phi_root", "removal", "margin_test")})
        assert not np.allclose(default.update(default.init(), X, y)[0].alpha, state.alpha)
    np.testing.assert_allclose(learner.predict(state, X[:5]), exact_kernel("gaussian", X[:5], state.support, SIGMA) @ state.alpha,
                               rtol=1e-12)


def test_mforgetron_shrinks_by_the_margin_of_its_reading_worked_by_hand():
    X = np.array([[0.0, 0.0], [0.776, 0.0]], dtype=np.float32)
    kk = k(X[0], X[1])  # ~0.3
    y = np.array([1, 2])
    # Row 0: f = 0 predicts class 0: add x0 with e1 - e0. Row 1: f = kk (e1 - e0) predicts 1, y = 2:
    # coef e2 - e1, M = 2, full (B = 1): r = x0, sigma = 1, f'(x0) = (e1 - e0) + kk (e2 - e1).
    mus = {"class_score": 1 - kk, "multiclass": (1 - kk) - kk}  # f'_1, or f'_1 - max(f'_0, f'_2)
    for margin, mu in mus.items():
        for root in ("feasible", "code"):
            learner = make("mforgetron", budget=1, margin=margin, phi_root=root)
            state, scores = learner.update(learner.init(), X, y)
            np.testing.assert_allclose(scores[1], [-kk, kk, 0.0], rtol=1e-12)
            # 15/32 M - Q = (1 - 2 mu) phi^2 + 2 phi: the roots of the quadratic, by hand.
            a, b, c = 1 - 2 * mu, 2.0, -15 / 16
            roots = sorted([(-b + math.sqrt(b * b - 4 * a * c)) / (2 * a), (-b - math.sqrt(b * b - 4 * a * c)) / (2 * a)])
            if a < 0:  # class_score: mu = 0.7 > 1/2 -- the code takes the root above 1
                phi = roots[1] if root == "code" else roots[0]
            else:
                phi = [r for r in roots if 0 < r <= 1][0]
            assert (phi > 1) == (root == "code" and margin == "class_score")
            np.testing.assert_allclose(state.alpha[0], [0.0, -phi, phi], rtol=1e-12)
            assert float(state.damage) == pytest.approx(15 / 16, rel=1e-12) and int(state.mistakes) == 2
            np.testing.assert_array_equal(state.stamp, [1])


def test_mbpa_s_takes_half_the_loss_and_removes_the_cheapest_coefficient_vector():
    C = 0.6
    learner = make("mbpa_s", budget=2, C=C)
    X = np.array([[0.0, 0.0], [50.0, 50.0], [0.776, 0.0]], dtype=np.float32)
    y = np.array([0, 1, 2])
    state, scores = learner.update(learner.init(), X, y)
    k02 = k(X[0], X[2])
    # Row 0: f = 0, s = 1 (first wrong class), loss 1, tau = min(C, 1/2): e0 - e1. Row 1 (far): s = 0, e1 - e0.
    tau = 0.5
    f2 = k02 * tau * np.array([1.0, -1.0, 0.0])
    np.testing.assert_allclose(scores[2], f2, rtol=1e-12)
    # Row 2, y = 2: s = 0, loss = 1 + k02 tau, tau2 = min(C, loss / 2); |alpha_r|^2 (1 - k_r^2): x0 costs less.
    tau2 = min(C, (1 + k02 * tau) / 2)
    assert tau2 < C
    np.testing.assert_array_equal(state.stamp, [2, 1])
    np.testing.assert_allclose(state.alpha[0], k02 * tau * np.array([1.0, -1.0, 0.0]) + tau2 * np.array([-1.0, 0.0, 1.0]),
                               rtol=1e-12)
    np.testing.assert_allclose(state.alpha[1], [-tau, tau, 0.0], rtol=1e-12)


def test_mprojectron_pp_projects_a_margin_error_on_the_pair_y_s():
    eta = 3.0
    X = np.array([[0.0, 0.0], [0.12, 0.0]], dtype=np.float32)
    kk = k(X[0], X[1])
    y = np.array([1, 1])
    states = {}
    for name in ("mprojectron", "mprojectron_pp"):
        learner = make(name, budget=5, eta=eta)
        states[name], scores = learner.update(learner.init(), X, y)
    # Row 0: mistake (class 0 predicted), add x0 with e1 - e0. Row 1: f = kk (e1 - e0), right; s = 2
    # (score 0 > -kk), loss = 1 - kk; d = kk, delta^2 = 1 - kk^2, N = 2 kk^2.
    np.testing.assert_allclose(scores[1], [-kk, kk, 0.0], rtol=1e-12)
    loss, delta2 = 1 - kk, 1 - kk * kk
    norm2 = 2 * kk * kk
    assert loss - delta2 / eta > 0
    tau = min(loss / norm2, 1.0, 2 * (loss - delta2 / eta) / norm2)
    np.testing.assert_array_equal(states["mprojectron"].alpha[0], [-1.0, 1.0, 0.0])
    np.testing.assert_allclose(states["mprojectron_pp"].alpha[0], [-1.0, 1.0 + tau * kk, -tau * kk], rtol=1e-12)
    assert int(states["mprojectron_pp"].n_support) == 1


def test_bogd_gamma_bounds_the_largest_coefficient_after_a_removal():
    eta, gamma = 0.5, 1.5
    learner = make("bogd", budget=2, eta=eta, lam=0.0, gamma=gamma, seed=1)
    X, y = far_points(8), np.array([1, -1, 1, -1, 1, -1, 1, -1])
    state, _ = learner.update(learner.init(), X, y)
    # Every far row updates (f = 0); each removal rescales by 2, so without the bound the survivors
    # double at each row; with it the largest is eta gamma and the rest scale with it.
    assert float(np.max(np.abs(state.alpha))) == pytest.approx(eta * gamma, rel=1e-12)
    unbounded = make("bogd", budget=2, eta=eta, lam=0.0, seed=1)
    free, _ = unbounded.update(unbounded.init(), X, y)
    assert float(np.max(np.abs(free.alpha))) > eta * gamma
    np.testing.assert_array_equal(state.stamp, free.stamp)


def test_bogd_oldest_removal_keeps_the_coefficients_unscaled():
    learner = make("bogd", budget=2, eta=0.5, lam=0.2, removal="oldest")
    state, _ = learner.update(learner.init(), far_points(4), np.array([1, -1, 1, -1]))
    g = 1 - 0.5 * 0.2
    np.testing.assert_array_equal(state.stamp, [2, 3])
    np.testing.assert_allclose(state.alpha, [0.5 * g, -0.5], rtol=1e-12)


# -- regression with the FOGD-R rule ---------------------------------------------------------------
def ref_regression(name, X, y, budget, seed, eta, eps, lam=0.0, squared=False):
    m, scores = Reference(budget), []
    for t, (x, target) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        if name == "bogd_r":
            m.alpha = [(1 - eta * lam) * a for a in m.alpha]
        r = target - f
        if (r * r if squared else abs(r)) <= eps:
            continue
        if m.full:
            if name == "bogd_r":
                m.alpha = [a * budget / (budget - 1) for a in m.alpha]
            m.put(min(int(uniform(seed, t) * budget), budget - 1), x, eta * r, t)
        else:
            m.put(len(m.sv), x, eta * r, t)
    return m, scores


@pytest.mark.parametrize("threshold", ["absolute", "squared"])
@pytest.mark.parametrize(("name", "params"), [("rbp_r", {}), ("bogd_r", {"lam": 0.2, "removal": "random"})])
def test_regression_budget_learners_match_their_transcriptions(name, params, threshold):
    eta, eps, seed = 0.3, 0.02, 3
    learner = make(name, n_inputs=3, budget=12, seed=seed, eta=eta, eps=eps, threshold=threshold, **params)
    X, y = tiny_problem("regression", 3, n=160, seed=13)
    state, scores = learner.update(learner.init(), X, y)
    model, ref_scores = ref_regression(name, X.astype(np.float64), y, 12, seed, eta, eps, squared=threshold == "squared",
                                       **{k: v for k, v in params.items() if k != "removal"})  # the reference removes at random
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-9, atol=1e-10)
    assert int(state.n_support) == len(model.sv) == 12 and min(model.stamp) > 12
    np.testing.assert_array_equal(state.stamp, model.stamp)
    np.testing.assert_allclose(state.alpha, model.alpha, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["rbp", "projectron", "mbogd"])
def test_batching_leaves_the_bytes_alone_on_wide_dense_rows(name):
    """784 dense columns: the squared norms of vectors read back from a state must have the bits
    they had when stored (a different summation order would move the scores after a cut)."""
    learner = make(name, n_inputs=784, budget=40, sigma=8.0, **({"n_classes": 10} if name == "mbogd" else {}))
    rng = np.random.default_rng(0)
    X = rng.random((300, 784), dtype=np.float32)
    y = rng.integers(0, 10, 300) if name == "mbogd" else np.where(rng.random(300) < 0.5, 1, -1)
    whole, scores = learner.update(learner.init(), X, y)
    state, parts = learner.init(), []
    for start in range(0, 300, 37):
        state, s = learner.update(state, X[start : start + 37], y[start : start + 37])
        parts.append(s)
    np.testing.assert_array_equal(np.concatenate(parts), scores)
    assert okl_core.model_bytes(learner, state) == okl_core.model_bytes(learner, whole)


@pytest.mark.parametrize("kernel", ["laplacian", "cauchy"])
def test_other_kernels_score_with_the_exact_kernel(kernel):
    learner = make("bpa_s", n_inputs=3, budget=10, kernel=kernel, sigma=1.0)
    X, y = tiny_problem("binary", 3, n=80, seed=14)
    state, scores = learner.update(learner.init(), X, y)
    assert int(state.n_support) == 10
    # Each online score is the expansion of the state before the row: check the last one.
    before, _ = learner.update(learner.init(), X[:-1], y[:-1])
    want = exact_kernel(kernel, X[-1:], before.support[: int(before.n_support)], 1.0) @ before.alpha[: int(before.n_support)]
    np.testing.assert_allclose(scores[-1], want[0], rtol=1e-12)
    np.testing.assert_allclose(learner.predict(before, X[-1:]), want, rtol=1e-12)


# -- regression Forgetron and Projectron (readings: ForgetronRegressor, ProjectronRegressor) -------
def test_forgetron_r_counts_threshold_updates_and_shrinks_the_oldest_by_hand():
    learner = make("forgetron_r", budget=1, eta=0.5, eps=0.1)
    X, y = far_points(4), np.array([2.0, 0.05, 2.0, 2.0])  # far rows: f = 0 at every row
    state, scores = learner.update(learner.init(), X[:3], y[:3])
    np.testing.assert_array_equal(scores, 0.0)
    # Row 0: |2| > 0.1, add 0.5 * 2 = 1; row 1: |0.05| <= 0.1, no update (M stays 1);
    # row 2: M = 2, r = row 0, sigma = 1, mu = sign(1) f'(x0) = 1: 2 phi - phi^2 <= 15/16 -> 3/4.
    assert int(state.mistakes) == 2
    np.testing.assert_allclose(state.alpha, [0.75], rtol=1e-15)
    assert float(state.damage) == pytest.approx(15 / 16, abs=1e-15)
    np.testing.assert_array_equal(state.stamp, [2])
    state, _ = learner.update(state, X[3:], y[3:])
    # Row 3: sigma = mu = 3/4, M = 3, Q = 15/16, as the binary rule's third mistake.
    phi = (1.5 - math.sqrt(1.5**2 - 4 * 0.5625 * (45 / 32 - 15 / 16))) / (2 * 0.5625)
    np.testing.assert_allclose(state.alpha, [phi], rtol=1e-12)
    np.testing.assert_array_equal(state.stamp, [3])
    assert float(state.damage) == pytest.approx(45 / 32, rel=1e-12)


def test_forgetron_r_oldest_vector_margin_is_its_coefficient_sign_times_f_prime():
    """A negative oldest coefficient and a new vector near it: mu = -f'(x_r) (the reading)."""
    learner = make("forgetron_r", budget=2, eta=1.0, eps=0.0)
    X = np.array([[0.0, 0.0], [50.0, 0.0], [0.3, 0.0]], dtype=np.float32)
    y = np.array([-1.0, 0.5, 1.5])
    state, scores = learner.update(learner.init(), X, y)
    k02 = k(X[0], X[2])
    assert scores[2] == pytest.approx(-k02, rel=1e-12)
    c = 1.5 + k02  # eta (y - f) at row 2
    # r = row 0 (alpha -1): sigma = 1, mu = -(f(x0) + c k02) = 1 - c k02; M = 3, Q = 0.
    phi = forgetron_shrink(1.0, 1.0 - c * k02, 0.0, 3)
    assert phi < 1.0  # this removal is shrunk
    np.testing.assert_array_equal(state.stamp, [2, 1])
    np.testing.assert_allclose(state.alpha, [phi * c, phi * 0.5], rtol=1e-12)
    no_shrink = make("forgetron_r", budget=2, eta=1.0, eps=0.0, shrinking=False)
    other, _ = no_shrink.update(no_shrink.init(), X, y)
    np.testing.assert_allclose(other.alpha, [c, 0.5], rtol=1e-12)


def test_projectron_r_projects_a_close_update_adds_a_distant_one_and_projects_when_full():
    eta, eps = 0.5, 0.1
    learner = make("projectron_r", budget=2, eta=eta, eps=eps, projection_eta=0.1)
    X = np.array([[0.0, 0.0], [0.1, 0.0], [3.0, 0.0], [0.0, 0.05], [6.0, 0.0]], dtype=np.float32)
    y = np.array([2.0, 0.0, 1.0, 0.0, 1.0])
    state, _ = learner.update(learner.init(), X[:1], y[:1])
    np.testing.assert_array_equal(state.alpha[:1], [1.0])  # 0.5 (2 - 0)
    # Row 1 near x0: f = k01, c = -0.5 k01; delta^2 = 1 - k01^2 <= 0.1 -> alpha0 += c k01.
    k01 = k(X[0], X[1])
    assert 1 - k01**2 <= 0.1
    state, scores = learner.update(state, X[1:2], y[1:2])
    assert scores[0] == pytest.approx(k01, rel=1e-12) and int(state.n_support) == 1
    a0 = 1.0 - 0.5 * k01 * k01
    assert float(state.alpha[0]) == pytest.approx(a0, rel=1e-12)
    # Row 2 far: f = a0 k02, delta^2 ~ 1 > 0.1 -> add with 0.5 (1 - f).
    k02 = k(X[0], X[2])
    state, scores = learner.update(state, X[2:3], y[2:3])
    assert int(state.n_support) == 2
    assert float(state.alpha[1]) == pytest.approx(0.5 * (1.0 - a0 * k02), rel=1e-12)
    np.testing.assert_allclose(state.gram_inverse, np.linalg.inv([[1.0, k02], [k02, 1.0]]), rtol=1e-12)
    # Row 3 near x0, y = 0: f ~ 0.99 > eps is an update; the set is full, so it is projected.
    before = state.alpha.copy()
    state, scores = learner.update(state, X[3:4], y[3:4])
    K = exact_kernel("gaussian", X[:3:2].astype(np.float64), X[:3:2].astype(np.float64), SIGMA)
    kx = exact_kernel("gaussian", X[3:4].astype(np.float64), X[:3:2].astype(np.float64), SIGMA)[0]
    assert 1 - kx @ np.linalg.solve(K, kx) <= 0.1
    np.testing.assert_allclose(state.alpha, before + eta * (0.0 - scores[0]) * np.linalg.solve(K, kx), rtol=1e-12)
    # Row 4 distant, the set full: projected all the same (delta^2 ~ 1), the set unchanged.
    before = state.alpha.copy()
    state, scores = learner.update(state, X[4:], y[4:])
    kx = exact_kernel("gaussian", X[4:].astype(np.float64), X[:3:2].astype(np.float64), SIGMA)[0]
    np.testing.assert_array_equal(state.stamp, [0, 2])
    np.testing.assert_allclose(state.alpha, before + eta * (1.0 - scores[0]) * np.linalg.solve(K, kx), rtol=1e-12, atol=1e-300)


def test_projectron_r_within_eps_changes_nothing():
    learner = make("projectron_r", budget=3, eta=0.5, eps=0.3)
    state, _ = learner.update(learner.init(), far_points(2), np.array([1.0, 0.2]))
    assert int(state.n_support) == 1 and float(state.alpha[0]) == 0.5


def ref_forgetron_r(X, y, budget, eta, eps):
    m, scores, M, Q = Reference(budget), [], 0, 0.0
    for t, (x, target) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        if abs(target - f) <= eps:
            continue
        M, c = M + 1, eta * (target - f)
        if not m.full:
            m.put(len(m.sv), x, c, t)
            continue
        r = int(np.argmin(m.stamp))
        sigma, y_r = abs(m.alpha[r]), np.sign(m.alpha[r])
        mu = y_r * (m.f(m.sv[r]) + c * k(x, m.sv[r]))
        phi = forgetron_phi(sigma, mu, Q, M)
        Q += (phi * sigma) ** 2 + 2 * phi * sigma - 2 * phi * sigma * phi * mu
        m.alpha = [phi * a for a in m.alpha]
        m.put(r, x, phi * c, t)
    return m, scores


def ref_projectron_r(X, y, budget, eta, eps, projection_eta):
    m, scores = Reference(budget), []
    for t, (x, target) in enumerate(zip(X, y)):
        f = m.f(x)
        scores.append(f)
        if abs(target - f) <= eps:
            continue
        c = eta * (target - f)
        if m.sv:
            kx = m.row(x)
            d = np.linalg.solve(exact_kernel("gaussian", np.array(m.sv), np.array(m.sv), SIGMA), kx)
            if 1 - kx @ d <= projection_eta or m.full:
                m.alpha = list(np.array(m.alpha) + c * d)
                continue
        m.put(len(m.sv), x, c, t)
    return m, scores


@pytest.mark.parametrize("name", ["forgetron_r", "projectron_r"])
def test_regression_forgetron_and_projectron_match_their_transcriptions(name):
    # eta = 1: the Forgetron's shrinking fires on this stream (with eta <= 0.5 it never does,
    # the damage staying below (15/32) M: see ForgetronRegressor).
    eta, eps = 1.0, 0.02
    X, y = tiny_problem("regression", 3, n=160, seed=13)
    if name == "forgetron_r":
        learner = make(name, n_inputs=3, budget=12, eta=eta, eps=eps)
        model, ref_scores = ref_forgetron_r(X.astype(np.float64), y, 12, eta, eps)
    else:
        learner = make(name, n_inputs=3, budget=12, eta=eta, eps=eps, projection_eta=0.3)
        model, ref_scores = ref_projectron_r(X.astype(np.float64), y, 12, eta, eps, 0.3)
    state, scores = learner.update(learner.init(), X, y)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-9, atol=1e-10)
    n = int(state.n_support)
    assert n == len(model.sv) == 12
    np.testing.assert_array_equal(state.stamp, model.stamp)
    np.testing.assert_allclose(state.alpha, model.alpha, rtol=1e-9, atol=1e-10)
    if name == "forgetron_r":
        assert min(model.stamp) > 12  # vectors were replaced
        plain = make(name, n_inputs=3, budget=12, eta=eta, eps=eps, shrinking=False)
        other, _ = plain.update(plain.init(), X, y)
        assert not np.allclose(other.alpha, state.alpha)  # shrinking changed the model
    else:
        assert max(model.stamp) < 150  # full: later updates projected


@pytest.mark.parametrize("name", ["forgetron_r", "projectron_r"])
def test_regression_forgetron_and_projectron_give_the_same_bytes_twice(name):
    learner = make(name, n_inputs=3, budget=10)
    X, y = stream_for(learner, 200, 21)
    a, _ = learner.update(learner.init(), X, y)
    b, _ = learner.update(learner.init(), X, y)
    assert okl_core.model_bytes(learner, a) == okl_core.model_bytes(learner, b)
