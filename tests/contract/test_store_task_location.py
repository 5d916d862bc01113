"""``RbacService.workspace_of_task`` on both backends: where a task's permissions are checked.
An interactive task's workspace is its own for good, so it is looked up once; a trial task's is
its experiment's, and follows the project when it moves."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import NotFound
from det_jupyter.services.access.rbac import RbacService
from det_jupyter.store import tables as t
from tests.contract._rows import NOW, make_project, make_world


def _command(engine: sa.Engine, owner: int, task_id: str, workspace_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(t.jobs).values(
            job_id=f"job-{task_id}", job_type="NOTEBOOK", owner_id=owner, priority=42, weight=1.0,
            resource_pool="default", queue_position=NOW, submitted_at=NOW))
        conn.execute(sa.insert(t.commands).values(
            task_id=task_id, job_id=f"job-{task_id}", owner_id=owner, description=task_id,
            config={}, start_time=NOW, task_type="NOTEBOOK", proxy_token="tok", workspace_id=workspace_id))


class _Statements:
    """Counts the statements an engine runs (its option engines included)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine, self.seen = engine, []

    def _count(self, conn, cursor, statement, *args) -> None:  # noqa: ANN001 (SQLAlchemy's event)
        self.seen.append(statement)

    def __enter__(self) -> _Statements:
        sa.event.listen(self.engine, "before_cursor_execute", self._count)
        return self

    def __exit__(self, *exc: object) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._count)


def test_a_tasks_workspace_is_its_own_or_its_experiments(engine: sa.Engine) -> None:
    user, exp_id, trial_id = make_world(engine)
    with engine.connect() as conn:
        project_ws, trial_task = conn.execute(
            sa.select(t.projects.c.workspace_id, t.trials.c.task_id)
            .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
            .join(t.trials, t.trials.c.experiment_id == t.experiments.c.id)
            .where(t.trials.c.id == trial_id)).one()
    other_project = make_project(engine, user)
    with engine.connect() as conn:
        other_ws = conn.execute(sa.select(t.projects.c.workspace_id)
                                .where(t.projects.c.id == other_project)).scalar_one()
    _command(engine, user, "nb-1", other_ws)
    rbac = RbacService(engine)

    with _Statements(engine) as first:
        assert rbac.workspace_of_task("nb-1") == other_ws
    with _Statements(engine) as again:
        assert rbac.workspace_of_task("nb-1") == other_ws
    assert len(first.seen) == 1 and again.seen == []  # looked up once: it never changes
    assert rbac.workspace_of_task(trial_task) == project_ws

    # The experiment's project moves: the trial task follows it (the move invalidates).
    with engine.begin() as conn:
        project_id = conn.execute(sa.select(t.experiments.c.project_id)
                                  .where(t.experiments.c.id == exp_id)).scalar_one()
        conn.execute(sa.update(t.projects).where(t.projects.c.id == project_id)
                     .values(workspace_id=other_ws))
    rbac.invalidate()
    assert rbac.workspace_of_task(trial_task) == other_ws
    assert rbac.workspace_of_task("nb-1") == other_ws
    with pytest.raises(NotFound, match="task no-such-task not found"):
        rbac.workspace_of_task("no-such-task")
