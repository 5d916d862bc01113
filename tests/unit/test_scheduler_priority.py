"""The priority policy, rule by rule (Determined's semantics; docstring of _priority.py)."""

from __future__ import annotations

from det_jupyter.scheduler import (
    AgentSlots,
    Placement,
    Request,
    Running,
    Snapshot,
    schedule_priority,
)


def req(aid: str, slots: int, priority: int = 42, at: float = 0.0, **kw) -> Request:
    return Request(aid, slots, priority, at, **kw)


def agent(
    aid: str, total: int, used: tuple[int, ...] = (), pool: str = "", enabled: bool = True
) -> AgentSlots:
    free = tuple(s for s in range(total) if s not in used)
    return AgentSlots(aid, pool, free, total, enabled)


def run(
    aid: str, where: dict[str, tuple[int, ...]], priority: int = 42, at: float = 0.0, **kw
) -> Running:
    placement = tuple(Placement(a, ids) for a, ids in where.items())
    return Running(aid, kw.pop("job_id", aid), placement, priority, at, **kw)


def test_lower_priority_number_first_then_fifo_among_equals() -> None:
    snap = Snapshot(
        (req("late", 1, 42, at=1), req("urgent", 1, 10, at=2), req("early", 1, 42, at=0)),
        (agent("a", 2),),
    )
    decisions = schedule_priority(snap, 0)
    assert list(decisions.assignments) == ["urgent", "early"]


def test_legacy_schedule_places_on_one_agent_only() -> None:
    snap = Snapshot((req("gang", 6), req("one", 1, at=1)), (agent("a", 4), agent("b", 4)))
    # Without spanning the 6-slot gang can never run, so it blocks nothing.
    assert schedule_priority(snap, 0, span_agents=False).assignments == {"one": (Placement("a", (0,)),)}
    spanning = schedule_priority(snap, 0).assignments
    assert spanning["gang"] == (Placement("a", (0, 1, 2, 3)), Placement("b", (0, 1)))


def test_a_blocked_request_holds_back_what_queues_behind_it() -> None:
    busy = run("notebook", {"a": (0, 1)}, preemptible=False)
    snap = Snapshot(
        (req("big", 3, at=0), req("small", 1, at=1)), (agent("a", 4, used=(0, 1)),), (busy,)
    )
    assert schedule_priority(snap, 0).assignments == {}


def test_backfill_onto_agents_the_blocked_request_could_never_use() -> None:
    # "big" needs 3 slots on one agent: only "a" (4 slots) could ever hold it, so "small"
    # may take the idle 2-slot agent but not a's free slots.
    snap = Snapshot(
        (req("big", 3, at=0), req("small", 1, at=1), req("small2", 2, at=2)),
        (agent("a", 4, used=(0, 1)), agent("b", 2)),
        (run("notebook", {"a": (0, 1)}),),
    )
    assert schedule_priority(snap, 0).assignments == {"small": (Placement("b", (0,)),)}


def test_preemptible_requests_backfill_when_preemption_is_on() -> None:
    notebook = run("notebook", {"a": (0, 1)}, priority=1, preemptible=False)
    snap = Snapshot(
        (
            req("big", 4, 1, at=0),
            req("trial", 1, 2, at=1, preemptible=True),
            req("cmd", 1, 2, at=2),
        ),
        (agent("a", 4, used=(0, 1)),),
        (notebook,),
    )
    decisions = schedule_priority(snap, 0, preemption=True)
    assert decisions.assignments == {"trial": (Placement("a", (2,)),)}
    assert decisions.preemptions == ()
    assert schedule_priority(snap, 0).assignments == {}  # without preemption nothing may backfill


def test_a_request_larger_than_its_pool_blocks_nothing_and_preempts_nothing() -> None:
    snap = Snapshot(
        (req("huge", 16, 1, at=0), req("small", 1, 50, at=1)),
        (agent("a", 8, used=(0, 1, 2, 3, 4, 5, 6)),),
        (run("victim", {"a": (0, 1, 2, 3, 4, 5, 6)}, 60, preemptible=True),),
    )
    decisions = schedule_priority(snap, 0, preemption=True)
    assert decisions.assignments == {"small": (Placement("a", (7,)),)}
    assert decisions.preemptions == ()


def test_preemption_takes_lowest_priority_newest_first_and_spares_the_unneeded() -> None:
    running = (
        run("small-new", {"a": (0,)}, 50, at=5, preemptible=True),
        run("big-old", {"a": (1, 2, 3, 4)}, 50, at=1, preemptible=True),
        run("mid", {"a": (5, 6)}, 30, at=9, preemptible=True),
        run("notebook", {"a": (7,)}, 90, at=9, preemptible=False),
        run("higher", {"b": (0, 1)}, 5, at=9, preemptible=True),
    )
    snap = Snapshot(
        (req("urgent", 4, 10, at=10), req("filler", 1, 60, at=11)),
        (agent("a", 8, used=tuple(range(8))), agent("b", 2, used=(0, 1))),
        running,
    )
    decisions = schedule_priority(snap, 0, preemption=True)
    # Order tried: small-new (1 slot, not enough), big-old (enough); small-new is then spared.
    assert decisions.preemptions == ("big-old",)
    assert decisions.assignments == {}  # urgent waits for big-old to checkpoint and exit


def test_preemption_reserves_the_room_it_makes() -> None:
    running = (run("low", {"a": (0, 1, 2)}, 50, at=1, preemptible=True),)
    snap = Snapshot(
        (req("urgent", 4, 10, at=10), req("filler", 1, 60, at=11, preemptible=True)),
        (agent("a", 4, used=(0, 1, 2)),),
        running,
    )
    decisions = schedule_priority(snap, 0, preemption=True)
    assert decisions.preemptions == ("low",)
    assert decisions.assignments == {}  # slot 3 is urgent's, not filler's


def test_slots_already_being_released_are_waited_for_not_preempted_again() -> None:
    running = (
        run("leaving", {"a": (0, 1)}, 50, at=1, preemptible=True, preempting=True),
        run("other", {"a": (2, 3)}, 50, at=2, preemptible=True),
    )
    snap = Snapshot((req("urgent", 2, 10, at=10),), (agent("a", 4, used=(0, 1, 2, 3)),), running)
    decisions = schedule_priority(snap, 0, preemption=True)
    assert decisions.preemptions == ()
    assert decisions.assignments == {}


def test_never_preempts_ahead_in_the_queue_or_non_preemptible() -> None:
    running = (
        run("same-but-older", {"a": (0, 1)}, 10, at=1, preemptible=True),
        run("notebook", {"a": (2, 3)}, 90, at=1, preemptible=False),
    )
    snap = Snapshot((req("r", 2, 10, at=5),), (agent("a", 4, used=(0, 1, 2, 3)),), running)
    assert schedule_priority(snap, 0, preemption=True).preemptions == ()


def test_equal_priority_backfill_is_taken_back_by_the_request_it_jumped() -> None:
    # "late" was backfilled (preemptible) while "early" waited; now "early" can fit by
    # preempting it, since it is behind in queue order.
    running = (run("late", {"a": (2, 3)}, 42, at=5, preemptible=True),)
    snap = Snapshot((req("early", 4, 42, at=1),), (agent("a", 4, used=(2, 3)),), running)
    assert schedule_priority(snap, 0, preemption=True).preemptions == ("late",)


def test_zero_slot_tasks_always_place_spread_over_agents() -> None:
    snap = Snapshot(
        (req("big", 8, 1, at=0), req("tb1", 0, 99, at=1), req("tb2", 0, 99, at=2)),
        (agent("a", 4), agent("b", 4, used=(0,))),
        (run("shell", {"a": ()}),),
    )
    assignments = schedule_priority(snap, 0, span_agents=False).assignments
    assert assignments == {"tb1": (Placement("b", ()),), "tb2": (Placement("a", ()),)}


def test_disabled_agents_get_nothing_new() -> None:
    snap = Snapshot(
        (req("r", 2), req("z", 0, at=1)), (agent("off", 8, enabled=False), agent("on", 1))
    )
    assignments = schedule_priority(snap, 0).assignments
    assert assignments == {"z": (Placement("on", ()),)}


def test_max_slots_caps_the_job_and_does_not_block_others() -> None:
    snap = Snapshot(
        (req("exp.2", 2, at=1, job_id="exp", max_slots=4), req("cmd", 1, at=2)),
        (agent("a", 8, used=(0, 1, 2)),),
        (run("exp.1", {"a": (0, 1, 2)}, job_id="exp"),),
    )
    assert list(schedule_priority(snap, 0).assignments) == ["cmd"]


def test_pools_are_scheduled_independently() -> None:
    snap = Snapshot(
        (req("blocked", 4, 1, resource_pool="gpu"), req("cpu", 1, 99, at=1, resource_pool="cpu")),
        (agent("g", 4, used=(0,), pool="gpu"), agent("c", 2, pool="cpu")),
        (run("notebook", {"g": (0,)}, resource_pool="gpu"),),
    )
    assert schedule_priority(snap, 0).assignments == {"cpu": (Placement("c", (0,)),)}


def test_a_job_never_preempts_its_own_allocations() -> None:
    """A trial of a search queued again after a preemption shares its job's place in the queue:
    it must not preempt its siblings (ids sorting after it) to get back in."""
    snap = Snapshot(
        (req("exp.a.2", 1, 2, at=1, job_id="exp", preemptible=True),),
        (agent("a", 2, used=(0, 1)),),
        (run("exp.b.1", {"a": (0,)}, 2, at=1, preemptible=True, job_id="exp"),
         run("other", {"a": (1,)}, 2, at=0, preemptible=True)),
    )
    decisions = schedule_priority(snap, 0, preemption=True)
    assert decisions.preemptions == () and decisions.assignments == {}
