"""Reproduce the papers' reference numbers (spec/*.md) with the learners okl has.

Example::

    python -m pipelines.reproduce                      # every setting that can run here
    python -m pipelines.reproduce --only fogd-a9a,mfogd-mnist --runs 5
    python -m pipelines.reproduce --list               # the settings table

The command line of :mod:`okl_experiments.reproduction` (the settings table, tuning, how
a setting runs): every setting whose learner exists and whose data files are under
``--data-root`` (default ``../shared/data``, or ``$OKL_SHARED_DATA``) runs on a
LocalCluster (or ``--scheduler``); the table prints ours next to the paper's number.
"""

from __future__ import annotations

import argparse
import os
import sys

from okl_experiments.reproduction import DEFAULT_DATA_ROOT, Outcome, reproduce, settings_lines, table, write_outcomes
from okl_experiments.runs import dask_client

__all__ = ["build_parser", "run"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipelines.reproduce", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", default=os.environ.get("OKL_SHARED_DATA", DEFAULT_DATA_ROOT),
                   help="directory holding a9a/ and mnist/ (default ../shared/data or $OKL_SHARED_DATA)")
    p.add_argument("--only", help="comma-separated setting keys or learner names (default: all)")
    p.add_argument("--runs", type=int, help="permutations per setting (default: each setting's own)")
    p.add_argument("--list", action="store_true", help="print the settings table and exit")
    p.add_argument("--no-tune", action="store_true", help="skip tuning grids: use each setting's recorded choice")
    p.add_argument("--scheduler", help="scheduler address, or 'serial' (default: a new LocalCluster)")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    p.add_argument("--out", help="directory for reproduce.md, reproduce.json and each setting's sweep tables")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def run(argv: list[str] | None = None) -> list[Outcome]:
    """Run the reproductions and print the table."""
    args = build_parser().parse_args(argv)
    if args.list:
        print("\n".join(settings_lines()))
        return []
    if args.runs is not None and args.runs < 1:
        raise SystemExit("pipelines.reproduce: error: --runs must be >= 1")
    keys = [k.strip() for k in args.only.split(",")] if args.only else None
    try:
        with dask_client(args.scheduler, args.workers) as client:
            outcomes = reproduce(keys, args.data_root, client, args.runs, args.out, None if args.quiet else sys.stderr,
                                 use_tuned=args.no_tune)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"pipelines.reproduce: error: {err}") from None
    print(table(outcomes))
    if args.out:
        print(f"\nwritten: {', '.join(write_outcomes(args.out, outcomes))}")
    return outcomes


if __name__ == "__main__":
    run()
