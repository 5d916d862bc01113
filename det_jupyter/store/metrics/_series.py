"""Stored series: each metric's chart points, encoded once at ingestion, so a chart of one
metric's whole history reads a few block rows instead of extracting the metric from every
report's JSON, which is most of that query's cost.

A point is ``{"batches":S,"time":"T","values":{"name":V}}``, the text ``point_sql`` builds. It is
stored in two parts, by blocks of a group's reports (ordinals in ``[block * BLOCK, (block + 1) *
BLOCK)``, from 1), each part newline-separated in arrival order:

- ``metric_series_steps.heads``: once per report, whatever it holds,
  ``,{"batches":S,"time":"T","values":{`` — the part every metric's point shares;
- ``metric_series.members``: per metric, ``"name":V}}`` — a member of the stored body, closed.

A history is then both parts interleaved and joined, without a step per point in Python. It
answers a chart only where it is provably what the rows give (``read``):

- every report of the group, archived ones included, held the metric as a finite number: the
  trial's summary counts as many as ``report_counts`` (a rewind that archived rows, a report
  without the metric or with a NaN, make them differ for good), so its members line up with the
  heads;
- the blocks hold that many of both, block by block (a database from before the tables, or a
  group whose blocks were dropped, holds fewer);
- its points are in step order: a report whose step is not past its group's last one drops the
  group's blocks (``append``), which the check above then refuses.

Anything else is answered from the rows, as before.

Each block also keeps, in ``sampled``, the lines of its reports whose ordinal is a multiple of
``SAMPLE`` (8): chart level 3 and up. A downsampled chart of long trials (``maxDatapoints``
below a trial's reports, at a level of 3 or more) reads those, and the first and last points
from the first and the last block, instead of extracting the metric from every eighth report's
JSON (most of that query's cost), under the same checks.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from .. import _tables as t
from .._engine import placeholder
from . import _charts as charts
from . import _columns as columns
from ._records import Report

# Reports per block: a history of 1,000 reports is 16 rows of each part; an append rewrites at
# most about 2 kB of a metric's part and 4 kB of the shared one.
BLOCK = 64
# Every SAMPLE-th report's lines are also in the block's ``sampled`` part: the reports of chart
# level CHART_INDEX_LOD and up, those ix_metrics_chart holds. A block holds a whole number of them.
SAMPLE = 1 << t.CHART_INDEX_LOD
assert BLOCK % SAMPLE == 0

_UPSERT_HEADS = (
    "INSERT INTO metric_series_steps (trial_id, mgroup, block, n, heads, sampled) "
    "VALUES ({0}, {0}, {0}, {0}, {0}, {0}) "
    "ON CONFLICT (trial_id, mgroup, block) DO UPDATE SET n = metric_series_steps.n + excluded.n, "
    "heads = metric_series_steps.heads || excluded.heads, "
    "sampled = metric_series_steps.sampled || excluded.sampled"
)
_UPSERT_MEMBERS = (
    "INSERT INTO metric_series (trial_id, mgroup, name, block, n, members, sampled) "
    "VALUES ({0}, {0}, {0}, {0}, {0}, {0}, {0}) "
    "ON CONFLICT (trial_id, mgroup, name, block) DO UPDATE SET n = metric_series.n + excluded.n, "
    "members = metric_series.members || excluded.members, sampled = metric_series.sampled || excluded.sampled"
)
# Run as the driver's own SQL: SQLAlchemy's statement work (an expanding IN is rewritten per
# call) cost more than these queries on SQLite. Each id is a parameter of its own: an array
# parameter on PostgreSQL cost a one-trial chart's two reads about a fifth more (dumped and
# searched as an array), and inlined ids made each trial's statement new text, parsed and
# planned at every call. Heads and members are two reads, not a join, which cost PostgreSQL an
# index probe per block.
_MOST_MARKS = 500
_COUNTS = "SELECT id, summary, report_counts FROM trials WHERE id IN ({ids})"
_HEADS = ("SELECT trial_id, block, n, heads FROM metric_series_steps WHERE trial_id IN ({ids}) AND mgroup = {mark} "
          "ORDER BY trial_id, block")
_MEMBERS = ("SELECT trial_id, block, n, members FROM metric_series "
            "WHERE trial_id IN ({ids}) AND mgroup = {mark} AND name = {mark}")
# A downsampled chart's reads: each block's sampled lines, and where a chart's ends lie the
# block's own lines: the first block's first line (the trial's first point) and the whole of a
# block not yet full (in a complete series only the last one is: it holds the last point, where
# that is not sampled). ``{first}``: the dialect's first line of the part (_FIRST_LINE).
_HEADS_SAMPLED = (f"SELECT trial_id, block, n, sampled, CASE WHEN n < {BLOCK} THEN heads WHEN block = 0 THEN {{first}} END "
                  "FROM metric_series_steps WHERE trial_id IN ({ids}) AND mgroup = {mark} ORDER BY trial_id, block")
_MEMBERS_SAMPLED = (f"SELECT trial_id, block, n, sampled, CASE WHEN n < {BLOCK} THEN members WHEN block = 0 THEN {{first}} END "
                    "FROM metric_series WHERE trial_id IN ({ids}) AND mgroup = {mark} AND name = {mark}")
_FIRST_LINE = {"sqlite": "substr({0}, 1, instr({0}, char(10)))", "postgresql": "substr({0}, 1, strpos({0}, chr(10)))"}


def append(conn: sa.Connection, trial_id: int, summary: dict | None, reports: list[Report],
           ordinals: list[int], stamps: list[str], bodies: list[str],
           names: tuple[str, ...] | None = None) -> None:
    """Add new reports to their blocks, in ``conn`` (ingestion's transaction). ``summary`` is
    the trial's summary before these reports: each metric's ``lastStep`` gives how far its
    group has gone. A group whose steps do not move forward loses its blocks. ``bodies``: the
    reports' stored JSON, whose members are the points' ``values``. ``names``: the metric names
    of the reports where the caller found them ``_columns.uniform`` (else each block is
    looked at on its own: a batch of training and validation reports has uniform blocks)."""
    last: dict[str, int] = {}
    disordered: set[str] = set()
    blocks: dict[tuple[str, int], list[int]] = {}  # (group, block): its new reports' indexes
    for i, (r, ordinal) in enumerate(zip(reports, ordinals, strict=True)):
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
        blocks.setdefault((group, (ordinal - 1) // BLOCK), []).append(i)
    if disordered:
        for table in (t.metric_series, t.metric_series_steps):
            conn.execute(sa.delete(table).where(table.c.trial_id == trial_id, table.c.mgroup.in_(disordered)))
    head_rows, member_rows = [], []
    for (group, block), indexes in blocks.items():
        if group in disordered:
            continue
        sampled = [k for k, i in enumerate(indexes) if not ordinals[i] % SAMPLE]  # positions in the block
        heads = [f',{{"batches":{reports[i].steps_completed},"time":"{stamps[i]}","values":{{\n' for i in indexes]
        head_rows.append((trial_id, group, block, len(heads), "".join(heads), "".join([heads[k] for k in sampled])))
        for name, n, text, sampled_text in _members([reports[i] for i in indexes], [bodies[i] for i in indexes],
                                                    sampled, names):
            member_rows.append((trial_id, group, name, block, n, text, sampled_text))
    mark = placeholder(conn)
    if head_rows:
        conn.exec_driver_sql(_UPSERT_HEADS.format(mark), head_rows)
    if member_rows:
        conn.exec_driver_sql(_UPSERT_MEMBERS.format(mark), member_rows)


def _members(reports: list[Report], bodies: list[str], sampled: list[int],
             names: tuple[str, ...] | None = None) -> list[tuple[str, int, str, str]]:
    """Each metric's members among one block's new ``reports`` (their stored ``bodies``;
    ``sampled``: the positions of those sampled; ``names``: as ``append``'s): ``(name, number,
    text, sampled text)``, for the finite ints and floats only.

    The body's members are `"name":value` as a point spells them (one encoder): taken from it,
    a value is not formatted twice. Where every report holds the same finite numbers, by
    columns (``_columns``); else value by value, and where a comma inside a name or a
    value splits a body into more pieces than names, each value is formatted here instead."""
    pieces = [body[1:-1].split(",") for body in bodies]
    by_columns = _members_by_columns(reports, pieces, sampled, names)
    return by_columns if by_columns is not None else _members_by_value(reports, pieces, sampled)


def _members_by_columns(reports: list[Report], pieces: list[list[str]], sampled: list[int],
                        names: tuple[str, ...] | None = None) -> list[tuple[str, int, str, str]] | None:
    """``_members`` where every report holds the same finite numbers (``names``, where known),
    each its body's piece; None elsewhere."""
    if names is None:
        found = columns.uniform(reports)
        if found is None:
            return None
        names = found[0]
    if any(len(p) != len(names) for p in pieces):
        return None
    out = []
    for name, column in zip(names, zip(*pieces, strict=True), strict=True):
        chosen = [column[k] for k in sampled]
        out.append((name, len(column), "}}\n".join(column) + "}}\n", "}}\n".join(chosen) + "}}\n" if chosen else ""))
    return out


def _members_by_value(reports: list[Report], pieces: list[list[str]], sampled: list[int]) -> list[tuple[str, int, str, str]]:
    """``_members`` value by value: any reports."""
    texts: dict[str, tuple[list[str], list[str]]] = {}  # name: (members, those sampled)
    picked = set(sampled)
    for k, (r, body_pieces) in enumerate(zip(reports, pieces, strict=True)):
        metrics = r.metrics
        if len(body_pieces) != len(metrics):
            body_pieces = [json.dumps(name) + ":" + repr(value) for name, value in metrics.items()]
        for (name, value), piece in zip(metrics.items(), body_pieces, strict=True):
            kind = type(value)
            # Finite floats and ints only (x - x is 0.0 for a finite float, NaN otherwise).
            if kind is int or (kind is float and value - value == 0.0):
                closed = texts.get(name)
                if closed is None:
                    closed = texts[name] = ([], [])
                closed[0].append(piece + "}}\n")
                if k in picked:
                    closed[1].append(piece + "}}\n")
    return [(name, len(all_), "".join(all_), "".join(chosen)) for name, (all_, chosen) in texts.items()]


def _expected(trials: Any, group: str, name: str, max_points: int) -> dict[int, tuple[int, int]]:
    """Which of ``trials`` (rows of ``id, summary, report_counts``) may be answered from their
    stored series of ``name``: {trial: (its reports, the chart level)}. Those where every report
    of the group held the metric, at most ``max_points`` of them (0: any number; level 0), or
    more at a level the sampled lines hold (CHART_INDEX_LOD to MAX_LOD)."""
    expected = {}
    for tid, summary, counts in trials:
        reports = _decoded(counts).get(group)
        if not reports:
            continue
        lod = 0  # every point
        if max_points and reports > max_points:
            lod = charts.level(reports, max_points)
            if not t.CHART_INDEX_LOD <= lod <= t.MAX_LOD:
                continue  # levels 1 and 2 are not in the sampled lines
        # (the summary, the larger one, is decoded only where it may pass)
        stats = (_decoded(summary).get(group) or {}).get(name)
        if stats and stats.get("count") == reports:
            expected[tid] = (reports, lod)
    return expected


def read(conn: sa.Connection, trial_ids: list[int], group: str, name: str, max_points: int,
         known: Any = None) -> dict[int, str]:
    """The JSON array text of ``name``'s points, oldest step first, of each of the trials whose
    stored series is complete: every point where the trial has at most ``max_points`` (0: any
    number), else its chart at the level ``_charts.level`` picks, where that is 3 or more
    (the sampled lines), as the rows would give them. ``known``: the trials' rows of ``id,
    summary, report_counts`` where the caller has just read them (else they are read here).

    The reads go straight to the driver (SQLAlchemy's execution work per statement cost as
    much as they do), each on a snapshot of its own, in order: rows committed after the counts
    make the blocks hold more than counted, and the trial is answered from the rows."""
    cursor = conn.connection.driver_connection.cursor()
    histories: dict[int, str] = {}
    try:
        if known is None:
            cursor.execute(*_statement(conn, _COUNTS, trial_ids))
            known = cursor.fetchall()
        expected = _expected(known, group, name, max_points)
        whole = {tid: n for tid, (n, lod) in expected.items() if not lod}
        downsampled = {tid: n_lod for tid, n_lod in expected.items() if n_lod[1]}
        for wanted, reads, join in ((whole, _reads, _joined), (downsampled, _sampled_reads, _downsampled)):
            if wanted:
                parts = []
                for sql, params in reads(conn, list(wanted), group, name):
                    cursor.execute(sql, params)
                    parts.append(cursor.fetchall())
                histories.update(join(*parts, wanted))
    finally:
        cursor.close()
    return histories


def read_with_rows(conn: sa.Connection, rows_sql: str, params: dict[str, Any], trial_ids: list[int],
                   group: str, name: str) -> tuple[list[Any], dict[int, str]]:
    """PostgreSQL: the rows of ``rows_sql`` (the driver's SQL with ``%(name)s`` parameters,
    ``params``; rows of ``trial_ids`` with ``id``, ``summary`` and ``report_counts`` among their
    fields) and ``read``'s whole histories of ``name`` for those trials, in one round trip: the
    statements go to the server pipelined, the rows' first, so the blocks are as recent as the
    counts they are checked against, or more (as in ``read``). The blocks of a trial whose
    series is incomplete are read for nothing: for charts of few trials (one trial's page)."""
    from psycopg.rows import namedtuple_row

    driver = conn.connection.driver_connection
    heads_sql, members_sql = _reads(conn, trial_ids, group, name)
    with driver.cursor(row_factory=namedtuple_row) as rows_cursor, driver.cursor() as heads_cursor, \
            driver.cursor() as members_cursor:
        with driver.pipeline():
            rows_cursor.execute(rows_sql, params)
            heads_cursor.execute(*heads_sql)
            members_cursor.execute(*members_sql)
        rows = rows_cursor.fetchall()
        heads, members = heads_cursor.fetchall(), members_cursor.fetchall()
    expected = _expected([(r.id, r.summary, r.report_counts) for r in rows], group, name, 0)
    return rows, _joined(heads, members, {tid: n for tid, (n, _) in expected.items()})


def _statement(conn: sa.Connection, sql: str, trial_ids: list[int], *more: Any) -> tuple[str, tuple]:
    """``sql`` for the driver, its ``{ids}`` one placeholder per trial and its ``{mark}`` the
    driver's placeholder, and its parameters: the ids, then ``more``. Past ``_MOST_MARKS``
    trials on SQLite the ids are inlined (integers): an SQLite before 3.32 takes 999 parameters."""
    mark = placeholder(conn)
    ids = [int(tid) for tid in trial_ids]
    if mark == "?" and len(ids) > _MOST_MARKS:
        return sql.format(ids=",".join(map(str, ids)), mark=mark), more
    return sql.format(ids=", ".join([mark] * len(ids)), mark=mark), (*ids, *more)


def _reads(conn: sa.Connection, trial_ids: list[int], group: str, name: str) -> list[tuple[str, tuple]]:
    """The heads and the members statements of the trials' blocks, with their parameters."""
    return [_statement(conn, _HEADS, trial_ids, group), _statement(conn, _MEMBERS, trial_ids, group, name)]


def _sampled_reads(conn: sa.Connection, trial_ids: list[int], group: str, name: str) -> list[tuple[str, tuple]]:
    """The heads and the members statements of a downsampled chart's blocks, with their parameters."""
    first = _FIRST_LINE[conn.dialect.name]
    return [_statement(conn, _HEADS_SAMPLED.replace("{first}", first.format("heads")), trial_ids, group),
            _statement(conn, _MEMBERS_SAMPLED.replace("{first}", first.format("members")), trial_ids, group, name)]


def _blocks(heads: list[Any], members: list[Any], counts: dict[int, int]) -> dict[int, list[tuple[Any, Any]]]:
    """Each trial of ``counts`` whose blocks hold its count of reports, as (heads row, members
    row) pairs in block order (rows ``trial_id, block, n, …``; heads in block order), where
    every block has both parts with as many reports."""
    closing = {(row[0], row[1]): row for row in members if row[0] in counts}
    found: dict[int, list[tuple[Any, Any]]] = {}
    refused: set[int] = set()
    for head in heads:
        tid = head[0]
        if tid not in counts or tid in refused:
            continue
        member = closing.get((tid, head[1]))
        if member is None or member[2] != head[2]:  # a block without the metric, or one written between the reads
            refused.add(tid)
            continue
        found.setdefault(tid, []).append((head, member))
    return {tid: pairs for tid, pairs in found.items()
            if tid not in refused and sum(head[2] for head, _ in pairs) == counts[tid]}


def _downsampled(heads: list[Any], members: list[Any], expected: dict[int, tuple[int, int]]) -> dict[int, str]:
    """Each expected trial's chart (``expected``: {trial: (reports, level >= CHART_INDEX_LOD)})
    from its blocks' rows (``trial_id, block, n, sampled, ends``): its first point, every
    2**level-th and its last, as the rows give them — where ``_blocks`` finds them all and the
    sampled lines are one in SAMPLE of the reports (blocks from before migration 8 may hold fewer)."""
    charts_of: dict[int, str] = {}
    for tid, pairs in _blocks(heads, members, {tid: n for tid, (n, _) in expected.items()}).items():
        count, lod = expected[tid]
        sampled_heads = "".join(head[3] for head, _ in pairs).split("\n")  # one more piece (empty) than lines
        sampled_members = "".join(member[3] for _, member in pairs).split("\n")
        ends = {head[1]: (head[4], member[4]) for head, member in pairs if head[4] is not None}
        if not len(sampled_heads) == len(sampled_members) == count // SAMPLE + 1 or 0 not in ends:
            continue
        stride = 1 << (lod - t.CHART_INDEX_LOD)
        # The first point (ordinal 1, below every sampled level), the level's, and the last
        # where its ordinal is not of the level: sampled, or in the last block, not yet full.
        point_heads = [ends[0][0].split("\n", 1)[0], *sampled_heads[stride - 1:-1:stride]]
        point_members = [ends[0][1].split("\n", 1)[0], *sampled_members[stride - 1:-1:stride]]
        if count % (1 << lod):
            if not count % SAMPLE:
                point_heads.append(sampled_heads[-2])
                point_members.append(sampled_members[-2])
            else:
                last = ends.get((count - 1) // BLOCK)
                if last is None:
                    continue
                point_heads.append(last[0][:-1].rsplit("\n", 1)[-1])
                point_members.append(last[1][:-1].rsplit("\n", 1)[-1])
        both = [""] * (2 * len(point_heads))
        both[0::2] = point_heads
        both[1::2] = point_members
        text = "".join(both)
        charts_of[tid] = "[" + text[1:] + "]"  # every head starts with the comma before its point
    return charts_of


def _joined(heads: list[Any], members: list[Any], expected: dict[int, int]) -> dict[int, str]:
    """Each expected trial's history (the JSON array text) from its heads' and its members'
    block rows (``trial_id, block, n, text``), where ``_blocks`` finds them all."""
    histories = {}
    for tid, pairs in _blocks(heads, members, expected).items():
        count = expected[tid]
        # Each part ends with its newline, so the heads split into one more piece (empty), and
        # every head starts with the comma before its point: the first one's goes.
        both = [""] * (2 * count + 1)
        both[0::2] = "".join(head[3] for head, _ in pairs).split("\n")
        both[1::2] = "".join(member[3] for _, member in pairs).split("\n")[:-1]
        both[0] = "[" + both[0][1:]
        both[-1] = "]"
        histories[tid] = "".join(both)
    return histories


def _decoded(value: Any) -> dict:
    """A JSON column as the driver gives it: text on SQLite, decoded on PostgreSQL."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}
