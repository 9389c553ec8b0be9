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

__all__ = ["merge_states", "mix_states", "check_mergeable", "NotMergeableError"]


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


def mix_states(learner: Learner, local, merged, weight: float):
    """Mix a merged model into a shard's local state (streaming model mixing).

    For averaging learners (``merge_semantics = 'average'``) every state array except
    ``n_seen`` becomes ``(1 - weight) * local + weight * merged``; ``n_seen`` stays the
    local one (the shard's own examples, so later merges still weight shards by the
    examples they saw). ``weight = 0`` returns ``local`` unchanged (the shard is then the
    sequential fold of its own rows); ``weight = 1`` replaces it by ``merged``.

    Limits: the convex combination is meaningful only where a model is a point in a
    fixed parameter space (random-feature learners: same seed, same features); states
    whose arrays differ in shape (budget learners holding support vectors) or whose
    merge is a sum of sufficient statistics (``'sum'``: mixing would count examples
    twice) or impossible (``'none'``) raise :class:`NotMergeableError`. Integer arrays
    (counters) are taken from ``local``.

    Parameters
    ----------
    learner : Learner
    local, merged : states of ``learner``
    weight : float in [0, 1]
    """
    weight = float(weight)
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"mixing weight must be in [0, 1], got {weight}")
    for s in (local, merged):
        if not isinstance(s, learner.state_class):
            raise NotMergeableError(f"{learner.name}: cannot mix a {type(s).__name__}")
    if weight == 0.0:
        return local
    if learner.merge_semantics != "average":
        raise NotMergeableError(
            f"{learner.name}: its merge is {learner.merge_semantics!r}, not an average of models; "
            "mixing a merged model into a shard is defined only for averaging learners (use mixing weight 0)"
        )
    fields = {}
    for name, a in local._asdict().items():
        b = getattr(merged, name)
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if name == "n_seen" or a_arr.dtype.kind not in "fc":
            fields[name] = a
            continue
        if a_arr.shape != b_arr.shape:
            raise NotMergeableError(f"{learner.name}: state array {name!r} has shape {a_arr.shape} locally and {b_arr.shape} merged; cannot mix")
        fields[name] = ((1.0 - weight) * a_arr + weight * b_arr).astype(a_arr.dtype, copy=False)
    return learner.state_class(**fields)
