"""``python -m pipelines.reproduce``: the settings list, unknown keys."""

import pytest

from pipelines import reproduce


def test_list_and_unknown_keys(capsys):
    assert reproduce.run(["--list"]) == []
    assert "fogd-a9a" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown setting"):
        reproduce.run(["--only", "nope", "--scheduler", "serial"])
