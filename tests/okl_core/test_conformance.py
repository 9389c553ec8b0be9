"""The conformance suite every registered learner passes (present and future).

Parametrized over ``okl_core.learner_names()``; each learner's ``conformance_params`` keep
it small. Checks: invalid config -> ValueError; predict before any update; same seed ->
same state bytes; inputs never mutated; batch update equals the row-by-row fold (unless the
learner declares itself mini-batch defined); save/load round trip (property test); learns a
tiny deterministic problem better than the trivial predictor.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import okl_core
from okl_core.learners.base import NotMergeableError

from .learner_data import error, tiny_problem, trivial_error

NAMES = okl_core.learner_names()
N_INPUTS = 4


def build(name, **overrides):
    cls = okl_core.learner_class(name)
    return okl_core.make_learner(name, **{"n_inputs": N_INPUTS, **cls.conformance_params, **overrides})


def data_for(learner, n=240, seed=0):
    n_classes = getattr(learner.config, "n_classes", None) or 3
    return tiny_problem(learner.task, N_INPUTS, n=n, n_classes=n_classes, seed=seed)


def state_bytes(learner, state) -> bytes:
    return okl_core.model_bytes(learner, state)


@pytest.mark.parametrize("name", NAMES)
def test_invalid_configs_raise_value_error(name):
    with pytest.raises(ValueError):
        okl_core.make_learner(name)  # n_inputs missing
    with pytest.raises(ValueError):
        build(name, n_inputs=0)
    with pytest.raises(ValueError):
        build(name, no_such_parameter=1)
    with pytest.raises(ValueError):
        build(name, n_inputs="four")


@pytest.mark.parametrize("name", NAMES)
def test_every_positive_numeric_parameter_rejects_a_negative_value(name):
    learner = build(name)
    for field in dataclasses.fields(learner.config):
        value = getattr(learner.config, field.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            continue
        if field.name in ("seed",):
            continue
        with pytest.raises(ValueError):
            build(name, **{field.name: -abs(value) - 1})


@pytest.mark.parametrize("name", NAMES)
def test_predict_before_any_update(name):
    learner = build(name)
    X, y = data_for(learner, n=7)
    scores = learner.predict(learner.init(), X)
    assert len(scores) == 7
    assert np.all(np.isfinite(scores))


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_state_bytes_and_other_seed_differs(name):
    X, y = data_for(build(name))
    runs = []
    for seed_learner in (build(name), build(name)):
        state, _ = seed_learner.update(seed_learner.init(), X, y)
        runs.append(state_bytes(seed_learner, state))
    assert runs[0] == runs[1]
    learner = build(name)
    if "seed" in {f.name for f in dataclasses.fields(learner.config)}:
        other = build(name, seed=learner.config.seed + 1)
        state, _ = other.update(other.init(), X, y)
        first, _ = learner.update(learner.init(), X, y)
        assert not np.array_equal(other.predict(state, X), learner.predict(first, X))


@pytest.mark.parametrize("name", NAMES)
def test_inputs_never_mutated(name):
    learner = build(name)
    X, y = data_for(learner)
    state, _ = learner.update(learner.init(), X[:100], y[:100])
    before = [np.copy(a) for a in state]
    X_copy, y_copy = X.copy(), y.copy()
    learner.update(state, X, y)
    learner.predict(state, X)
    for a, b in zip(state, before):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(y, y_copy)


@pytest.mark.parametrize("name", NAMES)
def test_batch_update_equals_row_by_row_fold(name):
    learner = build(name)
    if learner.minibatch_defined:
        pytest.skip(f"{name} is defined on mini-batches (declares minibatch_defined)")
    X, y = data_for(learner, n=120)
    batch_state, batch_scores = learner.update(learner.init(), X, y)
    state, scores = learner.init(), []
    for i in range(len(y)):
        state, s = learner.update(state, X[i : i + 1], y[i : i + 1])
        scores.append(s)
    # Equal up to float rounding of the feature map (a matrix product over 1 vs n rows).
    np.testing.assert_allclose(np.concatenate(scores), batch_scores, rtol=1e-6, atol=1e-6)
    for a, b in zip(state, batch_state):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_minibatch_learner_is_invariant_to_splits_at_batch_boundaries(name):
    learner = build(name)
    if not learner.minibatch_defined:
        pytest.skip("row-by-row learner: covered by the fold test")
    X, y = data_for(learner, n=96)
    whole, _ = learner.update(learner.init(), X, y)
    step = learner.config.batch_size * 3
    state = learner.init()
    for i in range(0, len(y), step):
        state, _ = learner.update(state, X[i : i + step], y[i : i + step])
    assert state_bytes(learner, state) == state_bytes(learner, whole)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_rows=st.integers(min_value=0, max_value=40), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_save_load_round_trip(tmp_path, name, n_rows, seed):
    learner = build(name, **({"seed": seed} if "seed" in {f.name for f in dataclasses.fields(build(name).config)} else {}))
    X, y = data_for(learner, n=max(n_rows, 1), seed=seed % 1000)
    state, _ = learner.update(learner.init(), X[:n_rows], y[:n_rows])
    path = tmp_path / f"{name}-{seed}-{n_rows}.npz"
    okl_core.save_model(path, learner, state)
    loaded_learner, loaded = okl_core.load_model(path)
    assert loaded_learner.name == learner.name and loaded_learner.config == learner.config
    assert state_bytes(loaded_learner, loaded) == state_bytes(learner, state)
    np.testing.assert_array_equal(loaded_learner.predict(loaded, X), learner.predict(state, X))


@pytest.mark.parametrize("name", NAMES)
def test_training_continues_identically_after_save_and_load(tmp_path, name):
    # Pipelines hand models between rounds as files: a loaded state must behave bit for
    # bit like the in-memory one (same values and memory layout).
    learner = build(name)
    X, y = data_for(learner, n=160)
    state, _ = learner.update(learner.init(), X[:80], y[:80])
    okl_core.save_model(tmp_path / "m.npz", learner, state)
    _, loaded = okl_core.load_model(tmp_path / "m.npz")
    in_memory, scores_a = learner.update(state, X[80:], y[80:])
    from_file, scores_b = learner.update(loaded, X[80:], y[80:])
    np.testing.assert_array_equal(scores_a, scores_b)
    assert state_bytes(learner, in_memory) == state_bytes(learner, from_file)


@pytest.mark.parametrize("name", NAMES)
def test_learns_better_than_the_trivial_predictor(name):
    learner = build(name)
    X, y = data_for(learner, n=600, seed=1)
    state = learner.init()
    for _ in range(3):
        state, _ = learner.update(state, X, y)
    X_test, y_test = data_for(learner, n=300, seed=2)
    assert error(learner, learner.predict(state, X_test), y_test) < 0.9 * trivial_error(learner.task, y_test)


@pytest.mark.parametrize("name", NAMES)
def test_merge_of_identical_states_or_clear_refusal(name):
    learner = build(name)
    X, y = data_for(learner)
    state, _ = learner.update(learner.init(), X, y)
    try:
        merged = okl_core.merge_states(learner, [state, state])
    except NotMergeableError as err:
        assert learner.name in str(err)
        return
    assert learner.merge_semantics != "none", f"{name} declares merge_semantics='none' but merged"
    assert int(merged.n_seen) == 2 * int(state.n_seen)
    if learner.merge_semantics == "sum":  # sufficient statistics add: the data seen twice
        twice, _ = learner.update(state, X, y)
        np.testing.assert_allclose(learner.predict(merged, X), learner.predict(twice, X), rtol=1e-6, atol=1e-9)
        return
    np.testing.assert_allclose(learner.predict(merged, X), learner.predict(state, X), rtol=1e-9, atol=1e-9)


# -- merge and mix: the learner protocol's operations ----------------------------------------
MERGEABLE = [n for n in NAMES if okl_core.learner_class(n).merge_semantics != "none"]
AVERAGING = [n for n in NAMES if okl_core.learner_class(n).merge_semantics == "average"]
MIXABLE = [n for n in NAMES if okl_core.learner_class(n).mixable]
NOT_MIXABLE = [n for n in NAMES if not okl_core.learner_class(n).mixable]
# Learners whose predictions are linear in the parameters that mix (a random-feature
# model's scores are z(x) . w): mixing is then exactly linear in function space. Raker,
# OMKL-GF and the RF-OKS learners weight their kernels by mixed statistics (not linear).
LINEAR_IN_PARAMETERS = {"fogd": {}, "mfogd": {}, "fogd_r": {}, "dsg": {}}
# DSG also with strong decay (the lazy scale is far from 1) and the averaged iterate.
LINEARITY_CASES = [(n, {}) for n in LINEAR_IN_PARAMETERS] + [
    ("dsg", {"nu": 0.05}),
    ("dsg", {"nu": 0.05, "averaged": True}),
    ("dsg", {"nu": 1e-3, "averaged": True}),
]


def two_shards(learner, n_a=96, n_b=160):
    """States trained from init on different data (different lengths: DSG histories differ)."""
    Xa, ya = data_for(learner, n=n_a, seed=3)
    Xb, yb = data_for(learner, n=n_b, seed=4)
    a, _ = learner.update(learner.init(), Xa, ya)
    b, _ = learner.update(learner.init(), Xb, yb)
    return a, b


def assert_same_function(learner, s, t, X, rtol=1e-9, atol=1e-9):
    np.testing.assert_allclose(learner.predict(s, X), learner.predict(t, X), rtol=rtol, atol=atol)


def test_mixing_capability_is_declared_consistently():
    assert MIXABLE and NOT_MIXABLE
    for name in MIXABLE:  # a learner mixes only what it can also merge as an average
        assert okl_core.learner_class(name).merge_semantics == "average", name


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
        X, y = data_for(learner, n=128, seed=7)
        b = learner.merge([c, learner.update(learner.init(), X, y)[0]])
    X, _ = data_for(learner, n=50, seed=5)
    mixed = okl_core.mix_states(learner, a, b, weight)
    want = (1.0 - weight) * learner.predict(a, X) + weight * learner.predict(b, X)
    scale = np.max(np.abs(want)) + 1e-12
    np.testing.assert_allclose(learner.predict(mixed, X), want, rtol=1e-9, atol=1e-10 * scale)
    assert int(mixed.n_seen) == int(a.n_seen)
    # Either way round (DSG: the local history shorter or longer than the merged one).
    mixed = okl_core.mix_states(learner, b, a, weight)
    want = (1.0 - weight) * learner.predict(b, X) + weight * learner.predict(a, X)
    np.testing.assert_allclose(learner.predict(mixed, X), want, rtol=1e-9, atol=1e-10 * scale)


@pytest.mark.parametrize("name", MIXABLE)
def test_mix_of_a_state_with_itself_is_the_same_function(name):
    learner = build(name)
    a, _ = two_shards(learner)
    X, _ = data_for(learner, n=50, seed=5)
    for weight in (0.3, 1.0):
        mixed = okl_core.mix_states(learner, a, a, weight)
        assert_same_function(learner, mixed, a, X)
        assert int(mixed.n_seen) == int(a.n_seen)


@pytest.mark.parametrize("name", MIXABLE)
def test_mix_weights_zero_and_one(name):
    learner = build(name)
    a, b = two_shards(learner)
    X, _ = data_for(learner, n=50, seed=5)
    assert okl_core.mix_states(learner, a, b, 0.0) is a
    assert learner.mix(a, b, 0.0) is a
    one = okl_core.mix_states(learner, a, b, 1.0)
    assert_same_function(learner, one, b, X)
    assert int(one.n_seen) == int(a.n_seen)  # counters stay the shard's own
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="weight"):
            okl_core.mix_states(learner, a, b, bad)


@pytest.mark.parametrize("name", MIXABLE)
def test_mix_is_the_two_state_merge_in_function(name):
    """``mix(a, b, w)`` predicts like ``merge([a, b], weights=[1 - w, w])``: one rule per field."""
    learner = build(name)
    a, b = two_shards(learner)
    X, _ = data_for(learner, n=50, seed=5)
    for weight in (0.2, 0.7):
        mixed = okl_core.mix_states(learner, a, b, weight)
        merged = learner.merge([a, b], weights=[1.0 - weight, weight])
        assert_same_function(learner, mixed, merged, X, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", NOT_MIXABLE)
def test_learners_that_cannot_mix_are_refused_by_check_mixable(name):
    learner = build(name)
    with pytest.raises(NotMergeableError) as err:
        okl_core.merge.check_mixable(learner)
    message = str(err.value)
    assert message.startswith(f"{name} cannot mix") and "\n" not in message
    state = learner.init()
    with pytest.raises(NotMergeableError, match=f"{name} cannot mix"):
        okl_core.mix_states(learner, state, state, 0.5)
    assert okl_core.mix_states(learner, state, state, 0.0) is state  # weight 0 never mixes


@pytest.mark.parametrize("name", MIXABLE)
def test_mixable_learners_pass_check_mixable(name):
    okl_core.merge.check_mixable(build(name))


@pytest.mark.parametrize("name", AVERAGING)
def test_merge_with_explicit_weights_is_the_weighted_average(name):
    """Explicit weights replace ``n_seen``: the merged function is the weighted average
    (exact for learners linear in their parameters and for support-set expansions), and
    weights proportional to ``n_seen`` give the default merge bit for bit."""
    learner = build(name)
    a, b = two_shards(learner)
    X, _ = data_for(learner, n=50, seed=5)
    default = learner.merge([a, b])
    scaled = learner.merge([a, b], weights=[3.0 * int(a.n_seen), 3.0 * int(b.n_seen)])
    assert state_bytes(learner, scaled) == state_bytes(learner, default)
    assert int(default.n_seen) == int(a.n_seen) + int(b.n_seen)
    weighted = learner.merge([a, b], weights=[1.0, 3.0])
    assert int(weighted.n_seen) == int(default.n_seen)  # weights never change the counters
    if name in LINEAR_IN_PARAMETERS or learner.state_class._fields == ("support", "alpha", "n_seen"):
        want = 0.25 * learner.predict(a, X) + 0.75 * learner.predict(b, X)
        np.testing.assert_allclose(learner.predict(weighted, X), want, rtol=1e-9, atol=1e-12)
    for field in learner.averaged_fields:
        np.testing.assert_allclose(getattr(weighted, field), 0.25 * np.asarray(getattr(a, field)) + 0.75 * np.asarray(getattr(b, field)), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="weights"):
        learner.merge([a, b], weights=[1.0])
    with pytest.raises(ValueError, match="weights"):
        learner.merge([a, b], weights=[1.0, -1.0])


@pytest.mark.parametrize("name", [n for n in MERGEABLE if n not in AVERAGING])
def test_exact_merges_take_no_weights(name):
    learner = build(name)
    a, b = two_shards(learner, n_a=30, n_b=40)
    with pytest.raises(ValueError, match="no weights"):
        learner.merge([a, b], weights=[1.0, 1.0])


@pytest.mark.parametrize("name", AVERAGING)
def test_merge_from_a_base_counts_the_base_once(name):
    """With ``base`` the weights are the examples added since it, and every counter
    (``n_seen``, usage counts) is ``base + sum(state - base)``."""
    learner = build(name)
    base, _ = two_shards(learner, n_a=48)
    X, y = data_for(learner, n=120, seed=6)
    s1, _ = learner.update(base, X[:40], y[:40])
    s2, _ = learner.update(base, X[40:], y[40:])
    merged = okl_core.merge_states(learner, [s1, s2], base=base)
    assert state_bytes(learner, merged) == state_bytes(learner, learner.merge([s1, s2], weights=[40.0, 80.0], base=base))
    for field in learner.counted_fields:
        b0 = np.asarray(getattr(base, field))
        want = b0 + (np.asarray(getattr(s1, field)) - b0) + (np.asarray(getattr(s2, field)) - b0)
        np.testing.assert_array_equal(getattr(merged, field), want, err_msg=field)
