"""Molecules (SMILES) -> MolecularSpace-style features (spec/dsg.md; Montavon et al. 2012).

The DSG paper's MolecularSpace set represents each molecule of the Clean Energy Project by
a randomly sorted Coulomb matrix:

* a 3D geometry with explicit hydrogens (RDKit ETKDG embedding, seeded; if it fails, one
  retry from random coordinates), positions in Bohr (``units='bohr'``, atomic units as in
  Rupp et al. 2012) or Angstrom;
* ``C_ii = 0.5 Z_i^2.4`` and ``C_ij = Z_i Z_j / |R_i - R_j|``;
* rows and columns ordered by decreasing ``||C_i|| + noise``, ``noise ~ N(0, sort_noise^2)``
  per atom (Montavon's random sorting; ``sort_noise=0`` gives the plain sorted matrix);
* a fixed atom budget ``max_atoms`` (75: 75*76/2 = 2850 features, the paper's d): smaller
  molecules are padded with zeros, larger ones keep their ``max_atoms`` first atoms in the
  sorted order (counted as truncated, never dropped);
* the upper triangle, row by row (``C_00, C_01, ..., C_0n, C_11, ...``);
* optionally each entry binarized into step predicates ``1[x > t_k]`` for the thresholds
  ``steps`` (a thermometer code, so the squared distance between two codes counts the
  thresholds between their values); features become ``2850 * len(steps)``, entry-major.

``permutations > 1`` writes that many randomly sorted matrices per molecule (consecutive
rows), the data augmentation the paper used (40 per training molecule). The alternative
representation ``morgan`` is an RDKit Morgan fingerprint bit vector (no 3D embedding).

Randomness of molecule ``row`` (0-based record index in the input) comes from
``block_bit_generator(seed, row)``: word 0 (lowest 31 bits) seeds RDKit's embedding, then
``standard_normal`` gives the sorting noise, ``n_atoms`` values per permutation. Equal
inputs, seed and RDKit version give equal bytes; RDKit releases may change geometries
(the version is recorded in ``dataset.json``).

RDKit is optional (``pip install okl[molecules]``) and imported only when molecules are
featurized. Molecules that fail to parse, sanitize or embed go to ``rejects.csv`` with the
reason; a missing or non-numeric target is a bad row (an error, or a reject with
``skip_bad_rows``).
"""

from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import io
import math
import multiprocessing
import os
import time
from typing import Any

import numpy as np

from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetWriter
from okl_core.data.sources import ConversionSummary, DataFormatError, NullProgress, RejectLog, no_rows, not_utf8, open_source, parse_finite
from okl_core.data.table import column_index
from okl_core.random import block_bit_generator, standard_normal

__all__ = [
    "MolecularConfig",
    "MoleculeError",
    "REPRESENTATIONS",
    "BOHR_PER_ANGSTROM",
    "coulomb_matrix",
    "random_sorted",
    "upper_triangle",
    "step_predicates",
    "import_rdkit",
    "embed_molecule",
    "featurize_molecule",
    "convert_molecules",
]

REPRESENTATIONS = ("coulomb", "morgan")
BOHR_PER_ANGSTROM = 1.0 / 0.529177210903
RDKIT_HINT = "RDKit is needed for molecules: pip install okl[molecules]  (or: pip install rdkit)"


class MoleculeError(ValueError):
    """A molecule that cannot be featurized; the message is the reason for rejects.csv."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MolecularConfig:
    """How molecules become feature rows (see the module docstring).

    Attributes
    ----------
    representation : {'coulomb', 'morgan'}
    max_atoms : int
        Atom budget of the Coulomb matrix (hydrogens included).
    sort_noise : float
        Standard deviation of the noise added to row norms before sorting.
    permutations : int
        Randomly sorted matrices (rows) per molecule.
    units : {'bohr', 'angstrom'}
        Length unit of the distances.
    steps : tuple of float
        Step-predicate thresholds (empty: raw Coulomb values).
    morgan_radius, morgan_bits : int
        Morgan fingerprint radius and length.
    seed : int
        Seed of the embedding and the sorting noise.
    """

    representation: str = "coulomb"
    max_atoms: int = 75
    sort_noise: float = 1.0
    permutations: int = 1
    units: str = "bohr"
    steps: tuple = ()
    morgan_radius: int = 2
    morgan_bits: int = 2048
    seed: int = 0

    def __post_init__(self):
        if self.representation not in REPRESENTATIONS:
            raise ValueError(f"representation must be one of {REPRESENTATIONS}, got {self.representation!r}")
        for name in ("max_atoms", "permutations", "morgan_bits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.morgan_radius, bool) or not isinstance(self.morgan_radius, int) or self.morgan_radius < 0:
            raise ValueError(f"morgan_radius must be an integer >= 0, got {self.morgan_radius!r}")
        if not (isinstance(self.sort_noise, (int, float)) and math.isfinite(self.sort_noise) and self.sort_noise >= 0):
            raise ValueError(f"sort_noise must be a finite number >= 0, got {self.sort_noise!r}")
        if self.units not in ("bohr", "angstrom"):
            raise ValueError(f"units must be 'bohr' or 'angstrom', got {self.units!r}")
        steps = tuple(float(s) for s in self.steps)
        if any(not math.isfinite(s) for s in steps) or list(steps) != sorted(set(steps)):
            raise ValueError(f"steps must be finite, increasing and distinct, got {list(self.steps)}")
        object.__setattr__(self, "steps", steps)
        if self.representation == "morgan" and (steps or self.permutations != 1):
            raise ValueError("steps and permutations apply to the coulomb representation only")
        block_bit_generator(self.seed, 0)  # validates the seed

    @property
    def n_features(self) -> int:
        if self.representation == "morgan":
            return self.morgan_bits
        entries = self.max_atoms * (self.max_atoms + 1) // 2
        return entries * max(1, len(self.steps))

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["steps"] = list(self.steps)
        return out


def coulomb_matrix(Z, R) -> np.ndarray:
    """Coulomb matrix of atoms with charges ``Z`` ``(n,)`` at positions ``R`` ``(n, 3)``.

    ``C_ii = 0.5 Z_i^2.4``, ``C_ij = Z_i Z_j / |R_i - R_j|`` (float64, symmetric).
    Coincident atoms raise :class:`MoleculeError`.
    """
    Z = np.asarray(Z, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    if Z.ndim != 1 or R.shape != (len(Z), 3):
        raise ValueError(f"expected Z (n,) and R (n, 3), got {Z.shape} and {R.shape}")
    diff = R[:, None, :] - R[None, :, :]
    dist = np.sqrt((diff * diff).sum(axis=-1))
    off = ~np.eye(len(Z), dtype=bool)
    if np.any(dist[off] <= 1e-8):
        raise MoleculeError("two atoms at the same position")
    C = np.empty((len(Z), len(Z)))
    np.divide(np.outer(Z, Z), dist, out=C, where=off)
    np.fill_diagonal(C, 0.5 * Z**2.4)
    return C


def random_sorted(C: np.ndarray, noise) -> np.ndarray:
    """Rows and columns of ``C`` ordered by decreasing ``||C_i|| + noise_i`` (stable)."""
    keys = np.linalg.norm(C, axis=1) + np.asarray(noise, dtype=np.float64)
    order = np.argsort(-keys, kind="stable")
    return C[np.ix_(order, order)]


def upper_triangle(C: np.ndarray, max_atoms: int) -> np.ndarray:
    """Upper triangle (diagonal included, row-major) of ``C`` padded/truncated to ``max_atoms``."""
    n = min(len(C), max_atoms)
    padded = np.zeros((max_atoms, max_atoms))
    padded[:n, :n] = C[:n, :n]
    return padded[np.triu_indices(max_atoms)]


def step_predicates(values: np.ndarray, steps) -> np.ndarray:
    """Thermometer code: ``values (..., d)`` -> ``(..., d * K)`` with ``1[x > t_k]``, entry-major."""
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    return (values[..., None] > steps).reshape(*values.shape[:-1], -1).astype(np.float32)


def import_rdkit():
    """Import RDKit (quietly) or raise ImportError with the install hint."""
    try:
        from rdkit import Chem, RDLogger, rdBase  # noqa: F401
        from rdkit.Chem import AllChem, rdFingerprintGenerator  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{RDKIT_HINT} ({err})") from None
    rdBase.DisableLog("rdApp.*")  # the function RDLogger.DisableLog re-exports
    return Chem, AllChem, rdFingerprintGenerator, rdBase


def _parse_smiles(smiles: str):
    Chem = import_rdkit()[0]
    if not smiles:
        raise MoleculeError("empty SMILES")
    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None:
        raise MoleculeError("SMILES parse error")
    try:
        Chem.SanitizeMol(mol)
    except Exception as err:  # RDKit raises several of its own exception types
        raise MoleculeError(f"sanitization failed: {str(err).strip() or type(err).__name__}") from None
    return mol


def embed_molecule(smiles: str, embed_seed: int, units: str = "bohr") -> tuple[np.ndarray, np.ndarray]:
    """Charges ``Z`` and 3D positions ``R`` (hydrogens added) of a SMILES string.

    Raises :class:`MoleculeError` when it does not parse or cannot be embedded.
    """
    Chem, AllChem, _, _ = import_rdkit()
    mol = Chem.AddHs(_parse_smiles(smiles))
    params = AllChem.ETKDGv3()
    params.randomSeed = int(embed_seed)
    params.numThreads = 1
    status = AllChem.EmbedMolecule(mol, params)
    if status != 0:
        params.useRandomCoords = True
        status = AllChem.EmbedMolecule(mol, params)
    if status != 0:
        raise MoleculeError("3D embedding failed")
    Z = np.array([atom.GetAtomicNum() for atom in mol.GetAtoms()], dtype=np.float64)
    R = np.asarray(mol.GetConformer().GetPositions(), dtype=np.float64)
    if units == "bohr":
        R = R * BOHR_PER_ANGSTROM
    return Z, R


def featurize_molecule(row: int, smiles: str, config: MolecularConfig) -> tuple[np.ndarray, bool]:
    """Feature rows ``(permutations, n_features)`` float32 of molecule ``row``, and
    whether its atoms exceeded the budget (truncated). Raises :class:`MoleculeError`."""
    if config.representation == "morgan":
        return _morgan(smiles, config), False
    bitgen = block_bit_generator(config.seed, row)
    embed_seed = int(bitgen.random_raw(1)[0] & np.uint64(0x7FFFFFFF))
    Z, R = embed_molecule(smiles, embed_seed, config.units)
    C = coulomb_matrix(Z, R)
    noise = standard_normal(bitgen, config.permutations * len(Z)).reshape(config.permutations, len(Z)) * config.sort_noise
    rows = np.stack([upper_triangle(random_sorted(C, noise[p]), config.max_atoms) for p in range(config.permutations)])
    if config.steps:
        return step_predicates(rows, config.steps), len(Z) > config.max_atoms
    return rows.astype(np.float32), len(Z) > config.max_atoms


def _morgan(smiles: str, config: MolecularConfig) -> np.ndarray:
    _, _, rdFingerprintGenerator, _ = import_rdkit()
    mol = _parse_smiles(smiles)
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=config.morgan_radius, fpSize=config.morgan_bits)
    return generator.GetFingerprintAsNumPy(mol).astype(np.float32)[None, :]


def _featurize_chunk(args):
    """Worker: featurize ``[(row, line, smiles, target, problem), ...]``; results in order."""
    chunk, config = args
    out: list[tuple] = []
    for row, line, smiles, target, problem in chunk:
        if problem is not None:  # a bad target: passed through to keep rejects in row order
            out.append((row, line, smiles, target, None, False, problem))
            continue
        try:
            features, truncated = featurize_molecule(row, smiles, config)
            out.append((row, line, smiles, target, features, truncated, None))
        except MoleculeError as err:
            out.append((row, line, smiles, target, None, False, str(err)))
    return out


def _count_lines(path) -> int:
    """Lines after the header (a quick pass, decompressing if need be): the molecules to expect."""
    with open_source(path) as f:
        lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    return max(lines - 1, 1)


def _records(path, smiles_column, target):
    """Yield ``(row, line, smiles, target_value | None, problem | None)`` from the CSV."""
    with io.TextIOWrapper(open_source(path), encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DataFormatError(f"{path}: empty file (expected a header row)") from None
        except UnicodeDecodeError as err:
            raise not_utf8(path, err) from None
        s_at, t_at = column_index(header, smiles_column, path), column_index(header, target, path, "target column")
        row = 0
        try:
            for fields in reader:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                problem, value = None, None
                if len(fields) != len(header):
                    problem = f"expected {len(header)} fields, found {len(fields)}"
                else:
                    value, problem = parse_finite(fields[t_at].strip(), f"target {target!r}")
                smiles = fields[s_at].strip() if len(fields) > s_at else ""
                yield row, reader.line_num, smiles, value, problem
                row += 1
        except UnicodeDecodeError as err:
            raise not_utf8(path, err) from None
        except csv.Error as err:
            raise DataFormatError(f"{path}, line {reader.line_num + 1}: unreadable CSV ({err})") from None


def _in_range(records, start: int, stop: int | None):
    """The records with ``start <= row < stop`` (stops reading at ``stop``)."""
    for record in records:
        if stop is not None and record[0] >= stop:
            return
        if record[0] >= start:
            yield record


def _chunks(records, size, path, skip_bad_rows):
    chunk = []
    for row, line, smiles, value, problem in records:
        if problem is not None and not skip_bad_rows:
            raise DataFormatError(f"{path}, line {line}: {problem}")
        chunk.append((row, line, smiles, value, problem))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _ordered_map(fn, items, workers: int, window: int):
    """``map(fn, items)`` in order, in ``workers`` processes with at most ``window`` in flight."""
    if workers <= 1:
        for item in items:
            yield fn(item)
        return
    # Not fork: the parent may hold threads (pyarrow's pools), which fork can deadlock.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
        pending = []
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()


def convert_molecules(
    path, out, *, smiles_column="smiles", target="PCE", config: MolecularConfig | None = None, skip_bad_rows=False,
    workers=1, chunk_molecules=32, rows_per_shard=65536, row_group_rows=4096, overwrite=False, name=None, progress=None, compression=DEFAULT_COMPRESSION,
    records: tuple[int, int | None] | None = None,
) -> ConversionSummary:
    """Featurize a CSV of SMILES and a numeric target into a regression data set.

    Molecules RDKit cannot parse or embed are written to ``rejects.csv`` (``row, line,
    smiles, reason``) and counted; rows with a bad target stop the conversion unless
    ``skip_bad_rows``. ``workers`` > 1 featurizes in that many processes (the output does
    not depend on it). ``records=(start, stop)`` featurizes only the CSV records (0-based,
    after the header) in ``[start, stop)`` -- a train/test split of one file; a molecule's
    randomness stays keyed by its record index, so a record gives the same row in any range.
    """
    started = time.perf_counter()
    path = os.fspath(path)
    config = config or MolecularConfig()
    progress = progress or NullProgress()
    rdkit_version = import_rdkit()[3].rdkitVersion
    info: dict[str, Any] = {
        "source": f"molecules:{os.path.abspath(path)}",
        "generator_seed": config.seed,
        "extra": {"featurizer": config.to_dict(), "rdkit_version": rdkit_version, "smiles_column": smiles_column, "target": target,
                  **({"records": [int(records[0]), records[1]]} if records is not None else {})},
    }
    if name:
        info["name"] = name
    truncated = 0
    t_lo, t_hi = math.inf, -math.inf
    # Progress in molecules featurized, out of the file's lines: featurizing is the slow part and
    # takes about as long per molecule, while the bytes read run ahead of it (a 1 MiB read buffer
    # is half of the 2 MB CEP file: a bar in bytes jumped to 50% at once, ETA 0:07 for 39 s).
    start, stop = records if records is not None else (0, None)
    if start < 0 or (stop is not None and stop <= start):
        raise ValueError(f"records must be a non-empty range START:STOP with 0 <= START, got {start}:{stop}")
    total = _count_lines(path)
    progress.start(max(0, min(total, stop if stop is not None else total) - start), "molecules", "molecules")
    featurized = 0
    with DatasetWriter(out, config.n_features, "regression", rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite, compression=compression, **info) as writer:
        rejects = RejectLog(writer.staging_dir, ("row", "line", "smiles", "reason"))
        chunks = ((chunk, config) for chunk in _chunks(_in_range(_records(path, smiles_column, target), start, stop), chunk_molecules, path, skip_bad_rows))
        for results in _ordered_map(_featurize_chunk, chunks, int(workers), window=4 * max(1, int(workers))):
            X_parts, y_parts = [], []
            for row, line, smiles, value, features, was_truncated, reason in results:
                if reason is not None:
                    rejects.add(row=row, line=line, smiles=smiles, reason=reason)
                    continue
                truncated += was_truncated
                X_parts.append(features)
                y_parts.append(np.full(len(features), value))
            if X_parts:
                y = np.concatenate(y_parts).astype(np.float32)
                writer.write(np.concatenate(X_parts), y)
                t_lo, t_hi = min(t_lo, float(y.min())), max(t_hi, float(y.max()))
            featurized += len(results)
            progress.update(featurized)
        rejected = rejects.close()
        if not writer.n_rows:
            if not featurized and records is not None:
                raise DataFormatError(f"no data rows in {path}: --records {start}:{'' if stop is None else stop} selects none of its records")
            raise no_rows(path, rejects.count, rejects.first)
        extra = dict(info["extra"], truncated_molecules=truncated, **({"rejects": rejected} if rejected else {}))
        writer.set_info(extra=extra, target_range=[t_lo, t_hi] if writer.n_rows else None)
    progress.finish()
    notes = [f"{truncated:,} molecules truncated to {config.max_atoms} atoms"] if truncated else []
    return ConversionSummary(writer.info, writer.path, n_rejected=rejected["count"] if rejected else 0, seconds=time.perf_counter() - started, notes=notes)
