"""The SQL of metric charts (``chart`` in ``_query.py``): which rows a chart reads, at which
level, and how the database writes each point's JSON.

Pure string building and small helpers; the query runs in ``_query.py``. See
docs/internals.md "Metric rows and charts" for the levels and the chart index.
"""

from __future__ import annotations

import json
import operator
from typing import Any

import sqlalchemy as sa

from .. import _tables as t


def downsampled_sql(
    conn: sa.Connection, trial_ids: list[int], group: str, maxp: int, cols: str, where: str,
    params: dict[str, Any],
) -> str:
    """Each trial's rows at its level, and those of its end rows the level does not hold
    (each row once)."""
    ids = ", ".join(str(int(tid)) for tid in trial_ids)
    if "start" in params or "end" in params:  # a zoomed chart: count what the window holds
        counts = dict(conn.execute(sa.text(
            f"SELECT m.trial_id, COUNT(*) FROM metrics m WHERE m.trial_id IN ({ids}) AND "
            f"{window('m', params, visible_only=False)} GROUP BY m.trial_id"), params).all())
    else:
        counts = {tid: (rc or {}).get(group, 0) for tid, rc in conn.execute(
            sa.select(t.trials.c.id, t.trials.c.report_counts).where(t.trials.c.id.in_(trial_ids)))}
    levels = ", ".join(f"({int(tid)}, {level(counts.get(tid, 0), maxp)})" for tid in trial_ids)
    x_where = window("x", params)
    # ORDER BY … LIMIT 1 (not MIN/MAX) is what SQLite answers with one index seek.
    edge = ("(SELECT x.steps_completed FROM metrics x WHERE x.trial_id = lv.trial_id AND "
            f"{x_where} ORDER BY x.steps_completed {{}} LIMIT 1)")
    lo = edge.format("ASC") if maxp > 1 else "CAST(NULL AS INTEGER)"
    src = f"FROM lv JOIN metrics m ON m.trial_id = lv.trial_id WHERE {where}"
    # An end row at the trial's level is already among its level's rows; a first row that
    # is also the last is the last.
    ends = f"FROM e JOIN metrics m ON m.trial_id = e.trial_id WHERE {where} AND m.lod < e.l AND m.steps_completed = e"
    # Each trial's end steps are found once (MATERIALIZED), not once per metrics row.
    return (
        f"WITH lv(trial_id, l) AS (VALUES {levels}), "
        f"e AS MATERIALIZED (SELECT lv.trial_id, lv.l, {edge.format('DESC')} AS hi, {lo} AS lo FROM lv) "
        f"SELECT {cols} {src} AND lv.l < {t.CHART_INDEX_LOD} AND m.lod >= lv.l "
        f"UNION ALL SELECT {cols} {src} AND lv.l >= {t.CHART_INDEX_LOD} "
        f"AND m.lod >= {t.CHART_INDEX_LOD} AND m.lod >= lv.l "
        f"UNION ALL SELECT {cols} {ends}.hi UNION ALL SELECT {cols} {ends}.lo AND e.lo <> e.hi"
    )


def point_sql(dialect: str, names: list[str], params: dict[str, Any]) -> str | None:
    """SQL building one point's JSON text; None where SQLite cannot address a name (a name
    with a quote or backslash has no JSON path there): those points are built in Python."""
    if dialect == "postgresql":
        values = " || ".join(f"COALESCE(CAST(:k{i} AS text) || CAST(CAST(m.body AS json) -> CAST(:n{i} AS text) "
                             "AS text), '')" for i in range(len(names)))
        params.update({f"n{i}": name for i, name in enumerate(names)})
        return (
            "'{\"batches\":' || m.steps_completed || ',\"time\":\"' || m.time_text || "
            f"'\",\"values\":{{' || {_members(values, names, params)} || '}}}}'"
        )
    if any('"' in name or "\\" in name for name in names):
        return None
    # Concatenation, not json_object (SQLite) or json_build_object (PostgreSQL): a third of
    # the cost per point. `->` gives each value as JSON text; a metric the report lacks is
    # NULL and drops out with its key.
    values = " || ".join(f"COALESCE(:k{i} || (m.body -> :p{i}), '')" for i in range(len(names)))
    params.update({f"p{i}": f'$."{name}"' for i, name in enumerate(names)})
    return (
        "'{\"batches\":' || m.steps_completed || ',\"time\":\"' || m.time_text || "
        f"'\",\"values\":{{' || {_members(values, names, params)} || '}}}}'"
    )


def _members(values: str, names: list[str], params: dict[str, Any]) -> str:
    """The SQL of a point's ``values`` members: ``values`` concatenates one ``:k{i}`` key and
    value per name, each NULL-dropped; the keys go in ``params``. Each key starts with a comma
    and the whole loses its first character; one name (the usual chart) needs no comma."""
    if len(names) == 1:
        params["k0"] = json.dumps(names[0]) + ":"
        return values
    params.update({f"k{i}": "," + json.dumps(name) + ":" for i, name in enumerate(names)})
    return f"substr({values}, 2)"


TRIAL = operator.itemgetter(0)  # a chart row's trial id
TEXT = operator.itemgetter(2)  # a chart row's point text


def window(alias: str, params: dict[str, Any], *, visible_only: bool = True) -> str:
    """SQL for the rows of table ``alias`` a chart reads: the group, visible ones (archived too
    when ``visible_only`` is false), inside the step window ``params`` holds, if any."""
    clauses = [f"{alias}.mgroup = :group"]
    if visible_only:
        clauses.append(f"{alias}.archived = :no")
    if "start" in params:
        clauses.append(f"{alias}.steps_completed >= :start")
    if "end" in params:
        clauses.append(f"{alias}.steps_completed < :end")
    return " AND ".join(clauses)


def level(count: int, max_points: int) -> int:
    """The lowest chart level whose rows, with the two end rows, fit in ``max_points``
    (level 0: every row; beyond MAX_LOD: none, the ends only)."""
    if count <= max_points:
        return 0
    budget = max_points - 2
    if budget < 1:
        return t.MAX_LOD + 1
    level = 0
    while count >> level > budget:
        level += 1
    return level


def thin(points: list[str], max_points: int) -> list[str]:
    """At most ``max_points``, evenly spaced, the last kept (and the first, given two). The
    levels already fit unless a rewind left a window's ordinals uneven."""
    if len(points) <= max_points:
        return points
    if max_points == 1:
        return points[-1:]
    step = (len(points) - 1) / (max_points - 1)
    return [points[round(i * step)] for i in range(max_points)]


def point_json(step: int, stamp: str, body: dict, names: list[str]) -> str:
    """One chart point built in Python, in the format ``point_sql`` produces."""
    values = {name: body[name] for name in names if body.get(name) is not None}
    return json.dumps({"batches": step, "time": stamp, "values": values}, separators=(",", ":"))
