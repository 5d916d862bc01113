"""The priority policy (Determined's default): lower number first, FIFO among equals.

Per pool, slot requests are walked in queue order (priority, then submission). A request
that fits in free slots is placed. One that does not is *blocked*, and what queues behind a
blocked request may only start where it cannot delay it (Determined calls this
backfilling):

- with preemption on, a preemptible request may take any free slots, because the blocked
  request can take them back by preempting it;
- any other request only takes slots on agents that no blocked request ahead could use.

Determined starts every fitting request of the same priority regardless, so a stream of
small trials can starve a large gang of equal priority forever; here FIFO holds within a
priority too. Requests that could not run even in an empty pool (larger than the pool or
than their job's ``max_slots``) never block anything, and none is preempted for.

With preemption on, a blocked request first looks at the slots already being released: if
they (with the free ones) are enough it reserves them and waits. Otherwise it preempts
running preemptible allocations of other jobs behind it in queue order (lower priority, or
equal priority and submitted later), lowest priority first and newest first, stopping as soon as it fits
and then sparing every victim it turns out not to need. It reserves the room it will get,
so nothing behind it takes those slots while the victims checkpoint.

Zero-slot tasks are scheduled apart from slot requests and always placed when their pool
has an enabled agent.
"""

from __future__ import annotations

from ._model import Decisions, Request, Running, Snapshot, queue_key
from ._pool import PoolState, run_pools


def schedule_priority(
    snapshot: Snapshot,
    now: float,
    *,
    fitting: str = "best",
    preemption: bool = False,
    span_agents: bool = True,
) -> Decisions:
    """One pass of the priority policy over every pool of the snapshot."""
    del now  # the priority policy does not age requests
    return run_pools(snapshot, fitting=fitting, span=span_agents, order=queue_key,
                     slots_pass=lambda state, queue: _schedule_slots(state, queue, preemption))


def _schedule_slots(state: PoolState, queue: list[Request], preemption: bool) -> None:
    blocked: set[str] = set()  # agents some blocked request ahead could use
    for req in queue:
        if not state.feasible(req) or not state.under_max(req):
            continue
        where = None if not blocked or (preemption and req.preemptible) else _others(state, blocked)
        if state.place(req, where):
            continue
        if preemption and state.make_room(req, _victims_for(state, req), agents=where):
            continue
        blocked |= state.usable_agents(req)


def _others(state: PoolState, agents: set[str]) -> set[str]:
    return set(state.totals) - agents


def _victims_for(state: PoolState, req: Request) -> list[Running]:
    """Running allocations of other jobs behind ``req`` in queue order: lowest priority, newest
    first. (A job never preempts itself: its allocations share its place in the queue.)"""
    behind = [run for run in state.running if run.job != req.job and queue_key(run) > queue_key(req)]
    return sorted(behind, key=lambda run: (-run.priority, -run.submitted_at, run.allocation_id))
