"""DSG against a naive transcription of Algorithm 1 with blocks and mini-batches."""

import numpy as np
import pytest

import okl_core
from okl_core.features import frequency_block
from okl_core.losses import make_loss

from .learner_data import tiny_problem


def _phi(X, seed, block, r, sigma):
    """phi_block(X) = [cos, sin](X Omega_block) / sqrt(r/2), float64."""
    m = r // 2
    omega = frequency_block("gaussian", sigma, X.shape[1], m, seed, block).astype(np.float64)
    P = X.astype(np.float32).astype(np.float64) @ omega
    return np.hstack([np.cos(P), np.sin(P)]) / np.sqrt(m)


def _naive_dsg(X, y, loss, r, B, theta, nu, sigma=1.0, seed=0, n_out=1, step_offset=0.0, precondition_eps=None):
    """Explicit coefficients, explicit decay of every earlier block, no lazy scale."""
    A, outputs, averages = [], [], []
    for i, start in enumerate(range(0, len(y), B), start=1):
        Xb, yb = X[start : start + B], y[start : start + B]
        u = np.zeros((len(yb), n_out))
        for j, Aj in enumerate(A):
            u += _phi(Xb, seed, j, r, sigma) @ Aj
        outputs.append(u)
        gamma = theta / (step_offset + i)
        g = loss.grad(u if n_out > 1 else u[:, 0], yb).reshape(len(yb), -1)
        phi = _phi(Xb, seed, i - 1, r, sigma)
        new = -gamma / len(yb) * phi.T @ g
        if precondition_eps is not None:
            new = np.linalg.inv(phi.T @ phi / len(yb) + precondition_eps * np.eye(r)) @ new
        A = [Aj * (1 - gamma * nu) for Aj in A] + [new]
        averages.append([a.copy() for a in A])
    return A, np.concatenate(outputs), averages


@pytest.mark.parametrize("loss, task", [("hinge", "binary"), ("logistic", "binary"), ("square", "regression"), ("quantile", "regression")])
def test_matches_naive_algorithm(loss, task):
    X, y = tiny_problem(task, 3, n=100)
    learner = okl_core.make_learner("dsg", n_inputs=3, loss=loss, block_size=8, batch_size=10, theta=3.0, step_offset=0.0, nu=0.05)
    state, scores = learner.update(learner.init(), X, y)
    A, ref_scores, _ = _naive_dsg(X, y, make_loss(loss), 8, 10, 3.0, 0.05)
    np.testing.assert_allclose(scores, ref_scores[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.coef * state.scale, np.stack(A), rtol=1e-5, atol=1e-7)
    assert int(state.t) == 10 and int(state.n_seen) == 100


def test_preconditioned_blocks_match_reference():
    X, y = tiny_problem("regression", 3, n=80)
    learner = okl_core.make_learner("dsg", n_inputs=3, loss="square", block_size=6, batch_size=20, theta=1.0, step_offset=0.0,
                                    nu=0.01, precondition=True, precondition_eps=1e-3)
    state, scores = learner.update(learner.init(), X, y)
    A, ref, _ = _naive_dsg(X, y, make_loss("square"), 6, 20, 1.0, 0.01, precondition_eps=1e-3)
    np.testing.assert_allclose(scores, ref[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.coef * state.scale, np.stack(A), rtol=1e-5, atol=1e-7)


def test_softmax_multiclass_and_step_offset():
    X, y = tiny_problem("multiclass", 3, n=60, n_classes=3)
    learner = okl_core.make_learner("dsg", n_inputs=3, loss="softmax", n_classes=3, block_size=6, batch_size=12,
                                    theta=5.0, step_offset=4.0, nu=0.01)
    state, scores = learner.update(learner.init(), X, y)
    A, ref, _ = _naive_dsg(X, y, make_loss("softmax"), 6, 12, 5.0, 0.01, n_out=3, step_offset=4.0)
    assert scores.shape == (60, 3)
    np.testing.assert_allclose(scores, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.coef * state.scale, np.stack(A), rtol=1e-5, atol=1e-7)


def test_factor_exactly_zero_at_the_first_iteration_matches_reference():
    # gamma_1 nu = theta nu = 1: the decay factor is exactly 0 while there is no past yet.
    X, y = tiny_problem("binary", 3, n=40)
    learner = okl_core.make_learner("dsg", n_inputs=3, block_size=4, batch_size=10, theta=4.0, step_offset=0.0, nu=0.25)
    state, _ = learner.update(learner.init(), X, y)
    A, _, _ = _naive_dsg(X, y, make_loss("hinge"), 4, 10, 4.0, 0.25)
    assert np.all(np.isfinite(state.coef))
    np.testing.assert_allclose(state.coef * state.scale, np.stack(A), rtol=1e-5, atol=1e-7)


def test_zero_factor_with_history_zeroes_every_earlier_block():
    X, y = tiny_problem("binary", 3, n=30)
    # theta / (offset + i) * nu == 1 exactly at i = 2: theta = 2, offset = 0, nu = 1.
    learner = okl_core.make_learner("dsg", n_inputs=3, block_size=4, batch_size=10, theta=2.0, step_offset=0.0, nu=1.0)
    state, _ = learner.update(learner.init(), X[:20], y[:20])
    true = state.coef * state.scale
    assert np.all(true[0] == 0.0) and np.any(true[1] != 0.0)


def test_lazy_scale_renormalises_before_underflow():
    X, y = tiny_problem("binary", 3, n=4000)
    learner = okl_core.make_learner("dsg", n_inputs=3, block_size=2, batch_size=2, theta=1.0, step_offset=0.0, nu=0.9)
    state, scores = learner.update(learner.init(), X, y)
    assert np.isfinite(scores).all() and 1e-100 <= abs(float(state.scale)) <= 1.0


def test_averaged_iterate_equals_the_explicit_average():
    X, y = tiny_problem("regression", 3, n=50)
    learner = okl_core.make_learner("dsg", n_inputs=3, loss="square", block_size=4, batch_size=10, theta=2.0, step_offset=0.0,
                                    nu=0.1, averaged=True)
    state, _ = learner.update(learner.init(), X, y)
    _, _, history = _naive_dsg(X, y, make_loss("square"), 4, 10, 2.0, 0.1)
    t = len(history)
    average = np.zeros((t, 4, 1))
    for snapshot in history:
        average[: len(snapshot)] += np.stack(snapshot)
    np.testing.assert_allclose(state.avg_coef, average / t, rtol=1e-5, atol=1e-7)
    plain = okl_core.make_learner("dsg", n_inputs=3, loss="square", block_size=4, batch_size=10, theta=2.0, step_offset=0.0, nu=0.1)
    np.testing.assert_allclose(learner.predict(state, X), plain.predict(state._replace(coef=state.avg_coef, scale=np.asarray(1.0)), X))


@pytest.mark.parametrize("precision, tol", [("float64", 1e-12), ("float32", 2e-6)])
def test_prediction_in_chunks_matches_one_shot(monkeypatch, precision, tol):
    X, y = tiny_problem("binary", 3, n=200)
    learner = okl_core.make_learner("dsg", n_inputs=3, block_size=8, batch_size=5, theta=5.0, step_offset=0.0, precision=precision)
    state, _ = learner.update(learner.init(), X, y)
    whole = learner.predict(state, X)
    import okl_core.learners.dsg as dsg_module

    monkeypatch.setattr(dsg_module, "_PREDICT_CHUNK_FLOATS", 50)  # forces many chunks
    np.testing.assert_allclose(learner.predict(state, X), whole, rtol=tol, atol=tol)


def _golden_case(**params):
    rng = np.random.default_rng(7)
    X = rng.random((640, 20), dtype=np.float32)
    y = np.where(X[:, :10].sum(1) > X[:, 10:].sum(1), 1, -1)
    learner = okl_core.make_learner("dsg", n_inputs=20, loss="hinge", block_size=16, batch_size=32, theta=4.0, step_offset=0.0,
                                    nu=1e-3, sigma=1.5, seed=3, **params)
    state, scores = learner.update(learner.init(), X[:512], y[:512])
    return learner, state, scores, X[512:]


def _golden_digest() -> str:
    """sha256 of the golden case's coefficients, scale, online scores and predictions (float64)."""
    import hashlib

    learner, state, scores, X_test = _golden_case(precision="float64")
    parts = [state.coef, np.asarray(state.scale), scores, learner.predict(state, X_test)]
    return hashlib.sha256(b"".join(np.ascontiguousarray(p).tobytes() for p in parts)).hexdigest()


def test_float64_precision_keeps_the_bytes_of_okl_0_1():
    """Coefficients, online scores and predictions hashed with okl 0.1 (before ``precision``).

    The hash was recorded with OpenBLAS's Haswell kernels: OpenBLAS picks its kernels by
    processor, and its SkylakeX (AVX-512) kernels sum a product in another order, so the same
    okl code gives other last bits there. The case runs in a subprocess pinned to the Haswell
    kernels (any x86-64 processor with AVX2 runs them), so the test checks okl's arithmetic,
    not the machine's.
    """
    import os
    import subprocess
    import sys

    if os.uname().machine not in ("x86_64", "AMD64"):
        pytest.skip("the golden hash was recorded with OpenBLAS's x86-64 Haswell kernels")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = "from tests.okl_core.test_dsg import _golden_digest; print(_golden_digest())"
    got = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert got == "2c241bb2259ef8b6ec6af5c31bfaa0661873a15e022c3c8215f2cf1fd7f7092d"


def test_float32_precision_is_within_float32_rounding_of_float64():
    learner32, state32, scores32, X_test = _golden_case()
    learner64, state64, scores64, _ = _golden_case(precision="float64")
    assert learner32.config.precision == "float32"
    np.testing.assert_allclose(scores32, scores64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state32.coef * state32.scale, state64.coef * state64.scale, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(learner32.predict(state32, X_test), learner64.predict(state64, X_test), rtol=1e-5, atol=1e-6)


def test_model_files_without_precision_load_with_the_old_arithmetic():
    import io
    import json

    learner, state, _, X_test = _golden_case(precision="float64")
    with np.load(io.BytesIO(okl_core.model_bytes(learner, state))) as npz:
        arrays = dict(npz)
    header = json.loads(arrays["__header__"].tobytes())
    del header["config"]["precision"]  # as okl 0.1 wrote it
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    old = io.BytesIO()
    np.savez(old, **arrays)
    loaded, loaded_state = okl_core.model_from_bytes(old.getvalue())
    assert loaded.config.precision == "float64"
    np.testing.assert_array_equal(loaded.predict(loaded_state, X_test), learner.predict(state, X_test))


def test_precision_is_validated():
    with pytest.raises(ValueError, match=r"precision must be one of \['float32', 'float64'\], got 'float16'"):
        okl_core.make_learner("dsg", n_inputs=3, precision="float16")


def test_merge_is_blockwise_weighted_average():
    X, y = tiny_problem("binary", 3, n=90)
    learner = okl_core.make_learner("dsg", n_inputs=3, block_size=4, batch_size=10, theta=2.0, step_offset=0.0, precision="float64")
    a, _ = learner.update(learner.init(), X[:60], y[:60])  # 6 blocks
    b, _ = learner.update(learner.init(), X[60:], y[60:])  # 3 blocks
    merged = okl_core.merge_states(learner, [a, b])
    expected = (60 * a.coef * a.scale + 30 * np.concatenate([b.coef * b.scale, np.zeros((3, 4, 1))])) / 90
    np.testing.assert_allclose(merged.coef, expected, rtol=1e-12)
    assert int(merged.t) == 6 and int(merged.n_seen) == 90
    np.testing.assert_allclose(learner.predict(merged, X), (60 * learner.predict(a, X) + 30 * learner.predict(b, X)) / 90, atol=1e-12)


def test_config_validation():
    with pytest.raises(ValueError, match="even"):
        okl_core.make_learner("dsg", n_inputs=3, block_size=5)
    with pytest.raises(ValueError, match="n_classes"):
        okl_core.make_learner("dsg", n_inputs=3, loss="softmax")
    with pytest.raises(ValueError, match="^loss must be one of .*'squared_hinge'\\], got 'zero_one'$"):
        okl_core.make_learner("dsg", n_inputs=3, loss="zero_one")
    assert okl_core.make_learner("dsg", n_inputs=3, loss="huber").task == "regression"
    # n_classes is ignored by the binary and regression losses but written in model files
    for bad in (0, -1, float("nan"), "x"):
        with pytest.raises(ValueError, match=r"^n_classes must be an integer >= 2"):
            okl_core.make_learner("dsg", n_inputs=3, loss="hinge", n_classes=bad)
    with pytest.raises(ValueError, match=r"^loss_param of loss 'huber' must be a number, got 'a'$"):
        okl_core.make_learner("dsg", n_inputs=3, loss="huber", loss_param="a")
    with pytest.raises(ValueError, match=r"^loss_param of loss 'huber' must be a number, got True$"):
        okl_core.make_learner("dsg", n_inputs=3, loss="huber", loss_param=True)
    with pytest.raises(ValueError, match=r"^huber threshold must be a finite number > 0, got inf$"):
        okl_core.make_learner("dsg", n_inputs=3, loss="huber", loss_param=float("inf"))
    # a zero threshold clips every gradient to 0: nothing would ever be learned
    with pytest.raises(ValueError, match=r"^huber threshold must be a finite number > 0, got 0.0$"):
        okl_core.make_learner("dsg", n_inputs=3, loss="huber", loss_param=0.0)
    with pytest.raises(ValueError, match=r"^eps_insensitive parameter must be a finite number >= 0, got -0.1$"):
        okl_core.make_learner("dsg", n_inputs=3, loss="eps_insensitive", loss_param=-0.1)
    assert okl_core.make_learner("dsg", n_inputs=3, loss="eps_insensitive", loss_param=0.0).task == "regression"  # the absolute loss
