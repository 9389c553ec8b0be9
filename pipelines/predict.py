"""Score a Parquet data set with a trained okl model through Beam's RunInference.

::

    python -m pipelines.predict --model runs/demo/model.npz --input data/test \\
        --output runs/demo/predictions --runner=DirectRunner

Rows are read in blocks (:class:`~transforms.read.ReadShards`, one shard), scored by
:class:`~transforms.inference.OklModelHandler` in RunInference, and written as Parquet
files ``<output>/predictions-SSSSS-of-NNNNN.parquet`` (``--output`` is a directory) with columns ``row`` (the input's row number),
``score`` (binary, regression: float64) or ``scores`` (multiclass: list of float64 per
class) and, for classification, ``label`` (int32: -1/+1 or the class index)
(:class:`~transforms.inference.WritePredictions`). Bad rows are not scored; they are
listed in ``<output>.dead_letter.jsonl``. Every other argument is a Beam pipeline option.
"""

from __future__ import annotations

import dataclasses

import okl_core
from okl_core.data.plan import StreamPlan
from pipelines.cli import Parser, main, prog
from pipelines.common import UsageError, configure_logging, make_pipeline, pipeline_options, okl_and_beam_args, run_pipeline
from transforms.inference import WritePredictions, read_bytes
from transforms.outputs import WriteDeadLetterFile, local_dir
from transforms.read import DatasetSource, ReadShards

__all__ = ["run", "build_parser", "PREDICTIONS_PREFIX", "DEAD_LETTER_FILE"]

PREDICTIONS_PREFIX = "predictions"
"""The prediction files are ``<output>/predictions-SSSSS-of-NNNNN.parquet``."""
DEAD_LETTER_FILE = "dead_letter.jsonl"


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
    parser = build_parser()
    args, beam_argv = okl_and_beam_args(parser, argv)
    try:
        learner, _ = okl_core.model_from_bytes(read_bytes(args.model), source=args.model)
    except (OSError, okl_core.ModelFileError) as err:
        parser.error(f"--model {args.model}: {err}")
    try:
        source = _source(args.input, learner)
        plan = StreamPlan(max(source.n_rows, 1), 1, 1, args.batch_rows)
    except (FileNotFoundError, ValueError) as err:
        parser.error(f"--input {args.input}: {err}")
    local_dir(args.output)
    prefix = f"{args.output.rstrip('/')}/{PREDICTIONS_PREFIX}"
    dead_path = f"{args.output.rstrip('/')}/{DEAD_LETTER_FILE}"
    pipeline = make_pipeline(pipeline_options(beam_argv))
    read = pipeline | "ReadShards" >> ReadShards(source, plan, split="predict")
    read["batches"] | "Predict" >> WritePredictions(args.model, learner.task, getattr(learner.config, "n_classes", None), prefix)
    read["dead_letter"] | "WriteDeadLetters" >> WriteDeadLetterFile(dead_path)
    result = run_pipeline(pipeline)
    print(f"predictions:  {prefix}-*.parquet")
    print(f"dead letters: {dead_path}")
    return result


if __name__ == "__main__":
    main(run, "predict")
