"""The records every policy reads and writes: a snapshot of one moment in, decisions out.

Frozen dataclasses, so a policy cannot change the master's view by accident. Fields added
after the first version all have defaults: the master built before issue 5 keeps working.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

DEFAULT_POOL = "default"


def pool_of(name: str) -> str:
    """The pool a request or agent names, with "" meaning the default pool."""
    return name or DEFAULT_POOL


class Placement(NamedTuple):
    """The slots an allocation gets (or holds) on one agent; zero-slot tasks get ``()``."""

    agent_id: str
    slot_ids: tuple[int, ...]


class _Owned:
    """What a request and a running allocation share: the job they belong to (themselves when
    they name none) and their pool. Both are plain attributes set once at construction, since
    a pass over a long queue reads them hundreds of thousands of times."""

    allocation_id: str
    job_id: str
    resource_pool: str
    job: str
    pool: str

    def _derive(self) -> None:
        object.__setattr__(self, "job", self.job_id or self.allocation_id)
        object.__setattr__(self, "pool", pool_of(self.resource_pool))


@dataclass(frozen=True)
class Request(_Owned):
    """A pending allocation request.

    ``submitted_at`` orders requests of equal priority (earlier first) and is kept when a
    preempted allocation is queued again, so it resumes in its old place. ``job_id`` groups
    the allocations of one experiment ("" = the allocation is a job of its own); ``weight``
    and ``max_slots`` are the job's. A ``preemptible`` request (a trial) may be backfilled
    where a non-preemptible one (a notebook, a command) must wait. ``requires`` names the
    agent features it needs (``"docker"``: a task with its own image), every one of them.
    """

    allocation_id: str
    slots: int
    priority: int
    submitted_at: float
    resource_pool: str = ""
    job_id: str = ""
    weight: float = 1.0
    preemptible: bool = False
    max_slots: int | None = None
    requires: frozenset[str] = frozenset()
    job: str = field(default="", init=False, repr=False, compare=False)
    pool: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._derive()
        _check_share(self.allocation_id, self.slots, self.weight)
        if self.max_slots is not None and self.max_slots < 0:
            raise ValueError(f"{self.allocation_id}: max_slots must be >= 0, got {self.max_slots}")


@dataclass(frozen=True)
class Running(_Owned):
    """An allocation that holds slots: placed, starting, running, or asked to release them.

    ``preempting`` is set once the master asked it to checkpoint and exit: it keeps its slots
    until the master sees it exit, but no policy asks again.
    """

    allocation_id: str
    job_id: str
    placement: tuple[Placement, ...]
    priority: int
    submitted_at: float = 0.0
    resource_pool: str = ""
    weight: float = 1.0
    preemptible: bool = False
    preempting: bool = False
    job: str = field(default="", init=False, repr=False, compare=False)
    pool: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._derive()
        _check_share(self.allocation_id, self.slots, self.weight)

    @property
    def slots(self) -> int:
        return sum(len(p.slot_ids) for p in self.placement)


@dataclass(frozen=True)
class AgentSlots:
    """One agent: the pool it serves, its free slot ids, and whether it takes new work.

    A disabled (draining) agent keeps running what it runs but gets nothing new. ``features``
    are what it offers beyond slots (``"docker"``: it runs containers); a request is placed
    only where every feature it requires is offered.
    """

    agent_id: str
    resource_pool: str
    free: tuple[int, ...]
    total: int
    enabled: bool = True
    features: frozenset[str] = frozenset()
    pool: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pool", pool_of(self.resource_pool))
        if self.total < 0 or len(self.free) > self.total:
            raise ValueError(
                f"agent {self.agent_id}: needs 0 <= free ({len(self.free)}) <= total ({self.total})"
            )


@dataclass(frozen=True)
class Snapshot:
    pending: tuple[Request, ...]
    agents: tuple[AgentSlots, ...]
    running: tuple[Running, ...] = ()

    def pools(self) -> list[str]:
        """Every pool something in the snapshot names, sorted so passes are deterministic."""
        names = {r.pool for r in self.pending} | {a.pool for a in self.agents}
        return sorted(names | {r.pool for r in self.running})


@dataclass(frozen=True)
class Decisions:
    """What one pass decided.

    ``assignments`` maps an allocation id to where all of its slots go (one entry per agent;
    a gang spanning agents has several), in the order the pass placed them. ``preemptions``
    are running allocations asked to checkpoint and release their slots.
    """

    assignments: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    preemptions: tuple[str, ...] = ()


#: Queue order: lower priority number first, then earlier submission, then id. (attrgetter,
#: not a function: a pass sorts thousands of requests by it.)
queue_key: Callable[[Request | Running], tuple[int, float, str]] = operator.attrgetter(
    "priority", "submitted_at", "allocation_id")

#: Submission order (fair share, round robin): earlier first, then id.
submission_key: Callable[[Request], tuple[float, str]] = operator.attrgetter("submitted_at", "allocation_id")


def _check_share(allocation_id: str, slots: int, weight: float) -> None:
    if slots < 0:
        raise ValueError(f"{allocation_id}: slots must be >= 0, got {slots}")
    if not weight > 0:
        raise ValueError(f"{allocation_id}: weight must be > 0, got {weight}")
