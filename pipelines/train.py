"""Train an online kernel learner on a sharded Parquet data set with Apache Beam.

::

    python -m pipelines.train --runner=DirectRunner            # built-in demo, no download
    python -m pipelines.train --input data/a9a --test data/a9a.t --learner fogd \\
        --sigma median --num_shards 4 --rounds 3 --output runs/a9a \\
        --runner=DirectRunner --direct_num_workers=2 --direct_running_mode=multi_processing

The graph (DESIGN.md, "transforms and the training graph")::

    InitialModel ──> [round r = 0..R-1:  ReadShards -> TrainOnline -> MergeBySeed] ──> model
                                                         └─> per-batch metrics, dead letters
    model ──> Evaluate(--test) ──> test metrics;   WriteRunOutputs -> model, metrics, plot

``--num_shards 1 --rounds 1`` (the defaults) is the paper's sequential algorithm, batch by
batch. ``--num_shards k`` trains k local models on k contiguous parts of the stream and
averages them by seed; ``--rounds R`` cuts each part into R segments and unrolls R
train/merge stages, each starting from the previous merged model.

Learner parameters come from ``--config`` (JSON ``{"learner": name, "params": {...}}``, as
written by the sweep), then ``--param key=value`` (values parsed as JSON, else strings),
then the convenience flags (``--sigma``, ``--eta``, ``--n_components``, ``--seed``).
``n_inputs`` and ``n_classes`` come from the data set. ``--sigma median`` sets the kernel
bandwidth to the median pairwise distance of (up to) the first 1000 training rows (L1
distance for the Laplacian kernel; :func:`okl_core.median_heuristic`); ``--sigma 0.1*median``
scales it. Every other argument is a Beam pipeline option (``--runner``, ``--job_endpoint``,
Dataflow and Flink options, ...).

Outputs in ``--output`` (default ``runs/<data>-<learner>``): ``model.npz``, ``metrics.json``,
``online_error.png`` and ``dead_letter.jsonl``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import re
import sys
import time


import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import StandardOptions

import okl_core
from okl_core.data.plan import StreamPlan
from okl_core.data.synthetic import write_synthetic
from pipelines.common import UsageError, configure_logging, make_pipeline, pipeline_options, run_pipeline, use_local_prism
from pipelines.stream import add_streaming_flags, build_streaming_graph
from transforms.evaluate import Evaluate
from transforms.outputs import WriteRunOutputs, local_dir
from transforms.read import METRICS_NAMESPACE, DatasetSource, ReadShards
from transforms.train import LearnerSpec, MergeBySeed, TrainOnline

__all__ = ["run", "parse_args", "TrainJob", "TrainResult", "DEFAULT_BATCH_ROWS"]

_LOG = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 4096
MEDIAN_ROWS = 1000
SYNTHETIC_TRAIN_ROWS = 65536
SYNTHETIC_TEST_ROWS = 8192
# The built-in demo: the DSG paper's synthetic regression learned by FOGD regression (or by
# DSG with the square loss: --learner dsg; slower, its prediction cost grows with the blocks).
DEMO_LEARNER = "fogd_r"
DEMO_PARAMS = {
    "fogd_r": {"sigma": "0.2*median", "eta": 1e-4, "eps": 0.0},
    "dsg": {"loss": "square", "sigma": "0.2*median", "block_size": 512, "batch_size": 1024, "theta": 8.0, "step_offset": 16.0, "nu": 1e-6},
}


@dataclasses.dataclass
class TrainJob:
    """Everything the graph needs, resolved from the command line."""

    source: DatasetSource
    test_source: DatasetSource | None
    learner: okl_core.Learner
    params: dict
    plan: StreamPlan
    output: str
    files: dict
    read_order_seed: int | None
    shuffle_rows: bool = False


@dataclasses.dataclass
class TrainResult:
    """What :func:`run` returns: the Beam result, where the outputs are, metrics and counters."""

    pipeline_result: object
    output: str
    files: dict
    metrics: dict | None
    counters: dict = dataclasses.field(default_factory=dict)

    @property
    def model_path(self) -> str:
        return self.files["model"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.train",
        description="Train an okl learner over sharded Parquet with Apache Beam. Unknown arguments are Beam pipeline options.",
    )
    data = parser.add_argument_group("data")
    data.add_argument("--input", help="data set directory or Parquet glob (default: built-in synthetic regression, generated from a seed)")
    data.add_argument("--test", help="held-out data set (directory or glob) for test metrics")
    data.add_argument("--synthetic_rows", type=int, default=SYNTHETIC_TRAIN_ROWS, help="rows of the built-in data set (default %(default)s)")
    data.add_argument("--synthetic_seed", type=int, default=0, help="seed of the built-in data set (default %(default)s)")
    model = parser.add_argument_group("learner")
    model.add_argument("--learner", help=f"one of {', '.join(okl_core.learner_names())} (default: from --config, else {DEMO_LEARNER})")
    model.add_argument("--config", help='JSON file {"learner": name, "params": {...}} (e.g. written by the sweep); flags override it')
    model.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="learner parameter, value parsed as JSON (repeatable)")
    model.add_argument("--sigma", help='kernel bandwidth: a number, "median" or "<factor>*median"')
    model.add_argument("--eta", type=float, help="step size")
    model.add_argument("--n_components", type=int, help="random Fourier frequencies D")
    model.add_argument("--seed", type=int, help="model seed (random features are regenerated from it)")
    dist = parser.add_argument_group("distribution")
    dist.add_argument("--num_shards", type=int, default=1, help="local models trained in parallel, merged by seed (default 1: the sequential algorithm)")
    dist.add_argument("--rounds", type=int, default=1, help="train/merge rounds (iterative parameter mixing; default 1)")
    dist.add_argument("--batch_rows", type=int, help=f"rows per update (default {DEFAULT_BATCH_ROWS}, rounded up to a multiple of the learner's batch_size)")
    dist.add_argument(
        "--shuffle_rows", action="store_true",
        help="read rows in a separate step and send them through Beam's shuffle to the training step "
        "(default: each shard's training step reads its own row groups; same model, less memory and traffic)",
    )
    dist.add_argument("--read_order_seed", type=int, help=argparse.SUPPRESS)  # tests: permute the read tasks
    out = parser.add_argument_group("output")
    out.add_argument("--output", help="output directory (default runs/<data>-<learner>)")
    add_streaming_flags(parser)
    return parser


def parse_args(argv=None) -> tuple[argparse.Namespace, list[str]]:
    """Split ``argv`` into okl's arguments and Beam's pipeline options."""
    return _parser().parse_known_args(argv)


def _json_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _learner_choice(args) -> tuple[str, dict]:
    """Learner name and parameters from --config, --learner, --param and the flags."""
    name, params = None, {}
    if args.config:
        try:
            with open(args.config) as f:
                config = json.load(f)
        except (OSError, json.JSONDecodeError) as err:
            raise UsageError(f"--config {args.config}: cannot read JSON ({err})") from None
        if not isinstance(config, dict) or not isinstance(config.get("params", {}), dict):
            raise UsageError(f'--config {args.config}: expected {{"learner": name, "params": {{...}}}}')
        name, params = config.get("learner"), dict(config.get("params", {}))
    name = args.learner or name
    if name is None:
        name = DEMO_LEARNER if args.input is None else None
    if name is None:
        raise UsageError(f"choose a learner with --learner (one of {', '.join(okl_core.learner_names())}) or --config")
    if name not in okl_core.learner_names():
        raise UsageError(f"unknown learner {name!r}; choose one of {', '.join(okl_core.learner_names())}")
    if args.input is None and not args.config:
        params = {**DEMO_PARAMS.get(name, {}), **params}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = _json_value(value)
    for key in ("sigma", "eta", "n_components", "seed"):
        value = getattr(args, key)
        if value is not None:
            params[key] = _json_value(value) if key == "sigma" else value
    return name, params


def _resolve_sigma(params: dict, source: DatasetSource) -> None:
    """Replace ``sigma = "median"`` / ``"<factor>*median"`` by the median heuristic."""
    sigma = params.get("sigma")
    if not isinstance(sigma, str):
        return
    match = re.fullmatch(r"\s*(?:([0-9.eE+-]+)\s*\*\s*)?median\s*", sigma)
    try:
        factor = float(match.group(1) or 1.0) if match else None
    except ValueError:
        factor = None
    if factor is None or not factor > 0:
        raise UsageError(f'--sigma {sigma!r}: expected a number, "median" or "<factor>*median"')
    metric = "l1" if params.get("kernel") == "laplacian" else "euclidean"
    rows = source.read_rows(MEDIAN_ROWS)
    if len(rows) < 2:
        raise UsageError(f"--sigma median needs at least 2 good rows in {source.path}")
    params["sigma"] = factor * okl_core.median_heuristic(rows, n_samples=MEDIAN_ROWS, metric=metric)
    _LOG.info("sigma = %s x median %s distance = %.6g", factor, metric, params["sigma"])


def _task_mismatch(name: str, task: str, source: DatasetSource) -> UsageError:
    return UsageError(
        f"learner {name} is set up for {task} data but {source.path} holds {source.task} data; "
        f"pick a {source.task} learner or set its task parameters (e.g. dsg --param loss=...)"
    )


def _build_learner(name: str, params: dict, source: DatasetSource) -> okl_core.Learner:
    cls = okl_core.learner_class(name)
    fixed_task = getattr(cls.config_class, "task", None)  # a class attribute, or a property of the config
    if isinstance(fixed_task, str) and fixed_task != source.task:
        raise _task_mismatch(name, fixed_task, source)
    fields = {f.name for f in dataclasses.fields(cls.config_class)}
    if params.setdefault("n_inputs", source.n_features) != source.n_features:
        raise UsageError(f"n_inputs={params['n_inputs']} but {source.path} has {source.n_features} features")
    if "n_classes" in fields and source.task == "multiclass":
        if params.setdefault("n_classes", source.n_classes) != source.n_classes:
            raise UsageError(f"n_classes={params['n_classes']} but {source.path} has {source.n_classes} classes")
    _resolve_sigma(params, source)
    try:
        learner = okl_core.make_learner(name, **params)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if learner.task != source.task:
        raise _task_mismatch(name, learner.task, source)
    return learner


def _check_mergeable(learner: okl_core.Learner) -> None:
    """Fail before the job when the learner cannot merge shards (probe: two initial states)."""
    initial = learner.init()
    try:
        okl_core.merge_states(learner, [initial, initial], base=initial)
    except okl_core.NotMergeableError as err:
        raise UsageError(f"--num_shards > 1 needs a mergeable learner: {err}; use --num_shards 1") from None


def _open(path: str, flag: str) -> DatasetSource:
    try:
        return DatasetSource.open(path)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"{flag} {path}: {err}") from None


def _plan(args, learner: okl_core.Learner, n_rows: int) -> StreamPlan:
    minibatch = int(getattr(learner.config, "batch_size", 1) or 1) if learner.minibatch_defined else 1
    batch_rows = args.batch_rows or minibatch * math.ceil(DEFAULT_BATCH_ROWS / minibatch)
    if batch_rows % minibatch:
        _LOG.warning("--batch_rows %d is not a multiple of %s's batch_size %d: each batch ends with a short mini-batch", batch_rows, learner.name, minibatch)
    try:
        return StreamPlan(n_rows, args.num_shards, args.rounds, batch_rows, align=minibatch)
    except ValueError as err:
        raise UsageError(str(err)) from None


def prepare_job(args) -> TrainJob:
    """Resolve data, learner, plan and output paths (generating the demo data if needed)."""
    source = None if args.input is None else _open(args.input, "--input")
    name, params = _learner_choice(args)
    if source is None:
        if args.output and "://" in args.output:
            raise UsageError("the built-in demo data set is written locally: give a local --output, or --input")
        output = args.output or os.path.join("runs", f"synthetic-{name}")
        data_dir = os.path.join(output, "data")
        train_path, test_path = os.path.join(data_dir, "train"), os.path.join(data_dir, "test")
        write_synthetic(train_path, args.synthetic_rows, seed=args.synthetic_seed, rows_per_shard=16384, overwrite=True)
        write_synthetic(test_path, SYNTHETIC_TEST_ROWS, seed=args.synthetic_seed + 1, overwrite=True, name="dsg_synthetic_test")
        args.test = args.test or test_path
        source = _open(train_path, "--input")
    else:
        output = args.output or os.path.join("runs", f"{source.name}-{name}")
    if source.n_rows == 0:
        raise UsageError(f"--input {source.path}: the data set has no rows")
    learner = _build_learner(name, params, source)
    test_source = None
    if args.test:
        test_source = _open(args.test, "--test")
        if (test_source.n_features, test_source.task) != (source.n_features, source.task):
            raise UsageError(
                f"--test {args.test} has {test_source.n_features} features of {test_source.task} data, "
                f"the training data {source.n_features} features of {source.task} data"
            )
        if source.task == "multiclass":
            test_source = dataclasses.replace(test_source, n_classes=source.n_classes)
    plan = _plan(args, learner, source.n_rows)
    if plan.num_shards > 1:
        _check_mergeable(learner)
    local_dir(output)
    files = {key: f"{output.rstrip('/')}/{name}" for key, name in
             (("model", "model.npz"), ("metrics", "metrics.json"), ("plot", "online_error.png"), ("dead_letter", "dead_letter.jsonl"))}
    return TrainJob(source, test_source, learner, learner.describe()["config"], plan, output, files, args.read_order_seed, args.shuffle_rows)


def build_graph(pipeline: beam.Pipeline, job: TrainJob, launched_at: float) -> None:
    """Add the training graph of ``job`` to ``pipeline``."""
    spec = LearnerSpec(job.learner.name, job.params)
    model = pipeline | "InitialModel" >> beam.Create([okl_core.model_bytes(job.learner, job.learner.init())])
    summaries, batches, dead = [], [], []
    for r in range(job.plan.rounds):
        read = pipeline | f"ReadShards_r{r}" >> ReadShards(
            job.source, job.plan, round=r, materialize=job.shuffle_rows, shuffle_seed=job.read_order_seed
        )
        trained = read["batches"] | f"TrainOnline_r{r}" >> TrainOnline(spec, job.plan, r, model, source=job.source)
        model = trained.states | f"MergeBySeed_r{r}" >> MergeBySeed(spec, base=model)
        summaries.append(trained.states | f"Summaries_r{r}" >> beam.Map(lambda result: result[2]).with_output_types(str))
        batches.append(trained.metrics)
        dead.extend([read["dead_letter"], trained.dead_letter])
    if job.test_source is not None:
        evaluated = pipeline | "Evaluate" >> Evaluate(job.test_source, model, job.plan.batch_rows)
        test = evaluated["metrics"]
        dead.append(evaluated["dead_letter"])
    else:
        test = pipeline | "NoTestSet" >> beam.Create([]).with_output_types(str)
    info = {
        "learner": job.learner.describe(),
        "task": job.learner.task,
        "plan": job.plan.to_dict(),
        "train": {"name": job.source.name, "path": job.source.path, "n_rows": job.source.n_rows},
        "test": None if job.test_source is None else {"name": job.test_source.name, "path": job.test_source.path, "n_rows": job.test_source.n_rows},
        "files": job.files,
        "launched_at": launched_at,
    }
    pipeline | "WriteRunOutputs" >> WriteRunOutputs(
        info,
        model,
        summaries | "FlattenSummaries" >> beam.Flatten(),
        batches | "FlattenBatchMetrics" >> beam.Flatten(),
        test,
        dead | "FlattenDeadLetters" >> beam.Flatten(),
    )


def _counters(pipeline_result) -> dict:
    """okl's Beam counters (summed over steps), where the runner reports metrics."""
    try:
        queried = pipeline_result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    except (NotImplementedError, AttributeError):
        return {}
    out: dict = {}
    for counter in queried.get("counters", []):
        value = counter.committed if counter.committed is not None else counter.attempted
        out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + (value or 0)
    return out


def _print_summary(result: TrainResult) -> None:
    m = result.metrics
    print(f"model:        {result.files['model']}")
    print(f"metrics:      {result.files['metrics']}")
    print(f"online error: {result.files['plot']}")
    print(f"dead letters: {result.files['dead_letter']}")
    if not m:
        return
    key = "mse" if "mse" in m["online"]["merged"] else "mistake_rate"
    line = f"{m['learner']['learner']}: {m['rows']['trained']} rows trained, {m['rows']['rejected']} rejected; online {key} {m['online']['merged'][key]:.5g}"
    if m.get("test"):
        line += f", test {key} {m['test'][key]:.5g}"
    print(line + f"; {m['timing']['wall_seconds']:.1f} s")


def run(argv=None) -> TrainResult:
    """Parse ``argv``, build and run the training pipeline, print where the outputs went.

    Returns
    -------
    TrainResult
        ``pipeline_result`` (Beam's PipelineResult), the output paths, and the metrics
        (read back when the output is local and the job has finished).
    """
    configure_logging()
    launched_at = time.time()
    parser = _parser()
    args, beam_argv = parser.parse_known_args(argv)
    try:
        job = prepare_job(args)
    except UsageError as err:
        parser.error(str(err))
    if args.streaming:
        return _run_streaming(parser, args, job, beam_argv)
    pipeline = make_pipeline(pipeline_options(beam_argv))
    build_graph(pipeline, job, launched_at)
    pipeline_result = run_pipeline(pipeline)
    metrics = None
    if "://" not in job.files["metrics"] and os.path.exists(job.files["metrics"]):
        with open(job.files["metrics"]) as f:
            metrics = json.load(f)
    result = TrainResult(pipeline_result, job.output, job.files, metrics, _counters(pipeline_result))
    _print_summary(result)
    return result


_PRISM_HELP = (
    "local streaming runs on Beam's Prism runner, which could not be started ({error}). Build it with Go from "
    "the Go module proxy (`python -m pipelines.engines install prism`, or `make runners`: okl then uses it), "
    "or pass --prism_location=PATH to a Prism binary of apache-beam {version}, or run on Flink or Dataflow "
    "(README, '## Streaming')"
)


def streaming_pipeline(beam_argv: list[str]) -> tuple[beam.Pipeline, bool]:
    """A streaming pipeline on the requested runner, and whether it runs locally on Prism.

    With no runner (or DirectRunner) the graph runs on Beam's Prism runner: the FnApiRunner
    behind okl's batch default is batch-only, and Beam's legacy direct runner cannot run
    the file-watching source.
    """
    options = pipeline_options(beam_argv)
    options.view_as(StandardOptions).streaming = True
    runner = options.view_as(StandardOptions).runner
    local = runner is None or (isinstance(runner, str) and runner.lower() in ("directrunner", "direct", "prismrunner", "prism"))
    if local:
        use_local_prism(options, beam_argv)
    return beam.Pipeline(runner="PrismRunner" if local else runner, options=options), local


def _run_streaming(parser, args, job: TrainJob, beam_argv: list[str]) -> TrainResult:
    """Run the streaming graph (pipelines/stream.py) until --stop_after or cancellation.

    Failing to obtain Prism for a local run is a usage error with what to do.
    """
    if args.input is None:
        parser.error("--streaming needs --input (a directory or glob where new Parquet files appear)")
    pipeline, local = streaming_pipeline(beam_argv)
    try:
        build_streaming_graph(pipeline, job, args)
    except UsageError as err:
        parser.error(str(err))
    try:
        pipeline_result = pipeline.run()
    except (RuntimeError, OSError, ValueError) as err:
        if local and "prism" in f"{err!r} {err.__cause__!r}".lower():
            parser.error(_PRISM_HELP.format(error=str(err).split(": <")[0], version=beam.__version__))
        raise
    pipeline_result.wait_until_finish()
    files = {**job.files, "model": (okl_core.model_versions(job.output) or [(0, job.files["model"])])[-1][1]}
    return TrainResult(pipeline_result, job.output, files, None, _counters(pipeline_result))


if __name__ == "__main__":
    run()
