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
from ...store import reader
from ...store import tables as t
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


def _joined(where: Any) -> Any:
    """Checkpoints with the ids and bodies of the visible training and validation reports at
    their step (the metrics index on trial, group, archived, step finds each)."""
    ck = t.checkpoints.c
    cols: list[Any] = [t.checkpoints]
    joined: Any = t.checkpoints
    for group in ("training", "validation"):
        report = t.metrics.alias(f"{group}_report")
        m = report.c
        cols += [m.id.label(f"{group}_id"), m.body.label(f"{group}_body")]
        joined = joined.outerjoin(report, sa.and_(
            m.trial_id == ck.trial_id, m.mgroup == group, m.archived.is_(False),
            m.steps_completed == ck.steps_completed))
    return sa.select(*cols).select_from(joined).where(where)


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
            exp_id = None
            if trial_id is not None:
                exp_id = conn.execute(
                    sa.select(t.trials.c.experiment_id).where(t.trials.c.id == trial_id)
                ).scalar()
            if conn.execute(sa.select(t.checkpoints.c.uuid).where(t.checkpoints.c.uuid == uuid)).first():
                return  # a retried report
            conn.execute(
                sa.insert(t.checkpoints).values(
                    uuid=uuid, trial_id=trial_id, experiment_id=exp_id,
                    task_id=ckpt.get("taskId") or task_id, allocation_id=ckpt.get("allocationId") or allocation_id,
                    report_time=parse_time(ckpt.get("reportTime"), self._clock.now()),
                    state="COMPLETED", resources={k: str(v) for k, v in resources.items()},
                    ckpt_metadata=metadata, steps_completed=steps, storage_id=ckpt.get("storageId"),
                )
            )
            if trial_id is not None:
                latest = conn.execute(
                    sa.select(t.checkpoints.c.steps_completed)
                    .join(t.trials, t.trials.c.latest_checkpoint == t.checkpoints.c.uuid)
                    .where(t.trials.c.id == trial_id)
                ).scalar()
                if latest is None or steps >= latest:
                    conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(latest_checkpoint=uuid))

    def get(self, uuid: str) -> sa.Row:
        with self._reader.connect() as conn:
            row = conn.execute(sa.select(t.checkpoints).where(t.checkpoints.c.uuid == uuid)).first()
        if row is None:
            raise NotFound(f"checkpoint {uuid} not found")
        return row

    def set_metadata(self, uuid: str, metadata: dict[str, Any]) -> None:
        """Replace the checkpoint's user metadata (the stock SDK's ``Checkpoint.add_metadata``
        and ``remove_metadata`` send the whole of it); the files in storage are not touched."""
        if not isinstance(metadata, dict):
            raise InvalidRequest("checkpoint.metadata must be an object")
        with self._engine.begin() as conn:
            done = conn.execute(sa.update(t.checkpoints).where(t.checkpoints.c.uuid == uuid)
                                .values(ckpt_metadata=metadata)).rowcount
        if not done:
            raise NotFound(f"checkpoint {uuid} not found")

    def for_trial(self, trial_id: int) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return list(conn.execute(
                sa.select(t.checkpoints).where(t.checkpoints.c.trial_id == trial_id)
                .order_by(t.checkpoints.c.steps_completed)
            ))

    def for_experiment(self, exp_id: int) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return list(conn.execute(
                sa.select(t.checkpoints).where(t.checkpoints.c.experiment_id == exp_id)
                .order_by(t.checkpoints.c.report_time)
            ))

    def listing(self, config: dict, query: CheckpointQuery, *, experiment_id: int | None = None,
                trial_id: int | None = None) -> CheckpointPage:
        """A page of the experiment's (or trial's) checkpoints as ``query`` asks, with their
        metrics; ``config``: the experiment's (its searcher metric and its direction)."""
        ck = t.checkpoints.c
        where = ck.trial_id == trial_id if trial_id is not None else ck.experiment_id == experiment_id
        with self._reader.connect() as conn:
            rows = conn.execute(_joined(where)).all()
        searcher = (config or {}).get("searcher") or {}
        ordered = order_checkpoints(_listed(rows, config), query,
                                    smaller_is_better=bool(searcher.get("smaller_is_better", True)))
        start, end = page_bounds(len(ordered), query.offset, query.limit)
        return CheckpointPage(ordered[start:end], len(ordered), start, end)

    def with_metrics(self, uuid: str, config: dict | None) -> ListedCheckpoint:
        """One checkpoint with the reports at its step (``get``'s NotFound if there is none)."""
        with self._reader.connect() as conn:
            rows = conn.execute(_joined(t.checkpoints.c.uuid == uuid)).all()
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
            found = conn.execute(
                sa.select(t.checkpoint_storages.c.id).where(t.checkpoint_storages.c.config_key == key)
            ).scalar()
            if found is None:
                found = conn.execute(
                    sa.insert(t.checkpoint_storages).values(config_key=key, config=config or {})
                    .returning(t.checkpoint_storages.c.id)
                ).scalar_one()
        self._storage_ids[key] = found
        return found
