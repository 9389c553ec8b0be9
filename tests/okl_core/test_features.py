"""Random Fourier features against the exact kernels, blocks, cache, median heuristic."""

import numpy as np
import pytest

from okl_core.features import FeatureSpec, FourierFeatures, exact_kernel, median_heuristic


def _points(n=60, d=5, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32) * 0.5


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "cauchy"])
def test_approximation_error_shrinks_as_D_grows(kernel):
    X = _points()
    K = exact_kernel(kernel, X, X, sigma=1.5)
    errors = []
    for D in (64, 1024, 16384):
        Z = FourierFeatures(FeatureSpec(n_inputs=5, n_components=D, kernel=kernel, sigma=1.5, seed=1)).transform(X)
        errors.append(np.abs(Z.astype(np.float64) @ Z.T - K).max())
    # Monte-Carlo error ~ 1/sqrt(D): 16x more frequencies -> about 4x smaller error.
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.05  # bound in the spirit of scikit-learn's RBFSampler tests
    assert np.abs(Z @ Z.T - K).mean() < 0.01


def test_unscaled_features_are_sqrt_D_times_scaled():
    X = _points(10)
    spec = FeatureSpec(n_inputs=5, n_components=100, sigma=2.0, seed=3, scaled=True)
    unscaled = FeatureSpec(n_inputs=5, n_components=100, sigma=2.0, seed=3, scaled=False)
    Zs, Zu = FourierFeatures(spec).transform(X), FourierFeatures(unscaled).transform(X)
    np.testing.assert_allclose(Zu, Zs * 10.0, rtol=1e-5)
    np.testing.assert_allclose((Zu**2).sum(1), 100.0, rtol=1e-5)  # ||z||^2 = D
    assert Zs.dtype == np.float32 and Zs.shape == (10, 200)


def test_any_frequency_range_is_reachable_without_the_blocks_before_it():
    spec = FeatureSpec(n_inputs=4, n_components=1000, sigma=1.0, seed=9, block_size=64)
    full = FourierFeatures(spec).frequencies()
    part = FourierFeatures(spec).frequencies(700, 900)  # a fresh map: blocks 10..14 only
    np.testing.assert_array_equal(part, full[:, 700:900])
    assert full.shape == (4, 1000)


def test_changing_the_seed_or_block_size_changes_the_map():
    X = _points(3)
    base = FourierFeatures(FeatureSpec(n_inputs=5, n_components=16, seed=1)).transform(X)
    assert not np.array_equal(base, FourierFeatures(FeatureSpec(n_inputs=5, n_components=16, seed=2)).transform(X))
    assert not np.array_equal(base, FourierFeatures(FeatureSpec(n_inputs=5, n_components=16, seed=1, block_size=8)).transform(X))


def test_cache_stays_within_its_bound_and_regenerates_identically():
    spec = FeatureSpec(n_inputs=10, n_components=640, block_size=64, seed=0)
    small = FourierFeatures(spec, cache_bytes=3 * 10 * 64 * 4)
    first = small.frequencies().copy()
    assert small._cached_bytes <= 3 * 10 * 64 * 4
    np.testing.assert_array_equal(small.frequencies(), first)


def test_spec_validation_errors_are_clear():
    with pytest.raises(ValueError, match="sigma"):
        FeatureSpec(n_inputs=2, n_components=4, sigma=0.0)
    with pytest.raises(ValueError, match=r"^sigma must be a finite number > 0, got True$"):
        FeatureSpec(n_inputs=2, n_components=4, sigma=True)
    assert FeatureSpec(n_inputs=np.int64(2), n_components=np.int32(4), sigma=np.float32(0.5)).to_dict()["sigma"] == 0.5
    with pytest.raises(ValueError, match="kernel"):
        FeatureSpec(n_inputs=2, n_components=4, kernel="polynomial")
    with pytest.raises(ValueError, match="generator version"):
        FeatureSpec(n_inputs=2, n_components=4, generator_version=0)
    with pytest.raises(ValueError, match="n_components"):
        FeatureSpec(n_inputs=2, n_components=0)
    with pytest.raises(ValueError, match="shape"):
        FourierFeatures(FeatureSpec(n_inputs=2, n_components=4)).transform(np.zeros((3, 5)))


def test_median_heuristic_matches_direct_computation():
    X = _points(40, 3)
    direct = np.median([np.linalg.norm(X[i] - X[j]) for i in range(40) for j in range(i + 1, 40)])
    assert median_heuristic(X) == pytest.approx(direct, rel=1e-6)
    l1 = np.median([np.abs(X[i] - X[j]).sum() for i in range(40) for j in range(i + 1, 40)])
    assert median_heuristic(X, metric="l1") == pytest.approx(l1, rel=1e-6)
    big = _points(5000, 3)
    assert median_heuristic(big, n_samples=500, seed=1) == median_heuristic(big, n_samples=500, seed=1)
    assert median_heuristic(big, n_samples=500) == pytest.approx(median_heuristic(big[:1500]), rel=0.1)
    with pytest.raises(ValueError, match="identical"):
        median_heuristic(np.ones((5, 2)))
