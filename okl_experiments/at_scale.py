"""The papers at scale (issue 19): DSG settings that run as command lines through the Beam pipeline.

The settings of :mod:`okl_experiments.reproduction` fold small data sets in memory on a
Dask cluster. These build their data (``prepare``: generated MNIST-8M digits, PCA, CEP
molecules) and train through ``pipelines.train`` with 2 shards on 2 worker processes, as
a user would. Each :class:`ScaleSetting` is a list of steps, each a CLI name and its
arguments with placeholders: ``{mnist}`` and ``{cep}`` (folders under the data root),
``{work}`` (a scratch folder for the data sets and runs), ``{rows}`` (training rows:
the setting's full size or a slice) and ``{test_rows}``. :func:`run_scale_setting`
runs the steps with a caller-supplied ``run_cli`` (``pipelines.reproduce`` starts each
as a ``python -m pipelines.<cli>`` process) and reads the results from the runs'
``metrics.json``; regression settings add the closed-form baselines of
:mod:`okl_experiments.baselines` on the same split.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from typing import Callable

from okl_core.reporting import baseline_name
from okl_experiments.baselines import regression_baselines
from okl_experiments.metrics import NOT_BETTER

__all__ = ["ScaleSetting", "SCALE_SETTINGS", "ScaleOutcome", "scale_steps", "run_scale_setting", "scale_table", "scale_lines"]

_SHARDS = 2
_PIPELINE = ("--num_shards", str(_SHARDS), "--direct_num_workers=2", "--direct_running_mode=multi_processing")
_MNIST = ("--images", "{mnist}/t10k-images-idx3-ubyte.gz", "--labels", "{mnist}/t10k-labels-idx1-ubyte.gz")
_DSG_8V6 = ("--learner", "dsg", "--param", 'loss="hinge"', "--sigma", "median", "--param", 'nu="1/n"',
            "--param", "batch_size=1024", "--param", "block_size=256", "--param", "theta=10", "--param", "step_offset=0")
_DSG_10 = ("--learner", "dsg", "--param", 'loss="softmax"', "--sigma", "0.35*median", "--param", "nu=0.0001",
           "--param", "batch_size=1024", "--param", "block_size={block_2p16}", "--param", "theta=10000", "--param", "step_offset=0")
_MOLECULES = ("{cep}/cep-processed.csv", "--num_workers", "2", "--quiet")


@dataclasses.dataclass(frozen=True)
class ScaleSetting:
    """A reference number and the command lines that compute ours.

    Attributes
    ----------
    key : str
    paper : float
        The paper's number (error rate as a fraction, or MAE).
    source, note : str
    metric : {"test_mistake_rate", "test_mae"}
    rows, slice_rows : int
        Training rows of the full run, and of the slice run here and in tests.
    test_rows, slice_test_rows : int
        Test rows of the full run and of a slice (None: the same).
    steps : tuple of tuple of str
        ``(cli, *args)``; the runs whose ``metrics.json`` are read are the ``train`` steps'
        ``--output``, the first being the setting's own, the others baselines.
    regression_split : tuple of str or None
        Train and test data set (placeholders allowed) for the closed-form baselines.
    """

    key: str
    paper: float
    source: str
    metric: str
    rows: int
    slice_rows: int
    test_rows: int
    steps: tuple
    regression_split: tuple | None = None
    note: str = ""
    slice_test_rows: int | None = None


SCALE_SETTINGS = [
    ScaleSetting(
        "dsg-mnist8m-8v6", 0.0026, "Dai et al. 2014, Sec. 7 (MNIST 8 vs 6)", "test_mistake_rate", 1_600_000, 131_072, 389,
        (
            ("prepare", "mnist8m", *_MNIST, "--base_rows", "0:8000", "--classes", "6,8", "--rows", "{rows}", "--num_workers", "2",
             "--quiet", "--output", "{work}/train"),
            ("prepare", "mnist8m", *_MNIST, "--base_rows", "8000:10000", "--classes", "6,8", "--originals", "--rows", "{test_rows}",
             "--quiet", "--output", "{work}/test"),
            ("prepare", "pca", "{work}/train", "--components", "50", "--sample_rows", "100000", "--quiet", "--output", "{work}/train50"),
            ("prepare", "pca", "{work}/test", "--like", "{work}/train50", "--quiet", "--output", "{work}/test50"),
            ("train", "--input", "{work}/train50", "--test", "{work}/test50", *_DSG_8V6, *_PIPELINE, "--output", "{work}/dsg"),
        ),
        note="base = the 1,543 6s/8s of MNIST test digits 0-7999 (the paper: the ~11.8k of the 60k train split); "
             "test = the 389 undeformed 6s/8s of digits 8000-9999, never used as bases; PCA 50 on 100k sampled rows; theta = 10 (least online error of 1, 10, 100, 1000 on the 131,072-row slice)",
    ),
    ScaleSetting(
        "dsg-mnist8m-10class", 0.005, "Dai et al. 2014, Sec. 7 (MNIST-8M, conv features)", "test_mistake_rate", 8_100_000, 65_536, 2000,
        (
            ("prepare", "mnist8m", *_MNIST, "--base_rows", "0:8000", "--rows", "{rows}", "--num_workers", "2", "--quiet",
             "--output", "{work}/train"),
            ("prepare", "mnist8m", *_MNIST, "--base_rows", "8000:10000", "--originals", "--rows", "{test_rows}", "--quiet",
             "--output", "{work}/test"),
            ("train", "--input", "{work}/train", "--test", "{work}/test", *_DSG_10, *_PIPELINE, "--output", "{work}/dsg"),
            ("train", "--input", "{work}/train", "--test", "{work}/test", "--learner", "mfogd", "--sigma", "median",
             "--n_components", "32768", "--eta", "0.002", *_PIPELINE, "--output", "{work}/mfogd"),
        ),
        note="raw pixels / 255 (the paper: convolutional features, which okl does not have); softmax DSG, block = "
             "2^16 x 2048 / rows (each shard learns rows / 2048 blocks and both draw blocks 0..t-1, so the merged "
             "model has 2^16 distinct features); sigma = 0.35 x median (raw pixels need a narrower kernel than the paper's "
             "4 x median on conv features: median gave 14.4% test error on the 65,536-row slice), nu = 1e-4, theta = 1e4 "
             "(theta nu = 1, the paper's condition; the least online error on a 1M-row stream folded in memory as the "
             "pipeline cuts it: the paper's nu = 0.0005 stops improving at 262k rows); base = MNIST test digits 0-7999, test = the 2,000 undeformed "
             "digits 8000-9999; mfogd with 2^15 frequencies (2^16 features x 10 classes) beside it",
    ),
    ScaleSetting(
        "dsg-molecular", math.nan, "Dai et al. 2014, Sec. 7 (MolecularSpace: 'comparable with neural network')", "test_mae",
        23_978, 1_000, 5_978,
        (
            ("prepare", "molecular", *_MOLECULES, "--records", "0:{rows}", "--output", "{work}/train"),
            ("prepare", "molecular", *_MOLECULES, "--records", "24000:{test_stop}", "--output", "{work}/test"),
            ("train", "--input", "{work}/train", "--test", "{work}/test", "--learner", "dsg", "--param", 'loss="square"',
             "--sigma", "median", "--param", "nu=1e-6", "--param", "batch_size=64", "--param", "block_size={block_mol}",
             "--param", "feature_cache_mb=1024", "--param", "theta=1000", "--param", "step_offset=1000", *_PIPELINE,
             "--output", "{work}/dsg"),
            ("train", "--input", "{work}/train", "--test", "{work}/test", "--learner", "fogd_r", "--sigma", "median",
             "--n_components", "4096", "--eta", "3e-5", *_PIPELINE, "--output", "{work}/fogd_r"),
        ),
        regression_split=("{work}/train", "{work}/test"), slice_test_rows=500,
        note="CEP subset (29,978 molecules, not the 2.3M): records 0-23,977 train, 24,000-29,977 test; raw randomly "
             "sorted Coulomb matrices (75 atoms, 2850 features): the paper's step predicates (--steps at the training "
             "entries' quintiles 0.39,0.82,2.6,5.8) did not help DSG or FOGD on the holdout (docs/at-scale.md); DSG "
             "gamma_t = 1000 / (1000 + t), FOGD eta 3e-5 (least holdout error, last 20% of the training rows); the "
             "paper gives no number",
    ),
]


@dataclasses.dataclass
class ScaleOutcome:
    """What one at-scale setting gave: ours, the paper's, baselines, wall time and throughput."""

    setting: ScaleSetting
    rows: int
    ours: float | None = None
    runs: dict = dataclasses.field(default_factory=dict)
    baselines: dict = dataclasses.field(default_factory=dict)
    seconds: dict = dataclasses.field(default_factory=dict)
    skipped: str | None = None

    def to_dict(self) -> dict:
        return {"key": self.setting.key, "paper": self.setting.paper, "metric": self.setting.metric, "rows": self.rows,
                "ours": self.ours, "runs": self.runs, "baselines": self.baselines, "seconds": self.seconds, "skipped": self.skipped}


def scale_steps(setting: ScaleSetting, data_root: str, work: str, rows: int | None = None,
                test_rows: int | None = None) -> list[tuple[str, list[str]]]:
    """The setting's steps with the placeholders filled: ``(cli, argv)`` each."""
    rows = setting.rows if rows is None else int(rows)
    test_rows = setting.test_rows if test_rows is None else int(test_rows)
    values = {"mnist": os.path.join(data_root, "mnist"), "cep": os.path.join(data_root, "cep"), "work": work, "rows": str(rows),
              "test_rows": str(test_rows), "test_stop": str(24_000 + test_rows), "block_2p16": str(_block_for(2**16, rows)),
              "block_mol": str(_block_for(2**16, rows, batch=64, largest=2**11))}
    return [(step[0], [arg.format(**values) for arg in step[1:]]) for step in setting.steps]


def _block_for(features: int, rows: int, batch: int = 1024, largest: int = 2**12, shards: int = _SHARDS) -> int:
    """Even DSG block size giving about ``features`` distinct features after ``rows`` rows (at most ``largest``).

    Each of the ``shards`` shards learns ``rows / shards`` rows in mini-batches of ``batch``, drawing
    feature blocks 0, 1, ... from the same seed, so the merged model holds one shard's blocks:
    ``rows / (shards * batch)`` of them.
    """
    blocks = max(1, rows // (shards * batch))
    return min(largest, max(2, 2 * round(features / blocks / 2)))


def _data_missing(setting: ScaleSetting, data_root: str) -> str | None:
    needs = [os.path.join(data_root, "mnist", "t10k-images-idx3-ubyte.gz")] if "mnist" in setting.key else \
        [os.path.join(data_root, "cep", "cep-processed.csv")]
    missing = [p for p in needs if not os.path.exists(p)]
    return f"data not found: {', '.join(missing)} (see ../shared/data/README.md)" if missing else None


def _train_outputs(steps) -> list[str]:
    return [argv[argv.index("--output") + 1] for cli, argv in steps if cli == "train"]


def _run_summary(directory: str, metric: str) -> dict:
    with open(os.path.join(directory, "metrics.json")) as f:
        m = json.load(f)
    test = m["test"]
    out = {"rows": m["rows"]["trained"], "wall_seconds": m["timing"]["wall_seconds"], "rows_per_second": m["timing"]["rows_per_second"],
           "learner": m["learner"]["learner"], "task": m["learner"]["task"], "diverged": m.get("diverged") is not None,
           # The test rows' constant baseline of the headline metric and the verdict (absent from an older metrics.json).
           "baseline": test.get("baseline"), "beats_baseline": test.get("beats_baseline"), "one_class": test.get("one_class", False)}
    if metric == "test_mistake_rate":
        out["test_mistake_rate"] = test["mistake_rate"]
    else:
        out["test_mae"], out["test_rmse"] = test["mae"], math.sqrt(test["mse"])
    return out


def run_scale_setting(setting: ScaleSetting, data_root: str, work: str, run_cli: Callable[[str, list[str]], None],
                      rows: int | None = None, test_rows: int | None = None) -> ScaleOutcome:
    """Run the steps of ``setting`` (``run_cli(cli, argv)`` each) in ``work``; read the results."""
    rows = setting.rows if rows is None else int(rows)
    outcome = ScaleOutcome(setting, rows)
    outcome.skipped = _data_missing(setting, data_root)
    if outcome.skipped:
        return outcome
    os.makedirs(work, exist_ok=True)
    steps = scale_steps(setting, data_root, work, rows, test_rows)
    for i, (cli, argv) in enumerate(steps):
        started = time.perf_counter()
        run_cli(cli, argv)
        outcome.seconds[f"{i}:{cli} {argv[0] if cli == 'prepare' else os.path.basename(argv[-1])}"] = round(time.perf_counter() - started, 1)
    for directory in _train_outputs(steps):
        outcome.runs[os.path.basename(directory)] = _run_summary(directory, setting.metric)
    first = outcome.runs[os.path.basename(_train_outputs(steps)[0])]
    outcome.ours = first[setting.metric]
    if setting.regression_split:
        train, test = (p.format(work=work) for p in setting.regression_split)
        outcome.baselines = regression_baselines(train, test)
    return outcome


def scale_table(outcomes: list[ScaleOutcome]) -> str:
    """A Markdown table: each run's test metric, wall time and rows/s, the paper's number."""
    lines = ["| setting | run | rows | test | paper | wall s | rows/s |", "|---|---|---|---|---|---|---|"]
    for o in outcomes:
        if o.skipped:
            lines.append(f"| {o.setting.key} | - | - | skipped: {o.skipped} | | | |")
            continue
        for name, run in o.runs.items():
            test = (f"{run['test_mistake_rate']:.2%}" if "test_mistake_rate" in run
                    else f"MAE {run['test_mae']:.3f}, RMSE {run['test_rmse']:.3f}") + _run_flags(run)
            paper = "" if math.isnan(o.setting.paper) else (f"{o.setting.paper:.2%}" if o.setting.metric == "test_mistake_rate" else str(o.setting.paper))
            lines.append(f"| {o.setting.key} | {name} | {run['rows']:,} | {test} | {paper} | {run['wall_seconds']:.1f} | {run['rows_per_second']:,.0f} |")
        for name, b in o.baselines.items():
            if isinstance(b, dict):
                lines.append(f"| {o.setting.key} | {name} | {o.baselines['n_train']:,} | MAE {b['mae']:.3f}, RMSE {b['rmse']:.3f} | | | |")
    return "\n".join(lines)


def _run_flags(run: dict) -> str:
    """The test cell's constant baseline and flags: `` (majority class 11.35%) **no better than the majority class**``."""
    baseline = run.get("baseline") or {}
    text = "".join(f" ({baseline_name(key)} {value:.2%})" if key == "mistake_rate" else f" ({baseline_name(key)} MSE {value:.4g})"
                   for key, value in baseline.items() if isinstance(value, (int, float)) and math.isfinite(value))
    flags = ["diverged"] if run.get("diverged") else []
    if not flags and run.get("beats_baseline") is False:
        flags.append(NOT_BETTER.format(baseline_name(run.get("task") or "binary")))
    if run.get("one_class"):
        flags.append("one class for every row")
    return text + (f" **{'; '.join(flags)}**" if flags else "")


def scale_lines() -> list[str]:
    """One line per at-scale setting (for ``reproduce --list``)."""
    return [f"{s.key}: {s.source}; {s.rows:,} rows (slice {s.slice_rows:,}); through pipelines.train, 2 shards; {s.note}"
            for s in SCALE_SETTINGS]
