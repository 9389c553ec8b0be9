"""Hyperparameter sweeps of okl learners on dask.distributed (DESIGN.md, "Dask").

Example::

    python -m pipelines.sweep --input data/a9a --learner fogd \\
        --grid sigma=2,4,8 eta=0.002,0.02 n_components=400 --repeats 5 --num_workers 2

The command line of :mod:`okl_experiments.sweep` (what a sweep runs, the results table,
``--resume``, the best configuration): it parses the flags, runs the sweep on the client
of ``--scheduler`` (unset: a new ``LocalCluster`` of ``--num_workers`` single-threaded
processes; ``serial``: this process, without Dask), prints the Markdown table and says
where the files went. A sweep in which no point succeeds exits with status 1; a grid the
learner cannot take (a parameter it does not have, another task than the data's, ``--reseed``
without a ``seed``) is refused before any point runs. Flags: :mod:`pipelines.cli`.

Output
------
``--output`` must be a new or empty directory, unless ``--resume`` continues the sweep in
it (its files are updated in place after every point, so an interrupted sweep keeps what
it finished) or ``--overwrite`` replaces it: the new sweep is then built in a hidden
staging folder and published whole with one rename (:class:`okl_core.publish.StagedDirectory`),
so the old sweep's files stay until the new one is complete and none of them outlives it.
A folder that is not a sweep's output is never replaced.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from pipelines.cli import Parser, check_output_dir, compile_learner, deprecate, main, make_output_dir, output_error, prog

from okl_core.derived import make_learner
from okl_core.registry import learner_class, learner_names
from okl_experiments.data import okl_sources
from okl_experiments.grid import SearchSpace
from okl_experiments.params import DEFAULT_BATCH_ROWS
from okl_experiments.runs import dask_client
from okl_core.publish import StagedDirectory, remove_made_dirs
from okl_experiments.sweep import (BEST_FILE, MARKDOWN_FILE, RESULTS_FILE, SweepResult, SweepSettings, check_settings,
                                   baseline_flag, make_points, markdown_table, ranked, read_results, sweep)
from pipelines.requests import SweepRequest

__all__ = ["build_parser", "run"]


def build_parser() -> Parser:
    """The command line of ``sweep`` (:mod:`pipelines.cli`'s conventions)."""
    p = Parser(prog=prog("sweep"), description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", required=True, help="okl data set (directory with dataset.json, Parquet file or glob)")
    p.add_argument("--learner", required=True, help=f"learner name ({', '.join(learner_names())})")
    p.add_argument("--grid", nargs="+", default=[], metavar="NAME=VALUES",
                   help="parameters: name=v1,v2 (list), name=lo:hi (log-uniform), name=lo..hi (uniform); "
                        'values may be derived from the data: "median", "0.5*median", "n", "1/n"')
    p.add_argument("--grid_file", help="JSON (or YAML, with PyYAML) mapping of parameter -> values")
    p.add_argument("--samples", type=int, help="random search: draw this many points from the space")
    p.add_argument("--search_seed", type=int, default=0, help="seed of the random search (default 0)")
    p.add_argument("--repeats", type=int, default=1, help="runs per point, each on its own permutation (default 1)")
    p.add_argument("--shuffle_seed", type=int, default=0, help="run r uses permutation (shuffle_seed, r) (default 0)")
    p.add_argument("--order", choices=["shuffled", "file"], default="shuffled", help="permute rows per run, or keep the stored order")
    p.add_argument("--reseed", action="store_true", help="run r uses model seed = seed + r (new features per run)")
    p.add_argument("--test", help="held-out okl data set: adds test_* metrics (reported; ranked by only with --rank_by test_...)")
    p.add_argument("--rank_by", metavar="METRIC",
                   help="ranking metric, lower is better: online_mistake_rate|online_mse|online_mae|test_mistake_rate|test_mse|test_mae "
                        "(default: online_mistake_rate, or online_mse for regression; never the test set unless given)")
    p.add_argument("--batch_rows", type=int, default=DEFAULT_BATCH_ROWS,
                   help=f"rows per learner update call (default {DEFAULT_BATCH_ROWS}, rounded up to a multiple of a mini-batch learner's batch_size)")
    p.add_argument("--curve_points", type=int, default=64, help="online curve checkpoints per run: this many log-spaced plus as many evenly spaced (default 64)")
    p.add_argument("--scheduler", help="scheduler address, or 'serial' (default: a new LocalCluster)")
    p.add_argument("--num_workers", type=int, default=2, help="LocalCluster worker processes, 1 thread each (default 2)")
    p.add_argument("--dashboard", action="store_true", help="serve the LocalCluster's dashboard on :8787 (needs bokeh)")
    p.add_argument("--output", default="sweep", help="output directory: results.parquet, results.md, best.json (default ./sweep)")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in OUTPUT: run only the points not yet finished there (same settings; "
                        "the space may gain points, never lose them)")
    p.add_argument("--overwrite", action="store_true", help="replace the sweep in OUTPUT (published whole when done)")
    deprecate(p, "--out", "--output")
    deprecate(p, "--workers", "--num_workers")
    deprecate(p, "--metric", "--rank_by")
    return p


def run(argv: list[str] | None = None) -> SweepResult:
    """Parse flags, run the sweep, print the table and where the files went."""
    args = build_parser().parse_args(argv)
    try:
        return _run(SweepRequest.from_args(args))
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"{prog('sweep')}: error: {err}") from None


def _compile(learner: str, points) -> None:
    """Compile the folds the points' learners run, here (:func:`pipelines.cli.compile_learner`); a
    point whose learner cannot be built or run is left to the sweep, which records its error."""
    for point in points:
        try:
            compile_learner(make_learner(learner, **point.params), "sweep")
        except Exception:  # noqa: BLE001  (the point's own run reports it)
            continue


def _run(request: SweepRequest) -> SweepResult:
    learner_class(request.learner)  # unknown names fail before any work
    space = SearchSpace.from_tokens(list(request.grid))
    if request.grid_file:
        space = SearchSpace.from_file(request.grid_file).merged(space)
    check_output_dir(request.output)
    train, test = okl_sources(request.input, request.test)
    points = make_points(request.learner, space, train, request.samples, request.search_seed)
    settings = SweepSettings(learner=request.learner, train=train, test=test, repeats=request.repeats, shuffle_seed=request.run_shuffle_seed,
                             reseed=request.reseed, batch_rows=request.batch_rows, curve_points=request.curve_points)
    check_settings(settings, request.rank_by)
    staged, made = _output(request.output, request.resume, request.overwrite)
    print(f"sweep: {request.learner} on {request.input} ({train.n_rows} rows), {len(points)} points x {request.repeats} runs", file=sys.stderr)
    if request.local:  # workers on this machine: they find the folds compiled
        _compile(request.learner, points)
    try:
        with dask_client(request.scheduler, request.num_workers, request.dashboard) as client:
            result = sweep(settings, points, out_dir=staged.tmp if staged else request.output, rank_by=request.rank_by,
                           resume=request.resume, client=client, space=space.describe(), swept=space.swept, progress=sys.stderr)
    except BaseException:
        if staged:
            staged.abort()  # the old sweep stays as it was
        remove_made_dirs(made)  # a new output that got nothing (the scheduler could not be reached) is not left behind
        raise
    if staged:
        result = _published(staged, result, request.output)
    _print_result(result, request.resume)
    if not any(row["status"] == "ok" for row in result.rows):
        raise SystemExit(f"{prog('sweep')}: error: no point succeeded (first error: {_first_error(result.rows)}); no best config written")
    return result


def _print_result(result: SweepResult, resumed: bool) -> None:
    """The Markdown table, the runs and data loads, the best point and where the files went."""
    print(markdown_table(result.rows, result.rank_by, result.swept))
    workers = {r["worker"] for r in result.task_results}
    loads = sum(r["loaded"] for r in result.task_results)
    print(f"\n{len(result.task_results)} runs on {len(workers)} worker(s); data sets loaded {loads} time(s)")
    if resumed:
        print(f"{result.ran} points run, {result.skipped} skipped (already in {result.results_path})")
    print(f"\nresults: {result.results_path}")
    if result.best is not None:
        print(f"best by {result.rank_by}: {json.dumps(result.best['params'], sort_keys=True)} -> {result.best_path}")
        top = ranked(result.rows, result.rank_by)[0]
        flag = baseline_flag(top, result.rank_by)
        if flag:  # even the best point learned nothing a user could rely on
            print(f"WARNING: the best point ({top['point']}) is flagged: {flag} (see the baseline column)")


_SWEEP_FILES = {RESULTS_FILE, MARKDOWN_FILE, BEST_FILE}


def _output(output: str, resume: bool, overwrite: bool) -> tuple[StagedDirectory | None, list[str]]:
    """Check ``--output`` before any run: ``(staging folder, folders made)``.

    The staging folder of an ``--overwrite`` (None: the sweep writes in place), and the
    folders made for an output written in place (removed again, while empty, when the sweep
    fails before writing anything: :func:`okl_core.publish.remove_made_dirs`).

    Raises
    ------
    ValueError
        One line naming the flag: a used output without ``--resume`` or ``--overwrite``, a
        ``--resume`` into a folder holding no sweep, an ``--overwrite`` of a folder that is
        not a sweep's output, or an output that cannot be written.
    """
    held = sorted(os.listdir(output)) if os.path.isdir(output) else []
    if held and not (resume or overwrite):
        raise ValueError(f"--output {output} already holds files ({', '.join(held[:3])}{', ...' if len(held) > 3 else ''}); "
                         "pass --resume to continue the sweep there, or --overwrite to replace it")
    if held and resume and RESULTS_FILE not in held:
        raise ValueError(f"--resume: --output {output} holds no {RESULTS_FILE}: it is not a sweep's output")
    if held and overwrite:
        try:
            return StagedDirectory(output, replace=True, may_replace=_not_a_sweep), []
        except OSError as err:
            raise output_error(err, output) from None
    return None, make_output_dir(output)


def _not_a_sweep(path: str) -> str | None:
    """Why ``path`` must not be replaced by a sweep (None: it is a sweep's output)."""
    others = sorted(set(os.listdir(path)) - _SWEEP_FILES)
    if others:
        return f"it holds files a sweep does not write ({', '.join(others[:3])})"
    try:
        read_results(os.path.join(path, RESULTS_FILE))
    except (ValueError, FileNotFoundError) as err:
        return f"it is not a sweep's output ({err})"
    return None


def _published(staged: StagedDirectory, result: SweepResult, output: str) -> SweepResult:
    """Publish the staged sweep under ``output``; ``result`` with the published paths."""
    try:
        staged.commit()
    except OSError as err:
        raise output_error(err, output) from None
    def moved(path: str | None) -> str | None:
        return os.path.join(output, os.path.basename(path)) if path else None

    return dataclasses.replace(result, results_path=moved(result.results_path), best_path=moved(result.best_path))


def _first_error(rows: list[dict]) -> str:
    return next((row["error"] for row in sorted(rows, key=lambda r: r["point"]) if row.get("error")), "none recorded")


if __name__ == "__main__":
    main(run, "sweep")
