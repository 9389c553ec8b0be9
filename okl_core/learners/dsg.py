"""Doubly stochastic functional gradients (Dai et al., NeurIPS 2014; spec/dsg.md).

Iteration ``i`` (1-based) takes a mini-batch of ``batch_size`` rows and a block of
``block_size`` random features regenerated from ``(seed, i - 1)``::

    u_b  = sum_{j<i} A_j^T phi_j(x_b)                          (prediction, all past blocks)
    A_i  = -gamma_i (1/B) sum_b phi_i(x_b) l'(u_b, y_b)^T       (new block coefficients)
    A_j *= (1 - gamma_i nu)  for j < i                         (decay, lazily via a scale)
    gamma_i = theta / (step_offset + i)

``phi_j(x) = [cos(Omega_j^T x), sin(Omega_j^T x)] / sqrt(m)`` with ``m = block_size / 2``
frequencies, so each block alone approximates the kernel. The model is the seed and the
coefficients; no frequency and no example is stored.

The learner is defined on mini-batches (``minibatch_defined``): ``update`` cuts its batch
into consecutive chunks of ``batch_size`` rows, and a final shorter chunk is one shorter
mini-batch. Pass batches whose length is a multiple of ``batch_size`` to keep every
mini-batch full.

When ``1 - gamma_i nu`` is exactly 0 the past is erased (coefficients zeroed, scale reset);
the lazy scale is renormalised before it underflows. With ``averaged=True`` the state also
carries the averaged iterate ``(1/t) sum_s f_s``, which ``predict`` then uses (the online
predictions made during training always come from the current iterate).

Merge and mix work on the true coefficients ``scale * coef`` (and the averaged iterate),
block by block, the shorter history padded with zero blocks: a merge is the weighted
average of the shards' functions, ``mix(local, merged, w)`` is exactly
``(1 - w) f_local + w f_merged``; both give scale 1 and the longer history's ``t``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from okl_core.features import FeatureSpec, FourierFeatures
from okl_core.learners.base import CheckedConfig, Learner, validate_xy, weighted_average
from okl_core.losses import make_loss

__all__ = ["DSGConfig", "DSGState", "DSG"]

_RENORMALISE_BELOW = 1e-100
_PREDICT_CHUNK_FLOATS = 8 * 2**20  # rows x frequencies per prediction chunk (32 MiB)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DSGConfig(CheckedConfig):
    """Parameters of :class:`DSG`.

    Parameters
    ----------
    n_inputs : int
        Input dimension.
    loss : str
        One of :func:`okl_core.losses.loss_names`; sets the task (hinge, squared_hinge,
        logistic: binary; softmax: multiclass; square, absolute, huber, eps_insensitive,
        quantile: regression).
    loss_param : float or None
        Huber threshold, eps width or quantile tau (None: the loss's default).
    n_classes : int or None
        Classes for the softmax loss (required there, ignored otherwise).
    kernel, sigma, seed : see :class:`~okl_core.features.FeatureSpec`. ``sigma``'s default
        is the median heuristic on the data (``"median"``, :mod:`okl_core.derived`), the
        paper's choice on Adult, Forest and MNIST-8M 8 vs 6; 1 when no data is given.
    block_size : int
        Features per block ``r`` (even; ``r / 2`` frequencies, cos and sin).
    batch_size : int
        Examples per iteration ``B``.
    theta : float
        Step scale: ``gamma_i = theta / (step_offset + i)``.
    step_offset : float
        ``0`` gives the paper's ``theta / i``; the authors' MNIST-8M code uses
        ``theta = step_offset = 1e4`` (``gamma_i = 1 / (1 + 1e-4 i)``). The default,
        ``theta = 1e4, step_offset = 3000`` (``gamma_i`` about 3.3, decaying as ``1 / i``
        after 3,000 iterations), is what tuning on a9a's online error chose: the paper's
        ``theta / i`` with ``theta = 1`` (``theta=1, step_offset=0``) shrinks the steps from
        the first iterations, and one pass over a9a then labels every test row -1.
    nu : float
        Regularization (>= 0).
    averaged : bool
        Keep and predict with the averaged iterate.
    precondition : bool
        Multiply each new block by ``(C_hat + precondition_eps I)^{-1}`` with
        ``C_hat = (1/B) sum_b phi_i(x_b) phi_i(x_b)^T`` (the paper's optional
        preconditioning; off by default, as in Algorithm 1).
    precondition_eps : float
        Ridge of the preconditioner (authors' code: 1e-7).
    precision : {"float32", "float64"}
        Arithmetic of the feature evaluation in predictions (the paper does not fix it).
        ``"float32"`` (default): ``cos``/``sin`` of the float32 projection in float32 and
        the product with the true coefficients (rounded to float32) in float32, about
        2.5x faster at 2^16 features (bench/bench_dsg.py). ``"float64"``: features
        widened to float64 and a float64 product, the arithmetic of okl 0.1 (model
        files written before this option load with it, and predict as they did).
        Coefficients are kept in float64 either way.
    feature_cache_mb : int
        Memory bound for cached frequency blocks (not part of the model).
    """

    n_inputs: int
    loss: str = "hinge"
    loss_param: float | None = None
    n_classes: int | None = None
    kernel: str = "gaussian"
    sigma: float = 1.0
    seed: int = 0
    block_size: int = 32
    batch_size: int = 64
    theta: float = 1e4
    step_offset: float = 3000.0
    nu: float = 1e-6
    averaged: bool = False
    precondition: bool = False
    precondition_eps: float = 1e-7
    precision: str = "float32"
    feature_cache_mb: int = 256

    data_defaults: ClassVar[dict] = {"sigma": "median"}

    def __post_init__(self):
        super().__post_init__()
        # loss_param's valid values depend on the loss (a Described declaration): the loss checks it
        make_loss(self.loss, self.loss_param)

    @property
    def task(self) -> str:
        """The loss's task."""
        return make_loss(self.loss).task

    @property
    def n_outputs(self) -> int:
        """Coefficient columns: ``n_classes`` for softmax, else 1."""
        return self.n_classes if self.task == "multiclass" and self.n_classes is not None else 1

    def feature_spec(self) -> FeatureSpec:
        """Spec of the (unbounded) sequence of frequency blocks, one block per iteration."""
        return FeatureSpec(
            n_inputs=self.n_inputs,
            n_components=self.block_size // 2,
            kernel=self.kernel,
            sigma=self.sigma,
            seed=self.seed,
            block_size=self.block_size // 2,
            scaled=True,
        )


class DSGState(NamedTuple):
    """DSG state; true coefficients of block j are ``scale * coef[j]``.

    Attributes
    ----------
    coef : (t, block_size, n_outputs) float64
    scale : () float64, the lazy decay factor
    avg_coef : (t, block_size, n_outputs) float64 averaged iterate (empty unless averaged)
    t : () int64, iterations (blocks) done
    n_seen : () int64, examples learned
    """

    coef: np.ndarray
    scale: np.ndarray
    avg_coef: np.ndarray
    t: np.ndarray
    n_seen: np.ndarray


class DSG(Learner[DSGState]):
    """Doubly stochastic gradient descent in an RKHS (registry name ``dsg``)."""

    name = "dsg"
    config_class = DSGConfig
    state_class = DSGState
    minibatch_defined = True
    growing_fields = ("coef", "avg_coef")
    runtime_fields = ("feature_cache_mb",)
    legacy_config = {"precision": "float64", "step_offset": 0.0}  # files from before the options: okl 0.1's arithmetic, the paper's theta / i
    conformance_params = {"block_size": 32, "batch_size": 8, "theta": 50.0, "nu": 1e-4}
    mixable = True  # on the true coefficients (mix below), not the raw scaled arrays

    def __init__(self, config):
        super().__init__(config)
        self.loss = make_loss(config.loss, config.loss_param)
        self.features = FourierFeatures(config.feature_spec(), cache_bytes=config.feature_cache_mb * 2**20)
        self._m = config.block_size // 2

    def feature_spec(self):
        return self.features.spec

    def init(self) -> DSGState:
        r, c = self.config.block_size, self.config.n_outputs
        return DSGState(
            coef=np.zeros((0, r, c)),
            scale=np.asarray(1.0),
            avg_coef=np.zeros((0, r, c)),
            t=np.asarray(0, dtype=np.int64),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    # -- features -------------------------------------------------------------------
    def _block_features(self, X: np.ndarray, first: int, stop: int) -> np.ndarray:
        """phi_j(X) for blocks first..stop-1 as float64 ``(n, stop - first, r)``."""
        m = self._m
        proj = X @ self.features.frequencies(first * m, stop * m)  # (n, nb*m) float32
        nb = stop - first
        proj = proj.reshape(len(X), nb, m)
        phi = np.empty((len(X), nb, 2 * m), dtype=np.float64)
        phi[:, :, :m] = np.cos(proj)
        phi[:, :, m:] = np.sin(proj)
        phi *= 1.0 / math.sqrt(m)
        return phi

    def _scores(self, X: np.ndarray, coef: np.ndarray, scale: float) -> np.ndarray:
        """``sum_j (scale coef_j)^T phi_j(X)`` as ``(n, n_outputs)``, in bounded chunks of blocks."""
        n, t = len(X), coef.shape[0]
        out = np.zeros((n, coef.shape[2]))
        if t == 0 or n == 0:
            return out
        blocks_per_chunk = max(1, _PREDICT_CHUNK_FLOATS // (self._m * max(n, 1)))
        chunk_scores = self._chunk_scores_float64 if self.config.precision == "float64" else self._chunk_scores_float32
        for first in range(0, t, blocks_per_chunk):
            stop = min(t, first + blocks_per_chunk)
            out += chunk_scores(X, coef, scale, first, stop)
        return out if self.config.precision == "float32" else out * scale

    def _chunk_scores_float64(self, X: np.ndarray, coef: np.ndarray, scale: float, first: int, stop: int) -> np.ndarray:
        """Unscaled scores of blocks first..stop-1, features widened to float64 (okl 0.1)."""
        phi = self._block_features(X, first, stop).reshape(len(X), -1)
        return phi @ coef[first:stop].reshape(-1, coef.shape[2])

    def _chunk_scores_float32(self, X: np.ndarray, coef: np.ndarray, scale: float, first: int, stop: int) -> np.ndarray:
        """Scores of blocks first..stop-1 in float32: one GEMM, cos and sin, two thin products.

        The cos and sin halves are evaluated over the whole chunk in place (contiguous, so
        numpy's SIMD float32 loops apply) and meet the matching halves of the true
        coefficients, ``scale * coef`` (the lazily scaled raw values can exceed float32).
        """
        m, c = self._m, coef.shape[2]
        projection = X @ self.features.frequencies(first * m, stop * m)  # (n, blocks * m) float32
        true = coef[first:stop] * (scale / math.sqrt(m))
        cos_coef = true[:, :m, :].reshape(-1, c).astype(np.float32)
        sin_coef = true[:, m:, :].reshape(-1, c).astype(np.float32)
        scores = np.cos(projection) @ cos_coef
        scores += np.sin(projection, out=projection) @ sin_coef
        return scores

    def _output(self, scores: np.ndarray) -> np.ndarray:
        return scores if self.task == "multiclass" else scores[:, 0]

    # -- learning -------------------------------------------------------------------
    def predict(self, state: DSGState, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        if self.config.averaged:
            return self._output(self._scores(X, state.avg_coef, 1.0))
        return self._output(self._scores(X, state.coef, float(state.scale)))

    def update(self, state: DSGState, X: ArrayLike, y: ArrayLike) -> tuple[DSGState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        coef, scale, avg = state.coef, float(state.scale), state.avg_coef
        t, n_seen = int(state.t), int(state.n_seen)
        cfg = self.config
        outputs = []
        for start in range(0, len(y), cfg.batch_size):
            Xb, yb = X[start : start + cfg.batch_size], y[start : start + cfg.batch_size]
            u = self._scores(Xb, coef, scale)
            outputs.append(u)
            t += 1
            gamma = cfg.theta / (cfg.step_offset + t)
            grad = self.loss.grad(self._output(u), yb).reshape(len(yb), -1)  # (B, n_outputs)
            phi = self._block_features(Xb, t - 1, t)[:, 0, :]  # (B, r)
            new_block = -gamma / len(yb) * (phi.T @ grad)  # (r, n_outputs)
            if cfg.precondition:
                c_hat = phi.T @ phi / len(yb) + cfg.precondition_eps * np.eye(phi.shape[1])
                new_block = np.linalg.solve(c_hat, new_block)
            factor = 1.0 - gamma * cfg.nu
            if factor == 0.0:
                coef, scale = np.zeros_like(coef), 1.0
            else:
                scale *= factor
            if abs(scale) < _RENORMALISE_BELOW:
                coef, scale = coef * scale, 1.0
            coef = np.concatenate([coef, (new_block / scale)[None]])
            if cfg.averaged:
                padded = np.concatenate([avg, np.zeros_like(new_block)[None]])
                avg = padded * ((t - 1) / t) + (scale / t) * coef
            n_seen += len(yb)
        scores = np.concatenate(outputs) if outputs else np.zeros((0, cfg.n_outputs))
        new_state = DSGState(
            coef=coef,
            scale=np.asarray(scale),
            avg_coef=avg,
            t=np.asarray(t, dtype=np.int64),
            n_seen=np.asarray(n_seen, dtype=np.int64),
        )
        return new_state, self._output(scores)

    # -- merge and mix: on the true coefficients scale * coef ---------------------------
    def _true_blocks(self, states, field: str, t: int) -> list[np.ndarray]:
        """Each state's true coefficients of ``field`` (``scale * coef`` or ``avg_coef``), padded with zero blocks to ``t``."""

        def padded(a):
            return np.concatenate([a, np.zeros((t - a.shape[0],) + a.shape[1:])])

        if field == "coef":
            return [padded(s.coef * float(s.scale)) for s in states]
        return [padded(s.avg_coef) for s in states]

    def merge_special(self, states: Sequence[DSGState], weights: np.ndarray, base: DSGState | None) -> dict:
        """Block-wise weighted average of the true coefficients (``n_seen`` adds up by default).

        Shards use the same block at the same iteration index, so block ``j`` of every
        shard lives in the same feature space; shorter histories are padded with zeros.
        The merged scale is 1 and ``t`` the longest history.
        """
        t = max(int(s.t) for s in states)
        coef = weighted_average(self._true_blocks(states, "coef", t), weights)
        avg = weighted_average(self._true_blocks(states, "avg_coef", t), weights) if self.config.averaged else states[0].avg_coef
        return {"coef": coef, "scale": np.asarray(1.0), "avg_coef": avg, "t": np.asarray(t, dtype=np.int64)}

    def mix_special(self, local: DSGState, merged: DSGState, weight: float) -> dict:
        """``(1 - weight) local + weight merged`` on the true coefficients (exact in function space).

        The raw ``coef`` arrays carry each state's lazy scale, so they are rescaled first;
        the shorter history is padded with zero blocks, and the mixed state has scale 1 and
        ``t`` the longer history (block ``j`` is learned at iteration ``j``, so ``t`` must be
        the number of blocks). With ``averaged=True`` the averaged iterates mix alike.
        ``n_seen`` stays local (the default for counters).
        """
        pair = (local, merged)
        t = max(int(local.t), int(merged.t))
        a, b = self._true_blocks(pair, "coef", t)
        coef = (1.0 - weight) * a + weight * b
        if self.config.averaged:
            a, b = self._true_blocks(pair, "avg_coef", t)
            avg = (1.0 - weight) * a + weight * b
        else:
            avg = local.avg_coef
        return {"coef": coef, "scale": np.asarray(1.0), "avg_coef": avg, "t": np.asarray(t, dtype=np.int64)}
