"""Command-line entry points: ``python -m pipelines.train``, ``predict``, ``prepare``, ``sweep``,
``report``, ``reproduce`` and ``engines`` (argument parsing over the packages below them),
also installed as the ``okl`` console script (``okl train``, ...; :mod:`pipelines.okl`), and
the plumbing they share (:mod:`pipelines.cli`: flag conventions, errors, Ctrl-C;
:mod:`pipelines.common`, :mod:`pipelines.job`, :mod:`pipelines.stream`,
:mod:`pipelines.local_runners`).

Importing it changes no logging configuration: the CLIs configure logging when they run
(:func:`pipelines.common.configure_logging`).
"""
