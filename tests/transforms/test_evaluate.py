"""ScoreMetrics: a model's metrics on the pieces of ReadShards, and the rows left out of them."""

import json

import apache_beam as beam
import numpy as np
from apache_beam.testing.util import assert_that, equal_to

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.data.plan import StreamPlan
from okl_core.metrics import Prequential
from transforms.evaluate import ScoreMetrics
from transforms.read import DatasetSource, ReadShards


def test_rows_without_a_label_are_counted_in_the_scoring_pass(tmp_path):
    """Issue: predict counted the rows without a usable label in a second step over every piece
    (and a second combine); the scoring step judges the labels anyway and now counts them too."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3)).astype(np.float32)
    y = rng.integers(0, 3, 500)
    y[::7] = 5  # not a class of the model: left out of the metrics
    write_dataset(tmp_path / "d", X, y, "multiclass", n_shards=2, row_group_rows=60, classes=[0, 1, 2, 3, 4, 5])
    learner = okl_core.make_learner("mfogd", n_inputs=3, n_classes=3, n_components=8, sigma=1.0)
    state, _ = learner.update(learner.init(), X[:100], np.clip(y[:100], 0, 2))
    source = DatasetSource.open(str(tmp_path / "d"))
    labelled = y < 3
    expected = Prequential("multiclass").add(learner.predict(state, X[labelled]), y[labelled]).to_dict()
    with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        read = p | ReadShards(source, StreamPlan(500, 1, 1, 64), split="predict", judge_labels=False)
        model = p | beam.Create([okl_core.model_bytes(learner, state)])
        counted = read["batches"] | "Counted" >> ScoreMetrics(model, count_unlabeled=True)
        plain = read["batches"] | "Plain" >> ScoreMetrics(model)
        assert_that(counted | "ParseCounted" >> beam.MapTuple(lambda text, n: (json.loads(text), n)),
                    equal_to([(expected, int((~labelled).sum()))]), label="CountedInTheSamePass")
        assert_that(plain | "ParsePlain" >> beam.Map(json.loads), equal_to([expected]), label="MetricsAlone")
