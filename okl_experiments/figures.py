"""Figures of online learning runs and sweeps, saved as PNG (matplotlib, Agg backend).

``python -m pipelines.report`` is the command line. Four figures:

* :func:`plot_curves`: online metric vs examples seen, one curve per run (the papers'
  figure style), from :func:`read_curves` or :func:`run_spec`;
* :func:`plot_sweep`: a sweep's metric against each swept parameter, and a heatmap for two;
* :func:`reproduce_figures`: from ``pipelines.reproduce`` outputs, the papers' figures: each
  learner's online curve per paper table and data set with the paper's number marked
  (:func:`plot_reproduce`), and test error against rows trained per at-scale setting (:func:`plot_scale`);
* :func:`run_spec`: run learners directly from a small JSON spec, for their curves.

Curve inputs (:func:`read_curves`):

* a sweep's ``results.parquet``: the mean curve of its ``--top`` best points;
* ``reproduce.json`` (``pipelines.reproduce --output``): each setting that ran;
* a curve JSON: ``{"label": str, "metric": str, "curve": {"n": [...], "value": [...]}}``
  or a list of them (:func:`curve_record` writes one from an
  :class:`okl_core.evaluation.OnlineRun`);
* a ``pipelines.train`` ``metrics.json`` (its per-batch records): the merged online curve
  against rows learned by the whole job (:func:`okl_core.reporting.job_curves`).

Run spec (``run``)::

    {"title": "a9a", "data": {"real": "a9a+a9a.t"} | {"path": "okl data set"},
     "repeats": 1, "shuffle_seed": 0, "batch_rows": 4096,
     "runs": [{"label": "FOGD", "learner": "fogd", "params": {"sigma": 8.0, "eta": 0.002}}, ...]}

Parameters are completed and resolved on the data by
:func:`okl_experiments.params.learner_params` (``n_inputs``, ``"median"``, ``"c/n"`` ...).
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import math
import os

import numpy as np

from okl_core.evaluation import OnlineRun
from okl_core.reporting import baseline_name, headline, job_curves, metric_of
from okl_core.state import atomic_write_bytes
from okl_experiments.data import okl_source, real_source
from okl_experiments.grid import whole_as_int
from okl_experiments.metrics import experiment_metric, metric_label
from okl_experiments.params import batch_rows_for, build_learner
from okl_experiments.progress import RunProgress
from okl_experiments.runs import RunTask, run_task
from okl_experiments.sweep import ranked, read_results
from okl_experiments.text import read_json, write_json

__all__ = ["Curve", "read_curves", "plot_curves", "plot_sweep", "run_spec", "curve_record", "write_curves",
           "reproduce_groups", "plot_reproduce", "scale_points", "plot_scale", "reproduce_figures"]

_STYLES = list(itertools.product(["-", "--", "-.", ":"], ["o", "s", "^", "D", "v", "x"]))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


class Curve:
    """One labelled curve: examples seen ``n`` against the metric ``value``; ``baseline``: the
    metric of the best constant answer over the same rows, when known (drawn as a line)."""

    def __init__(self, label: str, n, value, metric: str = "mistake_rate", baseline: float | None = None):
        self.label, self.metric = label, metric
        self.baseline = baseline if isinstance(baseline, (int, float)) and math.isfinite(baseline) else None
        self.n = np.asarray(n, dtype=np.float64)
        self.value = np.asarray(value, dtype=np.float64)
        if self.n.shape != self.value.shape or self.n.ndim != 1:
            raise ValueError(f"curve {label!r}: n and value must be 1-d of equal length")


def _record(label: str, metric: str, n: np.ndarray, value: np.ndarray) -> dict:
    return {"label": label, "metric": metric, "curve": {"n": n.tolist(), "value": value.tolist()}}


def curve_record(run: OnlineRun, label: str, metric: str = "mistake_rate") -> dict:
    """JSON-ready curve of an :class:`~okl_core.evaluation.OnlineRun` (a ``curves`` input)."""
    return _record(label, metric, run.curve_n, run.curve_value)


def write_curves(path: str, curves: list[Curve]) -> str:
    """Write ``curves`` as a curve JSON file (a ``curves`` input); returns ``path``."""
    return write_json(path, [_record(c.label, c.metric, c.n, c.value) for c in curves], indent=1)


def table_metric(path: str, meta: dict, metric: str | None) -> str:
    """The metric of a results table to rank or plot by: ``metric`` under today's name (the
    names ``sweep --rank_by`` takes), or the one the sweep ranked by.

    Raises
    ------
    ValueError
        ``metric`` is not recorded in the table (unknown, another task's, ``test_*`` without a test set).
    """
    metric = experiment_metric(metric) if metric else meta.get("rank_by", meta["metrics"][0])
    if metric not in meta["metrics"]:
        raise ValueError(f"--metric {metric!r} is not in {path} (it has {meta['metrics']})")
    return metric


def _curves_from_results(path: str, top: int, metric: str | None) -> list[Curve]:
    rows, meta = read_results(path)
    metric = table_metric(path, meta, metric)
    swept = [k[len("param_"):] for k in (rows[0] if rows else {}) if k.startswith("param_")]
    curves = []
    for row in ranked(rows, metric)[:top]:
        if row["status"] != "ok" or not row["curve_n"]:
            continue
        params = json.loads(row["params"])
        label = row["learner"] + (" " + ", ".join(f"{k}={params.get(k)}" for k in swept) if swept else "")
        curve_metric = meta["metrics"][0]  # the online headline: what the curve is of
        curves.append(Curve(label, row["curve_n"], row["curve_value"], metric_of(curve_metric), row.get(f"{curve_metric}_baseline")))
    return curves


def _curves_from_json(path: str) -> list[Curve]:
    raw = read_json(path, "curve JSON")
    if isinstance(raw, dict) and isinstance(raw.get("batches"), list) and isinstance(raw.get("learner"), dict):
        return [_curve_from_train_metrics(raw, path)]
    records = raw if isinstance(raw, list) else [raw]
    curves = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "curve" not in rec:
            raise ValueError(f"{path}: record {i} has no 'curve' {{'n': [...], 'value': [...]}}")
        if rec.get("status", "ok") != "ok" or not rec["curve"].get("n"):
            continue
        label = rec.get("label") or rec.get("key") or f"{os.path.basename(path)}[{i}]"
        metric = metric_of(rec.get("metric", "mistake_rate"))
        online = str(rec.get("metric", "online_")).startswith("online_")  # a test metric's baseline is of other rows than the curve's
        curves.append(Curve(label, rec["curve"]["n"], rec["curve"]["value"], metric, rec.get("baseline") if online else None))
    return curves


def _curve_from_train_metrics(report: dict, path: str) -> Curve:
    """The merged online curve of a ``pipelines.train`` ``metrics.json`` (per-batch records).

    Against rows learned by the whole job, as the training pipeline's own plot draws it
    (:func:`okl_core.reporting.job_curves`).
    """
    task = report["learner"].get("task") or "binary"
    try:
        curves = job_curves(report["batches"], task)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    if not curves.x:
        raise ValueError(f"{path}: no batch with rows")
    name = report["learner"].get("learner", "run")
    data = (report.get("data") or {}).get("train") or {}
    label = f"{name} on {data['name']}" if isinstance(data, dict) and data.get("name") else name
    key = headline(task).summary_key
    baseline = (((report.get("online") or {}).get("merged") or {}).get("baseline") or {}).get(key)
    return Curve(label, curves.x, curves.merged, headline(task).metric, baseline)


def read_curves(paths: list[str], top: int = 5, metric: str | None = None) -> list[Curve]:
    """Curves from sweep results (``.parquet``) and curve / reproduce JSON files."""
    curves = []
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        curves += _curves_from_results(path, top, metric) if path.endswith(".parquet") else _curves_from_json(path)
    if not curves:
        raise ValueError(f"no curves found in {paths}")
    return curves


def plot_curves(curves: list[Curve], out: str, title: str = "", log_x: bool = False) -> str:
    """Online metric against examples seen, one line per curve; returns ``out``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.2 + 0.22 * ((len(curves) + 1) // (2 if len(curves) > 3 else 1))), dpi=100, layout="constrained")
    metrics = {c.metric for c in curves}
    for curve, (line, marker) in zip(curves, itertools.cycle(_STYLES)):
        keep = curve.n >= (1 if log_x else max(1.0, curve.n[-1] / 50))  # skip the noisy first rows
        n, value = curve.n[keep], curve.value[keep]  # fractions, as every okl output states them
        every = max(1, len(n) // 8)
        ax.plot(n, value, linestyle=line, marker=marker, markevery=every, markersize=4, linewidth=1.4,
                label=f"{curve.label} ({value[-1]:.4g})")
    _baseline_lines(ax, curves)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel("number of examples seen")
    ylabel = metric_label(metrics.pop()) if len(metrics) == 1 else "online metric"
    ax.set_ylabel(ylabel)
    ax.set_title(title or "online performance (predict, then learn)")
    ax.grid(True, alpha=0.3)
    # Below the axes, never over a curve (the runs' final values are in the labels).
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2 if len(curves) > 3 else 1, frameon=False)
    _save(fig, out)
    plt.close(fig)
    return out


def _baseline_lines(ax, curves: list[Curve]) -> None:
    """A dashed horizontal line per distinct constant baseline of the curves (the rows' majority
    class or mean), labelled with the curves it belongs to when they differ."""
    baselines: dict[float, list[str]] = {}
    for curve in curves:
        if curve.baseline is not None:
            baselines.setdefault(curve.baseline, []).append(curve.label)
    for value, labels in baselines.items():
        whose = "" if len(baselines) == 1 else f" of {', '.join(labels)}"
        ax.axhline(value, color="0.35", lw=1.0, ls=(0, (4, 3)), label=f"{baseline_name(curves[0].metric)}{whose} ({value:.4g})")


def _save(fig, out: str) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})  # no version stamp: stable bytes
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    atomic_write_bytes(out, buffer.getvalue())


def _numeric(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None and math.isfinite(v) for v in values)


def _log_axis(values) -> bool:
    return _numeric(values) and min(values) > 0 and max(values) / min(values) >= 10


def plot_sweep(path: str, out_dir: str, metric: str | None = None, heatmap: tuple[str, str] | None = None) -> list[str]:
    """Figures of a sweep's results: metric vs each swept parameter; a heatmap for two.

    Each parameter figure has one line per combination of the other swept parameters when
    there are at most 6, else the best value over them. The heatmap (``heatmap`` or the two
    swept parameters when there are exactly two) shows the best mean per cell of a grid,
    or a scatter coloured by the metric for a random search.
    """
    rows, meta = read_results(path)
    metric = table_metric(path, meta, metric)
    ok = [r for r in rows if r["status"] == "ok" and r.get(f"{metric}_mean") is not None and not math.isnan(r[f"{metric}_mean"])]
    if not ok:
        raise ValueError(f"{path}: no successful point to plot")
    # 2 and 2.0 are one value (one tick, one cell), as they are one configuration
    params = [{k: whole_as_int(v) for k, v in json.loads(r["params"]).items()} for r in ok]
    # The sweep's own order of parameters (its param_ columns), then any other that varies.
    names = [k[len("param_"):] for k in rows[0] if k.startswith("param_")] + [k for p in params for k in p]
    swept = [k for k in dict.fromkeys(names) if len({json.dumps(p.get(k)) for p in params}) > 1]
    if not swept:
        raise ValueError(f"{path}: no parameter varies between the successful points")
    _check_heatmap(heatmap, params)  # before any figure is written
    scale = 1.0  # fractions, as every okl output states them
    ylabel = metric
    plt = _pyplot()
    written = []
    for name in swept:
        others = [o for o in swept if o != name]
        groups: dict[str, list] = {}
        for p, r in zip(params, ok):
            label = ", ".join(f"{o}={p.get(o)}" for o in others) if len(others) else ""
            groups.setdefault(label, []).append((p.get(name), r[f"{metric}_mean"], r.get(f"{metric}_std")))
        if len(groups) > 6:  # too many lines: keep the best over the other parameters
            best: dict = {}
            for items in groups.values():
                for x, m, s in items:
                    key = json.dumps(x)
                    if key not in best or m < best[key][1]:
                        best[key] = (x, m, s)
            groups = {f"best over {', '.join(others)}": list(best.values())}
        xs_all = [x for items in groups.values() for x, _, _ in items]
        numeric = _numeric(xs_all)
        categories = [] if numeric else sorted({json.dumps(x) for x in xs_all})  # the x positions of values that are not numbers
        fig, ax = plt.subplots(figsize=(7.6 if any(groups) else 6.4, 4.2), dpi=100, layout="constrained")
        for (label, items), (line, marker) in zip(sorted(groups.items()), itertools.cycle(_STYLES)):
            items = sorted(items, key=lambda t: (t[0] if numeric else categories.index(json.dumps(t[0]))))
            x = [t[0] if numeric else categories.index(json.dumps(t[0])) for t in items]
            y = [t[1] * scale for t in items]
            err = [0.0 if t[2] is None or math.isnan(t[2]) else t[2] * scale for t in items]
            ax.errorbar(x, y, yerr=err, linestyle=line, marker=marker, capsize=3, markersize=4, label=label or None)
        if numeric and _log_axis(xs_all):
            ax.set_xscale("log")
        if categories:
            ax.set_xticks(range(len(categories)), [json.loads(c) if isinstance(json.loads(c), str) else c for c in categories])
        ax.set_xlabel(name)
        ax.set_ylabel(ylabel + " (mean ± std)")
        ax.set_title(f"{ok[0]['learner']}: {metric} against {name}{_ranked_note(metric, meta)}")
        ax.grid(True, alpha=0.3)
        if any(groups):  # outside the axes, to the right: it hides no point
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        out = os.path.join(out_dir, f"sweep_{name}.png")
        _save(fig, out)
        plt.close(fig)
        written.append(out)
    pair = heatmap or (tuple(swept) if len(swept) == 2 else None)
    if pair:
        written.append(_heatmap(plt, params, ok, pair, metric, scale, ylabel, out_dir))
    return written


def _ranked_note(metric: str, meta: dict) -> str:
    """Title note: whether the plotted metric is the one the sweep ranked (and chose best.json) by."""
    rank_by = meta.get("rank_by")
    if rank_by is None:
        return ""
    return " (the ranking metric)" if metric == rank_by else f" (ranked by {rank_by})"


def _check_heatmap(pair: tuple[str, str] | None, params: list[dict]) -> None:
    """Refuse a heatmap pair that is not two different parameters of the sweep."""
    if pair is None:
        return
    if len(pair) != 2 or pair[0] == pair[1]:
        raise ValueError(f"--heatmap needs two different parameters A,B, got {','.join(pair)!r}")
    for name in pair:
        if not any(name in p for p in params):
            raise ValueError(f"--heatmap: {name!r} is not a parameter of this sweep")


def _heatmap(plt, params, rows, pair, metric, scale, ylabel, out_dir) -> str:
    a, b = pair
    xa = [p.get(a) for p in params]
    xb = [p.get(b) for p in params]
    values = [r[f"{metric}_mean"] * scale for r in rows]
    ua, ub = sorted(set(map(json.dumps, xa))), sorted(set(map(json.dumps, xb)))
    if _numeric(xa):
        ua = [json.dumps(v) for v in sorted(set(xa))]
    if _numeric(xb):
        ub = [json.dumps(v) for v in sorted(set(xb))]
    fig, ax = plt.subplots(figsize=(max(6.4, 1.3 * len(ua) + 3), max(4.8, 0.6 * len(ub) + 2.5)), dpi=100, layout="constrained")
    cmap = plt.get_cmap("viridis_r")
    if len(ua) * len(ub) <= 2 * len(rows):  # a grid: best mean per cell
        grid = np.full((len(ub), len(ua)), np.nan)
        for va, vb, v in zip(xa, xb, values):
            i, j = ub.index(json.dumps(vb)), ua.index(json.dumps(va))
            grid[i, j] = v if np.isnan(grid[i, j]) else min(grid[i, j], v)
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap=cmap)
        _annotate_cells(ax, grid, image, len(ua) * len(ub))
        ax.set_xticks(range(len(ua)), [_tick(v) for v in ua], fontsize=10)
        ax.set_yticks(range(len(ub)), [_tick(v) for v in ub], fontsize=10)
    else:  # random search: scatter coloured by the metric
        image = ax.scatter(xa, xb, c=values, cmap=cmap, s=50, edgecolors="0.3", linewidths=0.5)
        if _log_axis(xa):
            ax.set_xscale("log")
        if _log_axis(xb):
            ax.set_yscale("log")
        ax.tick_params(labelsize=10)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(f"{ylabel}, best mean per cell (lower is better)", fontsize=10)
    bar.ax.tick_params(labelsize=9)
    ax.set_xlabel(a, fontsize=11)
    ax.set_ylabel(b, fontsize=11)
    ax.set_title(f"{rows[0]['learner']}: {metric} (lower is better)", fontsize=11)
    out = os.path.join(out_dir, f"sweep_heatmap_{a}_{b}.png")
    _save(fig, out)
    plt.close(fig)
    return out


def _tick(value: str) -> str:
    """A tick label of a JSON-encoded parameter value: numbers short (``0.002``, ``1e+04``), strings bare."""
    v = json.loads(value)
    return f"{v:g}" if isinstance(v, float) else str(v)


def _annotate_cells(ax, grid: np.ndarray, image, cells: int) -> None:
    """Each cell's value in black or white, whichever reads on its colour; the best in bold."""
    best = np.nanmin(grid)
    size = 11 if cells <= 16 else 9 if cells <= 49 else 7
    for i, j in itertools.product(*map(range, grid.shape)):
        if np.isnan(grid[i, j]):
            continue
        r, g, b, _ = image.cmap(image.norm(grid[i, j]))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # perceived luminance
        ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=size, color="white" if dark else "black",
                fontweight="bold" if grid[i, j] == best else "normal")


def run_spec(spec_path: str, data_root: str | None = None, progress=None) -> tuple[list[Curve], str]:
    """Run the learners of a JSON run spec in this process; their curves and the title.

    ``data_root`` holds the public data sets (``{"real": name}``; default ``$OKL_SHARED_DATA``
    or ``../shared/data``); ``{"path": ...}`` is an okl data set relative to the spec.
    ``progress`` (a stream, e.g. stderr; None: silent) gets a line as each run starts and
    one as it ends (:class:`okl_experiments.progress.RunProgress`: its metric, time, time left).
    """
    from okl_experiments.reproduction import DEFAULT_DATA_ROOT

    spec = read_json(spec_path, "run spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("runs"), list) or not spec["runs"]:
        raise ValueError(f"{spec_path}: a run spec needs a non-empty 'runs' list")
    data = spec.get("data") or {}
    if "real" in data:
        source = real_source(data["real"], data_root or os.environ.get("OKL_SHARED_DATA", DEFAULT_DATA_ROOT))
    elif "path" in data:
        source = okl_source(os.path.join(os.path.dirname(spec_path), data["path"]))
    else:
        raise ValueError(f"{spec_path}: 'data' must be {{'real': name}} or {{'path': okl data set}}")
    facts, repeats = source.facts(), int(spec.get("repeats", 1))
    tracker = RunProgress(len(spec["runs"]) * repeats, len(spec["runs"]), f"online_{headline(source.task).metric}", stream=progress)
    curves = []
    for i, entry in enumerate(spec["runs"]):
        try:
            name, label = entry["learner"], entry.get("label", entry["learner"])
        except (KeyError, TypeError):
            raise ValueError(f"{spec_path}: runs[{i}] needs a 'learner'") from None
        try:
            learner = build_learner(name, entry.get("params", {}), facts)
        except ValueError as err:
            raise ValueError(f"{spec_path}: runs[{i}] ({label}) failed: {err}") from None
        params = tuple(sorted(dataclasses.asdict(learner.config).items()))
        batch_rows = batch_rows_for(learner, int(spec["batch_rows"]) if "batch_rows" in spec else None)
        results = []
        for r in range(repeats):
            if progress is not None:
                print(f"run {tracker.runs + 1}/{tracker.total_runs}: {label}{f' (repeat {r + 1}/{repeats})' if repeats > 1 else ''}, "
                      f"{facts.n_rows or '?':,} rows ...", file=progress, flush=True)
            results.append(run_task(RunTask(i, r, name, params, source, shuffle_seed=spec.get("shuffle_seed", 0), batch_rows=batch_rows)))
            if r == repeats - 1:
                tracker.point_done()
            tracker.run_done(results[-1], i, {"label": label})
        failed = [r["error"] for r in results if not r["ok"]]
        if failed:
            raise ValueError(f"{spec_path}: runs[{i}] ({label}) failed: {failed[0]}")
        metric = headline(source.task).metric
        curves.append(Curve(label, results[0]["curve_n"], np.mean([r["curve_value"] for r in results], axis=0), metric,
                            results[0].get("baseline", {}).get(f"online_{metric}")))
    return curves, spec.get("title", "")


def _slug(text: str) -> str:
    """A file-name part: lower case, runs of other characters as one ``_`` (``Lu et al. 2016, Table 5`` -> ``lu_et_al_2016_table_5``)."""
    return "_".join("".join(ch if ch.isalnum() else " " for ch in text.lower()).split())


def _table_name(source: str) -> str:
    """The paper and table of a setting's source, without its parenthesised remark (``... Table 3 (accuracy ...)``)."""
    return source.split(" (")[0].strip()


def _finish(plt, fig, ax, out: str) -> str:
    """Grid, the legend below the axes (never over a curve; final values in the labels), save, close."""
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    _save(fig, out)
    plt.close(fig)
    return out


def reproduce_groups(path: str) -> dict[str, list[dict]]:
    """The settings of a ``reproduce.json`` that ran and have a curve, by figure file name.

    One group per paper table (the ``source`` without its remark) and data set; a group whose
    settings report different metrics (an MSE and an MAE table on one data set) is split by metric.
    """
    raw = read_json(path, "reproduce.json")
    if not isinstance(raw, list) or not all(isinstance(r, dict) and {"key", "source", "data", "metric"} <= r.keys() for r in raw):
        raise ValueError(f"{path}: not a reproduce.json (a list of settings with key, source, data and metric)")
    by_table: dict[tuple[str, str], list[dict]] = {}
    for rec in raw:
        if rec.get("status") == "ok" and (rec.get("curve") or {}).get("n"):
            by_table.setdefault((_table_name(rec["source"]), rec["data"]), []).append(rec)
    groups = {}
    for (table, data), recs in by_table.items():
        metrics = list(dict.fromkeys(r["metric"] for r in recs))
        for metric in metrics:
            suffix = f"-{_slug(metric)}" if len(metrics) > 1 else ""
            groups[f"{_slug(table)}-{_slug(data)}{suffix}.png"] = [r for r in recs if r["metric"] == metric]
    return groups


def _setting_labels(recs: list[dict]) -> list[str]:
    """Each setting's name in its figure: its learner, or its key where a learner has several settings (``omkl_gf-m7-...``)."""
    learners = [r["learner"] for r in recs]
    return [r["learner"] if learners.count(r["learner"]) == 1 else r["key"] for r in recs]


def plot_reproduce(path: str, out_dir: str) -> list[str]:
    """One figure per paper table and data set of a ``reproduce.json``; returns the paths written.

    Each setting's online curve against examples seen, and the paper's number as a
    triangle in the same colour just past the end of the examples axis (labelled "paper"; side
    by side, so equal numbers stay apart).
    """
    groups = reproduce_groups(path)
    if not groups:
        raise ValueError(f"{path}: no setting ran with a curve")
    plt = _pyplot()
    written = []
    for name, recs in groups.items():
        fig, ax = plt.subplots(figsize=(7.2, 4.4 + 0.22 * len(recs)), dpi=100, layout="constrained")
        end = max(rec["curve"]["n"][-1] for rec in recs)
        curves = []
        for i, (rec, label, (style, marker)) in enumerate(zip(recs, _setting_labels(recs), itertools.cycle(_STYLES))):
            online = rec["metric"].startswith("online_")  # a test metric's baseline is of other rows than the curve's
            curve = Curve(label, rec["curve"]["n"], rec["curve"]["value"], rec["metric"], rec.get("baseline") if online else None)
            curves.append(curve)
            keep = curve.n >= max(1.0, curve.n[-1] / 50)  # skip the noisy first rows, as plot_curves does
            [line] = ax.plot(curve.n[keep], curve.value[keep], linestyle=style, marker=marker, markevery=max(1, keep.sum() // 8),
                             markersize=4, linewidth=1.4, label=f"{curve.label} ({curve.value[-1]:.4g})")
            paper = rec.get("paper")
            if paper is not None and math.isfinite(paper):
                ax.plot([end * (1.02 + 0.025 * i)], [paper], linestyle="none", marker="<", markersize=8, color=line.get_color(),
                        markeredgecolor="black", markeredgewidth=0.6, label=f"{curve.label} paper ({paper:.4g})")
        _baseline_lines(ax, curves)
        ax.set_xlabel("number of examples seen")
        ax.set_ylabel(metric_label(metric_of(recs[0]["metric"])))
        ax.set_title(f"{_table_name(recs[0]['source'])}: {recs[0]['data']}")
        written.append(_finish(plt, fig, ax, os.path.join(out_dir, name)))
    return written


def scale_points(paths: list[str]) -> dict[str, dict]:
    """Test metric against rows trained of each at-scale setting, from ``reproduce-at-scale.json`` files.

    One file per ``reproduce --scale_rows`` run (each writes its own ``--output``); returns
    ``{key: {"metric", "paper", "runs": {run name: [(rows, value), ...] sorted by rows}}}``.
    """
    settings: dict[str, dict] = {}
    for path in paths:
        raw = read_json(path, "reproduce-at-scale.json")
        if not isinstance(raw, list) or not all(isinstance(r, dict) and {"key", "metric", "runs"} <= r.keys() for r in raw):
            raise ValueError(f"{path}: not a reproduce-at-scale.json (a list of settings with key, metric and runs)")
        for rec in raw:
            if rec.get("skipped"):
                continue
            entry = settings.setdefault(rec["key"], {"metric": rec["metric"], "paper": rec.get("paper"), "runs": {}})
            for name, run in rec["runs"].items():
                entry["runs"].setdefault(name, []).append((run["rows"], run[rec["metric"]]))
    for entry in settings.values():
        for points in entry["runs"].values():
            points.sort()
    return settings


def plot_scale(paths: list[str], out_dir: str) -> list[str]:
    """Test metric against rows trained (log axis), one figure per at-scale setting; returns the paths.

    One line per run of the setting (the DSG run and its baselines), a point per row count;
    the paper's number as a dashed horizontal line.
    """
    from okl_experiments.at_scale import SCALE_SETTINGS

    sources = {s.key: s.source for s in SCALE_SETTINGS}
    settings = scale_points(paths)
    if not settings:
        raise ValueError(f"no at-scale setting ran in {paths}")
    plt = _pyplot()
    written = []
    for key, entry in settings.items():
        fig, ax = plt.subplots(figsize=(7.2, 4.6), dpi=100, layout="constrained")
        for (name, points), (style, marker) in zip(entry["runs"].items(), itertools.cycle(_STYLES)):
            rows, values = zip(*points)
            ax.plot(rows, values, linestyle=style, marker=marker, markersize=5, linewidth=1.4, label=f"{name} ({values[-1]:.4g})")
        paper = entry["paper"]
        if paper is not None and math.isfinite(paper):
            ax.axhline(paper, color="0.3", linestyle="--", linewidth=1.2, label=f"paper ({paper:.4g})")
        ax.set_xscale("log")
        ax.set_xlabel("rows trained (log scale)")
        ax.set_ylabel(entry["metric"].replace("_", " ") + (" (fraction)" if entry["metric"].endswith("mistake_rate") else ""))
        ax.set_title(f"{sources.get(key, key)}: {key}")
        written.append(_finish(plt, fig, ax, os.path.join(out_dir, f"scale-{_slug(key)}.png")))
    return written


def reproduce_figures(paths: list[str], out_dir: str) -> list[str]:
    """The figures of ``pipelines.reproduce`` outputs; returns the paths written.

    A ``reproduce.json`` gives one figure per paper table and data set (:func:`plot_reproduce`);
    the ``reproduce-at-scale.json`` files (told apart by their settings' ``runs``) together give
    one figure per at-scale setting (:func:`plot_scale`).
    """
    tables: list[str] = []
    scale: list[str] = []
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        raw = read_json(path, "reproduce output")
        at_scale = isinstance(raw, list) and bool(raw) and all(isinstance(r, dict) and isinstance(r.get("runs"), dict) for r in raw)
        (scale if at_scale else tables).append(path)
    return [out for p in tables for out in plot_reproduce(p, out_dir)] + (plot_scale(scale, out_dir) if scale else [])
