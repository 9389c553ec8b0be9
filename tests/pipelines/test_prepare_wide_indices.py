"""``prepare libsvm`` and absurd feature indices: a bad row, or one line that names file:line and suggests --n_features.

Without ``--n_features`` the width is inferred up to ``MAX_INFERRED_FEATURES`` (1,000,000):
``99999999999`` once raised OverflowError and ``10000000`` tried to allocate 37 GiB.
"""

import csv

import numpy as np
import pytest

from okl_core.data import DataFormatError, open_dataset
from pipelines import prepare

LINES = ["1 1:0.5 3:1", "-1 99999999999:1", "1 1:0.2", "-1 10000000:2", "-1 2:0.1", "1 2000000:3"]
TOO_WIDE = "feature index {} is above 1,000,000, the most features okl infers; pass --n_features if the rows really are that wide"

CASES = {
    "inferred": ((), f"{{path}}, line 2: {TOO_WIDE.format(99999999999)}"),
    "inferred, skipped": (("--skip_bad_rows",), (3, 3, {2: TOO_WIDE.format(99999999999), 4: TOO_WIDE.format(10000000), 6: TOO_WIDE.format(2000000)})),
    "given": (("--n_features", "5"), "{path}, line 2: feature index 99999999999 exceeds n_features = 5"),
    "given, skipped": (("--n_features", "5", "--skip_bad_rows"), (3, 5, {line: f"feature index {i} exceeds n_features = 5" for line, i in ((2, 99999999999), (4, 10000000), (6, 2000000))})),
    "given wide, skipped": (("--n_features", "2000000", "--skip_bad_rows"), (4, 2000000, {line: f"feature index {i} exceeds n_features = 2000000" for line, i in ((2, 99999999999), (4, 10000000))})),
    "given absurd": (("--n_features", "99999999999"), "n_features 99,999,999,999 is more than a row can hold (536,870,911 float32 features)"),
}


@pytest.mark.parametrize("flags, outcome", CASES.values(), ids=list(CASES))
def test_absurd_indices(tmp_path, flags, outcome):
    path = tmp_path / "wide.svm"
    path.write_text("\n".join(LINES) + "\n")
    argv = ["libsvm", str(path), "--output", str(tmp_path / "out"), "--quiet", "--task", "binary", "--classes=-1,1", *flags]
    if isinstance(outcome, str):
        with pytest.raises((DataFormatError, ValueError)) as err:
            prepare.run(argv)
        assert str(err.value) == outcome.format(path=path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.svm"]
        return
    n_rows, n_features, rejected = outcome
    summary = prepare.run(argv)
    assert (summary.info.n_rows, summary.info.n_features, summary.n_rejected) == (n_rows, n_features, len(rejected))
    with open(tmp_path / "out" / "rejects.csv") as f:
        assert {int(r["line"]): r["reason"] for r in csv.DictReader(f)} == rejected
    X = open_dataset(tmp_path / "out").read_all().X
    assert X.shape == (n_rows, n_features) and X[0, 0] == np.float32(0.5)
    if n_features == 2000000:
        assert X[3, 1999999] == 3.0 and np.count_nonzero(X) == 5
