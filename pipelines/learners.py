"""List okl's learners, or describe one: ``okl learners [NAME]``.

::

    okl learners                  # every learner: task, merge, mix, algorithm and paper
    okl learners fogd             # its parameters: type, default, valid values, meaning
    okl learners --markdown > docs/learners.md

Everything printed is generated from the learner classes and the parameter declarations
(:mod:`okl_core.catalog`, :mod:`okl_core.parameters`). ``okl train --learner NAME --help``
ends with the same description of ``NAME``.
"""

from __future__ import annotations

from okl_core.catalog import learner_text, learners_markdown, learners_text
from okl_core.registry import learner_names
from pipelines.cli import Parser, UsageError, main, prog

__all__ = ["build_parser", "run"]


def build_parser() -> Parser:
    """The command line of ``learners`` (:mod:`pipelines.cli`'s conventions)."""
    parser = Parser(prog=prog("learners"), description="List okl's learners, or describe one learner's parameters.")
    parser.add_argument("name", nargs="?", help="a learner: print its parameters (type, default, valid values, meaning)")
    parser.add_argument("--markdown", action="store_true", help="print every learner and its parameters as Markdown (docs/learners.md)")
    return parser


def run(argv: list[str] | None = None) -> str:
    """Parse ``argv`` and print the list of learners, one learner's description, or the Markdown page.

    Returns
    -------
    str
        What was printed.

    Raises
    ------
    UsageError
        An unknown learner name (the message lists the valid ones).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    # UsageError, not parser.error: pipelines.cli.main prints it in one line without loading Beam
    if args.markdown and args.name:
        raise UsageError("give a learner NAME or --markdown, not both")
    if args.name and args.name not in learner_names():
        raise UsageError(f"unknown learner {args.name!r}; choose from {', '.join(learner_names())}")
    text = learners_markdown() if args.markdown else learner_text(args.name) if args.name else learners_text()
    print(text, end="")
    return text


if __name__ == "__main__":
    main(run, "learners")
