"""Metrics: ingestion (one row per report, batched) and the queries the API needs.

Idempotence: a report whose (trial, group, steps_completed) is already stored and visible is
dropped, so a client that retries a batch after a lost reply never makes a step appear twice.
Rewinding: when a trial restarts from a checkpoint, rows past it are archived (trials.py).
A per-trial summary (latest, min, max of every metric per group) is kept on the trial row so
the experiment table never scans the metrics table.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import placeholder, reader
from ...store import tables as t
from ..common.clock import Clock
from . import _charts as charts
from . import _columns as columns
from . import _series as stored


@dataclass(frozen=True)
class Report:
    group: str
    steps_completed: int
    metrics: dict
    report_time: float


class Ingested(NamedTuple):
    """What an ingestion stored: its new validation reports, and the trial's row as the
    ingestion read it (with ``experiment_id``, ``request_id``, ``state``; None when nothing
    was new)."""

    validations: list[Report]
    trial: Any = None


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


def update_summary(summary: dict | None, reports: list[Report],
                   found: tuple[tuple[str, ...], list[tuple]] | None = None) -> dict:
    """Fold reports, in order, into a trial's summary: per group, per metric last/min/max/count
    of the finite numbers (``last``: the value at the highest step, a later report winning a
    tie). One copy of the touched groups per call, then in place: ingestion folds whole
    batches, and a fresh dict per value cost more than storing the rows. ``found``: the
    reports' ``_metric_columns.uniform`` where the caller has it."""
    out = dict(summary or {})
    if reports:
        group = reports[0].group
        steps = [r.steps_completed for r in reports]
        if all(r.group == group for r in reports) and steps == sorted(steps):
            found = found if found is not None else columns.uniform(reports)
            if found is not None:  # one group's finite numbers in step order: by columns
                stats = {k: dict(v) for k, v in (out.get(group) or {}).items()}
                columns.fold(stats, *found, steps[-1])
                out[group] = stats
                return out
    _fold_each(out, reports)
    return out


def _fold_each(out: dict, reports: list[Report]) -> None:
    """``update_summary``'s fold, value by value, into ``out`` (a copy of the summary)."""
    touched: dict[str, dict] = {}
    for r in reports:
        stats = touched.get(r.group)
        if stats is None:
            stats = touched[r.group] = {k: dict(v) for k, v in (out.get(r.group) or {}).items()}
        step = r.steps_completed
        for name, value in r.metrics.items():
            if type(value) is not float:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                value = float(value)
            if math.isfinite(value):
                columns.merge(stats, name, value, value, value, 1, step)
    out.update(touched)


def best_of(best: float | None, report: Report, metric: str | None, sign: float) -> float | None:
    """The better of ``best`` and the report's searcher metric (a validation report)."""
    if report.group != "validation" or metric not in report.metrics:
        return best
    v = report.metrics[metric]
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        if best is None or sign * v < sign * best:
            return float(v)
    return best


def recompute_summary(conn: sa.Connection, trial_id: int, config: dict) -> None:
    """Rebuild a trial's summary and best validation from its visible rows (after a rewind)."""
    searcher = config.get("searcher", {})
    metric = searcher.get("metric")
    sign = 1.0 if searcher.get("smaller_is_better", True) else -1.0
    reports = [
        Report(row.mgroup, row.steps_completed, json.loads(row.body), 0.0)
        for row in conn.execute(
            sa.select(t.metrics.c.mgroup, t.metrics.c.steps_completed, t.metrics.c.body)
            .where(t.metrics.c.trial_id == trial_id, t.metrics.c.archived.is_(False))
            .order_by(t.metrics.c.steps_completed, t.metrics.c.id)
        )
    ]
    summary = update_summary(None, reports) if reports else None
    best = None
    for report in reports:
        best = best_of(best, report, metric, sign)
    conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(summary=summary, best_validation=best))


_METRIC_COLUMNS = "trial_id, trial_run_id, mgroup, steps_completed, report_time, body, archived, lod, time_text"
# Binary COPY takes the columns' types, in that order; the server then parses no text.
_METRIC_TYPES = ["int4", "int4", "text", "int4", "float8", "text", "bool", "int2", "text"]


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
            bodies.append(_body(r.metrics))
        yield trial_id, run_id, r.group, r.steps_completed, r.report_time, bodies[k], False, _lod(n), stamp


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


def _in_group(q: Any, group: str | tuple[str, ...] | None) -> Any:
    if group is None:
        return q
    if isinstance(group, str):
        return q.where(t.metrics.c.mgroup == group)
    return q.where(t.metrics.c.mgroup.in_(group))


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


class MetricService:
    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock

    def ingest(self, trial_id: int, run_id: int | None, reports: list[Report]) -> Ingested:
        """Store reports of one trial run."""
        if not reports:
            return Ingested([])
        with self._engine.begin() as conn:
            trial = conn.execute(_INGEST_TRIAL, {"trial_id": trial_id}).first()
            if trial is None:
                raise NotFound(f"trial {trial_id} not found")
            if run_id is not None and run_id and run_id != trial.run_id:
                raise Conflict(
                    f"trial {trial_id} is on run {trial.run_id}; reports from run {run_id} are stale"
                )
            # Visible rows never lie past total_batches (rewinds archive them), so a batch that
            # starts beyond it cannot repeat a stored step and needs no lookup.
            if min(r.steps_completed for r in reports) > trial.total_batches:
                fresh = _dedupe_batch(reports)
            else:
                fresh = self._drop_known(conn, trial_id, reports)
            if not fresh:
                return Ingested([])
            counts = dict(trial.report_counts or {})
            ordinals = _ordinals(fresh, counts)
            stamps = [time_text(r.report_time) for r in fresh]
            found = columns.uniform(fresh)  # a training loop's batch: encoded and summed by columns
            bodies = columns.encoded(*found) if found is not None else []
            _insert_rows(conn, _rows(trial_id, trial.run_id, fresh, ordinals, stamps, bodies))
            stored.append(conn, trial_id, trial.summary, fresh, ordinals, stamps, bodies,
                          found[0] if found is not None else None)
            validations = [r for r in fresh if r.group == "validation"]
            best = trial.best_validation
            searcher = trial.config.get("searcher", {})
            metric = searcher.get("metric")
            sign = 1.0 if searcher.get("smaller_is_better", True) else -1.0
            for r in validations:
                best = best_of(best, r, metric, sign)
            total = max(trial.total_batches, max(r.steps_completed for r in fresh))
            conn.execute(_INGEST_UPDATE, {
                "trial_id": trial_id, "summary": update_summary(trial.summary, fresh, found),
                "best_validation": best, "total_batches": total, "report_counts": counts,
            })
        return Ingested(validations, trial)

    def _drop_known(self, conn: sa.Connection, trial_id: int, reports: list[Report]) -> list[Report]:
        lo = min(r.steps_completed for r in reports)
        hi = max(r.steps_completed for r in reports)
        known: set[tuple[str, int]] = set(
            conn.execute(
                sa.select(t.metrics.c.mgroup, t.metrics.c.steps_completed).where(
                    t.metrics.c.trial_id == trial_id,
                    t.metrics.c.steps_completed >= lo,
                    t.metrics.c.steps_completed <= hi,
                    t.metrics.c.archived.is_(False),
                )
            ).all()
        )
        return _dedupe_batch(reports, known)

    def history(
        self, trial_id: int, group: str | tuple[str, ...] | None = None, *, offset: int = 0,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """A trial's visible reports, oldest step first (``group``: one name or a tuple)."""
        q = (
            sa.select(t.metrics.c.id, t.metrics.c.mgroup, t.metrics.c.steps_completed,
                      t.metrics.c.report_time, t.metrics.c.body, t.metrics.c.trial_run_id)
            .where(t.metrics.c.trial_id == trial_id, t.metrics.c.archived.is_(False))
            .order_by(t.metrics.c.steps_completed, t.metrics.c.id)
        )
        q = _in_group(q, group)
        if offset:
            q = q.offset(offset)
        if limit:
            q = q.limit(limit)
        with self._reader.connect() as conn:
            return [
                {
                    "id": r.id,
                    "group": r.mgroup,
                    "steps_completed": r.steps_completed,
                    "report_time": r.report_time,
                    "metrics": json.loads(r.body),
                    "trial_run_id": r.trial_run_id,
                }
                for r in conn.execute(q)
            ]

    def count(self, trial_id: int, group: str | tuple[str, ...] | None = None) -> int:
        q = sa.select(sa.func.count()).select_from(t.metrics).where(
            t.metrics.c.trial_id == trial_id, t.metrics.c.archived.is_(False)
        )
        q = _in_group(q, group)
        with self._reader.connect() as conn:
            return conn.execute(q).scalar_one()

    def series(
        self, trial_ids: list[int], group: str, names: list[str], *, max_points: int = 0,
        start: int | None = None, end: int | None = None, known: Any = None,
        histories: dict[int, str] | None = None,
    ) -> dict[int, str]:
        """Chosen metrics of several trials for charts: {trial: JSON array text of points
        ``{"batches", "time", "values": {name: value}}``}, oldest step first. ``known``: the
        trials' rows of ``id, summary, report_counts``, where the caller has just read them.
        ``histories``: whole histories of the one metric asked for, already read from its
        stored series (``Views.trials_with_history``), used where this call asks for whole
        histories of one metric without ``max_points``; the trials not in it are answered
        from the rows.

        With ``max_points``, each trial keeps at most that many reports: its first and last,
        and every 2**L-th report between, L the smallest level that fits — found through the
        chart index, so a chart of long trials reads only the rows it shows. The database
        builds the JSON: a chart of 200 trials is tens of thousands of points, and making a
        Python dict of each costs more than the query."""
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
        params: dict[str, Any] = {"group": group, "no": False}
        point = charts.point_sql(self._engine.dialect.name, names, params)
        cols = f"m.trial_id, m.steps_completed, {point or 'm.time_text, m.body'}"
        if start is not None:
            params["start"] = start
        if end is not None:
            params["end"] = end
        where = charts.window("m", params)
        with self._reader.connect() as conn:
            if whole:
                # From the stored series where they are complete.
                found = stored.read(conn, trial_ids, group, names[0], maxp, known)
                out.update(found)
                trial_ids = [tid for tid in trial_ids if tid not in found]
                if not trial_ids:
                    return out
            if not maxp:
                # The ids bound, not inlined: a history of another trial is then the same
                # statement (compiled and prepared once), not a new one.
                params["ids"] = list(trial_ids)
                sql = f"SELECT {cols} FROM metrics m WHERE m.trial_id IN :ids AND {where}"
            else:
                sql = charts.downsampled_sql(conn, trial_ids, group, maxp, cols, where, params)

            def run(text: str) -> list:
                query = sa.text(text)
                if not maxp:
                    query = query.bindparams(sa.bindparam("ids", expanding=True))
                # Straight from the driver's cursor: tens of thousands of rows of one string each.
                return conn.execute(query, params).cursor.fetchall()

            if point and maxp and conn.dialect.name == "postgresql":
                # A chart of many trials: the server joins each trial's points, a row per trial
                # instead of one per point for the driver to build (a single history gains
                # nothing: its sort costs what the rows save). Thinning, rarely needed, takes
                # the rows one by one.
                joined = run(f"SELECT s.trial_id, COUNT(*), string_agg(s.p, ',' ORDER BY s.step) "
                             f"FROM ({sql}) AS s(trial_id, step, p) GROUP BY s.trial_id")
                if all(n <= maxp for _, n, _ in joined):
                    out.update((tid, "[" + text + "]") for tid, _, text in joined)
                    return out
            rows = run(sql)
        rows.sort()
        if point:
            # Every row once (ingestion never stores a visible step twice, and the end rows
            # exclude those their level holds): each trial's points are its rows' texts, joined
            # without a Python step per row.
            for tid, trial_rows in itertools.groupby(rows, key=charts.TRIAL):
                texts = list(map(charts.TEXT, trial_rows))
                if maxp and len(texts) > maxp:
                    texts = charts.thin(texts, maxp)
                out[tid] = "[" + ",".join(texts) + "]"
            return out
        parts: dict[int, list[str]] = {tid: [] for tid in trial_ids}
        for row in rows:
            parts[row[0]].append(charts.point_json(row[1], row[2], json.loads(row[3]), names))
        if maxp:
            parts = {tid: charts.thin(p, maxp) for tid, p in parts.items()}
        out.update((tid, "[" + ",".join(p) + "]") for tid, p in parts.items())
        return out


def _lod(ordinal: int) -> int:
    """A report's chart level: the trailing zero bits of its ordinal (see tables.metrics)."""
    return min((ordinal & -ordinal).bit_length() - 1, t.MAX_LOD)


# Built once: json.dumps with options makes a new encoder per call, a third of a body's cost.
_STRICT_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def _body(metrics: dict) -> str:
    """A report as strict JSON, which the databases' JSON functions need: non-finite floats
    are stored as the strings "NaN", "Infinity" and "-Infinity", as Determined's REST API
    spells them."""
    try:
        return _STRICT_JSON.encode(metrics)
    except ValueError:
        return _COMPACT_JSON.encode(_finite(metrics))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_SECONDS: dict[int, str] = {}  # whole seconds as text: a trial's reports share most of them


def time_text(when: float) -> str:
    """A report time as the REST API spells it, to the millisecond (truncated): the
    ``time_text`` of its metric rows."""
    whole = int(when)
    head = _SECONDS.get(whole)
    if head is None:
        if len(_SECONDS) > 10_000:
            _SECONDS.clear()
        head = _SECONDS[whole] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{head}.{int((when - whole) * 1000):03d}Z"
