"""Trial views on each backend: the views by id (one statement) and by experiment (a query per
part) show the same rows and the same live allocation states."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.services.experiments.views import Views
from det_jupyter.store import tables as t

from ._rows import NOW, make_experiment, make_trial, make_world


def _allocation(engine: sa.Engine, trial_id: int, n: int, state: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(t.allocations).values(
            allocation_id=f"a-{trial_id}-{n}", task_id=f"task-{trial_id}", trial_id=trial_id, state=state,
            slots=1, submitted_at=NOW))


def test_views_by_id_show_what_views_by_experiment_show(engine: sa.Engine) -> None:
    user, project, first = make_world(engine)
    exp = make_experiment(engine, user, project)
    quiet, busy, done = (make_trial(engine, exp) for _ in range(3))
    _allocation(engine, busy, 1, "RUNNING")
    _allocation(engine, busy, 2, "TERMINATING")
    _allocation(engine, busy, 3, "TERMINATED")
    _allocation(engine, done, 1, "TERMINATED")
    _allocation(engine, first, 1, "PENDING")
    views = Views(engine)
    by_exp = {v.row.id: v for v in views.trials(exp_id=exp)[0]}
    by_id, total = views.trials(trial_ids=[done, quiet, busy, first, 10**9], count=False)
    assert total == -1
    assert [v.row.id for v in by_id] == sorted([first, quiet, busy, done])  # an unknown id: absent
    states = {v.row.id: v.alloc_states for v in by_id}
    assert states == {first: {"PENDING"}, quiet: set(), busy: {"RUNNING", "TERMINATING"}, done: set()}
    for tid in (quiet, busy, done):
        assert states[tid] == by_exp[tid].alloc_states
        row, other = next(v.row for v in by_id if v.row.id == tid), by_exp[tid].row
        assert {k: getattr(row, k) for k in other._fields} == other._asdict()
    assert views.trial(busy).alloc_states == {"RUNNING", "TERMINATING"}
    assert views.trial(10**9) is None
    # With a chart's stored histories (PostgreSQL: the driver's own statement, pipelined with
    # the blocks): the same rows, field by field, and the same live states.
    with_history, histories = views.trials_with_history([done, quiet, busy, first, 10**9], "training", "loss")
    assert histories == {}
    assert [(tuple(v.row), v.row._fields, v.alloc_states) for v in with_history] == [
        (tuple(v.row), v.row._fields, v.alloc_states) for v in by_id]
