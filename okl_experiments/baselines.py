"""Closed-form regression baselines on a train/test split of okl data sets.

The MolecularSpace reproduction (spec/dsg.md) compares DSG ridge with simple predictors
computed on the same split: the training mean, and linear ridge regression
``(cov + lam I) w = cov_xy`` on centred features with an intercept (the training means),
``lam`` chosen on a holdout of the training rows; the moments are accumulated in float64
batch by batch so the training set never has to fit in memory. Test MAE and RMSE of each come from :func:`regression_baselines`.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.data.layout import open_dataset

__all__ = ["RIDGE_GRID", "regression_baselines", "mae_rmse"]


def mae_rmse(y_true, y_pred) -> dict:
    """``{"mae", "rmse", "n"}`` of predictions (float64)."""
    err = np.asarray(y_pred, dtype=np.float64) - np.asarray(y_true, dtype=np.float64)
    return {"mae": float(np.abs(err).mean()), "rmse": float(math.sqrt((err * err).mean())), "n": int(len(err))}


RIDGE_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
"""``lam`` values tried for linear ridge, chosen on the last 20% of the training rows."""


class _Moments:
    """Rows, feature and target sums, ``X^T X`` and ``X^T y`` (float64), batch by batch."""

    def __init__(self, d: int):
        self.n, self.sx, self.sy = 0, np.zeros(d), 0.0
        self.xtx, self.xty = np.zeros((d, d)), np.zeros(d)

    def add(self, X: np.ndarray, y: np.ndarray) -> None:
        self.n += len(y)
        self.sx += X.sum(axis=0)
        self.sy += float(y.sum())
        self.xtx += X.T @ X
        self.xty += X.T @ y

    def plus(self, other: "_Moments") -> "_Moments":
        out = _Moments(len(self.sx))
        out.n, out.sx, out.sy = self.n + other.n, self.sx + other.sx, self.sy + other.sy
        out.xtx, out.xty = self.xtx + other.xtx, self.xty + other.xty
        return out

    def ridge(self, lam: float) -> tuple[np.ndarray, np.ndarray, float]:
        """``(w, x_mean, y_mean)`` of ridge ``lam`` on the centred rows."""
        mx, my = self.sx / self.n, self.sy / self.n
        cov = self.xtx / self.n - np.outer(mx, mx)
        w = np.linalg.solve(cov + lam * np.eye(len(mx)), self.xty / self.n - mx * my)
        return w, mx, my


def _moments(dataset, split: int) -> tuple[_Moments, _Moments, list]:
    """Moments of rows ``[0, split)`` and ``[split, n)``, and the batches of the second part."""
    d = dataset.n_features
    fit, held, held_rows = _Moments(d), _Moments(d), []
    for batch in dataset.iter_batches():
        X, y = batch.X.astype(np.float64), batch.y.astype(np.float64)
        cut = int(np.clip(split - batch.row[0], 0, len(y))) if len(y) else 0
        fit.add(X[:cut], y[:cut])
        if cut < len(y):
            held.add(X[cut:], y[cut:])
            held_rows.append((X[cut:], y[cut:]))
    return fit, held, held_rows


def _predict(model, X: np.ndarray) -> np.ndarray:
    w, mx, my = model
    return (X - mx) @ w + my


def regression_baselines(train: str, test: str, ridge: float | None = None, grid=RIDGE_GRID) -> dict:
    """Test MAE/RMSE of the training mean and of linear ridge on ``test``.

    Parameters
    ----------
    train, test : str
        okl regression data set directories (same features).
    ridge : float or None
        ``lam`` of ``(cov + lam I) w = cov_xy`` on centred data (> 0); None: the value of
        ``grid`` with the least squared error on the last 20% of the training rows when
        fitted on the first 80% (the test set is never used to choose), refitted on all.
    """
    tr, te = open_dataset(train), open_dataset(test)
    for ds, where in ((tr, train), (te, test)):
        if ds.task != "regression":
            raise ValueError(f"{where}: regression baselines need a regression data set, this one is {ds.task}")
    if tr.n_features != te.n_features:
        raise ValueError(f"{test}: has {te.n_features} features, {train} has {tr.n_features}")
    if ridge is not None and not ridge > 0:
        raise ValueError(f"ridge must be > 0, got {ridge}")
    n = tr.info.n_rows
    if n < 5:
        raise ValueError(f"{train}: needs at least 5 rows, has {n}")
    fit, held, held_rows = _moments(tr, int(0.8 * n))
    if ridge is None:
        Xh, yh = np.concatenate([x for x, _ in held_rows]), np.concatenate([y for _, y in held_rows])
        ridge = min(grid, key=lambda lam: float(np.square(_predict(fit.ridge(lam), Xh) - yh).mean()))
    everything = fit.plus(held)
    model = everything.ridge(ridge)
    rows = te.read_all()
    X, y = rows.X.astype(np.float64), rows.y.astype(np.float64)
    return {
        "mean": mae_rmse(y, np.full(len(y), model[2])),
        "linear_ridge": {**mae_rmse(y, _predict(model, X)), "ridge": ridge},
        "n_train": n,
    }
