"""The reproduction table: its data, the file readers, skipping, and the papers' numbers (slow)."""

import dataclasses
import gzip

import numpy as np
import pytest

import okl_core
from okl_core.evaluation import mean_std, metric_value, permuted, run_online
from okl_experiments import data as experiment_data
from okl_experiments import reproduction
from okl_experiments.data import DATASETS, RealData, read_real_files
from okl_experiments.reproduction import SETTINGS, Setting, run_setting
from tests.conftest import shared_data


def test_settings_table_is_well_formed():
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys))
    for s in SETTINGS:
        assert s.data in DATASETS and (s.test is None or s.test in DATASETS), s.key
        kind, metric = s.metric.split("_", 1)
        assert kind in ("online", "test") and metric in ("mistake_rate", "mse", "mae"), s.key
        assert (kind == "test") == (s.test is not None), s.key
        assert 0 < s.paper < 1 and s.runs >= 1 and s.tolerance > 0, s.key
        assert all(isinstance(v, list) and v for v in (s.tune or {}).values()), s.key
    # What the issue asks for at least: FOGD, MFOGD and DSG rows.
    assert {"fogd-a9a", "mfogd-mnist", "dsg-a9a"} <= set(keys)


def _write_idx(path, array, magic_type=0x08):
    header = bytes([0, 0, magic_type, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_idx_files_read_as_raw_pixel_rows(tmp_path):
    images = np.arange(3 * 4 * 4).reshape(3, 4, 4) % 256
    labels = np.array([7, 0, 3])
    _write_idx(tmp_path / "i.gz", images)
    _write_idx(tmp_path / "l.gz", labels)
    X, y = read_real_files("idx", [str(tmp_path / "i.gz"), str(tmp_path / "l.gz")], 16)
    np.testing.assert_array_equal(X, images.reshape(3, 16).astype(np.float32))
    np.testing.assert_array_equal(y, labels)
    assert X.dtype == np.float32 and y.dtype == np.int32
    with pytest.raises(ValueError, match="16 pixels, expected 9"):
        read_real_files("idx", [str(tmp_path / "i.gz"), str(tmp_path / "l.gz")], 9)
    _write_idx(tmp_path / "bad.gz", images, magic_type=0x42)
    with pytest.raises(ValueError, match="bad.gz"):  # the reader's errors name the file
        read_real_files("idx", [str(tmp_path / "bad.gz"), str(tmp_path / "l.gz")], 16)


def test_libsvm_files_concatenate_densely(tmp_path):
    (tmp_path / "a.svm").write_text("+1 1:0.5 3:1\n-1 2:2\n")
    (tmp_path / "b.svm").write_text("-1 3:4\n")
    X, y = read_real_files("libsvm", [str(tmp_path / "a.svm"), str(tmp_path / "b.svm")], 3)
    np.testing.assert_array_equal(X, [[0.5, 0, 1], [0, 2, 0], [0, 0, 4]])
    np.testing.assert_array_equal(y, [1, -1, -1])
    (tmp_path / "bad.svm").write_text("+1 1:x\n")
    with pytest.raises(ValueError, match="bad.svm"):
        read_real_files("libsvm", [str(tmp_path / "bad.svm")], 3)
    with pytest.raises(ValueError, match="kind"):
        read_real_files("csv", [], 3)


@pytest.fixture
def tiny_real(tmp_path, monkeypatch):
    """A LIBSVM data set registered in DATASETS for the duration of a test (serial runs only)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    lines = [f"{label:+d} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(row)) for row, label in zip(X, y)]
    (tmp_path / "tiny.svm").write_text("\n".join(lines) + "\n")
    monkeypatch.setitem(DATASETS, "tiny", RealData("libsvm", ("tiny.svm",), 3, "binary", n_rows=300))
    experiment_data.load_real.cache_clear()
    yield str(tmp_path)
    experiment_data.load_real.cache_clear()


def test_run_setting_tunes_then_runs_permutations_exactly(tiny_real):
    setting = Setting("fogd-tiny", "fogd", "tiny", {"n_components": 16, "sigma": "median"}, "online_mistake_rate", 0.2, "test",
                      runs=3, tune={"eta": [0.01, 0.3]})
    outcome = run_setting(setting, tiny_real, client=None)
    assert outcome.status == "ok" and outcome.runs == 3
    data = experiment_data.load_real("tiny", tiny_real)
    sigma = okl_core.median_heuristic(data.X)
    tuned = {}
    for eta in (0.01, 0.3):  # tuning: one run (permutation 0) per value, by online error
        learner = okl_core.make_learner("fogd", n_inputs=3, n_components=16, sigma=sigma, eta=eta)
        tuned[eta] = metric_value(run_online(learner, *permuted(data.X, data.y, 0, 0)).metrics, "error")
    eta = min(tuned, key=lambda e: (tuned[e], e))
    assert outcome.params == {"n_components": 16, "sigma": sigma, "eta": eta}
    learner = okl_core.make_learner("fogd", n_inputs=3, n_components=16, sigma=sigma, eta=eta)
    values = [metric_value(run_online(learner, *permuted(data.X, data.y, 0, r)).metrics, "error") for r in range(3)]
    assert (outcome.mean, outcome.std) == mean_std(values)
    text = reproduction.table([outcome])
    assert f"{100 * outcome.mean:.2f} ± {100 * outcome.std:.2f}" in text and f"{100 * (outcome.mean - 0.2):+.2f}" in text


def test_missing_learners_and_data_are_skipped_with_a_reason(tiny_real, tmp_path):
    future = Setting("future-tiny", "not_a_learner_yet", "tiny", {}, "online_mistake_rate", 0.2, "test")
    outcome = run_setting(future, tiny_real)
    assert outcome.status == "skipped" and "not_a_learner_yet" in outcome.reason
    nodata = run_setting(dataclasses.replace(SETTINGS[0], runs=1), str(tmp_path / "nowhere"))
    assert nodata.status == "skipped" and "not found" in nodata.reason
    bad_param = Setting("bad-tiny", "fogd", "tiny", {"no_such_param": 1}, "online_mistake_rate", 0.2, "test")
    failed = run_setting(bad_param, tiny_real)
    assert failed.status == "error" and "no_such_param" in failed.reason
    assert "skipped" in reproduction.table([outcome, failed, nodata])


# -- the papers' numbers on ../shared/data (slow) ----------------------------------------
def _setting(key, **changes):
    return dataclasses.replace(next(s for s in SETTINGS if s.key == key), **changes)


def _check(outcome):
    s = outcome.setting
    print(f"{s.key}: ours {100 * outcome.mean:.2f} (+- {100 * outcome.std:.2f}, {outcome.runs} runs) vs paper "
          f"{100 * s.paper:.2f} [{s.source}]")
    assert outcome.status == "ok", outcome.reason
    assert abs(outcome.mean - s.paper) <= s.tolerance


@pytest.mark.slow
def test_fogd_on_a9a_online_error_within_1_point_of_17_4():
    root = str(shared_data("a9a").parent)
    _check(run_setting(_setting("fogd-a9a", runs=3), root))


@pytest.mark.slow
def test_mfogd_on_mnist_online_error_tuned_eta_within_1_point_of_11_8():
    root = str(shared_data("mnist").parent)
    _check(run_setting(_setting("mfogd-mnist-tuned", runs=3), root, use_tuned=True))


@pytest.mark.slow
def test_dsg_on_a9a_test_error_within_1_5_points_of_15_3():
    root = str(shared_data("a9a").parent)
    _check(run_setting(_setting("dsg-a9a", runs=1), root, use_tuned=True))  # theta as tuned in the table


@pytest.mark.slow
@pytest.mark.parametrize("key", ["rbp-a9a", "bpa_s-a9a", "projectron_pp-a9a", "forgetron-noshrink-a9a", "forgetron-code-a9a",
                                 "bogd-code-a9a", "projectron_pp-code-a9a"])
def test_budget_baselines_on_a9a_within_their_tolerance_of_table_5(key):
    root = str(shared_data("a9a").parent)
    _check(run_setting(_setting(key, runs=3), root, use_tuned=True))


@pytest.mark.slow
@pytest.mark.parametrize("key", ["mrbp-mnist", "mprojectron-mnist", "mprojectron_pp-mnist", "mbpa_s-mnist", "mforgetron-code-mnist",
                                 "mbogd-code-mnist"])
def test_multiclass_budget_baselines_on_mnist_within_their_tolerance_of_table_7(key):
    root = str(shared_data("mnist").parent)
    _check(run_setting(_setting(key, runs=3), root))
