"""The learner conformance checks, for okl's own learners and for yours.

A learner you write and :func:`okl_core.register` must keep the promises the pipelines
rely on. :func:`check_learner` runs them all (like River's ``check_estimator``)::

    import okl_core
    from okl_core.testing import check_learner

    @okl_core.register
    class MyLearner(okl_core.Learner): ...

    check_learner(MyLearner.from_params(n_inputs=4, ...))   # or check_learner("my_learner")

Each ``check_*`` function takes a learner and raises :class:`AssertionError` naming the
learner and the broken promise (or lets the learner's own error through). The checks run
on small deterministic problems (:func:`tiny_problem`) in the learner's task:

* :func:`check_config_validation` -- bad parameters (bools for numbers too) are ValueErrors;
  numpy scalars give the config of the equal Python numbers;
* :func:`check_predict_before_update` -- the initial state predicts finite scores;
* :func:`check_determinism` -- the same config gives the same model bytes, another seed another model;
* :func:`check_inputs_not_mutated` -- ``update`` and ``predict`` leave states and data alone;
* :func:`check_foreign_state` -- a state of another config is refused by name, not used;
* :func:`check_fold` -- a batch update is the row-by-row fold (or, for a mini-batch learner,
  invariant to cuts at mini-batch boundaries);
* :func:`check_round_trip` -- save/load keeps the bytes, the predictions and further training;
* :func:`check_learns` -- better than the best constant predictor on a learnable problem;
* :func:`check_merge` -- merging follows ``merge_semantics`` (averages, exact sums, or a
  clear refusal), explicit weights and a ``base``;
* :func:`check_mix` -- mixing follows ``mixable`` (and the function-space properties of a mix).

okl's test suite runs each check on every registered learner
(tests/okl_core/test_conformance.py). Nothing here imports pytest.
"""

from __future__ import annotations

import dataclasses
import os
import json
import tempfile
from collections.abc import Callable, Iterable

import numpy as np

from okl_core.learners.base import Learner, NotMergeableError
from okl_core.merge import check_mixable, merge_states, mix_states
from okl_core.registry import learner_class
from okl_core.state import load_model, model_bytes, save_model

__all__ = [
    "CHECKS",
    "check_learner",
    "conformance_learner",
    "tiny_problem",
    "trivial_error",
    "error",
    "check_config_validation",
    "check_predict_before_update",
    "check_determinism",
    "check_inputs_not_mutated",
    "check_foreign_state",
    "check_fold",
    "check_round_trip",
    "check_learns",
    "check_merge",
    "check_mix",
]

N_INPUTS = 4
"""Input dimension of a learner built by name for the checks."""


# -- data ------------------------------------------------------------------------------------
def tiny_problem(task: str, n_inputs: int = 4, n: int = 240, n_classes: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A small learnable stream ``(X float32, y)`` for ``task`` (nonlinear in X)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, n_inputs)).astype(np.float32)
    radius = np.sqrt((X[:, :2] ** 2).sum(1))
    if task == "binary":
        return X, np.where(radius < 0.75, 1, -1)
    if task == "multiclass":
        edges = np.quantile(radius, np.linspace(0, 1, n_classes + 1)[1:-1])
        return X, np.searchsorted(edges, radius).astype(np.int64)
    return X, np.cos(2.0 * radius).astype(np.float64)


def trivial_error(task: str, y: np.ndarray) -> float:
    """Error of the best constant predictor (majority class, or the mean)."""
    y = np.asarray(y)
    if task == "regression":
        return float(np.mean((y - y.mean()) ** 2))
    _, counts = np.unique(y, return_counts=True)
    return 1.0 - counts.max() / len(y)


def error(learner: Learner, scores: np.ndarray, y: np.ndarray) -> float:
    """Mistake rate (classification) or MSE (regression) of scores against y."""
    if learner.task == "regression":
        return float(np.mean((np.asarray(scores) - y) ** 2))
    return float(np.mean(learner.to_labels(scores) != y))


def _data(learner: Learner, n: int = 240, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    n_classes = getattr(learner.config, "n_classes", None) or 3
    return tiny_problem(learner.task, learner.config.n_inputs, n=n, n_classes=n_classes, seed=seed)


def _fail(learner: Learner, message: str) -> AssertionError:
    return AssertionError(f"{learner.name}: {message}")


def _rebuild(learner: Learner, **changes) -> Learner:
    """The same learner class with some config fields changed (validated by the config)."""
    return type(learner).from_params(**{**dataclasses.asdict(learner.config), **changes})


def _has_field(learner: Learner, name: str) -> bool:
    return name in {f.name for f in dataclasses.fields(learner.config)}


def _same_function(learner: Learner, s, t, X: np.ndarray, what: str, rtol: float = 1e-9, atol: float = 1e-9) -> None:
    a, b = learner.predict(s, X), learner.predict(t, X)
    if not np.allclose(a, b, rtol=rtol, atol=atol):
        raise _fail(learner, f"{what}: predictions differ by up to {np.max(np.abs(a - b)):.3g}")


def _two_shards(learner: Learner, n_a: int = 96, n_b: int = 160) -> tuple:
    """States trained from init on different data (different lengths)."""
    Xa, ya = _data(learner, n=n_a, seed=3)
    Xb, yb = _data(learner, n=n_b, seed=4)
    return learner.update(learner.init(), Xa, ya)[0], learner.update(learner.init(), Xb, yb)[0]


def conformance_learner(name: str, n_inputs: int = N_INPUTS, **overrides) -> Learner:
    """Registered learner ``name`` with its small ``conformance_params`` (and ``overrides``)."""
    cls = learner_class(name)
    return cls.from_params(**{"n_inputs": n_inputs, **cls.conformance_params, **overrides})


# -- the checks --------------------------------------------------------------------------------
def check_config_validation(learner: Learner) -> None:
    """Missing, unknown, malformed or negative parameters are ValueErrors."""
    cls, params = type(learner), dataclasses.asdict(learner.config)
    bad = [
        {k: v for k, v in params.items() if k != "n_inputs"},
        {**params, "n_inputs": 0},
        {**params, "no_such_parameter": 1},
        {**params, "n_inputs": "four"},
    ]
    for name, value in params.items():  # every positive number (but a seed) refuses a negative one
        if name != "seed" and not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0:
            bad.append({**params, name: -abs(value) - 1})
    for name, value in params.items():  # a bool is not a number
        if not isinstance(value, bool) and isinstance(value, (int, float)):
            bad.append({**params, name: True})
    for case in bad:
        try:
            cls.from_params(**case)
        except ValueError:
            continue
        changed = {k: v for k, v in case.items() if params.get(k, object()) != v} or "n_inputs missing"
        raise _fail(learner, f"parameters {changed} were accepted; they must raise ValueError")
    _check_numpy_scalars(learner)


def _check_numpy_scalars(learner: Learner) -> None:
    """Numpy scalars (from an array or a grid) give the same config as Python numbers, JSON-ready."""
    params = dataclasses.asdict(learner.config)
    as_numpy = {
        k: (np.int64(v) if isinstance(v, int) else np.float64(v)) if not isinstance(v, bool) and isinstance(v, (int, float)) else v
        for k, v in params.items()
    }
    rebuilt = type(learner).from_params(**as_numpy)
    if rebuilt.config != learner.config or any(type(a) is not type(b) for a, b in zip(dataclasses.astuple(rebuilt.config), dataclasses.astuple(learner.config))):
        raise _fail(learner, f"numpy scalar parameters gave the config {rebuilt.config!r}, not {learner.config!r}")
    json.dumps(rebuilt.describe())


def check_foreign_state(learner: Learner) -> None:
    """A state of another config (other array shapes) or not a state at all is a ValueError in
    ``update``, ``predict`` and the model-file writer, and a NotMergeableError in merge."""
    X, y = _data(learner, n=5)
    foreign = _other_layout(learner)
    cases = [("None", None)] + ([] if foreign is None else [("a state of another config", foreign)])
    calls = {
        "update": lambda s: learner.update(s, X, y),
        "predict": lambda s: learner.predict(s, X),
        "model_bytes": lambda s: model_bytes(learner, s),
    }
    for what, state in cases:
        for call, run in calls.items():
            try:
                run(state)
            except ValueError as err:
                if learner.name not in str(err):
                    raise _fail(learner, f"{call} of {what}: the error does not name the learner: {err}") from None
                continue
            raise _fail(learner, f"{call} accepted {what}; it must raise ValueError")
    if foreign is not None and learner.merge_semantics != "none":
        try:
            learner.merge([learner.init(), foreign])
        except NotMergeableError:
            return
        raise _fail(learner, "merge accepted a state of another config; it must raise NotMergeableError")


def _other_layout(learner: Learner):
    """The initial state of a config whose state arrays are shaped differently, or None."""
    layout = learner.state_layout()
    params = dataclasses.asdict(learner.config)
    for name in ("n_inputs", "n_components", "n_classes", "block_size", "budget", "degree"):
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                other = _rebuild(learner, **{name: value + 2})
            except ValueError:
                continue
            state = other.init()
            if {k: (np.asarray(v).dtype, np.shape(v)) for k, v in state._asdict().items()} != layout:
                try:
                    learner.check_state(state)
                except ValueError:
                    return state
    return None


def check_predict_before_update(learner: Learner) -> None:
    """The initial state predicts a finite score per row."""
    X, _ = _data(learner, n=7)
    scores = np.asarray(learner.predict(learner.init(), X))
    if len(scores) != 7 or not np.all(np.isfinite(scores)):
        raise _fail(learner, f"predict on the initial state gave {scores!r}; expected 7 finite scores")


def check_determinism(learner: Learner) -> None:
    """Two learners of one config train to the same model bytes; another seed to another model."""
    X, y = _data(learner)
    runs = []
    for copy in (_rebuild(learner), _rebuild(learner)):
        state, _ = copy.update(copy.init(), X, y)
        runs.append(model_bytes(copy, state))
    if runs[0] != runs[1]:
        raise _fail(learner, "two learners with the same config trained on the same data give different model bytes")
    if _has_field(learner, "seed"):
        other = _rebuild(learner, seed=learner.config.seed + 1)
        first, _ = learner.update(learner.init(), X, y)
        second, _ = other.update(other.init(), X, y)
        if np.array_equal(other.predict(second, X), learner.predict(first, X)):
            raise _fail(learner, "another seed gives the same predictions: is the seed used?")


def check_inputs_not_mutated(learner: Learner) -> None:
    """``update`` and ``predict`` change neither the state they are given nor the data."""
    X, y = _data(learner)
    state, _ = learner.update(learner.init(), X[:100], y[:100])
    before = [np.copy(a) for a in state]
    X_copy, y_copy = X.copy(), y.copy()
    learner.update(state, X, y)
    learner.predict(state, X)
    for field, a, b in zip(state._fields, state, before):
        if not np.array_equal(a, b):
            raise _fail(learner, f"update or predict changed the input state's {field!r}")
    if not (np.array_equal(X, X_copy) and np.array_equal(y, y_copy)):
        raise _fail(learner, "update or predict changed the data it was given")


def check_fold(learner: Learner) -> None:
    """A batch update is the row-by-row fold: the same online scores and state (up to the
    rounding of a feature map over 1 vs n rows). A learner that declares
    ``minibatch_defined`` must instead give the same bytes whatever cuts at its mini-batch
    boundaries (``config.batch_size``)."""
    if learner.minibatch_defined:
        X, y = _data(learner, n=96)
        whole, _ = learner.update(learner.init(), X, y)
        step = learner.config.batch_size * 3
        state = learner.init()
        for i in range(0, len(y), step):
            state, _ = learner.update(state, X[i : i + step], y[i : i + step])
        if model_bytes(learner, state) != model_bytes(learner, whole):
            raise _fail(learner, "cutting the stream at mini-batch boundaries changed the model")
        return
    X, y = _data(learner, n=120)
    batch_state, batch_scores = learner.update(learner.init(), X, y)
    state, scores = learner.init(), []
    for i in range(len(y)):
        state, s = learner.update(state, X[i : i + 1], y[i : i + 1])
        scores.append(s)
    if not np.allclose(np.concatenate(scores), batch_scores, rtol=1e-6, atol=1e-6):
        raise _fail(learner, "the online scores of a batch update differ from the row-by-row fold's")
    for field, a, b in zip(state._fields, state, batch_state):
        if np.shape(a) != np.shape(b) or not np.allclose(a, b, rtol=1e-6, atol=1e-6):
            raise _fail(learner, f"state field {field!r} of a batch update differs from the row-by-row fold's")


def check_round_trip(learner: Learner, n_rows: Iterable[int] = (0, 1, 40), seed: int = 0) -> None:
    """A model file loads into the same learner and state: same bytes, same predictions, and
    training continues bit for bit as from the state in memory."""
    if _has_field(learner, "seed"):
        learner = _rebuild(learner, seed=seed)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.npz")
        for n in n_rows:
            X, y = _data(learner, n=max(n, 1) + 40, seed=seed % 1000)
            state, _ = learner.update(learner.init(), X[:n], y[:n])
            save_model(path, learner, state)
            loaded_learner, loaded = load_model(path)
            if loaded_learner.name != learner.name or loaded_learner.config != learner.config:
                raise _fail(learner, f"a saved model loads as {loaded_learner!r}")
            if model_bytes(loaded_learner, loaded) != model_bytes(learner, state):
                raise _fail(learner, f"a loaded state ({n} rows) has other model bytes")
            if not np.array_equal(loaded_learner.predict(loaded, X), learner.predict(state, X)):
                raise _fail(learner, f"a loaded state ({n} rows) predicts differently")
            in_memory, scores_a = learner.update(state, X[n:], y[n:])
            from_file, scores_b = learner.update(loaded, X[n:], y[n:])
            if not np.array_equal(scores_a, scores_b) or model_bytes(learner, in_memory) != model_bytes(learner, from_file):
                raise _fail(learner, f"training continues differently from a loaded state ({n} rows) than from memory")


def check_learns(learner: Learner) -> None:
    """After three passes over 600 rows, better than 0.9 times the best constant predictor."""
    X, y = _data(learner, n=600, seed=1)
    state = learner.init()
    for _ in range(3):
        state, _ = learner.update(state, X, y)
    X_test, y_test = _data(learner, n=300, seed=2)
    got, trivial = error(learner, learner.predict(state, X_test), y_test), trivial_error(learner.task, y_test)
    if not got < 0.9 * trivial:
        raise _fail(learner, f"test error {got:.4g} is not below 0.9 x the constant predictor's {trivial:.4g}")


def check_merge(learner: Learner) -> None:
    """``merge`` keeps ``merge_semantics``: ``'none'`` refuses with a NotMergeableError naming
    the learner; ``'average'`` merges identical states into the same function, takes explicit
    weights (weights proportional to ``n_seen`` are the default, bit for bit; declared
    ``averaged_fields`` are the weighted average) and counts a ``base`` once; ``'sum'``
    merges identical states into the data seen twice and takes no weights."""
    X, y = _data(learner)
    state, _ = learner.update(learner.init(), X, y)
    try:
        merged = merge_states(learner, [state, state])
    except NotMergeableError as err:
        if learner.name not in str(err):
            raise _fail(learner, f"the NotMergeableError does not name the learner: {err}") from None
        if learner.merge_semantics != "none":
            raise _fail(learner, f"merge_semantics is {learner.merge_semantics!r} but merging was refused: {err}") from None
        return
    if learner.merge_semantics == "none":
        raise _fail(learner, "merge_semantics is 'none' but two states merged")
    if int(merged.n_seen) != 2 * int(state.n_seen):
        raise _fail(learner, f"merging two states of {int(state.n_seen)} examples gave n_seen {int(merged.n_seen)}")
    if learner.merge_semantics == "sum":
        twice, _ = learner.update(state, X, y)
        _same_function(learner, merged, twice, X, "merging a state with itself is not training on its data twice", 1e-6, 1e-9)
        a, b = _two_shards(learner, n_a=30, n_b=40)
        try:
            learner.merge([a, b], weights=[1.0, 1.0])
        except ValueError as err:
            if "no weights" not in str(err):
                raise _fail(learner, f"an exact merge given weights must say it takes no weights: {err}") from None
        else:
            raise _fail(learner, "an exact merge (merge_semantics 'sum') accepted weights")
        return
    _same_function(learner, merged, state, X, "merging a state with itself changed the model")
    _check_weighted_merge(learner)
    _check_merge_from_base(learner)


def _check_weighted_merge(learner: Learner) -> None:
    a, b = _two_shards(learner)
    default = learner.merge([a, b])
    scaled = learner.merge([a, b], weights=[3.0 * int(a.n_seen), 3.0 * int(b.n_seen)])
    if model_bytes(learner, scaled) != model_bytes(learner, default):
        raise _fail(learner, "weights proportional to n_seen do not give the default merge bit for bit")
    if int(default.n_seen) != int(a.n_seen) + int(b.n_seen):
        raise _fail(learner, "a merge's n_seen is not the sum of the states'")
    weighted = learner.merge([a, b], weights=[1.0, 3.0])
    if int(weighted.n_seen) != int(default.n_seen):
        raise _fail(learner, "merge weights changed the counters")
    for field in learner.averaged_fields:
        want = 0.25 * np.asarray(getattr(a, field)) + 0.75 * np.asarray(getattr(b, field))
        if not np.allclose(getattr(weighted, field), want, rtol=1e-12, atol=1e-15):
            raise _fail(learner, f"averaged field {field!r} is not the weighted average")
    for bad in ([1.0], [1.0, -1.0]):
        try:
            learner.merge([a, b], weights=bad)
        except ValueError as err:
            if "weights" not in str(err):
                raise _fail(learner, f"the error for merge weights {bad} does not mention the weights: {err}") from None
        else:
            raise _fail(learner, f"merge weights {bad} were accepted")


def _check_merge_from_base(learner: Learner) -> None:
    """With ``base`` the weights are the examples added since it, and every counter is
    ``base + sum(state - base)``."""
    base, _ = _two_shards(learner, n_a=48)
    X, y = _data(learner, n=120, seed=6)
    s1, _ = learner.update(base, X[:40], y[:40])
    s2, _ = learner.update(base, X[40:], y[40:])
    merged = merge_states(learner, [s1, s2], base=base)
    if model_bytes(learner, merged) != model_bytes(learner, learner.merge([s1, s2], weights=[40.0, 80.0], base=base)):
        raise _fail(learner, "merging from a base is not weighted by the examples added since it")
    for field in learner.counted_fields:
        b0 = np.asarray(getattr(base, field))
        want = b0 + (np.asarray(getattr(s1, field)) - b0) + (np.asarray(getattr(s2, field)) - b0)
        if not np.array_equal(getattr(merged, field), want):
            raise _fail(learner, f"counter {field!r} of a merge from a base does not count the base once")


def check_mix(learner: Learner) -> None:
    """``mix`` follows ``mixable``. A learner that mixes also merges as an average; a mix with
    itself is the same function, weight 0 is the local state (the same object), weight 1
    the merged model's function with the local counters, and ``mix(a, b, w)`` predicts like
    ``merge([a, b], weights=[1 - w, w])``. A learner that cannot mix is refused by
    :func:`~okl_core.merge.check_mixable` with a one-line message, and weight 0 still
    returns the local state."""
    if not learner.mixable:
        try:
            check_mixable(learner)
        except NotMergeableError as err:
            message = str(err)
            if not message.startswith(f"{learner.name} cannot mix") or "\n" in message:
                raise _fail(learner, f"check_mixable's refusal must be one line starting '{learner.name} cannot mix': {message!r}") from None
        else:
            raise _fail(learner, "mixable is False but check_mixable accepted it")
        state = learner.init()
        try:
            mix_states(learner, state, state, 0.5)
        except NotMergeableError:
            pass
        else:
            raise _fail(learner, "mixable is False but mix_states mixed")
        if mix_states(learner, state, state, 0.0) is not state:
            raise _fail(learner, "a mix with weight 0 must return the local state")
        return
    if learner.merge_semantics != "average":
        raise _fail(learner, f"a learner that mixes must merge as an average, not {learner.merge_semantics!r}")
    check_mixable(learner)
    a, b = _two_shards(learner)
    X, _ = _data(learner, n=50, seed=5)
    for weight in (0.3, 1.0):
        mixed = mix_states(learner, a, a, weight)
        _same_function(learner, mixed, a, X, f"a mix of a state with itself (weight {weight}) changed the model")
        if int(mixed.n_seen) != int(a.n_seen):
            raise _fail(learner, "a mix changed the local n_seen")
    if mix_states(learner, a, b, 0.0) is not a or learner.mix(a, b, 0.0) is not a:
        raise _fail(learner, "a mix with weight 0 must return the local state")
    one = mix_states(learner, a, b, 1.0)
    _same_function(learner, one, b, X, "a mix with weight 1 is not the merged model")
    if int(one.n_seen) != int(a.n_seen):
        raise _fail(learner, "a mix must keep the local counters")
    for bad in (-0.1, 1.5, float("nan")):
        try:
            mix_states(learner, a, b, bad)
        except ValueError as err:
            if "weight" not in str(err):
                raise _fail(learner, f"the error for mixing weight {bad} does not mention the weight: {err}") from None
        else:
            raise _fail(learner, f"mixing weight {bad} was accepted")
    for weight in (0.2, 0.7):
        mixed = mix_states(learner, a, b, weight)
        merged = learner.merge([a, b], weights=[1.0 - weight, weight])
        _same_function(learner, mixed, merged, X, f"mix(a, b, {weight}) does not predict like the two-state merge", 1e-9, 1e-12)


CHECKS: tuple[Callable[[Learner], None], ...] = (
    check_config_validation,
    check_predict_before_update,
    check_determinism,
    check_inputs_not_mutated,
    check_foreign_state,
    check_fold,
    check_round_trip,
    check_learns,
    check_merge,
    check_mix,
)
"""Every check, in the order :func:`check_learner` runs them."""


def check_learner(learner: Learner | str, checks: Iterable[Callable[[Learner], None]] = CHECKS) -> None:
    """Run the conformance ``checks`` on a learner, or on registered learner ``name`` built with
    its ``conformance_params`` (and ``n_inputs = 4``).

    Raises
    ------
    AssertionError
        The first broken promise, naming the learner and the property.
    """
    if isinstance(learner, str):
        learner = conformance_learner(learner)
    if not isinstance(learner, Learner):
        raise TypeError(f"check_learner needs a Learner or a registered name, got {type(learner).__name__}")
    for check in checks:
        check(learner)
