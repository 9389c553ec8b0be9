"""Beam PTransforms and DoFns of okl: they move batches and states and call okl_core.

* :class:`ReadShards` -- a Parquet data set -> ``(shard, piece of a batch)`` elements;
* :class:`TrainOnline` -- one local model per shard, batches learned in sequence order;
* :class:`MergeBySeed` -- the shards' states merged into one model (sorted by shard);
* :class:`Evaluate` -- test metrics of a model on a held-out data set;
* :class:`OklModelHandler` -- serve a model file in ``apache_beam.ml`` RunInference;
* :class:`WriteRunOutputs` -- model file, metrics JSON, online-error plot, dead letters.
"""

from transforms.evaluate import Evaluate
from transforms.outputs import WriteRunOutputs
from transforms.read import DatasetSource, ReadShards
from transforms.train import LearnerSpec, MergeBySeed, TrainOnline

__all__ = ["DatasetSource", "Evaluate", "LearnerSpec", "MergeBySeed", "OklModelHandler", "ReadShards", "TrainOnline", "WriteRunOutputs"]


def __getattr__(name: str):
    # transforms.inference imports apache_beam.ml (45 ms, measured with -X importtime), which
    # the training workers and launcher never use: loaded when asked for, not with the package.
    if name == "OklModelHandler":
        from transforms.inference import OklModelHandler

        return OklModelHandler
    raise AttributeError(f"module 'transforms' has no attribute {name!r}")
