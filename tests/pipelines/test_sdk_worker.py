"""Local multi-process workers forked from okl's preloaded server (pipelines/sdk_worker.py)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pipelines import sdk_worker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MULTI = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]

pytestmark = pytest.mark.skipif(not sdk_worker.can_fork(), reason="workers are forked on Linux only")


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _thread_names(pid: int) -> list[str]:
    names = []
    for task in sorted(os.listdir(f"/proc/{pid}/task")):
        with open(f"/proc/{pid}/task/{task}/comm") as f:
            names.append(f.read().strip())
    return names


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _report_worker(_, into):
    """In a worker: its pid, parent, BLAS threads and whether Beam was imported before the harness."""
    import threadpoolctl

    blas = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    record = {"pid": os.getpid(), "parent": os.getppid(), "blas": blas, "env": os.environ.get("OPENBLAS_NUM_THREADS")}
    with open(os.path.join(into, f"{os.getpid()}.json"), "w") as f:
        json.dump(record, f)


def _run_reporting_pipeline(into):
    import apache_beam as beam

    from pipelines.common import make_pipeline, pipeline_options

    with make_pipeline(pipeline_options(MULTI)) as p:
        p | beam.Create(list(range(8))) | beam.Map(_report_worker, str(into))
    return [json.loads(f.read_text()) for f in into.glob("*.json")]


def test_workers_are_forked_from_a_single_threaded_server(tmp_path):
    """Workers are the server's children; the server holds one thread whenever it forks."""
    seen = _run_reporting_pipeline(tmp_path)
    server = sdk_worker._SERVER["process"].pid
    assert seen and {w["parent"] for w in seen} == {server}
    assert all(w["pid"] != os.getpid() for w in seen)
    # Preloaded Beam, grpc, numpy, okl start no thread; pyarrow's jemalloc starts its
    # background thread, which jemalloc's own fork handlers make safe (stopped in children).
    main, *others = _thread_names(server)
    assert set(others) <= {"jemalloc_bg_thd"}, others
    assert _parent_pid(server) == os.getpid()


def test_a_worker_gets_the_blas_threads_the_environment_asks_for(tmp_path, monkeypatch):
    """The server loads BLAS with one thread; a worker raises it to what the launcher's environment says."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    seen = _run_reporting_pipeline(tmp_path)
    assert seen and all(w["env"] == "2" and w["blas"] and set(w["blas"]) == {2} for w in seen), seen


def _touch(name):
    open(name, "w").close()  # relative: in the worker's working directory


def test_workers_run_where_the_launcher_is_now(tmp_path, monkeypatch):
    """A server started in one directory forks workers that work in the launcher's current one."""
    import apache_beam as beam

    from pipelines.common import make_pipeline, pipeline_options

    sdk_worker.start_server()
    monkeypatch.chdir(tmp_path)
    with make_pipeline(pipeline_options(MULTI)) as p:
        p | beam.Create(["seen-1", "seen-2"]) | beam.Map(_touch)
    assert sorted(f.name for f in tmp_path.glob("seen-*")) == ["seen-1", "seen-2"]


def test_workers_do_not_rerun_the_launching_script(tmp_path):
    """A script that runs a pipeline at top level (no `if __name__ == "__main__"`) runs it once."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        import apache_beam as beam
        from pipelines.common import make_pipeline, pipeline_options
        print("script body ran", flush=True)
        with make_pipeline(pipeline_options({MULTI!r})) as p:
            # One write per line: with PYTHONUNBUFFERED, print's pieces are separate writes
            # that two workers could interleave.
            p | beam.Create([1, 2, 3]) | beam.Map(lambda x: sys.stdout.write(f"worker saw {{x}}\\n"))
    """))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("script body ran") == 1
    # The workers print on the launcher's stdout, as Beam's own worker processes do.
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("worker saw")) == ["worker saw 1", "worker saw 2", "worker saw 3"], (proc.stdout, proc.stderr)


def test_server_and_workers_end_with_the_launcher(tmp_path):
    """Killing the launcher mid-job ends its workers and its fork server: nothing is left running."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import os, time
        import apache_beam as beam
        from pipelines.common import make_pipeline, pipeline_options
        from pipelines import sdk_worker

        def hang(x):
            import os, time  # Beam 2.62 pickles with dill: a __main__ function arrives without its imports
            open(os.path.join({str(tmp_path)!r}, f"worker-{{os.getpid()}}"), "w").close()
            time.sleep(300)

        if __name__ == "__main__":
            sdk_worker.start_server()
            open(os.path.join({str(tmp_path)!r}, f"server-{{sdk_worker._SERVER['process'].pid}}"), "w").close()
            with make_pipeline(pipeline_options({MULTI!r})) as p:
                p | beam.Create([1, 2]) | beam.Reshuffle() | beam.Map(hang)
    """))
    launcher = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not list(tmp_path.glob("worker-*")) and time.time() < deadline:
            time.sleep(0.2)
        workers = [int(f.name.split("-")[1]) for f in tmp_path.glob("worker-*")]
        (server,) = [int(f.name.split("-")[1]) for f in tmp_path.glob("server-*")]
        assert workers and all(_alive(pid) for pid in workers + [server])
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        deadline = time.time() + 30
        while any(_alive(pid) for pid in workers + [server]) and time.time() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in workers + [server] if _alive(pid)]
    finally:
        launcher.kill()


@pytest.mark.slow
def test_a_long_running_worker_keeps_its_log_channel_quietly(tmp_path):
    """A worker busy for over a minute: its logging stream's keep-alive pings are accepted (no GOAWAY on stderr)."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import time
        import apache_beam as beam
        from pipelines.common import make_pipeline, pipeline_options
        with make_pipeline(pipeline_options({MULTI!r})) as p:
            p | beam.Create([1]) | beam.Map(lambda x: time.sleep(100))
    """))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "too_many_pings" not in proc.stderr and "Logging client failed" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_a_worker_stuck_at_exit_is_ended_and_the_job_completes(tmp_path):
    """A DoFn whose teardown never returns holds its worker after the work is done: the run still ends."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        import time
        import apache_beam as beam
        from pipelines import common

        class StuckAtTeardown(beam.DoFn):
            def process(self, x):
                yield x * 2

            def teardown(self):
                time.sleep(3600)

        common.WORKER_EXIT_SECONDS = 5
        with common.make_pipeline(common.pipeline_options({MULTI!r})) as p:
            p | beam.Create([1, 2, 3]) | beam.ParDo(StuckAtTeardown()) | beam.Map(lambda x: sys.stdout.write(f"doubled {{x}}\\n"))
    """))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("doubled")) == ["doubled 2", "doubled 4", "doubled 6"]
    assert "did not exit 5 s after its work was done: ended" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_an_unused_server_is_stopped_without_waiting_for_its_imports():
    """A launcher that never asked for a worker (a usage error, --help) does not wait for the server at exit."""
    sdk_worker._stop_server()
    sdk_worker.start_server()
    server = sdk_worker._SERVER["process"]
    sdk_worker._stop_server()
    assert server.returncode == -signal.SIGKILL and not sdk_worker._SERVER


def test_cheap_look_at_the_command_line():
    assert sdk_worker.multi_processing_requested(["--direct_running_mode=multi_processing"])
    assert sdk_worker.multi_processing_requested(["--input", "x", "--direct_running_mode", "multi_processing", "--runner=DirectRunner"])
    assert not sdk_worker.multi_processing_requested(["--direct_running_mode=in_memory"])
    assert not sdk_worker.multi_processing_requested(["--direct_running_mode=multi_processing", "--runner=DataflowRunner"])
    assert not sdk_worker.multi_processing_requested(["--direct_running_mode=multi_processing", "--streaming"])
