"""The experiment stores (``store.experiments``, ``store.trials``, ``store.unmanaged``,
``store.searcher_log``, ``store.templates``, ``store.views``, ``store.purge`` and
``store.metrics.delete_of_trials``) on each backend, without the services: what each write
stores and each read gives back."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from det_jupyter.store import experiments as exps
from det_jupyter.store import purge, templates, trials, unmanaged, views
from det_jupyter.store import searcher_log as slog
from det_jupyter.store import tables as t
from det_jupyter.store.metrics import Report, append, delete_of_trials, read_trial

from ._rows import NOW, make_trial, make_world

ENDED = ("COMPLETED", "CANCELED", "ERROR")
STOPPING = ("STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR")


def _allocation(engine: sa.Engine, trial_id: int, state: str, task_id: str = "task") -> str:
    alloc_id = f"{task_id}.{uuid.uuid4().hex[:6]}"
    with engine.begin() as conn:
        conn.execute(sa.insert(t.allocations).values(allocation_id=alloc_id, task_id=task_id, trial_id=trial_id,
                                                     state=state, slots=1, submitted_at=NOW))
    return alloc_id


def _checkpoint(conn: sa.Connection, uuid_: str, trial_id: int, exp_id: int, steps: int,
                state: str = "COMPLETED") -> None:
    conn.execute(sa.insert(t.checkpoints).values(
        uuid=uuid_, trial_id=trial_id, experiment_id=exp_id, task_id="task", allocation_id="a",
        report_time=NOW + steps, state=state, resources={"a.pt": "3"}, ckpt_metadata={}, steps_completed=steps))


def _report(engine: sa.Engine, trial_id: int, group: str, steps: int, loss: float) -> None:
    with engine.begin() as conn:
        trial = read_trial(conn, trial_id)
        assert trial is not None
        append(conn, trial, [Report(group, steps, {"loss": loss}, NOW + steps)], None)


def test_an_experiment_is_stored_read_and_updated(engine: sa.Engine) -> None:
    user_id, old_exp, _ = make_world(engine)
    with engine.begin() as conn:
        project = exps.get(conn, old_exp).project_id
        assert exps.project_exists(conn, project) and not exps.project_exists(conn, 10**6)
        exp_id = exps.insert(conn, state="PAUSED", name="new", labels=["a"], owner_id=user_id, project_id=project,
                             job_id="job-1", config={"searcher": {"name": "single"}}, original_config="x",
                             searcher_type="single", start_time=NOW)
        exps.insert_context(conn, exp_id, b"tgz")
        exps.insert_job(conn, job_id="job-1", job_type="EXPERIMENT", owner_id=user_id, queue_position=NOW,
                        submitted_at=NOW, priority=42, weight=1.0, resource_pool="")
        exps.update(conn, exp_id, state="ACTIVE", notes="n")
    with engine.connect() as conn:
        row = exps.get(conn, exp_id)
        assert row is not None and (row.name, row.state, row.notes, row.labels) == ("new", "ACTIVE", "n", ["a"])
        assert exps.get(conn, 10**6) is None and exps.id_and_state(conn, 10**6) is None
        assert tuple(exps.id_and_state(conn, exp_id)) == (exp_id, "ACTIVE")
        assert exps.context_tgz(conn, exp_id) == b"tgz" and exps.context_tgz(conn, old_exp) is None
        assert exps.state(conn, exp_id) == "ACTIVE"
        assert exps.states(conn, [exp_id, old_exp, 10**6]) == {exp_id: "ACTIVE", old_exp: "ACTIVE"}
        assert exps.config(conn, exp_id) == {"searcher": {"name": "single"}}
        assert conn.execute(sa.select(t.jobs.c.job_type).where(t.jobs.c.job_id == "job-1")).scalar() == "EXPERIMENT"
        assert set(exps.ids_not_in(conn, ENDED)) >= {exp_id, old_exp}
        assert exp_id not in exps.ids_not_in(conn, ("ACTIVE",))


def test_end_facts_ask_for_live_trials_only_when_it_matters(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    with engine.connect() as conn:
        (row,) = exps.end_facts(conn, [exp_id], ended=ENDED, stopping=STOPPING)
        assert (row.id, row.state, bool(row.searcher_shutdown), bool(row.live)) == (exp_id, "ACTIVE", False, False)
    with engine.begin() as conn:
        exps.update(conn, exp_id, state="STOPPING_CANCELED")
    with engine.connect() as conn:
        assert bool(exps.end_facts(conn, [exp_id], ended=ENDED, stopping=STOPPING)[0].live)
    with engine.begin() as conn:
        trials.update(conn, tid, state="CANCELED")
    with engine.connect() as conn:
        assert not exps.end_facts(conn, [exp_id], ended=ENDED, stopping=STOPPING)[0].live


def test_a_projects_experiments_by_ids_or_filters(engine: sa.Engine) -> None:
    user_id, exp_id, _ = make_world(engine)
    with engine.begin() as conn:
        project = exps.get(conn, exp_id).project_id
        other = exps.insert(conn, state="COMPLETED", name="100%_done", description="about x", labels=["l"],
                            owner_id=user_id, project_id=project, job_id="j2", config={}, original_config="",
                            searcher_type="single", start_time=NOW, archived=True)
    with engine.connect() as conn:
        assert [r.id for r in exps.of_project(conn, project, ids=[other, 10**6])] == [other]
        assert [r.id for r in exps.of_project(conn, project)] == [exp_id, other]
        assert [r.id for r in exps.of_project(conn, project, name="100%")] == [other]
        assert exps.of_project(conn, project, name="0%x") == []  # % is no wildcard
        assert [r.id for r in exps.of_project(conn, project, description="x", archived=True)] == [other]
        assert [r.id for r in exps.of_project(conn, project, states_=("ACTIVE",))] == [exp_id]
        assert [r.id for r in exps.of_project(conn, project, user_ids=(user_id,), excluded=(exp_id,))] == [other]
        assert exps.of_project(conn, project, ids=[other])[0].labels == ["l"]


def test_warm_start_checkpoints(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    with engine.begin() as conn:
        assert exps.latest_completed_checkpoint(conn, tid) is None
        _checkpoint(conn, "c-10", tid, exp_id, 10)
        _checkpoint(conn, "c-20", tid, exp_id, 20)
        _checkpoint(conn, "c-30", tid, exp_id, 30, state="DELETED")
    with engine.connect() as conn:
        assert exps.latest_completed_checkpoint(conn, tid) == "c-20"
        assert unmanaged.latest_completed(conn, tid).steps_completed == 20
        assert exps.completed_checkpoint(conn, "c-10") == "c-10"
        assert exps.completed_checkpoint(conn, "c-30") is None and exps.completed_checkpoint(conn, "x") is None


def test_trial_rows_runs_and_ends(engine: sa.Engine) -> None:
    _, exp_id, first = make_world(engine)
    with engine.begin() as conn:
        tid = trials.insert(conn, experiment_id=exp_id, request_id="r2", task_id=f"{exp_id}.r2", state="PAUSED",
                            hparams={"lr": 1}, seed=3, restarts=0, run_id=0, total_batches=0,
                            searcher_stopped=False, start_time=NOW, latest_checkpoint=None)
        assert trials.update(conn, tid, restarts=2) == 1 and trials.update(conn, 10**6, restarts=2) == 0
    with engine.connect() as conn:
        assert (trials.get(conn, tid).restarts, trials.state(conn, tid)) == (2, "PAUSED")
        assert [r.id for r in trials.of_experiment_in_state(conn, exp_id, "PAUSED")] == [tid]
        assert [r.id for r in trials.of_experiment_not_in(conn, exp_id, ("PAUSED",))] == [first]
        assert {r.id for r in trials.in_states_with_config(conn, ["ACTIVE", "PAUSED"])} >= {first, tid}
        assert trials.in_states_with_config(conn, ["PAUSED"])[0].config["searcher"]["metric"] == "loss"
        info = trials.request_info(conn, tid)
        assert (info.task_id, info.priority, info.resource_pool) == (f"{exp_id}.r2", None, None)
        facts = {r.id: r for r in trials.run_facts(conn, [first, tid])}
        assert facts[tid].exp_state == "ACTIVE" and facts[tid].username.startswith("owner-")
        assert trials.checkpoint_steps(conn, "nope") is None
    alloc = _allocation(engine, tid, "RUNNING")
    _allocation(engine, first, "TERMINATED")
    with engine.begin() as conn:
        assert trials.open_allocation(conn, tid, "TERMINATED") == alloc
        assert trials.open_allocation(conn, first, "TERMINATED") is None
        trials.start_runs(conn, [{"trial_id": tid, "run_id": 1, "steps": 5}, {"trial_id": first, "run_id": 4,
                                                                             "steps": 0}])
        trials.end(conn, [{"trial_id": first, "state": "COMPLETED", "end_time": NOW + 1}])
        trials.end(conn, {"trial_id": tid, "state": "ERROR", "end_time": NOW + 2})
    with engine.connect() as conn:
        assert (trials.get(conn, tid).run_id, trials.get(conn, tid).total_batches) == (1, 5)
        assert (trials.get(conn, first).state, trials.get(conn, first).end_time) == ("COMPLETED", NOW + 1)


def test_the_searchers_stop_applies_once(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    with engine.begin() as conn:
        request = trials.get(conn, tid).request_id
        unless = [*ENDED, *STOPPING]
        assert trials.searcher_stop(conn, exp_id, request, state_="STOPPING_COMPLETED", unless=unless) == tid
        assert trials.searcher_stop(conn, exp_id, request, state_="STOPPING_COMPLETED", unless=unless) is None
        assert trials.searcher_stop(conn, exp_id, "other", state_="STOPPING_COMPLETED", unless=unless) is None
        row = trials.get(conn, tid)
        assert (row.state, bool(row.searcher_stopped)) == ("STOPPING_COMPLETED", True)


def test_a_rewind_archives_what_a_run_reported_past_its_checkpoint(engine: sa.Engine) -> None:
    _, _, tid = make_world(engine)
    for steps in (10, 20, 30):
        _report(engine, tid, "training", steps, 1.0)
    with engine.begin() as conn:
        trials.archive_reports_after(conn, tid, 10)
    with engine.connect() as conn:
        visible = conn.execute(sa.select(t.metrics.c.steps_completed).where(
            t.metrics.c.trial_id == tid, t.metrics.c.archived.is_(False))).scalars().all()
        assert visible == [10]
        assert unmanaged.last_visible_step(conn, tid) == 10


def test_unmanaged_lookups_and_the_rewind_of_earlier_runs(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    with engine.begin() as conn:
        exps.update(conn, exp_id, unmanaged=True, external_experiment_id="ext-e")
        trials.update(conn, tid, external_trial_id="ext-t", run_id=2, state="RUNNING", last_activity=NOW)
    with engine.connect() as conn:
        assert unmanaged.experiment_by_external_id(conn, "ext-e") == exp_id
        assert unmanaged.experiment_by_external_id(conn, "nope") is None
        assert unmanaged.experiment_is_unmanaged(conn, exp_id) is True
        assert unmanaged.experiment_is_unmanaged(conn, 10**6) is None
        assert unmanaged.trial_by_external_id(conn, exp_id, "ext-t") == tid
        row = unmanaged.trial_with_kind(conn, tid)
        assert (row.run_id, row.state, row.experiment_id, bool(row.unmanaged)) == (2, "RUNNING", exp_id, True)
        assert unmanaged.trial_with_kind(conn, 10**6) is None
        assert unmanaged.trial_state(conn, tid) == "RUNNING" and unmanaged.trial_state(conn, 10**6) is None
        assert unmanaged.trial_is_unmanaged(conn, tid) and not unmanaged.trial_is_unmanaged(conn, 10**6)
        task = trials.get(conn, tid).task_id
        assert tuple(unmanaged.trial_of_task(conn, task)) == (tid, True)
        assert unmanaged.trial_of_task(conn, "nope") is None
        assert unmanaged.experiment_of_trial(conn, tid) == exp_id
        assert unmanaged.any_in_state(conn, "RUNNING") and not unmanaged.any_in_state(conn, "PULLING")
        assert [r.id for r in unmanaged.silent_since(conn, NOW + 1, "RUNNING")] == [tid]
        assert unmanaged.silent_since(conn, NOW - 1, "RUNNING") == []
    _report(engine, tid, "training", 10, 1.0)
    _report(engine, tid, "validation", 10, 1.0)
    _report(engine, tid, "training", 20, 1.0)
    with engine.begin() as conn:
        # run 2 reports training at step 10: earlier runs' training from 10 on and others past 10 go
        assert unmanaged.archive_earlier_runs(conn, tid, 3, "training", 10) == 2
        assert unmanaged.archive_earlier_runs(conn, tid, 3, "training", 10) == 0
        assert [(r.state, r.end_time) for r in unmanaged.states_of_experiment(conn, exp_id)] == [("RUNNING", None)]
        unmanaged.end_open_trials(conn, exp_id, "CANCELED", NOW + 5, ENDED)
        assert [(r.state, r.end_time) for r in unmanaged.states_of_experiment(conn, exp_id)] == [
            ("CANCELED", NOW + 5)]


def test_searcher_log_rows_snapshots_and_progress(engine: sa.Engine) -> None:
    _, exp_id, _ = make_world(engine)
    with engine.begin() as conn:
        assert slog.inputs(conn, exp_id).searcher_state is None
        slog.write(conn, [(exp_id, '{"kind":"start"}')], [(exp_id, 0.25)])
        slog.write(conn, [(exp_id, '[{"kind":"a"},{"kind":"b"}]')], [])
    with engine.connect() as conn:
        assert slog.payloads(conn, exp_id) == ['{"kind":"start"}', '[{"kind":"a"},{"kind":"b"}]']
        assert exps.get(conn, exp_id).progress == 0.25
    with engine.begin() as conn:
        slog.write(conn, [], [(exp_id, 0.5)])
        slog.snapshot(conn, exp_id, {"version": 2, "snapshot": {"x": 1}})
    with engine.connect() as conn:
        assert slog.payloads(conn, exp_id) == []
        assert slog.inputs(conn, exp_id).searcher_state == {"version": 2, "snapshot": {"x": 1}}
        assert exps.get(conn, exp_id).progress == 0.5


def test_templates(engine: sa.Engine) -> None:
    _, exp_id, _ = make_world(engine)
    with engine.begin() as conn:
        ws = conn.execute(sa.select(t.projects.c.workspace_id).where(
            t.projects.c.id == exps.get(conn, exp_id).project_id)).scalar_one()
        templates.insert(conn, "b_1", {"x": 1}, ws)
        templates.insert(conn, "A%2", {"y": 2}, ws)
        assert templates.exists(conn, "b_1") and not templates.exists(conn, "c")
        assert templates.update(conn, "b_1", config={"x": 3}) == 1 and templates.update(conn, "c", config={}) == 0
    with engine.connect() as conn:
        assert templates.get(conn, "b_1").config == {"x": 3} and templates.get(conn, "c") is None
        assert [r.name for r in templates.listed(conn)] == ["A%2", "b_1"]
        assert [r.name for r in templates.listed(conn, descending=True)] == ["b_1", "A%2"]
        assert [r.name for r in templates.listed(conn, name="a%")] == ["A%2"]
        assert [r.name for r in templates.listed(conn, name="_")] == ["b_1"]
        assert templates.listed(conn, workspace_ids={ws + 1}) == [] and templates.listed(conn, visible=frozenset()) == []
        assert len(templates.listed(conn, workspace_ids={ws}, visible=frozenset({ws}))) == 2
    with engine.begin() as conn:
        assert templates.update(conn, "A%2", name="c") == 1 and templates.get(conn, "c").config == {"y": 2}
        assert templates.delete(conn, "b_1") == 1 and templates.delete(conn, "b_1") == 0


def test_views_lists_and_live_states(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    other = make_trial(engine, exp_id)
    _allocation(engine, tid, "RUNNING")
    _allocation(engine, tid, "TERMINATED")
    _report(engine, tid, "validation", 10, 0.5)
    with engine.connect() as conn:
        rows, total = views.experiments(conn, ids=[exp_id])
        assert total == 1 and rows[0].username.startswith("owner-") and rows[0].workspace_name.startswith("ws-")
        assert views.experiments(conn, ids=[exp_id], workspace_ids=frozenset()) == ([], 0)
        assert [r.id for r in views.trial_summaries(conn, [exp_id])] == [tid, other]
        assert views.live_states_of_experiments(conn, [exp_id])[exp_id] == {"RUNNING"}
        by_id = views.trials_by_id(conn, [other, tid])
        assert [r.id for r in by_id] == [tid, other]
        assert [views.live_states_of(r) for r in by_id] == [{"RUNNING"}, set()]
        rows, total = views.trials(conn, experiment_id=exp_id, limit=1, descending=True)
        assert ([r.id for r in rows], total) == ([other], 2) and "report_counts" not in rows[0]._fields
        assert views.trials(conn, trial_ids=[tid], count=False)[1] == -1
        assert views.live_states(conn, [tid, other])[tid] == {"RUNNING"}
        assert views.live_states(conn, experiment_id=exp_id)[tid] == {"RUNNING"}
        assert [r.trial_id for r in views.validation_reports(conn, [tid])] == [tid]
        assert [r.steps_completed for r in views.validation_reports(conn, experiment_id=exp_id)] == [10]
        assert [r.trial_id for r in views.task_allocations(conn, "task")] == [tid, tid]
        task = by_id[0].task_id
        assert views.trial_task(conn, task).start_time == NOW and views.trial_task(conn, "x") is None
        assert views.command_task(conn, "x") is None
        rows, histories = views.trials_with_history(conn, [tid], "validation", "loss")
        assert [r.id for r in rows] == [tid] and set(histories) <= {tid}


def test_an_experiments_trials_sorted_and_counted(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    other = make_trial(engine, exp_id)
    with engine.begin() as conn:
        trials.update(conn, tid, restarts=3)
        trials.update(conn, other, state="COMPLETED", end_time=NOW + 9)
        _checkpoint(conn, "c-1", tid, exp_id, 1)
        _checkpoint(conn, "c-2", other, exp_id, 2, state="DELETED")
    with engine.connect() as conn:
        assert views.count_of_experiment(conn, exp_id) == 2
        assert views.count_of_experiment(conn, exp_id, ["COMPLETED"]) == 1
        assert {r.id for r in views.of_experiment(conn, exp_id)} == {tid, other}

        def page(sort_by: str, descending: bool = False, start: int = 0, count: int = 2) -> list[int]:
            return [r.id for r in views.of_experiment_sorted(
                conn, exp_id, None, sort_by=sort_by, descending=descending, smaller_is_better=True,
                now=NOW + 100, start=start, count=count)]

        assert page("SORT_BY_RESTARTS") == [other, tid]
        assert page("SORT_BY_END_TIME") == [other, tid]  # a missing end sorts largest
        assert page("SORT_BY_END_TIME", descending=True) == [tid, other]
        assert page("SORT_BY_ID", descending=True, start=1, count=1) == [tid]
        assert [tuple(r) for r in views.checkpoint_resources(conn, exp_id)] == [(tid, {"a.pt": "3"})]


def test_purge_finds_what_blocks_and_deletes_every_row(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    _, kept_exp, kept = make_world(engine)
    for trial in (tid, kept):
        _report(engine, trial, "training", 10, 1.0)
    alloc = _allocation(engine, tid, "RUNNING")
    with engine.begin() as conn:
        _checkpoint(conn, "c-1", tid, exp_id, 1)
        job_id = exps.get(conn, exp_id).job_id
        assert [tuple(r) for r in purge.not_in_states(conn, [exp_id, kept_exp], ["COMPLETED"])] == [
            (exp_id, "ACTIVE"), (kept_exp, "ACTIVE")]
        assert purge.with_allocation_not_in(conn, [exp_id], "TERMINATED") == exp_id
        conn.execute(sa.update(t.allocations).where(t.allocations.c.allocation_id == alloc).values(state="TERMINATED"))
        assert purge.with_allocation_not_in(conn, [exp_id], "TERMINATED") is None
        assert purge.registered_checkpoint(conn, [exp_id]) is None
        assert [(r.id, r.job_id) for r in purge.experiments(conn, [exp_id])] == [(exp_id, job_id)]
        assert [r.id for r in purge.trials(conn, [exp_id])] == [tid]
        assert [(r.uuid, r.config) for r in purge.checkpoints_with_storage(conn, [exp_id], [tid])] == [("c-1", None)]
        assert purge.checkpoints_with_storage(conn, [kept_exp], []) == []
        purge.delete_of_trials(conn, [tid])
        purge.delete_task_logs(conn, ["task"])
        purge.delete_experiments(conn, [exp_id], [job_id])
    with engine.connect() as conn:
        for table in (t.metrics, t.metric_series, t.metric_series_steps, t.allocations, t.checkpoints):
            assert set(conn.execute(sa.select(table.c.trial_id).distinct()).scalars()) <= {kept}
        assert exps.get(conn, exp_id) is None and exps.get(conn, kept_exp) is not None


def test_deleting_a_trials_metric_storage_keeps_the_others(engine: sa.Engine) -> None:
    _, _, tid = make_world(engine)
    _, _, kept = make_world(engine)
    for trial in (tid, kept):
        _report(engine, trial, "training", 10, 1.0)
    with engine.begin() as conn:
        delete_of_trials(conn, [tid])
    with engine.connect() as conn:
        for table in (t.metrics, t.metric_series, t.metric_series_steps):
            assert conn.execute(sa.select(table.c.trial_id).distinct()).scalars().all() in ([kept], [])
        assert conn.execute(sa.select(t.metrics.c.trial_id).distinct()).scalars().all() == [kept]
