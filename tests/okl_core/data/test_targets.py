"""Label maps: inference rules, encoding, and the recorded classes."""

import numpy as np
import pytest

from okl_core.data.targets import LabelCollector, LabelMap, MAX_INFERRED_CLASSES, infer_label_map, parse_classes


def _collect(*batches):
    c = LabelCollector()
    for b in batches:
        c.add(b)
    return c


def test_inference_rules():
    assert infer_label_map(_collect(np.array([1.0, -1.0]), np.array([1.0]))) == LabelMap("binary", (-1.0, 1.0))
    assert infer_label_map(_collect(np.array([3.0, 1.0, 2.0]))).classes == (1.0, 2.0, 3.0)
    assert infer_label_map(_collect(np.array([0.5, 1.0]))).task == "regression"
    assert infer_label_map(_collect(np.arange(MAX_INFERRED_CLASSES + 1, dtype=float))).task == "regression"
    assert infer_label_map(_collect(np.array(["b", "a"]))) == LabelMap("binary", ("a", "b"))
    with pytest.raises(ValueError, match="f.txt: only one distinct label"):
        infer_label_map(_collect(np.array([1.0, 1.0])), source="f.txt")
    with pytest.raises(ValueError, match="regression needs numeric"):
        infer_label_map(_collect(np.array(["a", "b"])), "regression")


def test_encode_binary_multiclass_and_unknown():
    binary = LabelMap("binary", (0.0, 1.0))
    y, ok = binary.encode(np.array([1.0, 0.0, 2.0]))
    assert y.tolist()[:2] == [1, -1] and ok.tolist() == [True, True, False] and y.dtype == np.int32
    multi = LabelMap("multiclass", (7.0, 2.0, 5.0))  # given order, not sorted
    y, ok = multi.encode(np.array([2.0, 5.0, 7.0, 7.0]))
    assert y.tolist() == [1, 2, 0, 0] and ok.all()
    strings = LabelMap("multiclass", ("cat", "dog", "1"))
    y, ok = strings.encode(np.array(["dog", "1", "cow"], dtype=object))
    assert y.tolist()[:2] == [1, 2] and ok.tolist() == [True, True, False]
    assert LabelMap("binary", (-1.0, 1.0)).classes_json() == [-1, 1]
    assert LabelMap("regression").classes_json() is None
    assert parse_classes("-1, 1") == (-1.0, 1.0) and parse_classes("cat,2") == ("cat", 2.0)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        LabelMap("binary", (1.0,))
