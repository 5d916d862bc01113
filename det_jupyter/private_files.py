"""Files and directories only this user may read: the data dir, its secrets, the master's
and a detached server's files."""

from __future__ import annotations

import os


def private_dir(path: str) -> None:
    """Make ``path`` (and missing parents) and leave it readable by this user only (0700),
    tightening a directory that already existed with looser modes."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def open_private(path: str, flags: int) -> int:
    """``os.open`` of a file only this user may read (0600) from its creation; an existing file
    with looser modes is tightened before anything is written to it."""
    fd = os.open(path, flags | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return fd
