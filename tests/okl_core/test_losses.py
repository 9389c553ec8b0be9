"""Every loss's derivative against central finite differences, and known values."""

import numpy as np
import pytest

from okl_core.losses import LOSSES, make_loss, softmax


def _labels(task, n, rng):
    if task == "binary":
        return rng.choice([-1.0, 1.0], n)
    if task == "multiclass":
        return rng.integers(0, 4, n)
    return rng.normal(size=n)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_grad_matches_finite_differences(name):
    loss = LOSSES[name]
    rng = np.random.default_rng(0)
    n = 200
    y = _labels(loss.task, n, rng)
    f = rng.normal(scale=2.0, size=(n, 4) if loss.task == "multiclass" else n)
    h = 1e-6
    grad = loss.grad(f, y)
    assert grad.shape == f.shape
    if loss.task == "multiclass":
        for c in range(4):
            e = np.zeros_like(f)
            e[:, c] = h
            numeric = (loss.value(f + e, y) - loss.value(f - e, y)) / (2 * h)
            np.testing.assert_allclose(grad[:, c], numeric, atol=1e-5)
        return
    numeric = (loss.value(f + h, y) - loss.value(f - h, y)) / (2 * h)
    # Kinks (hinge at yf = 1, absolute at f = y, ...) have measure zero in random data.
    np.testing.assert_allclose(grad, numeric, atol=1e-5)


def test_known_values():
    assert LOSSES["hinge"].value(np.array([0.5]), np.array([1.0]))[0] == 0.5
    assert LOSSES["logistic"].value(np.array([0.0]), np.array([1.0]))[0] == pytest.approx(np.log(2))
    assert LOSSES["logistic"].grad(np.array([1000.0]), np.array([-1.0]))[0] == pytest.approx(1.0)
    assert LOSSES["square"].value(np.array([3.0]), np.array([1.0]))[0] == 2.0
    assert make_loss("quantile", 0.9).value(np.array([0.0]), np.array([1.0]))[0] == pytest.approx(0.9)
    assert make_loss("huber", 2.0).value(np.array([5.0]), np.array([0.0]))[0] == pytest.approx(2.0 * (5.0 - 1.0))
    assert make_loss("eps_insensitive", 0.5).value(np.array([0.2]), np.array([0.0]))[0] == 0.0
    np.testing.assert_allclose(softmax(np.array([[1000.0, 1000.0]])), [[0.5, 0.5]])
    np.testing.assert_allclose(LOSSES["softmax"].grad(np.zeros((1, 3)), np.array([1])).sum(), 0.0, atol=1e-15)


def test_make_loss_rejects_bad_names_and_parameters():
    with pytest.raises(ValueError, match="unknown loss"):
        make_loss("cross_entropy")
    with pytest.raises(ValueError, match="takes no parameter"):
        make_loss("hinge", 1.0)
    with pytest.raises(ValueError, match="tau"):
        make_loss("quantile", 1.5)
