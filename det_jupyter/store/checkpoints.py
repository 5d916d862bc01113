"""The checkpoint store: reported checkpoints, a trial's latest one, checkpoint storages, and
the reads and writes of their garbage collection and deletion.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows of the ``checkpoints`` table (or the columns named).
Lists of uuids are read and written in chunks, so a request of thousands stays within every
backend's parameter limit. Policy (what may be deleted, what a list shows) is the services'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t

_CHUNK = 500


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


# -- reported checkpoints -----------------------------------------------------------------


def experiment_of_trial(conn: sa.Connection, trial_id: int) -> int | None:
    """The trial's experiment (None: no such trial)."""
    return conn.execute(sa.select(t.trials.c.experiment_id).where(t.trials.c.id == trial_id)).scalar()


def exists(conn: sa.Connection, uuid: str) -> bool:
    """Whether a checkpoint of that uuid is stored."""
    return conn.execute(sa.select(t.checkpoints.c.uuid).where(t.checkpoints.c.uuid == uuid)).first() is not None


def insert_completed(
    conn: sa.Connection, *, uuid: str, trial_id: int | None, experiment_id: int | None, task_id: str | None,
    allocation_id: str | None, report_time: Any, resources: dict[str, str], metadata: dict[str, Any],
    steps_completed: int, storage_id: int | None,
) -> None:
    """Store a COMPLETED checkpoint."""
    conn.execute(
        sa.insert(t.checkpoints).values(
            uuid=uuid, trial_id=trial_id, experiment_id=experiment_id, task_id=task_id,
            allocation_id=allocation_id, report_time=report_time, state="COMPLETED", resources=resources,
            ckpt_metadata=metadata, steps_completed=steps_completed, storage_id=storage_id,
        )
    )


def latest_step(conn: sa.Connection, trial_id: int) -> int | None:
    """The step of the trial's latest checkpoint (None: it has none)."""
    return conn.execute(
        sa.select(t.checkpoints.c.steps_completed)
        .join(t.trials, t.trials.c.latest_checkpoint == t.checkpoints.c.uuid)
        .where(t.trials.c.id == trial_id)
    ).scalar()


def set_latest(conn: sa.Connection, trial_id: int, uuid: str) -> None:
    """Make ``uuid`` the trial's latest checkpoint."""
    conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(latest_checkpoint=uuid))


def get(conn: sa.Connection, uuid: str) -> sa.Row | None:
    """The checkpoint's row (None: no such checkpoint)."""
    return conn.execute(sa.select(t.checkpoints).where(t.checkpoints.c.uuid == uuid)).first()


def set_metadata(conn: sa.Connection, uuid: str, metadata: dict[str, Any]) -> bool:
    """Replace the checkpoint's user metadata; whether it exists."""
    done = conn.execute(sa.update(t.checkpoints).where(t.checkpoints.c.uuid == uuid)
                        .values(ckpt_metadata=metadata)).rowcount
    return bool(done)


def of_trial(conn: sa.Connection, trial_id: int) -> list[sa.Row]:
    """The trial's checkpoints, by step."""
    return list(conn.execute(
        sa.select(t.checkpoints).where(t.checkpoints.c.trial_id == trial_id)
        .order_by(t.checkpoints.c.steps_completed)
    ))


def of_experiment(conn: sa.Connection, exp_id: int) -> list[sa.Row]:
    """The experiment's checkpoints, by report time."""
    return list(conn.execute(
        sa.select(t.checkpoints).where(t.checkpoints.c.experiment_id == exp_id)
        .order_by(t.checkpoints.c.report_time)
    ))


def with_reports(conn: sa.Connection, *, experiment_id: int | None = None, trial_id: int | None = None,
                 uuid: str | None = None) -> list[sa.Row]:
    """The checkpoints of one experiment, trial or uuid (the first given of ``uuid``,
    ``trial_id``, ``experiment_id``), each with the ids and bodies of the visible training and
    validation reports at its step (``training_id``, ``training_body``, ``validation_id``,
    ``validation_body``; the metrics index on trial, group, archived, step finds each): a
    checkpoint whose step holds two visible reports of a group comes twice."""
    ck = t.checkpoints.c
    if uuid is not None:
        where = ck.uuid == uuid
    else:
        where = ck.trial_id == trial_id if trial_id is not None else ck.experiment_id == experiment_id
    cols: list[Any] = [t.checkpoints]
    joined: Any = t.checkpoints
    for group in ("training", "validation"):
        report = t.metrics.alias(f"{group}_report")
        m = report.c
        cols += [m.id.label(f"{group}_id"), m.body.label(f"{group}_body")]
        joined = joined.outerjoin(report, sa.and_(
            m.trial_id == ck.trial_id, m.mgroup == group, m.archived.is_(False),
            m.steps_completed == ck.steps_completed))
    return list(conn.execute(sa.select(*cols).select_from(joined).where(where)))


def storage_id(conn: sa.Connection, config_key: str) -> int | None:
    """The id of the checkpoint storage of that config key (None: not stored yet)."""
    return conn.execute(
        sa.select(t.checkpoint_storages.c.id).where(t.checkpoint_storages.c.config_key == config_key)
    ).scalar()


def add_storage(conn: sa.Connection, config_key: str, config: Any) -> int:
    """Store a checkpoint storage's config under its key; its new id."""
    return conn.execute(
        sa.insert(t.checkpoint_storages).values(config_key=config_key, config=config)
        .returning(t.checkpoint_storages.c.id)
    ).scalar_one()


# -- garbage collection and deletion --------------------------------------------------------


def _collectable(experiment_id: int, states: Sequence[str]) -> tuple[Any, ...]:
    ck = t.checkpoints.c
    return ck.experiment_id == experiment_id, ck.state.in_(states), ck.trial_id.is_not(None)


def collectable(conn: sa.Connection, experiment_id: int, states: Sequence[str]) -> list[sa.Row]:
    """The experiment's checkpoints of trials in ``states`` (``uuid``, ``trial_id``,
    ``steps_completed``, ``state``), read by the experiment index."""
    ck = t.checkpoints.c
    return list(conn.execute(sa.select(ck.uuid, ck.trial_id, ck.steps_completed, ck.state)
                             .where(*_collectable(experiment_id, states))))


def experiment_config(conn: sa.Connection, experiment_id: int) -> dict | None:
    """The experiment's config (None: no such experiment)."""
    return conn.execute(sa.select(t.experiments.c.config).where(t.experiments.c.id == experiment_id)).scalar()


def trials_of_collectable(conn: sa.Connection, experiment_id: int, states: Sequence[str]) -> list[sa.Row]:
    """The trials (``id``, ``state``, ``latest_checkpoint``) that have ``collectable`` checkpoints."""
    ck, tr = t.checkpoints.c, t.trials.c
    return list(conn.execute(sa.select(tr.id, tr.state, tr.latest_checkpoint).where(
        tr.id.in_(sa.select(ck.trial_id).where(*_collectable(experiment_id, states))))))


def validations_of_collectable(conn: sa.Connection, experiment_id: int, states: Sequence[str]) -> list[sa.Row]:
    """The visible validation reports (``id``, ``trial_id``, ``steps_completed``, ``body``) at
    the steps of ``collectable`` checkpoints, by id."""
    ck, m = t.checkpoints.c, t.metrics.c
    return list(conn.execute(sa.select(m.id, m.trial_id, m.steps_completed, m.body)
                             .join(t.checkpoints, sa.and_(ck.trial_id == m.trial_id,
                                                          ck.steps_completed == m.steps_completed))
                             .where(*_collectable(experiment_id, states), m.mgroup == "validation",
                                    m.archived.is_(False))
                             .order_by(m.id)))


def registered(conn: sa.Connection, uuids: Sequence[str]) -> set[str]:
    """Those of ``uuids`` a model version uses."""
    mv = t.model_versions.c
    out: set[str] = set()
    for part in _chunks(uuids):
        out |= set(conn.execute(sa.select(mv.checkpoint_uuid).where(mv.checkpoint_uuid.in_(part))).scalars())
    return out


def latest_of_trials_in(conn: sa.Connection, uuids: Sequence[str], excluded_states: Sequence[str]) -> dict[str, int]:
    """Those of ``uuids`` that are the latest checkpoint of a trial in none of
    ``excluded_states``: {uuid: trial}."""
    tr = t.trials.c
    out: dict[str, int] = {}
    for part in _chunks(uuids):
        for row in conn.execute(sa.select(tr.latest_checkpoint, tr.id).where(
                tr.latest_checkpoint.in_(part), tr.state.not_in(excluded_states))):
            out[row.latest_checkpoint] = row.id
    return out


def lock_in_states(conn: sa.Connection, uuids: Sequence[str], states: Sequence[str]) -> list[str]:
    """Lock the rows of those of ``uuids`` in ``states`` (until the transaction ends); their uuids."""
    ck = t.checkpoints.c
    locked: list[str] = []
    for part in _chunks(uuids):
        locked += conn.execute(sa.select(ck.uuid).where(ck.uuid.in_(part), ck.state.in_(states))
                               .with_for_update()).scalars().all()
    return locked


def mark_deleted(conn: sa.Connection, uuids: Sequence[str]) -> None:
    """Mark the checkpoints DELETED."""
    ck = t.checkpoints.c
    for part in _chunks(uuids):
        conn.execute(sa.update(t.checkpoints).where(ck.uuid.in_(part)).values(state="DELETED"))


def record_files(conn: sa.Connection, uuid: str, resources: dict[str, str], state: str | None) -> None:
    """Record what is left of a checkpoint's files (and its new ``state``, where given),
    unless it is DELETED."""
    values: dict[str, Any] = {"resources": resources}
    if state is not None:
        values["state"] = state
    conn.execute(sa.update(t.checkpoints).where(
        t.checkpoints.c.uuid == uuid, t.checkpoints.c.state != "DELETED").values(**values))


def experiment_configs(conn: sa.Connection, uuids: Sequence[str]) -> dict[str, dict | None]:
    """Each stored one of ``uuids`` with its experiment's config (None: no experiment)."""
    ck = t.checkpoints.c
    found: dict[str, dict | None] = {}
    for part in _chunks(uuids):
        for row in conn.execute(sa.select(ck.uuid, t.experiments.c.config)
                                .select_from(t.checkpoints)
                                .outerjoin(t.experiments, t.experiments.c.id == ck.experiment_id)
                                .where(ck.uuid.in_(part))):
            found[row.uuid] = row.config
    return found


def version_uses(conn: sa.Connection, uuids: Iterable[str]) -> list[sa.Row]:
    """The model versions using ``uuids`` (``checkpoint_uuid``, ``name``, ``version``), sorted."""
    mv, m = t.model_versions.c, t.models.c
    return list(conn.execute(sa.select(mv.checkpoint_uuid, m.name, mv.version)
                             .join(t.models, m.id == mv.model_id)
                             .where(mv.checkpoint_uuid.in_(sorted(uuids)))
                             .order_by(mv.checkpoint_uuid, m.name, mv.version)))


# -- trial source infos (0.38.1's trial_source_infos) ------------------------------------


def put_source_info(conn: sa.Connection, *, trial_id: int, checkpoint_uuid: str, kind: str,
                    model_id: int | None, model_version: int | None) -> None:
    """Record that ``trial_id`` used the checkpoint (a model version's, when named); a second
    report for the same pair replaces the first (0.38.1: ON CONFLICT DO UPDATE)."""
    tsi = t.trial_source_infos
    key = (tsi.c.trial_id == trial_id) & (tsi.c.checkpoint_uuid == checkpoint_uuid)
    values = {"trial_source_info_type": kind, "model_id": model_id, "model_version": model_version}
    if conn.execute(sa.update(tsi).where(key).values(**values)).rowcount == 0:
        conn.execute(sa.insert(tsi).values(trial_id=trial_id, checkpoint_uuid=checkpoint_uuid, **values))


def source_trials(conn: sa.Connection, *, checkpoint_uuid: str | None = None, model_id: int | None = None,
                  model_version: int | None = None, kind: str | None = None) -> list[int]:
    """The ids of the trials that used a checkpoint (or a model version), oldest trial first."""
    tsi = t.trial_source_infos
    q = sa.select(tsi.c.trial_id).order_by(tsi.c.trial_id)
    if checkpoint_uuid is not None:
        q = q.where(tsi.c.checkpoint_uuid == checkpoint_uuid)
    if model_id is not None:
        q = q.where(tsi.c.model_id == model_id, tsi.c.model_version == model_version)
    if kind is not None:
        q = q.where(tsi.c.trial_source_info_type == kind)
    return [int(r[0]) for r in conn.execute(q)]
