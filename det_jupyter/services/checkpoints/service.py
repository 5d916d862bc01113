"""Checkpoints reported by tasks, the trial's latest one (what a restart resumes from), and the
lists users read: each checkpoint with the training and validation reports at its step, as
0.38.1's ``checkpoints_view`` joins them (``_checkpoint_order`` filters, sorts and pages)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import InvalidRequest, NotFound
from ...store import checkpoints as store
from ...store import reader
from ..allocation.logs import parse_time
from ..common.clock import Clock
from .order import (
    CheckpointQuery,
    ListedCheckpoint,
    metric_value,
    order_checkpoints,
    page_bounds,
)


@dataclass(frozen=True)
class CheckpointPage:
    """One page of a checkpoint list: ``items`` are ``[start, end)`` of ``total``."""

    items: list[ListedCheckpoint]
    total: int
    start: int
    end: int


def _listed(rows: list[Any], config: dict | None) -> list[ListedCheckpoint]:
    """Each checkpoint once (should a step hold two visible reports, the later one counts),
    with its metrics and the searcher metric of ``config``."""
    latest: dict[str, Any] = {}
    for r in rows:
        seen = latest.get(r.uuid)
        if seen is None or ((r.validation_id or 0), (r.training_id or 0)) > \
                ((seen.validation_id or 0), (seen.training_id or 0)):
            latest[r.uuid] = r
    metric = ((config or {}).get("searcher") or {}).get("metric")
    out = []
    for r in latest.values():
        validation = json.loads(r.validation_body) if r.validation_body is not None else None
        training = json.loads(r.training_body) if r.training_body is not None else None
        out.append(ListedCheckpoint(r, training, validation, metric_value(validation, metric)))
    return out


class CheckpointService:
    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        self._storage_ids: dict[str, int] = {}  # config key -> id (rows are never deleted)

    def report(self, ckpt: dict, *, trial_id: int | None, task_id: str | None, allocation_id: str | None) -> None:
        """Store a completed checkpoint and make it the trial's latest if it is the newest."""
        uuid = ckpt.get("uuid")
        metadata = ckpt.get("metadata") or {}
        if not isinstance(uuid, str) or not uuid:
            raise InvalidRequest("checkpoint.uuid is required")
        if not isinstance(metadata, dict) or "steps_completed" not in metadata:
            raise InvalidRequest("checkpoint.metadata must contain steps_completed")
        try:
            steps = int(metadata["steps_completed"])
        except (TypeError, ValueError) as exc:
            raise InvalidRequest("checkpoint.metadata.steps_completed must be an integer") from exc
        resources = ckpt.get("resources") or {}
        if not isinstance(resources, dict):
            raise InvalidRequest("checkpoint.resources must map file paths to sizes")
        with self._engine.begin() as conn:
            exp_id = store.experiment_of_trial(conn, trial_id) if trial_id is not None else None
            if store.exists(conn, uuid):
                return  # a retried report
            store.insert_completed(
                conn, uuid=uuid, trial_id=trial_id, experiment_id=exp_id,
                task_id=ckpt.get("taskId") or task_id, allocation_id=ckpt.get("allocationId") or allocation_id,
                report_time=parse_time(ckpt.get("reportTime"), self._clock.now()),
                resources={k: str(v) for k, v in resources.items()},
                metadata=metadata, steps_completed=steps, storage_id=ckpt.get("storageId"),
            )
            if trial_id is not None:
                latest = store.latest_step(conn, trial_id)
                if latest is None or steps >= latest:
                    store.set_latest(conn, trial_id, uuid)

    def get(self, uuid: str) -> sa.Row:
        with self._reader.connect() as conn:
            row = store.get(conn, uuid)
        if row is None:
            raise NotFound(f"checkpoint {uuid} not found")
        return row

    def set_metadata(self, uuid: str, metadata: dict[str, Any]) -> None:
        """Replace the checkpoint's user metadata (the stock SDK's ``Checkpoint.add_metadata``
        and ``remove_metadata`` send the whole of it); the files in storage are not touched."""
        if not isinstance(metadata, dict):
            raise InvalidRequest("checkpoint.metadata must be an object")
        with self._engine.begin() as conn:
            done = store.set_metadata(conn, uuid, metadata)
        if not done:
            raise NotFound(f"checkpoint {uuid} not found")

    def report_source(self, *, trial_id: int, checkpoint_uuid: str, kind: str,
                      model_id: int | None = None, model_version: int | None = None) -> None:
        """``POST /api/v1/trial-source-info``: the trial used this checkpoint (NotFound when
        it is not stored)."""
        with self._engine.begin() as conn:
            if not store.exists(conn, checkpoint_uuid):
                raise NotFound(f"checkpoint {checkpoint_uuid} not found")
            store.put_source_info(conn, trial_id=trial_id, checkpoint_uuid=checkpoint_uuid, kind=kind,
                                  model_id=model_id, model_version=model_version)

    def source_trials(self, *, checkpoint_uuid: str | None = None, model_id: int | None = None,
                      model_version: int | None = None, kind: str | None = None) -> list[int]:
        """The trials that reported using a checkpoint or a model version (of ``kind``)."""
        with self._reader.connect() as conn:
            return store.source_trials(conn, checkpoint_uuid=checkpoint_uuid, model_id=model_id,
                                       model_version=model_version, kind=kind)

    def for_trial(self, trial_id: int) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return store.of_trial(conn, trial_id)

    def for_experiment(self, exp_id: int) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return store.of_experiment(conn, exp_id)

    def listing(self, config: dict, query: CheckpointQuery, *, experiment_id: int | None = None,
                trial_id: int | None = None) -> CheckpointPage:
        """A page of the experiment's (or trial's) checkpoints as ``query`` asks, with their
        metrics; ``config``: the experiment's (its searcher metric and its direction)."""
        with self._reader.connect() as conn:
            rows = store.with_reports(conn, experiment_id=experiment_id, trial_id=trial_id)
        searcher = (config or {}).get("searcher") or {}
        ordered = order_checkpoints(_listed(rows, config), query,
                                    smaller_is_better=bool(searcher.get("smaller_is_better", True)))
        start, end = page_bounds(len(ordered), query.offset, query.limit)
        return CheckpointPage(ordered[start:end], len(ordered), start, end)

    def with_metrics(self, uuid: str, config: dict | None) -> ListedCheckpoint:
        """One checkpoint with the reports at its step (``get``'s NotFound if there is none)."""
        with self._reader.connect() as conn:
            rows = store.with_reports(conn, uuid=uuid)
        if not rows:
            raise NotFound(f"checkpoint {uuid} not found")
        return _listed(rows, config)[0]

    def storage_id(self, config: Any) -> int:
        """The id of a checkpoint-storage config (``runs/start`` returns it)."""
        key = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
        found = self._storage_ids.get(key)  # every run of an experiment asks for the same one
        if found is not None:
            return found
        with self._engine.begin() as conn:
            found = store.storage_id(conn, key)
            if found is None:
                found = store.add_storage(conn, key, config or {})
        self._storage_ids[key] = found
        return found
