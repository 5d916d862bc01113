"""Property tests: every policy over random histories of a small simulated cluster.

Each history starts with 1-3 agents and applies 4-24 random events (submit, finish,
kill, pause, agent join, agent loss, disable, enable), running two scheduling passes after
each. What is asserted:

- safety, on every pass (``Sim.check``): no slot double-booked, gangs all-or-nothing and on
  one agent whenever one could hold them, pools respected, disabled agents get nothing
  new, ``max_slots`` respected, only preemptible allocations preempted and only by
  policies that preempt;
- liveness within two passes: a zero-slot request whose pool has an enabled agent is
  placed; under priority, the head of a pool's queue (its first request that could run in
  the empty pool and within its job's ``max_slots``) is placed if it fits in the pool's free
  slots — with preemption on, in free slots plus those of allocations being released and of
  preemptible allocations of other jobs behind it in the queue. (Requests behind a blocked head may wait
  by design: backfilling must not delay the head.)
- priority never lets a request jump one that waits ahead of it in its pool onto agents
  the waiting one could use, unless preemption is on and the jumper is preemptible
  (checked on passes where no slots are reserved for a request waiting on preemptions);
- priority preemption (its own test: random work fills the cluster, then one request
  arrives): only preemptible allocations behind it in the queue are preempted, only when
  that makes room, none of the victims could have been spared, and the request is placed
  in the pass after they exit;
- work conservation after each pass: under round robin no job's oldest request fits in
  what is left free; under fair share, when nothing was being released and nothing was
  preempted, no pending request fits in what is left free;
- fair share, with single-slot requests: after every event the cluster settles (a pass
  with no decisions and nothing being released, within 12 passes: no preemption
  ping-pong) with each job holding within one slot of its ideal share, computed here
  independently by bisection.

``DET_TEST_HYPOTHESIS_EXAMPLES`` sets the number of examples per test and policy
configuration (default 200).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from det_jupyter.scheduler import Request, queue_key

from .test_scheduler_sim import Sim

EXAMPLES = int(os.environ.get("DET_TEST_HYPOTHESIS_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)

POOLS = st.sampled_from(["", "", "aux"])
INDEX = st.integers(0, 50)
CONFIGS = [
    ("priority", False),
    ("priority", True),
    ("fair_share", True),
    ("fair_share", False),
    ("round_robin", None),
]


def _submit(slots: st.SearchStrategy[int], pools: st.SearchStrategy[str]) -> st.SearchStrategy:
    return st.tuples(
        st.just("submit"),
        st.integers(1, 4),  # allocations
        slots,
        st.integers(1, 3),  # priority
        st.sampled_from([1.0, 2.0, 3.0]),  # weight
        st.sampled_from([True, True, True, False]),  # preemptible
        pools,
        st.sampled_from([None, None, None, 2, 4]),  # max_slots
    )


# Submissions and finishes dominate, so clusters fill up and policies have to choose.
KINDS = ["submit"] * 6 + ["finish"] * 2 + ["kill", "pause", "join", "leave", "disable", "enable"]


def _events(slots: st.SearchStrategy[int], pools: st.SearchStrategy[str]) -> st.SearchStrategy:
    event = {
        "submit": _submit(slots, pools),
        "join": st.tuples(st.just("join"), pools, st.integers(1, 4)),
    }

    def of_kind(kind: str) -> st.SearchStrategy:
        return event[kind] if kind in event else st.tuples(st.just(kind), INDEX)

    return st.lists(st.sampled_from(KINDS).flatmap(of_kind), min_size=4, max_size=24)


AGENTS = st.lists(st.tuples(POOLS, st.integers(1, 4)), min_size=1, max_size=3)
ANY_SLOTS = st.sampled_from([0, 1, 1, 2, 2, 3, 4, 6])


def apply(sim: Sim, event: tuple) -> None:
    kind = event[0]
    if kind == "submit":
        _, count, slots, priority, weight, preemptible, pool, max_slots = event
        job = f"j{sim.ticks}"
        sim.submit(
            job,
            count,
            slots,
            priority=priority,
            weight=weight,
            preemptible=preemptible,
            resource_pool=pool,
            max_slots=max_slots,
        )
    elif kind == "join":
        sim.join(f"agent{sim.ticks}", event[2], event[1])
        sim.ticks += 1
    else:
        _churn(sim, kind, event[1])


def _churn(sim: Sim, kind: str, index: int) -> None:
    jobs = sorted({r.job for r in sim.pending.values()} | {r.job for r in sim.running.values()})
    running = sorted(sim.running)
    agents = sorted(sim.agents)
    if kind == "finish" and running:
        sim.finish(running[index % len(running)])
    elif kind in ("kill", "pause") and jobs:
        getattr(sim, kind)(jobs[index % len(jobs)])
    elif kind == "leave" and agents:
        sim.leave(agents[index % len(agents)])
    elif kind in ("disable", "enable") and agents:
        sim.agents[agents[index % len(agents)]].enabled = kind == "enable"


# -- the oracles: plain restatements of the rules, not the policy code ---------------------


def _enabled_totals(sim: Sim, pool: str) -> list[int]:
    return [a.total for a in sim.agents.values() if a.enabled and (a.pool or "default") == pool]


def _could_ever_run(sim: Sim, r: Request) -> bool:
    totals = _enabled_totals(sim, r.pool)
    if not totals or (r.max_slots is not None and r.slots > r.max_slots):
        return False
    return r.slots <= max(totals) or r.slots <= sum(totals)


def _within_max(sim: Sim, r: Request) -> bool:
    return r.max_slots is None or sim.held(r.job) + r.slots <= r.max_slots


def _fits(sim: Sim, r: Request, room: dict[str, int]) -> bool:
    """Would ``r`` fit in ``room`` (free slots per enabled agent of its pool)?"""
    totals = _enabled_totals(sim, r.pool)
    if r.slots <= max(totals, default=0):
        return any(n >= r.slots for n in room.values())
    return sum(room.values()) >= r.slots


def _room(sim: Sim, pool: str, also=lambda run: False) -> dict[str, int]:
    """Free slots per enabled agent of the pool, plus those of running allocations ``also``."""
    room = {
        aid: len(sim.free(aid))
        for aid, a in sim.agents.items()
        if a.enabled and (a.pool or "default") == pool
    }
    for run in sim.running.values():
        if also(run):
            for agent_id, slot_ids in run.placement:
                if agent_id in room:
                    room[agent_id] += len(slot_ids)
    return room


def entitled(sim: Sim, name: str) -> set[str]:
    """Requests that must be placed within two passes (module docstring)."""
    owed = {
        r.allocation_id
        for r in sim.pending.values()
        if r.slots == 0 and _enabled_totals(sim, r.pool)
    }
    if name != "priority":
        return owed
    for pool in {r.pool for r in sim.pending.values()}:
        queue = sorted(
            (r for r in sim.pending.values() if r.pool == pool and r.slots > 0), key=queue_key
        )
        head = next((r for r in queue if _could_ever_run(sim, r) and _within_max(sim, r)), None)
        if head is None:
            continue
        room = _room(
            sim,
            pool,
            lambda run, head=head: (
                sim.preempts
                and (run.preempting or (run.preemptible and run.job != head.job
                                        and queue_key(run) > queue_key(head)))
            ),
        )
        if _fits(sim, head, room):
            owed.add(head.allocation_id)
    return owed


def check_work_conserving(sim: Sim, name: str, was_leaving: bool, preempted: bool) -> None:
    if name == "round_robin":
        firsts: dict[str, Request] = {}
        for r in sorted(sim.pending.values(), key=lambda r: (r.submitted_at, r.allocation_id)):
            if r.slots > 0 and _could_ever_run(sim, r):
                firsts.setdefault(r.job, r)
        candidates = list(firsts.values())
    elif name == "fair_share" and not was_leaving and not preempted:
        candidates = [r for r in sim.pending.values() if r.slots > 0 and _could_ever_run(sim, r)]
    else:
        return
    for r in candidates:
        if _within_max(sim, r):
            assert not _fits(sim, r, _room(sim, r.pool)), (
                f"{name} left {r.allocation_id} waiting on free slots"
            )


def _usable(sim: Sim, r: Request) -> set[str]:
    pool = {
        aid: a.total
        for aid, a in sim.agents.items()
        if a.enabled and (a.pool or "default") == r.pool
    }
    if r.slots > max(pool.values(), default=0):
        return set(pool)
    return {aid for aid, total in pool.items() if total >= r.slots}


def blocking(sim: Sim) -> list[tuple[Request, set[str]]]:
    """Pending requests (before a pass) that later ones may not jump, with their agents."""
    return [
        (r, _usable(sim, r))
        for r in sim.pending.values()
        if r.slots > 0 and _could_ever_run(sim, r) and _within_max(sim, r)
    ]


def check_no_jumping(sim: Sim, before: list[tuple[Request, set[str]]], assigned: dict) -> None:
    """Priority: a request placed while one ahead of it in its pool still waits took no slot
    the waiting one could use — unless preemption is on and it is preemptible."""
    for alloc_id, placement in assigned.items():
        r = sim.requests[alloc_id]
        if r.slots == 0 or (sim.preempts and r.preemptible):
            continue
        for ahead, agents in before:
            if (
                ahead.pool == r.pool
                and queue_key(ahead) < queue_key(r)
                and ahead.allocation_id in sim.pending
                and _within_max(sim, ahead)  # else it now waits on its own job, not on slots
            ):
                used = {p.agent_id for p in placement}
                assert not used & agents, f"{alloc_id} jumped {ahead.allocation_id}"


@pytest.mark.parametrize(("name", "preemption"), CONFIGS)
@SETTINGS
@given(fitting=st.sampled_from(["best", "worst"]), agents=AGENTS, events=_events(ANY_SLOTS, POOLS))
def test_random_histories_keep_every_invariant(name, preemption, fitting, agents, events) -> None:
    sim = Sim.of(name, preemption, fitting)
    for pool, total in agents:
        sim.join(f"agent{sim.ticks}", total, pool)
        sim.ticks += 1
    for event in events:
        apply(sim, event)
        owed = entitled(sim, name)
        for _ in range(2):
            was_leaving, before = bool(sim.leaving), blocking(sim)
            decisions = sim.step()
            check_work_conserving(sim, name, was_leaving, bool(decisions.preemptions))
            if name == "priority" and not (sim.preempts and (was_leaving or decisions.preemptions)):
                check_no_jumping(sim, before, dict(decisions.assignments))  # no reservations
        late = owed & set(sim.pending)
        assert not late, f"{name}: {sorted(late)} could run but still wait after two passes"


# -- fair share settles near the ideal -------------------------------------------------------


def ideal_shares(sim: Sim) -> dict[str, float]:
    """Shares ∝ demand × weight, capped by demand, at least the non-preemptible slots held,
    of the enabled slots (work on disabled agents is draining, outside the share)."""
    enabled = {aid for aid, a in sim.agents.items() if a.enabled}
    capacity = sum(sim.agents[aid].total for aid in enabled)
    demand: Counter[str] = Counter()
    floor: Counter[str] = Counter()
    weight: dict[str, float] = {}
    cap: dict[str, int | None] = {}
    for r in sim.pending.values():
        if _could_ever_run(sim, r):
            demand[r.job] += r.slots
            weight[r.job], cap[r.job] = r.weight, r.max_slots
    draining: Counter[str] = Counter()  # max_slots counts these too
    for run in sim.running.values():
        usable = sum(len(p.slot_ids) for p in run.placement if p.agent_id in enabled)
        demand[run.job] += usable
        floor[run.job] += 0 if run.preemptible else usable
        draining[run.job] += run.slots - usable
        weight[run.job] = run.weight
    for job, limit in cap.items():
        if limit is not None:
            demand[job] = min(demand[job], limit - draining[job])
    jobs = sorted(weight)
    lo = {j: float(floor[j]) for j in jobs}
    hi = {j: float(max(demand[j], floor[j])) for j in jobs}

    def at(level: float) -> dict[str, float]:
        return {j: min(max(level * demand[j] * weight[j], lo[j]), hi[j]) for j in jobs}

    if sum(lo.values()) >= capacity:
        return lo
    if sum(hi.values()) <= capacity:
        return hi
    low, high = 0.0, max(hi[j] / (demand[j] * weight[j]) for j in jobs if demand[j])
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if sum(at(mid).values()) < capacity else (low, mid)
    return at(high)


def _held_on_enabled(sim: Sim) -> Counter[str]:
    held: Counter[str] = Counter()
    for run in sim.running.values():
        held[run.job] += sum(
            len(p.slot_ids) for p in run.placement if sim.agents[p.agent_id].enabled
        )
    return held


@SETTINGS
@given(
    agents=st.lists(st.tuples(st.just(""), st.integers(1, 4)), min_size=1, max_size=3),
    events=_events(st.just(1), st.just("")),
)
def test_fair_share_settles_within_one_slot_of_the_ideal(agents, events) -> None:
    sim = Sim.of("fair_share")
    for pool, total in agents:
        sim.join(f"agent{sim.ticks}", total, pool)
        sim.ticks += 1
    for event in events:
        apply(sim, event)
        sim.settle()
        held = _held_on_enabled(sim)
        for job, share in ideal_shares(sim).items():
            assert abs(held[job] - share) <= 1 + 1e-6, f"{job} holds {held[job]}, ideal {share:.3f}"


# -- priority preemption: enough, and nothing more ------------------------------------------


@SETTINGS
@given(
    agents=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    background=st.lists(
        st.tuples(st.integers(1, 3), st.integers(2, 5), st.sampled_from([True, True, False])),
        min_size=3,
        max_size=10,
    ),
    urgent=st.tuples(st.integers(1, 6), st.sampled_from([1, 1, 2, 3]), st.booleans()),
)
def test_priority_preemption_takes_a_minimal_set_that_makes_room(
    agents, background, urgent
) -> None:
    sim = Sim.of("priority", preemption=True)
    for total in agents:
        sim.join(f"agent{sim.ticks}", total)
        sim.ticks += 1
    for slots, priority, preemptible in background:
        sim.submit(f"bg{sim.ticks}", 1, slots, priority=priority, preemptible=preemptible)
    sim.settle()
    sim.pending.clear()  # only the urgent request competes
    slots, priority, preemptible = urgent
    (alloc_id,) = sim.submit("urgent", 1, slots, priority=priority, preemptible=preemptible)
    head = sim.pending[alloc_id]
    behind = {
        a for a, run in sim.running.items() if run.preemptible and queue_key(run) > queue_key(head)
    }
    could = _could_ever_run(sim, head) and _fits(
        sim, head, _room(sim, "default", lambda r: r.allocation_id in behind)
    )

    decisions = sim.step()
    victims = set(decisions.preemptions)
    assert victims <= behind, "preempted something ahead of the request or not preemptible"
    if alloc_id in decisions.assignments:
        assert not victims
    elif could:
        assert victims, "nothing preempted though preempting would make room"
        room = _room(sim, "default", lambda r: r.allocation_id in victims)
        assert _fits(sim, head, room), "the victims do not make room"
        for victim in victims:
            spared = _room(sim, "default", lambda r, v=victim: r.allocation_id in victims - {v})
            assert not _fits(sim, head, spared), f"{victim} was not needed"
        sim.step()
        assert alloc_id not in sim.pending, "not placed once the victims exited"
    else:
        assert not victims, "preempted for a request that cannot fit anyway"
