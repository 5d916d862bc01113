"""The agent RM on each backend when an agent says it is ``leaving`` (a planned stop): its trials
are preempted, other tasks killed, nothing more is placed there, and every way its tasks end
is a preemption (exit code None: the owner queues a trial again without using a restart)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from det_agent.wire import Hello, KillTask, Slot, parse_agent_frame
from det_jupyter.rm.agents import AgentRM
from det_jupyter.rm.base import ResourceManager
from det_jupyter.services.accounts.auth import AuthService
from det_jupyter.services.allocation.logs import LogService
from det_jupyter.services.allocation.service import AllocationService, Container
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.late import Late

from ._rows import make_world
from .test_store_allocations import RecordingOwner, request

SLOTS = (Slot(0, "cpu", "cpu"), Slot(1, "cpu", "cpu"))


@pytest.fixture
def owner() -> RecordingOwner:
    return RecordingOwner()


@pytest.fixture
def launcher() -> Late[ResourceManager]:
    return Late("the resource manager")


@pytest.fixture
def allocs(engine: sa.Engine, clock: FakeClock, owner: RecordingOwner,
           launcher: Late[ResourceManager]) -> AllocationService:
    auth = AuthService(engine, clock)
    auth.bootstrap("Bootstr4p-pw")
    return AllocationService(engine, clock, auth, owner=Late.of("owner", owner),
                             launcher=launcher)


def _cluster(allocs: AllocationService, engine: sa.Engine, clock: FakeClock,
             launcher: Late[ResourceManager]) -> tuple[AgentRM, dict[str, list]]:
    rm = AgentRM(allocs, LogService(engine, clock), clock)
    launcher.bind(rm)
    sent: dict[str, list] = {"a": [], "b": []}
    for agent_id, frames in sent.items():
        assert rm.hello(agent_id, Hello(agent_id, "", SLOTS, (), "", ""), frames.append) is None
    return rm, sent


def _place(rm: AgentRM, allocs: AllocationService, alloc_id: str, *gang: tuple[str, int]) -> None:
    containers = [Container(agent, (slot,)) for agent, slot in gang]
    for c in containers:
        rm.agents[c.agent_id].used[alloc_id] = list(c.slot_ids)
    assert allocs.assign(alloc_id, containers) is not None
    allocs.started(alloc_id)


async def _turn() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_leaving_preempts_trials_kills_the_rest_and_exits_are_preemptions(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock, owner: RecordingOwner,
    launcher: Late[ResourceManager],
) -> None:
    async def scenario() -> None:
        rm, sent = _cluster(allocs, engine, clock, launcher)
        _, _, trial_id = make_world(engine)
        trial = request(engine, allocs, "trial-task", trial_id)
        command = request(engine, allocs, "command-task")
        _place(rm, allocs, trial, ("a", 0))
        _place(rm, allocs, command, ("a", 1))
        await _turn()

        rm.handle("a", parse_agent_frame({"type": "leaving", "timeout_s": 5}))
        assert allocs.get(trial).preempt_requested
        assert await allocs.wait_preemption(trial, 0) is True
        assert KillTask(command) in sent["a"]
        snapshot = {a.agent_id: a.enabled for a in rm.snapshot().agents}
        assert snapshot == {"a": False, "b": True}, "nothing more is placed on a leaving agent"
        assert [a["draining"] for a in rm.describe()] == [True, False]

        rm.handle("a", parse_agent_frame({"type": "task_exited", "allocation_id": command, "exit_code": 137}))
        rm.handle("a", parse_agent_frame({"type": "task_exited", "allocation_id": trial, "exit_code": 137,
                        "reason": "killed"}))
        await _turn()
        assert sorted((a, code) for a, code, _ in owner.exits) == sorted([(trial, None), (command, None)])
        assert "agent a stopped (killed)" in dict((a, r) for a, _, r in owner.exits)[trial]

    asyncio.run(scenario())


def test_an_exit_0_from_a_leaving_agent_stays_an_exit_0(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock, owner: RecordingOwner,
    launcher: Late[ResourceManager],
) -> None:
    """A trial that acked its preemption exits 0 (its owner queues it again, seeing the ack);
    one that finished meanwhile is complete."""
    async def scenario() -> None:
        rm, _ = _cluster(allocs, engine, clock, launcher)
        alloc = request(engine, allocs, "command-task")
        _place(rm, allocs, alloc, ("a", 0))
        rm.handle("a", parse_agent_frame({"type": "leaving", "timeout_s": 5}))
        rm.handle("a", parse_agent_frame({"type": "task_exited", "allocation_id": alloc, "exit_code": 0}))
        await _turn()
        assert owner.exits == [(alloc, 0, None)]

    asyncio.run(scenario())


def test_a_leaving_agent_that_disconnects_is_gone_at_once_and_its_gang_ends_as_preempted(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock, owner: RecordingOwner,
    launcher: Late[ResourceManager],
) -> None:
    async def scenario() -> None:
        rm, sent = _cluster(allocs, engine, clock, launcher)
        _, _, trial_id = make_world(engine)
        gang = request(engine, allocs, "trial-task", trial_id)
        _place(rm, allocs, gang, ("a", 0), ("b", 0))
        await _turn()
        rm.handle("a", parse_agent_frame({"type": "leaving", "timeout_s": 5}))
        rm.disconnected("a")  # killed before it could report its task's exit
        assert "a" not in rm.agents, "no reconnect wait for an agent that said it leaves"
        assert KillTask(gang) in sent["b"]
        rm.handle("b", parse_agent_frame({"type": "task_exited", "allocation_id": gang, "exit_code": 137}))
        await _turn()
        assert [(a, code) for a, code, _ in owner.exits] == [(gang, None)]
        assert allocs.get(gang).state == "TERMINATED"

    asyncio.run(scenario())


def test_without_leaving_a_kill_is_a_failure_and_a_disconnect_waits(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock, owner: RecordingOwner,
    launcher: Late[ResourceManager],
) -> None:
    """The same events from an agent that did not say it leaves (the contrast)."""
    async def scenario() -> None:
        rm, _ = _cluster(allocs, engine, clock, launcher)
        alloc = request(engine, allocs, "command-task")
        _place(rm, allocs, alloc, ("a", 0))
        rm.disconnected("a")
        assert "a" in rm.agents  # waits for a reconnect
        rm._lost_timers.pop("a").cancel()
        rm.handle("a", parse_agent_frame({"type": "task_exited", "allocation_id": alloc, "exit_code": 137}))
        await _turn()
        assert [(a, code) for a, code, _ in owner.exits] == [(alloc, 137)]

    asyncio.run(scenario())
