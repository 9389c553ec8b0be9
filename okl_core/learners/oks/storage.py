"""Online kernel selection's storage: growing support sets, or random-feature weights.

The kernel versions (``oks``, ``oks_pp``, ``ioks``) keep one growing support set per kernel
(:class:`SupportStorage`; memory in the docstring of :mod:`okl_core.learners.oks`), the
random-feature versions (``rf_oks_pp``, ``rf_ioks``) one weight vector per kernel on its
seeded features (:class:`FeatureStorage`). A storage makes its part of a state, predicts
with kernel ``i``'s hypothesis and hands its buffers to the compiled folds as bundles
(:class:`SupportStore`, :class:`SupportRows`, :class:`FeatureRows`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np

from okl_core.kernels import Kernel
from okl_core.learners.multikernel import KernelFeatureBank
from okl_core.learners.oks.config import _KernelSelectionConfig, _RFSelectionConfig
from okl_core.learners.support import MIN_CAPACITY, SupportBuffer, SupportCap

__all__ = ["SupportStorage", "FeatureStorage", "SupportStore", "SupportRows", "FeatureRows"]

_PREDICT_CHUNK = 4 * 2**20  # rows x support vectors per exact-kernel block in predict


class SupportStore(NamedTuple):
    """The support sets as a compiled fold takes them (``_folds``, module docstring): the arenas
    ``columns``, ``sq_norms``, ``alpha``; per kernel ``offsets``, ``capacities``, ``counts``
    (written in place), ``sq_norm`` (RKHS norms^2, in place), the kernel rows' ``codes``,
    ``sigmas`` and Gaussian ``scales``; ``limit`` = ``max_support``."""

    columns: np.ndarray
    sq_norms: np.ndarray
    alpha: np.ndarray
    offsets: np.ndarray
    capacities: np.ndarray
    counts: np.ndarray
    sq_norm: np.ndarray
    codes: np.ndarray
    sigmas: np.ndarray
    scales: np.ndarray
    limit: int


class SupportRows(NamedTuple):
    """A support fold's rows: float64 ``X`` from row ``start``, labels ``y``, uniforms ``u``,
    and the usage counts ``n_used`` and ``scores`` it writes."""

    X: np.ndarray
    start: int
    y: np.ndarray
    u: np.ndarray
    n_used: np.ndarray
    scores: np.ndarray


class FeatureRows(NamedTuple):
    """A random-feature fold's rows: a feature block ``Z`` (n, K, 2D) with the pairs ``have``
    computed (:func:`~okl_core.learners.multikernel.fold_on_demand`), from row ``start``; the
    block's labels ``y`` and uniforms ``u``; the weights ``w`` (K, 2D), usage counts ``n_used``
    and ``scores`` it writes; ``clip`` = ``U / sqrt(D)``."""

    Z: np.ndarray
    have: np.ndarray
    start: int
    y: np.ndarray
    u: np.ndarray
    w: np.ndarray
    n_used: np.ndarray
    scores: np.ndarray
    clip: float


class SupportStateFields(Protocol):
    """The storage fields of a kernel version's state."""

    sv_x: np.ndarray
    sv_alpha: np.ndarray
    sv_count: np.ndarray
    sq_norm: np.ndarray


class _Arena:
    """The K support sets' buffers one after the other in one float64 array per kind: columns
    (kernel ``i``: a ``(d, capacities[i])`` C-ordered block at ``d * offsets[i]``), squared
    norms and coefficients (at ``offsets[i]``), zero-filled. The compiled folds take the
    three arrays (``_folds.support_views``) whatever ``K``."""

    def __init__(self, d: int, capacities: Sequence[int]):
        self.d = d
        self.capacities = np.asarray(capacities, dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(self.capacities)[:-1])).astype(np.int64)
        total = int(self.capacities.sum())
        self.columns, self.sq_norms, self.alpha = np.zeros(d * total), np.zeros(total), np.zeros(total)

    def views(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Kernel ``i``'s columns ``(d, c)``, squared norms and coefficients ``(c,)``."""
        d, o, c = self.d, int(self.offsets[i]), int(self.capacities[i])
        return self.columns[d * o : d * (o + c)].reshape(d, c), self.sq_norms[o : o + c], self.alpha[o : o + c]


class _SupportSets:
    """Per-kernel support sets of an update (working copy of the state's grouped arrays).

    Each kernel's set is a :class:`~okl_core.learners.support.SupportBuffer` of float64
    columns (``(d, capacity)``), so that a row's inner products with a kernel's support
    vectors read only the rows of its non-zero coordinates (sparse data such as a9a read a
    tenth of the buffer); all kernels together are capped by ``max_support``. The buffers
    start in an :class:`_Arena` (capacity ``max(16, 2 m)`` each, as a
    :class:`~okl_core.learners.support.GrowingArray`'s), which the compiled folds fill.
    """

    def __init__(self, cap: SupportCap, state: SupportStateFields):
        cap.check_held(int(state.sv_count.sum()))
        counts = state.sv_count.tolist()
        self.arena = _Arena(state.sv_x.shape[1], [max(MIN_CAPACITY, 2 * m) for m in counts])
        ends = np.cumsum(state.sv_count).tolist()
        self.sets = [
            SupportBuffer(state.sv_x[end - m : end], state.sv_alpha[end - m : end], cap, columns=True, out=self.arena.views(i))
            for i, (m, end) in enumerate(zip(counts, ends))
        ]
        self.sq_norm = state.sq_norm.copy()

    def counts(self) -> np.ndarray:
        """Each set's size, int64 (K,) (a fold advances it)."""
        return np.asarray([len(support) for support in self.sets], dtype=np.int64)

    def pack(self, grow: int) -> None:
        """Move the sets into a new arena where kernel ``grow``'s capacity is doubled."""
        capacities = self.arena.capacities.copy()
        capacities[grow] *= 2
        self.arena = _Arena(self.arena.d, capacities.tolist())
        for i, support in enumerate(self.sets):
            support.move_to(*self.arena.views(i))

    def filled(self, counts: np.ndarray) -> None:
        """Record the sizes a compiled fold left in ``counts``."""
        for support, n in zip(self.sets, counts.tolist()):
            support.filled(n)

    def fields(self) -> dict[str, np.ndarray]:
        """``sv_x`` float32 grouped by kernel, ``sv_alpha``, ``sv_count``, ``sq_norm``."""
        return {
            # C order, as a loaded model has it: the layout changes BLAS rounding downstream.
            "sv_x": np.concatenate([support.rows() for support in self.sets]),
            "sv_alpha": np.concatenate([support.alpha.view() for support in self.sets]),
            "sv_count": self.counts(),
            "sq_norm": self.sq_norm,
        }


class SupportStorage:
    """Kernel versions' storage: one growing support set per kernel (memory: module docstring).

    State fields ``sv_x`` (m, d) float32 grouped by kernel, ``sv_alpha`` (m,),
    ``sv_count`` (K,), ``sq_norm`` (K,) the RKHS norms^2.
    """

    fields = ("sv_x", "sv_alpha", "sv_count", "sq_norm")

    def __init__(self, name: str, config: _KernelSelectionConfig):
        self.n_inputs = config.n_inputs
        self.kernels = [Kernel(kernel, sigma) for kernel, sigma in config.dictionary]
        # The compiled kernel rows' (kind, sigma, -1 / (2 sigma^2)), as kernels.row_against_buffer passes them.
        codes, sigmas, scales = zip(*(k.compiled for k in self.kernels))
        self.codes, self.sigmas, self.scales = np.asarray(codes, dtype=np.int64), np.asarray(sigmas), np.asarray(scales)
        self.cap = SupportCap(
            name,
            "max_support",
            config.max_support,
            "the support set",
            "it holds one row per update with a non-zero gradient: raise max_support or use the random-feature "
            "version for long streams",
        )

    def init(self) -> dict[str, np.ndarray]:
        K = len(self.kernels)
        return {
            "sv_x": np.zeros((0, self.n_inputs), np.float32),
            "sv_alpha": np.zeros(0),
            "sv_count": np.zeros(K, np.int64),
            "sq_norm": np.zeros(K),
        }

    def working(self, state: SupportStateFields) -> _SupportSets:
        """An update's working copy of ``state``'s support sets (the cap checked first)."""
        return _SupportSets(self.cap, state)

    def store(self, sets: _SupportSets, counts: np.ndarray) -> SupportStore:
        """The compiled folds' view of ``sets`` with ``counts`` (K,) int64 (written in place)."""
        arena = sets.arena
        return SupportStore(
            arena.columns, arena.sq_norms, arena.alpha, arena.offsets, arena.capacities, counts, sets.sq_norm,
            self.codes, self.sigmas, self.scales, self.cap.limit,
        )

    def predict(self, state, i: int, X: np.ndarray) -> np.ndarray:
        """``f_i`` on the rows of ``X`` (exact kernel rows in bounded chunks)."""
        end = int(np.sum(state.sv_count[: i + 1]))
        start = end - int(state.sv_count[i])
        out = np.zeros(len(X))
        if start == end:
            return out
        rows, alpha = state.sv_x[start:end], state.sv_alpha[start:end]
        chunk = max(1, _PREDICT_CHUNK // (end - start))
        for a in range(0, len(X), chunk):
            out[a : a + chunk] = self.kernels[i].gram(X[a : a + chunk], rows) @ alpha
        return out


class FeatureStorage:
    """Random-feature versions' storage: weights ``w`` (K, 2D) on each kernel's seeded features,
    clipped to ``+-U / sqrt(D)`` after a projected step."""

    fields = ("w",)

    def __init__(self, name: str, config: _RFSelectionConfig):
        self.bank = KernelFeatureBank(config)
        self.shape = (len(config.dictionary), 2 * config.n_components)
        self.clip = config.radius / math.sqrt(config.n_components)

    def init(self) -> dict[str, np.ndarray]:
        return {"w": np.zeros(self.shape)}

    def predict(self, state, i: int, X: np.ndarray) -> np.ndarray:
        """``f_i = w_i . z_i`` on the rows of ``X``."""
        if not np.any(state.w[i]):
            return np.zeros(len(X))
        return self.bank.transform(i, X) @ state.w[i]
