"""Every registered learner trains through the pipeline exactly as its plain okl_core fold."""

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
    learner = okl_core.make_learner(name, n_inputs=D, **params)
    X, y = _data(learner.task)
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
    assert model == reference_model(learner, X, y_typed, plan)
