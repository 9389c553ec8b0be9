"""MFOGD throughput on MNIST-shaped data (d = 784, D = 2048 frequencies, C = 10).

Prints, measured in this one process:
* learner rows/s against the rows/s of computing the feature map alone (target >= 0.6);
* learner rows/s against scikit-learn's RBFSampler + SGDClassifier(hinge).partial_fit on the
  same rows, batch by batch (target >= 2), with both prequential errors (ours must be equal
  or lower). scikit-learn scores each batch before learning it (its prequential protocol
  is per batch); ours is per row, as in the paper.

Run: ``python -m bench.bench_fogd [n_rows]``.
"""

from __future__ import annotations

import sys

import numpy as np

import okl_core
from bench.common import best_of, mnist_shaped

D, SIGMA, ETA, BATCH = 2048, 8.0, 0.002, 1000


def ours(X, y):
    learner = okl_core.make_learner("mfogd", n_inputs=784, n_classes=10, n_components=D, sigma=SIGMA, eta=ETA)
    learner.features.frequencies()  # generate the frequencies once, outside the timing
    result = {}

    def run():
        state, mistakes = learner.init(), 0
        for i in range(0, len(y), BATCH):
            state, scores = learner.update(state, X[i : i + BATCH], y[i : i + BATCH])
            mistakes += int((learner.to_labels(scores) != y[i : i + BATCH]).sum())
        result["error"] = mistakes / len(y)

    def features_only():
        for i in range(0, len(y), BATCH):
            learner.features.transform(X[i : i + BATCH])

    return best_of(run), best_of(features_only), result["error"]


def sklearn_baseline(X, y):
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import SGDClassifier

    result = {}

    def run():
        sampler = RBFSampler(gamma=1.0 / (2 * SIGMA**2), n_components=2 * D, random_state=0).fit(X[:1])
        clf = SGDClassifier(loss="hinge", random_state=0)
        mistakes = 0
        for i in range(0, len(y), BATCH):
            Z = sampler.transform(X[i : i + BATCH])
            if i:
                mistakes += int((clf.predict(Z) != y[i : i + BATCH]).sum())
            else:
                mistakes += int((y[:BATCH] != 0).sum())  # an untrained model predicts one class
            clf.partial_fit(Z, y[i : i + BATCH], classes=np.arange(10))
        result["error"] = mistakes / len(y)

    return best_of(run, repeats=2), result["error"]


def main(n_rows: int = 10_000):
    X, y = mnist_shaped(n_rows)
    learner_s, features_s, error = ours(X, y)
    sk_s, sk_error = sklearn_baseline(X, y)
    print(f"rows: {n_rows}, d = 784, D = {D} frequencies ({2 * D} features), C = 10, batch {BATCH}")
    print(f"feature map alone      {n_rows / features_s:10.0f} rows/s")
    print(f"okl mfogd              {n_rows / learner_s:10.0f} rows/s   prequential error {error:.4f}")
    print(f"sklearn RBF+SGD hinge  {n_rows / sk_s:10.0f} rows/s   prequential error {sk_error:.4f}")
    print(f"ratio mfogd / feature map = {features_s / learner_s:.2f}  (target >= 0.6)")
    print(f"ratio mfogd / sklearn     = {sk_s / learner_s:.2f}  (target >= 2, error {error:.4f} vs {sk_error:.4f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
