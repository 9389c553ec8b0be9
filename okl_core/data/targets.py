"""Labels and targets: task inference and the mapping from original labels to okl's.

okl's learners take binary labels in {-1, +1}, multiclass labels in 0..C-1 and float
regression targets. Source files carry arbitrary labels (0/1, 1/2, -1/+1, digits, strings),
so converters collect the distinct labels in a first pass (:class:`LabelCollector`), decide
the task (:func:`infer_label_map`), and record the original labels in ``dataset.json``
(``classes``: binary ``[negative, positive]``, multiclass the original label of each class
index). Inference rules, unless ``task`` is given:

* a label that is not a number, or only integer-valued numbers: classification -- two
  distinct labels give ``binary`` (the smaller one, in sorted order, is -1), more give
  ``multiclass`` (sorted order);
* a non-integer number, or more than :data:`MAX_INFERRED_CLASSES` distinct integers:
  ``regression``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from okl_core.data.scaling import Scaling
from okl_core.labels import check_task

__all__ = ["MAX_INFERRED_CLASSES", "LabelCollector", "LabelMap", "decide_labels_and_scaling", "infer_label_map", "parse_classes"]

MAX_INFERRED_CLASSES = 1000
"""More distinct integer labels than this are read as a regression target."""

class LabelCollector:
    """Distinct labels of a stream (stops tracking past ``MAX_INFERRED_CLASSES`` values)."""

    def __init__(self):
        self.values: set = set()
        self.too_many = False
        self.numeric = True  # every label seen is a number
        self.integral = True  # every numeric label is integer-valued

    def add(self, labels) -> None:
        """Add a batch: a float array, or a sequence of strings (non-numeric labels)."""
        labels = np.asarray(labels)
        if labels.dtype.kind in "fiu":
            if labels.dtype.kind == "f" and not np.all(labels == np.floor(labels)):
                self.integral = False
        else:
            self.numeric = False
        if self.too_many:
            return
        self.values.update(np.unique(labels).tolist())
        if len(self.values) > MAX_INFERRED_CLASSES:
            self.too_many = True
            self.values = set()


@dataclasses.dataclass(frozen=True)
class LabelMap:
    """How original labels become okl labels.

    Attributes
    ----------
    task : {'binary', 'multiclass', 'regression'}
    classes : tuple
        Original label of each class index (binary: ``(negative, positive)``); empty for
        regression.
    """

    task: str
    classes: tuple = ()

    def __post_init__(self):
        check_task(self.task)
        if self.task == "binary" and len(self.classes) != 2:
            raise ValueError(f"binary task needs exactly 2 classes, got {list(self.classes)}")
        if self.task == "multiclass" and len(self.classes) < 2:
            raise ValueError(f"multiclass task needs at least 2 classes, got {list(self.classes)}")
        if len(set(self.classes)) != len(self.classes):
            raise ValueError(f"classes must be distinct, got {list(self.classes)}")

    def classes_json(self) -> list | None:
        """Classes for ``dataset.json`` (integral floats as ints), None for regression."""
        if self.task == "regression":
            return None
        return [_json_label(c) for c in self.classes]

    def encode(self, labels) -> tuple[np.ndarray, np.ndarray]:
        """Map original labels; return ``(y, ok)`` with ``ok`` False where a label is unknown.

        ``y`` is int32 (-1/+1 or 0..C-1) for classification, float64 for regression.
        """
        labels = np.asarray(labels)
        if self.task == "regression":
            y = labels.astype(np.float64)
            return y, np.isfinite(y)
        numeric_classes = not any(isinstance(c, str) for c in self.classes)
        if labels.dtype.kind in "fiu" and numeric_classes:
            idx, found = self._encode_numeric(labels.astype(np.float64))
        else:
            index = {_key(c): i for i, c in enumerate(self.classes)}
            keys = labels.tolist()
            found = np.array([_key(k) in index for k in keys], dtype=bool)
            idx = np.array([index.get(_key(k), 0) for k in keys], dtype=np.int32)
        if self.task == "binary":
            idx = np.where(idx == 1, 1, -1).astype(np.int32)
        return idx, found

    def _encode_numeric(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.array([float(c) for c in self.classes])
        order = np.argsort(values, kind="stable")
        pos = np.clip(np.searchsorted(values[order], labels), 0, len(values) - 1)
        found = values[order][pos] == labels
        return np.where(found, order[pos], 0).astype(np.int32), found

    @classmethod
    def from_info(cls, task: str, classes) -> "LabelMap":
        """Rebuild from a data set's ``task`` and ``classes`` (to label a test set alike)."""
        return cls(task, tuple(classes or ()))


def _key(value):
    # 1 and 1.0 and "1" must not be confused, but 1 (int) and 1.0 (float) are the same label.
    if isinstance(value, str):
        return ("s", value)
    return ("n", float(value))


def _json_label(value):
    if isinstance(value, str):
        return value
    value = float(value)
    return int(value) if value == math.floor(value) and abs(value) < 2**53 else value


def parse_classes(text: str) -> tuple:
    """Parse ``--classes`` (comma separated; numbers where they parse, else strings)."""
    out: list[float | str] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty label in classes {text!r}")
        try:
            out.append(float(part))
        except ValueError:
            out.append(part)
    return tuple(out)


def infer_label_map(collector: LabelCollector, task: str | None = None, source: str = "") -> LabelMap:
    """Decide the task and classes from the labels seen (see the module docstring).

    Raises
    ------
    ValueError
        ``task`` incompatible with the labels (e.g. binary with 3 labels), or the labels
        do not determine a task (a single class); the message names ``source``.
    """
    where = f"{source}: " if source else ""
    if task is not None:
        check_task(task)
    if task == "regression":
        if not collector.numeric:
            raise ValueError(f"{where}regression needs numeric targets, found non-numeric labels")
        return LabelMap("regression")
    regression_like = collector.numeric and (not collector.integral or collector.too_many)
    if task is None and regression_like:
        return LabelMap("regression")
    if collector.too_many:
        raise ValueError(f"{where}more than {MAX_INFERRED_CLASSES} distinct labels: not a {task} task (use --task regression)")
    classes = tuple(sorted(collector.values, key=lambda v: (isinstance(v, str), v)))
    if task is None:
        if len(classes) < 2:
            raise ValueError(f"{where}only one distinct label {[_json_label(c) for c in classes]}: cannot infer the task; pass --task and --classes")
        task = "binary" if len(classes) == 2 else "multiclass"
    if task == "binary" and len(classes) != 2:
        raise ValueError(f"{where}binary task needs exactly 2 distinct labels, found {len(classes)}: {[_json_label(c) for c in classes[:10]]}")
    if task == "multiclass" and len(classes) < 2:
        raise ValueError(f"{where}multiclass task needs at least 2 distinct labels, found {len(classes)}; pass --classes")
    return LabelMap(task, classes)


def decide_labels_and_scaling(path, d, labels, all_numeric, feature_stats, target_stats, task, classes, like_info, feature_scaling, target_scaling):
    """The label map and feature/target scalings of a table: the reference's, or from the scan.

    ``labels`` is the :class:`LabelCollector` of the targets (as numbers when
    ``all_numeric``, else as text); ``feature_stats`` may be None when not scaling.
    """
    if like_info is not None:
        recorded = like_info.feature_scaling or {}
        fscale = Scaling.from_json(recorded.get("features", {"method": "none"}), d, like_info.name)
        tscale = Scaling.from_json(recorded.get("target", {"method": "none"}), 1, like_info.name)
        return LabelMap.from_info(like_info.task, like_info.classes), fscale, tscale
    if classes is not None:
        classes = _typed_classes(path, classes, all_numeric)
        label_map = LabelMap(task or ("binary" if len(classes) == 2 else "multiclass"), classes)
    else:
        label_map = infer_label_map(labels, task, source=path)
    if label_map.task != "regression" and target_scaling != "none":
        raise ValueError(f"{path}: target scaling applies to regression targets only (the task is {label_map.task})")
    fscale = Scaling.fit(feature_scaling, feature_stats if feature_scaling != "none" else None, where=path)
    tscale = Scaling.fit(target_scaling, target_stats if target_scaling != "none" else None, "--target_scaling", path)
    return label_map, fscale, tscale


def _typed_classes(path, classes, numeric: bool) -> tuple:
    """Given classes compare as numbers when every target is a number, else as text."""
    if not numeric:
        return tuple(c if isinstance(c, str) else format(c, "g") for c in classes)
    try:
        return tuple(float(c) for c in classes)
    except ValueError:
        raise ValueError(f"{path}: the targets are numbers but the classes {list(classes)} are not") from None
