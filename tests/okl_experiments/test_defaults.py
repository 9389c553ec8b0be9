"""Every registered learner's defaults learn: better than the majority class / the mean.

Parametrized over the registry: each learner, with every parameter at its default (only
what the data dictates given), on each data set of its task, measured as ``okl train``
measures (online metric over the training rows, test metric on held-out rows), must beat
:func:`okl_core.evaluation.constant_baseline` by :func:`okl_core.evaluation.beats_baseline`'s
margin. The few known exceptions are strict xfails with the reason: one that starts to
learn fails the test, so the list stays true.
"""

import functools
import json
import os
import pathlib
import subprocess
import sys

import pytest

import okl_core
from okl_core.derived import data_defaults
from okl_experiments import defaults as D
from okl_experiments.reproduction import SETTINGS
from tests.conftest import SHARED_DATA

_SHORT = "one pass over the first 3,000 rows; the full set learns (the slow table)"
KNOWN = {
    ("rf_ioks", "a9a"): _SHORT,
    ("rf_oks_pp", "csv"): _SHORT,
    ("forgetron_r", "csv"): _SHORT,
}
"""(learner, data set) -> why its defaults do not beat the baseline on the quick table."""

KNOWN_FULL: dict = {}
"""The same for the full table (:data:`okl_experiments.defaults.FULL_ROWS`)."""

_TASKS = {name: D.learner_task(name) for name in okl_core.learner_names()}


def _cases(known):
    for name in okl_core.learner_names():
        for data in D.DATA_SETS:
            if _TASKS[name] in D.DATA_TASKS[data]:
                marks = [pytest.mark.xfail(reason=known[name, data], strict=True)] if (name, data) in known else []
                yield pytest.param(name, data, marks=marks, id=f"{name}-{data}")


_DATA_ROOT = pathlib.Path(os.environ.get("OKL_SHARED_DATA", SHARED_DATA))


@functools.lru_cache(maxsize=None)
def _split(data, task, full=False):
    if data in ("a9a", "mnist") and not _DATA_ROOT.joinpath(data).exists():
        pytest.skip(f"real data not available: {_DATA_ROOT / data} is missing")
    return D.load_split(data, task, str(_DATA_ROOT), None if full else D.QUICK_ROWS[data])


def _check(name, data, full=False):
    result = D.run_default(name, _split(data, _TASKS[name], full))
    assert result.learns, (f"{name} on {data}: {result.metric} online {result.online:.4g} (baseline {result.online_baseline:.4g}), "
                           f"test {result.test:.4g} (baseline {result.test_baseline:.4g}) {result.error}")


@pytest.mark.parametrize("name, data", list(_cases(KNOWN)))
def test_defaults_beat_the_constant_baseline(name, data):
    _check(name, data)


@pytest.mark.slow
@pytest.mark.parametrize("name, data", list(_cases(KNOWN_FULL)))
def test_defaults_beat_the_constant_baseline_on_the_full_sets(name, data):
    _check(name, data, full=True)


def test_every_learner_is_measured_on_data_of_its_task():
    """Each learner meets at least the two generated sets (and a9a or MNIST for classification)."""
    for name, task in _TASKS.items():
        sets = [d for d in D.DATA_SETS if task in D.DATA_TASKS[d]]
        assert {"synthetic", "csv"} <= set(sets) and (task == "regression" or len(sets) == 3), (name, sets)


CHANGED = {"dsg": ("theta", "step_offset"), "bogd_r": ("removal", "lam"), "bogd": ("budget", "lam"), "mbogd": ("budget", "lam"),
           "norma_r": ("budget", "lam"), **{name: ("budget",) for name in ("bpa_s", "mbpa_s", "mrbp", "rbp_r")},
           **{name: ("budget",) for name in ("rbp", "forgetron", "mforgetron", "forgetron_r")}}
"""Defaults changed from the papers' values (besides the data defaults), by learner."""


def test_the_reproductions_and_figures_give_the_papers_values_explicitly():
    """A reproduction or a docs figure runs the paper's setting: none relies on a default that changed."""
    runs = [(s.key, s.learner, {**s.params, **(s.tuned or {})}) for s in SETTINGS]
    for spec in pathlib.Path(__file__).resolve().parents[2].joinpath("docs").glob("*_spec.json"):
        runs += [(f"{spec.name}: {r['label']}", r["learner"], r.get("params", {})) for r in json.loads(spec.read_text())["runs"]]
    assert len(runs) > 150
    for name, learner, params in runs:
        changed = [key for key in data_defaults(learner) if key != "horizon"] + list(CHANGED.get(learner, ()))
        missing = [key for key in changed if key not in params]
        assert not missing, f"{name} takes {missing} from {learner}'s defaults"


def test_the_csv_is_mixed_scale_and_prepared_as_okl_prepare_does(tmp_path):
    split = D.load_split("csv", "binary", rows=(500, 100))
    spread = split.X.std(axis=0)
    assert spread.max() / spread.min() > 1e5 and split.X.shape == (500, len(D.CSV_COLUMNS))
    assert set(split.y.tolist()) == {-1, 1} and split.X_test.shape == (100, len(D.CSV_COLUMNS))
    text = open(D.write_mixed_csv(str(tmp_path / "m.csv"), 3)).read().splitlines()
    assert text[0] == ",".join([*D.CSV_COLUMNS, "binary", "multiclass", "target"]) and len(text) == 4


def test_the_defaults_table_command(tmp_path):
    """``okl report defaults`` writes the table and the JSON of the results it measured."""
    out = tmp_path / "table"
    done = subprocess.run([sys.executable, "-m", "pipelines.okl", "report", "defaults", "--quick", "--learner", "fogd_r",
                           "--learner", "mkernel_ogd", "--data_root", str(tmp_path / "none"), "--output", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(out / "defaults.md"), str(out / "defaults.json")]
    results = json.loads((out / "defaults.json").read_text())
    assert sorted((r["learner"], r["data"]) for r in results["results"]) == [
        ("fogd_r", "csv"), ("fogd_r", "synthetic"), ("mkernel_ogd", "csv"), ("mkernel_ogd", "synthetic")]
    assert sorted(results["skipped"]) == ["mnist"]  # no binary learner asked for: a9a is not read
    fogd_r = next(r for r in results["results"] if r["learner"] == "fogd_r" and r["data"] == "synthetic")
    again = D.run_default("fogd_r", D.load_split("synthetic", "regression", rows=D.QUICK_ROWS["synthetic"]))
    assert (fogd_r["test"], fogd_r["online"]) == (again.test, again.online) and fogd_r["learns"]
    table = (out / "defaults.md").read_text()
    assert "| fogd_r | regression |" in table and "| mkernel_ogd | multiclass |" in table and "skipped mnist" in table
