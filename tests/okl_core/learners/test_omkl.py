"""OMKL-GF and Raker (spec/omkl_gf.md) against direct folds and Monte-Carlo estimates."""

import math

import numpy as np
import pytest

import okl_core
from okl_core.features import FourierFeatures
from okl_core.learners.multikernel import example_uniforms, kernel_seed, normalized_weights
from okl_core.learners.omkl import graph_probabilities
from tests.okl_core.reference.multikernel import draw_graph, observation_probabilities, selective_probabilities


def regression_stream(n=150, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)).astype(np.float32)
    return X, np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] ** 2


def single_kernel_fold(spec, X, y, eta, lam, schedule):
    """Online ridge regression on one seeded feature map: theta -= eta_t grad L."""
    features = FourierFeatures(spec)
    theta, scores = np.zeros(spec.n_outputs), []
    for t, (x, target) in enumerate(zip(X, y), start=1):
        z = features.transform(x[None, :])[0].astype(np.float64)
        f = z @ theta
        scores.append(f)
        eta_t = eta / math.sqrt(t) if schedule == "inv_sqrt_t" else eta
        theta = theta - eta_t * (2.0 * (f - target) * z + 2.0 * lam * theta)
    return np.array(scores), theta


@pytest.mark.parametrize(
    "name, params",
    [
        ("raker", {}),
        ("raker", {"schedule": "constant", "eta": 0.2, "lam": 0.0}),
        ("omkl_gf", {}),
        ("omkl_gf", {"draws_per_node": 3, "selective_nodes": 2, "eta_e": 0.5, "freeze_below": 0.01}),
    ],
)
def test_one_kernel_reduces_to_single_kernel_online_regression(name, params):
    X, y = regression_stream()
    learner = okl_core.make_learner(name, n_inputs=3, kernels="laplacian:1.5", n_components=20, seed=4, **params)
    state, scores = learner.update(learner.init(), X, y)
    cfg = learner.config
    expected_scores, expected_theta = single_kernel_fold(learner.kernel_feature_specs()[0], X, y, cfg.eta, cfg.lam, cfg.schedule)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.theta[0], expected_theta, rtol=1e-5, atol=1e-6)
    assert learner.kernel_weights(state) == {"laplacian:1.5": 1.0}


def test_one_kernel_with_constant_step_and_no_ridge_is_fogd_regression():
    # theta -= eta 2 (f - y) z  is FOGD regression with step 2 eta and threshold 0.
    X, y = regression_stream(n=200)
    gf = okl_core.make_learner("omkl_gf", n_inputs=3, kernels="gaussian:0.7", n_components=16, seed=2,
                               schedule="constant", eta=0.1, lam=0.0)
    fogd = okl_core.make_learner("fogd_r", n_inputs=3, kernel="gaussian", sigma=0.7, n_components=16,
                                 seed=kernel_seed(2, 0), scaled=True, eta=0.2, eps=0.0)
    _, gf_scores = gf.update(gf.init(), X, y)
    _, fogd_scores = fogd.update(fogd.init(), X, y)
    np.testing.assert_allclose(gf_scores, fogd_scores, rtol=1e-5, atol=1e-6)


def test_raker_matches_a_direct_multi_kernel_fold():
    X, y = regression_stream(n=120)
    learner = okl_core.make_learner("raker", n_inputs=3, kernels="gaussian:0.3,gaussian:1,cauchy:2", n_components=12, seed=1)
    state, scores = learner.update(learner.init(), X, y)
    maps = [FourierFeatures(spec) for spec in learner.kernel_feature_specs()]
    theta, log_w, expected = np.zeros((3, 24)), np.zeros(3), []
    for t, (x, target) in enumerate(zip(X, y), start=1):
        Z = np.stack([m.transform(x[None, :])[0].astype(np.float64) for m in maps])
        f = (Z * theta).sum(1)
        w = np.exp(log_w - log_w.max())
        expected.append(w @ f / w.sum())
        losses = (f - target) ** 2 + 1e-3 * (theta**2).sum(1)
        eta_t = 1.0 / math.sqrt(t)
        theta -= eta_t * (2.0 * (f - target)[:, None] * Z + 2e-3 * theta)
        log_w -= eta_t * losses
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.theta, theta, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(normalized_weights(state.log_w), normalized_weights(log_w), rtol=1e-6)


def test_observation_probability_equals_its_monte_carlo_estimate_with_one_selective_node():
    # J = 1: S_t is the set of kernels drawn M times from p_t, so q_n = 1 - (1 - p_t(n))^M exactly.
    N, M, eta_e, n = 7, 3, 0.3, 20000
    log_w = np.log(np.array([0.3, 0.02, 0.25, 0.08, 0.15, 0.1, 0.1]))
    P = graph_probabilities(np.exp(log_w), eta_e, 1)
    q = observation_probabilities(P, np.ones(1), M)
    hits = np.zeros(N)
    for t in range(n):  # the learner's draws: words 1..M of generator (seed, t)
        hits += draw_graph(P, example_uniforms(5, t, 1 + M)[1:], M)[:, 0]
    standard_error = np.sqrt(q * (1 - q) / n)
    assert np.all(np.abs(hits / n - q) < 4.5 * standard_error), (hits / n, q)


def test_observation_probability_ingredients_match_monte_carlo_with_several_selective_nodes():
    # q_n = sum_j p_j [1 - (1 - p_{t,j}(n))^M]: node j's edge probabilities, weighted by p_j.
    # (With J > 1, p_j depends on the drawn graph; the paper's formula takes the p_j of
    # the graph at hand, which the learner follows.)
    N, J, M, eta_e, n = 5, 3, 2, 0.4, 12000
    w = np.array([0.5, 0.05, 0.2, 0.15, 0.1])
    P = graph_probabilities(w, eta_e, J)
    np.testing.assert_allclose(P.sum(1), 1.0)
    np.testing.assert_allclose(P[1], (1 - eta_e**2) * w + eta_e**2 / N)  # eta_e to the power j
    rng = np.random.default_rng(0)
    edges = np.zeros((N, J))
    for _ in range(n):
        edges += draw_graph(P, rng.random(J * M), M)
    edge_probability = 1 - (1 - P.T) ** M
    assert np.all(np.abs(edges / n - edge_probability) < 4.5 * np.sqrt(edge_probability * (1 - edge_probability) / n))
    p_sel = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(observation_probabilities(P, p_sel, M), edge_probability @ p_sel)


def test_selective_probabilities_follow_the_connected_weights():
    log_w = np.log(np.array([0.6, 0.3, 0.1]))
    A = np.array([[1, 0], [1, 1], [0, 1]], dtype=bool)
    u = np.array([0.9, 0.4])
    np.testing.assert_allclose(selective_probabilities(log_w, A, 0.2), 0.8 * u / u.sum() + 0.1)


@pytest.mark.parametrize("frozen_q", ["conditional", "marginal"])
def test_graph_freezing_reuses_the_last_graph(frozen_q):
    X, y = regression_stream(n=60)
    params = dict(n_inputs=3, kernels="gaussian:0.5,gaussian:1,gaussian:2,gaussian:4", n_components=8,
                  draws_per_node=2, selective_nodes=2, eta_e=0.5, seed=3)
    frozen = okl_core.make_learner("omkl_gf", freeze_below=1e9, frozen_q=frozen_q, **params)  # freezes at once
    first, _ = frozen.update(frozen.init(), X[:1], y[:1])
    assert bool(first.frozen)
    state = first
    for i in range(1, len(y)):
        state, _ = frozen.update(state, X[i : i + 1], y[i : i + 1])
        np.testing.assert_array_equal(state.graph, first.graph)
    # Only kernels of the frozen graph are ever used after the first example.
    unused = ~first.graph.any(axis=1)
    np.testing.assert_array_equal(state.n_used[unused], first.n_used[unused])
    free = okl_core.make_learner("omkl_gf", **params)
    free_state, _ = free.update(free.init(), X, y)
    assert not bool(free_state.frozen)
    assert not np.array_equal(free_state.log_w, state.log_w)


def test_frozen_observation_probability_options_differ_as_documented():
    X, y = regression_stream(n=40)
    params = dict(n_inputs=3, kernels="gaussian:0.5,gaussian:1,gaussian:2,gaussian:4", n_components=8,
                  draws_per_node=2, selective_nodes=2, eta_e=0.5, seed=3, freeze_below=1e9)
    states = {}
    for frozen_q in ("conditional", "marginal"):
        learner = okl_core.make_learner("omkl_gf", frozen_q=frozen_q, **params)
        states[frozen_q], _ = learner.update(learner.init(), X, y)
    # Same draws and graph, so the same kernels are used; only the weight updates differ.
    np.testing.assert_array_equal(states["conditional"].n_used, states["marginal"].n_used)
    assert not np.allclose(states["conditional"].log_w, states["marginal"].log_w)


def test_log_domain_weights_survive_enormous_losses():
    X, y = regression_stream(n=50)
    learner = okl_core.make_learner("omkl_gf", n_inputs=3, kernels="gaussian:0.5,gaussian:2,gaussian:8", n_components=8,
                                    draws_per_node=2, eta_e=0.5)
    state, scores = learner.update(learner.init(), X, 1e8 * y)
    assert np.all(np.isfinite(state.log_w)) and np.all(np.isfinite(scores))
    assert math.isclose(sum(learner.kernel_weights(state).values()), 1.0)
    raker = okl_core.make_learner("raker", n_inputs=3, kernels="gaussian:0.5,gaussian:2", n_components=8)
    state, _ = raker.update(raker.init(), X, 1e8 * y)
    assert np.all(np.isfinite(state.log_w))


@pytest.mark.parametrize("name", ["raker", "omkl_gf"])
def test_the_right_bandwidth_wins(name):
    # y = sin(6 x): a bandwidth of 0.25 fits it, 0.002 and 64 cannot.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(1500, 1)).astype(np.float32)
    y = np.sin(6.0 * X[:, 0])
    learner = okl_core.make_learner(name, n_inputs=1, kernels="gaussian:0.002,gaussian:0.25,gaussian:64", n_components=30,
                                    schedule="constant", eta=0.2, seed=1)
    state, _ = learner.update(learner.init(), X, y)
    assert learner.best_kernel(state) == "gaussian:0.25"
    assert learner.kernel_weights(state)["gaussian:0.25"] > 0.9


def test_cost_per_example_touches_only_the_chosen_kernels():
    X, y = regression_stream(n=300)
    learner = okl_core.make_learner("omkl_gf", n_inputs=3, n_components=8, draws_per_node=1, seed=0)
    state, _ = learner.update(learner.init(), X, y)
    assert int(state.n_used.sum()) == 300  # M = J = 1: one kernel per example
    assert len(learner.kernel_usage(state)) == 17


def test_batch_update_is_the_row_by_row_fold_bit_for_bit():
    X, y = regression_stream(n=80)
    learner = okl_core.make_learner("omkl_gf", n_inputs=3, kernels="gaussian:0.5,gaussian:1,gaussian:2", n_components=8,
                                    draws_per_node=2, selective_nodes=2, eta_e=0.5, freeze_below=0.05)
    batch, _ = learner.update(learner.init(), X, y)
    state = learner.init()
    for i in range(0, len(y), 7):
        state, _ = learner.update(state, X[i : i + 7], y[i : i + 7])
    assert okl_core.model_bytes(learner, state) == okl_core.model_bytes(learner, batch)


def test_merge_averages_coefficients_and_log_weights_by_examples_seen():
    X, y = regression_stream(n=90)
    learner = okl_core.make_learner("omkl_gf", n_inputs=3, kernels="gaussian:0.5,gaussian:1,gaussian:2", n_components=8,
                                    draws_per_node=2, freeze_below=1e9)
    a, _ = learner.update(learner.init(), X[:60], y[:60])
    b, _ = learner.update(learner.init(), X[60:], y[60:])
    merged = okl_core.merge_states(learner, [a, b])
    np.testing.assert_allclose(merged.theta, (60 * a.theta + 30 * b.theta) / 90)
    log_w = (60 * a.log_w + 30 * b.log_w) / 90
    np.testing.assert_allclose(merged.log_w, log_w - np.log(np.exp(log_w).sum()))
    np.testing.assert_array_equal(merged.n_used, a.n_used + b.n_used)
    assert int(merged.n_seen) == 90
    # Both froze on the graph of their first example (the same draws): it stays frozen.
    assert bool(a.frozen) and bool(b.frozen) and np.array_equal(a.graph, b.graph)
    assert bool(merged.frozen) and np.array_equal(merged.graph, a.graph)
    # Different frozen graphs: the merged model regenerates its graph.
    other = b._replace(graph=np.roll(b.graph, 1, axis=0))
    assert not bool(okl_core.merge_states(learner, [a, other]).frozen)


@pytest.mark.parametrize(
    "params",
    [
        {"draws_per_node": 0},
        {"selective_nodes": 0},
        {"eta_e": 1.5},
        {"eta_e": 0.0},
        {"frozen_q": "always"},
        {"schedule": "linear"},
        {"lam": -1.0},
        {"n_components": 0},
    ],
)
def test_invalid_omkl_gf_configs(params):
    with pytest.raises(ValueError):
        okl_core.make_learner("omkl_gf", n_inputs=3, **params)


def _first_frozen_example(learner, X, y):
    state = learner.init()
    for i in range(len(y)):
        state, _ = learner.update(state, X[i : i + 1], y[i : i + 1])
        if bool(state.frozen):
            return i + 1, state
    return None, state


def test_freeze_on_reads_the_running_mse_or_one_example_error():
    X, y = regression_stream(n=80)
    params = dict(n_inputs=3, kernels="gaussian:0.5,gaussian:1,gaussian:2,gaussian:4", n_components=8,
                  draws_per_node=2, seed=3)
    free = okl_core.make_learner("omkl_gf", **params)
    free_state, scores = free.update(free.init(), X, y)
    errors = (scores - y) ** 2
    assert float(free_state.sq_error) == pytest.approx(errors.sum(), rel=1e-12)
    mse = np.cumsum(errors) / np.arange(1, len(y) + 1)
    # A threshold between the smallest single error and the smallest running MSE: only the per-example reading fires.
    threshold = float(np.sqrt(errors.min() * mse.min())) if errors.min() > 0 else mse.min() / 2
    assert errors.min() < threshold < mse.min()
    for freeze_on, want in (("example", int(np.argmax(errors < threshold)) + 1), ("mse", None)):
        learner = okl_core.make_learner("omkl_gf", freeze_below=threshold, freeze_on=freeze_on, **params)
        at, _ = _first_frozen_example(learner, X, y)
        assert at == want, freeze_on
    # A threshold the running MSE crosses: the 'mse' reading freezes at the first such example.
    threshold = float(mse[len(y) // 2]) * 1.0000001
    learner = okl_core.make_learner("omkl_gf", freeze_below=threshold, freeze_on="mse", **params)
    at, _ = _first_frozen_example(learner, X, y)
    assert at == int(np.argmax(mse < threshold)) + 1
    with pytest.raises(ValueError, match="freeze_on"):
        okl_core.make_learner("omkl_gf", freeze_on="loss", **params)
