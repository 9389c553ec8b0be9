"""The real-data jobs whose model bytes must agree on every runner (tests/pipelines/test_same_bytes.py
on the in-process, multi-process, portable and Prism runners; tests/pipelines/test_flink.py on Flink).

MNIST-sized matrices (784 inputs, 2 x 800 features, 4,096-row batches) are large enough for
OpenBLAS to use threads, which is what made in-process and worker-process models differ.
``rf_oks_pp`` and ``fogd`` are binary learners, so they run on a9a only.
"""

import os
import subprocess

from tests.conftest import shared_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = {
    "a9a-fogd": ("a9a", ["--learner", "fogd", "--sigma", "4", "--num_shards", "4", "--rounds", "2"]),
    "a9a-dsg": ("a9a", ["--learner", "dsg", "--sigma", "4", "--param", "block_size=256", "--param", "batch_size=1024",
                        "--param", "theta=1000", "--param", "step_offset=3000", "--num_shards", "2", "--rounds", "2"]),
    "a9a-rf_oks_pp": ("a9a", ["--learner", "rf_oks_pp", "--num_shards", "2"]),
    "mnist-mfogd": ("mnist", ["--learner", "mfogd", "--param", "n_components=800", "--sigma", "8", "--eta", "0.005",
                              "--num_shards", "2", "--rounds", "2"]),
    "mnist-dsg": ("mnist", ["--learner", "dsg", "--param", "loss=softmax", "--sigma", "8", "--param", "block_size=512",
                            "--param", "batch_size=1024", "--param", "theta=10", "--num_shards", "2"]),
}


def prepare(python: str, kind: str, root, a9a_rows: tuple[int, int] | None = None) -> list[str]:
    """Prepare the case's data set under ``root`` with ``python`` (once); returns ``--input``/``--test`` flags.

    ``a9a_rows``: (training, test) rows, a9a's first ones, instead of all of them.
    """
    out = os.path.join(str(root), kind)
    if kind == "a9a":
        source = shared_data("a9a")
        train, test, width = str(source / "a9a"), str(source / "a9a.t"), []
        if a9a_rows is not None:  # the first rows may not reach the last feature
            train, test, width = _head(train, a9a_rows[0], root), _head(test, a9a_rows[1], root), ["--n_features", "123"]
        steps = [["libsvm", train, *width, "--output", out], ["libsvm", test, "--output", out + "-test", "--like", out]]
    else:
        source = shared_data("mnist")
        steps = [["mnist", "--images", str(source / "t10k-images-idx3-ubyte.gz"), "--labels", str(source / "t10k-labels-idx1-ubyte.gz"), "--output", out]]
    if not os.path.exists(out):
        for args in steps:
            proc = subprocess.run([python, "-m", "pipelines.prepare", *args, "--quiet"], cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
    return ["--input", out, *(["--test", out + "-test"] if kind == "a9a" else [])]


def _head(path: str, rows: int, root) -> str:
    """The first ``rows`` lines of the text file ``path``, copied under ``root``."""
    cut = os.path.join(str(root), os.path.basename(path) + ".head")
    with open(path) as f, open(cut, "w") as out:
        out.writelines(line for _, line in zip(range(rows), f))
    return cut
