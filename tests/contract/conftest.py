"""The store contract fixtures: every test here runs once on SQLite and once on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from det_jupyter.services.common.clock import FakeClock
from det_jupyter.store import make_engine, migrate, sqlite_url
from tests.conftest import PG_DSN, PG_SKIP, fresh_pg_database

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def _drop_pg_database(url: str) -> None:
    """Drop a database made by ``fresh_pg_database``, even if a connection was leaked."""
    import psycopg

    assert PG_DSN
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=BACKENDS)
def raw_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    """An engine on an empty database of each backend (nothing migrated yet)."""
    if request.param == "postgres":
        if not PG_DSN:
            pytest.skip(PG_SKIP)
        url = fresh_pg_database()
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()
            _drop_pg_database(url)
    else:
        engine = make_engine(sqlite_url(str(tmp_path / "store.db")))
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def engine(raw_engine: sa.Engine) -> sa.Engine:
    """A migrated engine on a fresh database of each backend."""
    migrate(raw_engine)
    return raw_engine


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()
