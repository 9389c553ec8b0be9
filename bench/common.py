"""Shared helpers for the benchmarks: timing, MNIST-shaped data, ../shared/data lookup."""

from __future__ import annotations

import os
import pathlib
import time

import numpy as np

from okl_core.data import read_idx, read_libsvm

# The real data sets (a9a, mnist, cep): $OKL_SHARED_DATA, else a `shared/data` folder beside the checkout.
SHARED_DATA = pathlib.Path(os.environ.get("OKL_SHARED_DATA") or pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data")


def machine_line() -> str:
    """Cores, load and the BLAS kernels this process runs, for a benchmark's header.

    Figures from different machines or sessions compare only when these match: OpenBLAS
    picks its kernels by CPU, and some machines pin them with ``OPENBLAS_CORETYPE`` (this
    project's machines set ``Haswell`` on some processors; without it numpy 2.4's OpenBLAS
    runs SkylakeX kernels there, and the float32 product ``(4096, 784) @ (784, 800)`` takes
    20.7 ms instead of 38.9 ms).
    """
    from threadpoolctl import threadpool_info

    kernels = sorted({f"{lib.get('architecture')} ({lib['internal_api']} {lib['version']})" for lib in threadpool_info() if lib["user_api"] == "blas"})
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    return (f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; BLAS kernels: {', '.join(kernels) or 'none loaded'}"
            + (f" (OPENBLAS_CORETYPE={pinned} in the environment)" if pinned else ""))


def best_of(fn, repeats: int = 3, clock=time.perf_counter) -> float:
    """Smallest time of ``repeats`` calls of ``fn`` (seconds); the least noisy estimate.

    ``clock`` is wall time by default; ``time.process_time`` (this process's CPU time)
    is steadier for single-threaded code on a machine shared with other jobs.
    """
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def mnist_shaped(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """MNIST test digits when ../shared/data has them (pixels in [0, 1]), else random ones."""
    images = SHARED_DATA / "mnist" / "t10k-images-idx3-ubyte.gz"
    labels = SHARED_DATA / "mnist" / "t10k-labels-idx1-ubyte.gz"
    if images.exists() and labels.exists():
        X, y = read_idx(images, labels)
        reps = -(-n // len(y))
        return np.tile(X, (reps, 1))[:n], np.tile(y, reps)[:n]
    rng = np.random.default_rng(seed)
    return rng.random((n, 784), dtype=np.float32), rng.integers(0, 10, n)


def a9a_shaped(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` a9a rows (123 binary inputs, labels +-1) when ../shared/data has them,
    else random rows with a9a's density (11% ones)."""
    path = SHARED_DATA / "a9a" / "a9a"
    if path.exists():
        X, y = read_libsvm(path, n_features=123)
        return X[:n], y[:n].astype(np.float64)
    rng = np.random.default_rng(seed)
    X = (rng.random((n, 123)) < 0.11).astype(np.float32)
    return X, np.where(X @ rng.standard_normal(123) > 0, 1.0, -1.0)
