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


def test_an_aborted_writer_removes_the_parent_folders_it_made_and_only_those(tmp_path):
    """Issue: a refused launch (train without --output: runs/; prepare --output new/dir/out) left the parent
    folders StagedDirectory had made. abort() removes them while empty; a folder that was there, or that
    another writer filled meanwhile, stays."""
    StagedDirectory(tmp_path / "new" / "deep" / "out").abort()
    assert os.listdir(tmp_path) == []
    (tmp_path / "kept").mkdir()
    StagedDirectory(tmp_path / "kept" / "new" / "out").abort()
    assert os.listdir(tmp_path) == ["kept"] and os.listdir(tmp_path / "kept") == []
    staged = StagedDirectory(tmp_path / "a" / "b" / "out")
    (tmp_path / "a" / "other").write_text("another writer's\n")
    staged.abort()
    assert sorted(os.listdir(tmp_path)) == ["a", "kept"] and os.listdir(tmp_path / "a") == ["other"]
    StagedDirectory(tmp_path / "x" / "out").commit()
    assert sorted(os.listdir(tmp_path / "x")) == ["out"]


def test_make_dirs_returns_what_it_made_deepest_first(tmp_path):
    from okl_core.publish import make_dirs, remove_made_dirs

    assert make_dirs(tmp_path / "a" / "b") == [str(tmp_path / "a" / "b"), str(tmp_path / "a")]
    assert make_dirs(tmp_path / "a" / "b") == []  # there already: made by no one here
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        make_dirs(tmp_path / "file" / "sub")
    with pytest.raises(FileExistsError):
        make_dirs(tmp_path / "file")
    with pytest.raises(OSError, match="File name too long"):  # the folders made on the way are removed again
        make_dirs(tmp_path / "new" / "deep" / ("x" * 300))
    assert sorted(os.listdir(tmp_path)) == ["a", "file"]
    made = make_dirs(tmp_path / "c" / "d")
    (tmp_path / "c" / "keep").write_text("x")
    remove_made_dirs(made)  # d goes; c holds a file now and stays
    assert sorted(os.listdir(tmp_path / "c")) == ["keep"]
