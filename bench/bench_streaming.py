"""The streaming job on Prism against the batch pipeline on the same rows, and its latency.

Runs on this machine, every job in this process, one at a time (ratios, since absolute times
are noisy here):

* batch: ``pipelines.train`` over N rows (FnApiRunner in-process, and on Prism), 2 shards;
* streaming throughput: ``pipelines.train --streaming`` on Prism (LOOPBACK) over the same
  rows as Parquet files that are all present at launch, 2 shards, a snapshot every
  ``--snapshot_batches`` batches.

Both learn the same N rows, 2 shards of N/2 rows each (the 20 file names split 10/10), in
batches of ``--batch`` rows (the streaming job cuts each file into batches: 60 batches at
100k rows against the batch job's 50), on the same Prism server (LOOPBACK, one server per
process). Both are timed the same way: from the call of ``run`` to the moment the last row
is learned (batch: the end of the last shard step in ``metrics.json``, recorded after its
last batch and before its model is serialised; streaming: the time in the record of the
snapshot cut right after the last batch, likewise), so start-up counts for both and neither
the batch job's outputs nor the streaming job's wait for ``--stop_after`` do. The streaming
figure is refused when a shard's last batches were only snapshotted at the end of the stream
(their record would carry the stop time): the files' batches per shard must be a multiple of
``--snapshot_batches``, as they are for the defaults at 100k and 500k rows. A small Prism
job runs first, so that starting the Prism server is billed to neither. ``steady`` leaves
start-up out: batch, rows over first shard start to last shard end; streaming, rows after
the first snapshot over first to last snapshot.
* latency: a streaming job into which one file lands every ``--every`` seconds; for each
  file, the delay from its rename into the watched directory to the first model version
  whose record includes it (``model-vNNNNNN.json`` -> snapshots -> their batches).

``python -m bench.bench_streaming [--rows N] [--repeat K] [--prism_location PATH]`` (the
binary of ``make runners`` by default); each job runs K times, interleaved, and the medians
are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import okl_core  # noqa: E402
from bench.common import machine_line  # noqa: E402
from okl_core.data.layout import write_dataset  # noqa: E402

PARAMS = {"n_components": 400, "sigma": 4.0, "eta": 0.05}
D = 20


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)).astype(np.float32)
    return X, np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] >= 0, 1, -1).astype(np.int32)


def _learner_args(batch, shards):
    argv = ["--learner", "fogd", "--batch_rows", str(batch), "--num_shards", str(shards)]
    for k, v in PARAMS.items():
        argv += ["--param", f"{k}={v}"]
    return argv


def _write_files(X, y, n_files, folder):
    """``n_files`` Parquet files of consecutive rows (okl layout), written elsewhere and renamed in."""
    os.makedirs(folder, exist_ok=True)
    names = []
    for k, idx in enumerate(np.array_split(np.arange(len(y)), n_files)):
        staging = folder + f".staging-{k}"
        write_dataset(staging, X[idx], y[idx], "binary", n_shards=1, row_group_rows=4096)
        name = f"part-{k:05d}.parquet"
        os.rename(os.path.join(staging, "part-00000-of-00001.parquet"), os.path.join(folder, name))
        names.append(name)
    return names


def batch(X, y, batch_rows, shards, tmp, runner_args):
    """Seconds from launch to the last row learned (end of the last shard step), and the steady rate."""
    from pipelines.train import run

    data = os.path.join(tmp, f"ds-{len(y)}")
    if not os.path.exists(data):
        write_dataset(data, X, y, "binary", n_shards=shards, row_group_rows=4096)
    out = os.path.join(tempfile.mkdtemp(dir=tmp), "out")
    steps = run(["--input", data, *_learner_args(batch_rows, shards), "--output", out, *runner_args]).metrics["timing"]["shard_steps"]
    last = max(s["end"] for s in steps)  # seconds after the launch (``run`` records it as it starts)
    return {"to_last_row": last, "steady": len(y) / (last - min(s["start"] for s in steps))}


def _records(output):
    folder = os.path.join(output, "snapshots")
    out = []
    for run_dir in sorted(os.listdir(folder)):
        for name in sorted(os.listdir(os.path.join(folder, run_dir))):
            with open(os.path.join(folder, run_dir, name)) as f:
                out.append(json.load(f))
    return out


def streaming(X, y, batch_rows, shards, snapshot_batches, tmp, prism, n_files=20):
    """Throughput of a streaming job over files that are all there at launch."""
    from pipelines.train import run

    tmp = tempfile.mkdtemp(dir=tmp)
    watched, output = os.path.join(tmp, "in"), os.path.join(tmp, "stream-out")
    _write_files(X, y, n_files, watched)
    stop_after = 5 + len(y) / 50_000  # long enough to learn everything at 50k rows/s after a 5 s start (not timed)
    argv = ["--streaming", "--input", os.path.join(watched, "*.parquet"), *_learner_args(batch_rows, shards),
            "--snapshot_batches", str(snapshot_batches), "--poll_seconds", "1", "--stop_after", str(stop_after),
            "--output", output, "--runner=PrismRunner", f"--prism_location={prism}"]
    began = time.time()
    reads = run(argv).counters.get("shard_state_reads", 0)
    records = _records(output)
    learned = sum(b["rows"] for r in records for b in r["batches"])
    assert learned == len(y), (learned, len(y))
    short = [(r["shard"], r["interval"], len(r["batches"])) for r in records if len(r["batches"]) != snapshot_batches]
    if short:  # cut when the stream ended: its time is the stop, not when the rows were learned
        sys.exit(f"streaming: snapshots (shard, interval, batches) {short} were not cut after {snapshot_batches} batches; "
                 f"pick --rows or --snapshot_batches so that each shard's batches are a multiple of it")
    first = min(r["time"] for r in records)  # end of the first snapshot interval
    last = max(r["time"] for r in records)
    first_rows = sum(b["rows"] for r in records if r["time"] == first for b in r["batches"])
    return {"steady": (learned - first_rows) / max(last - first, 1e-9), "to_last_row": last - began, "state_reads": reads}


def latency(batch_rows, shards, snapshot_batches, tmp, prism, every, n_files, poll, merge):
    """Delay from a file's landing to the first version that includes it."""
    from pipelines.train import run

    watched, staging, output = os.path.join(tmp, "lat-in"), os.path.join(tmp, "lat-staging"), os.path.join(tmp, "lat-out")
    os.makedirs(watched)
    X, y = _data(n_files * 2 * batch_rows, seed=1)
    first = _write_files(X[: 2 * batch_rows], y[: 2 * batch_rows], 1, staging + "-0")
    os.rename(os.path.join(staging + "-0", first[0]), os.path.join(watched, "f-00000.parquet"))
    landed = {}

    def drop():
        time.sleep(5)  # Prism's start-up
        for k in range(1, n_files):
            rows = slice(k * 2 * batch_rows, (k + 1) * 2 * batch_rows)
            (name,) = _write_files(X[rows], y[rows], 1, f"{staging}-{k}")
            target = f"f-{k:05d}.parquet"
            os.rename(os.path.join(f"{staging}-{k}", name), os.path.join(watched, target))
            landed[target] = time.time()
            time.sleep(every)

    dropper = threading.Thread(target=drop, daemon=True)
    dropper.start()
    argv = ["--streaming", "--input", os.path.join(watched, "*.parquet"), *_learner_args(batch_rows, shards),
            "--snapshot_batches", str(snapshot_batches), "--poll_seconds", str(poll), "--merge_seconds", str(merge),
            "--stop_after", str(5 + n_files * every + 5), "--output", output, "--runner=PrismRunner", f"--prism_location={prism}"]
    run(argv)
    dropper.join()
    snapshots = {(r["shard"], r["interval"]): r for r in _records(output)}
    included = {}
    for version, path in okl_core.model_versions(output):
        with open(path[: -len(".npz")] + ".json") as f:
            record = json.load(f)
        for shard, interval in record["snapshots"].items():
            for k in range(int(interval) + 1):
                for b in snapshots[(int(shard), k)]["batches"]:
                    included.setdefault(os.path.basename(b["file"]), record["time"])
    return [included[name] - t for name, t in landed.items() if name in included]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--snapshot_batches", type=int, default=5)
    parser.add_argument("--every", type=float, default=2.0, help="latency run: seconds between landing files")
    parser.add_argument("--files", type=int, default=10, help="latency run: files landed (0: no latency run)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each job, interleaved (medians and per-round ratios printed)")
    parser.add_argument("--prism_location")
    args = parser.parse_args()
    prism = args.prism_location
    if prism is None:
        from pipelines.local_runners import prism_binary

        prism = prism_binary()
    if not prism:
        sys.exit("no Prism binary: run `make runners` or pass --prism_location")
    X, y = _data(args.rows)
    prism_args = ["--runner=PrismRunner", f"--prism_location={prism}", "--environment_type=LOOPBACK"]
    with tempfile.TemporaryDirectory() as tmp:
        batch(*_data(4096, seed=2), args.batch, args.shards, tmp, prism_args)  # starts the Prism server
        runs: dict[str, list[dict]] = {"in-process": [], "prism": [], "stream": []}
        for _ in range(args.repeat):  # interleaved, so that a burst of other jobs hits every kind alike
            runs["in-process"].append(batch(X, y, args.batch, args.shards, tmp, ["--runner=DirectRunner"]))
            runs["prism"].append(batch(X, y, args.batch, args.shards, tmp, prism_args))
            runs["stream"].append(streaming(X, y, args.batch, args.shards, args.snapshot_batches, tmp, prism))
        delays = latency(args.batch, args.shards, 1, tmp, prism, args.every, args.files, poll=1.0, merge=1.0) if args.files else []
    n = args.rows
    print(f"rows {n}, d {D}, batch {args.batch}, shards {args.shards}, fogd D={PARAMS['n_components']}; Prism: LOOPBACK, server started "
          f"before; launch to last row learned, and steady (start-up left out); median of {args.repeat} interleaved runs\n{machine_line()}")
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("to_last_row", "steady")} for k, v in runs.items()}
    for name, key in (("batch pipeline, in-process FnApiRunner", "in-process"), ("batch pipeline, Prism", "prism"), ("streaming, Prism", "stream")):
        t = med[key]
        print(f"{name:40s} {n / t['to_last_row']:9.0f} rows/s ({t['to_last_row']:.2f} s)   steady {t['steady']:9.0f} rows/s")
    rounds = [p["to_last_row"] / s["to_last_row"] for p, s in zip(runs["prism"], runs["stream"])]
    print(f"streaming / batch on Prism: {med['prism']['to_last_row'] / med['stream']['to_last_row']:.2f} x launch to last row "
          f"(per round {min(rounds):.2f}-{max(rounds):.2f}), {med['stream']['steady'] / med['prism']['steady']:.2f} x steady; / batch in-process: "
          f"{med['in-process']['to_last_row'] / med['stream']['to_last_row']:.2f} x, {med['stream']['steady'] / med['in-process']['steady']:.2f} x steady "
          f"(snapshot every {args.snapshot_batches} batches; shard states read back from Beam state: {sum(r['state_reads'] for r in runs['stream'])})")
    if delays:
        print(f"latency, file landed -> first version including it (poll 1 s, merge window 1 s, snapshot every batch): "
              f"median {statistics.median(delays):.2f} s, max {max(delays):.2f} s over {len(delays)} files")


if __name__ == "__main__":
    main()
