"""The metric store: trials' metric reports, their stored series and their charts, on SQLite
or PostgreSQL.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction: ingestion
runs in one ``engine.begin()``, reads on a ``store.reader`` connection) and plain values or the
records below; none decides policy (which reports are stale or already stored, which is the
best validation: ``services.metrics`` does) or raises domain errors.

Writing (one transaction):

- ``read_trial(conn, trial_id) -> IngestTrial | None``: the trial row ingestion moves on;
- ``known_steps(conn, trial_id, lo, hi) -> set[(group, step)]``: visible reports in a step range;
- ``append(conn, trial, reports, best_validation)``: store new reports — their metric rows
  (binary COPY on PostgreSQL), stored series (``_series``), and the trial's summary, report
  counts and total batches;
- ``visible_reports(conn, trial_id) -> list[Report]`` and ``write_summary(conn, trial_id,
  summary, best_validation)``: a summary rebuilt after a rewind (``update_summary`` folds it).

Reading:

- ``history(conn, trial_id, group, offset=, limit=) -> list[StoredReport]``, ``count(...)``;
- ``chart(conn, trial_ids, group, names, max_points=, start=, end=, known=, stored_first=)``:
  {trial: JSON array text of points}, downsampled in SQL through the chart index;
- ``read_series(conn, trial_ids, group, name, max_points, known)`` and, on PostgreSQL,
  ``read_series_with_rows(...)``: whole (or sampled) histories of one metric from the stored
  series, for the trials where they provably equal the rows.

``time_text`` spells a report time as the rows (and the REST API) do. docs/internals.md
"Metric rows and charts" explains the levels, the chart index and the stored series.
"""

from __future__ import annotations

from ._encode import time_text
from ._ingest import append, known_steps, read_trial, visible_reports, write_summary
from ._purge import delete_of_trials
from ._query import Groups, chart, count, history
from ._records import IngestTrial, Report, StoredReport
from ._series import read as read_series
from ._series import read_with_rows as read_series_with_rows
from ._summary import update_summary

__all__ = [
    "Groups",
    "IngestTrial",
    "Report",
    "StoredReport",
    "append",
    "chart",
    "count",
    "delete_of_trials",
    "history",
    "known_steps",
    "read_series",
    "read_series_with_rows",
    "read_trial",
    "time_text",
    "update_summary",
    "visible_reports",
    "write_summary",
]
