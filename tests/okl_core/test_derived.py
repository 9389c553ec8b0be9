"""Values derived from the data: data defaults, the mini-language in okl_core, make_learner(data=X)."""

import numpy as np
import pytest

import okl_core
from okl_core.derived import complete_params, data_defaults, resolve_params, scaled_dictionary
from okl_core.learners.multikernel import OKS_DICTIONARY, parse_kernel_dictionary


def _rows(n=200, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)) * np.array([1.0, 10.0, 100.0])[:d]


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_every_kernel_learner_takes_sigma_median(name):
    X = _rows()
    learner = okl_core.make_learner(name, data=X, sigma="median", **({"n_classes": 3} if "n_classes" in _required(name) else {}))
    median = okl_core.median_heuristic(X, n_samples=1000)
    if hasattr(learner.config, "sigma"):
        assert learner.config.sigma == median
    else:  # a multi-kernel learner: its default dictionary in units of the median
        default = next(f.default for f in _fields(name) if f.name == "kernels")
        assert [s for _, s in learner.config.dictionary] == [s * median for _, s in parse_kernel_dictionary(default)]
    assert learner.config.n_inputs == 3


def _fields(name):
    import dataclasses

    return dataclasses.fields(okl_core.learner_class(name).config_class)


def _required(name):
    import dataclasses

    return {f.name for f in _fields(name) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_defaults_with_data_are_the_data_defaults_resolved(name):
    X = _rows()
    extra = {"n_classes": 3} if "n_classes" in _required(name) else {}
    learner = okl_core.make_learner(name, data=X, **extra)
    median = okl_core.median_heuristic(X, n_samples=1000)
    defaults = data_defaults(name)
    if "sigma" in defaults:
        assert learner.config.sigma == median
    if "kernels" in defaults:
        assert learner.config.kernels == scaled_dictionary(defaults["kernels"].replace("*median", ""), median)
    if "horizon" in defaults:
        assert learner.config.horizon == len(X)
    # without data: the config's own number, the same learner as before data defaults existed
    built = okl_core.make_learner(name, n_inputs=3, **extra, **({"horizon": 10} if "horizon" in _required(name) else {}))
    for key in defaults:
        if key != "horizon":
            assert getattr(built.config, key) == next(f.default for f in _fields(name) if f.name == key)


def test_the_laplacian_kernel_takes_the_l1_median():
    X = _rows()
    learner = okl_core.make_learner("fogd", data=X, kernel="laplacian", sigma="0.5*median")
    assert learner.config.sigma == 0.5 * okl_core.median_heuristic(X, n_samples=1000, metric="l1")


def test_a_derived_value_without_data_is_refused_with_the_way_out():
    with pytest.raises(ValueError, match=r"fogd: sigma='median' is derived from the data: pass make_learner\('fogd', data=X"):
        okl_core.make_learner("fogd", n_inputs=3, sigma="median")
    with pytest.raises(ValueError, match="horizon='n' is derived from the data"):
        okl_core.make_learner("oks", n_inputs=3, horizon="n")


def test_resolve_params_is_what_make_learner_builds():
    X = _rows(n=50)
    params = resolve_params("ioks", {"sigma": "2*median", "loss": "logistic"}, X, n_rows=5000)
    median = okl_core.median_heuristic(X)
    assert params["horizon"] == 5000 and params["n_inputs"] == 3 and params["loss"] == "logistic"
    assert params["kernels"] == ",".join(f"gaussian:{2 * s * median!r}" for _, s in parse_kernel_dictionary(OKS_DICTIONARY))
    assert okl_core.make_learner("ioks", **params).config.kernels == params["kernels"]


def test_multi_kernel_sigma_scales_the_default_dictionary():
    assert complete_params("oks_pp", {"sigma": 2.0})["kernels"] == "gaussian:0.5,gaussian:1.0,gaussian:2.0,gaussian:4.0,gaussian:8.0,gaussian:16.0"
    assert complete_params("oks_pp", {"sigma": 1.0})["kernels"] == scaled_dictionary(OKS_DICTIONARY, 1.0)
    assert parse_kernel_dictionary(complete_params("oks_pp", {"sigma": 1.0})["kernels"]) == parse_kernel_dictionary(OKS_DICTIONARY)
    with pytest.raises(ValueError, match="oks_pp: give sigma .* or kernels, not both"):
        complete_params("oks_pp", {"sigma": 2.0, "kernels": OKS_DICTIONARY})
    with pytest.raises(ValueError, match="sigma='wide'"):
        complete_params("oks_pp", {"sigma": "wide"})


@pytest.mark.parametrize("bad, message", [
    ({"sigma": "median/2"}, "sigma='median/2': expected a number"),
    ({"kernels": "gaussian:x*median"}, "kernels: entry 'gaussian:x\\*median' is not KERNEL:<k>\\*median"),
    ({"n_inputs": 4}, "n_inputs=4 but the data has 3 columns"),
])
def test_malformed_values_are_refused_in_one_line(bad, message):
    with pytest.raises(ValueError, match=message):
        resolve_params("oks_pp" if "kernels" in bad else "fogd", bad, _rows())


def test_one_median_for_every_shard_and_rerun():
    """The median is taken over a fixed-seed subsample: the same rows give the same bytes."""
    X = _rows(n=3000)
    a, b = resolve_params("fogd", {}, X), resolve_params("fogd", {}, X.copy())
    assert a == b and a["sigma"] == okl_core.median_heuristic(X, n_samples=1000, seed=0)


def test_the_scikit_learn_estimators_derive_their_defaults_from_the_first_rows():
    pytest.importorskip("sklearn")
    from okl_core.sklearn import OnlineKernelClassifier, OnlineKernelRegressor

    X = _rows(n=120)
    y = (X[:, 0] > 0).astype(int)
    median = okl_core.median_heuristic(X, n_samples=1000)
    assert OnlineKernelClassifier(learner="fogd").fit(X, y).learner_.config.sigma == median
    assert OnlineKernelRegressor(learner="fogd", sigma="0.5*median").fit(X, X[:, 1]).learner_.config.sigma == 0.5 * median
    first = X[:40]  # partial_fit: the first call's rows
    model = OnlineKernelClassifier(learner="oks_pp", sigma="median").partial_fit(first, y[:40], classes=[0, 1])
    model.partial_fit(X[40:], y[40:])
    m40 = okl_core.median_heuristic(first, n_samples=1000)
    assert [s for _, s in model.learner_.config.dictionary] == [s * m40 for _, s in parse_kernel_dictionary(OKS_DICTIONARY)]
    assert OnlineKernelClassifier(learner="fogd", sigma=2.0).fit(X, y).learner_.config.sigma == 2.0
    # one row: the default keeps its configured number; an explicit formula is refused in one line
    assert OnlineKernelClassifier(learner="fogd").partial_fit(X[:1], y[:1], classes=[0, 1]).learner_.config.sigma == 8.0
    with pytest.raises(ValueError, match="fogd: sigma='median' is derived from the data and needs at least 2 rows"):
        OnlineKernelClassifier(learner="fogd", sigma="median").partial_fit(X[:1], y[:1], classes=[0, 1])
