"""The agent resource manager: connected agents, their slots, placement and task control.

Agents talk to the master over one websocket each (docs/internals.md). A scheduling pass takes
a snapshot of pending and running allocations and of the agents' free slots, runs each pool's
configured policy (``config.resources``) on its part, and carries out the decisions: placements
(a gang may span agents) and preemptions. Passes are coalesced, so a burst of events causes one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from det_agent import wire

from .. import scheduler
from .base import (
    AllocationPort,
    Clock,
    Container,
    Pools,
    SinglePool,
    TaskLogPort,
    UnknownAllocation,
)

log = logging.getLogger("det_jupyter.rm")

#: How many recent passes the scheduler statistics keep.
PASS_HISTORY = 1000
#: Passes cheaper than this run at the next loop turn; dearer ones are spaced (schedule_soon).
CHEAP_PASS_S = 0.005
MAX_PASS_DELAY_S = 0.05


@dataclass
class AgentHandle:
    """One connected agent. ``send`` writes a frame to its websocket."""

    agent_id: str
    resource_pool: str
    slots: tuple[wire.Slot, ...]
    send: Callable[[wire.MasterFrame], None]
    address: str = "127.0.0.1"
    used: dict[str, list[int]] = field(default_factory=dict)
    connected: bool = True
    registered_at: float = 0.0
    version: str = ""
    stats: dict[int, wire.SlotStats] = field(default_factory=dict)
    #: The agent said it is stopping (``leaving``): nothing is placed on it, its tasks are
    #: preempted, their exits are preemptions, and it is forgotten as soon as it disconnects.
    leaving: bool = False
    #: What it offers beyond slots (the scheduler's agent features): ``docker`` when it runs
    #: tasks with an image in containers (its hello's ``containers``).
    features: frozenset[str] = frozenset()

    def slot_type(self, slot_ids: Sequence[int]) -> str:
        """The device type of these slots: ``cuda`` or ``rocm`` when any is, else ``cpu``."""
        types = {s.type for s in self.slots if s.id in slot_ids}
        return next((t for t in ("cuda", "rocm") if t in types), "cpu")

    def taken(self) -> set[int]:
        return {s for ids in self.used.values() for s in ids}


@dataclass(frozen=True)
class PassRecord:
    """One scheduling pass: its time in all and in its three parts (read, decide, carry out)."""

    ms: float
    pending: int
    placed: int
    snapshot_ms: float = 0.0
    decide_ms: float = 0.0
    apply_ms: float = 0.0


class AgentRM:
    """The :class:`~det_jupyter.rm.base.ResourceManager` of det-agents: ``allocations`` and
    ``logs`` are the services' ports; ``resources`` the pools (default: one priority pool)."""

    #: Whether tasks outlive a master restart, to be adopted again (an agent's die with it:
    #: the agent kills what the master no longer knows).
    adopts_running = False

    def __init__(
        self,
        allocations: AllocationPort,
        logs: TaskLogPort,
        clock: Clock,
        *,
        resources: Pools | None = None,
        reconnect_wait_s: float = 25.0,
        preemption_timeout_s: float = 3600.0,
    ) -> None:
        self._allocs = allocations
        self._logs = logs
        self._clock = clock
        self.resources: Pools = resources or SinglePool()
        self._policies = {name: p.scheduler.policy() for name, p in self.resources.pools.items()}
        self._reconnect_wait_s = reconnect_wait_s
        self._preemption_timeout_s = preemption_timeout_s
        self.agents: dict[str, AgentHandle] = {}
        # Admin state outlives connections: a disabled agent stays disabled when it reconnects.
        self.disabled: dict[str, bool] = {}  # agent id -> drain
        self.disabled_slots: dict[str, set[int]] = {}
        self._lost_timers: dict[str, asyncio.TimerHandle] = {}
        self._alloc_meta: dict[str, tuple[str, int | None]] = {}
        self._pass_scheduled = False
        self.passes = 0
        self._last_pass_s = 0.0
        self.recent_passes: deque[PassRecord] = deque(maxlen=PASS_HISTORY)

    # -- connections --------------------------------------------------------------------

    def is_connected(self, agent_id: str) -> bool:
        agent = self.agents.get(agent_id)
        return agent is not None and agent.connected

    def hello(self, agent_id: str, hello: wire.Hello, send: Callable[[wire.MasterFrame], None]) -> str | None:
        """An agent (re)connected. Keep what it still runs that we know; kill the rest.

        Returns why the agent is refused (a pool that does not exist), else None.
        """
        pool = hello.resource_pool or self.resources.default_compute_pool
        if pool not in self.resources.pools:
            return (f"resource pool {pool!r} does not exist; start the agent with --resource-pool "
                    f"one of {', '.join(sorted(self.resources.pools))}")
        timer = self._lost_timers.pop(agent_id, None)
        if timer is not None:
            timer.cancel()
        slots = hello.slots
        known = self.agents.get(agent_id)
        handle = AgentHandle(agent_id, pool, slots, send,
                             address=hello.address or "127.0.0.1",
                             registered_at=known.registered_at if known else self._clock.now(),
                             version=hello.version,
                             features=frozenset({"docker"}) if hello.containers == "docker" else frozenset())
        live = self._allocs.live_on(agent_id)
        running = set(hello.running)
        for alloc_id in running - set(live):
            send(wire.KillTask(alloc_id))
        self.agents[agent_id] = handle
        for alloc_id, slot_ids in live.items():
            handle.used[alloc_id] = slot_ids
            if alloc_id not in running:
                # The agent restarted: its tasks died with it (the master sent their start
                # only after an earlier hello, so a task it still prepares is listed too).
                # Ending it gives the slots back.
                self._allocs.exited(alloc_id, -1, f"agent {agent_id} restarted; the task died with it",
                                    agent_id=agent_id)
        log.info("agent %s connected to pool %s with %d slots", agent_id, pool, len(slots))
        self.schedule_soon()
        return None

    def disconnected(self, agent_id: str) -> None:
        agent = self.agents.get(agent_id)
        if agent is None:
            return
        agent.connected = False
        if agent.leaving:  # a planned stop: no reconnect to wait for
            self._agent_left(agent_id)
            return
        loop = asyncio.get_event_loop()
        self._lost_timers[agent_id] = loop.call_later(self._reconnect_wait_s, self._agent_lost, agent_id)

    def _agent_lost(self, agent_id: str) -> None:
        self._lost_timers.pop(agent_id, None)
        agent = self.agents.pop(agent_id, None)
        if agent is None or agent.connected:
            return
        log.warning("agent %s did not come back; failing its %d allocations", agent_id, len(agent.used))
        for alloc_id in list(agent.used):
            task_id, trial_id = self._meta(alloc_id)
            self._logs.append_system(
                task_id=task_id, allocation_id=alloc_id, trial_id=trial_id, level="WARNING",
                message=f"agent {agent_id} was away longer than {self._reconnect_wait_s:g} s; "
                        "this run ended (a trial restarts from its latest checkpoint)")
            self._allocs.exited(alloc_id, -1, f"agent {agent_id} was lost", agent_id=agent_id)

    def leaving(self, agent_id: str, timeout_s: float) -> None:
        """The agent is stopping (``leaving`` frame): place nothing more on it and preempt what
        runs there (a trial checkpoints and is queued again without using a restart); what is
        not a trial cannot checkpoint and is killed now. The agent kills what is left after
        ``timeout_s`` seconds."""
        agent = self.agents.get(agent_id)
        if agent is None:
            return
        first = not agent.leaving
        agent.leaving = True
        if first:
            log.info("agent %s is leaving; preempting its %d allocations", agent_id, len(agent.used))
        for alloc_id in list(agent.used):
            task_id, trial_id = self._meta(alloc_id)
            if first:
                self._logs.append_system(
                    task_id=task_id, allocation_id=alloc_id, trial_id=trial_id, level="WARNING",
                    message=f"agent {agent_id} is stopping; this run is preempted"
                            + (" and resumes elsewhere from its latest checkpoint" if trial_id is not None else ""))
            if trial_id is None:
                self._allocs.kill(alloc_id)
            else:
                # The master's own deadline comes after the agent's, which kills and reports.
                self._allocs.preempt(alloc_id, min(self._preemption_timeout_s, timeout_s + 10.0))
        self.schedule_soon()

    def _agent_left(self, agent_id: str) -> None:
        """A leaving agent disconnected: what it still ran (it was killed before it could say
        so) ends as preempted, not failed."""
        timer = self._lost_timers.pop(agent_id, None)
        if timer is not None:
            timer.cancel()
        agent = self.agents.pop(agent_id, None)
        if agent is None:
            return
        log.info("agent %s left", agent_id)
        for alloc_id in list(agent.used):
            self._allocs.exited(alloc_id, None, f"agent {agent_id} stopped before the task exited",
                                agent_id=agent_id)
        self.schedule_soon()

    # -- admin --------------------------------------------------------------------------

    def set_enabled(self, agent_id: str, enabled: bool, *, drain: bool = False) -> None:
        """Enable an agent, or disable it: nothing new is placed on it; without ``drain`` what
        runs there is killed too (Determined's semantics)."""
        if agent_id not in self.agents:
            raise KeyError(agent_id)
        if enabled:
            self.disabled.pop(agent_id, None)
        else:
            self.disabled[agent_id] = drain
            if not drain:
                for alloc_id in list(self.agents[agent_id].used):
                    self._allocs.kill(alloc_id)
        self.schedule_soon()

    def set_slot_enabled(self, agent_id: str, slot_id: int, enabled: bool) -> None:
        agent = self.agents.get(agent_id)
        if agent is None:
            raise KeyError(agent_id)
        if slot_id not in {s.id for s in agent.slots}:
            raise KeyError(f"{agent_id}/{slot_id}")
        off = self.disabled_slots.setdefault(agent_id, set())
        if enabled:
            off.discard(slot_id)
        else:
            off.add(slot_id)
        self.schedule_soon()

    # -- frames from agents -------------------------------------------------------------

    def handle(self, agent_id: str, frame: wire.AgentFrame) -> None:
        """A frame from a connected agent (after its hello)."""
        if isinstance(frame, wire.SlotStatsReport):
            agent = self.agents.get(agent_id)
            if agent is not None:
                agent.stats = {s.id: s for s in frame.slots}
        elif isinstance(frame, wire.Leaving):
            self.leaving(agent_id, float(frame.timeout_s))
        elif isinstance(frame, wire.TaskPulling):
            self._allocs.pulling(frame.allocation_id)
        elif isinstance(frame, wire.TaskStarted):
            self._allocs.started(frame.allocation_id)
        elif isinstance(frame, wire.Logs):
            alloc_id = frame.allocation_id
            try:
                task_id, trial_id = self._meta(alloc_id)
            except UnknownAllocation:  # not this cluster's (sending it again would not help)
                log.warning("agent %s: dropping log lines of unknown allocation %s", agent_id, alloc_id)
                return
            self._logs.append_agent_lines(
                task_id=task_id, allocation_id=alloc_id, trial_id=trial_id, agent_id=agent_id,
                lines=frame.lines,
            )
        elif isinstance(frame, wire.TaskExited):
            exit_code: int | None = frame.exit_code
            reason = frame.reason
            agent = self.agents.get(agent_id)
            if exit_code != 0 and agent is not None and agent.leaving:
                # Killed (or refused) because its agent stops: a preemption, not the task's fault.
                exit_code, reason = None, f"agent {agent_id} stopped ({reason or f'exit code {frame.exit_code}'})"
            self._allocs.exited_soon(frame.allocation_id, exit_code, reason, agent_id)

    def _meta(self, alloc_id: str) -> tuple[str, int | None]:
        meta = self._alloc_meta.get(alloc_id)
        if meta is None:
            meta = self._allocs.find_task(alloc_id)
            if meta is None:
                raise UnknownAllocation(f"allocation {alloc_id} not found")
            self._alloc_meta[alloc_id] = meta
        return meta

    # -- the ResourceManager protocol (rm.base) ----------------------------------------

    def start(self, agent_id: str, spec: wire.TaskSpec) -> None:
        self.agents[agent_id].send(wire.StartTask(spec))

    def kill(self, agent_id: str, allocation_id: str) -> None:
        agent = self.agents.get(agent_id)
        if agent is not None and agent.connected:
            agent.send(wire.KillTask(allocation_id))

    def released(self, allocation_id: str, agent_id: str | None = None) -> None:
        """The allocation's container on ``agent_id`` (all of them: None) gave its slots back."""
        if agent_id is None:
            self._alloc_meta.pop(allocation_id, None)
        for agent in self.agents.values():
            if agent_id is None or agent.agent_id == agent_id:
                agent.used.pop(allocation_id, None)

    def schedule_soon(self) -> None:
        if self._pass_scheduled:
            return
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return  # services used without an event loop (tests): there is nothing to place on
        self._pass_scheduled = True
        # A cheap pass runs at the next loop turn. An expensive one (a long queue) waits as
        # long as the last took, so passes use at most about half of the loop and each one
        # carries out what a burst of events freed, instead of one pass per event.
        delay = min(self._last_pass_s, MAX_PASS_DELAY_S) if self._last_pass_s > CHEAP_PASS_S else 0.0
        if delay:
            loop.call_later(delay, self._schedule_pass)
        else:
            loop.call_soon(self._schedule_pass)

    # -- placement ----------------------------------------------------------------------

    def snapshot(self) -> scheduler.Snapshot:
        pending, running = self._allocs.scheduler_view()
        agents = []
        for a in self.agents.values():
            if not a.connected:
                continue
            off = self.disabled_slots.get(a.agent_id, set())
            usable = [s.id for s in a.slots if s.id not in off]
            taken = a.taken()
            agents.append(scheduler.AgentSlots(
                a.agent_id, a.resource_pool, tuple(s for s in usable if s not in taken),
                len(usable), enabled=a.agent_id not in self.disabled and not a.leaving,
                features=a.features,
            ))
        return scheduler.Snapshot(tuple(pending), tuple(agents), tuple(running))

    def decide(self, snap: scheduler.Snapshot) -> scheduler.Decisions:
        """Each pool's policy on its own part of the snapshot."""
        pools = snap.pools()
        parts: dict[str, tuple[Sequence, Sequence, Sequence]] = {}  # pending, agents, running
        if len(pools) == 1:  # the usual cluster: nothing to split
            parts[pools[0]] = (snap.pending, snap.agents, snap.running)
        else:
            for i, items in enumerate((snap.pending, snap.agents, snap.running)):
                for item in items:
                    parts.setdefault(item.pool, ([], [], []))[i].append(item)
        assignments: dict[str, tuple[scheduler.Placement, ...]] = {}
        preemptions: list[str] = []
        for pool, (pending, agents, running) in sorted(parts.items()):
            policy = self._policies.get(pool)
            if policy is None or not agents or not (pending or running):
                continue  # requests for a pool that is not configured wait (the queue says why)
            part = scheduler.Snapshot(tuple(pending), tuple(agents), tuple(running))
            decided = policy(part, self._clock.now())
            assignments.update(decided.assignments)
            preemptions.extend(decided.preemptions)
        return scheduler.Decisions(assignments, tuple(preemptions))

    def _schedule_pass(self) -> None:
        self._pass_scheduled = False
        marks = [time.perf_counter()]
        placed = 0
        pending = 0
        try:
            if not self._allocs.any_pending():  # nothing to place, and nothing to preempt for
                return
            snap = self.snapshot()
            marks.append(time.perf_counter())
            pending = len(snap.pending)
            if not snap.agents or not (snap.pending or snap.running):
                return
            decisions = self.decide(snap)
            marks.append(time.perf_counter())
            placed = self._place(decisions.assignments)
            for alloc_id in decisions.preemptions:
                log.info("preempting %s to make room", alloc_id)
                self._allocs.preempt(alloc_id, self._preemption_timeout_s)
        except Exception:  # a bad pass must not kill the loop; the next event retries
            log.exception("scheduling pass failed")
        finally:
            self._last_pass_s = time.perf_counter() - marks[0]
            if pending:
                marks += [time.perf_counter()] * (4 - len(marks))
                ms = [(b - a) * 1000 for a, b in zip(marks, marks[1:], strict=False)]
                self.passes += 1
                self.recent_passes.append(PassRecord(
                    (marks[-1] - marks[0]) * 1000, pending, placed, *ms))

    def _place(self, assignments: Mapping[str, tuple[scheduler.Placement, ...]]) -> int:
        """Carry out a pass's placements (one transaction) and start them; how many started."""
        gangs: dict[str, list[Container]] = {}
        for alloc_id, placement in assignments.items():
            if any(p.agent_id not in self.agents for p in placement):
                continue
            gangs[alloc_id] = [Container(p.agent_id, tuple(p.slot_ids), self.agents[p.agent_id].address,
                                         self.agents[p.agent_id].slot_type(p.slot_ids))
                               for p in placement]
        if not gangs:
            return 0
        for alloc_id, gang in gangs.items():
            for c in gang:
                self.agents[c.agent_id].used[alloc_id] = list(c.slot_ids)
        specs: dict[str, list[wire.TaskSpec]] = {}
        try:
            specs = self._allocs.assign_many(list(gangs.items()))
        finally:  # what was not placed (or a failed transaction) gives its slots back
            for alloc_id, gang in gangs.items():
                if alloc_id not in specs:
                    for c in gang:
                        self.agents[c.agent_id].used.pop(alloc_id, None)
        for alloc_id, alloc_specs in specs.items():
            for c, spec in zip(gangs[alloc_id], alloc_specs, strict=True):
                self._logs.new_container(alloc_id, c.agent_id)
                self.start(c.agent_id, spec)
        return len(specs)

    def launch_warnings(self, requested_pool: str, slots: int) -> list[str]:
        """``v1LaunchWarning``s for a new task: more slots than its pool has right now (it is
        accepted and waits; the job queue says why)."""
        pool = self.resources.pool_for(requested_pool, slots)
        capacity = sum(
            len(a.slots) - len(self.disabled_slots.get(a.agent_id, ()))
            for a in self.agents.values()
            if a.connected and a.resource_pool == pool and a.agent_id not in self.disabled and not a.leaving
        )
        return ["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"] if slots > capacity else []

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "id": a.agent_id,
                "resource_pool": a.resource_pool,
                "slots": [s.to_wire() for s in a.slots],
                "used": dict(a.used),
                "connected": a.connected,
                "registered_at": a.registered_at,
                "version": a.version,
                "address": a.address,
                "enabled": a.agent_id not in self.disabled,
                "draining": self.disabled.get(a.agent_id, False) or a.leaving,
                "disabled_slots": sorted(self.disabled_slots.get(a.agent_id, set())),
                "stats": {slot_id: s.to_wire() for slot_id, s in a.stats.items()},
            }
            for a in self.agents.values()
        ]

    def explain_wait(self, request: scheduler.Request, reason: str) -> str:
        """Agents add nothing to the scheduler's reason (their slots are all it knows)."""
        return reason

    def placement_problem(self, allocation_id: str) -> str | None:
        """Agents report their troubles as task exits: nothing to add."""
        return None
