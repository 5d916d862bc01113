"""Opening the database: SQLite (WAL) by default, PostgreSQL (psycopg 3) when a URL says so."""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from typing import Any

import sqlalchemy as sa


def sqlite_url(path: str) -> str:
    """The SQLAlchemy URL of a SQLite file at ``path``."""
    return "sqlite+pysqlite:///" + os.path.abspath(path)


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` URLs and point them at psycopg 3."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


_READ_ONLY = "det_read_only"
_NO_TRANSACTION = "det_no_transaction"  # PostgreSQL: each statement commits by itself


def make_engine(url: str, **kwargs: Any) -> sa.Engine:
    """Create an engine with the settings each backend needs.

    SQLite: WAL journal, ``synchronous=NORMAL`` (durable across process crashes; an OS crash
    may lose the last commits), a busy timeout, foreign keys on, and transactions that really
    begin with ``BEGIN`` so DDL in migrations is transactional too.

    PostgreSQL: the same durability — ``synchronous_commit=off``, so a commit survives a crash
    of the master but a crash of the database server or its OS may lose the last fraction of a
    second of commits; a URL that sets ``synchronous_commit`` itself (e.g.
    ``?options=-csynchronous_commit%3Don``) keeps its own. A pooled connection idle for
    IDLE_PING_S is checked before use (a restarted server then costs no failed request).
    Connections stay in the driver's autocommit mode and transactions begin with our own
    ``BEGIN``, as on SQLite: reads and one-statement writes (``reader``, ``single_statement``)
    then take none, without switching the connection's mode at every checkout and return
    (six driver calls a checkout, about a fifth of a short read's cost).
    """
    url = normalize_url(url)
    if url.startswith("sqlite"):
        _private_sqlite_files(sa.engine.make_url(url).database)
        engine = sa.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, json_serializer=store_json, **kwargs
        )

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            # Straight to the driver: through SQLAlchemy's execution path this statement cost
            # more than many of the transactions it opens. Reads (``reader``) take a deferred
            # BEGIN: a snapshot of their own, without queueing for the write lock.
            read = conn.get_execution_options().get(_READ_ONLY, False)
            conn.connection.driver_connection.execute("BEGIN" if read else "BEGIN IMMEDIATE")

        return engine
    engine = sa.create_engine(url, **{"pool_size": 10, "max_overflow": 20, "json_serializer": store_json, **kwargs})
    own_commit_mode = "synchronous_commit" in url

    @sa.event.listens_for(engine, "connect")
    def _on_pg_connect(dbapi_conn: Any, record: Any) -> None:
        dbapi_conn.autocommit = True  # COMMIT and ROLLBACK still end the BEGIN below
        if not own_commit_mode:
            dbapi_conn.execute("SET synchronous_commit = off")
        record.info["used"] = time.monotonic()

    @sa.event.listens_for(engine, "begin")
    def _on_pg_begin(conn: sa.Connection) -> None:
        if not conn.get_execution_options().get(_NO_TRANSACTION, False):
            conn.connection.driver_connection.execute("BEGIN")

    @sa.event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        # A ping per checkout (pool_pre_ping) is a round trip per transaction; a connection in
        # steady use needs none.
        now = time.monotonic()
        if now - record.info.get("used", now) > IDLE_PING_S:
            try:
                dbapi_conn.execute("SELECT 1")
            except Exception as exc:
                raise sa.exc.DisconnectionError() from exc  # the pool retries with a new one
        record.info["used"] = now

    return engine


IDLE_PING_S = 10.0


def _private_sqlite_files(path: str | None) -> None:
    """The database file readable by this user only (0600), made so before SQLite opens it.
    SQLite gives the ``-wal`` and ``-shm`` files it creates the database file's own mode; ones
    left by an earlier start with looser modes are tightened here."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT, 0o600))  # an empty file is an empty database
    for name in (path, path + "-wal", path + "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, 0o600)


def placeholder(conn: sa.Connection) -> str:
    """The driver's own parameter mark, for SQL run straight on its cursor: ``?`` (sqlite3) or
    ``%s`` (psycopg)."""
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def single_statement(engine: sa.Engine) -> sa.Engine:
    """The engine for a write that is one statement, atomic by itself. On PostgreSQL it runs
    outside a transaction (no ``BEGIN``): no BEGIN and COMMIT round trips, two of the three the write
    cost (psycopg waits for its BEGIN before sending the statement). On SQLite the engine itself:
    its ``BEGIN IMMEDIATE`` waits for the write lock, where a statement outside a transaction
    could fail at once on a snapshot another writer moved past."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(**{_NO_TRANSACTION: True})
    return engine


def reader(engine: sa.Engine) -> sa.Engine:
    """The engine for read-only work. On PostgreSQL it runs outside a transaction: a read
    saves the round trips of a ``BEGIN`` and a ``ROLLBACK`` it does not need (each statement
    still reads one consistent snapshot); on SQLite its transactions begin deferred
    (a WAL snapshot, no write lock), so reads neither wait for nor hold up writers."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(**{_NO_TRANSACTION: True})
    return engine.execution_options(**{_READ_ONLY: True})


def finite_json_values(value: Any) -> Any:
    """``value`` with each non-finite float as the text JSON columns keep (NaN, ±Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite_json_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json_values(v) for v in value]
    return value


def store_json(value: Any) -> str:
    """JSON columns' serializer: strict JSON, with a NaN or an infinity (a config's ``.inf``, a
    metadata value) stored as the strings Determined's API uses ("NaN", "Infinity",
    "-Infinity"), since PostgreSQL's json type refuses the bare tokens and a row that cannot be
    written, or read back by another client, must not come from a request."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(finite_json_values(value), allow_nan=False)
