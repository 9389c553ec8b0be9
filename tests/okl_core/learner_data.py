"""Tiny deterministic problems per task, shared by the learner tests (okl_core.testing's),
and the random-feature rules' decisions written out by hand for the step-rule references."""

from okl_core.testing import error, tiny_problem, trivial_error

__all__ = ["error", "tiny_problem", "trivial_error", "rule_updates"]


def rule_updates(task, f, label, eps=0.0):
    """``(row, u)`` pairs of the FOGD rules for scores ``f`` (one per row of weights): the
    gradient on row ``row`` is ``u z`` (plain Python; adaptive steps scale it per coordinate)."""
    if task == "multiclass":
        rival = max((c for c in range(len(f)) if c != label), key=lambda c: (f[c], -c))
        return [(label, -1.0), (rival, 1.0)] if f[label] - f[rival] < 1.0 else []  # gradient -z on y, +z on s
    if task == "binary":
        return [(0, -label)] if label * f[0] < 1.0 else []  # hinge: g = -y z
    residual = label - f[0]
    return [(0, -residual)] if abs(residual) > eps else []  # squared loss / 2: g = -(y - f) z
