"""Score a Parquet data set with a trained okl model through Beam's RunInference.

::

    python -m pipelines.predict --model runs/demo/model.npz --input data/test \\
        --output runs/demo/predictions --runner=DirectRunner

Rows are read in blocks (:class:`~transforms.read.ReadShards`, one shard), scored by
:class:`~transforms.inference.OklModelHandler` in RunInference, and written as Parquet
files ``<output>-SSSSS-of-NNNNN.parquet`` with columns ``row`` (the input's row number),
``score`` (binary, regression: float64) or ``scores`` (multiclass: list of float64 per
class) and, for classification, ``label`` (int32: -1/+1 or the class index). Bad rows are
not scored; they are listed in ``<output>.dead_letter.jsonl``. Every other argument is a
Beam pipeline option.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

import okl_core
from okl_core.data.plan import StreamPlan
from okl_core.learners.base import labels_from_scores
from pipelines.common import UsageError, configure_logging, make_pipeline, pipeline_options, run_pipeline
from transforms.inference import OklModelHandler, read_bytes
from transforms.outputs import local_dir, write_bytes
from transforms.read import DatasetSource, ReadShards

__all__ = ["run", "prediction_schema"]


def prediction_schema(task: str, n_classes: int | None = None) -> pa.Schema:
    """Arrow schema of the prediction files for ``task``."""
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

    def __init__(self, task: str, n_classes: int | None):
        self.task, self.n_classes = task, n_classes

    def process(self, element):
        rows, result = element
        scores = np.asarray(result.inference, dtype=np.float64)
        schema = prediction_schema(self.task, self.n_classes)
        columns = [pa.array(np.asarray(rows, dtype=np.int64))]
        if self.task == "multiclass":
            columns.append(pa.FixedSizeListArray.from_arrays(pa.array(scores.reshape(-1)), self.n_classes))
        else:
            columns.append(pa.array(scores))
        if self.task != "regression":
            columns.append(pa.array(labels_from_scores(self.task, scores), type=pa.int32()))
        yield pa.Table.from_arrays(columns, schema=schema)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipelines.predict", description="Score a Parquet data set with an okl model (RunInference).")
    parser.add_argument("--model", required=True, help="model file written by pipelines.train")
    parser.add_argument("--input", required=True, help="data set directory or Parquet glob")
    parser.add_argument("--output", required=True, help="prefix of the prediction files")
    parser.add_argument("--batch_rows", type=int, default=4096, help="rows per inference block (default %(default)s)")
    return parser


def run(argv=None):
    """Parse ``argv``, score the data set, print where the predictions went.

    Returns
    -------
    apache_beam.runners.runner.PipelineResult
    """
    configure_logging()
    parser = _parser()
    args, beam_argv = parser.parse_known_args(argv)
    try:
        learner, _ = okl_core.model_from_bytes(read_bytes(args.model), source=args.model)
    except (OSError, okl_core.ModelFileError) as err:
        parser.error(f"--model {args.model}: {err}")
    try:
        source = DatasetSource.open(args.input)
        if source.n_features != learner.config.n_inputs:
            raise UsageError(f"the model takes {learner.config.n_inputs} features, the data has {source.n_features}")
        plan = StreamPlan(max(source.n_rows, 1), 1, 1, args.batch_rows)
    except (FileNotFoundError, ValueError) as err:
        parser.error(f"--input {args.input}: {err}")
    n_classes = getattr(learner.config, "n_classes", None)
    if learner.task == "multiclass":
        source = DatasetSource(source.name, source.path, source.task, source.n_features, n_classes, source.row_groups)
    local_dir(os.path.dirname(args.output) or ".")
    pipeline = make_pipeline(pipeline_options(beam_argv))
    read = pipeline | "ReadShards" >> ReadShards(source, plan, split="predict")
    handler = KeyedModelHandler(OklModelHandler(args.model, max_batch_size=4))
    (
        read["batches"]
        | "KeyByRows" >> beam.Map(lambda element: (element[1].row, element[1].X))
        | "RunInference" >> RunInference(handler)
        | "ToTables" >> beam.ParDo(_ToTable(learner.task, n_classes))
        | "WritePredictions" >> WriteToParquetBatched(args.output, prediction_schema(learner.task, n_classes), file_name_suffix=".parquet")
    )
    dead_path = f"{args.output}.dead_letter.jsonl"
    (
        read["dead_letter"]
        | "CollectDeadLetters" >> beam.combiners.ToList()
        | "WriteDeadLetters" >> beam.Map(lambda records: write_bytes(dead_path, "".join(r + "\n" for r in sorted(records, key=lambda r: json.loads(r)["position"])).encode()))
    )
    result = run_pipeline(pipeline)
    print(f"predictions:  {args.output}-*.parquet")
    print(f"dead letters: {dead_path}")
    return result


if __name__ == "__main__":
    run()
