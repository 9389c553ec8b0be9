"""The conformance suite every registered learner passes (present and future).

Every check of :mod:`okl_core.testing` runs on every name of the registry, each learner
built with its small ``conformance_params``; the save/load round trip as a property test.
The same checks are public: ``okl_core.testing.check_learner`` passes a learner a user
registers (and catches a broken one). Registry-specific properties follow: mixing is
linear in function space for the learners linear in their parameters (DSG on its lazily
scaled coefficients too).
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import okl_core
from okl_core import registry, testing
from okl_core.learners.base import Learner, RandomFeatureConfig, validate_xy
from okl_core.learners.fogd import LinearState
from okl_core.learners.rules import PerceptronRule, fold_linear

NAMES = okl_core.learner_names()
build = testing.conformance_learner
PER_LEARNER_CHECKS = [c for c in testing.CHECKS if c is not testing.check_round_trip]


@pytest.mark.parametrize("check", PER_LEARNER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("name", NAMES)
def test_conformance(name, check):
    check(build(name))


# Options that change a learner's state or fold: the whole suite runs on them too.
OPTION_CASES = [(n, {"step": step}) for step in ("adagrad", "normalized") for n in ("fogd", "mfogd", "fogd_r")]
OPTION_IDS = [f"{n}-" + ",".join(f"{k}={v}" for k, v in p.items()) for n, p in OPTION_CASES]


@pytest.mark.parametrize("check", PER_LEARNER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize(("name", "params"), OPTION_CASES, ids=OPTION_IDS)
def test_conformance_of_options(name, params, check):
    check(build(name, **params))


@pytest.mark.parametrize(("name", "params"), OPTION_CASES, ids=OPTION_IDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_rows=st.integers(min_value=0, max_value=40), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_save_load_round_trip_of_options(name, params, n_rows, seed):
    testing.check_round_trip(build(name, **params), n_rows=(n_rows,), seed=seed)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_rows=st.integers(min_value=0, max_value=40), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_save_load_round_trip(name, n_rows, seed):
    testing.check_round_trip(build(name), n_rows=(n_rows,), seed=seed)


# -- check_learner on a learner of one's own ----------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class PerceptronConfig(RandomFeatureConfig):
    task = "binary"


class RandomFeaturePerceptron(Learner[LinearState]):
    """A user's learner: the Perceptron rule on okl's seeded random features."""

    name = "user_rf_perceptron"
    config_class = PerceptronConfig
    state_class = LinearState
    averaged_fields = ("w",)
    mixable = True
    conformance_params = {"n_components": 32, "sigma": 1.0}

    def __init__(self, config):
        super().__init__(config)
        self.features = okl_core.FourierFeatures(config.feature_spec())

    def feature_spec(self):
        return self.features.spec

    def init(self):
        return LinearState(w=np.zeros(self.features.spec.n_outputs), n_seen=np.asarray(0, dtype=np.int64))

    def predict(self, state, X):
        X, _ = validate_xy(self, X)
        return self.features.transform(X).astype(np.float64) @ state.w

    def update(self, state, X, y):
        X, y = validate_xy(self, X, y)
        w, scores = state.w.copy(), np.empty(len(y))
        fold_linear(PerceptronRule(self.config), self.features.transform(X), w, y, scores)
        return LinearState(w=w, n_seen=np.asarray(int(state.n_seen) + len(y), dtype=np.int64)), scores


class ScoresAfterLearning(RandomFeaturePerceptron):
    """Broken: learns the whole batch first, then scores it (not the online protocol)."""

    name = "user_scores_after_learning"

    def update(self, state, X, y):
        new, _ = super().update(state, X, y)
        return new, self.predict(new, X)


@pytest.fixture
def own_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))


def test_check_learner_passes_a_learner_a_user_registers(own_registry):
    okl_core.register(RandomFeaturePerceptron)
    testing.check_learner("user_rf_perceptron")
    testing.check_learner(RandomFeaturePerceptron.from_params(n_inputs=3, n_components=48, sigma=1.0, seed=5))


def test_check_learner_names_the_learner_and_the_broken_promise(own_registry):
    okl_core.register(ScoresAfterLearning)
    with pytest.raises(AssertionError, match="^user_scores_after_learning: the online scores of a batch update differ"):
        testing.check_learner("user_scores_after_learning")
    with pytest.raises(TypeError, match="Learner or a registered name"):
        testing.check_learner(42)


# -- registry-specific properties --------------------------------------------------------------
MIXABLE = [n for n in NAMES if okl_core.learner_class(n).mixable]
NOT_MIXABLE = [n for n in NAMES if not okl_core.learner_class(n).mixable]
# Learners whose predictions are linear in the parameters that mix (a random-feature
# model's scores are z(x) . w): mixing is then exactly linear in function space. Raker,
# OMKL-GF and the RF-OKS learners weight their kernels by mixed statistics (not linear).
LINEAR_IN_PARAMETERS = {"fogd": {}, "mfogd": {}, "fogd_r": {}, "dsg": {}}
# DSG also with strong decay (the lazy scale is far from 1) and the averaged iterate.
# DSG's exact function-space checks use float64 features; its default float32 predictions
# add rounding of ~1e-7 relative (the float32 case, with a float32 tolerance).
LINEARITY_CASES = [(n, {}) for n in LINEAR_IN_PARAMETERS] + [(n, {"step": step}) for step in ("adagrad", "normalized") for n in ("fogd", "mfogd", "fogd_r")] + [
    ("dsg", {"nu": 0.05, "precision": "float64"}),
    ("dsg", {"nu": 0.05, "averaged": True, "precision": "float64"}),
    ("dsg", {"nu": 1e-3, "averaged": True, "precision": "float64"}),
    ("dsg", {"nu": 0.05, "averaged": True}),
]


def _rtol(learner) -> float:
    return 1e-5 if getattr(learner.config, "precision", "float64") == "float32" else 1e-9


def test_mixing_capability_is_declared_on_both_sides():
    assert MIXABLE and NOT_MIXABLE


def data_for(learner, n, seed):
    n_classes = getattr(learner.config, "n_classes", None) or 3
    return testing.tiny_problem(learner.task, learner.config.n_inputs, n=n, n_classes=n_classes, seed=seed)


def two_shards(learner, n_a=96, n_b=160):
    Xa, ya = data_for(learner, n_a, 3)
    Xb, yb = data_for(learner, n_b, 4)
    return learner.update(learner.init(), Xa, ya)[0], learner.update(learner.init(), Xb, yb)[0]


@pytest.mark.parametrize(("name", "params"), LINEARITY_CASES, ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()) or "default")
@pytest.mark.parametrize("weight", [0.25, 0.5, 0.9])
@pytest.mark.parametrize("merged_model", [False, True], ids=["shard", "merged"])
def test_mix_is_linear_in_function_space(name, params, weight, merged_model):
    """``predict(mix(a, b, w)) == (1 - w) predict(a) + w predict(b)`` for learners linear in
    their parameters. ``merged``: ``b`` is a merged model with ``a``'s history length, as in
    streaming (DSG: its lazy scale is 1 and ``a``'s is not, so blending the raw arrays
    would give another function without any error)."""
    learner = build(name, **params)
    a, b = two_shards(learner)
    if merged_model:
        a, c = two_shards(learner, 128, 128)
        X, y = data_for(learner, 128, 7)
        b = learner.merge([c, learner.update(learner.init(), X, y)[0]])
    X, _ = data_for(learner, 50, 5)
    mixed = okl_core.mix_states(learner, a, b, weight)
    want = (1.0 - weight) * learner.predict(a, X) + weight * learner.predict(b, X)
    scale = np.max(np.abs(want)) + 1e-12
    rtol = _rtol(learner)
    np.testing.assert_allclose(learner.predict(mixed, X), want, rtol=rtol, atol=rtol / 10 * scale)
    assert int(mixed.n_seen) == int(a.n_seen)
    # Either way round (DSG: the local history shorter or longer than the merged one).
    mixed = okl_core.mix_states(learner, b, a, weight)
    want = (1.0 - weight) * learner.predict(b, X) + weight * learner.predict(a, X)
    np.testing.assert_allclose(learner.predict(mixed, X), want, rtol=rtol, atol=rtol / 10 * scale)


@pytest.mark.parametrize("name", ["fogd", "mfogd", "fogd_r", "dsg", "kernel_ogd", "mkernel_ogd", "kernel_ogd_r", "kernel_perceptron"])
def test_explicit_merge_weights_average_the_functions(name):
    """Exact for learners linear in their parameters and for support-set expansions."""
    learner = build(name, **({"precision": "float64"} if name == "dsg" else {}))
    a, b = two_shards(learner)
    X, _ = data_for(learner, 50, 5)
    weighted = learner.merge([a, b], weights=[1.0, 3.0])
    want = 0.25 * learner.predict(a, X) + 0.75 * learner.predict(b, X)
    np.testing.assert_allclose(learner.predict(weighted, X), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_warm_up_changes_nothing_a_learner_then_computes(name):
    # Workers call warm_up at start (okl_core.learners.compiled): one update on a zero row,
    # dropped. The same learner object must then train to a fresh learner's bytes.
    from okl_core.learners.compiled import warm_up

    warmed, fresh = build(name), build(name)
    warm_up(warmed)
    X, y = testing._data(fresh)
    trained = [okl_core.model_bytes(lrn, lrn.update(lrn.init(), X, y)[0]) for lrn in (warmed, fresh)]
    assert trained[0] == trained[1]
