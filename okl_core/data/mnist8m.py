"""The infinite-MNIST generator behind MNIST-8M (spec/dsg.md; Loosli, Canu, Bottou 2007).

Row ``i`` of a generated data set is base digit ``i mod n_base`` under a random elastic
deformation plus small affine transforms and a stroke-thickness change; its label is the
base digit's label. Everything random about row ``i`` comes from the counter-based
generator ``okl_core.random.block_bit_generator(seed, i)`` -- key ``(seed, i)`` with ``i``
the global row index -- so any row, and any shard, is regenerated independently and
identically: a row never depends on the batch, shard or worker that produced it.

Per row, the raw 64-bit words of that generator are used as follows (uniforms from the
top 53 bits, :func:`okl_core.random.uniform_open`, or from 32-bit halves for the field):

====================  =====================================================================
word 0                rotation angle, uniform in ``[-rotation_deg, rotation_deg]``
word 1                scale factor, uniform in ``[1 - scale, 1 + scale]``
words 2, 3            translation (rows, columns), uniform in ``[-translation, translation]``
word 4                thickness ``t``, uniform in ``[-thickness, thickness]``
words 5 .. 5 + h w    the elastic noise: word ``k`` gives two 32-bit uniforms (low half
                      first), ``2 h w`` values in (-1, 1) = the row and column noise fields
====================  =====================================================================

The deformation (the elastic field of Simard, Steinkraus and Platt 2003):

1. thickness: ``img = base + t (dilated - base)`` for ``t > 0`` (thicker strokes) and
   ``img = base + |t| (eroded - base)`` for ``t < 0``, where dilated/eroded are 3x3 grey
   dilation/erosion of the base digit (precomputed once per base digit);
2. elastic field: each noise field is smoothed by a Gaussian of ``elastic_sigma`` pixels
   (``scipy.ndimage.gaussian_filter1d`` along both axes, reflecting borders) and
   multiplied by ``elastic_alpha``, giving a displacement ``delta(p)`` per output pixel;
3. output pixel ``p`` samples the thickened image at
   ``c + R(-angle) (p - c - translation) / scale + delta(p)`` (``c`` the image centre), by
   bilinear interpolation (``scipy.ndimage.map_coordinates``, order 1, zeros outside).

Rows are computed a batch at a time (numpy/scipy vectorised over the batch); the batch
axis is an exact integer coordinate of the interpolation, so batching does not change a
row's bytes. Pixels are float32 in [0, 1].

The default magnitudes are milder than Simard's (alpha 34) so that the rows stay close to
their base digit in pixel space: a 1-nearest-neighbour classifier fit on 8,000 undeformed
MNIST digits labels about 95% of their deformations correctly (the test requires 90%);
with alpha 34 alone it is about 72%. ``originals=True`` makes rows ``0..n_base-1``
the undeformed base digits (infimnist, from which the LIBSVM mnist8m file was cut, also
starts with the undeformed digits).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterator

import numpy as np
from scipy import ndimage

from okl_core.data.idx import read_idx_images
from okl_core.random import block_bit_generator, uniform_open

__all__ = ["DeformationConfig", "Mnist8mGenerator", "N_AFFINE_WORDS", "GENERATOR_NAME", "class_task", "load_base"]

GENERATOR_NAME = "okl-mnist8m-v1"
"""Recorded in ``dataset.json``; changes whenever the per-row bytes would change."""

N_AFFINE_WORDS = 5
_TWO_POW_M32 = 2.0**-32
_SUB_BATCH = 256


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeformationConfig:
    """Magnitudes of the random transforms (see the module docstring).

    Attributes
    ----------
    elastic_alpha : float
        Scale of the smoothed noise field, pixels (Simard et al. used 34; mean
        absolute displacement about 0.5 pixel at the default 12).
    elastic_sigma : float
        Gaussian smoothing of the noise field, pixels (Simard et al.: 4).
    rotation_deg : float
        Largest rotation, degrees.
    scale : float
        Largest relative scale change.
    translation : float
        Largest shift along each axis, pixels.
    thickness : float
        Largest blend toward the dilated (thicker) or eroded (thinner) digit, in [0, 1].
    originals : bool
        Rows ``0..n_base-1`` are the undeformed base digits.
    """

    elastic_alpha: float = 12.0
    elastic_sigma: float = 4.0
    rotation_deg: float = 5.0
    scale: float = 0.05
    translation: float = 0.75
    thickness: float = 0.4
    originals: bool = False

    def __post_init__(self):
        for name in ("elastic_alpha", "rotation_deg", "scale", "translation", "thickness"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (isinstance(self.elastic_sigma, (int, float)) and math.isfinite(self.elastic_sigma) and self.elastic_sigma > 0):
            raise ValueError(f"elastic_sigma must be a finite number > 0, got {self.elastic_sigma!r}")
        if self.scale >= 1:
            raise ValueError(f"scale must be < 1 (scale factors in [1 - scale, 1 + scale]), got {self.scale}")
        if self.thickness > 1:
            raise ValueError(f"thickness must be in [0, 1], got {self.thickness}")
        if not isinstance(self.originals, bool):
            raise ValueError(f"originals must be a bool, got {self.originals!r}")

    def to_dict(self) -> dict:
        """JSON-ready fields (recorded in ``dataset.json``)."""
        return dataclasses.asdict(self)


def load_base(images: str, labels: str, start: int = 0, stop: int | None = None,
              classes: list | tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Base digits ``[start, stop)`` of an IDX pair: float32 ``(n, h, w)`` in [0, 1], labels.

    E.g. ``start=0, stop=8000`` on the MNIST test files (the rest held out). ``classes``
    keeps only the digits of those labels, in file order, and relabels them: two classes
    ``[negative, positive]`` become -1/+1 (okl's binary labels, e.g. ``[6, 8]`` for
    MNIST-8M 8 vs 6), more become their index in ``classes``.
    """
    raw, y = read_idx_images(images, labels)
    stop = len(raw) if stop is None else int(stop)
    if not 0 <= int(start) < stop <= len(raw):
        raise ValueError(f"base rows [{start}, {stop}) are not a non-empty range of the {len(raw)} images in {images}")
    chosen, y = raw[int(start) : stop], y[int(start) : stop]
    if classes is not None:
        chosen, y = _select_classes(chosen, y, [int(c) for c in classes], f"{labels} rows [{start}, {stop})")
    return chosen.astype(np.float32) / np.float32(255.0), y


def class_task(classes: list | tuple | None) -> str:
    """The task of base digits filtered to ``classes`` (None: all ten, multiclass)."""
    return "binary" if classes is not None and len(classes) == 2 else "multiclass"


def _select_classes(images: np.ndarray, labels: np.ndarray, classes: list, where: str) -> tuple[np.ndarray, np.ndarray]:
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise ValueError(f"classes must be at least two distinct labels, got {classes}")
    keep = np.isin(labels, classes)
    missing = sorted(set(classes) - set(labels[keep].tolist()))
    if missing:
        raise ValueError(f"{where}: no digit with label {missing[0]} (classes {classes})")
    index = {c: k for k, c in enumerate(classes)}
    codes = np.array([index[int(v)] for v in labels[keep]], dtype=np.int64)
    if len(classes) == 2:
        codes = 2 * codes - 1  # [negative, positive] -> -1/+1
    return images[keep], codes


class Mnist8mGenerator:
    """Deformed digits from a base set: row ``i`` is a pure function of ``(seed, i)``.

    Parameters
    ----------
    images : ndarray, shape (n_base, h, w)
        Base digits, float in [0, 1] (uint8 is divided by 255).
    labels : ndarray of int, shape (n_base,)
    seed : int
        Generator seed, ``0 <= seed < 2**64``.
    config : DeformationConfig, optional
    """

    def __init__(self, images, labels, seed: int, config: DeformationConfig | None = None):
        images = np.asarray(images)
        if images.dtype == np.uint8:
            images = images.astype(np.float32) / np.float32(255.0)
        if images.ndim != 3 or len(images) == 0:
            raise ValueError(f"images must be a non-empty (n, h, w) array, got shape {images.shape}")
        labels = np.asarray(labels)
        if labels.shape != (len(images),):
            raise ValueError(f"labels must have shape ({len(images)},), got {labels.shape}")
        self.base = np.ascontiguousarray(images, dtype=np.float32)
        self.labels = labels.astype(np.int64)
        self.seed = int(seed)
        block_bit_generator(self.seed, 0)  # validates the seed range
        self.config = config or DeformationConfig()
        self.shape = self.base.shape[1:]
        footprint = (1, 3, 3)
        self.dilated = ndimage.grey_dilation(self.base, size=footprint)
        self.eroded = ndimage.grey_erosion(self.base, size=footprint)
        h, w = self.shape
        self._grid = np.mgrid[0:h, 0:w].astype(np.float64)
        self._centre = np.array([(h - 1) / 2.0, (w - 1) / 2.0])
        sigma = self.config.elastic_sigma
        self._smooth_h = ndimage.gaussian_filter1d(np.eye(h), sigma, axis=0, mode="reflect")
        self._smooth_w_t = ndimage.gaussian_filter1d(np.eye(w), sigma, axis=0, mode="reflect").T

    @property
    def n_base(self) -> int:
        return len(self.base)

    @property
    def n_features(self) -> int:
        return int(self.shape[0] * self.shape[1])

    @property
    def n_words(self) -> int:
        """Raw words drawn per row."""
        return N_AFFINE_WORDS + self.shape[0] * self.shape[1]

    def row_words(self, rows) -> np.ndarray:
        """Raw words ``(len(rows), n_words)`` of the rows' generators, keys ``(seed, row)``.

        Equal to ``block_bit_generator(seed, row).random_raw(n_words)`` for each row; one
        Philox object is re-keyed per row (setting its state is ~8x cheaper than building
        a new one).
        """
        rows = [int(r) for r in rows]
        out = np.empty((len(rows), self.n_words), dtype=np.uint64)
        if not rows:
            return out
        bitgen = block_bit_generator(self.seed, rows[0])
        state = bitgen.state
        for j, row in enumerate(rows):
            if not 0 <= row < 2**64:
                raise ValueError(f"row must be in [0, 2**64), got {row}")
            state["state"]["key"] = np.array([self.seed, row], dtype=np.uint64)
            state["state"]["counter"] = np.zeros(4, dtype=np.uint64)
            state["buffer_pos"] = 4  # empty output buffer: the next word is counter 0
            state["has_uint32"] = 0
            bitgen.state = state
            out[j] = bitgen.random_raw(self.n_words)
        return out

    def draws(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """The uniforms of ``rows``: ``(m, 5)`` affine/thickness values in (0, 1), and the
        noise fields ``(m, 2, h, w)`` in (-1, 1) (see the module docstring)."""
        words = self.row_words(rows)
        affine = uniform_open(words[:, :N_AFFINE_WORDS])
        field_words = words[:, N_AFFINE_WORDS:]
        halves = np.empty((len(words), 2 * field_words.shape[1]), dtype=np.float64)
        halves[:, 0::2] = field_words & np.uint64(0xFFFFFFFF)
        halves[:, 1::2] = field_words >> np.uint64(32)
        noise = 2.0 * ((halves + 0.5) * _TWO_POW_M32) - 1.0
        return affine, noise.reshape(len(words), 2, *self.shape)

    def rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``[start, stop)``: ``X`` float32 ``(m, h w)`` in [0, 1], ``y`` int64."""
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop:
            raise ValueError(f"need 0 <= start <= stop, got {start}, {stop}")
        index = np.arange(start, stop, dtype=np.int64)
        base = index % self.n_base
        X = np.empty((len(index), self.n_features), dtype=np.float32)
        original = index < self.n_base if self.config.originals else np.zeros(len(index), dtype=bool)
        if original.any():
            X[original] = self.base[base[original]].reshape(int(original.sum()), -1)
        todo = np.flatnonzero(~original)
        # Sub-batches keep the working set in cache; a row's bytes do not depend on them.
        for lo in range(0, len(todo), _SUB_BATCH):
            part = todo[lo : lo + _SUB_BATCH]
            X[part] = self._deform(index[part], base[part]).reshape(len(part), -1)
        return X, self.labels[base]

    def smooth(self, noise: np.ndarray) -> np.ndarray:
        """Gaussian smoothing of noise fields ``(..., h, w)`` times ``elastic_alpha``.

        The filter is ``scipy.ndimage.gaussian_filter1d`` (reflecting borders) along each
        axis, applied as its matrix (``G_h @ field @ G_w.T``): the same linear map,
        several times faster on 28x28 fields.
        """
        return np.matmul(np.matmul(self._smooth_h, noise), self._smooth_w_t) * self.config.elastic_alpha

    def _deform(self, index: np.ndarray, base: np.ndarray) -> np.ndarray:
        cfg = self.config
        affine, noise = self.draws(index.tolist())
        signed = 2.0 * affine - 1.0  # uniforms in (-1, 1)
        thick = signed[:, 4] * cfg.thickness
        up, down = np.maximum(thick, 0.0)[:, None, None], np.maximum(-thick, 0.0)[:, None, None]
        img = self.base[base].astype(np.float64)
        img = img + up * (self.dilated[base] - img) + down * (self.eroded[base] - img)
        coords = self._coordinates(signed, self.smooth(noise))
        out = ndimage.map_coordinates(img, coords, order=1, mode="constant", cval=0.0, prefilter=False)
        return np.clip(out, 0.0, 1.0).astype(np.float32)

    def _coordinates(self, signed: np.ndarray, field: np.ndarray) -> np.ndarray:
        """Sampling coordinates ``(3, m, h, w)``: batch index, row, column."""
        cfg = self.config
        m = len(signed)
        # Per-row trigonometry in Python floats: a row's matrix must not depend on where
        # the row sits in a vectorised batch (SIMD and scalar libm paths may differ).
        matrices = np.empty((m, 2, 2))
        for j in range(m):
            angle = math.radians(float(signed[j, 0]) * cfg.rotation_deg)
            inv_scale = 1.0 / (1.0 + float(signed[j, 1]) * cfg.scale)
            c, s = math.cos(angle) * inv_scale, math.sin(angle) * inv_scale
            matrices[j] = ((c, s), (-s, c))  # R(-angle) / scale in (row, column) coordinates
        shift = signed[:, 2:4] * cfg.translation
        rel_r = self._grid[0][None] - self._centre[0] - shift[:, 0, None, None]
        rel_c = self._grid[1][None] - self._centre[1] - shift[:, 1, None, None]
        coords = np.empty((3, m, *self.shape))
        coords[0] = np.arange(m, dtype=np.float64)[:, None, None]
        coords[1] = self._centre[0] + matrices[:, 0, 0, None, None] * rel_r + matrices[:, 0, 1, None, None] * rel_c + field[:, 0]
        coords[2] = self._centre[1] + matrices[:, 1, 0, None, None] * rel_r + matrices[:, 1, 1, None, None] * rel_c + field[:, 1]
        return coords

    def shard_batches(self, first_row: int, n_rows: int, batch_rows: int = 1024) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Rows ``[first_row, first_row + n_rows)`` in batches of ``batch_rows``."""
        stop = int(first_row) + int(n_rows)
        for start in range(int(first_row), stop, int(batch_rows)):
            yield self.rows(start, min(start + int(batch_rows), stop))
