"""The compiled folds of the exact-kernel expansions give the numpy reference's bytes.

kernel_ogd, mkernel_ogd, kernel_ogd_r, kernel_perceptron (``kernel_ogd._GrowingExpansion``)
and NOGD's kernel phase (``nogd._BudgetedExpansion``: nogd, mnogd, nogd_r) are trained with
their compiled folds (``okl_core.learners._expansion_folds``) and with the numpy reference
(tests/okl_core/reference/expansions.py): states, online scores and predictions must be
byte-identical, for every kernel, several batch splits, a support set growing past a batch
and past its buffer, and NOGD's budget filling inside a batch.
"""

import pytest

import okl_core
from okl_core.learners.kernel_ogd import _GrowingExpansion
from okl_core.learners.nogd import _BudgetedExpansion
from tests.okl_core.real_data import mnist_test
from tests.okl_core.reference.folds import use_reference_folds
from tests.okl_core.test_compiled_folds import D_IN, labels, pixels, train_bytes

KERNELS = ("gaussian", "laplacian", "cauchy")
SIGMA = {"gaussian": 2.0, "laplacian": 12.0, "cauchy": 2.0}  # on 64 pixel-like inputs: kernel values spread over (0, 1)
EXPANSIONS = [
    ("kernel_ogd", dict(eta=0.3)),
    ("mkernel_ogd", dict(eta=0.5, n_classes=10)),
    ("kernel_ogd_r", dict(eta=0.3, eps=0.05)),
    ("kernel_ogd_r", dict(eta=0.3, eps=0.01, threshold="squared")),
    ("kernel_perceptron", dict()),
]
NOGDS = [  # budget 20 fills inside the first batch of every split below
    ("nogd", dict(budget=20, rank=10, eta=0.5)),
    ("nogd", dict(budget=20, rank=20, eta=0.5, switch="next_update")),
    ("mnogd", dict(budget=20, rank=8, eta=0.5, n_classes=10)),
    ("mnogd", dict(budget=15, rank=15, eta=0.5, n_classes=3, switch="next_update")),
    ("nogd_r", dict(budget=20, rank=10, eta=0.3, eps=0.01)),
    ("nogd_r", dict(budget=20, rank=5, eta=0.3, eps=0.001, threshold="squared", switch="next_update")),
]


def both(monkeypatch, name, params, X, digits, splits):
    """(the reference's bytes, the compiled folds' bytes, learner) of ``train_bytes``."""
    learner = okl_core.make_learner(name, n_inputs=X.shape[1], **params)
    y = labels(learner, digits)
    with monkeypatch.context() as m:
        use_reference_folds(m)
        reference = train_bytes(learner, X, y, splits)
    return reference, train_bytes(learner, X, y, splits), learner


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("name", "params"), EXPANSIONS + NOGDS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXPANSIONS + NOGDS)])
@pytest.mark.parametrize("splits", [1, 4])
def test_compiled_expansion_folds_give_the_references_bytes(monkeypatch, name, params, kernel, splits):
    X, digits = pixels(400, seed=1)
    reference, compiled, _ = both(monkeypatch, name, dict(params, kernel=kernel, sigma=SIGMA[kernel]), X, digits, splits)
    assert compiled == reference


@pytest.mark.parametrize(("name", "params"), [EXPANSIONS[1], EXPANSIONS[2], NOGDS[0], NOGDS[3]], ids=["mkernel_ogd", "kernel_ogd_r", "nogd", "mnogd"])
def test_row_by_row(monkeypatch, name, params):
    X, digits = pixels(120, seed=2)
    reference, compiled, _ = both(monkeypatch, name, dict(params, sigma=2.0), X, digits, 120)
    assert compiled == reference


def spy_on_add(monkeypatch, model):
    """Record the rows whose update goes through ``model.add`` (Python's)."""
    calls = []
    original = model.add
    monkeypatch.setattr(model, "add", lambda self, i, coef: calls.append(i) or original(self, i, coef))
    return calls


def test_support_growing_past_batches_and_buffers(monkeypatch):
    X, digits = pixels(600, seed=3)
    reference, compiled, learner = both(monkeypatch, "kernel_ogd", dict(sigma=2.0, eta=0.3), X, digits, 3)
    assert compiled == reference
    # The added rows' buffer starts at 16 columns and doubles: the compiled fold hands the
    # update that finds it full to Python's add (a few rows) and learns the others itself.
    calls = spy_on_add(monkeypatch, _GrowingExpansion)
    state, _ = learner.update(learner.init(), X, labels(learner, digits))
    assert len(state.support) > 300 and 0 < len(calls) <= 6


@pytest.mark.parametrize("switch", ["immediate", "next_update"])
@pytest.mark.parametrize("name", ["nogd", "mnogd", "nogd_r"])
def test_nogd_budget_filling_mid_batch_hands_over_exactly(monkeypatch, name, switch):
    # One batch of 300 rows: the transition happens at a row inside it and the linear phase
    # learns the rest; the compiled fold leaves exactly that update to Python's add.
    params = dict(sigma=2.0, budget=25, rank=10, switch=switch, **({"n_classes": 10} if name == "mnogd" else {}))
    X, digits = pixels(300, seed=4)
    reference, compiled, learner = both(monkeypatch, name, params, X, digits, 1)
    assert compiled == reference
    calls = spy_on_add(monkeypatch, _BudgetedExpansion)
    state, _ = learner.update(learner.init(), X, labels(learner, digits))
    assert int(state.phase) == 1 and int(state.n_landmarks) == 25 and len(calls) == 1 and 24 <= calls[0] < 299


def test_nogd_kernel_phase_is_the_same_for_every_batch_split():
    # Every kernel-phase score is the kernel row against the landmarks (norms by the same
    # ddot whether a landmark came in this batch or an earlier one): splits agree bit for bit.
    learner = okl_core.make_learner("mnogd", n_inputs=D_IN, sigma=2.0, budget=400, rank=10, n_classes=10)
    X, digits = pixels(300, seed=5)
    runs = [train_bytes(learner, X, digits, splits) for splits in (1, 3, 300)]
    assert len({run[-3] for run in runs}) == 1  # the final states
    assert len({b"".join(run[1:-1:2]) for run in runs}) == 1  # the online scores


@pytest.mark.parametrize("name", ["kernel_ogd", "mkernel_ogd"])
def test_the_support_cap_stops_the_compiled_fold_with_the_references_error(monkeypatch, name):
    learner = okl_core.make_learner(name, n_inputs=D_IN, sigma=2.0, max_support=37, **({"n_classes": 10} if name == "mkernel_ogd" else {}))
    X, digits = pixels(200, seed=6)
    y = labels(learner, digits)
    errors = []
    for reference in (True, False):
        with monkeypatch.context() as m:
            if reference:
                use_reference_folds(m)
            with pytest.raises(ValueError, match="max_support=37") as error:
                learner.update(learner.update(learner.init(), X[:30], y[:30])[0], X[30:], y[30:])
        errors.append(str(error.value))
    assert errors[0] == errors[1]


MNIST_CASES = [
    ("kernel_ogd", dict(sigma=8.0)),
    ("mkernel_ogd", dict(sigma=8.0, n_classes=10)),
    ("nogd", dict(sigma=8.0)),
    ("nogd_r", dict(sigma=8.0, switch="next_update")),
    pytest.param("kernel_perceptron", dict(sigma=80.0, kernel="laplacian"), marks=pytest.mark.slow),  # 3 s: numpy's Laplacian rows
    pytest.param("mnogd", dict(sigma=8.0, n_classes=10, kernel="cauchy"), marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("name", "params"), MNIST_CASES)
def test_compiled_expansion_folds_on_mnist_digits(monkeypatch, name, params):
    # 2,000 MNIST test digits (784 inputs), batches of 500: the support set grows past each
    # batch (to over 1,000 rows); NOGD's budget (100, 30) fills inside the first batch.
    X, digits = mnist_test()
    reference, compiled, _ = both(monkeypatch, name, params, X[:2000], digits[:2000], 4)
    assert compiled == reference
