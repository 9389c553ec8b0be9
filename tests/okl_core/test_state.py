"""Model files: round trip, deterministic bytes, atomic writes, and clear errors."""

import base64
import io
import json
import os
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    with pytest.raises(ValueError, match=r"^fogd: state must be a LinearState \(from init or update\), got DSGState$"):
        model_bytes(learner, dsg.init())


# -- hostile model files: every one ends in ModelFileError, one line naming the file ---------
def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as zf:
        for name, body in members.items():
            zf.writestr(name, body, compress_type=compression)
    return out.getvalue()


def _npy(array) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, np.asarray(array), allow_pickle=False)
    return out.getvalue()


def _raw_npy(header: str, payload: bytes = b"", version: bytes = b"\x01\x00") -> bytes:
    """A .npy member with a hand-written header dict (anything it claims)."""
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    size = len(text).to_bytes(2 if version == b"\x01\x00" else 4, "little")
    return b"\x93NUMPY" + version + size + text + payload


def _good() -> bytes:
    learner, state = _trained()
    return model_bytes(learner, state)


def _header_of(data: bytes) -> dict:
    return json.loads(np.load(io.BytesIO(_members(data)["__header__.npy"]), allow_pickle=False).tobytes())


def _set_header(data: bytes, header) -> bytes:
    """Replace the header with ``header`` (a dict, or raw bytes), keeping the arrays' members."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return _zip({**_members(data), "__header__.npy": _npy(np.frombuffer(raw, dtype=np.uint8))})


def _header_with(**changes):
    def mutate(data):
        header = _header_of(data)
        for key, value in changes.items():
            if value is _DELETE:
                del header[key]
            else:
                header[key] = value
        return _set_header(data, header)

    return mutate


def _entry(name, value):
    def mutate(data):
        header = _header_of(data)
        if value is _DELETE:
            del header["arrays"][name]
        else:
            header["arrays"][name] = value
        return _set_header(data, header)

    return mutate


def _member(name, body):
    return lambda data: _zip({**_members(data), name: body})


_DELETE = object()
_W = "{'descr': '<f8', 'fortran_order': False, 'shape': (32,), }"

HOSTILE = [
    # header fields of the wrong JSON types, or missing
    ("format_version string", _header_with(format_version="1"), "header field 'format_version' must be an integer, got a string"),
    ("format_version boolean", _header_with(format_version=True), "header field 'format_version' must be an integer, got a boolean"),
    ("generator_version null", _header_with(generator_version=None), "header field 'generator_version' must be an integer, got null"),
    ("learner number", _header_with(learner=5), "header field 'learner' must be a string, got an integer"),
    ("learner missing", _header_with(learner=_DELETE), "header field 'learner' must be a string, got nothing"),
    ("config list", _header_with(config=[1, 2]), "header field 'config' must be an object, got a list"),
    ("config wrong values", _header_with(config={"n_inputs": "four"}), "cannot rebuild the learner ("),
    ("config unknown key", _header_with(config={"no_such_parameter": 1}), "cannot rebuild the learner (ValueError: fogd: unknown parameter(s) ['no_such_parameter']; valid:"),
    ("feature_spec number", _header_with(feature_spec=3), "header field 'feature_spec' must be an object or null, got an integer"),
    ("feature_spec foreign", _header_with(feature_spec={"seed": 99}), "feature spec in the header does not match"),
    ("n_seen vector", _header_with(n_seen=[50, 50]), "header field 'n_seen' must be an integer, got a list"),
    ("n_seen float", _header_with(n_seen=50.0), "header field 'n_seen' must be an integer, got a number"),
    ("n_seen negative", _header_with(n_seen=-1), "header field 'n_seen' is negative (-1)"),
    ("n_seen disagrees", _header_with(n_seen=3), "n_seen in header (3) and state (50) disagree"),
    ("arrays list", _header_with(arrays=[]), "header field 'arrays' must be an object, got a list"),
    ("arrays entry without dtype", _entry("w", {"shape": [32]}), "header entry of array 'w' must be {\"dtype\": string"),
    ("arrays entry without shape", _entry("w", {"dtype": "float64"}), "header entry of array 'w' must be"),
    ("arrays entry shape string", _entry("w", {"dtype": "float64", "shape": "32"}), "header entry of array 'w' must be"),
    ("arrays entry negative", _entry("w", {"dtype": "float64", "shape": [-32]}), "header entry of array 'w' must be"),
    ("arrays entry not an object", _entry("w", "float64"), "header entry of array 'w' must be"),
    ("arrays entry missing", _entry("w", _DELETE), "header lists arrays ['n_seen'], the file holds ['n_seen', 'w']"),
    ("arrays entry wrong dtype", _entry("w", {"dtype": "float32", "shape": [32]}), "array 'w' is float64[32], its header entry says float32[32]"),
    ("classes not a list", _header_with(classes="ab"), "header field 'classes' must be a list, got a string"),
    ("classes null", _header_with(classes=None), "header field 'classes' must be a list, got null"),
    ("classes of another count", _header_with(classes=[0, 1, 2]),
     "header field 'classes' does not fit the learner (fogd predicts 2 classes, got 3 class names [0, 1, 2])"),
    ("header not an object", lambda d: _set_header(d, b"[1, 2]"), "not an okl model file"),
    ("header not JSON", lambda d: _set_header(d, b"{nope"), "corrupt model header (Expecting property name"),
    ("header not UTF-8", lambda d: _set_header(d, b"\xff\xfe{}"), "corrupt model header ('utf-8' codec"),
    ("header deeply nested", lambda d: _set_header(d, b'{"config": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"), "corrupt model header (nested too deeply)"),
    ("header of floats", _member("__header__.npy", _npy(np.zeros(4))), "corrupt model header (not a 1-D uint8 array"),
    # arrays: what the .npy header declares is checked before anything is read
    ("n_seen array a vector", _member("n_seen.npy", _npy(np.array([50, 50]))), "array 'n_seen' is int64[2], its header entry says int64[]"),
    ("object dtype", _member("w.npy", _raw_npy("{'descr': '|O', 'fortran_order': False, 'shape': (32,), }", b"\0" * 256)), "array 'w.npy' has dtype '|O'; model arrays are numbers"),
    ("text dtype", _member("w.npy", _raw_npy("{'descr': '<U4', 'fortran_order': False, 'shape': (32,), }", b"\0" * 512)), "array 'w.npy' has dtype '<U4'; model arrays are numbers"),
    ("structured dtype", _member("w.npy", _raw_npy("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (32,), }", b"\0" * 256)), "array 'w.npy' has dtype"),
    ("unknown dtype", _member("w.npy", _raw_npy("{'descr': '<q9', 'fortran_order': False, 'shape': (32,), }", b"\0" * 256)), "not a readable okl model file (descr is not a valid dtype"),
    ("npy header not a dict", _member("w.npy", _raw_npy("[1, 2, 3]", b"\0" * 256)), "not a readable okl model file (Header is not a dictionary"),
    ("npy version 3", _member("w.npy", _raw_npy(_W, b"\0" * 256, version=b"\x03\x00")), "array 'w.npy' has .npy format version (3, 0), okl reads 1.0 and 2.0"),
    ("npy negative dimension", _member("w.npy", _raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (-32,), }", b"")), "array 'w.npy' has a negative dimension [-32]"),
    ("shape larger than data", _member("w.npy", _raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }", b"\0" * 256)), "array 'w.npy' declares [1000] float64 (8000 bytes) but holds 256 bytes"),
    ("shape smaller than data", _member("w.npy", _raw_npy(_W, b"\0" * 300)), "array 'w.npy' declares [32] float64 (256 bytes) but holds 300 bytes"),
    ("declares 2 GiB, holds 256 bytes", _member("w.npy", _raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (268435456,), }", b"\0" * 256)), "declares [268435456] float64 (2147483648 bytes) but holds 256 bytes"),
    ("declares 10^30 bytes", _member("w.npy", _raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000000, 1000000000000000), }", b"")), "(8000000000000000000000000000000 bytes) but holds 0 bytes"),
    ("compressed member", lambda d: _zip(_members(d), zipfile.ZIP_DEFLATED), "is compressed; okl model files are written uncompressed"),
    ("member not .npy", _member("notes.txt", b"hello"), "member 'notes.txt' is not a .npy array"),
    ("extra array", _member("evil.npy", _npy(np.zeros(2))), "arrays ['evil', 'n_seen', 'w'] do not match fogd state fields ['n_seen', 'w']"),
    ("no header", lambda d: _zip({k: v for k, v in _members(d).items() if k != "__header__.npy"}), "not an okl model file (no header)"),
    ("NaN coefficient", _member("w.npy", _npy(np.r_[np.nan, np.zeros(31)])), "array 'w' holds NaN or inf values (the run that wrote it diverged)"),
    ("inf coefficient", _member("w.npy", _npy(np.r_[np.zeros(31), -np.inf])), "array 'w' holds NaN or inf values"),
    ("w float32", _member("w.npy", _npy(np.zeros(32, np.float32))), "array 'w' is float32[32], its header entry says float64[32]"),
    # damaged files
    ("truncated", lambda d: d[: len(d) // 2], "not a readable okl model file (File is not a zip file)"),
    ("truncated end", lambda d: d[:-1], "not a readable okl model file ("),
    ("empty", lambda d: b"", "not a readable okl model file (File is not a zip file)"),
    ("garbage", lambda d: b"garbage" * 10, "not a readable okl model file (File is not a zip file)"),
    ("header byte changed", lambda d: d.replace(b"okl-model", b"okl-modem"), "not a readable okl model file (Bad CRC-32 for file '__header__.npy')"),
]


@pytest.mark.parametrize("mutate, message", [pytest.param(m, msg, id=name) for name, m, msg in HOSTILE])
def test_hostile_model_files_end_in_model_file_error(tmp_path, mutate, message):
    path = tmp_path / "hostile.npz"
    path.write_bytes(mutate(_good()))
    with pytest.raises(ModelFileError) as info:
        okl_core.load_model(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    assert message in text


def test_a_corrupted_data_byte_fails_its_crc(tmp_path):
    data = bytearray(_good())
    body = _members(bytes(data))["w.npy"]
    at = bytes(data).index(body) + len(body) - 1  # last byte of w, inside the stored member
    data[at] ^= 0xFF
    path = tmp_path / "crc.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match=r"not a readable okl model file \(Bad CRC-32 for file 'w.npy'\)"):
        okl_core.load_model(path)


def test_a_model_over_the_size_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(_good())
    size = path.stat().st_size
    with pytest.raises(ModelFileError, match=f"{size} bytes, more than the limit of 1000 bytes for a model file"):
        okl_core.load_model(path, max_bytes=1000)
    # 786 bytes: the header (fogd's config, with "step": "constant" since the option) and w
    with pytest.raises(ModelFileError, match="its arrays declare 786 bytes, more than the limit of 300 bytes"):
        okl_core.model_from_bytes(path.read_bytes(), source="m", max_bytes=300)


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_paths_that_are_not_regular_files_are_refused_without_reading(tmp_path, kind):
    if kind == "device":
        path = "/dev/zero"  # a read of it never ends
    elif kind == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)  # opening it would block until a writer comes
    else:
        path = str(tmp_path)
    with pytest.raises(ModelFileError, match="not a regular file; a model file must be one") as info:
        okl_core.load_model(path)
    assert str(info.value).startswith(f"{path}: ")


def _peak_while_refused(path, match: str) -> int:
    """Peak Python memory (tracemalloc) while load_model refuses ``path`` with ``match``."""
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=match):
            okl_core.load_model(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_compressed_bomb_is_refused_from_its_headers_without_inflating(tmp_path):
    """256 MiB of zeros deflated into ~256 KB: refused before a byte is inflated."""
    learner, state = _trained()
    members = _members(model_bytes(learner, state))
    inflated = 256 << 20
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, body in members.items():
            zf.writestr(zipfile.ZipInfo(name), body, compress_type=zipfile.ZIP_STORED)
        with zf.open("bomb.npy", "w", force_zip64=True) as f:
            f.write(_raw_npy(f"{{'descr': '|u1', 'fortran_order': False, 'shape': ({inflated},), }}"))
            chunk = bytes(1 << 20)
            for _ in range(inflated >> 20):
                f.write(chunk)
    path = tmp_path / "bomb.npz"
    path.write_bytes(out.getvalue())
    assert path.stat().st_size < inflated // 100
    peak = _peak_while_refused(path, "member 'bomb.npy' is compressed; okl model files are written uncompressed")
    assert peak < 8 << 20  # the file itself (~256 KB) and the headers; never the 256 MiB


def test_a_declared_size_bomb_allocates_nothing(tmp_path):
    """A stored member whose .npy header declares 2 GiB: refused from the header."""
    path = tmp_path / "bomb.npz"
    path.write_bytes(_member("w.npy", _raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (268435456,), }"))(_good()))
    assert _peak_while_refused(path, r"declares \[268435456\] float64 \(2147483648 bytes\) but holds 0 bytes") < 1 << 20


def test_non_finite_models_load_only_when_allowed():
    learner, state = _trained()
    data = model_bytes(learner, state._replace(w=np.full_like(state.w, np.nan)))
    with pytest.raises(ModelFileError, match="m: array 'w' holds NaN or inf values"):
        okl_core.model_from_bytes(data, source="m")
    _, loaded = okl_core.model_from_bytes(data, source="m", allow_non_finite=True)
    assert np.isnan(loaded.w).all()


def test_loaded_arrays_are_writable_copies(tmp_path):
    learner, state = _trained()
    _, loaded = okl_core.model_from_bytes(model_bytes(learner, state))
    assert loaded.w.flags.writeable and loaded.w.flags.c_contiguous
    np.testing.assert_array_equal(loaded.w, state.w)


def _damage(data, good: bytes) -> bytes:
    """Byte flips, truncations and insertions anywhere in ``good`` (hypothesis draws)."""
    damaged = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, max(0, len(damaged) - 1)))
        if action == "flip" and damaged:
            damaged[at] ^= data.draw(st.integers(1, 255))
        elif action == "cut":
            del damaged[at : at + data.draw(st.integers(1, 64))]
        else:
            damaged[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    return bytes(damaged)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_escapes_as_another_exception(data):
    """Byte flips, truncations and insertions anywhere: a model or a ModelFileError, nothing else."""
    damaged = _damage(data, _good())
    try:
        learner, state = okl_core.model_from_bytes(damaged, source="damaged")
    except ModelFileError as err:
        assert str(err).startswith("damaged: ") and "\n" not in str(err)
    else:
        assert learner.name == "fogd" and np.isfinite(state.w).all()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(["format", "format_version", "generator_version", "learner", "config", "feature_spec", "n_seen", "arrays"]),
       value=_JSON)
def test_any_json_in_any_header_field_ends_in_model_file_error(key, value):
    good = _good()
    header = _header_of(good)
    if value == header[key]:
        return
    header[key] = value
    with pytest.raises(ModelFileError) as info:
        okl_core.model_from_bytes(_set_header(good, header), source="h")
    assert str(info.value).startswith("h: ") and "\n" not in str(info.value)


def test_a_config_asking_for_an_impossible_state_is_refused():
    header = _header_of(_good())
    header["config"]["n_components"] = header["feature_spec"]["n_components"] = 10**13  # w of 146 TiB
    with pytest.raises(ModelFileError, match=r"^m: its config asks for a state that cannot be built \(MemoryError: "):
        okl_core.model_from_bytes(_set_header(_good(), header), source="m")


def test_a_config_inflating_a_filled_state_is_refused_without_building_it(tmp_path):
    """pkawv_taylor's fresh state holds an r x r identity: a header raising r to 230,230 allocates nothing."""
    learner = okl_core.make_learner("pkawv_taylor", n_inputs=3, degree=2)
    data = model_bytes(learner, learner.init())
    header = _header_of(data)
    header["config"].update(n_inputs=20, degree=6, max_basis=10**9)
    header["feature_spec"] = None
    path = tmp_path / "taylor.npz"
    path.write_bytes(_set_header(data, header))
    peak = _peak_while_refused(path, r"array 'gram' has dtype/shape float64\(10, 10\), expected float64\(230230, 230230\)")
    assert peak < 64 << 20  # the basis's exponent table (r x d, ~18 MB); the identity would be 424 GB


# -- raw state bytes (a job's working copy: streaming shards' Beam state) -------------------------
@pytest.mark.parametrize("name", okl_core.learner_names())
def test_raw_state_bytes_round_trip_every_learner_bit_for_bit(name):
    from okl_core.state import raw_state_bytes, state_from_raw_bytes
    from okl_core.testing import conformance_learner

    learner = conformance_learner(name)
    X, y = tiny_problem(learner.task, learner.config.n_inputs, n=40, n_classes=getattr(learner.config, "n_classes", None) or 3)
    for state in (learner.init(), learner.update(learner.init(), X, y)[0]):
        back = state_from_raw_bytes(learner, raw_state_bytes(learner, state))
        assert model_bytes(learner, back) == model_bytes(learner, state)
        assert all(a.flags.writeable and a.flags.c_contiguous for a in back)


def test_raw_state_bytes_keep_non_finite_values_and_refuse_other_learners_and_damage():
    from okl_core.state import raw_state_bytes, state_from_raw_bytes

    learner, state = _trained()
    state = state._replace(w=np.where(np.arange(state.w.size) == 3, np.nan, state.w).reshape(state.w.shape))
    data = raw_state_bytes(learner, state)
    assert np.isnan(state_from_raw_bytes(learner, data).w[3])
    other = okl_core.make_learner("fogd", n_inputs=4, n_components=32, sigma=1.0)
    with pytest.raises(ModelFileError, match=r"^shard 0: .*expected"):
        state_from_raw_bytes(other, data, source="shard 0")  # 32 features, not 16
    with pytest.raises(ModelFileError, match="declares"):
        state_from_raw_bytes(learner, data[:-8], source="shard 0")
    with pytest.raises(ModelFileError, match="not raw okl state"):
        state_from_raw_bytes(learner, model_bytes(learner, state), source="shard 0")


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_damage_to_raw_state_ends_in_a_state_or_model_file_error(data):
    from okl_core.state import raw_state_bytes, state_from_raw_bytes

    learner, state = _trained()
    damaged = _damage(data, raw_state_bytes(learner, state))
    try:
        back = state_from_raw_bytes(learner, damaged, source="damaged")
    except ModelFileError as err:
        assert str(err).startswith("damaged: ") and "\n" not in str(err)
    else:
        assert back.w.shape == state.w.shape


def test_model_versions_lists_only_files_named_as_version_file_name_names_them(tmp_path):
    """Not version 0, not a second spelling of version 1, not a directory of such a name."""
    for name in ("model-v000000.npz", "model-v000001.npz", "model-v0000001.npz", "model-v000002.npz", "model-v1000000.npz"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "model-v000004.npz").mkdir()
    assert okl_core.model_versions(tmp_path) == [
        (1, str(tmp_path / "model-v000001.npz")), (2, str(tmp_path / "model-v000002.npz")), (1000000, str(tmp_path / "model-v1000000.npz"))]


def test_save_model_to_a_directory_names_the_path_given(tmp_path):
    learner, state = _trained()
    (tmp_path / "t10").mkdir()
    with pytest.raises(IsADirectoryError) as err:
        okl_core.save_model(tmp_path / "t10", learner, state)
    assert str(err.value) == f"[Errno 21] is a directory, not a file name: '{tmp_path / 't10'}'"
    assert os.listdir(tmp_path) == ["t10"] and os.listdir(tmp_path / "t10") == []


def test_save_model_refuses_an_empty_path(tmp_path, monkeypatch):
    learner, state = _trained()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(ValueError) as err:
        okl_core.save_model("", learner, state)
    assert str(err.value) == "path must be a file name, got ''"
    assert sorted(os.listdir(tmp_path)) == ["cwd"] and os.listdir(tmp_path / "cwd") == []


# -- the classes a model was trained on (optional header field "classes") ---------------------
# A model file written by okl at commit b25ead7, before model files recorded classes: mfogd
# with 3 classes, 2 inputs, 4 frequencies, after 30 rows.
_MODEL_BEFORE_CLASSES = base64.b64decode(
    "UEsDBBQAAAAAAAAAIQD6PgGYmQIAAJkCAAAOAAAAX19oZWFkZXJfXy5ucHmTTlVNUFkBAHYAeydkZXNjcic6ICd8dTEnLCAnZm9y"
    "dHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoNTM3LCksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg"
    "ICAgICAgICAgICAgICAgICAgICAgCnsiYXJyYXlzIjogeyJuX3NlZW4iOiB7ImR0eXBlIjogImludDY0IiwgInNoYXBlIjogW119"
    "LCAidyI6IHsiZHR5cGUiOiAiZmxvYXQ2NCIsICJzaGFwZSI6IFszLCA4XX19LCAiY29uZmlnIjogeyJibG9ja19zaXplIjogMjU2"
    "LCAiZXRhIjogMC41LCAia2VybmVsIjogImdhdXNzaWFuIiwgIm5fY2xhc3NlcyI6IDMsICJuX2NvbXBvbmVudHMiOiA0LCAibl9p"
    "bnB1dHMiOiAyLCAic2NhbGVkIjogZmFsc2UsICJzZWVkIjogMCwgInNpZ21hIjogMS4wLCAic3RlcCI6ICJjb25zdGFudCJ9LCAi"
    "ZmVhdHVyZV9zcGVjIjogeyJibG9ja19zaXplIjogMjU2LCAiZ2VuZXJhdG9yX3ZlcnNpb24iOiAxLCAia2VybmVsIjogImdhdXNz"
    "aWFuIiwgIm5fY29tcG9uZW50cyI6IDQsICJuX2lucHV0cyI6IDIsICJzY2FsZWQiOiBmYWxzZSwgInNlZWQiOiAwLCAic2lnbWEi"
    "OiAxLjB9LCAiZm9ybWF0IjogIm9rbC1tb2RlbCIsICJmb3JtYXRfdmVyc2lvbiI6IDEsICJnZW5lcmF0b3JfdmVyc2lvbiI6IDEs"
    "ICJsZWFybmVyIjogIm1mb2dkIiwgIm5fc2VlbiI6IDMwfVBLAwQUAAAAAAAAACEAa0L6F0ABAABAAQAABQAAAHcubnB5k05VTVBZ"
    "AQB2AHsnZGVzY3InOiAnPGY4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsIDgpLCB9ICAgICAgICAgICAg"
    "ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAACoZDfsvwAAAK543+s/AAAAfl6A2b8AAADA"
    "eV/ePwAAAFhbVcW/AAAAIDHeyL8AAACfmtTYPwAAAF2mudC/AAAAY5KP8D8AAAB0ozXVvwAAAHCY59U/AACAO7rp5j8AAABwfFLK"
    "vwAAACjnfcK/AAAADGZHuz8AAEA7z5PtPwAAAHgAn8O/AAAA9KZE4b8AAABwMMasPwAAwI27DPO/AAAA5OvT1z8AAAAkDK7VPwAA"
    "ACJ0pt+/AADADPw25b9QSwMEFAAAAAAAAAAhACOSBA+IAAAAiAAAAAoAAABuX3NlZW4ubnB5k05VTVBZAQB2AHsnZGVzY3InOiAn"
    "PGk4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKCksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg"
    "ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoeAAAAAAAAAFBLAQIUAxQAAAAAAAAAIQD6PgGYmQIAAJkCAAAOAAAAAAAA"
    "AAAAAACAAQAAAABfX2hlYWRlcl9fLm5weVBLAQIUAxQAAAAAAAAAIQBrQvoXQAEAAEABAAAFAAAAAAAAAAAAAACAAcUCAAB3Lm5w"
    "eVBLAQIUAxQAAAAAAAAAIQAjkgQPiAAAAIgAAAAKAAAAAAAAAAAAAACAASgEAABuX3NlZW4ubnB5UEsFBgAAAAADAAMApwAAANgE"
    "AAAAAA=="
)
_X_BEFORE = np.array([[0.5, -1.0], [2.0, 0.25], [-1.5, 1.0]], np.float32)
# Its scores on _X_BEFORE, printed by okl at b25ead7.
_SCORES_BEFORE = [[-1.0963400643892265, 2.413517760146475, -1.3171776957572485],
                  [1.100509960220058, 0.6911417714906306, -1.7916517317106886],
                  [-0.12236333225352664, -0.3607372689490226, 0.48310060120254905]]


def test_a_model_file_written_before_classes_were_recorded_loads_and_predicts_as_before(tmp_path):
    """Files without the field keep loading; one written without classes is the same bytes as before."""
    path = tmp_path / "old.npz"
    path.write_bytes(_MODEL_BEFORE_CLASSES)
    learner, state = okl_core.load_model(path)
    assert okl_core.model_classes(_MODEL_BEFORE_CLASSES) is None
    assert "classes" not in _header_of(_MODEL_BEFORE_CLASSES)
    np.testing.assert_allclose(learner.predict(state, _X_BEFORE), _SCORES_BEFORE, rtol=1e-6)
    assert model_bytes(learner, state) == _MODEL_BEFORE_CLASSES
    okl_core.save_model(tmp_path / "new.npz", learner, state, classes=["a", "b", "c"])
    new_learner, new_state = okl_core.load_model(tmp_path / "new.npz")
    np.testing.assert_array_equal(new_learner.predict(new_state, _X_BEFORE), learner.predict(state, _X_BEFORE))
    assert okl_core.model_classes((tmp_path / "new.npz").read_bytes()) == ["a", "b", "c"]


def test_classes_are_recorded_in_the_header_in_code_order_and_deterministically(tmp_path):
    learner, state = _trained()
    okl_core.save_model(tmp_path / "m.npz", learner, state, classes=["<=50K", ">50K"])
    data = (tmp_path / "m.npz").read_bytes()
    assert _header_of(data)["classes"] == ["<=50K", ">50K"] and okl_core.model_classes(data) == ["<=50K", ">50K"]
    assert data == model_bytes(learner, state, ("<=50K", ">50K")) == model_bytes(learner, state, np.array(["<=50K", ">50K"]))
    assert model_bytes(learner, state, [1, 0]) != model_bytes(learner, state, [0, 1])
    loaded_learner, loaded = okl_core.model_from_bytes(data)
    assert model_bytes(loaded_learner, loaded) == model_bytes(learner, state)  # the arrays are those of the model without classes
    assert okl_core.model_classes(model_bytes(learner, state)) is None


@pytest.mark.parametrize("name, classes, message", [
    ("fogd", [0, 1, 2], "fogd predicts 2 classes, got 3 class names [0, 1, 2]"),
    ("fogd_r", [0, 1], "fogd_r is a regression learner: its model has no classes, got [0, 1]"),
    ("fogd", [0, {1, 2}], "classes must be JSON values (strings, numbers, booleans), got [0, {1, 2}]"),
    ("fogd", "ab", "classes must be a list of labels, got str"),
])
def test_classes_that_cannot_name_the_learners_classes_are_refused(name, classes, message):
    learner, state = _trained(name)
    with pytest.raises((ValueError, TypeError)) as info:
        model_bytes(learner, state, classes)
    assert message in str(info.value)


@settings(max_examples=150, deadline=None)
@given(value=_JSON)
def test_any_json_as_classes_loads_as_those_classes_or_ends_in_model_file_error(value):
    header = _header_of(_good())
    header["classes"] = value
    data = _set_header(_good(), header)
    try:
        okl_core.model_from_bytes(data, source="h")
    except ModelFileError as err:
        assert str(err).startswith("h: header field 'classes' ") and "\n" not in str(err)
        return
    assert isinstance(value, list) and len(value) == 2 and okl_core.model_classes(data) == value


def test_class_names_a_model_file_cannot_record_are_refused_in_one_line():
    """Issue: class names that made the header larger than a model file may hold (1 MiB) were refused only by
    the header's size; names of 600 KB were written into a file. Names take at most MAX_CLASSES_BYTES as JSON."""
    from okl_core.state import MAX_CLASSES_BYTES

    learner = okl_core.make_learner("fogd", n_inputs=3, n_components=4)
    with pytest.raises(ValueError) as err:
        okl_core.model_bytes(learner, learner.init(), ["n" * 300_000, "p" * 300_000])
    assert str(err.value) == ("the 2 class names take 600008 bytes as JSON, more than the 524288 a model file records; "
                              "give the classes shorter names")
    with pytest.raises(ValueError, match=r"^the 2 class names take 524289 bytes"):
        okl_core.check_classes(learner, ["n" * (MAX_CLASSES_BYTES // 2 - 4), "p" * (MAX_CLASSES_BYTES // 2 - 3)])
    most = ["n" * (MAX_CLASSES_BYTES // 2 - 4), "p" * (MAX_CLASSES_BYTES // 2 - 4)]  # exactly the limit: written and read back
    assert okl_core.model_classes(okl_core.model_bytes(learner, learner.init(), most)) == most
    with pytest.raises(ValueError) as err:  # a long list is cut short in the line
        okl_core.model_bytes(learner, learner.init(), [str(i) for i in range(1000)])
    assert str(err.value).startswith("fogd predicts 2 classes, got 1000 class names ['0', '1'") and str(err.value).endswith("... (1000 in all)")
    assert len(str(err.value)) < 300
