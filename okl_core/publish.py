"""Publish a directory whole: build it beside its target, then move it in with one rename.

Both a prepared data set and the files of a training run are published this way, so a
reader sees the old directory or the new one, never a mix (docs/bad-input.md, "Data sets
and outputs"). :class:`StagedDirectory`

* takes an exclusive lock on the target (``.<name>.lock`` beside it, ``flock``): a second
  writer of the same target, in this process or another, is refused at once with one
  line that names the holder (pid and host) -- at most one of two racing writers succeeds;
* cleans what earlier writers of the target that were killed left behind (their hidden
  staging and set-aside directories): holding the lock proves none of them is alive, so
  no pid or age guess is needed; the pid and host in each name only say whose it was;
* builds in a hidden sibling ``.<name>.tmp-<host>-<pid>-<random>`` created with the
  permissions of the umask (``tempfile.mkdtemp`` would make it 0700: other users, such as
  Flink TaskManagers, could not read the result);
* commits by renaming the staging directory to the target; with ``replace`` an existing
  target is first renamed aside (``.<name>.old-<host>-<pid>``), then deleted after the
  new one is in place. A crash between the two renames leaves the old directory aside,
  and the next writer of the target renames it back before doing anything else: there is
  always a complete directory to return to.

A killed writer's lock file stays behind empty and unlocked (``flock`` locks die with
their process); the next writer reuses it, and each writer deletes it when done.
Locks need a file system with working ``flock`` (local disks; NFS v4).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import signal
import socket

__all__ = ["StagedDirectory", "TargetBusyError", "fault_point", "make_dirs", "remove_made_dirs", "TEST_KILL_ENV", "TEST_PAUSE_ENV"]

TEST_KILL_ENV = "OKL_TEST_KILL_AT"
"""Tests set this to a step name (``staged``, ``aside``) to SIGKILL the writer at that step."""
TEST_PAUSE_ENV = "OKL_TEST_PAUSE_AT"
"""Tests set this to a step name to SIGSTOP the writer there (and SIGCONT it later)."""


class TargetBusyError(FileExistsError):
    """Another live writer holds the target's lock."""


def fault_point(step: str) -> None:
    """Stop or kill this process at ``step`` when a test asked for it (:data:`TEST_PAUSE_ENV`, :data:`TEST_KILL_ENV`).

    Real processes, real signals: how the race and crash tests put a writer exactly
    between two steps.
    """
    if os.environ.get(TEST_PAUSE_ENV) == step:
        os.kill(os.getpid(), signal.SIGSTOP)
    if os.environ.get(TEST_KILL_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _owner() -> str:
    """``host-pid`` of this process, as recorded in lock files and hidden names."""
    return f"{socket.gethostname().replace('-', '_')}-{os.getpid()}"


class _Lock:
    """An exclusive ``flock`` on ``path`` (created if needed), verified against a concurrent unlink."""

    def __init__(self, path: str, target: str):
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                os.close(fd)
                if err.errno in (errno.EAGAIN, errno.EACCES):
                    raise TargetBusyError(f"{target} is being written by {holder} (lock {path}); wait for it or choose another path") from None
                raise
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:  # unlinked by the holder that just finished
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self.path = path
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # while still locked: a waiter then sees another inode and retries
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None


def make_dirs(path) -> list[str]:
    """Create the directory ``path`` and its missing parents (``os.makedirs(path, exist_ok=True)``).

    Returns the folders this call created, deepest first, for :func:`remove_made_dirs`: a
    command refused after making its output folder takes back what it made, and only that
    (a folder made meanwhile by another process is not counted: ``mkdir`` tells whose it is).

    Raises
    ------
    OSError
        As ``os.makedirs``: a file in the way, no permission; the folders made so far are removed.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    made = [] if parent == path or os.path.exists(parent) else make_dirs(parent)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            remove_made_dirs(made)
            raise
        return made
    except OSError:
        remove_made_dirs(made)
        raise
    return [path, *made]


def remove_made_dirs(made: list[str]) -> None:
    """Remove the folders :func:`make_dirs` created (deepest first), each only while it is empty.

    Never removes anything written into them since: ``rmdir`` fails on a folder that holds
    anything, and the folders above it are then kept too.
    """
    for folder in made:
        try:
            os.rmdir(folder)
        except OSError:
            return


def _remove(path: str) -> None:
    """Delete a leftover (a directory tree, or a file or link that appeared at the target), ignoring errors.

    ``shutil.rmtree`` alone fails on a file, which then stayed aside and made the next
    replace fail with NotADirectoryError.
    """
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


class StagedDirectory:
    """A directory built in a hidden sibling and renamed to ``path`` when complete.

    Parameters
    ----------
    path : str
        Target directory (local).
    replace : bool
        Whether an existing target may be replaced (after completion). When False an
        existing target (other than an empty directory) raises FileExistsError here and,
        should one appear meanwhile, at :meth:`commit`.
    may_replace : callable, optional
        ``may_replace(path) -> str | None``: why an existing target must not be replaced
        even with ``replace`` (e.g. it is not an okl data set); None allows it.

    Raises
    ------
    FileExistsError
        The target exists and ``replace`` is False; :class:`TargetBusyError` when another
        writer holds the target.
    """

    def __init__(self, path, replace: bool = False, may_replace=None):
        self.path = os.path.abspath(os.fspath(path))
        self.parent, self.name = os.path.split(self.path)
        self.replace = replace
        self._made = make_dirs(self.parent)  # removed again (when empty) by abort: a refused writer leaves no folder behind
        try:
            self._lock = _Lock(os.path.join(self.parent, f".{self.name}.lock"), self.path)
        except BaseException:
            remove_made_dirs(self._made)
            raise
        try:
            self._recover()
            self._check_target(may_replace)
            self.tmp = os.path.join(self.parent, f".{self.name}.tmp-{_owner()}-{secrets.token_hex(4)}")
            os.mkdir(self.tmp, 0o777)  # the umask decides, as for any directory the user makes
        except BaseException:
            self._release()
            raise

    def _hidden(self, kind: str) -> list[str]:
        prefix = f".{self.name}.{kind}-"
        return sorted(os.path.join(self.parent, n) for n in os.listdir(self.parent) if n.startswith(prefix))

    def _recover(self) -> None:
        """Undo what killed writers of this target left (we hold the lock: none of them lives)."""
        aside = self._hidden("old")
        if aside and not os.path.exists(self.path):
            os.rename(aside.pop(), self.path)  # killed between its two renames: the old one comes back
        for stale in aside + self._hidden("tmp"):
            _remove(stale)

    def _occupied(self) -> bool:
        """Whether the target exists and is not an empty directory (which is replaced silently)."""
        return os.path.exists(self.path) and not (os.path.isdir(self.path) and not os.listdir(self.path))

    def _check_target(self, may_replace) -> None:
        # A file (or a dangling link) is never replaced: only directories are published here.
        not_a_dir = os.path.lexists(self.path) and not os.path.isdir(self.path)
        if not (not_a_dir or self._occupied()):
            return
        if not self.replace:
            raise FileExistsError(f"{self.path} already exists (pass --overwrite to replace it)")
        if not_a_dir:
            raise FileExistsError(f"{self.path}: not a directory; not replacing it even with --overwrite")
        why = may_replace(self.path) if may_replace is not None else None
        if why:
            raise FileExistsError(f"{self.path}: {why}; not replacing it even with --overwrite")

    def commit(self) -> str:
        """Move the staging directory to the target (the old one aside first); returns the target."""
        fault_point("staged")
        aside = None
        try:
            if self._occupied():
                if not self.replace:
                    raise FileExistsError(f"{self.path} appeared while this one was written (pass --overwrite to replace it)")
                aside = os.path.join(self.parent, f".{self.name}.old-{_owner()}")
                os.rename(self.path, aside)
                fault_point("aside")
            os.rename(self.tmp, self.path)
        except BaseException:
            if aside is not None and not os.path.exists(self.path):
                os.rename(aside, self.path)
            self.abort()
            raise
        if aside is not None:
            _remove(aside)
        self._lock.release()
        return self.path

    def abort(self) -> None:
        """Drop the staging directory and release the target (and the parent folders this writer made, while empty)."""
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        self._lock.release()
        remove_made_dirs(self._made)
