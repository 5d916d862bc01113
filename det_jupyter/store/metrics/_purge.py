"""Deleting trials' metric storage for good: their reports and their stored series."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from .. import _tables as t


def delete_of_trials(conn: sa.Connection, trial_ids: Sequence[int]) -> None:
    """Delete the trials' metric reports and stored series (their rows and block steps), in
    the caller's transaction. ``trial_ids``: few enough for one IN list (the caller chunks)."""
    tids = list(trial_ids)
    conn.execute(sa.delete(t.metrics).where(t.metrics.c.trial_id.in_(tids)))
    conn.execute(sa.delete(t.metric_series).where(t.metric_series.c.trial_id.in_(tids)))
    conn.execute(sa.delete(t.metric_series_steps).where(t.metric_series_steps.c.trial_id.in_(tids)))
