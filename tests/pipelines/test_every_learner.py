"""Every registered learner trains through the pipeline exactly as its plain okl_core fold."""

import dataclasses
import json

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.data.plan import StreamPlan
from okl_core.data.synthetic import gaussian_blobs
from pipelines import train
from tests.pipelines.reference import binary_data, reference_model

D, ROWS = 4, 400


def _data(task):
    if task == "binary":
        return binary_data(ROWS, d=D)
    if task == "multiclass":
        return gaussian_blobs(ROWS, seed=3, n_classes=3, n_features=D)
    X, _ = binary_data(ROWS, d=D)
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1]


@pytest.mark.slow
@pytest.mark.parametrize("name", okl_core.learner_names())
def test_pipeline_equals_the_fold(name, tmp_path):
    params = dict(okl_core.learner_class(name).conformance_params)
    X, y = _data(_task_of(name))
    learner = okl_core.make_learner(name, data=X, **params)  # what the pipeline builds: its data defaults resolved on these rows
    classes = {"classes": [0, 1, 2]} if learner.task == "multiclass" else {}
    write_dataset(tmp_path / "data", X, y, learner.task, n_shards=2, row_group_rows=96, **classes)
    try:
        okl_core.merge_states(learner, [learner.init()] * 2, base=learner.init())
        shards = 2
    except okl_core.NotMergeableError:
        shards = 1
    args = ["--input", str(tmp_path / "data"), "--learner", name, "--num_shards", str(shards), "--rounds", "2", "--batch_rows", "64"]
    for key, value in params.items():
        if key != "n_classes":
            args += ["--param", f"{key}={json.dumps(value)}"]
    result = train.run([*args, "--output", str(tmp_path / "out")])
    with open(result.model_path, "rb") as f:
        model = f.read()
    plan = StreamPlan(**result.metrics["plan"])
    y_typed = y.astype(np.float32) if learner.task == "regression" else y
    assert model == reference_model(learner, X, y_typed, plan, classes=classes.get("classes"))


def _task_of(name):
    """The task of ``name`` with its defaults (the fields the data fills given stand-in values)."""
    fields = {f.name for f in dataclasses.fields(okl_core.learner_class(name).config_class)}
    stand_ins = {"n_classes": 3, "horizon": 100}
    return okl_core.make_learner(name, n_inputs=D, **{k: v for k, v in stand_ins.items() if k in fields}).task


@pytest.fixture(scope="module")
def task_data(tmp_path_factory):
    """A small data set per task (200 rows, 4 features)."""
    root = tmp_path_factory.mktemp("tasks")
    for task in ("binary", "multiclass", "regression"):
        X, y = _data(task)
        classes = {"classes": [0, 1, 2]} if task == "multiclass" else {}
        write_dataset(root / task, X[:200], y[:200], task, row_group_rows=64, **classes)
    return root


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_every_learner_trains_with_only_its_name(name, task_data, tmp_path):
    """``pipelines.train --learner NAME``: every data-derived parameter (n_inputs, n_classes,
    the OKS family's horizon) is filled from the data set by okl_experiments.params."""
    task = _task_of(name)
    result = train.run(["--input", str(task_data / task), "--learner", name, "--batch_rows", "64",
                        "--output", str(tmp_path / "out"), "--runner=DirectRunner"])
    learner, _ = okl_core.load_model(result.model_path)
    config = dataclasses.asdict(learner.config)
    assert learner.name == name and config["n_inputs"] == D
    assert config.get("horizon", 200) == 200  # the row count of the data set
    if task == "multiclass":
        assert config["n_classes"] == 3
    assert result.metrics["rows"]["trained"] == 200 and result.metrics["rows"]["rejected"] == 0
