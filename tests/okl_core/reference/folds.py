"""Run learners on the numpy reference folds instead of their compiled folds.

:func:`use_reference_folds` points the learner modules' :func:`okl_core.learners.compiled.folds`
at the modules of this package, which have the fold modules' names and arguments, so the
same ``update`` runs its rows through numpy: tests compare the two byte for byte.
"""

from __future__ import annotations

import importlib

from tests.okl_core.reference import expansions, linear, multikernel

REFERENCES = {
    "okl_core.learners._linear_folds": linear,
    "okl_core.learners._expansion_folds": expansions,
    "okl_core.learners._multikernel_folds": multikernel,
}
"""Fold module -> its numpy reference."""

LEARNER_MODULES = ("okl_core.learners.rules", "okl_core.learners.fogd", "okl_core.learners.nogd",
                   "okl_core.learners.kernel_ogd", "okl_core.learners.omkl")
"""The modules whose learners call the folds of :data:`REFERENCES`."""


def reference_folds(module: str):
    """The numpy reference of fold module ``module`` (KeyError for a module without one here)."""
    return REFERENCES[module]


def use_reference_folds(monkeypatch) -> None:
    """Make the learners of :data:`LEARNER_MODULES` run the numpy reference folds (undone with ``monkeypatch``)."""
    for name in LEARNER_MODULES:
        monkeypatch.setattr(importlib.import_module(name), "folds", reference_folds)
