"""Benchmark the data preparation: MNIST-8M generation and LIBSVM conversion.

1. ``prepare mnist8m`` (the Beam pipeline, DirectRunner in-process, one worker) at several
   row counts, each in a fresh child process: rows/s per core (rows / CPU seconds of the
   process, so other load on the machine does not count), wall rows/s, and peak resident
   memory, which must not grow with the row count. Reference: the 5,000 rows/s per core
   target.
2. LIBSVM: MB/s of okl's in-memory reader and of the full conversion to Parquet (default
   two passes; one pass with ``n_features`` and ``classes`` given), against
   ``sklearn.datasets.load_svmlight_file`` reading the same file in the same process.

Usage: ``python -m bench.bench_data [--rows 100000,1000000] [--skip-mnist8m] [--skip-libsvm]``
Base digits: the first 8,000 MNIST test digits from ../shared/data (random digits if absent).
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.common import SHARED_DATA, best_of, machine_line  # noqa: E402

from okl_core.data.idx import read_idx_images  # noqa: E402

SHARED = str(SHARED_DATA)
TARGET_ROWS_PER_CORE = 5000


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _mnist_files(tmp) -> tuple[str, str, bool]:
    images = os.path.join(SHARED, "mnist", "t10k-images-idx3-ubyte.gz")
    labels = os.path.join(SHARED, "mnist", "t10k-labels-idx1-ubyte.gz")
    if os.path.exists(images) and os.path.exists(labels):
        return images, labels, True
    from tests.data_files import digits, write_idx

    raw, y = digits(8000, seed=0)
    return write_idx(os.path.join(tmp, "img.gz"), raw, True), write_idx(os.path.join(tmp, "lab.gz"), y, True), False


def child_mnist8m(rows: int, out: str, images: str, labels: str) -> None:
    """Run in a fresh process: generate ``rows`` rows, print JSON measurements."""
    from pipelines import prepare

    wall, cpu = time.perf_counter(), _cpu_seconds()
    prepare.run(["mnist8m", "--images", images, "--labels", labels, "--base_rows", "0:8000", "--rows", str(rows), "--quiet", "--output", out])
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    print(json.dumps({"rows": rows, "wall": wall, "cpu": cpu, "peak_mb": _peak_mb()}))


def _peak_mb() -> float:
    """Peak resident memory of this process. Linux: VmHWM (ru_maxrss survives fork + exec,
    so it could report the parent's peak)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_mnist8m(row_counts) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        images, labels, real = _mnist_files(tmp)
        print(f"== mnist8m generation (base: first 8,000 {'MNIST test digits' if real else 'random digits'}; DirectRunner, 1 worker)")
        print(f"{'rows':>10} {'wall s':>8} {'cpu s':>8} {'rows/s wall':>12} {'rows/s/core':>12} {'x target':>9} {'peak MB':>8}")
        for rows in row_counts:
            out = os.path.join(tmp, f"m{rows}")
            result = subprocess.run(
                [sys.executable, "-m", "bench.bench_data", "--child-mnist8m", str(rows), out, images, labels],
                capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
            )
            if result.returncode != 0:
                raise RuntimeError(result.stderr[-2000:])
            m = json.loads(result.stdout.strip().splitlines()[-1])
            per_core = m["rows"] / m["cpu"]
            print(f"{m['rows']:>10,} {m['wall']:>8.1f} {m['cpu']:>8.1f} {m['rows'] / m['wall']:>12,.0f} {per_core:>12,.0f} {per_core / TARGET_ROWS_PER_CORE:>9.2f} {m['peak_mb']:>8.0f}")
            size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
            print(f"{'':>10} output {size / 1e6:,.0f} MB ({size / m['rows']:,.0f} bytes/row)")


def _mnist_like_libsvm(tmp) -> str | None:
    """The MNIST test digits as LIBSVM text with 0-255 values (like the mnist8m file), 3x."""
    images = os.path.join(SHARED, "mnist", "t10k-images-idx3-ubyte.gz")
    labels = os.path.join(SHARED, "mnist", "t10k-labels-idx1-ubyte.gz")
    if not os.path.exists(images):
        return None
    X, y = read_idx_images(images, labels)
    X = X.reshape(len(X), -1)
    lines = []
    for row, label in zip(X, y):
        nz = np.flatnonzero(row)
        lines.append(f"{label} " + " ".join(f"{j + 1}:{row[j]}" for j in nz))
    path = os.path.join(tmp, "mnist-like.svm")
    with open(path, "w") as f:
        for _ in range(3):
            f.write("\n".join(lines) + "\n")
    return path


def bench_libsvm() -> None:
    from sklearn.datasets import load_svmlight_file

    from okl_core.data.libsvm import convert_libsvm, read_libsvm

    with tempfile.TemporaryDirectory() as tmp:
        files = []
        a9a = os.path.join(SHARED, "a9a", "a9a")
        if os.path.exists(a9a):
            files.append(("a9a", a9a, 123, (-1, 1)))
        mnist_like = _mnist_like_libsvm(tmp)
        if mnist_like:
            files.append(("mnist-like (30k x 784, 0-255)", mnist_like, 784, tuple(range(10))))
            with open(mnist_like, "rb") as f, bz2.open(mnist_like + ".bz2", "wb") as g:
                g.write(f.read())
            files.append(("mnist-like .bz2", mnist_like + ".bz2", 784, tuple(range(10))))
        if not files:
            print("== libsvm: no data (../shared/data missing)")
            return
        print("== libsvm conversion (MB/s of the input file; best of 2; sklearn = load_svmlight_file, CSR in memory)")
        print(f"{'file':<30} {'MB':>6} {'sklearn':>8} {'okl read':>9} {'convert':>8} {'1 pass':>7} {'read/sk':>8} {'conv/sk':>8}")
        for label, path, d, classes in files:
            mb = os.path.getsize(path) / 1e6
            sk = best_of(lambda: load_svmlight_file(path, n_features=d), 2)
            ours = best_of(lambda: read_libsvm(path, n_features=d), 2)
            conv = best_of(lambda: convert_libsvm(path, os.path.join(tmp, "out"), overwrite=True), 2)
            single = best_of(lambda: convert_libsvm(path, os.path.join(tmp, "out"), n_features=d, classes=classes, overwrite=True), 2)
            print(f"{label:<30} {mb:>6.1f} {mb / sk:>8.1f} {mb / ours:>9.1f} {mb / conv:>8.1f} {mb / single:>7.1f} {sk / ours:>8.2f} {sk / conv:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000", help="mnist8m row counts, comma separated")
    parser.add_argument("--skip-mnist8m", action="store_true")
    parser.add_argument("--skip-libsvm", action="store_true")
    parser.add_argument("--child-mnist8m", nargs=4, metavar=("ROWS", "OUT", "IMAGES", "LABELS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_mnist8m:
        rows, out, images, labels = args.child_mnist8m
        child_mnist8m(int(rows), out, images, labels)
        return
    print(f"machine: {machine_line()}")
    if not args.skip_libsvm:
        bench_libsvm()
    if not args.skip_mnist8m:
        bench_mnist8m([int(r) for r in args.rows.split(",")])


if __name__ == "__main__":
    main()
