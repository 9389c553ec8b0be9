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

import pytest

from okl_core.parameters import Described, Interval, Options, declaration, relations
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
