"""The schema, as SQLAlchemy Core tables. Times are float seconds since the epoch (UTC).

Metrics are stored one row per report (a step's whole metric dict as JSON text): about 4.5x
more points per second than one row per value (see shared/reference/benchmarks.md), and the
query the UI needs most — one trial's history — reads one index range.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

JSON = sa.JSON()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", sa.Float, nullable=False),
)

cluster = sa.Table(
    "cluster",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("cluster_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# The cluster-wide message users see (``det master cluster-message``): the newest row counts;
# setting one ends the others.
cluster_messages = sa.Table(
    "cluster_messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("start_time", sa.Float, nullable=False),
    sa.Column("end_time", sa.Float),  # None: until cleared or replaced
    sa.Column("created_by", sa.Integer, nullable=False),
    sa.Column("created_time", sa.Float, nullable=False),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("username", sa.String(255), nullable=False, unique=True),
    sa.Column("display_name", sa.String(255)),
    sa.Column("password_hash", sa.String(255), nullable=False),
    sa.Column("admin", sa.Boolean, nullable=False, default=False),
    sa.Column("active", sa.Boolean, nullable=False, default=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("modified_at", sa.Float, nullable=False),
    # Migration 18: the admin flag came from JupyterHub (its next answer may take it back).
    sa.Column("admin_from_hub", sa.Boolean),
)

user_sessions = sa.Table(
    "user_sessions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("revoked", sa.Boolean, nullable=False, default=False),
    # Migration 5: a long-lived access token (det token create) rather than a login session.
    sa.Column("kind", sa.String(16), nullable=False, server_default="session"),
    sa.Column("description", sa.Text),
    # Migration 9: a task's token (kind 'task', DET_USER_TOKEN) names its allocation; it is
    # revoked when that allocation ends.
    sa.Column("allocation_id", sa.String(160)),
    sa.Index("ix_user_sessions_allocation", "allocation_id"),
)

# Migration 9: the host account a user's tasks run as (``det user link-with-agent-user``), as
# Determined's agent_user_groups. A user without a row runs as the agent's default account.
agent_user_groups = sa.Table(
    "agent_user_groups",
    metadata,
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
    sa.Column("uid", sa.Integer, nullable=False),
    sa.Column("gid", sa.Integer, nullable=False),
    sa.Column("user_name", sa.String(32)),
    sa.Column("group_name", sa.String(32)),
)

workspaces = sa.Table(
    "workspaces",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("immutable", sa.Boolean, nullable=False, default=False),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
)

projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("immutable", sa.Boolean, nullable=False, default=False),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.UniqueConstraint("workspace_id", "name"),
    # Migration 5: the project's short key (unique, upper case), its notes
    # ([{"name", "contents"}]) and when it was made.
    sa.Column("key", sa.String(16)),
    sa.Column("notes", JSON),
    sa.Column("created_at", sa.Float),
    sa.Index("ix_projects_key", "key", unique=True),
)

checkpoint_storages = sa.Table(
    "checkpoint_storages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("config_key", sa.String(64), nullable=False, unique=True),
    sa.Column("config", JSON, nullable=False),
)

experiments = sa.Table(
    "experiments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("name", sa.String(512), nullable=False),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("labels", JSON, nullable=False),
    sa.Column("notes", sa.Text, nullable=False, default=""),
    sa.Column("owner_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("job_id", sa.String(64), nullable=False, unique=True),
    sa.Column("config", JSON, nullable=False),
    sa.Column("original_config", sa.Text, nullable=False),
    sa.Column("searcher_type", sa.String(32), nullable=False),
    sa.Column("searcher_state", JSON),
    sa.Column("searcher_started", sa.Boolean, nullable=False, default=False),
    sa.Column("searcher_shutdown", sa.Boolean, nullable=False, default=False),
    sa.Column("parent_id", sa.Integer),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
    sa.Column("progress", sa.Float),
    sa.Column("error_message", sa.Text),
    sa.Column("start_time", sa.Float, nullable=False),
    sa.Column("end_time", sa.Float),
    # Migration 12: an unmanaged experiment (0.38.1's core_v2: a script or notebook reports
    # into it; the master schedules nothing), and the id its client names it by.
    sa.Column("unmanaged", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.Column("external_experiment_id", sa.String(255)),
    sa.Index("ix_experiments_external_id", "external_experiment_id", unique=True),
)

searcher_events = sa.Table(
    "searcher_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Index("ix_searcher_events_exp", "experiment_id", "id"),
)

experiment_contexts = sa.Table(
    "experiment_contexts",
    metadata,
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), primary_key=True),
    sa.Column("tgz", sa.LargeBinary, nullable=False),
)

trials = sa.Table(
    "trials",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), nullable=False),
    sa.Column("request_id", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(128), nullable=False, unique=True),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("hparams", JSON, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("restarts", sa.Integer, nullable=False, default=0),
    sa.Column("run_id", sa.Integer, nullable=False, default=0),
    sa.Column("total_batches", sa.Integer, nullable=False, default=0),
    sa.Column("latest_checkpoint", sa.String(64)),
    sa.Column("searcher_stopped", sa.Boolean, nullable=False, default=False),
    sa.Column("early_exit", sa.String(64)),
    sa.Column("progress", sa.Float),
    sa.Column("summary", JSON),
    # Reports stored per metrics group, archived ones included: the next report's ordinal.
    sa.Column("report_counts", JSON),
    sa.Column("best_validation", sa.Float),
    sa.Column("run_metadata", JSON),
    sa.Column("runner_state", sa.String(255)),
    sa.Column("start_time", sa.Float, nullable=False),
    sa.Column("end_time", sa.Float),
    sa.UniqueConstraint("experiment_id", "request_id"),
    # Migration 3: "is any trial of this experiment still open?" from the index alone.
    sa.Index("ix_trials_experiment_state", "experiment_id", "state"),
    # Migration 12: an unmanaged trial's id in its client, and its last heartbeat.
    sa.Column("external_trial_id", sa.String(255)),
    sa.Column("last_activity", sa.Float),
    sa.Index("ix_trials_external_id", "experiment_id", "external_trial_id", unique=True),
    # Migration 16: days its logs are kept after it ends (det e set log-retention); None: the
    # experiment config's retention_policy, else forever. -1: forever.
    sa.Column("log_retention_days", sa.Integer),
)

allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("allocation_id", sa.String(160), primary_key=True),
    sa.Column("task_id", sa.String(128), nullable=False, index=True),
    sa.Column("trial_id", sa.Integer, index=True),
    sa.Column("run_id", sa.Integer, nullable=False, default=0),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("slots", sa.Integer, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, default=42),
    sa.Column("resource_pool", sa.String(255), nullable=False, default=""),
    sa.Column("agent_id", sa.String(255)),
    sa.Column("slot_ids", JSON),
    sa.Column("token_hash", sa.String(64), unique=True),
    sa.Column("preempt_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("acked_preemption", sa.Boolean, nullable=False, default=False),
    sa.Column("exit_code", sa.Integer),
    sa.Column("exit_reason", sa.Text),
    sa.Column("submitted_at", sa.Float, nullable=False),
    sa.Column("start_time", sa.Float),
    sa.Column("end_time", sa.Float),
    # Migration 3: the job it belongs to, and every agent's share of a gang
    # ([[agent_id, [slot ids]], ...], chief first; agent_id/slot_ids repeat the chief's).
    sa.Column("job_id", sa.String(64)),
    sa.Column("placement", JSON),
    # Migration 17: the agent features it needs, comma-separated ("docker": a task with an
    # image of its own); NULL: none.
    sa.Column("requires", sa.String(255)),
    sa.Index("ix_allocations_state", "state"),
)

# A command (``det cmd run``): one process on the cluster, its context, how it ended.
commands = sa.Table(
    "commands",
    metadata,
    sa.Column("task_id", sa.String(64), primary_key=True),
    sa.Column("job_id", sa.String(64), nullable=False, unique=True),
    sa.Column("owner_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("config", JSON, nullable=False),
    sa.Column("context", sa.LargeBinary),
    sa.Column("exit_code", sa.Integer),
    sa.Column("exit_reason", sa.Text),
    sa.Column("start_time", sa.Float, nullable=False),
    sa.Column("end_time", sa.Float),
    # Migration 4: interactive tasks. Its kind (COMMAND, NOTEBOOK, ...), the token the master's
    # proxy sends upstream (never shown to users) and where the proxy reaches it (host:port).
    sa.Column("task_type", sa.String(32), nullable=False, server_default="COMMAND"),
    sa.Column("proxy_token", sa.String(128)),
    sa.Column("proxy_address", sa.String(255)),
    # Migration 5: the workspace a task belongs to (its viewers may see it).
    sa.Column("workspace_id", sa.Integer, nullable=False, server_default="1"),
)

# A job: what the queue orders and an admin edits (an experiment now; notebooks and commands
# later). ``queue_position`` orders jobs of equal priority (the submission time until a job is
# moved ahead of or behind another).
jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("job_id", sa.String(64), primary_key=True),
    sa.Column("job_type", sa.String(32), nullable=False),
    sa.Column("owner_id", sa.Integer, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("weight", sa.Float, nullable=False),
    sa.Column("max_slots", sa.Integer),
    sa.Column("resource_pool", sa.String(255), nullable=False, default=""),
    sa.Column("queue_position", sa.Float, nullable=False),
    sa.Column("submitted_at", sa.Float, nullable=False),
)

metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("trial_id", sa.Integer, nullable=False),
    sa.Column("trial_run_id", sa.Integer, nullable=False),
    sa.Column("mgroup", sa.String(64), nullable=False),
    sa.Column("steps_completed", sa.Integer, nullable=False),
    sa.Column("report_time", sa.Float, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
    # Chart level: the number of trailing zero bits of the report's ordinal in its trial and
    # group, so "lod >= L" keeps every 2**L-th report — downsampling through an index.
    sa.Column("lod", sa.SmallInteger, nullable=False, server_default="0"),
    # report_time as the REST API spells it (2026-11-24T10:02:13.615Z), written at ingestion:
    # formatting it in SQL for every point of a chart was a quarter of the query's cost.
    sa.Column("time_text", sa.Text, nullable=False, server_default=""),
    # Visible rows of a trial's group in step order: the history, dedupe and chart queries.
    sa.Index("ix_metrics_trial_group_step", "trial_id", "mgroup", "archived", "steps_completed"),
)

# Charts of long trials: only every 8th report is in it, so ingestion barely pays for it. On
# SQLite it also holds what a chart point needs (covering: no table lookups); PostgreSQL caps an
# index row at about 2.7 kB, which a report's body may exceed.
_chart_key = [metrics.c[name] for name in ("trial_id", "mgroup", "archived", "lod", "steps_completed")]
CHART_INDEXES = {
    "sqlite": sa.Index("ix_metrics_chart", *_chart_key, metrics.c.time_text, metrics.c.body,
                       sqlite_where=sa.text("lod >= 3")).ddl_if(dialect="sqlite"),
    "postgresql": sa.Index("ix_metrics_chart", *_chart_key,
                           postgresql_where=sa.text("lod >= 3")).ddl_if(dialect="postgresql"),
}

# Each metric's chart points, encoded at ingestion (store/metrics/_series.py), by blocks of
# a group's reports: the part of each point every metric shares, once per report (``heads``),
# and each metric's own part (``members``), newline-separated in arrival order, with their
# numbers. A chart of a whole history reads these few rows instead of every report's JSON,
# where they provably hold the answer. ``sampled`` repeats the lines of the block's reports at
# chart level 3 and up (every 8th ordinal): a downsampled chart of long trials reads those.
metric_series_steps = sa.Table(
    "metric_series_steps",
    metadata,
    sa.Column("trial_id", sa.Integer, nullable=False),
    sa.Column("mgroup", sa.String(64), nullable=False),
    sa.Column("block", sa.Integer, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    # Before the block's own lines: SQLite reaches a column past a long text through its
    # overflow pages (a database from before migration 8 has it last, read at that cost).
    sa.Column("sampled", sa.Text, nullable=False, server_default=""),
    sa.Column("heads", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("trial_id", "mgroup", "block"),
)
metric_series = sa.Table(
    "metric_series",
    metadata,
    sa.Column("trial_id", sa.Integer, nullable=False),
    sa.Column("mgroup", sa.String(64), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("block", sa.Integer, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("sampled", sa.Text, nullable=False, server_default=""),
    sa.Column("members", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("trial_id", "mgroup", "name", "block"),
)

CHART_INDEX_LOD = 3  # the lowest level the partial index ix_metrics_chart holds
MAX_LOD = 30  # 2**30 reports in one trial's group is beyond any run

checkpoints = sa.Table(
    "checkpoints",
    metadata,
    sa.Column("uuid", sa.String(64), primary_key=True),
    sa.Column("trial_id", sa.Integer, index=True),
    sa.Column("experiment_id", sa.Integer, index=True),
    sa.Column("task_id", sa.String(128)),
    sa.Column("allocation_id", sa.String(160)),
    sa.Column("report_time", sa.Float, nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("resources", JSON, nullable=False),
    sa.Column("ckpt_metadata", JSON, nullable=False),
    sa.Column("steps_completed", sa.Integer, nullable=False),
    sa.Column("storage_id", sa.Integer),
)

task_logs = sa.Table(
    "task_logs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(128), nullable=False),
    sa.Column("allocation_id", sa.String(160)),
    sa.Column("trial_id", sa.Integer),
    sa.Column("agent_id", sa.String(255)),
    sa.Column("seq", sa.Integer),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.Column("level", sa.String(32), nullable=False),
    sa.Column("stdtype", sa.String(16)),
    sa.Column("source", sa.String(32)),
    sa.Column("rank_id", sa.Integer),
    sa.Column("log", sa.Text, nullable=False),
    sa.Index("ix_task_logs_task", "task_id", "id"),
    sa.Index("ix_task_logs_trial", "trial_id", "id"),
)


# -- Migration 5: governance (groups, roles, models, templates) ----------------------------

user_groups = sa.Table(
    "user_groups",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    # Migration 18: a JupyterHub group of the same name; the hub sets its members.
    sa.Column("from_hub", sa.Boolean),
)

group_members = sa.Table(
    "group_members",
    metadata,
    sa.Column("group_id", sa.Integer, sa.ForeignKey("user_groups.id"), primary_key=True),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
)

# One role given to a user or a group, on one workspace or (workspace_id NULL) the cluster.
role_assignments = sa.Table(
    "role_assignments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("role", sa.String(64), nullable=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id")),
    sa.Column("group_id", sa.Integer, sa.ForeignKey("user_groups.id")),
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id")),
    sa.UniqueConstraint("role", "user_id", "group_id", "workspace_id"),
)

models = sa.Table(
    "models",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("labels", JSON, nullable=False),
    sa.Column("meta", JSON, nullable=False),
    sa.Column("notes", sa.Text, nullable=False, default=""),
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

model_versions = sa.Table(
    "model_versions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("model_id", sa.Integer, sa.ForeignKey("models.id"), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("checkpoint_uuid", sa.String(64), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False, default=""),
    sa.Column("comment", sa.Text, nullable=False, default=""),
    sa.Column("labels", JSON, nullable=False),
    sa.Column("meta", JSON, nullable=False),
    sa.Column("notes", sa.Text, nullable=False, default=""),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.UniqueConstraint("model_id", "version"),
)

templates = sa.Table(
    "templates",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("config", JSON, nullable=False),
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), nullable=False),
)

# A workspace a user pinned (Determined's pins are per user).
workspace_pins = sa.Table(
    "workspace_pins",
    metadata,
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), primary_key=True),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
    sa.Column("pinned_at", sa.Float, nullable=False),
)

GOVERNANCE_TABLES = (user_groups, group_members, role_assignments, models, model_versions, templates,
                     workspace_pins)

#: Tables whose ids users see or hold (in URLs, configs, tokens): on SQLite their ids are never
#: reused after a delete (``AUTOINCREMENT``), as PostgreSQL's sequences never reuse them; after
#: deleting experiment 14 the next one is 15, not 14 again. (Migration 10 rebuilds them so on an
#: older database.) Logs, metrics and events keep plain rowids: nobody holds their ids.
NEVER_REUSED = (users, user_sessions, workspaces, projects, checkpoint_storages, experiments, trials,
                user_groups, models, model_versions)
for _table in NEVER_REUSED:
    _table.dialect_options["sqlite"]["autoincrement"] = True
del _table

# Migration 11: webhooks (0.38.1's webhooks and webhook_triggers). ``url`` is sealed
# (services._sealed): a Slack URL is a credential. ``workspace_id`` NULL: a global webhook.
webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("webhook_type", sa.String(16), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id", ondelete="CASCADE")),
    sa.Column("created_at", sa.Float, nullable=False),
)
webhooks.dialect_options["sqlite"]["autoincrement"] = True  # ids users hold: never reused

webhook_triggers = sa.Table(
    "webhook_triggers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("webhook_id", sa.Integer, sa.ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False,
              index=True),
    sa.Column("trigger_type", sa.String(48), nullable=False),
    sa.Column("condition", JSON, nullable=False),
)

# A trigger that fires once per subject ("task:<id>" for a log pattern, "trial:<id>" for a
# metric threshold) has fired for it (0.38.1's webhook_task_log_triggers).
webhook_fired = sa.Table(
    "webhook_fired",
    metadata,
    sa.Column("trigger_id", sa.Integer, sa.ForeignKey("webhook_triggers.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("subject", sa.String(200), primary_key=True),
    sa.Column("fired_at", sa.Float, nullable=False),
)

WEBHOOK_TABLES = (webhooks, webhook_triggers, webhook_fired)

# Migration 14: 0.38.1's trial_source_infos: a trial (an inference or fine-tuning task) that
# used a checkpoint, or a model version's checkpoint (``core_context.experimental.
# report_task_using_checkpoint``); its metrics are the checkpoint's and the version's
# ``get_metrics()``. No foreign keys: a purged trial's row is skipped on read.
trial_source_infos = sa.Table(
    "trial_source_infos",
    metadata,
    sa.Column("trial_id", sa.Integer, primary_key=True),
    sa.Column("checkpoint_uuid", sa.String(64), primary_key=True),
    sa.Column("trial_source_info_type", sa.String(64), nullable=False),
    sa.Column("model_id", sa.Integer),
    sa.Column("model_version", sa.Integer),
    sa.Index("ix_trial_source_infos_checkpoint", "checkpoint_uuid"),
    sa.Index("ix_trial_source_infos_model_version", "model_id", "model_version"),
)

# Migration 15: 0.38.1's rp_workspace_bindings — a pool bound
# to workspaces serves only them — and its task_config_policies: one row per scope (workspace
# id, 0 for global) and workload type ("EXPERIMENT" or "NTSC").
pool_bindings = sa.Table(
    "pool_bindings",
    metadata,
    sa.Column("pool_name", sa.String(255), primary_key=True),
    sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True),
    sa.Index("ix_pool_bindings_workspace", "workspace_id"),
)

config_policies = sa.Table(
    "config_policies",
    metadata,
    sa.Column("workspace_id", sa.Integer, primary_key=True),
    sa.Column("workload_type", sa.String(16), primary_key=True),
    sa.Column("policy", JSON, nullable=False),
    sa.Column("updated_by", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
