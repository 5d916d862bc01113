"""The unmanaged (core_v2) store: what the experiments and trials of processes off the cluster
need beyond ``store.experiments`` and ``store.trials`` — lookups by external id, a trial with
its experiment's kind, where a continued run resumes, the rewind of an earlier run's reports,
and the trials whose heartbeat stopped.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; state names are passed in. Which states follow which, and the domain errors, are
``services.experiments.unmanaged``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from . import _tables as t

# -- experiments ----------------------------------------------------------------------------


def experiment_by_external_id(conn: sa.Connection, external_id: str) -> int | None:
    """The id of the experiment of that external id (None: there is none)."""
    return conn.execute(sa.select(t.experiments.c.id)
                        .where(t.experiments.c.external_experiment_id == external_id)).scalar()


def experiment_is_unmanaged(conn: sa.Connection, experiment_id: int) -> bool | None:
    """Whether the experiment is unmanaged (None: no such experiment)."""
    return conn.execute(sa.select(t.experiments.c.unmanaged)
                        .where(t.experiments.c.id == experiment_id)).scalar()


def end_open_trials(conn: sa.Connection, experiment_id: int, state: str, end_time: float,
                    ended: Sequence[str]) -> None:
    """End the experiment's trials in none of the ``ended`` states: in ``state`` at ``end_time``."""
    conn.execute(sa.update(t.trials).where(
        t.trials.c.experiment_id == experiment_id, t.trials.c.state.not_in(list(ended)),
    ).values(state=state, end_time=end_time))


# -- trials ---------------------------------------------------------------------------------


def trial_by_external_id(conn: sa.Connection, experiment_id: int, external_id: str) -> int | None:
    """The id of the experiment's trial of that external id (None: there is none)."""
    return conn.execute(sa.select(t.trials.c.id).where(
        t.trials.c.experiment_id == experiment_id, t.trials.c.external_trial_id == external_id)).scalar()


def trial_with_kind(conn: sa.Connection, trial_id: int) -> sa.Row | None:
    """The trial's ``id``, ``run_id``, ``state``, ``experiment_id`` and whether its experiment
    is ``unmanaged`` (None: no such trial)."""
    return conn.execute(
        sa.select(t.trials.c.id, t.trials.c.run_id, t.trials.c.state, t.trials.c.experiment_id,
                  t.experiments.c.unmanaged)
        .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
        .where(t.trials.c.id == trial_id)).first()


def latest_completed(conn: sa.Connection, trial_id: int) -> sa.Row | None:
    """The trial's latest COMPLETED checkpoint (``uuid``, ``steps_completed``; the most steps,
    then the newest); None: it has none."""
    return conn.execute(
        sa.select(t.checkpoints.c.uuid, t.checkpoints.c.steps_completed)
        .where(t.checkpoints.c.trial_id == trial_id, t.checkpoints.c.state == "COMPLETED")
        .order_by(t.checkpoints.c.steps_completed.desc(), t.checkpoints.c.report_time.desc())
        .limit(1)).first()


def trial_state(conn: sa.Connection, trial_id: int) -> str | None:
    """The trial's state (None: no such trial)."""
    return conn.execute(sa.select(t.trials.c.state).where(t.trials.c.id == trial_id)).scalar()


def trial_is_unmanaged(conn: sa.Connection, trial_id: int) -> bool:
    """Whether the trial is of an unmanaged experiment (False: no such trial)."""
    return bool(conn.execute(
        sa.select(t.experiments.c.unmanaged)
        .join(t.trials, t.trials.c.experiment_id == t.experiments.c.id)
        .where(t.trials.c.id == trial_id)).scalar())


def trial_of_task(conn: sa.Connection, task_id: str) -> sa.Row | None:
    """The trial of the task (``id``, and its experiment's ``unmanaged``); None: there is none."""
    return conn.execute(
        sa.select(t.trials.c.id, t.experiments.c.unmanaged)
        .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
        .where(t.trials.c.task_id == task_id)).first()


def states_of_experiment(conn: sa.Connection, experiment_id: int) -> list[sa.Row]:
    """The experiment's trials' ``state`` and ``end_time``."""
    return list(conn.execute(sa.select(t.trials.c.state, t.trials.c.end_time)
                             .where(t.trials.c.experiment_id == experiment_id)).all())


def any_in_state(conn: sa.Connection, state: str) -> bool:
    """Whether any trial is in ``state``."""
    return conn.execute(sa.select(t.trials.c.id).where(t.trials.c.state == state).limit(1)).first() is not None


# -- a continued trial's reports ------------------------------------------------------------


def archive_earlier_runs(conn: sa.Connection, trial_id: int, run_id: int, group: str, steps: int) -> int:
    """Archive the visible reports of the trial's runs before ``run_id`` past ``steps`` (of
    ``group``: at or past it); how many."""
    m = t.metrics.c
    return conn.execute(sa.update(t.metrics).where(
        m.trial_id == trial_id, m.archived.is_(False), m.trial_run_id < run_id,
        sa.or_(m.steps_completed > steps, sa.and_(m.mgroup == group, m.steps_completed >= steps)),
    ).values(archived=True)).rowcount


def experiment_of_trial(conn: sa.Connection, trial_id: int) -> int:
    """The trial's experiment (NoResultFound: no such trial)."""
    return conn.execute(sa.select(t.trials.c.experiment_id).where(t.trials.c.id == trial_id)).scalar_one()


def last_visible_step(conn: sa.Connection, trial_id: int) -> int | None:
    """The step of the trial's last visible report (None: it has none)."""
    m = t.metrics.c
    return conn.execute(sa.select(sa.func.max(m.steps_completed))
                        .where(m.trial_id == trial_id, m.archived.is_(False))).scalar()


# -- trials whose process went away ---------------------------------------------------------


def silent_since(conn: sa.Connection, cutoff: float, running: str) -> list[sa.Row]:
    """The unmanaged trials in state ``running`` with no heartbeat, or none since ``cutoff``
    (``id``, ``experiment_id``, ``last_activity``)."""
    tr = t.trials.c
    return list(conn.execute(
        sa.select(tr.id, tr.experiment_id, tr.last_activity)
        .join(t.experiments, t.experiments.c.id == tr.experiment_id)
        .where(tr.state == running, t.experiments.c.unmanaged.is_(True),
               sa.or_(tr.last_activity.is_(None), tr.last_activity < cutoff))).all())
