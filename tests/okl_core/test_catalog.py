"""okl_core.describe_learner and the texts made from it: generated from the learner classes.

Each description is checked against the class it describes (config fields, types and
defaults as the config itself holds them, merge and mix declarations, the task a built
learner reports), and docs/learners.md against a regeneration.
"""

import dataclasses
import pathlib
import re

import pytest

import okl_core
from okl_core import testing
from okl_core.catalog import MARKDOWN_COMMAND, learner_text, learners_markdown, learners_text
from okl_core.parameters import declaration

NAMES = okl_core.learner_names()
DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "learners.md"


@pytest.mark.parametrize("name", NAMES)
def test_parameters_are_the_configs_fields_with_their_types_and_defaults(name):
    d = okl_core.describe_learner(name)
    cls = okl_core.learner_class(name)
    fields = dataclasses.fields(cls.config_class)
    assert [p.name for p in d.parameters] == [f.name for f in fields]
    assert [p.type for p in d.parameters] == [str(f.type) for f in fields]
    required = {p.name: 3 if p.name == "n_classes" else 100 for p in d.parameters if p.required}
    assert "n_inputs" in required
    config = cls.config_class(**required)  # every other field at its default
    for p in d.parameters:
        if not p.required:
            assert getattr(config, p.name) == p.default or (p.default != p.default and getattr(config, p.name) != getattr(config, p.name))
        assert p.range == declaration(name, p.name).range_text() or p.range.startswith(declaration(name, p.name).range_text() + "; ")
        assert p.meaning == declaration(name, p.name).meaning
        assert p.runtime == (p.name in cls.runtime_fields)


@pytest.mark.parametrize("name", NAMES)
def test_merge_mix_and_task_are_the_learners(name):
    d = okl_core.describe_learner(name)
    learner = testing.conformance_learner(name)
    assert (d.name, d.class_name, d.merge, d.mixable) == (name, type(learner).__name__, learner.merge_semantics, learner.mixable)
    assert learner.task in d.tasks
    assert d.family == type(learner).__module__.removeprefix("okl_core.learners.").split(".")[0]  # a family's package: oks
    if not learner.mixable:
        assert d.mix == "no: " + learner.mix_refusal_reason()
    # what users read names no project file, reST role or registry aside
    for text in (d.summary, d.paper, d.headline()):
        assert text and not re.search(r"spec/|:class:|:meth:|``|registry", text), text


def test_tasks_chosen_by_a_parameter_are_every_task_its_values_give():
    expected = {
        "fogd": (("binary",), None),
        "mfogd": (("multiclass",), None),
        "fogd_r": (("regression",), None),
        "dsg": (("binary", "multiclass", "regression"), "loss"),
        "oks_pp": (("binary", "regression"), "loss"),
        "ioks": (("binary", "regression"), "loss"),
        "krr": (("binary", "regression"), "task"),
        "omkl_gf": (("regression",), None),
    }
    for name, (tasks, by) in expected.items():
        d = okl_core.describe_learner(name)
        assert (d.tasks, d.task_by) == (tasks, by), name
    assert okl_core.make_learner("dsg", n_inputs=2, loss="softmax", n_classes=3).task == "multiclass"


def test_mix_text_says_how_each_state_field_mixes():
    assert okl_core.describe_learner("fogd").mix == "yes: w: (1 - w) local + w merged; n_seen: local"
    assert okl_core.describe_learner("rf_ioks").mix == (
        "yes: w, q, grad_sq_sum: (1 - w) local + w merged; eta, rho: elementwise maximum; n_used, n_seen: local")
    assert okl_core.describe_learner("dsg").mix == "yes: coef, scale, avg_coef, t: the learner's own rule; n_seen: local"


def test_unknown_learner_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match=r"unknown learner 'nope'; choose from \['bogd'"):
        okl_core.describe_learner("nope")


def test_learner_text_has_each_parameter_its_default_range_and_meaning():
    text = learner_text("nogd")
    assert text.startswith("nogd: Binary NOGD with the hinge loss.\npaper: Nystrom Online Gradient Descent (Lu, Hoi et al., JMLR 2016).\n")
    assert "  budget (int, default 100): landmarks B: the kernel phase's support vectors\n      valid: integer >= 1; rank <= budget\n" in text
    assert "  n_inputs (int, required): " in text
    assert "  eig_rtol (float, default 1e-10): " in text and "      valid: [0, 1)\n" in text
    assert "merge: none -- one shard only; more shards are refused at launch\n" in text
    dsg = learner_text("dsg")
    assert "  feature_cache_mb (int, default 256): memory bound for cached frequency blocks, in MiB (runtime: not part of the model)\n" in dsg
    assert "      valid: integer >= 2, or None (not a softmax learner); n_classes required with loss softmax\n" in dsg


def test_learners_text_has_one_row_per_learner():
    lines = learners_text().splitlines()
    assert lines[0].split() == ["learner", "task", "merge", "mix", "algorithm", "(paper)"]
    rows = lines[1:1 + len(NAMES)]
    assert [r.split()[0] for r in rows] == NAMES
    assert rows[NAMES.index("fogd")].split()[1:4] == ["binary", "average", "yes"]


def test_markdown_tables_have_five_cells_in_every_row():
    for line in learners_markdown().splitlines():
        if line.startswith("|"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 6, line


def test_docs_page_is_the_generated_one():
    """docs/learners.md is regenerated by the command at its top; the committed page is current."""
    committed = DOCS.read_text(encoding="utf-8")
    assert MARKDOWN_COMMAND in committed.splitlines()[0]
    assert committed == learners_markdown(), f"docs/learners.md is out of date: run `{MARKDOWN_COMMAND}`"


def test_an_unknown_parameter_points_to_the_description():
    with pytest.raises(ValueError, match=r"^fogd_r: unknown parameter\(s\) \['budget'\]; valid: \[.*\] \(okl learners fogd_r describes each\)$"):
        okl_core.make_learner("fogd_r", n_inputs=2, budget=3)


def test_a_learner_of_ones_own_is_described_with_its_undeclared_fields_and_data_defaults():
    """A subclass that is not registered: its class describes it; a new field has no declaration."""
    from okl_core.learners.fogd import FOGD, FOGDConfig

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WarmConfig(FOGDConfig):
        """Binary FOGD with a warm start."""

        data_defaults = {"sigma": "median"}
        warmup: int = 10

    class Warm(FOGD):
        """FOGD that waits (Doe 2031)."""

        name = "warm_fogd"
        config_class = WarmConfig

    d = okl_core.describe_learner(Warm)
    assert d.name == "warm_fogd" and d.summary == "FOGD that waits (Doe 2031)." and d.headline() == "FOGD that waits (Doe 2031)"
    warmup = d.parameters[-1]
    assert (warmup.name, warmup.type, warmup.default, warmup.range, warmup.meaning) == ("warmup", "int", 10, "not declared", "")
    sigma = next(p for p in d.parameters if p.name == "sigma")
    assert sigma.data_default == "median" and sigma.default_text() == "median from the data (8.0 without)"
    assert d.tasks == ("binary",) and d.mixable
    assert "warm_fogd" not in okl_core.learner_names()
