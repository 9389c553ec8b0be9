"""OMKL-GF time per example against Raker's (spec/omkl_gf.md; the paper's Tables 1-5).

The paper's point: OMKL-GF evaluates only the kernels of one selective node, so its cost
per example grows with M (draws per node), not with the dictionary size N, while Raker
evaluates all N kernels. Prints, measured in this one process (best of 3 runs each, CPU
time of the process):

* at N = 17 (the paper's dictionary), J = 1, the time per example of Raker and of
  OMKL-GF with M = 1, 7, 17, and the ratios OMKL-GF / Raker;
* the same with N = 34 (Gaussian and Laplacian kernels, 2^-8 .. 2^8): Raker's time
  doubles, OMKL-GF's stays put.

Two shapes: the paper's (d = 13 like Air Quality, D = 50), where numpy's fixed per-example
overhead of the graph (a few dozen small array operations, about 0.1 ms) outweighs the
features of 17 small kernels, and a feature-heavy one (d = 784 like MNIST, D = 400), where
the feature maps dominate as in the paper's analysis, O(d D M + J N) against O(d D N).
With replacement, M draws give fewer distinct kernels than M, and fewer still once the
weights concentrate.

Run: ``python -m bench.bench_omkl [n_rows]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import okl_core
from bench.common import best_of
from okl_core.learners.multikernel import OMKL_DICTIONARY, kernel_dictionary

N34 = OMKL_DICTIONARY + "," + kernel_dictionary("laplacian", -8, 8)


def per_example(name, X, y, **params) -> float:
    """Best-of-3 seconds per example of one pass of ``name`` over ``(X, y)``."""
    learner = okl_core.make_learner(name, n_inputs=X.shape[1], **params)
    learner.bank.stack()  # generate the frequencies once, outside the timing
    # CPU time of this (single-threaded) process: steady when the machine is shared.
    return best_of(lambda: learner.update(learner.init(), X, y), clock=time.process_time) / len(y)


def shape(d: int, D: int, n_rows: int) -> None:
    """Print the times per example and ratios for inputs of dimension ``d`` and ``D`` frequencies."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 1.0, size=(n_rows, d)).astype(np.float32)
    y = np.sin(X.sum(1))
    print(f"d = {d}, D = {D}, {n_rows} rows, J = 1")
    for label, kernels in (("N = 17", OMKL_DICTIONARY), ("N = 34", N34)):
        raker = per_example("raker", X, y, kernels=kernels, n_components=D)
        line = [f"  {label}: raker {raker * 1e6:7.1f} us/example"]
        for M in (1, 7, 17):
            gf = per_example("omkl_gf", X, y, kernels=kernels, n_components=D, draws_per_node=M, selective_nodes=1)
            line.append(f"omkl_gf M={M:<2d} {gf * 1e6:7.1f} us (ratio {gf / raker:.2f})")
        print("\n    ".join(line))


def main(n_rows: int = 1500) -> None:
    shape(13, 50, n_rows)
    shape(784, 400, max(1, n_rows // 3))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1500)
