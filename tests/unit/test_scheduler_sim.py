"""A small simulated cluster that executes policy decisions, and scenarios run on it.

The simulator plays the master: it builds a snapshot, runs one pass of a policy, checks the
decisions against the snapshot (the safety invariants below) and applies them. Placements
occupy slots at once; an allocation asked to preempt keeps its slots until the start of the
next pass, then exits and (when preemptible) is queued again with its old submission time.

Invariants checked on every pass: an assignment names a pending request; its slots are free
in the snapshot, on enabled agents of the request's pool, and used once; a gang gets all of
its slots, on one agent unless no single agent of the pool could ever hold it; a job never
holds more than ``max_slots``; only running, preemptible allocations not already leaving
are preempted, and only by policies that preempt.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from det_jupyter.scheduler import (
    AgentSlots,
    Decisions,
    Policy,
    Request,
    Running,
    Snapshot,
    make_policy,
)


@dataclass
class SimAgent:
    pool: str
    total: int
    enabled: bool = True


@dataclass
class Sim:
    policy: Policy
    preempts: bool
    agents: dict[str, SimAgent] = field(default_factory=dict)
    pending: dict[str, Request] = field(default_factory=dict)
    running: dict[str, Running] = field(default_factory=dict)
    requests: dict[str, Request] = field(default_factory=dict)  # running id -> its request
    leaving: dict[str, bool] = field(default_factory=dict)  # preempting id -> queue again?
    ticks: int = 0

    @classmethod
    def of(cls, name: str, preemption: bool | None = None, fitting: str = "best") -> Sim:
        policy = make_policy(name, fitting=fitting, preemption=preemption)
        preempts = preemption if preemption is not None else name == "fair_share"
        return cls(policy, preempts)

    # -- the cluster ---------------------------------------------------------------------

    def join(self, agent_id: str, total: int, pool: str = "") -> None:
        self.agents[agent_id] = SimAgent(pool, total)

    def leave(self, agent_id: str) -> None:
        """The agent is lost: what ran on it fails; preemptible work is queued again."""
        del self.agents[agent_id]
        for alloc_id, run in list(self.running.items()):
            if any(p.agent_id == agent_id for p in run.placement):
                self._exit(alloc_id, requeue=self.leaving.get(alloc_id, run.preemptible))

    def submit(self, job: str, count: int, slots: int, **kw) -> list[str]:
        ids = []
        for i in range(count):
            self.ticks += 1
            alloc_id = f"{job}.{i}.{self.ticks}"
            self.pending[alloc_id] = Request(
                alloc_id,
                slots,
                kw.get("priority", 42),
                self.ticks,
                job_id=job,
                **{k: v for k, v in kw.items() if k != "priority"},
            )
            ids.append(alloc_id)
        return ids

    def finish(self, alloc_id: str) -> None:
        self._exit(alloc_id, requeue=False)

    def kill(self, job: str) -> None:
        for alloc_id, r in list(self.pending.items()):
            if r.job == job:
                del self.pending[alloc_id]
        for alloc_id, run in list(self.running.items()):
            if run.job == job:
                self._exit(alloc_id, requeue=False)

    def pause(self, job: str) -> None:
        """Pending requests go; running ones checkpoint and exit without coming back."""
        for alloc_id, r in list(self.pending.items()):
            if r.job == job:
                del self.pending[alloc_id]
        for alloc_id, run in self.running.items():
            if run.job == job and not run.preempting:
                self.running[alloc_id] = replace(run, preempting=True)
                self.leaving[alloc_id] = False

    def free(self, agent_id: str) -> tuple[int, ...]:
        used = {
            s
            for run in self.running.values()
            for p in run.placement
            if p.agent_id == agent_id
            for s in p.slot_ids
        }
        return tuple(s for s in range(self.agents[agent_id].total) if s not in used)

    def held(self, job: str) -> int:
        return sum(run.slots for run in self.running.values() if run.job == job)

    def snapshot(self) -> Snapshot:
        agents = tuple(
            AgentSlots(aid, a.pool, self.free(aid), a.total, a.enabled)
            for aid, a in sorted(self.agents.items())
        )
        return Snapshot(tuple(self.pending.values()), agents, tuple(self.running.values()))

    # -- one pass ------------------------------------------------------------------------

    def step(self) -> Decisions:
        for alloc_id, requeue in list(self.leaving.items()):
            self._exit(alloc_id, requeue)
        snap = self.snapshot()
        decisions = self.policy(snap, float(self.ticks))
        self.check(snap, decisions)
        for alloc_id, placement in decisions.assignments.items():
            r = self.pending.pop(alloc_id)
            self.requests[alloc_id] = r
            self.running[alloc_id] = Running(
                alloc_id,
                r.job,
                placement,
                r.priority,
                r.submitted_at,
                r.resource_pool,
                r.weight,
                r.preemptible,
            )
        for alloc_id in decisions.preemptions:
            self.running[alloc_id] = replace(self.running[alloc_id], preempting=True)
            self.leaving[alloc_id] = True
        self.check_no_double_booking()
        return decisions

    def settle(self, limit: int = 12) -> int:
        """Run passes until one decides nothing and nothing is leaving; return how many."""
        for n in range(1, limit + 1):
            decisions = self.step()
            if not decisions.assignments and not decisions.preemptions and not self.leaving:
                return n
        raise AssertionError(f"no steady state after {limit} passes")

    def _exit(self, alloc_id: str, requeue: bool) -> None:
        self.leaving.pop(alloc_id, None)
        run = self.running.pop(alloc_id, None)
        r = self.requests.pop(alloc_id, None)
        if run is None or r is None or not requeue:
            return
        self.ticks += 1
        again = f"{alloc_id.rsplit('.', 1)[0]}.{self.ticks}"
        self.pending[again] = replace(r, allocation_id=again)

    # -- the safety invariants -----------------------------------------------------------

    def check(self, snap: Snapshot, decisions: Decisions) -> None:
        pending = {r.allocation_id: r for r in snap.pending}
        agents = {a.agent_id: a for a in snap.agents}
        taken: set[tuple[str, int]] = set()
        gained: Counter[str] = Counter()
        for alloc_id, placement in decisions.assignments.items():
            r = pending[alloc_id]
            assert placement, alloc_id
            for agent_id, slot_ids in placement:
                a = agents[agent_id]
                assert a.enabled, f"{alloc_id} placed on disabled agent {agent_id}"
                assert a.pool == r.pool, f"{alloc_id} of pool {r.pool} placed in pool {a.pool}"
                for s in slot_ids:
                    assert s in a.free and (agent_id, s) not in taken, (
                        f"slot {agent_id}/{s} double-booked"
                    )
                    taken.add((agent_id, s))
            assert sum(len(p.slot_ids) for p in placement) == r.slots, (
                f"{alloc_id} partially placed"
            )
            largest = max(
                (a.total for a in snap.agents if a.pool == r.pool and a.enabled), default=0
            )
            if r.slots <= largest:
                assert len(placement) == 1, f"{alloc_id} spans agents though one could hold it"
            gained[r.job] += r.slots
            if r.max_slots is not None:
                assert self.held(r.job) + gained[r.job] <= r.max_slots, f"{r.job} over max_slots"
        assert len(set(decisions.preemptions)) == len(decisions.preemptions)
        for alloc_id in decisions.preemptions:
            assert self.preempts, "a policy without preemption preempted"
            run = self.running[alloc_id]
            assert run.preemptible and not run.preempting, f"{alloc_id} may not be preempted"

    def check_no_double_booking(self) -> None:
        used = Counter(
            (p.agent_id, s)
            for run in self.running.values()
            for p in run.placement
            for s in p.slot_ids
        )
        assert all(n == 1 for n in used.values()), f"double-booked: {used.most_common(1)}"
        for agent_id, s in used:
            if agent_id in self.agents:
                assert s < self.agents[agent_id].total


def _held_by_job(sim: Sim) -> dict[str, int]:
    held: Counter[str] = Counter()
    for run in sim.running.values():
        held[run.job] += run.slots
    return dict(held)


def test_determined_priority_example_with_preemption() -> None:
    """The 7 steps of Determined's priority-scheduler example (seed 003), on 8 slots."""
    sim = Sim.of("priority", preemption=True)
    sim.join("gpu", 8)
    # 1. A priority-2 ASHA experiment with 20 concurrent 1-slot trials takes all 8 GPUs.
    sim.submit("asha", 20, 1, priority=2, preemptible=True)
    sim.settle()
    assert _held_by_job(sim) == {"asha": 8}
    # 2. A priority-1 distributed experiment (4 slots) preempts 4 ASHA trials.
    sim.submit("dist1", 1, 4, priority=1, preemptible=True)
    first = sim.step()
    assert len(first.preemptions) == 4 and not first.assignments
    sim.settle()
    assert _held_by_job(sim) == {"asha": 4, "dist1": 4}
    # 3. A priority-3 notebook waits while the experiments need all 8.
    (notebook,) = sim.submit("notebook", 1, 1, priority=3)
    sim.settle()
    assert notebook in sim.pending
    # ... and runs once they collectively need 7 or fewer (here: ASHA is done).
    sim.kill("asha")
    sim.settle()
    assert _held_by_job(sim) == {"dist1": 4, "notebook": 1}
    # 4. The distributed experiment completes; the notebook keeps running.
    sim.kill("dist1")
    sim.settle()
    # 5. A priority-1 8-slot experiment cannot run: the notebook is not preemptible.
    (big,) = sim.submit("dist8", 1, 8, priority=1, preemptible=True)
    sim.settle()
    assert big in sim.pending
    # 6. A priority-2 4-slot experiment is backfilled onto the idle 7 slots.
    sim.submit("dist2", 1, 4, priority=2, preemptible=True)
    sim.settle()
    assert _held_by_job(sim) == {"notebook": 1, "dist2": 4}
    # 7. The notebook is killed: dist2 is preempted and dist8 runs; dist2 resumes after it.
    sim.kill("notebook")
    decisions = sim.step()
    assert [sim.running[a].job for a in decisions.preemptions] == ["dist2"]
    sim.settle()
    assert _held_by_job(sim) == {"dist8": 8}
    sim.kill("dist8")
    sim.settle()
    assert _held_by_job(sim) == {"dist2": 4}


def test_without_preemption_the_urgent_gang_waits_for_asha_to_shrink() -> None:
    sim = Sim.of("priority")
    sim.join("gpu", 8)
    sim.submit("asha", 20, 1, priority=2, preemptible=True)
    sim.settle()
    sim.submit("dist1", 1, 4, priority=1, preemptible=True)
    sim.settle()
    assert _held_by_job(sim) == {"asha": 8}
    trials = sorted(a for a, run in sim.running.items() if run.job == "asha")
    for alloc_id in trials[:3]:
        sim.finish(alloc_id)
    sim.settle()  # 3 free slots stay idle: no ASHA trial may jump the blocked gang
    assert _held_by_job(sim) == {"asha": 5}
    sim.finish(trials[3])
    sim.settle()
    assert _held_by_job(sim) == {"asha": 4, "dist1": 4}


def test_fair_share_rebalances_with_checkpointed_preemption() -> None:
    sim = Sim.of("fair_share")
    sim.join("a", 4)
    sim.join("b", 4)
    sim.submit("first", 10, 1, preemptible=True)
    sim.settle()
    assert _held_by_job(sim) == {"first": 8}
    # A second job with demand 30: shares 8·10/40 = 2 and 8·30/40 = 6.
    sim.submit("second", 30, 1, preemptible=True)
    decisions = sim.step()
    assert len(decisions.preemptions) == 6 and not decisions.assignments
    sim.settle()
    assert _held_by_job(sim) == {"first": 2, "second": 6}
    # Demand changes: the second job is paused; the first takes the cluster back.
    sim.pause("second")
    sim.settle()
    assert _held_by_job(sim) == {"first": 8}


def test_fair_share_weights_from_the_issue() -> None:
    sim = Sim.of("fair_share")
    sim.join("a", 8)
    sim.submit("first", 10, 1, preemptible=True, weight=3)
    sim.submit("second", 30, 1, preemptible=True, weight=1)
    sim.settle()
    assert _held_by_job(sim) == {"first": 4, "second": 4}


def test_round_robin_jobs_take_turns() -> None:
    sim = Sim.of("round_robin")
    sim.join("a", 5)
    sim.submit("first", 4, 1)
    sim.submit("second", 4, 1)
    sim.step()
    assert _held_by_job(sim) == {"first": 3, "second": 2}
