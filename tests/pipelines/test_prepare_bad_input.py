"""``prepare`` on bad input: one line naming the file, row or flag, nothing written; never inf, never a silent drop.

Each case is a defect an audit found (values beyond float32, ``--drop`` ignored, ``--like`` a
PCA projection, mnist's renumbered labels, data sets of no rows, bad flags, errors without a
file name, non-UTF-8 text).
"""

import os
import subprocess
import sys
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from okl_core.data import open_dataset
from pipelines import prepare
from pipelines.cli import main
from tests.data_files import write_idx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _file(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


def _parquet(tmp_path, name, columns):
    pq.write_table(pa.table(columns), tmp_path / name)
    return str(tmp_path / name)


def _idx(tmp_path, labels):
    labels = np.asarray(labels, dtype=np.uint8)
    images = np.zeros((len(labels), 28, 28), dtype=np.uint8)
    return ["--images", write_idx(tmp_path / "images", images), "--labels", write_idx(tmp_path / "labels", labels)]


def _run(argv, tmp_path):
    """``prepare`` into ``tmp_path/out``, with every warning an error (a RuntimeWarning is a defect too)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return prepare.run([*argv, "--output", str(tmp_path / "out"), "--quiet"])


BEYOND_FLOAT32 = {
    "csv feature": (lambda p: ["csv", _file(p, "f.csv", "a,y\n1e39,0\n3,1\n"), "--target", "y"], "{p}/f.csv, line 2: column 'a': '1e39' is not finite"),
    "csv feature (table path)": (lambda p: ["csv", _file(p, "f.csv", "a,y\n1e39,0\n3,1\n"), "--target", "y", "--missing", "NA"],
                                 "{p}/f.csv, line 2: column 'a': '1e39' is not finite"),
    "csv target": (lambda p: ["csv", _file(p, "f.csv", "a,y\n1,-1e39\n3,1.5\n"), "--target", "y"], "{p}/f.csv, line 2: target 'y': '-1e39' is not finite"),
    "libsvm feature": (lambda p: ["libsvm", _file(p, "f.svm", "+1 1:1e39 3:2\n-1 1:1\n")], "{p}/f.svm, line 1: value of feature 1: '1e39' is not finite"),
    "libsvm regression label": (lambda p: ["libsvm", _file(p, "f.svm", "2.5 1:1\n1e39 1:1\n")], "{p}/f.svm, line 2: label: '1e39' is not finite"),
    "parquet float64": (lambda p: ["parquet", _parquet(p, "f.parquet", {"a": [1.0, 1e39], "y": [0, 1]}), "--target", "y"],
                        "{p}/f.parquet, row 1: column 'a': 1e+39 is not finite"),
    "standard scaling of 1e200": (lambda p: ["csv", _file(p, "f.csv", "a,y\n1e200,0\n3,1\n-1e200,1\n"), "--target", "y", "--feature_scaling", "standard"],
                                  "{p}/f.csv, line 2: column 'a': '1e200' is not finite"),
    "minmax scaling of a subnormal range": (
        lambda p: ["csv", _file(p, "f.csv", "a,y\n0,0\n1e-320,1\n0,1\n"), "--target", "y", "--feature_scaling", "minmax01"],
        "{p}/f.csv: --feature_scaling minmax01: the scale of column 0 (0-based) is not finite: its spread 9.99989e-321 is too small to divide by"),
    "molecular target": (lambda p: ["molecular", _file(p, "m.csv", "smiles,PCE\nCCO,1e39\nO,3.0\n"), "--max_atoms", "9"],
                         "{p}/m.csv, line 2: target 'PCE': '1e39' is not finite"),
}


@pytest.mark.parametrize("case", list(BEYOND_FLOAT32))
def test_values_beyond_float32_are_not_finite(tmp_path, case):
    """1e39 would be stored as inf: refused as NaN is, without a RuntimeWarning, nothing written."""
    if case.startswith("molecular"):
        pytest.importorskip("rdkit")
    argv, message = BEYOND_FLOAT32[case]
    with pytest.raises(ValueError) as err:
        _run(argv(tmp_path), tmp_path)
    assert str(err.value) == message.format(p=tmp_path)
    assert not (tmp_path / "out").exists()


def test_beyond_float32_is_a_reject_with_skip_bad_rows(tmp_path):
    path = _file(tmp_path, "f.csv", "a,y\n1e39,0\n3,1\n4,0\n")
    summary = _run(["csv", path, "--target", "y", "--skip_bad_rows"], tmp_path)
    assert summary.n_rejected == 1 and open_dataset(tmp_path / "out").read_all().X.tolist() == [[3.0], [4.0]]
    assert (tmp_path / "out" / "rejects.csv").read_text().splitlines() == ["line,reason,text", "2,column 'a': '1e39' is not finite,\"1e39,0\""]


def test_largest_float32_is_kept(tmp_path):
    """The limit is where float32 rounds to inf, not below: 3.4028235e38 is stored as itself."""
    path = _file(tmp_path, "f.svm", "1 1:3.4028235e38\n-1 1:-3.4028235e38\n")
    _run(["libsvm", path], tmp_path)
    assert open_dataset(tmp_path / "out").read_all().X.ravel().tolist() == [float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max)]


def _t1(tmp_path):
    return _file(tmp_path, "t1.csv", "a,b,y\n1,2,0\n3,4,1\n5.5,-6,1\n")


@pytest.mark.parametrize("kind", ["csv", "csv (table path)", "parquet"])
def test_drop_applies_to_named_features(tmp_path, kind):
    if kind == "parquet":
        argv = ["parquet", _parquet(tmp_path, "t1.parquet", {"a": [1.0, 3.0, 5.5], "b": [2.0, 4.0, -6.0], "y": [0, 1, 1]})]
    else:
        argv = ["csv", _t1(tmp_path)] + (["--missing", "NA"] if "table" in kind else [])
    _run([*argv, "--target", "y", "--features", "a,b", "--drop", "b"], tmp_path)
    ds = open_dataset(tmp_path / "out")
    assert ds.info.extra["columns"] == ["a"] and ds.read_all().X.ravel().tolist() == [1.0, 3.0, 5.5]


@pytest.mark.parametrize("kind", ["csv", "csv (table path)", "parquet"])
def test_a_feature_named_twice_is_refused(tmp_path, kind):
    if kind == "parquet":
        path = _parquet(tmp_path, "t1.parquet", {"a": [1.0, 3.0, 5.5], "b": [2.0, 4.0, -6.0], "y": [0, 1, 1]})
        argv = ["parquet", path]
    else:
        path = _t1(tmp_path)
        argv = ["csv", path] + (["--missing", "NA"] if "table" in kind else [])
    with pytest.raises(ValueError) as err:
        _run([*argv, "--target", "y", "--features", "a,a"], tmp_path)
    assert str(err.value) == f"{path}: column(s) ['a'] chosen more than once or not unique in the header"
    assert not (tmp_path / "out").exists()


def test_like_a_pca_projection_is_refused_and_pca_names_its_components(tmp_path):
    prepare.run(["csv", _t1(tmp_path), "--target", "y", "--missing", "NA", "--output", str(tmp_path / "raw"), "--quiet"])  # records feature_names
    prepare.run(["pca", str(tmp_path / "raw"), "--components", "1", "--output", str(tmp_path / "pca"), "--quiet"])
    assert open_dataset(tmp_path / "pca").info.extra["feature_names"] == ["pc1"]
    test = _file(tmp_path, "test.csv", "a,b,y\n1,2,0\n")
    with pytest.raises(ValueError) as err:
        _run(["csv", test, "--target", "y", "--like", str(tmp_path / "pca")], tmp_path)
    assert str(err.value) == (f"--like {tmp_path / 'pca'}: the reference is a PCA projection; prepare the raw set --like the raw reference "
                              f"({tmp_path / 'raw'}), then `prepare pca --like {tmp_path / 'pca'}` it")
    assert not (tmp_path / "out").exists()


def test_mnist_classes_are_the_ten_digits(tmp_path):
    """A test file holding digits 7, 2, 1, 0, 4 keeps y = the digit, like a training file of all ten."""
    _run(["mnist", *_idx(tmp_path, [7, 2, 1, 0, 4])], tmp_path)
    ds = open_dataset(tmp_path / "out")
    assert ds.info.classes == list(range(10)) and ds.read_all().y.tolist() == [7, 2, 1, 0, 4]


@pytest.mark.parametrize("labels, message", [([1, 2, 11], "{p}/labels, item 2: label 11 is not a digit 0..9"), ([], "no data rows in {p}/images")])
def test_mnist_refuses_a_label_that_is_no_digit_and_no_items(tmp_path, labels, message):
    with pytest.raises(ValueError) as err:
        _run(["mnist", *_idx(tmp_path, labels)], tmp_path)
    assert str(err.value) == message.format(p=tmp_path)
    assert not (tmp_path / "out").exists()


NO_ROWS = {
    "header-only csv": (lambda p: ["csv", _file(p, "h.csv", "a,y\n"), "--target", "y"], "no data rows in {p}/h.csv"),
    "header-only csv, task given": (lambda p: ["csv", _file(p, "h.csv", "a,y\n"), "--target", "y", "--task", "binary", "--classes", "0,1"],
                                    "no data rows in {p}/h.csv"),
    "header-only csv (table path)": (lambda p: ["csv", _file(p, "h.csv", "a,y\n"), "--target", "y", "--missing", "NA"], "no data rows in {p}/h.csv"),
    "blank libsvm": (lambda p: ["libsvm", _file(p, "b.svm", "\n\n")], "no data rows in {p}/b.svm"),
    "blank libsvm, width and labels given": (lambda p: ["libsvm", _file(p, "b.svm", "\n\n"), "--n_features", "3", "--task", "regression"],
                                             "no data rows in {p}/b.svm"),
    "empty libsvm": (lambda p: ["libsvm", _file(p, "e.svm", "")], "{p}/e.svm is empty"),
    "empty parquet": (lambda p: ["parquet", _parquet(p, "e.parquet", {"a": pa.array([], pa.float64()), "y": pa.array([], pa.int64())}), "--target", "y"],
                      "no data rows in {p}/e.parquet"),
    "every csv row rejected": (lambda p: ["csv", _file(p, "r.csv", "a,y\nx,0\nz,1\n"), "--target", "y", "--skip_bad_rows"],
                               "{p}/r.csv: all 2 rows were rejected (the first: line 2: column 'a': 'x' is not a number (a category? pass --categorical a)); "
                               "nothing was written"),
    "every parquet row rejected": (lambda p: ["parquet", _parquet(p, "n.parquet", {"a": [None, 2.0], "y": [0, None]}), "--target", "y", "--skip_bad_rows"],
                                   "{p}/n.parquet: all 2 rows were rejected (the first: {p}/n.parquet, row 0: column 'a': missing value); nothing was written"),
    "every libsvm line rejected, nothing scanned": (
        lambda p: ["libsvm", _file(p, "r.svm", "1 1:x\n"), "--n_features", "2", "--classes", "0,1", "--skip_bad_rows"],
        "{p}/r.svm: all 1 rows were rejected (the first: line 1: value of feature 1: 'x' is not a number); nothing was written"),
    "molecular --records past the end": (lambda p: ["molecular", _file(p, "m.csv", "smiles,PCE\nO,3.0\n"), "--max_atoms", "9", "--records", "5:9"],
                                         "no data rows in {p}/m.csv: --records 5:9 selects none of its records"),
    "every molecule rejected": (lambda p: ["molecular", _file(p, "m.csv", "smiles,PCE\nCCO,nan\n"), "--max_atoms", "9", "--skip_bad_rows"],
                                "{p}/m.csv: all 1 rows were rejected (the first: row 0, line 2: target 'PCE': 'nan' is not finite); nothing was written"),
}


@pytest.mark.parametrize("case", list(NO_ROWS))
def test_no_rows_to_write_is_an_error_and_writes_nothing(tmp_path, case):
    """Rejects of such a run go with its staging directory: the message names the first instead."""
    if "molecul" in case:
        pytest.importorskip("rdkit")
    argv, message = NO_ROWS[case]
    with pytest.raises(ValueError) as err:
        _run(argv(tmp_path), tmp_path)
    assert str(err.value) == message.format(p=tmp_path)
    assert not (tmp_path / "out").exists() and not [f for f in os.listdir(tmp_path) if f.startswith(".")]


def test_a_refused_data_set_leaves_no_parent_folder_it_made(tmp_path):
    """Issue: --output new/deep/out of a run that wrote nothing left new/deep/ behind (StagedDirectory made it)."""
    argv, message = NO_ROWS["every libsvm line rejected, nothing scanned"]  # refused after the writer staged its folder
    with pytest.raises(ValueError, match="nothing was written"):
        prepare.run([*argv(tmp_path), "--output", str(tmp_path / "new" / "deep" / "out"), "--quiet"])
    assert sorted(os.listdir(tmp_path)) == ["r.svm"]


FLAGS = {
    "empty --delimiter": (["csv", "CSV", "--target", "y", "--delimiter", ""],
                          "--delimiter must be one character other than a quote or a line break (\\t for a tab), got ''"),
    "two-character --delimiter": (["csv", "CSV", "--target", "y", "--delimiter", ";;"],
                                  "--delimiter must be one character other than a quote or a line break (\\t for a tab), got ';;'"),
    "--n_features 0": (["libsvm", "SVM", "--n_features", "0"], "--n_features must be >= 1"),
    "--n_features -1": (["libsvm", "SVM", "--n_features=-1"], "--n_features must be >= 1"),
    "mnist8m --row_group_rows 0": (["mnist8m", "--images", "nowhere", "--labels", "nowhere", "--rows", "10", "--row_group_rows", "0"],
                                   "--row_group_rows must be >= 1"),
    "mnist8m --rows beyond the shard limit": (
        ["mnist8m", "--images", "nowhere", "--labels", "nowhere", "--rows", "99999999999999"],
        "--rows 99,999,999,999,999 in shards of 65,536 rows would make 1,525,878,907 shards; at most 100,000 (fewer --rows, or more --rows_per_shard)"),
}


@pytest.mark.parametrize("case", list(FLAGS))
def test_bad_flags_are_one_line_errors_before_any_work(tmp_path, case):
    argv, message = FLAGS[case]
    paths = {"CSV": _t1(tmp_path), "SVM": _file(tmp_path, "f.svm", "1 1:1\n-1 2:1\n")}
    with pytest.raises(ValueError) as err:
        _run([paths.get(a, a) for a in argv], tmp_path)
    assert str(err.value) == message
    assert not (tmp_path / "out").exists()


def test_mnist8m_bad_row_group_rows_prints_one_line(tmp_path):
    """No Beam ERROR log or traceback before the error line."""
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.prepare", "mnist8m", "--images", "x", "--labels", "y", "--rows", "10", "--row_group_rows", "0",
         "--output", str(tmp_path / "o"), "--quiet"], capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 2 and result.stderr == "python -m pipelines.prepare: error: --row_group_rows must be >= 1\n"


def test_a_tab_delimiter_as_backslash_t(tmp_path):
    path = _file(tmp_path, "t.tsv", "a\tb\ty\n1\t2\t0\n3\t4\t1\n")
    _run(["csv", path, "--target", "y", "--delimiter", "\\t"], tmp_path)
    assert open_dataset(tmp_path / "out").read_all().X.tolist() == [[1.0, 2.0], [3.0, 4.0]]


PARQUET_FILES = {
    "an int64 beyond float64's exact integers": (lambda p: _parquet(p, "big.parquet", {"a": pa.array([1, 2**62], pa.int64()), "y": [0, 1]}),
                                                 "{p}/big.parquet: column 'a': Integer value 4611686018427387904 not in range: -9007199254740992 to 9007199254740992"),
    "a file that is not Parquet in a glob": (
        lambda p: (_parquet(p, "a.parquet", {"a": [1.0, 2.0], "y": [0, 1]}), _file(p, "b.parquet", "not parquet"), str(p / "*.parquet"))[-1],
        "{p}/b.parquet: not a readable Parquet file (Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file.)"),
}


@pytest.mark.parametrize("case", list(PARQUET_FILES))
def test_parquet_errors_name_the_file(tmp_path, case):
    make, message = PARQUET_FILES[case]
    with pytest.raises(ValueError) as err:
        _run(["parquet", make(tmp_path), "--target", "y"], tmp_path)
    assert str(err.value) == message.format(p=tmp_path)


@pytest.mark.parametrize("kind, extra, message", [
    ("csv", [], "{p}/u.csv: not UTF-8 text (byte 0xe9 is not valid UTF-8); save the file as UTF-8"),
    ("csv", ["--missing", "NA"], "{p}/u.csv: not UTF-8 text (byte 0xe9 is not valid UTF-8); save the file as UTF-8"),
    ("libsvm", [], "{p}/u.svm: not UTF-8 text (in the block of lines from line 1); save the file as UTF-8"),
])
def test_non_utf8_text_names_the_file_not_a_wrong_line(tmp_path, kind, extra, message):
    if kind == "csv":
        argv = ["csv", _file(tmp_path, "u.csv", b"a,y\n1,0\n2\xe9,1\n3,1\n"), "--target", "y"]
    else:
        argv = ["libsvm", _file(tmp_path, "u.svm", b"1 1:1\n2\xe9 1:2\n")]
    with pytest.raises(ValueError) as err:
        _run([*argv, *extra], tmp_path)
    assert str(err.value) == message.format(p=tmp_path)


def test_a_test_set_scaled_beyond_float32_is_refused(tmp_path):
    """The training set's scaling (range 1e-30) takes the test set's 1e10 to 1e40: an error, never inf."""
    prepare.run(["csv", _file(tmp_path, "train.csv", "a,y\n0,0\n1e-30,1\n"), "--target", "y", "--feature_scaling", "minmax01",
                 "--output", str(tmp_path / "train"), "--quiet"])
    test = _file(tmp_path, "test.csv", "a,y\n1e10,0\n")
    with pytest.raises(ValueError) as err:
        _run(["csv", test, "--target", "y", "--like", str(tmp_path / "train")], tmp_path)
    assert str(err.value) == f"{test}: scaling makes a feature 1e+40, not finite in float32: the data lies far outside the range of the scaling's statistics"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["csv", "libsvm"])
def test_a_missing_input_file_is_named_in_one_line(tmp_path, kind, capsys):
    """Once Python's own form: "[Errno 2] No such file or directory: 'F'"."""
    argv = [kind, str(tmp_path / "nope.txt"), *(["--target", "y"] if kind == "csv" else []), "--output", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as done:
        main(prepare.run, "prepare", argv)
    assert done.value.code == 2
    assert capsys.readouterr().err == f"python -m pipelines.prepare: error: {tmp_path / 'nope.txt'}: no such file or directory\n"


def test_repeated_drop_and_features_flags_add_up(tmp_path):
    """A repeated --drop (or --features) once kept only its last value, as --missing does not."""
    path = _file(tmp_path, "t.csv", "a,b,c,d,y\n1,2,3,4,0\n5,6,7,8,1\n")
    _run(["csv", path, "--target", "y", "--features", "a,b", "--features", "c,d", "--drop", "a", "--drop", "c"], tmp_path)
    ds = open_dataset(tmp_path / "out")
    assert ds.info.extra["columns"] == ["b", "d"] and ds.read_all().X.tolist() == [[2.0, 4.0], [6.0, 8.0]]
