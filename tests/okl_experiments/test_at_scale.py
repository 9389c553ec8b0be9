"""The at-scale settings' command lines and the regression baselines beside them."""

import math

import numpy as np
import pytest

from okl_core.data.layout import write_dataset
from okl_experiments.at_scale import SCALE_SETTINGS, scale_steps, scale_table
from okl_experiments.baselines import regression_baselines
from pipelines.prepare import build_parser as prepare_parser
from pipelines.train import build_parser as train_parser


def test_every_step_is_a_valid_command_line_of_its_cli():
    """Each filled step parses with the CLI that runs it; the train steps use 2 shards on worker processes."""
    assert {s.key for s in SCALE_SETTINGS} == {"dsg-mnist8m-8v6", "dsg-mnist8m-10class", "dsg-molecular"}
    for setting in SCALE_SETTINGS:
        steps = scale_steps(setting, "/data", "/work/x", rows=1000, test_rows=10)
        assert all("{" not in arg for _, argv in steps for arg in argv)
        for cli, argv in steps:
            if cli == "prepare":
                args, rest = prepare_parser().parse_known_args(argv)
                assert args.output.startswith("/work/x/")
            else:
                args, rest = train_parser().parse_known_args(argv)
                assert args.num_shards == 2 and "--direct_running_mode=multi_processing" in rest
        assert "1000" in " ".join(steps[0][1])


def test_the_8v6_setting_is_the_papers():
    setting = next(s for s in SCALE_SETTINGS if s.key == "dsg-mnist8m-8v6")
    argv = " ".join(" ".join(a) for _, a in scale_steps(setting, "/d", "/w"))
    for part in ("--classes 6,8", "--components 50", 'loss="hinge"', "--sigma median", 'nu="1/n"', "batch_size=1024", "block_size=256",
                 "--rows 1600000"):
        assert part in argv


def test_the_molecular_setting_is_the_one_the_readme_measures():
    """Raw Coulomb matrices (the step predicates lost on the holdout, README), 2^16 DSG features, the tuned steps."""
    setting = next(s for s in SCALE_SETTINGS if s.key == "dsg-molecular")
    steps = scale_steps(setting, "/d", "/w")
    argv = " ".join(" ".join(a) for _, a in steps)
    assert "--steps" not in argv
    for part in ("--records 0:23978", "--records 24000:29978", 'loss="square"', "batch_size=64", "block_size=350", "theta=1000",
                 "step_offset=1000", "--n_components 4096 --eta 3e-5"):
        assert part in argv


def test_regression_baselines_match_the_closed_forms(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = (X @ np.arange(1.0, 7.0) + 3.0 + rng.normal(size=300)).astype(np.float32)
    write_dataset(tmp_path / "train", X[:200], y[:200], "regression", n_shards=3)
    write_dataset(tmp_path / "test", X[200:], y[200:], "regression")
    got = regression_baselines(str(tmp_path / "train"), str(tmp_path / "test"), ridge=0.1)
    Xt, yt = X[:200].astype(np.float64), y[:200].astype(np.float64)
    mx, my = Xt.mean(axis=0), yt.mean()
    w = np.linalg.solve((Xt - mx).T @ (Xt - mx) / 200 + 0.1 * np.eye(6), (Xt - mx).T @ (yt - my) / 200)
    err = (X[200:] - mx) @ w + my - y[200:]
    assert got["linear_ridge"]["mae"] == pytest.approx(np.abs(err).mean(), rel=1e-9)
    assert got["linear_ridge"]["rmse"] == pytest.approx(math.sqrt((err**2).mean()), rel=1e-9)
    assert got["mean"]["mae"] == pytest.approx(np.abs(y[200:] - my).mean(), rel=1e-6)
    assert got["linear_ridge"]["rmse"] < 0.5 * got["mean"]["rmse"]
    # ridge=None: the grid value best on training rows 160-199 when fitted on rows 0-159.
    def holdout_error(lam):
        A, b = X[:160].astype(np.float64), y[:160].astype(np.float64)
        ma, mb = A.mean(axis=0), b.mean()
        v = np.linalg.solve((A - ma).T @ (A - ma) / 160 + lam * np.eye(6), (A - ma).T @ (b - mb) / 160)
        return np.square((X[160:200] - ma) @ v + mb - y[160:200]).mean()
    chosen = regression_baselines(str(tmp_path / "train"), str(tmp_path / "test"), grid=(1e-3, 10.0, 1000.0))["linear_ridge"]["ridge"]
    assert chosen == min((1e-3, 10.0, 1000.0), key=holdout_error) == 1e-3
    with pytest.raises(ValueError, match="regression data set"):
        write_dataset(tmp_path / "bin", X, np.where(y > 0, 1, -1), "binary", classes=[-1, 1])
        regression_baselines(str(tmp_path / "bin"), str(tmp_path / "test"))


def test_table_marks_skipped_settings():
    from okl_experiments.at_scale import ScaleOutcome

    assert "skipped: data not found" in scale_table([ScaleOutcome(SCALE_SETTINGS[0], 10, skipped="data not found: x")])


def test_the_10class_setting_args():
    """Softmax DSG on raw pixels: the tuned kernel width and step, and 2^16 distinct features in the merged model.

    Both shards draw blocks 0..t-1 from the same seed, t = rows / (2 shards x 1024): block 16 at 8.1M rows.
    """
    setting = next(s for s in SCALE_SETTINGS if s.key == "dsg-mnist8m-10class")
    argv = " ".join(" ".join(a) for _, a in scale_steps(setting, "/d", "/w"))
    for part in ('loss="softmax"', "--sigma 0.35*median", "nu=0.0001", "theta=10000", "batch_size=1024", "block_size=16 ",
                 "--rows 8100000"):
        assert part in argv
    sliced = " ".join(" ".join(a) for _, a in scale_steps(setting, "/d", "/w", rows=setting.slice_rows))
    assert "block_size=2048 " in sliced  # 65,536 rows: 32 blocks per shard of 2048 = 2^16 features
