"""Learner families, one module each (fogd, dsg, ...); see :mod:`okl_core.registry`."""
