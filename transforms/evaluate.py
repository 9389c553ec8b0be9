"""Evaluate: a model (side input) on a held-out data set -> test metrics.

The test set is read with :class:`~transforms.read.ReadShards` (one shard, one round), each
piece is scored with ``learner.predict`` and its errors summed in a
:class:`okl_core.Prequential`; the partial sums are combined sorted by stream position,
so the totals do not depend on bundling. Bad test rows go to the dead-letter output.
Rows read with their labels unjudged (``ReadShards(..., judge_labels=False)``, as
``pipelines.predict`` reads) count only where the label is one the model predicts
(:func:`okl_core.data.validate.labeled`); a training run's test rows are all labeled already.
"""

from __future__ import annotations

import json

import apache_beam as beam
import numpy as np

from okl_core.data.plan import StreamPlan
from okl_core.data.validate import labeled
from okl_core.metrics import Prequential
from transforms.elements import ModelCache
from transforms.read import DatasetSource, ReadShards
from transforms.worker import settle_worker_process

__all__ = ["Evaluate", "ScoreMetrics", "SumPrequentialFn"]


class _ScorePiece(beam.DoFn):
    """Score one piece with the model; emit ``(first position, Prequential fields JSON, rows without a label)``.

    A row without a label (missing, or one the model does not predict) is left out of the
    metrics and counted here, where the labels are judged anyway: a separate step over the
    pieces cost a second pass and a second combine (``pipelines.predict``).
    """

    def setup(self):
        settle_worker_process()
        self.models = ModelCache()

    def process(self, element, model: bytes):
        _, piece = element
        learner, state = self.models.get(model, source="model under evaluation")
        metrics = Prequential(learner.task)
        keep = labeled(piece.y, learner.task, getattr(learner.config, "n_classes", None))
        if keep.any():
            X, y = (piece.X, piece.y) if keep.all() else (piece.X[keep], piece.y[keep])
            metrics.add(learner.predict(state, X), y if learner.task == "regression" else y.astype(np.int32, copy=False))
        yield piece.start, json.dumps(metrics.to_dict(), sort_keys=True), int(len(keep) - keep.sum())


class SumPrequentialFn(beam.CombineFn):
    """Sum ``(position, Prequential JSON[, rows without a label])`` partials in position order -> Prequential JSON.

    With ``count_unlabeled`` the output is ``(Prequential JSON, rows without a label)``.
    """

    def __init__(self, count_unlabeled: bool = False):
        self.count_unlabeled = count_unlabeled

    def create_accumulator(self):
        return []

    def add_input(self, accumulator, element):
        accumulator.append((int(element[0]), str(element[1]), int(element[2]) if len(element) > 2 else 0))
        return accumulator

    def merge_accumulators(self, accumulators):
        return [item for acc in accumulators for item in acc]

    def extract_output(self, accumulator):
        total = None
        for _, fields, _ in sorted(accumulator):
            part = Prequential(**json.loads(fields))
            total = part if total is None else total.merge(part)
        metrics = json.dumps(total.to_dict() if total else None, sort_keys=True)
        return (metrics, sum(item[2] for item in accumulator)) if self.count_unlabeled else metrics


class ScoreMetrics(beam.PTransform):
    """Metrics of ``model`` on the ``batches`` of :class:`~transforms.read.ReadShards`.

    Parameters
    ----------
    model : PCollection[bytes]
        A single model file.
    count_unlabeled : bool
        Also count the rows left out of the metrics for want of a usable label (rows read
        with ``judge_labels=False``), in the same pass.

    Returns
    -------
    PCollection[str] or PCollection[tuple[str, int]]
        One Prequential JSON (the sums over every row), none when there are no batches;
        with ``count_unlabeled``, ``(Prequential JSON, rows without a label)``.
    """

    def __init__(self, model, count_unlabeled: bool = False):
        super().__init__()
        self.model, self.count_unlabeled = model, count_unlabeled

    def expand(self, batches):
        return (
            batches
            | "Score" >> beam.ParDo(_ScorePiece(), beam.pvalue.AsSingleton(self.model))
            | "SumMetrics" >> beam.CombineGlobally(SumPrequentialFn(self.count_unlabeled)).without_defaults()
        )


class Evaluate(beam.PTransform):
    """Test metrics of ``model`` on ``source``.

    Parameters
    ----------
    source : DatasetSource
        The held-out data.
    model : PCollection[bytes]
        A single model file.
    batch_rows : int
        Rows scored at a time.

    Returns
    -------
    dict
        ``{"metrics": PCollection[str] (one Prequential JSON), "dead_letter": PCollection[str]}``.
    """

    def __init__(self, source: DatasetSource, model, batch_rows: int = 4096):
        super().__init__()
        self.source, self.model, self.batch_rows = source, model, batch_rows

    def expand(self, pbegin):
        plan = StreamPlan(self.source.n_rows, 1, 1, self.batch_rows)
        read = pbegin | "ReadTest" >> ReadShards(self.source, plan, split="test")
        metrics = read["batches"] | "ScoreMetrics" >> ScoreMetrics(self.model)
        return {"metrics": metrics, "dead_letter": read["dead_letter"]}
