"""Feature and target scaling with statistics from a first pass, recorded in ``dataset.json``.

Methods (per column, statistics over all rows written):

* ``none``      x
* ``minmax01``  (x - min) / (max - min)                      -> [0, 1]
* ``minmax11``  (x - (max + min) / 2) / ((max - min) / 2)    -> [-1, 1]
* ``standard``  (x - mean) / std   (population std, ddof = 0)

Every method is ``(x - offset) * scale``, evaluated in float64 and stored as float32. A
constant column (zero range or zero std) gets ``scale = 1``, so it maps to 0 rather than
dividing by zero. :class:`ColumnStats` accumulates count, min, max, mean and the sum of
squared deviations in float64 batch by batch (Chan et al.'s pairwise update), so the
statistics equal numpy's over the whole column up to float64 rounding. The recorded
``offset`` and ``scale`` let a test set be scaled with the training statistics.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["SCALING_METHODS", "ColumnStats", "Scaling", "ScaledRows"]

SCALING_METHODS = ("none", "minmax01", "minmax11", "standard")


class ColumnStats:
    """Streaming per-column count, min, max, mean and variance of float64 data."""

    def __init__(self, n_columns: int):
        self.n = 0
        self.min = np.full(n_columns, np.inf)
        self.max = np.full(n_columns, -np.inf)
        self.mean = np.zeros(n_columns)
        self.m2 = np.zeros(n_columns)  # sum of squared deviations from the mean

    def grow(self, n_columns: int) -> None:
        """Add columns that were zero in every row so far (sparse inputs widen late)."""
        extra = int(n_columns) - len(self.min)
        if extra <= 0:
            return
        lo, hi = (0.0, 0.0) if self.n else (np.inf, -np.inf)
        self.min = np.concatenate([self.min, np.full(extra, lo)])
        self.max = np.concatenate([self.max, np.full(extra, hi)])
        self.mean = np.concatenate([self.mean, np.zeros(extra)])
        self.m2 = np.concatenate([self.m2, np.zeros(extra)])

    def add(self, X) -> None:
        """Add a batch ``X`` of shape ``(n, n_columns)``."""
        X = np.asarray(X, dtype=np.float64)
        m = X.shape[0]
        if m == 0:
            return
        np.minimum(self.min, X.min(axis=0), out=self.min)
        np.maximum(self.max, X.max(axis=0), out=self.max)
        batch_mean = X.mean(axis=0)
        batch_m2 = ((X - batch_mean) ** 2).sum(axis=0)
        total = self.n + m
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * (m / total)
        self.m2 = self.m2 + batch_m2 + delta * delta * (self.n * m / total)
        self.n = total

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation (ddof = 0)."""
        return np.sqrt(self.m2 / self.n) if self.n else np.zeros_like(self.m2)


@dataclasses.dataclass(frozen=True)
class Scaling:
    """An affine per-column map ``(x - offset) * scale``.

    Attributes
    ----------
    method : str
        One of :data:`SCALING_METHODS`.
    offset, scale : ndarray of float64, shape (n_columns,)
    stats : dict
        The statistics behind offset and scale (``min``, ``max``, ``mean``, ``std``, ``n``),
        recorded for reference.
    """

    method: str
    offset: np.ndarray
    scale: np.ndarray
    stats: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def fit(cls, method: str, stats: ColumnStats | None, flag: str = "--feature_scaling", where: str = "") -> "Scaling":
        """Scaling of ``method`` from first-pass statistics (None only for ``none``).

        ``flag`` and ``where`` (the input file) name the scaling in errors.
        """
        if method not in SCALING_METHODS:
            raise ValueError(f"scaling must be one of {SCALING_METHODS}, got {method!r}")
        if method == "none":
            return cls("none", np.zeros(0), np.zeros(0))
        if stats is None or stats.n == 0:
            raise ValueError(f"{method} scaling needs statistics from at least one row")
        lo, hi, mean, std = stats.min, stats.max, stats.mean, stats.std
        span = hi - lo
        if method == "minmax01":
            offset, scale = lo, _inverse(span)
        elif method == "minmax11":
            offset, scale = lo + span / 2.0, _inverse(span / 2.0)
        else:
            offset, scale = mean, _inverse(std)
        _check_finite(f"{where + ': ' if where else ''}{flag} {method}", scale, std if method == "standard" else span)
        recorded = {"n": int(stats.n), "min": lo.tolist(), "max": hi.tolist(), "mean": mean.tolist(), "std": std.tolist()}
        return cls(method, offset.copy(), scale, recorded)

    def apply(self, X) -> np.ndarray:
        """Scale ``X`` ``(n, n_columns)`` (or ``(n,)`` for one column); float64 result."""
        X = np.asarray(X, dtype=np.float64)
        if self.method == "none":
            return X
        with np.errstate(over="ignore"):  # inf is refused where the result is stored (ScaledRows)
            return (X - self.offset) * self.scale

    def to_json(self) -> dict:
        """Dict for ``dataset.json``."""
        if self.method == "none":
            return {"method": "none"}
        return {"method": self.method, "offset": self.offset.tolist(), "scale": self.scale.tolist(), "stats": self.stats}

    @classmethod
    def from_json(cls, raw: dict, n_columns: int, source: str = "") -> "Scaling":
        """Rebuild a recorded scaling, checking it has ``n_columns`` columns."""
        try:
            method = raw["method"]
            offset = np.asarray(raw.get("offset", []), dtype=np.float64)
            scale = np.asarray(raw.get("scale", []), dtype=np.float64)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{source}: malformed recorded scaling ({err})") from None
        if method not in SCALING_METHODS:
            raise ValueError(f"{source}: unknown recorded scaling method {method!r}")
        if method != "none" and (offset.shape != (n_columns,) or scale.shape != (n_columns,)):
            raise ValueError(f"{source}: recorded scaling has {offset.shape[0]} columns, this data has {n_columns}")
        return cls(method, offset, scale, dict(raw.get("stats", {})))


class ScaledRows:
    """Scale batches on their way to the writer and track the stored target range.

    Parameters
    ----------
    task : str
        Targets are scaled (and their range tracked) for ``regression`` only.
    features, target : Scaling
    where : str
        The input file, named in errors.
    """

    def __init__(self, task: str, features: Scaling, target: Scaling, where: str = ""):
        self.task, self.features, self.target, self.where = task, features, target, where
        self._lo, self._hi = np.inf, -np.inf

    def __call__(self, X, y) -> tuple[np.ndarray, np.ndarray]:
        """``(X float32, y)`` as stored: scaled in float64, then rounded once."""
        X = np.asarray(X)
        X = X.astype(np.float32) if self.features.method == "none" else _stored(self.features.apply(X), "a feature", self.where)
        if self.task == "regression":
            y = _stored(self.target.apply(np.asarray(y, dtype=np.float64)[:, None])[:, 0], "the target", self.where)
            if len(y):
                self._lo, self._hi = min(self._lo, float(y.min())), max(self._hi, float(y.max()))
        return X, y

    @property
    def target_range(self) -> list | None:
        """``[min, max]`` of the stored regression targets (None otherwise or if empty)."""
        return [self._lo, self._hi] if self.task == "regression" and self._lo <= self._hi else None


def _stored(scaled: np.ndarray, what: str, where: str) -> np.ndarray:
    """Scaled float64 values as float32; an error (never inf) for a value beyond float32's range.

    Inputs are finite float32 values, so only a recorded scaling (``like``) far from this
    data's range can get here.
    """
    with np.errstate(over="ignore"):
        stored = scaled.astype(np.float32)
    if not np.isfinite(stored).all():
        value = scaled[~np.isfinite(stored)].flat[0]
        raise ValueError(f"{where}: scaling makes {what} {value:g}, not finite in float32: the data lies far outside the range of the scaling's statistics")
    return stored


def _inverse(span: np.ndarray) -> np.ndarray:
    span = np.asarray(span, dtype=np.float64)
    safe = np.where(span > 0, span, 1.0)
    with np.errstate(over="ignore"):  # a subnormal span: refused by _check_finite, not warned about
        return 1.0 / safe


def _check_finite(what: str, scale: np.ndarray, spread: np.ndarray) -> None:
    """Refuse a scaling whose factor overflows (a spread so small that 1 / spread is inf)."""
    bad = np.flatnonzero(~np.isfinite(scale))
    if len(bad):
        j = int(bad[0])
        raise ValueError(f"{what}: the scale of column {j} (0-based) is not finite: its spread {spread[j]:g} is too small to divide by")
