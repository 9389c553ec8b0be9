"""Compiled per-row folds against their numpy references, in one process (okl_core.learners.compiled).

For each learner, the same batches are learned with the numpy reference of its folds
(tests/okl_core/reference, :func:`numpy_folds`) and with the compiled folds, and the
benchmark prints

    feature map / update   the time of the batch's feature map alone over the update's
                           (the issue's target: >= 0.8 for fogd and mfogd at D = 400 and
                           4,096 on MNIST digits)
    fold us/row            (update - feature map) per row: the per-row loop's cost (the two
                           are timed apart, so a fold cheaper than the noise may print < 0)

before (numpy) and after (compiled), and whether both gave the same model bytes. The
feature map is ``z(x)`` for the FOGD family and, for NOGD's linear phase, ``z(x) = M k_x``
(kernel row against the landmarks, times the projection); kernel OGD (from a support set
of 1,000 rows) and NOGD's kernel phase (a budget of 2,000 on 1,000 rows) have none (their
folds are their kernel rows), so only their per-row times are printed. Rows: the MNIST test digits
(../shared/data/mnist; random pixels without them), 784 inputs, batches of 1,000. Times
are the best of ``--repeats`` runs of this process's CPU time (``time.process_time``; BLAS
pinned to one thread, as in the learners).

It also prints what a fresh process pays on the first compiled update: the import of
numba and the loading of the cached machine code (measured in a subprocess; the first run
after an okl install or upgrade compiles instead, which it prints when it happens).

The multi-kernel learners (second table) at their papers' sizes: RF-OKS++ and RF-IOKS on
a9a rows (d = 123, D = 400, the 6 kernels of spec/oks.md), Raker and OMKL-GF (M = 7, J = 1)
on Air-Quality-shaped rows (d = 13, D = 50, the 17 kernels of spec/omkl_gf.md), and
OMKL-GF on MNIST digits with D = 400, M = 1 (features dominate). Their "feature map" is
the features of the (row, kernel) pairs the fold uses -- all kernels for Raker, the drawn
kernel for RF-OKS++ / RF-IOKS, the drawn subset for OMKL-GF (as many pairs as the run
used, on random kernels) -- computed in batches as the compiled fold's feature blocks do.
The kernel versions OKS, OKS++ and IOKS on a9a rows (the six Gaussians, growing support
sets: the time of a row grows with the rows before it, so their us/row is the average over
the run's rows) have no feature map (``-``): most of their time is the compiled kernel row
of the drawn kernel, which both call. ``speed-up`` is the numpy update's time over
the compiled one's.

The budget learners (third table, ``okl_core.learners.budget``) at B = 100 and 800: a9a rows
(d = 123, sigma = 4) for the binary and regression ones, MNIST digits (sigma = 8) for the
multiclass ones; each starts from a full support set (learned on the rows before the timed
ones), so every timed row pays the budget maintenance. ``us/row`` is the whole update.

Run: ``python -m bench.bench_folds [--rows 10000] [--repeats 3] [--tables all|single,multi,budget] [--learners a,b]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import subprocess
import sys
import time

import numpy as np

import okl_core
from bench.common import a9a_shaped, best_of, mnist_shaped
from okl_core.learners.multikernel import FeatureBlock
from okl_core.numerics import single_threaded_blas
from tests.okl_core.reference.folds import LEARNER_MODULES, reference_folds

@contextlib.contextmanager
def numpy_folds(mode):
    """Run the learners on the numpy references of their folds inside the block when ``mode``
    is ``'numpy'`` (the compiled folds otherwise)."""
    patched = []
    if mode == "numpy":
        for name in LEARNER_MODULES:
            patched.append((importlib.import_module(name), "folds", reference_folds))
    saved = [(module, attribute, getattr(module, attribute)) for module, attribute, _ in patched]
    try:
        for module, attribute, value in patched:
            setattr(module, attribute, value)
        yield
    finally:
        for module, attribute, value in saved:
            setattr(module, attribute, value)

BATCH = 1000
MNIST = dict(n_inputs=784, sigma=8.0)
KERNEL_PHASE_BUDGET = 2000  # NOGD's kernel phase: a budget the 1,000 rows learned do not fill
CASES = [
    ("fogd", dict(MNIST, n_components=400)),
    ("mfogd", dict(MNIST, n_components=400, n_classes=10)),
    ("fogd", dict(MNIST, n_components=4096)),
    ("mfogd", dict(MNIST, n_components=4096, n_classes=10)),
    ("nogd", dict(MNIST, budget=100, rank=20)),
    ("mnogd", dict(MNIST, budget=100, rank=20, n_classes=10)),
    ("kernel_ogd", dict(MNIST)),
    ("mkernel_ogd", dict(MNIST, n_classes=10)),
    ("nogd", dict(MNIST, budget=KERNEL_PHASE_BUDGET, rank=20)),
    ("mnogd", dict(MNIST, budget=KERNEL_PHASE_BUDGET, rank=20, n_classes=10)),
]


def labels_for(learner, digits):
    if learner.task == "binary":
        return np.where(digits % 2 == 0, 1.0, -1.0)
    return digits


def batches(n):
    return [slice(i, min(i + BATCH, n)) for i in range(0, n, BATCH)]


def kernel_phase(learner):
    """NOGD learning its kernel phase (its budget larger than the rows benchmarked)."""
    return learner.name in ("nogd", "mnogd") and learner.config.budget == KERNEL_PHASE_BUDGET


def start_state(learner, X, y):
    """NOGD: a state already in its linear phase (or the initial one, for the kernel phase);
    kernel OGD: 1,000 rows' support set."""
    if kernel_phase(learner):
        return learner.init()
    if learner.name in ("nogd", "mnogd"):
        state, _ = learner.update(learner.init(), X[-2000:], y[-2000:])
        assert int(state.phase) == 1
        return state
    if learner.name in ("kernel_ogd", "mkernel_ogd"):
        return learner.update(learner.init(), X[-1000:], y[-1000:])[0]
    return learner.init()


def feature_map(learner, state):
    """The batch's feature map, as the update computes it (None: the learner has none)."""
    if hasattr(learner, "features"):
        return learner.features.transform
    if learner.name in ("nogd", "mnogd") and not kernel_phase(learner):
        return lambda Xb: learner.kernel.gram(Xb, state.landmarks) @ state.projection.T
    return None


def measure(name, params, X, digits, repeats):
    learner = okl_core.make_learner(name, **params)
    y = labels_for(learner, digits)
    if learner.name in ("kernel_ogd", "mkernel_ogd"):  # O(support) per row: fewer rows
        X, y = X[:2000], y[:2000]
    if kernel_phase(learner):
        X, y = X[:1000], y[:1000]
    state0 = start_state(learner, X, y)
    transform = feature_map(learner, state0)
    if hasattr(learner, "features"):
        learner.features.frequencies()  # generated once, outside the timing
    out = {}

    def learn():
        state = state0
        for part in batches(len(y)):
            state, _ = learner.update(state, X[part], y[part])
        out["bytes"] = okl_core.model_bytes(learner, state)

    def features_only():
        with single_threaded_blas():
            for part in batches(len(y)):
                transform(X[part])

    feature_s = best_of(features_only, repeats, time.process_time) if transform else 0.0
    result = {}
    for mode in ("numpy", "compiled"):
        with numpy_folds(mode):
            learn()  # warm (the compiled fold's first call loads numba and its code)
            update_s = best_of(learn, repeats, time.process_time)
        result[mode] = (feature_s / update_s if transform else None, (update_s - feature_s) / len(y) * 1e6, out["bytes"])
    return learner, len(y), result


MNIST_KERNELS = ",".join(f"gaussian:2^{k}" for k in range(1, 7))  # 6 kernels around MNIST's sigma = 8
AIR = dict(n_inputs=13, n_components=50)  # spec/omkl_gf.md: Air Quality d = 13, D = 50, 17 kernels
MULTI_KERNEL_CASES = [
    ("rf_oks_pp", dict(n_inputs=123, n_components=400), "a9a"),
    ("rf_ioks", dict(n_inputs=123, n_components=400, horizon=32561), "a9a"),
    ("rf_oks_pp", dict(n_inputs=784, n_components=400, kernels=MNIST_KERNELS), "mnist"),
    ("oks", dict(n_inputs=123, horizon=32561), "a9a"),
    ("oks_pp", dict(n_inputs=123), "a9a"),
    ("ioks", dict(n_inputs=123, horizon=32561), "a9a"),
    ("raker", dict(AIR), "air"),
    ("omkl_gf", dict(AIR, draws_per_node=7), "air"),
    ("omkl_gf", dict(n_inputs=784, n_components=400, draws_per_node=1), "mnist"),
]


def multi_kernel_rows(kind, n, name_task):
    """Rows and labels for a multi-kernel case: a9a, MNIST digits (targets digit / 9) or
    Air-Quality-shaped uniform rows with y = sin(sum x)."""
    if kind == "a9a":
        return a9a_shaped(n)
    if kind == "mnist":
        X, digits = mnist_shaped(n)
        return X, np.where(digits % 2 == 0, 1.0, -1.0) if name_task == "binary" else digits / 9.0
    X = np.random.default_rng(0).random((n, 13), dtype=np.float32)
    return X, np.sin(X.sum(axis=1))


def used_pairs(learner, state, n):
    """(row, kernel) pairs the fold evaluated: all for Raker, else the usage counts'."""
    if learner.name == "raker":
        return np.ones((n, learner.n_kernels), dtype=bool)
    per_row = int(round(state.n_used.sum() / n))
    rng = np.random.default_rng(0)
    need = np.zeros((n, learner.n_kernels), dtype=bool)
    for r in range(n):
        need[r, rng.choice(learner.n_kernels, per_row, replace=False)] = True
    return need


def measure_multi_kernel(name, params, kind, n, repeats):
    learner = okl_core.make_learner(name, **params)
    X, y = multi_kernel_rows(kind, n, learner.task)
    bank = getattr(getattr(learner, "storage", learner), "bank", None)  # None: exact kernels (oks, oks_pp, ioks)
    if bank is not None:
        omega = bank.stack()  # generated once, outside the timing
    out = {}

    def learn():
        state = learner.init()
        for part in batches(len(y)):
            state, _ = learner.update(state, X[part], y[part])
        out["bytes"], out["state"] = okl_core.model_bytes(learner, state), state

    result = {}
    for mode in ("numpy", "compiled"):
        with numpy_folds(mode):
            learn()
            result[mode] = [best_of(learn, repeats, time.process_time), out["bytes"]]
    if bank is None:
        return len(y), None, result
    need = used_pairs(learner, out["state"], len(y))

    def features_only():
        with single_threaded_blas():
            for part in batches(len(y)):
                FeatureBlock(bank, omega, X[part]).fill(need[part])

    feature_s = best_of(features_only, repeats, time.process_time)
    return len(y), feature_s, result


FIRST_USE = """
import time, numpy as np
t0 = time.perf_counter()
import okl_core
learner = okl_core.make_learner("{name}", n_inputs=784, n_components=400{extra})
X = np.random.default_rng(0).random((1000, 784), dtype=np.float32)
y = {labels}
state = learner.init()
t1 = time.perf_counter()
learner.update(state, X, y)
t2 = time.perf_counter()
learner.update(state, X, y)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


FIRST_USE_ARGS = {  # name: (extra parameters, labels)
    "fogd": ("", "np.where(np.arange(1000) % 2 == 0, 1.0, -1.0)"),
    "mfogd": (", n_classes=10", "np.arange(1000) % 10"),
    "rf_oks_pp": ("", "np.where(np.arange(1000) % 2 == 0, 1.0, -1.0)"),
    "omkl_gf": ("", "(np.arange(1000) % 10) / 9.0"),
}


def first_use(name):
    """Seconds of import, first update and second update in a fresh process."""
    extra, labels = FIRST_USE_ARGS[name]
    code = FIRST_USE.format(name=name, extra=extra, labels=labels)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [float(v) for v in result.stdout.split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tables", type=_tables, default="all", help="all, or comma-separated tables among single, multi, budget (default all)")
    parser.add_argument("--learners", default="", help="comma-separated names: only their rows (default all)")
    args = parser.parse_args()
    tables = {"single": single_kernel_table, "multi": multi_kernel_table, "budget": budget_table, "first": first_use_table}
    for name, table in tables.items():
        if name in args.tables:
            table(args)


def _tables(value):
    """``--tables``: the set of tables asked for (``all``: every one, with the first-use figures)."""
    names = set(value.split(","))
    if names == {"all"}:
        return {"single", "multi", "budget", "first"}
    if not names or not names <= {"single", "multi", "budget"}:
        raise argparse.ArgumentTypeError(f"{value!r}: give all, or comma-separated names among single, multi, budget")
    return names


def chosen(args, name):
    """Whether ``--learners`` asks for ``name`` (all when empty)."""
    return not args.learners or name in args.learners.split(",")


def single_kernel_table(args):
    X, digits = mnist_shaped(args.rows)
    print(f"MNIST digits, d = 784, batch {BATCH}; best of {args.repeats}, process CPU time")
    print(f"{'learner':<22}{'rows':>7}   {'feature map / update':>22}   {'fold us/row':>17}   same bytes")
    print(f"{'':<22}{'':>7}   {'numpy':>10} {'compiled':>11}   {'numpy':>8} {'compiled':>8}")
    for name, params in [case for case in CASES if chosen(args, case[0])]:
        learner, n, r = measure(name, params, X, digits, args.repeats)
        label = name + (f" D={params['n_components']}" if "n_components" in params else "") + (" kernel phase" if kernel_phase(learner) else "")
        ratios = "".join(f"{'-' if r[m][0] is None else f'{r[m][0]:.2f}':>11}" for m in ("numpy", "compiled"))
        print(f"{label:<22}{n:>7}  {ratios}   {r['numpy'][1]:8.2f} {r['compiled'][1]:8.2f}   {r['numpy'][2] == r['compiled'][2]}")


def multi_kernel_table(args):
    print(f"\nmulti-kernel learners (papers' sizes), batch {BATCH}; best of {args.repeats}, process CPU time")
    print(f"{'learner':<30}{'rows':>7}   {'feature map / update':>22}   {'us/row':>17}   {'speed-up':>8}   same bytes")
    print(f"{'':<30}{'':>7}   {'numpy':>10} {'compiled':>11}   {'numpy':>8} {'compiled':>8}")
    for name, params, kind in [case for case in MULTI_KERNEL_CASES if chosen(args, case[0])]:
        n = min(args.rows, 5000)
        n, feature_s, r = measure_multi_kernel(name, params, kind, n, args.repeats)
        (numpy_s, numpy_bytes), (compiled_s, compiled_bytes) = r["numpy"], r["compiled"]
        label = f"{name} {kind} " + (f"D={params['n_components']}" if "n_components" in params else "exact")
        label += f" M={params['draws_per_node']}" if "draws_per_node" in params else ""
        ratios = f"{'-':>11}{'-':>11}" if feature_s is None else f"{feature_s / numpy_s:11.2f}{feature_s / compiled_s:11.2f}"
        print(
            f"{label:<30}{n:>7}  {ratios}   "
            f"{numpy_s / n * 1e6:8.1f} {compiled_s / n * 1e6:8.1f}   {numpy_s / compiled_s:7.1f}x   {numpy_bytes == compiled_bytes}"
        )


# The budget learners (okl_core.learners.budget): (name, parameters), each at B = 100 and 800.
A9A_BUDGET = dict(n_inputs=123, sigma=4.0)
BUDGET_CASES = [
    ("rbp", dict(A9A_BUDGET)),
    ("forgetron", dict(A9A_BUDGET)),
    ("forgetron", dict(A9A_BUDGET, phi_root="code")),
    ("bogd", dict(A9A_BUDGET, eta=0.5, lam=1e-6, gamma=10.0)),
    ("rbp_r", dict(A9A_BUDGET, eps=0.1)),
    ("forgetron_r", dict(A9A_BUDGET, eta=0.5, eps=0.1)),
    ("bogd_r", dict(A9A_BUDGET, eps=0.1)),
    ("norma_r", dict(A9A_BUDGET)),
    ("mrbp", dict(MNIST, n_classes=10)),
    ("mforgetron", dict(MNIST, n_classes=10)),
    ("mbogd", dict(MNIST, n_classes=10, eta=0.5, lam=1e-5, removal="oldest")),
]


def measure_budget(name, params, B, rows, repeats):
    """(timed rows, numpy and compiled seconds and model bytes) of a budget learner from a full set."""
    learner = okl_core.make_learner(name, budget=B, **params)
    X, y = mnist_shaped(12 * B + rows) if learner.task == "multiclass" else a9a_shaped(12 * B + rows)
    if learner.task == "regression":
        y = y * 0.5 + 0.25 * (X[:, 0] - X[:, 1])  # targets that the eps threshold does not always fire on
    state0, _ = learner.update(learner.init(), X[: 12 * B], y[: 12 * B])
    assert int(state0.n_support) == B, f"{name}: the warm-up did not fill B = {B}"
    X, y, out = X[12 * B :], y[12 * B :], {}

    def learn():
        state = state0
        for part in batches(len(y)):
            state, _ = learner.update(state, X[part], y[part])
        out["bytes"] = okl_core.model_bytes(learner, state)

    result = {}
    for mode in ("numpy", "compiled"):
        with numpy_folds(mode):
            learn()
            result[mode] = (best_of(learn, repeats, time.process_time), out["bytes"])
    return len(y), result


def budget_table(args):
    rows = min(args.rows, 3000)
    print(f"\nbudget learners from a full support set, batch {BATCH}; best of {args.repeats}, process CPU time")
    print(f"{'learner':<30}{'B':>5}{'rows':>7}   {'us/row numpy':>12} {'compiled':>9}   {'speed-up':>8}   same bytes")
    for name, params in [case for case in BUDGET_CASES if chosen(args, case[0])]:
        for B in (100, 800):
            n, r = measure_budget(name, params, B, rows, args.repeats)
            (numpy_s, numpy_bytes), (compiled_s, compiled_bytes) = r["numpy"], r["compiled"]
            label = name + "".join(f" {k}={v}" for k, v in params.items() if k in ("phi_root", "removal"))
            print(f"{label:<30}{B:>5}{n:>7}   {numpy_s / n * 1e6:12.1f} {compiled_s / n * 1e6:9.1f}   "
                  f"{numpy_s / compiled_s:7.1f}x   {numpy_bytes == compiled_bytes}", flush=True)


def first_use_table(args):
    names = [name for name in FIRST_USE_ARGS if chosen(args, name)]
    if not names:
        return
    print("\nfirst use in a fresh process (wall s): import okl_core, 1st update, 2nd update of 1,000 rows, D = 400")
    for name in names:
        runs = [first_use(name) for _ in range(2)]
        print(f"  {name:<18}" + "   ".join(" / ".join(f"{v:.3f}" for v in run) for run in runs) + "   (two fresh processes)")


if __name__ == "__main__":
    main()
