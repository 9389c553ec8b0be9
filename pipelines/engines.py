"""Build the real Beam runners of local runs and tests into okl's cache (what ``make runners`` calls).

::

    python -m pipelines.engines install prism     # or: flink, all
    python -m pipelines.engines path prism        # print the cached path (exit 1 when absent)

The command line of :mod:`pipelines.local_runners` (Prism built with ``go install``, a
Flink job server from Maven Central).
"""

from __future__ import annotations

import logging
import sys

from pipelines.cli import Parser, main as command_main, prog
from pipelines.local_runners import RUNNERS, EngineUnavailable

__all__ = ["build_parser", "main"]


def build_parser() -> Parser:
    """The command line of ``engines`` (:mod:`pipelines.cli`'s conventions)."""
    parser = Parser(prog=prog("engines"), description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "path"])
    parser.add_argument("engine", choices=[*RUNNERS, "all"])
    parser.add_argument("--if_available", action="store_true",
                        help="skip (exit 0) when a needed tool is not on the PATH")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.engines {install,path} {prism,flink,all}``; returns the exit code.

    ``install`` builds what is missing and prints each path; ``--if_available`` turns a
    missing tool (``go``, ``java``, ``mvn``) into a one-line note and exit code 0, so that
    ``make runners`` goes on without that runner. ``path`` prints the cached path, or
    exits with 1 when it is not built.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    code = 0
    for name in list(RUNNERS) if args.engine == "all" else [args.engine]:
        if args.command == "path":
            path = RUNNERS[name](build=False)
            if path is None:
                print(f"{name}: not built (python -m pipelines.engines install {name})", file=sys.stderr)
                code = 1
            else:
                print(path)
            continue
        try:
            print(RUNNERS[name](build=True))
        except EngineUnavailable as err:
            missing_tool = "is not on the PATH" in str(err)
            print(f"{name}: {'skipped, ' if missing_tool and args.if_available else ''}{err}", file=sys.stderr)
            if not (missing_tool and args.if_available):
                code = 1
    return code


if __name__ == "__main__":
    command_main(main, "engines")
