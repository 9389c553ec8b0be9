"""Every registered learner described: task, paper, merge and mix, and each parameter's meaning.

:func:`describe_learner` is generated from the learner's class (its docstring, its merge and
mix declarations, its config dataclass's fields, types and defaults) and from the
parameter declarations of :mod:`okl_core.parameters`; nothing here is written by hand per
learner. ``okl learners`` prints :func:`learners_text`, ``okl learners NAME`` and
``okl train --learner NAME --help`` print :func:`learner_text`, and ``docs/learners.md`` is
:func:`learners_markdown` (``okl learners --markdown``).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any

from okl_core.derived import config_data_defaults
from okl_core.labels import TASKS
from okl_core.learners.base import Learner
from okl_core.parameters import Options, declaration, relations
from okl_core.registry import learner_class, learner_names

__all__ = ["LearnerDescription", "ParameterDescription", "describe_learner", "learner_text", "learners_markdown", "learners_text"]

_UNDECLARED = "not declared"


@dataclasses.dataclass(frozen=True)
class ParameterDescription:
    """One parameter of a learner.

    Attributes
    ----------
    name : str
        The config field (``okl train --param NAME=VALUE``).
    type : str
        Its annotation (``int``, ``float``, ``str``, ``bool``, ``float | None``).
    default : object
        Its default value; ``None`` with ``required`` set when it has none.
    required : bool
        No default: the caller gives it (``okl train`` fills ``n_inputs``, ``n_classes``
        and ``horizon`` from the data set).
    range : str
        The valid values in words (``number > 0``, ``one of a, b``, ``integer >= 1; rank <= budget``).
    meaning : str
        One line of meaning.
    runtime : bool
        The field does not change the model (a cache size, a cap): merges ignore it.
    data_default : object
        The default derived from the data where the config declares one (its
        ``data_defaults``: ``"median"`` for a bandwidth, ``"n"`` for a horizon), else None;
        ``default`` is then what a learner built without data takes.
    """

    name: str
    type: str
    default: Any
    required: bool
    range: str
    meaning: str
    runtime: bool
    data_default: Any = None

    def default_text(self) -> str:
        """The default as the tables show it (``required``, ``0.002``, ``gaussian``, ``median from the data (8.0 without)``)."""
        fixed = "required" if self.required else str(self.default)
        if self.name == "kernels" and self.data_default is not None:  # the dictionary in units of the median
            return f"{fixed}, times the median from the data (as written without)"
        return fixed if self.data_default is None else f"{self.data_default} from the data ({fixed} without)"


@dataclasses.dataclass(frozen=True)
class LearnerDescription:
    """What :func:`describe_learner` returns.

    Attributes
    ----------
    name : str
        Registry name.
    class_name : str
        The learner class (``okl_core.learners.<family>.<class_name>``).
    family : str
        The module it lives in (``fogd``, ``budget``, ``oks``, ...).
    summary : str
        The first paragraph of the class's docstring: the algorithm (and, for most, its paper).
    paper : str
        The first sentence of its module's docstring: the paper or family it comes from.
    tasks : tuple of str
        The tasks it learns (several where a parameter chooses, see ``task_by``).
    task_by : str or None
        The parameter that chooses the task (``loss``, ``task``), None for one task.
    merge : str
        ``average``, ``sum`` or ``none`` (:attr:`okl_core.Learner.merge_semantics`).
    mixable : bool
        Whether a streaming shard can mix a merged model in (``--mix_weight``).
    mix : str
        How each state field mixes, or why the learner cannot mix.
    parameters : tuple of ParameterDescription
        Its config fields, in the config's order.
    """

    name: str
    class_name: str
    family: str
    summary: str
    paper: str
    tasks: tuple[str, ...]
    task_by: str | None
    merge: str
    mixable: bool
    mix: str
    parameters: tuple[ParameterDescription, ...]

    def headline(self) -> str:
        """The summary's first sentence up to its first colon, and the paper when that part cites none."""
        first = _first_sentence(self.summary).split(": ", 1)[0].rstrip(".")
        return first if re.search(r"\b(19|20)\d\d\b", first) else f"{first} -- {self.paper.rstrip('.')}"

    def task_text(self) -> str:
        """``binary``, or ``binary, regression (by loss)``."""
        text = ", ".join(self.tasks)
        return f"{text} (by {self.task_by})" if self.task_by else text


def describe_learner(name: str | type[Learner]) -> LearnerDescription:
    """Describe learner ``name`` (or a Learner subclass, registered or not) from its class and
    the parameter declarations; a field nobody declared has the range ``not declared``.

    Raises
    ------
    ValueError
        Unknown name (the message lists the valid ones).

    Examples
    --------
    >>> d = describe_learner("fogd")
    >>> d.tasks, d.merge, d.mixable
    (('binary',), 'average', True)
    >>> [p.name for p in d.parameters][:3]
    ['n_inputs', 'n_components', 'kernel']
    """
    cls = name if isinstance(name, type) else learner_class(name)
    name = cls.name
    fields = dataclasses.fields(cls.config_class)
    tasks, task_by = _tasks(cls, name, fields)
    return LearnerDescription(
        name=name,
        class_name=cls.__name__,
        family=_family_module(cls).rsplit(".", 1)[-1],
        summary=_summary(cls.__doc__ or ""),
        paper=_paper(cls),
        tasks=tasks,
        task_by=task_by,
        merge=cls.merge_semantics,
        mixable=bool(cls.mixable),
        mix=_mix_text(cls),
        parameters=tuple(_parameter(name, f, cls) for f in fields),
    )


def _family_module(cls: type[Learner]) -> str:
    """The module of ``cls``'s family: the module or package right under ``okl_core.learners``
    (``okl_core.learners.oks`` for a class in ``okl_core.learners.oks.learners``), else its own."""
    parts = cls.__module__.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["okl_core", "learners"] else cls.__module__


_CITATION = re.compile(r"\b(?:19|20)\d\d\b")


def _paper(cls: type[Learner]) -> str:
    """The first sentence of the docstring of the class's own module when it cites a paper (a
    year: ``budget.bogd``'s), else of its family's (``okl_core.learners.oks``'s)."""
    for module in (cls.__module__, _family_module(cls)):
        sentence = _first_sentence(_summary(sys.modules[module].__doc__ or ""))
        if _CITATION.search(sentence):
            return sentence
    return sentence


def _parameter(learner: str, field: dataclasses.Field, cls: type[Learner]) -> ParameterDescription:
    declared = declaration(learner, field.name)
    factory = field.default_factory
    required = field.default is dataclasses.MISSING and not callable(factory)
    default = field.default if field.default is not dataclasses.MISSING else factory() if callable(factory) else None
    range_text = declared.range_text() if declared else _UNDECLARED
    tied = [r.text for r in relations(learner, field.name)]
    if tied:
        range_text += "; " + "; ".join(tied)
    return ParameterDescription(
        name=field.name,
        type=field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type)),
        default=default,
        required=required,
        range=range_text,
        meaning=declared.meaning if declared else "",
        runtime=field.name in cls.runtime_fields,
        data_default=config_data_defaults(cls.config_class).get(field.name),
    )


def _summary(doc: str) -> str:
    """The docstring's first paragraph, one line, without reST roles and the registry name."""
    text = " ".join(doc.strip().split("\n\n")[0].split())
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([^`]+)`", r"``\1``", text)  # :class:`~a.b.X` -> ``X``
    text = re.sub(r"\s*\((?:registry(?: name)?\s*)?``\w+``\)", "", text)  # (registry name ``fogd``)
    text = re.sub(r";\s*registry(?: name)?\s*``\w+``", "", text)  # (Cavallanti et al. 2007; registry ``rbp``)
    text = re.sub(r"\s*\(spec/\w+\.md\)|;\s*spec/\w+\.md|\s*Follows spec/\w+\.md\.", "", text)  # the project's paper notes are not shipped
    sentences = [s for s in _SENTENCE_END.split(text) if not s.startswith(("Compiled", "Its fold is compiled"))]  # how, not what
    return " ".join(sentences).replace("``", "`")


_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z`(])")


def _first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text, maxsplit=1)[0]


def _tasks(cls: Any, name: str, fields: tuple[dataclasses.Field, ...]) -> tuple[tuple[str, ...], str | None]:
    """The tasks the learner learns: its config's fixed ``task``, or those its options give."""
    fixed = cls.config_class.__dict__.get("task")
    if isinstance(fixed, str):
        return (fixed,), None
    base = _valid_params(cls)
    found: dict[str, set[str]] = {}
    for field in fields:
        declared = declaration(name, field.name)
        if declared is None or not isinstance(declared.constraint, Options):
            continue
        for value in declared.constraint.values:
            task = _task_of(cls, {**base, field.name: value})
            if task is not None:
                found.setdefault(field.name, set()).add(task)
    chooser = [f for f, tasks in found.items() if len(tasks) > 1]
    tasks = set().union(*found.values()) if found else {_task_of(cls, base) or "?"}
    return tuple(t for t in (*TASKS, "?") if t in tasks), (chooser[0] if chooser else None)


def _valid_params(cls: Any) -> dict[str, Any]:
    """Small parameters every config accepts: the conformance ones and the required fields."""
    params = {"n_inputs": 2, **cls.conformance_params}
    for field in dataclasses.fields(cls.config_class):
        if field.default is dataclasses.MISSING and field.name not in params:
            params[field.name] = 3 if field.name == "n_classes" else 100
    return params


def _task_of(cls: Any, params: dict[str, Any]) -> str | None:
    names = {f.name for f in dataclasses.fields(cls.config_class)}
    for extra in ({}, {"n_classes": 3}):  # a multiclass loss needs its classes
        try:
            return cls.config_class(**{**params, **{k: v for k, v in extra.items() if k in names}}).task
        except ValueError:
            continue
    return None


def _mix_text(cls: Any) -> str:
    """How each state field mixes (from the learner's declarations), or why it cannot."""
    if not cls.mixable:
        return "no: " + cls.mix_refusal_reason()
    rules = {name: "(1 - w) local + w merged" for name in cls.averaged_fields}
    rules.update({name: "elementwise maximum" for name in cls.maximum_fields})
    rules.update({name: "local" for name in (*cls.counted_fields, *cls.summed_fields)})
    parts: dict[str, list[str]] = {}
    for name in cls.state_class._fields:
        parts.setdefault(rules.get(name, "the learner's own rule"), []).append(name)
    return "yes: " + "; ".join(f"{', '.join(names)}: {rule}" for rule, names in parts.items())


# -- text -----------------------------------------------------------------------------------

_MERGE_MEANING = {
    "average": "weighted average of the shards' models (by examples seen; shared seed, shared feature space)",
    "sum": "exact sum of sufficient statistics (equals training on the concatenated shards)",
    "none": "one shard only; more shards are refused at launch",
}


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    """Plain-text columns, the last one unpadded."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in [header, *rows]]


def learners_text() -> str:
    """``okl learners``: one line per registered learner (name, task, merge, mix, summary)."""
    rows = []
    for name in learner_names():
        d = describe_learner(name)
        rows.append([name, d.task_text(), d.merge, "yes" if d.mixable else "no", d.headline()])
    lines = _table(rows, ["learner", "task", "merge", "mix", "algorithm (paper)"])
    return "\n".join([*lines, "", "okl learners NAME: its parameters (type, default, valid values, meaning)"]) + "\n"


def learner_text(name: str) -> str:
    """``okl learners NAME``: the learner's summary, paper, task, merge, mix and parameters.

    Each parameter takes two lines: ``NAME (TYPE, default DEFAULT): MEANING`` and its valid values.
    """
    d = describe_learner(name)
    lines = [
        f"{d.name}: {d.summary}",
        f"paper: {d.paper}",
        f"task: {d.task_text()}",
        f"merge: {d.merge} -- {_MERGE_MEANING.get(d.merge, d.merge)}",
        f"mix: {d.mix}",
        "",
        "parameters (okl train --param NAME=VALUE; Python: okl_core.make_learner(NAME, ...)):",
    ]
    for p in d.parameters:
        default = "required" if p.required else f"default {p.default_text()}"
        lines += [f"  {p.name} ({p.type}, {default}): {_meaning(p)}", f"      valid: {p.range}"]
    return "\n".join(lines) + "\n"


def _meaning(p: ParameterDescription) -> str:
    return p.meaning + (" (runtime: not part of the model)" if p.runtime else "")


def _cell(text: str) -> str:
    """``text`` safe in a Markdown table cell: ``|``, ``*`` and ``<`` escaped outside code spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts are outside `code`
        parts[i] = parts[i].replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;")
    return "`".join(parts)


def _code(text: str) -> str:
    return f"`{text}`"


MARKDOWN_COMMAND = "okl learners --markdown > docs/learners.md"
"""The command that writes ``docs/learners.md`` (named at the top of the page)."""


def learners_markdown() -> str:
    """``docs/learners.md``: the list of learners and one section per learner with its parameters."""
    out = [
        f"<!-- Generated from the learner classes and okl_core/parameters.py by `{MARKDOWN_COMMAND}`; do not edit by hand. -->",
        "",
        "# Learners",
        "",
        "Every learner okl registers, described from the learners themselves. On the command line,",
        "`okl learners` prints the list below, and `okl learners fogd` (or any other name) one learner's",
        "parameters: type, default, valid values and meaning, as `okl train --learner fogd --help` does",
        "after its flags. In Python:",
        "",
        "```python",
        "import okl_core",
        "",
        'd = okl_core.describe_learner("fogd")',
        "print(d.task_text(), d.merge, d.mixable)     # binary average True",
        "for p in d.parameters:",
        "    print(p.name, p.type, p.default_text(), p.range, p.meaning)",
        "```",
        "",
        "**merge** is how shards combine (`okl train --num_shards k`, `--rounds`): *average* is a",
        "weighted average of the models by examples seen (the shards share the seed, so the same",
        "feature space); *sum* adds sufficient statistics exactly (the same as training on the",
        "concatenated shards); *none* allows one shard only. **mix** is whether a streaming shard can",
        "take in a merged model (`--mix_weight w > 0`); each learner's section says how each part of",
        "its state mixes, or why it cannot.",
        "",
        "| learner | task | merge | mix | algorithm (paper) |",
        "|---|---|---|---|---|",
    ]
    described = [describe_learner(name) for name in learner_names()]
    for d in described:
        out.append(f"| [`{d.name}`](#{d.name}) | {d.task_text()} | {d.merge} | {'yes' if d.mixable else 'no'} | {_cell(d.headline())} |")
    out += [
        "",
        "Parameters are set with `okl train --param NAME=VALUE` (or `--sigma`, `--eta`, `--n_components`,",
        "`--seed`), in a `--config` file, or as keyword arguments of `okl_core.make_learner`. `okl train`",
        "fills `n_inputs`, `n_classes` and `horizon` from the data set. A value outside its range is",
        "refused before any work, in one line naming the parameter:",
        "",
        "```bash",
        "okl train --learner fogd_r --param eta=-1    # okl train: error: eta must be a finite number > 0, got -1",
        "```",
    ]
    for d in described:
        out += ["", f"## {d.name}", "", _cell(d.summary), "",
                f"- paper: {_cell(d.paper)}",
                f"- task: {d.task_text()}",
                f"- merge: {d.merge} -- {_MERGE_MEANING.get(d.merge, d.merge)}",
                f"- mix: {_cell(d.mix)}",
                "",
                "| parameter | type | default | valid values | meaning |",
                "|---|---|---|---|---|"]
        for p in d.parameters:
            default = "required" if p.required else _code(p.default_text())
            kind = p.type.replace(" | ", " or ")  # a pipe would split the table cell
            out.append(f"| `{p.name}` | `{kind}` | {default} | {_cell(p.range)} | {_cell(_meaning(p))} |")
    return "\n".join(out) + "\n"

