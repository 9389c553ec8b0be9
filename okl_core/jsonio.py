"""Strict JSON with numbers that are not finite: okl's JSON files stay readable by any parser.

A diverged run's errors are NaN or infinite; ``json.dumps`` would write them as bare
``NaN`` / ``Infinity``, which ``jq``, JavaScript and most parsers refuse. okl writes them
as the strings of :data:`NON_FINITE` (:func:`strict_json`) and reads them back as floats
(:func:`loads_json`): the run outputs written by ``transforms``, and every JSON file of
the experiments and commands above it.
"""

from __future__ import annotations

import json
import math

__all__ = ["NON_FINITE", "strict_json", "loads_json"]

NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How okl's JSON files write numbers that are not finite (a diverged run's errors): as these
strings, so the files stay strict JSON (``jq``, JavaScript and most parsers refuse a bare
``NaN``); :func:`loads_json` turns them back into floats."""


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _numbers(value):
    if isinstance(value, str):
        return NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def strict_json(value, **dumps) -> str:
    """``json.dumps`` that writes NaN and infinities as the strings of :data:`NON_FINITE`."""
    return json.dumps(_finite(value), allow_nan=False, **dumps)


def loads_json(text: str):
    """``json.loads``, with the strings of :data:`NON_FINITE` read back as floats."""
    return _numbers(json.loads(text))
