"""What each learner parameter means and which values it takes, declared once.

Every field of every built-in learner's config dataclass has a declaration here: a
:class:`Parameter` holding the field's valid values (a constraint: :class:`Interval`,
:class:`Options`, :class:`Boolean` or :class:`Described`) and one line of meaning. A name
means one thing across learners (``sigma``, ``budget``, ``seed``, ...) unless a learner
declares its own reading of it (:data:`OVERRIDES`: ``eta`` is the Projectron's projection
bound, ``lam`` must be > 0 for the ridge learners). Constraints that tie two fields together
(``rank <= budget``) are :class:`Relation` objects (:data:`RELATIONS`).

Each constraint also checks a value (``refusal(name, value)``: None, or one line naming the
parameter and its valid values); :func:`okl_core.validation.validate_config` runs them for
every config (:class:`~okl_core.learners.base.CheckedConfig`), so the declarations below are
what the configs do. ``tests/okl_core/test_parameters.py`` proves, for every registered
learner, that each field is declared here and that the config refuses the values just
outside each declared range and accepts those at and inside it.
:func:`okl_core.catalog.describe_learner` joins them with the config's types and defaults
for ``okl learners NAME``, ``okl train --learner NAME --help`` and ``docs/learners.md``.

This module imports nothing of okl (it sits below the feature maps, kernels and learners).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "BANDWIDTH",
    "Boolean",
    "Described",
    "Interval",
    "NONNEGATIVE",
    "OVERRIDES",
    "Options",
    "PARAMETERS",
    "POSITIVE",
    "Parameter",
    "RELATIONS",
    "Relation",
    "SEEDS",
    "declaration",
    "relations",
]

_INF = math.inf


def _number(value: float) -> str:
    """``value`` as the range texts write it: ``inf``, ``2**64``, ``1e-30``, ``0.5``."""
    if value == 2**64:
        return "2**64"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclasses.dataclass(frozen=True)
class Interval:
    """Numbers between ``low`` and ``high`` (``None``: unbounded), each end open or closed.

    ``integer=True`` takes integers only (not bools, not floats such as ``2.0``), and
    ``multiple_of`` integers that are multiples of it. A float interval takes ints and
    floats, never bools nor NaN; an end at infinity is closed only where inf itself is a
    valid value (a bound that means "none"). ``note`` follows the range in a refusal
    (``a kernel bandwidth``); ``within``, a wider interval checked first, refuses the values
    of the wrong kind or sign with its own words (a bandwidth of 0 "must be a finite number > 0").
    """

    low: float | None = None
    high: float | None = None
    low_closed: bool = True
    high_closed: bool = True
    integer: bool = False
    multiple_of: int | None = None
    note: str = ""
    within: Interval | None = None

    def text(self) -> str:
        """The range as one short phrase: ``integer >= 1``, ``(0, 1]``, ``number > 0``."""
        kind = self._kind()
        if self.high is None or (self.high == _INF and not self.high_closed):
            if self.low is None:
                return kind
            return f"{kind} {'>=' if self.low_closed else '>'} {_number(self.low)}"
        if self.low is None:
            return f"{kind} {'<=' if self.high_closed else '<'} {_number(self.high)}"
        left, right = "[" if self.low_closed else "(", "]" if self.high_closed else ")"
        return f"{left}{_number(self.low)}, {_number(self.high)}{right}" + (" (integer)" if self.integer else "")

    def _kind(self) -> str:
        """``number``, ``integer``, ``even integer`` or ``integer multiple of m``."""
        if not self.integer:
            return "number"
        if self.multiple_of == 2:
            return "even integer"
        return f"integer multiple of {self.multiple_of}" if self.multiple_of else "integer"

    def refusal(self, name: str, value: Any) -> str | None:
        """None when ``value`` is in the interval, else why not: ``eta must be a finite number > 0, got 0``."""
        if self.within is not None and (outside := self.within.refusal(name, value)) is not None:
            return outside
        if self.integer:
            return self._integer_refusal(name, value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(number := float(value)):
            return self._refused(name, value)
        inside_low = self.low is None or (number >= self.low if self.low_closed else number > self.low)
        inside_high = self.high is None or (number <= self.high if self.high_closed else number < self.high)
        return None if inside_low and inside_high else self._refused(name, value)

    def _integer_refusal(self, name: str, value: Any) -> str | None:
        """:meth:`refusal` of an integer interval: the kind and lower end first, then the upper end."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return self._refused(name, value)
        number = int(value)
        if (self.low is not None and number < self.low) or (self.multiple_of and number % self.multiple_of):
            return self._refused(name, value)
        if self.high is not None and (number > self.high if self.high_closed else number >= self.high):
            return f"{name} must be {'<=' if self.high_closed else '<'} {_number(self.high)}, got {value!r}"
        return None

    def _refused(self, name: str, value: Any) -> str:
        """The one-line refusal: ``{name} must be <the range>[ (note)], got {value!r}``."""
        note = f" ({self.note})" if self.note else ""
        if self.integer:
            kind = self._kind()
            bound = f" >= {_number(self.low)}" if self.low is not None else ""
            return f"{name} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}{bound}{note}, got {value!r}"
        if self.low is not None and (self.high is None or self.high == _INF):
            finite = "" if self.high_closed and self.high == _INF else "finite "
            unbounded = " (inf: no bound)" if not finite else ""
            return f"{name} must be a {finite}number {'>=' if self.low_closed else '>'} {_number(self.low)}{unbounded}{note}, got {value!r}"
        return f"{name} must be a number in {self.text()}{note}, got {value!r}"

    def samples(self) -> tuple[list[Any], list[Any]]:
        """``(accepted, refused)``: the values at and just inside each end, and just outside it.

        With the wrong kinds of value refused too (a bool, a string, NaN; a float for an
        integer). What the declaration test feeds to every config.
        """
        accepted: list[Any] = []
        refused: list[Any] = [True, "1"]
        if self.integer:
            low = None if self.low is None else int(self.low) + (0 if self.low_closed else 1)
            if self.multiple_of and low is not None:
                low = -(-low // self.multiple_of) * self.multiple_of
            step = self.multiple_of or 1
            if low is not None:
                accepted += [low, low + step]
                refused += [low - step, float(low) + 0.5]
                if self.multiple_of:
                    refused.append(low + 1)
            if self.high is not None and self.high != _INF:
                high = int(self.high) - (0 if self.high_closed else 1)
                accepted.append(high)
                refused.append(high + 1)
            return accepted, refused
        refused.append(math.nan)
        if self.low is not None:
            edge = self.low if self.low_closed else math.nextafter(self.low, _INF)
            accepted.append(edge)
            refused.append(math.nextafter(self.low, -_INF) if self.low_closed else self.low)
        if self.high is not None:
            if self.high == _INF:
                (accepted if self.high_closed else refused).append(_INF)
            else:
                accepted.append(self.high if self.high_closed else math.nextafter(self.high, -_INF))
                refused.append(math.nextafter(self.high, _INF) if self.high_closed else self.high)
        return accepted, refused


@dataclasses.dataclass(frozen=True)
class Options:
    """One of a fixed set of values (strings)."""

    values: tuple[Any, ...]

    def text(self) -> str:
        """``one of a, b, c``."""
        return "one of " + ", ".join(map(str, self.values))

    def refusal(self, name: str, value: Any) -> str | None:
        """None for one of the options, else ``{name} must be one of ['a', 'b'], got {value!r}``."""
        if isinstance(value, str) and value in self.values:
            return None
        return f"{name} must be one of {sorted(self.values, key=str)}, got {value!r}"

    def samples(self) -> tuple[list[Any], list[Any]]:
        """``(accepted, refused)``: every option, and a value that is none of them."""
        return list(self.values), ["no_such_option", 1]


@dataclasses.dataclass(frozen=True)
class Boolean:
    """``True`` or ``False`` (not 0/1, not strings)."""

    def text(self) -> str:
        """``true or false``."""
        return "true or false"

    def refusal(self, name: str, value: Any) -> str | None:
        """None for a bool, else ``{name} must be true or false, got {value!r}``."""
        return None if isinstance(value, bool) else f"{name} must be true or false, got {value!r}"

    def samples(self) -> tuple[list[Any], list[Any]]:
        """``(accepted, refused)``."""
        return [True, False], [1, "true"]


@dataclasses.dataclass(frozen=True)
class Described:
    """A value whose valid form is a sentence (a format, or a rule that reads another field).

    ``accepted`` and ``refused`` are examples, each a mapping of parameter values (this
    field, and any other field the rule reads); the declaration test checks every one.
    """

    description: str
    accepted: tuple[Mapping[str, Any], ...]
    refused: tuple[Mapping[str, Any], ...]

    def text(self) -> str:
        """The description."""
        return self.description

    def refusal(self, name: str, value: Any) -> str | None:
        """Always None: the rule is a parser of the config's own (its ``__post_init__`` runs it)."""
        return None


Constraint = Interval | Options | Boolean | Described
"""Any of the constraint kinds."""


@dataclasses.dataclass(frozen=True)
class Parameter:
    """The declaration of one parameter: its valid values and one line of meaning.

    Attributes
    ----------
    constraint : Interval, Options, Boolean or Described
        The values the config accepts.
    meaning : str
        One line: what the parameter does (and where ``okl train`` takes it from).
    none_means : str or None
        For an optional field (``float | None``): what ``None`` stands for; None when the
        field takes no ``None``.
    """

    constraint: Constraint
    meaning: str
    none_means: str | None = None

    def range_text(self) -> str:
        """The valid values in words, with ``None`` when the field takes it."""
        text = self.constraint.text()
        return f"{text}, or None ({self.none_means})" if self.none_means else text


@dataclasses.dataclass(frozen=True)
class Relation:
    """A constraint between fields of one config (``rank <= budget``).

    Attributes
    ----------
    fields : tuple of str
        The fields it reads (each one's range text mentions it).
    text : str
        The rule in words.
    holds : callable
        ``holds(params) -> bool`` on a mapping of every field's value.
    violation : mapping
        Field values that break it (the declaration test checks the config refuses them).
    explain : callable or None
        ``explain(params) -> str``: the one-line refusal when it is broken; None: the rule's
        text with the values of its fields.
    """

    fields: tuple[str, ...]
    text: str
    holds: Callable[[Mapping[str, Any]], bool]
    violation: Mapping[str, Any]
    explain: Callable[[Mapping[str, Any]], str] | None = None

    def refusal(self, params: Mapping[str, Any]) -> str | None:
        """None when the relation holds for ``params`` (every field's value), else why not."""
        if self.holds(params):
            return None
        if self.explain is not None:
            return self.explain(params)
        return f"{self.text} is required, got " + ", ".join(f"{f} = {params[f]!r}" for f in self.fields)


def _int(low: int, high: float | None = None, *, high_closed: bool = True, multiple_of: int | None = None) -> Interval:
    return Interval(low, high, high_closed=high_closed, integer=True, multiple_of=multiple_of)


POSITIVE = _POSITIVE = Interval(0.0, _INF, low_closed=False, high_closed=False)
"""Finite numbers > 0."""
NONNEGATIVE = _NONNEGATIVE = Interval(0.0, _INF, high_closed=False)
"""Finite numbers >= 0."""
BANDWIDTH = _BANDWIDTH = Interval(1e-30, 1e30, note="a kernel bandwidth", within=POSITIVE)
"""Kernel bandwidths okl accepts: ``sigma**2`` and ``1 / sigma**2`` stay finite in float64, and
the random frequencies ``draws / sigma`` in float32 (outside it scores overflow to NaN)."""
SEEDS = _int(0, 2**64, high_closed=False)
"""Generator keys: integers in ``[0, 2**64)``."""
_KERNELS = Options(("gaussian", "laplacian", "cauchy"))

PARAMETERS: dict[str, Parameter] = {
    # inputs and outputs (okl train fills these from the data set)
    "n_inputs": Parameter(_int(1), "input dimension d (okl train: the data set's number of features)"),
    "n_classes": Parameter(_int(2), "number of classes C, labels 0..C-1 (okl train: from the data set)"),
    "task": Parameter(Options(("regression", "binary")), "regression targets, or labels -1/+1 learned as targets (the score's sign is the label)"),
    # kernels and random features
    "kernel": Parameter(_KERNELS, "kernel function"),
    "sigma": Parameter(_BANDWIDTH, "kernel bandwidth (okl train also takes `median` or `0.1*median`: derived from the data)"),
    "kernels": Parameter(
        Described(
            "comma-separated KERNEL:SIGMA entries (SIGMA a number or 2^K in [1e-30, 1e30], no entry twice)",
            accepted=({"kernels": "gaussian:1"}, {"kernels": "laplacian:2^-3, gaussian:0.5,cauchy:1e-30"}),
            refused=({"kernels": ""}, {"kernels": "gaussian"}, {"kernels": "cosine:1"}, {"kernels": "gaussian:0"},
                     {"kernels": "gaussian:1e31"}, {"kernels": "gaussian:1,gaussian:1"}, {"kernels": 1.0}),
        ),
        "the kernel dictionary the learner chooses among or combines",
    ),
    "seed": Parameter(SEEDS, "model seed: the random features and draws are regenerated from it"),
    "n_components": Parameter(_int(1), "random Fourier frequencies D (2 D features)"),
    "block_size": Parameter(_int(1), "frequencies per generator block (part of the feature map: changes the model)"),
    "scaled": Parameter(Boolean(), "features divided by sqrt(D) (kernel-approximating); false: FOGD's form, eta_scaled = D eta_unscaled"),
    "feature_cache_mb": Parameter(_int(0), "memory bound for cached frequency blocks, in MiB"),
    # steps and update rules
    "eta": Parameter(_POSITIVE, "step size"),
    "step": Parameter(Options(("constant", "adagrad", "normalized")), "step rule: constant eta, AdaGrad per coordinate, or normalized (NAG)"),
    "eps": Parameter(_NONNEGATIVE, "regression threshold: no update while the error is within eps"),
    "threshold": Parameter(Options(("absolute", "squared")), "what eps bounds: |y - f| (the authors' code) or (y - f)^2 (the paper's text)"),
    "lam": Parameter(_NONNEGATIVE, "regularisation lambda"),
    "nu": Parameter(_NONNEGATIVE, "regularisation nu"),
    "C": Parameter(_POSITIVE, "PA-I aggressiveness: the largest step on one example"),
    "loss": Parameter(Options(("logistic", "square", "absolute")), "loss function (it sets the task: logistic binary, the others regression)"),
    # budgets and caps
    "budget": Parameter(_int(1), "support vectors held at most (B)"),
    "max_support": Parameter(_int(1), "cap on the support vectors (all kernels together); an update past it stops with an error naming it"),
    # NOGD
    "rank": Parameter(_int(1), "eigenpairs kept k in the linear phase"),
    "switch": Parameter(Options(("immediate", "next_update")), "when the kernel phase turns into the linear one once the budget is full"),
    "eig_rtol": Parameter(Interval(0.0, 1.0, high_closed=False), "eigenpairs with lambda <= eig_rtol * lambda_max are dropped"),
    # budget baselines
    "shrinking": Parameter(Boolean(), "the published self-tuned shrinking (false: the oldest vector is simply removed)"),
    "phi_root": Parameter(Options(("feasible", "code")), "shrinking coefficient phi: the feasible root (<= 1) or the authors' code's (can exceed 1)"),
    "margin": Parameter(Options(("class_score", "multiclass")), "the removed vector's margin: its class score (the authors' code) or the multiclass margin"),
    "margin_test": Parameter(Options(("eta", "code")), "Projectron++ margin updates: the published test on eta, or the FOGD authors' code's with U"),
    "projection_eta": Parameter(_POSITIVE, "the Projectron's bound on the squared distance of a projected vector to the support span"),
    "decay": Parameter(Options(("every_example", "on_update")), "when the decay 1 - eta lam applies: on every example or only on updates"),
    "gamma": Parameter(Interval(0.0, _INF, low_closed=False, high_closed=True), "after a removal the coefficients are scaled so the largest is at most eta gamma (inf: no bound)"),
    "removal": Parameter(Options(("random", "oldest")), "which vector a full budget drops: uniform at random, survivors rescaled (paper), or the oldest (authors' code)"),
    # DSG
    "loss_param": Parameter(
        Described(
            "huber: number > 0; eps_insensitive: number >= 0; quantile: (0, 1); the other losses take none",
            accepted=({"loss_param": None}, {"loss": "huber", "loss_param": 0.5}, {"loss": "eps_insensitive", "loss_param": 0.0},
                      {"loss": "eps_insensitive", "loss_param": 0.5}, {"loss": "quantile", "loss_param": 0.25}, {"loss": "huber", "loss_param": None}),
            refused=({"loss_param": 1.0}, {"loss": "huber", "loss_param": -0.5}, {"loss": "huber", "loss_param": 0.0}, {"loss": "huber", "loss_param": math.inf},
                     {"loss": "quantile", "loss_param": 1.0}, {"loss": "quantile", "loss_param": 0.0},
                     {"loss": "eps_insensitive", "loss_param": "0.1"}),
        ),
        "the loss's parameter: Huber threshold, eps width or quantile tau",
        none_means="the loss's default: 1, 0.1, 0.5",
    ),
    "batch_size": Parameter(_int(1), "examples per iteration (the mini-batch B)"),
    "theta": Parameter(_POSITIVE, "step scale: gamma_i = theta / (step_offset + i)"),
    "step_offset": Parameter(_NONNEGATIVE, "step offset: 0 gives the paper's theta / i"),
    "averaged": Parameter(Boolean(), "keep and predict with the averaged iterate"),
    "precondition": Parameter(Boolean(), "precondition each new block with (C_hat + precondition_eps I)^-1"),
    "precondition_eps": Parameter(_POSITIVE, "ridge of the preconditioner"),
    "precision": Parameter(Options(("float32", "float64")), "arithmetic of the feature evaluation in predictions"),
    # kernel ridge / PKAWV
    "ordering": Parameter(Options(("awv", "krr")), "how the new row is predicted: Azoury-Warmuth-Vovk (its features join the regulariser first) or online kernel ridge"),
    "block_rows": Parameter(_int(1), "rows learned per block (changes only rounding)"),
    "max_rows": Parameter(_int(1), "the most examples the exact state may hold; a longer stream is refused before it starts"),
    "degree": Parameter(_int(0), "total degree M of the Taylor basis: r = C(M + d, M) functions"),
    "refactor_every": Parameter(_int(1), "the inverse is recomputed from scratch every this many examples"),
    "max_basis": Parameter(_int(1), "refuse a Taylor basis larger than this (the state holds two r x r float64 matrices)"),
    "mu": Parameter(_POSITIVE, "KORS regularisation mu: larger gives a smaller dictionary"),
    "beta": Parameter(_POSITIVE, "KORS oversampling beta: inclusion probability min(1, beta tau)"),
    "kors_eps": Parameter(_POSITIVE, "KORS accuracy eps"),
    "max_dictionary": Parameter(_int(1), "cap on the KORS dictionary size; exceeding it stops with an error"),
    "max_state_mb": Parameter(_POSITIVE, "cap on the state's memory in MiB; exceeding it stops with an error"),
    # multi-kernel learners
    "schedule": Parameter(Options(("inv_sqrt_t", "constant")), "step schedule: eta / sqrt(t) (the paper's) or eta"),
    "draws_per_node": Parameter(_int(1), "M: kernels drawn (with replacement) for each selective node"),
    "selective_nodes": Parameter(_int(1), "J: selective nodes of the feedback graph"),
    "eta_e": Parameter(Interval(0.0, 1.0, low_closed=False), "exploration rate, following schedule like eta"),
    "freeze_below": Parameter(_NONNEGATIVE, "stop regenerating the graph once the loss of freeze_on is below it (0: never)"),
    "freeze_on": Parameter(Options(("mse", "example")), "the loss the freeze rule reads: the running MSE or one example's squared error"),
    "frozen_q": Parameter(Options(("conditional", "marginal")), "observation probability used while the graph is frozen"),
    "norm_bound": Parameter(_POSITIVE, "U, the radius of the hypothesis balls", none_means="the experiments' value: 15 for logistic, 1 otherwise"),
    "predict_with": Parameter(Options(("best", "mixture")), "how predict combines the kernels: the most probable one, or the mixture"),
    "horizon": Parameter(_int(1), "T, the number of rounds the constants are tuned for (okl train: the data set's rows)"),
    "step_scale": Parameter(_POSITIVE, "m in lambda = m sqrt(delta / (K T))", none_means="25 for square and logistic, 5 for absolute"),
    "loss_max": Parameter(_POSITIVE, "l_max: losses are scaled to min(l / l_max, 1)"),
    "loss_cap": Parameter(Boolean(), "cap the scaled loss at 1, c = min(l / l_max, 1) (false: c = l / l_max, as the paper writes it)"),
    "tuning": Parameter(Options(("paper", "released_code")), "OKS++ constants: Theorem 3.1, or the authors' released logistic script"),
}
"""Every parameter name's declaration, as most learners read it (:data:`OVERRIDES`: the exceptions)."""

_BUDGET_SEED = "seed of the random removals (keyed with the example index)"
_PROJECTRONS = ("projectron", "projectron_pp", "mprojectron", "mprojectron_pp")
_BOGDS = ("bogd", "mbogd", "bogd_r")
_NOGDS = ("nogd", "mnogd", "nogd_r")
_MULTI_KERNEL = ("oks", "oks_pp", "ioks", "rf_oks_pp", "rf_ioks", "omkl_gf", "raker")
_RIDGES = ("kernel_awv", "krr", "pkawv_taylor", "pkawv_nystrom")
_DSG_LOSSES = ("absolute", "eps_insensitive", "hinge", "huber", "logistic", "quantile", "softmax", "square", "squared_hinge")


def _for(names: Iterable[str], **declarations: Parameter) -> dict[str, dict[str, Parameter]]:
    return {name: dict(declarations) for name in names}


def _merged(*groups: dict[str, dict[str, Parameter]]) -> dict[str, dict[str, Parameter]]:
    out: dict[str, dict[str, Parameter]] = {}
    for group in groups:
        for name, declarations in group.items():
            out.setdefault(name, {}).update(declarations)
    return out


OVERRIDES: dict[str, dict[str, Parameter]] = _merged(
    _for(_PROJECTRONS, eta=Parameter(_POSITIVE, "bound on the squared distance of a projected vector to the support span (the projection threshold)")),
    _for(_BOGDS, budget=Parameter(_int(2), "support vectors held at most (B >= 2: survivors are rescaled by B / (B - 1))"),
         lam=Parameter(_NONNEGATIVE, "regulariser: coefficients decay by 1 - eta lam")),
    _for(("rbp", "mrbp", "rbp_r", "bogd", "mbogd", "bogd_r"), seed=Parameter(SEEDS, _BUDGET_SEED)),
    _for(_NOGDS, budget=Parameter(_int(1), "landmarks B: the kernel phase's support vectors")),
    _for(("norma_r",), budget=Parameter(_int(1), "truncation: only the newest B support vectors are kept"),
         lam=Parameter(_NONNEGATIVE, "regulariser: coefficients decay by 1 - eta lam"),
         nu=Parameter(Interval(0.0, 1.0, low_closed=False), "fraction of examples that end up updating (adapts eps)"),
         eps=Parameter(_NONNEGATIVE, "initial width of the eps-insensitive threshold (adapted with nu)")),
    _for(("dsg",),
         loss=Parameter(Options(_DSG_LOSSES), "loss function; it sets the task (hinge, squared_hinge, logistic: binary; softmax: multiclass; the others: regression)"),
         n_classes=Parameter(_int(2), "classes of the softmax loss (okl train: from the data set)", none_means="not a softmax learner"),
         block_size=Parameter(_int(2, multiple_of=2), "features per iteration block r (r / 2 frequencies, cos and sin)"),
         nu=Parameter(_NONNEGATIVE, "regularisation nu")),
    _for(_RIDGES, lam=Parameter(_POSITIVE, "ridge parameter lambda")),
    _for(("pkawv_nystrom",), seed=Parameter(SEEDS, "seed of the dictionary's inclusion draws"),
         block_rows=Parameter(_int(1), "rows learned per block while the dictionary does not change (changes only rounding)")),
    _for(_MULTI_KERNEL, seed=Parameter(SEEDS, "model seed: per-example draws and every kernel's random features derive from it"),
         n_components=Parameter(_int(1), "random Fourier frequencies D per kernel")),
    _for(("omkl_gf", "raker"), eta=Parameter(_POSITIVE, "step size scale, for the coefficients and the kernel weights"),
         lam=Parameter(_NONNEGATIVE, "ridge coefficient lambda of the per-kernel loss")),
    _for(("oks_pp", "rf_oks_pp"), loss=Parameter(Options(("logistic", "square")), "loss function (logistic: binary; square: regression)")),
    _for(("ioks", "rf_ioks"), horizon=Parameter(_int(2), "T, the number of rounds the constants are tuned for (>= 2: ln T > 0; okl train: the data set's rows)")),
)
"""Learner name -> the parameters that learner reads its own way."""


def _rank_within_budget(p: Mapping[str, Any]) -> bool:
    return p["rank"] <= p["budget"]


def _decay_below_one(p: Mapping[str, Any]) -> bool:
    return p["eta"] * p["lam"] < 1


def _softmax_has_classes(p: Mapping[str, Any]) -> bool:
    return p["loss"] != "softmax" or p["n_classes"] is not None


def _taylor_basis_fits(p: Mapping[str, Any]) -> bool:
    return math.comb(p["degree"] + p["n_inputs"], p["degree"]) <= p["max_basis"]


def _rank_refusal(p: Mapping[str, Any]) -> str:
    return f"rank must be <= budget ({p['budget']}), got {p['rank']}"


def _decay_refusal(p: Mapping[str, Any]) -> str:
    return f"eta * lam must be < 1 (the decay factor is 1 - eta lam), got {p['eta'] * p['lam']!r}"


def _softmax_refusal(p: Mapping[str, Any]) -> str:
    return f"n_classes must be an integer >= 2 with loss softmax, got {p['n_classes']!r}"


def _taylor_refusal(p: Mapping[str, Any]) -> str:
    degree, n_inputs = p["degree"], p["n_inputs"]
    r = math.comb(degree + n_inputs, degree)
    return (f"the Taylor basis has r = C(degree + n_inputs, degree) = C({degree} + {n_inputs}, {degree}) = {r} functions, "
            f"over max_basis = {p['max_basis']} (the state would hold two r x r float64 matrices, {2 * 8 * r * r / 2**30:.1f} GiB); "
            "lower degree or reduce the input dimension")


_RANK = Relation(("rank", "budget"), "rank <= budget", _rank_within_budget, {"rank": 5, "budget": 4}, _rank_refusal)
_DECAY = Relation(("eta", "lam"), "eta * lam < 1", _decay_below_one, {"eta": 2.0, "lam": 0.5}, _decay_refusal)

RELATIONS: dict[str, tuple[Relation, ...]] = {
    **{name: (_RANK,) for name in _NOGDS},
    **{name: (_DECAY,) for name in (*_BOGDS, "norma_r")},
    "dsg": (Relation(("n_classes", "loss"), "n_classes required with loss softmax", _softmax_has_classes, {"loss": "softmax", "n_classes": None},
                     _softmax_refusal),),
    "pkawv_taylor": (Relation(("degree", "n_inputs", "max_basis"), "C(degree + n_inputs, degree) <= max_basis", _taylor_basis_fits,
                              {"degree": 3, "n_inputs": 20, "max_basis": 1000}, _taylor_refusal),),
}
"""Learner name -> the constraints between its fields."""


def declaration(learner: str, name: str) -> Parameter | None:
    """The declaration of parameter ``name`` as learner ``learner`` reads it (None: undeclared)."""
    return OVERRIDES.get(learner, {}).get(name) or PARAMETERS.get(name)


def relations(learner: str, name: str | None = None) -> tuple[Relation, ...]:
    """The relations of ``learner`` (those that read field ``name``, when given)."""
    found: Sequence[Relation] = RELATIONS.get(learner, ())
    return tuple(r for r in found if name is None or name in r.fields)
