"""The accounts and user groups stores (``store.accounts``, ``store.groups``) on each backend,
without the services: what each write stores and each read gives back."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import accounts
from det_jupyter.store import groups as gstore
from det_jupyter.store import tables as t

from ._rows import NOW, make_user, make_world


def _user(conn: sa.Connection, name: str, *, admin: bool = False, active: bool = True,
          display_name: str | None = None) -> int:
    return accounts.insert_user(conn, username=name, password_hash="x", admin=admin, active=active,
                                display_name=display_name, created_at=NOW, modified_at=NOW)


def test_users_are_stored_read_and_updated(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        assert accounts.count_users(conn) == 0
        alice = _user(conn, "alice", display_name="Alice A")
        bob = _user(conn, "bob", admin=True, active=False)
        accounts.update_user(conn, bob, display_name="Bobby", modified_at=NOW + 1)
    with engine.connect() as conn:
        assert accounts.count_users(conn) == 2
        row = accounts.user_by_id(conn, alice)
        assert row is not None and (row.username, row.display_name, row.agent_uid) == ("alice", "Alice A", None)
        assert accounts.user_by_id(conn, 10**6) is None
        by_name = accounts.user_by_name(conn, "bob")
        assert by_name is not None and (by_name.id, by_name.display_name, by_name.modified_at) == (bob, "Bobby", NOW + 1)
        plain = accounts.plain_user_by_name(conn, "bob")
        assert plain is not None and plain.id == bob and not hasattr(plain, "agent_uid")
        assert accounts.plain_user_by_name(conn, "nobody") is None and accounts.user_by_name(conn, "nobody") is None
        assert accounts.user_id_by_name(conn, "alice") == alice and accounts.user_id_by_name(conn, "x") is None
        assert [r.username for r in accounts.all_users(conn)] == ["alice", "bob"]
        named = accounts.name_and_active(conn, bob)
        assert named is not None and (named.username, named.active) == ("bob", False)
        assert accounts.name_and_active(conn, 10**6) is None


def test_users_page_filters_sorts_and_counts(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for name, admin, active, shown in (("carol", False, True, "Zed"), ("alice", True, True, None),
                                           ("bob", False, False, "al pal")):
            _user(conn, name, admin=admin, active=active, display_name=shown)
    page = {"active": None, "admin": None, "name": None, "sort": "id", "descending": False, "offset": 0, "limit": 0}
    with engine.connect() as conn:
        rows, total = accounts.users_page(conn, **page)
        assert ([r.username for r in rows], total) == (["carol", "alice", "bob"], 3)
        rows, total = accounts.users_page(conn, **{**page, "sort": "username", "descending": True, "limit": 2})
        assert ([r.username for r in rows], total) == (["carol", "bob"], 3)
        rows, total = accounts.users_page(conn, **{**page, "sort": "username", "offset": 1, "limit": 1})
        assert ([r.username for r in rows], total) == (["bob"], 3)
        rows, total = accounts.users_page(conn, **{**page, "name": "AL"})  # user or display name, any case
        assert ([r.username for r in rows], total) == (["alice", "bob"], 2)
        rows, total = accounts.users_page(conn, **{**page, "active": True, "admin": False})
        assert ([r.username for r in rows], total) == (["carol"], 1)


def test_agent_user_links_are_set_replaced_and_removed(engine: sa.Engine) -> None:
    user_id = make_user(engine)
    with engine.begin() as conn:
        accounts.set_link(conn, user_id, (1500, 1600, "alice", None))
    with engine.connect() as conn:
        row = accounts.user_by_id(conn, user_id)
        assert row is not None and (row.agent_uid, row.agent_gid, row.agent_user, row.agent_group) == (
            1500, 1600, "alice", None)
    with engine.begin() as conn:
        accounts.set_link(conn, user_id, (7, 8, None, "staff"))
        row = accounts.user_by_name(conn, "alice")
        assert row is not None and (row.agent_uid, row.agent_group) == (7, "staff")
        accounts.set_link(conn, user_id, None)
        row = accounts.user_by_id(conn, user_id)
        assert row is not None and row.agent_uid is None


def test_sessions_are_opened_found_and_revoked_by_kind(engine: sa.Engine) -> None:
    user_id = make_user(engine)
    with engine.begin() as conn:
        accounts.open_session(conn, user_id, "h-login", NOW, NOW + 60)
        accounts.open_session(conn, user_id, "h-other", NOW, NOW + 60)
        token_id = accounts.insert_access_token(conn, user_id, "h-access", NOW, NOW + 90, "ci")
    with engine.connect() as conn:
        row = accounts.session_user(conn, "h-login")
        assert row is not None and (row.id, row.username, row.expires_at, row.revoked) == (
            user_id, "alice", NOW + 60, False)
        assert accounts.session_user(conn, "nope") is None
        token = accounts.access_token(conn, token_id)
        assert token is not None and (token.kind, token.description, token.token_hash) == (
            accounts.ACCESS_KIND, "ci", "h-access")
        assert accounts.access_token(conn, 10**6) is None
    with engine.begin() as conn:
        accounts.revoke_login_session(conn, "h-access")  # an access token is no login session
        accounts.revoke_login_sessions(conn, user_id, keep="h-other")
    with engine.connect() as conn:
        revoked = {h: accounts.session_user(conn, h).revoked for h in ("h-login", "h-other", "h-access")}
        assert revoked == {"h-login": True, "h-other": False, "h-access": False}
    with engine.begin() as conn:
        accounts.revoke_login_session(conn, "h-other")
        accounts.update_token(conn, token_id, description="new", revoked=True)
    with engine.connect() as conn:
        assert accounts.session_user(conn, "h-other").revoked
        token = accounts.access_token(conn, token_id)
        assert token is not None and (token.description, token.revoked) == ("new", True)


def test_access_tokens_page(engine: sa.Engine) -> None:
    alice, bob = make_user(engine, "alice"), make_user(engine, "bob")
    with engine.begin() as conn:
        a1 = accounts.insert_access_token(conn, alice, "a1", NOW, NOW + 10, "first")
        a2 = accounts.insert_access_token(conn, alice, "a2", NOW + 1, NOW + 100, None)
        b1 = accounts.insert_access_token(conn, bob, "b1", NOW + 2, NOW + 100, "bob's")
        accounts.open_session(conn, alice, "login", NOW, NOW + 100)  # a login session is no access token
    page = {"user_id": None, "owner": None, "ids": (), "live_at": None, "sort": "id", "descending": False,
            "offset": 0, "limit": 0}
    with engine.connect() as conn:
        rows, total = accounts.access_tokens_page(conn, **page)
        assert ([r.id for r in rows], total) == ([a1, a2, b1], 3)
        rows, total = accounts.access_tokens_page(conn, **{**page, "user_id": alice, "live_at": NOW + 50})
        assert ([r.id for r in rows], total) == ([a2], 1)
        rows, total = accounts.access_tokens_page(conn, **{**page, "owner": "bob"})
        assert ([r.id for r in rows], total) == ([b1], 1)
        rows, total = accounts.access_tokens_page(conn, **{**page, "ids": (a1,), "live_at": NOW + 50})
        assert [r.id for r in rows] == [a1]  # named ones whatever their state
        rows, total = accounts.access_tokens_page(conn, **{**page, "sort": "created_at", "descending": True,
                                                           "offset": 1, "limit": 1})
        assert ([r.id for r in rows], total) == ([a2], 3)


def test_task_sessions_of_allocation_owners(engine: sa.Engine) -> None:
    user_id, _, trial_id = make_world(engine)
    with engine.begin() as conn:
        for alloc, state in (("a.1", "RUNNING"), ("a.2", "TERMINATED")):
            conn.execute(sa.insert(t.allocations).values(
                allocation_id=alloc, task_id=f"task-{alloc}", trial_id=trial_id, state=state, slots=1,
                submitted_at=NOW))
        accounts.set_link(conn, user_id, (5, 6, None, None))
    with engine.connect() as conn:
        owners = {r.allocation_id: r for r in accounts.allocation_owners(conn, ["a.1", "a.2", "a.9"])}
    assert set(owners) == {"a.1", "a.2"}
    assert (owners["a.1"].owner_id, owners["a.1"].agent_uid, owners["a.1"].agent_gid) == (user_id, 5, 6)
    rows = [{"user_id": user_id, "token_hash": f"h-{a}", "created_at": NOW, "expires_at": NOW + 60,
             "revoked": False, "kind": accounts.TASK_KIND, "allocation_id": a} for a in ("a.1", "a.2", "a.9")]
    with engine.begin() as conn:
        accounts.insert_sessions(conn, rows)
        accounts.revoke_task_sessions(conn, ["a.9"], ended_state="TERMINATED")
    with engine.connect() as conn:
        assert [accounts.session_user(conn, f"h-{a}").revoked for a in ("a.1", "a.2", "a.9")] == [False, False, True]
    with engine.begin() as conn:  # after a restart: every ended or gone allocation's
        accounts.revoke_task_sessions(conn, None, ended_state="TERMINATED")
    with engine.connect() as conn:
        assert [accounts.session_user(conn, f"h-{a}").revoked for a in ("a.1", "a.2")] == [False, True]


def test_groups_and_members(engine: sa.Engine) -> None:
    alice, bob, carol = (make_user(engine, n) for n in ("alice", "bob", "carol"))
    with engine.begin() as conn:
        assert not gstore.named(conn, "team")
        team = gstore.insert(conn, "team")
        other = gstore.insert(conn, "other")
        gstore.add_members(conn, team, [carol, alice])
        gstore.add_members(conn, other, [alice])
    with engine.connect() as conn:
        row = gstore.group(conn, team)
        assert row is not None and row.name == "team" and gstore.group(conn, 10**6) is None
        assert gstore.name(conn, other) == "other" and gstore.name(conn, 10**6) is None
        assert gstore.exists(conn, team) and not gstore.exists(conn, 10**6) and gstore.named(conn, "team")
        assert [m.username for m in gstore.members(conn, team)] == ["alice", "carol"]
        assert gstore.member_ids(conn, team) == {alice, carol}
        assert set(gstore.of_user(conn, alice)) == {team, other} and gstore.of_user(conn, bob) == []
        assert gstore.existing_users(conn, [alice, bob, 10**6]) == {alice, bob}
        rows, total = gstore.search(conn, user_id=None, group_name=None, offset=0, limit=0)
        assert ([(r.name, r.n) for r in rows], total) == ([("team", 2), ("other", 1)], 2)
        rows, total = gstore.search(conn, user_id=carol, group_name=None, offset=0, limit=0)
        assert ([r.id for r in rows], total) == ([team], 1)
        rows, total = gstore.search(conn, user_id=None, group_name="other", offset=0, limit=0)
        assert [r.id for r in rows] == [other]
        rows, total = gstore.search(conn, user_id=None, group_name=None, offset=1, limit=1)
        assert ([r.id for r in rows], total) == ([other], 2)
    with engine.begin() as conn:
        gstore.rename(conn, team, "crew")
        gstore.remove_members(conn, team, [carol])
        conn.execute(sa.insert(t.role_assignments).values(role="Viewer", group_id=other))
        gstore.delete(conn, other)
    with engine.connect() as conn:
        assert gstore.name(conn, team) == "crew" and gstore.member_ids(conn, team) == {alice}
        assert not gstore.exists(conn, other) and gstore.of_user(conn, alice) == [team]
        left = conn.execute(sa.select(t.role_assignments).where(t.role_assignments.c.group_id == other)).all()
        assert left == []
