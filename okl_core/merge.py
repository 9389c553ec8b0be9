"""Merging states trained on disjoint shards (one-shot or iterative parameter mixing) and
mixing a merged model into a shard (streaming).

States combine only when they belong to the same learner and live in the same feature
space: same learner name and same feature spec (kernel, sigma, dimensions, block size,
seed, generator version). The combination itself is the learner's own ``merge`` / ``mix``
(:class:`~okl_core.learners.base.Learner`: weighted average by examples seen for
random-feature learners, exact sums for PKAWV; learners that cannot merge or mix raise
:class:`~okl_core.learners.base.NotMergeableError`). States are combined in the order
given: callers sort them (by shard) for bit-for-bit determinism.
"""

from __future__ import annotations

import dataclasses

from okl_core.learners.base import Learner, NotMergeableError, mixing_weight

__all__ = ["merge_states", "mix_states", "check_mergeable", "check_mixable", "NotMergeableError"]


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


def check_mixable(learner: Learner) -> None:
    """Raise :class:`NotMergeableError` unless ``learner`` can mix a merged model into a shard.

    The message is one line naming the learner and why (its ``mix_refusal``, or what its
    ``merge_semantics`` implies). Streaming jobs call this at launch when ``--mix_weight > 0``.
    """
    if not learner.mixable:
        raise NotMergeableError(f"{learner.name} cannot mix a merged model into a shard: {learner.mix_refusal_reason()}")


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
        weight each state by the examples it added since ``base`` (passed to
        ``learner.merge`` as explicit weights), and the merged ``n_seen`` counts
        ``base``'s examples once; summing learners (``merge_semantics = 'sum'``) add only
        what each state learned since ``base``, so the result still equals training on the
        concatenated data.

    Notes
    -----
    A single state comes back unchanged (averaging learners; summing learners without a
    base).
    """
    states = list(states)
    if not states:
        raise NotMergeableError(f"{learner.name}: no states to merge")
    for other in learners or ():
        check_mergeable(learner, other)
    for i, s in enumerate(states):
        learner._check_combinable(s, f"state {i} to merge")
    if base is not None:
        learner._check_combinable(base, "base state")
    if base is None:
        return states[0] if len(states) == 1 else learner.merge(states)
    if learner.merge_semantics == "sum":
        return learner.merge(states, base=base)
    added = learner.merge_weights(states, base)  # NotMergeableError if a state is behind the base
    if len(states) == 1:
        return states[0]
    return learner.merge(states, weights=added, base=base)


def mix_states(learner: Learner, local, merged, weight: float):
    """Mix a merged model into a shard's local state: ``learner.mix(local, merged, weight)``.

    ``weight = 0`` returns ``local`` unchanged for every learner (the shard is then the
    sequential fold of its own rows); otherwise the learner must be mixable
    (:func:`check_mixable`). What mixing means is the learner's (see
    :meth:`~okl_core.learners.base.Learner.mix`): random-feature models blend their
    parameters, ``(1 - weight) local + weight merged``, exactly in function space (DSG on
    its true, scaled coefficients), and keep the local ``n_seen``.

    Parameters
    ----------
    learner : Learner
    local, merged : states of ``learner``
    weight : float in [0, 1]

    Raises
    ------
    ValueError
        ``weight`` outside [0, 1].
    NotMergeableError
        States of another learner, or a learner that cannot mix.
    """
    weight = mixing_weight(weight)
    learner._check_combinable(local, "local state")
    learner._check_combinable(merged, "merged state")
    if weight == 0.0:
        return local
    return learner.mix(local, merged, weight)
