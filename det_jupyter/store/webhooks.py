"""The webhook store: definitions (a webhook and its triggers), what has fired once per subject,
and the facts an event's payload reads.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows. URLs are stored as given (the service seals them);
which events reach which webhook is the service's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t

# -- definitions --------------------------------------------------------------------------


def name_taken(conn: sa.Connection, name: str, workspace_id: int | None) -> bool:
    """Whether the scope (a workspace's, or global: None) has a webhook named ``name``."""
    w = t.webhooks.c
    same = sa.select(w.id).where(w.name == name, w.workspace_id.is_(None) if workspace_id is None
                                 else w.workspace_id == workspace_id)
    return conn.execute(same).first() is not None


def insert(conn: sa.Connection, *, name: str, url: str, webhook_type: str, mode: str,
           workspace_id: int | None, created_at: float) -> int:
    """Store a webhook; its id."""
    return conn.execute(sa.insert(t.webhooks).values(
        name=name, url=url, webhook_type=webhook_type, mode=mode, workspace_id=workspace_id,
        created_at=created_at).returning(t.webhooks.c.id)).scalar_one()


def set_url(conn: sa.Connection, webhook_id: int, url: str) -> bool:
    """Replace the webhook's URL; whether it exists."""
    done = conn.execute(sa.update(t.webhooks).where(t.webhooks.c.id == webhook_id).values(url=url))
    return bool(done.rowcount)


def insert_triggers(conn: sa.Connection, webhook_id: int, triggers: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """Store the webhook's triggers: (type, condition) each."""
    conn.execute(sa.insert(t.webhook_triggers), [
        {"webhook_id": webhook_id, "trigger_type": k, "condition": c} for k, c in triggers])


def delete(conn: sa.Connection, webhook_id: int) -> bool:
    """Delete the webhook, its triggers and what they fired; whether it existed."""
    trig = sa.select(t.webhook_triggers.c.id).where(t.webhook_triggers.c.webhook_id == webhook_id)
    conn.execute(sa.delete(t.webhook_fired).where(t.webhook_fired.c.trigger_id.in_(trig)))
    conn.execute(sa.delete(t.webhook_triggers).where(t.webhook_triggers.c.webhook_id == webhook_id))
    return bool(conn.execute(sa.delete(t.webhooks).where(t.webhooks.c.id == webhook_id)).rowcount)


def load(conn: sa.Connection, webhook_id: int | None = None) -> tuple[Sequence[sa.Row], Sequence[sa.Row]]:
    """The webhooks' rows (one: ``webhook_id``; None: all) and their triggers' rows, each by id."""
    w, tr = t.webhooks.c, t.webhook_triggers.c
    hooks_q = sa.select(t.webhooks).order_by(w.id)
    trig_q = sa.select(t.webhook_triggers).order_by(tr.id)
    if webhook_id is not None:
        hooks_q = hooks_q.where(w.id == webhook_id)
        trig_q = trig_q.where(tr.webhook_id == webhook_id)
    return conn.execute(hooks_q).all(), conn.execute(trig_q).all()


# -- once per subject ---------------------------------------------------------------------


def fire_once(conn: sa.Connection, trigger_id: int, subject: str, fired_at: float) -> bool:
    """Record that a once-per-subject trigger fired; False when it already had, or the trigger
    is gone."""
    f = t.webhook_fired.c
    if conn.execute(sa.select(f.trigger_id).where(f.trigger_id == trigger_id, f.subject == subject)).first():
        return False
    if conn.execute(sa.select(t.webhook_triggers.c.id).where(t.webhook_triggers.c.id == trigger_id)).first() is None:
        return False  # deleted meanwhile
    conn.execute(sa.insert(t.webhook_fired).values(trigger_id=trigger_id, subject=subject, fired_at=fired_at))
    return True


# -- what payloads read -------------------------------------------------------------------


def experiment(conn: sa.Connection, exp_id: int) -> sa.Row | None:
    """The experiment's ``id``, ``start_time``, ``config``, ``project`` (name), ``ws_id`` and
    ``ws`` (its workspace's id and name); None: no such experiment."""
    e, p, w = t.experiments.c, t.projects.c, t.workspaces.c
    return conn.execute(
        sa.select(e.id, e.start_time, e.config, p.name.label("project"), w.id.label("ws_id"),
                  w.name.label("ws"))
        .join(t.projects, p.id == e.project_id).join(t.workspaces, w.id == p.workspace_id)
        .where(e.id == exp_id)).first()


def experiment_state(conn: sa.Connection, exp_id: int) -> str | None:
    return conn.execute(sa.select(t.experiments.c.state).where(t.experiments.c.id == exp_id)).scalar()


def experiment_of_trial(conn: sa.Connection, trial_id: int) -> int | None:
    return conn.execute(sa.select(t.trials.c.experiment_id).where(t.trials.c.id == trial_id)).scalar()


def task_scope(conn: sa.Connection, task_id: str) -> sa.Row | None:
    """A command's (or proxied task's) ``workspace_id`` and ``task_type``; None: none of that id."""
    c = t.commands.c
    return conn.execute(sa.select(c.workspace_id, c.task_type).where(c.task_id == task_id)).first()
