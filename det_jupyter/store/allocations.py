"""The allocation store: one run of a task on a gang of slots, from its request to its end.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows of the ``allocations`` table (or the columns named).
The statements on every allocation's path (request, placement, start, exit, preempt, kill,
the scheduler's view) are built once at import: building them per call cost more than running
them on SQLite. Policy (what a state change means, who may) is the allocation service's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t

#: The allocation states as stored (``services.common.states.AllocState``'s values).
PENDING = "PENDING"
ASSIGNED = "ASSIGNED"
PULLING = "PULLING"  # its agent pulls the image its container needs
RUNNING = "RUNNING"
TERMINATING = "TERMINATING"
TERMINATED = "TERMINATED"
#: The states of an allocation that holds slots.
LIVE_STATES = (ASSIGNED, PULLING, RUNNING, TERMINATING)

_P = sa.bindparam
_A = t.allocations.c
_COUNT_OF_TASK = sa.select(sa.func.count()).select_from(t.allocations).where(_A.task_id == _P("task_id"))
_INSERT = sa.insert(t.allocations).values(
    allocation_id=_P("allocation_id"), task_id=_P("task_id"), trial_id=_P("trial_id"),
    state=PENDING, slots=_P("slots"), priority=_P("priority"),
    resource_pool=_P("resource_pool"), job_id=_P("job_id"), submitted_at=_P("submitted_at"),
    preempt_requested=False, acked_preemption=False, run_id=0, requires=_P("requires"),
)
_JOB = sa.select(t.jobs.c.priority, t.jobs.c.weight, t.jobs.c.max_slots, t.jobs.c.queue_position).where(
    t.jobs.c.job_id == _P("job_id"))
# A pass's placements: executed for all of them at once (executemany: pipelined on
# PostgreSQL), then read back by their new tokens (_ASSIGNED_BY_TOKEN): a placement whose
# allocation was no longer pending is absent.
_ASSIGN = (
    sa.update(t.allocations)
    .where(_A.allocation_id == _P("alloc_id"), _A.state == PENDING)
    .values(state=ASSIGNED, agent_id=_P("agent_id"), slot_ids=_P("slot_ids", type_=t.JSON),
            placement=_P("placement", type_=t.JSON), token_hash=_P("token_hash"),
            start_time=_P("start_time"),
            # A trial's allocation carries the run it starts (the trial's next run id).
            run_id=sa.func.coalesce(
                sa.select(t.trials.c.run_id + 1).where(t.trials.c.id == _A.trial_id).scalar_subquery(), 0))
)
_ASSIGNED_BY_TOKEN = sa.select(t.allocations).where(_A.token_hash.in_(_P("hashes", expanding=True)))
# A turn's exits with one outcome (exit code and reason), at once: the rows it ended.
_TERMINATE = (
    sa.update(t.allocations)
    .where(_A.allocation_id.in_(_P("ids", expanding=True)), _A.state != TERMINATED)
    .values(state=TERMINATED, exit_code=_P("exit_code"),
            exit_reason=_P("exit_reason"), token_hash=None, end_time=_P("end_time"))
    .returning(*t.allocations.c)
)
_RUNNING = (
    sa.update(t.allocations)
    .where(_A.allocation_id.in_(_P("ids", expanding=True)), _A.state.in_([ASSIGNED, PULLING]))
    .values(state=RUNNING)
)
_PULLING = (
    sa.update(t.allocations)
    .where(_A.allocation_id == _P("target"), _A.state == ASSIGNED)
    .values(state=PULLING)
)
# Preempt and kill, each one statement where the allocation has started: a pending one ends
# instead, an ended one stays as it is.
_STARTED = sa.and_(t.allocations.c.allocation_id == sa.bindparam("target"),
                   t.allocations.c.state.not_in([PENDING, TERMINATED]))
_ASK_TO_STOP = sa.update(t.allocations).where(_STARTED).values(preempt_requested=True)
_TERMINATE_STARTED = (sa.update(t.allocations).where(_STARTED, t.allocations.c.agent_id.is_not(None))
                      .values(state=TERMINATING).returning(*t.allocations.c))
# Allocations in some states as the scheduler sees them, with their job's queue fields.
_VIEW_ROWS = (
    sa.select(
        t.allocations.c.allocation_id, t.allocations.c.state, t.allocations.c.slots, t.allocations.c.priority,
        t.allocations.c.resource_pool, t.allocations.c.submitted_at, t.allocations.c.job_id,
        t.allocations.c.trial_id, t.allocations.c.agent_id, t.allocations.c.slot_ids,
        t.allocations.c.placement, t.allocations.c.preempt_requested, t.allocations.c.requires,
        t.jobs.c.priority.label("job_priority"), t.jobs.c.weight, t.jobs.c.max_slots, t.jobs.c.queue_position,
    )
    .select_from(t.allocations.outerjoin(t.jobs, t.jobs.c.job_id == t.allocations.c.job_id))
    .where(t.allocations.c.state.in_(sa.bindparam("states", expanding=True)))
)
# The users columns a User is made of, read with a task's allocation (``principal``).
_OWNER_COLUMNS = [t.users.c[name] for name in ("id", "username", "admin", "active", "display_name", "modified_at")]


# -- requests -----------------------------------------------------------------------------


def count_of_task(conn: sa.Connection, task_id: str) -> int:
    """How many allocations the task has had."""
    return conn.execute(_COUNT_OF_TASK, {"task_id": task_id}).scalar_one()


def insert_pending(
    conn: sa.Connection, *, allocation_id: str, task_id: str, trial_id: int | None, slots: int,
    priority: int, resource_pool: str, job_id: str | None, submitted_at: float,
    requires: frozenset[str] = frozenset(),
) -> None:
    """Store a PENDING allocation (``requires``: the agent features it needs)."""
    conn.execute(_INSERT, {
        "allocation_id": allocation_id, "task_id": task_id, "trial_id": trial_id,
        "slots": slots, "priority": priority, "resource_pool": resource_pool, "job_id": job_id,
        "submitted_at": submitted_at, "requires": ",".join(sorted(requires)) or None,
    })


def job_settings(conn: sa.Connection, job_id: str) -> sa.Row | None:
    """A job's ``priority``, ``weight``, ``max_slots`` and ``queue_position`` (None: no job)."""
    return conn.execute(_JOB, {"job_id": job_id}).first()


def pending(conn: sa.Connection) -> list[sa.Row]:
    """The PENDING allocations."""
    return list(conn.execute(sa.select(t.allocations).where(t.allocations.c.state == PENDING)))


def get(conn: sa.Connection, allocation_id: str) -> sa.Row | None:
    """The allocation's row (None: no such allocation)."""
    return conn.execute(sa.select(t.allocations).where(t.allocations.c.allocation_id == allocation_id)).first()


# -- placement and running ----------------------------------------------------------------


def assign(conn: sa.Connection, placements: Sequence[Mapping[str, Any]]) -> None:
    """Mark pending allocations ASSIGNED, in one statement (executemany). Each placement:
    ``alloc_id``, ``agent_id`` and ``slot_ids`` (the chief's), ``placement`` (``[[agent,
    slot ids], ...]``), ``token_hash``, ``start_time``. One whose allocation is no longer
    pending changes nothing; ``assigned_by_token`` reads what did."""
    conn.execute(_ASSIGN, list(placements))


def assigned_by_token(conn: sa.Connection, token_hashes: Sequence[str]) -> list[sa.Row]:
    """The allocations holding any of ``token_hashes`` (in no particular order)."""
    return list(conn.execute(_ASSIGNED_BY_TOKEN, {"hashes": list(token_hashes)}))


def mark_pulling(conn: sa.Connection, allocation_id: str) -> bool:
    """An ASSIGNED allocation becomes PULLING (its agent pulls its image); False otherwise."""
    return conn.execute(_PULLING, {"target": allocation_id}).rowcount == 1


def mark_running(conn: sa.Connection, allocation_ids: Sequence[str]) -> None:
    """ASSIGNED or PULLING allocations of ``allocation_ids`` become RUNNING (others stay)."""
    conn.execute(_RUNNING, {"ids": list(allocation_ids)})


def terminate(conn: sa.Connection, allocation_ids: Sequence[str], exit_code: int | None,
              exit_reason: str | None, end_time: float) -> list[sa.Row]:
    """End the allocations of ``allocation_ids`` that had not ended, with one outcome (their
    token is dropped); the rows it ended, as they are now."""
    return list(conn.execute(_TERMINATE, {"ids": list(allocation_ids), "exit_code": exit_code,
                                          "exit_reason": exit_reason, "end_time": end_time}))


def ask_to_stop(conn: sa.Connection, allocation_id: str) -> bool:
    """Mark a started allocation (neither pending nor ended) asked to stop; whether it was one."""
    return bool(conn.execute(_ASK_TO_STOP, {"target": allocation_id}).rowcount)


def terminate_started(conn: sa.Connection, allocation_id: str) -> sa.Row | None:
    """A started allocation on an agent becomes TERMINATING; its row (None: it is pending,
    has ended, or has no agent)."""
    return conn.execute(_TERMINATE_STARTED, {"target": allocation_id}).first()


def ack_preemption(conn: sa.Connection, allocation_id: str) -> bool:
    """Note that the task acknowledged its preemption; False where it has ended (or is unknown)."""
    return bool(conn.execute(
        sa.update(t.allocations)
        .where(
            t.allocations.c.allocation_id == allocation_id,
            t.allocations.c.state != TERMINATED,
        )
        .values(acked_preemption=True)
    ).rowcount)


# -- reads --------------------------------------------------------------------------------


def principal(conn: sa.Connection, token_hash: str) -> sa.Row | None:
    """The allocation holding ``token_hash``: ``allocation_id``, ``task_id``, ``trial_id``,
    ``state``, ``experiment_id``, ``owner_id`` (its experiment's or command's owner) and that
    owner's user columns (``id``, ``username``, ``admin``, ``active``, ``display_name``,
    ``modified_at``; None where the owner is unknown). None: no allocation holds it."""
    return conn.execute(
        sa.select(
            t.allocations.c.allocation_id,
            t.allocations.c.task_id,
            t.allocations.c.trial_id,
            t.allocations.c.state,
            t.trials.c.experiment_id,
            sa.func.coalesce(t.experiments.c.owner_id, t.commands.c.owner_id).label("owner_id"),
            *_OWNER_COLUMNS,
        )
        .select_from(t.allocations)
        .join(t.trials, t.trials.c.id == t.allocations.c.trial_id, isouter=True)
        .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id, isouter=True)
        .join(t.commands, t.commands.c.task_id == t.allocations.c.task_id, isouter=True)
        .join(t.users, t.users.c.id == sa.func.coalesce(t.experiments.c.owner_id, t.commands.c.owner_id),
              isouter=True)
        .where(t.allocations.c.token_hash == token_hash)
    ).first()


def live(conn: sa.Connection) -> list[sa.Row]:
    """The allocations that hold slots (``LIVE_STATES``)."""
    return list(conn.execute(sa.select(t.allocations).where(t.allocations.c.state.in_(list(LIVE_STATES)))))


def task_active(conn: sa.Connection, task_id: str) -> bool:
    """Whether the task has an allocation that has not ended."""
    return conn.execute(
        sa.select(t.allocations.c.allocation_id).where(
            t.allocations.c.task_id == task_id,
            t.allocations.c.state != TERMINATED,
        ).limit(1)
    ).first() is not None


def view_rows(conn: sa.Connection, states: Sequence[str]) -> list[sa.Row]:
    """The allocations in ``states`` as the scheduler sees them: their placement and request
    columns, with their job's ``job_priority``, ``weight``, ``max_slots``, ``queue_position``
    (None where they have no job)."""
    return list(conn.execute(_VIEW_ROWS, {"states": list(states)}))


# -- a master restart ---------------------------------------------------------------------


def unfinished(conn: sa.Connection) -> list[sa.Row]:
    """The allocations that have not ended (pending ones included)."""
    return list(conn.execute(sa.select(t.allocations).where(t.allocations.c.state != TERMINATED)))


def end_after_restart(conn: sa.Connection, allocation_id: str, end_time: float) -> None:
    """End an allocation that the master's restart orphaned (its token is dropped)."""
    conn.execute(
        sa.update(t.allocations)
        .where(t.allocations.c.allocation_id == allocation_id)
        .values(
            state=TERMINATED,
            exit_reason="the master restarted",
            token_hash=None,
            end_time=end_time,
        )
    )
