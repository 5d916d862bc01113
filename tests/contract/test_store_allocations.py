"""AllocationService on each backend: ids, placement, tokens, restart recovery."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from det_agent.wire import Hello, KillTask, Slot, StartTask, TaskSpec
from det_jupyter.errors import Conflict, NotFound, Unauthenticated
from det_jupyter.rm.base import ResourceManager
from det_jupyter.services.accounts.auth import AuthService, token_hash
from det_jupyter.services.allocation.service import AllocationService, Container, Gang
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.late import Late
from det_jupyter.store import tables as t

from ._rows import make_world


class RecordingOwner:
    """An allocation owner that hands the token, agent, rank and port back in the spec's env
    and records exits."""

    def __init__(self) -> None:
        self.exits: list[tuple[str, int | None, str | None]] = []

    def build_specs(self, alloc: sa.Row, gang: Gang, token: str, **_: object) -> list[TaskSpec]:
        return [TaskSpec(alloc.task_id, alloc.allocation_id, "COMMAND", "true",
                         {"AGENT": c.agent_id, "RANK": str(rank), "TOKEN": token,
                          "PORT": str(gang.rendezvous_port)}, c.slot_ids, {})
                for rank, c in enumerate(gang.containers)]

    def allocation_exited(self, alloc: sa.Row, exit_code: int | None, reason: str | None,
                          conn: sa.Connection | None = None) -> None:
        self.exits.append((alloc.allocation_id, exit_code, reason))

    def build_specs_many(self, runs: list, conn: sa.Connection) -> dict[str, list[TaskSpec]]:
        return {alloc.allocation_id: self.build_specs(alloc, gang, token) for alloc, gang, token in runs}

    def allocations_exited(self, ended: list, conn: sa.Connection) -> list[None]:
        return [self.allocation_exited(alloc, code, reason, conn) for alloc, code, reason in ended]


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
    return AllocationService(engine, clock, auth, owner=Late.of("owner", owner), launcher=launcher)


def request(engine: sa.Engine, allocs: AllocationService, task_id: str, trial_id: int | None = None) -> str:
    with engine.begin() as conn:
        return allocs.request(conn, task_id=task_id, trial_id=trial_id, slots=1, priority=42,
                              resource_pool="default")


def place(allocs: AllocationService, allocation_id: str, *, running: bool = True) -> str:
    """Assign (and start) a pending allocation; returns its token."""
    specs = allocs.assign(allocation_id, [Container("agent-1", (0,))])
    assert specs is not None
    if running:
        allocs.started(allocation_id)
    return specs[0].env["TOKEN"]


def test_request_creates_pending_rows_with_increasing_ids(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock
) -> None:
    assert [request(engine, allocs, "task-a") for _ in range(3)] == ["task-a.1", "task-a.2", "task-a.3"]
    assert request(engine, allocs, "task-b") == "task-b.1"
    row = allocs.get("task-a.2")
    assert (row.task_id, row.state, row.slots, row.priority, row.resource_pool) == (
        "task-a", "PENDING", 1, 42, "default"
    )
    assert row.submitted_at == clock.now()
    assert sorted(r.allocation_id for r in allocs.pending()) == ["task-a.1", "task-a.2", "task-a.3", "task-b.1"]


def test_request_is_part_of_the_callers_transaction(allocs: AllocationService, engine: sa.Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as conn:
        allocs.request(conn, task_id="task-a", trial_id=None, slots=1, priority=42, resource_pool="")
        raise RuntimeError("the caller's transaction fails")
    assert allocs.pending() == []
    assert request(engine, allocs, "task-a") == "task-a.1"


def test_assign_then_start(allocs: AllocationService, engine: sa.Engine) -> None:
    alloc_id = request(engine, allocs, "task-a")
    specs = allocs.assign(alloc_id, [Container("agent-1", (0, 1))])
    assert specs is not None and specs[0].env["TOKEN"]
    row = allocs.get(alloc_id)
    assert (row.state, row.agent_id, row.slot_ids) == ("ASSIGNED", "agent-1", [0, 1])
    assert allocs.assign(alloc_id, [Container("agent-2", (0,))]) is None  # placed once only
    allocs.started(alloc_id)
    assert allocs.get(alloc_id).state == "RUNNING"
    assert [r.allocation_id for r in allocs.live_allocations()] == [alloc_id]


def test_an_allocation_whose_image_is_pulled_is_pulling_until_it_starts(
        allocs: AllocationService, engine: sa.Engine) -> None:
    alloc_id = request(engine, allocs, "task-a")
    allocs.pulling(alloc_id)  # not placed yet: nothing changes
    assert allocs.get(alloc_id).state == "PENDING"
    allocs.assign(alloc_id, [Container("agent-1", (0,))])
    allocs.pulling(alloc_id)
    assert allocs.get(alloc_id).state == "PULLING"
    assert [r.allocation_id for r in allocs.live_allocations()] == [alloc_id]  # it holds its slots
    allocs.started(alloc_id)
    assert allocs.get(alloc_id).state == "RUNNING"
    allocs.pulling(alloc_id)  # a late or repeated frame does not go back
    assert allocs.get(alloc_id).state == "RUNNING"


def test_token_names_the_allocation_and_experiment_owner(
    allocs: AllocationService, engine: sa.Engine
) -> None:
    user_id, exp_id, trial_id = make_world(engine)
    alloc_id = request(engine, allocs, "trial-task", trial_id)
    principal = allocs.principal_for_token(place(allocs, alloc_id))
    assert (principal.allocation_id, principal.task_id) == (alloc_id, "trial-task")
    assert (principal.trial_id, principal.experiment_id, principal.user.id) == (trial_id, exp_id, user_id)


def test_token_of_a_task_without_trial_acts_as_admin(allocs: AllocationService, engine: sa.Engine) -> None:
    alloc_id = request(engine, allocs, "cmd-task")
    principal = allocs.principal_for_token(place(allocs, alloc_id, running=False))
    assert (principal.trial_id, principal.experiment_id, principal.user.username) == (None, None, "admin")


def test_token_stops_working_when_the_allocation_ends(
    allocs: AllocationService, engine: sa.Engine, owner: RecordingOwner
) -> None:
    alloc_id = request(engine, allocs, "task-a")
    token = place(allocs, alloc_id)
    allocs.exited(alloc_id, 0, None)
    assert owner.exits == [(alloc_id, 0, None)]
    assert allocs.get(alloc_id).state == "TERMINATED"
    with pytest.raises(Unauthenticated):
        allocs.principal_for_token(token)
    with pytest.raises(Conflict):
        allocs.ack_preemption(alloc_id)
    allocs.exited(alloc_id, 1, "again")  # a second exit report changes nothing
    assert owner.exits == [(alloc_id, 0, None)]
    assert allocs.get(alloc_id).exit_code == 0


def test_token_of_a_terminated_row_is_rejected_even_if_its_hash_remains(
    allocs: AllocationService, engine: sa.Engine
) -> None:
    """The state, not only the cleared hash, decides whether a token is valid."""
    alloc_id = request(engine, allocs, "task-a")
    with engine.begin() as conn:
        conn.execute(
            sa.update(t.allocations).where(t.allocations.c.allocation_id == alloc_id)
            .values(state="TERMINATED", token_hash=token_hash("leftover"))
        )
    with pytest.raises(Unauthenticated):
        allocs.principal_for_token("leftover")


def test_unknown_token_is_unauthenticated(allocs: AllocationService) -> None:
    with pytest.raises(Unauthenticated):
        allocs.principal_for_token("made-up")


def test_recover_ends_placed_allocations_and_keeps_pending_ones(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock
) -> None:
    pending = request(engine, allocs, "task-p")
    assigned = request(engine, allocs, "task-a")
    running = request(engine, allocs, "task-r")
    done = request(engine, allocs, "task-d")
    assigned_token = place(allocs, assigned, running=False)
    running_token = place(allocs, running)
    place(allocs, done)
    allocs.exited(done, 0, None)
    clock.advance(60)

    ended = allocs.recover()

    assert sorted(r.allocation_id for r in ended) == [assigned, running]
    assert [r.allocation_id for r in allocs.pending()] == [pending]
    for alloc_id in (assigned, running):
        row = allocs.get(alloc_id)
        assert (row.state, row.exit_reason, row.end_time) == ("TERMINATED", "the master restarted", clock.now())
    assert allocs.get(done).exit_reason is None
    for token in (assigned_token, running_token):
        with pytest.raises(Unauthenticated):
            allocs.principal_for_token(token)
    assert allocs.live_allocations() == []
    assert allocs.recover() == []  # a second restart has nothing left to end


class RecordingLauncher:
    """A launcher that records kills and releases (the resource manager's side)."""

    def __init__(self) -> None:
        self.kills: list[tuple[str, str]] = []
        self.releases: list[tuple[str, str | None]] = []

    def start(self, agent_id: str, spec: TaskSpec) -> None:
        pass

    def kill(self, agent_id: str, allocation_id: str) -> None:
        self.kills.append((agent_id, allocation_id))

    def schedule_soon(self) -> None:
        pass

    def released(self, allocation_id: str, agent_id: str | None = None) -> None:
        self.releases.append((allocation_id, agent_id))


def test_a_gang_gets_one_spec_per_container_and_distinct_ports(
    allocs: AllocationService, engine: sa.Engine
) -> None:
    first, second = request(engine, allocs, "task-a"), request(engine, allocs, "task-b")
    specs = allocs.assign(first, [Container("agent-1", (0, 1), "10.0.0.1"), Container("agent-2", (3,), "10.0.0.2")])
    assert specs is not None
    assert [(s.env["AGENT"], s.env["RANK"]) for s in specs] == [("agent-1", "0"), ("agent-2", "1")]
    row = allocs.get(first)
    assert (row.agent_id, row.slot_ids, row.placement) == ("agent-1", [0, 1], [["agent-1", [0, 1]], ["agent-2", [3]]])
    assert sorted(allocs.live_on("agent-2")) == [first]
    other = allocs.assign(second, [Container("agent-1", (2,))])
    assert other is not None and other[0].env["PORT"] != specs[0].env["PORT"]


def test_a_gang_ends_when_every_container_exited_and_a_failure_kills_the_rest(
    allocs: AllocationService, engine: sa.Engine, owner: RecordingOwner, launcher: Late[ResourceManager]
) -> None:
    recording = RecordingLauncher()
    launcher.bind(recording)
    alloc_id = request(engine, allocs, "task-a")
    gang = [Container("agent-1", (0,)), Container("agent-2", (0,)), Container("agent-3", (0,))]
    assert allocs.assign(alloc_id, gang) is not None
    allocs.started(alloc_id)
    allocs.exited(alloc_id, 0, None, agent_id="agent-3")
    assert allocs.get(alloc_id).state == "RUNNING" and recording.kills == []
    allocs.exited(alloc_id, 2, "worker crashed", agent_id="agent-2")
    assert recording.kills == [("agent-1", alloc_id)]  # the failure stops the survivors
    assert allocs.get(alloc_id).state == "RUNNING"
    allocs.exited(alloc_id, 2, "worker crashed", agent_id="agent-2")  # a repeated frame
    allocs.exited(alloc_id, -9, "killed", agent_id="agent-1")
    row = allocs.get(alloc_id)
    assert (row.state, row.exit_code) == ("TERMINATED", 2)
    assert "agent-2" in row.exit_reason
    assert owner.exits == [(alloc_id, 2, row.exit_reason)]
    assert ("agent-3" in {a for _, a in recording.releases})


def test_the_scheduler_view_stays_warm_and_heals_after_a_rollback(
    allocs: AllocationService, engine: sa.Engine
) -> None:
    assert allocs.scheduler_view() == ([], [])  # warm from here on
    kept = request(engine, allocs, "task-a")
    with pytest.raises(RuntimeError), engine.begin() as conn:
        allocs.request(conn, task_id="task-b", trial_id=None, slots=1, priority=42, resource_pool="default")
        raise RuntimeError("the caller's transaction fails")
    pending, _ = allocs.scheduler_view()
    assert sorted(r.allocation_id for r in pending) == ["task-a.1", "task-b.1"]  # a phantom, for now
    assert allocs.assign("task-b.1", [Container("agent-1", (0,))]) is None  # nothing to place ...
    pending, running = allocs.scheduler_view()
    assert [r.allocation_id for r in pending] == [kept] and running == []  # ... and the copy is read again
    allocs.assign(kept, [Container("agent-1", (0,))])
    pending, running = allocs.scheduler_view()
    assert pending == [] and [r.allocation_id for r in running] == [kept]


def test_an_agent_back_after_a_restart_ends_what_died_with_it(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock, launcher: Late[ResourceManager]
) -> None:
    """On hello the master keeps what the agent still runs, kills what it does not know, and
    ends what the agent no longer runs (its process restarted, so the tasks died with it)."""
    from det_jupyter.rm.agents import AgentRM
    from det_jupyter.services.allocation.logs import LogService

    rm = AgentRM(allocs, LogService(engine, clock), clock)
    launcher.bind(rm)
    sent: list = []
    slots = (Slot(0, "cpu", "cpu"), Slot(1, "cpu", "cpu"))
    assert rm.hello("agent-1", Hello("agent-1", "", slots, (), "", ""), sent.append) is None
    kept, died = request(engine, allocs, "task-a"), request(engine, allocs, "task-b")
    allocs.assign(kept, [Container("agent-1", (0,))])
    allocs.assign(died, [Container("agent-1", (1,))])

    assert rm.hello("agent-1", Hello("agent-1", "", slots, (kept, "ghost.1"), "", ""), sent.append) is None
    assert sent == [KillTask("ghost.1")]
    assert allocs.get(kept).state == "ASSIGNED"
    ended = allocs.get(died)
    assert ended.state == "TERMINATED" and "restarted" in ended.exit_reason
    assert rm.agents["agent-1"].used == {kept: [0]}
    refused = rm.hello("agent-2", Hello("agent-2", "gpu", slots, (), "", ""), sent.append)
    assert refused is not None and "resource pool 'gpu' does not exist" in refused


def test_preempt_and_kill_by_state(allocs: AllocationService, engine: sa.Engine, owner: RecordingOwner,
                                   launcher: Late[ResourceManager]) -> None:
    """Preempt and kill are one conditional UPDATE where the allocation has started; a pending
    one ends instead, and an ended one is left as it is."""
    recording = RecordingLauncher()
    launcher.bind(recording)
    pending, placed, ended = (request(engine, allocs, f"task-{n}") for n in "abc")
    place(allocs, placed)
    place(allocs, ended)
    allocs.exited(ended, 0, None)

    async def preempt_all() -> list[bool]:
        for alloc_id in (pending, placed, ended):
            allocs.preempt(alloc_id, timeout_s=3600)
        return [await allocs.wait_preemption(a, 0) for a in (placed, ended)]

    assert asyncio.run(preempt_all()) == [True, True]
    assert owner.exits == [(ended, 0, None), (pending, None, "canceled before it started")]
    assert allocs.get(pending).state == "TERMINATED"
    assert (allocs.get(placed).state, allocs.get(placed).preempt_requested) == ("RUNNING", True)
    assert allocs.get(ended).preempt_requested is False  # not asked: it had ended

    other = request(engine, allocs, "task-d")
    for alloc_id in (placed, ended, other):
        allocs.kill(alloc_id)
    assert recording.kills == [("agent-1", placed)]
    assert allocs.get(placed).state == "TERMINATING"
    assert (allocs.get(ended).state, allocs.get(ended).exit_code) == ("TERMINATED", 0)
    assert owner.exits[-1] == (other, None, "killed before it started")
    with pytest.raises(NotFound):
        allocs.kill("no-such-allocation")
    with pytest.raises(NotFound):
        allocs.preempt("no-such-allocation", 1)


def test_a_placed_allocations_task_and_preemption_without_this_masters_memory(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock
) -> None:
    """What this master placed is answered from memory; another master (a restart) reads the
    rows and gets the same answers."""
    _, _, trial_id = make_world(engine)
    alloc_id = request(engine, allocs, "trial-task", trial_id)
    place(allocs, alloc_id)
    with engine.begin() as conn:  # the row says "asked to stop"; this master never asked
        conn.execute(sa.update(t.allocations).values(preempt_requested=True))
    restarted = AllocationService(engine, clock, AuthService(engine, clock), owner=Late("owner"),
                                  launcher=Late("the resource manager"))
    assert allocs.task_of(alloc_id) == restarted.task_of(alloc_id) == ("trial-task", trial_id)
    assert asyncio.run(restarted.wait_preemption(alloc_id, 0)) is True
    assert asyncio.run(allocs.wait_preemption(alloc_id, 0)) is False  # only preempt() asks


def test_a_pass_with_nothing_waiting_reads_nothing_and_a_kill_says_what_it_wrote(
    allocs: AllocationService, engine: sa.Engine, clock: FakeClock, launcher: Late[ResourceManager]
) -> None:
    """Every exit asks for a scheduling pass; where no allocation waits it runs no statement
    (it would read the running ones for nothing). A kill returns TERMINATING where that state
    is all it wrote, None where the allocation ended instead or had ended."""
    from det_jupyter.rm.agents import AgentRM
    from det_jupyter.services.allocation.logs import LogService

    rm = AgentRM(allocs, LogService(engine, clock), clock)
    launcher.bind(rm)
    sent: list = []
    assert rm.hello("agent-1", Hello("agent-1", "", (Slot(0, "cpu", "cpu"),), (), "", ""), sent.append) is None
    statements: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    rm._schedule_pass()  # the first reads what waits once; the service keeps it since
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        rm._schedule_pass()
        assert statements == []
        waiting = request(engine, allocs, "task-a")
        statements.clear()
        rm._schedule_pass()
        assert statements  # (the listener sees the passes' reads and writes)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert allocs.get(waiting).state == "ASSIGNED"
    assert [type(m) for m in sent] == [StartTask]
    assert allocs.kill(waiting) == "TERMINATING"
    assert sent[-1] == KillTask(waiting)
    queued = request(engine, allocs, "task-b")  # the only slot is taken: it stays pending
    assert allocs.kill(queued) is None and allocs.get(queued).state == "TERMINATED"
    assert allocs.kill(queued) is None
