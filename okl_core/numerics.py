"""One BLAS thread for every learner computation, so results do not depend on the machine.

okl promises that the same data, config and seed give the same model bytes on every
runner and worker layout (DESIGN.md). The BLAS under numpy and scipy breaks that promise
when it runs with more than one thread: OpenBLAS picks other kernels and splits its work
differently by thread count, so products round differently. Measured on 2 cores (numpy
2.4's OpenBLAS 0.3.31 and scipy 1.17's 0.3.30, SkylakeX kernels), one process,
``threadpoolctl.threadpool_limits(1)`` against ``(2)``:

* single ops that change: float32 GEMM ``(64..4096, 784) @ (784, 800)`` (the random Fourier
  projection ``X @ Omega``); float64 GEMM of kernel rows ``X @ S.T`` from 128 x 256 up, on
  pixel-like data (k/255; uniform random float32 is exact enough to hide it); ``ddot`` of
  100,000 terms; LAPACK at n = 2000: ``cholesky``, ``inv``, ``solve``, ``eigh``, scipy
  ``cho_factor``, ``solve_triangular``; a 1820 x 1820 matrix-vector product (GEMV). Unchanged
  there: smaller GEMV, 1-row products, ``ddot`` of 1,600 terms, ``X @ X.T`` (SYRK) -- by luck
  of the current kernels, not by contract;
* learners (MNIST test digits 10,000 x 784, or a9a): all 22 registered learners give other
  bytes -- states, online scores or predictions -- at the sizes of
  ``tests/okl_core/test_blas_threads.py`` (on a9a-sized inputs some do not: fogd with 123
  inputs, and the multi-kernel learners, whose updates go row by row): the FOGD family and DSG (float32 GEMM),
  NOGD (``eigh`` and kernel GEMM), kernel OGD / perceptron and OKS (kernel-row GEMM),
  OMKL-GF, Raker and the RF-OKS learners (batched feature maps in ``predict``), KRR,
  kernel AWV, PKAWV-Taylor and PKAWV-Nystroem (block inverses, Cholesky, triangular
  solves). Pipeline: MNIST digits, mfogd D = 800, 2 shards x 2 rounds gave one
  model.npz in-process with 2 threads and multi_processing, another with
  ``OPENBLAS_NUM_THREADS=1``.

Making every reduction thread-invariant by hand would mean replacing GEMM and LAPACK, so
okl pins the thread count instead, where the work runs: every learner's ``init``,
``update``, ``predict``, ``merge`` and ``mix`` (wrapped once, in
:class:`okl_core.learners.base.Learner`, for subclasses defined anywhere) and
:func:`okl_core.median_heuristic` run under :func:`single_threaded_blas`. Whatever the
runner, its threads, the worker layout or the environment, a model then has the bytes of
a one-thread run -- the bytes okl already produced whenever BLAS had one thread (checked:
all learners' single-thread hashes unchanged; the pipeline above now gives the
``OPENBLAS_NUM_THREADS=1`` model in-process, multi_processing and with one thread).

Cost (``bench/bench_blas_threads.py``, 2 cores, pinned / BLAS's default of 2 threads in
one process; a shared machine, so +-10%): entering and leaving the pin costs ~13 us per
outermost call (~3 us when BLAS already has one thread; 0.5 us nested, e.g. ``update``
calling ``predict``): a 1-row ``fogd.predict`` takes 38 us instead of 26, a 4,096-row
batch update tens of milliseconds. Where one big GEMM dominates, the second core is lost:
mfogd / fogd D = 800 on MNIST 1.34x, DSG 2^12 features 1.17x, PKAWV-Taylor degree 2
1.34x, DSG ``predict`` on 2,000 rows at 2^12 / 2^14 / 2^15 / 2^16 features 1.44 / 2.3 /
1.49 / 1.41x slower. Where small products and LAPACK dominate, two threads on two busy
cores only contend and the pin is faster: PKAWV-Nystroem 0.20x (5x faster), KRR 0.59x;
kernel OGD, OMKL-GF, Raker, OKS ~1.0x. okl's parallelism is shards and workers, one per
core, where BLAS threads would compete anyway, so a pipeline run does not lose the second
core.

The count is process-wide BLAS state (OpenBLAS on pthreads, MKL): while any thread is
inside the pin, BLAS calls from the process's other threads also run on one thread, and
the last thread to leave restores the previous counts; a per-thread count (OpenBLAS on
OpenMP) is set and restored by each thread. threadpoolctl >= 3.7 lets only one
"controlling" Python thread change OpenBLAS's count and silently ignores the others (so a
limit set in a Beam DoFn, which runs on a worker thread, may not apply): okl serialises
its own changes and releases that control around them. BLAS libraries loaded after the
first use (scipy's OpenBLAS comes with ``scipy.linalg``) are picked up at the next entry.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    import numpy as np

__all__ = ["single_threaded_blas", "pinned", "blas_libraries", "pin_new_libraries", "libm_exp"]

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_local = threading.local()  # per thread: depth (nesting) and the per-thread counts to restore
_depth = 0  # threads of the process inside the pin
_restore: list = []  # (process-wide library, its count before the first thread entered)
_enabled = True  # False only inside _unpinned() (benchmarks and the test's control)
_libraries: list = []
_modules_seen = -1  # len(sys.modules) when the libraries were last looked up


def blas_libraries() -> list:
    """threadpoolctl controllers of the BLAS libraries loaded in this process.

    Looked up again whenever modules were imported since the last look-up, so a BLAS that
    an extension loads later (scipy's) is included.
    """
    global _libraries, _modules_seen
    n_modules = len(sys.modules)
    if n_modules != _modules_seen:
        from threadpoolctl import ThreadpoolController

        _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        _modules_seen = n_modules
    return _libraries


def _per_thread(lib) -> bool:
    """True when the library's count is per calling thread (an OpenMP threading layer)."""
    return getattr(lib, "threading_layer", None) == "openmp"


def _set_threads(lib, n: int) -> None:
    # threadpoolctl >= 3.7 lets only one "controlling" Python thread change a process-wide
    # OpenBLAS pool and silently ignores the others -- which would leave a learner running
    # in a runner's worker thread unpinned. okl serialises its own changes under _lock, so
    # it releases that control before and after setting (a public threadpoolctl API).
    clear = getattr(type(lib), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    lib.set_num_threads(n)
    if clear is not None:
        clear(force=True)


def _enter() -> None:
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    if depth:  # nested in this thread: already pinned
        return
    try:
        _pin_this_thread()
    except BaseException:
        _local.depth = depth
        raise


def _pin_this_thread() -> None:
    global _depth
    with _lock:
        mine: list = []
        if _enabled:
            first = _depth == 0
            for lib in blas_libraries():
                if not (first or _per_thread(lib)):
                    continue
                n = lib.get_num_threads()
                if n is not None and n != 1:
                    _set_threads(lib, 1)
                    (mine if _per_thread(lib) else _restore).append((lib, n))
        _local.restore = mine
        _depth += 1


def pin_new_libraries() -> None:
    """Pin the BLAS libraries loaded since this thread entered the pin (no-op outside it).

    A library that an import loads inside a pinned call (scipy's OpenBLAS, which the
    compiled folds of :mod:`okl_core.learners.compiled` call, comes with their first use)
    would otherwise keep its default thread count until the next outermost entry. Any
    library found inside the pin with a count other than 1 is new: it is set to 1 and
    restored on leaving, like the others.
    """
    if not getattr(_local, "depth", 0):
        return
    with _lock:
        if not _enabled:
            return
        for lib in blas_libraries():
            n = lib.get_num_threads()
            if n is not None and n != 1:
                _set_threads(lib, 1)
                (_local.restore if _per_thread(lib) else _restore).append((lib, n))


def _exit() -> None:
    global _depth, _restore
    _local.depth -= 1
    if _local.depth:
        return
    with _lock:
        for lib, n in _local.restore:
            _set_threads(lib, n)
        _local.restore = []
        _depth -= 1
        if _depth == 0:
            for lib, n in _restore:
                _set_threads(lib, n)
            _restore = []


def _after_fork_in_child() -> None:
    # Only the forking thread lives on in the child: forget the others' entries (and a lock
    # one of them may have held), and restore the counts if no thread remains inside.
    global _lock, _depth, _restore
    _lock = threading.Lock()
    _depth = getattr(_local, "depth", 0) and 1
    if not _depth:
        for lib, n in _restore:
            _set_threads(lib, n)
        _restore = []


os.register_at_fork(after_in_child=_after_fork_in_child)


class single_threaded_blas(contextlib.ContextDecorator):
    """Context manager (and decorator): BLAS runs with one thread inside, as before outside.

    Re-entrant and safe to use from several threads at once: a process-wide count (OpenBLAS
    with pthreads, MKL) is set when the first thread enters and restored when the last one
    leaves; a per-thread count (OpenBLAS on OpenMP) is set and restored by each thread.
    """

    def __enter__(self):
        _enter()
        return self

    def __exit__(self, *exc):
        _exit()
        return False


def pinned(function: Callable[P, R]) -> Callable[P, R]:
    """Decorate ``function`` to run under :func:`single_threaded_blas` (marked ``_okl_pinned``)."""
    if getattr(function, "_okl_pinned", False):
        return function

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        _enter()
        try:
            return function(*args, **kwargs)
        finally:
            _exit()

    wrapper._okl_pinned = True  # type: ignore[attr-defined]
    return wrapper


@contextlib.contextmanager
def _unpinned():
    """Let BLAS use its own thread count inside (benchmarks and the test's control only)."""
    global _enabled
    with _lock:
        if _depth:
            raise RuntimeError("cannot unpin BLAS threads inside a pinned call")
        _enabled = False
    try:
        yield
    finally:
        with _lock:
            _enabled = True


def libm_exp(v: "np.ndarray") -> "np.ndarray":
    """``exp`` of each element of a float64 vector in the C library's ``exp``, as compiled code computes it.

    numpy's SIMD ``np.exp`` differs from the C library's in the last bit on some arguments
    (4.6% of 200,000 measured), and numba's ``math.exp`` / ``np.exp`` are the C library's;
    so the numpy folds that must give the compiled folds' bytes exponentiate here
    (:mod:`okl_core.learners.compiled`). Slower than ``np.exp`` (~50 ns an element): only
    the reference folds call it.
    """
    import numpy as np

    return np.fromiter(map(math.exp, np.asarray(v, dtype=np.float64).ravel().tolist()), np.float64, np.size(v))
