"""The command-line conventions of every okl CLI (pipelines.cli): both spellings of every flag,
deprecated spellings with a warning, unknown arguments and abbreviations refused in one line."""

import argparse
import json
import os

import pytest

from pipelines import engines, learners, predict, prepare, report, reproduce, sweep, train
from pipelines.cli import Parser
from tests.conftest import sweep_binary_data

# command -> (parser factory, what each sub-command needs before its flags)
PARSERS = {
    "train": (train.build_parser, {None: []}),
    "predict": (predict.build_parser, {None: ["--model", "m.npz", "--input", "d", "--output", "o"]}),
    "prepare": (prepare.build_parser, {"mnist": ["mnist"], "libsvm": ["libsvm", "in"], "csv": ["csv", "in", "--target", "y"],
                                       "parquet": ["parquet", "in", "--target", "y"], "mnist8m": ["mnist8m"],
                                       "molecular": ["molecular", "in"]}),
    "sweep": (sweep.build_parser, {None: ["--input", "d", "--learner", "fogd"]}),
    "report": (report.build_parser, {"curves": ["curves", "r.parquet"], "sweep": ["sweep", "r.parquet"], "run": ["run", "spec.json"]}),
    "reproduce": (reproduce.build_parser, {None: []}),
    "engines": (engines.build_parser, {None: ["install", "prism"]}),
    "learners": (learners.build_parser, {None: []}),
}


def _sub_parser(parser: argparse.ArgumentParser, sub: str | None) -> argparse.ArgumentParser:
    if sub is None:
        return parser
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[sub]


def _value(action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(list(action.choices)[-1])]
    if action.type in (int, float):
        return ["3"]
    return ["x.txt"]


def _flag_cases():
    for command, (factory, subs) in PARSERS.items():
        for sub, prefix in subs.items():
            for action in _sub_parser(factory(), sub)._actions:
                for flag in action.option_strings:
                    if flag.startswith("--") and "_" in flag and action.help != argparse.SUPPRESS:
                        yield pytest.param(command, sub, prefix, flag, id=f"{command}-{sub or ''}{flag}")


@pytest.mark.parametrize("command, sub, prefix, flag", list(_flag_cases()))
def test_every_flag_takes_both_spellings(command, sub, prefix, flag):
    factory, _ = PARSERS[command]
    action = next(a for a in _sub_parser(factory(), sub)._actions if flag in a.option_strings)
    value = _value(action)
    underscored, _ = factory().parse_known_args([*prefix, flag, *value])
    dashed, _ = factory().parse_known_args([*prefix, flag.replace("_", "-").replace("--", "--", 1), *value])
    assert vars(dashed) == vars(underscored)
    assert getattr(underscored, action.dest) != action.default  # the flag took effect


@pytest.mark.parametrize("command", PARSERS)
def test_help_shows_the_underscore_spelling_only(command, capsys):
    factory, subs = PARSERS[command]
    for sub in subs:
        _sub_parser(factory(), sub).print_help()
    text = capsys.readouterr().out
    words = text.replace("[", " ").replace("]", " ").replace(",", " ").split()
    dashed = [w for w in words if w.startswith("--") and "-" in w.split("=")[0][2:]]
    assert dashed == [] and isinstance(factory(), Parser)


def _one_line_error(capsys, call) -> str:
    with pytest.raises(SystemExit) as done:
        call()
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("argv, refused", [
    (["--bogus_flag", "4"], "--bogus_flag 4"),              # neither okl nor Beam
    (["--num", "4"], "--num 4"),                            # an abbreviation of --num_shards
    (["--runner=DirectRunner", "--direct_num_work=2"], "--direct_num_work=2"),  # an abbreviation of Beam's flag
    (["--learner", "fogd", "--batch-row", "64"], "--batch-row 64"),
])
def test_train_refuses_what_neither_okl_nor_beam_defines(argv, refused, capsys):
    line = _one_line_error(capsys, lambda: train.run(argv))
    assert line == (f"python -m pipelines.train: error: unrecognized arguments: {refused} "
                    "(neither okl nor Beam's pipeline options define them)")


def test_train_takes_the_dashed_flags_of_the_issue_and_beams_own_options():
    request = train.parse_args(["--num-shards", "4", "--batch-rows", "64", "--runner=DirectRunner",
                                "--direct_num_workers", "2", "--direct_running_mode=multi_processing"])
    assert (request.num_shards, request.batch_rows) == (4, 64)
    assert request.beam_args == ("--runner=DirectRunner", "--direct_num_workers", "2", "--direct_running_mode=multi_processing")


@pytest.mark.parametrize("call, message", [
    (lambda: predict.run(["--model", "m", "--input", "i", "--output", "o", "--bogus"]), "unrecognized arguments: --bogus"),
    (lambda: sweep.run(["--input", "d", "--learner", "fogd", "--out_dir", "x"]), "unrecognized arguments: --out_dir x"),
    (lambda: sweep.run(["--input", "d", "--learner", "fogd", "--rep", "3"]), "unrecognized arguments: --rep 3"),
    (lambda: report.run(["sweep", "r.parquet", "--heat", "a,b"]), "unrecognized arguments: --heat a,b"),
    (lambda: reproduce.run(["--lis"]), "unrecognized arguments: --lis"),
    (lambda: prepare.run(["csv", "in", "--target", "y", "--output", "o", "--delim", ";"]), "unrecognized arguments: --delim ;"),
    (lambda: prepare.run(["mnist8m", "--output", "o", "--seeed", "3"]), "unrecognized arguments: --seeed 3"),
    (lambda: engines.main(["install", "prism", "--if_avail"]), "unrecognized arguments: --if_avail"),
])
def test_every_cli_refuses_unknown_flags_and_abbreviations(call, message, capsys):
    assert message in _one_line_error(capsys, call)


def test_deprecated_spellings_still_work_with_a_warning(capsys):
    args = sweep.build_parser().parse_args(["--input", "d", "--learner", "fogd", "--out", "o", "--workers", "3"])
    assert (args.output, args.num_workers) == ("o", 3)
    assert capsys.readouterr().err.splitlines() == [
        "python -m pipelines.sweep: warning: --out is deprecated; use --output",
        "python -m pipelines.sweep: warning: --workers is deprecated; use --num_workers",
    ]
    args = reproduce.build_parser().parse_args(["--out=o", "--workers=1"])
    assert (args.output, args.num_workers) == ("o", 1)
    request = prepare._parse(["molecular", "in.csv", "old_out", "--workers", "2"])
    assert (request.output.out, request.source.num_workers) == ("old_out", 2)
    assert "the output directory as the last argument is deprecated; use --output DIR" in capsys.readouterr().err
    line = _one_line_error(capsys, lambda: prepare._parse(["csv", "in.csv", "a", "--output", "b", "--target", "y"]))
    assert line.endswith("give the output directory once: --output b or a")
    assert _one_line_error(capsys, lambda: prepare._parse(["csv", "in.csv", "--target", "y"])).endswith(
        "the following arguments are required: --output")


def test_report_output_is_a_directory_and_the_old_png_flag_still_writes_its_file(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    curve = {"label": "a", "metric": "error", "curve": {"n": [1, 2, 3], "value": [0.5, 0.4, 0.3]}}
    (tmp_path / "c.json").write_text(json.dumps([curve]))
    assert report.run(["curves", str(tmp_path / "c.json"), "--output", str(tmp_path / "figs")]) == [
        str(tmp_path / "figs" / "online_error.png")]
    assert report.run(["curves", str(tmp_path / "c.json"), "-o", str(tmp_path / "old.png")]) == [str(tmp_path / "old.png")]
    assert "-o/--out FILE is deprecated; use --output DIR" in capsys.readouterr().err


# -- sweeps refuse, before any point runs, what train refuses ------------------------------
@pytest.fixture(scope="module")
def binary_set(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "binary"
    sweep_binary_data(path, n=300)
    return path


def _train_error(capsys, argv) -> str:
    return _one_line_error(capsys, lambda: train.run(argv)).split(": error: ", 1)[1]


@pytest.mark.parametrize("learner, grid, param", [
    ("fogd_r", ["sigma=1,2"], "sigma=1"),      # a regression learner on binary data
    ("fogd", ["sigmaa=1,2"], "sigmaa=1"),      # a misspelled parameter
    ("kernel_ogd", ["etaa=0.1"], "etaa=0.1"),
])
def test_sweep_refuses_up_front_with_the_message_of_train(learner, grid, param, binary_set, tmp_path, capsys):
    expected = _train_error(capsys, ["--input", str(binary_set), "--learner", learner, "--param", param, "--output", str(tmp_path / "t")])
    with pytest.raises(SystemExit) as done:
        sweep.run(["--input", str(binary_set), "--learner", learner, "--grid", *grid, "--scheduler", "serial",
                   "--output", str(tmp_path / "s")])
    assert str(done.value) == f"python -m pipelines.sweep: error: {expected}"
    assert not (tmp_path / "s").exists()  # nothing ran


def test_sweep_refuses_reseed_without_a_seed_parameter(binary_set, tmp_path):
    with pytest.raises(SystemExit, match="--reseed: learner kernel_ogd has no seed parameter"):
        sweep.run(["--input", str(binary_set), "--learner", "kernel_ogd", "--grid", "sigma=1", "--reseed",
                   "--scheduler", "serial", "--output", str(tmp_path / "s")])
    assert not (tmp_path / "s").exists()


def test_a_sweep_in_which_every_point_fails_exits_non_zero(binary_set, tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        sweep.run(["--input", str(binary_set), "--learner", "fogd", "--grid", "eta=-1,-2", "n_components=8",
                   "--scheduler", "serial", "--output", str(tmp_path / "s")])
    assert done.value.code not in (0, None)
    assert str(done.value).startswith("python -m pipelines.sweep: error: no point succeeded (first error: ValueError: ")
    assert "eta" in str(done.value) and not (tmp_path / "s" / "best.json").exists()


@pytest.mark.parametrize("status", [0, 3])
def test_a_command_asked_to_skip_teardown_exits_with_its_status_and_flushed_output(status):
    """Runs on Beam's embedded job service end with os._exit (pipelines.cli.exit_without_teardown)."""
    import subprocess
    import sys

    code = ("import logging, sys\n"
            "from pipelines.cli import main, exit_without_teardown\n"
            "def run(argv):\n"
            "    print('done', end='')\n"
            "    print('to stderr', file=sys.stderr, end='')\n"
            "    exit_without_teardown('test')\n"
            f"    return {status}\n"
            "main(run, 'train')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (status, "done", "to stderr")


def test_runs_on_the_embedded_job_service_skip_teardown():
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.common import _embedded_job_service

    assert _embedded_job_service(PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed"]))
    assert not _embedded_job_service(PipelineOptions(["--runner=PortableRunner", "--job_endpoint=localhost:8099"]))
    assert not _embedded_job_service(PipelineOptions(["--runner=DirectRunner"]))


@pytest.mark.parametrize("cores, flags, shards, spare", [
    (2, [], 1, True),  # the default DirectRunner: one shard at a time, whatever --num_shards
    (2, [], 4, True),
    (2, ["--direct_num_workers=2", "--direct_running_mode=multi_processing"], 2, False),
    (2, ["--direct_num_workers=2", "--direct_running_mode=multi_processing"], 1, True),
    (8, ["--direct_num_workers=4", "--direct_running_mode=multi_processing"], 4, True),
    (4, ["--direct_num_workers=0", "--direct_running_mode=multi_processing"], 4, False),  # 0: a worker per core
    (2, ["--runner=PrismRunner"], 1, True),
    (2, ["--runner=PrismRunner"], 2, False),
    (4, ["--runner=FlinkRunner", "--environment_type=LOOPBACK"], 2, True),
    (64, ["--runner=DataflowRunner"], 1, False),  # remote workers: their cores are not known here
])
def test_shards_decode_ahead_only_where_a_core_is_spare_for_each(monkeypatch, cores, flags, shards, spare):
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.common import spare_core_per_shard

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert spare_core_per_shard(PipelineOptions(flags), shards) is spare


@pytest.mark.parametrize("cores, spare", [(2, True), (1, False)])
def test_the_spare_core_check_runs_where_python_has_no_sched_getaffinity(monkeypatch, cores, spare):
    """Issue: os.sched_getaffinity is Linux's only: every batch ``okl train`` on macOS ended in an
    AttributeError (the launch asks whether a shard may decode ahead); it counts os.cpu_count() there."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.common import spare_core_per_shard

    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert spare_core_per_shard(PipelineOptions([]), 1) is spare


# Every command that takes Beam's options, as its console script runs it (pipelines.cli.main).
BEAM_COMMANDS = {
    "train": (train.run, "train", ["--learner", "fogd"]),
    "train --streaming": (train.run, "train", ["--streaming", "--learner", "fogd", "--stop_after", "5"]),
    "predict": (predict.run, "predict", ["--model", "{model}"]),
}


@pytest.fixture(scope="module")
def beam_inputs(tmp_path_factory):
    """A small binary data set and a model file for it."""
    import okl_core
    from okl_core.data.layout import write_dataset
    from tests.pipelines.reference import binary_data

    root = tmp_path_factory.mktemp("beam_options")
    X, y = binary_data(300)
    write_dataset(root / "data", X, y, "binary")
    learner = okl_core.make_learner("fogd", n_inputs=X.shape[1], n_components=8)
    (root / "model.npz").write_bytes(okl_core.model_bytes(learner, learner.init()))
    return {"data": root / "data", "model": root / "model.npz"}


@pytest.mark.parametrize("command", list(BEAM_COMMANDS))
@pytest.mark.parametrize("option, message", [
    ("--runner=Bogus", "--runner Bogus: not a runner Beam knows; valid values are DataflowRunner, "),
    ("--runner=prsim", "--runner prsim: not a runner Beam knows; valid values are DataflowRunner, "),
    ("--runner=no_such_module.Runner", "--runner no_such_module.Runner: module no_such_module cannot be imported (No module named 'no_such_module')"),
    ("--runner=apache_beam.runners.NoSuchRunner", "--runner apache_beam.runners.NoSuchRunner: module apache_beam.runners has no NoSuchRunner"),
    ("--direct_num_workers=-1", "--direct_num_workers -1: must be >= 1 (or 0: one worker per CPU)"),
    ("--environment_type=BOGUS", "--environment_type BOGUS: not an environment type Beam knows; use DOCKER, PROCESS, EXTERNAL or LOOPBACK"),
    ("--flink_master=not:a:url", "--flink_master not:a:url: expected [local], [auto] or HOST:PORT (e.g. localhost:8081)"),
    ("--flink_master=localhost:0", "--flink_master localhost:0: expected [local], [auto] or HOST:PORT (e.g. localhost:8081)"),
    # a value Beam's own parser refuses (okl parses Beam's options with the PipelineOptions subclasses' declarations)
    ("--direct_num_workers=two", "Beam pipeline option: argument --direct_num_workers: invalid int value: 'two'"),
    ("--checkpointing_interval=soon", "Beam pipeline option: argument --checkpointing_interval: invalid int value: 'soon'"),
    # Beam's own validation when the pipeline is built (after the data were opened): the error escapes run() to main
    ("--environment_type=PROCESS", "Beam pipeline options: Option process_command is required for environment type PROCESS"),
])
def test_a_bad_beam_option_is_one_line_in_every_command(command, option, message, beam_inputs, tmp_path, capsys):
    """Issue: a bad --runner was one line in batch train, a traceback in predict and train --streaming;
    --direct_num_workers=-1 (IndexError), --environment_type=BOGUS or PROCESS (ValueError) were tracebacks
    in each. Every command now prints one line naming the flag, exit status 2, and writes nothing."""
    from pipelines.cli import main

    run, name, argv = BEAM_COMMANDS[command]
    argv = [a.format(model=beam_inputs["model"]) for a in argv] + ["--input", str(beam_inputs["data"]), "--output", str(tmp_path / "out"), option]
    with pytest.raises(SystemExit) as exit_info:
        main(run, name, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"python -m pipelines.{name}: error: {message}"), err
    if not message.endswith(" "):  # the whole message
        assert line == f"python -m pipelines.{name}: error: {message}"
    assert not (tmp_path / "out").exists()  # a streaming launch made it, and once left it behind empty


@pytest.mark.parametrize("command", ["train", "predict"])
def test_options_beam_refuses_when_it_validates_them_are_the_commands_only_line(command, beam_inputs, tmp_path):
    """Issue: ``--runner DataflowRunner`` without --project printed Beam's warning
    ``WARNING:apache_beam.options.pipeline_options:Unable to create default GCS bucket.`` (and one
    per bad GCS path) above the one-line error that says the same."""
    import subprocess
    import sys

    first = ["--learner", "fogd"] if command == "train" else ["--model", str(beam_inputs["model"])]
    done = subprocess.run([sys.executable, "-m", f"pipelines.{command}", *first, "--input", str(beam_inputs["data"]),
                           "--output", str(tmp_path / "out"), "--runner=DataflowRunner", "--temp_location=/tmp/x"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"python -m pipelines.{command}: error: "), line


def test_what_beam_logs_while_validating_options_that_pass_still_shows(caplog):
    """The warnings of a validation that passed are let through after it (held only to see whether it fails)."""
    import logging

    from pipelines.common import _validation_warnings_held

    with caplog.at_level(logging.WARNING), _validation_warnings_held():
        logging.getLogger("apache_beam.options.pipeline_options_validator").warning("Option --zone is deprecated")
        assert caplog.messages == []
    assert caplog.messages == ["Option --zone is deprecated"]


_FLINK_JAR = "`make runners` builds one for apache-beam 2.62.0: docs/runners.md, 'Prism and a local Flink cluster'"


@pytest.mark.parametrize("command", list(BEAM_COMMANDS))
@pytest.mark.parametrize("options, message", [
    # a local jar path that does not exist: refused with the options
    (["--runner=FlinkRunner", "--flink_job_server_jar={tmp}/missing.jar"], f"--flink_job_server_jar {{tmp}}/missing.jar: no such file ({_FLINK_JAR})"),
    (["--runner=SparkRunner", "--spark_job_server_jar={tmp}/missing.jar"], "--spark_job_server_jar {tmp}/missing.jar: no such file"),
    # the job server jar Beam fetches from Maven Central when none is given (here the repository cannot be reached)
    (["--runner=FlinkRunner"], "--runner=FlinkRunner: Beam could not fetch its job server jar (beam-runners-flink-{flink}-job-server-{beam}.jar: "
     f"<urlopen error [Errno 111] Connection refused>); pass --flink_job_server_jar=PATH ({_FLINK_JAR}), put the jar at "
     "{tmp}/jars/beam-runners-flink-{flink}-job-server-{beam}.jar, or use a running job server: --runner=PortableRunner --job_endpoint=HOST:PORT"),
    (["--runner=SparkRunner"], "--runner=SparkRunner: Beam could not fetch its job server jar (beam-runners-spark-3-job-server-{beam}.jar: "
     "<urlopen error [Errno 111] Connection refused>); pass --spark_job_server_jar=PATH, put the jar at "
     "{tmp}/jars/beam-runners-spark-3-job-server-{beam}.jar, or use a running job server: --runner=PortableRunner --job_endpoint=HOST:PORT"),
    (["--runner=FlinkRunner", "--flink_job_server_jar=http://127.0.0.1:1/server.jar"],
     "--flink_job_server_jar http://127.0.0.1:1/server.jar: Beam could not fetch it (<urlopen error [Errno 111] Connection refused>); "
     "give the path of a downloaded jar"),
    (["--runner=FlinkRunner", "--flink_job_server_jar={tmp}/server.jar", "--job_server_java_launcher={tmp}/no-java"],
     "--runner=FlinkRunner: its job server runs on Java, and '{tmp}/no-java' is not found; install Java 11 or newer (or pass --job_server_java_launcher=PATH)"),
])
def test_a_job_server_that_cannot_be_started_is_one_line(command, options, message, beam_inputs, tmp_path, capsys, monkeypatch):
    """Issue: --runner=FlinkRunner or SparkRunner without a job server jar, where Beam cannot fetch one from
    Maven Central (no network, or a 404 behind a proxy), ended in Beam's chain of five tracebacks; so did a
    --flink_job_server_jar that does not exist and a missing `java`. One line naming the flag and what to do."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions
    from apache_beam.utils.subprocess_server import JavaJarServer

    from pipelines.cli import main
    from pipelines.local_runners import beam_version

    # Maven Central and its Google mirror, unreachable (as offline): nothing is downloaded by this test
    monkeypatch.setattr(JavaJarServer, "MAVEN_CENTRAL_REPOSITORY", "http://127.0.0.1:1/maven2")
    monkeypatch.setattr(JavaJarServer, "GOOGLE_MAVEN_MIRROR", "http://127.0.0.1:1/mirror")
    (tmp_path / "server.jar").write_bytes(b"")
    run, name, argv = BEAM_COMMANDS[command]
    options = [o.format(tmp=tmp_path) for o in options] + [f"--jar_cache_dir={tmp_path}/jars"]
    argv = [a.format(model=beam_inputs["model"]) for a in argv] + ["--input", str(beam_inputs["data"]), "--output", str(tmp_path / "out"), *options]
    with pytest.raises(SystemExit) as exit_info:
        main(run, name, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    flink = PipelineOptions([]).view_as(FlinkRunnerOptions).flink_version  # the job server Beam picks
    expected = message.format(tmp=tmp_path, flink=flink, beam=beam_version())
    assert err.strip().splitlines()[-1] == f"python -m pipelines.{name}: error: {expected}"
    assert not (tmp_path / "out").exists()


def test_after_a_one_line_error_threads_cut_off_by_the_stopping_runner_print_nothing():
    """Issue (CI, Prism): after a streaming job's capacity line, a Beam SDK worker thread whose gRPC
    stream Prism closed on its way out (``read_state``: UNAVAILABLE) printed its traceback under the
    one line. Such threads are now quiet; any other thread's exception is still printed."""
    import subprocess
    import sys

    code = (
        "import atexit, threading, grpc\n"
        "from pipelines.cli import UsageError, main\n"
        "def cut_off():\n"
        "    grpc.insecure_channel('127.0.0.1:1').unary_unary('/okl.Test/Call')(b'', timeout=5)\n"
        "def broken():\n"
        "    raise ValueError('a real defect')\n"
        "def later():  # threads failing while the process ends, as a runner's do\n"
        "    for target in (cut_off, broken):\n"
        "        thread = threading.Thread(target=target)\n"
        "        thread.start()\n"
        "        thread.join()\n"
        "def run(argv):\n"
        "    atexit.register(later)\n"
        "    raise UsageError('bad flag')\n"
        "main(run, 'train', [])\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 2
    assert done.stderr.startswith("python -m pipelines.train: error: bad flag\n"), done.stderr
    assert "UNAVAILABLE" not in done.stderr and "ValueError: a real defect" in done.stderr


def test_beams_stray_root_warnings_and_prisms_errors_are_dropped_by_origin_not_by_their_words():
    """BeamNoise: warnings Beam's own files log on the root logger are dropped whatever they say (here
    RunInference's real "Resource module is not available" call, and a reworded one); the same words
    from anyone else, Beam's named loggers and any ERROR pass; Prism's relayed errors are dropped."""
    import logging
    import os

    import apache_beam
    from apache_beam.ml.inference import base

    from pipelines.cli import BEAM_NOISE

    class Kept(logging.Handler):
        def __init__(self):
            super().__init__()
            self.records: list[logging.LogRecord] = []

        def emit(self, record):
            self.records.append(record)

    kept = Kept()
    kept.addFilter(BEAM_NOISE)
    root = logging.getLogger()
    root.addHandler(kept)
    try:
        if base.resource is None:  # without torch (okl does not need it), Beam logs its warning on the root logger
            base._get_current_process_memory_in_bytes()
        assert kept.records == []
        beam_file = os.path.join(os.path.dirname(apache_beam.__file__), "io", "anything.py")
        for name, level, path, message in [
            ("root", logging.WARNING, beam_file, "some reworded notice"),  # dropped: Beam's file, root logger
            ("root", logging.WARNING, __file__, "Resource module is not available"),  # kept: not Beam's
            ("apache_beam.io.fileio", logging.WARNING, beam_file, "a named logger's warning"),  # kept
            ("root", logging.ERROR, beam_file, "an error"),  # kept
            ("PrismRunner", logging.ERROR, "prism.go", "any words: Prism's error about the job"),  # dropped
            ("PrismRunner", logging.INFO, "prism.go", "Prism's log at --prism_log_level=info"),  # kept
        ]:
            root.handle(logging.LogRecord(name, level, path, 1, message, None, None))
        assert [record.getMessage() for record in kept.records] == [
            "Resource module is not available", "a named logger's warning", "an error", "Prism's log at --prism_log_level=info"]
    finally:
        root.removeHandler(kept)
