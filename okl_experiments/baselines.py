"""Closed-form regression baselines on a train/test split of okl data sets.

The MolecularSpace reproduction (spec/dsg.md) compares DSG ridge with simple predictors
computed on the same split: the training mean, and linear ridge regression
``w = (X^T X + lam n I)^{-1} X^T y`` on centred features with an intercept (the training
means), accumulated in float64 batch by batch so the training set never has to fit in
memory. Test MAE and RMSE of each come from :func:`regression_baselines`.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.data.layout import open_dataset

__all__ = ["regression_baselines", "mae_rmse"]


def mae_rmse(y_true, y_pred) -> dict:
    """``{"mae", "rmse", "n"}`` of predictions (float64)."""
    err = np.asarray(y_pred, dtype=np.float64) - np.asarray(y_true, dtype=np.float64)
    return {"mae": float(np.abs(err).mean()), "rmse": float(math.sqrt((err * err).mean())), "n": int(len(err))}


def _moments(dataset) -> tuple[int, np.ndarray, float, np.ndarray, np.ndarray]:
    """Rows, feature sums, target sum, X^T X and X^T y of a data set (float64)."""
    d = dataset.n_features
    n, sx, sy = 0, np.zeros(d), 0.0
    xtx, xty = np.zeros((d, d)), np.zeros(d)
    for batch in dataset.iter_batches():
        X, y = batch.X.astype(np.float64), batch.y.astype(np.float64)
        n += len(y)
        sx += X.sum(axis=0)
        sy += float(y.sum())
        xtx += X.T @ X
        xty += X.T @ y
    return n, sx, sy, xtx, xty


def regression_baselines(train: str, test: str, ridge: float = 1e-3) -> dict:
    """Test MAE/RMSE of the training mean and of linear ridge (``lam = ridge``) on ``test``.

    Parameters
    ----------
    train, test : str
        okl regression data set directories (same features).
    ridge : float
        ``lam`` of ``(X^T X / n + lam I) w = X^T y / n`` on centred data (> 0).
    """
    if not ridge > 0:
        raise ValueError(f"ridge must be > 0, got {ridge}")
    tr, te = open_dataset(train), open_dataset(test)
    for ds, where in ((tr, train), (te, test)):
        if ds.task != "regression":
            raise ValueError(f"{where}: regression baselines need a regression data set, this one is {ds.task}")
    if tr.n_features != te.n_features:
        raise ValueError(f"{test}: has {te.n_features} features, {train} has {tr.n_features}")
    n, sx, sy, xtx, xty = _moments(tr)
    if n == 0:
        raise ValueError(f"{train}: no rows")
    mx, my = sx / n, sy / n
    cov = xtx / n - np.outer(mx, mx)
    cxy = xty / n - mx * my
    w = np.linalg.solve(cov + ridge * np.eye(len(mx)), cxy)
    rows = te.read_all()
    X, y = rows.X.astype(np.float64), rows.y.astype(np.float64)
    return {
        "mean": mae_rmse(y, np.full(len(y), my)),
        "linear_ridge": {**mae_rmse(y, (X - mx) @ w + my), "ridge": ridge},
        "n_train": n,
    }
