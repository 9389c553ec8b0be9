"""StreamPlan: shards, segments and batches partition the stream; locate agrees with batches."""

import numpy as np
import pytest

from okl_core.data.plan import StreamPlan


@pytest.mark.parametrize("n, k, r, b, align", [(10, 3, 1, 4, 1), (1000, 4, 3, 64, 1), (1000, 3, 2, 128, 64), (7, 7, 1, 1, 1), (5000, 2, 5, 4096, 8)])
def test_batches_partition_the_stream_in_order(n, k, r, b, align):
    plan = StreamPlan(n, k, r, b, align)
    covered = []
    for shard in range(k):
        a, z = plan.shard_bounds(shard)
        seg = [plan.segment_bounds(shard, rnd) for rnd in range(r)]
        assert seg[0][0] == a and seg[-1][1] == z
        for rnd in range(r):
            batches = plan.batches(shard, rnd)
            assert [x.seq for x in batches] == list(range(len(batches)))
            assert all(0 < x.stop - x.start <= b for x in batches)
            # Cut at the multiples of b: only a segment's first and last batches can be short.
            assert all(x.start % b == 0 for x in batches[1:])
            assert all(x.stop - x.start == b for x in batches[1:-1])
            covered.extend(range(x.start, x.stop) for x in batches)
    flat = [p for rng in covered for p in rng]
    assert sorted(flat) == list(range(n)) and len(flat) == n
    shard, rnd, seq = plan.locate(np.arange(n))
    for s in range(k):
        for q in range(r):
            for x in plan.batches(s, q):
                assert (shard[x.start : x.stop] == s).all() and (rnd[x.start : x.stop] == q).all() and (seq[x.start : x.stop] == x.seq).all()


def test_batches_line_up_with_row_groups_of_batch_rows_from_position_zero():
    """Shards start anywhere, batches end on multiples of batch_rows: each lies in one 4096-row group."""
    plan = StreamPlan(1_000_000, 2, 1, 4096)
    assert plan.shard_bounds(1) == (500_000, 1_000_000)  # shards stay equal
    first, second, *rest = plan.batches(1, 0)
    assert (first.start, first.stop, second.start, second.stop) == (500_000, 122 * 4096 + 4096, 123 * 4096, 124 * 4096)
    groups = {(x.start // 4096, (x.stop - 1) // 4096) for x in plan.batches(0, 0) + plan.batches(1, 0)}
    assert all(a == b for a, b in groups)


def test_boundaries_are_aligned_and_shards_nearly_equal():
    plan = StreamPlan(10_000, 3, 2, 512, align=256)
    starts = plan.segment_starts()
    assert (starts % 256 == 0).all()
    sizes = [np.subtract(*plan.shard_bounds(s)[::-1]) for s in range(3)]
    assert max(sizes) - min(sizes) <= 3 * 256
    assert StreamPlan(10, 3).segment_starts().tolist() == [0, 3, 6]


def test_one_shard_one_round_is_the_whole_stream():
    plan = StreamPlan(10_000, batch_rows=4096)
    assert [(x.start, x.stop) for x in plan.batches(0, 0)] == [(0, 4096), (4096, 8192), (8192, 10_000)]


def test_clear_errors():
    with pytest.raises(ValueError, match="some segments would be empty"):
        StreamPlan(5, 3, 2)
    with pytest.raises(ValueError, match="aligned to 64"):
        StreamPlan(100, 2, 1, 64, align=64)
    with pytest.raises(ValueError, match="num_shards must be an integer >= 1"):
        StreamPlan(100, 0)
    with pytest.raises(ValueError, match="positions must be in"):
        StreamPlan(10).locate([10])
