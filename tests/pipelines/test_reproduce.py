"""``python -m pipelines.reproduce``: the settings list, unknown keys."""

import pytest

from pipelines import reproduce
from pipelines.cli import UsageError


def test_list_and_unknown_keys(capsys):
    assert reproduce.run(["--list"]) == []
    assert "fogd-a9a" in capsys.readouterr().out
    with pytest.raises(UsageError, match="unknown setting"):
        reproduce.run(["--only", "nope", "--scheduler", "serial"])
