"""The learner protocol shared by every okl learner, and the base of their configs.

A learner is a small object built from a frozen config dataclass (JSON scalars only). It
holds no training data: everything learned lives in a *state*, a ``NamedTuple`` of numpy
arrays (scalars as 0-d arrays), always with an ``n_seen`` field counting the examples the
state has learned from. ``update`` never mutates its inputs, so an update is a function
that can be folded, and states can be saved without pickle and merged.

Scores, not labels: ``update`` and ``predict`` return decision values -- shape ``(n,)`` for
binary (label = sign, sign(0) = +1) and regression, ``(n, C)`` for multiclass (label =
first argmax). :meth:`Learner.to_labels` converts.

Merge and mix are learner operations too. ``merge(states, weights, base)`` combines states
trained on disjoint shards; ``mix(local, merged, weight)`` blends a merged model into one
shard's local state (streaming). Both have defaults written once here, driven by the
learner's declarations of what each state field is:

``averaged_fields``
    model parameters: merge = weighted average (weights normalised, summed in list order),
    mix = ``(1 - weight) local + weight merged``;
``counted_fields``
    integer counters (always ``n_seen``): merge = sum (a ``base`` counted once), mix = the
    local value (a shard's own examples, so later merges still weight shards by them);
``maximum_fields``
    monotone quantities (increasing rates): merge and mix = elementwise maximum;
``summed_fields``
    float statistics accumulated over the rows learned (AdaGrad's squared gradients, squared
    errors): merge = sum in list order (from a ``base``: the base once plus each state's
    increase over it), mix = the local value, as for the counters.

Any other field is the learner's: it overrides :meth:`Learner.merge_special` /
:meth:`Learner.mix_special` (or :meth:`Learner.merge` / :meth:`Learner.mix` as a whole where
the math differs: DSG's lazy scale, exact sums, support sets). A learner mixes only if it
declares ``mixable = True``; :func:`okl_core.merge.check_mixable` refuses the others.

Every subclass's ``init``, ``update``, ``predict``, ``merge`` and ``mix`` run with one BLAS
thread (:mod:`okl_core.numerics`), so a state's bytes do not depend on the BLAS thread count
of the process that computed it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike

from okl_core.labels import TASKS, bad_labels, label_reason, label_rule
from okl_core.numerics import pinned
from okl_core.parameters import declaration, relations
from okl_core.validation import (  # re-exported: the learner families import them from here
    check_bandwidth,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_nonnegative,
    check_positive,
    check_seed,
    plain_scalars,
    validate_config,
)

if TYPE_CHECKING:
    from okl_core.features import FeatureSpec

__all__ = [
    "CheckedConfig",
    "Learner",
    "NotMergeableError",
    "RandomFeatureConfig",
    "State",
    "StateT",
    "TASKS",
    "check_int",
    "check_positive",
    "check_seed",
    "check_bandwidth",
    "plain_scalars",
    "check_nonnegative",
    "check_choice",
    "check_bool",
    "check_fraction",
    "validate_xy",
    "labels_from_scores",
    "mixing_weight",
    "weighted_average",
    "LEARNER_API",
    "SUBCLASS_API",
]

LEARNER_API = (
    "name", "task", "config", "config_class", "state_class", "init", "update", "predict", "to_labels", "merge", "mix",
    "feature_spec", "describe", "from_params", "check_state", "check_stream", "merge_semantics", "mixable",
    "mix_refusal_reason", "minibatch_defined",
)
"""The public surface of every learner object: what a user of a learner calls or reads."""

SUBCLASS_API = (
    "averaged_fields", "counted_fields", "maximum_fields", "summed_fields", "growing_fields", "runtime_fields",
    "legacy_config", "conformance_params", "mix_refusal", "merge_special", "mix_special", "merge_weights",
    "state_layout",
)
"""What a learner of one's own declares or overrides (and :mod:`okl_core.merge` calls); every
other name of :class:`Learner` is private. A family's own helpers on its learner objects
(update rules, feature maps, kernel reports such as ``kernel_weights``) are its business."""


class State(Protocol):
    """What every learner state is: a ``NamedTuple`` of numpy arrays with an ``n_seen`` field."""

    @property
    def n_seen(self) -> np.ndarray: ...

    def _asdict(self) -> dict[str, Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


StateT = TypeVar("StateT", bound=State)
"""A learner's state type (a :class:`State`)."""


class NotMergeableError(ValueError):
    """The states cannot be combined into one model (the learner or the specs forbid it)."""


_NUMBERS = (int, float, np.integer, np.floating)
"""What a mixing weight may be (numpy scalars too; a bool is refused before)."""


def mixing_weight(weight: Any) -> float:
    """``weight`` as a float; ValueError unless it is a number in [0, 1] (not a bool; a 0-d array is its number)."""
    if isinstance(weight, np.ndarray) and weight.ndim == 0:
        weight = weight[()]
    if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, _NUMBERS) or not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"mixing weight must be a number in [0, 1], got {weight!r}")
    return float(weight)


def labels_from_scores(task: str, scores: np.ndarray) -> np.ndarray:
    """Turn decision values into labels: sign (0 -> +1), first argmax, or the value itself."""
    scores = np.asarray(scores)
    if task == "binary":
        return np.where(scores >= 0, 1, -1).astype(np.int32)
    if task == "multiclass":
        return np.argmax(scores, axis=1).astype(np.int32)
    return scores


@overload
def validate_xy(learner: Learner[Any], X: ArrayLike) -> tuple[np.ndarray, None]: ...


@overload
def validate_xy(learner: Learner[Any], X: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]: ...


def validate_xy(learner: Learner[Any], X: ArrayLike, y: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Check shapes and labels of a batch for ``learner``; return float32 X and typed y.

    Raises
    ------
    ValueError
        Wrong dimensions, non-finite values, length mismatch, or labels outside the task's
        set (binary: -1/+1; multiclass: 0..n_classes-1; regression: finite), by the test
        the dead-letter path uses too (:mod:`okl_core.labels`).
    """
    given = X
    X = _float32_rows(learner, X)
    d = learner.config.n_inputs
    if X.ndim != 2 or X.shape[1] != d:
        raise ValueError(f"{learner.name}: expected X of shape (n, {d}), got {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{learner.name}: X contains NaN or inf{_beyond_float32(X, given)}")
    if y is None:
        return X, None
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"{learner.name}: y must have shape ({X.shape[0]},), got {y.shape}")
    if y.dtype.kind not in "biuf":
        raise ValueError(f"{learner.name}: labels must be numbers, got dtype {y.dtype}")
    task = learner.task
    n_classes = learner.config.n_classes if task == "multiclass" else None
    values = y.astype(np.float64)
    bad = bad_labels(values, task, n_classes)
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(f"{learner.name}: {label_rule(task, n_classes)}; row {row}: {label_reason(values[row], task, n_classes)}")
    return X, (y.astype(np.intp) if task == "multiclass" else values)


def _float32_rows(learner: Learner[Any], X: ArrayLike) -> np.ndarray:
    """``X`` as float32 (learners compute in it); ValueError naming the learner for what is not real numbers."""
    if isinstance(X, np.ma.MaskedArray) or (isinstance(X, np.ndarray) and X.dtype.kind in "cUSVMm"):
        raise ValueError(f"{learner.name}: X must hold real numbers (a plain, unmasked array), got {type(X).__name__} of {np.asarray(X).dtype}")
    try:
        with np.errstate(over="ignore"):  # finite values beyond float32's range: reported below, not warned
            # C order: the compiled folds are compiled for it (a Fortran-ordered X once compiled a second version, slower)
            return np.asarray(X, dtype=np.float32, order="C")
    except (TypeError, ValueError) as err:
        raise ValueError(f"{learner.name}: X must be a 2-D array of numbers ({' '.join(str(err).split())})") from None


def _beyond_float32(X32: np.ndarray, given: ArrayLike) -> str:
    """``' (... beyond float32's range)'`` when ``X32`` overflowed from finite input, else ``''``."""
    original = np.asarray(given)
    if original.shape != X32.shape or original.dtype.kind != "f" or original.dtype.itemsize <= 4:
        return ""
    finite = np.isfinite(original) & ~np.isfinite(X32)
    if not finite.any():
        return ""
    row = int(np.argmax(finite.any(axis=1)))
    return f" (row {row}: finite values beyond float32's range, |x| > {float(np.finfo(np.float32).max):.3g}, which learners compute in)"


def weighted_average(arrays: Sequence[ArrayLike], weights: ArrayLike) -> np.ndarray:
    """Average ``arrays`` with ``weights`` (normalised), summing in list order (deterministic)."""
    weights = np.asarray(weights, dtype=np.float64)
    total = weights.sum()
    weights = weights / total if total > 0 else np.full(len(arrays), 1.0 / len(arrays))
    out = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    # A diverged state (inf of both signs) averages to NaN, which the caller reports as
    # divergence: numpy's "invalid value" warning would only add a stray line to a worker's stderr.
    with np.errstate(invalid="ignore", over="ignore"):
        for w, a in zip(weights, arrays):
            out = out + w * a
    return out


class Learner(Generic[StateT]):
    """Base class: config in, pure ``init`` / ``update`` / ``predict`` / ``merge`` / ``mix``.

    Subclasses set the class attributes and implement :meth:`init`, :meth:`update`,
    :meth:`predict`; random-feature learners also implement :meth:`feature_spec`. Merging
    and mixing come from the field declarations below (module docstring); a learner
    overrides :meth:`merge` / :meth:`mix` only where its math differs.

    Public surface: a learner's user needs the names of :data:`LEARNER_API` only; a subclass
    declares or overrides those of :data:`SUBCLASS_API`; everything else is private
    (``tests/okl_core/test_learner_surface.py`` holds the base class to that).

    Attributes
    ----------
    name : str
        Registry name.
    config_class : type
        Frozen dataclass of the learner's parameters.
    state_class : type
        ``NamedTuple`` of the state's arrays (must include ``n_seen``).
    minibatch_defined : bool
        True when the learner is defined on mini-batches (DSG): a batch update is then not
        the row-by-row fold.
    growing_fields : tuple of str
        State fields whose first axis grows with training, and also any axis that is
        empty in the initial state (a ``(0, 0)`` matrix growing into ``(t, t)``); checked
        loosely on load.
    runtime_fields : tuple of str
        Config fields that do not change the model (cache sizes); ignored by merge checks.
    legacy_config : dict
        Values of config fields added after model files were first written: what a file
        without the field implicitly used (a new default may differ), filled in on load.
    conformance_params : dict
        Small parameters that keep the common conformance tests fast.
    merge_semantics : {'average', 'sum', 'none'}
        What :meth:`merge` means: ``'average'`` -- a weighted average of models, so merging
        equal states gives the same model; ``'sum'`` -- additive sufficient statistics, so
        merging equals training on the concatenated shards (equal states: the data twice);
        ``'none'`` -- :meth:`merge` raises :class:`NotMergeableError`.
    averaged_fields, counted_fields, maximum_fields, summed_fields : tuple of str
        How the default :meth:`merge` and :meth:`mix` treat each state field (module
        docstring). ``counted_fields`` always holds ``n_seen``.
    mixable : bool
        Whether :meth:`mix` is defined. False by default: a learner declares it.
    mix_refusal : str
        Why the learner cannot mix (shown by :func:`okl_core.merge.check_mixable`); by
        default derived from ``merge_semantics``.
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type[Any]]
    state_class: ClassVar[type[Any]]
    minibatch_defined: ClassVar[bool] = False
    growing_fields: ClassVar[tuple[str, ...]] = ()
    runtime_fields: ClassVar[tuple[str, ...]] = ()
    legacy_config: ClassVar[dict[str, Any]] = {}
    conformance_params: ClassVar[dict[str, Any]] = {}
    merge_semantics: ClassVar[str] = "average"
    averaged_fields: ClassVar[tuple[str, ...]] = ()
    counted_fields: ClassVar[tuple[str, ...]] = ("n_seen",)
    maximum_fields: ClassVar[tuple[str, ...]] = ()
    summed_fields: ClassVar[tuple[str, ...]] = ()
    mixable: ClassVar[bool] = False
    mix_refusal: ClassVar[str] = ""

    _pinned_methods: ClassVar[tuple[str, ...]] = ("init", "update", "predict", "merge", "mix")
    """Methods that every subclass runs with one BLAS thread (:mod:`okl_core.numerics`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The one place that makes learner numerics independent of the BLAS thread count:
        # each subclass's own definitions of these methods are wrapped when the class is made.
        super().__init_subclass__(**kwargs)
        for name in cls._pinned_methods:
            method = cls.__dict__.get(name)
            if isinstance(method, types.FunctionType):
                setattr(cls, name, pinned(_checking_state(method) if name in ("update", "predict") else method))
        _name_config(cls)

    def __init__(self, config: Any):
        if not isinstance(config, self.config_class):
            raise TypeError(f"{self.name} needs a {self.config_class.__name__}, got {type(config).__name__}")
        self.config = config

    @classmethod
    def from_params(cls, **params: Any) -> Learner[Any]:
        """Build the learner from keyword parameters, with a clear error for unknown ones."""
        fields = {f.name for f in dataclasses.fields(cls.config_class)}
        unknown = sorted(set(params) - fields)
        if unknown:
            raise ValueError(f"{cls.name}: unknown parameter(s) {unknown}; valid: {sorted(fields)} "
                             f"(okl learners {cls.name} describes each)")
        try:
            return cls(cls.config_class(**params))
        except TypeError as err:  # missing required fields
            raise ValueError(f"{cls.name}: {err}") from None

    @property
    def task(self) -> str:
        """One of :data:`TASKS`."""
        return self.config.task

    def init(self) -> StateT:
        """Return the initial state (the model before any example)."""
        raise NotImplementedError

    def state_layout(self) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """Dtype and shape of every field of the initial state: what a model file must hold.

        The default builds :meth:`init`; a learner whose initial state is large and filled
        (not lazily zeroed) overrides it, so that a model file is checked against its config
        without allocating the state first.
        """
        return {k: (np.asarray(v).dtype, np.shape(v)) for k, v in self.init()._asdict().items()}

    def check_state(self, state: Any, what: str = "state") -> None:
        """Raise ValueError unless ``state`` is this learner's state type with the arrays its config lays out.

        Dtypes and shapes are compared with :meth:`state_layout` (computed once per learner):
        in ``growing_fields`` axis 0 may differ, and so may every axis that is empty in the
        fresh state (a ``(0, 0)`` matrix that grows into ``(t, t)``). ``update``, ``predict``,
        ``merge``, ``mix`` and the model-file writer and reader call it, so a state of another
        learner or config (another width, class count or number of features) is refused by
        name instead of giving wrong scores or a bare numpy error.
        """
        if not isinstance(state, self.state_class):
            raise ValueError(f"{self.name}: {what} must be a {self.state_class.__name__} (from init or update), got {type(state).__name__}")
        layout = self.__dict__.get("_layout")
        if layout is None:
            layout = self.__dict__["_layout"] = self.state_layout()
        for name in self.state_class._fields:
            a, (dtype, shape) = np.asarray(getattr(state, name)), layout[name]
            fixed = [i for i in range(1, len(shape)) if shape[i] > 0] if name in self.growing_fields else range(len(shape))
            if a.dtype != dtype or a.ndim != len(shape) or any(a.shape[i] != shape[i] for i in fixed):
                raise ValueError(
                    f"{self.name}: {what} array {name!r} has dtype/shape {a.dtype}{a.shape}, expected {dtype}{shape} "
                    "(a state of another learner or config?)"
                )

    def update(self, state: StateT, X: ArrayLike, y: ArrayLike) -> tuple[StateT, np.ndarray]:
        """Learn from a batch in order: returns ``(new_state, online_scores)``.

        ``online_scores[i]`` is the prediction for row ``i`` made before learning from it.
        """
        raise NotImplementedError

    def predict(self, state: StateT, X: ArrayLike) -> np.ndarray:
        """Decision values of ``state`` on rows ``X``."""
        raise NotImplementedError

    def feature_spec(self) -> FeatureSpec | None:
        """The :class:`~okl_core.features.FeatureSpec` the model lives in, or None."""
        return None

    # -- merge ----------------------------------------------------------------------------
    def merge_weights(self, states: Sequence[StateT], base: StateT | None = None) -> np.ndarray:
        """Default merge weights: each state's ``n_seen``, or the examples it added since ``base``.

        Raises
        ------
        NotMergeableError
            A state has seen fewer examples than ``base``.
        """
        n_base = 0 if base is None else int(base.n_seen)
        added = [int(s.n_seen) - n_base for s in states]
        if added and min(added) < 0:
            raise NotMergeableError(f"{self.name}: a state has seen fewer examples than the base it started from")
        return np.array(added, dtype=np.float64)

    def merge(self, states: Sequence[StateT], weights: ArrayLike | None = None, base: StateT | None = None) -> StateT:
        """Combine states trained on disjoint shards into one (see :func:`okl_core.merge_states`).

        Parameters
        ----------
        states : sequence of states
            Non-empty, in a deterministic order (sums run in this order).
        weights : array-like, optional
            One non-negative weight per state, normalised here (all zero: equal weights).
            Default :meth:`merge_weights`: examples seen (or added since ``base``).
        base : state, optional
            The state every one of ``states`` started from (iterative parameter mixing):
            ``counted_fields`` count it once; summing learners subtract its statistics.

        Notes
        -----
        The default averages ``averaged_fields`` with :func:`weighted_average`, sums
        ``counted_fields`` and ``summed_fields``, takes the maximum of ``maximum_fields`` and asks
        :meth:`merge_special` for the rest.
        """
        if self.merge_semantics == "none":
            raise NotMergeableError(f"{self.name} states cannot be merged")
        states = self._merge_inputs(states)
        weights = self._weights(states, weights, base)
        fields = {name: weighted_average([getattr(s, name) for s in states], weights) for name in self.averaged_fields}
        for name in self.averaged_fields:
            if np.ndim(fields[name]) == 0:
                fields[name] = np.asarray(fields[name], dtype=np.float64)
        for name in self.maximum_fields:
            fields[name] = np.max([getattr(s, name) for s in states], axis=0)
        for name in self.counted_fields:
            fields[name] = self._count(name, states, base)
        for name in self.summed_fields:
            fields[name] = _sum_from_base([getattr(s, name) for s in states], None if base is None else getattr(base, name))
        fields.update(self.merge_special(states, weights, base))
        return self._build(fields)

    def merge_special(self, states: Sequence[StateT], weights: np.ndarray, base: StateT | None) -> dict[str, Any]:
        """Merged values of the fields that are not declared (none by default)."""
        return {}

    def _merge_inputs(self, states: Sequence[StateT]) -> list[StateT]:
        states = list(states)
        if not states:
            raise NotMergeableError(f"{self.name}: nothing to merge")
        for i, state in enumerate(states):
            self._check_combinable(state, f"state {i} to merge")
        return states

    def _check_combinable(self, state: Any, what: str) -> None:
        """:meth:`check_state` for merge and mix: raises :class:`NotMergeableError` instead."""
        try:
            self.check_state(state, what)
        except ValueError as err:
            raise NotMergeableError(str(err)) from None

    def _weights(self, states: list[StateT], weights: ArrayLike | None, base: StateT | None) -> np.ndarray:
        if weights is None:
            return self.merge_weights(states, base)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (len(states),):
            raise ValueError(f"{self.name}: {len(states)} states need {len(states)} merge weights, got shape {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError(f"{self.name}: merge weights must be finite and >= 0, got {weights.tolist()}")
        return weights

    def _count(self, name: str, states: Sequence[StateT], base: StateT | None) -> np.ndarray:
        """Sum of a counter over ``states`` (int64), with ``base``'s value counted once."""
        total = np.sum([np.asarray(getattr(s, name), dtype=np.int64) for s in states], axis=0)
        if base is not None:
            total = total - (len(states) - 1) * np.asarray(getattr(base, name), dtype=np.int64)
        return np.asarray(total, dtype=np.int64)

    def _build(self, fields: dict[str, Any]) -> StateT:
        missing = [f for f in self.state_class._fields if f not in fields]
        if missing:
            raise NotMergeableError(
                f"{self.name} states cannot be combined: fields {missing} are neither declared (averaged_fields, "
                "counted_fields, maximum_fields, summed_fields) nor produced by merge_special / mix_special"
            )
        return self.state_class(**{f: fields[f] for f in self.state_class._fields})

    # -- streams ----------------------------------------------------------------------------
    def check_stream(self, n_rows: int) -> None:
        """Refuse, before any row is learned, a stream of ``n_rows`` examples that would exceed a cap.

        Learners whose state grows with every example (the exact kernel ridge learners)
        raise a ValueError saying how much memory the state would need and which parameter
        to change; the others accept any length (the default does nothing). Called by
        :func:`okl_core.evaluation.run_online` and at the launch of the training pipeline,
        where the data set's row count is known.
        """

    # -- mix ------------------------------------------------------------------------------
    @classmethod
    def mix_refusal_reason(cls) -> str:
        """Why this learner cannot mix ('' when it can): its class's declarations say."""
        if cls.mixable:
            return ""
        if cls.mix_refusal:
            return cls.mix_refusal
        if cls.merge_semantics == "none":
            return "its states cannot be merged, so there is no merged model to mix in"
        if cls.merge_semantics == "sum":
            return "its merge sums sufficient statistics, so mixing a merged model into a shard would count examples twice"
        return "it does not declare mixing (mixable = False)"

    def mix(self, local: StateT, merged: StateT, weight: float) -> StateT:
        """Blend a merged model into a shard's local state (streaming model mixing).

        ``weight = 0`` returns ``local`` unchanged; ``weight = 1`` gives the merged model
        (with the local counters). The default: ``averaged_fields`` become
        ``(1 - weight) local + weight merged`` (local dtype), ``counted_fields`` and ``summed_fields`` stay local,
        ``maximum_fields`` take the elementwise maximum, :meth:`mix_special` gives the rest.

        Raises
        ------
        NotMergeableError
            The learner cannot mix (``mixable`` is False), or the states' arrays differ in shape.
        ValueError
            ``weight`` outside [0, 1].
        """
        if not self.mixable:
            raise NotMergeableError(f"{self.name} cannot mix a merged model into a shard: {self.mix_refusal_reason()}")
        weight = mixing_weight(weight)
        self._check_combinable(local, "local state")
        self._check_combinable(merged, "merged state")
        if weight == 0.0:
            return local
        fields = {}
        for name in self.averaged_fields:
            a, b = np.asarray(getattr(local, name)), np.asarray(getattr(merged, name))
            if a.shape != b.shape:
                raise NotMergeableError(f"{self.name}: state array {name!r} has shape {a.shape} locally and {b.shape} merged; cannot mix")
            fields[name] = np.asarray(((1.0 - weight) * a + weight * b).astype(a.dtype, copy=False))
        for name in self.maximum_fields:
            fields[name] = np.maximum(getattr(local, name), getattr(merged, name))
        for name in (*self.counted_fields, *self.summed_fields):
            fields[name] = getattr(local, name)
        fields.update(self.mix_special(local, merged, weight))
        return self._build(fields)

    def mix_special(self, local: StateT, merged: StateT, weight: float) -> dict[str, Any]:
        """Mixed values of the fields that are not declared (none by default)."""
        return {}

    def to_labels(self, scores: np.ndarray) -> np.ndarray:
        """Labels from decision values: sign (0 -> +1), first argmax, or the value."""
        return labels_from_scores(self.task, scores)

    def describe(self) -> dict[str, Any]:
        """JSON-ready description: name, task and config."""
        return {"learner": self.name, "task": self.task, "config": dataclasses.asdict(self.config)}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in dataclasses.asdict(self.config).items())
        return f"{type(self).__name__}({params})"


for _name in Learner._pinned_methods:  # the base class's own defaults (e.g. a default mix) too
    if isinstance(Learner.__dict__.get(_name), types.FunctionType):
        setattr(Learner, _name, pinned(Learner.__dict__[_name]))
del _name


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckedConfig:
    """Base of the learners' frozen config dataclasses: validated from the declarations.

    ``__post_init__`` checks every field against the declarations of
    :mod:`okl_core.parameters` as the config's learner reads them
    (:func:`okl_core.validation.validate_config`): ``learner_name`` names that learner, set
    by :class:`Learner` when a learner class names this config as its ``config_class``
    (learners sharing a config, such as ``krr`` and ``kernel_awv``, must declare its fields
    alike). A config class writes its own ``__post_init__`` (calling
    ``super().__post_init__()`` first) only for what a declaration cannot say: a value parsed
    by a function of its own (a kernel dictionary, a loss and its parameter).

    ``data_defaults`` lists the parameters whose default is derived from the data, written
    in the mini-language of :mod:`okl_core.derived` (``{"sigma": "median"}``): okl's
    commands and ``make_learner(name, data=X)`` apply them where no value is given; the
    field's own default is the fallback of a learner built with no data.
    """

    data_defaults: ClassVar[dict[str, Any]] = {}
    learner_name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        plain_scalars(self)
        # this class's own learner, never a base config's (whose learner may read a field otherwise)
        validate_config(self, type(self).__dict__.get("learner_name", ""))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RandomFeatureConfig(CheckedConfig):
    """Parameters shared by learners on one seeded random Fourier feature map.

    Parameters
    ----------
    n_inputs : int
        Input dimension ``d``.
    n_components : int
        Number of frequencies ``D`` (the map has ``2 D`` features).
    kernel : {'gaussian', 'laplacian', 'cauchy'}
    sigma : float
        Kernel bandwidth; default the median heuristic on the data (``"median"``, see
        :mod:`okl_core.derived`; 8, the FOGD paper's value for its features in [0, 1],
        when no data is given). The paper's sigma suits only data of its scale: on a9a's
        0/1 features the median distance is about 3.9, on MNIST pixels / 255 about 10.
    seed : int
        Model seed: frequency block ``b`` comes from the generator keyed by ``(seed, b)``.
    block_size : int
        Frequencies per generator block.
    scaled : bool
        Features divided by ``sqrt(D)`` (kernel-approximating) or not (FOGD's form; then
        ``eta_scaled = D * eta_unscaled``).
    """

    n_inputs: int
    n_components: int = 400
    kernel: str = "gaussian"
    sigma: float = 8.0
    seed: int = 0
    block_size: int = 256
    scaled: bool = False

    data_defaults: ClassVar[dict[str, Any]] = {"sigma": "median"}

    def feature_spec(self) -> FeatureSpec:
        """The :class:`~okl_core.features.FeatureSpec` of these parameters."""
        from okl_core.features import FeatureSpec

        return FeatureSpec(
            n_inputs=self.n_inputs,
            n_components=self.n_components,
            kernel=self.kernel,
            sigma=self.sigma,
            seed=self.seed,
            block_size=self.block_size,
            scaled=self.scaled,
        )


def _name_config(cls: type[Learner[Any]]) -> None:
    """Tell ``cls.config_class`` which learner's declarations check it (:class:`CheckedConfig`).

    A config shared by several learners keeps the first name; TypeError when their
    declarations of its fields differ (the config could not be checked as both read them).
    """
    config = getattr(cls, "config_class", None)
    if not cls.name or not isinstance(config, type) or not issubclass(config, CheckedConfig):
        return
    first = config.__dict__.get("learner_name")
    if not first:
        config.learner_name = cls.name
    elif first != cls.name and _declarations(first, config) != _declarations(cls.name, config):
        raise TypeError(f"{cls.name} and {first} share {config.__name__} but declare its parameters differently")


def _declarations(learner: str, config: type) -> tuple[Any, ...]:
    """What checks ``config`` as ``learner`` reads it: each field's declaration, and the relations."""
    fields = tuple(declaration(learner, f.name) for f in dataclasses.fields(config))
    return fields, relations(learner)


def _checking_state(method: Any) -> Any:
    """``update`` / ``predict`` that first check their state argument (:meth:`Learner.check_state`)."""

    @functools.wraps(method)
    def checked(self: Learner[Any], state: Any, *args: Any, **kwargs: Any) -> Any:
        self.check_state(state)
        return method(self, state, *args, **kwargs)

    return checked


def _sum_from_base(values: list[Any], base: Any | None) -> np.ndarray:
    """``sum(values)`` in list order, or ``base + sum(v - base)`` (each state's increase over the base)."""
    total = np.zeros_like(np.asarray(values[0], dtype=np.float64)) if base is None else np.array(base, dtype=np.float64, copy=True)
    for v in values:
        total = total + (v if base is None else v - base)
    return np.asarray(total)
