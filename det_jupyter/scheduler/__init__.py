"""Pure scheduling policies: ``(snapshot, now) -> decisions``. No I/O, no clock reads.

``make_policy(name)`` gives one of :data:`POLICIES` configured as an admin would
(``resource_manager.scheduler``: ``type``, ``fitting_policy``, ``preemption``);
the master runs each pool's configured policy (``rm/agents.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ._fair_share import JobDemand, fair_shares, ideal_shares, schedule_fair_share
from ._fit import FITTINGS, check_fitting, fit
from ._model import (
    DEFAULT_POOL,
    AgentSlots,
    Decisions,
    Placement,
    Request,
    Running,
    Snapshot,
    pool_of,
    queue_key,
)
from ._priority import schedule_priority
from ._reasons import wait_reason
from ._round_robin import schedule_round_robin

Policy = Callable[[Snapshot, float], Decisions]

POLICIES: dict[str, Callable[..., Decisions]] = {
    "priority": schedule_priority,
    "fair_share": schedule_fair_share,
    "round_robin": schedule_round_robin,
}


def make_policy(
    name: str = "priority", *, fitting: str = "best", preemption: bool | None = None
) -> Policy:
    """The named policy as a pure ``(snapshot, now) -> Decisions`` function.

    ``preemption`` defaults as in Determined: off for priority, on for fair share;
    round robin never preempts.
    """
    if name not in POLICIES:
        raise ValueError(f"scheduler type must be one of {', '.join(POLICIES)}, got {name!r}")
    check_fitting(fitting)
    if name == "round_robin":
        if preemption:
            raise ValueError("the round_robin scheduler does not preempt; preemption must be false")
        return partial(schedule_round_robin, fitting=fitting)
    if preemption is None:
        preemption = name == "fair_share"
    return partial(POLICIES[name], fitting=fitting, preemption=preemption)


__all__ = [
    "DEFAULT_POOL",
    "FITTINGS",
    "POLICIES",
    "AgentSlots",
    "Decisions",
    "JobDemand",
    "Placement",
    "Policy",
    "Request",
    "Running",
    "Snapshot",
    "fair_shares",
    "fit",
    "ideal_shares",
    "make_policy",
    "pool_of",
    "queue_key",
    "schedule_fair_share",
    "schedule_priority",
    "schedule_round_robin",
    "wait_reason",
]
