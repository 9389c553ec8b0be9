"""okl_core.learners.support: amortised growth and the one cap error."""

import numpy as np
import pytest

from okl_core.learners.support import GrowingArray, SupportBuffer, SupportCap


@pytest.mark.parametrize("axis", [0, 1])
def test_growing_array_keeps_its_entries_and_doubles(axis):
    initial = np.arange(6.0).reshape(3, 2) if axis == 0 else np.arange(6.0).reshape(2, 3)
    grown = GrowingArray(initial, axis=axis)
    assert grown.capacity == 16
    capacities = set()
    for k in range(40):
        grown.append(np.full(2, 100.0 + k))
        capacities.add(grown.capacity)
    assert capacities == {16, 32, 64}
    rows = grown.view() if axis == 0 else grown.view().T
    np.testing.assert_array_equal(rows[:3], initial if axis == 0 else initial.T)
    np.testing.assert_array_equal(rows[3:, 0], 100.0 + np.arange(40))


def test_growing_columns_with_more_rows_pads_with_zeros():
    grown = GrowingArray(np.ones((2, 3)), axis=1, capacity=4, length=5)
    assert grown.data.shape == (5, 4)
    np.testing.assert_array_equal(grown.view(), np.vstack([np.ones((2, 3)), np.zeros((3, 3))]))


def test_a_support_buffer_refuses_rows_past_its_cap_naming_the_field():
    cap = SupportCap("learner", "max_rows", 4, "the support set", "raise max_rows")
    buffer = SupportBuffer(np.zeros((2, 3), np.float32), np.zeros(2), cap)
    buffer.append(np.ones(3, np.float32), 1.0)
    with pytest.raises(ValueError, match=r"^learner: the support set would exceed max_rows=4; raise max_rows$"):
        buffer.append(np.ones(3, np.float32), 1.0, others=1)
    assert len(buffer) == 3 and buffer.rows().dtype == np.float32


def test_column_storage_caches_squared_norms_and_gives_float32_rows():
    cap = SupportCap("learner", "max_rows", 100, "the support set", "")
    rows = np.array([[1.0, 2.0], [3.0, 0.0]], np.float32)
    buffer = SupportBuffer(rows, np.array([0.5, -0.5]), cap, columns=True)
    buffer.append(np.array([0.0, 4.0], np.float32), 2.0)
    np.testing.assert_array_equal(buffer.sq_norms.view(), [5.0, 9.0, 16.0])
    np.testing.assert_array_equal(buffer.rows(), [[1, 2], [3, 0], [0, 4]])
    assert buffer.rows().flags.c_contiguous and buffer.vectors.view().shape == (2, 3)


def test_column_storage_in_given_buffers_moves_and_records_what_was_filled():
    # OKS's compiled folds read the sets from one arena per kind: the buffers are views of
    # it, written in place by the fold (``filled`` records the sizes) and moved on growth.
    cap = SupportCap("learner", "max_rows", 100, "the support set", "")
    rows = np.array([[1.0, 2.0], [3.0, 0.0]], np.float32)
    arena = np.zeros(2 * 4), np.zeros(4), np.zeros(4)
    out = (arena[0].reshape(2, 4), arena[1], arena[2])
    buffer = SupportBuffer(rows, np.array([0.5, -0.5]), cap, columns=True, out=out)
    assert buffer.vectors.data.base is arena[0] and buffer.alpha.capacity == 4
    np.testing.assert_array_equal(arena[0], [1, 3, 0, 0, 2, 0, 0, 0])
    out[0][:, 2], out[1][2], out[2][2] = (0.0, 4.0), 16.0, 2.0  # a fold appends in place
    buffer.filled(3)
    np.testing.assert_array_equal(buffer.rows(), [[1, 2], [3, 0], [0, 4]])
    moved = np.zeros((2, 8)), np.zeros(8), np.zeros(8)
    buffer.move_to(*moved)
    assert buffer.vectors.data is moved[0] and buffer.alpha.capacity == 8
    np.testing.assert_array_equal(buffer.alpha.view(), [0.5, -0.5, 2.0])
    np.testing.assert_array_equal(buffer.sq_norms.view(), [5.0, 9.0, 16.0])
    with pytest.raises(ValueError, match="capacity"):
        buffer.filled(9)
    with pytest.raises(ValueError, match="cannot hold"):
        buffer.move_to(np.zeros((2, 2)), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="cannot hold"):
        SupportBuffer(rows, np.zeros(2), cap, columns=True, out=(np.zeros((3, 4)), np.zeros(4), np.zeros(4)))
