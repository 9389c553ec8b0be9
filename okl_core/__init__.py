"""okl_core: online kernel learners as pure numpy (no Beam, no Dask).

Public interface::

    learner = okl_core.make_learner("fogd", n_inputs=123, sigma=8.0)
    learner = okl_core.make_learner("fogd", data=X)          # defaults derived from X (sigma: the median heuristic)
    state = learner.init()
    state, online_scores = learner.update(state, X, y)   # predict, score, then learn
    scores = learner.predict(state, X_test)
    okl_core.save_model("model.npz", learner, state)     # classes=[...]: the labels the class codes stand for
    learner, state = okl_core.load_model("model.npz")
    merged = okl_core.merge_states(learner, [state_a, state_b])
    okl_core.check_mixable(learner)                      # streaming: can it mix?
    local = okl_core.mix_states(learner, local, merged, 0.5)
    okl_core.testing.check_learner(my_learner)           # the conformance checks, for your own learner
    okl_core.describe_learner("fogd")                    # task, paper, merge/mix, each parameter's range and meaning
"""

from okl_core.catalog import describe_learner
from okl_core.features import FeatureSpec, FourierFeatures, exact_kernel, median_heuristic
from okl_core.learners.base import Learner, NotMergeableError
from okl_core.learners.support import CapacityError
from okl_core.merge import check_mixable, merge_states, mix_states
from okl_core.metrics import Prequential
from okl_core.random import GENERATOR_VERSION
from okl_core.registry import learner_class, learner_names, register
from okl_core.derived import make_learner, resolve_params
from okl_core.state import ModelFileError, check_classes, load_model, model_bytes, model_classes, model_from_bytes, model_versions, save_model

from okl_core import testing  # noqa: E402  (after the modules it checks)

__version__ = "0.1.0"

__all__ = [
    "CapacityError",
    "FeatureSpec",
    "FourierFeatures",
    "GENERATOR_VERSION",
    "Learner",
    "ModelFileError",
    "NotMergeableError",
    "Prequential",
    "check_classes",
    "check_mixable",
    "describe_learner",
    "exact_kernel",
    "learner_class",
    "learner_names",
    "load_model",
    "make_learner",
    "median_heuristic",
    "merge_states",
    "mix_states",
    "model_bytes",
    "model_classes",
    "model_from_bytes",
    "register",
    "resolve_params",
    "save_model",
    "model_versions",
    "testing",
]
