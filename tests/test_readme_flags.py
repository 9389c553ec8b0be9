"""Every flag a command of the README or of the docs site (docs/*.md) uses exists in that
command's ``--help`` (or is a Beam pipeline option, for the commands that pass those to Beam)."""

import pathlib
import re

import pytest

from pipelines import engines, learners, predict, prepare, report, reproduce, sweep, train
from pipelines.common import UsageError, unknown_to_beam

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
PARSERS = {"train": train.build_parser, "predict": predict.build_parser, "prepare": prepare.build_parser,
           "sweep": sweep.build_parser, "report": report.build_parser, "reproduce": reproduce.build_parser,
           "engines": engines.build_parser, "learners": learners.build_parser}
TAKES_BEAM_OPTIONS = {("train", None), ("predict", None), ("prepare", "mnist8m")}
COMMAND = re.compile(r"(?:^|[\s`(])(?:okl |(?:\S*/)?python -m pipelines\.)(\w+)((?: [^`#\n]*)?)")


def _commands():
    """(command, sub-command, flags) of every command line of the README and the docs: code
    blocks (continued with a backslash) and inline code."""
    text = "\n".join(page.read_text() for page in DOCS)
    found = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            found += COMMAND.findall(line.split(" # ")[0])
    for span in re.findall(r"`([^`\n]+)`", text):
        found += COMMAND.findall(span)
    for command, rest in found:
        if command not in PARSERS:
            continue
        words = rest.split()
        sub = words[0] if words and command in ("prepare", "report") and not words[0].startswith("-") else None
        flags = sorted({w.split("=")[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9_]*(=.*)?", w)})
        yield command, sub, flags


def _help(command: str, sub: str | None) -> str:
    parser = PARSERS[command]()
    subs = next((a.choices for a in parser._actions if isinstance(a.choices, dict)), {})
    if sub in subs:  # else a placeholder such as KIND: the command's own help
        parser = subs[sub]
    return parser.format_help()


CASES = sorted({(c, s, f) for c, s, flags in _commands() for f in flags})


def test_the_readme_has_commands_of_every_cli():
    assert {c for c, _, _ in _commands()} == set(PARSERS)
    assert len(CASES) > 60


@pytest.mark.parametrize("command, sub, flag", CASES)
def test_readme_flag_is_in_the_commands_help(command, sub, flag):
    if re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", _help(command, sub)):
        return
    assert (command, sub) in TAKES_BEAM_OPTIONS and _beam_defines(flag), \
        f"README or docs: `{command} {sub or ''} {flag}` is neither in its --help nor a Beam pipeline option"


def _beam_defines(flag: str) -> bool:
    try:
        return unknown_to_beam([f"{flag}=x"]) == []
    except UsageError:  # defined, and x is not one of its values
        return True
