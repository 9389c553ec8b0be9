"""okl finds the Prism binary of a local streaming run before Beam tries to start it
(:func:`pipelines.stream.check_prism`): no binary is one line saying why and what to do."""

import pytest

from pipelines.common import UsageError
from pipelines.stream import streaming_pipeline

_FRAME = "local streaming runs on Beam's Prism runner, which could not be started ("


def _refusal(*flags: str) -> str:
    with pytest.raises(UsageError) as refused:
        streaming_pipeline(["--runner=PrismRunner", *flags])
    message = str(refused.value)
    assert message.startswith(_FRAME) and "--prism_location=PATH" in message and "\n" not in message
    return message[len(_FRAME):]


def test_a_local_prism_location_must_be_a_file(tmp_path):
    assert _refusal(f"--prism_location={tmp_path / 'none'}").startswith(f"--prism_location {tmp_path / 'none'}: no such file). ")
    assert _refusal(f"--prism_location={tmp_path}").startswith(f"--prism_location {tmp_path}: not a file). ")
    (tmp_path / "prism").write_bytes(b"")
    streaming_pipeline(["--runner=PrismRunner", f"--prism_location={tmp_path / 'prism'}"])  # found: Beam starts it


def test_a_url_beam_cannot_fetch_from_is_refused_with_beams_reason():
    assert _refusal("--prism_location=http://example.invalid/prism.zip").startswith(
        "Provided --prism_location URL is not an Apache Beam Github Release page URL or download URL: http://example.invalid/prism.zip). ")


def test_a_release_that_cannot_be_fetched_is_refused_before_the_job(tmp_path, monkeypatch):
    """No cached binary and no --prism_location: Beam's fetcher tries the GitHub release (of a
    version that does not exist: refused whether the network is there, 404, or not)."""
    monkeypatch.setenv("OKL_CACHE", str(tmp_path / "cache"))  # okl's own binary (make runners) is not there
    why = _refusal("--prism_beam_version_override=v0.0.0")
    assert why.startswith("fetching it from GitHub failed: ") and why.index(")") > len("fetching it from GitHub failed: ")
