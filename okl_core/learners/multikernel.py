"""What the multi-kernel learners share: the kernel dictionary, per-kernel seeds, draws.

Used by :mod:`okl_core.learners.omkl` (OMKL-GF, Raker; spec/omkl_gf.md) and
:mod:`okl_core.learners.oks` (OKS, OKS++, IOKS, RF-OKS++, RF-IOKS; spec/oks.md).

Kernel dictionary
-----------------
One config field, ``kernels``, a string of comma-separated ``KERNEL:SIGMA`` entries::

    "gaussian:2^-2,gaussian:2^-1,gaussian:1,gaussian:2,gaussian:4,gaussian:8"
    "gaussian:0.25, laplacian:3.5"

``KERNEL`` is one of :data:`okl_core.features.KERNELS` (gaussian, laplacian, cauchy, with
the papers' bandwidth conventions) and ``SIGMA`` a number > 0, written as a
float literal or as a power of two ``2^K`` (integer ``K``). Entries must be distinct. Kernel
``j`` is the ``j``-th entry (0-based). :func:`kernel_dictionary` builds the string for a
range of powers of two; :data:`OMKL_DICTIONARY` (17 Gaussians, sigma = 2^-8 .. 2^8) and
:data:`OKS_DICTIONARY` (6 Gaussians, sigma = 2^-2 .. 2^3) are the papers' dictionaries.

Seeds and draws (all from the config ``seed``)
----------------------------------------------
The generator keyed by ``(seed, block)`` (:func:`okl_core.random.block_bit_generator`)
has a 2^64 block index space, split in two halves so that no two uses can meet:

* ``(seed, t)`` for ``t < 2^63``: the draws of example ``t`` (0-based position in the
  stream, i.e. ``n_seen`` before the example). :func:`example_uniforms` returns its raw
  words as uniforms on (0, 1); each learner documents which word means what.
* ``(seed, 2^63 + j)``: word 0 is :func:`kernel_seed` ``(seed, j)``, the seed of kernel
  ``j``'s random Fourier features. Kernel ``j``'s feature map is
  ``FeatureSpec(kernel_j, sigma_j, seed=kernel_seed(seed, j), n_components=D, scaled=True)``,
  so its frequency blocks are keyed ``(kernel_seed(seed, j), b)``.

Feature keys and example keys therefore differ in their first component as long as the
kernel seeds differ from each other and from ``seed``; :func:`kernel_seeds` checks that
(a 64-bit coincidence, about ``N^2 / 2^64``) and refuses such a seed with a ValueError.
Models with the same seed and dictionary (say OMKL-GF and Raker) share each kernel's
features. Because every draw is keyed by the example's position, ``update`` is a pure
function of ``(state, X, y)`` and a batch update equals the row-by-row fold.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from okl_core.features import KERNELS, FeatureSpec, FourierFeatures
from okl_core.learners.base import CheckedConfig, Learner, StateT, check_bandwidth
from okl_core.losses import softmax
from okl_core.numerics import libm_exp
from okl_core.random import block_bit_generator, row_uniforms

__all__ = [
    "OMKL_DICTIONARY",
    "OKS_DICTIONARY",
    "kernel_dictionary",
    "parse_kernel_dictionary",
    "kernel_label",
    "kernel_seed",
    "kernel_seeds",
    "example_uniforms",
    "example_uniform_rows",
    "draw_index",
    "KernelFeatureBank",
    "MultiKernelLearner",
    "MultiKernelConfig",
    "RandomFeatureMultiKernelConfig",
    "log_normalize",
    "normalized_weights",
    "fold_log_normalize",
    "fold_weights",
    "row_dots",
    "FeatureBlock",
    "fold_on_demand",
]

_EXAMPLE_LIMIT = 2**63
_KERNEL_SEED_BASE = 2**63
_POWER_OF_TWO = re.compile(r"^2\^([+-]?\d+)$")


def kernel_dictionary(kernel: str = "gaussian", min_log2: int = -8, max_log2: int = 8) -> str:
    """Dictionary string of ``kernel`` with sigma = 2^min_log2, ..., 2^max_log2.

    Examples
    --------
    >>> kernel_dictionary("gaussian", -1, 1)
    'gaussian:2^-1,gaussian:2^0,gaussian:2^1'
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    if not (isinstance(min_log2, int) and isinstance(max_log2, int)) or min_log2 > max_log2:
        raise ValueError(f"need integers min_log2 <= max_log2, got {min_log2!r}, {max_log2!r}")
    return ",".join(f"{kernel}:2^{k}" for k in range(min_log2, max_log2 + 1))


OMKL_DICTIONARY = kernel_dictionary("gaussian", -8, 8)
"""OMKL-GF's experiments: 17 Gaussian kernels, sigma = 2^-8 .. 2^8 (spec/omkl_gf.md)."""

OKS_DICTIONARY = kernel_dictionary("gaussian", -2, 3)
"""Li & Liao's experiments: 6 Gaussian kernels, sigma = 2^-2 .. 2^3 (spec/oks.md)."""


def _parse_sigma(token: str) -> float | None:
    match = _POWER_OF_TWO.match(token)
    if match:
        exponent = int(match.group(1))
        return math.ldexp(1.0, exponent) if -1000 < exponent < 1000 else None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def parse_kernel_dictionary(text) -> tuple[tuple[str, float], ...]:
    """Parse a ``kernels`` string into ``((kernel, sigma), ...)`` (see module docstring).

    Raises
    ------
    ValueError
        Not a string, empty, a malformed entry (named with its position), an unknown
        kernel, a sigma that is not a number > 0 or ``2^K``, or a repeated entry.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"kernels must be a non-empty string of KERNEL:SIGMA entries, got {text!r}")
    entries = []
    for position, raw in enumerate(text.split(","), start=1):
        kernel, sep, sigma_token = (part.strip() for part in raw.partition(":"))
        sigma = _parse_sigma(sigma_token) if sep else None
        if sigma is None:
            raise ValueError(
                f"kernels: entry {position} {raw.strip()!r} is not KERNEL:SIGMA with SIGMA a number > 0 or 2^K"
            )
        if kernel not in KERNELS:
            raise ValueError(f"kernels: entry {position} has kernel {kernel!r}; choose from {sorted(KERNELS)}")
        check_bandwidth(f"kernels: entry {position}'s sigma", sigma)
        if (kernel, sigma) in entries:
            raise ValueError(f"kernels: entry {position} {kernel}:{sigma!r} appears twice")
        entries.append((kernel, sigma))
    return tuple(entries)


def kernel_label(kernel: str, sigma: float) -> str:
    """``'kernel:sigma'`` with sigma as Python's shortest round-trip float (unique per entry)."""
    return f"{kernel}:{float(sigma)!r}"


def kernel_seed(seed: int, j: int) -> int:
    """Seed of kernel ``j``'s random features: word 0 of the generator ``(seed, 2^63 + j)``."""
    return int(block_bit_generator(seed, _KERNEL_SEED_BASE + int(j)).random_raw(1)[0])


def kernel_seeds(seed: int, n_kernels: int) -> tuple[int, ...]:
    """:func:`kernel_seed` of kernels ``0..n_kernels-1``, checked distinct from each other and ``seed``."""
    seeds = tuple(kernel_seed(seed, j) for j in range(n_kernels))
    if len(set(seeds) | {int(seed)}) != n_kernels + 1:
        raise ValueError(f"seed {seed} derives colliding per-kernel seeds (a 2^-64 coincidence); choose another seed")
    return seeds


def example_uniforms(seed: int, t: int, n: int) -> np.ndarray:
    """``n`` float64 uniforms on (0, 1) for example ``t`` (0-based): words of generator ``(seed, t)``."""
    return example_uniform_rows(seed, t, t + 1, n)[0]


def example_uniform_rows(seed: int, start: int, stop: int, n: int) -> np.ndarray:
    """:func:`example_uniforms` of the examples ``start..stop-1`` at once, ``(stop - start, n)``.

    A batch draws all its examples' uniforms before its fold
    (:func:`okl_core.random.row_uniforms`: one generator for the batch, the same words).
    """
    if start < 0 or stop > _EXAMPLE_LIMIT:
        raise ValueError(f"example counters {start}..{stop - 1} are outside [0, 2**63)")
    return row_uniforms(seed, start, stop, n)


def draw_index(weights: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from non-negative ``weights`` (normalised here) with uniform ``u``."""
    cdf = np.cumsum(weights)
    return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(cdf) - 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiKernelConfig(CheckedConfig):
    """Fields shared by the multi-kernel learners.

    Parameters
    ----------
    n_inputs : int
        Input dimension ``d``.
    kernels : str
        The kernel dictionary, ``"KERNEL:SIGMA,..."`` (module docstring). Each learner's
        default is its paper's dictionary with the median heuristic on the data as unit
        (``data_defaults``, :func:`okl_core.derived.scaled_dictionary`): the papers chose
        their bandwidths for features scaled to [0, 1] or [-1, 1]. The paper's own
        dictionary (a learner built with no data) stays reachable as ``sigma=1``.
    seed : int
        Model seed: per-example draws and every kernel's random features derive from it.
    """

    n_inputs: int
    kernels: str = OKS_DICTIONARY
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        # the dictionary is a Described declaration: its parser (kernel_seeds parses it) checks it
        kernel_seeds(self.seed, len(self.dictionary))

    @property
    def dictionary(self) -> tuple[tuple[str, float], ...]:
        """``((kernel, sigma), ...)`` parsed from :attr:`kernels`."""
        return parse_kernel_dictionary(self.kernels)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RandomFeatureMultiKernelConfig(MultiKernelConfig):
    """:class:`MultiKernelConfig` plus one seeded random Fourier map per kernel.

    Parameters
    ----------
    n_components : int
        Frequencies ``D`` per kernel (``2 D`` features ``[cos, sin] / sqrt(D)``).
    block_size : int
        Frequencies per generator block (part of each kernel's FeatureSpec).
    feature_cache_mb : int
        Memory bound for cached frequency blocks, all kernels together (not part of the
        model: a runtime field).
    """

    n_components: int = 50
    block_size: int = 256
    feature_cache_mb: int = 256

    def feature_specs(self) -> tuple[FeatureSpec, ...]:
        """Each kernel's :class:`~okl_core.features.FeatureSpec` (see :class:`KernelFeatureBank`)."""
        return KernelFeatureBank.specs_for(self.dictionary, self.n_inputs, self.n_components, self.seed, self.block_size)


class KernelFeatureBank:
    """One seeded :class:`~okl_core.features.FourierFeatures` map per dictionary kernel.

    Kernel ``j`` uses ``FeatureSpec(n_inputs, n_components, kernel_j, sigma_j,
    seed=kernel_seed(seed, j), block_size, scaled=True)``: ``2 D`` features
    ``[cos, sin] / sqrt(D)`` with ``||z(x)||^2 = 1`` (spec/omkl_gf.md, spec/oks.md).

    The learners' online updates map one row at a time with :meth:`rows` (the same numpy
    operations whatever the batch, so a batch update is the row-by-row fold bit for bit),
    for the kernels they evaluate only; :meth:`transform` maps whole batches for ``predict``.
    """

    def __init__(self, config: RandomFeatureMultiKernelConfig):
        self.specs = config.feature_specs()
        # Each map gets its share of the cache budget.
        share = max(1, config.feature_cache_mb * 2**20 // len(self.specs))
        self.maps = tuple(FourierFeatures(spec, cache_bytes=share) for spec in self.specs)
        self.n_components = config.n_components
        self._scale = np.float32(1.0 / math.sqrt(config.n_components))
        self._cache_bytes = config.feature_cache_mb * 2**20
        self._stack: np.ndarray | None = None

    @staticmethod
    def specs_for(dictionary, n_inputs: int, n_components: int, seed: int, block_size: int) -> tuple[FeatureSpec, ...]:
        """The per-kernel feature specs of a dictionary (kernel ``j`` seeded by ``kernel_seed(seed, j)``)."""
        seeds = kernel_seeds(seed, len(dictionary))
        return tuple(
            FeatureSpec(
                n_inputs=n_inputs,
                n_components=n_components,
                kernel=kernel,
                sigma=sigma,
                seed=s,
                block_size=block_size,
                scaled=True,
            )
            for (kernel, sigma), s in zip(dictionary, seeds)
        )

    def stack(self) -> np.ndarray:
        """All kernels' frequencies, float32 ``(N, n_inputs, D)`` (kept while within the cache budget)."""
        if self._stack is not None:
            return self._stack
        stack = np.stack([m.frequencies() for m in self.maps])
        stack.flags.writeable = False
        if stack.nbytes <= self._cache_bytes:
            self._stack = stack
        return stack

    def rows(self, omega: np.ndarray, x: np.ndarray, kernels=None) -> np.ndarray:
        """Features of one float32 row ``x``: float64 ``(k, 2 D)`` blocks ``[cos, sin] / sqrt(D)``.

        ``omega`` is :meth:`stack` (or a slice of it); ``kernels`` (indices into it) limits
        the work to those kernels, without copying their frequencies; None: all of them.
        """
        if kernels is None:
            proj = np.matmul(x, omega)  # (k, D)
        else:
            proj = np.stack([np.dot(x, omega[n]) for n in kernels])
        z = np.concatenate((np.cos(proj), np.sin(proj)), axis=1)
        z *= self._scale
        return z.astype(np.float64)

    def row_blocks(self, omega: np.ndarray, X: np.ndarray, block_bytes: int = 8 * 2**20):
        """:meth:`rows` of every row of ``X`` for all kernels of ``omega``, in blocks of rows.

        Yields ``(start, Z)`` with ``Z`` float64 ``(n, k, 2 D)`` the features of rows
        ``start..start+n-1``, at most ``block_bytes`` each. The same bits as :meth:`rows`
        row by row: the stacked ``matmul`` makes one ``gemv`` per (row, kernel), the call
        :meth:`rows` makes, and the rest is elementwise. The compiled folds read their
        features from these blocks (:mod:`okl_core.learners.compiled`).
        """
        per_row = omega.shape[0] * 2 * omega.shape[2] * 8
        step = max(1, block_bytes // max(per_row, 1))
        for start in range(0, len(X), step):
            proj = np.matmul(X[start : start + step, None, None, :], omega[None])[:, :, 0, :]  # (n, k, D)
            z = np.concatenate((np.cos(proj), np.sin(proj)), axis=2)
            z *= self._scale
            yield start, z.astype(np.float64)

    def transform(self, j: int, X: np.ndarray) -> np.ndarray:
        """Kernel ``j``'s features of the rows of ``X``, float64 ``(n, 2 D)``."""
        return self.maps[j].transform(X).astype(np.float64)


class MultiKernelLearner(Learner[StateT]):
    """A learner over its config's kernel dictionary: the dictionary and what it reports.

    Subclasses implement :meth:`kernel_distribution` (the normalised combination weights,
    or the selection distribution ``q``) and :meth:`kernel_counts`; the reports below are
    built on them.
    """

    def __init__(self, config):
        super().__init__(config)
        self.dictionary: tuple[tuple[str, float], ...] = config.dictionary

    @property
    def n_kernels(self) -> int:
        """``K``, the number of dictionary kernels."""
        return len(self.dictionary)

    @property
    def kernel_labels(self) -> list[str]:
        """``'kernel:sigma'`` of each dictionary entry, in dictionary order."""
        return [kernel_label(k, s) for k, s in self.dictionary]

    def kernel_distribution(self, state: StateT) -> np.ndarray:
        """Each kernel's current weight (sums to 1)."""
        raise NotImplementedError

    def kernel_counts(self, state: StateT) -> np.ndarray:
        """Examples on which each kernel was evaluated and updated."""
        raise NotImplementedError

    def kernel_weights(self, state: StateT) -> dict[str, float]:
        """Kernel label -> its current weight (sums to 1): which bandwidth is winning.

        Combination weights ``w / sum w`` for OMKL-GF and Raker; the selection distribution
        ``q`` (before exploration is mixed in) for the OKS family. Call it after each batch
        to follow the weights over time.
        """
        return dict(zip(self.kernel_labels, map(float, self.kernel_distribution(state))))

    def kernel_usage(self, state: StateT) -> dict[str, int]:
        """Kernel label -> number of examples on which the kernel was evaluated and updated."""
        return dict(zip(self.kernel_labels, map(int, self.kernel_counts(state))))

    def best_kernel(self, state: StateT) -> str:
        """Label of the kernel with the largest weight (first on ties)."""
        return self.kernel_labels[int(np.argmax(self.kernel_distribution(state)))]


def log_normalize(log_w: np.ndarray) -> np.ndarray:
    """Shift log-weights so that ``sum exp(log_w) = 1`` (log-sum-exp; the ratios are unchanged)."""
    top = np.max(log_w)
    return log_w - (top + np.log(np.sum(np.exp(log_w - top))))


def normalized_weights(log_w: np.ndarray) -> np.ndarray:
    """``exp(log_w) / sum exp(log_w)`` (the softmax of :mod:`okl_core.losses`)."""
    return softmax(np.asarray(log_w, dtype=np.float64)[None, :])[0]


# -- the per-example arithmetic of the folds in numpy (OKS's numpy steps, the tests' references)
# The compiled folds (_jit_folds.fold_weights_into, log_normalize_in_place ...) give these
# bytes: numba's exp and log are the C library's (numpy's SIMD exp differed from it on 4.6%
# of 200,000 arguments, its log on 0.06%), and its sums are sequential (numpy's pairwise
# np.sum differed from a sequential sum on 63% of 17-element arrays). So these exponentiate
# with math.exp and math.log element by element, sum with np.cumsum (sequential) and take
# dot products with BLAS ddot (matmul of (1, k) by (k, 1) stacks), as the compiled code does.
def fold_weights(log_w: np.ndarray) -> np.ndarray:
    """:func:`normalized_weights` as the folds compute it (C-library exp, sequential sum)."""
    e = libm_exp(log_w - np.max(log_w))
    return e / np.cumsum(e)[-1]


def fold_log_normalize(log_w: np.ndarray) -> np.ndarray:
    """:func:`log_normalize` as the folds compute it (C-library exp and log, sequential sum)."""
    top = np.max(log_w)
    return log_w - (top + math.log(np.cumsum(libm_exp(log_w - top))[-1]))


def row_dots(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A[n] . B[n]`` for each row ``n`` of two float64 ``(k, m)`` arrays, one BLAS ddot each."""
    return np.matmul(A[:, None, :], B[:, :, None])[:, 0, 0]


class FeatureBlock:
    """Features of a block of rows for the (row, kernel) pairs asked for so far.

    ``Z`` float64 ``(n, k, 2 D)`` and ``have`` bool ``(n, k)``: ``Z[r, j]`` holds
    :meth:`KernelFeatureBank.rows` of row ``r`` for kernel ``j`` (the same bits: one stacked
    ``matmul``, so one ``gemv`` per row, then the same elementwise steps) where ``have[r, j]``.
    """

    def __init__(self, bank: KernelFeatureBank, omega: np.ndarray, X: np.ndarray):
        self.bank, self.omega, self.X = bank, omega, X
        self.Z = np.empty((len(X), omega.shape[0], 2 * omega.shape[2]))
        self.have = np.zeros((len(X), omega.shape[0]), dtype=bool)

    def fill(self, need: np.ndarray) -> None:
        """Compute the features of the pairs ``need`` (bool ``(n, k)``) not there yet."""
        for j in np.flatnonzero(need.any(axis=0)):
            rows = np.flatnonzero(need[:, j] & ~self.have[:, j])
            if len(rows):
                proj = np.matmul(self.X[rows][:, None, :], self.omega[j])[:, 0, :]
                z = np.concatenate((np.cos(proj), np.sin(proj)), axis=1)
                z *= self.bank._scale
                self.Z[rows, j] = z
                self.have[rows, j] = True


def fold_on_demand(bank: KernelFeatureBank, omega: np.ndarray, X: np.ndarray, guess, run, block_bytes: int = 8 * 2**20) -> None:
    """Drive a compiled fold that evaluates only some kernels per row (decided as it goes).

    Rows go in blocks of at most ``block_bytes`` of features. For each block,
    ``guess(start, stop)`` (bool ``(n, k)``) names the kernels each row will probably use
    (drawn from the state reached) and their features are computed in one batch;
    ``run(start, Z, have, r)`` folds the block's rows from ``r`` and returns ``(r, j)``:
    the rows done, and, if it stopped early, the kernel ``j`` whose features row ``r``
    lacks (nothing of row ``r`` learned yet). Then the rest of the block is guessed again
    from the state reached, those features and row ``r``'s kernel ``j`` are computed, and
    the fold resumes. (Computing kernel ``j`` for the rest of the block instead made
    rf_oks_pp 1.6x slower than the numpy fold on MNIST digits, D = 400: early in training
    the drawn kernels change often, and each miss cost a 1,000-row feature map.)
    """
    per_row = omega.shape[0] * 2 * omega.shape[2] * 8
    step = max(1, block_bytes // max(per_row, 1))
    for start in range(0, len(X), step):
        stop = min(start + step, len(X))
        block = FeatureBlock(bank, omega, X[start:stop])
        block.fill(guess(start, stop))
        r = 0
        while r < stop - start:
            r, j = run(start, block.Z, block.have, r)
            if r < stop - start:
                need = np.zeros_like(block.have)
                need[r:] = guess(start + r, stop)
                need[r, j] = True
                block.fill(need)
