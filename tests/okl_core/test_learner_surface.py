"""A learner object's public surface is small and declared: LEARNER_API for its users,
SUBCLASS_API for a learner of one's own; every other name of the base class is private."""

import pytest

import okl_core
from okl_core import testing
from okl_core.learners.base import LEARNER_API, SUBCLASS_API, Learner


def _public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def test_the_base_class_exposes_exactly_the_declared_names():
    assert not set(LEARNER_API) & set(SUBCLASS_API)
    # set by each instance (config) or subclass (config_class, state_class); the base has every other name
    assert _public(Learner) == (set(LEARNER_API) | set(SUBCLASS_API)) - {"config", "config_class", "state_class"}


@pytest.mark.parametrize("name", okl_core.learner_names())
def test_every_learner_has_the_users_surface(name):
    learner = testing.conformance_learner(name)
    missing = [n for n in LEARNER_API if not hasattr(learner, n)]
    assert missing == []
    assert learner.name == name and learner.task in okl_core.learners.base.TASKS
    assert isinstance(learner.config, learner.config_class)


def test_internals_of_the_base_class_are_private():
    """What only the base class uses to build its subclasses is not part of any surface."""
    assert "pinned_methods" not in dir(Learner) and Learner._pinned_methods == ("init", "update", "predict", "merge", "mix")
    assert "check_combinable" not in dir(Learner)  # merge and mix's state check (okl_core.merge uses it too)
