"""Score a Parquet data set with a trained okl model through Beam's RunInference.

::

    python -m pipelines.predict --model runs/demo/model.npz --input data/test \\
        --output runs/demo/predictions --runner=DirectRunner

Rows are read in blocks (:class:`~transforms.read.ReadShards`, one shard), scored by
:class:`~transforms.inference.OklModelHandler` in RunInference, and written as Parquet
files ``<output>/predictions-SSSSS-of-NNNNN.parquet`` (``--output`` is a directory) with
columns ``row`` (the input's row number), ``score`` (binary, regression: float64) or
``scores`` (multiclass: list of float64 per class) and, for classification, ``label``
(int32: -1/+1 or the class index) (:class:`~transforms.inference.WritePredictions`). Bad
rows are not scored; they are listed in ``<output>/dead_letter.jsonl``. The labels of the
data set give the model's metrics (:class:`~transforms.evaluate.ScoreMetrics`: the mistake
rate, or the mean squared and absolute errors, as fractions), written to
``<output>/metrics.json`` and printed with the row counts. Every other
argument must be a Beam pipeline option (an argument that neither okl nor Beam defines is
refused; :mod:`pipelines.cli`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import apache_beam as beam

import okl_core
from okl_core.data.plan import StreamPlan
from okl_core.metrics import Prequential
from okl_experiments.params import check_data_fits
from pipelines.cli import Parser, main, prog, running_as_command
from okl_experiments.progress import wall_time_text
from pipelines.common import configure_logging, live_progress, make_pipeline, okl_and_beam_args, pipeline_options, run_pipeline
from pipelines.job import counters, data_facts
from transforms.evaluate import ScoreMetrics
from transforms.inference import WritePredictions, read_bytes
from transforms.outputs import WriteDeadLetterFile, local_dir, write_bytes
from transforms.read import DatasetSource, ReadShards, is_remote

__all__ = ["run", "build_parser", "PREDICTIONS_PREFIX", "DEAD_LETTER_FILE", "METRICS_FILE"]

PREDICTIONS_PREFIX = "predictions"
"""The prediction files are ``<output>/predictions-SSSSS-of-NNNNN.parquet``."""
DEAD_LETTER_FILE = "dead_letter.jsonl"
METRICS_FILE = "metrics.json"


def build_parser() -> Parser:
    """The command line of ``predict`` (:mod:`pipelines.cli`'s conventions)."""
    parser = Parser(prog=prog("predict"), description="Score a Parquet data set with an okl model (RunInference).")
    parser.add_argument("--model", required=True, help="model file written by pipelines.train")
    parser.add_argument("--input", required=True, help="data set directory or Parquet glob")
    parser.add_argument("--output", required=True, help="output directory: predictions-SSSSS-of-NNNNN.parquet and dead_letter.jsonl")
    parser.add_argument("--batch_rows", type=int, default=4096, help="rows per inference block (default %(default)s)")
    return parser


def _source(path: str, learner: okl_core.Learner) -> DatasetSource:
    """The data set, checked against the model (multiclass: the model's classes)."""
    source = DatasetSource.open(path)
    check_data_fits(learner, data_facts(source))
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
    parser = build_parser()
    args, beam_argv = okl_and_beam_args(parser, argv)
    try:
        model_bytes = read_bytes(args.model)
        learner, _ = okl_core.model_from_bytes(model_bytes, source=args.model)
    except (OSError, okl_core.ModelFileError) as err:
        parser.error(f"--model {args.model}: {err}")
    try:
        source = _source(args.input, learner)
        plan = StreamPlan(max(source.n_rows, 1), 1, 1, args.batch_rows)
    except (FileNotFoundError, ValueError) as err:
        parser.error(f"--input {args.input}: {err}")
    local_dir(args.output)
    prefix, dead_path, metrics_path = (f"{args.output.rstrip('/')}/{name}" for name in (PREDICTIONS_PREFIX, DEAD_LETTER_FILE, METRICS_FILE))
    if not is_remote(metrics_path) and os.path.exists(metrics_path):
        os.remove(metrics_path)  # an earlier run's: the summary must never read it
    pipeline = make_pipeline(pipeline_options(beam_argv))
    read = pipeline | "ReadShards" >> ReadShards(source, plan, split="predict")
    launched_at = time.time()
    with live_progress("predict", source.n_rows, pipeline.options) as progress:
        read["batches"] | "Predict" >> WritePredictions(args.model, learner.task, getattr(learner.config, "n_classes", None), prefix,
                                                        progress_dir=progress.directory)
        model = pipeline | "Model" >> beam.Create([model_bytes])
        (read["batches"] | "ScoreMetrics" >> ScoreMetrics(model)
         | "WriteMetrics" >> beam.Map(_write_metrics, metrics_path, learner.task))
        read["dead_letter"] | "WriteDeadLetters" >> WriteDeadLetterFile(dead_path)
        result = run_pipeline(pipeline)
    print(f"predictions:  {prefix}-*.parquet")
    print(f"metrics:      {metrics_path}")
    print(f"dead letters: {dead_path}")
    _print_summary(result, metrics_path)
    print(wall_time_text(launched_at, time.time() - launched_at, running_as_command()))
    return result


def _write_metrics(prequential_json: str, path: str, task: str) -> None:
    """``metrics.json``: the task, the rows scored and the model's metrics on their labels."""
    summary = Prequential(**json.loads(prequential_json)).summary()
    write_bytes(path, (json.dumps({"task": task, "rows_scored": summary["n"], "metrics": summary}, indent=1, sort_keys=True) + "\n").encode())


def _print_summary(result, metrics_path: str) -> None:
    """``N rows scored, R rejected; mistake_rate ...`` (fractions), when the output is local."""
    rejected = counters(result).get("predict_rows_rejected", 0)
    if is_remote(metrics_path):
        return
    if not os.path.exists(metrics_path):  # no row could be scored
        print(f"0 rows scored, {rejected} rejected")
        return
    with open(metrics_path) as f:
        written = json.load(f)
    names = ("mse", "mae") if written["task"] == "regression" else ("mistake_rate",)
    values = ", ".join(f"{name} {written['metrics'][name]:.5g}" for name in names)
    print(f"{written['rows_scored']} rows scored, {rejected} rejected; {values}")


if __name__ == "__main__":
    main(run, "predict")
