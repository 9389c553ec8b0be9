"""How experiments name, label and rank their metrics, and flag results against the baseline.

The headline metric of a task and a run's online curves are okl_core's
(:mod:`okl_core.reporting`: :func:`~okl_core.reporting.headline`,
:func:`~okl_core.reporting.batch_curve`, :func:`~okl_core.reporting.job_curves`, the
constant baseline's name :func:`~okl_core.reporting.baseline_name`). Experiments (sweeps,
reproductions) name their metrics ``online_<m>`` (prequential, over the stream) and
``test_<m>`` (held-out set) for every ``m`` of :func:`okl_core.evaluation.task_metrics`
(:func:`experiment_metrics`), and rank by :func:`ranking_metric` (the online metric, never
the test set) unless told otherwise.
"""

from __future__ import annotations

import math

from okl_core.evaluation import METRIC_ALIASES, canonical_metric, default_metric, task_metrics
from okl_core.reporting import baseline_name, headline

# headline and baseline_name are okl_core.reporting's, named here too for the commands that import them from here
__all__ = ["metric_label", "experiment_metrics", "experiment_metric", "ranking_metric", "NOT_BETTER", "with_baseline", "headline",
           "baseline_name"]

_LABELS = {"mistake_rate": "online mistake rate", "mse": "online mean squared error", "mae": "online mean absolute error"}


NOT_BETTER = "no better than the {}"
"""How every output flags a result that does not beat its constant baseline (formatted with
:func:`baseline_name`): the training summary's warning, sweep and reproduction tables."""


def with_baseline(summary: dict, key: str, task: str) -> str:
    """``0.2401 (majority class 0.2362)``: metric ``key`` of a :meth:`~okl_core.metrics.Prequential.summary`
    beside the constant baseline of the same rows (the metric alone when the summary has none, or no rows)."""
    baseline = (summary.get("baseline") or {}).get(key)
    known = isinstance(baseline, (int, float)) and math.isfinite(baseline)
    return f"{summary[key]:.5g}" + (f" ({baseline_name(task)} {baseline:.5g})" if known else "")


def experiment_metric(name: str) -> str:
    """An experiment metric's own name: ``online_error`` (okl <= 0.1) -> ``online_mistake_rate``."""
    split, _, metric = name.partition("_")
    if split in ("online", "test") and metric in METRIC_ALIASES:
        return f"{split}_{METRIC_ALIASES[metric]}"
    return name


def metric_label(metric: str) -> str:
    """Axis label of an online curve of ``metric`` (``mistake_rate``, ``mse``, ``mae``)."""
    return _LABELS.get(canonical_metric(metric), "online metric")


def experiment_metrics(task: str, with_test: bool) -> list[str]:
    """The metrics an experiment records: ``online_<m>``, and ``test_<m>`` with a test set."""
    names = [f"online_{m}" for m in task_metrics(task)]
    return names + ([f"test_{m}" for m in task_metrics(task)] if with_test else [])


def ranking_metric(task: str) -> str:
    """The metric experiments rank by unless told otherwise: the online (prequential) headline.

    Never the test set: a configuration chosen by its test error would make that test
    error an optimistic estimate. Ranking by ``test_<m>`` has to be asked for.
    """
    return f"online_{default_metric(task)}"
