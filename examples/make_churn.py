"""Write the example CSVs of the README: ``churn_train.csv`` (2,000 customers) and
``churn_test.csv`` (500 more), a made-up churn table with an id column (``customer``), a text
column (``contract``), a few missing charges and text labels (``churn``: ``no`` / ``yes``).

Run from the repository root: ``python examples/make_churn.py`` (the files are committed; this
says how they were made). The label is a noisy non-linear function of the columns, so that a
kernel learner has something to learn beyond a linear rule.
"""

import csv
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
CONTRACT_EFFECT = {"month": 0.8, "year": -0.6, "two_year": -1.5}


def write(path: pathlib.Path, rng: np.random.Generator, start: int, n: int) -> None:
    """Write ``n`` customers numbered from ``start + 1`` to ``path``."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["customer", "tenure", "monthly_charges", "contract", "support_calls", "churn"])
        for i in range(start, start + n):
            tenure = int(rng.integers(1, 73))
            charges = round(float(rng.uniform(20, 120)), 2)
            contract = str(rng.choice(list(CONTRACT_EFFECT), p=[0.5, 0.3, 0.2]))
            calls = int(rng.poisson(1.5))
            z = (1.2 * (charges - 70) / 30 - 1.5 * np.tanh((tenure - 24) / 12) + CONTRACT_EFFECT[contract]
                 + 0.5 * (calls >= 3) * (charges > 60) + 0.6 * np.sin(tenure / 6) + rng.normal(0, 0.6))
            row = [f"c{i + 1}", tenure, charges, contract, calls, "yes" if z > 0 else "no"]
            if rng.random() < 0.02:  # a missing value now and then, as real exports have
                row[2] = ""
            out.writerow(row)


if __name__ == "__main__":
    generator = np.random.default_rng(7)
    write(HERE / "churn_train.csv", generator, 0, 2000)
    write(HERE / "churn_test.csv", generator, 2000, 500)
