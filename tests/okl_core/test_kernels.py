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
    rng = np.random.default_rng(d + m)
    for _ in range(10):
        columns = np.ascontiguousarray(np.round(rng.random((d, m)) * 255) / 255 * (rng.random((d, m)) < density))
        x = np.round(rng.random(d) * 255) / 255 * (rng.random(d) < density)
        sq_norms = (columns * columns).sum(0)
        got = row_against_buffer(name, 2.5, x, columns, sq_norms)
        reference = kernels.reference_row_against_buffer(name, 2.5, x, columns, sq_norms)
        assert got.tobytes() == reference.tobytes()
        np.testing.assert_allclose(got, exact_kernel(name, columns.T, x[None, :], 2.5)[:, 0], rtol=1e-12, atol=1e-15)


def _pairwise(X, Y, kernel, sigma):
    """The kernels written out pair by pair (the definitions, no shortcuts)."""
    out = np.empty((len(X), len(Y)))
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            diff = np.abs(x - y)
            out[i, j] = {"gaussian": np.exp(-(diff @ diff) / (2 * sigma**2)), "laplacian": np.exp(-diff.sum() / sigma),
                         "cauchy": np.prod(1 / (1 + (diff / sigma) ** 2))}[kernel]
    return out


@pytest.mark.parametrize("name", ["laplacian", "cauchy"])
def test_the_coordinate_kernels_are_computed_in_bounded_chunks_with_the_same_numbers(name, monkeypatch):
    """The (n, m, d) block of differences was held whole: 11.7 GiB for 1,000 MNIST rows (median
    with the Laplacian kernel). In chunks of a few rows the numbers are the same bytes."""
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(37, 5)), rng.normal(size=(11, 5))
    whole = exact_kernel(name, X, Y, 1.5)
    monkeypatch.setattr(kernels, "_CHUNK_BYTES", 8 * 11 * 5 * 3)  # three rows at a time
    np.testing.assert_array_equal(exact_kernel(name, X, Y, 1.5), whole)
    np.testing.assert_array_equal(whole, _pairwise(X, Y, name, 1.5))


def test_the_median_heuristic_of_rows_far_from_the_origin():
    """Distances from norms and a product lost every digit at an offset of 1e8 (4.0 instead of 2.85)."""
    Z = np.random.default_rng(0).normal(size=(60, 4))
    iu = np.triu_indices(60, k=1)
    direct = np.median(np.sqrt(((Z[:, None] - Z[None]) ** 2).sum(-1))[iu])
    assert kernels.median_heuristic(Z + 1e8) == pytest.approx(direct, rel=1e-6)
    assert kernels.median_heuristic(Z) == pytest.approx(direct, rel=1e-12)
    assert kernels.median_heuristic(Z, metric="l1") == pytest.approx(np.median(np.abs(Z[:, None] - Z[None]).sum(-1)[iu]), rel=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda Z: kernels.median_heuristic(Z, n_samples=1), r"^n_samples must be an integer >= 2, got 1$"),
    (lambda Z: kernels.median_heuristic(Z, n_samples=2.5), r"^n_samples must be an integer >= 2, got 2.5$"),
    (lambda Z: kernels.median_heuristic(np.where(Z > 1, np.nan, Z)), r"^median heuristic: the sampled rows hold NaN or inf$"),
    (lambda Z: exact_kernel("laplacian", Z, Z, -1.0), r"^sigma must be a finite number > 0, got -1.0$"),  # once values up to 71.8
    (lambda Z: exact_kernel("gaussian", Z, Z, 0.0), r"^sigma must be a finite number > 0, got 0.0$"),
    (lambda Z: exact_kernel("gaussian", Z, Z[:, :2], 1.0), r"^kernel rows must be 2-d arrays of the same width, got shapes \(20, 4\) and \(20, 2\)$"),
    (lambda Z: Kernel("gaussian", float("nan")), r"^sigma must be a finite number > 0, got nan$"),
])
def test_bad_kernel_and_median_arguments_are_named(call, message):
    Z = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match=message):
        call(Z)
