"""Warm start (``searcher.source_trial_id`` / ``searcher.source_checkpoint_uuid``): the
checkpoint every trial of an experiment starts from, as Determined 0.38.1 resolves it."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ...errors import InvalidConfig
from ...store import experiments as store


def warm_start_checkpoint(conn: sa.Connection, searcher: dict[str, Any] | None) -> str | None:
    """The uuid of the checkpoint the config's trials start from, or None without a warm start.
    A source trial gives its latest completed checkpoint (the most steps, then the newest);
    a source uuid must name a completed checkpoint. InvalidConfig (400) naming the key when
    there is none: the experiment is refused, as 0.38.1 refuses it."""
    searcher = searcher or {}
    trial_id, uuid = searcher.get("source_trial_id"), searcher.get("source_checkpoint_uuid")
    if trial_id is not None:
        found = store.latest_completed_checkpoint(conn, trial_id)
        if found is None:
            raise InvalidConfig(f"searcher.source_trial_id: trial {trial_id} has no completed checkpoint "
                                "to start from", field="searcher.source_trial_id")
        return found
    if uuid is not None:
        found = store.completed_checkpoint(conn, str(uuid))
        if found is None:
            raise InvalidConfig(f"searcher.source_checkpoint_uuid: no completed checkpoint {uuid}",
                                field="searcher.source_checkpoint_uuid")
        return found
    return None
