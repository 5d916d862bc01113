"""JupyterHub's admins and groups carried into det (store.hub_users, migration 18), on each
backend: the hub gives and takes back ClusterAdmin only where it gave it, and sets the members
of hub groups only, adopting a det group of the same name."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import hub_users
from det_jupyter.store import tables as t


def _user(engine: sa.Engine, name: str, admin: bool = False) -> int:
    with engine.begin() as conn:
        key = conn.execute(sa.insert(t.users).values(
            username=name, password_hash="x", admin=admin, active=True, created_at=0.0,
            modified_at=0.0)).inserted_primary_key
    assert key is not None
    return int(key[0])


def _admin(engine: sa.Engine, uid: int) -> tuple[bool, list[str]]:
    with engine.connect() as conn:
        flag = conn.execute(sa.select(t.users.c.admin).where(t.users.c.id == uid)).scalar_one()
        ra = t.role_assignments.c
        roles = list(conn.execute(sa.select(ra.role).where(ra.user_id == uid, ra.workspace_id.is_(None))).scalars())
    return bool(flag), roles


def _groups(engine: sa.Engine, uid: int) -> set[str]:
    g, m = t.user_groups.c, t.group_members.c
    with engine.connect() as conn:
        return set(conn.execute(sa.select(g.name).join(t.group_members, m.group_id == g.id)
                                .where(m.user_id == uid)).scalars())


def test_the_hub_gives_admin_and_takes_back_only_what_it_gave(engine: sa.Engine) -> None:
    alice, root = _user(engine, "alice"), _user(engine, "root-det", admin=True)
    with engine.begin() as conn:
        assert hub_users.sync_admin(conn, alice, True) is True
        assert hub_users.sync_admin(conn, alice, True) is False  # nothing new
    assert _admin(engine, alice) == (True, ["ClusterAdmin"])
    with engine.begin() as conn:
        assert hub_users.sync_admin(conn, alice, False) is True
    assert _admin(engine, alice) == (False, [])
    # An admin made in det is not the hub's to demote.
    with engine.begin() as conn:
        assert hub_users.sync_admin(conn, root, False) is False
    assert _admin(engine, root)[0] is True


def test_the_hub_sets_members_of_its_groups_only(engine: sa.Engine) -> None:
    alice, bob = _user(engine, "alice"), _user(engine, "bob")
    with engine.begin() as conn:  # a det group, and one the hub will name too
        own = conn.execute(sa.insert(t.user_groups).values(name="det-own")).inserted_primary_key
        team = conn.execute(sa.insert(t.user_groups).values(name="team")).inserted_primary_key
        assert own is not None and team is not None
        conn.execute(sa.insert(t.group_members), [{"group_id": own[0], "user_id": alice},
                                                  {"group_id": team[0], "user_id": bob}])
    with engine.begin() as conn:
        assert hub_users.sync_groups(conn, alice, ["team", "ml"]) is True
        assert hub_users.sync_groups(conn, alice, ["ml", "team"]) is False
    assert _groups(engine, alice) == {"det-own", "team", "ml"}
    with engine.begin() as conn:
        assert hub_users.sync_groups(conn, alice, ["ml"]) is True
    # Left the hub's team; kept det's own group; bob (not synced) stays in team.
    assert _groups(engine, alice) == {"det-own", "ml"}
    assert _groups(engine, bob) == {"team"}
    with engine.connect() as conn:
        flags = dict(conn.execute(sa.select(t.user_groups.c.name, t.user_groups.c.from_hub)).all())
    assert flags["team"] and flags["ml"] and not flags["det-own"]
