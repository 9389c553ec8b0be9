"""The numpy per-row folds of the exact-kernel expansions (kernel OGD, the kernel
Perceptron, NOGD's kernel phase): the reference that ``okl_core.learners._expansion_folds``
is tested against, byte for byte.

The functions have the fold module's names and arguments, so
:func:`tests.okl_core.reference.folds.use_reference_folds` can run a learner on them. A row
is scored by :func:`okl_core.kernels.reference_row_against_buffer` (the kernel row in numpy:
fixed summation orders, the C library's exp) and ``@`` (ddot, dgemv for (m, C)).
"""

from __future__ import annotations

import numpy as np

from okl_core.kernels import KERNEL_CODES, reference_row_against_buffer
from okl_core.learners._expansion_folds import Expansion, Rows  # noqa: F401  (the bundles the learners build)
from tests.okl_core.reference.linear import multiclass_rule, rule_of

_KERNEL_NAMES = {code: name for name, code in KERNEL_CODES.items()}


def _score(kernel, rows, i, x, expansion, m):
    """Row ``i``'s score: ``base[i]`` (when given) plus the expansion over the ``m`` stored rows."""
    X, base, has_base, _, scores = rows
    columns, sq_norms, alpha, _ = expansion
    code, sigma, _ = kernel
    if m == 0:
        return base[i].copy() if has_base else np.zeros(scores.shape[1:])[()]
    f = reference_row_against_buffer(_KERNEL_NAMES[code], sigma, x, columns[:, :m], sq_norms[:m]) @ alpha[:m]
    return base[i] + f if has_base else f


def _store(rows, i, x, expansion, m, coef):
    """Store row ``i`` (``x`` widened) as entry ``m`` with coefficient ``coef``."""
    columns, sq_norms, alpha, vectors = expansion
    columns[:, m], sq_norms[m], vectors[m], alpha[m] = x, x @ x, rows.X[i], coef


def _fold(decide, kernel, rows, start, expansion, m, defer_at):
    """Rows ``start..`` scored against the expansion, learned by ``decide``; ``(stop, m)`` as the folds."""
    X, _, _, y, scores = rows
    for i in range(start, len(y)):
        x = X[i].astype(np.float64)
        f = _score(kernel, rows, i, x, expansion, m)
        scores[i] = f
        coef = decide(f, y[i])
        if coef is not None:
            if m == defer_at:
                return i, m
            _store(rows, i, x, expansion, m, coef)
            m += 1
    return len(y), m


# -- the fold module's functions ---------------------------------------------------------
def fold_expansion(rule, kernel, rows, start, expansion, m, defer_at):
    """``_expansion_folds.fold_expansion``: a scalar rule."""
    return _fold(rule_of(rule), kernel, rows, start, expansion, m, defer_at)


def fold_expansion_multiclass(eta, kernel, rows, start, expansion, m, defer_at):
    """``_expansion_folds.fold_expansion_multiclass``: the multiclass rule's dense coefficients."""
    return _fold(multiclass_rule(eta, rows.scores.shape[1]), kernel, rows, start, expansion, m, defer_at)
