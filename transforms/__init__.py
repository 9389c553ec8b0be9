"""Beam PTransforms and DoFns of okl: they move batches and states and call okl_core.

* :class:`ReadShards` -- a Parquet data set -> ``(shard, piece of a batch)`` elements;
* :class:`TrainOnline` -- one local model per shard, batches learned in sequence order;
* :class:`MergeBySeed` -- the shards' states merged into one model (sorted by shard);
* :class:`Evaluate` -- test metrics of a model on a held-out data set;
* :class:`OklModelHandler` -- serve a model file in ``apache_beam.ml`` RunInference;
* :class:`WriteRunOutputs` -- model file, metrics JSON, online-error plot, dead letters.
"""

from transforms.evaluate import Evaluate
from transforms.inference import OklModelHandler
from transforms.outputs import WriteRunOutputs
from transforms.read import DatasetSource, ReadShards
from transforms.train import LearnerSpec, MergeBySeed, TrainOnline

__all__ = ["DatasetSource", "Evaluate", "LearnerSpec", "MergeBySeed", "OklModelHandler", "ReadShards", "TrainOnline", "WriteRunOutputs"]
