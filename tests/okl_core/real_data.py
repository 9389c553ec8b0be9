"""Loaders for ../shared/data used by the reproduction tests (skip when the data is absent)."""

import numpy as np

from okl_core.data import read_idx, read_libsvm
from tests.conftest import shared_data


def mnist_test():
    """The 10,000 MNIST test digits: X float32 in [0, 1] (784 columns), y int 0..9."""
    return read_idx(shared_data("mnist", "t10k-images-idx3-ubyte.gz"), shared_data("mnist", "t10k-labels-idx1-ubyte.gz"))


def a9a(split="a9a"):
    """a9a (train) or a9a.t (test): dense float32 X with 123 columns, y in {-1, +1}."""
    X, y = read_libsvm(shared_data("a9a", split), n_features=123)
    return X, y.astype(np.int64)
