"""The metric store's reads: a trial's visible reports, their number, and charts of chosen
metrics of several trials."""

from __future__ import annotations

import itertools
import json
from typing import Any

import sqlalchemy as sa

from .. import _tables as t
from . import _charts as charts
from . import _series as series
from ._records import StoredReport

Groups = str | tuple[str, ...] | None  # one group, several, or every one


def history(conn: sa.Connection, trial_id: int, group: Groups = None, *, offset: int = 0,
            limit: int | None = None) -> list[StoredReport]:
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


def count(conn: sa.Connection, trial_id: int, group: Groups = None) -> int:
    """How many visible reports the trial has (in ``group``)."""
    q = sa.select(sa.func.count()).select_from(t.metrics).where(
        t.metrics.c.trial_id == trial_id, t.metrics.c.archived.is_(False)
    )
    q = _in_group(q, group)
    return conn.execute(q).scalar_one()


def _in_group(q: Any, group: Groups) -> Any:
    if group is None:
        return q
    if isinstance(group, str):
        return q.where(t.metrics.c.mgroup == group)
    return q.where(t.metrics.c.mgroup.in_(group))


def chart(
    conn: sa.Connection, trial_ids: list[int], group: str, names: list[str], *, max_points: int = 0,
    start: int | None = None, end: int | None = None, known: Any = None, stored_first: bool = False,
) -> dict[int, str]:
    """Chosen metrics (``names``, at least one) of several trials (at least one) for charts:
    {trial: JSON array text of points ``{"batches", "time", "values": {name: value}}``},
    oldest step first, every trial of ``trial_ids`` answered (``"[]"``: no points), with steps
    from ``start`` to before ``end`` where given. ``stored_first``: read each trial's stored
    series first, answering from the rows only those whose series is incomplete (for a whole
    history of one metric: one name, no ``start`` or ``end``); ``known``: the trials' rows of
    ``id, summary, report_counts`` for that, where the caller has just read them.

    With ``max_points`` (0: every point), each trial keeps at most that many reports: its
    first and last, and every 2**L-th report between, L the smallest level that fits — found
    through the chart index, so a chart of long trials reads only the rows it shows. The
    database builds the JSON: a chart of 200 trials is tens of thousands of points, and making
    a Python dict of each costs more than the query."""
    maxp = max_points
    out = dict.fromkeys(trial_ids, "[]")
    params: dict[str, Any] = {"group": group, "no": False}
    point = charts.point_sql(conn.dialect.name, names, params)
    cols = f"m.trial_id, m.steps_completed, {point or 'm.time_text, m.body'}"
    if start is not None:
        params["start"] = start
    if end is not None:
        params["end"] = end
    where = charts.window("m", params)
    if stored_first:
        found = series.read(conn, trial_ids, group, names[0], maxp, known)
        out.update(found)
        trial_ids = [tid for tid in trial_ids if tid not in found]
        if not trial_ids:
            return out
    if not maxp:
        # The ids bound, not inlined: a history of another trial is then the same statement
        # (compiled and prepared once), not a new one.
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
        # A chart of many trials: the server joins each trial's points, a row per trial instead
        # of one per point for the driver to build (a single history gains nothing: its sort
        # costs what the rows save). Thinning, rarely needed, takes the rows one by one.
        joined = run(f"SELECT s.trial_id, COUNT(*), string_agg(s.p, ',' ORDER BY s.step) "
                     f"FROM ({sql}) AS s(trial_id, step, p) GROUP BY s.trial_id")
        if all(n <= maxp for _, n, _ in joined):
            out.update((tid, "[" + text + "]") for tid, _, text in joined)
            return out
    rows = run(sql)
    rows.sort()
    if point:
        # Every row once (ingestion never stores a visible step twice, and the end rows exclude
        # those their level holds): each trial's points are its rows' texts, joined without a
        # Python step per row.
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
