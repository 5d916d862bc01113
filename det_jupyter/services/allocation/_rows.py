"""How an allocation row (``store.allocations.view_rows``) reads as the scheduler's Request or
Running, and where its containers are."""

from __future__ import annotations

from typing import Any

from ... import scheduler


def as_request(r: Any) -> scheduler.Request:
    return scheduler.Request(
        r.allocation_id, r.slots, r.job_priority if r.job_priority is not None else r.priority,
        r.queue_position if r.queue_position is not None else r.submitted_at, r.resource_pool,
        job_id=r.job_id or "", weight=r.weight or 1.0, preemptible=r.trial_id is not None,
        max_slots=r.max_slots, requires=requires_of(r.requires),
    )


def requires_of(stored: str | None) -> frozenset[str]:
    """The agent features an allocation row's ``requires`` column names."""
    return frozenset(stored.split(",")) if stored else frozenset()


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
