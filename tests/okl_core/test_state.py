"""Model files: round trip, deterministic bytes, atomic writes, and clear errors."""

import io
import json
import os
import zipfile

import numpy as np
import pytest

import okl_core
from okl_core.state import ModelFileError, model_bytes

from .learner_data import tiny_problem


def _trained(name="fogd", **params):
    learner = okl_core.make_learner(name, n_inputs=4, n_components=16, sigma=1.0, **params)
    X, y = tiny_problem(learner.task, 4, n=50)
    state, _ = learner.update(learner.init(), X, y)
    return learner, state


def test_round_trip_and_header(tmp_path):
    learner, state = _trained()
    path = tmp_path / "m.npz"
    okl_core.save_model(path, learner, state)
    loaded_learner, loaded = okl_core.load_model(path)
    np.testing.assert_array_equal(loaded.w, state.w)
    with np.load(path, allow_pickle=False) as npz:
        header = json.loads(npz["__header__"].tobytes())
    assert header["learner"] == "fogd" and header["n_seen"] == 50 and header["generator_version"] == 1
    assert header["feature_spec"]["seed"] == 0 and header["config"]["sigma"] == 1.0
    assert os.listdir(tmp_path) == ["m.npz"]  # no temporary file left behind


def test_bytes_are_deterministic():
    a, sa = _trained()
    b, sb = _trained()
    assert model_bytes(a, sa) == model_bytes(b, sb)


def _rewrite_header(data: bytes, **changes) -> bytes:
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["__header__"].tobytes())
    header.update(changes)
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d[: len(d) // 2], "not a readable"),
        (lambda d: b"garbage" * 10, "not a readable"),
        (lambda d: _rewrite_header(d, generator_version=2), "generator version 2"),
        (lambda d: _rewrite_header(d, format_version=7), "format version 7"),
        (lambda d: _rewrite_header(d, format="something-else"), "not an okl model"),
        (lambda d: _rewrite_header(d, learner="no_such_learner"), "cannot rebuild"),
        (lambda d: _rewrite_header(d, n_seen=3), "n_seen"),
    ],
)
def test_corrupt_foreign_or_incompatible_files_fail_clearly(tmp_path, mutate, message):
    learner, state = _trained()
    path = tmp_path / "bad.npz"
    path.write_bytes(mutate(model_bytes(learner, state)))
    with pytest.raises(ModelFileError, match=message) as info:
        okl_core.load_model(path)
    assert str(path) in str(info.value)


def test_foreign_npz_and_pickled_arrays_are_refused(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, w=np.zeros(3))
    with pytest.raises(ModelFileError, match="no header"):
        okl_core.load_model(plain)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __header__=np.frombuffer(b"{}", dtype=np.uint8), w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ModelFileError):
        okl_core.load_model(pickled)
    with pytest.raises(ModelFileError, match="cannot read"):
        okl_core.load_model(tmp_path / "missing.npz")


def test_array_shapes_are_checked_against_the_config(tmp_path):
    learner, state = _trained()
    other = okl_core.make_learner("fogd", n_inputs=4, n_components=8, sigma=1.0)
    bad = state._replace(w=np.zeros(16))  # n_components = 8 -> 16 features, not 32
    data = model_bytes(other, bad)
    data = _rewrite_header(data, config={**json.loads(json.dumps(learner.describe()["config"]))})
    path = tmp_path / "shape.npz"
    path.write_bytes(data)
    with pytest.raises(ModelFileError):
        okl_core.load_model(path)


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    learner, state = _trained()
    path = tmp_path / "m.npz"
    okl_core.save_model(path, learner, state)
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        okl_core.save_model(path, learner, state._replace(w=state.w + 1))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.npz"]


def test_wrong_state_type_is_rejected():
    learner, _ = _trained()
    dsg = okl_core.make_learner("dsg", n_inputs=4)
    with pytest.raises(TypeError):
        model_bytes(learner, dsg.init())
