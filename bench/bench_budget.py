"""Per-example cost of the budget learners against the budget B (the FOGD paper's Table 1).

For each B in 50, 100, 200, 400, 800 and each learner of ``okl_core.learners.budget``, in
this one process:

1. warm up on a stream until the support set is full (B vectors), so that every timed
   example pays the budget maintenance;
2. time ``update`` over the next rows (best of 5, process CPU time) from that full state:
   microseconds per example, and the same divided by B (flat for O(B)) and by B^2 / 1000
   (flat once an O(B^2) term dominates);
3. the reference, timed the same way on the same rows: ``kernel_perceptron`` holding the
   same B support vectors and fed its own predictions as labels (so it never grows): the
   per-example cost of scoring against B vectors with okl's unbudgeted kernel learner.
   ``ratio`` = learner / reference.

The last table fits ``t(B) = c + a B + b B^2`` (least squares over the five budgets): ``c``
is the per-row work that does not depend on B (Python, ~10 us, which hides the growth in
plain ratios), ``a`` the O(B) part (the kernel row every learner computes, O(B d), and any
linear maintenance), ``b`` the O(B^2) part. ``B^2 share`` = ``b 800^2 / (t(800) - c)``: about
0 for an O(B) learner, most of the B-dependent cost for an O(B^2) one -- next to the paper's
Table 1 claim.

Stream: d = 128 inputs uniform in [-1, 1], Gaussian kernel sigma = 2, random labels (about
half of the examples update), N(0, 1) targets for NORMA or 10 random classes for the
multiclass learners (their reference scores one column: the ratio includes the C = 10
outputs); Projectron ``eta`` = 1e-4 so that its support set fills up. Run: ``python -m
bench.bench_budget [LEARNER ...]`` (about two minutes on one core for all); set
``OPENBLAS_NUM_THREADS=1`` on a shared machine.

``python -m bench.bench_budget --folds [LEARNER ...]`` prints, instead, the numpy reference
fold (tests/okl_core/reference/budget.py) against the compiled one (``update``) at B = 100 and
800 from the same full state on the same rows: us per example of each, the speed-up and
whether both gave the same model bytes and scores (learners with a compiled fold:
``FOLD_LEARNERS``).
"""

from __future__ import annotations

import functools
import sys
import time

import numpy as np

import okl_core
from bench.common import best_of
from tests.okl_core.reference import budget as reference

BUDGETS = [50, 100, 200, 400, 800]
D, SIGMA, TIMED_ROWS, CLASSES = 128, 2.0, 3000, 10
LEARNERS = {
    "rbp": ({}, "O(B)"),
    "forgetron": ({}, "O(B)"),
    "projectron": ({"eta": 1e-4}, "O(B^2)"),
    "projectron_pp": ({"eta": 1e-4}, "O(B^2)"),
    "bpa_s": ({}, "O(B)"),
    "bogd": ({"eta": 0.2, "lam": 0.05}, "O(B)"),
    "norma_r": ({}, "O(B)"),
    "mforgetron": ({"n_classes": CLASSES}, "O(B)"),
    "mprojectron_pp": ({"eta": 1e-4, "n_classes": CLASSES}, "O(B^2)"),
    "mbpa_s": ({"n_classes": CLASSES}, "O(B C)"),
}


def stream(n: int, task: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, D)).astype(np.float32)
    if task == "multiclass":
        return X, rng.integers(0, CLASSES, n)
    y = rng.standard_normal(n) if task == "regression" else np.where(rng.random(n) < 0.5, 1, -1)
    return X, y


def full_state(learner, B: int):
    """Train on fresh rows until B support vectors are held."""
    state, seed = learner.init(), 1
    while int(state.n_support) < B:
        X, y = stream(max(B, 256), learner.task, seed)
        state, _ = learner.update(state, X, y)
        seed += 1
        if seed > 200:
            raise RuntimeError(f"{learner.name} did not fill a budget of {B}")
    return state


def reference_time(state, X: np.ndarray, B: int) -> float:
    """kernel_perceptron with the same B vectors, labelled by its own predictions (no growth)."""
    ref = okl_core.make_learner("kernel_perceptron", n_inputs=D, sigma=SIGMA)
    alpha = state.alpha[:B] if state.alpha.ndim == 1 else state.alpha[:B, 0]  # multiclass: class 0's column
    ref_state = ref.init()._replace(support=state.support[:B].copy(), alpha=np.sign(alpha) + (alpha == 0))
    labels = ref.to_labels(ref.predict(ref_state, X))
    out, _ = ref.update(ref_state, X, labels)
    assert len(out.alpha) == B
    return best_of(lambda: ref.update(ref_state, X, labels), repeats=5, clock=time.process_time) / len(X)


FOLD_LEARNERS = {
    "projectron": {"eta": 1e-4},
    "projectron_pp": {"eta": 1e-4},
    "projectron_r": {"projection_eta": 1e-4},
    "mprojectron": {"eta": 1e-4, "n_classes": CLASSES},
    "mprojectron_pp": {"eta": 1e-4, "n_classes": CLASSES},
    "bpa_s": {},
    "mbpa_s": {"n_classes": CLASSES},
}


def compare_folds(names: list[str], budgets=(100, 800), rows: int = 1000) -> None:
    """The numpy fold against the compiled one from the same full state (see the module doc)."""
    print(f"Budget learners' folds: us per example at a full budget, numpy -> compiled (d = {D}, {rows} rows, best of 3)")
    print(f"{'learner':>14} {'B':>5} {'numpy us':>9} {'compiled us':>12} {'speed-up':>9} {'same bytes':>11}")
    for name in names or FOLD_LEARNERS:
        for B in budgets:
            learner = okl_core.make_learner(name, n_inputs=D, sigma=SIGMA, budget=B, **FOLD_LEARNERS[name])
            state = full_state(learner, B)
            X, y = stream(rows, learner.task, 999)
            result = {}
            for mode, update in (("numpy", functools.partial(reference.fold, learner)), ("compiled", learner.update)):
                new, scores = update(state, X, y)  # warm; its bytes
                seconds = best_of(lambda: update(state, X, y), repeats=3, clock=time.process_time)
                result[mode] = (seconds / rows, okl_core.model_bytes(learner, new) + scores.tobytes())
            (slow, ref), (fast, got) = result["numpy"], result["compiled"]
            print(f"{name:>14} {B:>5} {1e6 * slow:>9.1f} {1e6 * fast:>12.1f} {slow / fast:>9.1f} {str(ref == got):>11}", flush=True)


def main(names: list[str]) -> None:
    chosen = {name: LEARNERS[name] for name in names or LEARNERS}
    print(f"Budget learners: microseconds per example at a full budget (d = {D}, {TIMED_ROWS} timed rows, best of 5)")
    print(f"{'learner':>14} {'B':>5} {'us/example':>11} {'ns per B':>9} {'ns/(B^2/1e3)':>13} {'ref us':>8} {'ratio':>6}")
    rows: dict[str, list[tuple[int, float, float]]] = {}
    for name, (params, _) in chosen.items():
        for B in BUDGETS:
            learner = okl_core.make_learner(name, n_inputs=D, sigma=SIGMA, budget=B, **params)
            state = full_state(learner, B)
            X, y = stream(TIMED_ROWS, learner.task, 999)
            ours = best_of(lambda: learner.update(state, X, y), repeats=5, clock=time.process_time) / TIMED_ROWS
            ref = reference_time(state, X, B)
            rows.setdefault(name, []).append((B, ours, ref))
            print(f"{name:>14} {B:>5} {1e6 * ours:>11.1f} {1e9 * ours / B:>9.1f} {1e9 * ours / (B * B / 1e3):>13.1f} "
                  f"{1e6 * ref:>8.1f} {ours / ref:>6.1f}", flush=True)
    print()
    print("Fit t(B) = c + a B + b B^2 over B = 50..800 (us, ns per SV, ps per SV^2)")
    print(f"{'learner':>14} {'c us':>6} {'a ns':>6} {'b ps':>7} {'B^2 share at 800':>17} {'paper (Table 1)':>16}")
    for name, (_, claim) in chosen.items():
        Bs = np.array([B for B, _, _ in rows[name]], dtype=float)
        t = np.array([ours for _, ours, _ in rows[name]])
        c, a, b = np.linalg.lstsq(np.stack([np.ones_like(Bs), Bs, Bs**2], axis=1), t, rcond=None)[0]
        share = b * 800**2 / (a * 800 + b * 800**2)
        print(f"{name:>14} {1e6 * c:>6.1f} {1e9 * a:>6.1f} {1e12 * b:>7.2f} {share:>17.2f} {claim:>16}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--folds"]:
        compare_folds(sys.argv[2:])
    else:
        main(sys.argv[1:])
