"""The online-error curves of a training run: points within batches, one job-wide x axis."""

import numpy as np
import pytest


from okl_core.reporting import CURVE_POINTS, batch_curve, job_curves


def test_batch_curve_is_the_cumulative_sum_of_each_prefix():
    rng = np.random.default_rng(0)
    scores, y = rng.normal(size=100), rng.choice([-1, 1], size=100)
    curve = batch_curve("binary", scores, y)
    wrong = np.sign(scores) != y
    assert curve == [[100 * k // 8, int(wrong[: 100 * k // 8].sum())] for k in range(1, 9)]
    regression = batch_curve("regression", scores, scores + 0.5)
    assert [n for n, _ in regression] == [12, 25, 37, 50, 62, 75, 87, 100]
    assert regression[-1][1] == pytest.approx(25.0) and regression[0][1] == pytest.approx(12 * 0.25)
    # Fewer rows than points: rows repeat, the last point is still the whole batch.
    assert batch_curve("binary", scores[:3], y[:3]) == [[3 * k // 8, int(wrong[: 3 * k // 8].sum())] for k in range(1, 9)]


def _batch(shard, seq, rows, mistakes, curve=True, round=0):
    record = {"shard": shard, "round": round, "seq": seq, "rows": rows, "mistakes": mistakes}
    if curve:  # mistakes spread evenly within the batch
        record["curve"] = [[rows * k // 4, mistakes * k / 4] for k in range(1, 5)]
    return record


def test_job_curves_put_shards_and_merged_on_job_wide_rows():
    # Shard 0: 400 rows in batches of 300 and 100; shard 1: 200 rows in one batch.
    batches = [_batch(0, 0, 300, 30), _batch(0, 1, 100, 20), _batch(1, 0, 200, 40)]
    curves = job_curves(batches, "binary")
    x0, y0 = curves.shards[0]
    x1, y1 = curves.shards[1]
    # Each shard at fraction f of its rows is drawn at f * 600, the job's rows at that time.
    assert x0 == pytest.approx([600 * n / 400 for n in (75, 150, 225, 300, 325, 350, 375, 400)])
    assert x1 == pytest.approx([600 * n / 200 for n in (50, 100, 150, 200)])
    assert y0[-1] == pytest.approx(50 / 400) and y1[-1] == pytest.approx(40 / 200)
    # Every curve ends at the job's 600 rows; the merged curve at the job's mistake rate.
    assert x0[-1] == x1[-1] == curves.x[-1] == 600
    assert curves.merged[-1] == pytest.approx(90 / 600)
    # At half the job (f = 1/2) shard 0 is at row 200 (20 mistakes), shard 1 at row 100 (20).
    assert curves.merged[curves.x.index(300)] == pytest.approx(40 / 300)
    assert curves.x == sorted(curves.x) and len(set(curves.x)) == len(curves.x)


def test_job_curves_over_rounds_and_older_records():
    batches = [_batch(s, 0, 100, 10 * (s + 1), curve=False, round=r) for r in (0, 1) for s in (0, 1)]
    curves = job_curves(batches, "binary")
    assert curves.x == [200, 400] and curves.merged == pytest.approx([30 / 200, 60 / 400])  # one point per round without points
    assert curves.shards[0] == ([200, 400], pytest.approx([0.1, 0.1]))
    with pytest.raises(ValueError, match="'rows' and 'mistakes'"):
        job_curves([{"shard": 0, "rows": 3}], "binary")


def test_merged_points_are_bounded_for_long_runs():
    batches = [_batch(s, q, 8, 1) for s in range(3) for q in range(400)]
    curves = job_curves(batches, "binary")
    assert len(curves.x) <= 2000 and curves.x[-1] == 3 * 400 * 8
    assert CURVE_POINTS == 8

