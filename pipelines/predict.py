"""Score a Parquet data set with a trained okl model through Beam's RunInference.

::

    python -m pipelines.predict --model runs/demo/model.npz --input data/test \\
        --output runs/demo/predictions --runner=DirectRunner

Rows are read in blocks (:class:`~transforms.read.ReadShards`, one shard), scored by
:class:`~transforms.inference.OklModelHandler` in RunInference, and written as Parquet
files ``<output>/predictions-SSSSS-of-NNNNN.parquet`` (``--output`` is a directory) with
columns ``row`` (the input's row number), ``score`` (binary, regression: float64) or
``scores`` (multiclass: list of float64 per class) and, for classification, ``label``
(int32: -1/+1 or the class index) (:class:`~transforms.inference.WritePredictions`). Data
whose ``dataset.json`` lists other ``classes`` than the model file records (the training
data's) is refused before the job: its class codes would stand for other classes. Bad
rows are not scored; they are listed in ``<output>/dead_letter.jsonl``. The labels of the
data set give the model's metrics (:class:`~transforms.evaluate.ScoreMetrics`: the mistake
rate, or the mean squared and absolute errors, as fractions), written to
``<output>/metrics.json`` and printed with the row counts. Every other
argument must be a Beam pipeline option (an argument that neither okl nor Beam defines is
refused; :mod:`pipelines.cli`).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time

# pipelines.common first: it imports Beam with Beam's spurious "apitools not found" warning
# dropped (and only that one); importing apache_beam before it printed the warning.
from pipelines.common import UsageError, configure_logging, live_progress, make_pipeline, okl_and_beam_args, pipeline_options, run_pipeline

import apache_beam as beam

import okl_core
from okl_core.data.plan import StreamPlan
from okl_core.metrics import Prequential
from okl_experiments.metrics import with_baseline
from okl_experiments.params import check_data_fits
from okl_experiments.progress import wall_time_text
from okl_experiments.text import read_json, strict_json
from pipelines.cli import Parser, main, prog, running_as_command
from pipelines.job import OUTPUT_FILES, check_model_classes, counters, data_facts, stage_output
from transforms.evaluate import ScoreMetrics
from transforms.inference import WritePredictions, read_bytes
from transforms.outputs import MANIFEST_FILE, WriteDeadLetterFile, write_bytes
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
    parser.add_argument("--output", required=True,
                        help="output directory: predictions-SSSSS-of-NNNNN.parquet, metrics.json and dead_letter.jsonl; must be new or empty unless --overwrite")
    parser.add_argument("--overwrite", action="store_true", help="replace the predictions already in --output (once these have been written)")
    parser.add_argument("--batch_rows", type=int, default=4096, help="rows per inference block (default %(default)s)")
    return parser


def _source(path: str, learner: okl_core.Learner) -> DatasetSource:
    """The data set, checked against the model (multiclass: the model's classes).

    Files without ``dataset.json`` take the model's task: their labels (optional) only
    feed the metrics, and a label the model does not predict makes a row without a label.
    """
    n_classes = getattr(learner.config, "n_classes", None)
    classes = {"binary": [-1, 1], "multiclass": list(range(n_classes or 0))}.get(learner.task)
    source = DatasetSource.open(path, learner.task, classes, labels_optional=True)
    check_data_fits(learner, data_facts(source))
    if learner.task == "multiclass":
        source = dataclasses.replace(source, n_classes=learner.config.n_classes)
    return source


def _not_predictions(path: str) -> str | None:
    """Why ``--overwrite`` must not replace ``path`` (None: it holds predictions written by predict)."""
    if any(os.path.exists(os.path.join(path, f)) for f in (MANIFEST_FILE, OUTPUT_FILES["model"])):
        return f"a training run ({MANIFEST_FILE} or {OUTPUT_FILES['model']}), not predictions"
    if glob.glob(os.path.join(glob.escape(path), f"{PREDICTIONS_PREFIX}-*-of-*.parquet")) or os.path.exists(os.path.join(path, METRICS_FILE)):
        return None
    return f"not a folder of okl predictions (no {PREDICTIONS_PREFIX}-*.parquet or {METRICS_FILE})"


def _output_paths(directory: str) -> tuple[str, str, str]:
    """The prediction file prefix, dead-letter file and metrics file in ``directory``."""
    return tuple(f"{directory.rstrip('/')}/{name}" for name in (PREDICTIONS_PREFIX, DEAD_LETTER_FILE, METRICS_FILE))


def run(argv=None):
    """Parse ``argv``, score the data set, print where the predictions went.

    A local output is written into a hidden staging folder beside ``--output`` and renamed
    into place when the job has finished (as ``pipelines.train`` publishes a run): it never
    mixes the files of two runs, and a failed run leaves what was there before.

    Returns
    -------
    apache_beam.runners.runner.PipelineResult
    """
    configure_logging()
    parser = build_parser()
    args, beam_argv = okl_and_beam_args(parser, argv)
    if args.batch_rows < 1:
        parser.error(f"--batch_rows must be a positive number of rows, got {args.batch_rows}")
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
    try:  # class codes of other classes would be scored, and predicted, as the model's
        check_model_classes(source, model_bytes, f"the model {args.model} was trained on")
    except ValueError as err:
        parser.error(str(err))
    try:
        staging = stage_output(args.output, args.overwrite, _not_predictions, (METRICS_FILE, DEAD_LETTER_FILE), holds="predictions")
    except UsageError as err:
        parser.error(str(err))
    try:
        result, launched_at = _score(args, beam_argv, learner, model_bytes, source, plan, staging.tmp if staging else args.output)
        if staging is not None:
            staging.commit()
    except BaseException:
        if staging is not None:
            staging.abort()
        raise
    prefix, dead_path, metrics_path = _output_paths(args.output)
    print(f"predictions:  {prefix}-*.parquet")
    print(f"metrics:      {metrics_path}")
    print(f"dead letters: {dead_path}")
    _print_summary(result, metrics_path)
    print(wall_time_text(launched_at, time.time() - launched_at, running_as_command()))
    return result


def _score(args, beam_argv: list, learner: okl_core.Learner, model_bytes: bytes, source: DatasetSource, plan: StreamPlan, write_to: str):
    """Run the scoring job, writing its files into ``write_to``; the PipelineResult and when the job was launched."""
    prefix, dead_path, metrics_path = _output_paths(write_to)
    pipeline = make_pipeline(pipeline_options(beam_argv))
    # Labels only feed the metrics: rows are judged by their features (bad ones dead-lettered),
    # and a row without a usable label is scored and left out of the metrics.
    read = pipeline | "ReadShards" >> ReadShards(source, plan, split="predict", judge_labels=False)
    launched_at = time.time()
    with live_progress("predict", source.n_rows, pipeline.options) as progress:
        read["batches"] | "Predict" >> WritePredictions(args.model, learner.task, getattr(learner.config, "n_classes", None), prefix,
                                                        progress_dir=progress.directory)
        model = pipeline | "Model" >> beam.Create([model_bytes])
        metrics = read["batches"] | "ScoreMetrics" >> ScoreMetrics(model, count_unlabeled=True)
        (pipeline | "Once" >> beam.Create([None])
         | "WriteMetrics" >> beam.Map(_write_metrics, beam.pvalue.AsList(metrics), metrics_path, learner.task))
        read["dead_letter"] | "WriteDeadLetters" >> WriteDeadLetterFile(dead_path)
        result = run_pipeline(pipeline)
    return result, launched_at


def _write_metrics(_, scored: list, path: str, task: str) -> None:
    """``metrics.json``: the task, the rows scored, those without a usable label, and the metrics of the others.

    ``scored``: :class:`~transforms.evaluate.ScoreMetrics`' one ``(Prequential JSON, rows
    without a label)``, or nothing when no row was read. Written once, also when no row
    could be scored (metrics NaN), as strict JSON: NaN as the string ``"NaN"``, as
    ``pipelines.train`` writes it (:func:`okl_experiments.text.strict_json`).
    """
    fields = [json.loads(text) for text, _ in scored]
    rows_without_label = sum(count for _, count in scored)
    summary = (Prequential(**fields[0]) if fields else Prequential(task)).summary()
    report = {"task": task, "rows_scored": summary["n"] + rows_without_label, "rows_without_label": rows_without_label, "metrics": summary}
    write_bytes(path, (strict_json(report, indent=1, sort_keys=True) + "\n").encode())


def _print_summary(result, metrics_path: str) -> None:
    """``N rows scored, R rejected[, U without a label]; mistake_rate ...`` (fractions), when the output is local."""
    rejected = counters(result).get("predict_rows_rejected", 0)
    if is_remote(metrics_path):
        return
    written = read_json(metrics_path, METRICS_FILE)  # "NaN" back to a float
    names = ("mse", "mae") if written["task"] == "regression" else ("mistake_rate",)
    values = ", ".join(f"{name} {with_baseline(written['metrics'], name, written['task'])}" for name in names)
    unlabeled = written["rows_without_label"]
    counts = f"{written['rows_scored']} rows scored, {rejected} rejected" + (f", {unlabeled} without a label (not in the metrics)" if unlabeled else "")
    print(f"{counts}; {values}")


if __name__ == "__main__":
    main(run, "predict")
