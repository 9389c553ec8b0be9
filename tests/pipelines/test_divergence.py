"""Divergence never kills a training job (issue 17, class 1).

A step size far too large or unscaled targets make a learner's numbers overflow: the job
still writes every output, the summary line and ``metrics.json`` say from which batch each
shard and the merged model diverged, the model is the bit-for-bit fold of the same rows
(NaN included), and ``load_model`` refuses it for predictions.
"""

import json
import os

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.data.plan import StreamPlan
from okl_core.jsonio import loads_json, strict_json
from pipelines import predict, train
from tests.pipelines.reference import reference_model

FOGD_R = ["--learner", "fogd_r", "--param", "n_components=16", "--sigma", "1.0", "--batch_rows", "250"]


def _regression(n=1000, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    return X, (np.sin(X[:, 0]) + X[:, 1] * 0.5) * scale


def _train(tmp_path, X, y, task, *args, shards=2, rounds=1):
    write_dataset(tmp_path / "data", X, y, task, n_shards=2, row_group_rows=250)
    result = train.run(["--input", str(tmp_path / "data"), *args, "--num_shards", str(shards), "--rounds", str(rounds),
                        "--output", str(tmp_path / "out"), "--runner=DirectRunner"])
    assert sorted(os.listdir(result.output)) == ["dead_letter.jsonl", "metrics.json", "model.npz", "online_error.png", "run.json"]
    with open(result.files["metrics"]) as f:
        text = f.read()

    def refuse(constant):
        raise AssertionError(f"metrics.json is not strict JSON: bare {constant}")

    json.loads(text, parse_constant=refuse)  # NaN and inf are written as "NaN" / "Infinity" strings
    assert json.loads(strict_json(loads_json(text))) == json.loads(strict_json(result.metrics))  # read back as floats
    return result


def test_too_large_a_step_finishes_and_says_where_every_shard_diverged(tmp_path, capsys):
    X, y = _regression()
    result = _train(tmp_path, X, y, "regression", *FOGD_R, "--eta", "10", shards=2, rounds=2)
    d = result.metrics["diverged"]
    nan = {"reason": "not finite"}
    assert d["per_shard"] == [{"shard": 0, "round": 0, "batch": 0, "row": 0, **nan}, {"shard": 1, "round": 0, "batch": 0, "row": 500, **nan},
                              {"shard": 0, "round": 1, "batch": 0, "row": 250, **nan}, {"shard": 1, "round": 1, "batch": 0, "row": 750, **nan}]
    assert d["merged"] == {"shard": 0, "round": 0, "batch": 0, "row": 0, "non_finite_arrays": ["w"], **nan}
    assert all(b["diverged"] for b in result.metrics["batches"]) and result.counters["batches_diverged"] == 4
    assert np.isnan(result.metrics["online"]["merged"]["mse"]) and result.metrics["rows"]["trained"] == 1000
    out = capsys.readouterr().out
    assert ("DIVERGED from shard 0 round 0 batch 0 (row 0): NaN or inf in the online scores, model or errors "
            "(shard 0 from round 0 batch 0, shard 1 from round 0 batch 0, shard 0 from round 1 batch 0, shard 1 from round 1 batch 0); "
            "the model cannot be used for predictions, try a smaller step size or scaled targets") in out.splitlines()
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0, eta=10.0)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, X, y, StreamPlan(1000, 2, 2, 250))  # deterministic, NaN and all
    with pytest.raises(okl_core.ModelFileError, match="array 'w' holds NaN or inf values"):
        okl_core.load_model(result.model_path)
    with pytest.raises(SystemExit) as exit_info:  # nor can pipelines.predict use it
        predict.run(["--model", result.model_path, "--input", str(tmp_path / "data"), "--output", str(tmp_path / "pred")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"python -m pipelines.predict: error: --model {result.model_path}: {result.model_path}: array 'w' holds NaN or inf values "
        "(the run that wrote it diverged); a non-finite model cannot be used")


def test_merge_by_seed_merges_a_diverged_shard_with_a_finite_one():
    """One shard NaN, one finite: MergeBySeed merges (NaN comes out), as merge_states does in memory."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that

    from transforms.train import LearnerSpec, MergeBySeed

    params = {"n_inputs": 3, "n_components": 16, "sigma": 1.0, "eta": 0.01}
    learner = okl_core.make_learner("fogd_r", **params)
    X, y = _regression()
    good, _ = learner.update(learner.init(), X[:500], y[:500])
    bad, _ = learner.update(learner.init(), X[500:], y[500:])
    bad = bad._replace(w=np.full_like(bad.w, np.nan))
    init = learner.init()
    want = okl_core.model_bytes(learner, okl_core.merge_states(learner, [good, bad], base=init))
    results = [(1, okl_core.model_bytes(learner, bad), "{}"), (0, okl_core.model_bytes(learner, good), "{}")]
    with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        base = p | "Base" >> beam.Create([okl_core.model_bytes(learner, init)])
        merged = p | beam.Create(results) | MergeBySeed(LearnerSpec("fogd_r", params), base=base)
        assert_that(merged, lambda got: got == [want] or pytest.fail("merged model differs"))


def test_large_finite_targets_train_without_overflow(tmp_path):
    """Unscaled prices around 1e9: MSE ~1e18 does not fit Beam's int64 distribution; the run is fine."""
    X, y = _regression(scale=1e9)
    result = _train(tmp_path, X, y, "regression", *FOGD_R, "--eta", "1e-4", shards=1)
    assert result.metrics["diverged"] is None and not any(b["diverged"] for b in result.metrics["batches"])
    assert 1e15 < result.metrics["online"]["merged"]["mse"] < 1e19
    learner = okl_core.make_learner("fogd_r", n_inputs=3, n_components=16, sigma=1.0, eta=1e-4)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, X, y, StreamPlan(1000, 1, 1, 250))
    okl_core.load_model(result.model_path)  # finite: usable


def test_omkl_gf_with_a_huge_step_finishes(tmp_path):
    X, y = _regression()
    params = ["--learner", "omkl_gf", "--param", "n_components=8", "--eta", "1e6", "--batch_rows", "250"]
    result = _train(tmp_path, X, y, "regression", *params, shards=1)
    # The loss explodes in the first batch; the arrays overflow in the second.
    assert result.metrics["diverged"] == {"per_shard": [{"shard": 0, "round": 0, "batch": 0, "row": 0, "reason": "exploded"}],
                                          "merged": {"shard": 0, "round": 0, "batch": 0, "row": 0, "reason": "exploded",
                                                     "non_finite_arrays": ["theta", "log_w", "sq_error"]}}
    assert [b["diverged"] for b in result.metrics["batches"]] == [True, True, True, True]
    assert [b.get("diverged_reason") for b in result.metrics["batches"]] == ["exploded", "not finite", "not finite", "not finite"]
    assert result.metrics["rows"]["trained"] == 1000


def test_a_finite_explosion_is_reported_as_divergence(tmp_path, capsys):
    """BOGD-R with a small budget and little decay: every number finite, the online MSE ~1e5
    times the targets' scale from row 800 (okl_core.divergence.exploded, the same batch as in memory)."""
    X, y = okl_core.testing.tiny_problem("regression", 4, n=2000)
    params = ["--learner", "bogd_r", "--sigma", "0.5", "--eta", "0.5", "--param", "budget=10", "--param", "lam=0.001", "--param", "removal=random", "--batch_rows", "100"]
    result = _train(tmp_path, X, y, "regression", *params, shards=1)
    where = {"shard": 0, "round": 0, "batch": 8, "row": 800, "reason": "exploded"}
    assert result.metrics["diverged"] == {"per_shard": [where], "merged": {**where, "non_finite_arrays": []}}
    assert [b["diverged"] for b in result.metrics["batches"]] == [False] * 8 + [True] * 12
    assert 1e4 < result.metrics["online"]["merged"]["mse"] < 1e300
    learner = okl_core.make_learner("bogd_r", n_inputs=4, sigma=0.5, eta=0.5, budget=10, lam=0.001, removal="random")
    assert okl_core.evaluation.run_online(learner, X, y, batch_rows=100).diverged_at == 800
    okl_core.load_model(result.model_path)  # finite, so loadable: the summary says why not to use it
    lines = capsys.readouterr().out.splitlines()
    assert ("DIVERGED from shard 0 round 0 batch 8 (row 800): the online loss exploded, over 1000 times the targets' scale "
            "(shard 0 from round 0 batch 8); its predictions are meaningless, try a smaller step size or scaled targets") in lines
    assert not [line for line in lines if line.startswith("WARNING")]  # the divergence says it all
