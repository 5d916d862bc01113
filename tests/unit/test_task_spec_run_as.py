"""Agent user links: the v1AgentUserGroup a user may be given, how it is shown in v1User, and
the ``run_as`` every TaskSpec of a linked owner carries (and no other spec does); the
allocation service applies it (tests/contract/test_task_user_tokens.py)."""

from __future__ import annotations

import dataclasses

import pytest

from det_agent.wire import RunAs, TaskSpec
from det_jupyter.errors import InvalidRequest
from det_jupyter.server_ext import _serialize as ser
from det_jupyter.server_ext._users import parse_patch
from det_jupyter.services.accounts.auth import AgentUserGroup, User
from det_jupyter.services.accounts.users import UserPatch, parse_agent_user_group
from det_jupyter.services.allocation.spec import with_run_as

LINK = AgentUserGroup(1500, 1600, "alice", "ml")


SPEC = TaskSpec("t", "t.1", "COMMAND", "true", {}, (0,), {}, run_as=RunAs(9, 9))


@pytest.mark.parametrize(("link", "expected"), [
    (AgentUserGroup(0, 0), {"uid": 0, "gid": 0, "user": None, "group": None}),
    (AgentUserGroup(2**31 - 1, 7, "u", None), {"uid": 2**31 - 1, "gid": 7, "user": "u", "group": None}),
    (None, None),
])
def test_with_run_as_sets_or_removes_the_key(link: AgentUserGroup | None, expected: dict | None) -> None:
    spec = with_run_as(SPEC, link).to_wire()
    assert spec.get("run_as") == expected
    assert spec["task_id"] == "t"


def test_run_as_is_exactly_the_link() -> None:
    plain = dataclasses.replace(SPEC, run_as=None)
    assert with_run_as(plain, LINK).to_wire() == {
        **plain.to_wire(), "run_as": {"uid": 1500, "gid": 1600, "user": "alice", "group": "ml"}}
    assert with_run_as(plain, None).to_wire() == plain.to_wire()
    assert "run_as" not in plain.to_wire()


@pytest.mark.parametrize(("raw", "expected"), [
    ({"agentUid": 1500, "agentGid": 1600, "agentUser": "alice", "agentGroup": "ml"}, LINK),
    ({"agentUid": 0, "agentGid": 0}, AgentUserGroup(0, 0)),
    ({"agentUid": "1500", "agentGid": 2**31 - 1, "agentUser": "", "agentGroup": None},
     AgentUserGroup(1500, 2**31 - 1)),
    ({"agentUid": 5, "agentGid": 5, "agentUser": "_svc.x-1", "agentGroup": "G" + "g" * 31},
     AgentUserGroup(5, 5, "_svc.x-1", "G" + "g" * 31)),
    ({}, None),  # every field empty: unlink
    ({"agentUid": None, "agentGid": None, "agentUser": None, "agentGroup": None}, None),
])
def test_valid_agent_user_groups(raw: dict, expected: AgentUserGroup | None) -> None:
    assert parse_agent_user_group(raw) == expected


@pytest.mark.parametrize(("raw", "field"), [
    ({"agentUid": -1, "agentGid": 1}, "agentUid"),
    ({"agentUid": 1, "agentGid": 2**31}, "agentGid"),
    ({"agentUid": 1.5, "agentGid": 1}, "agentUid"),
    ({"agentUid": True, "agentGid": 1}, "agentUid"),
    ({"agentUid": "x", "agentGid": 1}, "agentUid"),
    ({"agentGid": 1, "agentUser": "alice"}, "agentUid"),
    ({"agentUid": 1}, "agentGid"),
    ({"agentUid": 1, "agentGid": 1, "agentUser": "-rf"}, "agentUser"),
    ({"agentUid": 1, "agentGid": 1, "agentUser": "a b"}, "agentUser"),
    ({"agentUid": 1, "agentGid": 1, "agentUser": "root:x"}, "agentUser"),
    ({"agentUid": 1, "agentGid": 1, "agentUser": "1000"}, "agentUser"),
    ({"agentUid": 1, "agentGid": 1, "agentGroup": "g" * 33}, "agentGroup"),
    ({"agentUid": 1, "agentGid": 1, "agentGroup": 5}, "agentGroup"),
    ({"agentUid": 1, "agentGid": 1, "uid": 1}, "uid"),
    ([1, 2], "agentUserGroup"),
])
def test_bad_agent_user_groups_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(InvalidRequest, match=field):
        parse_agent_user_group(raw)


def test_linking_is_admin_only_even_for_oneself() -> None:
    assert parse_patch({"agentUserGroup": {"agentUid": 1, "agentGid": 1}}).admin_only() == ["agentUserGroup"]
    unlink = parse_patch({"agentUserGroup": {}})
    assert (unlink.unlink_agent_user, unlink.admin_only()) == (True, ["agentUserGroup"])
    assert UserPatch(display_name="x").admin_only() == []
    assert not unlink.is_empty()


def test_v1user_shows_the_link_only_when_linked() -> None:
    plain = User(3, "bob", False, True)
    assert "agentUserGroup" not in ser.user(plain)
    linked = ser.user(User(3, "bob", False, True, agent_user_group=AgentUserGroup(1500, 1600, "alice")))
    assert linked["agentUserGroup"] == {"agentUid": 1500, "agentGid": 1600, "agentUser": "alice"}
