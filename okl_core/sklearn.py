"""scikit-learn estimators over every okl learner, and a River-style adapter over dict rows.

:class:`OnlineKernelClassifier` and :class:`OnlineKernelRegressor` wrap any registered learner
(:mod:`okl_core.registry`) in the scikit-learn API: ``fit`` (one online pass over the rows, in
order: the learner's ``update``), ``partial_fit`` (the next rows of the stream), ``predict``,
``decision_function`` (classifier), ``predict_proba`` (where the loss defines one: logistic,
softmax), ``score``, ``get_params`` / ``set_params`` and ``clone``. Labels may be anything
:func:`numpy.unique` sorts: ``classes_`` holds them and the learner sees okl's codes (binary
``classes_[0] -> -1``, ``classes_[1] -> +1``; multiclass ``classes_[k] -> k``).

Parameters: why one class with every learner parameter in its signature
-----------------------------------------------------------------------------
scikit-learn reads an estimator's parameters from its ``__init__`` signature (no ``**kwargs``:
``get_params``, ``clone`` and ``GridSearchCV`` would not see them). Each estimator's signature is
therefore ``learner`` followed by every parameter of every learner of its task (the union of the
learners' config fields, read from the registry when this module is imported), all keyword-only
and defaulting to ``None`` = "the learner's own default" -- for a bandwidth (``sigma``, a
multi-kernel dictionary) the median heuristic on the rows of the first ``fit`` / ``partial_fit``
call, which also resolve a given ``sigma="median"`` or ``"0.5*median"`` (:mod:`okl_core.derived`;
a multi-kernel learner takes ``sigma`` as its dictionary's unit). So ``OnlineKernelClassifier(
learner="fogd", sigma=1.0, eta=0.2)`` is a plain scikit-learn estimator: ``clone`` copies it,
``GridSearchCV`` grids over ``sigma`` or ``eta`` (or ``learner``), and the fitted learner with its
full configuration is ``learner_`` (``learner_.config``). This was chosen over a
``learner_params`` dict (a grid over one parameter would need a grid of dicts) and over one
generated class per learner (``learner`` could not be a grid parameter; every learner would need
its own importable, picklable class). A parameter the chosen learner does not take is ignored
(so one grid can span learners, and scikit-learn's checks may set ``n_components`` on any):
``learner_.config`` shows what was used. The data fixes ``n_inputs``,
``n_classes`` and the ridge learners' ``task``, so those are not parameters. Learners
registered after this module is imported are usable, but their new parameter names are not in
the signature.

Learner names
-------------
The classifier picks the binary or the multiclass learner by the number of classes seen
(:func:`classifier_learner`): a binary learner ``NAME`` whose multiclass variant ``mNAME`` is
registered (``fogd``/``mfogd``, ``nogd``/``mnogd``, ``rbp``/``mrbp``, ...) learns two classes with
``NAME`` and three or more with ``mNAME``; a multiclass name (``mfogd``) learns any number >= 2
(two classes as codes 0 and 1). ``dsg`` and the OKS learners take the task from their ``loss``:
left unset, the classifier uses the learner's default loss for two classes when it classifies
(``dsg``: hinge, OKS: logistic) and ``softmax`` for three or more (``dsg``; the OKS learners
classify two classes only); the regressor uses the
default when it is a regression loss, else ``square``. The ridge learners (``kernel_awv``,
``krr``, ``pkawv_taylor``, ``pkawv_nystrom``) learn two classes as ``task='binary'``. The
regressor takes a regression learner's name or the name of its classification sibling
(``fogd`` -> ``fogd_r``). :func:`learner_table` lists the mapping.

Determinism: the same parameters (``seed`` included) and rows in the same order give the same
state, bytes for bytes; ``fit`` starts from the learner's initial state every time.

:class:`OnlineLearner` is the River-style adapter: ``learn_one(x, y)``, ``predict_one(x)``,
``predict_proba_one(x)`` over rows given as dicts, in a fixed feature order; learning rows one
by one gives exactly the state ``partial_fit`` gives on the same rows in order.

scikit-learn is an optional dependency (the ``sklearn`` extra); ``import okl_core`` never
imports it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils.metaestimators import available_if
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError:  # one line, naming the extra (scikit-learn >= 1.6 has validate_data)
    raise ImportError("okl_core.sklearn needs scikit-learn >= 1.6: pip install 'okl[sklearn]'") from None

from okl_core.derived import accepted_params, data_defaults, resolve_params, scaled_dictionary, unresolved
from okl_core.labels import TASKS
from okl_core.learners.base import Learner
from okl_core.losses import loss_names, make_loss
from okl_core.predictions import probabilities_from_scores
from okl_core.registry import learner_class, learner_names

__all__ = [
    "OnlineKernelClassifier",
    "OnlineKernelRegressor",
    "OnlineLearner",
    "classifier_learner",
    "regressor_learner",
    "learner_table",
    "learner_tasks",
    "expected_failed_checks",
]

_FROM_DATA = ("n_inputs", "n_classes", "task")
"""Config fields the data and the estimator fix: never constructor parameters."""

_PROBABILITY_LOSSES = ("logistic", "softmax")
"""Losses whose scores are log-odds: ``predict_proba`` exists only for them."""

_TASK_LOSS = {"binary": "hinge", "multiclass": "softmax", "regression": "square"}
"""The loss a loss-driven learner gets for a task its own default loss does not learn."""

_CLASSIFICATION = ("binary", "multiclass")

_BINARY_ONLY = "Only binary classification is supported"
"""How a classifier that cannot learn three classes starts its error (scikit-learn's words)."""


# -- which learner learns what --------------------------------------------------------------
def _fields(name: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(learner_class(name).config_class)}


def _field_default(name: str, field: str) -> Any:
    default = _fields(name)[field].default
    return None if default is dataclasses.MISSING else default


@functools.cache
def learner_tasks(name: str) -> tuple[str, ...]:
    """The tasks learner ``name`` can learn, in :data:`~okl_core.labels.TASKS` order.

    Read from its config class: a fixed ``task`` class attribute, a ``task`` field (the ridge
    learners: every value the config accepts), or a ``loss`` field (every loss the config
    accepts, by the loss's task).
    """
    config_class = learner_class(name).config_class
    fields = _fields(name)
    task = getattr(config_class, "task", None)
    if isinstance(task, str) and "task" not in fields:
        return (task,)
    if "task" in fields:
        found = {t for t in TASKS if _accepts(name, task=t)}
    elif "loss" in fields:
        found = {make_loss(loss).task for loss in loss_names() if _accepts(name, loss=loss)}
    else:
        found = set()
    return tuple(t for t in TASKS if t in found)


def _accepts(name: str, **values: Any) -> bool:
    """Whether ``name``'s config takes ``values`` (with its conformance parameters for the rest)."""
    cls = learner_class(name)
    params = {**cls.conformance_params, "n_inputs": 1, **values}
    if "n_classes" in _fields(name):
        params["n_classes"] = 3
    try:
        cls.config_class(**params)
    except ValueError:
        return False
    return True


def _multiclass_variant(name: str) -> str | None:
    """``mNAME`` when it is registered and multiclass, else None."""
    variant = "m" + name
    return variant if variant in learner_names() and learner_tasks(variant) == ("multiclass",) else None


def _regression_variant(name: str) -> str | None:
    """``NAME_r`` when it is registered and learns regression, else None."""
    variant = name + "_r"
    return variant if variant in learner_names() and "regression" in learner_tasks(variant) else None


def classifier_learner(name: str, n_classes: int) -> str:
    """The registered learner :class:`OnlineKernelClassifier` runs for ``learner=name`` on ``n_classes`` classes.

    Raises
    ------
    ValueError
        Unknown name, fewer than 2 classes, or a learner that cannot classify that many.
    """
    tasks = learner_tasks(name)
    if n_classes < 2:
        raise ValueError(f"{name}: a classifier needs at least 2 classes, got {n_classes} class")
    if not set(tasks) & set(_CLASSIFICATION):
        raise ValueError(f"{name} learns {'/'.join(tasks)}, not classification; OnlineKernelClassifier takes {_names('classifier')}")
    if n_classes == 2 or "multiclass" in tasks:
        return name
    variant = _multiclass_variant(name)
    if variant is None:
        raise ValueError(f"{_BINARY_ONLY}: {name} has no multiclass variant; got {n_classes} classes")
    return variant


def regressor_learner(name: str) -> str:
    """The registered learner :class:`OnlineKernelRegressor` runs for ``learner=name``.

    Raises
    ------
    ValueError
        Unknown name, or a learner with no regression version.
    """
    if "regression" in learner_tasks(name):
        return name
    variant = _regression_variant(name)
    if variant is None:
        raise ValueError(f"{name} has no regression version; OnlineKernelRegressor takes {_names('regressor')}")
    return variant


def _names(kind: str) -> list[str]:
    """The names an estimator of ``kind`` ('classifier' or 'regressor') accepts."""
    out = []
    for name in learner_names():
        tasks = set(learner_tasks(name))
        if kind == "classifier" and tasks & set(_CLASSIFICATION):
            out.append(name)
        if kind == "regressor" and ("regression" in tasks or _regression_variant(name)):
            out.append(name)
    return out


def learner_table() -> list[dict[str, str]]:
    """One row per registered learner: what each estimator runs for it.

    Keys ``learner``, ``two_classes``, ``more_classes`` (the classifier's learner, or ``''``
    when it cannot) and ``regression`` (the regressor's, or ``''``).
    """
    rows = []
    for name in learner_names():
        rows.append({
            "learner": name,
            "two_classes": _or_empty(classifier_learner, name, 2),
            "more_classes": _or_empty(classifier_learner, name, 3),
            "regression": _or_empty(regressor_learner, name),
        })
    return rows


def _or_empty(function: Any, *args: Any) -> str:
    try:
        return function(*args)
    except ValueError:
        return ""


def _parameter_names(kind: str) -> list[str]:
    """Every config field of the learners an estimator of ``kind`` runs, less :data:`_FROM_DATA`, sorted."""
    names: set[str] = set()
    for name in _names(kind):
        resolved = [name, _multiclass_variant(name)] if kind == "classifier" else [regressor_learner(name)]
        for learner in filter(None, resolved):
            names |= set(_fields(learner))
    return sorted(names - set(_FROM_DATA), key=str.lower)


def _loss_for(name: str, loss: str | None, task: str) -> str | None:
    """The loss a loss-driven learner gets for ``task`` (None for learners without a loss)."""
    if "loss" not in _fields(name):
        return None
    if loss is not None:
        return loss
    default = _field_default(name, "loss")
    return default if default is not None and make_loss(default).task == task else _TASK_LOSS[task]


def _build(name: str, task: str, params: Mapping[str, Any], n_inputs: int, n_classes: int | None,
           rows: np.ndarray | None = None) -> Learner:
    """Learner ``name`` for ``task`` from the estimator's parameters (None: the learner's default).

    ``rows`` (the first rows learned) resolve the learner's data-derived defaults and values
    such as ``sigma="median"`` (:mod:`okl_core.derived`); with fewer than 2 rows a default
    keeps its configured number.
    """
    fields = _fields(name)
    accepted = accepted_params(name)
    given = {k: v for k, v in params.items() if v is not None and k in accepted}  # the others are other learners'
    given = _derived(name, given, rows)
    given["n_inputs"] = n_inputs
    if "task" in fields:
        given["task"] = task
    loss = _loss_for(name, given.get("loss"), task)
    if loss is not None:
        given["loss"] = loss
    multiclass = learner_tasks(name) == ("multiclass",) or (loss is not None and make_loss(loss).task == "multiclass")
    if "n_classes" in fields and n_classes is not None and multiclass:
        given["n_classes"] = n_classes
    if "horizon" in fields and "horizon" not in given:
        raise ValueError(f"{name} needs horizon, the number of rows it will learn (fit uses the number of rows given)")
    learner = learner_class(name).from_params(**given)
    if learner.task == "binary" and task == "multiclass":
        raise ValueError(f"{_BINARY_ONLY}: {name} with loss {loss!r} learns two classes (loss 'softmax' learns more)")
    if learner.task != task and not (learner.task == "multiclass" and task == "binary"):
        raise ValueError(f"{name} with loss {loss!r} learns {learner.task}, not {task}")
    return learner


def _derived(name: str, given: dict, rows: np.ndarray | None) -> dict:
    """``given`` with ``sigma`` as a dictionary's unit, the data defaults (not the horizon: fit
    sets it) and the derived values (``"median"``...) resolved on ``rows`` (okl_core.derived)."""
    fields = _fields(name)
    given = dict(given)
    if "sigma" in given and "sigma" not in fields:  # a multi-kernel learner: sigma is its dictionary's unit
        if "kernels" in given:
            raise ValueError(f"{name}: give sigma (the unit of the default dictionary) or kernels, not both")
        given["kernels"] = scaled_dictionary(str(fields["kernels"].default), given.pop("sigma"))
    enough = rows is not None and len(rows) >= 2
    if enough:
        for key, value in data_defaults(name).items():
            if key != "horizon":
                given.setdefault(key, value)
    if unresolved(given):
        if not enough:
            raise ValueError(f"{name}: {', '.join(f'{k}={given[k]!r}' for k in unresolved(given))} is derived from the "
                             "data and needs at least 2 rows in the first call")
        resolved = resolve_params(name, given, rows)
        given = {key: resolved[key] for key in given}
    return given


def expected_failed_checks(estimator: BaseEstimator) -> dict[str, str]:
    """The scikit-learn checks ``estimator`` is known to fail, each with the reason.

    For ``sklearn.utils.estimator_checks.check_estimator(estimator,
    expected_failed_checks=expected_failed_checks(estimator))`` and ``parametrize_with_checks``.
    Learners on random Fourier features (and ``dsg`` in its default float32 precision) compute
    scores in float32: a row's score may then differ in its last float32 bits with the rows
    computed beside it in one matrix product, beyond the checks' relative tolerance of 1e-7.
    The ``dsg`` regressor learns too slowly for ``check_regressors_train`` (R^2 > 0.5 after one
    pass over 200 rows).
    """
    kind = "classifier" if isinstance(estimator, OnlineKernelClassifier) else "regressor"
    try:
        name = classifier_learner(estimator.learner, 2) if kind == "classifier" else regressor_learner(estimator.learner)
    except ValueError:
        return {}
    fields = _fields(name)
    failing = {}
    if name == "dsg" and kind == "regressor":
        failing["check_regressors_train"] = (
            "one fit is one online pass: dsg's doubly stochastic steps reach R^2 of about 0.45 after the "
            "check's 200 rows, below its 0.5"
        )
    precision = getattr(estimator, "precision", None) or _field_default(name, "precision") if "precision" in fields else None
    if "n_components" in fields or precision == "float32":
        reason = (
            f"{name} computes scores in float32: a row's score can differ in its last bits with the rows "
            "beside it in a matrix product, beyond the check's rtol of 1e-7"
        )
        failing.update({"check_methods_subset_invariance": reason, "check_methods_sample_order_invariance": reason})
    return failing


# -- the estimators -------------------------------------------------------------------------
class _OnlineKernelEstimator(BaseEstimator):
    """What both estimators share: parameters, data checks, the online state."""

    _kind: ClassVar[str] = ""
    _parameters: ClassVar[tuple[str, ...]] = ()
    learner_: Learner
    state_: Any  # the learner's state (a NamedTuple of arrays)

    def _learner_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._parameters}

    def _check_X(self, X: Any, reset: bool) -> np.ndarray:
        return validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], order="C")

    def _check_Xy(self, X: Any, y: Any, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        return validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32], order="C", y_numeric=self._kind == "regressor")

    def _learn(self, X: np.ndarray, targets: np.ndarray) -> None:
        """Update the state with rows ``X`` (okl targets), in order."""
        learner = self.learner_
        learner.check_stream(int(self.state_.n_seen) + len(X))
        self.state_, _ = learner.update(self.state_, X, targets)

    def _scores(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "state_")
        X = self._check_X(X, reset=False)
        return np.asarray(self.learner_.predict(self.state_, X))

    def _start(self, name: str, task: str, X: np.ndarray, n_classes: int | None, n_rows: int | None) -> None:
        params = self._learner_params()
        if n_rows is not None and "horizon" in _fields(name) and params.get("horizon") is None:
            params["horizon"] = max(n_rows, 2)  # the pipelines' rule: the rows of the data set
        self.learner_ = _build(name, task, params, X.shape[1], n_classes, rows=X)
        self.state_ = self.learner_.init()

    def __getstate__(self) -> dict[str, Any]:
        # A learner object may hold caches and closures (OKS's losses); its name and config
        # rebuild it, so a pickle holds the configuration and the state's arrays only.
        state = dict(super().__getstate__())
        learner = state.pop("learner_", None)
        if learner is not None:
            state["_learner_config"] = (learner.name, dataclasses.asdict(learner.config))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        saved = state.pop("_learner_config", None)
        if saved is not None:
            name, config = saved
            cls = learner_class(name)
            state["learner_"] = cls(cls.config_class(**config))
        super().__setstate__(state)


def _estimator_init(parameters: Sequence[str], default_learner: str) -> Any:
    """An ``__init__`` whose signature is ``(self, learner=default_learner, *, <parameters>=None)``.

    scikit-learn reads parameters from the signature (module docstring); this builds it from
    the registry. Python's own argument binding refuses unknown or positional extras.
    """
    kind = inspect.Parameter
    signature = inspect.Signature(
        [kind("self", kind.POSITIONAL_OR_KEYWORD), kind("learner", kind.POSITIONAL_OR_KEYWORD, default=default_learner)]
        + [kind(p, kind.KEYWORD_ONLY, default=None) for p in parameters]
    )

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    return __init__


class OnlineKernelClassifier(ClassifierMixin, _OnlineKernelEstimator):
    """A scikit-learn classifier learning online with any okl learner (module docstring).

    Parameters
    ----------
    learner : str, default 'fogd'
        A registered learner that classifies; a binary one switches to its multiclass
        variant on three or more classes (:func:`classifier_learner`, :func:`learner_table`).
    **parameters : keyword-only, default None
        Every parameter of every classification learner (``sigma``, ``eta``, ``budget``,
        ``n_components``, ``kernel``, ``loss``, ``seed``, ...; see each learner's config class).
        None leaves the learner's default; a parameter the chosen learner does not take is
        ignored (``learner_.config`` holds what was used). A learner with a ``horizon``
        (``oks``, ``ioks``, ``rf_ioks``) takes the number of rows from ``fit``; ``partial_fit``
        needs it given.

    Attributes
    ----------
    classes_ : ndarray
        The labels, sorted; okl codes are ``-1, +1`` (binary learners) or ``0..C-1``.
    learner_ : okl_core.learners.base.Learner
        The learner built at ``fit`` (its full configuration: ``learner_.config``).
    state_ : NamedTuple
        Its state after the rows learned (``state_.n_seen`` rows).
    n_features_in_ : int
        Number of features.
    feature_names_in_ : ndarray
        Column names, when ``X`` had string column names.
    """

    _kind = "classifier"
    _parameters = tuple(_parameter_names("classifier"))
    __init__ = _estimator_init(_parameters, "fogd")

    def fit(self, X: Any, y: Any) -> OnlineKernelClassifier:
        """Learn the rows in order, from the learner's initial state (one online pass).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Any labels; ``classes_`` = their sorted unique values.

        Returns
        -------
        self
        """
        X, y = self._check_Xy(X, y, reset=True)
        check_classification_targets(y)
        self._begin(np.unique(y), X, len(X))
        self._learn(X, self._codes(y))
        return self

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> OnlineKernelClassifier:
        """Learn the next rows of the stream, in order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like, optional
            Every label the stream holds: required on the first call (it fixes binary or
            multiclass and the codes); later, when given, it must be the same.

        Returns
        -------
        self
        """
        first = not hasattr(self, "state_")
        X, y = self._check_Xy(X, y, reset=first)
        check_classification_targets(y)
        if first:
            if classes is None:
                raise ValueError("partial_fit: the first call needs classes=, every label the stream holds")
            self._begin(np.unique(np.asarray(classes)), X, None)
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(f"partial_fit: classes {np.unique(np.asarray(classes)).tolist()} differ from classes_ {self.classes_.tolist()} of the first call")
        self._learn(X, self._codes(y))
        return self

    def _begin(self, classes: np.ndarray, X: np.ndarray, n_rows: int | None) -> None:
        name = classifier_learner(self.learner, len(classes))
        task = "binary" if len(classes) == 2 else "multiclass"
        self.classes_ = classes
        self._start(name, task, X, len(classes), n_rows)

    def _multiclass_codes(self) -> bool:
        return self.learner_.task == "multiclass"

    def _codes(self, y: np.ndarray) -> np.ndarray:
        """okl codes of labels ``y``; ValueError naming the first label not in ``classes_``."""
        index = np.searchsorted(self.classes_, y)
        index = np.minimum(index, len(self.classes_) - 1)
        unknown = self.classes_[index] != y
        if unknown.any():
            row = int(np.argmax(unknown))
            label = y[row].item() if isinstance(y[row], np.generic) else y[row]
            raise ValueError(f"row {row}: label {label!r} is not one of classes_ {self.classes_.tolist()}")
        if self._multiclass_codes():
            return index.astype(np.int32)
        return np.where(index == 1, 1, -1).astype(np.int32)

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores: shape (n,) for two classes (> 0: ``classes_[1]``), (n, C) otherwise."""
        scores = self._scores(X)
        if scores.ndim == 2 and len(self.classes_) == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def predict(self, X: Any) -> np.ndarray:
        """Labels: the learner's (sign, 0 -> ``classes_[1]``; first argmax), as ``classes_`` values."""
        return self._labels(self._scores(X))

    def _labels(self, scores: np.ndarray) -> np.ndarray:
        """``classes_`` values of the learner's scores."""
        codes = self.learner_.to_labels(scores)
        index = codes if self._multiclass_codes() else (codes > 0).astype(np.intp)
        return self.classes_[index]

    def _has_probabilities(self) -> bool:
        """Whether the loss the learner uses (or would use on two classes) defines probabilities."""
        if hasattr(self, "learner_"):
            return getattr(self.learner_.config, "loss", None) in _PROBABILITY_LOSSES
        try:
            name = classifier_learner(self.learner, 2)
        except ValueError:
            return False
        return _loss_for(name, getattr(self, "loss", None), "binary") in _PROBABILITY_LOSSES

    @available_if(_has_probabilities)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Probability of each class (columns in ``classes_`` order): the logistic or softmax of the scores."""
        return _probabilities(self._scores(X))

    @available_if(_has_probabilities)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self._learns_more_classes()
        return tags

    def _learns_more_classes(self) -> bool:
        """Whether the named learner (with its loss) learns three or more classes."""
        try:  # a bad name is reported by fit
            name = classifier_learner(self.learner, 3)
        except ValueError:
            return False
        loss = _loss_for(name, getattr(self, "loss", None), "multiclass")
        return loss is None or make_loss(loss).task == "multiclass"


def _probabilities(scores: np.ndarray) -> np.ndarray:
    """Class probabilities of logistic (``(n,)``) or softmax (``(n, C)``) scores, float64 (as ``okl predict`` writes them)."""
    probabilities = probabilities_from_scores("sigmoid" if scores.ndim == 1 else "softmax", scores)
    assert probabilities is not None  # both links are defined
    return probabilities


class OnlineKernelRegressor(RegressorMixin, _OnlineKernelEstimator):
    """A scikit-learn regressor learning online with any okl learner (module docstring).

    Parameters
    ----------
    learner : str, default 'fogd_r'
        A registered learner that regresses, or a classification learner with a regression
        sibling (``fogd`` -> ``fogd_r``; :func:`regressor_learner`).
    **parameters : keyword-only, default None
        Every parameter of every regression learner; None leaves the learner's default
        (as for :class:`OnlineKernelClassifier`).

    Attributes
    ----------
    learner_, state_, n_features_in_, feature_names_in_ :
        As for :class:`OnlineKernelClassifier`.
    """

    _kind = "regressor"
    _parameters = tuple(_parameter_names("regressor"))
    __init__ = _estimator_init(_parameters, "fogd_r")

    def fit(self, X: Any, y: Any) -> OnlineKernelRegressor:
        """Learn the rows in order, from the learner's initial state (one online pass).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Finite targets.

        Returns
        -------
        self
        """
        X, y = self._check_Xy(X, y, reset=True)
        self._start(regressor_learner(self.learner), "regression", X, None, len(X))
        self._learn(X, y.astype(np.float64))
        return self

    def partial_fit(self, X: Any, y: Any) -> OnlineKernelRegressor:
        """Learn the next rows of the stream, in order (the first call starts the model).

        Returns
        -------
        self
        """
        first = not hasattr(self, "state_")
        X, y = self._check_Xy(X, y, reset=first)
        if first:
            self._start(regressor_learner(self.learner), "regression", X, None, None)
        self._learn(X, y.astype(np.float64))
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predicted targets (float64)."""
        return self._scores(X).astype(np.float64)


# -- River-style adapter ---------------------------------------------------------------------
class OnlineLearner:
    """River-style ``learn_one`` / ``predict_one`` over dict rows, on an okl estimator.

    Each row is a dict of feature name -> number. The feature order is ``features`` when given,
    else the first row's keys, sorted; every later row must hold exactly those keys (a missing
    or unknown key is a ValueError naming it). ``learn_one`` is :meth:`partial_fit` on one row,
    so learning rows one by one gives the state ``partial_fit`` gives on the same rows in order
    (for every learner whose update is the row-by-row fold; ``dsg`` learns each row as a
    mini-batch of one).

    Parameters
    ----------
    estimator : OnlineKernelClassifier or OnlineKernelRegressor
        Unfitted; cloned, so the one given stays untouched.
    classes : sequence, optional
        Classifier: every label the stream holds (required: it fixes binary or multiclass).
    features : sequence of str, optional
        The feature order.

    Attributes
    ----------
    estimator_ : the clone that learns (``estimator_.state_``, ``estimator_.classes_``).
    features_ : tuple of str or None (before the first row).
    """

    def __init__(self, estimator: _OnlineKernelEstimator, classes: Sequence[Hashable] | None = None, features: Iterable[str] | None = None):
        from sklearn.base import clone

        self.estimator_: Any = clone(estimator)
        self.is_classifier = isinstance(estimator, OnlineKernelClassifier)
        if self.is_classifier and classes is None:
            raise ValueError("OnlineLearner: a classifier needs classes=, every label the stream holds")
        self.classes = None if classes is None else list(classes)
        self.features_: tuple[str, ...] | None = None
        if features is not None:
            self._set_features(tuple(features))

    def _set_features(self, features: tuple[str, ...]) -> None:
        self.features_ = features
        self._known = frozenset(features)

    def _row(self, x: Mapping[str, Any]) -> np.ndarray:
        if self.features_ is None:
            self._set_features(tuple(sorted(x)))
        features = self.features_ or ()
        if len(x) != len(features) or not self._known.issuperset(x):
            missing = [k for k in features if k not in x]
            what = f"missing feature {missing[0]!r}" if missing else f"unknown feature {next(k for k in x if k not in self._known)!r}"
            raise ValueError(f"OnlineLearner: {what}; rows hold {list(features)}")
        try:
            return np.array([[x[k] for k in features]], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"OnlineLearner: feature values must be numbers ({err})") from None

    def learn_one(self, x: Mapping[str, Any], y: Any) -> OnlineLearner:
        """Learn one row (predict, score, then learn: the learner's online protocol)."""
        row = self._row(x)
        estimator = self.estimator_
        if not self._fitted():  # the first row builds the learner through partial_fit's checks
            if self.is_classifier:
                estimator.partial_fit(row, [y], classes=self.classes)
            else:
                estimator.partial_fit(row, [y])
            return self
        # Later rows skip scikit-learn's input validation (most of a row's cost): the learner's
        # update still checks the row's width and values and the label, and learns the same row.
        targets = estimator._codes(np.asarray([y])) if self.is_classifier else np.asarray([y], dtype=np.float64)
        estimator._learn(row, targets)
        return self

    def _fitted(self) -> bool:
        return hasattr(self.estimator_, "state_")

    def _scores(self, row: np.ndarray) -> np.ndarray:
        return np.asarray(self.estimator_.learner_.predict(self.estimator_.state_, row))

    def predict_one(self, x: Mapping[str, Any]) -> Any:
        """The label (classifier) or target (regressor) of row ``x``; None before the first ``learn_one``."""
        row = self._row(x)
        if not self._fitted():
            return None
        scores = self._scores(row)
        value = self.estimator_._labels(scores)[0] if self.is_classifier else float(scores[0])
        return value.item() if isinstance(value, np.generic) else value

    def predict_proba_one(self, x: Mapping[str, Any]) -> dict[Any, float]:
        """``{label: probability}`` of row ``x`` (``{}`` before the first ``learn_one``).

        Raises
        ------
        AttributeError
            The learner's loss defines no probabilities (as ``predict_proba``).
        """
        if not (self.is_classifier and hasattr(self.estimator_, "predict_proba")):
            raise AttributeError(f"{self.estimator_.learner}: its loss defines no probabilities (logistic and softmax do)")
        row = self._row(x)
        if not self._fitted():
            return {}
        p = _probabilities(self._scores(row))[0]
        return {(c.item() if isinstance(c, np.generic) else c): float(v) for c, v in zip(self.estimator_.classes_, p)}
