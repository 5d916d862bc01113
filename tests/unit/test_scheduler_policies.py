"""Round robin, choosing a policy by name, and the wait reasons the job queue will show."""

from __future__ import annotations

import pytest

from det_jupyter.scheduler import (
    POLICIES,
    AgentSlots,
    Placement,
    Request,
    Running,
    Snapshot,
    make_policy,
    schedule_round_robin,
    wait_reason,
)


def _agent(
    aid: str, total: int, used: tuple[int, ...] = (), pool: str = "", enabled: bool = True
) -> AgentSlots:
    return AgentSlots(aid, pool, tuple(s for s in range(total) if s not in used), total, enabled)


def _req(aid: str, slots: int, priority: int = 42, at: float = 0.0, **kw) -> Request:
    return Request(aid, slots, priority, at, **kw)


# -- round robin -----------------------------------------------------------------------------


def test_round_robin_turns_start_with_the_job_holding_least() -> None:
    snap = Snapshot(
        (
            _req("a.0", 1, at=0, job_id="a"),
            _req("a.1", 1, at=1, job_id="a"),
            _req("b.0", 1, at=2, job_id="b"),
        ),
        (_agent("x", 4, used=(0,)),),
        (Running("a.old", "a", (Placement("x", (0,)),), 42),),
    )
    assert list(schedule_round_robin(snap, 0).assignments) == ["b.0", "a.0", "a.1"]


def test_round_robin_job_whose_request_does_not_fit_sits_out_the_pass() -> None:
    snap = Snapshot(
        (
            _req("a.0", 3, at=0, job_id="a"),
            _req("a.1", 1, at=1, job_id="a"),
            _req("b.0", 1, at=2, job_id="b"),
        ),
        (_agent("x", 4, used=(0, 1)),),
    )
    assert list(schedule_round_robin(snap, 0).assignments) == ["b.0"]  # a.1 stays behind a.0


# -- make_policy -----------------------------------------------------------------------------


def test_make_policy_defaults_follow_determined() -> None:
    assert set(POLICIES) == {"priority", "fair_share", "round_robin"}
    assert make_policy().keywords == {"fitting": "best", "preemption": False}
    assert make_policy("fair_share").keywords == {"fitting": "best", "preemption": True}
    assert make_policy("round_robin", fitting="worst").keywords == {"fitting": "worst"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "lottery"}, "scheduler type must be one of priority, fair_share, round_robin"),
        ({"fitting": "first"}, "fitting_policy must be one of best, worst"),
        ({"name": "round_robin", "preemption": True}, "does not preempt"),
    ],
)
def test_make_policy_rejects_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_policy(**kwargs)


def test_records_reject_impossible_values() -> None:
    with pytest.raises(ValueError, match="slots must be >= 0"):
        _req("r", -1)
    with pytest.raises(ValueError, match="weight must be > 0"):
        _req("r", 1, weight=0)
    with pytest.raises(ValueError, match="free"):
        AgentSlots("a", "", (0, 1, 2), 2)


# -- wait reasons ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agents", "request_", "expected"),
    [
        ((), _req("r", 1, resource_pool="gpu"), "waiting for an agent to join pool gpu"),
        (
            (_agent("a", 4, enabled=False),),
            _req("r", 1),
            "waiting for an agent of pool default to be enabled (1 disabled)",
        ),
        (
            (_agent("a", 8), _agent("b", 4, pool="small")),
            _req("r", 16),
            "needs 16 slots but the largest pool (default) has 8",
        ),
        (
            (_agent("a", 8), _agent("b", 4, pool="small")),
            _req("r", 6, resource_pool="small"),
            "needs 6 slots but pool small has 4 (the largest pool, default, has 8)",
        ),
        (
            (_agent("a", 8),),
            _req("r", 4, max_slots=2),
            "needs 4 slots but its job may hold at most 2 (max_slots)",
        ),
        (
            (_agent("a", 4, used=(0, 1)),),
            _req("r", 4),
            "waiting for 4 free slots; 2 are free in pool default",
        ),
        (
            (_agent("a", 4, used=(0, 1)), _agent("b", 4, used=(0, 1))),
            _req("r", 4),
            "waiting for 4 free slots on one agent; 4 are free in pool default but at most 2 on one agent",
        ),
        ((_agent("a", 4),), _req("r", 4), "waiting for the next scheduling pass"),
    ],
)
def test_wait_reason_sentences(agents: tuple, request_: Request, expected: str) -> None:
    assert wait_reason(Snapshot((request_,), agents), request_) == expected


def test_wait_reason_counts_slots_being_released() -> None:
    leaving = Running(
        "low", "low", (Placement("a", (0, 1)),), 50, preemptible=True, preempting=True
    )
    r = _req("urgent", 4, 1)
    snap = Snapshot((r,), (_agent("a", 4, used=(0, 1, 2)),), (leaving,))
    assert wait_reason(snap, r) == (
        "waiting for 4 free slots; 1 are free in pool default "
        "and 2 more are being released by preempted allocations"
    )
    with pytest.raises(ValueError, match="policy must be one of"):
        wait_reason(snap, r, policy="lottery")


def test_wait_reason_single_agent_placement() -> None:
    r = _req("r", 6)
    snap = Snapshot((r,), (_agent("a", 4), _agent("b", 4)))
    assert wait_reason(snap, r, span_agents=False) == (
        "needs 6 slots on one agent but the largest agent of pool default has 4"
    )


def test_wait_reason_names_the_job_ahead() -> None:
    ahead = _req("x.1", 4, 10, at=0, job_id="x")
    mine = _req("exp.1", 1, 42, at=1, job_id="exp")
    sibling = _req("exp.0", 1, 42, at=0.5, job_id="exp")
    snap = Snapshot((ahead, mine), (_agent("a", 4, used=(0,)),))
    assert wait_reason(snap, mine) == "behind job x (priority 10)"
    snap = Snapshot((ahead, sibling, mine), (_agent("a", 4, used=(0,)),))
    assert wait_reason(snap, mine) == "behind job x (priority 10) and 1 more request"
    snap = Snapshot((sibling, mine), (_agent("a", 1, used=(0,)),))
    assert wait_reason(snap, mine) == "behind 1 earlier request of its own job exp"


def test_wait_reason_max_slots_held_and_fair_share() -> None:
    held = Running("exp.0", "exp", (Placement("a", (0, 1, 2)),), 42, preemptible=True)
    r = _req("exp.1", 2, job_id="exp", max_slots=4)
    snap = Snapshot((r,), (_agent("a", 8, used=(0, 1, 2)),), (held,))
    assert (
        wait_reason(snap, r)
        == "job exp holds 3 slots of its max_slots 4; this request needs 2 more"
    )
    r = _req("exp.1", 1, job_id="exp")
    other = _req("other.0", 1, at=1, job_id="other")
    snap = Snapshot((r, other), (_agent("a", 4, used=(0, 1, 2)),), (held,))
    assert (
        wait_reason(snap, r, policy="fair_share") == "job exp holds 3 slots and its fair share is 3"
    )
