"""Heartbeat files: a step's rows written throttled and atomically, read back by name."""

import os
import time

import pytest

from okl_core.heartbeat import Heartbeat, read_heartbeats


def test_heartbeats_are_throttled_and_read_back(tmp_path):
    beat = Heartbeat(str(tmp_path), "shard-3-r0", interval=60.0)
    beat.beat(5)
    beat.beat(9)  # within the interval: not written
    assert read_heartbeats(str(tmp_path))["shard-3-r0"]["rows"] == 5
    beat.beat(12, done=True)  # always written
    assert read_heartbeats(str(tmp_path))["shard-3-r0"] == {"rows": 12, "seconds": pytest.approx(time.time() - beat.started, abs=1), "done": True}
    Heartbeat(None, "x").beat(3, done=True)  # no folder: nothing happens
    assert os.listdir(tmp_path) == ["shard-3-r0.json"]
