"""PKAWV-Taylor against FOGD with 1000 random frequencies on a9a: online error and time.

The stream is a9a + a9a.t (48,842 rows, labels -1/+1) in one fixed random order (seed 0);
``--rows`` keeps its first rows. Online (prequential) mistake rate: each row is predicted
before it is learned, label = sign(score). All learners are timed in this one process on
the same rows, in batches of 2048.

* raw a9a (d = 123 binary features, sigma = 8 as in the FOGD paper): FOGD (D = 1000,
  unscaled, best eta of {2e-2, 2e-3, 2e-4, 2e-5}), NOGD (the spec's a9a settings) and
  PKAWV-Taylor with M = 2 (r = C(125, 2) = 7,750). M = 3 has r = C(126, 3) = 325,500: its
  two r x r matrices would take 1.7 TB, and the learner refuses it (max_basis).
* a9a projected on its 10 leading principal components, scaled to [-1, 1]^10 (the PKAWV
  paper's setting: sigma = 1, lam = 1): FOGD as above and PKAWV-Taylor with M = 2, 3, 4
  (r = 66, 286, 1001).

PKAWV learns the labels as regression targets with the KRR ordering of the paper's
real-data runs (AWV has the same signs, hence the same mistakes).

Run: ``python -m bench.bench_pkawv_a9a [--rows N]`` (default 10,000 rows, about two
minutes; ``--rows 48842`` for the whole stream, where PKAWV M = 2 on raw a9a costs
about 5 ms per row on one core).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import okl_core
from bench.common import SHARED_DATA

BATCH = 2048
FOGD_ETAS = (0.02, 0.002, 0.0002, 0.00002)


def load_a9a() -> tuple[np.ndarray, np.ndarray] | None:
    """a9a + a9a.t as dense float32 (123 columns; a9a.t never uses the last one) and labels."""
    from okl_experiments.data import available, load_real

    if not available("a9a+a9a.t", str(SHARED_DATA)):
        return None
    data = load_real("a9a+a9a.t", str(SHARED_DATA))
    return data.X, data.y.astype(np.int64)


def pca_scaled(X: np.ndarray, k: int = 10) -> np.ndarray:
    """Projection on the k leading principal components, each column scaled into [-1, 1]."""
    centred = X.astype(np.float64) - X.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    Z = centred @ vt[:k].T
    return (Z / np.abs(Z).max(0)).astype(np.float32)


def online(name: str, X: np.ndarray, y: np.ndarray, **params) -> tuple[float, float]:
    """Online mistake rate and seconds of one pass in batches."""
    learner = okl_core.make_learner(name, n_inputs=X.shape[1], **params)
    state, mistakes = learner.init(), 0
    start = time.perf_counter()
    for i in range(0, len(y), BATCH):
        state, scores = learner.update(state, X[i : i + BATCH], y[i : i + BATCH])
        mistakes += int((learner.to_labels(scores) != y[i : i + BATCH]).sum())
    return mistakes / len(y), time.perf_counter() - start


def best_fogd(X, y, sigma) -> tuple[float, float, float]:
    runs = [(online("fogd", X, y, n_components=1000, sigma=sigma, eta=eta), eta) for eta in FOGD_ETAS]
    (error, seconds), eta = min(runs)
    return error, seconds, eta


def row(label: str, error: float, seconds: float, n: int, fogd_seconds: float) -> None:
    print(f"{label:<34} {100 * error:>8.2f} {seconds:>9.1f} {1e6 * seconds / n:>11.0f} {seconds / fogd_seconds:>10.1f}")


def main(n_rows: int) -> None:
    data = load_a9a()
    if data is None:
        print(f"skipped: {SHARED_DATA / 'a9a'} is missing (a9a and a9a.t live in ../shared/data)")
        return
    X, y = data
    order = np.random.default_rng(0).permutation(len(y))[:n_rows]
    X, y = X[order], y[order]
    header = f"{'learner':<34} {'error %':>8} {'seconds':>9} {'us/example':>11} {'x FOGD':>10}"

    print(f"raw a9a, first {n_rows} rows of the seed-0 order, d = 123, sigma = 8")
    print(header)
    error, fogd_s, eta = best_fogd(X, y, 8.0)
    row(f"fogd D=1000 eta={eta:g}", error, fogd_s, n_rows, fogd_s)
    row("nogd B=100 k=20 eta=0.2", *online("nogd", X, y, sigma=8.0, budget=100, rank=20, eta=0.2), n_rows, fogd_s)
    taylor = dict(sigma=8.0, lam=1.0, task="binary", ordering="krr")
    row("pkawv_taylor M=2 (r=7750)", *online("pkawv_taylor", X, y, degree=2, **taylor), n_rows, fogd_s)
    try:
        okl_core.make_learner("pkawv_taylor", n_inputs=123, degree=3, **taylor)
    except ValueError as err:
        print(f"{'pkawv_taylor M=3':<34} refused: {err}")

    Z = pca_scaled(X)
    print()
    print(f"a9a on 10 principal components scaled to [-1, 1], first {n_rows} rows, sigma = 1, lam = 1")
    print(header)
    error, fogd_s, eta = best_fogd(Z, y, 1.0)
    row(f"fogd D=1000 eta={eta:g}", error, fogd_s, n_rows, fogd_s)
    for degree in (2, 3, 4):
        learner = okl_core.make_learner("pkawv_taylor", n_inputs=10, degree=degree, sigma=1.0)
        r = learner.features.n_outputs
        result = online("pkawv_taylor", Z, y, degree=degree, sigma=1.0, lam=1.0, task="binary", ordering="krr")
        row(f"pkawv_taylor M={degree} (r={r})", *result, n_rows, fogd_s)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the stream to use (max 48842)")
    main(parser.parse_args().rows)
