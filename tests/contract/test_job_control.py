"""JobControl on each backend: moving jobs in line, settings per scheduler, all or nothing."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.config.resources import parse_resources
from det_jupyter.errors import InvalidRequest, NotFound
from det_jupyter.services.accounts.auth import User
from det_jupyter.services.jobs.control import JobControl, QueueUpdate
from det_jupyter.store import tables as t

from ._rows import make_user

ADMIN = User(id=0, username="root", admin=True, active=True)


def _jobs(engine: sa.Engine, owner: int, *specs: tuple[str, int, float, str]) -> None:
    with engine.begin() as conn:
        for job_id, priority, position, pool in specs:
            conn.execute(sa.insert(t.jobs).values(
                job_id=job_id, job_type="EXPERIMENT", owner_id=owner, priority=priority, weight=1.0,
                resource_pool=pool, queue_position=position, submitted_at=position))


def _order(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t.jobs.c.job_id).order_by(
            t.jobs.c.priority, t.jobs.c.queue_position)).scalars())


@pytest.fixture
def control(engine: sa.Engine) -> JobControl:
    resources = parse_resources({}, [
        {"pool_name": "default"}, {"pool_name": "fair", "scheduler": {"type": "fair_share"}}])
    kicks: list[int] = []
    jc = JobControl(engine, resources, lambda: kicks.append(1))
    jc.kicks = kicks  # type: ignore[attr-defined]
    return jc


def test_ahead_of_and_behind_of_move_within_a_priority(engine: sa.Engine, control: JobControl) -> None:
    owner = make_user(engine)
    _jobs(engine, owner, ("a", 42, 1.0, ""), ("b", 42, 2.0, ""), ("c", 42, 3.0, ""), ("urgent", 10, 9.0, ""))
    control.update(ADMIN, [QueueUpdate("c", ahead_of="b")])
    assert _order(engine) == ["urgent", "a", "c", "b"]
    control.update(ADMIN, [QueueUpdate("a", behind_of="b")])
    assert _order(engine) == ["urgent", "c", "b", "a"]
    control.update(ADMIN, [QueueUpdate("b", ahead_of="urgent")])  # takes its priority to stand there
    assert _order(engine) == ["b", "urgent", "c", "a"]
    assert control.kicks == [1, 1, 1]  # type: ignore[attr-defined]


def test_a_bad_update_in_a_batch_changes_nothing(engine: sa.Engine, control: JobControl) -> None:
    owner = make_user(engine)
    _jobs(engine, owner, ("a", 42, 1.0, ""), ("f", 42, 2.0, "fair"))
    with pytest.raises(NotFound, match="job nope not found"):
        control.update(ADMIN, [QueueUpdate("a", priority=5), QueueUpdate("nope", priority=5)])
    with pytest.raises(InvalidRequest, match="fair_share scheduler, which ignores priority"):
        control.update(ADMIN, [QueueUpdate("a", priority=5), QueueUpdate("f", priority=5)])
    with pytest.raises(InvalidRequest, match="priority scheduler, which ignores weight"):
        control.update(ADMIN, [QueueUpdate("a", weight=2)])
    with pytest.raises(InvalidRequest, match="a job moves only within its pool"):
        control.update(ADMIN, [QueueUpdate("a", ahead_of="f")])
    with pytest.raises(InvalidRequest, match="resource pool 'gpu' does not exist"):
        control.update(ADMIN, [QueueUpdate("a", resource_pool="gpu")])
    with engine.connect() as conn:
        assert conn.execute(sa.select(t.jobs.c.priority).where(t.jobs.c.job_id == "a")).scalar_one() == 42
    control.update(ADMIN, [QueueUpdate("f", weight=3)])
    control.update(ADMIN, [QueueUpdate("a", priority=5)], strict=True)


@pytest.mark.parametrize("bad", [{"priority": 0}, {"priority": 100}, {"priority": True}, {"weight": 0},
                                 {"weight": -1}, {"max_slots": -1}, {"ahead_of": "x", "behind_of": "y"},
                                 {"ahead_of": "j"}])
def test_bad_values_are_refused_by_name(bad: dict) -> None:
    with pytest.raises(InvalidRequest):
        QueueUpdate("j", **bad)


def test_who_may_edit_a_job_is_the_callers_role_check(engine: sa.Engine, control: JobControl) -> None:
    """JobControl applies what the API authorized (UPDATE_EXPERIMENT / UPDATE_NSC on the job's
    workspace, checked by the route; see tests/integration/test_authz_matrix.py)."""
    owner = make_user(engine, "owner")
    other = User(id=make_user(engine, "other"), username="other", admin=False, active=True)
    _jobs(engine, owner, ("a", 42, 1.0, ""))
    control.update(other, [QueueUpdate("a", priority=3)])
