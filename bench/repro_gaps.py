"""Experiments behind the README's reproduction gaps (issue 19, item 5; minutes, not ``make bench``).

``nogd_rank``: NOGD (B = 100, eta = 0.2) on a9a + a9a.t (48,842 rows, binary features) for
sigma in {0.5, 1, 2, 4, 8} and rank k in {20, 50, 100}: the online mistake rate, and how much
of the landmark kernel matrix's spectrum the rank keeps (sum of the top k eigenvalues over the
trace, first permutation). Small sigma against the data's scale (a9a rows are ~3.5 apart)
makes the landmark matrix near diagonal: every eigenvalue is about 1 and k = 0.2 B keeps a
fifth of the model.

``omkl_freeze``: OMKL-GF's freeze readings (``freeze_on``) for M = 1, 7, 10, 17 (J = 1).

``rf_oks``: RF-OKS++ (D = 400) on a9a with the scaling / tuning variants.

``dsg_passes``: DSG with the tuned a9a parameters over 1-3 passes; ``dsg_passes_nu``: the same at
nu = 1/n (the exact SVM's C = 1) over 1, 3, 5 and 10 passes.

``dsg_batch``: what the model class reaches on a9a at all: exact-kernel batch SVMs
(``sklearn.svm.SVC``, Gaussian gamma = 1 / (2 sigma^2), C = 1 / (nu n); the setting's nu = 1/(100 n)
is C = 100) for a few C and sigma, trained on a9a and tested on a9a.t. ``dsg_rff``: a batch linear
SVM (C = 100) on the ~16k random features DSG has after one pass (8,192 frequencies, no bias as in
DSG; dual coordinate descent, Hsieh et al. 2008). ``dsg_nu``: DSG (the reproduce protocol) at the
regularisation the exact SVM prefers, with theta nu = 1 (gamma_i = 1 / (nu i)) or the tuned steps.

``dsg_10class``: the ``dsg-mnist8m-10class`` at-scale setting folded in memory as the 2-shard
pipeline cuts it (first and second half folded apart, then merged; 2^15 features per shard), for
a few sigma / theta / nu: the online error (all rows and each shard's last quarter), the error on
2,000 unseen deformed rows and on the test set. Needs ``--train`` and ``--test`` data sets
(``okl prepare mnist8m``, see the README's "The papers at scale").

``mfogd``, ``dsg``: variants of the ``mfogd-mnist-tuned`` and ``dsg-a9a`` settings, run with the
reproduce protocol (:func:`okl_experiments.reproduction.run_setting`, serial).

Run: ``python -m bench.repro_gaps {nogd_rank,omkl_freeze,rf_oks,mfogd,dsg,dsg_passes,dsg_batch,dsg_rff,dsg_nu,dsg_passes_nu} [--runs R]``;
``python -m bench.repro_gaps dsg_10class --train DIR --test DIR [--rows N]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import okl_core
from okl_core.evaluation import metric_value, permuted
from okl_core.kernels import exact_kernel
from okl_experiments.data import load_real

DATA_ROOT = os.environ.get("OKL_SHARED_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


def data(name: str):
    d = load_real(name, os.path.abspath(DATA_ROOT))
    return d.X, d.y


def run_nogd_rank(runs: int) -> None:
    X, y = data("a9a+a9a.t")
    print(f"a9a+a9a.t: {len(y)} rows; NOGD B=100 eta=0.2; online mistake rate % (mean +- std over {runs} permutations)")
    print("| sigma | k | mistake rate % | spectrum kept by k (run 0) | mean off-diagonal K | s/run |")
    print("|---|---|---|---|---|---|")
    for sigma in (0.5, 1.0, 2.0, 4.0, 8.0):
        for rank in (20, 50, 100):
            rates, seconds, kept, offdiag = [], [], None, None
            for r in range(runs):
                Xr, yr = permuted(X, y, 0, r)
                learner = okl_core.make_learner("nogd", n_inputs=123, budget=100, rank=rank, sigma=sigma, eta=0.2)
                start = time.process_time()
                state, scores = learner.update(learner.init(), Xr, yr)
                seconds.append(time.process_time() - start)
                rates.append(100.0 * np.mean(learner.to_labels(scores) != yr))
                if r == 0:
                    L = np.asarray(state.landmarks, dtype=np.float64)
                    K = exact_kernel("gaussian", L, L, sigma)
                    ev = np.sort(np.linalg.eigvalsh(K))[::-1]
                    kept = ev[:rank].sum() / ev.sum()
                    offdiag = (K.sum() - np.trace(K)) / (K.size - len(K))
            std = np.std(rates, ddof=1) if runs > 1 else float("nan")
            print(f"| {sigma} | {rank} | {np.mean(rates):.2f} +- {std:.2f} | {kept:.2f} | {offdiag:.3f} | {np.mean(seconds):.1f} |",
                  flush=True)


def friedman():
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=10_000, n_features=10, noise=1.0, random_state=0)
    return X.astype(np.float32), (y - y.min()) / (y.max() - y.min())


def _omkl_run(X, y, seed: int, M: int, reading: str):
    """One OMKL-GF pass (J = 1) under a freeze reading; returns (MSE, example at which it froze or None)."""
    if reading == "raker":
        learner = okl_core.make_learner("raker", n_inputs=X.shape[1], seed=seed)
        _, scores = learner.update(learner.init(), X, y)
        return float(np.mean((scores - y) ** 2)), None
    freeze = {} if reading == "never" else {"freeze_below": 1e-4, "freeze_on": reading}
    learner = okl_core.make_learner("omkl_gf", n_inputs=X.shape[1], seed=seed, draws_per_node=M, selective_nodes=1, **freeze)
    state, froze = learner.init(), None
    scores = np.empty(len(y))
    for t in range(len(y)):  # row by row until the graph freezes, then the rest in one call
        state, scores[t : t + 1] = learner.update(state, X[t : t + 1], y[t : t + 1])
        if bool(state.frozen):
            froze = t + 1
            state, scores[t + 1 :] = learner.update(state, X[t + 1 :], y[t + 1 :])
            break
    return float(np.mean((scores - y) ** 2)), froze


def run_omkl_freeze(runs: int) -> None:
    X, y = friedman()
    print(f"Friedman #1 (10,000 rows, target in [0, 1]); OMKL-GF J=1, paper settings; MSE x 1e-3 over {runs} seeds")
    print("| reading | M | MSE x 1e-3 (mean +- std) | froze at example (per seed) |")
    print("|---|---|---|---|")
    print(_omkl_line(X, y, runs, "raker", 0))
    for reading in ("never", "example", "mse"):
        for M in (1, 7, 10, 17):
            print(_omkl_line(X, y, runs, reading, M), flush=True)


def _omkl_line(X, y, runs, reading, M) -> str:
    out = [_omkl_run(X, y, seed, M, reading) for seed in range(runs)]
    mse = 1e3 * np.array([o[0] for o in out])
    return f"| {reading} | {M or '-'} | {mse.mean():.2f} +- {mse.std(ddof=1):.2f} | {[o[1] for o in out]} |"


def run_rf_oks(runs: int) -> None:
    X, y = data("a9a")
    print(f"a9a: {len(y)} rows; RF-OKS++ D=400 logistic; online mistake rate % over {runs} permutations (paper 17.28 +- 0.29)")
    print("| features | tuning | mistake rate % | s/run |")
    print("|---|---|---|---|")
    scalings = {"as distributed {0, 1}": X, "min-max to [-1, 1] (2x - 1)": 2.0 * X - 1.0}
    for label, Xs in scalings.items():
        for tuning in ("paper", "released_code"):
            rates, seconds = [], []
            for r in range(runs):
                Xr, yr = permuted(Xs.astype(np.float32), y, 0, r)
                learner = okl_core.make_learner("rf_oks_pp", n_inputs=123, seed=r, n_components=400, tuning=tuning)
                start = time.process_time()
                _, scores = learner.update(learner.init(), Xr, yr)
                seconds.append(time.process_time() - start)
                rates.append(100.0 * np.mean(learner.to_labels(scores) != yr))
            std = np.std(rates, ddof=1) if runs > 1 else float("nan")
            print(f"| {label} | {tuning} | {np.mean(rates):.2f} +- {std:.2f} | {np.mean(seconds):.1f} |", flush=True)


def _variants(key: str, variants: dict, runs: int) -> None:
    """Run setting ``key`` of the reproduction table with each variant's parameters (no tuning, ``runs`` permutations)."""
    import dataclasses

    from okl_experiments.reproduction import SETTINGS, run_setting

    base = next(s for s in SETTINGS if s.key == key)
    print(f"{key}: {base.metric} % over {runs} permutations (the reproduce protocol), paper {100 * base.paper:.2f}")
    print("| variant | ours % | paper % | diff |")
    print("|---|---|---|---|")
    for label, params in variants.items():
        setting = dataclasses.replace(base, params={**base.params, **(base.tuned or {}), **params}, tune=None, runs=runs)
        out = run_setting(setting, os.path.abspath(DATA_ROOT))
        if out.status != "ok":
            print(f"| {label} | {out.status}: {out.reason} | | |", flush=True)
            continue
        print(f"| {label} | {100 * out.mean:.2f} +- {100 * out.std:.2f} | {100 * base.paper:.2f} | {100 * out.diff:+.2f} |",
              flush=True)


def run_mfogd(runs: int) -> None:
    """MFOGD on MNIST: Table 7's D = rho_f B = 4 x 200 = 800 frequencies against the 400 of the setting."""
    _variants("mfogd-mnist-tuned", {f"D={d}, eta={eta}": {"n_components": d, "eta": eta}
                                    for d in (400, 800) for eta in (0.0005, 0.001, 0.002, 0.005)}, runs)


def run_dsg(runs: int) -> None:
    """DSG on a9a: the averaged iterate and the regularisation against the tuned setting."""
    _variants("dsg-a9a", {"tuned (theta 1e4, offset 3e3)": {}, "averaged iterate": {"averaged": True},
                          "nu = 1/n": {"nu": "1/n"}, "nu = 1e-6": {"nu": 1e-6},
                          "sigma = median / sqrt 2": {"sigma": "0.7071*median"}, "sigma = 2 median": {"sigma": "2*median"}}, runs)


def run_dsg_nu(runs: int) -> None:
    """DSG on a9a at the C the exact SVM prefers (C = 10, 1: nu = 1/(10 n), 1/n), with theta nu = 1 or the tuned steps."""
    n = 32561  # a9a's rows: theta = 1 / nu
    _variants("dsg-a9a", {"nu = 1/(100 n), theta nu = 1": {"nu": "0.01/n", "theta": 100.0 * n, "step_offset": 0.0},
                          "nu = 1/(10 n), tuned steps": {"nu": "0.1/n"},
                          "nu = 1/(10 n), theta nu = 1": {"nu": "0.1/n", "theta": 10.0 * n, "step_offset": 0.0},
                          "nu = 1/n, theta nu = 1": {"nu": "1/n", "theta": float(n), "step_offset": 0.0}}, runs)


def run_dsg_passes(runs: int) -> None:
    """DSG (the tuned dsg-a9a parameters) trained for 1, 2 and 3 passes over a9a, tested on a9a.t."""
    _dsg_passes(runs, 0.01, (1, 2, 3))


def run_dsg_passes_nu(runs: int) -> None:
    """DSG (the tuned steps) at nu = 1/n, the regularisation of the exact SVM's C = 1, for 1, 3, 5 and 10 passes."""
    _dsg_passes(runs, 1.0, (1, 3, 5, 10))


def _dsg_passes(runs: int, nu_n: float, passes: tuple) -> None:
    """Test error on a9a.t of DSG (nu = nu_n / n, theta 1e4, offset 3e3) after each count of ``passes``."""
    from okl_core.evaluation import evaluate
    from okl_experiments.params import MEDIAN_ROWS

    X, y = data("a9a")
    Xt, yt = data("a9a.t")
    sigma = okl_core.median_heuristic(X, n_samples=MEDIAN_ROWS)
    params = {"loss": "hinge", "sigma": sigma, "nu": nu_n / len(y), "batch_size": 64, "block_size": 32,
              "theta": 10000.0, "step_offset": 3000.0}
    print(f"DSG hinge on a9a (sigma = median = {sigma:.3f}, nu = {nu_n:g}/n), test error on a9a.t %, {runs} runs; paper 15.3")
    print("| passes | test error % |")
    print("|---|---|")
    errors: dict = {k: [] for k in passes}
    for r in range(runs):
        learner = okl_core.make_learner("dsg", n_inputs=123, seed=r, **params)
        state = learner.init()
        for p in range(max(passes)):  # pass p: permutation (r, p) of the training rows
            Xr, yr = permuted(X, y, 1000 * r, p)
            state, _ = learner.update(state, Xr, yr)
            if p + 1 in passes:
                errors[p + 1].append(100.0 * metric_value(evaluate(learner, state, Xt, yt), "error"))
    for k in passes:
        std = np.std(errors[k], ddof=1) if runs > 1 else float("nan")
        print(f"| {k} | {np.mean(errors[k]):.2f} +- {std:.2f} |", flush=True)


def _svc_line(X, y, Xt, yt, sigma: float, C: float, label: str) -> str:
    from sklearn.svm import SVC

    start = time.process_time()
    svc = SVC(C=C, kernel="rbf", gamma=1.0 / (2.0 * sigma**2), cache_size=2000).fit(X, y)
    seconds = time.process_time() - start
    train, test = 100.0 * np.mean(svc.predict(X) != y), 100.0 * np.mean(svc.predict(Xt) != yt)
    return f"| exact SVC, {label} | {sigma:.3f} | {C:g} | {train:.2f} | {test:.2f} | {len(svc.support_)} SV | {seconds:.0f} |"


def _rff_hinge(Z, y, C: float, epochs, seed: int = 0):
    """Batch linear hinge SVM without bias on features ``Z`` by dual coordinate descent (Hsieh et al. 2008).

    min_w (1/2)||w||^2 + C sum_i max(0, 1 - y_i w^T z_i), i.e. DSG's objective with
    nu = 1 / (C n). Yields ``(epoch, w, primal objective, dual objective)`` after each epoch in ``epochs``.
    """
    rng = np.random.default_rng(seed)
    alpha, w = np.zeros(len(y)), np.zeros(Z.shape[1], dtype=Z.dtype)  # w in Z's dtype: no per-row casts
    q = np.einsum("ij,ij->i", Z, Z, dtype=np.float64)
    for epoch in range(1, max(epochs) + 1):
        for i in rng.permutation(len(y)):
            z = Z[i]
            g = y[i] * float(np.dot(w, z)) - 1.0
            new = min(max(alpha[i] - g / q[i], 0.0), C)
            if new != alpha[i]:
                w += np.float32((new - alpha[i]) * y[i]) * z
                alpha[i] = new
        if epoch in epochs:
            primal = 0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - y * (Z @ w)).sum())
            yield epoch, w, primal, float(alpha.sum()) - 0.5 * float(w @ w)


def run_dsg_batch(runs: int) -> None:
    """Exact-kernel and random-feature batch SVMs on a9a at DSG's hyperparameters (test on a9a.t)."""
    from okl_experiments.params import MEDIAN_ROWS

    X, y = data("a9a")
    Xt, yt = data("a9a.t")
    X, Xt = X.astype(np.float64), Xt.astype(np.float64)
    sigma = okl_core.median_heuristic(X, n_samples=MEDIAN_ROWS)
    print(f"a9a -> a9a.t, Gaussian kernel, sigma = median = {sigma:.3f}; DSG's nu = 1/(100 n) is C = 100; paper (DSG) 15.3")
    print("| model | sigma | C | train error % | test error % | size | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for factor, C in ((1.0, 100.0), (1.0, 10.0), (1.0, 1.0), (2.0, 100.0), (2.0, 10.0)):
        print(_svc_line(X, y, Xt, yt, factor * sigma, C, "sigma = median" if factor == 1 else f"sigma = {factor:g} median"), flush=True)


def run_dsg_rff(runs: int) -> None:
    """A batch linear hinge SVM on DSG's ~16k random features after one a9a pass (C = 100, test on a9a.t)."""
    from okl_core.features import FeatureSpec, FourierFeatures
    from okl_experiments.params import MEDIAN_ROWS

    X, y = data("a9a")
    Xt, yt = data("a9a.t")
    sigma = okl_core.median_heuristic(X, n_samples=MEDIAN_ROWS)
    print(f"a9a -> a9a.t, 8,192 Gaussian frequencies (16,384 features), sigma = median = {sigma:.3f}, C = 100, no bias")
    print("| model | sigma | C | train error % | test error % | size | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for r in range(runs):
        spec = FeatureSpec(n_inputs=123, n_components=8192, sigma=sigma, seed=r, block_size=256, scaled=True)
        features = FourierFeatures(spec)
        Z, Zt = features.transform(X), features.transform(Xt)
        start = time.process_time()
        for epoch, w, primal, dual in _rff_hinge(Z, y, 100.0, (1, 10, 30, 100, 300), seed=r):
            train, test = 100.0 * np.mean(np.sign(Z @ w) != y), 100.0 * np.mean(np.sign(Zt @ w) != yt)
            print(f"| RFF 16,384 features (seed {r}), linear hinge SVM, {epoch} epochs (primal {primal:.0f}, dual {dual:.0f}) | {sigma:.3f} | 100 | "
                  f"{train:.2f} | {test:.2f} | 16,384 features | {time.process_time() - start:.0f} |", flush=True)


DSG_10CLASS_VARIANTS = (  # (sigma / median, theta, nu)
    (1.0, 100.0, 0.0005), (0.5, 300.0, 0.0005), (0.5, 1000.0, 0.0005), (0.5, 1000.0, 0.0), (0.5, 2000.0, 0.0005),
    (0.5, 3000.0, 0.0005), (0.5, 1e4, 1e-4), (0.35, 2000.0, 0.0005), (0.25, 2000.0, 0.0005), (0.35, 1e4, 1e-4),
)


def _fold_shards(learner, X, y, shards: int = 2, batch_rows: int = 1024):
    """Fold each consecutive ``1/shards`` of the rows apart (as ``pipelines.train`` cuts them), then merge.

    Returns the merged state, the online mistakes over all rows and over each shard's last quarter.
    """
    half = len(y) // shards
    states, mistakes, late = [], 0, 0
    for s in range(shards):
        state = learner.init()
        for start in range(s * half, (s + 1) * half, batch_rows):
            stop = min(start + batch_rows, (s + 1) * half)
            state, scores = learner.update(state, X[start:stop], y[start:stop])
            wrong = int(np.sum(learner.to_labels(scores) != y[start:stop]))
            mistakes += wrong
            late += wrong if start - s * half >= 0.75 * half else 0
        states.append(state)
    return learner.merge(states), mistakes / (shards * half), late / (shards * half / 4)


def run_dsg_10class(train: str, test: str, rows: int | None) -> None:
    """Softmax DSG on generated MNIST-8M rows: the at-scale setting's variants, in memory."""
    from okl_core.data import open_dataset

    tr, te = open_dataset(train).read_all(), open_dataset(test).read_all()
    rows = len(tr.y) - 2000 if rows is None else rows
    X, y, Xh, yh = tr.X[:rows], tr.y[:rows], tr.X[rows : rows + 2000], tr.y[rows : rows + 2000]
    median = okl_core.median_heuristic(X)
    block = max(2, 2 * round(2**15 / (rows // 2 // 1024) / 2))
    print(f"{rows:,} rows, 2 shards of {rows // 2 // 1024} batches of 1024, block {block} (2^15 features per shard); "
          f"median {median:.3f}; held out: {len(yh)} deformed rows after them; test {len(te.y)} rows")
    print("| sigma / median | theta | nu | online % | last quarter online % | held-out deformed % | test % | rows per CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for factor, theta, nu in DSG_10CLASS_VARIANTS:
        learner = okl_core.make_learner("dsg", n_inputs=X.shape[1], loss="softmax", n_classes=10, sigma=factor * median,
                                        nu=nu, theta=theta, batch_size=1024, block_size=block)
        start = time.process_time()
        state, online, late = _fold_shards(learner, X, y)
        rate = rows / (time.process_time() - start)
        held = 100.0 * np.mean(learner.to_labels(learner.predict(state, Xh)) != yh) if len(yh) else float("nan")
        tested = 100.0 * np.mean(learner.to_labels(learner.predict(state, te.X)) != te.y)
        print(f"| {factor:g} | {theta:g} | {nu:g} | {100 * online:.2f} | {100 * late:.2f} | {held:.2f} | {tested:.2f} | {rate:,.0f} |",
              flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("which", choices=["nogd_rank", "omkl_freeze", "rf_oks", "mfogd", "dsg", "dsg_passes", "dsg_batch",
                                          "dsg_rff", "dsg_nu", "dsg_passes_nu", "dsg_10class"])
    parser.add_argument("--runs", type=int, default=2, help="permutations / random-feature seeds")
    parser.add_argument("--train", help="dsg_10class: generated MNIST-8M training rows (okl prepare mnist8m)")
    parser.add_argument("--test", help="dsg_10class: test rows")
    parser.add_argument("--rows", type=int, help="dsg_10class: training rows used (default: all but the last 2,000, held out)")
    args = parser.parse_args(argv)
    if args.which == "dsg_10class":
        if not (args.train and args.test):
            parser.error("dsg_10class needs --train and --test")
        run_dsg_10class(args.train, args.test, args.rows)
    else:
        globals()[f"run_{args.which}"](args.runs)


if __name__ == "__main__":
    main()
