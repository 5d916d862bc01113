"""The experiment store: experiments, their contexts and jobs, the rows their lifecycle reads
and writes, the bulk selection of a project's experiments, and the checkpoints a warm start
names.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows. ``values`` name the ``experiments`` table's columns.
None decides policy (which state may follow which, who may act) or raises domain errors:
``services.experiments`` does. State names are passed in (``ended``: the terminal states'
values, ``stopping``: the stopping states'), as the services' state tables hold them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t

# -- experiments --------------------------------------------------------------------------


def project_exists(conn: sa.Connection, project_id: int) -> bool:
    """Whether a project of that id is stored."""
    return conn.execute(sa.select(t.projects.c.id).where(t.projects.c.id == project_id)).first() is not None


def insert(conn: sa.Connection, /, **values: Any) -> int:
    """Store an experiment (``values``: its columns); its new id."""
    return conn.execute(sa.insert(t.experiments).values(**values).returning(t.experiments.c.id)).scalar_one()


def insert_context(conn: sa.Connection, experiment_id: int, tgz: bytes) -> None:
    """Store the experiment's context archive."""
    conn.execute(sa.insert(t.experiment_contexts).values(experiment_id=experiment_id, tgz=tgz))


def insert_job(conn: sa.Connection, /, **values: Any) -> None:
    """Store a job (``values``: the ``jobs`` table's columns)."""
    conn.execute(sa.insert(t.jobs).values(**values))


def update(conn: sa.Connection, experiment_id: int, /, **values: Any) -> None:
    """Set the experiment's columns named in ``values``."""
    conn.execute(sa.update(t.experiments).where(t.experiments.c.id == experiment_id).values(**values))


def get(conn: sa.Connection, experiment_id: int) -> sa.Row | None:
    """The experiment's row (None: no such experiment)."""
    return conn.execute(sa.select(t.experiments).where(t.experiments.c.id == experiment_id)).first()


def id_and_state(conn: sa.Connection, experiment_id: int) -> sa.Row | None:
    """The experiment's ``id`` and ``state`` (None: no such experiment)."""
    return conn.execute(sa.select(t.experiments.c.id, t.experiments.c.state)
                        .where(t.experiments.c.id == experiment_id)).first()


def context_tgz(conn: sa.Connection, experiment_id: int) -> bytes | None:
    """The experiment's context archive (None: it has none)."""
    return conn.execute(
        sa.select(t.experiment_contexts.c.tgz).where(t.experiment_contexts.c.experiment_id == experiment_id)
    ).scalar()


def state(conn: sa.Connection, experiment_id: int) -> str:
    """The experiment's state (NoResultFound: no such experiment)."""
    return conn.execute(sa.select(t.experiments.c.state).where(t.experiments.c.id == experiment_id)).scalar_one()


def states(conn: sa.Connection, experiment_ids: Sequence[int]) -> dict[int, str]:
    """{experiment: state} of those of ``experiment_ids`` that are stored."""
    return dict(conn.execute(sa.select(t.experiments.c.id, t.experiments.c.state)
                             .where(t.experiments.c.id.in_(list(experiment_ids)))).all())


def config(conn: sa.Connection, experiment_id: int) -> dict:
    """The experiment's expanded config (NoResultFound: no such experiment)."""
    return conn.execute(sa.select(t.experiments.c.config).where(t.experiments.c.id == experiment_id)).scalar_one()


def end_facts(conn: sa.Connection, experiment_ids: Sequence[int], *, ended: Sequence[str],
              stopping: Sequence[str]) -> list[sa.Row]:
    """Per experiment: ``id``, ``state``, ``searcher_shutdown`` and ``live`` (whether a trial
    of it is in none of the ``ended`` states). Whether a trial can still run is only asked
    when the answer matters (the experiment is ``stopping`` or its search is over): it reads
    the experiment's trials; otherwise ``live`` is false."""
    e = t.experiments.c
    live = sa.exists().where(t.trials.c.experiment_id == e.id, t.trials.c.state.not_in(list(ended)))
    return list(conn.execute(sa.select(
        e.id, e.state, e.searcher_shutdown,
        sa.case((sa.or_(e.state.in_(list(stopping)), e.searcher_shutdown), live),
                else_=sa.false()).label("live"),
    ).where(e.id.in_(list(experiment_ids)))).all())


def ids_not_in(conn: sa.Connection, states_: Sequence[str]) -> list[int]:
    """The ids of the experiments in none of ``states_``."""
    return list(conn.execute(
        sa.select(t.experiments.c.id).where(t.experiments.c.state.not_in(list(states_)))
    ).scalars())


def of_project(
    conn: sa.Connection, project_id: int, *, ids: Sequence[int] | None = None, name: str | None = None,
    description: str | None = None, archived: bool | None = None, states_: Sequence[str] = (),
    user_ids: Sequence[int] = (), excluded: Sequence[int] = (),
) -> list[sa.Row]:
    """The project's experiments (``id``, ``labels``) by id: those of ``ids`` when given, and
    only those matching every filter given (``name``, ``description``: substrings)."""
    e = t.experiments.c
    q = sa.select(e.id, e.labels).where(e.project_id == project_id).order_by(e.id)
    if ids is not None:
        q = q.where(e.id.in_(ids))
    if name:
        q = q.where(e.name.contains(name, autoescape=True))
    if description:
        q = q.where(e.description.contains(description, autoescape=True))
    if archived is not None:
        q = q.where(e.archived.is_(archived))
    if states_:
        q = q.where(e.state.in_(states_))
    if user_ids:
        q = q.where(e.owner_id.in_(user_ids))
    if excluded:
        q = q.where(e.id.not_in(excluded))
    return list(conn.execute(q).all())


# -- warm start -----------------------------------------------------------------------------


def latest_completed_checkpoint(conn: sa.Connection, trial_id: int) -> str | None:
    """The uuid of the trial's latest COMPLETED checkpoint (the most steps, then the newest);
    None: it has none."""
    c = t.checkpoints.c
    return conn.execute(
        sa.select(c.uuid).where(c.trial_id == trial_id, c.state == "COMPLETED")
        .order_by(c.steps_completed.desc(), c.report_time.desc()).limit(1)).scalar()


def completed_checkpoint(conn: sa.Connection, uuid: str) -> str | None:
    """``uuid`` if it names a COMPLETED checkpoint, else None."""
    c = t.checkpoints.c
    return conn.execute(sa.select(c.uuid).where(c.uuid == uuid, c.state == "COMPLETED")).scalar()
