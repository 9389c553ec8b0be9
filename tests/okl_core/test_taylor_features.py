"""Taylor basis of the Gaussian kernel (spec/pkawv.md) against the exact kernel and its series."""

import itertools
import math

import numpy as np
import pytest

from okl_core.features import TaylorFeatures, exact_kernel, taylor_basis_size, taylor_truncation_bound


def test_basis_size_is_the_binomial_of_the_spec():
    # spec/pkawv.md: d = 8 gives 45 / 165 / 495 for M = 2 / 3 / 4; d = 18 gives 190 / 1330 / 7315.
    assert [taylor_basis_size(8, m) for m in (2, 3, 4)] == [45, 165, 495]
    assert [taylor_basis_size(18, m) for m in (2, 3, 4)] == [190, 1330, 7315]
    assert TaylorFeatures(18, 3, 1.0).n_outputs == 1330


@pytest.mark.parametrize("d, degree", [(1, 4), (3, 3), (5, 2), (4, 0)])
def test_exponents_are_every_multi_index_once_by_degree(d, degree):
    features = TaylorFeatures(d, degree, 1.0)
    k = features.exponents()
    expected = sorted(c for c in itertools.product(range(degree + 1), repeat=d) if sum(c) <= degree)
    assert sorted(map(tuple, k)) == expected
    assert np.all(np.diff(k.sum(1)) >= 0)  # graded order


def test_each_feature_is_the_papers_product_formula():
    rng = np.random.default_rng(0)
    sigma = 1.3
    features = TaylorFeatures(3, 4, sigma)
    X = rng.uniform(-1, 1, (6, 3))
    k = features.exponents()
    fact = np.array([[math.factorial(v) for v in row] for row in k], dtype=np.float64).prod(1)
    for x, phi in zip(X, features.transform(X)):
        g = np.prod(x**k, axis=1) / (sigma ** k.sum(1) * np.sqrt(fact)) * np.exp(-(x @ x) / (2 * sigma**2))
        np.testing.assert_allclose(phi, g, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("d, degree, sigma", [(2, 2, 1.0), (4, 3, 1.0), (8, 2, 0.8), (3, 6, 2.0)])
def test_kernel_is_the_truncated_series(d, degree, sigma):
    """g(x).g(y) = exp(-(|x|^2+|y|^2)/2s^2) sum_{m<=M} (x.y/s^2)^m / m! exactly."""
    rng = np.random.default_rng(d + degree)
    X, Y = rng.uniform(-1, 1, (10, d)), rng.uniform(-1, 1, (7, d))
    f = TaylorFeatures(d, degree, sigma)
    t = X @ Y.T / sigma**2
    series = sum(t**m / math.factorial(m) for m in range(degree + 1))
    envelope = np.exp(-((X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :]) / (2 * sigma**2))
    np.testing.assert_allclose(f.transform(X) @ f.transform(Y).T, envelope * series, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("d, sigma", [(2, 1.0), (5, 1.0), (8, 1.5)])
def test_reproduces_the_gaussian_kernel_within_the_truncation_bound(d, sigma):
    rng = np.random.default_rng(7)
    X, Y = rng.uniform(-1, 1, (25, d)), rng.uniform(-1, 1, (20, d))
    K = exact_kernel("gaussian", X, Y, sigma)
    errors = []
    for degree in range(1, 7):
        f = TaylorFeatures(d, degree, sigma)
        err = np.abs(f.transform(X) @ f.transform(Y).T - K)
        bound = taylor_truncation_bound(X, Y, sigma, degree)
        assert np.all(err <= bound + 1e-13)
        errors.append(err.max())
        # The bound is not vacuous: somewhere the error reaches a fair share of it.
        assert np.max(err / (bound + 1e-300) * (bound > 1e-10)) > 0.1
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-2 * errors[0]


def test_inputs_are_validated():
    with pytest.raises(ValueError):
        TaylorFeatures(0, 2, 1.0)
    with pytest.raises(ValueError):
        TaylorFeatures(3, -1, 1.0)
    with pytest.raises(ValueError):
        TaylorFeatures(3, 2, 0.0)
    with pytest.raises(ValueError, match="shape"):
        TaylorFeatures(3, 2, 1.0).transform(np.zeros((2, 4)))
