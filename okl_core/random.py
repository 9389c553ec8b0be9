"""Counter-based, platform-stable random draws keyed by ``(seed, block)``.

Why this module exists
----------------------
A random-feature model is shared *by seed*: every worker regenerates frequency block
``b`` from the key ``(seed, b)`` and must obtain the same bits. numpy promises stable raw
output from its bit generators, but not stable ``Generator.standard_normal`` output across
releases, and its float64 ``log``/``cos`` may use different SIMD code paths (and so differ
in the last bit) on different CPUs. We therefore take only raw 64-bit words from
``numpy.random.Philox`` keyed by ``(seed, block)`` and turn them into draws with the
transforms below, which use nothing but IEEE-754 basic operations (``+ - * /``, ``sqrt``)
and ``frexp``. Those are correctly rounded everywhere, so a draw is bit-identical on every
machine and numpy release.

The transforms (version :data:`GENERATOR_VERSION`)
--------------------------------------------------
* uniform on the open interval (0, 1): ``u = ((w >> 11) + 0.5) * 2**-53``.
* standard normal: Marsaglia's polar method. Words are consumed in pairs ``(w1, w2)``;
  ``a = 2 u1 - 1``, ``b = 2 u2 - 1``, ``s = a^2 + b^2``; pairs with ``s >= 1`` are rejected;
  an accepted pair yields the two normals ``a r, b r`` with ``r = sqrt(-2 log(s) / s)``,
  appended in that order. Words are drawn in rounds of fixed size until enough pairs
  have been accepted; surplus draws are discarded.
* standard Cauchy: ``a / b`` for an accepted polar pair (the angle of a point uniform in
  the unit disk is uniform), one draw per pair.
* standard Laplace: inverse CDF ``-sign(u - 1/2) log(1 - 2 |u - 1/2|)``, one word each.
* ``log`` is :func:`stable_log`: ``frexp`` reduction and an odd series in
  ``s = (m - 1) / (m + 1)``, accurate to a few ulp.
* permutation of ``n`` items keyed by ``(seed, key)``: the stable argsort of the first
  ``n`` raw words of the generator keyed by ``(seed, key)`` (:func:`permutation`).

Changing any of this changes every model's features: bump :data:`GENERATOR_VERSION`.

Per-row random streams
----------------------
Learners that draw at every example (the OKS family's kernel draw, OMKL-GF's graph,
PKAWV-Nystroem's KORS inclusion) key the draws by the row's position in the stream, so a
row's draws do not depend on how the stream is cut into batches. Two layouts:

* :func:`row_uniforms` -- row ``t`` owns generator ``(seed, t)`` and reads its words
  ``0..n-1`` (any number of words per row). Making a numpy ``Philox`` costs ~10 us, so a
  batch's rows are drawn together: from 128 rows on, the Philox4x64-10 function that
  numpy's ``Philox`` computes is evaluated for all rows at once in numpy's uint64
  arithmetic (0.11 us a row at 4,096 rows); fewer rows re-key one generator per row
  through numpy's public ``state`` setter (~1.5 us a row). Both give a fresh generator's
  words (tested against numpy's ``Philox``), so models do not change.
* :func:`packed_uniforms` -- one word per row, ``words_per_key`` rows per generator: row
  ``g`` reads word ``g % words_per_key`` of generator ``(seed, g // words_per_key)``.

The two give different draws for the same ``(seed, row)``: each learner documents which
it uses, and changing a learner's layout would change its models.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "GENERATOR_VERSION",
    "block_bit_generator",
    "stable_log",
    "uniform_open",
    "standard_normal",
    "standard_cauchy",
    "standard_laplace",
    "permutation",
    "row_words",
    "row_uniforms",
    "packed_uniforms",
    "DISTRIBUTIONS",
]

GENERATOR_VERSION = 1
"""Version of the raw-bits-to-draws transforms; recorded in every model file."""

_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that e * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_SQRT_HALF = 0.70710678118654752440
_TWO_POW_M53 = 2.0**-53
_MASK64 = (1 << 64) - 1


def block_bit_generator(seed: int, block: int) -> np.random.Philox:
    """Return the Philox bit generator keyed by ``(seed, block)``.

    Parameters
    ----------
    seed : int
        Model seed, ``0 <= seed < 2**64``.
    block : int
        Block index, ``0 <= block < 2**64``.

    Returns
    -------
    numpy.random.Philox
        A fresh generator at counter 0; its ``random_raw`` output is stable across numpy
        releases and platforms.
    """
    seed, block = int(seed), int(block)
    if not (0 <= seed <= _MASK64 and 0 <= block <= _MASK64):
        raise ValueError(f"seed and block must be in [0, 2**64); got seed={seed}, block={block}")
    key = np.array([seed, block], dtype=np.uint64)
    return np.random.Philox(key=key)


def stable_log(x: np.ndarray) -> np.ndarray:
    """Natural logarithm of positive float64 values using only IEEE basic operations.

    Parameters
    ----------
    x : ndarray of float64
        Strictly positive, finite values.

    Returns
    -------
    ndarray of float64
        ``log(x)`` within a few ulp, bit-identical on every platform.
    """
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)  # x = m * 2**e, m in [0.5, 1)
    small = m < _SQRT_HALF
    m = np.where(small, m * 2.0, m)  # m in [sqrt(1/2), sqrt(2))
    e = (e - small).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)  # |s| <= 0.1716
    s2 = s * s
    # log(m) = 2 (s + s^3/3 + s^5/5 + ...); s2 <= 0.0295 so 12 terms reach 1e-19.
    poly = np.full_like(s2, 1.0 / 25.0)
    for k in range(11, -1, -1):
        poly = poly * s2 + 1.0 / (2 * k + 1)
    log_m = 2.0 * s * poly
    return e * _LN2_HI + (e * _LN2_LO + log_m)


def uniform_open(words: np.ndarray) -> np.ndarray:
    """Map raw uint64 words to float64 uniforms on the open interval (0, 1)."""
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_POW_M53


def _polar_pairs(bitgen: np.random.Philox, n_pairs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ``n_pairs`` accepted points ``(a, b)`` uniform in the unit disk, and ``s``."""
    a_parts, b_parts, s_parts = [], [], []
    have = 0
    # Acceptance is pi/4; draw ~30% extra per round so one round almost always suffices.
    round_pairs = max(64, int(n_pairs * 1.3) + 64)
    while have < n_pairs:
        words = bitgen.random_raw(2 * round_pairs)
        u = uniform_open(words)
        a = 2.0 * u[0::2] - 1.0
        b = 2.0 * u[1::2] - 1.0
        s = a * a + b * b
        keep = (s < 1.0) & (s > 0.0)
        a_parts.append(a[keep])
        b_parts.append(b[keep])
        s_parts.append(s[keep])
        have += int(keep.sum())
    a = np.concatenate(a_parts)[:n_pairs]
    b = np.concatenate(b_parts)[:n_pairs]
    s = np.concatenate(s_parts)[:n_pairs]
    return a, b, s


def standard_normal(bitgen: np.random.Philox, n: int) -> np.ndarray:
    """Draw ``n`` standard normal float64 values (polar method, see module docstring)."""
    n_pairs = (n + 1) // 2
    a, b, s = _polar_pairs(bitgen, n_pairs)
    r = np.sqrt(-2.0 * stable_log(s) / s)
    out = np.empty(2 * n_pairs, dtype=np.float64)
    out[0::2] = a * r
    out[1::2] = b * r
    return out[:n]


def standard_cauchy(bitgen: np.random.Philox, n: int) -> np.ndarray:
    """Draw ``n`` standard Cauchy float64 values (ratio of polar-pair coordinates)."""
    a, b, _ = _polar_pairs(bitgen, n)
    b = np.where(b == 0.0, _TWO_POW_M53, b)  # probability ~2**-53; avoid inf
    return a / b


def standard_laplace(bitgen: np.random.Philox, n: int) -> np.ndarray:
    """Draw ``n`` standard Laplace float64 values (inverse CDF on open uniforms)."""
    u = uniform_open(bitgen.random_raw(n)) - 0.5
    return -np.sign(u) * stable_log(1.0 - 2.0 * np.abs(u))


def permutation(n: int, seed: int, key: int) -> np.ndarray:
    """Random permutation of ``range(n)`` keyed by ``(seed, key)``, stable everywhere.

    The stable argsort of the first ``n`` raw 64-bit words of
    ``block_bit_generator(seed, key)``: integer sorting only, so the same on every machine
    and numpy release. Used for the papers' random permutations of a data set (key = run
    index) and for fixed-seed subsamples (a prefix of the permutation).

    Returns
    -------
    ndarray of int64, shape (n,)
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"permutation size must be >= 0, got {n}")
    words = block_bit_generator(seed, key).random_raw(n) if n else np.zeros(0, np.uint64)
    return np.argsort(words, kind="stable").astype(np.int64)


_ZERO_COUNTER = np.zeros(4, dtype=np.uint64)
_VECTOR_ROWS = 128  # from here on the vectorised Philox is faster (4,096 rows: 0.11 against 1.5 us a row)

# Philox4x64-10 (Salmon, Moraes, Dror & Shaw, SC 2011; the constants of Random123, which
# numpy's Philox implements): multipliers, and the Weyl increments of the key.
_PHILOX_M = (np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157))
_PHILOX_W = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B))
_LOW32, _SHIFT32 = np.uint64(0xFFFFFFFF), np.uint64(32)


def _mulhilo(m: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """High and low 64 bits of the 128-bit products ``m * b`` (uint64 arithmetic, 32-bit halves)."""
    m_lo, m_hi, b_lo, b_hi = m & _LOW32, m >> _SHIFT32, b & _LOW32, b >> _SHIFT32
    p1, p2 = m_lo * b_hi, m_hi * b_lo
    carry = (((m_lo * b_lo) >> _SHIFT32) + (p1 & _LOW32) + (p2 & _LOW32)) >> _SHIFT32
    return m_hi * b_hi + (p1 >> _SHIFT32) + (p2 >> _SHIFT32) + carry, m * b


def _philox_block(counter: int, k0: np.ndarray, k1: np.ndarray) -> tuple[np.ndarray, ...]:
    """The four words of Philox4x64-10 at counter ``(counter, 0, 0, 0)`` for each key ``(k0[i], k1[i])``."""
    zero = np.zeros_like(k1)
    c0, c1, c2, c3 = np.full_like(k1, counter), zero, zero, zero
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as the generator's does
        for r in range(10):
            if r:
                k0, k1 = k0 + _PHILOX_W[0], k1 + _PHILOX_W[1]
            hi0, lo0 = _mulhilo(_PHILOX_M[0], c0)
            hi1, lo1 = _mulhilo(_PHILOX_M[1], c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def row_words(seed: int, start: int, stop: int, n_words: int) -> np.ndarray:
    """Words ``0..n_words-1`` of generator ``(seed, t)`` for the rows ``t`` in ``[start, stop)``.

    Returns
    -------
    ndarray of uint64, shape (stop - start, n_words)
        Row ``t - start`` equals ``block_bit_generator(seed, t).random_raw(n_words)``: for
        :data:`_VECTOR_ROWS` rows or more, Philox4x64-10 computed over all rows at once in
        numpy's uint64 arithmetic (a fresh generator's word ``k`` is word ``k % 4`` of the
        block at counter ``k // 4 + 1``); for fewer, one numpy generator re-keyed per row
        (see the module docstring).
    """
    seed, start, stop, n_words = int(seed), int(start), int(stop), int(n_words)
    out = np.empty((max(stop - start, 0), n_words), dtype=np.uint64)
    if stop <= start:
        return out
    bitgen = block_bit_generator(seed, start)  # checks seed and the first row
    if stop - 1 > _MASK64:
        raise ValueError(f"rows must be in [0, 2**64); got up to {stop - 1}")
    if stop - start >= _VECTOR_ROWS:
        rows = np.arange(start, stop, dtype=np.uint64)
        seeds = np.full_like(rows, seed)
        for block in range((n_words + 3) // 4):
            words = _philox_block(block + 1, seeds, rows)
            for k in range(4 * block, min(4 * block + 4, n_words)):
                out[:, k] = words[k % 4]
        return out
    key = np.array([seed, 0], dtype=np.uint64)
    for r in range(stop - start):
        key[1] = start + r
        bitgen.state = {
            "bit_generator": "Philox",
            "state": {"counter": _ZERO_COUNTER, "key": key},
            "buffer": _ZERO_COUNTER,
            "buffer_pos": 4,
            "has_uint32": 0,
            "uinteger": 0,
        }
        out[r] = bitgen.random_raw(n_words)
    return out


def row_uniforms(seed: int, start: int, stop: int, n_words: int) -> np.ndarray:
    """:func:`row_words` as float64 uniforms on (0, 1) (:func:`uniform_open`), ``(stop - start, n_words)``."""
    return uniform_open(row_words(seed, start, stop, n_words))


def packed_uniforms(seed: int, start: int, stop: int, words_per_key: int = 1024) -> np.ndarray:
    """One uniform on (0, 1) per row ``g`` in ``[start, stop)``: word ``g % words_per_key`` of
    generator ``(seed, g // words_per_key)`` (float64, ``(stop - start,)``)."""
    out = np.empty(max(stop - start, 0))
    g = start
    while g < stop:
        block, offset = divmod(g, words_per_key)
        take = min(stop - g, words_per_key - offset)
        words = block_bit_generator(seed, block).random_raw(offset + take)[offset:]
        out[g - start : g - start + take] = uniform_open(words)
        g += take
    return out


DISTRIBUTIONS = {
    "normal": standard_normal,
    "cauchy": standard_cauchy,
    "laplace": standard_laplace,
}
"""Name -> sampler ``(bitgen, n) -> float64 array``."""
