"""okl_core.mix_states / Learner.mix: (1 - w) local + w merged on mixable learners, n_seen
kept; learners that cannot mix refused (the properties for every learner are in the
conformance suite)."""

import numpy as np
import pytest

import okl_core
from okl_core.merge import check_mixable, mix_states
from okl_core.state import parse_version, version_file_name, write_new_file


def _states():
    learner = okl_core.make_learner("fogd", n_inputs=3, n_components=8, sigma=1.0, eta=0.1)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int32)
    a, _ = learner.update(learner.init(), X[:20], y[:20])
    b, _ = learner.update(learner.init(), X[20:], y[20:])
    return learner, a, b


def test_mix_is_the_convex_combination_with_local_n_seen():
    learner, a, b = _states()
    b = b._replace(n_seen=np.asarray(99, dtype=np.int64))
    mixed = mix_states(learner, a, b, 0.3)
    np.testing.assert_allclose(mixed.w, 0.7 * a.w + 0.3 * b.w, rtol=1e-12)
    assert int(mixed.n_seen) == int(a.n_seen) == 20
    assert mix_states(learner, a, b, 0.0) is a
    np.testing.assert_array_equal(mix_states(learner, a, b, 1.0).w, b.w)


def test_mix_rejects_bad_weights_and_learners_that_cannot_mix():
    learner, a, b = _states()
    with pytest.raises(ValueError, match="weight"):
        mix_states(learner, a, b, 1.5)
    with pytest.raises(ValueError, match="weight"):
        learner.mix(a, b, -0.5)
    refused = [name for name in okl_core.learner_names() if not okl_core.learner_class(name).mixable]
    # sums of statistics, support sets (kernel_ogd passed the old probe, then failed mid-stream)
    for name in ("pkawv_taylor", "krr", "kernel_ogd", "mkernel_ogd", "kernel_perceptron", "nogd", "oks"):
        assert name in refused
    for name in refused:
        cls = okl_core.learner_class(name)
        other = okl_core.make_learner(name, n_inputs=3, **{k: v for k, v in cls.conformance_params.items() if k != "n_inputs"})
        s = other.init()
        with pytest.raises(okl_core.NotMergeableError, match=f"^{name} cannot mix"):
            check_mixable(other)
        with pytest.raises(okl_core.NotMergeableError, match=f"^{name} cannot mix"):
            mix_states(other, s, s, 0.5)
        assert mix_states(other, s, s, 0.0) is s


def test_refusal_messages_say_why():
    def message(name):
        with pytest.raises(okl_core.NotMergeableError) as err:
            check_mixable(okl_core.make_learner(name, n_inputs=3))
        return str(err.value)

    assert "count examples twice" in message("pkawv_taylor")
    assert "support set" in message("kernel_ogd") and "without bound" in message("kernel_ogd")
    assert "landmarks" in message("nogd")


def test_kernel_ogd_states_of_different_sizes_merge_but_do_not_mix():
    learner = okl_core.make_learner("kernel_ogd", n_inputs=3, sigma=1.0, eta=0.5)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3)).astype(np.float32)
    y = np.where(X[:, 1] > 0, 1, -1)
    a, _ = learner.update(learner.init(), X[:20], y[:20])
    b, _ = learner.update(learner.init(), X[20:], y[20:])
    assert len(a.alpha) != len(b.alpha)
    merged = okl_core.merge_states(learner, [a, b])
    assert len(merged.alpha) == len(a.alpha) + len(b.alpha)
    with pytest.raises(okl_core.NotMergeableError, match="kernel_ogd cannot mix"):
        mix_states(learner, a, merged, 0.5)


def test_dsg_mixes_true_coefficients_of_a_merged_model():
    """The streaming case: a shard (lazy scale < 1) mixes a merged model (scale 1) of the
    same history length. Blending the raw arrays was off by a few percent at nu = 1e-3 and
    far more at nu = 0.05; mixing the true coefficients is exact."""
    for nu in (1e-3, 0.05):
        learner = okl_core.make_learner("dsg", n_inputs=3, block_size=16, batch_size=8, theta=20.0, nu=nu, precision="float64")
        rng = np.random.default_rng(2)
        X = rng.normal(size=(192, 3)).astype(np.float32)
        y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
        local, _ = learner.update(learner.init(), X[:64], y[:64])
        b1, _ = learner.update(learner.init(), X[64:128], y[64:128])
        b2, _ = learner.update(learner.init(), X[128:], y[128:])
        merged = okl_core.merge_states(learner, [b1, b2])
        assert float(merged.scale) == 1.0 and float(local.scale) < 1.0
        mixed = mix_states(learner, local, merged, 0.5)
        want = 0.5 * learner.predict(local, X) + 0.5 * learner.predict(merged, X)
        np.testing.assert_allclose(learner.predict(mixed, X), want, rtol=1e-10, atol=1e-12)
        assert int(mixed.t) == int(local.t) and int(mixed.n_seen) == 64
        # the mixed shard keeps learning: the next block is learned at the next iteration
        more, _ = learner.update(mixed, X[:8], y[:8])
        assert int(more.t) == int(mixed.t) + 1 and len(more.coef) == int(more.t)


def test_raker_mix_keeps_normalised_log_weights():
    learner = okl_core.make_learner("raker", n_inputs=3, kernels="gaussian:0.5,gaussian:2", n_components=8, schedule="constant", eta=0.3)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3)).astype(np.float32)
    y = np.cos(X[:, 0])
    a, _ = learner.update(learner.init(), X[:30], y[:30])
    b, _ = learner.update(learner.init(), X[30:], y[30:])
    mixed = mix_states(learner, a, b, 0.4)
    assert np.isclose(np.exp(mixed.log_w).sum(), 1.0)
    np.testing.assert_allclose(mixed.theta, 0.6 * a.theta + 0.4 * b.theta, rtol=1e-12)


def test_version_files_are_named_in_order_and_never_replaced(tmp_path):
    assert version_file_name(12) == "model-v000012.npz" and parse_version("/x/model-v000012.npz") == 12
    assert parse_version("model.npz") is None
    path = tmp_path / version_file_name(1)
    assert write_new_file(path, b"one") and not write_new_file(path, b"two")
    assert path.read_bytes() == b"one" and [p.name for p in tmp_path.iterdir()] == [path.name]
