"""A checkpoint's files, served through the master: 0.38.1's ``GET /checkpoints/{uuid}``, which
the stock SDK's ``Checkpoint.download(mode=DownloadMode.MASTER)`` (and ``AUTO``, when it cannot
read the storage itself) asks for with ``Accept: application/gzip`` and unpacks as it streams.

The files are read from the storage the master can see (``shared_fs``: ``host_path
[/storage_path]/<uuid>``; ``directory``: ``container_path/<uuid>``) and streamed as an archive
(``archive``): never a whole file in memory, nothing from outside the checkpoint directory.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from ...errors import Conflict, DetError, InvalidRequest, NotFound
from ...store import checkpoint_files as store
from ...store import reader
from .archive import iter_archive
from .gc import checkpoint_dir, storage_root

__all__ = [
    "ARCHIVE_TYPES",
    "CheckpointArchive",
    "CheckpointFiles",
    "UnsupportedArchive",
    "archive_type",
]

log = logging.getLogger("det_jupyter.checkpoint_files")

#: The media types an archive is served as, and whether it is gzipped. (0.38.1 also serves
#: ``application/zip``; no stock client asks for it.)
ARCHIVE_TYPES = {"application/x-tar": False, "application/gzip": True}
_ANY = {"", "*/*", "application/*"}
#: Checkpoint states whose files may be downloaded (the stock SDK's own check).
DOWNLOADABLE = ("COMPLETED", "PARTIALLY_DELETED")


class UnsupportedArchive(DetError):
    """An ``Accept`` this master cannot answer with (415, as 0.38.1)."""

    status = 415


def archive_type(accept: str | None) -> str:
    """The media type to serve for an ``Accept`` header: 0.38.1 takes the header as one type;
    none (or any) is a tar archive."""
    value = (accept or "").split(";", 1)[0].strip().lower()
    if value in _ANY:
        return "application/x-tar"
    if value not in ARCHIVE_TYPES:
        raise UnsupportedArchive(
            f"unsupported media type to download a checkpoint: {accept!r}; ask for "
            f"one of {', '.join(ARCHIVE_TYPES)}"
        )
    return value


def _is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory itself (not a symlink to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class CheckpointArchive:
    """A checkpoint's archive: its media type and its bytes, in chunks (read from disk as they
    are taken; ``close()`` the iterator to stop early)."""

    uuid: str
    media_type: str
    chunks: Generator[bytes, None, None]

    @property
    def filename(self) -> str:
        return f"{self.uuid}.tar.gz" if ARCHIVE_TYPES[self.media_type] else f"{self.uuid}.tar"


class CheckpointFiles:
    """Finds a checkpoint's directory in its storage and archives it."""

    def __init__(self, engine: sa.Engine) -> None:
        self._reader = reader(engine)

    def archive(self, uuid: str, media_type: str) -> CheckpointArchive:
        """The archive of the checkpoint's files. NotFound: no such checkpoint, or its files are
        not in its storage; Conflict: it is not complete or was deleted; InvalidRequest: its
        storage is not one this master reads."""
        gzip = ARCHIVE_TYPES[media_type]
        with self._reader.connect() as conn:
            found = store.locate(conn, uuid)
        if found is None:
            raise NotFound(f"checkpoint {uuid} not found")
        if found.state not in DOWNLOADABLE:
            why = "its files were deleted" if found.state == "DELETED" else "it is not complete"
            raise Conflict(
                f"checkpoint {uuid} is {found.state}: {why}; only COMPLETED or "
                "PARTIALLY_DELETED checkpoints can be downloaded"
            )
        storage = found.storage or {}
        root = storage_root({"checkpoint_storage": storage})
        if root is None:
            kind = storage.get("type", "unknown")
            raise InvalidRequest(
                f"checkpoint {uuid} is in {kind} storage, which this master does not read; "
                "download it directly (DownloadMode.DIRECT)"
            )
        directory = checkpoint_dir(root, uuid)
        if directory is None or not _is_dir(directory):  # a symlink is never followed
            raise NotFound(f"the files of checkpoint {uuid} are not in its storage")

        def skipped(path: str, why: str) -> None:
            log.info("checkpoint %s download: left out %s: %s", uuid, path, why)

        return CheckpointArchive(
            uuid, media_type, iter_archive(directory, gzip=gzip, on_skip=skipped)
        )
