"""The numpy per-row fold of online kernel selection: the reference the compiled folds match.

``okl_core.learners.oks._folds`` is the implementation of ``oks``, ``oks_pp``, ``ioks``,
``rf_oks_pp`` and ``rf_ioks``; this module is the per-row fold they replaced, kept as a
test reference. It computes what the compiled folds compute, in the same order with the same
roundings -- exp, log and pow from the C library (``math``), sums sequential (``np.cumsum``),
dot products by BLAS (``@``), kernel rows by :func:`okl_core.kernels.reference_row_against_buffer`,
features as :meth:`~okl_core.learners.multikernel.KernelFeatureBank.rows` -- so that its
states and scores are the compiled folds' bytes. It shares nothing with them but the
learner's constants (``learner.rule``) and the draws (the config's seed).

:func:`reference_update` is ``learner.update`` computed here, row by row; :func:`distributions`
and :func:`reference_predict` read a state as the learner does.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.kernels import reference_row_against_buffer
from okl_core.learners.multikernel import example_uniform_rows
from okl_core.numerics import single_threaded_blas

ALPHA = 8.0  # IOKS's Tsallis exponent


# -- the paper's losses (logistic, twice okl's square, absolute) ---------------------------
def paper_loss(name: str, f: float, y: float) -> tuple[float, float]:
    """``(value, derivative)`` of the paper's loss ``name`` at ``(f, y)``."""
    if name == "logistic":
        t = -y * f
        value = math.log(2.0) if t == 0.0 else (math.log1p(math.exp(t)) if t < 0.0 else t + math.log1p(math.exp(-t)))
        if t >= 0.0:
            return value, -y * (1.0 / (1.0 + math.exp(-t)))
        e = math.exp(t)
        return value, -y * (e / (1.0 + e))
    r = f - y
    if name == "square":
        return 2.0 * (0.5 * (r * r)), 2.0 * r
    return abs(r), (1.0 if r > 0.0 else (-1.0 if r < 0.0 else r))  # np.sign, NaN kept


# -- the distributions' arithmetic ---------------------------------------------------------
def c_exp(v: np.ndarray) -> np.ndarray:
    """exp of each element in the C library's exp."""
    return np.fromiter(map(math.exp, np.asarray(v, dtype=np.float64).tolist()), np.float64, len(v))


def powers(v: np.ndarray, exponent: float) -> np.ndarray:
    """``v ** exponent`` elementwise with the C library's pow."""
    return np.fromiter((math.pow(x, exponent) for x in v.tolist()), np.float64, len(v))


def weights(log_w: np.ndarray) -> np.ndarray:
    """``exp(log_w) / sum exp(log_w)`` (C-library exp, sequential sum)."""
    e = c_exp(log_w - np.max(log_w))
    return e / np.cumsum(e)[-1]


def log_normalize(log_w: np.ndarray) -> np.ndarray:
    """``log_w - log sum exp(log_w)`` (C-library exp and log, sequential sum)."""
    top = np.max(log_w)
    return log_w - (top + math.log(np.cumsum(c_exp(log_w - top))[-1]))


def draw_index(p: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from ``p`` with uniform ``u``."""
    cdf = np.cumsum(p)
    return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(cdf) - 1)


def tsallis_step(q: np.ndarray, eta: np.ndarray, c_tilde: np.ndarray, tol: float = 1e-5, max_iter: int = 200):
    """IOKS's mirror step ``q'_i = (q_i^{-7/8} + eta_i (c~_i - mu))^{-8/7}``, ``mu`` by bisection
    until ``|sum q' - 1| <= tol``; returns ``(q', mu)``."""
    base = powers(q, 1.0 / ALPHA - 1.0) + eta * c_tilde
    power = ALPHA / (1.0 - ALPHA)

    def total(mu: float) -> float:
        b = base - eta * mu
        return math.inf if np.any(b <= 0.0) else float(np.cumsum(powers(b, power))[-1])

    lo, hi = 0.0, float(np.max(c_tilde))
    width = max(hi, 1.0)
    while total(lo) > 1.0 + tol:  # sum q' decreases as mu decreases
        lo, width = lo - width, 2.0 * width
    while total(hi) < 1.0 - tol:
        hi, width = hi + width, 2.0 * width
    mu = lo
    for _ in range(max_iter):
        value = total(mu)
        if abs(value - 1.0) <= tol:
            break
        if value > 1.0:
            hi = mu
        else:
            lo = mu
        mu = 0.5 * (lo + hi)
    return powers(base - eta * mu, power), mu


# -- the hypotheses: support sets or random-feature weights --------------------------------
class SupportSets:
    """Per-kernel support sets as float64 columns with their squared norms (the state's rows
    first, then the rows an update adds), under the learner's ``max_support``."""

    def __init__(self, learner, state):
        self.kernels = [(k.name, k.sigma) for k in learner.storage.kernels]
        self.cap = learner.storage.cap
        self.cap.check_held(int(state.sv_count.sum()))
        self.columns, self.sq_norms, self.alpha, self.count = [], [], [], []
        ends = np.cumsum(state.sv_count).tolist()
        for m, end in zip(state.sv_count.tolist(), ends):
            rows = state.sv_x[end - m : end].astype(np.float64)
            self.columns.append(rows.T.copy())
            self.sq_norms.append(np.einsum("ij,ij->i", rows, rows))
            self.alpha.append(state.sv_alpha[end - m : end].copy())
            self.count.append(m)
        self.sq_norm = state.sq_norm.copy()

    def _room(self, i: int) -> None:
        """Double kernel ``i``'s buffers when they are full."""
        m = self.count[i]
        if m < len(self.alpha[i]):
            return
        grown = max(16, 2 * m)
        columns = np.zeros((self.columns[i].shape[0], grown))
        columns[:, :m] = self.columns[i]
        self.columns[i] = columns
        self.sq_norms[i] = np.concatenate([self.sq_norms[i], np.zeros(grown - m)])
        self.alpha[i] = np.concatenate([self.alpha[i], np.zeros(grown - m)])

    def evaluate(self, i: int, x: np.ndarray) -> float:
        m = self.count[i]
        if not m:
            return 0.0
        k = reference_row_against_buffer(*self.kernels[i], x.astype(np.float64), self.columns[i][:, :m], self.sq_norms[i][:m])
        return float(np.cumsum(k * self.alpha[i][:m])[-1])

    def feature_sq_norm(self) -> float:
        return 1.0  # k(x, x) of every dictionary kernel

    def step(self, i: int, x: np.ndarray, f: float, coef: float, bound: float | None) -> None:
        self.cap.check(sum(self.count) + 1)
        self._room(i)
        m, x = self.count[i], x.astype(np.float64)
        self.columns[i][:, m], self.sq_norms[i][m], self.alpha[i][m] = x, x @ x, coef
        self.count[i] = m + 1
        # ||f + c k(x,.)||^2 = ||f||^2 + 2 c f(x) + c^2 k(x, x).
        sq = max(self.sq_norm[i] + 2.0 * coef * f + coef * coef * 1.0, 0.0)
        if bound is not None and sq > bound * bound:
            self.alpha[i][: m + 1] *= bound / math.sqrt(sq)
            sq = bound * bound
        self.sq_norm[i] = sq

    def fields(self) -> dict[str, np.ndarray]:
        return {
            "sv_x": np.concatenate([np.ascontiguousarray(c[:, :m].T, dtype=np.float32) for c, m in zip(self.columns, self.count)]),
            "sv_alpha": np.concatenate([a[:m] for a, m in zip(self.alpha, self.count)]),
            "sv_count": np.asarray(self.count, dtype=np.int64),
            "sq_norm": self.sq_norm,
        }


class FeatureWeights:
    """Per-kernel random-feature weights ``w`` (K, 2D), clipped to ``+-U / sqrt(D)`` after a step."""

    def __init__(self, learner, state):
        storage = learner.storage
        self.omega, self.clip, self.w = storage.bank.stack(), storage.clip, state.w.copy()
        self.scale = np.float32(1.0 / math.sqrt(learner.config.n_components))

    def evaluate(self, i: int, x: np.ndarray) -> float:
        proj = np.matmul(x, self.omega[i : i + 1])
        z = np.concatenate((np.cos(proj), np.sin(proj)), axis=1)
        z *= self.scale
        self.z = z.astype(np.float64)[0]
        return float(self.z @ self.w[i])

    def feature_sq_norm(self) -> float:
        return float(self.z @ self.z)

    def step(self, i: int, x: np.ndarray, f: float, coef: float, bound: float | None) -> None:
        self.w[i] += coef * self.z
        np.clip(self.w[i], -self.clip, self.clip, out=self.w[i])

    def fields(self) -> dict[str, np.ndarray]:
        return {"w": self.w}


# -- the rules' steps: draw, predict, learn ------------------------------------------------
def oks_step(rule, stats: dict, hyp, x, y, u):
    K = rule.K
    q = weights(stats["log_w"])
    p = (1.0 - rule.delta) * q + rule.delta / K
    i = draw_index(p, u)
    f = hyp.evaluate(i, x)
    loss, grad = paper_loss(rule.loss, f, y)
    stats["log_w"][i] -= rule.eta * loss / p[i]
    if grad != 0.0:
        hyp.step(i, x, f, -rule.lam * grad / p[i], None)
    stats["log_w"] = log_normalize(stats["log_w"])
    return f, i


def oks_pp_distribution(rule, stats: dict):
    K = rule.K
    eta = math.sqrt(2.0 * math.log(K)) / math.sqrt(1.0 + float(stats["sq_loss_sum"]))
    q = weights(-eta * stats["loss_sum"])
    a = float(stats["delta_constant"])
    delta = a / (2.0 * max(a, 2.0 * float(np.cumsum(stats["loss_sum"])[-1]) ** (1.0 / 3.0)))
    return q, (1.0 - delta) * q + delta / K


def oks_pp_step(rule, stats: dict, hyp, x, y, u):
    K, U, gc0 = rule.K, rule.radius, rule.g * rule.c0
    q, p = oks_pp_distribution(rule, stats)
    i = draw_index(p, u)
    f = hyp.evaluate(i, x)
    loss, grad = paper_loss(rule.loss, f, y)
    if rule.code_constant:  # the released script's a_t = exp(-y f)
        stats["delta_constant"] = np.asarray(math.exp(min(-y * f, 700.0)))
    a = float(stats["delta_constant"])
    c_tilde = loss / p[i]
    loss_sum = stats["loss_sum"]
    loss_sum[i] += c_tilde
    total = float(np.cumsum(loss_sum)[-1])
    lam = (U ** (4.0 / 3.0) * max(a**3, 8.0 * total) ** (-1.0 / 6.0)) / (
        math.sqrt(4.0 / 3.0) * K ** (1.0 / 6.0) * gc0 ** (1.0 / 3.0) * math.sqrt(1.0 + loss_sum[i])
    )
    stats["sq_loss_sum"] = np.asarray(float(stats["sq_loss_sum"]) + q[i] * c_tilde * c_tilde)
    if grad != 0.0:
        hyp.step(i, x, f, -lam * grad / p[i], U)
    return f, i


def ioks_step(rule, stats: dict, hyp, x, y, u):
    K, U, delta = rule.K, rule.radius, rule.delta
    q, eta = stats["q"], stats["eta"]
    p = (1.0 - delta) * q + delta / K
    i = draw_index(p, u)
    f = hyp.evaluate(i, x)
    loss, grad = paper_loss(rule.loss, f, y)
    g = grad / p[i]
    stats["grad_sq_sum"][i] += g * g * hyp.feature_sq_norm()
    if grad != 0.0:
        lam = U / (math.sqrt(2.0) * math.sqrt(1.0 + stats["grad_sq_sum"][i]))
        hyp.step(i, x, f, -lam * grad / p[i], U)
    c = min(loss / rule.constants.loss_max, rule.constants.loss_ceiling)
    max_eta = float(np.max(eta))
    c_tilde = np.zeros(K)
    c_tilde[i] = c / p[i] if p[i] >= max_eta else c / (p[i] + max_eta)
    q_next, _ = tsallis_step(q, eta, c_tilde)
    p_next = (1.0 - delta) * q_next + delta / K
    grow = 1.0 / p_next > stats["rho"]
    stats["rho"] = np.where(grow, 2.0 / p_next, stats["rho"])
    stats["eta"] = np.where(grow, eta * rule.upsilon, eta)
    stats["q"] = q_next
    return f, i


STEPS = {"OKSRule": oks_step, "OKSPlusPlusRule": oks_pp_step, "IOKSRule": ioks_step}


def distributions(learner, state) -> tuple[np.ndarray, np.ndarray]:
    """``(q, p)`` of ``state``: the selection distribution and the sampling one."""
    rule = learner.rule
    name = type(rule).__name__
    if name == "OKSPlusPlusRule":
        stats = {f: getattr(state, f) for f in rule.stats_class._fields}
        return oks_pp_distribution(rule, stats)
    q = weights(state.log_w) if name == "OKSRule" else state.q
    return q, (1.0 - rule.delta) * q + rule.delta / rule.K


@single_threaded_blas()
def reference_predict(learner, state, X) -> np.ndarray:
    """``learner.predict(state, X)``: kernel ``argmax q``'s hypothesis, or the ``q`` mixture
    (each kernel's hypothesis by ``learner.storage``), with BLAS on one thread as a learner's
    methods run (a threaded product rounds differently)."""
    X = np.asarray(X, dtype=np.float32)
    q, _ = distributions(learner, state)
    if learner.config.predict_with == "best":
        return learner.storage.predict(state, int(np.argmax(q)), X)
    out = np.zeros(len(X))
    for i in range(len(q)):
        out += q[i] * learner.storage.predict(state, i, X)
    return out


@single_threaded_blas()
def reference_update(learner, state, X, y):
    """``learner.update(state, X, y)`` by the numpy per-row fold: ``(state, scores)``."""
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.float64)
    n, n_seen = len(y), int(state.n_seen)
    rule = learner.rule
    step = STEPS[type(rule).__name__]
    hyp = FeatureWeights(learner, state) if hasattr(state, "w") else SupportSets(learner, state)
    stats = {name: np.array(getattr(state, name), copy=True) for name in rule.stats_class._fields}
    n_used, scores = state.n_used.copy(), np.empty(n)
    uniforms = example_uniform_rows(learner.config.seed, n_seen, n_seen + n, 1)[:, 0]
    for r in range(n):
        scores[r], i = step(rule, stats, hyp, X[r], float(y[r]), float(uniforms[r]))
        n_used[i] += 1
    fields = {**hyp.fields(), **stats, "n_used": n_used, "n_seen": np.asarray(n_seen + n, np.int64)}
    return learner.state_class(**fields), scores
