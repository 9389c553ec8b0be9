"""Checking parameter values: a config against its learner's declarations, and single values.

:func:`validate_config` checks every field of a learner's config against the declarations of
:mod:`okl_core.parameters` (each field's constraint, as that learner reads it, then the
relations between fields) and raises the first refusal as a one-line ValueError naming the
parameter and its valid values. :class:`~okl_core.learners.base.CheckedConfig` runs it when a
config is made, so the config classes declare their fields and write no range checks.

The ``check_*`` functions check one value by the same constraints, for what is not a learner
config (feature specs, kernels, data generators, writers). This module sits below the feature
maps, kernels and learners: it imports only :mod:`okl_core.parameters` and numpy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from okl_core.parameters import BANDWIDTH, NONNEGATIVE, POSITIVE, SEEDS, Boolean, Constraint, Interval, declaration, relations

__all__ = [
    "check_bandwidth",
    "check_bool",
    "check_choice",
    "check_fraction",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_seed",
    "plain_scalars",
    "validate_config",
]

_FRACTION = Interval(0.0, 1.0, low_closed=False)


def _check(constraint: Constraint, name: str, value: Any) -> None:
    """Raise the constraint's one-line refusal of ``value`` as a ValueError."""
    refusal = constraint.refusal(name, value)
    if refusal is not None:
        raise ValueError(refusal)


def validate_config(config: Any, learner: str) -> None:
    """Raise ValueError unless every field of ``config`` is valid as learner ``learner`` declares it.

    Fields are checked in their order, then the learner's relations between fields; the
    first refusal is raised. A field that takes ``None`` (its declaration says what None
    means) is not checked when None. Undeclared fields (a test's config) are not checked.
    """
    values = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    for name, value in values.items():
        declared = declaration(learner, name)
        if declared is None or (value is None and declared.none_means):
            continue
        _check(declared.constraint, name, value)
    for relation in relations(learner):
        refusal = relation.refusal(values)
        if refusal is not None:
            raise ValueError(refusal)


def plain_scalars(config: Any) -> None:
    """Turn a frozen config's numpy scalar fields into Python ones, in place (before the checks).

    ``np.int64(32)`` or ``np.float32(1.0)`` (from an array, a grid, a DataFrame) then passes
    the checks as its value, and the config stays JSON-ready (model-file headers).
    """
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            object.__setattr__(config, field.name, value.item())


def check_int(name: str, value: Any, minimum: int = 0) -> None:
    """Raise ValueError unless ``value`` is an int (not bool) ``>= minimum``."""
    _check(Interval(minimum, integer=True), name, value)


def check_seed(name: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is an int in ``[0, 2**64)`` (a generator key)."""
    _check(SEEDS, name, value)


def check_bandwidth(name: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is a number in :data:`okl_core.parameters.BANDWIDTH`: [1e-30, 1e30]."""
    _check(BANDWIDTH, name, value)


def check_positive(name: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is a finite number > 0."""
    _check(POSITIVE, name, value)


def check_nonnegative(name: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is a finite number >= 0."""
    _check(NONNEGATIVE, name, value)


def check_fraction(name: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is a number in (0, 1]."""
    _check(_FRACTION, name, value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is a bool."""
    _check(Boolean(), name, value)
