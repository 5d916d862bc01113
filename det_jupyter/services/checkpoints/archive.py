"""A checkpoint directory as a tar (or gzipped tar) archive, produced chunk by chunk: the
download through the master (``GET /checkpoints/{uuid}``) never holds a whole file in memory.

Nothing in the archive comes from outside the checkpoint directory. The walk never follows a
symlink: each directory is opened relative to its parent's descriptor with ``O_NOFOLLOW``, and
each file the same way, so a directory or file swapped for a link while the archive is made is
refused rather than read through. A symlink in the checkpoint is archived as a link (its text,
never its target's content) only when it is relative and resolves inside the checkpoint; one
that points out (absolute, or up past the root) is left out. So are sockets, FIFOs and devices.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

__all__ = ["CHUNK", "ArchiveError", "iter_archive"]

#: Bytes read from a file at a time (and about the size of each chunk produced).
CHUNK = 1024 * 1024
_BLOCK = tarfile.BLOCKSIZE
_RECORD = tarfile.RECORDSIZE
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW

OnSkip = Callable[[str, str], None]
_Entry = tuple[tarfile.TarInfo, int | None]  # the header, and an open descriptor for a file's data


class ArchiveError(OSError):
    """The checkpoint changed while it was archived (a file shrank): the archive is incomplete."""


def iter_archive(
    root: Path, *, gzip: bool, chunk: int = CHUNK, on_skip: OnSkip | None = None
) -> Generator[bytes, None, None]:
    """The tar archive (gzipped when ``gzip``) of the files under ``root``, their paths relative
    to it, in chunks of about ``chunk`` bytes. ``on_skip(path, why)`` hears of each entry left
    out. ``root`` itself must be a directory, not a symlink: ``OSError`` otherwise, from the
    first ``next`` (before any byte is produced, so a caller can still answer an error).
    Closing the iterator early closes every descriptor it opened."""
    tar = _tar(root, chunk, on_skip or (lambda path, why: None))
    return _gzipped(tar) if gzip else tar


def _gzipped(chunks: Generator[bytes, None, None]) -> Generator[bytes, None, None]:
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: the gzip container
    try:
        for c in chunks:
            out = z.compress(c)
            if out:
                yield out
        yield z.flush()
    finally:
        chunks.close()


def _tar(root: Path, chunk: int, on_skip: OnSkip) -> Generator[bytes, None, None]:
    root_fd = os.open(root, _DIR_FLAGS)
    real_root = os.path.realpath(root)
    written = 0
    try:
        for info, fd in _walk(root_fd, "", real_root, on_skip):
            try:
                header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
                written += len(header)
                yield header
                if fd is None:
                    continue
                for piece in _data(fd, info.size, chunk, info.name):
                    written += len(piece)
                    yield piece
                pad = -info.size % _BLOCK
                if pad:
                    written += pad
                    yield b"\0" * pad
            finally:
                if fd is not None:
                    os.close(fd)
    finally:
        os.close(root_fd)
    end = 2 * _BLOCK
    end += -(written + end) % _RECORD  # as tarfile does: the archive fills whole records
    yield b"\0" * end


def _data(fd: int, size: int, chunk: int, name: str) -> Iterator[bytes]:
    left = size
    while left:
        piece = os.read(fd, min(chunk, left))
        if not piece:
            raise ArchiveError(
                f"{name} shrank while it was archived ({size - left} of {size} bytes)"
            )
        left -= len(piece)
        yield piece


def _info(path: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.type = kind
    info.mode = stat.S_IMODE(st.st_mode) & 0o777  # no setuid, setgid or sticky bits
    info.mtime = int(st.st_mtime)
    info.size = st.st_size if kind == tarfile.REGTYPE else 0
    return info


def link_inside(real_root: str, link_dir: str, target: str) -> bool:
    """Whether a symlink in ``real_root/link_dir`` whose text is ``target`` stays inside
    ``real_root`` once resolved (links it goes through included)."""
    if not target or os.path.isabs(target):
        return False
    resolved = os.path.realpath(os.path.join(real_root, link_dir, target))
    return resolved == real_root or resolved.startswith(real_root.rstrip(os.sep) + os.sep)


def _walk(dir_fd: int, rel: str, real_root: str, on_skip: OnSkip) -> Iterator[_Entry]:
    """The entries of the directory open as ``dir_fd`` (``rel``: its path in the archive, with a
    trailing slash unless it is the root), depth first, by name."""
    for name in sorted(os.listdir(dir_fd)):
        path = rel + name
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed while we walked
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                on_skip(path, "it changed while the checkpoint was read")
                continue
            try:
                yield _info(path, st, tarfile.DIRTYPE), None
                yield from _walk(sub, path + "/", real_root, on_skip)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            except OSError:
                on_skip(path, "it changed while the checkpoint was read")
                continue
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                os.close(fd)
                on_skip(path, "it changed while the checkpoint was read")
                continue
            yield _info(path, opened, tarfile.REGTYPE), fd  # the consumer closes fd
        elif stat.S_ISLNK(st.st_mode):
            target = os.readlink(name, dir_fd=dir_fd)
            if link_inside(real_root, rel, target):
                info = _info(path, st, tarfile.SYMTYPE)
                info.mode = 0o777
                info.linkname = target
                yield info, None
            else:
                on_skip(path, f"a symlink out of the checkpoint ({target})")
        else:
            on_skip(path, "not a regular file, directory or symlink")
