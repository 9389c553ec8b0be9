"""Support sets: the stored rows of kernel expansions, grown in place and capped by config.

Kernel OGD / Perceptron, OKS / OKS++ / IOKS and PKAWV-Nystroem keep rows (support vectors,
dictionary points) whose number grows with the stream. During an update they append to a
:class:`GrowingArray` -- capacity doubles when full, so appending ``n`` rows costs
O(n) copies in all -- and check a :class:`SupportCap`, whose error (:func:`cap_error`) names
the config field that bounds the set, its value and what to do. Between updates a state
holds exactly its rows (a prefix of the buffer), as numpy arrays like any other state.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import DTypeLike

from okl_core.learners.base import CheckedConfig

__all__ = ["CapacityError", "GrowingArray", "SupportBuffer", "SupportCap", "SupportCapConfig", "cap_error"]

MIN_CAPACITY = 16


class CapacityError(ValueError):
    """A learner's state would outgrow a cap its config sets (``max_support``, ``max_rows``, ...).

    The config's limit, not bad data: the job cannot go on without a larger cap or another
    learner. Its message is one line, ``"{owner}: {what} would exceed {field}={limit}; {hint}"``
    (:func:`cap_error`), which the pipelines find in a failed job's error and print alone.
    """


def cap_error(owner: str, field: str, limit: float, what: str, hint: str) -> CapacityError:
    """The error of every cap: ``"{owner}: {what} would exceed {field}={limit}; {hint}"``."""
    return CapacityError(f"{owner}: {what} would exceed {field}={limit}; {hint}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SupportCapConfig(CheckedConfig):
    """``max_support``: the most support vectors an unbudgeted kernel learner may hold (100,000).

    An update that would exceed it raises a ValueError naming the field. Memory is about
    ``(4 d + 8) max_support`` bytes (float32 rows, float64 coefficients; ``8 C`` per row
    for multiclass).
    """

    max_support: int = 100_000


class SupportCap:
    """A bound on a support set, named by the config field that sets it.

    Parameters
    ----------
    owner : str
        The learner's name (starts the message).
    field : str
        The config field, e.g. ``'max_support'``.
    limit : int
        Its value: the most rows the set may hold.
    what : str
        What grows, e.g. ``'the support set'``.
    hint : str
        What to do about it (raise the field, another learner).
    """

    def __init__(self, owner: str, field: str, limit: int, what: str, hint: str):
        self.owner, self.field, self.limit, self.what, self.hint = owner, field, int(limit), what, hint

    def check(self, size: int, where: str = "") -> None:
        """Raise the cap error if the set would hold ``size`` rows (``where``: e.g. ``' at row 7'``)."""
        if size > self.limit:
            raise cap_error(self.owner, self.field, self.limit, self.what + where, self.hint)

    def check_held(self, size: int, whose: str = "the state's") -> None:
        """Raise a ValueError if a set handed in (a state's, a merge's) already holds more than the cap.

        A state from a learner with a larger cap, or the union of merged support sets,
        can be over it before any row is learned; the folds assume it is not.
        """
        if size > self.limit:
            raise CapacityError(f"{self.owner}: {whose} {self.what.removeprefix('the ')} holds {size} rows, more than "
                                f"{self.field}={self.limit}; {self.hint}")


class GrowingArray:
    """An array that grows along ``axis`` by appends, doubling its capacity when full.

    Parameters
    ----------
    initial : ndarray
        The first ``n`` entries along ``axis`` (copied).
    axis : {0, 1}
        The growing axis.
    dtype : dtype, optional
        Of the buffer (default: ``initial``'s).
    capacity : int, optional
        Initial capacity (default ``max(16, 2 n)``); new space is zero-filled.
    length : int, optional
        Of a 2-d array growing along axis 1: its number of rows, at least ``initial``'s
        (the rows below ``initial``'s are zeros to be filled in).
    out : ndarray, optional
        The buffer to fill instead of a new one (zero-filled, e.g. a view of a larger
        array); its capacity is its length along ``axis``.
    """

    __slots__ = ("data", "size", "axis")

    def __init__(
        self,
        initial: np.ndarray,
        axis: int = 0,
        dtype: DTypeLike | None = None,
        capacity: int | None = None,
        length: int | None = None,
        out: np.ndarray | None = None,
    ):
        self.axis = axis
        self.size = initial.shape[axis]
        capacity = max(MIN_CAPACITY, 2 * self.size) if capacity is None else max(capacity, self.size)
        shape = list(initial.shape)
        shape[axis] = capacity if out is None else out.shape[axis]
        if length is not None:
            shape[0] = max(length, initial.shape[0])
        if out is None:
            out = np.zeros(shape, dtype=initial.dtype if dtype is None else dtype)
        elif list(out.shape) != shape or out.shape[axis] < self.size:
            raise ValueError(f"a buffer of shape {out.shape} cannot hold {initial.shape} along axis {axis}")
        self.data = out
        if initial.ndim == 2 and axis == 1:
            self.data[: initial.shape[0], : self.size] = initial
        else:
            self._part(0, self.size)[...] = initial

    def _part(self, start: int, stop: int) -> np.ndarray:
        return self.data[start:stop] if self.axis == 0 else self.data[:, start:stop]

    @property
    def capacity(self) -> int:
        return self.data.shape[self.axis]

    def view(self) -> np.ndarray:
        """The ``size`` entries (a view of the buffer)."""
        return self._part(0, self.size)

    def reserve(self, n: int) -> None:
        """Make room for ``n`` more entries (doubling at least)."""
        need = self.size + n
        if need <= self.capacity:
            return
        shape = list(self.data.shape)
        shape[self.axis] = max(need, 2 * self.capacity)
        self.move_to(np.zeros(shape, dtype=self.data.dtype))

    def set_size(self, size: int) -> None:
        """Use the buffer's first ``size`` entries (written into :attr:`data` by compiled code)."""
        if not 0 <= size <= self.capacity:
            raise ValueError(f"size {size} outside the buffer's capacity {self.capacity}")
        self.size = size

    def move_to(self, data: np.ndarray) -> None:
        """Keep the entries in ``data`` from now on (``data``: zero-filled, as the buffer but for
        a capacity of at least :attr:`size`, e.g. a view of a larger array)."""
        if data.shape[self.axis] < self.size:
            raise ValueError(f"a buffer of capacity {data.shape[self.axis]} cannot hold {self.size} entries")
        (data[: self.size] if self.axis == 0 else data[:, : self.size])[...] = self.view()
        self.data = data

    def append(self, value) -> int:
        """Store ``value`` as the next entry; return its index."""
        if self.size == self.capacity:
            self.reserve(1)
        index = self.size
        if self.axis == 0:
            self.data[index] = value
        else:
            self.data[:, index] = value
        self.size = index + 1
        return index


class SupportBuffer:
    """Support vectors and their coefficients, appended together under a :class:`SupportCap`.

    Parameters
    ----------
    vectors : (m, d) ndarray
        The support vectors so far (a state's rows).
    alpha : (m,) or (m, C) ndarray
        Their coefficients.
    cap : SupportCap
        Counts this buffer's rows (with ``others``, rows held elsewhere under the same cap).
    columns : bool
        Store the vectors as float64 columns ``(d, capacity)`` with their squared norms
        cached (:func:`okl_core.kernels.row_against_buffer`, OKS's per-example path);
        otherwise as C-ordered rows of the vectors' dtype.
    capacity : int, optional
        Initial capacity (default: doubling from ``max(16, 2 m)``).
    out : tuple of ndarray, optional
        With ``columns``: the zero-filled buffers to fill instead of new ones -- columns
        ``(d, c)``, squared norms ``(c,)`` and coefficients ``(c,)`` for a capacity ``c >= m``
        (views of the arenas of :meth:`okl_core.learners.oks.storage._SupportSets.pack`).
    """

    def __init__(
        self,
        vectors: np.ndarray,
        alpha: np.ndarray,
        cap: SupportCap,
        columns: bool = False,
        capacity: int | None = None,
        out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ):
        self.cap = cap
        self.columns = columns
        cap.check_held(len(alpha))
        if columns:
            rows = vectors.astype(np.float64)
            cols, norms, coefs = (None, None, None) if out is None else out
            self.vectors = GrowingArray(rows.T, axis=1, capacity=capacity, out=cols)
            self.sq_norms = GrowingArray(np.einsum("ij,ij->i", rows, rows), capacity=capacity, out=norms)
            self.alpha = GrowingArray(alpha, capacity=capacity, out=coefs)
        else:
            if out is not None:
                raise ValueError("SupportBuffer: out= needs columns=True")
            self.vectors = GrowingArray(vectors, axis=0, capacity=capacity)
            self.alpha = GrowingArray(alpha, capacity=capacity)

    def __len__(self) -> int:
        return self.alpha.size

    def append(self, x: np.ndarray, coef, others: int = 0) -> None:
        """Add ``x`` with coefficient ``coef`` (``others``: rows held elsewhere under the cap)."""
        self.cap.check(others + len(self) + 1)
        if self.columns:
            x = x.astype(np.float64)
            self.sq_norms.append(x @ x)
        self.vectors.append(x)
        self.alpha.append(coef)

    def _parts(self) -> tuple[GrowingArray, ...]:
        return (self.vectors, self.sq_norms, self.alpha) if self.columns else (self.vectors, self.alpha)

    def move_to(self, columns: np.ndarray, sq_norms: np.ndarray, alpha: np.ndarray) -> None:
        """Keep the set in these buffers from now on (as ``out`` of the constructor)."""
        if not self.columns:
            raise ValueError("SupportBuffer.move_to needs columns=True")
        for part, data in zip(self._parts(), (columns, sq_norms, alpha)):
            part.move_to(data)

    def filled(self, n: int) -> None:
        """Record that the buffers' first ``n`` entries hold the set (a compiled fold appended
        them in place, within the capacity)."""
        for part in self._parts():
            part.set_size(n)

    def rows(self) -> np.ndarray:
        """The support vectors as C-ordered rows (a view for row storage; float32 rows otherwise)."""
        if self.columns:
            return np.ascontiguousarray(self.vectors.view().T, dtype=np.float32)
        return self.vectors.view()
