"""Reproduce the papers' reference numbers (spec/*.md) with the learners okl has.

For each row of :data:`SETTINGS` whose learner is in ``okl_core.learner_names()`` and
whose data files are under the data root, :func:`run_setting` runs the setting through
the sweep machinery (:func:`okl_experiments.sweep.sweep`): optionally a tuning grid first
(picked by the *online* error on the training stream, so the test set is never used to
choose), then ``runs`` random permutations of the chosen point. :func:`table` prints ours
(mean +- std over runs) next to the paper's number and the difference. Settings whose
learner does not exist yet are skipped with the reason: adding a learner needs no code
here, only the row.

Parameter values in a row are data; data-derived values (``"median"``, ``"n"``,
``"0.01/n"`` ...) are resolved on the training data by
:func:`okl_experiments.params.learner_params`. The data sets are
:data:`okl_experiments.data.DATASETS`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

from okl_core.registry import learner_names
from okl_experiments.data import DATASETS, available, real_source
from okl_experiments.grid import Choice, SearchSpace
from okl_experiments.metrics import experiment_metric
from okl_experiments.sweep import Point, SweepSettings, make_points, sweep
from okl_experiments.text import markdown_table, percent, write_json, write_text

__all__ = ["DEFAULT_DATA_ROOT", "Setting", "SETTINGS", "Outcome", "run_setting", "reproduce", "table", "settings_lines", "write_outcomes"]

DEFAULT_DATA_ROOT = os.path.join("..", "shared", "data")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One reference number of a paper, and how to compute ours.

    Attributes
    ----------
    key : str
        Unique name (``learner-data``).
    learner : str
        Registry name; the row is skipped while no such learner exists.
    data, test : str
        :data:`~okl_experiments.data.DATASETS` names of the training stream and (for test
        metrics) the test set.
    params : dict
        Learner parameters (data-derived values are resolved on the training data).
    metric : str
        ``online_mistake_rate`` (prequential over the stream), ``test_mistake_rate``, ``online_mse`` ...
    paper, paper_std : float
        The paper's number (a fraction for error rates) and its std (None if not given).
    source : str
        Where the number is (paper, table).
    runs : int
        Random permutations we run by default (the paper's count where affordable).
    tolerance : float
        How far ours may be from the paper's for the reproduction test to pass.
    tune : dict
        Optional grid (name -> list) searched first by ``tune_metric`` (one run each).
    tuned : dict
        What the tuning chose when the README table was made; ``use_tuned`` runs these
        values directly (quick checks, tests).
    note : str
        Anything a reader of the table must know.
    """

    key: str
    learner: str
    data: str
    params: dict
    metric: str
    paper: float
    source: str
    test: str | None = None
    paper_std: float | None = None
    runs: int = 5
    tolerance: float = 0.01
    tune: dict | None = None
    tune_metric: str = "online_mistake_rate"
    tuned: dict | None = None
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("metric", "tune_metric"):  # okl <= 0.1's names (online_mistake_rate) are understood
            object.__setattr__(self, name, experiment_metric(getattr(self, name)))


SETTINGS = [
    Setting("fogd-a9a", "fogd", "a9a+a9a.t", {"n_components": 400, "sigma": 8.0, "eta": 0.002, "scaled": False},
            "online_mistake_rate", 0.174, "Lu et al. 2016, Table 5", paper_std=0.001, runs=20),
    Setting("nogd-a9a", "nogd", "a9a+a9a.t", {"budget": 100, "rank": 20, "sigma": 8.0, "eta": 0.2},
            "online_mistake_rate", 0.174, "Lu et al. 2016, Table 5", paper_std=0.002, runs=20),
    Setting("mfogd-mnist", "mfogd", "mnist-test", {"n_components": 400, "sigma": 8.0, "eta": 0.005, "scaled": False},
            "online_mistake_rate", 0.118, "Lu et al. 2016, Table 7", paper_std=0.002, runs=20,
            note="pixels / 255 (LIBSVM mnist.scale)"),
    Setting("mfogd-mnist-tuned", "mfogd", "mnist-test", {"n_components": 400, "sigma": 8.0, "scaled": False},
            "online_mistake_rate", 0.118, "Lu et al. 2016, Table 7", paper_std=0.002, runs=20,
            tune={"eta": [2.0, 0.2, 0.02, 0.002, 0.0002]}, tuned={"eta": 0.002},
            note="eta from the paper's grid, chosen by the online error"),
    Setting("mnogd-mnist", "mnogd", "mnist-test", {"budget": 200, "rank": 40, "sigma": 8.0, "eta": 0.5},
            "online_mistake_rate", 0.156, "Lu et al. 2016, Table 7", paper_std=0.006, runs=20,
            note="pixels / 255 (LIBSVM mnist.scale)"),
    # The budget baselines of Lu et al. 2016, Table 5 (a9a + a9a.t, B = 100, sigma = 8, 20 permutations).
    Setting("rbp-a9a", "rbp", "a9a+a9a.t", {"budget": 100, "sigma": 8.0}, "online_mistake_rate", 0.271, "Lu et al. 2016, Table 5",
            paper_std=0.002, runs=20),
    Setting("forgetron-a9a", "forgetron", "a9a+a9a.t", {"budget": 100, "sigma": 8.0}, "online_mistake_rate", 0.278,
            "Lu et al. 2016, Table 5", paper_std=0.004, runs=20, tolerance=0.03, note="self-tuned shrinking (published rule)"),
    Setting("forgetron-noshrink-a9a", "forgetron", "a9a+a9a.t", {"budget": 100, "sigma": 8.0, "shrinking": False},
            "online_mistake_rate", 0.278, "Lu et al. 2016, Table 5", paper_std=0.004, runs=20, tolerance=0.015,
            note="oldest removal without shrinking"),
    Setting("forgetron-code-a9a", "forgetron", "a9a+a9a.t", {"budget": 100, "sigma": 8.0, "phi_root": "code"},
            "online_mistake_rate", 0.278, "Lu et al. 2016, Table 5", paper_std=0.004, runs=20, tolerance=0.01,
            note="the authors' code's phi: the root above 1 when the quadratic opens downwards"),
    Setting("projectron-a9a", "projectron", "a9a+a9a.t", {"budget": 100, "sigma": 8.0}, "online_mistake_rate", 0.216,
            "Lu et al. 2016, Table 5", paper_std=0.019, runs=20, tolerance=0.02,
            tune={"eta": [0.001, 0.01, 0.03, 0.1, 0.3]}, tuned={"eta": 0.01},
            note="projection threshold eta (on delta^2) tuned by the online error; not given in the paper"),
    Setting("projectron_pp-a9a", "projectron_pp", "a9a+a9a.t", {"budget": 100, "sigma": 8.0}, "online_mistake_rate", 0.186,
            "Lu et al. 2016, Table 5", paper_std=0.005, runs=20, tolerance=0.015,
            tune={"eta": [0.001, 0.01, 0.03, 0.1, 0.3]}, tuned={"eta": 0.03},
            note="projection threshold eta (on delta^2) tuned by the online error; not given in the paper"),
    Setting("projectron_pp-code-a9a", "projectron_pp", "a9a+a9a.t",
            {"budget": 100, "sigma": 8.0, "eta": 1e-9, "margin_test": "code"}, "online_mistake_rate", 0.186,
            "Lu et al. 2016, Table 5", paper_std=0.005, runs=20, tolerance=0.01,
            note="the authors' code: every mistake added until full (eta ~ 0), margin test with U = sqrt((B+1)/log(B+1))/4"),
    Setting("bpa_s-a9a", "bpa_s", "a9a+a9a.t", {"budget": 100, "sigma": 8.0, "C": 1.0}, "online_mistake_rate", 0.211,
            "Lu et al. 2016, Table 5", paper_std=0.002, runs=20),
    Setting("bogd-a9a", "bogd", "a9a+a9a.t", {"budget": 100, "sigma": 8.0, "lam": 0.05}, "online_mistake_rate", 0.279,
            "Lu et al. 2016, Table 5", paper_std=0.002, runs=20, tolerance=0.05,
            tune={"eta": [2.0, 0.2, 0.02, 0.002, 0.0002]}, tuned={"eta": 0.2},
            note="eta from the paper's grid by the online error; lam = 0.05 (not given)"),
    Setting("bogd-code-a9a", "bogd", "a9a+a9a.t", {"budget": 100, "sigma": 8.0, "eta": 0.2, "lam": 4.19e-10, "gamma": 10.0},
            "online_mistake_rate", 0.279, "Lu et al. 2016, Table 5", paper_std=0.002, runs=20, tolerance=0.01,
            note="the authors' binary code: lam = 1/n^2, coefficients scaled to max eta gamma = 2 after each removal"),
    # The multiclass budget baselines of Lu et al. 2016, Table 7 (MNIST, B = 200, sigma = 8).
    Setting("mrbp-mnist", "mrbp", "mnist-test", {"budget": 200, "sigma": 8.0}, "online_mistake_rate", 0.434,
            "Lu et al. 2016, Table 7", paper_std=0.005, runs=20, note="pixels / 255 (LIBSVM mnist.scale)"),
    Setting("mprojectron-mnist", "mprojectron", "mnist-test", {"budget": 200, "sigma": 8.0, "eta": 0.1}, "online_mistake_rate",
            0.177, "Lu et al. 2016, Table 7", paper_std=0.001, runs=20, note="eta = 0.1 (Orabona's default)"),
    Setting("mbogd-mnist", "mbogd", "mnist-test", {"budget": 200, "sigma": 8.0}, "online_mistake_rate", 0.425,
            "Lu et al. 2016, Table 7", paper_std=0.004, runs=20, tolerance=0.05,
            tune={"eta": [2.0, 0.2, 0.02, 0.002, 0.0002], "lam": [0.005, 0.01, 0.02, 0.05]}, tuned={"eta": 0.2, "lam": 0.02},
            note="eta from the paper's grid and lam by the online error"),
    Setting("mbogd-code-mnist", "mbogd", "mnist-test", {"budget": 200, "sigma": 8.0, "eta": 0.5, "lam": 1e-5, "removal": "oldest"},
            "online_mistake_rate", 0.425, "Lu et al. 2016, Table 7", paper_std=0.004, runs=20, tolerance=0.01,
            note="the authors' multiclass code: oldest removal, no rescaling, eta = 0.5, lam = 1e-5"),
    Setting("mforgetron-mnist", "mforgetron", "mnist-test", {"budget": 200, "sigma": 8.0}, "online_mistake_rate", 0.439,
            "Lu et al. 2016, Table 7", paper_std=0.006, runs=20, tolerance=0.04,
            note="published phi (largest in (0, 1]); mu = f'_{y_r}(x_r) as the authors' code"),
    Setting("mforgetron-code-mnist", "mforgetron", "mnist-test", {"budget": 200, "sigma": 8.0, "phi_root": "code"},
            "online_mistake_rate", 0.439, "Lu et al. 2016, Table 7", paper_std=0.006, runs=20, tolerance=0.015,
            note="the authors' code's phi (root above 1 when the quadratic opens downwards)"),
    Setting("mprojectron_pp-mnist", "mprojectron_pp", "mnist-test", {"budget": 200, "sigma": 8.0, "eta": 0.1},
            "online_mistake_rate", 0.177, "Lu et al. 2016, Table 7", paper_std=0.003, runs=20, tolerance=0.01,
            note="eta = 0.1 (Orabona's default)"),
    Setting("mprojectron_pp-code-mnist", "mprojectron_pp", "mnist-test",
            {"budget": 200, "sigma": 8.0, "eta": 1e-9, "margin_test": "code"}, "online_mistake_rate", 0.177,
            "Lu et al. 2016, Table 7", paper_std=0.003, runs=20, tolerance=0.01,
            note="the authors' code: every mistake added until full, margin test with U"),
    Setting("mbpa_s-mnist", "mbpa_s", "mnist-test", {"budget": 200, "sigma": 8.0, "C": 1.0}, "online_mistake_rate", 0.324,
            "Lu et al. 2016, Table 7", paper_std=0.012, runs=20, tolerance=0.02, note="C = 1 (the authors' code)"),
    Setting("fogd-a9a-batch", "fogd", "a9a", {"n_components": 4000, "sigma": 8.0, "scaled": False},
            "test_mistake_rate", 1 - 0.8493, "Lu et al. 2016, Table 3 (accuracy 84.93%)", test="a9a.t", runs=5,
            tune={"eta": [0.2, 0.02, 0.002, 0.0002]}, tuned={"eta": 0.0002},
            note="one pass over a9a, last iterate tested on a9a.t; eta from the paper's grid by the online error"),
    Setting("nogd-a9a-batch", "nogd", "a9a", {"budget": 1000, "rank": 200, "sigma": 8.0, "eta": 0.2},
            "test_mistake_rate", 1 - 0.8499, "Lu et al. 2016, Table 3 (accuracy 84.99%)", test="a9a.t", runs=5),
    Setting("dsg-a9a", "dsg", "a9a", {"loss": "hinge", "sigma": "median", "nu": "0.01/n", "batch_size": 64, "block_size": 32},
            "test_mistake_rate", 0.153, "Dai et al. 2014, Sec. 6 (Adult)", test="a9a.t", runs=3, tolerance=0.015,
            tune={"theta": [1000.0, 3000.0, 10000.0], "step_offset": [0.0, 300.0, 1000.0, 3000.0]},
            tuned={"theta": 10000.0, "step_offset": 3000.0},
            note="one pass; theta and the step offset (gamma_i = theta / (offset + i)) tuned on the online error of a9a"),
    Setting("dsg-a9a-precond", "dsg", "a9a", {"loss": "hinge", "sigma": "median", "nu": "0.01/n", "batch_size": 64,
                                              "block_size": 32, "step_offset": 10000.0, "precondition": True,
                                              "precondition_eps": 0.001},
            "test_mistake_rate", 0.153, "Dai et al. 2014, Sec. 6 (Adult)", test="a9a.t", runs=3, tolerance=0.015,
            tune={"theta": [250.0, 500.0, 1000.0, 2000.0]}, tuned={"theta": 1000.0},
            note="one pass, with the paper's optional block preconditioning; theta tuned on the online error of a9a"),
    Setting("oks-a9a", "oks", "a9a", {"loss": "logistic", "horizon": "n"}, "online_mistake_rate", 0.1965,
            "Li & Liao 2022, Table 2", paper_std=0.0012, runs=3, tolerance=0.015,
            note="6 Gaussians 2^-2..2^3; binary features as distributed (within [-1, 1]); the paper ran 10 permutations"),
    Setting("ioks-a9a", "ioks", "a9a", {"loss": "logistic", "horizon": "n"}, "online_mistake_rate", 0.1746,
            "Li & Liao 2022, Table 2", paper_std=0.0012, runs=3, tolerance=0.015),
    Setting("oks_pp-a9a", "oks_pp", "a9a", {"loss": "logistic"}, "online_mistake_rate", 0.1657, "Li & Liao 2022, Table 2",
            paper_std=0.0031, runs=3, tolerance=0.015),
    Setting("rf_oks_pp-a9a", "rf_oks_pp", "a9a", {"loss": "logistic", "n_components": 400}, "online_mistake_rate", 0.1728,
            "Li & Liao 2022, Table 2", paper_std=0.0029, runs=3, tolerance=0.015),
]
"""The reference numbers okl reproduces (spec/fogd_nogd.md, dsg.md, oks.md).

A row is data only: a learner added later needs a row here, no code.
"""


@dataclasses.dataclass
class Outcome:
    """One setting's result (or why it was skipped)."""

    setting: Setting
    status: str  # "ok", "skipped", "error"
    reason: str = ""
    mean: float = math.nan
    std: float = math.nan
    runs: int = 0
    params: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    curve_n: list = dataclasses.field(default_factory=list)
    curve_value: list = dataclasses.field(default_factory=list)

    @property
    def diff(self) -> float:
        return self.mean - self.setting.paper

    def to_dict(self) -> dict:
        s = self.setting
        return {"key": s.key, "learner": s.learner, "data": s.data, "test": s.test, "metric": s.metric, "status": self.status,
                "reason": self.reason, "ours_mean": self.mean, "ours_std": self.std, "runs": self.runs, "paper": s.paper,
                "paper_std": s.paper_std, "diff": self.diff if self.status == "ok" else None, "source": s.source,
                "params": self.params, "seconds": self.seconds, "note": s.note,
                "curve": {"n": self.curve_n, "value": self.curve_value}}


def _skip_reason(setting: Setting, data_root: str) -> str | None:
    if setting.learner not in learner_names():
        return f"learner {setting.learner!r} not in okl_core.learner_names() yet"
    for name in filter(None, (setting.data, setting.test)):
        if not available(name, data_root):
            return f"data set {name!r} not found under {data_root} ({', '.join(DATASETS[name].files)})"
    return None


def run_setting(setting: Setting, data_root: str, client=None, runs: int | None = None, out_dir: str | None = None,
                progress=None, use_tuned: bool = False) -> Outcome:
    """Run one setting (tuning first if it has a grid); never raises for a failing learner.

    ``use_tuned`` skips the tuning and uses the setting's recorded ``tuned`` values.
    """
    reason = _skip_reason(setting, data_root)
    if reason:
        return Outcome(setting, "skipped", reason)
    started = time.perf_counter()
    train = real_source(setting.data, data_root)
    test = real_source(setting.test, data_root) if setting.test else None
    sub = (lambda name: os.path.join(out_dir, setting.key, name)) if out_dir else (lambda name: None)
    base, tune = setting.params, setting.tune
    if use_tuned and setting.tuned:
        base, tune = {**base, **setting.tuned}, None
    fixed = SearchSpace({k: Choice((v,)) for k, v in base.items() if k not in (tune or {})})
    try:
        if tune:
            space = SearchSpace({k: Choice(tuple(v)) for k, v in tune.items()})
            points = make_points(setting.learner, fixed.merged(space), train)
            tuned = sweep(SweepSettings(setting.learner, train, None, repeats=1), points, out_dir=sub("tune"),
                          metric=setting.tune_metric, client=client, swept=space.swept, space=space.describe(), progress=progress)
            if tuned.best is None:
                errors = sorted({r["error"] for r in tuned.rows if r["error"]})
                return Outcome(setting, "error", f"every tuning point failed: {errors[:2]}")
            chosen = json.loads(min((r for r in tuned.rows if r["status"] == "ok"),
                                    key=lambda r: (r[f"{setting.tune_metric}_mean"], r["point"]))["params"])
        else:
            chosen = make_points(setting.learner, fixed, train)[0].params
        point = Point(0, {}, chosen)
        final = sweep(SweepSettings(setting.learner, train, test, repeats=runs or setting.runs), [point], out_dir=sub("runs"),
                      metric=setting.metric, client=client, progress=progress)
    except ValueError as err:  # a parameter the learner does not know, a task mismatch
        return Outcome(setting, "error", str(err), seconds=time.perf_counter() - started)
    row = final.rows[0]
    if row["status"] != "ok":
        return Outcome(setting, "error", row["error"], params=chosen, seconds=time.perf_counter() - started)
    return Outcome(setting, "ok", mean=row[f"{setting.metric}_mean"], std=row[f"{setting.metric}_std"], runs=row["runs"],
                   params={k: v for k, v in chosen.items() if k not in ("n_inputs", "n_classes")},
                   seconds=time.perf_counter() - started, curve_n=row["curve_n"], curve_value=row["curve_value"])


def table(outcomes: list[Outcome]) -> str:
    """Markdown: ours next to the paper's number (percent for error metrics) and the difference."""
    head = ["setting", "learner", "data", "metric", "ours (%)", "runs", "paper (%)", "diff (points)", "time (s)", "source / note"]
    rows = []
    for o in outcomes:
        s = o.setting
        data = s.data + (f" -> {s.test}" if s.test else "")
        if o.status == "ok":
            rows.append([s.key, s.learner, data, s.metric, percent(o.mean, o.std), str(o.runs), percent(s.paper, s.paper_std),
                         f"{100 * o.diff:+.2f}", f"{o.seconds:.0f}", "; ".join(filter(None, [s.source, s.note]))])
        else:
            rows.append([s.key, s.learner, data, s.metric, o.status, "", percent(s.paper, s.paper_std), "", "", o.reason])
    return markdown_table(head, rows)


def settings_lines() -> list[str]:
    """One line per setting: key, learner, data, metric, the paper's number, parameters, tuning grid."""
    return [f"{s.key:16s} {s.learner:9s} {s.data:10s} {s.metric:13s} paper {percent(s.paper, s.paper_std):>14s}  "
            f"{json.dumps(s.params)}{'  tune ' + json.dumps(s.tune) if s.tune else ''}  [{s.source}]" for s in SETTINGS]


def reproduce(keys: list[str] | None = None, data_root: str = DEFAULT_DATA_ROOT, client=None, runs: int | None = None,
              out_dir: str | None = None, progress=None, use_tuned: bool = False) -> list[Outcome]:
    """Run the settings named in ``keys`` (keys or learner names; all when None) and return their outcomes."""
    chosen = SETTINGS if not keys else [s for s in SETTINGS if s.key in keys or s.learner in keys]
    unknown = sorted(set(keys or ()) - {s.key for s in SETTINGS} - {s.learner for s in SETTINGS})
    if unknown:
        raise ValueError(f"--only: unknown setting(s) {unknown}; see --list")
    outcomes = []
    for setting in chosen:
        if progress is not None:
            print(f"== {setting.key}", file=progress, flush=True)
        outcomes.append(run_setting(setting, data_root, client=client, runs=runs, out_dir=out_dir, progress=progress,
                                    use_tuned=use_tuned))
    return outcomes


def write_outcomes(out_dir: str, outcomes: list[Outcome]) -> list[str]:
    """Write ``reproduce.md`` (:func:`table`) and ``reproduce.json`` in ``out_dir``; returns their paths."""
    return [write_text(os.path.join(out_dir, "reproduce.md"), table(outcomes)),
            write_json(os.path.join(out_dir, "reproduce.json"), [o.to_dict() for o in outcomes], indent=1, sort_keys=True, default=float)]
