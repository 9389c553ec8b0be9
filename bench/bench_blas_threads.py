"""What okl's one-thread BLAS pin (okl_core.numerics) costs, per learner, in one process.

Prints, for realistic sizes (MNIST test digits 10,000 x 784 and a9a when ../shared/data
has them, MNIST-shaped random digits otherwise):

* per learner, the wall time of ``update`` over the rows in batches plus ``predict`` on
  2,000 rows, with the pin (okl's behaviour: one BLAS thread) and without it (BLAS's own
  thread count, all cores unless the environment says otherwise), the ratio pinned /
  unpinned (> 1: the pin is slower), and whether the unpinned run's bytes differ between
  1 thread and the default (what the pin fixes);
* DSG prediction at 2^12-2^16 random features (one big float32 GEMM per chunk);
* the per-call cost of entering and leaving the pin.

Timings are best of ``--repeats`` (wall clock); run it on an otherwise idle machine.
Run: ``python -m bench.bench_blas_threads [--repeats 3] [--only fogd,dsg]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.linalg  # noqa: F401  (load scipy's OpenBLAS before timing)
from threadpoolctl import threadpool_info, threadpool_limits

import okl_core
from bench.common import SHARED_DATA, best_of, mnist_shaped
from okl_core import numerics
from okl_core.data import read_libsvm

MNIST = dict(n_inputs=784, sigma=8.0)
MULTI = dict(n_inputs=784, kernels="gaussian:4,gaussian:8,gaussian:16")
A9A = dict(n_inputs=123, sigma=4.0, task="binary")
BATCH = 4096
N_TEST = 2000

# name -> (learner, parameters, data, rows, batch rows)
CASES = {
    "mfogd D=800": ("mfogd", dict(MNIST, n_components=800, n_classes=10), "mnist", 10000, BATCH),
    "fogd D=800": ("fogd", dict(MNIST, n_components=800), "mnist", 10000, BATCH),
    "fogd a9a D=400": ("fogd", dict(n_inputs=123, sigma=4.0, n_components=400), "a9a", 32561, BATCH),
    "dsg 2^12 features": ("dsg", dict(MNIST, n_classes=10, loss="softmax", block_size=32, batch_size=64), "mnist", 8192, 8192),
    "nogd B=200": ("nogd", dict(MNIST, budget=200, rank=50), "mnist", 4000, BATCH),
    "kernel_ogd": ("kernel_ogd", dict(MNIST), "mnist", 3000, 1000),
    "krr": ("krr", dict(A9A), "a9a", 2000, 256),
    "pkawv_taylor deg 2": ("pkawv_taylor", dict(A9A, degree=2), "a9a", 500, 256),
    "pkawv_nystrom": ("pkawv_nystrom", dict(A9A), "a9a", 3000, 256),
    "omkl_gf": ("omkl_gf", dict(MULTI, n_components=400), "mnist", 3000, 1000),
    "raker": ("raker", dict(MULTI, n_components=400), "mnist", 3000, 1000),
    "oks": ("oks", dict(n_inputs=123, horizon=2000), "a9a", 2000, 1000),
    "rf_oks_pp": ("rf_oks_pp", dict(MULTI, n_components=400), "mnist", 3000, 1000),
}


def load(kind):
    if kind == "a9a":
        path = SHARED_DATA / "a9a" / "a9a"
        if path.exists():
            X, y = read_libsvm(path, n_features=123)
            return X, y.astype(np.int64)
        rng = np.random.default_rng(0)
        X = (rng.random((32561, 123)) < 0.11).astype(np.float32)
        return X, np.where(X @ rng.standard_normal(123) > 0, 1, -1)
    return mnist_shaped(10000)


def labels(learner, y):
    if learner.task == "binary":
        return y if set(np.unique(y)) <= {-1, 1} else np.where(y % 2 == 0, 1, -1)
    return y.astype(np.float64) if learner.task == "regression" else y


def run(learner, X, y, X_test, batch):
    state = learner.init()
    online = []
    for i in range(0, len(y), batch):
        state, scores = learner.update(state, X[i : i + batch], y[i : i + batch])
        online.append(scores)
    return okl_core.model_bytes(learner, state) + np.concatenate(online).tobytes() + learner.predict(state, X_test).tobytes()


def learners(args, data):
    print(f"{'learner':22s} {'rows':>6s} {'pinned s':>9s} {'unpinned s':>10s} {'ratio':>6s}  unpinned 1 vs default threads")
    for label, (name, params, kind, n, batch) in CASES.items():
        if args.only and name not in args.only:
            continue
        X, y = data[kind]
        learner = okl_core.make_learner(name, **params)
        y = labels(learner, y)
        X_train, y_train, X_test = X[:n], y[:n], X[-N_TEST:]
        run(learner, X_train[:batch], y_train[:batch], X_test[:10], batch)  # warm caches (frequencies)
        pinned = best_of(lambda: run(learner, X_train, y_train, X_test, batch), args.repeats)
        with numerics._unpinned():
            unpinned = best_of(lambda: run(learner, X_train, y_train, X_test, batch), args.repeats)
            default_bytes = run(learner, X_train, y_train, X_test, batch)
            with threadpool_limits(limits=1, user_api="blas"):
                one_bytes = run(learner, X_train, y_train, X_test, batch)
        differs = "differ" if one_bytes != default_bytes else "same"
        print(f"{label:22s} {n:6d} {pinned:9.3f} {unpinned:10.3f} {pinned / unpinned:6.2f}  {differs}", flush=True)


def dsg_prediction(args, data):
    X, y = data["mnist"]
    X_test = X[-N_TEST:]
    print(f"\nDSG predict on {N_TEST} rows (block_size 512, batch_size 32): pinned / unpinned")
    for log2 in (12, 14, 15, 16):
        learner = okl_core.make_learner("dsg", **MNIST, n_classes=10, loss="softmax", block_size=512, batch_size=32)
        rows = 2**log2 // 512 * 32
        state, _ = learner.update(learner.init(), X[:rows], y[:rows])
        pinned = best_of(lambda: learner.predict(state, X_test), args.repeats)
        with numerics._unpinned():
            unpinned = best_of(lambda: learner.predict(state, X_test), args.repeats)
        print(f"  2^{log2} features: pinned {pinned:.3f} s, unpinned {unpinned:.3f} s, ratio {pinned / unpinned:.2f}", flush=True)


def overhead():
    n = 200_000
    ctx = numerics.single_threaded_blas()
    start = time.perf_counter()
    for _ in range(n):
        with ctx:
            pass
    outer = (time.perf_counter() - start) / n
    with ctx:
        start = time.perf_counter()
        for _ in range(n):
            with ctx:
                pass
        nested = (time.perf_counter() - start) / n
    learner = okl_core.make_learner("fogd", n_inputs=123, n_components=400, sigma=4.0)
    state, x = learner.init(), np.zeros((1, 123), dtype=np.float32)
    calls = 20_000
    pinned = best_of(lambda: [learner.predict(state, x) for _ in range(calls)], 3) / calls
    with numerics._unpinned():
        unpinned = best_of(lambda: [learner.predict(state, x) for _ in range(calls)], 3) / calls
    print(f"\npin overhead per call: outermost {outer * 1e6:.2f} us, nested {nested * 1e6:.2f} us; "
          f"fogd predict of 1 row: {pinned * 1e6:.1f} us pinned, {unpinned * 1e6:.1f} us unpinned")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", type=lambda s: s.split(","), default=None, help="learner names, comma-separated")
    args = parser.parse_args(argv)
    blas = [f"{lib['internal_api']} {lib['version']} ({lib['num_threads']} threads)" for lib in threadpool_info() if lib["user_api"] == "blas"]
    print(f"BLAS: {', '.join(blas)}")
    data = {"mnist": load("mnist"), "a9a": load("a9a")}
    learners(args, data)
    if not args.only or "dsg" in args.only:
        dsg_prediction(args, data)
    overhead()


if __name__ == "__main__":
    main()
