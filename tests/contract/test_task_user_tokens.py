"""A task's owner identity on each backend. Its user token (DET_USER_TOKEN): minted with the
placement (one per allocation, shared by its gang), acting as the owner, refused on the very next
request once the allocation ended, and revoked by a master restart for the allocations it ends.
Its ``run_as``: in every spec of a linked owner's allocation (a trial's, a command's), as the
link was when it was placed; in none of an unlinked owner's."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_agent.wire import TaskSpec
from det_jupyter.errors import Unauthenticated
from det_jupyter.services.accounts.auth import TASK_KIND, AgentUserGroup, AuthService, token_hash
from det_jupyter.services.accounts.users import set_link
from det_jupyter.services.allocation.service import AllocationService, Container
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.late import Late
from det_jupyter.store import _migrate, migrate
from det_jupyter.store import tables as t

from ._rows import NOW, make_user, make_world
from .test_store_allocations import RecordingOwner, request

GANG = [Container("agent-1", (0,)), Container("agent-2", (1,))]


@pytest.fixture
def auth(engine: sa.Engine, clock: FakeClock) -> AuthService:
    service = AuthService(engine, clock)
    service.bootstrap("Bootstr4p-pw")
    return service


def _allocs(engine: sa.Engine, clock: FakeClock, auth: AuthService) -> AllocationService:
    return AllocationService(engine, clock, auth, owner=Late.of("owner", RecordingOwner()),
                             launcher=Late("no resource manager"))


def _user_tokens(specs: list[TaskSpec]) -> set[str]:
    return {spec.env["DET_USER_TOKEN"] for spec in specs}


def test_one_token_per_allocation_acts_as_its_owner_until_it_ends(
        engine: sa.Engine, clock: FakeClock, auth: AuthService) -> None:
    allocs = _allocs(engine, clock, auth)
    user_id, _, trial_id = make_world(engine)
    alloc_id = request(engine, allocs, "trial-task", trial_id)
    specs = allocs.assign(alloc_id, GANG)
    assert specs is not None and len(specs) == 2
    (token,) = _user_tokens(specs)  # the gang shares one
    assert token != specs[0].env["TOKEN"]  # not the allocation token
    owner = auth.user_for_token(token)
    assert (owner.id, owner.admin) == (user_id, False)
    with engine.connect() as conn:
        row = conn.execute(sa.select(t.user_sessions).where(
            t.user_sessions.c.token_hash == token_hash(token))).one()
    assert (row.kind, row.allocation_id, row.revoked) == (TASK_KIND, alloc_id, False)

    allocs.started(alloc_id)
    allocs.exited(alloc_id, 0, None)
    with pytest.raises(Unauthenticated):  # at once: no cache window
        auth.user_for_token(token)

    again = allocs.assign(request(engine, allocs, "trial-task", trial_id), GANG[:1])
    assert again is not None and _user_tokens(again) != {token}  # a new allocation, a new token


def test_a_task_without_an_owner_gets_no_user_token(
        engine: sa.Engine, clock: FakeClock, auth: AuthService) -> None:
    allocs = _allocs(engine, clock, auth)
    specs = allocs.assign(request(engine, allocs, "cmd-task"), GANG[:1])
    assert specs is not None and "DET_USER_TOKEN" not in specs[0].env


def test_a_restart_revokes_the_tokens_of_the_allocations_it_ends(
        engine: sa.Engine, clock: FakeClock, auth: AuthService) -> None:
    allocs = _allocs(engine, clock, auth)
    _, _, trial_id = make_world(engine)
    specs = allocs.assign(request(engine, allocs, "trial-task", trial_id), GANG[:1])
    assert specs is not None
    (token,) = _user_tokens(specs)
    auth.user_for_token(token)

    # A new master on the same database (the old one died without ending the allocation).
    new_auth = AuthService(engine, clock)
    assert [r.allocation_id for r in _allocs(engine, clock, new_auth).recover()] == ["trial-task.1"]
    with pytest.raises(Unauthenticated):
        new_auth.user_for_token(token)


def test_every_spec_of_a_linked_owners_allocation_runs_as_the_link(
        engine: sa.Engine, clock: FakeClock, auth: AuthService) -> None:
    allocs = _allocs(engine, clock, auth)
    user_id, _, trial_id = make_world(engine)
    unlinked = allocs.assign(request(engine, allocs, "trial-task", trial_id), GANG)
    assert unlinked is not None and all(spec.run_as is None for spec in unlinked)

    with engine.begin() as conn:
        set_link(conn, user_id, AgentUserGroup(1500, 1600, "alice", None))
    linked = allocs.assign(request(engine, allocs, "trial-task", trial_id), GANG)
    assert linked is not None and len(linked) == 2
    assert all(spec.to_wire()["run_as"] == {"uid": 1500, "gid": 1600, "user": "alice", "group": None}
               for spec in linked)

    # A command's allocation: its owner is the command's.
    carol = make_user(engine, "carol")
    with engine.begin() as conn:
        conn.execute(sa.insert(t.commands).values(
            task_id="cmd-1", job_id="job-cmd-1", owner_id=carol, description="c",
            config={"entrypoint": ["true"]}, start_time=NOW))
        set_link(conn, carol, AgentUserGroup(7, 8))
    specs = allocs.assign(request(engine, allocs, "cmd-1"), GANG[:1])
    assert specs is not None
    assert specs[0].to_wire()["run_as"] == {"uid": 7, "gid": 8, "user": None, "group": None}
    assert auth.user_for_token(specs[0].env["DET_USER_TOKEN"]).id == carol


def test_migration_9_upgrades_a_version_8_database(engine: sa.Engine) -> None:
    """A database from before links and task tokens (made by undoing step 9) gains both, its
    sessions kept."""
    user_id = make_user(engine, "old-timer")
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE agent_user_groups"))
        conn.execute(sa.text("DROP INDEX ix_user_sessions_allocation"))
        conn.execute(sa.text("ALTER TABLE user_sessions DROP COLUMN allocation_id"))
        conn.execute(sa.text("DELETE FROM schema_version WHERE version >= 9"))
        conn.execute(sa.text("INSERT INTO user_sessions (user_id, token_hash, created_at, expires_at, "
                             "revoked, kind) VALUES (:u, 'h', 1, 2, false, 'session')"), {"u": user_id})
        assert _migrate.current_version(conn) == 8
    assert migrate(engine) == max(n for n, _ in _migrate.MIGRATIONS)
    inspector = sa.inspect(engine)
    assert "allocation_id" in {c["name"] for c in inspector.get_columns("user_sessions")}
    assert "ix_user_sessions_allocation" in {ix["name"] for ix in inspector.get_indexes("user_sessions")}
    with engine.begin() as conn:
        set_link(conn, user_id, AgentUserGroup(1, 2))
        assert conn.execute(sa.select(t.user_sessions.c.token_hash)).scalars().all() == ["h"]
