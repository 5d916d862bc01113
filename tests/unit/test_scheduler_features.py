"""Agent features: a request that requires one (``"docker"``: a task with its own image) is
placed only on agents offering it, by every policy, and its wait reason says so."""

from __future__ import annotations

import pytest

from det_jupyter.scheduler import (
    AgentSlots,
    Placement,
    Request,
    Running,
    Snapshot,
    make_policy,
    wait_reason,
)

DOCKER = frozenset({"docker"})
POLICIES = ["priority", "fair_share", "round_robin"]


def plain(agent_id: str, free: int = 4, total: int = 4) -> AgentSlots:
    return AgentSlots(agent_id, "", tuple(range(free)), total)


def docker(agent_id: str, free: int = 4, total: int = 4) -> AgentSlots:
    return AgentSlots(agent_id, "", tuple(range(free)), total, features=DOCKER)


def image_task(allocation_id: str, slots: int = 1, t: float = 1.0, **kw: object) -> Request:
    return Request(allocation_id, slots, 42, t, requires=DOCKER, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_image_task_goes_only_to_an_agent_with_docker(policy: str) -> None:
    # "a-plain" sorts first and has the most free slots: any policy would choose it otherwise.
    snap = Snapshot((image_task("img"), Request("proc", 1, 42, 2.0)),
                    (plain("a-plain", 4), docker("b-docker", 1)))
    decided = make_policy(policy)(snap, 0.0)
    assert decided.assignments["img"] == (Placement("b-docker", (0,)),)
    assert "proc" in decided.assignments  # a process task may go anywhere


@pytest.mark.parametrize("policy", POLICIES)
def test_without_an_agent_with_docker_it_waits_and_says_why(policy: str) -> None:
    snap = Snapshot((image_task("img"), image_task("zero", slots=0)), (plain("a"), plain("b")))
    assert make_policy(policy)(snap, 0.0).assignments == {}
    reason = wait_reason(snap, snap.pending[0], policy=policy)
    assert "needs an agent with a Docker engine" in reason
    assert "none of the 2 enabled agents of pool default" in reason
    assert "environment.image" in reason
    assert wait_reason(snap, snap.pending[1], policy=policy) == reason  # zero-slot tasks too


def test_it_does_not_block_process_tasks_behind_it() -> None:
    """An image task no agent can run never blocks the queue behind it."""
    snap = Snapshot((image_task("img", slots=1, t=1.0), Request("proc", 4, 42, 2.0)), (plain("a"),))
    assert set(make_policy("priority")(snap, 0.0).assignments) == {"proc"}


def test_free_slots_elsewhere_do_not_count_in_its_reason() -> None:
    snap = Snapshot((image_task("img", slots=2),), (plain("a", free=4), docker("d", free=1, total=2)))
    reason = wait_reason(snap, snap.pending[0])
    assert reason == ("waiting for 2 free slots; 1 are free in pool default's agents with a "
                      "Docker engine")


def test_a_request_larger_than_every_docker_agent_says_so() -> None:
    snap = Snapshot((image_task("img", slots=3),), (plain("a", total=8, free=8), docker("d", 2, 2)))
    assert make_policy("priority")(snap, 0.0).assignments == {}
    # spanning is allowed: the pool's docker agents hold 2 slots in all
    assert wait_reason(snap, snap.pending[0]) == (
        "needs 3 slots on agents with a Docker engine, but pool default has 2 on its 1 such agent")
    assert wait_reason(snap, snap.pending[0], span_agents=False) == (
        "needs 3 slots on one agent with a Docker engine, but the largest such agent of pool "
        "default has 2")


def test_a_gang_spans_only_agents_with_docker() -> None:
    snap = Snapshot((image_task("gang", slots=4),),
                    (plain("a", 4, 4), docker("d1", 2, 2), docker("d2", 2, 2)))
    placed = make_policy("priority")(snap, 0.0).assignments["gang"]
    assert {p.agent_id for p in placed} == {"d1", "d2"}


def test_preemption_frees_slots_only_on_agents_with_docker() -> None:
    """A high-priority image task preempts a trial on the Docker agent, never one on a plain
    agent it could not use."""
    running = (
        Running("on-plain", "j1", (Placement("a", (0, 1)),), 50, 1.0, preemptible=True),
        Running("on-docker", "j2", (Placement("d", (0, 1)),), 50, 2.0, preemptible=True),
    )
    urgent = Request("urgent", 2, 1, 3.0, job_id="j3", requires=DOCKER)
    snap = Snapshot((urgent,), (plain("a", 0, 2), docker("d", 0, 2)), running)
    decided = make_policy("priority", preemption=True)(snap, 0.0)
    assert decided.preemptions == ("on-docker",)
