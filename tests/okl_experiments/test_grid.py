"""Search-space parsing, grid expansion and the seeded random search."""

import json
import math

import pytest

from okl_core.random import block_bit_generator, uniform_open
from okl_experiments.grid import Choice, Range, SearchSpace, parse_assignment, parse_value


def test_values_parse_as_json_scalars_else_strings():
    assert parse_value("8") == 8 and isinstance(parse_value("8"), int)
    assert parse_value("0.5") == 0.5 and parse_value("1e-3") == 0.001
    assert parse_value("false") is False and parse_value("null") is None
    assert parse_value("gaussian") == "gaussian"


def test_assignments_lists_ranges_and_errors():
    assert parse_assignment("sigma=2,4,8") == ("sigma", Choice((2, 4, 8)))
    assert parse_assignment("kernel=gaussian") == ("kernel", Choice(("gaussian",)))
    assert parse_assignment("eta=1e-4:1e-1") == ("eta", Range(1e-4, 0.1, log=True))
    assert parse_assignment("theta=0.5..2") == ("theta", Range(0.5, 2, log=False))
    for bad, match in [("sigma", "name=values"), ("=3", "name=values"), ("eta=", "empty"),
                       ("eta=0:1", "low > 0"), ("eta=2:1", "low must be < high"), ("eta=a:1", "not a number")]:
        with pytest.raises(ValueError, match=match):
            parse_assignment(bad)
    with pytest.raises(ValueError, match="more than once"):
        SearchSpace.from_tokens(["eta=1", "eta=2"])


def test_grid_is_the_cartesian_product_first_axis_slowest():
    space = SearchSpace.from_tokens(["sigma=2,4", "eta=0.1,0.2,0.3", "n_components=64"])
    grid = space.grid()
    assert len(grid) == 6 and space.swept == ["sigma", "eta"]
    assert grid[0] == {"sigma": 2, "eta": 0.1, "n_components": 64}
    assert grid[3] == {"sigma": 4, "eta": 0.1, "n_components": 64}
    with pytest.raises(ValueError, match="--samples"):
        SearchSpace.from_tokens(["eta=1e-3:1"]).grid()


def test_random_search_is_seeded_and_follows_the_documented_draw():
    space = SearchSpace.from_tokens(["eta=1e-4:1e-1", "kernel=gaussian,laplacian", "theta=0..10"])
    a = space.sample(20, seed=3)
    assert a == space.sample(20, seed=3) and a != space.sample(20, seed=4)
    assert len({json.dumps(p, sort_keys=True) for p in a}) == 20
    for p in a:
        assert 1e-4 <= p["eta"] <= 0.1 and 0 <= p["theta"] <= 10 and p["kernel"] in ("gaussian", "laplacian")
    # Sample i: one uniform per axis from the generator keyed (seed, i), axes sorted by name.
    u = uniform_open(block_bit_generator(3, 0).random_raw(3))  # eta, kernel, theta
    assert a[0]["eta"] == float(f"{math.exp(math.log(1e-4) + u[0] * (math.log(0.1) - math.log(1e-4))):.6g}")
    assert a[0]["kernel"] == ("gaussian", "laplacian")[int(u[1] * 2)]
    # Log-uniform: about a third of the draws per decade.
    etas = [p["eta"] for p in SearchSpace.from_tokens(["eta=1e-4:1e-1"]).sample(600, seed=0)]
    assert 150 < sum(1e-3 <= e < 1e-2 for e in etas) < 250


def test_integer_ranges_and_small_finite_spaces():
    space = SearchSpace.from_tokens(["n_components=10:1000"]).with_integers({"n_components"})
    values = [p["n_components"] for p in space.sample(30, seed=1)]
    assert all(isinstance(v, int) and 10 <= v <= 1000 for v in values)
    # A finite space smaller than the request gives every point once.
    assert len(SearchSpace.from_tokens(["a=1,2", "b=3"]).sample(10, seed=0)) == 2


def test_grid_files_json_and_yaml(tmp_path):
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"sigma": [2, 4], "eta": "1e-3:1e-1", "theta": {"low": 1, "high": 5, "log": False},
                                "scaled": False}))
    space = SearchSpace.from_file(str(path))
    assert space.dims["sigma"] == Choice((2, 4)) and space.dims["scaled"] == Choice((False,))
    assert space.dims["eta"] == Range(1e-3, 0.1) and space.dims["theta"] == Range(1, 5, log=False)
    merged = space.merged(SearchSpace.from_tokens(["n_components=64"]))
    assert list(merged.dims) == ["sigma", "eta", "theta", "scaled", "n_components"]
    with pytest.raises(ValueError, match="both"):
        space.merged(SearchSpace.from_tokens(["sigma=1"]))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json"):
        SearchSpace.from_file(str(bad))
    yaml = pytest.importorskip("yaml")
    ypath = tmp_path / "grid.yaml"
    ypath.write_text(yaml.safe_dump({"sigma": [2, 4], "eta": "1e-3:1e-1"}))
    assert SearchSpace.from_file(str(ypath)).dims == {"sigma": Choice((2, 4)), "eta": Range(1e-3, 0.1)}
