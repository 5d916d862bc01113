"""The records the metric store takes and gives: plain values, no SQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict


@dataclass(frozen=True)
class Report:
    """One metrics report of a trial: a group's metrics at a step (``report_time`` in epoch
    seconds)."""

    group: str
    steps_completed: int
    metrics: dict
    report_time: float


@dataclass(frozen=True, slots=True)
class IngestTrial:
    """A trial as ingestion reads it, in its transaction: what the stored reports move on
    (``summary``, ``total_batches``, ``best_validation``, ``report_counts``: reports so far per
    group), its experiment's ``config`` (the searcher's metric and direction) and what the
    caller hands on to the searcher (``experiment_id``, ``request_id``, ``state``)."""

    id: int
    run_id: int
    summary: dict | None
    total_batches: int
    best_validation: float | None
    report_counts: dict | None
    config: dict
    experiment_id: int
    request_id: str
    state: str


class StoredReport(TypedDict):
    """A visible report as ``history`` gives it."""

    id: int
    group: str
    steps_completed: int
    report_time: float
    metrics: dict[str, Any]
    trial_run_id: int | None
