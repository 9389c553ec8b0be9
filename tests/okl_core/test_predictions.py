"""Class names and probabilities of predictions (okl_core.predictions) against closed forms and the registry."""

import dataclasses

import numpy as np
import pytest

import okl_core
from okl_core.predictions import class_names, class_probabilities, probability_link, probability_names

# The learners whose loss is a likelihood: the OKS family's logistic loss (their default) and DSG's logistic/softmax.
WITH_LOGISTIC_DEFAULT = {"oks", "oks_pp", "ioks", "rf_oks_pp", "rf_ioks"}


def _loss_default(name):
    fields = {f.name: f.default for f in dataclasses.fields(okl_core.learner_class(name).config_class)}
    return fields.get("loss")


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_only_logistic_and_softmax_losses_have_probabilities(name):
    """Every registered learner with its default loss: a link exactly where the loss is logistic (the docs' table)."""
    loss = _loss_default(name)
    assert (loss == "logistic") == (name in WITH_LOGISTIC_DEFAULT)
    if loss is None:  # a fixed margin loss (hinge, perceptron) or a regression loss: no probabilities
        learner = okl_core.make_learner(name, **_small(name))
        assert probability_link(learner) is None and class_probabilities(learner, np.zeros((3, 4) if learner.task == "multiclass" else 3)) is None


def _small(name):
    params = {"n_inputs": 3}
    fields = {f.name for f in dataclasses.fields(okl_core.learner_class(name).config_class)}
    if "n_classes" in fields and name.startswith("m"):
        params["n_classes"] = 4
    return params


@pytest.mark.parametrize("loss, link", [("hinge", None), ("squared_hinge", None), ("logistic", "sigmoid"), ("softmax", "softmax"), ("square", None)])
def test_dsg_has_probabilities_for_its_logistic_and_softmax_losses(loss, link):
    extra = {"n_classes": 3} if loss == "softmax" else {}
    learner = okl_core.make_learner("dsg", n_inputs=2, loss=loss, **extra)
    assert probability_link(learner) == link


def test_sigmoid_probabilities_are_the_closed_form_and_sum_to_one():
    learner = okl_core.make_learner("dsg", n_inputs=2, loss="logistic")
    scores = np.array([-700.0, -3.0, -1e-9, 0.0, 0.5, 40.0, 800.0])
    p = class_probabilities(learner, scores)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-scores)), rtol=1e-15, atol=0)
        np.testing.assert_allclose(p[:, 0], 1 / (1 + np.exp(scores)), rtol=1e-15, atol=0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.isfinite(p).all() and p[0, 1] > 0 and p[-1, 0] == 0.0  # exp(800) overflows: computed without it, never NaN


def test_softmax_probabilities_are_the_closed_form_and_sum_to_one():
    learner = okl_core.make_learner("dsg", n_inputs=2, loss="softmax", n_classes=3)
    scores = np.array([[0.0, 1.0, 2.0], [1000.0, 999.0, -5.0], [-3.0, -3.0, -3.0]])
    p = class_probabilities(learner, scores)
    shifted = scores - scores.max(axis=1, keepdims=True)
    expected = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, expected, rtol=1e-15)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(p[2], [1 / 3] * 3, rtol=1e-15)


def test_class_names_of_codes():
    assert class_names("binary", np.array([1, -1, 1]), ["no", "yes"]) == ["yes", "no", "yes"]
    assert class_names("multiclass", np.array([2, 0]), ["cat", "dog", "owl"]) == ["owl", "cat"]
    assert class_names("binary", np.array([1, -1]), None) == [1, -1]  # no names recorded: the codes


def test_probability_column_names():
    assert probability_names("binary", ["no", "yes"]) == ["proba_no", "proba_yes"]
    assert probability_names("binary", None) == ["proba_-1", "proba_1"]
    assert probability_names("multiclass", None, 3) == ["proba_0", "proba_1", "proba_2"]
    assert probability_names("multiclass", [1, "1", 2]) == ["proba_0", "proba_1", "proba_2"]  # names printing alike: the code positions
