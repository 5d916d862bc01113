"""Stored series: each metric's chart points, encoded once at ingestion (``metric_series``), so
a chart of one metric's whole history reads a few block rows instead of extracting the metric
from every report's JSON, which is most of that query's cost.

A block holds the points of one name among its group's reports with ordinals in
``[block * BLOCK, (block + 1) * BLOCK)`` (ordinals start at 1), comma-joined in arrival order,
in the text ``point_sql`` builds. A stored series answers a chart only where it is provably
what the rows give (``read``):

- every report of the group, archived ones included, held the metric as a finite number: the
  trial's summary counts as many as ``report_counts`` (a rewind that archived rows, a report
  without the metric or with a NaN, make them differ for good);
- the blocks hold that many points (a database from before the table, or a group whose blocks
  were dropped, holds fewer);
- its points are in step order: a report whose step is not past its group's last one drops the
  group's blocks (``append``), which the check above then refuses.

Anything else is answered from the rows, as before.
"""

from __future__ import annotations

import json
import math
from typing import Any

import sqlalchemy as sa

from ..store import tables as t

BLOCK = 32  # points per block: an append rewrites about 2 kB, a 1,000-step history is 32 rows

_UPSERT = (
    "INSERT INTO metric_series (trial_id, mgroup, name, block, n, points) VALUES ({0}, {0}, {0}, {0}, {0}, {0}) "
    "ON CONFLICT (trial_id, mgroup, name, block) DO UPDATE SET n = metric_series.n + excluded.n, "
    "points = metric_series.points || ',' || excluded.points"
)
# Run as the driver's own SQL, the ids inlined (integers): SQLAlchemy's statement work (an
# expanding IN is rewritten per call) cost more than these queries on SQLite.
_COUNTS = "SELECT id, summary, report_counts FROM trials WHERE id IN ({ids})"
_BLOCKS = ("SELECT trial_id, n, points FROM metric_series WHERE trial_id IN ({ids}) AND mgroup = {mark} "
           "AND name = {mark} ORDER BY trial_id, block")


def append(conn: sa.Connection, trial_id: int, summary: dict | None, reports: list[Any],
           ordinals: list[int], stamps: list[str]) -> None:
    """Add new reports' finite values to their blocks, in ``conn`` (ingestion's transaction).
    ``summary`` is the trial's summary before these reports: each metric's ``lastStep`` gives
    how far its group has gone. A group whose steps do not move forward loses its blocks."""
    last: dict[str, int] = {}
    disordered: set[str] = set()
    blocks: dict[tuple[str, str, int], list[str]] = {}
    keys: dict[str, str] = {}
    for r, ordinal, stamp in zip(reports, ordinals, stamps, strict=True):
        group, step = r.group, r.steps_completed
        if group in disordered:
            continue
        before = last.get(group)
        if before is None:
            before = max((s.get("lastStep", -1) for s in ((summary or {}).get(group) or {}).values()), default=-1)
        if step <= before:
            disordered.add(group)
            continue
        last[group] = step
        block = (ordinal - 1) // BLOCK
        for name, value in r.metrics.items():
            kind = type(value)
            if kind is int or (kind is float and math.isfinite(value)):
                key = keys.get(name)
                if key is None:
                    key = keys[name] = json.dumps(name) + ":"
                point = f'{{"batches":{step},"time":"{stamp}","values":{{{key}{value!r}}}}}'
                blocks.setdefault((group, name, block), []).append(point)
    if disordered:
        conn.execute(sa.delete(t.metric_series).where(t.metric_series.c.trial_id == trial_id,
                                                      t.metric_series.c.mgroup.in_(disordered)))
    rows = [(trial_id, group, name, block, len(points), ",".join(points))
            for (group, name, block), points in blocks.items() if group not in disordered]
    if rows:
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        conn.exec_driver_sql(_UPSERT.format(mark), rows)


def read(conn: sa.Connection, trial_ids: list[int], group: str, name: str, max_points: int) -> dict[int, str]:
    """The JSON array text of ``name``'s points, oldest step first, of each of the trials whose
    stored series is complete and holds at most ``max_points`` points (0: any number)."""
    ids = ",".join(str(int(tid)) for tid in trial_ids)
    expected = {}
    for tid, summary, counts in conn.exec_driver_sql(_COUNTS.format(ids=ids)).cursor:
        stats = (_decoded(summary).get(group) or {}).get(name)
        count = stats.get("count") if stats else None
        if count and count == _decoded(counts).get(group) and (not max_points or count <= max_points):
            expected[tid] = count
    if not expected:
        return {}
    found: dict[int, list[str]] = {}
    held: dict[int, int] = {}
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = _BLOCKS.format(ids=",".join(map(str, expected)), mark=mark)
    for tid, n, points in conn.exec_driver_sql(sql, (group, name)).cursor:
        found.setdefault(tid, []).append(points)
        held[tid] = held.get(tid, 0) + n
    return {tid: "[" + ",".join(found[tid]) + "]" for tid, count in expected.items() if held.get(tid) == count}


def _decoded(value: Any) -> dict:
    """A JSON column as the driver gives it: text on SQLite, decoded on PostgreSQL."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}
