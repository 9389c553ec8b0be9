"""Search spaces of a sweep: parsed from ``name=values`` assignments or a JSON/YAML file.

Syntax of one assignment (the command line's ``--grid`` tokens; a string value in a file
is read the same way)::

    sigma=2,4,8          a list of values (grid axis; random search picks one uniformly)
    n_components=400     a single value (fixed for every point)
    eta=1e-4:1e-1        log-uniform range (random search only; both ends > 0)
    theta=0.5..2         uniform range (random search only)

Ranges of integer parameters (the learner's config field is an ``int``, or a file says
``"int": true``) draw rounded integers, and must hold one; whole numbers written as floats
(``n_components=1e2``) are taken as integers for them. A list holds each value once
(``2`` and ``2.0`` are one value) and no empty value (``sigma=2,,4``).

Values are JSON scalars when they parse as JSON (``8`` -> int, ``0.5`` -> float,
``true``/``false``/``null``), else strings (``kernel=gaussian,laplacian``).

A file is a JSON object (or YAML mapping, when PyYAML is installed) of ``name: value``,
``name: [values]``, ``name: "lo:hi"`` or ``name: {"low": lo, "high": hi, "log": true,
"int": false}``.

:meth:`SearchSpace.grid` expands the Cartesian product (the first axis varies slowest);
:meth:`SearchSpace.sample` draws a seeded random search: sample ``i`` takes one uniform
per axis (axes in sorted name order) from ``okl_core.random.block_bit_generator(seed, i)``,
so the same seed gives the same points on every machine. Sampled floats are rounded to 6
significant digits (readable tables, stable keys).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
from typing import Any, Union

from okl_core.random import block_bit_generator, uniform_open

__all__ = ["Choice", "Range", "SearchSpace", "parse_value", "parse_assignment", "point_key", "whole_as_int"]


@dataclasses.dataclass(frozen=True)
class Choice:
    """A finite list of values."""

    values: tuple

    def __post_init__(self):
        if not self.values:
            raise ValueError("a list of values must not be empty")
        seen = set()
        for value in self.values:
            key = (type(value) is bool, whole_as_int(value)) if isinstance(value, (int, float)) else (None, json.dumps(value))
            if key in seen:
                raise ValueError(f"value {json.dumps(value)} is listed twice")
            seen.add(key)


@dataclasses.dataclass(frozen=True)
class Range:
    """A continuous (or integer) range for random search."""

    low: float
    high: float
    log: bool = True
    integer: bool = False

    def __post_init__(self):
        for end in (self.low, self.high):
            if isinstance(end, bool) or not isinstance(end, (int, float)) or not math.isfinite(end):
                raise ValueError(f"range ends must be finite numbers, got {self.low!r}, {self.high!r}")
        if not self.low < self.high:
            raise ValueError(f"range low must be < high, got {self.low!r} >= {self.high!r}")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-uniform range needs low > 0, got {self.low!r} (use lo..hi for a uniform range)")
        if self.integer and math.ceil(self.low) > math.floor(self.high):  # every draw would round outside it
            raise ValueError(f"an integer range must hold an integer, got [{self.low!r}, {self.high!r}]")

    def draw(self, u: float):
        """The value at quantile ``u`` in (0, 1)."""
        if self.log:
            value = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            value = self.low + u * (self.high - self.low)
        if self.integer:
            return int(min(max(round(value), math.ceil(self.low)), math.floor(self.high)))
        return float(f"{min(max(value, self.low), self.high):.6g}")


Dimension = Union[Choice, Range]


def whole_as_int(value):
    """``value`` with a whole float written as an int (``8.0`` -> ``8``): one spelling of one number."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def parse_value(text: str) -> Any:
    """A JSON scalar when ``text`` parses as one, else the string itself."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, (list, dict)):
        raise ValueError(f"value {text!r} must be a scalar")
    return value


def _parse_number(text: str, where: str) -> int | float:
    value = parse_value(text.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: range end {text!r} is not a number")
    return value


def parse_dimension(text: str, where: str = "value") -> Dimension:
    """Parse the right-hand side of an assignment (see the module docstring)."""
    text = text.strip()
    if not text:
        raise ValueError(f"{where}: empty value")
    for sep, log in (("..", False), (":", True)):
        if sep in text and "," not in text:
            low, _, high = text.partition(sep)
            lo, hi = _parse_number(low, where), _parse_number(high, where)
            try:
                return Range(lo, hi, log=log)
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
    values = [v.strip() for v in text.split(",")]
    if "" in values:
        raise ValueError(f"{where}: empty value in the list (separate values by single commas)")
    try:
        return Choice(tuple(parse_value(v) for v in values))
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def parse_assignment(token: str) -> tuple[str, Dimension]:
    """Parse ``name=values`` into ``(name, dimension)``; errors name the token."""
    name, sep, rhs = token.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise ValueError(f"--grid: expected name=values, got {token!r}")
    return name, parse_dimension(rhs, where=f"--grid {token!r}")


def _dimension_from_file(name: str, value: Any, path: str) -> Dimension:
    where = f"{path}: {name!r}"
    if isinstance(value, str):
        return parse_dimension(value, where)
    if isinstance(value, list):
        if any(isinstance(v, (list, dict)) for v in value):
            raise ValueError(f"{where}: list values must be scalars")
        try:
            return Choice(tuple(value))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    if isinstance(value, dict):
        unknown = set(value) - {"low", "high", "log", "int"}
        if unknown or not {"low", "high"} <= set(value):
            raise ValueError(f"{where}: a range is {{'low', 'high', 'log', 'int'}}, got keys {sorted(value)}")
        for flag in ("log", "int"):
            if not isinstance(value.get(flag, False), bool):  # "no" would be true
                raise ValueError(f"{where}: {flag!r} must be true or false, got {json.dumps(value[flag])}")
        try:
            return Range(value["low"], value["high"], log=value.get("log", True), integer=value.get("int", False))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return Choice((value,))


def point_key(params: dict) -> str:
    """Canonical text of a parameter dict (sorted keys): identifies a point on resume."""
    return json.dumps(params, sort_keys=True)


class SearchSpace:
    """Named dimensions, in the order given.

    Parameters
    ----------
    dims : dict of str -> Choice or Range
    """

    def __init__(self, dims: dict[str, Dimension]):
        self.dims = dict(dims)

    @classmethod
    def from_tokens(cls, tokens: list[str]) -> "SearchSpace":
        """From command-line assignments; a name given twice is an error."""
        dims: dict[str, Dimension] = {}
        for token in tokens:
            name, dim = parse_assignment(token)
            if name in dims:
                raise ValueError(f"--grid: {name!r} is given more than once")
            dims[name] = dim
        return cls(dims)

    @classmethod
    def from_file(cls, path: str) -> "SearchSpace":
        """From a JSON object or (with PyYAML) a YAML mapping; errors name the file."""
        path = os.fspath(path)
        try:
            with open(path) as f:
                text = f.read()
        except OSError as err:
            raise ValueError(f"{path}: cannot read grid file ({err})") from None
        if path.endswith((".yaml", ".yml")):
            try:
                import yaml
            except ImportError:
                raise ValueError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or give the grid as JSON") from None
            try:
                raw = yaml.safe_load(text)
            except yaml.YAMLError as err:
                raise ValueError(f"{path}: not valid YAML ({err})") from None
        else:
            try:
                raw = json.loads(text)
            except ValueError as err:
                raise ValueError(f"{path}: not valid JSON ({err})") from None
        if not isinstance(raw, dict) or not raw:
            raise ValueError(f"{path}: a grid file must be a non-empty mapping of parameter -> values")
        return cls({str(k): _dimension_from_file(str(k), v, path) for k, v in raw.items()})

    def merged(self, other: "SearchSpace") -> "SearchSpace":
        """This space with ``other``'s dimensions added (a name in both is an error)."""
        both = sorted(set(self.dims) & set(other.dims))
        if both:
            raise ValueError(f"parameter(s) {both} given both in the grid file and on the command line")
        return SearchSpace({**self.dims, **other.dims})

    def with_integers(self, names) -> "SearchSpace":
        """This space with the ranges of ``names`` drawing integers and their whole values as ints (``1e2`` -> 100)."""
        dims: dict[str, Dimension] = {}
        for n, d in self.dims.items():
            try:
                if n not in names:
                    dims[n] = d
                elif isinstance(d, Range):
                    dims[n] = dataclasses.replace(d, integer=True)
                else:
                    dims[n] = Choice(tuple(whole_as_int(v) for v in d.values))
            except ValueError as err:
                raise ValueError(f"--grid {n}: {err} ({n} is an integer parameter)") from None
        return SearchSpace(dims)

    @property
    def swept(self) -> list[str]:
        """Names that vary (lists of more than one value, and ranges), in order."""
        return [n for n, d in self.dims.items() if isinstance(d, Range) or len(d.values) > 1]

    @property
    def has_ranges(self) -> bool:
        return any(isinstance(d, Range) for d in self.dims.values())

    def grid(self) -> list[dict]:
        """Every combination (first dimension slowest). Ranges are an error here."""
        ranges = [n for n, d in self.dims.items() if isinstance(d, Range)]
        if ranges:
            raise ValueError(f"{ranges} are ranges: give --samples N for a random search, or list values")
        names = list(self.dims)
        values = [d.values for d in self.dims.values() if isinstance(d, Choice)]  # every dimension: no range is left
        return [dict(zip(names, combo)) for combo in itertools.product(*values)]

    def sample(self, n: int, seed: int = 0) -> list[dict]:
        """``n`` distinct random points (fewer when the space is smaller), deterministic in ``seed``."""
        if n < 1:
            raise ValueError(f"--samples must be >= 1, got {n}")
        names = sorted(self.dims)
        points, seen = [], set()
        for i in range(50 * n):  # a finite space may hold fewer than n distinct points
            u = uniform_open(block_bit_generator(seed, i).random_raw(len(names)))
            point = {}
            for name, ui in zip(names, u):
                dim = self.dims[name]
                point[name] = dim.draw(float(ui)) if isinstance(dim, Range) else dim.values[min(int(ui * len(dim.values)), len(dim.values) - 1)]
            point = {name: point[name] for name in self.dims}  # user's order
            key = point_key(point)
            if key not in seen:
                seen.add(key)
                points.append(point)
                if len(points) == n:
                    break
        return points

    def describe(self) -> dict:
        """JSON-ready description (recorded with the results)."""
        out = {}
        for name, dim in self.dims.items():
            out[name] = list(dim.values) if isinstance(dim, Choice) else {"low": dim.low, "high": dim.high, "log": dim.log, "int": dim.integer}
        return out
