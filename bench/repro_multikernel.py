"""Reproduce the multi-kernel papers' tables (minutes; not part of ``make bench``).

``oks``: Li & Liao's a9a rows (spec/oks.md Tables 2 and 5): the online mistake rate of OKS,
IOKS, OKS++, RF-OKS++ (D = 400) and RF-IOKS on the 32,561 a9a training rows (features
as distributed: binary, already within [-1, 1]), six Gaussians sigma = 2^-2 .. 2^3,
logistic loss, U = 15, T = 32,561; mean +- std over random permutations (permutation
``r`` = ``numpy.random.default_rng(r).permutation``, learner seed ``r``). OKS++ and
RF-OKS++ run with both ``tuning`` settings ('paper', 'released_code').

``omkl``: OMKL-GF against Raker (spec/omkl_gf.md Tables 1-5) on Friedman #1
(``sklearn.datasets.make_friedman1``, 10,000 rows, 10 features in [0, 1], noise 1.0,
random_state 0; target min-max scaled to [0, 1]): MSE x 10^-3 and seconds (CPU) per run,
mean over random-feature seeds, with the paper's settings (17 Gaussians 2^-8 .. 2^8,
D = 50, lambda = 1e-3, eta = eta_e = 1/sqrt(t)).

Run: ``python -m bench.repro_multikernel {oks,omkl,all} [--runs R]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import okl_core
from bench.common import SHARED_DATA

A9A = SHARED_DATA / "a9a" / "a9a"

OKS_ROWS = [  # (learner, params, the paper's mean mistake rate %)
    ("oks", {"horizon": 32561}, 19.65),
    ("ioks", {"horizon": 32561}, 17.46),
    ("oks_pp", {"tuning": "paper"}, 16.57),
    ("oks_pp", {"tuning": "released_code"}, 16.57),
    ("rf_oks_pp", {"tuning": "paper"}, 17.28),
    ("rf_oks_pp", {"tuning": "released_code"}, 17.28),
    ("rf_ioks", {"horizon": 32561}, 22.99),
]

OMKL_ROWS = [  # (learner, params)
    ("raker", {}),
    ("omkl_gf", {"draws_per_node": 1, "selective_nodes": 1}),
    ("omkl_gf", {"draws_per_node": 7, "selective_nodes": 1}),
    ("omkl_gf", {"draws_per_node": 10, "selective_nodes": 1}),
    ("omkl_gf", {"draws_per_node": 17, "selective_nodes": 1}),
    ("omkl_gf", {"draws_per_node": 7, "selective_nodes": 2}),
    ("omkl_gf", {"draws_per_node": 7, "selective_nodes": 1, "freeze_below": 1e-4}),
]


def a9a():
    from okl_experiments.data import load_real

    if not A9A.exists():
        raise SystemExit(f"{A9A} is missing (../shared/data beside the project)")
    data = load_real("a9a", str(A9A.parents[1]))
    return data.X, data.y.astype(np.int64)


def friedman():
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=10_000, n_features=10, noise=1.0, random_state=0)
    return X.astype(np.float32), (y - y.min()) / (y.max() - y.min())


def describe(name: str, params: dict) -> str:
    shown = {k: v for k, v in params.items() if k != "horizon"}
    return name + (" " + " ".join(f"{k}={v}" for k, v in shown.items()) if shown else "")


def run_oks(runs: int) -> None:
    X, y = a9a()
    print(f"a9a: {len(y)} rows x {X.shape[1]} features, {runs} permutation(s); online mistake rate %")
    for name, params, paper in OKS_ROWS:
        rates, seconds, winners = [], [], []
        for r in range(runs):
            order = np.random.default_rng(r).permutation(len(y))
            learner = okl_core.make_learner(name, n_inputs=123, seed=r, **params)
            start = time.process_time()
            state, scores = learner.update(learner.init(), X[order], y[order])
            seconds.append(time.process_time() - start)
            rates.append(100.0 * np.mean(learner.to_labels(scores) != y[order]))
            winners.append(learner.best_kernel(state))
        print(
            f"  {describe(name, params):34s} {np.mean(rates):6.2f} +- {np.std(rates):4.2f}  "
            f"(paper {paper:5.2f})  {np.mean(seconds):6.1f} s/run  best kernel {max(set(winners), key=winners.count)}",
            flush=True,
        )


def run_omkl(runs: int) -> None:
    X, y = friedman()
    print(f"Friedman #1: {len(y)} rows x {X.shape[1]} features, {runs} random-feature seed(s); MSE x 1e-3, CPU s/run")
    for name, params in OMKL_ROWS:
        errors, seconds = [], []
        for seed in range(runs):
            learner = okl_core.make_learner(name, n_inputs=X.shape[1], seed=seed, **params)
            start = time.process_time()
            _, scores = learner.update(learner.init(), X, y)
            seconds.append(time.process_time() - start)
            errors.append(np.mean((scores - y) ** 2))
        print(f"  {describe(name, params):48s} MSE {1e3 * np.mean(errors):6.2f} +- {1e3 * np.std(errors):4.2f}  {np.mean(seconds):5.2f} s", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("which", choices=["oks", "omkl", "all"])
    parser.add_argument("--runs", type=int, default=3, help="permutations (oks) / random-feature seeds (omkl)")
    args = parser.parse_args(argv)
    if args.which in ("omkl", "all"):
        run_omkl(args.runs)
    if args.which in ("oks", "all"):
        run_oks(args.runs)


if __name__ == "__main__":
    main()
