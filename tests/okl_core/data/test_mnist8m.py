"""The infinite-MNIST generator: keyed randomness, batch independence, recognisable digits."""

import numpy as np
import pytest

from okl_core.data.mnist8m import DeformationConfig, Mnist8mGenerator, load_base
from okl_core.random import block_bit_generator
from tests.conftest import shared_data
from tests.data_files import digits


def _generator(seed=3, **config):
    images, labels = digits(40, seed=1)
    return Mnist8mGenerator(images, labels, seed, DeformationConfig(**config)), images, labels


def test_row_words_are_the_documented_keyed_generator():
    gen, _, _ = _generator(seed=11)
    words = gen.row_words([0, 5, 2**40])
    for row, got in zip([0, 5, 2**40], words):
        np.testing.assert_array_equal(got, block_bit_generator(11, row).random_raw(gen.n_words))
    affine, noise = gen.draws([5])
    assert affine.shape == (1, 5) and noise.shape == (1, 2, 28, 28)
    assert 0 < affine.min() and affine.max() < 1 and -1 < noise.min() and noise.max() < 1


def test_row_does_not_depend_on_batching():
    gen, _, _ = _generator()
    whole, y = gen.rows(0, 300)
    singles = np.concatenate([gen.rows(i, i + 1)[0] for i in range(300)])
    uneven = np.concatenate([X for X, _ in gen.shard_batches(0, 300, batch_rows=77)])
    far = gen.rows(250, 300)[0]
    assert whole.tobytes() == singles.tobytes() == uneven.tobytes()
    assert whole[250:].tobytes() == far.tobytes()
    np.testing.assert_array_equal(y, np.arange(300) % 40 % 10)


def test_same_seed_same_bytes_other_seed_other_rows():
    a, _, _ = _generator(seed=5)
    b, _, _ = _generator(seed=5)
    c, _, _ = _generator(seed=6)
    assert a.rows(1000, 1064)[0].tobytes() == b.rows(1000, 1064)[0].tobytes()
    assert not np.array_equal(a.rows(1000, 1064)[0], c.rows(1000, 1064)[0])
    # Rows with the same base digit get different deformations.
    assert not np.array_equal(a.rows(0, 1)[0], a.rows(40, 41)[0])


def test_pixels_in_unit_range_and_originals_option():
    gen, images, _ = _generator(originals=True)
    X, y = gen.rows(30, 50)
    assert X.dtype == np.float32 and X.min() >= 0 and X.max() <= 1
    np.testing.assert_array_equal(X[:10], images[30:40].reshape(10, -1).astype(np.float32) / np.float32(255))
    assert not np.array_equal(X[10], images[0].reshape(-1) / 255)  # row 40: a deformed base digit 0


def test_without_transforms_rows_are_the_base_digits():
    gen, images, _ = _generator(elastic_alpha=0.0, rotation_deg=0.0, scale=0.0, translation=0.0, thickness=0.0)
    X, _ = gen.rows(0, 40)
    np.testing.assert_allclose(X, images.reshape(40, -1) / 255.0, atol=1e-6)


def test_config_validation():
    with pytest.raises(ValueError, match="elastic_sigma"):
        DeformationConfig(elastic_sigma=0)
    with pytest.raises(ValueError, match="rotation_deg"):
        DeformationConfig(rotation_deg=-1)
    with pytest.raises(ValueError, match="thickness"):
        DeformationConfig(thickness=2)
    with pytest.raises(ValueError, match="seed"):
        _generator(seed=-1)


def test_deformed_digits_stay_recognisable():
    images, labels = load_base(shared_data("mnist", "t10k-images-idx3-ubyte.gz"), shared_data("mnist", "t10k-labels-idx1-ubyte.gz"), 0, 8000)
    gen = Mnist8mGenerator(images, labels, seed=2024)
    base = images.reshape(8000, -1).astype(np.float64)
    X, y = gen.rows(3_000_000, 3_002_000)  # base digits 0..1999 after 375 passes over the base
    X = X.astype(np.float64)
    # 1-nearest neighbour among the undeformed base digits.
    d2 = (X * X).sum(1)[:, None] - 2 * X @ base.T + (base * base).sum(1)[None, :]
    accuracy = float((labels[d2.argmin(1)] == y).mean())
    assert accuracy >= 0.90, accuracy
    # ... and the deformations are real: few rows equal their base digit's nearest copy.
    changed = np.abs(X - base[np.arange(3_000_000, 3_002_000) % 8000]).max(1)
    assert (changed > 0.2).mean() > 0.95
