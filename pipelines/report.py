"""Figures of online learning runs and sweeps, saved as PNG (matplotlib, Agg backend).

Three commands::

    # online error vs examples seen, one curve per run (the papers' figure style)
    python -m pipelines.report curves sweep/results.parquet reproduce/reproduce.json run.json -o online_error.png

    # a sweep: the metric against each swept parameter, and a heatmap for two of them
    python -m pipelines.report sweep sweep/results.parquet -o figures/

    # run learners directly from a small JSON spec, then plot their online curves
    python -m pipelines.report run docs/online_error_spec.json -o docs/online_error.png

The command line of :mod:`okl_experiments.figures`, which describes the curve inputs
(sweep results, ``reproduce.json``, curve JSON, a training run's ``metrics.json``) and
the run spec.
"""

from __future__ import annotations

import argparse
import sys

from okl_experiments.figures import plot_curves, plot_sweep, read_curves, run_spec, write_curves
from okl_experiments.progress import progress_wanted

__all__ = ["build_parser", "run"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipelines.report", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("curves", help="online metric vs examples seen, from results / curve files")
    c.add_argument("inputs", nargs="+", help="sweep results.parquet, reproduce.json or curve JSON files")
    c.add_argument("-o", "--out", default="online_error.png", help="PNG to write (default online_error.png)")
    c.add_argument("--top", type=int, default=5, help="best points per sweep results file (default 5)")
    c.add_argument("--metric", help="ranking metric for sweep results (default: the sweep's first)")
    c.add_argument("--title", default="")
    c.add_argument("--log-x", action="store_true", help="logarithmic examples axis")
    s = sub.add_parser("sweep", help="metric against each swept parameter, heatmap for two")
    s.add_argument("results", help="a sweep's results.parquet")
    s.add_argument("-o", "--out", default="figures", help="directory for the PNGs (default figures/)")
    s.add_argument("--metric", help="metric to plot (default: the sweep's first)")
    s.add_argument("--heatmap", help="two parameters A,B for the heatmap (default: the two swept, if two)")
    r = sub.add_parser("run", help="run learners from a JSON spec and plot their online curves")
    r.add_argument("spec", help="run spec JSON (see okl_experiments.figures)")
    r.add_argument("-o", "--out", default="online_error.png", help="PNG to write")
    r.add_argument("--data-root", help="directory of the real data sets (default ../shared/data)")
    r.add_argument("--log-x", action="store_true", help="logarithmic examples axis")
    r.add_argument("--curves-out", help="also write the curves as JSON (a 'curves' input)")
    return p


def _make(args) -> list[str]:
    if args.command == "curves":
        return [plot_curves(read_curves(args.inputs, args.top, args.metric), args.out, args.title, args.log_x)]
    if args.command == "sweep":
        pair = tuple(x.strip() for x in args.heatmap.split(",")) if args.heatmap else None
        if pair is not None and len(pair) != 2:
            raise ValueError(f"--heatmap needs two parameters A,B, got {args.heatmap!r}")
        return plot_sweep(args.results, args.out, args.metric, pair)
    curves, title = run_spec(args.spec, args.data_root, progress=sys.stderr if progress_wanted() else None)
    written = [plot_curves(curves, args.out, title, args.log_x)]
    return written + ([write_curves(args.curves_out, curves)] if args.curves_out else [])


def run(argv: list[str] | None = None) -> list[str]:
    """Make the figures; returns the paths written."""
    args = build_parser().parse_args(argv)
    try:
        written = _make(args)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"pipelines.report: error: {err}") from None
    for path in written:
        print(path)
    return written


if __name__ == "__main__":
    run()
