"""The seams of "where tasks run": what the services need from a resource manager, and what a
resource manager needs from the services.

:class:`ResourceManager` is what the allocation service (and the handlers that show the
cluster) call; the agent resource manager (``rm.agents.AgentRM``) implements it, and a
Kubernetes one would. :class:`AllocationPort` and :class:`TaskLogPort` are what a resource
manager calls back into: the allocation service and the task log service implement them. The
composition root wires the two directions; this package imports no service, so the services'
package may import it without a cycle.

Task specs and agent frames are the typed records of :mod:`det_agent.wire`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from det_agent.wire import LogLine, TaskSpec

from .. import scheduler


@dataclass(frozen=True)
class Container:
    """One agent's part of an allocation: its slots there, the address peers reach it at, and
    its slots' device type (``cuda``, ``rocm`` or ``cpu``: picks per-device images and
    environment variables)."""

    agent_id: str
    slot_ids: tuple[int, ...]
    address: str = "127.0.0.1"
    slot_type: str = "cpu"


class UnknownAllocation(LookupError):
    """An agent spoke of an allocation this cluster does not know."""


class Clock(Protocol):
    """Wall-clock time in float seconds since the epoch (``services.common.clock.Clock``)."""

    def now(self) -> float: ...


# -- what the services need from where tasks run -----------------------------------------


class ResourceManager(Protocol):
    """Where allocations run. Placement is the resource manager's: it reads what waits from
    the :class:`AllocationPort`, decides (the pools' scheduler policies), and launches.

    The allocation service asks it to :meth:`kill` containers (a kill, a failed gang member, a
    preemption whose deadline passed: preemption itself is cooperative and the service's), says
    when slots are :meth:`released`, and asks for a pass with :meth:`schedule_soon`."""

    def start(self, agent_id: str, spec: TaskSpec) -> None:
        """Launch one container of a placed allocation on ``agent_id``."""

    def kill(self, agent_id: str, allocation_id: str) -> None:
        """SIGKILL the allocation's container on ``agent_id``; its exit comes through the port.
        Nothing happens where the agent is not connected."""

    def released(self, allocation_id: str, agent_id: str | None = None) -> None:
        """The allocation's container on ``agent_id`` (all of them: None) gave its slots back."""

    def schedule_soon(self) -> None:
        """Run a scheduling pass soon (passes are coalesced); without an event loop, nothing."""

    def snapshot(self) -> scheduler.Snapshot:
        """What waits, what runs and the free slots, as the scheduler sees them (the job queue
        page explains placement from it)."""

    def launch_warnings(self, requested_pool: str, slots: int) -> list[str]:
        """``v1LaunchWarning`` names for a new task of ``slots`` in ``requested_pool``."""

    def describe(self) -> list[dict[str, Any]]:
        """The nodes tasks run on, as the agents API shows them: id, resource_pool, slots
        (wire slot objects), used (allocation id → slot ids), connected, registered_at,
        version, address, enabled, draining, disabled_slots, stats (slot id → wire stats)."""

    def explain_wait(self, request: scheduler.Request, reason: str) -> str:
        """The scheduler's ``reason`` why ``request`` waits (the job queue's ``waitReason``),
        with what the cluster itself says about it, if anything (Kubernetes: each node's room)."""

    def placement_problem(self, allocation_id: str) -> str | None:
        """Why a placed allocation has not started although its slots are held (Kubernetes:
        the cluster will not create its pod, e.g. a namespace's quota); None when nothing is known."""


# -- what a resource manager needs from the services ---------------------------------------


class AllocationPort(Protocol):
    """The allocation service as a resource manager sees it: what waits, placements, and the
    events of running tasks (started, exited)."""

    def scheduler_view(self) -> tuple[list[scheduler.Request], list[scheduler.Running]]:
        """Pending and slot-holding allocations as the scheduler sees them."""

    def any_pending(self) -> bool:
        """Whether an allocation waits to be placed."""

    def assign_many(self, placements: Sequence[tuple[str, list[Container]]]) -> dict[str, list[TaskSpec]]:
        """Mark a pass's placements (chief first) in one transaction; the specs to start, one per
        container, of each allocation that was still pending."""

    def live_on(self, agent_id: str) -> dict[str, list[int]]:
        """The live allocations with a container on ``agent_id``, and their slots there."""

    def placed(self) -> dict[str, tuple[str, list[str]]]:
        """Every live allocation's state and agents, chief first (after a restart: what a
        manager whose tasks outlive the master may adopt)."""

    def adopted(self, allocation_id: str) -> None:
        """The allocation, placed by an earlier master process, still runs: it is this one's."""

    def find_task(self, allocation_id: str) -> tuple[str, int | None] | None:
        """The allocation's task id and trial id (None: not a trial's); None when unknown."""

    def pulling(self, allocation_id: str) -> None:
        """Its agent pulls the image its container needs (before ``started``)."""

    def started(self, allocation_id: str) -> None:
        """Its container started."""

    def exited(self, allocation_id: str, exit_code: int | None, reason: str | None,
               agent_id: str | None = None) -> None:
        """Its container on ``agent_id`` (None: all) is gone, ended now; ``exit_code`` None:
        ended without blame (its agent left)."""

    def exited_soon(self, allocation_id: str, exit_code: int | None, reason: str | None,
                    agent_id: str) -> None:
        """``exited`` for exit frames: those of one event-loop turn end together."""

    def preempt(self, allocation_id: str, timeout_s: float) -> None:
        """Ask the task to checkpoint and exit; kill it after ``timeout_s`` seconds."""

    def kill(self, allocation_id: str) -> str | None:
        """Stop the allocation now."""


class TaskLogPort(Protocol):
    """Where a resource manager writes task logs: the agents' lines and its own notes."""

    def new_container(self, allocation_id: str, agent_id: str) -> None:
        """A container is about to start: it has no lines yet."""

    def append_agent_lines(self, *, task_id: str, allocation_id: str, trial_id: int | None,
                           agent_id: str, lines: Sequence[LogLine]) -> int:
        """Store a batch from an agent, dropping lines already stored (by ``seq``)."""

    def append_system(self, *, task_id: str, allocation_id: str | None, trial_id: int | None,
                      message: str, level: str = "INFO") -> None:
        """A line from the master itself about a task."""


# -- the pools a resource manager places in -------------------------------------------------


class SchedulerSettings(Protocol):
    def policy(self) -> scheduler.Policy: ...


class PoolSettings(Protocol):
    @property
    def scheduler(self) -> SchedulerSettings: ...


class Pools(Protocol):
    """The configured resource pools (``config.resources.ResourceConfig``)."""

    @property
    def pools(self) -> Mapping[str, PoolSettings]: ...

    @property
    def default_compute_pool(self) -> str: ...

    def pool_for(self, requested: str, slots: int) -> str: ...


@dataclass(frozen=True)
class _PriorityScheduler:
    def policy(self) -> scheduler.Policy:
        return scheduler.make_policy("priority", fitting="best", preemption=False)


@dataclass(frozen=True)
class _Pool:
    scheduler: _PriorityScheduler = field(default_factory=_PriorityScheduler)


@dataclass(frozen=True)
class SinglePool:
    """What an empty master.yaml configures: one pool, ``default``, on the priority policy."""

    pools: Mapping[str, _Pool] = field(default_factory=lambda: {scheduler.DEFAULT_POOL: _Pool()})
    default_compute_pool: str = scheduler.DEFAULT_POOL

    def pool_for(self, requested: str, slots: int) -> str:
        return requested or self.default_compute_pool
