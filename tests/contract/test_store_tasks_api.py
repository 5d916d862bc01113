"""The task and job stores (``store.tasks``, ``store.jobs``) on each backend, without the
services: what each write stores and each read gives back."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.services.common.states import LIVE_ALLOC, AllocState
from det_jupyter.store import allocations as allocs
from det_jupyter.store import jobs, tasks

from ._rows import NOW, make_user, make_world

KINDS = ("NOTEBOOK", "SHELL")


def _task(conn: sa.Connection, task_id: str, owner_id: int, kind: str = "COMMAND", *,
          pool: str = "", slots: int = 1, priority: int = 42) -> None:
    job_id = f"job-{task_id}"
    jobs.insert_job(conn, job_id=job_id, job_type=kind, owner_id=owner_id, priority=priority, weight=1.0,
                    max_slots=None, resource_pool=pool, queue_position=NOW, submitted_at=NOW)
    tasks.insert(conn, task_id=task_id, job_id=job_id, owner_id=owner_id, description=f"{kind} {task_id}",
                 config={"entrypoint": "true", "idle_timeout": 60.0, "notebook_idle_type": "kernels"},
                 context=b"tgz" if kind == "COMMAND" else None, start_time=NOW + len(task_id),
                 task_type=kind, workspace_id=1)
    allocs.insert_pending(conn, allocation_id=f"{task_id}.1", task_id=task_id, trial_id=None, slots=slots,
                          priority=priority, resource_pool=pool, job_id=job_id, submitted_at=NOW)


def test_the_store_names_the_allocation_states_as_the_services_do() -> None:
    assert (allocs.PENDING, allocs.ASSIGNED, allocs.PULLING, allocs.RUNNING, allocs.TERMINATING,
            allocs.TERMINATED) == tuple(
        s.value for s in AllocState)
    assert allocs.LIVE_STATES == LIVE_ALLOC


def test_tasks_are_stored_listed_and_read_with_their_owner(engine: sa.Engine) -> None:
    alice, bob = make_user(engine, "alice"), make_user(engine, "bob")
    with engine.begin() as conn:
        _task(conn, "cmd-1", alice)
        _task(conn, "nb-22", bob, "NOTEBOOK")
    with engine.connect() as conn:
        row = tasks.get(conn, "cmd-1")
        assert row is not None and (row.username, row.task_type, row.alloc_state, row.allocation_id) == (
            "alice", "COMMAND", "PENDING", "cmd-1.1")
        assert tasks.get(conn, "nope") is None
        assert [r.task_id for r in tasks.listing(conn, ("COMMAND", "NOTEBOOK"))] == ["cmd-1", "nb-22"]
        assert [r.task_id for r in tasks.listing(conn, ("COMMAND", "NOTEBOOK"), bob)] == ["nb-22"]
        assert tasks.listing(conn, ("SHELL",)) == []
        assert tasks.context(conn, "cmd-1") == b"tgz" and tasks.context(conn, "nb-22") is None
        cmd, owner = tasks.with_owner(conn, "nb-22")
        assert (cmd.task_id, owner) == ("nb-22", "bob")


def test_a_proxied_task_is_running_once_it_has_an_address(engine: sa.Engine) -> None:
    alice = make_user(engine, "alice")
    with engine.begin() as conn:
        _task(conn, "nb-1", alice, "NOTEBOOK")
        tasks.set_proxy(conn, "nb-1", "10.0.0.1:29400", "sealed-token")
        assert tasks.running_proxied(conn, KINDS) == []  # still pending
        allocs.assign(conn, [{"alloc_id": "nb-1.1", "agent_id": "a", "slot_ids": [0], "placement": [["a", [0]]],
                              "token_hash": "h1", "start_time": NOW}])
        allocs.mark_running(conn, ["nb-1.1"])
    with engine.connect() as conn:
        (row,) = tasks.running_proxied(conn, KINDS)
    assert (row.task_id, row.proxy_address, row.proxy_token, row.allocation_id) == (
        "nb-1", "10.0.0.1:29400", "sealed-token", "nb-1.1")
    assert (row.idle_timeout, row.idle_type) == (60.0, "kernels")


def test_a_task_reports_its_own_proxy_address_while_its_allocation_lives(engine: sa.Engine) -> None:
    alice = make_user(engine, "alice")
    with engine.begin() as conn:
        _task(conn, "nb-1", alice, "NOTEBOOK")
        _task(conn, "cmd-1", alice)
        assert not tasks.set_proxy_address(conn, "nb-1", "nb-1.1", "10.9.9.9:2")  # no address yet
        tasks.set_proxy(conn, "nb-1", "10.0.0.1:29400", "sealed-token")
        assert not tasks.set_proxy_address(conn, "cmd-1", "cmd-1.1", "10.9.9.9:2")  # not proxied
        assert not tasks.set_proxy_address(conn, "nb-1", "cmd-1.1", "10.9.9.9:2")  # another's allocation
        assert tasks.set_proxy_address(conn, "nb-1", "nb-1.1", "10.244.0.7:29400")
        assert tasks.get(conn, "nb-1").proxy_address == "10.244.0.7:29400"
        allocs.terminate(conn, ["nb-1.1"], 0, "done", NOW + 9)
        assert not tasks.set_proxy_address(conn, "nb-1", "nb-1.1", "10.9.9.9:2")  # ended
        assert tasks.get(conn, "nb-1").proxy_address == "10.244.0.7:29400"
        assert tasks.get(conn, "cmd-1").proxy_address is None


def test_secrets_are_rewritten_and_an_end_keeps_the_first_reason(engine: sa.Engine) -> None:
    alice = make_user(engine, "alice")
    with engine.begin() as conn:
        _task(conn, "nb-1", alice, "NOTEBOOK")
        _task(conn, "cmd-1", alice)
        tasks.set_proxy(conn, "nb-1", "h:1", "plain")
        assert [(r.task_id, r.proxy_token) for r in tasks.secrets_of(conn, KINDS)] == [("nb-1", "plain")]
        tasks.rewrite_secrets(conn, {"nb-1": {"proxy_token": "sealed", "config": {"k": "v"}}})
        tasks.set_exit_reason(conn, "cmd-1", "culled as idle")
        tasks.ended(conn, "cmd-1", 137, NOW + 5, "killed")
        tasks.ended(conn, "nb-1", 0, NOW + 6, "exited")
    with engine.connect() as conn:
        nb, cmd = tasks.get(conn, "nb-1"), tasks.get(conn, "cmd-1")
    assert (nb.proxy_token, nb.config, nb.exit_reason, nb.exit_code) == ("sealed", {"k": "v"}, "exited", 0)
    assert (cmd.exit_reason, cmd.exit_code, cmd.end_time) == ("culled as idle", 137, NOW + 5)


def test_job_settings_edits_and_neighbours(engine: sa.Engine) -> None:
    alice = make_user(engine, "alice")
    with engine.begin() as conn:
        for i, task_id in enumerate(("cmd-a", "cmd-b", "cmd-c")):
            _task(conn, task_id, alice)
            jobs.update(conn, f"job-{task_id}", {"queue_position": NOW + i})
        _task(conn, "cmd-0", alice, slots=0)
        jobs.update(conn, "job-cmd-0", {"queue_position": NOW + 9, "priority": 7})
        jobs.move_pending(conn, "job-cmd-a", zero_slots=False, resource_pool="gpu")
        jobs.move_pending(conn, "job-cmd-a", zero_slots=True, resource_pool="aux")  # it has none of 0 slots
    with engine.connect() as conn:
        a, c = jobs.get(conn, "job-cmd-a"), jobs.get(conn, "job-cmd-c")
        assert jobs.get(conn, "nope") is None
        assert (a.priority, a.weight, a.queue_position) == (42, 1.0, NOW)
        assert jobs.neighbour_position(conn, 42, "job-cmd-a", c, ahead=True) == NOW + 1
        assert jobs.neighbour_position(conn, 42, "job-cmd-b", c, ahead=True) == NOW
        assert jobs.neighbour_position(conn, 42, "job-cmd-a", c, ahead=False) is None
        assert allocs.get(conn, "cmd-a.1").resource_pool == "gpu"
        assert jobs.get(conn, "job-cmd-0").priority == 7


def test_an_experiments_job_and_its_config(engine: sa.Engine) -> None:
    _, exp_id, _ = make_world(engine)
    with engine.connect() as conn:
        job_id = jobs.job_of_experiment(conn, exp_id)
        assert job_id is not None and jobs.job_of_experiment(conn, 10**6) is None
        exp = jobs.experiment_of_job(conn, job_id)
        assert exp is not None and exp.id == exp_id and jobs.experiment_of_job(conn, "nope") is None
    with engine.begin() as conn:
        jobs.set_experiment_config(conn, exp_id, {**exp.config, "resources": {"priority": 3}})
    with engine.connect() as conn:
        assert jobs.experiment_of_job(conn, job_id).config["resources"] == {"priority": 3}


def test_the_queue_sums(engine: sa.Engine) -> None:
    user_id, exp_id, trial_id = make_world(engine)
    alice = make_user(engine, "alice")
    with engine.begin() as conn:
        for n in (1, 2):
            allocs.insert_pending(conn, allocation_id=f"t.{n}", task_id="t", trial_id=trial_id, slots=2,
                                  priority=30, resource_pool="", job_id=None, submitted_at=NOW)
        allocs.assign(conn, [{"alloc_id": "t.1", "agent_id": "a", "slot_ids": [0, 1],
                              "placement": [["a", [0, 1]]], "token_hash": "h", "start_time": NOW}])
        _task(conn, "cmd-1", alice)
        _task(conn, "cmd-2", alice)
        allocs.terminate(conn, ["cmd-2.1"], 0, "done", NOW)
    with engine.connect() as conn:
        (h,) = jobs.experiment_holdings(conn)
        assert (h[0], h[2], h[3], h[4], h[7], h[8]) == (exp_id, "", 30, None, 4, 2)
        assert [tuple(r) for r in jobs.trial_sums(conn, [exp_id])] == [(exp_id, 1, 0.0)]
        (e,) = jobs.experiments_with_owner(conn, [exp_id])
        assert (e.id, e.owner_id, e.name) == (exp_id, user_id, "exp")
        (cmd,) = jobs.unfinished_tasks(conn)
        assert (cmd.task_id, cmd.username, cmd.state, cmd.slots, cmd.job_id) == (
            "cmd-1", "alice", "PENDING", 1, "job-cmd-1")
