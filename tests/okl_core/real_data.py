"""Loaders for ../shared/data used by the reproduction tests (skip when the data is absent)."""

import gzip

import numpy as np

from tests.conftest import shared_data


def _idx(path):
    with gzip.open(path) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def mnist_test():
    """The 10,000 MNIST test digits: X float32 in [0, 1] (784 columns), y int 0..9."""
    images = _idx(shared_data("mnist", "t10k-images-idx3-ubyte.gz"))
    labels = _idx(shared_data("mnist", "t10k-labels-idx1-ubyte.gz"))
    return images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.int64)


def a9a(split="a9a"):
    """a9a (train) or a9a.t (test): dense float32 X with 123 columns, y in {-1, +1}."""
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(shared_data("a9a", split)), n_features=123)
    return X.toarray().astype(np.float32), y.astype(np.int64)
