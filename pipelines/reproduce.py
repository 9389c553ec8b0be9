"""Reproduce the papers' reference numbers (listed in docs/reproducing.md) with the learners okl has.

Example::

    python -m pipelines.reproduce                      # every setting that can run here
    python -m pipelines.reproduce --only fogd-a9a,mfogd-mnist --runs 5
    python -m pipelines.reproduce --list               # the settings table
    python -m pipelines.reproduce --only dsg-mnist8m-8v6 --slice --work /tmp/okl-scale   # a slice through Beam
    python -m pipelines.reproduce --only fogd-ijcnn1 --data ijcnn1=~/data/ijcnn1/   # your copy of a data set

The command line of :mod:`okl_experiments.reproduction` (the settings table, tuning, how
a setting runs): every setting whose learner exists and whose data files are under
``--data_root`` (default ``../shared/data``, or ``$OKL_SHARED_DATA``) or given with
``--data NAME=PATH`` (a prepared okl data set, or the raw file(s) read with the conversion
the spec names) runs on a LocalCluster (or ``--scheduler``); the table prints ours next to
the paper's number, and each setting whose data is missing as skipped with where to get it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from okl_experiments.at_scale import SCALE_SETTINGS, ScaleOutcome, run_scale_setting, scale_lines, scale_table
from okl_experiments.reproduction import (DEFAULT_DATA_ROOT, Outcome, RunProtocol, parse_data_paths, reproduce, settings_lines,
                                         table, write_outcomes)
from okl_experiments.runs import dask_client
from pipelines.cli import Parser, UsageError, deprecate, main, output_dir, prog
from pipelines.requests import ReproduceRequest

__all__ = ["build_parser", "run"]


def build_parser() -> Parser:
    """The command line of ``reproduce`` (:mod:`pipelines.cli`'s conventions)."""
    p = Parser(prog=prog("reproduce"), description=__doc__.split("\n\n")[0])
    p.add_argument("--data_root", default=os.environ.get("OKL_SHARED_DATA", DEFAULT_DATA_ROOT),
                   help="directory holding a9a/ and mnist/ (default ../shared/data or $OKL_SHARED_DATA)")
    p.add_argument("--data", action="append", metavar="NAME=PATH",
                   help="data set NAME (see --list) from PATH: a prepared okl data set, a raw file, comma-separated files "
                        "or a directory holding them (repeatable)")
    p.add_argument("--only", help="comma-separated setting keys or learner names (default: all)")
    p.add_argument("--runs", type=int, help="runs per setting (default: each setting's own, the paper's count)")
    p.add_argument("--same_features", action="store_true",
                   help="every run of a setting with the same learner seed (okl <= 0.1); default: seed + run, new random "
                        "features per permutation, as the papers ran")
    p.add_argument("--shuffle_all", action="store_true",
                   help="shuffle the rows of file-order settings too (time series, papers that permute nothing)")
    p.add_argument("--list", action="store_true", help="print the settings table and each data set's recipe, and exit")
    p.add_argument("--no_tune", action="store_true", help="skip tuning grids: use each setting's recorded choice")
    p.add_argument("--scheduler", help="scheduler address, or 'serial' (default: a new LocalCluster)")
    p.add_argument("--num_workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    p.add_argument("--output", help="directory for reproduce.md, reproduce.json and each setting's sweep tables")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--slice", action="store_true", help="at-scale settings (dsg-mnist8m-*, dsg-molecular): each one's slice, not the full rows")
    p.add_argument("--scale_rows", type=int, help="at-scale settings: this many training rows")
    p.add_argument("--work", help="at-scale settings: folder for their data sets and runs (default: a new temporary folder)")
    deprecate(p, "--out", "--output")
    deprecate(p, "--workers", "--num_workers")
    return p


def run(argv: list[str] | None = None) -> list[Outcome]:
    """Run the reproductions and print the table."""
    args = build_parser().parse_args(argv)
    if args.list:
        print("\n".join(settings_lines() + scale_lines()))
        return []
    try:
        return _run(ReproduceRequest.from_args(args))
    except UsageError:
        raise
    except (ValueError, FileNotFoundError) as err:  # bad flags or files: one line, exit status 2 (pipelines.cli.main)
        raise UsageError(str(err)) from None


def _run(request: ReproduceRequest) -> list[Outcome]:
    """:func:`run` of the request; bad input raises ValueError / FileNotFoundError (one line)."""
    if request.output is None:
        return _reproduce(request)
    with output_dir(request.output):  # before the runs: a long run never ends in a traceback over where it goes; removed if refused
        return _reproduce(request)


def _reproduce(request: ReproduceRequest) -> list[Outcome]:
    keys = request.keys
    at_scale = [s for s in SCALE_SETTINGS if keys is not None and s.key in keys]
    if at_scale and keys is not None:
        _run_at_scale(at_scale, request)
        keys = [k for k in keys if k not in {s.key for s in at_scale}]
        if not keys:
            return []
    data_paths = {name: os.path.expanduser(path) for name, path in parse_data_paths(list(request.data)).items()}
    with dask_client(request.scheduler, request.num_workers) as client:
        outcomes = reproduce(keys, request.data_root, client, request.runs, request.output, None if request.quiet else sys.stderr,
                             use_tuned=request.no_tune, data_paths=data_paths, data_root_given=request.data_root != DEFAULT_DATA_ROOT,
                             protocol=RunProtocol(same_features=request.same_features, shuffle_all=request.shuffle_all))
    print(table(outcomes))
    if request.output:
        print(f"\nwritten: {', '.join(write_outcomes(request.output, outcomes))}")
    return outcomes


def _run_cli(cli: str, argv: list[str]) -> None:
    """One step of an at-scale setting: ``python -m pipelines.<cli> ARGV`` in a new process."""
    print(f"$ python -m pipelines.{cli} {' '.join(argv)}", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", f"pipelines.{cli}", *argv])
    if done.returncode:
        raise SystemExit(f"{prog('reproduce')}: error: step failed (exit {done.returncode}): pipelines.{cli} {' '.join(argv)}")


def _run_at_scale(settings: list, request: ReproduceRequest) -> list[ScaleOutcome]:
    """Run the at-scale settings through the Beam pipeline (subprocesses) and print their table."""
    work = request.work or tempfile.mkdtemp(prefix="okl-scale-")
    outcomes = []
    for setting in settings:
        rows = request.scale_rows if request.scale_rows is not None else (setting.slice_rows if request.slice else None)
        test_rows = setting.slice_test_rows if rows is not None else None
        outcomes.append(run_scale_setting(setting, request.data_root, os.path.join(work, setting.key), _run_cli, rows, test_rows))
    print(scale_table(outcomes))
    if request.output:
        from okl_experiments.text import write_json

        os.makedirs(request.output, exist_ok=True)
        write_json(os.path.join(request.output, "reproduce-at-scale.json"), [o.to_dict() for o in outcomes])
    return outcomes


if __name__ == "__main__":
    main(run, "reproduce")
