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
:data:`okl_experiments.data.DATASETS` (each with its conversion and source); ``data_paths``
(``--data NAME=PATH``) points one at a user's copy, and a setting whose data is missing is
skipped with where to get it. :data:`SPEC_ROWS_WITHOUT_SETTING` lists the spec tables' rows
that have no setting, and why.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from typing import Any

from okl_core.evaluation import beats_baseline
from okl_core.learners.multikernel import OKS_DICTIONARY, OMKL_DICTIONARY
from okl_core.registry import learner_class, learner_names
from okl_core.reporting import baseline_name
from okl_experiments.data import DATASETS, available, real_source
from okl_experiments.grid import Choice, SearchSpace
from okl_experiments.metrics import experiment_metric
from okl_experiments.runs import run_seed
from okl_experiments.sweep import Point, SweepSettings, baseline_flag, make_points, sweep
from okl_experiments.text import markdown_table, mean_std_text, percent, write_json, write_text

__all__ = ["DEFAULT_DATA_ROOT", "Setting", "SETTINGS", "SPEC_ROWS_WITHOUT_SETTING", "Outcome", "RunProtocol", "parse_data_paths",
           "check_recipes", "run_setting", "reproduce", "table", "settings_lines", "recipe_lines", "write_outcomes"]

DEFAULT_DATA_ROOT = os.path.join("..", "shared", "data")
ORDERS = ("shuffle", "file")


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
        The paper's number (a fraction for error rates) and its std (None if not given);
        ``paper`` is NaN for a setting of a figure that carries no number (PKAWV).
    source : str
        Where the number is (paper, table).
    runs : int
        Runs by default: the paper's count of random permutations (or, for a setting in file
        order, of random-feature draws).
    order : {'shuffle', 'file'}
        ``shuffle``: run ``r`` on the ``r``-th random permutation of the rows; ``file``: every
        run in file order (a time series, or a paper that permutes nothing).
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
    order: str = "shuffle"

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"setting {self.key}: order must be one of {ORDERS}, got {self.order!r}")
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
            "Li & Liao 2022, Table 2", paper_std=0.0012, runs=10, tolerance=0.015,
            note="6 Gaussians 2^-2..2^3; binary features as distributed (within [-1, 1])"),
    Setting("ioks-a9a", "ioks", "a9a", {"loss": "logistic", "horizon": "n"}, "online_mistake_rate", 0.1746,
            "Li & Liao 2022, Table 2", paper_std=0.0012, runs=10, tolerance=0.015),
    Setting("oks_pp-a9a", "oks_pp", "a9a", {"loss": "logistic"}, "online_mistake_rate", 0.1657, "Li & Liao 2022, Table 2",
            paper_std=0.0031, runs=10, tolerance=0.015),
    Setting("rf_oks_pp-a9a", "rf_oks_pp", "a9a", {"loss": "logistic", "n_components": 400}, "online_mistake_rate", 0.1728,
            "Li & Liao 2022, Table 2", paper_std=0.0029, runs=10, tolerance=0.015),
]
"""The reference numbers okl reproduces (spec/fogd_nogd.md, dsg.md, oks.md, omkl_gf.md, pkawv.md).

A row is data only: a learner added later needs a row here, no code.
"""


# -- issue 19 item 4: every other row of the spec tables (data the user points at with --data) --
def _fogd_nogd_rows() -> list[Setting]:
    """Lu et al. 2016, Tables 5, 7 and 9: FOGD, NOGD and OGD (no budget) on every data set."""
    rows = []
    src = "Lu et al. 2016, Table {}"
    ogd: float | None  # the OGD column: missing for some multiclass and regression sets
    binary = {"german": (29.5, 0.5, 29.9, 0.7, 30.4, 0.8), "spambase": (22.0, 0.1, 26.9, 1.0, 29.1, 0.4),
              "w7a": (2.96, 0.10, 2.75, 0.03, 2.98, 0.01), "w8a": (2.81, 0.01, 2.43, 0.03, 2.92, 0.03),
              "ijcnn1": (9.52, 0.01, 9.06, 0.05, 9.55, 0.01), "codrna": (9.7, 0.1, 10.3, 0.1, 13.8, 2.1),
              "kddcup08": (0.52, None, 0.71, None, 0.59, None)}
    for data, (ogd, ogd_s, fogd, fogd_s, nogd, nogd_s) in binary.items():
        rows += [Setting(f"fogd-{data}", "fogd", data, {"n_components": 400, "sigma": 8.0, "eta": 0.002, "scaled": False},
                         "online_mistake_rate", fogd / 100, src.format(5), paper_std=_pct(fogd_s), runs=20),
                 Setting(f"nogd-{data}", "nogd", data, {"budget": 100, "rank": 20, "sigma": 8.0, "eta": 0.2},
                         "online_mistake_rate", nogd / 100, src.format(5), paper_std=_pct(nogd_s), runs=20),
                 Setting(f"kernel_ogd-{data}", "kernel_ogd", data, {"sigma": 8.0, "eta": 0.2},
                         "online_mistake_rate", ogd / 100, src.format(5), paper_std=_pct(ogd_s), runs=20,
                         note="OGD without a budget (the paper's reference column)")]
    multiclass = {"dna": (200, 16.1, None, 20.8, 0.7, 20.7, 0.9), "satimage": (200, 23.6, None, 29.5, None, 23.7, None),
                  "usps": (200, 6.7, None, 10.1, None, 9.0, None), "letter": (200, 71.2, None, 71.5, None, 71.5, None),
                  "covtype": (100, None, None, 40.4, 0.1, 41.0, 0.6), "poker": (100, None, None, 52.6, None, 50.3, None)}
    for data, (B, ogd, ogd_s, fogd, fogd_s, nogd, nogd_s) in multiclass.items():
        rows += [Setting(f"mfogd-{data}", "mfogd", data, {"n_components": 4 * B, "sigma": 8.0, "eta": 0.005, "scaled": False},
                         "online_mistake_rate", fogd / 100, src.format(7), paper_std=_pct(fogd_s), runs=20),
                 Setting(f"mnogd-{data}", "mnogd", data, {"budget": B, "rank": B // 5, "sigma": 8.0, "eta": 0.5},
                         "online_mistake_rate", nogd / 100, src.format(7), paper_std=_pct(nogd_s), runs=20)]
        if ogd is not None:
            rows.append(Setting(f"mkernel_ogd-{data}", "mkernel_ogd", data, {"sigma": 8.0, "eta": 0.5}, "online_mistake_rate",
                                ogd / 100, src.format(7), runs=20, note="OGD without a budget"))
    rows.append(Setting("mkernel_ogd-mnist", "mkernel_ogd", "mnist-test", {"sigma": 8.0, "eta": 0.5}, "online_mistake_rate",
                        0.107, src.format(7), paper_std=0.002, runs=20, note="OGD without a budget; pixels / 255"))
    regression = {"housing": (0.04017, 0.04009, 0.04063), "abalone": (0.01137, 0.01169, 0.01138),
                  "cpusmall": (0.02508, 0.02577, 0.02559), "cadata": (0.03976, 0.04097, 0.03983),
                  "casp": (None, 0.08021, 0.07844), "slice": (None, 0.00726, 0.02636), "year": (None, 0.01427, 0.01519)}
    for data, (ogd, fogd, nogd) in regression.items():
        rows += [Setting(f"fogd_r-{data}", "fogd_r", data, {"n_components": 450, "sigma": 8.0, "eta": 6e-4, "eps": 0.1,
                                                           "scaled": False},
                         "online_mse", fogd, src.format(9), runs=20, note="features and target min-max to [0, 1]"),
                 Setting(f"nogd_r-{data}", "nogd_r", data, {"budget": 30, "rank": 6, "sigma": 8.0, "eta": 0.1, "eps": 0.1},
                         "online_mse", nogd, src.format(9), runs=20, note="features and target min-max to [0, 1]")]
        if ogd is not None:
            rows.append(Setting(f"kernel_ogd_r-{data}", "kernel_ogd_r", data, {"sigma": 8.0, "eta": 0.1, "eps": 0.1},
                                "online_mse", ogd, src.format(9), runs=20, note="OGD without a budget"))
    rows += [Setting("fogd-w8a-batch", "fogd", "w8a-train", {"n_components": 4000, "sigma": 8.0, "eta": 0.0002, "scaled": False},
                     "test_mistake_rate", 1 - 0.9793, "Lu et al. 2016, Table 3 (accuracy 97.93%)", test="w8a.t", runs=5),
             Setting("nogd-w8a-batch", "nogd", "w8a-train", {"budget": 1000, "rank": 200, "sigma": 8.0, "eta": 0.2},
                     "test_mistake_rate", 1 - 0.9836, "Lu et al. 2016, Table 3 (accuracy 98.36%)", test="w8a.t", runs=5)]
    return rows


def _pct(value: float | None) -> float | None:
    return None if value is None else value / 100


def _oks_rows() -> list[Setting]:
    """Li & Liao 2022, Table 2 (classification) and the regression numbers of spec/oks.md."""
    rows = []
    table2 = {"phishing": ((13.80, 0.34), (13.25, 0.28), (7.80, 0.49), (9.15, 0.56)),
              "magic04": ((22.23, 0.22), (21.50, 0.18), (17.88, 0.57), (18.41, 0.35)),
              "susy-20k": ((32.98, 0.66), (31.75, 0.30), (27.84, 0.70), (28.93, 0.96))}
    for data, numbers in table2.items():
        columns: tuple[tuple[str, dict[str, Any]], ...] = (
            ("oks", {"horizon": "n"}), ("ioks", {"horizon": "n"}), ("oks_pp", {}), ("rf_oks_pp", {"n_components": 400}))
        for (learner, params), (mean, std) in zip(columns, numbers):
            rows.append(Setting(f"{learner}-{data}", learner, data, {"loss": "logistic", **params}, "online_mistake_rate",
                                mean / 100, "Li & Liao 2022, Table 2", paper_std=std / 100, runs=10, tolerance=0.015,
                                note="features min-max to [-1, 1]"))
    regression = [("oks", "elevators", "square", 0.0068), ("oks_pp", "elevators", "square", 0.0046),
                  ("oks", "bank", "square", 0.0240), ("oks_pp", "bank", "square", 0.0205),
                  ("oks_pp", "ailerons", "square", 0.0166), ("oks_pp", "hardware", "square", 0.0008),
                  ("rf_oks_pp", "elevators", "square", 0.0051), ("rf_oks_pp", "hardware", "square", 0.0009),
                  ("oks", "elevators", "absolute", 0.0507), ("ioks", "elevators", "absolute", 0.0492),
                  ("oks", "bank", "absolute", 0.0961), ("ioks", "bank", "absolute", 0.0961)]
    for learner, data, loss, paper in regression:
        params = {"loss": loss, **({"horizon": "n"} if learner in ("oks", "ioks") else {}),
                  **({"n_components": 400} if learner == "rf_oks_pp" else {})}
        rows.append(Setting(f"{learner}-{data}-{loss}", learner, data, params, "online_mse" if loss == "square" else "online_mae",
                            paper, "Li & Liao 2022, regression (spec/oks.md)", runs=10, tolerance=paper / 2,
                            note="features to [-1, 1], target to [0, 1]"))
    return rows


def _omkl_rows() -> list[Setting]:
    """Ghari & Shen 2020, Tables 1-5 (J = 1): Raker and OMKL-GF for M = 1, 7, 10, 17; MSE x 1e-3 in the paper."""
    rows = []
    table = {"airquality": (4.7, 8.1, 4.2, 3.9, 4.1), "istanbul": (11.3, 61.9, 13.3, 12.2, 11.3),
             "twitter": (5.3, 16.5, 5.3, 4.7, 4.6), "tomshardware": (4.6, 12.3, 3.7, 3.5, 3.7),
             "naval": (1.4, 20.1, None, 1.4, None)}
    for data, (raker, *gf) in table.items():
        src = f"Ghari & Shen 2020, Table {list(table).index(data) + 1}"
        rows.append(Setting(f"raker-{data}", "raker", data, {}, "online_mse", raker / 1000, src, runs=50, order="file",
                            tolerance=raker / 2000, note="features and target to [0, 1]; file order, 50 feature draws"))
        for M, value in zip((1, 7, 10, 17), gf):
            if value is not None:
                rows.append(Setting(f"omkl_gf-m{M}-{data}", "omkl_gf", data,
                                    {"draws_per_node": M, "selective_nodes": 1, "freeze_below": 1e-4, "freeze_on": "mse"},
                                    "online_mse", value / 1000, src, runs=50, order="file", tolerance=value / 2000,
                                    note="freeze rule on the running MSE (freeze_on='mse'); features and target to [0, 1]; "
                                         "file order, 50 feature draws" + ("; one kernel per row: the widest spread across draws"
                                                                           if M == 1 else "")))
    return rows


def _pkawv_dsg_rows() -> list[Setting]:
    """Jezequel et al. 2019 (figures: SUSY's FALKON error is the one number) and Dai et al. 2014's other rows."""
    rows = [Setting("pkawv_taylor-susy", "pkawv_taylor", "susy-1m", {"degree": 2, "sigma": 4.0, "lam": 1.0, "ordering": "krr",
                                                                    "task": "binary"},
                    "online_mistake_rate", 0.196, "Jezequel et al. 2019, Sec. 5 (SUSY, FALKON's error)", runs=1,
                    tolerance=0.02, note="inputs to [-1, 1]; the figure's claim: M = 2 reaches FALKON's 19.6%")]
    for data, metric in (("casp-pm1", "online_mse"), ("ijcnn1-pm1", "online_mistake_rate"), ("codrna-pm1", "online_mistake_rate")):
        task = {"task": "binary"} if metric == "online_mistake_rate" else {}
        for learner, params in (("pkawv_taylor", {"degree": 3, "sigma": 1.0, "lam": 1.0, "ordering": "krr", **task}),
                                ("pkawv_nystrom", {"sigma": 1.0, "lam": 1.0, "mu": 1.0, "beta": 1.0, "kors_eps": 0.5,
                                                   "ordering": "krr", **task})):
            rows.append(Setting(f"{learner}-{data.removesuffix('-pm1')}", learner, data, params, metric, math.nan,
                                "Jezequel et al. 2019, Figure 2 (no number in the text)", runs=1,
                                note="inputs (and outputs) to [-1, 1]; a curve to compare with the figure"))
    rows += [Setting("dsg-covtype", "dsg", "covtype-binary", {"loss": "hinge", "sigma": "median", "nu": "1/n",
                                                              "batch_size": 1024, "block_size": 256},
                     "online_mistake_rate", 0.15, "Dai et al. 2014, Sec. 6 (Forest, ~15%)", runs=1, tolerance=0.02,
                     note="the paper's test error, here the online error of one pass"),
             Setting("dsg-qm7", "dsg", "qm7", {"loss": "square", "sigma": 60.0, "nu": "1/n", "batch_size": 512,
                                               "block_size": 2048},
                     "online_mae", 2.97, "Dai et al. 2014, Sec. 6 (QuantumMachine, MAE kcal/mol)", runs=1, tolerance=1.0,
                     note="the paper: batch 50000, 2^20 features")]
    return rows


SETTINGS.append(Setting("kernel_ogd-a9a", "kernel_ogd", "a9a+a9a.t", {"sigma": 8.0, "eta": 0.2}, "online_mistake_rate", 0.163,
                        "Lu et al. 2016, Table 5", paper_std=0.001, runs=20, note="OGD without a budget"))
SETTINGS += _fogd_nogd_rows() + _oks_rows() + _omkl_rows() + _pkawv_dsg_rows() + [
    # issue 19 item 5: the gaps, each with the setting that shows it (bench/repro_gaps.py has the ablations).
    Setting("mfogd-mnist-d800", "mfogd", "mnist-test", {"n_components": 800, "sigma": 8.0, "scaled": False},
            "online_mistake_rate", 0.118, "Lu et al. 2016, Table 7", paper_std=0.002, runs=20, tolerance=0.005,
            tune={"eta": [0.002, 0.001, 0.0005, 0.0002]}, tuned={"eta": 0.0005},
            note="D = rho_f B = 4 x 200 (Table 7), eta on a finer grid than the paper's (0.0005 is between its points)"),
    Setting("nogd-a9a-k100", "nogd", "a9a+a9a.t", {"budget": 100, "rank": 100, "sigma": 8.0, "eta": 0.2},
            "online_mistake_rate", 0.174, "Lu et al. 2016, Table 5", paper_std=0.002, runs=20, tolerance=0.015,
            note="k = B instead of 0.2 B: every landmark direction kept"),
    Setting("rf_oks_pp-code-a9a", "rf_oks_pp", "a9a", {"loss": "logistic", "n_components": 400, "tuning": "released_code"},
            "online_mistake_rate", 0.1728, "Li & Liao 2022, Table 2", paper_std=0.0029, runs=10, tolerance=0.01,
            note="the released logistic script's constant (overwritten inside its loop): far less exploration"),
    # IOKS: the spec's c = l / l_max without okl's cap at 1 (loss_cap=False), beside the capped default rows.
    Setting("ioks-nocap-a9a", "ioks", "a9a", {"loss": "logistic", "horizon": "n", "loss_cap": False}, "online_mistake_rate",
            0.1746, "Li & Liao 2022, Table 2", paper_std=0.0012, runs=10, tolerance=0.015,
            note="loss_cap=False: the scaled loss c = l / l_max uncapped, as the algorithm writes it"),
    Setting("ioks-nocap-magic04", "ioks", "magic04", {"loss": "logistic", "horizon": "n", "loss_cap": False},
            "online_mistake_rate", 0.2150, "Li & Liao 2022, Table 2", paper_std=0.0018, runs=10, tolerance=0.015,
            note="loss_cap=False: the scaled loss c = l / l_max uncapped, as the algorithm writes it"),
]

PAPER_VALUES: dict[str, dict[str, Any]] = {
    "dsg": {"theta": 1.0, "step_offset": 0.0},
    "mbogd": {"lam": 0.05},
    **{name: {"kernels": OKS_DICTIONARY} for name in ("oks", "oks_pp", "ioks", "rf_oks_pp", "rf_ioks")},
    **{name: {"kernels": OMKL_DICTIONARY} for name in ("raker", "omkl_gf")},
}
"""What the settings above took from okl's defaults when they were written and the defaults
since changed to values that learn on any data (the median-scaled dictionaries, DSG's
decaying step, BOGD's ``lam`` of 1 / (eta B) at its larger budget): given explicitly, so that
the reproductions run the papers' settings."""


def _with_paper_values(setting: Setting) -> Setting:
    return dataclasses.replace(setting, params={**PAPER_VALUES.get(setting.learner, {}), **setting.params})


SETTINGS = [_with_paper_values(setting) for setting in SETTINGS]

SPEC_ROWS_WITHOUT_SETTING = {
    ("oks.md", "Raker"): "okl's raker is the regression learner of spec/omkl_gf.md; the OKS table's classification Raker is not built",
    ("omkl_gf.md", "OMKR"): "OMKR (Sahoo et al. 2014, no random features) is not built",
    ("dsg.md", "synthetic"): "no number (the paper shows the O(1/t) convergence in a figure)",
    ("dsg.md", "MNIST-8M 8 vs 6"): "issue 19 items 1-2 (DSG on MNIST-8M)",
    ("dsg.md", "MNIST-8M"): "issue 19 items 1-2 (DSG on MNIST-8M)",
    ("dsg.md", "MolecularSpace"): "issue 19 item 3",
}
"""Rows of the spec tables that have no setting here, and why (checked against the spec by the tests)."""


@dataclasses.dataclass
class Outcome:
    """One setting's result (or why it was skipped)."""

    setting: Setting
    status: str  # "ok", "skipped", "error", "diverged" (okl_core.divergence: NaN/inf, or a loss that exploded)
    reason: str = ""
    mean: float = math.nan
    std: float = math.nan
    runs: int = 0
    params: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    curve_n: list = dataclasses.field(default_factory=list)
    curve_value: list = dataclasses.field(default_factory=list)
    data_paths: dict = dataclasses.field(default_factory=dict)  # name -> {"path", "rows"} of each --data it used
    baseline: float = math.nan  # the metric of the best constant answer over the same rows (majority class, mean, median)
    one_class: bool = False  # the model answered one class for every row (of a run)
    seeds: list = dataclasses.field(default_factory=list)  # the learner seed of each run (empty: the learner takes none)
    order: str = ""  # "shuffle" (run r on permutation r) or "file"

    @property
    def diff(self) -> float:
        return self.mean - self.setting.paper

    @property
    def beats_baseline(self) -> bool | None:
        """Whether ``mean`` is clearly better than ``baseline`` (:func:`okl_core.evaluation.beats_baseline`); None unless ``ok``."""
        return beats_baseline(self.mean, self.baseline) if self.status == "ok" else None

    @property
    def flag(self) -> str:
        """Why an ``ok`` result is not to be read as a plain number (empty when it can be):
        :func:`okl_experiments.sweep.baseline_flag` of its row."""
        metric = self.setting.metric
        row = {"status": self.status, f"{metric}_mean": self.mean, "one_class": self.one_class,
               f"{metric}_baseline": None if math.isnan(self.baseline) else self.baseline}
        return baseline_flag(row, metric) or ""

    def to_dict(self) -> dict:
        s = self.setting
        return {"key": s.key, "learner": s.learner, "data": s.data, "test": s.test, "metric": s.metric, "status": self.status,
                "reason": self.reason, "ours_mean": self.mean, "ours_std": self.std, "runs": self.runs, "paper": s.paper,
                "paper_std": s.paper_std, "diff": self.diff if self.status == "ok" else None, "source": s.source,
                "params": self.params, "seconds": self.seconds, "note": s.note, "baseline": self.baseline,
                "beats_baseline": self.beats_baseline, "one_class": self.one_class, "flag": self.flag,
                "curve": {"n": self.curve_n, "value": self.curve_value}, "data_paths": self.data_paths,
                "seeds": self.seeds, "order": self.order}

    def data_note(self) -> str:
        """The ``--data`` copies this setting used, for the table: ``--data a9a=PATH (2,000 rows)``."""
        return "; ".join(f"--data {name}={d['path']} ({d['rows']:,} rows)" for name, d in sorted(self.data_paths.items()))


def _skip_reason(setting: Setting, data_root: str, data_paths: dict[str, str]) -> str | None:
    if setting.learner not in learner_names():
        return f"learner {setting.learner!r} not in okl_core.learner_names() yet"
    for name in filter(None, (setting.data, setting.test)):
        if not available(name, data_root, data_paths.get(name)):
            spec = DATASETS[name]
            where = (f"--data {name}={data_paths[name]} is neither an okl data set nor its files" if name in data_paths else
                     f"not found under {data_root} ({', '.join(spec.files)}; or --data {name}=PATH)" if spec.files else
                     f"no okl data set given (--data {name}=PATH)")
            return f"data set {name!r} {where}; get it from {spec.source}"
    return None


def parse_data_paths(items: list[str] | None) -> dict[str, str]:
    """``NAME=PATH`` items of ``--data`` as a dict; a clear error for an unknown name or a bad item."""
    paths: dict[str, str] = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise ValueError(f"--data {item!r}: expected NAME=PATH")
        if name not in DATASETS:
            raise ValueError(f"--data {item!r}: unknown data set {name!r} (known: {', '.join(sorted(DATASETS))})")
        paths[name] = path
    return paths


def check_data_paths(data_paths: dict[str, str], settings: list[Setting]) -> None:
    """Refuse a ``--data`` the user gave that would be ignored or could only skip its settings.

    Raises
    ------
    ValueError
        A data set no selected setting uses, or a path (of comma-separated files, any) that does not exist.
    """
    used = {name for s in settings for name in (s.data, s.test) if name}
    for name, path in sorted(data_paths.items()):
        if name not in used:
            raise ValueError(f"--data {name}={path}: no selected setting uses data set {name!r} (they use {', '.join(sorted(used))})")
        missing = [p for p in path.split(",") if not os.path.exists(p)]
        if missing:
            raise ValueError(f"--data {name}={path}: {missing[0]} does not exist")


@dataclasses.dataclass(frozen=True)
class RunProtocol:
    """How a setting's runs differ, as the papers ran them (the defaults) or as okl <= 0.1 did.

    Attributes
    ----------
    same_features : bool
        False (default): run ``r`` of a learner that takes a ``seed`` gets its own,
        :func:`okl_experiments.runs.run_seed` (base seed + r), so random features (and
        sampled kernels) are redrawn per permutation, as the papers' runs were; True: every
        run uses the base seed.
    shuffle_all : bool
        True: shuffle the rows of ``order='file'`` settings too.
    """

    same_features: bool = False
    shuffle_all: bool = False

    def shuffle_seed(self, setting: Setting) -> int | None:
        """The sweep's ``shuffle_seed``: 0 (run r on permutation r) or None (file order)."""
        return None if setting.order == "file" and not self.shuffle_all else 0

    def seeds(self, setting: Setting, params: dict, runs: int) -> list[int]:
        """The learner seed of each run; empty for a learner without a ``seed``."""
        if not _takes_seed(setting.learner):
            return []
        base = int(params.get("seed", 0))
        return [base if self.same_features else run_seed(base, r) for r in range(runs)]


def _takes_seed(learner: str) -> bool:
    return "seed" in {f.name for f in dataclasses.fields(learner_class(learner).config_class)}


def check_recipes(data_paths: dict[str, str], data_root: str) -> None:
    """Read every ``--data NAME=PATH`` with its recipe before anything runs.

    Raises
    ------
    ValueError
        One line naming the flag and what the recipe expected: a file of the wrong width, labels in
        another coding, a prepared data set with other features or task.
    """
    for name, path in sorted(data_paths.items()):
        try:
            real_source(name, data_root, path)
        except (ValueError, OSError) as err:
            line = str(err).splitlines()[0] if str(err) else type(err).__name__
            if "expected" not in line and "recipe wants" not in line:  # say what the recipe wants (okl reproduce --list)
                line += f"; the {name} recipe wants {DATASETS[name].expected_shape()}"
            raise ValueError(line if line.startswith("--data ") else f"--data {name}={path}: {line}") from None


def run_setting(setting: Setting, data_root: str, client=None, runs: int | None = None, out_dir: str | None = None,
                progress=None, use_tuned: bool = False, data_paths: dict[str, str] | None = None,
                protocol: RunProtocol = RunProtocol()) -> Outcome:
    """Run one setting (tuning first if it has a grid); never raises for a failing learner.

    ``use_tuned`` skips the tuning and uses the setting's recorded ``tuned`` values.
    ``data_paths`` (``--data NAME=PATH``) points data sets at a user's copy
    (:func:`okl_experiments.data.real_source`). ``protocol``: per-run seeds and row order
    (:class:`RunProtocol`); the outcome records each run's seed and the order.
    """
    data_paths = data_paths or {}
    reason = _skip_reason(setting, data_root, data_paths)
    if reason:
        return Outcome(setting, "skipped", reason)
    started = time.perf_counter()
    try:
        train = real_source(setting.data, data_root, data_paths.get(setting.data))
        test = real_source(setting.test, data_root, data_paths.get(setting.test)) if setting.test else None
    except (ValueError, OSError) as err:  # a user's file that does not parse: this setting fails, the others run
        return Outcome(setting, "error", str(err), seconds=time.perf_counter() - started)
    used = {name: {"path": data_paths[name], "rows": source.n_rows}
            for name, source in ((setting.data, train), (setting.test, test)) if name in data_paths and source is not None}
    sub = (lambda name: os.path.join(out_dir, setting.key, name)) if out_dir else (lambda name: None)
    base, tune = setting.params, setting.tune
    order = "file" if protocol.shuffle_seed(setting) is None else "shuffle"
    if use_tuned and setting.tuned:
        base, tune = {**base, **setting.tuned}, None
    fixed = SearchSpace({k: Choice((v,)) for k, v in base.items() if k not in (tune or {})})
    try:
        if tune:
            space = SearchSpace({k: Choice(tuple(v)) for k, v in tune.items()})
            points = make_points(setting.learner, fixed.merged(space), train)
            tuned = sweep(SweepSettings(setting.learner, train, None, repeats=1, shuffle_seed=protocol.shuffle_seed(setting)),
                          points, out_dir=sub("tune"),
                          rank_by=setting.tune_metric, client=client, swept=space.swept, space=space.describe(), progress=progress)
            if tuned.best is None:
                errors = sorted({r["error"] for r in tuned.rows if r["error"]})
                return Outcome(setting, "error", f"every tuning point failed: {errors[:2]}")
            chosen = json.loads(min((r for r in tuned.rows if r["status"] == "ok"),
                                    key=lambda r: (r[f"{setting.tune_metric}_mean"], r["point"]))["params"])
        else:
            chosen = make_points(setting.learner, fixed, train)[0].params
        point = Point(0, {}, chosen)
        repeats = runs or setting.runs
        seeds = protocol.seeds(setting, chosen, repeats)
        final = sweep(SweepSettings(setting.learner, train, test, repeats=repeats, shuffle_seed=protocol.shuffle_seed(setting),
                                    reseed=bool(seeds) and not protocol.same_features),
                      [point], out_dir=sub("runs"), rank_by=setting.metric, client=client, progress=progress)
    except ValueError as err:  # a parameter the learner does not know, a task mismatch
        return Outcome(setting, "error", str(err), seconds=time.perf_counter() - started)
    row = final.rows[0]
    if row["status"] != "ok":  # "diverged" stays itself: a diverged setting is a result, not a failure of okl
        return Outcome(setting, "diverged" if row["status"] == "diverged" else "error", row["error"], params=chosen,
                       seconds=time.perf_counter() - started, data_paths=used, seeds=seeds, order=order)
    return Outcome(setting, "ok", mean=row[f"{setting.metric}_mean"], std=row[f"{setting.metric}_std"], runs=row["runs"],
                   params={k: v for k, v in chosen.items() if k not in ("n_inputs", "n_classes")},
                   seconds=time.perf_counter() - started, curve_n=row["curve_n"], curve_value=row["curve_value"], data_paths=used,
                   baseline=row[f"{setting.metric}_baseline"], one_class=row["one_class"], seeds=seeds, order=order)


def table(outcomes: list[Outcome]) -> str:
    """Markdown: ours next to the constant baseline of the same rows, the paper's number and the
    difference (error rates in percent and points), then a summary of the flagged settings.

    A result no better than the baseline (or of a model answering one class) is flagged in
    its ``ours`` cell (:attr:`Outcome.flag`), a diverged setting reads ``diverged``: neither is
    ever shown as a plain number.
    """
    head = ["setting", "learner", "data", "metric", "ours", "baseline", "runs", "paper", "diff", "time (s)", "source / note"]
    rows = []
    for o in outcomes:
        s = o.setting
        data = s.data + (f" -> {s.test}" if s.test else "")
        baseline = "" if math.isnan(o.baseline) else f"{_value(s.metric, o.baseline)} ({baseline_name(s.metric)})"
        if o.status == "ok":
            ours = _value(s.metric, o.mean, o.std) + (f" **{o.flag}**" if o.flag else "")
            rows.append([s.key, s.learner, data, s.metric, ours, baseline, str(o.runs), _paper(s),
                         "" if math.isnan(o.diff) else _value(s.metric, o.diff, sign=True), f"{o.seconds:.0f}",
                         "; ".join(filter(None, [s.source, s.note, o.data_note()]))])
        else:
            rows.append([s.key, s.learner, data, s.metric, o.status, baseline, "", _paper(s), "", "", "; ".join(filter(None, [o.reason, o.data_note()]))])
    return markdown_table(head, rows) + _flagged_summary(outcomes)


def _flagged_summary(outcomes: list[Outcome]) -> str:
    """Lines under the table naming the settings whose numbers must not be read as results."""
    lines = [f"- {o.setting.key}: {o.flag}" for o in outcomes if o.flag]
    lines += [f"- {o.setting.key}: diverged ({o.reason})" for o in outcomes if o.status == "diverged"]
    return ("\n\nFlagged settings (no better than the constant answer over the same rows, or diverged):\n" + "\n".join(lines)
            if lines else "")


def _paper(s: Setting) -> str:
    """The paper's number as the table shows it (``figure`` where the paper gives none)."""
    return "figure" if math.isnan(s.paper) else _value(s.metric, s.paper, s.paper_std)


def _value(metric: str, value: float, std: float | None = None, sign: bool = False) -> str:
    """Error rates in percent (two decimals), other metrics (MSE, MAE) as they are (five digits)."""
    if metric.endswith("mistake_rate"):
        return f"{100 * value:+.2f}" if sign else percent(value, std)
    return f"{value:+.5g}" if sign else mean_std_text(value, std, digits=5)


def settings_lines() -> list[str]:
    """One line per setting (key, learner, data, metric, the paper's number, runs and order, parameters,
    tuning grid), then each data set's recipe (:func:`recipe_lines`)."""
    settings = [f"{s.key:26s} {s.learner:13s} {s.data:14s} {s.metric:19s} paper {_paper(s):>14s}  "
                f"{s.runs} runs, {'file order' if s.order == 'file' else 'shuffled'}  "
                f"{json.dumps(s.params)}{'  tune ' + json.dumps(s.tune) if s.tune else ''}  [{s.source}]" for s in SETTINGS]
    return settings + ["", "data sets (--data NAME=PATH): the recipe of each"] + recipe_lines()


def recipe_lines() -> list[str]:
    """Each data set's recipe: task and shape, conversion, files, then what to supply, why, and where to get it."""
    lines = []
    for name, spec in DATASETS.items():
        lines += [f"{name:14s} {spec.task:10s} {spec.n_features} features, features {spec.feature_map}, "
                  f"target {spec.target_map}, files {', '.join(spec.files) or '(a prepared okl data set)'}",
                  f"    supply: {spec.supply}", f"    why:    {spec.why}", f"    source: {spec.source}"]
    return lines


def reproduce(keys: list[str] | None = None, data_root: str = DEFAULT_DATA_ROOT, client=None, runs: int | None = None,
              out_dir: str | None = None, progress=None, use_tuned: bool = False,
              data_paths: dict[str, str] | None = None, data_root_given: bool = False,
              protocol: RunProtocol = RunProtocol()) -> list[Outcome]:
    """Run the settings named in ``keys`` (keys or learner names; all when None) and return their outcomes.

    ``data_paths``: ``--data NAME=PATH`` (:func:`run_setting`), each read with its recipe first
    (:func:`check_recipes`). ``data_root_given``: the user named ``data_root``, so a missing one
    is an error, not every setting skipped. ``protocol``: :class:`RunProtocol`."""
    chosen = SETTINGS if not keys else [s for s in SETTINGS if s.key in keys or s.learner in keys]
    unknown = sorted(set(keys or ()) - {s.key for s in SETTINGS} - {s.learner for s in SETTINGS})
    if unknown:
        raise ValueError(f"--only: unknown setting(s) {unknown}; see --list")
    check_data_paths(data_paths or {}, chosen)
    check_recipes(data_paths or {}, data_root)
    needed = sorted({n for s in chosen for n in (s.data, s.test) if n and n not in (data_paths or {})})
    if data_root_given and needed and not os.path.isdir(data_root):
        raise ValueError(f"--data_root {data_root} is not a directory (it should hold {', '.join(needed)})")
    outcomes = []
    for setting in chosen:
        if progress is not None:
            print(f"== {setting.key}", file=progress, flush=True)
        outcomes.append(run_setting(setting, data_root, client=client, runs=runs, out_dir=out_dir, progress=progress,
                                    use_tuned=use_tuned, data_paths=data_paths, protocol=protocol))
    return outcomes


def write_outcomes(out_dir: str, outcomes: list[Outcome]) -> list[str]:
    """Write ``reproduce.md`` (:func:`table`) and ``reproduce.json`` in ``out_dir``; returns their paths."""
    return [write_text(os.path.join(out_dir, "reproduce.md"), table(outcomes)),
            write_json(os.path.join(out_dir, "reproduce.json"), [o.to_dict() for o in outcomes], indent=1, sort_keys=True, default=float)]
