"""Plain okl_core references for the pipeline tests (no Beam)."""

import numpy as np

import okl_core
from okl_core.data.plan import StreamPlan


def reference_model(learner, X, y, plan: StreamPlan, good=None, classes=None) -> bytes:
    """Model bytes of the pipeline's definition, computed with plain okl_core folds.

    Round ``r``: every shard starts from the model merged after round ``r - 1`` and folds
    its segment's batches in order (rows with ``good == False`` dropped from their batch);
    the shards' states are merged in shard order, from that starting model
    (``merge_states(base=...)``). The merged model reaches the next round as a model file,
    as in the pipeline (a learner whose arithmetic depends on the memory layout of its
    state arrays would otherwise differ in the last bits after a round trip). The model
    file records ``classes``: the pipeline records those of the data set's ``dataset.json``.
    """
    model = learner.init()
    for r in range(plan.rounds):
        states = []
        for shard in range(plan.num_shards):
            state = model
            for batch in plan.batches(shard, r):
                keep = np.arange(batch.start, batch.stop)
                if good is not None:
                    keep = keep[good[batch.start : batch.stop]]
                if len(keep):
                    state, _ = learner.update(state, X[keep], y[keep])
            states.append(state)
        model = okl_core.merge_states(learner, states, base=model)
        model = okl_core.model_from_bytes(okl_core.model_bytes(learner, model), allow_non_finite=True)[1]
    return okl_core.model_bytes(learner, model, classes)


def binary_data(n, d=5, seed=0):
    """A nonlinear binary problem: y = sign(x0 x1 + 0.3 x2)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] >= 0, 1, -1).astype(np.int32)
    return X, y

