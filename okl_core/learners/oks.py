"""Online kernel selection under bandit feedback (Li, Liao, ECML-PKDD 2022; spec/oks.md).

``K`` kernels (the dictionary of :mod:`.multikernel`, default Gaussians with sigma =
2^-2 .. 2^3), one hypothesis ``f_i`` per kernel. Each example: draw one kernel
``I_t ~ p_t``, predict ``f_{I_t}(x_t)`` (the score; label = sign for the logistic loss),
observe only that kernel's loss and update only ``f_{I_t}``, with the importance-weighted
gradient ``l'(f(x), y) k(x, .) / p_{t,I_t}``. The losses are the paper's: ``logistic``
``log(1 + exp(-y f))`` (binary, y in {-1, +1}), ``square`` ``(f - y)^2`` (regression;
twice :mod:`okl_core.losses`' ``square``), ``absolute`` ``|f - y|`` (regression).

Learners (registry names)
-------------------------
``oks``        OKS (the baseline, Algorithm 1): ``w_I *= exp(-eta l / p_I)``,
               ``f_I -= lambda l' k(x, .) / p_I`` (no projection), ``q = w / sum w``,
               ``p = (1 - delta) q + delta / K`` with ``delta = min(1, (K/T)^{1/3})`` [code],
               ``lambda = m sqrt(delta / (K T))`` (``step_scale`` m: 25 for square and
               logistic, 5 for absolute), ``eta = sqrt(2 (1 - delta) ln K) / sqrt(K T)``.
``oks_pp``     OKS++ (smooth losses: logistic, square), Theorem 3.1 / Algorithm 3:
               running sums ``L~_i`` (estimated losses of kernel i, ``Delta_i``),
               ``C~ = sum_i L~_i`` and ``S = sum_t q_{t,I_t} c~_t^2``;
               ``lambda_{t,I} = U^{4/3} max{G C0 U^2 K^2, 8 C~}^{-1/6} /
               (sqrt(4/3) K^{1/6} (G C0)^{1/3} sqrt(1 + L~_I))`` and a projected step onto
               ``||f|| <= U``; ``eta_t = sqrt(2 ln K) / sqrt(1 + S)``,
               ``q_{t+1} ~ exp(-eta_t L~)``, ``delta_t = a / (2 max{a, 2 C~^{1/3}})`` with
               ``a = (G C0)^{1/3} (U K)^{2/3}``, ``p = (1 - delta_t) q + delta_t / K``.
               Constants: logistic U = 15, C0 = 1, G = 1; square U = 1, C0 = 4, G = 1.
               The sums include the current example (the paper's indices). The
               released logistic script overwrites ``a`` with ``exp(-y f)`` inside its
               loop (far less exploration); ``tuning = 'released_code'`` reproduces it,
               the default ``'paper'`` follows Theorem 3.1.
``ioks``       IOKS (Lipschitz losses: absolute, logistic, square), Algorithm 2:
               ``alpha = 8``, ``delta = T^{-3/4}``, ``upsilon = exp(2 / (3 ln T))``,
               initial rates ``eta_i = 8 l_max K^{3/8} / (U G1 sqrt(T ln T))`` (the
               experiments' value; G1 = 1 for absolute and logistic, 4 for square);
               ``lambda_{t,i} = U / (sqrt 2 sqrt(1 + sum_{tau<=t} ||grad~_tau,i||^2))`` and
               a projected step; ``c = min(l / l_max, 1)`` (clipped to the [0, 1] range the
               analysis assumes, which keeps the mirror step well defined; ``loss_cap =
               False`` gives the spec's ``c = l / l_max`` without the cap);
               ``c~ = c / p_I`` if ``p_I >= max_i eta_i`` else ``c / (p_I + max_i eta_i)``;
               Tsallis mirror step :func:`tsallis_step`
               ``q_i = (q_i^{-7/8} + eta_i (c~_i - mu))^{-8/7}`` with ``mu`` found by
               bisection so that ``sum q = 1`` within 1e-5 (``q`` is not renormalised);
               ``p = (1 - delta) q + delta / K``; if ``1 / p_i > rho_i`` then
               ``rho_i = 2 / p_i`` and ``eta_i *= upsilon`` (``rho`` starts at 2K [code]).
``rf_oks_pp``  RF-OKS++ and
``rf_ioks``    RF-IOKS: the same rules on random features, ``f_i(x) = w_i . z_i(x)``
               with ``z_i`` the ``2 D`` seeded features ``[cos, sin] / sqrt(D)`` of kernel
               ``i`` (seed ``kernel_seed(seed, i)``); the step is
               ``w_I -= lambda l' z / p_I`` followed by clipping every coordinate to
               ``+-U / sqrt(D)`` (``D`` = ``n_components`` frequencies, as in the spec, so
               ``||w||_2 <= U sqrt(2)``). Cost O(d D) per example.

Structure: each learner is a selection rule (:class:`OKSRule`, :class:`OKSPlusPlusRule`,
:class:`IOKSRule`) on a storage (:class:`SupportStorage`, growing support sets;
:class:`FeatureStorage`, random-feature weights). A state is the storage's fields, the
rule's statistics (:class:`OKSStats`, :class:`OKSPlusPlusStats`, :class:`IOKSStats`),
``n_used`` and ``n_seen``.

Horizon: OKS and IOKS (and RF-IOKS) tune their constants with the number of rounds
``T``, the config field ``horizon`` (required). The okl pipelines fill it from the data
set's row count (``dataset.json`` ``n_rows``) unless it is given; the learner keeps
working past ``T`` with the same constants.

Kernel (non random-feature) versions (``oks``, ``oks_pp``, ``ioks``) keep a growing
support set: every example whose gradient is non-zero adds its row to the sampled
kernel's support set (the logistic loss always does), so after ``t`` examples the model
holds up to ``t`` rows. Memory: ``4 d + 8`` bytes per support vector in the state (rows
as float32, coefficients as float64) and ``8 (d + 2)`` bytes in the working buffers
during an update, up to twice that with the buffers' spare capacity, and twice again
for a moment while the compiled fold's buffers grow (a9a: 32,561 x 123 rows, about 16 MB
in the state, 33-66 MB while training); the time of an example grows linearly with the
sampled kernel's support set. The per-example loop is compiled (numba:
``_jit_folds.fold_oks``, ``fold_oks_pp``, ``fold_ioks``, the rules' arithmetic shared
with the random-feature folds) and gives the numpy fold's bytes (``OKL_NO_JIT=1`` runs
the numpy fold); a9a, 5,000 rows in batches of 1,000: 59-97 us per row with the numpy
fold, 7-9 compiled (bench/bench_folds.py), most of it the drawn kernel's row.
``max_support`` caps the total: an update that would exceed it raises a ValueError
naming the cap (use ``rf_oks_pp`` / ``rf_ioks`` for long streams). ``k(x, x) = 1`` for
every dictionary kernel, which the norm bookkeeping of the projection uses.

Draws: example ``t`` (0-based counter ``n_seen``) samples its kernel with word 0 of
generator ``(seed, t)`` (:func:`.multikernel.example_uniforms`), by inverse CDF on ``p``;
an update draws all its examples' words before its fold (the same words, one generator).

Prediction: ``update`` returns the sampled kernel's score (the paper's online
protocol). ``predict(state, X)`` uses ``predict_with = 'best'``: the kernel of largest
``q`` (the paper's output ``q_T`` read as a selection; first on ties), or ``'mixture'``:
``sum_i q_i f_i(x)``. :meth:`kernel_weights` gives ``q``, :meth:`sampling_probabilities`
gives ``p`` and :meth:`kernel_usage` how often each kernel was drawn.

Merging: the kernel versions raise :class:`NotMergeableError` (support sets grown in
different shards are different functions with their own norm bookkeeping). The
random-feature versions average ``w`` kernel by kernel with weights ``n_seen`` and
average the selection statistics with the same weights (RF-OKS++: ``L~``, ``S``; RF-IOKS:
``q``, ``sum ||grad~||^2``; and the elementwise maximum of RF-IOKS's increasing ``eta``
and ``rho``), so merging identical states is the identity; usage counts add. These are
the protocol's field declarations (``averaged_fields``, ``maximum_fields``,
``counted_fields`` of :class:`~okl_core.learners.base.Learner`).

Mixing (streaming): the random-feature versions mix field by field as they merge --
``w`` and the averaged statistics become ``(1 - w) local + w merged``, ``eta`` and
``rho`` the elementwise maximum, ``n_used`` and ``n_seen`` stay the shard's own.
Predictions are not linear in the mixed parameters (``q`` and ``p`` come from the mixed
statistics). The kernel versions cannot mix (they cannot merge).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike

from okl_core.derived import scaled_dictionary
from okl_core.features import FeatureSpec
from okl_core.kernels import SELF_SIMILARITY, Kernel
from okl_core.learners.base import (
    CheckedConfig,
    NotMergeableError,
    State,
    check_bool,
    check_choice,
    check_int,
    check_positive,
    validate_xy,
)
from okl_core.learners.compiled import kernels
from okl_core.learners.multikernel import (
    OKS_DICTIONARY,
    KernelFeatureBank,
    MultiKernelConfig,
    MultiKernelLearner,
    RandomFeatureMultiKernelConfig,
    draw_index,
    example_uniform_rows,
    fold_log_normalize,
    fold_on_demand,
    fold_weights,
)
from okl_core.learners.support import MIN_CAPACITY, SupportBuffer, SupportCap, SupportCapConfig

__all__ = [
    "OKSConfig",
    "OKSPlusPlusConfig",
    "IOKSConfig",
    "RFOKSPlusPlusConfig",
    "RFIOKSConfig",
    "OKS",
    "OKSPlusPlus",
    "IOKS",
    "RFOKSPlusPlus",
    "RFIOKS",
    "OKSStats",
    "OKSPlusPlusStats",
    "IOKSStats",
    "SelectionRule",
    "OKSRule",
    "OKSPlusPlusRule",
    "IOKSRule",
    "SupportStorage",
    "FeatureStorage",
    "tsallis_step",
    "oks_pp_constant",
    "oks_pp_distribution",
]

ALPHA = 8.0  # IOKS's Tsallis exponent (the paper's choice)
_TASKS = {"logistic": "binary", "square": "regression", "absolute": "regression"}
_NORM_BOUND = {"logistic": 15.0, "square": 1.0, "absolute": 1.0}  # U of the experiments
_SMOOTHNESS = {"logistic": (1.0, 1.0), "square": (4.0, 1.0)}  # OKS++ (C0, G)
_LIPSCHITZ = {"absolute": 1.0, "logistic": 1.0, "square": 4.0}  # IOKS G1
_OKS_STEP_SCALE = {"logistic": 25.0, "square": 25.0, "absolute": 5.0}  # OKS m
_PREDICT_CHUNK = 4 * 2**20  # rows x support vectors per exact-kernel block in predict


LOSS_CODES = {"logistic": 0, "square": 1, "absolute": 2}  # the compiled folds' loss kinds


# The paper's losses on scalars, in the C library's exp and log1p (numpy's SIMD exp differs
# from it on some arguments), as the compiled folds (okl_core.learners._jit_folds) compute
# them: okl_core.losses' logistic (np.logaddexp(0, -y f) and -y sigmoid(-y f)), twice its
# square, its absolute loss.
def _logistic_value(f: float, y: float) -> float:
    t = -y * f
    if t == 0.0:
        return math.log(2.0)
    return math.log1p(math.exp(t)) if t < 0.0 else t + math.log1p(math.exp(-t))


def _logistic_grad(f: float, y: float) -> float:
    t = -y * f
    if t >= 0.0:
        return -y * (1.0 / (1.0 + math.exp(-t)))
    e = math.exp(t)
    return -y * (e / (1.0 + e))


def _square_value(f: float, y: float) -> float:
    r = f - y
    return 2.0 * (0.5 * (r * r))


def _square_grad(f: float, y: float) -> float:
    return 2.0 * (f - y)


def _absolute_value(f: float, y: float) -> float:
    return abs(f - y)


def _absolute_grad(f: float, y: float) -> float:
    r = f - y
    return 1.0 if r > 0.0 else (-1.0 if r < 0.0 else r)  # np.sign, NaN kept


_PAPER_LOSSES = {
    "logistic": (_logistic_value, _logistic_grad),
    "square": (_square_value, _square_grad),  # (f - y)^2, twice okl's 0.5 (f - y)^2
    "absolute": (_absolute_value, _absolute_grad),
}


def _paper_loss(name: str):
    """``(value, derivative)`` of the paper's loss ``name`` for scalar ``f, y`` (Python floats)."""
    value, grad = _PAPER_LOSSES[name]
    return (lambda f, y: value(float(f), float(y))), (lambda f, y: grad(float(f), float(y)))


# -- configs -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _SelectionFields(CheckedConfig):
    """Fields of every kernel-selection learner.

    Parameters
    ----------
    loss : str
        ``logistic`` (binary), ``square`` or ``absolute`` (regression); each learner
        accepts the losses its paper covers.
    norm_bound : float or None
        ``U``, the radius of the hypothesis balls; None: the experiments' value (15 for
        logistic, 1 otherwise).
    predict_with : {'best', 'mixture'}
        How ``predict`` combines the kernels (module docstring).
    """

    loss: str = "logistic"
    norm_bound: float | None = None
    predict_with: str = "best"

    _losses: ClassVar[tuple[str, ...]] = ("logistic", "square", "absolute")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("loss", self.loss, set(self._losses))
        if self.norm_bound is not None:
            check_positive("norm_bound", self.norm_bound)
        check_choice("predict_with", self.predict_with, {"best", "mixture"})

    @property
    def task(self) -> str:
        """``binary`` for the logistic loss, ``regression`` otherwise."""
        return _TASKS[self.loss]

    @property
    def radius(self) -> float:
        """``U``: :attr:`norm_bound` or the loss's default."""
        return float(self.norm_bound) if self.norm_bound is not None else _NORM_BOUND[self.loss]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _KernelSelectionConfig(SupportCapConfig, _SelectionFields, MultiKernelConfig):
    """Kernel (growing support set) versions: adds ``max_support`` (total support vectors)."""

    kernels: str = OKS_DICTIONARY

    data_defaults: ClassVar[dict] = {"kernels": scaled_dictionary(OKS_DICTIONARY, "median")}


@dataclasses.dataclass(frozen=True, kw_only=True)
class _RFSelectionConfig(_SelectionFields, RandomFeatureMultiKernelConfig):
    """Random-feature versions: ``n_components`` D per kernel (default 400, the paper's)."""

    kernels: str = OKS_DICTIONARY
    n_components: int = 400

    data_defaults: ClassVar[dict] = {"kernels": scaled_dictionary(OKS_DICTIONARY, "median")}


@dataclasses.dataclass(frozen=True, kw_only=True)
class OKSConfig(_KernelSelectionConfig):
    """:class:`OKS` parameters.

    Parameters
    ----------
    n_inputs, kernels, seed
        See :class:`~okl_core.learners.multikernel.MultiKernelConfig` (default kernels:
        Gaussians sigma = 2^-2 .. 2^3).
    loss, norm_bound, predict_with
        See ``_SelectionFields``.
    max_support : int
        Cap on the support vectors of all kernels together (default 100,000); an update
        that would exceed it raises a ValueError naming it.
    horizon : int
        ``T``, the number of rounds the constants are tuned for (>= 1), required. The okl
        pipelines fill it from the data set's row count (``dataset.json`` ``n_rows``)
        unless given.
    step_scale : float or None
        ``m`` in ``lambda = m sqrt(delta / (K T))``; None: 25 (square, logistic), 5 (absolute).
    """

    horizon: int
    step_scale: float | None = None

    data_defaults: ClassVar[dict] = {"horizon": "n"}

    def __post_init__(self):
        super().__post_init__()
        check_int("horizon", self.horizon, 1)
        if self.step_scale is not None:
            check_positive("step_scale", self.step_scale)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _OKSPlusPlusFields(CheckedConfig):
    """OKS++ field ``tuning``: ``'paper'`` (Theorem 3.1, default) or ``'released_code'``.

    The authors' released logistic script overwrites the constant
    ``a = (G C0)^{1/3} (U K)^{2/3}`` with ``exp(-y_t f_t(x_t))`` of the current example
    inside its loop, so its ``lambda_t`` uses ``max{a_t^3, 8 C~}`` and its next
    ``delta_t = a_t / (2 max{a_t, 2 C~^{1/3}})`` explores far less; the published a9a
    numbers come from that script. ``'released_code'`` reproduces it (logistic loss only;
    its square-loss script keeps the constant, so both settings agree there).
    """

    tuning: str = "paper"
    _losses: ClassVar[tuple[str, ...]] = ("logistic", "square")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("tuning", self.tuning, {"paper", "released_code"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class OKSPlusPlusConfig(_OKSPlusPlusFields, _KernelSelectionConfig):
    """:class:`OKSPlusPlus` parameters: ``n_inputs``, ``kernels``, ``seed``, ``loss``
    (logistic, square), ``norm_bound``, ``predict_with``, ``max_support`` (see
    :class:`OKSConfig`) and ``tuning`` (``_OKSPlusPlusFields``). No horizon needed."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RFOKSPlusPlusConfig(_OKSPlusPlusFields, _RFSelectionConfig):
    """:class:`RFOKSPlusPlus` parameters: as :class:`OKSPlusPlusConfig` without
    ``max_support``, plus ``n_components`` (D = 400), ``block_size`` and
    ``feature_cache_mb`` (see :class:`~okl_core.learners.multikernel.RandomFeatureMultiKernelConfig`)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class _IOKSFields(CheckedConfig):
    """IOKS fields.

    Parameters
    ----------
    horizon : int
        ``T`` (>= 2: the constants need ``ln T > 0``), required. The okl pipelines fill it
        from the data set's row count (``dataset.json`` ``n_rows``) unless given.
    loss_max : float
        ``l_max`` (> 0): losses are scaled to ``c = min(l / l_max, 1)``; the paper's
        experiments use 1.
    loss_cap : bool
        True (default): cap the scaled loss at 1 (``c = min(l / l_max, 1)``), the [0, 1]
        range the analysis assumes. False: ``c = l / l_max`` as the paper's algorithm
        writes it, so a logistic loss above ``l_max`` moves the weights further (the
        reading that decides how far IOKS's kernel weights move on a badly wrong guess).
    """

    horizon: int
    loss_max: float = 1.0
    loss_cap: bool = True

    data_defaults: ClassVar[dict] = {"horizon": "n"}

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("horizon", self.horizon, 2)
        check_positive("loss_max", self.loss_max)
        check_bool("loss_cap", self.loss_cap)

    @property
    def loss_ceiling(self) -> float:
        """The largest scaled loss ``c`` the rule uses: 1 with :attr:`loss_cap`, else infinity."""
        return 1.0 if self.loss_cap else math.inf


@dataclasses.dataclass(frozen=True, kw_only=True)
class IOKSConfig(_IOKSFields, _KernelSelectionConfig):
    """:class:`IOKS` parameters: ``n_inputs``, ``kernels``, ``seed``, ``loss`` (absolute,
    logistic, square), ``norm_bound``, ``predict_with``, ``max_support``, ``horizon`` and
    ``loss_max`` (see :class:`OKSConfig` and ``_IOKSFields``)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RFIOKSConfig(_IOKSFields, _RFSelectionConfig):
    """:class:`RFIOKS` parameters: as :class:`IOKSConfig` without ``max_support``, plus
    ``n_components`` (D = 400), ``block_size`` and ``feature_cache_mb`` (see
    :class:`~okl_core.learners.multikernel.RandomFeatureMultiKernelConfig`)."""


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


# -- the selection rules as pure functions (tested alone) ----------------------------------
def oks_pp_constant(radius: float, c0: float, g: float, n_kernels: int) -> float:
    """OKS++'s ``a = (G C0)^{1/3} (U K)^{2/3}`` (so ``a^3 = G C0 U^2 K^2``)."""
    return (g * c0) ** (1.0 / 3.0) * (radius * n_kernels) ** (2.0 / 3.0)


def oks_pp_distribution(loss_sum: np.ndarray, sq_loss_sum: float, a: float):
    """OKS++'s ``(q, p, delta)`` from its running sums (Theorem 3.1, Algorithm 3 lines 12-13).

    ``eta = sqrt(2 ln K) / sqrt(1 + S)``, ``q ~ exp(-eta L~)``,
    ``delta = a / (2 max{a, 2 C~^{1/3}})`` (``a``: :func:`oks_pp_constant`) with
    ``C~ = sum L~``; ``p = (1 - delta) q + delta / K``, so ``p_i >= delta / K``.
    """
    K = len(loss_sum)
    eta = math.sqrt(2.0 * math.log(K)) / math.sqrt(1.0 + sq_loss_sum)
    q = fold_weights(-eta * loss_sum)
    delta = a / (2.0 * max(a, 2.0 * float(np.cumsum(loss_sum)[-1]) ** (1.0 / 3.0)))
    return q, (1.0 - delta) * q + delta / K, delta


def tsallis_step(q: np.ndarray, eta: np.ndarray, c_tilde: np.ndarray, tol: float = 1e-5, max_iter: int = 200):
    """IOKS's mirror step: ``q'_i = (q_i^{-7/8} + eta_i (c~_i - mu))^{-8/7}`` with ``sum q' = 1``.

    ``mu`` is found by bisection (the paper's interval ``[0, max c~]``, widened if the
    bracket does not hold) until ``|sum q' - 1| <= tol``. Powers from the C library, sums
    sequential (the arithmetic ``_jit_folds.tsallis_step`` repeats).

    Returns
    -------
    q_new : ndarray (K,)
    mu : float
    """
    base = _powers(q, 1.0 / ALPHA - 1.0) + eta * c_tilde
    power = ALPHA / (1.0 - ALPHA)

    def total(mu: float) -> float:
        b = base - eta * mu
        return math.inf if np.any(b <= 0.0) else float(np.cumsum(_powers(b, power))[-1])

    lo, hi = 0.0, float(np.max(c_tilde))
    width = max(hi, 1.0)
    while total(lo) > 1.0 + tol:  # sum q' decreases as mu decreases
        lo, width = lo - width, 2.0 * width
    while total(hi) < 1.0 - tol:
        hi, width = hi + width, 2.0 * width
    mu = lo
    for _ in range(max_iter):
        value = total(mu)
        if abs(value - 1.0) <= tol:
            break
        if value > 1.0:
            hi = mu
        else:
            lo = mu
        mu = 0.5 * (lo + hi)
    return _powers(base - eta * mu, power), mu


def _powers(v: np.ndarray, exponent: float) -> np.ndarray:
    """``v ** exponent`` elementwise with the C library's pow (as the compiled folds)."""
    return np.fromiter((math.pow(x, exponent) for x in v.tolist()), np.float64, len(v))


# -- the rules' statistics: each rule's part of the state ----------------------------------
class OKSStats(NamedTuple):
    """OKS: ``log_w`` (K,) normalised log-weights."""

    log_w: np.ndarray


class OKSPlusPlusStats(NamedTuple):
    """OKS++: ``loss_sum`` (K,) ``L~``, ``sq_loss_sum`` () ``S``, ``delta_constant`` () ``a``."""

    loss_sum: np.ndarray
    sq_loss_sum: np.ndarray
    delta_constant: np.ndarray


class IOKSStats(NamedTuple):
    """IOKS: ``q`` (K,), rates ``eta`` (K,), thresholds ``rho`` (K,), ``grad_sq_sum`` (K,)."""

    q: np.ndarray
    eta: np.ndarray
    rho: np.ndarray
    grad_sq_sum: np.ndarray


StatsT = TypeVar("StatsT", OKSStats, OKSPlusPlusStats, IOKSStats)


class SelectionState(State, Protocol):
    """A kernel-selection state: storage, statistics, ``n_used`` (K,) and ``n_seen``."""

    @property
    def n_used(self) -> np.ndarray: ...


SelectionStateT = TypeVar("SelectionStateT", bound=SelectionState)


# -- storage: growing support sets or random-feature weights ------------------------------
class Hypotheses(Protocol):
    """The ``K`` hypotheses ``f_i`` during an update (a working copy of the state's storage)."""

    def evaluate(self, i: int, x: np.ndarray) -> float:
        """``f_i(x)`` for one float32 row."""

    def feature_sq_norm(self) -> float:
        """``||k(x, .)||^2`` of the row last evaluated."""

    def step(self, i: int, x: np.ndarray, f: float, coef: float, bound: float | None) -> None:
        """``f_i += coef k(x, .)`` (``f = f_i(x)``), then project onto ``||f_i|| <= bound`` if given."""

    def fields(self) -> dict[str, np.ndarray]:
        """The storage's state fields."""


class _Arena:
    """The K support sets' buffers one after the other in one float64 array per kind: columns
    (kernel ``i``: a ``(d, capacities[i])`` C-ordered block at ``d * offsets[i]``), squared
    norms and coefficients (at ``offsets[i]``), zero-filled. The compiled folds take the
    three arrays (``_jit_folds.support_views``) whatever ``K``."""

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
    :class:`~okl_core.learners.support.GrowingArray`'s), which the compiled folds read.
    """

    def __init__(self, kernels: list[Kernel], cap: SupportCap, state: SupportStateFields):
        self.kernels = kernels
        cap.check_held(int(state.sv_count.sum()))
        counts = state.sv_count.tolist()
        self.arena = _Arena(state.sv_x.shape[1], [max(MIN_CAPACITY, 2 * m) for m in counts])
        ends = np.cumsum(state.sv_count).tolist()
        self.sets = [
            SupportBuffer(state.sv_x[end - m : end], state.sv_alpha[end - m : end], cap, columns=True, out=self.arena.views(i))
            for i, (m, end) in enumerate(zip(counts, ends))
        ]
        self.sq_norm = state.sq_norm.copy()

    def pack(self, grow: int) -> None:
        """Move the sets into a new arena where kernel ``grow``'s capacity is doubled."""
        capacities = self.arena.capacities.copy()
        capacities[grow] *= 2
        self.arena = _Arena(self.arena.d, capacities.tolist())
        for i, support in enumerate(self.sets):
            support.move_to(*self.arena.views(i))

    def evaluate(self, i: int, x: np.ndarray) -> float:
        support = self.sets[i]
        if not len(support):
            return 0.0
        k = self.kernels[i].row_against_buffer(x.astype(np.float64), support.vectors.view(), support.sq_norms.view())
        return float(np.cumsum(k * support.alpha.view())[-1])  # summed in order, as the compiled fold

    def feature_sq_norm(self) -> float:
        """``k(x, x)``, 1 for every dictionary kernel."""
        return SELF_SIMILARITY

    def step(self, i: int, x: np.ndarray, f: float, coef: float, bound: float | None) -> None:
        support = self.sets[i]
        support.append(x, coef, others=sum(map(len, self.sets)) - len(support))
        # ||f + c k(x,.)||^2 = ||f||^2 + 2 c f(x) + c^2 k(x, x).
        sq = max(self.sq_norm[i] + 2.0 * coef * f + coef * coef * SELF_SIMILARITY, 0.0)
        if bound is not None and sq > bound * bound:
            support.alpha.view()[...] *= bound / math.sqrt(sq)
            sq = bound * bound
        self.sq_norm[i] = sq

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
            "sv_count": np.asarray([len(support) for support in self.sets], dtype=np.int64),
            "sq_norm": self.sq_norm,
        }


class _FeatureWeights:
    """Per-kernel random-feature weights of an update: ``w`` (K, 2D), a row's features cached."""

    def __init__(self, bank: KernelFeatureBank, w: np.ndarray, clip: float):
        self.bank, self.w, self.clip = bank, w.copy(), clip
        self._omega = bank.stack()
        self._z = np.zeros(0)

    def evaluate(self, i: int, x: np.ndarray) -> float:
        self._z = self.bank.rows(self._omega[i : i + 1], x)[0]
        return float(self._z @ self.w[i])

    def feature_sq_norm(self) -> float:
        """``||z(x)||^2`` of the row last evaluated (1 up to float rounding)."""
        return float(self._z @ self._z)

    def step(self, i: int, x: np.ndarray, f: float, coef: float, bound: float | None) -> None:
        """``w_i += coef z(x)`` (features of the row just evaluated), then clip to ``+-U/sqrt(D)``."""
        self.w[i] += coef * self._z
        if bound is not None:
            np.clip(self.w[i], -self.clip, self.clip, out=self.w[i])

    def fields(self) -> dict[str, np.ndarray]:
        return {"w": self.w}


class SupportStateFields(Protocol):
    """The storage fields of a kernel version's state."""

    sv_x: np.ndarray
    sv_alpha: np.ndarray
    sv_count: np.ndarray
    sq_norm: np.ndarray


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

    def working(self, state) -> _SupportSets:
        return _SupportSets(self.kernels, self.cap, state)

    def store(self, sets: _SupportSets, counts: np.ndarray) -> tuple:
        """The compiled support folds' ``store`` of ``sets`` (``_jit_folds``, "online kernel
        selection"): its arena, ``counts`` (K,) int64 (written in place), the RKHS norms, the
        kernels and ``max_support``."""
        arena = sets.arena
        return (
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

    def working(self, state) -> Hypotheses:
        return _FeatureWeights(self.bank, state.w, self.clip)

    def predict(self, state, i: int, X: np.ndarray) -> np.ndarray:
        if not np.any(state.w[i]):
            return np.zeros(len(X))
        return self.bank.transform(i, X) @ state.w[i]


class _SupportFoldArgs(NamedTuple):
    """What a compiled support fold (``_jit_folds.fold_oks`` ...) takes besides the rule's
    statistics and constants: float64 rows ``X`` from ``start``, labels, uniforms, the sets
    (:meth:`SupportStorage.store`), the usage counts and the scores (in place)."""

    X: np.ndarray
    start: int
    y: np.ndarray
    uniforms: np.ndarray
    store: tuple
    n_used: np.ndarray
    scores: np.ndarray


class _FoldArgs(NamedTuple):
    """What a compiled selection fold takes besides the rule's statistics (a feature block's
    rows from ``start``, see :func:`~okl_core.learners.multikernel.fold_on_demand`)."""

    Z: np.ndarray
    have: np.ndarray
    start: int
    y: np.ndarray
    uniforms: np.ndarray
    w: np.ndarray
    n_used: np.ndarray
    scores: np.ndarray
    clip: float


# -- rules: draw a kernel, predict with it, update it and the selection statistics -------
class SelectionRule(Generic[StatsT]):
    """A kernel-selection rule: its statistics (a NamedTuple), the distributions they
    define and one example's step.

    Parameters
    ----------
    config
        The learner's config (``loss``, ``radius`` and the rule's own fields).
    n_kernels : int
        ``K``.
    """

    stats_class: type[StatsT]

    def __init__(self, config, n_kernels: int):
        self.K = n_kernels
        self.loss = config.loss
        self.loss_value, self.loss_grad = _paper_loss(config.loss)

    def init(self) -> StatsT:
        """The statistics before any example."""
        raise NotImplementedError

    def stats_of(self, state) -> StatsT:
        """The rule's statistics in ``state`` (the arrays themselves, not copies)."""
        return self.stats_class(*(getattr(state, name) for name in self.stats_class._fields))

    def distribution(self, stats: StatsT) -> tuple[np.ndarray, np.ndarray]:
        """``(q, p)``: the selection distribution and the sampling one (with exploration)."""
        raise NotImplementedError

    def step(self, stats: StatsT, hyp: Hypotheses, x: np.ndarray, y: float, u: float) -> tuple[float, int, StatsT]:
        """One example with uniform ``u``: returns the score, the kernel drawn and the new
        statistics (``stats``' arrays may be updated in place: they are the update's copies)."""
        raise NotImplementedError

    def support_fold(self, jit, fold: _SupportFoldArgs, stats: StatsT) -> tuple[int, int]:
        """:meth:`step` over rows on support sets in compiled code, ``stats`` in place: returns
        ``(rows done, -1)`` or where and why it stopped (``_jit_folds.fold_oks``)."""
        raise NotImplementedError

    def _observe(self, p: np.ndarray, hyp: Hypotheses, x: np.ndarray, y: float, u: float) -> tuple[int, float, float, float]:
        """The bandit feedback: kernel ``i ~ p`` (inverse CDF of ``u``), its prediction ``f``,
        and its loss and derivative at ``(f, y)``."""
        i = draw_index(p, u)
        f = hyp.evaluate(i, x)
        return i, f, self.loss_value(f, y), self.loss_grad(f, y)


class OKSRule(SelectionRule[OKSStats]):
    """OKS (Algorithm 1) with the spec's tuning from the horizon T."""

    stats_class = OKSStats

    def __init__(self, config: OKSConfig, n_kernels: int):
        super().__init__(config, n_kernels)
        K, T = n_kernels, config.horizon
        self.delta = min(1.0, (K / T) ** (1.0 / 3.0))
        scale = config.step_scale if config.step_scale is not None else _OKS_STEP_SCALE[config.loss]
        self.lam = scale * math.sqrt(self.delta / (K * T))
        self.eta = math.sqrt(2.0 * (1.0 - self.delta) * math.log(K)) / math.sqrt(K * T)

    def init(self) -> OKSStats:
        return OKSStats(log_w=np.full(self.K, -math.log(self.K)))

    def distribution(self, stats: OKSStats) -> tuple[np.ndarray, np.ndarray]:
        q = fold_weights(stats.log_w)
        return q, (1.0 - self.delta) * q + self.delta / self.K

    def step(self, stats: OKSStats, hyp: Hypotheses, x: np.ndarray, y: float, u: float) -> tuple[float, int, OKSStats]:
        _, p = self.distribution(stats)
        i, f, loss, grad = self._observe(p, hyp, x, y, u)
        log_w = stats.log_w
        log_w[i] -= self.eta * loss / p[i]
        if grad != 0.0:
            hyp.step(i, x, f, -self.lam * grad / p[i], None)
        return f, i, OKSStats(log_w=fold_log_normalize(log_w))

    def support_fold(self, jit, fold: _SupportFoldArgs, stats: OKSStats) -> tuple[int, int]:
        """:meth:`step` over rows on support sets in compiled code (``_jit_folds.fold_oks``)."""
        return jit.fold_oks(*fold, stats.log_w, LOSS_CODES[self.loss], self.delta, self.eta, self.lam)


class OKSPlusPlusRule(SelectionRule[OKSPlusPlusStats]):
    """OKS++ (Theorem 3.1; Algorithm 3 for the random-feature version)."""

    stats_class = OKSPlusPlusStats

    def __init__(self, config: OKSPlusPlusConfig | RFOKSPlusPlusConfig, n_kernels: int):
        super().__init__(config, n_kernels)
        self.c0, self.g = _SMOOTHNESS[config.loss]
        self.radius = config.radius
        self.code_constant = config.tuning == "released_code" and config.loss == "logistic"

    def init(self) -> OKSPlusPlusStats:
        a = oks_pp_constant(self.radius, self.c0, self.g, self.K)
        return OKSPlusPlusStats(loss_sum=np.zeros(self.K), sq_loss_sum=np.asarray(0.0), delta_constant=np.asarray(a))

    def distribution(self, stats: OKSPlusPlusStats) -> tuple[np.ndarray, np.ndarray]:
        q, p, _ = oks_pp_distribution(stats.loss_sum, float(stats.sq_loss_sum), float(stats.delta_constant))
        return q, p

    def step(
        self, stats: OKSPlusPlusStats, hyp: Hypotheses, x: np.ndarray, y: float, u: float
    ) -> tuple[float, int, OKSPlusPlusStats]:
        K, U, gc0 = self.K, self.radius, self.g * self.c0
        q, p = self.distribution(stats)
        i, f, loss, grad = self._observe(p, hyp, x, y, u)
        delta_constant = stats.delta_constant
        if self.code_constant:  # the released script's a_t = exp(-y f) (see the config)
            delta_constant = np.asarray(math.exp(min(-y * f, 700.0)))
        a = float(delta_constant)
        c_tilde = loss / p[i]
        loss_sum = stats.loss_sum
        loss_sum[i] += c_tilde
        total = float(np.cumsum(loss_sum)[-1])
        lam = (U ** (4.0 / 3.0) * max(a**3, 8.0 * total) ** (-1.0 / 6.0)) / (
            math.sqrt(4.0 / 3.0) * K ** (1.0 / 6.0) * gc0 ** (1.0 / 3.0) * math.sqrt(1.0 + loss_sum[i])
        )
        sq_loss_sum = np.asarray(float(stats.sq_loss_sum) + q[i] * c_tilde * c_tilde)
        if grad != 0.0:
            hyp.step(i, x, f, -lam * grad / p[i], U)
        return f, i, OKSPlusPlusStats(loss_sum=loss_sum, sq_loss_sum=sq_loss_sum, delta_constant=delta_constant)


    def _compiled_constants(self) -> tuple[float, float, float, float]:
        """The compiled folds' ``(sqrt(2 ln K), U^(4/3), sqrt(4/3) K^(1/6) (G C0)^(1/3), U)``
        (the factors of :meth:`step`'s ``eta`` and ``lambda``)."""
        K, U = self.K, self.radius
        return math.sqrt(2.0 * math.log(K)), U ** (4.0 / 3.0), math.sqrt(4.0 / 3.0) * K ** (1.0 / 6.0) * (self.g * self.c0) ** (1.0 / 3.0), U

    def compiled_fold(self, jit, fold: _FoldArgs, stats: OKSPlusPlusStats) -> tuple[int, int]:
        """:meth:`step` over a feature block in compiled code (``_jit_folds.fold_rf_oks_pp``)."""
        return jit.fold_rf_oks_pp(
            *fold[:6], stats.loss_sum, stats.sq_loss_sum.reshape(1), stats.delta_constant.reshape(1), *fold[6:8],
            LOSS_CODES[self.loss], self.code_constant, *self._compiled_constants(), fold.clip,
        )

    def support_fold(self, jit, fold: _SupportFoldArgs, stats: OKSPlusPlusStats) -> tuple[int, int]:
        """:meth:`step` over rows on support sets in compiled code (``_jit_folds.fold_oks_pp``)."""
        return jit.fold_oks_pp(
            *fold, stats.loss_sum, stats.sq_loss_sum.reshape(1), stats.delta_constant.reshape(1), LOSS_CODES[self.loss],
            self.code_constant, *self._compiled_constants(),
        )


class IOKSRule(SelectionRule[IOKSStats]):
    """IOKS (Algorithm 2; Algorithm 4 for the random-feature version)."""

    stats_class = IOKSStats

    def __init__(self, config: IOKSConfig | RFIOKSConfig, n_kernels: int):
        super().__init__(config, n_kernels)
        K, T, U = n_kernels, config.horizon, config.radius
        self.delta = T**-0.75
        self.upsilon = math.exp(2.0 / (3.0 * math.log(T)))
        self.eta0 = 8.0 * config.loss_max * K ** (3.0 / 8.0) / (U * _LIPSCHITZ[config.loss] * math.sqrt(T * math.log(T)))
        self.radius = U
        self.loss_max = config.loss_max
        self.loss_ceiling = config.loss_ceiling

    def init(self) -> IOKSStats:
        K = self.K
        return IOKSStats(q=np.full(K, 1.0 / K), eta=np.full(K, self.eta0), rho=np.full(K, 2.0 * K), grad_sq_sum=np.zeros(K))

    def _p(self, q: np.ndarray) -> np.ndarray:
        return (1.0 - self.delta) * q + self.delta / self.K

    def distribution(self, stats: IOKSStats) -> tuple[np.ndarray, np.ndarray]:
        return stats.q, self._p(stats.q)

    def step(self, stats: IOKSStats, hyp: Hypotheses, x: np.ndarray, y: float, u: float) -> tuple[float, int, IOKSStats]:
        q, eta, U = stats.q, stats.eta, self.radius
        p = self._p(q)
        i, f, loss, grad = self._observe(p, hyp, x, y, u)
        grad_sq_sum = stats.grad_sq_sum
        g = grad / p[i]
        grad_sq_sum[i] += g * g * hyp.feature_sq_norm()
        if grad != 0.0:
            lam = U / (math.sqrt(2.0) * math.sqrt(1.0 + grad_sq_sum[i]))
            hyp.step(i, x, f, -lam * grad / p[i], U)
        c = min(loss / self.loss_max, self.loss_ceiling)
        max_eta = float(np.max(eta))
        c_tilde = np.zeros(self.K)
        c_tilde[i] = c / p[i] if p[i] >= max_eta else c / (p[i] + max_eta)
        q_next, _ = tsallis_step(q, eta, c_tilde)
        p_next = self._p(q_next)
        grow = 1.0 / p_next > stats.rho
        rho = np.where(grow, 2.0 / p_next, stats.rho)
        return f, i, IOKSStats(q=q_next, eta=np.where(grow, eta * self.upsilon, eta), rho=rho, grad_sq_sum=grad_sq_sum)

    def compiled_fold(self, jit, fold: _FoldArgs, stats: IOKSStats) -> tuple[int, int]:
        """:meth:`step` over a feature block in compiled code (``_jit_folds.fold_rf_ioks``)."""
        return jit.fold_rf_ioks(
            *fold[:6], stats.q, stats.eta, stats.rho, stats.grad_sq_sum, *fold[6:8], LOSS_CODES[self.loss],
            self.delta, self.upsilon, self.radius, self.loss_max, self.loss_ceiling, fold.clip, ALPHA,
        )

    def support_fold(self, jit, fold: _SupportFoldArgs, stats: IOKSStats) -> tuple[int, int]:
        """:meth:`step` over rows on support sets in compiled code (``_jit_folds.fold_ioks``)."""
        return jit.fold_ioks(
            *fold, stats.q, stats.eta, stats.rho, stats.grad_sq_sum, LOSS_CODES[self.loss], self.delta, self.upsilon,
            self.radius, self.loss_max, self.loss_ceiling, ALPHA,
        )


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

    def update(self, state: SelectionStateT, X: ArrayLike, y: ArrayLike) -> tuple[SelectionStateT, np.ndarray]:
        X, y = validate_xy(self, X, y)
        hyp = self.storage.working(state)
        stats, n_used, uniforms, scores = self._begin(state, len(y))
        for r in range(len(y)):
            scores[r], i, stats = self.rule.step(stats, hyp, X[r], float(y[r]), float(uniforms[r]))
            n_used[i] += 1
        return self._end(state, hyp.fields(), stats, n_used, len(y)), scores

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
        """The rows in compiled code when numba is there (the numpy fold's bytes): the fold
        appends to the sets' buffers in place and stops before a row whose drawn kernel's
        buffers are full, whose capacity this loop doubles before resuming."""
        jit = kernels()
        if jit is None:
            return super().update(state, X, y)
        X, y = validate_xy(self, X, y)
        storage = cast(SupportStorage, self.storage)
        sets = storage.working(state)
        stats, n_used, uniforms, scores = self._begin(state, len(y))
        X64 = X.astype(np.float64)  # exact: the sets' columns are float64
        counts = np.asarray([len(support) for support in sets.sets], dtype=np.int64)  # the fold advances them
        start = 0
        while start < len(y):
            fold = _SupportFoldArgs(X64, start, y, uniforms, storage.store(sets, counts), n_used, scores)
            start, need = self.rule.support_fold(jit, fold, stats)
            sets.filled(counts)
            if need == jit.SUPPORT_CAP:
                storage.cap.check(int(counts.sum()) + 1)  # raises the numpy fold's error
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
        jit = kernels()
        compiled = getattr(self.rule, "compiled_fold", None)
        if jit is None or compiled is None:
            return super().update(state, X, y)
        X, y = validate_xy(self, X, y)
        w = cast("RFOKSPlusPlusState | RFIOKSState", state).w.copy()
        stats, n_used, uniforms, scores = self._begin(state, len(y))

        def guess(start: int, stop: int) -> np.ndarray:
            # The kernels the rows would draw from the distribution at the block's start.
            _, p = self.rule.distribution(stats)
            cdf = np.cumsum(p)
            picks = np.minimum(np.searchsorted(cdf, uniforms[start:stop] * cdf[-1], side="right"), self.n_kernels - 1)
            need = np.zeros((stop - start, self.n_kernels), dtype=bool)
            need[np.arange(stop - start), picks] = True
            return need

        def run(start: int, Z: np.ndarray, have: np.ndarray, r: int) -> tuple[int, int]:
            part = slice(start, start + len(Z))
            return compiled(jit, _FoldArgs(Z, have, r, y[part], uniforms[part], w, n_used, scores[part], self.storage.clip), stats)

        if len(y):
            fold_on_demand(self.storage.bank, self.storage.bank.stack(), X, guess, run)
        return self._end(state, {"w": w}, stats, n_used, len(y)), scores


class OKS(_SupportSelection[OKSState]):
    """OKS, the baseline of online kernel selection under bandit feedback (``oks``); kernel
    version. Needs the horizon ``T`` (``horizon``; pipelines take it from the data set's row count).
    Its fold is compiled (``_jit_folds.fold_oks``)."""

    name = "oks"
    config_class = OKSConfig
    state_class = OKSState
    rule_class = OKSRule
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2", "horizon": 2000}


class OKSPlusPlus(_SupportSelection[OKSPlusPlusState]):
    """OKS++ for smooth losses (``oks_pp``): data-dependent step, exploration and weights; kernel version.
    Its fold is compiled (``_jit_folds.fold_oks_pp``)."""

    name = "oks_pp"
    config_class = OKSPlusPlusConfig
    state_class = OKSPlusPlusState
    rule_class = OKSPlusPlusRule
    conformance_params = {"kernels": "gaussian:0.5,gaussian:2"}


class IOKS(_SupportSelection[IOKSState]):
    """IOKS for Lipschitz losses (``ioks``): Tsallis mirror step, increasing rates; kernel version.
    Needs ``horizon`` (as :class:`OKS`). Its fold is compiled (``_jit_folds.fold_ioks``)."""

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
