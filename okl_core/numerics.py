"""One BLAS thread for every learner computation, so results do not depend on the machine.

okl promises that the same data, config and seed give the same model bytes on every
runner (DESIGN.md, Determinism). The BLAS under numpy and scipy breaks that promise when
it runs with more than one thread: OpenBLAS picks different kernels and splits sums
differently by thread count, so float32 GEMM (the random Fourier projection ``X @ Omega``,
batched kernel rows ``X @ S.T``), long dot products and LAPACK (Cholesky, ``eigh``,
``inv``, ``solve``, triangular solves) round differently with 1 and 2 threads. Measured
on 2 cores (numpy 2.4's OpenBLAS 0.3.31, scipy's 0.3.30, SkylakeX kernels), one process,
``threadpoolctl.threadpool_limits(1)`` against ``(2)``:

* MNIST test digits (10,000 x 784): ``fogd`` / ``mfogd`` / ``fogd_r`` (D = 800) and
  ``dsg`` (~2^12 features) change their coefficients, online scores and predictions
  (float32 GEMM ``(64, 784) @ (784, 800)``); ``nogd`` / ``mnogd`` / ``nogd_r``
  (``eigh``, kernel GEMM), ``kernel_ogd`` / ``mkernel_ogd`` / ``kernel_ogd_r`` /
  ``kernel_perceptron`` (batched kernel rows) and ``omkl_gf`` / ``raker`` / ``oks`` /
  ``rf_oks_pp`` / ``rf_ioks`` predictions (batched feature maps) differ too;
* a9a (123 columns): ``krr``, ``kernel_awv`` (block inverse), ``pkawv_taylor``
  (Cholesky, ``dpotri``) and ``pkawv_nystrom`` (Cholesky, triangular solves) differ.

Single-op probes: float32 GEMM ``(64..4096, 784) @ (784, 800)``, ``ddot`` of 100,000
terms, and ``cholesky`` / ``inv`` / ``solve`` / ``eigh`` / scipy ``cho_factor`` /
``solve_triangular`` at n = 2000 differ; float32 GEMV, 1-row products, ``ddot`` of 1,600
terms and float64 GEMM at these shapes happen not to, but nothing in OpenBLAS promises
that. Making each reduction thread-invariant by hand would mean replacing GEMM and LAPACK,
so okl pins the thread count instead, where the work runs: every learner's ``init``,
``update``, ``predict``, ``merge`` and ``mix`` (wrapped once, in
:class:`okl_core.learners.base.Learner`), and :func:`okl_core.median_heuristic`, run
under :func:`single_threaded_blas`. Any runner, worker layout or environment variable then
gives the bytes of a one-thread run, which are also the bytes okl produced before the pin
whenever BLAS had one thread.

Cost, measured by ``bench/bench_blas_threads.py`` (2 cores, pinned / 2 free threads,
same process): entering and leaving the pin costs about 4 us per call (under 1 us when
already inside, e.g. ``update`` calling ``predict``), nothing against a batch update.
Learners whose time is one big GEMM lose what the second core gave them -- ``mfogd``
(D = 800, 4096-row batches) and DSG prediction at 2^14-2^16 features run up to ~1.6-1.9x
slower in a single process -- while learners dominated by small products and LAPACK gain,
since two threads on two busy cores only contend (``pkawv_nystrom`` 2.2-3.6x,
``kernel_ogd`` up to 3x faster pinned). Parallelism in okl comes from shards and workers,
one per core, so a pipeline run loses nothing.

The thread count is process-wide BLAS state: while any thread is inside the pin, BLAS calls
from other threads of the process also run single-threaded; the outermost exit restores
the previous counts. BLAS libraries loaded after the first use (scipy's own OpenBLAS is
loaded when ``scipy.linalg`` is first imported) are picked up at the next outermost entry.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading

__all__ = ["single_threaded_blas", "pinned", "blas_libraries"]

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
        mine = []
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


def pinned(function):
    """Decorate ``function`` to run under :func:`single_threaded_blas` (marked ``_okl_pinned``)."""
    if getattr(function, "_okl_pinned", False):
        return function

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        _enter()
        try:
            return function(*args, **kwargs)
        finally:
            _exit()

    wrapper._okl_pinned = True
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
