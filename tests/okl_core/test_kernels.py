"""okl_core.kernels: the one implementation of the exact kernels."""

import numpy as np
import pytest

from okl_core import features, kernels
from okl_core.kernels import KERNELS, SELF_SIMILARITY, Kernel, exact_kernel, row_against_buffer


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_is_one_on_the_diagonal(name):
    X = np.random.default_rng(0).normal(size=(20, 6)) * 3.0
    K = exact_kernel(name, X, X, 1.7)
    np.testing.assert_allclose(np.diag(K), SELF_SIMILARITY, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(Kernel(name, 1.7).diagonal(X), np.ones(20))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_row_against_a_buffer_is_the_gram_row(name):
    rng = np.random.default_rng(1)
    S = rng.normal(size=(30, 8)) * (rng.random((30, 8)) < 0.5)
    x = rng.normal(size=8) * (rng.random(8) < 0.5)
    got = row_against_buffer(name, 2.5, x, np.ascontiguousarray(S.T), (S * S).sum(1))
    np.testing.assert_allclose(got, exact_kernel(name, S, x[None, :], 2.5)[:, 0], rtol=1e-12, atol=1e-15)


def test_the_kernel_definitions():
    x, y = np.array([[0.0, 1.0]]), np.array([[2.0, -1.0]])
    assert exact_kernel("gaussian", x, y, 2.0)[0, 0] == pytest.approx(np.exp(-8.0 / 8.0))
    assert exact_kernel("laplacian", x, y, 2.0)[0, 0] == pytest.approx(np.exp(-4.0 / 2.0))
    assert exact_kernel("cauchy", x, y, 2.0)[0, 0] == pytest.approx(1.0 / (1.0 + 1.0) ** 2)


def test_unknown_kernels_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="kernel must be one of"):
        exact_kernel("polynomial", np.zeros((1, 2)), np.zeros((1, 2)), 1.0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        Kernel("polynomial", 1.0)


def test_features_re_exports_the_same_objects():
    assert features.exact_kernel is kernels.exact_kernel
    assert features.median_heuristic is kernels.median_heuristic
    assert features.KERNELS is kernels.KERNELS


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("d, m, density", [(784, 400, 0.2), (123, 300, 0.11), (13, 50, 1.0), (784, 1, 0.2), (123, 1, 0.11), (13, 1, 1.0), (13, 2, 1.0), (130, 1, 0.4), (37, 2, 1.0)])
def test_the_compiled_kernel_row_has_the_reference_bytes(name, d, m, density):
    """The compiled row (okl_core.learners._jit_folds.kernel_row_into) against the numpy
    reference, on MNIST-, a9a- and dense-shaped rows: identical bytes, and within rounding
    of the Gram matrix."""
    pytest.importorskip("numba")
    from okl_core.learners.compiled import kernels as compiled_kernels

    if compiled_kernels() is None:
        pytest.skip("compiled folds disabled (OKL_NO_JIT)")
    rng = np.random.default_rng(d + m)
    for _ in range(10):
        columns = np.ascontiguousarray(np.round(rng.random((d, m)) * 255) / 255 * (rng.random((d, m)) < density))
        x = np.round(rng.random(d) * 255) / 255 * (rng.random(d) < density)
        sq_norms = (columns * columns).sum(0)
        got = row_against_buffer(name, 2.5, x, columns, sq_norms)
        reference = kernels.reference_row_against_buffer(name, 2.5, x, columns, sq_norms)
        assert got.tobytes() == reference.tobytes()
        np.testing.assert_allclose(got, exact_kernel(name, columns.T, x[None, :], 2.5)[:, 0], rtol=1e-12, atol=1e-15)
