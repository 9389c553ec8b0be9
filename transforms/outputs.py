"""WriteRunOutputs: the model file, metrics JSON, online-error plot and dead letters of a run.

One step, run once at the end of the job, gathers the merged model, every shard's
summary, every batch's prequential record, the test metrics and the dead letters (side
inputs) and writes, next to each other:

* the model file (okl_core format, written atomically);
* ``metrics.json``: online error per shard and merged (per round too), test metrics,
  rows read / trained / rejected (by reason), where the run diverged (``diverged``: null,
  or the first batch of each shard whose scores, state or errors turned NaN or inf or whose
  online loss exploded, and of the merged model), timing, and the per-batch records (strict JSON: NaN and inf are
  written as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
  :func:`okl_core.jsonio.loads_json` reads them back as floats);
* the online-error plot (PNG, matplotlib's Agg backend): the headline metric and its
  curve are :mod:`okl_core.reporting`'s;
* the dead letters (JSON lines sorted by split and stream position);
* last, ``run.json``: the run id (also in ``metrics.json``) and each file's size and
  SHA-256, so the files of one run can be told from another's.

Where the files go is ``info["write_to"]``: for a local output, a hidden staging
directory that the launcher renames into place after the job (all files appear
together: :class:`okl_core.publish.StagedDirectory`); for a remote output (``gs://``,
which cannot rename directories) the final paths, where ``run.json`` written last is what
ties them together. Local files are written atomically (temporary file + rename); other
schemes go through Beam's FileSystems (object stores write whole objects on close).
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import math
import os
import secrets
import time
import typing

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from okl_core.divergence import non_finite_fields
from okl_core.jsonio import strict_json
from okl_core.metrics import Prequential
from okl_core.reporting import baseline_name, headline, job_curves
from okl_core.state import atomic_write_bytes, model_from_bytes
from transforms.read import is_remote

__all__ = ["WriteRunOutputs", "WriteDeadLetterFile", "write_bytes", "build_report", "divergence_report", "plot_online_error", "online_error_figure", "run_id",
           "MANIFEST_FILE"]

MANIFEST_FILE = "run.json"
"""Written last into a run's output: ``{"run_id", "files": {key: {"file", "bytes", "sha256"}}}``."""


def run_id(launched_at: float) -> str:
    """A new run's id: its launch time (UTC) and 8 random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(launched_at)) + "-" + secrets.token_hex(4)


def write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path``: atomically for local paths, via FileSystems otherwise."""
    if is_remote(path):
        with FileSystems.create(path) as f:
            f.write(data)
    else:
        atomic_write_bytes(path, data)


def _merge_all(task: str, parts: list[dict]) -> Prequential:
    total = Prequential(task)
    for part in parts:
        total = total.merge(Prequential(**part))
    return total


def divergence_report(summaries: list[dict], model_non_finite: list[str]) -> dict | None:
    """Where the run diverged: the first batch of each shard that did, and of the merged model.

    The merged model diverged from the first (round, batch, shard) at which any shard did (a
    NaN in one shard reaches the merge); ``non_finite_arrays`` names the merged model's
    arrays that hold NaN or inf. Each entry's ``reason`` is ``"not finite"`` or ``"exploded"``
    (:func:`okl_core.divergence.divergence_reason`). None when every shard and the model
    stayed finite and no shard's online loss exploded.
    """
    per_shard = sorted((s["diverged_at"] for s in summaries if s.get("diverged_at")),
                       key=lambda d: (d["round"], d["shard"]))
    if not per_shard and not model_non_finite:
        return None
    first = min(per_shard, key=lambda d: (d["round"], d["batch"], d["shard"])) if per_shard else None
    return {"per_shard": per_shard, "merged": {**(first or {"shard": None, "round": None, "batch": None, "row": None, "reason": "not finite"}),
                                              "non_finite_arrays": list(model_non_finite)}}


def build_report(info: dict, summaries: list[dict], batches: list[dict], test: dict | None, dead: list[dict],
                 model_non_finite: typing.Sequence[str] = ()) -> dict:
    """The content of ``metrics.json`` (see the module docstring).

    Parameters
    ----------
    info : dict
        Run description from the launcher: ``learner``, ``task``, ``plan``, ``train``,
        ``test``, ``files``, ``launched_at`` (seconds since the epoch).
    summaries : list of dict
        One per (shard, round), from TrainOnline.
    batches : list of dict
        One per batch, from TrainOnline.
    test : dict or None
        Test-set Prequential fields.
    dead : list of dict
        Dead-letter records.
    model_non_finite : list of str
        The merged model's arrays that hold NaN or inf.
    """
    task = info["task"]
    summaries = sorted(summaries, key=lambda s: (s["round"], s["shard"]))
    batches = sorted(batches, key=lambda b: (b["round"], b["shard"], b["seq"]))
    shards = sorted({s["shard"] for s in summaries})
    per_shard = {s: _merge_all(task, [x["online"] for x in summaries if x["shard"] == s]) for s in shards}
    rounds = sorted({s["round"] for s in summaries})
    per_round = {r: _merge_all(task, [x["online"] for x in summaries if x["round"] == r]) for r in rounds}
    merged = _merge_all(task, [per_shard[s].to_dict() for s in shards])
    # Per split: the training rows' reasons add up to "rejected", the test set's to "test_rejected".
    reasons = collections.Counter(d["reason"].split(":")[0] for d in dead if d["split"] == "train")
    test_reasons = collections.Counter(d["reason"].split(":")[0] for d in dead if d["split"] != "train")
    train_dead = sum(reasons.values())
    def per_shard_sum(key):
        return [sum(x[key] for x in summaries if x["shard"] == s) for s in shards]

    wall = time.time() - info["launched_at"]
    return {
        "run_id": info.get("run_id"),
        "learner": info["learner"],
        "plan": info["plan"],
        "data": {"train": info["train"], "test": info.get("test")},
        "rows": {
            "read": info["train"]["n_rows"],
            "trained": merged.n,
            "rejected": train_dead,
            "test_rejected": len(dead) - train_dead,
            "rejected_by_reason": dict(sorted(reasons.items())),
            "test_rejected_by_reason": dict(sorted(test_reasons.items())),
        },
        "online": {
            "merged": merged.summary(),
            "per_shard": [{"shard": s, **per_shard[s].summary()} for s in shards],
            "per_round": [{"round": r, **per_round[r].summary()} for r in rounds],
        },
        "test": Prequential(**test).summary() if test else None,
        "diverged": divergence_report(summaries, list(model_non_finite)),
        "timing": {
            "wall_seconds": wall,
            "rows_per_second": merged.n / wall if wall > 0 else None,
            "train_seconds_per_shard": per_shard_sum("train_seconds"),
            "read_seconds_per_shard": per_shard_sum("read_seconds"),  # waiting for rows (reads run ahead)
            "cpu_seconds_per_shard": [sum(x.get("cpu_seconds", 0.0) for x in summaries if x["shard"] == s) for s in shards],
            # Of the CPU above: the learner's updates and reading/checking rows (benchmarks split Beam's share out).
            "learn_cpu_seconds_per_shard": [sum(x.get("learn_cpu_seconds", 0.0) for x in summaries if x["shard"] == s) for s in shards],
            "read_cpu_seconds_per_shard": [sum(x.get("read_cpu_seconds", 0.0) for x in summaries if x["shard"] == s) for s in shards],
            # When each shard's training step ran, in seconds after launch (per round).
            "shard_steps": [
                {"shard": x["shard"], "round": x["round"], "start": x["started"] - info["launched_at"], "end": x["finished"] - info["launched_at"]}
                for x in summaries
            ],
        },
        "files": info["files"],
        "batches": batches,
    }


MAX_SHARD_LEGEND = 8
"""Shards drawn with a legend entry each; more share one thin grey entry ("shards (k)")."""


def online_error_figure(report: dict, task: str):
    """The matplotlib Figure of :func:`plot_online_error` (tests inspect its layout).

    Every curve is drawn against rows learned by the whole job
    (:func:`okl_core.reporting.job_curves`), so the shards' curves and the merged one
    ("all shards") end together at the job's rows, each with the points its batches
    recorded within them. The legend sits outside the axes, to the right, so it hides no curve.
    """
    # The object API with the Agg canvas: no pyplot (no GUI backend, a second less to import).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    metric = headline(task)
    curves = job_curves(report["batches"], task)
    fig = Figure(figsize=(8, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    many = len(curves.shards) > MAX_SHARD_LEGEND
    for i, (s, (xs, ys)) in enumerate(curves.shards.items()):
        if many:
            ax.plot(xs, ys, lw=0.6, color="0.6", label=f"shards ({len(curves.shards)})" if i == 0 else None)
        else:
            ax.plot(xs, ys, lw=1.2, alpha=0.85, marker="." if len(xs) <= 40 else None, label=f"shard {s}")
    if len(curves.shards) > 1:
        ax.plot(curves.x, curves.merged, lw=2.2, color="black", label="all shards")
    baseline = _online_baseline(report, metric.summary_key)
    if baseline is not None:  # the constant answer over the same rows: what the curve must stay clearly below
        ax.axhline(baseline, color="tab:red", lw=1.2, ls="--", label=f"{baseline_name(task)} {baseline:.4g}")
    ax.set_xlabel("rows learned by the whole job")
    ax.set_ylabel(metric.label)
    if curves.x:
        ax.set_xlim(0, curves.x[-1] * 1.02)
        ax.set_ylim(*_settled_range(curves, baseline))
    test = report.get("test")
    title = f"{report['learner']['learner']} on {report['data']['train']['name']}"
    if curves.merged:
        title += f": online {metric.short} {curves.merged[-1]:.4g}"
    if test:
        title += f", test {metric.short} {test[metric.summary_key]:.4g}"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if len(curves.shards) > 1 or baseline is not None:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig


def _online_baseline(report: dict, key: str) -> float | None:
    """The merged online metrics' constant baseline (None when unknown: an old ``metrics.json``, no rows)."""
    value = ((report.get("online") or {}).get("merged") or {}).get("baseline", {}).get(key)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _settled_range(curves, baseline: float | None = None) -> tuple[float, float]:
    """y limits fitting every curve after its first 2% of the job's rows (the first few
    rows' error, 0 or 1 after one row, would otherwise flatten the rest of the curve), and
    the baseline's line."""
    skip = curves.x[-1] / 50
    values = [v for xs, ys in [(curves.x, curves.merged), *curves.shards.values()] for x, v in zip(xs, ys) if x >= skip and math.isfinite(v)]
    values += [baseline] if baseline is not None and values else []
    if not values:
        return (0.0, 1.0)
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    return low - pad, high + pad


def plot_online_error(report: dict, task: str) -> bytes:
    """PNG of the cumulative online error against rows learned by the job, per shard and merged."""
    buffer = io.BytesIO()
    online_error_figure(report, task).savefig(buffer, format="png")
    return buffer.getvalue()


def report_json(report: dict) -> str:
    """``metrics.json`` text: indented, each per-batch record on one line (a long run has thousands)."""
    batches = report.get("batches") or []
    head = strict_json({**report, "batches": None}, indent=1, sort_keys=True)
    rows = ",\n  ".join(strict_json(b, sort_keys=True) for b in batches)
    return head.replace('"batches": null', '"batches": [' + (f"\n  {rows}\n ]" if batches else "]"), 1) + "\n"


class _WriteOutputs(beam.DoFn):
    def __init__(self, info: dict):
        self.info = info

    def process(self, _, model: bytes, summaries: list, batches: list, test: list, dead: list):
        dead_records = sorted((json.loads(d) for d in dead), key=lambda d: (d["split"], d["position"]))
        test_fields = json.loads(test[0]) if test else None
        _, state = model_from_bytes(model, source="merged model", allow_non_finite=True)
        report = build_report(self.info, [json.loads(s) for s in summaries], [json.loads(b) for b in batches], test_fields, dead_records,
                              non_finite_fields(state))
        contents = {
            "model": model,
            "dead_letter": "".join(json.dumps(d, sort_keys=True) + "\n" for d in dead_records).encode(),
            "plot": plot_online_error(report, self.info["task"]),
            "metrics": report_json(report).encode(),
        }
        write_to = self.info.get("write_to", self.info["files"])
        for key, data in contents.items():
            write_bytes(write_to[key], data)
        manifest = {
            "run_id": self.info.get("run_id"),
            "files": {key: {"file": os.path.basename(self.info["files"][key]), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                      for key, data in contents.items()},
        }
        write_bytes(_beside(write_to["metrics"], MANIFEST_FILE), (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
        yield self.info["files"]["metrics"]


def _beside(path: str, name: str) -> str:
    """The path of ``name`` in the directory of ``path`` (local or remote)."""
    return path[: path.rstrip("/").rfind("/") + 1] + name


class WriteRunOutputs(beam.PTransform):
    """Write the run's files once everything upstream has finished.

    Parameters
    ----------
    info : dict
        See :func:`build_report`; ``info["files"]`` names ``model``, ``metrics``,
        ``plot`` and ``dead_letter`` paths.
    model : PCollection[bytes]
        The merged model (one element).
    summaries, batches, test, dead_letter : PCollection[str]
        JSON records (``test`` holds at most one).
    """

    def __init__(self, info: dict, model, summaries, batches, test, dead_letter):
        super().__init__()
        self.info = info
        self.inputs = (model, summaries, batches, test, dead_letter)

    def expand(self, pbegin):
        model, summaries, batches, test, dead = self.inputs
        return (
            pbegin
            | "Once" >> beam.Create([None])
            | "WriteFiles"
            >> beam.ParDo(
                _WriteOutputs(self.info),
                beam.pvalue.AsSingleton(model),
                beam.pvalue.AsList(summaries),
                beam.pvalue.AsList(batches),
                beam.pvalue.AsList(test),
                beam.pvalue.AsList(dead),
            )
        )


class WriteDeadLetterFile(beam.PTransform):
    """Write dead-letter records (JSON strings) into one JSON-lines file, sorted by stream position."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def expand(self, dead):
        path = self.path

        def write(records):
            write_bytes(path, "".join(r + "\n" for r in sorted(records, key=lambda r: json.loads(r)["position"])).encode())

        return dead | "Collect" >> beam.combiners.ToList() | "Write" >> beam.Map(write)
