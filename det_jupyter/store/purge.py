"""The rows of deleting experiments for good: what may block the delete, what it finds to
remove, and the deletes, children before parents so the foreign keys hold on both databases.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and lists
of ids short enough for one IN list (the caller chunks them); none decides what may be deleted
or raises domain errors (``services.experiments.purge`` does).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from . import _tables as t
from .metrics import delete_of_trials as _delete_metrics_of_trials

# -- what blocks a delete -------------------------------------------------------------------


def not_in_states(conn: sa.Connection, experiment_ids: Sequence[int], states: Sequence[str]) -> list[sa.Row]:
    """Those of the experiments in none of ``states`` (``id``, ``state``), by id."""
    return list(conn.execute(sa.select(t.experiments.c.id, t.experiments.c.state)
                             .where(t.experiments.c.id.in_(experiment_ids), t.experiments.c.state.not_in(states))
                             .order_by(t.experiments.c.id)).all())


def with_allocation_not_in(conn: sa.Connection, experiment_ids: Sequence[int], terminated: str) -> int | None:
    """One of the experiments that has a trial with an allocation not in state ``terminated``
    (None: none has)."""
    return conn.execute(
        sa.select(t.trials.c.experiment_id)
        .join(t.allocations, t.allocations.c.trial_id == t.trials.c.id)
        .where(t.trials.c.experiment_id.in_(experiment_ids), t.allocations.c.state != terminated)
        .limit(1)).scalar()


def registered_checkpoint(conn: sa.Connection, experiment_ids: Sequence[int]) -> sa.Row | None:
    """A checkpoint of the experiments that is a model version (``experiment_id`` and the
    model's ``name``); None: there is none."""
    return conn.execute(
        sa.select(t.checkpoints.c.experiment_id, t.models.c.name)
        .join(t.model_versions, t.model_versions.c.checkpoint_uuid == t.checkpoints.c.uuid)
        .join(t.models, t.models.c.id == t.model_versions.c.model_id)
        .where(t.checkpoints.c.experiment_id.in_(experiment_ids)).limit(1)).first()


# -- what a delete removes ------------------------------------------------------------------


def experiments(conn: sa.Connection, experiment_ids: Sequence[int]) -> list[sa.Row]:
    """The experiments (``id``, ``job_id``, ``config``)."""
    return list(conn.execute(sa.select(t.experiments.c.id, t.experiments.c.job_id, t.experiments.c.config)
                             .where(t.experiments.c.id.in_(experiment_ids))).all())


def trials(conn: sa.Connection, experiment_ids: Sequence[int]) -> list[sa.Row]:
    """The experiments' trials (``id``, ``task_id``)."""
    return list(conn.execute(sa.select(t.trials.c.id, t.trials.c.task_id)
                             .where(t.trials.c.experiment_id.in_(experiment_ids))).all())


def checkpoints_with_storage(conn: sa.Connection, experiment_ids: Sequence[int],
                             trial_ids: Sequence[int]) -> list[sa.Row]:
    """The checkpoints of the experiments or of the trials (``uuid``, ``experiment_id``, and
    their storage's ``config``: None where they name none)."""
    cond: sa.ColumnElement[bool] = t.checkpoints.c.experiment_id.in_(experiment_ids)
    if trial_ids:
        cond = sa.or_(cond, t.checkpoints.c.trial_id.in_(trial_ids))
    return list(conn.execute(
        sa.select(t.checkpoints.c.uuid, t.checkpoints.c.experiment_id, t.checkpoint_storages.c.config)
        .outerjoin(t.checkpoint_storages, t.checkpoint_storages.c.id == t.checkpoints.c.storage_id)
        .where(cond)).all())


# -- the deletes ----------------------------------------------------------------------------


def delete_of_trials(conn: sa.Connection, trial_ids: Sequence[int]) -> None:
    """Delete what the trials own: their metric storage, logs, allocations and checkpoints."""
    _delete_metrics_of_trials(conn, trial_ids)
    conn.execute(sa.delete(t.task_logs).where(t.task_logs.c.trial_id.in_(trial_ids)))
    conn.execute(sa.delete(t.allocations).where(t.allocations.c.trial_id.in_(trial_ids)))
    conn.execute(sa.delete(t.checkpoints).where(t.checkpoints.c.trial_id.in_(trial_ids)))


def delete_task_logs(conn: sa.Connection, task_ids: Sequence[str]) -> None:
    """Delete the tasks' logs."""
    conn.execute(sa.delete(t.task_logs).where(t.task_logs.c.task_id.in_(task_ids)))


def delete_experiments(conn: sa.Connection, experiment_ids: Sequence[int], job_ids: Sequence[str]) -> None:
    """Delete the experiments with their checkpoints, trials (whose own rows are gone:
    ``delete_of_trials``), searcher events and contexts, and their ``job_ids``' jobs."""
    ids = experiment_ids
    conn.execute(sa.delete(t.checkpoints).where(t.checkpoints.c.experiment_id.in_(ids)))
    conn.execute(sa.delete(t.trials).where(t.trials.c.experiment_id.in_(ids)))
    conn.execute(sa.delete(t.searcher_events).where(t.searcher_events.c.experiment_id.in_(ids)))
    conn.execute(sa.delete(t.experiment_contexts).where(t.experiment_contexts.c.experiment_id.in_(ids)))
    conn.execute(sa.delete(t.experiments).where(t.experiments.c.id.in_(ids)))
    conn.execute(sa.delete(t.jobs).where(t.jobs.c.job_id.in_(job_ids)))
