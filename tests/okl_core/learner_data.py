"""Tiny deterministic problems per task, shared by the learner tests (okl_core.testing's)."""

from okl_core.testing import error, tiny_problem, trivial_error

__all__ = ["error", "tiny_problem", "trivial_error"]
