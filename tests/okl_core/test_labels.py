"""okl_core.labels: a learner refuses exactly the labels the dead-letter path sends away."""

import numpy as np
import pyarrow as pa
import pytest

import okl_core
from okl_core.data.validate import check_rows
from okl_core.labels import TASKS, bad_labels, check_task, label_reason

CANDIDATES = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 7.0, np.nan, np.inf, -np.inf, 3.4e38, 1e39, -1e300]  # the last two: inf as float32


@pytest.mark.parametrize(("name", "params"), [("fogd", {}), ("mfogd", {"n_classes": 3}), ("fogd_r", {})])
def test_the_learner_accepts_exactly_the_rows_check_rows_keeps(name, params):
    learner = okl_core.make_learner(name, n_inputs=1, n_components=4, **params)
    n_classes = params.get("n_classes")
    y = np.array(CANDIDATES, dtype=np.float64)
    table = pa.table({"x": pa.array([[0.0]] * len(y), pa.list_(pa.float32(), 1)), "y": pa.array(y), "row": pa.array(np.arange(len(y)))})
    kept = check_rows(table, 1, learner.task, n_classes).good
    for value, keep in zip(y, kept):
        try:  # as the pipeline hands targets on: float32 (1e39 becomes inf)
            with np.errstate(over="ignore"):
                value = value.astype(np.float32) if learner.task == "regression" else value
            learner.update(learner.init(), np.zeros((1, 1), np.float32), np.array([value]))
            accepted = True
        except ValueError as err:
            accepted = False
            assert "bad label" in str(err) and "row 0" in str(err)
        assert accepted == keep, (learner.task, value)
    np.testing.assert_array_equal(kept, ~bad_labels(y, learner.task, n_classes, float32=True))
    if learner.task == "regression":
        assert kept[-3:].tolist() == [True, False, False]


def test_one_task_list():
    assert TASKS == ("binary", "multiclass", "regression")
    assert okl_core.learners.base.TASKS is TASKS
    with pytest.raises(ValueError, match=r"data.json: task must be one of \('binary'"):
        check_task("ranking", where="data.json")


def test_labels_that_are_not_numbers_are_refused():
    learner = okl_core.make_learner("fogd", n_inputs=1, n_components=4)
    with pytest.raises(ValueError, match="labels must be numbers"):
        learner.update(learner.init(), np.zeros((1, 1), np.float32), np.array(["1"]))


def test_a_bad_regression_target_reads_as_a_number():
    """Dead letters once read "target np.float64(inf) is not finite" (numpy 2's scalar repr)."""
    assert label_reason(np.float64(np.inf), "regression") == "bad label: target inf is not finite"
    assert label_reason(np.float64(1e39), "regression") == "bad label: target 1e+39 is beyond float32's range (|y| > 3.4e+38), in which okl stores targets"
    assert label_reason(np.float32(np.nan), "regression") == "bad label: target nan is not finite"
