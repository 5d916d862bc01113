"""Secrets at rest, the pure and file-level parts: sealing (services._sealed), private files and
directories, the SQLite files' modes, the log's redaction of URL credentials and the master's
environment secrets (app.py)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from det_jupyter.app import _environ_secrets, _RedactUrlSecrets
from det_jupyter.private_files import open_private, private_dir
from det_jupyter.services.common.sealed import SealedError, Sealer, is_sealed
from det_jupyter.store import make_engine, migrate, sqlite_url

KEY = bytes(range(32))
TOKEN = "0f" * 24  # what an upstream token looks like (secrets.token_hex(24))


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_sealed_value_opens_to_what_was_sealed_and_does_not_show_it() -> None:
    sealer = Sealer(KEY)
    sealed = sealer.seal(TOKEN, "nb-1:proxy_token")
    assert is_sealed(sealed) and TOKEN not in sealed
    assert sealer.open(sealed, "nb-1:proxy_token") == TOKEN
    assert sealer.seal(TOKEN, "nb-1:proxy_token") != sealed  # a fresh nonce each time


def test_a_sealed_upstream_token_fits_its_column() -> None:
    assert len(Sealer(KEY).seal(TOKEN, "nb-" + "x" * 36 + ":proxy_token")) <= 128  # VARCHAR(128)


@pytest.mark.parametrize("how", ["another key", "another row", "altered", "cut short"])
def test_a_sealed_value_does_not_open_elsewhere(how: str) -> None:
    sealed = Sealer(KEY).seal(TOKEN, "nb-1:proxy_token")
    sealer, context = Sealer(KEY), "nb-1:proxy_token"
    if how == "another key":
        sealer = Sealer(bytes(32))
    elif how == "another row":
        context = "nb-2:proxy_token"
    elif how == "altered":
        sealed = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    else:
        sealed = sealed[:20]
    with pytest.raises(SealedError, match="secrets_key"):
        sealer.open(sealed, context)


def test_a_value_from_before_sealing_is_read_as_it_is() -> None:
    assert Sealer(KEY).open(TOKEN, "nb-1:proxy_token") == TOKEN


def test_a_key_is_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Sealer(b"short")


def test_private_dir_and_files_are_made_private_and_tightened(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        loose = tmp_path / "data"
        loose.mkdir(mode=0o755)
        private_dir(str(loose))
        private_dir(str(tmp_path / "new" / "data"))
        assert mode(loose) == 0o700 and mode(tmp_path / "new" / "data") == 0o700
        existing = loose / "master.log"
        existing.write_text("earlier\n")
        existing.chmod(0o644)
        os.close(open_private(str(existing), os.O_WRONLY | os.O_APPEND))
        os.close(open_private(str(loose / "fresh"), os.O_WRONLY))
        assert mode(existing) == 0o600 and mode(loose / "fresh") == 0o600
        assert existing.read_text() == "earlier\n"
    finally:
        os.umask(old)


def test_the_sqlite_database_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        db = tmp_path / "det.db"
        engine = make_engine(sqlite_url(str(db)))
        migrate(engine)  # writes: the -wal and -shm exist now
        assert {p.name: mode(p) for p in tmp_path.iterdir()} == {
            "det.db": 0o600, "det.db-wal": 0o600, "det.db-shm": 0o600}
        engine.dispose()
        for p in tmp_path.iterdir():  # as an older version, or a restore, left them
            p.chmod(0o644)
        make_engine(sqlite_url(str(db))).dispose()
        assert {mode(p) for p in tmp_path.iterdir()} == {0o600}
    finally:
        os.umask(old)


def _message(msg: str, *args: object) -> str:
    record = logging.LogRecord("ServerApp", logging.INFO, __file__, 1, msg, args, None)
    assert _RedactUrlSecrets().filter(record)
    return record.getMessage()


def test_the_log_never_shows_a_token_in_a_url() -> None:
    token = "3b1c0ffee" * 5
    shown = _message("Jupyter Server is running at:\n    http://127.0.0.1:8080/?token=%s\n", token)
    assert token not in shown and "?token=[redacted]" in shown
    assert _message("GET /proxy/nb-1/?a=1&ticket=%s&b=2", "1.2.abc") == \
        "GET /proxy/nb-1/?a=1&ticket=[redacted]&b=2"
    assert _message("GET /det-jupyter/tunnel/sh-1?det_ticket=1.2.abc") == \
        "GET /det-jupyter/tunnel/sh-1?det_ticket=[redacted]"
    assert _message("no credential %s", "here") == "no credential here"


def test_the_masters_environment_secrets_are_read_once_and_dropped(monkeypatch) -> None:
    monkeypatch.setenv("DET_ADMIN_PASSWORD", "Secret-Passw0rd")
    monkeypatch.setenv("DET_AGENT_TOKEN", "agent-tok")
    monkeypatch.setenv("DET_DB_URL", "postgresql://det:pw@db/det")
    assert _environ_secrets() == ("Secret-Passw0rd", "agent-tok", "postgresql://det:pw@db/det")
    for name in ("DET_ADMIN_PASSWORD", "DET_AGENT_TOKEN", "DET_DB_URL"):
        assert name not in os.environ
    monkeypatch.setenv("DET_DB_URL", "postgresql://det@db/det")  # no password: nothing to hide
    assert _environ_secrets() == (None, None, "postgresql://det@db/det")
    assert os.environ["DET_DB_URL"] == "postgresql://det@db/det"
