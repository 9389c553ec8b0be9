"""Typed requests: each command's flags, parsed once and checked in one place.

A command's ``run`` parses its command line (:class:`pipelines.cli.Parser`) and turns the
namespace into one frozen request (``TrainRequest.from_args``, ...): the checks that need
no data run there, once, with the one-line messages naming the flag; the library functions
of :mod:`pipelines.job`, :mod:`pipelines.stream`, ... take the request, never an argparse
namespace. A check that needs the data or the learner (a learner that cannot mix, a data
set without rows) stays where those are known, with the request's values.

This module imports neither Beam nor a command module, so every command and the layers
below can share it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any, Union

from okl_core.data.layout import DEFAULT_COMPRESSION
from okl_core.data.mnist8m import DeformationConfig
from okl_core.learners.base import check_seed
from pipelines.cli import UsageError

__all__ = ["StreamRequest", "TrainRequest", "PredictRequest", "SweepRequest", "ReproduceRequest", "ClusterRequest", "ReportRequest",
           "CurvesRequest", "SweepFiguresRequest", "ReproduceFiguresRequest", "RunSpecRequest", "DefaultsRequest", "report_request",
           "PrepareRequest", "DatasetOutput", "SourceRequest", "MnistRequest", "LibsvmRequest", "TableRequest", "Mnist8mRequest",
           "PcaRequest", "MolecularRequest", "DEFAULT_POLL_SECONDS", "STREAMING_ONLY"]

DEFAULT_POLL_SECONDS = 5.0
"""Seconds between looks for new input files and new model versions (``--poll_seconds``)."""

STREAMING_ONLY = ("init_model", "snapshot_batches", "snapshot_seconds", "poll_seconds", "merge_seconds", "stop_after")
"""``train`` flags of streaming jobs only (default None, so a batch job can tell that one was given)."""


def _check_seconds(flag: str, value: float | None) -> None:
    """A time flag must be a finite number of seconds > 0 (None: not given).

    inf and NaN reach Beam's timers and PeriodicImpulse as tracebacks (some only after the
    job ran), and a --stop_after of 0 or less would end the job before it learned anything.
    """
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"--{flag} {value:g}: must be a finite number of seconds > 0")


@dataclasses.dataclass(frozen=True)
class StreamRequest:
    """The streaming flags of ``train --streaming`` (:mod:`pipelines.stream`), checked.

    Raises
    ------
    UsageError
        A snapshot count below 1, a mix weight outside [0, 1], a time that is not a finite
        number of seconds > 0 (the message names the flag).
    """

    mix_weight: float = 0.0
    """Weight w of a newer merged version mixed into a shard: (1-w) local + w merged."""
    snapshot_batches: int | None = None
    snapshot_seconds: float | None = None
    poll_seconds: float = DEFAULT_POLL_SECONDS
    merge_seconds: float | None = None
    init_model: str | None = None
    stop_after: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.mix_weight <= 1.0:
            raise UsageError(f"--mix_weight {self.mix_weight}: must be in [0, 1]")
        if self.snapshot_batches is not None and self.snapshot_batches < 1:
            raise UsageError("--snapshot_batches must be >= 1")
        for flag in ("snapshot_seconds", "poll_seconds", "merge_seconds", "stop_after"):
            _check_seconds(flag, getattr(self, flag))

    @property
    def snapshot_every(self) -> int | None:
        """Batches between a shard's snapshots: ``--snapshot_batches``, else 10 unless ``--snapshot_seconds``."""
        return self.snapshot_batches or (None if self.snapshot_seconds else 10)

    @property
    def window_seconds(self) -> float:
        """Length of the merge windows: ``--merge_seconds``, else ``--poll_seconds``."""
        return self.merge_seconds or self.poll_seconds


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """``okl train``'s flags (:mod:`pipelines.train`), checked; ``streaming`` holds a streaming job's.

    Raises
    ------
    UsageError
        A flag check that needs no data failed (the message names the flag).
    """

    input: str | None = None
    test: str | None = None
    synthetic_rows: int = 65536
    synthetic_seed: int = 0
    learner: str | None = None
    config: str | None = None
    params: tuple[str, ...] = ()
    """``--param KEY=VALUE`` items, as given."""
    sigma: str | None = None
    eta: float | None = None
    n_components: int | None = None
    seed: int | None = None
    num_shards: int = 1
    rounds: int = 1
    batch_rows: int | None = None
    shuffle_rows: bool = False
    read_order_seed: int | None = None
    output: str | None = None
    overwrite: bool = False
    streaming: StreamRequest | None = None
    """The streaming flags of a ``--streaming`` job; None: a batch job."""
    beam_args: tuple[str, ...] = ()
    """The Beam pipeline options among the arguments."""

    def __post_init__(self) -> None:
        if self.output is not None and not self.output.strip():
            raise UsageError("--output is empty: give a directory (or leave the flag out for runs/<data>-<learner>)")
        if self.batch_rows is not None and self.batch_rows < 1:
            raise UsageError(f"--batch_rows must be >= 1, got {self.batch_rows}")
        if self.input is None and self.streaming is not None:  # before the demo data set would be written into --output
            raise UsageError("--streaming needs --input (a directory or glob where new Parquet files appear)")
        if self.input is None and self.synthetic_rows < 2:  # the demo's sigma is the median distance between rows
            raise UsageError(f"--synthetic_rows must be >= 2, got {self.synthetic_rows}")
        if self.streaming is not None and self.rounds != 1:
            raise UsageError("--rounds is for batch jobs; a streaming job mixes continuously (--mix_weight)")

    @classmethod
    def from_args(cls, args: argparse.Namespace, beam_args: list[str] | tuple[str, ...] = ()) -> TrainRequest:
        """The request of ``train``'s parsed flags (:func:`pipelines.train.build_parser`).

        Raises
        ------
        UsageError
            A streaming flag without ``--streaming`` (a batch job would ignore it), or a
            check of :class:`TrainRequest` or :class:`StreamRequest`.
        """
        if not args.streaming:
            given = [f"--{flag}" for flag in STREAMING_ONLY if getattr(args, flag) is not None]
            given += ["--mix_weight"] if args.mix_weight != 0.0 else []
            if given:  # a batch job would ignore them
                raise UsageError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for streaming jobs (--streaming); "
                                 "without it, this is a batch job, which would ignore "
                                 f"{'it' if len(given) == 1 else 'them'}")
        stream = None
        if args.streaming:
            poll = DEFAULT_POLL_SECONDS if args.poll_seconds is None else args.poll_seconds
            stream = StreamRequest(args.mix_weight, args.snapshot_batches, args.snapshot_seconds, poll, args.merge_seconds,
                                   args.init_model, args.stop_after)
        return cls(args.input, args.test, args.synthetic_rows, args.synthetic_seed, args.learner, args.config, tuple(args.param),
                   args.sigma, args.eta, args.n_components, args.seed, args.num_shards, args.rounds, args.batch_rows, args.shuffle_rows,
                   args.read_order_seed, args.output, args.overwrite, stream, tuple(beam_args))


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    """``okl predict``'s flags (:mod:`pipelines.predict`), checked.

    Raises
    ------
    UsageError
        ``--batch_rows`` below 1.
    """

    model: str
    input: str
    output: str
    overwrite: bool = False
    batch_rows: int = 4096
    skip_bad_rows: bool = False
    delimiter: str = ","
    beam_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise UsageError(f"--batch_rows must be a positive number of rows, got {self.batch_rows}")

    @classmethod
    def from_args(cls, args: argparse.Namespace, beam_args: list[str] | tuple[str, ...] = ()) -> PredictRequest:
        """The request of ``predict``'s parsed flags (:func:`pipelines.predict.build_parser`)."""
        return cls(args.model, args.input, args.output, args.overwrite, args.batch_rows, args.skip_bad_rows, args.delimiter, tuple(beam_args))


@dataclasses.dataclass(frozen=True)
class SweepRequest:
    """``okl sweep``'s flags (:mod:`pipelines.sweep`), checked.

    Raises
    ------
    UsageError
        A count below 1 (``--samples 0`` once ran the whole grid), a seed okl refuses, or
        ``--resume`` with ``--overwrite``.
    """

    input: str
    learner: str
    grid: tuple[str, ...] = ()
    grid_file: str | None = None
    samples: int | None = None
    search_seed: int = 0
    repeats: int = 1
    shuffle_seed: int = 0
    order: str = "shuffled"
    reseed: bool = False
    test: str | None = None
    rank_by: str | None = None
    """The ranking metric as given (None: the task's default, :func:`okl_experiments.metrics.ranking_metric`)."""
    batch_rows: int = 4096
    curve_points: int = 64
    scheduler: str | None = None
    num_workers: int = 2
    dashboard: bool = False
    output: str = "sweep"
    resume: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        counts = {"--repeats": self.repeats, "--num_workers": self.num_workers, "--batch_rows": self.batch_rows,
                  "--curve_points": self.curve_points, "--samples": self.samples}
        for flag, value in counts.items():
            if value is not None and value < 1:
                raise UsageError(f"{flag} must be >= 1, got {value}")
        try:  # a seed of -1 would fail deep in a run, naming no flag
            check_seed("--shuffle_seed", self.shuffle_seed)
            check_seed("--search_seed", self.search_seed)
        except ValueError as err:
            raise UsageError(str(err)) from None
        if self.resume and self.overwrite:
            raise UsageError("--resume continues the sweep in --output, --overwrite replaces it: pass one of them")

    @property
    def run_shuffle_seed(self) -> int | None:
        """The seed of the runs' permutations; None: ``--order file`` keeps the stored order."""
        return None if self.order == "file" else self.shuffle_seed

    @property
    def local(self) -> bool:
        """Whether the points run on this machine (no ``--scheduler``, or ``serial``)."""
        return self.scheduler is None or self.scheduler == "serial"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SweepRequest:
        """The request of ``sweep``'s parsed flags (:func:`pipelines.sweep.build_parser`)."""
        fields = {field.name: getattr(args, field.name) for field in dataclasses.fields(cls)}
        return cls(**{**fields, "grid": tuple(args.grid)})


def _from_namespace(cls: Any, args: argparse.Namespace, **given: Any) -> Any:
    """``cls`` of the namespace's values of its fields (lists as tuples); ``given`` overrides them."""
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(cls) if field.name not in given and hasattr(args, field.name)}
    return cls(**{name: tuple(value) if isinstance(value, list) else value for name, value in values.items()}, **given)


@dataclasses.dataclass(frozen=True)
class ReproduceRequest:
    """``okl reproduce``'s flags (:mod:`pipelines.reproduce`), checked.

    Raises
    ------
    UsageError
        ``--runs`` below 1.
    """

    data_root: str
    data: tuple[str, ...] = ()
    """``--data NAME=PATH`` items, as given."""
    only: str | None = None
    runs: int | None = None
    same_features: bool = False
    shuffle_all: bool = False
    no_tune: bool = False
    scheduler: str | None = None
    num_workers: int = 2
    output: str | None = None
    quiet: bool = False
    slice: bool = False
    scale_rows: int | None = None
    work: str | None = None

    def __post_init__(self) -> None:
        if self.runs is not None and self.runs < 1:
            raise UsageError("--runs must be >= 1")

    @property
    def keys(self) -> list[str] | None:
        """The setting keys or learner names of ``--only`` (None: every setting)."""
        return [k.strip() for k in self.only.split(",")] if self.only else None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReproduceRequest:
        """The request of ``reproduce``'s parsed flags (:func:`pipelines.reproduce.build_parser`)."""
        return _from_namespace(cls, args, data=tuple(args.data or ()))


@dataclasses.dataclass(frozen=True)
class ClusterRequest:
    """``okl engines start|stop|status flink-cluster`` (:func:`pipelines.engines.cluster_command`)."""

    command: str
    """``start``, ``stop`` or ``status``."""
    taskmanagers: int = 2
    slots: int = 2
    state_dir: str | None = None
    python: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterRequest:
        """The request of ``engines``' parsed flags (:func:`pipelines.engines.build_parser`)."""
        return _from_namespace(cls, args)


@dataclasses.dataclass(frozen=True)
class CurvesRequest:
    """``okl report curves``: online curves of sweep results, ``reproduce.json`` or curve files."""

    inputs: tuple[str, ...]
    output: str = "."
    png: str | None = None
    """The deprecated ``-o``/``--out FILE.png`` (None: ``output``'s ``online_error.png``)."""
    top: int = 5
    rank_by: str | None = None
    """``--metric``: the ranking metric of sweep results (None: the one the sweep ranked by)."""
    title: str = ""
    log_x: bool = False

    def __post_init__(self) -> None:
        if self.top < 1:
            raise UsageError(f"--top must be >= 1, got {self.top}")


@dataclasses.dataclass(frozen=True)
class SweepFiguresRequest:
    """``okl report sweep``: a metric against each swept parameter, a heatmap for two."""

    results: str
    output: str = "figures"
    metric: str | None = None
    """The metric plotted (None: the one the sweep ranked by)."""
    heatmap: str | None = None


@dataclasses.dataclass(frozen=True)
class ReproduceFiguresRequest:
    """``okl report reproduce``: per paper table and data set, the online curves and the at-scale test errors."""

    inputs: tuple[str, ...]
    output: str = "figures"


@dataclasses.dataclass(frozen=True)
class RunSpecRequest:
    """``okl report run``: learners run from a JSON spec, their online curves plotted."""

    spec: str
    output: str = "."
    png: str | None = None
    data_root: str | None = None
    log_x: bool = False
    curves_out: str | None = None


@dataclasses.dataclass(frozen=True)
class DefaultsRequest:
    """``okl report defaults``: every learner with its defaults against the constant baseline."""

    output: str = "defaults"
    data_root: str | None = None
    learner: tuple[str, ...] | None = None
    """``--learner``: only these learners (None: every learner)."""
    quick: bool = False


ReportRequest = Union[CurvesRequest, SweepFiguresRequest, ReproduceFiguresRequest, RunSpecRequest, DefaultsRequest]
"""``okl report``'s request: one per sub-command."""

_REPORTS: dict[str, Any] = {"curves": CurvesRequest, "sweep": SweepFiguresRequest, "reproduce": ReproduceFiguresRequest,
                            "run": RunSpecRequest, "defaults": DefaultsRequest}


def report_request(args: argparse.Namespace) -> ReportRequest:
    """The request of ``report``'s parsed flags (:func:`pipelines.report.build_parser`), by sub-command.

    Raises
    ------
    UsageError
        ``curves --top`` below 1.
    """
    if args.command == "curves":
        return _from_namespace(CurvesRequest, args, rank_by=args.metric)
    return _from_namespace(_REPORTS[args.command], args)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetOutput:
    """``okl prepare``'s output flags, shared by every kind: where and how the data set is written.

    Raises
    ------
    UsageError
        ``--row_group_rows`` below 1 (before any work: mnist8m's workers would fail with a traceback).
    """

    out: str
    """``--output``, or the deprecated output directory given as the last argument."""
    overwrite: bool = False
    name: str | None = None
    rows_per_shard: int | None = None
    shards: int | None = None
    row_group_rows: int = 4096
    compression: str = DEFAULT_COMPRESSION
    quiet: bool = False
    progress: bool = False

    def __post_init__(self) -> None:
        if self.row_group_rows < 1:
            raise UsageError("--row_group_rows must be >= 1")

    def shard_rows(self, n_rows: int | None, default: int) -> int:
        """Rows per shard: ``--rows_per_shard`` (else ``default``), or ``n_rows`` split into ``--shards``.

        Raises
        ------
        UsageError
            A count below 1, or ``--shards`` where the row count is not known in advance.
        """
        if self.shards is not None:
            if self.shards < 1:
                raise UsageError("--shards must be >= 1")
            if n_rows is None:
                raise UsageError("--shards needs the row count in advance; use --rows_per_shard for this kind")
            return max(1, math.ceil(n_rows / self.shards))
        rows = self.rows_per_shard if self.rows_per_shard is not None else default
        if rows < 1:
            raise UsageError("--rows_per_shard must be >= 1")
        return rows

    def writer_args(self, rows_per_shard: int | None) -> dict:
        """The keyword arguments of okl_core's data set writers."""
        return {"rows_per_shard": rows_per_shard, "row_group_rows": self.row_group_rows, "overwrite": self.overwrite, "name": self.name,
                "compression": self.compression}


@dataclasses.dataclass(frozen=True, kw_only=True)
class MnistRequest:
    """``okl prepare mnist`` (and ``mnist8m``'s base digits): an IDX image/label pair, given or downloaded."""

    images: str | None = None
    labels: str | None = None
    download: bool = False
    split: str = "train"
    cache_dir: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelsAndScaling:
    """The label and scaling flags of ``libsvm``, ``csv`` and ``parquet``."""

    task: str | None = None
    classes: str | None = None
    like: str | None = None
    feature_scaling: str = "none"
    target_scaling: str = "none"
    skip_bad_rows: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class LibsvmRequest(LabelsAndScaling):
    """``okl prepare libsvm``: LIBSVM/svmlight text, given or downloaded.

    Raises
    ------
    UsageError
        ``--n_features`` below 1.
    """

    input: str
    n_features: int | None = None
    download: bool = False
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        if self.n_features is not None and self.n_features < 1:
            raise UsageError("--n_features must be >= 1")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TableRequest(LabelsAndScaling):
    """``okl prepare csv`` and ``parquet``: one column per feature and a target column (``delimiter``, ``no_header``: CSV only)."""

    input: str
    target: str
    features: tuple[str, ...] | None = None
    drop: tuple[str, ...] | None = None
    categorical: str | None = None
    missing: tuple[str, ...] | None = None
    missing_policy: str | None = None
    id_column: tuple[str, ...] | None = None
    delimiter: str = ","
    no_header: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mnist8mRequest(MnistRequest):
    """``okl prepare mnist8m``: the infinite-MNIST generator's flags (a Beam pipeline over shards).

    Raises
    ------
    UsageError
        ``--rows``, ``--num_workers`` or ``--batch_rows`` below 1.
    """

    base_rows: str | None = None
    classes: str | None = None
    rows: int = 8_100_000
    seed: int = 0
    deformation: DeformationConfig = DeformationConfig()
    """The deformations' sizes (``--elastic_alpha``, ``--rotation``, ...)."""
    num_workers: int = 1
    batch_rows: int = 1024
    beam_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.rows < 1:
            raise UsageError("--rows must be >= 1")
        if self.num_workers < 1 or self.batch_rows < 1:
            raise UsageError("--num_workers and --batch_rows must be >= 1")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PcaRequest:
    """``okl prepare pca``: an okl data set's principal components, fitted on a sample or ``--like`` a projected set."""

    input: str
    components: int | None = None
    sample_rows: int = 100_000
    seed: int = 0
    like: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class MolecularRequest:
    """``okl prepare molecular``: SMILES and a target -> Coulomb matrices or Morgan bits."""

    input: str
    smiles_column: str = "smiles"
    target: str = "PCE"
    representation: str = "coulomb"
    max_atoms: int = 75
    sort_noise: float = 1.0
    permutations: int = 1
    units: str = "bohr"
    steps: str | None = None
    morgan_radius: int = 2
    morgan_bits: int = 2048
    seed: int = 0
    records: str | None = None
    num_workers: int = 1
    skip_bad_rows: bool = False


SourceRequest = Union[MnistRequest, LibsvmRequest, TableRequest, Mnist8mRequest, PcaRequest, MolecularRequest]
"""What ``okl prepare KIND`` reads, by kind."""

_SOURCES: dict[str, Any] = {"mnist": MnistRequest, "libsvm": LibsvmRequest, "csv": TableRequest, "parquet": TableRequest,
                            "mnist8m": Mnist8mRequest, "pca": PcaRequest, "molecular": MolecularRequest}


@dataclasses.dataclass(frozen=True)
class PrepareRequest:
    """``okl prepare KIND``'s flags (:mod:`pipelines.prepare`): the kind, what it reads, where it writes."""

    kind: str
    source: SourceRequest
    output: DatasetOutput

    @classmethod
    def from_args(cls, args: argparse.Namespace, out: str, beam_args: list[str] | tuple[str, ...] = ()) -> PrepareRequest:
        """The request of ``prepare``'s parsed flags (:func:`pipelines.prepare.build_parser`); ``out``: the output directory.

        Raises
        ------
        UsageError
            A check of the kind's request or of :class:`DatasetOutput`.
        """
        given: dict[str, Any] = {}
        if args.kind == "mnist8m":
            try:
                deformation = DeformationConfig(elastic_alpha=args.elastic_alpha, elastic_sigma=args.elastic_sigma, rotation_deg=args.rotation,
                                                scale=args.scale, translation=args.translation, thickness=args.thickness, originals=args.originals)
            except ValueError as err:
                raise UsageError(str(err)) from None
            given = {"beam_args": tuple(beam_args), "deformation": deformation}
        return cls(args.kind, _from_namespace(_SOURCES[args.kind], args, **given), _from_namespace(DatasetOutput, args, out=out))
