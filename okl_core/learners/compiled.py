"""Compiled per-row folds: the one implementation of every learner's row-by-row loop.

The papers' protocol learns one row at a time (predict, score, learn before the next
row). Each learner family writes that loop once, as numba functions in a fold module
beside it (:data:`FOLD_MODULES`, decorated with :func:`njit`), and its ``update`` calls
them through :func:`folds`. At the papers' sizes the loop in Python was a large part of the
cost (MNIST digits, D = 400: the feature map was 0.62 of mfogd's update time with a numpy
loop, 0.85 compiled; ``bench/bench_folds.py``). The numpy loops the folds replaced live
in ``tests/okl_core/reference`` as the reference the folds are tested against.

Without numba (not installed, or failing to import on this platform) :func:`njit` leaves
each fold a plain Python function: the same code runs, slower, after one
``RuntimeWarning`` saying so. ``NUMBA_DISABLE_JIT=1`` (numba's own switch) runs the folds
as Python too, to debug them.

Compilation is lazy: importing okl compiles nothing and does not import numba; the first
update of a learner imports its fold module (:func:`folds`), and numba compiles a fold,
with the functions it calls, the first time it runs, for the argument types of that call.
Compiled code is cached on disk (numba's ``cache=True``) in :func:`fold_cache_dir`, a
folder of :func:`cache_dir` (okl's user cache ``$OKL_CACHE/numba`` or
``~/.cache/okl/numba``, or ``NUMBA_CACHE_DIR``) named by :func:`fold_sources_digest`, a
hash of every fold module's source: numba invalidates a function's cached code when its
own file changes, not when a function it calls from another file does, so a cache keyed
by all the sources together never runs a stale helper. numba also keys each entry by the
argument types, its version and the CPU. So a fresh process pays the import of numba and
scipy's BLAS and the loading of cached code (about a second once per process, at its first
compiled update), not the compilation (1-5 s per learner family on an idle 2-core
machine, 3-15 s on a busy one, on the first run after okl or numba changed:
``python -m bench.compile``). :func:`warm_up` with ``on_compile`` says when it compiles.
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

__all__ = ["folds", "njit", "FOLD_MODULES", "warm_up", "cache_dir", "fold_cache_dir", "fold_sources_digest"]

FOLD_MODULES: tuple[str, ...] = (
    "okl_core.learners._jit_folds",
    "okl_core.learners._linear_folds",
    "okl_core.learners._expansion_folds",
    "okl_core.learners._multikernel_folds",
    "okl_core.learners.budget._folds",
    "okl_core.learners.oks._folds",
)
"""Every module of numba folds (each learner family's folds live beside the family and are listed
here). The compile cache folder is keyed by a hash of all their sources together
(:func:`fold_cache_dir`), because numba invalidates a function's cached code only when its own
file changes, not when a fold it calls in another file does."""

_FROZEN_SOURCES: tuple[str, ...] = ("okl_core.learners.rules",)
"""Modules whose constants the folds read as globals (the rule codes): numba freezes them into
the machine code, so their sources key the cache too."""

_JIT: list[Callable[[Callable[..., Any]], Callable[..., Any]] | None] = []  # [] until the first fold, then [numba's njit or None]
_ON_COMPILE: list[Callable[[], None]] = []  # called (and dropped) when numba next starts compiling in this process


def cache_dir() -> str:
    """The folder holding okl's compile caches: ``$NUMBA_CACHE_DIR`` when set, else okl's user
    cache (``$OKL_CACHE/numba`` or ``~/.cache/okl/numba``)."""
    from okl_core.data.download import default_cache_dir

    return os.environ.get("NUMBA_CACHE_DIR") or os.path.join(default_cache_dir(), "numba")


def fold_sources_digest() -> str:
    """A short sha256 of the source files of :data:`FOLD_MODULES` (and of the modules whose
    constants they freeze) together: the name of the compile cache's folder."""
    import hashlib

    digest = hashlib.sha256()
    for name in FOLD_MODULES + _FROZEN_SOURCES:
        path = _source_path(name)
        if path is not None and os.path.isfile(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def _source_path(module: str) -> str | None:
    """The source file of ``module``, found without importing it or the packages above it (a fold
    module's package may import learners, which import the folds: this runs while they load)."""
    import importlib.util

    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.origin:
        return None
    if not rest:
        return spec.origin
    return os.path.join(os.path.dirname(spec.origin), *rest[:-1], rest[-1] + ".py")


def fold_cache_dir() -> str:
    """Where the compiled folds of these sources are cached: :func:`cache_dir`'s folder named by
    :func:`fold_sources_digest` (or :func:`cache_dir` itself when it is already that folder: the
    okl process that started this one set it)."""
    base, digest = cache_dir(), fold_sources_digest()
    return base if os.path.basename(os.path.normpath(base)) == digest else os.path.join(base, digest)


def njit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``fn`` with numba (``cache=True``, no fastmath, no parallel loops): the decorator of
    every fold in :data:`FOLD_MODULES`. Where numba cannot be imported, ``fn`` itself (the same
    code, run by Python), after one warning for the process."""
    if not _JIT:
        _JIT.append(_numba_njit())
    jit = _JIT[0]
    return fn if jit is None else jit(fn)


def _numba_njit() -> Callable[[Callable[..., Any]], Callable[..., Any]] | None:
    """numba's ``njit(cache=True)`` with the cache folder and the compile announcement set up, or
    None (with one ``RuntimeWarning`` naming the cause) when numba cannot be imported."""
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (numba's np.dot calls this BLAS)

        _use_cache_dir()
        import numba

        _listen_for_compilation()
    except Exception as exc:  # ImportError, or numba failing on this platform
        warnings.warn(f"okl: numba unavailable ({type(exc).__name__}: {exc}): folds run as plain Python, same code, slower",
                      RuntimeWarning, stacklevel=4)
        return None
    return numba.njit(cache=True)


def folds(module: str) -> ModuleType:
    """The fold module ``module`` (one of :data:`FOLD_MODULES`), imported on first use (its folds
    compiled lazily, cached in :func:`fold_cache_dir`), with scipy's BLAS pinned to one thread
    when called inside a pinned learner method."""
    import importlib

    if module not in FOLD_MODULES:
        raise ValueError(f"{module} is not a fold module of okl_core.learners.compiled.FOLD_MODULES")
    loaded = module in sys.modules
    folds_module = importlib.import_module(module)
    if not loaded:
        pin_new_libraries()
    return folds_module


def _use_cache_dir() -> None:
    """Point numba's cache at :func:`fold_cache_dir`, before the folds are decorated (numba picks a
    function's cache folder then). Set in the environment, so that the processes this one
    starts (Beam and Dask workers) share it; a folder that cannot be made or written is left
    to numba's own choice (beside the fold modules, or its user-wide cache)."""
    path = fold_cache_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return
    if not os.access(path, os.W_OK | os.X_OK):
        return
    os.environ["NUMBA_CACHE_DIR"] = path
    if sys.modules.get("numba") is not None:  # imported before okl's first fold: its configuration is read again
        from numba.core import config

        config.reload_config()


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
