"""State size and per-snapshot time of the streaming job against the number of files it has seen.

The streaming steps of :mod:`transforms.streaming` driven directly, one file at a time, in
this process: the shard DoFn reads a small Parquet file (4 rows) and snapshots it, the
merger takes the snapshot and merges it into a version, the writer writes the version and
its record into a folder. Beam state lives in plain cells here, sized with the coders of
the DoFns' state specs, so the bytes are what a runner would store. For every file:

* the seconds of that step (read, learn, snapshot, merge, write the version);
* the bytes of the shards' and the merger's state, and of the version's record.

A stream whose state or records held every file ever seen grows with the stream's age (a
snapshot then costs more the longer the job has run); flat numbers mean a snapshot costs
what it learned. The figures are printed per block of files, and the ratios of the last
block's to the first's at the end (no assertion: tests/transforms/test_streaming_state.py
checks the sizes).

``python -m bench.bench_streaming_state [--files N] [--block B]`` (default 5000 files, blocks
of 500). Run with ``PYTHONPATH`` naming another checkout to measure its streaming steps
(those of okl before records held only what was new have no ``new_files`` state; the
script drives either).
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROWS_PER_FILE = 4
N_FEATURES = 3
PARAMS = {"n_inputs": N_FEATURES, "n_components": 8, "sigma": 1.0, "eta": 0.1, "seed": 0}


class Cell:
    """A Beam state cell, bag or timer for direct DoFn calls."""

    def __init__(self):
        self.value, self.items, self.calls = None, [], []

    def read(self):
        return self.value

    def write(self, value):
        self.value = value

    def add(self, item):
        self.items.append(item)

    def clear(self):
        self.value, self.items = None, []

    def set(self, when):
        self.calls.append(when)


class Bag(Cell):
    def read(self):
        return list(self.items)


def write_files(folder: str, n_files: int, seed: int = 0) -> list[str]:
    """``n_files`` okl Parquet files of :data:`ROWS_PER_FILE` rows each under ``folder``, in name order."""
    from okl_core.data.layout import write_dataset

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_files * ROWS_PER_FILE, N_FEATURES)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1, -1)
    write_dataset(folder, X, y, "binary", n_shards=n_files, row_group_rows=ROWS_PER_FILE, classes=[-1, 1])
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".parquet"))


def _bag_bytes(spec, items) -> int:
    return sum(len(spec.coder.encode(item)) for item in items)


def _text_bytes(cell) -> int:
    return len((cell.value or "").encode())


def drive(files: list[str], output: str, manifest_every: int | None = None):
    """Stream ``files`` one by one through the shard, merger and writer DoFns into ``output``.

    Yields ``(files seen, seconds, shard state bytes, merger state bytes, record bytes,
    record)`` per file: one snapshot and one version per file. ``manifest_every`` is passed
    to the writer where it takes one.
    """
    import json

    import okl_core
    from transforms import streaming
    from transforms.elements import StreamEvent
    from transforms.train import LearnerSpec

    spec = LearnerSpec("fogd", PARAMS)
    learner = spec.build()
    init = okl_core.model_bytes(learner, learner.init())
    zero = lambda: 0.0  # noqa: E731 -- processing time stands still: windows end when told
    typed = "new_files" in inspect.signature(streaming._MergeWindows.process).parameters  # records of what is new
    read_kw = {"root": os.path.dirname(files[0])} if "root" in inspect.signature(streaming.ReadParquetFiles).parameters else {}
    read = streaming.ReadParquetFiles(N_FEATURES, "binary", None, 1, ROWS_PER_FILE, **read_kw)
    shard = streaming._StreamShard(spec, init, 1, None, 0.0, zero, read)
    shard.setup()
    merger = streaming._MergeWindows(spec, 1e9, 1, zero, base=init, **read_kw)
    merger.setup()
    writer = streaming._WriteVersion(output, manifest_every) if typed and manifest_every else streaming._WriteVersion(output)
    model, meta, timer, end = Cell(), Cell(), Cell(), Cell()
    shard_bags = [Bag(), Bag()] if "learned" in inspect.signature(streaming._StreamShard.process).parameters else []
    newest, merge_meta, window, merge_end, new_files = Bag(), Cell(), Cell(), Cell(), Bag()
    last, carry = Cell(), Bag()
    for seen, path in enumerate(files, 1):
        began = time.perf_counter()
        snapshots = [s for s in shard.process((0, StreamEvent(path, whole_file=True)), model, meta, timer, end, *shard_bags) if isinstance(s, tuple)]
        for snapshot in snapshots:
            merger.process((0, snapshot), newest, merge_meta, window, merge_end, *([new_files] if typed else []))
        versions = list(merger.on_window_end(newest, merge_meta, *([new_files] if typed else [])))
        written = [w for v in versions for w in writer.process((0, v), last, *([carry] if typed else []))]
        seconds = time.perf_counter() - began
        shard_bytes = len(model.value or b"") + _text_bytes(meta)
        if shard_bags:
            shard_bytes += _bag_bytes(streaming._StreamShard.LEARNED, shard_bags[0].items) + _bag_bytes(streaming._StreamShard.FILES, shard_bags[1].items)
        merger_bytes = _bag_bytes(streaming._MergeWindows.NEWEST, newest.items) + _text_bytes(merge_meta)
        if typed:
            merger_bytes += _bag_bytes(streaming._MergeWindows.NEW_FILES, new_files.items) + _bag_bytes(streaming._WriteVersion.CARRY, carry.items)
        (version, path_written), = written
        record_path = path_written[: -len(".npz")] + ".json"
        with open(record_path, "rb") as f:
            record = f.read()
        yield seen, seconds, shard_bytes, merger_bytes, len(record), json.loads(record)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_streaming_state", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000, help="files streamed (default 5000)")
    parser.add_argument("--block", type=int, default=500, help="files per printed block (default 500)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(os.path.join(tmp, "in"), args.files)
        rows = [r[:5] for r in drive(files, os.path.join(tmp, "out"))]
    from transforms import streaming

    print(f"streaming steps of {os.path.dirname(os.path.dirname(os.path.abspath(streaming.__file__)))}; {args.files} files of {ROWS_PER_FILE} rows")
    print(f"{'files seen':>10} {'ms/snapshot (median)':>21} {'(mean)':>7} {'shard state B':>14} {'merger state B':>15} {'record B':>9}")
    blocks = [rows[k : k + args.block] for k in range(0, len(rows), args.block)]
    summary = []
    for block in blocks:
        line = (block[-1][0], 1e3 * statistics.median(r[1] for r in block), max(r[2] for r in block), max(r[3] for r in block), max(r[4] for r in block),
                1e3 * statistics.mean(r[1] for r in block))  # the mean counts the manifest written every so many versions
        summary.append(line)
        print(f"{line[0]:>10} {line[1]:>21.2f} {line[5]:>7.2f} {line[2]:>14} {line[3]:>15} {line[4]:>9}")
    first, final = summary[0], summary[-1]
    print(f"last block / first block: time per snapshot x{final[1] / first[1]:.2f} (median), x{final[5] / first[5]:.2f} (mean), shard state x{final[2] / first[2]:.2f}, "
          f"merger state x{final[3] / first[3]:.2f}, record x{final[4] / first[4]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
