"""Per-example cost of PKAWV: Taylor basis against r, sequential Nystrom against |dictionary|.

Prints two tables, everything measured in this one process on synthetic inputs uniform in
[-1, 1]^d (the paper scales inputs so) with a smooth noisy target:

1. ``pkawv_taylor`` for bases of size r = C(M + d, M): microseconds per example of the
   blocked implementation, the same per r^2 (flat once O(r^2) dominates: the r^2 scaling),
   and the ratio against a literal rank-one transcription of the spec's Algorithm 1
   (``A^{-1} -= u u^T / (1 + v^T u)`` per example, numpy) on the same rows.
2. ``pkawv_nystrom`` with KORS dictionaries of growing size (smaller ``mu``): after a
   warm-up stream, microseconds per example of the next rows, the same per m^2, and the
   ratio against exact online KRR (``krr``, O(t^2) per example) at the same point.

Run: ``python -m bench.bench_pkawv`` (about a minute). On a shared machine set
``OPENBLAS_NUM_THREADS=1``: oversubscribed BLAS threads make small products erratic.
"""

from __future__ import annotations

import time

import numpy as np

import okl_core
from bench.common import best_of
from okl_core.features import TaylorFeatures

TAYLOR_CASES = [(8, 1), (8, 2), (8, 3), (8, 4), (18, 3), (12, 4), (10, 5)]  # r = 9 .. 3003
TAYLOR_ROWS, NAIVE_ROWS = 2048, 256
NYSTROM_MUS = [1.0, 0.1, 0.01, 1e-3, 1e-4]
NYSTROM_D, NYSTROM_SIGMA, WARM_ROWS, TIMED_ROWS = 4, 1.0, 2000, 1000


def stream(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)
    return X, y


def naive_taylor(Phi: np.ndarray, y: np.ndarray, lam: float = 1.0) -> None:
    """The spec's Algorithm 1, one rank-one update per example (the reference)."""
    A_inv, b = np.eye(Phi.shape[1]) / lam, np.zeros(Phi.shape[1])
    for v, target in zip(Phi, y):
        u = A_inv @ v
        A_inv -= np.outer(u, u) / (1.0 + v @ u)
        _ = v @ A_inv @ b
        b += target * v


def taylor_table() -> None:
    print("PKAWV-Taylor: per-example cost against the basis size r (AWV, lam = 1, sigma = 1)")
    print(f"{'d':>3} {'M':>2} {'r':>6} {'us/example':>11} {'ns per r^2':>11} {'rank-one ref us':>16} {'speedup':>8}")
    for d, degree in TAYLOR_CASES:
        X, y = stream(TAYLOR_ROWS, d)
        learner = okl_core.make_learner("pkawv_taylor", n_inputs=d, degree=degree, sigma=1.0, lam=1.0)
        r = learner.features.n_outputs
        ours = best_of(lambda: learner.update(learner.init(), X, y), repeats=2) / TAYLOR_ROWS
        features = TaylorFeatures(d, degree, 1.0)
        naive = best_of(lambda: naive_taylor(features.transform(X[:NAIVE_ROWS]), y[:NAIVE_ROWS]), repeats=1) / NAIVE_ROWS
        print(f"{d:>3} {degree:>2} {r:>6} {1e6 * ours:>11.1f} {1e9 * ours / r**2:>11.2f} {1e6 * naive:>16.1f} {naive / ours:>8.1f}")


def nystrom_table() -> None:
    d = NYSTROM_D
    X, y = stream(WARM_ROWS + TIMED_ROWS, d, seed=1)
    warm, timed = slice(0, WARM_ROWS), slice(WARM_ROWS, None)
    krr = okl_core.make_learner("krr", n_inputs=d, sigma=NYSTROM_SIGMA, lam=1.0)
    krr_state, _ = krr.update(krr.init(), X[warm], y[warm])
    krr_s = best_of(lambda: krr.update(krr_state, X[timed], y[timed]), repeats=1) / TIMED_ROWS
    print()
    print(f"PKAWV-Nystrom (KORS): per-example cost of rows {WARM_ROWS}..{WARM_ROWS + TIMED_ROWS} against the dictionary size m")
    print(f"(d = {d}, sigma = {NYSTROM_SIGMA}, lam = 1, beta = 1, eps = 0.5; exact KRR at the same t: {1e6 * krr_s:.0f} us/example)")
    print(f"{'mu':>6} {'m':>6} {'added':>6} {'us/example':>11} {'ns per m^2':>11} {'state MiB':>10} {'krr / nystrom':>14}")
    for mu in NYSTROM_MUS:
        learner = okl_core.make_learner("pkawv_nystrom", n_inputs=d, sigma=NYSTROM_SIGMA, lam=1.0, mu=mu)
        state, _ = learner.update(learner.init(), X[warm], y[warm])
        start = time.perf_counter()
        final, _ = learner.update(state, X[timed], y[timed])
        per = (time.perf_counter() - start) / TIMED_ROWS
        m = len(final.dictionary)
        mib = learner.state_bytes(len(final.targets), m) / 2**20
        print(f"{mu:>6g} {m:>6} {m - len(state.dictionary):>6} {1e6 * per:>11.1f} {1e9 * per / m**2:>11.2f} {mib:>10.1f} {krr_s / per:>14.1f}")


if __name__ == "__main__":
    taylor_table()
    nystrom_table()
