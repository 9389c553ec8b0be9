"""Budget online kernel learners: the FOGD/NOGD paper's baselines (Lu, Hoi et al. 2016, Sec. 7).

One module per algorithm (:mod:`.rbp`, :mod:`.forgetron`, :mod:`.projectron`, :mod:`.bpa_s`,
:mod:`.bogd`, :mod:`.norma`), one class per algorithm for every task its config gives; the
registry's per-task names (``mrbp``, ``rbp_r``, ...) are subclasses that only name their
config. :mod:`._support` holds the shared storage and base, :mod:`._folds` the compiled folds.

Every learner here keeps a kernel expansion ``f(x) = sum_i alpha_i k(x_i, x)`` over at most
``budget`` (``B``) support vectors and follows the papers' online protocol (predict, score,
then learn). They differ in when they update and in how they keep the budget:

=================  ==============================  ==================================================  =======
registry name      paper                           update / budget maintenance                         cost
=================  ==============================  ==================================================  =======
``rbp``            Cavallanti et al. 2007          Perceptron; when full, remove a uniformly random SV  O(B)
``forgetron``      Dekel, Shalev-Shwartz & Singer  Perceptron; when full, remove the oldest SV after    O(B)
                   2005/2008                       shrinking every coefficient by the self-tuned phi
``projectron``     Orabona, Keshet & Caputo 2009   Perceptron; project the new SV onto the span of the  O(B^2)
                                                   support set when close to it (or the set is full)
``projectron_pp``  idem (Projectron++)             as ``projectron``, plus projected updates on margin  O(B^2)
                                                   errors
``bpa_s``          Wang & Vucetic 2010             PA-I on the hinge loss; when full, remove the SV     O(B)
                                                   whose removal costs least, the new SV absorbing its
                                                   projection
``bogd``           Zhao, Wang, Wu, Jin & Hoi 2012  OGD on the regularised hinge loss; when full, remove O(B)
                                                   a uniformly random SV and rescale the rest by
                                                   B / (B - 1) (unbiased)
``norma_r``        Kivinen, Smola & Williamson     regularised OGD on the nu-adaptive eps-insensitive   O(B)
                   2004 (NORMA)                    loss; truncation: the oldest SV goes when full
=================  ==============================  ==================================================  =======

Multiclass versions (the same classes, by config): ``mrbp``, ``mforgetron``, ``mprojectron``, ``mprojectron_pp``,
``mbpa_s`` (O(B C)), ``mbogd``; regression: ``rbp_r``, ``forgetron_r``, ``projectron_r``,
``bogd_r``, ``norma_r``.

Multiclass (labels 0..C-1, coefficients ``(B, C)``, scores ``(C,)``) follows the
multi-prototype protocol of the FOGD paper (Sec. 5, after Crammer et al. 2006) and of its
authors' code: ``mrbp``, ``mforgetron`` and ``mprojectron`` use the multiclass Perceptron (on
a mistake, ``e_y - e_p`` with ``p`` the predicted class, first argmax); ``mprojectron_pp``
adds projected updates on margin errors of the pair ``(y, s)``, ``s`` the best wrong class;
``mbpa_s`` is PA-I on the multiclass hinge ``1 - (f_y - f_s)`` with step ``tau (e_y - e_s)``,
``tau = min(C, loss / 2)``; ``mbogd`` the multiclass hinge of NOGD/FOGD (``+eta`` at ``y``,
``-eta`` at ``s`` when ``f_y - f_s < 1``). Only two classes' coefficients change per update,
except BPA-S's removal, which folds a removed vector's whole coefficient vector into the new
one (O(B C), as the paper notes). The Forgetron's removed vector ``r`` (coefficient
``sigma (e_{y_r} - e_{p_r})``) has weight ``sigma`` and margin ``f'_{y_r}(x_r)`` (the authors'
code) or ``f'_{y_r}(x_r) - max_{j != y_r} f'_j(x_r)`` (``margin='multiclass'``).

Where the paper's numbers come from its authors' Matlab code (the LSOKL toolbox of
spec/fogd_nogd.md) rather than the published rules, the code's reading is an option:
``phi_root='code'`` (Forgetron), ``gamma`` and ``removal='oldest'`` (BOGD),
``margin_test='code'`` (Projectron++); see :func:`forgetron_shrink`, :class:`BOGD` and
:class:`ProjectronPlusPlus`. docs/papers.md gives the numbers.

Regression: ``norma_r``, and ``rbp_r`` / ``forgetron_r`` / ``projectron_r`` / ``bogd_r`` with
the FOGD-R rule of :class:`~okl_core.learners.rules.RegressionRule` (add ``x`` with
``eta (y - f)`` when ``|y - f| > eps``, or ``(y - f)^2 > eps`` with ``threshold='squared'``)
in place of the Perceptron / hinge step, each keeping its own budget maintenance; the paper
runs RBP, Forgetron, Projectron and BOGD on regression with "a learning rate of about 0.1"
and does not give their rules. The readings chosen for the two whose maintenance is defined
through the classification margin are at :class:`ForgetronRegressor` and
:class:`ProjectronRegressor`.

The cost column is the paper's Table 1 (per example, besides the O(B d) kernel row every
learner computes to predict); ``bench/bench_budget.py`` measures it against ``B``.

Conventions shared by all:

* A Perceptron mistake is ``sign(f) != y`` with ``sign(0) = +1``
  (:class:`~okl_core.learners.rules.PerceptronRule`, like ``kernel_perceptron``); the hinge
  loss fires when ``y f < 1`` (strict). ``k(x, x) = 1`` for every kernel of okl.
* "Full" means ``B`` support vectors: the next insertion first removes one, and the new
  vector takes the freed slot (slot order is not age; ``stamp`` records the index of the
  example each vector came from, which is what "oldest" means).
* Randomness (RBP's and BOGD's removal) is keyed by ``(seed, example index)``: example ``t``
  of the stream (``n_seen`` before the batch, plus its row) reads the uniform ``u`` of
  :func:`okl_core.random.row_uniforms` ``(seed, t)`` and removes slot ``floor(u B)``. Runs
  are bit-identical whatever the batching and on every runner.
* Each learner's per-row loop is its compiled fold (:mod:`okl_core.learners.budget._folds`,
  numba): kernel rows in a fixed summation order, scores by BLAS products, the updates
  elementwise. tests/okl_core/reference/budget.py transcribes the folds in numpy and the
  tests hold the two to the same bytes.
* States have fixed shapes (``B`` rows whatever the stream), so a model file has the same
  layout at every point.
* Merge: none (:class:`~okl_core.learners.base.NotMergeableError`). Averaging two budgeted
  expansions concatenates their support sets, which breaks the budget that defines the
  learner; each shard's choice of support vectors is its own. Train with one shard, or use
  ``fogd`` (which averages by seed).

Readings chosen where the papers leave room (each documented at its learner):

* Projectron's ``eta`` bounds the *squared* RKHS distance ``delta^2`` of the new vector to
  the span of the support set (Orabona's own code; a bound ``e`` on the distance is
  ``eta = e^2``). The Projectron has no hard budget in its paper (``eta`` bounds the set);
  here ``budget`` is a hard cap: once the set is full every update projects.
* The Forgetron follows the published self-tuned rule (``M`` counts the current mistake);
  ``shrinking=False`` removes the oldest vector without shrinking, the simpler removal the
  FOGD paper's related work describes; ``phi_root='code'`` is the authors' code, whose
  ``phi`` exceeds 1 when the removed vector's margin is above ``sigma / 2``. On a9a
  (20 permutations) the published rule makes 29.9% mistakes, no shrinking 27.2%, the code's
  root 28.0%: the paper's 27.8 +- 0.4% is the code's.
* BPA-S's removal minimises the PA-I objective over the candidate ``r``, which reduces to
  ``alpha_r^2 (1 - k(x_r, x)^2)`` (derivation at :class:`BPAS`).
* BOGD's regulariser decays the coefficients at every example (``decay='every_example'``,
  the gradient of ``lam/2 ||f||^2`` exists at every step) or only on updates
  (``'on_update'``). The authors' binary code bounds the coefficients after each removal
  (``gamma``: all scaled so the largest is at most ``eta gamma``; it uses ``gamma = 10``,
  ``lam = 1/n^2``); their multiclass code removes the *oldest* vector without rescaling
  (``removal='oldest'``, ``eta = 0.5``, ``lam = 1e-5``). Those settings give the paper's
  a9a and MNIST numbers; the unbiased random removal with ``lam`` tuned does better on a9a
  and worse on MNIST.
* NORMA's coefficient is ``eta sign(y - f)`` (the eps-insensitive loss), with the threshold
  ``eps`` adapted by the nu rule of the authors' code (spec/fogd_nogd.md); no offset ``b``.
"""

from __future__ import annotations

from okl_core.learners.budget import _support, bogd, bpa_s, forgetron, norma, projectron, rbp
from okl_core.learners.budget._support import *  # noqa: F403  (each module's __all__)
from okl_core.learners.budget.bogd import *  # noqa: F403
from okl_core.learners.budget.bpa_s import *  # noqa: F403
from okl_core.learners.budget.forgetron import *  # noqa: F403
from okl_core.learners.budget.norma import *  # noqa: F403
from okl_core.learners.budget.projectron import *  # noqa: F403
from okl_core.learners.budget.rbp import *  # noqa: F403

__all__ = [*_support.__all__, *rbp.__all__, *forgetron.__all__, *projectron.__all__, *bpa_s.__all__, *bogd.__all__,
           *norma.__all__]
