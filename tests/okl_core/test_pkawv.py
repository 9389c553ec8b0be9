"""Kernel-AWV / KRR and PKAWV (spec/pkawv.md) against literal references and each other."""

import numpy as np
import pytest

import okl_core
import okl_core.evaluation
from okl_core.features import TaylorFeatures, exact_kernel
from okl_core.learners.base import NotMergeableError
from okl_core.learners.pkawv_nystrom import _kors_uniforms
from okl_core.numerics import single_threaded_blas

from .learner_data import tiny_problem


def _stream(n=60, d=2, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    y = np.sin(3 * X[:, 0]) * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


def _exact_reference(X, y, lam, sigma, ordering):
    """The definitions: KRR k^T (K_{t-1} + lam I)^{-1} Y; AWV k_t^T (K_t + lam I)^{-1} (Y, 0)."""
    X = X.astype(np.float64)
    out = []
    for t in range(len(y)):
        rows = t + 1 if ordering == "awv" else t
        K = exact_kernel("gaussian", X[:rows], X[:rows], sigma) + lam * np.eye(rows)
        k = exact_kernel("gaussian", X[:rows], X[t : t + 1], sigma)[:, 0]
        targets = np.concatenate([y[:t], np.zeros(rows - t)])
        out.append(k @ np.linalg.solve(K, targets) if rows else 0.0)
    return np.array(out)


def _taylor_reference(Phi, y, lam, ordering):
    """spec/pkawv.md Algorithm 1 with the fix u = A_{t-1}^{-1} v (rank-one updates)."""
    A_inv, b, out = np.eye(Phi.shape[1]) / lam, np.zeros(Phi.shape[1]), []
    for v, target in zip(Phi, y):
        u = A_inv @ v
        krr = v @ A_inv @ b
        A_inv = A_inv - np.outer(u, u) / (1.0 + v @ u)
        out.append(krr if ordering == "krr" else v @ A_inv @ b)
        b = b + target * v
    return np.array(out), A_inv, b


# -- exact Kernel-AWV / KRR ---------------------------------------------------------------


@pytest.mark.parametrize("block_rows", [1, 5, 128])
@pytest.mark.parametrize("name, ordering", [("krr", "krr"), ("kernel_awv", "awv")])
def test_exact_learners_match_the_definitions(name, ordering, block_rows):
    X, y = _stream()
    learner = okl_core.make_learner(name, n_inputs=2, sigma=0.7, lam=0.3, block_rows=block_rows)
    state, scores = learner.update(learner.init(), X[:25], y[:25])
    state, more = learner.update(state, X[25:], y[25:])
    np.testing.assert_allclose(np.concatenate([scores, more]), _exact_reference(X, y, 0.3, 0.7, ordering), rtol=1e-9, atol=1e-11)
    K = exact_kernel("gaussian", X, X, 0.7) + 0.3 * np.eye(len(y))
    np.testing.assert_allclose(state.inverse, np.linalg.inv(K), rtol=1e-8, atol=1e-10)


def test_awv_is_krr_shrunk_by_the_schur_complement():
    X, y = _stream()
    krr = okl_core.make_learner("krr", n_inputs=2, sigma=0.7, lam=0.3)
    awv = okl_core.make_learner("kernel_awv", n_inputs=2, sigma=0.7, lam=0.3)
    state, s_krr = krr.update(krr.init(), X, y)
    _, s_awv = awv.update(awv.init(), X, y)
    assert np.all(np.abs(s_awv) <= np.abs(s_krr) + 1e-15) and not np.allclose(s_awv, s_krr)
    assert np.all(np.sign(s_awv) == np.sign(s_krr))


def test_exact_merge_equals_training_on_the_concatenation():
    X, y = _stream()
    learner = okl_core.make_learner("krr", n_inputs=2, sigma=0.7, lam=0.3)
    a, _ = learner.update(learner.init(), X[:20], y[:20])
    b, _ = learner.update(learner.init(), X[20:], y[20:])
    merged = okl_core.merge_states(learner, [a, b])
    whole, _ = learner.update(learner.init(), X, y)
    for got, want in zip(merged, whole):
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "name, params",
    [
        ("krr", {}),
        ("kernel_awv", {}),
        ("pkawv_taylor", {"degree": 3, "ordering": "awv"}),
        ("pkawv_taylor", {"degree": 3, "ordering": "krr"}),
        # beta this small keeps KORS from adding the next row, so the dictionaries agree
        ("pkawv_nystrom", {"ordering": "awv", "mu": 0.05}),
        ("pkawv_nystrom", {"ordering": "krr", "mu": 0.05}),
    ],
)
def test_predict_is_the_online_score_of_the_next_example(name, params):
    X, y = _stream(n=70, d=2)
    learner = okl_core.make_learner(name, n_inputs=2, sigma=0.7, lam=0.3, **params)
    state, _ = learner.update(learner.init(), X[:40], y[:40])
    if name == "pkawv_nystrom":
        learner = okl_core.make_learner(name, n_inputs=2, sigma=0.7, lam=0.3, **{**params, "beta": 1e-12})
    want = [learner.update(state, X[i : i + 1], y[i : i + 1])[1][0] for i in range(40, 70)]
    np.testing.assert_allclose(learner.predict(state, X[40:]), want, rtol=1e-9, atol=1e-12)
    if name == "pkawv_nystrom":
        assert len(state.dictionary) > 3


# -- PKAWV-Taylor -----------------------------------------------------------------------


@pytest.mark.parametrize("ordering", ["awv", "krr"])
@pytest.mark.parametrize("block_rows", [1, 4, 64])
def test_taylor_blocks_match_the_rank_one_algorithm(ordering, block_rows):
    # Sparse inputs so that some blocks leave features at zero (the skipped-feature path).
    rng = np.random.default_rng(2)
    X = (rng.uniform(-1, 1, (90, 5)) * (rng.uniform(size=(90, 5)) < 0.35)).astype(np.float32)
    y = X[:, 0] - X[:, 1] * X[:, 2] + 0.05 * rng.standard_normal(90)
    learner = okl_core.make_learner("pkawv_taylor", n_inputs=5, degree=3, sigma=1.0, lam=0.5, ordering=ordering, block_rows=block_rows)
    state, scores = learner.update(learner.init(), X, y)
    Phi = TaylorFeatures(5, 3, 1.0).transform(X)
    ref, A_inv, b = _taylor_reference(Phi, y, 0.5, ordering)
    np.testing.assert_allclose(scores, ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(state.a_inv, A_inv, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(state.b, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.gram, Phi.T @ Phi, rtol=1e-12, atol=1e-12)
    krr = Phi @ A_inv @ b
    want = krr if ordering == "krr" else krr / (1 + np.einsum("ij,jk,ik->i", Phi, A_inv, Phi))
    np.testing.assert_allclose(learner.predict(state, X), want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name, ordering", [("krr", "krr"), ("kernel_awv", "awv")])
def test_taylor_with_a_large_degree_matches_the_exact_learner(name, ordering):
    X, y = _stream(n=80)
    exact = okl_core.make_learner(name, n_inputs=2, sigma=1.0, lam=0.5)
    _, want = exact.update(exact.init(), X, y)
    for degree, tol in ((3, None), (14, 1e-8)):
        taylor = okl_core.make_learner("pkawv_taylor", n_inputs=2, degree=degree, sigma=1.0, lam=0.5, ordering=ordering, block_rows=16)
        _, got = taylor.update(taylor.init(), X, y)
        if tol is None:  # a low degree is visibly an approximation
            assert np.abs(got - want).max() > 1e-4
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_taylor_refactorisation_rebuilds_the_inverse_at_multiples_of_refactor_every():
    X, y = _stream(n=50, d=3)
    for refactor_every, rebuilt in ((20, True), (10**9, False)):
        learner = okl_core.make_learner("pkawv_taylor", n_inputs=3, degree=2, sigma=1.0, lam=0.2, refactor_every=refactor_every, block_rows=16)
        at_40, _ = learner.update(learner.init(), X[:40], y[:40])  # n_seen crosses 20, then reaches 40
        with single_threaded_blas():  # as update computes it: scipy's dpotri rounds by thread count even at 10 x 10
            assert np.array_equal(at_40.a_inv, learner._inverse(at_40.gram)) == rebuilt
        at_45, _ = learner.update(at_40, X[40:45], y[40:45])
        with single_threaded_blas():
            assert not np.array_equal(at_45.a_inv, learner._inverse(at_45.gram))
        np.testing.assert_allclose(at_45.a_inv, np.linalg.inv(0.2 * np.eye(10) + at_45.gram), rtol=1e-9)


def test_taylor_stays_accurate_over_a_long_stream():
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, (12000, 3)).astype(np.float32)
    y = np.cos(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(len(X))
    learner = okl_core.make_learner("pkawv_taylor", n_inputs=3, degree=3, sigma=1.0, lam=1e-3, refactor_every=10**9, block_rows=1000)
    state, scores = learner.update(learner.init(), X, y)
    fresh = np.linalg.inv(1e-3 * np.eye(20) + state.gram)
    assert np.abs(state.a_inv - fresh).max() <= 1e-6 * np.abs(fresh).max()
    assert np.mean((scores[-5000:] - y[-5000:]) ** 2) < 0.03  # noise variance 0.01 + truncation


def test_taylor_merge_equals_training_on_the_concatenation():
    X, y = _stream(n=120, d=3)
    learner = okl_core.make_learner("pkawv_taylor", n_inputs=3, degree=3, sigma=1.0, lam=0.4)
    a, _ = learner.update(learner.init(), X[:50], y[:50])
    b, _ = learner.update(learner.init(), X[50:], y[50:])
    merged = okl_core.merge_states(learner, [a, b])
    whole, _ = learner.update(learner.init(), X, y)
    assert int(merged.n_seen) == 120
    for field in ("gram", "b", "a_inv"):
        np.testing.assert_allclose(getattr(merged, field), getattr(whole, field), rtol=1e-9, atol=1e-12)
    X_new, y_new = _stream(n=30, d=3, seed=9)
    np.testing.assert_allclose(learner.predict(merged, X_new), learner.predict(whole, X_new), rtol=1e-9, atol=1e-12)
    # ... and training goes on identically from either state.
    _, after_merge = learner.update(merged, X_new, y_new)
    _, after_whole = learner.update(whole, X_new, y_new)
    np.testing.assert_allclose(after_merge, after_whole, rtol=1e-9, atol=1e-12)


def test_taylor_refuses_a_basis_over_the_cap_naming_it():
    with pytest.raises(ValueError, match=r"r = .*325500.*max_basis = 10000"):
        okl_core.make_learner("pkawv_taylor", n_inputs=123, degree=3)
    okl_core.make_learner("pkawv_taylor", n_inputs=123, degree=2)  # r = 7750 is allowed


# -- PKAWV-Nystrom ----------------------------------------------------------------------


def _nystrom_reference(X, y, lam, mu, beta, eps, sigma, seed, ordering):
    """Algorithm 2 with the paper's KORS (bordered W_tmp, tau) and a direct solve for alpha."""
    X = X.astype(np.float64)
    u = _kors_uniforms(seed, 0, len(y))
    chosen, weights, out = [], [], []
    for t in range(len(y)):
        idx = chosen + [t]
        KMM = exact_kernel("gaussian", X[idx], X[idx], sigma)
        s = np.array(weights + [1.0])
        W_tmp = np.linalg.inv(s[:, None] * KMM * s[None, :] + mu * np.eye(len(idx)))
        kS = KMM[:, -1] * s
        tau = (1 + eps) / mu * (KMM[-1, -1] - kS @ W_tmp @ kS)
        p = min(max(beta * tau, 0.0), 1.0)
        if u[t] < p:
            chosen.append(t)
            weights.append(1.0 / p)
        rows = t + 1 if ordering == "awv" else t
        if not chosen:
            out.append(0.0)
            continue
        K = exact_kernel("gaussian", X[:rows], X[chosen], sigma)
        A = K.T @ K + lam * exact_kernel("gaussian", X[chosen], X[chosen], sigma)
        alpha = np.linalg.solve(A, K.T @ np.concatenate([y[:t], np.zeros(rows - t)]))
        out.append(exact_kernel("gaussian", X[t : t + 1], X[chosen], sigma)[0] @ alpha)
    return np.array(out), chosen


@pytest.mark.parametrize("block_rows", [1, 8, 256])
@pytest.mark.parametrize("ordering", ["awv", "krr"])
def test_nystrom_matches_the_literal_algorithm(ordering, block_rows):
    X, y = _stream(n=150, d=2)
    params = dict(n_inputs=2, sigma=0.5, lam=0.5, mu=0.05, beta=1.0, kors_eps=0.5, seed=3, ordering=ordering)
    learner = okl_core.make_learner("pkawv_nystrom", block_rows=block_rows, **params)
    state, scores = learner.update(learner.init(), X[:70], y[:70])
    state, more = learner.update(state, X[70:], y[70:])
    ref, chosen = _nystrom_reference(X, y, 0.5, 0.05, 1.0, 0.5, 0.5, 3, ordering)
    np.testing.assert_array_equal(state.dictionary, chosen)
    assert 5 < len(chosen) < 100  # KORS really subsamples
    np.testing.assert_allclose(np.concatenate([scores, more]), ref, rtol=1e-7, atol=1e-9)
    K = exact_kernel("gaussian", X, X[chosen], 0.5)
    A = K.T @ K + 0.5 * exact_kernel("gaussian", X[chosen], X[chosen], 0.5)
    np.testing.assert_allclose(state.chol.T @ state.chol, A, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(state.kty, K.T @ y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(state.knm, K, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, ordering", [("krr", "krr"), ("kernel_awv", "awv")])
def test_nystrom_keeping_every_point_is_the_exact_learner(name, ordering):
    X, y = _stream(n=40, d=2)
    exact = okl_core.make_learner(name, n_inputs=2, sigma=0.4, lam=0.5)
    _, want = exact.update(exact.init(), X, y)
    # beta this large makes every inclusion probability 1: the dictionary is every input.
    learner = okl_core.make_learner("pkawv_nystrom", n_inputs=2, sigma=0.4, lam=0.5, beta=1e12, ordering=ordering, block_rows=7)
    state, got = learner.update(learner.init(), X, y)
    np.testing.assert_array_equal(state.dictionary, np.arange(40))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_nystrom_dictionary_depends_on_the_seed_not_on_batching():
    X, y = _stream(n=200, d=2)
    learner = okl_core.make_learner("pkawv_nystrom", n_inputs=2, sigma=0.5, lam=0.5, mu=0.1, seed=1)
    whole, _ = learner.update(learner.init(), X, y)
    state = learner.init()
    for start in range(0, 200, 33):
        state, _ = learner.update(state, X[start : start + 33], y[start : start + 33])
    np.testing.assert_array_equal(state.dictionary, whole.dictionary)
    other = okl_core.make_learner("pkawv_nystrom", n_inputs=2, sigma=0.5, lam=0.5, mu=0.1, seed=2)
    assert not np.array_equal(other.update(other.init(), X, y)[0].dictionary, whole.dictionary)


def test_nystrom_caps_fail_clearly():
    X, y = _stream(n=200, d=2)
    small = okl_core.make_learner("pkawv_nystrom", n_inputs=2, sigma=0.3, mu=0.01, max_dictionary=5)
    with pytest.raises(ValueError, match="max_dictionary=5"):
        small.update(small.init(), X, y)
    tight = okl_core.make_learner("pkawv_nystrom", n_inputs=2, sigma=0.3, mu=0.01, max_state_mb=0.01)
    with pytest.raises(ValueError, match="max_state_mb=0.01"):
        tight.update(tight.init(), X, y)
    learner = okl_core.make_learner("pkawv_nystrom", n_inputs=2, sigma=0.3, mu=0.01)
    state, _ = learner.update(learner.init(), X, y)
    assert sum(a.nbytes for a in state) - 8 == learner.state_bytes(len(y), len(state.dictionary))


def test_nystrom_merge_is_refused_with_a_clear_message():
    X, y = tiny_problem("regression", 2, n=30)
    learner = okl_core.make_learner("pkawv_nystrom", n_inputs=2)
    state, _ = learner.update(learner.init(), X, y)
    with pytest.raises(NotMergeableError, match="pkawv_nystrom.*dictionary"):
        okl_core.merge_states(learner, [state, state])


def test_binary_task_learns_labels_as_targets():
    X, y = tiny_problem("binary", 2, n=300)
    for name in ("pkawv_taylor", "pkawv_nystrom", "krr"):
        learner = okl_core.make_learner(name, n_inputs=2, task="binary", sigma=1.0, lam=0.5)
        state, scores = learner.update(learner.init(), X, y)
        assert np.mean(learner.to_labels(scores[100:]) != y[100:]) < 0.08  # classes are balanced
        with pytest.raises(ValueError, match="binary labels"):
            learner.update(state, X[:3], np.array([0.5, 1.0, -1.0]))


# -- a9a against FOGD (slow) --------------------------------------------------------------


def _a9a_stream(n_rows=None):
    """a9a + a9a.t (48,842 rows) in the seed-0 order; labels -1/+1."""
    from sklearn.datasets import load_svmlight_file

    from tests.conftest import shared_data

    parts = [load_svmlight_file(str(shared_data("a9a", split)), n_features=123) for split in ("a9a", "a9a.t")]
    X = np.vstack([p[0].toarray() for p in parts]).astype(np.float32)
    y = np.concatenate([p[1] for p in parts]).astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))[:n_rows]
    return X[order], y[order]


def _online_error(name, X, y, **params):
    learner = okl_core.make_learner(name, n_inputs=X.shape[1], **params)
    state, mistakes = learner.init(), 0
    for i in range(0, len(y), 2048):
        state, scores = learner.update(state, X[i : i + 2048], y[i : i + 2048])
        mistakes += int((learner.to_labels(scores) != y[i : i + 2048]).sum())
    return mistakes / len(y)


@pytest.mark.slow
def test_pkawv_taylor_on_a9a_is_at_least_as_accurate_as_fogd_1000():
    """bench/bench_pkawv_a9a.py has the full table; here the two cheap settings."""
    X, y = _a9a_stream()
    # 10 principal components scaled to [-1, 1] (the PKAWV paper's setting), M = 3: r = 286.
    centred = X - X.mean(0)
    Z = centred @ np.linalg.svd(centred, full_matrices=False)[2][:10].T
    Z = (Z / np.abs(Z).max(0)).astype(np.float32)
    pkawv = _online_error("pkawv_taylor", Z, y, degree=3, sigma=1.0, lam=1.0, task="binary", ordering="krr")
    fogd = min(_online_error("fogd", Z, y, n_components=1000, sigma=1.0, eta=eta) for eta in (2e-3, 2e-4, 2e-5))
    print(f"a9a PCA-10: pkawv_taylor M=3 {100 * pkawv:.2f} %, best fogd D=1000 {100 * fogd:.2f} %")
    assert pkawv <= fogd + 0.002
    # Raw a9a (d = 123, sigma = 8), M = 2: r = 7750, about 5 ms per row: the first 3,000 rows.
    X, y = X[:3000], y[:3000]
    pkawv = _online_error("pkawv_taylor", X, y, degree=2, sigma=8.0, lam=1.0, task="binary", ordering="krr")
    fogd = min(_online_error("fogd", X, y, n_components=1000, sigma=8.0, eta=eta) for eta in (2e-3, 2e-4, 2e-5))
    print(f"a9a raw, 3000 rows: pkawv_taylor M=2 {100 * pkawv:.2f} %, best fogd D=1000 {100 * fogd:.2f} %")
    assert pkawv <= fogd + 0.002


# -- exact learners: a state that grows with the stream is refused up front (issue 17, class 7)
_GROWTH_HINT = ("raise max_rows if about three times that fits in memory (updates and merges copy the inverse), "
                "or use pkawv_taylor or pkawv_nystrom, whose state does not grow with the stream")


@pytest.mark.parametrize("name", ["krr", "kernel_awv"])
@pytest.mark.parametrize("n_rows, max_rows, n_inputs, size", [
    (20_000, 10_000, 123, "3,061 MiB"),  # the 20,000-row stream: refused, not run out of memory
    (10_001, 10_000, 8, "763 MiB"),
    (5_000, 4_999, 1, "191 MiB"),
    (101, 100, 3, "0 MiB"),
])
def test_exact_learners_refuse_a_stream_over_max_rows_with_its_memory(name, n_rows, max_rows, n_inputs, size):
    learner = okl_core.make_learner(name, n_inputs=n_inputs, max_rows=max_rows)
    with pytest.raises(ValueError) as info:
        learner.check_stream(n_rows)
    assert str(info.value) == (f"{name}: a stream ({n_rows} rows: a {size} state holding every example and a {n_rows} x {n_rows} "
                               f"inverse) would exceed max_rows={max_rows}; {_GROWTH_HINT}")
    learner.check_stream(max_rows)  # at the cap: accepted
    assert learner.state_bytes(n_rows) == n_rows * (4 * n_inputs + 8) + 8 * n_rows**2 + 8


def test_the_default_cap_is_ten_thousand_rows_and_changes_no_number():
    learner = okl_core.make_learner("krr", n_inputs=3)
    assert learner.config.max_rows == 10_000 and "max_rows" in learner.runtime_fields
    X, y = _stream(300, 3)
    a = okl_core.evaluation.run_online(learner, X, y, batch_rows=64)
    b = okl_core.evaluation.run_online(okl_core.make_learner("krr", n_inputs=3, max_rows=300), X, y, batch_rows=64)
    assert okl_core.model_bytes(learner, a.state) == okl_core.model_bytes(learner, b.state)  # max_rows is a runtime field


def test_run_online_refuses_before_learning_and_update_refuses_growth_past_the_cap():
    learner = okl_core.make_learner("krr", n_inputs=3, max_rows=100)
    X, y = _stream(150, 3)
    with pytest.raises(ValueError, match=r"^krr: a stream \(150 rows: .* would exceed max_rows=100; raise max_rows"):
        okl_core.evaluation.run_online(learner, X, y)
    state, _ = learner.update(learner.init(), X[:80], y[:80])
    with pytest.raises(ValueError, match=r"^krr: the state after row 150 \(150 rows: .* would exceed max_rows=100"):
        learner.update(state, X[80:], y[80:])
    with pytest.raises(ValueError, match=r"^krr: a stream \(160 rows"):  # a state already holding 80 rows, 80 more
        okl_core.evaluation.run_online(learner, X[:80], y[:80], state=state)


def test_a_merge_past_the_cap_is_refused():
    learner = okl_core.make_learner("kernel_awv", n_inputs=3, max_rows=100)
    X, y = _stream(120, 3)
    base = learner.init()
    a, _ = learner.update(base, X[:60], y[:60])
    b, _ = learner.update(base, X[60:], y[60:])
    with pytest.raises(ValueError, match=r"^kernel_awv: the merged state \(120 rows: .* would exceed max_rows=100"):
        okl_core.merge_states(learner, [a, b], base=base)
