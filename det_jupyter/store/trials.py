"""The trial store: creating trials, the rows of their runs (one allocation per run) and of
their exits, and the small updates a task or a user makes.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows. ``values`` name the ``trials`` table's columns.
None decides what an exit means or raises domain errors (``services.experiments.trials``
does); state names are passed in.

The statements of every trial run are built once, here: SQLAlchemy then skips building them
and computing their cache keys on each call (a third of their cost). They never read an
experiment's searcher state (large JSON) nor its config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t

_P = sa.bindparam
# A trial with what its runs need of its experiment: its state and its owner's name.
_RUN_FACTS = (
    sa.select(t.trials, t.experiments.c.state.label("exp_state"), t.users.c.username)
    .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
    .join(t.users, t.users.c.id == t.experiments.c.owner_id)
    .where(t.trials.c.id.in_(_P("ids", expanding=True)))
)
_CKPT_STEPS = sa.select(t.checkpoints.c.steps_completed).where(t.checkpoints.c.uuid == _P("uuid"))
_START_RUN = (
    sa.update(t.trials).where(t.trials.c.id == _P("trial_id"))
    .values(run_id=_P("run_id"), total_batches=_P("steps"))
)
_END = (
    sa.update(t.trials).where(t.trials.c.id == _P("trial_id"))
    .values(state=_P("state"), end_time=_P("end_time"))
)
_REQUEST_INFO = (
    sa.select(t.trials.c.task_id, t.experiments.c.job_id, t.jobs.c.priority, t.jobs.c.resource_pool)
    .select_from(t.trials)
    .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
    .outerjoin(t.jobs, t.jobs.c.job_id == t.experiments.c.job_id)
    .where(t.trials.c.id == _P("trial_id"))
)
# The searcher's stop of a trial in none of the given states, in one statement: its id, or
# None where it did not apply.
_SEARCHER_STOP = (
    sa.update(t.trials)
    .where(t.trials.c.experiment_id == _P("exp_id"), t.trials.c.request_id == _P("stop_request"),
           t.trials.c.state.not_in(_P("unless", expanding=True)))
    .values(state=_P("state"), searcher_stopped=True)
    .returning(t.trials.c.id)
)


# -- creation and the trial's row ---------------------------------------------------------


def insert(conn: sa.Connection, /, **values: Any) -> int:
    """Store a trial (``values``: its columns); its new id."""
    return conn.execute(sa.insert(t.trials).values(**values).returning(t.trials.c.id)).scalar_one()


def get(conn: sa.Connection, trial_id: int) -> sa.Row:
    """The trial's row (NoResultFound: no such trial)."""
    return conn.execute(sa.select(t.trials).where(t.trials.c.id == trial_id)).one()


def state(conn: sa.Connection, trial_id: int) -> str:
    """The trial's state (NoResultFound: no such trial)."""
    return conn.execute(sa.select(t.trials.c.state).where(t.trials.c.id == trial_id)).scalar_one()


def update(conn: sa.Connection, trial_id: int, /, **values: Any) -> int:
    """Set the trial's columns named in ``values``; how many rows changed (0: no such trial)."""
    return conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(**values)).rowcount


def of_experiment_in_state(conn: sa.Connection, experiment_id: int, state_: str) -> list[sa.Row]:
    """The experiment's trials in ``state_``."""
    return list(conn.execute(
        sa.select(t.trials).where(t.trials.c.experiment_id == experiment_id, t.trials.c.state == state_)
    ).all())


def of_experiment_not_in(conn: sa.Connection, experiment_id: int, states: Sequence[str]) -> list[sa.Row]:
    """The experiment's trials in none of ``states``."""
    return list(conn.execute(
        sa.select(t.trials).where(
            t.trials.c.experiment_id == experiment_id, t.trials.c.state.not_in(list(states))
        )
    ).all())


def in_states_with_config(conn: sa.Connection, states: Sequence[str]) -> list[sa.Row]:
    """Every trial in ``states``, each with its experiment's ``config``."""
    return list(conn.execute(
        sa.select(t.trials, t.experiments.c.config)
        .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
        .where(t.trials.c.state.in_(list(states)))
    ).all())


# -- runs -----------------------------------------------------------------------------------


def request_info(conn: sa.Connection, trial_id: int) -> sa.Row:
    """What asking for the trial's next allocation needs: ``task_id``, its experiment's
    ``job_id``, and that job's ``priority`` and ``resource_pool`` (None without a job)."""
    return conn.execute(_REQUEST_INFO, {"trial_id": trial_id}).one()


def open_allocation(conn: sa.Connection, trial_id: int, terminated: str) -> str | None:
    """The id of the trial's allocation not in state ``terminated`` (None: it has none)."""
    return conn.execute(
        sa.select(t.allocations.c.allocation_id).where(
            t.allocations.c.trial_id == trial_id,
            t.allocations.c.state != terminated,
        )
    ).scalar()


def run_facts(conn: sa.Connection, trial_ids: Sequence[int]) -> list[sa.Row]:
    """The trials' rows, each with its experiment's state (``exp_state``) and its owner's
    ``username``: one statement whatever their number."""
    return list(conn.execute(_RUN_FACTS, {"ids": list(trial_ids)}))


def checkpoint_steps(conn: sa.Connection, uuid: str) -> int | None:
    """The steps completed at checkpoint ``uuid`` (None: no such checkpoint)."""
    return conn.execute(_CKPT_STEPS, {"uuid": uuid}).scalar()


def archive_reports_after(conn: sa.Connection, trial_id: int, steps: int) -> None:
    """Archive the trial's metric reports past ``steps`` (an earlier run's, to be reported again)."""
    conn.execute(
        sa.update(t.metrics)
        .where(t.metrics.c.trial_id == trial_id, t.metrics.c.steps_completed > steps)
        .values(archived=True)
    )


def start_runs(conn: sa.Connection, starts: list[dict[str, Any]]) -> None:
    """Record new runs (``trial_id``, ``run_id``, ``steps``: the checkpoint's steps, the
    trial's total batches now), in one statement (executemany)."""
    conn.execute(_START_RUN, starts)


def end(conn: sa.Connection, ends: dict[str, Any] | list[dict[str, Any]]) -> None:
    """End trials: each of ``ends`` gives ``trial_id``, ``state`` and ``end_time`` (a list:
    one statement, executemany)."""
    conn.execute(_END, ends)


def searcher_stop(conn: sa.Connection, experiment_id: int, request_id: str, *, state_: str,
                  unless: Sequence[str]) -> int | None:
    """Put the experiment's trial of ``request_id`` in ``state_``, searcher-stopped, unless it
    is in one of ``unless``; its id, or None where nothing changed."""
    return conn.execute(_SEARCHER_STOP, {"exp_id": experiment_id, "stop_request": request_id,
                                         "unless": list(unless), "state": state_}).scalar()
