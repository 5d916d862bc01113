"""The allocation and task log stores (``store.allocations``, ``store.logs``) on each backend,
without the services: what each write stores and each read gives back."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import allocations as allocs
from det_jupyter.store import jobs, logs
from det_jupyter.store.logs import LogFilter

from ._rows import NOW, make_world


def _pending(conn: sa.Connection, allocation_id: str, trial_id: int | None = None, job_id: str | None = None) -> None:
    allocs.insert_pending(conn, allocation_id=allocation_id, task_id=allocation_id.split(".")[0],
                          trial_id=trial_id, slots=1, priority=42, resource_pool="default", job_id=job_id,
                          submitted_at=NOW)


def _placement(allocation_id: str, token_hash: str, agent: str = "a") -> dict:
    return {"alloc_id": allocation_id, "agent_id": agent, "slot_ids": [0], "placement": [[agent, [0]]],
            "token_hash": token_hash, "start_time": NOW + 1}


def test_requests_and_their_jobs(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        jobs.insert_job(conn, job_id="j", job_type="COMMAND", owner_id=1, priority=5, weight=2.0, max_slots=3,
                        resource_pool="", queue_position=NOW, submitted_at=NOW)
        _pending(conn, "t.1", job_id="j")
        _pending(conn, "t.2")
        assert allocs.count_of_task(conn, "t") == 2 and allocs.count_of_task(conn, "u") == 0
        assert tuple(allocs.job_settings(conn, "j")) == (5, 2.0, 3, NOW)
        assert allocs.job_settings(conn, "nope") is None
    with engine.connect() as conn:
        assert [r.allocation_id for r in allocs.pending(conn)] == ["t.1", "t.2"]
        row = allocs.get(conn, "t.1")
        assert row is not None and (row.state, row.run_id, row.preempt_requested) == ("PENDING", 0, False)
        assert allocs.get(conn, "nope") is None
        assert allocs.task_active(conn, "t") and not allocs.task_active(conn, "u")
        (viewed,) = [r for r in allocs.view_rows(conn, ["PENDING"]) if r.allocation_id == "t.1"]
        assert (viewed.job_priority, viewed.weight, viewed.max_slots) == (5, 2.0, 3)


def test_a_placement_carries_the_trials_next_run_and_is_read_back_by_token(engine: sa.Engine) -> None:
    _, _, trial_id = make_world(engine)  # on run 1
    with engine.begin() as conn:
        _pending(conn, "t.1", trial_id=trial_id)
        _pending(conn, "c.1")
        allocs.assign(conn, [_placement("t.1", "h1"), _placement("c.1", "h2", "b"), _placement("gone.1", "h3")])
        rows = {r.allocation_id: r for r in allocs.assigned_by_token(conn, ["h1", "h2", "h3"])}
        assert set(rows) == {"t.1", "c.1"}
        assert (rows["t.1"].state, rows["t.1"].run_id, rows["t.1"].placement) == ("ASSIGNED", 2, [["a", [0]]])
        assert rows["c.1"].run_id == 0 and rows["c.1"].agent_id == "b"
        allocs.assign(conn, [_placement("t.1", "h9")])  # no longer pending: nothing changes
        assert allocs.assigned_by_token(conn, ["h9"]) == []
        allocs.mark_running(conn, ["t.1", "nope"])
    with engine.connect() as conn:
        assert {r.allocation_id for r in allocs.live(conn)} == {"t.1", "c.1"}
        assert allocs.get(conn, "t.1").state == "RUNNING"
        principal = allocs.principal(conn, "h1")
        assert principal is not None and (principal.task_id, principal.trial_id) == ("t", trial_id)
        assert principal.username is not None and principal.owner_id == principal.id
        orphan = allocs.principal(conn, "h2")  # a task without an owner row
        assert orphan is not None and orphan.owner_id is None and orphan.id is None
        assert allocs.principal(conn, "nope") is None


def test_stopping_killing_and_ending(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for a in ("a.1", "b.1", "c.1", "p.1"):
            _pending(conn, a)
        allocs.assign(conn, [_placement(a, f"h-{a}") for a in ("a.1", "b.1", "c.1")])
        assert allocs.ask_to_stop(conn, "a.1") and not allocs.ask_to_stop(conn, "p.1")
        assert allocs.ack_preemption(conn, "a.1") and not allocs.ack_preemption(conn, "nope")
        killed = allocs.terminate_started(conn, "b.1")
        assert killed is not None and killed.state == "TERMINATING"
        assert allocs.terminate_started(conn, "p.1") is None
        ended = allocs.terminate(conn, ["a.1", "b.1", "p.1"], 1, "failed", NOW + 9)
        assert {r.allocation_id for r in ended} == {"a.1", "b.1", "p.1"}
        assert all((r.state, r.exit_code, r.exit_reason, r.token_hash) == ("TERMINATED", 1, "failed", None)
                   for r in ended)
        assert allocs.terminate(conn, ["a.1"], 0, "again", NOW + 10) == []
        assert not allocs.ack_preemption(conn, "a.1")
    with engine.begin() as conn:
        assert [r.allocation_id for r in allocs.unfinished(conn)] == ["c.1"]
        allocs.end_after_restart(conn, "c.1", NOW + 11)
    with engine.connect() as conn:
        row = allocs.get(conn, "c.1")
        assert (row.state, row.exit_reason, row.token_hash, row.end_time) == (
            "TERMINATED", "the master restarted", None, NOW + 11)
        assert allocs.unfinished(conn) == [] and allocs.live(conn) == []


def _line(seq: int | None, text: str, **over: object) -> dict:
    return {"task_id": "t", "allocation_id": "t.1", "trial_id": None, "agent_id": "a", "seq": seq,
            "timestamp": NOW + (seq or 0), "level": "INFO", "stdtype": "stdout", "source": "task",
            "rank_id": 0, "log": text, **over}


def test_log_lines_are_stored_in_order_and_filtered(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        assert logs.last_seq(conn, "t.1", "a") == -1 and logs.max_id(conn) == 0
        logs.insert(conn, [_line(0, "hello 50%_done\n"), _line(1, "oops\n", level="ERROR", stdtype="stderr"),
                           _line(None, "from the master\n", agent_id=None, source="master", task_id="u")])
    with engine.connect() as conn:
        assert logs.last_seq(conn, "t.1", "a") == 1 and logs.last_seq(conn, "t.1", "b") == -1
        top = logs.max_id(conn)
        every = logs.query(conn)
        assert [r.log for r in every] == ["hello 50%_done\n", "oops\n", "from the master\n"]
        assert [r.log for r in logs.query(conn, task_id="t", descending=True)] == ["oops\n", "hello 50%_done\n"]
        assert [r.log for r in logs.query(conn, where=LogFilter(levels=("ERROR",)))] == ["oops\n"]
        assert [r.log for r in logs.query(conn, where=LogFilter(search_text="50%_"))] == ["hello 50%_done\n"]
        assert [r.log for r in logs.query(conn, where=LogFilter(sources=("master",)))] == ["from the master\n"]
        assert [r.log for r in logs.query(conn, after_id=every[0].id, limit=1)] == ["oops\n"]
        assert [r.log for r in logs.query(conn, where=LogFilter(after=NOW, before=NOW + 2))] == ["oops\n"]
        assert [(r.id, r.task_id) for r in logs.lines_after(conn, every[0].id, 1)] == [(every[1].id, "t")]
        assert logs.lines_after(conn, top, 10) == []
