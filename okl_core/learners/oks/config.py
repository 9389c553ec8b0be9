"""Online kernel selection's configs: the loss, the hypothesis radius, each rule's constants.

The fields of :class:`OKSConfig`, :class:`OKSPlusPlusConfig`, :class:`IOKSConfig` and their
random-feature versions (:mod:`okl_core.learners.oks`), checked at construction against their
declarations in :mod:`okl_core.parameters` (no checks of their own), and the
per-loss constants of the experiments (spec/oks.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from okl_core.derived import scaled_dictionary
from okl_core.learners.base import CheckedConfig
from okl_core.learners.multikernel import OKS_DICTIONARY, MultiKernelConfig, RandomFeatureMultiKernelConfig
from okl_core.learners.support import SupportCapConfig

__all__ = ["OKSConfig", "OKSPlusPlusConfig", "IOKSConfig", "RFOKSPlusPlusConfig", "RFIOKSConfig", "LOSS_CODES"]

ALPHA = 8.0  # IOKS's Tsallis exponent (the paper's choice)
_TASKS = {"logistic": "binary", "square": "regression", "absolute": "regression"}
_NORM_BOUND = {"logistic": 15.0, "square": 1.0, "absolute": 1.0}  # U of the experiments
SMOOTHNESS = {"logistic": (1.0, 1.0), "square": (4.0, 1.0)}  # OKS++ (C0, G)
LIPSCHITZ = {"absolute": 1.0, "logistic": 1.0, "square": 4.0}  # IOKS G1
OKS_STEP_SCALE = {"logistic": 25.0, "square": 25.0, "absolute": 5.0}  # OKS m
LOSS_CODES = {"logistic": 0, "square": 1, "absolute": 2}  # the compiled folds' loss kinds (_folds.paper_loss)


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

