"""Queries of log retention: trials' retention days and their ended tasks' logs."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from . import _tables as t


def set_for_experiment(conn: sa.Connection, experiment_id: int, days: int) -> int:
    """Every trial of the experiment keeps its logs ``days`` after it ends; how many trials."""
    return conn.execute(sa.update(t.trials).where(t.trials.c.experiment_id == experiment_id)
                        .values(log_retention_days=days)).rowcount


def set_for_trial(conn: sa.Connection, trial_id: int, days: int) -> int:
    """The trial keeps its logs ``days`` after it ends; 0: no such trial."""
    return conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id)
                        .values(log_retention_days=days)).rowcount


def ended_trials(conn: sa.Connection) -> list[sa.Row]:
    """Ended trials (``task_id``, ``end_time``, ``log_retention_days``, and the experiment's
    ``config``)."""
    j = t.trials.join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
    return list(conn.execute(
        sa.select(t.trials.c.task_id, t.trials.c.end_time, t.trials.c.log_retention_days,
                  t.experiments.c.config).select_from(j).where(t.trials.c.end_time.is_not(None))).all())


def delete_logs(conn: sa.Connection, task_ids: Sequence[str]) -> int:
    """Delete the tasks' log lines; how many."""
    return conn.execute(sa.delete(t.task_logs).where(t.task_logs.c.task_id.in_(task_ids))).rowcount
