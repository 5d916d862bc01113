"""The searcher log's store: an experiment's searcher inputs (its config and snapshot), its
event log rows, snapshots, and the group commit's write of log rows and progress.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values (payloads are JSON text, made by ``services.experiments.searcher_log``, which decides
when a snapshot is due).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from . import _tables as t
from ._engine import placeholder


def inputs(conn: sa.Connection, experiment_id: int) -> sa.Row:
    """What restoring the experiment's searcher needs: its ``config`` and ``searcher_state``
    (NoResultFound: no such experiment)."""
    return conn.execute(
        sa.select(t.experiments.c.config, t.experiments.c.searcher_state).where(t.experiments.c.id == experiment_id)
    ).one()


def payloads(conn: sa.Connection, experiment_id: int) -> list[str]:
    """The payloads of the experiment's logged event rows, in log order."""
    return list(conn.execute(
        sa.select(t.searcher_events.c.payload)
        .where(t.searcher_events.c.experiment_id == experiment_id)
        .order_by(t.searcher_events.c.id)
    ).scalars())


def snapshot(conn: sa.Connection, experiment_id: int, searcher_state: dict[str, Any]) -> None:
    """Drop the experiment's event log and store ``searcher_state`` instead."""
    conn.execute(sa.delete(t.searcher_events).where(t.searcher_events.c.experiment_id == experiment_id))
    conn.execute(sa.update(t.experiments).where(t.experiments.c.id == experiment_id).values(
        searcher_state=searcher_state
    ))


def write(conn: sa.Connection, logged: list[tuple[int, str]], progressed: list[tuple[int, float]]) -> None:
    """Insert the log rows (experiment, payload) and update the experiments' progress
    (experiment, progress): on PostgreSQL one statement for both; on SQLite one for the rows
    and one per progress."""
    insert = ("INSERT INTO searcher_events (experiment_id, payload) VALUES "
              + ", ".join(["({0}, {0})"] * len(logged)))
    rows = tuple(v for row in logged for v in row)
    if conn.dialect.name == "postgresql" and progressed:
        update = ("UPDATE experiments SET progress = v.p FROM (VALUES "
                  + ", ".join(["({0}::integer, {0}::double precision)"] * len(progressed))
                  + ") AS v(id, p) WHERE experiments.id = v.id")
        params = tuple(v for row in progressed for v in row)
        if logged:
            _driver_sql(conn, f"WITH logged AS ({insert}) {update}", rows + params)
        else:
            _driver_sql(conn, update, params)
        return
    if logged:
        _driver_sql(conn, insert, rows)
    for exp_id, progress in progressed:
        _driver_sql(conn, "UPDATE experiments SET progress = {0} WHERE id = {0}", (progress, exp_id))


def _driver_sql(conn: sa.Connection, sql: str, params: tuple) -> None:
    """Run ``sql`` with ``{0}`` as the driver's placeholder, in ``conn``'s transaction.

    These statements run for every event group of a big search, so they go straight to the
    driver's connection: SQLAlchemy's execution context (even for driver SQL) cost about as
    much as the statement itself on PostgreSQL. The transaction is still the caller's: psycopg
    opens it at the first statement and SQLite's began with the ``BEGIN IMMEDIATE`` of the
    engine's begin hook; SQLAlchemy commits or rolls it back.
    """
    driver = conn.connection.driver_connection
    marker = placeholder(conn)
    driver.execute(sql.format(marker), params).close()
