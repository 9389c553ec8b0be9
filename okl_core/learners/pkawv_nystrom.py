"""Kernel-AWV / KRR and projected versions, PKAWV (Jezequel, Gaillard, Rudi, NeurIPS 2019).
Here: PKAWV with sequential Nystrom projections, the dictionary chosen by KORS (Algorithm 2).

Follows spec/pkawv.md. The orderings, the blocked updates and the configuration shared with
the exact learners and PKAWV-Taylor are :mod:`okl_core.learners.pkawv`'s
(:class:`~okl_core.learners.pkawv.RidgeConfig`, :func:`~okl_core.learners.pkawv.block_predictions`).
Not mergeable: every shard chooses its own dictionary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike
from scipy.linalg import lapack

from okl_core.kernels import SELF_SIMILARITY, Kernel
from okl_core.learners.base import Learner, NotMergeableError, validate_xy
from okl_core.learners.pkawv import RidgeConfig, block_predictions
from okl_core.learners.support import GrowingArray, cap_error
from okl_core.random import packed_uniforms

__all__ = ["PKAWVNystromConfig", "NystromState", "PKAWVNystrom"]

_KORS_WORDS_PER_BLOCK = 1024


@dataclasses.dataclass(frozen=True, kw_only=True)
class PKAWVNystromConfig(RidgeConfig):
    """PKAWV with a KORS dictionary.

    Parameters
    ----------
    n_inputs, sigma, lam, task : see :class:`RidgeConfig`.
    kernel : {'gaussian', 'laplacian', 'cauchy'}
    mu : float
        KORS regularisation ``mu`` (> 0): larger gives a smaller dictionary.
    beta : float
        KORS oversampling ``beta`` (> 0): inclusion probability ``min(1, beta tau)``.
    kors_eps : float
        KORS accuracy ``eps`` (> 0) in ``tau = (1 + eps) / mu (k_tt - ...)``.
    seed : int
        Seed of the inclusion draws (see :class:`PKAWVNystrom`).
    ordering : {'awv', 'krr'}
    block_rows : int
        Rows learned per block when the dictionary does not change (runtime).
    max_dictionary : int
        Cap on the dictionary size; exceeding it raises ValueError (runtime).
    max_state_mb : float
        Cap on the state's memory in MiB; exceeding it raises ValueError (runtime).
    """

    kernel: str = "gaussian"
    mu: float = 1.0
    beta: float = 1.0
    kors_eps: float = 0.5
    seed: int = 0
    ordering: str = "awv"
    block_rows: int = 256
    max_dictionary: int = 2000
    max_state_mb: float = 4096.0


class NystromState(NamedTuple):
    """PKAWV-Nystrom state: every past example, the dictionary and the factor of ``A``.

    Attributes
    ----------
    inputs : (t, d) float32, all examples seen (a new dictionary point needs its kernel
        against every past input)
    targets : (t,) float64
    knm : (t, m) float64, ``K_{t,I}``: kernel of every example against the dictionary
    dictionary : (m,) int64, row indices (into ``inputs``) of the dictionary points
    kors_weights : (m,) float64, KORS weights ``s_j = 1 / p_j``
    kors_inv : (m, m) float64, ``(S K_II S + mu I)^{-1}``
    chol : (m, m) float64, upper ``R`` with ``R^T R = A = K_{t,I}^T K_{t,I} + lam K_II``
    kty : (m,) float64, ``K_{t,I}^T Y_t``
    n_seen : () int64
    """

    inputs: np.ndarray
    targets: np.ndarray
    knm: np.ndarray
    dictionary: np.ndarray
    kors_weights: np.ndarray
    kors_inv: np.ndarray
    chol: np.ndarray
    kty: np.ndarray
    n_seen: np.ndarray


def _kors_uniforms(seed: int, start: int, stop: int) -> np.ndarray:
    """Uniforms on (0, 1) for global rows ``start..stop-1``.

    Row ``g`` uses word ``g % 1024`` of ``block_bit_generator(seed, g // 1024)``
    (:func:`okl_core.random.packed_uniforms`), so a row's draw does not depend on how the
    stream is batched.
    """
    return packed_uniforms(seed, start, stop, _KORS_WORDS_PER_BLOCK)


def _border_inverse(inv: np.ndarray, column: np.ndarray, corner: float) -> np.ndarray:
    """Inverse of ``[[M, c], [c^T, e]]`` from ``inv = M^{-1}`` (Schur complement)."""
    a = inv @ column
    schur = corner - column @ a
    m = len(column)
    out = np.empty((m + 1, m + 1))
    top = out[:m, :m]
    np.multiply.outer(a, a / schur, out=top)
    top += inv
    out[:m, m] = out[m, :m] = -a / schur
    out[m, m] = 1.0 / schur
    return out


def _cholesky_add_rows(R: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Upper factor of ``R^T R + rows^T rows`` (a blocked Cholesky update), in place.

    ``R`` is a Fortran-ordered upper triangular factor (zeros below the diagonal).
    LAPACK's triangular-pentagonal QR (``dtpqrt``) of ``[R; rows]`` costs O(b m^2) for
    ``b`` rows -- a rank-one ``cholupdate`` when ``b = 1`` -- is backward stable and never
    forms ``K^T K``. Diagonal signs are arbitrary (``R^T R`` does not see them).
    """
    nb = max(1, min(len(rows), R.shape[0], 32))
    new, _, _, info = lapack.dtpqrt(0, nb, R, np.asfortranarray(rows), overwrite_a=1)
    if info != 0:  # pragma: no cover - only on invalid arguments
        raise np.linalg.LinAlgError(f"dtpqrt failed with info={info}")
    return new


class PKAWVNystrom(Learner[NystromState]):
    """PKAWV with sequential Nystrom projections and a KORS dictionary (``pkawv_nystrom``).

    At each example, in order:

    1. **KORS** (dictionary update before predicting). With ``k_j = k(x_j, x_t)`` over the
       dictionary, ``b = s * k`` and ``q = b^T (S K_II S + mu I)^{-1} b``, the ridge
       leverage ``tau = (1 + eps) (k_tt - q) / (k_tt - q + mu)`` (the paper's
       ``(1+eps)/mu (k_tt - ks^T W_tmp ks)`` in closed form) and ``p = min(1, beta tau)``.
       ``x_t`` joins the dictionary iff ``u_t < p`` with weight ``s = 1 / p``; ``u_t`` is the
       uniform of global row ``t``: word ``t % 1024`` of ``block_bit_generator(seed,
       t // 1024)`` (so draws do not depend on batching).
    2. A new dictionary point borders ``A``: column ``c = K_{t-1,I}^T a + lam k_I`` and
       corner ``a^T a + lam k_tt`` with ``a = k(X_{<t}, x_t)``; the factor is extended by
       forward substitution (``R^T r = c``, new pivot ``sqrt(corner - r^T r)``) and
       ``K^T Y`` gains ``a^T Y_{t-1}``. A point whose pivot is ``<= 1e-12 corner``
       (numerically in the span already) is not added.
    3. Prediction ``k(x_t, I)^T alpha`` with ``alpha = A^{-1} K^T Y`` (0 while the dictionary
       is empty); AWV counts the row ``k(x_t, I)`` in ``A`` first, KRR after.
    4. Learn: ``A += k k^T`` (blocked: rows between dictionary changes are added together
       through a QR update of the factor, see :func:`_cholesky_add_rows`), ``K^T Y += k y``.

    Where the paper updates its factor row by row (cholup) and adds a column with one
    update and one downdate, this implementation adds rows a block at a time (Householder
    QR of ``[R; rows]``) and a column by bordering the factor: the same factor, with the
    per-example cost in matrix products.

    Memory grows with the stream: ``t (4 d + 8 + 8 m) + 16 m^2 + 24 m`` bytes for ``t`` examples
    and ``m`` dictionary points (every input is kept, because a new dictionary point needs
    its kernel against all past inputs, and so is ``K_{t,I}``). ``max_dictionary`` and
    ``max_state_mb`` cap both and fail with a ValueError naming the cap. Per example
    O(m^2 + m d) when the dictionary does not change; a new point costs O(t (m + d) + m^2)
    plus a block flush (O(m^3) QR).

    Merge: not mergeable (each shard draws its own dictionary).
    """

    name = "pkawv_nystrom"
    config_class = PKAWVNystromConfig
    state_class = NystromState
    merge_semantics = "none"
    mix_refusal = "each shard draws its own KORS dictionary, so states cannot be merged or mixed"
    growing_fields = ("inputs", "targets", "knm", "dictionary", "kors_weights", "kors_inv", "chol", "kty")
    runtime_fields = ("block_rows", "max_dictionary", "max_state_mb")
    conformance_params = {"sigma": 1.0, "lam": 0.1, "mu": 0.05, "block_rows": 7}

    PIVOT_RTOL = 1e-12
    """A new point whose factor pivot^2 is <= PIVOT_RTOL * corner is not added."""

    def __init__(self, config: PKAWVNystromConfig):
        super().__init__(config)
        self.kernel = Kernel.of(config)

    def init(self) -> NystromState:
        return NystromState(
            inputs=np.zeros((0, self.config.n_inputs), dtype=np.float32),
            targets=np.zeros(0),
            knm=np.zeros((0, 0)),
            dictionary=np.zeros(0, dtype=np.int64),
            kors_weights=np.zeros(0),
            kors_inv=np.zeros((0, 0)),
            chol=np.zeros((0, 0)),
            kty=np.zeros(0),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    def coefficients(self, state: NystromState) -> np.ndarray:
        """``alpha = A^{-1} K^T Y`` over the dictionary (empty when it is empty)."""
        if len(state.kty) == 0:
            return np.zeros(0)
        return sla.cho_solve((state.chol, False), state.kty, check_finite=False)

    def predict(self, state: NystromState, X: ArrayLike) -> np.ndarray:
        """Each row's prediction with the current dictionary (no KORS step is taken).

        KRR: ``k(x, I)^T alpha``; AWV: the same divided by ``1 + k^T A^{-1} k``.
        """
        X, _ = validate_xy(self, X)
        K = self.kernel.gram(X, state.inputs[state.dictionary])
        krr = K @ self.coefficients(state)
        if self.config.ordering == "krr" or len(state.kty) == 0:
            return krr
        Z = sla.solve_triangular(state.chol, K.T, trans="T", check_finite=False)  # R^{-T} k
        return krr / (1.0 + (Z * Z).sum(0))

    def state_bytes(self, n_rows: int, n_dictionary: int) -> int:
        """Bytes of a state with ``n_rows`` examples and ``n_dictionary`` points (the cap's measure)."""
        t, m, d = n_rows, n_dictionary, self.config.n_inputs
        return t * (4 * d + 8 + 8 * m) + 16 * m * m + 24 * m

    def _check_caps(self, n_rows: int, n_dictionary: int, row: int) -> None:
        cfg = self.config
        if n_dictionary > cfg.max_dictionary:
            raise cap_error(
                self.name, "max_dictionary", cfg.max_dictionary, f"the KORS dictionary at row {row}",
                "raise max_dictionary or mu (a larger mu keeps fewer points)",
            )
        need = self.state_bytes(n_rows, n_dictionary) / 2**20
        if need > cfg.max_state_mb:
            raise cap_error(
                self.name, "max_state_mb", cfg.max_state_mb,
                f"the state ({need:.0f} MiB for {n_rows} rows and {n_dictionary} dictionary points at row {row})",
                "the state keeps every input (t (4 d + 8 + 8 m) + 16 m^2 + 24 m bytes): raise max_state_mb or train on fewer rows",
            )

    def update(self, state: NystromState, X: ArrayLike, y: ArrayLike) -> tuple[NystromState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        run = _NystromRun(self, state, X, y)
        scores = run.run()
        return run.state(), scores

    def merge(self, states: Sequence[NystromState], weights: ArrayLike | None = None, base: NystromState | None = None) -> NystromState:
        raise NotMergeableError(
            f"{self.name} states cannot be merged: each shard draws its own KORS dictionary, so the "
            "projections differ (train with one shard, or use pkawv_taylor, whose states merge exactly)"
        )


class _NystromRun:
    """Working buffers of one :meth:`PKAWVNystrom.update` call (the state stays untouched)."""

    def __init__(self, learner: PKAWVNystrom, state: NystromState, X: np.ndarray, y: np.ndarray):
        self.learner, self.cfg = learner, learner.config
        self.X, self.y = X, y
        self.t0 = t0 = len(state.targets)
        n = len(y)
        learner._check_caps(t0 + n, len(state.dictionary), t0)
        self.inputs = np.concatenate([state.inputs, X])
        self.targets = np.concatenate([state.targets, y])
        m = len(state.dictionary)
        # K_{t,I} with spare columns: a new dictionary point fills one column in place.
        self.knm = GrowingArray(state.knm, axis=1, capacity=m + min(n, 64), length=t0 + n)
        self.dictionary = list(state.dictionary.tolist())
        self.weights = state.kors_weights.copy()
        self.kors_inv = state.kors_inv.copy()
        self.chol = np.asfortranarray(state.chol, dtype=np.float64).copy(order="F")  # LAPACK works in place
        self.kty = state.kty.copy()
        self.n_seen = int(state.n_seen)
        self.scores = np.empty(n)

    @property
    def m(self) -> int:
        return len(self.dictionary)

    def run(self) -> np.ndarray:
        n = len(self.y)
        i, decided = 0, False  # decided: row i already went through KORS (it was just added)
        gap = n  # rows between the last two additions: windows shrink while points pour in
        while i < n:
            length = min(max(self.cfg.block_rows, self.m), max(16, 2 * gap))
            stop = min(n, i + length)
            Kw = self.learner.kernel.gram(self.X[i:stop], self.inputs[self.dictionary])
            add = self._kors(Kw, self.t0 + i)
            if decided:
                add[0] = False
            hits = np.flatnonzero(add)
            end = i + (int(hits[0]) if len(hits) else stop - i)
            if end > i:
                self._learn_block(i, end, Kw[: end - i])
            decided = False
            if len(hits):
                self._add_point(end, Kw[end - i], self._kors_p[hits[0]])
                gap, decided = int(hits[0]) + 1, True
            i = end
        return self.scores

    def _kors(self, Kw: np.ndarray, first_row: int) -> np.ndarray:
        """KORS inclusion decisions for rows of ``Kw`` given the current dictionary."""
        cfg = self.cfg
        B = Kw * self.weights
        q = np.einsum("ij,ij->i", B @ self.kors_inv, B) if self.m else np.zeros(len(Kw))
        lev = np.maximum(self.learner.kernel.diagonal(Kw) - q, 0.0)  # k(x, x) - q, one per row of the window
        tau = (1.0 + cfg.kors_eps) * lev / (lev + cfg.mu)
        self._kors_p = np.clip(cfg.beta * tau, 0.0, 1.0)
        return _kors_uniforms(cfg.seed, first_row, first_row + len(Kw)) < self._kors_p

    def _learn_block(self, start: int, stop: int, Phi: np.ndarray) -> None:
        """Predict rows ``start..stop-1`` (batch indices) in order and learn them."""
        y = self.y[start:stop]
        g0, g1 = self.t0 + start, self.t0 + stop
        m = self.m
        self.knm.data[g0:g1, :m] = Phi
        if m == 0:
            self.scores[start:stop] = 0.0
            return
        U = sla.cho_solve((self.chol, False), Phi.T, check_finite=False).T  # Phi A^{-1}
        C = U @ Phi.T
        C[np.diag_indices_from(C)] += 1.0
        self.scores[start:stop], _ = block_predictions(C, U @ self.kty, y, self.cfg.ordering)
        self.chol = _cholesky_add_rows(self.chol, Phi)
        self.kty = self.kty + Phi.T @ y

    def _add_point(self, row: int, k_dict: np.ndarray, p: float) -> None:
        """Add batch row ``row`` to the dictionary (all earlier rows are learned)."""
        cfg, m = self.cfg, self.m
        g = self.t0 + row
        self.learner._check_caps(len(self.targets), m + 1, g)
        x = self.inputs[g : g + 1]
        a = self.learner.kernel.gram(self.inputs[:g], x)[:, 0]  # k(x_s, x_t), s < t
        column = self.knm.data[:g, :m].T @ a + cfg.lam * k_dict
        corner = a @ a + cfg.lam * SELF_SIMILARITY
        r = sla.solve_triangular(self.chol, column, trans="T", lower=False, check_finite=False) if m else np.zeros(0)
        pivot2 = corner - r @ r
        if not pivot2 > PKAWVNystrom.PIVOT_RTOL * corner:
            return  # numerically inside the span of the dictionary: not added
        chol = np.zeros((m + 1, m + 1), order="F")
        chol[:m, :m] = self.chol
        chol[:m, m] = r
        chol[m, m] = math.sqrt(pivot2)
        self.chol = chol
        self.knm.reserve(1)
        self.knm.data[:g, m] = a
        self.knm.size = m + 1
        self.kty = np.append(self.kty, a @ self.targets[:g])
        s = 1.0 / p
        self.kors_inv = _border_inverse(self.kors_inv, self.weights * k_dict * s, s * s + cfg.mu)
        self.weights = np.append(self.weights, s)
        self.dictionary.append(g)

    def _canonical_factor(self) -> np.ndarray:
        """The factor in C order with a positive diagonal (rows of a QR factor carry signs)."""
        signs = np.where(np.diag(self.chol) < 0, -1.0, 1.0)
        return np.ascontiguousarray(self.chol * signs[:, None])

    def state(self) -> NystromState:
        return NystromState(
            inputs=self.inputs,
            targets=self.targets,
            knm=np.ascontiguousarray(self.knm.view()),
            dictionary=np.asarray(self.dictionary, dtype=np.int64),
            kors_weights=self.weights,
            kors_inv=self.kors_inv,
            chol=self._canonical_factor(),
            kty=self.kty,
            n_seen=np.asarray(self.n_seen + len(self.y), dtype=np.int64),
        )
