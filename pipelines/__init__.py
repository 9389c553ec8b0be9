"""Command-line entry points: ``python -m pipelines.train``, ``python -m pipelines.predict``.

Importing this package installs one logging filter on the root logger, before Apache
Beam is imported by the pipeline modules. It drops two root WARNINGs of Beam that are
harmless for okl and only alarm users: "apitools not found ..." (logged on import when
Beam's optional GCP extras are absent) and "Resource module is not available ..."
(logged by RunInference on every model load when torch is not installed: Beam 2.77
imports ``resource`` together with a torch-only module). Nothing else is filtered.
"""

import logging


class _DropBeamImportNoise(logging.Filter):
    """Drop Beam's two spurious root warnings (see the package docstring)."""

    PREFIXES = ("apitools not found", "Resource module is not available")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.PREFIXES)


logging.getLogger().addFilter(_DropBeamImportNoise())
