"""Fair share: the share arithmetic and the policy's rules, with concrete numbers."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from det_jupyter.scheduler import (
    AgentSlots,
    JobDemand,
    Placement,
    Request,
    Running,
    Snapshot,
    fair_shares,
    ideal_shares,
    schedule_fair_share,
)

from .test_scheduler_properties import SETTINGS


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        # The issue's (and Determined's docs') examples, 8 slots.
        ([JobDemand("a", 10), JobDemand("b", 30)], {"a": 2, "b": 6}),
        ([JobDemand("a", 10, weight=3), JobDemand("b", 30, weight=1)], {"a": 4, "b": 4}),
        # Capped by demand; the rest goes to the others.
        ([JobDemand("a", 2, weight=10), JobDemand("b", 30)], {"a": 2, "b": 6}),
        # Slots that cannot be preempted stay with their job.
        ([JobDemand("a", 6, floor=6), JobDemand("b", 30)], {"a": 6, "b": 2}),
        # Demand below capacity: everyone gets all it wants.
        ([JobDemand("a", 3), JobDemand("b", 2)], {"a": 3, "b": 2}),
        # Half slots: the earlier job gets the odd one.
        ([JobDemand("a", 1), JobDemand("b", 15)], {"a": 1, "b": 7}),
    ],
)
def test_fair_shares_of_eight_slots(jobs: list[JobDemand], expected: dict[str, int]) -> None:
    assert fair_shares(8, jobs) == expected


def test_ideal_shares_are_exact() -> None:
    assert ideal_shares(8, [JobDemand("a", 10), JobDemand("b", 30)]) == {"a": 2, "b": 6}
    thirds = ideal_shares(1, [JobDemand("a", 1), JobDemand("b", 1), JobDemand("c", 1)])
    assert thirds == {j: Fraction(1, 3) for j in "abc"}
    assert fair_shares(1, [JobDemand("a", 1), JobDemand("b", 1), JobDemand("c", 1)]) == {
        "a": 1,
        "b": 0,
        "c": 0,
    }


@SETTINGS
@given(
    capacity=st.integers(0, 40),
    jobs=st.lists(
        st.tuples(st.integers(0, 30), st.sampled_from([0.5, 1.0, 2.0, 3.0]), st.integers(0, 6)),
        max_size=6,
    ),
)
def test_fair_shares_sum_to_capacity_within_bounds_and_one_slot(capacity, jobs) -> None:
    demands = [JobDemand(f"j{i}", d, w, min(f, d)) for i, (d, w, f) in enumerate(jobs)]
    ideal = ideal_shares(capacity, demands)
    shares = fair_shares(capacity, demands)
    floors = sum(j.floor for j in demands)
    assert sum(shares.values()) == max(floors, min(capacity, sum(j.demand for j in demands)))
    for j in demands:
        assert j.floor <= shares[j.job] <= max(j.demand, j.floor)
        assert abs(shares[j.job] - ideal[j.job]) < 1
    if floors < capacity:
        assert sum(ideal.values()) == min(capacity, sum(j.demand for j in demands))


def _agent(aid: str, total: int, used: tuple[int, ...] = ()) -> AgentSlots:
    return AgentSlots(aid, "", tuple(s for s in range(total) if s not in used), total)


def _trial(job: str, i: int, slots: int = 1, at: float = 0.0) -> Request:
    return Request(f"{job}.{i}", slots, 42, at, job_id=job, preemptible=True)


def _running(job: str, i: int, agent: str, slot_ids: tuple[int, ...], at: float = 0.0) -> Running:
    return Running(f"{job}.{i}", job, (Placement(agent, slot_ids),), 42, at, preemptible=True)


def test_preempts_only_what_brings_a_job_closer_to_its_share() -> None:
    # "big" holds 8 in two 4-slot gangs, its share is 7 (demand 8 vs 1): preempting a gang
    # to give "small" its one slot would leave 3 slots idle, so nothing is preempted.
    snap = Snapshot(
        (_trial("small", 0, at=5),),
        (_agent("a", 4, used=(0, 1, 2, 3)), _agent("b", 4, used=(0, 1, 2, 3))),
        (_running("big", 0, "a", (0, 1, 2, 3)), _running("big", 1, "b", (0, 1, 2, 3), at=1)),
    )
    assert schedule_fair_share(snap, 0) == schedule_fair_share(snap, 0, preemption=False)
    assert schedule_fair_share(snap, 0).preemptions == ()


def test_over_share_jobs_lose_their_newest_allocations_first() -> None:
    running = tuple(_running("first", i, "a", (i,), at=i) for i in range(4))
    snap = Snapshot(
        tuple(_trial("second", i, at=10 + i) for i in range(4)),
        (_agent("a", 4, used=(0, 1, 2, 3)),),
        running,
    )
    decisions = schedule_fair_share(snap, 0)
    assert decisions.preemptions == ("first.3", "first.2")
    assert decisions.assignments == {}


def test_free_slots_nobody_below_share_can_use_go_to_whoever_can() -> None:
    # "gang" may get 4 of 8 but needs 6 at once: it gives up its share, "trials" take all.
    snap = Snapshot(
        (
            Request("gang.0", 6, 42, 0, job_id="gang", preemptible=True),
            *(_trial("trials", i, at=1 + i) for i in range(8)),
        ),
        (_agent("a", 4), _agent("b", 4)),
    )
    assert len(schedule_fair_share(snap, 0).assignments) == 8


def test_work_conserving_beyond_the_share() -> None:
    # Shares: "a" 3 (demand 8), "b" 5 (demand 6, weight 2). "b" runs one 3-slot gang; its
    # second does not fit in the 2 slots it still lacks, so those go to "a" rather than idle.
    b_gangs = (
        Request(f"b.{i}", 3, 42, 10 + i, job_id="b", weight=2, preemptible=True) for i in range(2)
    )
    snap = Snapshot((*(_trial("a", i, at=i) for i in range(8)), *b_gangs), (_agent("x", 8),))
    decisions = schedule_fair_share(snap, 0)
    held = {}
    for alloc_id in decisions.assignments:
        job = alloc_id.split(".")[0]
        held[job] = held.get(job, 0) + (3 if job == "b" else 1)
    assert held == {"a": 5, "b": 3}


def test_zero_slot_tasks_place_fifo_apart_from_shares() -> None:
    snap = Snapshot(
        (Request("tb", 0, 42, 0, job_id="tb"), _trial("a", 0, at=1)), (_agent("x", 1, used=(0,)),)
    )
    assert schedule_fair_share(snap, 0).assignments == {"tb": (Placement("x", ()),)}
