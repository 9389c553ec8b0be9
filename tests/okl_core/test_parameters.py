"""The parameter declarations (okl_core.parameters) are true of every registered learner's config.

Every config field is declared; each declared range is what the config's own validation
does: the values at and just inside each end are accepted, those just outside it (and values
of the wrong kind) are refused with a ValueError; each option is accepted and the config's
refusal of another value lists exactly the declared options; each relation between fields
is refused when broken and, where a boundary value needs it, another field's in-range value
makes the config valid again.
"""

import dataclasses
import math
import re

import numpy as np
import pytest

from okl_core.parameters import BANDWIDTH, Boolean, Described, Interval, Options, declaration, relations
from okl_core.registry import learner_class, learner_names

NAMES = learner_names()


def _config(name):
    return learner_class(name).config_class


def _base(name):
    """A valid parameter set: small conformance values and the required fields."""
    cls = learner_class(name)
    params = {"n_inputs": 3, **cls.conformance_params}
    for field in dataclasses.fields(cls.config_class):
        if field.default is dataclasses.MISSING and field.name not in params:
            params[field.name] = 3 if field.name == "n_classes" else 100
    return params


def _complete(name, params):
    """Every field's value: ``params`` over the defaults (what a relation reads)."""
    out = {f.name: f.default for f in dataclasses.fields(_config(name)) if f.default is not dataclasses.MISSING}
    return {**out, **params}


def _refusal(name, params):
    """The config's ValueError message for ``params``, or None when it accepts them."""
    try:
        _config(name)(**params)
    except ValueError as err:
        return str(err)
    return None


def _samples(name, field):
    """``(accepted, refused)`` overrides (mappings of field values) of the declaration of ``field``."""
    declared = declaration(name, field.name)
    constraint = declared.constraint
    if isinstance(constraint, Described):
        accepted, refused = [dict(a) for a in constraint.accepted], [dict(r) for r in constraint.refused]
    else:
        good, bad = constraint.samples()
        accepted, refused = [{field.name: v} for v in good], [{field.name: v} for v in bad]
        (accepted if declared.none_means else refused).append({field.name: None})
    if field.default is not dataclasses.MISSING:
        accepted.append({field.name: field.default})
    return accepted, refused


def _relations_hold(name, params):
    return [r for r in relations(name) if not r.holds(_complete(name, params))]


def _check_accepted(name, base, override):
    """``base | override`` is accepted, or -- when it breaks a declared relation -- refused,
    and made valid by another value in range of a field the relation reads."""
    params = {**base, **override}
    broken = _relations_hold(name, params)
    if not broken:
        assert _refusal(name, params) is None, f"{name}: {override} is declared valid but refused: {_refusal(name, params)}"
        return
    assert _refusal(name, params) is not None, f"{name}: {override} breaks {broken[0].text} but is accepted"
    fields = {f.name: f for f in dataclasses.fields(_config(name))}
    for relation in broken:
        for other in relation.fields:
            if other in override:
                continue
            for fix in _samples(name, fields[other])[0]:
                repaired = {**params, **fix}
                if not _relations_hold(name, repaired):
                    assert _refusal(name, repaired) is None, f"{name}: {override} with {fix} is declared valid but refused: {_refusal(name, repaired)}"
                    return
    raise AssertionError(f"{name}: no value in range of {broken[0].fields} makes {override} valid ({broken[0].text})")


@pytest.mark.parametrize("name", NAMES)
def test_every_config_field_is_declared(name):
    undeclared = [f.name for f in dataclasses.fields(_config(name)) if declaration(name, f.name) is None]
    assert undeclared == []


@pytest.mark.parametrize("name", NAMES)
def test_declared_ranges_are_what_the_config_accepts(name):
    base = _base(name)
    assert _refusal(name, base) is None
    checked = 0
    for field in dataclasses.fields(_config(name)):
        accepted, refused = _samples(name, field)
        for override in accepted:
            _check_accepted(name, base, override)
        for override in refused:
            assert _refusal(name, {**base, **override}) is not None, f"{name}: {override} is outside the declared range but accepted"
        checked += len(accepted) + len(refused)
    assert checked >= 5 * len(dataclasses.fields(_config(name)))


@pytest.mark.parametrize("name", NAMES)
def test_options_are_exactly_the_configs_choices(name):
    """A refused option's message names the valid ones: they are the declared options, no more, no fewer."""
    base = _base(name)
    for field in dataclasses.fields(_config(name)):
        constraint = declaration(name, field.name).constraint
        if not isinstance(constraint, Options):
            continue
        message = _refusal(name, {**base, field.name: "no_such_option"})
        quoted = set(re.findall(r"'(\w+)'", message)) - {"no_such_option", field.name}
        listed = quoted or {o for o in constraint.values if re.search(rf"\b{o}\b", message)}
        assert listed == set(constraint.values), f"{name}.{field.name}: {message}"


@pytest.mark.parametrize("name", sorted({n for n in NAMES if relations(n)}))
def test_relations_are_refused_when_broken(name):
    for relation in relations(name):
        params = {**_base(name), **relation.violation}
        assert not relation.holds(_complete(name, params))
        message = _refusal(name, params)
        assert message is not None, f"{name}: {relation.violation} breaks {relation.text} but is accepted"


def test_interval_samples_sit_on_the_edges():
    """The values the declaration test feeds: exactly at, just inside and just outside each end."""
    accepted, refused = Interval(0.0, 1.0, low_closed=False).samples()
    assert accepted == [math.nextafter(0.0, 1.0), 1.0]
    assert refused[-2:] == [0.0, math.nextafter(1.0, 2.0)]
    accepted, refused = Interval(0, 2**64, high_closed=False, integer=True).samples()
    assert accepted == [0, 1, 2**64 - 1] and {-1, 2**64, 0.5, True} <= set(refused)
    accepted, refused = Interval(2, integer=True, multiple_of=2).samples()
    assert accepted == [2, 4] and {0, 3} <= set(refused)
    assert Interval(0.0, math.inf, high_closed=False).text() == "number >= 0"
    assert Interval(0.0, math.inf, low_closed=False, high_closed=True).text() == "(0, inf]"
    assert Interval(0, 2**64, high_closed=False, integer=True).text() == "[0, 2**64) (integer)"


@pytest.mark.parametrize("constraint, value, refusal", [
    (Interval(1, integer=True), 0, "budget must be an integer >= 1, got 0"),
    (Interval(1, integer=True), 2.0, "budget must be an integer >= 1, got 2.0"),
    (Interval(0, 2**64, high_closed=False, integer=True), 2**64, "budget must be < 2**64, got 18446744073709551616"),
    (Interval(2, integer=True, multiple_of=2), 5, "budget must be an even integer >= 2, got 5"),
    (Interval(0.0, math.inf, low_closed=False, high_closed=False), math.inf, "budget must be a finite number > 0, got inf"),
    (Interval(0.0, math.inf, low_closed=False, high_closed=True), True, "budget must be a number > 0 (inf: no bound), got True"),
    (Interval(0.0, 1.0, high_closed=False), 1.0, "budget must be a number in [0, 1), got 1.0"),
    (Options(("b", "a")), "c", "budget must be one of ['a', 'b'], got 'c'"),
    (Boolean(), 1, "budget must be true or false, got 1"),
])
def test_a_refusal_is_one_line_naming_the_parameter_and_its_values(constraint, value, refusal):
    assert constraint.refusal("budget", value) == refusal


def test_a_bandwidth_refuses_a_non_positive_value_in_its_own_words():
    assert BANDWIDTH.refusal("sigma", 0.0) == "sigma must be a finite number > 0, got 0.0"
    assert BANDWIDTH.refusal("sigma", 1e31) == "sigma must be a number in [1e-30, 1e+30] (a kernel bandwidth), got 1e+31"
    assert BANDWIDTH.refusal("sigma", 1e30) is None


def test_a_config_is_checked_as_its_own_learner_declares_it():
    """The same field, two readings: ridge learners need lam > 0, OMKL takes lam = 0; numpy scalars pass as their values."""
    with pytest.raises(ValueError, match=r"^lam must be a finite number > 0, got 0.0$"):
        learner_class("krr").config_class(n_inputs=2, lam=0.0)
    assert learner_class("omkl_gf").config_class(n_inputs=2, lam=0.0).lam == 0.0
    with pytest.raises(ValueError, match=r"^rank must be <= budget \(4\), got 5$"):
        learner_class("nogd").config_class(n_inputs=2, budget=4, rank=5)
    assert learner_class("nogd").config_class(n_inputs=np.int64(2), budget=4, rank=np.int32(4)).rank == 4


def test_learners_sharing_a_config_must_read_its_fields_alike():
    """kernel_awv and krr share one config and declare it alike; a learner reading lam otherwise may not share it."""
    config = learner_class("krr").config_class
    assert config.learner_name in {"kernel_awv", "krr"} and learner_class("kernel_awv").config_class is config
    with pytest.raises(TypeError, match="share ExactRidgeConfig but declare its parameters differently"):
        type("OtherRidge", (learner_class("krr"),), {"name": "fogd"})
    assert config.learner_name in {"kernel_awv", "krr"}
