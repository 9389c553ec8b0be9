"""Model files: a learner's state as ``.npz`` with a JSON header, written atomically.

Layout: one ``.npz`` (zip of ``.npy``) holding each state array under its field name and
``__header__``, a uint8 array of UTF-8 JSON::

    {"format": "okl-model", "format_version": 1, "learner": "...", "config": {...},
     "feature_spec": {...} | null, "generator_version": 1, "n_seen": 123,
     "arrays": {"w": {"dtype": "float64", "shape": [800]}, ...}, "classes": [...]}

``classes`` (optional: absent in files written without it, which load as before) lists
the labels the class codes stand for, from the training data's ``dataset.json``: a
classification model's scores are per code, so data whose ``classes`` differ would be
scored as other classes (:func:`model_classes`; ``okl predict`` refuses such data).

Files are read with ``allow_pickle=False``: model files come from other machines. A file
is written to a temporary name in the target directory and renamed into place, so a reader
never sees a half-written model.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
import math
import re
import stat
import struct
import tempfile
import typing
import zipfile

import numpy as np

from okl_core.derived import make_learner
from okl_core.divergence import non_finite_fields
from okl_core.learners.base import Learner
from okl_core.random import GENERATOR_VERSION
from okl_core.registry import learner_class

__all__ = [
    "FORMAT_VERSION", "ModelFileError", "save_model", "load_model", "model_bytes", "model_from_bytes", "atomic_write_bytes",
    "version_file_name", "parse_version", "model_versions", "write_new_file", "MAX_MODEL_BYTES",
    "read_model_file", "raw_state_bytes", "state_from_raw_bytes", "model_classes", "check_classes", "MAX_CLASSES_BYTES",
]

FORMAT_VERSION = 1
MAX_MODEL_BYTES = 16 << 30
"""Default limit on a model file's size and on its arrays' total size (16 GiB)."""
_HEADER_KEY = "__header__"
_VERSION_RE = re.compile(r"model-v(\d{6,})\.npz")
_RAW_MAGIC = b"OKLRAW1\n"
_RAW_LENGTH = struct.Struct("<I")
MAX_CLASSES_BYTES = 1 << 19
"""The most bytes the class names a model file records may take as JSON (512 KiB): half the
limit of a model file's header (:func:`model_bytes`), whose other fields take a few KiB.
Such names are refused when the model is made (a training job: at launch), not written
into a file that would not load."""


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


def _shown(classes: list) -> str:
    """``classes`` for an error line: cut after 200 characters (a list of class names can be megabytes)."""
    text = repr(classes)
    return text if len(text) <= 200 else text[:200] + f"... ({len(classes)} in all)"


def _classes_problem(learner: Learner, classes) -> str | None:
    """Why the list ``classes`` cannot be the class names of ``learner``'s model (None: they can)."""
    if learner.task == "regression":
        return f"{learner.name} is a regression learner: its model has no classes, got {_shown(classes)}"
    expected = 2 if learner.task == "binary" else getattr(learner.config, "n_classes", None)
    if expected is not None and len(classes) != expected:
        return f"{learner.name} predicts {expected} classes, got {len(classes)} class names {_shown(classes)}"
    try:
        size = len(json.dumps(classes, allow_nan=False))  # as the header writes them (ASCII, escapes counted)
    except (TypeError, ValueError) as err:
        return f"classes must be JSON values (strings, numbers, booleans), got {_shown(classes)} ({err})"
    if size > MAX_CLASSES_BYTES:
        return (f"the {len(classes)} class names take {size} bytes as JSON, more than the {MAX_CLASSES_BYTES} a model file records; "
                "give the classes shorter names")
    return None


def check_classes(learner: Learner, classes):
    """``classes`` as the JSON list a model of ``learner`` records (:func:`model_bytes`); None stays None.

    A numpy array's values become Python values. Checked: a classification learner's
    number of classes, JSON values, at most :data:`MAX_CLASSES_BYTES` as JSON. A training
    job calls this at launch, so that names no model file could record are refused before
    any work.

    Raises
    ------
    ValueError
        One line saying what is wrong (a long list is cut short in it).
    TypeError
        ``classes`` that is not a list, tuple or numpy array.
    """
    if classes is None:
        return None
    if not isinstance(classes, (list, tuple, np.ndarray)):  # a string would pass as its characters
        raise TypeError(f"classes must be a list of labels, got {type(classes).__name__}")
    classes = classes.tolist() if isinstance(classes, np.ndarray) else list(classes)
    problem = _classes_problem(learner, classes)
    if problem:
        raise ValueError(problem)
    return classes


def model_bytes(learner: Learner, state, classes=None) -> bytes:
    """Serialise ``(learner, state)`` to the bytes of a model file (deterministic).

    ``classes`` (optional): the labels the class codes stand for, in code order (binary:
    ``[negative, positive]``; multiclass: one per class), JSON values; recorded in the
    header for :func:`model_classes`. None records nothing.

    Raises
    ------
    ValueError
        A state that does not fit the learner, or ``classes`` that :func:`check_classes`
        refuses (a regression learner's, another count than the learner's classes, not JSON
        values, or more than :data:`MAX_CLASSES_BYTES` as JSON).
    TypeError
        ``classes`` that is not a list, tuple or numpy array.
    """
    learner.check_state(state)
    fields = _header(learner, state)
    if classes is not None:  # absent, not null, when not given: such files keep the bytes of okl before the field
        fields["classes"] = check_classes(learner, classes)
    header = json.dumps(fields, sort_keys=True).encode("utf-8")
    if len(header) > _MAX_HEADER_BYTES:  # a guard (check_classes keeps the names to half of it): such a file would not load
        raise ValueError(f"the model header would be {len(header)} bytes, more than the {_MAX_HEADER_BYTES} a model file may hold "
                         f"({len(fields.get('classes', []))} class names)")
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
    """Write ``data`` to ``path`` through a temporary file in the same directory + rename.

    Raises
    ------
    ValueError
        ``path`` is empty (its temporary file would go to the parent of the working directory).
    IsADirectoryError
        ``path`` is a directory; checked first, so the error names ``path``, not the
        temporary file that could not be renamed over it.
    """
    _check_file_path(path)
    path, tmp = _write_temp(path)
    try:
        _fill(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _check_file_path(path: str | os.PathLike) -> None:
    """Refuse an empty path or a directory as the name of a file to write (one line naming it)."""
    path = os.fspath(path)
    if not path:
        raise ValueError("path must be a file name, got ''")
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file name", path)


def save_model(path: str | os.PathLike, learner: Learner, state, classes=None) -> None:
    """Save a model file atomically (see module docstring for the layout; ``classes``: :func:`model_bytes`)."""
    atomic_write_bytes(path, model_bytes(learner, state, classes))


def model_from_bytes(data: bytes, source: str = "<bytes>", *, max_bytes: int | None = None, allow_non_finite: bool = False):
    """Parse model-file bytes into ``(learner, state)``; errors name ``source``.

    Nothing is allocated for an array before its ``.npy`` header has been checked: its
    dtype must be numeric, its declared size must equal the bytes the member holds, and
    all arrays together must fit ``max_bytes`` (default :data:`MAX_MODEL_BYTES`).
    Compressed members are refused (okl writes model files uncompressed), so a small file
    can never inflate into a large allocation.

    Parameters
    ----------
    data : bytes
    source : str
        What the error messages call the file.
    max_bytes : int, optional
        Limit on the arrays' total size.
    allow_non_finite : bool
        Accept NaN or inf in the arrays. The training pipelines pass True for the states
        they produce themselves (a diverged shard must still merge and be reported);
        every model a user hands to okl is refused.

    Raises
    ------
    ModelFileError
        One line naming ``source`` and what is wrong.
    """
    limit = MAX_MODEL_BYTES if max_bytes is None else int(max_bytes)
    arrays = _read_arrays(data, source, limit)
    if _HEADER_KEY not in arrays:
        raise ModelFileError(f"{source}: not an okl model file (no header)")
    header = _parse_header(arrays.pop(_HEADER_KEY), source)
    learner = _rebuild(header, source)
    problem = _classes_problem(learner, header["classes"]) if "classes" in header else None
    if problem:
        raise ModelFileError(f"{source}: header field 'classes' does not fit the learner ({problem})")
    fields = learner.state_class._fields
    if sorted(arrays) != sorted(fields):
        raise ModelFileError(f"{source}: arrays {sorted(arrays)} do not match {learner.name} state fields {sorted(fields)}")
    if sorted(header["arrays"]) != sorted(arrays):
        raise ModelFileError(f"{source}: header lists arrays {sorted(header['arrays'])}, the file holds {sorted(arrays)}")
    for name, meta in header["arrays"].items():
        a = arrays[name]
        if str(a.dtype) != meta["dtype"] or list(a.shape) != meta["shape"]:
            raise ModelFileError(f"{source}: array {name!r} is {a.dtype}{list(a.shape)}, its header entry says {meta['dtype']}{meta['shape']}")
    state = learner.state_class(**{k: arrays[k] for k in fields})
    _check_shapes(learner, state, source)
    if int(state.n_seen) != header["n_seen"]:
        raise ModelFileError(f"{source}: n_seen in header ({header['n_seen']}) and state ({int(state.n_seen)}) disagree")
    if not allow_non_finite:
        bad = non_finite_fields(state)
        if bad:
            raise ModelFileError(f"{source}: array {bad[0]!r} holds NaN or inf values (the run that wrote it diverged); "
                                 "a non-finite model cannot be used")
    return learner, state


def model_classes(data: bytes, source: str = "<bytes>") -> list | None:
    """The class names the header of model-file bytes records, in code order (None: none recorded).

    Only the header is read. None for a regression model and for a file written without
    them (by okl before the field, or by :func:`save_model` without ``classes``).

    Raises
    ------
    ModelFileError
        Bytes that are not an okl model file, or a header that :func:`model_from_bytes` refuses.
    """
    arrays = _read_arrays(data, source, MAX_MODEL_BYTES, only=_HEADER_KEY)
    if _HEADER_KEY not in arrays:
        raise ModelFileError(f"{source}: not an okl model file (no header)")
    return _parse_header(arrays[_HEADER_KEY], source).get("classes")


def _read_arrays(data: bytes, source: str, limit: int, only: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of an npz (``only``: that one, when present), each checked from its ``.npy`` header before it is read."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = zf.infolist()
            if len({m.filename for m in members}) != len(members):
                raise ModelFileError(f"{source}: not an okl model file (a member name repeats)")
            if only is not None:
                members = [m for m in members if m.filename == f"{only}.npy"]
            declared = [(m, _npy_header(zf, m, source)) for m in members]
            total = sum(nbytes for _, (_, _, _, nbytes) in declared)
            if total > limit:
                raise ModelFileError(f"{source}: its arrays declare {total} bytes, more than the limit of {limit} bytes")
            return {m.filename[: -len(".npy")]: _read_npy(zf, m, meta, source) for m, meta in declared}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError, RuntimeError) as err:
        raise ModelFileError(f"{source}: not a readable okl model file ({_one_line(err)})") from None


def _npy_header(zf: zipfile.ZipFile, member: zipfile.ZipInfo, source: str):
    """``(dtype, shape, fortran, nbytes)`` of a member, from its .npy header only."""
    name = member.filename
    if not name.endswith(".npy"):
        raise ModelFileError(f"{source}: not an okl model file (member {name!r} is not a .npy array)")
    if member.compress_type != zipfile.ZIP_STORED:
        raise ModelFileError(f"{source}: member {name!r} is compressed; okl model files are written uncompressed")
    with zf.open(member) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ModelFileError(f"{source}: array {name!r} has .npy format version {version}, okl reads 1.0 and 2.0")
        offset = f.tell()
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "biufc" or dtype.itemsize == 0:
        raise ModelFileError(f"{source}: array {name!r} has dtype {dtype.str!r}; model arrays are numbers")
    if any(d < 0 for d in shape):
        raise ModelFileError(f"{source}: array {name!r} has a negative dimension {list(shape)}")
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if nbytes != member.file_size - offset:
        raise ModelFileError(f"{source}: array {name!r} declares {list(shape)} {dtype} ({nbytes} bytes) "
                             f"but holds {member.file_size - offset} bytes")
    return dtype, shape, fortran, nbytes


def _read_npy(zf: zipfile.ZipFile, member: zipfile.ZipInfo, meta, source: str) -> np.ndarray:
    """Read a checked member into a fresh array (its size is known to match the member)."""
    dtype, shape, fortran, nbytes = meta
    flat = np.empty(nbytes, dtype=np.uint8)
    with zf.open(member) as f:
        f.read(member.file_size - nbytes)  # the .npy header, already checked
        if typing.cast(io.BufferedIOBase, f).readinto(flat.data) != nbytes or f.read(1):  # ZipExtFile has readinto
            raise ModelFileError(f"{source}: array {member.filename!r} is shorter than its header says")
    return flat.view(dtype).reshape(shape, order="F" if fortran else "C")


_HEADER_TYPES: dict[str, tuple[type, ...]] = {
    "format": (str,), "format_version": (int,), "generator_version": (int,), "learner": (str,),
    "config": (dict,), "feature_spec": (dict, type(None)), "n_seen": (int,), "arrays": (dict,),
}
_MAX_HEADER_BYTES = 1 << 20


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _parse_header(raw: np.ndarray, source: str) -> dict:
    """The JSON header, its fields of the right JSON types (ModelFileError otherwise)."""
    if raw.dtype != np.uint8 or raw.ndim != 1 or raw.size > _MAX_HEADER_BYTES:
        raise ModelFileError(f"{source}: corrupt model header (not a 1-D uint8 array of at most {_MAX_HEADER_BYTES} bytes)")
    try:
        header = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        reason = "nested too deeply" if isinstance(err, RecursionError) else _one_line(err)
        raise ModelFileError(f"{source}: corrupt model header ({reason})") from None
    if not isinstance(header, dict) or header.get("format") != "okl-model":
        raise ModelFileError(f"{source}: not an okl model file")
    for key, types in _HEADER_TYPES.items():
        value = header.get(key)
        if key not in header or not isinstance(value, types) or isinstance(value, bool):
            raise ModelFileError(f"{source}: header field {key!r} must be {' or '.join(_json_type(t()) for t in types)}, "
                                 f"got {'nothing' if key not in header else _json_type(value)}")
    if header["format_version"] != FORMAT_VERSION:
        raise ModelFileError(f"{source}: model format version {header['format_version']} is not supported (this okl reads {FORMAT_VERSION})")
    if header["generator_version"] != GENERATOR_VERSION:
        raise ModelFileError(
            f"{source}: written with feature-generator version {header['generator_version']}, this okl has "
            f"version {GENERATOR_VERSION}; its random features would differ, so it cannot be loaded"
        )
    if "classes" in header and not isinstance(header["classes"], list):  # optional: files written without it
        raise ModelFileError(f"{source}: header field 'classes' must be a list, got {_json_type(header['classes'])}")
    if header["n_seen"] < 0:
        raise ModelFileError(f"{source}: header field 'n_seen' is negative ({header['n_seen']})")
    for name, meta in header["arrays"].items():
        ok = (isinstance(meta, dict) and isinstance(meta.get("dtype"), str) and isinstance(meta.get("shape"), list)
              and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in meta["shape"]))
        if not ok:
            raise ModelFileError(f"{source}: header entry of array {name!r} must be "
                                 '{"dtype": string, "shape": list of non-negative integers}')
    return header


def _rebuild(header: dict, source: str) -> Learner:
    """The learner of the header's name and config; its feature spec must match the header's."""
    try:
        config = {**learner_class(header["learner"]).legacy_config, **header["config"]}  # fields newer than the file
        learner = make_learner(header["learner"], **config)
    except Exception as err:  # any failure of a foreign config is a bad file, whatever the learner raises
        raise ModelFileError(f"{source}: cannot rebuild the learner ({type(err).__name__}: {_one_line(err)})") from None
    spec = learner.feature_spec()
    if (spec.to_dict() if spec is not None else None) != header["feature_spec"]:
        raise ModelFileError(f"{source}: feature spec in the header does not match the learner's config")
    return learner


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _check_shapes(learner: Learner, state, source: str) -> None:
    """:meth:`Learner.check_state` as a :class:`ModelFileError` naming ``source``. A config
    whose fresh state cannot even be laid out (too large for memory) is a bad file too."""
    try:
        learner.check_state(state)
    except ValueError as err:
        raise ModelFileError(f"{source}: {_one_line(err)}") from None
    except Exception as err:  # MemoryError included: the config, not the arrays, asks for too much
        raise ModelFileError(f"{source}: its config asks for a state that cannot be built ({type(err).__name__}: {_one_line(err)})") from None


def load_model(path: str | os.PathLike, *, max_bytes: int | None = None):
    """Load ``(learner, state)`` from a model file.

    Only a regular file is read, and at most ``max_bytes`` (default
    :data:`MAX_MODEL_BYTES`) of it: a device, a FIFO or a path that never ends is refused
    before anything is read.

    Raises
    ------
    ModelFileError
        Missing, unreadable, oversized, corrupt or foreign file, another format or
        generator version, arrays that do not fit the learner, or NaN / inf in the arrays.
    """
    path = os.fspath(path)
    limit = MAX_MODEL_BYTES if max_bytes is None else int(max_bytes)
    return model_from_bytes(read_model_file(path, limit), source=path, max_bytes=limit)


def read_model_file(path: str, max_bytes: int) -> bytes:
    """The bytes of a local model file: a regular file of at most ``max_bytes``, read with a bound."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ModelFileError(f"{path}: not a regular file; a model file must be one")
        if info.st_size > max_bytes:
            raise ModelFileError(f"{path}: {info.st_size} bytes, more than the limit of {max_bytes} bytes for a model file")
        with open(path, "rb") as f:
            # At most the size stat saw (+1 to see growth): read(n) reserves n bytes up front.
            data = f.read(min(info.st_size, max_bytes) + 1)
    except OSError as err:
        raise ModelFileError(f"{path}: cannot read model file ({err.strerror})") from None
    if len(data) > max_bytes:
        raise ModelFileError(f"{path}: more than the limit of {max_bytes} bytes for a model file")
    return data


def raw_state_bytes(learner: Learner, state) -> bytes:
    """A state's arrays as raw bytes behind a tiny JSON header (no zip, no config): a job's working copy.

    For state a job keeps for itself between steps (a streaming shard's Beam state, written
    after every batch): it names the learner and each array's dtype and shape, not the
    config, so it is read back with :func:`state_from_raw_bytes` by the same learner. Writing
    and reading it back costs 11-57x less than a model file (FOGD, D = 400: 28 us against
    1.6 ms; kernel OGD 31 us against 351 us); model files stay the format of everything
    published.
    """
    if not isinstance(state, learner.state_class):
        raise TypeError(f"{learner.name} state must be {learner.state_class.__name__}, got {type(state).__name__}")
    arrays = [(name, np.asarray(value, order="C")) for name, value in state._asdict().items()]
    header = json.dumps({"learner": learner.name, "arrays": [[name, a.dtype.str, list(a.shape)] for name, a in arrays]}).encode("utf-8")
    return b"".join([_RAW_MAGIC, _RAW_LENGTH.pack(len(header)), header, *(a.tobytes() for _, a in arrays)])


def state_from_raw_bytes(learner: Learner, data: bytes, source: str = "<bytes>"):
    """The state :func:`raw_state_bytes` wrote for ``learner`` (arrays copied; NaN and inf kept).

    Raises
    ------
    ModelFileError
        Bytes of another format or learner, arrays that do not fit the learner's state, or
        a payload whose length is not the arrays' total size.
    """
    start = len(_RAW_MAGIC) + _RAW_LENGTH.size
    if data[: len(_RAW_MAGIC)] != _RAW_MAGIC or len(data) < start:
        raise ModelFileError(f"{source}: not raw okl state bytes")
    (length,) = _RAW_LENGTH.unpack_from(data, len(_RAW_MAGIC))
    try:
        header = json.loads(bytes(data[start : start + length]).decode("utf-8"))
        entries = [(str(name), np.dtype(dtype), tuple(int(d) for d in shape)) for name, dtype, shape in header["arrays"]]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as err:
        raise ModelFileError(f"{source}: corrupt raw state header ({_one_line(err)})") from None
    if header.get("learner") != learner.name or [name for name, _, _ in entries] != list(learner.state_class._fields):
        raise ModelFileError(f"{source}: raw state of {header.get('learner')!r} with arrays {[n for n, _, _ in entries]}, "
                             f"expected {learner.name} state fields {list(learner.state_class._fields)}")
    if any(dtype.kind not in "biuf" or min(shape, default=0) < 0 for _, dtype, shape in entries):
        raise ModelFileError(f"{source}: raw state arrays must be numeric with non-negative shapes")
    sizes = [dtype.itemsize * math.prod(shape) for _, dtype, shape in entries]
    if len(data) != start + length + sum(sizes):
        raise ModelFileError(f"{source}: raw state holds {len(data) - start - length} bytes of arrays, its header declares {sum(sizes)}")
    offset, arrays = start + length, {}
    for (name, dtype, shape), size in zip(entries, sizes):
        arrays[name] = np.frombuffer(data, dtype=dtype, count=size // dtype.itemsize, offset=offset).reshape(shape).copy()
        offset += size
    state = learner.state_class(**arrays)
    _check_shapes(learner, state, source)
    return state


def version_file_name(version: int) -> str:
    """``model-v000001.npz``: the name of merged model version ``version`` (>= 1; sorts by version)."""
    if int(version) < 1:
        raise ValueError(f"model versions start at 1, got {version}")
    return f"model-v{int(version):06d}.npz"


def parse_version(name: str) -> int | None:
    """The version of a file named as :func:`version_file_name` names version files (any
    directory), else None: not version 0, not ``model-v0000001.npz`` (version 1 twice)."""
    base = os.path.basename(str(name).rstrip("/"))
    match = _VERSION_RE.fullmatch(base)
    version = int(match.group(1)) if match else 0
    return version if version >= 1 and base == version_file_name(version) else None


def model_versions(directory: str | os.PathLike) -> list[tuple[int, str]]:
    """``(version, path)`` of the versioned model files in a local directory, oldest first
    (regular files whose names :func:`parse_version` reads; not a directory of such a name)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = [(parse_version(name), os.path.join(directory, name)) for name in os.listdir(directory)]
    return sorted((v, path) for v, path in found if v is not None and os.path.isfile(path))


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
