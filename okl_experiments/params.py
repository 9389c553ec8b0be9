"""Learner parameters from a data set: the one place values are derived from data.

Every command that builds a learner for a data set -- ``pipelines.train``, the sweeps,
the reproductions, ``pipelines.report run`` -- goes through :func:`learner_params`
(``pipelines.predict``, whose model is built, checks the data with :func:`check_data_fits`):

* ``n_inputs`` (and ``n_classes`` for multiclass data) come from the data; a value given
  for them must agree;
* a learner's defaults derived from the data (its config's ``data_defaults``: the median
  heuristic for a bandwidth, ``horizon = "n"``) apply where no value is given
  (:func:`okl_core.derived.complete_params`);
* a string value in the mini-language of :mod:`okl_core.derived` (``"median"``,
  ``"<k>*median"``, ``"n"``, ``"<c>/n"``) is replaced by a number computed on the data
  (:func:`resolve_value`); any other string (a loss, a kernel) is left as it is.

The median is taken over the rows :class:`DataFacts` provides: an experiment's data set in
memory (subsampled to :data:`MEDIAN_ROWS` rows with :func:`okl_core.median_heuristic`'s
fixed seed), or the first :data:`MEDIAN_ROWS` rows of the stream for ``pipelines.train``
(which never loads a whole data set). Values are not rounded.

Batch sizes: :func:`batch_rows_for` rounds the rows per ``update`` call up to a multiple of
a mini-batch learner's ``batch_size`` (:func:`okl_core.evaluation.effective_batch_rows`)
and says so when that changes a requested value. Learner configurations are read from and
written to one JSON format, ``{"learner": name, "params": {...}}`` (:func:`read_learner_config`,
:func:`learner_config`), the sweep's ``best.json`` and ``pipelines.train --config``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

import numpy as np

import okl_core
from okl_core.derived import MEDIAN_ROWS, accepted_params, complete_params
from okl_core.derived import resolve_value as resolve_derived
from okl_core.evaluation import effective_batch_rows
from okl_core.learners.multikernel import parse_kernel_dictionary
from okl_experiments.text import read_json

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "MEDIAN_ROWS",
    "DataFacts",
    "resolve_value",
    "resolve_values",
    "learner_params",
    "build_learner",
    "check_fit",
    "check_task",
    "check_data_fits",
    "derived_values",
    "derived_line",
    "batch_rows_for",
    "minibatch_rows",
    "learner_config",
    "read_learner_config",
]

logger = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 4096
"""Rows per ``update`` call unless told otherwise (okl's writer uses row groups of 4096 too)."""


@dataclasses.dataclass(frozen=True, eq=False)
class DataFacts:
    """What learner parameters are derived from: a data set's shape and, when asked, rows.

    Attributes
    ----------
    n_features, task, n_classes, n_rows : the data set's description.
    rows : callable, optional
        Returns the rows the median heuristic uses; called at most once per distance.
    name : str
        How messages name the data set.
    """

    n_features: int
    task: str
    n_classes: int | None = None
    n_rows: int | None = None
    rows: Callable[[], np.ndarray] | None = None
    name: str = "the data"
    _medians: dict = dataclasses.field(default_factory=dict, repr=False)

    def median(self, metric: str = "euclidean") -> float:
        """The median heuristic on :attr:`rows` (computed once per metric)."""
        if metric not in self._medians:
            rows = None if self.rows is None else self.rows()
            if rows is None or len(rows) < 2:
                raise ValueError(f'"median" needs at least 2 good rows in {self.name}')
            self._medians[metric] = okl_core.median_heuristic(rows, n_samples=MEDIAN_ROWS, metric=metric)
            logger.info("median %s distance of %s = %.6g", metric, self.name, self._medians[metric])
        return self._medians[metric]


def resolve_value(name: str, value: Any, facts: DataFacts, kernel: str | None = None) -> Any:
    """``value`` with the mini-language (:mod:`okl_core.derived`) resolved on ``facts``.

    Raises
    ------
    ValueError
        A string that mentions ``median`` or ``n`` but is not one of the forms.
    """
    return resolve_derived(name, value, facts.median, facts.n_rows, kernel, facts.name)


def resolve_values(values: dict, facts: DataFacts) -> dict:
    """Every value of ``values`` through :func:`resolve_value` (``kernel`` picks the median's distance)."""
    kernel = values.get("kernel")
    return {name: resolve_value(name, value, facts, kernel) for name, value in values.items()}


def learner_params(learner: str, values: dict, facts: DataFacts) -> dict:
    """Parameters of ``learner`` for ``values`` on the data ``facts`` describes.

    Adds ``n_inputs`` (and ``n_classes`` for multiclass data, when the learner has one) and
    the learner's data defaults where no value is given (a ``horizon`` of the number of
    rows, a ``sigma`` of the median heuristic...), and resolves data-derived values. Nothing is validated beyond that: :func:`build_learner`
    (or ``okl_core.make_learner``) does.

    Raises
    ------
    ValueError
        ``values`` set ``n_inputs`` / ``n_classes`` to another value than the data's, or
        a data-derived value is malformed.
    """
    fields = {f.name for f in dataclasses.fields(okl_core.learner_class(learner).config_class)}
    derived: dict[str, int | None] = {"n_inputs": facts.n_features}
    if facts.task == "multiclass" and "n_classes" in fields:
        derived["n_classes"] = facts.n_classes
    for name, value in derived.items():
        if name in values and values[name] != value:
            raise ValueError(f"{name}={values[name]!r} contradicts {facts.name} ({name} = {value})")
    return {**resolve_values(complete_params(learner, values), facts), **derived}


def derived_values(given: dict, resolved: dict) -> dict:
    """The values of ``given`` that were derived from the data: name -> (as given, resolved).

    ``resolved`` is the learner's configuration (``learner.describe()["config"]``).
    """
    out = {}
    for name, value in given.items():
        if isinstance(value, str) and name in resolved and resolved[name] != value:
            out[name] = (value, resolved[name])
    return out


def _derived_part(name: str, given, value) -> str:
    if name == "kernels":
        widths = [sigma for _, sigma in parse_kernel_dictionary(value)]
        return f"kernels={len(widths)} bandwidths {min(widths):.4g}..{max(widths):.4g} (median-scaled)"
    return f"{name}={value:.4g} ({given})" if isinstance(value, float) else f"{name}={value} ({given})"


def derived_line(derived: dict, n_rows: int | None = None) -> str:
    """``sigma=4.21 (median), nu=3.1e-07 (0.01/n), n=32,561 rows``: what the data decided.

    A kernel dictionary reads ``kernels=6 bandwidths 0.98..31.4 (median-scaled)``.
    """
    parts = [_derived_part(name, given, value) for name, (given, value) in sorted(derived.items())]
    if n_rows is not None:
        parts.append(f"n={n_rows:,} rows")
    return ", ".join(parts)


def _task_mismatch(name: str, task: str, facts: DataFacts) -> ValueError:
    return ValueError(
        f"learner {name} is set up for {task} data but {facts.name} holds {facts.task} data; "
        f"pick a {facts.task} learner or set its task parameters (e.g. dsg loss=...)"
    )


def check_fit(name: str, values: dict, facts: DataFacts) -> None:
    """Refuse, before anything runs, parameters ``name`` does not have and a learner whose
    task is fixed to another one than the data's (the messages :func:`build_learner` gives).

    Raises
    ------
    ValueError
    """
    cls = okl_core.learner_class(name)
    fields = accepted_params(name)
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ValueError(f"{name}: unknown parameter(s) {unknown}; valid: {sorted(fields)}")
    fixed_task = getattr(cls.config_class, "task", None)  # a class attribute, or a property
    if isinstance(fixed_task, str) and fixed_task != facts.task:
        raise _task_mismatch(name, fixed_task, facts)


def check_task(learner: okl_core.Learner, facts: DataFacts) -> None:
    """Refuse a learner set up for another task than the data's (e.g. ``dsg`` with a regression loss)."""
    if learner.task != facts.task:
        raise _task_mismatch(learner.name, learner.task, facts)


def check_data_fits(learner: okl_core.Learner, facts: DataFacts) -> None:
    """Refuse data a built model cannot score: another feature count or task (``pipelines.predict``).

    Raises
    ------
    ValueError
    """
    if facts.n_features != learner.config.n_inputs:
        raise ValueError(f"the model takes {learner.config.n_inputs} features, {facts.name} has {facts.n_features}")
    if learner.task != facts.task:
        raise ValueError(f"the model ({learner.name}) predicts {learner.task} labels but {facts.name} holds {facts.task} data")


def build_learner(name: str, values: dict, facts: DataFacts) -> okl_core.Learner:
    """The learner ``name`` with :func:`learner_params`, checked against the data's task.

    Raises
    ------
    ValueError
        Unknown parameters, invalid values, or a learner for another task than the data's.
    """
    check_fit(name, values, facts)
    learner = okl_core.make_learner(name, **learner_params(name, values, facts))
    check_task(learner, facts)
    return learner


def minibatch_rows(learner: okl_core.Learner) -> int:
    """The learner's mini-batch (``batch_size`` of a learner defined on mini-batches), else 1."""
    return effective_batch_rows(learner, 1)


_WARNED: set = set()


def batch_rows_for(learner: okl_core.Learner, requested: int | None = None) -> int:
    """Rows per ``update`` call: ``requested`` (default :data:`DEFAULT_BATCH_ROWS`) rounded up
    to a multiple of the learner's mini-batch, so that no batch ends in a short mini-batch.

    A requested value that had to change is logged as a warning (once per process and value).
    """
    rows = effective_batch_rows(learner, requested or DEFAULT_BATCH_ROWS)
    if requested is not None and rows != requested and (learner.name, requested, rows) not in _WARNED:
        _WARNED.add((learner.name, requested, rows))
        logger.warning("batch_rows %d is not a multiple of %s's batch_size %d: rounded up to %d",
                       requested, learner.name, minibatch_rows(learner), rows)
    return rows


def learner_config(learner: okl_core.Learner) -> dict:
    """``{"learner": name, "params": {...}}`` with the complete configuration of ``learner``."""
    return {"learner": learner.name, "params": dataclasses.asdict(learner.config)}


def read_learner_config(path: str) -> tuple[str | None, dict]:
    """``(learner name, params)`` of a configuration file (:func:`learner_config`'s format).

    Raises
    ------
    ValueError
        The file cannot be read or is not of that format.
    """
    config = read_json(path)
    if not isinstance(config, dict) or not isinstance(config.get("params", {}), dict):
        raise ValueError(f'{path}: expected {{"learner": name, "params": {{...}}}}')
    return config.get("learner"), dict(config.get("params", {}))
