"""Exact kernels: the one place where okl evaluates ``k(x, x')`` on inputs.

Every exact-kernel learner -- kernel OGD and Perceptron, NOGD, KRR and Kernel-AWV,
PKAWV-Nystroem, OKS, OKS++ and IOKS -- and the median heuristic compute their kernels
and distances here. (Random-feature learners approximate the same kernels through
:mod:`okl_core.features`.)

=========  ===========================================  ==============================
kernel     k(x, x')                                     frequencies of its features
=========  ===========================================  ==============================
gaussian   exp(-||x - x'||^2 / (2 sigma^2))             normal, scale 1/sigma
laplacian  exp(-||x - x'||_1 / sigma)                   Cauchy, scale 1/sigma
cauchy     prod_i 1 / (1 + (x_i - x'_i)^2 / sigma^2)    Laplace, scale 1/sigma
=========  ===========================================  ==============================

**k(x, x) = 1** for every one of them (:data:`SELF_SIMILARITY`, :func:`diagonal`): the
learners that need ``k(x, x)`` -- the RKHS norm bookkeeping of OKS's projection, KORS
leverage scores, AWV's shrinkage -- take it from here instead of computing it.

Determinism (the same bits on every machine, see :mod:`okl_core.numerics`):

* :func:`exact_kernel` (a Gram matrix, many rows at once) is float64 with the cross term
  a BLAS product ``X @ Y.T``; learners call it inside their pinned methods, so BLAS runs
  with one thread and the result does not depend on the machine's thread count.
* :func:`row_against_buffer` (one row against a stored buffer, the per-example path of
  OKS and the budget learners) is compiled (numba) with a numpy reference of the same
  bytes (:func:`reference_row_against_buffer`): for the Gaussian, dot products summed
  over the row's non-zero coordinates in order rather than BLAS (a fixed summation order
  that no BLAS build or thread count changes; sparse data such as a9a read a tenth of
  the buffer), exp from the C library (numpy's SIMD exp differs from it in the last bit
  on some arguments, and compiled code calls the C library's). Its scale is
  a multiplication by ``-1 / (2 sigma^2)`` where :func:`exact_kernel` divides by
  ``2 sigma^2``: the two agree to one rounding (exactly when ``2 sigma^2`` is a power of
  two), and each stays as it is so that existing models keep their bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from okl_core.learners.compiled import folds
from okl_core.numerics import libm_exp, pinned
from okl_core.random import permutation
from okl_core.validation import check_bandwidth, check_int

__all__ = [
    "KERNELS",
    "SELF_SIMILARITY",
    "Kernel",
    "exact_kernel",
    "diagonal",
    "squared_distances",
    "row_against_buffer",
    "reference_row_against_buffer",
    "KERNEL_CODES",
    "median_heuristic",
]

KERNELS = {"gaussian": "normal", "laplacian": "cauchy", "cauchy": "laplace"}
"""Kernel name -> distribution of its random Fourier frequencies (in units of 1/sigma)."""

KERNEL_CODES = {"gaussian": 0, "laplacian": 1, "cauchy": 2}
"""Kernel name -> its code in the compiled kernel rows (``_jit_folds.GAUSSIAN`` ...)."""

SELF_SIMILARITY = 1.0
"""``k(x, x)`` for every kernel of :data:`KERNELS` (each is 1 at zero distance)."""


def _check_kernel(kernel: str) -> None:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")


def squared_distances(X: np.ndarray, Y: np.ndarray, Y_sq: np.ndarray | None = None) -> np.ndarray:
    """``||X_i - Y_j||^2`` of float64 rows, from norms and a product (clipped at 0).

    ``Y_sq``: ``(Y * Y).sum(1)`` when the caller keeps it (a growing support set: the same
    numbers, not recomputed at every row).
    """
    if Y_sq is None:
        Y_sq = (Y * Y).sum(1)
    sq = (X * X).sum(1)[:, None] + Y_sq[None, :] - 2.0 * X @ Y.T
    return np.maximum(sq, 0.0)


_CHUNK_BYTES = 64 * 2**20
"""Bound on the ``(rows, len(Y), d)`` float64 block of coordinate differences held at once
(the whole ``(n, m, d)`` block was 11.7 GiB for 1,000 MNIST rows against themselves)."""


def _reduce_differences(X: np.ndarray, Y: np.ndarray, reduce) -> np.ndarray:
    """``reduce(|X_i - Y_j|)`` over the coordinates (the last axis), ``(len(X), len(Y))``,
    in chunks of rows of ``X``: each pair's numbers are those of the whole block at once."""
    step = max(1, _CHUNK_BYTES // max(1, 8 * len(Y) * X.shape[1]))
    out = np.empty((len(X), len(Y)))
    for i in range(0, len(X), step):
        out[i : i + step] = reduce(np.abs(X[i : i + step, None, :] - Y[None, :, :]))
    return out


def _centred_if_far(rows: np.ndarray) -> np.ndarray:
    """``rows`` less their mean when the mean's squared norm passes 1e6 times the total variance.

    Then ``|x|^2 + |y|^2 - 2 x.y`` loses more than 1e-10 of a squared distance to rounding
    (eps |x|^2 against the spread); below it the rows are returned as they are.
    """
    mean = rows.mean(axis=0)
    if float(mean @ mean) > 1e6 * float(rows.var(axis=0).sum()):
        return rows - mean
    return rows


def _check_pair(X: np.ndarray, Y: np.ndarray) -> None:
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"kernel rows must be 2-d arrays of the same width, got shapes {X.shape} and {Y.shape}")


def exact_kernel(kernel: str, X: ArrayLike, Y: ArrayLike, sigma: float, Y_sq: np.ndarray | None = None) -> np.ndarray:
    """Exact kernel matrix ``k(X_i, Y_j)`` (float64) for the kernels in :data:`KERNELS`.

    ``Y_sq``: the rows' ``(Y * Y).sum(1)`` in float64 when already known (the Gaussian's;
    the others ignore it), see :func:`squared_distances`.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    _check_pair(X, Y)
    check_bandwidth("sigma", sigma)
    if kernel == "gaussian":
        return np.exp(-squared_distances(X, Y, Y_sq) / (2.0 * sigma**2))
    _check_kernel(kernel)
    if kernel == "laplacian":
        return np.exp(-_reduce_differences(X, Y, lambda diff: diff.sum(-1)) / sigma)
    return _reduce_differences(X, Y, lambda diff: np.prod(1.0 / (1.0 + (diff / sigma) ** 2), axis=-1))  # cauchy


def diagonal(X: ArrayLike) -> np.ndarray:
    """``k(x, x)`` of each row of ``X``: :data:`SELF_SIMILARITY` for every kernel."""
    return np.full(len(np.asarray(X)), SELF_SIMILARITY)


def row_against_buffer(kernel: str, sigma: float, x: np.ndarray, columns: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
    """``k(s_j, x)`` for the vectors ``s_j`` stored as the columns of a buffer.

    Parameters
    ----------
    kernel, sigma
        The kernel.
    x : (d,) float64
        One row.
    columns : (d, m) float64
        The stored vectors as columns (a buffer's first ``m`` columns).
    sq_norms : (m,) float64
        Their squared norms ``||s_j||^2`` (used by the Gaussian).

    Returns
    -------
    ndarray (m,) float64
        Compiled (``okl_core.learners._jit_folds.kernel_row_into``) for float64 rows, else
        :func:`reference_row_against_buffer`: the same bytes.
    """
    if not (x.dtype == columns.dtype == sq_norms.dtype == np.float64):
        return reference_row_against_buffer(kernel, sigma, x, columns, sq_norms)
    _check_kernel(kernel)
    m = columns.shape[1]
    out = np.empty(m)
    folds("okl_core.learners._jit_folds").kernel_row_into(*compiled_kernel(kernel, sigma), x, columns, sq_norms, m, out)
    return out


def compiled_kernel(kernel: str, sigma: float) -> tuple[int, float, float]:
    """A kernel as the compiled kernel row takes it: ``(code, sigma, gauss_scale)`` with
    :data:`KERNEL_CODES` and the Gaussian's ``-1 / (2 sigma^2)`` (computed here, in Python, as
    :func:`reference_row_against_buffer` computes it)."""
    _check_kernel(kernel)
    return KERNEL_CODES[kernel], float(sigma), -0.5 / sigma**2


def reference_row_against_buffer(kernel: str, sigma: float, x: np.ndarray, columns: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
    """:func:`row_against_buffer` in numpy: the arithmetic the compiled kernel row repeats.

    Fixed summation orders that no BLAS build or thread count changes, and exp from the C
    library (:func:`okl_core.numerics.libm_exp`): the Gaussian's dot products run over the
    row's non-zero coordinates only (sparse data such as a9a read a tenth of the buffer),
    sequential in the coordinate; the Laplacian's and Cauchy's sums and products run over
    the coordinates in order (reductions over the buffer's first axis).
    """
    # Over m > 1 columns, numpy's einsum and reductions over axis 0 add row after row; over
    # one column they are its pairwise / unrolled loops, so m = 1 takes a cumulative sum
    # (or product), which adds in order (a cumulative sum over m = 800 costs 8x the einsum).
    one = columns.shape[1] == 1
    if kernel == "gaussian":
        nz = np.flatnonzero(x)
        if one:
            dots = np.cumsum(x[nz] * columns[nz, 0])[-1:] if nz.size else np.zeros(1)
        else:
            dots = np.einsum("k,km->m", x[nz], columns[nz])
        sq = np.maximum(sq_norms + float(x @ x) - 2.0 * dots, 0.0)
        return libm_exp(sq * (-0.5 / sigma**2))
    _check_kernel(kernel)
    diff = np.abs(columns - x[:, None])  # (d, m)
    if kernel == "laplacian":
        return libm_exp(-(np.cumsum(diff[:, 0])[-1:] if one else diff.sum(0)) / sigma)
    factors = 1.0 / (1.0 + (diff / sigma) ** 2)
    return np.cumprod(factors[:, 0])[-1:] if one else factors.prod(0)  # cauchy


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel with its bandwidth: the part an exact-kernel learner computes with.

    Parameters
    ----------
    name : {'gaussian', 'laplacian', 'cauchy'}
    sigma : float
        Bandwidth (> 0).
    """

    name: str
    sigma: float

    def __post_init__(self) -> None:
        _check_kernel(self.name)
        check_bandwidth("sigma", self.sigma)

    @classmethod
    def of(cls, config) -> "Kernel":
        """The kernel of a config with ``kernel`` and ``sigma`` fields."""
        return cls(config.kernel, config.sigma)

    def gram(self, X: ArrayLike, Y: ArrayLike, Y_sq: np.ndarray | None = None) -> np.ndarray:
        """``k(X_i, Y_j)`` (float64), see :func:`exact_kernel` (``Y_sq``: known squared norms)."""
        return exact_kernel(self.name, X, Y, self.sigma, Y_sq)

    def diagonal(self, X: ArrayLike) -> np.ndarray:
        """``k(x, x)`` of each row (all 1)."""
        return diagonal(X)

    @property
    def compiled(self) -> tuple[int, float, float]:
        """This kernel as the compiled folds take it, see :func:`compiled_kernel`."""
        return compiled_kernel(self.name, self.sigma)

    def row_against_buffer(self, x: np.ndarray, columns: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
        """``k(s_j, x)`` for a buffer's columns, see :func:`row_against_buffer`."""
        return row_against_buffer(self.name, self.sigma, x, columns, sq_norms)


@pinned
def median_heuristic(X: ArrayLike, n_samples: int = 1000, seed: int = 0, metric: str = "euclidean") -> float:
    """Median pairwise distance over a fixed-seed subsample of rows (the papers' sigma).

    Parameters
    ----------
    X : array-like of shape (n, d)
    n_samples : int
        Rows drawn without replacement (all rows when ``n <= n_samples``).
    seed : int
        Seed of the subsample (through :func:`okl_core.random.block_bit_generator`).
    metric : {'euclidean', 'l1'}
        Distance; use ``'l1'`` for the Laplacian kernel.

    Returns
    -------
    float
        The median of the distances between distinct sampled rows (> 0).

    A sample far from the origin relative to its spread (timestamps, prices) is centred
    first: distances from norms and a product lose every digit there (4.0 instead of 2.85 at
    an offset of 1e8). Other samples are left as they are, so their median keeps its bytes.
    """
    check_int("n_samples", n_samples, 2)
    if metric not in ("euclidean", "l1"):
        raise ValueError(f"metric must be 'euclidean' or 'l1', got {metric!r}")
    rows = np.asarray(X, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] < 2 or rows.shape[1] < 1:
        raise ValueError(f"median heuristic needs at least 2 rows of a 2-d array, got shape {rows.shape}")
    if rows.shape[0] > n_samples:
        rows = rows[np.sort(permutation(rows.shape[0], seed, 0)[:n_samples])]
    if not np.isfinite(rows).all():
        raise ValueError("median heuristic: the sampled rows hold NaN or inf")
    rows = _centred_if_far(rows)
    iu = np.triu_indices(rows.shape[0], k=1)
    if metric == "euclidean":
        dist = np.sqrt(squared_distances(rows, rows)[iu])
    else:
        dist = _reduce_differences(rows, rows, lambda diff: diff.sum(-1))[iu]
    med = float(np.median(dist))
    if not med > 0:
        raise ValueError("median pairwise distance is 0: the sampled rows are identical")
    return med
