"""Model files: a learner's state as ``.npz`` with a JSON header, written atomically.

Layout: one ``.npz`` (zip of ``.npy``) holding each state array under its field name and
``__header__``, a uint8 array of UTF-8 JSON::

    {"format": "okl-model", "format_version": 1, "learner": "...", "config": {...},
     "feature_spec": {...} | null, "generator_version": 1, "n_seen": 123,
     "arrays": {"w": {"dtype": "float64", "shape": [800]}, ...}}

Files are read with ``allow_pickle=False``: model files come from other machines. A file
is written to a temporary name in the target directory and renamed into place, so a reader
never sees a half-written model.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import tempfile
import zipfile

import numpy as np

from okl_core.learners.base import Learner
from okl_core.random import GENERATOR_VERSION
from okl_core.registry import learner_class, make_learner

__all__ = [
    "FORMAT_VERSION", "ModelFileError", "save_model", "load_model", "model_bytes", "model_from_bytes", "atomic_write_bytes",
    "version_file_name", "parse_version", "model_versions", "write_new_file",
]

FORMAT_VERSION = 1
_HEADER_KEY = "__header__"
_VERSION_RE = re.compile(r"model-v(\d{6,})\.npz")


class ModelFileError(ValueError):
    """A model file is missing, corrupt, foreign, or from an incompatible okl."""


def _header(learner: Learner, state) -> dict:
    spec = learner.feature_spec()
    return {
        "format": "okl-model",
        "format_version": FORMAT_VERSION,
        "learner": learner.name,
        "config": dataclasses.asdict(learner.config),
        "feature_spec": spec.to_dict() if spec is not None else None,
        "generator_version": GENERATOR_VERSION,
        "n_seen": int(state.n_seen),
        "arrays": {k: {"dtype": str(np.asarray(v).dtype), "shape": list(np.shape(v))} for k, v in state._asdict().items()},
    }


def model_bytes(learner: Learner, state) -> bytes:
    """Serialise ``(learner, state)`` to the bytes of a model file (deterministic)."""
    if not isinstance(state, learner.state_class):
        raise TypeError(f"{learner.name} state must be {learner.state_class.__name__}, got {type(state).__name__}")
    header = json.dumps(_header(learner, state), sort_keys=True).encode("utf-8")
    buffer = io.BytesIO()
    # Written entry by entry with a fixed timestamp so equal states give equal bytes.
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        entries = [(_HEADER_KEY, np.frombuffer(header, dtype=np.uint8))] + [(k, np.asarray(v)) for k, v in state._asdict().items()]
        for key, array in entries:
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.asarray(array, order="C"), allow_pickle=False)
            zf.writestr(info, npy.getvalue())
    return buffer.getvalue()


def _write_temp(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Create the target's directory and a temporary file beside ``path``; return (path, tmp)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=directory)
    os.close(fd)
    return path, tmp


def _fill(tmp: str, data: bytes) -> None:
    """Write, flush and fsync ``data`` into ``tmp``; readable by all (mkstemp makes it 0600)."""
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory + rename."""
    path, tmp = _write_temp(path)
    try:
        _fill(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_model(path: str | os.PathLike, learner: Learner, state) -> None:
    """Save a model file atomically (see module docstring for the layout)."""
    atomic_write_bytes(path, model_bytes(learner, state))


def model_from_bytes(data: bytes, source: str = "<bytes>"):
    """Parse model-file bytes into ``(learner, state)``; errors name ``source``."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as err:
        raise ModelFileError(f"{source}: not a readable okl model file ({err})") from None
    if _HEADER_KEY not in arrays:
        raise ModelFileError(f"{source}: not an okl model file (no header)")
    try:
        header = json.loads(arrays.pop(_HEADER_KEY).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelFileError(f"{source}: corrupt model header ({err})") from None
    if not isinstance(header, dict) or header.get("format") != "okl-model":
        raise ModelFileError(f"{source}: not an okl model file")
    if header.get("format_version") != FORMAT_VERSION:
        raise ModelFileError(f"{source}: model format version {header.get('format_version')} is not supported (this okl reads {FORMAT_VERSION})")
    if header.get("generator_version") != GENERATOR_VERSION:
        raise ModelFileError(
            f"{source}: written with feature-generator version {header.get('generator_version')}, this okl has "
            f"version {GENERATOR_VERSION}; its random features would differ, so it cannot be loaded"
        )
    try:
        config = {**learner_class(header["learner"]).legacy_config, **header["config"]}
        learner = make_learner(header["learner"], **config)
    except (KeyError, ValueError, TypeError) as err:
        raise ModelFileError(f"{source}: cannot rebuild the learner ({err})") from None
    spec = learner.feature_spec()
    if (spec.to_dict() if spec is not None else None) != header.get("feature_spec"):
        raise ModelFileError(f"{source}: feature spec in the header does not match the learner's config")
    fields = learner.state_class._fields
    if sorted(arrays) != sorted(fields):
        raise ModelFileError(f"{source}: arrays {sorted(arrays)} do not match {learner.name} state fields {sorted(fields)}")
    for name, meta in header.get("arrays", {}).items():
        a = arrays.get(name)
        if a is None or str(a.dtype) != meta["dtype"] or list(a.shape) != meta["shape"]:
            raise ModelFileError(f"{source}: array {name!r} does not match its header entry")
    state = learner.state_class(**{k: arrays[k] for k in fields})
    if int(state.n_seen) != header.get("n_seen"):
        raise ModelFileError(f"{source}: n_seen in header and state disagree")
    _check_shapes(learner, state, source)
    return learner, state


def _check_shapes(learner: Learner, state, source: str) -> None:
    """Compare dtypes and shapes with a fresh state.

    In ``growing_fields`` axis 0 may differ, and so may every axis that is empty in the
    fresh state (a ``(0, 0)`` matrix that grows into ``(t, t)``).
    """
    fresh = learner.init()
    for name in learner.state_class._fields:
        a, b = getattr(state, name), getattr(fresh, name)
        if name in learner.growing_fields:
            fixed = [i for i in range(1, b.ndim) if b.shape[i] > 0]
        else:
            fixed = list(range(b.ndim))
        if a.dtype != b.dtype or a.ndim != b.ndim or any(a.shape[i] != b.shape[i] for i in fixed):
            raise ModelFileError(f"{source}: array {name!r} has dtype/shape {a.dtype}{a.shape}, expected {b.dtype}{b.shape}")


def load_model(path: str | os.PathLike):
    """Load ``(learner, state)`` from a model file.

    Raises
    ------
    ModelFileError
        Missing, corrupt or foreign file, another format or generator version, or arrays
        that do not fit the learner.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ModelFileError(f"{path}: cannot read model file ({err.strerror})") from None
    return model_from_bytes(data, source=path)


def version_file_name(version: int) -> str:
    """``model-v000001.npz``: the name of merged model version ``version`` (>= 1; sorts by version)."""
    if int(version) < 1:
        raise ValueError(f"model versions start at 1, got {version}")
    return f"model-v{int(version):06d}.npz"


def parse_version(name: str) -> int | None:
    """The version of a ``model-vNNNNNN.npz`` file name (any directory), else None."""
    match = _VERSION_RE.fullmatch(os.path.basename(str(name).rstrip("/")))
    return int(match.group(1)) if match else None


def model_versions(directory: str | os.PathLike) -> list[tuple[int, str]]:
    """``(version, path)`` of the versioned model files in a local directory, oldest first."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = [(parse_version(name), os.path.join(directory, name)) for name in os.listdir(directory)]
    return sorted((v, p) for v, p in found if v is not None)


def write_new_file(path: str | os.PathLike, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically unless ``path`` exists; never replaces a file.

    The bytes go to a temporary file in the same directory, which is then hard-linked
    to ``path`` (``link`` fails when the name exists, so a published version is never
    overwritten, even by a concurrent writer). Returns False when ``path`` existed.
    """
    path, tmp = _write_temp(path)
    try:
        _fill(tmp, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(tmp)
