"""okl_core.mix_states: (1 - w) local + w merged on averaging learners, n_seen kept."""

import numpy as np
import pytest

import okl_core
from okl_core.merge import mix_states
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


def test_mix_rejects_bad_weights_and_non_averaging_learners():
    learner, a, b = _states()
    with pytest.raises(ValueError, match="weight"):
        mix_states(learner, a, b, 1.5)
    summing = [name for name in okl_core.learner_names() if okl_core.learner_class(name).merge_semantics != "average"]
    for name in summing:
        cls = okl_core.learner_class(name)
        other = okl_core.make_learner(name, n_inputs=3, **{k: v for k, v in cls.conformance_params.items() if k != "n_inputs"})
        s = other.init()
        with pytest.raises(okl_core.NotMergeableError):
            mix_states(other, s, s, 0.5)
        assert mix_states(other, s, s, 0.0) is s


def test_version_files_are_named_in_order_and_never_replaced(tmp_path):
    assert version_file_name(12) == "model-v000012.npz" and parse_version("/x/model-v000012.npz") == 12
    assert parse_version("model.npz") is None
    path = tmp_path / version_file_name(1)
    assert write_new_file(path, b"one") and not write_new_file(path, b"two")
    assert path.read_bytes() == b"one" and [p.name for p in tmp_path.iterdir()] == [path.name]
