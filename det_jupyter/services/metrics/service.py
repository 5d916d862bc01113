"""Metrics: the policy over the metric store (``store.metrics``) — what a report may hold, which
reports of a batch are new, which run may report, what the best validation is.

Idempotence: a report whose (trial, group, steps_completed) is already stored and visible is
dropped, so a client that retries a batch after a lost reply never makes a step appear twice.
Rewinding: when a trial restarts from a checkpoint, rows past it are archived (trials.py).
A per-trial summary (latest, min, max of every metric per group) is kept on the trial row so
the experiment table never scans the metrics table.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import metrics as store
from ...store import reader
from ...store.metrics import IngestTrial, Report, StoredReport, time_text
from ..common.clock import Clock

__all__ = [
    "MAX_METRICS", "MAX_METRIC_NAME", "MAX_REPORTS", "MAX_STEPS", "Ingested", "MetricService", "Report",
    "best_of", "parse_report", "parse_reports", "recompute_summary", "time_text",
]


class Ingested(NamedTuple):
    """What an ingestion stored: its new validation reports, and the trial as the ingestion
    read it (with ``experiment_id``, ``request_id``, ``state``; None when nothing was new)."""

    validations: list[Report]
    trial: IngestTrial | None = None


MAX_STEPS = 2**31 - 1  # the steps column is a 32-bit integer on PostgreSQL
#: What one request may carry: reports per batch, metrics per report, a metric name's length.
MAX_REPORTS = 20_000  # the harness ships up to ~12,000 after an outage (its spilled fragments)
MAX_METRICS = 10_000
MAX_METRIC_NAME = 256


def parse_reports(items: object, default_time: float) -> list[Report]:
    """A batch of reports (``parse_report`` each), at most ``MAX_REPORTS``."""
    if not isinstance(items, list):
        raise InvalidRequest("reports must be a list")
    if len(items) > MAX_REPORTS:
        raise InvalidRequest(f"a batch holds at most {MAX_REPORTS} reports, got {len(items)}: "
                             "send the rest in another request")
    return [parse_report(r, default_time) for r in items]


def parse_report(body: dict, default_time: float) -> Report:
    """One report from the wire (``{"group", "stepsCompleted", "metrics", "reportTime"}``)."""
    if not isinstance(body, dict):
        raise InvalidRequest("each report must be an object")
    group = body.get("group") or "training"
    steps = body["stepsCompleted"] if "stepsCompleted" in body else body.get("steps_completed")
    metrics = body.get("metrics")
    if isinstance(metrics, dict) and "avgMetrics" in metrics:
        metrics = metrics["avgMetrics"]
    if not isinstance(group, str) or len(group) > 64:
        raise InvalidRequest("metrics group must be a string of at most 64 characters")
    if type(steps) is not int:  # the wire's usual case needs no conversion
        try:
            steps = int(steps)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest("stepsCompleted must be an integer") from exc
    if not 0 <= steps <= MAX_STEPS:
        raise InvalidRequest(f"stepsCompleted must be between 0 and {MAX_STEPS}, got {steps}")
    if not isinstance(metrics, dict):
        raise InvalidRequest("metrics must be an object of metric names to values")
    if len(metrics) > MAX_METRICS:
        raise InvalidRequest(f"a report holds at most {MAX_METRICS} metrics, got {len(metrics)}")
    for name in metrics:
        if not name or len(name) > MAX_METRIC_NAME:
            raise InvalidRequest(f"metric names must be 1 to {MAX_METRIC_NAME} characters long, "
                                 f"got one of {len(name)}")
    return Report(group, steps, metrics, default_time)


def best_of(best: float | None, report: Report, metric: str | None, sign: float) -> float | None:
    """The better of ``best`` and the report's searcher metric (a validation report)."""
    if report.group != "validation" or metric not in report.metrics:
        return best
    v = report.metrics[metric]
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        if best is None or sign * v < sign * best:
            return float(v)
    return best


def _searcher_metric(config: dict) -> tuple[str | None, float]:
    """The experiment's searcher metric and its sign (1.0: smaller is better)."""
    searcher = config.get("searcher", {})
    return searcher.get("metric"), 1.0 if searcher.get("smaller_is_better", True) else -1.0


def recompute_summary(conn: sa.Connection, trial_id: int, config: dict) -> None:
    """Rebuild a trial's summary and best validation from its visible rows (after a rewind)."""
    metric, sign = _searcher_metric(config)
    reports = store.visible_reports(conn, trial_id)
    summary = store.update_summary(None, reports) if reports else None
    best = None
    for report in reports:
        best = best_of(best, report, metric, sign)
    store.write_summary(conn, trial_id, summary, best)


def _dedupe_batch(reports: list[Report], seen: set[tuple[str, int]] | None = None) -> list[Report]:
    """The reports whose (group, step) is neither in ``seen`` nor earlier in the batch."""
    seen = set() if seen is None else seen
    out = []
    for r in reports:
        key = (r.group, r.steps_completed)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


class MetricService:
    """Trials' metrics: ingestion of their reports, their histories and charts."""

    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock

    def ingest(self, trial_id: int, run_id: int | None, reports: list[Report]) -> Ingested:
        """Store reports of one trial run: those not stored yet, once each (``NotFound``: no
        such trial; ``Conflict``: ``run_id`` is not the trial's run)."""
        if not reports:
            return Ingested([])
        with self._engine.begin() as conn:
            trial = store.read_trial(conn, trial_id)
            if trial is None:
                raise NotFound(f"trial {trial_id} not found")
            if run_id is not None and run_id and run_id != trial.run_id:
                raise Conflict(
                    f"trial {trial_id} is on run {trial.run_id}; reports from run {run_id} are stale"
                )
            # Visible rows never lie past total_batches (rewinds archive them), so a batch that
            # starts beyond it cannot repeat a stored step and needs no lookup.
            lo = min(r.steps_completed for r in reports)
            if lo > trial.total_batches:
                fresh = _dedupe_batch(reports)
            else:
                hi = max(r.steps_completed for r in reports)
                fresh = _dedupe_batch(reports, store.known_steps(conn, trial_id, lo, hi))
            if not fresh:
                return Ingested([])
            validations = [r for r in fresh if r.group == "validation"]
            best = trial.best_validation
            metric, sign = _searcher_metric(trial.config)
            for r in validations:
                best = best_of(best, r, metric, sign)
            store.append(conn, trial, fresh, best)
        return Ingested(validations, trial)

    def history(
        self, trial_id: int, group: store.Groups = None, *, offset: int = 0, limit: int | None = None,
    ) -> list[StoredReport]:
        """A trial's visible reports, oldest step first (``group``: one name or a tuple)."""
        with self._reader.connect() as conn:
            return store.history(conn, trial_id, group, offset=offset, limit=limit)

    def count(self, trial_id: int, group: store.Groups = None) -> int:
        """How many visible reports the trial has (in ``group``: one name or a tuple)."""
        with self._reader.connect() as conn:
            return store.count(conn, trial_id, group)

    def series(
        self, trial_ids: list[int], group: str, names: list[str], *, max_points: int = 0,
        start: int | None = None, end: int | None = None, known: Any = None,
        histories: dict[int, str] | None = None,
    ) -> dict[int, str]:
        """Chosen metrics of several trials for charts: {trial: JSON array text of points
        ``{"batches", "time", "values": {name: value}}``}, oldest step first (``store.metrics.
        chart``; ``max_points``: at most that many per trial, downsampled). ``known``: the
        trials' rows of ``id, summary, report_counts``, where the caller has just read them.
        ``histories``: whole histories of the one metric asked for, already read from its
        stored series (``Views.trials_with_history``), used where this call asks for whole
        histories of one metric without ``max_points``; the trials not in it are answered
        from the rows."""
        if not trial_ids or not names:
            return {tid: "[]" for tid in trial_ids}
        maxp = max(int(max_points or 0), 0)
        out = dict.fromkeys(trial_ids, "[]")
        whole = len(names) == 1 and start is None and end is None  # whole histories of one metric
        if whole and histories is not None and not maxp:
            # Read by the caller with the trials from their stored series where complete; the
            # others from the rows (without a connection where there are none).
            out.update((tid, histories[tid]) for tid in trial_ids if tid in histories)
            trial_ids = [tid for tid in trial_ids if tid not in histories]
            if not trial_ids:
                return out
            whole = False
        with self._reader.connect() as conn:
            out.update(store.chart(conn, trial_ids, group, names, max_points=maxp, start=start, end=end,
                                   known=known, stored_first=whole))
        return out
