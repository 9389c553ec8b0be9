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
