"""Feature maps: seeded random Fourier features, and the Taylor basis of the Gaussian kernel.

A :class:`FourierFeatures` map is a pure function of its :class:`FeatureSpec` (kernel,
sigma, input dimension, number of frequencies, block size, seed, generator version).
Frequency block ``b`` holds ``block_size`` frequencies drawn from the counter-based
generator keyed by ``(seed, b)`` (:mod:`okl_core.random`), so any block can be made on any
worker, in any order, without the blocks before it. The frequency matrix is never stored
in a model file.

The kernels and the distributions of their frequencies are those of
:mod:`okl_core.kernels` (:data:`~okl_core.kernels.KERNELS`), which also
holds the exact kernels; ``KERNELS``, ``exact_kernel`` and ``median_heuristic`` are
re-exported here for existing callers.

``D`` frequencies give ``2 D`` features ``[cos(Omega^T x), sin(Omega^T x)]``. The *scaled*
form divides by ``sqrt(D)`` so that ``z(x) . z(x')`` approximates ``k(x, x')``; the
*unscaled* form (FOGD's paper and code) has ``||z||^2 = D``; ``eta_scaled = D eta_unscaled``.

:class:`TaylorFeatures` is the deterministic (seedless) Taylor basis of the Gaussian
kernel used by PKAWV (Section 3.1 of the paper).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict

import numpy as np

from okl_core.kernels import KERNELS, exact_kernel, median_heuristic
from okl_core.random import DISTRIBUTIONS, GENERATOR_VERSION, block_bit_generator
from okl_core.validation import check_bandwidth, check_bool, check_int, check_seed, plain_scalars

__all__ = [
    "KERNELS",
    "FeatureSpec",
    "FourierFeatures",
    "frequency_block",
    "exact_kernel",
    "median_heuristic",
    "taylor_basis_size",
    "taylor_truncation_bound",
    "TaylorFeatures",
]

@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """Everything that determines a random Fourier feature map (JSON scalars only).

    Parameters
    ----------
    n_inputs : int
        Input dimension ``d``.
    n_components : int
        Number of frequencies ``D``; the map outputs ``2 D`` features.
    kernel : {'gaussian', 'laplacian', 'cauchy'}
        Shift-invariant kernel to approximate.
    sigma : float
        Kernel bandwidth (> 0).
    seed : int
        Model seed; frequency block ``b`` is keyed by ``(seed, b)``.
    block_size : int
        Frequencies per generator block. Part of the spec: a different block size gives
        different frequencies.
    scaled : bool
        Divide features by ``sqrt(D)`` (kernel-approximating form) or not (FOGD form).
    generator_version : int
        Version of the raw-bits transform; must equal the running library's.
    """

    n_inputs: int
    n_components: int
    kernel: str = "gaussian"
    sigma: float = 1.0
    seed: int = 0
    block_size: int = 256
    scaled: bool = True
    generator_version: int = GENERATOR_VERSION

    def __post_init__(self):
        plain_scalars(self)
        check_int("n_inputs", self.n_inputs, 1)
        check_int("n_components", self.n_components, 1)
        check_int("block_size", self.block_size, 1)
        check_seed("seed", self.seed)
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        check_bandwidth("sigma", self.sigma)
        check_bool("scaled", self.scaled)
        if self.generator_version != GENERATOR_VERSION:
            raise ValueError(
                f"feature generator version {self.generator_version} is not supported by this "
                f"okl (version {GENERATOR_VERSION}): the frequencies would differ"
            )

    @property
    def n_blocks(self) -> int:
        """Number of generator blocks covering ``n_components`` frequencies."""
        return -(-self.n_components // self.block_size)

    @property
    def n_outputs(self) -> int:
        """Number of output features, ``2 D``."""
        return 2 * self.n_components

    def to_dict(self) -> dict:
        """Return the spec as a JSON-ready dict."""
        return dataclasses.asdict(self)


def frequency_block(kernel: str, sigma: float, n_inputs: int, block_size: int, seed: int, block: int) -> np.ndarray:
    """Generate frequency block ``block`` as a float32 array of shape ``(n_inputs, block_size)``.

    Draws are made in C order of a ``(block_size, n_inputs)`` array (each frequency's
    coordinates consecutive), divided by ``sigma`` in float64, then transposed and cast.
    """
    sampler = DISTRIBUTIONS[KERNELS[kernel]]
    draws = sampler(block_bit_generator(seed, block), block_size * n_inputs)
    omega = (draws / float(sigma)).reshape(block_size, n_inputs)
    return np.ascontiguousarray(omega.T, dtype=np.float32)


class FourierFeatures:
    """Random Fourier feature map of a :class:`FeatureSpec`, with a bounded block cache.

    Parameters
    ----------
    spec : FeatureSpec
        The map's definition.
    cache_bytes : int, default 256 MiB
        Upper bound on the memory kept for generated frequency blocks (least recently
        used blocks are dropped and regenerated on demand).

    Examples
    --------
    >>> spec = FeatureSpec(n_inputs=3, n_components=8, sigma=2.0, seed=1)
    >>> z = FourierFeatures(spec).transform(np.ones((2, 3)))
    >>> z.shape, z.dtype
    ((2, 16), dtype('float32'))
    """

    def __init__(self, spec: FeatureSpec, cache_bytes: int = 256 * 2**20):
        self.spec = spec
        self.cache_bytes = int(cache_bytes)
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cached_bytes = 0

    def block(self, b: int) -> np.ndarray:
        """Frequencies of block ``b``: float32 ``(n_inputs, block_size)`` (cached, read-only)."""
        omega = self._cache.get(b)
        if omega is not None:
            self._cache.move_to_end(b)
            return omega
        s = self.spec
        omega = frequency_block(s.kernel, s.sigma, s.n_inputs, s.block_size, s.seed, b)
        omega.flags.writeable = False
        if omega.nbytes <= self.cache_bytes:
            self._cache[b] = omega
            self._cached_bytes += omega.nbytes
            while self._cached_bytes > self.cache_bytes:
                _, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= dropped.nbytes
        return omega

    def frequencies(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Frequencies ``start..stop-1`` as float32 ``(n_inputs, stop - start)``."""
        s = self.spec
        stop = s.n_components if stop is None else stop
        if not 0 <= start < stop:
            raise ValueError(f"frequency range [{start}, {stop}) is empty or negative")
        first, last = start // s.block_size, -(-stop // s.block_size)
        parts = [self.block(b) for b in range(first, last)]
        omega = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        offset = first * s.block_size
        return omega[:, start - offset : stop - offset]

    def transform(self, X: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Map rows of ``X`` to ``[cos(X Omega), sin(X Omega)]`` for frequencies start..stop-1.

        Parameters
        ----------
        X : array-like of shape (n, n_inputs)
        start, stop : int
            Frequency range (default: all ``n_components``). The scale factor, when
            ``spec.scaled``, is ``1 / sqrt(stop - start)``.

        Returns
        -------
        ndarray of float32, shape (n, 2 (stop - start))
        """
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.spec.n_inputs:
            raise ValueError(f"expected X of shape (n, {self.spec.n_inputs}), got {X.shape}")
        projection = X @ self.frequencies(start, stop)
        n_freq = projection.shape[1]
        out = np.empty((X.shape[0], 2 * n_freq), dtype=np.float32)
        np.cos(projection, out=out[:, :n_freq])
        np.sin(projection, out=out[:, n_freq:])
        if self.spec.scaled:
            out *= np.float32(1.0 / math.sqrt(n_freq))
        return out


def taylor_basis_size(n_inputs: int, degree: int) -> int:
    """Number of monomials of total degree ``<= degree`` in ``n_inputs`` variables, C(M + d, M)."""
    return math.comb(int(degree) + int(n_inputs), int(degree))


def taylor_truncation_bound(X: np.ndarray, Y: np.ndarray, sigma: float, degree: int) -> np.ndarray:
    """Upper bound on ``|k(x, y) - k_M(x, y)|`` for the degree-``M`` Taylor basis.

    With ``t = x.y / sigma^2`` the Gaussian kernel is
    ``exp(-(|x|^2 + |y|^2) / (2 sigma^2)) exp(t)`` and the basis keeps the terms
    ``t^m / m!`` with ``m <= M`` of ``exp(t)``. The remainder is at most
    ``|t|^(M+1) / (M+1)! exp(|t|)`` and the prefactor is at most ``exp(-|t|)`` (because
    ``|x|^2 + |y|^2 >= 2 |x.y|``), so ``|k - k_M| <= |t|^(M+1) / (M+1)!``.

    Returns
    -------
    ndarray of float64, shape (len(X), len(Y))
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    t = np.abs(X @ Y.T) / float(sigma) ** 2
    return t ** (degree + 1) / math.factorial(degree + 1)


class TaylorFeatures:
    """Deduplicated Taylor basis of the Gaussian kernel (PKAWV, Jézéquel et al. 2019).

    For every multi-index ``k`` with total degree ``|k| <= degree``::

        g_k(x) = x^k / (sigma^|k| sqrt(k_1! ... k_d!)) * exp(-|x|^2 / (2 sigma^2))

    so that ``g(x).g(y)`` is the Gaussian kernel with ``exp(x.y / sigma^2)`` truncated to
    degree ``M`` (the ``g_k`` are orthonormal in the kernel's RKHS). There are
    ``r = C(M + d, M)`` functions, one per monomial (not the ``sum_k d^k`` ordered tuples of
    the paper's code, which give the same kernel at a higher cost).

    Order of the features: by degree, then by the sorted index tuple
    ``i_1 <= ... <= i_m`` in lexicographic order. Each monomial of degree ``m`` is built
    from its *parent* (the tuple without its last index ``i_m``) as
    ``g_k = g_parent * x_{i_m} / (sigma sqrt(k_{i_m}))``, one column product per feature.

    Inputs should lie in ``[-1, 1]^d`` (the paper scales them so): far outside, the
    Gaussian factor underflows and the monomials overflow.

    Parameters
    ----------
    n_inputs : int
        Input dimension ``d``.
    degree : int
        Maximal total degree ``M`` (>= 0).
    sigma : float
        Bandwidth of the Gaussian kernel.
    """

    def __init__(self, n_inputs: int, degree: int, sigma: float):
        check_int("n_inputs", n_inputs, 1)
        check_int("degree", degree, 0)
        check_bandwidth("sigma", sigma)
        self.n_inputs, self.degree, self.sigma = int(n_inputs), int(degree), float(sigma)
        self.n_outputs = taylor_basis_size(n_inputs, degree)
        self._parent, self._last, self._scale = self._enumerate()

    def _enumerate(self):
        """Per feature: parent feature, last input index, scale ``1 / (sigma sqrt(k_last))``.

        Entry 0 (the constant) has parent -1 and scale 0; it is never built from a parent.
        """
        d = self.n_inputs
        parent, last, mult = [np.array([-1])], [np.array([0])], [np.array([0])]
        # Degree-0 monomial: last index 0 so that every input i >= 0 extends it.
        first, prev_last, prev_mult = 0, np.zeros(1, dtype=np.intp), np.zeros(1, dtype=np.intp)
        for m in range(1, self.degree + 1):
            counts = d - prev_last  # children of a monomial ending at l: i = l .. d-1
            starts = np.repeat(prev_last, counts)
            idx = starts + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            same = (idx == starts) & (m > 1)  # the last exponent grows, else a new one starts
            mul = np.where(same, np.repeat(prev_mult, counts) + 1, 1)
            parent.append(np.repeat(np.arange(first, first + len(prev_last)), counts))
            last.append(idx)
            mult.append(mul)
            first += len(prev_last)
            prev_last, prev_mult = idx, mul
        parents, lasts, mults = (np.concatenate(a).astype(np.intp) for a in (parent, last, mult))
        if len(parents) != self.n_outputs:  # pragma: no cover - enumeration invariant
            raise AssertionError(f"Taylor enumeration produced {len(parents)} features, expected {self.n_outputs}")
        scale = np.zeros(len(mults))
        scale[1:] = 1.0 / (self.sigma * np.sqrt(mults[1:].astype(np.float64)))
        return parents, lasts, scale

    def exponents(self) -> np.ndarray:
        """Multi-indices ``k`` of the features as an int array of shape ``(r, d)``."""
        k = np.zeros((self.n_outputs, self.n_inputs), dtype=np.int64)
        for j in range(1, self.n_outputs):
            k[j] = k[self._parent[j]]
            k[j, self._last[j]] += 1
        return k

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Map rows of ``X`` to the ``r`` basis functions (float64, shape ``(n, r)``)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_inputs:
            raise ValueError(f"expected X of shape (n, {self.n_inputs}), got {X.shape}")
        out = np.empty((X.shape[0], self.n_outputs))
        out[:, 0] = 1.0
        # Parents precede their children and a degree block only reads lower degrees, so
        # one vectorised product per degree builds the whole basis.
        start = 1
        for m in range(1, self.degree + 1):
            block = slice(start, start + math.comb(m + self.n_inputs - 1, m))
            out[:, block] = out[:, self._parent[block]] * (X[:, self._last[block]] * self._scale[block])
            start = block.stop
        out *= np.exp(-(X * X).sum(1) / (2.0 * self.sigma**2))[:, None]
        return out
