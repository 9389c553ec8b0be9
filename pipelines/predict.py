"""Score records with a trained okl model through Beam's RunInference.

::

    okl predict --model runs/churn --input data/churn_test --output runs/churn/predictions
    okl predict --model runs/churn --input new_customers.csv --output runs/churn/new

``--model`` is a model file, a training run's folder (its ``model.npz``) or a streaming
job's output folder (its newest ``model-vNNNNNN.npz``). ``--input`` is an okl data set
(a directory with ``dataset.json``, or Parquet files of okl rows), or raw records: a CSV
file or a Parquet table with one column per feature. Raw records are prepared on the fly
exactly as the model's training data set was (``preparation.json``, written by
``okl train`` next to the model: :mod:`okl_core.data.preparation`): the same columns,
categories, missing values, scalings and id columns, the same one-line errors, and the
rows dropped listed in ``<output>/rejects.csv`` with their ids. Records without the
target column are scored without metrics.

Rows are read in blocks (:class:`~transforms.read.ReadShards`, one shard), scored by
:class:`~transforms.inference.OklModelHandler` in RunInference, and written as Parquet
files ``<output>/predictions-SSSSS-of-NNNNN.parquet`` (``--output`` is a directory)
(:class:`~transforms.inference.WritePredictions`) with columns: the data set's id
columns (``prepare --id_column``), ``row`` (the data set's row number), for
classification ``label`` (the class name the model records; the code -1/+1 or 0..C-1 for
a model that records none), ``score`` (binary, regression: float64) or ``scores``
(multiclass: a list of float64 per class) and, for learners whose loss defines them
(logistic, softmax: :mod:`okl_core.predictions`), ``proba_<class>`` per class. Data
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
import shutil
import tempfile
import time

# pipelines.common first: it imports Beam with Beam's spurious "apitools not found" warning
# dropped (and only that one); importing apache_beam before it printed the warning.
from pipelines.common import UsageError, configure_logging, live_progress, make_pipeline, okl_and_beam_args, pipeline_options, run_pipeline

import apache_beam as beam

import okl_core
from okl_core.data.csv_table import parse_delimiter
from okl_core.data.layout import check_same_classes
from okl_core.data.plan import StreamPlan
from okl_core.data.preparation import PREPARATION_FILE, prepare_like, raw_table_kind, read_preparation
from okl_core.data.sources import REJECTS_FILE, one_line_error
from okl_core.metrics import Prequential
from okl_core.jsonio import strict_json
from okl_core.predictions import probability_link
from okl_experiments.metrics import with_baseline
from okl_experiments.params import check_data_fits
from okl_experiments.progress import wall_time_text
from okl_experiments.text import read_json
from pipelines.cli import Parser, main, prog, running_as_command
from pipelines.job import OUTPUT_FILES, check_model_classes, counters, data_facts, stage_output
from pipelines.requests import PredictRequest
from transforms.evaluate import ScoreMetrics
from transforms.inference import WritePredictions, passthrough_fields, read_bytes
from transforms.outputs import MANIFEST_FILE, WriteDeadLetterFile, write_bytes
from transforms.read import DatasetSource, ReadShards, is_remote

__all__ = ["run", "build_parser", "model_file", "PREDICTIONS_PREFIX", "DEAD_LETTER_FILE", "METRICS_FILE"]

PREDICTIONS_PREFIX = "predictions"
"""The prediction files are ``<output>/predictions-SSSSS-of-NNNNN.parquet``."""
DEAD_LETTER_FILE = "dead_letter.jsonl"
METRICS_FILE = "metrics.json"


def build_parser() -> Parser:
    """The command line of ``predict`` (:mod:`pipelines.cli`'s conventions)."""
    parser = Parser(prog=prog("predict"), description="Score an okl data set or raw records (CSV, Parquet) with an okl model (RunInference).")
    parser.add_argument("--model", required=True,
                        help="model file, a training run folder (its model.npz) or a streaming output folder (its newest model-vNNNNNN.npz)")
    parser.add_argument("--input", required=True,
                        help="okl data set (directory or Parquet glob), or raw records (a CSV file, a Parquet table) prepared like the model's training data")
    parser.add_argument("--output", required=True,
                        help="output directory: predictions-SSSSS-of-NNNNN.parquet, metrics.json, dead_letter.jsonl (raw records: rejects.csv); must be new or empty unless --overwrite")
    parser.add_argument("--overwrite", action="store_true", help="replace the predictions already in --output (once these have been written)")
    parser.add_argument("--batch_rows", type=int, default=4096, help="rows per inference block (default %(default)s)")
    raw = parser.add_argument_group("raw records (a CSV file or Parquet table as --input)")
    raw.add_argument("--skip_bad_rows", action="store_true", help="skip bad rows into rejects.csv instead of stopping at the first")
    raw.add_argument("--delimiter", default=",", help="CSV field delimiter, one character; \\t for a tab (default ',')")
    return parser


def model_file(path: str) -> str:
    """The model file ``--model`` names: itself, a training run folder's ``model.npz``, a streaming output's newest version.

    Raises
    ------
    ValueError
        A local folder with neither.
    """
    if is_remote(path) or not os.path.isdir(path):
        return path
    batch = os.path.join(path, OUTPUT_FILES["model"])
    if os.path.isfile(batch):
        return batch
    versions = okl_core.model_versions(path)
    if versions:
        return versions[-1][1]
    raise ValueError(f"a folder with neither {OUTPUT_FILES['model']} (a training run) nor model-vNNNNNN.npz versions (a streaming run)")


def _preparation(model_path: str, model_bytes: bytes):
    """The training data's preparation recorded next to the model (``preparation.json``), checked against its classes."""
    path = os.path.join(os.path.dirname(model_path), PREPARATION_FILE)
    if is_remote(model_path) or not os.path.isfile(path):
        raise ValueError(f"scoring raw records needs {PREPARATION_FILE} next to the model {model_path} (written by okl train on a data set "
                         "prepared by okl prepare csv or parquet); otherwise prepare the records with okl prepare --like the training data set")
    info = read_preparation(path)
    check_same_classes(path, info.classes, okl_core.model_classes(model_bytes), f"the model {model_path}")
    return info


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
    folder = directory.rstrip("/")
    return f"{folder}/{PREDICTIONS_PREFIX}", f"{folder}/{DEAD_LETTER_FILE}", f"{folder}/{METRICS_FILE}"


def run(argv=None):
    """Parse ``argv``, score the data set (raw records: prepare them first), print where the predictions went.

    A local output is written into a hidden staging folder beside ``--output`` and renamed
    into place when the job has finished (as ``pipelines.train`` publishes a run): it never
    mixes the files of two runs, and a failed run leaves what was there before. Raw
    records are prepared into that folder too (a temporary folder for a remote output) and
    the prepared rows removed before publishing; their ``rejects.csv`` stays.

    Returns
    -------
    apache_beam.runners.runner.PipelineResult
    """
    configure_logging()
    parser = build_parser()
    args, beam_argv = okl_and_beam_args(parser, argv)
    try:
        request = PredictRequest.from_args(args, beam_argv)
    except UsageError as err:
        parser.error(str(err))
    try:
        model_path = model_file(request.model)
        model_bytes = read_bytes(model_path)
        learner, _ = okl_core.model_from_bytes(model_bytes, source=model_path)
    except (OSError, ValueError, okl_core.ModelFileError) as err:
        parser.error(f"--model {request.model}: {err}")
    kind = raw_table_kind(request.input)
    preparation = None
    try:
        if kind is not None:
            preparation, delimiter = _preparation(model_path, model_bytes), parse_delimiter(request.delimiter)
        elif request.skip_bad_rows or request.delimiter != ",":
            raise ValueError(f"--skip_bad_rows and --delimiter are for raw records (a CSV file or Parquet table); --input {request.input} is okl rows")
        staging = stage_output(request.output, request.overwrite, _not_predictions, (METRICS_FILE, DEAD_LETTER_FILE, REJECTS_FILE), holds="predictions")
    except (UsageError, ValueError) as err:
        parser.error(str(err))
    write_to = staging.tmp if staging else request.output
    scratch = None if kind is None else (os.path.join(staging.tmp, ".prepared") if staging else tempfile.mkdtemp(prefix="okl-predict-"))
    try:
        prepared = None if kind is None or scratch is None else _prepare_raw(request, kind, preparation, delimiter, scratch, write_to)
        source, plan = _checked_source(request.input, prepared.path if prepared else request.input, learner, model_bytes, model_path, request.batch_rows)
        result, launched_at = _score(request, learner, model_path, model_bytes, source, plan, write_to)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if staging is not None:
            staging.commit()
    except BaseException as err:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if staging is not None:
            staging.abort()
        if isinstance(err, UsageError):
            parser.error(str(err))
        raise
    prefix, dead_path, metrics_path = _output_paths(request.output)
    print(f"predictions:  {prefix}-*.parquet")
    print(f"metrics:      {metrics_path}")
    print(f"dead letters: {dead_path}")
    if prepared is not None:
        rejected = f", {prepared.n_rejected} rejected ({request.output.rstrip('/')}/{REJECTS_FILE})" if prepared.n_rejected else ", none rejected"
        print(f"prepared:     {prepared.info.n_rows} rows like the training data ({os.path.dirname(model_path) or '.'}/{PREPARATION_FILE}){rejected}")
    _print_summary(result, metrics_path)
    print(wall_time_text(launched_at, time.time() - launched_at, running_as_command()))
    return result


def _prepare_raw(request: PredictRequest, kind: str, preparation, delimiter: str, scratch: str, write_to: str):
    """Prepare the raw ``--input`` into ``scratch`` like the training data; its ``rejects.csv`` goes to ``write_to``.

    Raises
    ------
    UsageError
        The preparation's one-line error (it names the file, line or row, and column).
    """
    try:
        summary = prepare_like(request.input, os.path.join(scratch, "data"), preparation, kind, delimiter=delimiter, skip_bad_rows=request.skip_bad_rows)
    except (ValueError, OSError) as err:
        raise UsageError(one_line_error(err)) from err
    rejects = os.path.join(summary.path, REJECTS_FILE)
    if os.path.exists(rejects):
        with open(rejects, "rb") as f:
            write_bytes(f"{write_to.rstrip('/')}/{REJECTS_FILE}", f.read())
    return summary


def _checked_source(named: str, path: str, learner: okl_core.Learner, model_bytes: bytes, model_path: str, batch_rows: int) -> tuple[DatasetSource, StreamPlan]:
    """The data set at ``path`` (``--input``, or its prepared rows), checked against the model; errors name ``--input named``."""
    try:
        source = _source(path, learner)
        plan = StreamPlan(max(source.n_rows, 1), 1, 1, batch_rows)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"--input {named}: {err}") from None
    try:  # class codes of other classes would be scored, and predicted, as the model's
        check_model_classes(source, model_bytes, f"the model {model_path} was trained on")
    except ValueError as err:
        raise UsageError(str(err)) from None
    return source, plan


def _score(request: PredictRequest, learner: okl_core.Learner, model_path: str, model_bytes: bytes, source: DatasetSource, plan: StreamPlan,
           write_to: str):
    """Run the scoring job, writing its files into ``write_to``; the PipelineResult and when the job was launched."""
    prefix, dead_path, metrics_path = _output_paths(write_to)
    try:
        id_fields = passthrough_fields(source)
    except (OSError, ValueError) as err:
        raise UsageError(f"--input {request.input}: {err}") from None
    pipeline = make_pipeline(pipeline_options(list(request.beam_args)))
    # Labels only feed the metrics: rows are judged by their features (bad ones dead-lettered),
    # and a row without a usable label is scored and left out of the metrics.
    read = pipeline | "ReadShards" >> ReadShards(source, plan, split="predict", judge_labels=False)
    launched_at = time.time()
    with live_progress("predict", source.n_rows, pipeline.options) as progress:
        read["batches"] | "Predict" >> WritePredictions(model_path, learner.task, getattr(learner.config, "n_classes", None), prefix,
                                                        progress_dir=progress.directory, classes=okl_core.model_classes(model_bytes),
                                                        link=probability_link(learner), source=source, id_fields=id_fields)
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
    print(counts if unlabeled and unlabeled == written["rows_scored"] else f"{counts}; {values}")  # no label at all: no metrics to print


if __name__ == "__main__":
    main(run, "predict")
