"""OklModelHandler: serve an okl model file in apache_beam.ml RunInference.

::

    from apache_beam.ml.inference.base import RunInference
    from transforms.inference import OklModelHandler

    scored = rows | RunInference(OklModelHandler("runs/demo/model.npz"))

An example is one row ``x`` of shape ``(d,)`` or a block of rows ``(n, d)`` (cheaper: one
prediction call per block). Each :class:`~apache_beam.ml.inference.base.PredictionResult`
holds the example and its decision values from ``learner.predict``: a float (binary,
regression) or ``(C,)`` array (multiclass) for a row, ``(n,)`` / ``(n, C)`` for a block.
``OklModelHandler.to_labels`` turns them into labels. The model file is read through
Beam's FileSystems (local paths, ``gs://`` and other registered schemes) and parsed with
:func:`okl_core.model_from_bytes` (never unpickled).

:class:`WritePredictions` scores the batches of :class:`~transforms.read.ReadShards` this
way and writes them as Parquet files (``pipelines.predict``); :class:`WatchModelVersions`
feeds the newest model version of a streaming job to RunInference.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any, Iterable, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, ModelMetadata, PredictionResult, RunInference

import okl_core
from okl_core.learners.base import labels_from_scores
from okl_experiments.progress import Heartbeat
from transforms.read import read_bytes  # noqa: F401 (read_bytes: part of this module's API)
from transforms.worker import settle_worker_process

__all__ = ["OklModel", "OklModelHandler", "WatchModelVersions", "WritePredictions", "prediction_schema", "read_bytes"]


@dataclasses.dataclass(frozen=True)
class OklModel:
    """A loaded model: the learner and its state (weak-referenceable, as RunInference shares it)."""

    learner: okl_core.Learner
    state: Any


class OklModelHandler(ModelHandler[np.ndarray, PredictionResult, OklModel]):
    """RunInference handler for okl model files.

    Parameters
    ----------
    model_path : str
        A model file written by ``pipelines.train`` or :func:`okl_core.save_model`.
    min_batch_size, max_batch_size : int, optional
        Passed to ``BatchElements`` (examples per inference call).
    """

    def __init__(self, model_path: str, *, min_batch_size: Optional[int] = None, max_batch_size: Optional[int] = None):
        super().__init__()  # Beam 2.62 takes no batching arguments here: batch_elements_kwargs passes them
        self.model_path = model_path
        self._batch_sizes = {name: size for name, size in (("min_batch_size", min_batch_size), ("max_batch_size", max_batch_size)) if size is not None}

    def batch_elements_kwargs(self):
        return {**super().batch_elements_kwargs(), **self._batch_sizes}

    def load_model(self) -> OklModel:
        learner, state = okl_core.model_from_bytes(read_bytes(self.model_path), source=self.model_path)
        return OklModel(learner, state)

    def update_model_path(self, model_path: Optional[str] = None):
        if model_path:
            self.model_path = model_path

    def run_inference(self, batch: Sequence[np.ndarray], model: OklModel, inference_args=None) -> Iterable[PredictionResult]:
        blocks = [np.asarray(example, dtype=np.float32) for example in batch]
        if not blocks:
            return []
        sizes = [1 if b.ndim == 1 else b.shape[0] for b in blocks]
        X = np.concatenate([b.reshape(1, -1) if b.ndim == 1 else b for b in blocks])
        scores = model.learner.predict(model.state, X)
        out, start = [], 0
        for example, block, size in zip(batch, blocks, sizes):
            part = scores[start : start + size]
            out.append(PredictionResult(example, part[0] if block.ndim == 1 else part, self.model_path))
            start += size
        return out

    def get_num_bytes(self, batch: Sequence[np.ndarray]) -> int:
        return sum(np.asarray(example).nbytes for example in batch)

    def get_metrics_namespace(self) -> str:
        return "okl_inference"

    @staticmethod
    def to_labels(model: OklModel, scores) -> np.ndarray:
        """Labels from decision values (sign with 0 -> +1, first argmax, or the value)."""
        return model.learner.to_labels(scores)


class WatchModelVersions(beam.PTransform):
    """The newest ``model-vNNNNNN.npz`` of a directory, every ``poll_seconds``, for RunInference.

    ``PeriodicImpulse`` windowed into ``FixedWindows(poll_seconds)`` -> one
    :class:`~apache_beam.ml.inference.base.ModelMetadata` per window (``model_id`` = the
    version's path, ``model_name`` = ``model-vNNNNNN``), nothing while the directory holds no
    version. Pass it as ``RunInference(..., model_metadata_pcoll=...)``, with the examples
    windowed into the same ``FixedWindows(poll_seconds)``: a fixed-window side input runs on
    Prism, Flink and Dataflow (a triggered global-window one, as Beam's ``WatchFilePattern``
    makes, is refused by Prism, Beam issue #31438). A side input is read once its window is
    complete, so group the examples per window (``GroupByKey``, ``GroupIntoBatches``) before
    RunInference: a new version then serves from the window after the one it was seen in.
    """

    def __init__(self, directory: str, poll_seconds: float, start_timestamp: float, stop_timestamp: float | None = None):
        super().__init__()
        self.directory, self.poll_seconds = directory, poll_seconds
        self.start_timestamp, self.stop_timestamp = start_timestamp, stop_timestamp

    def expand(self, pbegin):
        from apache_beam.transforms.periodicsequence import PeriodicImpulse

        from okl_core.state import version_file_name
        from transforms.streaming import newest_version

        directory = self.directory
        kwargs = {} if self.stop_timestamp is None else {"stop_timestamp": self.stop_timestamp}

        def newest(_):
            found = newest_version(directory)
            return [] if found is None else [ModelMetadata(model_id=found[1], model_name=version_file_name(found[0])[: -len(".npz")])]

        return (
            pbegin
            | "Poll" >> PeriodicImpulse(start_timestamp=self.start_timestamp, fire_interval=self.poll_seconds, apply_windowing=True, **kwargs)
            | "Newest" >> beam.FlatMap(newest).with_output_types(ModelMetadata)
        )


def prediction_schema(task: str, n_classes: int | None = None) -> pa.Schema:
    """Arrow schema of the prediction files for ``task``: ``row``, ``score`` or ``scores``, ``label``."""
    fields = [("row", pa.int64())]
    if task == "multiclass":
        fields.append(("scores", pa.list_(pa.float64(), n_classes)))
    else:
        fields.append(("score", pa.float64()))
    if task != "regression":
        fields.append(("label", pa.int32()))
    return pa.schema(fields)


class _ToTable(beam.DoFn):
    """``(rows, PredictionResult)`` -> one Arrow table of predictions."""

    def __init__(self, task: str, n_classes: int | None, progress_dir: str | None = None):
        self.task, self.n_classes, self.progress_dir = task, n_classes, progress_dir

    def setup(self):
        settle_worker_process()
        # Live progress (no-op without a folder): this instance's rows, over all its bundles.
        self.heartbeat, self.scored = Heartbeat(self.progress_dir, f"predict-{os.getpid()}-{id(self):x}"), 0

    def finish_bundle(self):
        self.heartbeat.beat(self.scored, done=True)

    def process(self, element):
        rows, result = element
        self.scored += len(rows)
        self.heartbeat.beat(self.scored)
        scores = np.asarray(result.inference, dtype=np.float64)
        columns = [pa.array(np.asarray(rows, dtype=np.int64))]
        if self.task == "multiclass":
            columns.append(pa.FixedSizeListArray.from_arrays(pa.array(scores.reshape(-1)), self.n_classes))
        else:
            columns.append(pa.array(scores))
        if self.task != "regression":
            columns.append(pa.array(labels_from_scores(self.task, scores), type=pa.int32()))
        yield pa.Table.from_arrays(columns, schema=prediction_schema(self.task, self.n_classes))


class WritePredictions(beam.PTransform):
    """Score the ``batches`` of :class:`~transforms.read.ReadShards` with a model file and write them.

    RunInference with :class:`OklModelHandler` on each block of rows; Parquet files
    ``<output>-SSSSS-of-NNNNN.parquet`` of :func:`prediction_schema`: ``row`` (the input's
    row number), ``score`` (binary, regression) or ``scores`` (multiclass, one per class)
    and, for classification, ``label`` (-1/+1 or the class index).
    """

    def __init__(self, model_path: str, task: str, n_classes: int | None, output: str, progress_dir: str | None = None):
        super().__init__()
        self.model_path, self.task, self.n_classes, self.output = model_path, task, n_classes, output
        self.progress_dir = progress_dir  # a local folder for live progress (okl_experiments.progress.Heartbeat)

    def expand(self, batches):
        handler = KeyedModelHandler(OklModelHandler(self.model_path, max_batch_size=4))
        return (
            batches
            | "KeyByRows" >> beam.Map(lambda element: (element[1].row, element[1].X))
            | "RunInference" >> RunInference(handler)
            | "ToTables" >> beam.ParDo(_ToTable(self.task, self.n_classes, self.progress_dir))
            | "WritePredictions" >> WriteToParquetBatched(self.output, prediction_schema(self.task, self.n_classes), file_name_suffix=".parquet")
        )
