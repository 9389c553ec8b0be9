"""Raw Coulomb matrices against their step predicates on the CEP molecules, in memory (README, "The papers at scale").

Reads a raw training and test set written by ``prepare molecular`` (no ``--steps``), builds
step features in memory with :func:`okl_core.data.molecular.step_predicates` (the bytes
``prepare molecular --steps`` writes) and prints one JSON line per ``--spec``: the learner's
online and evaluation MAE/RMSE. ``"mode": "holdout"`` (default) fits the first 80% of the
training rows and scores the last 20% (choosing settings never sees the test set);
``"mode": "test"`` fits all training rows and scores the test set. Learners fold once over
the rows in order (:func:`okl_core.evaluation.run_online`), ``sigma`` = ``sigma_x`` times
the median distance of the first 1,000 fitted rows. ``"learner": "ridge"`` is the linear
ridge of :mod:`okl_experiments.baselines` for each ``lam`` of ``grid`` (zero-variance
columns dropped: their weight is 0 for any ``lam > 0``, and most step columns are constant),
``"mean"`` the training mean.

Run (the README's rows)::

    python -m bench.repro_molecular_steps --train W/train --test W/test \\
        --spec '{"learner": "dsg", "steps": [0.39, 0.82, 2.6, 5.8], "params": {"loss": "square",
                 "nu": 1e-6, "batch_size": 64, "block_size": 28, "theta": 300, "step_offset": 300}}'
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from okl_core.data.layout import open_dataset
from okl_core.data.molecular import step_predicates
from okl_core.derived import make_learner
from okl_core.evaluation import run_online
from okl_core.kernels import median_heuristic
from okl_experiments.baselines import RIDGE_GRID, mae_rmse


def _load(path: str) -> tuple[np.ndarray, np.ndarray]:
    rows = open_dataset(path).read_all()
    return np.asarray(rows.X, dtype=np.float32), np.asarray(rows.y, dtype=np.float64)


def _ridge(Xf, yf, Xe, ye, grid) -> dict:
    keep = Xf.std(axis=0) > 0
    A = Xf[:, keep].astype(np.float64)
    mx, my = A.mean(axis=0), float(yf.mean())
    Ac = A - mx
    cov, b = Ac.T @ Ac / len(yf), Ac.T @ (yf - my) / len(yf)
    E = Xe[:, keep].astype(np.float64) - mx
    return {str(lam): mae_rmse(ye, E @ np.linalg.solve(cov + lam * np.eye(len(mx)), b) + my) for lam in grid}


def run_spec(spec: dict, train: tuple, test: tuple) -> dict:
    """One comparison row: ``spec`` as in the module docstring."""
    Xtr, ytr = train
    if spec.get("mode", "holdout") == "holdout":
        cut = int(0.8 * len(ytr))
        (Xf, yf), (Xe, ye) = (Xtr[:cut], ytr[:cut]), (Xtr[cut:], ytr[cut:])
    else:
        (Xf, yf), (Xe, ye) = train, test
    if spec.get("steps"):
        Xf, Xe = step_predicates(Xf, spec["steps"]), step_predicates(Xe, spec["steps"])
    out: dict = {"spec": spec, "d": Xf.shape[1], "n_fit": len(yf), "n_eval": len(ye)}
    started = time.perf_counter()
    if spec["learner"] == "mean":
        out["eval"] = mae_rmse(ye, np.full(len(ye), yf.mean()))
    elif spec["learner"] == "ridge":
        out["eval"] = _ridge(Xf, yf, Xe, ye, spec.get("grid", RIDGE_GRID))
    else:
        sigma = spec.get("sigma_x", 1.0) * median_heuristic(Xf[:1000])
        learner = make_learner(spec["learner"], n_inputs=Xf.shape[1], sigma=sigma, **spec["params"])
        run = run_online(learner, Xf, yf, batch_rows=1024, curve_points=0)
        out["online"] = {"mae": run.metrics.mae, "rmse": math.sqrt(run.metrics.mse)}
        out["eval"] = mae_rmse(ye, learner.predict(run.state, Xe))
        out["sigma"] = sigma
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="raw training set (prepare molecular, no --steps)")
    parser.add_argument("--test", required=True, help="raw test set")
    parser.add_argument("--spec", action="append", required=True, help="JSON comparison row (repeatable)")
    args = parser.parse_args(argv)
    train, test = _load(args.train), _load(args.test)
    for text in args.spec:
        print(json.dumps(run_spec(json.loads(text), train, test)), flush=True)


if __name__ == "__main__":
    main()
