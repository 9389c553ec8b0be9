"""The command-line conventions every okl CLI shares: one flag spelling, one-line errors, Ctrl-C.

Flags
-----
Flags are spelled as Beam spells its pipeline options, with underscores (``--batch_rows``,
``--num_shards``, ``--num_workers``). The dashed spelling of any flag (``--batch-rows``) is
accepted too, and not shown by ``--help``: :class:`Parser` rewrites it before parsing.
Flags that were renamed (``--out`` -> ``--output``, ``--workers`` -> ``--num_workers``) keep
working through :func:`deprecate`, with a warning on stderr. Abbreviations are refused
(``allow_abbrev=False``): ``--num`` never means ``--num_shards``.

``--output`` is a directory in every command. okl's own process pools are sized by
``--num_workers``; ``--direct_num_workers`` is Beam's (the DirectRunner's workers).

Errors
------
:meth:`Parser.error` prints one line, ``<prog>: error: <message>``, and exits with status 2.
:func:`main` runs a command the way its console script and ``python -m`` do, and is where
what escapes the command becomes one line: a :class:`UsageError` (exit status 2), a learner
over a cap of its config (``okl_core.CapacityError``, however the runner wrapped it: exit
status 1), Ctrl-C (SIGINT: ``<prog>: interrupted``, exit status 130) and SIGTERM (what
``kill``, ``timeout``, systemd and Kubernetes send: ``<prog>: terminated``, exit status 143).
A stop goes the way of Ctrl-C: the command's clean-up runs (nothing half-published, its
runner and worker processes stopped), then the one line.

Beam's harmless root warnings (:class:`BeamNoise`) are dropped in every command, ``--help``
included, however Beam is first imported.

The ``okl`` console script (:mod:`pipelines.okl`) names its commands ``okl train``,
``okl sweep``, ...; :func:`prog` gives each parser the name it was started by.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, NoReturn

if TYPE_CHECKING:
    from okl_core.learners.base import Learner

__all__ = ["Parser", "UsageError", "deprecate", "prog", "okl_names", "warn", "main", "running_as_command", "INTERRUPTED_STATUS",
           "TERMINATED_STATUS", "check_output_dir", "make_output_dir", "output_dir", "output_error", "reclaim_interrupt",
           "BeamNoise", "BEAM_NOISE", "without_beam_noise", "compile_learner", "when_stopped"]

INTERRUPTED_STATUS = 130
"""Exit status after Ctrl-C (128 + SIGINT), as a shell reports it."""
TERMINATED_STATUS = 143
"""Exit status after SIGTERM (128 + SIGTERM), as a shell reports it."""

_STOPS: dict[int, tuple[str, int]] = {signal.SIGINT: ("interrupted", INTERRUPTED_STATUS), signal.SIGTERM: ("terminated", TERMINATED_STATUS)}
"""The signals that stop a command, with its one line and exit status."""

_PROG_STYLE = {"okl": False}


def prog(command: str) -> str:
    """The program name of ``command`` in messages: ``okl train`` or ``python -m pipelines.train``."""
    return f"okl {command}" if _PROG_STYLE["okl"] else f"python -m pipelines.{command}"


@contextlib.contextmanager
def okl_names():
    """Name the commands ``okl <command>`` while this lasts (the ``okl`` console script)."""
    before = _PROG_STYLE["okl"]
    _PROG_STYLE["okl"] = True
    try:
        yield
    finally:
        _PROG_STYLE["okl"] = before


class BeamNoise(logging.Filter):
    """Drops the warnings Beam's modules log on the root logger: stray notices, harmless for okl,
    that only alarm users.

    Beam's modules log through loggers of their own names, which the commands configure by
    level (:func:`pipelines.common.configure_logging`); a few call ``logging.warning`` at
    module level instead, so their records carry the root logger's name and no level of a
    named logger reaches them: "apitools not found ..." when Beam is first imported without
    its optional GCP extras (which also gives the root logger a handler of its own), and
    "Resource module is not available ..." by RunInference on every model load when torch
    is not installed. They are recognised by where they come from (a file of the
    ``apache_beam`` package, the root logger, below ERROR), not by their words, so that a
    reworded notice stays dropped and no warning of okl's or the user's is.

    It also drops Prism's errors, which Beam relays from Prism's own log under the name
    ``PrismRunner`` (at ``--prism_log_level=error``, okl's default, they are all it relays):
    they are about the job Prism runs ("Prism received bundle error ...", "stage.Execute
    aborting ..."), whose failure the job's error reports with the bundle, the stage and the
    worker's traceback, and the command reports that (in one line when it is the user's to
    fix). Beam gives those records that name after they were logged, so no logger level reaches them.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "PrismRunner":
            return record.levelno < logging.ERROR
        if record.name != "root" or record.levelno >= logging.ERROR:
            return True
        beam = sys.modules.get("apache_beam")  # a record from Beam's files: Beam is (being) imported
        where = getattr(beam, "__file__", None)
        return not (where and os.path.abspath(record.pathname).startswith(os.path.dirname(os.path.abspath(where)) + os.sep))


BEAM_NOISE = BeamNoise()
"""The one :class:`BeamNoise` filter, installed on the root logger (and its handlers) by the commands."""


@contextlib.contextmanager
def without_beam_noise():
    """Beam's noise (:class:`BeamNoise`) dropped by the root logger while this lasts, which is left as it was."""
    root = logging.getLogger()
    installed = BEAM_NOISE not in root.filters
    root.addFilter(BEAM_NOISE)
    try:
        yield
    finally:
        if installed:
            root.removeFilter(BEAM_NOISE)


class UsageError(ValueError):
    """A problem with the command line or its inputs, reported without a traceback (:func:`main`: one line, exit status 2)."""


def warn(program: str, message: str) -> None:
    """One warning line on stderr: ``<program>: warning: <message>``."""
    print(f"{program}: warning: {message}", file=sys.stderr)


class Parser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` with okl's conventions (module docstring).

    Abbreviations are refused, dashed spellings of underscore flags are accepted (in
    sub-commands too), deprecated flags are renamed with a warning, and errors are one line.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.deprecated: dict[str, str] = {}

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` (one line, no usage) and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._spelled(args), namespace)

    def _parsers(self) -> list[argparse.ArgumentParser]:
        """This parser and every sub-command's, recursively."""
        found: list[argparse.ArgumentParser] = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found += sub._parsers() if isinstance(sub, Parser) else [sub]
        return found

    def _spelled(self, args: list[str]) -> list[str]:
        """``args`` with dashed aliases and deprecated flags rewritten to their flag (before ``--``)."""
        known: set[str] = set()
        deprecated: dict[str, str] = {}
        for parser in self._parsers():
            known.update(parser._option_string_actions)
            deprecated.update(getattr(parser, "deprecated", {}))
        out: list[str] = []
        for i, token in enumerate(args):
            if token == "--":
                return out + args[i:]
            if token.startswith("--"):
                name, eq, value = token.partition("=")
                if name in deprecated and name not in known:
                    warn(self.prog, f"{name} is deprecated; use {deprecated[name]}")
                    name = deprecated[name]
                elif name not in known and "--" + name[2:].replace("-", "_") in known:
                    name = "--" + name[2:].replace("-", "_")
                token = name + eq + value
            out.append(token)
        return out


def check_output_dir(path: str, flag: str = "--output") -> None:
    """Refuse an output directory that is empty text or names a file, in one line naming ``flag``.

    Raises
    ------
    ValueError
        ``flag is empty: give a directory`` or ``flag PATH is a file, not a directory``.
    """
    if not path.strip():  # "" would write into the current directory
        raise ValueError(f"{flag} is empty: give a directory")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a file, not a directory")


def output_error(err: OSError, path: str, flag: str = "--output") -> ValueError:
    """One line naming ``flag`` for ``err``, raised making or publishing the output ``path``."""
    if err.errno is None:  # okl's own refusal (okl_core.publish): already a sentence naming the folder
        return ValueError(f"{flag} {err}")
    return ValueError(f"{flag} {path}: cannot write there ({err.strerror or err}: {err.filename or path})")


def make_output_dir(path: str, flag: str = "--output") -> list[str]:
    """Make the output directory ``path`` (and its parents) before any work.

    Checked up front so that a long run never ends in a traceback over where its results go.
    Returns the folders it made, deepest first (:func:`okl_core.publish.make_dirs`): a command
    refused after this removes them again (:func:`output_dir`), so that it leaves nothing behind.

    Raises
    ------
    ValueError
        One line naming ``flag``: empty, a file, under a file, or not writable (``/proc/x``).
    """
    from okl_core.publish import make_dirs, remove_made_dirs  # imported here: okl_core is not needed to start a command

    check_output_dir(path, flag)
    try:
        made = make_dirs(path)
    except OSError as err:
        raise output_error(err, path, flag) from None
    if not os.access(path, os.W_OK | os.X_OK):
        remove_made_dirs(made)
        raise ValueError(f"{flag} {path}: cannot write there (permission denied)")
    return made


@contextlib.contextmanager
def output_dir(path: str, flag: str = "--output"):
    """:func:`make_output_dir` for the length of a command's work: when the work fails (a
    refusal, an error, Ctrl-C) the folders it made are removed again, while empty."""
    from okl_core.publish import remove_made_dirs

    made = make_output_dir(path, flag)
    try:
        yield path
    except BaseException:
        remove_made_dirs(made)
        raise


def compile_learner(learner: "Learner[Any]", command: str) -> None:
    """Compile the folds ``learner`` runs (or load them from the cache) in this process, before
    the job, saying so in one line when they are compiled: ``<prog>: compiling the <learner> folds ...``.

    numba compiles a fold the first time it runs on a machine (seconds; up to ~15 s for the
    OKS family on a busy machine) and caches it (:mod:`okl_core.learners.compiled`).
    Compiled here, the job's worker processes on this machine load it from the cache instead
    of each compiling it at once, in silence. Commands call it when the job's workers are
    local only: remote workers have caches of their own.
    """
    from okl_core.learners.compiled import warm_up

    def say() -> None:
        print(f"{prog(command)}: compiling the {learner.name} folds (first use on this machine; later runs load them from the cache)",
              file=sys.stderr, flush=True)

    warm_up(learner, on_compile=say)


def deprecate(parser: Parser, old: str, new: str) -> None:
    """Accept the flag ``old`` as ``new`` (same meaning), with a warning; hidden from ``--help``."""
    parser.deprecated[old] = new


_EXIT_WITHOUT_TEARDOWN: list[str] = []
_COMMANDS_RUNNING: list[str] = []


def running_as_command() -> bool:
    """Whether a command is running as its own process (:func:`main`), not called from a
    longer-lived one (a notebook, a script calling ``run``): its summary then counts time
    from the process's start."""
    return bool(_COMMANDS_RUNNING)


def exit_without_teardown(reason: str) -> None:
    """Ask :func:`main` to end the process with ``os._exit`` once the command has finished.

    For Beam's embedded job service (``--runner=PortableRunner --job_endpoint=embed``): it
    has no public way to be stopped, and its gRPC threads, still alive while the interpreter
    tears down, abort the process now and then (``terminate called without an active
    exception``, exit status -6, after the job had succeeded and its outputs were written:
    2 of about 20 such runs in this project's CI). :func:`main` flushes the output streams
    and logging first; okl registers no exit handlers, and the embedded job server's own
    stop does nothing, so nothing of the run is skipped. Kept: no public Beam API stops that
    service (``EmbeddedJobServer.stop`` is empty).
    """
    _EXIT_WITHOUT_TEARDOWN.append(reason)


_INTERRUPT_HANDLERS: list = []
_STOP_HOOKS: list[Callable[[], None]] = []


@contextlib.contextmanager
def when_stopped(hook: Callable[[], None]):
    """Call ``hook()`` when Ctrl-C or SIGTERM stops the command while this lasts, before the
    command's clean-up starts (:func:`main`): for what the clean-up would otherwise wait on,
    such as worker processes busy with a bundle that leave stopping to the command."""
    _STOP_HOOKS.append(hook)
    try:
        yield
    finally:
        _STOP_HOOKS.remove(hook)


def reclaim_interrupt() -> None:
    """Put :func:`main`'s Ctrl-C and SIGTERM handler back in place (nothing outside :func:`main`, or after a Ctrl-C).

    For a pipeline run through a Beam job server (Prism, Flink, ``PortableRunner``): Beam's
    ``StopOnExitJobServer`` installs its own SIGINT handler when the job is submitted, and
    it is not reentrant (a second Ctrl-C while it stops the server deadlocked). The job
    server is still stopped at exit (Beam registers that too).
    """
    if not _INTERRUPT_HANDLERS or threading.current_thread() is not threading.main_thread():
        return
    for signum in _STOPS:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # SIG_IGN: stopped, on the way out
            signal.signal(signum, _INTERRUPT_HANDLERS[-1])


def _error_line(err: BaseException) -> tuple[str, int] | None:
    """The one line (and exit status) of an error that is the user's to fix, else None (a defect: its traceback)."""
    if isinstance(err, UsageError):
        return str(err), 2
    from transforms.worker import capacity_error_line  # imported here: okl_core is not needed to start a command

    line = capacity_error_line(err)
    return None if line is None else (line, 1)


def _quiet_runner_disconnects() -> None:
    """After a one-line error the process ends: Beam's SDK worker threads that fail because the
    runner they talk to is stopping (gRPC UNAVAILABLE or CANCELLED, e.g. a worker's ``read_state``
    stream as Prism goes) print nothing; any other thread's exception is printed as before.

    Kept: ``threading.excepthook`` is Python's own hook for a thread's uncaught exception, and
    Beam offers no way to end its harness threads quietly; they are recognised by the type and
    status code of their gRPC error, not by its text."""
    before = threading.excepthook

    def hook(args) -> None:
        code = getattr(args.exc_value, "code", None)
        status = code() if type(args.exc_value).__module__.startswith("grpc") and callable(code) else None
        if getattr(status, "name", None) not in ("UNAVAILABLE", "CANCELLED"):
            before(args)

    threading.excepthook = hook


def main(run: Callable[[list[str] | None], object], command: str, argv: list[str] | None = None) -> None:
    """Run ``run(argv)`` as a command: errors the user can fix are one line (module docstring), Ctrl-C
    and SIGTERM end it with one line and exit status 130 / 143.

    ``run`` cleans up what it started on its way out (``finally`` blocks, context managers)
    before the error or interrupt reaches this function: SIGTERM raises the same
    KeyboardInterrupt as Ctrl-C, so every clean-up that holds for one holds for the other. Beam
    re-raises a KeyboardInterrupt raised inside a DoFn as a RuntimeError naming the step, so a
    stop is recognised by the signal that arrived, not by the exception's type. The first stop is
    the way out: later signals are ignored, so that they cut no cleanup short (and Beam's job
    server handler, which deadlocked on a second Ctrl-C, is not entered again). An int returned by
    ``run`` is the exit status.
    """
    stopped: list[int] = []

    def on_stop(signum, frame):
        stopped.append(signum)
        for other in _STOPS:
            signal.signal(other, signal.SIG_IGN)
        # The process is ending: runner threads that fail as their runner goes (gRPC UNAVAILABLE)
        # print and log nothing, now or after logging is back on (Beam and Dask log the interrupted work at ERROR).
        threading.excepthook = lambda _args: None
        for name in ("apache_beam", "grpc"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        logging.disable(logging.CRITICAL)
        for hook in list(_STOP_HOOKS):
            hook()
        raise KeyboardInterrupt

    logging.getLogger().addFilter(BEAM_NOISE)  # Beam may be first imported anywhere below (even by --help's way out)
    previous = {signum: signal.signal(signum, on_stop) for signum in _STOPS}
    _INTERRUPT_HANDLERS.append(on_stop)
    _COMMANDS_RUNNING.append(command)
    try:
        result = run(argv)
    except BaseException as err:
        if stopped or isinstance(err, KeyboardInterrupt):
            word, status = _STOPS[stopped[0] if stopped else signal.SIGINT]
            print(f"{prog(command)}: {word}", file=sys.stderr)
            sys.exit(status)
        if isinstance(err, SystemExit):  # argparse's --help and one-line errors: already said
            raise
        line = _error_line(err)
        if line is None:
            raise
        _quiet_runner_disconnects()
        print(f"{prog(command)}: error: {line[0]}", file=sys.stderr)
        sys.exit(line[1])
    finally:
        _COMMANDS_RUNNING.pop()
        _INTERRUPT_HANDLERS.pop()
        # After a stop the process only ends: another signal (while Beam stops its runner at exit) must not print a traceback.
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if stopped else handler)
        if stopped:
            logging.disable(logging.NOTSET)
    status = result if isinstance(result, int) and not isinstance(result, bool) else 0
    # The command is done and the process ends next: spare the interpreter's final walk over
    # every object Beam, pyarrow and numba left (0.2-0.25 s of a train run's exit, strace).
    gc.freeze()
    if _EXIT_WITHOUT_TEARDOWN:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(status)
    if status:
        sys.exit(status)
