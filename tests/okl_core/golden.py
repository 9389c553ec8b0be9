"""Model files every learner wrote before a refactor, kept to prove that its bytes did not move.

Each case is a registered learner with its small conformance settings, once as declared and
once per other value of each of its option parameters (:class:`okl_core.parameters.Options`
and :class:`~okl_core.parameters.Boolean`), so that every branch of every per-row fold runs.
A case trains two shards from ``init`` in uneven batches (one row, then the rest; the budget
learners' budgets of 30 overflow), merges them where the learner merges, and mixes the merge
back into a shard where it mixes. The model file of each step's state is what is compared.

``golden_models.json`` records, for each case and step, the sha256 of the model file and of
each array in it, as written by the commit whose arithmetic is the reference, with OpenBLAS
pinned to its Haswell kernels (``OPENBLAS_CORETYPE=Haswell``; AVX-512 kernels round some
products differently). ``OPENBLAS_CORETYPE=Haswell python -m tests.okl_core.golden --write``
rewrites it: do that only where the bytes are meant to change, and say which and why.
``test_golden_models.py`` fails when any learner's bytes move.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys

import numpy as np

import okl_core
from okl_core.parameters import Boolean, Options, declaration
from okl_core.registry import learner_names
from okl_core.testing import conformance_learner, tiny_problem

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_FILE = os.path.join(HERE, "golden_models.json")


def _variants(name: str) -> list[tuple[str, dict]]:
    """``(case id, overrides)``: the declared settings, then each other option value alone."""
    base = conformance_learner(name)
    cases = [(name, {})]
    for field in dataclasses.fields(base.config):
        declared = declaration(name, field.name)
        if declared is None:
            continue
        constraint = declared.constraint
        current = getattr(base.config, field.name)
        if isinstance(constraint, Options):
            others = [v for v in constraint.values if v != current]
        elif isinstance(constraint, Boolean):
            others = [not current]
        else:
            continue
        for value in others:
            try:
                conformance_learner(name, **{field.name: value})
            except (ValueError, TypeError):  # a value the other settings rule out
                continue
            cases.append((f"{name}-{field.name}={value}", {field.name: value}))
    return cases


def golden_cases() -> list[tuple[str, str, dict]]:
    """``(case id, learner name, overrides)`` for every registered learner."""
    return [(case, name, overrides) for name in learner_names() for case, overrides in _variants(name)]


def _data(learner, n: int, seed: int):
    n_classes = getattr(learner.config, "n_classes", None) or 3
    return tiny_problem(learner.task, learner.config.n_inputs, n=n, n_classes=n_classes, seed=seed)


def _shard(learner, n: int, seed: int):
    X, y = _data(learner, n, seed)
    state, _ = learner.update(learner.init(), X[:1], y[:1])
    state, _ = learner.update(state, X[1:], y[1:])
    return state


def case_files(name: str, overrides: dict) -> dict[str, bytes]:
    """The model files of one case: ``shard`` (one shard), ``merged``, ``mixed`` where defined."""
    learner = conformance_learner(name, **overrides)
    a, b = _shard(learner, 150, seed=3), _shard(learner, 110, seed=4)
    files = {"shard": okl_core.model_bytes(learner, a)}
    if learner.merge_semantics != "none":
        merged = learner.merge([a, b])
        files["merged"] = okl_core.model_bytes(learner, merged)
        if not learner.mix_refusal_reason():
            files["mixed"] = okl_core.model_bytes(learner, learner.mix(b, merged, 0.5))
    return files


def _array_digests(data: bytes) -> dict[str, str]:
    """sha256 of each array of a model file (``__header__`` included), to say what moved."""
    import io

    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: hashlib.sha256(np.ascontiguousarray(npz[k]).tobytes()).hexdigest()[:16] for k in sorted(npz.files)}


def digests() -> dict[str, dict]:
    """``{"<case>/<step>": {"file": sha256 of the model file, "arrays": {name: short sha256}}}``."""
    out = {}
    for case, name, overrides in golden_cases():
        for step, data in case_files(name, overrides).items():
            out[f"{case}/{step}"] = {"file": hashlib.sha256(data).hexdigest(), "arrays": _array_digests(data)}
    return out


def write() -> None:
    """Rewrite :data:`GOLDEN_FILE` from this checkout's arithmetic (run with ``OPENBLAS_CORETYPE=Haswell``)."""
    with open(GOLDEN_FILE, "w") as f:
        json.dump(digests(), f, indent=1, sort_keys=True)
        f.write("\n")


def recorded() -> dict[str, dict]:
    """The digests :func:`write` recorded."""
    with open(GOLDEN_FILE) as f:
        return json.load(f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        json.dump(digests(), sys.stdout, sort_keys=True)
