"""The server's identity file and the SDK's pickup of it (no master needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from det_jupyter.client import Determined, MasterUnreachable, TokenStore
from det_jupyter.identity import (
    IDENTITY_ENV,
    Identity,
    identity_path,
    load_identity,
    write_identity,
)

MASTER = "http://127.0.0.1:9999"


@pytest.fixture
def ident(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("DET_MASTER", "DET_USER", "DET_PASS"):
        monkeypatch.delenv(var, raising=False)
    path = write_identity(identity_path(tmp_path / "runtime", 1234), Identity(MASTER, "ann", "tok-ann"))
    monkeypatch.setenv(IDENTITY_ENV, str(path))
    return path


def test_the_file_is_private_and_round_trips(ident: Path) -> None:
    assert ident.name == "det-jupyter-identity-1234.json"
    assert ident.stat().st_mode & 0o777 == 0o600
    assert load_identity() == Identity(MASTER, "ann", "tok-ann")


@pytest.mark.parametrize("content", [None, "not json", '{"master": "x"}', "[1]"])
def test_a_missing_or_bad_file_is_no_identity(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "id.json"
    if content is not None:
        path.write_text(content)
    assert load_identity({IDENTITY_ENV: str(path)}) is None
    assert load_identity({}) is None


def test_login_with_nothing_uses_the_identity(ident: Path, tmp_path: Path) -> None:
    d = Determined(store=TokenStore(tmp_path / "auth.json"))
    assert (d.master, d.username, d.token) == (MASTER, "ann", "tok-ann")


def test_other_credentials_win(ident: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = TokenStore(tmp_path / "auth.json")
    store.save(MASTER, "bob", "tok-bob")
    store.save("http://other:8080", "bob", "tok-other")
    assert Determined(token="explicit", store=store).token == "explicit"
    assert Determined(user="bob", store=store).token == "tok-bob"       # another user: the cache
    assert Determined("http://other:8080", store=store).token == "tok-other"  # another master
    monkeypatch.setenv("DET_MASTER", "http://other:8080")
    assert Determined(store=store).token == "tok-other"
    monkeypatch.delenv("DET_MASTER")
    monkeypatch.setenv(IDENTITY_ENV, str(tmp_path / "gone.json"))  # the server stopped
    # No credential applies; nothing answers at MASTER either, which is said first (logging in
    # would not help).
    with pytest.raises(MasterUnreachable):
        Determined(user="ann", store=store)
