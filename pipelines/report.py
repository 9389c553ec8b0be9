"""Figures of online learning runs and sweeps, saved as PNG (matplotlib, Agg backend).

Five commands::

    # online error vs examples seen, one curve per run (the papers' figure style)
    python -m pipelines.report curves sweep/results.parquet reproduce/reproduce.json run.json --output figures

    # reproduce outputs: one figure per paper table and data set (each learner's online curve,
    # the paper's number marked), and test error against rows trained per at-scale setting
    python -m pipelines.report reproduce reproduce/reproduce.json reproduce-*/reproduce-at-scale.json --output figures

    # a sweep: the metric against each swept parameter, and a heatmap for two of them
    python -m pipelines.report sweep sweep/results.parquet --output figures

    # run learners directly from a small JSON spec, then plot their online curves
    python -m pipelines.report run docs/specs/online_error.json --data_root data --output figures/a9a

    # every learner with its default parameters against the majority class / mean
    python -m pipelines.report defaults --output defaults

``--output`` is a directory (``curves`` and ``run`` write ``online_error.png`` into it); the
old ``-o``/``--out FILE.png`` of ``curves`` and ``run`` still writes that file, with a warning.

The command line of :mod:`okl_experiments.figures`, which describes the curve inputs
(sweep results, ``reproduce.json``, curve JSON, a training run's ``metrics.json``) and
the run spec.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import cast

from okl_core.registry import learner_names
from okl_experiments.defaults import QUICK_ROWS, defaults_table, result_line, write_table
from okl_experiments.reproduction import DEFAULT_DATA_ROOT
from okl_experiments.figures import plot_curves, plot_sweep, read_curves, reproduce_figures, run_spec, write_curves
from okl_experiments.progress import progress_wanted
from pipelines.cli import Parser, deprecate, main, output_dir, prog, warn
from pipelines.requests import (CurvesRequest, DefaultsRequest, ReportRequest, ReproduceFiguresRequest, RunSpecRequest, SweepFiguresRequest,
                                report_request)

__all__ = ["build_parser", "run", "CURVES_FILE"]

CURVES_FILE = "online_error.png"
"""The figure ``curves`` and ``run`` write into ``--output``."""


def _png_output(parser: Parser) -> None:
    parser.add_argument("--output", default=".", help=f"output directory: {CURVES_FILE} (default: the current directory)")
    parser.add_argument("-o", "--out", dest="png", help=argparse.SUPPRESS)  # deprecated: the PNG file itself


def build_parser() -> Parser:
    """The command line of ``report`` (:mod:`pipelines.cli`'s conventions)."""
    p = Parser(prog=prog("report"), description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("curves", help="online metric vs examples seen, from results / curve files")
    c.add_argument("inputs", nargs="+", help="sweep results.parquet, reproduce.json or curve JSON files")
    _png_output(c)
    c.add_argument("--top", type=int, default=5, help="best points per sweep results file (default 5)")
    c.add_argument("--metric", help="ranking metric for sweep results (default: the one the sweep ranked by)")
    c.add_argument("--title", default="")
    c.add_argument("--log_x", action="store_true", help="logarithmic examples axis")
    s = sub.add_parser("sweep", help="metric against each swept parameter, heatmap for two")
    s.add_argument("results", help="a sweep's results.parquet")
    s.add_argument("--output", default="figures", help="directory for the PNGs (default figures/)")
    deprecate(s, "--out", "--output")
    s.add_argument("-o", dest="output", help=argparse.SUPPRESS)
    s.add_argument("--metric", help="metric to plot (default: the one the sweep ranked by)")
    s.add_argument("--heatmap", help="two parameters A,B for the heatmap (default: the two swept, if two)")
    d = sub.add_parser("reproduce", help="per paper table and data set: online curves with the paper's numbers; at-scale test error vs rows")
    d.add_argument("inputs", nargs="+", help="reproduce.json and reproduce-at-scale.json files (pipelines.reproduce --output)")
    d.add_argument("--output", default="figures", help="directory for the PNGs (default figures/)")
    r = sub.add_parser("run", help="run learners from a JSON spec and plot their online curves")
    r.add_argument("spec", help="run spec JSON (see okl_experiments.figures)")
    _png_output(r)
    r.add_argument("--data_root", help="directory of the real data sets (default ../shared/data)")
    r.add_argument("--log_x", action="store_true", help="logarithmic examples axis")
    r.add_argument("--curves_out", help="also write the curves as JSON (a 'curves' input)")
    f = sub.add_parser("defaults", help="every learner with its defaults against the majority class / mean (defaults.md, defaults.json)")
    f.add_argument("--output", default="defaults", help="directory for defaults.md and defaults.json (default defaults/)")
    f.add_argument("--data_root", help="directory of a9a/ and mnist/ (default ../shared/data, or $OKL_SHARED_DATA); "
                                       "left out, with the reason, when missing")
    f.add_argument("--learner", action="append", choices=learner_names(), metavar="NAME", help="only this learner (repeatable)")
    f.add_argument("--quick", action="store_true", help="the first few thousand rows of each data set (the test suite's table)")
    return p


def _png_path(request: CurvesRequest | RunSpecRequest) -> str:
    if request.png:
        warn(prog("report"), f"-o/--out FILE is deprecated; use --output DIR (writes DIR/{CURVES_FILE})")
        return request.png
    return os.path.join(request.output, CURVES_FILE)


def _make(request: ReportRequest) -> list[str]:
    if getattr(request, "png", None):
        return _figures(request)
    with output_dir(request.output):  # a file, "", or under a file: one line before any work; made anew, removed if refused
        return _figures(request)


def _figures(request: ReportRequest) -> list[str]:
    if isinstance(request, CurvesRequest):
        return [plot_curves(read_curves(list(request.inputs), request.top, request.rank_by), _png_path(request), request.title, request.log_x)]
    if isinstance(request, ReproduceFiguresRequest):
        return reproduce_figures(list(request.inputs), request.output)
    if isinstance(request, DefaultsRequest):
        learners = None if request.learner is None else list(request.learner)
        results, skipped = defaults_table(learners, data_root=request.data_root or os.environ.get("OKL_SHARED_DATA", DEFAULT_DATA_ROOT),
                                          rows=QUICK_ROWS if request.quick else None,
                                          on_result=(lambda r: print(result_line(r), file=sys.stderr, flush=True)) if progress_wanted() else None)
        return write_table(results, skipped, request.output)
    if isinstance(request, SweepFiguresRequest):
        # any number of names: plot_sweep refuses other than two in one line, before any figure
        pair = cast("tuple[str, str]", tuple(x.strip() for x in request.heatmap.split(","))) if request.heatmap else None
        return plot_sweep(request.results, request.output, request.metric, pair)
    curves, title = run_spec(request.spec, request.data_root, progress=sys.stderr if progress_wanted() else None)
    written = [plot_curves(curves, _png_path(request), title, request.log_x)]
    return written + ([write_curves(request.curves_out, curves)] if request.curves_out else [])


def run(argv: list[str] | None = None) -> list[str]:
    """Make the figures; returns the paths written."""
    args = build_parser().parse_args(argv)
    try:
        written = _make(report_request(args))
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"{prog('report')}: error: {err}") from None
    for path in written:
        print(path)
    return written


if __name__ == "__main__":
    main(run, "report")
