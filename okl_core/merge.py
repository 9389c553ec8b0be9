"""Merging states trained on disjoint shards (one-shot or iterative parameter mixing).

States combine only when they belong to the same learner and live in the same feature
space: same learner name and same feature spec (kernel, sigma, dimensions, block size,
seed, generator version). The combination itself is the learner's own ``merge`` (weighted
average by examples seen for random-feature learners; learners that cannot merge raise
:class:`~okl_core.learners.base.NotMergeableError`). States are combined in the order
given: callers sort them (by shard) for bit-for-bit determinism.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from okl_core.learners.base import Learner, NotMergeableError

__all__ = ["merge_states", "check_mergeable", "NotMergeableError"]


def check_mergeable(learner: Learner, other: Learner) -> None:
    """Raise :class:`NotMergeableError` unless two learners' states can be merged.

    Same learner name and same config, ignoring the learner's ``runtime_fields`` (such
    as cache sizes); equal configs imply equal seeds and feature specs.
    """
    if learner.name != other.name:
        raise NotMergeableError(f"cannot merge a {other.name} model into a {learner.name} model")
    a, b = dataclasses.asdict(learner.config), dataclasses.asdict(other.config)
    diff = {k: (a[k], b.get(k)) for k in a if k not in learner.runtime_fields and a[k] != b.get(k)}
    if diff:
        raise NotMergeableError(f"{learner.name}: configs differ {diff}; merged models must share seed, feature spec and parameters")


def merge_states(learner: Learner, states: list, learners: list[Learner] | None = None, base=None):
    """Combine ``states`` (all of ``learner``, or of the matching ``learners``) into one.

    Parameters
    ----------
    learner : Learner
        The learner whose state comes out.
    states : list of states
        Non-empty, in a deterministic order.
    learners : list of Learner, optional
        The learner of each state when they were built separately (for example loaded
        from files); each must match ``learner``'s name and feature spec.
    base : state, optional
        The state every one of ``states`` started from (iterative parameter mixing: round
        ``r`` starts each shard from the merge of round ``r - 1``). Averaging learners then
        weight each state by the examples it added since ``base``, and the merged
        ``n_seen`` counts ``base``'s examples once; summing learners (``merge_semantics
        = 'sum'``) add only what each state learned since ``base``, so the result still
        equals training on the concatenated data.
    """
    states = list(states)
    if not states:
        raise NotMergeableError(f"{learner.name}: no states to merge")
    for other in learners or ():
        check_mergeable(learner, other)
    for s in [*states, *([] if base is None else [base])]:
        if not isinstance(s, learner.state_class):
            raise NotMergeableError(f"{learner.name}: cannot merge a {type(s).__name__}")
    if base is None:
        return states[0] if len(states) == 1 else learner.merge(states)
    if learner.merge_semantics == "sum":
        return learner.merge(states, base=base)
    return _average_since(learner, states, base)


def _average_since(learner: Learner, states: list, base):
    """Average ``states`` weighted by the examples each added since ``base``."""
    n_base = int(base.n_seen)
    added = [int(s.n_seen) - n_base for s in states]
    if min(added) < 0:
        raise NotMergeableError(f"{learner.name}: a state has seen fewer examples than the base it started from")
    if len(states) == 1:
        return states[0]
    increments = [s._replace(n_seen=np.asarray(a, dtype=np.int64)) for s, a in zip(states, added)]
    merged = learner.merge(increments)
    return merged._replace(n_seen=np.asarray(n_base + sum(added), dtype=np.int64))
