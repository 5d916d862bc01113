"""Where a checkpoint's files are: the one read behind ``GET /checkpoints/{uuid}`` (the stock
SDK's download through the master).

As 0.38.1's master does, a checkpoint's storage is the one recorded with it (``storage_id``: an
unmanaged run's) and otherwise its experiment's ``checkpoint_storage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from . import _tables as t


@dataclass(frozen=True)
class StoredCheckpoint:
    """A checkpoint's state and the storage config its files are in (None: none known)."""

    uuid: str
    state: str
    experiment_id: int | None
    storage: dict[str, Any] | None


def locate(conn: sa.Connection, uuid: str) -> StoredCheckpoint | None:
    """The checkpoint's state and storage config (None: no such checkpoint)."""
    ck, cs, ex = t.checkpoints.c, t.checkpoint_storages.c, t.experiments.c
    row = conn.execute(
        sa.select(
            ck.uuid,
            ck.state,
            ck.experiment_id,
            cs.config.label("storage"),
            ex.config.label("exp_config"),
        )
        .select_from(t.checkpoints)
        .outerjoin(t.checkpoint_storages, cs.id == ck.storage_id)
        .outerjoin(t.experiments, ex.id == ck.experiment_id)
        .where(ck.uuid == uuid)
    ).first()
    if row is None:
        return None
    storage = row.storage
    if not isinstance(storage, dict) or not storage:
        storage = (
            (row.exp_config or {}).get("checkpoint_storage")
            if isinstance(row.exp_config, dict)
            else None
        )
    return StoredCheckpoint(
        uuid=row.uuid,
        state=row.state,
        experiment_id=row.experiment_id,
        storage=storage if isinstance(storage, dict) else None,
    )
