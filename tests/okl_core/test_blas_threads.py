"""Model bytes and scores do not depend on the BLAS thread count (okl_core.numerics).

Every registered learner is trained, merged and asked for predictions with the process's
BLAS limited to 1 thread and to 2 threads (threadpoolctl, as a runner or a worker's
environment would set it); states (as model file bytes), online scores, predictions and
merges must be byte-identical. The matrices are MNIST-sized -- 784 columns quantized to
k/255 like real pixels (float32 values with short mantissas are exact enough that some
products never round), thousands of kernel or feature columns -- so that OpenBLAS does
thread them: ``test_unpinned_blas_does_differ`` checks that, without okl's pin, the same
runs give different bytes here, so the main test cannot pass by being too small. The real
MNIST test digits and a9a are used when ../shared/data has them.
"""

import os
import threading
from typing import NamedTuple

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS, which the limits must cover too)
from threadpoolctl import threadpool_info, threadpool_limits

import okl_core
from okl_core import numerics
from okl_core.learners.base import Learner

from .real_data import a9a, mnist_test

MNIST = dict(n_inputs=784, sigma=8.0)
MULTI = dict(n_inputs=784, kernels="gaussian:4,gaussian:8")
A9A = dict(n_inputs=123, sigma=4.0, task="binary")

# learner -> (parameters, data shape, rows trained on); every learner in the registry.
CASES = {
    "fogd": (dict(MNIST, n_components=800), "mnist", 512),
    "mfogd": (dict(MNIST, n_components=800, n_classes=10), "mnist", 512),
    "fogd_r": (dict(MNIST, n_components=800), "mnist", 512),
    "dsg": (dict(MNIST, n_classes=10, loss="softmax", block_size=64, batch_size=64), "mnist", 1024),
    "nogd": (dict(MNIST, budget=100, rank=20), "mnist", 300),
    "mnogd": (dict(MNIST, budget=100, rank=20, n_classes=10), "mnist", 300),
    "nogd_r": (dict(MNIST, budget=100, rank=20), "mnist", 300),
    "kernel_ogd": (dict(MNIST), "mnist", 400),
    "mkernel_ogd": (dict(MNIST, n_classes=10), "mnist", 400),
    "kernel_ogd_r": (dict(MNIST), "mnist", 400),
    "kernel_perceptron": (dict(MNIST), "mnist", 400),
    "kernel_awv": (dict(A9A), "a9a", 600),
    "krr": (dict(A9A), "a9a", 600),
    "pkawv_taylor": (dict(A9A, n_inputs=50, degree=2), "a9a", 400),
    "pkawv_nystrom": (dict(A9A), "a9a", 1000),
    "omkl_gf": (dict(MULTI, n_components=400), "mnist", 256),
    "raker": (dict(MULTI, n_components=400), "mnist", 256),
    "oks": (dict(MULTI, horizon=256), "mnist", 256),
    "oks_pp": (dict(MULTI), "mnist", 256),
    "ioks": (dict(MULTI, horizon=256), "mnist", 256),
    "rf_oks_pp": (dict(MULTI, n_components=400), "mnist", 256),
    "rf_ioks": (dict(MULTI, n_components=400, horizon=256), "mnist", 256),
    "rbp": (dict(MNIST, budget=400), "mnist", 1200),
    "mrbp": (dict(MNIST, budget=400, n_classes=10), "mnist", 1200),
    "rbp_r": (dict(MNIST, budget=400), "mnist", 1200),
    "forgetron": (dict(MNIST, budget=400), "mnist", 1200),
    "projectron": (dict(MNIST, budget=400, eta=0.01), "mnist", 1200),
    "projectron_pp": (dict(MNIST, budget=400, eta=0.01), "mnist", 1200),
    "mprojectron": (dict(MNIST, budget=400, eta=0.01, n_classes=10), "mnist", 1200),
    "bpa_s": (dict(MNIST, budget=400), "mnist", 1200),
    "bogd": (dict(MNIST, budget=400), "mnist", 1200),
    "mbogd": (dict(MNIST, budget=400, n_classes=10), "mnist", 1200),
    "mforgetron": (dict(MNIST, budget=400, n_classes=10), "mnist", 1200),
    "mprojectron_pp": (dict(MNIST, budget=400, eta=0.01, n_classes=10), "mnist", 1200),
    "mbpa_s": (dict(MNIST, budget=400, n_classes=10), "mnist", 1200),
    "bogd_r": (dict(MNIST, budget=400), "mnist", 1200),
    "forgetron_r": (dict(MNIST, budget=400), "mnist", 1200),
    "projectron_r": (dict(MNIST, budget=400, projection_eta=0.01), "mnist", 1200),
    "norma_r": (dict(MNIST, budget=400), "mnist", 1200),
}
N_TEST = 512


def mnist_shaped(n, seed=0):
    """Synthetic digits: 784 pixels, ~80% zero, the rest k/255; labels 0..9 from a linear map."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 784), dtype=np.float32)
    X[rng.random((n, 784)) < 0.8] = 0.0
    X = (np.round(X * 255.0) / 255.0).astype(np.float32)
    return X, np.argmax(X @ rng.standard_normal((784, 10)), axis=1)


def a9a_shaped(n, seed=0):
    """Synthetic a9a: 123 binary columns, ~11% ones; labels -1/+1 from a linear map."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, 123)) < 0.11).astype(np.float32)
    return X, np.where(X @ rng.standard_normal(123) > 0, 1, -1)


def labels_for(learner, digits):
    """Digit labels 0..9 as the learner's task needs them."""
    if learner.task == "binary":
        return np.where(digits % 2 == 0, 1, -1)
    if learner.task == "regression":
        return digits.astype(np.float64)
    return digits


def case_data(name, real=False):
    params, shape, n = CASES[name]
    learner = okl_core.make_learner(name, **params)
    d = params["n_inputs"]
    if shape == "mnist":
        X, digits = mnist_test() if real else mnist_shaped(n + N_TEST)
        y = labels_for(learner, digits)
    else:
        X, y = a9a() if real else a9a_shaped(n + N_TEST)
        X = X[:, :d]
    return learner, X[:n], y[:n], X[-N_TEST:]


def run_bytes(learner, X, y, X_test) -> list[bytes]:
    """Two updates, a prediction and (when the learner merges) a merge: every result's bytes."""
    half = len(y) // 2
    first, online_a = learner.update(learner.init(), X[:half], y[:half])
    state, online_b = learner.update(first, X[half:], y[half:])
    out = [okl_core.model_bytes(learner, first), okl_core.model_bytes(learner, state)]
    out += [np.ascontiguousarray(a).tobytes() for a in (online_a, online_b, learner.predict(state, X_test))]
    if learner.merge_semantics != "none":
        other, _ = learner.update(learner.init(), X[half:], y[half:])
        out.append(okl_core.model_bytes(learner, okl_core.merge_states(learner, [first, other])))
    return out


def under_blas_threads(n_threads, fn, *args):
    with threadpool_limits(limits=n_threads, user_api="blas"):
        return fn(*args)


def differing(a, b):
    names = ["state after 1st update", "state after 2nd update", "online scores 1", "online scores 2", "predictions", "merge"]
    return [names[i] for i in range(len(a)) if a[i] != b[i]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_bytes_with_one_and_two_blas_threads(name):
    learner, X, y, X_test = case_data(name)
    one = under_blas_threads(1, run_bytes, learner, X, y, X_test)
    two = under_blas_threads(2, run_bytes, learner, X, y, X_test)
    assert not differing(one, two), f"{name}: {differing(one, two)} depend on the BLAS thread count"


def test_every_registered_learner_is_covered():
    assert sorted(CASES) == okl_core.learner_names()


REAL_MNIST = ["mfogd", "fogd", "dsg", "nogd", "kernel_ogd", "raker", "rf_oks_pp"]


@pytest.mark.parametrize(
    "name", [n if n in ("mfogd", "fogd") else pytest.param(n, marks=pytest.mark.slow) for n in REAL_MNIST]
)
def test_real_mnist_digits_same_bytes_with_one_and_two_blas_threads(name):
    learner, _, _, _ = case_data(name)
    X, digits = mnist_test()
    n = {"mfogd": 4096, "fogd": 4096, "dsg": 4096}.get(name, 1000)
    X_test = X[-2000:]
    X, y = X[:n], labels_for(learner, digits)[:n]
    one = under_blas_threads(1, run_bytes, learner, X, y, X_test)
    two = under_blas_threads(2, run_bytes, learner, X, y, X_test)
    assert not differing(one, two), f"{name} on MNIST: {differing(one, two)} depend on the BLAS thread count"


@pytest.mark.slow
def test_real_a9a_pkawv_nystrom_same_bytes_with_one_and_two_blas_threads():
    learner, _, _, _ = case_data("pkawv_nystrom")
    X, y = a9a()
    one = under_blas_threads(1, run_bytes, learner, X[:3000], y[:3000], X[-2000:])
    two = under_blas_threads(2, run_bytes, learner, X[:3000], y[:3000], X[-2000:])
    assert not differing(one, two)


def _openblas_can_thread() -> bool:
    libs = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    return (os.cpu_count() or 1) >= 2 and bool(libs) and all(lib["internal_api"] == "openblas" for lib in libs)


# With two threads on two busy cores the unpinned LAPACK cases take seconds: run them on CI.
SLOW_UNPINNED = ("kernel_awv", "krr", "pkawv_nystrom", "pkawv_taylor")


# Learners whose bytes do not depend on the thread count even without the pin: their kernel rows
# are einsum sums over the non-zero coordinates in a fixed order (okl_core/kernels.py), and their
# predictions are GEMMs, which OpenBLAS splits over blocks of the output, never over the summed
# dimension. Before kernels.py (kernel rows as BLAS matrix-vector products) they did differ.
# The budget learners (okl_core/learners/budget/) score with the same einsum rows, and their
# small solves (Projectron's inverse kernel matrix, at most budget x budget) do not thread.
# That holds for OpenBLAS's Haswell kernels; its SkylakeX (AVX-512) GEMM kernels also split the
# summed dimension over threads (seen on this project's CI machine: kernel OGD's online scores,
# the budget learners' predictions), so there the pin alone keeps their bytes.
INVARIANT_KERNELS = ("Haswell",)
BUDGET = tuple(n for n in sorted(CASES) if okl_core.learner_class(n).__module__.startswith("okl_core.learners.budget."))
INVARIANT_UNPINNED = ("ioks", "kernel_ogd", "kernel_ogd_r", "kernel_perceptron", "mkernel_ogd", "oks", "oks_pp") + BUDGET


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_UNPINNED else n for n in sorted(CASES)])
def test_unpinned_blas_does_differ(name):
    """Control: without okl's pin these runs do depend on the thread count (the sizes matter).

    For the learners of ``INVARIANT_UNPINNED`` the control asserts the opposite: their
    arithmetic is thread-independent by construction, and must stay so.
    """
    if not _openblas_can_thread():
        pytest.skip("needs OpenBLAS and at least 2 cores to show thread-dependent rounding")
    kernels = {lib.get("architecture") for lib in threadpool_info() if lib["user_api"] == "blas"}
    if name in INVARIANT_UNPINNED and not kernels <= set(INVARIANT_KERNELS):
        pytest.skip(f"{name}: thread-independent without the pin only with OpenBLAS's {INVARIANT_KERNELS} kernels, here {sorted(kernels)}")
    learner, X, y, X_test = case_data(name)
    with numerics._unpinned():
        one = under_blas_threads(1, run_bytes, learner, X, y, X_test)
        two = under_blas_threads(2, run_bytes, learner, X, y, X_test)
    if name in INVARIANT_UNPINNED:
        assert not differing(one, two), f"{name}: {differing(one, two)} now depend on BLAS threads without the pin"
    else:
        assert differing(one, two), f"{name}: the case is too small for BLAS to thread; enlarge it"


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


class _ProbeState(NamedTuple):
    n_seen: np.ndarray


class _Probe(Learner):
    """A learner defined outside okl_core: its methods are pinned too, and see one thread."""

    name = "blas_probe"
    state_class = _ProbeState
    seen: list = []

    def init(self):
        return _ProbeState(np.asarray(0, dtype=np.int64))

    def predict(self, state, X):
        self.seen.append(_blas_threads())
        self.init()  # nested pinned call: must not restore the count early
        self.seen.append(_blas_threads())
        return np.zeros(len(X))


def test_pin_applies_to_subclasses_nests_and_restores_the_thread_count():
    probe = object.__new__(_Probe)
    probe.seen = []
    with threadpool_limits(limits=2, user_api="blas"):
        probe.predict(_ProbeState(np.asarray(0, dtype=np.int64)), np.zeros((3, 1)))
        assert _blas_threads() and set(_blas_threads()) == {2}
    assert probe.seen == [[1] * len(_blas_threads())] * 2
    for method in ("init", "update", "predict", "merge"):
        assert getattr(getattr(_Probe, method), "_okl_pinned", False), method


def test_concurrent_threads_get_single_thread_bytes():
    """Learners running in several threads of one process (in-process runners) stay pinned."""
    learner, X, y, X_test = case_data("mfogd")
    expected = under_blas_threads(1, run_bytes, learner, X, y, X_test)
    results = [None] * 3

    def work(i):
        results[i] = run_bytes(learner, X, y, X_test)

    with threadpool_limits(limits=2, user_api="blas"):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(_blas_threads()) == {2}
    assert all(r == expected for r in results)


def test_median_heuristic_does_not_depend_on_blas_threads():
    X, _ = mnist_shaped(2000)
    one = under_blas_threads(1, okl_core.median_heuristic, X)
    two = under_blas_threads(2, okl_core.median_heuristic, X)
    assert one == two
