"""Train an online kernel learner on a sharded Parquet data set with Apache Beam.

::

    python -m pipelines.train --runner=DirectRunner            # built-in demo, no download
    python -m pipelines.train --input data/a9a --test data/a9a.t --learner fogd \\
        --sigma median --num_shards 4 --rounds 3 --output runs/a9a \\
        --runner=DirectRunner --direct_num_workers=2 --direct_running_mode=multi_processing

``--num_shards 1 --rounds 1`` (the defaults) is the paper's sequential algorithm, batch by
batch. ``--num_shards k`` trains k local models on k contiguous parts of the stream and
averages them by seed; ``--rounds R`` cuts each part into R segments and unrolls R
train/merge stages, each starting from the previous merged model (the graph:
:mod:`pipelines.job`; ``--streaming``: :mod:`pipelines.stream`).

Learner parameters come from ``--config`` (JSON ``{"learner": name, "params": {...}}``, as
written by the sweep), then ``--param key=value`` (values parsed as JSON, else strings),
then the convenience flags (``--sigma``, ``--eta``, ``--n_components``, ``--seed``).
``n_inputs`` and ``n_classes`` come from the data set, and values derived from the data
are resolved on it (:mod:`okl_experiments.params`): ``--sigma median`` is the median
distance between (up to) the first 1000 training rows (L1 for the Laplacian kernel),
``--sigma 0.1*median`` scales it, ``--param nu=1/n`` divides by the number of rows.
Every other argument must be a Beam pipeline option (``--runner``, ``--job_endpoint``,
Dataflow and Flink options, ...): an argument that neither okl nor Beam defines is refused
(:mod:`pipelines.cli`: flags, aliases, Ctrl-C).

Outputs in ``--output`` (default ``runs/<data>-<learner>``): ``model.npz``, ``metrics.json``,
``online_error.png``, ``dead_letter.jsonl`` and, last, ``run.json`` (the run id and each
file's checksum). A local output is built in a hidden sibling folder and renamed into
place when the job has finished, so its files always belong to one run; an output that
already holds a run is refused unless ``--overwrite``, and two runs into one output at
once are refused (the second at launch). A remote output (``gs://...``) is written in
place; ``run.json`` tells which run its files are from.
"""

from __future__ import annotations

import argparse
import sys
import time

import okl_core
from okl_core.catalog import learner_text
from okl_core.reporting import baseline_name, headline
from okl_experiments.metrics import NOT_BETTER, with_baseline
from okl_experiments.params import DEFAULT_BATCH_ROWS
from okl_experiments.params import derived_line
from okl_experiments.progress import wall_time_text
from pipelines.cli import Parser, compile_learner, main, prog, running_as_command
from pipelines.common import (UsageError, configure_logging, live_progress, make_pipeline, okl_and_beam_args, pipeline_options, run_pipeline,
                              workers_are_local)
from pipelines.job import DEMO_LEARNER, SYNTHETIC_TRAIN_ROWS, TrainJob, TrainResult, build_graph, counters, read_metrics, resolve_job
from pipelines.requests import TrainRequest
from pipelines.stream import add_streaming_flags, run_streaming

__all__ = ["run", "parse_args", "build_parser"]


def build_parser() -> Parser:
    """The command line of ``train`` (:mod:`pipelines.cli`'s conventions)."""
    parser = Parser(
        prog=prog("train"),
        description="Train an okl learner over sharded Parquet with Apache Beam. Other arguments must be Beam pipeline options.",
    )
    data = parser.add_argument_group("data")
    data.add_argument("--input", help="data set directory or Parquet glob (default: built-in synthetic regression, generated from a seed)")
    data.add_argument("--test", help="held-out data set (directory or glob) for test metrics")
    data.add_argument("--synthetic_rows", type=int, default=SYNTHETIC_TRAIN_ROWS, help="rows of the built-in data set (default %(default)s)")
    data.add_argument("--synthetic_seed", type=int, default=0, help="seed of the built-in data set (default %(default)s)")
    model = parser.add_argument_group("learner")
    model.add_argument("--learner", help=f"one of {', '.join(okl_core.learner_names())} (default: from --config, else {DEMO_LEARNER})")
    model.add_argument("--config", help='JSON file {"learner": name, "params": {...}} (e.g. written by the sweep); flags override it')
    model.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help='learner parameter, value parsed as JSON; "median", "<k>*median", "n", "<c>/n" are derived from the data (repeatable)')
    model.add_argument("--sigma", help='kernel bandwidth: a number, "median" or "<factor>*median" (default: the median heuristic; a multi-kernel learner: the unit of its dictionary)')
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
    out.add_argument("--output", help="output directory (default runs/<data>-<learner>); must be new or empty unless --overwrite")
    out.add_argument("--overwrite", action="store_true", help="replace the run already in --output (once this one has finished)")
    add_streaming_flags(parser)
    return parser


def parse_args(argv: list[str] | None = None, parser: Parser | None = None) -> TrainRequest:
    """The :class:`~pipelines.requests.TrainRequest` of ``argv`` (okl's arguments, and Beam's pipeline
    options in ``beam_args``); exit (status 2) on an argument that neither defines, or a flag
    refused. ``--help`` with ``--learner NAME`` ends with NAME's parameters."""
    parser = parser or build_parser()
    _describe_learner_in_help(parser, sys.argv[1:] if argv is None else list(argv))
    args, beam_argv = okl_and_beam_args(parser, argv)
    try:
        return TrainRequest.from_args(args, beam_argv)
    except UsageError as err:
        parser.error(str(err))


def _describe_learner_in_help(parser: Parser, argv: list[str]) -> None:
    """With ``--help`` and ``--learner NAME``: the help ends with ``okl learners NAME``'s text."""
    if not {"-h", "--help"} & set(argv):
        return
    names = [a.split("=", 1)[1] for a in argv if a.startswith("--learner=")]
    names += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--learner"]
    if names:
        if names[-1] not in okl_core.learner_names():
            parser.error(f"unknown learner {names[-1]!r}; choose from {', '.join(okl_core.learner_names())}")
        parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the parameter lines as written
        parser.epilog = learner_text(names[-1])


def _print_summary(result: TrainResult, job: TrainJob, launched_at: float) -> None:
    for key, label in (("model", "model"), ("metrics", "metrics"), ("plot", "online error"), ("dead_letter", "dead letters")):
        print(f"{label + ':':14s}{result.files[key]}")
    m = result.metrics
    if not m:
        return
    task = m["learner"]["task"]
    key = headline(task).summary_key
    line = f"{m['learner']['learner']}: {m['rows']['trained']} rows trained, {m['rows']['rejected']} rejected; online {key} {with_baseline(m['online']['merged'], key, task)}"
    if m.get("test"):
        line += f", test {key} {with_baseline(m['test'], key, task)}"
    print(line + "; " + wall_time_text(launched_at, m["timing"]["wall_seconds"], running_as_command()))
    print("from the data: " + derived_line(job.derived, job.source.n_rows))
    if m.get("diverged"):
        print(diverged_line(m["diverged"]))
    else:
        warning = baseline_warning(m)
        if warning:
            print(warning)


def baseline_warning(metrics: dict) -> str | None:
    """The one warning line of a model no better than its constant baseline, or that answers
    one class for every row (``metrics.json``'s online and test summaries); None otherwise.

    The test set judges the model when there is one (it is the model's own result); the
    online metrics otherwise.
    """
    task = metrics["learner"]["task"]
    split, summary = ("test", metrics["test"]) if metrics.get("test") else ("online", metrics["online"]["merged"])
    if not summary.get("n") or "beats_baseline" not in summary:  # no rows, or an old metrics.json
        return None
    problems = []
    if not summary["beats_baseline"]:
        key = headline(task).summary_key
        problems.append(f"the model is {NOT_BETTER.format(baseline_name(task))} ({split} {key} {summary[key]:.5g}, "
                        f"{baseline_name(task)} {summary['baseline'][key]:.5g})")
    if summary.get("one_class"):
        index = next(i for i, c in enumerate(summary["predicted_counts"]) if c)
        label = ("-1", "+1")[index] if task == "binary" else f"class {index}"
        problems.append(f"it predicts {label} for every {split} row")
    if not problems:
        return None
    return "WARNING: " + "; ".join(problems) + ": try scaled features (okl prepare --feature_scaling standard), another bandwidth (--sigma 0.5*median), or okl sweep to choose its parameters"


def diverged_line(diverged: dict) -> str:
    """The summary line of a diverged run (``metrics.json``'s ``diverged``)."""
    first = diverged["merged"]
    where = ("the merge" if first["batch"] is None
             else f"shard {first['shard']} round {first['round']} batch {first['batch']} (row {first['row']})")
    shards = ", ".join(f"shard {d['shard']} from round {d['round']} batch {d['batch']}" for d in diverged["per_shard"])
    what = ("the online loss exploded, over 1000 times the targets' scale" if first.get("reason") == "exploded"
            else "NaN or inf in the online scores, model or errors")
    use = "the model cannot be used for predictions" if first.get("non_finite_arrays") else "its predictions are meaningless"
    return f"DIVERGED from {where}: {what}" + (f" ({shards})" if shards else "") + f"; {use}, try a smaller step size or scaled targets"


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
    parser = build_parser()
    request = parse_args(argv, parser)
    try:
        job = resolve_job(request)
    except UsageError as err:
        parser.error(str(err))
    if request.streaming is not None:
        try:
            return run_streaming(job)
        except BaseException as err:
            job.abandon()  # a launch refused (or failed) after resolve_job made --output leaves no folder behind
            if isinstance(err, UsageError):
                parser.error(str(err))
            raise
    try:
        pipeline = make_pipeline(pipeline_options(list(request.beam_args)))
        if workers_are_local(pipeline.options):  # the first use's compiling, said here, not in silence in each worker
            compile_learner(job.learner, "train")
        with live_progress("train", job.source.n_rows, pipeline.options) as progress:
            job.progress_dir = progress.directory
            build_graph(pipeline, job, launched_at)
            pipeline_result = run_pipeline(pipeline)
        job.publish()
    except BaseException:
        job.abandon()  # pipelines.cli.main prints what the user can fix (a UsageError, a learner over its cap) in one line
        raise
    result = TrainResult(pipeline_result, job.output, job.files, read_metrics(job), counters(pipeline_result))
    _print_summary(result, job, launched_at)
    return result


if __name__ == "__main__":
    main(run, "train")
