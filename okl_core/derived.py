"""Parameter values derived from the data: the ``median`` / ``n`` mini-language and data defaults.

A learner has no data when it is built, so a value that depends on the data -- a kernel
bandwidth from the median heuristic, a horizon equal to the number of rows -- is written
in a small language and resolved to a number *before* the learner is built, once, from
the data set (so that every shard of a run, and every rerun, gets the same number):

============================  ==========================================================
value                         resolved to
============================  ==========================================================
``"median"``                  the median heuristic (:func:`okl_core.median_heuristic`: the
                              median distance between rows, L1 for ``kernel="laplacian"``)
``"<k>*median"``              ``k`` times it (``"0.2*median"``)
``"n"``                       the number of training rows (e.g. a horizon ``T``)
``"<c>/n"``                   ``c`` divided by it (``"1/n"``, DSG's ``nu = "0.01/n"``)
============================  ==========================================================

A multi-kernel learner's ``kernels`` dictionary may give any bandwidth as ``<k>*median``
(``"gaussian:0.25*median,gaussian:2*median"``), and such a learner also takes ``sigma``:
the unit its default dictionary's bandwidths are multiples of (:func:`scaled_dictionary`),
so ``sigma="median"`` or ``sigma=2.0`` works for every kernel learner.

Data defaults
-------------
Where a paper fixes no value, or fixes one that only suits its own data's scale (FOGD's
sigma = 8 on features in [0, 1]), a learner's default is derived from the data: its config
class lists those defaults in ``data_defaults`` (e.g. ``{"sigma": "median"}``), applied by
:func:`complete_params` whenever the value is not given. The config field keeps a number,
used only by a learner built with no data at all (``make_learner(name, n_inputs=d)``).

Entry points: :func:`make_learner` (a learner by name, its parameters resolved on data ``X``
when given), :func:`resolve_params` (parameters of a learner for data ``X``), and for callers that hold only a
description of the data (``okl train`` reads the first rows of a stream), :func:`complete_params`
and :func:`resolve_value` with their own median.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable

import numpy as np

from okl_core.learners.base import Learner
from okl_core.registry import learner_class

__all__ = [
    "SYNTAX",
    "MEDIAN_ROWS",
    "is_derived",
    "resolve_value",
    "data_defaults",
    "config_data_defaults",
    "scaled_dictionary",
    "complete_params",
    "accepted_params",
    "resolve_params",
    "unresolved",
    "make_learner",
]

MEDIAN_ROWS = 1000
"""Rows the median heuristic is taken over."""

SYNTAX = 'expected a number, "median", "<k>*median", "n" or "<c>/n"'

_MEDIAN = re.compile(r"\s*(?:([0-9.eE+-]+)\s*\*\s*)?median\s*")
_PER_N = re.compile(r"\s*([0-9.eE+-]+)\s*/\s*n\s*")
_ENTRY_MEDIAN = re.compile(r"^\s*([a-z]+)\s*:\s*(?:(2\^[+-]?\d+|[0-9.eE+-]+)\s*\*\s*)?median\s*$")


def _number(text: str | None, default: float, name: str, value: str) -> float:
    try:
        number = float(text) if text else default
    except ValueError:
        number = None
    if number is None or not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{name}={value!r}: {SYNTAX}")
    return number


def _factor(token: str | None, name: str, value: str) -> float:
    """A dictionary entry's ``2^K`` or number before ``*median``."""
    if token and token.startswith("2^"):
        return math.ldexp(1.0, int(token[2:]))
    return _number(token, 1.0, name, value)


def is_derived(value: Any) -> bool:
    """Whether ``value`` is written in the mini-language (must be resolved on data first)."""
    if not isinstance(value, str):
        return False
    if _MEDIAN.fullmatch(value) or _PER_N.fullmatch(value) or value.strip() == "n":
        return True
    return "median" in value


def _resolve_dictionary(name: str, value: str, median: Callable[[str], float]) -> str:
    entries = []
    for raw in value.split(","):
        match = _ENTRY_MEDIAN.match(raw)
        if match is None:
            if "median" in raw:
                raise ValueError(f"{name}: entry {raw.strip()!r} is not KERNEL:<k>*median")
            entries.append(raw.strip())
            continue
        kernel = match.group(1)
        sigma = _factor(match.group(2), name, value) * median("l1" if kernel == "laplacian" else "euclidean")
        entries.append(f"{kernel}:{sigma!r}")
    return ",".join(entries)


def resolve_value(name: str, value: Any, median: Callable[[str], float], n_rows: int | None,
                  kernel: str | None = None, where: str = "the data") -> Any:
    """``value`` with the mini-language resolved (any other value is returned as it is).

    Parameters
    ----------
    name : str
        The parameter's name (``kernels`` is read as a dictionary; messages name it).
    value : any
    median : callable
        ``median(metric)``: the median heuristic of the data for ``'euclidean'`` or ``'l1'``.
    n_rows : int or None
        The number of training rows (None: unknown, ``"n"`` is refused).
    kernel : str, optional
        The learner's kernel: ``laplacian`` takes the L1 median.
    where : str
        How messages name the data.

    Raises
    ------
    ValueError
        A string that mentions ``median`` or ``n`` but is not one of the forms, or ``"n"``
        without a row count.
    """
    if not isinstance(value, str):
        return value
    if name == "kernels":
        return _resolve_dictionary(name, value, median) if "median" in value else value
    found = _MEDIAN.fullmatch(value)
    if found:
        return _number(found.group(1), 1.0, name, value) * median("l1" if kernel == "laplacian" else "euclidean")
    per_n = _PER_N.fullmatch(value)
    if value.strip() == "n" or per_n:
        if not n_rows:
            raise ValueError(f"{name}={value!r}: the number of rows of {where} is not known")
        return n_rows if not per_n else _number(per_n.group(1), 1.0, name, value) / n_rows
    if "median" in value or re.search(r"/\s*n\s*$", value):
        raise ValueError(f"{name}={value!r}: {SYNTAX}")
    return value


def data_defaults(name: str) -> dict:
    """Learner ``name``'s defaults derived from the data (its config's ``data_defaults``)."""
    return config_data_defaults(learner_class(name).config_class)


def config_data_defaults(config_class: type) -> dict:
    """The ``data_defaults`` of a config class and its bases together (a subclass's entries win)."""
    defaults: dict = {}
    for cls in reversed(config_class.__mro__):
        defaults.update(vars(cls).get("data_defaults", {}))
    return defaults


def _fields(name: str) -> dict:
    return {f.name: f for f in dataclasses.fields(learner_class(name).config_class)}


def scaled_dictionary(kernels: str, sigma: Any) -> str:
    """The dictionary ``kernels`` with every bandwidth multiplied by ``sigma``.

    ``sigma`` is a number or ``"<k>*median"`` / ``"median"``; a dictionary ``2^-2 .. 2^3``
    with ``sigma="median"`` becomes ``2^-2*median .. 2^3*median`` (resolved by
    :func:`resolve_value`).
    """
    from okl_core.learners.multikernel import parse_kernel_dictionary

    if isinstance(sigma, str):
        found = _MEDIAN.fullmatch(sigma)
        if found is None:
            raise ValueError(f"sigma={sigma!r}: {SYNTAX}")
        unit, suffix = _number(found.group(1), 1.0, "sigma", sigma), "*median"
    elif isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a number > 0, got {sigma!r}")
    else:
        unit, suffix = float(sigma), ""
    return ",".join(f"{kernel}:{width * unit!r}{suffix}" for kernel, width in parse_kernel_dictionary(kernels))


def accepted_params(name: str) -> set:
    """The parameter names learner ``name`` takes: its config's fields, and ``sigma`` for a
    multi-kernel learner (the unit of its dictionary, :func:`complete_params`)."""
    fields = set(_fields(name))
    return fields | {"sigma"} if "kernels" in fields else fields


def complete_params(name: str, params: dict) -> dict:
    """``params`` of learner ``name`` with its data defaults added where no value is given.

    A multi-kernel learner (a ``kernels`` field, no ``sigma``) given ``sigma`` gets its
    default dictionary scaled by it (:func:`scaled_dictionary`) instead.

    Raises
    ------
    ValueError
        ``sigma`` and ``kernels`` both given to a multi-kernel learner.
    """
    fields = _fields(name)
    params = dict(params)
    if "sigma" in params and "sigma" not in fields and "kernels" in fields:
        if "kernels" in params:
            raise ValueError(f"{name}: give sigma (the unit of the default dictionary) or kernels, not both")
        params["kernels"] = scaled_dictionary(fields["kernels"].default, params.pop("sigma"))
    for key, value in data_defaults(name).items():
        params.setdefault(key, value)
    return params


def unresolved(params: dict) -> list:
    """Names of ``params`` whose values are still written in the mini-language."""
    return sorted(key for key, value in params.items() if is_derived(value))


def resolve_params(name: str, params: dict, X, n_rows: int | None = None) -> dict:
    """Parameters of learner ``name`` for the data ``X``: ready for ``make_learner``.

    Adds ``n_inputs`` (``X``'s columns) and the learner's data defaults
    (:func:`complete_params`), then resolves the mini-language: the median heuristic on
    ``X`` (at most :data:`MEDIAN_ROWS` rows, a fixed-seed subsample), ``n`` = ``n_rows``
    (default: ``X``'s rows).

    Parameters
    ----------
    name : str
    params : dict
    X : array-like (n, d)
        Rows like those the learner will learn (a sample is enough).
    n_rows : int, optional
        The number of rows the learner will see (``"n"``), when ``X`` is a sample.

    Raises
    ------
    ValueError
        ``n_inputs`` given and not ``X``'s column count; a malformed value; fewer than 2
        rows where a median is needed.
    """
    from okl_core.kernels import median_heuristic

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"data must be a 2-d array of rows, got shape {X.shape}")
    if "n_inputs" in params and params["n_inputs"] != X.shape[1]:
        raise ValueError(f"n_inputs={params['n_inputs']!r} but the data has {X.shape[1]} columns")
    params = complete_params(name, {**params, "n_inputs": X.shape[1]})
    medians: dict = {}

    def median(metric: str) -> float:
        if metric not in medians:
            rows = X[np.isfinite(X).all(axis=1)]
            if len(rows) < 2:
                raise ValueError('"median" needs at least 2 rows of finite values in the data')
            medians[metric] = median_heuristic(rows, n_samples=MEDIAN_ROWS, metric=metric)
        return medians[metric]

    kernel = params.get("kernel")
    count = len(X) if n_rows is None else int(n_rows)
    return {key: resolve_value(key, value, median, count, kernel) for key, value in params.items()}


def make_learner(name: str, data=None, **params) -> Learner:
    """Build learner ``name`` from its parameters (see each learner's config class).

    Parameters
    ----------
    name : str
    data : array-like (n, d), optional
        Rows like those the learner will learn. Given, the parameters are completed and
        resolved on them (:func:`resolve_params`): ``n_inputs``, the
        learner's data-derived defaults (the median heuristic for ``sigma``...) and values
        such as ``sigma="median"``. Without it, a parameter left out takes its config's
        number and a ``"median"`` / ``"n"`` value is refused.
    **params
        The config's fields.

    Raises
    ------
    ValueError
        Invalid parameters, or a value derived from data with no ``data`` given.
    """
    if data is not None:
        params = resolve_params(name, params, data)
    elif unresolved(params):
        names = ", ".join(f"{key}={params[key]!r}" for key in unresolved(params))
        raise ValueError(f"{name}: {names} is derived from the data: pass make_learner({name!r}, data=X, ...) "
                         f"or resolve it with okl_core.resolve_params({name!r}, params, X)")
    return learner_class(name).from_params(**params)
