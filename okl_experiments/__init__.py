"""Experiments with okl learners: the library under the sweep, reproduce and report commands.

Between ``okl_core`` (the learners, numpy only) and the command lines of ``pipelines``:
what an experiment needs besides the learners, importable and without Apache Beam.

* :mod:`~okl_experiments.params` -- learner parameters from a data set: ``n_inputs`` /
  ``n_classes``, the data-derived values (``"median"``, ``"0.1*median"``, ``"n"``,
  ``"c/n"``), batch rows rounded for mini-batch learners, the ``{"learner", "params"}`` file;
* :mod:`~okl_experiments.metrics` -- experiment metric names (``online_<m>``,
  ``test_<m>``), axis labels, the ranking metric, results flagged against the baseline
  (the headline metric of a task and a run's curves: :mod:`okl_core.reporting`);
* :mod:`~okl_experiments.data` -- data sources loaded once per process (okl data sets,
  the public files of the reproductions);
* :mod:`~okl_experiments.grid`, :mod:`~okl_experiments.runs`, :mod:`~okl_experiments.sweep`
  -- search spaces, runs as Dask tasks, the sweep engine and its results table;
* :mod:`~okl_experiments.reproduction` -- the papers' settings and their table;
* :mod:`~okl_experiments.defaults` -- every learner with its defaults against the
  majority class / the mean on a9a, MNIST, the demo and a generated CSV (``okl report defaults``);
* :mod:`~okl_experiments.figures` -- curves and sweep figures (matplotlib);
* :mod:`~okl_experiments.text`, :mod:`~okl_experiments.progress` -- Markdown tables, files
  written whole, progress displays.

It imports okl_core, numpy, pyarrow, dask.distributed (only when a cluster is asked for)
and matplotlib (only when a figure is drawn); never apache_beam, ``transforms`` or
``pipelines`` (tests/test_layering.py). Importing it changes no global state.
"""
