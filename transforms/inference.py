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
from typing import Any, Iterable, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, ModelMetadata, PredictionResult, RunInference

import okl_core
from okl_core.data.layout import INFO_FILE, DatasetInfo, recorded_id_columns
from okl_core.heartbeat import Heartbeat
from okl_core.learners.base import labels_from_scores
from okl_core.predictions import class_names, probabilities_from_scores, probability_names
from transforms.read import DatasetSource, _remote_dataset, is_remote, open_binary, read_bytes  # noqa: F401 (read_bytes: part of this module's API)
from transforms.worker import settle_worker_process

__all__ = ["OklModel", "OklModelHandler", "WatchModelVersions", "WritePredictions", "IdLookup", "prediction_schema", "label_type",
           "passthrough_fields", "read_bytes"]


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
        from apache_beam.utils.timestamp import MAX_TIMESTAMP

        from okl_core.state import version_file_name
        from transforms.streaming import newest_version

        directory = self.directory
        stop = MAX_TIMESTAMP if self.stop_timestamp is None else self.stop_timestamp  # PeriodicImpulse's default: never

        def newest(_):
            found = newest_version(directory)
            return [] if found is None else [ModelMetadata(model_id=found[1], model_name=version_file_name(found[0])[: -len(".npz")])]

        return (
            pbegin
            | "Poll" >> PeriodicImpulse(start_timestamp=self.start_timestamp, stop_timestamp=stop, fire_interval=self.poll_seconds, apply_windowing=True)
            | "Newest" >> beam.FlatMap(newest).with_output_types(ModelMetadata)
        )


def label_type(classes: list | None) -> pa.DataType:
    """Arrow type of the ``label`` column: the class names' (strings, integers, floats, booleans), int32 codes without names.

    Names of mixed kinds (``[0, "a"]``) are written as text.
    """
    if classes is None:
        return pa.int32()
    try:
        inferred = pa.array(classes).type
    except (pa.ArrowException, TypeError, ValueError):
        return pa.string()
    return inferred if (pa.types.is_string(inferred) or pa.types.is_integer(inferred) or pa.types.is_floating(inferred)
                        or pa.types.is_boolean(inferred)) else pa.string()


def prediction_schema(task: str, n_classes: int | None = None, classes: list | None = None, probabilities: bool = False,
                      id_fields: Sequence[pa.Field] = ()) -> pa.Schema:
    """Arrow schema of the prediction files for ``task``.

    The id columns ``id_fields`` (``prepare --id_column``) first, then ``row``, ``label``
    (classification: the class name the model records, :func:`label_type`), ``score`` or
    ``scores`` (multiclass, one per class in code order) and, with ``probabilities``,
    ``proba_<class>`` per class (:func:`okl_core.predictions.probability_names`).
    """
    fields = [*id_fields, pa.field("row", pa.int64())]
    if task != "regression":
        fields.append(pa.field("label", label_type(classes)))
    if task == "multiclass":
        fields.append(pa.field("scores", pa.list_(pa.float64(), n_classes)))
    else:
        fields.append(pa.field("score", pa.float64()))
    if probabilities and task != "regression":
        fields.extend(pa.field(name, pa.float64()) for name in probability_names(task, classes, n_classes))
    return pa.schema(fields)


def passthrough_fields(source: DatasetSource) -> list:
    """The Arrow fields of the id columns of the data set ``source`` (``dataset.json``'s ``extra.id_columns``; none: ``[]``).

    Their types are those of the first file's columns. A data set of Parquet files without
    ``dataset.json`` has none.
    """
    info_path = f"{source.path.rstrip('/')}/{INFO_FILE}"
    local = not is_remote(source.path)
    if (local and not os.path.isfile(info_path)) or (not local and not FileSystems.exists(info_path)) or not source.row_groups:
        return []
    names = recorded_id_columns(DatasetInfo.from_file(info_path) if local else _remote_dataset(source.path)[0])
    if not names:
        return []
    schema = pq.read_schema(open_binary(source.row_groups[0][0]))
    missing = [name for name in names if name not in schema.names]
    if missing:
        raise ValueError(f"{source.row_groups[0][0]}: no id column(s) {missing}, which {info_path} records")
    return [schema.field(name) for name in names]


class IdLookup:
    """The id columns of the rows of a piece of a data set, read from its row group (the last few kept)."""

    def __init__(self, source: DatasetSource, id_fields: Sequence[pa.Field], keep: int = 2):
        self.groups = [(path, group, first, rows) for path, group, first, rows in source.row_groups]
        self.firsts = np.array([g[2] for g in self.groups], dtype=np.int64)
        self.names, self.keep = [f.name for f in id_fields], keep
        self._tables: dict = {}
        self._files: dict = {}

    def _group(self, k: int) -> pa.Table:
        if k not in self._tables:
            path, group, _, _ = self.groups[k]
            if path not in self._files:
                self._files = {path: pq.ParquetFile(open_binary(path), page_checksum_verification=True)}
            if len(self._tables) >= self.keep:
                self._tables.pop(next(iter(self._tables)))
            self._tables[k] = self._files[path].read_row_group(group, columns=["row", *self.names], use_threads=False)
        return self._tables[k]

    def __call__(self, start: int, stop: int, rows: np.ndarray) -> pa.Table:
        """The id columns of the rows ``rows`` (their ``row`` numbers) of the stream positions ``[start, stop)``.

        A piece lies in one row group (:func:`transforms.read.piece_refs`); its good rows
        are those of the group's positions whose ``row`` they hold, in order.
        """
        k = int(np.searchsorted(self.firsts, start, side="right")) - 1
        table = self._group(k).slice(start - int(self.firsts[k]), stop - start)
        found = np.isin(table.column("row").to_numpy(), rows)
        picked = table.filter(pa.array(found))
        if not np.array_equal(picked.column("row").to_numpy(), rows):
            raise ValueError(f"{self.groups[k][0]}: row group {self.groups[k][1]} no longer holds the rows it was listed with; was the data set rewritten?")
        return picked.select(self.names)


class _ToTable(beam.DoFn):
    """``((start, stop, rows), PredictionResult)`` -> one Arrow table of predictions."""

    def __init__(self, task: str, n_classes: int | None, progress_dir: str | None = None, *, classes: list | None = None,
                 link: str | None = None, source: DatasetSource | None = None, id_fields: Sequence[pa.Field] = ()):
        self.task, self.n_classes, self.progress_dir = task, n_classes, progress_dir
        self.classes, self.link, self.source, self.id_fields = classes, link, source, list(id_fields)

    def setup(self):
        settle_worker_process()
        # Live progress (no-op without a folder): this instance's rows, over all its bundles.
        self.heartbeat, self.scored = Heartbeat(self.progress_dir, f"predict-{os.getpid()}-{id(self):x}"), 0
        self.ids = IdLookup(self.source, self.id_fields) if self.id_fields and self.source is not None else None

    def finish_bundle(self):
        self.heartbeat.beat(self.scored, done=True)

    def process(self, element):
        (start, stop, rows), result = element
        self.scored += len(rows)
        self.heartbeat.beat(self.scored)
        scores = np.asarray(result.inference, dtype=np.float64)
        schema = prediction_schema(self.task, self.n_classes, self.classes, self.link is not None, self.id_fields)
        columns = [] if self.ids is None else list(self.ids(start, stop, np.asarray(rows)).columns)
        columns.append(pa.array(np.asarray(rows, dtype=np.int64)))
        if self.task != "regression":
            names = class_names(self.task, labels_from_scores(self.task, scores), self.classes)
            columns.append(_label_array(names, schema.field("label").type))
        if self.task == "multiclass":
            columns.append(pa.FixedSizeListArray.from_arrays(pa.array(scores.reshape(-1)), self.n_classes))
        else:
            columns.append(pa.array(scores))
        if self.link is not None and self.task != "regression":
            probabilities = probabilities_from_scores(self.link, scores)
            assert probabilities is not None  # a link gives probabilities
            columns.extend(pa.array(probabilities[:, c]) for c in range(probabilities.shape[1]))
        yield pa.Table.from_arrays(columns, schema=schema)


def _label_array(names: list, label_type: pa.DataType) -> pa.Array:
    """The ``label`` column of class ``names`` (as text when the names are of mixed kinds: :func:`label_type`)."""
    if pa.types.is_string(label_type):
        names = [name if isinstance(name, str) else str(name) for name in names]
    return pa.array(names, type=label_type)


class WritePredictions(beam.PTransform):
    """Score the ``batches`` of :class:`~transforms.read.ReadShards` with a model file and write them.

    RunInference with :class:`OklModelHandler` on each block of rows; Parquet files
    ``<output>-SSSSS-of-NNNNN.parquet`` of :func:`prediction_schema`: the id columns of
    the data set (``id_fields``, read beside each block from its row group), ``row`` (the
    input's row number), for classification ``label`` (the class name among ``classes``,
    the codes -1/+1 or 0..C-1 without them), ``score`` (binary, regression) or ``scores``
    (multiclass, one per class) and, where ``link`` is given (``sigmoid``, ``softmax``:
    :func:`okl_core.predictions.probability_link`), ``proba_<class>`` per class.
    """

    def __init__(self, model_path: str, task: str, n_classes: int | None, output: str, progress_dir: str | None = None, *,
                 classes: list | None = None, link: str | None = None, source: DatasetSource | None = None, id_fields: Sequence[pa.Field] = ()):
        super().__init__()
        self.model_path, self.task, self.n_classes, self.output = model_path, task, n_classes, output
        self.progress_dir = progress_dir  # a local folder for live progress (okl_core.heartbeat.Heartbeat)
        self.classes, self.link, self.source, self.id_fields = classes, link, source, list(id_fields)

    def expand(self, batches):
        schema = prediction_schema(self.task, self.n_classes, self.classes, self.link is not None, self.id_fields)
        to_table = _ToTable(self.task, self.n_classes, self.progress_dir, classes=self.classes, link=self.link, source=self.source, id_fields=self.id_fields)
        return (
            batches
            | "KeyByRows" >> beam.Map(lambda element: ((element[1].start, element[1].stop, element[1].row), element[1].X))
            | "RunInference" >> RunInference(KeyedModelHandler(OklModelHandler(self.model_path, max_batch_size=4)))
            | "ToTables" >> beam.ParDo(to_table)
            | "WritePredictions" >> WriteToParquetBatched(self.output, schema, file_name_suffix=".parquet")
        )
