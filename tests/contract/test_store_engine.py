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


def test_transactions_begin_with_our_begin_and_reads_take_none(pg_url: str) -> None:
    """Connections stay in the driver's autocommit mode: a transaction is our ``BEGIN`` up to
    its COMMIT or ROLLBACK (all of it or none of it), and reads and one-statement writes run
    outside any, on the same pool, without switching the connection's mode."""
    import sqlalchemy as sa
    from psycopg.pq import TransactionStatus

    engine = make_engine(pg_url, pool_size=1, max_overflow=0)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id integer PRIMARY KEY)")
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        assert conn.connection.driver_connection.info.transaction_status == TransactionStatus.INTRANS
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")  # fails: the first goes with it
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (2)")
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (3)")
        raise RuntimeError("the caller gives up")
    for mode in (_engine.reader(engine), _engine.single_statement(engine)):
        with mode.connect() as conn:
            assert conn.exec_driver_sql("SELECT array_agg(id ORDER BY id) FROM t").scalar() == [2]
            assert conn.connection.driver_connection.info.transaction_status == TransactionStatus.IDLE
            assert conn.connection.driver_connection.autocommit is True
    with _engine.single_statement(engine).begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (4)")
    with engine.connect() as conn:  # committed by itself, seen from the pool's connection
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 2
    engine.dispose()
