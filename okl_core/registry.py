"""Registry of learners by name: drives :func:`okl_core.derived.make_learner`, the CLIs and the conformance suite.

A learner family module registers its classes here (see ``_BUILTIN``); third parties can
call :func:`register`. Names are stable: they are written into model files.
"""

from __future__ import annotations

import importlib

from okl_core.learners.base import Learner

__all__ = ["register", "learner_class", "learner_names"]

# name -> "module:Class", imported lazily so that one family's import cost is not everyone's.
_BUILTIN = {
    "fogd": "okl_core.learners.fogd:FOGD",
    "mfogd": "okl_core.learners.fogd:MFOGD",
    "fogd_r": "okl_core.learners.fogd:FOGDRegressor",
    "dsg": "okl_core.learners.dsg:DSG",
    "nogd": "okl_core.learners.nogd:NOGD",
    "mnogd": "okl_core.learners.nogd:MNOGD",
    "nogd_r": "okl_core.learners.nogd:NOGDRegressor",
    "kernel_ogd": "okl_core.learners.kernel_ogd:KernelOGD",
    "mkernel_ogd": "okl_core.learners.kernel_ogd:MKernelOGD",
    "kernel_ogd_r": "okl_core.learners.kernel_ogd:KernelOGDRegressor",
    "kernel_perceptron": "okl_core.learners.kernel_ogd:KernelPerceptron",
    "rbp": "okl_core.learners.budget:RBP",
    "forgetron": "okl_core.learners.budget:Forgetron",
    "projectron": "okl_core.learners.budget:Projectron",
    "projectron_pp": "okl_core.learners.budget:ProjectronPlusPlus",
    "bpa_s": "okl_core.learners.budget:BPAS",
    "bogd": "okl_core.learners.budget:BOGD",
    "norma_r": "okl_core.learners.budget:NORMARegressor",
    "mrbp": "okl_core.learners.budget:MRBP",
    "mprojectron": "okl_core.learners.budget:MProjectron",
    "mbogd": "okl_core.learners.budget:MBOGD",
    "mforgetron": "okl_core.learners.budget:MForgetron",
    "mprojectron_pp": "okl_core.learners.budget:MProjectronPlusPlus",
    "mbpa_s": "okl_core.learners.budget:MBPAS",
    "rbp_r": "okl_core.learners.budget:RBPRegressor",
    "bogd_r": "okl_core.learners.budget:BOGDRegressor",
    "forgetron_r": "okl_core.learners.budget:ForgetronRegressor",
    "projectron_r": "okl_core.learners.budget:ProjectronRegressor",
    "kernel_awv": "okl_core.learners.pkawv:KernelAWV",
    "krr": "okl_core.learners.pkawv:KernelRidge",
    "pkawv_taylor": "okl_core.learners.pkawv:PKAWVTaylor",
    "pkawv_nystrom": "okl_core.learners.pkawv_nystrom:PKAWVNystrom",
    "omkl_gf": "okl_core.learners.omkl:OMKLGF",
    "raker": "okl_core.learners.omkl:Raker",
    "oks": "okl_core.learners.oks:OKS",
    "oks_pp": "okl_core.learners.oks:OKSPlusPlus",
    "ioks": "okl_core.learners.oks:IOKS",
    "rf_oks_pp": "okl_core.learners.oks:RFOKSPlusPlus",
    "rf_ioks": "okl_core.learners.oks:RFIOKS",
}
_REGISTERED: dict[str, type[Learner]] = {}


def register(cls: type[Learner]) -> type[Learner]:
    """Register a :class:`Learner` subclass under ``cls.name`` (usable as a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Learner) and cls.name):
        raise TypeError(f"{cls!r} is not a named Learner subclass")
    if cls.name in _BUILTIN or (cls.name in _REGISTERED and _REGISTERED[cls.name] is not cls):
        raise ValueError(f"a learner named {cls.name!r} is already registered")
    _REGISTERED[cls.name] = cls
    return cls


def learner_names() -> list[str]:
    """All registered learner names, sorted."""
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def learner_class(name: str) -> type[Learner]:
    """The learner class registered as ``name``.

    Raises
    ------
    ValueError
        Unknown name (the message lists the valid ones).
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in _BUILTIN:
        raise ValueError(f"unknown learner {name!r}; choose from {learner_names()}")
    module, cls_name = _BUILTIN[name].split(":")
    return getattr(importlib.import_module(module), cls_name)
