"""Compiled per-row folds: :func:`okl_core.learners.rules.fold` without Python per row.

The papers' protocol learns one row at a time (predict, score, learn before the next
row), so a batch update is a Python loop of a few small numpy calls per row. At the
papers' sizes that loop was a large part of the cost (MNIST digits, D = 400: the feature
map was 0.62 of mfogd's update time with the numpy fold, 0.72 of fogd's; 0.85 and ~1.0
compiled). The same loop compiled
with numba (``okl_core.learners._jit_folds``) runs the same arithmetic -- the same BLAS
products, the same elementwise steps -- so models keep their bytes
(``bench/bench_folds.py`` has the figures; tests/okl_core/test_compiled_folds.py checks
the bytes against the numpy fold).

One mechanism for every learner: :func:`~okl_core.learners.rules.fold` asks its model for
a ``compiled_fold`` and the rule for its code (:func:`~okl_core.learners.rules.rule_code`);
when both exist and :func:`kernels` is available, the compiled loop runs, else the numpy
one. The multi-kernel learners (Raker, OMKL-GF, RF-OKS++, RF-IOKS; OKS, OKS++ and IOKS on
growing support sets) ask :func:`kernels` the same way for their own loops; the
random-feature ones' features come in batches computed in numpy
(:meth:`~okl_core.learners.multikernel.KernelFeatureBank.row_blocks`,
:func:`~okl_core.learners.multikernel.fold_on_demand`) and all their numpy folds take exp,
log and pow from the C library and sum sequentially, as the compiled ones do. The numpy
fold is the reference and stays tested.

``OKL_NO_JIT=1`` forces the numpy fold. Without numba (or when it fails to import) the
numpy fold runs after one warning.

Compilation is lazy: importing the kernels compiles nothing; numba compiles a fold, with
the functions it calls, the first time a learner runs it, for the argument types of that
call. Compiled code is cached on disk (numba's ``cache=True``) in :func:`cache_dir`: okl's
user cache (``$OKL_CACHE/numba`` or ``~/.cache/okl/numba``) unless ``NUMBA_CACHE_DIR`` names
another folder, so that reinstalling okl keeps it (a cache beside ``_jit_folds.py`` goes
with the installed files, and is not writable in a read-only ``site-packages``). numba
keys each entry by the source file's path and content hash, the argument types, numba's
version and the CPU, and recompiles when any differs. So a fresh process pays the import
of numba and scipy's BLAS and the loading of cached code (about a second once per process,
at its first compiled update), not the compilation (1-5 s per learner family on an idle
2-core machine, 3-15 s on a busy one, on the first run after okl or numba changed:
``python -m bench.compile``). :func:`warm_up` with
``on_compile`` says when it compiles.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from okl_core.numerics import pin_new_libraries

if TYPE_CHECKING:
    from okl_core.learners.base import Learner

__all__ = ["kernels", "jit_disabled", "warm_up", "cache_dir", "njit", "folds", "FOLD_MODULES"]

_loaded: list[ModuleType | None] = []  # [] until the first load, then [module or None]

FOLD_MODULES: tuple[str, ...] = (
    "okl_core.learners._jit_folds",
    "okl_core.learners.oks._folds",
)
"""Every module of numba folds (each learner family's folds live beside the family and are listed
here). The compile cache folder is keyed by a hash of all their sources together
(:func:`cache_dir`), because numba invalidates a function's cached code only when its own
file changes, not when a fold it calls in another file does."""
_ON_COMPILE: list[Callable[[], None]] = []  # called (and dropped) when numba next starts compiling in this process


def cache_dir() -> str:
    """Where compiled folds are cached: ``$NUMBA_CACHE_DIR`` when set, else okl's user cache
    (``$OKL_CACHE/numba`` or ``~/.cache/okl/numba``)."""
    from okl_core.data.download import default_cache_dir

    return os.environ.get("NUMBA_CACHE_DIR") or os.path.join(default_cache_dir(), "numba")


def fold_sources_digest() -> str:
    """A short sha256 of the source files of :data:`FOLD_MODULES` together (the cache's key)."""
    import hashlib
    import importlib.util

    digest = hashlib.sha256()
    for name in FOLD_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            with open(spec.origin, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def njit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``fn`` with numba (``cache=True``, no fastmath, no parallel loops): the decorator of
    every fold in :data:`FOLD_MODULES`. Fold modules are imported only through :func:`folds`,
    which sets the cache folder first."""
    import numba

    return numba.njit(cache=True)(fn)


def folds(module: str) -> ModuleType | None:
    """The fold module ``module`` (one of :data:`FOLD_MODULES`), imported on first use with the
    compile cache set up and scipy's BLAS pinned, as :func:`kernels`; None where :func:`kernels` is."""
    import importlib

    if kernels() is None:
        return None
    return importlib.import_module(module)


def _use_cache_dir() -> None:
    """Point numba's cache at :func:`cache_dir`, before the kernels are decorated (numba picks a
    function's cache folder then). Set in the environment, so that the processes this one
    starts (Beam and Dask workers) share it; a folder that cannot be made or written is left
    to numba's own choice (beside ``_jit_folds.py``, or its user-wide cache)."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return
    path = cache_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return
    if not os.access(path, os.W_OK | os.X_OK):
        return
    os.environ["NUMBA_CACHE_DIR"] = path
    if "numba" in sys.modules:  # imported before okl asked for the kernels: its configuration is read again
        from numba.core import config

        config.reload_config()


def jit_disabled() -> bool:
    """True when the environment asks for the numpy folds (``OKL_NO_JIT`` set, not ``0``)."""
    return os.environ.get("OKL_NO_JIT", "") not in ("", "0")


def kernels() -> ModuleType | None:
    """The compiled fold kernels, or None for the numpy fold (``OKL_NO_JIT``, or no numba).

    The first call imports numba and scipy's BLAS (which the kernels' products call) and
    pins that BLAS to one thread when called inside a pinned learner method.
    """
    if jit_disabled():
        return None
    if not _loaded:
        _loaded.append(_load())
        pin_new_libraries()
    return _loaded[0]


def _load() -> ModuleType | None:
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (numba's np.dot calls this BLAS)

        _use_cache_dir()
        from okl_core.learners import _jit_folds

        _listen_for_compilation()
    except Exception as exc:  # ImportError, or numba failing on this platform
        warnings.warn(
            f"okl: compiled folds unavailable ({type(exc).__name__}: {exc}); using the numpy folds (same models, slower)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return _jit_folds


def _listen_for_compilation() -> None:
    """Call what :func:`warm_up` was given as ``on_compile`` when numba starts compiling (numba's
    event API: ``numba:compile`` is announced for a compilation, not for code loaded from the cache)."""
    from numba.core import event

    class FirstCompilation(event.Listener):
        def on_start(self, ev):
            while _ON_COMPILE:
                _ON_COMPILE.pop(0)()

        def on_end(self, ev):
            pass

    event.register("numba:compile", FirstCompilation())


_WARM_LABEL = {"binary": 1, "multiclass": 0, "regression": 0.0}


def warm_up(learner: "Learner[Any]", on_compile: Callable[[], None] | None = None) -> None:
    """Run ``learner`` once on one row of zeros from its initial state, and drop the result.

    A fresh process pays for its first compiled update once: importing numba and scipy's
    BLAS and loading the cached fold (mfogd, D = 800: 0.45 s of CPU, as much as learning
    7 batches of 4,096 MNIST rows), or compiling it when it is not in the cache. Workers call
    this when they start, so that the cost is paid before their first batch instead of inside
    it; the commands call it before the job, so that worker processes find the folds cached.
    Learners are pure functions of ``(state, rows)``, so nothing of this run reaches a model.

    Parameters
    ----------
    learner
        The learner to run.
    on_compile
        Called once when this run starts compiling (numba found a fold it runs missing
        from the cache); not called when everything it runs is cached or already compiled
        in this process, or for a learner without compiled folds.
    """
    n_inputs = int(learner.config.n_inputs)
    if on_compile is not None:
        _ON_COMPILE.append(on_compile)
    try:
        learner.update(learner.init(), np.zeros((1, n_inputs), np.float32), np.array([_WARM_LABEL[learner.task]]))
    finally:
        if on_compile in _ON_COMPILE:
            _ON_COMPILE.remove(on_compile)
