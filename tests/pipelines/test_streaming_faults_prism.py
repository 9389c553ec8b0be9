"""The cluster's streaming fault scenario on Prism, which keeps no checkpoints: okl's own restart covers a kill.

The scenario (20 files arriving while the job runs, the checks of every row learned once, no
version lost or rewritten, each dead letter once) is the one of ``test_flink_cluster.py``; a
module of its own, so that it runs beside the cluster's tests (``make test``'s workers).
"""

import os
import signal
import sys
import time

import pytest

from tests.pipelines.test_flink_cluster import check_exactly_once, launch, recovery_seconds, stream


@pytest.mark.slow
@pytest.mark.prism
def test_on_prism_a_killed_job_is_restarted_by_okl_and_learns_every_row_once(tmp_path):
    """Prism keeps no checkpoints: the job (okl, Prism and its workers) killed with -9 and started again continues
    from its newest version, and every row is learned once."""
    from pipelines.local_runners import prism_binary

    prism = prism_binary()
    if prism is None:
        pytest.skip("Prism is not built (`make runners`)")

    def kill_and_restart(job, command, info):
        time.sleep(3)
        info["at"] = time.time()
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        return launch(command)

    run = stream(tmp_path, sys.executable, ["--runner=PrismRunner", f"--prism_location={prism}"], fault=kill_and_restart)
    figures = {**check_exactly_once(run), "recovery_seconds": recovery_seconds(run)}
    print(f"streaming on Prism, the job killed and restarted: {figures}")
