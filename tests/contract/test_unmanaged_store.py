"""Unmanaged experiments and trials (``services.unmanaged``) on each backend: creation by
external ids, runs, the experiment following its trials, and trials whose process went away."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import Conflict, InvalidRequest
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.states import State
from det_jupyter.services.experiments.service import PreparedExperiment
from det_jupyter.services.experiments.unmanaged import UnmanagedService
from det_jupyter.store import tables as t

from ._rows import make_experiment, make_project, make_user

CONFIG = {"name": "nb", "labels": ["x"], "searcher": {"name": "single", "metric": "loss"},
          "checkpoint_storage": {"type": "directory", "container_path": "/tmp/nb"}}


class _Configs:
    """The trials' config cache the service reads after a rewind (``TrialService``'s)."""

    def experiment_config(self, conn: sa.Connection, exp_id: int) -> dict:
        return CONFIG

    def forget_configs(self) -> None:
        pass


class RecordingExperiments:
    """The ExperimentService hooks the service calls: state changes are recorded."""

    def __init__(self) -> None:
        self.trials = _Configs()
        self.states: list[tuple[int, str]] = []

    def on_change(self) -> None:
        pass

    def on_state(self, conn: sa.Connection, exp_id: int, state: str) -> None:
        self.states.append((exp_id, state))


class _User:
    def __init__(self, uid: int, project_id: int) -> None:
        self.id, self.project_id = uid, project_id


def _service(engine: sa.Engine, clock: FakeClock) -> tuple[UnmanagedService, RecordingExperiments, _User]:
    hooks = RecordingExperiments()
    uid = make_user(engine)
    return UnmanagedService(engine, clock, hooks), hooks, _User(uid, make_project(engine, uid))


def _row(engine: sa.Engine, table: sa.Table, row_id: int) -> sa.Row:
    with engine.connect() as conn:
        return conn.execute(sa.select(table).where(table.c.id == row_id)).one()


PREPARED = PreparedExperiment("name: nb\n", CONFIG, b"", None)


def test_put_by_external_ids_returns_the_same_experiment_and_trial(engine: sa.Engine, clock: FakeClock) -> None:
    svc, _, user = _service(engine, clock)
    exp_id, created = svc.put_experiment(user, PREPARED, user.project_id, "ext-1")
    assert created and svc.put_experiment(user, PREPARED, user.project_id, "ext-1") == (exp_id, False)
    exp = _row(engine, t.experiments, exp_id)
    assert (exp.state, exp.unmanaged, exp.external_experiment_id, exp.labels) == ("PAUSED", True, "ext-1", ["x"])
    other, created = svc.put_experiment(user, PREPARED, user.project_id, "ext-2")
    assert created and other != exp_id

    tid = svc.create_trial(exp_id, {"lr": 1}, "t-1")
    assert svc.create_trial(exp_id, {"lr": 2}, "t-1") == tid
    assert _row(engine, t.trials, tid).hparams == {"lr": 2}
    assert svc.create_trial(other, {}, "t-1") != tid  # external trial ids are per experiment
    assert svc.create_trial(exp_id, {}) not in (tid, None)  # no external id: always a new one
    assert _row(engine, t.trials, tid).state == "PAUSED"


def test_runs_and_the_experiment_following_its_trials(engine: sa.Engine, clock: FakeClock) -> None:
    svc, hooks, user = _service(engine, clock)
    exp_id = svc.create_experiment(user, PREPARED, user.project_id)
    tid = svc.create_trial(exp_id, {})
    first = svc.start_trial(tid, resume=False)
    assert (first.run_id, first.steps_completed, first.latest_checkpoint) == (1, 0, None)
    assert _row(engine, t.experiments, exp_id).state == "RUNNING"
    with pytest.raises(Conflict):
        svc.start_trial(tid, resume=False)
    with engine.begin() as conn:
        for uuid, steps, state in (("c-5", 5, "COMPLETED"), ("c-9", 9, "COMPLETED"), ("c-12", 12, "DELETED")):
            conn.execute(sa.insert(t.checkpoints).values(
                uuid=uuid, trial_id=tid, experiment_id=exp_id, report_time=clock.now(), state=state,
                resources={}, ckpt_metadata={"steps_completed": steps}, steps_completed=steps))
    clock.advance(10)
    svc.patch_trial(tid, State.COMPLETED)
    exp = _row(engine, t.experiments, exp_id)
    assert (exp.state, exp.progress, exp.end_time) == ("COMPLETED", 1.0, clock.now())

    second = svc.start_trial(tid, resume=True)
    assert (second.run_id, second.steps_completed, second.latest_checkpoint) == (2, 9, "c-9")
    exp = _row(engine, t.experiments, exp_id)
    assert (exp.state, exp.end_time) == ("RUNNING", None)
    svc.patch_trial(tid, State.ERROR)
    assert _row(engine, t.experiments, exp_id).state == "ERROR"
    assert [s for _, s in hooks.states] == ["RUNNING", "COMPLETED", "RUNNING", "ERROR"]

    # A managed experiment's trials are the cluster's.
    managed = make_experiment(engine, user.id, user.project_id)
    with pytest.raises(InvalidRequest, match="experimentId"):
        svc.create_trial(managed, {})


def test_a_trial_without_heartbeats_ends_in_error(engine: sa.Engine, clock: FakeClock) -> None:
    svc, _, user = _service(engine, clock)
    exp_id = svc.create_experiment(user, PREPARED, user.project_id)
    quiet, chatty = svc.create_trial(exp_id, {}), svc.create_trial(exp_id, {})
    svc.start_trial(quiet, resume=True)
    svc.start_trial(chatty, resume=True)
    started = clock.now()
    clock.advance(svc.LOST_AFTER_S - 1)
    svc.patch_trial(chatty, None)  # a heartbeat
    assert svc.mark_lost() == []
    clock.advance(2)
    assert svc.mark_lost() == [quiet]
    lost = _row(engine, t.trials, quiet)
    assert (lost.state, lost.end_time) == ("ERROR", started)
    assert _row(engine, t.experiments, exp_id).state == "RUNNING"  # chatty still runs
    clock.advance(svc.LOST_AFTER_S)
    assert svc.mark_lost() == [chatty]
    assert _row(engine, t.experiments, exp_id).state == "ERROR"


def test_cancel_ends_the_open_trials(engine: sa.Engine, clock: FakeClock) -> None:
    svc, _, user = _service(engine, clock)
    exp_id = svc.create_experiment(user, PREPARED, user.project_id)
    done, running, waiting = (svc.create_trial(exp_id, {}) for _ in range(3))
    svc.start_trial(done, resume=True)
    svc.patch_trial(done, State.COMPLETED)
    svc.start_trial(running, resume=True)
    svc.stop_experiment(exp_id)
    assert [_row(engine, t.trials, i).state for i in (done, running, waiting)] == ["COMPLETED", "CANCELED",
                                                                                   "CANCELED"]
    assert _row(engine, t.experiments, exp_id).state == "CANCELED"
    # Its trials' own ends: the most advanced one wins (0.38.1's roll-up).
    svc.start_trial(running, resume=True)
    svc.patch_trial(running, State.COMPLETED)
    assert _row(engine, t.experiments, exp_id).state == "COMPLETED"


def test_step_12_adds_the_columns_to_an_older_database(engine: sa.Engine) -> None:
    """A database of version 11: its experiments become managed ones, its trials have no
    external id, and the unique indexes are made."""
    from det_jupyter.store import _migrate, migrate

    from ._rows import make_world
    from .test_store_migrate import test_every_index_exists

    _, exp_id, trial_id = make_world(engine)
    with engine.begin() as conn:  # take the database back to version 11
        conn.execute(sa.text("DROP INDEX ix_experiments_external_id"))
        conn.execute(sa.text("DROP INDEX ix_trials_external_id"))
        for table, column in (("experiments", "unmanaged"), ("experiments", "external_experiment_id"),
                              ("trials", "external_trial_id"), ("trials", "last_activity")):
            conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 12))

    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    assert (_row(engine, t.experiments, exp_id).unmanaged, _row(engine, t.experiments, exp_id).external_experiment_id) \
        == (False, None)
    assert _row(engine, t.trials, trial_id).external_trial_id is None
    test_every_index_exists(engine)
