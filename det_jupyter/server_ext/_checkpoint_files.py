"""``GET /checkpoints/{uuid}`` (0.38.1's path, outside ``/api/v1``): a checkpoint's files as a
tar or gzipped tar archive, streamed from its storage. The stock SDK's
``Checkpoint.download(mode=DownloadMode.MASTER)`` (and ``AUTO``, when it cannot read the
storage) asks for ``application/gzip``.

Who may read it: whoever may read the checkpoint (``GET /api/v1/checkpoints/{uuid}``): the
experiment's artifacts permission; a task only its own experiment's.
"""

from __future__ import annotations

import asyncio
import logging
import re

from tornado import iostream
from tornado.http1connection import HTTP1Connection

from ..errors import InvalidRequest, NotFound
from ..services.access.authz import Perm
from ..services.accounts.auth import AllocationPrincipal
from ..services.checkpoints.files import archive_type
from ._api import api, string
from ._base import DetHandler

log = logging.getLogger("det_jupyter.api")

_UUID = re.compile(r"[0-9a-fA-F-]{1,64}")  # as GET /api/v1/checkpoints/{uuid} takes it


class CheckpointDownloadHandler(DetHandler):
    """``GET /checkpoints/{uuid}``: the checkpoint's files, a tar or gzipped tar (``Accept``)."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    @api(errors=(409, 415), path={"uuid": string(64, 1, pattern=f"^{_UUID.pattern}$")})
    async def get(self, uuid: str) -> None:
        if not _UUID.fullmatch(uuid):
            raise InvalidRequest(
                f"invalid checkpoint uuid {uuid!r}: a checkpoint's uuid, e.g. "
                "a4a5b2e9-6a15-4b8e-9d2f-0c2f3e7d1a10"
            )
        row = self.master.checkpoints.get(uuid)
        p = self.principal
        if isinstance(p, AllocationPrincipal) and row.experiment_id != p.experiment_id:
            raise NotFound(f"checkpoint {uuid} not found")
        self.authorize_checkpoint(uuid)
        archive = self.master.checkpoint_files.archive(
            uuid, archive_type(self.request.headers.get("Accept"))
        )
        chunks = archive.chunks
        loop = asyncio.get_running_loop()
        try:
            try:  # the first chunk before any header: a directory gone meanwhile is still a 404
                piece = await loop.run_in_executor(None, next, chunks, None)
            except OSError as exc:
                raise NotFound(f"the files of checkpoint {uuid} are not in its storage") from exc
            self.set_header("Content-Type", archive.media_type)
            self.set_header("Content-Disposition", f'attachment; filename="{archive.filename}"')
            while piece is not None:
                self.write(piece)
                await self.flush()  # waits for the client: memory holds about one chunk
                piece = await loop.run_in_executor(None, next, chunks, None)
        except iostream.StreamClosedError:
            return  # the client went away
        except Exception:
            if not self._headers_written:
                raise  # nothing sent yet: the usual error answer
            # Part of the archive is sent: cut the connection, so the client sees a broken
            # transfer rather than a short archive that looks whole.
            log.exception("checkpoint %s download failed while streaming", uuid)
            if isinstance(self.request.connection, HTTP1Connection):
                self.request.connection.close()
            return
        finally:
            chunks.close()
        self.finish()
