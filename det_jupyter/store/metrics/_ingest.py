"""Metric ingestion's SQL: the trial row it reads and moves on, the visible steps it checks new
reports against, and the metric rows, stored series and summary it writes — all in the
caller's transaction (``conn``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import sqlalchemy as sa

from .. import _tables as t
from .._engine import placeholder
from . import _columns as columns
from . import _series as series
from ._encode import body, lod, time_text
from ._records import IngestTrial, Report
from ._summary import update_summary

_METRIC_COLUMNS = "trial_id, trial_run_id, mgroup, steps_completed, report_time, body, archived, lod, time_text"
# Binary COPY takes the columns' types, in that order; the server then parses no text.
_METRIC_TYPES = ["int4", "int4", "text", "int4", "float8", "text", "bool", "int2", "text"]

# Ingestion's two statements on the trial row, built once: building and keying a statement per
# request cost more than running it on SQLite.
_INGEST_TRIAL = (
    sa.select(
        t.trials.c.id, t.trials.c.run_id, t.trials.c.summary, t.trials.c.total_batches,
        t.trials.c.best_validation, t.trials.c.report_counts, t.experiments.c.config,
        t.trials.c.experiment_id, t.trials.c.request_id, t.trials.c.state,
    )
    .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
    .where(t.trials.c.id == sa.bindparam("trial_id"))
)
_INGEST_UPDATE = (
    sa.update(t.trials)
    .where(t.trials.c.id == sa.bindparam("trial_id"))
    .values({c: sa.bindparam(c, type_=t.trials.c[c].type)
             for c in ("summary", "best_validation", "total_batches", "report_counts")})
)


def read_trial(conn: sa.Connection, trial_id: int) -> IngestTrial | None:
    """The trial as ingestion reads it (None: no such trial)."""
    row = conn.execute(_INGEST_TRIAL, {"trial_id": trial_id}).first()
    return None if row is None else IngestTrial(**row._mapping)


def known_steps(conn: sa.Connection, trial_id: int, lo: int, hi: int) -> set[tuple[str, int]]:
    """The (group, step) of the trial's visible reports with steps from ``lo`` to ``hi``."""
    return set(
        conn.execute(
            sa.select(t.metrics.c.mgroup, t.metrics.c.steps_completed).where(
                t.metrics.c.trial_id == trial_id,
                t.metrics.c.steps_completed >= lo,
                t.metrics.c.steps_completed <= hi,
                t.metrics.c.archived.is_(False),
            )
        ).all()
    )


def append(conn: sa.Connection, trial: IngestTrial, reports: list[Report], best_validation: float | None) -> None:
    """Store new reports of ``trial`` (as ``read_trial`` gave it in this transaction; none of
    them at a (group, step) already visible, none twice): their metric rows on the trial's
    run, their stored series, and the trial row moved on past them — summary, reports per
    group, total batches — with ``best_validation``, which the caller decides."""
    counts = dict(trial.report_counts or {})
    ordinals = _ordinals(reports, counts)
    stamps = [time_text(r.report_time) for r in reports]
    found = columns.uniform(reports)  # a training loop's batch: encoded and summed by columns
    bodies = columns.encoded(*found) if found is not None else []
    _insert_rows(conn, _rows(trial.id, trial.run_id, reports, ordinals, stamps, bodies))
    series.append(conn, trial.id, trial.summary, reports, ordinals, stamps, bodies,
                  found[0] if found is not None else None)
    total = max(trial.total_batches, max(r.steps_completed for r in reports))
    conn.execute(_INGEST_UPDATE, {
        "trial_id": trial.id, "summary": update_summary(trial.summary, reports, found),
        "best_validation": best_validation, "total_batches": total, "report_counts": counts,
    })


def visible_reports(conn: sa.Connection, trial_id: int) -> list[Report]:
    """The trial's visible reports, in step order (``report_time`` not read: 0.0)."""
    return [
        Report(row.mgroup, row.steps_completed, json.loads(row.body), 0.0)
        for row in conn.execute(
            sa.select(t.metrics.c.mgroup, t.metrics.c.steps_completed, t.metrics.c.body)
            .where(t.metrics.c.trial_id == trial_id, t.metrics.c.archived.is_(False))
            .order_by(t.metrics.c.steps_completed, t.metrics.c.id)
        )
    ]


def write_summary(conn: sa.Connection, trial_id: int, summary: dict | None, best_validation: float | None) -> None:
    """Set the trial's summary and best validation (a rebuild after a rewind)."""
    conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id)
                 .values(summary=summary, best_validation=best_validation))


def _ordinals(reports: list[Report], counts: dict[str, int]) -> list[int]:
    """New reports' ordinals in their groups; ``counts`` (reports so far per group) moves on
    past them."""
    ordinals = []
    for r in reports:
        counts[r.group] = ordinal = counts.get(r.group, 0) + 1
        ordinals.append(ordinal)
    return ordinals


def _rows(trial_id: int, run_id: int | None, reports: list[Report], ordinals: list[int],
          stamps: list[str], bodies: list[str]) -> Iterator[tuple]:
    """The metric rows of new reports. ``bodies``: their encoded metrics, or empty: then each
    row's body is encoded (and added to ``bodies``) as the row is taken, and PostgreSQL stores
    the rows COPY has sent while the next ones are encoded."""
    for k, (r, n, stamp) in enumerate(zip(reports, ordinals, stamps, strict=True)):
        if k == len(bodies):
            bodies.append(body(r.metrics))
        yield trial_id, run_id, r.group, r.steps_completed, r.report_time, bodies[k], False, lod(n), stamp


def _insert_rows(conn: sa.Connection, rows: Iterable[tuple]) -> None:
    """Insert metric rows with the driver's fastest bulk path, past SQLAlchemy's per-row work:
    binary COPY on PostgreSQL, executemany on SQLite."""
    if conn.dialect.name == "postgresql":
        cursor = conn.connection.driver_connection.cursor()
        with cursor.copy(f"COPY metrics ({_METRIC_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_METRIC_TYPES)
            for row in rows:
                copy.write_row(row)
        return
    mark = placeholder(conn)
    conn.exec_driver_sql(
        f"INSERT INTO metrics ({_METRIC_COLUMNS}) VALUES ({', '.join([mark] * 9)})", list(rows)
    )
