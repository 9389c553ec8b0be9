"""Molecular features: Coulomb matrices, random sorting, step predicates, rejects."""

import builtins
import csv
import os

import numpy as np
import pytest

from okl_core.data import open_dataset
from okl_core.data.molecular import (
    BOHR_PER_ANGSTROM,
    MolecularConfig,
    MoleculeError,
    convert_molecules,
    coulomb_matrix,
    featurize_molecule,
    import_rdkit,
    random_sorted,
    step_predicates,
    upper_triangle,
)
from okl_core.data.sources import DataFormatError
from tests.conftest import shared_data


def _from_upper(vector, n):
    C = np.zeros((n, n))
    C[np.triu_indices(n)] = vector
    return C + np.triu(C, 1).T


def test_coulomb_matrix_known_geometry():
    Z = np.array([8.0, 1.0, 1.0])  # water, Angstrom-free toy geometry
    R = np.array([[0.0, 0.0, 0.0], [1.8, 0.0, 0.0], [-0.45, 1.74, 0.0]])
    C = coulomb_matrix(Z, R)
    np.testing.assert_array_equal(C, C.T)
    np.testing.assert_array_equal(np.diag(C), 0.5 * Z**2.4)
    assert C[0, 1] == 8.0 / 1.8 and C[1, 2] == pytest.approx(1.0 / np.hypot(2.25, 1.74), rel=1e-15)
    with pytest.raises(MoleculeError, match="same position"):
        coulomb_matrix(Z, np.zeros((3, 3)))


def test_sorting_padding_and_steps():
    C = np.array([[1.0, 2.0, 0.0], [2.0, 9.0, 1.0], [0.0, 1.0, 0.5]])
    S = random_sorted(C, np.zeros(3))
    assert np.diag(S).tolist() == [9.0, 1.0, 0.5]  # rows by decreasing norm
    np.testing.assert_array_equal(S, S.T)
    # Noise can swap rows with close norms; order follows norm + noise.
    assert np.diag(random_sorted(C, [0.0, -100.0, 0.0])).tolist() == [1.0, 0.5, 9.0]
    v = upper_triangle(S, 4)
    assert v.shape == (10,) and v.tolist()[:4] == [9.0, 2.0, 1.0, 0.0] and v[-1] == 0.0
    assert upper_triangle(S, 2).tolist() == [9.0, 2.0, 1.0]  # truncated to the first atoms
    codes = step_predicates(np.array([[0.5, 2.5]]), (1.0, 2.0, 3.0))
    assert codes.tolist() == [[0, 0, 0, 1, 1, 0]]


@pytest.mark.parametrize("smiles, charges", [("O", [8, 1, 1]), ("CCO", [8, 6, 6] + [1] * 6), ("c1ccccc1", [6] * 6 + [1] * 6)])
def test_featurized_molecules_are_symmetric_with_the_right_diagonal(smiles, charges):
    pytest.importorskip("rdkit")
    config = MolecularConfig(max_atoms=12, sort_noise=0.0, permutations=2, seed=4)
    X, truncated = featurize_molecule(7, smiles, config)
    assert X.shape == (2, 78) and X.dtype == np.float32 and not truncated
    C = _from_upper(X[0].astype(np.float64), 12)
    n = len(charges)
    np.testing.assert_allclose(np.sort(np.diag(C)[:n])[::-1], np.sort(0.5 * np.array(charges, float) ** 2.4)[::-1], rtol=1e-6)
    assert (C[n:] == 0).all()  # padding
    norms = np.linalg.norm(C[:n, :n], axis=1)
    assert (np.diff(norms) <= 1e-4).all()  # sort_noise 0: plain norm order
    # Off-diagonals are Z_i Z_j / distance with realistic (Bohr) bond lengths.
    if smiles == "O":
        np.testing.assert_allclose(C[0, 1:3], 8.0 / (0.96 * BOHR_PER_ANGSTROM), rtol=0.1)
    np.testing.assert_array_equal(X[0], X[1])  # no noise: both permutations agree


def test_featurization_is_deterministic_and_keyed_by_row():
    pytest.importorskip("rdkit")
    config = MolecularConfig(max_atoms=30, permutations=3, seed=1)
    a, _ = featurize_molecule(5, "CC(=O)Nc1ccc(O)cc1", config)
    b, _ = featurize_molecule(5, "CC(=O)Nc1ccc(O)cc1", config)
    c, _ = featurize_molecule(6, "CC(=O)Nc1ccc(O)cc1", config)
    assert a.tobytes() == b.tobytes()
    assert not np.array_equal(a, c)
    assert len({r.tobytes() for r in a}) > 1  # the permutations differ
    steps = featurize_molecule(5, "CC(=O)Nc1ccc(O)cc1", MolecularConfig(max_atoms=30, permutations=3, seed=1, steps=(1.0, 10.0)))[0]
    np.testing.assert_array_equal(steps, step_predicates(a, (1.0, 10.0)))


def test_morgan_fingerprint():
    pytest.importorskip("rdkit")
    X, _ = featurize_molecule(0, "c1ccccc1O", MolecularConfig(representation="morgan", morgan_bits=512))
    assert X.shape == (1, 512) and set(np.unique(X)) <= {0.0, 1.0} and X.sum() > 2


def test_rejects_file_and_bad_targets(tmp_path):
    pytest.importorskip("rdkit")
    path = tmp_path / "mols.csv"
    path.write_text("smiles,PCE\nCCO,1.5\nC1CC,2.0\nc1cccc1,3.0\nO,4.25\n,5\nCN,abc\n")
    with pytest.raises(DataFormatError, match=r"mols.csv, line 7: target 'PCE': 'abc' is not a number"):
        convert_molecules(path, tmp_path / "o", config=MolecularConfig(max_atoms=10))
    assert sorted(os.listdir(tmp_path)) == ["mols.csv"]
    summary = convert_molecules(path, tmp_path / "o", config=MolecularConfig(max_atoms=10, permutations=2), skip_bad_rows=True)
    assert summary.n_rejected == 4 and summary.info.n_rows == 4
    ds = open_dataset(summary.path)
    assert ds.task == "regression" and ds.info.n_features == 55
    np.testing.assert_array_equal(ds.read_all().y, [1.5, 1.5, 4.25, 4.25])
    with open(tmp_path / "o" / "rejects.csv") as f:
        rejects = list(csv.DictReader(f))
    assert [(r["row"], r["smiles"]) for r in rejects] == [("1", "C1CC"), ("2", "c1cccc1"), ("4", ""), ("5", "CN")]
    assert rejects[0]["reason"] == "SMILES parse error" and "kekulize" in rejects[1]["reason"]
    assert rejects[2]["reason"] == "empty SMILES" and "not a number" in rejects[3]["reason"]
    assert ds.info.extra["featurizer"]["max_atoms"] == 10 and ds.info.extra["rdkit_version"]


@pytest.mark.parametrize("header, message", [
    ("smiles,PCE,PCE", "target column 'PCE' appears 2 times"),
    ("smiles,PCE,smiles", "column 'smiles' appears 2 times"),
    ("smiles,pce", "no target column 'PCE'; the columns are ['smiles', 'pce']"),
], ids=["target-twice", "smiles-twice", "no-target"])
def test_a_repeated_or_missing_column_is_refused_naming_it_and_the_file(tmp_path, header, message):
    """Issue: a repeated target (or SMILES) column took the first silently, as only the fast CSV path refused it."""
    pytest.importorskip("rdkit")
    path = tmp_path / "mols.csv"
    path.write_text(f"{header}\nCCO,1.5,2.5\n")
    with pytest.raises(DataFormatError) as err:
        convert_molecules(path, tmp_path / "o", config=MolecularConfig(max_atoms=10))
    assert str(err.value) == f"{path}: {message}"
    assert sorted(os.listdir(tmp_path)) == ["mols.csv"]


def test_truncation_is_counted_not_dropped(tmp_path):
    pytest.importorskip("rdkit")
    path = tmp_path / "m.csv"
    path.write_text("smiles,PCE\nCCCCCC,1\nC,2\n")
    summary = convert_molecules(path, tmp_path / "o", config=MolecularConfig(max_atoms=6))
    assert summary.info.n_rows == 2 and summary.info.extra["truncated_molecules"] == 1
    assert "1 molecules truncated to 6 atoms" in summary.line()


def test_cep_subset_and_parallel_workers_agree(tmp_path):
    pytest.importorskip("rdkit")
    source = shared_data("cep", "cep-processed.csv")
    with open(source) as f:
        head = [next(f) for _ in range(13)]
    path = tmp_path / "cep12.csv"
    path.write_text("".join(head))
    one = convert_molecules(path, tmp_path / "one", chunk_molecules=5)
    two = convert_molecules(path, tmp_path / "two", workers=2, chunk_molecules=5)
    a, b = open_dataset(one.path).read_all(), open_dataset(two.path).read_all()
    assert a.X.tobytes() == b.X.tobytes() and one.n_rejected == 0 and a.X.shape == (12, 2850)
    expected = [float(line.split(",")[1]) for line in head[1:]]
    np.testing.assert_allclose(a.y, expected, rtol=1e-7)
    C = _from_upper(a.X[0].astype(np.float64), 75)
    np.testing.assert_allclose(C, C.T)


def test_missing_rdkit_gives_install_hint(monkeypatch):
    real_import = builtins.__import__

    def no_rdkit(name, *args, **kwargs):
        if name == "rdkit" or name.startswith("rdkit."):
            raise ImportError("No module named 'rdkit'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rdkit)
    with pytest.raises(ImportError, match=r"pip install okl\[molecules\]"):
        import_rdkit()


def test_config_validation():
    with pytest.raises(ValueError, match="representation"):
        MolecularConfig(representation="smiles")
    with pytest.raises(ValueError, match="steps must be finite, increasing"):
        MolecularConfig(steps=(2.0, 1.0))
    with pytest.raises(ValueError, match="coulomb representation only"):
        MolecularConfig(representation="morgan", permutations=2)
    assert MolecularConfig().n_features == 2850 and MolecularConfig(steps=(1, 2)).n_features == 5700


class _Recorder:
    def __init__(self):
        self.calls = []

    def start(self, total, unit, label):
        self.calls.append(("start", total, unit))

    def update(self, done):
        self.calls.append(("update", done))

    def finish(self):
        self.calls.append(("finish",))


def test_progress_counts_molecules_featurized_out_of_the_file(tmp_path):
    """Not bytes read: the read buffer runs ahead of the featurizing, which is the slow part."""
    pytest.importorskip("rdkit")
    path = tmp_path / "m.csv"
    path.write_text("smiles,PCE\n" + "".join(f"{s},{i}.0\n" for i, s in enumerate(["CCO", "O", "bad((", "CC", "N", "CCC", "C=O"])))
    progress = _Recorder()
    convert_molecules(path, tmp_path / "o", config=MolecularConfig(max_atoms=9), chunk_molecules=2, progress=progress)
    assert progress.calls[0] == ("start", 7, "molecules") and progress.calls[-1] == ("finish",)
    assert [c[1] for c in progress.calls[1:-1]] == [2, 4, 6, 7]  # one update per chunk of 2, up to every molecule
