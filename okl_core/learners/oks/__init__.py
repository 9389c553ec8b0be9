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

Structure: each learner (:mod:`.learners`) is a selection rule (:mod:`.rules`:
:class:`OKSRule`, :class:`OKSPlusPlusRule`, :class:`IOKSRule`) on a storage
(:mod:`.storage`: :class:`SupportStorage`, growing support sets; :class:`FeatureStorage`,
random-feature weights), configured by :mod:`.config`. A state is the storage's fields, the
rule's statistics (:class:`OKSStats`, :class:`OKSPlusPlusStats`, :class:`IOKSStats`),
``n_used`` and ``n_seen``. The per-example arithmetic is compiled (:mod:`._folds`, the one
implementation; ``tests/okl_core/reference/oks.py`` is the numpy fold it is tested against).

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
``_folds.fold_oks``, ``fold_oks_pp``, ``fold_ioks``, the rules' arithmetic shared with
the random-feature folds); a9a, 5,000 rows in batches of 1,000: 7-9 us per row
(bench/bench_folds.py; 59-97 for the numpy fold that is now the tests' reference), most
of it the drawn kernel's row.
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

from okl_core.learners.oks import config, learners
from okl_core.learners.oks.config import *  # noqa: F403  (config's and learners' __all__)
from okl_core.learners.oks.learners import *  # noqa: F403
from okl_core.learners.oks.rules import (
    IOKSRule,
    IOKSStats,
    OKSPlusPlusRule,
    OKSPlusPlusStats,
    OKSRule,
    OKSStats,
    SelectionRule,
    oks_pp_constant,
    oks_pp_distribution,
    tsallis_step,
)
from okl_core.learners.oks.storage import FeatureStorage, SupportStorage

__all__ = [
    *config.__all__,
    *learners.__all__,
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
