"""Score a Parquet data set with a trained okl model through Beam's RunInference.

::

    python -m pipelines.predict --model runs/demo/model.npz --input data/test \\
        --output runs/demo/predictions --runner=DirectRunner

Rows are read in blocks (:class:`~transforms.read.ReadShards`, one shard), scored by
:class:`~transforms.inference.OklModelHandler` in RunInference, and written as Parquet
files ``<output>-SSSSS-of-NNNNN.parquet`` with columns ``row`` (the input's row number),
``score`` (binary, regression: float64) or ``scores`` (multiclass: list of float64 per
class) and, for classification, ``label`` (int32: -1/+1 or the class index)
(:class:`~transforms.inference.WritePredictions`). Bad rows are not scored; they are
listed in ``<output>.dead_letter.jsonl``. Every other argument is a Beam pipeline option.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import okl_core
from okl_core.data.plan import StreamPlan
from okl_experiments.progress import wall_time_text
from pipelines.common import UsageError, configure_logging, live_progress, make_pipeline, pipeline_options, run_pipeline
from transforms.inference import WritePredictions, read_bytes
from transforms.outputs import WriteDeadLetterFile, local_dir
from transforms.read import DatasetSource, ReadShards

__all__ = ["run"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipelines.predict", description="Score a Parquet data set with an okl model (RunInference).")
    parser.add_argument("--model", required=True, help="model file written by pipelines.train")
    parser.add_argument("--input", required=True, help="data set directory or Parquet glob")
    parser.add_argument("--output", required=True, help="prefix of the prediction files")
    parser.add_argument("--batch_rows", type=int, default=4096, help="rows per inference block (default %(default)s)")
    return parser


def _source(path: str, learner: okl_core.Learner) -> DatasetSource:
    """The data set, checked against the model (multiclass: the model's classes)."""
    source = DatasetSource.open(path)
    if source.n_features != learner.config.n_inputs:
        raise UsageError(f"the model takes {learner.config.n_inputs} features, the data has {source.n_features}")
    if learner.task == "multiclass":
        source = dataclasses.replace(source, n_classes=learner.config.n_classes)
    return source


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
        source = _source(args.input, learner)
        plan = StreamPlan(max(source.n_rows, 1), 1, 1, args.batch_rows)
    except (FileNotFoundError, ValueError) as err:
        parser.error(f"--input {args.input}: {err}")
    local_dir(os.path.dirname(args.output) or ".")
    dead_path = f"{args.output}.dead_letter.jsonl"
    pipeline = make_pipeline(pipeline_options(beam_argv))
    read = pipeline | "ReadShards" >> ReadShards(source, plan, split="predict")
    launched_at = time.time()
    with live_progress("predict", source.n_rows, pipeline.options) as progress:
        read["batches"] | "Predict" >> WritePredictions(args.model, learner.task, getattr(learner.config, "n_classes", None), args.output,
                                                        progress_dir=progress.directory)
        read["dead_letter"] | "WriteDeadLetters" >> WriteDeadLetterFile(dead_path)
        result = run_pipeline(pipeline)
    print(f"predictions:  {args.output}-*.parquet")
    print(f"dead letters: {dead_path}")
    print(f"{source.n_rows:,} rows read; " + wall_time_text(launched_at, time.time() - launched_at))
    return result


if __name__ == "__main__":
    run()
