"""First-use compilation of the compiled folds, per learner family: cold (empty cache) and warm.

``python -m bench.compile`` runs, for each family's learner (``--learners``), two fresh
processes that share a new, empty compile cache (``NUMBA_CACHE_DIR``): the first compiles
what the learner's first update runs (cold), the second loads it from the cache (warm). Each
process learns one batch of ``--rows`` rows of ``--inputs`` features (a9a's width by default)
and reports the seconds of the import of okl_core, of building the learner and of its first
update (numba's import, compilation or cache loading included), and how many functions numba
compiled. A third, already warm, update of the same batch shows the learning itself.

Example::

    python -m bench.compile
    python -m bench.compile --learners oks,rbp --rows 2000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

FAMILY_LEARNERS = {
    "fogd": "fogd", "nogd": "nogd", "kernel_ogd": "kernel_ogd", "budget": "rbp",
    "dsg": "dsg", "pkawv": "pkawv_nystrom", "omkl": "raker", "oks": "oks",
}
"""Family (module of okl_core.learners) -> the learner whose first run is measured."""

_EXTRA = {"oks": {"horizon": 10_000}, "ioks": {"horizon": 10_000}, "oks_pp": {"horizon": 10_000}}
"""Parameters a learner needs besides ``n_inputs`` (the rest keep their defaults)."""

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import okl_core
from numba.core import event  # counted below; numba is imported by okl_core anyway on a compiled update
t1 = time.perf_counter()
name, rows, inputs, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
learner = okl_core.make_learner(name, n_inputs=inputs, **extra)
rng = np.random.default_rng(0)
X = (rng.random((rows, inputs)) < 0.11).astype(np.float32)  # a9a-like 0/1 rows
y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0) if learner.task == "binary" else X[:, :3].sum(axis=1)
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__name__)
    def on_end(self, ev):
        pass
t2 = time.perf_counter()
with event.install_listener("numba:compile", Count()):
    state, _ = learner.update(learner.init(), X, y)
t3 = time.perf_counter()
learner.update(learner.init(), X, y)
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, "first_update_s": t3 - t2, "warm_update_s": t4 - t3,
                  "compiled": len(compiled)}))
"""


def measure(name: str, rows: int, inputs: int, cache_dir: str) -> dict:
    """One fresh process's figures for learner ``name`` with the compile cache at ``cache_dir``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, name, str(rows), str(inputs), json.dumps(_EXTRA.get(name, {}))],
                         env=env, capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["process_s"] = time.perf_counter() - started
    return figures


def main(argv: list[str] | None = None) -> None:
    """Print the table (and ``--json`` the figures)."""
    parser = argparse.ArgumentParser(prog="python -m bench.compile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", default=",".join(FAMILY_LEARNERS.values()), help="comma-separated learner names")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--inputs", type=int, default=123)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    results = {}
    print(f"{'learner':14s} {'cold: update s':>14s} {'compiled':>8s} {'process s':>9s} | {'warm: update s':>14s} {'compiled':>8s} {'process s':>9s} | {'learning s':>10s}")
    for name in args.learners.split(","):
        with tempfile.TemporaryDirectory(prefix="okl-bench-compile-") as cache:
            cold = measure(name, args.rows, args.inputs, cache)
            warm = measure(name, args.rows, args.inputs, cache)
        results[name] = {"cold": cold, "warm": warm}
        print(f"{name:14s} {cold['first_update_s']:14.2f} {cold['compiled']:8d} {cold['process_s']:9.2f} | "
              f"{warm['first_update_s']:14.2f} {warm['compiled']:8d} {warm['process_s']:9.2f} | {warm['warm_update_s']:10.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
