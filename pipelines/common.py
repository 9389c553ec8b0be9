"""What the okl pipelines share: Beam options, the runner choice, usage errors.

Runner choice
-------------
Beam >= 2.68's ``DirectRunner`` (``SwitchingDirectRunner``) first tries the Prism
runner, which downloads a Go binary from GitHub with no timeout; offline it logs the
failed download and falls back to the FnApiRunner -- and on a network that drops
packets instead of refusing them, the download can hang for minutes. okl pipelines are
batch jobs that the FnApiRunner runs fully (the DirectRunner's own fallback, and the
runner Beam recommends pinning to when Prism gets in the way), so ``--runner=DirectRunner``
(also the default) runs them on the FnApiRunner directly, exactly as the DirectRunner's
fallback does, with ``--direct_num_workers`` and ``--direct_running_mode`` honoured. Pass
``--runner=SwitchingDirectRunner`` (or ``PrismRunner``) to get Beam's Prism-first
behaviour; every other runner is passed through unchanged.

``--job_endpoint=embed`` without ``--environment_type`` gets ``--environment_type=LOOPBACK``
(the embedded job server would otherwise start SDK workers in Docker). Local
``multi_processing`` workers are Beam's own worker, started by the FnApiRunner through
:mod:`pipelines.sdk_worker` (:func:`_local_runner`), which leaves Ctrl-C and SIGTERM to the
command and keeps their console to warnings and errors from their first line; when the
command is stopped, :func:`run_pipeline` ends them (:func:`_stop_local_workers`). The
FnApiRunner hands them no pipeline options, so the runner gives them the job's options the
way Beam's SDK harness contract allows, a JSON file named by ``PIPELINE_OPTIONS_FILE`` in
their environment, with ``--default_sdk_harness_log_level=ERROR`` unless given: otherwise
every worker logs some twenty start-up lines at INFO (:func:`_worker_options_file`).

Logging
-------
Importing okl changes no logging configuration. The console is kept quiet by logging
configuration only: levels on Beam's named loggers (:data:`_QUIET_LOGGERS`: relayed worker
and Prism chatter at ERROR) and two filters. :class:`pipelines.cli.BeamNoise` drops what no
named level reaches: the warnings Beam's modules log on the root logger ("apitools not found
..." on import without Beam's GCP extras; "Resource module is not available ..." by
RunInference without torch), and Prism's errors, which echo a failed bundle that the job's
error reports (and the command, in one line when it is the user's to fix). This module
imports Beam with it on the root logger for the length of the import only;
:func:`pipelines.cli.main` keeps it there while a command runs, and :func:`configure_logging`,
which the CLIs call when they run, puts it on the console handlers too. The other drops the runners' tracebacks of an ``okl_core.CapacityError``,
whose one line the command prints (:func:`transforms.worker.quiet_capacity_traces`; the one
stream okl wraps, for the copy Beam's SDK harness prints). Local ``multi_processing`` workers
start through :mod:`pipelines.sdk_worker`, which keeps their console to errors from their first line.

Errors okl reports in one line are recognised by type or checked by okl before Beam acts
(:func:`make_pipeline`, :func:`start_job`), never by the words of Beam's messages.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
from typing import Any, NoReturn
from urllib.error import URLError

from pipelines.cli import BEAM_NOISE as _BEAM_NOISE, without_beam_noise as _without_beam_noise  # pipelines.cli imports no Beam

with _without_beam_noise():  # the CLIs import Beam here first (pipelines.common sorts before the rest)
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, PortableOptions, StandardOptions

from okl_core.data.layout import one_line  # noqa: E402
from pipelines.cli import UsageError  # noqa: E402  (the CLIs' one-line errors; here for the modules that raise them)
from transforms.worker import SDK_WORKER_MAIN, quiet_capacity_traces  # noqa: E402  (after Beam: see above)

__all__ = ["UsageError", "pipeline_options", "unknown_to_beam", "okl_and_beam_args", "make_pipeline", "start_job", "run_pipeline", "configure_logging",
           "live_progress", "workers_are_local", "spare_core_per_shard", "runner_name", "DIRECT_NAMES", "PRISM_NAMES", "FlinkCheckpointOptions",
           "FINISH_BUNDLE_BEFORE_CHECKPOINTING"]


FINISH_BUNDLE_BEFORE_CHECKPOINTING = "finish_bundle_before_checkpointing"
"""Beam's Flink option okl turns on for every Flink job (``--runner=FlinkRunner``, or any with ``--checkpointing_interval``):
without it a checkpoint or savepoint can make a streaming job lose every element of a source.

With it off (Beam's default), a bundle still open when a checkpoint's (or a savepoint's)
barrier arrives is finished inside the snapshot, where Beam's Flink runner (2.62) buffers
the bundle's output but emits the watermark it advances at once. A stateless step right after a source's
impulse then sends the end-of-time watermark ahead of its elements, and the next stateful
step drops them all as late: the cluster's streaming job read no file in about 1 run of 6,
when its first checkpoint met the first bundle of the file watch. With it on, the bundle
is finished before the barrier and its output leaves ahead of the watermark
(``tests/pipelines/test_flink.py::test_a_checkpoint_during_the_first_bundle_loses_nothing``).
"""


class FlinkCheckpointOptions(PipelineOptions):
    """``--checkpointing_interval``, ``--shutdown_sources_after_idle_ms``, ``--finish_bundle_before_checkpointing``: Flink options Beam's Python SDK lacks.

    Beam's Java ``FlinkPipelineOptions`` reads them from the pipeline options the job server
    receives; declared here, the okl CLIs accept them and Beam sends them (unset: no
    checkpoints; sources that end are shut down unless checkpoints are on). For a Flink job,
    :func:`pipeline_options` also sends ``finish_bundle_before_checkpointing``
    (:data:`FINISH_BUNDLE_BEFORE_CHECKPOINTING`).
    """

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--checkpointing_interval", type=int, default=None,
                            help="Flink: milliseconds between checkpoints of a streaming job (default: none); "
                                 "a failed task restarts from the last one")
        parser.add_argument("--shutdown_sources_after_idle_ms", type=int, default=None,
                            help="Flink: end a source idle this many milliseconds (with checkpoints on, Beam keeps "
                                 "finished sources open forever, so a job with --stop_after never ends without it)")
        parser.add_argument(f"--{FINISH_BUNDLE_BEFORE_CHECKPOINTING}", action="store_true",
                            help="Flink: finish open bundles before a checkpoint's barrier, not inside the snapshot "
                                 "(always on for Flink jobs: otherwise a source's elements can arrive after its "
                                 "end-of-time watermark and be dropped as late)")


DIRECT_NAMES = {"directrunner", "direct"}
"""``--runner`` values (lower case) of the DirectRunner, which okl runs on the FnApiRunner (module docstring)."""
PRISM_NAMES = {"prismrunner", "prism"}
"""``--runner`` values (lower case) of Beam's Prism runner."""
FLINK_NAMES = {"flinkrunner", "flink"}
"""``--runner`` values (lower case) of Beam's Flink runner."""
_LOG = logging.getLogger(__name__)


_QUIET_LOGGERS = {
    # Lines relayed from local SDK workers (start-up notices at WARNING); their errors still show.
    "apache_beam.runners.portability.local_job_service": logging.ERROR,
    # Prism's own log, relayed line by line at INFO and WARNING.
    "PrismRunner": logging.ERROR,
    "apache_beam.runners.portability.prism_runner": logging.ERROR,
    "apache_beam.utils.subprocess_server": logging.ERROR,
    # "Matching Continuously is stateful, and can scale poorly" at every streaming launch.
    "apache_beam.io.fileio": logging.ERROR,
}


def configure_logging() -> None:
    """Console logging for the CLIs: okl at INFO, Beam at WARNING, relayed runner chatter at ERROR,
    Beam's two spurious warnings and Prism's echo of a failed bundle dropped (module docstring).

    Called by each CLI's ``run``; importing okl changes no logging configuration.
    """
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for where in (root, *root.handlers):  # the handlers: records of Beam's own loggers reach them, not the root logger's filters
        if _BEAM_NOISE not in where.filters:
            where.addFilter(_BEAM_NOISE)
    quiet_capacity_traces()
    for name in ("okl", "pipelines", "transforms"):
        logging.getLogger(name).setLevel(logging.INFO)
    for name, level in _QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)


class _BeamOptionsParser(argparse.ArgumentParser):
    """A parser of Beam's pipeline options, declared by the registered ``PipelineOptions`` subclasses.

    Each subclass declares its options in ``_add_argparse_args(parser)``, the protocol by which
    Beam itself collects them (``PipelineOptions.get_all_options``: every direct subclass, the
    first of each name); okl's own (:class:`FlinkCheckpointOptions`) are declared the same way.
    The parser is okl's, so neither Beam's parser nor its error handling is touched: a bad
    value is a :class:`UsageError` of one line, and abbreviations are refused as Beam refuses them.
    """

    def __init__(self) -> None:
        super().__init__(allow_abbrev=False, add_help=False)
        first: dict[str, type[PipelineOptions]] = {}
        for cls in PipelineOptions.__subclasses__():
            first.setdefault(str(cls), cls)  # a class defined twice (a main session): Beam keeps the first
        for options in first.values():
            options._add_argparse_args(self)  # type: ignore[arg-type]  # (annotated with Beam's parser; takes any with its two methods)

    def error(self, message: str) -> NoReturn:
        """A bad value of a Beam option: one line, not a usage of every option."""
        raise UsageError(f"Beam pipeline option: {message}")

    def add_value_provider_argument(self, *args: Any, **kwargs: Any) -> None:
        """Beam's templated options (resolved at run time on some runners): checked here as plain values of their type."""
        self.add_argument(*args, **kwargs)


def unknown_to_beam(beam_argv: list[str]) -> list[str]:
    """The arguments of ``beam_argv`` that no Beam pipeline option defines (abbreviations included).

    Raises UsageError for a Beam option with a bad value: one Beam's parser refuses, or one
    it takes that would end the job in a traceback later (:func:`check_beam_values`).

    Beam's ``PipelineOptions`` keeps such arguments and drops them with a warning when the
    pipeline runs; the okl CLIs refuse them instead. They are parsed against the options
    every registered ``PipelineOptions`` subclass declares (:class:`_BeamOptionsParser`).
    """
    values, unknown = _BeamOptionsParser().parse_known_args(beam_argv)
    check_beam_values(values)
    return unknown


def check_beam_values(values: argparse.Namespace) -> None:
    """Refuse, naming the flag, Beam option values that Beam's parser takes but its runners fail on with a traceback.

    ``values`` is the namespace of the Beam options among the arguments (:func:`unknown_to_beam`).
    Checked before any work: a runner name (Beam only resolves it when the pipeline is
    built, after the data were opened), ``--direct_num_workers`` below 0 (an IndexError in
    the FnApiRunner; 0 is Beam's "one per CPU"), an ``--environment_type`` that is neither a
    type nor a URN (a ValueError when the job is submitted), a ``--flink_master`` that is no
    ``[local]``, ``[auto]`` or ``host:port`` (passed on to the Flink job server, which fails).

    Raises
    ------
    UsageError
        ``--<flag> <value>: <why>``.
    """
    _check_runner(getattr(values, "runner", None))
    workers = getattr(values, "direct_num_workers", None)
    if workers is not None and workers < 0:
        raise UsageError(f"--direct_num_workers {workers}: must be >= 1 (or 0: one worker per CPU)")
    _check_environment_type(getattr(values, "environment_type", None))
    _check_flink_master(getattr(values, "flink_master", None))
    for flag in _JOB_SERVER_JARS.values():
        _check_job_server_jar(flag, getattr(values, flag[2:], None))


def _check_runner(runner: str | None) -> None:
    """A runner name Beam resolves (``create_runner``'s rules: a known name, with or without ``Runner``, or ``module.Class``)."""
    if not isinstance(runner, str):
        return
    known = {name.lower() for name in StandardOptions.KNOWN_RUNNER_NAMES}
    if runner.lower() in known or runner.lower() + "runner" in known:
        return
    if "." not in runner:
        raise UsageError(f"--runner {runner}: not a runner Beam knows; valid values are {', '.join(StandardOptions.KNOWN_RUNNER_NAMES)}, "
                         "or the full name of a PipelineRunner subclass (module.Class)")
    module, _, name = runner.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError as err:
        raise UsageError(f"--runner {runner}: module {module} cannot be imported ({err})") from None
    if found is None:
        raise UsageError(f"--runner {runner}: module {module} has no {name}")


def _check_environment_type(environment_type: str | None) -> None:
    """An environment type Beam knows (``Environment.from_options``: LOOPBACK, an upper-case name, or a ``beam:env:`` URN)."""
    if not environment_type or environment_type == "LOOPBACK" or environment_type.startswith("beam:env:"):
        return
    from apache_beam.portability.common_urns import environments

    if not hasattr(environments, environment_type):
        raise UsageError(f"--environment_type {environment_type}: not an environment type Beam knows; use DOCKER, PROCESS, EXTERNAL or LOOPBACK")


_JOB_SERVER_JARS = {**dict.fromkeys(FLINK_NAMES, "--flink_job_server_jar"), **dict.fromkeys(("sparkrunner", "spark"), "--spark_job_server_jar")}
"""The runners that start a Java job server of their own, and the flag that names its jar."""
_MAKE_FLINK_JAR = "`make runners` builds one for apache-beam {version}: docs/runners.md, 'Prism and a local Flink cluster'"


def _check_job_server_jar(flag: str, jar: str | None) -> None:
    """A job server jar given as a local path must exist (Beam would end in a traceback when the job starts); a URL is fetched by Beam."""
    from urllib.parse import urlsplit

    if jar and not os.path.exists(jar) and not urlsplit(jar).scheme:
        advice = f" ({_MAKE_FLINK_JAR.format(version=_flink_beam_version())})" if flag.startswith("--flink") else ""
        raise UsageError(f"{flag} {jar}: no such file{advice}")


def _flink_beam_version() -> str:
    from pipelines.local_runners import FLINK_BEAM_VERSION

    return FLINK_BEAM_VERSION


def _check_flink_master(master: str | None) -> None:
    """``[local]``, ``[auto]`` or ``[http(s)://]host[:port]``, as Beam's FlinkRunner passes it to the job server."""
    if master is None or master.strip() in ("[local]", "[auto]"):
        return
    from urllib.parse import urlsplit

    text = master.strip()
    url = urlsplit(text if "://" in text else "http://" + text)
    try:
        port_ok = url.port is None or url.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if url.scheme not in ("http", "https") or not url.hostname or not port_ok:
        raise UsageError(f"--flink_master {master}: expected [local], [auto] or HOST:PORT (e.g. localhost:8081)")


def okl_and_beam_args(parser, argv: list[str] | None):
    """``(okl's arguments, Beam's)`` of ``argv``: ``parser``'s, and the rest, which must all be
    Beam pipeline options (otherwise ``parser.error``: one line, exit status 2)."""
    args, beam_argv = parser.parse_known_args(argv)
    try:
        unknown = unknown_to_beam(beam_argv)
    except UsageError as err:
        parser.error(str(err))
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (neither okl nor Beam's pipeline options define them)")
    return args, beam_argv


def pipeline_options(beam_argv: list[str]) -> PipelineOptions:
    """Beam options from the arguments okl does not use, with the local-run defaults and, for a
    Flink job, ``--finish_bundle_before_checkpointing`` (:data:`FINISH_BUNDLE_BEFORE_CHECKPOINTING`)."""
    options = PipelineOptions(beam_argv)
    given = " ".join(beam_argv)
    portable = options.view_as(PortableOptions)
    if portable.job_endpoint == "embed" and "--environment_type" not in given:
        portable.environment_type = "LOOPBACK"
    runner = runner_name(options)
    if runner in PRISM_NAMES:
        use_local_prism(options, beam_argv)
    flink = options.view_as(FlinkCheckpointOptions)
    if runner in FLINK_NAMES or flink.checkpointing_interval is not None:
        flink.finish_bundle_before_checkpointing = True  # FINISH_BUNDLE_BEFORE_CHECKPOINTING: else elements can be lost
    return options


def use_local_prism(options: PipelineOptions, beam_argv: list[str]) -> None:
    """Prism defaults, each only when not given: the binary of ``make runners``, its log at errors.

    Without a cached binary (and without ``--prism_location``) Beam downloads Prism itself.
    """
    from apache_beam.options.pipeline_options import PrismRunnerOptions

    from pipelines.local_runners import prism_binary

    given = " ".join(beam_argv)
    prism = options.view_as(PrismRunnerOptions)
    if "--prism_location" not in given and prism_binary():
        prism.prism_location = prism_binary()
    if "--prism_log_level" not in given and hasattr(prism, "prism_log_level"):
        prism.prism_log_level = "error"  # Prism relays its INFO log line by line otherwise


def make_pipeline(options: PipelineOptions, runner=None) -> beam.Pipeline:
    """A pipeline on the requested runner (DirectRunner: the FnApiRunner, see module docstring).

    ``runner`` (a name) replaces the options' runner: a streaming job runs locally on Prism.

    Raises
    ------
    UsageError
        The runner cannot be loaded (DataflowRunner without ``apache-beam[gcp]``), or Beam's
        validation of the options failed (``--environment_type=PROCESS`` without its
        ``process_command``, DataflowRunner without ``--project``, ...): one line, Beam's errors joined.
    """
    from apache_beam.runners import create_runner

    named = runner or options.view_as(StandardOptions).runner
    local = named is None or (isinstance(named, str) and named.lower() in DIRECT_NAMES)
    try:
        chosen = _local_runner(options) if local else create_runner(named) if isinstance(named, str) else named
    except ImportError as err:
        raise UsageError(f"--runner {named}: {one_line(err)}") from None
    with _validation_warnings_held():
        try:
            return beam.Pipeline(runner=chosen, options=options)
        except ValueError:
            problems = _validation_errors(options, chosen)
            if not problems:
                raise
            raise UsageError(f"Beam pipeline options: {'; '.join(problems)}") from None


def _validation_errors(options: PipelineOptions, runner) -> list[str]:
    """Beam's validation errors of ``options`` for ``runner``, each without its full stop (empty: valid).

    Asked of Beam's validator (the one ``beam.Pipeline`` runs) once ``beam.Pipeline`` has
    refused the options with a ValueError, rather than read from that error's text.
    """
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator

    errors = PipelineOptionsValidator(options, runner).validate()
    return [line.strip().rstrip(".") for error in errors for line in str(error).splitlines() if line.strip()]


_FN_API_RUNNER = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
"""The FnApiRunner's public name (Beam 2.62 knows no short one)."""
_SDK_WORKER = "pipelines.sdk_worker"
"""The module local ``multi_processing`` workers run (Beam's worker, quiet and stopped by the command)."""


def _local_runner(options: PipelineOptions):
    """The FnApiRunner, by its public runner name; with ``multi_processing`` workers, one whose
    worker processes start through :mod:`pipelines.sdk_worker`.

    Beam's ``DirectRunner`` (``SwitchingDirectRunner``) cannot be asked to skip Prism for a
    batch job (module docstring), so okl names the runner it falls back to, by the full name
    ``create_runner`` takes in every Beam release okl supports (:data:`_FN_API_RUNNER`; Beam
    2.77 also lists it in ``StandardOptions.ALL_KNOWN_RUNNERS``), with the same ``--direct_*`` options.

    Kept patch: ``FnApiRunner.run_pipeline`` gives its ``multi_processing`` environment the
    command ``<python> -m apache_beam.runners.worker.sdk_worker_main``, with no option to name
    another, and Beam starts that command with nothing okl can set before the worker's first
    line runs (signal dispositions, a console handler). The environment is a plain command in
    the pipeline's description, which the runner then runs, so this runner names okl's module
    there instead (the same Beam worker, started with Ctrl-C and SIGTERM left to the command
    and a quiet console).
    """
    import shlex

    from apache_beam.portability import python_urns
    from apache_beam.runners import create_runner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner  # _FN_API_RUNNER

    if options.view_as(DirectOptions).direct_running_mode != "multi_processing":
        return create_runner(_FN_API_RUNNER)
    beam_worker = f" -m {SDK_WORKER_MAIN}".encode()
    # Beam runs the command through a shell: with ``exec`` the shell becomes the worker, so no
    # shell sits between the runner and its worker (a group's SIGTERM ended the shell, and the
    # runner then stopped serving a worker still running), and Beam's kill reaches the worker.
    exec_ = "exec " if os.name == "posix" else ""

    class LocalRunner(FnApiRunner):
        def run_via_runner_api(self, pipeline_proto, options):
            with _worker_options_file(options) as path:
                named = f" {shlex.quote(path)}" if path else ""
                for environment in pipeline_proto.components.environments.values():
                    if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload.endswith(beam_worker):
                        environment.payload = f"{exec_}{shlex.quote(sys.executable)} -m {_SDK_WORKER}{named}".encode()
                return super().run_via_runner_api(pipeline_proto, options)

    return LocalRunner()


class _HeldRecords(logging.Filter):
    """Keeps the records of the loggers it filters instead of letting them through."""

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


_VALIDATION_LOGGERS = ("apache_beam.options.pipeline_options", "apache_beam.options.pipeline_options_validator")


@contextlib.contextmanager
def _validation_warnings_held():
    """Hold back what Beam logs while it validates the options; let it through only if the validation passed.

    A failed validation says the same in its error, which :func:`make_pipeline` makes the
    command's one line: its warnings before it ("Unable to create default GCS bucket.",
    "Invalid GCS path (...)") would repeat it in a second and third line.
    """
    held = _HeldRecords()
    loggers = [logging.getLogger(name) for name in _VALIDATION_LOGGERS]
    for logger in loggers:
        logger.addFilter(held)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(held)
    for record in held.records:  # not reached when the validation raised: its error holds them
        logging.getLogger(record.name).handle(record)


@contextlib.contextmanager
def _worker_options_file(options: PipelineOptions):
    """The path of a file holding ``options`` for local worker processes while this lasts (None: the
    environment names one already).

    The FnApiRunner hands its ``multi_processing`` workers no pipeline options; Beam's SDK
    harness reads them from the JSON file named by ``PIPELINE_OPTIONS_FILE``, which
    :mod:`pipelines.sdk_worker` sets in the worker's own environment from its argument. With
    ``--default_sdk_harness_log_level=ERROR`` unless given: otherwise every worker logs some
    twenty start-up lines at INFO.
    """
    if "PIPELINE_OPTIONS_FILE" in os.environ:  # the user's: Beam's worker reads it
        yield None
        return
    values = {"default_sdk_harness_log_level": "ERROR", **options.get_all_options(drop_default=True, retain_unknown_options=True)}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="okl-worker-options-") as f:
        json.dump({"options": values}, f, default=str)
        f.flush()
        yield f.name


def start_job(pipeline: beam.Pipeline):
    """``pipeline.run()``: submit the job and return its PipelineResult.

    Raises
    ------
    UsageError
        The job server of ``--runner=FlinkRunner`` / ``SparkRunner`` (a Java jar Beam fetches
        from Maven Central when no jar is given) cannot be started: the jar cannot be
        fetched, or ``java`` is missing. One line naming the flag and what to do
        (:func:`_check_job_server`), instead of Beam's chain of tracebacks.
    """
    _check_job_server(pipeline.runner, pipeline.options)
    return pipeline.run()


def _job_server(runner, options: PipelineOptions):
    """The Java job server Beam's ``runner`` would start for ``options`` (None: it starts none), and the flag naming its jar.

    Flink and Spark start one unless ``--job_endpoint`` names a running one, or the job
    is submitted as an uber jar (the runners' ``default_job_server``).
    """
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, SparkRunnerOptions
    from apache_beam.runners.portability.flink_runner import MAGIC_HOST_NAMES, FlinkJarJobServer, FlinkRunner
    from apache_beam.runners.portability.spark_runner import SparkJarJobServer, SparkRunner

    if options.view_as(PortableOptions).job_endpoint:
        return None, None
    if isinstance(runner, FlinkRunner):
        flink = options.view_as(FlinkRunnerOptions)
        if flink.flink_submit_uber_jar and FlinkRunner.add_http_scheme(flink.flink_master) not in MAGIC_HOST_NAMES:
            return None, None
        return FlinkJarJobServer(options), "--flink_job_server_jar"
    if isinstance(runner, SparkRunner) and not options.view_as(SparkRunnerOptions).spark_submit_uber_jar:
        return SparkJarJobServer(options), "--spark_job_server_jar"
    return None, None


def _check_job_server(runner, options: PipelineOptions) -> None:
    """Fetch the job server jar of ``runner`` (as Beam would next) and find ``java``, before Beam tries to start it.

    Beam's own failures are chains of tracebacks whose one useful line is in their text;
    okl fetches the jar first with Beam's own fetcher (``JavaJarServer.local_jar``, into the
    same cache, so Beam then finds it there) and reads why a fetch failed from the
    ``URLError`` it raises, and looks for the ``--job_server_java_launcher`` itself.

    Raises
    ------
    UsageError
        The jar cannot be fetched, or ``java`` is not found.
    """
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, JobServerOptions, SparkRunnerOptions
    from apache_beam.utils.subprocess_server import JavaJarServer

    server, flag = _job_server(runner, options)
    if server is None or flag is None:
        return
    name = type(runner).__name__
    given = getattr(options.view_as(FlinkRunnerOptions if flag.startswith("--flink") else SparkRunnerOptions), flag[2:], None)
    url = server.path_to_jar()
    cache = options.view_as(JobServerOptions).jar_cache_dir or JavaJarServer.JAR_CACHE
    try:
        JavaJarServer.local_jar(url, cache)
    except RuntimeError as err:
        why = _first_url_error(err)
        if why is None:
            raise
        if given:
            raise UsageError(f"{flag} {given}: Beam could not fetch it ({why}); give the path of a downloaded jar") from None
        fixes = [f"pass {flag}=PATH" + (f" ({_MAKE_FLINK_JAR.format(version=_flink_beam_version())})" if flag.startswith("--flink") else ""),
                 f"put the jar at {os.path.join(cache, os.path.basename(url))}",
                 "use a running job server: --runner=PortableRunner --job_endpoint=HOST:PORT"]
        raise UsageError(f"--runner={name}: Beam could not fetch its job server jar ({os.path.basename(url)}: {why}); "
                         f"{', '.join(fixes[:-1])}, or {fixes[-1]}") from None
    launcher = options.view_as(JobServerOptions).job_server_java_launcher
    if shutil.which(launcher) is None:
        raise UsageError(f"--runner={name}: its job server runs on Java, and {launcher!r} is not found; "
                         "install Java 11 or newer (or pass --job_server_java_launcher=PATH)")


def _first_url_error(err: BaseException) -> URLError | None:
    """The first ``URLError`` raised in the chain that ended in ``err`` (the deepest: Beam's fetcher then tries a mirror), or None."""
    found = None
    current: BaseException | None = err
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, URLError):
            found = current
        current = current.__cause__ or current.__context__
    return found


def run_pipeline(pipeline: beam.Pipeline):
    """Run ``pipeline`` to completion and return its result (local workers are ended when the command is stopped)."""
    from pipelines.cli import exit_without_teardown, reclaim_interrupt, when_stopped

    with when_stopped(_stop_local_workers):
        result = start_job(pipeline)
        reclaim_interrupt()  # a job server's own Ctrl-C handler is not reentrant (pipelines.cli.reclaim_interrupt)
        result.wait_until_finish()
    if _embedded_job_service(pipeline.options):
        exit_without_teardown("Beam's embedded job service cannot be stopped")
    return result


def _stop_local_workers() -> None:
    """Kill this process's local worker processes (:mod:`pipelines.sdk_worker`), when the command is stopped.

    They ignore Ctrl-C and SIGTERM (the command's to handle), and the runner's clean-up waits
    for them to end, which a worker does only once the bundle it is busy with is done: a
    long bundle kept a stopped command waiting for it. They hold nothing to save: the
    command publishes the outputs, and removes what a stopped job was writing.
    """
    import psutil  # a dependency of dask.distributed, which okl requires

    for child in psutil.Process().children():
        try:
            if f"-m {_SDK_WORKER}" in " ".join(child.cmdline()):
                child.kill()
        except psutil.Error:  # gone already
            pass


def _embedded_job_service(options: PipelineOptions) -> bool:
    """Whether the job ran in Beam's in-process job service (``--job_endpoint=embed``, as :func:`pipeline_options` reads it)."""
    return options.view_as(PortableOptions).job_endpoint == "embed"


def live_progress(label: str, total_rows: int, options: PipelineOptions):
    """A :class:`okl_experiments.progress.LiveProgress` for a job run with ``options``.

    Drawn when stderr is a terminal (or ``OKL_PROGRESS=1``) and the job's workers run on this
    machine -- the DirectRunner (in-process or worker processes), Prism, or any runner with
    ``--environment_type=LOOPBACK`` -- since they report through files in a local folder.
    """
    from okl_experiments.progress import LiveProgress, progress_wanted

    return LiveProgress(label, total_rows, enabled=workers_are_local(options) and progress_wanted())


def runner_name(options: PipelineOptions) -> str | None:
    """The options' ``--runner`` in lower case (None: not given; a runner object: None too)."""
    runner = options.view_as(StandardOptions).runner
    return runner.lower() if isinstance(runner, str) else None


def workers_are_local(options: PipelineOptions) -> bool:
    """True when the job's workers run on this machine: the DirectRunner (in process or
    worker processes), Prism, or any runner with ``--environment_type=LOOPBACK``."""
    name = runner_name(options)
    return name is None or name in DIRECT_NAMES | PRISM_NAMES | {"switchingdirectrunner"} or (
        options.view_as(PortableOptions).environment_type or "").upper() == "LOOPBACK"


def spare_core_per_shard(options: PipelineOptions, num_shards: int) -> bool:
    """True when the job's local workers leave a core free beside each shard that runs at once.

    Each shard then decodes its coming row groups on a thread of its own
    (:class:`transforms.train.TrainOnline`'s ``decode_ahead``). Shards that run at once: at
    most ``--direct_num_workers`` on the DirectRunner (1 by default, 0 meaning one per core),
    every shard on the other local runners. Remote workers: False (their cores are not known here).
    """
    if not workers_are_local(options):
        return False
    # The cores this process may run on; os.sched_getaffinity is Linux's only (macOS, Windows: every core).
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    at_once = num_shards
    if runner_name(options) in DIRECT_NAMES | {None}:
        workers = options.view_as(DirectOptions).direct_num_workers or cores
        at_once = min(num_shards, workers)
    return cores >= 2 * at_once
