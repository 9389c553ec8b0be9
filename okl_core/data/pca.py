"""PCA of a data set's features: fitted on a sample of a training set, applied to any set.

spec/dsg.md reduces MNIST-8M 8 vs 6 to 50 principal components before training. A
:class:`Pca` is fitted on a random sample of the training rows (``sample_rows`` of them,
chosen by ``seed``; all rows when there are fewer) in float64: the centred sample's
covariance ``S^T S / n`` and its eigenvectors (``numpy.linalg.eigh``), the ``k`` largest
first. Each component's sign is fixed so that its largest-magnitude entry is positive (the
eigensolver's sign is arbitrary). ``apply`` maps ``x`` to ``(x - mean) @ components.T``.
Both run on one BLAS thread (:func:`okl_core.numerics.pinned`): the model and the projected
rows are the same bytes whatever the machine's thread count.

:func:`project_dataset` writes the projected data set; its directory holds the model as
plain arrays in ``pca.npz`` (``mean`` ``(d,)``, ``components`` ``(k, d)``, float64; read
with ``allow_pickle=False``) and ``dataset.json`` records it under ``extra["pca"]`` (file,
sizes, sample, explained variance). A test set is projected with the training set's model
(``like``), so both live in the same coordinates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time

import numpy as np

from okl_core.data.layout import DatasetWriter, open_dataset
from okl_core.data.sources import ConversionSummary
from okl_core.numerics import pinned

__all__ = ["PCA_FILE", "Pca", "project_dataset", "recorded_pca"]

PCA_FILE = "pca.npz"


@dataclasses.dataclass(frozen=True)
class Pca:
    """A linear map to principal components.

    Attributes
    ----------
    mean : ndarray of float64, shape (d,)
    components : ndarray of float64, shape (k, d)
        Orthonormal rows, largest variance first.
    explained_variance : ndarray of float64, shape (k,)
        Variance of the sample along each component.
    total_variance : float
        Sum of the sample's per-feature variances (the denominator of the ratios).
    n_samples : int
        Rows the model was fitted on.
    """

    mean: np.ndarray
    components: np.ndarray
    explained_variance: np.ndarray
    total_variance: float
    n_samples: int

    @classmethod
    @pinned
    def fit(cls, X, n_components: int) -> "Pca":
        """Principal components of the rows of ``X`` ``(n, d)``."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or len(X) < 2:
            raise ValueError(f"PCA needs at least 2 rows of a 2-d array, got shape {X.shape}")
        if not 1 <= int(n_components) <= X.shape[1]:
            raise ValueError(f"n_components must be in [1, {X.shape[1]}], got {n_components}")
        mean = X.mean(axis=0)
        centred = X - mean
        covariance = centred.T @ centred / len(X)
        values, vectors = np.linalg.eigh(covariance)
        order = np.argsort(values)[::-1][: int(n_components)]
        components = vectors[:, order].T.copy()
        signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
        components *= np.where(signs == 0, 1.0, signs)[:, None]
        return cls(mean, components, np.maximum(values[order], 0.0), float(np.trace(covariance)), len(X))

    @property
    def n_inputs(self) -> int:
        return int(self.mean.shape[0])

    @property
    def n_components(self) -> int:
        return int(self.components.shape[0])

    @pinned
    def apply(self, X) -> np.ndarray:
        """Project ``X`` ``(n, d)``: float32 ``(n, k)`` computed in float64."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_inputs:
            raise ValueError(f"PCA expects rows of {self.n_inputs} features, got shape {X.shape}")
        return ((X - self.mean) @ self.components.T).astype(np.float32)

    def save(self, path: str) -> str:
        """Write ``mean`` and ``components`` to ``path`` (``.npz`` of plain arrays); its sha256."""
        with open(path, "wb") as f:
            np.savez(f, mean=self.mean, components=self.components, explained_variance=self.explained_variance)
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def record(self, sha256: str, sample: dict) -> dict:
        """The ``extra["pca"]`` entry of ``dataset.json``."""
        ratio = self.explained_variance / self.total_variance if self.total_variance > 0 else np.zeros(self.n_components)
        return {"file": PCA_FILE, "sha256": sha256, "n_inputs": self.n_inputs, "n_components": self.n_components,
                "n_samples": self.n_samples, "total_variance": self.total_variance,
                "explained_variance_ratio": ratio.tolist(), "explained_variance_ratio_sum": float(ratio.sum()), **sample}

    @classmethod
    def load(cls, directory: str) -> "Pca":
        """The model recorded in data set ``directory`` (``pca.npz`` and ``dataset.json``)."""
        record = recorded_pca(directory)
        path = os.path.join(directory, record["file"])
        try:
            with open(path, "rb") as f:
                raw = f.read()
            if hashlib.sha256(raw).hexdigest() != record["sha256"]:
                raise ValueError("its sha256 differs from the one recorded in dataset.json")
            with np.load(path, allow_pickle=False) as arrays:
                mean, components, variance = arrays["mean"], arrays["components"], arrays["explained_variance"]
        except (OSError, KeyError, ValueError) as err:
            raise ValueError(f"{path}: cannot read the PCA model ({err})") from None
        if components.shape != (record["n_components"], record["n_inputs"]) or mean.shape != (record["n_inputs"],):
            raise ValueError(f"{path}: arrays do not match the shapes recorded in dataset.json")
        return cls(mean, components, variance, float(record["total_variance"]), int(record["n_samples"]))


def recorded_pca(directory: str) -> dict:
    """``extra["pca"]`` of the data set at ``directory``; a clear error if it has none."""
    info = open_dataset(directory).info
    record = info.extra.get("pca")
    if not isinstance(record, dict):
        raise ValueError(f"{directory}: not a PCA-projected data set (dataset.json has no extra.pca); prepare it with `prepare pca`")
    return record


def _sample(dataset, sample_rows: int, seed: int) -> np.ndarray:
    """``sample_rows`` rows drawn without replacement by ``seed`` (all rows if fewer), in row order."""
    n = dataset.info.n_rows
    if n <= sample_rows:
        chosen = np.arange(n)
    else:
        chosen = np.sort(np.random.default_rng(seed).choice(n, size=sample_rows, replace=False))
    parts = []
    for batch in dataset.iter_batches():
        if len(batch):  # rows are consecutive within a batch
            lo, hi = np.searchsorted(chosen, [batch.row[0], batch.row[-1] + 1])
            parts.append(batch.X[chosen[lo:hi] - batch.row[0]])
    return np.concatenate(parts) if parts else np.zeros((0, dataset.info.n_features), np.float32)


def project_dataset(source: str, out: str, n_components: int | None = None, *, like: str | None = None, sample_rows: int = 100_000,
                    seed: int = 0, rows_per_shard: int = 65536, progress=None, **writer) -> ConversionSummary:
    """Write data set ``source`` projected onto principal components to ``out``.

    The model is fitted on a sample of ``source`` (``n_components``, ``sample_rows``, ``seed``),
    or read from the projected training set ``like``. Labels, classes, target range and the
    source's other records carry over (``feature_names`` become ``pc1..pcK``); ``extra["pca"]``
    records the model.
    """
    started = time.perf_counter()
    data = open_dataset(source)
    info = data.info
    if like is not None:
        if n_components is not None:
            raise ValueError("give either --components (fit) or --like (reuse a fitted PCA), not both")
        pca, sample = Pca.load(like), {"fitted_on": recorded_pca(like).get("fitted_on"), "like": os.path.abspath(like)}
        if pca.n_inputs != info.n_features:
            raise ValueError(f"{source}: has {info.n_features} features, the PCA of {like} expects {pca.n_inputs}")
        trained = open_dataset(like).info
        if (trained.task, trained.classes) != (info.task, info.classes):
            raise ValueError(f"{source}: task/classes {info.task} {info.classes} differ from {like}'s {trained.task} {trained.classes}")
    else:
        if n_components is None:
            raise ValueError("give --components K (fit on this data set) or --like DATASET (reuse its PCA)")
        if sample_rows < 2:
            raise ValueError("--sample_rows must be >= 2")
        pca = Pca.fit(_sample(data, sample_rows, seed), n_components)
        sample = {"fitted_on": os.path.abspath(source), "sample_rows": int(sample_rows), "seed": int(seed)}
    if progress is not None:
        progress.start(info.n_rows, "rows", "pca")
    extra = {k: v for k, v in info.extra.items() if k != "pca"}
    if "feature_names" in extra:  # the input's names would not match the components
        extra["feature_names"] = [f"pc{k + 1}" for k in range(pca.n_components)]
    with DatasetWriter(out, pca.n_components, info.task, rows_per_shard=rows_per_shard, name=writer.pop("name", None) or os.path.basename(os.path.abspath(out)),
                       classes=info.classes, target_range=info.target_range, feature_scaling=info.feature_scaling,
                       source=f"pca:{os.path.abspath(source)}", generator_seed=info.generator_seed, **writer) as w:
        sha = pca.save(os.path.join(w.staging_dir, PCA_FILE))
        w.set_info(extra={**extra, "pca": pca.record(sha, sample), "pca_input": info.source})
        for batch in data.iter_batches():
            w.write(pca.apply(batch.X), batch.y)
            if progress is not None:
                progress.update(w.n_rows)
    if progress is not None:
        progress.finish()
    return ConversionSummary(w.info, w.path, seconds=time.perf_counter() - started)
