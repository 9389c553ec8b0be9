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
numpy fold runs after one warning. Compiled code is cached on disk (numba's
``cache=True``: ``__pycache__`` beside ``_jit_folds.py``, or ``NUMBA_CACHE_DIR``), so a
fresh process pays the import of numba and scipy's BLAS and the loading of cached code
(0.4-0.7 s once per process, at its first compiled update), not the compilation (1-4 s
per learner shape, on the first run after an install).
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from okl_core.numerics import pin_new_libraries

if TYPE_CHECKING:
    from okl_core.learners.base import Learner

__all__ = ["kernels", "jit_disabled", "warm_up"]

_loaded: list[ModuleType | None] = []  # [] until the first load, then [module or None]


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

        from okl_core.learners import _jit_folds
    except Exception as exc:  # ImportError, or numba failing on this platform
        warnings.warn(
            f"okl: compiled folds unavailable ({type(exc).__name__}: {exc}); using the numpy folds (same models, slower)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return _jit_folds


_WARM_LABEL = {"binary": 1, "multiclass": 0, "regression": 0.0}


def warm_up(learner: "Learner[Any]") -> None:
    """Run ``learner`` once on one row of zeros from its initial state, and drop the result.

    A fresh process pays for its first compiled update once: importing numba and scipy's
    BLAS and loading the cached fold (mfogd, D = 800: 0.45 s of CPU, as much as learning
    7 batches of 4,096 MNIST rows). Workers call this when they start, so that the cost is
    paid before their first batch instead of inside it. Learners are pure functions of
    ``(state, rows)``, so nothing of this run reaches a model.
    """
    n_inputs = int(learner.config.n_inputs)
    learner.update(learner.init(), np.zeros((1, n_inputs), np.float32), np.array([_WARM_LABEL[learner.task]]))
