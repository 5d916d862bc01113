"""Migrations: idempotent, complete, and all-or-nothing per step (transactional DDL)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.store import _migrate, migrate
from det_jupyter.store import tables as t


def _version(engine: sa.Engine) -> int:
    with engine.begin() as conn:
        return _migrate.current_version(conn)


def test_empty_database_is_version_zero(raw_engine: sa.Engine) -> None:
    assert _version(raw_engine) == 0


def test_migrate_applies_every_step_and_twice_is_a_no_op(raw_engine: sa.Engine) -> None:
    latest = max(number for number, _ in _migrate.MIGRATIONS)
    assert migrate(raw_engine) == latest
    with raw_engine.begin() as conn:
        conn.execute(sa.insert(t.cluster).values(id=1, cluster_id="c-1", created_at=1.0))
        applied_before = conn.execute(sa.select(t.schema_version)).all()

    assert migrate(raw_engine) == latest
    assert _version(raw_engine) == latest
    with raw_engine.connect() as conn:
        # No step re-ran (no duplicate version rows) and no data was touched.
        assert conn.execute(sa.select(t.schema_version)).all() == applied_before
        assert conn.execute(sa.select(t.cluster.c.cluster_id)).scalars().all() == ["c-1"]


def test_every_table_exists(engine: sa.Engine) -> None:
    existing = set(sa.inspect(engine).get_table_names())
    assert set(t.metadata.tables) <= existing


def test_every_index_exists(engine: sa.Engine) -> None:
    inspector = sa.inspect(engine)
    for table in t.metadata.sorted_tables:
        declared = {ix.name for ix in table.indexes}
        found = {ix["name"] for ix in inspector.get_indexes(table.name)}
        assert declared <= found, table.name


def test_failing_step_leaves_database_unchanged(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _version(engine)
    tables_before = set(sa.inspect(engine).get_table_names())

    def broken_step(conn: sa.Connection) -> None:
        conn.execute(sa.text("CREATE TABLE half_done (id INTEGER PRIMARY KEY)"))
        conn.execute(sa.text("INSERT INTO half_done (id) VALUES (1)"))
        raise RuntimeError("simulated crash in the middle of a migration")

    monkeypatch.setattr(_migrate, "MIGRATIONS", [*_migrate.MIGRATIONS, (before + 1, broken_step)])
    with pytest.raises(RuntimeError, match="simulated crash"):
        migrate(engine)

    assert _version(engine) == before
    assert set(sa.inspect(engine).get_table_names()) == tables_before


def test_step_after_failure_applies_on_retry(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A master killed mid-migration applies the same step again on its next start."""
    before = _version(engine)
    attempts = []

    def flaky_step(conn: sa.Connection) -> None:
        conn.execute(sa.text("CREATE TABLE added_later (id INTEGER PRIMARY KEY)"))
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first attempt dies")

    monkeypatch.setattr(_migrate, "MIGRATIONS", [*_migrate.MIGRATIONS, (before + 1, flaky_step)])
    with pytest.raises(RuntimeError):
        migrate(engine)
    assert migrate(engine) == before + 1
    assert "added_later" in sa.inspect(engine).get_table_names()
    assert migrate(engine) == before + 1
    assert len(attempts) == 2


def test_step_3_gives_existing_experiments_their_jobs(engine: sa.Engine) -> None:
    """A database from before jobs existed (version 2) gets one job per experiment, with the
    priority, weight and pool of its config, and its allocations tagged with that job."""
    from ._rows import make_world

    with engine.begin() as conn:  # take the database back to version 2
        conn.execute(sa.text("DROP INDEX ix_allocations_state"))
        conn.execute(sa.text("DROP INDEX ix_trials_experiment_state"))
        conn.execute(sa.text("ALTER TABLE allocations DROP COLUMN job_id"))
        conn.execute(sa.text("ALTER TABLE allocations DROP COLUMN placement"))
        conn.execute(sa.text("DROP TABLE jobs"))
        conn.execute(sa.text("DROP TABLE commands"))
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 3))
    _, exp_id, trial_id = make_world(engine)
    with engine.begin() as conn:
        config = conn.execute(sa.select(t.experiments.c.config).where(t.experiments.c.id == exp_id)).scalar_one()
        config["resources"] = {"priority": 7, "weight": 2.5, "resource_pool": "gpu"}
        conn.execute(sa.update(t.experiments).where(t.experiments.c.id == exp_id).values(config=config))
        conn.execute(sa.text(
            "INSERT INTO allocations (allocation_id, task_id, trial_id, run_id, state, slots, priority, "
            "resource_pool, preempt_requested, acked_preemption, submitted_at) VALUES "
            "('a.1', 'a', :trial, 0, 'PENDING', 1, 42, '', false, false, 1.0)"), {"trial": trial_id})

    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    with engine.connect() as conn:
        job_id = conn.execute(sa.select(t.experiments.c.job_id).where(t.experiments.c.id == exp_id)).scalar_one()
        job = conn.execute(sa.select(t.jobs).where(t.jobs.c.job_id == job_id)).one()
        assert (job.job_type, job.priority, job.weight, job.resource_pool) == ("EXPERIMENT", 7, 2.5, "gpu")
        assert conn.execute(sa.select(t.allocations.c.job_id)).scalar_one() == job_id
    test_every_index_exists(engine)


def test_step_4_keeps_commands_and_makes_them_commands(engine: sa.Engine) -> None:
    """A database from before interactive tasks (version 3): its commands become COMMAND tasks
    with no proxy, and nothing else changes."""
    with engine.begin() as conn:
        for column in ("task_type", "proxy_token", "proxy_address"):
            conn.execute(sa.text(f"ALTER TABLE commands DROP COLUMN {column}"))
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 4))
        conn.execute(sa.insert(t.users).values(username="u4", password_hash="x", admin=False,
                                               active=True, created_at=1.0, modified_at=1.0))
        user_id = conn.execute(sa.select(t.users.c.id).where(t.users.c.username == "u4")).scalar_one()
        conn.execute(sa.text(
            "INSERT INTO commands (task_id, job_id, owner_id, description, config, start_time) "
            "VALUES ('cmd-1', 'job-1', :u, 'old', '{}', 1.0)"), {"u": user_id})
    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    with engine.connect() as conn:
        row = conn.execute(sa.select(t.commands).where(t.commands.c.task_id == "cmd-1")).one()
    assert (row.task_type, row.proxy_token, row.proxy_address, row.description) == (
        "COMMAND", None, None, "old")


def test_step_5_gives_the_users_of_an_older_database_what_they_could_do(engine: sa.Engine) -> None:
    """A database from before roles (version 4): admins become ClusterAdmin, everyone else
    Editor on Uncategorized, and a workspace's creator its WorkspaceAdmin; run once only."""
    with engine.begin() as conn:
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 5))
        conn.execute(sa.delete(t.role_assignments))
        ids = {}
        for name, admin in (("boss", True), ("worker", False)):
            conn.execute(sa.insert(t.users).values(username=name, password_hash="x", admin=admin,
                                                   active=True, created_at=1.0, modified_at=1.0))
            ids[name] = conn.execute(sa.select(t.users.c.id).where(t.users.c.username == name)).scalar_one()
        if conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.id == 1)).first() is None:
            conn.execute(sa.insert(t.workspaces).values(id=1, name="Uncategorized", immutable=True,
                                                        archived=False, user_id=ids["boss"]))
        conn.execute(sa.insert(t.workspaces).values(id=7, name="team", immutable=False, archived=False,
                                                    user_id=ids["worker"]))
    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    with engine.connect() as conn:
        got = {(r.role, r.user_id, r.workspace_id) for r in conn.execute(sa.select(t.role_assignments))}
    assert ("ClusterAdmin", ids["boss"], None) in got
    assert ("Editor", ids["worker"], 1) in got
    assert ("WorkspaceAdmin", ids["worker"], 7) in got


def test_step_6_spells_out_the_report_times_of_stored_metrics(engine: sa.Engine) -> None:
    """A database from before metrics.time_text (version 5): every row gets its report time as
    the API spells it, the same text ingestion now writes, and the SQLite chart index covers it."""
    from det_jupyter.services.common.clock import Clock
    from det_jupyter.services.metrics.service import MetricService, Report, time_text

    from ._rows import make_world

    _, _, trial_id = make_world(engine)
    when = 1_764_000_000.25
    MetricService(engine, Clock()).ingest(trial_id, None, [
        Report("training", s, {"loss": 1.0 / s}, when + s) for s in range(1, 17)])
    with engine.begin() as conn:
        conn.execute(sa.text("DROP INDEX ix_metrics_chart"))
        conn.execute(sa.text("ALTER TABLE metrics DROP COLUMN time_text"))
        if conn.dialect.name == "sqlite":
            conn.execute(sa.text("CREATE INDEX ix_metrics_chart ON metrics (trial_id, mgroup, archived, lod, "
                                 "steps_completed, report_time, body) WHERE lod >= 3"))
        else:
            t.CHART_INDEXES["postgresql"].create(conn)
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 6))
    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.metrics.c.steps_completed, t.metrics.c.time_text)
                            .where(t.metrics.c.trial_id == trial_id).order_by(t.metrics.c.steps_completed)).all()
    assert [text for _, text in rows] == [time_text(when + s) for s in range(1, 17)]
    assert rows[0][1] == "2025-11-24T16:00:01.250Z"
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            sql = conn.execute(sa.text("SELECT sql FROM sqlite_master WHERE name = 'ix_metrics_chart'")).scalar()
        assert "time_text" in sql and "report_time" not in sql
    test_every_index_exists(engine)


def test_v7_adds_the_stored_series_and_earlier_trials_chart_from_their_rows(engine: sa.Engine) -> None:
    import json

    from det_jupyter.services.common.clock import Clock
    from det_jupyter.services.metrics.service import MetricService, Report

    from ._rows import make_world

    _, _, trial_id = make_world(engine)
    metrics = MetricService(engine, Clock())
    metrics.ingest(trial_id, None, [Report("training", s, {"loss": 1.0 / s}, 1.0 + s) for s in range(1, 6)])
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE metric_series"))
        conn.execute(sa.text("DROP TABLE metric_series_steps"))
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 7))
    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    test_every_table_exists(engine)
    metrics.ingest(trial_id, None, [Report("training", 6, {"loss": 0.1}, 7.0)])
    points = json.loads(metrics.series([trial_id], "training", ["loss"])[trial_id])
    assert [p["batches"] for p in points] == [1, 2, 3, 4, 5, 6]


def test_v8_fills_the_sampled_lines_of_stored_series_from_their_blocks(engine: sa.Engine) -> None:
    """A database from before the sampled lines (version 7): each block's sampled part is filled
    from its own lines, the same text ingestion now writes, and downsampled charts of the
    trials stored then come from it, as the rows give them."""
    from det_jupyter.services.common.clock import Clock
    from det_jupyter.services.metrics.service import MetricService, Report
    from det_jupyter.store.metrics import read_series

    from ._rows import make_world

    _, _, trial_id = make_world(engine)
    metrics = MetricService(engine, Clock())
    for lo in range(1, 300, 37):
        metrics.ingest(trial_id, None, [Report("training", s, {"loss": 1.0 / s, "acc": s / 3}, 1.0 + s)
                                        for s in range(lo, min(lo + 37, 300))])
    tables = (t.metric_series_steps, t.metric_series)
    with engine.connect() as conn:
        written = [conn.execute(sa.select(tb).order_by(*tb.primary_key.columns)).all() for tb in tables]
    chart = metrics.series([trial_id], "training", ["acc"], max_points=30)[trial_id]
    with engine.begin() as conn:
        for tb in tables:
            conn.execute(sa.text(f"ALTER TABLE {tb.name} DROP COLUMN sampled"))
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 8))
    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    with engine.connect() as conn:
        filled = [conn.execute(sa.select(tb).order_by(*tb.primary_key.columns)).all() for tb in tables]
        assert read_series(conn, [trial_id], "training", "acc", 30) == {trial_id: chart}
    assert [sorted(map(tuple, rows)) for rows in filled] == [sorted(map(tuple, rows)) for rows in written]
    assert sum(r.sampled.count("\n") for r in filled[0]) == 299 // 8


def _delete_experiment(engine: sa.Engine, exp_id: int) -> None:
    with engine.begin() as conn:
        for table in (t.trials, t.experiment_contexts, t.searcher_events):
            conn.execute(sa.delete(table).where(table.c.experiment_id == exp_id))
        conn.execute(sa.delete(t.experiments).where(t.experiments.c.id == exp_id))


def test_ids_users_hold_are_never_given_again_after_a_delete(engine: sa.Engine) -> None:
    """Issue 27: after deleting experiment N (the newest), the next experiment is N+1, not N
    again; so for trials, users, workspaces... on both backends."""
    from ._rows import make_experiment, make_trial, make_world

    user_id, exp_id, trial_id = make_world(engine)
    with engine.connect() as conn:
        project_id = conn.execute(sa.select(t.experiments.c.project_id)).scalar_one()
    _delete_experiment(engine, exp_id)
    again = make_experiment(engine, user_id, project_id)
    assert again > exp_id
    assert make_trial(engine, again) > trial_id


def test_step_10_rebuilds_older_sqlite_tables_so_ids_are_not_reused(
        raw_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SQLite database made before step 10 (plain rowid keys): step 10 rebuilds the tables
    users hold ids of with AUTOINCREMENT, keeping every row, reference and index."""
    from ._rows import make_experiment, make_world

    if raw_engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL's sequences never reuse ids: step 10 does nothing there")
    for table in t.NEVER_REUSED:  # the schema as versions 1-9 created it
        monkeypatch.setitem(table.dialect_options["sqlite"]._non_defaults, "autoincrement", False)
    monkeypatch.setattr(_migrate, "MIGRATIONS", [m for m in _migrate.MIGRATIONS if m[0] < 10])
    assert migrate(raw_engine) == 9
    monkeypatch.undo()
    user_id, exp_id, trial_id = make_world(raw_engine)
    with raw_engine.connect() as conn:
        project_id = conn.execute(sa.select(t.experiments.c.project_id)).scalar_one()
        assert "AUTOINCREMENT" not in conn.execute(sa.text(
            "SELECT sql FROM sqlite_master WHERE name = 'experiments'")).scalar_one()
    newest = make_experiment(raw_engine, user_id, project_id)
    with raw_engine.connect() as conn:
        before = {tb.name: conn.execute(sa.select(tb).order_by(*tb.primary_key.columns)).all()
                  for tb in t.metadata.sorted_tables if tb.name != "schema_version"}

    assert migrate(raw_engine) == max(number for number, _ in _migrate.MIGRATIONS)
    with raw_engine.connect() as conn:
        for table in t.NEVER_REUSED:
            assert "AUTOINCREMENT" in conn.execute(sa.text(
                "SELECT sql FROM sqlite_master WHERE name = :n"), {"n": table.name}).scalar_one()
        after = {tb.name: conn.execute(sa.select(tb).order_by(*tb.primary_key.columns)).all()
                 for tb in t.metadata.sorted_tables if tb.name != "schema_version"}
        assert after == before
        assert conn.execute(sa.text("PRAGMA foreign_key_check")).all() == []
        assert conn.execute(sa.text("PRAGMA foreign_keys")).scalar_one() == 1  # back on
    test_every_index_exists(raw_engine)
    _delete_experiment(raw_engine, newest)
    assert make_experiment(raw_engine, user_id, project_id) > newest
    # and the references still hold: a trial of a missing experiment is refused
    with pytest.raises(sa.exc.IntegrityError), raw_engine.begin() as conn:
        conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(experiment_id=10_000))
