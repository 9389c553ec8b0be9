"""The per-row fold of the numpy references (tests/okl_core/reference/linear.py): predict,
score, then learn; stops when asked. And okl_core.learners.rules.fold_linear, compiled, on
both weight shapes."""

import numpy as np

from okl_core.learners.rules import BinaryHingeRule, HingeRuleConfig, MulticlassHingeRule, MulticlassRuleConfig, fold_linear
from tests.okl_core.reference.linear import LinearRows, fold


class Recorder:
    """Scores row i as the number of rows learned before it; asks to stop after row ``stop_after``."""

    def __init__(self, stop_after=None):
        self.learned, self.stop_after = [], stop_after

    def score(self, i):
        return float(len(self.learned))

    def add(self, i, coef):
        self.learned.append((i, coef))
        return i == self.stop_after


def test_every_row_is_scored_before_it_is_learned():
    y = np.array([1.0, -1.0, 1.0, 1.0])
    scores = np.full(4, np.nan)
    model = Recorder()
    assert fold(lambda f, label: label if label > 0 else None, model, y, scores) == 4
    np.testing.assert_array_equal(scores, [0, 1, 1, 2])
    assert model.learned == [(0, 1.0), (2, 1.0), (3, 1.0)]


def test_the_fold_stops_after_the_row_whose_add_asks_it_and_resumes_from_start():
    y = np.ones(5)
    scores = np.full(5, np.nan)
    model = Recorder(stop_after=1)
    assert fold(lambda f, label: label, model, y, scores) == 2
    assert np.isnan(scores[2:]).all()
    assert fold(lambda f, label: label, Recorder(), y, scores, start=2) == 5
    np.testing.assert_array_equal(scores, [0, 1, 0, 1, 2])


def test_linear_rows_add_scalars_and_outer_products():
    Z = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    w = np.zeros(2)
    rows = LinearRows(w, Z)
    rows.score(0)
    rows.add(0, 0.5)
    np.testing.assert_array_equal(w, [0.5, 1.0])
    W = np.zeros((2, 3))
    rows = LinearRows(W, Z)
    np.testing.assert_array_equal(rows.score(1), [0.0, 0.0, 0.0])
    rows.add(1, np.array([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(W, [[3.0, 0.0, -3.0], [4.0, 0.0, -4.0]])


def test_fold_linear_scores_before_learning_on_both_weight_shapes():
    Z = np.array([[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]], dtype=np.float32)
    w, scores = np.zeros(2), np.full(3, np.nan)
    fold_linear(BinaryHingeRule(HingeRuleConfig(eta=0.5)), Z, w, np.array([1.0, -1.0, 1.0]), scores)
    # row 0: f = 0 < 1, w = 0.5 z0 = (0.5, 1); row 1: f = 5.5, y f = -5.5 < 1, w -= 0.5 z1 = (-1, -1);
    # row 2: f = 0.5, y f < 1, w += 0.5 z2 = (-0.75, -1.5)
    np.testing.assert_array_equal(scores, [0.0, 5.5, 0.5])
    np.testing.assert_array_equal(w, [-0.75, -1.5])
    W, scores = np.zeros((2, 3)), np.full((2, 3), np.nan)
    fold_linear(MulticlassHingeRule(MulticlassRuleConfig(n_classes=3, eta=1.0)), Z[:2], W, np.array([2, 0]), scores)
    # row 0: all scores 0, rival 0 (the first maximum): W += z0 (x) (-1, 0, 1); row 1: f = z1 W =
    # (-11, 0, 11), rival 2: W += z1 (x) (1, 0, -1)
    np.testing.assert_array_equal(scores, [[0.0, 0.0, 0.0], [-11.0, 0.0, 11.0]])
    np.testing.assert_array_equal(W, [[2.0, 0.0, -2.0], [2.0, 0.0, -2.0]])
