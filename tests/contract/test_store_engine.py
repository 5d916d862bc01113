"""The PostgreSQL engine: SQLite's durability contract, and connections checked only when idle."""

from __future__ import annotations

import psycopg
import pytest

from det_jupyter.store import _engine, make_engine
from tests.conftest import PG_DSN, PG_SKIP, fresh_pg_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url():
    if not PG_DSN:
        pytest.skip(PG_SKIP)
    url = fresh_pg_database()
    yield url
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def test_commits_are_asynchronous_unless_the_url_says_otherwise(pg_url: str) -> None:
    engine = make_engine(pg_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW synchronous_commit").scalar() == "off"
    engine.dispose()
    engine = make_engine(pg_url + "?options=-csynchronous_commit%3Don")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW synchronous_commit").scalar() == "on"
    engine.dispose()


def test_an_idle_connection_killed_by_the_server_is_replaced(pg_url: str, monkeypatch) -> None:
    engine = make_engine(pg_url, pool_size=1, max_overflow=0)
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    monkeypatch.setattr(_engine, "IDLE_PING_S", 0.0)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pid
    engine.dispose()
