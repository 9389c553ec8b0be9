"""The training job of ``pipelines.train``: resolved from its flags, wired as a Beam graph.

:func:`resolve_job` turns a :class:`~pipelines.requests.TrainRequest` (the flags, parsed and checked
once) into a :class:`TrainJob` -- the data sources
(:class:`transforms.read.DatasetSource`; the built-in demo data set written first when
there is no ``--input``), the learner (:func:`okl_experiments.params.build_learner`: the
parameters of ``--config``, ``--param`` and the flags, completed and resolved on the
data), the stream plan (:func:`okl_experiments.params.batch_rows_for`) and the output
paths. :func:`build_graph` adds the batch graph to a pipeline (DESIGN.md, "transforms
and the training graph")::

    InitialModel ──> [round r = 0..R-1:  ReadShards -> TrainOnline -> MergeBySeed] ──> model
                                                         └─> per-batch metrics, dead letters
    model ──> Evaluate(--test) ──> test metrics;   WriteRunOutputs -> model, metrics, plot

The streaming graph of the same job is :mod:`pipelines.stream`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter

import okl_core
from okl_core.data.layout import INFO_FILE, DatasetInfo, check_same_classes, files_name
from okl_core.data.preparation import PREPARATION_FILE, preparation_record
from okl_core.data.plan import StreamPlan
from okl_core.data.synthetic import write_synthetic
from okl_core.publish import StagedDirectory, remove_made_dirs
from okl_experiments.defaults import demo_params
from okl_core.derived import complete_params
from okl_experiments.params import MEDIAN_ROWS, DataFacts, batch_rows_for, build_learner, derived_values, minibatch_rows, read_learner_config
from okl_experiments.text import read_json
from pipelines.cli import make_output_dir, output_error
from pipelines.common import UsageError, spare_core_per_shard
from pipelines.requests import TrainRequest
from transforms.evaluate import Evaluate
from transforms.outputs import MANIFEST_FILE, WriteRunOutputs, run_id, write_bytes
from transforms.read import METRICS_NAMESPACE, DatasetSource, ReadShards, is_remote
from transforms.streaming import continued_from, dead_lettered_files, input_root, learned_files
from transforms.train import LearnerSpec, MergeBySeed, TrainOnline

__all__ = ["TrainJob", "TrainResult", "resolve_job", "build_graph", "counters", "read_metrics", "data_facts", "stage_output", "DEMO_LEARNER",
           "data_classes", "check_model_classes", "write_preparation", "start_refused", "files_learned_by",
           "SYNTHETIC_TRAIN_ROWS", "SYNTHETIC_TEST_ROWS", "OUTPUT_FILES"]

SYNTHETIC_TRAIN_ROWS = 65536
SYNTHETIC_TEST_ROWS = 8192
# The built-in demo: the DSG paper's synthetic regression learned by FOGD regression (or by
# DSG with the square loss: --learner dsg; slower, its prediction cost grows with the blocks).
DEMO_LEARNER = "fogd_r"
DEMO_PARAMS = {
    "fogd_r": {"sigma": "0.2*median", "eta": 1e-4, "eps": 0.0},
    "dsg": {"loss": "square", "sigma": "0.2*median", "block_size": 512, "batch_size": 1024, "theta": 8.0, "step_offset": 16.0, "nu": 1e-6},
}
OUTPUT_FILES = {"model": "model.npz", "metrics": "metrics.json", "plot": "online_error.png", "dead_letter": "dead_letter.jsonl"}
"""What a run writes into its output directory (and ``run.json``, :data:`transforms.outputs.MANIFEST_FILE`, last)."""


@dataclasses.dataclass
class TrainJob:
    """Everything the graph needs, resolved from the command line."""

    source: DatasetSource
    test_source: DatasetSource | None
    learner: okl_core.Learner
    params: dict
    plan: StreamPlan
    output: str
    files: dict
    read_order_seed: int | None
    shuffle_rows: bool = False
    progress_dir: str | None = None
    """A local folder where the training steps report their rows while they run (live progress)."""
    derived: dict = dataclasses.field(default_factory=dict)
    """Parameters resolved on the data: name -> (as given, value) (:func:`okl_experiments.params.derived_values`)."""
    staging: StagedDirectory | None = None
    """Local outputs: the hidden directory the run's files are written into, renamed to
    ``output`` by :meth:`publish` (None: remote outputs, written in place, ``run.json`` last)."""
    restart: tuple[dict, frozenset[str]] = ({}, frozenset())
    """A streaming job's start: the files the model it continues from has learned, and those an
    earlier job on its output dead-lettered (:func:`_restart_files`, read once at launch)."""
    made: list[str] = dataclasses.field(default_factory=list)
    """The folders the launch made for a streaming job's local output (written in place):
    :meth:`abandon` removes them again while they are empty."""
    request: TrainRequest = TrainRequest()
    """The request the job was resolved from (a streaming job's graph reads its streaming flags)."""

    def write_path(self, key: str) -> str:
        """Where the step that writes output ``key`` puts it (the staging directory when local)."""
        return self.files[key] if self.staging is None else os.path.join(self.staging.tmp, OUTPUT_FILES[key])

    def final_path(self, path: str) -> str:
        """``path`` as it reads after publishing (the demo data set is built in the staging directory)."""
        if self.staging is not None and path.startswith(self.staging.tmp):
            return self.output.rstrip("/") + path[len(self.staging.tmp):]
        return path

    def publish(self) -> None:
        """Put the finished run's files in place together (one rename; nothing for remote outputs)."""
        if self.staging is not None:
            self.staging.commit()

    def abandon(self) -> None:
        """Drop a failed, refused or interrupted run's files; the output keeps what it held before.

        A streaming job's output folder made by this launch is removed while empty (a
        refused launch leaves nothing behind); the versions a job wrote are never removed.
        """
        if self.staging is not None:
            self.staging.abort()
        remove_made_dirs(self.made)


@dataclasses.dataclass
class TrainResult:
    """What ``pipelines.train.run`` returns: the Beam result, where the outputs are, metrics and counters."""

    pipeline_result: object
    output: str
    files: dict
    metrics: dict | None
    counters: dict = dataclasses.field(default_factory=dict)

    @property
    def model_path(self) -> str:
        return self.files["model"]


def _json_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _learner_choice(request: TrainRequest) -> tuple[str, dict]:
    """Learner name and parameters from --config, --learner, --param and the flags."""
    name: str | None = None
    params: dict = {}
    if request.config:
        try:
            name, params = read_learner_config(request.config)
        except ValueError as err:
            raise UsageError(f"--config {err}") from None
    name = request.learner or name
    if name is None:
        name = DEMO_LEARNER if request.input is None else None
    if name is None:
        raise UsageError(f"choose a learner with --learner (one of {', '.join(okl_core.learner_names())}) or --config")
    if name not in okl_core.learner_names():
        raise UsageError(f"unknown learner {name!r}; choose one of {', '.join(okl_core.learner_names())}")
    if request.input is None and not request.config:
        params = {**demo_params(name), **DEMO_PARAMS.get(name, {}), **params}
    for item in request.params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = _json_value(value)
    flags = {"sigma": None if request.sigma is None else _json_value(request.sigma), "eta": request.eta,
             "n_components": request.n_components, "seed": request.seed}
    params.update({key: value for key, value in flags.items() if value is not None})
    return name, params


def data_facts(source: DatasetSource) -> DataFacts:
    """What parameters are derived from: the data set's description, its first rows for the median."""
    return DataFacts(source.n_features, source.task, source.n_classes, source.n_rows,
                     rows=lambda: source.read_rows(MEDIAN_ROWS), name=source.path)


def _check_mergeable(learner: okl_core.Learner) -> None:
    """Fail before the job when the learner cannot merge shards (probe: two initial states)."""
    initial = learner.init()
    try:
        okl_core.merge_states(learner, [initial, initial], base=initial)
    except okl_core.NotMergeableError as err:
        raise UsageError(f"--num_shards > 1 needs a mergeable learner: {err}; use --num_shards 1") from None


def _open(path: str, flag: str, like: DatasetSource | None = None, streaming: bool = False, skip: frozenset[str] = frozenset()) -> DatasetSource:
    """The data set at ``path``; files without ``dataset.json`` take ``like``'s task and classes when their labels fit them.

    A streaming job's files may number their rows from 0 each (they arrive as events);
    ``skip``: the files of its glob left out (:func:`_streaming_input`).
    """
    try:
        if like is not None:
            return DatasetSource.open(path, like.task, None if like.classes is None else list(like.classes))
        return DatasetSource.open(path, files_own_rows=not streaming, skip=skip)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"{flag} {path}: {err}") from None


def _default_output(data_name: str, learner_name: str) -> str:
    """``runs/<data>-<learner>``: the output of a job without ``--output``.

    ``data_name`` is the data set's name: its ``dataset.json``'s (anything ``prepare --name``
    took), or for Parquet files without one their file's or folder's name
    (:func:`~okl_core.data.layout.files_name`). It becomes one folder name: characters other
    than ASCII letters, digits, ``.``, ``_`` and ``-`` become ``_`` (no ``/``, wildcard or
    space), leading and trailing ``.``, ``_`` and ``-`` are dropped (no hidden or ``..``
    folder), at most 100 characters; ``data`` when nothing is left.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", data_name).strip("._-")[:100].rstrip("._-")
    return os.path.join("runs", f"{safe or 'data'}-{learner_name}")


def start_refused(output: str, init_model: str | None, path: str, err: Exception, damaged: bool) -> UsageError:
    """The one line refusing to start a streaming job from the model file ``path``.

    ``path`` is ``init_model`` (the flag is named) or the newest version in ``output`` (a
    restart: ``--output`` is named, not a flag the user never gave). ``damaged``: the file
    or its version record cannot be read or is not okl's; else it is a model of another
    learner or parameters than the job's (other classes are the data's to fix: :func:`check_model_classes`).
    """
    # A damaged file's ValueError (ModelFileError, a bad record) names the file: the model or its record.
    detail = str(err) if damaged and isinstance(err, ValueError) else f"{path}: {err}"
    if init_model:
        return UsageError(f"--init_model {detail if detail.startswith(path) else f'{path}: {detail}'}")
    if damaged:  # versions are written atomically: this one was damaged or put there by something else
        return UsageError(f"--output {output}: its newest model version cannot be used ({detail}); move {os.path.basename(path)} "
                          "and its .json record out of the folder to restart from the version before it, or give a new --output")
    return UsageError(f"--output {output} holds a model version this job cannot continue ({detail}); "
                      "restart with that run's learner and parameters, or give a new --output")


def files_learned_by(output: str, init_model: str | None, start: str | None) -> dict:
    """:func:`~transforms.streaming.learned_files` of the model a streaming job starts from
    (``start``: :func:`~transforms.streaming.continued_from`; None: a fresh model, nothing learned).

    Raises
    ------
    UsageError
        Its version record is damaged (:func:`start_refused`).
    """
    if start is None:
        return {}
    try:
        return learned_files(start)
    except ValueError as err:
        raise start_refused(output, init_model, start, err, damaged=True) from None


def _restart_files(output: str, init_model: str | None, watched: str | None = None) -> tuple[dict, frozenset[str]]:
    """What the model a streaming job on ``output`` starts from has learned (:func:`files_learned_by`),
    and the files an earlier job dead-lettered that it has not learned whole (:func:`dead_lettered_files`,
    found under the folder ``watched`` now: ``--input``)."""
    learned = files_learned_by(output, init_model, continued_from(output, init_model))
    return learned, dead_lettered_files(output, learned, None if watched is None else input_root(watched))


def _streaming_input(request: TrainRequest, learner_name: str) -> tuple[DatasetSource, tuple[dict, frozenset[str]] | None]:
    """What a streaming job opens at launch: ``--input`` less the files an earlier job on its
    output dead-lettered and its version has not learned whole; and, for a glob, those files
    (:func:`_restart_files`, read once: the launch keeps them in :attr:`TrainJob.restart`).

    A restart must not be refused over a file the job it continues already judged (an
    unreadable or foreign file, a file of bad rows): only the files it may learn tell the
    data's width, task and classes. A directory with ``dataset.json`` opens its listed files only.
    """
    path = _input_path(request)
    if is_remote(path) or os.path.isdir(path):
        return _open(path, "--input", streaming=True), None
    assert request.streaming is not None
    output = request.output or _default_output(files_name(path), learner_name)  # the name open_dataset gives these files
    restart = _restart_files(output, request.streaming.init_model, path)
    return _open(path, "--input", streaming=True, skip=restart[1]), restart


def _demo_data(request: TrainRequest, directory: str) -> tuple[DatasetSource, str]:
    """Write the built-in synthetic data sets into ``<directory>/data``; the training source and the test set's path."""
    train_path, test_path = os.path.join(directory, "data", "train"), os.path.join(directory, "data", "test")
    write_synthetic(train_path, request.synthetic_rows, seed=request.synthetic_seed, rows_per_shard=16384, overwrite=True)
    write_synthetic(test_path, SYNTHETIC_TEST_ROWS, seed=request.synthetic_seed + 1, overwrite=True, name="dsg_synthetic_test")
    return _open(train_path, "--input"), test_path


def _not_a_run(path: str) -> str | None:
    """Why ``--overwrite`` must not replace ``path`` (None: it holds an okl run)."""
    if any(os.path.exists(os.path.join(path, f)) for f in (MANIFEST_FILE, OUTPUT_FILES["model"], OUTPUT_FILES["metrics"])):
        return None
    return f"not an okl run folder (no {MANIFEST_FILE}, {OUTPUT_FILES['model']} or {OUTPUT_FILES['metrics']})"


def _stage_output(output: str, overwrite: bool) -> StagedDirectory | None:
    """Refuse a used ``--output`` without ``--overwrite``; the staging directory of a local one."""
    return stage_output(output, overwrite, _not_a_run, (MANIFEST_FILE, *OUTPUT_FILES.values()))


def stage_output(output: str, overwrite: bool, may_replace, remote_files, holds: str = "a run") -> StagedDirectory | None:
    """The staging directory of a local ``--output`` (:class:`~okl_core.publish.StagedDirectory`); None for a remote one.

    A used output is refused without ``overwrite``, and with it when ``may_replace(path)``
    says why not (train and predict each recognise their own outputs). Remote file systems
    cannot rename directories: a remote output is written in place, refused without
    ``overwrite`` when it holds any of ``remote_files`` (``holds`` names them in the error).

    Raises
    ------
    UsageError
        One line naming ``--output``: used, not replaceable, busy, or not writable.
    """
    if not output.strip():
        raise UsageError("--output is empty: give a directory")
    if is_remote(output):
        try:
            used = [f for f in remote_files if FileSystems.exists(FileSystems.join(output, f))]
        except ValueError as err:  # a scheme no installed file system serves
            raise UsageError(f"--output {output}: {err}") from None
        if used and not overwrite:
            raise UsageError(f"--output {output} already holds {holds} ({', '.join(used)}); pass --overwrite to replace it")
        return None
    try:
        return StagedDirectory(output, replace=overwrite, may_replace=may_replace)
    except OSError as err:  # used, busy, or a parent that is a file, /proc, no permission
        raise UsageError(str(output_error(err, output))) from None


def _test_source(path: str, source: DatasetSource) -> DatasetSource:
    test = _open(path, "--test", like=source)
    if (test.n_features, test.task) != (source.n_features, source.task):
        raise UsageError(f"--test {path} has {test.n_features} features of {test.task} data, "
                         f"the training data {source.n_features} features of {source.task} data")
    try:
        check_same_classes(f"--test {path}", test.classes, source.classes)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return dataclasses.replace(test, n_classes=source.n_classes) if source.task == "multiclass" else test


def data_classes(source: DatasetSource, task: str) -> list | None:
    """The classes a model trained on ``source`` records (:func:`okl_core.model_classes`): its ``dataset.json``'s.

    None for regression, and for Parquet files without ``dataset.json``: their classes are
    the label codes themselves (as ``--test`` compares them, :func:`check_same_classes`).
    """
    return None if task == "regression" or source.classes is None else list(source.classes)


def _info_file(source: DatasetSource) -> str:
    """The ``dataset.json`` of ``source`` (local or remote), as error lines name it."""
    return FileSystems.join(source.path, INFO_FILE) if is_remote(source.path) else os.path.join(source.path, INFO_FILE)


def _check_recorded_classes(source: DatasetSource, learner: okl_core.Learner) -> None:
    """Refuse at launch the ``dataset.json`` classes that no model file could record (:func:`okl_core.check_classes`:
    megabytes of class names), instead of failing when the first model is written."""
    try:
        okl_core.check_classes(learner, data_classes(source, learner.task))
    except ValueError as err:
        raise UsageError(f"--input {_info_file(source)}: {err}") from None


def check_model_classes(source: DatasetSource, model: bytes, trained: str) -> None:
    """Refuse the ``--input`` ``source`` when its ``dataset.json`` classes differ from those the model file records.

    :func:`~okl_core.data.layout.check_same_classes` (the ``--test`` rule): a ValueError of
    one line naming ``--input``'s ``dataset.json`` and ``trained`` (the model). A model or
    data set that records no classes passes (the codes are all there is).
    """
    check_same_classes(f"--input {_info_file(source)}", source.classes, okl_core.model_classes(model), trained)


def _input_path(request: TrainRequest) -> str:
    """What --input opens at launch: a streaming job watches a directory without ``dataset.json`` as ``DIR/*.parquet``."""
    path = request.input
    assert path is not None
    if request.streaming is not None and not is_remote(path) and os.path.isdir(path) and not os.path.exists(os.path.join(path, INFO_FILE)):
        return os.path.join(path, "*.parquet")
    return path


def resolve_job(request: TrainRequest) -> TrainJob:
    """Resolve data, learner, plan and output paths (generating the demo data if needed).

    Raises
    ------
    UsageError
        Anything wrong with the data, or with the flags given the data, with the flag it concerns.
    """
    name, params = _learner_choice(request)
    restart = None
    source: DatasetSource | None
    if request.input is None:
        source = None
    elif request.streaming is not None:
        source, restart = _streaming_input(request, name)
    else:
        source = _open(request.input, "--input")
    if source is None and request.output and is_remote(request.output):
        raise UsageError("the built-in demo data set is written locally: give a local --output, or --input")
    output = request.output or _default_output("synthetic" if source is None else source.name, name)
    staging: StagedDirectory | None
    if request.streaming is not None:  # a streaming job adds model versions to its output, and restarts from them
        staging, made = None, _streaming_output(output)
    else:
        staging, made = _stage_output(output, request.overwrite), []
    try:
        test = request.test
        if source is None:
            source, demo_test = _demo_data(request, staging.tmp if staging is not None else output)
            test = test or demo_test
        files = {key: f"{output.rstrip('/')}/{file}" for key, file in OUTPUT_FILES.items()}
        job = _resolve_learning(request, source, test, name, params, output, files)
        if request.streaming is not None:
            job.restart = restart or _restart_files(output, request.streaming.init_model, request.input)
    except BaseException:
        if staging is not None:
            staging.abort()
        remove_made_dirs(made)
        raise
    job.staging, job.made = staging, made
    if request.streaming is None:  # a streaming job writes it when it starts (pipelines.stream)
        write_preparation(job)
    return job


def write_preparation(job: TrainJob) -> None:
    """Write the training data set's preparation next to the model (``preparation.json``), when it has one.

    What ``okl predict --input raw.csv`` needs to prepare raw records exactly as the training
    rows were prepared (:mod:`okl_core.data.preparation`): only data sets prepared by
    ``okl prepare csv|parquet`` have one, read from a local ``dataset.json``. Written
    beside, never into, the model file: the model's bytes stay those of its learning.
    """
    info_path = os.path.join(job.source.path, INFO_FILE)
    if is_remote(job.source.path) or not os.path.isfile(info_path):
        return
    record = preparation_record(DatasetInfo.from_file(info_path))
    if record is None:
        return
    directory = job.staging.tmp if job.staging is not None else job.output
    write_bytes(f"{directory.rstrip('/')}/{PREPARATION_FILE}", record)


def _streaming_output(output: str) -> list[str]:
    """Make a streaming job's local ``--output`` (its versions are written into it as they
    come); returns the folders made (:attr:`TrainJob.made`), none for a remote one.

    Raises
    ------
    UsageError
        One line naming ``--output``: a file, under a file, or not writable.
    """
    if is_remote(output):
        return []
    try:
        return make_output_dir(output)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _resolve_learning(request: TrainRequest, source: DatasetSource, test: str | None, name: str, params: dict, output: str,
                      files: dict) -> TrainJob:
    """The learner, plan and test set of the job (every check that needs the training data)."""
    if source.n_rows == 0:
        raise UsageError(f"--input {source.path}: the data set has no rows")
    try:
        learner = build_learner(name, params, data_facts(source))
        learner.check_stream(source.n_rows)  # a state that grows with the stream: refused before the job
        _check_recorded_classes(source, learner)
        plan = StreamPlan(source.n_rows, request.num_shards, request.rounds, batch_rows_for(learner, request.batch_rows), align=minibatch_rows(learner))
    except ValueError as err:
        raise UsageError(str(err)) from None
    test_source = _test_source(test, source) if test else None
    if plan.num_shards > 1:
        _check_mergeable(learner)
    config = learner.describe()["config"]
    return TrainJob(source, test_source, learner, config, plan, output, files, request.read_order_seed, request.shuffle_rows,
                    derived=derived_values(complete_params(name, params), config), request=request)


def build_graph(pipeline: beam.Pipeline, job: TrainJob, launched_at: float) -> None:
    """Add the training graph of ``job`` to ``pipeline``."""
    spec = LearnerSpec(job.learner.name, job.params)
    # The initial model records the data's classes; each merge keeps its base's, so the written model does too.
    initial = okl_core.model_bytes(job.learner, job.learner.init(), data_classes(job.source, job.learner.task))
    model = pipeline | "InitialModel" >> beam.Create([initial])
    decode_ahead = spare_core_per_shard(pipeline.options, job.plan.num_shards)
    summaries, batches, dead = [], [], []
    for r in range(job.plan.rounds):
        read = pipeline | f"ReadShards_r{r}" >> ReadShards(
            job.source, job.plan, round=r, materialize=job.shuffle_rows, shuffle_seed=job.read_order_seed
        )
        trained = read["batches"] | f"TrainOnline_r{r}" >> TrainOnline(
            spec, job.plan, r, model, source=job.source, progress_dir=job.progress_dir, decode_ahead=decode_ahead)
        model = trained.states | f"MergeBySeed_r{r}" >> MergeBySeed(spec, base=model)
        summaries.append(trained.states | f"Summaries_r{r}" >> beam.Map(lambda result: result[2]).with_output_types(str))
        batches.append(trained.metrics)
        dead.extend([read["dead_letter"], trained.dead_letter])
    if job.test_source is not None:
        evaluated = pipeline | "Evaluate" >> Evaluate(job.test_source, model, job.plan.batch_rows)
        test = evaluated["metrics"]
        dead.append(evaluated["dead_letter"])
    else:
        test = pipeline | "NoTestSet" >> beam.Create([]).with_output_types(str)
    info = {
        "learner": job.learner.describe(),
        "task": job.learner.task,
        "plan": job.plan.to_dict(),
        "train": {"name": job.source.name, "path": job.final_path(job.source.path), "n_rows": job.source.n_rows},
        "test": None if job.test_source is None else {"name": job.test_source.name, "path": job.final_path(job.test_source.path), "n_rows": job.test_source.n_rows},
        "files": job.files,
        "write_to": {key: job.write_path(key) for key in OUTPUT_FILES},
        "run_id": run_id(launched_at),
        "launched_at": launched_at,
    }
    pipeline | "WriteRunOutputs" >> WriteRunOutputs(
        info,
        model,
        summaries | "FlattenSummaries" >> beam.Flatten(),
        batches | "FlattenBatchMetrics" >> beam.Flatten(),
        test,
        dead | "FlattenDeadLetters" >> beam.Flatten(),
    )


def counters(pipeline_result) -> dict:
    """okl's Beam counters (summed over steps), where the runner reports metrics."""
    try:
        queried = pipeline_result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    except (NotImplementedError, AttributeError):
        return {}
    out: dict = {}
    for counter in queried.get("counters", []):
        value = counter.committed if counter.committed is not None else counter.attempted
        out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + (value or 0)
    return out


def read_metrics(job: TrainJob) -> dict | None:
    """The run's ``metrics.json``, when it is local and written."""
    path = job.files["metrics"]
    if is_remote(path) or not os.path.exists(path):
        return None
    return read_json(path, "metrics.json")  # "NaN" / "Infinity" strings back to floats
