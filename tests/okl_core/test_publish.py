"""okl_core.publish.StagedDirectory: only directories are published and replaced."""

import os

import pytest

from okl_core.publish import StagedDirectory


@pytest.mark.parametrize("may_replace", [None, lambda path: None], ids=["no-check", "check-allows"])
def test_replace_refuses_a_target_that_is_a_file(tmp_path, may_replace):
    target = tmp_path / "t"
    target.write_text("keep\n")
    with pytest.raises(FileExistsError) as err:
        StagedDirectory(target, replace=True, may_replace=may_replace)
    assert str(err.value) == f"{target}: not a directory; not replacing it even with --overwrite"
    assert os.listdir(tmp_path) == ["t"] and target.read_text() == "keep\n"  # no lock, no staging left


def test_without_replace_a_file_target_already_exists(tmp_path):
    (tmp_path / "t").write_text("keep\n")
    with pytest.raises(FileExistsError, match=r"already exists \(pass --overwrite to replace it\)$"):
        StagedDirectory(tmp_path / "t")


def test_a_file_that_appears_at_the_target_is_replaced_and_removed(tmp_path):
    """A file put at the target while the directory was built is moved aside and deleted (rmtree
    once failed on it, and the file aside made the next replace fail with NotADirectoryError)."""
    target = tmp_path / "t"
    staged = StagedDirectory(target, replace=True)
    target.write_text("appeared\n")
    staged.commit()
    assert os.path.isdir(target) and os.listdir(tmp_path) == ["t"]
    StagedDirectory(target, replace=True).commit()
    assert os.path.isdir(target) and os.listdir(tmp_path) == ["t"]


def test_a_file_left_aside_by_a_killed_writer_is_cleaned(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / ".t.old-host-1").write_text("left aside\n")
    StagedDirectory(tmp_path / "t", replace=True).commit()
    assert os.listdir(tmp_path) == ["t"]
