"""Input plumbing: compression by content, error wrapping, rejects files, downloads."""

import bz2
import gzip
import hashlib
import lzma

import pytest

from okl_core.data.download import download
from okl_core.data.sources import DataFormatError, RejectLog, compression_of, open_source

PAYLOAD = b"".join(b"%d 1:%d 7:0.5\n" % (i % 2, i) for i in range(20000))


@pytest.mark.parametrize("kind, compress", [(None, lambda b: b), ("gzip", gzip.compress), ("bzip2", bz2.compress), ("xz", lzma.compress)])
def test_open_source_decompresses_by_content(tmp_path, kind, compress):
    path = tmp_path / "data.txt"  # the name says nothing about the compression
    path.write_bytes(compress(PAYLOAD))
    assert compression_of(str(path)) == kind
    with open_source(path) as f:
        assert f.read() == PAYLOAD
        assert f.raw.compressed_position() == path.stat().st_size


@pytest.mark.parametrize("kind, compress", [("gzip", gzip.compress), ("bzip2", bz2.compress)])
def test_truncated_and_corrupt_streams_name_the_file(tmp_path, kind, compress):
    data = compress(PAYLOAD)
    truncated = tmp_path / "truncated"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match=f"{truncated}: corrupt or truncated {kind} data"):
        with open_source(truncated) as f:
            f.read()
    corrupt = tmp_path / "corrupt"
    middle = len(data) // 3
    corrupt.write_bytes(data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 64]) + data[middle + 64 :])
    with pytest.raises(DataFormatError, match=f"{corrupt}: corrupt or truncated {kind} data"):
        with open_source(corrupt) as f:
            f.read()


def test_reject_log_writes_only_when_needed(tmp_path):
    log = RejectLog(str(tmp_path), ("line", "reason", "text"))
    assert log.close() is None and not (tmp_path / "rejects.csv").exists()
    log = RejectLog(str(tmp_path), ("line", "reason", "text"))
    log.add(line=3, reason="bad, really", text="x" * 500)
    assert log.close() == {"file": "rejects.csv", "count": 1}
    lines = (tmp_path / "rejects.csv").read_text().splitlines()
    assert lines[0] == "line,reason,text" and lines[1].startswith('3,"bad, really",xxx') and lines[1].endswith("...")


def test_download_file_url_checksum_and_cache(tmp_path):
    source = tmp_path / "remote.bin"
    source.write_bytes(b"hello okl" * 1000)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    path = download(source.as_uri(), cache_dir=str(cache), checksum=f"sha256:{digest}")
    assert open(path, "rb").read() == source.read_bytes()
    source.unlink()  # a second call is served from the cache
    assert download(source.as_uri(), cache_dir=str(cache), checksum=f"sha256:{digest}") == path


def test_download_failures_leave_nothing(tmp_path):
    source = tmp_path / "remote.bin"
    source.write_bytes(b"payload")
    cache = tmp_path / "cache"
    with pytest.raises(OSError, match="checksum mismatch"):
        download(source.as_uri(), cache_dir=str(cache), checksum="md5:" + "0" * 32)
    with pytest.raises(OSError, match="could not download missing.bin"):
        download([(tmp_path / "missing.bin").as_uri()], cache_dir=str(cache))
    assert list(cache.iterdir()) == []
    # The first working alternative wins.
    path = download([(tmp_path / "missing.bin").as_uri(), source.as_uri()], "x.bin", cache_dir=str(cache))
    assert open(path, "rb").read() == b"payload"
