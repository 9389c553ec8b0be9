"""Tiny deterministic problems per task, shared by the conformance suite and learner tests."""

import numpy as np


def tiny_problem(task: str, n_inputs: int = 4, n: int = 240, n_classes: int = 3, seed: int = 0):
    """A small learnable stream ``(X float32, y)`` for ``task`` (nonlinear in X)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, n_inputs)).astype(np.float32)
    radius = np.sqrt((X[:, :2] ** 2).sum(1))
    if task == "binary":
        return X, np.where(radius < 0.75, 1, -1)
    if task == "multiclass":
        edges = np.quantile(radius, np.linspace(0, 1, n_classes + 1)[1:-1])
        return X, np.searchsorted(edges, radius).astype(np.int64)
    return X, np.cos(2.0 * radius).astype(np.float64)


def trivial_error(task: str, y) -> float:
    """Error of the best constant predictor (majority class, or the mean)."""
    y = np.asarray(y)
    if task == "regression":
        return float(np.mean((y - y.mean()) ** 2))
    _, counts = np.unique(y, return_counts=True)
    return 1.0 - counts.max() / len(y)


def error(learner, scores, y) -> float:
    """Mistake rate (classification) or MSE (regression) of scores against y."""
    if learner.task == "regression":
        return float(np.mean((np.asarray(scores) - y) ** 2))
    return float(np.mean(learner.to_labels(scores) != y))
