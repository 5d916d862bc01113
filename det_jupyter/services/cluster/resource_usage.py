"""Historical slot usage (``det resources raw|allocations|aggregated``), computed from the
allocation records as 0.38.1 does: an allocation's seconds inside the window times its slots."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ...errors import InvalidRequest
from ...store import pool_bindings as rows
from ...store import reader
from ..common.clock import Clock

_STAMP = "%Y-%m-%dT%H:%M:%SZ"


def parse_stamp(text: str, what: str) -> float:
    """``2026-11-28T10:00:00Z`` (0.38.1's only accepted form) as epoch seconds."""
    try:
        return dt.datetime.strptime(text, _STAMP).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        raise InvalidRequest(
            f"invalid {what} {text[:40]!r}: use the form 2026-11-28T10:00:00Z"
        ) from None


def parse_day(text: str, fmt: str, what: str) -> dt.date:
    try:
        return dt.datetime.strptime(text, fmt).date()
    except ValueError:
        raise InvalidRequest(
            f"invalid {what} {text[:40]!r}: use the form "
            f"{'2026-11-28' if fmt == '%Y-%m-%d' else '2026-11'}"
        ) from None


def overlap(start: float, end: float | None, lo: float, hi: float, now: float) -> float:
    """Seconds of [start, end or now] inside [lo, hi]."""
    return max(0.0, min(end if end is not None else now, hi) - max(start, lo))


def _iso(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat().replace("+00:00", "Z")


def _csv(header: Sequence[str], lines: Sequence[Sequence[Any]]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    w.writerows(lines)
    return out.getvalue()


class ResourceUsage:
    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._reader = reader(engine)
        self._clock = clock

    def _rows(self, lo: float, hi: float) -> list[sa.Row]:
        if lo > hi:
            raise InvalidRequest("start time cannot be after end time")
        with self._reader.connect() as conn:
            return rows.allocations_between(conn, lo, hi)

    def raw_csv(self, after: str, before: str) -> str:
        """0.38.1's ``/resources/allocation/raw``: one line per allocation."""
        lo, hi = parse_stamp(after, "start time"), parse_stamp(before, "end time")
        now = self._clock.now()
        lines = []
        for r in self._rows(lo, hi):
            labels = ",".join(
                str(x).replace("\\", "\\\\").replace(",", "\\,") for x in (r.labels or [])
            )
            secs = overlap(r.start_time, r.end_time, lo, hi, now)
            lines.append(
                [
                    r.experiment_id or 0,
                    r.job_type or "",
                    r.username or "",
                    labels,
                    r.slots,
                    _iso(r.start_time),
                    _iso(r.end_time),
                    f"{secs:f}",
                ]
            )
        return _csv(
            [
                "experiment_id",
                "kind",
                "username",
                "labels",
                "slots",
                "start_time",
                "end_time",
                "seconds",
            ],
            lines,
        )

    def allocations_csv(self, after: str, before: str) -> str:
        """0.38.1's ``/resources/allocation/allocations-csv``: slot hours per allocation."""
        lo, hi = parse_stamp(after, "start time"), parse_stamp(before, "end time")
        now = self._clock.now()
        lines = []
        for r in self._rows(lo, hi):
            hours = overlap(r.start_time, r.end_time, lo, hi, now) * r.slots / 3600.0
            lines.append(
                [
                    r.allocation_id,
                    r.job_type or "",
                    r.username or "",
                    "",
                    r.experiment_id or "",
                    r.slots,
                    _iso(r.start_time),
                    _iso(r.end_time),
                    "0.0",
                    f"{hours:f}" if hours else "0.0",
                    r.resource_pool,
                ]
            )
        return _csv(
            [
                "allocation_id",
                "task_type",
                "username",
                "workspace_name",
                "experiment_id",
                "slots",
                "start_time",
                "end_time",
                "imagepulling_time",
                "slot_hours",
                "resource_pool",
            ],
            lines,
        )

    def aggregated_csv(self, start: str, end: str, period: str) -> str:
        """0.38.1's ``/resources/allocation/aggregated``: slot-seconds per day (or month) by
        experiment label, username, pool and in total."""
        monthly = period == "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY"
        if not monthly and period != "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY":
            raise InvalidRequest(
                "no aggregation period specified: period must be "
                "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY or _MONTHLY"
            )
        fmt = "%Y-%m" if monthly else "%Y-%m-%d"
        first, last = parse_day(start, fmt, "start date"), parse_day(end, fmt, "end date")
        if monthly:  # through the end date's month
            last = (last.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(
                days=1
            )
        if first > last:
            raise InvalidRequest("start date cannot be after end date")
        periods: list[tuple[str, float, float]] = []
        day = first
        while day <= last:
            nxt = (
                (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
                if monthly
                else day + dt.timedelta(1)
            )
            lo = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()
            hi = dt.datetime(nxt.year, nxt.month, nxt.day, tzinfo=dt.UTC).timestamp()
            periods.append((day.strftime(fmt), lo, hi))
            day = nxt
        now = self._clock.now()
        found = self._rows(periods[0][1], periods[-1][2])
        lines: list[list[Any]] = []
        for key, lo, hi in periods:
            by: dict[str, dict[str, float]] = {
                k: defaultdict(float) for k in ("experiment_label", "username", "resource_pool")
            }
            total = 0.0
            for r in found:
                secs = overlap(r.start_time, r.end_time, lo, hi, now) * r.slots
                if not secs:
                    continue
                total += secs
                for label in r.labels or []:
                    by["experiment_label"][str(label)] += secs
                by["username"][r.username or ""] += secs
                by["resource_pool"][r.resource_pool] += secs
            for kind, vals in by.items():
                lines.extend([kind, k, key, f"{v:f}"] for k, v in sorted(vals.items()))
            lines.append(["total", "total", key, f"{total:f}"])
        return _csv(["aggregation_type", "aggregation_key", "date", "seconds"], lines)
