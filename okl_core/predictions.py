"""What a prediction holds besides its score: the class name and a probability per class.

A classification model's scores are per class *code* (binary: one score, its sign the
code -1/+1; multiclass: one score per code 0..C-1). The model file records the class
names the codes stand for (:func:`okl_core.model_classes`, in code order; binary:
``[negative, positive]``); :func:`class_names` turns predicted codes into those names.

Probabilities exist where the learner's loss defines them, as the inverse of its link:

* the logistic loss ``log(1 + exp(-y f))`` (``dsg`` with ``loss=logistic``; the OKS family
  ``oks``, ``oks_pp``, ``ioks``, ``rf_oks_pp``, ``rf_ioks`` with their default
  ``loss=logistic``) is the negative log-likelihood of ``P(y = +1 | x) = sigmoid(f)``;
* the softmax loss (``dsg`` with ``loss=softmax``) is that of ``P(c | x) = softmax(f)_c``.

Other losses (the hinge of FOGD, NOGD, the budget learners and DSG's default, squared
hinge, the perceptron's mistakes, the squared and absolute losses of regression) are not
likelihoods: their scores are margins with no calibrated probability behind them, so
:func:`class_probabilities` returns None for them rather than a number that looks like one.
"""

from __future__ import annotations

import numpy as np

from okl_core.learners.base import Learner
from okl_core.losses import sigmoid, softmax

__all__ = ["PROBABILITY_LINKS", "probability_link", "class_probabilities", "probabilities_from_scores", "class_codes", "class_names", "probability_names"]

PROBABILITY_LINKS = {"logistic": "sigmoid", "softmax": "softmax"}
"""Loss name -> the link whose inverse turns scores into class probabilities."""


def probability_link(learner: Learner) -> str | None:
    """``'sigmoid'`` (logistic loss), ``'softmax'`` (softmax loss) or None: how ``learner``'s scores become probabilities.

    The loss is the learner's ``config.loss`` (learners without that parameter have a
    fixed margin loss, and no probabilities).
    """
    link = PROBABILITY_LINKS.get(str(getattr(learner.config, "loss", "")))
    expected = {"sigmoid": "binary", "softmax": "multiclass"}.get(link or "")
    return link if expected == learner.task else None


def class_probabilities(learner: Learner, scores) -> np.ndarray | None:
    """``(n, C)`` probabilities of the classes in code order, from ``learner``'s scores; None without a link.

    Binary: columns ``[P(-1), P(+1)] = [sigmoid(-f), sigmoid(f)]`` (each computed directly,
    so a tiny probability keeps its precision); multiclass: ``softmax(f)`` row by row.
    Every row sums to 1 (up to rounding).
    """
    return probabilities_from_scores(probability_link(learner), scores)


def probabilities_from_scores(link: str | None, scores) -> np.ndarray | None:
    """``(n, C)`` class probabilities of ``scores`` through ``link`` (:func:`probability_link`); None for no link.

    ``'sigmoid'``: binary scores ``(n,)`` -> ``[sigmoid(-f), sigmoid(f)]``; ``'softmax'``:
    multiclass scores ``(n, C)`` -> ``softmax(f)`` row by row.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if link == "sigmoid":
        return np.stack([sigmoid(-scores), sigmoid(scores)], axis=1)
    if link == "softmax":
        return softmax(scores)
    return None


def class_codes(task: str, n_classes: int | None = None) -> list:
    """The class codes of ``task`` in code order: ``[-1, 1]`` (binary) or ``[0, ..., C-1]``."""
    return [-1, 1] if task == "binary" else list(range(int(n_classes or 0)))


def class_names(task: str, labels, classes: list | None) -> list:
    """The names of predicted class codes ``labels`` (binary -1/+1, multiclass 0..C-1).

    ``classes``: the names in code order, as the model records them (binary ``[negative,
    positive]``); None keeps the codes themselves (a model that records no names).
    """
    labels = np.asarray(labels)
    if classes is None:
        return labels.tolist()
    index = (labels + 1) // 2 if task == "binary" else labels
    return [classes[i] for i in index.tolist()]


def probability_names(task: str, classes: list | None, n_classes: int | None = None) -> list:
    """Column names ``proba_<class>`` of the probabilities, in code order.

    ``<class>`` is the class name (``str()`` of it), or the code when the model records no
    names; when two names would print the same (``1`` and ``"1"``), the code position
    (``proba_0``, ``proba_1``, ...) instead, so that every column has a name of its own.
    """
    names = classes if classes is not None else class_codes(task, n_classes)
    columns = [f"proba_{name}" for name in names]
    return columns if len(set(columns)) == len(columns) else [f"proba_{i}" for i in range(len(columns))]
