"""okl_core.sklearn: the estimators against the learners they wrap, scikit-learn's checks, the River-style adapter."""

import pathlib
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from okl_core import make_learner  # noqa: E402
from okl_core.registry import learner_class, learner_names  # noqa: E402
from okl_core.sklearn import (  # noqa: E402
    OnlineKernelClassifier,
    OnlineKernelRegressor,
    OnlineLearner,
    classifier_learner,
    expected_failed_checks,
    learner_table,
    regressor_learner,
)

# Parameters that learn on scikit-learn's small check data sets (a few hundred standardized rows).
FOGD = {"sigma": 1.0, "eta": 0.2, "n_components": 32}
FOGD_R = {"sigma": 4.0, "eta": 0.01, "n_components": 32, "eps": 0.01}
OKS = {"kernels": "gaussian:0.5,gaussian:2", "horizon": 2000}
DSG = {"sigma": 1.0, "block_size": 32, "batch_size": 8, "theta": 50.0, "nu": 1e-4}


def _data(n=120, d=5, classes=2, seed=0):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=3, n_redundant=0, n_classes=classes, n_clusters_per_class=1, random_state=seed)
    return X, y


def _same_state(a, b):
    assert type(a) is type(b)
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


# -- against the learners themselves (exact) ---------------------------------------------------
def test_fit_is_the_learners_update_on_the_label_codes():
    X, y = _data()
    labels = np.array(["no", "yes"])[y]
    est = OnlineKernelClassifier("fogd", **FOGD).fit(X, labels)
    assert est.classes_.tolist() == ["no", "yes"]
    learner = make_learner("fogd", n_inputs=5, **FOGD)
    state, _ = learner.update(learner.init(), X, np.where(y == 1, 1, -1))
    _same_state(est.state_, state)
    scores = learner.predict(state, X)
    np.testing.assert_array_equal(est.decision_function(X), scores)
    np.testing.assert_array_equal(est.predict(X), np.where(scores >= 0, "yes", "no"))
    assert est.n_features_in_ == 5


def test_three_classes_switch_fogd_to_mfogd_with_sorted_codes():
    X, y = _data(classes=3)
    labels = np.array([30, 10, 20])[y]  # codes follow the sorted labels: 10 -> 0, 20 -> 1, 30 -> 2
    est = OnlineKernelClassifier("fogd", **FOGD).fit(X, labels)
    assert est.learner_.name == "mfogd" and est.classes_.tolist() == [10, 20, 30]
    learner = make_learner("mfogd", n_inputs=5, n_classes=3, **FOGD)
    state, _ = learner.update(learner.init(), X, np.array([2, 0, 1])[y])
    _same_state(est.state_, state)
    scores = learner.predict(state, X)
    np.testing.assert_array_equal(est.decision_function(X), scores)
    np.testing.assert_array_equal(est.predict(X), np.array([10, 20, 30])[np.argmax(scores, axis=1)])


def test_a_multiclass_learner_on_two_classes_scores_the_difference():
    X, y = _data()
    est = OnlineKernelClassifier("mfogd", **FOGD).fit(X, y)
    scores = est.learner_.predict(est.state_, X)
    assert est.learner_.config.n_classes == 2
    np.testing.assert_array_equal(est.decision_function(X), scores[:, 1] - scores[:, 0])
    np.testing.assert_array_equal(est.predict(X), np.argmax(scores, axis=1))


def test_regressor_is_the_learners_update():
    X, y = make_regression(n_samples=100, n_features=4, noise=0.1, random_state=0)
    y = y / y.std()
    est = OnlineKernelRegressor("fogd", **FOGD_R).fit(X, y)  # fogd's regression sibling
    assert est.learner_.name == "fogd_r"
    learner = make_learner("fogd_r", n_inputs=4, **FOGD_R)
    state, _ = learner.update(learner.init(), X, y)
    _same_state(est.state_, state)
    np.testing.assert_array_equal(est.predict(X), learner.predict(state, X))
    assert est.score(X, y) > 0.5


@pytest.mark.parametrize("name, params", [("fogd", FOGD), ("rbp", {"sigma": 1.0, "budget": 20})])
def test_partial_fit_in_chunks_equals_fit(name, params):
    X, y = _data(classes=3)
    whole = OnlineKernelClassifier(name, **params).fit(X, y)
    parts = OnlineKernelClassifier(name, **params)
    for start in range(0, len(X), 37):
        parts.partial_fit(X[start : start + 37], y[start : start + 37], classes=[0, 1, 2])
    _same_state(whole.state_, parts.state_)


def test_partial_fit_refusals():
    X, y = _data()
    with pytest.raises(ValueError, match="first call needs classes="):
        OnlineKernelClassifier("fogd").partial_fit(X, y)
    est = OnlineKernelClassifier("fogd", **FOGD).partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match=r"row 3: label 5 is not one of classes_ \[0, 1\]"):
        est.partial_fit(X[:5], np.array([0, 1, 0, 5, 1]))
    with pytest.raises(ValueError, match=r"classes \[0, 1, 2\] differ from classes_ \[0, 1\] of the first call"):
        est.partial_fit(X[:5], y[:5], classes=[0, 1, 2])
    est.partial_fit(X[:5], y[:5], classes=[1, 0])  # the same set
    with pytest.raises(ValueError, match="X has 4 features, but OnlineKernelClassifier is expecting 5"):
        est.partial_fit(X[:5, :4], y[:5])
    with pytest.raises(ValueError, match="oks needs horizon"):
        OnlineKernelClassifier("oks", kernels=OKS["kernels"]).partial_fit(X, y, classes=[0, 1])


def test_learner_mapping():
    assert classifier_learner("fogd", 2) == "fogd" and classifier_learner("fogd", 4) == "mfogd"
    assert classifier_learner("rbp", 3) == "mrbp" and classifier_learner("mrbp", 2) == "mrbp"
    assert classifier_learner("dsg", 3) == "dsg" and regressor_learner("nogd") == "nogd_r"
    X, y = _data(classes=3)
    with pytest.raises(ValueError, match="^Only binary classification is supported: kernel_perceptron has no multiclass variant; got 3 classes$"):
        OnlineKernelClassifier("kernel_perceptron").fit(X, y)
    with pytest.raises(ValueError, match="^Only binary classification is supported: dsg with loss 'logistic' learns two classes"):
        OnlineKernelClassifier("dsg", loss="logistic").fit(X, y)
    with pytest.raises(ValueError, match="fogd_r learns regression, not classification"):
        OnlineKernelClassifier("fogd_r").fit(X, y)
    with pytest.raises(ValueError, match="bpa_s has no regression version"):
        OnlineKernelRegressor("bpa_s").fit(X, y.astype(float))
    with pytest.raises(ValueError, match="unknown learner 'nope'"):
        OnlineKernelClassifier("nope").fit(X, y)
    # dsg takes the task from its loss: softmax on 3 classes, square for regression, the ridge learners' task field
    assert OnlineKernelClassifier("dsg", **DSG).fit(X, y).learner_.config.loss == "softmax"
    assert OnlineKernelRegressor("dsg", **DSG).fit(X, y.astype(float)).learner_.config.loss == "square"
    assert OnlineKernelClassifier("krr", sigma=1.0).fit(X[y < 2], y[y < 2]).learner_.config.task == "binary"
    rows = {row["learner"]: row for row in learner_table()}
    assert set(rows) == set(learner_names())
    assert rows["nogd"] == {"learner": "nogd", "two_classes": "nogd", "more_classes": "mnogd", "regression": "nogd_r"}
    assert rows["omkl_gf"] == {"learner": "omkl_gf", "two_classes": "", "more_classes": "", "regression": "omkl_gf"}


def test_parameters_other_learners_take_are_ignored_and_none_is_the_default():
    X, y = _data()
    est = OnlineKernelClassifier("fogd", budget=5, sigma=2.0).fit(X, y)
    config = est.learner_.config
    assert not hasattr(config, "budget") and config.sigma == 2.0
    assert config.eta == make_learner("fogd", n_inputs=5).config.eta  # left at None: the learner's default
    with pytest.raises(TypeError, match="unexpected keyword argument 'sigmaa'"):
        OnlineKernelClassifier("fogd", sigmaa=2.0)


def test_predict_proba_only_where_the_loss_defines_it():
    X, y = _data()
    assert not hasattr(OnlineKernelClassifier("fogd"), "predict_proba")
    assert not hasattr(OnlineKernelClassifier("dsg"), "predict_proba")  # hinge by default
    est = OnlineKernelClassifier("dsg", loss="logistic", **DSG).fit(X, y)
    z = est.decision_function(X)
    np.testing.assert_allclose(est.predict_proba(X)[:, 1], 1.0 / (1.0 + np.exp(-z.astype(np.float64))), rtol=1e-12)
    assert hasattr(OnlineKernelClassifier("oks", **OKS), "predict_proba")
    X3, y3 = _data(classes=3)
    est = OnlineKernelClassifier("dsg", **DSG).fit(X3, y3)  # softmax on three classes
    assert hasattr(est, "predict_proba")
    s = est.decision_function(X3).astype(np.float64)
    expected = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(est.predict_proba(X3), expected, rtol=1e-12)
    np.testing.assert_array_equal(est.predict(X3), np.argmax(est.predict_proba(X3), axis=1))


def test_clone_seed_determinism_and_pickle():
    X, y = _data()
    est = OnlineKernelClassifier("fogd", seed=3, **FOGD)
    a, b = est.fit(X, y), clone(est).fit(X, y)
    _same_state(a.state_, b.state_)
    other = OnlineKernelClassifier("fogd", seed=4, **FOGD).fit(X, y)
    assert not np.array_equal(a.state_.w, other.state_.w)
    refit = a.fit(X[:50], y[:50])  # fit starts again from the initial state
    _same_state(refit.state_, OnlineKernelClassifier("fogd", seed=3, **FOGD).fit(X[:50], y[:50]).state_)
    oks = OnlineKernelClassifier("oks", **OKS).fit(X, y)  # its learner holds closures: pickled by config
    back = pickle.loads(pickle.dumps(oks))
    _same_state(back.state_, oks.state_)
    np.testing.assert_array_equal(back.predict_proba(X), oks.predict_proba(X))
    assert back.learner_.config == oks.learner_.config


# -- Pipeline and GridSearchCV -------------------------------------------------------------------
def test_grid_search_in_a_pipeline_matches_cross_validation_by_hand():
    X, y = _data(n=150, d=6, seed=1)
    X = X * [1, 10, 100, 1, 10, 100] + 5  # StandardScaler matters
    pipe = make_pipeline(StandardScaler(), OnlineKernelClassifier("fogd", n_components=32))
    grid = {"onlinekernelclassifier__sigma": [0.5, 2.0], "onlinekernelclassifier__eta": [0.05, 0.5]}
    cv = KFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(pipe, grid, cv=cv).fit(X, y)
    by_hand = {
        (s, e): cross_val_score(make_pipeline(StandardScaler(), OnlineKernelClassifier("fogd", n_components=32, sigma=s, eta=e)), X, y, cv=cv).mean()
        for s in grid["onlinekernelclassifier__sigma"]
        for e in grid["onlinekernelclassifier__eta"]
    }
    best = max(by_hand, key=by_hand.get)
    assert search.best_score_ == by_hand[best]
    assert (search.best_params_["onlinekernelclassifier__sigma"], search.best_params_["onlinekernelclassifier__eta"]) == best
    direct = make_pipeline(StandardScaler(), OnlineKernelClassifier("fogd", n_components=32, sigma=best[0], eta=best[1])).fit(X, y)
    _same_state(search.best_estimator_[-1].state_, direct[-1].state_)
    assert search.score(X, y) > 0.8


# -- scikit-learn's estimator checks -------------------------------------------------------------
FAST_CHECKS = [
    (OnlineKernelClassifier, "fogd", FOGD),
    (OnlineKernelRegressor, "fogd_r", FOGD_R),
]
SLOW_CHECKS = [
    (OnlineKernelClassifier, "nogd", {"sigma": 1.0, "eta": 0.5, "budget": 30, "rank": 15}),
    (OnlineKernelRegressor, "nogd_r", {"sigma": 4.0, "eta": 0.3, "budget": 30, "rank": 15, "eps": 0.01}),
    (OnlineKernelClassifier, "dsg", DSG),
    (OnlineKernelClassifier, "dsg", {**DSG, "loss": "logistic"}),
    (OnlineKernelRegressor, "dsg", {**DSG, "sigma": 4.0, "theta": 3.0, "batch_size": 2}),
    (OnlineKernelClassifier, "rbp", {"sigma": 1.0, "budget": 30}),
    (OnlineKernelRegressor, "rbp_r", {"sigma": 1.0, "budget": 150, "eta": 1.0, "eps": 0.01}),
    (OnlineKernelClassifier, "kernel_ogd", {"sigma": 1.0, "eta": 0.5}),
    (OnlineKernelClassifier, "pkawv_taylor", {"sigma": 1.0, "lam": 0.1, "degree": 3}),
    (OnlineKernelRegressor, "pkawv_taylor", {"sigma": 4.0, "lam": 1.0, "degree": 2}),
    (OnlineKernelRegressor, "omkl_gf", {"kernels": "gaussian:0.5,gaussian:1,gaussian:4", "n_components": 32, "eta": 0.3, "schedule": "constant", "eta_e": 0.2, "draws_per_node": 2}),
    (OnlineKernelClassifier, "oks", OKS),
    (OnlineKernelRegressor, "oks", {**OKS, "loss": "square"}),
]


def _check(cls, name, params):
    est = cls(name, **params)
    check_estimator(est, expected_failed_checks=expected_failed_checks(est))


@pytest.mark.parametrize("cls, name, params", FAST_CHECKS, ids=[f"{c.__name__}-{n}" for c, n, _ in FAST_CHECKS])
def test_check_estimator(cls, name, params):
    _check(cls, name, params)


@pytest.mark.slow
@pytest.mark.parametrize("cls, name, params", SLOW_CHECKS, ids=[f"{c.__name__}-{n}-{i}" for i, (c, n, _) in enumerate(SLOW_CHECKS)])
def test_check_estimator_every_family(cls, name, params):
    _check(cls, name, params)


def _registry_estimators():
    """(estimator class, learner) for every registered learner an estimator runs under its own name."""
    for row in learner_table():
        name = row["learner"]
        if row["two_classes"] == name:
            yield OnlineKernelClassifier, name
        if row["regression"] == name:
            yield OnlineKernelRegressor, name


REGISTRY_ESTIMATORS = list(_registry_estimators())


@pytest.mark.slow
@pytest.mark.parametrize("cls, name", REGISTRY_ESTIMATORS, ids=[f"{c.__name__}-{n}" for c, n in REGISTRY_ESTIMATORS])
def test_check_estimator_every_registered_learner(cls, name):
    """Every check with the learners' small conformance parameters (made for speed, not accuracy:
    a regressor's one pass there need not reach the R^2 of 0.5 that check_regressors_train asks)."""
    params = {k: v for k, v in learner_class(name).conformance_params.items() if k != "n_classes"}
    est = cls(name, **params)
    expected = expected_failed_checks(est)
    if cls is OnlineKernelRegressor:
        expected["check_regressors_train"] = "conformance parameters: chosen for speed, not accuracy"
    check_estimator(est, expected_failed_checks=expected)


def test_expected_failures_are_the_float32_learners_only():
    assert set(expected_failed_checks(OnlineKernelClassifier("fogd"))) == {"check_methods_subset_invariance", "check_methods_sample_order_invariance"}
    assert expected_failed_checks(OnlineKernelClassifier("dsg", precision="float64")) == {}
    assert expected_failed_checks(OnlineKernelClassifier("rbp")) == {}
    assert set(expected_failed_checks(OnlineKernelRegressor("dsg", precision="float64"))) == {"check_regressors_train"}


# -- River-style adapter --------------------------------------------------------------------------
def _dicts(X, names):
    return [dict(zip(names, map(float, row))) for row in X]


@pytest.mark.parametrize("name, params", [("fogd", FOGD), ("rbp", {"sigma": 1.0, "budget": 20}), ("dsg", {**DSG, "batch_size": 1, "loss": "logistic"})])
def test_learn_one_equals_partial_fit_on_the_rows_in_order(name, params):
    X, y = _data(n=80)
    names = ["b", "a", "d", "c", "e"]  # dict order differs from the sorted feature order
    river = OnlineLearner(OnlineKernelClassifier(name, **params), classes=["neg", "pos"])
    labels = np.array(["neg", "pos"])[y]
    rows = _dicts(X, names)
    online = []
    for x, label in zip(rows, labels):
        online.append(river.predict_one(x))
        river.learn_one(x, label)
    assert river.features_ == ("a", "b", "c", "d", "e")
    order = [names.index(k) for k in river.features_]
    batch = OnlineKernelClassifier(name, **params).partial_fit(X[:, order], labels, classes=["neg", "pos"])
    _same_state(river.estimator_.state_, batch.state_)
    assert online[0] is None  # nothing learned yet
    assert [river.predict_one(x) for x in rows] == batch.predict(X[:, order]).tolist()
    if name == "dsg":
        p = river.predict_proba_one(rows[0])
        assert p == dict(zip(["neg", "pos"], batch.predict_proba(X[:1, order])[0].tolist()))
    else:
        with pytest.raises(AttributeError, match="defines no probabilities"):
            river.predict_proba_one(rows[0])


def test_river_regressor_given_features_and_bad_rows():
    X, y = make_regression(n_samples=60, n_features=3, random_state=0)
    y = y / y.std()
    river = OnlineLearner(OnlineKernelRegressor("fogd_r", **FOGD_R), features=["z", "y", "x"])
    for x, target in zip(_dicts(X, ["z", "y", "x"]), y):
        river.learn_one(x, target)
    batch = OnlineKernelRegressor("fogd_r", **FOGD_R).partial_fit(X, y)
    _same_state(river.estimator_.state_, batch.state_)
    assert river.predict_one({"x": X[0, 2], "y": X[0, 1], "z": X[0, 0]}) == batch.predict(X[:1])[0]
    with pytest.raises(ValueError, match="missing feature 'x'"):
        river.learn_one({"z": 1.0, "y": 2.0}, 0.5)
    with pytest.raises(ValueError, match="unknown feature 'w'"):
        river.predict_one({"z": 1.0, "y": 2.0, "x": 0.0, "w": 1.0})
    with pytest.raises(ValueError, match="NaN or inf"):
        river.learn_one({"z": float("nan"), "y": 2.0, "x": 0.0}, 0.5)
    with pytest.raises(ValueError, match="feature values must be numbers"):
        river.learn_one({"z": "one", "y": 2.0, "x": 0.0}, 0.5)
    _same_state(river.estimator_.state_, batch.state_)  # nothing learned from the refused rows
    with pytest.raises(ValueError, match="a classifier needs classes="):
        OnlineLearner(OnlineKernelClassifier("fogd"))
    labelled = OnlineLearner(OnlineKernelClassifier("fogd", **FOGD), classes=["a", "b"])
    labelled.learn_one({"x": 1.0}, "a")
    with pytest.raises(ValueError, match="row 0: label 'c' is not one of classes_"):
        labelled.learn_one({"x": 1.0}, "c")


# -- optional dependency ---------------------------------------------------------------------------
def test_okl_core_does_not_import_sklearn():
    code = "import sys, okl_core; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_sklearn_one_line_import_error_naming_the_extra():
    code = "import sys; sys.modules['sklearn'] = None\ntry:\n    import okl_core.sklearn\nexcept ImportError as err:\n    print(err)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "okl_core.sklearn needs scikit-learn >= 1.6: pip install 'okl[sklearn]'\n"


# -- the user documentation -----------------------------------------------------------------------
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_docs_table_is_the_learner_table():
    cell = lambda name: f"`{name}`" if name else "—"  # noqa: E731
    rows = [f"| `{r['learner']}` | {cell(r['two_classes'])} | {cell(r['more_classes'])} | {cell(r['regression'])} |" for r in learner_table()]
    text = DOC.read_text()
    start = text.index("| learner | two classes | three or more | regression |")
    table = text[start:].split("\n\n")[0].splitlines()[2:]
    assert table == rows


def test_docs_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing the examples do lands in the repository
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 5
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name} block {i}", "exec"), {"__name__": "__main__"})
    assert list(tmp_path.iterdir()) == []
