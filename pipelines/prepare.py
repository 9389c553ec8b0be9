"""``python -m pipelines.prepare <kind> ...``: build an okl data set directory.

Kinds (each writes Parquet shards + ``dataset.json``, DESIGN.md "Data layout"):

* ``mnist``      an IDX image/label pair (gzip or raw) -> pixels / 255, labels 0..9
* ``libsvm``     LIBSVM/svmlight text (plain, .gz, .bz2), streamed -> dense float32
* ``csv``        a CSV with one column per feature and ``--target COLUMN`` (``--no_header``:
                 columns 0..k-1), optional scaling, missing values, categorical columns
* ``parquet``    Parquet with one column per feature and ``--target COLUMN``, as ``csv``
* ``mnist8m``    the infinite-MNIST generator: deformed base digits, a Beam pipeline over
                 shard ids (any runner; ``--num_workers N`` for local processes)
* ``molecular``  SMILES + target CSV -> randomly sorted Coulomb matrices (or Morgan bits)
* ``pca``        an okl data set -> principal components (fitted on a sample; ``--like`` a
                 projected training set for its test set; the model in ``pca.npz``)

A progress bar is drawn on stderr when it is a terminal (``--progress``/``--quiet`` force
it on/off); a one-line summary is printed at the end. Bad input stops with a message naming
the file and line, unless ``--skip_bad_rows`` (then ``rejects.csv`` in the data set lists
each skipped row and why). Nothing is left behind by a failed run.

``run(argv)`` returns the :class:`okl_core.data.sources.ConversionSummary` and raises on
errors; the command line prints ``<prog>: error: ...`` and exits with status 2. Flags and the
deprecated spellings (the output directory as the last argument): :mod:`pipelines.cli`.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from okl_core.data import download as dl
from okl_core.data.layout import COMPRESSIONS, DEFAULT_COMPRESSION, open_dataset
from okl_core.data.scaling import SCALING_METHODS
from okl_core.data.csv_table import parse_delimiter
from okl_core.data.sources import ConversionSummary, one_line_error
from okl_core.data.table import MISSING_POLICIES
from okl_core.data.targets import parse_classes
from okl_experiments.progress import ProgressBar
from pipelines.cli import Parser, UsageError, deprecate, main, prog, warn
from pipelines.requests import (DatasetOutput, LibsvmRequest, Mnist8mRequest, MnistRequest, MolecularRequest, PcaRequest, PrepareRequest,
                                TableRequest)

__all__ = ["run", "build_parser"]

DEFAULT_ROWS_PER_SHARD = 65536
MAX_SHARDS = 100_000
"""The most shards ``mnist8m`` plans (its shard list is built up front: ``--rows 1e14`` would
ask for 1.5e9 of them and run out of memory); 6.5e9 rows at the default shard size."""
TASK_CHOICES = ("binary", "multiclass", "regression")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", help="output data set directory (must not exist unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing data set at --output (after success)")
    parser.add_argument("--name", help="data set name recorded in dataset.json (default: the directory name)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--rows_per_shard", type=int, help=f"rows per Parquet shard (default {DEFAULT_ROWS_PER_SHARD})")
    size.add_argument("--shards", type=int, help="number of equal shards (instead of --rows_per_shard)")
    parser.add_argument("--row_group_rows", type=int, default=4096, help="Parquet row group size (default 4096)")
    parser.add_argument(
        "--compression", choices=COMPRESSIONS, default=DEFAULT_COMPRESSION,
        help="Parquet codec (default %(default)s: the fastest to decode; zstd writes smaller files, none decodes fastest)",
    )
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="no progress bar")
    shown.add_argument("--progress", action="store_true", help="draw the progress bar even if stderr is not a terminal")


def _labels_and_scaling(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=TASK_CHOICES, help="force the task (default: inferred from the labels)")
    parser.add_argument("--classes", help="original labels in class order, comma separated (binary: negative,positive; write --classes=-1,1 when the first starts with -)")
    parser.add_argument("--like", metavar="DATASET", help="label and scale like this data set (e.g. the training set of a test set)")
    parser.add_argument("--feature_scaling", choices=SCALING_METHODS, default="none", help="per-feature scaling (statistics from a first pass)")
    parser.add_argument("--target_scaling", choices=SCALING_METHODS, default="none", help="regression target scaling")
    parser.add_argument("--skip_bad_rows", action="store_true", help="skip bad rows into rejects.csv instead of stopping")


def _table_columns(parser: argparse.ArgumentParser) -> None:
    """Options of the kinds that read one column per feature (csv, parquet)."""
    # action="append": a repeated flag adds to the list (as --missing does), never replaces it
    parser.add_argument("--features", action="append", help="feature columns, comma separated: names, FIRST:LAST ranges (file order), globs such as 'pixel*' (default: all others; repeat to add)")
    parser.add_argument("--drop", action="append", help="columns to leave out, comma separated (names, ranges, globs; repeat to add)")
    parser.add_argument("--categorical", metavar="COL,...", help="text columns to one-hot encode (categories recorded for --like)")
    parser.add_argument("--missing", action="append", metavar="VALUE", help="a value meaning 'missing' (repeat for several: --missing NA --missing '?' --missing ''); Parquet nulls are always missing")
    parser.add_argument("--missing_policy", choices=MISSING_POLICIES,
                        help="a missing feature: drop the row into rejects.csv (default), or impute the training mean (recorded for --like)")
    parser.add_argument("--id_column", action="append", metavar="COL[,COL]",
                        help="a column carried through as it is (an id: never a feature, never scaled), written next to each prediction "
                             "and into rejects.csv; repeat or comma separate for several (default with --like: the reference's)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one sub-command per kind)."""
    parser = Parser(prog=prog("prepare"), description="Build an okl data set directory (Parquet shards + dataset.json).")
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")

    p = kinds.add_parser("mnist", help="IDX image/label pair -> data set")
    p.add_argument("--images", help="IDX images file (gzip or raw)")
    p.add_argument("--labels", help="IDX labels file (gzip or raw)")
    p.add_argument("--download", action="store_true", help="download the official MNIST files of --split into the cache")
    p.add_argument("--split", choices=sorted(dl.MNIST_SPLITS), default="train", help="with --download (default train)")
    p.add_argument("--cache_dir", help="download cache (default $OKL_CACHE or ~/.cache/okl)")
    _common(p)

    p = kinds.add_parser("libsvm", help="LIBSVM/svmlight text -> data set")
    p.add_argument("input", help=f"LIBSVM file (plain/.gz/.bz2); with --download a name ({', '.join(sorted(dl.LIBSVM_NAMES))}) or URL")
    p.add_argument("--n_features", type=int, help="number of features (default: the largest index, first pass)")
    _labels_and_scaling(p)
    p.add_argument("--download", action="store_true", help="INPUT is a known data set name or URL to download")
    p.add_argument("--cache_dir", help="download cache (default $OKL_CACHE or ~/.cache/okl)")
    _common(p)

    p = kinds.add_parser("csv", help="CSV with one column per feature and a target column -> data set")
    p.add_argument("input", help="CSV file (plain/.gz/.bz2)")
    p.add_argument("--target", required=True, help="target column (a number with --no_header)")
    _table_columns(p)
    p.add_argument("--delimiter", default=",", help="field delimiter, one character; \\t (backslash t) for a tab (default ',')")
    p.add_argument("--no_header", action="store_true", help="the first line is data; columns are named 0..k-1")
    _labels_and_scaling(p)
    _common(p)

    p = kinds.add_parser("parquet", help="Parquet with one column per feature and a target column -> data set")
    p.add_argument("input", help="Parquet file, directory of *.parquet files, or glob")
    p.add_argument("--target", required=True, help="target column")
    _table_columns(p)
    _labels_and_scaling(p)
    _common(p)

    p = kinds.add_parser("mnist8m", help="infinite-MNIST generator (Beam pipeline over shards)")
    p.add_argument("--images", help="base IDX images (e.g. the MNIST training images)")
    p.add_argument("--labels", help="base IDX labels")
    p.add_argument("--download", action="store_true", help="use the official MNIST training split as the base")
    p.add_argument("--cache_dir", help="download cache (default $OKL_CACHE or ~/.cache/okl)")
    p.add_argument("--base_rows", default=None, metavar="START:STOP", help="use base digits [START, STOP) only (e.g. 0:8000)")
    p.add_argument("--classes", metavar="D,D,...", help="keep only base digits of these labels, in class order (two: negative,positive -> binary -1/+1, e.g. 6,8 for 8 vs 6)")
    p.add_argument("--rows", type=int, default=8_100_000, help=f"rows to generate (default 8,100,000; at most {MAX_SHARDS:,} shards)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--elastic_alpha", type=float, default=12.0, help="elastic displacement scale, pixels (default 12)")
    p.add_argument("--elastic_sigma", type=float, default=4.0, help="elastic field smoothing, pixels (default 4)")
    p.add_argument("--rotation", type=float, default=5.0, help="largest rotation, degrees (default 5)")
    p.add_argument("--scale", type=float, default=0.05, help="largest relative scale change (default 0.05)")
    p.add_argument("--translation", type=float, default=0.75, help="largest shift, pixels (default 0.75)")
    p.add_argument("--thickness", type=float, default=0.4, help="largest stroke thickness change in [0, 1] (default 0.4)")
    p.add_argument("--originals", action="store_true", help="rows 0..n_base-1 are the undeformed base digits (as infimnist starts)")
    p.add_argument("--num_workers", type=int, default=1, help="local worker processes for the DirectRunner (default 1: in-process)")
    p.add_argument("--batch_rows", type=int, default=1024, help="rows generated per vectorised batch (default 1024)")
    _common(p)

    p = kinds.add_parser("pca", help="an okl data set -> its principal components (fitted on a sample, or --like a projected training set)")
    p.add_argument("input", help="okl data set directory")
    p.add_argument("--components", type=int, help="principal components to keep (fit on a sample of INPUT), e.g. 50")
    p.add_argument("--sample_rows", type=int, default=100_000, help="rows the PCA is fitted on, drawn at random (default 100,000)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--like", metavar="DATASET", help="project with the PCA recorded in this projected training set (for its test set)")
    _common(p)

    p = kinds.add_parser("molecular", help="SMILES + target CSV -> Coulomb matrix / Morgan features (needs RDKit)")
    p.add_argument("input", help="CSV with a SMILES column and a numeric target (e.g. cep-processed.csv)")
    p.add_argument("--smiles_column", default="smiles", help="SMILES column (default smiles)")
    p.add_argument("--target", default="PCE", help="target column (default PCE)")
    p.add_argument("--representation", choices=("coulomb", "morgan"), default="coulomb", help="features (default coulomb)")
    p.add_argument("--max_atoms", type=int, default=75, help="Coulomb matrix atom budget incl. hydrogens (default 75: 2850 features)")
    p.add_argument("--sort_noise", type=float, default=1.0, help="std of the noise added to row norms before sorting (default 1)")
    p.add_argument("--permutations", type=int, default=1, help="randomly sorted matrices (rows) per molecule (default 1)")
    p.add_argument("--units", choices=("bohr", "angstrom"), default="bohr", help="distance unit (default bohr)")
    p.add_argument("--steps", help="step-predicate thresholds, comma separated (default: raw Coulomb values)")
    p.add_argument("--morgan_radius", type=int, default=2)
    p.add_argument("--morgan_bits", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0, help="embedding and sorting seed (default 0)")
    p.add_argument("--records", metavar="START:STOP", help="featurize only CSV records [START, STOP) (0-based, after the header): a train/test split")
    p.add_argument("--num_workers", type=int, default=1, help="featurizing processes (default 1)")
    deprecate(p, "--workers", "--num_workers")
    p.add_argument("--skip_bad_rows", action="store_true", help="skip rows with a bad target into rejects.csv instead of stopping")
    _common(p)
    return parser


def _split_list(texts):
    """The comma-separated items of one flag's values (a repeated flag's values joined), or None."""
    if texts is None:
        return None
    texts = [texts] if isinstance(texts, str) else texts
    return [t.strip() for text in texts for t in text.split(",") if t.strip()]


def _mnist_files(request: MnistRequest, progress) -> tuple[str, str]:
    if request.download:
        if request.images or request.labels:
            raise ValueError("give either --download or --images/--labels")
        images, labels = (dl.download_known(f, cache_dir=request.cache_dir, progress=progress) for f in dl.MNIST_SPLITS[request.split])
        return images, labels
    if not (request.images and request.labels):
        raise ValueError("give --images and --labels (IDX files), or --download")
    return request.images, request.labels


def _run_mnist(request: MnistRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from okl_core.data.idx import convert_mnist, read_idx_images

    images, labels = _mnist_files(request, progress)
    n_rows = len(read_idx_images(images, labels)[1]) if output.shards is not None else None
    return convert_mnist(images, labels, output.out, progress=progress, **output.writer_args(output.shard_rows(n_rows, DEFAULT_ROWS_PER_SHARD)))


def _like(like: str | None):
    """The ``--like`` reference's info; a PCA projection is refused (its features are components, not this input's)."""
    if not like:
        return None
    info = open_dataset(like).info
    pca = (info.extra or {}).get("pca")
    if isinstance(pca, dict):
        raw = pca.get("fitted_on") or "the raw reference"
        raise ValueError(f"--like {like}: the reference is a PCA projection; prepare the raw set --like the raw reference ({raw}), "
                         f"then `prepare pca --like {like}` it")
    return info


def _unsized_rows(output: DatasetOutput) -> int | None:
    """Rows per shard of a kind that learns its row count as it writes (None: ``--shards``, which the writer splits)."""
    return output.shard_rows(None, DEFAULT_ROWS_PER_SHARD) if output.shards is None else None


def _run_libsvm(request: LibsvmRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from okl_core.data.libsvm import convert_libsvm

    path = request.input
    if request.download:
        if request.input in dl.LIBSVM_NAMES:
            path = dl.download_known(dl.LIBSVM_NAMES[request.input], cache_dir=request.cache_dir, progress=progress)
        else:
            path = dl.download(request.input, cache_dir=request.cache_dir, progress=progress)
    classes = parse_classes(request.classes) if request.classes else None
    return convert_libsvm(
        path, output.out, n_features=request.n_features, task=request.task, classes=classes, like=_like(request.like),
        feature_scaling=request.feature_scaling, target_scaling=request.target_scaling, skip_bad_rows=request.skip_bad_rows,
        n_shards=output.shards, progress=progress, **output.writer_args(_unsized_rows(output)),
    )


def _table_args(request: TableRequest, output: DatasetOutput, progress) -> dict:
    """The keyword arguments ``csv`` and ``parquet`` share."""
    return dict(target=request.target, features=_split_list(request.features), drop=_split_list(request.drop),
                categorical=_split_list(request.categorical), missing=None if request.missing is None else list(request.missing),
                missing_policy=request.missing_policy, like=_like(request.like), task=request.task, classes=_split_list(request.classes),
                feature_scaling=request.feature_scaling, target_scaling=request.target_scaling, skip_bad_rows=request.skip_bad_rows,
                n_shards=output.shards, progress=progress, id_columns=_split_list(request.id_column), **output.writer_args(_unsized_rows(output)))


def _run_csv(request: TableRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from okl_core.data.csv_table import convert_csv

    delimiter = parse_delimiter(request.delimiter)
    return convert_csv(request.input, output.out, delimiter=delimiter, no_header=request.no_header, **_table_args(request, output, progress))


def _run_parquet(request: TableRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from okl_core.data.table import convert_parquet

    return convert_parquet(request.input, output.out, **_table_args(request, output, progress))


def _run_molecular(request: MolecularRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from okl_core.data.molecular import MolecularConfig, convert_molecules

    steps = tuple(float(s) for s in _split_list(request.steps) or ()) if request.steps else ()
    config = MolecularConfig(
        representation=request.representation, max_atoms=request.max_atoms, sort_noise=request.sort_noise, permutations=request.permutations,
        units=request.units, steps=steps, morgan_radius=request.morgan_radius, morgan_bits=request.morgan_bits, seed=request.seed,
    )
    return convert_molecules(
        request.input, output.out, smiles_column=request.smiles_column, target=request.target, config=config, skip_bad_rows=request.skip_bad_rows,
        workers=request.num_workers, progress=progress, records=_base_rows(request.records, "--records") if request.records else None,
        **output.writer_args(output.shard_rows(None, DEFAULT_ROWS_PER_SHARD)),
    )


def _run_pca(request: PcaRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from okl_core.data.pca import project_dataset

    writer = output.writer_args(output.shard_rows(open_dataset(request.input).info.n_rows, DEFAULT_ROWS_PER_SHARD))
    return project_dataset(request.input, output.out, request.components, like=request.like, sample_rows=request.sample_rows, seed=request.seed,
                           progress=progress, **writer)


def _base_rows(text, flag="--base_rows"):
    if text is None:
        return 0, None
    start, sep, stop = text.partition(":")
    try:
        return int(start or 0), (int(stop) if stop else None)
    except ValueError:
        raise ValueError(f"{flag} must be START:STOP, got {text!r}") from None


def _digit_classes(text):
    if text is None:
        return None
    try:
        return [int(part) for part in _split_list(text)]
    except ValueError:
        raise ValueError(f"--classes must be digit labels such as 6,8, got {text!r}") from None


def _generator_shards(request: Mnist8mRequest, output: DatasetOutput) -> int:
    """Check mnist8m's shard count before any work (a download, Beam's start-up); the rows per shard."""
    rows_per_shard = output.shard_rows(request.rows, DEFAULT_ROWS_PER_SHARD)
    shards = -(-request.rows // rows_per_shard)
    if shards > MAX_SHARDS:
        raise ValueError(f"--rows {request.rows:,} in shards of {rows_per_shard:,} rows would make {shards:,} shards; "
                         f"at most {MAX_SHARDS:,} (fewer --rows, or more --rows_per_shard)")
    return rows_per_shard


def _run_mnist8m(request: Mnist8mRequest, output: DatasetOutput, progress) -> ConversionSummary:
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.common import make_pipeline, run_pipeline
    from transforms.generate import generate_mnist8m

    rows_per_shard = _generator_shards(request, output)
    images, labels = _mnist_files(request, progress)
    start, stop = _base_rows(request.base_rows)
    base = {"images": os.path.abspath(images), "labels": os.path.abspath(labels), "start": start, "stop": stop,
            "classes": _digit_classes(request.classes)}
    pipeline = make_pipeline(PipelineOptions(_beam_options(list(request.beam_args), request.num_workers)))
    return generate_mnist8m(pipeline, run_pipeline, output.out, base, request.seed, request.deformation, request.rows, rows_per_shard,
                            progress, overwrite=output.overwrite, name=output.name, row_group_rows=output.row_group_rows,
                            batch_rows=request.batch_rows, compression=output.compression)


def _beam_options(beam_argv, num_workers) -> list:
    """Beam flags: the caller's, DirectRunner by default, local processes for --num_workers."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    options = list(beam_argv)
    runner = PipelineOptions(options).view_as(StandardOptions).runner
    if runner is None:
        options.append("--runner=DirectRunner")
    if num_workers > 1 and runner in (None, "DirectRunner", "direct"):
        options += [f"--direct_num_workers={num_workers}", "--direct_running_mode=multi_processing"]
    return options


_RUNNERS: dict[str, Any] = {"mnist": _run_mnist, "libsvm": _run_libsvm, "csv": _run_csv, "parquet": _run_parquet, "molecular": _run_molecular,
                            "pca": _run_pca, "mnist8m": _run_mnist8m}
"""Kind -> the function that prepares it from its request, the output and the progress bar."""


def _parse(argv) -> PrepareRequest:
    """The request of okl's arguments and (``mnist8m``) Beam's; anything neither defines is refused.

    The output is ``--output``, or the deprecated output directory given as the one extra
    positional argument (with a warning; a positional declared with ``nargs="?"`` would take
    the place of a leading ``input`` in argparse, so it is picked from what is left over).
    """
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.kind == "mnist8m" and rest:
        from pipelines.common import unknown_to_beam

        unknown = unknown_to_beam(rest)
    else:
        unknown = rest
    after_flag = {i + 1 for i, token in enumerate(unknown) if token.startswith("-") and "=" not in token}
    legacy = [token for i, token in enumerate(unknown) if not token.startswith("-") and i not in after_flag][:1]
    unknown = [token for token in unknown if token not in legacy]
    rest = [token for token in rest if token not in legacy]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}" + (" (neither okl nor Beam's pipeline options define them)" if args.kind == "mnist8m" else ""))
    if legacy and args.output is not None:
        parser.error(f"give the output directory once: --output {args.output} or {legacy[0]}")
    if legacy:
        warn(parser.prog, "the output directory as the last argument is deprecated; use --output DIR")
    out = args.output if args.output is not None else (legacy[0] if legacy else None)
    if out is None:
        parser.error("the following arguments are required: --output")
    return PrepareRequest.from_args(args, out, rest)


def run(argv=None) -> ConversionSummary:
    """Parse ``argv``, build the data set, print the summary line, return the summary.

    Raises
    ------
    UsageError
        Bad input, flags or output, in one line naming the file (an OS error as ``FILE: what``):
        :func:`pipelines.cli.main` prints it (exit status 2), as for every okl command.
    """
    try:
        return _prepare(argv)
    except (ValueError, OSError, ImportError) as err:  # DataFormatError and UsageError are ValueErrors
        raise UsageError(one_line_error(err)) from err


def _prepare(argv) -> ConversionSummary:
    request = _parse(argv)
    output = request.output
    progress = ProgressBar(enabled=False if output.quiet else (True if output.progress else None))
    if request.kind == "mnist8m":
        from pipelines.common import configure_logging

        configure_logging()
        logging.getLogger("apache_beam").setLevel(logging.ERROR)  # worker chatter; errors still surface
    summary = _RUNNERS[request.kind](request.source, output, progress)
    print(summary.line(), flush=True)
    return summary


if __name__ == "__main__":
    main(run, "prepare")
