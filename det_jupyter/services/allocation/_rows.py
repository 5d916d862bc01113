"""Allocation rows: the statements on every allocation's path, built once, and how a row
reads as the scheduler's Request or Running."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ... import scheduler
from ...store import tables as t
from ..common.states import AllocState

# The statements of every allocation's life, built once (see trials._P).
_P = sa.bindparam
_A = t.allocations.c
COUNT_OF_TASK = sa.select(sa.func.count()).select_from(t.allocations).where(_A.task_id == _P("task_id"))
INSERT = sa.insert(t.allocations).values(
    allocation_id=_P("allocation_id"), task_id=_P("task_id"), trial_id=_P("trial_id"),
    state=AllocState.PENDING.value, slots=_P("slots"), priority=_P("priority"),
    resource_pool=_P("resource_pool"), job_id=_P("job_id"), submitted_at=_P("submitted_at"),
    preempt_requested=False, acked_preemption=False, run_id=0,
)
JOB = sa.select(t.jobs.c.priority, t.jobs.c.weight, t.jobs.c.max_slots, t.jobs.c.queue_position).where(
    t.jobs.c.job_id == _P("job_id"))
# A pass's placements: executed for all of them at once (executemany: pipelined on
# PostgreSQL), then read back by their new tokens (ASSIGNED_BY_TOKEN): a placement whose
# allocation was no longer pending is absent.
ASSIGN = (
    sa.update(t.allocations)
    .where(_A.allocation_id == _P("alloc_id"), _A.state == AllocState.PENDING.value)
    .values(state=AllocState.ASSIGNED.value, agent_id=_P("agent_id"), slot_ids=_P("slot_ids", type_=t.JSON),
            placement=_P("placement", type_=t.JSON), token_hash=_P("token_hash"),
            start_time=_P("start_time"),
            # A trial's allocation carries the run it starts (the trial's next run id).
            run_id=sa.func.coalesce(
                sa.select(t.trials.c.run_id + 1).where(t.trials.c.id == _A.trial_id).scalar_subquery(), 0))
)
ASSIGNED_BY_TOKEN = sa.select(t.allocations).where(_A.token_hash.in_(_P("hashes", expanding=True)))
# A turn's exits with one outcome (exit code and reason), at once: the rows it ended.
TERMINATE = (
    sa.update(t.allocations)
    .where(_A.allocation_id.in_(_P("ids", expanding=True)), _A.state != AllocState.TERMINATED.value)
    .values(state=AllocState.TERMINATED.value, exit_code=_P("exit_code"),
            exit_reason=_P("exit_reason"), token_hash=None, end_time=_P("end_time"))
    .returning(*t.allocations.c)
)
RUNNING = (
    sa.update(t.allocations)
    .where(_A.allocation_id.in_(_P("ids", expanding=True)), _A.state == AllocState.ASSIGNED.value)
    .values(state=AllocState.RUNNING.value)
)


LIVE_STATES = (AllocState.ASSIGNED.value, AllocState.RUNNING.value, AllocState.TERMINATING.value)


def as_request(r: Any) -> scheduler.Request:
    return scheduler.Request(
        r.allocation_id, r.slots, r.job_priority if r.job_priority is not None else r.priority,
        r.queue_position if r.queue_position is not None else r.submitted_at, r.resource_pool,
        job_id=r.job_id or "", weight=r.weight or 1.0, preemptible=r.trial_id is not None,
        max_slots=r.max_slots,
    )


def as_running(r: Any) -> scheduler.Running:
    return scheduler.Running(
        r.allocation_id, r.job_id or "",
        tuple(scheduler.Placement(agent, tuple(ids)) for agent, ids in placement_of(r)),
        r.job_priority if r.job_priority is not None else r.priority,
        r.queue_position if r.queue_position is not None else r.submitted_at, r.resource_pool,
        weight=r.weight or 1.0, preemptible=r.trial_id is not None,
        preempting=bool(r.preempt_requested),
    )


def placement_of(alloc: Any) -> list[tuple[str, list[int]]]:
    """Every container's agent and slots (older rows have only agent_id and slot_ids)."""
    if alloc.placement:
        return [(str(agent), [int(i) for i in ids]) for agent, ids in alloc.placement]
    if alloc.agent_id:
        return [(alloc.agent_id, list(alloc.slot_ids or []))]
    return []


def agents_of(alloc: Any) -> list[str]:
    return [agent for agent, _ in placement_of(alloc)]
