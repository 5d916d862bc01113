"""AuthService on each backend: bootstrap, login, session tokens, expiry, deactivation."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import Forbidden, Unauthenticated
from det_jupyter.services.accounts.auth import SESSION_LIFESPAN_S, AuthService, client_hash
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.store import tables as t

PASSWORD = "Corr3ct-Horse"


@pytest.fixture
def auth(engine: sa.Engine, clock: FakeClock) -> AuthService:
    service = AuthService(engine, clock)
    assert service.bootstrap(PASSWORD) == PASSWORD
    return service


def test_bootstrap_creates_admin_and_determined_once(auth: AuthService) -> None:
    users = {u.username: u for u in auth.list_users()}
    assert set(users) == {"admin", "determined"}
    assert users["admin"].admin and users["admin"].active
    assert not users["determined"].admin and users["determined"].active
    assert auth.bootstrap(PASSWORD) is None
    assert auth.bootstrap(None) is None
    assert len(auth.list_users()) == 2


def test_bootstrap_without_password_returns_a_generated_one(engine: sa.Engine, clock: FakeClock) -> None:
    service = AuthService(engine, clock)
    generated = service.bootstrap(None)
    assert generated and len(generated) >= 8
    _, user = service.login("determined", generated, is_hashed=False)
    assert user.username == "determined"


@pytest.mark.parametrize("username", ["admin", "determined"])
@pytest.mark.parametrize(
    ("password", "is_hashed"),
    [(client_hash(PASSWORD), True), (PASSWORD, False)],
    ids=["client-hash", "plain"],
)
def test_login_then_token_names_the_user(
    auth: AuthService, username: str, password: str, is_hashed: bool
) -> None:
    token, user = auth.login(username, password, is_hashed)
    assert user.username == username
    assert auth.user_for_token(token) == user


@pytest.mark.parametrize(
    ("username", "password", "is_hashed"),
    [
        ("admin", "wrong", False),
        ("admin", client_hash("wrong"), True),
        ("admin", PASSWORD, True),  # the plain password is not its own client hash
        ("admin", client_hash(PASSWORD), False),  # nor is the hash a plain password
        ("admin", "", False),
        ("nobody", PASSWORD, False),
        ("", PASSWORD, False),
    ],
)
def test_bad_credentials_are_forbidden(
    auth: AuthService, username: str, password: str, is_hashed: bool
) -> None:
    with pytest.raises(Forbidden):
        auth.login(username, password, is_hashed)


def test_unknown_token_is_unauthenticated(auth: AuthService) -> None:
    with pytest.raises(Unauthenticated):
        auth.user_for_token("not-a-token")


def test_logout_revokes_only_that_session(auth: AuthService) -> None:
    first, _ = auth.login("admin", PASSWORD, False)
    second, _ = auth.login("admin", PASSWORD, False)
    assert first != second
    assert auth.user_for_token(first).username == "admin"  # checked just before: logout still wins
    auth.logout(first)
    with pytest.raises(Unauthenticated):
        auth.user_for_token(first)
    assert auth.user_for_token(second).username == "admin"


def test_session_expires(auth: AuthService, clock: FakeClock) -> None:
    token, _ = auth.login("admin", PASSWORD, False)
    clock.advance(SESSION_LIFESPAN_S - 1)
    assert auth.user_for_token(token).username == "admin"
    clock.advance(2)
    with pytest.raises(Unauthenticated):
        auth.user_for_token(token)


def test_stored_hash_is_neither_password_nor_client_hash(auth: AuthService, engine: sa.Engine) -> None:
    with engine.connect() as conn:
        stored = conn.execute(sa.select(t.users.c.password_hash)).scalars().all()
    assert len(stored) == 2
    for value in stored:
        assert PASSWORD not in value
        assert client_hash(PASSWORD) not in value
    # Salted: the same password gives two different hashes.
    assert stored[0] != stored[1]


def test_deactivated_user_cannot_log_in_nor_use_a_session(auth: AuthService, engine: sa.Engine) -> None:
    token, _ = auth.login("determined", PASSWORD, False)
    with engine.begin() as conn:
        conn.execute(sa.update(t.users).where(t.users.c.username == "determined").values(active=False))
    with pytest.raises(Forbidden, match="deactivated"):
        auth.login("determined", PASSWORD, False)
    with pytest.raises(Unauthenticated):
        auth.user_for_token(token)


def test_set_password_replaces_the_old_one(auth: AuthService) -> None:
    user = auth.user_by_name("determined")
    auth.set_password(user.id, "N3w-password")
    with pytest.raises(Forbidden):
        auth.login("determined", PASSWORD, False)
    _, logged_in = auth.login("determined", client_hash("N3w-password"), True)
    assert logged_in.id == user.id


def test_ensure_user_creates_a_passwordless_user_once(auth: AuthService) -> None:
    """The Jupyter user of a server with the extension (its kernels' identity)."""
    created = auth.ensure_user("jovyan")
    assert created.username == "jovyan" and created.active and not created.admin
    assert auth.ensure_user("jovyan") == created
    assert auth.ensure_user("admin").admin  # an existing user is returned unchanged
    token = auth.session_for("jovyan")
    assert auth.user_for_token(token).username == "jovyan"
    with pytest.raises(Forbidden):  # nobody knows its password
        auth.login("jovyan", "", is_hashed=False)
    assert len(auth.list_users()) == 3
