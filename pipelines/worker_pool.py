"""Beam's Python SDK worker pool at one address: ``python -m pipelines.worker_pool HOST:PORT``.

What :mod:`pipelines.flink_cluster` starts beside each TaskManager (the EXTERNAL environment's
pool; ``apache_beam.runners.worker.worker_pool_main`` listens on every address of the machine,
so two of them cannot share a port at different loopback addresses). Run from a Python whose
apache-beam is the Flink job server's version.
"""

from __future__ import annotations

import sys

__all__ = ["serve_worker_pool"]


def serve_worker_pool(address: str) -> None:
    """Beam's SDK worker pool (``worker_pool_main``'s service) listening at ``host:port`` only, until stopped.

    ``worker_pool_main`` listens on every address of the machine; one pool per TaskManager
    on one machine needs each at its own address. The workers it starts are its children, in
    its process group.
    """
    from concurrent import futures

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

    pool = BeamFnExternalWorkerPoolServicer(use_process=True, state_cache_size=0, data_buffer_time_limit_ms=-1)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)])
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    if server.add_insecure_port(address) == 0:
        raise OSError(f"the worker pool cannot listen at {address}")
    server.start()
    print(f"worker pool listening at {address}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m pipelines.worker_pool HOST:PORT")
    serve_worker_pool(sys.argv[1])
