"""Command-line entry points: ``python -m pipelines.train``, ``predict``, ``prepare``, ``sweep``,
``report``, ``reproduce`` and ``engines`` (argument parsing over the packages below them),
and the plumbing they share (:mod:`pipelines.common`, :mod:`pipelines.job`,
:mod:`pipelines.stream`, :mod:`pipelines.local_runners`).

Importing it changes no logging configuration: the CLIs configure logging when they run
(:func:`pipelines.common.configure_logging`).
"""
