"""The round-robin policy: jobs take turns, one request each per turn.

As in Determined: per pool, jobs are ordered by the slots they already hold (fewest first),
then by when they were submitted; each turn every job offers its oldest pending request and
it is placed if it fits. A job whose request does not fit sits out the rest of the pass, so
its requests stay FIFO. No preemption. Zero-slot tasks are placed FIFO, apart.
"""

from __future__ import annotations

from collections import defaultdict, deque

from ._model import Decisions, Request, Snapshot, submission_key
from ._pool import PoolState, run_pools


def schedule_round_robin(
    snapshot: Snapshot, now: float, *, fitting: str = "best", span_agents: bool = True
) -> Decisions:
    """One pass of the round-robin policy over every pool of the snapshot."""
    del now
    return run_pools(
        snapshot, fitting=fitting, span=span_agents, order=submission_key,
        slots_pass=lambda state, queue: _take_turns(state, [r for r in queue if state.feasible(r)]),
    )


def _take_turns(state: PoolState, pending: list[Request]) -> None:
    queues: dict[str, deque[Request]] = defaultdict(deque)
    for req in pending:
        queues[req.job].append(req)
    first = {job: queue[0].submitted_at for job, queue in queues.items()}
    for run in state.running:
        if run.job in first:
            first[run.job] = min(first[run.job], run.submitted_at)
    turn = sorted(queues, key=lambda job: (state.held[job], first[job], job))
    while turn:
        still = []
        for job in turn:
            req = queues[job].popleft()
            if state.under_max(req) and state.place(req):
                if queues[job]:
                    still.append(job)
        turn = still
