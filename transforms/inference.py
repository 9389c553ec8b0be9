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
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Iterable, Optional, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import ModelHandler, ModelMetadata, PredictionResult

import okl_core

__all__ = ["OklModel", "OklModelHandler", "WatchModelVersions", "read_bytes"]


@dataclasses.dataclass(frozen=True)
class OklModel:
    """A loaded model: the learner and its state (weak-referenceable, as RunInference shares it)."""

    learner: okl_core.Learner
    state: Any


def read_bytes(path: str) -> bytes:
    """Read a whole file through Beam's FileSystems (local or remote)."""
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


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
