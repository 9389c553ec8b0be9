"""The ``--data`` recipes: what each data set wants, refusals that say it, the airquality and spambase
readers, and the reproduction protocol (per-run seeds, file order) against exact references."""

import os
import subprocess
import sys

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.evaluation import metric_value, permuted, run_online
from okl_experiments import data as experiment_data
from okl_experiments.data import AIRQUALITY_FEATURES, AIRQUALITY_TARGET, DATASETS, min_max, read_airquality
from okl_experiments.reproduction import SETTINGS, RunProtocol, recipe_lines, run_setting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AIR_COLUMNS = ["Date", "Time", "CO(GT)", "PT08.S1(CO)", "NMHC(GT)", "C6H6(GT)", "PT08.S2(NMHC)", "NOx(GT)", "PT08.S3(NOx)",
               "NO2(GT)", "PT08.S4(NO2)", "PT08.S5(O3)", "T", "RH", "AH"]


@pytest.fixture(autouse=True)
def _fresh_reader_cache():
    experiment_data.load_real.cache_clear()
    yield
    experiment_data.load_real.cache_clear()


def _setting(key):
    return next(s for s in SETTINGS if s.key == key)


def _reproduce(*args):
    """``python -m pipelines.reproduce ARGS`` in a new process (the user's command line)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "pipelines.reproduce", "--scheduler", "serial", "--quiet", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def _error_line(done) -> str:
    assert done.returncode == 2 and done.stdout == ""  # refused before anything ran (a usage error)
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("WARNING:root:apitools")]  # Beam's import
    assert len(lines) == 1, done.stderr
    return lines[0]


def _write_spambase_csv(path, rows, n_features=57, labels=(0, 1), seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(0, 30, size=(rows, n_features)), 3)
    y = rng.choice(labels, size=rows)
    path.write_text("\n".join(",".join(f"{v:g}" for v in (*row, label)) for row, label in zip(X, y)) + "\n")
    return X, y


def _write_airquality(path, values, hours):
    """An AirQualityUCI.csv: ';'-separated, decimal commas, blank trailing columns and rows as UCI ships it."""
    lines = [";".join(AIR_COLUMNS) + ";;"]
    for r, (row, hour) in enumerate(zip(values, hours)):
        numbers = [f"{v:g}".replace(".", ",") for v in row]
        lines.append(";".join([f"{10 + r // 24:02d}/03/2004", f"{hour:02d}.00.00", *numbers]) + ";;")
    lines += [";" * 16] * 3
    path.write_text("\r\n".join(lines) + "\r\n")


def test_every_data_set_states_what_to_supply_and_why():
    for name, spec in DATASETS.items():
        assert spec.supply and spec.why, name
    text = "\n".join(recipe_lines())
    assert "raw (unscaled) features" in text and "C6H6(GT)" in text and "the hour of Time" in text
    assert DATASETS["spambase"].feature_map == "none"  # sigma = 8 on the features as UCI gives them
    assert DATASETS["airquality"].columns == AIRQUALITY_FEATURES + (AIRQUALITY_TARGET,)
    listed = subprocess.run([sys.executable, "-m", "pipelines.reproduce", "--list"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT, timeout=300)
    assert listed.returncode == 0 and "    supply: UCI spambase.data as distributed" in listed.stdout
    assert "raker-airquality" in listed.stdout and "50 runs, file order" in listed.stdout


def test_the_docs_table_names_every_data_set():
    with open(os.path.join(ROOT, "docs", "reproducing.md"), encoding="utf-8") as f:
        text = f.read()
    missing = [name for name in DATASETS if f"`{name}`" not in text]
    assert not missing, f"docs/reproducing.md has no recipe row for {missing}"


def test_spambase_with_minus_one_plus_one_labels_is_refused_naming_the_0_1_column(tmp_path):
    _write_spambase_csv(tmp_path / "spambase.data", 30, labels=(-1, 1))
    done = _reproduce("--only", "fogd-spambase", "--data", f"spambase={tmp_path / 'spambase.data'}")
    line = _error_line(done)
    assert f"error: --data spambase={tmp_path / 'spambase.data'}: data set 'spambase': labels [-1] not in its classes [0, 1]" in line
    assert line.endswith("the recipe wants the file's last column: 1 = spam, 0 = not spam")


def test_spambase_with_a_missing_column_is_refused_with_the_width_it_wants(tmp_path):
    _write_spambase_csv(tmp_path / "spambase.data", 30, n_features=56)
    line = _error_line(_reproduce("--only", "nogd-spambase", "--data", f"spambase={tmp_path / 'spambase.data'}"))
    assert line.endswith(f"{tmp_path / 'spambase.data'}: 57 columns, expected 58 (57 features, then the label)")


def test_airquality_with_12_features_is_refused_naming_the_13_columns_and_the_target(tmp_path):
    rng = np.random.default_rng(0)
    write_dataset(str(tmp_path / "air12"), rng.uniform(size=(40, 12)).astype(np.float32), rng.uniform(size=40), "regression")
    line = _error_line(_reproduce("--only", "raker-airquality", "--data", f"airquality={tmp_path / 'air12'}"))
    expected = ("regression with 12 features, expected regression with 13 features (CO(GT), PT08.S1(CO), NMHC(GT), "
                "PT08.S2(NMHC), NOx(GT), PT08.S3(NOx), NO2(GT), PT08.S4(NO2), PT08.S5(O3), T, RH, AH, hour) and target C6H6(GT)")
    assert line.endswith(f"--data airquality={tmp_path / 'air12'}: {expected}")


def test_a_libsvm_file_wider_than_the_recipe_is_refused_with_the_shape_it_wants(tmp_path):
    (tmp_path / "magic04.svm").write_text("1 1:0.5 2:0.3 11:0.2\n-1 1:0.1 3:0.4\n")
    line = _error_line(_reproduce("--only", "oks-magic04", "--data", f"magic04={tmp_path / 'magic04.svm'}"))
    assert line.endswith("line 1: feature index 11 exceeds n_features = 10; the magic04 recipe wants 10 features and "
                         "binary labels (+1 = g (gamma), -1 = h (hadron))")


def test_airquality_csv_with_other_columns_is_refused_naming_the_header_it_wants(tmp_path):
    (tmp_path / "air.csv").write_text("Date;Time;CO(GT);T\n10/03/2004;18.00.00;2,6;13,6\n")
    line = _error_line(_reproduce("--only", "raker-airquality", "--data", f"airquality={tmp_path / 'air.csv'}"))
    assert "no column(s) PT08.S1(CO), NMHC(GT)" in line and "header Date;Time;CO(GT);PT08.S1(CO)" in line


def test_spambase_reads_the_uci_csv_and_its_libsvm_form_alike_on_raw_features(tmp_path):
    X, y = _write_spambase_csv(tmp_path / "spambase.data", 25)
    lines = [f"{label} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row) if v) for row, label in zip(X, y)]
    (tmp_path / "spambase.svm").write_text("\n".join(lines) + "\n")
    for name in ("spambase.data", "spambase.svm"):
        got = experiment_data.load_real("spambase", str(tmp_path), (str(tmp_path / name),))
        np.testing.assert_array_equal(got.X, X.astype(np.float32))  # no scaling: sigma = 8 on the raw values
        np.testing.assert_array_equal(got.y, 2 * y - 1)  # 1 = spam -> +1, 0 -> -1


def test_airquality_reader_takes_benzene_as_target_and_fills_missing_values_forward(tmp_path):
    rng = np.random.default_rng(3)
    values = np.round(rng.uniform(1, 50, size=(30, 13)), 1)
    values[0, 2] = values[1, 2] = -200  # a leading gap (NMHC(GT)): the column's first value
    values[7, 3] = -200  # a missing target: the hour before's
    values[12:15, 11] = -200  # a gap of three hours in RH
    hours = [(18 + r) % 24 for r in range(30)]
    _write_airquality(tmp_path / "AirQualityUCI.csv", values, hours)
    X, y = read_airquality(str(tmp_path / "AirQualityUCI.csv"))
    filled = values.copy()
    filled[0:2, 2] = values[2, 2]
    filled[7, 3] = values[6, 3]
    filled[12:15, 11] = values[11, 11]
    target = AIR_COLUMNS.index("C6H6(GT)") - 2
    np.testing.assert_allclose(y, filled[:, target])
    others = [j for j in range(13) if j != target]
    np.testing.assert_allclose(X, np.column_stack([filled[:, others], hours]).astype(np.float32))
    assert X.shape == (30, 13)


def test_a_file_order_setting_keeps_the_rows_in_order_and_redraws_features_per_run(tmp_path):
    """raker-airquality on a small AirQualityUCI.csv: every run in file order, run r with seed base + r
    (recorded), each equal to the learner folded over the scaled rows in file order with that seed."""
    rng = np.random.default_rng(5)
    values = np.round(np.abs(np.cumsum(rng.normal(size=(80, 13)), axis=0)) + 1, 2)  # a drifting series
    _write_airquality(tmp_path / "AirQualityUCI.csv", values, [r % 24 for r in range(80)])
    paths = {"airquality": str(tmp_path / "AirQualityUCI.csv")}
    setting = _setting("raker-airquality")
    outcome = run_setting(setting, str(tmp_path / "nowhere"), runs=3, data_paths=paths)
    assert outcome.status == "ok", outcome.reason
    assert outcome.order == "file" and outcome.seeds == [0, 1, 2]
    X, y = read_airquality(paths["airquality"])
    Xs, ys = min_max(X, 0.0).astype(np.float32), min_max(y, 0.0)
    values_by_seed = []
    for seed in outcome.seeds:
        learner = okl_core.make_learner("raker", n_inputs=13, **{**outcome.params, "seed": seed})
        values_by_seed.append(metric_value(run_online(learner, Xs, ys).metrics, "mse"))
    assert outcome.mean == pytest.approx(np.mean(values_by_seed), rel=1e-6)
    assert len(set(values_by_seed)) == 3  # the draws differ
    old = run_setting(setting, str(tmp_path / "nowhere"), runs=2, data_paths=paths,
                      protocol=RunProtocol(same_features=True, shuffle_all=True))
    assert old.order == "shuffle" and old.seeds == [0, 0]
    learner = okl_core.make_learner("raker", n_inputs=13, **old.params)
    shuffled = [metric_value(run_online(learner, *permuted(Xs, ys, 0, r)).metrics, "mse") for r in range(2)]
    assert old.mean == pytest.approx(np.mean(shuffled), rel=1e-6)


def test_shuffled_settings_give_each_permutation_its_own_feature_seed(tmp_path):
    X, _ = _write_spambase_csv(tmp_path / "spambase.data", 60)
    setting = _setting("fogd-spambase")
    outcome = run_setting(setting, str(tmp_path / "nowhere"), runs=2, data_paths={"spambase": str(tmp_path / "spambase.data")})
    assert outcome.status == "ok" and outcome.order == "shuffle" and outcome.seeds == [0, 1]
    got = experiment_data.load_real("spambase", str(tmp_path), (str(tmp_path / "spambase.data"),))
    runs = []
    for r, seed in enumerate(outcome.seeds):
        learner = okl_core.make_learner("fogd", n_inputs=57, **{**outcome.params, "seed": seed})
        runs.append(metric_value(run_online(learner, *permuted(got.X, got.y, 0, r)).metrics, "mistake_rate"))
    assert outcome.mean == pytest.approx(np.mean(runs), rel=1e-9)
    assert outcome.to_dict()["seeds"] == [0, 1] and outcome.to_dict()["order"] == "shuffle"


def test_a_prepared_airquality_data_set_with_the_13_features_runs_as_stored_in_file_order(tmp_path):
    rng = np.random.default_rng(7)
    X, y = rng.uniform(size=(50, 13)).astype(np.float32), rng.uniform(size=50)
    write_dataset(str(tmp_path / "air13"), X, y, "regression")
    setting = _setting("omkl_gf-m7-airquality")
    outcome = run_setting(setting, str(tmp_path / "nowhere"), runs=2, data_paths={"airquality": str(tmp_path / "air13")})
    assert outcome.status == "ok" and outcome.order == "file" and outcome.seeds == [0, 1], outcome.reason
    expected = [metric_value(run_online(okl_core.make_learner("omkl_gf", n_inputs=13, **{**outcome.params, "seed": s}),
                                        X, y.astype(np.float32)).metrics, "mse") for s in outcome.seeds]
    assert outcome.mean == pytest.approx(np.mean(expected), rel=1e-6)  # no second scaling, no shuffling
