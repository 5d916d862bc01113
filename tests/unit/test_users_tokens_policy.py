"""Pure rules of users and tokens: the password policy, user names, patches, token lifespans."""

from __future__ import annotations

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.accounts.tokens import DAY_S, parse_lifespan
from det_jupyter.services.accounts.users import (
    UserPatch,
    check_password,
    check_username,
    password_problem,
)


@pytest.mark.parametrize("password, problem", [
    ("Abcdef12", None), ("Sh0rt", "at least 8 characters"), ("abcdefg1", "an upper-case letter"),
    ("ABCDEFG1", "a lower-case letter"), ("Abcdefgh", "a digit"), ("", "at least 8 characters"),
    ("Ünïcode-Passw0rd", None),
])
def test_password_problem_names_the_first_rule_broken(password: str, problem: str | None) -> None:
    assert password_problem(password) == problem


def test_check_password_messages() -> None:
    with pytest.raises(InvalidRequest, match="must have a digit"):
        check_password("No-Digits-Here")
    with pytest.raises(InvalidRequest, match="is required"):
        check_password(None)
    assert check_password("Val1d-Password") == "Val1d-Password"


@pytest.mark.parametrize("name", ["", "  ", "a b", "a/b", "tab\tname", "x" * 129, 7])
def test_bad_usernames(name: object) -> None:
    with pytest.raises(InvalidRequest):
        check_username(name)


def test_good_username() -> None:
    assert check_username("jane.doe@example-1") == "jane.doe@example-1"


def test_user_patch_admin_only_fields() -> None:
    assert UserPatch(display_name="x", password="p", is_hashed=True).admin_only() == []
    assert UserPatch(admin=False, active=True, username="u").admin_only() == ["username", "active", "admin"]
    assert UserPatch().is_empty() and UserPatch(is_hashed=True).is_empty()
    assert not UserPatch(active=False).is_empty()


@pytest.mark.parametrize("text, seconds", [
    (None, 30 * DAY_S), ("", 30 * DAY_S), ("720h", 30 * DAY_S), ("1h30m", 5400), ("90s", 90),
    ("500ms", 0.5), ("1.5h", 5400), ("2d", 2 * DAY_S), ("7", 7 * DAY_S), ("-1", 365 * DAY_S),
    (3, 3 * DAY_S),
])
def test_parse_lifespan(text: object, seconds: float) -> None:
    assert parse_lifespan(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, message", [
    ("soon", "not a duration"), ("h", "not a duration"), ("-5h", "not a duration"),
    ("1x", "not a duration"), ("0h", "longer than zero"), ("0", "longer than zero"),
    ("366d", "maximum of 365 days"), (True, "must be a string"), ([], "must be a string"),
])
def test_parse_lifespan_refuses(text: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_lifespan(text)


def test_parse_lifespan_custom_limits() -> None:
    assert parse_lifespan("-1", max_s=DAY_S) == DAY_S
    assert parse_lifespan(None, default_s=60, max_s=DAY_S) == 60
    with pytest.raises(InvalidRequest, match="maximum of 1 days"):
        parse_lifespan("25h", max_s=DAY_S)
