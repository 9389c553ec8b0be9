"""Kernel OGD / Perceptron without budget against a literal transcription of the rules."""

import numpy as np
import pytest

import okl_core
from okl_core.features import exact_kernel
from okl_core.kernels import reference_row_against_buffer
from okl_core.testing import conformance_learner

from .learner_data import tiny_problem
from tests.okl_core.reference.folds import use_reference_folds


def _reference(X, y, rule, sigma, n_outputs=None):
    """The spec's fold: f(x) = sum_i alpha_i k(x_i, x), append x when ``rule`` fires."""
    support, alpha, scores = [], [], []
    for x, label in zip(X.astype(np.float64), y):
        k = exact_kernel("gaussian", x[None], np.array(support).reshape(-1, X.shape[1]), sigma)[0]
        f = k @ np.array(alpha).reshape((len(support),) + ((n_outputs,) if n_outputs else ()))
        scores.append(f)
        coef = rule(f, label)
        if coef is not None:
            support.append(x)
            alpha.append(coef)
    return np.array(scores), np.array(support), np.array(alpha)


def test_kernel_ogd_binary_matches_reference():
    X, y = tiny_problem("binary", 3, n=150)
    learner = okl_core.make_learner("kernel_ogd", n_inputs=3, sigma=0.8, eta=0.3)
    state, scores = learner.update(learner.init(), X, y)
    ref_scores, support, alpha = _reference(X, y, lambda f, t: 0.3 * t if t * f < 1 else None, 0.8)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(state.support, support.astype(np.float32))
    np.testing.assert_allclose(state.alpha, alpha)
    assert 0 < len(support) < len(y)


def test_multiclass_kernel_ogd_matches_reference():
    X, y = tiny_problem("multiclass", 3, n=120, n_classes=4)

    def rule(f, label):
        rivals = f.copy()
        rivals[label] = -np.inf
        s = int(np.argmax(rivals))
        if f[label] - f[s] >= 1:
            return None
        coef = np.zeros(4)
        coef[label], coef[s] = 0.5, -0.5
        return coef

    learner = okl_core.make_learner("mkernel_ogd", n_inputs=3, n_classes=4, sigma=0.8, eta=0.5)
    state, scores = learner.update(learner.init(), X, y)
    ref_scores, _, alpha = _reference(X, y, rule, 0.8, n_outputs=4)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(state.alpha, alpha)


@pytest.mark.parametrize("threshold", ["absolute", "squared"])
def test_regression_kernel_ogd_matches_reference_for_both_thresholds(threshold):
    X, y = tiny_problem("regression", 3, n=120)
    eps = 0.05

    def rule(f, target):
        r = target - f
        return 0.2 * r if (r * r if threshold == "squared" else abs(r)) > eps else None

    learner = okl_core.make_learner("kernel_ogd_r", n_inputs=3, sigma=0.8, eta=0.2, eps=eps, threshold=threshold)
    state, scores = learner.update(learner.init(), X, y)
    ref_scores, support, _ = _reference(X, y, rule, 0.8)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-10, atol=1e-12)
    assert len(state.support) == len(support)


def test_thresholds_differ():
    X, y = tiny_problem("regression", 3, n=120)
    sizes = []
    for threshold in ("absolute", "squared"):
        learner = okl_core.make_learner("kernel_ogd_r", n_inputs=3, sigma=0.8, eta=0.2, eps=0.05, threshold=threshold)
        state, _ = learner.update(learner.init(), X, y)
        sizes.append(len(state.support))
    assert sizes[0] > sizes[1]  # r^2 > 0.05 means |r| > 0.22: the squared reading fires less


def test_perceptron_adds_labels_on_mistakes_only_with_sign_zero_positive():
    learner = okl_core.make_learner("kernel_perceptron", n_inputs=2, sigma=1.0)
    X = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 3.0]], dtype=np.float32)
    # f = 0 predicts +1: a -1 label is a mistake, a +1 label is not.
    state, scores = learner.update(learner.init(), X[:1], np.array([1]))
    assert len(state.support) == 0 and scores[0] == 0.0
    state, _ = learner.update(state, X[1:2], np.array([-1]))
    np.testing.assert_array_equal(state.alpha, [-1.0])
    X2, y2 = tiny_problem("binary", 2, n=200)
    state, scores = learner.update(learner.init(), X2, y2)
    mistakes = learner.to_labels(scores) != y2
    assert len(state.support) == mistakes.sum()
    np.testing.assert_array_equal(state.alpha, y2[mistakes])


def test_merge_is_the_weighted_average_of_the_functions():
    X, y = tiny_problem("binary", 3, n=160)
    learner = okl_core.make_learner("kernel_ogd", n_inputs=3, sigma=0.8)
    a, _ = learner.update(learner.init(), X[:60], y[:60])
    b, _ = learner.update(learner.init(), X[60:], y[60:])
    merged = okl_core.merge_states(learner, [a, b])
    expected = (60 * learner.predict(a, X) + 100 * learner.predict(b, X)) / 160
    np.testing.assert_allclose(learner.predict(merged, X), expected, rtol=1e-12, atol=1e-12)
    assert len(merged.support) == len(a.support) + len(b.support) and int(merged.n_seen) == 160


def test_invalid_parameters():
    with pytest.raises(ValueError, match="kernel"):
        okl_core.make_learner("kernel_ogd", n_inputs=3, kernel="poly")
    with pytest.raises(ValueError, match="threshold"):
        okl_core.make_learner("kernel_ogd_r", n_inputs=3, threshold="cubic")
    with pytest.raises(ValueError, match="n_classes"):
        okl_core.make_learner("mkernel_ogd", n_inputs=3, n_classes=1)


@pytest.mark.parametrize("name", ["kernel_ogd", "kernel_perceptron"])
def test_the_support_set_is_capped_by_max_support(name):
    learner = okl_core.make_learner(name, n_inputs=3, sigma=1.0, max_support=5)
    X = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    y = np.where(np.arange(40) % 2 == 0, 1, -1)
    state = learner.init()
    with pytest.raises(ValueError, match="max_support=5"):
        for i in range(40):
            state, _ = learner.update(state, X[i : i + 1], y[i : i + 1])
    assert len(state.support) == 5


def test_a_model_file_from_before_max_support_loads_with_the_default(monkeypatch):
    learner = okl_core.make_learner("kernel_ogd", n_inputs=2, sigma=1.0)
    state, _ = learner.update(learner.init(), np.ones((3, 2), np.float32), np.array([1, -1, 1]))
    data = okl_core.model_bytes(learner, state)
    header = okl_core.state._header

    def old_header(learner, state):  # the header as written before the field existed
        written = header(learner, state)
        del written["config"]["max_support"]
        return written

    monkeypatch.setattr(okl_core.state, "_header", old_header)
    old = okl_core.model_bytes(learner, state)
    monkeypatch.undo()
    assert old != data
    loaded, loaded_state = okl_core.model_from_bytes(old)
    assert loaded.config.max_support == 100_000
    assert okl_core.model_bytes(loaded, loaded_state) == data


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "cauchy"])
@pytest.mark.parametrize("n_inputs", [3, 37, 130])
@pytest.mark.parametrize("reference", [False, True], ids=["compiled", "numpy"])
def test_batch_fold_scores_with_the_kernel_row_against_the_added_rows(monkeypatch, kernel, n_inputs, reference):
    # Within a batch the fold (compiled, or the numpy reference) scores each row
    # against the rows it added, kept as float64 columns with their squared norms (x . x):
    # the bits of reference_row_against_buffer (fixed summation orders, the C library's
    # exp), and within rounding of exact_kernel.
    if reference:
        use_reference_folds(monkeypatch)
    rng = np.random.default_rng(n_inputs)
    X = (np.round(rng.random((160, n_inputs)) * 255) / 255).astype(np.float32)
    y = np.where(rng.random(160) < 0.5, 1.0, -1.0)
    sigma = 0.5 * np.sqrt(n_inputs)
    learner = okl_core.make_learner("kernel_ogd", n_inputs=n_inputs, kernel=kernel, sigma=sigma, eta=0.3)
    state, scores = learner.update(learner.init(), X, y)
    columns, sq, alpha, expected, gram = np.zeros((n_inputs, 0)), np.zeros(0), np.zeros(0), [], []
    for x, label in zip(X.astype(np.float64), y):
        f = reference_row_against_buffer(kernel, sigma, x, columns, sq) @ alpha if len(alpha) else 0.0
        expected.append(f)
        gram.append(exact_kernel(kernel, x[None], columns.T, sigma)[0] @ alpha)
        if label * f < 1:
            columns, sq, alpha = np.column_stack([columns, x]), np.append(sq, x @ x), np.append(alpha, 0.3 * label)
    assert len(alpha) > 20
    assert np.asarray(expected).tobytes() == scores.tobytes()
    np.testing.assert_array_equal(state.alpha, alpha)
    np.testing.assert_allclose(scores, gram, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("jit", ["compiled", "numpy"])
def test_a_support_set_over_max_support_is_refused_before_the_fold(monkeypatch, jit):
    """A merged state over the cap (it predicts: a job's final model) and a state from a learner
    with a larger cap are refused by update with the cap's message (the compiled fold once ran
    past the cap or crashed)."""
    if jit == "numpy":
        use_reference_folds(monkeypatch)
    small = conformance_learner("kernel_ogd", max_support=50)
    X, y = tiny_problem("binary", 4, n=200)
    a, _ = small.update(small.init(), X[:40], y[:40])
    b, _ = small.update(small.init(), X[40:80], y[40:80])
    merged = okl_core.merge_states(small, [a, b])
    held = len(merged.alpha)
    assert held == len(a.alpha) + len(b.alpha) > 50
    np.testing.assert_allclose(small.predict(merged, X), (40 * small.predict(a, X) + 40 * small.predict(b, X)) / 80, rtol=1e-12, atol=1e-12)
    with pytest.raises(okl_core.CapacityError, match=rf"^kernel_ogd: the state's support set holds {held} rows, more than max_support=50; "):
        small.update(merged, X[80:81], y[80:81])
    large = conformance_learner("kernel_ogd", max_support=1000)
    big, _ = large.update(large.init(), X[:120], y[:120])
    held = len(big.alpha)
    assert held > 50
    for rows in (slice(80, 81), slice(80, 140)):
        with pytest.raises(ValueError, match=rf"^kernel_ogd: the state's support set holds {held} rows, more than max_support=50; "):
            small.update(big, X[rows], y[rows])


def test_oks_refuses_a_state_over_its_max_support():
    small = conformance_learner("oks", max_support=20)
    large = conformance_learner("oks", max_support=1000)
    X, y = tiny_problem("binary", 4, n=120)
    big, _ = large.update(large.init(), X, y)
    assert int(big.sv_count.sum()) > 20
    with pytest.raises(ValueError, match=r"^oks: the state's support set holds \d+ rows, more than max_support=20; "):
        small.update(big, X[:5], y[:5])
