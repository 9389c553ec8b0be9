"""The ``okl`` console script: ``okl train``, ``okl prepare``, ``okl predict``, ``okl sweep``,
``okl report``, ``okl reproduce``, ``okl engines``, ``okl learners``.

Each sub-command is the command line of ``python -m pipelines.<command>``, with the same
flags. Unlike ``python -m``, which puts the current directory first on ``sys.path``, a
console script starts with its own directory there, so the installed okl runs from any
folder -- one that holds its own ``pipelines/`` or ``transforms/`` package included.

The commands are looked up by name here (not imported): a command's imports (Beam, Dask)
load only when it runs, and no CLI module imports another (tests/test_layering.py).
"""

from __future__ import annotations

import importlib
import sys

from pipelines.cli import main as run_command, okl_names

__all__ = ["COMMANDS", "main"]

COMMANDS = {
    "train": ("run", "train an online kernel learner over a Parquet data set (Beam)"),
    "prepare": ("run", "build an okl data set (Parquet shards + dataset.json)"),
    "predict": ("run", "score a data set with a trained model (Beam RunInference)"),
    "sweep": ("run", "hyperparameter sweep on Dask"),
    "report": ("run", "figures of runs and sweeps"),
    "reproduce": ("run", "the papers' reference numbers"),
    "engines": ("main", "build the local Beam runners (Prism, Flink job server); start or stop a local Flink cluster"),
    "learners": ("run", "list the learners, or describe one learner's parameters"),
}
"""Sub-command -> (function of ``pipelines.<command>`` that runs it, one-line description)."""


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:{width}s}  {description}" for name, (_, description) in COMMANDS.items()]
    return "usage: okl COMMAND [ARGS...]   (okl COMMAND --help for its flags)\n\ncommands:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``okl COMMAND ARGS...``: run ``pipelines.<COMMAND>`` on ARGS."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        sys.exit(0 if argv else 2)
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"okl: error: unknown command {command!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        sys.exit(2)
    function = getattr(importlib.import_module(f"pipelines.{command}"), COMMANDS[command][0])
    with okl_names():
        run_command(function, command, rest)


if __name__ == "__main__":
    main()
