"""Schema migrations: numbered steps, each applied in one transaction (DDL included).

A master killed in the middle of a migration leaves the database as it was before that step,
because SQLite and PostgreSQL both run DDL inside transactions; the next start applies it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa

from . import _tables as t

Migration = Callable[[sa.Connection], None]


def _v1_initial(conn: sa.Connection) -> None:
    t.metadata.create_all(conn, tables=[tb for tb in t.metadata.sorted_tables if tb.name != "schema_version"])


def _v2_chart_levels(conn: sa.Connection) -> None:
    """metrics.lod, its partial index and trials.report_counts, filled from the stored rows.
    (Step 1 creates the current schema, so on a database it created this has nothing to do.)"""
    if "lod" in {c["name"] for c in sa.inspect(conn).get_columns("metrics")}:
        return
    json_type = t.trials.c.report_counts.type.compile(dialect=conn.dialect)
    conn.execute(sa.text("ALTER TABLE metrics ADD COLUMN lod SMALLINT NOT NULL DEFAULT 0"))
    conn.execute(sa.text(f"ALTER TABLE trials ADD COLUMN report_counts {json_type}"))
    levels = " ".join(f"WHEN r.n % {1 << k} = 0 THEN {k}" for k in range(t.MAX_LOD, 0, -1))
    conn.execute(sa.text(
        f"UPDATE metrics SET lod = CASE {levels} ELSE 0 END FROM (SELECT id, ROW_NUMBER() OVER "
        "(PARTITION BY trial_id, mgroup ORDER BY id) AS n FROM metrics) AS r WHERE metrics.id = r.id"
    ))
    counts: dict[int, dict[str, int]] = {}
    for trial_id, group, n in conn.execute(
        sa.text("SELECT trial_id, mgroup, COUNT(*) FROM metrics GROUP BY trial_id, mgroup")
    ):
        counts.setdefault(trial_id, {})[group] = n
    for trial_id, value in counts.items():
        conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(report_counts=value))
    if conn.dialect.name == "sqlite":  # the index as it was then (step 6 remakes it)
        conn.execute(sa.text("CREATE INDEX ix_metrics_chart ON metrics (trial_id, mgroup, archived, lod, "
                             "steps_completed, report_time, body) WHERE lod >= 3"))
    else:
        t.CHART_INDEXES["postgresql"].create(conn)


def _v3_jobs(conn: sa.Connection) -> None:
    """The jobs table (one per experiment, filled from their configs), commands, allocations'
    job and gang placement, and indexes for the scheduler's reads (allocations by state, an
    experiment's trials by state)."""
    if "jobs" in sa.inspect(conn).get_table_names():
        return
    json_type = t.allocations.c.placement.type.compile(dialect=conn.dialect)
    conn.execute(sa.text("ALTER TABLE allocations ADD COLUMN job_id VARCHAR(64)"))
    conn.execute(sa.text(f"ALTER TABLE allocations ADD COLUMN placement {json_type}"))
    next(ix for ix in t.allocations.indexes if ix.name == "ix_allocations_state").create(conn)
    next(ix for ix in t.trials.indexes if ix.name == "ix_trials_experiment_state").create(conn)
    t.jobs.create(conn)
    t.commands.create(conn)
    for exp in conn.execute(sa.select(
        t.experiments.c.id, t.experiments.c.job_id, t.experiments.c.owner_id,
        t.experiments.c.config, t.experiments.c.start_time,
    )):
        res = (exp.config or {}).get("resources") or {}
        conn.execute(sa.insert(t.jobs).values(
            job_id=exp.job_id, job_type="EXPERIMENT", owner_id=exp.owner_id,
            priority=int(res.get("priority") or 42), weight=float(res.get("weight") or 1.0),
            max_slots=res.get("max_slots"), resource_pool=res.get("resource_pool") or "",
            queue_position=exp.start_time, submitted_at=exp.start_time,
        ))
        conn.execute(sa.text(
            "UPDATE allocations SET job_id = :job WHERE trial_id IN "
            "(SELECT id FROM trials WHERE experiment_id = :exp)"
        ), {"job": exp.job_id, "exp": exp.id})


def _v4_interactive(conn: sa.Connection) -> None:
    """commands.task_type, proxy_token and proxy_address (notebooks and other proxied tasks)."""
    if "task_type" in {c["name"] for c in sa.inspect(conn).get_columns("commands")}:
        return
    conn.execute(sa.text("ALTER TABLE commands ADD COLUMN task_type VARCHAR(32) NOT NULL "
                         "DEFAULT 'COMMAND'"))
    conn.execute(sa.text("ALTER TABLE commands ADD COLUMN proxy_token VARCHAR(128)"))
    conn.execute(sa.text("ALTER TABLE commands ADD COLUMN proxy_address VARCHAR(255)"))


def _v5_governance(conn: sa.Connection) -> None:
    """Groups, role assignments, models and versions, templates; access tokens beside
    sessions; the workspace of interactive tasks."""
    existing = set(sa.inspect(conn).get_table_names())
    for table in t.GOVERNANCE_TABLES:
        if table.name not in existing:
            table.create(conn)
    if "kind" not in {c["name"] for c in sa.inspect(conn).get_columns("user_sessions")}:
        conn.execute(sa.text("ALTER TABLE user_sessions ADD COLUMN kind VARCHAR(16) NOT NULL "
                             "DEFAULT 'session'"))
        conn.execute(sa.text("ALTER TABLE user_sessions ADD COLUMN description TEXT"))
    if "workspace_id" not in {c["name"] for c in sa.inspect(conn).get_columns("commands")}:
        conn.execute(sa.text("ALTER TABLE commands ADD COLUMN workspace_id INTEGER NOT NULL DEFAULT 1"))
    if "key" not in {c["name"] for c in sa.inspect(conn).get_columns("projects")}:
        json_type = t.projects.c.notes.type.compile(dialect=conn.dialect)
        conn.execute(sa.text("ALTER TABLE projects ADD COLUMN key VARCHAR(16)"))
        conn.execute(sa.text(f"ALTER TABLE projects ADD COLUMN notes {json_type}"))
        conn.execute(sa.text("ALTER TABLE projects ADD COLUMN created_at FLOAT"))
        for pid in conn.execute(sa.select(t.projects.c.id)).scalars().all():
            key = "UNCAT" if pid == 1 else f"P{pid}"
            conn.execute(sa.update(t.projects).where(t.projects.c.id == pid).values(key=key))
        next(ix for ix in t.projects.indexes if ix.name == "ix_projects_key").create(conn)
        if conn.dialect.name == "postgresql":  # Uncategorized's explicit id left them behind
            for table in ("workspaces", "projects"):
                conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                     f"COALESCE(MAX(id), 0) + 1, false) FROM {table}"))
    # A database from before roles: admins become ClusterAdmin, everyone else Editor on
    # Uncategorized, and each workspace's creator its WorkspaceAdmin (what they could do before).
    if conn.execute(sa.select(sa.func.count()).select_from(t.role_assignments)).scalar_one():
        return
    for uid, admin in conn.execute(sa.select(t.users.c.id, t.users.c.admin)).all():
        if admin:
            conn.execute(sa.insert(t.role_assignments).values(role="ClusterAdmin", user_id=uid))
        elif conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.id == 1)).first():
            conn.execute(sa.insert(t.role_assignments).values(role="Editor", user_id=uid, workspace_id=1))
    for ws, uid in conn.execute(sa.select(t.workspaces.c.id, t.workspaces.c.user_id)
                                .where(t.workspaces.c.id != 1)).all():
        conn.execute(sa.insert(t.role_assignments).values(role="WorkspaceAdmin", user_id=uid, workspace_id=ws))


def _v6_metric_time_text(conn: sa.Connection) -> None:
    """metrics.time_text (the report time as the API spells it), filled from report_time; the
    SQLite chart index covers it instead of report_time."""
    if "time_text" in {c["name"] for c in sa.inspect(conn).get_columns("metrics")}:
        return
    conn.execute(sa.text("ALTER TABLE metrics ADD COLUMN time_text TEXT NOT NULL DEFAULT ''"))
    if conn.dialect.name == "postgresql":
        text = ("to_char(to_timestamp(report_time) AT TIME ZONE 'UTC', "
                "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
    else:
        text = "strftime('%Y-%m-%dT%H:%M:%fZ', report_time, 'unixepoch')"
    conn.execute(sa.text(f"UPDATE metrics SET time_text = {text}"))
    if conn.dialect.name == "sqlite":
        conn.execute(sa.text("DROP INDEX IF EXISTS ix_metrics_chart"))
        t.CHART_INDEXES["sqlite"].create(conn)


def _v7_metric_series(conn: sa.Connection) -> None:
    """metric_series and metric_series_steps, empty: the trials already stored keep their
    charts built from the rows (their stored series never look complete), new reports fill
    them."""
    t.metric_series_steps.create(conn, checkfirst=True)
    t.metric_series.create(conn, checkfirst=True)


def _v8_metric_series_sampled(conn: sa.Connection) -> None:
    """metric_series(_steps).sampled, filled from each block's own lines: those of ordinals that
    are multiples of 8, the 8th, 16th, … line of a block, which starts at a multiple of 64 plus
    one. (A block that started elsewhere, before migration 7, is of a series the reads refuse
    anyway: its blocks hold fewer reports than the trial has.)"""
    sample = 1 << t.CHART_INDEX_LOD
    for table, text in ((t.metric_series_steps, "heads"), (t.metric_series, "members")):
        if "sampled" in {c["name"] for c in sa.inspect(conn).get_columns(table.name)}:
            continue
        conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN sampled TEXT NOT NULL DEFAULT ''"))
        key = list(table.primary_key.columns)
        update = (sa.update(table).where(*(c == sa.bindparam("k_" + c.name) for c in key))
                  .values(sampled=sa.bindparam("s")))
        trial_ids = conn.execute(sa.select(table.c.trial_id).distinct()).scalars().all()
        for k in range(0, len(trial_ids), 100):  # a hundred trials' blocks in memory at a time
            rows = conn.execute(sa.select(*key, table.c[text]).where(
                table.c.trial_id.in_(trial_ids[k:k + 100]), table.c.n >= sample)).all()
            values = [{**{"k_" + c.name: v for c, v in zip(key, row[:-1], strict=True)},
                       "s": "".join(line + "\n" for line in row[-1].split("\n")[sample - 1:-1:sample])}
                      for row in rows]
            if values:
                conn.execute(update, values)


def _v9_agent_users(conn: sa.Connection) -> None:
    """agent_user_groups (users linked to a host account) and user_sessions.allocation_id (the
    allocation a task's user token belongs to)."""
    t.agent_user_groups.create(conn, checkfirst=True)
    if "allocation_id" in {c["name"] for c in sa.inspect(conn).get_columns("user_sessions")}:
        return
    conn.execute(sa.text("ALTER TABLE user_sessions ADD COLUMN allocation_id VARCHAR(160)"))
    next(ix for ix in t.user_sessions.indexes if ix.name == "ix_user_sessions_allocation").create(conn)


def _v10_ids_never_reused(conn: sa.Connection) -> None:
    """SQLite: rebuild the tables whose ids users hold (``_tables.NEVER_REUSED``) with
    ``AUTOINCREMENT``, so a deleted row's id is never given again (PostgreSQL's sequences never
    reuse one: nothing to do there). Each table is copied into a new one of the current schema,
    which then takes the old one's name and indexes (SQLite's way to change a table's key; run
    with foreign keys off, ``FOREIGN_KEYS_OFF``, and checked before the step commits)."""
    if conn.dialect.name != "sqlite":
        return
    for table in t.NEVER_REUSED:
        sql = conn.execute(sa.text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :n"),
                           {"n": table.name}).scalar_one()
        if "AUTOINCREMENT" in sql.upper():
            continue
        create = str(sa.schema.CreateTable(table).compile(dialect=conn.dialect)).strip()
        prefix = f"CREATE TABLE {table.name} ("
        assert create.startswith(prefix), create[:80]
        conn.execute(sa.text(f"CREATE TABLE _rebuilt_{table.name} (" + create[len(prefix):]))
        have = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
        cols = ", ".join(c.name for c in table.columns if c.name in have)
        conn.execute(sa.text(f"INSERT INTO _rebuilt_{table.name} ({cols}) SELECT {cols} FROM {table.name}"))
        conn.execute(sa.text(f"DROP TABLE {table.name}"))
        conn.execute(sa.text(f"ALTER TABLE _rebuilt_{table.name} RENAME TO {table.name}"))
        for index in table.indexes:
            index.create(conn)
    bad = conn.execute(sa.text("PRAGMA foreign_key_check")).all()
    if bad:
        raise RuntimeError(f"migration 10 would break {len(bad)} references (first: {tuple(bad[0])})")


def _v11_webhooks(conn: sa.Connection) -> None:
    """webhooks, webhook_triggers and webhook_fired (Determined's webhooks)."""
    for table in t.WEBHOOK_TABLES:
        table.create(conn, checkfirst=True)


def _v12_unmanaged(conn: sa.Connection) -> None:
    """experiments.unmanaged and external_experiment_id, trials.external_trial_id and
    last_activity (0.38.1's unmanaged experiments, core_v2), with their unique indexes.
    (On SQLite, step 10 rebuilt these tables with the current schema: nothing to do then.)"""
    if "unmanaged" not in {c["name"] for c in sa.inspect(conn).get_columns("experiments")}:
        false = sa.false().compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE experiments ADD COLUMN unmanaged BOOLEAN NOT NULL DEFAULT {false}"))
        conn.execute(sa.text("ALTER TABLE experiments ADD COLUMN external_experiment_id VARCHAR(255)"))
        next(ix for ix in t.experiments.indexes if ix.name == "ix_experiments_external_id").create(conn)
    if "external_trial_id" not in {c["name"] for c in sa.inspect(conn).get_columns("trials")}:
        conn.execute(sa.text("ALTER TABLE trials ADD COLUMN external_trial_id VARCHAR(255)"))
        conn.execute(sa.text("ALTER TABLE trials ADD COLUMN last_activity FLOAT"))
        next(ix for ix in t.trials.indexes if ix.name == "ix_trials_external_id").create(conn)


#: Steps that must run with SQLite's foreign keys off (a table rebuilt: dropping the old one
#: must not touch the rows that refer to it); they check the references themselves.
FOREIGN_KEYS_OFF = {10}

def _v13_cluster_messages(conn: sa.Connection) -> None:
    """cluster_messages (``det master cluster-message``)."""
    t.cluster_messages.create(conn, checkfirst=True)


def _v14_trial_source_infos(conn: sa.Connection) -> None:
    """trial_source_infos (``Checkpoint.get_metrics``, ``ModelVersion.get_metrics``)."""
    t.trial_source_infos.create(conn, checkfirst=True)


def _v15_pools_and_policies(conn: sa.Connection) -> None:
    """pool_bindings and config_policies (``det resource-pool bindings``, ``det config-policies``)."""
    t.pool_bindings.create(conn, checkfirst=True)
    t.config_policies.create(conn, checkfirst=True)


def _v16_log_retention(conn: sa.Connection) -> None:
    """trials.log_retention_days (``det e set log-retention``, ``det task cleanup-logs``)."""
    if "log_retention_days" not in {c["name"] for c in sa.inspect(conn).get_columns("trials")}:
        conn.execute(sa.text("ALTER TABLE trials ADD COLUMN log_retention_days INTEGER"))


def _v17_allocation_requires(conn: sa.Connection) -> None:
    """allocations.requires (an image task is placed only on agents that run containers)."""
    if "requires" not in {c["name"] for c in sa.inspect(conn).get_columns("allocations")}:
        conn.execute(sa.text("ALTER TABLE allocations ADD COLUMN requires VARCHAR(255)"))


def _v18_hub_users(conn: sa.Connection) -> None:
    """users.admin_from_hub and user_groups.from_hub (JupyterHub's admins and groups in det)."""
    for table, column in (("users", "admin_from_hub"), ("user_groups", "from_hub")):
        if column not in {c["name"] for c in sa.inspect(conn).get_columns(table)}:
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} BOOLEAN"))


MIGRATIONS: list[tuple[int, Migration]] = [
    (1, _v1_initial),
    (2, _v2_chart_levels),
    (3, _v3_jobs),
    (4, _v4_interactive),
    (5, _v5_governance),
    (6, _v6_metric_time_text),
    (7, _v7_metric_series),
    (8, _v8_metric_series_sampled),
    (9, _v9_agent_users),
    (10, _v10_ids_never_reused),
    (11, _v11_webhooks),
    (12, _v12_unmanaged),
    (13, _v13_cluster_messages),
    (14, _v14_trial_source_infos),
    (15, _v15_pools_and_policies),
    (16, _v16_log_retention),
    (17, _v17_allocation_requires),
    (18, _v18_hub_users),
]


def current_version(conn: sa.Connection) -> int:
    """The highest applied migration, 0 for an empty database."""
    t.schema_version.create(conn, checkfirst=True)
    return conn.execute(sa.select(sa.func.coalesce(sa.func.max(t.schema_version.c.version), 0))).scalar_one()


def migrate(engine: sa.Engine) -> int:
    """Apply every migration not yet applied; returns the resulting version."""
    with engine.begin() as conn:
        t.schema_version.create(conn, checkfirst=True)
    version = 0
    for number, step in MIGRATIONS:
        with engine.connect() as conn:
            keys_off = number in FOREIGN_KEYS_OFF and engine.dialect.name == "sqlite"
            if keys_off:  # outside a transaction: SQLite ignores the pragma inside one
                conn.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
            try:
                with conn.begin():
                    version = current_version(conn)
                    if number <= version:
                        continue
                    step(conn)
                    conn.execute(sa.insert(t.schema_version).values(version=number, applied_at=time.time()))
                    version = number
            finally:
                if keys_off:
                    conn.connection.driver_connection.execute("PRAGMA foreign_keys=ON")
    return version
