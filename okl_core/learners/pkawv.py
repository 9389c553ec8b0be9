"""Kernel-AWV / KRR and projected versions, PKAWV (Jezequel, Gaillard, Rudi, NeurIPS 2019).

Follows spec/pkawv.md. Online regression with the square loss; binary labels in
{-1, +1} can be learned as targets (``task='binary'``: the score's sign is the label).

Orderings (``ordering``), for the example ``x_t``:

* ``'awv'`` (Azoury-Warmuth-Vovk): ``f_t = argmin sum_{s<t} (y_s - f(x_s))^2 + lam |f|^2
  + f(x_t)^2`` -- the current input enters the regularizer before predicting.
* ``'krr'`` (online kernel ridge regression, the paper's "Projected-KRR" of its real-data
  runs): the same without the ``f(x_t)^2`` term.

For a fixed feature map both give ``y_awv = y_krr / (1 + v^T A_old^{-1} v)``: the sign,
hence the binary mistake rate, is the same.

Learners
--------
* ``kernel_awv``, ``krr``: the exact dual algorithms (O(t^2) per step), growing the
  inverse of ``K_t + lam I`` by a bordered (Schur complement) update. References for small
  streams. Merge: exact -- the state is a function of the set of examples, so merging
  concatenates the examples (in state order) and recomputes the inverse.
* ``pkawv_taylor``: PKAWV (Algorithm 1) on the deduplicated Taylor basis of the Gaussian
  kernel (:class:`~okl_core.features.TaylorFeatures`, ``r = C(M + d, M)`` functions).
  Merge: exact, by summing sufficient statistics (see :class:`PKAWVTaylor`).
* ``pkawv_nystrom``: PKAWV with sequential Nystrom projections, the dictionary chosen by
  KORS (Algorithm 2), in :mod:`okl_core.learners.pkawv_nystrom`. Not mergeable (every
  shard has its own dictionary).

None of them mixes (``mixable = False``): the exact merges sum examples, so mixing a
merged model into a shard would count examples twice.

Blocked updates
---------------
The learners process rows in blocks of at most ``block_rows`` rows (a runtime setting:
it changes only rounding). With ``A`` the matrix before the block, ``Phi`` the
block's features (b x r), ``U = Phi A^{-1}``, ``q = U theta`` (``theta`` = the ``b`` or
``K^T Y`` vector) and the capacitance matrix ``C = I + U Phi^T = L L^T`` (eigenvalues
>= 1, so its Cholesky factor is well conditioned), the sequential predictions of the
block are, exactly as if the rows were learned one by one,

    y_krr = q - tril(L, -1) L^{-1} (q - y),      y_awv = y_krr / diag(L)^2

(Woodbury on the rows before ``j`` inside the block: the Schur complement of ``C`` at
``j`` is ``1 + v_j^T A_{j-1}^{-1} v_j = L_jj^2``). The block is then learned at once:
``A^{-1} -= V^T V`` with ``V = L^{-1} U`` (Taylor) or a blocked Cholesky update (Nystrom).
This turns ``b`` memory-bound rank-one updates into matrix products. The exact learners
use the same formula in the dual, with ``C`` the Schur complement of the block in
``K + lam I`` divided by ``lam``.

``predict`` gives each row's score as if it were the next example of the stream (for AWV
its own ``f(x)^2`` term included), without learning it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar, NamedTuple

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike
from scipy.linalg import lapack

from okl_core.features import TaylorFeatures, taylor_basis_size
from okl_core.kernels import Kernel
from okl_core.learners.base import CheckedConfig, Learner, NotMergeableError, validate_xy
from okl_core.learners.support import cap_error


__all__ = [
    "RidgeConfig",
    "ExactRidgeConfig",
    "ExactRidgeState",
    "KernelAWV",
    "KernelRidge",
    "PKAWVTaylorConfig",
    "TaylorState",
    "PKAWVTaylor",
    "block_predictions",
]

_PREDICT_ROWS = 1024  # rows of Taylor features built at once by predict


@dataclasses.dataclass(frozen=True, kw_only=True)
class RidgeConfig(CheckedConfig):
    """Parameters shared by the kernel ridge learners.

    Parameters
    ----------
    n_inputs : int
        Input dimension ``d``.
    sigma : float
        Gaussian bandwidth; default the median heuristic on the data (``"median"``, see
        :mod:`okl_core.derived`). The paper's 1, for inputs scaled to ``[-1, 1]^d``, is
        the fallback of a learner built with no data (``sigma=1`` keeps it).
    lam : float
        Ridge parameter ``lambda`` (> 0).
    task : {'regression', 'binary'}
        ``'binary'`` learns labels -1/+1 as regression targets (validated as labels).
    """

    n_inputs: int
    sigma: float = 1.0
    lam: float = 1.0
    task: str = "regression"

    data_defaults: ClassVar[dict] = {"sigma": "median"}


def block_predictions(C: np.ndarray, q: np.ndarray, y: np.ndarray, ordering: str) -> tuple[np.ndarray, np.ndarray]:
    """Sequential KRR/AWV predictions of a block from its capacitance matrix.

    Parameters
    ----------
    C : (b, b) ``I + Phi A^{-1} Phi^T`` (A = the matrix before the block).
    q : (b,) ``Phi A^{-1} theta``, the predictions of the model before the block.
    y : (b,) the block's targets.
    ordering : 'awv' or 'krr'.

    Returns
    -------
    predictions : (b,) each row predicted after learning the rows before it in the block.
    L : (b, b) lower Cholesky factor of ``C``.
    """
    L = np.linalg.cholesky(0.5 * (C + C.T))
    omega = sla.solve_triangular(L, q - y, lower=True)
    pred = q - np.tril(L, -1) @ omega
    if ordering == "awv":
        pred = pred / np.diag(L) ** 2
    return pred, L


# -- exact Kernel-AWV and KRR -----------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExactRidgeConfig(RidgeConfig):
    """Exact kernel ridge: :class:`RidgeConfig` plus the ``kernel``.

    Parameters
    ----------
    kernel : {'gaussian', 'laplacian', 'cauchy'}
    block_rows : int
        Rows bordered into the inverse at once (runtime: changes only rounding).
    max_rows : int
        The most examples the state may hold (runtime). The state keeps every example and
        the t x t inverse, ``t (4 d + 16) + 8 t^2`` bytes (763 MiB at the default 10,000
        rows; an update or a merge needs about three times that). A longer stream is
        refused before it starts (:meth:`~okl_core.learners.base.Learner.check_stream`) and
        an update that would pass the cap raises, both with a ValueError naming
        ``max_rows`` and the memory.
    """

    kernel: str = "gaussian"
    block_rows: int = 128
    max_rows: int = 10_000


class ExactRidgeState(NamedTuple):
    """All examples and the inverse of the regularised kernel matrix.

    Attributes
    ----------
    inputs : (t, d) float32
    targets : (t,) float64
    inverse : (t, t) float64, ``(K_t + lam I)^{-1}``
    n_seen : () int64
    """

    inputs: np.ndarray
    targets: np.ndarray
    inverse: np.ndarray
    n_seen: np.ndarray


def _no_weights(learner: Learner, weights) -> None:
    """Exact merges (sums of statistics) take no weights: a ValueError if some are given."""
    if weights is not None:
        raise ValueError(f"{learner.name}: the merge is an exact sum of sufficient statistics and takes no weights")


class _ExactRidge(Learner[ExactRidgeState]):
    """Dual kernel ridge with the inverse grown by bordering; ``ordering`` set by subclass."""

    config_class = ExactRidgeConfig
    state_class = ExactRidgeState
    growing_fields = ("inputs", "targets", "inverse")
    merge_semantics = "sum"
    runtime_fields = ("block_rows", "max_rows")
    ordering = ""
    conformance_params = {"sigma": 1.0, "lam": 0.1}

    def __init__(self, config: ExactRidgeConfig):
        super().__init__(config)
        self.kernel = Kernel.of(config)

    def state_bytes(self, n_rows: int) -> int:
        """Bytes of a state holding ``n_rows`` examples: float32 inputs, targets, the inverse."""
        return n_rows * (4 * self.config.n_inputs + 8) + 8 * n_rows * n_rows + 8

    def _refuse_rows(self, n_rows: int, what: str) -> None:
        """ValueError (:func:`cap_error`) when a state of ``n_rows`` examples would pass ``max_rows``."""
        if n_rows > self.config.max_rows:
            raise cap_error(
                self.name, "max_rows", self.config.max_rows,
                f"{what} ({n_rows} rows: a {self.state_bytes(n_rows) / 2**20:,.0f} MiB state holding every example "
                f"and a {n_rows} x {n_rows} inverse)",
                "raise max_rows if about three times that fits in memory (updates and merges copy the inverse), "
                "or use pkawv_taylor or pkawv_nystrom, whose state does not grow with the stream",
            )

    def check_stream(self, n_rows: int) -> None:
        """Refuse a stream of ``n_rows`` examples over ``max_rows``, with the memory it would need."""
        self._refuse_rows(int(n_rows), "a stream")

    def init(self) -> ExactRidgeState:
        return ExactRidgeState(
            inputs=np.zeros((0, self.config.n_inputs), dtype=np.float32),
            targets=np.zeros(0),
            inverse=np.zeros((0, 0)),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    def predict(self, state: ExactRidgeState, X: ArrayLike) -> np.ndarray:
        """Each row's prediction as if it were the next example (its online score).

        KRR: ``k^T (K + lam I)^{-1} Y``; AWV shrinks it by ``lam / (k_tt + lam - k^T inv k)``.
        """
        X, _ = validate_xy(self, X)
        K = self.kernel.gram(X, state.inputs)
        krr = K @ (state.inverse @ state.targets)
        if self.ordering == "krr":
            return krr
        schur = self.kernel.diagonal(X) + self.config.lam - np.einsum("ij,ij->i", K @ state.inverse, K)
        return self.config.lam * krr / schur

    def update(self, state: ExactRidgeState, X: ArrayLike, y: ArrayLike) -> tuple[ExactRidgeState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        t0, n = len(state.targets), len(y)
        self._refuse_rows(t0 + n, f"the state after row {t0 + n}")  # before the (t0 + n)^2 allocation
        lam = self.config.lam
        inputs = np.concatenate([state.inputs, X])
        targets = np.concatenate([state.targets, y])
        inv = np.zeros((t0 + n, t0 + n))
        inv[:t0, :t0] = state.inverse
        K_batch = self.kernel.gram(X, inputs)  # (n, t0 + n)
        scores = np.empty(n)
        for start in range(0, n, self.config.block_rows):
            stop = min(n, start + self.config.block_rows)
            scores[start:stop] = self._border_block(inv, K_batch[start:stop], targets, t0 + start, t0 + stop, lam)
        new_state = ExactRidgeState(inputs=inputs, targets=targets, inverse=inv, n_seen=np.asarray(int(state.n_seen) + n, dtype=np.int64))
        return new_state, scores

    def _border_block(self, inv, K_rows, targets, g0, g1, lam) -> np.ndarray:
        """Predict rows ``g0..g1-1`` in order, then border ``inv`` (in place) with them.

        With ``B`` the kernel of the old rows against the block, ``W = inv B`` and the Schur
        complement ``S = K_block + lam I - B^T W``, the row-``j`` Schur complement of the
        sequential bordering is ``L_jj^2`` (``S = L L^T``), so :func:`block_predictions` on
        ``S / lam`` gives KRR and AWV (``y_awv = lam y_krr / (k_tt + lam - k^T inv k)``).
        """
        B = K_rows[:, :g0].T
        W = inv[:g0, :g0] @ B
        S = K_rows[:, g0:g1] - B.T @ W
        S[np.diag_indices_from(S)] += lam
        pred, L = block_predictions(S / lam, W.T @ targets[:g0], targets[g0:g1], self.ordering)
        # S = lam L L^T, so S^{-1} = L_inv^T L_inv with L_inv = L^{-1} / sqrt(lam).
        L_inv = sla.solve_triangular(L, np.eye(len(L)), lower=True) / math.sqrt(lam)
        H = L_inv @ W.T
        inv[:g0, :g0] += H.T @ H  # W S^{-1} W^T
        F = L_inv.T @ H  # S^{-1} W^T
        inv[g0:g1, :g0] = -F
        inv[:g0, g0:g1] = -F.T
        inv[g0:g1, g0:g1] = L_inv.T @ L_inv
        return pred

    def merge(
        self, states: Sequence[ExactRidgeState], weights: ArrayLike | None = None, base: ExactRidgeState | None = None
    ) -> ExactRidgeState:
        """Exact: the examples of all states (in order) and a fresh inverse of ``K + lam I``.

        With ``base`` (the state all of them started from), its examples come first, once,
        followed by each state's examples after them. No weights: the merge is exact.
        """
        states = self._merge_inputs(states)
        _no_weights(self, weights)
        skip = 0 if base is None else len(base.targets)
        if base is not None:
            for s in states:
                if not np.array_equal(s.inputs[:skip], base.inputs):
                    raise NotMergeableError(f"{self.name}: a state did not start from the given base")
        heads = [] if base is None else [base]
        self._refuse_rows(skip + sum(len(s.targets) - skip for s in states), "the merged state")
        inputs = np.concatenate([h.inputs for h in heads] + [s.inputs[skip:] for s in states])
        targets = np.concatenate([h.targets for h in heads] + [s.targets[skip:] for s in states])
        K = self.kernel.gram(inputs, inputs) + self.config.lam * np.eye(len(targets))
        inverse = _spd_inverse(K)
        return ExactRidgeState(inputs=inputs, targets=targets, inverse=inverse, n_seen=self._count("n_seen", states, base))


class KernelAWV(_ExactRidge):
    """Exact Kernel-AWV (registry name ``kernel_awv``)."""

    name = "kernel_awv"
    ordering = "awv"


class KernelRidge(_ExactRidge):
    """Exact online kernel ridge regression (registry name ``krr``)."""

    name = "krr"
    ordering = "krr"


def _symmetric_add_gram(S: np.ndarray, V: np.ndarray, alpha: float) -> None:
    """``S += alpha V^T V`` in place for a symmetric C-ordered ``S`` (no r x r temporary).

    ``S.T`` is the same memory in Fortran order, which BLAS ``dgemm`` updates in place;
    ``S`` being symmetric, updating its transpose updates it.
    """
    out = sla.blas.dgemm(alpha=alpha, a=V, b=V, beta=1.0, c=S.T, trans_a=1, overwrite_c=1)
    if not np.shares_memory(out, S):  # pragma: no cover - a BLAS wrapper that copied
        S[...] = out.T


def _spd_inverse(A: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite matrix from its Cholesky factor (exactly symmetric).

    LAPACK ``dpotrf`` + ``dpotri`` (about r^3 flops, half of solving against the identity);
    the upper triangle is computed and mirrored.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is not numerically positive definite.
    """
    if A.shape[0] == 0:
        return np.zeros((0, 0))
    factor, info = lapack.dpotrf(A, lower=0, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix is not positive definite (dpotrf info={info})")
    inv, info = lapack.dpotri(factor, lower=0)
    if info != 0:  # pragma: no cover - a singular factor after a successful dpotrf
        raise np.linalg.LinAlgError(f"dpotri failed with info={info}")
    upper = np.triu(inv)
    return upper + np.triu(upper, 1).T


# -- PKAWV with the Taylor basis --------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class PKAWVTaylorConfig(RidgeConfig):
    """PKAWV on the Taylor basis of the Gaussian kernel.

    Parameters
    ----------
    n_inputs, sigma, lam, task : see :class:`RidgeConfig`.
    degree : int
        Total degree ``M`` of the basis; ``r = C(M + d, M)`` functions.
    ordering : {'awv', 'krr'}
    block_rows : int
        Rows learned per block (runtime: changes only rounding).
    refactor_every : int
        ``A^{-1}`` is recomputed from ``lam I + sum phi phi^T`` (Cholesky, symmetrised)
        whenever the number of examples seen reaches a multiple of this (runtime).
    max_basis : int
        Refuse a basis larger than this (the state holds two r x r float64 matrices).
    """

    degree: int = 2
    ordering: str = "awv"
    block_rows: int = 256
    refactor_every: int = 20000
    max_basis: int = 10000

    @property
    def n_basis(self) -> int:
        """``r = C(M + d, M)``."""
        return taylor_basis_size(self.n_inputs, self.degree)


class TaylorState(NamedTuple):
    """PKAWV-Taylor sufficient statistics and the inverse they define.

    Attributes
    ----------
    gram : (r, r) float64, ``sum_s phi(x_s) phi(x_s)^T`` (without ``lam I``)
    b : (r,) float64, ``sum_s y_s phi(x_s)``
    a_inv : (r, r) float64, ``(lam I + gram)^{-1}``
    n_seen : () int64
    """

    gram: np.ndarray
    b: np.ndarray
    a_inv: np.ndarray
    n_seen: np.ndarray


class PKAWVTaylor(Learner[TaylorState]):
    """PKAWV on the Taylor basis (registry name ``pkawv_taylor``).

    Per example ``v = phi(x_t)``: AWV predicts ``v^T A_t^{-1} b_{t-1}`` with
    ``A_t = A_{t-1} + v v^T`` (KRR: ``v^T A_{t-1}^{-1} b_{t-1}``), then ``b += y v``;
    ``A_0 = lam I``. Cost O(r^2) per example (as matrix products over blocks of rows,
    see the module docstring), memory two r x r matrices.

    Merge (exact): ``gram`` and ``b`` are sums over examples, so the merged state has
    ``gram = sum_s gram_s``, ``b = sum_s b_s``, ``n_seen = sum_s n_seen_s`` and
    ``a_inv = (lam I + gram)^{-1}`` recomputed (the ``lam I`` is counted once). It equals
    training on the concatenation up to rounding.
    """

    name = "pkawv_taylor"
    config_class = PKAWVTaylorConfig
    state_class = TaylorState
    merge_semantics = "sum"
    runtime_fields = ("block_rows", "refactor_every", "max_basis")
    conformance_params = {"degree": 3, "sigma": 1.0, "lam": 0.1, "block_rows": 7}

    def __init__(self, config):
        super().__init__(config)
        self.features = TaylorFeatures(config.n_inputs, config.degree, config.sigma)

    def init(self) -> TaylorState:
        r = self.features.n_outputs
        return TaylorState(gram=np.zeros((r, r)), b=np.zeros(r), a_inv=np.eye(r) / self.config.lam, n_seen=np.asarray(0, dtype=np.int64))

    def state_layout(self) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """:meth:`init`'s layout without building its r x r identity (filled, up to 763 MiB)."""
        r, f8 = self.features.n_outputs, np.dtype(np.float64)
        return {"gram": (f8, (r, r)), "b": (f8, (r,)), "a_inv": (f8, (r, r)), "n_seen": (np.dtype(np.int64), ())}

    def predict(self, state: TaylorState, X: ArrayLike) -> np.ndarray:
        """Each row's prediction as if it were the next example (its online score).

        KRR: ``v^T A^{-1} b``; AWV: the same divided by ``1 + v^T A^{-1} v`` (O(r^2) per row).
        """
        X, _ = validate_xy(self, X)
        w = state.a_inv @ state.b
        out = np.empty(len(X))
        for start in range(0, len(X), _PREDICT_ROWS):
            Phi = self.features.transform(X[start : start + _PREDICT_ROWS])
            out[start : start + len(Phi)] = Phi @ w
            if self.config.ordering == "awv":
                out[start : start + len(Phi)] /= 1.0 + np.einsum("ij,ij->i", Phi @ state.a_inv, Phi)
        return out

    def update(self, state: TaylorState, X: ArrayLike, y: ArrayLike) -> tuple[TaylorState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        cfg = self.config
        gram, b, a_inv = state.gram.copy(), state.b.copy(), state.a_inv.copy()
        seen = int(state.n_seen)
        scores = np.empty(len(y))
        start = 0
        while start < len(y):
            to_refactor = cfg.refactor_every - seen % cfg.refactor_every
            stop = min(len(y), start + cfg.block_rows, start + to_refactor)
            Phi = self.features.transform(X[start:stop])
            scores[start:stop] = self._learn_block(Phi, y[start:stop], gram, b, a_inv)
            seen += stop - start
            if seen % cfg.refactor_every == 0:
                a_inv = self._inverse(gram)
            start = stop
        return TaylorState(gram=gram, b=b, a_inv=a_inv, n_seen=np.asarray(seen, dtype=np.int64)), scores

    def _learn_block(self, Phi, y, gram, b, a_inv) -> np.ndarray:
        """Predict the block's rows in order and learn them; updates the arrays in place."""
        # Features that are zero on every row of the block (sparse inputs) are skipped.
        active = np.flatnonzero(np.any(Phi != 0.0, axis=0))
        dense = len(active) == Phi.shape[1]
        P = Phi if dense else Phi[:, active]
        U = P @ (a_inv if dense else a_inv[active])  # Phi A^{-1}, (b, r)
        C = (U if dense else U[:, active]) @ P.T
        C[np.diag_indices_from(C)] += 1.0
        pred, L = block_predictions(C, U @ b, y, self.config.ordering)
        V = sla.solve_triangular(L, U, lower=True, check_finite=False)
        _symmetric_add_gram(a_inv, V, -1.0)
        if dense:
            b += P.T @ y
            _symmetric_add_gram(gram, P, 1.0)
        else:
            b[active] += P.T @ y
            block = P.T @ P
            for k, i in enumerate(active):  # row by row: much faster than np.ix_ scatter
                gram[i, active] += block[k]
        return pred

    def _inverse(self, gram: np.ndarray) -> np.ndarray:
        return _spd_inverse(gram + self.config.lam * np.eye(gram.shape[0]))

    def merge(self, states: Sequence[TaylorState], weights: ArrayLike | None = None, base: TaylorState | None = None) -> TaylorState:
        """Exact merge: sum ``gram``, ``b`` and ``n_seen`` (in list order), recompute ``a_inv``.

        With ``base`` (the state all of them started from) the sums are
        ``base + sum_i (state_i - base)``, so the base's examples count once. No weights:
        the merge is exact.
        """
        states = self._merge_inputs(states)
        _no_weights(self, weights)
        gram = np.zeros_like(states[0].gram)
        b = np.zeros_like(states[0].b)
        for s in states:
            gram += s.gram
            b += s.b
        if base is not None:
            extra = len(states) - 1
            gram -= extra * base.gram
            b -= extra * base.b
        return TaylorState(gram=gram, b=b, a_inv=self._inverse(gram), n_seen=self._count("n_seen", states, base))
