"""Online kernel selection's learners: a selection rule on a storage (spec/oks.md).

``oks``, ``oks_pp`` and ``ioks`` on growing support sets, ``rf_oks_pp`` and ``rf_ioks`` on
random features (the formulas, costs and protocol: :mod:`okl_core.learners.oks`). A state is
the storage's fields (:mod:`.storage`), the rule's statistics (:mod:`.rules`), ``n_used`` and
``n_seen``; an update draws its rows' uniforms, then runs the rule's compiled fold
(:mod:`._folds`) on the storage's buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike

from okl_core.features import FeatureSpec
from okl_core.learners.base import NotMergeableError, State, validate_xy
from okl_core.learners.multikernel import MultiKernelLearner, example_uniform_rows, fold_on_demand
from okl_core.learners.oks.config import IOKSConfig, OKSConfig, OKSPlusPlusConfig, RFIOKSConfig, RFOKSPlusPlusConfig
from okl_core.learners.oks.rules import IOKSRule, OKSPlusPlusRule, OKSRule, SelectionRule, fold_module
from okl_core.learners.oks.storage import FeatureRows, FeatureStorage, SupportRows, SupportStateFields, SupportStorage

__all__ = [
    "OKS",
    "OKSPlusPlus",
    "IOKS",
    "RFOKSPlusPlus",
    "RFIOKS",
    "OKSState",
    "OKSPlusPlusState",
    "IOKSState",
    "RFOKSPlusPlusState",
    "RFIOKSState",
]


# -- states --------------------------------------------------------------------------------
class OKSState(NamedTuple):
    """OKS: support sets (``sv_x`` (m, d) float32 grouped by kernel, ``sv_alpha`` (m,),
    ``sv_count`` (K,)), ``sq_norm`` (K,) RKHS norms^2, ``log_w`` (K,) normalised
    log-weights, ``n_used`` (K,) draws per kernel, ``n_seen``."""

    sv_x: np.ndarray
    sv_alpha: np.ndarray
    sv_count: np.ndarray
    sq_norm: np.ndarray
    log_w: np.ndarray
    n_used: np.ndarray
    n_seen: np.ndarray


class OKSPlusPlusState(NamedTuple):
    """OKS++: support sets as :class:`OKSState`, ``loss_sum`` (K,) the estimated losses
    ``L~_i``, ``sq_loss_sum`` () ``S = sum q_{t,I} c~^2``, ``delta_constant`` () the ``a``
    of ``delta_t`` and ``lambda_t`` (constant unless ``tuning='released_code'``),
    ``n_used``, ``n_seen``."""

    sv_x: np.ndarray
    sv_alpha: np.ndarray
    sv_count: np.ndarray
    sq_norm: np.ndarray
    loss_sum: np.ndarray
    sq_loss_sum: np.ndarray
    delta_constant: np.ndarray
    n_used: np.ndarray
    n_seen: np.ndarray


class IOKSState(NamedTuple):
    """IOKS: support sets as :class:`OKSState`, ``q`` (K,), per-kernel rates ``eta`` (K,),
    thresholds ``rho`` (K,), ``grad_sq_sum`` (K,) sums of ``||grad~||^2``, ``n_used``, ``n_seen``."""

    sv_x: np.ndarray
    sv_alpha: np.ndarray
    sv_count: np.ndarray
    sq_norm: np.ndarray
    q: np.ndarray
    eta: np.ndarray
    rho: np.ndarray
    grad_sq_sum: np.ndarray
    n_used: np.ndarray
    n_seen: np.ndarray


class RFOKSPlusPlusState(NamedTuple):
    """RF-OKS++: ``w`` (K, 2D) float64 and the OKS++ statistics (:class:`OKSPlusPlusState`)."""

    w: np.ndarray
    loss_sum: np.ndarray
    sq_loss_sum: np.ndarray
    delta_constant: np.ndarray
    n_used: np.ndarray
    n_seen: np.ndarray


class RFIOKSState(NamedTuple):
    """RF-IOKS: ``w`` (K, 2D) float64 and the IOKS statistics (:class:`IOKSState`)."""

    w: np.ndarray
    q: np.ndarray
    eta: np.ndarray
    rho: np.ndarray
    grad_sq_sum: np.ndarray
    n_used: np.ndarray
    n_seen: np.ndarray


class SelectionState(State, Protocol):
    """A kernel-selection state: storage, statistics, ``n_used`` (K,) and ``n_seen``."""

    @property
    def n_used(self) -> np.ndarray: ...


SelectionStateT = TypeVar("SelectionStateT", bound=SelectionState)


# -- learners: a rule and a storage ---------------------------------------------------------
class _KernelSelection(MultiKernelLearner[SelectionStateT]):
    """A selection rule (:class:`SelectionRule`) on a storage (:class:`SupportStorage` or
    :class:`FeatureStorage`): draw a kernel, predict with it, let the rule update; predict;
    reports. The state is the storage's fields, the rule's statistics, ``n_used``, ``n_seen``.
    """

    rule_class: ClassVar[type[SelectionRule]]
    storage_class: ClassVar[type[SupportStorage] | type[FeatureStorage]]

    def __init__(self, config):
        super().__init__(config)
        self.rule: SelectionRule = self.rule_class(config, self.n_kernels)
        self.storage = self.storage_class(self.name, config)

    def init(self) -> SelectionStateT:
        return self.state_class(
            **self.storage.init(),
            **self.rule.init()._asdict(),
            n_used=np.zeros(self.n_kernels, np.int64),
            n_seen=np.asarray(0, np.int64),
        )

    def _begin(self, state: SelectionStateT, n: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """An update's working copies for ``n`` rows: the rule's statistics, the usage counts,
        the rows' uniforms and their scores (to fill)."""
        stats = self.rule.stats_class(*(np.array(a, copy=True) for a in self.rule.stats_of(state)))
        n_seen = int(state.n_seen)
        return stats, state.n_used.copy(), example_uniform_rows(self.config.seed, n_seen, n_seen + n, 1)[:, 0], np.empty(n)

    def _end(self, state: SelectionStateT, fields: dict[str, np.ndarray], stats: Any, n_used: np.ndarray, n: int) -> SelectionStateT:
        """The state after ``n`` rows: the storage's ``fields``, the statistics and the counters."""
        return self.state_class(**fields, **stats._asdict(), n_used=n_used, n_seen=np.asarray(int(state.n_seen) + n, np.int64))

    def distributions(self, state: SelectionStateT) -> tuple[np.ndarray, np.ndarray]:
        """``(q, p)`` of ``state``: the selection distribution and the sampling one."""
        return self.rule.distribution(self.rule.stats_of(state))

    def predict(self, state: SelectionStateT, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        q, _ = self.distributions(state)
        if self.config.predict_with == "best":
            return self.storage.predict(state, int(np.argmax(q)), X)
        out = np.zeros(len(X))
        for i in range(self.n_kernels):
            out += q[i] * self.storage.predict(state, i, X)
        return out

    def kernel_distribution(self, state: SelectionStateT) -> np.ndarray:
        q, _ = self.distributions(state)
        return q / q.sum()

    def kernel_counts(self, state: SelectionStateT) -> np.ndarray:
        return state.n_used

    def sampling_probabilities(self, state: SelectionStateT) -> dict[str, float]:
        """Kernel label -> probability ``p`` of drawing it for the next example."""
        _, p = self.distributions(state)
        return dict(zip(self.kernel_labels, map(float, p)))


class _SupportSelection(_KernelSelection[SelectionStateT]):
    """Kernel versions: growing support sets (capped by ``max_support``); not mergeable."""

    storage_class = SupportStorage
    growing_fields = ("sv_x", "sv_alpha")
    merge_semantics = "none"
    mix_refusal = "its kernel models keep growing support sets, which cannot be merged or mixed (train rf_oks_pp or rf_ioks to mix)"

    def update(self, state: SelectionStateT, X: ArrayLike, y: ArrayLike) -> tuple[SelectionStateT, np.ndarray]:
        """The rows in compiled code: the fold appends to the sets' buffers in place and stops
        before a row whose drawn kernel's buffers are full, whose capacity this loop doubles
        before resuming, or before a row that would exceed ``max_support`` (the cap's error)."""
        X, y = validate_xy(self, X, y)
        jit = fold_module()
        storage = cast(SupportStorage, self.storage)
        sets = storage.working(cast(SupportStateFields, state))
        stats, n_used, uniforms, scores = self._begin(state, len(y))
        X64 = X.astype(np.float64)  # exact: the sets' columns are float64
        counts = sets.counts()  # the fold advances them
        start = 0
        while start < len(y):
            rows = SupportRows(X64, start, y, uniforms, n_used, scores)
            start, need = self.rule.support_fold(jit, rows, storage.store(sets, counts), stats)
            sets.filled(counts)
            if need == jit.SUPPORT_CAP:
                storage.cap.check(int(counts.sum()) + 1)
            if need >= 0:
                sets.pack(need)
        return self._end(state, sets.fields(), stats, n_used, len(y)), scores

    def merge(self, states: Sequence[SelectionStateT], weights: ArrayLike | None = None, base: SelectionStateT | None = None) -> SelectionStateT:
        raise NotMergeableError(
            f"{self.name}: kernel models keep growing support sets, which shards cannot average; "
            f"train the random-feature version (rf_oks_pp, rf_ioks) to merge"
        )


class _FeatureSelection(_KernelSelection[SelectionStateT]):
    """Random-feature versions: merge and mix field by field (the subclasses' declarations)."""

    storage_class = FeatureStorage
    storage: FeatureStorage
    runtime_fields = ("feature_cache_mb",)
    counted_fields = ("n_used", "n_seen")
    mixable = True

    def kernel_feature_specs(self) -> tuple[FeatureSpec, ...]:
        """Each kernel's :class:`~okl_core.features.FeatureSpec` (kernel ``i`` seeded by ``kernel_seed(seed, i)``)."""
        return self.storage.bank.specs

    def update(self, state: SelectionStateT, X: ArrayLike, y: ArrayLike) -> tuple[SelectionStateT, np.ndarray]:
        """The rows in compiled code, on feature blocks computed ahead for the kernels the rows
        will probably draw (:func:`~okl_core.learners.multikernel.fold_on_demand`)."""
        X, y = validate_xy(self, X, y)
        jit = fold_module()
        rule = cast("OKSPlusPlusRule | IOKSRule", self.rule)
        w = cast("RFOKSPlusPlusState | RFIOKSState", state).w.copy()
        stats, n_used, uniforms, scores = self._begin(state, len(y))

        def guess(start: int, stop: int) -> np.ndarray:
            # The kernels the rows would draw from the distribution at the block's start.
            _, p = rule.distribution(stats)
            cdf = np.cumsum(p)
            picks = np.minimum(np.searchsorted(cdf, uniforms[start:stop] * cdf[-1], side="right"), self.n_kernels - 1)
            need = np.zeros((stop - start, self.n_kernels), dtype=bool)
            need[np.arange(stop - start), picks] = True
            return need

        def run(start: int, Z: np.ndarray, have: np.ndarray, r: int) -> tuple[int, int]:
            part = slice(start, start + len(Z))
            block = FeatureRows(Z, have, r, y[part], uniforms[part], w, n_used, scores[part], self.storage.clip)
            return rule.feature_fold(jit, block, stats)

        if len(y):
            fold_on_demand(self.storage.bank, self.storage.bank.stack(), X, guess, run)
        return self._end(state, {"w": w}, stats, n_used, len(y)), scores


class OKS(_SupportSelection[OKSState]):
    """OKS, the baseline of online kernel selection under bandit feedback (``oks``); kernel
    version. Needs the horizon ``T`` (``horizon``; pipelines take it from the data set's row count).
    Its fold is compiled (``_folds.fold_oks``)."""

    name = "oks"
    config_class = OKSConfig
    state_class = OKSState
    rule_class = OKSRule
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2", "horizon": 2000}


class OKSPlusPlus(_SupportSelection[OKSPlusPlusState]):
    """OKS++ for smooth losses (``oks_pp``): data-dependent step, exploration and weights; kernel version.
    Its fold is compiled (``_folds.fold_oks_pp``)."""

    name = "oks_pp"
    config_class = OKSPlusPlusConfig
    state_class = OKSPlusPlusState
    rule_class = OKSPlusPlusRule
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2"}


class IOKS(_SupportSelection[IOKSState]):
    """IOKS for Lipschitz losses (``ioks``): Tsallis mirror step, increasing rates; kernel version.
    Needs ``horizon`` (as :class:`OKS`). Its fold is compiled (``_folds.fold_ioks``)."""

    name = "ioks"
    config_class = IOKSConfig
    state_class = IOKSState
    rule_class = IOKSRule
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2", "horizon": 2000}


class RFOKSPlusPlus(_FeatureSelection[RFOKSPlusPlusState]):
    """RF-OKS++ (``rf_oks_pp``): OKS++ on seeded random features with coordinate clipping.

    Merge: ``w`` and the OKS++ sums averaged by ``n_seen``, usage counts added; mix alike
    (counts stay local).
    """

    name = "rf_oks_pp"
    config_class = RFOKSPlusPlusConfig
    state_class = RFOKSPlusPlusState
    rule_class = OKSPlusPlusRule
    averaged_fields = ("w", "loss_sum", "sq_loss_sum", "delta_constant")
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2", "n_components": 32}


class RFIOKS(_FeatureSelection[RFIOKSState]):
    """RF-IOKS (``rf_ioks``): IOKS on seeded random features with coordinate clipping.

    Needs the horizon ``T`` (``horizon``). Merge: ``w``, ``q`` and the gradient sums
    averaged by ``n_seen``, the elementwise maximum of ``eta`` and ``rho``, counts added;
    mix alike (counts stay local).
    """

    name = "rf_ioks"
    config_class = RFIOKSConfig
    state_class = RFIOKSState
    rule_class = IOKSRule
    averaged_fields = ("w", "q", "grad_sq_sum")
    maximum_fields = ("eta", "rho")
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2", "n_components": 32, "horizon": 2000}
