"""Typed requests (pipelines.requests): each command's flags parsed once into one frozen request, checked there."""

import dataclasses

import pytest

from pipelines import predict, prepare, report, reproduce, sweep, train
from pipelines.cli import UsageError
from pipelines.requests import (CurvesRequest, DatasetOutput, Mnist8mRequest, PredictRequest, PrepareRequest, ReproduceRequest, StreamRequest,
                                SweepRequest, TableRequest, TrainRequest, report_request)


def test_train_flags_become_one_request_with_the_beam_options_beside():
    request = train.parse_args(["--input", "d", "--learner", "fogd", "--param", "eps=0.1", "--sigma", "0.5*median", "--num-shards", "2",
                                "--streaming", "--mix_weight", "0.25", "--poll_seconds", "2", "--runner=PrismRunner"])
    assert request == TrainRequest(input="d", learner="fogd", params=("eps=0.1",), sigma="0.5*median", num_shards=2,
                                   streaming=StreamRequest(mix_weight=0.25, poll_seconds=2.0), beam_args=("--runner=PrismRunner",))
    assert request.streaming.window_seconds == 2.0 and request.streaming.snapshot_every == 10
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.input = "other"  # type: ignore[misc]
    assert train.parse_args(["--learner", "fogd"]).streaming is None  # a batch job


@pytest.mark.parametrize("flags, message", [
    (["--mix_weight", "0.5"], "--mix_weight is for streaming jobs (--streaming); without it, this is a batch job, which would ignore it"),
    (["--streaming", "--input", "d", "--mix_weight", "1.5"], "--mix_weight 1.5: must be in [0, 1]"),
    (["--streaming", "--input", "d", "--rounds", "3"], "--rounds is for batch jobs; a streaming job mixes continuously (--mix_weight)"),
    (["--streaming", "--input", "d", "--merge_seconds", "inf"], "--merge_seconds inf: must be a finite number of seconds > 0"),
    (["--streaming"], "--streaming needs --input (a directory or glob where new Parquet files appear)"),
])
def test_train_flag_checks_run_once_at_parsing_before_any_data_is_read(flags, message, capsys):
    """The input "d" does not exist: the flag is refused before anything opens it."""
    with pytest.raises(SystemExit) as refused:
        train.parse_args(["--learner", "fogd", *flags])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip() == f"python -m pipelines.train: error: {message}"


def test_sweep_and_predict_requests():
    request = SweepRequest.from_args(sweep.build_parser().parse_args(["--input", "d", "--learner", "fogd", "--grid", "eta=0.1,1",
                                                                      "--metric", "online_mistake_rate", "--order", "file"]))
    assert request == SweepRequest(input="d", learner="fogd", grid=("eta=0.1,1",), rank_by="online_mistake_rate", order="file")
    assert request.run_shuffle_seed is None and request.local
    with pytest.raises(UsageError, match="^--samples must be >= 1, got 0$"):
        SweepRequest(input="d", learner="fogd", samples=0)
    args, beam_argv = predict.build_parser().parse_known_args(["--model", "m", "--input", "i", "--output", "o", "--runner=DirectRunner"])
    assert PredictRequest.from_args(args, beam_argv) == PredictRequest("m", "i", "o", beam_args=("--runner=DirectRunner",))


def test_prepare_requests_by_kind():
    request = prepare._parse(["csv", "in.csv", "--target", "y", "--missing", "NA", "--missing", "?", "--shards", "4", "--output", "o"])
    assert request == PrepareRequest("csv", TableRequest(input="in.csv", target="y", missing=("NA", "?")), DatasetOutput(out="o", shards=4))
    assert request.output.shard_rows(10, 65536) == 3
    generated = prepare._parse(["mnist8m", "--rows", "10", "--rotation", "2", "--output", "o", "--runner=DirectRunner"]).source
    assert isinstance(generated, Mnist8mRequest)
    assert (generated.deformation.rotation_deg, generated.deformation.scale, generated.beam_args) == (2.0, 0.05, ("--runner=DirectRunner",))


def test_report_and_reproduce_requests():
    curves = report_request(report.build_parser().parse_args(["curves", "a.json", "--metric", "online_mse", "--top", "2"]))
    assert curves == CurvesRequest(inputs=("a.json",), rank_by="online_mse", top=2)
    args = reproduce.build_parser().parse_args(["--only", "a, b", "--data", "a9a=x", "--data_root", "r"])
    request = ReproduceRequest.from_args(args)
    assert (request.keys, request.data, request.data_root) == (["a", "b"], ("a9a=x",), "r")

